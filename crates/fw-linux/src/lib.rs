//! The firewall network function as a Linux process (`vtnt fw run`): `vtnt-fw`'s
//! [`Firewall`] between two interfaces, a thin driver over the sans-IO engine.
//!
//! The NF is a **bump in the wire** (a filtering bridge): each interface has an
//! AF_PACKET socket ([`port`]); an IPv4 frame from one is classified at the FORWARD hook
//! with that interface in and the other out, and an accepted frame leaves by the other
//! interface unchanged, Ethernet header and TTL included. ARP passes both ways (the hosts
//! on either side find each other through the NF as through a switch); every other
//! ethertype (IPv6, VLAN tags, ...) is dropped and counted, so nothing crosses
//! unclassified. A REJECT's reply leaves by the interface the packet came in by, from the
//! packet's destination MAC to its source. A bridge needs no addresses, routes or ARP of
//! its own, so the NF has no IP stack to mind; interfaces named in rules (`-i`, `-o`) are
//! the two the NF runs on.
//!
//! The rules are loaded and compiled (all or nothing) before a socket opens, so no packet
//! crosses before the rules hold. Memory is bounded: the rules by `--max-bytes`, the
//! connection table by its maximum, a batch of frame buffers. Frames longer than 64 KiB
//! (the largest IPv4 datagram) are dropped and counted. The interfaces should have
//! segmentation and checksum offloads off (`ethtool -K IF tso off gso off gro off tx
//! off`; docs/fw.md): a socket sees what the kernel hands it, and a 64 KiB TSO super-frame
//! or a frame whose checksum the NIC was to fill in cannot be sent on as it is.

mod port;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use vtnt_fw::{Firewall, FirewallStats, Hook, IfId, Outcome};
use vtnt_record::Instant;

pub use port::Port;

const ETH_HLEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
/// Frames read with one system call, before the other interface gets its turn.
const BATCH: usize = 64;
/// The longest wait for a frame while no connection is due to expire (ms): how soon a
/// stop request is seen.
const IDLE_MS: i32 = 100;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("interface {0} does not exist in this network namespace")]
    NoInterface(String),
    #[error("the NF needs two different interfaces, got {0} twice")]
    SameInterface(String),
    #[error("{what} on {interface}: {source}")]
    Socket {
        what: &'static str,
        interface: String,
        source: io::Error,
    },
}

/// What the driver counted, beside the firewall's own [`FirewallStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames read from each interface (in the order given).
    pub received: [u64; 2],
    /// Frames sent on (accepted IPv4 and ARP).
    pub forwarded: u64,
    pub arp: u64,
    /// Frames neither IPv4 nor ARP, dropped.
    pub other: u64,
    /// Frames longer than the buffer or shorter than an Ethernet header, dropped.
    pub malformed: u64,
    /// Sends the kernel refused (a full queue, an interface gone down).
    pub send_errors: u64,
}

/// The network function on two interfaces.
#[derive(Debug)]
pub struct Nf {
    fw: Firewall,
    ports: [Port; 2],
    ids: [IfId; 2],
    counters: Counters,
    /// [`BATCH`] receive buffers of [`FRAME`] bytes, one after the other, and the
    /// lengths of the frames in them.
    rx: Vec<u8>,
    lens: [usize; BATCH],
    replies: Vec<Reply>,
    outcomes: Vec<Outcome>,
}

/// The longest frame taken: an Ethernet header and the largest IPv4 datagram.
const FRAME: usize = ETH_HLEN + 65_536;

/// A REJECT's reply frame; the firewall writes the datagram after the Ethernet header.
#[derive(Debug, Clone)]
struct Reply([u8; ETH_HLEN + 576]);

impl AsMut<[u8]> for Reply {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.0[ETH_HLEN..]
    }
}

/// What the driver does with a frame of a batch.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Arp,
    /// The nth IPv4 datagram of the batch, for the firewall.
    Ipv4(usize),
    /// Dropped and counted already.
    Neither,
}

fn now() -> Instant {
    // SAFETY: timespec is plain data, written by clock_gettime.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `t` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    Instant::from_micros(t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1000)
}

impl Nf {
    /// Opens the two interfaces (in the calling thread's namespace) for `fw`, whose
    /// rules are already compiled.
    pub fn open(mut fw: Firewall, a: &str, b: &str) -> Result<Nf, Error> {
        if a == b {
            return Err(Error::SameInterface(a.into()));
        }
        let ports = [Port::open(a)?, Port::open(b)?];
        let ids = [fw.add_interface(a, None), fw.add_interface(b, None)];
        Ok(Nf {
            fw,
            ports,
            ids,
            counters: Counters::default(),
            rx: vec![0; BATCH * FRAME],
            lens: [0; BATCH],
            replies: vec![Reply([0; ETH_HLEN + 576]); BATCH],
            outcomes: vec![Outcome::Drop; BATCH],
        })
    }

    /// Forwards until `stop` is set (checked at least every 100 ms).
    pub fn run(&mut self, stop: &AtomicBool) -> Result<(), Error> {
        let fds = [self.ports[0].fd(), self.ports[1].fd()];
        while !stop.load(Ordering::Relaxed) {
            let t = now();
            let wait = match self.fw.poll_timeout() {
                Some(d) if d <= t => {
                    self.fw.handle_timeout(t);
                    continue;
                }
                Some(d) => ((d.as_micros() - t.as_micros()) / 1000 + 1).min(IDLE_MS as u64) as i32,
                None => IDLE_MS,
            };
            let ready = port::poll(fds, wait).map_err(|source| Error::Socket {
                what: "poll",
                interface: self.ports[0].name.clone(),
                source,
            })?;
            for (side, ready) in ready.into_iter().enumerate() {
                if ready {
                    self.drain(side)?;
                }
            }
        }
        Ok(())
    }

    /// Handles up to [`BATCH`] frames waiting on `side`: one system call to read them,
    /// the IPv4 ones decided together ([`Firewall::handle_batch`]), one system call for
    /// what goes on and one for the REJECT replies.
    fn drain(&mut self, side: usize) -> Result<(), Error> {
        let Nf {
            fw,
            ports,
            ids,
            counters,
            rx,
            lens,
            replies,
            outcomes,
        } = self;
        let n = ports[side]
            .recv_many(rx, FRAME, lens)
            .map_err(|source| Error::Socket {
                what: "recvmmsg",
                interface: ports[side].name.clone(),
                source,
            })?;
        counters.received[side] += n as u64;
        let out = 1 - side;
        let frame = |i: usize| &rx[i * FRAME..i * FRAME + lens[i]];
        // What each frame is: forwarded as it is (ARP), the nth IPv4 datagram, neither.
        let mut kinds = [Kind::Neither; BATCH];
        let mut datagrams: Vec<&[u8]> = Vec::with_capacity(n);
        for (i, kind) in kinds.iter_mut().enumerate().take(n) {
            if lens[i] < ETH_HLEN || lens[i] > FRAME {
                counters.malformed += 1;
                continue;
            }
            let f = frame(i);
            match u16::from_be_bytes([f[12], f[13]]) {
                ETHERTYPE_ARP => {
                    counters.arp += 1;
                    *kind = Kind::Arp;
                }
                ETHERTYPE_IPV4 => {
                    *kind = Kind::Ipv4(datagrams.len());
                    datagrams.push(&f[ETH_HLEN..]);
                }
                _ => counters.other += 1,
            }
        }
        let m = datagrams.len();
        fw.handle_batch(
            now(),
            Hook::Forward,
            (ids[side], ids[out]),
            &datagrams,
            &mut replies[..m],
            &mut outcomes[..m],
        );
        // A reply goes back from the packet's destination MAC to its source.
        for (i, kind) in kinds.iter().enumerate().take(n) {
            if let Kind::Ipv4(j) = *kind {
                if let Outcome::Reject(_) = outcomes[j] {
                    let (f, r) = (frame(i), &mut replies[j].0);
                    r[0..6].copy_from_slice(&f[6..12]);
                    r[6..12].copy_from_slice(&f[0..6]);
                    r[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
                }
            }
        }
        let (mut on, mut back): (Vec<&[u8]>, Vec<&[u8]>) = (Vec::new(), Vec::new());
        for (i, kind) in kinds.iter().enumerate().take(n) {
            match *kind {
                Kind::Arp => on.push(frame(i)),
                Kind::Ipv4(j) => match outcomes[j] {
                    Outcome::Accept => on.push(frame(i)),
                    Outcome::Reject(r) => back.push(&replies[j].0[..ETH_HLEN + r]),
                    Outcome::Drop => {}
                },
                Kind::Neither => {}
            }
        }
        let refused = ports[out].send_many(&on);
        counters.forwarded += (on.len() - refused) as u64;
        counters.send_errors += (refused + ports[side].send_many(&back)) as u64;
        Ok(())
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    pub fn firewall_stats(&self) -> FirewallStats {
        self.fw.stats()
    }

    pub fn interfaces(&self) -> [&str; 2] {
        [&self.ports[0].name, &self.ports[1].name]
    }
}
