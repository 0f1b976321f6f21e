//! The network interface as the prober sees it: a [`Nic`] over the platform's
//! [`Link`] (virtio-net, `vtnt-monitor`'s frame hypercalls, a datagram socket) that sends
//! complete IPv4 and IPv6 packets (framed by us, so TTL or hop limit, IP ID, ToS, flow
//! label and checksums go out exactly as the prober made them) to the next hop's MAC, and
//! hands back every IP packet addressed to us with its receive timestamp, answering ARP
//! and neighbour solicitations for our addresses on the way ([`ndp`]). Raw frames in
//! and out ([`Nic::poll_frames`], [`Nic::send_raw`]) serve [`dhcp`] and [`autoconf`]
//! (`ip6=auto`) before the job starts.
//!
//! Polling only (no interrupts). Transmit has backpressure: [`Nic::send_ip`] returns
//! [`SendError::Busy`] when the link has no room, and [`SendError::Unresolved`] while the
//! next hop's MAC is being resolved; the caller keeps the packet and retries. What never
//! leaves is ours to refuse: [`SendError::NoRoute`] (off-link, no gateway) and
//! [`SendError::Invalid`].

pub mod arp;
pub mod autoconf;
pub mod dhcp;
pub mod dhcp6;
pub mod ndp;
pub mod smol;
#[cfg(feature = "stream")]
pub mod stream;

use crate::platform::{Link, LinkError, Received};
use alloc::boxed::Box;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol,
    EthernetRepr,
};
use vtnt_record::Instant;

/// Largest IP packet we send (Ethernet MTU).
pub const MTU: usize = 1500;
const ETH_HDR: usize = 14;
/// The largest Ethernet frame (header + MTU), without a device header.
pub const FRAME_MAX: usize = ETH_HDR + MTU;

/// Why a packet was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// All transmit buffers are in flight: retry after the next poll.
    Busy,
    /// The next hop's MAC is not known yet (an ARP request or neighbour solicitation is
    /// out): retry later.
    Unresolved(IpAddr),
    /// Not a packet we can send (too short, too long, neither IPv4 nor IPv6).
    Invalid,
    /// The destination is off-link and there is no gateway (or it is IPv6 and we have no
    /// IPv6 address).
    NoRoute,
}

impl SendError {
    /// The Linux errno of a send that will never succeed (what the prober records as a
    /// trace's stop data, as on Linux); `None` for the ones to retry.
    pub fn errno(self) -> Option<i32> {
        match self {
            SendError::Busy | SendError::Unresolved(_) => None,
            SendError::Invalid => Some(22),  // EINVAL
            SendError::NoRoute => Some(101), // ENETUNREACH
        }
    }
}

/// Interface counters.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub tx_packets: u64,
    pub rx_packets: u64,
    pub rx_dropped: u64,
    pub arp_requests: u64,
    pub first_tx: Option<Instant>,
}

/// IPv4 configuration of the interface.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Config {
    pub addr: Ipv4Addr,
    pub prefix: u8,
    pub gateway: Option<Ipv4Addr>,
}

impl Ipv4Config {
    /// The netmask of the prefix length, as a number.
    pub fn mask(&self) -> u32 {
        u32::MAX.checked_shl(32 - self.prefix as u32).unwrap_or(0)
    }

    /// Whether `ip` is on our segment.
    pub fn on_link(&self, ip: Ipv4Addr) -> bool {
        let mask = self.mask();
        u32::from(ip) & mask == u32::from(self.addr) & mask
    }

    /// The next hop towards `dst`, `None` if off-link with no gateway.
    pub fn next_hop(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        if self.on_link(dst) {
            Some(dst)
        } else {
            self.gateway
        }
    }
}

/// IPv6 configuration of the interface: a static address (`ip6=`, `gw6=`) or one from
/// the link ([`autoconf`]).
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Config {
    pub addr: Ipv6Addr,
    pub prefix: u8,
    pub gateway: Option<Ipv6Addr>,
    /// Our link-local address (`ip6=auto`), also answered in neighbour discovery.
    pub link_local: Option<Ipv6Addr>,
}

impl Ipv6Config {
    /// The next hop towards `dst`: itself on our prefix, else the gateway.
    pub fn next_hop(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let mask = u128::MAX
            .checked_shl(128 - u32::from(self.prefix))
            .unwrap_or(0);
        if (u128::from(dst) ^ u128::from(self.addr)) & mask == 0 {
            Some(dst)
        } else {
            self.gateway
        }
    }
}

/// A MAC address printed as `52:54:00:12:34:56`.
pub struct Mac(pub EthernetAddress);

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0.as_bytes();
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// The network interface.
pub struct Nic {
    link: Box<dyn Link>,
    mac: EthernetAddress,
    cfg: Ipv4Config,
    v6: Option<Ipv6Config>,
    arp: arp::Cache,
    pub stats: Stats,
}

impl Nic {
    /// The interface over `link`, configured with `cfg`.
    pub fn new(link: Box<dyn Link>, cfg: Ipv4Config) -> Nic {
        Nic {
            mac: EthernetAddress(link.mac()),
            link,
            cfg,
            v6: None,
            arp: arp::Cache::default(),
            stats: Stats::default(),
        }
    }

    /// Where the link is, for the console.
    pub fn location(&self) -> &dyn fmt::Display {
        self.link.location()
    }

    /// Our MAC address.
    pub fn mac(&self) -> EthernetAddress {
        self.mac
    }

    /// Our IPv4 configuration.
    pub fn config(&self) -> &Ipv4Config {
        &self.cfg
    }

    /// Changes our IPv4 configuration (once DHCP has leased an address).
    pub fn set_config(&mut self, cfg: Ipv4Config) {
        self.cfg = cfg;
    }

    /// Our IPv6 configuration, if we have an IPv6 address.
    pub fn config6(&self) -> Option<&Ipv6Config> {
        self.v6.as_ref()
    }

    /// Gives us an IPv6 address.
    pub fn set_config6(&mut self, cfg: Ipv6Config) {
        self.v6 = Some(cfg);
    }

    /// The next hop towards `dst`, `None` if there is no route.
    pub fn next_hop(&self, dst: IpAddr) -> Option<IpAddr> {
        match dst {
            IpAddr::V4(d) => self.cfg.next_hop(d).map(IpAddr::V4),
            IpAddr::V6(d) => self.v6?.next_hop(d).map(IpAddr::V6),
        }
    }

    /// Records `mac` as `ip`'s MAC (a neighbour the host told us about).
    pub fn add_neighbour(&mut self, ip: IpAddr, mac: [u8; 6]) {
        self.arp.insert(ip, EthernetAddress(mac));
    }

    /// The cached MAC of `ip`.
    pub fn arp_lookup(&self, ip: IpAddr) -> Option<EthernetAddress> {
        self.arp.lookup(ip)
    }

    /// Sends one Ethernet frame built by `fill` (given the frame area, returns the frame
    /// length). Only this part is generic: the link's own work is behind `dyn Link`, once in
    /// the image.
    fn send_frame(&mut self, fill: impl FnOnce(&mut [u8]) -> usize) -> Result<(), SendError> {
        let (mut buf, hdr) = self.link.tx_take().map_err(SendError::from)?;
        let len = hdr + fill(&mut buf[hdr..]);
        self.link.tx_give(buf, len).map_err(SendError::from)
    }

    /// Sends a complete IPv4 or IPv6 packet, unchanged, to the next hop's MAC.
    pub fn send_ip(&mut self, now: Instant, packet: &[u8]) -> Result<(), SendError> {
        let (dst, ethertype) = match (packet.first().map(|b| b >> 4), packet.len()) {
            (_, len) if len > MTU => return Err(SendError::Invalid),
            (Some(4), 20..) => (
                IpAddr::from(Ipv4Addr::new(
                    packet[16], packet[17], packet[18], packet[19],
                )),
                EthernetProtocol::Ipv4,
            ),
            (Some(6), 40..) => (ipv6_at(packet, 24).into(), EthernetProtocol::Ipv6),
            _ => return Err(SendError::Invalid),
        };
        let hop = self.next_hop(dst).ok_or(SendError::NoRoute)?;
        let Some(dst_mac) = self.arp.lookup(hop) else {
            // Best effort: if the queue is full the rate limiter retries later.
            self.resolve(now, hop);
            return Err(SendError::Unresolved(hop));
        };
        let src_mac = self.mac;
        self.send_frame(|frame| {
            let eth = EthernetRepr {
                src_addr: src_mac,
                dst_addr: dst_mac,
                ethertype,
            };
            eth.emit(&mut EthernetFrame::new_unchecked(&mut frame[..ETH_HDR]));
            frame[ETH_HDR..ETH_HDR + packet.len()].copy_from_slice(packet);
            ETH_HDR + packet.len()
        })?;
        self.stats.tx_packets += 1;
        self.stats.first_tx.get_or_insert(now);
        Ok(())
    }

    fn send_arp_request(&mut self, ip: Ipv4Addr) -> Result<(), SendError> {
        let repr = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: self.mac,
            source_protocol_addr: self.cfg.addr,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: ip,
        };
        self.send_arp(repr, EthernetAddress::BROADCAST)
    }

    fn send_arp(&mut self, repr: ArpRepr, dst: EthernetAddress) -> Result<(), SendError> {
        let src = self.mac;
        self.send_frame(|frame| {
            let eth = EthernetRepr {
                src_addr: src,
                dst_addr: dst,
                ethertype: EthernetProtocol::Arp,
            };
            let len = ETH_HDR + repr.buffer_len();
            let mut f = EthernetFrame::new_unchecked(&mut frame[..len]);
            eth.emit(&mut f);
            repr.emit(&mut ArpPacket::new_unchecked(f.payload_mut()));
            len
        })
    }

    /// Starts resolving `ip` by ARP or a neighbour solicitation (rate-limited); true if
    /// its MAC is already known.
    pub fn resolve(&mut self, now: Instant, ip: IpAddr) -> bool {
        if self.arp.lookup(ip).is_some() {
            return true;
        }
        if self.arp.may_ask(ip, now) {
            self.stats.arp_requests += 1;
            let _ = match (ip, self.v6) {
                (IpAddr::V4(ip), _) => self.send_arp_request(ip),
                (IpAddr::V6(ip), Some(v6)) => {
                    let (dst, dst_mac) = ndp::solicited_node(ip);
                    self.send_ndp(ndp::SOLICIT, dst_mac, (v6.addr, dst), ip)
                }
                (IpAddr::V6(_), None) => Err(SendError::NoRoute),
            };
        }
        false
    }

    /// Sends a neighbour solicitation or advertisement (see [`ndp::emit`]).
    fn send_ndp(
        &mut self,
        kind: u8,
        dst_mac: [u8; 6],
        ips: (Ipv6Addr, Ipv6Addr),
        target: Ipv6Addr,
    ) -> Result<(), SendError> {
        let mac = self.mac.0;
        self.send_frame(|f| ndp::emit(f, kind, (mac, dst_mac), ips, target))
    }

    /// Processes every received frame: ARP and neighbour discovery are handled here, each
    /// IP packet addressed to us goes to `deliver(receive_time, packet)`. Returns the
    /// number of IP packets delivered.
    pub fn poll_recv(&mut self, deliver: &mut impl FnMut(Instant, &[u8])) -> usize {
        let mut delivered = 0;
        self.poll_frames(|nic, t, frame| {
            if nic.handle_frame(t, frame, deliver) {
                delivered += 1;
            }
        });
        delivered
    }

    /// Hands every received Ethernet frame, as it is, to `each(self, receive_time, frame)`.
    pub fn poll_frames(&mut self, mut each: impl FnMut(&mut Nic, Instant, &[u8])) {
        while self.next_frame(&mut each) {}
    }

    /// Hands the next received Ethernet frame to `each`; false if none was waiting.
    pub fn next_frame(&mut self, each: &mut impl FnMut(&mut Nic, Instant, &[u8])) -> bool {
        let Some(Received {
            at: (at, len),
            t,
            buf,
        }) = self.link.next_frame()
        else {
            return false;
        };
        if let Some(frame) = buf.get(at..at + len) {
            each(self, t, frame);
        }
        if !self.link.frame_done(buf) {
            self.stats.rx_dropped += 1;
        }
        true
    }

    /// Sends a complete Ethernet frame, as it is.
    pub fn send_raw(&mut self, frame: &[u8]) -> Result<(), SendError> {
        if frame.len() > FRAME_MAX {
            return Err(SendError::Invalid);
        }
        self.send_frame(|buf| {
            buf[..frame.len()].copy_from_slice(frame);
            frame.len()
        })
    }

    fn handle_frame(
        &mut self,
        t: Instant,
        frame: &[u8],
        deliver: &mut impl FnMut(Instant, &[u8]),
    ) -> bool {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            self.stats.rx_dropped += 1;
            return false;
        };
        // broadcast ARP, multicast neighbour solicitations
        if eth.dst_addr() != self.mac && !eth.dst_addr().is_multicast() {
            return false;
        }
        match eth.ethertype() {
            EthernetProtocol::Arp => {
                self.handle_arp(eth.payload());
                false
            }
            EthernetProtocol::Ipv4 => {
                let ip = eth.payload();
                if ip.len() < 20 || ip[0] >> 4 != 4 {
                    self.stats.rx_dropped += 1;
                    return false;
                }
                let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
                let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
                if total < 20 || total > ip.len() || dst != self.cfg.addr {
                    self.stats.rx_dropped += 1;
                    return false;
                }
                self.stats.rx_packets += 1;
                deliver(t, &ip[..total]);
                true
            }
            EthernetProtocol::Ipv6 => {
                let (Some(v6), Some(ip)) = (self.v6, self.ipv6_in(frame)) else {
                    return false;
                };
                if ipv6_at(ip, 24) != v6.addr {
                    self.stats.rx_dropped += 1;
                    return false;
                }
                self.stats.rx_packets += 1;
                deliver(t, ip);
                true
            }
            _ => false,
        }
    }

    /// The IPv6 packet in Ethernet `frame` (cut to its header's length) when we have an
    /// IPv6 address, unless it was a neighbour message, which is handled here: we learn
    /// a neighbour's MAC from its advertisement or its solicitation of our address (or
    /// link-local address) and answer the solicitation ([`ndp::learn`]).
    fn ipv6_in<'f>(&mut self, frame: &'f [u8]) -> Option<&'f [u8]> {
        let v6 = self.v6?;
        let ip = frame.get(14..).filter(|_| frame[12..14] == [0x86, 0xdd])?;
        let total = match ip.get(4..6) {
            Some(&[a, b]) if ip[0] >> 4 == 6 => 40 + usize::from(u16::from_be_bytes([a, b])),
            _ => usize::MAX,
        };
        let Some(ip) = ip.get(..total) else {
            self.stats.rx_dropped += 1;
            return None;
        };
        let Some(m) = ndp::parse(ip) else {
            return Some(ip);
        };
        let me = match v6.link_local {
            Some(ll) if m.target == ll => ll,
            _ => v6.addr,
        };
        let from = frame[6..12].try_into().unwrap_or([0; 6]);
        if let Some((ip, mac, answer)) = ndp::learn(me, &m, from) {
            self.arp.insert(ip.into(), EthernetAddress(mac));
            if answer {
                let _ = self.send_ndp(ndp::ADVERT, mac, (me, ip), me);
            }
        }
        None
    }

    fn handle_arp(&mut self, payload: &[u8]) {
        let Ok(pkt) = ArpPacket::new_checked(payload) else {
            return;
        };
        let Ok(ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_protocol_addr,
            ..
        }) = ArpRepr::parse(&pkt)
        else {
            return;
        };
        if target_protocol_addr != self.cfg.addr {
            return;
        }
        self.arp
            .insert(source_protocol_addr.into(), source_hardware_addr);
        if operation == ArpOperation::Request {
            let reply = ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Reply,
                source_hardware_addr: self.mac,
                source_protocol_addr: self.cfg.addr,
                target_hardware_addr: source_hardware_addr,
                target_protocol_addr: source_protocol_addr,
            };
            let _ = self.send_arp(reply, source_hardware_addr);
        }
    }
}

/// The IPv6 address at `at` in `b` (in bounds: the caller checked the length).
fn ipv6_at(b: &[u8], at: usize) -> Ipv6Addr {
    let mut a = [0; 16];
    a.copy_from_slice(&b[at..at + 16]);
    Ipv6Addr::from(a)
}

impl From<LinkError> for SendError {
    fn from(e: LinkError) -> SendError {
        match e {
            LinkError::Busy => SendError::Busy,
            LinkError::Invalid => SendError::Invalid,
        }
    }
}
