//! Situations TNT used to get wrong, each on a small topology of its own that reproduces
//! it in the lab, and what TNT must report there: every tunnel the truth has on the path,
//! with the right class, ingress, egress and LSRs (compared by router), and nothing else.
//! Where a heuristic decides the case, the test also runs TNT with the heuristic
//! switched off and says what changes.

use std::net::IpAddr;

use vtnt_bench::run_tnt;
use vtnt_lab::{Lab, Topology};
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

fn router_of(lab: &Lab, a: Option<IpAddr>) -> String {
    let Some(IpAddr::V4(a)) = a else {
        return "?".into();
    };
    let truth = lab.truth();
    truth
        .routers
        .iter()
        .find(|r| r.addresses.contains(&a))
        .map_or_else(|| format!("host {a}"), |r| r.name.clone())
}

/// Runs TNT from the topology's vantage point to the host `dst_name`; its tunnels by
/// router, and the result.
fn run(toml: &str, dst_name: &str, config: TntConfig) -> (Vec<Named>, Vec<Named>, TntResult) {
    let topo = Topology::parse(toml, "case.toml").expect("topology");
    let mut lab = Lab::new(topo);
    let truth = lab.truth();
    let d = truth.by_name(dst_name).expect("destination").clone();
    let run = run_tnt(&mut lab, &[IpAddr::V4(d.dst)], config, 7).expect("campaign");
    let result = run.results.into_iter().next().expect("a result");
    let reported = result
        .tunnels
        .iter()
        .map(|t| Named {
            class: t.class,
            ingress: router_of(&lab, t.ingress),
            egress: router_of(&lab, t.egress),
            lsrs: t.lsrs.iter().map(|l| router_of(&lab, *l)).collect(),
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
    // (a tunnel on every ECMP variant of the path is listed once per variant)
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

/// Case 4. An MPLS-free path whose replies return over two equal-cost branches of unequal
/// length (1 and 3 hops, back from `a` to `gw` only): time exceeded and echo replies of
/// one router hash onto different branches, so its u-turn is +-2, in either sign, hop
/// after hop. A u-turn run of an implicit tunnel is positive (an LSR's time exceeded
/// travels on to the egress and back), so alternating signs are no tunnel.
const ECMP_RETURNS: &str = r#"
name = "ecmp-returns"
[[vantage-point]]
name = "vp"
address = "192.0.2.2/24"
gateway = "192.0.2.1"
router = "gw"
[[router]]
name = "gw"
vendor = "cisco"
[[router]]
name = "a"
vendor = "cisco"
[[router]]
name = "m1"
vendor = "cisco"
[[router]]
name = "m2"
vendor = "cisco"
[[router]]
name = "b"
vendor = "cisco"
[[router]]
name = "c"
vendor = "cisco"
[[router]]
name = "d"
vendor = "cisco"
[[router]]
name = "e"
vendor = "cisco"
[[router]]
name = "f"
vendor = "cisco"
[[link]]
a = "gw"
b = "a"
prefix = "100.64.0.0/30"
cost = 10
cost-back = 30
[[link]]
a = "a"
b = "m1"
prefix = "100.64.0.4/30"
cost = 10
cost-back = 100
[[link]]
a = "m1"
b = "m2"
prefix = "100.64.0.8/30"
cost = 10
cost-back = 100
[[link]]
a = "m2"
b = "gw"
prefix = "100.64.0.12/30"
cost = 10
cost-back = 100
[[link]]
a = "a"
b = "b"
prefix = "100.64.0.16/30"
[[link]]
a = "b"
b = "c"
prefix = "100.64.0.20/30"
[[link]]
a = "c"
b = "d"
prefix = "100.64.0.24/30"
[[link]]
a = "d"
b = "e"
prefix = "100.64.0.28/30"
[[link]]
a = "e"
b = "f"
prefix = "100.64.0.32/30"
[[host]]
name = "dst"
address = "203.0.113.2/29"
gateway = "203.0.113.1"
router = "f"
"#;

#[test]
fn ecmp_returns_of_unequal_length_make_no_implicit_tunnel() {
    let (got, want, r) = run(ECMP_RETURNS, "dst", TntConfig::default());
    assert!(want.is_empty());
    assert_eq!(got, want, "{}", dump(&r));
    // the u-turns are there: without the shape rule they make a tunnel
    let mut loose = TntConfig::default();
    loose.classify.uturn_shape = false;
    let (got, _, r) = run(ECMP_RETURNS, "dst", loose);
    assert_eq!(got.len(), 1, "{}", dump(&r));
    assert_eq!(got[0].class, TunnelClass::Implicit);
}

/// Case 2. An invisible PHP tunnel `i -> e` (LSRs l1-l3, DPR reveals them) whose ingress
/// answers over a 3-hop detour (`i` routes back through d1-d3) while the egress's replies
/// come back over a path as long as the real forward one (through `z`, avoiding `i`):
/// FRPLA is 3 at the ingress and 3 at the egress. The relative FRPLA rule (a hop fires on
/// its rise over its ingress's FRPLA) sees a rise of 0 at the egress; the rise at the
/// ingress fires, reveals nothing, and the hop pair after it is tested against the same
/// base.
const DETOUR_AT_INGRESS: &str = r#"
name = "detour-at-ingress"
[[vantage-point]]
name = "vp"
address = "192.0.2.2/24"
gateway = "192.0.2.1"
router = "gw"
[[router]]
name = "gw"
vendor = "cisco"
[[router]]
name = "x"
vendor = "cisco"
[[router]]
name = "i"
vendor = "cisco"
[[router]]
name = "d1"
vendor = "cisco"
[[router]]
name = "d2"
vendor = "cisco"
[[router]]
name = "d3"
vendor = "cisco"
[[router]]
name = "l1"
vendor = "cisco"
[[router]]
name = "l2"
vendor = "cisco"
[[router]]
name = "l3"
vendor = "cisco"
[[router]]
name = "e"
vendor = "cisco"
[[router]]
name = "z"
vendor = "cisco"
[[router]]
name = "y"
vendor = "cisco"
[[link]]
a = "gw"
b = "x"
prefix = "100.64.0.0/30"
[[link]]
a = "x"
b = "i"
prefix = "100.64.0.4/30"
cost = 10
cost-back = 50
[[link]]
a = "i"
b = "d1"
prefix = "100.64.0.8/30"
cost = 1
cost-back = 100
[[link]]
a = "d1"
b = "d2"
prefix = "100.64.0.12/30"
cost = 1
cost-back = 100
[[link]]
a = "d2"
b = "d3"
prefix = "100.64.0.16/30"
cost = 1
cost-back = 100
[[link]]
a = "d3"
b = "x"
prefix = "100.64.0.20/30"
cost = 1
cost-back = 100
[[link]]
a = "i"
b = "l1"
prefix = "100.64.0.24/30"
cost = 10
cost-back = 100
[[link]]
a = "l1"
b = "l2"
prefix = "100.64.0.28/30"
[[link]]
a = "l2"
b = "l3"
prefix = "100.64.0.32/30"
[[link]]
a = "l3"
b = "e"
prefix = "100.64.0.36/30"
[[link]]
a = "l1"
b = "z"
prefix = "100.64.0.40/30"
cost = 10
cost-back = 100
[[link]]
a = "z"
b = "x"
prefix = "100.64.0.44/30"
cost = 10
cost-back = 100
[[link]]
a = "e"
b = "y"
prefix = "100.64.0.48/30"
[[host]]
name = "dst"
address = "203.0.113.2/29"
gateway = "203.0.113.1"
router = "y"
[[lsp]]
name = "hidden"
ingress = "i"
egress = "e"
ttl-propagate = false
rfc4950 = false
"#;

#[test]
fn a_detour_at_the_ingress_does_not_hide_the_tunnel_after_it() {
    let (got, want, r) = run(DETOUR_AT_INGRESS, "dst", TntConfig::default());
    assert_eq!(want.len(), 1, "{want:?}");
    assert_eq!(got, want, "{}", dump(&r));
    // without the walk forward the relative rule misses it; without the relative rule
    // the egress fires by itself
    let no_walk = TntConfig {
        walk_forward: 0,
        ..TntConfig::default()
    };
    let (got, _, r) = run(DETOUR_AT_INGRESS, "dst", no_walk.clone());
    assert!(got.is_empty(), "{}", dump(&r));
    let mut absolute = no_walk;
    absolute.classify.frpla_relative = false;
    let (got, _, r) = run(DETOUR_AT_INGRESS, "dst", absolute);
    assert_eq!(got, want, "{}", dump(&r));
}

/// An invisible UHP tunnel `u1 -> u4` whose LSRs are `silent` (each an argument: the
/// LSR routers' `silent` setting).
fn uhp_tunnel(silent_lsrs: bool) -> String {
    format!(
        r#"
name = "uhp"
[[vantage-point]]
name = "vp"
address = "192.0.2.2/24"
gateway = "192.0.2.1"
router = "gw"
[[router]]
name = "gw"
vendor = "cisco"
[[router]]
name = "u1"
vendor = "cisco"
[[router]]
name = "u2"
vendor = "cisco"
silent = {silent_lsrs}
[[router]]
name = "u3"
vendor = "cisco"
silent = {silent_lsrs}
[[router]]
name = "u4"
vendor = "cisco"
[[router]]
name = "u5"
vendor = "nokia"
[[link]]
a = "gw"
b = "u1"
prefix = "100.64.0.0/30"
[[link]]
a = "u1"
b = "u2"
prefix = "100.64.7.0/30"
[[link]]
a = "u2"
b = "u3"
prefix = "100.64.7.4/30"
[[link]]
a = "u3"
b = "u4"
prefix = "100.64.7.8/30"
[[link]]
a = "u4"
b = "u5"
prefix = "100.64.7.12/30"
[[host]]
name = "dst"
address = "203.0.113.50/29"
gateway = "203.0.113.49"
router = "u5"
[[lsp]]
name = "uhp"
ingress = "u1"
egress = "u4"
ttl-propagate = false
pop = "uhp"
rfc4950 = false
egress-forwards-ttl1 = true
"#
    )
}

/// Case 1. An invisible UHP tunnel whose LSRs are silent, revealed without the buddy
/// trace (off here; in the wild it fails when the egress does not answer on its far
/// address): the DPR trace to the repeated hop ends `u1, *, *, u4, u5`, and the hop
/// before the traced address is the missing egress, not an LSR.
#[test]
fn a_uhp_egress_revealed_by_dpr_is_the_egress() {
    let no_buddy = TntConfig {
        buddy: false,
        ..TntConfig::default()
    };
    let (got, want, r) = run(&uhp_tunnel(true), "dst", no_buddy);
    assert_eq!(want.len(), 1, "{want:?}");
    assert_eq!(got, want, "{}", dump(&r));
    // Case 7: found by the buddy trace, the egress is known by its address on the link
    // to the repeated hop, and the result says so.
    let (got, want, r) = run(&uhp_tunnel(false), "dst", TntConfig::default());
    assert_eq!(got, want, "{}", dump(&r));
    assert!(
        r.tunnels[0].note.is_some_and(|n| n.contains("buddy")),
        "{}",
        dump(&r)
    );
}

/// Case 7. A one-LSR invisible PHP tunnel whose internal prefixes are not label switched:
/// the trace to the egress shows its one LSR, and the BRPR step after it shows nothing
/// more. The trace that revealed it went to the egress: DPR, as the truth says.
const ONE_LSR: &str = r#"
name = "one-lsr"
[[vantage-point]]
name = "vp"
address = "192.0.2.2/24"
gateway = "192.0.2.1"
router = "gw"
[[router]]
name = "gw"
vendor = "cisco"
[[router]]
name = "i"
vendor = "cisco"
[[router]]
name = "l"
vendor = "cisco"
[[router]]
name = "e"
vendor = "juniper"
[[router]]
name = "y"
vendor = "linux"
[[link]]
a = "gw"
b = "i"
prefix = "100.64.0.0/30"
[[link]]
a = "i"
b = "l"
prefix = "100.64.0.4/30"
[[link]]
a = "l"
b = "e"
prefix = "100.64.0.8/30"
[[link]]
a = "e"
b = "y"
prefix = "100.64.0.12/30"
[[host]]
name = "dst"
address = "203.0.113.2/29"
gateway = "203.0.113.1"
router = "y"
[[lsp]]
name = "one"
ingress = "i"
egress = "e"
ttl-propagate = false
rfc4950 = false
[[lsp]]
name = "one-back"
ingress = "e"
egress = "i"
ttl-propagate = false
rfc4950 = false
"#;

#[test]
fn a_one_lsr_tunnel_revealed_by_the_trace_to_its_egress_is_dpr() {
    let (got, want, r) = run(ONE_LSR, "dst", TntConfig::default());
    assert_eq!(want.len(), 1, "{want:?}");
    assert_eq!(got, want, "{}", dump(&r));
    let topo = Topology::parse(ONE_LSR, "case.toml").unwrap();
    let truth = Lab::new(topo).truth();
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

/// An invisible PHP tunnel `i -> e` over LSRs l1-l3 (DPR reveals them), its egress
/// `silent` or not.
fn php_tunnel(silent_egress: bool) -> String {
    format!(
        r#"
name = "php"
[[vantage-point]]
name = "vp"
address = "192.0.2.2/24"
gateway = "192.0.2.1"
router = "gw"
[[router]]
name = "gw"
vendor = "cisco"
[[router]]
name = "i"
vendor = "cisco"
[[router]]
name = "l1"
vendor = "cisco"
[[router]]
name = "l2"
vendor = "cisco"
[[router]]
name = "l3"
vendor = "cisco"
[[router]]
name = "e"
vendor = "cisco"
silent = {silent_egress}
[[router]]
name = "y"
vendor = "cisco"
[[router]]
name = "w"
vendor = "cisco"
[[link]]
a = "gw"
b = "i"
prefix = "100.64.0.0/30"
[[link]]
a = "i"
b = "l1"
prefix = "100.64.0.4/30"
[[link]]
a = "l1"
b = "l2"
prefix = "100.64.0.8/30"
[[link]]
a = "l2"
b = "l3"
prefix = "100.64.0.12/30"
[[link]]
a = "l3"
b = "e"
prefix = "100.64.0.16/30"
[[link]]
a = "e"
b = "y"
prefix = "100.64.0.20/30"
[[link]]
a = "y"
b = "w"
prefix = "100.64.0.24/30"
[[host]]
name = "dst"
address = "203.0.113.2/29"
gateway = "203.0.113.1"
router = "w"
[[lsp]]
name = "php"
ingress = "i"
egress = "e"
ttl-propagate = false
rfc4950 = false
"#
    )
}

/// Case 6. A silent egress: the initial trace shows `i, *, y`; the tunnel is `i -> ?`
/// with l1-l3, and its revelation is complete only if no LSR slot is unknown.
#[test]
fn a_silent_egress_is_unknown_not_replaced() {
    let (got, want, r) = run(&php_tunnel(false), "dst", TntConfig::default());
    assert_eq!(got, want, "{}", dump(&r));
    let (got, want, r) = run(&php_tunnel(true), "dst", TntConfig::default());
    assert_eq!(got, want, "{}", dump(&r));
}

/// An explicit tunnel `i -> e` over l1, l2 ending with UHP; `e` is the destination's
/// gateway when `egress_is_gateway` (its LAN label switched, as LDP does for every IGP
/// prefix), else `y` follows it.
fn explicit_uhp(egress_is_gateway: bool) -> String {
    let (tail, gw) = if egress_is_gateway {
        ("", "e")
    } else {
        (
            r#"
[[router]]
name = "y"
vendor = "cisco"
[[link]]
a = "e"
b = "y"
prefix = "100.64.0.16/30"
"#,
            "y",
        )
    };
    format!(
        r#"
name = "explicit-uhp"
[[vantage-point]]
name = "vp"
address = "192.0.2.2/24"
gateway = "192.0.2.1"
router = "gw"
[[router]]
name = "gw"
vendor = "cisco"
[[router]]
name = "i"
vendor = "cisco"
[[router]]
name = "l1"
vendor = "cisco"
[[router]]
name = "l2"
vendor = "cisco"
[[router]]
name = "e"
vendor = "cisco"
[[link]]
a = "gw"
b = "i"
prefix = "100.64.0.0/30"
[[link]]
a = "i"
b = "l1"
prefix = "100.64.0.4/30"
[[link]]
a = "l1"
b = "l2"
prefix = "100.64.0.8/30"
[[link]]
a = "l2"
b = "e"
prefix = "100.64.0.12/30"
{tail}
[[host]]
name = "dst"
address = "203.0.113.2/29"
gateway = "203.0.113.1"
router = "{gw}"
[[lsp]]
name = "explicit"
ingress = "i"
egress = "e"
pop = "uhp"
internal-labelled = {egress_is_gateway}
"#
    )
}

/// Case 3. An explicit tunnel ending with UHP: the egress is the last labelled hop
/// (LSE-TTL 1, it pops the label itself), not the hop after it; when the egress is the
/// destination's gateway, the host is no egress.
#[test]
fn an_explicit_uhp_egress_is_the_last_labelled_hop() {
    for gateway in [false, true] {
        let (got, want, r) = run(&explicit_uhp(gateway), "dst", TntConfig::default());
        assert_eq!(want.len(), 1, "{want:?}");
        assert_eq!(got, want, "{}", dump(&r));
        // without the explicit-null rule, the egress is taken for an LSR
        let mut off = TntConfig::default();
        off.classify.explicit_null_egress = false;
        let (got, _, r) = run(&explicit_uhp(gateway), "dst", off);
        assert_eq!(got[0].lsrs, ["l1", "l2", "e"], "{}", dump(&r));
    }
}

/// Case 5. ECMP before the ingress: `a` splits over `b1` and `b2`, which both reach the
/// ingress `i`, each over its own link, and `i` answers from the interface a packet came
/// in on. A revelation trace to the egress can take the other branch than the initial
/// trace did, and meet `i` under its other address. Four destinations behind `y` spread
/// the initial traces over both branches.
const ECMP_BEFORE_INGRESS: &str = r#"
name = "ecmp-before-ingress"
[[vantage-point]]
name = "vp"
address = "192.0.2.2/24"
gateway = "192.0.2.1"
router = "gw"
[[router]]
name = "gw"
vendor = "cisco"
[[router]]
name = "a"
vendor = "cisco"
[[router]]
name = "b1"
vendor = "cisco"
[[router]]
name = "b2"
vendor = "cisco"
[[router]]
name = "i"
vendor = "cisco"
[[router]]
name = "l1"
vendor = "cisco"
[[router]]
name = "l2"
vendor = "cisco"
[[router]]
name = "l3"
vendor = "cisco"
[[router]]
name = "e"
vendor = "cisco"
[[router]]
name = "y"
vendor = "cisco"
[[link]]
a = "gw"
b = "a"
prefix = "100.64.0.0/30"
[[link]]
a = "a"
b = "b1"
prefix = "100.64.0.4/30"
[[link]]
a = "a"
b = "b2"
prefix = "100.64.0.8/30"
[[link]]
a = "b1"
b = "i"
prefix = "100.64.0.12/30"
[[link]]
a = "b2"
b = "i"
prefix = "100.64.0.16/30"
[[link]]
a = "i"
b = "l1"
prefix = "100.64.0.20/30"
[[link]]
a = "l1"
b = "l2"
prefix = "100.64.0.24/30"
[[link]]
a = "l2"
b = "l3"
prefix = "100.64.0.28/30"
[[link]]
a = "l3"
b = "e"
prefix = "100.64.0.32/30"
[[link]]
a = "e"
b = "y"
prefix = "100.64.0.36/30"
[[host]]
name = "d1"
address = "203.0.113.2/29"
gateway = "203.0.113.1"
router = "y"
[[host]]
name = "d2"
address = "203.0.113.10/29"
gateway = "203.0.113.9"
router = "y"
[[host]]
name = "d3"
address = "203.0.113.18/29"
gateway = "203.0.113.17"
router = "y"
[[host]]
name = "d4"
address = "203.0.113.26/29"
gateway = "203.0.113.25"
router = "y"
[[lsp]]
name = "hidden"
ingress = "i"
egress = "e"
ttl-propagate = false
rfc4950 = false
"#;

#[test]
fn an_ingress_met_under_another_address_is_still_the_ingress() {
    let mut aliased = 0;
    let mut lost = 0;
    for d in ["d1", "d2", "d3", "d4"] {
        let (got, want, r) = run(ECMP_BEFORE_INGRESS, d, TntConfig::default());
        assert_eq!(want.len(), 1, "{want:?}");
        assert_eq!(got, want, "{d}: {}", dump(&r));
        aliased += usize::from(r.tunnels[0].ingress_alias.is_some());
        let off = TntConfig {
            anchor_alias: false,
            ..TntConfig::default()
        };
        let (got, _, _) = run(ECMP_BEFORE_INGRESS, d, off);
        lost += usize::from(got.is_empty());
    }
    // some destination's trace met the ingress under its other address, and without the
    // fallback lost the tunnel
    assert!(
        aliased > 0 && aliased == lost,
        "{aliased} aliased, {lost} lost"
    );
}
