//! Every runtime returns what the native run returns for the same job (scamper JSON
//! lines, run-dependent fields aside: `vtnt_runtimes::normalize`), each against a lab
//! of its own; on the lab, a job of 200 targets too, whose list travels as data. Needs root; a test whose components are missing skips through vtnt-testkit
//! (failing under `VTNT_REQUIRE_ALL=1`: scripts/setup.sh installs them all).

mod common;

use std::path::Path;
use std::time::Duration;

use vtnt_measure::proc::retry_once_if;
use vtnt_runtimes::net::Network;
use vtnt_runtimes::normalize;
use vtnt_runtimes::{RunOptions, Runtime};

/// A fixed seed: every runtime probes the native run's flows, so takes its paths.
fn job() -> vtnt_job::JobSpec {
    parse("trace -P icmp-paris --seed 1 203.0.113.10")
}

/// [`job`] over IPv6: the explicit tunnel's destination's twin, through the lab's dual
/// stack fronts (TUN, or the VM front with neighbour discovery).
fn job6() -> vtnt_job::JobSpec {
    parse("trace -P icmp-paris --seed 1 2001:db8:64::cb00:710a")
}

/// [`job`] and [`job6`] in one job, for every runtime on a lab (each has IPv6; the
/// unikernel's guest the twins of its slot's addresses): one boot of a VM traces both
/// families.
fn dual_job() -> vtnt_job::JobSpec {
    parse("trace -P icmp-paris --seed 1 203.0.113.10 2001:db8:64::cb00:710a")
}

/// Pings of the lab's first hop and a far host.
fn ping_job() -> vtnt_job::JobSpec {
    parse("ping -c 3 -i 0.2 192.0.2.1 203.0.113.10")
}

/// A ping of 200 lab hosts: past the line's inline targets, so the list travels as data
/// (standard input, the VM's second disk, the microVM's boot module).
fn long_job() -> vtnt_job::JobSpec {
    let hosts: Vec<String> = (1..=200).map(|i| format!("100.64.0.{i}")).collect();
    parse(&format!("ping -c 1 --pps 2000 {}", hosts.join(" ")))
}

/// TNT on the reference lab's explicit and invisible tunnels (fixed seed).
fn tnt_job() -> vtnt_job::JobSpec {
    parse("tnt --seed 1 -q 1 203.0.113.10 203.0.113.34")
}

fn parse(words: &str) -> vtnt_job::JobSpec {
    let words: Vec<String> = words.split_whitespace().map(String::from).collect();
    vtnt_job::parse_words(&words, vtnt_job::Vantage::Lab)
        .expect("a valid job")
        .spec
}

/// How the runtimes under test reach the network the native reference run probes.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    /// The lab's namespace and VM front (static guest addresses).
    Lab,
    /// The same, the microVM leasing its address by DHCP.
    Dhcp,
    /// `--net host` from a thread inside the lab's namespace: the host's own network is
    /// then the lab, as a real host's is the Internet it sits on.
    Host,
    /// VMs behind a front (`vtnt lab front`) whose upstream is the lab's namespace: they
    /// probe the lab from its one vantage address, through the forwarder.
    Front,
}

/// Runs `f` in a thread that has joined the network namespace at `netns` (so does every
/// process it starts).
fn in_netns<T: Send + 'static>(netns: &Path, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = std::fs::File::open(netns).expect("opening the lab's namespace");
    std::thread::spawn(move || {
        nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("the run's thread")
}

fn check(test: &str, runtimes: &[Runtime], via: Via) {
    // on the host's network, a TNT job too (its annotations compared like the hops)
    let jobs = match via {
        Via::Host => vec![job(), tnt_job()],
        // every runtime traces over IPv6 too, on a lab and behind a front, and a leased
        // guest takes the twin of its lease by DHCPv6
        Via::Front => vec![dual_job(), tnt_job()],
        Via::Lab => vec![dual_job(), long_job()],
        Via::Dhcp => vec![dual_job()],
    };
    check_jobs(test, runtimes, via, &jobs)
}

fn check_jobs(test: &str, runtimes: &[Runtime], via: Via, jobs: &[vtnt_job::JobSpec]) {
    if !common::basics_ready(test) {
        return;
    }
    for &rt in runtimes {
        if let Some(why) = common::runtime_missing(rt) {
            vtnt_testkit::skip_or_fail(test, &why, None);
            return;
        }
    }
    // a lab per test, named after its first letters (tests run in parallel)
    let lab = common::LabGuard::up(&test.chars().take(3).collect::<String>()).expect("vtnt lab up");
    let opts = RunOptions {
        net: Network::Lab(lab.name.clone()),
        bandwidth_bps: 1_000_000_000,
        timeout: Duration::from_secs(600),
        ..Default::default()
    };
    let front = (via == Via::Front).then(|| lab.front().expect("vtnt lab front"));
    for spec in jobs {
        let native = Runtime::Native.run(spec, &opts).expect("native run");
        assert!(native.ok(), "native run failed: {}", native.stderr);
        let want = normalize(&native.stdout);
        let traces = want
            .iter()
            .filter(|l| l.contains("\"type\":\"trace\"") || l.contains("\"type\":\"ping\""))
            .count();
        assert!(traces > 0, "native output has no record: {}", native.stdout);
        if !spec.every.is_zero() {
            // a round at the start and at each `every` within the hold
            let rounds = spec.hold.as_secs() / spec.every.as_secs() + 1;
            assert_eq!(
                traces as u64,
                rounds * spec.target_list().len() as u64,
                "native rounds: {}",
                native.stdout
            );
        }
        for &rt in runtimes {
            let netns = vtnt_runtimes::guest::Lab::open(&lab.name)
                .expect("the lab's state")
                .netns_path;
            let run = || match via {
                Via::Host => {
                    let opts = RunOptions {
                        net: Network::Host,
                        ..opts.clone()
                    };
                    let spec = spec.clone();
                    in_netns(&netns, move || rt.run(&spec, &opts))
                }
                Via::Front => rt.run(
                    spec,
                    &RunOptions {
                        net: Network::Lab(front.as_ref().expect("the front").name.clone()),
                        ..opts.clone()
                    },
                ),
                Via::Lab | Via::Dhcp => {
                    // as the fleet's agents run jobs: lines handed on as they come, the
                    // first of the output's
                    let mut streamed = Vec::new();
                    let o = RunOptions {
                        dhcp: via == Via::Dhcp,
                        ..opts.clone()
                    };
                    let out = rt.run_streaming(spec, &o, |l| streamed.push(l))?;
                    let lines: Vec<&str> = out
                        .stdout
                        .lines()
                        .filter(|l| !l.trim().is_empty())
                        .collect();
                    assert!(
                        streamed.len() <= lines.len() && lines[..streamed.len()] == streamed,
                        "{}: lines streamed {streamed:?}, output {lines:?}",
                        rt.name()
                    );
                    Ok(out)
                }
            };
            // As `vtnt bench deploy` does: a run that outlived its timeout (a TCG guest that
            // never finished, a `docker run` that never returned) is retried once, loudly.
            let out = retry_on_timeout(test, rt, run)
                .unwrap_or_else(|e| panic!("{} run: {e:#}", rt.name()));
            assert!(
                out.ok(),
                "{} run exited with {:?}: {}",
                rt.name(),
                out.code,
                out.stderr
            );
            if via == Via::Dhcp {
                // the lab leases hosts .130-.229 of the vantage LAN (docs/lab.md)
                let leased = |l: &str| {
                    l.split("\"src\":\"192.0.2.")
                        .nth(1)
                        .and_then(|r| r.split('"').next())
                        .and_then(|h| h.parse::<u8>().ok())
                        .is_some_and(|h| (130..230).contains(&h))
                };
                assert!(
                    out.stdout.lines().any(leased),
                    "{} with DHCP: no leased source address in {}",
                    rt.name(),
                    out.stdout
                );
            }
            assert_eq!(
                normalize(&out.stdout),
                want,
                "{} output differs from native",
                rt.name()
            );
            if rt == Runtime::Spt && via == Via::Lab {
                // the time to the first probe, and its cgroup join, are measured
                let first = out.spawn_to_first_probe.expect("spt: spawn -> first probe");
                let join = out.cgroup_join.expect("spt: the tender's cgroup join");
                assert!(
                    join < first,
                    "join {join:?} within spawn -> first probe {first:?}"
                );
            }
            eprintln!(
                "{test}: {} deploy {:.2} s, execution {:.2} s",
                rt.name(),
                out.deploy_time.as_secs_f64(),
                out.exec_time.as_secs_f64()
            );
        }
    }
}

#[test]
fn runc_matches_native() {
    check("runc_matches_native", &[Runtime::Runc], Via::Lab);
}

#[test]
fn docker_images_match_native() {
    check(
        "docker_images_match_native",
        &[Runtime::DockerScratch, Runtime::Docker],
        Via::Lab,
    );
}

#[test]
fn vm_matches_native() {
    check("vm_matches_native", &[Runtime::Vm], Via::Lab);
}

#[test]
fn microvm_matches_native() {
    check("microvm_matches_native", &[Runtime::Microvm], Via::Lab);
}

/// The unikernel as a process (spt) returns what the native CLI and the microVM return:
/// a trace over IPv4 and IPv6, pings and a TNT campaign.
#[test]
fn spt_matches_native_and_the_microvm() {
    check_jobs(
        "spt_matches_native_and_the_microvm",
        &[Runtime::Spt, Runtime::Microvm],
        Via::Lab,
        &[dual_job(), ping_job(), tnt_job(), long_job()],
    );
}

/// A held job with `every=` runs again every round while it holds, on every runtime:
/// rounds at 0, 1, 2 and 3 s of a 3 s hold, each the same trace as the native run's.
#[test]
fn held_jobs_repeat_every_round() {
    let mut held = job();
    held.hold = Duration::from_secs(3);
    held.every = Duration::from_secs(1);
    check_jobs(
        "held_jobs_repeat_every_round",
        &[
            Runtime::Runc,
            Runtime::DockerScratch,
            Runtime::Microvm,
            Runtime::Spt,
        ],
        Via::Lab,
        &[held],
    );
}

/// The unikernel with `--dhcp` (as a microVM and as an spt process): its IPv4 address
/// leased from the lab's front, its IPv6 address by DHCPv6 (the lease's twin).
#[test]
fn dhcp_unikernel_matches_native() {
    check(
        "dhcp_unikernel_matches_native",
        &[Runtime::Microvm, Runtime::Spt],
        Via::Dhcp,
    );
}

/// Processes and containers on the host's own network (`--net host`) probe what the host
/// probes: run from inside the lab's namespace, they match the native run in the lab.
#[test]
fn host_network_matches_native() {
    check(
        "host_network_matches_native",
        &[
            Runtime::Native,
            Runtime::Runc,
            Runtime::DockerScratch,
            Runtime::Docker,
        ],
        Via::Host,
    );
}

/// VMs on a real network through a front (`vtnt lab front`): the unikernel and the full
/// Debian VM, a trace of both families and a TNT job each, match the native run from the
/// front's upstream.
#[test]
fn vms_behind_a_front_match_native() {
    check(
        "vms_behind_a_front_match_native",
        &[Runtime::Microvm, Runtime::Vm, Runtime::Spt],
        Via::Front,
    );
}

/// Many microVMs behind one front (`vtnt lab front`, the traceroute-aware NAT of
/// vtnt-forward) probe the lab through its single vantage address at once, each tracing
/// its own destination (two of them the same destination with the same seed, so the
/// same probe identities: the forwarder must tell them apart); each gets exactly the
/// native trace, and the front counts every reply delivered, none unmatched.
/// `VTNT_FRONT_N` instances (default 8; the benchmark of docs/benchmarks.md runs 100).
#[test]
fn microvms_behind_one_front_get_their_own_replies() {
    let test = "microvms_behind_one_front_get_their_own_replies";
    if !common::basics_ready(test) {
        return;
    }
    if let Some(why) = common::runtime_missing(Runtime::Microvm) {
        vtnt_testkit::skip_or_fail(test, &why, None);
        return;
    }
    let n: usize = std::env::var("VTNT_FRONT_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let lab = common::LabGuard::up("fr").expect("vtnt lab up");
    let truth = vtnt_lab::truth::truth(&vtnt_lab::Topology::reference());
    let dsts: Vec<String> = truth
        .destinations
        .iter()
        .map(|d| d.dst.to_string())
        .collect();
    // Instances 0 and 1 trace the same destination with the same seed: one of them gets
    // other identities from the forwarder, yet the same Paris flow (an echo keeps the
    // checksum it pinned, which ECMP hashes; over IPv6 too, though the source moved), so
    // the destination is one that has several paths.
    let ecmp = truth
        .destinations
        .iter()
        .find(|d| d.forward_paths.len() > 1)
        .expect("a destination with ECMP")
        .dst
        .to_string();
    let jobs: Vec<vtnt_job::JobSpec> = (0..n)
        .map(|i| {
            let (dst, seed) = match i {
                0 | 1 => (&ecmp, 1),
                i => (&dsts[i % dsts.len()], i + 1),
            };
            // and its IPv6 twin: the front forwards both families (its upstream, the
            // lab, has an IPv6 address)
            parse(&format!(
                "trace -P icmp-paris -q 1 -w 2 --seed {seed} {dst} 2001:db8:64::{dst}"
            ))
        })
        .collect();
    let lab_opts = RunOptions {
        net: Network::Lab(lab.name.clone()),
        ..Default::default()
    };
    let want: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            let out = Runtime::Native.run(j, &lab_opts).expect("native run");
            assert!(out.ok(), "native: {}", out.stderr);
            normalize(&out.stdout)
        })
        .collect();
    // after the native runs: the front's raw sockets see every reply to the lab's
    // address, and the native run's would count as unmatched
    let front = lab.front().expect("vtnt lab front");
    let front_opts = RunOptions {
        net: Network::Lab(front.name.clone()),
        ..Default::default()
    };
    let runs: Vec<_> = jobs
        .iter()
        .cloned()
        .map(|j| {
            let opts = front_opts.clone();
            std::thread::spawn(move || Runtime::Microvm.run(&j, &opts))
        })
        .collect();
    for (i, (run, want)) in runs.into_iter().zip(&want).enumerate() {
        let out = run.join().expect("thread").expect("microvm run");
        assert!(
            out.ok(),
            "instance {i}: exit {:?}: {}",
            out.code,
            out.stderr
        );
        assert_eq!(
            &normalize(&out.stdout),
            want,
            "instance {i} differs from native"
        );
    }
    // the front writes its counters every second
    std::thread::sleep(Duration::from_millis(1500));
    let stats: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("/run/vtnt/lab/{}/stats.json", front.name))
            .expect("the front's stats"),
    )
    .expect("stats JSON");
    let f = &stats["forwarder"];
    eprintln!("{test}: {n} instances, forwarder {f}");
    assert_eq!(f["unmatched"], 0, "{f}");
    assert_eq!(f["delivered"], f["forwarded"], "{f}");
    assert!(
        f["rewrites"].as_u64().unwrap_or(0) >= 1,
        "the repeated identities: {f}"
    );
}

/// The hop addresses of the trace lines of scamper JSON output, in order.
fn hop_addresses(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "trace")
        .flat_map(|v| {
            v["hops"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|h| h["addr"].as_str().map(String::from))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// VMs on a TAP device (`--net tap:...,netns=NS`): a TAP in the lab's namespace behind a
/// Linux router that masquerades onto the lab (what a home router does); the unikernel
/// (as a microVM and as an spt process) and the Debian VM trace through it and see that
/// router, then exactly the native hops. Each traces over IPv6 too (`ip6=`, `gw6=`; the
/// router masquerades IPv6 as well, and the unikernel finds it by neighbour discovery),
/// in the same run.
#[test]
fn vms_on_a_tap_device_reach_the_network_behind_it() {
    let test = "vms_on_a_tap_device_reach_the_network_behind_it";
    if !common::basics_ready(test) {
        return;
    }
    let runtimes = [Runtime::Microvm, Runtime::Spt, Runtime::Vm];
    for rt in runtimes {
        if let Some(why) = common::runtime_missing(rt) {
            vtnt_testkit::skip_or_fail(test, &why, None);
            return;
        }
    }
    if vtnt_runtimes::paths::which("iptables").is_none() {
        vtnt_testkit::skip_or_fail(test, "`iptables` missing (Debian package iptables)", None);
        return;
    }
    let lab = common::LabGuard::up("tap").expect("vtnt lab up");
    let state = vtnt_lab_linux::lab_state(&lab.name).expect("the lab's state");
    let ns = state.netns.clone();
    let sh = |cmd: &str| {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &ns, "sh", "-c", cmd])
            .output()
            .expect("ip netns exec");
        assert!(
            out.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    sh(
        "ip tuntap add dev vtap0 mode tap && ip addr add 10.77.0.1/24 dev vtap0 \
        && ip addr add fd77::1/64 dev vtap0 nodad && ip link set vtap0 up",
    );
    sh("sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1");
    sh(&format!(
        "iptables -t nat -A POSTROUTING -s 10.77.0.0/24 -o {tun} -j MASQUERADE \
         && ip6tables -t nat -A POSTROUTING -s fd77::/64 -o {tun} -j MASQUERADE",
        tun = state.tun
    ));
    let opts = RunOptions {
        net: Network::Lab(lab.name.clone()),
        ..Default::default()
    };
    // each destination's hops behind the router
    let mut want = std::collections::BTreeMap::new();
    for (spec, router) in [(job(), "10.77.0.1"), (job6(), "fd77::1")] {
        let native = Runtime::Native.run(&spec, &opts).expect("native run");
        assert!(native.ok(), "native: {}", native.stderr);
        let mut hops = vec![router.to_string()];
        hops.extend(hop_addresses(&native.stdout));
        want.insert(spec.target_list()[0].to_string(), hops);
    }
    for (i, rt) in runtimes.into_iter().enumerate() {
        let spec = dual_job();
        let net: Network = format!(
            "tap:vtap0,ip=10.77.0.{n}/24,gw=10.77.0.1,ip6=fd77::{n}/64,gw6=fd77::1,netns={ns}",
            n = 2 + i
        )
        .parse()
        .expect("a TAP network");
        let out = retry_on_timeout(test, rt, || {
            rt.run(
                &spec,
                &RunOptions {
                    net: net.clone(),
                    ..opts.clone()
                },
            )
        })
        .unwrap_or_else(|e| panic!("{} on a TAP: {e:#}", rt.name()));
        assert!(
            out.ok(),
            "{} on a TAP: exit {:?}: {}",
            rt.name(),
            out.code,
            out.stderr
        );
        for dst in spec.target_list() {
            let dst = dst.to_string();
            let trace = out
                .stdout
                .lines()
                .filter(|l| l.contains(&format!("\"dst\":\"{dst}\"")));
            let got = hop_addresses(&trace.collect::<Vec<_>>().join("\n"));
            assert_eq!(got, want[&dst], "{} on a TAP, to {dst}", rt.name());
        }
    }
}

/// Runs `run`, and once more if the instance outlived its timeout (as `vtnt bench deploy`
/// does: a TCG guest that never finished, a `docker run` that never returned), loudly.
fn retry_on_timeout<T>(
    test: &str,
    rt: Runtime,
    mut run: impl FnMut() -> vtnt_runtimes::Result<T>,
) -> anyhow::Result<T> {
    retry_once_if(
        || run().map_err(anyhow::Error::from),
        |e| vtnt_runtimes::timed_out(e.as_ref()),
        |e| eprintln!("{test}: {} timed out, retrying once: {e:#}", rt.name()),
    )
}
