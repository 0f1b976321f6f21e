//! A probe's identity as the engine matches replies to it, read from packet bytes: what
//! an outbound probe carries ([`probe`]) and what a reply says of the probe it answers
//! ([`reply`]): an echo reply's id and sequence, a TCP answer's ports and
//! acknowledgement, or the quoted probe inside an ICMP error.

use core::net::IpAddr;

use vtnt_wire::reply::{parse, Body, QuotedTransport};
use vtnt_wire::{icmp_type, tcp_flags};

/// What tells one probe from another towards the same target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ident {
    /// ICMP echo request: identifier and sequence number.
    Icmp { ident: u16, seq: u16 },
    /// UDP: ports and checksum (Paris UDP varies the checksum, classic UDP the port).
    Udp {
        sport: u16,
        dport: u16,
        checksum: u16,
    },
    /// TCP: ports and sequence number.
    Tcp { sport: u16, dport: u16, seq: u32 },
}

/// A probe's identity: where it was sent and what it carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub target: IpAddr,
    pub ident: Ident,
}

/// An outbound probe's key and, for TCP, its acknowledgement number (an ACK probe's
/// RST answers with it as its sequence number); its TTL (hop limit) as it left, which
/// tells a trace's hops apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub key: Key,
    pub tcp_ack: Option<u32>,
    pub ttl: u8,
}

/// What an inbound packet says of the probe it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The probe's whole key (echo reply, ICMP error quoting it).
    Exact(Key),
    /// A TCP answer from the target: the probe had these ports, and either its sequence
    /// number was `ack - 1` (a SYN answered) or its acknowledgement was `seq` (an ACK
    /// answered by a RST).
    Tcp {
        target: IpAddr,
        sport: u16,
        dport: u16,
        seq: u32,
        ack: u32,
        flags: u8,
    },
    /// A UDP datagram from the target: the probe had these ports (its checksum is not
    /// echoed).
    Udp {
        target: IpAddr,
        sport: u16,
        dport: u16,
    },
}

/// The identity of the outbound IP datagram `b`, if it is a probe (ICMP echo request,
/// UDP or TCP); `None` for anything else or bytes that do not parse.
pub fn probe(b: &[u8]) -> Option<Probe> {
    let r = parse(b).ok()?;
    let target = r.dst;
    let (ident, tcp_ack) = match r.body {
        Body::Echo {
            icmp_type: t,
            ident,
            seq,
            ..
        } if is_echo_request(t) => (Ident::Icmp { ident, seq }, None),
        Body::Udp {
            sport,
            dport,
            checksum,
            ..
        } => (
            Ident::Udp {
                sport,
                dport,
                checksum,
            },
            None,
        ),
        Body::Tcp {
            sport,
            dport,
            seq,
            ack,
            ..
        } => (Ident::Tcp { sport, dport, seq }, Some(ack)),
        _ => return None,
    };
    Some(Probe {
        key: Key { target, ident },
        tcp_ack,
        ttl: r.ttl,
    })
}

/// What the inbound IP datagram `b` says of the probe it answers, if it can answer one.
pub fn reply(b: &[u8]) -> Option<Answer> {
    let r = parse(b).ok()?;
    Some(match r.body {
        Body::Echo {
            icmp_type: t,
            ident,
            seq,
            ..
        } if is_echo_reply(t) => Answer::Exact(Key {
            target: r.src,
            ident: Ident::Icmp { ident, seq },
        }),
        Body::IcmpError { quote, .. } => {
            let ident = match quote.transport {
                QuotedTransport::Icmp { ident, seq, .. } => Ident::Icmp { ident, seq },
                QuotedTransport::Udp {
                    sport,
                    dport,
                    checksum,
                } => Ident::Udp {
                    sport,
                    dport,
                    checksum,
                },
                QuotedTransport::Tcp { sport, dport, seq } => Ident::Tcp { sport, dport, seq },
                QuotedTransport::Unknown { .. } => return None,
            };
            Answer::Exact(Key {
                target: quote.dst,
                ident,
            })
        }
        Body::Tcp {
            sport,
            dport,
            seq,
            ack,
            flags,
        } => Answer::Tcp {
            target: r.src,
            sport: dport,
            dport: sport,
            seq,
            ack,
            flags,
        },
        Body::Udp { sport, dport, .. } => Answer::Udp {
            target: r.src,
            sport: dport,
            dport: sport,
        },
        _ => return None,
    })
}

impl Answer {
    /// Whether `p` is a probe this packet could answer.
    pub fn fits(&self, p: &Probe) -> bool {
        match (*self, p.key.ident) {
            (Answer::Exact(k), _) => k == p.key,
            (
                Answer::Tcp {
                    target,
                    sport,
                    dport,
                    seq,
                    ack,
                    flags,
                },
                Ident::Tcp {
                    sport: s,
                    dport: d,
                    seq: q,
                },
            ) => {
                let acked = flags & tcp_flags::ACK != 0 && ack.wrapping_sub(1) == q;
                let rst_to_ack = flags & tcp_flags::RST != 0 && p.tcp_ack == Some(seq);
                target == p.key.target && sport == s && dport == d && (acked || rst_to_ack)
            }
            (
                Answer::Udp {
                    target,
                    sport,
                    dport,
                },
                Ident::Udp {
                    sport: s, dport: d, ..
                },
            ) => target == p.key.target && sport == s && dport == d,
            _ => false,
        }
    }
}

fn is_echo_request(t: u8) -> bool {
    t == icmp_type::ECHO_REQUEST || t == vtnt_wire::icmp6_type::ECHO_REQUEST
}

fn is_echo_reply(t: u8) -> bool {
    t == icmp_type::ECHO_REPLY || t == vtnt_wire::icmp6_type::ECHO_REPLY
}
