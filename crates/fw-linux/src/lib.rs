//! The firewall network function as a Linux process (`vtnt fw run`): `vtnt-fw`'s
//! [`Firewall`] between two interfaces, a thin driver over the sans-IO engine.
//!
//! The NF is a **bump in the wire** (a filtering bridge, `vtnt_fw::Bridge`, which decides
//! what crosses: IPv4 classified at the FORWARD hook, ARP both ways, nothing else); each
//! interface has an AF_PACKET socket ([`port`]) and this driver only moves frames. The
//! NF has no IP stack to mind; interfaces named in rules (`-i`, `-o`) are the two the NF
//! runs on.
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

use vtnt_fw::{Bridge, BridgeStats, Firewall, FirewallStats, BRIDGE_BATCH as BATCH};
use vtnt_record::Instant;

pub use port::Port;

const ETH_HLEN: usize = 14;
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

/// The network function on two interfaces.
#[derive(Debug)]
pub struct Nf {
    bridge: Bridge,
    ports: [Port; 2],
    /// [`BATCH`] receive buffers of [`FRAME`] bytes, one after the other, and the
    /// lengths of the frames in them.
    rx: Vec<u8>,
    lens: [usize; BATCH],
}

/// The longest frame taken: an Ethernet header and the largest IPv4 datagram.
const FRAME: usize = ETH_HLEN + 65_536;

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
    pub fn open(fw: Firewall, a: &str, b: &str) -> Result<Nf, Error> {
        if a == b {
            return Err(Error::SameInterface(a.into()));
        }
        let ports = [Port::open(a)?, Port::open(b)?];
        Ok(Nf {
            bridge: Bridge::new(fw, [a, b]),
            ports,
            rx: vec![0; BATCH * FRAME],
            lens: [0; BATCH],
        })
    }

    /// Forwards until `stop` is set (checked at least every 100 ms).
    pub fn run(&mut self, stop: &AtomicBool) -> Result<(), Error> {
        let fds = [self.ports[0].fd(), self.ports[1].fd()];
        while !stop.load(Ordering::Relaxed) {
            let t = now();
            let wait = match self.bridge.poll_timeout() {
                Some(d) if d <= t => {
                    self.bridge.handle_timeout(t);
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
    /// the bridge's decision on the batch, one system call for what goes on and one for
    /// the REJECT replies.
    fn drain(&mut self, side: usize) -> Result<(), Error> {
        let Nf {
            bridge,
            ports,
            rx,
            lens,
        } = self;
        let n = ports[side]
            .recv_many(rx, FRAME, lens)
            .map_err(|source| Error::Socket {
                what: "recvmmsg",
                interface: ports[side].name.clone(),
                source,
            })?;
        let mut frames: Vec<&[u8]> = Vec::with_capacity(n);
        for (i, &len) in lens.iter().enumerate().take(n) {
            if len <= FRAME {
                frames.push(&rx[i * FRAME..i * FRAME + len]);
            }
        }
        bridge.oversize(side, (n - frames.len()) as u64);
        bridge.forward(now(), side, &frames, |to, f| ports[to].send_many(f));
        Ok(())
    }

    /// What the NF counted ([`BridgeStats`]), beside [`Nf::firewall_stats`].
    pub fn counters(&self) -> BridgeStats {
        self.bridge.stats()
    }

    pub fn firewall_stats(&self) -> FirewallStats {
        self.bridge.firewall().stats()
    }

    pub fn interfaces(&self) -> [&str; 2] {
        [&self.ports[0].name, &self.ports[1].name]
    }
}
