//! Probes as bytes, and replies back to probe numbers.
//!
//! Every probe of a measurement carries a probe number (1, 2, ...) in a field the reply
//! brings back, while the fields load balancers hash stay constant (Paris traceroute).
//! It also carries the engine's instance tag (see [`crate::flow::instance_tag`]), so a
//! reply to another process's probe is never taken for ours, even when that process uses
//! the same ident or port towards the same destination (raw sockets deliver every reply
//! to every process):
//!
//! | method | constant | probe number in | tag in | an ICMP error quotes | the destination answers |
//! |---|---|---|---|---|---|
//! | ICMP echo | type, code, ident, checksum, payload | sequence | IP ID; payload bytes 2..4 | IP ID, ident, seq | echo reply (ident, seq, payload) |
//! | UDP | ports | UDP checksum (never 0) | IP ID | IP ID, ports, checksum | port unreachable (quote) |
//! | TCP SYN | ports | sequence number, low 16 bits | sequence number, high 16 bits | ports, seq | RST or SYN-ACK, ack = seq + 1 |
//! | TCP ACK | ports | sequence and acknowledgment numbers, low 16 bits | both, high 16 bits | ports, seq | RST, seq = the probe's ack |
//!
//! A ping's options vary more, as scamper's do: udp-dport sends probe n to `dport + n -
//! 1` (an error's quote must show that port); `-d` of an ICMP ping makes probe n's
//! sequence number `d + n - 1`; `-A` of a tcp-ack ping gives every probe the same
//! acknowledgment number, so that a RST (which brings back only that) is taken for the
//! last probe sent, as scamper takes it.
//!
//! The IP ID is [`ip_id`]`(tag, number)`: tag and number together, never 0 (Linux
//! replaces a zero IP ID of a raw packet). UDP falls back to it for the probe number when
//! a middlebox rewrote the checksum to zero; the tag is then unchecked. Paris ICMP traces
//! pin their checksum with payload bytes 0..2, after the tag is written. Nothing here
//! trusts the reply: every field is checked against the measurement's flow and the
//! probes actually sent.
//!
//! Over IPv6 (feature `ipv6-probe`) every method's probes are built: ICMPv6 echo
//! requests, UDP datagrams and TCP segments numbered and tagged as over IPv4, every probe of a
//! measurement with the same non-zero flow label, drawn from its flow (as scamper's,
//! which Linux labels per socket: routers that hash the flow label see one flow per
//! measurement, and different measurements as different flows). IPv6 has no
//! IP ID, so an ICMPv6 error that quotes a probe is taken by its ident and sequence
//! number or its ports and checksum alone. Time exceeded, destination unreachable and
//! packet too big quote the probe.

use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;

use vtnt_record::{Method, MplsLabel, Quoted};
use vtnt_wire::build::{self, Ip};
use vtnt_wire::ipopt::RECORD_ROUTE_LEN;
use vtnt_wire::reply::{Body, QuotedTransport, Reply};
use vtnt_wire::{checksum, icmp6_type, icmp_type, proto, tcp_flags, Error};

use crate::flow::{self, Addr, Flow, FlowKey, Vary};
use crate::Instant;

/// The leading bytes of a probe that name it: its IPv4 header (options included: 60
/// bytes at most) and the first 8 bytes of its ICMP, UDP or TCP header. A driver that
/// reports on a probe ([`crate::Engine::handle_transmitted`],
/// [`crate::Engine::handle_send_error`]) after the packet is gone keeps these (all of
/// a shorter probe).
pub const PROBE_ID_LEN: usize = 68;

const IP_UDP_ICMP_HEADERS: u16 = 28;
/// Where the tag sits in an ICMP probe's payload (after the two checksum-pinning bytes).
const ICMP_TAG_AT: usize = 2;

const IP_TCP_HEADERS: u16 = 40;
/// TCP window of the SYN probes (Linux's default for a SYN of this size).
const TCP_WINDOW: u16 = 5840;

/// What differs between two probes of a measurement.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe<'a> {
    pub src: Addr,
    pub ttl: u8,
    pub tos: u8,
    pub number: u16,
    /// IP total length.
    pub size: u16,
    /// The whole payload ([`payload_bytes`]).
    pub data: &'a [u8],
    /// A record route option goes into the IP header (its 40 bytes count in `size`).
    pub record_route: bool,
}

/// The payload of a measurement's probes, once for all of them: `len` bytes, `data`
/// from byte `lead` on (repeated to the end if `repeat`: a ping's pattern), zeros
/// elsewhere. (Built per measurement rather than cut from a static buffer of zeros,
/// which would cost the unikernel's image 1.5 KiB.)
pub(crate) fn payload_bytes(len: usize, lead: usize, data: &[u8], repeat: bool) -> Vec<u8> {
    let mut p = alloc::vec![0u8; len];
    if let Some(rest) = p.get_mut(lead..) {
        if repeat && !data.is_empty() {
            rest.iter_mut()
                .zip(data.iter().cycle())
                .for_each(|(o, i)| *o = *i);
        } else {
            rest.iter_mut().zip(data).for_each(|(o, i)| *o = *i);
        }
    }
    p
}

/// The protocol a method probes with.
pub(crate) fn protocol(method: Method) -> u8 {
    match method {
        Method::IcmpParis => proto::ICMP,
        Method::UdpParis | Method::UdpDport => proto::UDP,
        Method::Tcp | Method::TcpAck => proto::TCP,
    }
}

/// The UDP destination port of probe `number` of `flow`.
fn udp_dport(flow: &Flow, number: u16) -> u16 {
    if flow.vary.dport_counts {
        flow.dport.wrapping_add(number.wrapping_sub(1))
    } else {
        flow.dport
    }
}

/// The IP ID of probe `number` of an engine with `tag`: their sum over 1..=65535, so it
/// is never 0 and gives the number back ([`number_of_ip_id`]).
pub(crate) fn ip_id(tag: u16, number: u16) -> u16 {
    ((u32::from(tag) + u32::from(number) + 0xfffe) % 0xffff + 1) as u16
}

/// The probe number whose IP ID is `ipid` (0 is no probe's).
fn number_of_ip_id(tag: u16, ipid: u16) -> Option<u16> {
    let back = (u32::from(ipid) + 0xffff - 1 - u32::from(tag) % 0xffff) % 0xffff;
    (ipid != 0).then_some((back + 1) as u16)
}

/// The TCP sequence number of probe `number` of an engine with `tag`.
pub(crate) fn tcp_seq(tag: u16, number: u16) -> u32 {
    u32::from(tag) << 16 | u32::from(number)
}

/// The probe number a TCP sequence number of ours carries.
fn number_of_tcp_seq(tag: u16, seq: u32) -> Option<u16> {
    (seq >> 16 == u32::from(tag)).then_some(seq as u16)
}

/// Writes probe `p` of `flow` at the start of `buf`; returns its length.
pub(crate) fn build(buf: &mut [u8], flow: &Flow, p: &Probe) -> Result<usize, Error> {
    if !p.record_route {
        return build_plain(buf, flow, p);
    }
    let size = p
        .size
        .checked_sub(RECORD_ROUTE_LEN as u16)
        .ok_or(Error::Malformed)?;
    let n = build_plain(buf, flow, &Probe { size, ..*p })?;
    vtnt_wire::ipopt::insert_record_route(buf, n)
}

/// [`build`] without IP options.
fn build_plain(buf: &mut [u8], flow: &Flow, p: &Probe) -> Result<usize, Error> {
    #[cfg(feature = "ipv6-probe")]
    let (src, dst) = match (p.src, flow.key.dst) {
        (IpAddr::V6(src), IpAddr::V6(dst)) => return v6::build(buf, flow, p, src, dst),
        (IpAddr::V4(src), IpAddr::V4(dst)) => (src, dst),
        _ => return Err(Error::Malformed),
    };
    #[cfg(not(feature = "ipv6-probe"))]
    let (src, dst) = (p.src, flow.key.dst);
    let ip = Ip {
        src,
        dst,
        ttl: p.ttl,
        tos: p.tos,
        ipid: ip_id(flow.tag, p.number),
    };
    match flow.key.proto {
        proto::ICMP => {
            let payload = payload(p, IP_UDP_ICMP_HEADERS)?;
            let echo = echo_request(flow, p, icmp_type::ECHO_REQUEST, payload);
            let n = build::icmp_echo(buf, &ip, &echo)?;
            let m = buf.get_mut(20..n).ok_or(Error::Truncated)?;
            let pin = tag_echo(m, flow)?;
            build::icmp_echo_checksum(m, pin)?;
            Ok(n)
        }
        proto::UDP => {
            let payload = payload(p, IP_UDP_ICMP_HEADERS)?;
            build::udp(
                buf,
                &ip,
                &build::Udp {
                    sport: flow.sport(),
                    dport: udp_dport(flow, p.number),
                    payload,
                    checksum: Some(p.number),
                },
            )
        }
        _ => {
            let n = build::tcp(buf, &ip, &tcp_header(flow, p))?;
            let payload = payload(p, IP_TCP_HEADERS)?;
            pad_tcp(buf, &ip, n, payload)
        }
    }
}

/// The TCP header of probe `p` of `flow`: a SYN, or an ACK for tcp-ack, numbered and
/// tagged in its sequence (and acknowledgment) number.
#[inline(always)]
fn tcp_header(flow: &Flow, p: &Probe) -> build::Tcp {
    let seq = tcp_seq(flow.tag, p.number);
    let (ack, flags) = match flow.vary {
        Vary { tcp_ack: false, .. } => (0, tcp_flags::SYN),
        Vary { fixed_ack, .. } => (fixed_ack.unwrap_or(seq), tcp_flags::ACK),
    };
    build::Tcp {
        sport: flow.sport(),
        dport: flow.dport,
        seq,
        ack,
        flags,
        window: TCP_WINDOW,
    }
}

/// IPv6 probes: ICMPv6 echo requests, UDP datagrams and TCP segments, built as
/// [`build_plain`] builds ICMP, UDP and TCP ones (the tag in payload bytes 2..4 of an echo
/// request, a pinned checksum for Paris), with the flow's [`v6::flow_label`] throughout.
#[cfg(feature = "ipv6-probe")]
mod v6 {
    use core::net::Ipv6Addr;

    use vtnt_wire::build::Udp;
    use vtnt_wire::ipv6::{Ip6, HEADER_LEN};
    use vtnt_wire::{build6, checksum, icmp6_type, proto, Error};

    use super::{
        echo_request, number_of_tcp_seq, payload, tag_echo, tcp_header, udp_dport, Flow, FlowKey,
        Probe,
    };

    /// The IPv6 header and an ICMPv6 echo or UDP header.
    const IP6_HEADERS: u16 = 48;
    /// The IPv6 header and a TCP header.
    const IP6_TCP_HEADERS: u16 = 60;

    /// The flow label of every probe of `flow`: 20 bits mixed from the engine's tag and
    /// the flow's identifier (ICMP ident or source port), never 0 (RFC 6437's "no label").
    pub(super) fn flow_label(flow: &Flow) -> u32 {
        let key = u32::from(flow.tag) << 16 | u32::from(flow.key.id);
        (key.wrapping_mul(0x9e37_79b1) >> 12).max(1)
    }

    /// Writes probe `p` of `flow` from `src` to `dst`.
    pub(super) fn build(
        buf: &mut [u8],
        flow: &Flow,
        p: &Probe,
        src: Ipv6Addr,
        dst: Ipv6Addr,
    ) -> Result<usize, Error> {
        let ip = Ip6 {
            src,
            dst,
            hop_limit: p.ttl,
            traffic_class: p.tos,
            flow_label: flow_label(flow),
        };
        match flow.key.proto {
            proto::ICMP => {}
            proto::UDP => {
                let u = Udp {
                    sport: flow.sport(),
                    dport: udp_dport(flow, p.number),
                    payload: payload(p, IP6_HEADERS)?,
                    checksum: Some(p.number),
                };
                return build6::udp6(buf, &ip, &u);
            }
            _ => return tcp(buf, flow, p, &ip),
        }
        let payload = payload(p, IP6_HEADERS)?;
        let echo = echo_request(flow, p, icmp6_type::ECHO_REQUEST, payload);
        let n = build6::icmp6_echo(buf, &ip, &echo)?;
        let m = buf.get_mut(HEADER_LEN..n).ok_or(Error::Truncated)?;
        let pin = tag_echo(m, flow)?;
        build6::icmp6_echo_checksum(m, &ip, pin)?;
        Ok(n)
    }

    /// The flow and number of an IPv6 probe of ours (no extension headers): IPv6 has no
    /// IP ID, so a UDP probe's number is its pinned checksum, a TCP one's its sequence
    /// number's, and an echo request's its sequence number, which its flow still offsets
    /// (`Vary::seq_offset`: the engine takes that off).
    pub(super) fn sent_probe(p: &[u8], tag: u16) -> Option<(FlowKey, u16)> {
        let be16 = |i: usize| Some(u16::from_be_bytes([*p.get(i)?, *p.get(i + 1)?]));
        let dst: [u8; 16] = p.get(24..HEADER_LEN)?.try_into().ok()?;
        let t = HEADER_LEN;
        let (proto, id, number) = match *p.get(6)? {
            proto::ICMPV6 if *p.get(t)? == icmp6_type::ECHO_REQUEST => {
                (proto::ICMP, be16(t + 4)?, be16(t + 6)?)
            }
            proto::UDP => (proto::UDP, be16(t)?, be16(t + 6)?),
            proto::TCP => {
                let seq = u32::from(be16(t + 4)?) << 16 | u32::from(be16(t + 6)?);
                (proto::TCP, be16(t)?, number_of_tcp_seq(tag, seq)?)
            }
            _ => return None,
        };
        let dst = Ipv6Addr::from(dst).into();
        Some((FlowKey { proto, id, dst }, number))
    }

    /// A TCP SYN or ACK probe over IPv6, numbered and tagged as over IPv4
    /// ([`super::tcp_header`]), its payload after the 20-byte header.
    fn tcp(buf: &mut [u8], flow: &Flow, p: &Probe, ip: &Ip6) -> Result<usize, Error> {
        let payload = payload(p, IP6_TCP_HEADERS)?;
        let n = build6::tcp6(buf, ip, &tcp_header(flow, p))?;
        let total = n + payload.len();
        let pkt = buf.get_mut(..total).ok_or(Error::Truncated)?;
        if payload.is_empty() {
            return Ok(n);
        }
        pkt[n..].copy_from_slice(payload);
        let seg_len = total - HEADER_LEN;
        let len = u16::try_from(seg_len).map_err(|_| Error::Malformed)?;
        pkt[4..6].copy_from_slice(&len.to_be_bytes());
        pkt[HEADER_LEN + 16..HEADER_LEN + 18].fill(0);
        let pseudo = checksum::pseudo_v6(ip.src, ip.dst, proto::TCP, u32::from(len));
        let c = !checksum::add(checksum::sum(&pkt[HEADER_LEN..]), pseudo);
        pkt[HEADER_LEN + 16..HEADER_LEN + 18].copy_from_slice(&c.to_be_bytes());
        Ok(total)
    }
}

/// The echo request (`icmp_type`: ICMP's or ICMPv6's) of probe `p` of `flow`.
// Inlined (as is `tag_echo`): out of line, the two cost the unikernel's image 80 bytes.
#[inline(always)]
fn echo_request<'a>(flow: &Flow, p: &Probe, icmp_type: u8, payload: &'a [u8]) -> build::Echo<'a> {
    build::Echo {
        icmp_type,
        ident: flow.sport(),
        seq: p.number.wrapping_add(flow.vary.seq_offset),
        payload,
        checksum: None,
    }
}

/// Writes the engine's tag into the echo message `m` (payload bytes 2..4); the checksum
/// to pin then, if `flow` pins one (Paris).
#[inline(always)]
fn tag_echo(m: &mut [u8], flow: &Flow) -> Result<Option<u16>, Error> {
    let at = 8 + ICMP_TAG_AT;
    m.get_mut(at..at + 2)
        .ok_or(Error::Truncated)?
        .copy_from_slice(&flow.tag.to_be_bytes());
    Ok((flow.icmp_sum != 0).then_some(flow.icmp_sum))
}

/// The payload of probe `p` behind `headers` bytes of headers.
fn payload<'a>(p: &Probe<'a>, headers: u16) -> Result<&'a [u8], Error> {
    let n = usize::from(p.size.checked_sub(headers).ok_or(Error::Malformed)?);
    p.data.get(..n).ok_or(Error::Malformed)
}

/// Extends the 40-byte TCP segment at `buf[..n]` with `payload`, fixing the IP length and both
/// checksums.
fn pad_tcp(buf: &mut [u8], ip: &Ip, n: usize, payload: &[u8]) -> Result<usize, Error> {
    let total = n + payload.len();
    if total <= n {
        return Ok(n);
    }
    let size = u16::try_from(total).map_err(|_| Error::Malformed)?;
    let pkt = buf.get_mut(..total).ok_or(Error::Truncated)?;
    pkt[n..].copy_from_slice(payload);
    pkt[2..4].copy_from_slice(&size.to_be_bytes());
    pkt[10..12].fill(0);
    let c = checksum::of(&pkt[..20]);
    pkt[10..12].copy_from_slice(&c.to_be_bytes());
    let seg_len = size - 20;
    pkt[36..38].fill(0);
    let pseudo = checksum::pseudo_v4(ip.src, ip.dst, proto::TCP, seg_len);
    let c = !checksum::add(checksum::sum(&pkt[20..]), pseudo);
    pkt[36..38].copy_from_slice(&c.to_be_bytes());
    Ok(total)
}

/// Payload bytes of a TCP probe of `size` to `dst` (a reply may acknowledge them).
pub(crate) fn tcp_payload_len(size: u16, dst: IpAddr) -> u32 {
    let headers = IP_TCP_HEADERS + crate::measurement::ipv6_extra(dst);
    size.saturating_sub(headers) as u32
}

/// The flow a reply belongs to, from the quoted probe of an ICMP error or from the
/// addresses and identifiers of a reply by the destination.
pub(crate) fn flow_key(r: &Reply<'_>) -> Option<FlowKey> {
    let (proto, id, dst) = match r.body {
        Body::IcmpError {
            icmp_type: t,
            quote,
            ..
        } if is_error(t, r.src) => {
            let dst = flow::probe_addr(quote.dst)?;
            match quote.transport {
                QuotedTransport::Icmp {
                    icmp_type: q,
                    ident,
                    ..
                } if q == echo_type(dst, false) => (proto::ICMP, ident, dst),
                QuotedTransport::Udp { sport, .. } => (proto::UDP, sport, dst),
                QuotedTransport::Tcp { sport, .. } => (proto::TCP, sport, dst),
                _ => return None,
            }
        }
        Body::Echo {
            icmp_type: t,
            ident,
            ..
        } => {
            let src = flow::probe_addr(r.src)?;
            (t == echo_type(src, true)).then_some((proto::ICMP, ident, src))?
        }
        Body::Tcp { dport, .. } => (proto::TCP, dport, flow::probe_addr(r.src)?),
        _ => return None,
    };
    Some(FlowKey { proto, id, dst })
}

/// Whether ICMP type `t` of a message from `from` is an error that quotes a probe
/// (ICMPv6's numbers from an IPv6 source, packet too big among them; folded away
/// without `ipv6-probe`).
fn is_error(t: u8, from: IpAddr) -> bool {
    if cfg!(feature = "ipv6-probe") && from.is_ipv6() {
        matches!(
            t,
            icmp6_type::TIME_EXCEEDED | icmp6_type::DEST_UNREACH | icmp6_type::PACKET_TOO_BIG
        )
    } else {
        t == icmp_type::TIME_EXCEEDED || t == icmp_type::DEST_UNREACH
    }
}

/// The ICMP type of an echo request (`reply`: an echo reply) to or from `a`.
fn echo_type(a: Addr, reply: bool) -> u8 {
    match (flow::ip(a).is_ipv6(), reply) {
        (true, false) => icmp6_type::ECHO_REQUEST,
        (true, true) => icmp6_type::ECHO_REPLY,
        (false, false) => icmp_type::ECHO_REQUEST,
        (false, true) => icmp_type::ECHO_REPLY,
    }
}

/// The probe number `r` answers, if it fits `flow` and carries its tag; probes 1 to
/// `sent` were sent, `tcp_payload` is the payload length of TCP probes.
pub(crate) fn probe_number(flow: &Flow, r: &Reply<'_>, tcp_payload: u32, sent: u16) -> Option<u16> {
    let tag = flow.tag;
    let was_sent = |n: u16| (1..=sent).contains(&n);
    let n = match r.body {
        Body::IcmpError { quote, .. } => {
            let n = match quote.transport {
                QuotedTransport::Icmp { seq, .. } => seq.wrapping_sub(flow.vary.seq_offset),
                QuotedTransport::Udp {
                    dport, checksum, ..
                } => {
                    let n = if checksum != 0 && was_sent(checksum) {
                        checksum
                    } else {
                        number_of_ip_id(tag, quote.ipid)?
                    };
                    (dport == udp_dport(flow, n)).then_some(n)?
                }
                QuotedTransport::Tcp { dport, seq, .. } if dport == flow.dport => {
                    return number_of_tcp_seq(tag, seq).filter(|&n| was_sent(n));
                }
                _ => return None,
            };
            // IPv6 has no IP ID: an ICMPv6 error is matched by ident and sequence alone
            (quote.ipid == ip_id(tag, n) || cfg!(feature = "ipv6-probe") && quote.dst.is_ipv6())
                .then_some(n)?
        }
        Body::Echo { seq, payload, .. } => {
            let at = ICMP_TAG_AT;
            let echoed = payload.get(at..at + 2)?;
            (echoed == tag.to_be_bytes()).then_some(seq.wrapping_sub(flow.vary.seq_offset))?
        }
        // An ACK is answered by a RST whose sequence number is the ACK's acknowledgment
        // number.
        Body::Tcp {
            sport, seq, flags, ..
        } if sport == flow.dport && flow.vary.tcp_ack => {
            if flags & tcp_flags::RST == 0 {
                return None;
            }
            return match flow.vary.fixed_ack {
                Some(a) => (seq == a && sent > 0).then_some(sent),
                None => number_of_tcp_seq(tag, seq).filter(|&n| was_sent(n)),
            };
        }
        Body::Tcp {
            sport, ack, flags, ..
        } if sport == flow.dport => {
            if flags & tcp_flags::ACK == 0 {
                return None;
            }
            // A SYN counts one; a RST may also acknowledge the SYN's payload.
            let plain = ack.wrapping_sub(1);
            let with_payload = plain.wrapping_sub(tcp_payload);
            [plain, with_payload]
                .into_iter()
                .filter_map(|a| number_of_tcp_seq(tag, a))
                .find(|&a| was_sent(a))?
        }
        _ => return None,
    };
    was_sent(n).then_some(n)
}

/// The flow and probe number of a probe this engine built, e.g. one the driver could not
/// send or reports the transmit time of. The bytes are our own ([`build`]: an IPv4
/// header, then ICMP echo, UDP or TCP), so the fields are read where we wrote them rather
/// than through the reply parser (which would cost the unikernel a second copy of it).
/// IPv6 probes: [`v6::sent_probe`].
pub(crate) fn sent_probe(p: &[u8], tag: u16) -> Option<(FlowKey, u16)> {
    let byte = |i: usize| p.get(i).copied();
    let be16 = |i: usize| Some(u16::from_be_bytes([byte(i)?, byte(i + 1)?]));
    let v_ihl = byte(0)?;
    #[cfg(feature = "ipv6-probe")]
    if v_ihl >> 4 == 6 {
        return v6::sent_probe(p, tag);
    }
    let ihl = usize::from(v_ihl & 0x0f) * 4;
    if v_ihl >> 4 != 4 || ihl < 20 {
        return None;
    }
    let proto = byte(9)?;
    let id = match proto {
        proto::ICMP if byte(ihl)? == icmp_type::ECHO_REQUEST => be16(ihl + 4)?,
        proto::UDP | proto::TCP => be16(ihl)?,
        _ => return None,
    };
    let dst = flow::from_v4(Ipv4Addr::new(byte(16)?, byte(17)?, byte(18)?, byte(19)?));
    let number = number_of_ip_id(tag, be16(4)?)?;
    Some((FlowKey { proto, id, dst }, number))
}

/// Whether `at` can be the transmit time of a probe recorded as sent at `tx` (its
/// hand-over time or an earlier stamp) whose replies so far arrived at `arrivals`: a probe
/// leaves after it is handed out and before anything answers it.
pub(crate) fn fits_stamp(
    tx: Instant,
    at: Instant,
    mut arrivals: impl Iterator<Item = Instant>,
) -> bool {
    at >= tx && arrivals.all(|rx| at <= rx)
}

/// A reply's `(tx, rtt)` re-dated to its probe's transmit time `at`; the arrival time
/// `tx + rtt` stays.
pub(crate) fn redate(tx: &mut Instant, rtt: &mut Duration, at: Instant) {
    *rtt = (*tx + *rtt).saturating_since(at);
    *tx = at;
}

/// The parts of a reply both traces and pings record.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReplyFields {
    pub icmp: Option<(u8, u8)>,
    pub tcp_flags: Option<u8>,
    pub quoted: Option<Quoted>,
    pub mpls: Vec<MplsLabel>,
    pub proto: u8,
    /// The next-hop MTU of a "fragmentation needed"; 0 for any other reply.
    pub nhmtu: u16,
}

pub(crate) fn reply_fields(r: &Reply<'_>) -> ReplyFields {
    // ICMPv6 from an IPv6 source (scamper's reply_proto 58)
    let icmp = if cfg!(feature = "ipv6-probe") && r.src.is_ipv6() {
        proto::ICMPV6
    } else {
        proto::ICMP
    };
    match r.body {
        Body::IcmpError {
            icmp_type,
            code,
            nhmtu,
            quote,
            ext,
        } => ReplyFields {
            icmp: Some((icmp_type, code)),
            // a "fragmentation needed"'s, or an ICMPv6 packet too big's (the only one
            // the parser reads an MTU from)
            nhmtu: if (icmp_type, code) == (icmp_type::DEST_UNREACH, 4) || icmp == proto::ICMPV6 {
                nhmtu
            } else {
                0
            },
            quoted: Some(Quoted {
                ttl: quote.ttl,
                ip_len: quote.ip_len,
                tos: quote.tos,
            }),
            mpls: ext.map_or_else(Vec::new, |e| {
                e.mpls_stack()
                    .map(|l| MplsLabel {
                        label: l.label(),
                        exp: l.tc(),
                        bottom: l.bottom(),
                        ttl: l.ttl(),
                    })
                    .collect()
            }),
            proto: icmp,
            ..ReplyFields::default()
        },
        Body::Echo { icmp_type, .. } => ReplyFields {
            icmp: Some((icmp_type, 0)),
            proto: icmp,
            ..ReplyFields::default()
        },
        Body::Tcp { flags, .. } => ReplyFields {
            tcp_flags: Some(flags),
            proto: proto::TCP,
            ..ReplyFields::default()
        },
        Body::Udp { .. } => ReplyFields {
            proto: proto::UDP,
            ..ReplyFields::default()
        },
        Body::Other { protocol } => ReplyFields {
            proto: protocol,
            ..ReplyFields::default()
        },
    }
}

#[cfg(test)]
// the probe's addresses are `Ipv4Addr`s, or `IpAddr`s where `ipv6-probe` is on (as the
// workspace's build has it): `.into()` is a no-op in one build and needed in the other
#[allow(clippy::useless_conversion)]
mod tests {
    use super::*;
    use vtnt_wire::reply;

    const SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 9);

    fn flow(proto: u8) -> Flow {
        Flow {
            key: FlowKey {
                proto,
                id: 0x8123,
                dst: DST.into(),
            },
            dport: 33435,
            icmp_sum: 0,
            tag: 0xfff0,
            vary: Vary::default(),
        }
    }

    #[test]
    fn padded_tcp_syn_verifies() {
        let f = flow(proto::TCP);
        let mut b = [0xa5u8; 64];
        let p = Probe {
            src: SRC.into(),
            ttl: 5,
            tos: 0,
            number: 7,
            size: 44,
            data: &[0; 16],
            record_route: false,
        };
        let n = build(&mut b, &f, &p).unwrap();
        assert_eq!(n, 44);
        assert_eq!(checksum::sum(&b[..20]), 0xffff);
        let pseudo = checksum::pseudo_v4(SRC, DST, proto::TCP, 24);
        assert_eq!(checksum::add(checksum::sum(&b[20..44]), pseudo), 0xffff);
        let r = reply::parse(&b[..n]).unwrap();
        assert_eq!(r.len, 44);
        assert!(matches!(
            r.body,
            Body::Tcp {
                seq: 0xfff0_0007,
                flags: tcp_flags::SYN,
                ..
            }
        ));
        assert_eq!(b[44], 0xa5);
    }

    #[test]
    fn data_and_record_route_go_into_the_probe_and_it_is_still_named() {
        let f = flow(proto::ICMP);
        let data = payload_bytes(124 - 28 - 40, 0, &[0xab, 0xcd, 0xef], true);
        let p = Probe {
            src: SRC.into(),
            ttl: 64,
            tos: 0x20,
            number: 3,
            size: 124,
            data: &data,
            record_route: true,
        };
        let mut b = [0u8; 200];
        let n = build(&mut b, &f, &p).unwrap();
        assert_eq!((n, b[0], b[1]), (124, 0x4f, 0x20));
        assert_eq!(&b[20..23], &[7, 39, 4]);
        // the pattern, its bytes 2 and 3 the tag
        assert_eq!(
            &b[68..76],
            &[0xab, 0xcd, 0xff, 0xf0, 0xcd, 0xef, 0xab, 0xcd]
        );
        assert_eq!(checksum::sum(&b[60..n]), 0xffff, "ICMP checksum");
        assert_eq!(sent_probe(&b[..PROBE_ID_LEN], f.tag), Some((f.key, 3)));
        let short = Probe { size: 60, ..p };
        assert!(build(&mut b, &f, &short).is_err(), "no room for the option");
        // a payload (not repeated) behind two checksum bytes, zeros after it
        assert_eq!(payload_bytes(6, 2, &[1, 2], false), [0, 0, 1, 2, 0, 0]);
        assert_eq!(payload_bytes(3, 0, &[], false), [0, 0, 0]);
    }

    /// Every IPv6 probe of ours is named by its first bytes, as the drivers keep them for
    /// a transmit stamp or a send error: its flow, and its number (an echo request's still
    /// offset by its flow's `seq_offset`, which the engine takes off).
    #[cfg(feature = "ipv6-probe")]
    #[test]
    fn ipv6_probes_are_named_by_their_first_bytes() {
        let src6: core::net::Ipv6Addr = "2001:db8:64::c000:202".parse().unwrap();
        let dst6: core::net::Ipv6Addr = "2001:db8:64::cb00:7109".parse().unwrap();
        for (proto, ack) in [
            (proto::ICMP, false),
            (proto::UDP, false),
            (proto::TCP, false),
            (proto::TCP, true),
        ] {
            let mut f = flow(proto);
            f.key.dst = IpAddr::V6(dst6);
            f.vary.tcp_ack = ack;
            f.vary.seq_offset = 40;
            let p = Probe {
                src: IpAddr::V6(src6),
                ttl: 9,
                tos: 0,
                number: 12,
                size: 80,
                data: &[0; 64],
                record_route: false,
            };
            let mut b = [0u8; 128];
            let n = build(&mut b, &f, &p).unwrap();
            let want = if proto == proto::ICMP { 52 } else { 12 };
            let named = sent_probe(&b[..n.min(PROBE_ID_LEN)], f.tag);
            assert_eq!(named, Some((f.key, want)), "proto {proto}, ack {ack}");
            assert_eq!(
                sent_probe(&b[..n], f.tag.wrapping_add(1)).is_some(),
                proto != proto::TCP
            );
        }
    }

    /// The TCP segment [`answer`] takes when it builds an ICMP error.
    const UNUSED: build::Tcp = build::Tcp {
        sport: 0,
        dport: 0,
        seq: 0,
        ack: 0,
        flags: 0,
        window: 0,
    };

    /// A reply of `dst` to the probe in `probe`: an ICMP error quoting it when `icmp`,
    /// else the TCP segment `t` (from the probe's destination to its source).
    fn answer(buf: &mut [u8], probe: &[u8], icmp: Option<u8>, t: &build::Tcp) -> usize {
        let ip = Ip {
            src: DST,
            dst: SRC,
            ttl: 60,
            tos: 0,
            ipid: 1,
        };
        match icmp {
            Some(icmp_type) => build::icmp_error(
                buf,
                &ip,
                &build::IcmpError {
                    icmp_type,
                    code: 3,
                    original: probe,
                    quote_len: 28,
                    mpls: &[],
                },
            ),
            None => build::tcp(buf, &ip, t),
        }
        .unwrap()
    }

    /// Probe `number` of `size` (at most 40 bytes), its payload zeros.
    fn plain(number: u16, size: u16) -> Probe<'static> {
        Probe {
            src: SRC.into(),
            ttl: 64,
            tos: 0,
            number,
            size,
            data: &[0; 12],
            record_route: false,
        }
    }

    #[test]
    fn tcp_ack_probes_are_numbered_by_the_rst_they_draw() {
        let mut f = flow(proto::TCP);
        f.vary.tcp_ack = true;
        let (mut b, mut r) = ([0u8; 64], [0u8; 128]);
        let n = build(&mut b, &f, &plain(3, 40)).unwrap();
        let Body::Tcp {
            seq, ack, flags, ..
        } = reply::parse(&b[..n]).unwrap().body
        else {
            panic!("not TCP")
        };
        assert_eq!(
            (seq, ack, flags),
            (0xfff0_0003, 0xfff0_0003, tcp_flags::ACK)
        );
        let rst = |seq| build::Tcp {
            sport: 33435,
            dport: 0x8123,
            seq,
            ack: 0,
            flags: tcp_flags::RST,
            window: 0,
        };
        let number = |f: &Flow, r: &[u8], sent| probe_number(f, &reply::parse(r).unwrap(), 0, sent);
        let m = answer(&mut r, &b[..n], None, &rst(0xfff0_0003));
        assert_eq!(number(&f, &r[..m], 5), Some(3));
        assert_eq!(number(&f, &r[..m], 2), None, "not sent yet");
        let m = answer(&mut r, &b[..n], None, &rst(0x1234_0003));
        assert_eq!(number(&f, &r[..m], 5), None, "another engine's tag");
        // an ICMP error quotes the sequence number
        let m = answer(&mut r, &b[..n], Some(icmp_type::DEST_UNREACH), &rst(0));
        assert_eq!(number(&f, &r[..m], 5), Some(3));
        // -A: the same ack in every probe, a RST with it is the last probe's
        f.vary.fixed_ack = Some(12345);
        let n = build(&mut b, &f, &plain(3, 40)).unwrap();
        assert_eq!(&b[28..32], &12345u32.to_be_bytes());
        let m = answer(&mut r, &b[..n], None, &rst(12345));
        assert_eq!(number(&f, &r[..m], 4), Some(4));
        assert_eq!(number(&f, &r[..m], 0), None);
        let m = answer(&mut r, &b[..n], None, &rst(12346));
        assert_eq!(number(&f, &r[..m], 4), None);
    }

    #[test]
    fn udp_dport_and_icmp_first_seq_vary_per_probe_and_still_match() {
        let mut f = flow(proto::UDP);
        f.vary.dport_counts = true;
        let (mut b, mut r) = ([0u8; 64], [0u8; 128]);
        let n = build(&mut b, &f, &plain(4, 40)).unwrap();
        assert_eq!(&b[22..24], &(33435u16 + 3).to_be_bytes());
        let unreach = Some(icmp_type::DEST_UNREACH);
        let m = answer(&mut r, &b[..n], unreach, &UNUSED);
        let q = reply::parse(&r[..m]).unwrap();
        assert_eq!(probe_number(&f, &q, 0, 4), Some(4));
        // the quote of a probe to another port is not probe 4's
        f.vary.dport_counts = false;
        assert_eq!(probe_number(&f, &q, 0, 4), None);

        let mut f = flow(proto::ICMP);
        f.vary.seq_offset = 99; // `-d 100`
        let n = build(&mut b, &f, &plain(2, 40)).unwrap();
        assert_eq!(&b[26..28], &101u16.to_be_bytes());
        let m = answer(&mut r, &b[..n], unreach, &UNUSED);
        let q = reply::parse(&r[..m]).unwrap();
        assert_eq!(probe_number(&f, &q, 0, 2), Some(2));
        assert_eq!(sent_probe(&b[..n], f.tag), Some((f.key, 2)));
    }

    #[test]
    fn ip_ids_are_never_zero_and_give_the_number_back() {
        for tag in [0, 1, 0x7fff, 0xfffe, 0xffff] {
            for n in [1, 2, 0x8000, 0xfffe, 0xffff] {
                let id = ip_id(tag, n);
                assert_ne!(id, 0, "tag {tag:#x} n {n}");
                assert_eq!(number_of_ip_id(tag, id), Some(n), "tag {tag:#x} n {n}");
            }
            assert_eq!(number_of_ip_id(tag, 0), None);
        }
        assert_eq!(ip_id(0x1000, 1), 0x1001);
    }

    #[test]
    fn sizes_below_headers_are_refused_not_panicking() {
        let mut b = [0u8; 64];
        let p = Probe {
            src: SRC.into(),
            ttl: 5,
            tos: 0,
            number: 7,
            size: 10,
            data: &[],
            record_route: false,
        };
        assert!(build(&mut b, &flow(proto::UDP), &p).is_err());
        assert!(build(&mut b, &flow(proto::ICMP), &p).is_err());
        let p = Probe { size: 1500, ..p };
        assert!(
            build(&mut b, &flow(proto::UDP), &p).is_err(),
            "buffer too small"
        );
    }
}
