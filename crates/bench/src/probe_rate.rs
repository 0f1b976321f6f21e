//! `vtnt bench probe-rate`: the sustained probe rate, pacing and RTTs of the engine and the
//! Linux driver on a namespace topology, with Debian's scamper measured at the same
//! settings in the same run.
//!
//! Topology: vantage — one Linux router — a target namespace that answers pings on every
//! address of 100.64.128.0/17 (an AnyIP local route), so each probe has its own target
//! and reply. Both tools run ping jobs (`count` probes per target, `interval` apart) whose
//! combined demand exceeds the requested rate, so the pacer is what limits them. Both are
//! measured the same way, from their own JSON records: rate = probes sent / (last reply's
//! probe tx - first reply's probe tx); pacing error = |rate - requested| / requested;
//! send gaps = the differences between consecutive answered probes' tx times; RTTs as
//! recorded. vtnt's tx times are the kernel's transmit stamps (taken as the veth takes
//! the packet), unless a row says it ran without them (then they are the times the
//! engine handed the probes out: a batch shares one); scamper's are read before its send
//! call. CPU is the user+system time of the prober (our engine thread, scamper's process).
//!
//! One core: the prober (our thread, scamper's process) is pinned to CPU 0 and, on a
//! machine with more CPUs, every veth of the topology steers its received packets (RPS)
//! to the others. So the router's forwarding, the target's replies and the reception of
//! the replies up to the raw socket's queue run on other cores, as they do on other
//! machines in a real network, and CPU 0 carries only what the prober pays: building,
//! sending (down to the veth), reading and matching.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsFd;
use std::time::Duration;

use vtnt_engine::{Config, Engine, Event, Job, PingOptions};
use vtnt_netns::{Chain, NetNs};
use vtnt_record::Record;

/// One measured configuration.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RateRow {
    pub tool: String,
    /// Probes dated by a kernel transmit stamp (vtnt with stamps on; 0 otherwise).
    pub tx_stamps: u64,
    pub requested_pps: u32,
    pub probes: u64,
    pub replies: u64,
    pub achieved_pps: f64,
    /// |achieved - requested| / requested.
    pub pacing_error: f64,
    /// Median and 99th percentile of the gaps between consecutive sends, microseconds.
    pub gap_p50_us: u64,
    pub gap_p99_us: u64,
    /// Median and 99th percentile RTT, microseconds.
    pub rtt_p50_us: u64,
    pub rtt_p99_us: u64,
    /// Prober CPU seconds per 1,000 probes.
    pub cpu_ms_per_kprobe: f64,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RateOptions {
    /// Rates to request from vtnt.
    pub rates: Vec<u32>,
    /// Seconds of probing at each rate.
    pub seconds: f64,
    /// Probes per target.
    pub count: u16,
    /// Also run vtnt at every rate without transmit stamps (a probe then dated when the
    /// engine handed it out), to see what the stamps cost.
    pub without_tx_stamps: bool,
}

impl Default for RateOptions {
    fn default() -> Self {
        RateOptions {
            rates: vec![10_000, 50_000, 100_000, 150_000],
            seconds: 2.0,
            count: 10,
            without_tx_stamps: false,
        }
    }
}

/// The `q`-quantile of sorted `v` (0 if empty).
fn quantile(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn target(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(100, 64, 128, 0)) + 1 + i)
}

fn rate_of(records: &[Record], requested: u32, label: &str, cpu: f64, tx_stamps: u64) -> RateRow {
    let mut probes = 0u64;
    let mut tx = Vec::new();
    let mut rtt = Vec::new();
    for r in records {
        if let Record::Ping(p) = r {
            probes += p.ping_sent as u64;
            for rep in &p.responses {
                tx.push(rep.tx.as_micros());
                rtt.push(rep.rtt.as_micros() as u64);
            }
        }
    }
    let replies = tx.len() as u64;
    tx.sort_unstable();
    rtt.sort_unstable();
    let span = match (tx.first(), tx.last()) {
        (Some(first), Some(last)) => (last - first) as f64 / 1e6,
        _ => 0.0,
    };
    let achieved = if span > 0.0 {
        (probes.saturating_sub(1)) as f64 / span
    } else {
        0.0
    };
    let mut gaps: Vec<u64> = tx.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_unstable();
    RateRow {
        tool: label.to_string(),
        tx_stamps,
        requested_pps: requested,
        probes,
        replies,
        achieved_pps: achieved,
        pacing_error: (achieved - requested as f64).abs() / requested as f64,
        gap_p50_us: quantile(&gaps, 0.5),
        gap_p99_us: quantile(&gaps, 0.99),
        rtt_p50_us: quantile(&rtt, 0.5),
        rtt_p99_us: quantile(&rtt, 0.99),
        cpu_ms_per_kprobe: if probes > 0 {
            cpu * 1e6 / probes as f64
        } else {
            0.0
        },
    }
}

fn thread_cpu() -> f64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| t.tv_sec() as f64 + t.tv_nsec() as f64 / 1e9)
        .unwrap_or(0.0)
}

/// User + system CPU seconds of every child waited for so far.
fn children_cpu() -> anyhow::Result<f64> {
    let u = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Ok(secs(u.user_time()) + secs(u.system_time()))
}

/// Runs vtnt's engine in a thread of its own inside `ns`, with transmit stamps or not.
fn ours(ns: &NetNs, pps: u32, opts: &RateOptions, tx_stamps: bool) -> anyhow::Result<RateRow> {
    let name = ns.name().to_string();
    let opts = opts.clone();
    std::thread::spawn(move || -> anyhow::Result<RateRow> {
        let f = std::fs::File::open(format!("/run/netns/{name}"))?;
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)?;
        let mut cpu0 = nix::sched::CpuSet::new();
        cpu0.set(PROBER_CPU)?;
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &cpu0)?;
        let targets = ((pps as f64 * opts.seconds) / opts.count as f64).ceil() as u32;
        let mut config = Config::new(Chain::left(0).parse()?);
        config.pps = pps;
        config.burst = (pps / 1000).max(1);
        config.max_active = (targets as usize).min(32_768);
        let mut engine = Engine::new(config).map_err(|e| anyhow::anyhow!("{e}"))?;
        let clock = vtnt_linux::Clock::new();
        let mut sockets = vtnt_linux::RawSockets::open_with(tx_stamps)?;
        anyhow::ensure!(
            sockets.tx_stamps() == tx_stamps,
            "this kernel gives no transmit stamps"
        );
        let now = clock.now();
        for i in 0..targets {
            let mut o = PingOptions::new(IpAddr::V4(target(i)));
            o.count = opts.count;
            o.interval = Duration::from_millis(10);
            o.timeout = Duration::from_millis(500);
            engine
                .start(now, Job::Ping(o))
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        let mut records = Vec::new();
        let cpu0 = thread_cpu();
        vtnt_linux::run(
            &mut engine,
            &mut sockets,
            &clock,
            |Event::Finished { record, .. }| {
                records.push(record);
                Ok(())
            },
        )?;
        let label = if tx_stamps {
            "vtnt"
        } else {
            "vtnt, no tx stamps"
        };
        let cpu = thread_cpu() - cpu0;
        Ok(rate_of(&records, pps, label, cpu, engine.stats().tx_stamps))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("probe thread panicked"))?
}

/// Runs Debian's scamper inside `ns` at `pps` (its ceiling is 10,000).
fn scamper(ns: &NetNs, pps: u32, opts: &RateOptions) -> anyhow::Result<RateRow> {
    let targets = ((pps as f64 * opts.seconds) / opts.count as f64).ceil() as u32;
    let dir = std::env::temp_dir().join(format!("vtnt-rate-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let list = dir.join("targets.txt");
    let mut f = std::fs::File::create(&list)?;
    for i in 0..targets {
        writeln!(f, "{}", target(i))?;
    }
    drop(f);
    let out = dir.join("scamper.json");
    let before = children_cpu()?;
    let mut child = ns
        .command("taskset")
        .args(["-c", &PROBER_CPU.to_string(), "scamper"])
        .args(["-p", &pps.to_string(), "-w", &targets.to_string()])
        .args(["-c", &format!("ping -c {} -i 0.01", opts.count)])
        .args(["-O", "json", "-o"])
        .arg(&out)
        .arg("-f")
        .arg(&list)
        .spawn()?;
    let status = child.wait()?;
    let cpu = children_cpu()? - before;
    anyhow::ensure!(status.success(), "scamper failed: {status}");
    let text = std::fs::read(&out)?;
    let records: Vec<Record> = vtnt_formats::JsonReader::new(&text[..])
        .filter_map(|i| match i {
            Ok(vtnt_formats::Item::Record(r)) => Some(r),
            _ => None,
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(rate_of(&records, pps, "scamper", cpu, 0))
}

/// The CPU the prober runs on.
const PROBER_CPU: usize = 0;

/// Steers every veth's received packets in `nodes` to the CPUs other than [`PROBER_CPU`]
/// (RPS). Returns whether it could (false on a one-CPU machine).
fn steer_network_away(nodes: &[NetNs]) -> anyhow::Result<bool> {
    let cpus = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(64);
    if cpus < 2 {
        return Ok(false);
    }
    let mask: u64 = ((1u128 << cpus) - 1) as u64 & !(1 << PROBER_CPU);
    // `ip netns exec` mounts the namespace's own /sys, where its veths are.
    let script = format!("for q in /sys/class/net/*/queues/rx-*/rps_cpus; do [ -w \"$q\" ] && echo {mask:x} > \"$q\"; done; true");
    for ns in nodes {
        let out = ns.exec("sh", &["-c", &script])?;
        anyhow::ensure!(
            out.status.success(),
            "setting rps_cpus in {}: {}",
            ns.name(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(true)
}

/// Builds the topology, runs scamper at its ceiling (10,000 pps) and vtnt at the same rate
/// and at every requested rate. Needs root and scamper.
pub fn probe_rate(opts: &RateOptions) -> anyhow::Result<Vec<RateRow>> {
    let chain = Chain::build("vpr", 1)?;
    let target_ns = &chain.nodes[2];
    target_ns.ip(&["route", "add", "local", "100.64.128.0/17", "dev", "lo"])?;
    chain.nodes[1].ip(&["route", "add", "100.64.128.0/17", "via", &Chain::right(1)])?;
    for ns in &chain.nodes {
        ns.sysctl("net.ipv4.icmp_msgs_per_sec", "10000000")?;
        ns.sysctl("net.ipv4.icmp_msgs_burst", "10000000")?;
    }
    if !steer_network_away(&chain.nodes)? {
        eprintln!("vtnt bench probe-rate: one CPU only: the topology's packet processing shares the prober's core");
    }
    let mut rows = Vec::new();
    // scamper's usage clamps -p to 1..=10000.
    rows.push(scamper(chain.vantage(), 10_000, opts)?);
    for &pps in &opts.rates {
        rows.push(ours(chain.vantage(), pps, opts, true)?);
        if opts.without_tx_stamps {
            rows.push(ours(chain.vantage(), pps, opts, false)?);
        }
    }
    Ok(rows)
}

/// The rows as a markdown table.
pub fn to_markdown(rows: &[RateRow]) -> String {
    let mut s = String::from(
        "| tool | requested pps | probes | tx stamps | replies | achieved pps | pacing error | send gap p50 / p99 (us) | RTT p50 / p99 (us) | CPU ms / 1k probes |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.0} | {:.2}% | {} / {} | {} / {} | {:.1} |\n",
            r.tool,
            r.requested_pps,
            r.probes,
            r.tx_stamps,
            r.replies,
            r.achieved_pps,
            r.pacing_error * 100.0,
            r.gap_p50_us,
            r.gap_p99_us,
            r.rtt_p50_us,
            r.rtt_p99_us,
            r.cpu_ms_per_kprobe
        ));
    }
    s
}
