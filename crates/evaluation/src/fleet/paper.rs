//! `vtnt bench fleet`: seed 000's controller experiment (Sec. V, Figs. 10 and 11) on
//! this host. Five sites ([`super::site`]), each a network namespace behind a link with
//! the paper's round trip from the controller in Belgium (France 10 ms, Poland 30,
//! Canada 90, Singapore 170, Australia 280) and 100 Mbit/s toward the site; for each, one
//! agent (one slot, every runtime asked for) whose connections to the broker and to the
//! controller's image server leave from the site, across that link; jobs measure the lab. The
//! controller replays the paper's event list (`--events`, one every `--interval`
//! seconds, to any site) per runtime, in wait mode and in discard mode, `--reps` times
//! ([`vtnt_fleet::replay`]). Fig. 10: deploy + execution per job in wait mode; Fig. 11: the
//! share of events served in discard mode. The Docker engine runs for the whole
//! benchmark, as on the paper's nodes; images are built before the first event.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use vtnt_runtimes::net::Network;
use vtnt_runtimes::server::ImageServer;
use vtnt_runtimes::{BuildOptions, EngineGuard, Runtime};

use super::local::LocalFleet;
use super::site::Site;
use vtnt_fleet::proto::{JobStatus, Mode, Outcome};
use vtnt_fleet::replay::{self, ReplayOptions, Replayed};

/// The paper's sites and their round trips from the controller, ms.
pub const SITES: [(&str, u64); 5] = [
    ("france", 10),
    ("poland", 30),
    ("canada", 90),
    ("singapore", 170),
    ("australia", 280),
];
/// Each site's download bandwidth, Mbit/s.
pub const SITE_MBPS: u64 = 100;
/// The tenant whose jobs the benchmark places.
const TENANT: &str = "bench";
/// The image server's own limit: none to speak of (the sites' links set the bandwidth).
const SERVER_BPS: u64 = 100_000_000_000;

/// How a run goes.
#[derive(Debug, Clone)]
pub struct PaperOptions {
    pub runtimes: Vec<Runtime>,
    pub modes: Vec<Mode>,
    pub reps: usize,
    /// Events per replay.
    pub events: usize,
    /// Seconds between events.
    pub interval_s: f64,
    pub lab: String,
    /// The job, in `vtnt`'s words.
    pub job: String,
    /// How long a replay waits for its jobs once its last event is placed.
    pub results_timeout: Duration,
    /// The `vtnt` executable the agents run.
    pub exe: PathBuf,
}

/// Mean and standard deviation (sample) of some values.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct MeanSd {
    pub n: usize,
    pub mean: f64,
    pub sd: f64,
}

impl MeanSd {
    pub fn of(v: &[f64]) -> MeanSd {
        let (mean, sd) = vtnt_stats::mean_sd(v).unwrap_or_default();
        MeanSd {
            n: v.len(),
            mean,
            sd,
        }
    }
}

/// Fig. 10's figures of one runtime: wait mode.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WaitFigures {
    pub events: usize,
    /// Jobs that finished `ok`.
    pub ok: usize,
    /// Jobs that failed, were refused or never finished.
    pub failed: usize,
    /// Deploy (image fetched over the site's link and installed) + execution, per job, s.
    pub deploy_exec_s: MeanSd,
    pub deploy_s: MeanSd,
    pub exec_s: MeanSd,
    /// Event to start on a node (waiting for a free one included), per job, s.
    pub queue_s: MeanSd,
    /// First event to the last job's end, per repetition, s.
    pub makespan_s: MeanSd,
}

/// Fig. 11's figures of one runtime: discard mode.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DiscardFigures {
    pub events: usize,
    /// Events accepted by a node whose job finished `ok`.
    pub served: usize,
    pub discarded: usize,
    /// Accepted but failed or unfinished.
    pub failed: usize,
    /// Served share per repetition, %.
    pub served_pct: MeanSd,
    /// Placement decision (a node's answer or "no responders"), per event, ms.
    pub decision_ms: MeanSd,
}

/// One runtime's figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RuntimeFigures {
    pub runtime: String,
    /// `KVM`, `PVM-KVM` or `TCG` for the VM runtimes.
    pub accel: Option<String>,
    /// Bytes each deployment downloads.
    pub download_bytes: u64,
    pub wait: Option<WaitFigures>,
    pub discard: Option<DiscardFigures>,
    /// Why a replay of it failed as a whole.
    pub errors: Vec<String>,
}

/// The run's report.
#[derive(Debug, Clone, Serialize)]
pub struct PaperReport {
    /// Sites and their round trips, ms.
    pub sites: Vec<(String, u64)>,
    pub site_mbps: u64,
    pub events: usize,
    pub interval_s: f64,
    pub reps: usize,
    pub job: String,
    pub runtimes: Vec<RuntimeFigures>,
    /// Seconds for the whole run, set-up included.
    pub duration_s: f64,
}

/// Runs the experiment; `dir` receives the node and event files, `events.jsonl` (every
/// event's line with its repetition) and the figures' PNGs.
pub fn run(o: &PaperOptions, dir: &Path) -> anyhow::Result<PaperReport> {
    anyhow::ensure!(!o.runtimes.is_empty(), "--runtimes: at least one");
    anyhow::ensure!(!o.modes.is_empty(), "--modes: at least one");
    anyhow::ensure!(o.reps >= 1, "--reps: at least 1");
    anyhow::ensure!((1..=10_000).contains(&o.events), "--events: 1 to 10000");
    anyhow::ensure!(
        o.interval_s > 0.0 && o.interval_s <= 3600.0,
        "--interval: above 0 and at most 3600 s"
    );
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let t0 = Instant::now();
    // what every site will fetch, built once, before anything is timed
    let mut figures = Vec::new();
    let mut images = Vec::new();
    for &rt in &o.runtimes {
        let im = rt.build_image(&BuildOptions::default())?;
        figures.push(RuntimeFigures {
            runtime: rt.name().into(),
            accel: rt.accelerator(&im).map(|a| a.name().to_string()),
            download_bytes: im.download_bytes,
            ..Default::default()
        });
        images.push(im);
    }
    let server = ImageServer::start_on(
        SocketAddr::from(([0, 0, 0, 0], 0)),
        &images.iter().collect::<Vec<_>>(),
        SERVER_BPS,
    )?;
    let net = Network::Lab(o.lab.clone());
    let _engines = o
        .runtimes
        .iter()
        .map(|&rt| EngineGuard::for_runtime(rt, &net))
        .collect::<vtnt_runtimes::Result<Vec<_>>>()?;
    let mut fleet = LocalFleet::up("paper", IpAddr::from([0, 0, 0, 0]), TENANT)?;
    let port: u16 = fleet
        .broker
        .url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .context("the broker's URL")?;
    let agent_key = vtnt_fleet::auth::key_file(&fleet.broker.dir, &vtnt_fleet::auth::Role::Agent);
    let runtimes = o
        .runtimes
        .iter()
        .map(|r| r.name())
        .collect::<Vec<_>>()
        .join(",");
    let mut sites = Vec::new();
    let mut nodes = String::new();
    for (i, (name, rtt)) in SITES.iter().enumerate() {
        let site = Site::up(
            i as u8,
            &vtnt_netns::unique_name(&format!("fb{i}")),
            Duration::from_millis(*rtt),
            SITE_MBPS * 1_000_000,
        )?;
        // The agent runs in this namespace (the VM runtimes reach the lab's VM front on
        // its loopback); its broker and image connections leave from the site's.
        let broker = site.relay(SocketAddr::from((site.host_ip, port)))?;
        let images = site.relay(SocketAddr::from((site.host_ip, server.addr().port())))?;
        let mut cmd = Command::new(&o.exe);
        cmd.arg("agent")
            .arg("--nats")
            .arg(format!("nats://{broker}"))
            .arg("--nkey")
            .arg(&agent_key)
            .args(["--node", name, "--location", name, "--slots", "1"])
            .args(["--runtimes", &runtimes, "--lab", &o.lab])
            .arg("--images-from")
            .arg(format!("http://{images}"));
        fleet.spawn(cmd, name)?;
        nodes.push_str(&format!("{name} {name}\n"));
        sites.push(site);
    }
    let nodes_file = dir.join("nodes.txt");
    std::fs::write(&nodes_file, nodes)?;
    fleet.wait_up(SITES.len(), Duration::from_secs(120))?;
    let connect = fleet.tenant()?;
    let mut all = std::io::BufWriter::new(
        std::fs::File::create(dir.join("events.jsonl")).context("events.jsonl")?,
    );
    // per runtime and mode, each repetition's lines
    let mut lines: Vec<[Vec<Vec<Replayed>>; 2]> = vec![Default::default(); o.runtimes.len()];
    for rep in 0..o.reps {
        for (k, &rt) in o.runtimes.iter().enumerate() {
            for &mode in &o.modes {
                let word = mode.word();
                vtnt_job::say!(
                    "vtnt bench fleet: rep {}/{}, {} {word}: {} events",
                    rep + 1,
                    o.reps,
                    rt.name(),
                    o.events
                );
                let events: String = (0..o.events)
                    .map(|e| {
                        format!(
                            "{:.3} any {} {word} {}\n",
                            e as f64 * o.interval_s,
                            rt.name(),
                            o.job
                        )
                    })
                    .collect();
                let events_file = dir.join(format!("events-{}-{word}.txt", rt.name()));
                std::fs::write(&events_file, events)?;
                let mut got = Vec::new();
                let placed = replay::replay(
                    &connect,
                    &nodes_file,
                    &events_file,
                    &ReplayOptions {
                        tenant: TENANT.into(),
                        results_timeout: o.results_timeout,
                    },
                    |r| {
                        got.push(r.clone());
                        Ok::<(), anyhow::Error>(())
                    },
                );
                if let Err(e) = placed {
                    if vtnt_measure::stop::interrupted() {
                        return Err(e);
                    }
                    figures[k]
                        .errors
                        .push(format!("rep {} {word}: {e:#}", rep + 1));
                    continue;
                }
                for r in &got {
                    let mut v = serde_json::to_value(r)?;
                    v["rep"] = (rep + 1).into();
                    serde_json::to_writer(&mut all, &v)?;
                    std::io::Write::write_all(&mut all, b"\n")?;
                }
                lines[k][mode as usize].push(got);
            }
        }
    }
    std::io::Write::flush(&mut all)?;
    drop(fleet);
    drop(sites);
    for (f, [wait, discard]) in figures.iter_mut().zip(&lines) {
        if o.modes.contains(&Mode::Wait) {
            f.wait = Some(wait_figures(wait));
        }
        if o.modes.contains(&Mode::Discard) {
            f.discard = Some(discard_figures(discard));
        }
    }
    let report = PaperReport {
        sites: SITES.iter().map(|(n, r)| (n.to_string(), *r)).collect(),
        site_mbps: SITE_MBPS,
        events: o.events,
        interval_s: o.interval_s,
        reps: o.reps,
        job: o.job.clone(),
        runtimes: figures,
        duration_s: t0.elapsed().as_secs_f64(),
    };
    plots(&report, dir)?;
    Ok(report)
}

/// Fig. 10's figures from the wait-mode replays (one list per repetition).
fn wait_figures(reps: &[Vec<Replayed>]) -> WaitFigures {
    let mut f = WaitFigures::default();
    let (mut de, mut d, mut x, mut q, mut span) = (vec![], vec![], vec![], vec![], vec![]);
    for rep in reps {
        let mut last_end = 0.0f64;
        for r in rep {
            f.events += 1;
            match &r.summary {
                Some(s) if s.status == JobStatus::Ok => {
                    let t = &s.timings;
                    f.ok += 1;
                    de.push((t.deploy_ms + t.exec_ms) / 1e3);
                    d.push(t.deploy_ms / 1e3);
                    x.push(t.exec_ms / 1e3);
                    q.push(t.queue_ms / 1e3);
                    last_end = last_end
                        .max(r.at_s + r.late_us as f64 / 1e6 + (t.queue_ms + t.total_ms) / 1e3);
                }
                _ => f.failed += 1,
            }
        }
        span.push(last_end);
    }
    f.deploy_exec_s = MeanSd::of(&de);
    f.deploy_s = MeanSd::of(&d);
    f.exec_s = MeanSd::of(&x);
    f.queue_s = MeanSd::of(&q);
    f.makespan_s = MeanSd::of(&span);
    f
}

/// Fig. 11's figures from the discard-mode replays (one list per repetition).
fn discard_figures(reps: &[Vec<Replayed>]) -> DiscardFigures {
    let mut f = DiscardFigures::default();
    let (mut pct, mut decision) = (vec![], vec![]);
    for rep in reps {
        let mut served = 0;
        for r in rep {
            f.events += 1;
            decision.push(r.event.decision_us as f64 / 1e3);
            match (&r.event.outcome, &r.summary) {
                (Outcome::Discarded { .. }, _) => f.discarded += 1,
                (_, Some(s)) if s.status == JobStatus::Ok => served += 1,
                _ => f.failed += 1,
            }
        }
        f.served += served;
        if !rep.is_empty() {
            pct.push(100.0 * served as f64 / rep.len() as f64);
        }
    }
    f.served_pct = MeanSd::of(&pct);
    f.decision_ms = MeanSd::of(&decision);
    f
}

/// The paper's figures (seed 000, Sec. V-B): deploy + execution ratios in wait mode and
/// the share served in discard mode, by its names for our runtimes.
const PAPER_WAIT_RATIO: [(&str, f64); 2] = [("docker", 5.0), ("vm", 65.0)];
const PAPER_SERVED: [(&str, f64); 3] = [("microvm", 90.0), ("docker", 28.0), ("vm", 8.0)];

impl PaperReport {
    fn of(&self, rt: &str) -> Option<&RuntimeFigures> {
        self.runtimes.iter().find(|r| r.runtime == rt)
    }

    /// The markdown docs/benchmarks.md quotes: both figures' tables, the ratios beside
    /// the paper's.
    pub fn markdown(&self) -> String {
        let sites = self
            .sites
            .iter()
            .map(|(n, r)| format!("{n} {r} ms"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut s = format!(
            "Sites (round trip from the controller): {sites}; {} Mbit/s toward each. {} events, one every {} s, to any site; {} repetition(s); job `{}`; {:.0} s in all.\n\n",
            self.site_mbps, self.events, self.interval_s, self.reps, self.job, self.duration_s
        );
        s.push_str("Fig. 10 (wait mode): per job\n\n| runtime | accel | download | jobs ok / failed | deploy + execution s | deploy s | execution s | queue s | makespan s |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in &self.runtimes {
            if let Some(w) = &r.wait {
                s.push_str(&format!(
                    "| {} | {} | {:.2} MiB | {} / {} | {:.2} ± {:.2} | {:.2} | {:.2} | {:.2} | {:.1} |\n",
                    r.runtime,
                    r.accel.as_deref().unwrap_or("-"),
                    r.download_bytes as f64 / 1_048_576.0,
                    w.ok,
                    w.failed,
                    w.deploy_exec_s.mean,
                    w.deploy_exec_s.sd,
                    w.deploy_s.mean,
                    w.exec_s.mean,
                    w.queue_s.mean,
                    w.makespan_s.mean
                ));
            }
        }
        let unikernel = self
            .of("microvm")
            .and_then(|r| r.wait.as_ref())
            .map(|w| w.deploy_exec_s.mean)
            .filter(|v| *v > 0.0);
        for (rt, paper) in PAPER_WAIT_RATIO {
            let other = self.of(rt).and_then(|r| r.wait.as_ref());
            if let (Some(u), Some(w)) = (unikernel, other.filter(|w| w.ok > 0)) {
                s.push_str(&format!(
                    "\nmicroVM deploy + execution {:.1}x faster than {rt} (paper: {paper}x).",
                    w.deploy_exec_s.mean / u
                ));
            }
        }
        s.push_str("\n\nFig. 11 (discard mode): events served\n\n| runtime | accel | served | discarded | failed | served % (± sd over reps) | paper % | decision ms |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
        for r in &self.runtimes {
            if let Some(d) = &r.discard {
                let paper = PAPER_SERVED
                    .iter()
                    .find(|(n, _)| *n == r.runtime)
                    .map_or("-".to_string(), |(_, p)| format!("{p:.0}"));
                s.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {:.0} ± {:.0} | {paper} | {:.1} |\n",
                    r.runtime,
                    r.accel.as_deref().unwrap_or("-"),
                    d.served,
                    d.discarded,
                    d.failed,
                    d.served_pct.mean,
                    d.served_pct.sd,
                    d.decision_ms.mean
                ));
            }
        }
        let served = |rt: &str| {
            self.of(rt)
                .and_then(|r| r.discard.as_ref())
                .map(|d| d.served_pct.mean)
        };
        if let (Some(u), Some(d)) = (served("microvm"), served("docker")) {
            if d > 0.0 {
                s.push_str(&format!(
                    "\nmicroVM served {:.1}x as many events as docker (paper: {:.1}x).",
                    u / d,
                    90.0 / 28.0
                ));
            }
        }
        for r in &self.runtimes {
            for e in &r.errors {
                s.push_str(&format!("\n{}: {e}", r.runtime));
            }
        }
        s.push('\n');
        s
    }
}

/// Fig. 10 and Fig. 11 as bar charts, one bar per runtime (the VM runtimes drawn lighter
/// when emulated).
fn plots(report: &PaperReport, dir: &Path) -> anyhow::Result<()> {
    use crate::plot::{Bar, BarChart, Group, Unit};
    let group = |r: &RuntimeFigures, bar: Option<Bar>| Group {
        runtime: r.runtime.clone(),
        emulated: r.accel.as_deref() == Some("TCG"),
        gap: bar.is_none().then(|| "not run".to_string()),
        bars: vec![bar.unwrap_or_default()],
    };
    let bar = |m: MeanSd| {
        (m.n > 0).then_some(Bar {
            value: Some(m.mean),
            sd: m.sd,
            capped: false,
        })
    };
    let charts = [
        (
            "fig10-wait.png",
            "Fig. 10: deploy + execution per job, wait mode",
            "seconds",
            Unit::Seconds,
            report
                .runtimes
                .iter()
                .filter_map(|r| r.wait.as_ref().map(|w| group(r, bar(w.deploy_exec_s))))
                .collect::<Vec<_>>(),
        ),
        (
            "fig11-discard.png",
            "Fig. 11: events served, discard mode",
            "served (%)",
            Unit::Percent,
            report
                .runtimes
                .iter()
                .filter_map(|r| r.discard.as_ref().map(|d| group(r, bar(d.served_pct))))
                .collect(),
        ),
    ];
    for (file, title, ylabel, unit, groups) in charts {
        if groups.is_empty() {
            continue;
        }
        BarChart {
            title,
            ylabel,
            unit,
            series: &[],
            groups,
        }
        .draw(&dir.join(file))?;
    }
    Ok(())
}
