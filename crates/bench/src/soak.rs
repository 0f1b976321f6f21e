//! `soak`: large campaigns run again and again, counting the runs that never end (issue
//! 12, finding 12: one trace in 100,000 never finished and `vtnt trace` waited forever).
//!
//! Each run is `vtnt trace -P icmp-paris -q 1 -w 1` over `targets` targets (the lab's
//! destinations repeated), driven the way the Linux driver drives the engine: per round
//! the clock is read, deadlines handled and probes sent, then the replies that arrived are
//! handed in with their arrival times. The clock is read a seeded, random lag after the
//! replies were read (up to `lag_us`, the time a loaded process spends descheduled), so
//! replies arrive dated before the engine's latest `now`, as kernel receive timestamps do.
//! The network is the in-process reference lab ([`vtnt_lab::Lab`], its routers' ICMP rate
//! limits included) under a virtual clock; on top, a seeded share `loss` of replies is
//! lost. A run that is not idle `deadline_secs` (virtual) after its start, or whose
//! engine fails [`Engine::check`], did not end; its seed reproduces it.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;
use vtnt_engine::{Engine, Instant, Measurement, Method, TraceOptions, MAX_PROBE_SIZE};
use vtnt_lab::{Lab, Topology};

use crate::drive::DriveError;

/// What to soak.
#[derive(Debug, Clone, Serialize)]
pub struct SoakOptions {
    pub runs: usize,
    /// Traces per run.
    pub targets: usize,
    pub pps: u32,
    /// Traces probing at once (`--window`).
    pub window: usize,
    /// Virtual seconds after which a run that is still busy counts as not ended.
    pub deadline_secs: u64,
    /// Seed of the first run; run `k` uses `seed + k`.
    pub seed: u64,
    /// Largest lag of the driver's clock behind the replies it reads, microseconds.
    pub lag_us: u64,
    /// Share of replies lost on top of the lab's rate limits.
    pub loss: f64,
}

impl SoakOptions {
    /// `runs` runs of the reported campaign: 100,000 targets at 50,000 pps, window 1000.
    pub fn new(runs: usize, seed: u64) -> SoakOptions {
        SoakOptions {
            runs,
            targets: 100_000,
            pps: 50_000,
            window: 1000,
            deadline_secs: 600,
            seed,
            lag_us: 1000,
            loss: 0.02,
        }
    }
}

/// One run.
#[derive(Debug, Clone, Serialize)]
pub struct SoakRun {
    pub seed: u64,
    pub ended: bool,
    /// Traces written.
    pub traces: usize,
    /// Virtual time from start to idle (or to the deadline), seconds.
    pub virtual_secs: f64,
    /// Why the run did not end, when the engine's bookkeeping says so.
    pub stranded: Option<String>,
}

/// Every run of a soak.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    pub options: SoakOptions,
    pub runs: Vec<SoakRun>,
    /// Wall-clock seconds the whole soak took.
    pub wall_secs: f64,
}

impl SoakReport {
    /// Runs that did not end.
    pub fn stuck(&self) -> impl Iterator<Item = &SoakRun> {
        self.runs.iter().filter(|r| !r.ended)
    }

    /// The table docs/benchmarks.md quotes, and the seeds of the runs that did not end.
    pub fn to_markdown(&self) -> String {
        let o = &self.options;
        let (median, max) = median_max(self.runs.iter().map(|r| r.virtual_secs));
        let ended = self.runs.iter().filter(|r| r.ended).count();
        let traces: Vec<usize> = self.runs.iter().map(|r| r.traces).collect();
        let (tmin, tmax) = (
            traces.iter().min().copied().unwrap_or(0),
            traces.iter().max().copied().unwrap_or(0),
        );
        let mut s = format!(
            "Soak: {} runs x {} targets, {} pps, window {}, lag <= {} us, {:.1}% extra loss, \
             deadline {} s (virtual), seeds {}..={}; {:.1} s wall\n\n",
            o.runs,
            o.targets,
            o.pps,
            o.window,
            o.lag_us,
            o.loss * 100.0,
            o.deadline_secs,
            o.seed,
            o.seed.wrapping_add((o.runs as u64).saturating_sub(1)),
            self.wall_secs
        );
        s.push_str(
            "| runs | ended | did not end | median run time | max run time | traces per run |\n",
        );
        s.push_str("|---:|---:|---:|---:|---:|---:|\n");
        let per_run = if tmin == tmax {
            tmin.to_string()
        } else {
            format!("{tmin}..{tmax}")
        };
        s.push_str(&format!(
            "| {} | {ended} | {} | {median:.1} s | {max:.1} s | {per_run} |\n",
            self.runs.len(),
            self.runs.len() - ended,
        ));
        for r in self.stuck() {
            s.push_str(&format!(
                "\ndid not end: seed {} ({} of {} traces{})",
                r.seed,
                r.traces,
                o.targets,
                r.stranded
                    .as_deref()
                    .map(|w| format!("; {w}"))
                    .unwrap_or_default()
            ));
        }
        if self.stuck().next().is_some() {
            s.push('\n');
        }
        s
    }
}

/// The median and the largest of run times (0 for none).
pub(crate) fn median_max(times: impl Iterator<Item = f64>) -> (f64, f64) {
    let mut t: Vec<f64> = times.collect();
    t.sort_by(f64::total_cmp);
    (
        t.get(t.len() / 2).copied().unwrap_or(0.0),
        t.last().copied().unwrap_or(0.0),
    )
}

/// Runs the soak: every run on a fresh engine and a fresh reference lab.
pub fn soak(o: &SoakOptions) -> Result<SoakReport, DriveError> {
    let started = std::time::Instant::now();
    let mut runs = Vec::with_capacity(o.runs);
    for k in 0..o.runs as u64 {
        runs.push(soak_run(o, o.seed.wrapping_add(k))?);
    }
    Ok(SoakReport {
        options: o.clone(),
        runs,
        wall_secs: started.elapsed().as_secs_f64(),
    })
}

/// Uniform 64-bit draw number `k` of stream `seed` (the same binary draws the same).
fn draw(seed: u64, stream: u8, k: u64) -> u64 {
    let mut h = DefaultHasher::new();
    (seed, stream, k).hash(&mut h);
    h.finish()
}

/// Drivers check the engine's bookkeeping every this many rounds (a stranded
/// measurement stays stranded, so it is still caught).
const CHECK_EVERY: u64 = 256;

/// One campaign with seed `seed`.
pub fn soak_run(o: &SoakOptions, seed: u64) -> Result<SoakRun, DriveError> {
    let mut lab = Lab::new(Topology::reference());
    let vp = lab
        .vantage_points()
        .into_iter()
        .next()
        .ok_or(DriveError::NoVantagePoint)?;
    let dsts: Vec<IpAddr> = lab
        .truth()
        .destinations
        .iter()
        .map(|d| IpAddr::V4(d.dst))
        .collect();
    if dsts.is_empty() {
        return Err(DriveError::Config("the topology has no destination".into()));
    }
    // As `vtnt trace` configures it (crates/cli/src/probe.rs).
    let mut config = vtnt_engine::Config::new(vp.addr);
    config.pps = o.pps;
    config.burst = (o.pps / 1000).max(1);
    config.seed = seed;
    config.max_active = o.window;
    let mut engine = Engine::new(config).map_err(|e| DriveError::Config(e.to_string()))?;
    let start = Instant::from_millis(1_700_000_000_000);
    for i in 0..o.targets {
        let mut t = TraceOptions::new(dsts[i % dsts.len()]).with_method(Method::IcmpParis);
        t.attempts = 1;
        t.wait = Duration::from_secs(1);
        t.userid = i as u32;
        engine
            .start(start, Measurement::Trace(t))
            .map_err(|e| DriveError::Config(e.to_string()))?;
    }
    let give_up = start + Duration::from_secs(o.deadline_secs);
    let mut tx = vec![0u8; MAX_PROBE_SIZE as usize];
    let mut rx = vec![0u8; 2048];
    let (mut traces, mut round, mut replies) = (0usize, 0u64, 0u64);
    let mut read_at = start;
    loop {
        round += 1;
        let lag = draw(seed, 0, round) % (o.lag_us + 1);
        let now = read_at + Duration::from_micros(lag);
        engine.handle_timeout(now);
        while let Some(t) = engine.poll_transmit(now, &mut tx) {
            lab.handle_packet(now, vp.port, &tx[..t.len]);
        }
        while engine.poll_event().is_some() {
            traces += 1;
        }
        let stranded = if round.is_multiple_of(CHECK_EVERY) || now > give_up {
            engine.check().err().map(|e| e.to_string())
        } else {
            None
        };
        let ended = engine.is_idle();
        if ended || now > give_up || stranded.is_some() {
            return Ok(SoakRun {
                seed,
                ended,
                traces,
                virtual_secs: now.saturating_since(start).as_secs_f64(),
                stranded,
            });
        }
        // As the Linux loop: sleep until the engine's deadline, at most 1 s; a sleep of
        // 1 ms or more ends at the first reply.
        let cap = now + Duration::from_secs(1);
        let mut wake = engine.poll_timeout().map_or(cap, |t| t.clamp(now, cap));
        if wake >= now + Duration::from_millis(1) {
            if let Some(a) = lab.poll_timeout() {
                wake = wake.min(a.max(now));
            }
        }
        read_at = wake;
        while let Some(due) = lab.poll_timeout().filter(|&t| t <= read_at) {
            let Some((port, len)) = lab.poll_transmit(due, &mut rx) else {
                break;
            };
            replies += 1;
            let lost = (draw(seed, 1, replies) >> 11) as f64 / (1u64 << 53) as f64 <= o.loss;
            if port == vp.port && !lost {
                engine.handle_packet(due, &rx[..len]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_soak_ends_and_reports() {
        let mut o = SoakOptions::new(3, 7);
        o.targets = 2_000;
        let r = soak(&o).unwrap();
        assert_eq!(r.runs.len(), 3);
        for run in &r.runs {
            assert!(
                run.ended,
                "seed {} did not end: {:?}",
                run.seed, run.stranded
            );
            assert_eq!(run.traces, 2_000);
        }
        let md = r.to_markdown();
        assert!(md.contains("| 3 | 3 | 0 |"), "{md}");
    }
}
