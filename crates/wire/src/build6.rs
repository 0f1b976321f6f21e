//! [`crate::build`] over IPv6: probes with a chosen hop limit, traffic class and flow
//! label, and the ICMPv6 messages routers and hosts answer with. Every builder writes a
//! complete IPv6 packet (no extension headers) with correct upper-layer checksums, the
//! pseudo-header included (ICMPv6's too, unlike ICMPv4's), and returns its length.
//!
//! Paris traceroute over IPv6 keeps the flow label constant besides what it keeps
//! constant over IPv4 (ports, ICMP checksum): RFC 6437 lets routers hash it with the
//! addresses. ICMPv6 errors follow RFC 4884 with ICMPv6's rules (length in 64-bit words
//! at byte 4, quote padded to a multiple of 8) and stay within the IPv6 minimum MTU when
//! `quote_len` keeps them so (RFC 4443 section 2.4 (c)).

use crate::build::{self, Echo, IcmpError, Tcp, Udp};
use crate::icmpext::Family;
use crate::ipv6::{self, Ip6, HEADER_LEN};
use crate::{checksum, proto, Error, Result};

/// The minimum IPv6 MTU (RFC 8200): an ICMPv6 error is no longer than this.
pub const MIN_MTU: usize = 1280;

/// The pseudo-header sum of a `len`-byte `next_header` payload from `ip`.
fn pseudo(ip: &Ip6, next_header: u8, len: usize) -> u16 {
    checksum::pseudo_v6(ip.src, ip.dst, next_header, len as u32)
}

/// An ICMPv6 echo request (type 128) or reply (129) (see [`Echo`]).
pub fn icmp6_echo(buf: &mut [u8], ip: &Ip6, e: &Echo) -> Result<usize> {
    let len = 8 + e.payload.len();
    let total = ipv6::emit(buf, ip, proto::ICMPV6, len)?;
    build::echo_message(
        &mut buf[HEADER_LEN..total],
        e,
        pseudo(ip, proto::ICMPV6, len),
    )?;
    Ok(total)
}

/// Sets the checksum of the ICMPv6 echo message `m` sent from `ip` after its bytes
/// changed (see [`build::icmp_echo_checksum`]).
pub fn icmp6_echo_checksum(m: &mut [u8], ip: &Ip6, checksum: Option<u16>) -> Result<()> {
    let p = pseudo(ip, proto::ICMPV6, m.len());
    build::echo_checksum(m, checksum, p)
}

/// A UDP datagram over IPv6 (see [`Udp`]).
pub fn udp6(buf: &mut [u8], ip: &Ip6, u: &Udp) -> Result<usize> {
    let len = 8 + u.payload.len();
    let total = ipv6::emit(buf, ip, proto::UDP, len)?;
    build::udp_segment(&mut buf[HEADER_LEN..total], u, pseudo(ip, proto::UDP, len))?;
    Ok(total)
}

/// A TCP segment over IPv6 without options or payload.
pub fn tcp6(buf: &mut [u8], ip: &Ip6, t: &Tcp) -> Result<usize> {
    let total = ipv6::emit(buf, ip, proto::TCP, 20)?;
    build::tcp_segment(&mut buf[HEADER_LEN..total], t, pseudo(ip, proto::TCP, 20));
    Ok(total)
}

/// An ICMPv6 error (see [`IcmpError`]; `icmp_type` is ICMPv6's: [`crate::icmp6_type`]).
/// The extension structure is only for time exceeded and destination unreachable.
pub fn icmp6_error(buf: &mut [u8], ip: &Ip6, e: &IcmpError) -> Result<usize> {
    let len = build::error_len(e, Family::V6);
    if HEADER_LEN + len > MIN_MTU {
        return Err(Error::Malformed);
    }
    let total = ipv6::emit(buf, ip, proto::ICMPV6, len)?;
    let p = pseudo(ip, proto::ICMPV6, len);
    build::error_message(&mut buf[HEADER_LEN..total], e, Family::V6, p)?;
    Ok(total)
}

#[cfg(test)]
mod tests;
