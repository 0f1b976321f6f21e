//! IPv6 packets the Linux kernel (6.18) made, captured in namespaces (`tests/data/linux-ipv6/`:
//! a router's time exceeded and a host's port unreachable for UDP probes, an echo reply,
//! a RST): the parser reads what the kernel wrote, and the builders, given the same
//! fields, write the very same bytes (checksums included).
//!
//! Capture: namespaces A (2001:db8:1::1) - R (forwarding) - B (2001:db8:2::2); from A, a
//! UDP datagram from port 40001 to port 33435 with hop limit 1, one to port 33436 with
//! hop limit 64 (12 zero bytes each), an ICMPv6 echo request (ident 0x1234, seq 1, 8 zero
//! bytes) and a TCP SYN to port 80; every IPv6 packet arriving on A's interface taken
//! with an AF_PACKET socket (checksum offload turned off on every veth, ETHTOOL_STXCSUM,
//! so that UDP and TCP carry full checksums rather than CHECKSUM_PARTIAL's pseudo-header
//! sums). The kernel's own MLD report came along: a hop-by-hop header first.

use std::net::{IpAddr, Ipv6Addr};
use std::path::PathBuf;

use vtnt_wire::build::{Echo, IcmpError, Tcp, Udp};
use vtnt_wire::build6::{icmp6_echo, icmp6_error, tcp6, udp6};
use vtnt_wire::ipv6::Ip6;
use vtnt_wire::reply::{self, Body, QuotedTransport};
use vtnt_wire::{icmp6_type, tcp_flags};

const A: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1);
const R: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);
const B: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 2);

fn capture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/linux-ipv6")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn flow_label(p: &[u8]) -> u32 {
    vtnt_wire::ipv6::header(p).unwrap().flow_label
}

/// The header fields of the answer `p` from B (one hop away).
fn from_b(p: &[u8]) -> Ip6 {
    Ip6 {
        src: B,
        dst: A,
        hop_limit: 63,
        traffic_class: 0,
        flow_label: flow_label(p),
    }
}

/// The UDP probe the kernel sent (as the errors quote it).
fn udp_probe(dport: u16, hop_limit: u8, flow_label: u32) -> Vec<u8> {
    let ip = Ip6 {
        src: A,
        dst: B,
        hop_limit,
        traffic_class: 0,
        flow_label,
    };
    let u = Udp {
        sport: 40001,
        dport,
        payload: &[0; 12],
        checksum: None,
    };
    let mut b = vec![0u8; 100];
    let n = udp6(&mut b, &ip, &u).unwrap();
    b.truncate(n);
    b
}

/// The ICMPv6 error `icmp_type`/`code` from `src` (hop limit, flow label) quoting `probe`.
fn error(src: Ipv6Addr, hop_limit: u8, flow_label: u32, t: (u8, u8), probe: &[u8]) -> Vec<u8> {
    let ip = Ip6 {
        src,
        dst: A,
        hop_limit,
        traffic_class: 0,
        flow_label,
    };
    let e = IcmpError {
        icmp_type: t.0,
        code: t.1,
        original: probe,
        quote_len: probe.len(),
        mpls: &[],
    };
    let mut b = vec![0u8; 200];
    let n = icmp6_error(&mut b, &ip, &e).unwrap();
    b.truncate(n);
    b
}

#[test]
fn router_time_exceeded() {
    let p = capture("time_exceeded_udp.bin");
    let r = reply::parse(&p).unwrap();
    assert_eq!((r.src, r.dst), (IpAddr::V6(R), IpAddr::V6(A)));
    assert_eq!((r.ttl, r.ipid, r.len as usize), (64, 0, p.len()));
    let Body::IcmpError {
        icmp_type,
        code,
        quote,
        ext,
        ..
    } = r.body
    else {
        panic!("{r:?}")
    };
    assert_eq!((icmp_type, code, ext), (icmp6_type::TIME_EXCEEDED, 0, None));
    assert_eq!((quote.ttl, quote.ip_len, quote.dst), (1, 60, IpAddr::V6(B)));
    let QuotedTransport::Udp { sport, dport, .. } = quote.transport else {
        panic!("{quote:?}")
    };
    assert_eq!((sport, dport), (40001, 33435));
    // The kernel's automatic flow labels (RFC 6437) of the probe and of the answer.
    let probe = udp_probe(33435, 1, flow_label(&p[48..]));
    assert_eq!(&p[48..], &probe[..], "the quoted probe, rebuilt");
    let t = (icmp6_type::TIME_EXCEEDED, 0);
    assert_eq!(error(R, 64, flow_label(&p), t, &probe), p);
}

#[test]
fn host_port_unreachable() {
    let p = capture("port_unreachable.bin");
    let r = reply::parse(&p).unwrap();
    let Body::IcmpError {
        icmp_type,
        code,
        quote,
        ..
    } = r.body
    else {
        panic!("{r:?}")
    };
    assert_eq!((icmp_type, code, r.ttl), (icmp6_type::DEST_UNREACH, 4, 63));
    assert_eq!(quote.ttl, 63, "the hop limit as it reached the host");
    let probe = udp_probe(33436, 63, flow_label(&p[48..]));
    let t = (icmp6_type::DEST_UNREACH, 4);
    assert_eq!(error(B, 63, flow_label(&p), t, &probe), p);
}

#[test]
fn echo_reply() {
    let p = capture("echo_reply.bin");
    let r = reply::parse(&p).unwrap();
    assert!(matches!(
        r.body,
        Body::Echo {
            icmp_type: icmp6_type::ECHO_REPLY,
            ident: 0x1234,
            seq: 1,
            ..
        }
    ));
    let ip = from_b(&p);
    let e = Echo {
        icmp_type: icmp6_type::ECHO_REPLY,
        ident: 0x1234,
        seq: 1,
        payload: &[0; 8],
        checksum: None,
    };
    let mut b = [0u8; 100];
    let n = icmp6_echo(&mut b, &ip, &e).unwrap();
    assert_eq!(&b[..n], &p[..]);
}

#[test]
fn tcp_rst() {
    let p = capture("tcp_rst.bin");
    let r = reply::parse(&p).unwrap();
    let Body::Tcp {
        sport,
        dport,
        seq,
        ack,
        flags,
    } = r.body
    else {
        panic!("{r:?}")
    };
    assert_eq!((sport, flags), (80, tcp_flags::RST | tcp_flags::ACK));
    let ip = from_b(&p);
    let t = Tcp {
        sport,
        dport,
        seq,
        ack,
        flags,
        window: 0,
    };
    let mut b = [0u8; 100];
    let n = tcp6(&mut b, &ip, &t).unwrap();
    assert_eq!(&b[..n], &p[..]);
}

#[test]
fn hop_by_hop_header_is_skipped() {
    let p = capture("mld_report_hop_by_hop.bin");
    let r = reply::parse(&p).unwrap();
    assert_eq!((r.ttl, r.len as usize), (1, p.len()));
    assert_eq!(
        r.body,
        Body::Other {
            protocol: vtnt_wire::proto::ICMPV6
        }
    );
    let h = vtnt_wire::ipv6::header(&p).unwrap();
    assert_eq!((h.protocol, h.header_len), (58, 48));
}
