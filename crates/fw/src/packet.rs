//! What the rules look at in a packet ([`Packet`]), and reading it from the bytes of an
//! IPv4 datagram ([`Headers::parse`]).
//!
//! ICMP's type and code travel in the port fields (as Open vSwitch keeps them), so the
//! classifier hashes an ICMP type match exactly as a port match; rules say which they
//! mean through the protocol, which every port or ICMP match requires.

use core::net::Ipv4Addr;

use crate::rule::CtState;

/// An interface the firewall's driver registered (`Classifier::interface`), or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IfId(pub u16);

impl IfId {
    /// No interface (INPUT has no output interface, OUTPUT no input one).
    pub const NONE: IfId = IfId(u16::MAX);
}

/// The fields of a packet the rules match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Packet {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub proto: u8,
    /// TCP or UDP source port; ICMP: the type; 0 otherwise.
    pub sport: u16,
    /// TCP or UDP destination port; ICMP: the code; 0 otherwise.
    pub dport: u16,
    /// TCP flags (0 for other protocols).
    pub tcp_flags: u8,
    /// A fragment other than the first: no transport header, so no port, ICMP or flag
    /// match holds for it.
    pub fragment: bool,
    pub in_if: IfId,
    pub out_if: IfId,
    /// Its connection-tracking state (what `--ctstate` sees).
    pub state: CtState,
}

impl Packet {
    /// A packet of `headers` between two interfaces, in state `state`.
    pub fn new(headers: &Headers, in_if: IfId, out_if: IfId, state: CtState) -> Packet {
        Packet {
            src: headers.src,
            dst: headers.dst,
            proto: headers.proto,
            sport: headers.sport,
            dport: headers.dport,
            tcp_flags: headers.tcp_flags,
            fragment: headers.fragment,
            in_if,
            out_if,
            state,
        }
    }
}

/// Why bytes are not a packet the firewall can judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// Not IPv4, a header length or total length that does not fit the bytes.
    #[error("not a well-formed IPv4 datagram")]
    Ip,
    /// The first fragment is too short for its TCP, UDP or ICMP header.
    #[error("transport header cut short")]
    Transport,
}

/// What the firewall reads of an IPv4 datagram: the match fields and what connection
/// tracking and REJECT replies need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headers {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub proto: u8,
    /// As in [`Packet`].
    pub sport: u16,
    pub dport: u16,
    pub tcp_flags: u8,
    pub fragment: bool,
    /// The fragment offset is 0 but more fragments follow.
    pub more_fragments: bool,
    /// IP header length in bytes.
    pub ihl: usize,
    /// IP total length.
    pub len: usize,
    /// ICMP: the identifier of a query (echo, timestamp, ...), 0 otherwise.
    pub icmp_id: u16,
    pub tcp_seq: u32,
    pub tcp_ack: u32,
    /// TCP: bytes of payload after the TCP header.
    pub tcp_payload: usize,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Headers {
    /// Reads an IPv4 datagram (bytes past its total length are ignored). Never panics.
    pub fn parse(b: &[u8]) -> Result<Headers, Malformed> {
        Self::parse_inner(b, false)
    }

    /// Reads the packet an ICMP error quotes: its IP header and at least the first 8
    /// bytes of its transport header (the ports, an ICMP query's identifier), and no
    /// more; its total length may exceed what is quoted.
    pub fn parse_quoted(b: &[u8]) -> Result<Headers, Malformed> {
        Self::parse_inner(b, true)
    }

    fn parse_inner(b: &[u8], quoted: bool) -> Result<Headers, Malformed> {
        if b.len() < 20 || b[0] >> 4 != 4 {
            return Err(Malformed::Ip);
        }
        let ihl = usize::from(b[0] & 0x0f) * 4;
        let len = usize::from(be16(b, 2));
        if ihl < 20 || len < ihl || b.len() < ihl || (!quoted && b.len() < len) {
            return Err(Malformed::Ip);
        }
        let frag = be16(b, 6);
        let fragment = frag & 0x1fff != 0;
        let mut h = Headers {
            src: Ipv4Addr::from(be32(b, 12)),
            dst: Ipv4Addr::from(be32(b, 16)),
            proto: b[9],
            sport: 0,
            dport: 0,
            tcp_flags: 0,
            fragment,
            more_fragments: frag & 0x2000 != 0,
            ihl,
            len,
            icmp_id: 0,
            tcp_seq: 0,
            tcp_ack: 0,
            tcp_payload: 0,
        };
        if fragment {
            return Ok(h);
        }
        let end = if quoted { b.len() } else { len };
        let l4 = &b[ihl..end];
        match h.proto {
            6 => {
                let need = if quoted { 8 } else { 20 };
                if l4.len() < need {
                    return Err(Malformed::Transport);
                }
                h.sport = be16(l4, 0);
                h.dport = be16(l4, 2);
                h.tcp_seq = be32(l4, 4);
                if !quoted {
                    h.tcp_ack = be32(l4, 8);
                    let doff = usize::from(l4[12] >> 4) * 4;
                    if doff < 20 || doff > l4.len() {
                        return Err(Malformed::Transport);
                    }
                    h.tcp_flags = l4[13];
                    h.tcp_payload = l4.len() - doff;
                }
            }
            17 => {
                if l4.len() < 8 {
                    return Err(Malformed::Transport);
                }
                h.sport = be16(l4, 0);
                h.dport = be16(l4, 2);
            }
            1 => {
                if l4.len() < 8 {
                    return Err(Malformed::Transport);
                }
                h.sport = l4[0].into();
                h.dport = l4[1].into();
                h.icmp_id = be16(l4, 4);
            }
            _ => {}
        }
        Ok(h)
    }

    /// The ICMP type (ICMP only).
    pub fn icmp_type(&self) -> u8 {
        self.sport as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[allow(unused_imports)]
    use alloc::{string::ToString, vec, vec::Vec};
    use vtnt_wire::build::{self, Ip};

    const IP: Ip = Ip {
        src: Ipv4Addr::new(192, 0, 2, 1),
        dst: Ipv4Addr::new(198, 51, 100, 7),
        ttl: 64,
        tos: 0,
        ipid: 1,
    };

    #[test]
    fn tcp_udp_and_icmp_fields() {
        let mut b = [0u8; 128];
        let t = build::Tcp {
            sport: 40000,
            dport: 443,
            seq: 7,
            ack: 9,
            flags: 0x12,
            window: 100,
        };
        let n = build::tcp(&mut b, &IP, &t).unwrap();
        let h = Headers::parse(&b[..n]).unwrap();
        assert_eq!(
            (h.proto, h.sport, h.dport, h.tcp_flags),
            (6, 40000, 443, 0x12)
        );
        assert_eq!((h.tcp_seq, h.tcp_ack, h.tcp_payload), (7, 9, 0));
        let u = build::Udp {
            sport: 53,
            dport: 5353,
            payload: &[1, 2, 3],
            checksum: None,
        };
        let n = build::udp(&mut b, &IP, &u).unwrap();
        let h = Headers::parse(&b[..n]).unwrap();
        assert_eq!((h.proto, h.sport, h.dport), (17, 53, 5353));
        let e = build::Echo {
            icmp_type: 8,
            ident: 0x1234,
            seq: 1,
            payload: &[],
            checksum: None,
        };
        let n = build::icmp_echo(&mut b, &IP, &e).unwrap();
        let h = Headers::parse(&b[..n]).unwrap();
        assert_eq!((h.proto, h.sport, h.dport, h.icmp_id), (1, 8, 0, 0x1234));
    }

    #[test]
    fn fragments_and_garbage() {
        let mut b = [0u8; 64];
        let u = build::Udp {
            sport: 1,
            dport: 2,
            payload: &[0; 8],
            checksum: None,
        };
        let n = build::udp(&mut b, &IP, &u).unwrap();
        b[6] = 0x00;
        b[7] = 0x10; // offset 16 bytes: not the first fragment
        let h = Headers::parse(&b[..n]).unwrap();
        assert!(h.fragment);
        assert_eq!((h.sport, h.dport), (0, 0));
        assert_eq!(Headers::parse(&b[..10]), Err(Malformed::Ip));
        assert_eq!(Headers::parse(&b[..n - 1]), Err(Malformed::Ip));
        b[7] = 0;
        b[2..4].copy_from_slice(&24u16.to_be_bytes());
        assert_eq!(Headers::parse(&b[..24]), Err(Malformed::Transport));
    }
}
