//! RFC 4884 multi-part ICMP messages and the RFC 4950 MPLS label stack object.
//!
//! Layout of an ICMPv4 time exceeded / destination unreachable that carries extensions:
//! the 8-byte ICMP header, whose byte 5 gives the length of the quoted datagram in 32-bit
//! words; the quoted datagram, zero-padded to at least 128 bytes; the extension structure
//! (4-bit version 2, 12 reserved bits, a checksum over the whole structure), then objects
//! (16-bit length including their 4-byte header, class, c-type, payload). The MPLS label
//! stack object is class 1, c-type 1, its payload the received label stack entries.
//!
//! ICMPv6 (RFC 4884 sections 4.5 and 4.6) differs in two ways: the length is byte 4 of
//! the ICMPv6 header and counts 64-bit words, and the quoted datagram is zero-padded to a
//! multiple of 8 bytes ([`find_v6`], [`Family`]).
//!
//! Routers that predate RFC 4884 leave the length at zero and start the structure at
//! byte 128 of the quoted datagram; [`find`] accepts that too when a version-2 header with
//! a valid checksum stands there (RFC 4884 section 5, as scamper and Linux do).

use crate::mpls::Lse;
use crate::{checksum, Error, Result};

/// Where the quoted datagram starts in an ICMPv4 message.
pub const QUOTE_OFFSET: usize = 8;
/// Minimum padded length of the quoted datagram when extensions follow.
pub const MIN_QUOTE_LEN: usize = 128;
/// Extension structure version.
pub const VERSION: u8 = 2;
/// Class number of the MPLS label stack object.
pub const CLASS_MPLS: u8 = 1;
/// C-type of the incoming MPLS label stack.
pub const CTYPE_MPLS_INCOMING: u8 = 1;

/// The extension structure of one ICMP message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extensions<'a> {
    data: &'a [u8],
}

/// One extension object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Object<'a> {
    pub class: u8,
    pub ctype: u8,
    pub payload: &'a [u8],
}

/// Where the two ICMP versions keep RFC 4884's length field and how they count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Byte 5, 32-bit words.
    V4,
    /// Byte 4, 64-bit words.
    V6,
}

impl Family {
    /// The offset of the length field in the ICMP header.
    pub const fn length_at(self) -> usize {
        match self {
            Family::V4 => 5,
            Family::V6 => 4,
        }
    }

    /// The bytes one unit of the length field counts (and the quote is padded to).
    pub const fn word(self) -> usize {
        match self {
            Family::V4 => 4,
            Family::V6 => 8,
        }
    }
}

/// Finds the extension structure in an ICMPv4 error message (`icmp` starts at the ICMP
/// type byte). Returns `None` when there is none or it is malformed.
pub fn find(icmp: &[u8]) -> Option<Extensions<'_>> {
    find_in(icmp, Family::V4)
}

/// [`find`] for an ICMPv6 error message.
pub fn find_v6(icmp: &[u8]) -> Option<Extensions<'_>> {
    find_in(icmp, Family::V6)
}

#[inline(always)]
fn find_in(icmp: &[u8], family: Family) -> Option<Extensions<'_>> {
    let words = *icmp.get(family.length_at())? as usize;
    let start = if words != 0 {
        let quote_len = words * family.word();
        if quote_len < MIN_QUOTE_LEN {
            return None;
        }
        QUOTE_OFFSET + quote_len
    } else {
        QUOTE_OFFSET + MIN_QUOTE_LEN
    };
    let data = icmp.get(start..)?;
    if data.len() < 4 || data[0] >> 4 != VERSION {
        return None;
    }
    let stored = crate::be16(data, 2)?;
    // A zero checksum means "not computed" (RFC 4884 section 7); otherwise it must hold.
    // Without the length field, only a valid non-zero checksum makes us believe it.
    let valid = checksum::sum(data) == 0xffff;
    if !valid && (stored != 0 || words == 0) {
        return None;
    }
    Some(Extensions { data })
}

impl<'a> Extensions<'a> {
    /// The objects, in order; iteration stops at the first malformed object.
    pub fn objects(&self) -> Objects<'a> {
        Objects {
            rest: self.data.get(4..).unwrap_or(&[]),
        }
    }

    /// The MPLS label stack of the first MPLS object, top entry first (empty if none).
    pub fn mpls_stack(&self) -> impl Iterator<Item = Lse> + 'a {
        let payload = self
            .objects()
            .find(|o| o.class == CLASS_MPLS && o.ctype == CTYPE_MPLS_INCOMING)
            .map_or(&[][..], |o| o.payload);
        payload.chunks_exact(Lse::LEN).filter_map(Lse::parse)
    }

    /// The raw structure (header and objects).
    pub fn as_bytes(&self) -> &'a [u8] {
        self.data
    }
}

/// Iterator over extension objects.
#[derive(Debug, Clone)]
pub struct Objects<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Objects<'a> {
    type Item = Object<'a>;
    fn next(&mut self) -> Option<Object<'a>> {
        let len = crate::be16(self.rest, 0)? as usize;
        if len < 4 || len > self.rest.len() {
            self.rest = &[];
            return None;
        }
        let obj = Object {
            class: self.rest[2],
            ctype: self.rest[3],
            payload: &self.rest[4..len],
        };
        self.rest = &self.rest[len..];
        Some(obj)
    }
}

/// Bytes an extension structure holding one MPLS object of `entries` entries takes.
pub const fn mpls_len(entries: usize) -> usize {
    4 + 4 + Lse::LEN * entries
}

/// Writes an extension structure with one MPLS label stack object (top entry first) at
/// the start of `buf`, checksum included. Returns the bytes written.
pub fn emit_mpls(buf: &mut [u8], stack: &[Lse]) -> Result<usize> {
    let len = mpls_len(stack.len());
    let out = buf.get_mut(..len).ok_or(Error::Truncated)?;
    let obj_len = u16::try_from(len - 4).map_err(|_| Error::Malformed)?;
    out[0] = VERSION << 4;
    out[1] = 0;
    out[2..4].fill(0);
    out[4..6].copy_from_slice(&obj_len.to_be_bytes());
    out[6] = CLASS_MPLS;
    out[7] = CTYPE_MPLS_INCOMING;
    for (i, lse) in stack.iter().enumerate() {
        lse.emit(&mut out[8 + 4 * i..])?;
    }
    let c = checksum::of(out);
    out[2..4].copy_from_slice(&c.to_be_bytes());
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A time exceeded body: ICMP header with length 32 words, 128 bytes of quote, then
    /// a two-entry MPLS stack (label 24001 ttl 1, label 16 S ttl 1).
    fn sample(length_words: u8) -> [u8; 8 + 128 + 16] {
        let mut m = [0u8; 8 + 128 + 16];
        m[0] = 11;
        m[5] = length_words;
        m[8] = 0x45;
        emit_mpls(
            &mut m[136..],
            &[Lse::new(24001, 0, false, 1), Lse::new(16, 0, true, 1)],
        )
        .unwrap();
        m
    }

    #[test]
    fn emit_matches_hand_made_bytes() {
        let mut b = [0xa5u8; 16];
        let n = emit_mpls(
            &mut b,
            &[Lse::new(24001, 0, false, 1), Lse::new(16, 0, true, 1)],
        )
        .unwrap();
        assert_eq!(n, 16);
        // version 2, checksum, object length 12, class 1, c-type 1,
        // 24001 = 0x05dc1 -> 05 dc 10 01 ; 16 -> 00 01 01 01
        assert_eq!(
            &b[4..],
            &[0, 12, 1, 1, 0x05, 0xdc, 0x10, 0x01, 0x00, 0x01, 0x01, 0x01]
        );
        assert_eq!(b[0], 0x20);
        assert_eq!(checksum::sum(&b[..16]), 0xffff);
    }

    #[test]
    fn finds_two_entry_stack_with_length_field() {
        let m = sample(32);
        let ext = find(&m).expect("extensions");
        let stack: [Lse; 2] = {
            let mut it = ext.mpls_stack();
            [it.next().unwrap(), it.next().unwrap()]
        };
        assert_eq!(stack[0].label(), 24001);
        assert!(!stack[0].bottom());
        assert_eq!(stack[1].label(), 16);
        assert!(stack[1].bottom());
        assert_eq!(ext.mpls_stack().count(), 2);
    }

    #[test]
    fn finds_non_compliant_extensions_at_128() {
        let m = sample(0);
        assert_eq!(find(&m).unwrap().mpls_stack().count(), 2);
    }

    #[test]
    fn rejects_bad_checksum_short_length_and_truncation() {
        let mut m = sample(32);
        m[140] ^= 0xff;
        assert!(find(&m).is_none());
        let m = sample(16); // 64 bytes: below the RFC 4884 minimum of 128
        assert!(find(&m).is_none());
        let m = sample(32);
        assert!(find(&m[..137]).is_none());
        assert!(find(&[]).is_none());
    }

    #[test]
    fn malformed_object_length_stops_iteration() {
        let mut m = sample(32);
        m[140..142].copy_from_slice(&200u16.to_be_bytes());
        m[138..140].fill(0); // zero checksum: "not computed"
        let ext = find(&m).unwrap();
        assert_eq!(ext.objects().count(), 0);
    }
}
