//! The IP header fields a walk reads and writes, for either family: IPv4, and IPv6
//! (RFC 8200) with its lab addresses taken back to their IPv4 twins
//! ([`crate::addr::from_v6`]) so that prefixes, owners, routes and LSPs serve both
//! families unchanged. Every accessor tolerates a packet cut short (it was checked once
//! on entry by [`total_len`]).

use core::net::{Ipv4Addr, Ipv6Addr};

use vtnt_wire::build::{self, Echo, IcmpError, Ip, Tcp};
use vtnt_wire::build6;
use vtnt_wire::ipv6::Ip6;
use vtnt_wire::mpls::Lse;
use vtnt_wire::{icmp6_type, icmp_type, proto, reply};

use crate::addr::{from_v6, to_v6};
use crate::net::routing::mix;

/// Whether `b` is an IPv6 packet.
pub(crate) fn is_v6(b: &[u8]) -> bool {
    b.first().is_some_and(|v| v >> 4 == 6)
}

/// Where the transport header starts (IPv6: no extension header is looked into).
fn l4(b: &[u8]) -> usize {
    if is_v6(b) {
        40
    } else {
        usize::from(b.first().map_or(5, |v| v & 0x0f)) * 4
    }
}

/// The upper-layer protocol (IPv6: the first next header).
fn protocol(b: &[u8]) -> u8 {
    let at = if is_v6(b) { 6 } else { 9 };
    b.get(at).copied().unwrap_or(0)
}

/// The length of a well-formed IPv4 or IPv6 packet at the start of `b` (bytes past it
/// are padding); `None` for anything else.
pub(crate) fn total_len(b: &[u8]) -> Option<usize> {
    if is_v6(b) {
        let n = 40 + usize::from(u16::from_be_bytes([*b.get(4)?, *b.get(5)?]));
        return (n <= b.len()).then_some(n);
    }
    if b.len() < 20 || b[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(b[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([b[2], b[3]]));
    (ihl >= 20 && total <= b.len() && total >= ihl).then_some(total)
}

/// The per-flow hash ECMP uses: addresses, protocol and the first four transport bytes
/// (ports, or ICMP type, code and checksum: what Paris traceroute keeps constant); over
/// IPv6 the flow label too (RFC 6437).
pub(crate) fn flow_hash(b: &[u8]) -> u64 {
    let word = |at: usize| -> u64 {
        b.get(at..at + 4).map_or(0, |w| {
            u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
        })
    };
    let proto = u64::from(protocol(b));
    let h = if is_v6(b) {
        (word(20) ^ (word(0) & 0xf_ffff)) ^ (word(36) << 32) ^ proto.rotate_left(17)
    } else {
        word(12) ^ (word(16) << 32) ^ proto.rotate_left(17)
    };
    mix(h ^ word(l4(b)).rotate_left(29))
}

/// The IP-TTL or hop limit.
pub(crate) fn ttl(b: &[u8]) -> u8 {
    let at = if is_v6(b) { 7 } else { 8 };
    b.get(at).copied().unwrap_or(0)
}

/// Rewrites the IP-TTL, updating the header checksum incrementally (RFC 1624), or the
/// hop limit (IPv6 has no header checksum).
pub(crate) fn set_ttl(b: &mut [u8], ttl: u8) {
    if is_v6(b) {
        if let Some(h) = b.get_mut(7) {
            *h = ttl;
        }
        return;
    }
    if b.len() < 20 {
        return;
    }
    let old = u16::from_be_bytes([b[8], b[9]]);
    b[8] = ttl;
    let new = u16::from_be_bytes([b[8], b[9]]);
    let hc = u16::from_be_bytes([b[10], b[11]]);
    let mut s = u32::from(!hc) + u32::from(!old) + u32::from(new);
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    b[10..12].copy_from_slice(&(!(s as u16)).to_be_bytes());
}

fn v4_at(b: &[u8], at: usize) -> Ipv4Addr {
    match b.get(at..at + 4) {
        Some(w) => Ipv4Addr::new(w[0], w[1], w[2], w[3]),
        None => Ipv4Addr::UNSPECIFIED,
    }
}

fn v6_at(b: &[u8], at: usize) -> Ipv6Addr {
    b.get(at..at + 16)
        .and_then(|w| <[u8; 16]>::try_from(w).ok())
        .map_or(Ipv6Addr::UNSPECIFIED, Ipv6Addr::from)
}

/// The source address of an IPv6 packet as it is written.
pub(crate) fn src6(b: &[u8]) -> Ipv6Addr {
    v6_at(b, 8)
}

/// The source address, as the lab's IPv4 address (0.0.0.0: an IPv6 source outside the
/// lab's addresses).
pub(crate) fn src(b: &[u8]) -> Ipv4Addr {
    if is_v6(b) {
        from_v6(src6(b)).unwrap_or(Ipv4Addr::UNSPECIFIED)
    } else {
        v4_at(b, 12)
    }
}

/// The destination address, as the lab's IPv4 address (0.0.0.0, which no prefix holds:
/// an IPv6 destination outside the lab's addresses).
pub(crate) fn dst(b: &[u8]) -> Ipv4Addr {
    if is_v6(b) {
        from_v6(v6_at(b, 24)).unwrap_or(Ipv4Addr::UNSPECIFIED)
    } else {
        v4_at(b, 16)
    }
}

/// Whether a packet is an ICMP or ICMPv6 error (never answered with another error, RFC
/// 1812, RFC 4443 section 2.4 (e)).
pub(crate) fn is_icmp_error(b: &[u8]) -> bool {
    let at = b.get(l4(b));
    if is_v6(b) {
        protocol(b) == proto::ICMPV6 && at.is_some_and(|&t| t < 128)
    } else {
        protocol(b) == proto::ICMP && matches!(at, Some(3 | 4 | 5 | 11 | 12))
    }
}

/// Bytes of data a TCP segment carries past its header (0 when cut short).
pub(crate) fn tcp_data_len(b: &[u8]) -> u32 {
    let ihl = l4(b);
    let total = if is_v6(b) {
        b.get(4..6)
            .map_or(0, |w| 40 + usize::from(u16::from_be_bytes([w[0], w[1]])))
    } else {
        b.get(2..4)
            .map_or(0, |w| usize::from(u16::from_be_bytes([w[0], w[1]])))
    };
    let doff = b.get(ihl + 12).map_or(20, |v| usize::from(v >> 4) * 4);
    total.saturating_sub(ihl + doff) as u32
}

/// The label an LSP gives a packet: IPv4 explicit null (0) is IPv6 explicit null (2,
/// RFC 3032 section 2.1) over an IPv6 packet.
pub(crate) fn explicit_null(label: Option<u32>, b: &[u8]) -> Option<u32> {
    match label {
        Some(0) if is_v6(b) => Some(2),
        l => l,
    }
}

/// A packet's reply view, either family.
pub(crate) fn parse(b: &[u8]) -> vtnt_wire::Result<reply::Reply<'_>> {
    if is_v6(b) {
        vtnt_wire::reply6::parse(b)
    } else {
        reply::parse(b)
    }
}

/// The header of a packet the lab originates, in the family of the packet it answers.
pub(crate) enum Header {
    V4(Ip),
    V6(Ip6),
}

impl Header {
    /// From the lab's IPv4 address `src` to the source of `orig`, initial TTL `v4` or
    /// hop limit `v6` (its IP ID drawn by `ipid`, IPv4 only).
    pub fn answering(
        orig: &[u8],
        src: Ipv4Addr,
        (v4, v6): (u8, u8),
        ipid: impl FnOnce() -> u16,
    ) -> Header {
        if is_v6(orig) {
            Header::V6(Ip6 {
                src: to_v6(src),
                dst: src6(orig),
                hop_limit: v6,
                traffic_class: 0,
                flow_label: 0,
            })
        } else {
            Header::V4(Ip {
                src,
                dst: v4_at(orig, 12),
                ttl: v4,
                tos: 0,
                ipid: ipid(),
            })
        }
    }

    /// An IPv6 header's source becomes `src`'s IPv4-mapped address (`::ffff:a.b.c.d`).
    pub fn answer_from_mapped(&mut self, src: Ipv4Addr) {
        if let Header::V6(ip) = self {
            ip.src = src.to_ipv6_mapped();
        }
    }

    /// Sets the initial TTL (hop limit) to `v4` or `v6` as the family is.
    pub fn set_ttl(&mut self, (v4, v6): (u8, u8)) {
        match self {
            Header::V4(ip) => ip.ttl = v4,
            Header::V6(ip) => ip.hop_limit = v6,
        }
    }

    /// The echo request type of this family.
    pub fn echo_request(&self) -> u8 {
        match self {
            Header::V4(_) => icmp_type::ECHO_REQUEST,
            Header::V6(_) => icmp6_type::ECHO_REQUEST,
        }
    }

    /// An echo reply.
    pub fn echo_reply(
        &self,
        buf: &mut [u8],
        ident: u16,
        seq: u16,
        payload: &[u8],
    ) -> vtnt_wire::Result<usize> {
        let e = |icmp_type| Echo {
            icmp_type,
            ident,
            seq,
            payload,
            checksum: None,
        };
        match self {
            Header::V4(ip) => build::icmp_echo(buf, ip, &e(icmp_type::ECHO_REPLY)),
            Header::V6(ip) => build6::icmp6_echo(buf, ip, &e(icmp6_type::ECHO_REPLY)),
        }
    }

    /// An ICMP error named by its ICMPv4 type and code (time exceeded; destination
    /// unreachable: network 0, host 1, port 3), quoting `quote_len` bytes of `orig` and
    /// the RFC 4950 stack `labels`. ICMPv6 (RFC 4443) says it with its own numbers: time
    /// exceeded 3/0; destination unreachable 1 with code 0 (no route), 3 (address
    /// unreachable) or 4 (port unreachable).
    pub fn error(
        &self,
        buf: &mut [u8],
        (ty, code): (u8, u8),
        orig: &[u8],
        quote_len: usize,
        labels: &[Lse],
    ) -> vtnt_wire::Result<usize> {
        let e = |icmp_type, code| IcmpError {
            icmp_type,
            code,
            original: orig,
            quote_len,
            mpls: labels,
        };
        match self {
            Header::V4(ip) => build::icmp_error(buf, ip, &e(ty, code)),
            Header::V6(ip) => {
                let (ty, code) = match (ty, code) {
                    (icmp_type::TIME_EXCEEDED, _) => (icmp6_type::TIME_EXCEEDED, 0),
                    (_, 0) => (icmp6_type::DEST_UNREACH, 0),
                    (_, 1) => (icmp6_type::DEST_UNREACH, 3),
                    _ => (icmp6_type::DEST_UNREACH, 4),
                };
                build6::icmp6_error(buf, ip, &e(ty, code))
            }
        }
    }

    /// A TCP segment without options or payload.
    pub fn tcp(&self, buf: &mut [u8], t: &Tcp) -> vtnt_wire::Result<usize> {
        match self {
            Header::V4(ip) => build::tcp(buf, ip, t),
            Header::V6(ip) => build6::tcp6(buf, ip, t),
        }
    }
}
