//! Raw sockets: one to send complete IPv4 packets, two to receive ICMP and TCP with their
//! kernel receive timestamps.

use std::io::IoSliceMut;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{
    recvmsg, sendto, setsockopt, socket, sockopt, AddressFamily, ControlMessageOwned, MsgFlags,
    SockFlag, SockProtocol, SockType, SockaddrIn,
};

use crate::{Clock, Error, Instant};

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
            setsockopt(fd, sockopt::ReceiveTimestampns, &true)
                .map_err(|source| Error::Socket { what: "SO_TIMESTAMPNS", source })?;
            // A big receive buffer keeps bursts of replies at high rates; failure is harmless.
            let _ = setsockopt(fd, sockopt::RcvBufForce, &(8 << 20));
            let _ = setsockopt(fd, sockopt::RcvBuf, &(8 << 20));
        }
        let _ = setsockopt(&send, sockopt::SndBufForce, &(8 << 20));
        Ok(RawSockets { send, icmp, tcp, cmsg: nix::cmsg_space!(nix::sys::time::TimeSpec) })
    }

    /// The descriptors to wait on for received packets.
    pub fn receivers(&self) -> [BorrowedFd<'_>; 2] {
        [self.icmp.as_fd(), self.tcp.as_fd()]
    }

    /// Sends one complete IPv4 packet (the destination is read from its header).
    /// Returns `Ok(false)` when the kernel has no room now (try again later).
    pub fn send(&self, packet: &[u8]) -> Result<bool, Error> {
        let Some(dst) = packet.get(16..20) else {
            return Ok(true); // nothing sensible to send; drop it
        };
        let dst = Ipv4Addr::new(dst[0], dst[1], dst[2], dst[3]);
        let addr = SockaddrIn::from(SocketAddrV4::new(dst, 0));
        match sendto(self.send.as_raw_fd(), packet, &addr, MsgFlags::empty()) {
            Ok(_) => Ok(true),
            Err(Errno::EAGAIN | Errno::ENOBUFS) => Ok(false),
            // Unreachable destinations and the like are the measurement's business: the
            // probe simply gets no answer.
            Err(Errno::ENETUNREACH | Errno::EHOSTUNREACH | Errno::EINVAL | Errno::EPERM) => {
                Ok(true)
            }
            Err(source) => Err(Error::Socket { what: "sendto", source }),
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
        let mut n = 0;
        for i in 0..2 {
            let fd = if i == 0 { self.icmp.as_raw_fd() } else { self.tcp.as_raw_fd() };
            loop {
                let (len, ts) = {
                    let mut iov = [IoSliceMut::new(buf)];
                    match recvmsg::<()>(fd, &mut iov, Some(&mut self.cmsg), MsgFlags::empty()) {
                        Ok(msg) => {
                            let mut ts = None;
                            if let Ok(cmsgs) = msg.cmsgs() {
                                for c in cmsgs {
                                    if let ControlMessageOwned::ScmTimestampns(t) = c {
                                        ts = Some(clock.from_realtime(t.tv_sec(), t.tv_nsec()));
                                    }
                                }
                            }
                            (msg.bytes, ts.unwrap_or_else(|| clock.now()))
                        }
                        Err(Errno::EAGAIN) => break,
                        Err(Errno::EINTR) => continue,
                        Err(source) => return Err(Error::Socket { what: "recvmsg", source }),
                    }
                };
                n += 1;
                f(ts, &buf[..len.min(buf.len())]);
            }
        }
        Ok(n)
    }
}
