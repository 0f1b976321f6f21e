//! Packets for the forwarder's tests and its seed corpus, built by `vtnt-wire`: probes as
//! the engine builds them, and what the network answers to them, over IPv4 and IPv6.

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vtnt_wire::build::{self, Ip};
use vtnt_wire::build6;
use vtnt_wire::ipv6::Ip6;
use vtnt_wire::mpls::Lse;
use vtnt_wire::reply::{self, Body};
use vtnt_wire::{icmp6_type, icmp_type, proto, tcp_flags};

pub const ROUTER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    IcmpParis,
    IcmpPlain,
    Udp,
    Tcp,
}

impl Method {
    pub fn proto(self) -> u8 {
        match self {
            Method::IcmpParis | Method::IcmpPlain => proto::ICMP,
            Method::Udp => proto::UDP,
            Method::Tcp => proto::TCP,
        }
    }
}

/// An IP header of either family, as the builders take it.
#[derive(Debug, Clone, Copy)]
enum Hdr {
    V4(Ip),
    V6(Ip6),
}

impl Hdr {
    /// The same header from `src` (of its family).
    fn from(self, src: IpAddr) -> Hdr {
        match (self, src) {
            (Hdr::V4(ip), IpAddr::V4(src)) => Hdr::V4(Ip { src, ..ip }),
            (Hdr::V6(ip), IpAddr::V6(src)) => Hdr::V6(Ip6 { src, ..ip }),
            _ => unreachable!("one family"),
        }
    }

    /// What differs between ICMP and ICMPv6: echo request, echo reply, time exceeded,
    /// destination unreachable and its port unreachable code.
    fn icmp(self) -> [u8; 5] {
        match self {
            Hdr::V4(_) => [
                icmp_type::ECHO_REQUEST,
                icmp_type::ECHO_REPLY,
                icmp_type::TIME_EXCEEDED,
                icmp_type::DEST_UNREACH,
                3,
            ],
            Hdr::V6(_) => [
                icmp6_type::ECHO_REQUEST,
                icmp6_type::ECHO_REPLY,
                icmp6_type::TIME_EXCEEDED,
                icmp6_type::DEST_UNREACH,
                4,
            ],
        }
    }

    fn echo(self, e: &build::Echo) -> Vec<u8> {
        self.build(|b| match self {
            Hdr::V4(ip) => build::icmp_echo(b, &ip, e),
            Hdr::V6(ip) => build6::icmp6_echo(b, &ip, e),
        })
    }

    fn udp(self, u: &build::Udp) -> Vec<u8> {
        self.build(|b| match self {
            Hdr::V4(ip) => build::udp(b, &ip, u),
            Hdr::V6(ip) => build6::udp6(b, &ip, u),
        })
    }

    fn tcp(self, t: &build::Tcp) -> Vec<u8> {
        self.build(|b| match self {
            Hdr::V4(ip) => build::tcp(b, &ip, t),
            Hdr::V6(ip) => build6::tcp6(b, &ip, t),
        })
    }

    fn error(self, e: &build::IcmpError) -> Vec<u8> {
        self.build(|b| match self {
            Hdr::V4(ip) => build::icmp_error(b, &ip, e),
            Hdr::V6(ip) => build6::icmp6_error(b, &ip, e),
        })
    }

    fn build(self, f: impl FnOnce(&mut [u8]) -> vtnt_wire::Result<usize>) -> Vec<u8> {
        let mut b = vec![0u8; 1280];
        let n = f(&mut b).unwrap();
        b.truncate(n);
        b
    }
}

/// Probe `number` of a flow, as an engine builds it.
pub fn probe(m: Method, src: Ipv4Addr, dst: Ipv4Addr, id: u16, ttl: u8, number: u16) -> Vec<u8> {
    let ip = Ip {
        src,
        dst,
        ttl,
        tos: 0x10,
        ipid: number.wrapping_mul(7).wrapping_add(1),
    };
    probe_of(m, Hdr::V4(ip), id, number)
}

pub const ROUTER6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x51, 0, 0, 0, 0, 1);
/// The flow label of every IPv6 probe (a Paris trace keeps it constant).
pub const FLOW_LABEL: u32 = 0x5_eed6;

/// [`probe`] over IPv6: hop limit `hop_limit`, traffic class 0x10, [`FLOW_LABEL`].
pub fn probe6(
    m: Method,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    id: u16,
    hop_limit: u8,
    number: u16,
) -> Vec<u8> {
    let ip = Ip6 {
        src,
        dst,
        hop_limit,
        traffic_class: 0x10,
        flow_label: FLOW_LABEL,
    };
    probe_of(m, Hdr::V6(ip), id, number)
}

fn probe_of(m: Method, ip: Hdr, id: u16, number: u16) -> Vec<u8> {
    match m {
        Method::IcmpParis | Method::IcmpPlain => ip.echo(&build::Echo {
            icmp_type: ip.icmp()[0],
            ident: id,
            seq: number,
            payload: &[0xab; 16],
            checksum: (m == Method::IcmpParis).then_some(0x4242),
        }),
        Method::Udp => ip.udp(&build::Udp {
            sport: id,
            dport: 33435,
            payload: &[0; 12],
            checksum: Some(number),
        }),
        Method::Tcp => ip.tcp(&build::Tcp {
            sport: id,
            dport: 80,
            seq: 0x5eed_0000 | u32::from(number),
            ack: 0,
            flags: tcp_flags::SYN,
            window: 5840,
        }),
    }
}

/// The replies the network sends to `probe` (as it left), addressed to its source:
/// time exceeded quoting 28 bytes, the whole probe, 128 bytes with a label stack, or 28
/// bytes padded to 128 with a label stack, and the destination's answer (for UDP both a
/// port unreachable and a UDP answer).
pub fn replies(probe: &[u8], ipid: u16) -> Vec<Vec<u8>> {
    let p = reply::parse(probe).unwrap();
    let (IpAddr::V4(to), IpAddr::V4(dst)) = (p.src, p.dst) else {
        unreachable!()
    };
    let router = Ip {
        src: ROUTER,
        dst: to,
        ttl: 250,
        tos: 0xc0,
        ipid,
    };
    replies_of(probe, Hdr::V4(router), dst.into())
}

/// [`replies`] over IPv6: time exceeded quoting 48 bytes, the whole probe, 128 bytes
/// with a label stack, 48 bytes padded to 128 with a label stack; packet too big; the
/// destination's answer (for UDP a port unreachable and a UDP answer too).
pub fn replies6(probe: &[u8]) -> Vec<Vec<u8>> {
    let p = vtnt_wire::reply6::parse(probe).unwrap();
    let (IpAddr::V6(to), IpAddr::V6(dst)) = (p.src, p.dst) else {
        unreachable!()
    };
    let router = Ip6 {
        src: ROUTER6,
        dst: to,
        hop_limit: 250,
        traffic_class: 0xc0,
        flow_label: 0,
    };
    replies_of(probe, Hdr::V6(router), dst.into())
}

/// [`replies`] or [`replies6`], by the probe's IP version.
pub fn replies_any(probe: &[u8], ipid: u16) -> Vec<Vec<u8>> {
    if probe[0] >> 4 == 6 {
        replies6(probe)
    } else {
        replies(probe, ipid)
    }
}

/// The replies to `probe` from `router` and from `dst`, the probe's destination.
fn replies_of(probe: &[u8], router: Hdr, dst: IpAddr) -> Vec<Vec<u8>> {
    let p = reply::parse(probe).unwrap();
    let host = router.from(dst);
    let [_, echo_reply, time_exceeded, unreach, port_unreach] = router.icmp();
    // A router quotes the probe with the TTL (hop limit) it had there; an IPv4 header
    // checksum left stale. It quotes the header and 8 bytes at least.
    let (ttl_at, short, whole) = match router {
        Hdr::V4(_) => (8, 28, 576),
        Hdr::V6(_) => (7, 48, 1232),
    };
    let mut expired = probe.to_vec();
    expired[ttl_at] = 1;
    let stack = [Lse::new(24001, 0, false, 1), Lse::new(16, 5, true, 1)];
    let error = |ip: Hdr, t: u8, code: u8, original: &[u8], quote_len: usize, mpls: &[Lse]| {
        ip.error(&build::IcmpError {
            icmp_type: t,
            code,
            original,
            quote_len,
            mpls,
        })
    };
    let mut out = vec![
        error(router, time_exceeded, 0, &expired, short, &[]),
        error(router, time_exceeded, 0, &expired, whole, &[]),
        error(router, time_exceeded, 0, &expired, 128, &stack),
        // the header and 8 bytes quoted, zero-padded to RFC 4884's 128 before the labels
        error(router, time_exceeded, 0, &expired[..short], 128, &stack),
    ];
    if let Hdr::V6(_) = router {
        out.push(error(
            router,
            icmp6_type::PACKET_TOO_BIG,
            0,
            probe,
            whole,
            &[],
        ));
    }
    let answer = match p.body {
        Body::Echo {
            ident,
            seq,
            payload,
            ..
        } => host.echo(&build::Echo {
            icmp_type: echo_reply,
            ident,
            seq,
            payload,
            checksum: None,
        }),
        Body::Udp { sport, dport, .. } => {
            out.push(error(host, unreach, port_unreach, probe, whole, &[]));
            host.udp(&build::Udp {
                sport: dport,
                dport: sport,
                payload: b"answer",
                checksum: None,
            })
        }
        Body::Tcp {
            sport, dport, seq, ..
        } => host.tcp(&build::Tcp {
            sport: dport,
            dport: sport,
            seq: 0,
            ack: seq.wrapping_add(1),
            flags: tcp_flags::RST | tcp_flags::ACK,
            window: 0,
        }),
        other => panic!("not a probe: {other:?}"),
    };
    out.push(answer);
    out
}
