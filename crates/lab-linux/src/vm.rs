//! The VM front's Ethernet side: QEMU sends each guest frame as one UDP datagram
//! (`-netdev dgram` or `-netdev socket,udp=`). The daemon answers ARP for every address
//! of the front's LANs (proxy ARP: the gateway's MAC; a lab's vantage point LAN and its VM
//! LAN, [`crate::state::Lan`]), learns each guest's address,
//! MAC and UDP endpoint from its ARP and IPv4 frames (and from the DHCP leases it grants,
//! see [`crate::dhcp`]), hands IPv4 packets to the lab and wraps the lab's answers into
//! frames for the right guest. Pure logic, no sockets.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};

use vtnt_lab::addr::Prefix;

use crate::dhcp::{self, DhcpServer};
use crate::state::{Lan, GATEWAY_MAC};

const ETH_LEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;

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
    /// Hand this IPv4 packet to the lab.
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

impl VmFront {
    /// Reads every frame waiting on the front's socket `udp` (up to a batch): answers
    /// what the front answers itself and hands each guest's IPv4 packet to `ip`. Returns
    /// (frames in, frames out).
    pub fn drain(
        &mut self,
        udp: &UdpSocket,
        buf: &mut [u8],
        mut ip: impl FnMut(&[u8]),
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
                FrameAction::Ip(p) => ip(p),
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
        }
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
            _ => FrameAction::Ignore,
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

    /// Wraps an IPv4 packet from the lab for the guest it is addressed to.
    pub fn frame_for(&self, packet: &[u8], out: &mut Vec<u8>) -> Option<SocketAddr> {
        let dst = ip4(packet.get(16..20)?);
        let g = self.guests.get(&dst)?;
        out.clear();
        out.extend_from_slice(&g.mac);
        out.extend_from_slice(&GATEWAY_MAC);
        out.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
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
}
