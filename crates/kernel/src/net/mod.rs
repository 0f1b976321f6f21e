//! The network device as the prober sees it: a [`Nic`] (over virtio-net, or over
//! `vtnt-monitor`'s frame hypercalls) that sends complete IPv4 packets
//! (framed by us, so TTL, IP ID, ToS and checksums go out exactly as the prober made
//! them) to the next hop's MAC, and hands back every IPv4 packet addressed to us with its
//! receive timestamp, answering ARP on the way. Raw frames in and out
//! ([`Nic::poll_frames`], [`Nic::send_raw`]) serve [`dhcp`] before the job starts.
//!
//! Polling only (no interrupts). Transmit has backpressure: [`Nic::send_ipv4`] returns
//! [`SendError::Busy`] when all transmit buffers are in flight, and
//! [`SendError::Unresolved`] while the next hop's MAC is being resolved; the caller keeps
//! the packet and retries. The virtio device itself cannot refuse a frame; what never
//! leaves is ours to refuse: [`SendError::NoRoute`] (off-link, no gateway) and
//! [`SendError::Invalid`].

pub mod arp;
pub mod dhcp;
pub mod discover;
pub mod hal;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::net::Ipv4Addr;
use hal::KernelHal;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol,
    EthernetRepr,
};
use virtio_drivers::device::net::VirtIONetRaw;
use virtio_drivers::transport::SomeTransport;
use vtnt_record::Instant;

pub use discover::find_net;

/// Descriptors per virtqueue (receive and transmit).
pub const QUEUE_SIZE: usize = 16;
/// Bytes per DMA buffer: virtio-net header (<= 12) + Ethernet (14) + 1500 of IP, rounded.
const BUF_LEN: usize = 1536;
/// Largest IPv4 packet we send (Ethernet MTU).
pub const MTU: usize = 1500;
const ETH_HDR: usize = 14;

/// Why a packet was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// All transmit buffers are in flight: retry after the next poll.
    Busy,
    /// The next hop's MAC is not known yet (an ARP request is out): retry later.
    Unresolved(Ipv4Addr),
    /// Not a packet we can send (too short, too long, not IPv4 version 4).
    Invalid,
    /// The destination is off-link and there is no gateway.
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
    /// Whether `ip` is on our segment.
    pub fn on_link(&self, ip: Ipv4Addr) -> bool {
        let mask = u32::MAX.checked_shl(32 - self.prefix as u32).unwrap_or(0);
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

type Device = VirtIONetRaw<KernelHal, SomeTransport<'static>, QUEUE_SIZE>;

/// The virtio-net device and its buffers.
struct Virtio {
    dev: Device,
    /// Receive buffers, indexed by the token (descriptor) they were posted under.
    rx: [Option<Box<[u8]>>; QUEUE_SIZE],
    /// Transmit buffers in flight, by token, with the length handed to the device.
    tx_busy: [Option<(Box<[u8]>, usize)>; QUEUE_SIZE],
    tx_free: Vec<Box<[u8]>>,
    tx_count: usize,
}

/// Where frames go.
enum Link {
    Virtio(Box<Virtio>),
    /// `vtnt-monitor`'s hypercalls, with one frame buffer to send from and one batch
    /// buffer to receive into (`rx_len` bytes of frames received at `rx_t`, the next at
    /// `rx_at`; `rx_more`: the monitor holds more).
    Monitor {
        tx: Box<[u8]>,
        rx: Box<[u8]>,
        rx_len: usize,
        rx_at: usize,
        rx_more: bool,
        rx_t: Instant,
    },
}

/// Bytes of frames one receive hypercall may return (about 40 full-size frames).
const MONITOR_BATCH: usize = 64 * 1024;

/// The network interface.
pub struct Nic {
    link: Link,
    mac: EthernetAddress,
    cfg: Ipv4Config,
    arp: arp::Cache,
    pub stats: Stats,
}

/// Why the interface could not be brought up.
#[derive(Debug)]
pub enum UpError {
    Virtio(virtio_drivers::Error),
}

impl fmt::Display for UpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpError::Virtio(e) => write!(f, "virtio-net initialisation failed: {e}"),
        }
    }
}

/// A zeroed frame buffer of `len` bytes.
fn new_buf_of(len: usize) -> Box<[u8]> {
    alloc::vec![0u8; len].into_boxed_slice()
}

fn new_buf() -> Box<[u8]> {
    new_buf_of(BUF_LEN)
}

impl Nic {
    /// Initialises the virtio device and posts all receive buffers.
    pub fn new(transport: SomeTransport<'static>, cfg: Ipv4Config) -> Result<Nic, UpError> {
        let dev = Device::new(transport).map_err(UpError::Virtio)?;
        let mac = EthernetAddress(dev.mac_address());
        let mut v = Box::new(Virtio {
            dev,
            rx: [const { None }; QUEUE_SIZE],
            tx_busy: [const { None }; QUEUE_SIZE],
            tx_free: Vec::new(),
            tx_count: 0,
        });
        for _ in 0..QUEUE_SIZE {
            v.post_rx(new_buf()).map_err(UpError::Virtio)?;
        }
        crate::steps::mark(crate::steps::Step::VirtioUp);
        Ok(Nic::with_link(Link::Virtio(v), mac, cfg))
    }

    /// The interface `vtnt-monitor` gives us, with MAC address `mac`.
    pub fn monitor(mac: [u8; 6], cfg: Ipv4Config) -> Nic {
        let link = Link::Monitor {
            tx: new_buf(),
            rx: new_buf_of(MONITOR_BATCH),
            rx_len: 0,
            rx_at: 0,
            rx_more: false,
            rx_t: Instant::ZERO,
        };
        crate::steps::mark(crate::steps::Step::VirtioUp);
        Nic::with_link(link, EthernetAddress(mac), cfg)
    }

    fn with_link(link: Link, mac: EthernetAddress, cfg: Ipv4Config) -> Nic {
        Nic {
            link,
            mac,
            cfg,
            arp: arp::Cache::default(),
            stats: Stats::default(),
        }
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

    /// Records `mac` as `ip`'s MAC (a neighbour the host told us about).
    pub fn add_neighbour(&mut self, ip: Ipv4Addr, mac: [u8; 6]) {
        self.arp.insert(ip, EthernetAddress(mac));
    }

    /// The cached MAC of `ip`.
    pub fn arp_lookup(&self, ip: Ipv4Addr) -> Option<EthernetAddress> {
        self.arp.lookup(ip)
    }

    /// Sends one Ethernet frame built by `fill` (given the frame area, returns the frame
    /// length). Only this part is generic: the link's own work is in [`Nic::tx_take`] and
    /// [`Nic::tx_give`], once in the image.
    fn send_frame(&mut self, fill: impl FnOnce(&mut [u8]) -> usize) -> Result<(), SendError> {
        let (mut buf, hdr) = self.tx_take()?;
        let len = hdr + fill(&mut buf[hdr..]);
        self.tx_give(buf, len)
    }

    /// A transmit buffer and where the frame starts in it.
    fn tx_take(&mut self) -> Result<(Box<[u8]>, usize), SendError> {
        match &mut self.link {
            Link::Virtio(v) => v.tx_take(),
            Link::Monitor { tx, .. } => Ok((core::mem::take(tx), 0)),
        }
    }

    /// Sends the first `len` bytes of `buf` (from [`Nic::tx_take`]).
    fn tx_give(&mut self, buf: Box<[u8]>, len: usize) -> Result<(), SendError> {
        match &mut self.link {
            Link::Virtio(v) => v.tx_give(buf, len),
            Link::Monitor { tx, .. } => {
                let sent = crate::hvt::net_write(&buf[..len]);
                *tx = buf;
                if sent {
                    Ok(())
                } else {
                    Err(SendError::Busy)
                }
            }
        }
    }

    /// The next received frame, lent with its buffer: give it back with
    /// [`Nic::frame_done`]. Not generic, so that [`Nic::poll_frames`] calls its closure
    /// from one place.
    fn next_frame(&mut self) -> Option<Received> {
        match &mut self.link {
            Link::Virtio(v) => v.next_rx(),
            Link::Monitor {
                rx,
                rx_len,
                rx_at,
                rx_more,
                rx_t,
                ..
            } => {
                if *rx_at >= *rx_len {
                    if !*rx_more && !crate::hvt::frames_may_wait() {
                        return None;
                    }
                    let (len, more) = crate::hvt::net_read(rx);
                    (*rx_len, *rx_at, *rx_more, *rx_t) = (len, 0, more, crate::time::now());
                }
                let Some((bytes, next)) = vtnt_hvt::frame_at(&rx[..*rx_len], *rx_at) else {
                    *rx_at = *rx_len;
                    return None;
                };
                *rx_at = next;
                Some(Received {
                    at: (bytes.start, bytes.len()),
                    t: *rx_t,
                    buf: core::mem::take(rx),
                })
            }
        }
    }

    /// Takes back the buffer [`Nic::next_frame`] lent.
    fn frame_done(&mut self, buf: Box<[u8]>) {
        match &mut self.link {
            Link::Virtio(v) => {
                if v.post_rx(buf).is_err() {
                    self.stats.rx_dropped += 1;
                }
            }
            Link::Monitor { rx, .. } => *rx = buf,
        }
    }

    /// Sends a complete IPv4 packet, unchanged, to the next hop's MAC.
    pub fn send_ipv4(&mut self, now: Instant, packet: &[u8]) -> Result<(), SendError> {
        if packet.len() < 20 || packet.len() > MTU || packet[0] >> 4 != 4 {
            return Err(SendError::Invalid);
        }
        let dst = Ipv4Addr::new(packet[16], packet[17], packet[18], packet[19]);
        let hop = self.cfg.next_hop(dst).ok_or(SendError::NoRoute)?;
        let Some(dst_mac) = self.arp.lookup(hop) else {
            if self.arp.may_ask(hop, now) {
                // Best effort: if the queue is full the rate limiter retries later.
                let _ = self.send_arp_request(hop);
            }
            return Err(SendError::Unresolved(hop));
        };
        let src_mac = self.mac;
        self.send_frame(|frame| {
            let eth = EthernetRepr {
                src_addr: src_mac,
                dst_addr: dst_mac,
                ethertype: EthernetProtocol::Ipv4,
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
        self.stats.arp_requests += 1;
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

    /// Starts resolving `ip` (rate-limited); true if its MAC is already known.
    pub fn resolve(&mut self, now: Instant, ip: Ipv4Addr) -> bool {
        if self.arp.lookup(ip).is_some() {
            return true;
        }
        if self.arp.may_ask(ip, now) {
            let _ = self.send_arp_request(ip);
        }
        false
    }

    /// Processes every received frame: ARP is handled here, each IPv4 packet addressed to
    /// us goes to `deliver(receive_time, packet)`. Returns the number of IPv4 packets.
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
        if let Link::Virtio(v) = &mut self.link {
            v.reap_tx();
        }
        while let Some(Received {
            at: (at, len),
            t,
            buf,
        }) = self.next_frame()
        {
            if let Some(frame) = buf.get(at..at + len) {
                each(self, t, frame);
            }
            self.frame_done(buf);
        }
    }

    /// Sends a complete Ethernet frame, as it is.
    pub fn send_raw(&mut self, frame: &[u8]) -> Result<(), SendError> {
        if frame.len() > ETH_HDR + MTU {
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
        if eth.dst_addr() != self.mac && !eth.dst_addr().is_broadcast() {
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
            _ => false,
        }
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
        self.arp.insert(source_protocol_addr, source_hardware_addr);
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

/// A frame the virtio device received: where in `buf` (offset, length), and when.
struct Received {
    at: (usize, usize),
    t: Instant,
    buf: Box<[u8]>,
}

impl Virtio {
    fn post_rx(&mut self, mut buf: Box<[u8]>) -> Result<(), virtio_drivers::Error> {
        // SAFETY: the buffer is owned by `self.rx[token]` from now until the device hands
        // it back through `poll_receive`; nothing reads or writes it meanwhile.
        let token = unsafe { self.dev.receive_begin(&mut buf)? };
        self.rx[token as usize] = Some(buf);
        Ok(())
    }

    /// The next received frame; the caller posts its buffer again.
    fn next_rx(&mut self) -> Option<Received> {
        loop {
            let token = self.dev.poll_receive()?;
            let t = crate::time::now();
            let mut buf = self.rx.get_mut(token as usize).and_then(Option::take)?;
            // SAFETY: `buf` is the buffer posted under `token` (see `post_rx`).
            match unsafe { self.dev.receive_complete(token, &mut buf) } {
                Ok(at) => return Some(Received { at, t, buf }),
                Err(_) => {
                    let _ = self.post_rx(buf);
                }
            }
        }
    }

    /// Returns finished transmit buffers to the free list.
    fn reap_tx(&mut self) {
        while let Some(token) = self.dev.poll_transmit() {
            let Some((buf, len)) = self.tx_busy.get_mut(token as usize).and_then(Option::take)
            else {
                break;
            };
            // SAFETY: `buf[..len]` is exactly the slice passed to `transmit_begin` for
            // this token.
            let _ = unsafe { self.dev.transmit_complete(token, &buf[..len]) };
            self.tx_free.push(buf);
        }
    }

    /// A free transmit buffer with the virtio header filled in, and the header's length.
    fn tx_take(&mut self) -> Result<(Box<[u8]>, usize), SendError> {
        self.reap_tx();
        if !self.dev.can_send() {
            return Err(SendError::Busy);
        }
        let mut buf = match self.tx_free.pop() {
            Some(b) => b,
            None if self.tx_count < QUEUE_SIZE => {
                self.tx_count += 1;
                new_buf()
            }
            None => return Err(SendError::Busy),
        };
        match self.dev.fill_buffer_header(&mut buf) {
            Ok(hdr) => Ok((buf, hdr)),
            Err(_) => {
                self.tx_free.push(buf);
                Err(SendError::Invalid)
            }
        }
    }

    /// Hands the first `len` bytes of `buf` (from [`Virtio::tx_take`]) to the device.
    fn tx_give(&mut self, buf: Box<[u8]>, len: usize) -> Result<(), SendError> {
        // SAFETY: the buffer moves into `tx_busy[token]` and is not touched until the
        // device returns the token (see `reap_tx`).
        match unsafe { self.dev.transmit_begin(&buf[..len]) } {
            Ok(token) => {
                self.tx_busy[token as usize] = Some((buf, len));
                Ok(())
            }
            Err(_) => {
                self.tx_free.push(buf);
                Err(SendError::Busy)
            }
        }
    }
}
