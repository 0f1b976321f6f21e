//! `vtnt bench fw-scale`: several firewall NFs at once, seed 002's future work ("a
//! variable number of virtual machines and ... its impact on system performance", with
//! their CPU and RAM). For each runtime and each instance count N: N sender — NF —
//! receiver namespace triplets ([`Bump`], the same addresses in each), N NFs (`vtnt fw
//! run` in that runtime, [`crate::fw_host`]) loading the same generated rule set at once,
//! then every sender replaying its trace ([`crate::fw_nf`]'s, the same flows) at the same
//! time. Per repetition: the wall time until all N forward (started together, each
//! loading its rules), their summed resident and proportional memory once loaded (PSS
//! shares the pages of one binary or VMM between instances), the packets per second summed
//! over the receivers (arrivals over the longest sender's time), the share delivered (of
//! all, and of the least served instance), and the NFs' summed CPU
//! over the replay and its drain, in % of one core.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;
use vtnt_fw::print;
use vtnt_netns::Bump;
use vtnt_runtimes::Runtime;

use crate::fw_host::{self, NfHost, RunningNf};
use crate::fw_nf::{count, rule_set, send, trace};

/// What `vtnt bench fw-scale` measures.
#[derive(Debug, Clone)]
pub struct ScaleOptions {
    /// Instance counts (each at least 1).
    pub instances: Vec<usize>,
    /// The rule count every NF loads.
    pub rules: usize,
    /// The stateful set (the state rule first) instead of the stateless one.
    pub stateful: bool,
    pub reps: usize,
    /// Distinct headers (flows) in each sender's trace.
    pub flows: usize,
    /// Packets each sender sends per repetition.
    pub packets: usize,
    pub seed: u64,
    /// The `vtnt` binary that runs the native NF.
    pub vtnt: std::path::PathBuf,
    pub runtimes: Vec<Runtime>,
    /// Where the rule file goes.
    pub dir: std::path::PathBuf,
    /// Asked between repetitions: true ends the run with an error, everything removed.
    pub interrupted: fn() -> bool,
}

/// One runtime at one instance count, over the repetitions: (mean, sample sd).
#[derive(Debug, Clone, Serialize)]
pub struct ScaleRow {
    pub runtime: &'static str,
    pub accelerator: &'static str,
    pub instances: usize,
    pub rules: usize,
    pub stateful: bool,
    /// From starting the N NFs together until the last forwards (ms).
    pub start_ms: (f64, f64),
    /// The NFs' resident memory, summed (KiB).
    pub rss_kib: (f64, f64),
    /// Their proportional set size, summed (KiB): shared pages counted once overall.
    pub pss_kib: (f64, f64),
    /// Packets per second reaching the N receivers together.
    pub pps: (f64, f64),
    /// Of the packets sent, the share that arrived.
    pub delivered: (f64, f64),
    /// The share the least served instance delivered of its own sender's packets.
    pub delivered_min: (f64, f64),
    /// The NFs' CPU time over the replay and its drain, summed, in % of one core.
    pub cpu_pct: (f64, f64),
}

/// Measures every runtime at every instance count; `each` hears of every row.
pub fn run(opts: &ScaleOptions, mut each: impl FnMut(&ScaleRow)) -> anyhow::Result<Vec<ScaleRow>> {
    if opts.reps == 0 || opts.flows == 0 || opts.packets == 0 || opts.runtimes.is_empty() {
        bail!("--reps, --flows, --packets and --runtimes must be at least 1");
    }
    if opts.instances.is_empty() || opts.instances.contains(&0) {
        bail!("--instances: each count must be at least 1");
    }
    for rt in &opts.runtimes {
        if let Some(what) = fw_host::missing(*rt) {
            bail!(
                "vtnt bench fw-scale --runtimes {}: missing {what}",
                rt.name()
            );
        }
    }
    std::fs::create_dir_all(&opts.dir)
        .with_context(|| format!("creating {}", opts.dir.display()))?;
    let rules = rule_set(opts.rules, opts.stateful, opts.seed);
    let file = opts.dir.join(format!("fw-scale-{}.rules", opts.rules));
    std::fs::write(&file, print::iptables_save(&rules)?)
        .with_context(|| format!("writing {}", file.display()))?;
    let datagrams = trace(rules, opts.rules, opts.stateful, opts.seed, opts.flows)?;
    let most = opts.instances.iter().copied().max().unwrap_or(1);
    let bumps = (0..most)
        .map(|_| Bump::build("fws", "100.64.6"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rows = Vec::new();
    for &rt in &opts.runtimes {
        let hosts = (bumps.iter())
            .map(|b| NfHost::new(rt, b.nf.name(), &opts.vtnt))
            .collect::<anyhow::Result<Vec<_>>>()?;
        for &n in &opts.instances {
            let mut m = vec![Vec::new(); 7];
            for _ in 0..opts.reps {
                if (opts.interrupted)() {
                    let _ = std::fs::remove_file(&file);
                    bail!("interrupted at {n} instances: namespaces and rule file removed");
                }
                let got = rep(&bumps[..n], &hosts[..n], opts, &file, &datagrams)?;
                for (v, x) in m.iter_mut().zip(got) {
                    v.push(x);
                }
            }
            let ms = |v: &[f64]| vtnt_stats::mean_sd(v).unwrap_or((f64::NAN, f64::NAN));
            let row = ScaleRow {
                runtime: rt.name(),
                accelerator: fw_host::accelerator(rt),
                instances: n,
                rules: opts.rules,
                stateful: opts.stateful,
                start_ms: ms(&m[0]),
                rss_kib: ms(&m[1]),
                pss_kib: ms(&m[2]),
                pps: ms(&m[3]),
                delivered: ms(&m[4]),
                delivered_min: ms(&m[5]),
                cpu_pct: ms(&m[6]),
            };
            each(&row);
            rows.push(row);
        }
    }
    let _ = std::fs::remove_file(&file);
    Ok(rows)
}

/// One repetition of `hosts.len()` NFs at once: start ms, RSS and PSS KiB, pps,
/// delivered share, the least served instance's, CPU %.
fn rep(
    bumps: &[Bump],
    hosts: &[NfHost],
    opts: &ScaleOptions,
    file: &std::path::Path,
    datagrams: &Arc<Vec<Vec<u8>>>,
) -> anyhow::Result<[f64; 7]> {
    let t = Instant::now();
    let nfs: Vec<RunningNf> = std::thread::scope(|s| {
        let started: Vec<_> = (hosts.iter())
            .map(|h| s.spawn(move || h.start(file)))
            .collect();
        (started.into_iter())
            .map(|h| h.join().unwrap_or_else(|_| bail!("an NF's start panicked")))
            .collect::<anyhow::Result<Vec<_>>>()
    })?;
    let start_ms = t.elapsed().as_secs_f64() * 1e3;
    let pids = nfs
        .iter()
        .map(RunningNf::pid)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let rss: u64 = pids.iter().map(|&p| vtnt_measure::proc::rss_kib(p)).sum();
    let pss: u64 = pids.iter().map(|&p| vtnt_measure::proc::pss_kib(p)).sum();
    let cpu = |pids: &[u32]| -> u64 { pids.iter().map(|&p| vtnt_measure::proc::cpu_ns(p)).sum() };
    let stop = Arc::new(AtomicBool::new(false));
    let counters = (bumps.iter())
        .map(|b| count(&b.receiver, stop.clone()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (cpu0, t) = (cpu(&pids), Instant::now());
    let took = std::thread::scope(|s| {
        let senders: Vec<_> = (bumps.iter())
            .map(|b| s.spawn(move || send(&b.sender, datagrams.clone(), opts.packets)))
            .collect();
        (senders.into_iter())
            .map(|h| h.join().unwrap_or_else(|_| bail!("a sender panicked")))
            .collect::<anyhow::Result<Vec<Duration>>>()
    });
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let each: Vec<u64> = counters
        .into_iter()
        .map(|c| c.join().unwrap_or(0))
        .collect();
    let arrived: u64 = each.iter().sum();
    let least = each.iter().copied().min().unwrap_or(0);
    // as `vtnt bench fw`'s column: over the replay and its drain (what the NFs still
    // forwarded after the senders ended)
    let busy = cpu(&pids).saturating_sub(cpu0) as f64 / 1e9 / t.elapsed().as_secs_f64();
    drop(nfs);
    let longest = took?.into_iter().max().unwrap_or_default().as_secs_f64();
    let sent = (opts.packets * bumps.len()) as f64;
    Ok([
        start_ms,
        rss as f64,
        pss as f64,
        arrived as f64 / longest,
        arrived as f64 / sent,
        least as f64 / opts.packets as f64,
        100.0 * busy,
    ])
}

/// The rows as a table, each row's packet rate also against its runtime's single NF.
pub fn table(rows: &[ScaleRow]) -> String {
    let mut t = String::from(
        "runtime        accelerator                  NFs  rules     mode       start ms (sd)      RSS KiB (sd)       PSS KiB (sd)       packets/s (sd)        of 1 NF  delivered  least  CPU % (sd)\n",
    );
    for r in rows {
        let one = (rows.iter())
            .find(|z| z.instances == 1 && z.runtime == r.runtime)
            .map_or(f64::NAN, |z| z.pps.0);
        t.push_str(&format!(
            "{:<14} {:<28} {:>3}  {:<9} {:<10} {:>8.1} ({:>6.1}) {:>9.0} ({:>6.0}) {:>9.0} ({:>6.0}) {:>10.0} ({:>8.0}) {:>7.2}x {:>9.1}% {:>5.1}% {:>5.0} ({:>4.0})\n",
            r.runtime,
            r.accelerator,
            r.instances,
            r.rules,
            if r.stateful { "stateful" } else { "stateless" },
            r.start_ms.0,
            r.start_ms.1,
            r.rss_kib.0,
            r.rss_kib.1,
            r.pss_kib.0,
            r.pss_kib.1,
            r.pps.0,
            r.pps.1,
            r.pps.0 / one,
            100.0 * r.delivered.0,
            100.0 * r.delivered_min.0,
            r.cpu_pct.0,
            r.cpu_pct.1,
        ));
    }
    t
}
