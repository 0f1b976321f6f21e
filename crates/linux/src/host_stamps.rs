//! Host-side stamps of a runtime's traffic for RTT correction (`vtnt-mace`,
//! docs/rtt-correction.md), without a kernel module: a [`Ring`] on the device where the
//! runtime's packets cross to the network keeps every IP packet crossing it with the
//! kernel's stamp (ARP and anything else not IP is left out). [`Side`] says which way
//! is which: on the host's end of a runtime's veth the probes arrive and the replies
//! leave (the host sends them into the veth, `PACKET_OUTGOING`); on the device of the
//! namespace the runtime shares (the lab's TUN, which runc and Docker containers send
//! through) the probes leave and the replies arrive. [`HostStamps::pair`] hands them to
//! `vtnt_mace::pair`. The stamps are `CLOCK_REALTIME` nanoseconds: only their
//! differences are used, so the runtime's clock need not agree with them.

use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::Duration;

use nix::sched::{setns, CloneFlags};

use vtnt_mace::{Dir, Event, Pairing};

use crate::capture::Ring;

/// One packet seen on the host's end of the runtime's device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    pub dir: Dir,
    /// The kernel's stamp, nanoseconds (CLOCK_REALTIME).
    pub stamp_ns: u64,
    /// The IP datagram.
    pub packet: Vec<u8>,
}

/// The capture on the host's end of one runtime's device.
pub struct HostStamps {
    ring: Ring,
    side: Side,
    frames: Vec<Captured>,
    drops: u64,
}

/// Where the captured device sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The host's end of the runtime's veth: what the host sends out of it goes into
    /// the runtime.
    HostEnd,
    /// A device of the network namespace the runtime shares: what is sent out of it
    /// leaves the runtime.
    SharedNamespace,
}

impl Side {
    /// Which way a frame seen on the device went (`outgoing`: sent out of it).
    pub fn direction(self, outgoing: bool) -> Dir {
        match (self, outgoing) {
            (Side::HostEnd, true) | (Side::SharedNamespace, false) => Dir::In,
            (Side::HostEnd, false) | (Side::SharedNamespace, true) => Dir::Out,
        }
    }
}

impl HostStamps {
    /// Starts capturing on `ifname`, on `side` of the runtime, in the calling thread's
    /// network namespace; the socket stays bound to it wherever it is read.
    pub fn open(ifname: &str, side: Side) -> io::Result<HostStamps> {
        let ring = Ring::open_with(ifname, true)
            .map_err(|e| io::Error::new(e.kind(), format!("a packet capture on {ifname}: {e}")))?;
        Ok(HostStamps {
            ring,
            side,
            frames: Vec::new(),
            drops: 0,
        })
    }

    /// Starts capturing on `ifname` in the network namespace at `netns` (e.g.
    /// `/run/netns/NAME`); the calling thread returns to its own namespace before this
    /// returns, whatever happened.
    pub fn open_in(netns: &Path, ifname: &str, side: Side) -> io::Result<HostStamps> {
        let at = |what: &str, e: &dyn std::fmt::Display| {
            io::Error::other(format!("{what} {}: {e}", netns.display()))
        };
        let own = std::fs::File::open("/proc/thread-self/ns/net")
            .map_err(|e| at("keeping this thread's namespace to return from", &e))?;
        let theirs = std::fs::File::open(netns).map_err(|e| at("opening namespace", &e))?;
        setns(theirs.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| at("entering", &e))?;
        let opened = HostStamps::open(ifname, side);
        setns(own.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| at("coming back from", &e))?;
        opened
    }

    /// Takes in what the kernel has captured so far, waiting up to `quiet` for each block
    /// (more than the ring's 5 ms block timeout, so the last packets are handed over);
    /// returns how many packets came in this call.
    pub fn collect(&mut self, quiet: Duration) -> io::Result<usize> {
        let before = self.frames.len();
        let (frames, side) = (&mut self.frames, self.side);
        while self.ring.read(quiet, |f| {
            let ip = f.packet.first().is_some_and(|b| matches!(b >> 4, 4 | 6));
            if !ip {
                return;
            }
            frames.push(Captured {
                dir: side.direction(f.outgoing),
                stamp_ns: f.stamp_ns,
                packet: f.packet.to_vec(),
            })
        })? > 0
        {}
        self.drops += self.ring.drops()?;
        Ok(self.frames.len() - before)
    }

    /// Every packet taken in so far, in the order the kernel captured them.
    pub fn frames(&self) -> &[Captured] {
        &self.frames
    }

    /// Packets the kernel could not capture (the ring was full): when not 0, a probe or a
    /// reply may be missing and its correction says so.
    pub fn drops(&self) -> u64 {
        self.drops
    }

    /// The packets taken in as `vtnt_mace` events (indexed as [`Self::frames`]).
    pub fn events(&self) -> Vec<Event<'_>> {
        self.frames
            .iter()
            .map(|c| Event {
                dir: c.dir,
                stamp_ns: c.stamp_ns,
                packet: &c.packet,
            })
            .collect()
    }

    /// Pairs the probes and replies taken in so far (`vtnt_mace::pair`).
    pub fn pair(&self) -> Pairing {
        vtnt_mace::pair(&self.events())
    }
}
