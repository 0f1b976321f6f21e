//! `vtnt fw run`, the firewall between two interfaces: the rules are read before any
//! interface is opened (a bad file fails with file:line:col even when the interfaces do
//! not exist), a missing interface is named, and a real run in namespaces (sender — NF —
//! receiver) carries a TCP exchange only through its connection tracking (the SYN
//! accepted by a rule, everything after it only as ESTABLISHED), resets a refused TCP
//! connection (REJECT with tcp-reset), drops what no rule accepts, and on SIGTERM prints
//! its counters and exits 143; the unikernel's NF (`--runtime spt`, and `microvm` under
//! QEMU, on TAP devices bridged to the same veths) carries the same exchange alike.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::time::Duration;

use vtnt_netns::{Bump, NetNs};

fn vtnt() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vtnt"))
}

fn temp(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("vtnt-fw-run-{}-{name}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

const RULES: &str = "*filter
:FORWARD DROP [0:0]
-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -p tcp -m tcp --dport 7000 -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -p tcp -m tcp --dport 9 -j REJECT --reject-with tcp-reset
COMMIT
";

#[test]
fn rules_first_then_interfaces() {
    let bad = temp(
        "bad",
        "*filter\n:FORWARD DROP [0:0]\n-A FORWARD -j LOG\nCOMMIT\n",
    );
    let o = vtnt()
        .args([
            "fw",
            "run",
            "--rules",
            bad.to_str().unwrap(),
            "nosuch0",
            "nosuch1",
        ])
        .output()
        .unwrap();
    std::fs::remove_file(&bad).unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{}:3:", bad.display()))
            && err.contains("target `LOG` is not supported"),
        "{err}"
    );

    let good = temp("good", RULES);
    let o = vtnt()
        .args([
            "fw",
            "run",
            "--rules",
            good.to_str().unwrap(),
            "lo",
            "nosuch1",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "vtnt: error: interface nosuch1 does not exist in this network namespace\n"
    );
    // the unikernel's forms say it alike, before any VMM could make a TAP of that name
    for form in ["spt", "microvm"] {
        let o = vtnt()
            .args(["fw", "run", "--runtime", form, "--rules"])
            .args([good.to_str().unwrap(), "lo", "nosuch1"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{form}");
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            "vtnt: error: interface nosuch1 does not exist in this network namespace\n",
            "{form}"
        );
    }
    std::fs::remove_file(&good).unwrap();
}

/// Runs `f` on a thread inside namespace `ns`.
fn inside<T: Send + 'static>(ns: &NetNs, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{}", ns.name());
    std::thread::spawn(move || {
        let file = std::fs::File::open(path).unwrap();
        nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        f()
    })
    .join()
    .unwrap()
}

/// The exchange through the NF at `b` (already forwarding): a TCP echo on an accepted
/// port, a connection to a rejected port, a UDP datagram no rule accepts. Returns what
/// came back, how the rejected connection failed, and whether the datagram arrived.
fn exchange(b: &Bump) -> ([u8; 5], std::io::ErrorKind, bool) {
    let (s, d) = (&b.sender, &b.receiver);
    let listener = inside(d, || TcpListener::bind("100.64.4.2:7000").unwrap());
    let sink = inside(d, || UdpSocket::bind("100.64.4.2:53").unwrap());
    sink.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let echo = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let mut b = [0u8; 5];
        c.read_exact(&mut b).unwrap();
        c.write_all(&b).unwrap();
    });
    let (echoed, refused) = inside(s, || {
        let t = Duration::from_secs(5);
        let mut c = TcpStream::connect_timeout(&"100.64.4.2:7000".parse().unwrap(), t).unwrap();
        c.set_read_timeout(Some(t)).unwrap();
        c.write_all(b"hello").unwrap();
        let mut b = [0u8; 5];
        c.read_exact(&mut b).unwrap();
        let refused = TcpStream::connect_timeout(&"100.64.4.2:9".parse().unwrap(), t)
            .unwrap_err()
            .kind();
        let u = UdpSocket::bind("100.64.4.1:0").unwrap();
        u.send_to(b"x", "100.64.4.2:53").unwrap();
        (b, refused)
    });
    echo.join().unwrap();
    let arrived = sink.recv_from(&mut [0u8; 8]).is_ok();
    (echoed, refused, arrived)
}

/// Starts `vtnt fw run` with `args` in `b`'s NF namespace; returns it, its stderr, and
/// the stderr up to the line containing `ready`.
fn start_nf(
    b: &Bump,
    args: &[&str],
    ready: &str,
) -> (
    std::process::Child,
    BufReader<std::process::ChildStderr>,
    String,
) {
    let mut nf =
        b.nf.command(env!("CARGO_BIN_EXE_vtnt"))
            .args(["fw", "run"])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    let mut err = BufReader::new(nf.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains(ready) {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            panic!("vtnt fw run ended before `{ready}`: {seen}");
        }
        seen.push_str(&line);
    }
    (nf, err, seen)
}

/// The dropped and rejected counts of `vtnt fw run`'s last line ("...; accepted A,
/// dropped D, rejected R, ...").
fn verdicts(rest: &str) -> (u64, u64) {
    let after = |label: &str| -> u64 {
        rest.split("; accepted ")
            .nth(1)
            .and_then(|r| r.split(label).nth(1))
            .and_then(|r| r.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no `{label}` count in {rest}"))
    };
    (after(", dropped "), after(", rejected "))
}

/// SIGTERM to `nf`; the rest of its stderr and its status.
fn stop_nf(
    mut nf: std::process::Child,
    mut err: BufReader<std::process::ChildStderr>,
) -> (String, std::process::ExitStatus) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(nf.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    (rest, nf.wait().unwrap())
}

#[test]
fn forwards_tracks_and_rejects_between_namespaces() {
    vtnt_testkit::require_root!("ip", "ethtool");
    vtnt_testkit::require_kvm!();
    let b = Bump::build("fwrun", "100.64.4").unwrap();
    let rules = temp("ns", RULES);
    let r = rules.to_str().unwrap();
    let (nf, err, line) = start_nf(&b, &["--rules", r, "a0", "b0"], "forwarding between");
    assert!(
        line.contains("3 rules from") && line.contains("forwarding between a0 and b0"),
        "{line}"
    );
    let (echoed, refused, arrived) = exchange(&b);
    let (rest, status) = stop_nf(nf, err);
    assert_eq!(&echoed, b"hello", "{rest}");
    assert_eq!(refused, std::io::ErrorKind::ConnectionRefused, "{rest}");
    assert!(!arrived, "{rest}");
    // the SYN to port 9 rejected, the UDP datagram dropped by the policy
    let (dropped, rejected) = verdicts(&rest);
    assert!(dropped >= 1 && rejected == 1, "{rest}");
    assert_eq!(status.code(), Some(143), "{rest}");

    // the unikernel's NF: a TAP device bridged to each veth, the same rules and exchange
    let o =
        b.nf.exec(
            "sh",
            &[
                "-c",
                "ip tuntap add dev ta0 mode tap && ip tuntap add dev tb0 mode tap \
         && ip link add bra type bridge && ip link add brb type bridge \
         && ip link set a0 master bra && ip link set ta0 master bra \
         && ip link set b0 master brb && ip link set tb0 master brb \
         && for i in ta0 tb0 bra brb; do ip link set $i up; done",
            ],
        )
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    // as a process (spt), then as a microVM under QEMU and under vtnt-monitor (its two
    // networks), on the same TAP devices
    for (form, vmm, says) in [
        ("spt", "auto", ""),
        ("microvm", "qemu", "the microVM runs under QEMU ("),
        ("microvm", "vtnt", "the microVM runs under vtnt-monitor ("),
    ] {
        let args = ["--runtime", form, "--vmm", vmm, "--rules", r, "ta0", "tb0"];
        let (nf, err, line) = start_nf(&b, &args, "\"type\":\"nf\"");
        let form = format!("{form} {vmm}");
        assert!(line.contains("\"rules\":3"), "{form}: {line}");
        assert!(line.contains(says), "{form}: {line}");
        let (echoed, refused, arrived) = exchange(&b);
        // the guest says what it counted each second that changed it
        std::thread::sleep(Duration::from_secs(2));
        let (rest, status) = stop_nf(nf, err);
        eprintln!("{form}: {}", rest.trim());
        let (dropped, rejected) = verdicts(&rest);
        assert!(dropped >= 1 && rejected == 1, "{form}: {rest}");
        assert_eq!(&echoed, b"hello", "{form}: {line}{rest}");
        assert_eq!(
            refused,
            std::io::ErrorKind::ConnectionRefused,
            "{form}: {line}{rest}"
        );
        assert!(!arrived, "{form}: {line}{rest}");
        assert_eq!(status.code(), Some(143), "{form}: {line}{rest}");
    }
    // given one network, the NF under the monitor fails by name (status 3: no NIC)
    let find = |a| vtnt_artifacts::find(a).unwrap().path;
    let monitor = find(vtnt_artifacts::Artifact::Monitor);
    let o =
        b.nf.command(monitor.to_str().unwrap())
            .args(["--mem-mib", "32", "--net", "tap=ta0", "--module", r])
            .arg(find(vtnt_artifacts::Artifact::NfVm))
            .args(["--cmdline", "-- fw ta0 tb0"])
            .output()
            .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{out}");
    assert!(
        out.contains("the monitor gave this VM one network: a network function needs two"),
        "{out}"
    );
    std::fs::remove_file(&rules).unwrap();
}

/// Whether the unikernel's NF images are installed (else the test is skipped, or fails
/// under CI).
fn nf_images() -> bool {
    for a in [
        vtnt_artifacts::Artifact::NfSpt,
        vtnt_artifacts::Artifact::NfVm,
    ] {
        if let Err(e) = vtnt_artifacts::find(a) {
            vtnt_testkit::skip_or_fail("fw_run", &format!("{e:#}"), None);
            return false;
        }
    }
    true
}

fn bench_rows(bench: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let o = vtnt()
        .args(["bench", bench, "--json"])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    rows["report"].as_array().unwrap().clone()
}

#[test]
fn the_bench_measures_the_nf_at_a_tiny_size_natively_and_in_containers() {
    vtnt_testkit::require_root!(
        "ip",
        "ethtool",
        "iptables-restore",
        "nft",
        "iperf3",
        "sockperf",
        "hping3",
        "ping",
        "runc",
        "dockerd"
    );
    if let Err(e) = vtnt_runtimes::paths::static_vtnt() {
        vtnt_testkit::skip_or_fail("fw_run", &format!("{e:#}"), None);
        return;
    }
    let figs = std::env::temp_dir().join(format!("vtnt-fw-run-{}-figs", std::process::id()));
    let rows = bench_rows(
        "fw",
        &[
            "--rules",
            "0,10",
            "--reps",
            "1",
            "--packets",
            "3000",
            "--flows",
            "1000",
            "--runtimes",
            "native,runc,docker-scratch",
            "--seconds",
            "0",
            "--pin",
            "--plot",
            figs.to_str().unwrap(),
        ],
    );
    // 2 sizes, 2 modes, our NF in three runtimes and the iptables and nft-sets baselines
    assert_eq!(rows.len(), 20, "{rows:?}");
    // --pin: our NF's threads on the last CPU this process may use, as the kernel listed
    // them while it ran
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap();
    let last = allowed.trim().rsplit([',', '-']).next().unwrap();
    for r in &rows {
        assert_eq!(r["pinned"], true, "{r}");
        if r["nf"] == "vtnt" {
            assert_eq!(r["nf_cpus"], last, "{r}");
        } else {
            assert!(r["nf_cpus"].is_null(), "{r}");
        }
    }
    // --plot: a figure per metric measured (no throughput with --seconds 0), a line per
    // NF, runtime and mode in each; redrawn from the JSON rows, the same figures
    let names = |dir: &std::path::Path| {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    let want = [
        "fw01_pps.svg",
        "fw13_load_ms.svg",
        "fw14_rss.svg",
        "fw15_cpu.svg",
        "fw16_mem_per_rule.svg",
    ];
    assert_eq!(names(&figs), want);
    let pps = std::fs::read_to_string(figs.join("fw01_pps.svg")).unwrap();
    assert!(pps.starts_with("<svg") && pps.trim_end().ends_with("</svg>"));
    for rt in ["native", "runc", "docker-scratch"] {
        for mode in ["stateless", "stateful"] {
            let accel = if rt == "native" {
                "none"
            } else {
                "none (container)"
            };
            let line = format!("vtnt {rt}, {mode} ({accel}, pinned)");
            assert!(pps.contains(&line), "{line}");
        }
    }
    for nf in ["iptables", "nft-sets"] {
        for mode in ["stateless", "stateful"] {
            let line = format!("{nf}, {mode} (none, pinned)");
            assert!(pps.contains(&line), "{line}");
        }
    }
    let saved = figs.join("run.json");
    std::fs::write(&saved, serde_json::json!({ "report": rows }).to_string()).unwrap();
    let again = figs.join("again");
    let o = vtnt()
        .args(["bench", "fw-plot"])
        .arg(&saved)
        .arg("--out")
        .arg(&again)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(names(&again), want);
    for f in want {
        assert_eq!(
            std::fs::read(figs.join(f)).unwrap(),
            std::fs::read(again.join(f)).unwrap(),
            "{f}"
        );
    }
    std::fs::remove_dir_all(&figs).unwrap();
    for r in &rows {
        // 0 rules pass everything; 10 rules of the fw family stop few of the trace
        assert!(r["delivered"][0].as_f64().unwrap() > 0.3, "{r}");
        assert!(r["pps"][0].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["load_ms"][0].as_f64().unwrap().is_finite(), "{r}");
        // one repetition: sd 0; no iperf3 with --seconds 0 (NaN, null in JSON)
        assert_eq!(r["load_ms"][1].as_f64(), Some(0.0), "{r}");
        assert!(r["tcp_mbps"][0].is_null(), "{r}");
        if r["nf"] == "vtnt" {
            assert!(r["rss_kib"][0].as_f64().unwrap() > 1000.0, "{r}");
            // the NF worked while the trace crossed it
            assert!(r["cpu_pct"][0].as_f64().unwrap() > 0.0, "{r}");
        } else {
            assert!(r["cpu_pct"][0].is_null(), "{r}");
        }
        let accel = if r["runtime"] == "native" {
            "none"
        } else {
            "none (container)"
        };
        assert_eq!(r["accelerator"], accel, "{r}");
    }
    let key = |i: usize| {
        let r = &rows[i];
        (
            r["rules"].as_u64(),
            r["stateful"].as_bool(),
            r["nf"].as_str(),
            r["runtime"].as_str(),
        )
    };
    let want = [
        (0, false, "vtnt", "native"),
        (0, false, "vtnt", "runc"),
        (0, false, "vtnt", "docker-scratch"),
        (0, false, "iptables", "native"),
        (0, false, "nft-sets", "native"),
        (0, true, "vtnt", "native"),
    ];
    for (i, (rules, stateful, nf, rt)) in want.into_iter().enumerate() {
        assert_eq!(key(i), (Some(rules), Some(stateful), Some(nf), Some(rt)));
    }

    // iperf3, sockperf, hping3, ping and our connection-rate client through our NF and
    // iptables: TCP and UDP of parallel streams arrive, requests are answered
    let rows = bench_rows(
        "fw",
        &[
            "--rules",
            "10",
            "--reps",
            "1",
            "--packets",
            "1000",
            "--flows",
            "1000",
            "--no-nftables",
            "--seconds",
            "1",
            "--streams",
            "4",
        ],
    );
    assert_eq!(rows.len(), 4, "{rows:?}");
    for r in &rows {
        for k in ["tcp_mbps", "udp_mbps"] {
            assert!(r[k][0].as_f64().unwrap() > 1.0, "{k}: {r}");
        }
        for k in [
            "tcp_rr_tps",
            "tcp_rr_us",
            "tcp_rr_p99_us",
            "udp_rr_tps",
            "udp_rr_us",
            "udp_rr_p99_us",
            "tcp_syn_us",
            "icmp_us",
            "tcp_conn_per_s",
        ] {
            let v = r[k][0].as_f64().unwrap_or(f64::NAN);
            assert!(v.is_finite() && v > 0.0, "{k}: {r}");
        }
    }
}

/// `vtnt bench fw-plot`: a saved run's figures, one per metric it measured; a file that
/// is not a run is refused with its name and problem, and nothing is written.
#[test]
fn the_figures_are_redrawn_from_a_saved_run_and_a_bad_one_is_refused() {
    let dir = std::env::temp_dir().join(format!("vtnt-fw-run-{}-plot", std::process::id()));
    let row = |rules: u32, pps: f64| {
        serde_json::json!({"rules": rules, "stateful": false, "nf": "vtnt", "runtime": "native",
            "accelerator": "none", "pps": [pps, 1.0], "tcp_mbps": [null, null]})
    };
    let run = temp(
        "run.json",
        &serde_json::json!({"provenance": {}, "report": [row(0, 9.0), row(10, 8.0)]}).to_string(),
    );
    let plot = |file: &std::path::Path| {
        vtnt()
            .args(["bench", "fw-plot"])
            .arg(file)
            .arg("--out")
            .arg(&dir)
            .output()
            .unwrap()
    };
    let o = plot(&run);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files, ["fw01_pps.svg"]);
    std::fs::remove_dir_all(&dir).unwrap();
    let bad = temp(
        "bad.json",
        r#"{"report": [{"rules": 0, "stateful": false, "nf": "vtnt", "runtime": "native", "accelerator": "none", "pps": "fast"}]}"#,
    );
    let o = plot(&bad);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains(&format!(
            "{}: row 1 (vtnt native, stateless (none)): `pps` is \"fast\", not [mean, sd]",
            bad.display()
        )),
        "{err}"
    );
    assert!(!dir.exists(), "nothing written for a bad run");
    for f in [run, bad] {
        std::fs::remove_file(f).unwrap();
    }
}

/// `vtnt bench fw`'s guest rows: the NF as an spt process, as a microVM (QEMU) and the
/// static vtnt in the Debian VM, then iptables in that VM (its kernel routing between its
/// NICs), each on TAP devices bridged to the NF namespace's veths for its run, forward
/// the trace and name their accelerator; the veths come back unbridged after each run
/// (the next guest plugs its own bridges, and iptables in the namespace, last, routes
/// between them). Stateful only: one boot of the VM for each of its rows.
#[test]
fn the_bench_measures_the_unikernels_nf() {
    vtnt_testkit::require_root!("ip", "ethtool", "iptables-restore", "qemu-system-x86_64");
    if !nf_images() {
        return;
    }
    let rows = bench_rows(
        "fw",
        &[
            "--rules",
            "10",
            "--reps",
            "1",
            "--packets",
            "2000",
            "--flows",
            "1000",
            "--runtimes",
            "spt,microvm,vm",
            "--modes",
            "stateful",
            "--no-nftables",
            "--seconds",
            "0",
        ],
    );
    // 3 runtimes, iptables in the VM and in the namespace (iperf3 and the request drivers
    // are the native test's: the NF's TCP through the unikernel is
    // `forwards_tracks_and_rejects_between_namespaces`)
    let who: Vec<_> = (rows.iter())
        .map(|r| format!("{} {}", r["nf"], r["runtime"]))
        .collect();
    assert_eq!(
        who,
        [
            r#""vtnt" "spt""#,
            r#""vtnt" "microvm""#,
            r#""vtnt" "vm""#,
            r#""iptables" "vm""#,
            r#""iptables" "native""#
        ],
        "{rows:?}"
    );
    for r in &rows {
        assert_eq!(r["stateful"], true, "{r}");
        assert!(r["delivered"][0].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["load_ms"][0].as_f64().unwrap().is_finite(), "{r}");
        if r["runtime"] == "native" {
            // after the guests' rows: the veths came back off their bridges
            continue;
        }
        assert!(r["pps"][0].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["rss_kib"][0].as_f64().unwrap() > 100.0, "{r}");
        assert!(r["cpu_pct"][0].as_f64().unwrap() > 0.0, "{r}");
        let accel = r["accelerator"].as_str().unwrap();
        match r["runtime"].as_str().unwrap() {
            "spt" => assert_eq!(accel, "none (spt process)", "{r}"),
            // the accelerator and the VMM `vtnt fw run` picked
            "microvm" => assert!(
                ["KVM", "PVM-KVM", "TCG"]
                    .iter()
                    .any(|a| accel.starts_with(&format!("{a} ("))),
                "{r}"
            ),
            // the static vtnt, or the guest's iptables, in the Debian VM, under KVM or TCG
            "vm" => assert!(
                ["KVM", "PVM-KVM", "TCG"]
                    .iter()
                    .any(|a| accel == format!("{a} (QEMU, Debian VM)")),
                "{r}"
            ),
            rt => panic!("a row of {rt}: {r}"),
        }
    }
}

/// The NF image answers `-- boot` as the job image does: that is how a new host's KVM is
/// checked before `vtnt fw run`'s default VMM is the monitor there
/// (`vtnt_unikernel::monitor::boots`), so on hardware KVM the NF does not fall back to
/// QEMU for want of an answer. Under QEMU, and under the monitor where /dev/kvm works.
#[test]
fn the_nf_image_answers_the_boot_check() {
    vtnt_testkit::require_tools!("qemu-system-x86_64");
    let img = match vtnt_artifacts::find(vtnt_artifacts::Artifact::NfVm) {
        Ok(f) => f.path,
        Err(e) => {
            vtnt_testkit::skip_or_fail("fw_run", &format!("{e:#}"), None);
            return;
        }
    };
    use vtnt_unikernel::{monitor, qemu, GuestStatus};
    let cfg = qemu::VmConfig::new(img.clone(), qemu::Machine::Microvm, "-- boot");
    let out = qemu::run(&cfg).expect("QEMU runs");
    assert_eq!(out.status, GuestStatus::Exited(0), "{}", out.console());
    if monitor::usable() {
        let out = monitor::run(&monitor::MonitorConfig::new(img, "-- boot")).expect("monitor");
        assert_eq!(out.status, GuestStatus::Exited(0), "{}", out.console());
    }
}

/// `vtnt bench fw-scale`: one and then two NFs at once in each runtime, each pair started
/// together in its own namespaces; every instance forwards its own sender's packets (the
/// least served one delivered some); memory and CPU are summed.
#[test]
fn the_scale_bench_runs_several_nfs_at_once() {
    vtnt_testkit::require_root!("ip", "ethtool", "qemu-system-x86_64");
    if !nf_images() {
        return;
    }
    let rows = bench_rows(
        "fw-scale",
        &[
            "--instances",
            "1,2",
            "--rules",
            "0",
            "--reps",
            "1",
            "--packets",
            "2000",
            "--flows",
            "500",
            "--runtimes",
            "native,spt,microvm",
        ],
    );
    assert_eq!(rows.len(), 6, "{rows:?}");
    for (r, (rt, n)) in rows.iter().zip([
        ("native", 1),
        ("native", 2),
        ("spt", 1),
        ("spt", 2),
        ("microvm", 1),
        ("microvm", 2),
    ]) {
        assert_eq!(
            (r["runtime"].as_str(), r["instances"].as_u64()),
            (Some(rt), Some(n)),
            "{r}"
        );
        // every instance forwarded its sender's packets
        assert!(r["delivered_min"][0].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["pps"][0].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["start_ms"][0].as_f64().unwrap() > 0.0, "{r}");
        let (rss, pss) = (
            r["rss_kib"][0].as_f64().unwrap(),
            r["pss_kib"][0].as_f64().unwrap(),
        );
        assert!(pss > 0.0 && pss <= rss, "{r}");
        assert!(r["cpu_pct"][0].as_f64().unwrap() > 0.0, "{r}");
    }
}
