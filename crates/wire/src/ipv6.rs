//! The IPv6 header (RFC 8200): read, with the extension headers a reply or a quoted probe
//! may carry skipped, and written for a probe or an answer.
//!
//! IPv6 has no IP ID and no header checksum; the hop limit plays the TTL's part and the
//! flow label (20 bits) is one more field per-flow load balancers may hash, so a Paris
//! trace keeps it constant ([`crate::build6`]).

use core::net::Ipv6Addr;

use crate::{be16, be32, Error, Result};

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;
/// The largest flow label (20 bits).
pub const FLOW_LABEL_MAX: u32 = 0xf_ffff;

/// Next-header values of the extension headers [`header`] skips.
mod ext {
    pub const HOP_BY_HOP: u8 = 0;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const DEST_OPTS: u8 = 60;
}

/// At most this many extension headers are skipped (a bound against crafted chains).
const MAX_EXT_HEADERS: usize = 8;

/// The fields of an IPv6 header this crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
    /// The payload length field (extension headers included).
    pub payload_len: u16,
    /// The upper-layer protocol, after any extension headers.
    pub protocol: u8,
    /// Where the upper-layer header starts (40 plus the extension headers).
    pub header_len: usize,
    /// A fragment header says this is not the first fragment: no upper-layer header.
    pub later_fragment: bool,
}

/// Reads the IPv6 header at the start of `b` and skips hop-by-hop, routing, fragment and
/// destination options headers. Accepts a truncated payload (as quoted packets are) as
/// long as the headers themselves are there.
pub fn header(b: &[u8]) -> Result<Header> {
    let first = *b.first().ok_or(Error::Truncated)?;
    if first >> 4 != 6 {
        return Err(Error::Malformed);
    }
    if b.len() < HEADER_LEN {
        return Err(Error::Truncated);
    }
    let word = be32(b, 0).ok_or(Error::Truncated)?;
    let addr = |at: usize| {
        let mut o = [0u8; 16];
        o.copy_from_slice(&b[at..at + 16]);
        Ipv6Addr::from(o)
    };
    let mut protocol = b[6];
    let mut at = HEADER_LEN;
    let mut later_fragment = false;
    for _ in 0..MAX_EXT_HEADERS {
        let len = match protocol {
            ext::HOP_BY_HOP | ext::ROUTING | ext::DEST_OPTS => {
                8 + 8 * usize::from(*b.get(at + 1).ok_or(Error::Truncated)?)
            }
            ext::FRAGMENT => {
                let offset = be16(b, at + 2).ok_or(Error::Truncated)? >> 3;
                later_fragment |= offset != 0;
                8
            }
            _ => break,
        };
        protocol = *b.get(at).ok_or(Error::Truncated)?;
        at += len;
    }
    if at > b.len() {
        return Err(Error::Truncated);
    }
    if matches!(
        protocol,
        ext::HOP_BY_HOP | ext::ROUTING | ext::FRAGMENT | ext::DEST_OPTS
    ) {
        return Err(Error::Malformed);
    }
    Ok(Header {
        src: addr(8),
        dst: addr(24),
        hop_limit: b[7],
        traffic_class: (word >> 20) as u8,
        flow_label: word & FLOW_LABEL_MAX,
        payload_len: be16(b, 4).ok_or(Error::Truncated)?,
        protocol,
        header_len: at,
        later_fragment,
    })
}

/// The IPv6 header fields a builder takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ip6 {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub hop_limit: u8,
    pub traffic_class: u8,
    /// Kept constant for every probe of a Paris trace; bits above the 20th are an error.
    pub flow_label: u32,
}

/// Writes the fixed header of a packet with `payload_len` bytes of `next_header` behind
/// it at the start of `buf`; returns the packet's total length.
pub(crate) fn emit(buf: &mut [u8], ip: &Ip6, next_header: u8, payload_len: usize) -> Result<usize> {
    if ip.flow_label > FLOW_LABEL_MAX {
        return Err(Error::Malformed);
    }
    let len16 = u16::try_from(payload_len).map_err(|_| Error::Malformed)?;
    let total = HEADER_LEN + payload_len;
    let h = buf.get_mut(..total).ok_or(Error::Truncated)?;
    let word = 6 << 28 | u32::from(ip.traffic_class) << 20 | ip.flow_label;
    h[0..4].copy_from_slice(&word.to_be_bytes());
    h[4..6].copy_from_slice(&len16.to_be_bytes());
    h[6] = next_header;
    h[7] = ip.hop_limit;
    h[8..24].copy_from_slice(&ip.src.octets());
    h[24..40].copy_from_slice(&ip.dst.octets());
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: Ip6 = Ip6 {
        src: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
        dst: Ipv6Addr::new(0x2001, 0xdb8, 0, 2, 0, 0, 0, 5),
        hop_limit: 3,
        traffic_class: 0xb8,
        flow_label: 0x1_2345,
    };

    #[test]
    fn writes_and_reads_back() {
        let mut b = [0u8; 48];
        assert_eq!(emit(&mut b, &IP, 17, 8), Ok(48));
        assert_eq!(&b[..8], &[0x6b, 0x81, 0x23, 0x45, 0, 8, 17, 3]);
        let h = header(&b).unwrap();
        assert_eq!((h.src, h.dst), (IP.src, IP.dst));
        assert_eq!(
            (h.hop_limit, h.traffic_class, h.flow_label),
            (3, 0xb8, 0x1_2345)
        );
        assert_eq!((h.payload_len, h.protocol, h.header_len), (8, 17, 40));
        let too_wide = Ip6 {
            flow_label: 0x10_0000,
            ..IP
        };
        assert_eq!(emit(&mut b, &too_wide, 17, 8), Err(Error::Malformed));
        assert_eq!(emit(&mut b, &IP, 17, 9), Err(Error::Truncated));
    }

    #[test]
    fn skips_extension_headers() {
        let mut b = [0u8; 40 + 8 + 16 + 8 + 8];
        emit(&mut b, &IP, ext::HOP_BY_HOP, 40).unwrap();
        b[40] = ext::DEST_OPTS; // hop-by-hop, 8 bytes
        b[48] = ext::FRAGMENT; // destination options, 16 bytes
        b[49] = 1;
        b[64] = 58; // fragment header: first fragment
        let h = header(&b).unwrap();
        assert_eq!(
            (h.protocol, h.header_len, h.later_fragment),
            (58, 72, false)
        );
        b[66] = 0x01; // offset 32: a later fragment
        assert!(header(&b).unwrap().later_fragment);
        assert_eq!(header(&b[..60]), Err(Error::Truncated));
        b[64] = ext::FRAGMENT; // a chain that runs off the end of the buffer
        b[40..48].copy_from_slice(&[ext::HOP_BY_HOP, 0, 0, 0, 0, 0, 0, 0]);
        b[6] = ext::HOP_BY_HOP;
        assert!(header(&b).is_err());
    }

    #[test]
    fn rejects_other_versions_and_short_buffers() {
        assert_eq!(header(&[]), Err(Error::Truncated));
        assert_eq!(header(&[0x45; 40]), Err(Error::Malformed));
        assert_eq!(header(&[0x60; 39]), Err(Error::Truncated));
    }
}
