//! IPv6 neighbour discovery (RFC 4861), as much as one address needs: the neighbour
//! solicitation that asks for a next hop's MAC, the solicited advertisement that answers
//! one for our address (or our link-local one), and reading either; for `ip6=auto`
//! (`net::autoconf`) the link-local address, the router solicitation and reading router
//! advertisements. Every ICMPv6 checksum read is checked. Written and read by hand over
//! the wire crate's checksum: smoltcp's `proto-ipv6` would also build IPv6 into the
//! interface that DHCP runs. No MLD.

use core::net::Ipv6Addr;
use vtnt_wire::checksum;

/// ICMPv6 type of a neighbour solicitation.
pub const SOLICIT: u8 = 135;
/// ICMPv6 type of a neighbour advertisement.
pub const ADVERT: u8 = 136;
const ROUTER_SOLICIT: u8 = 133;
const ROUTER_ADVERT: u8 = 134;
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
    macs: ([u8; 6], [u8; 6]),
    ips: (Ipv6Addr, Ipv6Addr),
    target: Ipv6Addr,
) -> usize {
    let icmp = &mut frame[54..FRAME_LEN];
    // solicited and override for an advertisement; the option: 1 source, 2 target
    let (flags, option) = if kind == ADVERT { (0x60, 2) } else { (0, 1) };
    icmp[..8].copy_from_slice(&[kind, 0, 0, 0, flags, 0, 0, 0]);
    icmp[8..24].copy_from_slice(&target.octets());
    icmp[24..26].copy_from_slice(&[option, 1]);
    icmp[26..].copy_from_slice(&macs.0);
    seal(frame, macs, ips, (ICMPV6, 255), ICMP_LEN, 2)
}

/// Completes an Ethernet frame whose IPv6 payload (`len` bytes of protocol `proto`, its
/// checksum slot at `sum_at` in it) is already at byte 54 of `frame`: writes the Ethernet
/// header (from `macs.0` to `macs.1`), the IPv6 header (`ips`, hop limit `hop`) and the
/// payload's checksum; returns the frame's length.
pub fn seal(
    frame: &mut [u8],
    (mac, dst_mac): ([u8; 6], [u8; 6]),
    (src, dst): (Ipv6Addr, Ipv6Addr),
    (proto, hop): (u8, u8),
    len: usize,
    sum_at: usize,
) -> usize {
    let f = &mut frame[..54 + len];
    f[..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    let (ip, body) = f[14..].split_at_mut(40);
    let l = (len as u16).to_be_bytes();
    ip[..8].copy_from_slice(&[0x60, 0, 0, 0, l[0], l[1], proto, hop]);
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&dst.octets());
    body[sum_at..sum_at + 2].fill(0);
    let sum = checksum::add(
        checksum::pseudo_v6(src, dst, proto, len as u32),
        checksum::sum(body),
    );
    // a zero sum goes out as 0xffff (UDP's zero means "none", forbidden over IPv6)
    let sum = if sum == 0xffff { sum } else { !sum };
    body[sum_at..sum_at + 2].copy_from_slice(&sum.to_be_bytes());
    54 + len
}

/// The payload of IPv6 packet `ip` (its length the header's) if it is protocol `proto`
/// (no extension header) and its checksum over the pseudo-header is right.
pub fn payload(ip: &[u8], proto: u8) -> Option<&[u8]> {
    let body = ip.get(40..)?;
    let sum = checksum::add(
        checksum::pseudo_v6(
            addr(&ip[8..24]),
            addr(&ip[24..40]),
            proto,
            body.len() as u32,
        ),
        checksum::sum(body),
    );
    (ip[6] == proto && sum == 0xffff).then_some(body)
}

/// The ICMPv6 message in `ip` if it came from the link (hop limit 255, RFC 4861 6.1 and
/// 7.1) with a right checksum.
pub fn from_link(ip: &[u8]) -> Option<&[u8]> {
    payload(ip, ICMPV6).filter(|_| ip[7] == 255)
}

/// The IPv6 address in `b` (16 bytes: callers slice it so).
pub fn addr(b: &[u8]) -> Ipv6Addr {
    Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap_or([0; 16]))
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
/// header's), if it is one that came from the link (hop limit 255, RFC 4861 7.1.1) with a
/// right checksum.
pub fn parse(ip: &[u8]) -> Option<Message> {
    let icmp = from_link(ip)?;
    let kind = *icmp.first()?;
    if !(kind == SOLICIT || kind == ADVERT) {
        return None;
    }
    let want = if kind == ADVERT { 2 } else { 1 };
    Some(Message {
        kind,
        src: addr(&ip[8..24]),
        target: addr(icmp.get(8..24)?),
        mac: option_mac(icmp.get(24..)?, want)?,
    })
}

/// The link-layer address in option `want` (1 source, 2 target) among `options`:
/// `None` if the options are malformed (a zero length, one past the end), `Some(None)` if
/// there is none.
pub fn option_mac(mut options: &[u8], want: u8) -> Option<Option<[u8; 6]>> {
    let mut mac = None;
    while let [t, l, ..] = *options {
        let len = usize::from(l) * 8;
        let (opt, rest) = options.split_at_checked(len).filter(|_| len > 0)?;
        if t == want {
            mac = opt.get(2..8).and_then(|m| m.try_into().ok());
        }
        options = rest;
    }
    Some(mac)
}

/// The modified EUI-64 interface ID of `mac` under the 64-bit `prefix`.
pub fn with_iid(prefix: Ipv6Addr, mac: [u8; 6]) -> Ipv6Addr {
    let mut a = prefix.octets();
    a[8..].copy_from_slice(&[
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]);
    Ipv6Addr::from(a)
}

/// Our link-local address.
pub fn link_local(mac: [u8; 6]) -> Ipv6Addr {
    with_iid(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), mac)
}

/// What a router advertisement says that we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advert {
    /// Its source when its router lifetime is not zero: our default router.
    pub router: Option<Ipv6Addr>,
    /// The router's MAC, from its source link-layer option.
    pub mac: Option<[u8; 6]>,
    /// M: addresses from DHCPv6.
    pub managed: bool,
    /// The last prefix with A=1 and length 64 (for SLAAC).
    pub slaac: Option<Ipv6Addr>,
    /// The last prefix with L=1 and its length.
    pub on_link: Option<(Ipv6Addr, u8)>,
}

/// The router advertisement in IPv6 packet `ip` (its length the header's), if it is a
/// valid one (RFC 4861 6.1.2: hop limit 255, checksum, code 0, a link-local source,
/// options whole). Prefix options with a zero valid lifetime or a link-local prefix are
/// skipped.
// not inlined into the receive closure: 80 bytes less image (2026-11-29)
#[inline(never)]
pub fn parse_ra(ip: &[u8]) -> Option<Advert> {
    let icmp = from_link(ip)?;
    let router = addr(&ip[8..24]);
    if icmp.get(..2)? != [ROUTER_ADVERT, 0] || !router.is_unicast_link_local() {
        return None;
    }
    let mut ra = Advert {
        router: (icmp[6..8] != [0, 0]).then_some(router),
        mac: None,
        managed: icmp[5] & 0x80 != 0,
        slaac: None,
        on_link: None,
    };
    let mut options = icmp.get(16..)?;
    while let [t, l, ..] = *options {
        let (opt, rest) = options
            .split_at_checked(usize::from(l) * 8)
            .filter(|_| l > 0)?;
        match (t, l, opt[2], opt[3]) {
            (1, 1, ..) => ra.mac = opt[2..8].try_into().ok(),
            (3, 4, len, flags) => {
                let prefix = addr(&opt[16..32]);
                if opt[4..8] != [0; 4] && len <= 128 && !prefix.is_unicast_link_local() {
                    if flags & 0x80 != 0 {
                        ra.on_link = Some((prefix, len));
                    }
                    if flags & 0x40 != 0 && len == 64 {
                        ra.slaac = Some(prefix);
                    }
                }
            }
            _ => {}
        }
        options = rest;
    }
    Some(ra)
}

/// Writes into `frame` (at least 70 bytes) a router solicitation from our link-local
/// address, with our MAC as its source link-layer option; returns the frame's length.
pub fn emit_rs(frame: &mut [u8], mac: [u8; 6]) -> usize {
    let icmp = &mut frame[54..70];
    icmp[..10].copy_from_slice(&[ROUTER_SOLICIT, 0, 0, 0, 0, 0, 0, 0, 1, 1]);
    icmp[10..].copy_from_slice(&mac);
    let all_routers = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);
    let macs = (mac, [0x33, 0x33, 0, 0, 0, 2]);
    seal(
        frame,
        macs,
        (link_local(mac), all_routers),
        (ICMPV6, 255),
        16,
        2,
    )
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
        let mut ip = f[14..].to_vec();
        assert!(parse(&ip).is_some());
        ip[65] = 0; // a zero-length option
        assert_eq!(parse(&ip), None);
        assert_eq!(parse(&ip[..50]), None);
        let mut ip = f[14..].to_vec();
        ip[60] ^= 1; // a bit of the target flipped
        assert_eq!(parse(&ip), None);
    }

    const MAC: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
    const ROUTER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

    #[test]
    fn the_link_local_and_slaac_addresses_carry_the_modified_eui64() {
        assert_eq!(link_local(MAC), v6("fe80::5054:ff:fe12:3456"));
        assert_eq!(
            with_iid(v6("2001:db8:1:2::"), MAC),
            v6("2001:db8:1:2:5054:ff:fe12:3456")
        );
    }

    #[test]
    fn a_router_solicitation_goes_to_all_routers_from_the_link_local_address() {
        let mut f = [0u8; 128];
        let n = emit_rs(&mut f, MAC);
        assert_eq!(n, 70);
        assert_eq!(
            f[..12],
            [0x33, 0x33, 0, 0, 0, 2, 0x52, 0x54, 0, 0x12, 0x34, 0x56]
        );
        let ip = &f[14..n];
        assert_eq!(addr(&ip[8..24]), link_local(MAC));
        assert_eq!(addr(&ip[24..40]), v6("ff02::2"));
        let icmp = from_link(ip).expect("hop limit 255, checksum right");
        assert_eq!(icmp[..4], [ROUTER_SOLICIT, 0, icmp[2], icmp[3]]);
        assert_eq!(option_mac(&icmp[8..], 1), Some(Some(MAC)));
    }

    /// A router advertisement from `src` (flags byte, router lifetime) with `options`
    /// after its 16 bytes, as an IPv6 packet.
    fn ra(src: Ipv6Addr, flags: u8, lifetime: u16, options: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 54 + 16 + options.len()];
        let l = lifetime.to_be_bytes();
        f[54..70].copy_from_slice(&[
            ROUTER_ADVERT,
            0,
            0,
            0,
            64,
            flags,
            l[0],
            l[1],
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ]);
        f[70..].copy_from_slice(options);
        let n = f.len() - 54;
        seal(
            &mut f,
            (ROUTER_MAC, [0x33; 6]),
            (src, v6("ff02::1")),
            (ICMPV6, 255),
            n,
            2,
        );
        f[14..].to_vec()
    }

    /// A prefix information option (length, L and A flags, valid lifetime).
    fn pio(prefix: &str, len: u8, flags: u8, valid: u32) -> Vec<u8> {
        let mut o = vec![3, 4, len, flags];
        o.extend(valid.to_be_bytes());
        o.extend(valid.to_be_bytes()); // preferred
        o.extend([0; 4]);
        o.extend(v6(prefix).octets());
        o
    }

    fn sllao(mac: [u8; 6]) -> Vec<u8> {
        [&[1, 1][..], &mac].concat()
    }

    #[test]
    fn a_router_advertisement_names_the_router_its_mac_and_the_prefixes() {
        let router = v6("fe80::1");
        let opts = [sllao(ROUTER_MAC), pio("2001:db8:1::", 64, 0xc0, 3600)].concat();
        let a = parse_ra(&ra(router, 0, 1800, &opts)).unwrap();
        assert_eq!(
            a,
            Advert {
                router: Some(router),
                mac: Some(ROUTER_MAC),
                managed: false,
                slaac: Some(v6("2001:db8:1::")),
                on_link: Some((v6("2001:db8:1::"), 64)),
            }
        );
        // the lab's front: M=1, an on-link /120 twin prefix with A=0, no lifetime given
        // to a prefix that has expired, a router lifetime of zero (not a default router)
        let opts = [
            pio("2001:db8:64::c000:200", 120, 0x80, 3600),
            pio("2001:db8:9::", 64, 0xc0, 0),
        ]
        .concat();
        let a = parse_ra(&ra(router, 0x80, 0, &opts)).unwrap();
        assert_eq!(
            (a.router, a.mac, a.managed, a.slaac, a.on_link),
            (
                None,
                None,
                true,
                None,
                Some((v6("2001:db8:64::c000:200"), 120))
            )
        );
        // A=1 on a prefix that is not a /64: no SLAAC (RFC 4862 5.5.3)
        let a = parse_ra(&ra(router, 0, 60, &pio("2001:db8:1::", 96, 0x40, 60))).unwrap();
        assert_eq!((a.slaac, a.on_link), (None, None));
    }

    #[test]
    fn an_advertisement_off_the_link_malformed_or_corrupted_is_ignored() {
        let good = ra(v6("fe80::1"), 0, 1800, &pio("2001:db8:1::", 64, 0xc0, 3600));
        assert!(parse_ra(&good).is_some());
        // not from a link-local address (RFC 4861 6.1.2)
        assert_eq!(parse_ra(&ra(v6("2001:db8::1"), 0, 1800, &[])), None);
        let mut p = good.clone();
        p[7] = 64; // routed here
        assert_eq!(parse_ra(&p), None);
        // a zero-length option, one past the end
        assert_eq!(
            parse_ra(&ra(v6("fe80::1"), 0, 1800, &[1, 0, 0, 0, 0, 0, 0, 0])),
            None
        );
        assert_eq!(
            parse_ra(&ra(v6("fe80::1"), 0, 1800, &[3, 4, 64, 0xc0])),
            None
        );
        // a neighbour solicitation is not an advertisement, nor the reverse
        assert_eq!(parse(&good), None);
        let mut f = [0u8; FRAME_LEN];
        let a = v6("fe80::1");
        emit(&mut f, SOLICIT, ([2; 6], [3; 6]), (a, a), a);
        assert_eq!(parse_ra(&f[14..]), None);
    }

    /// The kernel's parsers of what arrives from the link (this module's and DHCPv6's)
    /// replayed on every truncation and every one-bit corruption of valid seeds: no
    /// panic, and a corrupted message is refused (its checksum, or the hop limit or
    /// length it broke) unless the bit is one no reader looks at.
    #[test]
    fn truncated_and_corrupted_seeds_never_panic_and_corruption_is_refused() {
        let mut ns = [0u8; FRAME_LEN];
        let a = v6("fe80::1");
        emit(&mut ns, SOLICIT, ([2; 6], [3; 6]), (a, a), a);
        let mut rs = [0u8; 70];
        emit_rs(&mut rs, MAC);
        let opts = [sllao(ROUTER_MAC), pio("2001:db8:1::", 64, 0xc0, 3600)].concat();
        let seeds = [
            ns[14..].to_vec(),
            rs[14..].to_vec(),
            ra(a, 0x80, 1800, &opts),
            crate::dhcp6::tests::advertise_seed(),
        ];
        let read = |p: &[u8]| {
            (
                parse(p),
                parse_ra(p),
                crate::dhcp6::parse(p, MAC, 0x00ab_cdef).map(|r| (r.kind, r.addr)),
            )
        };
        for seed in &seeds {
            let whole = read(seed);
            for n in 0..seed.len() {
                read(&seed[..n]);
            }
            for byte in 6..seed.len() {
                for bit in 0..8 {
                    let mut p = seed.clone();
                    p[byte] ^= 1 << bit;
                    let got = read(&p);
                    if byte >= 8 {
                        assert!(
                            got.0.is_none() && got.1.is_none() && got.2.is_none(),
                            "byte {byte} bit {bit} of {seed:?}"
                        );
                    } else {
                        assert!(got == whole || got == (None, None, None));
                    }
                }
            }
        }
    }
}
