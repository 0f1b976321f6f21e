//! The IPv6 half of [`crate::RawSockets`]: an `IPPROTO_RAW` socket of the IPv6 family,
//! which sends the whole packet the prober built (hop limit and flow label included), and
//! raw ICMPv6 and TCP sockets (ICMPv6 errors, echo replies, and the RST or SYN-ACK a TCP
//! probe draws). Those hand over each message without its IPv6 header, so the header is
//! rebuilt from the sender's address, the destination (`IPV6_PKTINFO`) and the hop limit
//! (`IPV6_HOPLIMIT`) before the prober sees the packet, as it would over IPv4.
//! The send socket stamps its packets as the IPv4 one does ([`crate::tx_stamps`]).

use std::io::IoSliceMut;
use std::net::{Ipv6Addr, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{
    recvmsg, sendto, setsockopt, sockopt, AddressFamily, ControlMessageOwned, MsgFlags,
    SockProtocol, SockaddrIn6,
};

use crate::tx_stamps::TxStamps;
use crate::{Clock, Error, Instant};

use nix::{setsockopt_impl, sockopt_impl};
sockopt_impl!(
    /// How the kernel treats the path MTU of a socket's packets (`IPV6_MTU_DISCOVER`).
    Pmtu6Discover,
    SetOnly,
    nix::libc::IPPROTO_IPV6,
    nix::libc::IPV6_MTU_DISCOVER,
    nix::libc::c_int
);

/// The fixed IPv6 header's length.
const HEADER_LEN: usize = 40;

/// The IPv6 sockets of one prober.
#[derive(Debug)]
pub(crate) struct Raw6 {
    send: OwnedFd,
    /// The receiving sockets, each with the protocol its messages are of.
    receive: [(OwnedFd, u8); 2],
    cmsg: Vec<u8>,
    /// The probes waiting for a transmit stamp, when `send` has them.
    pub tx: Option<TxStamps>,
}

impl Raw6 {
    /// Opens the sockets, with transmit stamps if `tx_stamps` and the kernel gives them;
    /// `Ok(None)` where the kernel has no IPv6.
    pub fn open(tx_stamps: bool) -> Result<Option<Raw6>, Error> {
        let send = match crate::host::open(AddressFamily::Inet6, SockProtocol::Raw, "IPv6 raw") {
            Err(Error::Socket {
                source: Errno::EAFNOSUPPORT,
                ..
            }) => return Ok(None),
            r => r?,
        };
        let icmp = crate::host::open(AddressFamily::Inet6, SockProtocol::IcmpV6, "ICMPv6")?;
        let tcp = crate::host::open(AddressFamily::Inet6, SockProtocol::Tcp, "IPv6 TCP")?;
        let set = |what, r: nix::Result<()>| r.map_err(|source| Error::Socket { what, source });
        for fd in [&icmp, &tcp] {
            set(
                "SO_TIMESTAMPNS",
                setsockopt(fd, sockopt::ReceiveTimestampns, &true),
            )?;
            set(
                "IPV6_RECVPKTINFO",
                setsockopt(fd, sockopt::Ipv6RecvPacketInfo, &true),
            )?;
            set(
                "IPV6_RECVHOPLIMIT",
                setsockopt(fd, sockopt::Ipv6RecvHopLimit, &true),
            )?;
            let _ = setsockopt(fd, sockopt::RcvBufForce, &(8 << 20));
        }
        let _ = setsockopt(&send, sockopt::SndBufForce, &(8 << 20));
        // Probes keep their size whatever path MTU the kernel learnt for their
        // destination from a packet too big (as the IPv4 socket's do: a `-M` probe of the
        // interface's MTU would otherwise fail with EMSGSIZE)
        set(
            "IPV6_MTU_DISCOVER",
            setsockopt(&send, Pmtu6Discover, &nix::libc::IPV6_PMTUDISC_PROBE),
        )?;
        let tx = if tx_stamps {
            TxStamps::enable(send.as_fd())
        } else {
            None
        };
        Ok(Some(Raw6 {
            send,
            receive: [
                (icmp, nix::libc::IPPROTO_ICMPV6 as u8),
                (tcp, nix::libc::IPPROTO_TCP as u8),
            ],
            cmsg: nix::cmsg_space!(
                nix::sys::time::TimeSpec,
                nix::libc::in6_pktinfo,
                nix::libc::c_int
            ),
            tx,
        }))
    }

    /// The descriptors to wait on for received packets.
    pub fn receivers(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.receive.iter().map(|(fd, _)| fd.as_fd())
    }

    /// Sends one complete IPv6 packet to the destination in its header.
    pub fn transmit(&self, packet: &[u8]) -> Result<usize, Errno> {
        let d: [u8; 16] = packet
            .get(24..HEADER_LEN)
            .and_then(|d| d.try_into().ok())
            .ok_or(Errno::EINVAL)?;
        let addr = SockaddrIn6::from(SocketAddrV6::new(Ipv6Addr::from(d), 0, 0, 0));
        sendto(self.send.as_raw_fd(), packet, &addr, MsgFlags::empty()).map(|_| 1)
    }

    /// [`TxStamps::read`] of the send socket: the stamps of the IPv6 probes sent.
    pub fn recv_tx_stamps(
        &mut self,
        stamps: &crate::clock::KernelStamps,
        f: impl FnMut(Instant, &[u8]),
    ) -> Result<usize, Error> {
        match &mut self.tx {
            Some(tx) => tx.read(self.send.as_fd(), stamps, f),
            None => Ok(0),
        }
    }

    /// Hands every ICMPv6 message and TCP segment waiting to `f`, behind its rebuilt IPv6
    /// header, with its kernel receive time. Returns how many were received.
    pub fn recv_all(
        &mut self,
        clock: &Clock,
        buf: &mut [u8],
        mut f: impl FnMut(Instant, &[u8]),
    ) -> Result<usize, Error> {
        let stamps = clock.stamps();
        let mut n = 0;
        for (fd, protocol) in &self.receive {
            let (fd, protocol) = (fd.as_raw_fd(), *protocol);
            n += Self::recv_from(fd, protocol, &mut self.cmsg, &stamps, clock, buf, &mut f)?;
        }
        Ok(n)
    }

    /// [`Raw6::recv_all`] of the socket `fd`, whose messages are of `protocol`.
    fn recv_from(
        fd: std::os::fd::RawFd,
        protocol: u8,
        cmsg: &mut [u8],
        stamps: &crate::clock::KernelStamps,
        clock: &Clock,
        buf: &mut [u8],
        f: &mut impl FnMut(Instant, &[u8]),
    ) -> Result<usize, Error> {
        let mut n = 0;
        loop {
            let (len, header, ts) = {
                let room = buf.len().saturating_sub(HEADER_LEN);
                let mut iov = [IoSliceMut::new(&mut buf[HEADER_LEN..])];
                match recvmsg::<SockaddrIn6>(fd, &mut iov, Some(cmsg), MsgFlags::empty()) {
                    Ok(msg) => {
                        let (mut ts, mut dst, mut hops) = (None, None, 0);
                        for c in msg.cmsgs().into_iter().flatten() {
                            match c {
                                ControlMessageOwned::ScmTimestampns(t) => {
                                    ts = Some(stamps.instant(t.tv_sec(), t.tv_nsec()))
                                }
                                ControlMessageOwned::Ipv6PacketInfo(i) => {
                                    dst = Some(Ipv6Addr::from(i.ipi6_addr.s6_addr))
                                }
                                ControlMessageOwned::Ipv6HopLimit(h) => hops = h as u8,
                                _ => {}
                            }
                        }
                        let len = msg.bytes.min(room);
                        let header = match (msg.address.map(|a| a.ip()), dst) {
                            (Some(src), Some(dst)) => Some((src, dst, hops)),
                            _ => None,
                        };
                        (len, header, ts.unwrap_or_else(|| clock.now()))
                    }
                    Err(Errno::EAGAIN) => break,
                    Err(Errno::EINTR) => continue,
                    Err(source) => {
                        return Err(Error::Socket {
                            what: "recvmsg (IPv6)",
                            source,
                        })
                    }
                }
            };
            n += 1;
            // A message without its addresses cannot be matched to a probe: dropped.
            let Some((src, dst, hops)) = header else {
                continue;
            };
            let h = &mut buf[..HEADER_LEN];
            h[..4].copy_from_slice(&(6u32 << 28).to_be_bytes());
            h[4..6].copy_from_slice(&(len as u16).to_be_bytes());
            h[6] = protocol;
            h[7] = hops;
            h[8..24].copy_from_slice(&src.octets());
            h[24..40].copy_from_slice(&dst.octets());
            f(ts, &buf[..HEADER_LEN + len]);
        }
        Ok(n)
    }
}
