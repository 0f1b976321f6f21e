//! An in-process, virtual-clock driver: a [`TntRunner`] wired to a [`Lab`], time jumping
//! from one deadline to the next. Deterministic and rootless; a campaign over a whole
//! lab topology runs in milliseconds of real time.

use std::net::IpAddr;

use vtnt_engine::{Config, Engine, Instant, MAX_PROBE_SIZE};
use vtnt_lab::{Lab, Port};
use vtnt_tnt::{Summary, Tnt, TntConfig, TntResult, TntRunner};

/// What a campaign on the lab produced.
#[derive(Debug)]
pub struct LabRun {
    pub results: Vec<TntResult>,
    pub summary: Summary,
    /// Probes the engine sent.
    pub probes_sent: u64,
    /// Virtual time the campaign took, in microseconds.
    pub virtual_us: u64,
}

/// Why a lab campaign could not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriveError {
    /// The lab has no vantage point.
    NoVantagePoint,
    /// The engine or TNT refused its configuration.
    Config(String),
    /// The campaign was still running after the step limit (a driver or engine bug).
    Stuck { steps: u64, results: usize },
}

impl std::fmt::Display for DriveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriveError::NoVantagePoint => f.write_str("the topology has no vantage point"),
            DriveError::Config(e) => write!(f, "configuration refused: {e}"),
            DriveError::Stuck { steps, results } => {
                write!(
                    f,
                    "campaign still running after {steps} steps ({results} results)"
                )
            }
        }
    }
}

impl std::error::Error for DriveError {}

/// Engine settings for lab runs: fast (the clock is virtual) and seeded.
pub fn lab_engine_config(src: std::net::Ipv4Addr, seed: u64) -> Config {
    let mut c = Config::new(src);
    c.pps = 10_000;
    c.burst = 100;
    c.seed = seed;
    c
}

/// Runs TNT from the lab's first vantage point towards `targets`.
pub fn run_tnt(
    lab: &mut Lab,
    targets: &[IpAddr],
    config: TntConfig,
    engine_seed: u64,
) -> Result<LabRun, DriveError> {
    let vp = lab
        .vantage_points()
        .into_iter()
        .next()
        .ok_or(DriveError::NoVantagePoint)?;
    let mut engine = Engine::new(lab_engine_config(vp.addr, engine_seed))
        .map_err(|e| DriveError::Config(e.to_string()))?;
    // IPv6 targets from the vantage point's twin (the lab is dual stack)
    let (v4, v6) = (
        IpAddr::V4(vp.addr),
        IpAddr::V6(vtnt_lab::addr::to_v6(vp.addr)),
    );
    engine.set_source_lookup(Box::new(move |dst| Ok(if dst.is_ipv6() { v6 } else { v4 })));
    let tnt = Tnt::new(config).map_err(|e| DriveError::Config(e.to_string()))?;
    let mut runner = TntRunner::new(engine, tnt);
    for &t in targets {
        runner.add_target(t);
    }
    let start = Instant::from_millis(1_000);
    let mut now = start;
    let mut tx = vec![0u8; MAX_PROBE_SIZE as usize];
    let mut rx = vec![0u8; 2048];
    let mut results = Vec::new();
    let port: Port = vp.port;
    let max_steps = 50_000_000u64;
    for _ in 0..max_steps {
        while let Some(t) = runner.poll_transmit(now, &mut tx) {
            lab.handle_packet(now, port, &tx[..t.len]);
        }
        while let Some((p, len)) = lab.poll_transmit(now, &mut rx) {
            if p == port {
                runner.handle_packet(now, &rx[..len]);
            }
        }
        runner.handle_timeout(now);
        results.extend(std::iter::from_fn(|| runner.poll_result()));
        if runner.is_idle() && lab.poll_timeout().is_none() {
            return Ok(LabRun {
                results,
                summary: runner.summary(),
                probes_sent: runner.stats().probes_sent,
                virtual_us: now.as_micros() - start.as_micros(),
            });
        }
        let next = [runner.poll_timeout(), lab.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        now = match next {
            Some(t) if t > now => t,
            _ => now + std::time::Duration::from_micros(1),
        };
    }
    Err(DriveError::Stuck {
        steps: max_steps,
        results: results.len(),
    })
}
