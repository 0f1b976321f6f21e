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
//! path an nft user would write) loaded with `nft -f` ("nft-sets"). With the Debian VM
//! among the runtimes, each baseline also runs in it: the box booted as a router
//! (`vtnt_runtimes::vm::start_router`) whose own kernel loads the file and forwards
//! between its two NICs, the ends sending to those; its load time is the loader's in the
//! guest, its memory and CPU QEMU's.
//!
//! The NF runs in each runtime of [`NfOptions::runtimes`] ([`crate::fw_host`]): a process
//! in the NF namespace, or the static `vtnt` in a runc or Docker container whose network
//! is that namespace (and the unikernel's, the Debian VM's, LXD's). The kernel baselines
//! run once per repetition in that same namespace, which is the containers' too, so every
//! runtime's row is compared with them; with LXD asked, also in an LXD container that
//! holds the namespace's veths then ([`Filter`], rows of runtime `lxd`).
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
//! With [`NfOptions::pin`] ([`Split`]), the NF runs on the last CPU and the bench with
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
use serde::Serialize;
use vtnt_fw::gen::{self, Family, RuleSpec, TraceSpec};
use vtnt_fw::{print, Action, Classifier, CtState, Hook, IfId, Options, Packet, Ruleset};
use vtnt_measure::cpus::Split;
use vtnt_netns::{Bump, NetNs};

use crate::fw_host::{self, NfHost, NfPlace, RunningNf};
use crate::fw_rr::{self, enter};
use vtnt_runtimes::vm::{self, KernelFilter};
use vtnt_runtimes::Runtime;

/// Sets smaller than this are replayed a trace drawn from one of this size.
const TRACE_RULES_MIN: usize = 1000;

/// What `vtnt bench fw` measures.
#[derive(Debug, Clone)]
pub struct NfOptions {
    pub sizes: Vec<usize>,
    /// The modes measured, in this order (false: stateless; true: stateful).
    pub stateful: Vec<bool>,
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
    pub runtimes: Vec<NfPlace>,
    /// Where the rule files go.
    pub dir: PathBuf,
    /// Also measure iptables in the NF namespace (as a router) with the same file.
    pub iptables: bool,
    /// Also measure nftables with sets there, the same rules.
    pub nftables: bool,
    /// The NF on the last CPU this process may use, the bench (its sender, receiver,
    /// drivers and their servers) on the others ([`Split`]).
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
    /// namespace or the VM a router).
    pub nf: &'static str,
    /// Load time (iptables: `iptables-restore`'s; nft-sets: `nft -f`'s).
    pub load_ms: (f64, f64),
    pub rss_kib: (f64, f64),
    /// Packets per second reaching the receiver.
    pub pps: (f64, f64),
    /// Of the packets sent, the share that reached the receiver.
    pub delivered: (f64, f64),
    /// The NF process's CPU time over the packet-rate measurement, in % of one core
    /// (the spt tender's, QEMU's for the microVM and the VM, its kernel baselines
    /// included; NaN for the kernel baselines in the NF namespace, whose work is softirq
    /// time no process owns). `rss_kib` likewise.
    pub cpu_pct: (f64, f64),
    /// The drivers' figures (NaN: not measured).
    #[serde(flatten)]
    pub drivers: Drivers,
    /// Where it ran ("native": a process in the NF namespace; "runc", "docker": the
    /// static vtnt in a container whose network is that namespace; "spt", "microvm":
    /// the unikernel's NF; "vm": the static vtnt in the Debian VM; "lxd": in an LXD
    /// container whose NICs are that namespace's veths). The kernel baselines say
    /// "native" (netfilter in that namespace, the containers' own), "vm" (the Debian VM's
    /// kernel routing between its NICs) or "lxd" (an LXD container holding the veths).
    pub runtime: &'static str,
    /// The accelerator: "none" (this host's kernel), "none (container)", "none (LXD
    /// container)", the VMs' accelerator and VMM.
    pub accelerator: &'static str,
    /// Whether it ran with `--pin` ([`Split`]).
    pub pinned: bool,
    /// Our NF's CPUs as the kernel listed them (`Cpus_allowed_list`) once pinned, in
    /// its last repetition; `None` unpinned and for the kernel baselines, whose work is
    /// softirq time on the sender's CPUs.
    pub nf_cpus: Option<String>,
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
    /// The least round trip (µs): the path's floor, which the host's scheduling does not
    /// move (the mean's sd does; docs/fw.md).
    pub tcp_rr_min_us: (f64, f64),
    /// sockperf UDP ping-pong, likewise.
    pub udp_rr_tps: (f64, f64),
    pub udp_rr_us: (f64, f64),
    pub udp_rr_p99_us: (f64, f64),
    pub udp_rr_min_us: (f64, f64),
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
            tcp_rr_min_us: ms(&v[5]),
            udp_rr_tps: ms(&v[6]),
            udp_rr_us: ms(&v[7]),
            udp_rr_p99_us: ms(&v[8]),
            udp_rr_min_us: ms(&v[9]),
            tcp_syn_us: ms(&v[10]),
            icmp_us: ms(&v[11]),
            tcp_conn_per_s: ms(&v[12]),
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

/// What every repetition at one rule count and mode shares: the bump, the options, the
/// trace, the drivers' ports, the pinning.
struct Round<'a> {
    b: &'a Bump,
    opts: &'a NfOptions,
    datagrams: &'a Arc<Vec<Vec<u8>>>,
    ports: Option<&'a Ports>,
    pin: Option<&'a Split>,
}

/// One repetition of our NF: load ms, RSS KiB, pps, delivered share, CPU %, then
/// [`drivers`]'; with the NF's CPUs once pinned.
fn rep(r: &Round, host: &NfHost, file: &Path) -> anyhow::Result<(Vec<f64>, Option<String>)> {
    let nf = host.start(file)?;
    through(r, &nf)
}

/// One repetition of a kernel baseline in the full VM ([`NfHost::start_router`]): the
/// ends send to the guest's NICs while it routes; [`rep`]'s figures, QEMU's memory and
/// CPU.
fn rep_in_vm(
    r: &Round,
    host: &NfHost,
    filter: KernelFilter,
    file: &Path,
) -> anyhow::Result<(Vec<f64>, Option<String>)> {
    let b = r.b;
    let s0 = mac(&Filter::Netns(&b.sender), "s0")?;
    let r0 = mac(&Filter::Netns(&b.receiver), "r0")?;
    let ends = [(SENDER, s0.as_str()), (RECEIVER, r0.as_str())];
    let nf = host.start_router(filter, file, ends)?;
    ends_via(b, Some([vm::guest_mac(0), vm::guest_mac(1)]))?;
    let got = through(r, &nf);
    ends_via(b, None)?;
    got
}

/// [`rep`]'s figures through the running `nf` (pinned first if asked).
fn through(r: &Round, nf: &RunningNf) -> anyhow::Result<(Vec<f64>, Option<String>)> {
    let (b, opts) = (r.b, r.opts);
    let cpus = r.pin.map(|p| nf.pin(p.alone())).transpose()?;
    let pid = nf.pid()?;
    let rss = match vtnt_measure::proc::rss_kib(pid) {
        0 => bail!("no resident memory for the NF's process {pid}"),
        kib => kib as f64,
    };
    let (cpu, t) = (vtnt_measure::proc::cpu_ns(pid), Instant::now());
    let [pps, delivered] = measure(b, opts, r.datagrams)?;
    let ns = vtnt_measure::proc::cpu_ns(pid).saturating_sub(cpu);
    let cpu = 100.0 * ns as f64 / 1e9 / t.elapsed().as_secs_f64();
    let mut v = vec![nf.load_ms, rss, pps, delivered, cpu];
    v.extend(drivers(b, opts, r.ports)?);
    Ok((v, cpus))
}

/// Where a kernel baseline filters as a router: the NF namespace itself (natively), or
/// the LXD container that holds its veths then (`--runtimes lxd`).
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

/// Makes `addr` on `dev` where `at` is a permanent neighbour at `mac`.
fn neigh(at: &Filter, addr: &str, mac: &str, dev: &str) -> anyhow::Result<()> {
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
    at.ip(&args).map(drop)
}

/// The bump's ends: the sender's address (behind veth A) and the receiver's (behind B).
const SENDER: Ipv4Addr = Ipv4Addr::new(100, 64, 5, 1);
const RECEIVER: Ipv4Addr = Ipv4Addr::new(100, 64, 5, 2);

/// The MAC address of `dev` where `at` is.
fn mac(at: &Filter, dev: &str) -> anyhow::Result<String> {
    let text = at.ip(&["-o", "link", "show", dev])?;
    let mut w = text.split_whitespace();
    w.find(|x| *x == "link/ether");
    w.next()
        .map(str::to_string)
        .with_context(|| format!("no MAC for {dev} in {}", at.name()))
}

/// Points the ends' neighbour entries for each other at `via` (the MACs to which the
/// sender's frames and the receiver's go: a router's two sides), or back at each other
/// through the bridge (None).
fn ends_via(b: &Bump, via: Option<[String; 2]>) -> anyhow::Result<()> {
    let (s, r) = (&Filter::Netns(&b.sender), &Filter::Netns(&b.receiver));
    let [to_r, to_s] = match via {
        Some(v) => v,
        None => [mac(r, "r0")?, mac(s, "s0")?],
    };
    neigh(s, &RECEIVER.to_string(), &to_r, "s0")?;
    neigh(r, &SENDER.to_string(), &to_s, "r0")
}

/// Turns the NF namespace (or the LXD container holding its veths: `n`) into a Linux
/// router for the kernel baselines (`on`), or back into a bare wire: forwarding, host
/// routes to both ends with their MACs as permanent neighbours (no ARP of its own), and
/// the two ends' neighbour entries for each other pointing at the router instead of
/// through the bridge.
fn router(b: &Bump, n: &Filter, on: bool) -> anyhow::Result<()> {
    if on {
        for k in ["net.ipv4.ip_forward", "net.ipv4.conf.all.rp_filter"] {
            n.sysctl(k, if k.ends_with("forward") { "1" } else { "0" })?;
        }
        let s0 = mac(&Filter::Netns(&b.sender), "s0")?;
        let r0 = mac(&Filter::Netns(&b.receiver), "r0")?;
        for (addr, dev, m) in [(SENDER, "a0", &s0), (RECEIVER, "b0", &r0)] {
            n.ip(&["route", "replace", &format!("{addr}/32"), "dev", dev])?;
            neigh(n, &addr.to_string(), m, dev)?;
        }
        let gw = RECEIVER.to_string();
        n.ip(&["route", "replace", "default", "via", &gw, "dev", "b0"])?;
        // both ends send to the router (replies too: iperf3's TCP and UDP)
        ends_via(b, Some([mac(n, "a0")?, mac(n, "b0")?]))
    } else {
        n.sysctl("net.ipv4.ip_forward", "0")?;
        ends_via(b, None)
    }
}

/// One repetition of a kernel baseline where `at` filters, as a router: its loader
/// reads `file` on its stdin, its `clear` empties the filter after; [`rep`]'s columns
/// (no memory or CPU: the kernel's work is softirq time no process owns).
fn rep_kernel(r: &Round, at: &Filter, base: &Baseline, file: &Path) -> anyhow::Result<Vec<f64>> {
    let (b, opts) = (r.b, r.opts);
    let load = base.filter.loader();
    let t = Instant::now();
    let input = std::fs::File::open(file)?;
    let out = (at.command(load[0]).args(&load[1..]).stdin(input).output())
        .with_context(|| format!("running {} in {}", load[0], at.name()))?;
    if !out.status.success() {
        bail!(
            "{} {}: {}",
            load.join(" "),
            file.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let load = t.elapsed().as_secs_f64() * 1e3;
    let m = measure(b, opts, r.datagrams).and_then(|m| Ok((m, drivers(b, opts, r.ports)?)));
    for c in base.clear {
        must(at, c[0], &c[1..])?;
    }
    let ([pps, delivered], d) = m?;
    let mut v = vec![load, f64::NAN, pps, delivered, f64::NAN];
    v.extend(d);
    Ok(v)
}

/// A kernel baseline: its row's name, its filter (how its file loads), what empties it
/// in the NF namespace.
struct Baseline {
    name: &'static str,
    filter: KernelFilter,
    clear: &'static [&'static [&'static str]],
}

impl Baseline {
    /// Of the set's iptables-save file and its nft one, the one this baseline loads.
    fn file<'a>(&self, iptables: &'a Path, nft: &'a Path) -> &'a Path {
        match self.filter {
            KernelFilter::Iptables => iptables,
            KernelFilter::Nftables => nft,
        }
    }
}

fn baselines(opts: &NfOptions) -> Vec<Baseline> {
    let mut v = Vec::new();
    if opts.iptables {
        v.push(Baseline {
            name: "iptables",
            filter: KernelFilter::Iptables,
            clear: &[
                &["iptables", "-F", "FORWARD"],
                &["iptables", "-P", "FORWARD", "ACCEPT"],
            ],
        });
    }
    if opts.nftables {
        v.push(Baseline {
            name: "nft-sets",
            filter: KernelFilter::Nftables,
            clear: &[&["nft", "flush", "ruleset"]],
        });
    }
    v
}

/// What one row measures: our NF in a runtime, a kernel baseline in the Debian VM, or
/// one where [`Filter`] says: the NF namespace (None: the host's netfilter, which is
/// also the containers') or the LXD container of an LXD host.
enum Unit<'a> {
    Nf(&'a NfHost),
    KernelInVm(&'a NfHost, &'a Baseline),
    Kernel(Option<&'a NfHost>, &'a Baseline),
}

impl Unit<'_> {
    fn nf(&self) -> &'static str {
        match self {
            Unit::Nf(_) => "vtnt",
            Unit::KernelInVm(_, k) | Unit::Kernel(_, k) => k.name,
        }
    }

    fn runtime(&self) -> NfPlace {
        match self {
            Unit::Nf(h) | Unit::KernelInVm(h, _) | Unit::Kernel(Some(h), _) => h.runtime(),
            Unit::Kernel(None, _) => NfPlace::Runtime(Runtime::Native),
        }
    }
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
    if opts.stateful.is_empty() {
        bail!("--modes must name stateless, stateful or both");
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
    let pin = opts.pin.then(Split::new).transpose().context("--pin")?;
    if let Some(p) = &pin {
        p.enter_rest().context("--pin: pinning the bench")?;
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
    pin: Option<&Split>,
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
        for &stateful in &opts.stateful {
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
            // our NF in each runtime, the kernel baselines in the Debian VM and in LXD,
            // then in the NF namespace last (their rows prove the guests' bridges gone and
            // LXD's veths back)
            let kernel = baselines(opts);
            let on = |rt: NfPlace| {
                let kernel = &kernel;
                hosts
                    .iter()
                    .filter(move |h| h.runtime() == rt)
                    .flat_map(move |h| kernel.iter().map(move |k| (h, k)))
            };
            let units: Vec<Unit> = (hosts.iter().map(Unit::Nf))
                .chain(on(NfPlace::Runtime(Runtime::Vm)).map(|(h, k)| Unit::KernelInVm(h, k)))
                .chain(on(NfPlace::Lxd).map(|(h, k)| Unit::Kernel(Some(h), k)))
                .chain(kernel.iter().map(|k| Unit::Kernel(None, k)))
                .collect();
            let mut m = vec![vec![Vec::new(); 5 + DRIVERS]; units.len()];
            let mut nf_cpus = vec![None; units.len()];
            let round = Round {
                b: &b,
                opts,
                datagrams: &datagrams,
                ports: ports.as_ref(),
                pin,
            };
            for _ in 0..opts.reps {
                if (opts.interrupted)() {
                    let _ = std::fs::remove_file(&file);
                    let _ = std::fs::remove_file(&nft_file);
                    bail!("interrupted at {size} rules: namespaces and rule files removed");
                }
                for ((unit, m), cpus) in units.iter().zip(&mut m).zip(&mut nf_cpus) {
                    let (got, pinned) = match unit {
                        Unit::Nf(host) => rep(&round, host, &file)?,
                        Unit::KernelInVm(host, k) => {
                            let f = k.file(&file, &nft_file);
                            rep_in_vm(&round, host, k.filter, f)?
                        }
                        Unit::Kernel(host, k) => {
                            // LXD's container holds the veths until it is dropped, after
                            // the run
                            let lxd = host.map(|h| h.kernel_box()).transpose()?.flatten();
                            let at = lxd.as_ref().map_or(Filter::Netns(&b.nf), Filter::Lxd);
                            router(&b, &at, true)?;
                            let f = k.file(&file, &nft_file);
                            let r = rep_kernel(&round, &at, k, f);
                            router(&b, &at, false)?;
                            (r?, None)
                        }
                    };
                    for (v, x) in m.iter_mut().zip(got) {
                        v.push(x);
                    }
                    *cpus = pinned;
                }
            }
            let _ = std::fs::remove_file(&file);
            let _ = std::fs::remove_file(&nft_file);
            let ms = |v: &[f64]| vtnt_stats::mean_sd(v).unwrap_or((f64::NAN, f64::NAN));
            let found: Vec<NfRow> = (units.iter().zip(&m).zip(nf_cpus))
                .map(|((unit, m), nf_cpus)| NfRow {
                    rules: size,
                    stateful,
                    nf: unit.nf(),
                    load_ms: ms(&m[0]),
                    rss_kib: ms(&m[1]),
                    pps: ms(&m[2]),
                    delivered: ms(&m[3]),
                    cpu_pct: ms(&m[4]),
                    runtime: unit.runtime().name(),
                    accelerator: fw_host::accelerator(unit.runtime()),
                    drivers: Drivers::new(&m[5..], ms),
                    pinned: opts.pin,
                    nf_cpus,
                })
                .collect();
            for row in found {
                each(&row);
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

/// The rows as a table, with each row's packet rate against the 0-rule row of its mode
/// and filter, and a line per rule count and baseline with our rate against its: the
/// baselines in our NF's own runtime (the VM's), else the host's.
pub fn table(rows: &[NfRow]) -> String {
    let mut t = String::from(
        "runtime        accelerator      nf        rules      mode       load ms (sd)      RSS KiB (sd)       packets/s (sd)        of 0 rules  delivered  CPU % (sd)     TCP Mb/s (sd)     UDP Mb/s (sd)     TCP rr/s (sd)      TCP rr us p99 min       UDP rr/s (sd)      UDP rr us p99 min       SYN us (sd)    ICMP us (sd)   TCP conn/s (sd)\n",
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
            "{:<14} {:<16} {:<9} {:<10} {:<10} {:>8.1} ({:>6.1}) {:>9.0} ({:>6.0}) {:>10.0} ({:>8.0}) {:>10.1}% {:>9.1}% {:>5.0} ({:>4.0}) {:>7.0} ({:>6.0}) {:>7.0} ({:>6.0}) {:>8.0} ({:>6.0}) {:>7.1} {:>7.1} {:>7.1} {:>8.0} ({:>6.0}) {:>7.1} {:>7.1} {:>7.1} {:>6.1} ({:>5.1}) {:>6.1} ({:>5.1}) {:>7.0} ({:>6.0})\n",
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
            d.tcp_rr_min_us.0,
            d.udp_rr_tps.0,
            d.udp_rr_tps.1,
            d.udp_rr_us.0,
            d.udp_rr_p99_us.0,
            d.udp_rr_min_us.0,
            d.tcp_syn_us.0,
            d.tcp_syn_us.1,
            d.icmp_us.0,
            d.icmp_us.1,
            d.tcp_conn_per_s.0,
            d.tcp_conn_per_s.1,
        ));
    }
    for r in rows.iter().filter(|r| r.nf == "vtnt") {
        let peers = |z: &&NfRow| z.nf != "vtnt" && z.rules == r.rules && z.stateful == r.stateful;
        // the baselines in its own runtime where there are some (the VM's), else the
        // host's (the containers' netfilter; the unikernel has none of its own)
        let own = rows.iter().filter(peers).any(|z| z.runtime == r.runtime);
        let near = if own { r.runtime } else { "native" };
        for i in rows.iter().filter(peers).filter(|z| z.runtime == near) {
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
