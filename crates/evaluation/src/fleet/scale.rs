//! `vtnt bench fleet-scale`: what the controller and the broker add when many agents
//! listen (issue 17's scale run). A broker of its own, `agents` agent processes (this
//! executable's `vtnt agent`, one slot each, the native runtime, spread over the paper's
//! five locations, all measuring one lab), and an event list of a cheap job at a fixed
//! rate to location `any`, replayed once in wait mode and once in discard mode
//! ([`vtnt_fleet::replay`]). Figures per mode: event to job start on an agent (the summary's
//! queue time: controller and agents share this host's clock), the placement decision,
//! how late events were placed against their times, and the events per second placed.
//! The peer, measured in the same run at the events' pace: a bare NATS request and reply
//! through the same broker between two connections of this process, the floor any
//! placement pays.
//!
//! Before the events, the fleet's etiquette at that scale ([`opt_out_reach`]): the
//! operator changes the opt-out list and each agent's heartbeat says when it applied it.
//!
//! Then the fleet-wide rate limit at the lab's edge ([`super::edge`]): every agent a job
//! toward one lab /24, ten times the limit in all, with and without the limit.
//!
//! Then the controller's own limit, a sweep of offered rates ([`capacity`]): events placed
//! where no agent is (wait mode: queued to a location none serves; discard mode: asked
//! where none listens, each decided by "no responders"), so no job competes for the CPU;
//! a rate is sustained when every event is placed and placements run at most
//! [`SUSTAINED_LATE_P99_MS`] late at p99.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use serde::Serialize;

use vtnt_runtimes::Runtime;

use super::local::LocalFleet;
use vtnt_fleet::controller::{self, SubmitOptions};
use vtnt_fleet::proto::Mode;
use vtnt_fleet::replay::{self, ReplayOptions, Replayed};
use vtnt_fleet::Connect;

/// The tenant whose jobs the benchmark places.
const TENANT: &str = "scale";

/// The paper's locations (seed 000, Fig. 9), agents spread over them in turn.
pub const LOCATIONS: [&str; 5] = ["france", "poland", "canada", "singapore", "australia"];

/// How a scale run goes.
#[derive(Debug, Clone)]
pub struct ScaleOptions {
    pub agents: usize,
    /// Events per second.
    pub rate: f64,
    /// Seconds of events per mode.
    pub seconds: f64,
    /// The lab the jobs probe (`vtnt lab up --name LAB`).
    pub lab: String,
    /// The job, in `vtnt`'s words.
    pub job: String,
    /// The `vtnt` executable the agents run.
    pub exe: PathBuf,
    /// The capacity sweep's offered rates, events per second (none: no sweep).
    pub capacity_rates: Vec<f64>,
    /// Seconds of events per rate of the sweep.
    pub capacity_seconds: f64,
    /// The per-prefix limit of the etiquette phase, pps.
    pub edge_limit: u32,
}

/// A rate is sustained when placements run at most this late at p99 (issue 17's p99
/// budget for event to start).
pub const SUSTAINED_LATE_P99_MS: f64 = 10.0;
/// The location no agent serves, where the capacity sweep places its events.
const NOWHERE: &str = "capacity-sweep";

/// Quantiles of a sample.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Quantiles {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Quantiles {
    pub fn of(mut v: Vec<f64>) -> Quantiles {
        v.sort_by(f64::total_cmp);
        let q = |p: f64| {
            v.get(((v.len() as f64 * p).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or(0.0)
        };
        Quantiles {
            n: v.len(),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: v.last().copied().unwrap_or(0.0),
        }
    }
}

/// One mode's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ModeFigures {
    pub mode: Mode,
    pub events: usize,
    /// Queued (wait) or accepted (discard).
    pub placed: usize,
    pub discarded: usize,
    /// Jobs whose summary came back.
    pub finished: usize,
    /// Event to job start on an agent, ms (the summaries' queue times).
    pub start_ms: Quantiles,
    /// Placement decision (queued, accepted or discarded), ms.
    pub decision_ms: Quantiles,
    /// Placed this late against the event's time, ms.
    pub late_ms: Quantiles,
    /// Events placed per second, from the first event's time to the last placement.
    pub placed_per_s: f64,
}

/// The scale run's report.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleReport {
    pub agents: usize,
    pub rate: f64,
    pub seconds: f64,
    pub job: String,
    pub modes: Vec<ModeFigures>,
    /// The peer: a bare request and reply through the broker, ms.
    pub bare_request_ms: Quantiles,
    /// The capacity sweep, per mode and offered rate.
    pub capacity: Vec<CapacityPoint>,
    /// A change of the opt-out list, from the operator's write to each agent applying
    /// it (the agent's own stamp; agents and operator share this host's clock), ms.
    pub opt_out_ms: Quantiles,
    /// The fleet-wide rate limit at the lab's edge, with its peer.
    pub edge: super::edge::EdgeReport,
    /// Seconds for the whole run, agents' start-up included.
    pub duration_s: f64,
}

/// One offered rate of the capacity sweep.
#[derive(Debug, Clone, Serialize)]
pub struct CapacityPoint {
    pub mode: Mode,
    /// Events per second offered.
    pub offered_per_s: f64,
    pub events: usize,
    /// Queued (wait) or decided (discard: "no responders").
    pub placed: usize,
    /// Placements that failed (the error of the first).
    pub failed: usize,
    pub first_error: Option<String>,
    /// Events placed per second, from the first event's time to the last placement.
    pub achieved_per_s: f64,
    pub decision_ms: Quantiles,
    pub late_ms: Quantiles,
    /// Every event placed, at most [`SUSTAINED_LATE_P99_MS`] late at p99.
    pub sustained: bool,
}

impl ScaleReport {
    /// The highest offered rate sustained in `mode` (0: none).
    pub fn sustained(&self, mode: Mode) -> f64 {
        self.capacity
            .iter()
            .filter(|p| p.mode == mode && p.sustained)
            .map(|p| p.offered_per_s)
            .fold(0.0, f64::max)
    }
}

impl ScaleReport {
    /// The markdown table docs/benchmarks.md quotes.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "{} agents, {} events/s for {} s per mode, job `{}`\n\n| mode | events | placed | discarded | finished | event to start p50 / p99 / max ms | decision p50 / p99 ms | late p50 / p99 ms | placed/s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            self.agents, self.rate, self.seconds, self.job
        );
        for m in &self.modes {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {:.2} / {:.2} / {:.2} | {:.3} / {:.3} | {:.2} / {:.2} | {:.1} |\n",
                m.mode.word(),
                m.events,
                m.placed,
                m.discarded,
                m.finished,
                m.start_ms.p50,
                m.start_ms.p99,
                m.start_ms.max,
                m.decision_ms.p50,
                m.decision_ms.p99,
                m.late_ms.p50,
                m.late_ms.p99,
                m.placed_per_s
            ));
        }
        let b = &self.bare_request_ms;
        s.push_str(&format!(
            "\nPeer in the same run: a bare NATS request and reply through the same broker at the events' pace, p50 {:.3} / p99 {:.3} ms ({} of them).",
            b.p50, b.p99, b.n
        ));
        for m in &self.modes {
            if b.p50 > 0.0 {
                s.push_str(&format!(
                    " In {} mode: decision p50 {:.1}x it, event to start p50 {:.1}x it.",
                    m.mode.word(),
                    m.decision_ms.p50 / b.p50,
                    m.start_ms.p50 / b.p50
                ));
            }
        }
        s.push('\n');
        let o = &self.opt_out_ms;
        s.push_str(&format!(
            "\nAn opt-out list change applied by {} of {} agents: p50 {:.0} / p99 {:.0} / max {:.0} ms after the operator's write (goal: every agent within {} ms).\n",
            o.n, self.agents, o.p50, o.p99, o.max, OPT_OUT_GOAL.as_millis()
        ));
        s.push_str(&self.edge.markdown(self.agents));
        if !self.capacity.is_empty() {
            s.push_str(&format!(
                "\nCapacity sweep (events placed where no agent is; sustained: all placed, late p99 <= {SUSTAINED_LATE_P99_MS} ms):\n\n| mode | offered/s | events | placed | failed | achieved/s | decision p50 / p99 ms | late p50 / p99 ms | sustained |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n"
            ));
            for p in &self.capacity {
                s.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {:.0} | {:.3} / {:.3} | {:.2} / {:.2} | {} |\n",
                    p.mode.word(),
                    p.offered_per_s,
                    p.events,
                    p.placed,
                    p.failed,
                    p.achieved_per_s,
                    p.decision_ms.p50,
                    p.decision_ms.p99,
                    p.late_ms.p50,
                    p.late_ms.p99,
                    if p.sustained { "yes" } else { "no" }
                ));
            }
            s.push_str(&format!(
                "\nSustained: {} events/s in wait mode, {} in discard mode.\n",
                self.sustained(Mode::Wait),
                self.sustained(Mode::Discard)
            ));
        }
        s
    }
}

/// The capacity sweep: per mode, each offered rate of `rates` for `seconds`, events of
/// the job `words` placed where no agent is.
async fn capacity(
    connect: &Connect,
    rates: &[f64],
    seconds: f64,
    words: &[String],
) -> anyhow::Result<Vec<CapacityPoint>> {
    let (_, fleet) = connect.fleet("vtnt bench fleet-scale (capacity)").await?;
    let mut points = Vec::new();
    for mode in [Mode::Wait, Mode::Discard] {
        for &rate in rates {
            let submit = SubmitOptions {
                runtime: Runtime::Native,
                location: NOWHERE.into(),
                mode,
                tenant: TENANT.into(),
                words: words.to_vec(),
            };
            let line = controller::job_line(&submit)?;
            let n = (rate * seconds).ceil() as usize;
            let at = |k: usize| Duration::from_secs_f64(k as f64 / rate);
            let placed =
                replay::place_all(&fleet, (0..n).map(|k| (at(k), &submit, line.clone()))).await;
            let (mut decision, mut late, mut last) = (Vec::new(), Vec::new(), 0.0f64);
            let (mut failed, mut first_error) = (0, None);
            for (k, p) in placed.into_iter().enumerate() {
                match p {
                    Ok((l, ev)) => {
                        let d = Duration::from_micros(ev.decision_us);
                        decision.push(d.as_secs_f64() * 1e3);
                        late.push(l.as_secs_f64() * 1e3);
                        last = last.max((at(k) + l + d).as_secs_f64());
                    }
                    Err(e) => {
                        failed += 1;
                        first_error.get_or_insert_with(|| format!("{e:#}"));
                    }
                }
            }
            let (decision_ms, late_ms) = (Quantiles::of(decision), Quantiles::of(late));
            let point = CapacityPoint {
                mode,
                offered_per_s: rate,
                events: n,
                placed: decision_ms.n,
                failed,
                first_error,
                achieved_per_s: if last > 0.0 {
                    decision_ms.n as f64 / last
                } else {
                    0.0
                },
                sustained: failed == 0 && late_ms.p99 <= SUSTAINED_LATE_P99_MS,
                decision_ms,
                late_ms,
            };
            points.push(point);
        }
    }
    Ok(points)
}

/// The most bare round trips the peer measures, and the longest it takes.
const BARE_REQUESTS: usize = 1000;
const BARE_SECONDS: f64 = 10.0;

/// The peer: `n` bare requests, one every `every` (the events' pace: a connection that
/// has been idle answers slower than one kept busy), from the tenant's connection
/// `asker` to a responder on an agent's, through the broker, on a subject no agent
/// serves.
async fn bare_round_trips(
    asker: &Connect,
    responder: &Connect,
    n: usize,
    every: Duration,
) -> anyhow::Result<Quantiles> {
    let echo_subject = vtnt_fleet::deploy_subject(TENANT, "bench-echo");
    let asker = asker
        .requests_client("vtnt bench fleet-scale (asker)")
        .await?;
    let responder = responder
        .client("vtnt bench fleet-scale (responder)")
        .await?;
    let mut sub = responder.subscribe(echo_subject.clone()).await?;
    responder.flush().await?;
    let echo = tokio::spawn(async move {
        while let Some(m) = sub.next().await {
            if let Some(reply) = m.reply {
                let _ = responder.publish(reply, m.payload).await;
            }
        }
    });
    // answered once before measuring: a connection of a host busy with 100 agents
    // starting may still be settling (a request then finds "no responders")
    let warm = Instant::now();
    while let Err(e) = asker.request(echo_subject.clone(), "x".into()).await {
        anyhow::ensure!(
            warm.elapsed() < Duration::from_secs(10),
            "the bare request: {e}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut ms = Vec::with_capacity(n);
    let mut pace = tokio::time::interval(every);
    for _ in 0..n {
        pace.tick().await;
        let t = Instant::now();
        asker
            .request(echo_subject.clone(), "x".into())
            .await
            .context("the bare request")?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    echo.abort();
    Ok(Quantiles::of(ms))
}

/// Runs the scale benchmark; `dir` receives the node and event files.
pub fn run(o: &ScaleOptions, dir: &Path) -> anyhow::Result<ScaleReport> {
    anyhow::ensure!(o.agents >= 1, "--agents: at least 1");
    anyhow::ensure!(
        o.rate > 0.0 && o.rate <= 10_000.0,
        "--rate: events per second, above 0 and at most 10000"
    );
    anyhow::ensure!(
        o.seconds > 0.0 && o.seconds <= 3600.0,
        "--seconds: above 0 and at most 3600"
    );
    anyhow::ensure!(
        o.capacity_rates.iter().all(|r| *r > 0.0 && *r <= 100_000.0),
        "--capacity-rates: events per second, above 0 and at most 100000"
    );
    anyhow::ensure!(
        o.capacity_seconds > 0.0 && o.capacity_seconds <= 60.0,
        "--capacity-seconds: above 0 and at most 60"
    );
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let t0 = Instant::now();
    let mut fleet = LocalFleet::up("scale", IpAddr::from([127, 0, 0, 1]), TENANT)?;
    let connect = fleet.tenant()?;
    let mut nodes = String::new();
    for i in 0..o.agents {
        let node = format!("s{i}");
        let location = LOCATIONS[i % LOCATIONS.len()];
        nodes.push_str(&format!("{node} {location}\n"));
        let mut cmd = Command::new(&o.exe);
        cmd.args(["agent", "--fleet", &fleet.broker.name, "--node", &node])
            .args(["--location", location, "--slots", "1"])
            .args(["--runtimes", "native", "--lab", &o.lab]);
        fleet.spawn(cmd, &node)?;
    }
    let nodes_file = dir.join("nodes.txt");
    std::fs::write(&nodes_file, nodes)?;
    fleet.wait_up(o.agents, Duration::from_secs(30 + o.agents as u64 / 2))?;
    let opt_out_ms = opt_out_reach(&fleet, o.agents)?;
    let edge = super::edge::measure(
        &fleet,
        TENANT,
        &nodes_file,
        o.agents,
        &o.lab,
        o.edge_limit,
        dir,
    )?;
    let agent = fleet.agent()?;
    let n = (o.rate * o.seconds).ceil() as usize;
    let bare_request_ms = vtnt_fleet::block_on(bare_round_trips(
        &connect,
        &agent,
        ((o.rate * o.seconds.min(BARE_SECONDS)).ceil() as usize).min(BARE_REQUESTS),
        Duration::from_secs_f64(1.0 / o.rate),
    ))?;
    let mut modes = Vec::new();
    for mode in [Mode::Wait, Mode::Discard] {
        let word = mode.word();
        let events: String = (0..n)
            .map(|k| format!("{:.6} any native {word} {}\n", k as f64 / o.rate, o.job))
            .collect();
        let events_file = dir.join(format!("events-{word}.txt"));
        std::fs::write(&events_file, events)?;
        let mut lines: Vec<Replayed> = Vec::new();
        let st = replay::replay(
            &connect,
            &nodes_file,
            &events_file,
            &ReplayOptions {
                tenant: TENANT.into(),
                results_timeout: Duration::from_secs(120),
            },
            |r| {
                lines.push(r.clone());
                Ok::<(), anyhow::Error>(())
            },
        )?;
        let mut jsonl = String::new();
        for r in &lines {
            jsonl.push_str(&serde_json::to_string(r)?);
            jsonl.push('\n');
        }
        std::fs::write(dir.join(format!("results-{word}.jsonl")), jsonl)?;
        let last_placed = lines
            .iter()
            .map(|r| r.at_s + (r.late_us + r.event.decision_us) as f64 / 1e6)
            .fold(0.0, f64::max);
        modes.push(ModeFigures {
            mode,
            events: st.events,
            placed: st.queued + st.accepted,
            discarded: st.discarded,
            finished: st.finished,
            start_ms: Quantiles::of(
                lines
                    .iter()
                    .filter_map(|r| Some(r.summary.as_ref()?.timings.queue_ms))
                    .collect(),
            ),
            decision_ms: Quantiles::of(
                lines
                    .iter()
                    .map(|r| r.event.decision_us as f64 / 1e3)
                    .collect(),
            ),
            late_ms: Quantiles::of(lines.iter().map(|r| r.late_us as f64 / 1e3).collect()),
            placed_per_s: if last_placed > 0.0 {
                st.events as f64 / last_placed
            } else {
                0.0
            },
        });
    }
    let words: Vec<String> = o.job.split_whitespace().map(String::from).collect();
    let capacity = vtnt_fleet::block_on(capacity(
        &connect,
        &o.capacity_rates,
        o.capacity_seconds,
        &words,
    ))?;
    drop(fleet);
    Ok(ScaleReport {
        agents: o.agents,
        rate: o.rate,
        seconds: o.seconds,
        job: o.job.clone(),
        modes,
        bare_request_ms,
        capacity,
        opt_out_ms,
        edge,
        duration_s: t0.elapsed().as_secs_f64(),
    })
}

/// Issue 42's bound on an opt-out list change reaching every agent.
pub const OPT_OUT_GOAL: Duration = Duration::from_secs(5);

/// The operator adds a prefix no job of the run probes (198.18.0.0/15, RFC 2544's) to the
/// opt-out list; per agent, how long after the write it applied it, as its heartbeat
/// says. Waits at most ten times [`OPT_OUT_GOAL`]: an agent later than that is missing
/// from the figures (`n`), not waited for.
fn opt_out_reach(fleet: &LocalFleet, agents: usize) -> anyhow::Result<Quantiles> {
    use vtnt_fleet::optout::{self, Change};
    let operator = Connect::local(&fleet.broker.name, vtnt_fleet::auth::Role::Operator)?;
    let written_us = vtnt_fleet::now_us();
    let add = optout::parse("198.18.0.0/15")?;
    let revision = optout::update(&operator, &Change::Add(add))?.revision;
    let tenant = fleet.tenant()?;
    let until = Instant::now() + OPT_OUT_GOAL * 10;
    loop {
        let nodes = controller::status(&tenant, TENANT)?.nodes;
        let applied: Vec<f64> = nodes
            .iter()
            .filter(|v| v.info.opt_out.revision >= revision)
            .map(|v| v.info.opt_out.applied_us.saturating_sub(written_us) as f64 / 1e3)
            .collect();
        if applied.len() >= agents || Instant::now() > until {
            return Ok(Quantiles::of(applied));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_take_the_nearest_rank() {
        let q = Quantiles::of((1..=100).map(f64::from).rev().collect());
        assert_eq!(
            (q.n, q.p50, q.p90, q.p99, q.max),
            (100, 50.0, 90.0, 99.0, 100.0)
        );
        let one = Quantiles::of(vec![3.0]);
        assert_eq!((one.p50, one.p99, one.max), (3.0, 3.0, 3.0));
        assert_eq!(Quantiles::of(Vec::new()).n, 0);
    }
}
