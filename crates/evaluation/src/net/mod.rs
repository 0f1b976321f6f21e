//! Seed 004's TCP/UDP stream-throughput study (`vtnt bench net`): Debian's `iperf3` on
//! this host as the client, an endpoint in each runtime ([`endpoint`]), three sweeps as
//! the seed's (TCP socket buffer at the seed's 131,072-byte messages, TCP message size,
//! UDP message size), each point normalised to the native endpoint (`iperf3 -s` in a
//! namespace behind a veth: the host-to-host path) of the same run, and the endpoint
//! side's CPU per gigabit from its cgroup. netperf, which the seed used, is not packaged
//! in Debian: iperf3's `-w` stands for netperf's `-s`, `-l` for `-m`, `-u -b 0` for
//! UDP_STREAM. Every point is measured over IPv4 and, where the endpoint has an IPv6
//! address ([`endpoint::Endpoint`]'s `addr6`), over IPv6 to the same endpoint
//! right after it, so the two families compare within one run (seed 004 set them side
//! by side). [`report`] writes the markdown, JSON and figures.
//!
//! Rows are named as `vtnt bench micro` names them ([`crate::row::Row`]: `vm`,
//! `microvm:qemu-tcg`). A row that cannot run here (a tool missing, a VMM not usable, an
//! endpoint that never listens) is said on stderr and in the report, and the run goes
//! on with the others.

pub mod endpoint;
pub mod report;

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;
use vtnt_runtimes::Runtime;
use vtnt_unikernel::netns::NetNs;

use crate::row::Row;

/// The seed's message size of the socket-buffer sweep (netperf `-m 131072`).
pub const SEED_MSG: u32 = 131_072;

/// `vtnt bench net`'s options.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchNetArgs {
    /// Rows to measure: runtimes, the microVM as `microvm:VMM` as `vtnt bench micro`
    /// names them (native is always measured: it is the baseline).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "native,runc,docker,vm,microvm:monitor,microvm:qemu-tcg,microvm:qemu-kvm,spt"
    )]
    pub runtimes: Vec<Row>,
    /// Address families to measure, each point over each in turn (IPv6 on the runtimes
    /// that have it; the report says why the others have none).
    #[arg(long, value_delimiter = ',', default_value = "ipv4,ipv6")]
    pub families: Vec<Family>,
    /// Repetitions of every point.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub reps: u32,
    /// TCP socket buffer sizes, bytes (iperf3 -w; the seed's netperf -s: 100 to 20,000),
    /// with 131,072-byte messages.
    #[arg(long, value_delimiter = ',', default_value = "100,300,1100,2100,5100,10100,20000",
          value_parser = clap::value_parser!(u32).range(1..=16_777_216))]
    pub tcp_buffers: Vec<u32>,
    /// TCP message sizes, bytes (iperf3 -l; netperf -m), at the default socket buffers.
    #[arg(long, value_delimiter = ',', default_value = "1024,4096,16384,65536,131072",
          value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub tcp_msgs: Vec<u32>,
    /// UDP message sizes, bytes (iperf3 -u -b 0 -l; the seed's UDP_STREAM sizes).
    #[arg(long, value_delimiter = ',', default_value = "50,150,550,1050,1450,2050,3050",
          value_parser = clap::value_parser!(u32).range(16..=65_507))]
    pub udp_msgs: Vec<u32>,
    /// Seconds per test (the seed: 10).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub seconds: u32,
    /// How long an endpoint may take to listen (a Debian VM boots in 70 s or more under
    /// TCG; a Docker engine), seconds.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub wait: u64,
    /// Where report.md, report.json and the figures go.
    #[arg(long, default_value = "bench-net")]
    pub out: PathBuf,
}

/// The address family a point's tests ran over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    Ipv4,
    Ipv6,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "IPv4",
            Family::Ipv6 => "IPv6",
        }
    }
}

/// Which sweep a point belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sweep {
    /// TCP, socket buffer varied (messages of [`SEED_MSG`]).
    TcpBuffer,
    /// TCP, message size varied.
    TcpMsg,
    /// UDP, message size varied.
    UdpMsg,
}

impl Sweep {
    pub const ALL: [Sweep; 3] = [Sweep::TcpBuffer, Sweep::TcpMsg, Sweep::UdpMsg];

    pub fn title(self) -> &'static str {
        match self {
            Sweep::TcpBuffer => "TCP stream, socket buffer (131,072-byte messages)",
            Sweep::TcpMsg => "TCP stream, message size",
            Sweep::UdpMsg => "UDP stream, message size",
        }
    }

    pub fn axis(self) -> &'static str {
        match self {
            Sweep::TcpBuffer => "socket buffer asked for (bytes)",
            _ => "message size (bytes)",
        }
    }

    /// The iperf3 client options of a point of this sweep at `value`.
    fn args(self, value: u32) -> Vec<String> {
        match self {
            Sweep::TcpBuffer => vec![
                "-w".into(),
                value.to_string(),
                "-l".into(),
                SEED_MSG.to_string(),
            ],
            Sweep::TcpMsg => vec!["-l".into(), value.to_string()],
            Sweep::UdpMsg => vec![
                "-u".into(),
                "-b".into(),
                "0".into(),
                "-l".into(),
                value.to_string(),
            ],
        }
    }
}

/// One test's result.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Rep {
    /// Throughput the receiver saw, Mbit/s.
    pub mbps: f64,
    /// Endpoint CPU seconds over the test.
    pub cpu_s: f64,
    /// Gigabits received.
    pub gbit: f64,
    /// UDP: share of datagrams lost, %.
    pub loss_pct: Option<f64>,
    /// The client's socket buffers as Linux set them (`getsockopt`: doubled, at least
    /// its minimum).
    pub sndbuf: Option<u64>,
    pub rcvbuf: Option<u64>,
}

/// One point of a sweep on one runtime.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub runtime: Row,
    pub accel: Option<String>,
    pub family: Family,
    pub sweep: Sweep,
    /// The value asked for.
    pub value: u32,
    pub reps: Vec<Rep>,
    /// Why a repetition failed, if one did.
    pub errors: Vec<String>,
}

impl Point {
    /// Mean and standard deviation of the throughput, Mbit/s.
    pub fn mbps(&self) -> Option<(f64, f64)> {
        vtnt_stats::mean_sd(&self.reps.iter().map(|r| r.mbps).collect::<Vec<_>>())
    }

    /// Endpoint CPU seconds per gigabit received.
    pub fn cpu_per_gbit(&self) -> Option<f64> {
        let (cpu, gbit) = self
            .reps
            .iter()
            .fold((0.0, 0.0), |(c, g), r| (c + r.cpu_s, g + r.gbit));
        (gbit > 0.0).then(|| cpu / gbit)
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct NetReport {
    pub provenance: vtnt_measure::provenance::Provenance,
    pub iperf3: String,
    pub seconds: u32,
    pub reps: u32,
    pub points: Vec<Point>,
    /// Runtimes not measured, and why.
    pub missing: Vec<(Row, String)>,
    /// Files written.
    pub files: Vec<PathBuf>,
}

impl NetReport {
    /// The point of `row` over `family` at `p`'s sweep and value.
    fn twin(&self, p: &Point, row: Row, family: Family) -> Option<&Point> {
        self.points.iter().find(|q| {
            q.runtime == row && q.family == family && q.sweep == p.sweep && q.value == p.value
        })
    }

    /// A point's throughput over the baseline's: native's at the same point, over the
    /// same family.
    pub fn ratio(&self, p: &Point) -> Option<f64> {
        over(p, self.twin(p, Row::of(Runtime::Native), p.family)?)
    }

    /// An IPv6 point's throughput over its runtime's IPv4 point at the same value.
    pub fn ipv6_over_ipv4(&self, p: &Point) -> Option<f64> {
        if p.family != Family::Ipv6 {
            return None;
        }
        over(p, self.twin(p, p.runtime, Family::Ipv4)?)
    }
}

/// `p`'s throughput over `base`'s.
fn over(p: &Point, base: &Point) -> Option<f64> {
    let base = base.mbps()?.0;
    let own = p.mbps()?.0;
    (base > 0.0).then(|| own / base)
}

/// Runs one iperf3 test from `client` against `ep` at its address `addr`.
fn test(
    client: &NetNs,
    ep: &endpoint::Endpoint,
    addr: IpAddr,
    sweep: Sweep,
    value: u32,
    seconds: u32,
) -> anyhow::Result<Rep> {
    let cpu0 = ep.cpu_secs();
    let mut cmd = client.command("timeout");
    cmd.arg((seconds + 20).to_string())
        .arg("iperf3")
        .args(["-c", &addr.to_string(), "-p"])
        .arg(endpoint::PORT.to_string())
        .args([
            "-t",
            &seconds.to_string(),
            "-J",
            "--connect-timeout",
            "5000",
        ])
        .args(sweep.args(value))
        .stdin(Stdio::null());
    let out = cmd.output().context("running iperf3")?;
    let cpu = ep.cpu_secs() - cpu0;
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|_| {
        anyhow::anyhow!(
            "iperf3 printed no JSON (exit {:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })?;
    if let Some(e) = j["error"].as_str() {
        bail!("iperf3: {e}");
    }
    parse(&j, sweep, cpu)
}

/// `run` again while the endpoint is not ready for the next test, after 2, 4 and 8 s:
/// `iperf3 -s` serves one client at a time, and under TCG it can take seconds to finish
/// the last test (or the readiness probe), drop its connection and listen again, so a
/// test started at once is reset, refused or told the server is busy (the full run of
/// 2026-11-26 lost a VM test to a refusal, a CI run one to "busy").
fn retried(run: impl Fn() -> anyhow::Result<Rep>) -> anyhow::Result<Rep> {
    const NOT_READY: [&str; 3] = [
        "Connection reset by peer",
        "Connection refused",
        "the server is busy",
    ];
    let mut got = run();
    for wait in [2, 4, 8] {
        match &got {
            Err(e) if NOT_READY.iter().any(|m| format!("{e:#}").contains(m)) => {
                std::thread::sleep(Duration::from_secs(wait));
                got = run();
            }
            _ => break,
        }
    }
    got
}

/// A [`Rep`] from iperf3's JSON (`cpu`: the endpoint's CPU seconds): what the receiver
/// reported (`end.sum_received`), and for UDP the larger of the receiver's loss (from
/// sequence gaps: iperf3's `packets` is the last sequence number seen) and the share of
/// datagrams sent that it did not count (a receiver that drops fragments sees no gap).
fn parse(j: &serde_json::Value, sweep: Sweep, cpu: f64) -> anyhow::Result<Rep> {
    let received = &j["end"]["sum_received"];
    let mbps = received["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6;
    let seconds = received["seconds"].as_f64().unwrap_or(0.0);
    if seconds <= 0.0 {
        bail!("iperf3 reported no test time");
    }
    let loss_pct = (sweep == Sweep::UdpMsg).then(|| {
        let sent = j["end"]["sum_sent"]["packets"].as_f64().unwrap_or(0.0);
        let got = received["packets"].as_f64().unwrap_or(0.0);
        let uncounted = if sent > 0.0 {
            (100.0 * (1.0 - got / sent)).max(0.0)
        } else {
            0.0
        };
        uncounted.max(received["lost_percent"].as_f64().unwrap_or(0.0))
    });
    Ok(Rep {
        mbps,
        cpu_s: cpu,
        gbit: mbps * seconds / 1e3,
        loss_pct,
        sndbuf: j["start"]["sndbuf_actual"].as_u64(),
        rcvbuf: j["start"]["rcvbuf_actual"].as_u64(),
    })
}

/// `vtnt bench net`: every runtime's endpoint, every sweep, the report in `args.out`.
pub fn bench_net(args: &BenchNetArgs) -> anyhow::Result<NetReport> {
    let iperf3 = vtnt_runtimes::paths::need("iperf3", "iperf3")?;
    anyhow::ensure!(
        vtnt_measure::cgroup::available(),
        "vtnt bench net measures the endpoints' CPU with cgroup v1 controllers, which are not mounted"
    );
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("--out {}: cannot create it", args.out.display()))?;
    let version = std::process::Command::new(&iperf3)
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default();
    // the baseline first, then each row once
    let mut runtimes = vec![Row::of(Runtime::Native)];
    for r in &args.runtimes {
        if !runtimes.contains(r) {
            runtimes.push(*r);
        }
    }
    let client = NetNs::create(&vtnt_unikernel::netns::unique_name("vnetc"))?;
    let sweeps: Vec<(Sweep, &[u32])> = vec![
        (Sweep::TcpBuffer, &args.tcp_buffers),
        (Sweep::TcpMsg, &args.tcp_msgs),
        (Sweep::UdpMsg, &args.udp_msgs),
    ];
    // tests of one family on one row
    let per_family: u64 =
        sweeps.iter().map(|(_, v)| v.len() as u64).sum::<u64>() * u64::from(args.reps);
    let mut rep = NetReport {
        provenance: vtnt_measure::provenance::Provenance::now(),
        iperf3: version,
        seconds: args.seconds,
        reps: args.reps,
        points: Vec::new(),
        missing: Vec::new(),
        files: Vec::new(),
    };
    for (i, &rt) in runtimes.iter().enumerate() {
        vtnt_measure::stop::check()?;
        let index = i as u8 + 1;
        let families: Vec<Family> = [Family::Ipv4, Family::Ipv6]
            .into_iter()
            .filter(|f| args.families.contains(f))
            .collect();
        if families.is_empty() {
            continue;
        }
        let tests = per_family * families.len() as u64;
        let started = endpoint::start(rt, index, &client, tests, Duration::from_secs(args.wait))
            .and_then(|mut ep| {
                ep.ready(&client, Duration::from_secs(args.wait))?;
                Ok(ep)
            });
        let ep = match started {
            Ok(ep) => ep,
            Err(e) => {
                let why = format!("{e:#}");
                eprintln!("vtnt bench net: {rt}: skipped: {why}");
                rep.missing.push((rt, why));
                continue;
            }
        };
        eprintln!(
            "vtnt bench net: {rt} ({}) at {}{}",
            ep.accel.as_deref().unwrap_or("host kernel"),
            ep.addr,
            ep.addr6.map_or_else(String::new, |a| format!(" and {a}"))
        );
        let addrs: Vec<(Family, IpAddr)> = families
            .iter()
            .filter_map(|&f| match f {
                Family::Ipv4 => Some((f, IpAddr::V4(ep.addr))),
                Family::Ipv6 => ep.addr6.map(|a| (f, IpAddr::V6(a))),
            })
            .collect();
        if families.contains(&Family::Ipv6) && ep.addr6.is_none() {
            rep.missing.push((
                rt,
                format!("IPv6: bench net gives the {rt} endpoint no IPv6 address yet"),
            ));
        }
        let mut failures = 0;
        for &(sweep, values) in &sweeps {
            for &value in values {
                // each family in turn at every point: the two compare under the same load
                for &(family, addr) in &addrs {
                    let mut p = Point {
                        runtime: rt,
                        accel: ep.accel.clone(),
                        family,
                        sweep,
                        value,
                        reps: Vec::new(),
                        errors: Vec::new(),
                    };
                    for _ in 0..args.reps {
                        vtnt_measure::stop::check()?;
                        match retried(|| test(&client, &ep, addr, sweep, value, args.seconds)) {
                            Ok(r) => p.reps.push(r),
                            Err(e) => {
                                failures += 1;
                                p.errors.push(format!("{e:#}"));
                            }
                        }
                    }
                    eprintln!(
                        "  {:?} {value} {}: {}",
                        sweep,
                        family.name(),
                        p.mbps().map_or_else(
                            || format!("failed: {:?}", p.errors.first()),
                            |(m, _)| format!("{m:.1} Mbit/s")
                        )
                    );
                    rep.points.push(p);
                }
            }
        }
        if failures > 0 {
            let console = ep.console();
            let tail: Vec<&String> = console.iter().rev().take(2).collect();
            rep.missing.push((
                rt,
                format!(
                    "{failures} of {} tests failed{}",
                    per_family * addrs.len() as u64,
                    if tail.is_empty() {
                        String::new()
                    } else {
                        format!("; console: {tail:?}")
                    }
                ),
            ));
        }
    }
    report::write(&mut rep, &args.out)?;
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_throughput_is_what_the_receiver_counted() {
        let j = serde_json::json!({
            "start": {"sndbuf_actual": 4608, "rcvbuf_actual": 2304},
            "end": {
                "sum_sent": {"packets": 1000, "seconds": 2.0},
                "sum_received": {"packets": 750, "seconds": 2.0, "bits_per_second": 3e6}
            }
        });
        let r = parse(&j, Sweep::UdpMsg, 0.5).unwrap();
        assert!((r.mbps - 3.0).abs() < 1e-9, "{}", r.mbps);
        assert_eq!(r.loss_pct, Some(25.0));
        assert_eq!(r.sndbuf, Some(4608));
        assert!((r.gbit - 0.006).abs() < 1e-12);
        // fragments dropped whole: nothing counted is all lost, whatever the gaps say
        let j = serde_json::json!({"end": {
            "sum_sent": {"packets": 10},
            "sum_received": {"packets": 0, "seconds": 1.0, "bits_per_second": 0.0, "lost_percent": 0.0}
        }});
        assert_eq!(parse(&j, Sweep::UdpMsg, 0.0).unwrap().loss_pct, Some(100.0));
        // Linux's receiver: `packets` is the last sequence number, the gaps its loss
        let j = serde_json::json!({"end": {
            "sum_sent": {"packets": 10},
            "sum_received": {"packets": 10, "seconds": 1.0, "bits_per_second": 1.0, "lost_percent": 30.0}
        }});
        assert_eq!(parse(&j, Sweep::UdpMsg, 0.0).unwrap().loss_pct, Some(30.0));
        assert!(parse(&serde_json::json!({"end": {}}), Sweep::TcpMsg, 0.0).is_err());
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        net: BenchNetArgs,
    }

    #[test]
    fn sweep_values_out_of_range_are_refused_by_name() {
        use clap::Parser;
        let ok = Cli::try_parse_from(["x", "--tcp-buffers", "100,20000", "--udp-msgs", "50"]);
        assert_eq!(ok.unwrap().net.tcp_buffers, [100, 20000]);
        for (flag, bad) in [
            ("--tcp-buffers", "0"),
            ("--tcp-buffers", "100,99999999"),
            ("--tcp-msgs", "2000000"),
            ("--udp-msgs", "8"),
            ("--udp-msgs", "70000"),
            ("--seconds", "0"),
            ("--reps", "0"),
            ("--runtimes", "native,bogus"),
            ("--families", "ipv4,ipv5"),
        ] {
            let e = Cli::try_parse_from(["x", flag, bad])
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains(flag), "{flag} {bad}: {e}");
        }
    }

    #[test]
    fn ratios_are_to_native_at_the_same_point_and_family() {
        let point = |rt, family, mbps| Point {
            runtime: rt,
            accel: None,
            family,
            sweep: Sweep::TcpBuffer,
            value: 100,
            reps: vec![Rep {
                mbps,
                gbit: 1.0,
                cpu_s: 0.5,
                ..Rep::default()
            }],
            errors: Vec::new(),
        };
        let (native, docker) = (Row::of(Runtime::Native), Row::of(Runtime::Docker));
        let rep = NetReport {
            provenance: Default::default(),
            iperf3: String::new(),
            seconds: 1,
            reps: 1,
            points: vec![
                point(native, Family::Ipv4, 200.0),
                point(native, Family::Ipv6, 100.0),
                point(docker, Family::Ipv4, 150.0),
                point(docker, Family::Ipv6, 120.0),
                point(row_of("microvm:monitor"), Family::Ipv4, 50.0),
            ],
            missing: Vec::new(),
            files: Vec::new(),
        };
        assert_eq!(rep.ratio(&rep.points[2]), Some(0.75));
        assert_eq!(rep.ratio(&rep.points[3]), Some(1.2));
        assert_eq!(rep.ipv6_over_ipv4(&rep.points[1]), Some(0.5));
        assert_eq!(rep.ipv6_over_ipv4(&rep.points[3]), Some(0.8));
        assert_eq!(rep.ipv6_over_ipv4(&rep.points[2]), None);
        assert_eq!(rep.points[2].cpu_per_gbit(), Some(0.5));
        let md = report::markdown(&rep);
        assert!(
            md.contains("| docker | IPv6 | host kernel | 100 | n/a | 120.0 (0.0) | 1.20 | 0.80 |"),
            "{md}"
        );
    }

    fn row_of(s: &str) -> Row {
        s.parse().unwrap()
    }
}
