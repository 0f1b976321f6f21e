//! The VM front's IPv6 neighbour discovery (RFC 4861), pure logic: which messages a
//! guest sends that the front answers (neighbour and router solicitations), and the
//! advertisements it answers with, from the gateway's MAC. Which addresses the front
//! answers for is [`crate::vm::VmFront`]'s policy; parsing and emitting are smoltcp's
//! (`Icmpv6Repr`, `NdiscRepr`), checksums checked and set by it. A message that is
//! malformed, has a wrong checksum or a hop limit other than 255 (it crossed a router)
//! is not neighbour discovery.

use std::net::Ipv6Addr;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::time::Duration;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr, Icmpv6Packet, Icmpv6Repr,
    IpProtocol, Ipv6Packet, Ipv6Repr, NdiscNeighborFlags, NdiscPrefixInfoFlags,
    NdiscPrefixInformation, NdiscRepr, NdiscRouterFlags, RawHardwareAddress,
};

use crate::state::GATEWAY_MAC;

const ETH_LEN: usize = 14;
const IPV6_LEN: usize = 40;
/// The hop limit of every neighbour-discovery message.
const NDP_HOP_LIMIT: u8 = 255;
/// The MTU a router advertisement gives: the lab's links'.
pub const LINK_MTU: u32 = 1500;
/// How long a guest keeps the gateway as its default router, and the prefix on-link.
const ROUTER_LIFETIME_SECS: u64 = 1800;

/// A neighbour-discovery message from a guest that the front may answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Solicitation {
    /// Who has `target`? `src` is `::` while the guest checks its own tentative
    /// address (duplicate address detection).
    Neighbour { src: Ipv6Addr, target: Ipv6Addr },
    /// Which routers are there? (`src` may be `::`).
    Router { src: Ipv6Addr },
}

/// The gateway's link-local address: `fe80::` and the modified EUI-64 of its MAC
/// (RFC 4291 appendix A), what a router advertisement comes from.
pub fn gateway_link_local() -> Ipv6Addr {
    let m = GATEWAY_MAC;
    Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        m[0] ^ 2,
        m[1],
        m[2],
        0xff,
        0xfe,
        m[3],
        m[4],
        m[5],
    ])
}

/// The solicitation in the IPv6 packet `ip`, if it is one.
pub fn solicitation(ip: &[u8]) -> Option<Solicitation> {
    let ip = Ipv6Packet::new_checked(ip).ok()?;
    if ip.next_header() != IpProtocol::Icmpv6 || ip.hop_limit() != NDP_HOP_LIMIT {
        return None;
    }
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let icmp = Icmpv6Packet::new_checked(ip.payload()).ok()?;
    match Icmpv6Repr::parse(&src, &dst, &icmp, &ChecksumCapabilities::default()).ok()? {
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr, .. }) => {
            Some(Solicitation::Neighbour {
                src,
                target: target_addr,
            })
        }
        Icmpv6Repr::Ndisc(NdiscRepr::RouterSolicit { .. }) => Some(Solicitation::Router { src }),
        _ => None,
    }
}

/// The solicited-node multicast group's MAC for `dst` (RFC 2464): `33:33` and the
/// address's last four bytes; `dst` itself for unicast.
fn dst_mac(dst: Ipv6Addr, unicast: [u8; 6]) -> [u8; 6] {
    let o = dst.octets();
    if dst.is_multicast() {
        [0x33, 0x33, o[12], o[13], o[14], o[15]]
    } else {
        unicast
    }
}

/// Writes the IPv6 packet carrying `repr` from `src` to `dst` with `hop_limit` into
/// `buf` ([`IPV6_LEN`] and the message's length), its checksum set.
fn emit_ndp(src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8, repr: NdiscRepr, buf: &mut [u8]) {
    let icmp = Icmpv6Repr::Ndisc(repr);
    let mut ip = Ipv6Packet::new_unchecked(buf);
    Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol::Icmpv6,
        payload_len: icmp.buffer_len(),
        hop_limit,
    }
    .emit(&mut ip);
    icmp.emit(
        &src,
        &dst,
        &mut Icmpv6Packet::new_unchecked(ip.payload_mut()),
        &ChecksumCapabilities::default(),
    );
}

/// The frame carrying `repr` from `src` to `dst` (at `mac` if unicast).
fn frame(src: Ipv6Addr, dst: Ipv6Addr, mac: [u8; 6], repr: NdiscRepr) -> Vec<u8> {
    let mut f = vec![0u8; ETH_LEN + IPV6_LEN + Icmpv6Repr::Ndisc(repr).buffer_len()];
    let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
    EthernetRepr {
        src_addr: EthernetAddress(GATEWAY_MAC),
        dst_addr: EthernetAddress(dst_mac(dst, mac)),
        ethertype: EthernetProtocol::Ipv6,
    }
    .emit(&mut eth);
    emit_ndp(src, dst, NDP_HOP_LIMIT, repr, eth.payload_mut());
    f
}

/// Where an answer to a solicitation from `src` goes: back to `src`, or to all nodes
/// (`ff02::1`) when it came from the unspecified address `::` (RFC 4861 7.2.4, 6.2.6).
fn answer_to(src: Ipv6Addr) -> Ipv6Addr {
    if src.is_unspecified() {
        Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1)
    } else {
        src
    }
}

/// The answer to a neighbour solicitation from `src` (at `src_mac`) for `target`, which
/// is at `target_mac`: to `src`, or to all nodes when `src` is `::` (a defence of an
/// address in use, RFC 4861 7.2.4). `router`: the target is the gateway (or proxied by
/// it); `proxy`: the answer is the gateway's on another node's behalf, so it does not
/// override an entry the guest already has (RFC 4861 7.2.8).
pub fn neighbour_advert(
    src: Ipv6Addr,
    src_mac: [u8; 6],
    target: Ipv6Addr,
    target_mac: [u8; 6],
    router: bool,
    proxy: bool,
) -> Vec<u8> {
    let dad = src.is_unspecified();
    let mut flags = NdiscNeighborFlags::empty();
    flags.set(NdiscNeighborFlags::ROUTER, router);
    flags.set(NdiscNeighborFlags::SOLICITED, !dad);
    flags.set(NdiscNeighborFlags::OVERRIDE, !proxy);
    let dst = answer_to(src);
    let repr = NdiscRepr::NeighborAdvert {
        flags,
        target_addr: target,
        lladdr: Some(RawHardwareAddress::from_bytes(&target_mac)),
    };
    frame(target, dst, src_mac, repr)
}

/// The gateway's router advertisement for a guest at `src_mac` that solicited from
/// `src`: the gateway as default router, the MTU, and the guest's on-link prefix if the
/// front knows it (`on_link`: network and length). The prefix is never for
/// autoconfiguration (A=0): a lab LAN's twin is a /(96+n), and SLAAC needs a /64; M=1
/// says the address comes from DHCPv6 ([`crate::dhcp6`]: the twin).
pub fn router_advert(src: Ipv6Addr, src_mac: [u8; 6], on_link: Option<(Ipv6Addr, u8)>) -> Vec<u8> {
    let lifetime = Duration::from_secs(ROUTER_LIFETIME_SECS);
    let dst = answer_to(src);
    let repr = NdiscRepr::RouterAdvert {
        hop_limit: 64,
        flags: NdiscRouterFlags::MANAGED,
        router_lifetime: lifetime,
        reachable_time: Duration::from_secs(0),
        retrans_time: Duration::from_secs(0),
        lladdr: Some(RawHardwareAddress::from_bytes(&GATEWAY_MAC)),
        mtu: Some(LINK_MTU),
        prefix_info: on_link.map(|(prefix, prefix_len)| NdiscPrefixInformation {
            prefix_len,
            flags: NdiscPrefixInfoFlags::ON_LINK,
            valid_lifetime: lifetime,
            preferred_lifetime: lifetime,
            prefix,
        }),
    };
    frame(gateway_link_local(), dst, src_mac, repr)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The IPv6 packet of a guest's neighbour (`target` set) or router solicitation,
    /// with `hop_limit`, checksummed by smoltcp.
    pub(crate) fn solicit(
        src: Ipv6Addr,
        dst: Ipv6Addr,
        mac: [u8; 6],
        target: Option<Ipv6Addr>,
        hop_limit: u8,
    ) -> Vec<u8> {
        let lladdr = (!src.is_unspecified()).then(|| RawHardwareAddress::from_bytes(&mac));
        let repr = match target {
            Some(target_addr) => NdiscRepr::NeighborSolicit {
                target_addr,
                lladdr,
            },
            None => NdiscRepr::RouterSolicit { lladdr },
        };
        let mut p = vec![0u8; IPV6_LEN + Icmpv6Repr::Ndisc(repr).buffer_len()];
        emit_ndp(src, dst, hop_limit, repr, &mut p);
        p
    }

    /// The advertisement in a frame the front sent, parsed back (checksum checked).
    pub(crate) fn parse_advert(f: &[u8]) -> (Ipv6Addr, Ipv6Addr, NdiscRepr<'_>) {
        assert_eq!(&f[6..12], &GATEWAY_MAC);
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        let ip = Ipv6Packet::new_checked(&f[ETH_LEN..]).unwrap();
        assert_eq!(ip.hop_limit(), 255);
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
        match Icmpv6Repr::parse(&src, &dst, &icmp, &ChecksumCapabilities::default()).unwrap() {
            Icmpv6Repr::Ndisc(r) => (src, dst, r),
            other => panic!("not neighbour discovery: {other:?}"),
        }
    }

    #[test]
    fn the_gateway_link_local_is_its_macs_eui64() {
        // 02:76:74:6e:74:01 → the U/L bit flipped, ff:fe in the middle
        assert_eq!(
            gateway_link_local(),
            "fe80::76:74ff:fe6e:7401".parse::<Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn solicitations_are_parsed_and_everything_else_is_not() {
        let (g, m) = ("2001:db8:64::c000:20a".parse().unwrap(), [2, 0, 0, 0, 0, 1]);
        let t = "2001:db8:64::c000:201".parse().unwrap();
        let snm = "ff02::1:ff00:201".parse().unwrap();
        assert_eq!(
            solicitation(&solicit(g, snm, m, Some(t), 255)),
            Some(Solicitation::Neighbour { src: g, target: t })
        );
        let all_routers = "ff02::2".parse().unwrap();
        assert_eq!(
            solicitation(&solicit(Ipv6Addr::UNSPECIFIED, all_routers, m, None, 255)),
            Some(Solicitation::Router {
                src: Ipv6Addr::UNSPECIFIED
            })
        );
        // forwarded by a router: not neighbour discovery
        assert_eq!(solicitation(&solicit(g, snm, m, Some(t), 64)), None);
        // a broken checksum
        let mut p = solicit(g, snm, m, Some(t), 255);
        p[IPV6_LEN + 2] ^= 0xff;
        assert_eq!(solicitation(&p), None);
        // truncated, or not ICMPv6
        assert_eq!(solicitation(&p[..50]), None);
        let mut p = solicit(g, snm, m, Some(t), 255);
        p[6] = 17;
        assert_eq!(solicitation(&p), None);
    }

    #[test]
    fn a_router_advertisement_gives_the_gateway_the_mtu_and_the_on_link_prefix() {
        let m = [2, 0, 0, 0, 0, 1];
        let prefix = ("2001:db8:64::c000:200".parse().unwrap(), 120);
        let f = router_advert(Ipv6Addr::UNSPECIFIED, m, Some(prefix));
        assert_eq!(&f[..6], &[0x33, 0x33, 0, 0, 0, 1], "to all nodes");
        let (src, dst, r) = parse_advert(&f);
        assert_eq!(
            (src, dst),
            (gateway_link_local(), "ff02::1".parse().unwrap())
        );
        let NdiscRepr::RouterAdvert {
            flags,
            router_lifetime,
            mtu,
            prefix_info: Some(p),
            lladdr,
            ..
        } = r
        else {
            panic!("{r:?}")
        };
        assert_eq!(flags, NdiscRouterFlags::MANAGED, "addresses from DHCPv6");
        assert!(router_lifetime.secs() > 0);
        assert_eq!(mtu, Some(LINK_MTU));
        assert_eq!(lladdr.unwrap().as_bytes(), &GATEWAY_MAC);
        assert_eq!((p.prefix, p.prefix_len), prefix);
        assert_eq!(p.flags, NdiscPrefixInfoFlags::ON_LINK, "on-link, no SLAAC");
    }
}
