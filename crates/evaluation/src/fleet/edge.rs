//! `vtnt bench fleet-scale`'s etiquette phase: the fleet-wide rate limit measured at the
//! lab's edge (issue 42). Every agent gets one job toward one lab destination, together
//! asking ten times the per-prefix limit; a capture on the lab's TUN (in the lab's
//! namespace, where every probe of every agent enters the lab) counts the echo requests
//! toward that /24 per 1-s window. Once with no limit (the peer), once with the limit
//! set ([`vtnt_fleet::rate`]); the limit is removed again after.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use vtnt_fleet::replay::{self, ReplayOptions, ReplayStats};
use vtnt_fleet::Connect;
use vtnt_linux::host_stamps::{Background, Side};

use super::local::LocalFleet;

/// The lab's TUN in its namespace (as `vtnt bench rtt`'s lab-side capture).
const LAB_TUN: &str = "vtnt0";
/// The destination every job pings: the lab's, as the scale run's default job.
pub const EDGE_TARGET: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// How long each job runs at the rate it asks, seconds.
const JOB_SECONDS: u32 = 3;
/// How much more than the limit the jobs ask together.
const OVER: u32 = 10;

/// One round: the jobs, and the probes toward the prefix per 1-s window at the edge.
#[derive(Debug, Clone, Serialize)]
pub struct EdgeRound {
    /// The per-prefix limit (`None`: the peer, no limit).
    pub limit_pps: Option<u32>,
    /// What the jobs asked, pps in all.
    pub asked_pps: u32,
    pub jobs: usize,
    /// Jobs that ran to the end / were refused (the limit all leased for too long).
    pub ok: usize,
    pub refused: usize,
    /// Echo requests toward the prefix the capture saw.
    pub probes: usize,
    /// Per 1-s window from the first probe to the last: the most and the mean.
    pub max_pps: u32,
    pub mean_pps: f64,
    pub windows: usize,
    /// Packets the capture's ring lost.
    pub capture_drops: u64,
    pub seconds: f64,
}

/// Both rounds.
#[derive(Debug, Clone, Serialize)]
pub struct EdgeReport {
    pub target: Ipv4Addr,
    pub unlimited: EdgeRound,
    pub limited: EdgeRound,
}

impl EdgeReport {
    pub fn markdown(&self, agents: usize) -> String {
        let mut s = format!(
            "\nFleet-wide rate limit at the lab's edge: {agents} agents, one job each pinging {} (its /24), together asking {}x the limit; echo requests toward the /24 per 1-s window, counted on the lab's TUN:\n\n| limit pps | asked pps | jobs ok / refused | probes | max pps | mean pps | windows | capture drops |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
            self.target, OVER
        );
        for r in [&self.unlimited, &self.limited] {
            s.push_str(&format!(
                "| {} | {} | {} / {} | {} | {} | {:.1} | {} | {} |\n",
                r.limit_pps
                    .map_or("none (peer)".to_string(), |l| l.to_string()),
                r.asked_pps,
                r.ok,
                r.refused,
                r.probes,
                r.max_pps,
                r.mean_pps,
                r.windows,
                r.capture_drops
            ));
        }
        s
    }
}

/// The per-1-s-window counts of echo requests toward `target`'s /24 among `frames`'
/// (stamp, IP packet): the most and the mean from the first window to the last, and how
/// many windows and probes.
pub fn windows<'a>(
    frames: impl Iterator<Item = (u64, &'a [u8])>,
    target: Ipv4Addr,
) -> (u32, f64, usize, usize) {
    let prefix = &target.octets()[..3];
    let stamps: Vec<u64> = frames
        .filter(|(_, p)| {
            p.len() >= 28
                && p[0] >> 4 == 4
                && p[9] == 1
                && &p[16..19] == prefix
                && p[usize::from(p[0] & 0xf) * 4] == 8
        })
        .map(|(t, _)| t)
        .collect();
    let (Some(first), Some(last)) = (stamps.iter().min(), stamps.iter().max()) else {
        return (0, 0.0, 0, 0);
    };
    let n = ((last - first) / 1_000_000_000) as usize + 1;
    let mut counts = vec![0u32; n];
    for t in &stamps {
        counts[((t - first) / 1_000_000_000) as usize] += 1;
    }
    let max = counts.iter().copied().max().unwrap_or(0);
    (max, stamps.len() as f64 / n as f64, n, stamps.len())
}

/// Both rounds with `agents` agents of `fleet` (their nodes in `nodes_file`), against
/// lab `lab`, under a per-prefix limit of `limit` pps; files go to `dir`.
pub fn measure(
    fleet: &LocalFleet,
    tenant: &str,
    nodes_file: &Path,
    agents: usize,
    lab: &str,
    limit: u32,
    dir: &Path,
) -> anyhow::Result<EdgeReport> {
    anyhow::ensure!(limit >= 1, "--edge-limit: at least 1 probe per second");
    let operator = Connect::local(&fleet.broker.name, vtnt_fleet::auth::Role::Operator)?;
    let connect = fleet.tenant()?;
    let netns = Path::new("/run/netns").join(lab);
    // each job's share of ten times the limit, at least 1 pps
    let pps = (OVER * limit).div_ceil(agents as u32).max(1);
    let round = |limit_pps: Option<u32>| -> anyhow::Result<EdgeRound> {
        vtnt_measure::stop::check()?;
        vtnt_fleet::rate::set(&operator, Some(limit_pps), Some(None))?;
        let word = limit_pps.map_or("unlimited".to_string(), |l| format!("limit{l}"));
        let job = format!(
            "ping -c {} -i {:.4} -p {pps} {EDGE_TARGET}",
            pps * JOB_SECONDS,
            1.0 / f64::from(pps)
        );
        let events: String = (0..agents)
            .map(|k| format!("{:.3} any native wait {job}\n", k as f64 * 0.005))
            .collect();
        let events_file = dir.join(format!("edge-{word}.txt"));
        std::fs::write(&events_file, events)?;
        let capture = Background::start(&netns, LAB_TUN, Side::SharedNamespace)
            .with_context(|| format!("capturing on {LAB_TUN} in {}", netns.display()))?;
        let t0 = std::time::Instant::now();
        let (mut ok, mut refused) = (0, 0);
        let st: anyhow::Result<ReplayStats> = replay::replay(
            &connect,
            nodes_file,
            &events_file,
            &ReplayOptions {
                tenant: tenant.into(),
                results_timeout: vtnt_fleet::rate::WAIT + Duration::from_secs(120),
            },
            |r| {
                match r.summary.as_ref().map(|s| s.status) {
                    Some(vtnt_fleet::proto::JobStatus::Ok) => ok += 1,
                    Some(vtnt_fleet::proto::JobStatus::Refused) => refused += 1,
                    _ => {}
                }
                Ok::<(), anyhow::Error>(())
            },
        );
        let seconds = t0.elapsed().as_secs_f64();
        let taken = capture.finish().context("reading the lab-side capture")?;
        let st = st?;
        let (max_pps, mean_pps, windows, probes) = windows(
            taken
                .frames
                .iter()
                .map(|f| (f.stamp_ns, f.packet.as_slice())),
            EDGE_TARGET,
        );
        Ok(EdgeRound {
            limit_pps,
            asked_pps: pps * agents as u32,
            jobs: st.events,
            ok,
            refused,
            probes,
            max_pps,
            mean_pps,
            windows,
            capture_drops: taken.drops,
            seconds,
        })
    };
    let rounds = round(None).and_then(|peer| Ok((peer, round(Some(limit))?)));
    // the rest of the run unlimited, however the rounds went
    vtnt_fleet::rate::set(&operator, Some(None), Some(None))?;
    let (unlimited, limited) = rounds?;
    Ok(EdgeReport {
        target: EDGE_TARGET,
        unlimited,
        limited,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(dst: [u8; 4], kind: u8) -> Vec<u8> {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[9] = 1;
        p[16..20].copy_from_slice(&dst);
        p[20] = kind;
        p
    }

    #[test]
    fn probes_toward_the_prefix_are_counted_per_second() {
        let req = echo([192, 0, 2, 9], 8);
        let other = echo([198, 51, 100, 1], 8);
        let reply = echo([192, 0, 2, 9], 0);
        let s = 1_000_000_000u64;
        let frames = [
            (10 * s, &req),
            (10 * s + 1, &req),
            (10 * s + 2, &other),
            (10 * s + 3, &reply),
            (11 * s + 5, &req),
            (12 * s + 7, &req),
            (12 * s + 8, &req),
            (12 * s + 9, &req),
        ];
        let (max, mean, n, probes) = windows(
            frames.iter().map(|(t, p)| (*t, p.as_slice())),
            Ipv4Addr::new(192, 0, 2, 1),
        );
        assert_eq!((max, n, probes), (3, 3, 6));
        assert!((mean - 2.0).abs() < 1e-9, "{mean}");
    }
}
