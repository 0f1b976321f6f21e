//! The generator: deterministic per seed, every class when asked, TOML that reads back
//! to the same network, and ground truth that agrees with what traces see.

use std::net::Ipv4Addr;

use vtnt_lab::generate::{generate_toml, ClassMix};
use vtnt_lab::tracer::{Answer, Tracer};
use vtnt_lab::truth::Destination;
use vtnt_lab::{generate, GenOptions, Lab, OracleOptions, Revelation, Topology, TunnelClass};

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
    // (an RSVP-TE LSP another one rides shows its own class: opaque's no-propagate PHP
    // without a service label is invisible PHP)
    let carrier = |name: &str| truth.lsps.iter().any(|l| l.over.as_deref() == Some(name));
    assert!(truth
        .lsps
        .iter()
        .filter(|l| !carrier(&l.name))
        .all(|l| l.class == TunnelClass::Opaque));
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
            lsp_ecmp: 0.0,
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
    let inner = GenOptions {
        lsp_ecmp: 1.0,
        unequal_ecmp: 1.0,
        ..GenOptions::default()
    };
    for (seed, o) in (0..40)
        .map(|s| (s, GenOptions::default()))
        .chain((0..20).map(|s| (s, inner.clone())))
    {
        let truth = Lab::new(generate(seed, &o)).truth();
        for d in &truth.destinations {
            for p in &d.forward_paths {
                assert!(p.len() <= 30, "seed {seed} {}: {} routers", d.name, p.len());
            }
            assert!(d.return_path.len() <= 30, "seed {seed} {} return", d.name);
        }
    }
}

/// Implicit LSPs have two LSRs or more by default, and the oracle then sees them in
/// order with no label; with `implicit_min_lsrs = 1`, lone-LSR implicit tunnels are in
/// the truth, their LSR quoting IP-TTL 1 and no label, like a plain router.
#[test]
fn implicit_lsrs_and_what_shows() {
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
        let topo = generate(seed, &o);
        let truth = vtnt_lab::truth::truth(&topo);
        let oracle = vtnt_lab::oracle(&topo, &truth, &OracleOptions::default());
        for (d, seen) in truth.destinations.iter().zip(&oracle.tunnels) {
            for (t, x) in d.tunnels.iter().zip(seen) {
                assert_eq!(t.class, TunnelClass::Implicit);
                if t.whole {
                    assert!(t.lsrs.len() >= 2, "seed {seed}: {t:?}");
                }
                assert!(!x.label_seen, "seed {seed}: {t:?}");
                if !t.lsr_routers.iter().any(|r| silent(&truth, r)) {
                    assert!(x.observable && x.lsrs_seen_in_order, "seed {seed}: {t:?}");
                }
                n += 1;
            }
        }
    }
    assert!(n > 50);
    let one = GenOptions {
        implicit_min_lsrs: 1,
        lsrs: (1, 1),
        icmp_tunnelling: 0.0,
        ..o
    };
    let mut lab = Lab::new(generate(3, &one));
    let truth = lab.truth();
    assert!(!truth.destinations.is_empty());
    let mut t = Tracer::new(&mut lab);
    for d in &truth.destinations {
        let trace = t.trace(d.dst, 64);
        for tun in &d.tunnels {
            assert_eq!(tun.lsrs.len(), 1);
            for a in trace.iter().flatten().filter(|a| a.from == tun.lsrs[0]) {
                assert_eq!((a.q_ttl, a.labels.len()), (Some(1), 0), "{tun:?}");
            }
        }
    }
}

fn silent(truth: &vtnt_lab::Truth, router: &str) -> bool {
    truth.routers.iter().any(|r| r.name == router && r.silent)
}

/// The oracle agrees with a plain trace to each destination (no ECMP, so every flow
/// takes its path): the ingress and egress answer there or not, a label is quoted by an
/// LSR or the egress or not; a tunnel whose LSRs the trace shows is seen in order; and
/// every tunnel with answering routers whose LSP lets some trace show its LSRs (not UHP
/// with labelled internal prefixes) is observable.
#[test]
fn oracle_agrees_with_traces() {
    let o = GenOptions {
        ecmp: 0.0,
        lsp_ecmp: 0.0,
        ..GenOptions::default()
    };
    let mut checked = 0;
    for seed in 0..20 {
        let topo = generate(seed, &o);
        let truth = vtnt_lab::truth::truth(&topo);
        let oracle = vtnt_lab::oracle(&topo, &truth, &OracleOptions::default());
        let mut lab = Lab::new(topo);
        let mut t = Tracer::new(&mut lab);
        let of = |router: &str| {
            let r = truth.routers.iter().find(|r| r.name == router).unwrap();
            r.addresses.clone()
        };
        for (d, seen) in truth.destinations.iter().zip(&oracle.tunnels) {
            let trace: Vec<_> = t.trace(d.dst, 64).into_iter().flatten().collect();
            for (tun, x) in d.tunnels.iter().zip(seen) {
                let answers = |router: &str| {
                    let addrs = of(router);
                    trace.iter().any(|a| addrs.contains(&a.from))
                };
                let at = format!("seed {seed} {}: {tun:?}", d.name);
                assert_eq!(x.ingress_seen, answers(&tun.ingress_router), "{at}");
                assert_eq!(x.egress_seen, answers(&tun.egress_router), "{at}");
                let labelled = tun
                    .lsr_routers
                    .iter()
                    .chain([&tun.egress_router])
                    .flat_map(|r| of(r))
                    .any(|addr| trace.iter().any(|a| a.from == addr && !a.labels.is_empty()));
                assert_eq!(x.label_seen, labelled, "{at}");
                if [&tun.ingress_router, &tun.egress_router]
                    .into_iter()
                    .chain(&tun.lsr_routers)
                    .all(|r| answers(r))
                {
                    assert!(x.lsrs_seen_in_order, "{at}");
                }
                let quiet = [&tun.ingress_router, &tun.egress_router]
                    .into_iter()
                    .chain(&tun.lsr_routers)
                    .any(|r| silent(&truth, r));
                if !quiet && tun.revelation != Revelation::None {
                    assert!(x.observable, "{at}");
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 50, "{checked}");
}

/// LSPs with equal-cost paths inside (no ECMP diamonds elsewhere): each is `ecmp` with no
/// path, and the truth lists a tunnel per path; every Paris flow's trace is what one of
/// the destination's forward paths shows, and flows spread over the paths.
#[test]
fn flows_through_an_ecmp_lsp_take_one_of_its_paths() {
    let o = GenOptions {
        ecmp: 0.0,
        lsp_ecmp: 1.0,
        ..GenOptions::default()
    };
    let (mut split, mut both) = (0, 0);
    for seed in 0..10 {
        let topo = generate(seed, &o);
        assert!(topo
            .def()
            .lsps
            .iter()
            .filter(|l| l.ecmp)
            .all(|l| l.path.is_none()));
        let mut lab = Lab::new(topo);
        let truth = lab.truth();
        let mut t = Tracer::new(&mut lab);
        for d in &truth.destinations {
            let mut taken = std::collections::BTreeSet::new();
            for flow in 0..8u16 {
                t.flow = 0x4242 ^ flow.wrapping_mul(0x9e37);
                let seen: Vec<Ipv4Addr> = t
                    .trace(d.dst, 64)
                    .iter()
                    .map(|h| h.as_ref().map_or(Ipv4Addr::UNSPECIFIED, |a| a.from))
                    .collect();
                let k = d
                    .forward_paths
                    .iter()
                    .position(|p| expected_hops(d, p) == seen);
                let k = k.unwrap_or_else(|| {
                    panic!(
                        "seed {seed} {}: {seen:?} is none of {:#?}",
                        d.name, d.forward_paths
                    )
                });
                taken.insert(k);
            }
            if d.forward_paths.len() > 1 {
                split += 1;
                both += usize::from(taken.len() > 1);
                assert!(
                    d.tunnels.iter().any(|t| t.branch > 0),
                    "seed {seed} {}",
                    d.name
                );
            }
        }
    }
    assert!(split > 30 && both * 2 > split, "{both} of {split}");
}

/// Every path of an `ecmp` LSP shows to exhaustive probing when the LSP's configuration
/// lets any trace show its LSRs: each internal prefix is reached over the paths it is
/// nearest on (a prefix next to the ingress on one path is not pushed onto another).
#[test]
fn every_path_of_an_ecmp_lsp_is_observable() {
    let o = GenOptions {
        lsp_ecmp: 1.0,
        ..GenOptions::default()
    };
    let mut checked = 0;
    for seed in 0..6 {
        let topo = generate(seed, &o);
        let truth = vtnt_lab::truth::truth(&topo);
        let oracle = vtnt_lab::oracle(&topo, &truth, &OracleOptions::default());
        for (d, seen) in truth.destinations.iter().zip(&oracle.tunnels) {
            for (t, x) in d.tunnels.iter().zip(seen) {
                if t.revelation != Revelation::None {
                    assert!(x.observable, "seed {seed} {}: {t:?}", d.name);
                    checked += usize::from(t.branch > 0);
                }
            }
        }
    }
    assert!(checked > 20, "{checked}");
}

/// A host's traffic rides every LSP on its path whole, so the truth lists every path of
/// each `ecmp` LSP it crosses, however many combinations of paths there are (seed
/// 16636106807449963335 crosses five such LSPs: more combinations than the truth lists
/// forward paths).
#[test]
fn the_truth_lists_every_path_of_every_ecmp_lsp_crossed() {
    let o = GenOptions {
        lsp_ecmp: 1.0,
        ..GenOptions::default()
    };
    for seed in (0..10).chain([16636106807449963335]) {
        let truth = Lab::new(generate(seed, &o)).truth();
        for d in &truth.destinations {
            for t in &d.tunnels {
                let paths = truth.lsps.iter().filter(|l| l.name == t.lsp).count();
                let listed: std::collections::BTreeSet<u8> = d
                    .tunnels
                    .iter()
                    .filter(|u| u.lsp == t.lsp)
                    .map(|u| u.branch)
                    .collect();
                assert_eq!(listed.len(), paths, "seed {seed} {}: {}", d.name, t.lsp);
            }
        }
    }
}

/// Every setting of `vtnt lab generate --set` reads back as it was set, and moved away
/// from its default it changes some topology: each is wired to the generator.
#[test]
fn every_setting_reads_back_and_moves_the_topology() {
    let base = GenOptions::default();
    for (name, _) in vtnt_lab::generate::SETTINGS {
        let default = base.get(name).unwrap_or_else(|| panic!("{name}: no value"));
        let mut o = base.clone();
        o.set(name, &default).unwrap();
        assert_eq!(o, base, "{name}={default} is not the default");
        let other = match name {
            "vendors" => "juniper,linux",
            "host-ttls" => "128",
            "implicit-min-lsrs" => "1",
            "max-hops" => "12",
            "destinations" => "5",
            _ if default == "0" => "1",
            _ => "0",
        };
        let mut o = base.clone();
        o.set(name, other).unwrap();
        assert_eq!(o.get(name).as_deref(), Some(other), "{name}");
        assert!(
            (1..=8).any(|seed| generate_toml(seed, &o) != generate_toml(seed, &base)),
            "{name}={other} changes no topology"
        );
    }
}

#[test]
fn a_bad_setting_is_refused_by_name() {
    let mut o = GenOptions::default();
    for (name, value, says) in [
        (
            "ecmp",
            "1.5",
            "setting `ecmp`: `1.5` is not a share from 0 to 1",
        ),
        ("te-stacks", "NaN", "`NaN` is not a share from 0 to 1"),
        ("max-hops", "7", "`7` is not a number from 8 to 255"),
        ("destinations", "15001", "a number from 1 to 15000"),
        ("vendors", "cisco,acme", "`acme` is none"),
        ("vendors", ",", "`,` is not a list of vendors"),
        ("host-ttls", "64,0", "a list of TTLs from 1 to 255"),
        (
            "colour",
            "1",
            "no generator setting `colour` (settings: vendors, ",
        ),
    ] {
        let e = o.set(name, value).unwrap_err();
        assert!(e.contains(says), "{name}={value}: {e}");
    }
    assert_eq!(
        o,
        GenOptions::default(),
        "a refused setting changes nothing"
    );
}

/// `mpls = 0` makes MPLS-free topologies (the benchmark's control set), and
/// `icmp-rate-limited` routers that rate-limit their ICMP; neither is drawn by default.
#[test]
fn mpls_off_makes_no_tunnel_and_rate_limits_are_drawn_when_asked() {
    let mut o = GenOptions::default();
    o.set("mpls", "0").unwrap();
    o.set("icmp-rate-limited", "0.25").unwrap();
    let (mut limited, mut routers) = (0, 0);
    for seed in 1..=4 {
        let t = generate(seed, &o);
        assert!(t.def().lsps.is_empty(), "seed {seed}: an LSP");
        let truth = vtnt_lab::truth::truth(&t);
        assert!(truth.destinations.iter().all(|d| d.tunnels.is_empty()));
        routers += truth.routers.len();
        limited += truth
            .routers
            .iter()
            .filter(|r| r.icmp_rate == vtnt_lab::generate::RATE_LIMIT)
            .count();
        let plain = generate(seed, &GenOptions::default());
        assert!(plain.def().routers.iter().all(|r| r.icmp_rate == 0));
    }
    assert!(
        limited * 8 > routers && limited * 3 < routers,
        "{limited} of {routers}"
    );
}

/// `six-pe-cores` (RFC 4798): drawn only when asked for; at 1 every LSP but the implicit
/// and `ecmp` ones has IPv4-only LSRs and a return LSP, and every destination's IPv6
/// twin answers a trace, through the 6PE cores both ways, hop for hop as over IPv4
/// (an LSR by its IPv4-mapped address, which the tracer maps back).
#[test]
fn six_pe_cores_are_drawn_when_asked_and_carry_ipv6_both_ways() {
    let mut o = GenOptions::default();
    o.set("six-pe-cores", "1").unwrap();
    let mut cores = 0;
    for seed in 1..=3 {
        let t = generate(seed, &o);
        let plain = generate(seed, &GenOptions::default());
        assert!(plain.def().routers.iter().all(|r| !r.ipv4_only));
        let truth = vtnt_lab::truth::truth(&t);
        for l in &truth.lsps {
            let whole = !l.name.ends_with("-te") && !l.name.ends_with("-back");
            if !whole || l.class == TunnelClass::Implicit {
                continue;
            }
            let v4only = |n: &String| truth.routers.iter().any(|r| &r.name == n && r.ipv4_only);
            let lsrs = &l.path[1..l.path.len() - 1];
            let ecmp = truth.lsps.iter().filter(|x| x.name == l.name).count() > 1;
            assert_eq!(lsrs.iter().all(v4only), !ecmp, "seed {seed} {}", l.name);
            if !ecmp {
                cores += 1;
                assert!(l.class6.is_some(), "seed {seed} {}", l.name);
                let back = format!("{}-back", l.name);
                assert!(truth.lsps.iter().any(|x| x.name == back), "{back}");
            }
        }
        for d in truth
            .destinations
            .iter()
            .filter(|d| d.forward_paths.len() == 1)
        {
            let run = |ipv6: bool| {
                let mut lab = Lab::new(t.clone());
                let mut tr = Tracer::new(&mut lab);
                tr.ipv6 = ipv6;
                tr.trace(d.dst, 40)
            };
            let (v4, v6) = (run(false), run(true));
            let from = |v: &[Option<Answer>]| -> Vec<Option<Ipv4Addr>> {
                v.iter().map(|a| a.as_ref().map(|a| a.from)).collect()
            };
            assert_eq!(from(&v6), from(&v4), "seed {seed} {}", d.name);
            assert_eq!(
                v6.last().and_then(|a| a.as_ref()).map(|a| a.from),
                Some(d.dst)
            );
        }
    }
    assert!(cores > 10, "{cores} 6PE cores");
}
