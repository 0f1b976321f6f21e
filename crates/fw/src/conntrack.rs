//! Connection tracking: what `--ctstate` sees, nf_conntrack's essentials.
//!
//! A connection is keyed by its two endpoints in a canonical order (address, port or
//! ICMP identifier; the lower first) and the protocol, so either direction finds it with
//! one hash lookup. It remembers which endpoint opened it, whether a reply was seen, and
//! for TCP a simplified state. A packet's state, as Linux assigns it:
//!
//! - **NEW**: the first packet of a connection, and later packets from the opener until
//!   the other side answers. TCP opens with a SYN, or (as Linux's default
//!   `nf_conntrack_tcp_loose=1`) mid-stream with a plain ACK; UDP and other protocols with
//!   any packet; ICMP with a query (echo, timestamp, information, address mask request).
//! - **ESTABLISHED**: a reply, and every packet of a connection once a reply was seen.
//! - **RELATED**: an ICMP error (unreachable, source quench, redirect, time exceeded,
//!   parameter problem) quoting a packet of a tracked connection.
//! - **INVALID**: anything else: TCP flag combinations Linux refuses, a TCP FIN, RST or
//!   SYN/ACK with no connection, an ICMP reply or error with none, other ICMP types, and
//!   fragments (the driver reassembles first, as Linux's conntrack does).
//!
//! Simplified from Linux: no TCP window tracking (a packet of a known connection is
//! never INVALID for its sequence numbers), TCP's closing states are FIN_WAIT (one FIN
//! seen), TIME_WAIT (both) and CLOSE (a RST); no helpers (FTP, SIP), so no expectations.
//! A NEW connection is entered only when the rules accept its first packet ([`Ct::confirm`],
//! Linux confirms at the end of the hook); packets of known connections update it at once.
//!
//! The table is bounded ([`CtConfig::max`], 65,536 by default, about 100 bytes each) and
//! entries time out as Linux's defaults ([`Timeouts`]); a new connection on a full table
//! evicts the one nearest its timeout (an unanswered SYN long before an established
//! connection). Expiry is lazy: each entry is filed once under its deadline; traffic
//! moves only the deadline, and a filed entry found refreshed is filed again.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;
use core::time::Duration;

use hashbrown::HashTable;
use vtnt_record::Instant;

use crate::hash::hash2;
use crate::packet::Headers;
use crate::rule::CtState;

/// Timeouts by state (Linux's defaults, net.netfilter.nf_conntrack_*_timeout*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub tcp_syn_sent: Duration,
    pub tcp_syn_recv: Duration,
    pub tcp_established: Duration,
    pub tcp_fin_wait: Duration,
    pub tcp_time_wait: Duration,
    pub tcp_close: Duration,
    /// UDP before a reply, and after (`udp_timeout_stream`).
    pub udp: Duration,
    pub udp_stream: Duration,
    pub icmp: Duration,
    pub generic: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        let s = Duration::from_secs;
        Timeouts {
            tcp_syn_sent: s(120),
            tcp_syn_recv: s(60),
            tcp_established: s(432_000),
            tcp_fin_wait: s(120),
            tcp_time_wait: s(120),
            tcp_close: s(10),
            udp: s(30),
            udp_stream: s(120),
            icmp: s(30),
            generic: s(600),
        }
    }
}

/// Settings of the connection table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtConfig {
    /// Connections at most (at least 1).
    pub max: usize,
    pub timeouts: Timeouts,
}

impl Default for CtConfig {
    fn default() -> CtConfig {
        CtConfig {
            max: 65_536,
            timeouts: Timeouts::default(),
        }
    }
}

/// Counters since the table was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CtStats {
    /// Connections now.
    pub live: usize,
    pub created: u64,
    pub expired: u64,
    /// Connections removed to make room for a new one.
    pub evicted: u64,
    /// Packets found INVALID.
    pub invalid: u64,
}

/// An endpoint: address and port (ICMP: the query identifier).
type End = (u32, u16);

/// A connection's key: its endpoints, lower first, and the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    lo: End,
    hi: End,
    proto: u8,
}

impl Key {
    fn hash(&self) -> u64 {
        let (lo, hi) = (self.lo, self.hi);
        hash2(
            u64::from(lo.0) << 32 | u64::from(hi.0),
            u64::from(lo.1) << 32 | u64::from(hi.1) << 16 | u64::from(self.proto),
        )
    }
    /// The key of a packet from `a` to `b`, and whether `a` is the lower endpoint.
    fn new(a: End, b: End, proto: u8) -> (Key, bool) {
        match a <= b {
            true => (
                Key {
                    lo: a,
                    hi: b,
                    proto,
                },
                true,
            ),
            false => (
                Key {
                    lo: b,
                    hi: a,
                    proto,
                },
                false,
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tcp {
    SynSent,
    SynRecv,
    Established,
    /// One side sent a FIN (`Conn::fins` says which).
    FinWait,
    TimeWait,
    Close,
}

#[derive(Debug, Clone, Copy)]
struct Conn {
    key: Key,
    /// The opener is the lower endpoint.
    opener_lo: bool,
    seen_reply: bool,
    tcp: Tcp,
    /// FINs seen: bit 0 from the lower endpoint, bit 1 from the higher.
    fins: u8,
    deadline: Instant,
    /// The deadline it is filed under in the expiry set.
    filed: Instant,
}

/// What tracking found for a packet, to hand to [`Ct::confirm`] once the rules decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Track {
    pub state: CtState,
    /// A new connection to enter if the packet is accepted.
    new: Option<(Key, bool, Tcp)>,
}

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_ACK: u8 = 0x10;

/// The flag combinations Linux's conntrack lets through (`tcp_valid_flags`; PSH, ECE
/// and CWR aside).
fn valid_flags(f: u8) -> bool {
    let f = f & !(0x08 | 0x40 | 0x80);
    const OK: [u8; 9] = [
        TCP_SYN,
        TCP_SYN | 0x20,
        TCP_SYN | TCP_ACK,
        TCP_RST,
        TCP_RST | TCP_ACK,
        TCP_FIN | TCP_ACK,
        TCP_FIN | TCP_ACK | 0x20,
        TCP_ACK,
        TCP_ACK | 0x20,
    ];
    OK.contains(&f)
}

/// The connection table. See the module documentation.
#[derive(Debug)]
pub struct Ct {
    config: CtConfig,
    /// Connections by key: their index in `conns`.
    index: HashTable<u32>,
    conns: Vec<Conn>,
    free: Vec<u32>,
    expiry: BTreeSet<(Instant, u32)>,
    stats: CtStats,
}

impl Ct {
    pub fn new(config: CtConfig) -> Ct {
        Ct {
            config: CtConfig {
                max: config.max.max(1),
                ..config
            },
            index: HashTable::new(),
            conns: Vec::new(),
            free: Vec::new(),
            expiry: BTreeSet::new(),
            stats: CtStats::default(),
        }
    }

    pub fn stats(&self) -> CtStats {
        CtStats {
            live: self.index.len(),
            ..self.stats
        }
    }

    fn find(&self, key: &Key) -> Option<u32> {
        let conns = &self.conns;
        self.index
            .find(key.hash(), |&j| conns[j as usize].key == *key)
            .copied()
    }

    fn timeout(&self, c: &Conn) -> Duration {
        let t = &self.config.timeouts;
        match c.key.proto {
            6 => match c.tcp {
                Tcp::SynSent => t.tcp_syn_sent,
                Tcp::SynRecv => t.tcp_syn_recv,
                Tcp::Established => t.tcp_established,
                Tcp::FinWait => t.tcp_fin_wait,
                Tcp::TimeWait => t.tcp_time_wait,
                Tcp::Close => t.tcp_close,
            },
            17 if c.seen_reply => t.udp_stream,
            17 => t.udp,
            1 => t.icmp,
            _ => t.generic,
        }
    }

    /// Tracks a packet (`bytes` its datagram, `h` its headers) at `now`: its state, and
    /// for a known connection the connection's update.
    pub fn track(&mut self, now: Instant, h: &Headers, bytes: &[u8]) -> Track {
        let invalid = |s: &mut Self| {
            s.stats.invalid += 1;
            Track {
                state: CtState::Invalid,
                new: None,
            }
        };
        if h.fragment || h.more_fragments {
            return invalid(self);
        }
        let (src, dst) = (u32::from(h.src), u32::from(h.dst));
        let (a, b) = match h.proto {
            6 | 17 => ((src, h.sport), (dst, h.dport)),
            1 => match h.icmp_type() {
                8 | 13 | 15 | 17 | 0 | 14 | 16 | 18 => ((src, h.icmp_id), (dst, h.icmp_id)),
                3 | 4 | 5 | 11 | 12 => return self.related(h, bytes),
                _ => return invalid(self),
            },
            _ => ((src, 0), (dst, 0)),
        };
        if h.proto == 6 && !valid_flags(h.tcp_flags) {
            return invalid(self);
        }
        let (key, from_lo) = Key::new(a, b, h.proto);
        // A connection past its deadline is gone even before the driver's next expiry.
        if let Some(i) = self.find(&key) {
            if self.conns[i as usize].deadline <= now {
                self.remove(i);
                self.stats.expired += 1;
            }
        }
        let Some(i) = self.find(&key) else {
            let tcp = match h.proto {
                6 => match h.tcp_flags & (TCP_SYN | TCP_ACK | TCP_RST | TCP_FIN) {
                    TCP_SYN => Tcp::SynSent,
                    TCP_ACK => Tcp::Established,
                    _ => return invalid(self),
                },
                // a reply type with no query
                1 if matches!(h.icmp_type(), 0 | 14 | 16 | 18) => return invalid(self),
                _ => Tcp::Established,
            };
            return Track {
                state: CtState::New,
                new: Some((key, from_lo, tcp)),
            };
        };
        let c = &mut self.conns[i as usize];
        let reply = from_lo != c.opener_lo;
        c.seen_reply |= reply;
        if h.proto == 6 {
            Self::tcp_step(c, h.tcp_flags, reply, from_lo);
        }
        let state = if c.seen_reply {
            CtState::Established
        } else {
            CtState::New
        };
        let c = *c;
        self.conns[i as usize].deadline = now + self.timeout(&c);
        Track { state, new: None }
    }

    /// TCP's state after a packet with `flags` (`reply`: from the side that did not open).
    fn tcp_step(c: &mut Conn, flags: u8, reply: bool, from_lo: bool) {
        let f = flags & (TCP_SYN | TCP_ACK | TCP_RST | TCP_FIN);
        c.tcp = match (c.tcp, f, reply) {
            (_, f, _) if f & TCP_RST != 0 => Tcp::Close,
            (Tcp::TimeWait | Tcp::Close, TCP_SYN, false) => {
                // a new connection on the same endpoints
                (c.seen_reply, c.fins) = (false, 0);
                Tcp::SynSent
            }
            (Tcp::SynSent, f, true) if f == TCP_SYN | TCP_ACK => Tcp::SynRecv,
            (Tcp::SynRecv, TCP_ACK, false) => Tcp::Established,
            (s, f, _) if f & TCP_FIN != 0 => {
                c.fins |= if from_lo { 1 } else { 2 };
                match (s, c.fins) {
                    (_, 3) => Tcp::TimeWait,
                    _ => Tcp::FinWait,
                }
            }
            (s, _, _) => s,
        };
    }

    /// An ICMP error: RELATED when it quotes a packet of a known connection.
    fn related(&mut self, h: &Headers, bytes: &[u8]) -> Track {
        let quoted = bytes.get(h.ihl + 8..h.len).map(Headers::parse_quoted);
        let known = match quoted {
            Some(Ok(q)) if !q.fragment => {
                let (s, d) = (u32::from(q.src), u32::from(q.dst));
                let (a, b) = match q.proto {
                    6 | 17 => ((s, q.sport), (d, q.dport)),
                    1 => ((s, q.icmp_id), (d, q.icmp_id)),
                    _ => ((s, 0), (d, 0)),
                };
                self.find(&Key::new(a, b, q.proto).0).is_some()
            }
            _ => false,
        };
        match known {
            true => Track {
                state: CtState::Related,
                new: None,
            },
            false => {
                self.stats.invalid += 1;
                Track {
                    state: CtState::Invalid,
                    new: None,
                }
            }
        }
    }

    /// Enters the new connection of `t` (its packet was accepted). A full table first
    /// loses the connection nearest its timeout.
    pub fn confirm(&mut self, now: Instant, t: &Track) {
        let Some((key, from_lo, tcp)) = t.new else {
            return;
        };
        if self.find(&key).is_some() {
            return;
        }
        self.expire(now);
        if self.index.len() >= self.config.max {
            self.evict_one();
        }
        let mut c = Conn {
            key,
            opener_lo: from_lo,
            seen_reply: false,
            tcp,
            fins: 0,
            deadline: now,
            filed: now,
        };
        c.deadline = now + self.timeout(&c);
        c.filed = c.deadline;
        let i = match self.free.pop() {
            Some(i) => {
                self.conns[i as usize] = c;
                i
            }
            None => {
                self.conns.push(c);
                self.conns.len() as u32 - 1
            }
        };
        let conns = &self.conns;
        self.index
            .insert_unique(key.hash(), i, |&j| conns[j as usize].key.hash());
        self.expiry.insert((c.deadline, i));
        self.stats.created += 1;
    }

    fn remove(&mut self, i: u32) {
        let key = self.conns[i as usize].key;
        let conns = &self.conns;
        if let Ok(e) = self
            .index
            .find_entry(key.hash(), |&j| conns[j as usize].key == key)
        {
            e.remove();
        }
        self.free.push(i);
    }

    /// Removes the connection filed first, refiling those refreshed since.
    fn evict_one(&mut self) {
        while let Some((at, i)) = self.expiry.pop_first() {
            let c = &mut self.conns[i as usize];
            if c.deadline > at {
                c.filed = c.deadline;
                self.expiry.insert((c.deadline, i));
                continue;
            }
            self.remove(i);
            self.stats.evicted += 1;
            return;
        }
    }

    /// The earliest time a connection may expire, if any is live.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.expiry.first().map(|&(at, _)| at)
    }

    /// Removes the connections whose deadline has passed by `now`.
    pub fn expire(&mut self, now: Instant) {
        while let Some(&(at, i)) = self.expiry.first() {
            if at > now {
                return;
            }
            self.expiry.pop_first();
            let c = &mut self.conns[i as usize];
            if c.deadline > at {
                c.filed = c.deadline;
                self.expiry.insert((c.deadline, i));
            } else {
                self.remove(i);
                self.stats.expired += 1;
            }
        }
    }
}

/// Heap bytes per tracked connection, roughly: the entry, its index slot (with hashbrown's
/// slack), its expiry entry.
pub const BYTES_PER_CONN: usize = core::mem::size_of::<Conn>() + 10 + 32;

#[cfg(test)]
mod tests {
    use super::*;
    use vtnt_wire::build::{self, Ip};

    fn tcp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, flags: u8) -> ([u8; 64], usize) {
        let mut b = [0u8; 64];
        let ip = Ip {
            src: src.into(),
            dst: dst.into(),
            ttl: 64,
            tos: 0,
            ipid: 1,
        };
        let t = build::Tcp {
            sport,
            dport,
            seq: 1,
            ack: 1,
            flags,
            window: 1,
        };
        let n = build::tcp(&mut b, &ip, &t).unwrap();
        (b, n)
    }

    fn step(ct: &mut Ct, now: u64, p: ([u8; 64], usize), accept: bool) -> CtState {
        let h = Headers::parse(&p.0[..p.1]).unwrap();
        let t = ct.track(Instant::from_millis(now), &h, &p.0[..p.1]);
        if accept {
            ct.confirm(Instant::from_millis(now), &t);
        }
        t.state
    }

    const A: [u8; 4] = [192, 0, 2, 1];
    const B: [u8; 4] = [198, 51, 100, 2];

    #[test]
    fn a_tcp_handshake_becomes_established() {
        let mut ct = Ct::new(CtConfig::default());
        assert_eq!(
            step(&mut ct, 0, tcp(A, B, 1000, 80, TCP_SYN), true),
            CtState::New
        );
        assert_eq!(
            step(&mut ct, 1, tcp(A, B, 1000, 80, TCP_SYN), true),
            CtState::New
        );
        let synack = TCP_SYN | TCP_ACK;
        assert_eq!(
            step(&mut ct, 2, tcp(B, A, 80, 1000, synack), true),
            CtState::Established
        );
        assert_eq!(
            step(&mut ct, 3, tcp(A, B, 1000, 80, TCP_ACK), true),
            CtState::Established
        );
        assert_eq!(ct.stats().live, 1);
        // a FIN and a RST with no connection are INVALID; a stray ACK is picked up
        assert_eq!(
            step(&mut ct, 4, tcp(A, B, 1, 2, TCP_FIN | TCP_ACK), true),
            CtState::Invalid
        );
        assert_eq!(
            step(&mut ct, 4, tcp(A, B, 1, 2, TCP_RST), true),
            CtState::Invalid
        );
        assert_eq!(
            step(&mut ct, 4, tcp(A, B, 1, 2, TCP_SYN | TCP_FIN), true),
            CtState::Invalid
        );
        assert_eq!(
            step(&mut ct, 4, tcp(A, B, 1, 2, TCP_ACK), true),
            CtState::New
        );
    }

    #[test]
    fn a_dropped_first_packet_leaves_no_connection() {
        let mut ct = Ct::new(CtConfig::default());
        step(&mut ct, 0, tcp(A, B, 1000, 80, TCP_SYN), false);
        assert_eq!(ct.stats().live, 0);
        let synack = TCP_SYN | TCP_ACK;
        assert_eq!(
            step(&mut ct, 1, tcp(B, A, 80, 1000, synack), true),
            CtState::Invalid
        );
    }

    #[test]
    fn connections_time_out_and_a_full_table_evicts_the_oldest() {
        let config = CtConfig {
            max: 2,
            ..CtConfig::default()
        };
        let mut ct = Ct::new(config);
        step(&mut ct, 0, tcp(A, B, 1, 80, TCP_SYN), true); // SYN_SENT: 120 s
        step(&mut ct, 0, tcp(A, B, 2, 80, TCP_ACK), true); // picked up: 5 days
        step(&mut ct, 1000, tcp(A, B, 3, 80, TCP_SYN), true);
        assert_eq!(ct.stats().evicted, 1);
        assert_eq!(ct.stats().live, 2);
        // the established one survived
        assert_eq!(
            step(&mut ct, 1001, tcp(B, A, 80, 2, TCP_ACK), true),
            CtState::Established
        );
        ct.expire(Instant::from_millis(1000 + 120_001));
        assert_eq!((ct.stats().live, ct.stats().expired), (1, 1));
    }

    #[test]
    fn icmp_errors_about_known_flows_are_related() {
        let mut ct = Ct::new(CtConfig::default());
        let p = tcp(A, B, 1000, 80, TCP_SYN);
        step(&mut ct, 0, p, true);
        let mut err = [0u8; 128];
        let ip = Ip {
            src: [203, 0, 113, 1].into(),
            dst: A.into(),
            ttl: 64,
            tos: 0,
            ipid: 2,
        };
        let e = build::IcmpError {
            icmp_type: 11,
            code: 0,
            original: &p.0[..p.1],
            quote_len: 28,
            mpls: &[],
        };
        let n = build::icmp_error(&mut err, &ip, &e).unwrap();
        let h = Headers::parse(&err[..n]).unwrap();
        assert_eq!(
            ct.track(Instant::ZERO, &h, &err[..n]).state,
            CtState::Related
        );
        let q = tcp(A, B, 1001, 80, TCP_SYN);
        let e = build::IcmpError {
            original: &q.0[..q.1],
            ..e
        };
        let n = build::icmp_error(&mut err, &ip, &e).unwrap();
        let h = Headers::parse(&err[..n]).unwrap();
        assert_eq!(
            ct.track(Instant::ZERO, &h, &err[..n]).state,
            CtState::Invalid
        );
    }
}
