//! `tnt-accuracy`: TNT run against the lab's ground truth, on the reference topology and
//! on generated ones, scored per class.
//!
//! Matching is by router, not address (a revealed LSR answers from the interface the
//! revelation trace enters it on, a buddy egress from the far end of a link): every
//! address TNT reports is mapped to the router that owns it with the truth's address
//! lists. A detected tunnel matches a truth tunnel of the same path when their ingress
//! routers, egress routers or LSR routers overlap.
//!
//! The truth says what is observable (`detectable`, `signals`, `revealable_by`,
//! `revelation_possible`, computed by the lab from emulated probes), so TNT is scored
//! against what a traceroute can show, not against every tunnel that exists.
//!
//! Scores:
//! - per class: truth tunnels, detectable ones, detected (a matching detected tunnel of
//!   the same class; for invisible tunnels also a trigger of the right kind that TNT
//!   listed as unrevealed), recall over the detectable ones; precision: detected tunnels
//!   with a matching truth tunnel of their class;
//! - hidden LSRs of invisible tunnels revealed, in order (longest common subsequence of
//!   truth and revealed LSR routers): (a) where the truth says revelation is possible,
//!   (b) every revealable tunnel, and of those the ones a candidate of TNT tested (its
//!   hop pair is the tunnel's), (c) the same in brute-force mode;
//! - false tunnels: anything detected on a path the truth calls MPLS-free;
//! - signatures: for every router with both halves of a signature, the `<te, er>` TNT
//!   inferred against the truth's; routers without are counted apart, as unknown;
//! - probes per revealed LSR: revelation probes over distinct revealed LSRs.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use serde::Serialize;
use vtnt_lab::truth::Tunnel as TruthTunnel;
use vtnt_lab::{generate, GenOptions, Lab, Revelation, Topology, Truth};
use vtnt_tnt::{TntConfig, TntResult, Trigger, TunnelClass};

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
        }
    }
}

/// Scores of one class.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ClassScore {
    pub class: &'static str,
    /// Tunnels of this class on the traced paths (per path, so a tunnel crossed by two
    /// paths counts twice).
    pub truth: usize,
    /// Of those, the ones a traceroute can show, as the truth says from emulated probes
    /// (explicit: a labelled LSR; implicit: a quoted TTL above 1 or a u-turn run of 3;
    /// opaque: a labelled egress with LSE-TTL not 1; invisible: a trigger condition).
    pub detectable: usize,
    /// Of the truth tunnels, detected with the right class.
    pub detected: usize,
    /// Of the detectable ones, detected with the right class.
    pub detected_detectable: usize,
    /// `detected_detectable / detectable`.
    pub recall: f64,
    /// Tunnels TNT reported with this class.
    pub reported: usize,
    /// Of those, matching a truth tunnel of this class.
    pub correct: usize,
    pub precision: f64,
    /// LSRs of the truth tunnels, and how many TNT listed in the right order.
    pub lsrs: usize,
    pub lsrs_found: usize,
}

/// Hidden LSRs of a set of invisible tunnels, and how many TNT revealed in the right
/// order (longest common subsequence with the truth).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct LsrShare {
    pub tunnels: usize,
    pub lsrs: usize,
    pub revealed: usize,
    /// `revealed / lsrs` (1 when there are none).
    pub share: f64,
}

impl LsrShare {
    fn add(&mut self, lsrs: usize, revealed: usize) {
        self.tunnels += 1;
        self.lsrs += lsrs;
        self.revealed += revealed;
    }
    fn finish(&mut self) {
        self.share = ratio(self.revealed, self.lsrs);
    }
}

/// Hidden LSRs of invisible tunnels.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct HiddenScore {
    /// Tunnels the truth says TNT can reveal: a revelation works (`revealable_by` dpr,
    /// brpr or buddy, emulated) and a trigger condition holds at the default thresholds.
    pub possible: LsrShare,
    /// Every tunnel a revelation works for, triggers or not.
    pub revealable: LsrShare,
    /// Revealable tunnels a trigger of TNT's fired for (a candidate matched them,
    /// revealed or not): revelation quality apart from trigger coverage.
    pub triggered: LsrShare,
    /// Invisible tunnels no revelation can show, and how many TNT flagged (trigger
    /// fired, revelation reported as failed).
    pub unrevealable_tunnels: usize,
    pub unrevealable_flagged: usize,
}

/// The brute-force run (every hop pair tested).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct BruteForceScore {
    pub hidden: HiddenScore,
    pub false_tunnels_on_mpls_free_paths: usize,
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
    pub vendor_right: usize,
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
}

/// The whole report.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct AccuracyReport {
    pub seed: u64,
    pub topologies: usize,
    pub destinations: usize,
    pub classes: Vec<ClassScore>,
    pub hidden: HiddenScore,
    pub mpls_free_paths: usize,
    pub false_tunnels_on_mpls_free_paths: usize,
    pub routers: RouterScore,
    pub probes: ProbeScore,
    pub brute_force: Option<BruteForceScore>,
    /// Virtual time of all campaigns, in seconds.
    pub virtual_seconds: f64,
    /// One line per miss (undetected, misclassified, false, wrong signature), at most
    /// 40 of each kind.
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

/// Runs the benchmark.
pub fn tnt_accuracy(opts: &AccuracyOptions) -> Result<AccuracyReport, DriveError> {
    let mut topos: Vec<Topology> = Vec::new();
    if opts.reference {
        topos.push(Topology::reference());
    }
    for i in 0..opts.topologies {
        topos.push(generate(topology_seed(opts.seed, i), &opts.generate));
    }
    let cases: Vec<(Topology, Truth)> = topos
        .into_iter()
        .map(|t| {
            let truth = vtnt_lab::truth::truth(&t);
            (t, truth)
        })
        .collect();
    let mut report = run_mode(opts, &opts.tnt, &cases)?;
    if opts.brute_force_too {
        let mut cfg = opts.tnt.clone();
        cfg.classify.brute_force = true;
        let b = run_mode(opts, &cfg, &cases)?;
        report.brute_force = Some(BruteForceScore {
            hidden: b.hidden,
            false_tunnels_on_mpls_free_paths: b.false_tunnels_on_mpls_free_paths,
            probes: b.probes,
        });
        report.virtual_seconds += b.virtual_seconds;
    }
    Ok(report)
}

fn run_mode(
    opts: &AccuracyOptions,
    cfg: &TntConfig,
    cases: &[(Topology, Truth)],
) -> Result<AccuracyReport, DriveError> {
    let mut acc = Scorer::default();
    let mut report = AccuracyReport {
        seed: opts.seed,
        ..AccuracyReport::default()
    };
    for (i, (topo, truth)) in cases.iter().enumerate() {
        let mut lab = Lab::new(topo.clone());
        let targets: Vec<IpAddr> = truth
            .destinations
            .iter()
            .map(|d| IpAddr::V4(d.dst))
            .collect();
        let run = run_tnt(
            &mut lab,
            &targets,
            cfg.clone(),
            topology_seed(opts.seed, i) ^ 1,
        )?;
        report.topologies += 1;
        report.destinations += targets.len();
        report.virtual_seconds += run.virtual_us as f64 / 1e6;
        report.probes.total += run.summary.probes();
        report.probes.initial += run.summary.trace_probes;
        report.probes.pings += run.summary.ping_probes;
        report.probes.revelation += run.summary.revelation_probes;
        report.probes.lsrs_revealed += run.summary.lsrs_revealed;
        acc.score(truth, &run.results);
    }
    acc.finish(&mut report);
    Ok(report)
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

/// Longest common subsequence length.
fn lcs<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    let mut prev = vec![0usize; b.len() + 1];
    for x in a {
        let mut cur = vec![0usize; b.len() + 1];
        for (j, y) in b.iter().enumerate() {
            cur[j + 1] = if x == y {
                prev[j] + 1
            } else {
                prev[j + 1].max(cur[j])
            };
        }
        prev = cur;
    }
    prev[b.len()]
}

/// A detected tunnel, addresses mapped to routers.
struct Det {
    class: TunnelClass,
    ingress: Option<String>,
    egress: Option<String>,
    lsrs: Vec<String>,
}

/// What was seen of one router: te iTTL, er iTTL, truth signature, truth vendor.
type SeenRouter = (Option<u8>, Option<u8>, [u8; 2], &'static str);

#[derive(Default)]
struct Scorer {
    classes: BTreeMap<TunnelClass, ClassScore>,
    hidden: HiddenScore,
    mpls_free: usize,
    false_free: usize,
    /// router -> (te iTTL, er iTTL) seen, truth signature, vendor, silent
    sigs: BTreeMap<(usize, String), SeenRouter>,
    topo: usize,
    misses: BTreeMap<&'static str, Vec<String>>,
}

impl Scorer {
    fn miss(&mut self, kind: &'static str, s: String) {
        let v = self.misses.entry(kind).or_default();
        if v.len() < MAX_MISSES {
            v.push(format!("{kind}: {s}"));
        }
    }

    fn score(&mut self, truth: &Truth, results: &[TntResult]) {
        self.topo += 1;
        let owner: BTreeMap<Ipv4Addr, &str> = truth
            .routers
            .iter()
            .flat_map(|r| r.addresses.iter().map(move |a| (*a, r.name.as_str())))
            .collect();
        let router = |a: Option<IpAddr>| -> Option<String> {
            match a? {
                IpAddr::V4(v4) => owner.get(&v4).map(|s| s.to_string()),
                IpAddr::V6(_) => None,
            }
        };
        let by_dst: BTreeMap<IpAddr, &TntResult> = results.iter().map(|r| (r.target, r)).collect();
        let topo = self.topo;
        for d in &truth.destinations {
            let Some(r) = by_dst.get(&IpAddr::V4(d.dst)) else {
                self.miss(
                    "no-result",
                    format!("{}: no result for {}", truth.topology, d.name),
                );
                continue;
            };
            let dets: Vec<Det> = r
                .tunnels
                .iter()
                .map(|t| Det {
                    class: t.class,
                    ingress: router(t.ingress),
                    egress: router(t.egress),
                    lsrs: t.lsrs.iter().filter_map(|a| router(*a)).collect(),
                })
                .collect();
            self.signatures(topo, truth, r, &router);
            if d.tunnels.is_empty() {
                self.mpls_free += 1;
                self.false_free += dets.len();
                for t in &r.tunnels {
                    self.miss(
                        "false-tunnel",
                        format!(
                            "{} {}: false {} tunnel {:?} -> {:?} on an MPLS-free path",
                            truth.topology,
                            d.name,
                            t.class.name(),
                            t.ingress,
                            t.egress
                        ),
                    );
                }
            }
            let matches = |t: &TruthTunnel, x: &Det| {
                x.ingress.as_deref() == Some(&t.ingress_router)
                    || x.egress.as_deref() == Some(&t.egress_router)
                    || x.lsrs.iter().any(|l| t.lsr_routers.contains(l))
            };
            for t in &d.tunnels {
                let class = t.class;
                let row = self.classes.entry(class).or_default();
                row.truth += 1;
                let detectable = t.detectable;
                if detectable {
                    row.detectable += 1;
                }
                row.lsrs += t.lsr_routers.len();
                let found = dets
                    .iter()
                    .filter(|x| x.class == class && matches(t, x))
                    .max_by_key(|x| lcs(&t.lsr_routers, &x.lsrs));
                if let Some(x) = found {
                    row.detected += 1;
                    if detectable {
                        row.detected_detectable += 1;
                    }
                    row.lsrs_found += lcs(&t.lsr_routers, &x.lsrs);
                }
                if class.is_invisible() {
                    let revealable = matches!(
                        t.revealable_by,
                        Some(Revelation::Dpr | Revelation::Brpr | Revelation::Buddy)
                    );
                    let after_egress = d
                        .forward
                        .iter()
                        .position(|h| h.router == t.egress_router)
                        .and_then(|i| d.forward.get(i + 1))
                        .map(|h| h.router.clone());
                    // A candidate tested this tunnel: its hop pair is the tunnel's ingress
                    // and egress (or, UHP, the hop after the missing egress).
                    let candidate_matches = |ing: IpAddr, egr: IpAddr| {
                        let (ui, ue) = (router(Some(ing)), router(Some(egr)));
                        ui.as_deref() == Some(&t.ingress_router)
                            && (ue.as_deref() == Some(&t.egress_router)
                                || (ue.is_some() && ue == after_egress))
                    };
                    let best = dets
                        .iter()
                        .filter(|x| x.class.is_invisible() && matches(t, x))
                        .map(|x| lcs(&t.lsr_routers, &x.lsrs))
                        .max();
                    let triggered = best.is_some()
                        || r.unrevealed
                            .iter()
                            .any(|u| candidate_matches(u.ingress, u.egress));
                    // An invisible tunnel TNT suspected but could not reveal is listed in
                    // `unrevealed`: detected, when the trigger points to its class.
                    let flagged = r.unrevealed.iter().any(|u| {
                        let same_class = match u.trigger {
                            Trigger::DupIp => class == TunnelClass::InvisibleUhp,
                            Trigger::Rtla | Trigger::Frpla => class == TunnelClass::InvisiblePhp,
                            Trigger::Mttl => false,
                            Trigger::BruteForce => true,
                        };
                        same_class && candidate_matches(u.ingress, u.egress)
                    });
                    if found.is_none() && flagged {
                        let row = self.classes.entry(class).or_default();
                        row.detected += 1;
                        if detectable {
                            row.detected_detectable += 1;
                        }
                    }
                    let n = t.lsr_routers.len();
                    if revealable {
                        let best = best.unwrap_or(0);
                        self.hidden.revealable.add(n, best);
                        if t.revelation_possible {
                            self.hidden.possible.add(n, best);
                        }
                        if triggered {
                            self.hidden.triggered.add(n, best);
                        }
                        if best < n && (t.revelation_possible || triggered) {
                            let kind = if triggered {
                                "hidden-lsrs"
                            } else {
                                "not-triggered"
                            };
                            self.miss(kind, format!(
                                "{} {}: {} tunnel {}->{} (revealable by {:?}, possible {}, signals {:?}): revealed {best}/{} LSRs {:?}; TNT: {}",
                                truth.topology,
                                d.name,
                                class.name(),
                                t.ingress_router,
                                t.egress_router,
                                t.revealable_by,
                                t.revelation_possible,
                                t.signals.as_ref().map(|s| (&s.triggers, s.frpla, s.frpla_ingress, s.rtla)),
                                n,
                                t.lsr_routers,
                                describe(r),
                            ));
                        }
                    } else {
                        self.hidden.unrevealable_tunnels += 1;
                        let flagged = triggered;
                        if flagged {
                            self.hidden.unrevealable_flagged += 1;
                        }
                    }
                } else if found.is_none() && detectable {
                    self.miss(
                        "undetected",
                        format!(
                            "{} {}: {} tunnel {}->{} not detected; TNT: {}",
                            truth.topology,
                            d.name,
                            class.name(),
                            t.ingress_router,
                            t.egress_router,
                            describe(r)
                        ),
                    );
                }
            }
            for x in &dets {
                let row = self.classes.entry(x.class).or_default();
                row.reported += 1;
                let ok = d
                    .tunnels
                    .iter()
                    .any(|t| t.class == x.class && matches(t, x));
                if ok {
                    row.correct += 1;
                } else if !d.tunnels.is_empty() {
                    self.miss("unmatched-report", format!(
                        "{} {}: reported {} tunnel {:?}->{:?} {:?} matches no truth tunnel ({:?})",
                        truth.topology,
                        d.name,
                        x.class.name(),
                        x.ingress,
                        x.egress,
                        x.lsrs,
                        d.tunnels.iter().map(|t| (t.class, &t.ingress_router, &t.egress_router)).collect::<Vec<_>>()
                    ));
                }
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
            let entry =
                self.sigs
                    .entry((topo, name))
                    .or_insert((None, None, rt.signature, rt.vendor));
            let s = e.annotation.signature;
            entry.0 = entry.0.or(s.te);
            entry.1 = entry.1.or(s.er);
        }
    }

    fn finish(mut self, report: &mut AccuracyReport) {
        for class in TunnelClass::ALL {
            let mut row = self.classes.remove(&class).unwrap_or_default();
            row.class = class.name();
            row.recall = ratio(row.detected_detectable, row.detectable);
            row.precision = ratio(row.correct, row.reported);
            report.classes.push(row);
        }
        self.hidden.possible.finish();
        self.hidden.revealable.finish();
        self.hidden.triggered.finish();
        report.hidden = self.hidden.clone();
        report.mpls_free_paths = self.mpls_free;
        report.false_tunnels_on_mpls_free_paths = self.false_free;
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

    /// The report as markdown: the per-class table, then hidden LSRs, false tunnels,
    /// signatures and probes.
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "TNT accuracy: {} topologies (seed {}), {} destinations\n\n",
            self.topologies, self.seed, self.destinations
        ));
        s.push_str("| class | truth | detectable | detected | recall (of detectable) | reported | correct | precision | LSRs in order |\n");
        s.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for c in &self.classes {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {:.1}% ({}/{}) | {} | {} | {:.1}% | {}/{} |\n",
                c.class,
                c.truth,
                c.detectable,
                c.detected,
                c.recall * 100.0,
                c.detected_detectable,
                c.detectable,
                c.reported,
                c.correct,
                c.precision * 100.0,
                c.lsrs_found,
                c.lsrs
            ));
        }
        let h = &self.hidden;
        let row = |what: &str, x: &LsrShare| {
            format!(
                "| {what} | {} | {} | {} | {:.1}% |\n",
                x.tunnels,
                x.lsrs,
                x.revealed,
                x.share * 100.0
            )
        };
        s.push_str("\n| hidden LSRs of invisible tunnels, revealed in order | tunnels | LSRs | revealed | share |\n");
        s.push_str("|---|---:|---:|---:|---:|\n");
        s.push_str(&row(
            "(a) revelation possible (truth: revealable and a trigger fires)",
            &h.possible,
        ));
        s.push_str(&row("(b) all revealable, default mode", &h.revealable));
        s.push_str(&row("    of which a trigger of TNT fired", &h.triggered));
        if let Some(b) = &self.brute_force {
            s.push_str(&row(
                "(c) all revealable, brute force",
                &b.hidden.revealable,
            ));
        }
        s.push_str(&format!(
            "\nUnrevealable invisible tunnels: {} ({} flagged as such)\n",
            h.unrevealable_tunnels, h.unrevealable_flagged
        ));
        s.push_str(&format!(
            "False tunnels on MPLS-free paths: {} (over {} paths)",
            self.false_tunnels_on_mpls_free_paths, self.mpls_free_paths
        ));
        if let Some(b) = &self.brute_force {
            s.push_str(&format!(
                "; brute force: {}",
                b.false_tunnels_on_mpls_free_paths
            ));
        }
        s.push('\n');
        let r = &self.routers;
        s.push_str(&format!(
            "Signatures: {} routers seen, {} responsive (time exceeded and echo reply): {} right, {} wrong; {} unknown (no echo reply or no time-exceeded); vendor right {}\n",
            r.seen, r.responsive, r.signature_right, r.signature_wrong, r.unknown, r.vendor_right
        ));
        let p = &self.probes;
        s.push_str(&format!(
            "Probes: {} (initial traces {}, pings {}, revelation {}); {:.1} revelation probes per revealed LSR ({} LSRs)\n",
            p.total, p.initial, p.pings, p.revelation, p.per_revealed_lsr, p.lsrs_revealed
        ));
        if let Some(b) = &self.brute_force {
            s.push_str(&format!(
                "Brute force probes: {} (revelation {}); {:.1} revelation probes per revealed LSR ({} LSRs)\n",
                b.probes.total, b.probes.revelation, b.probes.per_revealed_lsr, b.probes.lsrs_revealed
            ));
        }
        s.push_str(&format!("Virtual time: {:.1} s\n", self.virtual_seconds));
        s
    }
}
