//! One call from raw IP bytes to what a prober matches on: [`parse`] reads the IP header
//! and the ICMP, UDP or TCP header behind it; for ICMP errors it also reads the quoted
//! probe ([`Quote`]) and the RFC 4884 extensions. The lab's routers and hosts use the
//! same view to decide how to answer a packet. IPv6 packets (ICMPv6, UDP and TCP over
//! IPv6) take the same view through [`crate::reply6`]: the hop limit stands in the TTL's
//! field, the traffic class in the TOS's and the IP ID is 0.

use core::net::Ipv4Addr;

use crate::icmpext;
use crate::ipopt::{self, RecordRoute};
use crate::view::{quoted_transport, transport};
pub use crate::view::{Body, Quote, QuotedTransport, Reply};
use crate::{be16, icmp_type, proto, Error, Result};

/// The fields of an IPv4 header this module reads.
struct Ipv4Header {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ttl: u8,
    tos: u8,
    ipid: u16,
    total_len: u16,
    protocol: u8,
    header_len: usize,
    rr: Option<RecordRoute>,
}

/// Reads the IPv4 header at the start of `b`. Accepts a truncated payload (as quoted
/// packets are).
fn ipv4_header(b: &[u8]) -> Result<Ipv4Header> {
    let v_ihl = *b.first().ok_or(Error::Truncated)?;
    if v_ihl >> 4 != 4 {
        return Err(Error::Malformed);
    }
    let ihl = (v_ihl & 0x0f) as usize * 4;
    if ihl < 20 {
        return Err(Error::Malformed);
    }
    if b.len() < ihl {
        return Err(Error::Truncated);
    }
    let addr = |at: usize| Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3]);
    Ok(Ipv4Header {
        src: addr(12),
        dst: addr(16),
        ttl: b[8],
        tos: b[1],
        ipid: be16(b, 4).ok_or(Error::Truncated)?,
        total_len: be16(b, 2).ok_or(Error::Truncated)?,
        protocol: b[9],
        header_len: ihl,
        rr: ipopt::record_route(&b[20..ihl]),
    })
}

fn quote(q: &[u8]) -> Result<Quote> {
    let Ipv4Header {
        src,
        dst,
        ttl,
        tos,
        ipid,
        total_len: ip_len,
        protocol,
        header_len,
        rr,
    } = ipv4_header(q)?;
    let transport = quoted_transport(protocol, &q[header_len..], proto::ICMP);
    Ok(Quote {
        src: src.into(),
        dst: dst.into(),
        ttl,
        tos,
        ipid,
        ip_len,
        rr,
        transport,
    })
}

/// Summarises the IP datagram at the start of `b` (an IPv4 header first, or an IPv6 one
/// with the crate's `ipv6` feature: without it, IPv6 is [`Error::Malformed`]).
///
/// Bytes past the header's total length are ignored; a total length beyond the buffer
/// is an error. Checksums are not verified (a prober records what arrives).
pub fn parse(b: &[u8]) -> Result<Reply<'_>> {
    #[cfg(feature = "ipv6")]
    if b.first().is_some_and(|v| v >> 4 == 6) {
        return crate::reply6::parse(b);
    }
    let Ipv4Header {
        src,
        dst,
        ttl,
        tos,
        ipid,
        total_len: len,
        protocol,
        header_len,
        rr,
    } = ipv4_header(b)?;
    if (len as usize) < header_len {
        return Err(Error::Malformed);
    }
    let payload = b.get(header_len..len as usize).ok_or(Error::Truncated)?;
    let body = transport(protocol, payload, proto::ICMP, icmp)?;
    Ok(Reply {
        src: src.into(),
        dst: dst.into(),
        ttl,
        tos,
        ipid,
        len,
        rr,
        body,
    })
}

fn icmp(m: &[u8]) -> Result<Body<'_>> {
    if m.len() < 8 {
        return Err(Error::Truncated);
    }
    let (t, code) = (m[0], m[1]);
    let w = |at| be16(m, at).unwrap_or(0);
    Ok(match t {
        icmp_type::ECHO_REPLY | icmp_type::ECHO_REQUEST => Body::Echo {
            icmp_type: t,
            checksum: w(2),
            ident: w(4),
            seq: w(6),
            payload: &m[8..],
        },
        icmp_type::DEST_UNREACH | icmp_type::TIME_EXCEEDED | 4 | 5 | 12 => Body::IcmpError {
            icmp_type: t,
            code,
            nhmtu: w(6),
            quote: quote(&m[8..])?,
            ext: icmpext::find(m),
        },
        _ => Body::Other {
            protocol: proto::ICMP,
        },
    })
}

#[cfg(test)]
mod tests {
    use core::net::IpAddr;

    use super::*;
    use crate::mpls::Lse;

    /// A time exceeded from 198.51.100.1 to 192.0.2.10 quoting an ICMP echo probe
    /// (192.0.2.10 -> 203.0.113.5, quoted TTL 1, id 0x1234 seq 7) with a two-entry label
    /// stack: 24001 (TTL 1) over 16 (S, TTL 254). Built by hand, checksums left zero
    /// (parse does not verify them; the extension checksum is zero = "not computed").
    fn time_exceeded_with_two_labels() -> [u8; 20 + 8 + 128 + 16] {
        let mut p = [0u8; 20 + 8 + 128 + 16];
        p[..20].copy_from_slice(&[
            0x45, 0xc0, 0x00, 172, 0xbe, 0xef, 0, 0, 250, 1, 0, 0, 198, 51, 100, 1, 192, 0, 2, 10,
        ]);
        p[20..28].copy_from_slice(&[11, 0, 0, 0, 0, 32, 0, 0]);
        // quoted IPv4 header: len 44, id 0x0102, ttl 1, proto 1
        p[28..48].copy_from_slice(&[
            0x45, 0x00, 0x00, 44, 0x01, 0x02, 0, 0, 1, 1, 0, 0, 192, 0, 2, 10, 203, 0, 113, 5,
        ]);
        p[48..56].copy_from_slice(&[8, 0, 0xab, 0xcd, 0x12, 0x34, 0x00, 0x07]);
        p[156..160].copy_from_slice(&[0x20, 0, 0, 0]);
        p[160..164].copy_from_slice(&[0, 12, 1, 1]);
        Lse::new(24001, 0, false, 1).emit(&mut p[164..]).unwrap();
        Lse::new(16, 0, true, 254).emit(&mut p[168..]).unwrap();
        p
    }

    #[test]
    fn time_exceeded_with_mpls() {
        let p = time_exceeded_with_two_labels();
        let r = parse(&p).unwrap();
        assert_eq!(r.src, IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1)));
        assert_eq!((r.ttl, r.tos, r.ipid, r.len), (250, 0xc0, 0xbeef, 172));
        let Body::IcmpError {
            icmp_type,
            code,
            quote,
            ext,
            ..
        } = r.body
        else {
            panic!()
        };
        assert_eq!((icmp_type, code), (11, 0));
        assert_eq!((quote.ttl, quote.ip_len, quote.ipid), (1, 44, 0x0102));
        assert_eq!(quote.dst, IpAddr::V4(Ipv4Addr::new(203, 0, 113, 5)));
        assert_eq!(
            quote.transport,
            QuotedTransport::Icmp {
                icmp_type: 8,
                checksum: 0xabcd,
                ident: 0x1234,
                seq: 7
            }
        );
        let labels: [(u32, u8, bool); 2] = {
            let mut it = ext
                .unwrap()
                .mpls_stack()
                .map(|l| (l.label(), l.ttl(), l.bottom()));
            [it.next().unwrap(), it.next().unwrap()]
        };
        assert_eq!(labels, [(24001, 1, false), (16, 254, true)]);
    }

    #[test]
    fn quoted_udp_and_tcp() {
        let mut p = time_exceeded_with_two_labels();
        p[37] = proto::UDP;
        p[48..56].copy_from_slice(&[0x80, 0x01, 0x82, 0x9a, 0, 36, 0x55, 0x66]);
        let Body::IcmpError { quote, .. } = parse(&p).unwrap().body else {
            panic!()
        };
        assert_eq!(
            quote.transport,
            QuotedTransport::Udp {
                sport: 0x8001,
                dport: 33434,
                checksum: 0x5566
            }
        );
        p[37] = proto::TCP;
        let Body::IcmpError { quote, .. } = parse(&p).unwrap().body else {
            panic!()
        };
        assert_eq!(
            quote.transport,
            QuotedTransport::Tcp {
                sport: 0x8001,
                dport: 33434,
                seq: 0x0024_5566
            }
        );
    }

    #[test]
    fn echo_reply_and_tcp_rst() {
        let mut p = [0u8; 28];
        p[..20].copy_from_slice(&[
            0x45, 0, 0, 28, 0, 1, 0, 0, 64, 1, 0, 0, 203, 0, 113, 5, 192, 0, 2, 10,
        ]);
        p[20..].copy_from_slice(&[0, 0, 0xff, 0xff, 0x12, 0x34, 0, 9]);
        let r = parse(&p).unwrap();
        assert!(matches!(
            r.body,
            Body::Echo {
                icmp_type: 0,
                ident: 0x1234,
                seq: 9,
                ..
            }
        ));

        let mut t = [0u8; 40];
        t[..20].copy_from_slice(&[
            0x45, 0, 0, 40, 0, 1, 0, 0, 64, 6, 0, 0, 203, 0, 113, 5, 192, 0, 2, 10,
        ]);
        t[20..24].copy_from_slice(&[0, 80, 0x80, 0x01]);
        t[28..32].copy_from_slice(&[0, 0, 0, 5]);
        t[33] = crate::tcp_flags::RST | crate::tcp_flags::ACK;
        let r = parse(&t).unwrap();
        assert_eq!(
            r.body,
            Body::Tcp {
                sport: 80,
                dport: 0x8001,
                seq: 0,
                ack: 5,
                flags: 0x14
            }
        );
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        assert_eq!(parse(&[]), Err(Error::Truncated));
        assert_eq!(parse(&[0x70; 40]), Err(Error::Malformed));
        // IPv6 whose payload length (0x6060) runs past the buffer
        assert_eq!(parse(&[0x60; 40]), Err(Error::Truncated));
        assert_eq!(parse(&[0x41; 40]), Err(Error::Malformed));
        let p = time_exceeded_with_two_labels();
        assert_eq!(parse(&p[..100]), Err(Error::Truncated));
        for cut in 0..p.len() {
            let _ = parse(&p[..cut]);
        }
    }
}
