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
//! connection table by its maximum, two frame buffers. Frames longer than 64 KiB
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
/// Frames read from one interface before the other gets its turn.
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
    buf: Vec<u8>,
    reply: Vec<u8>,
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
            buf: vec![0; ETH_HLEN + 65_536],
            reply: vec![0; ETH_HLEN + 576],
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

    /// Handles up to [`BATCH`] frames waiting on `side`.
    fn drain(&mut self, side: usize) -> Result<(), Error> {
        for _ in 0..BATCH {
            let n = match self.ports[side].recv(&mut self.buf) {
                Ok(Some(n)) => n,
                Ok(None) => return Ok(()),
                Err(source) => {
                    return Err(Error::Socket {
                        what: "recv",
                        interface: self.ports[side].name.clone(),
                        source,
                    })
                }
            };
            self.counters.received[side] += 1;
            self.frame(side, n);
        }
        Ok(())
    }

    /// Decides one frame of `n` bytes (in `buf`) from `side` and sends what is due.
    fn frame(&mut self, side: usize, n: usize) {
        if n < ETH_HLEN || n > self.buf.len() {
            self.counters.malformed += 1;
            return;
        }
        let out = 1 - side;
        match u16::from_be_bytes([self.buf[12], self.buf[13]]) {
            ETHERTYPE_ARP => {
                self.counters.arp += 1;
                self.send(out, n, false);
            }
            ETHERTYPE_IPV4 => {
                let outcome = self.fw.handle_packet(
                    now(),
                    Hook::Forward,
                    self.ids[side],
                    self.ids[out],
                    &self.buf[ETH_HLEN..n],
                    &mut self.reply[ETH_HLEN..],
                );
                match outcome {
                    Outcome::Accept => self.send(out, n, false),
                    Outcome::Drop => {}
                    Outcome::Reject(r) => {
                        let (dst, src) = (&self.buf[6..12], &self.buf[0..6]);
                        self.reply[0..6].copy_from_slice(dst);
                        self.reply[6..12].copy_from_slice(src);
                        self.reply[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
                        self.send(side, ETH_HLEN + r, true);
                    }
                }
            }
            _ => self.counters.other += 1,
        }
    }

    fn send(&mut self, side: usize, n: usize, reply: bool) {
        let frame = if reply {
            &self.reply[..n]
        } else {
            &self.buf[..n]
        };
        match self.ports[side].send(frame) {
            Ok(()) if !reply => self.counters.forwarded += 1,
            Ok(()) => {}
            Err(_) => self.counters.send_errors += 1,
        }
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
