//! No bytes make `handle_packet` panic: random garbage, mutated real replies, and every
//! file of the fuzz corpus (fed to the very function the fuzz target runs).

#[path = "../fuzz/body.rs"]
mod body;

use std::path::PathBuf;

use vtnt_wire::build::{self, Ip};
use vtnt_wire::mpls::Lse;
use vtnt_wire::reply::{self, Body};

/// xorshift64*: deterministic test randomness.
/// The workspace's generator, drawing indexes.
struct Rng(vtnt_rng::Rng);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }
}

/// Real answers to the probes of the fuzz engine: time exceeded (with and without
/// labels), echo reply, port unreachable, TCP RST.
fn replies_to(probes: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for p in probes {
        let r = reply::parse(p).unwrap();
        let router = Ip {
            src: "198.51.100.1".parse().unwrap(),
            dst: body::SRC,
            ttl: 250,
            tos: 0,
            ipid: 3,
        };
        let host = Ip {
            src: body::DST,
            dst: body::SRC,
            ttl: 60,
            tos: 0,
            ipid: 4,
        };
        let mut b = vec![0u8; 400];
        let n = build::icmp_error(
            &mut b,
            &router,
            &build::IcmpError {
                icmp_type: 11,
                code: 0,
                original: p,
                quote_len: 28,
                mpls: &[],
            },
        )
        .unwrap();
        out.push(b[..n].to_vec());
        let n = build::icmp_error(
            &mut b,
            &router,
            &build::IcmpError {
                icmp_type: 11,
                code: 0,
                original: p,
                quote_len: 28,
                mpls: &[Lse::new(24001, 0, true, 1)],
            },
        )
        .unwrap();
        out.push(b[..n].to_vec());
        let n = match r.body {
            Body::Echo {
                ident,
                seq,
                payload,
                ..
            } => build::icmp_echo(
                &mut b,
                &host,
                &build::Echo {
                    icmp_type: 0,
                    ident,
                    seq,
                    payload,
                    checksum: None,
                },
            )
            .unwrap(),
            Body::Udp { .. } => build::icmp_error(
                &mut b,
                &host,
                &build::IcmpError {
                    icmp_type: 3,
                    code: 3,
                    original: p,
                    quote_len: 28,
                    mpls: &[],
                },
            )
            .unwrap(),
            Body::Tcp {
                sport, dport, seq, ..
            } => {
                let t = build::Tcp {
                    sport: dport,
                    dport: sport,
                    seq: 0,
                    ack: seq + 1,
                    flags: 0x14,
                    window: 0,
                };
                build::tcp(&mut b, &host, &t).unwrap()
            }
            _ => unreachable!(),
        };
        out.push(b[..n].to_vec());
    }
    out
}

#[test]
fn real_replies_match_in_the_fuzz_engine() {
    let (mut e, probes) = body::engine();
    // The IPv4 probes (with `ipv6-probe` the engine also sends IPv6 ones).
    let probes: Vec<Vec<u8>> = probes.into_iter().filter(|p| p[0] >> 4 == 4).collect();
    assert_eq!(probes.len(), 6);
    for r in replies_to(&probes) {
        e.handle_packet(body::T0, &r);
    }
    // 6 probes x (2 time exceeded + 1 answer); traces record one reply per probe.
    assert_eq!(e.stats().replies, 18);
    assert_eq!(e.stats().unmatched, 0);
}

#[test]
fn random_garbage_never_panics() {
    let mut rng = Rng(vtnt_rng::Rng::new(0x9e37_79b9_7f4a_7c15));
    let (_, probes) = body::engine();
    let seeds = replies_to(&probes);
    for round in 0..3000 {
        let mut data = vec![rng.below(256) as u8];
        if round % 3 == 0 {
            let n = rng.below(300);
            data.extend((0..n).map(|_| rng.next() as u8));
            // Often make it look like IPv4 so the parser goes further.
            if n > 20 && rng.below(2) == 0 {
                data[1] = 0x45;
                data[3] = (n & 0xff) as u8;
                data[4] = (n >> 8) as u8;
            }
        } else {
            // A real reply with a few bytes flipped, truncated or extended.
            let mut p = seeds[rng.below(seeds.len())].clone();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(p.len());
                p[i] ^= 1 << rng.below(8);
            }
            match rng.below(4) {
                0 => p.truncate(rng.below(p.len() + 1)),
                1 => p.extend((0..rng.below(40)).map(|_| rng.next() as u8)),
                _ => {}
            }
            data[0] &= !1;
            data.extend(p);
        }
        body::handle_packet(&data);
    }
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/handle_packet")
}

#[test]
fn fuzz_corpus_runs_clean() {
    let mut n = 0;
    for entry in std::fs::read_dir(corpus_dir()).expect("corpus directory") {
        let path = entry.unwrap().path();
        body::handle_packet(&std::fs::read(&path).unwrap());
        n += 1;
    }
    assert!(n >= 3, "seed corpus has {n} files");
}

/// Rewrites the seed corpus from real replies: `cargo test -p vtnt-engine --test garbage
/// -- --ignored write_seed_corpus`.
#[test]
#[ignore]
fn write_seed_corpus() {
    let (_, probes) = body::engine();
    let replies = replies_to(&probes);
    let dir = corpus_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let names = ["te", "te_mpls", "answer"];
    for (i, r) in replies.iter().enumerate() {
        let kind = [
            "icmp_trace",
            "icmp_ping",
            "udp_trace",
            "udp_ping",
            "tcp_trace",
            "tcp_ping",
        ][i / 3];
        let mut data = vec![0u8];
        data.extend(r);
        std::fs::write(dir.join(format!("{kind}_{}", names[i % 3])), data).unwrap();
    }
    // All of them in one framed input.
    let mut framed = vec![1u8];
    for r in &replies {
        framed.extend((r.len() as u16).to_be_bytes());
        framed.extend(r);
    }
    std::fs::write(dir.join("all_framed"), framed).unwrap();
}

/// The fuzz engine's IPv6 probes (TCP ones among them) are matched by real ICMPv6 time
/// exceeded replies, so inputs derived from them reach the ICMPv6 matching.
#[cfg(feature = "ipv6-probe")]
#[test]
fn real_ipv6_replies_match_in_the_fuzz_engine() {
    use vtnt_wire::build::IcmpError;
    use vtnt_wire::ipv6::Ip6;
    use vtnt_wire::{build6, icmp6_type};
    let (mut e, probes) = body::engine();
    let probes: Vec<Vec<u8>> = probes.into_iter().filter(|p| p[0] >> 4 == 6).collect();
    assert_eq!(probes.len(), 7, "four IPv6 traces and three IPv6 pings");
    let ip = Ip6 {
        src: "2001:db8:2::1".parse().unwrap(),
        dst: body::SRC6,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    };
    for p in &probes {
        let err = IcmpError {
            icmp_type: icmp6_type::TIME_EXCEEDED,
            code: 0,
            original: p,
            quote_len: p.len(),
            mpls: &[],
        };
        let mut b = vec![0u8; 1500];
        let n = build6::icmp6_error(&mut b, &ip, &err).unwrap();
        e.handle_packet(body::T0, &b[..n]);
    }
    assert_eq!(e.stats().replies, 7);
    assert_eq!(e.stats().unmatched, 0);
}
