//! A sans-IO, traceroute-aware NAT: many measurement instances (unikernels, containers)
//! on one host probe a real network through the host's single public address, and each
//! gets exactly its own replies, as if it had sent its probes itself.
//!
//! A traceroute asks more of a NAT than Linux's conntrack promises: the packet an ICMP
//! error quotes must come back byte for byte (the engine matches on quoted IP IDs,
//! checksums and sequence numbers), and a Paris flow must keep one identity for the
//! whole measurement, not per tracked connection (docs/forward.md says why in full).
//! Here:
//!
//! - **Outbound** ([`Forwarder::handle_instance_packet`]): an IPv4 or IPv6 probe (ICMP or
//!   ICMPv6 echo request, UDP, TCP SYN; any TTL or hop limit) from a registered instance is checked against the
//!   [`Policy`] (source: the instance's own address; target and the forwarder's rate) and
//!   one token bucket shared by all instances (a probe without a token is dropped and
//!   counted, never queued: a queued probe would leave later than its engine believes).
//!   Its source becomes the public address of its family and its identity (ICMP ident, UDP/TCP source
//!   port) the flow's public identity: the instance's own unless another live mapping
//!   holds it for that protocol and destination. Checksums move incrementally (RFC 1624),
//!   so every probe of a flow carries the same public identity; an echo keeps the very
//!   checksum its instance pinned (ECMP routers hash it), its first payload word taking
//!   the change instead. TTL, ToS, IP ID, hop limit, traffic class, flow label, the rest
//!   of the payload and every other bit stay.
//! - **Inbound** ([`Forwarder::handle_upstream_packet`]): ICMP time exceeded and
//!   destination unreachable (and ICMPv6's, and packet too big) are matched by the packet they quote (protocol, quoted
//!   destination, quoted identity), echo replies by (source, ident), TCP and UDP replies
//!   by (source, destination port). The reply goes to the instance with its destination
//!   and, in a quote, the quoted source, identity, IPv4 header checksum and transport
//!   checksum (an echo's payload word) restored (ICMPv6's checksum also moves with the pseudo-header's address); RFC 4884/4950 extensions pass untouched.
//! - **Mappings** expire after [`Config::mapping_idle`] without an outbound probe
//!   ([`Forwarder::poll_timeout`], [`Forwarder::handle_timeout`], as the engine's);
//!   replies do not keep them alive, so forged replies cannot pin the table. The table
//!   holds at most [`Config::max_mappings`]; a new flow beyond that is refused.
//!
//! No sockets, threads or clocks: the driver (instances' virtual NICs on one side, a raw
//! socket on the public address on the other) hands in the time and the packets.
//!
//! ```
//! use vtnt_forward::{Config, Forwarder};
//! use vtnt_record::Instant;
//! use vtnt_wire::build::{icmp_echo, Echo, Ip};
//!
//! let mut fw = Forwarder::new(Config::new("192.0.2.2".parse().unwrap())).unwrap();
//! let vm = fw.add_instance("10.0.0.2".parse::<std::net::Ipv4Addr>().unwrap());
//! let ip = Ip { src: "10.0.0.2".parse().unwrap(), dst: "203.0.113.9".parse().unwrap(), ttl: 3, tos: 0, ipid: 7 };
//! let mut probe = [0u8; 64];
//! let n = icmp_echo(&mut probe, &ip, &Echo { icmp_type: 8, ident: 0x8001, seq: 1, payload: &[0; 8], checksum: None }).unwrap();
//! let mut out = [0u8; 1500];
//! let len = fw.handle_instance_packet(Instant::ZERO, vm, &probe[..n], &mut out).unwrap();
//! let sent = vtnt_wire::reply::parse(&out[..len]).unwrap();
//! assert_eq!(sent.src.to_string(), "192.0.2.2");
//! assert_eq!((sent.ttl, sent.ipid), (3, 7));
//! ```
#![no_std]
extern crate alloc;

mod bucket;
mod rewrite;
mod table;

use alloc::collections::BTreeMap;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::time::Duration;

use vtnt_policy::v6::Why6;
use vtnt_policy::{Policy, Refusal};
use vtnt_record::Instant;
use vtnt_wire::reply::{self, Body, QuotedTransport, Reply};
use vtnt_wire::{icmp6_type, icmp_type, ipv6, proto, reply6, tcp_flags};

use bucket::Bucket;
use rewrite::Swap;
use table::{InnerKey, Table};

/// Settings of one [`Forwarder`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The host's public address: the source of every IPv4 probe that leaves.
    pub public: Ipv4Addr,
    /// The host's public IPv6 address, the source of every IPv6 probe that leaves;
    /// without one, IPv6 probes are refused ([`Refused::NoPublic6`]).
    pub public6: Option<Ipv6Addr>,
    /// What may be probed; targets are checked at [`Config::pps`], the rate the network
    /// sees from this address.
    pub policy: Policy,
    /// Probes per second for all instances together (1..=[`vtnt_policy::MAX_PPS_LAB`]).
    pub pps: u32,
    /// Probes that may leave back to back (at least 1).
    pub burst: u32,
    /// A mapping without outbound traffic for this long is removed.
    pub mapping_idle: Duration,
    /// Live mappings at most; a new flow beyond is refused ([`Refused::TableFull`]).
    pub max_mappings: usize,
}

impl Config {
    /// Lab targets only, 1,000 pps with a burst of 100, mappings idle for a minute
    /// (traceroute waits seconds for a reply), 65,536 of them; no IPv6.
    pub fn new(public: Ipv4Addr) -> Config {
        Config {
            public,
            public6: None,
            policy: Policy::lab_only(),
            pps: 1000,
            burst: 100,
            mapping_idle: Duration::from_secs(60),
            max_mappings: 65_536,
        }
    }
}

/// Names an instance from [`Forwarder::add_instance`] on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InstanceId(pub u32);

/// Why a packet from an instance did not leave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The policy refused its source or its destination.
    Policy(Refusal),
    /// No token in the shared rate budget: dropped.
    Rate,
    /// The mapping table is full (or every identity towards that destination is taken).
    TableFull,
    /// No instance has this id.
    UnknownInstance(InstanceId),
    /// Not an ICMP or ICMPv6 echo request, UDP datagram or TCP SYN; a fragment (or an
    /// IPv6 packet with extension headers); or cut short.
    NotAProbe,
    /// An IPv6 probe, and the forwarder has no public IPv6 address.
    NoPublic6,
    /// The output buffer is shorter than the packet.
    NoRoom,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Policy(r) => write!(f, "refused by policy: {r}"),
            Refused::Rate => f.write_str("over the shared probe rate: dropped"),
            Refused::TableFull => f.write_str("the mapping table is full"),
            Refused::UnknownInstance(i) => write!(f, "no instance {}", i.0),
            Refused::NotAProbe => f.write_str("not an ICMP echo request, UDP datagram or TCP SYN"),
            Refused::NoPublic6 => f.write_str(
                "an IPv6 probe, and the forwarder has no public IPv6 address to send it from",
            ),
            Refused::NoRoom => f.write_str("output buffer too small"),
        }
    }
}

impl core::error::Error for Refused {}

/// Probes the policy refused, per reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyRefusals {
    /// Source not the instance's address ([`Refusal::Spoofed`]).
    pub spoofed: u64,
    /// [`Refusal::NotUnicast`].
    pub not_unicast: u64,
    /// [`Refusal::Public`].
    pub public: u64,
    /// [`Refusal::PublicRate`].
    pub public_rate: u64,
    /// [`Refusal::Excluded`].
    pub excluded: u64,
    /// [`Refusal::LabNotRouted`].
    pub lab_not_routed: u64,
    /// Any other reason (the rate refusal, which probes at a validated rate do not meet).
    pub other: u64,
}

impl PolicyRefusals {
    fn count(&mut self, r: &Refusal) {
        *match r {
            Refusal::Spoofed(_) | Refusal::V6(_, Why6::Spoofed) => &mut self.spoofed,
            Refusal::NotUnicast(..) | Refusal::V6(_, Why6::NotUnicast(_)) => &mut self.not_unicast,
            Refusal::Public(_) | Refusal::V6(_, Why6::Public) => &mut self.public,
            Refusal::PublicRate { .. } | Refusal::V6(_, Why6::PublicRate(_)) => {
                &mut self.public_rate
            }
            Refusal::Excluded { .. } => &mut self.excluded,
            Refusal::LabNotRouted(_) | Refusal::V6(_, Why6::LabNotRouted) => {
                &mut self.lab_not_routed
            }
            Refusal::Ipv6 | Refusal::Rate(_) => &mut self.other,
        } += 1;
    }
}

/// Counters since the forwarder was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Probes rewritten and handed back to leave.
    pub forwarded: u64,
    /// Probes the policy refused.
    pub refused: PolicyRefusals,
    /// Probes dropped for want of a token.
    pub dropped_rate: u64,
    /// New flows refused because the table was full.
    pub table_full: u64,
    /// Packets from instances that were no probes, or from unknown instances, or did not
    /// fit the output buffer, or IPv6 without a public IPv6 address.
    pub invalid: u64,
    /// Mappings that had to take another identity than the instance's (conflicts).
    pub rewrites: u64,
    /// Replies handed to an instance.
    pub delivered: u64,
    /// Upstream packets that matched no mapping (or did not fit the output buffer).
    pub unmatched: u64,
    /// Mappings removed for idleness.
    pub expired: u64,
    /// Mappings live now.
    pub mappings: usize,
}

/// The forwarder. See the crate documentation.
#[derive(Debug)]
pub struct Forwarder {
    config: Config,
    bucket: Bucket,
    table: Table,
    instances: BTreeMap<InstanceId, Addrs>,
    next_instance: u32,
    stats: Stats,
    /// The latest time any call gave.
    now: Instant,
}

/// An instance's addresses: one per family at most.
#[derive(Debug, Clone, Copy, Default)]
struct Addrs {
    v4: Option<Ipv4Addr>,
    v6: Option<Ipv6Addr>,
}

impl Addrs {
    fn set(&mut self, addr: IpAddr) {
        match addr {
            IpAddr::V4(a) => self.v4 = Some(a),
            IpAddr::V6(a) => self.v6 = Some(a),
        }
    }

    /// The instance's address of `src`'s family, if `src` is it.
    fn check(&self, src: IpAddr) -> Result<IpAddr, Refusal> {
        match src {
            IpAddr::V4(a) => vtnt_policy::check_source(a, self.v4.as_slice()).map(|()| src),
            IpAddr::V6(a) => vtnt_policy::v6::check_source6(a, self.v6.as_slice()).map(|()| src),
        }
    }
}

/// The numbers that differ between ICMP and ICMPv6.
struct Icmp {
    protocol: u8,
    echo_request: u8,
    echo_reply: u8,
    /// The errors a traceroute reads and the forwarder passes on.
    errors: &'static [u8],
}

const ICMP4: Icmp = Icmp {
    protocol: proto::ICMP,
    echo_request: icmp_type::ECHO_REQUEST,
    echo_reply: icmp_type::ECHO_REPLY,
    errors: &[icmp_type::TIME_EXCEEDED, icmp_type::DEST_UNREACH],
};

const ICMP6: Icmp = Icmp {
    protocol: proto::ICMPV6,
    echo_request: icmp6_type::ECHO_REQUEST,
    echo_reply: icmp6_type::ECHO_REPLY,
    errors: &[
        icmp6_type::TIME_EXCEEDED,
        icmp6_type::DEST_UNREACH,
        icmp6_type::PACKET_TOO_BIG,
    ],
};

/// Reads an IP datagram of either version; with the ICMP numbers of its version.
fn parse(packet: &[u8]) -> Option<(Reply<'_>, &'static Icmp)> {
    if packet.first()? >> 4 == 6 {
        Some((reply6::parse(packet).ok()?, &ICMP6))
    } else {
        Some((reply::parse(packet).ok()?, &ICMP4))
    }
}

/// What an instance's packet must be to leave.
struct ProbeFields {
    src: IpAddr,
    dst: IpAddr,
    protocol: u8,
    id: u16,
    len: usize,
}

fn probe_fields(packet: &[u8]) -> Option<ProbeFields> {
    let (r, icmp) = parse(packet)?;
    if r.src.is_ipv4() != r.dst.is_ipv4() {
        return None;
    }
    // Fragments are no probes: IPv4's more-fragments flag or an offset, IPv6's fragment
    // header (an IPv6 probe has no extension header at all).
    if icmp.protocol == proto::ICMP {
        if packet.get(6)? & 0x3f != 0 || packet.get(7)? != &0 {
            return None;
        }
    } else if ipv6::header(packet).ok()?.header_len != ipv6::HEADER_LEN {
        return None;
    }
    let (protocol, id) = match r.body {
        Body::Echo {
            icmp_type, ident, ..
        } if icmp_type == icmp.echo_request => (icmp.protocol, ident),
        Body::Udp { sport, .. } => (proto::UDP, sport),
        Body::Tcp { sport, flags, .. }
            if flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN =>
        {
            (proto::TCP, sport)
        }
        _ => return None,
    };
    Some(ProbeFields {
        src: r.src,
        dst: r.dst,
        protocol,
        id,
        len: usize::from(r.len),
    })
}

/// How an upstream packet is matched and rewritten.
enum Inbound {
    /// An ICMP error quoting a probe of this protocol.
    Error { quoted: u8 },
    /// An answer from the destination, in this protocol.
    Answer { protocol: u8 },
}

impl Forwarder {
    /// A forwarder with no instance yet; refuses a rate outside the policy's range.
    pub fn new(config: Config) -> Result<Forwarder, Refusal> {
        vtnt_policy::check_rate(config.pps)?;
        Ok(Forwarder {
            bucket: Bucket::new(config.pps, config.burst),
            table: Table::new(config.mapping_idle, config.max_mappings),
            instances: BTreeMap::new(),
            next_instance: 0,
            stats: Stats::default(),
            now: Instant::ZERO,
            config,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Registers an instance that sends from `addr` (private; several instances may have
    /// the same address, each behind its own virtual NIC).
    pub fn add_instance(&mut self, addr: impl Into<IpAddr>) -> InstanceId {
        let id = InstanceId(self.next_instance);
        self.next_instance += 1;
        let mut addrs = Addrs::default();
        addrs.set(addr.into());
        self.instances.insert(id, addrs);
        id
    }

    /// Gives a dual-stack instance its address of the other family (or replaces the one
    /// of `addr`'s family). Returns whether the instance exists.
    pub fn add_address(&mut self, id: InstanceId, addr: impl Into<IpAddr>) -> bool {
        self.instances
            .get_mut(&id)
            .map(|a| a.set(addr.into()))
            .is_some()
    }

    /// Forgets an instance and its mappings (late replies to it are then unmatched).
    /// Returns whether it existed.
    pub fn remove_instance(&mut self, id: InstanceId) -> bool {
        self.table.remove_instance(id);
        self.stats.mappings = self.table.len();
        self.instances.remove(&id).is_some()
    }

    fn tick(&mut self, now: Instant) -> Instant {
        self.now = self.now.max(now);
        self.handle_timeout(self.now);
        self.now
    }

    /// A packet `instance` sent at `now`: on success the probe to send from the public
    /// address is at `out[..len]`. Never panics, whatever the bytes.
    pub fn handle_instance_packet(
        &mut self,
        now: Instant,
        instance: InstanceId,
        ip_packet: &[u8],
        out: &mut [u8],
    ) -> Result<usize, Refused> {
        let now = self.tick(now);
        let r = self.outbound(now, instance, ip_packet, out);
        match &r {
            Ok(_) => self.stats.forwarded += 1,
            Err(Refused::Policy(why)) => self.stats.refused.count(why),
            Err(Refused::Rate) => self.stats.dropped_rate += 1,
            Err(Refused::TableFull) => self.stats.table_full += 1,
            Err(_) => self.stats.invalid += 1,
        }
        self.stats.mappings = self.table.len();
        r
    }

    fn outbound(
        &mut self,
        now: Instant,
        instance: InstanceId,
        packet: &[u8],
        out: &mut [u8],
    ) -> Result<usize, Refused> {
        let addrs = *self
            .instances
            .get(&instance)
            .ok_or(Refused::UnknownInstance(instance))?;
        let ProbeFields {
            src,
            dst,
            protocol,
            id,
            len,
        } = probe_fields(packet).ok_or(Refused::NotAProbe)?;
        let public = match src {
            IpAddr::V4(_) => IpAddr::V4(self.config.public),
            IpAddr::V6(_) => IpAddr::V6(self.config.public6.ok_or(Refused::NoPublic6)?),
        };
        addrs.check(src).map_err(Refused::Policy)?;
        self.config
            .policy
            .check_target(dst, self.config.pps)
            .map_err(Refused::Policy)?;
        let out = out.get_mut(..len).ok_or(Refused::NoRoom)?;
        if !self.bucket.ready(now) {
            return Err(Refused::Rate);
        }
        let key = InnerKey {
            instance,
            proto: protocol,
            dst,
            id,
        };
        let (public_id, moved) = self
            .table
            .outbound(now, key)
            .map_err(|_| Refused::TableFull)?;
        self.bucket.spend();
        self.stats.rewrites += u64::from(moved);
        out.copy_from_slice(&packet[..len]);
        let swap = Swap {
            addr: (src, public),
            id: (id, public_id),
        };
        rewrite::probe(out, protocol, swap).ok_or(Refused::NotAProbe)?;
        Ok(len)
    }

    /// A packet that arrived at the public address at `now`: when it answers a probe of
    /// an instance, the packet that instance must receive is at `out[..len]`. Never
    /// panics, whatever the bytes; anything else is counted and dropped.
    pub fn handle_upstream_packet(
        &mut self,
        now: Instant,
        ip_packet: &[u8],
        out: &mut [u8],
    ) -> Option<(InstanceId, usize)> {
        self.tick(now);
        let r = self.inbound(ip_packet, out);
        match r {
            Some(_) => self.stats.delivered += 1,
            None => self.stats.unmatched += 1,
        }
        r
    }

    fn inbound(&self, packet: &[u8], out: &mut [u8]) -> Option<(InstanceId, usize)> {
        let (r, icmp) = parse(packet)?;
        let public = match r.dst {
            IpAddr::V4(_) => IpAddr::V4(self.config.public),
            IpAddr::V6(_) => IpAddr::V6(self.config.public6?),
        };
        if r.dst != public || r.src.is_ipv4() != public.is_ipv4() {
            return None;
        }
        let (how, key) = match r.body {
            // Only the errors a traceroute reads: a redirect or a parameter problem
            // would tell an instance about a network it does not see.
            Body::IcmpError {
                icmp_type, quote, ..
            } if icmp.errors.contains(&icmp_type) && quote.src == public => {
                if quote.dst.is_ipv4() != public.is_ipv4() {
                    return None;
                }
                let (quoted, id) = match quote.transport {
                    QuotedTransport::Icmp {
                        icmp_type, ident, ..
                    } if icmp_type == icmp.echo_request => (icmp.protocol, ident),
                    QuotedTransport::Udp { sport, .. } => (proto::UDP, sport),
                    QuotedTransport::Tcp { sport, .. } => (proto::TCP, sport),
                    _ => return None,
                };
                (Inbound::Error { quoted }, (quoted, quote.dst, id))
            }
            Body::Echo {
                icmp_type, ident, ..
            } if icmp_type == icmp.echo_reply => (
                Inbound::Answer {
                    protocol: icmp.protocol,
                },
                (icmp.protocol, r.src, ident),
            ),
            Body::Tcp { dport, .. } => (
                Inbound::Answer {
                    protocol: proto::TCP,
                },
                (proto::TCP, r.src, dport),
            ),
            Body::Udp { dport, .. } => (
                Inbound::Answer {
                    protocol: proto::UDP,
                },
                (proto::UDP, r.src, dport),
            ),
            _ => return None,
        };
        let m = self.table.inbound(key)?;
        let instance = m.inner.instance;
        let addrs = self.instances.get(&instance)?;
        let addr = match public {
            IpAddr::V4(_) => IpAddr::V4(addrs.v4?),
            IpAddr::V6(_) => IpAddr::V6(addrs.v6?),
        };
        let swap = Swap {
            addr: (public, addr),
            id: (m.public_id, m.inner.id),
        };
        let len = usize::from(r.len);
        let out = out.get_mut(..len)?;
        out.copy_from_slice(&packet[..len]);
        match how {
            Inbound::Error { quoted } => rewrite::error(out, quoted, swap)?,
            Inbound::Answer { protocol } => rewrite::answer(out, protocol, swap)?,
        }
        Some((instance, len))
    }

    /// When the next mapping may expire, if any is live.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.table.next_deadline()
    }

    /// Removes the mappings idle since `now - mapping_idle`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        self.stats.expired += self.table.expire(self.now) as u64;
        self.stats.mappings = self.table.len();
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }
}
