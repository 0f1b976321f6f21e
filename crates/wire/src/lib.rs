//! Packets as bytes, for a prober and for the routers that answer it.
//!
//! The IPv4, ICMPv4, UDP and TCP headers of probes and replies are written ([`build`]) and
//! read ([`reply`]) by hand, at fixed bounds-checked offsets. smoltcp provides the
//! Internet checksum ([`checksum`]); its `wire` packet views (`Ipv4Packet`, ... with
//! `new_checked`) are re-exported for callers that want them. What this crate adds:
//!
//! - [`mpls`]: MPLS label stack entries (RFC 3032);
//! - [`icmpext`]: RFC 4884 multi-part ICMP messages carrying the RFC 4950 MPLS object;
//! - [`ipopt`]: the IPv4 record route option (scamper's `ping -R`);
//! - [`reply`]: one call that turns a received IP packet into what a prober matches on
//!   (ICMP errors with the quoted probe, echo replies, TCP and UDP segments);
//! - [`build`]: probes with a chosen TTL, IP ID and flow identifier (Paris traceroute keeps
//!   the checksum or ports constant), and the ICMP replies a router or host sends;
//! - [`reassembly`]: IPv4 fragments back into datagrams;
//! - [`ipv6`], [`reply6`], [`build6`]: the same over IPv6 (ICMPv6 with its pseudo-header
//!   checksum, RFC 4884 extensions with ICMPv6's length rules, UDP and TCP over IPv6, the
//!   flow label held constant for Paris traces).
//!
//! Panic contract: every parser takes untrusted bytes and returns `Option`/`Result`; no
//! function here panics on any input. Builders return [`Error::Truncated`] when the
//! buffer is too small. `no_std`, no unsafe, no allocation but in [`reassembly`].
//!
//! IPv6: [`reply::Reply`] and [`reply::Quote`] carry `core::net::IpAddr`; [`reply::parse`]
//! reads either version when the `ipv6` feature is on. It is off in the unikernel, which
//! probes IPv4 only: the IPv6 arm costs its job image about 3.4 KiB, which its budget
//! does not have (docs/benchmarks.md, "Unikernel budgets").
#![no_std]

extern crate alloc;

pub mod build;
pub mod build6;
pub mod checksum;
pub mod icmpext;
pub mod ipopt;
pub mod ipv6;
pub mod mpls;
pub mod reassembly;
pub mod reply;
pub mod reply6;
mod view;

pub use smoltcp::wire::{
    Icmpv4Message, Icmpv4Packet, IpProtocol, Ipv4Packet, TcpPacket, UdpPacket, IPV4_HEADER_LEN,
};

/// What went wrong building or parsing a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the packet needs.
    Truncated,
    /// A field holds a value this code does not accept (wrong version, bad length).
    Malformed,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Error::Truncated => "packet truncated",
            Error::Malformed => "malformed packet",
        })
    }
}

/// Result of wire operations.
pub type Result<T> = core::result::Result<T, Error>;

/// IP protocol numbers this crate speaks of.
pub mod proto {
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ICMPV6: u8 = 58;
}

/// ICMPv4 types this crate speaks of.
pub mod icmp_type {
    pub const ECHO_REPLY: u8 = 0;
    pub const DEST_UNREACH: u8 = 3;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
}

/// ICMPv6 types this crate speaks of (RFC 4443).
pub mod icmp6_type {
    pub const DEST_UNREACH: u8 = 1;
    pub const PACKET_TOO_BIG: u8 = 2;
    pub const TIME_EXCEEDED: u8 = 3;
    pub const PARAM_PROBLEM: u8 = 4;
    pub const ECHO_REQUEST: u8 = 128;
    pub const ECHO_REPLY: u8 = 129;
}

/// DHCPv6's numbers (RFC 8415), which the unikernel's client and the lab's server share.
pub mod dhcp6 {
    /// The client's and the server's UDP ports.
    pub const CLIENT_PORT: u16 = 546;
    pub const SERVER_PORT: u16 = 547;
    /// Message types (section 7.3).
    pub const SOLICIT: u8 = 1;
    pub const ADVERTISE: u8 = 2;
    pub const REQUEST: u8 = 3;
    pub const CONFIRM: u8 = 4;
    pub const RENEW: u8 = 5;
    pub const REBIND: u8 = 6;
    pub const REPLY: u8 = 7;
    pub const RELEASE: u8 = 8;
    pub const DECLINE: u8 = 9;
    pub const INFORMATION_REQUEST: u8 = 11;
    /// Options (section 21).
    pub const CLIENT_ID: u16 = 1;
    pub const SERVER_ID: u16 = 2;
    pub const IA_NA: u16 = 3;
    pub const IA_ADDR: u16 = 5;
    pub const ELAPSED: u16 = 8;
    pub const STATUS: u16 = 13;
    /// Status codes (section 21.13).
    pub const SUCCESS: u16 = 0;
    pub const NO_ADDRS_AVAIL: u16 = 2;
    pub const NOT_ON_LINK: u16 = 4;
    /// The longest DUID (section 11.1).
    pub const DUID_MAX: usize = 130;
}

/// TCP flag bits.
pub mod tcp_flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
}

pub(crate) fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

pub(crate) fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes([
        *b.get(at)?,
        *b.get(at + 1)?,
        *b.get(at + 2)?,
        *b.get(at + 3)?,
    ]))
}
