//! `vtnt bench probe-rate`: the sustained probe rate, pacing and RTTs of the engine and the
//! Linux driver on a namespace topology, with Debian's scamper measured at the same
//! settings in the same run.
//!
//! Topology: vantage — one Linux router — a target namespace that answers pings on every
//! address of 100.64.128.0/17 (an AnyIP local route), so each probe has its own target
//! and reply. Both tools run ping jobs (`count` probes per target, `interval` apart) whose
//! combined demand exceeds the requested rate, so the pacer is what limits them.
//!
//! Both are measured the same way twice. From their own JSON records: rate = probes sent /
//! (last reply's probe tx - first reply's probe tx); pacing error = |rate - requested| /
//! requested; send gaps = the differences between consecutive answered probes' tx times;
//! RTTs as recorded. vtnt's tx times are the kernel's transmit stamps (taken as the veth
//! takes the packet), unless a row says it ran without them (then they are the times the
//! engine handed the probes out: a batch shares one); scamper's are read before its send
//! call. And at the wire: the router captures every probe arriving on its interface facing
//! the vantage point, answered or not, with the kernel's receive stamps ([`vtnt_linux::capture`],
//! on a thread in the router's namespace): wire rate = (seen - 1) / (last - first arrival),
//! its error against the request, and the burstiness: the most probes arriving within any
//! 1 ms against the requested rate's 1 ms worth. A row says how many packets the capture
//! itself lost. CPU is the user+system time of the prober (our engine thread, scamper's
//! process).
//!
//! One core: the prober (our thread, scamper's process) is pinned to CPU 0 and, on a
//! machine with more CPUs, every veth of the topology steers its received packets (RPS)
//! to the others, where the capture thread runs too. So the router's forwarding, the
//! capture, the target's replies and the reception of the replies up to the raw socket's
//! queue run on other cores, as they do on other machines in a real network, and CPU 0
//! carries only what the prober pays: building, sending (down to the veth), reading and
//! matching.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use nix::sched::CpuSet;
use vtnt_engine::{Config, Engine, Event, Measurement, PingOptions};
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
    /// Probes the router saw arrive, answered or not.
    pub wire_probes: u64,
    /// Packets the router's capture lost (the kernel's count): when not 0, the wire
    /// figures miss that many.
    pub wire_drops: u64,
    /// (wire probes - 1) / (last - first arrival).
    pub wire_pps: f64,
    /// |wire - requested| / requested.
    pub wire_error: f64,
    /// The most probes arriving within any 1 ms.
    pub burst_1ms: u64,
    /// What 1 ms holds at the requested rate.
    pub burst_expected: f64,
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

/// The rate of `n` probes spread over `span` seconds (n - 1 intervals); 0 without a span.
fn per_second(n: u64, span: f64) -> f64 {
    if span > 0.0 {
        n.saturating_sub(1) as f64 / span
    } else {
        0.0
    }
}

/// |rate - requested| / requested.
fn pacing_error(rate: f64, requested: u32) -> f64 {
    (rate - requested as f64).abs() / requested as f64
}

/// The most of the sorted `stamps` within any `window` that starts at one of them:
/// max over i of #{ j : t_i <= t_j < t_i + window }.
fn most_within(stamps: &[u64], window: u64) -> u64 {
    let mut end = 0;
    let mut most = 0;
    for (i, &t) in stamps.iter().enumerate() {
        while end < stamps.len() && stamps[end] < t.saturating_add(window) {
            end += 1;
        }
        most = most.max(end - i);
    }
    most as u64
}

/// Whether `packet` (from its IPv4 header on) is an ICMP echo request from `src`.
fn is_probe(packet: &[u8], src: Ipv4Addr) -> bool {
    let Some(&first) = packet.first() else {
        return false;
    };
    let ihl = (first & 0x0f) as usize * 4;
    first >> 4 == 4
        && ihl >= 20
        && packet.get(9) == Some(&1)
        && packet.get(12..16) == Some(&src.octets()[..])
        && packet.get(ihl) == Some(&8)
}

fn target(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(100, 64, 128, 0)) + 1 + i)
}

/// What one tool's run left: its records and the prober's CPU seconds.
struct Run {
    tool: &'static str,
    records: Vec<Record>,
    cpu: f64,
    tx_stamps: u64,
}

/// What the router saw of one run: its probes' arrival stamps (ns) and the packets its
/// capture lost.
struct Wire {
    stamps: Vec<u64>,
    drops: u64,
}

fn rate_of(run: &Run, requested: u32, mut wire: Wire) -> RateRow {
    let mut probes = 0u64;
    let mut tx = Vec::new();
    let mut rtt = Vec::new();
    for r in &run.records {
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
    let achieved = per_second(probes, span);
    let mut gaps: Vec<u64> = tx.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_unstable();
    wire.stamps.sort_unstable();
    let wire_span = match (wire.stamps.first(), wire.stamps.last()) {
        (Some(first), Some(last)) => (last - first) as f64 / 1e9,
        _ => 0.0,
    };
    let wire_pps = per_second(wire.stamps.len() as u64, wire_span);
    RateRow {
        tool: run.tool.to_string(),
        tx_stamps: run.tx_stamps,
        requested_pps: requested,
        probes,
        replies,
        achieved_pps: achieved,
        pacing_error: pacing_error(achieved, requested),
        wire_probes: wire.stamps.len() as u64,
        wire_drops: wire.drops,
        wire_pps,
        wire_error: pacing_error(wire_pps, requested),
        burst_1ms: most_within(&wire.stamps, 1_000_000),
        burst_expected: requested as f64 / 1000.0,
        gap_p50_us: quantile(&gaps, 0.5),
        gap_p99_us: quantile(&gaps, 0.99),
        rtt_p50_us: quantile(&rtt, 0.5),
        rtt_p99_us: quantile(&rtt, 0.99),
        cpu_ms_per_kprobe: if probes > 0 {
            run.cpu * 1e6 / probes as f64
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

/// Moves the calling thread into namespace `ns` and onto `cpus`.
fn enter(ns: &str, cpus: &CpuSet) -> anyhow::Result<()> {
    let f = std::fs::File::open(format!("/run/netns/{ns}"))?;
    nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), cpus)?;
    Ok(())
}

/// Runs vtnt's engine in a thread of its own inside `ns`, with transmit stamps or not.
fn ours(ns: &NetNs, pps: u32, opts: &RateOptions, tx_stamps: bool) -> anyhow::Result<Run> {
    let name = ns.name().to_string();
    let opts = opts.clone();
    std::thread::spawn(move || -> anyhow::Result<Run> {
        let mut cpu0 = CpuSet::new();
        cpu0.set(PROBER_CPU)?;
        enter(&name, &cpu0)?;
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
                .start(now, Measurement::Ping(o))
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
        Ok(Run {
            tool: if tx_stamps {
                "vtnt"
            } else {
                "vtnt, no tx stamps"
            },
            records,
            cpu: thread_cpu() - cpu0,
            tx_stamps: engine.stats().tx_stamps,
        })
    })
    .join()
    .map_err(|_| anyhow::anyhow!("probe thread panicked"))?
}

/// Runs Debian's scamper inside `ns` at `pps` (its ceiling is 10,000).
fn scamper(ns: &NetNs, pps: u32, opts: &RateOptions) -> anyhow::Result<Run> {
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
    Ok(Run {
        tool: "scamper",
        records,
        cpu,
        tx_stamps: 0,
    })
}

/// The CPU the prober runs on.
const PROBER_CPU: usize = 0;

/// The router's interface facing the vantage point ([`Chain`] names it so).
const ROUTER_WEST: &str = "west";

/// How long the capture goes on after the prober is done: the last probes' blocks are
/// handed over within the ring's 5 ms.
const CAPTURE_GRACE: Duration = Duration::from_millis(100);

/// The CPUs other than [`PROBER_CPU`] (at most 64), or none on a one-CPU machine.
fn other_cpus() -> anyhow::Result<Option<CpuSet>> {
    let cpus = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(64);
    if cpus < 2 {
        return Ok(None);
    }
    let mut set = CpuSet::new();
    for cpu in (0..cpus).filter(|&c| c != PROBER_CPU) {
        set.set(cpu)?;
    }
    Ok(Some(set))
}

/// Steers every veth's received packets in `nodes` to `cpus` (RPS).
fn steer_network(nodes: &[NetNs], cpus: &CpuSet) -> anyhow::Result<()> {
    let mut mask = 0u64;
    for cpu in 0..64 {
        if cpus.is_set(cpu)? {
            mask |= 1 << cpu;
        }
    }
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
    Ok(())
}

/// Captures the probes arriving on [`ROUTER_WEST`] inside `router`, from when `ready`
/// is told until [`CAPTURE_GRACE`] after `stop` is set.
fn capture(
    router: &str,
    cpus: &CpuSet,
    stop: &AtomicBool,
    ready: mpsc::Sender<()>,
) -> anyhow::Result<Wire> {
    let vantage: Ipv4Addr = Chain::left(0).parse()?;
    enter(router, cpus)?;
    let mut ring = vtnt_linux::capture::Ring::open(ROUTER_WEST)?;
    let _ = ready.send(());
    let mut stamps = Vec::new();
    let mut stopped: Option<Instant> = None;
    while stopped.is_none_or(|t| t.elapsed() < CAPTURE_GRACE) {
        ring.read(Duration::from_millis(10), |f| {
            if !f.outgoing && is_probe(f.packet, vantage) {
                stamps.push(f.stamp_ns);
            }
        })?;
        if stopped.is_none() && stop.load(Ordering::Acquire) {
            stopped = Some(Instant::now());
        }
    }
    Ok(Wire {
        stamps,
        drops: ring.drops()?,
    })
}

/// Runs `probe` while the router captures what arrives from the vantage point.
fn at_the_wire(
    router: &NetNs,
    cpus: &CpuSet,
    probe: impl FnOnce() -> anyhow::Result<Run>,
) -> anyhow::Result<(Run, Wire)> {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready, started) = mpsc::channel();
    let thread = std::thread::spawn({
        let (router, cpus, stop) = (router.name().to_string(), *cpus, stop.clone());
        move || capture(&router, &cpus, &stop, ready)
    });
    let joined = |thread: std::thread::JoinHandle<anyhow::Result<Wire>>| {
        thread
            .join()
            .map_err(|_| anyhow::anyhow!("capture thread panicked"))?
    };
    if started.recv().is_err() {
        // it ended before it was ready: its error says why
        return Err(joined(thread)
            .err()
            .unwrap_or_else(|| anyhow::anyhow!("capture ended early")));
    }
    let run = probe();
    stop.store(true, Ordering::Release);
    let wire = joined(thread)?;
    Ok((run?, wire))
}

/// Builds the topology, runs scamper at its ceiling (10,000 pps) and vtnt at the same rate
/// and at every requested rate, each captured at the router. Needs root and scamper.
pub fn probe_rate(opts: &RateOptions) -> anyhow::Result<Vec<RateRow>> {
    let chain = Chain::build("vpr", 1)?;
    let target_ns = &chain.nodes[2];
    target_ns.ip(&["route", "add", "local", "100.64.128.0/17", "dev", "lo"])?;
    let router = &chain.nodes[1];
    router.ip(&["route", "add", "100.64.128.0/17", "via", &Chain::right(1)])?;
    for ns in &chain.nodes {
        ns.sysctl("net.ipv4.icmp_msgs_per_sec", "10000000")?;
        ns.sysctl("net.ipv4.icmp_msgs_burst", "10000000")?;
    }
    let capture_cpus = match other_cpus()? {
        Some(others) => {
            steer_network(&chain.nodes, &others)?;
            others
        }
        None => {
            eprintln!("vtnt bench probe-rate: one CPU only: the topology's packet processing and the capture share the prober's core");
            let mut cpu0 = CpuSet::new();
            cpu0.set(PROBER_CPU)?;
            cpu0
        }
    };
    let mut rows = Vec::new();
    let mut measure = |pps: u32, probe: &dyn Fn() -> anyhow::Result<Run>| {
        let (run, wire) = at_the_wire(router, &capture_cpus, probe)?;
        rows.push(rate_of(&run, pps, wire));
        anyhow::Ok(())
    };
    // scamper's usage clamps -p to 1..=10000.
    measure(10_000, &|| scamper(chain.vantage(), 10_000, opts))?;
    for &pps in &opts.rates {
        measure(pps, &|| ours(chain.vantage(), pps, opts, true))?;
        if opts.without_tx_stamps {
            measure(pps, &|| ours(chain.vantage(), pps, opts, false))?;
        }
    }
    Ok(rows)
}

/// The rows as a markdown table.
pub fn to_markdown(rows: &[RateRow]) -> String {
    let mut s = String::from(
        "| tool | requested pps | probes | tx stamps | replies | achieved pps | pacing error | wire: probes (capture drops) | wire pps | wire error | most in 1 ms / expected (ratio) | send gap p50 / p99 (us) | RTT p50 / p99 (us) | CPU ms / 1k probes |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.0} | {:.2}% | {} ({}) | {:.0} | {:.2}% | {} / {:.0} ({:.1}) | {} / {} | {} / {} | {:.1} |\n",
            r.tool,
            r.requested_pps,
            r.probes,
            r.tx_stamps,
            r.replies,
            r.achieved_pps,
            r.pacing_error * 100.0,
            r.wire_probes,
            r.wire_drops,
            r.wire_pps,
            r.wire_error * 100.0,
            r.burst_1ms,
            r.burst_expected,
            r.burst_1ms as f64 / r.burst_expected,
            r.gap_p50_us,
            r.gap_p99_us,
            r.rtt_p50_us,
            r.rtt_p99_us,
            r.cpu_ms_per_kprobe
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_counts_intervals_not_probes() {
        assert_eq!(per_second(11, 1.0), 10.0);
        assert_eq!(per_second(1, 0.0), 0.0);
        assert_eq!(per_second(0, 0.0), 0.0);
        assert!((pacing_error(9_900.0, 10_000) - 0.01).abs() < 1e-12);
        assert!((pacing_error(10_100.0, 10_000) - 0.01).abs() < 1e-12);
    }

    #[test]
    fn most_within_slides_over_every_probe() {
        assert_eq!(most_within(&[], 1_000), 0);
        assert_eq!(most_within(&[5], 1_000), 1);
        // evenly spaced: a window holds window / gap probes, its end excluded
        let even: Vec<u64> = (0..100).map(|i| i * 100).collect();
        assert_eq!(most_within(&even, 1_000), 10);
        // a burst late in the run is found wherever it starts
        let mut burst: Vec<u64> = (0..10).map(|i| i * 10_000).collect();
        burst.extend((0..7).map(|i| 200_000 + 150 * i));
        assert_eq!(most_within(&burst, 1_000), 7);
        // equal stamps all count
        assert_eq!(most_within(&[7, 7, 7, 2_000], 1_000), 3);
    }

    const VANTAGE: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 1);

    /// An ICMP message of `icmp_type` from `src`, its IPv4 header `options` bytes longer.
    fn icmp(src: [u8; 4], icmp_type: u8, options: usize) -> Vec<u8> {
        let mut p = vec![0x45 + (options / 4) as u8, 0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0];
        p.extend(src);
        p.extend([100, 64, 128, 1]);
        p.extend(vec![1; options]); // NOPs
        p.extend([icmp_type, 0, 0, 0, 0, 0, 0, 0]);
        p
    }

    #[test]
    fn probes_are_echo_requests_from_the_vantage_point() {
        assert!(is_probe(&icmp([100, 64, 0, 1], 8, 0), VANTAGE));
        assert!(
            is_probe(&icmp([100, 64, 0, 1], 8, 4), VANTAGE),
            "after options"
        );
        assert!(
            !is_probe(&icmp([100, 64, 0, 1], 0, 0), VANTAGE),
            "an echo reply"
        );
        assert!(
            !is_probe(&icmp([100, 64, 0, 2], 8, 0), VANTAGE),
            "another source"
        );
        let mut udp = icmp([100, 64, 0, 1], 8, 0);
        udp[9] = 17;
        assert!(!is_probe(&udp, VANTAGE), "not ICMP");
        let mut v6 = icmp([100, 64, 0, 1], 8, 0);
        v6[0] = 0x65;
        assert!(!is_probe(&v6, VANTAGE), "not IPv4");
        assert!(
            !is_probe(&icmp([100, 64, 0, 1], 8, 0)[..20], VANTAGE),
            "cut short"
        );
        assert!(!is_probe(&[], VANTAGE));
    }
}
