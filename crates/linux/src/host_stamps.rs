//! Host-side stamps of a runtime's traffic for RTT correction (`vtnt-mace`,
//! docs/rtt-correction.md), without a kernel module: a [`Ring`] on the device where the
//! runtime's packets cross to the network keeps every IP packet crossing it with the
//! kernel's stamp (ARP and anything else not IP is left out). [`Side`] says which way
//! is which: on the host's end of a runtime's veth the probes arrive and the replies
//! leave (the host sends them into the veth, `PACKET_OUTGOING`); on the device of the
//! namespace the runtime shares (the lab's TUN, which runc and Docker containers send
//! through) the probes leave and the replies arrive; on the host's loopback, where VMs,
//! microVMs and spt guests send their Ethernet frames to the lab's VM front as UDP
//! datagrams, the frames to the front's port are probes and those from it replies
//! ([`Side::Front`]). [`Background`] reads the ring in a
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
    /// The loopback device of the namespace where a VM front (a lab's or `vtnt lab
    /// front`'s) listens on UDP `port`: each datagram to the port carries a guest's
    /// Ethernet frame (its probe leaves the runtime), each from it a frame for a guest
    /// (a reply arrives); the IP packet is the frame's payload. Loopback shows each
    /// datagram leaving and arriving: the leaving copy is the one kept.
    Front { port: u16 },
}

impl Side {
    /// Which way the IP packet in `packet`, seen on the device (`outgoing`: sent out of
    /// it), went, and the packet itself; `None` for anything else (ARP, other traffic,
    /// the arriving copy of a loopback datagram).
    pub fn packet(self, outgoing: bool, packet: &[u8]) -> Option<(Dir, &[u8])> {
        let dir = match (self, outgoing) {
            (Side::Front { port }, true) => return front_frame(port, packet),
            (Side::Front { .. }, false) => return None,
            (Side::HostEnd, true) | (Side::SharedNamespace, false) => Dir::In,
            (Side::HostEnd, false) | (Side::SharedNamespace, true) => Dir::Out,
        };
        packet
            .first()
            .is_some_and(|b| matches!(b >> 4, 4 | 6))
            .then_some((dir, packet))
    }
}

/// The IP packet a VM front's UDP datagram `packet` (IPv4 on loopback) carries in its
/// Ethernet frame, and its way: to the front's `port`, out of the runtime; from it, in.
fn front_frame(port: u16, packet: &[u8]) -> Option<(Dir, &[u8])> {
    const ETH_LEN: usize = 14;
    let ihl = usize::from(packet.first()? & 0x0f) * 4;
    if packet[0] >> 4 != 4 || ihl < 20 || *packet.get(9)? != 17 {
        return None;
    }
    let udp = packet.get(ihl..)?;
    let (src, dst) = (
        u16::from_be_bytes([*udp.first()?, *udp.get(1)?]),
        u16::from_be_bytes([*udp.get(2)?, *udp.get(3)?]),
    );
    let dir = match (src == port, dst == port) {
        (false, true) => Dir::Out,
        (true, false) => Dir::In,
        _ => return None,
    };
    let frame = udp.get(8..)?;
    let ip = match frame.get(12..ETH_LEN)? {
        [0x08, 0x00] | [0x86, 0xdd] => &frame[ETH_LEN..],
        _ => return None,
    };
    ip.first()
        .is_some_and(|b| matches!(b >> 4, 4 | 6))
        .then_some((dir, ip))
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
    /// (more than the ring's 5 ms block timeout, so the last packets are handed over), at
    /// most one lap of the ring: on a device that never goes quiet (a background load)
    /// the call still returns, and its caller can stop.
    pub fn collect(&mut self, quiet: Duration) -> io::Result<()> {
        let (frames, side) = (&mut self.taken.frames, self.side);
        for _ in 0..Ring::BLOCKS {
            let read = self.ring.read(quiet, |f| {
                if let Some((dir, packet)) = side.packet(f.outgoing, f.packet) {
                    frames.push(Captured {
                        dir,
                        stamp_ns: f.stamp_ns,
                        packet: packet.to_vec(),
                    })
                }
            })?;
            if read == 0 {
                break;
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback datagram from UDP port `src` to `dst` carrying an Ethernet frame of
    /// `ethertype` around `ip`.
    fn datagram(src: u16, dst: u16, ethertype: [u8; 2], ip: &[u8]) -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1,
        ];
        p.extend_from_slice(&src.to_be_bytes());
        p.extend_from_slice(&dst.to_be_bytes());
        p.extend_from_slice(&[0; 4]);
        p.extend_from_slice(&[0x52, 0x54, 0, 0, 0, 1, 2, 0x76, 0x74, 0x6e, 0x74, 1]);
        p.extend_from_slice(&ethertype);
        p.extend_from_slice(ip);
        p
    }

    #[test]
    fn a_front_datagram_gives_its_frame_s_packet_and_way() {
        let front = Side::Front { port: 4000 };
        let (v4, v6) = ([0x45u8, 0, 0, 20], [0x60u8, 0, 0, 0]);
        let probe = datagram(4001, 4000, [8, 0], &v4);
        assert_eq!(front.packet(true, &probe), Some((Dir::Out, &v4[..])));
        let reply = datagram(4000, 4001, [0x86, 0xdd], &v6);
        assert_eq!(front.packet(true, &reply), Some((Dir::In, &v6[..])));
        // the arriving copy, ARP, other ports, other traffic, cut datagrams: nothing
        assert_eq!(front.packet(false, &probe), None);
        assert_eq!(front.packet(true, &datagram(4001, 4000, [8, 6], &v4)), None);
        assert_eq!(front.packet(true, &datagram(4001, 4002, [8, 0], &v4)), None);
        assert_eq!(front.packet(true, &datagram(4000, 4000, [8, 0], &v4)), None);
        let mut tcp = probe.clone();
        tcp[9] = 6;
        assert_eq!(front.packet(true, &tcp), None);
        for cut in 0..probe.len() - v4.len() {
            assert_eq!(front.packet(true, &probe[..cut]), None, "{cut}");
        }
        // a device's own packets: by their direction
        assert_eq!(Side::HostEnd.packet(false, &v4), Some((Dir::Out, &v4[..])));
        assert_eq!(
            Side::SharedNamespace.packet(false, &v6),
            Some((Dir::In, &v6[..]))
        );
        assert_eq!(Side::SharedNamespace.packet(false, &[0x00, 1]), None);
    }
}
