//! Every file of the fuzz seed corpora runs through the same function as its fuzz target.
//! `write_seed_corpus` (ignored) rewrites the seeds from the builders.

#[path = "../fuzz/body.rs"]
mod body;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use vtnt_wire::build::{self, Ip};
use vtnt_wire::build6;
use vtnt_wire::ipv6::Ip6;
use vtnt_wire::mpls::Lse;

fn dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn run(target: &str, f: fn(&[u8])) {
    let mut n = 0;
    for entry in std::fs::read_dir(dir(target)).expect("corpus directory") {
        f(&std::fs::read(entry.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= 3, "{target}: {n} seed files");
}

#[test]
fn reply_parse_corpus() {
    run("reply_parse", body::reply_parse);
}

#[test]
fn icmpext_find_corpus() {
    run("icmpext_find", body::icmpext_find);
}

#[test]
fn reassembly_push_corpus() {
    run("reassembly_push", body::reassembly_push);
}

/// An ICMPv6 time exceeded with `stack` quoting a UDP probe over IPv6 (flow label set).
fn v6_time_exceeded(stack: &[Lse]) -> Vec<u8> {
    let src: Ipv6Addr = "2001:db8:1::1".parse().unwrap();
    let probe_ip = Ip6 {
        src,
        dst: "2001:db8:2::7".parse().unwrap(),
        hop_limit: 3,
        traffic_class: 0,
        flow_label: 0x8_1234,
    };
    let u = build::Udp {
        sport: 0x8123,
        dport: 33435,
        payload: &[0; 16],
        checksum: Some(3),
    };
    let mut probe = [0u8; 80];
    let pn = build6::udp6(&mut probe, &probe_ip, &u).unwrap();
    let router = Ip6 {
        src: "2001:db8:1::fe".parse().unwrap(),
        dst: src,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    };
    let e = build::IcmpError {
        icmp_type: vtnt_wire::icmp6_type::TIME_EXCEEDED,
        code: 0,
        original: &probe[..pn],
        quote_len: pn,
        mpls: stack,
    };
    let mut b = [0u8; 400];
    let n = build6::icmp6_error(&mut b, &router, &e).unwrap();
    b[..n].to_vec()
}

#[test]
#[ignore]
fn write_seed_corpus() {
    let src = Ipv4Addr::new(192, 0, 2, 1);
    let probe_ip = Ip {
        src,
        dst: Ipv4Addr::new(203, 0, 113, 7),
        ttl: 3,
        tos: 0,
        ipid: 9,
    };
    let router = Ip {
        src: Ipv4Addr::new(198, 51, 100, 1),
        dst: src,
        ttl: 250,
        tos: 0,
        ipid: 1,
    };
    let mut probe = [0u8; 64];
    let pn = build::icmp_echo(
        &mut probe,
        &probe_ip,
        &build::Echo {
            icmp_type: 8,
            ident: 0x8123,
            seq: 3,
            payload: &[0; 16],
            checksum: Some(0x4242),
        },
    )
    .unwrap();
    let mut udp = [0u8; 64];
    let un = build::udp(
        &mut udp,
        &probe_ip,
        &build::Udp {
            sport: 0x8123,
            dport: 33435,
            payload: &[0; 16],
            checksum: Some(3),
        },
    )
    .unwrap();
    let mut b = [0u8; 400];
    let mut seeds: Vec<(&str, Vec<u8>)> = Vec::new();
    let n = build::icmp_error(
        &mut b,
        &router,
        &build::IcmpError {
            icmp_type: 11,
            code: 0,
            original: &probe[..pn],
            quote_len: 28,
            mpls: &[],
        },
    )
    .unwrap();
    seeds.push(("te_icmp", b[..n].to_vec()));
    let stack = [Lse::new(24001, 0, false, 1), Lse::new(16, 0, true, 1)];
    let n = build::icmp_error(
        &mut b,
        &router,
        &build::IcmpError {
            icmp_type: 11,
            code: 0,
            original: &probe[..pn],
            quote_len: 28,
            mpls: &stack,
        },
    )
    .unwrap();
    let te_mpls = b[..n].to_vec();
    seeds.push(("te_mpls", te_mpls.clone()));
    let n = build::icmp_error(
        &mut b,
        &router,
        &build::IcmpError {
            icmp_type: 3,
            code: 3,
            original: &udp[..un],
            quote_len: 28,
            mpls: &[],
        },
    )
    .unwrap();
    seeds.push(("port_unreach", b[..n].to_vec()));
    let n = build::icmp_echo(
        &mut b,
        &router,
        &build::Echo {
            icmp_type: 0,
            ident: 0x8123,
            seq: 3,
            payload: &[1, 2, 3],
            checksum: None,
        },
    )
    .unwrap();
    seeds.push(("echo_reply", b[..n].to_vec()));
    // an echo reply with a record route option holding two addresses, and the same with
    // a malformed option (pointer off a boundary, length past the header)
    let n = vtnt_wire::ipopt::insert_record_route(&mut b, n).unwrap();
    b[22] = 12;
    b[23..27].copy_from_slice(&[10, 0, 0, 1]);
    b[27..31].copy_from_slice(&[10, 0, 1, 1]);
    seeds.push(("echo_reply_rr", b[..n].to_vec()));
    b[22] = 13;
    b[21] = 200;
    seeds.push(("echo_reply_bad_rr", b[..n].to_vec()));
    let t = build::Tcp {
        sport: 80,
        dport: 0x8123,
        seq: 0,
        ack: 4,
        flags: 0x14,
        window: 0,
    };
    let n = build::tcp(&mut b, &router, &t).unwrap();
    seeds.push(("tcp_rst", b[..n].to_vec()));
    seeds.push(("udp_probe", udp[..un].to_vec()));
    let te_mpls_v6 = v6_time_exceeded(&stack);
    seeds.push(("v6_te_mpls", te_mpls_v6.clone()));
    std::fs::create_dir_all(dir("reply_parse")).unwrap();
    for (name, s) in &seeds {
        std::fs::write(dir("reply_parse").join(name), s).unwrap();
    }
    // icmpext_find takes the ICMP message (after the 20-byte IP header).
    std::fs::create_dir_all(dir("icmpext_find")).unwrap();
    let icmp = &te_mpls[20..];
    std::fs::write(dir("icmpext_find").join("rfc4884_length"), icmp).unwrap();
    let mut legacy = icmp.to_vec();
    legacy[5] = 0; // pre-RFC 4884: no length, extension at byte 128 of the quote
    std::fs::write(dir("icmpext_find").join("legacy_at_128"), &legacy).unwrap();
    let mut nosum = icmp.to_vec();
    let ext = 8 + 128;
    nosum[ext + 2..ext + 4].fill(0); // checksum "not computed"
    std::fs::write(dir("icmpext_find").join("zero_checksum"), &nosum).unwrap();
    // ICMPv6's length: byte 4, in 64-bit words
    let icmp6 = &te_mpls_v6[40..];
    std::fs::write(dir("icmpext_find").join("v6_rfc4884_length"), icmp6).unwrap();
    // reassembly_push takes a run of packets (length, time step, bytes): a 3,000-byte
    // UDP datagram in three fragments, in order, backwards, and with one lost then a
    // second datagram
    std::fs::create_dir_all(dir("reassembly_push")).unwrap();
    let frags = |id: u8| -> Vec<Vec<u8>> {
        (0..3u16)
            .map(|i| {
                let len: u16 = if i < 2 { 1480 } else { 3008 - 2960 };
                let word = (i * 185) | if i < 2 { 0x2000 } else { 0 };
                let mut p = vec![0x45, 0, 0, 0, 0, id, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1];
                p.extend_from_slice(&[10, 0, 0, 2]);
                p[2..4].copy_from_slice(&(20 + len).to_be_bytes());
                p[6..8].copy_from_slice(&word.to_be_bytes());
                let sum = vtnt_wire::checksum::of(&p);
                p[10..12].copy_from_slice(&sum.to_be_bytes());
                p.extend((0..len).map(|b| b as u8));
                p
            })
            .collect()
    };
    let run_of = |packets: &[&Vec<u8>]| -> Vec<u8> {
        let mut out = Vec::new();
        for p in packets {
            out.extend_from_slice(&(p.len() as u16).to_be_bytes());
            out.push(1);
            out.extend_from_slice(p);
        }
        out
    };
    let (a, b) = (frags(1), frags(2));
    let runs = [
        ("in_order", run_of(&[&a[0], &a[1], &a[2]])),
        ("backwards", run_of(&[&a[2], &a[1], &a[0]])),
        (
            "one_lost",
            run_of(&[&a[0], &a[2], &b[0], &b[1], &b[2], &a[1]]),
        ),
    ];
    for (name, s) in &runs {
        std::fs::write(dir("reassembly_push").join(name), s).unwrap();
    }
}
