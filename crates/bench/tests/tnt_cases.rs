//! Situations TNT used to get wrong (issue 19's seven cases), each on a small topology
//! of `topologies/cases/` that reproduces it in the lab (`vtnt lab up` runs any of them),
//! and what TNT must report there: every tunnel the truth has on the path, with the right
//! class, ingress, egress and LSRs (compared by router), and nothing else. Where a
//! heuristic decides the case, the test also runs TNT with it switched off and checks
//! that the case fails then (docs/tnt.md lists the switches).

use std::net::IpAddr;

use vtnt_bench::run_tnt;
use vtnt_lab::{Lab, Topology, TopologyDef, Truth};
use vtnt_tnt::{TntConfig, TntResult, TunnelClass};

/// A tunnel by router names: class, ingress, egress, LSRs in order (`?` for an unknown
/// one; the truth's silent routers are `?` too: they answer no probe).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Named {
    class: TunnelClass,
    ingress: String,
    egress: String,
    lsrs: Vec<String>,
}

/// `topologies/cases/<name>.toml`, changed by `edit`.
fn case(name: &str, edit: impl FnOnce(&mut TopologyDef)) -> Topology {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../topologies/cases")
        .join(format!("{name}.toml"));
    let mut def = Topology::load(&path).expect("topology").def().clone();
    edit(&mut def);
    Topology::from_def(def).expect("edited topology")
}

fn silence(def: &mut TopologyDef, routers: &[&str]) {
    for r in def
        .routers
        .iter_mut()
        .filter(|r| routers.contains(&&*r.name))
    {
        r.silent = true;
    }
}

fn router_of(truth: &Truth, a: Option<IpAddr>) -> String {
    let Some(IpAddr::V4(a)) = a else {
        return "?".into();
    };
    truth
        .routers
        .iter()
        .find(|r| r.addresses.contains(&a))
        .map_or_else(|| format!("host {a}"), |r| r.name.clone())
}

/// Runs TNT from the topology's vantage point to the host `dst_name`: what it reported
/// and what the truth has, by router, and the result.
fn run(topo: Topology, dst_name: &str, config: TntConfig) -> (Vec<Named>, Vec<Named>, TntResult) {
    run_seeded(topo, dst_name, config, 7)
}

/// [`run`] with the engine seeded with `seed` (its probes' flow identifiers).
fn run_seeded(
    topo: Topology,
    dst_name: &str,
    config: TntConfig,
    seed: u64,
) -> (Vec<Named>, Vec<Named>, TntResult) {
    let mut lab = Lab::new(topo);
    let truth = lab.truth();
    let d = truth.by_name(dst_name).expect("destination").clone();
    let run = run_tnt(&mut lab, &[IpAddr::V4(d.dst)], config, seed).expect("campaign");
    let result = run.results.into_iter().next().expect("a result");
    let reported = result
        .tunnels
        .iter()
        .map(|t| Named {
            class: t.class,
            ingress: router_of(&truth, t.ingress),
            egress: router_of(&truth, t.egress),
            lsrs: t.lsrs.iter().map(|l| router_of(&truth, *l)).collect(),
        })
        .collect();
    // a silent router can only be reported as an unanswered slot
    let shown = |name: &String| {
        let silent = truth.routers.iter().any(|r| &r.name == name && r.silent);
        if silent {
            "?".to_string()
        } else {
            name.clone()
        }
    };
    // (a tunnel on every ECMP variant of the path is listed once per variant; an `ecmp`
    // LSP once per path)
    let mut want: Vec<Named> = d
        .tunnels
        .iter()
        .map(|t| Named {
            class: t.class,
            ingress: shown(&t.ingress_router),
            egress: shown(&t.egress_router),
            lsrs: t.lsr_routers.iter().map(shown).collect(),
        })
        .collect();
    want.dedup();
    (reported, want, result)
}

fn dump(r: &TntResult) -> String {
    vtnt_tnt::dump(r)
}

/// The depth of the label stack each hop of the initial trace quoted.
fn stack_depths(r: &TntResult) -> Vec<usize> {
    r.trace
        .as_ref()
        .map(|t| t.hops.iter().map(|h| h.mpls.len()).collect())
        .unwrap_or_default()
}

/// Case 4 (ecmp-returns.toml): no false implicit tunnel from u-turns of alternating sign.
#[test]
fn ecmp_returns_of_unequal_length_make_no_implicit_tunnel() {
    let topo = || case("ecmp-returns", |_| {});
    let (got, want, r) = run(topo(), "dst", TntConfig::default());
    assert!(want.is_empty());
    assert_eq!(got, want, "{}", dump(&r));
    // the u-turns are there: without the shape rule they make a tunnel
    let mut loose = TntConfig::default();
    loose.classify.uturn_shape = false;
    let (got, _, r) = run(topo(), "dst", loose);
    assert_eq!(got.len(), 1, "{}", dump(&r));
    assert_eq!(got[0].class, TunnelClass::Implicit);
}

/// Case 2 (detour-at-ingress.toml): the walk forward finds the tunnel the relative FRPLA
/// rule hides.
#[test]
fn a_detour_at_the_ingress_does_not_hide_the_tunnel_after_it() {
    let topo = || case("detour-at-ingress", |_| {});
    let (got, want, r) = run(topo(), "dst", TntConfig::default());
    assert_eq!(want.len(), 1, "{want:?}");
    assert_eq!(got, want, "{}", dump(&r));
    // without the walk forward the relative rule misses it; without the relative rule
    // the egress fires by itself
    let no_walk = TntConfig {
        walk_forward: 0,
        ..TntConfig::default()
    };
    let (got, _, r) = run(topo(), "dst", no_walk.clone());
    assert!(got.is_empty(), "{}", dump(&r));
    let mut absolute = no_walk;
    absolute.classify.frpla_relative = false;
    let (got, _, r) = run(topo(), "dst", absolute);
    assert_eq!(got, want, "{}", dump(&r));
}

/// Case 1 (invisible-uhp.toml, LSRs silent, no buddy trace): the DPR trace to the
/// repeated hop ends `u1, *, *, u4, u5`, and u4 is the missing egress, not an LSR. Case 7:
/// found by the buddy trace, the egress is known by its address on the link to the
/// repeated hop, and the result says so.
#[test]
fn a_uhp_egress_revealed_by_dpr_is_the_egress() {
    let no_buddy = TntConfig {
        buddy: false,
        ..TntConfig::default()
    };
    let silent = case("invisible-uhp", |d| silence(d, &["u2", "u3"]));
    let (got, want, r) = run(silent, "dst", no_buddy);
    assert_eq!(want.len(), 1, "{want:?}");
    assert_eq!(got, want, "{}", dump(&r));
    let (got, want, r) = run(case("invisible-uhp", |_| {}), "dst", TntConfig::default());
    assert_eq!(got, want, "{}", dump(&r));
    assert!(
        r.tunnels[0].note.is_some_and(|n| n.contains("buddy")),
        "{}",
        dump(&r)
    );
}

/// Case 7 (one-lsr.toml): a one-LSR tunnel shown whole by the trace to its egress is
/// DPR's, as the truth says, not a BRPR step.
#[test]
fn a_one_lsr_tunnel_revealed_by_the_trace_to_its_egress_is_dpr() {
    let (got, want, r) = run(case("one-lsr", |_| {}), "dst", TntConfig::default());
    assert_eq!(want.len(), 1, "{want:?}");
    assert_eq!(got, want, "{}", dump(&r));
    let truth = Lab::new(case("one-lsr", |_| {})).truth();
    let t = &truth.by_name("dst").unwrap().tunnels[0];
    assert_eq!(t.revelation, vtnt_lab::Revelation::Dpr);
    let rev = r.tunnels[0].revelation.expect("revealed");
    assert_eq!(
        rev.method,
        Some(vtnt_tnt::RevealMethod::Dpr),
        "{}",
        dump(&r)
    );
}

/// Case 6 (invisible-php.toml, egress silent): the initial trace shows `i, *, y`; the
/// tunnel is `i -> ?` with l1-l3, not `? -> y` missing l1.
#[test]
fn a_silent_egress_is_unknown_not_replaced() {
    let (got, want, r) = run(case("invisible-php", |_| {}), "dst", TntConfig::default());
    assert_eq!(got, want, "{}", dump(&r));
    let silent = case("invisible-php", |d| silence(d, &["e"]));
    let (got, want, r) = run(silent, "dst", TntConfig::default());
    assert_eq!(got, want, "{}", dump(&r));
}

/// Case 3 (explicit-uhp.toml, explicit-uhp-at-gateway.toml): the UHP egress quotes
/// explicit null and is the egress, not an LSR with the next hop (or the host) as egress.
#[test]
fn an_explicit_uhp_egress_is_the_last_labelled_hop() {
    for name in ["explicit-uhp", "explicit-uhp-at-gateway"] {
        let (got, want, r) = run(case(name, |_| {}), "dst", TntConfig::default());
        assert_eq!(want.len(), 1, "{name}: {want:?}");
        assert_eq!(got, want, "{name}: {}", dump(&r));
        // without the explicit-null rule, the egress is taken for an LSR
        let mut off = TntConfig::default();
        off.classify.egress_label = false;
        let (got, _, r) = run(case(name, |_| {}), "dst", off);
        assert_eq!(got[0].lsrs, ["l1", "l2", "e"], "{name}: {}", dump(&r));
    }
}

/// Case 5 (ecmp-before-ingress.toml): a revelation trace that meets the ingress under its
/// other address (ECMP before it) is run again on another flow until it shows the
/// ingress; four destinations spread the initial traces over both branches.
#[test]
fn an_ingress_met_under_another_address_is_still_the_ingress() {
    let topo = || case("ecmp-before-ingress", |_| {});
    let mut lost = 0;
    for d in ["d1", "d2", "d3", "d4"] {
        let (got, want, r) = run(topo(), d, TntConfig::default());
        assert_eq!(want.len(), 1, "{want:?}");
        assert_eq!(got, want, "{d}: {}", dump(&r));
        let off = TntConfig {
            ingress_retries: 0,
            ..TntConfig::default()
        };
        let (got, _, _) = run(topo(), d, off);
        lost += usize::from(got.is_empty());
    }
    // some destination's revelation trace met the ingress under its other address, and
    // without the retries lost the tunnel
    assert!(lost > 0, "no revelation trace took the other branch");
}

/// A blind spot (invisible-php.toml, egress `<64,64>`, the return path a tunnel too):
/// both directions hide the LSRs and the egress pushes its own replies without
/// propagating, so FRPLA is 0 and RTLA does not apply. Only a test of the hop pair finds
/// it: the blind-spot candidate.
#[test]
fn a_tunnel_hidden_both_ways_behind_a_64_64_egress_is_found() {
    let topo = || {
        case("invisible-php", |d| {
            for r in d.routers.iter_mut().filter(|r| r.name == "e") {
                r.vendor = vtnt_lab::Vendor::Linux;
            }
            let mut back = d.lsps[0].clone();
            back.name = "php-back".into();
            std::mem::swap(&mut back.ingress, &mut back.egress);
            d.lsps.push(back);
        })
    };
    let (got, want, r) = run(topo(), "dst", TntConfig::default());
    assert_eq!(want.len(), 1, "{want:?}");
    assert_eq!(got, want, "{}", dump(&r));
    let mut off = TntConfig::default();
    off.classify.blind_spots = false;
    let (got, _, r) = run(topo(), "dst", off);
    assert!(got.is_empty(), "{}", dump(&r));
}

/// An invisible UHP tunnel whose internal prefixes are label switched
/// (invisible-uhp.toml, `internal-labelled`): no trace can show its LSRs, but the buddy
/// trace reaches the missing egress right after the ingress, so the tunnel is reported
/// with its class and both ends, its LSRs hidden and said to be.
#[test]
fn an_unrevealable_uhp_tunnel_is_reported_with_its_ends() {
    let topo = case("invisible-uhp", |d| d.lsps[0].internal_labelled = true);
    let (got, want, r) = run(topo, "dst", TntConfig::default());
    assert_eq!(want.len(), 1, "{want:?}");
    assert_eq!(got.len(), 1, "{}", dump(&r));
    assert_eq!(
        (got[0].class, &got[0].ingress, &got[0].egress),
        (want[0].class, &want[0].ingress, &want[0].egress),
        "{}",
        dump(&r)
    );
    assert!(got[0].lsrs.is_empty());
    assert!(r.tunnels[0].note.is_some_and(|n| n.contains("LSRs hidden")));
}

/// A label stack (explicit-uhp.toml made PHP with a service label): the LSRs quote the
/// transport label over the egress's VPN label; the penultimate hop pops the transport
/// label, so the egress quotes the service label alone, a stack one shallower. It is the
/// egress, not a last LSR.
#[test]
fn a_service_label_left_alone_marks_the_egress() {
    let topo = || {
        case("explicit-uhp", |d| {
            d.lsps[0].pop = vtnt_lab::Pop::Php;
            d.lsps[0].vpn_label = true;
        })
    };
    let (got, want, r) = run(topo(), "dst", TntConfig::default());
    assert_eq!(want.len(), 1, "{want:?}");
    assert_eq!(got, want, "{}", dump(&r));
    let depths = stack_depths(&r);
    assert!(depths.contains(&2) && depths.contains(&1), "{depths:?}");
    let mut off = TntConfig::default();
    off.classify.egress_label = false;
    let (got, _, r) = run(topo(), "dst", off);
    assert_eq!(got[0].lsrs, ["l1", "l2", "e"], "{}", dump(&r));
}

/// ECMP inside LSPs (ecmp-inside-lsp.toml): LDP follows both equal-cost paths of each
/// LSP, the ingress choosing one per flow. TNT reports each tunnel on one path: its
/// class, its ends and the LSRs of one of its paths, in order, never LSRs of two. The
/// explicit tunnel shows on both paths across four destinations; the invisible one is
/// revealed by BRPR, each step a trace to the address the last revealed LSR answered
/// from, which names the link it was entered on and so keeps to its path, whichever
/// path the engine's flows take first.
#[test]
fn a_tunnel_with_ecmp_inside_is_reported_on_one_path() {
    let topo = || case("ecmp-inside-lsp", |_| {});
    for (dsts, seeds) in [
        (["x1", "x2", "x3", "x4"], 7..=7),
        (["b1", "b2", "b3", "b4"], 1..=4),
    ] {
        let mut paths = std::collections::BTreeSet::new();
        for d in dsts {
            for seed in seeds.clone() {
                let (got, want, r) = run_seeded(topo(), d, TntConfig::default(), seed);
                assert_eq!(want.len(), 2, "{d}: {want:?}");
                assert_eq!(got.len(), 1, "{d} seed {seed}: {}", dump(&r));
                assert!(
                    want.contains(&got[0]),
                    "{d} seed {seed}: {got:?} is on no one path of {want:?}: {}",
                    dump(&r)
                );
                paths.insert(got[0].lsrs.clone());
            }
        }
        assert_eq!(paths.len(), 2, "{dsts:?}: always the same path {paths:?}");
    }
}

/// LDP over RSVP-TE (ldp-over-te.toml): inside the TE LSP the LSRs quote two labels, and
/// its egress, the LDP LSP's penultimate hop, quotes the LDP label alone (TE PHP) or
/// under explicit null (TE UHP): shallower than the hop before it, or label 0 on top,
/// yet an LSR; the egress is the next hop. Also with a service label under the LDP
/// label, and with both LSPs invisible (the trace to the egress is IP-routed to l1,
/// which sends it over the TE LSP, hiding l2 from it too).
#[test]
fn a_te_tunnel_inside_an_ldp_tunnel_is_no_egress() {
    type Edit = fn(&mut TopologyDef);
    let variants: [(&str, Edit); 4] = [
        ("te php", |_| {}),
        ("te uhp", |d| d.lsps[0].pop = vtnt_lab::Pop::Uhp),
        ("vpn", |d| d.lsps[1].vpn_label = true),
        ("invisible", |d| {
            for l in &mut d.lsps {
                l.ttl_propagate = false;
            }
        }),
    ];
    for (name, edit) in variants {
        let (got, want, r) = run(case("ldp-over-te", edit), "dst", TntConfig::default());
        assert_eq!(want.len(), 1, "{name}: {want:?}");
        assert_eq!(want[0].lsrs, ["l1", "l2", "l3"], "{name}");
        assert_eq!(got, want, "{name}: {}", dump(&r));
        if name != "invisible" {
            let depths = stack_depths(&r);
            let deepest = if name == "vpn" { 3 } else { 2 };
            assert!(depths.contains(&deepest), "{name}: {depths:?}");
        }
    }
}
