//! No bytes make the forwarder panic, in either direction: real probes and replies with
//! bits flipped, cut or extended, and every file of the `forward_packet` seed corpus, fed
//! to the very function the fuzz target runs (`crates/forward/fuzz`).

#[path = "../fuzz/body.rs"]
mod body;

use std::path::PathBuf;

use vtnt_testkit::Rng;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/forward_packet")
}

/// One record of the fuzz input format.
fn record(kind: u8, p: &[u8]) -> Vec<u8> {
    let mut r = vec![kind];
    r.extend((p.len() as u16).to_be_bytes());
    r.extend(p);
    r
}

/// The replies the network sends to the forwarder's probes, as upstream records.
fn upstream() -> Vec<Vec<u8>> {
    let (_, _, sent) = body::forwarder();
    sent.iter()
        .flat_map(|(_, p)| body::support::replies_any(p, 1))
        .map(|r| record(0, &r))
        .collect()
}

#[test]
fn real_replies_reach_their_instances() {
    let (mut fw, _, _) = body::forwarder();
    let mut out = [0u8; 1500];
    let replies = upstream();
    for r in &replies {
        assert!(fw
            .handle_upstream_packet(body::T0, &r[3..], &mut out)
            .is_some());
    }
    assert_eq!(fw.stats().delivered, replies.len() as u64);
    assert_eq!(
        fw.stats().rewrites,
        1,
        "the seed mappings include a conflict"
    );
}

#[test]
fn mutated_packets_never_panic() {
    let seed = vtnt_testkit::seed("VTNT_FORWARD_FUZZ_SEED", || 0x5eed);
    let mut rng = Rng::new(seed);
    let (_, _, sent) = body::forwarder();
    let mut seeds: Vec<Vec<u8>> = upstream();
    seeds.extend(
        sent.iter()
            .zip(body::SENDERS)
            .map(|((p, _), at)| record(1 + 2 * at as u8, p)),
    );
    for _ in 0..5000 {
        let mut data = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let mut r = seeds[rng.below(seeds.len())].clone();
            for _ in 0..rng.below(5) {
                let i = 3 + rng.below(r.len() - 3);
                r[i] ^= 1 << rng.below(8);
            }
            match rng.below(4) {
                0 => r.truncate(3 + rng.below(r.len() - 2)),
                1 => {
                    let n = rng.below(40);
                    r.extend(rng.bytes(n));
                }
                _ => {}
            }
            let n = (r.len() - 3) as u16;
            r[1..3].copy_from_slice(&n.to_be_bytes());
            data.extend(r);
        }
        body::forward_packet(&data);
        let n = rng.below(200);
        body::forward_packet(&rng.bytes(n));
    }
}

#[test]
fn forward_packet_corpus() {
    let mut n = 0;
    for entry in std::fs::read_dir(corpus_dir()).expect("corpus directory") {
        body::forward_packet(&std::fs::read(entry.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= 3, "forward_packet: {n} seed files");
}

/// Rewrites the seed corpus from real packets: `cargo test -p vtnt-forward --test
/// fuzz_corpus -- --ignored write_seed_corpus`.
#[test]
#[ignore]
fn write_seed_corpus() {
    let dir = corpus_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let kinds = ["icmp", "icmp_moved", "udp", "tcp", "icmp6", "udp6", "tcp6"];
    let (_, _, sent) = body::forwarder();
    let mut all = Vec::new();
    for (k, ((original, p), at)) in sent.iter().zip(body::SENDERS).enumerate() {
        let replies = body::support::replies_any(p, 1);
        let names: &[&str] = match (replies.len(), p[0] >> 4) {
            (5, 4) => &["te", "te_whole", "te_mpls", "te_mpls_short", "answer"],
            (6, 6) => &[
                "te",
                "te_whole",
                "te_mpls",
                "te_mpls_short",
                "too_big",
                "answer",
            ],
            (_, 6) => &[
                "te",
                "te_whole",
                "te_mpls",
                "te_mpls_short",
                "too_big",
                "unreachable",
                "answer",
            ],
            _ => &[
                "te",
                "te_whole",
                "te_mpls",
                "te_mpls_short",
                "unreachable",
                "answer",
            ],
        };
        for (r, name) in replies.iter().zip(names) {
            std::fs::write(dir.join(format!("{}_{name}", kinds[k])), record(0, r)).unwrap();
            all.extend(record(0, r));
        }
        // The probe again, from its instance.
        let probe = record(1 + 2 * at as u8, original);
        std::fs::write(dir.join(format!("{}_probe", kinds[k])), &probe).unwrap();
        all.extend(probe);
    }
    std::fs::write(dir.join("all"), all).unwrap();
}
