//! `vtnt fleet` with real processes: each test starts its own broker (`vtnt fleet up` on a
//! free loopback port, its own store, `down` on drop), its agents as children of the
//! `vtnt` binary (SIGKILLed on drop) and, where jobs run, a lab of its own (the runtime
//! tests' `LabGuard`); jobs run the `native` runtime in that lab. The cluster test starts
//! three nats-servers of its own instead. Needs root, Debian's
//! nats-server and what the native runtime needs (the runtime tests' `basics_ready`);
//! missing, the test skips through vtnt-testkit.
//! The `vtnt` binary is [`vtnt_testkit::vtnt_binary`]: this is not its package, so
//! `CARGO_BIN_EXE_vtnt` does not exist here.

#[path = "../../runtimes/tests/common/mod.rs"]
mod common;

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A job long enough to still run while the test does something else (about 3 s).
const LONG_JOB: &str = "ping -c 30 -i 0.1 203.0.113.10";
/// A short job (a trace, about 1 s with deploy).
const SHORT_JOB: &str = "trace -q 1 203.0.113.10";
/// [`SHORT_JOB`] over IPv6, to the lab's twin of the same destination.
const SHORT_JOB6: &str = "trace -q 1 2001:db8:64::cb00:710a";

fn vtnt(args: &[&str]) -> Output {
    Command::new(vtnt_testkit::vtnt_binary())
        .args(args)
        .output()
        .expect("running vtnt")
}

/// Whether a fleet test can run here; when not, skips `test` through vtnt-testkit. With
/// `jobs`, also what the native runtime needs (the runtime tests' own check: root, cgroup
/// v1 on the allow-list, the static binary).
fn ready(test: &str, jobs: bool) -> bool {
    if jobs && !common::basics_ready(test) {
        return false;
    }
    if let Some(why) = vtnt_testkit::missing_root_or(&["nats-server"]) {
        vtnt_testkit::skip_or_fail(test, &why, None);
        return false;
    }
    true
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A broker of the test's own, down on drop.
struct Broker {
    name: String,
    port: String,
    /// How commands reach it: `--fleet NAME` (its keys found by role) or `--nats URL`.
    reach: Vec<String>,
    /// The tenant `status` asks as: the first `--tenant` it was started with.
    tenant: String,
}

impl Broker {
    fn up(tag: &str) -> Broker {
        Broker::up_with(tag, &[])
    }

    /// `vtnt fleet up` with `extra` options.
    fn up_with(tag: &str, extra: &[&str]) -> Broker {
        let name = format!("t{tag}{}", std::process::id());
        let port = free_port().to_string();
        let mut args = vec!["fleet", "up", "--name", &name, "--port", &port];
        args.extend_from_slice(extra);
        let out = vtnt(&args);
        assert!(
            out.status.success(),
            "fleet up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(url.ends_with(&format!("://127.0.0.1:{port}")), "{url}");
        let tenant = extra
            .iter()
            .position(|a| *a == "--tenant")
            .map_or("default", |i| extra[i + 1]);
        Broker {
            reach: vec!["--fleet".into(), name.clone()],
            tenant: tenant.to_string(),
            name,
            port,
        }
    }

    /// Servers that are not this test's `vtnt fleet up` (a cluster): nothing to stop.
    fn at(url: String) -> Broker {
        Broker::at_with(url, &[])
    }

    /// The same, with `extra` connection options.
    fn at_with(url: String, extra: &[&str]) -> Broker {
        Broker {
            name: String::new(),
            reach: [&["--nats", &url][..], extra]
                .concat()
                .into_iter()
                .map(String::from)
                .collect(),
            tenant: "default".into(),
            port: String::new(),
        }
    }

    /// SIGKILLs the server, then starts it again on the same port and store.
    fn kill_and_restart(&self, down_for: Duration) {
        let pid_file = format!("/run/vtnt/fleet/{}/pid", self.name);
        let pid = std::fs::read_to_string(&pid_file).expect("the server's pid file");
        let st = Command::new("kill")
            .args(["-KILL", pid.trim()])
            .status()
            .expect("kill");
        assert!(st.success());
        std::thread::sleep(down_for);
        let out = vtnt(&["fleet", "up", "--name", &self.name, "--port", &self.port]);
        assert!(
            out.status.success(),
            "fleet up again: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The key file of `role` (`agent`, `tenant-<name>`).
    fn key(&self, role: &str) -> String {
        format!("/run/vtnt/fleet/{}/keys/{role}.nk", self.name)
    }

    fn run(&self, cmd: &str, args: &[&str]) -> Output {
        let mut a = vec!["fleet", cmd];
        a.extend(self.reach.iter().map(String::as_str));
        a.extend_from_slice(args);
        vtnt(&a)
    }

    /// `fleet submit --json`: the event.
    fn submit(&self, args: &[&str], job: &str) -> Value {
        let mut a = vec!["--runtime", "native", "--json"];
        a.extend_from_slice(args);
        a.push("--");
        a.extend(job.split_whitespace());
        let out = self.run("submit", &a);
        assert!(
            out.status.success(),
            "submit: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("the event")
    }

    fn status(&self) -> Value {
        self.try_status().unwrap_or_else(|e| panic!("status: {e}"))
    }

    /// `fleet status --json`, or its error.
    fn try_status(&self) -> Result<Value, String> {
        let out = self.run("status", &["--json", "--tenant", &self.tenant]);
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(serde_json::from_slice(&out.stdout).expect("status JSON"))
    }

    fn node_state(&self, node: &str) -> Option<String> {
        self.status()["nodes"]
            .as_array()?
            .iter()
            .find(|n| n["node"] == node)
            .map(|n| n["status"].as_str().unwrap_or("").to_string())
    }

    /// Waits until `node` heartbeats as up. A failing status call counts as not yet: a
    /// three-server cluster just started answers with timeouts while it elects the
    /// streams' leaders (CI saw one on a busy host).
    fn wait_up(&self, node: &str) {
        let t0 = Instant::now();
        loop {
            let got = self.try_status();
            let up = got.as_ref().is_ok_and(|s| {
                s["nodes"]
                    .as_array()
                    .is_some_and(|ns| ns.iter().any(|n| n["node"] == node && n["status"] == "up"))
            });
            if up {
                return;
            }
            // (generous: agents of tests running side by side start on a busy host)
            assert!(
                t0.elapsed() < Duration::from_secs(45),
                "{node} never came up (last status: {got:?})"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `fleet results`: record lines per job and summaries, once `n` jobs are finished.
    /// A failing call is tried again until the deadline (a cluster electing new stream
    /// leaders answers with timeouts meanwhile), and fails the test then.
    fn results(&self, n: usize) -> (Vec<String>, Vec<Value>) {
        // a bound for a hang, not a figure: after a cluster's failover on a loaded 2-core
        // host a job has once taken longer than 60 s to come back
        const WITHIN: Duration = Duration::from_secs(120);
        let t0 = Instant::now();
        loop {
            let out = self.run("results", &[]);
            if !out.status.success() {
                assert!(
                    t0.elapsed() < WITHIN,
                    "results: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                std::thread::sleep(Duration::from_millis(500));
                continue;
            }
            let summaries: Vec<Value> = String::from_utf8_lossy(&out.stderr)
                .lines()
                .filter(|l| l.contains(" records, queue "))
                .map(|l| Value::String(l.to_string()))
                .collect();
            if summaries.len() >= n {
                let lines = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .map(String::from)
                    .collect();
                return (lines, summaries);
            }
            assert!(
                t0.elapsed() < WITHIN,
                "only {} of {n} jobs finished",
                summaries.len()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if !self.name.is_empty() {
            let _ = vtnt(&["fleet", "down", "--name", &self.name]);
        }
    }
}

/// An agent process, SIGKILLed on drop; its stderr (the log) in a file.
struct Agent {
    node: String,
    child: Child,
    log: PathBuf,
}

impl Agent {
    fn start(broker: &Broker, node: &str, location: &str, net: &[&str], extra: &[&str]) -> Agent {
        let log =
            std::env::temp_dir().join(format!("vtnt-fleet-{node}-{}.log", std::process::id()));
        let file = std::fs::File::create(&log).expect("agent log");
        let mut cmd = Command::new(vtnt_testkit::vtnt_binary());
        cmd.arg("agent")
            .args(&broker.reach)
            .args(["--node", node, "--location", location])
            .args([
                "--slots",
                "1",
                "--runtimes",
                "native",
                "--heartbeat-ms",
                "200",
            ])
            .args(net)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(file);
        let agent = Agent {
            node: node.to_string(),
            child: cmd.spawn().expect("starting vtnt agent"),
            log,
        };
        // guarded first: a failure while waiting still kills it
        broker.wait_up(node);
        agent
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(st.success());
    }

    /// Waits (bounded) for the agent to exit; its exit code.
    fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                return st.code();
            }
            assert!(
                t0.elapsed() < within,
                "{} did not exit within {within:?}",
                self.node
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The queue time (submission to start on the agent) a summary line reports, ms.
fn queue_ms(summary: &str) -> f64 {
    summary
        .split(", queue ")
        .nth(1)
        .and_then(|r| r.split(" ms").next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no queue time in {summary}"))
}

/// A lab of the test's own (down on drop), as the runtime tests start theirs.
fn lab(tag: &str) -> common::LabGuard {
    common::LabGuard::up(tag).expect("vtnt lab up")
}

fn lab_net(lab: &common::LabGuard) -> Vec<&str> {
    vec!["--lab", lab.name.as_str()]
}

/// (a) Every slot busy: a discard-mode request is discarded at once (the server's "no
/// responders"); then SIGTERM drains: the running job finishes and the agent exits 0.
#[test]
fn discard_with_every_slot_busy_is_decided_at_once_and_sigterm_drains() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let broker = Broker::up("dis");
    let lab = lab("dis");
    let mut agent = Agent::start(&broker, "d1", "fr", &lab_net(&lab), &[]);
    let first = broker.submit(&["--mode", "discard", "--location", "fr"], LONG_JOB);
    assert_eq!(first["outcome"]["outcome"], "accepted", "{first}");
    assert_eq!(first["outcome"]["node"], "d1");
    let mut decisions = Vec::new();
    for _ in 0..5 {
        let ev = broker.submit(&["--mode", "discard", "--location", "fr"], SHORT_JOB);
        assert_eq!(ev["outcome"]["outcome"], "discarded", "{ev}");
        decisions.push(ev["decision_us"].as_u64().expect("decision_us"));
    }
    let any = broker.submit(&["--mode", "discard"], SHORT_JOB);
    assert_eq!(
        any["outcome"]["outcome"], "discarded",
        "location any: {any}"
    );
    eprintln!(
        "discard decision with every slot busy, us: {decisions:?}; accepted: {} us",
        first["decision_us"]
    );
    assert!(decisions.iter().all(|&d| d < 50_000), "{decisions:?}");
    // drain while the job runs
    agent.signal("TERM");
    assert_eq!(
        agent.wait_exit(Duration::from_secs(30)),
        Some(0),
        "{}",
        agent.log()
    );
    let (lines, summaries) = broker.results(1);
    let s = summaries[0].as_str().unwrap();
    assert!(
        s.contains(&format!(
            "job {} on d1: ok, ",
            first["job"].as_str().unwrap()
        )),
        "{s}"
    );
    eprintln!(
        "discard mode, submission to start on the agent: {} ms",
        queue_ms(s)
    );
    assert!(
        lines.iter().any(|l| l.contains("\"type\":\"ping\"")),
        "{lines:?}"
    );
    assert_eq!(broker.node_state("d1").as_deref(), Some("stopped"));
}

/// (b) Wait mode: more jobs than slots on two agents of one slot each; every job
/// completes and every result is stored exactly once.
#[test]
fn wait_mode_jobs_on_two_agents_all_complete_once() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let broker = Broker::up("wai");
    let lab = lab("wai");
    let json = ["--log-format", "json"];
    let _a = Agent::start(&broker, "w1", "fr", &lab_net(&lab), &json);
    let _b = Agent::start(&broker, "w2", "pl", &lab_net(&lab), &json);
    let mut jobs = Vec::new();
    let t0 = Instant::now();
    // the last over IPv6 (the lab's twin of the same destination): carried unchanged
    for job in [SHORT_JOB, SHORT_JOB, SHORT_JOB, SHORT_JOB6] {
        let ev = broker.submit(&["--mode", "wait"], job);
        assert_eq!(ev["outcome"]["outcome"], "queued", "{ev}");
        jobs.push(ev["job"].as_str().unwrap().to_string());
    }
    let (lines, summaries) = broker.results(4);
    let twin = SHORT_JOB6.rsplit(' ').next().unwrap();
    let traces6 = lines
        .iter()
        .filter(|l| l.contains("\"type\":\"trace\"") && l.contains(&format!("\"dst\":\"{twin}\"")))
        .count();
    assert_eq!(traces6, 1, "the IPv6 trace came back: {summaries:?}");
    eprintln!(
        "4 jobs on 2 agents in wait mode: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let mut nodes = std::collections::BTreeSet::new();
    for j in &jobs {
        let s = summaries
            .iter()
            .filter_map(|s| s.as_str())
            .find(|s| s.contains(&format!("job {j} on ")))
            .unwrap_or_else(|| panic!("no summary for {j}: {summaries:?}"));
        assert!(s.contains(": ok, 3 records"), "{s}");
        nodes.insert(
            s.split(" on ")
                .nth(1)
                .unwrap()
                .split(':')
                .next()
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(nodes.len(), 2, "both agents worked: {nodes:?}");
    // each agent's log: JSON lines, each job started and done on the node that ran it
    let events: Vec<Value> = [&_a, &_b]
        .iter()
        .flat_map(|a| a.log().lines().map(String::from).collect::<Vec<_>>())
        .map(|l| serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for j in &jobs {
        let of = |m: &str| {
            events
                .iter()
                .filter(|e| e["message"] == m && e["job"] == j.as_str())
                .collect::<Vec<_>>()
        };
        let (started, done) = (of("job started"), of("job done"));
        assert_eq!((started.len(), done.len()), (1, 1), "{j}: {events:?}");
        assert_eq!(started[0]["level"], "INFO");
        assert_eq!(started[0]["runtime"], "native");
        assert_eq!(done[0]["status"], "ok");
        assert_eq!(done[0]["records"], 3);
        assert_eq!(started[0]["node"], done[0]["node"]);
    }
    let queued: Vec<f64> = summaries
        .iter()
        .filter_map(|s| s.as_str())
        .map(queue_ms)
        .collect();
    eprintln!("wait mode, submission to start on the agent, ms: {queued:?}");
    // 3 records per trace job (cycle start, trace, cycle stop), each printed once
    assert_eq!(lines.len(), 12, "{lines:?}");
    // stored exactly once: 3 records + 1 summary per job
    assert_eq!(broker.status()["results_stored"], 16);
}

/// (c) An agent SIGKILLed in the middle of a wait-mode job: its watchdog kills the job's
/// processes and removes its deploy directories and cgroups within seconds, and JetStream
/// redelivers the job to the other agent once the ack wait passes. That agent is
/// SIGKILLed with its watchdog in the middle of the redelivered run: its job's processes
/// outlive both, until a new agent of the same node starts and removes them, its
/// directories and cgroups; the job comes a third time, and its result is stored exactly
/// once.
#[test]
fn a_killed_agent_leaves_nothing_behind_and_its_job_is_stored_once() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let broker = Broker::up("kil");
    let lab = lab("kil");
    let mut agents = vec![
        Agent::start(&broker, "k1", "fr", &lab_net(&lab), &[]),
        Agent::start(&broker, "k2", "fr", &lab_net(&lab), &[]),
    ];
    // about 5 s: still probing while the test looks
    let ev = broker.submit(
        &["--mode", "wait", "--location", "fr"],
        "ping -c 50 -i 0.1 203.0.113.10",
    );
    let job = ev["job"].as_str().unwrap().to_string();
    let victim = agents.remove(running(&agents, &job, 1));
    let probing = job_processes(&victim);
    victim.signal("KILL");
    let t_kill = Instant::now();
    gone(&probing, &scope_dirs(&victim.node), Duration::from_secs(3));
    eprintln!(
        "the SIGKILLed agent's job processes, cgroups and directories gone {:.0} ms after the kill",
        t_kill.elapsed().as_secs_f64() * 1e3
    );
    drop(victim);
    // the redelivered run: its agent and its watchdog are SIGKILLed together
    let victim = agents.remove(running(&agents, &job, 2));
    let probing = job_processes(&victim);
    // what its job has on the host: cgroups, deploy directories
    let held: Vec<PathBuf> = scope_dirs(&victim.node)
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
        .filter(|p| p.is_dir())
        .collect();
    assert!(!held.is_empty());
    for w in watchdogs(&victim) {
        kill9(w);
    }
    victim.signal("KILL");
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        probing.iter().all(alive),
        "with no watchdog, the job's processes outlive their agent until it comes back"
    );
    // (its log goes: the new agent's has the same name)
    let node = victim.node.clone();
    drop(victim);
    let again = Agent::start(&broker, &node, "fr", &lab_net(&lab), &[]);
    gone(&probing, &held, Duration::from_secs(1));
    assert!(
        again
            .log()
            .contains("removed what an earlier agent of this node left")
            && again.log().contains("cleaned=processes="),
        "{}",
        again.log()
    );
    let (lines, summaries) = broker.results(1);
    let s = summaries[0].as_str().unwrap();
    assert!(
        s.contains(&format!("job {job} on {}: ok, ", again.node)),
        "{s}"
    );
    assert!(
        again
            .log()
            .contains(&format!("job={job} runtime=native delivery=3")),
        "{}",
        again.log()
    );
    let records = lines.len() as u64;
    assert!(records >= 3, "{lines:?}");
    assert_eq!(broker.status()["results_stored"], records + 1);
}

/// (c') A wait-mode job of 40 targets whose agent is SIGKILLed once some of their
/// records are stored: the delivery that follows (on the other agent) probes only the
/// targets whose records are not, as the probes reaching the lab show (counted on its
/// TUN), and every target's record is stored exactly once.
#[test]
fn a_job_delivered_again_probes_only_the_targets_whose_results_are_not_stored() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let broker = Broker::up("res");
    let lab = lab("res");
    let mut agents = vec![
        Agent::start(&broker, "s1", "fr", &lab_net(&lab), &[]),
        Agent::start(&broker, "s2", "fr", &lab_net(&lab), &[]),
    ];
    let targets: Vec<String> = (1..=40).map(|h| format!("203.0.113.{h}")).collect();
    let netns = Path::new("/run/netns").join(&lab.name);
    let capture = vtnt_linux::host_stamps::Background::start(
        &netns,
        "vtnt0",
        vtnt_linux::host_stamps::Side::SharedNamespace,
    )
    .expect("capturing on the lab's TUN");
    // one probe a target, 4 a second: about 10 s
    let job = format!("ping -c 1 -W 1 --pps 4 {}", targets.join(" "));
    let ev = broker.submit(&["--mode", "wait", "--location", "fr"], &job);
    let id = ev["job"].as_str().unwrap().to_string();
    let victim = agents.remove(running(&agents, &id, 1));
    let t0 = Instant::now();
    while broker.status()["results_stored"].as_u64().unwrap_or(0) < 10 {
        assert!(t0.elapsed() < Duration::from_secs(30), "no record stored");
        std::thread::sleep(Duration::from_millis(50));
    }
    // the progress is stored every 0.2 s
    std::thread::sleep(Duration::from_millis(500));
    victim.signal("KILL");
    let kill_at = std::time::SystemTime::now();
    drop(victim);
    let (lines, summaries) = broker.results(1);
    let captured = capture.finish().expect("the capture");
    let s = summaries[0].as_str().unwrap();
    let survivor = &agents[0].node;
    assert!(
        s.contains(&format!("job {id} on {survivor}: ok, 42 records, ")),
        "{s}"
    );
    let resumed: usize = s
        .split(", resumed: ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|k| k.parse().ok())
        .expect("how many targets the first delivery stored");
    assert!((5..40).contains(&resumed), "{s}");
    // each target's record once (and the cycle-start and cycle-stop records, which name
    // no target), stored once
    let mut dsts: Vec<String> = lines
        .iter()
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["type"] == "ping").then(|| v["dst"].as_str().unwrap().to_string())
        })
        .collect();
    let pings = dsts.len();
    dsts.sort();
    dsts.dedup();
    assert_eq!((dsts.len(), pings), (40, 40), "{lines:?}");
    assert_eq!(lines.len(), 42, "{lines:?}");
    assert_eq!(broker.status()["results_stored"], 43);
    // at the lab: every target is probed once, but for those in flight when the agent
    // died (sent, their records not stored yet), probed again
    let mut probes: std::collections::BTreeMap<String, usize> = Default::default();
    for f in &captured.frames {
        let p = &f.packet;
        if p.len() >= 28 && p[0] >> 4 == 4 && p[9] == 1 && p[(p[0] & 15) as usize * 4] == 8 {
            let dst = std::net::Ipv4Addr::new(p[16], p[17], p[18], p[19]);
            *probes.entry(dst.to_string()).or_default() += 1;
        }
    }
    assert_eq!(captured.drops, 0, "the capture lost packets");
    assert!(
        targets
            .iter()
            .all(|t| (1..=2).contains(&probes.get(t).copied().unwrap_or(0))),
        "{probes:?}"
    );
    // the records that the first delivery stored (probed before the kill) hold the
    // targets of its progress, which the second did not probe again
    let kill_us = kill_at
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let first: Vec<String> = lines
        .iter()
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let start = v["start"]["sec"].as_u64()? * 1_000_000 + v["start"]["usec"].as_u64()?;
            (v["type"] == "ping" && start < kill_us).then(|| v["dst"].as_str().unwrap().to_string())
        })
        .collect();
    let once = first.iter().filter(|t| probes[*t] == 1).count();
    let twice = probes.values().filter(|n| **n == 2).count();
    eprintln!(
        "{resumed} of 40 targets in the progress stored before the agent died; of the {} records its delivery stored, {once} targets probed once; {twice} targets probed twice (in flight)",
        first.len()
    );
    assert!(once >= resumed, "{resumed} resumed, {first:?}, {probes:?}");
}

/// Which of `agents` started delivery `delivery` of `job`, waited for (bounded).
fn running(agents: &[Agent], job: &str, delivery: u32) -> usize {
    let t0 = Instant::now();
    let started = "job started node=";
    let this = format!("job={job} runtime=native delivery={delivery} ");
    loop {
        let logged = |a: &Agent| {
            a.log()
                .lines()
                .any(|l| l.contains(started) && l.contains(&this))
        };
        if let Some(i) = agents.iter().position(logged) {
            return i;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no agent started delivery {delivery} of {job}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A process and its start time (a pid may be reused).
type Proc = (u32, u64);

/// `pid`'s parent and start time (`/proc/<pid>/stat`), unless it is gone or a zombie
/// (dead, waiting for whoever adopted it to reap it).
fn stat(pid: u32) -> Option<(u32, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
    if f.first() == Some(&"Z") {
        return None;
    }
    Some((f.get(1)?.parse().ok()?, f.get(19)?.parse().ok()?))
}

fn alive(p: &Proc) -> bool {
    stat(p.0).is_some_and(|(_, start)| start == p.1)
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Every process below `pid`.
fn descendants(pid: u32) -> Vec<Proc> {
    let all: Vec<(u32, u32, u64)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter_map(|p: u32| stat(p).map(|(ppid, start)| (p, ppid, start)))
        .collect();
    let mut out: Vec<Proc> = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for &(p, ppid, start) in &all {
            if ppid == parent {
                out.push((p, start));
                parents.push(p);
            }
        }
    }
    out
}

/// The processes of the job `agent` runs (`vtnt job ...`, whatever runs it), waited for.
fn job_processes(agent: &Agent) -> Vec<Proc> {
    let t0 = Instant::now();
    loop {
        let found: Vec<Proc> = descendants(agent.child.id())
            .into_iter()
            .filter(|p| cmdline(p.0).contains("vtnt-job=1"))
            .collect();
        if !found.is_empty() {
            return found;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{} started no job process",
            agent.node
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `agent`'s watchdogs: its children running `vtnt agent` too (a fork of it).
fn watchdogs(agent: &Agent) -> Vec<Proc> {
    descendants(agent.child.id())
        .into_iter()
        .filter(|p| cmdline(p.0).contains(" agent "))
        .collect()
}

fn kill9(p: Proc) {
    if alive(&p) {
        let _ = Command::new("kill")
            .args(["-KILL", &p.0.to_string()])
            .status();
    }
}

/// Where node `node`'s agent keeps what its jobs leave on the host: its cgroup (the
/// memory controller's), its run and work directories.
fn scope_dirs(node: &str) -> [PathBuf; 3] {
    let scope = format!("agent-{node}");
    [
        PathBuf::from("/sys/fs/cgroup/memory/vtnt").join(&scope),
        vtnt_runtimes::paths::run_base().join(&scope),
        vtnt_runtimes::paths::work_base().join(&scope),
    ]
}

/// Waits until `procs` and `paths` are gone; fails after `within`.
fn gone(procs: &[Proc], paths: &[PathBuf], within: Duration) {
    let left = || -> Vec<String> {
        let mut left: Vec<String> = procs
            .iter()
            .filter(|p| alive(p))
            .map(|p| format!("process {} ({})", p.0, cmdline(p.0)))
            .collect();
        left.extend(
            paths
                .iter()
                .filter(|d| d.exists())
                .map(|d| d.display().to_string()),
        );
        left
    };
    let t0 = Instant::now();
    while !left().is_empty() {
        assert!(
            t0.elapsed() < within,
            "still there {within:?} on: {:?}",
            left()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A file of the test's own, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    /// `lines` one a line, in the temporary directory under `name` and the test's pid.
    fn lines(name: &str, lines: impl Iterator<Item = String>) -> TempFile {
        let p = std::env::temp_dir().join(format!("vtnt-{name}-{}", std::process::id()));
        let mut text = String::new();
        for l in lines {
            text.push_str(&l);
            text.push('\n');
        }
        std::fs::write(&p, text).expect("a targets file");
        TempFile(p)
    }

    fn path(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `n` lab addresses in 100.64.0.0/10, from 100.64.0.1 on (the lab's hosts answer pings
/// there), 250 a /24.
fn lab_targets(n: usize) -> impl Iterator<Item = String> {
    (0..n).map(|i| format!("100.{}.{}.{}", 64 + i / 62_500, i / 250 % 250, i % 250 + 1))
}

/// (k) A job of 20,000 targets (a ping each, 20,000 a second into the lab): its target
/// list travels apart from its request (past NATS's largest message as a line on main) and
/// from the process's arguments (past Linux's largest); every target's record comes back,
/// once. A job past what a fleet job or its runtime takes is refused before anything is
/// sent, saying so.
#[test]
fn a_job_of_twenty_thousand_targets_runs_and_larger_ones_are_refused_at_once() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let broker = Broker::up("big");
    let lab = lab("big");
    let _agent = Agent::start(&broker, "g1", "fr", &lab_net(&lab), &[]);
    let list = TempFile::lines("big", lab_targets(20_000));
    let t0 = Instant::now();
    let job = format!(
        "ping -c 1 --pps 20000 --window 20000 --targets {}",
        list.path()
    );
    let ev = broker.submit(&["--mode", "wait"], &job);
    let (lines, summaries) = broker.results(1);
    eprintln!(
        "a 20,000-target job submitted, run and its results read in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let s = summaries[0].as_str().unwrap();
    assert!(
        s.contains(&format!(
            "job {} on g1: ok, 20002 records",
            ev["job"].as_str().unwrap()
        )),
        "{s}"
    );
    let pinged: std::collections::BTreeSet<&str> = lines
        .iter()
        .filter(|l| l.starts_with("{\"type\":\"ping\""))
        .filter_map(|l| l.split("\"dst\":\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!((lines.len(), pinged.len()), (20_002, 20_000));
    // too many for the spt runtime's command line, too many for any fleet job: refused
    // before the broker is asked
    let spt = TempFile::lines("big-spt", lab_targets(8001));
    let most = TempFile::lines("big-most", lab_targets((1 << 20) + 1));
    for (runtime, file, says) in [
        (
            "spt",
            &spt,
            "the spt runtime takes at most 8000 targets and this job has 8001",
        ),
        (
            "native",
            &most,
            "a fleet job takes at most 1048576 targets and this job has 1048577",
        ),
    ] {
        let t0 = Instant::now();
        let out = broker.run(
            "submit",
            &[
                "--runtime",
                runtime,
                "--",
                "ping",
                "-c",
                "1",
                "--targets",
                &file.path(),
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{err}");
        eprintln!("refused in {:.1} s: {says}", t0.elapsed().as_secs_f64());
    }
}

/// (d) A node that stops heartbeating (SIGSTOP) is shown down once its deadline (3
/// heartbeats of 200 ms) has passed since its last heartbeat, and up again when it
/// resumes. The deadline counts from the last heartbeat, at most one period before the
/// stop: a status asked after the deadline and that period must show it down. (How long
/// a status call takes is not the point: one asked while the frozen node still looks
/// alive waits for its backlog count, `backlog::TIMEOUT`.)
#[test]
fn a_silent_node_is_shown_down_within_its_deadline() {
    if !ready(vtnt_testkit::test_name!(), false) {
        return;
    }
    let broker = Broker::up("hb");
    let agent = Agent::start(&broker, "h1", "fr", &["--net", "host"], &[]);
    assert_eq!(broker.node_state("h1").as_deref(), Some("up"));
    agent.signal("STOP");
    std::thread::sleep(Duration::from_millis(600 + 200 + 50));
    let t0 = Instant::now();
    assert_eq!(
        broker.node_state("h1").as_deref(),
        Some("down"),
        "h1 not shown down after its deadline"
    );
    eprintln!(
        "silent node shown down by a status of {:.0} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );
    agent.signal("CONT");
    broker.wait_up("h1");
}

/// (e) Bad input fails at once with a clear message and a non-zero exit: an unknown
/// runtime, a runtime no node offers, malformed job words, an unknown location, an
/// unreachable broker; and a public target the agent was not allowed refused by it.
#[test]
fn bad_input_is_refused_clearly() {
    if !ready(vtnt_testkit::test_name!(), false) {
        return;
    }
    let broker = Broker::up("bad");
    let _agent = Agent::start(&broker, "b1", "fr", &["--net", "host"], &[]);
    let fails = |args: &[&str], says: &str| {
        let t0 = Instant::now();
        let out = vtnt(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            t0.elapsed() < Duration::from_secs(8),
            "{args:?} took {:?}",
            t0.elapsed()
        );
    };
    let u = [broker.reach[0].as_str(), broker.reach[1].as_str()];
    fn with<'a>(u: [&'a str; 2], extra: &[&'a str]) -> Vec<&'a str> {
        [&["fleet", "submit", u[0], u[1]][..], extra].concat()
    }
    fails(
        &with(u, &["--runtime", "dance", "--", "trace", "192.0.2.1"]),
        "dance",
    );
    fails(
        &with(u, &["--runtime", "runc", "--", "trace", "192.0.2.1"]),
        "runs `runc`",
    );
    fails(
        &with(
            u,
            &[
                "--runtime",
                "native",
                "--location",
                "xx",
                "--",
                "trace",
                "192.0.2.1",
            ],
        ),
        "location `xx`",
    );
    fails(
        &with(u, &["--runtime", "native", "--", "dance", "192.0.2.1"]),
        "job:",
    );
    fails(
        &with(
            u,
            &["--runtime", "native", "--", "trace", "-q", "0", "192.0.2.1"],
        ),
        "job:",
    );
    fails(
        &with(u, &["--runtime", "native", "--", "trace", "8.8.8.8"]),
        "no target to probe",
    );
    fails(
        &with(
            u,
            &[
                "--runtime",
                "native",
                "--location",
                "a.b",
                "--",
                "trace",
                "192.0.2.1",
            ],
        ),
        "--location",
    );
    // a broker refused before it writes anything
    let name = format!("tbad-up{}", std::process::id());
    let port = free_port().to_string();
    for extra in [
        &["--tenant", "a.b"][..],
        &["--tls-cert", "/nope", "--tls-key", "/nope"],
    ] {
        fails(
            &[
                &["fleet", "up", "--name", &name, "--port", &port][..],
                extra,
            ]
            .concat(),
            "--t",
        );
        assert!(!std::path::Path::new("/run/vtnt/fleet").join(&name).exists());
    }
    let nowhere = format!("nats://127.0.0.1:{}", free_port());
    fails(
        &["fleet", "status", "--nats", &nowhere],
        "connecting to the NATS server",
    );
    fails(
        &[
            "fleet",
            "submit",
            "--nats",
            &nowhere,
            "--runtime",
            "native",
            "--",
            "trace",
            "192.0.2.1",
        ],
        "connecting to the NATS server",
    );
    fails(
        &[
            "agent",
            "--nats",
            &nowhere,
            "--node",
            "bad-x",
            "--location",
            "fr",
            "--net",
            "host",
        ],
        "connecting to the NATS server",
    );
    // a public target the job asks for, refused by an agent without --allow-public
    let ev = broker.submit(&["--mode", "wait"], "trace --allow-public 8.8.8.8");
    let (lines, summaries) = broker.results(1);
    let s = summaries[0].as_str().unwrap();
    assert!(
        s.contains(&format!(
            "job {} on b1: refused, 0 records",
            ev["job"].as_str().unwrap()
        )),
        "{s}"
    );
    assert!(s.contains("--allow-public"), "{s}");
    assert!(lines.is_empty(), "{lines:?}");
    let mut out = String::new();
    let _ = std::fs::File::open(&_agent.log).and_then(|mut f| f.read_to_string(&mut out));
    assert!(out.contains("status=\"refused\""), "{out}");
}

/// (f) `vtnt fleet replay`: an event list of both modes placed on time on two nodes; one
/// JSON line per event, every placed job's summary joined to it, the discarded ones
/// named; and a node list naming a node that is not there refused before anything is
/// placed, with its file and line.
#[test]
fn replay_places_events_on_time_and_joins_their_results() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let broker = Broker::up("rep");
    let lab = lab("rep");
    let _a = Agent::start(&broker, "r1", "fr", &lab_net(&lab), &[]);
    let _b = Agent::start(&broker, "r2", "pl", &lab_net(&lab), &[]);
    let dir = std::env::temp_dir().join(format!("vtnt-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let nodes = dir.join("nodes");
    std::fs::write(&nodes, "# the nodes\nr1 fr\nr2 pl\n").unwrap();
    let events = dir.join("events");
    // a long job on r1, then two discard events for fr while it runs (discarded), and
    // wait events for both locations
    let text = format!(
        "0 fr native discard {LONG_JOB}\n0.5 fr native discard {SHORT_JOB}\n0.6 fr native discard {SHORT_JOB}\n\
         0.2 pl native wait {SHORT_JOB}\n0.7 any native wait {SHORT_JOB}\n1.0 fr native wait {SHORT_JOB}\n"
    );
    std::fs::write(&events, text).unwrap();
    let p = |f: &PathBuf| f.display().to_string();
    let out = broker.run(
        "replay",
        &[&p(&nodes), &p(&events), "--results-timeout", "60"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "replay: {err}");
    eprintln!("{err}");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 6, "{lines:?}");
    let outcome = |l: &Value| l["outcome"]["outcome"].as_str().unwrap_or("").to_string();
    // in time order, each with its line in the file
    assert_eq!(
        lines
            .iter()
            .map(|l| l["line"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 4, 2, 3, 5, 6]
    );
    assert_eq!(outcome(&lines[0]), "accepted");
    assert_eq!(outcome(&lines[2]), "discarded", "{}", lines[2]);
    assert_eq!(outcome(&lines[3]), "discarded", "{}", lines[3]);
    for l in &lines {
        assert!(l["late_us"].as_u64().unwrap() < 200_000, "placed late: {l}");
        if outcome(l) == "discarded" {
            assert!(l["summary"].is_null(), "{l}");
        } else {
            assert_eq!(l["summary"]["status"], "ok", "{l}");
            assert_eq!(l["summary"]["job"], l["job"], "{l}");
        }
    }
    assert!(err.contains("2 discarded; 4 jobs finished, 0 not"), "{err}");
    // a node that is not there: refused with the file and line, nothing placed
    std::fs::write(&nodes, "r1 fr\nr9 fr\n").unwrap();
    let out = broker.run("replay", &[&p(&nodes), &p(&events)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!(
            "{}:2: node `r9` has never announced itself",
            p(&nodes)
        )),
        "{err}"
    );
    assert_eq!(broker.status()["results_stored"], 16, "nothing more placed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// (g) `vtnt bench fleet-scale` at a small N (CI's size; docs/benchmarks.md has the full
/// one): every wait-mode event starts and finishes, every discard-mode event is decided,
/// and the figures are there.
#[test]
fn the_scale_benchmark_runs_at_a_small_n() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let lab = lab("sca");
    let out = std::env::temp_dir().join(format!("vtnt-scale-{}", std::process::id()));
    let v = bench_json(
        "fleet-scale",
        &lab,
        &out,
        &[
            "--agents",
            "5",
            "--rate",
            "5",
            "--seconds",
            "2",
            "--capacity-rates",
            "50,100",
            "--capacity-seconds",
            "0.5",
            "--edge-limit",
            "20",
        ],
    );
    let _ = std::fs::remove_dir_all(&out);
    // the fleet-wide rate limit at the lab's edge: without it the 5 jobs together send
    // about ten times the limit toward the /24, with it no 1-s window holds more than the
    // limit (and a probe per job for the window's two ends)
    let edge = &v["report"]["edge"];
    let (peer, limited) = (&edge["unlimited"], &edge["limited"]);
    assert_eq!(
        (peer["ok"].as_u64(), limited["ok"].as_u64()),
        (Some(5), Some(5)),
        "{edge}"
    );
    assert!(peer["max_pps"].as_u64().unwrap() > 40, "{edge}");
    assert!(limited["max_pps"].as_u64().unwrap() <= 20 + 5, "{edge}");
    assert!(limited["mean_pps"].as_f64().unwrap() > 10.0, "{edge}");
    let modes = v["report"]["modes"].as_array().expect("modes");
    assert_eq!(modes.len(), 2, "{v}");
    let (wait, discard) = (&modes[0], &modes[1]);
    assert_eq!(wait["mode"], "wait");
    assert_eq!(wait["events"], 10);
    assert_eq!(wait["placed"], 10);
    assert_eq!(wait["finished"], 10, "{wait}");
    assert_eq!(wait["start_ms"]["n"], 10);
    assert!(wait["start_ms"]["p50"].as_f64().unwrap() > 0.0, "{wait}");
    assert_eq!(discard["mode"], "discard");
    assert_eq!(
        discard["placed"].as_u64().unwrap() + discard["discarded"].as_u64().unwrap(),
        10,
        "{discard}"
    );
    assert_eq!(discard["decision_ms"]["n"], 10);
    let bare = &v["report"]["bare_request_ms"];
    assert_eq!(bare["n"], 10, "the peer, one per event: {bare}");
    assert!(bare["p50"].as_f64().unwrap() > 0.0, "{bare}");
    // the capacity sweep: every event placed where no agent is, in both modes
    let sweep = v["report"]["capacity"].as_array().expect("capacity");
    for p in sweep {
        assert_eq!(p["failed"], 0, "{p}");
        assert_eq!(p["placed"], p["events"], "{p}");
    }
    for mode in ["wait", "discard"] {
        assert!(sweep.iter().any(|p| p["mode"] == mode), "{mode}: {sweep:?}");
    }
    // an opt-out list change reached every agent (how fast is the benchmark's figure)
    assert_eq!(v["report"]["opt_out_ms"]["n"], 5, "{v}");
    eprintln!("{}", serde_json::to_string_pretty(&v["report"]).unwrap());
}

/// Ctrl-C in a fleet benchmark: it stops at its next step, removes what it made (its
/// agents, its broker and their state) and exits non-zero; nothing keeps running.
#[test]
fn an_interrupted_benchmark_removes_its_agents_and_broker() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let lab = lab("int");
    let out = std::env::temp_dir().join(format!("vtnt-int-{}", std::process::id()));
    let mut child = Command::new(vtnt_testkit::vtnt_binary())
        .args(["bench", "fleet-scale", "--agents", "3", "--rate", "1"])
        .args(["--seconds", "600", "--lab", &lab.name, "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vtnt bench fleet-scale");
    let name = format!("scale{}", child.id());
    let state = PathBuf::from("/run/vtnt/fleet").join(&name);
    // its agents' processes: the agents, or their watchdogs (forks of them, each leading
    // a session of its own)
    let of = |name: &str, watchdogs: bool| -> usize {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| {
                let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
                let c = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
                let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                let sid: u32 = st
                    .rsplit_once(')')?
                    .1
                    .split_whitespace()
                    .nth(3)?
                    .parse()
                    .ok()?;
                Some((String::from_utf8_lossy(&c).into_owned(), sid == pid))
            })
            .filter(|(c, leader)| {
                c.contains("agent") && c.contains(&format!("\0{name}\0")) && *leader == watchdogs
            })
            .count()
    };
    let agents_of = |name: &str| of(name, false);
    // interrupted while it measures, its agents up
    let until = Instant::now() + Duration::from_secs(120);
    while agents_of(&name) < 3 {
        assert!(Instant::now() < until, "its agents never started");
        assert!(matches!(child.try_wait(), Ok(None)), "the benchmark ended");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(5));
    assert!(state.exists(), "{}", state.display());
    assert_eq!(agents_of(&name), 3, "its agents run");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < until, "still running 60 s after SIGINT");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success(), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(
        !state.exists(),
        "its broker's state is left: {}",
        state.display()
    );
    assert_eq!(agents_of(&name), 0, "its agents are left");
    // their watchdogs have nothing to clean, and go
    let until = Instant::now() + Duration::from_secs(10);
    while of(&name, true) > 0 {
        assert!(Instant::now() < until, "its agents' watchdogs are left");
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// `vtnt bench BENCH ARGS --lab LAB --json --out OUT`, which must succeed: its JSON.
fn bench_json(bench: &str, lab: &common::LabGuard, out: &std::path::Path, args: &[&str]) -> Value {
    let out = out.display().to_string();
    let all = [
        &["bench", bench][..],
        args,
        &["--lab", &lab.name, "--json", "--out", &out],
    ]
    .concat();
    let o = vtnt(&all);
    assert!(
        o.status.success(),
        "bench {bench}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("the JSON report")
}

/// Two agents (`<tag>1` in fr, `<tag>2` in pl) and four wait-mode jobs of ~3 s, returned
/// once each agent has started one (with the jobs' ids and when they were submitted):
/// what the broker-failure tests break in the middle of.
fn two_busy_agents(
    broker: &Broker,
    lab: &common::LabGuard,
    tag: &str,
) -> ([Agent; 2], Vec<String>, Instant) {
    let agents = [
        Agent::start(broker, &format!("{tag}1"), "fr", &lab_net(lab), &[]),
        Agent::start(broker, &format!("{tag}2"), "pl", &lab_net(lab), &[]),
    ];
    let jobs: Vec<String> = (0..4)
        .map(|_| {
            let ev = broker.submit(&["--mode", "wait"], LONG_JOB);
            assert_eq!(ev["outcome"]["outcome"], "queued", "{ev}");
            ev["job"].as_str().unwrap().to_string()
        })
        .collect();
    let t0 = Instant::now();
    while !agents.iter().all(|a| a.log().contains("job started node=")) {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "the agents never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (agents, jobs, t0)
}

/// Every job of `jobs` has exactly one summary, and it says `ok`; no other summary.
fn each_job_once_and_ok(jobs: &[String], summaries: &[Value]) {
    for j in jobs {
        let of_j: Vec<&str> = summaries
            .iter()
            .filter_map(|s| s.as_str())
            .filter(|s| s.contains(&format!("job {j} on ")))
            .collect();
        assert_eq!(of_j.len(), 1, "{j}: {summaries:?}");
        assert!(of_j[0].contains(": ok, "), "{}", of_j[0]);
    }
    assert_eq!(summaries.len(), jobs.len(), "{summaries:?}");
}

/// (h) nats-server SIGKILLed while wait-mode jobs run and wait, then started again on its
/// store: the agents reconnect by themselves, and every accepted job completes with its
/// results stored exactly once.
#[test]
fn a_broker_killed_and_restarted_loses_no_job_and_no_result() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let broker = Broker::up("rst");
    let lab = lab("rst");
    let (agents, jobs, t0) = two_busy_agents(&broker, &lab, "r");
    broker.kill_and_restart(Duration::from_secs(1));
    for a in &agents {
        broker.wait_up(&a.node);
    }
    // each agent's counters say it came back
    let t_back = Instant::now();
    while !broker.status()["nodes"].as_array().is_some_and(|ns| {
        ns.iter()
            .filter(|n| n["reconnects"].as_u64() >= Some(1))
            .count()
            == agents.len()
    }) {
        assert!(
            t_back.elapsed() < Duration::from_secs(15),
            "reconnects not counted: {}",
            broker.status()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (lines, summaries) = broker.results(jobs.len());
    eprintln!(
        "{} jobs finished {:.1} s after the first started, across a broker restart",
        jobs.len(),
        t0.elapsed().as_secs_f64()
    );
    each_job_once_and_ok(&jobs, &summaries);
    assert!(
        lines
            .iter()
            .filter(|l| l.contains("\"type\":\"ping\""))
            .count()
            == jobs.len(),
        "one ping record per job: {lines:?}"
    );
    assert_eq!(
        broker.status()["results_stored"],
        lines.len() as u64 + jobs.len() as u64
    );
}

/// Three nats-servers in one cluster (JetStream on each, its own store), children of the
/// test, SIGKILLed on drop.
struct Cluster {
    servers: Vec<Option<Child>>,
    urls: Vec<String>,
    dir: PathBuf,
}

impl Cluster {
    /// Three servers, routed to each other, JetStream on each.
    fn up(tag: &str) -> Cluster {
        let client: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let route: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let mut c = Cluster::new(tag, &client);
        for i in 0..3 {
            let store = c.dir.join(format!("s{i}"));
            let routes: Vec<String> = (0..3)
                .filter(|&j| j != i)
                .map(|j| format!("nats://127.0.0.1:{}", route[j]))
                .collect();
            c.spawn(
                &[
                    &["--addr", "127.0.0.1", "--port", &client[i].to_string()][..],
                    &["--jetstream", "--store_dir", &store.display().to_string()],
                    &["--server_name", &format!("s{i}"), "--cluster_name", "vtnt"],
                    &["--cluster", &format!("nats://127.0.0.1:{}", route[i])],
                    &["--routes", &routes.join(",")],
                ]
                .concat(),
            );
        }
        c.wait_jetstream(&c.url(), &[]);
        c
    }

    /// A hub with JetStream (`urls[0]`) and a leaf node without (`urls[1]`) that dials it.
    fn hub_and_leaf(tag: &str) -> Cluster {
        let (hub, leaf, leafnodes) = (free_port(), free_port(), free_port());
        let mut c = Cluster::new(tag, &[hub, leaf]);
        let store = c.dir.join("hub").display().to_string();
        let conf = |name: &str, text: String| {
            let f = c.dir.join(name);
            std::fs::write(&f, text).expect("a server config");
            f.display().to_string()
        };
        let hub_conf = conf(
            "hub.conf",
            format!("listen: \"127.0.0.1:{hub}\"\nserver_name: hub\njetstream {{ store_dir: \"{store}\", domain: hub }}\nleafnodes {{ listen: \"127.0.0.1:{leafnodes}\" }}\n"),
        );
        let leaf_conf = conf(
            "leaf.conf",
            format!("listen: \"127.0.0.1:{leaf}\"\nserver_name: leaf\nleafnodes {{ remotes: [ {{ url: \"nats-leaf://127.0.0.1:{leafnodes}\" }} ] }}\n"),
        );
        c.spawn(&["--config", &hub_conf]);
        c.spawn(&["--config", &leaf_conf]);
        c.wait_jetstream(&c.urls[1], &["--js-domain", "hub"]);
        c
    }

    fn new(tag: &str, ports: &[u16]) -> Cluster {
        let dir = std::env::temp_dir().join(format!("vtnt-cluster-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("the servers' directory");
        Cluster {
            servers: Vec::new(),
            urls: ports
                .iter()
                .map(|p| format!("nats://127.0.0.1:{p}"))
                .collect(),
            dir,
        }
    }

    /// Starts the next server with `args`, its log in the cluster's directory.
    fn spawn(&mut self, args: &[&str]) {
        let log = self.dir.join(format!("s{}.log", self.servers.len()));
        let child = Command::new("nats-server")
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).expect("a server log"))
            .spawn()
            .expect("starting nats-server");
        self.servers.push(Some(child));
    }

    /// Waits (bounded) until JetStream answers through `url` (a cluster elects its meta
    /// leader first).
    fn wait_jetstream(&self, url: &str, extra: &[&str]) {
        let t0 = Instant::now();
        while !vtnt(&[&["fleet", "status", "--nats", url][..], extra].concat())
            .status
            .success()
        {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "JetStream never answered through {url}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Every server's URL, as a client gets them.
    fn url(&self) -> String {
        self.urls.join(",")
    }

    fn kill(&mut self, i: usize) {
        if let Some(mut s) = self.servers[i].take() {
            let _ = s.kill();
            let _ = s.wait();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.servers.len() {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// (i) A three-server cluster, the fleet's streams kept on all three: one server is
/// SIGKILLed while wait-mode jobs run and wait; the agents and the controller go on
/// through the other two, and every job's results are stored exactly once.
#[test]
fn one_server_of_a_cluster_killed_and_work_goes_on() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let mut cluster = Cluster::up("clu");
    let broker = Broker::at(cluster.url());
    let lab = lab("clu");
    let (_agents, jobs, t0) = two_busy_agents(&broker, &lab, "c");
    // the first URL is the one every client tried first
    cluster.kill(0);
    let broker = Broker::at(format!("{},{}", cluster.urls[1], cluster.urls[2]));
    // the streams whose leader was on it elect another; JetStream answers requests on them
    // with timeouts meanwhile (about 20 s here); bounded
    let t_kill = Instant::now();
    while !broker.run("results", &[]).status.success() {
        assert!(
            t_kill.elapsed() < Duration::from_secs(60),
            "the two servers left never answered"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!(
        "JetStream answered again {:.1} s after one server of three was killed",
        t_kill.elapsed().as_secs_f64()
    );
    let (lines, summaries) = broker.results(jobs.len());
    eprintln!(
        "{} jobs finished {:.1} s after the first started, one server of three killed",
        jobs.len(),
        t0.elapsed().as_secs_f64()
    );
    each_job_once_and_ok(&jobs, &summaries);
    assert_eq!(
        broker.status()["results_stored"],
        lines.len() as u64 + jobs.len() as u64
    );
    // a new job still goes through the two servers left
    let ev = broker.submit(&["--mode", "wait"], SHORT_JOB);
    assert_eq!(ev["outcome"]["outcome"], "queued", "{ev}");
    let (_, summaries) = broker.results(jobs.len() + 1);
    assert!(
        summaries
            .iter()
            .filter_map(|s| s.as_str())
            .any(|s| s.contains(&format!("job {} on ", ev["job"].as_str().unwrap()))),
        "{summaries:?}"
    );
}

/// A leaf node: the agent dials a leaf server (no JetStream of its own), the tenant the
/// hub (JetStream domain `hub`); both modes work through it, the agent naming the hub's
/// domain: a discard request is accepted, then
/// discarded at once while the agent is busy, and a wait-mode job's results come back.
#[test]
fn an_agent_behind_a_leaf_node_works_unchanged() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let servers = Cluster::hub_and_leaf("leaf");
    let hub = Broker::at(servers.urls[0].clone());
    // the streams are the hub's: a leaf's clients name its JetStream domain
    let leaf = Broker::at_with(servers.urls[1].clone(), &["--js-domain", "hub"]);
    let lab = lab("leaf");
    let _agent = Agent::start(&leaf, "l1", "fr", &lab_net(&lab), &[]);
    hub.wait_up("l1");
    let discard = ["--mode", "discard", "--location", "fr"];
    let first = hub.submit(&discard, LONG_JOB);
    assert_eq!(first["outcome"]["outcome"], "accepted", "{first}");
    let second = hub.submit(&discard, SHORT_JOB);
    assert_eq!(second["outcome"]["outcome"], "discarded", "{second}");
    assert!(
        second["decision_us"].as_u64().unwrap() < 100_000,
        "{second}"
    );
    let third = hub.submit(&["--mode", "wait"], SHORT_JOB);
    assert_eq!(third["outcome"]["outcome"], "queued", "{third}");
    let (_, summaries) = hub.results(2);
    let jobs = [first, third].map(|e| e["job"].as_str().unwrap().to_string());
    each_job_once_and_ok(&jobs, &summaries);
}

/// `vtnt fleet up --foreground`, as a service runs it: nats-server is its child and its
/// log lines are the command's JSON log events (target `nats_server`); a client works;
/// SIGTERM stops both, exit 0, and the state (keys) stays for the next start, which
/// `vtnt fleet down` removes.
#[test]
fn the_broker_in_the_foreground_logs_its_server_and_stops_on_sigterm() {
    if !ready(vtnt_testkit::test_name!(), false) {
        return;
    }
    let name = format!("tfg{}", std::process::id());
    let port = free_port().to_string();
    let log = std::env::temp_dir().join(format!("vtnt-{name}.log"));
    let mut up = Command::new(vtnt_testkit::vtnt_binary())
        .args([
            "fleet",
            "up",
            "--foreground",
            "--name",
            &name,
            "--port",
            &port,
        ])
        .args(["--log-format", "json"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("vtnt fleet up --foreground");
    let _down = Down(name.clone());
    let events = || -> Vec<Value> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    };
    let t0 = Instant::now();
    while !events().iter().any(|e| e["message"] == "broker up") {
        assert!(up.try_wait().unwrap().is_none(), "{:?}", events());
        assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", events());
        std::thread::sleep(Duration::from_millis(50));
    }
    let server: Vec<Value> = events()
        .into_iter()
        .filter(|e| e["target"] == "nats_server")
        .collect();
    assert!(
        server
            .iter()
            .any(|e| e["level"] == "INFO" && e["message"] == "Server is ready"),
        "{server:?}"
    );
    // a client of it: the fleet's status, through its keys
    let st = vtnt(&["fleet", "status", "--fleet", &name, "--json"]);
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let pid: i32 = std::fs::read_to_string(format!("/run/vtnt/fleet/{name}/pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(up.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let st = up.wait().unwrap();
    assert!(st.success(), "{st}: {:?}", events());
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "nats-server stopped with it"
    );
    assert!(events().iter().any(|e| e["message"] == "broker stopped"));
    let keys = format!("/run/vtnt/fleet/{name}/keys");
    assert!(std::path::Path::new(&keys).is_dir(), "its keys are kept");
    let _ = std::fs::remove_file(&log);
}

/// `vtnt fleet down --name NAME` when dropped.
struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = vtnt(&["fleet", "down", "--name", &self.0]);
    }
}

/// (j) `vtnt agent ... --systemd-unit` prints a unit running the same command (without
/// the flag), connects to nothing, and refuses a node name the agent would refuse.
#[test]
fn an_agent_prints_its_systemd_unit() {
    let out = vtnt(&[
        "agent",
        "--node",
        "n1",
        "--location",
        "fr",
        "--nats",
        "nats://127.0.0.1:1",
        "--systemd-unit",
    ]);
    let unit = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        unit.contains(&format!(
            "\nExecStart={} agent --node n1 --location fr --nats nats://127.0.0.1:1\n",
            vtnt_testkit::vtnt_binary().display()
        )),
        "{unit}"
    );
    assert!(unit.contains("\nKillMode=mixed\n"), "{unit}");
    let out = vtnt(&[
        "agent",
        "--node",
        "a.b",
        "--location",
        "fr",
        "--systemd-unit",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--node `a.b`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Tenants and trust: two tenants on one broker, each with its own key; an agent's key.
/// Tenant b cannot read a's results or place a job as a (the server refuses, and says so),
/// sees none of a's results under its own name; an agent with a key the broker does not
/// know is refused; a's job runs and its results come back to a only.
#[test]
fn a_tenant_cannot_read_or_submit_as_another_and_strangers_are_refused() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let broker = Broker::up_with("ten", &["--tenant", "a", "--tenant", "b"]);
    let lab = lab("ten");
    let _agent = Agent::start(&broker, "t1", "fr", &lab_net(&lab), &[]);
    let job = |tenant: &str, key: &str| {
        broker.run(
            "submit",
            &[
                "--tenant",
                tenant,
                "--nkey",
                key,
                "--runtime",
                "native",
                "--",
                "trace",
                "-q",
                "1",
                "203.0.113.10",
            ],
        )
    };
    let (key_a, key_b) = (broker.key("tenant-a"), broker.key("tenant-b"));
    let out = job("a", &key_a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let refused = |out: Output, what: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what} succeeded");
        assert!(
            err.contains("the NATS server refused: Permissions Violation"),
            "{what}: {err}"
        );
    };
    // b with its own key, as a: placing a job and reading a's results are refused
    refused(job("a", &key_b), "b submitting as a");
    refused(
        broker.run("results", &["--tenant", "a", "--nkey", &key_b]),
        "b reading a's results",
    );
    // a's job finishes, and a reads it
    let t0 = Instant::now();
    let a_sees = loop {
        let out = broker.run("results", &["--tenant", "a", "--job", &id]);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        if err.contains(" records, queue ") {
            break (String::from_utf8_lossy(&out.stdout).to_string(), err);
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "a's job: {err}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(a_sees.1.contains(": ok, "), "{}", a_sees.1);
    assert!(a_sees.0.contains("\"type\":\"trace\""), "{}", a_sees.0);
    // b, under its own name, sees nothing of it
    let out = broker.run("results", &["--tenant", "b", "--job", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no results for job"));
    // an agent with a key the broker does not know
    let stranger = std::env::temp_dir().join(format!("vtnt-stranger-{}.nk", std::process::id()));
    std::fs::write(&stranger, nkeys::KeyPair::new_user().seed().unwrap()).unwrap();
    let out = vtnt(&[
        "agent",
        "--fleet",
        &broker.reach[1],
        "--nkey",
        &stranger.display().to_string(),
        "--node",
        "stranger-x",
        "--location",
        "fr",
        "--net",
        "host",
    ]);
    let _ = std::fs::remove_file(&stranger);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("authorization violation"), "{err}");
}

/// TLS with the user's CA: a broker with a certificate signed by a CA of the test's own
/// speaks TLS only; an agent and the commands trusting that CA place a job and read its
/// results; a client that does not trust it is refused before it says anything.
#[test]
fn tls_with_the_users_ca() {
    let test = vtnt_testkit::test_name!();
    if !ready(test, true) {
        return;
    }
    if let Some(why) = vtnt_testkit::missing_tools(&["openssl"]) {
        vtnt_testkit::skip_or_fail(test, &why, None);
        return;
    }
    let dir = std::env::temp_dir().join(format!("vtnt-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = |n: &str| dir.join(n).display().to_string();
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    // a CA of its own: NAME.pem, NAME.key
    let ca = |name: &str, cn: &str| {
        let (key, pem) = (f(&format!("{name}.key")), f(&format!("{name}.pem")));
        let subj = format!("/CN={cn}");
        let tail = ["-keyout", &key, "-out", &pem, "-days", "1", "-subj", &subj];
        openssl(&[&["req", "-x509"][..], &ec, &tail].concat());
    };
    // a key and a certificate the CA `ca` signed, with the extension line `ext` (an
    // extension makes an X.509 v3 certificate: rustls takes no v1)
    let signed = |name: &str, cn: &str, ext: &str| {
        let (key, csr, pem) = (
            f(&format!("{name}.key")),
            f(&format!("{name}.csr")),
            f(&format!("{name}.pem")),
        );
        let subj = format!("/CN={cn}");
        let tail = ["-keyout", &key, "-out", &csr, "-subj", &subj];
        openssl(&[&["req"][..], &ec, &tail].concat());
        let ext_file = f(&format!("{name}.ext"));
        std::fs::write(&ext_file, format!("{ext}\n")).unwrap();
        let (ca_pem, ca_key) = (f("ca.pem"), f("ca.key"));
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_pem,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-out",
            &pem,
            "-days",
            "1",
            "-extfile",
            &ext_file,
        ]);
    };
    ca("ca", "vtnt test CA");
    signed("srv", "127.0.0.1", "subjectAltName=IP:127.0.0.1");
    let (srv_pem, srv_key, ca_pem) = (f("srv.pem"), f("srv.key"), f("ca.pem"));
    let tls_up = [
        "--tls-cert",
        &srv_pem,
        "--tls-key",
        &srv_key,
        "--tls-ca",
        &ca_pem,
    ];
    let broker = Broker::up_with("tls", &tls_up);
    let url = std::fs::read_to_string(format!("/run/vtnt/fleet/{}/url", broker.name)).unwrap();
    let url = url.trim();
    assert!(url.starts_with("tls://"), "{url}");
    let lab = lab("tls");
    let _agent = Agent::start(&broker, "tls1", "fr", &lab_net(&lab), &[]);
    let ev = broker.submit(&[], SHORT_JOB);
    let (lines, summaries) = broker.results(1);
    assert!(summaries[0]
        .as_str()
        .unwrap()
        .contains(&format!("job {}", ev["job"].as_str().unwrap())));
    assert!(!lines.is_empty());
    // the same key, but no CA to check the server with
    let key = broker.key("tenant-default");
    for u in [url.to_string(), url.replace("tls://", "nats://")] {
        let out = vtnt(&["fleet", "status", "--nats", &u, "--nkey", &key]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{u}: connected without the CA");
        assert!(err.contains("connecting to the NATS server"), "{u}: {err}");
    }
    // and with it
    let out = vtnt(&[
        "fleet",
        "status",
        "--nats",
        url,
        "--nkey",
        &key,
        "--tls-ca",
        &f("ca.pem"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // mutual TLS: a client certificate the CA signed is let in, none is refused
    signed("cli", "vtnt client", "extendedKeyUsage=clientAuth");
    let mtls = Broker::up_with("mtls", &[&tls_up[..], &["--tls-verify"]].concat());
    let url = std::fs::read_to_string(format!("/run/vtnt/fleet/{}/url", mtls.name)).unwrap();
    let key = mtls.key("tenant-default");
    let status = |extra: &[&str]| {
        let base = [
            "fleet",
            "status",
            "--nats",
            url.trim(),
            "--nkey",
            &key,
            "--tls-ca",
            &f("ca.pem"),
        ];
        vtnt(&[&base[..], extra].concat())
    };
    let out = status(&[]);
    assert!(
        !out.status.success(),
        "connected with no client certificate"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("connecting to the NATS server"), "{err}");
    let out = status(&["--tls-cert", &f("cli.pem"), "--tls-key", &f("cli.key")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // nor is one another CA signed
    ca("other", "another CA");
    let out = status(&["--tls-cert", &f("other.pem"), "--tls-key", &f("other.key")]);
    assert!(!out.status.success(), "a stranger's certificate let in");
    // --tls-verify without the CA to verify with
    let out = vtnt(&[
        "fleet",
        "up",
        "--name",
        "vtntmtlsbad",
        "--tls-cert",
        &f("srv.pem"),
        "--tls-key",
        &f("srv.key"),
        "--tls-verify",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--tls-ca"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Images from the fleet's NATS object store: the operator puts them, an agent started
/// with `--images-from nats` fetches its job's image from there; a tenant may not put
/// images, and an agent asking for a store that is not there says so.
#[test]
fn an_agent_fetches_its_images_from_the_object_store() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let broker = Broker::up("obj");
    let images = |what: &str, extra: &[&str]| {
        let a = [
            &["fleet", "images", what, "--fleet", &broker.name][..],
            extra,
        ]
        .concat();
        vtnt(&a)
    };
    // none stored yet: an agent that needs them refuses to start
    let out = vtnt(&[
        "agent",
        "--fleet",
        &broker.name,
        "--node",
        "o0",
        "--location",
        "fr",
        "--images-from",
        "nats",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("has no `vtnt-static`")
            && err.contains("vtnt fleet images put --runtimes native"),
        "{err}"
    );
    let tenant_key = broker.key("tenant-default");
    let out = images("put", &["--runtimes", "native", "--nkey", &tenant_key]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a tenant put an image");
    assert!(err.contains("Permissions Violation"), "{err}");
    let out = images("put", &["--runtimes", "native"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8_lossy(&images("list", &[]).stdout).to_string();
    let row: Vec<&str> = listed
        .lines()
        .nth(1)
        .expect("an image listed")
        .split('\t')
        .collect();
    assert!(row[1].parse::<u64>().unwrap() > 1_000_000, "{listed}");
    // the static vtnt, stored with the SHA-256 the installed manifest pins
    let pin = vtnt_artifacts::find(vtnt_artifacts::Artifact::StaticVtnt)
        .expect("the installed static vtnt")
        .pin;
    assert_eq!(row[3], pin.sha256, "{listed}");
    let lab = lab("obj");
    let agent = Agent::start(
        &broker,
        "o1",
        "fr",
        &lab_net(&lab),
        &["--images-from", "nats"],
    );
    let ev = broker.submit(&[], SHORT_JOB);
    let (lines, summaries) = broker.results(1);
    assert!(!lines.is_empty(), "{:?}", agent.log());
    assert!(summaries[0]
        .as_str()
        .unwrap()
        .contains(&format!("job {}", ev["job"].as_str().unwrap())));
    assert!(
        summaries[0].as_str().unwrap().contains("ok"),
        "{summaries:?}"
    );
}

/// Every record of a job, and its summary, name its provenance (docs/fleet.md,
/// Provenance): the node, the SHA-256 of the image it ran (the installed static vtnt's
/// pin, for `native`), the address its probes left from (the lab's vantage point, which
/// each scamper record's `src` says too), and the agent's clock against the broker's,
/// which on one host is 0 within its error. Read from the tenant's results stream with
/// their headers, as `fleet results` reads it.
#[test]
fn every_record_names_its_node_image_source_and_clock_offset() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let broker = Broker::up("prov");
    let lab = lab("prov");
    let agent = Agent::start(&broker, "p1", "fr", &lab_net(&lab), &[]);
    let targets: Vec<String> = lab_targets(3).collect();
    let ev = broker.submit(&[], &format!("trace -q 1 {}", targets.join(" ")));
    let job = ev["job"].as_str().unwrap().to_string();
    broker.results(1);
    let pin = vtnt_artifacts::find(vtnt_artifacts::Artifact::StaticVtnt)
        .expect("the installed static vtnt")
        .pin;
    let stored = stored_messages(&broker, &job);
    let (records, summary) = stored.split_at(stored.len() - 1);
    let summary: vtnt_fleet::JobSummary = serde_json::from_slice(&summary[0].1).unwrap();
    // every record: the traces and scamper's cycle records around them
    assert_eq!(records.len() as u64, summary.records, "{:?}", agent.log());
    assert_eq!(summary.image_sha256.as_deref(), Some(pin.sha256.as_str()));
    let clock = summary.clock.expect("the summary's clock offset");
    // one host, one clock: within the error of 0 (a round trip on loopback)
    assert!(
        clock.offset_us.unsigned_abs() <= clock.error_us,
        "{clock:?}"
    );
    assert!(clock.error_us < 1_000_000, "{clock:?}");
    eprintln!(
        "clock offset {} µs ± {} µs (one host)",
        clock.offset_us, clock.error_us
    );
    let source = summary.source.expect("the summary's source").to_string();
    let mut traces = 0;
    for (h, body) in records {
        let get = |n: &str| {
            h.get(n)
                .unwrap_or_else(|| panic!("no {n} on a record: {h:?}"))
                .as_str()
                .to_string()
        };
        assert_eq!(get("Vtnt-Node"), "p1");
        assert!(["yes", "no", "unknown"].contains(&get("Vtnt-Clock-Sync").as_str()));
        assert_eq!(get("Vtnt-Image-Sha256"), pin.sha256);
        assert_eq!(get("Vtnt-Clock-Offset-Us"), clock.offset_us.to_string());
        assert_eq!(get("Vtnt-Clock-Error-Us"), clock.error_us.to_string());
        let record: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(get("Vtnt-Source"), source);
        if record["type"] == "trace" {
            assert_eq!(record["src"].as_str(), Some(source.as_str()), "{record}");
            traces += 1;
        }
    }
    assert_eq!(traces, targets.len());
    // the heartbeat says it too
    let nodes = broker.status()["nodes"].clone();
    let p1 = nodes
        .as_array()
        .and_then(|ns| ns.iter().find(|n| n["node"] == "p1"))
        .unwrap_or_else(|| panic!("{nodes}"))
        .clone();
    assert!(p1["clock"]["error_us"].is_u64(), "{p1}");
    // an agent told its public address (behind a NAT) names it instead
    drop(agent);
    let _told = Agent::start(
        &broker,
        "p2",
        "fr",
        &lab_net(&lab),
        &["--public-address", "198.51.100.9"],
    );
    let ev = broker.submit(&[], SHORT_JOB);
    broker.results(2);
    let stored = stored_messages(&broker, ev["job"].as_str().unwrap());
    let (records, summary) = stored.split_at(stored.len() - 1);
    let summary: vtnt_fleet::JobSummary = serde_json::from_slice(&summary[0].1).unwrap();
    assert_eq!(summary.node, "p2");
    assert_eq!(summary.source, Some("198.51.100.9".parse().unwrap()));
    assert!(!records.is_empty());
    for (h, _) in records {
        assert_eq!(h.get("Vtnt-Source").unwrap().as_str(), "198.51.100.9");
    }
}

/// A job's messages in the tenant's results stream, headers and payload, its records then
/// its summary (which ends them).
fn stored_messages(broker: &Broker, job: &str) -> Vec<(async_nats::HeaderMap, Vec<u8>)> {
    let c = vtnt_fleet::Connect::local(
        &broker.name,
        vtnt_fleet::auth::Role::Tenant("default".into()),
    )
    .expect("the tenant's key");
    vtnt_fleet::block_on::<_, vtnt_fleet::Error>(async {
        use futures::StreamExt;
        let (_, fleet) = c.fleet("provenance test").await?;
        let results = fleet.results("default").await?;
        let consumer = results
            .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig {
                filter_subject: format!("vtnt.results.default.{job}.*"),
                ..Default::default()
            })
            .await
            .map_err(|e| vtnt_fleet::Error::Invalid(e.to_string()))?;
        let mut msgs = consumer
            .messages()
            .await
            .map_err(|e| vtnt_fleet::Error::Invalid(e.to_string()))?;
        let mut got = Vec::new();
        // the records, then the summary, which ends the job's messages
        while let Some(m) = msgs.next().await {
            let m = m.map_err(|e| vtnt_fleet::Error::Invalid(e.to_string()))?;
            let summary = m.subject.ends_with(".s");
            got.push((m.headers.clone().unwrap_or_default(), m.payload.to_vec()));
            if summary {
                break;
            }
        }
        vtnt_fleet::Result::Ok(got)
    })
    .expect("reading the results stream")
}

/// `vtnt bench fleet` (Figs. 10 and 11) at a small N (CI's size; docs/benchmarks.md has
/// the paper's): five sites with their round trips, both modes, three runtimes (the
/// unikernel as a microVM and as an spt process among them); every job
/// finishes, every discard event is decided, a node's answer takes at least its site's
/// round trip (the emulated links are in effect), and both figures are drawn.
#[test]
fn the_paper_fleet_benchmark_runs_at_a_small_n() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let lab = lab("pap");
    let out = std::env::temp_dir().join(format!("vtnt-paper-{}", std::process::id()));
    let v = bench_json(
        "fleet",
        &lab,
        &out,
        &[
            "--runtimes",
            "native,microvm,spt",
            "--events",
            "3",
            "--interval",
            "0.5",
            "--job",
            SHORT_JOB,
        ],
    );
    let r = &v["report"];
    assert_eq!(r["sites"].as_array().map(Vec::len), Some(5), "{r}");
    let rts = r["runtimes"].as_array().expect("runtimes");
    assert_eq!(rts.len(), 3);
    for rt in rts {
        assert!(rt["errors"].as_array().unwrap().is_empty(), "{rt}");
        assert_eq!(rt["wait"]["ok"], 3, "{rt}");
        assert!(rt["wait"]["deploy_exec_s"]["mean"].as_f64().unwrap() > 0.0);
        let d = &rt["discard"];
        let decided = ["served", "discarded", "failed"].map(|k| d[k].as_u64().unwrap());
        assert_eq!(decided.iter().sum::<u64>(), 3, "{d}");
        assert!(decided[0] >= 1, "{d}");
    }
    let rtt: std::collections::HashMap<String, f64> = r["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s[0].as_str().unwrap().to_string(), s[1].as_f64().unwrap()))
        .collect();
    let events = std::fs::read_to_string(out.join("events.jsonl")).expect("events.jsonl");
    let mut answered = 0;
    for l in events.lines() {
        let e: Value = serde_json::from_str(l).unwrap();
        if e["outcome"]["outcome"] == "accepted" {
            let node = e["outcome"]["node"].as_str().unwrap();
            let ms = e["decision_us"].as_f64().unwrap() / 1e3;
            assert!(ms >= rtt[node] - 1.0, "{node} answered in {ms} ms: {e}");
            answered += 1;
        }
    }
    assert!(answered >= 2, "{events}");
    for f in ["fig10-wait.png", "fig11-discard.png"] {
        assert!(out.join(f).exists(), "{f}");
    }
    let _ = std::fs::remove_dir_all(&out);
    eprintln!("{}", serde_json::to_string_pretty(r).unwrap());
}

/// `fleet measurement SUB` with the broker's reach and `args`.
fn measurement(broker: &Broker, sub: &str, args: &[&str]) -> Output {
    nested(broker, &["measurement", sub], args)
}

/// `fleet WORDS...` (a command and its subcommand) with the broker's reach and `args`.
fn nested(broker: &Broker, words: &[&str], args: &[&str]) -> Output {
    let mut a = vec!["fleet"];
    a.extend_from_slice(words);
    a.extend(broker.reach.iter().map(String::as_str));
    a.extend_from_slice(args);
    vtnt(&a)
}

/// What the opt-out test's agents say of themselves in their probes (`--contact`).
const CONTACT: &str = "vtnt test; ops@example.org";

/// The fleet's opt-out list (issue 42's etiquette): a change reaches every agent, which
/// says so in its heartbeat and refuses jobs to the prefixes listed, naming the list;
/// removed, they run again. Bad prefixes are refused and change nothing.
#[test]
fn the_opt_out_list_reaches_every_agent_which_refuses_its_targets_and_contact_rides_probes() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let broker = Broker::up("opt");
    let lab = lab("opt");
    let agents: Vec<Agent> = ["o1", "o2", "o3"]
        .iter()
        .map(|n| Agent::start(&broker, n, "fr", &lab_net(&lab), &["--contact", CONTACT]))
        .collect();
    let opt_out = |sub: &str, args: &[&str]| {
        let out = nested(&broker, &["opt-out", sub], args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            err,
        )
    };
    for bad in [&["203.0.113.0/33"][..], &["2001:db8::/32"], &["lab"], &[]] {
        let (ok, _, err) = opt_out("add", bad);
        assert!(!ok && err.starts_with("vtnt: error: "), "{bad:?}: {err}");
    }
    let (ok, _, err) = opt_out("remove", &["198.51.100.0/24"]);
    assert!(!ok && err.contains("not on the opt-out list"), "{err}");
    let (ok, listed, err) = opt_out("add", &["203.0.113.0/28"]);
    assert!(ok, "{err}");
    assert_eq!(listed, "203.0.113.0/28\n");
    let revision: u64 = err
        .split("revision ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no revision in {err}"));
    // every agent says it applies it (a bound for a hang: the agents read every second)
    let t0 = Instant::now();
    wait_applied(&broker, agents.len(), |r| r == revision);
    eprintln!(
        "opt-out revision {revision} applied by {} agents within {:.2} s of the write",
        agents.len(),
        t0.elapsed().as_secs_f64()
    );
    let refused = broker.submit(&["--mode", "wait"], SHORT_JOB);
    let (_, summaries) = broker.results(1);
    let s = summaries[0].as_str().unwrap();
    assert!(
        s.contains(refused["job"].as_str().unwrap())
            && s.contains(": refused, 0 records")
            && s.contains(
                "refused: target 203.0.113.10 is in 203.0.113.0/28, on the fleet's opt-out list"
            ),
        "{s}"
    );
    let (ok, listed, err) = opt_out("remove", &["203.0.113.0/28"]);
    assert!(ok && listed.is_empty(), "{err}");
    wait_applied(&broker, agents.len(), |r| r > revision);
    broker.submit(&["--mode", "wait"], SHORT_JOB);
    let (lines, summaries) = broker.results(2);
    assert!(
        summaries
            .iter()
            .any(|s| s.as_str().unwrap().contains(": ok, ")),
        "{summaries:?}"
    );
    let traced = |l: &&String| l.contains(r#""type":"trace""#) && l.contains("203.0.113.10");
    let trace: Vec<&String> = lines.iter().filter(traced).collect();
    assert_eq!(trace.len(), 1, "{lines:?}");
    // the agents' contact string rode the probes' payload (scamper's -p: the size grows)
    let t: Value = serde_json::from_str(trace[0]).unwrap();
    assert_eq!(t["probe_size"], 28 + CONTACT.len(), "{t}");
    drop(agents);
}

/// Waits (bounded) until `n` nodes heartbeat an opt-out revision that is `wanted`.
fn wait_applied(broker: &Broker, n: usize, wanted: impl Fn(u64) -> bool) {
    let t0 = Instant::now();
    loop {
        let st = broker.status();
        let nodes = st["nodes"].as_array().unwrap().iter();
        let applied = nodes.filter(|v| v["opt_out"]["revision"].as_u64().is_some_and(&wanted));
        if applied.count() == n {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "not applied: {st}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `fleet measurement list --json`: the definitions.
fn measurements(broker: &Broker) -> Vec<Value> {
    let out = measurement(broker, "list", &["--json"]);
    assert!(
        out.status.success(),
        "list: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a definition"))
        .collect()
}

/// The controller (`fleet measurement run`) as a child, SIGKILLed on drop.
struct Controller(Child);

impl Controller {
    fn start(broker: &Broker, extra: &[&str]) -> Controller {
        let mut cmd = Command::new(vtnt_testkit::vtnt_binary());
        cmd.args(["fleet", "measurement", "run"])
            .args(&broker.reach)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Controller(cmd.spawn().expect("starting the controller"))
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Issue 42's loop, end to end on the lab: a periodic trace, a link taken down in the
/// lab (`vtnt lab change`), the watch sees the path change in a later cycle, defines a
/// TNT measurement on the vantage point that saw it, the controller places it, and its
/// trace shows the new path, as the lab's truth has it after the change.
#[test]
fn a_link_down_in_the_lab_triggers_tnt_whose_result_shows_the_new_path() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let topology = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../topologies/cases/reroute.toml"
    );
    let broker = Broker::up("evt");
    let lab = common::LabGuard::up_with("evt", &[topology]).expect("vtnt lab up");
    let _a = Agent::start(&broker, "e1", "fr", &lab_net(&lab), &[]);
    let dst = "203.0.113.2";
    let words = ["trace", "-P", "icmp-paris", "-q", "1", "-w", "1", dst];
    let args = [
        &[
            "--runtime",
            "native",
            "--location",
            "fr",
            "--every",
            "2s",
            "--",
        ][..],
        &words,
    ];
    let out = measurement(&broker, "create", &args.concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let _controller = Controller::start(&broker, &[]);
    let placed = |n: u64| {
        let t0 = Instant::now();
        while measurements(&broker)
            .iter()
            .find(|m| m["id"] == id.as_str())
            .is_none_or(|m| m["placed"].as_u64() < Some(n))
        {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{n} cycles never placed"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    placed(1);
    let mut watch = Command::new(vtnt_testkit::vtnt_binary())
        .args(["fleet", "measurement", "watch"])
        .args(&broker.reach)
        .args([id.as_str(), "--max-changes", "1", "--", "tnt", "-q", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("vtnt fleet measurement watch");
    let rx = lines_of(&mut watch);
    // a cycle after the watch started, with the path as it was: no change from it
    let started = measurements(&broker)
        .iter()
        .find(|m| m["id"] == id.as_str())
        .unwrap()["started"]
        .as_u64()
        .unwrap();
    placed(started + 1);
    let changed = Command::new(vtnt_testkit::vtnt_binary())
        .args([
            "lab",
            "change",
            "--name",
            &lab.name,
            "link-down",
            "r2",
            "r3",
        ])
        .output()
        .expect("vtnt lab change");
    assert!(
        changed.status.success(),
        "{}",
        String::from_utf8_lossy(&changed.stderr)
    );
    let t_change = Instant::now();
    // (a bound for a hang: the next cycle is at most 2 s away)
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the watch's change line");
    let seen = t_change.elapsed();
    let _ = watch.kill();
    let _ = watch.wait();
    let change: Value = serde_json::from_str(&line).expect("a JSON change");
    assert_eq!(change["source"], "path-change", "{change}");
    assert_eq!(change["node"], "e1", "{change}");
    assert_eq!(change["dst"], dst, "{change}");
    assert!(change["error"].is_null(), "{change}");
    let triggered = change["triggered"]
        .as_str()
        .expect("a triggered measurement");
    eprintln!(
        "a link down seen as a path change {:.1} s later: {change}",
        seen.as_secs_f64()
    );
    // the triggered TNT's results: its trace follows the truth's new path
    let (expected, reachable) = truth_path(&lab.name, dst);
    assert!(reachable);
    assert_eq!(
        triggered_hops(&broker, triggered, dst),
        expected,
        "the TNT trace against the truth after the change"
    );
}

/// The lab's truth now: the addresses a trace to `dst` should show (each router's, then
/// the destination's), and whether any path reaches it.
fn truth_path(lab: &str, dst: &str) -> (Vec<String>, bool) {
    let truth = Command::new(vtnt_testkit::vtnt_binary())
        .args(["lab", "truth", "--name", lab, "--json"])
        .output()
        .expect("vtnt lab truth");
    let truth: Value = serde_json::from_slice(&truth.stdout).expect("the truth");
    let d = truth["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["dst"] == dst)
        .unwrap();
    let mut path: Vec<String> = d["forward"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| h["addr"].as_str().unwrap().to_string())
        .collect();
    path.push(dst.to_string());
    (path, d["unreachable"] != true)
}

/// The hops (`*` for none) of the trace to `dst` among the results of triggered
/// measurement `id`'s one job, once they are in.
fn triggered_hops(broker: &Broker, id: &str, dst: &str) -> Vec<String> {
    let job = format!("{id}-c0-0");
    let t0 = Instant::now();
    let trace = loop {
        let out = broker.run("results", &["--job", &job]);
        let found = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["type"] == "trace" && r["dst"] == dst);
        if let Some(t) = found {
            break t;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "no TNT result for {job}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    trace["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["addr"].as_str().unwrap_or("*").to_string())
        .collect()
}

/// A child's stdout, line by line, over a channel.
fn lines_of(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Issue 42's second source, end to end: the lab's BGP speaker (`vtnt lab up --bgp`)
/// withdraws a destination's prefix when a link down cuts it off; the routes watch sees
/// the withdrawal at the vantage point's BIRD and triggers TNT toward the targets in the
/// prefix, whose trace does not reach it (the truth: unreachable); the link back up, the
/// announcement triggers TNT again, whose trace is the truth's path.
#[test]
fn a_bgp_withdrawal_and_announcement_through_the_speaker_trigger_tnt() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    if let Some(why) = vtnt_testkit::missing_root_or(&["bird", "birdc"]) {
        vtnt_testkit::skip_or_fail(vtnt_testkit::test_name!(), &why, None);
        return;
    }
    let topology = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../topologies/cases/bgp.toml"
    );
    let broker = Broker::up("bgp");
    let lab = common::LabGuard::up_with("bgp", &["--bgp", topology]).expect("vtnt lab up --bgp");
    let _a = Agent::start(&broker, "b1", "fr", &lab_net(&lab), &[]);
    let _controller = Controller::start(&broker, &[]);
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("/run/vtnt/lab/{}/bgp.json", lab.name)).unwrap(),
    )
    .unwrap();
    let socket = std::path::PathBuf::from(state["vantage_socket"].as_str().unwrap());
    // the session up, both prefixes learned: the watch's baseline holds them
    let mut seen = vtnt_fleet::bgp::RouteWatch::new(&socket, Duration::from_millis(100)).unwrap();
    let t0 = Instant::now();
    while seen.poll().map_or(0, |_| seen.table().len()) < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the speaker's routes never came"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (far, near) = ("203.0.113.2", "198.51.100.2");
    let targets = TempFile::lines("bgp-targets", [far, near].into_iter().map(String::from));
    let socket = socket.display().to_string();
    let mut watch = Command::new(vtnt_testkit::vtnt_binary())
        .args(["fleet", "measurement", "watch-routes"])
        .args(&broker.reach)
        .args([
            "--bird",
            &socket,
            "--targets",
            &targets.path(),
            "--location",
            "fr",
        ])
        .args([
            "--runtime",
            "native",
            "--max-changes",
            "2",
            "--",
            "tnt",
            "-q",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("vtnt fleet measurement watch-routes");
    let rx = lines_of(&mut watch);
    // its baseline is read at once (a bound for a slow start)
    std::thread::sleep(Duration::from_secs(2));
    let change = |words: &[&str]| {
        let out = Command::new(vtnt_testkit::vtnt_binary())
            .args([&["lab", "change", "--name", lab.name.as_str()][..], words].concat())
            .output()
            .expect("vtnt lab change");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let t = Instant::now();
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the watch's line");
        let v: Value = serde_json::from_str(&line).expect("a JSON change");
        eprintln!(
            "{words:?} seen {:.3} s later: {v}",
            t.elapsed().as_secs_f64()
        );
        assert_eq!(v["source"], "bgp", "{v}");
        assert_eq!(v["prefix"], "203.0.113.0/29", "{v}");
        assert_eq!(v["targets"], serde_json::json!([far]), "{v}");
        assert!(v["error"].is_null(), "{v}");
        v
    };
    let down = change(&["link-down", "r1", "r2"]);
    assert_eq!(down["kind"], "withdrawn", "{down}");
    let (_, reachable) = truth_path(&lab.name, far);
    assert!(!reachable, "the truth has far cut off");
    let hops = triggered_hops(&broker, down["triggered"].as_str().unwrap(), far);
    assert!(
        !hops.contains(&far.to_string()),
        "TNT reached a destination cut off: {hops:?}"
    );
    let up = change(&["link-up", "r1", "r2"]);
    assert_eq!(up["kind"], "announced", "{up}");
    let (expected, reachable) = truth_path(&lab.name, far);
    assert!(reachable);
    let hops = triggered_hops(&broker, up["triggered"].as_str().unwrap(), far);
    assert_eq!(
        hops, expected,
        "TNT's trace against the truth once announced again"
    );
    let _ = watch.kill();
    let _ = watch.wait();
}

/// A periodic measurement on two vantage points runs each of its three cycles once,
/// though its controller is SIGKILLed after the first, one of its agents is SIGKILLed and
/// started again, and a cycle falls due while no controller runs: the next controller
/// starts it, and finishes.
#[test]
fn a_periodic_measurement_loses_no_cycle_and_runs_none_twice_across_agent_and_controller_restarts()
{
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let broker = Broker::up("mea");
    let lab = lab("mea");
    let _a = Agent::start(&broker, "m1", "fr", &lab_net(&lab), &[]);
    let mut b = Agent::start(&broker, "m2", "pl", &lab_net(&lab), &[]);
    let out = measurement(
        &broker,
        "create",
        &[
            "--runtime",
            "native",
            "--location",
            "any",
            "--count",
            "2",
            "--every",
            "2s",
            "--cycles",
            "3",
            "--",
            "trace",
            "-q",
            "1",
            "203.0.113.10",
        ],
    );
    assert!(
        out.status.success(),
        "create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(measurements(&broker)[0]["state"], "scheduled");
    let first = Controller::start(&broker, &[]);
    let t0 = Instant::now();
    while measurements(&broker)[0]["placed"] != 1 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{:?}",
            measurements(&broker)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(first);
    // an agent killed (its cycle-0 job perhaps running) and started again
    b.signal("KILL");
    b.wait_exit(Duration::from_secs(10));
    drop(b);
    let _b = Agent::start(&broker, "m2", "pl", &lab_net(&lab), &[]);
    // cycle 1 falls due while no controller runs
    std::thread::sleep(Duration::from_millis(2500));
    let m = &measurements(&broker)[0];
    assert_eq!(
        (m["state"].as_str(), m["placed"].as_u64()),
        (Some("running"), Some(1)),
        "{m}"
    );
    let mut second = Controller::start(&broker, &["--until-idle"]);
    let t0 = Instant::now();
    while second.0.try_wait().expect("waiting").is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the controller did not finish"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let m = &measurements(&broker)[0];
    assert_eq!(m["state"], "done", "{m}");
    assert_eq!(
        (m["started"].as_u64(), m["placed"].as_u64()),
        (Some(3), Some(3)),
        "{m}"
    );
    let (_, summaries) = broker.results(6);
    assert_eq!(summaries.len(), 6, "{summaries:?}");
    for k in 0..3 {
        for i in 0..2 {
            let job = format!("job {id}-c{k}-{i} on ");
            let n = summaries
                .iter()
                .filter(|s| s.as_str().unwrap().contains(&job))
                .count();
            assert_eq!(n, 1, "{job}: {summaries:?}");
        }
    }
}

/// A measurement with no vantage point, too short an interval or an unknown tenant is
/// refused with words that say so, and nothing is stored; cancelling twice is refused.
#[test]
fn bad_measurements_are_refused_and_nothing_is_stored() {
    if !ready(vtnt_testkit::test_name!(), false) {
        return;
    }
    let broker = Broker::up("mbad");
    let _agent = Agent::start(&broker, "mb1", "fr", &["--net", "host"], &[]);
    let create = |extra: &[&str]| {
        let mut a = vec!["--runtime", "native"];
        a.extend_from_slice(extra);
        measurement(&broker, "create", &a)
    };
    let fails = |extra: &[&str], says: &str| {
        let out = create(extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} succeeded");
        assert!(err.contains(says), "{extra:?}: {err}");
    };
    let job = ["--", "trace", "203.0.113.10"];
    fails(
        &[&["--location", "jp"][..], &job].concat(),
        "matches 0 vantage point(s)",
    );
    fails(
        &[&["--location", "fr", "--count", "2"][..], &job].concat(),
        "matches 1 vantage point(s) with an up node: fr",
    );
    fails(
        &[&["--location", "fr", "--every", "0s"][..], &job].concat(),
        "shorter than the floor",
    );
    fails(
        &[
            "--location",
            "fr",
            "--every",
            "1s",
            "--",
            "trace",
            "203.0.113.1",
            "203.0.113.2",
            "203.0.113.3",
        ],
        "shorter than a cycle's expected run (3 target(s)",
    );
    fails(
        &[&["--location", "fr", "--every", "1x"][..], &job].concat(),
        "the unit is s, m or h",
    );
    fails(
        &[&["--location", "fr", "--tenant", "zz"][..], &job].concat(),
        "no key for tenant-zz",
    );
    assert!(
        measurements(&broker).is_empty(),
        "{:?}",
        measurements(&broker)
    );
    // a good one, cancelled, then cancelled again
    let out = create(&[&["--location", "fr", "--start-in", "1h"][..], &job].concat());
    assert!(
        out.status.success(),
        "create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let out = measurement(&broker, "cancel", &[&id]);
    assert!(
        out.status.success(),
        "cancel: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = measurement(&broker, "cancel", &[&id]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is already Cancelled"),
        "{out:?}"
    );
    let out = measurement(&broker, "cancel", &["nosuch"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has no measurement `nosuch`"),
        "{out:?}"
    );
    let all = measurements(&broker);
    assert_eq!(
        (all.len(), &all[0]["state"]),
        (1, &Value::from("cancelled")),
        "{all:?}"
    );
}

/// `fleet quota SUB` with the broker's reach and `args`.
fn quota_cmd(broker: &Broker, sub: &str, args: &[&str]) -> Output {
    let mut a = vec!["fleet", "quota", sub];
    a.extend(broker.reach.iter().map(String::as_str));
    a.extend_from_slice(args);
    vtnt(&a)
}

/// `fleet quota show --json` as the broker's tenant (its own key).
fn quota(broker: &Broker) -> Value {
    let out = quota_cmd(broker, "show", &["--json"]);
    assert!(
        out.status.success(),
        "quota show: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the quota")
}

/// Waits (bounded) until the tenant's running jobs, as its quota counts them, are `n`;
/// how long that took.
fn running_jobs(broker: &Broker, n: u64, within: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        let q = quota(broker);
        if q["jobs_running"] == n {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < within, "running jobs never {n}: {q}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A wait-mode job of the default tenant for `fr` placed straight on the work queue, as a
/// tenant speaking NATS itself would, without `fleet submit`'s checks; its id.
fn place_raw(broker: &Broker, job: &str) -> String {
    use vtnt_fleet::controller::{self, SubmitOptions};
    let c = vtnt_fleet::Connect::local(
        &broker.name,
        vtnt_fleet::auth::Role::Tenant("default".into()),
    )
    .expect("the tenant's key");
    let o = SubmitOptions {
        runtime: vtnt_runtimes::Runtime::Native,
        location: "fr".into(),
        mode: vtnt_fleet::Mode::Wait,
        tenant: "default".into(),
        words: job.split_whitespace().map(String::from).collect(),
    };
    let line = controller::job_line(&o).expect("a job");
    vtnt_fleet::block_on(async {
        let (_, fleet) = c.fleet("raw").await?;
        controller::place(&fleet, &o, line).await
    })
    .expect("placing the job")
    .job
}

/// The summary line of `job` among `summaries`.
fn summary_of<'a>(summaries: &'a [Value], job: &str) -> &'a str {
    let this = format!("job {job} on ");
    summaries
        .iter()
        .filter_map(Value::as_str)
        .find(|s| s.contains(&this))
        .unwrap_or_else(|| panic!("no summary of {job}: {summaries:?}"))
}

/// The operator's quota holds at the controller (`fleet submit`, `measurement create`
/// refuse, naming the quota, its limit and the use, and place nothing) and at the agents
/// (jobs placed past the controller are refused with `quota exceeded`); a job's probes are
/// settled to what its records say; a SIGKILLed agent's running job stops counting once
/// its lease runs out.
#[test]
fn quotas_hold_at_the_controller_and_at_the_agents_and_a_dead_agents_slot_comes_back() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let broker = Broker::up("quo");
    let lab = lab("quo");
    let mut agents = vec![
        Agent::start(&broker, "q1", "fr", &lab_net(&lab), &[]),
        Agent::start(&broker, "q2", "fr", &lab_net(&lab), &[]),
    ];
    let out = quota_cmd(
        &broker,
        "set",
        &[
            "default",
            "--concurrent-jobs",
            "1",
            "--probes-per-day",
            "100",
        ],
    );
    assert!(
        out.status.success(),
        "quota set: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("default\tconcurrent-jobs\t1\t0")
            && table.contains("default\tprobes-per-day\t100\t0"),
        "{table}"
    );
    let fails = |args: &[&str], says: &str| {
        let out = vtnt(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
    };
    let u = [broker.reach[0].as_str(), broker.reach[1].as_str()];
    // over the day's probes: refused by the controller, nothing placed
    fails(
        &[
            "fleet", "submit", u[0], u[1], "--runtime", "native", "--location", "fr", "--",
            "ping", "-c", "200", "203.0.113.10",
        ],
        "quota exceeded: tenant default may send 100 probes per day (UTC), 0 sent or reserved today and up to 200 more asked",
    );
    fails(
        &[
            "fleet",
            "measurement",
            "create",
            u[0],
            u[1],
            "--runtime",
            "native",
            "--location",
            "fr",
            "--every",
            "1m",
            "--",
            "ping",
            "-c",
            "51",
            "203.0.113.10",
            "203.0.113.11",
        ],
        "up to 102 more asked",
    );
    assert!(measurements(&broker).is_empty());
    // past the controller: the agent refuses it
    let over = place_raw(&broker, "ping -c 200 203.0.113.10");
    // one job runs; a second is refused by the controller and, placed past it, by the
    // other agent, which is free
    let long = broker.submit(&["--location", "fr"], LONG_JOB)["job"]
        .as_str()
        .unwrap()
        .to_string();
    running_jobs(&broker, 1, Duration::from_secs(30));
    fails(
        &[
            "fleet",
            "submit",
            u[0],
            u[1],
            "--runtime",
            "native",
            "--location",
            "fr",
            "--",
            "ping",
            "-c",
            "1",
            "203.0.113.10",
        ],
        "quota exceeded: tenant default may run 1 job(s) at once, 1 run(s) now and 1 more asked",
    );
    let second = place_raw(&broker, "ping -c 1 203.0.113.10");
    let (_, summaries) = broker.results(3);
    let s = summary_of(&summaries, &over);
    assert!(
        s.contains(": refused, 0 records")
            && s.contains("quota exceeded: tenant default may send 100 probes per day"),
        "{s}"
    );
    let s = summary_of(&summaries, &second);
    assert!(
        s.contains(": refused, 0 records")
            && s.contains("quota exceeded: tenant default may run 1 job(s) at once, 1 run(s) now"),
        "{s}"
    );
    let s = summary_of(&summaries, &long);
    assert!(s.contains(": ok, "), "{s}");
    // its 30 probes, as its record says (the refused ones cost nothing)
    running_jobs(&broker, 0, Duration::from_secs(10));
    assert_eq!(quota(&broker)["probes_today"], 30, "{}", quota(&broker));
    // an agent SIGKILLed while its job runs: its lease stops counting
    let job = broker.submit(&["--location", "fr"], LONG_JOB)["job"]
        .as_str()
        .unwrap()
        .to_string();
    let i = running(&agents, &job, 1);
    running_jobs(&broker, 1, Duration::from_secs(30));
    // (its watchdog removes the job's processes)
    let dead = agents.remove(i);
    dead.signal("KILL");
    drop(agents);
    let back = running_jobs(
        &broker,
        0,
        vtnt_fleet::quota::LEASE + Duration::from_secs(5),
    );
    eprintln!(
        "a dead agent's slot came back {:.1} s after the kill (lease {:?})",
        back.as_secs_f64(),
        vtnt_fleet::quota::LEASE
    );
    drop(dead);
}

/// Agents advertise tags, AS and country (options and heartbeat), and a measurement or a
/// single job selects by them: no match or too few are refused with what there is,
/// nothing stored; a match is stored with its selection, a job goes where it matches.
#[test]
fn measurements_and_jobs_select_vantage_points_by_tag_as_and_country() {
    if !ready(vtnt_testkit::test_name!(), false) {
        return;
    }
    let broker = Broker::up("msel");
    let host = ["--net", "host"];
    let _fr = Agent::start(
        &broker,
        "s1",
        "fr",
        &host,
        &[
            "--tag",
            "ixp",
            "--tag",
            "v6",
            "--asn",
            "64500",
            "--country",
            "FR",
        ],
    );
    let _pl = Agent::start(
        &broker,
        "s2",
        "pl",
        &host,
        &["--tag", "ixp", "--asn", "64501", "--country", "PL"],
    );
    let _de = Agent::start(&broker, "s3", "de", &host, &["--asn", "64500"]);
    let nodes = broker.status()["nodes"].clone();
    let s1 = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "s1")
        .unwrap();
    assert_eq!(
        (&s1["tags"], &s1["asn"], &s1["country"]),
        (
            &serde_json::json!(["ixp", "v6"]),
            &Value::from(64500),
            &Value::from("FR")
        ),
        "{s1}"
    );
    let create = |extra: &[&str]| {
        let mut a = vec!["--runtime", "native", "--start-in", "1h"];
        a.extend_from_slice(extra);
        a.extend(["--", "trace", "203.0.113.10"]);
        measurement(&broker, "create", &a)
    };
    let fails = |extra: &[&str], says: &str| {
        let out = create(extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} succeeded");
        assert!(err.contains(says), "{extra:?}: {err}");
    };
    fails(
        &["--tag", "ixp", "--country", "DE"],
        "(locations any, tags ixp, countries DE, runtime `native`, all) matches 0 vantage point(s)",
    );
    fails(
        &["--tag", "ixp", "--count", "3"],
        "matches 2 vantage point(s) with an up node: fr, pl",
    );
    fails(&["--country", "fr"], "country `fr`: two upper-case letters");
    fails(&["--tag", "a.b"], "--tag `a.b`");
    fails(&[], "a measurement needs a selection");
    assert!(measurements(&broker).is_empty());
    // a single job, on a location drawn among those that match
    let ev = broker.submit(&["--tag", "v6"], "ping -c 1 127.0.0.1");
    assert_eq!(ev["location"], "fr", "{ev}");
    let ev = broker.submit(
        &["--asn", "64501", "--location", "pl"],
        "ping -c 1 127.0.0.1",
    );
    assert_eq!(ev["location"], "pl", "{ev}");
    let out = broker.run(
        "submit",
        &[
            "--runtime",
            "native",
            "--tag",
            "v6",
            "--country",
            "PL",
            "--",
            "ping",
            "127.0.0.1",
        ],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("matches 0 vantage point(s)"),
        "{out:?}"
    );
    let out = create(&["--asn", "64500", "--count", "1"]);
    assert!(
        out.status.success(),
        "create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = measurements(&broker);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(
        (&all[0]["selection"]["asns"], &all[0]["selection"]["count"]),
        (&serde_json::json!([64500]), &Value::from(1)),
        "{all:?}"
    );
}

/// Agents admitting one tenant's jobs at once, each on a connection of its own as the
/// agents' user, never pass its limits: of 20 jobs admitted together under 3 jobs at once,
/// exactly 3 hold a lease; then, with 30 probes spent of 55 a day, 2 of 20 more jobs of 10
/// probes each. Every write is a compare-and-set on the tenant's use, so the losers read
/// again.
#[test]
fn agents_racing_to_admit_jobs_never_pass_the_limits() {
    if !ready(vtnt_testkit::test_name!(), false) {
        return;
    }
    let broker = Broker::up("qrace");
    let operator =
        vtnt_fleet::Connect::local(&broker.name, vtnt_fleet::auth::Role::Operator).unwrap();
    let agent = vtnt_fleet::Connect::local(&broker.name, vtnt_fleet::auth::Role::Agent).unwrap();
    let race = |round: &str| -> (usize, vtnt_fleet::quota::Quota) {
        let agent = agent.clone();
        let round = round.to_string();
        let admitted = vtnt_fleet::block_on(async move {
            let mut fleets = Vec::new();
            for i in 0..4 {
                fleets.push(agent.fleet(&format!("racer {i}")).await?.1);
            }
            let tries = (0..20).map(|j| {
                let fleet = &fleets[j % 4];
                let job = format!("{round}{j}");
                async move { vtnt_fleet::quota::admit(fleet, "default", &job, "n", 10).await }
            });
            let all = futures::future::join_all(tries).await;
            let mut admitted = 0;
            for a in all {
                if a?.is_ok() {
                    admitted += 1;
                }
            }
            Ok::<_, vtnt_fleet::Error>(admitted)
        })
        .expect("admitting");
        (
            admitted,
            vtnt_fleet::quota::show(&operator, "default").expect("quota show"),
        )
    };
    vtnt_fleet::quota::set(&operator, "default", Some(Some(3)), None).unwrap();
    let (admitted, q) = race("a");
    assert_eq!(
        (admitted, q.jobs_running, q.probes_today),
        (3, 3, 30),
        "{q:?}"
    );
    vtnt_fleet::quota::set(&operator, "default", Some(None), Some(Some(55))).unwrap();
    let (admitted, q) = race("b");
    assert_eq!((admitted, q.probes_today), (2, 50), "{q:?}");
}

/// A periodic measurement's cycle that does not fit its tenant's day's probes is not
/// started: the controller waits, places nothing and loses no cycle, and starts it once
/// the operator raises the limit.
#[test]
fn a_cycle_over_quota_waits_and_starts_once_the_quota_allows() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    let broker = Broker::up("qcyc");
    let lab = lab("qcyc");
    let _a = Agent::start(&broker, "c1", "fr", &lab_net(&lab), &[]);
    let set = |probes: &str| {
        let out = quota_cmd(&broker, "set", &["default", "--probes-per-day", probes]);
        assert!(
            out.status.success(),
            "quota set: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // three cycles of 3 probes fit in 10, the fourth does not
    set("10");
    let out = measurement(
        &broker,
        "create",
        &[
            "--runtime",
            "native",
            "--location",
            "fr",
            "--every",
            "2s",
            "--cycles",
            "5",
            "--",
            "ping",
            "-c",
            "3",
            "-i",
            "0.2",
            "203.0.113.10",
        ],
    );
    assert!(
        out.status.success(),
        "create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _controller = Controller::start(&broker, &[]);
    let t0 = Instant::now();
    while measurements(&broker)[0]["placed"] != 3 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{:?}",
            measurements(&broker)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // two more intervals: cycle 3 is due, and waits
    std::thread::sleep(Duration::from_secs(4));
    let m = &measurements(&broker)[0];
    assert_eq!(
        (
            m["state"].as_str(),
            m["started"].as_u64(),
            m["placed"].as_u64()
        ),
        (Some("running"), Some(3), Some(3)),
        "{m}"
    );
    assert_eq!(quota(&broker)["probes_today"], 9, "{}", quota(&broker));
    set("100");
    let t0 = Instant::now();
    while measurements(&broker)[0]["state"] != "done" {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{:?}",
            measurements(&broker)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, summaries) = broker.results(5);
    assert_eq!(summaries.len(), 5, "{summaries:?}");
    assert!(
        summaries
            .iter()
            .all(|s| s.as_str().unwrap().contains(": ok, ")),
        "{summaries:?}"
    );
}

/// Issue 42's Ark-style cycles: a campaign of 12 lab targets in 6 /24s split across two
/// vantage points, two cycles, the controller SIGKILLed after the first and started
/// again. Each cycle deals every /24 to one vantage point as the cycle's seed says
/// (`campaign::deal`), every target is pinged once per cycle; each cycle's archive
/// (gzip-compressed warts) is read back by scamper's own `sc_warts2json`, which sees the
/// list, the cycle and every record. An archive of a cycle not yet placed is refused.
#[test]
fn a_split_campaign_deals_each_prefix_to_one_vantage_point_and_archives_each_cycle() {
    if !ready(vtnt_testkit::test_name!(), true) {
        return;
    }
    vtnt_testkit::require_tools!("sc_warts2json", "gzip");
    let broker = Broker::up("ark");
    let lab = lab("ark");
    let _a = Agent::start(&broker, "k1", "fr", &lab_net(&lab), &[]);
    let _b = Agent::start(&broker, "k2", "pl", &lab_net(&lab), &[]);
    let targets: Vec<String> = (0..6)
        .flat_map(|p| [1, 2].map(|h| format!("100.64.{p}.{h}")))
        .collect();
    let file = TempFile::lines("ark-targets", targets.clone().into_iter());
    let out = measurement(
        &broker,
        "create",
        &[
            "--runtime",
            "native",
            "--location",
            "any",
            "--count",
            "2",
            "--every",
            "4s",
            "--cycles",
            "2",
            "--split",
            &file.path(),
            "--",
            "ping",
            "-c",
            "1",
        ],
    );
    assert!(
        out.status.success(),
        "create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let dir = std::env::temp_dir().join(format!("vtnt-ark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let archive = |k: u64| {
        let path = dir.join(format!("{id}-c{k}.warts.gz"));
        let out = measurement(
            &broker,
            "archive",
            &[
                &id,
                "--cycle",
                &k.to_string(),
                "-o",
                &path.display().to_string(),
            ],
        );
        (out, path)
    };
    let (early, path) = archive(0);
    let err = String::from_utf8_lossy(&early.stderr);
    assert!(
        !early.status.success()
            && err.contains("cycle 0 of measurement")
            && err.contains("not placed yet"),
        "{err}"
    );
    assert!(!path.exists());
    // cycle 0 placed, the controller SIGKILLed; another finishes the campaign
    let first = Controller::start(&broker, &[]);
    let t0 = Instant::now();
    while measurements(&broker)[0]["placed"] != 1 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{:?}",
            measurements(&broker)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // cycle 0's jobs just queued: its archive is refused while one has no summary (its
    // jobs are usually still deploying; should they all have finished, it is written)
    let (soon, path) = archive(0);
    let err = String::from_utf8_lossy(&soon.stderr);
    if soon.status.success() {
        eprintln!("cycle 0 finished before its archive was asked");
    } else {
        assert!(
            err.contains("cycle 0 of measurement")
                && err.contains("is not finished: job")
                && err.contains("has no summary yet"),
            "{err}"
        );
        assert!(!path.exists());
        eprintln!("refused at once: {}", err.trim());
    }
    drop(first);
    let mut second = Controller::start(&broker, &["--until-idle"]);
    let t0 = Instant::now();
    while second.0.try_wait().expect("waiting").is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the controller did not finish"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let m = measurements(&broker)[0].clone();
    assert_eq!(m["state"], "done", "{m}");
    assert_eq!(m["cycle_jobs"], serde_json::json!([2, 2]), "{m}");
    let def: vtnt_fleet::measurement::Definition = serde_json::from_value(m).unwrap();
    broker.results(4);
    let addrs: Vec<std::net::IpAddr> = targets.iter().map(|t| t.parse().unwrap()).collect();
    let mut dealt = Vec::new();
    for k in 0..2u64 {
        // what each job pinged: a share of the cycle's deal
        let mut shares: Vec<Vec<std::net::IpAddr>> = (0..2)
            .map(|i| {
                let out = broker.run("results", &["--job", &def.job_id(k, i)]);
                assert!(out.status.success());
                let mut dsts: Vec<std::net::IpAddr> = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter(|l| l.starts_with("{\"type\":\"ping\""))
                    .filter_map(|l| {
                        l.split("\"dst\":\"")
                            .nth(1)?
                            .split('"')
                            .next()?
                            .parse()
                            .ok()
                    })
                    .collect();
                dsts.sort();
                dsts
            })
            .collect();
        shares.sort();
        let mut want = vtnt_fleet::campaign::deal(&addrs, 2, def.seed(k));
        want.sort();
        assert_eq!(
            shares, want,
            "cycle {k}: each /24 on one vantage point, as the seed deals"
        );
        let mut all: Vec<_> = shares.iter().flatten().collect();
        all.sort();
        assert_eq!(all.len(), 12, "every target once in cycle {k}: {shares:?}");
        all.dedup();
        assert_eq!(all.len(), 12, "every target once in cycle {k}: {shares:?}");
        dealt.push(shares);
        // the cycle's archive, read back by scamper
        let (out, path) = archive(k);
        assert!(
            out.status.success(),
            "archive: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let warts = dir.join(format!("c{k}.warts"));
        let gz = Command::new("gzip").arg("-dc").arg(&path).output().unwrap();
        assert!(gz.status.success());
        std::fs::write(&warts, &gz.stdout).unwrap();
        let sc = Command::new("sc_warts2json").arg(&warts).output().unwrap();
        assert!(
            sc.status.success(),
            "{}",
            String::from_utf8_lossy(&sc.stderr)
        );
        let lines: Vec<Value> = String::from_utf8_lossy(&sc.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("sc_warts2json's JSON"))
            .collect();
        let of = |t: &str| lines.iter().filter(|v| v["type"] == t).collect::<Vec<_>>();
        let (starts, stops, pings) = (of("cycle-start"), of("cycle-stop"), of("ping"));
        assert_eq!(
            (starts.len(), stops.len(), pings.len()),
            (1, 1, 12),
            "{lines:?}"
        );
        assert_eq!(starts[0]["list_name"], id.as_str(), "{:?}", starts[0]);
        assert_eq!(starts[0]["id"], k, "{:?}", starts[0]);
        let mut pinged: Vec<&str> = pings.iter().filter_map(|p| p["dst"].as_str()).collect();
        pinged.sort();
        pinged.dedup();
        assert_eq!(pinged.len(), 12, "{pinged:?}");
        eprintln!(
            "cycle {k}: {} bytes of gzip warts, shares {:?}",
            std::fs::metadata(&path).unwrap().len(),
            shares_of(&dealt[k as usize])
        );
    }
    eprintln!(
        "the two cycles dealt {}",
        if dealt[0] != dealt[1] {
            "differently"
        } else {
            "alike (as their seeds say)"
        }
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The /24s of each share, for the log.
fn shares_of(shares: &[Vec<std::net::IpAddr>]) -> Vec<Vec<String>> {
    shares
        .iter()
        .map(|s| {
            let mut p: Vec<String> = s
                .iter()
                .map(|a| vtnt_fleet::campaign::prefix_of(*a).to_string())
                .collect();
            p.dedup();
            p
        })
        .collect()
}

/// `fleet rate-limit SUB` with the broker's reach and `args`.
fn rate_cmd(broker: &Broker, sub: &str, args: &[&str]) -> Output {
    let mut a = vec!["fleet", "rate-limit", sub];
    a.extend(broker.reach.iter().map(String::as_str));
    a.extend_from_slice(args);
    vtnt(&a)
}

/// The fleet-wide rate limit holds across agents: 40 jobs leasing at once toward one /24,
/// each on one of 4 connections as the agents' user, asking 15 pps each under 100 per
/// /24, are granted 100 in all and the rest refused, naming the prefix and its limit; a
/// job over two destinations under 10 per destination gets 10; leases not renewed (their
/// agent died) no longer count after [`vtnt_fleet::rate::LEASE`]. A limit of 0 or a
/// negative one is refused and changes nothing.
#[test]
fn concurrent_rate_leases_never_pass_the_limit_and_a_dead_agents_expire() {
    if !ready(vtnt_testkit::test_name!(), false) {
        return;
    }
    let broker = Broker::up("rlim");
    let operator =
        vtnt_fleet::Connect::local(&broker.name, vtnt_fleet::auth::Role::Operator).unwrap();
    let agent = vtnt_fleet::Connect::local(&broker.name, vtnt_fleet::auth::Role::Agent).unwrap();
    for (bad, says) in [
        ("0", "a rate limit of 0 would stop every probe"),
        ("-5", "a whole number of probes per second"),
    ] {
        let out = rate_cmd(&broker, "set", &["--per-prefix", bad]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{err}");
    }
    let e = vtnt_fleet::rate::set(&operator, Some(Some(0)), None).unwrap_err();
    assert!(format!("{e:#}").contains("0 probes per second"), "{e:#}");
    let none = vtnt_fleet::rate::show(&operator).unwrap();
    assert_eq!(none, vtnt_fleet::rate::Limits::default());
    let out = rate_cmd(
        &broker,
        "set",
        &["--per-prefix", "100", "--per-destination", "unlimited"],
    );
    assert!(
        out.status.success(),
        "rate-limit set: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ip = |s: String| -> std::net::IpAddr { s.parse().unwrap() };
    let (granted, refusals, leased) = vtnt_fleet::block_on(async {
        let mut fleets = Vec::new();
        for i in 0..4 {
            fleets.push(agent.fleet(&format!("racer {i}")).await?.1);
        }
        let tries =
            (0..40).map(|j| {
                let fleet = &fleets[j % 4];
                let targets = [ip(format!("192.0.2.{}", j + 1))];
                async move {
                    vtnt_fleet::rate::acquire(fleet, &format!("j{j}"), "n", &targets, 15).await
                }
            });
        let (mut granted, mut refusals) = (0u32, Vec::new());
        for a in futures::future::join_all(tries).await {
            match a? {
                Ok(held) => granted += held.pps,
                Err(why) => refusals.push(why),
            }
        }
        let leased = vtnt_fleet::rate::leases(&fleets[0], "p4-192-0-2-0").await?;
        Ok::<_, vtnt_fleet::Error>((granted, refusals, leased))
    })
    .expect("leasing");
    assert_eq!(granted, 100, "{leased:?}");
    assert_eq!(leased.jobs.values().map(|s| s.pps).sum::<u32>(), 100);
    assert_eq!(refusals.len(), 40 - leased.jobs.len(), "{refusals:?}");
    assert!(
        refusals[0].contains(
            "rate limit: prefix 192.0.2.0/24 may receive 100 probes per second from the whole fleet"
        ),
        "{refusals:?}"
    );
    vtnt_fleet::rate::set(&operator, None, Some(Some(10))).unwrap();
    let t0 = Instant::now();
    let (two, after) = vtnt_fleet::block_on(async {
        let (_, fleet) = agent.fleet("late").await?;
        let two = [ip("198.51.100.1".into()), ip("198.51.100.2".into())];
        let two = vtnt_fleet::rate::acquire(&fleet, "two", "n", &two, 50).await?;
        // nobody renews the /24's leases: after LEASE they are gone
        tokio::time::sleep(vtnt_fleet::rate::LEASE + Duration::from_secs(1)).await;
        let one = [ip("192.0.2.200".into())];
        let after = vtnt_fleet::rate::acquire(&fleet, "after", "n", &one, 15).await?;
        Ok::<_, vtnt_fleet::Error>((two, after))
    })
    .expect("leasing again");
    let two = two.expect("a share");
    assert_eq!(two.pps, 10, "the least of its keys' shares");
    assert_eq!(two.keys.len(), 3, "{:?}", two.keys);
    assert_eq!(after.expect("the dead leases expired").pps, 10);
    assert!(t0.elapsed() < vtnt_fleet::rate::LEASE * 3);
}
