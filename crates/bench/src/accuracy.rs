//! `tnt-accuracy`: TNT run against the lab's ground truth, on the reference topology and
//! on generated ones, scored strictly per class, against every tunnel that exists and
//! against the tunnels the lab's oracle says probing can observe.
//!
//! Matching is by router, not address (a revealed LSR answers from the interface the
//! revelation trace enters it on, a buddy egress from the far end of a link): every
//! address TNT reports is mapped to the router that owns it with the truth's address
//! lists. Truth tunnels are counted once per destination and router sequence (ECMP
//! variants crossing the same routers are one tunnel), and the equal-cost paths of an
//! `ecmp` LSP (LDP following every IGP path) are one tunnel with alternatives: it exists
//! once, it is observable when one of them is, and a report may equal any one of them.
//!
//! A reported tunnel is *correct* when its class, ingress router, egress router and
//! ordered LSR routers all equal a truth tunnel's of its destination. For classes whose
//! LSRs a trace does not show (opaque, invisible) the LSRs TNT revealed are compared, so
//! an unrevealed tunnel is not correct. A reported tunnel that is not correct but
//! *overlaps* a truth tunnel (same ingress, same egress, or a router of either's LSRs
//! is any router of the other) is *partial*, judged against the overlapping truth
//! tunnel it differs least from, with its reasons: wrong class, wrong ingress, wrong
//! egress, LSRs missing, LSRs extra or wrong (an LSR that is not one of the truth's, nor
//! of another path of its LSP, or more LSRs than the truth has), LSRs of two paths (an
//! LSR of another path of its `ecmp` LSP), LSR order. One overlapping no truth tunnel is
//! a *false tunnel* (counted apart on MPLS-free paths). *Wrong LSRs* are the LSR routers
//! of partial reports that are LSRs of no path of their truth tunnel's LSP.
//!
//! Scores per class:
//! - against what exists: truth tunnels, correct (some report is correct for it),
//!   right class and ends (a report with its class, ingress and egress), partial (a
//!   report overlaps it, or TNT listed its ingress and egress as an unrevealed
//!   candidate), missed; recall = correct / truth; precision = correct reports /
//!   reports of the class;
//! - against the oracle ([`vtnt_lab::oracle`], no TNT rule in it): observable truth
//!   tunnels and how many of them are correct.
//!
//! Also: signatures (for every router with both halves of a signature, the `<te, er>`
//! TNT inferred against the truth's), probes per revealed LSR, and the same strict
//! scores in brute-force mode (every hop pair tested).
//!
//! And a control set: generated topologies without MPLS but with ECMP, asymmetric
//! return paths and ICMP rate limiting ([`control_options`]), where every tunnel TNT
//! reports is false.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use serde::Serialize;
use vtnt_lab::truth::{Destination, Tunnel as TruthTunnel};
use vtnt_lab::{generate, GenOptions, Lab, Observation, Oracle, OracleOptions, Topology, Truth};
use vtnt_tnt::{Budget, TntConfig, TntResult, TunnelClass};

use crate::drive::{run_tnt, DriveError};

/// What to run.
#[derive(Debug, Clone)]
pub struct AccuracyOptions {
    /// Generated topologies (besides the reference one).
    pub topologies: usize,
    /// Base seed; topology `i` uses a seed derived from it.
    pub seed: u64,
    /// Also run the reference topology (first).
    pub reference: bool,
    pub generate: GenOptions,
    pub tnt: TntConfig,
    /// Also run every topology in brute-force mode (every hop pair tested), which
    /// separates what TNT's triggers miss from what revelation misses.
    pub brute_force_too: bool,
    /// How the oracle probes each topology.
    pub oracle: OracleOptions,
    /// MPLS-free control topologies (0: none), generated with `control_generate`.
    pub control: usize,
    pub control_generate: GenOptions,
    /// Probe the destinations' IPv6 twins (the lab is dual stack) instead of their IPv4
    /// addresses; the results are scored against the same truth, mapped back.
    pub ipv6: bool,
}

impl AccuracyOptions {
    /// `topologies` generated topologies from `seed`, plus the reference one.
    pub fn new(topologies: usize, seed: u64) -> AccuracyOptions {
        AccuracyOptions {
            topologies,
            seed,
            reference: true,
            generate: GenOptions::default(),
            tnt: TntConfig::default(),
            brute_force_too: true,
            oracle: OracleOptions::default(),
            control: 0,
            control_generate: control_options(&GenOptions::default()),
            ipv6: false,
        }
    }
}

/// The control set's generator options from `base`: no MPLS, half the plain hops ECMP
/// diamonds, half of those asymmetric and half with a branch a router longer (FRPLA,
/// RTLA and u-turns of a few hops without any tunnel), a quarter of the routers
/// rate-limiting their ICMP (unanswered probes, gaps in traces and pings).
pub fn control_options(base: &GenOptions) -> GenOptions {
    GenOptions {
        mpls: 0.0,
        ecmp: 0.5,
        asymmetry: 0.5,
        unequal_ecmp: 0.5,
        icmp_rate_limited: 0.25,
        ..base.clone()
    }
}

/// Strict scores of one class (or of all, `class` "all").
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ClassScore {
    pub class: &'static str,
    /// Truth tunnels of this class on the destinations' forward paths (every ECMP
    /// variant), once per destination and router sequence; an `ecmp` LSP's paths once.
    pub truth: usize,
    /// Of those, reported correctly.
    pub correct: usize,
    /// Of those, reported with the right class, ingress and egress (LSRs aside).
    pub ends_right: usize,
    /// Not correct, but overlapped by a report or listed as an unrevealed candidate.
    pub partial: usize,
    /// Neither.
    pub missed: usize,
    /// `correct / truth`.
    pub recall: f64,
    /// Tunnels TNT reported with this class, and of those the correct ones.
    pub reported: usize,
    pub reported_correct: usize,
    /// `reported_correct / reported`.
    pub precision: f64,
    /// Truth tunnels the oracle calls observable (one path of an `ecmp` LSP is), and of
    /// those the correct ones.
    pub observable: usize,
    pub observable_correct: usize,
    /// `observable_correct / observable`.
    pub observable_recall: f64,
}

impl ClassScore {
    fn add(&mut self, o: &ClassScore) {
        self.truth += o.truth;
        self.correct += o.correct;
        self.ends_right += o.ends_right;
        self.partial += o.partial;
        self.missed += o.missed;
        self.reported += o.reported;
        self.reported_correct += o.reported_correct;
        self.observable += o.observable;
        self.observable_correct += o.observable_correct;
    }
    fn finish(&mut self) {
        self.recall = ratio(self.correct, self.truth);
        self.precision = ratio(self.reported_correct, self.reported);
        self.observable_recall = ratio(self.observable_correct, self.observable);
    }
}

/// Partial reports, and how many of them have each reason (one report may have
/// several).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PartialReports {
    pub tunnels: usize,
    pub wrong_class: usize,
    pub wrong_ingress: usize,
    pub wrong_egress: usize,
    pub lsrs_missing: usize,
    /// An LSR that is on no path of the truth tunnel's LSP, or more LSRs than it has.
    pub lsrs_extra: usize,
    /// An LSR of another of the equal-cost paths of the truth tunnel's `ecmp` LSP: the
    /// report mixes two paths.
    pub lsrs_of_two_paths: usize,
    /// The truth's LSRs, no other, in another order.
    pub lsr_order: usize,
}

/// The strict scores of one mode.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct StrictScore {
    pub classes: Vec<ClassScore>,
    /// Every class together.
    pub all: ClassScore,
    pub partial: PartialReports,
    /// LSR routers of partial reports that are LSRs of no path of their truth tunnel's
    /// LSP (goal 0).
    pub wrong_lsrs: usize,
    /// Reports overlapping no truth tunnel, on paths with MPLS (goal 0).
    pub false_tunnels: usize,
    /// Destinations whose forward paths cross no tunnel, and the reports on them.
    pub mpls_free_paths: usize,
    pub false_tunnels_on_mpls_free_paths: usize,
}

/// The brute-force run (every hop pair tested).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct BruteForceScore {
    pub strict: StrictScore,
    pub probes: ProbeScore,
}

/// TTL signatures and vendors.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RouterScore {
    /// Routers that answered at least one probe.
    pub seen: usize,
    /// Routers with both halves of a signature (a time exceeded and an echo reply).
    pub responsive: usize,
    pub signature_right: usize,
    pub signature_wrong: usize,
    /// Routers without a full signature (never answered the ping or never sent a
    /// time-exceeded).
    pub unknown: usize,
    /// Of the responsive routers: TNT named the router's vendor family ...
    pub vendor_right: usize,
    /// ... of which a family of several vendors (`<255,255>`: Cisco, Huawei, H3C;
    /// `<64,64>`: Linux, MikroTik, Nokia, Brocade), so the vendor itself stays open;
    pub vendor_ambiguous: usize,
    /// TNT named another family (a router whose signature is another vendor's);
    pub vendor_wrong: usize,
    /// TNT said unknown (a signature outside its table).
    pub vendor_unknown: usize,
}

/// Probe costs.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ProbeScore {
    pub total: u64,
    pub initial: u64,
    pub pings: u64,
    pub revelation: u64,
    pub lsrs_revealed: usize,
    pub per_revealed_lsr: f64,
    /// The probes phase by phase (`vtnt_tnt::Budget`).
    pub budget: Budget,
}

/// What the oracle ran.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct OracleScore {
    pub flows: u16,
    pub max_ttl: u8,
    /// Destinations traced over all topologies, traces and probes.
    pub targets: usize,
    pub traces: usize,
    pub probes: u64,
}

/// TNT on the MPLS-free control set.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ControlScore {
    pub topologies: usize,
    pub destinations: usize,
    /// Tunnels reported: all false, there is no MPLS (goal 0).
    pub false_tunnels: usize,
    /// The same in brute-force mode (every hop pair tested), when it ran.
    pub brute_force_false_tunnels: Option<usize>,
    /// ICMP messages the rate-limiting routers did not send (default mode).
    pub icmp_rate_limited: u64,
    pub probes: ProbeScore,
}

/// The whole report.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct AccuracyReport {
    pub seed: u64,
    /// The family probed: `ipv4`, or `ipv6` (the destinations' twins; validated on the
    /// lab only, docs/tnt.md).
    pub family: &'static str,
    pub topologies: usize,
    pub destinations: usize,
    pub oracle: OracleScore,
    pub strict: StrictScore,
    pub routers: RouterScore,
    pub probes: ProbeScore,
    pub brute_force: Option<BruteForceScore>,
    /// The MPLS-free control set, when it ran.
    pub control: Option<ControlScore>,
    /// ICMP messages the lab's rate-limiting routers did not send (default mode).
    pub icmp_rate_limited: u64,
    /// Virtual time of all campaigns, in seconds.
    pub virtual_seconds: f64,
    /// One line per failure (missed, partial, unrevealed, false tunnel, wrong
    /// signature...), at most 40 of each kind.
    pub misses: Vec<String>,
}

const MAX_MISSES: usize = 40;

/// Seed of topology `i` from the base seed (splitmix64).
pub fn topology_seed(base: u64, i: usize) -> u64 {
    let mut z = base.wrapping_add((i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One topology with its truth and the oracle's observations.
struct Case {
    topo: Topology,
    truth: Truth,
    oracle: Oracle,
}

/// Seed of control topology `i` (apart from the generated topologies' seeds).
pub fn control_seed(base: u64, i: usize) -> u64 {
    topology_seed(base ^ 0xc0a7_4011_5e7c_0a7e, i)
}

/// Runs TNT on the MPLS-free control set (default mode, and brute force when asked).
/// Its miss lines (the false tunnels) come back with it.
fn control(opts: &AccuracyOptions) -> Result<(ControlScore, Vec<String>), DriveError> {
    let cases: Vec<Case> = (0..opts.control)
        .map(|i| {
            let topo = generate(control_seed(opts.seed, i), &opts.control_generate);
            let truth = vtnt_lab::truth::truth(&topo);
            // no tunnel to observe: the oracle has nothing to say
            let oracle = Oracle {
                targets: 0,
                traces: 0,
                probes: 0,
                tunnels: truth.destinations.iter().map(|_| Vec::new()).collect(),
            };
            Case {
                topo,
                truth,
                oracle,
            }
        })
        .collect();
    // (no truth tunnel anywhere: every report is false)
    let false_tunnels = |s: &StrictScore| s.all.reported;
    let r = run_mode(opts, &opts.tnt, &cases)?;
    let brute_force_false_tunnels = if opts.brute_force_too {
        let mut cfg = opts.tnt.clone();
        cfg.classify.brute_force = true;
        Some(false_tunnels(&run_mode(opts, &cfg, &cases)?.strict))
    } else {
        None
    };
    let misses = r.misses.iter().map(|m| format!("control {m}")).collect();
    let score = ControlScore {
        topologies: r.topologies,
        destinations: r.destinations,
        false_tunnels: false_tunnels(&r.strict),
        brute_force_false_tunnels,
        icmp_rate_limited: r.icmp_rate_limited,
        probes: r.probes,
    };
    Ok((score, misses))
}

/// Runs the benchmark.
pub fn tnt_accuracy(opts: &AccuracyOptions) -> Result<AccuracyReport, DriveError> {
    let mut topos: Vec<Topology> = Vec::new();
    if opts.reference {
        topos.push(Topology::reference());
    }
    for i in 0..opts.topologies {
        topos.push(generate(topology_seed(opts.seed, i), &opts.generate));
    }
    let cases: Vec<Case> = topos
        .into_iter()
        .map(|topo| {
            let truth = vtnt_lab::truth::truth(&topo);
            let oracle = vtnt_lab::oracle(&topo, &truth, &opts.oracle);
            Case {
                topo,
                truth,
                oracle,
            }
        })
        .collect();
    let mut report = run_mode(opts, &opts.tnt, &cases)?;
    report.oracle = OracleScore {
        flows: opts.oracle.flows,
        max_ttl: opts.oracle.max_ttl,
        targets: cases.iter().map(|c| c.oracle.targets).sum(),
        traces: cases.iter().map(|c| c.oracle.traces).sum(),
        probes: cases.iter().map(|c| c.oracle.probes).sum(),
    };
    if opts.brute_force_too {
        let mut cfg = opts.tnt.clone();
        cfg.classify.brute_force = true;
        let b = run_mode(opts, &cfg, &cases)?;
        report.brute_force = Some(BruteForceScore {
            strict: b.strict,
            probes: b.probes,
        });
        report.virtual_seconds += b.virtual_seconds;
    }
    if opts.control > 0 {
        let (score, misses) = control(opts)?;
        report.control = Some(score);
        report.misses.extend(misses);
    }
    Ok(report)
}

fn run_mode(
    opts: &AccuracyOptions,
    cfg: &TntConfig,
    cases: &[Case],
) -> Result<AccuracyReport, DriveError> {
    let mut acc = Scorer {
        ipv6: opts.ipv6,
        ..Scorer::default()
    };
    let mut report = AccuracyReport {
        seed: opts.seed,
        family: if opts.ipv6 { "ipv6" } else { "ipv4" },
        ..AccuracyReport::default()
    };
    for (i, c) in cases.iter().enumerate() {
        // over IPv6 a tunnel through a 6PE core shows its 6PE label: its IPv6 class
        let over6 = opts.ipv6.then(|| c.truth.over_ipv6());
        let truth = over6.as_ref().unwrap_or(&c.truth);
        let mut lab = Lab::new(c.topo.clone());
        let targets: Vec<IpAddr> = c
            .truth
            .destinations
            .iter()
            .map(|d| match opts.ipv6 {
                true => IpAddr::V6(vtnt_lab::addr::to_v6(d.dst)),
                false => IpAddr::V4(d.dst),
            })
            .collect();
        let mut run = run_tnt(
            &mut lab,
            &targets,
            cfg.clone(),
            topology_seed(opts.seed, i) ^ 1,
        )?;
        if opts.ipv6 {
            run.results.iter_mut().for_each(to_ipv4);
        }
        report.topologies += 1;
        report.destinations += targets.len();
        report.virtual_seconds += run.virtual_us as f64 / 1e6;
        report.probes.total += run.summary.probes();
        report.probes.initial += run.summary.trace_probes;
        report.probes.pings += run.summary.ping_probes;
        report.probes.revelation += run.summary.revelation_probes;
        report.probes.lsrs_revealed += run.summary.lsrs_revealed;
        report.probes.budget.add(&run.summary.budget);
        report.icmp_rate_limited += lab.stats().rate_limited;
        acc.score(truth, &c.oracle, &run.results);
    }
    acc.finish(&mut report);
    Ok(report)
}

/// `r`'s lab addresses as the truth writes them: each IPv6 twin, and each IPv4-mapped
/// address a 6PE core's LSR answers from, back to its IPv4 address (what the scorer
/// reads: target, path, tunnels, candidates).
fn to_ipv4(r: &mut TntResult) {
    let v4 = |a: &mut IpAddr| {
        if let Some(x) = match a {
            IpAddr::V6(x) => vtnt_lab::addr::from_v6(*x).or_else(|| x.to_ipv4_mapped()),
            IpAddr::V4(_) => None,
        } {
            *a = IpAddr::V4(x);
        }
    };
    v4(&mut r.target);
    r.path
        .iter_mut()
        .filter_map(|e| e.addr.as_mut())
        .for_each(v4);
    for t in &mut r.tunnels {
        t.ingress.iter_mut().chain(t.egress.iter_mut()).for_each(v4);
        t.lsrs.iter_mut().flatten().for_each(v4);
    }
    for u in &mut r.unrevealed {
        v4(&mut u.ingress);
        v4(&mut u.egress);
    }
}

/// Whether the family TNT names from a signature holds several of the lab's vendors.
fn shared_family(family: &str) -> bool {
    matches!(family, "cisco" | "linux")
}

fn vendor_family(v: &str) -> &'static str {
    match v {
        "cisco" | "huawei" | "h3c" => "cisco",
        "juniper" => "juniper",
        "junose" => "junos-e",
        "linux" | "mikrotik" | "nokia" | "brocade" => "linux",
        _ => "unknown",
    }
}

/// A reported tunnel, addresses mapped to router names (an address no router owns keeps
/// its text, so it matches no router; `None`: an LSR slot that did not answer).
#[derive(Debug, Clone)]
struct Reported {
    class: TunnelClass,
    ingress: Option<String>,
    egress: Option<String>,
    lsrs: Vec<Option<String>>,
}

/// Why a report is partial.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Reasons {
    wrong_class: bool,
    wrong_ingress: bool,
    wrong_egress: bool,
    lsrs_missing: bool,
    lsrs_extra: bool,
    lsrs_of_two_paths: bool,
    lsr_order: bool,
}

impl Reasons {
    fn count(&self) -> usize {
        [
            self.wrong_class,
            self.wrong_ingress,
            self.wrong_egress,
            self.lsrs_missing,
            self.lsrs_extra,
            self.lsrs_of_two_paths,
            self.lsr_order,
        ]
        .iter()
        .filter(|&&b| b)
        .count()
    }
    fn names(&self) -> Vec<&'static str> {
        [
            (self.wrong_class, "wrong class"),
            (self.wrong_ingress, "wrong ingress"),
            (self.wrong_egress, "wrong egress"),
            (self.lsrs_missing, "LSRs missing"),
            (self.lsrs_extra, "LSRs extra/wrong"),
            (self.lsrs_of_two_paths, "LSRs of two paths"),
            (self.lsr_order, "LSR order"),
        ]
        .into_iter()
        .filter_map(|(b, n)| b.then_some(n))
        .collect()
    }
}

/// How a report compares with the truth tunnels of its destination, grouped by LSP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Equal to a tunnel of group `.0`.
    Correct(usize),
    /// Overlaps a tunnel of group `truth`, the one it differs least from; `wrong_lsrs`
    /// of its LSRs are on no path of that LSP.
    Partial {
        truth: usize,
        reasons: Reasons,
        wrong_lsrs: usize,
    },
    /// Overlaps no truth tunnel.
    False,
}

/// Same ingress, same egress, or a router of either's LSRs is any router of the other.
fn overlaps(x: &Reported, t: &TruthTunnel) -> bool {
    let is = |r: &Option<String>, name: &String| r.as_ref() == Some(name);
    is(&x.ingress, &t.ingress_router)
        || is(&x.egress, &t.egress_router)
        || x.lsrs
            .iter()
            .flatten()
            .any(|l| *l == t.ingress_router || *l == t.egress_router || t.lsr_routers.contains(l))
        || t.lsr_routers
            .iter()
            .any(|l| is(&x.ingress, l) || is(&x.egress, l))
}

/// What differs between report `x` and truth tunnel `t`, one of `alts` (the paths of
/// its LSP: `t` alone unless `ecmp`), and how many of the report's LSRs are LSRs of
/// none of them.
fn differences(x: &Reported, t: &TruthTunnel, alts: &[&TruthTunnel]) -> (Reasons, usize) {
    let on_alts = |l: &String| alts.iter().any(|u| u.lsr_routers.contains(l));
    let wrong_lsrs = x.lsrs.iter().flatten().filter(|l| !on_alts(l)).count();
    let lsrs_of_two_paths = x
        .lsrs
        .iter()
        .flatten()
        .any(|l| !t.lsr_routers.contains(l) && on_alts(l));
    let lsrs_missing = t
        .lsr_routers
        .iter()
        .any(|l| !x.lsrs.iter().flatten().any(|x| x == l));
    let lsrs_extra = wrong_lsrs > 0 || x.lsrs.len() > t.lsr_routers.len();
    let in_order = x
        .lsrs
        .iter()
        .map(Option::as_ref)
        .eq(t.lsr_routers.iter().map(Some));
    let reasons = Reasons {
        wrong_class: x.class != t.class,
        wrong_ingress: x.ingress.as_ref() != Some(&t.ingress_router),
        wrong_egress: x.egress.as_ref() != Some(&t.egress_router),
        lsrs_missing,
        lsrs_extra,
        lsrs_of_two_paths,
        lsr_order: !lsrs_missing && !lsrs_extra && !lsrs_of_two_paths && !in_order,
    };
    (reasons, wrong_lsrs)
}

/// Judges report `x` against the truth tunnels of its destination, grouped by LSP
/// (each group the paths of one LSP: one tunnel unless `ecmp`).
fn judge(truth: &[Vec<&TruthTunnel>], x: &Reported) -> Verdict {
    truth
        .iter()
        .enumerate()
        .flat_map(|(i, alts)| {
            alts.iter().filter(|t| overlaps(x, t)).map(move |t| {
                let (reasons, wrong_lsrs) = differences(x, t, alts);
                (i, reasons, wrong_lsrs)
            })
        })
        .min_by_key(|&(_, r, w)| (r.count(), w))
        .map_or(Verdict::False, |(i, reasons, wrong_lsrs)| {
            if reasons.count() == 0 {
                Verdict::Correct(i)
            } else {
                Verdict::Partial {
                    truth: i,
                    reasons,
                    wrong_lsrs,
                }
            }
        })
}

/// What was seen of one router: te iTTL, er iTTL, truth signature, truth vendor.
type SeenRouter = (Option<u8>, Option<u8>, [u8; 2], &'static str);

/// An unrevealed candidate of TNT's: ingress and egress routers.
type Candidate = (Option<String>, Option<String>);

#[derive(Default)]
struct Scorer {
    classes: BTreeMap<TunnelClass, ClassScore>,
    strict: StrictScore,
    /// router -> (te iTTL, er iTTL) seen, truth signature, vendor
    sigs: BTreeMap<(usize, String), SeenRouter>,
    topo: usize,
    misses: BTreeMap<&'static str, Vec<String>>,
    /// The results are of IPv6 probes: a router's signature is its IPv6 one.
    ipv6: bool,
}

impl Scorer {
    fn miss(&mut self, kind: &'static str, s: String) {
        let v = self.misses.entry(kind).or_default();
        if v.len() < MAX_MISSES {
            v.push(format!("{kind}: {s}"));
        }
    }

    fn score(&mut self, truth: &Truth, oracle: &Oracle, results: &[TntResult]) {
        self.topo += 1;
        let owner: BTreeMap<Ipv4Addr, &str> = truth
            .routers
            .iter()
            .flat_map(|r| r.addresses.iter().map(move |a| (*a, r.name.as_str())))
            .collect();
        let router = |a: Option<IpAddr>| -> Option<String> {
            match a? {
                IpAddr::V4(v4) => Some(owner.get(&v4).map_or(v4.to_string(), |s| s.to_string())),
                IpAddr::V6(v6) => Some(v6.to_string()),
            }
        };
        let by_dst: BTreeMap<IpAddr, &TntResult> = results.iter().map(|r| (r.target, r)).collect();
        let topo = self.topo;
        for (i, d) in truth.destinations.iter().enumerate() {
            let r = by_dst.get(&IpAddr::V4(d.dst)).copied();
            let at = format!("{} {}", truth.topology, d.name);
            let Some(r) = r else {
                self.miss("no-result", format!("{at}: no result"));
                self.destination(&at, d, &oracle.tunnels[i], &[], &[], "no result");
                continue;
            };
            self.signatures(topo, truth, r, &router);
            let reported: Vec<Reported> = r
                .tunnels
                .iter()
                .map(|t| Reported {
                    class: t.class,
                    ingress: router(t.ingress),
                    egress: router(t.egress),
                    lsrs: t.lsrs.iter().map(|a| router(*a)).collect(),
                })
                .collect();
            let candidates: Vec<Candidate> = r
                .unrevealed
                .iter()
                .map(|u| (router(Some(u.ingress)), router(Some(u.egress))))
                .collect();
            self.destination(
                &at,
                d,
                &oracle.tunnels[i],
                &reported,
                &candidates,
                &describe(r),
            );
        }
    }

    /// Scores the reports and unrevealed candidates of one destination; `seen` is the
    /// oracle's observations of its tunnels, `tnt` TNT's output for the miss lines.
    fn destination(
        &mut self,
        at: &str,
        d: &Destination,
        seen: &[Observation],
        reported: &[Reported],
        candidates: &[Candidate],
        tnt: &str,
    ) {
        // Truth tunnels by LSP: the paths of an `ecmp` one (LDP follows each equal-cost
        // path) are one tunnel; ECMP variants crossing the same routers are one path.
        let mut truth: Vec<Vec<&TruthTunnel>> = Vec::new();
        let mut observed: Vec<Vec<Observation>> = Vec::new();
        for (t, o) in d.tunnels.iter().zip(seen) {
            let same = |u: &&TruthTunnel| {
                u.class == t.class
                    && u.ingress_router == t.ingress_router
                    && u.egress_router == t.egress_router
                    && u.lsr_routers == t.lsr_routers
            };
            if truth.iter().flatten().any(same) {
                continue;
            }
            match truth.iter().position(|alts| alts[0].lsp == t.lsp) {
                Some(i) => {
                    truth[i].push(t);
                    observed[i].push(*o);
                }
                None => {
                    truth.push(vec![t]);
                    observed.push(vec![*o]);
                }
            }
        }
        let show = |x: &Reported| {
            format!(
                "{} {}->{} {:?}",
                x.class.name(),
                x.ingress.as_deref().unwrap_or("?"),
                x.egress.as_deref().unwrap_or("?"),
                x.lsrs
            )
        };
        let show_truth = |alts: &[&TruthTunnel]| {
            let lsrs: Vec<String> = alts
                .iter()
                .map(|t| format!("{:?}", t.lsr_routers))
                .collect();
            let t = alts[0];
            format!(
                "{} {}->{} {} ({:?})",
                t.class.name(),
                t.ingress_router,
                t.egress_router,
                lsrs.join(" or "),
                t.pop
            )
        };
        for x in reported {
            self.classes.entry(x.class).or_default().reported += 1;
        }
        if truth.is_empty() {
            self.strict.mpls_free_paths += 1;
            self.strict.false_tunnels_on_mpls_free_paths += reported.len();
            for x in reported {
                self.miss(
                    "false-tunnel-mpls-free",
                    format!("{at}: reported {} on an MPLS-free path", show(x)),
                );
            }
            return;
        }
        let mut correct = vec![false; truth.len()];
        let mut touched = vec![false; truth.len()];
        for x in reported {
            match judge(&truth, x) {
                Verdict::Correct(i) => {
                    correct[i] = true;
                    self.classes.entry(x.class).or_default().reported_correct += 1;
                }
                Verdict::Partial {
                    truth: i,
                    reasons,
                    wrong_lsrs,
                } => {
                    touched[i] = true;
                    let p = &mut self.strict.partial;
                    p.tunnels += 1;
                    p.wrong_class += usize::from(reasons.wrong_class);
                    p.wrong_ingress += usize::from(reasons.wrong_ingress);
                    p.wrong_egress += usize::from(reasons.wrong_egress);
                    p.lsrs_missing += usize::from(reasons.lsrs_missing);
                    p.lsrs_extra += usize::from(reasons.lsrs_extra);
                    p.lsrs_of_two_paths += usize::from(reasons.lsrs_of_two_paths);
                    p.lsr_order += usize::from(reasons.lsr_order);
                    self.strict.wrong_lsrs += wrong_lsrs;
                    self.miss(
                        "partial",
                        format!(
                            "{at}: reported {} for truth {} ({}; oracle {:?})",
                            show(x),
                            show_truth(&truth[i]),
                            reasons.names().join(", "),
                            observed[i],
                        ),
                    );
                }
                Verdict::False => {
                    self.strict.false_tunnels += 1;
                    self.miss(
                        "false-tunnel",
                        format!(
                            "{at}: reported {} overlaps no truth tunnel ({:?})",
                            show(x),
                            truth.iter().map(|t| show_truth(t)).collect::<Vec<_>>()
                        ),
                    );
                }
            }
        }
        for (i, alts) in truth.iter().enumerate() {
            let ends_right = reported.iter().any(|x| {
                alts.iter().any(|t| {
                    let (r, _) = differences(x, t, alts);
                    !(r.wrong_class || r.wrong_ingress || r.wrong_egress)
                })
            });
            // The routers after the egress on each ECMP variant: where an invisible UHP
            // tunnel's candidate ends (the egress itself does not answer).
            let candidate = alts.iter().any(|t| {
                let after_egress: Vec<&str> = d
                    .forward_paths
                    .iter()
                    .filter_map(|p| {
                        let e = p.iter().position(|h| h.router == t.egress_router)?;
                        p.get(e + 1).map(|h| h.router.as_str())
                    })
                    .collect();
                candidates.iter().any(|(ci, ce)| {
                    ci.as_ref() == Some(&t.ingress_router)
                        && ce
                            .as_deref()
                            .is_some_and(|ce| ce == t.egress_router || after_egress.contains(&ce))
                })
            });
            let row = self.classes.entry(alts[0].class).or_default();
            row.truth += 1;
            row.ends_right += usize::from(ends_right);
            if observed[i].iter().any(|o| o.observable) {
                row.observable += 1;
                row.observable_correct += usize::from(correct[i]);
            }
            if correct[i] {
                row.correct += 1;
            } else if touched[i] || candidate {
                row.partial += 1;
                if !touched[i] {
                    self.miss(
                        "unrevealed",
                        format!(
                            "{at}: truth {} only listed as an unrevealed candidate (oracle {:?}); TNT: {tnt}",
                            show_truth(alts),
                            observed[i]
                        ),
                    );
                }
            } else {
                row.missed += 1;
                self.miss(
                    "missed",
                    format!(
                        "{at}: truth {} not reported (oracle {:?}); TNT: {tnt}",
                        show_truth(alts),
                        observed[i]
                    ),
                );
            }
        }
    }

    fn signatures(
        &mut self,
        topo: usize,
        truth: &Truth,
        r: &TntResult,
        router: &dyn Fn(Option<IpAddr>) -> Option<String>,
    ) {
        for e in &r.path {
            let Some(name) = router(e.addr) else { continue };
            let Some(rt) = truth.routers.iter().find(|x| x.name == name) else {
                continue;
            };
            let entry = self.sigs.entry((topo, name)).or_insert((
                None,
                None,
                if self.ipv6 {
                    rt.signature6
                } else {
                    rt.signature
                },
                rt.vendor,
            ));
            let s = e.annotation.signature;
            entry.0 = entry.0.or(s.te);
            entry.1 = entry.1.or(s.er);
        }
    }

    fn finish(mut self, report: &mut AccuracyReport) {
        let mut all = ClassScore {
            class: "all",
            ..ClassScore::default()
        };
        for class in TunnelClass::ALL {
            let mut row = self.classes.remove(&class).unwrap_or_default();
            row.class = class.name();
            row.finish();
            all.add(&row);
            self.strict.classes.push(row);
        }
        all.finish();
        self.strict.all = all;
        report.strict = core::mem::take(&mut self.strict);
        let mut rs = RouterScore::default();
        let mut wrong = Vec::new();
        for ((topo, name), (te, er, truth_sig, vendor)) in &self.sigs {
            rs.seen += 1;
            match (te, er) {
                (Some(te), Some(er)) => {
                    rs.responsive += 1;
                    if [*te, *er] == *truth_sig {
                        rs.signature_right += 1;
                    } else {
                        rs.signature_wrong += 1;
                        wrong.push(format!(
                            "topology #{topo} router {name} ({vendor}): signature <{te},{er}> but truth {truth_sig:?}"
                        ));
                    }
                    let ours = vtnt_tnt::Signature {
                        te: Some(*te),
                        er: Some(*er),
                    }
                    .vendor()
                    .name();
                    if ours == vendor_family(vendor) {
                        rs.vendor_right += 1;
                        rs.vendor_ambiguous += usize::from(shared_family(ours));
                    } else if ours == "unknown" {
                        rs.vendor_unknown += 1;
                    } else {
                        rs.vendor_wrong += 1;
                    }
                }
                _ => rs.unknown += 1,
            }
        }
        for w in wrong {
            self.miss("signature", w);
        }
        report.routers = rs;
        report.probes.per_revealed_lsr = if report.probes.lsrs_revealed == 0 {
            0.0
        } else {
            report.probes.revelation as f64 / report.probes.lsrs_revealed as f64
        };
        report.misses = self.misses.into_values().flatten().collect();
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

fn describe(r: &TntResult) -> String {
    let t: Vec<String> = r
        .tunnels
        .iter()
        .map(|t| {
            format!(
                "{}[{:?}->{:?} lsrs={:?} rev={:?}]",
                t.class.name(),
                t.ingress,
                t.egress,
                t.lsrs,
                t.revelation.map(|r| r.status)
            )
        })
        .collect();
    let u: Vec<String> = r
        .unrevealed
        .iter()
        .map(|u| {
            format!(
                "{}:{}->{}={:?}",
                u.trigger.tag(),
                u.ingress,
                u.egress,
                u.status
            )
        })
        .collect();
    format!("tunnels {t:?} unrevealed {u:?}")
}

impl AccuracyReport {
    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The report as markdown: the strict per-class table (default mode, then brute
    /// force), partial reasons, wrong LSRs and false tunnels, signatures and probes.
    pub fn to_markdown(&self) -> String {
        let o = &self.oracle;
        let mut s = format!(
            "TNT accuracy: {} topologies (seed {}), {} destinations over {}; oracle: {} Paris flows, TTL <= {}, {} destinations traced ({} traces, {} probes)\n\n",
            self.topologies, self.seed, self.destinations, self.family, o.flows, o.max_ttl, o.targets, o.traces, o.probes
        );
        s.push_str(
            "Default mode (strict: class, ingress, egress and LSRs in order all right):\n\n",
        );
        s.push_str(&self.strict.to_markdown());
        if let Some(b) = &self.brute_force {
            s.push_str("\nBrute force (every hop pair tested):\n\n");
            s.push_str(&b.strict.to_markdown());
        }
        s.push('\n');
        let r = &self.routers;
        s.push_str(&format!(
            "Signatures: {} routers seen, {} responsive (time exceeded and echo reply): {} right, {} wrong; {} unknown (no echo reply or no time-exceeded)\nVendors of the responsive routers: family right {} (of which {} a family of several vendors), wrong {} (another vendor's signature), unknown {} (a signature outside TNT's table)\n",
            r.seen, r.responsive, r.signature_right, r.signature_wrong, r.unknown, r.vendor_right, r.vendor_ambiguous, r.vendor_wrong, r.vendor_unknown
        ));
        let p = &self.probes;
        s.push_str(&format!(
            "Probes: {} (initial traces {}, pings {}, revelation {}); {:.1} revelation probes per revealed LSR ({} LSRs)\n",
            p.total, p.initial, p.pings, p.revelation, p.per_revealed_lsr, p.lsrs_revealed
        ));
        s.push_str(&format!("Probe budget: {}\n", p.budget));
        if let Some(b) = &self.brute_force {
            s.push_str(&format!(
                "Brute force probes: {} (revelation {}); {:.1} revelation probes per revealed LSR ({} LSRs)\n",
                b.probes.total, b.probes.revelation, b.probes.per_revealed_lsr, b.probes.lsrs_revealed
            ));
        }
        if let Some(c) = &self.control {
            let brute = c
                .brute_force_false_tunnels
                .map_or(String::new(), |b| format!(" (brute force: {b})"));
            s.push_str(&format!(
                "MPLS-free control set ({} topologies: ECMP, asymmetric returns, ICMP rate limiting), {} destinations: {} false tunnels{brute}; {} ICMP messages rate-limited; {} probes ({:.1} per destination)\nControl probe budget: {}\n",
                c.topologies,
                c.destinations,
                c.false_tunnels,
                c.icmp_rate_limited,
                c.probes.total,
                c.probes.total as f64 / c.destinations.max(1) as f64,
                c.probes.budget
            ));
        }
        s.push_str(&format!("Virtual time: {:.1} s\n", self.virtual_seconds));
        s
    }
}

impl StrictScore {
    /// The per-class table, then partial reasons, wrong LSRs and false tunnels.
    pub fn to_markdown(&self) -> String {
        let mut s = String::from(
            "| class | exist | correct | class+ends right | partial | missed | recall (exist) | observable | correct | recall (observable) | reported | correct | precision |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for c in self.classes.iter().chain([&self.all]) {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {:.1}% | {} | {} | {:.1}% | {} | {} | {:.1}% |\n",
                c.class,
                c.truth,
                c.correct,
                c.ends_right,
                c.partial,
                c.missed,
                c.recall * 100.0,
                c.observable,
                c.observable_correct,
                c.observable_recall * 100.0,
                c.reported,
                c.reported_correct,
                c.precision * 100.0,
            ));
        }
        let p = &self.partial;
        s.push_str(&format!(
            "\nPartial reports: {} (wrong class {}, wrong ingress {}, wrong egress {}, LSRs missing {}, LSRs extra/wrong {}, LSRs of two paths {}, LSR order {})\n",
            p.tunnels, p.wrong_class, p.wrong_ingress, p.wrong_egress, p.lsrs_missing, p.lsrs_extra, p.lsrs_of_two_paths, p.lsr_order
        ));
        s.push_str(&format!(
            "Wrong LSRs: {}; false tunnels: {} on paths with MPLS, {} on {} MPLS-free paths\n",
            self.wrong_lsrs,
            self.false_tunnels,
            self.false_tunnels_on_mpls_free_paths,
            self.mpls_free_paths
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vtnt_lab::truth::Hop;
    use vtnt_lab::{Pop, Revelation};

    /// A truth tunnel through routers `ingress`, `lsrs`, `egress` (addresses unused), of
    /// an LSP named after its ends.
    fn truth(class: TunnelClass, ingress: &str, lsrs: &[&str], egress: &str) -> TruthTunnel {
        TruthTunnel {
            lsp: format!("{ingress}-{egress}"),
            branch: 0,
            class,
            class6: None,
            revelation6: None,
            ingress: Ipv4Addr::UNSPECIFIED,
            ingress_router: ingress.into(),
            egress: Ipv4Addr::UNSPECIFIED,
            egress_router: egress.into(),
            lsrs: vec![Ipv4Addr::UNSPECIFIED; lsrs.len()],
            lsr_routers: lsrs.iter().map(|s| s.to_string()).collect(),
            pop: Pop::Php,
            whole: true,
            revelation: Revelation::NotNeeded,
        }
    }

    fn report(class: TunnelClass, ingress: &str, lsrs: &[Option<&str>], egress: &str) -> Reported {
        Reported {
            class,
            ingress: Some(ingress.into()),
            egress: Some(egress.into()),
            lsrs: lsrs.iter().map(|l| l.map(String::from)).collect(),
        }
    }

    use TunnelClass::{Explicit, InvisiblePhp, InvisibleUhp, Opaque};

    fn partial(v: Verdict) -> (usize, Vec<&'static str>, usize) {
        match v {
            Verdict::Partial {
                truth,
                reasons,
                wrong_lsrs,
            } => (truth, reasons.names(), wrong_lsrs),
            other => panic!("not partial: {other:?}"),
        }
    }

    #[test]
    fn the_same_routers_in_order_are_correct() {
        let t = truth(Explicit, "a", &["b", "c"], "d");
        let x = report(Explicit, "a", &[Some("b"), Some("c")], "d");
        assert_eq!(judge(&[vec![&t]], &x), Verdict::Correct(0));
        let t = truth(InvisiblePhp, "a", &[], "d");
        let x = report(InvisiblePhp, "a", &[], "d");
        assert_eq!(judge(&[vec![&t]], &x), Verdict::Correct(0));
    }

    #[test]
    fn each_difference_makes_a_partial_with_its_reason() {
        let t = truth(Explicit, "a", &["b", "c"], "d");
        let j = |x: Reported| partial(judge(&[vec![&t]], &x));
        let lsrs = [Some("b"), Some("c")];
        assert_eq!(
            j(report(Opaque, "a", &lsrs, "d")),
            (0, vec!["wrong class"], 0)
        );
        assert_eq!(
            j(report(Explicit, "z", &lsrs, "d")),
            (0, vec!["wrong ingress"], 0)
        );
        assert_eq!(
            j(report(Explicit, "a", &lsrs, "z")),
            (0, vec!["wrong egress"], 0)
        );
        // An opaque or invisible tunnel whose LSRs were not revealed.
        assert_eq!(
            j(report(Explicit, "a", &[], "d")),
            (0, vec!["LSRs missing"], 0)
        );
        // An LSR slot that did not answer names no router: that LSR is missing.
        assert_eq!(
            j(report(Explicit, "a", &[Some("b"), None], "d")),
            (0, vec!["LSRs missing"], 0)
        );
        // A router that is not an LSR of the tunnel: a wrong LSR.
        assert_eq!(
            j(report(
                Explicit,
                "a",
                &[Some("b"), Some("x"), Some("c")],
                "d"
            )),
            (0, vec!["LSRs extra/wrong"], 1)
        );
        // One LSR slot more than the tunnel has.
        assert_eq!(
            j(report(Explicit, "a", &[Some("b"), None, Some("c")], "d")),
            (0, vec!["LSRs extra/wrong"], 0)
        );
        assert_eq!(
            j(report(Explicit, "a", &[Some("c"), Some("b")], "d")),
            (0, vec!["LSR order"], 0)
        );
        // The egress taken for an LSR and the next router for the egress.
        assert_eq!(
            j(report(
                Explicit,
                "a",
                &[Some("b"), Some("c"), Some("d")],
                "e"
            )),
            (0, vec!["wrong egress", "LSRs extra/wrong"], 1)
        );
    }

    #[test]
    fn a_report_overlapping_no_truth_tunnel_is_false() {
        let t = truth(Explicit, "a", &["b", "c"], "d");
        let x = report(InvisiblePhp, "x", &[Some("y")], "z");
        assert_eq!(judge(&[vec![&t]], &x), Verdict::False);
        // Touching the tunnel only end to end (its egress as the ingress) is no overlap.
        let x = report(InvisiblePhp, "d", &[], "e");
        assert_eq!(judge(&[vec![&t]], &x), Verdict::False);
        // Starting at one of its LSRs is.
        let x = report(InvisiblePhp, "b", &[], "e");
        assert_eq!(
            partial(judge(&[vec![&t]], &x)).1,
            [
                "wrong class",
                "wrong ingress",
                "wrong egress",
                "LSRs missing"
            ]
        );
    }

    #[test]
    fn a_partial_is_judged_against_the_closest_truth_tunnel() {
        let t0 = truth(Explicit, "a", &["b"], "c");
        let t1 = truth(InvisibleUhp, "c", &["d", "e"], "f");
        let x = report(InvisibleUhp, "c", &[Some("d")], "f");
        assert_eq!(
            partial(judge(&[vec![&t0], vec![&t1]], &x)),
            (1, vec!["LSRs missing"], 0)
        );
    }

    /// The paths of an `ecmp` LSP `a -> d`: through b1 and c1, and through b2 and c2.
    fn two_paths(class: TunnelClass) -> [TruthTunnel; 2] {
        let t0 = truth(class, "a", &["b1", "c1"], "d");
        let t1 = TruthTunnel {
            branch: 1,
            ..truth(class, "a", &["b2", "c2"], "d")
        };
        [t0, t1]
    }

    #[test]
    fn either_path_of_an_ecmp_lsp_is_correct() {
        let [t0, t1] = two_paths(Explicit);
        let alts = [vec![&t0, &t1]];
        let x = report(Explicit, "a", &[Some("b2"), Some("c2")], "d");
        assert_eq!(judge(&alts, &x), Verdict::Correct(0));
        let x = report(Explicit, "a", &[Some("b1"), Some("c1")], "d");
        assert_eq!(judge(&alts, &x), Verdict::Correct(0));
    }

    #[test]
    fn lsrs_of_two_paths_are_partial_not_wrong() {
        let [t0, t1] = two_paths(InvisiblePhp);
        let alts = [vec![&t0, &t1]];
        let j = |x: Reported| partial(judge(&alts, &x));
        // b1 then c2: each an LSR of the LSP, no path has both
        assert_eq!(
            j(report(InvisiblePhp, "a", &[Some("b1"), Some("c2")], "d")),
            (0, vec!["LSRs missing", "LSRs of two paths"], 0)
        );
        assert_eq!(
            j(report(
                InvisiblePhp,
                "a",
                &[Some("b1"), Some("b2"), Some("c1")],
                "d"
            )),
            (0, vec!["LSRs extra/wrong", "LSRs of two paths"], 0)
        );
        // a router on no path is a wrong LSR, judged against the closest path
        assert_eq!(
            j(report(InvisiblePhp, "a", &[Some("b2"), Some("x")], "d")),
            (0, vec!["LSRs missing", "LSRs extra/wrong"], 1)
        );
    }

    fn destination(tunnels: Vec<TruthTunnel>, path: &[&str]) -> Destination {
        let hops: Vec<Hop> = path
            .iter()
            .map(|r| Hop {
                router: r.to_string(),
                addr: Ipv4Addr::UNSPECIFIED,
            })
            .collect();
        Destination {
            dst: Ipv4Addr::UNSPECIFIED,
            name: "h".into(),
            vantage_point: "vp".into(),
            forward: hops.clone(),
            forward_paths: vec![hops],
            return_path: Vec::new(),
            tunnels,
            return_tunnels: Vec::new(),
            unreachable: false,
        }
    }

    fn seen(observable: bool) -> Observation {
        Observation {
            observable,
            ..Observation::default()
        }
    }

    #[test]
    fn scores_count_truth_tunnels_reports_and_false_tunnels() {
        let mut s = Scorer::default();
        // Three tunnels: one reported right, one with its egress wrong, one (UHP, egress
        // d2 hidden, next hop e) only listed as unrevealed; the last is not observable.
        let d = destination(
            vec![
                truth(Explicit, "a", &["a1"], "b"),
                truth(Explicit, "b", &["b1"], "c"),
                truth(InvisibleUhp, "c", &["c1"], "d"),
            ],
            &["a", "a1", "b", "b1", "c", "c1", "d", "e"],
        );
        let reports = [
            report(Explicit, "a", &[Some("a1")], "b"),
            report(Explicit, "b", &[Some("b1"), Some("c")], "c1"),
            report(InvisiblePhp, "x", &[], "y"),
        ];
        let candidates = [(Some("c".to_string()), Some("e".to_string()))];
        s.destination(
            "t",
            &d,
            &[seen(true), seen(true), seen(false)],
            &reports,
            &candidates,
            "",
        );
        // And an MPLS-free path with one report on it.
        let free = destination(Vec::new(), &["a", "z"]);
        s.destination("t", &free, &[], &[report(Opaque, "a", &[], "z")], &[], "");
        let mut r = AccuracyReport::default();
        s.finish(&mut r);
        let x = &r.strict;
        let e = &x.classes[0];
        assert_eq!(e.class, "explicit");
        assert_eq!(
            (e.truth, e.correct, e.ends_right, e.partial, e.missed),
            (2, 1, 1, 1, 0)
        );
        assert_eq!((e.reported, e.reported_correct, e.precision), (2, 1, 0.5));
        assert_eq!((e.observable, e.observable_correct), (2, 1));
        let u = &x.classes[4];
        assert_eq!(u.class, "invisible-uhp");
        assert_eq!((u.truth, u.correct, u.partial, u.observable), (1, 0, 1, 0));
        assert_eq!(
            (x.all.truth, x.all.correct, x.all.recall),
            (3, 1, 1.0 / 3.0)
        );
        assert_eq!(x.partial.tunnels, 1);
        assert_eq!((x.partial.wrong_egress, x.partial.lsrs_extra), (1, 1));
        assert_eq!(x.wrong_lsrs, 1);
        assert_eq!(x.false_tunnels, 1);
        assert_eq!(
            (x.mpls_free_paths, x.false_tunnels_on_mpls_free_paths),
            (1, 1)
        );
        // The opaque report on the free path counts against opaque precision.
        assert_eq!((x.classes[2].reported, x.classes[2].precision), (1, 0.0));
    }

    #[test]
    fn the_paths_of_an_ecmp_lsp_are_one_tunnel() {
        let mut s = Scorer::default();
        // One LSP over two paths, only the second observable: found on the second by one
        // report, mixed by another.
        let [t0, t1] = two_paths(Explicit);
        let d = destination(vec![t0, t1], &["a", "b2", "c2", "d", "e"]);
        let reports = [
            report(Explicit, "a", &[Some("b2"), Some("c2")], "d"),
            report(Explicit, "a", &[Some("b2"), Some("c1")], "d"),
        ];
        s.destination("t", &d, &[seen(false), seen(true)], &reports, &[], "");
        // Not reported at all: missed once.
        let [t0, t1] = two_paths(Opaque);
        let d = destination(vec![t0, t1], &["a", "b1", "c1", "d", "e"]);
        s.destination("t", &d, &[seen(true), seen(true)], &[], &[], "");
        let mut r = AccuracyReport::default();
        s.finish(&mut r);
        let x = &r.strict;
        let e = &x.classes[0];
        assert_eq!(
            (e.truth, e.correct, e.ends_right, e.partial, e.missed),
            (1, 1, 1, 0, 0)
        );
        assert_eq!((e.observable, e.observable_correct), (1, 1));
        assert_eq!((e.reported, e.reported_correct), (2, 1));
        let o = &x.classes[2];
        assert_eq!((o.truth, o.missed, o.observable), (1, 1, 1));
        assert_eq!((x.partial.tunnels, x.partial.lsrs_of_two_paths), (1, 1));
        assert_eq!(x.wrong_lsrs, 0);
    }
}
