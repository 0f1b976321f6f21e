//! Seed 003's accuracy study (`vtnt bench rtt`, issue 40): the same ICMP echo pings
//! through the lab from native and from every runtime, raw and corrected
//! (`vtnt run --correct-rtt`, docs/rtt-correction.md), at background loads, against a
//! truth that owes nothing to the stamps being corrected: the lab's configured delays
//! (the emulator's own round trip in virtual time, [`configured_rtt_us`]) and the native
//! run's RTTs of the same load.
//!
//! Per load ([`load`]: none, or a paced UDP stream through the same TUN and lab daemon):
//! - the noise floor: native pings while an independent kernel-stamped capture on the
//!   lab side (`vtnt_linux::host_stamps` on the lab's TUN, not the front's own stamps)
//!   takes every probe and reply, both against the configured round trip;
//! - native without the capture: the baseline of the load;
//! - each runtime twice, with `--correct-rtt` and without: (corrected - native) and
//!   (raw - native), and the perturbation, the raw RTTs with correction on against off.
//!
//! A runtime whose run says it is not corrected (the VMs, the microVM, spt) keeps its
//! raw rows and the reason, never a corrected figure ([`record`]). [`report`] writes the
//! markdown.

pub mod load;
pub mod record;
pub mod report;

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use serde::Serialize;
use vtnt_lab::tracer::Tracer;
use vtnt_lab::{Lab, Topology};
use vtnt_linux::host_stamps::{Background, Side};
use vtnt_mace::Ident;
use vtnt_runtimes::Runtime;

use load::Load;
use record::PingRecord;

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
    /// Background loads, UDP datagrams per second through the lab's TUN (0: none).
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
    /// The lab address pinged (and the load's destination).
    #[arg(long, default_value = "203.0.113.10")]
    pub target: Ipv4Addr,
    /// The lab's topology (default: the reference topology).
    #[arg(long)]
    pub topology: Option<PathBuf>,
    /// Print the report as JSON instead of markdown.
    #[arg(long)]
    pub json: bool,
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

/// The whole study.
#[derive(Debug, Clone, Serialize)]
pub struct RttReport {
    pub target: Ipv4Addr,
    /// The configured round trip to the target (the emulator's, in virtual time).
    pub configured_us: f64,
    pub count: u32,
    pub interval_ms: u32,
    pub load_size: u16,
    pub loads: Vec<LoadRows>,
}

/// Everything measured at one background load.
#[derive(Debug, Clone, Serialize)]
pub struct LoadRows {
    /// UDP datagrams a second asked for (0: none) and sent.
    pub rate: u32,
    pub sent: u64,
    pub floor: Floor,
    /// Native without the capture: the baseline of this load.
    pub native: Stat,
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
    /// The tool's RTTs with the capture on against without (native's perturbation).
    pub perturbation: Diff,
}

/// One runtime at one load.
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeRow {
    pub runtime: Runtime,
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

/// A runtime's two runs.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    /// Raw RTTs, correction off, and against native.
    pub raw: Stat,
    pub raw_minus_native: Diff,
    /// Corrected RTTs against native, or why there are none.
    pub correction: Correction,
    /// The raw RTTs with correction on against off.
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
    pub minus_configured: Diff,
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
    let mut loads = Vec::new();
    for &rate in &args.loads {
        vtnt_measure::stop::check()?;
        let load = (rate > 0)
            .then(|| Load::start(&netns, args.target, rate, usize::from(args.load_size)))
            .transpose()?;
        let rows = at_load(args, exe, &lab.name, &netns, configured_us);
        let sent = load.map_or(0, Load::stop);
        let (floor, native, runtimes) = rows?;
        loads.push(LoadRows {
            rate,
            sent,
            floor,
            native,
            runtimes,
        });
    }
    Ok(RttReport {
        target: args.target,
        configured_us,
        count: args.count,
        interval_ms: args.interval_ms,
        load_size: args.load_size,
        loads,
    })
}

/// The noise floor, the native baseline and every runtime's rows at the load running.
fn at_load(
    args: &BenchRttArgs,
    exe: &Path,
    lab: &str,
    netns: &Path,
    configured_us: f64,
) -> anyhow::Result<(Floor, Stat, Vec<RuntimeRow>)> {
    let ping = |runtime: Runtime, correct: bool| ping(args, exe, lab, runtime, correct);
    let capture = Background::start(netns, LAB_TUN, Side::SharedNamespace)
        .with_context(|| format!("capturing on {LAB_TUN} in {}", netns.display()))?;
    let floor_run = ping(Runtime::Native, false);
    let taken = capture.finish().context("reading the lab-side capture")?;
    let floor_run = floor_run.context("native")?;
    let native_run = ping(Runtime::Native, false).context("native")?;
    let native = stat(&native_run.raw(), "native")?;
    let floor = floor(&floor_run, &taken, args.target, configured_us, native)?;
    let mut runtimes = Vec::new();
    for &runtime in args.runtimes.iter().filter(|r| **r != Runtime::Native) {
        vtnt_measure::stop::check()?;
        let outcome = match measure(runtime, native, configured_us, |c| ping(runtime, c)) {
            Ok(m) => Outcome::Measured(m),
            Err(e) => {
                vtnt_job::say!("vtnt bench rtt: {}: {e:#}", runtime.name());
                Outcome::Failed(format!("{e:#}"))
            }
        };
        runtimes.push(RuntimeRow { runtime, outcome });
    }
    Ok((floor, native, runtimes))
}

/// One runtime's runs, correction on and off, against `native`.
fn measure(
    runtime: Runtime,
    native: Stat,
    configured_us: f64,
    mut ping: impl FnMut(bool) -> anyhow::Result<PingRecord>,
) -> anyhow::Result<Measured> {
    let on = ping(true)?;
    let off = ping(false)?;
    let name = runtime.name();
    let raw = stat(&off.raw(), name)?;
    let raw_on = stat(&on.raw(), name)?;
    let correction = match on.corrected() {
        Err(why) => Correction::NotCorrected(why),
        Ok(us) => match Stat::of(&us) {
            None => Correction::NotCorrected("no reply was corrected".into()),
            Some(stat) => Correction::Corrected(Corrected {
                stat,
                minus_native: stat.minus(native),
                minus_configured: stat.minus_us(configured_us),
                refused: on.raw_us.len() - us.len(),
            }),
        },
    };
    Ok(Measured {
        raw,
        raw_minus_native: raw.minus(native),
        correction,
        perturbation: raw_on.minus(raw),
    })
}

/// The noise floor from the native run `run` and the lab-side capture `taken`.
fn floor(
    run: &PingRecord,
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
    for &(seq, rtt) in &run.raw_us {
        if let Some(ns) = wire(seq) {
            let us = ns as f64 / 1e3;
            capture.push(us);
            diff.push(rtt - us);
        }
    }
    let tool = stat(&run.raw(), "native with the capture")?;
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

fn stat(v: &[f64], what: &str) -> anyhow::Result<Stat> {
    Stat::of(v).with_context(|| format!("{what}: no replies"))
}

/// `exe run --runtime RUNTIME --lab LAB [--correct-rtt] -- ping ...`, read.
fn ping(
    args: &BenchRttArgs,
    exe: &Path,
    lab: &str,
    runtime: Runtime,
    correct: bool,
) -> anyhow::Result<PingRecord> {
    let mut cmd = Command::new(exe);
    cmd.args(["run", "--runtime", runtime.name(), "--lab", lab]);
    if correct {
        cmd.arg("--correct-rtt");
    }
    let interval = format!("{}", f64::from(args.interval_ms) / 1e3);
    cmd.args(["--", "ping", "-c", &args.count.to_string(), "-i", &interval])
        .args(["-O", "json", &args.target.to_string()]);
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
    PingRecord::parse(&String::from_utf8_lossy(&out.stdout)).map_err(anyhow::Error::msg)
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
    fn a_runtime_not_corrected_has_raw_rows_and_its_reason_never_a_corrected_figure() {
        let native = Stat::of(&[100.0, 100.0]).unwrap();
        let run = |correct: bool| {
            let tail = match correct {
                true => {
                    r#", "rtt_correction":{"not_corrected":"spt: its host side is not captured yet"}"#
                }
                false => "",
            };
            let json = format!(
                r#"{{"type":"ping","responses":[{{"seq":0,"rtt":0.110}},{{"seq":1,"rtt":0.130}}]{tail}}}"#
            );
            PingRecord::parse(&json).map_err(anyhow::Error::msg)
        };
        let m = measure(Runtime::Spt, native, 90.0, run).unwrap();
        assert_eq!(m.raw.mean_us, 120.0);
        assert_eq!(m.raw_minus_native.mean_us, 20.0);
        assert_eq!(m.perturbation.mean_us, 0.0);
        let why = "spt: its host side is not captured yet";
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
            load_size: 1000,
            loads: vec![LoadRows {
                rate: 0,
                sent: 0,
                floor: floor(
                    &run(false).unwrap(),
                    &Default::default(),
                    Ipv4Addr::new(203, 0, 113, 10),
                    90.0,
                    native,
                )
                .unwrap(),
                native,
                runtimes: vec![RuntimeRow {
                    runtime: Runtime::Spt,
                    outcome: Outcome::Measured(m),
                }],
            }],
        });
        let spt = text.lines().find(|l| l.starts_with("| spt")).unwrap();
        assert!(spt.contains(&format!("not corrected: {why}")), "{text}");
    }
}
