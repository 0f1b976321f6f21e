//! Seed 003's accuracy study (`vtnt bench rtt`, issue 40): the same ICMP echo pings and
//! traces (every attempt of every hop) through the lab from native and from every
//! runtime, raw and corrected (`vtnt run`'s correction, docs/rtt-correction.md), at
//! background loads, against a truth that owes nothing to the stamps being corrected:
//! the lab's configured delays (the emulator's own round trip in virtual time,
//! [`configured_rtt_us`]) and native's RTTs at the same load.
//!
//! The lab's daemon, the network being emulated, gets the last CPU to itself and every
//! run the others (`vtnt_measure::cpus`), so that what a runtime burns (a guest's vCPU,
//! a tender) does not slow the network it measures and count as the runtime's.
//!
//! Per load ([`load`]: none, or UDP through the lab's TUN and with iperf3 on the
//! loopback, the VM front's device):
//! - the noise floor: native pings while an independent kernel-stamped capture on the
//!   lab side (`vtnt_linux::host_stamps` on the lab's TUN, not the front's own stamps)
//!   takes every probe and reply, both against the configured round trip;
//! - per runtime and kind (ping, trace): a native run just before, the baseline (the
//!   lab drifts on a shared host over the minutes a sweep takes), then the runtime twice,
//!   corrected and not: (corrected - native) and (raw - native), and the perturbation,
//!   the raw RTTs with correction on against off. A trace's samples are compared hop by
//!   hop ([`Baseline`]).
//!
//! A runtime whose run says it is not corrected keeps its raw rows and the reason, never
//! a corrected figure ([`record`]). [`report`] writes the markdown.

pub mod load;
pub mod record;
pub mod report;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{bail, Context};
use serde::Serialize;
use vtnt_lab::tracer::Tracer;
use vtnt_lab::{Lab, Topology};
use vtnt_linux::host_stamps::{Background, Side};
use vtnt_mace::Ident;
use vtnt_runtimes::Runtime;

use load::Load;
use record::{Place, RttRecord};

/// The lab's TUN in its namespace (`vtnt_lab_linux::state::TUN_NAME`), where the lab-side
/// capture sits.
const LAB_TUN: &str = "vtnt0";

/// `vtnt bench rtt`'s options.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchRttArgs {
    /// Runtimes to measure besides native (always measured: the baseline).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "runc,docker,docker-scratch,microvm,spt,vm"
    )]
    pub runtimes: Vec<Runtime>,
    /// Background loads, UDP datagrams per second (0: none), each sent twice: through
    /// the lab's TUN and with iperf3 on the host's loopback (the VM front's device).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub loads: Vec<u32>,
    /// Bytes of UDP payload of each load datagram.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u16).range(1..=1472))]
    pub load_size: u16,
    /// Pings of every run.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub count: u32,
    /// Milliseconds between pings.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub interval_ms: u32,
    /// Attempts per hop of every trace run, all sent (`-q N -Q`); 0: pings only.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(0..=20))]
    pub trace_attempts: u8,
    /// The lab address pinged and traced (and the load's destination).
    #[arg(long, default_value = "203.0.113.10")]
    pub target: Ipv4Addr,
    /// The lab's topology (default: the reference topology).
    #[arg(long)]
    pub topology: Option<PathBuf>,
    /// Leave the lab's daemon and the runs on every CPU (by default the daemon, the
    /// network being emulated, has the last CPU to itself and the runs the others, so
    /// that what a runtime burns does not slow the network it measures).
    #[arg(long)]
    pub no_pin: bool,
    /// Print the report as JSON instead of markdown.
    #[arg(long)]
    pub json: bool,
}

/// What a run measures: ICMP echo pings, or a trace with every attempt of every hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Ping,
    Trace,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Ping => "ping",
            Kind::Trace => "trace",
        }
    }
}

/// Mean and 99th percentile (nearest rank) of some RTTs or differences, microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stat {
    pub n: usize,
    pub mean_us: f64,
    pub p99_us: f64,
}

impl Stat {
    /// `None` for no values.
    pub fn of(v: &[f64]) -> Option<Stat> {
        let (mean_us, _) = vtnt_stats::mean_sd(v)?;
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let rank = ((s.len() as f64 * 0.99).ceil() as usize).clamp(1, s.len());
        Some(Stat {
            n: v.len(),
            mean_us,
            p99_us: s[rank - 1],
        })
    }

    /// `self - base`, mean against mean and p99 against p99.
    pub fn minus(self, base: Stat) -> Diff {
        Diff {
            mean_us: self.mean_us - base.mean_us,
            p99_us: self.p99_us - base.p99_us,
        }
    }

    /// `self` against a constant.
    pub fn minus_us(self, us: f64) -> Diff {
        Diff {
            mean_us: self.mean_us - us,
            p99_us: self.p99_us - us,
        }
    }
}

/// The difference of two [`Stat`]s: of the means, and of the 99th percentiles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Diff {
    pub mean_us: f64,
    pub p99_us: f64,
}

impl Diff {
    /// `self - base`, mean against mean and p99 against p99.
    pub fn minus(self, base: Diff) -> Diff {
        Diff {
            mean_us: self.mean_us - base.mean_us,
            p99_us: self.p99_us - base.p99_us,
        }
    }
}

/// The RTTs a run is compared with: the mean of each slot (one for a ping, one per hop
/// of a trace) and the run's own samples less their slot's mean. A run's samples, less
/// the same means, against these ([`Baseline::against`]) give the difference of the
/// means and of the 99th percentiles, hop by hop for a trace: for a ping, exactly
/// `Stat::minus` of the two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    means: BTreeMap<u64, f64>,
    centred: Stat,
}

impl Baseline {
    /// `None`: no samples.
    pub fn of(samples: &[(Place, f64)]) -> Option<Baseline> {
        let mut slots = BTreeMap::<u64, Vec<f64>>::new();
        for &((slot, _), us) in samples {
            slots.entry(slot).or_default().push(us);
        }
        let means = slots
            .into_iter()
            .filter_map(|(slot, v)| Some((slot, vtnt_stats::mean_sd(&v)?.0)))
            .collect();
        let mut base = Baseline {
            means,
            centred: Stat::of(&[0.0])?,
        };
        base.centred = Stat::of(&base.centre(samples))?;
        Some(base)
    }

    /// The truth as a baseline: `us` for every slot, no spread of its own.
    pub fn constant(slots: impl IntoIterator<Item = (u64, f64)>) -> Baseline {
        Baseline {
            means: slots.into_iter().collect(),
            centred: Stat {
                n: 1,
                mean_us: 0.0,
                p99_us: 0.0,
            },
        }
    }

    /// Each sample less its slot's mean (samples of a slot the baseline lacks are left
    /// out).
    fn centre(&self, samples: &[(Place, f64)]) -> Vec<f64> {
        samples
            .iter()
            .filter_map(|&((slot, _), us)| Some(us - self.means.get(&slot)?))
            .collect()
    }

    /// `samples` against the baseline (`None`: none shares a slot with it).
    pub fn against(&self, samples: &[(Place, f64)]) -> Option<Diff> {
        Some(Stat::of(&self.centre(samples))?.minus(self.centred))
    }
}

/// The whole study.
#[derive(Debug, Clone, Serialize)]
pub struct RttReport {
    pub target: Ipv4Addr,
    /// The configured round trip to the target (the emulator's, in virtual time).
    pub configured_us: f64,
    pub count: u32,
    pub interval_ms: u32,
    pub trace_attempts: u8,
    pub load_size: u16,
    /// Where the lab's daemon and the runs ran (`"CPU 1 alone, CPU 0 for the rest"`), or
    /// why they were not pinned.
    pub cpus: String,
    pub loads: Vec<LoadRows>,
}

/// Everything measured at one background load.
#[derive(Debug, Clone, Serialize)]
pub struct LoadRows {
    /// UDP datagrams a second asked for (0: none), and sent through the lab's TUN and by
    /// iperf3 on the loopback ([`load`]).
    pub rate: u32,
    pub sent: u64,
    pub sent_loopback: u64,
    pub floor: Floor,
    /// Each runtime's rows, pings then traces.
    pub runtimes: Vec<RuntimeRow>,
}

/// The noise floor: native pings with the lab-side capture.
#[derive(Debug, Clone, Serialize)]
pub struct Floor {
    /// The tool's RTTs, and against the configured round trip.
    pub tool: Stat,
    pub tool_minus_configured: Diff,
    /// The capture's round trips of the same probes, and against the configured one
    /// (`None`: it paired none).
    pub capture: Option<Stat>,
    pub capture_minus_configured: Option<Diff>,
    /// Per probe, the tool's RTT minus the capture's.
    pub tool_minus_capture: Option<Stat>,
    /// Replies the capture paired with their probe, of the tool's replies.
    pub paired: usize,
    pub replies: usize,
    /// Packets the capture's ring lost.
    pub drops: u64,
    /// The tool's RTTs with the capture on against native without it, run just after
    /// (native's perturbation).
    pub perturbation: Diff,
}

/// One runtime's pings or trace at one load.
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeRow {
    pub runtime: Runtime,
    pub kind: Kind,
    /// What was measured, or why the runtime could not run here.
    pub outcome: Outcome,
}

/// A runtime's runs, or why there are none.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Measured(Measured),
    Failed(String),
}

/// A runtime's two runs, each against native's RTTs of the same moments: pings beside
/// it ([`Companion`]), a trace just before.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    /// Native's RTTs beside (or before) the run without correction.
    pub native: Stat,
    /// Raw RTTs, correction off, and against native.
    pub raw: Stat,
    pub raw_minus_native: Diff,
    /// Corrected RTTs against native, or why there are none.
    pub correction: Correction,
    /// The raw RTTs with correction on against off, each less its own native:
    /// `(on - native) - (off - native)`.
    pub perturbation: Diff,
}

/// A run's corrected RTTs, or why there are none (`not_corrected`, as the run said it).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Correction {
    Corrected(Corrected),
    NotCorrected(String),
}

/// The corrected RTTs of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Corrected {
    pub stat: Stat,
    pub minus_native: Diff,
    /// Against the configured round trip (pings: a trace's hops are compared with
    /// native's hops, whose configured delays depend on the path its flow takes).
    pub minus_configured: Option<Diff>,
    /// Replies the correction refused (each with its reason in the run's JSON).
    pub refused: usize,
}

/// The configured round trip from the first vantage point to `target`, microseconds:
/// an echo through the emulator in virtual time (every one-way delay it crosses, both
/// ways), independent of any clock or stamp of the running lab.
pub fn configured_rtt_us(topology: &Topology, target: Ipv4Addr) -> anyhow::Result<f64> {
    let mut lab = Lab::new(topology.clone());
    let answer = Tracer::new(&mut lab)
        .probe(target, 64)
        .filter(|a| a.from == target)
        .with_context(|| format!("{target} does not answer an echo in the lab"))?;
    Ok(answer.rtt_us as f64)
}

/// Runs the study with `exe` (a `vtnt` with `run` and `lab`) on a lab of its own.
pub fn bench_rtt(args: &BenchRttArgs, exe: &Path) -> anyhow::Result<RttReport> {
    let topology = match &args.topology {
        Some(p) => Topology::load(p)?,
        None => Topology::reference(),
    };
    let configured_us = configured_rtt_us(&topology, args.target)?;
    let lab = LabUp::up(exe, args.topology.as_deref())?;
    let netns = Path::new("/run/netns").join(&lab.name);
    let split = match args.no_pin {
        true => Err("not pinned (--no-pin)".to_string()),
        false => pin(&lab.name).map_err(|e| format!("not pinned: {e:#}")),
    };
    let cpus = match &split {
        Ok(s) => s.describe(),
        Err(why) => {
            vtnt_job::say!("vtnt bench rtt: {why}");
            why.clone()
        }
    };
    let report = loads_of(args, exe, &lab, &netns, configured_us);
    if let Ok(s) = &split {
        s.leave();
    }
    Ok(RttReport {
        target: args.target,
        configured_us,
        count: args.count,
        interval_ms: args.interval_ms,
        trace_attempts: args.trace_attempts,
        load_size: args.load_size,
        cpus,
        loads: report?,
    })
}

/// The lab's daemon (every thread) on the last CPU, this thread, and so every run and
/// load it starts, on the others.
fn pin(lab: &str) -> anyhow::Result<vtnt_measure::cpus::Split> {
    let split = vtnt_measure::cpus::Split::new()?;
    let daemon = vtnt_lab_linux::lab_state(lab)?.pid;
    let daemon = u32::try_from(daemon).context("the lab daemon's pid")?;
    vtnt_measure::cpus::pin_tasks([daemon], split.alone())?;
    split.enter_rest()?;
    Ok(split)
}

/// Every load's rows.
fn loads_of(
    args: &BenchRttArgs,
    exe: &Path,
    lab: &LabUp,
    netns: &Path,
    configured_us: f64,
) -> anyhow::Result<Vec<LoadRows>> {
    let mut loads = Vec::new();
    for &rate in &args.loads {
        vtnt_measure::stop::check()?;
        let load = (rate > 0)
            .then(|| Load::start(netns, args.target, rate, usize::from(args.load_size)))
            .transpose()?;
        let rows = at_load(args, exe, &lab.name, netns, configured_us);
        let (sent, sent_loopback) = load.map_or((0, 0), Load::stop);
        let (floor, runtimes) = rows?;
        loads.push(LoadRows {
            rate,
            sent,
            sent_loopback,
            floor,
            runtimes,
        });
    }
    Ok(loads)
}

/// The noise floor and every runtime's rows at the load running.
fn at_load(
    args: &BenchRttArgs,
    exe: &Path,
    lab: &str,
    netns: &Path,
    configured_us: f64,
) -> anyhow::Result<(Floor, Vec<RuntimeRow>)> {
    let run = |runtime: Runtime, kind: Kind, flag: Flag| run(args, exe, lab, runtime, kind, flag);
    let capture = Background::start(netns, LAB_TUN, Side::SharedNamespace)
        .with_context(|| format!("capturing on {LAB_TUN} in {}", netns.display()))?;
    let floor_run = run(Runtime::Native, Kind::Ping, Flag::Uncorrected);
    let taken = capture.finish().context("reading the lab-side capture")?;
    let floor_run = floor_run.context("native")?;
    let native_run = run(Runtime::Native, Kind::Ping, Flag::Uncorrected).context("native")?;
    let native = stat(&raw(&native_run), "native")?;
    let floor = floor(&floor_run, &taken, args.target, configured_us, native)?;
    let kinds = [(Kind::Ping, true), (Kind::Trace, args.trace_attempts > 0)];
    let mut runtimes = Vec::new();
    for &runtime in args.runtimes.iter().filter(|r| **r != Runtime::Native) {
        for kind in kinds.iter().filter(|k| k.1).map(|k| k.0) {
            vtnt_measure::stop::check()?;
            let outcome = match kind {
                // native pings beside each run
                Kind::Ping => measure(Some(configured_us), |c| {
                    let beside = Companion::start(args, exe, lab);
                    let run = run(runtime, kind, c);
                    let native = beside.finish(run.as_ref().ok().and_then(RttRecord::span_us));
                    Ok((run?, native?))
                }),
                // native's trace just before: two traces to one destination at once
                // could not be told apart on the host side
                Kind::Trace => run(Runtime::Native, kind, Flag::Uncorrected)
                    .context("native")
                    .and_then(|native| {
                        measure(None, |c| {
                            Ok((run(runtime, kind, c)?, native.raw_us.clone()))
                        })
                    }),
            };
            let outcome = outcome.map(Outcome::Measured).unwrap_or_else(|e| {
                vtnt_job::say!("vtnt bench rtt: {} {}: {e:#}", runtime.name(), kind.name());
                Outcome::Failed(format!("{e:#}"))
            });
            runtimes.push(RuntimeRow {
                runtime,
                kind,
                outcome,
            });
        }
    }
    Ok((floor, runtimes))
}

/// A runtime's runs, correction on and off, each with native's samples of the same
/// moments, against those (and the configured round trip, where the kind has one).
fn measure(
    configured_us: Option<f64>,
    mut run: impl FnMut(Flag) -> anyhow::Result<(RttRecord, Vec<(Place, f64)>)>,
) -> anyhow::Result<Measured> {
    let (on, native_on) = run(Flag::Corrected)?;
    let (off, native_off) = run(Flag::Uncorrected)?;
    let no_replies = |what: &str| anyhow::anyhow!("{what}: no replies");
    let base_on = Baseline::of(&native_on).ok_or_else(|| no_replies("native"))?;
    let base_off = Baseline::of(&native_off).ok_or_else(|| no_replies("native"))?;
    let versus =
        |base: &Baseline, samples| base.against(samples).ok_or_else(|| no_replies("the run"));
    let raw_minus_native = versus(&base_off, &off.raw_us)?;
    let on_minus_native = versus(&base_on, &on.raw_us)?;
    let correction = match on.corrected() {
        Err(why) => Correction::NotCorrected(why),
        Ok([]) => Correction::NotCorrected("no reply was corrected".into()),
        Ok(us) => Correction::Corrected(Corrected {
            stat: stat(&values(us), "the corrected run")?,
            minus_native: versus(&base_on, us)?,
            minus_configured: configured_us.and_then(|c| Baseline::constant([(0, c)]).against(us)),
            refused: on.raw_us.len() - us.len(),
        }),
    };
    Ok(Measured {
        native: stat(&values(&native_off), "native")?,
        raw: stat(&raw(&off), "the run")?,
        raw_minus_native,
        correction,
        perturbation: on_minus_native.minus(raw_minus_native),
    })
}

/// The first echo sequence number of [`Companion`]'s pings: far above any run's own
/// (`--count` is at most 10,000), so that a capture in the lab's namespace, which sees
/// both, never takes one for the other.
const COMPANION_SEQ: u16 = 40_001;

/// How far before a run's first probe and after its last [`Companion`]'s samples still
/// count as beside it: a short run (a unikernel's starts in milliseconds) may be over
/// before the companion's first round has sent anything, while the lab drifts over
/// minutes.
const SPAN_MARGIN_US: u64 = 1_000_000;

/// Native pings beside a runtime's run, round after round of a second each, from the
/// start of the run to its end: the lab at the same moments, so that its drift over a
/// sweep and its slow moods on a shared host are native's as much as the runtime's.
struct Companion {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<anyhow::Result<Vec<(u64, f64)>>>,
}

impl Companion {
    fn start(args: &BenchRttArgs, exe: &Path, lab: &str) -> Companion {
        let stop = Arc::new(AtomicBool::new(false));
        let (args, exe, lab, stopped) = (
            args.clone(),
            exe.to_path_buf(),
            lab.to_string(),
            stop.clone(),
        );
        let thread = std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !stopped.load(Ordering::Acquire) {
                let round = run(
                    &args,
                    &exe,
                    &lab,
                    Runtime::Native,
                    Kind::Ping,
                    Flag::Companion,
                )?;
                samples.extend(round.tx_us.iter().copied().zip(raw(&round)));
            }
            Ok(samples)
        });
        Companion { stop, thread }
    }

    /// Stops after the round running; native's samples sent within `span` (the run's
    /// first and last probes, widened by [`SPAN_MARGIN_US`]; `None`: the run failed or
    /// gave no times).
    fn finish(self, span: Option<(u64, u64)>) -> anyhow::Result<Vec<(Place, f64)>> {
        self.stop.store(true, Ordering::Release);
        let samples = self
            .thread
            .join()
            .map_err(|_| anyhow::anyhow!("native's pings beside the run panicked"))?
            .context("native beside the run")?;
        let Some((first, last)) = span else {
            bail!("the run's record gives no send times to set native's beside it");
        };
        let span = first.saturating_sub(SPAN_MARGIN_US)..=last + SPAN_MARGIN_US;
        Ok(samples
            .into_iter()
            .filter(|&(tx, _)| span.contains(&tx))
            .enumerate()
            .map(|(i, (_, us))| ((0, i as u64), us))
            .collect())
    }
}

/// The noise floor from the native run `run` and the lab-side capture `taken`.
fn floor(
    run: &RttRecord,
    taken: &vtnt_linux::host_stamps::Captures,
    target: Ipv4Addr,
    configured_us: f64,
    native: Stat,
) -> anyhow::Result<Floor> {
    let pairing = taken.pair();
    // the tool's seq n went out as echo sequence number n + 1 (`-d`, default 1)
    let wire = |seq: u64| {
        let mut found = pairing.probes.iter().filter(|p| {
            p.probe.key.target == IpAddr::V4(target)
                && matches!(p.probe.key.ident, Ident::Icmp { seq: s, .. } if u64::from(s) == seq + 1)
        });
        match (found.next(), found.next()) {
            (Some(p), None) => p.wire_rtt_ns(),
            _ => None,
        }
    };
    let (mut capture, mut diff) = (Vec::new(), Vec::new());
    for &((_, seq), rtt) in &run.raw_us {
        if let Some(ns) = wire(seq) {
            let us = ns as f64 / 1e3;
            capture.push(us);
            diff.push(rtt - us);
        }
    }
    let tool = stat(&raw(run), "native with the capture")?;
    let cap = Stat::of(&capture);
    Ok(Floor {
        tool,
        tool_minus_configured: tool.minus_us(configured_us),
        capture: cap,
        capture_minus_configured: cap.map(|c| c.minus_us(configured_us)),
        tool_minus_capture: Stat::of(&diff),
        paired: capture.len(),
        replies: run.raw_us.len(),
        drops: taken.drops,
        perturbation: tool.minus(native),
    })
}

fn values(samples: &[(Place, f64)]) -> Vec<f64> {
    samples.iter().map(|&(_, us)| us).collect()
}

fn raw(run: &RttRecord) -> Vec<f64> {
    values(&run.raw_us)
}

fn stat(v: &[f64], what: &str) -> anyhow::Result<Stat> {
    Stat::of(v).with_context(|| format!("{what}: no replies"))
}

/// How a run of [`run`] is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flag {
    Corrected,
    Uncorrected,
    /// Native pings beside a run ([`Companion`]): a second's worth, uncorrected, from
    /// [`COMPANION_SEQ`].
    Companion,
}

/// `exe run --runtime RUNTIME --lab LAB --correct-rtt|--no-correct-rtt -- ping|trace
/// ...`, read.
fn run(
    args: &BenchRttArgs,
    exe: &Path,
    lab: &str,
    runtime: Runtime,
    kind: Kind,
    flag: Flag,
) -> anyhow::Result<RttRecord> {
    let mut cmd = Command::new(exe);
    cmd.args(["run", "--runtime", runtime.name(), "--lab", lab]);
    cmd.arg(match flag {
        Flag::Corrected => "--correct-rtt",
        Flag::Uncorrected | Flag::Companion => "--no-correct-rtt",
    });
    cmd.args(["--", kind.name()]);
    match kind {
        Kind::Ping => {
            let interval = format!("{}", f64::from(args.interval_ms) / 1e3);
            let count = match flag {
                Flag::Companion => (1000 / args.interval_ms).max(1),
                _ => args.count,
            };
            // the job's default rate (20 probes/s) would space them 50 ms at least
            let pps = 1000_u32.div_ceil(args.interval_ms);
            cmd.args([
                "-c",
                &count.to_string(),
                "-i",
                &interval,
                "-p",
                &pps.to_string(),
            ]);
            if flag == Flag::Companion {
                cmd.args(["-d", &COMPANION_SEQ.to_string()]);
            }
        }
        Kind::Trace => {
            cmd.args(["-q", &args.trace_attempts.to_string(), "-Q"]);
        }
    }
    cmd.args(["-O", "json", &args.target.to_string()]);
    let out = cmd
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    if !out.status.success() {
        bail!(
            "vtnt run --runtime {} failed: {}",
            runtime.name(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    RttRecord::parse(&String::from_utf8_lossy(&out.stdout), kind).map_err(anyhow::Error::msg)
}

/// A lab of the benchmark's own (`vtnt lab up --name vt-rtt-<pid>`), down when dropped.
struct LabUp {
    exe: PathBuf,
    name: String,
}

impl LabUp {
    fn up(exe: &Path, topology: Option<&Path>) -> anyhow::Result<LabUp> {
        let name = format!("vt-rtt-{}", std::process::id());
        let mut cmd = Command::new(exe);
        cmd.args(["lab", "up", "--name", &name]);
        if let Some(t) = topology {
            cmd.arg(t);
        }
        let out = cmd.output().context("vtnt lab up")?;
        let lab = LabUp {
            exe: exe.into(),
            name,
        };
        if !out.status.success() {
            bail!(
                "vtnt lab up: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(lab)
    }
}

impl Drop for LabUp {
    fn drop(&mut self) {
        let _ = Command::new(&self.exe)
            .args(["lab", "down", "--name", &self.name])
            .output();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_nearest_rank_p99() {
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        let s = Stat::of(&v).unwrap();
        assert_eq!((s.n, s.mean_us, s.p99_us), (200, 100.5, 198.0));
        assert_eq!(Stat::of(&[7.0]).unwrap().p99_us, 7.0);
        assert_eq!(Stat::of(&[]), None);
        let d = s.minus(Stat::of(&[100.0]).unwrap());
        assert_eq!((d.mean_us, d.p99_us), (0.5, 98.0));
    }

    #[test]
    fn the_configured_round_trip_is_the_emulators_own() {
        // reference: VP LAN 0.05 ms, links gw..e5 and the host's 0.5 ms, both ways
        let us = configured_rtt_us(&Topology::reference(), Ipv4Addr::new(203, 0, 113, 10));
        assert!(us.unwrap() > 1_000.0);
        let none = configured_rtt_us(&Topology::reference(), Ipv4Addr::new(198, 51, 100, 1));
        assert!(none.is_err());
    }

    #[test]
    fn a_baseline_compares_a_ping_as_two_stats_and_a_trace_hop_by_hop() {
        let ping = |v: &[f64]| -> Vec<(Place, f64)> {
            v.iter()
                .enumerate()
                .map(|(i, &us)| ((0, i as u64), us))
                .collect()
        };
        let native: Vec<f64> = (1..=200).map(f64::from).collect();
        let runtime: Vec<f64> = (1..=200).map(|v| f64::from(v) * 1.5 + 7.0).collect();
        let base = Baseline::of(&ping(&native)).unwrap();
        let by_stats = Stat::of(&runtime)
            .unwrap()
            .minus(Stat::of(&native).unwrap());
        let d = base.against(&ping(&runtime)).unwrap();
        assert!(
            (d.mean_us - by_stats.mean_us).abs() < 1e-9,
            "{d:?} {by_stats:?}"
        );
        assert!(
            (d.p99_us - by_stats.p99_us).abs() < 1e-9,
            "{d:?} {by_stats:?}"
        );
        // a trace: each hop against native's same hop, a hop native lacks left out
        let native = [((1, 1), 100.0), ((1, 2), 110.0), ((2, 1), 1_000.0)];
        let runtime = [
            ((1, 1), 120.0),
            ((2, 1), 1_020.0),
            ((2, 2), 1_030.0),
            ((3, 1), 9.0),
        ];
        let d = Baseline::of(&native).unwrap().against(&runtime).unwrap();
        // centred: native -5, +5, 0; runtime +15, +20, +30
        assert!((d.mean_us - 65.0 / 3.0).abs() < 1e-9, "{d:?}");
        assert_eq!(d.p99_us, 30.0 - 5.0);
        let truth = Baseline::constant([(0, 90.0)]);
        assert_eq!(truth.against(&ping(&[100.0, 120.0])).unwrap().mean_us, 20.0);
    }

    #[test]
    fn native_beside_a_run_is_taken_from_a_second_before_its_first_probe_to_one_after_its_last() {
        let beside = Companion {
            stop: Arc::new(AtomicBool::new(false)),
            thread: std::thread::spawn(|| {
                let s = |t: u64, us| (t * 1_000_000, us);
                Ok(vec![
                    s(5, 1.0),
                    s(9, 2.0),
                    s(15, 3.0),
                    s(21, 4.0),
                    s(22, 5.0),
                ])
            }),
        };
        // a second either side of the run's first and last probes
        assert_eq!(
            beside.finish(Some((10_000_000, 20_000_000))).unwrap(),
            [((0, 0), 2.0), ((0, 1), 3.0), ((0, 2), 4.0)]
        );
        let beside = Companion {
            stop: Arc::new(AtomicBool::new(false)),
            thread: std::thread::spawn(|| Ok(vec![(5, 1.0)])),
        };
        assert!(beside.finish(None).is_err(), "a run without send times");
    }

    #[test]
    fn a_runtime_not_corrected_has_raw_rows_and_its_reason_never_a_corrected_figure() {
        let native = Stat::of(&[100.0, 100.0]).unwrap();
        let why = "spt: its host side is not captured yet";
        let run = |flag: Flag| {
            let tail = match flag {
                Flag::Corrected => format!(r#", "rtt_correction":{{"not_corrected":"{why}"}}"#),
                _ => String::new(),
            };
            let json = format!(
                r#"{{"type":"ping","responses":[{{"seq":0,"rtt":0.110}},{{"seq":1,"rtt":0.130}}]{tail}}}"#
            );
            RttRecord::parse(&json, Kind::Ping).map_err(anyhow::Error::msg)
        };
        let native_samples = vec![((0, 0), 100.0), ((0, 1), 100.0)];
        let m = measure(Some(90.0), |c| Ok((run(c)?, native_samples.clone()))).unwrap();
        assert_eq!(m.raw.mean_us, 120.0);
        assert_eq!(m.raw_minus_native.mean_us, 20.0);
        assert_eq!(m.perturbation.mean_us, 0.0);
        assert!(
            matches!(&m.correction, Correction::NotCorrected(w) if w == why),
            "{m:?}"
        );
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(
            json["correction"],
            serde_json::json!({ "not_corrected": why })
        );
        let text = report::markdown(&RttReport {
            target: Ipv4Addr::new(203, 0, 113, 10),
            configured_us: 90.0,
            count: 2,
            interval_ms: 20,
            trace_attempts: 0,
            load_size: 1000,
            cpus: "not pinned (--no-pin)".into(),
            loads: vec![LoadRows {
                rate: 0,
                sent: 0,
                sent_loopback: 0,
                floor: floor(
                    &run(Flag::Uncorrected).unwrap(),
                    &Default::default(),
                    Ipv4Addr::new(203, 0, 113, 10),
                    90.0,
                    native,
                )
                .unwrap(),
                runtimes: vec![RuntimeRow {
                    runtime: Runtime::Spt,
                    kind: Kind::Ping,
                    outcome: Outcome::Measured(m),
                }],
            }],
        });
        let spt = text.lines().find(|l| l.starts_with("| spt")).unwrap();
        assert!(spt.contains(&format!("not corrected: {why}")), "{text}");
    }
}
