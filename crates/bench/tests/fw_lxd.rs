//! `vtnt bench fw --runtimes lxd` (issue 39) at a tiny size: our NF in an LXD container
//! whose NICs are the NF namespace's veths forwards the trace, says its load time, and
//! has memory and CPU of its own; iptables in an LXD container of its own, with the same
//! veths, forwards it too, and so does the native iptables after it (the veths came back
//! up); afterwards nothing of it is left: no daemon, no state directory (its containers
//! and images in it), no namespace, no group of LXC's, no client configuration in the
//! home directory.
//!
//! The `vtnt` binary is [`vtnt_testkit::vtnt_binary`] (this is not its package); the
//! static vtnt the container runs is the installed tree's (`cargo xtask dist`).

use std::process::Command;

/// What of LXD and the bench is there now: `lxd` processes, the bench's LXD state
/// directories, its namespaces, LXC's cgroups.
fn leftovers() -> Vec<String> {
    // zombies aside: the daemon's double-forked helpers (`lxd forkstart`) end as children
    // of PID 1, which reaps them when it will
    let zombie = |p: &u32| {
        std::fs::read_to_string(format!("/proc/{p}/stat")).map_or(true, |s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
    };
    let mut v: Vec<String> = vtnt_measure::proc::pids_named("lxd")
        .into_iter()
        .filter(|p| !zombie(p))
        .map(|p| format!("lxd process {p}"))
        .collect();
    let work = vtnt_runtimes::paths::work_base();
    for e in std::fs::read_dir(&work).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("lxd-") {
            v.push(format!("state directory {}", e.path().display()));
        }
    }
    for e in std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("fwb") {
            v.push(format!("namespace {name}"));
        }
    }
    // the client's configuration goes in the daemon's directory, not the user's home
    if let Some(home) = std::env::var_os("HOME") {
        let conf = std::path::Path::new(&home).join(".config/lxc");
        if conf.exists() {
            v.push(format!("client configuration {}", conf.display()));
        }
    }
    for h in std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        for g in std::fs::read_dir(h.path()).into_iter().flatten().flatten() {
            if g.file_name().to_string_lossy().starts_with("lxc.") {
                v.push(format!("cgroup {}", g.path().display()));
            }
        }
    }
    v
}

#[test]
fn the_bench_measures_the_nf_in_lxd() {
    vtnt_testkit::require_root!("ip", "ethtool", "lxd", "lxc", "tar", "iptables-restore");
    if let Err(e) = vtnt_runtimes::paths::static_vtnt() {
        vtnt_testkit::skip_or_fail("fw_lxd", &format!("{e:#}"), None);
        return;
    }
    let before = leftovers();
    let o = Command::new(vtnt_testkit::vtnt_binary())
        .args(["bench", "fw", "--json", "--rules", "10", "--reps", "1"])
        .args(["--packets", "2000", "--flows", "1000", "--runtimes", "lxd"])
        .args(["--no-nftables", "--seconds", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["report"].as_array().unwrap();
    // one size, both modes: our NF in LXD, iptables natively and in LXD
    assert_eq!(rows.len(), 6, "{rows:?}");
    for r in rows {
        let rt = r["runtime"].as_str().unwrap();
        let accel = if rt == "lxd" {
            "none (LXD container)"
        } else {
            "none"
        };
        assert_eq!(r["accelerator"], accel, "{r}");
        // a 10-rule set drops or rejects a share of the trace: most of it crosses
        let delivered = r["delivered"][0].as_f64().unwrap();
        assert!(delivered > 0.5 && delivered <= 1.0, "{r}");
        assert!(r["pps"][0].as_f64().unwrap() > 0.0, "{r}");
        let load = r["load_ms"][0].as_f64().unwrap();
        assert!(load.is_finite() && load >= 0.0, "{r}");
        match (r["nf"].as_str().unwrap(), rt) {
            ("vtnt", "lxd") => {
                assert!(r["rss_kib"][0].as_f64().unwrap() > 100.0, "{r}");
                assert!(r["cpu_pct"][0].as_f64().unwrap() > 0.0, "{r}");
            }
            ("iptables", "native" | "lxd") => assert!(r["rss_kib"][0].is_null(), "{r}"),
            (nf, rt) => panic!("a row of {nf} in {rt}: {r}"),
        }
    }
    assert_eq!(
        leftovers(),
        before,
        "left behind by vtnt bench fw --runtimes lxd"
    );
}
