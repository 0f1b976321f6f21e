//! [`Tnt`]: the sans-IO TNT campaign. It hands out engine [`Measurement`]s and consumes the
//! finished [`Record`]s; it never sends a packet or reads a clock.
//!
//! Per target: an initial Paris trace (or a seed trace given by the caller, as PyTNT
//! allows), one fingerprint ping per distinct hop address (pinged once per campaign),
//! classification, then one revelation per invisible-tunnel candidate, every candidate of
//! the path (`sc_tnt` stops at the first), revelations cached by (ingress, egress) across
//! targets, then pings of the revealed LSRs. Every ready measurement is handed out at once; the
//! engine's packets-per-second budget paces them.
//!
//! Every ping and revelation trace a target starts comes back in its result
//! ([`TntResult::measurements`], with its [`RecordRole`]). Records read back from an
//! earlier run stand in for measurements: seed traces for initial traces, pings
//! ([`Tnt::add_ping`]) and revelation traces ([`Tnt::add_revelation_trace`]) for the measurements
//! they answered; give pings and revelation traces before the seeds that use them.
//!
//! ```text
//! tnt.add_target(dst);
//! loop {
//!     while let Some((tag, measurement)) = tnt.poll_measurement() { run measurement, remember tag }
//!     for each finished record: tnt.handle_record(tag, record)
//!     while let Some(result) = tnt.poll_result() { output(result) }
//!     if tnt.is_idle() { break }
//! }
//! ```

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::net::IpAddr;

use vtnt_engine::{Measurement, MeasurementError, PingOptions, TraceOptions};
use vtnt_record::{Duration, Method, Ping, Record, Trace};

use crate::analysis::ConfigError;
use crate::classify::{
    classify, frpla_base, hop_metrics, Candidate, Classification, ClassifyOptions, Role, Trigger,
    TunnelClass,
};
use crate::maps::{Dense, Pair, PairMap};
use crate::output::{
    build_result, PingPurpose, RecordRole, RoleRecord, Summary, Tested, TntError, TntResult,
};
use crate::path::{ping_reply_ttl, Path};
use crate::reveal::{RevealFailure, RevealMethod, RevealStatus, Revelation, Subject, TraceRequest};

/// Identifies a measurement handed out by [`Tnt::poll_measurement`]; give it back with the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MeasurementTag(pub u64);

/// Options of a TNT campaign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TntConfig {
    /// Template of every trace (its `dst` and `first_ttl` are set per trace). Default:
    /// icmp-paris, 3 attempts, wait 1 s, gap limit 5, otherwise scamper's defaults.
    pub trace: TraceOptions,
    /// Template of the fingerprint pings (`dst` set per ping). Default: 1 ICMP echo,
    /// wait 1 s.
    pub ping: PingOptions,
    /// Trigger thresholds, brute force, relative FRPLA.
    pub classify: ClassifyOptions,
    /// Run revelation traces (true); off, candidates are reported untested.
    pub reveal: bool,
    /// Buddy traces for duplicate-IP candidates (true).
    pub buddy: bool,
    /// Longest BRPR walk, in steps (32, range 1..=64).
    pub max_brpr_steps: u8,
    /// When an FRPLA/RTLA candidate reveals nothing, test the hop pairs before it, at
    /// most this many (2, range 0..=8; 0 is `sc_tnt`'s behaviour). The return-path
    /// asymmetry a hop shows may come from a tunnel that ended at an earlier hop whose
    /// own replies do not betray it (e.g. a `<64,64>` egress that pushes its replies
    /// with the LSP's no-propagate setting).
    pub walk_back: u8,
    /// When an FRPLA candidate reveals nothing, test the hop pairs after it, at most this
    /// many (1, range 0..=8; 0 is `sc_tnt`'s behaviour), each against the FRPLA the
    /// failed candidate rose from. With `frpla_relative`, a hop fires on its rise over its
    /// ingress's FRPLA; when that ingress's own rise came from a detour of its replies,
    /// not from a tunnel, the rise of the next hop hides a real tunnel (docs/tnt.md).
    pub walk_forward: u8,
    /// A revelation trace that does not show the anchor is run again, on another flow,
    /// up to this many times (3, range 0..=8; 0 is `sc_tnt`'s behaviour): ECMP before the
    /// ingress can send a trace to another destination in over another link, where the
    /// ingress answers from another address.
    pub ingress_retries: u8,
}

impl Default for TntConfig {
    fn default() -> Self {
        let unspecified = IpAddr::V4(core::net::Ipv4Addr::UNSPECIFIED);
        let mut trace = TraceOptions::new(unspecified);
        trace.method = Method::IcmpParis;
        trace.attempts = 3;
        trace.wait = Duration::from_secs(1);
        trace.gaplimit = 5;
        let mut ping = PingOptions::new(unspecified);
        ping.count = 1;
        ping.timeout = Duration::from_secs(1);
        TntConfig {
            trace,
            ping,
            classify: ClassifyOptions::default(),
            reveal: true,
            buddy: true,
            max_brpr_steps: 32,
            walk_back: 2,
            walk_forward: 1,
            ingress_retries: 3,
        }
    }
}

impl TntConfig {
    /// Checks the ranges of TNT's own options (the engine checks the measurement options).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.classify.thresholds.validate()?;
        if !(1..=64).contains(&self.max_brpr_steps) {
            return Err(ConfigError {
                option: "max-brpr-steps",
                range: "1..=64",
            });
        }
        for (option, count) in [
            ("walk-back", self.walk_back),
            ("walk-forward", self.walk_forward),
            ("ingress-retries", self.ingress_retries),
        ] {
            if count > 8 {
                return Err(ConfigError {
                    option,
                    range: "0..=8",
                });
            }
        }
        if self.ping.count == 0 {
            return Err(ConfigError {
                option: "ping-count",
                range: "1..=65535",
            });
        }
        Ok(())
    }
}

type RevKey = Pair;

#[derive(Debug)]
enum Purpose {
    Initial(usize),
    Ping(IpAddr, PingPurpose),
    /// A revelation trace: its revelation, method, step and whether it is a retry.
    Reveal(RevKey, RevealMethod, u8, bool),
}

#[derive(Debug, PartialEq, Eq)]
enum Stage {
    Tracing,
    Pinging,
    Revealing,
    Done,
}

#[derive(Debug)]
struct Target {
    dst: IpAddr,
    stage: Stage,
    trace: Option<Trace>,
    waiting: usize,
    class: Classification,
    path: Path,
    tested: Vec<(Candidate, Option<RevKey>, bool)>,
    probes: u32,
    measured: Vec<RoleRecord>,
}

#[derive(Debug)]
enum PingEntry {
    Pending {
        waiters: Vec<usize>,
        origin: usize,
    },
    Done(Option<u8>),
    /// Read back ([`Tnt::add_ping`]), not yet part of a result.
    Read(Ping),
}

#[derive(Debug)]
struct RevEntry {
    rev: Revelation,
    waiters: Vec<usize>,
    origin: usize,
}

/// The TNT campaign state machine.
#[derive(Debug)]
pub struct Tnt {
    config: TntConfig,
    targets: Vec<Target>,
    /// By address (the pair of it twice).
    pings: PairMap<PingEntry>,
    revelations: PairMap<RevEntry>,
    ready: VecDeque<(MeasurementTag, Measurement)>,
    outstanding: Dense<Purpose>,
    next_tag: u64,
    results: VecDeque<TntResult>,
    summary: Summary,
    /// The tunnels counted, by their (ingress, egress) ([`unseen`]).
    seen: PairMap<Vec<TunnelKey>>,
    /// Revelation traces read back, by revelation, in the order given (a list, not a
    /// map: the unikernel, which reads nothing back, pays for its code too).
    read_traces: Vec<(RevKey, Trace)>,
}

type TunnelKey = (
    TunnelClass,
    Option<IpAddr>,
    Option<IpAddr>,
    Vec<Option<IpAddr>>,
);

/// Whether `key` is a tunnel not counted yet (then it is, from now on): the tunnels of one
/// (ingress, egress) are few, and a list each keeps one B-tree for every map of the
/// campaign (see [`PairMap`]).
fn unseen(seen: &mut PairMap<Vec<TunnelKey>>, key: TunnelKey) -> bool {
    let none = IpAddr::V4(core::net::Ipv4Addr::UNSPECIFIED);
    let at = (key.1.unwrap_or(none), key.2.unwrap_or(none));
    match seen.get_mut(&at) {
        Some(list) if list.contains(&key) => false,
        Some(list) => {
            list.push(key);
            true
        }
        None => {
            seen.insert(at, Vec::from([key]));
            true
        }
    }
}

impl Tnt {
    /// A campaign with `config`, checked.
    pub fn new(config: TntConfig) -> Result<Tnt, ConfigError> {
        config.validate()?;
        Ok(Tnt {
            config,
            targets: Vec::new(),
            pings: PairMap::new(),
            revelations: PairMap::new(),
            ready: VecDeque::new(),
            outstanding: Dense::new(),
            next_tag: 1,
            results: VecDeque::new(),
            summary: Summary::default(),
            seen: PairMap::new(),
            read_traces: Vec::new(),
        })
    }

    /// The campaign's options.
    pub fn config(&self) -> &TntConfig {
        &self.config
    }

    /// Adds a target: its initial trace becomes a measurement.
    pub fn add_target(&mut self, dst: IpAddr) {
        let id = self.new_target(dst);
        let measurement = self.trace_measurement(dst, self.config.trace.first_ttl);
        self.queue(Purpose::Initial(id), measurement);
    }

    /// Adds an existing trace as the initial trace of its destination (PyTNT's seeds).
    pub fn add_seed_trace(&mut self, trace: Trace) {
        let id = self.new_target(trace.dst);
        self.targets[id].probes += u32::from(trace.probe_count);
        self.got_initial(id, trace);
    }

    /// Feeds an existing fingerprint ping: its address is not pinged again, and the ping
    /// joins the result of the first target that needs it. The first ping of an address
    /// counts.
    pub fn add_ping(&mut self, ping: &Ping) {
        if self.pings.contains_key(&(ping.dst, ping.dst)) {
            return;
        }
        self.pings
            .insert((ping.dst, ping.dst), PingEntry::Read(ping.clone()));
    }

    /// Feeds an existing revelation trace of the candidate `anchor -> egress`: a
    /// revelation of that candidate that asks for a trace to `trace.dst` takes it instead
    /// of probing (traces to one destination in the order given, for retries and steps).
    pub fn add_revelation_trace(&mut self, anchor: IpAddr, egress: IpAddr, trace: Trace) {
        self.read_traces.push(((anchor, egress), trace));
    }

    /// The next measurement to run, with its tag. Every ready measurement comes out at once.
    #[must_use]
    pub fn poll_measurement(&mut self) -> Option<(MeasurementTag, Measurement)> {
        self.ready.pop_front()
    }

    /// Consumes the record of a measurement handed out by [`Tnt::poll_measurement`]. Unknown tags are
    /// ignored; a record of the wrong kind fails the measurement (a trace's with
    /// [`TntError::NotATrace`]).
    pub fn handle_record(&mut self, tag: MeasurementTag, record: Record) {
        let Some(purpose) = self.outstanding.remove(tag.0) else {
            return;
        };
        match (purpose, record) {
            (Purpose::Initial(id), Record::Trace(t)) => {
                self.summary.trace_probes += t.probe_count as u64;
                self.summary.budget.initial += t.probe_count as u64;
                self.targets[id].probes += t.probe_count as u32;
                self.got_initial(id, t);
            }
            (Purpose::Ping(a, purpose), Record::Ping(p)) => {
                self.summary.ping_probes += p.ping_sent as u64;
                *match purpose {
                    PingPurpose::Hop => &mut self.summary.budget.hop_pings,
                    PingPurpose::Revealed => &mut self.summary.budget.revealed_pings,
                } += p.ping_sent as u64;
                let (ttl, sent) = (ping_reply_ttl(&p), p.ping_sent as u32);
                if let Some(PingEntry::Pending { origin, .. }) = self.pings.get(&(a, a)) {
                    let role = RecordRole::Ping { purpose };
                    self.targets[*origin].measured.push(RoleRecord {
                        role,
                        record: Record::Ping(p),
                    });
                }
                self.got_ping(a, ttl, sent);
            }
            (Purpose::Reveal(k, method, step, retry), Record::Trace(t)) => {
                self.summary.revelation_probes += t.probe_count as u64;
                if let Some(e) = self.revelations.get(&k) {
                    let trigger = e.rev.subject().trigger;
                    let n = t.probe_count as u64;
                    self.summary.budget.reveal(trigger, method, retry, n);
                }
                self.got_reveal_trace(k, method, step, t);
            }
            (p, _) => self.failed(p, TntError::NotATrace),
        }
    }

    /// The engine refused (or lost) the measurement `tag`: the target goes on without it.
    pub fn handle_measurement_error(&mut self, tag: MeasurementTag, error: MeasurementError) {
        if let Some(p) = self.outstanding.remove(tag.0) {
            self.failed(p, TntError::Measurement(error));
        }
    }

    /// The next finished target.
    #[must_use]
    pub fn poll_result(&mut self) -> Option<TntResult> {
        self.results.pop_front()
    }

    /// True when no measurement is ready or outstanding and every result was taken.
    pub fn is_idle(&self) -> bool {
        self.ready.is_empty() && self.outstanding.is_empty() && self.results.is_empty()
    }

    /// True when [`Tnt::poll_measurement`] has something.
    pub fn has_ready_jobs(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Measurements handed out and not yet answered.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// Campaign counts so far.
    pub fn summary(&self) -> Summary {
        let mut s = self.summary;
        s.targets = self.targets.len();
        s
    }

    /// Every revelation run so far, by (anchor, egress) address.
    pub fn revelations(&self) -> impl Iterator<Item = (&(IpAddr, IpAddr), &Revelation)> {
        self.revelations.iter().map(|(k, e)| (k, &e.rev))
    }

    fn new_target(&mut self, dst: IpAddr) -> usize {
        self.targets.push(Target {
            dst,
            stage: Stage::Tracing,
            trace: None,
            waiting: 0,
            class: Classification::default(),
            path: Path::default(),
            tested: Vec::new(),
            probes: 0,
            measured: Vec::new(),
        });
        self.targets.len() - 1
    }

    fn trace_measurement(&self, dst: IpAddr, first_ttl: u8) -> Measurement {
        let mut o = self.config.trace.clone();
        o.set_dst(dst);
        o.first_ttl = first_ttl.max(1);
        Measurement::Trace(o)
    }

    /// Queues `measurement` under a tag of its own; its records keep the user's `userid`.
    fn queue(&mut self, purpose: Purpose, measurement: Measurement) {
        let tag = MeasurementTag(self.next_tag);
        self.next_tag += 1;
        self.outstanding.insert(tag.0, purpose);
        self.ready.push_back((tag, measurement));
    }

    fn failed(&mut self, purpose: Purpose, error: TntError) {
        match purpose {
            Purpose::Initial(id) => {
                self.targets[id].stage = Stage::Done;
                let r = TntResult::failed(self.targets[id].dst, error);
                self.summary.targets_done += 1;
                self.results.push_back(r);
            }
            Purpose::Ping(a, _) => self.got_ping(a, None, 0),
            Purpose::Reveal(k, _, _, _) => self.got_reveal(k, None),
        }
    }

    /// Registers that target `id` needs the ping of `addr`; true when it must wait.
    fn need_ping(&mut self, addr: IpAddr, id: usize, purpose: PingPurpose) -> bool {
        match self.pings.get_mut(&(addr, addr)) {
            Some(PingEntry::Done(_)) => false,
            Some(e @ PingEntry::Read(_)) => {
                let PingEntry::Read(p) = core::mem::replace(e, PingEntry::Done(None)) else {
                    return false;
                };
                *e = PingEntry::Done(ping_reply_ttl(&p));
                let t = &mut self.targets[id];
                t.probes += u32::from(p.ping_sent);
                t.measured.push(RoleRecord {
                    role: RecordRole::Ping { purpose },
                    record: Record::Ping(p),
                });
                false
            }
            Some(PingEntry::Pending { waiters, .. }) => {
                waiters.push(id);
                true
            }
            None => {
                self.pings.insert(
                    (addr, addr),
                    PingEntry::Pending {
                        waiters: Vec::from([id]),
                        origin: id,
                    },
                );
                let mut o = self.config.ping.clone();
                o.dst = addr;
                self.queue(Purpose::Ping(addr, purpose), Measurement::Ping(o));
                true
            }
        }
    }

    fn er(&self, addr: IpAddr) -> Option<u8> {
        match self.pings.get(&(addr, addr)) {
            Some(PingEntry::Done(t)) => *t,
            Some(PingEntry::Read(p)) => ping_reply_ttl(p),
            _ => None,
        }
    }

    fn got_initial(&mut self, id: usize, trace: Trace) {
        // The distinct reply addresses in ascending order (as `sort` + `dedup` would
        // give, without linking a sort for `IpAddr`: hops are few).
        let mut addrs: Vec<IpAddr> = Vec::new();
        for h in &trace.hops {
            if let Err(i) = addrs.binary_search(&h.addr) {
                addrs.insert(i, h.addr);
            }
        }
        self.targets[id].trace = Some(trace);
        self.targets[id].stage = Stage::Pinging;
        for a in addrs {
            if self.need_ping(a, id, PingPurpose::Hop) {
                self.targets[id].waiting += 1;
            }
        }
        if self.targets[id].waiting == 0 {
            self.advance(id);
        }
    }

    fn got_ping(&mut self, addr: IpAddr, ttl: Option<u8>, sent: u32) {
        let Some(PingEntry::Pending { waiters, origin }) =
            self.pings.insert((addr, addr), PingEntry::Done(ttl))
        else {
            return;
        };
        self.targets[origin].probes += sent;
        for id in waiters {
            self.release(id);
        }
    }

    fn release(&mut self, id: usize) {
        let t = &mut self.targets[id];
        t.waiting = t.waiting.saturating_sub(1);
        if t.waiting == 0 {
            self.advance(id);
        }
    }

    fn advance(&mut self, id: usize) {
        match self.targets[id].stage {
            Stage::Pinging => self.analyse(id),
            Stage::Revealing => self.finish(id),
            Stage::Tracing | Stage::Done => {}
        }
    }

    fn analyse(&mut self, id: usize) {
        let Some(trace) = self.targets[id].trace.as_ref() else {
            return;
        };
        let path = Path::from_trace(trace, |a| self.er(a));
        let class = classify(&path, &self.config.classify);
        self.targets[id].stage = Stage::Revealing;
        let candidates = class.candidates.clone();
        self.targets[id].class = class;
        self.targets[id].path = path;
        // Hold the target while its revelations are requested (a cached one may finish
        // synchronously).
        self.targets[id].waiting += 1;
        for c in candidates {
            self.request(id, c);
        }
        self.release(id);
    }

    /// Starts (or joins, or reuses) the revelation of candidate `c` for target `id`.
    fn request(&mut self, id: usize, c: Candidate) {
        let path = &self.targets[id].path;
        let (Some(anchor), Some(egress)) = (path.get(c.anchor), path.get(c.egress)) else {
            return;
        };
        let key = (anchor.addr, egress.addr);
        if !self.config.reveal {
            self.targets[id].tested.push((c, None, false));
            return;
        }
        if self.targets[id]
            .tested
            .iter()
            .any(|(_, k, _)| *k == Some(key))
        {
            return;
        }
        let mut done = false;
        let mut first = None;
        let cached = match self.revelations.get_mut(&key) {
            Some(e) if e.rev.is_done() => {
                done = true;
                true
            }
            Some(e) => {
                e.waiters.push(id);
                self.targets[id].waiting += 1;
                true
            }
            None => {
                let mut rev = Revelation::new(
                    Subject {
                        anchor: key.0,
                        anchor_is_ingress: c.anchor_is_ingress,
                        egress: key.1,
                        trigger: c.trigger,
                        start_ttl: c.start_ttl,
                    },
                    self.config.buddy,
                    self.config.max_brpr_steps,
                )
                .with_ingress_retries(self.config.ingress_retries);
                let req = rev.poll_trace();
                self.revelations.insert(
                    key,
                    RevEntry {
                        rev,
                        waiters: Vec::from([id]),
                        origin: id,
                    },
                );
                self.targets[id].waiting += 1;
                first = req;
                false
            }
        };
        if cached {
            self.summary.revelation_cache_hits += 1;
        }
        self.targets[id].tested.push((c, Some(key), cached));
        if done {
            self.revelation_done(id, key);
        }
        if let Some(req) = first {
            self.reveal_trace(key, req);
        }
    }

    /// Runs the trace `req` of the revelation `key`: a trace read back for it when there
    /// is one, else a measurement.
    fn reveal_trace(&mut self, key: RevKey, req: TraceRequest) {
        let read = self
            .read_traces
            .iter()
            .position(|(k, t)| *k == key && t.dst == req.dst);
        match read {
            Some(i) => {
                let (_, t) = self.read_traces.remove(i);
                self.got_reveal_trace(key, req.method, req.step, t)
            }
            None => {
                let measurement = self.trace_measurement(req.dst, req.first_ttl);
                let purpose = Purpose::Reveal(key, req.method, req.step, req.retry);
                self.queue(purpose, measurement);
            }
        }
    }

    /// A revelation trace of `key` is in: it joins the result of the target that started
    /// the revelation, then the revelation reads it.
    fn got_reveal_trace(&mut self, key: RevKey, method: RevealMethod, step: u8, t: Trace) {
        if let Some(e) = self.revelations.get(&key) {
            let role = RecordRole::Reveal {
                anchor: key.0,
                egress: key.1,
                trigger: e.rev.subject().trigger,
                method,
                step,
            };
            let record = Record::Trace(t.clone());
            self.targets[e.origin]
                .measured
                .push(RoleRecord { role, record });
        }
        self.got_reveal(key, Some(&t));
    }

    /// A revelation target `id` uses is over: ping what it revealed, or, when a return-path
    /// trigger (FRPLA, RTLA) revealed nothing, walk one hop back (the hidden return hops
    /// that made it fire may belong to a tunnel ending at an earlier hop) and one forward
    /// (they may be a detour of the egress's own replies, hiding the next hop's rise).
    fn revelation_done(&mut self, id: usize, key: RevKey) {
        let Some(e) = self.revelations.get(&key) else {
            return;
        };
        if !e.rev.lsrs().is_empty() {
            self.ping_revealed(key, id);
            return;
        }
        if e.rev.status() != RevealStatus::Failed(RevealFailure::NothingRevealed) {
            return;
        }
        let Some(c) = self.targets[id]
            .tested
            .iter()
            .find(|(_, k, _)| *k == Some(key))
            .map(|t| t.0.clone())
        else {
            return;
        };
        if c.walked_back == 0 {
            self.walk_forward(id, &c);
        }
        if !matches!(c.trigger, Trigger::Frpla | Trigger::Rtla)
            || !c.anchor_is_ingress
            || c.walked_back >= self.config.walk_back
        {
            return;
        }
        let t = &self.targets[id];
        let Some(prev) = c.anchor.checked_sub(1).filter(|&k| t.path.get(k).is_some()) else {
            return;
        };
        if t.class.roles(prev).any(|(_, r)| r == Role::Lsr)
            || t.class.roles(c.anchor).any(|(_, r)| r == Role::Lsr)
        {
            return;
        }
        let start_ttl = t
            .path
            .get(prev)
            .map_or(1, |h| h.ttl.saturating_sub(2).max(1));
        let back = Candidate {
            anchor: prev,
            egress: c.anchor,
            start_ttl,
            walked_back: c.walked_back + 1,
            ..c
        };
        self.request(id, back);
    }

    /// After FRPLA candidate `c` revealed nothing: tests the next hop pair when the next
    /// hop's FRPLA rises over the FRPLA `c` was measured from by the threshold (what the
    /// relative rule would have asked had `c`'s egress not risen itself).
    fn walk_forward(&mut self, id: usize, c: &Candidate) {
        if c.trigger != Trigger::Frpla || c.walked_forward >= self.config.walk_forward {
            return;
        }
        let t = &self.targets[id];
        let next = c.egress + 1;
        let (Some(egress), Some(hop)) = (t.path.get(c.egress), t.path.get(next)) else {
            return;
        };
        if !hop.is_time_exceeded()
            || hop.addr == egress.addr
            || t.class.roles(next).next().is_some()
            || t.class.roles(c.egress).any(|(_, r)| r == Role::Lsr)
        {
            return;
        }
        let base = frpla_base(&t.path, c.anchor, &self.config.classify);
        if hop_metrics(hop).frpla - base < self.config.classify.thresholds.frpla {
            return;
        }
        let on = Candidate {
            anchor: c.egress,
            anchor_is_ingress: true,
            egress: next,
            start_ttl: egress.ttl.saturating_sub(2).max(1),
            walked_forward: c.walked_forward + 1,
            ..c.clone()
        };
        self.request(id, on);
    }

    fn ping_revealed(&mut self, key: RevKey, id: usize) {
        let Some(e) = self.revelations.get(&key) else {
            return;
        };
        let mut addrs: Vec<IpAddr> = e.rev.lsr_addrs().flatten().collect();
        addrs.extend(e.rev.revealed_egress());
        for a in addrs {
            if self.need_ping(a, id, PingPurpose::Revealed) {
                self.targets[id].waiting += 1;
            }
        }
    }

    fn got_reveal(&mut self, key: RevKey, trace: Option<&Trace>) {
        let Some(e) = self.revelations.get_mut(&key) else {
            return;
        };
        e.rev.handle_trace(trace);
        if let Some(req) = e.rev.poll_trace() {
            self.reveal_trace(key, req);
            return;
        }
        if !e.rev.is_done() {
            return;
        }
        let waiters = core::mem::take(&mut e.waiters);
        let origin = e.origin;
        self.targets[origin].probes += e.rev.probes();
        for id in waiters {
            self.revelation_done(id, key);
            self.release(id);
        }
    }

    fn count(&mut self, r: &TntResult) {
        let s = &mut self.summary;
        s.targets_done += 1;
        for u in &r.unrevealed {
            match u.status {
                Some(RevealStatus::Failed(RevealFailure::SendError)) => s.reveal_send_errors += 1,
                _ if u.trigger == Trigger::Blind => s.blind_spots_clear += 1,
                _ => s.unrevealed += 1,
            }
        }
        for t in &r.tunnels {
            if !unseen(
                &mut self.seen,
                (t.class, t.ingress, t.egress, t.lsrs.clone()),
            ) {
                continue;
            }
            match t.class {
                TunnelClass::Explicit => s.explicit += 1,
                TunnelClass::Implicit => s.implicit += 1,
                TunnelClass::Opaque => s.opaque += 1,
                TunnelClass::InvisiblePhp => s.invisible_php += 1,
                TunnelClass::InvisibleUhp => s.invisible_uhp += 1,
            }
            if t.revelation.is_some() {
                s.lsrs_revealed += t.lsrs.iter().flatten().count();
            }
        }
    }

    fn finish(&mut self, id: usize) {
        if let Some(r) = self.close(id) {
            self.results.push_back(r);
        }
    }

    /// Ends target `id` (if it was not over yet) and builds its result from what it has:
    /// `None` when its initial trace is not in.
    fn close(&mut self, id: usize) -> Option<TntResult> {
        let t = &mut self.targets[id];
        if t.stage == Stage::Done {
            return None;
        }
        t.stage = Stage::Done;
        let trace = t.trace.take()?;
        let class = core::mem::take(&mut t.class);
        let tested_raw = core::mem::take(&mut t.tested);
        let measured = core::mem::take(&mut t.measured);
        let probes = t.probes;
        let path = Path::from_trace(&trace, |a| self.er(a));
        let tested: Vec<Tested<'_>> = tested_raw
            .iter()
            .map(|(c, key, cached)| Tested {
                candidate: c,
                revelation: key.and_then(|k| self.revelations.get(&k)).map(|e| &e.rev),
                cached: *cached,
            })
            .collect();
        let er = |a: IpAddr| self.er(a);
        let mut r = build_result(trace, &path, &class, &tested, &er, probes);
        r.measurements = measured;
        self.count(&r);
        Some(r)
    }

    /// For a campaign stopped early (a signal): the result, as far as it went, of every
    /// target whose initial trace is in but whose pings or revelations are not over,
    /// marked [`TntResult::incomplete`], with every ping and revelation trace of it that
    /// finished (revelations still running say so: `running`). Those targets are over
    /// afterwards; one still being traced has no finished record and gives none.
    pub fn take_unfinished(&mut self) -> Vec<TntResult> {
        let mut out = Vec::new();
        for id in 0..self.targets.len() {
            if let Some(mut r) = self.close(id) {
                r.incomplete = true;
                out.push(r);
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "orchestrator_tests.rs"]
mod tests;
