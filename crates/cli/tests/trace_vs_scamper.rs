//! `vtnt trace` and `vtnt ping` next to Debian's scamper on a chain of real Linux routers
//! in network namespaces this test makes: the same hop addresses and reply TTLs, for
//! every method. Needs root and scamper (scripts/setup.sh installs it); skips through
//! vtnt-testkit otherwise.

use std::process::Command;

mod records_common;

use records_common::{hops, json_lines, normalised, of_type, replies, vtnt};
use serde_json::Value;
use vtnt_formats::Record;
use vtnt_netns::{Chain, NetNs};

/// What `vtnt --version` prints, without the newline.
fn version() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_vtnt"))
        .arg("--version")
        .output()
        .expect("run vtnt");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn scamper(ns: &NetNs, cmd: &str, target: &str) -> Vec<Value> {
    let out = ns
        .exec("scamper", &["-c", cmd, "-O", "json", "-i", target])
        .expect("run scamper");
    json_lines(&out, "scamper")
}

#[test]
fn trace_matches_scamper_for_every_method() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vts", 3).expect("namespace chain");
    let target = chain.target();
    for (ours, theirs) in [
        ("icmp-paris", "icmp-paris"),
        ("udp-paris", "udp-paris"),
        ("tcp", "tcp"),
    ] {
        let v = vtnt(
            chain.vantage(),
            &[
                "trace", "-P", ours, "-q", "1", "-w", "1", "--pps", "100", &target,
            ],
        );
        let s = scamper(
            chain.vantage(),
            &format!("trace -P {theirs} -q 1 -w 1"),
            &target,
        );
        let (vt, st) = (of_type(&v, "trace"), of_type(&s, "trace"));
        assert_eq!((vt.len(), st.len()), (1, 1), "{ours}: one trace each");
        assert_eq!(of_type(&v, "cycle-start").len(), 1);
        assert_eq!(of_type(&v, "cycle-stop").len(), 1);
        // the build that wrote them, as `vtnt --version` names it (docs/scamper.md)
        assert_eq!(
            format!(
                "vtnt {}",
                of_type(&v, "cycle-start")[0]["vtnt"].as_str().unwrap()
            ),
            version()
        );
        let (vh, sh) = (hops(vt[0]), hops(st[0]));
        assert_eq!(vh, sh, "{ours}: hops differ from scamper's");
        assert_eq!(vh.len(), 4, "{ours}: three routers and the target");
        assert_eq!(vt[0]["stop_reason"], st[0]["stop_reason"], "{ours}");
        assert_eq!(vt[0]["stop_reason"], "COMPLETED");
        assert_eq!(vt[0]["method"], st[0]["method"], "{ours}");
        assert_eq!(vt[0]["dst"], st[0]["dst"]);
        // scamper's defaults: probe size and destination port
        assert_eq!(vt[0]["probe_size"], st[0]["probe_size"], "{ours}");
        assert_eq!(vt[0]["dport"], st[0]["dport"], "{ours}");
    }
}

/// A UDP or TCP ping sends what scamper's does by default: 40-byte probes to port 33435.
#[test]
fn udp_and_tcp_pings_default_like_scamper() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vpd", 1).expect("namespace chain");
    let target = chain.target();
    for (ours, theirs) in [("udp", "udp"), ("tcp", "tcp-syn")] {
        let v = vtnt(chain.vantage(), &["ping", "-P", ours, "-c", "1", &target]);
        let s = scamper(chain.vantage(), &format!("ping -P {theirs} -c 1"), &target);
        let (vp, sp) = (of_type(&v, "ping"), of_type(&s, "ping"));
        assert_eq!((vp.len(), sp.len()), (1, 1), "{ours}");
        for key in ["method", "probe_size", "dport"] {
            assert_eq!(vp[0][key], sp[0][key], "{ours}: {key}");
        }
    }
}

#[test]
fn ping_matches_scamper() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vps", 2).expect("namespace chain");
    let target = chain.target();
    let v = vtnt(chain.vantage(), &["ping", "-c", "3", "-i", "0.2", &target]);
    let s = scamper(chain.vantage(), "ping -c 3 -i 1", &target);
    let (vp, sp) = (of_type(&v, "ping"), of_type(&s, "ping"));
    assert_eq!((vp.len(), sp.len()), (1, 1));
    assert_eq!(replies(vp[0]), replies(sp[0]));
    assert_eq!(replies(vp[0]).len(), 3);
    assert_eq!(
        vp[0]["statistics"]["replies"],
        sp[0]["statistics"]["replies"]
    );
    assert_eq!(vp[0]["method"], sp[0]["method"]);
}

#[test]
fn bad_input_fails_cleanly_and_leaves_no_output_file() {
    let bin = env!("CARGO_BIN_EXE_vtnt");
    let dir = std::env::temp_dir().join(format!("vtnt-badinput-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_file = dir.join("out.json");
    let run = |args: &[&str]| Command::new(bin).args(args).output().unwrap();

    let o = run(&["trace", "-o", out_file.to_str().unwrap(), "8.8.8.8"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--allow-public"));
    assert!(!out_file.exists());

    let o = run(&["trace", "-q", "99", "192.0.2.1"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("99"));

    let o = run(&["trace", "--pps", "900000", "192.0.2.1"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--pps"));

    let o = run(&["trace", "no such host!"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no such host!"));

    let o = run(&[
        "trace",
        "--targets",
        dir.join("missing.txt").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.txt"));

    let o = run(&["ping", "-i", "abc", "192.0.2.1"]);
    assert!(!o.status.success());
    assert!(!out_file.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_privilege_the_error_says_so() {
    vtnt_testkit::require_root!("setpriv");
    let o = Command::new("setpriv")
        .args(["--inh-caps=-all", "--bounding-set=-net_raw", "--"])
        .arg(env!("CARGO_BIN_EXE_vtnt"))
        .args(["trace", "127.0.0.1"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("CAP_NET_RAW"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Each option vTNT shares with scamper, given to both with the same value, shows the same
/// in both records (docs/scamper.md has the whole table).
#[test]
fn shared_options_record_like_scamper() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vpo", 1).expect("namespace chain");
    let target = chain.target();
    let trace = "trace";
    let ping = "ping -c 1";
    for (base, opts, keys) in [
        (trace, "-q 1 -w 1 -U 9", &["userid"][..]),
        (trace, "-q 1 -w 1 -t 4", &["tos"]),
        (trace, "-q 1 -w 1 -W 5", &["wait_probe"]),
        (trace, "-q 1 -w 1 -d 4000", &["dport"]),
        (trace, "-P icmp-paris -q 1 -w 1 -d 4000", &["icmp_sum"]),
        (trace, "-q 1 -w 1 -s 5000", &["sport"]),
        (trace, "-q 1 -w 1 -f 2 -m 9", &["firsthop", "hoplimit"]),
        (trace, "-q 2 -w 1", &["attempts"]),
        (trace, "-q 1 -w 2", &["wait"]),
        (ping, "-U 7", &["userid"]),
        (ping, "-i 0.5", &["ping_sent"]),
        (ping, "-P udp -s 60", &["probe_size"]),
        (ping, "-P udp -d 4000", &["dport"]),
        (ping, "-P udp -F 5555", &["sport"]),
        (ping, "-m 30", &["ttl"]),
    ] {
        let words = format!("{base} {opts}");
        let mut ours: Vec<&str> = words.split_whitespace().collect();
        ours.extend(["--pps", "100", &target]);
        let v = vtnt(chain.vantage(), &ours);
        let s = scamper(chain.vantage(), &words, &target);
        let kind = ours[0];
        let (vr, sr) = (of_type(&v, kind), of_type(&s, kind));
        assert_eq!((vr.len(), sr.len()), (1, 1), "{words}");
        for key in keys {
            assert!(!vr[0][key].is_null(), "{words}: no {key} in {}", vr[0]);
            assert_eq!(vr[0][key], sr[0][key], "{words}: {key}");
        }
    }
}

/// scamper's trace -Q, -T, -p, -P tcp-ack and ping -C, -p, -B, -o, -z, -R, -P tcp-ack,
/// -A, -P udp-dport, each given to both tools (in each one's letters: vTNT's `-p` and
/// `-o` are the run's rate and output file) on one chain of Linux routers: the whole
/// records agree once times, RTTs, IP IDs and drawn identifiers are taken out.
#[test]
fn scamper_options_record_like_scamper() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vpx", 2).expect("namespace chain");
    let target = chain.target();
    // each case also shows what the option did, so that equality is not of two records
    // that both lack it
    let rr = |r: &Value| r["responses"][0]["RR"].as_array().map_or(0, Vec::len);
    let second_attempt = |r: &Value| r["hops"][1]["probe_id"].clone();
    // every reply a RST (a RST answers an ACK; without ACK bit, as it acknowledges nothing)
    let rsts = |r: &Value, n: usize| {
        let rs = r["responses"].as_array().map_or(&[][..], Vec::as_slice);
        rs.len() == n && rs.iter().all(|x| x["tcp_flags"] == 4)
    };
    for (ours, theirs, shows) in [
        (
            "trace -q 2 -w 1 -Q",
            "trace -q 2 -w 1 -Q",
            &(|r: &Value| second_attempt(r) == 2) as &dyn Fn(&Value) -> bool,
        ),
        ("trace -q 1 -w 1 -T", "trace -q 1 -w 1 -T", &|r: &Value| {
            r["stop_reason"] == "COMPLETED"
        }),
        (
            "trace -q 1 -w 1 --payload deadbeef",
            "trace -q 1 -w 1 -p deadbeef",
            &|r: &Value| r["probe_size"] == 32,
        ),
        (
            "trace -P icmp-paris -q 1 -w 1 --payload 00112233445566",
            "trace -P icmp-paris -q 1 -w 1 -p 00112233445566",
            &|r: &Value| r["probe_size"] == 35,
        ),
        ("ping -c 2 -C 4660", "ping -c 2 -C 4660", &|r: &Value| {
            r["icmp_csum"] == 4660
        }),
        (
            "ping -c 2 --pattern abc",
            "ping -c 2 -p abc",
            &|r: &Value| r["pattern"] == "0abc",
        ),
        (
            "ping -c 2 -B 0102030405",
            "ping -c 2 -B 0102030405",
            &|r: &Value| r["payload"] == "0102030405",
        ),
        (
            "ping -c 2 -P udp -B 0102030405",
            "ping -c 2 -P udp -B 0102030405",
            &|r: &Value| r["probe_size"] == 33,
        ),
        (
            "ping -c 4 -i 0.2 --reply-count 2",
            "ping -c 4 -i 0.2 -o 2",
            &|r: &Value| r["ping_sent"] == 2,
        ),
        ("ping -c 2 -z 32", "ping -c 2 -z 32", &|r: &Value| {
            r["statistics"]["replies"] == 2
        }),
        ("ping -c 2 -R", "ping -c 2 -R", &|r: &Value| rr(r) == 7),
        (
            "ping -c 2 -R -P udp",
            "ping -c 2 -R -P udp",
            &|r: &Value| rr(r) > 0,
        ),
        (
            "trace -P tcp-ack -q 1 -w 1",
            "trace -P tcp-ack -q 1 -w 1",
            &|r: &Value| {
                let last = r["hops"].as_array().and_then(|h| h.last()).cloned();
                r["method"] == "tcp-ack" && last.is_some_and(|h| h["tcp_flags"] == 4)
            },
        ),
        (
            "ping -c 3 -i 0.2 -P tcp-ack",
            "ping -c 3 -i 0.2 -P tcp-ack",
            &|r: &Value| rsts(r, 3),
        ),
        (
            "ping -c 2 -i 0.2 -P tcp-ack -A 12345",
            "ping -c 2 -i 0.2 -P tcp-ack -A 12345",
            &|r: &Value| rsts(r, 2) && r["tcp_ack"] == 12345,
        ),
        (
            "ping -c 3 -i 0.2 -P udp-dport -d 4000",
            "ping -c 3 -i 0.2 -P udp-dport -d 4000",
            &|r: &Value| r["dport"] == 4000 && r["statistics"]["replies"] == 3,
        ),
    ] {
        let mut args: Vec<&str> = ours.split_whitespace().collect();
        args.extend(["--pps", "100", &target]);
        let v = vtnt(chain.vantage(), &args);
        let s = scamper(chain.vantage(), theirs, &target);
        let kind = args[0];
        let (vr, sr) = (of_type(&v, kind), of_type(&s, kind));
        assert_eq!((vr.len(), sr.len()), (1, 1), "{ours}");
        assert_eq!(
            normalised(vr[0]),
            normalised(sr[0]),
            "{ours}\n ours:    {}\n scamper: {}",
            vr[0],
            sr[0]
        );
        assert!(shows(vr[0]), "{ours}: {}", vr[0]);
        assert!(shows(sr[0]), "{theirs}: {}", sr[0]);
    }
}

/// The one record of `out`, a warts file `who` wrote.
fn warts_record(out: &std::path::Path, who: &str) -> vtnt_formats::Record {
    let bytes = std::fs::read(out).unwrap_or_else(|e| panic!("{who}: {e}"));
    let records: Vec<_> = vtnt_formats::read_warts(&bytes)
        .into_iter()
        .filter_map(|i| match i.unwrap_or_else(|e| panic!("{who}: {e}")) {
            vtnt_formats::Item::Record(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(records.len(), 1, "{who}: one record");
    records.into_iter().next().unwrap()
}

/// `vtnt ARGS` and `scamper -c CMD` in `ns`, each writing warts to a file of its own
/// (vTNT's with `-O warts -o`); their records as our reader reads them.
fn both_warts(
    ns: &NetNs,
    ours: &[&str],
    theirs: &str,
) -> (vtnt_formats::Record, vtnt_formats::Record) {
    let dir = std::env::temp_dir().join(format!("vtnt-warts-{}", vtnt_netns::unique_name("o")));
    let (o, t) = both_warts_files(ns, ours, theirs, &dir);
    let records = (warts_record(&o, "vtnt"), warts_record(&t, "scamper"));
    let _ = std::fs::remove_dir_all(&dir);
    records
}

/// Runs `vtnt ours -O warts` and `scamper -c theirs` in `ns`, their warts files in `dir`.
fn both_warts_files(
    ns: &NetNs,
    ours: &[&str],
    theirs: &str,
    dir: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let (o, t) = (dir.join("ours.warts"), dir.join("theirs.warts"));
    let mut args = ours.to_vec();
    args.extend(["-O", "warts", "-o", o.to_str().unwrap()]);
    let out = ns
        .exec(env!("CARGO_BIN_EXE_vtnt"), &args)
        .expect("run vtnt");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let target = ours.last().unwrap();
    let out = ns
        .exec(
            "scamper",
            &[
                "-c",
                theirs,
                "-O",
                "warts",
                "-o",
                t.to_str().unwrap(),
                "-i",
                target,
            ],
        )
        .expect("run scamper");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (o, t)
}

/// An ICMP ping's `-d` is its first sequence number: scamper keeps it in warts only (its
/// destination port; JSON shows nothing), where ours has it too, and every reply is
/// matched to its probe as without it.
#[test]
fn icmp_ping_first_sequence_number_like_scamper() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vpq", 1).expect("namespace chain");
    let target = chain.target();
    let (v, s) = both_warts(
        chain.vantage(),
        &["ping", "-c", "3", "-i", "0.2", "-d", "65535", &target],
        "ping -c 3 -i 0.2 -d 65535",
    );
    let (Record::Ping(v), Record::Ping(s)) = (v, s) else {
        panic!("not pings")
    };
    assert_eq!((v.dport, s.dport), (65535, 65535));
    let seqs = |p: &vtnt_formats::Ping| p.responses.iter().map(|r| r.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(&v),
        [0, 1, 2],
        "every probe answered, across the wrap to 0"
    );
    assert_eq!(seqs(&v), seqs(&s));
}

/// scamper's `-G 2`: routers that send nothing (their own packets unroutable) make the
/// trace reach its gap limit, then a TTL-255 probe finds the destination. Both tools
/// stop with GAPLIMIT, count that probe, and keep its reply in warts' last-ditch
/// section (which scamper's JSON does not show): the same record in both, once times,
/// RTTs and IP IDs are taken out.
#[test]
fn trace_last_ditch_like_scamper() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vpg", 2).expect("namespace chain");
    for router in &chain.nodes[1..3] {
        router
            .ip(&["rule", "add", "iif", "lo", "prohibit", "pref", "100"])
            .expect("silence a router");
    }
    let target = chain.target();
    let (v, s) = both_traces(chain.vantage(), "trace -q 1 -w 1 -g 2 -G 2", &target);
    assert_eq!(v.stop_reason, vtnt_engine::StopReason::GapLimit);
    assert!(v.hops.is_empty(), "the routers are silent");
    assert_eq!((v.probe_count, v.lastditch.len()), (3, 1), "{v:?}");
    let ld = &v.lastditch[0];
    assert_eq!((ld.addr.to_string(), ld.probe_ttl), (target.clone(), 255));
    assert_eq!(v, s);
}

/// Debian's dnsmasq in a namespace, answering PTR queries on its 127.0.0.1 only, and the
/// namespace's resolv.conf (/etc/netns/NS/resolv.conf, which `ip netns exec` puts in
/// place) naming it; both gone when dropped.
struct Dns {
    child: std::process::Child,
    etc: std::path::PathBuf,
}

impl Dns {
    fn start(ns: &NetNs, ptrs: &[(&str, &str)]) -> Dns {
        let etc = std::path::Path::new("/etc/netns").join(ns.name());
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(etc.join("resolv.conf"), "nameserver 127.0.0.1\n").unwrap();
        let mut args = vec![
            "--keep-in-foreground".to_string(),
            "--conf-file=/dev/null".into(),
            "--no-resolv".into(),
            "--no-hosts".into(),
            "--bind-interfaces".into(),
            "--listen-address=127.0.0.1".into(),
            "--pid-file=".into(),
        ];
        for (addr, name) in ptrs {
            let rev: Vec<&str> = addr.split('.').rev().collect();
            args.push(format!(
                "--ptr-record={}.in-addr.arpa,{name}",
                rev.join(".")
            ));
        }
        let child = ns
            .command("dnsmasq")
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start dnsmasq");
        let dns = Dns { child, etc };
        // ready once it answers the first record
        let (addr, name) = ptrs[0];
        for _ in 0..100 {
            let out = ns.exec("getent", &["hosts", addr]).expect("run getent");
            if String::from_utf8_lossy(&out.stdout).contains(name) {
                return dns;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("dnsmasq does not answer");
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.etc);
    }
}

/// The hop lines (`hop N ADDR [name NAME]`) and the trace's flags line of sc_wartsdump.
fn dump_names(path: &std::path::Path) -> (Vec<String>, String) {
    let out = Command::new("sc_wartsdump").arg(path).output().unwrap();
    assert!(out.status.success(), "sc_wartsdump {}", path.display());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let hops = text
        .lines()
        .filter(|l| l.starts_with("hop "))
        .map(String::from)
        .collect();
    let flags = text
        .lines()
        .find(|l| l.starts_with(" flags: "))
        .unwrap_or("");
    (hops, flags.to_string())
}

/// scamper's trace `-O ptr`: both tools look every hop address up through the
/// namespace's resolver (dnsmasq serving PTR records for the first and third routers and
/// the target, none for the second) and give each hop the same name, or none, in warts
/// (sc_wartsdump's `name`, the trace flag `ptr`) and JSON. `-W 5` leaves scamper time
/// for the target's answer before its last probe.
#[test]
fn ptr_names_like_scamper() {
    vtnt_testkit::require_root!("scamper", "dnsmasq", "sc_wartsdump");
    let chain = Chain::build("vpr", 3).expect("namespace chain");
    let target = chain.target();
    let (r1, r2, r3) = (Chain::right(0), Chain::right(1), Chain::right(2));
    let _dns = Dns::start(
        chain.vantage(),
        &[
            (&r1, "r1.ptr.example"),
            (&r3, "r3.ptr.example"),
            (&target, "target.ptr.example"),
        ],
    );
    let cmd = "trace -q 2 -Q -W 5 -w 1 -O ptr";
    let mut ours: Vec<&str> = cmd.split_whitespace().collect();
    ours.extend(["--pps", "100", &target]);
    let dir = std::env::temp_dir().join(format!("vtnt-ptr-{}", vtnt_netns::unique_name("o")));
    let (o, t) = both_warts_files(chain.vantage(), &ours, cmd, &dir);
    let (v, s) = (dump_names(&o), dump_names(&t));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(v, s, "sc_wartsdump: hop names and trace flags");
    assert_eq!(v.1, " flags: 0x101 ( all-attempts ptr )");
    let want = [
        format!("hop  1  {r1} name r1.ptr.example"),
        format!("hop  2  {r2}"),
        format!("hop  3  {r3} name r3.ptr.example"),
        format!("hop  4  {target} name target.ptr.example"),
    ];
    let got: Vec<&str> = v.0.iter().map(|l| l.trim_end()).collect();
    let want2: Vec<&str> = want.iter().flat_map(|w| [w.as_str(), w.as_str()]).collect();
    assert_eq!(got, want2, "two replies a hop, named where a PTR record is");

    let names = |r: &Value| -> Vec<(u64, String, Option<String>)> {
        r["hops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                let name = h["name"].as_str().map(String::from);
                (
                    h["probe_ttl"].as_u64().unwrap(),
                    h["addr"].to_string(),
                    name,
                )
            })
            .collect()
    };
    let vj = vtnt(chain.vantage(), &ours);
    let sj = scamper(chain.vantage(), cmd, &target);
    let (vt, st) = (of_type(&vj, "trace"), of_type(&sj, "trace"));
    assert_eq!(names(vt[0]), names(st[0]), "JSON: hop names");
    assert_eq!(names(vt[0])[0].2.as_deref(), Some("r1.ptr.example"));
}

/// Times, RTTs, IP IDs and the drawn source port of a trace, zeroed for comparison.
fn timeless(t: &mut vtnt_formats::Trace) {
    (t.start, t.sport) = (vtnt_engine::Instant::ZERO, 0);
    for h in t.hops.iter_mut().chain(&mut t.lastditch) {
        (h.tx, h.rtt, h.reply_ipid) = (vtnt_engine::Instant::ZERO, Default::default(), 0);
    }
}

/// `cmd` run by both tools in `ns` towards `target`, both records read from warts.
fn both_traces(ns: &NetNs, cmd: &str, target: &str) -> (vtnt_formats::Trace, vtnt_formats::Trace) {
    let mut ours: Vec<&str> = cmd.split_whitespace().collect();
    ours.extend(["--pps", "100", target]);
    let (Record::Trace(mut v), Record::Trace(mut s)) = both_warts(ns, &ours, cmd) else {
        panic!("not traces")
    };
    timeless(&mut v);
    timeless(&mut s);
    (v, s)
}

/// scamper's `-N 3`: three TTLs in flight. On a chain of three routers both tools record
/// the same hops (the replies past the destination to the TTLs still in flight when it
/// answered included, and `hop_count` with them), stop reason and probe count; with the
/// routers beyond the first silent, both stop at the gap limit after the same probes.
#[test]
fn trace_squeries_like_scamper() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vpn", 3).expect("namespace chain");
    let target = chain.target();
    let (v, s) = both_traces(chain.vantage(), "trace -q 1 -w 1 -N 3", &target);
    assert_eq!(v.stop_reason, vtnt_engine::StopReason::Completed);
    assert_eq!(v.squeries, 3);
    let dst_ttl = v.hops.iter().find(|h| h.addr.to_string() == target);
    assert_eq!(dst_ttl.map(|h| h.probe_ttl), Some(4), "{v:?}");
    assert_eq!(v, s);
    for router in &chain.nodes[2..] {
        router
            .ip(&["rule", "add", "iif", "lo", "prohibit", "pref", "100"])
            .expect("silence a router");
    }
    let (v, s) = both_traces(chain.vantage(), "trace -q 2 -w 1 -g 3 -N 3", &target);
    assert_eq!(v.stop_reason, vtnt_engine::StopReason::GapLimit);
    assert_eq!(v, s);
}

/// scamper's `-c 95` and `-c 99`: each hop of a chain (one interface each: Linux routers
/// answer from one address) is probed until the confidence table's count for one
/// interface, 6 or 8 probes whatever `-q` says, every probe answered; both tools record
/// the same replies and stop reason.
#[test]
fn trace_confidence_like_scamper() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vpc", 2).expect("namespace chain");
    let target = chain.target();
    for (cmd, per_hop) in [("trace -q 1 -w 1 -c 95", 6), ("trace -w 1 -c 99", 8)] {
        let (v, s) = both_traces(chain.vantage(), cmd, &target);
        assert_eq!(v.stop_reason, vtnt_engine::StopReason::Completed, "{cmd}");
        assert_eq!(v.confidence, cmd[cmd.len() - 2..].parse::<u8>().unwrap());
        assert_eq!(v.probe_count, 3 * per_hop, "{cmd}: three hops");
        assert_eq!(v.hops.len(), usize::from(v.probe_count), "{cmd}");
        assert_eq!(v, s, "{cmd}");
    }
}

/// Gives the link between `chain`'s two routers an MTU of 1400.
fn narrow_middle_link(chain: &Chain) {
    for (node, side) in [(1, "east"), (2, "west")] {
        chain.nodes[node]
            .ip(&["link", "set", side, "mtu", "1400"])
            .expect("small link");
    }
}

/// `-M` on a chain whose middle link has an MTU of 1400: the first router answers the
/// interface-sized probe with a "fragmentation needed" (next-hop MTU 1400) and the
/// destination the next one. Then the same router's PTBs dropped (iptables in its
/// namespace), so the size search finds 1400 and the TTL search the last router that
/// still answers. Both tools' PMTUD sections (warts) are the same once times, RTTs and
/// IP IDs are taken out; both tools' JSON counts the PMTUD probes and shows nothing more.
#[test]
fn trace_pmtud_like_scamper() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vpm", 2).expect("namespace chain");
    narrow_middle_link(&chain);
    let target = chain.target();
    let cmd = "trace -M -q 1 -w 1";
    let mut ours: Vec<&str> = cmd.split_whitespace().collect();
    ours.extend(["--pps", "100", &target]);
    let compare = |what: &str| {
        let (v, s) = both_warts(chain.vantage(), &ours, cmd);
        let (Record::Trace(v), Record::Trace(s)) = (v, s) else {
            panic!("not traces")
        };
        assert!(v.pmtud && s.pmtud, "{what}: the PMTUD flag");
        assert_eq!(v.probe_count, s.probe_count, "{what}");
        let strip = |t: vtnt_formats::Trace| {
            let mut d = t.pmtud_result.expect("a PMTUD section");
            for h in &mut d.hops {
                (h.tx, h.rtt, h.reply_ipid) = (vtnt_engine::Instant::ZERO, Default::default(), 0);
            }
            d
        };
        let (v, s) = (strip(v), strip(s));
        assert_eq!(v, s, "{what}");
        v
    };
    let d = compare("PTB");
    assert_eq!((d.ifmtu, d.pmtu, d.outmtu), (1500, 1400, 0));
    let ptb = vtnt_formats::PmtudNote {
        kind: vtnt_formats::PmtudNoteKind::Ptb,
        nhmtu: 1400,
        hop: Some(0),
    };
    assert_eq!(d.notes, [ptb]);
    assert_eq!(d.hops[0].addr.to_string(), Chain::right(0));
    assert_eq!(d.hops[0].nhmtu, 1400);
    assert_eq!(d.hops[1].addr.to_string(), target);

    // JSON: the PMTUD probes counted, nothing of PMTUD shown
    let v = vtnt(chain.vantage(), &ours);
    let s = scamper(chain.vantage(), cmd, &target);
    let (vt, st) = (of_type(&v, "trace"), of_type(&s, "trace"));
    assert_eq!(vt[0]["probe_count"], st[0]["probe_count"]);
    assert_eq!(hops(vt[0]), hops(st[0]));

    if vtnt_netns::which("iptables").is_none() {
        eprintln!("skipping the silent case: no iptables to drop the router's PTBs");
        return;
    }
    chain.nodes[1]
        .exec(
            "iptables",
            &[
                "-A",
                "OUTPUT",
                "-p",
                "icmp",
                "--icmp-type",
                "fragmentation-needed",
                "-j",
                "DROP",
            ],
        )
        .expect("drop PTBs");
    let d = compare("silent");
    assert_eq!((d.ifmtu, d.pmtu), (1500, 1400));
    assert_eq!(d.notes.len(), 1);
    let n = d.notes[0];
    assert_eq!(
        (n.kind, n.nhmtu),
        (vtnt_formats::PmtudNoteKind::Silence, 1400)
    );
    let last = &d.hops[usize::from(n.hop.expect("a hop"))];
    assert_eq!(
        (last.addr.to_string(), last.probe_ttl),
        (Chain::right(0), 1)
    );
}

/// `chain` made dual-stack: link k also carries fc00:38:k::/64 (::1 on the left, ::2 on
/// the right), IPv6 forwarding on and ICMPv6 rate limiting off in the routers, routes as
/// the IPv4 ones. The target's IPv6 address, once it answers a ping (the first packets
/// wait on neighbour discovery along the chain: no test should measure that).
/// The one record of `kind` that `vtnt <ours>` and `scamper -c <theirs>` each write
/// towards `target` from `ns`.
fn one_each(ns: &NetNs, ours: &str, theirs: &str, target: &str, kind: &str) -> (Value, Value) {
    let mut args: Vec<&str> = ours.split_whitespace().collect();
    args.extend(["--pps", "100", target]);
    let v = vtnt(ns, &args);
    let s = scamper(ns, theirs, target);
    let (vr, sr) = (of_type(&v, kind), of_type(&s, kind));
    assert_eq!((vr.len(), sr.len()), (1, 1), "{ours}: one {kind} each");
    (vr[0].clone(), sr[0].clone())
}

/// IPv6 traces through the Linux driver's IPv6 sockets, both Paris methods: the whole
/// records agree with scamper's once times, RTTs and drawn identifiers are taken out
/// (ICMPv6's types, hop limits as TTLs, no quoted traffic class, 60-byte probes). Debian's
/// scamper (20211212) matches no reply to its own udp-paris probes over IPv6, so a
/// udp-paris trace agrees with its udp-paris record but for the replies, and its replies
/// with those of scamper's plain udp trace (the same ports for every probe).
#[test]
fn ipv6_trace_matches_scamper() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vt6", 2).expect("namespace chain");
    let target = dual_stack(&chain);
    let trace = |ours: &str, theirs: &str| {
        let (v, s) = one_each(chain.vantage(), ours, theirs, &target, "trace");
        (normalised(&v), normalised(&s))
    };
    let (v, s) = trace(
        "trace -P icmp-paris -q 2 -w 1",
        "trace -P icmp-paris -q 2 -w 1",
    );
    assert_eq!(v, s, "icmp-paris\n ours:    {v}\n scamper: {s}");
    let types: Vec<&Value> = v["hops"]
        .as_array()
        .expect("hops")
        .iter()
        .map(|h| &h["icmp_type"])
        .collect();
    assert_eq!(types, [&Value::from(3), &3.into(), &129.into()], "{v}");
    assert_eq!(
        (&v["probe_size"], &v["stop_reason"]),
        (&60.into(), &"COMPLETED".into())
    );

    let (v, s) = trace(
        "trace -P udp-paris -q 1 -w 1",
        "trace -P udp-paris -q 1 -w 1",
    );
    let without = |r: &Value, keys: &[&str]| {
        let mut r = r.clone();
        for k in keys {
            r.as_object_mut().expect("a record").remove(*k);
        }
        r
    };
    let replies = ["hops", "hop_count", "probe_count", "stop_reason"];
    assert_eq!(without(&v, &replies), without(&s, &replies), "udp-paris");
    let (_, plain) = trace("trace -P udp-paris -q 1 -w 1", "trace -P udp -q 1 -w 1");
    assert_eq!(
        without(&v, &["method"]),
        without(&plain, &["method"]),
        "udp-paris and scamper's udp"
    );
    let types: Vec<(&Value, &Value)> = v["hops"]
        .as_array()
        .expect("hops")
        .iter()
        .map(|h| (&h["icmp_type"], &h["icmp_code"]))
        .collect();
    assert_eq!(
        types,
        [
            (&Value::from(3), &0.into()),
            (&3.into(), &0.into()),
            (&1.into(), &4.into())
        ],
        "{v}"
    );
}

/// TCP over IPv6 through the Linux driver's raw IPv6 TCP socket, and the ping methods
/// beyond ICMP echo: tcp and tcp-ack traces (SYNs answered by the destination's
/// SYN-ACK or RST, ACKs by its RST, routers' ICMPv6 time exceeded quoting the TCP
/// header), tcp, tcp-ack, udp and udp-dport pings; every record equals scamper's once
/// times, RTTs and drawn identifiers are taken out.
#[test]
fn ipv6_tcp_and_udp_dport_match_scamper() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vc6", 2).expect("namespace chain");
    let target = dual_stack(&chain);
    let last_flags = |r: &Value| {
        let hops = r["hops"].as_array().expect("hops");
        (hops.len(), hops.last().map(|h| h["tcp_flags"].clone()))
    };
    let replies = |r: &Value| r["statistics"]["replies"].clone();
    type Shows<'a> = &'a dyn Fn(&Value) -> bool;
    let cases: [(&str, &str, Shows); 6] = [
        ("trace -P tcp -q 1 -w 1", "trace -P tcp -q 1 -w 1", &|r| {
            // the destination's RST-ACK (no listener), after two routers
            last_flags(r) == (3, Some(Value::from(20)))
        }),
        (
            "trace -P tcp-ack -q 1 -w 1",
            "trace -P tcp-ack -q 1 -w 1",
            &|r| last_flags(r) == (3, Some(Value::from(4))),
        ),
        (
            "ping -c 2 -i 0.2 -P tcp",
            "ping -c 2 -i 0.2 -P tcp-syn",
            &|r| replies(r) == 2,
        ),
        (
            "ping -c 2 -i 0.2 -P tcp-ack",
            "ping -c 2 -i 0.2 -P tcp-ack",
            &|r| replies(r) == 2,
        ),
        ("ping -c 2 -i 0.2 -P udp", "ping -c 2 -i 0.2 -P udp", &|r| {
            replies(r) == 2
        }),
        (
            "ping -c 3 -i 0.2 -P udp-dport -d 4000",
            "ping -c 3 -i 0.2 -P udp-dport -d 4000",
            &|r| r["dport"] == 4000 && replies(r) == 3,
        ),
    ];
    for (ours, theirs, shows) in cases {
        let kind = ours.split_whitespace().next().expect("a command");
        let (v, s) = one_each(chain.vantage(), ours, theirs, &target, kind);
        assert_eq!(
            normalised(&v),
            normalised(&s),
            "{ours}\n ours:    {v}\n scamper: {s}"
        );
        assert!(shows(&v), "{ours}: {v}");
    }
}

/// `vtnt ping -s 84` to an IPv6 target sends 84-byte probes, as scamper's `-s` does
/// (the whole packet, whatever the family; IPv6's default is 104): it sent 104.
#[test]
fn ipv6_ping_size_is_the_size_sent() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vs6", 1).expect("namespace chain");
    let target = dual_stack(&chain);
    for size in ["84", "104", "64"] {
        let cmd = format!("ping -c 1 -s {size}");
        let (v, s) = one_each(chain.vantage(), &cmd, &cmd, &target, "ping");
        let vp = [&v];
        assert_eq!(normalised(&v), normalised(&s), "-s {size}");
        // the echo reply is as long as the probe that went out
        assert_eq!(
            vp[0]["responses"][0]["reply_size"].to_string(),
            size,
            "{}",
            vp[0]
        );
    }
}

fn dual_stack(chain: &Chain) -> String {
    let v6 = |k: usize, side: u8| format!("fc00:38:{k}::{side}");
    let last = chain.nodes.len() - 1;
    for (i, ns) in chain.nodes.iter().enumerate() {
        if i < last {
            let a = format!("{}/64", v6(i, 1));
            ns.ip(&["-6", "addr", "add", &a, "dev", "east", "nodad"])
                .expect("IPv6 address");
        }
        if i > 0 {
            let a = format!("{}/64", v6(i - 1, 2));
            ns.ip(&["-6", "addr", "add", &a, "dev", "west", "nodad"])
                .expect("IPv6 address");
        }
        if i > 0 && i < last {
            ns.sysctl("net.ipv6.conf.all.forwarding", "1").unwrap();
            ns.sysctl("net.ipv6.icmp.ratelimit", "0").unwrap();
        }
        if i < last {
            let via = v6(i, 2);
            ns.ip(&["-6", "route", "add", "fc00:38::/32", "via", &via])
                .expect("IPv6 route");
        }
        for j in 0..i.saturating_sub(1) {
            let (net, via) = (format!("fc00:38:{j}::/64"), v6(i - 1, 1));
            ns.ip(&["-6", "route", "add", &net, "via", &via])
                .expect("IPv6 route back");
        }
    }
    let target = v6(last - 1, 2);
    let answered = (0..10).any(|_| {
        let s = scamper(chain.vantage(), "ping -c 1", &target);
        of_type(&s, "ping")
            .first()
            .is_some_and(|p| p["statistics"]["replies"] == 1)
    });
    assert!(answered, "the IPv6 chain carries no ping to {target}");
    target
}

/// ICMPv6 echo pings through the Linux driver's IPv6 sockets: the whole records agree
/// with scamper's once times and RTTs are taken out, for echo replies from the target
/// and time exceeded from the first router (the ICMPv6 error path).
#[test]
fn ipv6_ping_matches_scamper() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vp6", 2).expect("namespace chain");
    let target = dual_stack(&chain);
    for (ours, theirs, shows) in [
        ("ping -c 3 -i 0.2", "ping -c 3 -i 0.2", 129),
        ("ping -c 2 -i 0.2 -m 1", "ping -c 2 -i 0.2 -m 1", 3),
    ] {
        let (v, s) = one_each(chain.vantage(), ours, theirs, &target, "ping");
        let (vr, sr) = ([&v], [&s]);
        assert_eq!(
            normalised(vr[0]),
            normalised(sr[0]),
            "{ours}\n ours:    {}\n scamper: {}",
            vr[0],
            sr[0]
        );
        let types: Vec<&Value> = vr[0]["responses"]
            .as_array()
            .expect("responses")
            .iter()
            .map(|r| &r["icmp_type"])
            .collect();
        assert!(
            !types.is_empty() && types.iter().all(|t| **t == shows),
            "{ours}: {}",
            vr[0]
        );
    }
}

/// `-M` over IPv6, on a dual-stack chain whose middle link has an MTU of 1400: the
/// first router answers the interface-sized probe with a packet too big (MTU 1400) and
/// the destination the next probe; then, the router's packets too big dropped
/// (ip6tables in its namespace), the size search finds 1400 and the TTL search the last
/// router that still answers. scamper's own `sc_wartsdump` reads both warts files, and
/// their PMTUD sections agree line for line once transmit times and RTTs are taken out.
/// The peer is scamper's plain `udp` method: Debian's scamper matches no reply to its
/// udp-paris probes over IPv6 (see `ipv6_trace_matches_scamper`), and its PMTUD probes
/// carry no port, so a udp-paris discovery's probes are the same as a udp one's.
#[test]
fn ipv6_pmtud_like_scamper() {
    vtnt_testkit::require_root!("scamper", "sc_wartsdump", "ip6tables");
    let chain = Chain::build("vp6", 2).expect("namespace chain");
    let target = dual_stack(&chain);
    narrow_middle_link(&chain);
    let ours = [
        "trace",
        "-M",
        "-P",
        "udp-paris",
        "-q",
        "1",
        "-w",
        "1",
        "--pps",
        "100",
    ];
    let ours: Vec<&str> = ours.into_iter().chain([target.as_str()]).collect();
    let compare = |what: &str| {
        let dir = std::env::temp_dir().join(format!("vtnt-warts-{}", vtnt_netns::unique_name("m")));
        let (o, t) = both_warts_files(chain.vantage(), &ours, "trace -M -P udp -q 1 -w 1", &dir);
        let (o, t) = (pmtud_dump(&o), pmtud_dump(&t));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(o, t, "{what}\n ours:\n{o}\n scamper:\n{t}");
        o
    };
    let ptb = compare("packet too big");
    assert!(
        ptb.starts_with(
            "pmtud: ver 2 ifmtu 1500, pmtu 1400, notec 1\n note 0: nhmtu 1400, ptb fc00:38::2\n"
        ),
        "{ptb}"
    );
    chain.nodes[1]
        .exec(
            "ip6tables",
            &[
                "-A",
                "OUTPUT",
                "-p",
                "icmpv6",
                "--icmpv6-type",
                "packet-too-big",
                "-j",
                "DROP",
            ],
        )
        .expect("drop packets too big");
    let silent = compare("silent");
    assert!(
        silent.starts_with(
            "pmtud: ver 2 ifmtu 1500, pmtu 1400, notec 1\n note 0: nhmtu 1400, silence > ttl 1\n"
        ),
        "{silent}"
    );
}

/// The PMTUD section of `sc_wartsdump`'s text for the one trace in `warts`, without
/// transmit times, RTTs and the flags saying where the times came from (each tool's
/// own); probe sizes, TTLs, reply addresses, ICMP types, quotes and MTUs stay.
fn pmtud_dump(warts: &std::path::Path) -> String {
    let out = std::process::Command::new("sc_wartsdump")
        .arg(warts)
        .output()
        .expect("run sc_wartsdump");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut section = String::new();
    for line in text.lines().skip_while(|l| !l.starts_with("pmtud:")) {
        if line.starts_with("cycle stop") {
            break;
        }
        if line.trim_start().starts_with("flags:") {
            continue;
        }
        let line = match line.find(", tx: ") {
            Some(at) => {
                let size = &line[line.find(", probe-size:").expect("a probe size")..];
                format!("{}{size}", &line[..at])
            }
            None => line.to_string(),
        };
        section.push_str(&line);
        section.push('\n');
    }
    section
}
