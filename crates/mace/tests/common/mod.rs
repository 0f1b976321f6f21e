//! Packets for the pairing tests: probes of each kind and the replies they draw, built
//! with `vtnt-wire`'s builders as the engine and the lab build them.

use std::net::Ipv4Addr;

use vtnt_wire::build::{self, Echo, IcmpError, Ip, Tcp, Udp};
use vtnt_wire::{icmp_type, tcp_flags};

pub const VP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const TARGET: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 9);
pub const ROUTER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);

/// A probe's kind and the number that tells it from the others of its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Icmp(u16),
    Udp(u16),
    TcpSyn(u32),
    TcpAck(u32),
}

fn ip(src: Ipv4Addr, dst: Ipv4Addr, ipid: u16) -> Ip {
    Ip {
        src,
        dst,
        ttl: 5,
        tos: 0,
        ipid,
    }
}

pub fn probe(kind: Kind) -> Vec<u8> {
    let mut b = vec![0; 128];
    let ip = ip(VP, TARGET, 7);
    let n = match kind {
        Kind::Icmp(seq) => {
            let e = Echo {
                icmp_type: icmp_type::ECHO_REQUEST,
                ident: 0x1234,
                seq,
                payload: &[0; 8],
                checksum: None,
            };
            build::icmp_echo(&mut b, &ip, &e)
        }
        Kind::Udp(n) => {
            let u = Udp {
                sport: 40000,
                dport: 33435,
                payload: &[0; 8],
                checksum: Some(n | 1),
            };
            build::udp(&mut b, &ip, &u)
        }
        Kind::TcpSyn(seq) => build::tcp(&mut b, &ip, &tcp(seq, 0, tcp_flags::SYN)),
        Kind::TcpAck(ack) => build::tcp(&mut b, &ip, &tcp(ack ^ 0x5555, ack, tcp_flags::ACK)),
    }
    .expect("probe builds");
    b.truncate(n);
    b
}

fn tcp(seq: u32, ack: u32, flags: u8) -> Tcp {
    Tcp {
        sport: 40001,
        dport: 80,
        seq,
        ack,
        flags,
        window: 1024,
    }
}

/// The target's own answer to `kind` (echo reply, SYN-ACK, RST), or a router's time
/// exceeded quoting the probe when `from_router`.
pub fn reply(kind: Kind, from_router: bool) -> Vec<u8> {
    let mut b = vec![0; 256];
    let n = if from_router {
        let original = probe(kind);
        let e = IcmpError {
            icmp_type: icmp_type::TIME_EXCEEDED,
            code: 0,
            original: &original,
            quote_len: 28,
            mpls: &[],
        };
        build::icmp_error(&mut b, &ip(ROUTER, VP, 99), &e)
    } else {
        let ip = ip(TARGET, VP, 99);
        match kind {
            Kind::Icmp(seq) => {
                let e = Echo {
                    icmp_type: icmp_type::ECHO_REPLY,
                    ident: 0x1234,
                    seq,
                    payload: &[0; 8],
                    checksum: None,
                };
                build::icmp_echo(&mut b, &ip, &e)
            }
            Kind::Udp(_) => {
                let original = probe(kind);
                let e = IcmpError {
                    icmp_type: icmp_type::DEST_UNREACH,
                    code: 3,
                    original: &original,
                    quote_len: 28,
                    mpls: &[],
                };
                build::icmp_error(&mut b, &ip, &e)
            }
            Kind::TcpSyn(seq) => build::tcp(
                &mut b,
                &ip,
                &Tcp {
                    sport: 80,
                    dport: 40001,
                    seq: 5,
                    ack: seq.wrapping_add(1),
                    flags: tcp_flags::SYN | tcp_flags::ACK,
                    window: 1,
                },
            ),
            Kind::TcpAck(ack) => build::tcp(
                &mut b,
                &ip,
                &Tcp {
                    sport: 80,
                    dport: 40001,
                    seq: ack,
                    ack: 0,
                    flags: tcp_flags::RST,
                    window: 0,
                },
            ),
        }
    }
    .expect("reply builds");
    b.truncate(n);
    b
}
