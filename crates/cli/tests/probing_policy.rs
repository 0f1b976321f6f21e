//! The probing policy on every entry point, proven by counting the send system calls of
//! each run (strace): vtnt runs in a namespace made here whose default route leads out of
//! an uplink that uses a documentation range (as this CI machine's does) into a veth whose
//! other end drops everything, with one lab range (198.51.100.0/24) routed on a link of its
//! own. A refused run must make no send call at all; an accepted one only to lab addresses.
//! IPv6 the same way, in a namespace of its own with IPv6 on (2001:db8:9::/64 on the
//! uplink, 2001:db8:1::/64 on the lab link).

mod lab_common;

use std::process::Output;

use vtnt_netns::{unique_name, NetNs};

/// A scamper-JSON trace to a public address through public hops: what `--from` must not
/// be allowed to re-probe without consent.
const PUBLIC_SEED: &str = r#"{"type":"trace","version":"0.1", "userid":0, "method":"icmp-echo-paris", "src":"192.0.2.5", "dst":"8.8.8.8", "icmp_sum":40022, "stop_reason":"COMPLETED", "stop_data":0, "start":{"sec":1795310472, "usec":461369, "ftime":"2026-11-22 01:21:12"}, "hop_count":4, "attempts":2, "hoplimit":0, "firsthop":1, "wait":5, "wait_probe":0, "tos":0, "probe_size":44, "probe_count":4, "hops":[{"addr":"8.8.4.4", "probe_ttl":1, "probe_id":1, "probe_size":44, "tx":{"sec":1795310472, "usec":461499}, "rtt":1.000, "reply_ttl":60, "reply_tos":0, "reply_ipid":1, "reply_size":56, "icmp_type":11, "icmp_code":0, "icmp_q_ttl":1, "icmp_q_ipl":44, "icmp_q_tos":0},{"addr":"9.9.9.9", "probe_ttl":2, "probe_id":1, "probe_size":44, "tx":{"sec":1795310472, "usec":461499}, "rtt":1.000, "reply_ttl":60, "reply_tos":0, "reply_ipid":1, "reply_size":56, "icmp_type":11, "icmp_code":0, "icmp_q_ttl":1, "icmp_q_ipl":44, "icmp_q_tos":0},{"addr":"1.1.1.1", "probe_ttl":3, "probe_id":1, "probe_size":44, "tx":{"sec":1795310472, "usec":461499}, "rtt":1.000, "reply_ttl":60, "reply_tos":0, "reply_ipid":1, "reply_size":56, "icmp_type":11, "icmp_code":0, "icmp_q_ttl":1, "icmp_q_ipl":44, "icmp_q_tos":0},{"addr":"8.8.8.8", "probe_ttl":4, "probe_id":1, "probe_size":44, "tx":{"sec":1795310472, "usec":461499}, "rtt":1.000, "reply_ttl":60, "reply_tos":0, "reply_ipid":1, "reply_size":56, "icmp_type":0, "icmp_code":0}]}
"#;

/// The namespace and a scratch directory.
struct Net {
    ns: NetNs,
    dir: std::path::PathBuf,
}

/// One run under strace: its output and the send calls it made.
struct Run {
    out: Output,
    sends: Vec<String>,
}

impl Run {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
}

impl Net {
    /// The namespace, with IPv6 off (its neighbour discovery would send by itself) or on.
    fn new(ipv6: bool) -> Net {
        let ns = NetNs::create(&unique_name("vpol")).expect("namespace");
        let off = if ipv6 { "0" } else { "1" };
        ns.sysctl("net.ipv6.conf.all.disable_ipv6", off).unwrap();
        ns.sysctl("net.ipv6.conf.default.disable_ipv6", off)
            .unwrap();
        for (a, b, cidr, cidr6) in [
            ("up0", "up1", "192.0.2.5/24", "2001:db8:9::5/64"),
            ("lab0", "lab1", "198.51.100.1/24", "2001:db8:1::1/64"),
        ] {
            ns.ip(&["link", "add", a, "type", "veth", "peer", "name", b])
                .unwrap();
            ns.ip(&["addr", "add", cidr, "dev", a]).unwrap();
            if ipv6 {
                ns.ip(&["addr", "add", cidr6, "dev", a, "nodad"]).unwrap();
            }
            ns.ip(&["link", "set", a, "up"]).unwrap();
            ns.ip(&["link", "set", b, "up"]).unwrap();
        }
        ns.ip(&["route", "add", "default", "dev", "up0"]).unwrap();
        if ipv6 {
            ns.ip(&["-6", "route", "add", "default", "dev", "up0"])
                .unwrap();
        }
        let dir = std::env::temp_dir().join(unique_name("vtnt-policy"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("public-seed.json"), PUBLIC_SEED).unwrap();
        std::fs::write(
            dir.join("targets.txt"),
            "8.8.8.8\n100.64.0.1\n203.0.113.9\n",
        )
        .unwrap();
        std::fs::write(dir.join("exclude.conf"), "# opt-out\n198.51.100.0/24\n").unwrap();
        // NULs, bytes that are not UTF-8, a 10 MB line: each a bad line, none a probe
        let mut hostile = b"\x00\x00\n\xff\xfe\x00\n".to_vec();
        hostile.extend(std::iter::repeat_n(b'7', 10 << 20));
        hostile.extend(b"\n8.8.8.8\x00\n");
        std::fs::write(dir.join("hostile.txt"), hostile).unwrap();
        Net { ns, dir }
    }

    /// Runs `vtnt ARGS` inside the namespace under strace, from the scratch directory.
    fn vtnt(&self, args: &[&str]) -> Run {
        let trace = self.dir.join(unique_name("strace"));
        let out = self
            .ns
            .command("strace")
            .args(["-f", "-qq", "-e", "trace=sendto,sendmsg,sendmmsg", "-o"])
            .arg(&trace)
            .arg(lab_common::VTNT)
            .args(args)
            .current_dir(&self.dir)
            .output()
            .expect("strace vtnt");
        let log = std::fs::read_to_string(&trace).unwrap_or_default();
        let sends = log
            .lines()
            .filter(|l| !l.contains("resumed>") && !l.contains("+++") && !l.contains("---"))
            // IP sends only: looking up the host's addresses talks netlink
            .filter(|l| {
                l.contains("send")
                    && (l.contains("sa_family=AF_INET,") || l.contains("sa_family=AF_INET6,"))
            })
            .map(String::from)
            .collect();
        Run { out, sends }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Every address a send call named, from strace's rendering of sockaddrs.
fn addresses(line: &str) -> Vec<String> {
    line.split("inet_addr(\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(String::from)
        .collect()
}

#[test]
fn every_entry_point_refuses_before_any_probe() {
    vtnt_testkit::require_root!("ip", "strace");
    let net = Net::new(false);
    let fast = ["-q", "1", "-w", "0.1", "-g", "1"];
    let with =
        |a: &[&'static str]| -> Vec<&'static str> { a.iter().chain(&fast).copied().collect() };
    // (what, arguments, what stderr must say)
    let refused: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "public trace",
            with(&["trace", "8.8.8.8"]),
            "--allow-public",
        ),
        (
            "public ping",
            vec!["ping", "-c", "1", "8.8.8.8"],
            "--allow-public",
        ),
        ("public tnt", with(&["tnt", "8.8.8.8"]), "--allow-public"),
        (
            "tnt --from a public trace",
            with(&["tnt", "--from", "public-seed.json"]),
            "8.8.8.8",
        ),
        (
            "lab range behind the default route only",
            with(&["trace", "203.0.113.9", "100.64.0.1", "192.0.2.1"]),
            "no lab is reachable here",
        ),
        (
            "spoofed source",
            with(&["trace", "-S", "8.8.8.8", "198.51.100.7"]),
            "does not spoof",
        ),
        (
            "public target above the public rate",
            with(&["trace", "--allow-public", "--pps", "5000", "8.8.8.8"]),
            "1000 pps at most",
        ),
        (
            "excluded prefix",
            with(&["trace", "--exclude", "exclude.conf", "198.51.100.7"]),
            "excluded",
        ),
        (
            "target file",
            with(&["trace", "--targets", "targets.txt"]),
            "targets.txt:3",
        ),
        (
            "mistyped address",
            with(&["trace", "300.1.2.3", "198.51.100.0/24"]),
            "prefix",
        ),
        (
            "rate above the ceiling",
            with(&["trace", "--pps", "600000", "198.51.100.7"]),
            "--pps",
        ),
        (
            "hostile target file",
            with(&["trace", "--targets", "hostile.txt"]),
            "hostile.txt:3",
        ),
        (
            "a rate the window cannot reach is said, not silent",
            with(&["trace", "--pps", "5000", "--window", "10", "300.1.2.3"]),
            "raise --window",
        ),
        (
            "a job line with a public target and no consent",
            vec!["job", "vtnt-job=1 kind=trace targets=9.9.9.9"],
            "job line",
        ),
        (
            "a job line of an unknown version",
            vec!["job", "vtnt-job=9", "kind=trace", "targets=192.0.2.1"],
            "job line",
        ),
        (
            "a VM runtime on the host's network (it has a NIC of its own)",
            vec![
                "run",
                "--runtime",
                "microvm",
                "--net",
                "host",
                "--",
                "trace",
                "192.0.2.1",
            ],
            "tap:IFACE",
        ),
        (
            "a TAP device that does not exist",
            vec![
                "run",
                "--runtime",
                "microvm",
                "--net",
                "tap:vtnt-nosuch0,ip=10.9.0.2/24,gw=10.9.0.1",
                "--",
                "trace",
                "192.0.2.1",
            ],
            "no interface",
        ),
        (
            "an interface that is no TAP",
            vec![
                "run",
                "--runtime",
                "vm",
                "--net",
                "tap:lo,ip=10.9.0.2/24,gw=10.9.0.1",
                "--",
                "trace",
                "192.0.2.1",
            ],
            "not a TUN/TAP",
        ),
        (
            "the spt runtime on a lab that is not up",
            vec![
                "run",
                "--runtime",
                "spt",
                "--lab",
                "vtnt-nosuchlab",
                "--",
                "trace",
                "192.0.2.1",
            ],
            "vtnt-nosuchlab",
        ),
        (
            "a network of no known kind",
            vec!["run", "--net", "wifi", "--", "trace", "192.0.2.1"],
            "lab[:NAME], host or tap",
        ),
        (
            "a front onto a namespace that does not exist",
            vec![
                "lab",
                "front",
                "--name",
                "vtntbadfront",
                "--upstream",
                "vtnt-nosuch-ns",
            ],
            "no such network namespace",
        ),
        (
            "a front whose public address is not the upstream's",
            vec![
                "lab",
                "front",
                "--name",
                "vtntbadfront",
                "--public",
                "198.18.7.7",
            ],
            "not an address of the upstream",
        ),
        (
            "a front whose public IPv6 address is not the upstream's",
            vec![
                "lab",
                "front",
                "--name",
                "vtntbadfront",
                "--public6",
                "2001:db8:7::7",
            ],
            "--public6 2001:db8:7::7: not an address of the upstream",
        ),
        (
            "a front with a rate beyond the ceiling",
            vec!["lab", "front", "--name", "vtntbadfront", "--pps", "900000"],
            "--pps 900000",
        ),
        (
            "more destinations than a generated topology has",
            vec!["lab", "generate", "--seed", "1", "--destinations", "20000"],
            "1..=15000",
        ),
    ];
    for (what, args, says) in &refused {
        let r = net.vtnt(args);
        assert!(!r.out.status.success(), "{what}: accepted\n{}", r.stderr());
        assert!(
            r.stderr().contains(says),
            "{what}: stderr does not say `{says}`:\n{}",
            r.stderr()
        );
        assert!(!r.stderr().contains("panicked"), "{what}: {}", r.stderr());
        assert!(r.sends.is_empty(), "{what}: sent {:?}", r.sends);
    }

    assert!(
        !std::path::Path::new("/run/vtnt/lab/vtntbadfront").exists(),
        "a refused front left its state directory behind"
    );

    // Without root, `vtnt run` refuses at once (no half-made cgroup or image behind).
    let nobody = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_vtnt"))
        .args(["run", "--runtime", "microvm", "--", "trace", "192.0.2.1"])
        .output()
        .expect("setpriv (util-linux)");
    let err = String::from_utf8_lossy(&nobody.stderr);
    assert!(
        !nobody.status.success() && err.contains("needs root"),
        "{err}"
    );

    // A TAP device of the namespace: refused while down, and for an address it already
    // has (the guest would not get its replies).
    net.ns
        .ip(&["tuntap", "add", "dev", "vtap9", "mode", "tap"])
        .unwrap();
    net.ns
        .ip(&["addr", "add", "10.9.0.1/24", "dev", "vtap9"])
        .unwrap();
    let tap = |guest: &str| {
        let spec = format!("tap:vtap9,ip={guest}/24,gw=10.9.0.3");
        net.vtnt(&[
            "run",
            "--runtime",
            "microvm",
            "--net",
            &spec,
            "--",
            "trace",
            "192.0.2.1",
        ])
    };
    for (what, r, says) in [
        ("a TAP device that is down", tap("10.9.0.2"), "is down"),
        (
            "a guest address the host has",
            {
                net.ns.ip(&["link", "set", "vtap9", "up"]).unwrap();
                tap("10.9.0.1")
            },
            "already an address",
        ),
    ] {
        assert!(!r.out.status.success(), "{what}: accepted");
        assert!(
            r.stderr().contains(says),
            "{what}: stderr does not say `{says}`:\n{}",
            r.stderr()
        );
        assert!(r.sends.is_empty(), "{what}: sent {:?}", r.sends);
    }

    // The positive control: the counter sees probes where the policy allows them.
    let ok = net.vtnt(&with(&["trace", "198.51.100.7"]));
    assert!(ok.out.status.success(), "{}", ok.stderr());
    assert!(
        !ok.sends.is_empty(),
        "the control run sent nothing: strace saw no send call"
    );

    // --from with a lab target too: the lab target is probed, the public seed is not, and
    // the run says so and does not exit 0.
    let mixed = net.vtnt(&with(&[
        "tnt",
        "--no-reveal",
        "--from",
        "public-seed.json",
        "198.51.100.7",
    ]));
    assert_eq!(mixed.out.status.code(), Some(2), "{}", mixed.stderr());
    assert!(mixed.stderr().contains("8.8.8.8"), "{}", mixed.stderr());
    for s in &mixed.sends {
        for a in addresses(s) {
            assert!(a.starts_with("198.51.100."), "sent to {a}: {s}");
        }
    }
    assert!(!mixed.sends.is_empty());
}

/// A resolver that never answers: a UDP socket on 127.0.0.1:53 inside `ns`, swallowing
/// queries until dropped.
struct SilentResolver {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    conf_dir: std::path::PathBuf,
}

impl SilentResolver {
    fn start(ns: &NetNs) -> SilentResolver {
        use std::sync::atomic::{AtomicBool, Ordering};
        // `ip netns exec` bind-mounts /etc/netns/NAME/resolv.conf over /etc/resolv.conf.
        let conf_dir = std::path::Path::new("/etc/netns").join(ns.name());
        std::fs::create_dir_all(&conf_dir).unwrap();
        std::fs::write(
            conf_dir.join("resolv.conf"),
            "nameserver 127.0.0.1\noptions timeout:5 attempts:2\n",
        )
        .unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (flag, path) = (stop.clone(), format!("/run/netns/{}", ns.name()));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let f = std::fs::File::open(path).unwrap();
            nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            let s = std::net::UdpSocket::bind("127.0.0.1:53").unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_millis(100)))
                .unwrap();
            ready_tx.send(()).unwrap();
            let mut buf = [0u8; 1500];
            while !flag.load(Ordering::Relaxed) {
                let _ = s.recv_from(&mut buf);
            }
        });
        ready_rx.recv().unwrap();
        SilentResolver {
            stop,
            thread: Some(thread),
            conf_dir,
        }
    }
}

impl Drop for SilentResolver {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.conf_dir);
    }
}

/// Finding 13: unresolvable names were looked up one by one, silently, for minutes before
/// any probe. With a resolver that never answers (10 s per name), 300 names must cost
/// seconds, say so, and end with every name reported.
/// IPv6 destinations meet the same policy: public ones need consent and the public rate,
/// the documentation prefix is a lab range only where a route other than the default
/// route leads, and what is not a unicast destination is named; a routed lab target
/// reaches the engine, which refuses what it does not build over IPv6 by name, and TNT
/// is refused over IPv6 before it starts. No send call, exit 1.
#[test]
fn ipv6_targets_are_refused_before_any_probe() {
    vtnt_testkit::require_root!("ip", "strace");
    let net = Net::new(true);
    let fast = ["-q", "1", "-w", "0.1", "-g", "1"];
    let cases: [(&[&str], &str); 8] = [
        (
            &["trace", "2001:4860:4860::8888"],
            "2001:4860:4860::8888 is outside ::1 and the lab's IPv6 ranges (2001:db8::/32, fc00::/7); pass --allow-public to probe it",
        ),
        (
            &["ping", "-c", "1", "2001:4860:4860::8888"],
            "pass --allow-public to probe it",
        ),
        (
            &["trace", "--allow-public", "--pps", "5000", "2001:4860::1"],
            "2001:4860::1 is public: public targets are probed at 1000 pps at most, not 5000",
        ),
        (
            &["trace", "2001:db8:77::1"],
            "2001:db8:77::1 is a lab address but no lab is reachable here",
        ),
        (
            &["trace", "fe80::1"],
            "fe80::1 is link-local (fe80::/10), which no route leads to: only unicast addresses are probed",
        ),
        (
            &["trace", "::ffff:198.51.100.7"],
            "IPv4-mapped (::ffff:0:0/96): give the IPv4 address itself",
        ),
        (&["trace", "ff02::1"], "a multicast address (ff00::/8)"),
        // a lab range routed on a link of its own passes the policy; the engine is where
        // options not built over IPv6 stop
        (
            &["ping", "-c", "1", "-R", "2001:db8:1::7"],
            "2001:db8:1::7: IPv6 destinations are never pinged with -R (IPv6 has no record-route option)",
        ),
    ];
    for (args, says) in cases {
        let trace = args[0] == "trace";
        let args: Vec<&str> = args
            .iter()
            .chain(&fast[..if trace { 6 } else { 0 }])
            .copied()
            .collect();
        let r = net.vtnt(&args);
        assert_eq!(r.out.status.code(), Some(1), "{args:?}: {}", r.stderr());
        assert!(r.stderr().contains(says), "{args:?}: {}", r.stderr());
        assert!(r.sends.is_empty(), "{args:?}: sent {:?}", r.sends);
    }
}

#[test]
fn names_that_never_resolve_cost_seconds_not_minutes() {
    vtnt_testkit::require_root!("ip");
    let ns = NetNs::create(&unique_name("vdns")).expect("namespace");
    let resolver = SilentResolver::start(&ns);
    let dir = std::env::temp_dir().join(unique_name("vtnt-names"));
    std::fs::create_dir_all(&dir).unwrap();
    let names: String = (0..300).map(|i| format!("host-{i}.example\n")).collect();
    std::fs::write(dir.join("names.txt"), names).unwrap();
    let started = std::time::Instant::now();
    let out = ns
        .command(lab_common::VTNT)
        .args(["trace", "--targets"])
        .arg(dir.join("names.txt"))
        .output()
        .unwrap();
    let took = started.elapsed();
    drop(resolver);
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("resolving 300 host names"), "{stderr}");
    assert_eq!(stderr.matches("skipping").count(), 300, "{stderr}");
    assert!(took < std::time::Duration::from_secs(20), "took {took:?}");
}

/// An IPv6 job where the lab offers no IPv6 fails before anything starts (no image
/// built, no instance), naming what is missing, whatever the runtime: a lab whose state
/// says no IPv6 address (one started by a vtnt before the TUN front was dual stack: its
/// `state.json` written here as it wrote it); and the microVM with `--dhcp` (a leased
/// guest has no IPv6). An IPv4 job on the same lab gets past that check.
#[test]
fn ipv6_jobs_where_the_runtime_or_lab_has_none_are_refused() {
    vtnt_testkit::require_root!();
    let root = std::env::temp_dir().join(unique_name("vtnt-old-lab"));
    let name = "old";
    std::fs::create_dir_all(root.join(name)).unwrap();
    let state = serde_json::json!({
        "name": name, "netns": unique_name("vtnt-nosuch"), "pid": 1,
        "topology": "reference", "topology_source": "reference", "tun": "vtnt0",
        "vp_address": "192.0.2.2/24", "gateway": "192.0.2.1", "vm_port": 9,
        "routes": ["198.51.100.0/24"],
    });
    std::fs::write(root.join(name).join("state.json"), state.to_string()).unwrap();
    let run = |runtime: &str, dst: &str| {
        let (runtime, dhcp) = match runtime.strip_suffix(" --dhcp") {
            Some(rt) => (rt, Some("--dhcp")),
            None => (runtime, None),
        };
        let out = std::process::Command::new(lab_common::VTNT)
            .args(["run", "--runtime", runtime, "--lab", name])
            .args(dhcp)
            .args(["--", "trace", dst])
            .env("VTNT_LAB_RUN_DIR", &root)
            .output()
            .expect("vtnt run");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let v6 = "2001:db8:64::cb00:710a";
    for (runtime, says) in [
        ("microvm", "lab `old` has no IPv6"),
        ("vm", "lab `old` has no IPv6"),
        ("spt", "lab `old` has no IPv6"),
        // with --dhcp the guest would take its twin by DHCPv6: the lab's IPv6 is missing
        ("microvm --dhcp", "lab `old` has no IPv6"),
        (
            "native",
            "IPv6 target 2001:db8:64::cb00:710a: lab `old` has no IPv6 (started by an older vtnt",
        ),
        ("runc", "lab `old` has no IPv6"),
    ] {
        let (code, err) = run(runtime, v6);
        assert_eq!(code, Some(1), "{runtime}: {err}");
        assert!(err.contains(says), "{runtime}: {err}");
    }
    // a front whose upstream had no IPv6 address names what is missing
    let mut front = state.clone();
    front["name"] = "old".into();
    front["topology"] = vtnt_lab_linux::state::FRONT_TOPOLOGY.into();
    std::fs::write(root.join(name).join("state.json"), front.to_string()).unwrap();
    let (code, err) = run("vm", v6);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("front `old` has no public IPv6 address") && err.contains("--public6"),
        "{err}"
    );
    std::fs::write(root.join(name).join("state.json"), state.to_string()).unwrap();
    // IPv4 passes the IPv6 check and stops where the half-made lab's files end
    let (code, err) = run("native", "203.0.113.10");
    assert_eq!(code, Some(1), "{err}");
    assert!(!err.contains("IPv6") && err.contains("no vm.json"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}
