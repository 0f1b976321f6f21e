//! A trace seen as TNT sees it: one reply per TTL (the first attempt that got one), with
//! the facts the classifier needs (reply kind, reply TTL, quoted TTL, top LSE-TTL) and the
//! echo-reply TTL of the hop's address from the fingerprint pings.
//!
//! Also the reading of a fingerprint ping: the most frequent echo-reply TTL wins, the
//! smallest TTL on a tie (as `sc_tnt` and PyTNT).

use alloc::vec::Vec;
use core::net::IpAddr;

use vtnt_record::{Hop, Ping, Trace};

/// What a reply is, whatever the address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyKind {
    /// ICMP time exceeded in transit.
    TimeExceeded,
    /// ICMP echo reply.
    EchoReply,
    /// ICMP destination unreachable.
    Unreachable,
    /// Anything else (TCP replies, other ICMP).
    Other,
}

impl ReplyKind {
    /// Kind of an ICMP `(type, code)` for the family of `addr`.
    pub fn of(addr: IpAddr, icmp: Option<(u8, u8)>) -> ReplyKind {
        match (addr, icmp) {
            (IpAddr::V4(_), Some((11, 0))) | (IpAddr::V6(_), Some((3, 0))) => {
                ReplyKind::TimeExceeded
            }
            (IpAddr::V4(_), Some((0, 0))) | (IpAddr::V6(_), Some((129, 0))) => ReplyKind::EchoReply,
            (IpAddr::V4(_), Some((3, _))) | (IpAddr::V6(_), Some((1, _))) => ReplyKind::Unreachable,
            _ => ReplyKind::Other,
        }
    }
}

/// The reply TNT keeps for one TTL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathHop {
    /// Index of the reply in `Trace::hops`.
    pub index: usize,
    pub ttl: u8,
    pub addr: IpAddr,
    pub kind: ReplyKind,
    /// Reply TTL (`te` when `kind` is time exceeded).
    pub reply_ttl: u8,
    /// Quoted IP-TTL (time exceeded and unreachable only).
    pub qttl: Option<u8>,
    /// LSE-TTL of the top label stack entry of an RFC 4950 extension.
    pub top_lse_ttl: Option<u8>,
    /// Label of that entry.
    pub top_label: Option<u32>,
    /// Entries in the quoted label stack (0: none).
    pub label_depth: u8,
    /// Echo-reply TTL of `addr` from the fingerprint ping (`er`), when it answered.
    pub er: Option<u8>,
}

impl PathHop {
    /// Builds the view of one reply.
    pub fn from_hop(index: usize, hop: &Hop, er: Option<u8>) -> PathHop {
        let kind = ReplyKind::of(hop.addr, hop.icmp);
        PathHop {
            index,
            ttl: hop.probe_ttl,
            addr: hop.addr,
            kind,
            reply_ttl: hop.reply_ttl,
            qttl: match kind {
                ReplyKind::TimeExceeded | ReplyKind::Unreachable => hop.quoted.map(|q| q.ttl),
                _ => None,
            },
            top_lse_ttl: hop.mpls.first().map(|l| l.ttl),
            top_label: hop.mpls.first().map(|l| l.label),
            label_depth: hop.mpls.len().min(255) as u8,
            er,
        }
    }
    /// True for time-exceeded replies, the only ones FRPLA/RTLA/u-turn apply to.
    pub fn is_time_exceeded(&self) -> bool {
        self.kind == ReplyKind::TimeExceeded
    }
}

/// One entry per TTL from 1 to the highest TTL that got a reply; `None` where nothing
/// answered (or below the trace's first TTL).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Path {
    pub hops: Vec<Option<PathHop>>,
}

impl Path {
    /// The view of `trace`, with echo-reply TTLs looked up by `er`.
    pub fn from_trace(trace: &Trace, er: impl Fn(IpAddr) -> Option<u8>) -> Path {
        let max = trace.hops.iter().map(|h| h.probe_ttl).max().unwrap_or(0) as usize;
        let mut hops: Vec<Option<PathHop>> = Vec::new();
        hops.resize(max, None);
        for (index, hop) in trace.hops.iter().enumerate() {
            if hop.probe_ttl == 0 {
                continue;
            }
            let slot = &mut hops[hop.probe_ttl as usize - 1];
            if slot.is_none() {
                *slot = Some(PathHop::from_hop(index, hop, er(hop.addr)));
            }
        }
        Path { hops }
    }
    /// Number of TTL slots.
    pub fn len(&self) -> usize {
        self.hops.len()
    }
    /// True when nothing answered.
    pub fn is_empty(&self) -> bool {
        self.hops.is_empty()
    }
    /// The hop at slot `i` (TTL `i + 1`); `None` when out of range or unanswered.
    pub fn get(&self, i: usize) -> Option<&PathHop> {
        self.hops.get(i).and_then(Option::as_ref)
    }
    /// Same as [`Path::get`] with a signed index (negative is `None`).
    pub fn at(&self, i: isize) -> Option<&PathHop> {
        if i < 0 {
            None
        } else {
            self.get(i as usize)
        }
    }
    /// Slot of the last hop that answered.
    pub fn last_index(&self) -> Option<usize> {
        self.hops.iter().rposition(Option::is_some)
    }
}

/// The echo-reply TTL a fingerprint ping gives: the most frequent reply TTL among its
/// echo replies, the smallest on a tie; `None` without echo replies.
pub fn ping_reply_ttl(ping: &Ping) -> Option<u8> {
    // Counts by TTL in a flat table (not a map: one less BTreeMap instantiation).
    let mut counts = [0u32; 256];
    for r in &ping.responses {
        if ReplyKind::of(r.from, r.icmp) == ReplyKind::EchoReply {
            counts[usize::from(r.reply_ttl)] += 1;
        }
    }
    let mut best: Option<(u8, u32)> = None;
    for (ttl, &n) in (0..=u8::MAX).zip(counts.iter()) {
        if n > 0 && best.is_none_or(|(_, b)| n > b) {
            best = Some((ttl, n));
        }
    }
    best.map(|(t, _)| t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn first_answering_attempt_wins() {
        let mut t = trace("10.0.0.9", &[]);
        t.hops.push(te(1, "10.0.0.1", 254, 1));
        let mut second = te(1, "10.0.0.2", 254, 1);
        second.probe_id = 2;
        t.hops.push(second);
        t.hops.push(te(3, "10.0.0.3", 252, 1));
        let p = Path::from_trace(&t, |_| Some(60));
        assert_eq!(p.len(), 3);
        assert_eq!(p.get(0).unwrap().addr, ip("10.0.0.1"));
        assert!(p.get(1).is_none());
        assert_eq!(p.get(2).unwrap().er, Some(60));
        assert_eq!(p.last_index(), Some(2));
        assert!(p.at(-1).is_none());
    }

    #[test]
    fn reply_kinds_per_family() {
        let v4 = ip("192.0.2.1");
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(ReplyKind::of(v4, Some((11, 0))), ReplyKind::TimeExceeded);
        assert_eq!(ReplyKind::of(v6, Some((3, 0))), ReplyKind::TimeExceeded);
        assert_eq!(ReplyKind::of(v4, Some((0, 0))), ReplyKind::EchoReply);
        assert_eq!(ReplyKind::of(v6, Some((129, 0))), ReplyKind::EchoReply);
        assert_eq!(ReplyKind::of(v4, Some((3, 3))), ReplyKind::Unreachable);
        assert_eq!(ReplyKind::of(v4, None), ReplyKind::Other);
    }

    #[test]
    fn ping_mode_smallest_on_tie() {
        assert_eq!(
            ping_reply_ttl(&ping("10.0.0.1", &[60, 61, 61, 60])),
            Some(60)
        );
        assert_eq!(ping_reply_ttl(&ping("10.0.0.1", &[250, 61, 61])), Some(61));
        assert_eq!(ping_reply_ttl(&ping("10.0.0.1", &[])), None);
    }
}
