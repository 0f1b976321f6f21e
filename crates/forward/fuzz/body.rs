//! What the `forward_packet` fuzz target does with one input, shared with the corpus test
//! (`crates/forward/tests/fuzz_corpus.rs`) so every corpus file also runs under `cargo test`.
//!
//! The forwarder is built deterministically with three instances (two on one private
//! address, the third dual stack) and live mappings of each protocol over IPv4 and IPv6,
//! one of them moved by a conflict, so that
//! inputs derived from real replies (the seed corpus) reach the rewriting code. Input: a
//! sequence of records `[kind][u16 length][bytes]` (a short record takes what is left):
//! an even kind comes from upstream, an odd one from instance `(kind >> 1) % 4` (the
//! fourth is no instance).

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use vtnt_forward::{Config, Forwarder, InstanceId};
use vtnt_record::Instant;
use vtnt_wire::{checksum, reply};

/// Probes and replies as `vtnt-wire` builds them, shared with the forwarder's tests.
#[path = "../tests/support/mod.rs"]
pub mod support;

use support::Method;

pub const PUBLIC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
pub const DST: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 7);
pub const PUBLIC6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x99, 0, 0, 0, 0, 2);
pub const DST6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x2, 0, 0, 0, 0, 7);
/// The IPv6 address of the third instance.
pub const ADDR6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x64, 0, 0, 0, 0x0a00, 0x0003);
pub const T0: Instant = Instant::from_millis(1_000_000);
/// The instances' private addresses, instance by instance.
pub const ADDRS: [Ipv4Addr; 3] = [
    Ipv4Addr::new(10, 0, 0, 2),
    Ipv4Addr::new(10, 0, 0, 2),
    Ipv4Addr::new(10, 0, 0, 3),
];

/// Which instance sent each of the probes that set up the mappings (the last three over
/// IPv6).
pub const SENDERS: [usize; 7] = [0, 1, 0, 2, 2, 2, 2];

/// A probe as its instance sent it, and as it left.
pub type Sent = (Vec<u8>, Vec<u8>);

/// The forwarder every input is fed to, its instances, and the probes it forwarded to
/// set up its mappings.
pub fn forwarder() -> (Forwarder, Vec<InstanceId>, Vec<Sent>) {
    let mut fw = Forwarder::new(Config {
        pps: 100_000,
        burst: 1_000,
        mapping_idle: Duration::from_secs(1),
        public6: Some(PUBLIC6),
        ..Config::new(PUBLIC)
    })
    .expect("config");
    let ids: Vec<InstanceId> = ADDRS.iter().map(|&a| fw.add_instance(a)).collect();
    fw.add_address(ids[2], ADDR6);
    let mut sent = Vec::new();
    let mut out = [0u8; 1500];
    // Paris ICMP twice (a conflict: the same ident towards the same destination), UDP, TCP;
    // then the same over IPv6 from the dual-stack instance.
    let flows = [
        (Method::IcmpParis, 0x8001),
        (Method::IcmpParis, 0x8001),
        (Method::Udp, 0x8002),
        (Method::Tcp, 0x8003),
        (Method::IcmpParis, 0x8001),
        (Method::Udp, 0x8002),
        (Method::Tcp, 0x8003),
    ];
    for (k, (i, (method, ident))) in SENDERS.into_iter().zip(flows).enumerate() {
        let p = if k < 4 {
            support::probe(method, ADDRS[i], DST, ident, 3, 1)
        } else {
            support::probe6(method, ADDR6, DST6, ident, 3, 1)
        };
        let len = fw
            .handle_instance_packet(T0, ids[i], &p, &mut out)
            .expect("forwarded");
        sent.push((p, out[..len].to_vec()));
    }
    (fw, ids, sent)
}

/// Splits an input into `(kind, packet)` records.
pub fn records(mut data: &[u8]) -> Vec<(u8, &[u8])> {
    let mut out = Vec::new();
    while let Some((&kind, rest)) = data.split_first() {
        let n = match rest {
            [a, b, ..] => usize::from(u16::from_be_bytes([*a, *b])),
            _ => 0,
        };
        let body = rest.get(2..).unwrap_or(&[]);
        let n = n.min(body.len());
        out.push((kind, &body[..n]));
        data = &body[n..];
    }
    out
}

/// Whether `p` is IPv4 and its header has a valid checksum.
fn header_ok(p: &[u8]) -> bool {
    if p.first().is_none_or(|b| b >> 4 != 4) {
        return false;
    }
    let ihl = usize::from(p.first().map_or(0, |b| b & 0x0f)) * 4;
    p.get(..ihl).is_some_and(|h| checksum::sum(h) == 0xffff)
}

/// Feeds the input's records, 1 ms apart (mappings expire after 1 s); checks that every
/// packet is counted once and that what comes out is a parsable packet of the input's
/// length, from a public address (outbound) or to the instance (inbound), with a valid
/// IPv4 header checksum where the input had one.
pub fn forward_packet(data: &[u8]) {
    let (mut fw, ids, _) = forwarder();
    let mut out = [0u8; 1500];
    for (i, (kind, p)) in records(data).into_iter().enumerate() {
        let now = T0 + Duration::from_millis(i as u64);
        let before = fw.stats();
        let len = if kind % 2 == 0 {
            let Some((to, n)) = fw.handle_upstream_packet(now, p, &mut out) else {
                assert_eq!(fw.stats().unmatched, before.unmatched + 1);
                continue;
            };
            assert_eq!(fw.stats().delivered, before.delivered + 1);
            let at = ids
                .iter()
                .position(|&id| id == to)
                .expect("a known instance");
            let r = reply::parse(&out[..n]).expect("delivered packets parse");
            assert!(r.dst == IpAddr::V4(ADDRS[at]) || (at == 2 && r.dst == IpAddr::V6(ADDR6)));
            n
        } else {
            let who = ids
                .get(usize::from(kind >> 1) % 4)
                .copied()
                .unwrap_or(InstanceId(u32::MAX));
            let Ok(n) = fw.handle_instance_packet(now, who, p, &mut out) else {
                assert_eq!(fw.stats().forwarded, before.forwarded);
                continue;
            };
            assert_eq!(fw.stats().forwarded, before.forwarded + 1);
            let r = reply::parse(&out[..n]).expect("forwarded packets parse");
            assert!(r.src == IpAddr::V4(PUBLIC) || r.src == IpAddr::V6(PUBLIC6));
            n
        };
        assert_eq!(
            len,
            reply::parse(p).expect("accepted packets parse").len as usize
        );
        assert!(
            !header_ok(p) || header_ok(&out[..len]),
            "header checksum broken"
        );
        fw.handle_timeout(now);
        assert!(fw.poll_timeout().is_none_or(|t| t > now));
    }
}
