//! Hand-made IPv6 packets: what the builders write, read back by [`crate::reply::parse`].
//! (Packets the Linux kernel made: `tests/ipv6_linux.rs`.)

use core::net::{IpAddr, Ipv6Addr};

use super::*;
use crate::mpls::Lse;
use crate::reply::{self, Body, Quote, QuotedTransport};
use crate::{icmp6_type, icmpext};

const IP: Ip6 = Ip6 {
    src: Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1),
    dst: Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 2),
    hop_limit: 2,
    traffic_class: 0,
    flow_label: 0x5_4321,
};

const ROUTER: Ip6 = Ip6 {
    src: Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 0xfe),
    dst: IP.src,
    hop_limit: 64,
    traffic_class: 0,
    flow_label: 0,
};

/// The upper-layer checksum of the IPv6 packet `p` verifies.
fn verifies(p: &[u8]) -> bool {
    let h = ipv6::header(p).unwrap();
    let len = p.len() - HEADER_LEN;
    let ps = checksum::pseudo_v6(h.src, h.dst, h.protocol, len as u32);
    checksum::add(checksum::sum(&p[HEADER_LEN..]), ps) == 0xffff
}

fn echo(seq: u16, pin: Option<u16>) -> Echo<'static> {
    Echo {
        icmp_type: icmp6_type::ECHO_REQUEST,
        ident: 0x1234,
        seq,
        payload: &[0; 16],
        checksum: pin,
    }
}

#[test]
fn echo_request_matches_hand_made_bytes() {
    let mut b = [0xa5u8; 64];
    let e = Echo {
        payload: &[0; 4],
        ..echo(1, None)
    };
    let n = icmp6_echo(&mut b, &IP, &e).unwrap();
    assert_eq!(n, 52);
    assert_eq!(&b[..8], &[0x60, 0x05, 0x43, 0x21, 0, 12, 58, 2]);
    // 128 0 | checksum | 0x1234 | 1 | 0 0 0 0; the checksum over the pseudo-header
    // (both addresses, length 12, next header 58) and the message, computed apart.
    assert_eq!(&b[40..44], &[128, 0, 0x12, 0x0c]);
    assert_eq!(&b[44..52], &[0x12, 0x34, 0, 1, 0, 0, 0, 0]);
    assert!(verifies(&b[..n]));
    assert_eq!(b[52], 0xa5, "nothing written past the packet");
}

#[test]
fn paris_probes_keep_flow_label_ports_and_checksum() {
    let mut b = [0u8; 96];
    for seq in [1u16, 2, 300, 0xffff] {
        let n = icmp6_echo(&mut b, &IP, &echo(seq, Some(0xbeef))).unwrap();
        assert!(verifies(&b[..n]));
        assert_eq!(ipv6::header(&b[..n]).unwrap().flow_label, 0x5_4321);
        let r = reply::parse(&b[..n]).unwrap();
        assert!(matches!(r.body, Body::Echo { checksum: 0xbeef, seq: s, .. } if s == seq));
        let u = Udp {
            sport: 0x8001,
            dport: 33435,
            payload: &[0; 16],
            checksum: Some(seq),
        };
        let n = udp6(&mut b, &IP, &u).unwrap();
        assert!(verifies(&b[..n]));
        assert_eq!(ipv6::header(&b[..n]).unwrap().flow_label, 0x5_4321);
        let r = reply::parse(&b[..n]).unwrap();
        assert!(matches!(
            r.body,
            Body::Udp { sport: 0x8001, dport: 33435, checksum: c, .. } if c == seq
        ));
    }
    let mut m = [0u8; 24];
    m[0] = icmp6_type::ECHO_REQUEST;
    icmp6_echo_checksum(&mut m, &IP, Some(0x4242)).unwrap();
    assert_eq!(&m[2..4], &[0x42, 0x42]);
}

#[test]
fn tcp_syn_over_ipv6_verifies() {
    let mut b = [0u8; 60];
    let t = Tcp {
        sport: 0x8001,
        dport: 80,
        seq: 42,
        ack: 0,
        flags: crate::tcp_flags::SYN,
        window: 5840,
    };
    let n = tcp6(&mut b, &IP, &t).unwrap();
    assert_eq!(n, 60);
    assert!(verifies(&b));
    assert!(matches!(
        reply::parse(&b).unwrap().body,
        Body::Tcp {
            seq: 42,
            flags: 2,
            ..
        }
    ));
}

#[test]
fn time_exceeded_with_labels_uses_icmpv6_length_rules() {
    let mut probe = [0u8; 80];
    let u = Udp {
        sport: 0x8001,
        dport: 33435,
        payload: &[0; 12],
        checksum: Some(7),
    };
    let pn = udp6(&mut probe, &IP, &u).unwrap();
    let stack = [Lse::new(300, 0, false, 1), Lse::new(17, 0, true, 1)];
    let e = IcmpError {
        icmp_type: icmp6_type::TIME_EXCEEDED,
        code: 0,
        original: &probe[..pn],
        quote_len: pn,
        mpls: &stack,
    };
    let mut b = [0u8; 400];
    let n = icmp6_error(&mut b, &ROUTER, &e).unwrap();
    assert_eq!(n, 40 + 8 + 128 + 16);
    assert_eq!((b[44], b[45]), (128 / 8, 0), "length: byte 4, 64-bit words");
    assert!(verifies(&b[..n]));
    let r = reply::parse(&b[..n]).unwrap();
    assert_eq!(r.src, IpAddr::V6(ROUTER.src));
    let Body::IcmpError {
        icmp_type,
        quote,
        ext,
        ..
    } = r.body
    else {
        panic!("{r:?}")
    };
    assert_eq!(icmp_type, icmp6_type::TIME_EXCEEDED);
    assert_eq!((quote.ttl, quote.ip_len, quote.ipid), (2, 60, 0));
    assert_eq!(quote.dst, IpAddr::V6(IP.dst));
    assert_eq!(ipv6::header(&b[48..n]).unwrap().flow_label, 0x5_4321);
    assert_eq!(
        quote.transport,
        QuotedTransport::Udp {
            sport: 0x8001,
            dport: 33435,
            checksum: 7
        }
    );
    assert!(ext.unwrap().mpls_stack().eq(stack.iter().copied()));
}

#[test]
fn long_quotes_pad_to_eight_bytes_and_stay_within_the_minimum_mtu() {
    let original = [0x60u8; 1500];
    let stack = [Lse::new(16, 0, true, 1)];
    let mut e = IcmpError {
        icmp_type: icmp6_type::TIME_EXCEEDED,
        code: 0,
        original: &original,
        quote_len: 132,
        mpls: &stack,
    };
    let mut b = [0u8; 1400];
    let n = icmp6_error(&mut b, &ROUTER, &e).unwrap();
    assert_eq!(n, 40 + 8 + 136 + 12, "132 bytes padded to 136");
    assert_eq!(b[44], 17);
    assert!(icmpext::find_v6(&b[40..n]).is_some());
    // ICMPv4's rule (byte 5, here 0: the structure at 128) does not find it.
    assert!(icmpext::find(&b[40..n]).is_none());
    e.quote_len = MIN_MTU - HEADER_LEN - 8;
    e.mpls = &[];
    assert_eq!(icmp6_error(&mut b, &ROUTER, &e), Ok(MIN_MTU));
    e.quote_len += 1;
    assert_eq!(icmp6_error(&mut b, &ROUTER, &e), Err(Error::Malformed));
}

#[test]
fn packet_too_big_mtu_and_garbage() {
    let mut probe = [0u8; 80];
    let pn = icmp6_echo(&mut probe, &IP, &echo(3, None)).unwrap();
    let e = IcmpError {
        icmp_type: icmp6_type::PACKET_TOO_BIG,
        code: 0,
        original: &probe[..pn],
        quote_len: pn,
        mpls: &[],
    };
    let mut b = [0u8; 200];
    let n = icmp6_error(&mut b, &ROUTER, &e).unwrap();
    b[44..48].copy_from_slice(&1280u32.to_be_bytes());
    let r = reply::parse(&b[..n]).unwrap();
    assert!(matches!(
        r.body,
        Body::IcmpError {
            icmp_type: icmp6_type::PACKET_TOO_BIG,
            nhmtu: 1280,
            ext: None,
            quote: Quote {
                transport: QuotedTransport::Icmp { seq: 3, .. },
                ..
            },
            ..
        }
    ));
    b[44..48].copy_from_slice(&90_000_u32.to_be_bytes());
    assert!(matches!(
        reply::parse(&b[..n]).unwrap().body,
        Body::IcmpError {
            nhmtu: u16::MAX,
            ..
        }
    ));
    for cut in 0..n {
        let _ = reply::parse(&b[..cut]);
    }
    assert_eq!(reply::parse(&b[..n - 1]), Err(Error::Truncated));
    assert_eq!(reply::parse(&b[..45]), Err(Error::Truncated));
}
