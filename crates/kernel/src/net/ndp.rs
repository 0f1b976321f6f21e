//! IPv6 neighbour discovery (RFC 4861), as much as one static address needs: the
//! neighbour solicitation that asks for a next hop's MAC, the solicited advertisement
//! that answers one for our address, and reading either. Written and read by hand over
//! the wire crate's checksum: smoltcp's `proto-ipv6` would also build IPv6 into the
//! interface that DHCP runs. No router discovery, SLAAC, DHCPv6 or MLD.

use core::net::Ipv6Addr;
use vtnt_wire::checksum;

/// ICMPv6 type of a neighbour solicitation.
pub const SOLICIT: u8 = 135;
/// ICMPv6 type of a neighbour advertisement.
pub const ADVERT: u8 = 136;
const ICMPV6: u8 = 58;
/// An NS or NA with one link-layer address option.
const ICMP_LEN: usize = 32;
/// The frame of one: Ethernet, IPv6, ICMPv6.
pub const FRAME_LEN: usize = 14 + 40 + ICMP_LEN;

/// A neighbour solicitation or advertisement received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    /// [`SOLICIT`] or [`ADVERT`].
    pub kind: u8,
    /// The IPv6 source (unspecified in a duplicate address check).
    pub src: Ipv6Addr,
    pub target: Ipv6Addr,
    /// The source (solicitation) or target (advertisement) link-layer address option.
    pub mac: Option<[u8; 6]>,
}

/// The solicited-node multicast address of `a` (`ff02::1:ffXX:XXXX`) and its MAC.
pub fn solicited_node(a: Ipv6Addr) -> (Ipv6Addr, [u8; 6]) {
    let o = a.octets();
    let mut s = [0u8; 16];
    s[..2].copy_from_slice(&[0xff, 2]);
    s[11..13].copy_from_slice(&[1, 0xff]);
    s[13..].copy_from_slice(&o[13..]);
    (Ipv6Addr::from(s), [0x33, 0x33, 0xff, o[13], o[14], o[15]])
}

/// Writes into `frame` (at least [`FRAME_LEN`] bytes) a solicitation for `target` or a
/// solicited advertisement of it, with our MAC `mac` as its link-layer option; returns
/// the frame's length.
pub fn emit(
    frame: &mut [u8],
    kind: u8,
    (mac, dst_mac): ([u8; 6], [u8; 6]),
    (src, dst): (Ipv6Addr, Ipv6Addr),
    target: Ipv6Addr,
) -> usize {
    let f = &mut frame[..FRAME_LEN];
    f[..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    let (ip, icmp) = f[14..].split_at_mut(40);
    ip[..8].copy_from_slice(&[0x60, 0, 0, 0, 0, ICMP_LEN as u8, ICMPV6, 255]);
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&dst.octets());
    // solicited and override for an advertisement; the option: 1 source, 2 target
    let (flags, option) = if kind == ADVERT { (0x60, 2) } else { (0, 1) };
    icmp[..8].copy_from_slice(&[kind, 0, 0, 0, flags, 0, 0, 0]);
    icmp[8..24].copy_from_slice(&target.octets());
    icmp[24..26].copy_from_slice(&[option, 1]);
    icmp[26..].copy_from_slice(&mac);
    let sum = checksum::add(
        checksum::pseudo_v6(src, dst, ICMPV6, ICMP_LEN as u32),
        checksum::sum(icmp),
    );
    icmp[2..4].copy_from_slice(&(!sum).to_be_bytes());
    FRAME_LEN
}

/// What a received neighbour message `m` (from MAC `from`) teaches us, whose address is
/// `me`: a neighbour's address and MAC, and whether to answer it with a solicited
/// advertisement of `me` (it solicited our address; a duplicate address check, from the
/// unspecified address, is left unanswered: ours is static). `None`: nothing to learn
/// (a solicitation of another address).
pub fn learn(me: Ipv6Addr, m: &Message, from: [u8; 6]) -> Option<(Ipv6Addr, [u8; 6], bool)> {
    let mac = m.mac.unwrap_or(from);
    match m.kind {
        ADVERT => Some((m.target, mac, false)),
        _ if m.target == me && !m.src.is_unspecified() => Some((m.src, mac, true)),
        _ => None,
    }
}

/// The neighbour solicitation or advertisement in IPv6 packet `ip` (its length the
/// header's), if it is one that came from the link (hop limit 255, RFC 4861 7.1.1).
pub fn parse(ip: &[u8]) -> Option<Message> {
    let icmp = ip.get(40..)?;
    let kind = *icmp.first()?;
    if ip[6] != ICMPV6 || ip[7] != 255 || !(kind == SOLICIT || kind == ADVERT) {
        return None;
    }
    let addr = |b: &[u8]| Some(Ipv6Addr::from(<[u8; 16]>::try_from(b).ok()?));
    let want = if kind == ADVERT { 2 } else { 1 };
    let mut mac = None;
    let mut options = icmp.get(24..)?;
    while let [t, l, ..] = *options {
        let len = usize::from(l) * 8;
        let (opt, rest) = options.split_at_checked(len).filter(|_| len > 0)?;
        if t == want {
            mac = opt.get(2..8).and_then(|m| m.try_into().ok());
        }
        options = rest;
    }
    Some(Message {
        kind,
        src: addr(&ip[8..24])?,
        target: addr(icmp.get(8..24)?)?,
        mac,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn a_solicitation_goes_to_the_solicited_node_address() {
        let (ip, mac) = solicited_node(v6("2001:db8:64::c000:201"));
        assert_eq!(ip, v6("ff02::1:ff00:201"));
        assert_eq!(mac, [0x33, 0x33, 0xff, 0x00, 0x02, 0x01]);
    }

    #[test]
    fn what_we_write_reads_back_with_a_valid_checksum() {
        let me = [0x52, 0x54, 0, 0x76, 0x74, 0x0a];
        let (src, gw) = (v6("2001:db8:64::c000:20a"), v6("2001:db8:64::c000:201"));
        for (kind, dst) in [(SOLICIT, solicited_node(gw).0), (ADVERT, gw)] {
            let mut f = [0u8; FRAME_LEN + 4];
            assert_eq!(
                emit(&mut f, kind, (me, [0x33; 6]), (src, dst), gw),
                FRAME_LEN
            );
            let ip = &f[14..FRAME_LEN];
            let m = parse(ip).unwrap();
            assert_eq!((m.kind, m.src, m.target, m.mac), (kind, src, gw, Some(me)));
            let sum = checksum::add(
                checksum::pseudo_v6(src, dst, ICMPV6, 32),
                checksum::sum(&ip[40..]),
            );
            assert_eq!(sum, 0xffff, "kind {kind}");
        }
    }

    /// The kernel's answer to the front's (or a router's) solicitation of its address:
    /// an advertisement back to the asker's MAC, solicited and overriding, with our MAC.
    #[test]
    fn a_solicitation_of_our_address_is_answered_others_are_not() {
        let (me, me_mac) = (
            v6("2001:db8:64::c000:20a"),
            [0x52, 0x54, 0, 0x76, 0x74, 0x0a],
        );
        let (gw, gw_mac) = (v6("2001:db8:64::c000:201"), [2, 0x76, 0x74, 0x6e, 0x74, 1]);
        let ns = |src, target| Message {
            kind: SOLICIT,
            src,
            target,
            mac: Some(gw_mac),
        };
        let (to, mac, answer) = learn(me, &ns(gw, me), [9; 6]).unwrap();
        assert_eq!((to, mac, answer), (gw, gw_mac, true));
        let mut f = [0u8; FRAME_LEN];
        emit(&mut f, ADVERT, (me_mac, mac), (me, to), me);
        assert_eq!(f[..6], gw_mac);
        let na = parse(&f[14..]).unwrap();
        assert_eq!(
            (na.kind, na.src, na.target, na.mac),
            (ADVERT, me, me, Some(me_mac))
        );
        assert_eq!(f[14 + 40 + 4], 0x60, "solicited, override");
        // a duplicate address check, another address's solicitation: no answer
        assert_eq!(learn(me, &ns(Ipv6Addr::UNSPECIFIED, me), [9; 6]), None);
        assert_eq!(
            learn(me, &ns(gw, v6("2001:db8:64::c000:20b")), [9; 6]),
            None
        );
        // an advertisement teaches its target's MAC (the frame's source without the option)
        let na = Message {
            kind: ADVERT,
            src: gw,
            target: gw,
            mac: None,
        };
        assert_eq!(learn(me, &na, gw_mac), Some((gw, gw_mac, false)));
    }

    #[test]
    fn other_packets_and_off_link_ones_are_not_neighbour_messages() {
        let mut f = [0u8; FRAME_LEN];
        let a = v6("2001:db8::1");
        emit(&mut f, SOLICIT, ([2; 6], [3; 6]), (a, a), a);
        let mut ip = f[14..].to_vec();
        ip[7] = 64; // routed: not from the link
        assert_eq!(parse(&ip), None);
        ip[7] = 255;
        ip[40] = 128; // an echo request
        assert_eq!(parse(&ip), None);
        ip[40] = SOLICIT;
        ip[65] = 0; // a zero-length option
        assert_eq!(parse(&ip), None);
        assert_eq!(parse(&ip[..50]), None);
    }
}
