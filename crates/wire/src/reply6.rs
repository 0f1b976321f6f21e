//! [`crate::reply::parse`] for an IPv6 datagram: ICMPv6 errors (time exceeded,
//! destination unreachable, packet too big, parameter problem) with the quoted IPv6 probe
//! and RFC 4884 extensions (ICMPv6's length rules: [`icmpext::find_v6`]), ICMPv6 echo,
//! UDP and TCP over IPv6.
//!
//! A [`Reply`] of an IPv6 packet holds the hop limit as `ttl`, the traffic class as
//! `tos`, 0 as `ipid` and 40 plus the payload length as `len` (scamper's reply size);
//! its [`Quote`] the same of the quoted probe. The flow labels are not kept: the builders
//! hold a trace's constant and no matching needs them; [`crate::ipv6::header`] reads
//! them (every byte in `Reply` costs the unikernel's image).

use crate::icmpext;
use crate::ipv6::{self, HEADER_LEN};
use crate::view::{quoted_transport, transport, Body, Quote, QuotedTransport, Reply};
use crate::{be16, be32, icmp6_type, proto, Error, Result};

/// Summarises the IPv6 datagram at the start of `b` (see [`crate::reply::parse`]).
pub fn parse(b: &[u8]) -> Result<Reply<'_>> {
    let h = ipv6::header(b)?;
    let end = HEADER_LEN + usize::from(h.payload_len);
    if end < h.header_len {
        return Err(Error::Malformed);
    }
    let payload = b.get(h.header_len..end).ok_or(Error::Truncated)?;
    let body = match h.protocol {
        _ if h.later_fragment => Body::Other {
            protocol: h.protocol,
        },
        p => transport(p, payload, proto::ICMPV6, icmp6)?,
    };
    Ok(Reply {
        src: h.src.into(),
        dst: h.dst.into(),
        ttl: h.hop_limit,
        tos: h.traffic_class,
        ipid: 0,
        len: u16::try_from(end).map_err(|_| Error::Malformed)?,
        rr: None,
        body,
    })
}

fn icmp6(m: &[u8]) -> Result<Body<'_>> {
    if m.len() < 8 {
        return Err(Error::Truncated);
    }
    let (t, code) = (m[0], m[1]);
    let w = |at| be16(m, at).unwrap_or(0);
    Ok(match t {
        icmp6_type::ECHO_REQUEST | icmp6_type::ECHO_REPLY => Body::Echo {
            icmp_type: t,
            checksum: w(2),
            ident: w(4),
            seq: w(6),
            payload: &m[8..],
        },
        icmp6_type::DEST_UNREACH
        | icmp6_type::PACKET_TOO_BIG
        | icmp6_type::TIME_EXCEEDED
        | icmp6_type::PARAM_PROBLEM => Body::IcmpError {
            icmp_type: t,
            code,
            nhmtu: if t == icmp6_type::PACKET_TOO_BIG {
                u16::try_from(be32(m, 4).unwrap_or(0)).unwrap_or(u16::MAX)
            } else {
                0
            },
            quote: quote(&m[8..])?,
            ext: match t {
                icmp6_type::DEST_UNREACH | icmp6_type::TIME_EXCEEDED => icmpext::find_v6(m),
                _ => None,
            },
        },
        _ => Body::Other {
            protocol: proto::ICMPV6,
        },
    })
}

/// The quoted IPv6 probe of an ICMPv6 error.
fn quote(q: &[u8]) -> Result<Quote> {
    let h = ipv6::header(q)?;
    let t = &q[h.header_len..];
    Ok(Quote {
        src: h.src.into(),
        dst: h.dst.into(),
        ttl: h.hop_limit,
        tos: h.traffic_class,
        ipid: 0,
        ip_len: h.payload_len.saturating_add(HEADER_LEN as u16),
        rr: None,
        transport: if h.later_fragment {
            QuotedTransport::Unknown {
                protocol: h.protocol,
            }
        } else {
            quoted_transport(h.protocol, t, proto::ICMPV6)
        },
    })
}
