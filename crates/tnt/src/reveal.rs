//! Revelation of one suspected tunnel, as a small state machine fed with traces: DPR (a
//! trace to the egress shows every hidden LSR at once), BRPR (each trace shows one more
//! LSR, the next trace goes to it, until nothing new shows) and buddy (for UHP/duplicate-IP
//! cases, a trace to the other address of the /30 or /31 of the traced address, which
//! belongs to the missing egress).
//!
//! Each revelation trace is parsed as `sc_tnt` does: the target must be the last hop that
//! answered (else *target not reached*), the anchor (ingress, or the hop before an
//! unanswered ingress) must appear (else *ingress not found*), and the hops strictly
//! between them are new LSRs (none: *nothing revealed*; one: a BRPR step; several: DPR).

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vtnt_record::{Hop, StopReason, Trace};

use crate::classify::Trigger;
use crate::path::Path;

/// How a hidden LSR was revealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
pub enum RevealMethod {
    /// Direct path revelation.
    Dpr,
    /// Backward recursive path revelation.
    Brpr,
    /// Trace to the buddy address of the egress.
    Buddy,
}

impl RevealMethod {
    /// Tag in the text dump.
    pub const fn tag(self) -> &'static str {
        match self {
            RevealMethod::Dpr => "DPR",
            RevealMethod::Brpr => "BRPR",
            RevealMethod::Buddy => "BUD",
        }
    }
}

/// Why a revelation trace showed nothing usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum RevealFailure {
    /// The trace did not end at its target.
    TargetNotReached,
    /// The ingress (anchor) did not appear in the trace.
    IngressNotFound,
    /// The anchor was followed directly by the target.
    NothingRevealed,
    /// BRPR went on longer than the configured step limit.
    StepLimit,
    /// A revealed address came back (routing loop or load balancing).
    Loop,
    /// A probe of the trace could not be sent (the trace stopped with ERROR).
    SendError,
}

impl RevealFailure {
    /// kebab-case name.
    pub const fn name(self) -> &'static str {
        match self {
            RevealFailure::TargetNotReached => "target-not-reached",
            RevealFailure::IngressNotFound => "ingress-not-found",
            RevealFailure::NothingRevealed => "nothing-revealed",
            RevealFailure::StepLimit => "step-limit",
            RevealFailure::Loop => "loop",
            RevealFailure::SendError => "send-error",
        }
    }
}

/// Where a revelation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum RevealStatus {
    /// Traces are outstanding.
    Running,
    /// Every hidden LSR was revealed (DPR, BRPR up to the ingress, or buddy).
    Complete,
    /// Some LSRs were revealed, then BRPR was blocked for the given reason.
    Incomplete(RevealFailure),
    /// Nothing was revealed, for the given reason.
    Failed(RevealFailure),
}

/// One revealed LSR: the reply that showed it and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevealedHop {
    /// The reply from the revelation trace; `None` for an unanswered slot between
    /// revealed hops.
    pub hop: Option<Hop>,
    pub method: RevealMethod,
    /// Revelation step (1 for the first trace, +1 per BRPR trace).
    pub step: u8,
}

/// The hops a revelation trace shows between an anchor and its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceReading {
    Failed(RevealFailure),
    /// New hops in path order (ingress side first); `None` for unanswered slots.
    Revealed(Vec<Option<Hop>>),
    /// Read for an anchor that was not known to be the ingress (an unanswered slot
    /// followed it in the initial trace): the hop after the anchor answered and the slot
    /// before the target did not, so the anchor is the ingress and that slot a silent
    /// egress (the target lies beyond the tunnel). The hops are the LSRs.
    BehindSilentEgress(Vec<Option<Hop>>),
}

/// Reads a revelation trace towards `target` starting from `anchor`.
pub fn read_revelation(
    trace: &Trace,
    anchor: IpAddr,
    anchor_is_ingress: bool,
    target: IpAddr,
) -> TraceReading {
    if trace.stop_reason == StopReason::Error {
        return TraceReading::Failed(RevealFailure::SendError);
    }
    let path = Path::from_trace(trace, |_| None);
    let Some(last) = path.last_index() else {
        return TraceReading::Failed(RevealFailure::TargetNotReached);
    };
    if path.get(last).map(|h| h.addr) != Some(target) {
        return TraceReading::Failed(RevealFailure::TargetNotReached);
    }
    // The first slot where the target shows ends the revealed span (a UHP egress
    // repeats it).
    let end = (0..=last)
        .find(|&i| path.get(i).is_some_and(|h| h.addr == target))
        .unwrap_or(last);
    let Some(mut start) = (0..end).find(|&i| path.get(i).is_some_and(|h| h.addr == anchor)) else {
        return TraceReading::Failed(RevealFailure::IngressNotFound);
    };
    while path.get(start + 1).is_some_and(|h| h.addr == anchor) {
        start += 1;
    }
    // The unanswered slot after the anchor in the initial trace is either a silent
    // ingress (the revelation trace shows it unanswered right after the anchor) or a
    // silent egress (unanswered right before the target, LSRs between).
    let mut end = end;
    let silent_egress = !anchor_is_ingress
        && start + 2 < end
        && path.get(start + 1).is_some()
        && path.get(end - 1).is_none();
    if silent_egress {
        end -= 1;
    } else if !anchor_is_ingress {
        start += 1;
    }
    if start + 1 >= end {
        return TraceReading::Failed(RevealFailure::NothingRevealed);
    }
    let mut hops: Vec<Option<Hop>> = Vec::new();
    for i in start + 1..end {
        let hop = path.get(i).map(|h| trace.hops[h.index].clone());
        // Collapse a repeated address (UHP shows the next router twice).
        let repeat = matches!((&hop, hops.last()), (Some(h), Some(Some(p))) if p.addr == h.addr);
        if !repeat {
            hops.push(hop);
        }
    }
    if hops.iter().all(Option::is_none) {
        return TraceReading::Failed(RevealFailure::NothingRevealed);
    }
    if silent_egress {
        TraceReading::BehindSilentEgress(hops)
    } else {
        TraceReading::Revealed(hops)
    }
}

/// The other addresses of the point-to-point link `addr` is on: the /30 neighbour when
/// `addr` is a usable /30 host address, then the /31 neighbour (IPv6: the /127 then the
/// /126 neighbour).
pub fn buddies(addr: IpAddr) -> Vec<IpAddr> {
    let mut out = Vec::new();
    match addr {
        IpAddr::V4(a) => {
            let x = u32::from(a);
            if matches!(x & 3, 1 | 2) {
                out.push(IpAddr::V4(Ipv4Addr::from(x ^ 3)));
            }
            out.push(IpAddr::V4(Ipv4Addr::from(x ^ 1)));
        }
        IpAddr::V6(a) => {
            let x = u128::from(a);
            out.push(IpAddr::V6(Ipv6Addr::from(x ^ 1)));
            if matches!(x & 3, 1 | 2) {
                out.push(IpAddr::V6(Ipv6Addr::from(x ^ 3)));
            }
        }
    }
    out
}

/// A trace a revelation asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRequest {
    pub dst: IpAddr,
    pub first_ttl: u8,
    /// What the trace is run as: DPR (to the egress), buddy, or a BRPR step (to the
    /// newest revealed LSR).
    pub method: RevealMethod,
    /// The revelation step the trace is for (1: the first trace; +1 per BRPR step).
    pub step: u8,
    /// The previous trace did not show the anchor: this one runs it again on another
    /// flow (ingress retries).
    pub retry: bool,
}

/// What a revelation is about: the candidate tunnel the classifier found, with its hops'
/// addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subject {
    pub anchor: IpAddr,
    pub anchor_is_ingress: bool,
    /// The address whose trace triggered the test (for DUP_IP: the router after the
    /// missing egress).
    pub egress: IpAddr,
    pub trigger: Trigger,
    /// First TTL of revelation traces.
    pub start_ttl: u8,
}

/// The revelation of the tunnel between `anchor` and `egress`. Its state changes only
/// through [`Revelation::handle_trace`]; callers read it through the accessors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revelation {
    subject: Subject,
    /// Revealed LSRs in path order (ingress side first).
    lsrs: Vec<RevealedHop>,
    /// The missing egress of a UHP tunnel, when a buddy trace reached it.
    revealed_egress: Option<IpAddr>,
    /// The anchor turned out to be the ingress, the unanswered slot after it a silent
    /// egress ([`TraceReading::BehindSilentEgress`]).
    silent_egress: bool,
    /// Times a trace that did not show the anchor may still be run again.
    ingress_retries: u8,
    /// The next trace is such a retry.
    retrying: bool,
    status: RevealStatus,
    /// Traces run and probes they sent.
    traces: u16,
    probes: u32,
    plan: VecDeque<(IpAddr, RevealMethod)>,
    current: Option<(IpAddr, RevealMethod)>,
    step: u8,
    max_steps: u8,
}

impl Revelation {
    /// A revelation of `subject`; `buddy` enables buddy traces for DUP_IP, `max_steps`
    /// bounds BRPR's steps.
    pub fn new(subject: Subject, buddy: bool, max_steps: u8) -> Revelation {
        let Subject {
            anchor,
            egress,
            trigger,
            ..
        } = subject;
        let mut plan = VecDeque::new();
        if trigger == Trigger::DupIp && buddy {
            for b in buddies(egress) {
                if b != anchor {
                    plan.push_back((b, RevealMethod::Buddy));
                }
            }
        }
        plan.push_back((egress, RevealMethod::Dpr));
        Revelation {
            subject,
            lsrs: Vec::new(),
            revealed_egress: None,
            silent_egress: false,
            ingress_retries: 0,
            retrying: false,
            status: RevealStatus::Running,
            traces: 0,
            probes: 0,
            plan,
            current: None,
            step: 0,
            max_steps: max_steps.max(1),
        }
    }

    /// What this revelation is about.
    pub fn subject(&self) -> &Subject {
        &self.subject
    }

    /// The LSRs revealed so far, in path order (ingress side first).
    pub fn lsrs(&self) -> &[RevealedHop] {
        &self.lsrs
    }

    /// The missing egress of a UHP tunnel, when a buddy trace reached it.
    pub fn revealed_egress(&self) -> Option<IpAddr> {
        self.revealed_egress
    }

    /// Runs a trace that did not show the anchor again, up to `n` times in all: each
    /// run is a new Paris flow, so ECMP before the ingress, which sent the trace in over
    /// another link (where the ingress answers from another address), may send it in
    /// over the initial trace's link.
    pub fn with_ingress_retries(mut self, n: u8) -> Revelation {
        self.ingress_retries = n;
        self
    }

    /// The anchor is the ingress and the tunnel's egress did not answer (see
    /// [`TraceReading::BehindSilentEgress`]).
    pub fn silent_egress(&self) -> bool {
        self.silent_egress
    }

    pub fn status(&self) -> RevealStatus {
        self.status
    }

    /// Traces run so far.
    pub fn traces(&self) -> u16 {
        self.traces
    }

    /// Probes those traces sent.
    pub fn probes(&self) -> u32 {
        self.probes
    }

    /// The next trace to run, once; `None` while one is outstanding or when finished.
    pub fn poll_trace(&mut self) -> Option<TraceRequest> {
        if self.status != RevealStatus::Running || self.current.is_some() {
            return None;
        }
        let next = if self.step == 0 {
            self.plan.pop_front()
        } else {
            // BRPR: towards the LSR closest to the ingress.
            match self.lsrs.first().and_then(|l| l.hop.as_ref()) {
                Some(h) => Some((h.addr, RevealMethod::Brpr)),
                None => {
                    self.status = RevealStatus::Incomplete(RevealFailure::TargetNotReached);
                    None
                }
            }
        };
        match next {
            Some(n) => {
                self.current = Some(n);
                Some(TraceRequest {
                    dst: n.0,
                    first_ttl: self.subject.start_ttl,
                    method: n.1,
                    step: self.step.saturating_add(1),
                    retry: core::mem::take(&mut self.retrying),
                })
            }
            None => {
                if self.status == RevealStatus::Running {
                    self.status = RevealStatus::Failed(RevealFailure::NothingRevealed);
                }
                None
            }
        }
    }

    /// Consumes the outcome of the trace asked by [`Revelation::poll_trace`]; `None` when
    /// the engine could not run it.
    pub fn handle_trace(&mut self, trace: Option<&Trace>) {
        let Some((dst, method)) = self.current.take() else {
            return;
        };
        self.traces += 1;
        let reading = match trace {
            Some(t) => {
                self.probes += t.probe_count as u32;
                let anchor_is_ingress = self.subject.anchor_is_ingress || self.silent_egress;
                read_revelation(t, self.subject.anchor, anchor_is_ingress, dst)
            }
            None => TraceReading::Failed(RevealFailure::TargetNotReached),
        };
        if reading == TraceReading::Failed(RevealFailure::IngressNotFound)
            && self.ingress_retries > 0
        {
            // the same trace again, on another flow (a BRPR step asks it again by itself)
            self.ingress_retries -= 1;
            self.retrying = true;
            if self.step == 0 {
                self.plan.push_front((dst, method));
            }
            return;
        }
        let reading = match reading {
            TraceReading::BehindSilentEgress(hops) => {
                self.silent_egress = true;
                Ok(hops)
            }
            TraceReading::Revealed(hops) => Ok(hops),
            TraceReading::Failed(f) => Err(f),
        };
        if self.step == 0 {
            match reading {
                Err(f) => {
                    // a buddy trace that reached the missing egress right after the
                    // ingress: the LSRs stay hidden (internal prefixes label switched),
                    // but the egress is known
                    if method == RevealMethod::Buddy && f == RevealFailure::NothingRevealed {
                        self.revealed_egress = Some(dst);
                    }
                    if self.plan.is_empty() {
                        self.status = RevealStatus::Failed(f);
                    }
                }
                Ok(mut hops) => {
                    self.step = 1;
                    // A DPR trace to the hop after a missing UHP egress (DUP_IP) shows
                    // that egress last, before the traced address: it is no LSR.
                    if method == RevealMethod::Dpr
                        && self.subject.trigger == Trigger::DupIp
                        && hops.len() > 1
                    {
                        if let Some(Some(e)) = hops.last() {
                            self.revealed_egress = Some(e.addr);
                            hops.pop();
                        }
                    }
                    let several = hops.len() > 1;
                    let method = match method {
                        RevealMethod::Buddy => {
                            self.revealed_egress = Some(dst);
                            RevealMethod::Buddy
                        }
                        _ if several || self.revealed_egress.is_some() => RevealMethod::Dpr,
                        _ => RevealMethod::Brpr,
                    };
                    self.lsrs = hops
                        .into_iter()
                        .map(|hop| RevealedHop {
                            hop,
                            method,
                            step: 1,
                        })
                        .collect();
                    if method != RevealMethod::Brpr {
                        self.status = RevealStatus::Complete;
                    }
                }
            }
            return;
        }
        // A BRPR step towards the first revealed LSR.
        match reading {
            Err(RevealFailure::NothingRevealed) => {
                // nothing beyond the first trace's one LSR: that trace, to the egress,
                // showed the whole tunnel (DPR), not one BRPR step of it
                if self.step == 1 {
                    for l in &mut self.lsrs {
                        l.method = RevealMethod::Dpr;
                    }
                }
                self.status = RevealStatus::Complete;
            }
            Err(f) => self.status = RevealStatus::Incomplete(f),
            Ok(hops) => {
                let known = |a: IpAddr| {
                    a == self.subject.egress
                        || self
                            .lsrs
                            .iter()
                            .any(|l| l.hop.as_ref().is_some_and(|h| h.addr == a))
                };
                if hops.iter().flatten().any(|h| known(h.addr)) {
                    self.status = RevealStatus::Incomplete(RevealFailure::Loop);
                    return;
                }
                self.step = self.step.saturating_add(1);
                let step = self.step;
                let method = if hops.len() > 1 {
                    RevealMethod::Dpr
                } else {
                    RevealMethod::Brpr
                };
                let new: Vec<RevealedHop> = hops
                    .into_iter()
                    .map(|hop| RevealedHop { hop, method, step })
                    .collect();
                self.lsrs.splice(0..0, new);
                if method == RevealMethod::Dpr {
                    self.status = RevealStatus::Complete;
                } else if step >= self.max_steps {
                    self.status = RevealStatus::Incomplete(RevealFailure::StepLimit);
                }
            }
        }
    }

    /// Addresses of the revealed LSRs, in path order.
    pub fn lsr_addrs(&self) -> impl Iterator<Item = Option<IpAddr>> + '_ {
        self.lsrs.iter().map(|l| l.hop.as_ref().map(|h| h.addr))
    }

    /// True once no more traces will be asked.
    pub fn is_done(&self) -> bool {
        self.status != RevealStatus::Running
    }
}

#[cfg(test)]
#[path = "reveal_tests.rs"]
mod tests;
