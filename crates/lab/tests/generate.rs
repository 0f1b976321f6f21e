//! The generator: deterministic per seed, every class when asked, TOML that reads back
//! to the same network, and ground truth that agrees with what traces see.

use std::net::Ipv4Addr;

use vtnt_lab::generate::{generate_toml, ClassMix};
use vtnt_lab::tracer::Tracer;
use vtnt_lab::truth::Destination;
use vtnt_lab::{generate, GenOptions, Lab, Topology, TunnelClass};

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
