//! Ctrl-C in the middle of `vtnt bench deploy`'s density ramp, of `vtnt bench micro`'s
//! repetitions and of `vtnt bench fw`'s sweep: the run ends within seconds with the
//! reason, every instance, cgroup and namespace it started is gone (and for deploy the
//! kernel's `favordynmods` is as it was), and no report of half a run is written. Real
//! processes: the `vtnt` binary, a lab of its own, native instances in cgroups, the
//! firewall NF between namespaces.

mod lab_common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use lab_common::{Lab, VTNT};

/// The groups under the memory controller's `vtnt` whose names start with `prefix`.
fn groups_named(prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/sys/fs/cgroup/memory/vtnt")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The density groups (`vtnt/density-*`).
fn density_groups() -> Vec<String> {
    groups_named("density")
}

/// Starts `vtnt ARGS` and waits (5 minutes at most, failing if it ends first) for the
/// first line of its stderr that contains `want`: the child, the rest of its stderr
/// (read on a thread of its own) and the lines so far.
fn start(args: &[&str], want: &str) -> (Child, Receiver<String>, Vec<String>) {
    let mut child = Command::new(VTNT)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vtnt bench");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let (t0, mut seen) = (Instant::now(), Vec::new());
    loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(l) => {
                let found = l.contains(want);
                seen.push(l);
                if found {
                    return (child, rx, seen);
                }
            }
            Err(_) => assert!(
                t0.elapsed() < Duration::from_secs(300) && child.try_wait().unwrap().is_none(),
                "no `{want}`: {seen:#?}"
            ),
        }
    }
}

/// SIGINT to `child`; it must end, failed and saying it was interrupted, within
/// `within`. The rest of its stderr goes into `seen`.
fn interrupt(child: &mut Child, rx: &Receiver<String>, within: Duration, seen: &mut Vec<String>) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t1.elapsed() > within {
            let _ = child.kill();
            panic!("vtnt still runs {within:?} after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(300));
    seen.extend(rx.try_iter());
    assert!(!status.success(), "exit {status:?}");
    assert!(
        seen.iter().any(|l| l.contains("interrupted")),
        "no reason given: {seen:#?}"
    );
}

/// The mounts whose options carry `favordynmods`.
fn dynmods_mounts() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("favordynmods"))
        .map(String::from)
        .collect()
}

#[test]
fn sigint_in_a_density_ramp_leaves_nothing_behind() {
    vtnt_testkit::skip_if!(vtnt_testkit::missing_root_or(&["ip"]));
    vtnt_testkit::require_cgroup_v1!(vtnt_measure::cgroup::available());
    let lab = Lab::up("intr", None);
    let out = std::env::temp_dir().join(format!("vtnt-intr-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let groups = density_groups();
    let dynmods = dynmods_mounts();
    // favordynmods needs a cgroup2 mount to set it on; without one the run goes on as is
    let favor = std::path::Path::new("/sys/fs/cgroup/unified/cgroup.procs").exists();
    let mut args = vec![
        "bench",
        "deploy",
        "--lab",
        &lab.name,
        "--runtimes",
        "native",
        "--density-runtimes",
        "native",
        "--reps",
        "1",
        "--no-ksm",
        "--density-max",
        "2000",
        "--hold-secs",
        "1",
        "--out",
    ];
    let out_s = out.to_str().unwrap().to_string();
    args.push(&out_s);
    if favor {
        args.push("--favordynmods");
    }
    // wait for the ramp, let it start some instances, then Ctrl-C
    let (mut child, rx, mut seen) = start(&args, "density under");
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        density_groups().len() > groups.len(),
        "the ramp made no group: {seen:#?}"
    );
    interrupt(&mut child, &rx, Duration::from_secs(120), &mut seen);
    assert_eq!(density_groups(), groups, "density groups left behind");
    assert_eq!(dynmods_mounts(), dynmods, "favordynmods not restored");
    assert!(
        !out.join("report.md").exists() && !out.join("report.json").exists(),
        "a report of half a run was written"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn sigint_in_bench_micro_leaves_nothing_behind() {
    vtnt_testkit::skip_if!(vtnt_testkit::missing_root_or(&["ip"]));
    vtnt_testkit::require_cgroup_v1!(vtnt_measure::cgroup::available());
    let lab = Lab::up("intm", None);
    let out = std::env::temp_dir().join(format!("vtnt-intm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let out_s = out.to_str().unwrap().to_string();
    let (mut child, rx, mut seen) = start(
        &[
            "bench",
            "micro",
            "--lab",
            &lab.name,
            "--runtimes",
            "native",
            "--reps",
            "1000",
            "--calls",
            "1000",
            "--syscalls",
            "100",
            "--out",
            &out_s,
        ],
        "bench micro: native",
    );
    // a second in, instances come and go many times a second
    std::thread::sleep(Duration::from_secs(1));
    let mine = format!("inst-{}-", child.id());
    interrupt(&mut child, &rx, Duration::from_secs(60), &mut seen);
    assert_eq!(
        groups_named(&mine),
        Vec::<String>::new(),
        "instance groups left behind"
    );
    assert!(
        !out.join("micro.md").exists() && !out.join("micro.json").exists(),
        "a report of half a run was written"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// The network namespaces whose names start with `prefix`.
fn namespaces_named(prefix: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(String::from)
        .collect()
}

#[test]
fn sigint_in_bench_fw_leaves_nothing_behind() {
    vtnt_testkit::skip_if!(vtnt_testkit::missing_root_or(&["ip"]));
    // the first row measured, five to go: Ctrl-C stops the sweep at its next repetition
    let (mut child, rx, mut seen) = start(
        &[
            "bench",
            "fw",
            "--rules",
            "0,10,100",
            "--reps",
            "1",
            "--flows",
            "100",
            "--packets",
            "2000",
            "--no-iptables",
            "--no-nftables",
            // the drivers (iperf3, sockperf, ...) add nothing to what is tested here
            "--seconds",
            "0",
        ],
        "measured",
    );
    let mine = format!("fwb-{}-", child.id());
    let dir = std::env::temp_dir().join(format!("vtnt-bench-fw-{}", child.id()));
    assert!(
        !namespaces_named(&mine).is_empty(),
        "no namespaces seen: {seen:#?}"
    );
    interrupt(&mut child, &rx, Duration::from_secs(60), &mut seen);
    assert_eq!(
        namespaces_named(&mine),
        Vec::<String>::new(),
        "namespaces left behind"
    );
    assert!(!dir.exists(), "rule files left behind in {}", dir.display());
}
