//! The summary of a received IP datagram that [`crate::reply::parse`] returns, for IPv4
//! and IPv6 alike, and what the two versions read the same way: the transport header of
//! a datagram and the first 8 bytes of a quoted probe. (Its own module so that
//! [`crate::reply`] and [`crate::reply6`] share it without importing each other. No
//! indexing that could panic here, lengths checked or not: a panic location naming this
//! file would cost the unikernel's image bytes it has not.)

use core::net::IpAddr;

use crate::icmpext::Extensions;
use crate::ipopt::RecordRoute;
use crate::{be16, be32, proto, Error, Result};

/// A received IP datagram, summarised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply<'a> {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IP-TTL (hop limit) as received.
    pub ttl: u8,
    pub tos: u8,
    pub ipid: u16,
    /// IP total length.
    pub len: u16,
    /// The addresses of a record route option in the header, if it has one.
    pub rr: Option<RecordRoute>,
    pub body: Body<'a>,
}

/// What the datagram carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// ICMP time exceeded, destination unreachable or another error quoting a packet
    /// (ICMPv6 types, for an IPv6 packet: [`crate::icmp6_type`]).
    IcmpError {
        icmp_type: u8,
        code: u8,
        /// Bytes 6..8 of the ICMP header: the next-hop MTU of a "fragmentation needed"
        /// (type 3 code 4, RFC 1191); 0 when unused. For ICMPv6, the MTU of a packet too
        /// big (at most 65535 here).
        nhmtu: u16,
        quote: Quote,
        ext: Option<Extensions<'a>>,
    },
    /// ICMP echo request or reply.
    Echo {
        icmp_type: u8,
        ident: u16,
        seq: u16,
        checksum: u16,
        payload: &'a [u8],
    },
    Tcp {
        sport: u16,
        dport: u16,
        seq: u32,
        ack: u32,
        flags: u8,
    },
    Udp {
        sport: u16,
        dport: u16,
        checksum: u16,
        payload: &'a [u8],
    },
    /// Any other protocol or ICMP type.
    Other { protocol: u8 },
}

/// What an ICMP error quotes of the packet that caused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quote {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// The IP-TTL the packet had when it reached the router that answered.
    pub ttl: u8,
    pub tos: u8,
    pub ipid: u16,
    /// IP total length of the quoted packet.
    pub ip_len: u16,
    /// The addresses of a record route option in the quoted header, if it has one.
    pub rr: Option<RecordRoute>,
    pub transport: QuotedTransport,
}

/// The first 8 bytes of the quoted transport header, as far as they identify a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotedTransport {
    Icmp {
        icmp_type: u8,
        ident: u16,
        seq: u16,
        checksum: u16,
    },
    Udp {
        sport: u16,
        dport: u16,
        checksum: u16,
    },
    Tcp {
        sport: u16,
        dport: u16,
        seq: u32,
    },
    /// Another protocol, or fewer than 8 bytes quoted.
    Unknown {
        protocol: u8,
    },
}

/// What the first 8 bytes of a quoted `protocol` header `t` say of the probe; ICMP is
/// the protocol numbered `icmp_proto` (ICMPv4's or ICMPv6's). (Inlined: as a call of its
/// own it costs the unikernel's image bytes it has not.)
#[inline(always)]
pub(crate) fn quoted_transport(protocol: u8, t: &[u8], icmp_proto: u8) -> QuotedTransport {
    if t.len() < 8 {
        QuotedTransport::Unknown { protocol }
    } else {
        let w = |at| be16(t, at).unwrap_or(0);
        match protocol {
            p if p == icmp_proto => QuotedTransport::Icmp {
                icmp_type: t.first().copied().unwrap_or(0),
                checksum: w(2),
                ident: w(4),
                seq: w(6),
            },
            proto::UDP => QuotedTransport::Udp {
                sport: w(0),
                dport: w(2),
                checksum: w(6),
            },
            proto::TCP => QuotedTransport::Tcp {
                sport: w(0),
                dport: w(2),
                seq: be32(t, 4).unwrap_or(0),
            },
            p => QuotedTransport::Unknown { protocol: p },
        }
    }
}

/// The body of a datagram whose `protocol` payload is `payload`: ICMP (of the IP version
/// whose number is `icmp_proto`) read by `icmp`, UDP, TCP or another protocol. (Inlined,
/// as [`quoted_transport`] is.)
#[inline(always)]
pub(crate) fn transport<'a>(
    protocol: u8,
    payload: &'a [u8],
    icmp_proto: u8,
    icmp: fn(&'a [u8]) -> Result<Body<'a>>,
) -> Result<Body<'a>> {
    Ok(match protocol {
        p if p == icmp_proto => icmp(payload)?,
        proto::UDP => {
            if payload.len() < 8 {
                return Err(Error::Truncated);
            }
            Body::Udp {
                sport: be16(payload, 0).unwrap_or(0),
                dport: be16(payload, 2).unwrap_or(0),
                checksum: be16(payload, 6).unwrap_or(0),
                payload: payload.get(8..).unwrap_or_default(),
            }
        }
        proto::TCP => {
            if payload.len() < 20 {
                return Err(Error::Truncated);
            }
            Body::Tcp {
                sport: be16(payload, 0).unwrap_or(0),
                dport: be16(payload, 2).unwrap_or(0),
                seq: be32(payload, 4).unwrap_or(0),
                ack: be32(payload, 8).unwrap_or(0),
                flags: payload.get(13).copied().unwrap_or(0),
            }
        }
        p => Body::Other { protocol: p },
    })
}
