//! Transmit timestamps of the send socket (`SO_TIMESTAMPING`).
//!
//! The kernel stamps each packet when the device driver takes it
//! (`SOF_TIMESTAMPING_TX_SOFTWARE`: after the qdisc, so time spent in a full send queue
//! counts as before the probe left) and queues the stamp on the socket's error queue with
//! no copy of the packet (`OPT_TSONLY`) but the packet's number among the socket's sends
//! (`OPT_ID`). [`TxStamps`] keeps that number and the first bytes of every probe sent
//! until its stamp comes back, then hands both to the prober
//! ([`crate::Prober::handle_transmitted`]).
//!
//! Numbering: the kernel numbers a packet once it has built it. A packet refused by
//! routing (no route, EMSGSIZE, ...) or not taken (EAGAIN) has no number; one refused by
//! netfilter (EPERM) or a device that is down (ENETDOWN) has one but never a stamp. A
//! stamp for no pending probe (its number is not one the driver counted) is dropped, and
//! a pending probe older than a stamp never got one (a qdisc dropped it) and is
//! forgotten: stamps come back in send order.

use std::collections::VecDeque;
use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;
use nix::sys::socket::{
    recvmmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, MultiHeaders, TimestampingFlag,
    Timestamps,
};
use vtnt_engine::PROBE_ID_LEN;

use crate::{Error, Instant, KernelStamps};

/// Stamps read with one system call at most.
const BATCH: usize = 64;

/// Probes kept waiting for their stamp at most (the oldest is forgotten): at 150,000 pps,
/// 0.4 s of stamps.
const MAX_PENDING: usize = 1 << 16;

/// `SO_EE_ORIGIN_TIMESTAMPING` (linux/errqueue.h).
const ORIGIN_TIMESTAMPING: u8 = 4;
/// `SCM_TSTAMP_SND`: the stamp taken when the device driver took the packet.
const TSTAMP_SND: u32 = 0;

/// The probes of one send socket waiting for their transmit stamp.
#[derive(Debug)]
pub(crate) struct TxStamps {
    /// The kernel's number for the next packet the socket builds.
    next: u32,
    /// Probes sent and not stamped yet, oldest first: number, first bytes.
    pending: VecDeque<(u32, [u8; PROBE_ID_LEN])>,
}

impl TxStamps {
    /// Asks the kernel to stamp every packet sent on `fd`; `None` if it will not.
    pub fn enable(fd: BorrowedFd<'_>) -> Option<TxStamps> {
        let flags = TimestampingFlag::SOF_TIMESTAMPING_TX_SOFTWARE
            | TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE
            | TimestampingFlag::SOF_TIMESTAMPING_OPT_ID
            | TimestampingFlag::SOF_TIMESTAMPING_OPT_TSONLY;
        setsockopt(&fd, sockopt::Timestamping, &flags).ok()?;
        // Stamps queue against the receive buffer: room for bursts at high rates
        // (failure is harmless: a full queue drops stamps, not probes).
        let _ = setsockopt(&fd, sockopt::RcvBufForce, &(8 << 20));
        Some(TxStamps {
            next: 0,
            pending: VecDeque::new(),
        })
    }

    /// The kernel built and sent `packet`.
    pub fn sent(&mut self, packet: &[u8]) {
        let mut id = [0u8; PROBE_ID_LEN];
        let n = packet.len().min(PROBE_ID_LEN);
        id[..n].copy_from_slice(&packet[..n]);
        if self.pending.len() == MAX_PENDING {
            self.pending.pop_front();
        }
        self.pending.push_back((self.next, id));
        self.next = self.next.wrapping_add(1);
    }

    /// The kernel refused a packet with `errno`: a packet it had already numbered takes
    /// its number with it.
    pub fn refused(&mut self, errno: Errno) {
        if matches!(errno, Errno::EPERM | Errno::ENETDOWN) {
            self.next = self.next.wrapping_add(1);
        }
    }

    /// Reads the stamps queued on `fd` (while probes wait for theirs) and hands each to
    /// `f` with the first bytes of its probe. Returns how many were handed.
    pub fn read(
        &mut self,
        fd: BorrowedFd<'_>,
        stamps: &KernelStamps,
        mut f: impl FnMut(Instant, &[u8]),
    ) -> Result<usize, Error> {
        let mut handed = 0;
        // Stamps for no pending probe are of no use: no system call for them.
        while !self.pending.is_empty() {
            let batch = self.pending.len().min(BATCH);
            let mut headers = MultiHeaders::<()>::preallocate(
                batch,
                Some(nix::cmsg_space!(
                    Timestamps,
                    nix::libc::sock_extended_err,
                    nix::libc::sockaddr_in6
                )),
            );
            // No payload: OPT_TSONLY returns none.
            let mut iovs: [[IoSliceMut<'_>; 0]; BATCH] = std::array::from_fn(|_| []);
            let got = match recvmmsg(
                fd.as_raw_fd(),
                &mut headers,
                iovs.iter_mut(),
                MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT,
                None,
            ) {
                Ok(msgs) => msgs,
                Err(Errno::EAGAIN) => return Ok(handed),
                Err(Errno::EINTR) => continue,
                Err(source) => {
                    return Err(Error::Socket {
                        what: "recvmmsg (transmit stamps)",
                        source,
                    })
                }
            };
            let mut n = 0;
            for msg in got {
                n += 1;
                let (mut at, mut number) = (None, None);
                for c in msg.cmsgs().into_iter().flatten() {
                    match c {
                        ControlMessageOwned::ScmTimestampsns(t) => {
                            at = Some(stamps.instant(t.system.tv_sec(), t.system.tv_nsec()));
                        }
                        ControlMessageOwned::Ipv4RecvErr(e, _)
                        | ControlMessageOwned::Ipv6RecvErr(e, _)
                            if e.ee_origin == ORIGIN_TIMESTAMPING && e.ee_info == TSTAMP_SND =>
                        {
                            number = Some(e.ee_data);
                        }
                        _ => {}
                    }
                }
                if let (Some(at), Some(number)) = (at, number) {
                    if let Some(id) = self.take(number) {
                        f(at, &id);
                        handed += 1;
                    }
                }
            }
            if n < batch {
                break;
            }
        }
        Ok(handed)
    }

    /// The probe numbered `number`, forgetting the older ones (never stamped).
    fn take(&mut self, number: u32) -> Option<[u8; PROBE_ID_LEN]> {
        // Numbers wrap: "older" is at most half the number space behind.
        let behind = |n: u32| (number.wrapping_sub(n) as i32) > 0;
        while self.pending.front().is_some_and(|&(n, _)| behind(n)) {
            self.pending.pop_front();
        }
        match self.pending.front() {
            Some(&(n, id)) if n == number => {
                self.pending.pop_front();
                Some(id)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamps_from(next: u32) -> TxStamps {
        TxStamps {
            next,
            pending: VecDeque::new(),
        }
    }

    fn probe(n: u8) -> [u8; PROBE_ID_LEN] {
        [n; PROBE_ID_LEN]
    }

    #[test]
    fn a_stamp_finds_its_probe_and_the_older_unstamped_ones_are_forgotten() {
        let mut t = stamps_from(0);
        for n in 1..=4 {
            t.sent(&probe(n));
        }
        assert_eq!(t.take(1), Some(probe(2)), "probe 1 never got a stamp");
        assert_eq!(t.take(0), None, "gone");
        assert_eq!(t.take(3), Some(probe(4)));
        assert!(t.pending.is_empty());
        assert_eq!(t.take(4), None, "not sent yet");
    }

    #[test]
    fn numbers_wrap_and_refusals_after_numbering_take_one() {
        let mut t = stamps_from(u32::MAX);
        t.sent(&probe(1));
        t.refused(Errno::EPERM);
        t.refused(Errno::ENETUNREACH);
        t.sent(&probe(2));
        assert_eq!(t.take(1), Some(probe(2)));
        assert!(t.pending.is_empty(), "u32::MAX is behind 1");
    }

    #[test]
    fn a_short_packet_keeps_what_it_has() {
        let mut t = stamps_from(0);
        t.sent(&[0x45, 1, 2]);
        let mut want = [0u8; PROBE_ID_LEN];
        want[..3].copy_from_slice(&[0x45, 1, 2]);
        assert_eq!(t.take(0), Some(want));
    }
}
