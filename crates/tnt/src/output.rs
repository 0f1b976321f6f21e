//! What TNT hands back per target ([`TntResult`]) and per campaign ([`Summary`]), and
//! how a result is assembled from a trace, its classification and the revelations.
//!
//! With the `serde` feature every type here is `Serialize`, with the field names listed
//! in `docs/tnt.md`. They are shaped to ride inside scamper-JSON objects as one extra
//! field `"tnt"`: [`TntResult::trace_annotation`] for the trace object, and
//! [`TntResult::hops`] (parallel to the trace's `hops` array) for the hop objects, so
//! scamper-JSON readers that ignore unknown fields keep working.

use alloc::vec::Vec;
use core::net::IpAddr;

use vtnt_engine::MeasurementError;
use vtnt_record::{Hop, Record, Trace};

use crate::analysis::{Signature, Vendor};
use crate::classify::{
    hop_metrics, Candidate, Classification, Evidence, Role, Trigger, TunnelClass,
};
use crate::path::{Path, PathHop};
use crate::reveal::{RevealMethod, RevealStatus, Revelation};

/// The TNT annotation of one reply (one scamper hop object).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct HopAnnotation {
    /// Reply TTL of the time-exceeded message (`None` for other replies).
    pub te: Option<u8>,
    /// Reply TTL of the echo reply to the fingerprint ping (`None`: no echo reply).
    pub er: Option<u8>,
    /// `<iTTL te, iTTL er>`.
    pub signature: Signature,
    pub vendor: Option<Vendor>,
    /// Quoted IP-TTL of the probe.
    pub qttl: Option<u8>,
    pub uturn: i16,
    pub frpla: i16,
    pub rtla: i16,
    /// The tunnels the hop belongs to, with its role in each.
    pub mpls: Vec<Membership>,
}

/// A hop's part in one tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Membership {
    /// Index in [`TntResult::tunnels`].
    pub tunnel: usize,
    pub class: TunnelClass,
    pub role: Role,
    /// What showed a visible tunnel (labels, qttl, uturn).
    pub evidence: Option<Evidence>,
    /// What made TNT look for a hidden tunnel.
    pub trigger: Option<Trigger>,
    /// How the hop was revealed (revealed LSRs only).
    pub method: Option<RevealMethod>,
    /// Revelation step (revealed LSRs only).
    pub step: Option<u8>,
}

/// Where a path entry comes from, for revealed hops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Revealed {
    pub tunnel: usize,
    pub method: RevealMethod,
    pub step: u8,
}

/// One line of the path with revealed hops spliced in.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PathEntry {
    /// TTL in the initial trace; `None` for revealed hops.
    pub probe_ttl: Option<u8>,
    /// `None`: no reply at this TTL (or an unanswered revealed slot).
    pub addr: Option<IpAddr>,
    /// Round-trip time in microseconds.
    pub rtt_us: Option<u64>,
    /// Index of the reply in the trace's `hops` (initial-trace entries only).
    pub hop: Option<usize>,
    /// Set for hops revealed by DPR/BRPR/buddy.
    pub revealed: Option<Revealed>,
    pub annotation: HopAnnotation,
    /// The label stack, `(label, LSE-TTL)` top first.
    pub labels: Vec<(u32, u8)>,
}

/// How the revelation of a tunnel went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RevelationInfo {
    pub status: RevealStatus,
    /// Method of the first revealed hop (DPR, BRPR, buddy).
    pub method: Option<RevealMethod>,
    /// Highest step reached.
    pub steps: u8,
    pub traces: u16,
    pub probes: u32,
    /// True when the result came from the (ingress, egress) cache of an earlier target.
    pub cached: bool,
}

/// One tunnel on the path.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Tunnel {
    pub class: TunnelClass,
    pub evidence: Option<Evidence>,
    pub trigger: Option<Trigger>,
    pub ingress: Option<IpAddr>,
    pub egress: Option<IpAddr>,
    /// LSRs in path order; `None` for an LSR slot that did not answer.
    pub lsrs: Vec<Option<IpAddr>>,
    /// Opaque tunnels: hidden LSRs estimated from the egress's LSE-TTL.
    pub hidden_estimate: Option<u8>,
    pub revelation: Option<RevelationInfo>,
    /// Plain statement of what could not be done, instead of a guess.
    pub note: Option<&'static str>,
}

/// A trigger that fired but whose revelation showed no LSR: not reported as a tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Unrevealed {
    pub trigger: Trigger,
    pub ingress: IpAddr,
    pub egress: IpAddr,
    /// `None` when revelation was not attempted (disabled).
    pub status: Option<RevealStatus>,
    pub traces: u16,
    pub cached: bool,
}

/// Why a target has no trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TntError {
    /// The engine refused (or lost) the trace measurement.
    Measurement(MeasurementError),
    /// The record handed back for the trace measurement was not a trace (a driver's mistake).
    NotATrace,
}

impl core::fmt::Display for TntError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TntError::Measurement(e) => e.fmt(f),
            TntError::NotATrace => {
                f.write_str("the record returned for the trace measurement is not a trace")
            }
        }
    }
}

impl core::error::Error for TntError {}

/// Why TNT sent a ping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
pub enum PingPurpose {
    /// A reply address of the initial trace: its echo-reply TTL completes the hop's
    /// `<te,er>` signature and is what RTLA compares.
    Hop,
    /// A revealed LSR or egress: its signature.
    Revealed,
}

/// What a record TNT made was for: the `role` key of its `"tnt"` field (docs/tnt.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(tag = "role", rename_all = "kebab-case")
)]
pub enum RecordRole {
    /// A target's initial (or seed) trace; its `"tnt"` is the [`TraceAnnotation`].
    Initial,
    /// A fingerprint ping.
    Ping { purpose: PingPurpose },
    /// A revelation trace of the candidate tunnel `anchor -> egress` (the revelation's
    /// cache key: `anchor` is the ingress, or the hop before an unanswered one).
    Reveal {
        anchor: IpAddr,
        egress: IpAddr,
        trigger: Trigger,
        /// What the trace was run as (DPR: to the egress; buddy; BRPR: to the newest
        /// revealed LSR).
        method: RevealMethod,
        /// The revelation step it is for (1: the first trace, +1 per BRPR step).
        step: u8,
    },
}

/// A ping or revelation trace TNT made, with what it was for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleRecord {
    pub role: RecordRole,
    pub record: Record,
}

/// TNT's result for one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TntResult {
    pub target: IpAddr,
    /// The initial (or seed) trace; `None` when it failed (`error`).
    pub trace: Option<Trace>,
    pub error: Option<TntError>,
    /// Annotation of each reply, parallel to `trace.hops`.
    pub hops: Vec<HopAnnotation>,
    /// The path, one entry per TTL, revealed hops spliced in after their ingress.
    pub path: Vec<PathEntry>,
    pub tunnels: Vec<Tunnel>,
    pub unrevealed: Vec<Unrevealed>,
    /// Probes this target cost: its trace, the pings and revelation traces it started
    /// (measured in this run or read back, [`crate::Tnt::add_seed_trace`] and friends).
    pub probes: u32,
    /// The pings and revelation traces this target started, in the order they finished
    /// (a ping or revelation shared with other targets is the first asker's).
    pub measurements: Vec<RoleRecord>,
    /// The campaign stopped before this target's pings and revelations were over
    /// ([`crate::Tnt::take_unfinished`]): the result holds what was measured by then.
    pub incomplete: bool,
}

/// The trace-level `"tnt"` object: everything but the trace and the per-hop annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TraceAnnotation<'a> {
    /// `"initial"`: [`RecordRole::Initial`] as its tag (a plain string: serde's
    /// `flatten` of the role would cost the unikernel's image a map serializer).
    pub role: &'static str,
    /// Version of this annotation layout (2: records of every role are written).
    pub version: u8,
    pub tunnels: &'a [Tunnel],
    pub unrevealed: &'a [Unrevealed],
    pub path: &'a [PathEntry],
    pub probes: u32,
    /// Written only when true: the campaign stopped before this target's pings and
    /// revelations were over ([`TntResult::incomplete`]).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "core::ops::Not::not"))]
    pub incomplete: bool,
    /// Written only for an IPv6 target, as `"validated":"lab-only"`: TNT over IPv6, its
    /// tunnels and its hops' vendor readings, is checked against the lab alone (no real
    /// IPv6 MPLS data, no published per-vendor ICMPv6 hop limits; docs/tnt.md).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub validated: Option<&'static str>,
}

impl TntResult {
    /// The object to add as `"tnt"` to the scamper-JSON trace object.
    pub fn trace_annotation(&self) -> TraceAnnotation<'_> {
        TraceAnnotation {
            role: "initial",
            version: 2,
            tunnels: &self.tunnels,
            unrevealed: &self.unrevealed,
            path: &self.path,
            probes: self.probes,
            incomplete: self.incomplete,
            validated: self.target.is_ipv6().then_some("lab-only"),
        }
    }
    /// A result for a target whose trace failed.
    pub fn failed(target: IpAddr, error: TntError) -> TntResult {
        TntResult {
            target,
            trace: None,
            error: Some(error),
            hops: Vec::new(),
            path: Vec::new(),
            tunnels: Vec::new(),
            unrevealed: Vec::new(),
            probes: 0,
            measurements: Vec::new(),
            incomplete: false,
        }
    }
}

/// Campaign-wide counts. Tunnels are counted once per distinct (class, ingress, egress,
/// LSRs), however many targets crossed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Summary {
    pub targets: usize,
    pub targets_done: usize,
    pub explicit: usize,
    pub implicit: usize,
    pub opaque: usize,
    pub invisible_php: usize,
    pub invisible_uhp: usize,
    /// Triggers whose revelation showed nothing (blind-spot tests apart).
    pub unrevealed: usize,
    /// Blind-spot tests that showed nothing: the hop pair before a `<64,64>` or
    /// `<128,128>` router hides no tunnel, as for most such routers.
    pub blind_spots_clear: usize,
    /// Triggers whose revelation could not run: its probes could not be sent (not
    /// counted in `unrevealed`: nothing is known of these tunnels).
    pub reveal_send_errors: usize,
    pub lsrs_revealed: usize,
    /// Probes by purpose: initial traces, fingerprint pings, revelation traces.
    pub trace_probes: u64,
    pub ping_probes: u64,
    pub revelation_probes: u64,
    pub revelation_cache_hits: usize,
    /// The same probes split finer, phase by phase.
    pub budget: Budget,
}

/// Where the probes of a campaign went, counted as each measurement's record comes
/// in. `initial + hop_pings + revealed_pings + dpr + brpr + buddy + retries` is every
/// probe sent; the trigger fields split the revelation probes again by what asked for
/// them (walked-back and walked-forward pairs count under the trigger they came from).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Budget {
    /// Initial traces.
    pub initial: u64,
    /// Fingerprint pings of the addresses of initial traces.
    pub hop_pings: u64,
    /// Pings of revealed LSRs and egresses.
    pub revealed_pings: u64,
    /// Revelation traces to the egress (or, for DUP_IP, the hop after it).
    pub dpr: u64,
    /// BRPR steps after the first trace.
    pub brpr: u64,
    /// Buddy traces (DUP_IP).
    pub buddy: u64,
    /// Revelation traces run again on another flow because the previous one did not
    /// show the anchor (ingress retries).
    pub retries: u64,
    pub mttl: u64,
    pub dup_ip: u64,
    pub rtla: u64,
    pub frpla: u64,
    pub blind: u64,
    pub brute_force: u64,
}

impl Budget {
    /// Every probe, phase by phase.
    pub fn total(&self) -> u64 {
        self.initial
            + self.hop_pings
            + self.revealed_pings
            + self.dpr
            + self.brpr
            + self.buddy
            + self.retries
    }

    /// Adds another campaign's budget.
    pub fn add(&mut self, o: &Budget) {
        let pairs = [
            (&mut self.initial, o.initial),
            (&mut self.hop_pings, o.hop_pings),
            (&mut self.revealed_pings, o.revealed_pings),
            (&mut self.dpr, o.dpr),
            (&mut self.brpr, o.brpr),
            (&mut self.buddy, o.buddy),
            (&mut self.retries, o.retries),
            (&mut self.mttl, o.mttl),
            (&mut self.dup_ip, o.dup_ip),
            (&mut self.rtla, o.rtla),
            (&mut self.frpla, o.frpla),
            (&mut self.blind, o.blind),
            (&mut self.brute_force, o.brute_force),
        ];
        for (a, b) in pairs {
            *a += b;
        }
    }

    /// Adds `probes` of a revelation trace run as `method` (a `retry` or not) for `trigger`.
    pub(crate) fn reveal(
        &mut self,
        trigger: Trigger,
        method: RevealMethod,
        retry: bool,
        probes: u64,
    ) {
        *match (retry, method) {
            (true, _) => &mut self.retries,
            (_, RevealMethod::Dpr) => &mut self.dpr,
            (_, RevealMethod::Brpr) => &mut self.brpr,
            (_, RevealMethod::Buddy) => &mut self.buddy,
        } += probes;
        *match trigger {
            Trigger::Mttl => &mut self.mttl,
            Trigger::DupIp => &mut self.dup_ip,
            Trigger::Rtla => &mut self.rtla,
            Trigger::Frpla => &mut self.frpla,
            Trigger::Blind => &mut self.blind,
            Trigger::BruteForce => &mut self.brute_force,
        } += probes;
    }
}

impl Summary {
    /// Every probe sent.
    pub fn probes(&self) -> u64 {
        self.trace_probes + self.ping_probes + self.revelation_probes
    }
}

impl core::fmt::Display for Budget {
    /// `initial traces A, hop pings B, ...; revelation by trigger: mttl C, ...`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "initial traces {}, hop pings {}, revealed pings {}, dpr {}, brpr {}, buddy {}, retries {}; revelation by trigger: mttl {}, dup-ip {}, rtla {}, frpla {}, blind {}, brute-force {}",
            self.initial, self.hop_pings, self.revealed_pings, self.dpr, self.brpr, self.buddy, self.retries,
            self.mttl, self.dup_ip, self.rtla, self.frpla, self.blind, self.brute_force
        )
    }
}

/// Annotation of one reply with its echo-reply TTL.
pub fn annotate(hop: &PathHop) -> HopAnnotation {
    let m = hop_metrics(hop);
    let te = hop.is_time_exceeded().then_some(hop.reply_ttl);
    let signature = Signature::from_reply_ttls(te, hop.er);
    HopAnnotation {
        te,
        er: hop.er,
        signature,
        vendor: Some(signature.vendor()),
        qttl: hop.qttl,
        uturn: m.uturn,
        frpla: m.frpla,
        rtla: m.rtla,
        mpls: Vec::new(),
    }
}

/// A candidate with the revelation run for it.
pub struct Tested<'a> {
    pub candidate: &'a Candidate,
    pub revelation: Option<&'a Revelation>,
    /// True when the revelation was cached from an earlier target.
    pub cached: bool,
}

fn labels(hop: &Hop) -> Vec<(u32, u8)> {
    hop.mpls.iter().map(|l| (l.label, l.ttl)).collect()
}

fn entry(hop: &Hop, index: Option<usize>, annotation: HopAnnotation) -> PathEntry {
    PathEntry {
        probe_ttl: index.map(|_| hop.probe_ttl),
        addr: Some(hop.addr),
        rtt_us: Some(hop.rtt.as_micros() as u64),
        hop: index,
        revealed: None,
        annotation,
        labels: labels(hop),
    }
}

/// Assembles the result of one target.
pub fn build_result(
    trace: Trace,
    path: &Path,
    class: &Classification,
    tested: &[Tested<'_>],
    er: &dyn Fn(IpAddr) -> Option<u8>,
    probes: u32,
) -> TntResult {
    let addr = |i: usize| path.get(i).map(|h| h.addr);
    let mut tunnels: Vec<Tunnel> = Vec::new();
    // Memberships per path slot, and revealed spans to splice after a slot.
    let mut members: Vec<Vec<Membership>> = Vec::new();
    members.resize(path.len(), Vec::new());
    let mut splices: Vec<(usize, usize, Vec<PathEntry>)> = Vec::new();
    let mut unrevealed = Vec::new();

    for (t, vt) in class.tunnels.iter().enumerate() {
        let lsrs = vt.lsrs.iter().map(|&i| addr(i)).collect();
        let note = (vt.class == TunnelClass::Opaque)
            .then_some("opaque: hidden LSRs not shown; count estimated from the LSE-TTL");
        tunnels.push(Tunnel {
            class: vt.class,
            evidence: Some(vt.evidence),
            trigger: (vt.class == TunnelClass::Opaque).then_some(Trigger::Mttl),
            ingress: vt.ingress.and_then(addr),
            egress: vt.egress.and_then(addr),
            lsrs,
            hidden_estimate: vt.hidden_estimate,
            revelation: None,
            note,
        });
        let m = |role| Membership {
            tunnel: t,
            class: vt.class,
            role,
            evidence: Some(vt.evidence),
            trigger: tunnels[t].trigger,
            method: None,
            step: None,
        };
        if let Some(i) = vt.ingress {
            members[i].push(m(Role::Ingress));
        }
        for &i in &vt.lsrs {
            members[i].push(m(Role::Lsr));
        }
        for i in vt.egress_repeat.into_iter().chain(vt.egress) {
            members[i].push(m(Role::Egress));
        }
    }

    for tst in tested {
        let c = tst.candidate;
        let (Some(anchor), Some(egress)) = (addr(c.anchor), addr(c.egress)) else {
            continue;
        };
        let Some(rev) = tst.revelation.filter(|r| !r.lsrs().is_empty()) else {
            let status = tst.revelation.map(|r| r.status());
            let egress_only = tst
                .revelation
                .filter(|_| c.trigger == Trigger::DupIp && c.anchor_is_ingress)
                .and_then(|r| r.revealed_egress().map(|e| (r, e)));
            if let Some(t) = c.opaque {
                tunnels[t].revelation = tst.revelation.map(|r| info(r, tst.cached));
                tunnels[t].note =
                    Some("opaque: revelation showed no LSR; count estimated from the LSE-TTL");
            } else if let Some((rev, e)) = egress_only {
                // the buddy trace reached the missing UHP egress right after the ingress
                let t = tunnels.len();
                tunnels.push(Tunnel {
                    class: TunnelClass::InvisibleUhp,
                    evidence: None,
                    trigger: Some(c.trigger),
                    ingress: Some(anchor),
                    egress: Some(e),
                    lsrs: Vec::new(),
                    hidden_estimate: None,
                    revelation: Some(info(rev, tst.cached)),
                    note: Some("LSRs hidden: the buddy trace reached the egress right after the ingress (internal prefixes label switched)"),
                });
                members[c.anchor].push(Membership {
                    tunnel: t,
                    class: TunnelClass::InvisibleUhp,
                    role: Role::Ingress,
                    evidence: None,
                    trigger: Some(c.trigger),
                    method: None,
                    step: None,
                });
            } else {
                unrevealed.push(Unrevealed {
                    trigger: c.trigger,
                    ingress: anchor,
                    egress,
                    status,
                    traces: tst.revelation.map_or(0, |r| r.traces()),
                    cached: tst.cached,
                });
            }
            continue;
        };
        let t = match c.opaque {
            Some(t) => t,
            None => {
                let uhp = c.trigger == Trigger::DupIp;
                tunnels.push(Tunnel {
                    class: if uhp {
                        TunnelClass::InvisibleUhp
                    } else {
                        TunnelClass::InvisiblePhp
                    },
                    evidence: None,
                    trigger: Some(c.trigger),
                    ingress: (c.anchor_is_ingress || rev.silent_egress()).then_some(anchor),
                    egress: if uhp {
                        rev.revealed_egress()
                    } else if rev.silent_egress() {
                        None
                    } else {
                        Some(egress)
                    },
                    lsrs: Vec::new(),
                    hidden_estimate: None,
                    revelation: None,
                    note: None,
                });
                tunnels.len() - 1
            }
        };
        let class_t = tunnels[t].class;
        tunnels[t].lsrs = rev.lsr_addrs().collect();
        tunnels[t].revelation = Some(info(rev, tst.cached));
        tunnels[t].note = match rev.status() {
            RevealStatus::Incomplete(_) => {
                Some("revelation incomplete: BRPR blocked before the ingress")
            }
            _ if c.trigger == Trigger::DupIp
                && rev.lsrs().first().map(|l| l.method) == Some(RevealMethod::Buddy) =>
            {
                Some("egress: its address on the link to the repeated hop (buddy), not the one it receives the tunnel's packets on")
            }
            _ => None,
        };
        let m = |role, method, step| Membership {
            tunnel: t,
            class: class_t,
            role,
            evidence: None,
            trigger: Some(c.trigger),
            method,
            step,
        };
        let anchor_is_ingress = c.anchor_is_ingress || rev.silent_egress();
        if c.opaque.is_none() {
            if anchor_is_ingress {
                members[c.anchor].push(m(Role::Ingress, None, None));
            }
            if c.trigger != Trigger::DupIp && !rev.silent_egress() {
                members[c.egress].push(m(Role::Egress, None, None));
            }
        }
        let mut spliced = Vec::new();
        for l in rev.lsrs() {
            let mut a = match &l.hop {
                Some(h) => annotate(&PathHop::from_hop(0, h, er(h.addr))),
                None => HopAnnotation::default(),
            };
            a.mpls.push(m(Role::Lsr, Some(l.method), Some(l.step)));
            let mut e = match &l.hop {
                Some(h) => entry(h, None, a),
                None => PathEntry {
                    probe_ttl: None,
                    addr: None,
                    rtt_us: None,
                    hop: None,
                    revealed: None,
                    annotation: a,
                    labels: Vec::new(),
                },
            };
            e.revealed = Some(Revealed {
                tunnel: t,
                method: l.method,
                step: l.step,
            });
            spliced.push(e);
        }
        if let (Some(eg), Trigger::DupIp) = (rev.revealed_egress(), c.trigger) {
            // found by the buddy trace, or last in a DPR trace to the hop after it
            let method = rev.lsrs().first().map_or(RevealMethod::Buddy, |l| l.method);
            let mut a = HopAnnotation {
                er: er(eg),
                ..HopAnnotation::default()
            };
            a.signature = Signature::from_reply_ttls(None, a.er);
            a.mpls.push(m(Role::Egress, Some(method), Some(1)));
            spliced.push(PathEntry {
                probe_ttl: None,
                addr: Some(eg),
                rtt_us: None,
                hop: None,
                revealed: Some(Revealed {
                    tunnel: t,
                    method,
                    step: 1,
                }),
                annotation: a,
                labels: Vec::new(),
            });
        }
        let after = if anchor_is_ingress {
            c.anchor
        } else {
            c.anchor + 1
        };
        splices.push((after, t, spliced));
    }

    // Per-reply annotations and the spliced path.
    let mut hops = Vec::with_capacity(trace.hops.len());
    for (k, h) in trace.hops.iter().enumerate() {
        let mut a = annotate(&PathHop::from_hop(k, h, er(h.addr)));
        if let Some(p) = path.get(h.probe_ttl.max(1) as usize - 1) {
            if p.addr == h.addr {
                a.mpls = members[h.probe_ttl as usize - 1].clone();
            }
        }
        hops.push(a);
    }
    let mut out_path = Vec::new();
    let last = path.last_index().map_or(0, |l| l + 1);
    for (i, m) in members.iter().enumerate().take(last) {
        match path.get(i) {
            Some(p) => {
                let mut a = annotate(p);
                a.mpls = m.clone();
                out_path.push(entry(&trace.hops[p.index], Some(p.index), a));
            }
            None => out_path.push(PathEntry {
                probe_ttl: Some(i as u8 + 1),
                addr: None,
                rtt_us: None,
                hop: None,
                revealed: None,
                annotation: HopAnnotation::default(),
                labels: Vec::new(),
            }),
        }
        for (_, _, s) in splices.iter().filter(|(after, _, _)| *after == i) {
            out_path.extend(s.iter().cloned());
        }
    }
    TntResult {
        target: trace.dst,
        trace: Some(trace),
        error: None,
        hops,
        path: out_path,
        tunnels,
        unrevealed,
        probes,
        measurements: Vec::new(),
        incomplete: false,
    }
}

fn info(r: &Revelation, cached: bool) -> RevelationInfo {
    RevelationInfo {
        status: r.status(),
        method: r.lsrs().last().map(|l| l.method),
        steps: r.lsrs().iter().map(|l| l.step).max().unwrap_or(0),
        traces: r.traces(),
        probes: r.probes(),
        cached,
    }
}

#[cfg(test)]
#[path = "output_tests.rs"]
mod tests;
