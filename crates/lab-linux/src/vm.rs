//! The VM front's Ethernet side: QEMU sends each guest frame as one UDP datagram
//! (`-netdev dgram` or `-netdev socket,udp=`). The daemon answers ARP for every address
//! of the front's LANs (proxy ARP: the gateway's MAC; a lab's vantage point LAN and its VM
//! LAN, [`crate::state::Lan`]), learns each guest's address,
//! MAC and UDP endpoint from its ARP and IPv4 frames (and from the DHCP leases it grants,
//! see [`crate::dhcp`]), hands IPv4 packets to the lab and wraps the lab's answers into
//! frames for the right guest. Pure logic, no sockets.
//!
//! IPv6 is dual stack by the lab's convention: a guest's IPv6 address is the twin
//! (`2001:db8:64::a.b.c.d`, [`vtnt_lab::addr::to_v6`]) of its IPv4 one, its on-link
//! prefix the twin of its LAN's, its router the gateway's twin or link-local address, at
//! the gateway's MAC. The front learns guests from their IPv6 frames too, answers their
//! neighbour solicitations as it answers ARP (proxy, [`crate::ndp`]; duplicate address
//! detection is left unanswered unless another guest holds the address) and their router
//! solicitations with a router advertisement (M=1: addresses from DHCPv6), serves
//! DHCPv6 ([`crate::dhcp6`]: the twin, stateless), and hands IPv6 packets between lab
//! addresses to the lab; multicast, link-local and MLD traffic stop at the front. A
//! front onto a real network ([`VmFront::any_destination6`]) hands on IPv6 packets to any
//! global unicast destination, not only the lab's.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

use vtnt_lab::addr::{from_v6, to_v6, Prefix};

use crate::dhcp::{self, DhcpServer};
use crate::dhcp6;
use crate::ndp::{self, Solicitation};
use crate::state::{Lan, GATEWAY_MAC};

const ETH_LEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const IPV6_LEN: usize = 40;

/// A guest the front has heard from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guest {
    pub peer: SocketAddr,
    pub mac: [u8; 6],
}

/// What to do with a frame from a guest.
#[derive(Debug, PartialEq, Eq)]
pub enum FrameAction<'a> {
    /// Send this frame back to the guest (an ARP reply, a DHCP answer).
    Reply(Vec<u8>),
    /// Hand this IPv4 or IPv6 packet to the lab.
    Ip(&'a [u8]),
    Ignore,
}

/// Guests on the front's LANs, by address.
#[derive(Debug)]
pub struct VmFront {
    /// Each LAN and its gateway.
    lans: Vec<(Prefix, Ipv4Addr)>,
    guests: HashMap<Ipv4Addr, Guest>,
    dhcp: DhcpServer,
    /// IPv6 packets to any unicast destination are handed on, not only to lab addresses.
    any_destination6: bool,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn mac(b: &[u8]) -> [u8; 6] {
    [b[0], b[1], b[2], b[3], b[4], b[5]]
}
fn ip4(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}
fn ip6(b: &[u8]) -> Ipv6Addr {
    let mut o = [0u8; 16];
    o.copy_from_slice(&b[..16]);
    Ipv6Addr::from(o)
}

impl VmFront {
    /// Reads every frame waiting on the front's socket `udp` (up to a batch): answers
    /// what the front answers itself and hands each guest's IP packet to `ip`, with the
    /// guest's endpoint. Returns (frames in, frames out).
    pub fn drain(
        &mut self,
        udp: &UdpSocket,
        buf: &mut [u8],
        mut ip: impl FnMut(SocketAddr, &[u8]),
    ) -> (u64, u64) {
        let (mut frames_in, mut frames_out) = (0, 0);
        for _ in 0..512 {
            let Ok((n, peer)) = udp.recv_from(buf) else {
                break;
            };
            frames_in += 1;
            match self.handle_frame(peer, &buf[..n]) {
                FrameAction::Reply(r) => {
                    frames_out += 1;
                    let _ = udp.send_to(&r, peer);
                }
                FrameAction::Ip(p) => ip(peer, p),
                FrameAction::Ignore => {}
            }
        }
        (frames_in, frames_out)
    }

    /// The front of `lans` (their slots for static guests, their pools leased by DHCP).
    pub fn new(lans: &[Lan]) -> VmFront {
        VmFront {
            lans: lans.iter().map(|l| (l.prefix, l.gateway)).collect(),
            guests: HashMap::new(),
            dhcp: DhcpServer::new(lans),
            any_destination6: false,
        }
    }

    /// Hands on guests' IPv6 packets to any unicast destination that is neither
    /// link-local nor loopback (a front onto a real network), not only to lab addresses.
    pub fn any_destination6(mut self) -> VmFront {
        self.any_destination6 = true;
        self
    }

    /// Whether a guest's IPv6 packet to `dst` is handed on.
    fn forwards6(&self, dst: Ipv6Addr) -> bool {
        from_v6(dst).is_some()
            || (self.any_destination6
                && !(dst.is_multicast()
                    || dst.is_unicast_link_local()
                    || dst.is_loopback()
                    || dst.is_unspecified()))
    }

    /// Whether `addr` is on one of the front's LANs.
    fn on_lan(&self, addr: Ipv4Addr) -> bool {
        self.lans.iter().any(|(p, _)| p.contains(addr))
    }

    pub fn guests(&self) -> &HashMap<Ipv4Addr, Guest> {
        &self.guests
    }

    fn learn(&mut self, addr: Ipv4Addr, peer: SocketAddr, m: [u8; 6]) {
        let guest = self
            .lans
            .iter()
            .any(|&(p, gw)| p.contains(addr) && addr != gw);
        if guest && m[0] & 1 == 0 {
            self.guests.insert(addr, Guest { peer, mac: m });
        }
    }

    /// A frame arrived from `peer`.
    pub fn handle_frame<'a>(&mut self, peer: SocketAddr, f: &'a [u8]) -> FrameAction<'a> {
        if f.len() < ETH_LEN {
            return FrameAction::Ignore;
        }
        let src_mac = mac(&f[6..12]);
        match be16(f, 12) {
            ETHERTYPE_ARP if f.len() >= ETH_LEN + 28 => {
                let a = &f[ETH_LEN..];
                if be16(a, 0) != 1 || be16(a, 2) != ETHERTYPE_IPV4 || a[4] != 6 || a[5] != 4 {
                    return FrameAction::Ignore;
                }
                let (op, sha, spa, tpa) =
                    (be16(a, 6), mac(&a[8..14]), ip4(&a[14..18]), ip4(&a[24..28]));
                self.learn(spa, peer, sha);
                if op != 1
                    || spa == tpa
                    || !self.on_lan(tpa)
                    || self.guests.get(&tpa).is_some_and(|g| g.peer == peer)
                {
                    return FrameAction::Ignore;
                }
                let mut r = Vec::with_capacity(60);
                r.extend_from_slice(&sha);
                r.extend_from_slice(&GATEWAY_MAC);
                r.extend_from_slice(&ETHERTYPE_ARP.to_be_bytes());
                r.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 2]);
                r.extend_from_slice(&GATEWAY_MAC);
                r.extend_from_slice(&tpa.octets());
                r.extend_from_slice(&sha);
                r.extend_from_slice(&spa.octets());
                r.resize(60, 0);
                FrameAction::Reply(r)
            }
            ETHERTYPE_IPV4 if f.len() >= ETH_LEN + 20 => {
                let p = &f[ETH_LEN..];
                if p[0] >> 4 != 4 {
                    return FrameAction::Ignore;
                }
                if dhcp::is_dhcp(p) {
                    return self.dhcp(peer, src_mac, p);
                }
                self.learn(ip4(&p[12..16]), peer, src_mac);
                let total = usize::from(be16(p, 2)).min(p.len());
                FrameAction::Ip(&p[..total])
            }
            ETHERTYPE_IPV6 if f.len() >= ETH_LEN + IPV6_LEN => {
                let p = &f[ETH_LEN..];
                if p[0] >> 4 != 6 {
                    return FrameAction::Ignore;
                }
                let (src, dst) = (ip6(&p[8..24]), ip6(&p[24..40]));
                let src4 = from_v6(src);
                if let Some(a) = src4 {
                    self.learn(a, peer, src_mac);
                }
                if let Some(s) = ndp::solicitation(p) {
                    return self.solicited(peer, src_mac, s);
                }
                if dhcp6::is_dhcp6(p) {
                    // the twin of the address this guest (MAC and endpoint) holds: its
                    // DHCPv4 lease's first (a slot's MAC may have held a static address
                    // before: the table keeps it until another guest claims it)
                    let holds = |a: &Ipv4Addr| {
                        self.guests
                            .get(a)
                            .is_some_and(|g| g.peer == peer && g.mac == src_mac)
                    };
                    let twin = self
                        .dhcp
                        .lease(src_mac)
                        .filter(holds)
                        .or_else(|| self.guests.keys().copied().find(holds))
                        .map(to_v6);
                    return dhcp6::answer(p, src_mac, twin)
                        .map_or(FrameAction::Ignore, FrameAction::Reply);
                }
                if src4.is_none() || !self.forwards6(dst) {
                    return FrameAction::Ignore;
                }
                let total = (IPV6_LEN + usize::from(be16(p, 4))).min(p.len());
                FrameAction::Ip(&p[..total])
            }
            _ => FrameAction::Ignore,
        }
    }

    /// Answers a guest's neighbour or router solicitation: for the gateway (its twin or
    /// link-local address) and, as proxy ARP does, for any other address of the LANs but
    /// the guest's own; a duplicate address check only when another guest holds the
    /// address (defended with that guest's MAC).
    fn solicited<'a>(&self, peer: SocketAddr, m: [u8; 6], s: Solicitation) -> FrameAction<'a> {
        match s {
            Solicitation::Neighbour { src, target } if target == ndp::gateway_link_local() => {
                FrameAction::Reply(ndp::neighbour_advert(
                    src,
                    m,
                    target,
                    GATEWAY_MAC,
                    true,
                    false,
                ))
            }
            Solicitation::Neighbour { src, target } => {
                let Some(t4) = from_v6(target).filter(|&a| self.on_lan(a)) else {
                    return FrameAction::Ignore;
                };
                let holder = self.guests.get(&t4);
                if src.is_unspecified() {
                    return match holder {
                        Some(g) if g.peer != peer => FrameAction::Reply(ndp::neighbour_advert(
                            src, m, target, g.mac, false, false,
                        )),
                        _ => FrameAction::Ignore,
                    };
                }
                if from_v6(src) == Some(t4) || holder.is_some_and(|g| g.peer == peer) {
                    return FrameAction::Ignore;
                }
                let gateway = self.lans.iter().any(|&(_, gw)| gw == t4);
                FrameAction::Reply(ndp::neighbour_advert(
                    src,
                    m,
                    target,
                    GATEWAY_MAC,
                    true,
                    !gateway,
                ))
            }
            Solicitation::Router { src } => {
                let lan = self
                    .guests
                    .iter()
                    .find(|(_, g)| g.peer == peer)
                    .and_then(|(&a, _)| self.lans.iter().find(|(p, _)| p.contains(a)));
                let on_link = lan.map(|(p, _)| (to_v6(p.network()), 96 + p.len()));
                FrameAction::Reply(ndp::router_advert(src, m, on_link))
            }
        }
    }

    /// Answers a DHCP message (UDP to port 67) and learns the guest of a granted lease.
    fn dhcp<'a>(&mut self, peer: SocketAddr, m: [u8; 6], p: &[u8]) -> FrameAction<'a> {
        let guests = &self.guests;
        let in_use = |a, m| guests.get(&a).is_some_and(|g: &Guest| g.mac != m);
        let Some(answer) = self.dhcp.handle(p, in_use) else {
            return FrameAction::Ignore;
        };
        if let Some(addr) = answer.bound {
            self.learn(addr, peer, m);
        }
        FrameAction::Reply(answer.frame)
    }

    /// Wraps an IPv4 or IPv6 packet from the lab for the guest it is addressed to.
    pub fn frame_for(&self, packet: &[u8], out: &mut Vec<u8>) -> Option<SocketAddr> {
        let (dst, ethertype) = match packet.first()? >> 4 {
            4 => (ip4(packet.get(16..20)?), ETHERTYPE_IPV4),
            6 => (from_v6(ip6(packet.get(24..40)?))?, ETHERTYPE_IPV6),
            _ => return None,
        };
        let g = self.guests.get(&dst)?;
        out.clear();
        out.extend_from_slice(&g.mac);
        out.extend_from_slice(&GATEWAY_MAC);
        out.extend_from_slice(&ethertype.to_be_bytes());
        out.extend_from_slice(packet);
        Some(g.peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arp_request(sha: [u8; 6], spa: [u8; 4], tpa: [u8; 4]) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&sha);
        f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&sha);
        f.extend_from_slice(&spa);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&tpa);
        f
    }

    #[test]
    fn answers_arp_for_the_gateway_and_learns_guests() {
        let mut v = VmFront::new(&crate::dhcp::tests::lab_lans());
        let peer: SocketAddr = "127.0.0.1:5001".parse().unwrap();
        let m = [0x52, 0x54, 0, 0x76, 0x74, 10];
        let req = arp_request(m, [192, 0, 2, 10], [192, 0, 2, 1]);
        let FrameAction::Reply(r) = v.handle_frame(peer, &req) else {
            panic!()
        };
        assert_eq!(&r[0..6], &m);
        assert_eq!(&r[6..12], &GATEWAY_MAC);
        assert_eq!(&r[20..22], &[0, 2], "ARP reply");
        assert_eq!(&r[22..28], &GATEWAY_MAC);
        assert_eq!(&r[28..32], &[192, 0, 2, 1]);
        assert_eq!(&r[38..42], &[192, 0, 2, 10]);
        assert_eq!(v.guests()[&Ipv4Addr::new(192, 0, 2, 10)].peer, peer);
        // outside the LANs: ignored
        assert_eq!(
            v.handle_frame(peer, &arp_request(m, [192, 0, 2, 10], [10, 0, 0, 1])),
            FrameAction::Ignore
        );
        // a guest of the VM LAN asking for its gateway: answered, the guest learnt
        let (far, m2) = (
            "127.0.0.1:9001".parse().unwrap(),
            [0x52, 0x54, 0, 0x76, 0x87, 0x91],
        );
        let req = arp_request(m2, [10, 253, 19, 25], [10, 253, 0, 1]);
        let FrameAction::Reply(r) = v.handle_frame(far, &req) else {
            panic!()
        };
        assert_eq!(
            (&r[22..28], &r[28..32]),
            (&GATEWAY_MAC[..], &[10, 253, 0, 1][..])
        );
        assert_eq!(v.guests()[&Ipv4Addr::new(10, 253, 19, 25)].peer, far);
        // IPv4 frame: passed on, reply wrapped for the guest
        let mut f = vec![0u8; 14 + 28];
        f[6..12].copy_from_slice(&m);
        f[12..14].copy_from_slice(&[8, 0]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&28u16.to_be_bytes());
        f[26..30].copy_from_slice(&[192, 0, 2, 10]);
        f[30..34].copy_from_slice(&[203, 0, 113, 10]);
        let FrameAction::Ip(p) = v.handle_frame(peer, &f) else {
            panic!()
        };
        assert_eq!(p.len(), 28);
        let mut reply = p.to_vec();
        reply[12..16].copy_from_slice(&[203, 0, 113, 10]);
        reply[16..20].copy_from_slice(&[192, 0, 2, 10]);
        let mut out = Vec::new();
        assert_eq!(v.frame_for(&reply, &mut out), Some(peer));
        assert_eq!(&out[..6], &m);
        assert_eq!(out.len(), 14 + 28);
        assert!(v.handle_frame(peer, &[0u8; 5]) == FrameAction::Ignore);
    }

    #[test]
    fn answers_dhcp_and_learns_the_leased_guest() {
        use smoltcp::wire::DhcpMessageType;
        let gw = Ipv4Addr::new(192, 0, 2, 1);
        let mut v = VmFront::new(&crate::dhcp::tests::lab_lans());
        let peer: SocketAddr = "127.0.0.1:5002".parse().unwrap();
        let m = crate::dhcp::tests::MAC;
        let frame = |p: Vec<u8>| {
            let mut f = vec![0xff; 6];
            f.extend_from_slice(&m);
            f.extend_from_slice(&[8, 0]);
            f.extend_from_slice(&p);
            f
        };
        let leased = Ipv4Addr::new(192, 0, 2, 130);
        let discover = frame(crate::dhcp::tests::client(
            DhcpMessageType::Discover,
            m,
            None,
            None,
        ));
        assert!(matches!(
            v.handle_frame(peer, &discover),
            FrameAction::Reply(_)
        ));
        assert!(v.guests().is_empty(), "an offer binds nothing");
        let request = frame(crate::dhcp::tests::client(
            DhcpMessageType::Request,
            m,
            Some(leased),
            Some(gw),
        ));
        let FrameAction::Reply(ack) = v.handle_frame(peer, &request) else {
            panic!()
        };
        assert_eq!(&ack[..6], &m);
        assert_eq!(v.guests()[&leased], Guest { peer, mac: m });
    }

    /// An Ethernet frame from the guest at `m` carrying the IPv6 packet `p`.
    fn frame6(m: [u8; 6], p: &[u8]) -> Vec<u8> {
        let mut f = vec![0x33, 0x33, 0, 0, 0, 1];
        f.extend_from_slice(&m);
        f.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        f.extend_from_slice(p);
        f
    }

    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn answers_neighbour_and_router_solicitations_as_arp() {
        use crate::ndp::tests::{parse_advert, solicit};
        use smoltcp::wire::{NdiscNeighborFlags as F, NdiscRepr};
        let mut v = VmFront::new(&crate::dhcp::tests::lab_lans());
        let (peer, m): (SocketAddr, _) = ("127.0.0.1:5003".parse().unwrap(), [2, 0, 0, 0, 0, 10]);
        let (other, m2): (SocketAddr, _) = ("127.0.0.1:5004".parse().unwrap(), [2, 0, 0, 0, 0, 11]);
        let (me, gw) = (v6("2001:db8:64::c000:20a"), v6("2001:db8:64::c000:201"));
        let snm = v6("ff02::1:ff00:1");
        let advert = |v: &mut VmFront, peer, mac, src, target| match v.handle_frame(
            peer,
            &frame6(mac, &solicit(src, snm, mac, Some(target), 255)),
        ) {
            FrameAction::Reply(r) => {
                assert_eq!(&r[..6], &mac, "to the soliciting guest");
                let (from, to, repr) = parse_advert(&r);
                let NdiscRepr::NeighborAdvert {
                    flags,
                    target_addr,
                    lladdr,
                } = repr
                else {
                    panic!("{repr:?}")
                };
                assert_eq!((from, to, target_addr), (target, src, target));
                Some((flags, lladdr.unwrap().as_bytes().to_vec()))
            }
            FrameAction::Ignore => None,
            FrameAction::Ip(_) => panic!("a solicitation went to the lab"),
        };
        // the gateway's twin and its link-local address: the gateway answers, and the
        // guest is learnt from its IPv6 source
        let gateway = Some((F::ROUTER | F::SOLICITED | F::OVERRIDE, GATEWAY_MAC.to_vec()));
        assert_eq!(advert(&mut v, peer, m, me, gw), gateway);
        assert_eq!(
            v.guests()[&Ipv4Addr::new(192, 0, 2, 10)],
            Guest { peer, mac: m }
        );
        let ll = crate::ndp::gateway_link_local();
        assert_eq!(advert(&mut v, peer, m, v6("fe80::1"), ll), gateway);
        // another address of the LAN: proxied, without overriding
        let proxied = Some((F::ROUTER | F::SOLICITED, GATEWAY_MAC.to_vec()));
        assert_eq!(
            advert(&mut v, peer, m, me, v6("2001:db8:64::c000:20b")),
            proxied
        );
        // the guest's own address, off the LANs, outside the lab: no answer
        assert_eq!(advert(&mut v, peer, m, me, me), None);
        assert_eq!(advert(&mut v, peer, m, me, v6("2001:db8:64::a00:1")), None);
        assert_eq!(advert(&mut v, peer, m, me, v6("2001:db8::1")), None);
        // duplicate address detection: unanswered for a free or its own address...
        let dad = |v: &mut VmFront, peer, mac, target| {
            let s = solicit(Ipv6Addr::UNSPECIFIED, snm, mac, Some(target), 255);
            match v.handle_frame(peer, &frame6(mac, &s)) {
                FrameAction::Reply(r) => Some(r),
                _ => None,
            }
        };
        assert_eq!(dad(&mut v, peer, m, me), None);
        assert_eq!(dad(&mut v, other, m2, v6("2001:db8:64::c000:20c")), None);
        // ...defended, to all nodes, for an address another guest holds
        let r = dad(&mut v, other, m2, me).expect("a defence");
        assert_eq!(&r[..6], &[0x33, 0x33, 0, 0, 0, 1]);
        let (_, to, repr) = parse_advert(&r);
        assert_eq!(to, v6("ff02::1"));
        assert_eq!(
            repr,
            NdiscRepr::NeighborAdvert {
                flags: F::OVERRIDE,
                target_addr: me,
                lladdr: Some(smoltcp::wire::RawHardwareAddress::from_bytes(&m)),
            }
        );
        // a router solicitation: the gateway, with the known guest's on-link prefix
        let rs = solicit(v6("fe80::10"), v6("ff02::2"), m, None, 255);
        let FrameAction::Reply(r) = v.handle_frame(peer, &frame6(m, &rs)) else {
            panic!()
        };
        let (from, to, repr) = parse_advert(&r);
        assert_eq!((from, to), (ll, v6("fe80::10")));
        let NdiscRepr::RouterAdvert {
            prefix_info: Some(p),
            ..
        } = repr
        else {
            panic!("{repr:?}")
        };
        assert_eq!((p.prefix, p.prefix_len), (v6("2001:db8:64::c000:200"), 120));
        // an unknown guest gets the router without a prefix
        let FrameAction::Reply(r) = v.handle_frame(other, &frame6(m2, &rs)) else {
            panic!()
        };
        let (_, _, repr) = parse_advert(&r);
        assert!(
            matches!(
                repr,
                NdiscRepr::RouterAdvert {
                    prefix_info: None,
                    ..
                }
            ),
            "{repr:?}"
        );
    }

    #[test]
    fn carries_ipv6_between_guests_and_the_lab() {
        let mut v = VmFront::new(&crate::dhcp::tests::lab_lans());
        let (peer, m): (SocketAddr, _) = ("127.0.0.1:5005".parse().unwrap(), [2, 0, 0, 0, 0, 12]);
        let packet = |src: &str, dst: &str, next: u8, len: u16| {
            let mut p = vec![0u8; 40 + usize::from(len)];
            p[0] = 0x60;
            p[4..6].copy_from_slice(&len.to_be_bytes());
            p[6] = next;
            p[7] = 64;
            p[8..24].copy_from_slice(&v6(src).octets());
            p[24..40].copy_from_slice(&v6(dst).octets());
            p
        };
        // a probe from a VM LAN guest's twin to a lab address: to the lab, cut to its
        // payload length (Ethernet padding dropped), the guest learnt
        let mut p = packet("2001:db8:64::afd:1319", "2001:db8:64::cb00:710a", 17, 8);
        let sent = p.clone();
        p.extend_from_slice(&[0; 6]);
        assert_eq!(v.handle_frame(peer, &frame6(m, &p)), FrameAction::Ip(&sent));
        let guest = Ipv4Addr::new(10, 253, 19, 25);
        assert_eq!(v.guests()[&guest], Guest { peer, mac: m });
        // the answer goes back in an IPv6 frame to the guest's MAC
        let answer = packet("2001:db8:64::cb00:710a", "2001:db8:64::afd:1319", 58, 8);
        let mut out = Vec::new();
        assert_eq!(v.frame_for(&answer, &mut out), Some(peer));
        assert_eq!(
            (&out[..6], &out[12..14], &out[14..]),
            (&m[..], &[0x86, 0xdd][..], &answer[..])
        );
        // not for a guest, not to or from the lab's addresses, MLD (behind a hop-by-hop
        // header), a truncated header: nowhere
        let stranger = packet("2001:db8:64::cb00:710a", "2001:db8:64::afd:1320", 58, 8);
        assert_eq!(v.frame_for(&stranger, &mut out), None);
        for p in [
            packet("fe80::1", "2001:db8:64::cb00:710a", 17, 8),
            packet("2001:db8:64::afd:1319", "ff02::1", 17, 8),
            packet("2001:db8:64::afd:1319", "ff02::16", 0, 8),
        ] {
            assert_eq!(v.handle_frame(peer, &frame6(m, &p)), FrameAction::Ignore);
        }
        assert_eq!(
            v.handle_frame(peer, &frame6(m, &p[..39])),
            FrameAction::Ignore
        );
        // a front onto a real network hands on any global unicast destination; still
        // not multicast, link-local or loopback
        let public = packet("2001:db8:64::afd:1319", "2600::1", 17, 8);
        assert_eq!(
            v.handle_frame(peer, &frame6(m, &public)),
            FrameAction::Ignore
        );
        let mut v = v.any_destination6();
        assert_eq!(
            v.handle_frame(peer, &frame6(m, &public)),
            FrameAction::Ip(&public)
        );
        for dst in ["ff02::1", "fe80::1", "::1"] {
            let p = packet("2001:db8:64::afd:1319", dst, 17, 8);
            assert_eq!(v.handle_frame(peer, &frame6(m, &p)), FrameAction::Ignore);
        }
    }

    /// DHCPv6 gives a guest the twin of the address the front knows for its MAC and
    /// endpoint, and nothing to anyone else; a hostile guest sending thousands of raw
    /// DHCPv6 frames (every message type, other clients' MACs, other endpoints' MACs)
    /// grows no state and gets at most one bounded answer per frame, each to itself.
    #[test]
    fn serves_dhcpv6_the_twin_and_bounds_a_hostile_guest() {
        use crate::dhcp6::tests::{client, ia, read};
        use crate::dhcp6::{self, NO_ADDRS_AVAIL};
        let mut v = VmFront::new(&crate::dhcp::tests::lab_lans());
        let (peer, m): (SocketAddr, _) = ("127.0.0.1:5003".parse().unwrap(), [2, 0, 0, 0, 0, 10]);
        v.handle_frame(peer, &arp_request(m, [192, 0, 2, 10], [192, 0, 2, 1]));
        let solicit = frame6(m, &client(dhcp6::SOLICIT, m, None, true, None));
        let FrameAction::Reply(r) = v.handle_frame(peer, &solicit) else {
            panic!()
        };
        let (to, _, kind, _, opts) = read(&r);
        assert_eq!(
            (to, kind, ia(&opts)),
            (m, dhcp6::ADVERTISE, Ok(v6("2001:db8:64::c000:20a")))
        );
        // the same MAC from another endpoint, an unknown guest: no address
        let hostile: SocketAddr = "127.0.0.1:5004".parse().unwrap();
        for (from, mac) in [(hostile, m), (hostile, [2, 0, 0, 0, 0, 11])] {
            let FrameAction::Reply(r) = v.handle_frame(
                from,
                &frame6(mac, &client(dhcp6::SOLICIT, mac, None, true, None)),
            ) else {
                panic!()
            };
            assert_eq!(ia(&read(&r).4), Err(NO_ADDRS_AVAIL));
        }
        let guests = v.guests().clone();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let sid = dhcp6::server_duid();
        let (mut frames, mut answers) = (0, 0);
        for _ in 0..3000 {
            let r = next();
            let mac = [2, 0, 0, 0, (r >> 8) as u8, (r >> 16) as u8];
            let kind = (r % 13) as u8;
            let server = (r & 0x1000 != 0).then_some(&sid[..]);
            let mut p = client(kind, mac, server, r & 0x2000 != 0, None);
            if r & 0x4000 != 0 {
                let at = 40 + (r >> 32) as usize % (p.len() - 40);
                p[at] ^= (r >> 24) as u8 | 1; // corrupted: the checksum refuses it
            }
            frames += 1;
            if let FrameAction::Reply(a) = v.handle_frame(hostile, &frame6(mac, &p)) {
                answers += 1;
                assert!(a.len() <= 14 + 40 + 8 + 200, "a bounded answer");
                assert_eq!(a[..6], mac, "to the sender");
            }
        }
        assert!(answers <= frames && answers > 0);
        assert_eq!(v.guests(), &guests, "no state from DHCPv6");
    }

    /// Rewrites the seeds of the `vm_frames` fuzz target (crates/lab-linux/fuzz):
    /// conversations of guests' frames, each framed `[u8 guest][u16 length][bytes]`.
    #[test]
    #[ignore]
    fn write_fuzz_seed_corpus() {
        use crate::ndp::tests::solicit;
        let (m, m2) = ([2, 0, 0, 0, 0, 10], [2, 0, 0, 0, 0, 11]);
        let me = v6("2001:db8:64::c000:20a");
        let ns = |src, target| frame6(m, &solicit(src, v6("ff02::1:ff00:1"), m, Some(target), 255));
        let mut probe6 = vec![0u8; 48];
        probe6[..8].copy_from_slice(&[0x60, 0, 0, 0, 0, 8, 17, 1]);
        probe6[8..24].copy_from_slice(&me.octets());
        probe6[24..40].copy_from_slice(&v6("2001:db8:64::cb00:710a").octets());
        let mut probe4 = vec![0u8; 28];
        probe4[..10].copy_from_slice(&[0x45, 0, 0, 28, 0, 0, 0, 0, 1, 17]);
        probe4[12..20].copy_from_slice(&[192, 0, 2, 10, 203, 0, 113, 10]);
        let mut ipv4 = vec![0xff; 6];
        ipv4.extend_from_slice(&m);
        ipv4.extend_from_slice(&[8, 0]);
        ipv4.extend_from_slice(&probe4);
        let dhcp = {
            let d =
                crate::dhcp::tests::client(smoltcp::wire::DhcpMessageType::Discover, m, None, None);
            let mut f = vec![0xff; 6];
            f.extend_from_slice(&m);
            f.extend_from_slice(&[8, 0]);
            f.extend_from_slice(&d);
            f
        };
        /// A seed: its name and each frame with the guest sending it.
        type Seed = (&'static str, Vec<(u8, Vec<u8>)>);
        let sid = crate::dhcp6::server_duid();
        let dhcp6 = |kind, server, addr| {
            frame6(m, &crate::dhcp6::tests::client(kind, m, server, true, addr))
        };
        let seeds: [Seed; 6] = [
            (
                "dhcpv6",
                vec![
                    (0, arp_request(m, [192, 0, 2, 10], [192, 0, 2, 1])),
                    (0, dhcp6(crate::dhcp6::SOLICIT, None, None)),
                    (0, dhcp6(crate::dhcp6::REQUEST, Some(&sid[..]), None)),
                    (0, dhcp6(crate::dhcp6::CONFIRM, None, Some(me))),
                    (0, dhcp6(crate::dhcp6::RELEASE, Some(&sid[..]), Some(me))),
                    (1, dhcp6(crate::dhcp6::SOLICIT, None, None)),
                ],
            ),
            (
                "arp_then_ipv4",
                vec![
                    (0, arp_request(m, [192, 0, 2, 10], [192, 0, 2, 1])),
                    (0, ipv4),
                ],
            ),
            (
                "neighbour_and_router_solicitations",
                vec![
                    (0, ns(me, v6("2001:db8:64::c000:201"))),
                    (0, ns(v6("fe80::10"), crate::ndp::gateway_link_local())),
                    (
                        0,
                        frame6(m, &solicit(v6("fe80::10"), v6("ff02::2"), m, None, 255)),
                    ),
                ],
            ),
            (
                "ipv6_probe",
                vec![
                    (0, ns(me, v6("2001:db8:64::c000:201"))),
                    (0, frame6(m, &probe6)),
                ],
            ),
            (
                "duplicate_address",
                vec![
                    (0, ns(me, v6("2001:db8:64::c000:201"))),
                    (
                        1,
                        frame6(
                            m2,
                            &solicit(
                                Ipv6Addr::UNSPECIFIED,
                                v6("ff02::1:ff00:20a"),
                                m2,
                                Some(me),
                                255,
                            ),
                        ),
                    ),
                ],
            ),
            ("dhcp_discover", vec![(2, dhcp)]),
        ];
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/vm_frames");
        std::fs::create_dir_all(&dir).unwrap();
        for (name, frames) in seeds {
            let mut framed = Vec::new();
            for (guest, f) in frames {
                framed.push(guest);
                framed.extend_from_slice(&(f.len() as u16).to_be_bytes());
                framed.extend_from_slice(&f);
            }
            std::fs::write(dir.join(name), framed).unwrap();
        }
    }
}
