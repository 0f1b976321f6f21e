//! Host-side stamps of a runtime's traffic for RTT correction (`vtnt-mace`,
//! docs/rtt-correction.md), without a kernel module: a [`Ring`] on the device where the
//! runtime's packets cross to the network keeps every IP packet crossing it with the
//! kernel's stamp (ARP and anything else not IP is left out). [`Side`] says which way
//! is which: on the host's end of a runtime's veth the probes arrive and the replies
//! leave (the host sends them into the veth, `PACKET_OUTGOING`); on the device of the
//! namespace the runtime shares (the lab's TUN, which runc and Docker containers send
//! through) the probes leave and the replies arrive. [`Background`] reads the ring in a
//! thread of its own while the runtime runs (the ring's 64 blocks are each handed over
//! 5 ms after their first packet, so a slow stream fills them unless read as it comes);
//! [`Captures::pair`] hands what it took to `vtnt_mace::pair`. The stamps are `CLOCK_REALTIME` nanoseconds: only their
//! differences are used, so the runtime's clock need not agree with them.

use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sched::{setns, CloneFlags};
use vtnt_mace::{Dir, Event, Pairing};

use crate::capture::Ring;

/// One packet seen on the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    pub dir: Dir,
    /// The kernel's stamp, nanoseconds (CLOCK_REALTIME).
    pub stamp_ns: u64,
    /// The IP datagram.
    pub packet: Vec<u8>,
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

/// What a capture took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captures {
    /// Every packet, in the order the kernel captured them.
    pub frames: Vec<Captured>,
    /// Packets the kernel could not capture (the ring was full): when not 0, a probe or a
    /// reply may be missing and its correction says so.
    pub drops: u64,
}

impl Captures {
    /// The packets as `vtnt_mace` events (indexed as [`Self::frames`]).
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

    /// Pairs their probes and replies (`vtnt_mace::pair`).
    pub fn pair(&self) -> Pairing {
        vtnt_mace::pair(&self.events())
    }
}

/// The capture on one device, read by the calling thread.
pub struct HostStamps {
    ring: Ring,
    side: Side,
    taken: Captures,
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
            taken: Captures::default(),
        })
    }

    /// Takes in what the kernel has captured so far, waiting up to `quiet` for each block
    /// (more than the ring's 5 ms block timeout, so the last packets are handed over).
    pub fn collect(&mut self, quiet: Duration) -> io::Result<()> {
        let (frames, side) = (&mut self.taken.frames, self.side);
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
        self.taken.drops += self.ring.drops()?;
        Ok(())
    }

    /// What was taken in so far.
    pub fn into_captures(self) -> Captures {
        self.taken
    }
}

/// A capture read by a thread of its own, in the namespace of the device, until
/// [`Background::finish`] (or until dropped: the thread then ends on its own).
pub struct Background {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<Captures>>>,
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

impl Background {
    /// Starts capturing on `ifname`, on `side` of the runtime, in the network namespace
    /// at `netns` (e.g. `/run/netns/NAME`); returns once the socket is bound.
    pub fn start(netns: &Path, ifname: &str, side: Side) -> io::Result<Background> {
        let (netns, ifname): (PathBuf, String) = (netns.into(), ifname.into());
        let stop = Arc::new(AtomicBool::new(false));
        let (ready, opened) = mpsc::channel();
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut stamps = match enter(&netns).and_then(|()| HostStamps::open(&ifname, side)) {
                Ok(s) => s,
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return Ok(Captures::default());
                }
            };
            let _ = ready.send(Ok(()));
            while !stopped.load(Ordering::Acquire) {
                stamps.collect(Duration::from_millis(20))?;
            }
            stamps.collect(Duration::from_millis(50))?;
            Ok(stamps.into_captures())
        });
        match opened.recv() {
            Ok(Ok(())) => Ok(Background {
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::other("the capture thread ended before opening")),
        }
    }

    /// Stops after taking in what is left and returns everything taken.
    pub fn finish(mut self) -> io::Result<Captures> {
        self.stop.store(true, Ordering::Release);
        let thread = self.thread.take().expect("finished once");
        thread
            .join()
            .map_err(|_| io::Error::other("the capture thread panicked"))?
    }
}

/// Moves the calling thread into the network namespace at `netns`.
fn enter(netns: &Path) -> io::Result<()> {
    let f = std::fs::File::open(netns).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("opening namespace {}: {e}", netns.display()),
        )
    })?;
    setns(f.as_fd(), CloneFlags::CLONE_NEWNET)
        .map_err(|e| io::Error::other(format!("entering namespace {}: {e}", netns.display())))
}
