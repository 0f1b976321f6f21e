//! The compiled classifier (merged tuples, and classic one-table-per-tuple) against the
//! rule-by-rule reference, on generated rule sets of 10, 1,000 and 100,000 rules with
//! their own traces and random packets, and on adversarial sets (nested prefixes,
//! overlapping port ranges, negations, sets, same-priority shadows, interfaces, states,
//! TCP flags, user chains with jumps, gotos and returns). `vtnt fw bench --verify N`
//! runs millions of packets in release.

mod common;

use vtnt_fw::gen::{self, Family, RuleSpec, TraceSpec};
use vtnt_fw::rule::{Match, PortRange, Prefix};
use vtnt_fw::{CtState, IfId, Packet, Rule, Target};
use vtnt_testkit::Rng;

fn trace_packets(rs: &vtnt_fw::Ruleset, n: usize, seed: u64) -> Vec<Packet> {
    gen::trace(
        rs,
        &TraceSpec {
            packets: n,
            seed,
            locality: 0.0,
        },
    )
    .iter()
    .map(|h| Packet {
        src: h.src,
        dst: h.dst,
        proto: h.proto,
        sport: h.sport,
        dport: h.dport,
        tcp_flags: 0x10,
        fragment: false,
        in_if: IfId::NONE,
        out_if: IfId::NONE,
        state: CtState::New,
    })
    .collect()
}

#[test]
fn generated_sets_agree_with_the_reference() {
    let seed = vtnt_testkit::seed("VTNT_FW_DIFF_SEED", || 39);
    let mut rng = Rng::new(seed);
    // (rules, family, trace packets, random packets): the reference's cost grows with
    // the rules, so the largest set gets fewer packets
    let sizes = [
        (10, Family::Fw, 300_000, 300_000),
        (1_000, Family::Acl, 100_000, 100_000),
        (1_000, Family::Ipc, 100_000, 100_000),
        (100_000, Family::Fw, 3_000, 3_000),
    ];
    for (n, family, traced, random) in sizes {
        let rs = gen::rules(&RuleSpec {
            family,
            stateful: true,
            ..RuleSpec::new(n, seed ^ n as u64)
        });
        let mut packets = trace_packets(&rs, traced, seed);
        packets.extend((0..random).map(|_| common::random_packet(&mut rng)));
        let hits = common::agree(&rs, &packets, &format!("{n} {family:?} rules"));
        let decided = hits.iter().filter(|&&h| h > 0).count();
        eprintln!("{n} {family:?} rules: {decided} decided a packet");
        assert!(
            decided > n.min(traced) / 4,
            "{n} rules: only {decided} rules decided a packet"
        );
    }
}

#[test]
fn adversarial_sets_agree_with_the_reference() {
    let seed = vtnt_testkit::seed("VTNT_FW_DIFF_SEED", || 39);
    let mut rng = Rng::new(seed);
    for round in 0..16 {
        let n = [5, 40, 300][round % 3];
        let rs = common::random_ruleset(&mut rng, n, round % 2 == 0);
        let packets: Vec<Packet> = (0..40_000)
            .map(|_| common::random_packet(&mut rng))
            .collect();
        let hits = common::agree(&rs, &packets, &format!("round {round} ({n} rules)"));
        let decided = hits.iter().filter(|&&h| h > 0).count();
        assert!(
            decided >= hits.len().min(10) / 2,
            "round {round}: only {decided} rules decided: {hits:?}"
        );
    }
}

/// A set too large to expand whole (past `EXPAND_MAX` entries) is checked as a
/// condition; a rule of a thousand sources times ten ports still classifies exactly.
#[test]
fn large_sets_are_expanded_in_part() {
    let mut rs = vtnt_fw::Ruleset::filter();
    let fwd = rs.hook_chain(vtnt_fw::Hook::Forward).unwrap();
    let srcs: Vec<Prefix> = (0..1000u32)
        .map(|i| Prefix::new((0x0a00_0000 + i * 256).into(), 24).unwrap())
        .collect();
    let ports: Vec<PortRange> = (0..10).map(|i| PortRange::one(1000 + i * 7)).collect();
    let mut r = Rule::new(Target::Verdict(vtnt_fw::Action::Accept));
    r.proto = Match::Is(17);
    r.src = Match::In(rs.add_set(srcs));
    r.dport = Match::In(rs.add_set(ports));
    rs.chain_mut(fwd).rules.push(r);
    rs.chain_mut(fwd).policy = vtnt_fw::Action::Drop;
    let c = common::compiled(&rs, vtnt_fw::Strategy::default());
    assert_eq!(c.stats().entries, 1000, "{:?}", c.stats());
    let mut rng = Rng::new(5);
    let packets: Vec<Packet> = (0..20_000)
        .map(|_| {
            let mut p = common::random_packet(&mut rng);
            p.proto = 17;
            p.fragment = false;
            p.src = (0x0a00_0000 + rng.below(300_000) as u32).into();
            p.dport = 990 + rng.below(80) as u16;
            p
        })
        .collect();
    let hits = common::agree(&rs, &packets, "a 1000 x 10 set");
    assert!(hits[0] > 100 && hits[1] > 100, "{hits:?}");
}
