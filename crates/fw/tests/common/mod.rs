//! Adversarial rule sets and packets for the differential tests: every field drawn from
//! small pools of nested prefixes, overlapping port ranges, negations, sets, interface
//! wildcards, states, TCP flags, chains with jumps, gotos and returns; packets drawn
//! from the same pools (inside, on the edge of and just outside each value), so rules
//! overlap, shadow each other and almost match.

#![allow(dead_code)]

use std::net::Ipv4Addr;

use vtnt_fw::rule::{Chain, ChainId, IcmpType, Match, PortRange, Prefix, StateSet, TcpFlags};
use vtnt_fw::{
    Action, Classifier, CtState, Hook, IfId, Linear, Options, Packet, RejectWith, Rule, Ruleset,
    Strategy, Target, Verdict,
};
use vtnt_testkit::Rng;

pub const IFACES: [&str; 4] = ["eth0", "eth1", "wlan0", "lo"];

fn prefixes() -> Vec<Prefix> {
    [
        ("10.0.0.0", 8),
        ("10.1.0.0", 16),
        ("10.1.2.0", 24),
        ("10.1.2.3", 32),
        ("10.1.2.128", 25),
        ("192.0.2.0", 24),
        ("192.0.2.7", 32),
        ("0.0.0.0", 1),
        ("128.0.0.0", 1),
        ("198.51.100.0", 23),
    ]
    .into_iter()
    .map(|(a, l)| Prefix::new(a.parse().unwrap(), l).unwrap())
    .collect()
}

const PORTS: [PortRange; 8] = [
    PortRange { lo: 0, hi: 1023 },
    PortRange { lo: 80, hi: 80 },
    PortRange { lo: 79, hi: 81 },
    PortRange {
        lo: 1024,
        hi: 65535,
    },
    PortRange { lo: 443, hi: 443 },
    PortRange { lo: 1000, hi: 2000 },
    PortRange {
        lo: 65535,
        hi: 65535,
    },
    PortRange { lo: 0, hi: 0 },
];

fn coin(rng: &mut Rng, p_percent: usize) -> bool {
    rng.below(100) < p_percent
}

/// A field match from `pool`: any, one, a set, or a negation of either.
fn field<T: vtnt_fw::rule::Element + Copy>(
    rng: &mut Rng,
    rs: &mut Ruleset,
    pool: &[T],
    p_any: usize,
) -> Match<T> {
    if coin(rng, p_any) {
        return Match::Any;
    }
    let one = pool[rng.below(pool.len())];
    match rng.below(10) {
        0..=5 => Match::Is(one),
        6 => Match::Not(one),
        k => {
            let n = 1 + rng.below(4);
            let set: Vec<T> = (0..n).map(|_| pool[rng.below(pool.len())]).collect();
            let id = rs.add_set(set);
            if k == 9 {
                Match::NotIn(id)
            } else {
                Match::In(id)
            }
        }
    }
}

fn action(rng: &mut Rng) -> Action {
    match rng.below(5) {
        0 | 1 => Action::Accept,
        2 | 3 => Action::Drop,
        _ => Action::Reject(RejectWith::HostProhibited),
    }
}

/// One adversarial rule; `chains`: user chains it may jump to.
pub fn random_rule(
    rng: &mut Rng,
    rs: &mut Ruleset,
    chains: &[ChainId],
    in_user_chain: bool,
) -> Rule {
    let mut r = Rule::new(Target::Verdict(action(rng)));
    let ps = prefixes();
    r.src = field(rng, rs, &ps, 40);
    r.dst = field(rng, rs, &ps, 40);
    let proto = match rng.below(10) {
        0..=3 => Some(6),
        4..=5 => Some(17),
        6 => Some(1),
        7 => Some(47),
        _ => None,
    };
    r.proto = match proto {
        Some(p) if coin(rng, 10) && p != 1 => Match::Not(p),
        Some(p) => Match::Is(p),
        None if coin(rng, 20) => Match::In(rs.add_set(vec![6u8, 17])),
        None => Match::Any,
    };
    // Rules that match nearly everything would shadow the rest: most get an address.
    if r.src.is_any() && r.dst.is_any() && coin(rng, 80) {
        r.src = Match::Is(ps[rng.below(ps.len())]);
    }
    if matches!(r.proto, Match::Is(6 | 17)) {
        r.sport = field(rng, rs, &PORTS, 60);
        r.dport = field(rng, rs, &PORTS, 30);
    }
    if r.proto == Match::Is(1) && coin(rng, 70) {
        let types = [
            IcmpType { ty: 8, code: None },
            IcmpType { ty: 0, code: None },
            IcmpType {
                ty: 3,
                code: Some(3),
            },
            IcmpType { ty: 3, code: None },
            IcmpType {
                ty: 11,
                code: Some(0),
            },
        ];
        r.icmp = field(rng, rs, &types, 0);
    }
    if r.proto == Match::Is(6) && coin(rng, 15) {
        r.tcp_flags = Some(TcpFlags {
            mask: 0x17,
            comp: if coin(rng, 50) { 0x02 } else { 0x10 },
            invert: coin(rng, 30),
        });
        if coin(rng, 30) {
            r.target = Target::Verdict(Action::Reject(RejectWith::TcpReset));
        }
    }
    if coin(rng, 15) {
        let names = [
            ("eth", true),
            ("eth0", false),
            ("wlan0", false),
            ("lo", false),
        ];
        let (n, w) = names[rng.below(names.len())];
        let i = rs.iface(n, w);
        let m = if coin(rng, 25) {
            Match::Not(i)
        } else {
            Match::Is(i)
        };
        if coin(rng, 50) {
            r.in_if = m;
        } else {
            r.out_if = m;
        }
    }
    if coin(rng, 15) {
        let mut s = StateSet::default();
        for st in CtState::ALL {
            if coin(rng, 40) {
                s = s.with(st);
            }
        }
        r.state = Some(s);
    }
    let k = rng.below(100);
    if k < 8 && !chains.is_empty() {
        let c = chains[rng.below(chains.len())];
        r.target = if coin(rng, 70) {
            Target::Jump(c)
        } else {
            Target::Goto(c)
        };
    } else if k < 12 && (in_user_chain || k < 10) {
        r.target = Target::Return;
    } else if k < 14 {
        r.target = Target::Continue;
    }
    r
}

/// A filter table of `n` rules over FORWARD and (with `user`) two user chains, FORWARD
/// jumping into the first, the first into the second.
pub fn random_ruleset(rng: &mut Rng, n: usize, user: bool) -> Ruleset {
    let mut rs = Ruleset::filter();
    let fwd = rs.hook_chain(Hook::Forward).unwrap();
    rs.chain_mut(fwd).policy = if coin(rng, 50) {
        Action::Drop
    } else {
        Action::Accept
    };
    let mut chains = Vec::new();
    if user {
        for name in ["second", "first"] {
            rs.chains.push(Chain {
                name: name.into(),
                hook: None,
                policy: Action::Accept,
                rules: vec![],
                line: 0,
            });
            chains.push(ChainId(rs.chains.len() as u32 - 1));
        }
    }
    let per_user = if user { n / 4 } else { 0 };
    // the second chain jumps nowhere; the first may jump to the second; FORWARD to both
    for (ci, targets) in [
        (chains.first().copied(), &chains[..0]),
        (chains.get(1).copied(), &chains[..1.min(chains.len())]),
    ] {
        if let Some(c) = ci {
            for _ in 0..per_user {
                let r = random_rule(rng, &mut rs, targets, true);
                rs.chain_mut(c).rules.push(r);
            }
        }
    }
    for _ in 0..n - 2 * per_user {
        let r = random_rule(rng, &mut rs, &chains, false);
        rs.chain_mut(fwd).rules.push(r);
    }
    rs.check().expect("a valid random ruleset");
    rs
}

/// An address near the pools: inside, at the edges, just outside, or anywhere.
fn addr(rng: &mut Rng) -> Ipv4Addr {
    let ps = prefixes();
    let p = ps[rng.below(ps.len())];
    let a = match rng.below(6) {
        0 => p.bits(),
        1 => p.last(),
        2 => p.bits().wrapping_sub(1),
        3 => p.last().wrapping_add(1),
        4 => p.bits() | (rng.next_u64() as u32 & !p.mask()),
        _ => rng.next_u64() as u32,
    };
    a.into()
}

fn port(rng: &mut Rng) -> u16 {
    let r = PORTS[rng.below(PORTS.len())];
    match rng.below(5) {
        0 => r.lo,
        1 => r.hi,
        2 => r.lo.wrapping_sub(1),
        3 => r.hi.wrapping_add(1),
        _ => rng.next_u64() as u16,
    }
}

/// A packet from the pools with random interfaces, state, flags and fragmenting.
pub fn random_packet(rng: &mut Rng) -> Packet {
    let proto = [6, 6, 17, 17, 1, 47, 0][rng.below(7)];
    let (sport, dport) = match proto {
        6 | 17 => (port(rng), port(rng)),
        // (and now and then values no ICMP header can hold)
        1 if coin(rng, 3) => (rng.next_u64() as u16, rng.next_u64() as u16),
        1 => ([0, 3, 8, 11, 5][rng.below(5)], rng.below(5) as u16),
        _ => (0, 0),
    };
    let iface = |rng: &mut Rng| match rng.below(5) {
        4 => IfId::NONE,
        i => IfId(i as u16),
    };
    let fragment = coin(rng, 5);
    Packet {
        src: addr(rng),
        dst: addr(rng),
        proto,
        sport: if fragment { 0 } else { sport },
        dport: if fragment { 0 } else { dport },
        tcp_flags: if proto == 6 && !fragment {
            [0x02, 0x10, 0x12, 0x11, 0x04, 0x18][rng.below(6)]
        } else {
            0
        },
        fragment,
        in_if: iface(rng),
        out_if: iface(rng),
        state: CtState::ALL[rng.below(5)],
    }
}

/// The classifier compiled with `strategy`, interfaces registered as the reference's.
pub fn compiled(rs: &Ruleset, strategy: Strategy) -> Classifier {
    let mut c = Classifier::compile(
        rs,
        &Options {
            strategy,
            ..Options::default()
        },
    )
    .expect("compiles");
    for n in IFACES {
        c.interface(n);
    }
    c
}

pub fn linear(rs: &Ruleset) -> Linear<'_> {
    let mut l = Linear::new(rs);
    for n in IFACES {
        l.interface(n);
    }
    l
}

/// Checks that every classifier agrees with the reference on `packets` at every hook,
/// with and without the state shortcut; returns how many packets each rule decided
/// (the last: the policy), to show the packets exercised the rules.
pub fn agree(rs: &Ruleset, packets: &[Packet], what: &str) -> Vec<usize> {
    let reference = linear(rs);
    let merged = compiled(rs, Strategy::default());
    let exact = compiled(rs, Strategy::Exact);
    let fwd = rs.hook_chain(Hook::Forward).unwrap();
    let mut hits = vec![0; rs.chain(fwd).rules.len() + 1];
    // The batched path, in batches of every size from 1 to 2 * BATCH + 1.
    let blank = Verdict {
        action: Action::Drop,
        rule: None,
    };
    let mut batched = vec![blank; packets.len()];
    let (mut at, mut size) = (0, 1);
    while at < packets.len() {
        let end = (at + size).min(packets.len());
        merged.classify_batch(Hook::Forward, &packets[at..end], &mut batched[at..end]);
        (at, size) = (end, size % (2 * vtnt_fw::BATCH + 1) + 1);
    }
    for (i, p) in packets.iter().enumerate() {
        let want = reference.classify(Hook::Forward, p);
        for (name, c) in [("merged", &merged), ("exact", &exact)] {
            let got = c.classify(Hook::Forward, p);
            assert_eq!(
                got, want,
                "{what}: packet {i} {p:?}: {name} says {got:?}, the rules {want:?}"
            );
            if name == "merged" {
                assert_eq!(batched[i], want, "{what}: packet {i} {p:?}: batched");
            }
            assert_eq!(
                c.classify_tables(Hook::Forward, p),
                want,
                "{what}: packet {i}: {name} tables"
            );
        }
        match want.rule {
            Some(r) if r.chain == fwd => hits[r.index as usize] += 1,
            Some(_) => {}
            None => *hits.last_mut().unwrap() += 1,
        }
        if i % 16 == 0 {
            for h in [Hook::Input, Hook::Output] {
                assert_eq!(
                    merged.classify(h, p),
                    reference.classify(h, p),
                    "{what}: {h:?}"
                );
            }
        }
    }
    hits
}
