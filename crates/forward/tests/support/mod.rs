//! Packets for the forwarder's tests and its seed corpus, built by `vtnt-wire`: probes as
//! the engine builds them, and what the network answers to them.

#![allow(dead_code)]

use std::net::Ipv4Addr;

use vtnt_wire::build::{self, Ip};
use vtnt_wire::mpls::Lse;
use vtnt_wire::reply::{self, Body};
use vtnt_wire::{icmp_type, proto, tcp_flags};

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
