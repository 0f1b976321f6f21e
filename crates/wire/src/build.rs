//! Building packets: probes with a chosen TTL, IP ID and flow identifier, and the ICMP
//! messages routers and hosts answer with. Every builder writes a complete IPv4 datagram
//! with correct checksums at the start of `buf` and returns its length.
//!
//! Paris traceroute keeps the fields per-flow load balancers hash constant for every
//! probe of a trace: for ICMP that includes the checksum, so [`icmp_echo`] can place two
//! payload bytes that bring the checksum to a wanted value; for UDP the ports stay fixed
//! and the checksum is set to the probe's identifier the same way ([`udp`]).

use core::net::Ipv4Addr;

use crate::icmpext::Family;
use crate::mpls::Lse;
use crate::{checksum, icmpext, proto, Error, Result};

/// The IPv4 header fields a builder takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ip {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub ttl: u8,
    pub tos: u8,
    pub ipid: u16,
}

const IP_LEN: usize = 20;

fn ipv4(buf: &mut [u8], ip: &Ip, protocol: u8, payload_len: usize) -> Result<usize> {
    let total = IP_LEN + payload_len;
    let total16 = u16::try_from(total).map_err(|_| Error::Malformed)?;
    let h = buf.get_mut(..total).ok_or(Error::Truncated)?;
    h[0] = 0x45;
    h[1] = ip.tos;
    h[2..4].copy_from_slice(&total16.to_be_bytes());
    h[4..6].copy_from_slice(&ip.ipid.to_be_bytes());
    h[6..8].fill(0);
    h[8] = ip.ttl;
    h[9] = protocol;
    h[10..12].fill(0);
    h[12..16].copy_from_slice(&ip.src.octets());
    h[16..20].copy_from_slice(&ip.dst.octets());
    let c = checksum::of(&h[..IP_LEN]);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    Ok(total)
}

/// Sets the don't-fragment bit of the IPv4 packet at the start of `buf` and fixes its
/// header checksum (path MTU discovery's probes must not be fragmented on the way).
pub fn set_dont_fragment(buf: &mut [u8]) -> Result<()> {
    let ihl = usize::from(buf.first().ok_or(Error::Truncated)? & 0x0f) * 4;
    let h = buf.get_mut(..ihl.max(IP_LEN)).ok_or(Error::Truncated)?;
    h[6] |= 0x40;
    h[10..12].fill(0);
    let c = checksum::of(h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// Places `target` as the checksum at `csum_at` of `seg`, adjusting the two bytes at
/// `fix_at` (which must be zero on entry); `extra` is the pseudo-header sum (0 for ICMP).
fn force_checksum(seg: &mut [u8], csum_at: usize, fix_at: usize, extra: u16, target: u16) {
    seg[csum_at..csum_at + 2].fill(0);
    let rest = checksum::add(checksum::sum(seg), extra);
    let w = checksum::compensate(rest, target);
    seg[fix_at..fix_at + 2].copy_from_slice(&w.to_be_bytes());
    seg[csum_at..csum_at + 2].copy_from_slice(&target.to_be_bytes());
}

/// An ICMP echo message: [`icmp_echo`] writes it.
#[derive(Debug, Clone, Copy)]
pub struct Echo<'a> {
    /// 8 (request) or 0 (reply).
    pub icmp_type: u8,
    pub ident: u16,
    pub seq: u16,
    pub payload: &'a [u8],
    /// `Some(c)` (Paris ICMP): the first two payload bytes are replaced so that the ICMP
    /// checksum is `c`; the payload must then be at least two bytes.
    pub checksum: Option<u16>,
}

/// An ICMP echo request or reply (see [`Echo`]).
pub fn icmp_echo(buf: &mut [u8], ip: &Ip, e: &Echo) -> Result<usize> {
    let total = ipv4(buf, ip, proto::ICMP, 8 + e.payload.len())?;
    echo_message(&mut buf[IP_LEN..total], e, 0)?;
    Ok(total)
}

/// Writes the echo message `e` into `m` (exactly its length); `pseudo` is the
/// pseudo-header sum (0 for ICMPv4).
pub(crate) fn echo_message(m: &mut [u8], e: &Echo, pseudo: u16) -> Result<()> {
    m[0] = e.icmp_type;
    m[1] = 0;
    m[2..4].fill(0);
    m[4..6].copy_from_slice(&e.ident.to_be_bytes());
    m[6..8].copy_from_slice(&e.seq.to_be_bytes());
    m[8..].copy_from_slice(e.payload);
    echo_checksum(m, e.checksum, pseudo)
}

/// Sets the checksum of the ICMP echo message `m` (ICMP header first) after its bytes
/// changed: `Some(c)` (Paris ICMP) rewrites the first two payload bytes so that it is
/// `c`, `None` computes it.
pub fn icmp_echo_checksum(m: &mut [u8], checksum: Option<u16>) -> Result<()> {
    echo_checksum(m, checksum, 0)
}

/// [`icmp_echo_checksum`] with the pseudo-header sum `pseudo` (ICMPv6's).
pub(crate) fn echo_checksum(m: &mut [u8], checksum: Option<u16>, pseudo: u16) -> Result<()> {
    if m.len() < 8 {
        return Err(Error::Truncated);
    }
    match checksum {
        Some(target) => {
            if m.len() < 10 {
                return Err(Error::Truncated);
            }
            m[8..10].fill(0);
            force_checksum(m, 2, 8, pseudo, target);
        }
        None => {
            m[2..4].fill(0);
            let c = !checksum::add(checksum::sum(m), pseudo);
            m[2..4].copy_from_slice(&c.to_be_bytes());
        }
    }
    Ok(())
}

/// A UDP datagram: [`udp`] writes it.
#[derive(Debug, Clone, Copy)]
pub struct Udp<'a> {
    pub sport: u16,
    pub dport: u16,
    pub payload: &'a [u8],
    /// `Some(c)` (Paris UDP): the first two payload bytes are chosen so that the UDP
    /// checksum is `c` (must not be 0, which means "no checksum").
    pub checksum: Option<u16>,
}

/// A UDP datagram (see [`Udp`]).
pub fn udp(buf: &mut [u8], ip: &Ip, u: &Udp) -> Result<usize> {
    let len = 8 + u.payload.len();
    let len16 = u16::try_from(len).map_err(|_| Error::Malformed)?;
    let total = ipv4(buf, ip, proto::UDP, len)?;
    let pseudo = checksum::pseudo_v4(ip.src, ip.dst, proto::UDP, len16);
    udp_segment(&mut buf[IP_LEN..total], u, pseudo)?;
    Ok(total)
}

/// Writes the UDP datagram `u` into `s` (exactly its length) with the pseudo-header sum
/// `pseudo`.
pub(crate) fn udp_segment(s: &mut [u8], u: &Udp, pseudo: u16) -> Result<()> {
    let len16 = u16::try_from(s.len()).map_err(|_| Error::Malformed)?;
    s[0..2].copy_from_slice(&u.sport.to_be_bytes());
    s[2..4].copy_from_slice(&u.dport.to_be_bytes());
    s[4..6].copy_from_slice(&len16.to_be_bytes());
    s[6..8].fill(0);
    s[8..].copy_from_slice(u.payload);
    match u.checksum {
        Some(0) => return Err(Error::Malformed),
        Some(target) => {
            if u.payload.len() < 2 {
                return Err(Error::Truncated);
            }
            s[8..10].fill(0);
            force_checksum(s, 6, 8, pseudo, target);
        }
        None => {
            let c = !checksum::add(checksum::sum(s), pseudo);
            let c = if c == 0 { 0xffff } else { c };
            s[6..8].copy_from_slice(&c.to_be_bytes());
        }
    }
    Ok(())
}

/// The TCP fields a builder takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tcp {
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
}

/// A TCP segment without options or payload.
pub fn tcp(buf: &mut [u8], ip: &Ip, t: &Tcp) -> Result<usize> {
    let total = ipv4(buf, ip, proto::TCP, 20)?;
    let pseudo = checksum::pseudo_v4(ip.src, ip.dst, proto::TCP, 20);
    tcp_segment(&mut buf[IP_LEN..total], t, pseudo);
    Ok(total)
}

/// Writes the 20-byte TCP segment `t` into `s` with the pseudo-header sum `pseudo`.
pub(crate) fn tcp_segment(s: &mut [u8], t: &Tcp, pseudo: u16) {
    s[0..2].copy_from_slice(&t.sport.to_be_bytes());
    s[2..4].copy_from_slice(&t.dport.to_be_bytes());
    s[4..8].copy_from_slice(&t.seq.to_be_bytes());
    s[8..12].copy_from_slice(&t.ack.to_be_bytes());
    s[12] = 5 << 4;
    s[13] = t.flags;
    s[14..16].copy_from_slice(&t.window.to_be_bytes());
    s[16..20].fill(0);
    let c = !checksum::add(checksum::sum(s), pseudo);
    s[16..18].copy_from_slice(&c.to_be_bytes());
}

/// An ICMP error (time exceeded, destination unreachable): [`icmp_error`] writes it.
#[derive(Debug, Clone, Copy)]
pub struct IcmpError<'a> {
    pub icmp_type: u8,
    pub code: u8,
    /// The packet that caused it, of which the first `quote_len` bytes are quoted (fewer if
    /// it is shorter).
    pub original: &'a [u8],
    pub quote_len: usize,
    /// With a non-empty stack the quote is zero-padded to 128 bytes, RFC 4884's length
    /// field is set and an RFC 4950 label stack object follows.
    pub mpls: &'a [Lse],
}

/// An ICMP error (see [`IcmpError`]).
pub fn icmp_error(buf: &mut [u8], ip: &Ip, e: &IcmpError) -> Result<usize> {
    let total = ipv4(buf, ip, proto::ICMP, error_len(e, Family::V4))?;
    error_message(&mut buf[IP_LEN..total], e, Family::V4, 0)?;
    Ok(total)
}

/// The quoted bytes, the space they take once padded and the extension's length.
fn error_layout(e: &IcmpError, family: Family) -> (usize, usize, usize) {
    let q = e.original.len().min(e.quote_len);
    if e.mpls.is_empty() {
        (q, q, 0)
    } else {
        let padded = q
            .max(icmpext::MIN_QUOTE_LEN)
            .next_multiple_of(family.word());
        (q, padded, icmpext::mpls_len(e.mpls.len()))
    }
}

/// The length of the ICMP message of error `e`.
pub(crate) fn error_len(e: &IcmpError, family: Family) -> usize {
    let (_, space, ext) = error_layout(e, family);
    8 + space + ext
}

/// Writes the ICMP error `e` into `m` (exactly [`error_len`] bytes): RFC 4884's length
/// field where `family` keeps it; `pseudo` is the pseudo-header sum (0 for ICMPv4).
pub(crate) fn error_message(
    m: &mut [u8],
    e: &IcmpError,
    family: Family,
    pseudo: u16,
) -> Result<()> {
    let (q, space, _) = error_layout(e, family);
    m[0] = e.icmp_type;
    m[1] = e.code;
    m[2..8].fill(0);
    m[8..8 + q].copy_from_slice(&e.original[..q]);
    m[8 + q..8 + space].fill(0);
    if !e.mpls.is_empty() {
        m[family.length_at()] =
            u8::try_from(space / family.word()).map_err(|_| Error::Malformed)?;
        icmpext::emit_mpls(&mut m[8 + space..], e.mpls)?;
    }
    let c = !checksum::add(checksum::sum(m), pseudo);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::{self, Body, QuotedTransport};

    const IP: Ip = Ip {
        src: Ipv4Addr::new(192, 0, 2, 10),
        dst: Ipv4Addr::new(203, 0, 113, 5),
        ttl: 3,
        tos: 0,
        ipid: 0x0102,
    };

    #[test]
    fn echo_request_matches_hand_made_bytes() {
        let mut b = [0xa5u8; 64];
        let n = icmp_echo(
            &mut b,
            &IP,
            &Echo {
                icmp_type: 8,
                ident: 0x1234,
                seq: 1,
                payload: &[0, 0, 0, 0],
                checksum: None,
            },
        )
        .unwrap();
        assert_eq!(n, 32);
        assert_eq!(
            &b[..32],
            &[
                0x45, 0, 0, 32, 0x01, 0x02, 0, 0, 3, 1, 0xb8, 0xcb, 192, 0, 2, 10, 203, 0, 113, 5,
                8, 0, 0xe5, 0xca, 0x12, 0x34, 0, 1, 0, 0, 0, 0
            ][..]
        );
        assert_eq!(checksum::sum(&b[..20]), 0xffff);
        assert_eq!(b[32], 0xa5, "nothing written past the packet");
    }

    #[test]
    fn paris_icmp_checksum_is_constant_across_sequence_numbers() {
        let mut b = [0u8; 64];
        for seq in 0..300u16 {
            let n = icmp_echo(
                &mut b,
                &IP,
                &Echo {
                    icmp_type: 8,
                    ident: 0x1234,
                    seq,
                    payload: &[0; 16],
                    checksum: Some(0xbeef),
                },
            )
            .unwrap();
            let Body::Echo {
                checksum: c,
                seq: s,
                ..
            } = reply::parse(&b[..n]).unwrap().body
            else {
                panic!()
            };
            assert_eq!((c, s), (0xbeef, seq));
            assert_eq!(checksum::sum(&b[20..n]), 0xffff, "valid ICMP checksum");
        }
    }

    #[test]
    fn paris_udp_checksum_carries_the_probe_id_and_verifies() {
        let mut b = [0u8; 64];
        for id in [1u16, 2, 0x7fff, 0xfffe] {
            let n = udp(
                &mut b,
                &IP,
                &Udp {
                    sport: 0x8001,
                    dport: 33435,
                    payload: &[0; 16],
                    checksum: Some(id),
                },
            )
            .unwrap();
            let Body::Udp { checksum: c, .. } = reply::parse(&b[..n]).unwrap().body else {
                panic!()
            };
            assert_eq!(c, id);
            let pseudo = checksum::pseudo_v4(IP.src, IP.dst, proto::UDP, (n - 20) as u16);
            assert_eq!(checksum::add(checksum::sum(&b[20..n]), pseudo), 0xffff);
        }
        assert_eq!(
            udp(
                &mut b,
                &IP,
                &Udp {
                    sport: 1,
                    dport: 2,
                    payload: &[0; 4],
                    checksum: Some(0)
                }
            ),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn tcp_syn_verifies() {
        let mut b = [0u8; 40];
        let t = Tcp {
            sport: 0x8001,
            dport: 80,
            seq: 42,
            ack: 0,
            flags: 0x02,
            window: 5840,
        };
        let n = tcp(&mut b, &IP, &t).unwrap();
        let pseudo = checksum::pseudo_v4(IP.src, IP.dst, proto::TCP, 20);
        assert_eq!(checksum::add(checksum::sum(&b[20..n]), pseudo), 0xffff);
        assert!(matches!(
            reply::parse(&b).unwrap().body,
            Body::Tcp {
                seq: 42,
                flags: 2,
                ..
            }
        ));
    }

    #[test]
    fn time_exceeded_with_labels_round_trips() {
        let mut probe = [0u8; 64];
        let pn = icmp_echo(
            &mut probe,
            &IP,
            &Echo {
                icmp_type: 8,
                ident: 7,
                seq: 9,
                payload: &[0; 24],
                checksum: Some(0x4242),
            },
        )
        .unwrap();
        let router = Ip {
            src: Ipv4Addr::new(198, 51, 100, 1),
            dst: IP.src,
            ttl: 255,
            tos: 0,
            ipid: 1,
        };
        let stack = [Lse::new(300, 0, false, 1), Lse::new(17, 0, true, 1)];
        let mut b = [0u8; 256];
        let n = icmp_error(
            &mut b,
            &router,
            &IcmpError {
                icmp_type: 11,
                code: 0,
                original: &probe[..pn],
                quote_len: 28,
                mpls: &stack,
            },
        )
        .unwrap();
        assert_eq!(n, 20 + 8 + 128 + 16);
        assert_eq!(checksum::sum(&b[20..n]), 0xffff);
        let r = reply::parse(&b[..n]).unwrap();
        let Body::IcmpError { quote, ext, .. } = r.body else {
            panic!()
        };
        assert_eq!(quote.ttl, 3);
        assert!(matches!(
            quote.transport,
            QuotedTransport::Icmp {
                seq: 9,
                checksum: 0x4242,
                ..
            }
        ));
        assert!(ext.unwrap().mpls_stack().eq(stack.iter().copied()));
        // without labels: plain 28-byte quote, no extension
        let n = icmp_error(
            &mut b,
            &router,
            &IcmpError {
                icmp_type: 11,
                code: 0,
                original: &probe[..pn],
                quote_len: 28,
                mpls: &[],
            },
        )
        .unwrap();
        assert_eq!(n, 20 + 8 + 28);
        assert!(matches!(
            reply::parse(&b[..n]).unwrap().body,
            Body::IcmpError { ext: None, .. }
        ));
    }
}
