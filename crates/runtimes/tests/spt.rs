//! The spt runtime's sandbox, on real processes and a lab of its own: a guest that makes
//! a forbidden call dies of SIGSYS and `vtnt` says so; a running guest holds only the
//! descriptors its tender gave it, under two stacked seccomp filters with
//! `no_new_privs`; a job line the guest rejects ends in one error line and a non-zero
//! status. Needs root (skips through vtnt-testkit otherwise).

mod common;

use std::time::{Duration, Instant};

use vtnt_measure::cgroup::Cgroup;
use vtnt_runtimes::net::Network;
use vtnt_runtimes::{spt, InstanceSpec, Runtime};

fn job(words: &str) -> vtnt_job::JobSpec {
    let words: Vec<String> = words.split_whitespace().map(String::from).collect();
    vtnt_job::parse_words(&words, vtnt_job::Vantage::Lab)
        .expect("a valid job")
        .spec
}

/// The guest image with `features` besides `spt` (none: the installed one, as `vtnt
/// run` takes it; else a test build, through `vtnt-xtask`).
fn image(features: &[&str]) -> std::path::PathBuf {
    if features.is_empty() {
        return vtnt_artifacts::find(vtnt_artifacts::Artifact::JobSpt)
            .expect("the installed spt guest (cargo xtask dist)")
            .path;
    }
    let features: Vec<&str> = ["spt"].iter().chain(features).copied().collect();
    vtnt_xtask::kernel::build(&features)
        .expect("building the spt guest")
        .path
}

/// A guest started by the tender on `lab`, in a cgroup of its own.
fn start(
    tag: &str,
    lab: &str,
    image: &std::path::Path,
    spec: &InstanceSpec,
) -> (
    vtnt_measure::proc::Supervised,
    vtnt_unikernel::lab::SlotLock,
    Cgroup,
) {
    let net = Network::Lab(lab.into())
        .attach(Runtime::Spt)
        .expect("the lab");
    let cgroup =
        Cgroup::create(&format!("vtnt/spt-{tag}-{}", std::process::id())).expect("a cgroup");
    let started =
        spt::start(image, &net, spec, &cgroup, Duration::from_secs(30)).expect("the tender");
    (started.child, started.slot.expect("a lab slot"), cgroup)
}

#[test]
fn a_guest_that_opens_a_file_dies_of_sigsys_and_is_reported() {
    let test = "a_guest_that_opens_a_file_dies_of_sigsys_and_is_reported";
    if !common::basics_ready(test) {
        return;
    }
    let lab = common::LabGuard::up("sys").expect("vtnt lab up");
    let image = image(&["spt-forbidden-call"]);
    let spec = InstanceSpec::new(job("ping -c 1 192.0.2.1"));
    let (child, _slot, cgroup) = start("sys", &lab.name, &image, &spec);
    let fin = child.wait(Duration::from_secs(30)).expect("the guest ends");
    let (code, why) = spt::outcome(fin.status);
    assert_eq!(code, None, "{fin:?}");
    assert!(
        why.as_deref().is_some_and(|w| w.contains("SIGSYS")),
        "{why:?}"
    );
    // killed before its first line: it never reached the job
    assert!(!fin.stdout.contains("\"type\":\"ping\""), "{}", fin.stdout);
    assert!(cgroup.pids().is_empty(), "nothing of it left running");
}

#[test]
fn a_running_guest_holds_only_its_descriptors_under_two_filters() {
    let test = "a_running_guest_holds_only_its_descriptors_under_two_filters";
    if !common::basics_ready(test) {
        return;
    }
    let lab = common::LabGuard::up("fds").expect("vtnt lab up");
    let image = image(&[]);
    let mut held = job("ping -c 1 192.0.2.1");
    held.hold = Duration::from_secs(3);
    let spec = InstanceSpec::new(held);
    let (child, _slot, cgroup) = start("fds", &lab.name, &image, &spec);
    let pid = child.pid();
    // once its result is out, it is holding: look at it from outside
    let t0 = Instant::now();
    while !String::from_utf8_lossy(&child.stdout_lines_from(0)).contains("\"type\":\"hold\"") {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no hold line: {}",
            String::from_utf8_lossy(&child.stdout_lines_from(0))
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut fds: Vec<(u32, String)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("its descriptors")
        .map(|e| {
            let e = e.expect("an entry");
            let fd = e.file_name().to_string_lossy().parse().expect("a number");
            let to = std::fs::read_link(e.path()).expect("a link");
            (fd, to.to_string_lossy().into_owned())
        })
        .collect();
    fds.sort();
    assert_eq!(fds.len(), 2, "{fds:?}");
    assert_eq!(fds[0].0, 1);
    assert!(fds[0].1.starts_with("pipe:"), "{fds:?}");
    assert_eq!(fds[1].0, 3);
    assert!(fds[1].1.starts_with("socket:"), "{fds:?}");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .map(str::trim)
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(field("NoNewPrivs:"), "1", "{status}");
    assert_eq!(field("Seccomp:"), "2", "filter mode: {status}");
    if !field("Seccomp_filters:").is_empty() {
        assert_eq!(field("Seccomp_filters:"), "2", "the tender's and its own");
    }
    // the tender is gone: the instance's cgroup holds the guest alone
    assert_eq!(cgroup.pids(), vec![pid]);
    let fin = child.wait(Duration::from_secs(30)).expect("the guest ends");
    assert_eq!(spt::outcome(fin.status), (Some(0), None), "{}", fin.stdout);
}

/// The guest run by hand with a job line it cannot decode: one `vtnt: error:` line, the
/// documented status 2 (bad command line), no result.
#[test]
fn a_job_line_the_guest_rejects_is_one_error_line() {
    let test = "a_job_line_the_guest_rejects_is_one_error_line";
    if vtnt_testkit::missing_root_or(&[]).is_some() {
        vtnt_testkit::skip_or_fail(test, "needs root (the guest's seccomp filter)", None);
        return;
    }
    let out = std::process::Command::new(image(&[]))
        .arg("ip=192.0.2.10/24 gw=192.0.2.1 mac=52:54:00:76:74:0a -- vtnt-job=1 kind=teleport")
        .output()
        .expect("running the guest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    let errors: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("vtnt: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{stdout}");
    assert!(!stdout.contains("\"type\":\"trace\""));
}

/// The guest checks targets as the host does, one by one: its LAN's broadcast and
/// network addresses are refused (its `ip=` says what they are), loopback too (it has
/// none), each with a line naming it, and the rest of the job runs.
#[test]
fn a_guest_refuses_what_it_cannot_probe_target_by_target() {
    let test = "a_guest_refuses_what_it_cannot_probe_target_by_target";
    if !common::basics_ready(test) {
        return;
    }
    let lab = common::LabGuard::up("tgt").expect("vtnt lab up");
    let image = image(&[]);
    let spec = InstanceSpec::new(job(
        "trace -q 1 -w 0.5 127.0.0.1 192.0.2.255 192.0.2.0 203.0.113.10",
    ));
    let (child, _slot, _cgroup) = start("tgt", &lab.name, &image, &spec);
    let fin = child.wait(Duration::from_secs(30)).expect("the guest ends");
    let out = &fin.stdout;
    assert_eq!(spt::outcome(fin.status), (Some(0), None), "{out}");
    // the first slot is on the vantage LAN, 192.0.2.0/24
    assert!(out.contains("\"ip\":\"192.0.2."), "{out}");
    assert!(out.contains("/24\""), "{out}");
    for (addr, why) in [
        ("127.0.0.1", "the unikernel has no loopback interface"),
        (
            "192.0.2.255",
            "192.0.2.255 is the broadcast address of 192.0.2.0/24",
        ),
        (
            "192.0.2.0",
            "192.0.2.0 is the network address of 192.0.2.0/24",
        ),
    ] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(&format!("vtnt: skipping {addr}: ")) && l.contains(why)),
            "{addr}: {out}"
        );
    }
    let traces: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("{\"type\":\"trace\""))
        .collect();
    assert_eq!(traces.len(), 1, "{out}");
    assert!(traces[0].contains("\"dst\":\"203.0.113.10\""), "{out}");
}
