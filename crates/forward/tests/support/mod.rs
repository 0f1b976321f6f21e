//! Packets for the forwarder's tests and its seed corpus, built by `vtnt-wire`: probes as
//! the engine builds them, and what the network answers to them, over IPv4 and IPv6.

#![allow(dead_code)]

use std::net::Ipv4Addr;

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

/// Probe `number` of a flow, as an engine builds it.
pub fn probe(m: Method, src: Ipv4Addr, dst: Ipv4Addr, id: u16, ttl: u8, number: u16) -> Vec<u8> {
    let ip = Ip {
        src,
        dst,
        ttl,
        tos: 0x10,
        ipid: number.wrapping_mul(7).wrapping_add(1),
    };
    let mut b = vec![0u8; 128];
    let n = match m {
        Method::IcmpParis | Method::IcmpPlain => build::icmp_echo(
            &mut b,
            &ip,
            &build::Echo {
                icmp_type: icmp_type::ECHO_REQUEST,
                ident: id,
                seq: number,
                payload: &[0xab; 16],
                checksum: (m == Method::IcmpParis).then_some(0x4242),
            },
        ),
        Method::Udp => build::udp(
            &mut b,
            &ip,
            &build::Udp {
                sport: id,
                dport: 33435,
                payload: &[0; 12],
                checksum: Some(number),
            },
        ),
        Method::Tcp => build::tcp(
            &mut b,
            &ip,
            &build::Tcp {
                sport: id,
                dport: 80,
                seq: 0x5eed_0000 | u32::from(number),
                ack: 0,
                flags: tcp_flags::SYN,
                window: 5840,
            },
        ),
    }
    .unwrap();
    b.truncate(n);
    b
}

/// The replies the network sends to `probe` (as it left), addressed to its source:
/// time exceeded quoting 28 bytes, the whole probe, 128 bytes with a label stack, or 28
/// bytes padded to 128 with a label stack, and the destination's answer (for UDP both a
/// port unreachable and a UDP answer).
pub fn replies(probe: &[u8], ipid: u16) -> Vec<Vec<u8>> {
    let p = reply::parse(probe).unwrap();
    let std::net::IpAddr::V4(to) = p.src else {
        unreachable!()
    };
    let std::net::IpAddr::V4(dst) = p.dst else {
        unreachable!()
    };
    let router = Ip {
        src: ROUTER,
        dst: to,
        ttl: 250,
        tos: 0xc0,
        ipid,
    };
    let host = Ip { src: dst, ..router };
    // A router quotes the probe with the TTL it had there, its checksum left stale.
    let mut expired = probe.to_vec();
    expired[8] = 1;
    let stack = [Lse::new(24001, 0, false, 1), Lse::new(16, 5, true, 1)];
    let error = |ip: &Ip, t: u8, code: u8, quoted: &[u8], quote_len: usize, mpls: &[Lse]| {
        let mut b = vec![0u8; 600];
        let n = build::icmp_error(
            &mut b,
            ip,
            &build::IcmpError {
                icmp_type: t,
                code,
                original: quoted,
                quote_len,
                mpls,
            },
        )
        .unwrap();
        b.truncate(n);
        b
    };
    let mut out = vec![
        error(&router, icmp_type::TIME_EXCEEDED, 0, &expired, 28, &[]),
        error(&router, icmp_type::TIME_EXCEEDED, 0, &expired, 576, &[]),
        error(&router, icmp_type::TIME_EXCEEDED, 0, &expired, 128, &stack),
        // 28 bytes quoted, zero-padded to RFC 4884's 128 before the labels.
        error(
            &router,
            icmp_type::TIME_EXCEEDED,
            0,
            &expired[..28],
            128,
            &stack,
        ),
    ];
    let mut b = vec![0u8; 600];
    let n = match p.body {
        Body::Echo {
            ident,
            seq,
            payload,
            ..
        } => build::icmp_echo(
            &mut b,
            &host,
            &build::Echo {
                icmp_type: icmp_type::ECHO_REPLY,
                ident,
                seq,
                payload,
                checksum: None,
            },
        )
        .unwrap(),
        Body::Udp { sport, dport, .. } => {
            out.push(error(&host, icmp_type::DEST_UNREACH, 3, probe, 576, &[]));
            build::udp(
                &mut b,
                &host,
                &build::Udp {
                    sport: dport,
                    dport: sport,
                    payload: b"answer",
                    checksum: None,
                },
            )
            .unwrap()
        }
        Body::Tcp {
            sport, dport, seq, ..
        } => build::tcp(
            &mut b,
            &host,
            &build::Tcp {
                sport: dport,
                dport: sport,
                seq: 0,
                ack: seq.wrapping_add(1),
                flags: tcp_flags::RST | tcp_flags::ACK,
                window: 0,
            },
        )
        .unwrap(),
        other => panic!("not a probe: {other:?}"),
    };
    b.truncate(n);
    out.push(b);
    out
}

pub const ROUTER6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0x2001, 0xdb8, 0x51, 0, 0, 0, 0, 1);
/// The flow label of every IPv6 probe (a Paris trace keeps it constant).
pub const FLOW_LABEL: u32 = 0x5_eed6;

/// [`probe`] over IPv6: hop limit `hop_limit`, traffic class 0x10, [`FLOW_LABEL`].
pub fn probe6(
    m: Method,
    src: std::net::Ipv6Addr,
    dst: std::net::Ipv6Addr,
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
    let mut b = vec![0u8; 128];
    let n = match m {
        Method::IcmpParis | Method::IcmpPlain => build6::icmp6_echo(
            &mut b,
            &ip,
            &build::Echo {
                icmp_type: icmp6_type::ECHO_REQUEST,
                ident: id,
                seq: number,
                payload: &[0xab; 16],
                checksum: (m == Method::IcmpParis).then_some(0x4242),
            },
        ),
        Method::Udp => build6::udp6(
            &mut b,
            &ip,
            &build::Udp {
                sport: id,
                dport: 33435,
                payload: &[0; 12],
                checksum: Some(number.max(1)),
            },
        ),
        Method::Tcp => build6::tcp6(
            &mut b,
            &ip,
            &build::Tcp {
                sport: id,
                dport: 80,
                seq: 0x5eed_0000 | u32::from(number),
                ack: 0,
                flags: tcp_flags::SYN,
                window: 5840,
            },
        ),
    }
    .unwrap();
    b.truncate(n);
    b
}

/// [`replies`] over IPv6: time exceeded quoting 48 bytes, the whole probe, 128 bytes
/// with a label stack, 48 bytes padded to 128 with a label stack; packet too big; the
/// destination's answer (for UDP a port unreachable and a UDP answer too).
pub fn replies6(probe: &[u8]) -> Vec<Vec<u8>> {
    let p = vtnt_wire::reply6::parse(probe).unwrap();
    let std::net::IpAddr::V6(to) = p.src else {
        unreachable!()
    };
    let std::net::IpAddr::V6(dst) = p.dst else {
        unreachable!()
    };
    let router = Ip6 {
        src: ROUTER6,
        dst: to,
        hop_limit: 250,
        traffic_class: 0xc0,
        flow_label: 0,
    };
    let host = Ip6 { src: dst, ..router };
    // A router quotes the probe with the hop limit it had there.
    let mut expired = probe.to_vec();
    expired[7] = 1;
    let stack = [Lse::new(24001, 0, false, 1), Lse::new(16, 5, true, 1)];
    let error = |ip: &Ip6, t: u8, code: u8, quoted: &[u8], quote_len: usize, mpls: &[Lse]| {
        let mut b = vec![0u8; 1280];
        let n = build6::icmp6_error(
            &mut b,
            ip,
            &build::IcmpError {
                icmp_type: t,
                code,
                original: quoted,
                quote_len,
                mpls,
            },
        )
        .unwrap();
        b.truncate(n);
        b
    };
    let te = icmp6_type::TIME_EXCEEDED;
    let mut out = vec![
        error(&router, te, 0, &expired, 48, &[]),
        error(&router, te, 0, &expired, 1232, &[]),
        error(&router, te, 0, &expired, 128, &stack),
        // 48 bytes quoted, zero-padded to RFC 4884's 128 before the labels.
        error(&router, te, 0, &expired[..48], 128, &stack),
        error(&router, icmp6_type::PACKET_TOO_BIG, 0, probe, 1232, &[]),
    ];
    let mut b = vec![0u8; 1280];
    let n = match p.body {
        Body::Echo {
            ident,
            seq,
            payload,
            ..
        } => build6::icmp6_echo(
            &mut b,
            &host,
            &build::Echo {
                icmp_type: icmp6_type::ECHO_REPLY,
                ident,
                seq,
                payload,
                checksum: None,
            },
        )
        .unwrap(),
        Body::Udp { sport, dport, .. } => {
            out.push(error(&host, icmp6_type::DEST_UNREACH, 4, probe, 1232, &[]));
            build6::udp6(
                &mut b,
                &host,
                &build::Udp {
                    sport: dport,
                    dport: sport,
                    payload: b"answer",
                    checksum: None,
                },
            )
            .unwrap()
        }
        Body::Tcp {
            sport, dport, seq, ..
        } => build6::tcp6(
            &mut b,
            &host,
            &build::Tcp {
                sport: dport,
                dport: sport,
                seq: 0,
                ack: seq.wrapping_add(1),
                flags: tcp_flags::RST | tcp_flags::ACK,
                window: 0,
            },
        )
        .unwrap(),
        other => panic!("not a probe: {other:?}"),
    };
    b.truncate(n);
    out.push(b);
    out
}

/// [`replies`] or [`replies6`], by the probe's IP version.
pub fn replies_any(probe: &[u8], ipid: u16) -> Vec<Vec<u8>> {
    if probe[0] >> 4 == 6 {
        replies6(probe)
    } else {
        replies(probe, ipid)
    }
}
