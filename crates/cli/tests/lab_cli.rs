//! `vtnt lab` verbs through the real binary: errors that name file and line and start
//! nothing (names that do not print as themselves, numbers hundreds of digits long,
//! shown cut), exit status passed through `exec` and a signal to `exec` reaching its
//! command, recovery after a killed daemon, the VM attach contract, `generate`
//! determinism. The namespace tests need root.

mod lab_common;

use std::process::Command;

use lab_common::{vtnt, Lab};

#[test]
fn bad_topology_names_file_line_and_object_and_starts_nothing() {
    let dir = std::env::temp_dir().join(format!("vtnt-badtopo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.toml");
    let text = vtnt_reference().replace("ingress = \"u1\"", "ingress = \"u9\"");
    std::fs::write(&f, text).unwrap();
    let name = format!("vt-bad-{}", std::process::id());
    let out = vtnt(&["lab", "up", "--name", &name, f.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:"), "{err}");
    assert!(
        err.contains("[[lsp]] \"invisible-uhp\": router \"u9\" is not defined"),
        "{err}"
    );
    assert!(
        !std::path::Path::new("/run/netns").join(&name).exists(),
        "nothing started"
    );
    let out = vtnt(&["lab", "check", f.to_str().unwrap()]);
    assert!(!out.status.success());
}

#[test]
fn a_topology_file_past_the_size_limit_is_refused_unread() {
    let f = std::env::temp_dir().join(format!("vtnt-huge-{}.toml", std::process::id()));
    // sparse: 128 MiB and a byte, of which nothing may be read
    let file = std::fs::File::create(&f).unwrap();
    file.set_len((128 << 20) + 1).unwrap();
    let out = vtnt(&["lab", "check", f.to_str().unwrap()]);
    let _ = std::fs::remove_file(&f);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(": 134217729 bytes of topology is more than the lab takes (134217728 at most"),
        "{err}"
    );
}

fn vtnt_reference() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../topologies/reference.toml"
    ))
    .unwrap()
}

#[test]
fn generate_is_deterministic_and_checkable() {
    let a = vtnt(&["lab", "generate", "--seed", "11"]);
    let b = vtnt(&["lab", "generate", "--seed", "11"]);
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);
    let f = std::env::temp_dir().join(format!("vtnt-gen-{}.toml", std::process::id()));
    let out = vtnt(&[
        "lab",
        "generate",
        "--seed",
        "11",
        "--out",
        f.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let out = vtnt(&["lab", "check", f.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = vtnt(&["lab", "truth", "--json", f.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dsts: Vec<&str> = v["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["dst"].as_str().unwrap())
        .collect();
    assert!(!dsts.is_empty());
    // the destinations alone, as a `--targets` file in either family (scripts/demo.sh)
    let targets = |flag: &str| {
        let out = vtnt(&["lab", "truth", flag, f.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(targets("--targets"), targets("--targets=ipv4"));
    assert_eq!(targets("--targets").lines().collect::<Vec<_>>(), dsts);
    let twins: Vec<String> = dsts
        .iter()
        .map(|d| vtnt_lab::addr::to_v6(d.parse().unwrap()).to_string())
        .collect();
    assert_eq!(targets("--targets=ipv6").lines().collect::<Vec<_>>(), twins);
    let _ = std::fs::remove_file(f);
}

#[test]
fn truth_with_oracle_prints_each_tunnels_observation_beside_it() {
    let f = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../topologies/reference.toml"
    );
    let out = vtnt(&["lab", "truth", "--oracle", f]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("oracle: ") && text.contains(" probes"),
        "{text}"
    );
    // every tunnel line is followed by its observation: the reference's tunnels are all
    // observable (crates/bench/tests/tnt_accuracy.rs, reference_topology)
    let lines: Vec<&str> = text.lines().collect();
    let tunnels: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains(" LSRs ["))
        .collect();
    assert!(!tunnels.is_empty(), "{text}");
    for i in tunnels {
        let next = lines.get(i + 1).map_or("", |l| l.trim());
        assert!(
            next.starts_with("oracle: observable (ingress "),
            "after `{}`: `{next}`",
            lines[i]
        );
    }
    // without the flag, no oracle line
    let plain = vtnt(&["lab", "truth", f]);
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("oracle:"));
    // JSON: the truth and the oracle, one observation per truth tunnel
    let out = vtnt(&["lab", "truth", "--json", "--oracle", f]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dests = v["truth"]["destinations"].as_array().unwrap();
    let obs = v["oracle"]["tunnels"].as_array().unwrap();
    assert_eq!(dests.len(), obs.len());
    for (d, o) in dests.iter().zip(obs) {
        let o = o.as_array().unwrap();
        assert_eq!(d["tunnels"].as_array().unwrap().len(), o.len());
        assert!(o.iter().all(|x| x["observable"] == true), "{o:?}");
    }
}

#[test]
fn generate_takes_settings_and_refuses_bad_ones_by_flag() {
    let out = vtnt(&["lab", "generate", "--settings"]);
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && list.lines().count() >= 17, "{list}");
    assert!(
        list.lines()
            .any(|l| l.starts_with("te-stacks ") && l.contains("0.15")),
        "{list}"
    );
    let set = |args: &[&str]| {
        let mut all = vec!["lab", "generate", "--seed", "4"];
        all.extend_from_slice(args);
        vtnt(&all)
    };
    let out = set(&["--set", "vendors=juniper", "--set", "host-ttls=128"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("vendor = \"juniper\"") && !text.contains("vendor = \"cisco\""));
    for (args, says) in [
        (
            &["--set", "ecmp=2"][..],
            "--set: setting `ecmp`: `2` is not a share from 0 to 1",
        ),
        (
            &["--set", "ecmp"][..],
            "--set: `ecmp` is not NAME=VALUE (see --settings)",
        ),
        (&["--set", "nope=1"][..], "no generator setting `nope`"),
        (
            &["--lsrs", "5-2"][..],
            "--lsrs `5-2`: MIN-MAX, 1 <= MIN <= MAX <= 60",
        ),
        (&["--lsrs", "0-3"][..], "1 <= MIN"),
        (&["--mix", "0,0,0,0,0,0"][..], "not all 0"),
        // the largest topology the lab takes, refused before anything is generated
        (
            &["--destinations", "15000", "--lsrs", "1-60"][..],
            "lab generate: 1095000 routers (the most 15000 destinations may make: 73 each, \
             with up to 60 LSRs per LSP) is more than the lab takes (300000 at most",
        ),
        (
            &["--destinations", "15001"][..],
            "15001 is not in 1..=15000",
        ),
        (
            &["--set", "destinations=15001"][..],
            "`15001` is not a number from 1 to 15000",
        ),
    ] {
        let out = set(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && out.stdout.is_empty(), "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn exec_passes_the_exit_status_through() {
    vtnt_testkit::require_root!();
    let lab = Lab::up("exit", None);
    let out = lab.exec(&["sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7));
    let out = lab.exec(&["ip", "-o", "addr", "show", "dev", "vtnt0"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("192.0.2.2/24"));
    // Lab devices and routes exist only inside the namespace.
    let host = Command::new("ip").args(["-o", "link"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&host.stdout).contains("vtnt0"));
    let routes = Command::new("ip").args(["route"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&routes.stdout).contains("vtnt0"));
}

#[test]
fn a_signal_to_exec_reaches_its_command_and_leaves_nothing_running() {
    use std::os::unix::process::ExitStatusExt;
    vtnt_testkit::require_root!("sh", "sleep");
    let lab = Lab::up("execsig", None);
    let pidfile = std::env::temp_dir().join(format!("vtnt-execsig-{}", std::process::id()));
    let _ = std::fs::remove_file(&pidfile);
    let script = format!("echo $$ > {}; exec sleep 300", pidfile.display());
    let mut child = Command::new(lab_common::VTNT)
        .args([
            "lab", "exec", "--name", &lab.name, "--", "sh", "-c", &script,
        ])
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let pid = loop {
        if let Some(p) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        {
            break p;
        }
        assert!(t0.elapsed().as_secs() < 10, "the command never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let status = child.wait().unwrap();
    // the command died of the signal itself, and nothing of it is left
    assert_eq!(status.signal(), Some(15), "{status:?}");
    let t0 = std::time::Instant::now();
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        assert!(
            t0.elapsed().as_secs() < 2,
            "the command {pid} outlived `vtnt lab exec`"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(&pidfile);
}

#[test]
fn names_that_do_not_print_as_themselves_and_long_numbers_are_shown_safely() {
    let dir = std::env::temp_dir().join(format!("vtnt-badnames-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("escape.toml");
    let text = vtnt_reference().replacen("name = \"gw\"", "name = \"gw\\u001b]0;owned\\u0007\"", 1);
    assert_ne!(text, vtnt_reference(), "the reference has a router gw");
    std::fs::write(&f, text).unwrap();
    for verb in [&["lab", "check"][..], &["lab", "truth"]] {
        let mut args = verb.to_vec();
        args.push(f.to_str().unwrap());
        let out = vtnt(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{verb:?}: {err}");
        assert!(err.contains("escape.toml:"), "{verb:?}: {err}");
        assert!(err.contains("a control character"), "{verb:?}: {err}");
        assert!(
            !out.stderr.contains(&0x1b) && !out.stdout.contains(&0x1b),
            "{verb:?}: an escape reached the terminal"
        );
    }
    let long = "9".repeat(300);
    for args in [
        vec![
            "trace".to_string(),
            "-q".into(),
            long.clone(),
            "192.0.2.1".into(),
        ],
        vec![
            "lab".into(),
            "generate".into(),
            "--seed".into(),
            long.clone(),
        ],
        vec![
            "lab".into(),
            "generate".into(),
            "--seed".into(),
            "1".into(),
            "--lsrs".into(),
            format!("1-{long}"),
        ],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = vtnt(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(err.contains("99999999999999999999… (300 digits)"), "{err}");
        assert!(!err.contains(&long[..21]), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn killed_daemon_leaves_nothing_the_next_up_trips_over() {
    vtnt_testkit::require_root!();
    let lab = Lab::up("stale", None);
    let pid = std::fs::read_to_string(format!("/run/vtnt/lab/{}/pid", lab.name)).unwrap();
    Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let st = vtnt(&["lab", "status", "--name", &lab.name]);
    assert!(
        String::from_utf8_lossy(&st.stdout).contains("stale"),
        "{}",
        String::from_utf8_lossy(&st.stdout)
    );
    // up again under the same name: cleaned and running
    let out = vtnt(&["lab", "up", "--name", &lab.name]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st = vtnt(&["lab", "status", "--name", &lab.name]);
    assert!(String::from_utf8_lossy(&st.stdout).contains("running"));
    // a second up while running is refused
    let out = vtnt(&["lab", "up", "--name", &lab.name]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already running"));
    drop(lab);
    assert!(!std::path::Path::new("/run/netns")
        .join(format!("vt-stale-{}", std::process::id()))
        .exists());
}

/// The lab daemon logs as `lab up` was told (`--log-format json`), in its state
/// directory's `log`: one JSON object per line, what it serves among them.
#[test]
fn the_lab_daemon_logs_json_lines_as_told() {
    vtnt_testkit::require_root!();
    let name = format!("vt-log-{}", std::process::id());
    let out = vtnt(&["--log-format", "json", "lab", "up", "--name", &name]);
    let lab = Lab { name };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = std::env::var("VTNT_LAB_RUN_DIR").unwrap_or_else(|_| "/run/vtnt/lab".into());
    let log = std::fs::read_to_string(format!("{root}/{}/log", lab.name)).unwrap();
    let events: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let serving = events
        .iter()
        .find(|e| e["message"] == "lab serving")
        .unwrap_or_else(|| panic!("{log}"));
    assert_eq!(serving["level"], "INFO");
    assert_eq!(serving["lab"], lab.name.as_str());
    assert_eq!(serving["topology"], "reference");
    assert_eq!(serving["tun"], "vtnt0");
}

#[test]
fn vm_netdev_prints_the_attach_contract() {
    vtnt_testkit::require_root!();
    let lab = Lab::up("vmnd", None);
    let out = vtnt(&["lab", "vm-netdev", "--name", &lab.name, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["gateway"], "192.0.2.1");
    assert_eq!(v["slot"]["address"], "192.0.2.10/24");
    assert_eq!(v["slot"]["cmdline"], "ip=192.0.2.10/24 gw=192.0.2.1");
    assert_eq!(v["lans"][1]["prefix"], "10.253.0.0/16");
    let port = v["port"].as_u64().unwrap();
    assert!(v["slot"]["netdev"]
        .as_str()
        .unwrap()
        .contains(&format!("remote.port={port}")));
    let out = vtnt(&["lab", "vm-netdev", "--name", &lab.name]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("-netdev dgram,id=vtnt0,"));
}

/// The lab names its routers for reverse look-ups inside its namespace: `vtnt trace -O
/// ptr` run through `lab exec` gives every hop the name of the router the ground truth
/// says owns its address (`<router>.<lab>.lab`); `lab down` removes the hosts file.
#[test]
fn lab_exec_trace_o_ptr_names_the_truths_routers() {
    vtnt_testkit::require_root!();
    let lab = Lab::up("ptr", None);
    let truth = vtnt(&["lab", "truth", "--json", "--name", &lab.name]);
    let truth: serde_json::Value = serde_json::from_slice(&truth.stdout).unwrap();
    let owner = |addr: &str| {
        truth["routers"].as_array().unwrap().iter().find_map(|r| {
            let mine = r["addresses"].as_array()?.iter().any(|a| a == addr);
            mine.then(|| {
                let name = r["name"].as_str().unwrap().to_ascii_lowercase();
                name.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
            })
        })
    };
    let dst = truth["destinations"][0]["dst"]
        .as_str()
        .unwrap()
        .to_string();
    let out = lab.exec(&[
        lab_common::VTNT,
        "trace",
        "-q",
        "1",
        "-w",
        "1",
        "-O",
        "ptr",
        "--quiet",
        &dst,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trace: serde_json::Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "trace")
        .unwrap();
    let hops = trace["hops"].as_array().unwrap();
    let mut named = 0;
    for h in hops {
        let addr = h["addr"].as_str().unwrap();
        if let Some(router) = owner(addr) {
            let want = format!("{router}.{}.lab", lab.name.to_ascii_lowercase());
            assert_eq!(h["name"].as_str(), Some(want.as_str()), "{addr}");
            named += 1;
        }
    }
    assert!(named >= 2, "{hops:?}");
    let etc = std::path::Path::new("/etc/netns").join(&lab.name);
    assert!(etc.join("hosts").exists());
    drop(lab);
    assert!(!etc.exists(), "the lab's hosts file outlived it");
}
