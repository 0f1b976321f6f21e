//! `vtnt bench fw`: the firewall network function (`vtnt fw run`, a separate process)
//! between a sender and a receiver in namespaces the bench makes ([`vtnt_netns::Bump`]),
//! at each rule count, stateless and stateful apart. Rules are `vtnt fw gen`'s `fw`
//! family with a pinned seed and policy ACCEPT (0 rules: everything passes, as with no
//! firewall; the rules' own DROPs and REJECTs stop their share); the traffic is a trace drawn from the same rules
//! (`vtnt fw trace`, no locality; for sets under 1,000 rules, from the 1,000-rule set of
//! the same seed): `flows` distinct headers, i.e. as many concurrent
//! flows, replayed round-robin from a raw socket as fast as the sender can, so that
//! connection tracking cannot classify one flow once and coast. Per repetition: the
//! rules' load time (read and compiled, as the NF reports it before its first packet),
//! the NF's resident memory once loaded, and the packets per second that reach the
//! receiver (counted by an AF_PACKET ring there) over the time the sender took.
//!
//! With `iptables`, each repetition also loads the same file with `iptables-restore`
//! into the NF namespace made a Linux router (forwarding, host routes and permanent
//! neighbours to both ends; our NF is not running then) and sends the same trace; with
//! `nftables`, likewise the same rules as nft with sets ([`print::nft_sets`], the fast
//! path an nft user would write) loaded with `nft -f` ("nft-sets").
//!
//! The NF runs in each runtime of [`NfOptions::runtimes`] ([`crate::fw_host`]): a process
//! in the NF namespace, or the static `vtnt` in a runc or Docker container whose network
//! is that namespace (and the unikernel's, the Debian VM's, LXD's). The kernel baselines
//! run once per repetition in that same namespace, which is the containers' too, so every
//! runtime's row is compared with them; with LXD asked, also in an LXD container that
//! holds the namespace's veths then (`Filter`, rows of runtime `lxd`).
//!
//! With [`NfOptions::seconds`], each repetition also measures Debian's iperf3 through
//! the same filter, TCP then UDP (unlimited rate, 1,400-byte datagrams), with
//! [`NfOptions::streams`] parallel streams from the sender to an `iperf3 -s` in the
//! receiver's namespace: throughput as the receiver counted it; then, over the same
//! seconds per test, [`fw_rr`]'s request/response rates and round trips (sockperf TCP
//! and UDP), TCP SYN and ICMP echo latency (hping3, ping) and the TCP connection rate
//! (a client of ours). The traffic must cross (a set's wide rules may drop a port range
//! whatever the addresses): [`ports`] picks three server ports and a range of client
//! ports that the set accepts for TCP and UDP, both ways, new and established (checked
//! with the compiled classifier), and the sender's ephemeral ports are narrowed to that
//! range. Stateless sets classify every packet of the streams through the whole
//! classifier (they reach the policy), stateful ones only the first of each stream, the
//! rest by the state rule.
//!
//! With [`NfOptions::pin`] ([`Pinning`]), the NF runs on the last CPU and the bench with
//! everything it starts on the others; each row says whether it was pinned and our NF's
//! CPUs as the kernel listed them. The figures are `vtnt-evaluation`'s (`fw`), drawn
//! from these rows' JSON.
//!
//! Not yet here (docs/benchmarks.md says so): iperf3 streams drawn from the trace's
//! accepted headers.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use serde::Serialize;
use vtnt_fw::gen::{self, Family, RuleSpec, TraceSpec};
use vtnt_fw::{print, Action, Classifier, CtState, Hook, IfId, Options, Packet, Ruleset};
use vtnt_netns::{Bump, NetNs};

use crate::fw_host::{self, NfHost, NfRuntime};
use crate::fw_rr::{self, enter};
use vtnt_runtimes::Runtime;

/// Sets smaller than this are replayed a trace drawn from one of this size.
const TRACE_RULES_MIN: usize = 1000;

/// What `vtnt bench fw` measures.
#[derive(Debug, Clone)]
pub struct NfOptions {
    pub sizes: Vec<usize>,
    pub reps: usize,
    /// Distinct headers (flows) in the replayed trace.
    pub flows: usize,
    /// Packets sent per repetition.
    pub packets: usize,
    pub seed: u64,
    /// The `vtnt` binary that runs the native NF.
    pub vtnt: PathBuf,
    /// iperf3's duration per test (TCP, then UDP) in seconds; 0: no iperf3.
    pub seconds: u32,
    /// iperf3's parallel streams (`-P`).
    pub streams: u32,
    /// Where the NF runs, one row each (at least one).
    pub runtimes: Vec<NfRuntime>,
    /// Where the rule files go.
    pub dir: PathBuf,
    /// Also measure iptables in the NF namespace (as a router) with the same file.
    pub iptables: bool,
    /// Also measure nftables with sets there, the same rules.
    pub nftables: bool,
    /// The NF on the last CPU this process may use, the bench (its sender, receiver,
    /// drivers and their servers) on the others ([`Pinning`]).
    pub pin: bool,
    /// Asked between repetitions: true ends the sweep with an error, its namespaces,
    /// processes and files removed (the command line's SIGINT/SIGTERM flag).
    pub interrupted: fn() -> bool,
}

/// One rule count in one mode, over the repetitions: (mean, sample sd).
#[derive(Debug, Clone, Serialize)]
pub struct NfRow {
    pub rules: usize,
    pub stateful: bool,
    /// "vtnt" (our NF, a bridge), "iptables" or "nft-sets" (the kernel's, the NF
    /// namespace a router).
    pub nf: &'static str,
    /// Load time (iptables: `iptables-restore`'s; nft-sets: `nft -f`'s).
    pub load_ms: (f64, f64),
    pub rss_kib: (f64, f64),
    /// Packets per second reaching the receiver.
    pub pps: (f64, f64),
    /// Of the packets sent, the share that reached the receiver.
    pub delivered: (f64, f64),
    /// The NF process's CPU time over the packet-rate measurement, in % of one core
    /// (the spt tender's, QEMU's for the microVM; NaN for the kernel baselines, whose
    /// work is softirq time no process owns).
    pub cpu_pct: (f64, f64),
    /// The drivers' figures (NaN: not measured).
    #[serde(flatten)]
    pub drivers: Drivers,
    /// Where it ran ("native": a process in the NF namespace; "runc", "docker": the
    /// static vtnt in a container whose network is that namespace; "lxd": in an LXD
    /// container whose NICs are that namespace's veths). The kernel baselines say
    /// "native": netfilter in that namespace, the containers' own; or "lxd": in an LXD
    /// container holding that namespace's veths.
    pub runtime: &'static str,
    /// The accelerator: "none" (this host's kernel), "none (container)", "none (LXD
    /// container)".
    pub accelerator: &'static str,
    /// Whether it ran with `--pin` ([`Pinning`]).
    pub pinned: bool,
    /// Our NF's CPUs as the kernel listed them (`Cpus_allowed_list`) once pinned, in
    /// its last repetition; `None` unpinned and for the kernel baselines, whose work is
    /// softirq time on the sender's CPUs.
    pub nf_cpus: Option<String>,
}

/// `--pin`'s CPUs: the NF on the last CPU this process may use, everything else on the
/// others (2 CPUs: NF on 1, the rest on 0).
#[derive(Debug, Clone)]
pub struct Pinning {
    nf: CpuSet,
    rest: CpuSet,
    /// This thread's CPUs before.
    before: CpuSet,
}

impl Pinning {
    /// Splits this thread's CPUs; at least two are needed.
    pub fn new() -> anyhow::Result<Pinning> {
        let mine = sched_getaffinity(Pid::from_raw(0)).context("reading this thread's CPUs")?;
        let cpus: Vec<usize> = (0..CpuSet::count())
            .filter(|&c| mine.is_set(c).unwrap_or(false))
            .collect();
        let Some((&last, rest)) = cpus.split_last().filter(|(_, r)| !r.is_empty()) else {
            bail!("--pin needs 2 CPUs at least; this process may use {cpus:?}");
        };
        let mut p = Pinning {
            nf: CpuSet::new(),
            rest: CpuSet::new(),
            before: mine,
        };
        p.nf.set(last)?;
        for &c in rest {
            p.rest.set(c)?;
        }
        Ok(p)
    }

    /// Puts this thread on the others' CPUs: the threads and processes it starts from
    /// now on inherit them (the sender, the counters, iperf3, sockperf, hping3, ping,
    /// the servers in the receiver's namespace, a Docker engine).
    fn enter(&self) -> anyhow::Result<()> {
        sched_setaffinity(Pid::from_raw(0), &self.rest).context("pinning the bench")
    }

    /// Gives this thread back the CPUs it had.
    fn leave(&self) {
        let _ = sched_setaffinity(Pid::from_raw(0), &self.before);
    }
}

/// What [`drivers`] measured, over the repetitions: (mean, sample sd) each.
#[derive(Debug, Clone, Serialize)]
pub struct Drivers {
    /// iperf3 TCP throughput, Mbit/s received.
    pub tcp_mbps: (f64, f64),
    /// iperf3 UDP throughput, Mbit/s received.
    pub udp_mbps: (f64, f64),
    /// sockperf TCP ping-pong: transactions per second, mean and p99 round trip (µs).
    pub tcp_rr_tps: (f64, f64),
    pub tcp_rr_us: (f64, f64),
    pub tcp_rr_p99_us: (f64, f64),
    /// sockperf UDP ping-pong, likewise.
    pub udp_rr_tps: (f64, f64),
    pub udp_rr_us: (f64, f64),
    pub udp_rr_p99_us: (f64, f64),
    /// hping3: mean round trip of a SYN to the listener and its answer (µs).
    pub tcp_syn_us: (f64, f64),
    /// ping: mean ICMP echo round trip (µs; NaN when the rules drop echo).
    pub icmp_us: (f64, f64),
    /// Our connection-rate client: TCP connections completed per second.
    pub tcp_conn_per_s: (f64, f64),
}

impl Drivers {
    /// From [`drivers`]' columns over the repetitions, `ms` giving (mean, sd).
    fn new(v: &[Vec<f64>], ms: impl Fn(&[f64]) -> (f64, f64)) -> Drivers {
        Drivers {
            tcp_mbps: ms(&v[0]),
            udp_mbps: ms(&v[1]),
            tcp_rr_tps: ms(&v[2]),
            tcp_rr_us: ms(&v[3]),
            tcp_rr_p99_us: ms(&v[4]),
            udp_rr_tps: ms(&v[5]),
            udp_rr_us: ms(&v[6]),
            udp_rr_p99_us: ms(&v[7]),
            tcp_syn_us: ms(&v[8]),
            icmp_us: ms(&v[9]),
            tcp_conn_per_s: ms(&v[10]),
        }
    }
}

/// Sends `packets` of `datagrams` round-robin from inside `ns`; how long it took.
pub(crate) fn send(
    ns: &NetNs,
    datagrams: Arc<Vec<Vec<u8>>>,
    packets: usize,
) -> anyhow::Result<Duration> {
    let name = ns.name().to_string();
    std::thread::spawn(move || -> anyhow::Result<Duration> {
        enter(&name)?;
        let fd = nix::sys::socket::socket(
            nix::sys::socket::AddressFamily::Inet,
            nix::sys::socket::SockType::Raw,
            nix::sys::socket::SockFlag::empty(),
            nix::sys::socket::SockProtocol::Raw,
        )
        .context("raw socket in the sender's namespace")?;
        let t = Instant::now();
        for i in 0..packets {
            let d = &datagrams[i % datagrams.len()];
            let dst = SocketAddrV4::new(Ipv4Addr::new(d[16], d[17], d[18], d[19]), 0);
            let to = nix::sys::socket::SockaddrIn::from(dst);
            while let Err(e) = nix::sys::socket::sendto(
                fd.as_raw_fd(),
                d,
                &to,
                nix::sys::socket::MsgFlags::empty(),
            ) {
                if e != nix::errno::Errno::ENOBUFS && e != nix::errno::Errno::EAGAIN {
                    return Err(e).context("sending through the NF");
                }
            }
        }
        Ok(t.elapsed())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the sender thread panicked"))?
}

/// Counts IPv4 frames arriving on r0 in `ns` until `stop` (and a quiet 50 ms).
pub(crate) fn count(
    ns: &NetNs,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<std::thread::JoinHandle<u64>> {
    let name = ns.name().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let ring = enter(&name)
            .and_then(|()| vtnt_linux::capture::Ring::open("r0").context("a receive ring on r0"));
        let mut ring = match ring {
            Ok(r) => {
                let _ = tx.send(Ok(()));
                r
            }
            Err(e) => {
                let _ = tx.send(Err(e));
                return 0;
            }
        };
        let mut n = 0u64;
        loop {
            let got = ring
                .read(Duration::from_millis(50), |f| {
                    if !f.outgoing && f.packet.first().is_some_and(|b| b >> 4 == 4) {
                        n += 1;
                    }
                })
                .unwrap_or(0);
            if got == 0 && stop.load(Ordering::Relaxed) {
                return n;
            }
        }
    });
    rx.recv().context("the receiver thread")??;
    Ok(h)
}

/// The trace through whatever filters between sender and receiver now: (pps, share
/// delivered).
fn measure(b: &Bump, opts: &NfOptions, datagrams: &Arc<Vec<Vec<u8>>>) -> anyhow::Result<[f64; 2]> {
    let stop = Arc::new(AtomicBool::new(false));
    let counter = count(&b.receiver, stop.clone())?;
    let took = send(&b.sender, datagrams.clone(), opts.packets);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let arrived = counter.join().unwrap_or(0) as f64;
    let took = took?;
    Ok([arrived / took.as_secs_f64(), arrived / opts.packets as f64])
}

/// The server ports the drivers use and the client ports the sender's ephemeral range
/// is narrowed to, all accepted by the rules (see [`ports`]).
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    pub iperf3: u16,
    /// sockperf's (TCP and UDP), then the connection-rate listener's (and hping3's).
    pub rr: fw_rr::Targets,
    /// The client ports, inclusive.
    pub clients: (u16, u16),
}

/// Server ports for iperf3, sockperf and the listener (three in a row) and a range of
/// client ports whose TCP and UDP packets between the bump's ends `rules` accept at
/// FORWARD both ways, new or established, any TCP flags an exchange uses (resets
/// included): the first server ports from iperf3's 5201 to 5300, then from 1 up (the
/// well-known ones first), then the rest, with a run of at least [`CLIENT_RUN`] such
/// client ports that avoids them (the longest run); and whether ICMP
/// echo passes both ways. The bump's addresses are in 100.0.0.0/8, which generated sets
/// leave to the namespaces, so only their few wildcard rules reach the drivers' traffic;
/// at a million rules these drop TCP from every port above 1023 (`--sport 1024:65535`),
/// so the drivers' TCP goes between ports below 1024 there.
pub fn ports(rules: &Ruleset) -> anyhow::Result<Ports> {
    let c = Classifier::compile(rules, &Options::default())?;
    let (a, z) = (Ipv4Addr::new(100, 64, 5, 1), Ipv4Addr::new(100, 64, 5, 2));
    // (source, destination port) one way, then back
    let passes = |proto: u8, flags: &[u8], (s0, d0): (u16, u16), (s1, d1): (u16, u16)| {
        flags.iter().all(|&f| {
            [CtState::New, CtState::Established]
                .into_iter()
                .all(|state| {
                    [(a, z, s0, d0, 0, 1), (z, a, s1, d1, 1, 0)]
                        .into_iter()
                        .all(|(src, dst, sport, dport, i, o)| {
                            let p = Packet {
                                src,
                                dst,
                                proto,
                                sport,
                                dport,
                                tcp_flags: f,
                                fragment: false,
                                in_if: IfId(i),
                                out_if: IfId(o),
                                state,
                            };
                            c.classify(Hook::Forward, &p).action == Action::Accept
                        })
                })
        })
    };
    let accepts = |sp: u16, cp: u16| {
        !(sp..sp + 3).contains(&cp)
            && (sp..sp + 3).all(|sp| {
                let tcp = [0x02, 0x12, 0x10, 0x18, 0x11, 0x04, 0x14];
                passes(6, &tcp, (cp, sp), (sp, cp)) && passes(17, &[0], (cp, sp), (sp, cp))
            })
    };
    // ICMP: the type in the source port's place, the code in the destination's
    let icmp = passes(1, &[0], (8, 0), (0, 0));
    let step = usize::from(CLIENT_RUN / 2);
    for sp in (5201..5301).chain(1..5201).chain(5301..=65532) {
        // a run of CLIENT_RUN accepted client ports holds one of these
        if !(1..=65535u16).step_by(step).any(|cp| accepts(sp, cp)) {
            continue;
        }
        let (mut best, mut run) = ((0u32, 0u32), None::<u32>);
        for cp in 1..=65536u32 {
            let ok = cp <= 65535 && accepts(sp, cp as u16);
            match (ok, run) {
                (true, None) => run = Some(cp),
                (false, Some(lo)) => {
                    if cp - lo > best.1 - best.0 {
                        best = (lo, cp);
                    }
                    run = None;
                }
                _ => {}
            }
        }
        if best.1 - best.0 >= u32::from(CLIENT_RUN) {
            let clients = (best.0 as u16, (best.1 - 1) as u16);
            return Ok(Ports {
                iperf3: sp,
                rr: fw_rr::Targets {
                    sockperf: sp + 1,
                    listener: sp + 2,
                    clients,
                    icmp,
                },
                clients,
            });
        }
    }
    bail!(
        "the rules accept TCP and UDP between the namespaces on no three server ports in a row \
         with {CLIENT_RUN} client ports"
    )
}

/// The fewest client ports the drivers need: iperf3's streams (at most 128) and its
/// control connection, sockperf's, and the connection-rate client's two at a time (the
/// listener closes first, so the client's port keeps no TIME_WAIT).
const CLIENT_RUN: u16 = 256;

/// Debian's iperf3 from the sender to the receiver through whatever filters between
/// them, to server `port`: Mbit/s received, TCP then UDP (NaN both when `seconds` is 0).
fn iperf3(b: &Bump, opts: &NfOptions, port: Option<u16>) -> anyhow::Result<[f64; 2]> {
    let Some(port) = port.filter(|_| opts.seconds > 0) else {
        return Ok([f64::NAN; 2]);
    };
    let port = port.to_string();
    let mut got = [f64::NAN; 2];
    for (udp, slot) in [false, true].into_iter().zip(&mut got) {
        let mut server = b
            .receiver
            .command("iperf3")
            .args(["-s", "-1", "-B", "100.64.5.2", "-p", &port])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("starting iperf3 -s (Debian package iperf3)")?;
        let (secs, streams) = (opts.seconds.to_string(), opts.streams.to_string());
        let mut args = vec!["-c", "100.64.5.2", "-p", &port, "-J", "-t", &secs];
        args.extend(["-P", &streams]);
        if udp {
            args.extend(["-u", "-b", "0", "-l", "1400"]);
        }
        // the server may not listen yet: its refusal is retried for a while
        let mut tries = 0;
        let out = loop {
            let out = b.sender.exec("iperf3", &args)?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if tries == 100 || !text.contains("Connection refused") {
                break text;
            }
            tries += 1;
            std::thread::sleep(Duration::from_millis(50));
        };
        let _ = server.kill();
        let _ = server.wait();
        let v: serde_json::Value = serde_json::from_str(&out)
            .with_context(|| format!("iperf3 -c printed no JSON: {}", out.trim()))?;
        if let Some(e) = v["error"].as_str() {
            bail!("iperf3 -c{}: {e}", if udp { " -u" } else { "" });
        }
        let end = &v["end"];
        let bps = end["sum_received"]["bits_per_second"]
            .as_f64()
            .or_else(|| {
                // older iperf3's UDP sum: the sender's rate less what was lost
                let sum = &end["sum"];
                Some(
                    sum["bits_per_second"].as_f64()?
                        * (1.0 - sum["lost_percent"].as_f64()? / 100.0),
                )
            })
            .context("iperf3 -c: no throughput in its JSON")?;
        *slot = bps / 1e6;
    }
    Ok(got)
}

/// How many figures [`drivers`] gives.
const DRIVERS: usize = 2 + fw_rr::COLUMNS;

/// The Debian drivers and our connection-rate client through whatever filters between
/// sender and receiver now: iperf3's TCP and UDP Mbit/s, then [`fw_rr::measure`]'s
/// columns (all NaN when `seconds` is 0).
fn drivers(b: &Bump, opts: &NfOptions, ports: Option<&Ports>) -> anyhow::Result<Vec<f64>> {
    let mut v = iperf3(b, opts, ports.map(|p| p.iperf3))?.to_vec();
    match ports.filter(|_| opts.seconds > 0) {
        Some(p) => v.extend(fw_rr::measure(b, opts.seconds, &p.rr)?),
        None => v.extend([f64::NAN; fw_rr::COLUMNS]),
    }
    Ok(v)
}

/// One repetition of our NF: load ms, RSS KiB, pps, delivered share, then
/// [`drivers`]'.
fn rep(
    b: &Bump,
    host: &NfHost,
    opts: &NfOptions,
    file: &Path,
    datagrams: &Arc<Vec<Vec<u8>>>,
    ports: Option<&Ports>,
    pin: Option<&Pinning>,
) -> anyhow::Result<(Vec<f64>, Option<String>)> {
    let nf = host.start(file)?;
    let cpus = pin.map(|p| nf.pin(&p.nf)).transpose()?;
    let pid = nf.pid()?;
    let rss = match vtnt_measure::proc::rss_kib(pid) {
        0 => bail!("no resident memory for the NF's process {pid}"),
        kib => kib as f64,
    };
    let (cpu, t) = (vtnt_measure::proc::cpu_ns(pid), Instant::now());
    let [pps, delivered] = measure(b, opts, datagrams)?;
    let ns = vtnt_measure::proc::cpu_ns(pid).saturating_sub(cpu);
    let cpu = 100.0 * ns as f64 / 1e9 / t.elapsed().as_secs_f64();
    let mut v = vec![nf.load_ms, rss, pps, delivered, cpu];
    v.extend(drivers(b, opts, ports)?);
    Ok((v, cpus))
}

/// Where a kernel baseline filters: the NF namespace itself (natively), or the LXD
/// container that holds its veths then (`--runtimes lxd`).
enum Filter<'a> {
    Netns(&'a NetNs),
    Lxd(&'a fw_host::KernelBox),
}

impl Filter<'_> {
    /// `program` to run where it filters, unstarted.
    fn command(&self, program: &str) -> std::process::Command {
        match self {
            Filter::Netns(ns) => ns.command(program),
            Filter::Lxd(k) => k.command(program),
        }
    }

    /// What it is, in errors.
    fn name(&self) -> &str {
        match self {
            Filter::Netns(ns) => ns.name(),
            Filter::Lxd(_) => "the LXD container",
        }
    }

    /// `ip ARGS` there: its standard output.
    fn ip(&self, args: &[&str]) -> anyhow::Result<String> {
        must(self, "ip", args)
    }

    fn sysctl(&self, key: &str, value: &str) -> anyhow::Result<()> {
        must(self, "sysctl", &["-qw", &format!("{key}={value}")]).map(drop)
    }
}

/// Runs `program ARGS` where `at` filters; its standard output, or an error with its
/// standard error.
fn must(at: &Filter, program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = (at.command(program).args(args).output())
        .with_context(|| format!("running {program} in {}", at.name()))?;
    if !out.status.success() {
        bail!(
            "{program} {} in {}: {}",
            args.join(" "),
            at.name(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Makes `addr` on `dev` in `ns` a permanent neighbour at `mac`.
fn neigh(ns: &NetNs, addr: &str, mac: &str, dev: &str) -> anyhow::Result<()> {
    let args = [
        "neigh",
        "replace",
        addr,
        "lladdr",
        mac,
        "dev",
        dev,
        "nud",
        "permanent",
    ];
    ns.ip(&args)?;
    Ok(())
}

/// Turns the NF namespace (or the LXD container holding its veths: `n`) into a Linux
/// router for the iptables baseline (`on`), or back into a bare wire: forwarding, host
/// routes to both ends with their MACs as permanent neighbours (no ARP of its own), and
/// the two ends' neighbour entries for each other pointing at the router instead of
/// through the bridge.
fn router(b: &Bump, n: &Filter, on: bool) -> anyhow::Result<()> {
    let mac = |at: &Filter, dev: &str| -> anyhow::Result<String> {
        let text = at.ip(&["-o", "link", "show", dev])?;
        let mut w = text.split_whitespace();
        w.find(|x| *x == "link/ether");
        w.next().map(str::to_string).context("no MAC")
    };
    let s = &b.sender;
    let (sf, rf) = (Filter::Netns(s), Filter::Netns(&b.receiver));
    if on {
        for k in ["net.ipv4.ip_forward", "net.ipv4.conf.all.rp_filter"] {
            n.sysctl(k, if k.ends_with("forward") { "1" } else { "0" })?;
        }
        let (s0, r0) = (mac(&sf, "s0")?, mac(&rf, "r0")?);
        for (addr, dev, m) in [("100.64.5.1", "a0", &s0), ("100.64.5.2", "b0", &r0)] {
            n.ip(&["route", "replace", &format!("{addr}/32"), "dev", dev])?;
            n.ip(&[
                "neigh",
                "replace",
                addr,
                "lladdr",
                m,
                "dev",
                dev,
                "nud",
                "permanent",
            ])?;
        }
        n.ip(&[
            "route",
            "replace",
            "default",
            "via",
            "100.64.5.2",
            "dev",
            "b0",
        ])?;
        // both ends send to the router (replies too: iperf3's TCP and UDP)
        let (a0, b0) = (mac(n, "a0")?, mac(n, "b0")?);
        neigh(s, "100.64.5.2", &a0, "s0")?;
        neigh(&b.receiver, "100.64.5.1", &b0, "r0")?;
    } else {
        n.sysctl("net.ipv4.ip_forward", "0")?;
        let (s0, r0) = (mac(&sf, "s0")?, mac(&rf, "r0")?);
        neigh(s, "100.64.5.2", &r0, "s0")?;
        neigh(&b.receiver, "100.64.5.1", &s0, "r0")?;
    }
    Ok(())
}

/// One repetition of a kernel baseline where `at` filters, as a router: `load` reads
/// `file` on its stdin, `clear` empties the filter after; load ms, pps, delivered
/// share, then [`drivers`]'.
#[allow(clippy::too_many_arguments)]
fn rep_kernel(
    b: &Bump,
    at: &Filter,
    opts: &NfOptions,
    load: &[&str],
    clear: &[&[&str]],
    file: &Path,
    datagrams: &Arc<Vec<Vec<u8>>>,
    ports: Option<&Ports>,
) -> anyhow::Result<Vec<f64>> {
    let t = Instant::now();
    let input = std::fs::File::open(file)?;
    let out = at
        .command(load[0])
        .args(&load[1..])
        .stdin(input)
        .output()
        .with_context(|| format!("running {}", load[0]))?;
    if !out.status.success() {
        bail!(
            "{} {}: {}",
            load.join(" "),
            file.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let load = t.elapsed().as_secs_f64() * 1e3;
    let m = measure(b, opts, datagrams).and_then(|m| Ok((m, drivers(b, opts, ports)?)));
    for c in clear {
        must(at, c[0], &c[1..])?;
    }
    let ([pps, delivered], d) = m?;
    let mut v = vec![load, pps, delivered];
    v.extend(d);
    Ok(v)
}

/// The kernel baselines asked for: (row name, loader, what empties it, file suffix).
type Baseline = (
    &'static str,
    &'static [&'static str],
    &'static [&'static [&'static str]],
);

fn baselines(opts: &NfOptions) -> Vec<Baseline> {
    let mut v: Vec<Baseline> = Vec::new();
    if opts.iptables {
        v.push((
            "iptables",
            &["iptables-restore"],
            &[
                &["iptables", "-F", "FORWARD"],
                &["iptables", "-P", "FORWARD", "ACCEPT"],
            ],
        ));
    }
    if opts.nftables {
        v.push((
            "nft-sets",
            &["nft", "-f", "-"],
            &[&["nft", "flush", "ruleset"]],
        ));
    }
    v
}

/// The `fw` family's set of `size` rules drawn with `seed`, policy ACCEPT: what the bench
/// loads.
pub(crate) fn rule_set(size: usize, stateful: bool, seed: u64) -> Ruleset {
    gen::rules(&RuleSpec {
        family: Family::Fw,
        stateful,
        policy: Action::Accept,
        ..RuleSpec::new(size, seed)
    })
}

/// The trace replayed through the NF: `flows` headers drawn from `rules` (the set of
/// `size` rules) without locality, as IPv4 datagrams; a set too small to draw many flows
/// from gets the trace of the 1,000-rule set of the same seed (the same distribution).
pub(crate) fn trace(
    rules: Ruleset,
    size: usize,
    stateful: bool,
    seed: u64,
    flows: usize,
) -> anyhow::Result<Arc<Vec<Vec<u8>>>> {
    let source = if size < TRACE_RULES_MIN {
        rule_set(TRACE_RULES_MIN, stateful, seed)
    } else {
        rules
    };
    let spec = TraceSpec {
        packets: flows,
        seed,
        locality: 0.0,
    };
    let datagrams: Vec<Vec<u8>> = (gen::trace(&source, &spec).iter().enumerate())
        .map(|(i, h)| gen::datagram(h, i as u16 | 1))
        .collect();
    if datagrams.is_empty() {
        bail!("no trace could be drawn from the {size}-rule set");
    }
    Ok(Arc::new(datagrams))
}

/// Measures every size, stateless then stateful; `each` hears of every row.
pub fn sweep(opts: &NfOptions, mut each: impl FnMut(&NfRow)) -> anyhow::Result<Vec<NfRow>> {
    if opts.reps == 0 || opts.flows == 0 || opts.packets == 0 || opts.runtimes.is_empty() {
        bail!("--reps, --flows, --packets and --runtimes must be at least 1");
    }
    if opts.seconds > 0 && !(1..=128).contains(&opts.streams) {
        bail!("--streams must be 1 to 128 (iperf3's -P)");
    }
    // every driver and runtime asked must be here before anything is built
    if opts.seconds > 0 {
        for (tool, package) in fw_rr::TOOLS {
            if vtnt_netns::which(tool).is_none() {
                bail!("vtnt bench fw --seconds: missing {tool} (Debian package {package})");
            }
        }
    }
    for rt in &opts.runtimes {
        if let Some(what) = fw_host::missing(*rt) {
            bail!("vtnt bench fw --runtimes {}: missing {what}", rt.name());
        }
    }
    let pin = opts.pin.then(Pinning::new).transpose()?;
    if let Some(p) = &pin {
        p.enter()?;
    }
    let rows = measure_sizes(opts, pin.as_ref(), &mut each);
    // this thread's CPUs as they were (the provenance counts them)
    if let Some(p) = &pin {
        p.leave();
    }
    rows
}

/// [`sweep`]'s measurements, its options checked and this thread pinned if asked.
fn measure_sizes(
    opts: &NfOptions,
    pin: Option<&Pinning>,
    each: &mut impl FnMut(&NfRow),
) -> anyhow::Result<Vec<NfRow>> {
    std::fs::create_dir_all(&opts.dir)
        .with_context(|| format!("creating {}", opts.dir.display()))?;
    let b = Bump::build("fwb", "100.64.5")?;
    let hosts = (opts.runtimes.iter())
        .map(|&rt| NfHost::new(rt, b.nf.name(), &opts.vtnt))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut rows = Vec::new();
    for &size in &opts.sizes {
        for stateful in [false, true] {
            let rules = rule_set(size, stateful, opts.seed);
            // the drivers' ports, the sender's ephemeral ones among those the rules accept
            let ports = if opts.seconds > 0 {
                let p = ports(&rules)?;
                let (lo, hi) = p.clients;
                // Linux takes no ephemeral port below the unprivileged ones' start: none
                // are privileged in the sender's namespace
                b.sender
                    .sysctl("net.ipv4.ip_unprivileged_port_start", "0")?;
                b.sender
                    .sysctl("net.ipv4.ip_local_port_range", &format!("{lo} {hi}"))?;
                Some(p)
            } else {
                None
            };
            let file = opts.dir.join(format!("fw-{size}-{stateful}.rules"));
            std::fs::write(&file, print::iptables_save(&rules)?)
                .with_context(|| format!("writing {}", file.display()))?;
            let nft_file = file.with_extension("nft");
            if opts.nftables {
                // iptables may be iptables-nft, whose table has nft's name: start empty
                let text = format!("flush ruleset\n{}", print::nft_sets(&rules)?.0);
                std::fs::write(&nft_file, text)
                    .with_context(|| format!("writing {}", nft_file.display()))?;
            }
            let datagrams = trace(rules, size, stateful, opts.seed, opts.flows)?;
            let mut m = vec![vec![Vec::new(); 5 + DRIVERS]; hosts.len()];
            let mut nf_cpus = vec![None; hosts.len()];
            let kernel = baselines(opts);
            // where the baselines filter: the NF namespace, and LXD's container with its
            // veths when the NF runs in LXD too
            let places: Vec<(NfRuntime, Option<&NfHost>)> =
                std::iter::once((NfRuntime::Runtime(Runtime::Native), None))
                    .chain(
                        hosts
                            .iter()
                            .filter(|h| h.runtime() == NfRuntime::Lxd)
                            .map(|h| (h.runtime(), Some(h))),
                    )
                    .collect();
            let mut base = vec![vec![Vec::new(); 3 + DRIVERS]; kernel.len() * places.len()];
            for _ in 0..opts.reps {
                if (opts.interrupted)() {
                    let _ = std::fs::remove_file(&file);
                    let _ = std::fs::remove_file(&nft_file);
                    bail!("interrupted at {size} rules: namespaces and rule files removed");
                }
                for ((host, m), cpus) in hosts.iter().zip(&mut m).zip(&mut nf_cpus) {
                    let (got, pinned) =
                        rep(&b, host, opts, &file, &datagrams, ports.as_ref(), pin)?;
                    for (v, x) in m.iter_mut().zip(got) {
                        v.push(x);
                    }
                    *cpus = pinned;
                }
                let runs = places
                    .iter()
                    .flat_map(|p| kernel.iter().map(move |k| (p, k)));
                for (((_, host), (name, load, clear)), got) in runs.zip(&mut base) {
                    let f = if *name == "iptables" {
                        &file
                    } else {
                        &nft_file
                    };
                    // LXD's container holds the veths until it is dropped, after the run
                    let lxd = host.map(|h| h.kernel_box()).transpose()?.flatten();
                    let at = lxd.as_ref().map_or(Filter::Netns(&b.nf), Filter::Lxd);
                    router(&b, &at, true)?;
                    let r = rep_kernel(&b, &at, opts, load, clear, f, &datagrams, ports.as_ref());
                    router(&b, &at, false)?;
                    for (v, x) in got.iter_mut().zip(r?) {
                        v.push(x);
                    }
                }
            }
            let _ = std::fs::remove_file(&file);
            let _ = std::fs::remove_file(&nft_file);
            let ms = |v: &[f64]| vtnt_stats::mean_sd(v).unwrap_or((f64::NAN, f64::NAN));
            let mut found: Vec<NfRow> = (hosts.iter().zip(&m).zip(nf_cpus))
                .map(|((host, m), nf_cpus)| NfRow {
                    rules: size,
                    stateful,
                    nf: "vtnt",
                    load_ms: ms(&m[0]),
                    rss_kib: ms(&m[1]),
                    pps: ms(&m[2]),
                    delivered: ms(&m[3]),
                    cpu_pct: ms(&m[4]),
                    runtime: host.runtime().name(),
                    accelerator: fw_host::accelerator(host.runtime()),
                    drivers: Drivers::new(&m[5..], ms),
                    pinned: opts.pin,
                    nf_cpus,
                })
                .collect();
            let runs = places
                .iter()
                .flat_map(|p| kernel.iter().map(move |k| (p, k)));
            for (((place, _), (name, ..)), got) in runs.zip(&base) {
                found.push(NfRow {
                    rules: size,
                    stateful,
                    nf: name,
                    load_ms: ms(&got[0]),
                    rss_kib: (f64::NAN, f64::NAN),
                    pps: ms(&got[1]),
                    delivered: ms(&got[2]),
                    cpu_pct: (f64::NAN, f64::NAN),
                    runtime: place.name(),
                    accelerator: fw_host::accelerator(*place),
                    drivers: Drivers::new(&got[3..], ms),
                    pinned: opts.pin,
                    nf_cpus: None,
                });
            }
            for row in found {
                each(&row);
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

/// The rows as a table, with each row's packet rate against the 0-rule row of its mode
/// and filter, and a line per rule count and baseline with our rate against its.
pub fn table(rows: &[NfRow]) -> String {
    let mut t = String::from(
        "runtime        accelerator      nf        rules      mode       load ms (sd)      RSS KiB (sd)       packets/s (sd)        of 0 rules  delivered  CPU % (sd)     TCP Mb/s (sd)     UDP Mb/s (sd)     TCP rr/s (sd)      TCP rr us p99   UDP rr/s (sd)      UDP rr us p99   SYN us (sd)    ICMP us (sd)   TCP conn/s (sd)\n",
    );
    for r in rows {
        let base = rows
            .iter()
            .find(|z| {
                z.rules == 0 && z.stateful == r.stateful && z.nf == r.nf && z.runtime == r.runtime
            })
            .map_or(f64::NAN, |z| z.pps.0);
        let d = &r.drivers;
        t.push_str(&format!(
            "{:<14} {:<16} {:<9} {:<10} {:<10} {:>8.1} ({:>6.1}) {:>9.0} ({:>6.0}) {:>10.0} ({:>8.0}) {:>10.1}% {:>9.1}% {:>5.0} ({:>4.0}) {:>7.0} ({:>6.0}) {:>7.0} ({:>6.0}) {:>8.0} ({:>6.0}) {:>7.1} {:>7.1} {:>8.0} ({:>6.0}) {:>7.1} {:>7.1} {:>6.1} ({:>5.1}) {:>6.1} ({:>5.1}) {:>7.0} ({:>6.0})\n",
            r.runtime,
            r.accelerator,
            r.nf,
            r.rules,
            if r.stateful { "stateful" } else { "stateless" },
            r.load_ms.0,
            r.load_ms.1,
            r.rss_kib.0,
            r.rss_kib.1,
            r.pps.0,
            r.pps.1,
            100.0 * r.pps.0 / base,
            100.0 * r.delivered.0,
            r.cpu_pct.0,
            r.cpu_pct.1,
            d.tcp_mbps.0,
            d.tcp_mbps.1,
            d.udp_mbps.0,
            d.udp_mbps.1,
            d.tcp_rr_tps.0,
            d.tcp_rr_tps.1,
            d.tcp_rr_us.0,
            d.tcp_rr_p99_us.0,
            d.udp_rr_tps.0,
            d.udp_rr_tps.1,
            d.udp_rr_us.0,
            d.udp_rr_p99_us.0,
            d.tcp_syn_us.0,
            d.tcp_syn_us.1,
            d.icmp_us.0,
            d.icmp_us.1,
            d.tcp_conn_per_s.0,
            d.tcp_conn_per_s.1,
        ));
    }
    for r in rows.iter().filter(|r| r.nf == "vtnt") {
        for i in (rows.iter())
            .filter(|z| z.nf != "vtnt" && z.rules == r.rules && z.stateful == r.stateful)
        {
            t.push_str(&format!(
                "vtnt ({}) / {} ({}) at {} rules ({}): {:.2}x packets/s, {:.2}x TCP, {:.2}x UDP, {:.2}x TCP rr/s, {:.2}x UDP rr/s, {:.2}x TCP conn/s, {:.2}x SYN latency\n",
                r.runtime,
                i.nf,
                i.runtime,
                r.rules,
                if r.stateful { "stateful" } else { "stateless" },
                r.pps.0 / i.pps.0,
                r.drivers.tcp_mbps.0 / i.drivers.tcp_mbps.0,
                r.drivers.udp_mbps.0 / i.drivers.udp_mbps.0,
                r.drivers.tcp_rr_tps.0 / i.drivers.tcp_rr_tps.0,
                r.drivers.udp_rr_tps.0 / i.drivers.udp_rr_tps.0,
                r.drivers.tcp_conn_per_s.0 / i.drivers.tcp_conn_per_s.0,
                r.drivers.tcp_syn_us.0 / i.drivers.tcp_syn_us.0,
            ));
        }
    }
    t
}
