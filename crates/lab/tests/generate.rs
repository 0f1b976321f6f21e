//! The generator: deterministic per seed, every class when asked, TOML that reads back
//! to the same network, and ground truth that agrees with what traces see.

use std::net::Ipv4Addr;

use vtnt_lab::generate::{generate_toml, ClassMix};
use vtnt_lab::tracer::Tracer;
use vtnt_lab::truth::Destination;
use vtnt_lab::{generate, GenOptions, Lab, Revelation, Topology, TunnelClass};

#[test]
fn same_seed_same_topology() {
    let o = GenOptions::default();
    assert_eq!(generate_toml(7, &o), generate_toml(7, &o));
    assert_ne!(generate_toml(7, &o), generate_toml(8, &o));
    assert_eq!(generate(7, &o).def(), generate(7, &o).def());
}

#[test]
fn toml_round_trips() {
    for seed in 0..20 {
        let t = generate(seed, &GenOptions::default());
        let back = Topology::parse(&t.to_toml(), "gen.toml").unwrap();
        assert_eq!(back.def(), t.def(), "seed {seed}");
    }
}

#[test]
fn every_class_and_vendor_when_mixed_evenly() {
    let o = GenOptions {
        destinations: 60,
        mix: ClassMix {
            none: 1,
            explicit: 1,
            implicit: 1,
            opaque: 1,
            invisible_php: 1,
            invisible_uhp: 1,
        },
        ..GenOptions::default()
    };
    let t = generate(42, &o);
    let truth = Lab::new(t.clone()).truth();
    for c in TunnelClass::ALL {
        assert!(truth.lsps.iter().any(|l| l.class == c), "{c:?} missing");
    }
    for v in vtnt_lab::Vendor::ALL {
        assert!(
            truth.routers.iter().any(|r| r.vendor == v.name()),
            "{v:?} missing"
        );
    }
    let only = GenOptions {
        mix: ClassMix {
            none: 0,
            explicit: 0,
            implicit: 0,
            opaque: 1,
            invisible_php: 0,
            invisible_uhp: 0,
        },
        ..o
    };
    let truth = Lab::new(generate(1, &only)).truth();
    assert!(truth.lsps.iter().all(|l| l.class == TunnelClass::Opaque));
}

/// What a traceroute should show along one truth path: every router's incoming address,
/// minus the LSRs of tunnels that hide them, with the next hop doubled for invisible UHP
/// (and the egress missing).
fn expected_hops(d: &Destination, path: &[vtnt_lab::truth::Hop]) -> Vec<Ipv4Addr> {
    let mut out: Vec<Ipv4Addr> = Vec::new();
    let mut skip: Vec<Ipv4Addr> = Vec::new();
    let mut double: Vec<Ipv4Addr> = Vec::new();
    for t in &d.tunnels {
        if t.class.hides_lsrs() {
            skip.extend(&t.lsrs);
        }
        if t.class == TunnelClass::InvisibleUhp {
            skip.push(t.egress);
            double.push(t.egress);
        }
    }
    let mut dup_next = false;
    for h in path {
        if skip.contains(&h.addr) {
            dup_next |= double.contains(&h.addr);
            continue;
        }
        out.push(h.addr);
        if std::mem::take(&mut dup_next) {
            out.push(h.addr);
        }
    }
    out.push(d.dst);
    out
}

#[test]
fn truth_agrees_with_traces_on_generated_topologies() {
    let mut checked = 0;
    for seed in 0..30 {
        let o = GenOptions {
            ecmp: 0.0,
            ..GenOptions::default()
        };
        let mut lab = Lab::new(generate(seed, &o));
        let truth = lab.truth();
        let mut t = Tracer::new(&mut lab);
        for d in &truth.destinations {
            let seen: Vec<Ipv4Addr> = t
                .trace(d.dst, 64)
                .iter()
                .map(|h| h.as_ref().map_or(Ipv4Addr::UNSPECIFIED, |a| a.from))
                .collect();
            let want = expected_hops(d, &d.forward);
            assert_eq!(
                seen, want,
                "seed {seed} {}: tunnels {:#?}",
                d.name, d.tunnels
            );
            checked += 1;
        }
    }
    assert!(checked > 300);
}

/// Generated forward and return paths stay within 30 routers (so a 64-iTTL reply always
/// arrives above 32 and its initial TTL reads right).
#[test]
fn paths_stay_within_30_routers() {
    for seed in 0..40 {
        let truth = Lab::new(generate(seed, &GenOptions::default())).truth();
        for d in &truth.destinations {
            for p in &d.forward_paths {
                assert!(p.len() <= 30, "seed {seed} {}: {} routers", d.name, p.len());
            }
            assert!(d.return_path.len() <= 30, "seed {seed} {} return", d.name);
        }
    }
}

/// Implicit LSPs have two LSRs or more by default, and then always show (quoted TTL 2);
/// with `implicit_min_lsrs = 1`, lone-LSR implicit tunnels are in the truth as not
/// detectable.
#[test]
fn implicit_lsrs_and_detectability() {
    let only_implicit = ClassMix {
        none: 0,
        explicit: 0,
        implicit: 1,
        opaque: 0,
        invisible_php: 0,
        invisible_uhp: 0,
    };
    let o = GenOptions {
        destinations: 30,
        mix: only_implicit,
        ..GenOptions::default()
    };
    let mut n = 0;
    for seed in 0..5 {
        let truth = Lab::new(generate(seed, &o)).truth();
        for t in truth.destinations.iter().flat_map(|d| &d.tunnels) {
            assert_eq!(t.class, TunnelClass::Implicit);
            if t.whole {
                assert!(t.lsrs.len() >= 2, "seed {seed}: {t:?}");
            }
            if t.lsrs.len() >= 2 {
                assert!(t.detectable, "seed {seed}: {t:?}");
            }
            n += 1;
        }
    }
    assert!(n > 50);
    let one = GenOptions {
        implicit_min_lsrs: 1,
        lsrs: (1, 1),
        icmp_tunnelling: 0.0,
        ..o
    };
    let truth = Lab::new(generate(3, &one)).truth();
    assert!(!truth.destinations.is_empty());
    for t in truth.destinations.iter().flat_map(|d| &d.tunnels) {
        assert_eq!(t.lsrs.len(), 1);
        assert!(!t.detectable, "a lone implicit LSR quotes TTL 1: {t:?}");
    }
}

/// The truth's trigger signals are the numbers the packets carry: recompute FRPLA, RTLA
/// and the duplicate IP from a plain trace and pings for invisible tunnels without ECMP.
#[test]
fn signals_agree_with_traces() {
    let o = GenOptions {
        ecmp: 0.0,
        ..GenOptions::default()
    };
    let mut checked = 0;
    for seed in 0..20 {
        let topo = generate(seed, &o);
        let mut lab = Lab::new(topo.clone());
        let truth = lab.truth();
        let sig = |name: &str| {
            let r = truth.routers.iter().find(|r| r.name == name).unwrap();
            (i16::from(r.signature[0]), i16::from(r.signature[1]))
        };
        let mut t = Tracer::new(&mut lab);
        for d in &truth.destinations {
            let trace = t.trace(d.dst, 64);
            for tun in d.tunnels.iter().filter(|x| x.class.is_invisible()) {
                let s = tun
                    .signals
                    .as_ref()
                    .expect("signals of an invisible tunnel");
                let at = usize::from(s.hop_ttl) - 1;
                let hop = trace[at].as_ref().unwrap();
                assert_eq!(hop.from, s.hop);
                let (te, er) = sig(&s.hop_router);
                let frpla = te - i16::from(hop.reply_ttl) + 1 - i16::from(hop.probe_ttl);
                assert_eq!(frpla, s.frpla, "seed {seed} {}", d.name);
                let ping = t.ping(hop.from).unwrap();
                let rtla = if te == 255 && er != 255 {
                    frpla + i16::from(hop.probe_ttl) - (er - i16::from(ping.reply_ttl) + 1)
                } else {
                    0
                };
                assert_eq!(rtla, s.rtla, "seed {seed} {}", d.name);
                let dup = trace[at + 1].as_ref().is_some_and(|n| n.from == hop.from);
                assert_eq!(dup, s.dup_ip, "seed {seed} {}", d.name);
                assert_eq!(dup, tun.class == TunnelClass::InvisibleUhp);
                assert_eq!(tun.detectable, s.fires());
                assert_eq!(
                    tun.revelation_possible,
                    s.fires()
                        && matches!(
                            tun.revealable_by,
                            Some(Revelation::Dpr | Revelation::Brpr | Revelation::Buddy)
                        )
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 50, "{checked}");
}
