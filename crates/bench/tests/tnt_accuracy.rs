//! TNT against the lab's ground truth, scored strictly (crates/bench/src/accuracy.rs):
//! the reference topology, and 100 generated topologies from a fixed seed (42, printed;
//! `VTNT_ACCURACY_SEED=<seed>` and `VTNT_ACCURACY_TOPOLOGIES=<n>` run others).
//!
//! Asserted: issue 19's goals (>= 95% of existing tunnels with the right class, ingress
//! and egress; no wrong LSR; no false tunnel, default or brute force), every reference
//! tunnel right, no wrong signature. The goals are printed with the figures too.

use vtnt_bench::{tnt_accuracy, AccuracyOptions, AccuracyReport};

/// Prints the report, every miss line and the goals with the figures.
fn print(report: &AccuracyReport) {
    println!("{}", report.to_markdown());
    for m in &report.misses {
        println!("miss: {m}");
    }
    let all = &report.strict.all;
    let ends = all.ends_right as f64 / all.truth.max(1) as f64;
    let met = |ok: bool| if ok { "met" } else { "NOT MET" };
    println!(
        "goal: >= 95% of existing tunnels with the right class, ingress and egress: {:.1}% ({}/{}), {}",
        ends * 100.0,
        all.ends_right,
        all.truth,
        met(ends >= 0.95)
    );
    println!(
        "goal: no wrong LSR: {}, {}",
        report.strict.wrong_lsrs,
        met(report.strict.wrong_lsrs == 0)
    );
}

/// No false tunnel, on paths with MPLS or without, in either mode; no wrong signature.
fn assert_no_false_tunnels(report: &AccuracyReport) {
    let seed = report.seed;
    let b = report.brute_force.as_ref().expect("brute-force run");
    for (mode, s) in [("default", &report.strict), ("brute force", &b.strict)] {
        assert_eq!(s.false_tunnels, 0, "{mode}: false tunnels (seed {seed})");
        assert_eq!(
            s.false_tunnels_on_mpls_free_paths, 0,
            "{mode}: false tunnels on MPLS-free paths (seed {seed})"
        );
    }
    assert_eq!(
        report.routers.signature_wrong, 0,
        "wrong signatures (seed {seed})"
    );
}

/// The probe budget's phases add up to the probes sent, and its trigger split to the
/// revelation probes, in either mode.
fn assert_budget_adds_up(report: &AccuracyReport) {
    let b = report.brute_force.as_ref().expect("brute-force run");
    for (mode, p) in [("default", &report.probes), ("brute force", &b.probes)] {
        let g = &p.budget;
        assert_eq!(g.total(), p.total, "{mode}: phases add up to every probe");
        assert_eq!(g.initial, p.initial, "{mode}: initial traces");
        assert_eq!(g.hop_pings + g.revealed_pings, p.pings, "{mode}: pings");
        let triggers = g.mttl + g.dup_ip + g.rtla + g.frpla + g.blind + g.brute_force;
        assert_eq!(triggers, p.revelation, "{mode}: revelation by trigger");
    }
}

#[test]
fn reference_topology() {
    let report = tnt_accuracy(&AccuracyOptions::new(0, 0)).expect("campaign runs");
    print(&report);
    assert_no_false_tunnels(&report);
    assert_budget_adds_up(&report);
    // every class is there: DPR, BRPR and buddy traces (UHP) all ran, and revealed LSRs
    // were pinged
    let g = &report.probes.budget;
    assert!(
        g.dpr > 0 && g.brpr > 0 && g.buddy > 0 && g.revealed_pings > 0,
        "{g:?}"
    );
    // One tunnel of every class (two invisible PHP), each reported exactly right.
    let s = &report.strict;
    for c in &s.classes {
        assert!(c.truth >= 1, "reference has a {} tunnel", c.class);
        assert_eq!(c.correct, c.truth, "{} tunnels right", c.class);
        assert_eq!(c.reported_correct, c.reported, "{} reports right", c.class);
        assert_eq!(c.observable, c.truth, "{} tunnels observable", c.class);
    }
    assert_eq!((s.partial.tunnels, s.wrong_lsrs), (0, 0));
}

#[test]
fn generated_topologies() {
    let seed = std::env::var("VTNT_ACCURACY_SEED")
        .map_or(42, |s| s.parse().expect("VTNT_ACCURACY_SEED must be a u64"));
    let n = std::env::var("VTNT_ACCURACY_TOPOLOGIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    println!(
        "tnt-accuracy seed {seed} ({n} generated topologies); rerun with VTNT_ACCURACY_SEED={seed}"
    );
    let mut opts = AccuracyOptions::new(n, seed);
    opts.reference = false;
    let report = tnt_accuracy(&opts).expect("campaign runs");
    assert_goals(&report);
}

/// Issue 19's goals on existing tunnels, and no false tunnel, wrong signature or LSR;
/// the probe budget adds up.
fn assert_goals(report: &AccuracyReport) {
    let (seed, family) = (report.seed, report.family);
    print(report);
    assert_no_false_tunnels(report);
    assert_budget_adds_up(report);
    let all = &report.strict.all;
    assert!(
        all.ends_right * 100 >= all.truth * 95,
        "class, ingress and egress right for {} of {} existing tunnels over {family}, < 95% (seed {seed})",
        all.ends_right,
        all.truth
    );
    assert_eq!(
        report.strict.wrong_lsrs, 0,
        "wrong LSRs over {family} (seed {seed})"
    );
}

/// The same goals over IPv6 (issue 38): TNT to the destinations' IPv6 twins on the
/// dual-stack topologies of `--family ipv6` (some LSPs with a 6PE core, RFC 4798),
/// scored against the truth over IPv6: a 6PE core's invisible PHP tunnel with RFC 4950
/// shows its 6PE label at the egress, so the truth has it opaque, and TNT tells every
/// opaque tunnel's class and ends right.
#[test]
fn generated_topologies_over_ipv6() {
    let mut opts = AccuracyOptions::new(30, 42);
    opts.reference = false;
    opts.ipv6 = true;
    opts.generate.six_pe_cores = vtnt_lab::generate::DUAL_STACK_SIX_PE_CORES;
    let six_pe = (0..opts.topologies)
        .map(|i| {
            let seed = vtnt_bench::accuracy::topology_seed(opts.seed, i);
            let truth = vtnt_lab::truth::truth(&vtnt_lab::generate(seed, &opts.generate));
            let tunnels = truth.destinations.iter().flat_map(|d| &d.tunnels);
            tunnels
                .filter(|t| t.class6.is_some_and(|c| c != t.class))
                .count()
        })
        .sum::<usize>();
    assert!(six_pe > 0, "no tunnel whose class changes over IPv6");
    let report = tnt_accuracy(&opts).expect("campaign runs");
    assert_eq!(report.family, "ipv6");
    assert_goals(&report);
    let opaque = report.strict.classes.iter().find(|c| c.class == "opaque");
    let opaque = opaque.expect("an opaque row");
    assert_eq!(
        opaque.ends_right, opaque.truth,
        "opaque over IPv6 ({six_pe} tunnels opaque only over IPv6)"
    );
}

/// The MPLS-free control set (ECMP, asymmetric returns, ICMP rate limiting): every
/// tunnel reported there is false, and TNT reports none, default or brute force, though
/// the routers did hold replies back.
#[test]
fn no_tunnel_on_the_mpls_free_control_set() {
    let mut opts = AccuracyOptions::new(0, 42);
    opts.reference = false;
    opts.control = 4;
    let report = tnt_accuracy(&opts).expect("campaign runs");
    print(&report);
    let c = report.control.as_ref().expect("the control set ran");
    assert_eq!(c.topologies, 4);
    assert!(c.destinations >= 4 * 16, "{c:?}");
    assert_eq!(c.false_tunnels, 0, "false tunnels, default mode");
    assert_eq!(
        c.brute_force_false_tunnels,
        Some(0),
        "false tunnels, brute force"
    );
    assert!(c.icmp_rate_limited > 0, "no router rate-limited: {c:?}");
    assert_eq!(c.probes.budget.total(), c.probes.total);
}
