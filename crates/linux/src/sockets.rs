//! Raw sockets: one to send complete IPv4 packets, with a kernel transmit timestamp for
//! each (see `tx_stamps.rs`), two to receive ICMP and TCP with their kernel receive
//! timestamps, and their IPv6 counterparts for IPv6 probes (`sockets6.rs`).

use std::io::{IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{
    recvmsg, sendmmsg, sendto, setsockopt, sockopt, AddressFamily, ControlMessageOwned, MsgFlags,
    SockProtocol, SockaddrIn,
};

use crate::host::open;
use crate::sockets6::Raw6;
use crate::tx_stamps::TxStamps;
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
            | Errno::EAFNOSUPPORT
    )
}

/// The sockets of one prober.
#[derive(Debug)]
pub struct RawSockets {
    send: OwnedFd,
    icmp: OwnedFd,
    tcp: OwnedFd,
    cmsg: Vec<u8>,
    /// The probes waiting for a transmit stamp, when `send` has them.
    tx: Option<TxStamps>,
    /// The IPv6 sockets, where the kernel has IPv6.
    v6: Option<Raw6>,
}

use nix::{libc, setsockopt_impl, sockopt_impl};
sockopt_impl!(
    /// How the kernel treats the path MTU of a socket's packets (`IP_MTU_DISCOVER`).
    PmtuDiscover,
    SetOnly,
    libc::IPPROTO_IP,
    libc::IP_MTU_DISCOVER,
    libc::c_int
);

/// Whether `packet` is an IPv6 one (its version nibble).
fn is_ipv6(packet: &[u8]) -> bool {
    packet.first().is_some_and(|b| b >> 4 == 6)
}

/// The destination in an IPv4 packet's header.
fn destination(packet: &[u8]) -> Option<SockaddrIn> {
    let d = packet.get(16..20)?;
    Some(SockaddrIn::from(SocketAddrV4::new(
        Ipv4Addr::new(d[0], d[1], d[2], d[3]),
        0,
    )))
}

impl RawSockets {
    /// Opens the sockets, with a transmit timestamp for every probe where the kernel gives
    /// them; fails with [`Error::Privilege`] without root or CAP_NET_RAW.
    pub fn open() -> Result<RawSockets, Error> {
        RawSockets::open_with(true)
    }

    /// [`RawSockets::open`], asking for transmit timestamps only if `tx_stamps`. Without
    /// them a probe's transmit time is when the prober handed it out.
    pub fn open_with(tx_stamps: bool) -> Result<RawSockets, Error> {
        let send = open(AddressFamily::Inet, SockProtocol::Raw, "IPPROTO_RAW")?;
        let icmp = open(AddressFamily::Inet, SockProtocol::Icmp, "ICMP")?;
        let tcp = open(AddressFamily::Inet, SockProtocol::Tcp, "TCP")?;
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
        // Probes keep the size and don't-fragment bit the engine gave them, whatever path
        // MTU the kernel learnt for their destination (a `-M` probe of the interface's MTU
        // would otherwise fail with EMSGSIZE once a router has answered one with a PTB).
        setsockopt(&send, PmtuDiscover, &libc::IP_PMTUDISC_PROBE).map_err(|source| {
            Error::Socket {
                what: "IP_MTU_DISCOVER",
                source,
            }
        })?;
        let tx = if tx_stamps {
            TxStamps::enable(send.as_fd())
        } else {
            None
        };
        Ok(RawSockets {
            send,
            icmp,
            tcp,
            cmsg: nix::cmsg_space!(nix::sys::time::TimeSpec),
            tx,
            v6: Raw6::open(tx_stamps)?,
        })
    }

    /// Whether sent probes get transmit timestamps ([`RawSockets::recv_tx_stamps`]).
    pub fn tx_stamps(&self) -> bool {
        self.tx.is_some()
    }

    /// The descriptors to wait on for received packets.
    pub fn receivers(&self) -> Vec<BorrowedFd<'_>> {
        let mut fds = vec![self.icmp.as_fd(), self.tcp.as_fd()];
        fds.extend(self.v6.iter().flat_map(Raw6::receivers));
        fds
    }

    /// Sends one complete IPv4 or IPv6 packet (the destination is read from its header).
    pub fn send(&mut self, packet: &[u8]) -> Result<Sent, Error> {
        let mut refused = None;
        let n = self.send_batch(&[packet], |_, e| refused = Some(e))?;
        Ok(match (n, refused) {
            (0, _) => Sent::NoRoom,
            (_, Some(e)) => Sent::Refused(e),
            _ => Sent::Yes,
        })
    }

    /// Sends a batch of complete IPv4 or IPv6 packets, with as few system calls as it can
    /// (`sendmmsg`). Returns how many the kernel took (a prefix of `packets`), sent or
    /// refused; fewer than all means it has no room now. `refused(packet, errno)` is
    /// called for each packet the kernel would not send.
    pub fn send_batch(
        &mut self,
        packets: &[&[u8]],
        mut refused_with: impl FnMut(&[u8], Errno),
    ) -> Result<usize, Error> {
        let mut done = 0;
        // sendmmsg stops short at a packet it could not send without saying why: that
        // packet is tried again at once, and its first try taken to have failed as the
        // second does (it matters to the transmit stamps' numbering).
        let mut retry = false;
        while done < packets.len() {
            let v6 = is_ipv6(packets[done]);
            let sent = if v6 {
                self.v6
                    .as_ref()
                    .map_or(Err(Errno::EAFNOSUPPORT), |s| s.transmit(packets[done]))
            } else {
                self.transmit(&packets[done..])
            };
            // each family's send socket numbers its own packets
            let tx = if v6 {
                self.v6.as_mut().and_then(|s| s.tx.as_mut())
            } else {
                self.tx.as_mut()
            };
            match sent {
                Ok(n) => {
                    if let Some(tx) = tx {
                        for p in &packets[done..done + n] {
                            tx.sent(p);
                        }
                    }
                    done += n;
                    retry = true;
                    if n == 0 {
                        break;
                    }
                }
                Err(Errno::EAGAIN | Errno::ENOBUFS) => break,
                Err(e) if refused(e) => {
                    if let Some(tx) = tx {
                        tx.refused(e);
                        if retry {
                            tx.refused(e);
                        }
                    }
                    refused_with(packets[done], e);
                    done += 1;
                    retry = false;
                }
                Err(source) => {
                    return Err(Error::Socket {
                        what: "sending probes",
                        source,
                    })
                }
            }
        }
        Ok(done)
    }

    /// One system call: sends the IPv4 packets leading `packets` (at least one) until the
    /// first the kernel does not take. Returns how many it took, or why it took none.
    fn transmit(&self, packets: &[&[u8]]) -> Result<usize, Errno> {
        let packets = &packets[..packets
            .iter()
            .position(|p| is_ipv6(p))
            .unwrap_or(packets.len())];
        if let [p] = packets {
            let addr = destination(p).ok_or(Errno::EINVAL)?;
            return sendto(self.send.as_raw_fd(), p, &addr, MsgFlags::empty()).map(|_| 1);
        }
        // A packet too short to name one goes to 0.0.0.0: the kernel refuses it (EINVAL).
        let nowhere = SockaddrIn::from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        let addrs: Vec<Option<SockaddrIn>> = packets
            .iter()
            .map(|p| Some(destination(p).unwrap_or(nowhere)))
            .collect();
        let iovs: Vec<[IoSlice<'_>; 1]> = packets.iter().map(|p| [IoSlice::new(p)]).collect();
        let mut headers =
            nix::sys::socket::MultiHeaders::<SockaddrIn>::preallocate(packets.len(), None);
        sendmmsg(
            self.send.as_raw_fd(),
            &mut headers,
            &iovs,
            &addrs,
            [],
            MsgFlags::empty(),
        )
        .map(|r| r.count())
    }

    /// Hands the transmit stamp of every probe the kernel has stamped since the last call
    /// to `f` with the probe's first [`vtnt_engine::PROBE_ID_LEN`] bytes (what
    /// [`crate::Prober::handle_transmitted`] takes). Returns how many were handed: none
    /// without transmit stamps.
    pub fn recv_tx_stamps(
        &mut self,
        clock: &Clock,
        mut f: impl FnMut(Instant, &[u8]),
    ) -> Result<usize, Error> {
        let stamps = clock.stamps();
        let mut n = match &mut self.tx {
            Some(tx) => tx.read(self.send.as_fd(), &stamps, &mut f)?,
            None => 0,
        };
        if let Some(v6) = &mut self.v6 {
            n += v6.recv_tx_stamps(&stamps, &mut f)?;
        }
        Ok(n)
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
        if let Some(v6) = &mut self.v6 {
            n += v6.recv_all(clock, buf, f)?;
        }
        Ok(n)
    }
}
