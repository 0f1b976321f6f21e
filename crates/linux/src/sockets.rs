//! Raw sockets: one to send complete IPv4 packets, two to receive ICMP and TCP with their
//! kernel receive timestamps.

use std::io::{IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{
    recvmsg, sendmmsg, sendto, setsockopt, socket, sockopt, AddressFamily, ControlMessageOwned,
    MsgFlags, SockFlag, SockProtocol, SockType, SockaddrIn,
};

use crate::{Clock, Error, Instant};

/// What became of one packet handed to [`RawSockets::send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    Yes,
    /// The kernel has no room now: try again later.
    NoRoom,
    /// The kernel will not send this packet (no route, a firewall, a bad packet): the
    /// prober's business ([`crate::Prober::handle_send_error`]), not the loop's.
    Refused(Errno),
}

/// Errors that concern one packet, not the socket.
fn refused(e: Errno) -> bool {
    matches!(
        e,
        Errno::ENETUNREACH
            | Errno::EHOSTUNREACH
            | Errno::EINVAL
            | Errno::EPERM
            | Errno::EACCES
            | Errno::EMSGSIZE
            | Errno::EADDRNOTAVAIL
            | Errno::ENETDOWN
    )
}

/// The sockets of one prober.
#[derive(Debug)]
pub struct RawSockets {
    send: OwnedFd,
    icmp: OwnedFd,
    tcp: OwnedFd,
    cmsg: Vec<u8>,
}

fn open(proto: SockProtocol, what: &'static str) -> Result<OwnedFd, Error> {
    socket(
        AddressFamily::Inet,
        SockType::Raw,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        proto,
    )
    .map_err(|source| match source {
        Errno::EPERM | Errno::EACCES => Error::Privilege { what, source },
        _ => Error::Socket { what, source },
    })
}

impl RawSockets {
    /// Opens the sockets; fails with [`Error::Privilege`] without root or CAP_NET_RAW.
    pub fn open() -> Result<RawSockets, Error> {
        let send = open(SockProtocol::Raw, "IPPROTO_RAW")?;
        let icmp = open(SockProtocol::Icmp, "ICMP")?;
        let tcp = open(SockProtocol::Tcp, "TCP")?;
        for fd in [&icmp, &tcp] {
            setsockopt(fd, sockopt::ReceiveTimestampns, &true).map_err(|source| Error::Socket {
                what: "SO_TIMESTAMPNS",
                source,
            })?;
            // A big receive buffer keeps bursts of replies at high rates; failure is harmless.
            let _ = setsockopt(fd, sockopt::RcvBufForce, &(8 << 20));
            let _ = setsockopt(fd, sockopt::RcvBuf, &(8 << 20));
        }
        let _ = setsockopt(&send, sockopt::SndBufForce, &(8 << 20));
        Ok(RawSockets {
            send,
            icmp,
            tcp,
            cmsg: nix::cmsg_space!(nix::sys::time::TimeSpec),
        })
    }

    /// The descriptors to wait on for received packets.
    pub fn receivers(&self) -> [BorrowedFd<'_>; 2] {
        [self.icmp.as_fd(), self.tcp.as_fd()]
    }

    /// Sends one complete IPv4 packet (the destination is read from its header).
    pub fn send(&self, packet: &[u8]) -> Result<Sent, Error> {
        let Some(dst) = packet.get(16..20) else {
            return Ok(Sent::Refused(Errno::EINVAL));
        };
        let dst = Ipv4Addr::new(dst[0], dst[1], dst[2], dst[3]);
        let addr = SockaddrIn::from(SocketAddrV4::new(dst, 0));
        match sendto(self.send.as_raw_fd(), packet, &addr, MsgFlags::empty()) {
            Ok(_) => Ok(Sent::Yes),
            Err(Errno::EAGAIN | Errno::ENOBUFS) => Ok(Sent::NoRoom),
            Err(e) if refused(e) => Ok(Sent::Refused(e)),
            Err(source) => Err(Error::Socket {
                what: "sendto",
                source,
            }),
        }
    }

    /// Sends a batch of complete IPv4 packets with one `sendmmsg` call. Returns how many
    /// the kernel took (a prefix of `packets`), sent or refused; fewer than all means it
    /// has no room now. `refused(packet, errno)` is called for each packet the kernel
    /// would not send.
    pub fn send_batch(
        &self,
        packets: &[&[u8]],
        mut refused_with: impl FnMut(&[u8], Errno),
    ) -> Result<usize, Error> {
        if packets.len() <= 1 {
            let Some(p) = packets.first() else {
                return Ok(0);
            };
            return Ok(match self.send(p)? {
                Sent::Yes => 1,
                Sent::NoRoom => 0,
                Sent::Refused(e) => {
                    refused_with(p, e);
                    1
                }
            });
        }
        let addrs: Vec<Option<SockaddrIn>> = packets
            .iter()
            .map(|p| {
                let d = p.get(16..20).unwrap_or(&[0, 0, 0, 0]);
                Some(SockaddrIn::from(SocketAddrV4::new(
                    Ipv4Addr::new(d[0], d[1], d[2], d[3]),
                    0,
                )))
            })
            .collect();
        let iovs: Vec<[IoSlice<'_>; 1]> = packets.iter().map(|p| [IoSlice::new(p)]).collect();
        let mut headers =
            nix::sys::socket::MultiHeaders::<SockaddrIn>::preallocate(packets.len(), None);
        match sendmmsg(
            self.send.as_raw_fd(),
            &mut headers,
            &iovs,
            &addrs,
            [],
            MsgFlags::empty(),
        ) {
            Ok(results) => Ok(results.count()),
            Err(Errno::EAGAIN | Errno::ENOBUFS) => Ok(0),
            // The first packet was refused (no route, ...): send one by one to learn
            // which ones were.
            Err(e) if refused(e) => {
                let mut n = 0;
                for p in packets {
                    match self.send(p)? {
                        Sent::Yes => {}
                        Sent::NoRoom => break,
                        Sent::Refused(e) => refused_with(p, e),
                    }
                    n += 1;
                }
                Ok(n)
            }
            Err(source) => Err(Error::Socket {
                what: "sendmmsg",
                source,
            }),
        }
    }

    /// Hands every packet waiting on the receive sockets to `f` with its kernel receive
    /// time. Returns how many were received.
    pub fn recv_all(
        &mut self,
        clock: &Clock,
        buf: &mut [u8],
        mut f: impl FnMut(Instant, &[u8]),
    ) -> Result<usize, Error> {
        let stamps = clock.stamps();
        let mut n = 0;
        for i in 0..2 {
            let fd = if i == 0 {
                self.icmp.as_raw_fd()
            } else {
                self.tcp.as_raw_fd()
            };
            loop {
                let (len, ts) = {
                    let mut iov = [IoSliceMut::new(buf)];
                    match recvmsg::<()>(fd, &mut iov, Some(&mut self.cmsg), MsgFlags::empty()) {
                        Ok(msg) => {
                            let mut ts = None;
                            if let Ok(cmsgs) = msg.cmsgs() {
                                for c in cmsgs {
                                    if let ControlMessageOwned::ScmTimestampns(t) = c {
                                        ts = Some(stamps.instant(t.tv_sec(), t.tv_nsec()));
                                    }
                                }
                            }
                            (msg.bytes, ts.unwrap_or_else(|| clock.now()))
                        }
                        Err(Errno::EAGAIN) => break,
                        Err(Errno::EINTR) => continue,
                        Err(source) => {
                            return Err(Error::Socket {
                                what: "recvmsg",
                                source,
                            })
                        }
                    }
                };
                n += 1;
                f(ts, &buf[..len.min(buf.len())]);
            }
        }
        Ok(n)
    }
}
