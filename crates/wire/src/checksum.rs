//! The Internet checksum (RFC 1071), the trick Paris traceroute needs (choose two payload
//! bytes so that a packet's checksum comes out at a wanted value), and the incremental
//! update a translator needs (RFC 1624: change some words, fix the checksum without
//! reading the rest).

use core::net::{Ipv4Addr, Ipv6Addr};

/// One's-complement sum of `data` (not inverted), folded to 16 bits.
pub fn sum(data: &[u8]) -> u16 {
    smoltcp::wire::checksum::data(data)
}

/// One's-complement addition of two folded sums.
pub fn add(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s & 0xffff) + (s >> 16)) as u16
}

/// The checksum to store for `data` (the inverted sum).
pub fn of(data: &[u8]) -> u16 {
    !sum(data)
}

/// Sum of the IPv4 pseudo-header for a transport checksum.
pub fn pseudo_v4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, len: u16) -> u16 {
    let s = src.octets();
    let d = dst.octets();
    let words = [
        u16::from_be_bytes([s[0], s[1]]),
        u16::from_be_bytes([s[2], s[3]]),
        u16::from_be_bytes([d[0], d[1]]),
        u16::from_be_bytes([d[2], d[3]]),
        proto as u16,
        len,
    ];
    words.iter().fold(0, |acc, w| add(acc, *w))
}

/// Sum of the IPv6 pseudo-header (RFC 8200 section 8.1) for an upper-layer checksum
/// (ICMPv6's included, unlike ICMPv4's).
pub fn pseudo_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, len: u32) -> u16 {
    let addrs = add(sum(&src.octets()), sum(&dst.octets()));
    let len = add((len >> 16) as u16, len as u16);
    add(add(addrs, len), u16::from(next_header))
}

/// The 16-bit word to place in a zeroed slot so that a checksum whose other words sum
/// to `rest` (one's complement, not inverted) comes out as `target`.
pub fn compensate(rest: u16, target: u16) -> u16 {
    // want !(rest + w) == target  =>  w = !target - rest = !target + !rest
    add(!target, !rest)
}

/// RFC 1624, eqn. 3: the checksum of data whose checksum was `checksum` after words
/// summing to `old` were replaced by words summing to `new` (one's-complement sums of the
/// changed words, as [`sum`] and [`add`] give them). `update(update(c, old, new), new, old)`
/// is `c` for every checksum a sender computes (all but 0xffff, which stands for a zero
/// sum only in UDP and comes back as 0).
pub fn update(checksum: u16, old: u16, new: u16) -> u16 {
    !add(add(!checksum, !old), new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        assert_eq!(
            sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
    }

    #[test]
    fn compensate_hits_target() {
        for target in [0x0001u16, 0x1234, 0xfffe, 0x8000] {
            let mut data = [0x45u8, 0x00, 0x12, 0x34, 0, 0, 0xde, 0xad];
            let rest = sum(&data);
            let w = compensate(rest, target);
            data[4..6].copy_from_slice(&w.to_be_bytes());
            assert_eq!(of(&data), target, "target {target:#x}");
        }
    }

    #[test]
    fn update_equals_recomputing_and_reverts() {
        let mut data = [0x45u8, 0x00, 0x12, 0x34, 0xc0, 0x00, 0x02, 0x0a, 0xde, 0xad];
        for (at, new) in [
            (4usize, [0x0au8, 0x01]),
            (8, [0x00, 0x00]),
            (2, [0xff, 0xff]),
        ] {
            let before = of(&data);
            let old = sum(&data[at..at + 2]);
            data[at..at + 2].copy_from_slice(&new);
            let after = update(before, old, sum(&new));
            assert_eq!(after, of(&data), "word at {at}");
            assert_eq!(update(after, sum(&new), old), before, "reverts");
        }
    }
}
