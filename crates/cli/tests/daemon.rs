//! `vtnt daemon` driven by Debian's `sc_attach` (scamper 20211212's own client) over the
//! unix-domain and TCP control sockets, toward a chain of Linux routers in namespaces
//! made here: the warts file sc_attach writes holds what `vtnt trace`, `vtnt ping` and
//! `vtnt tnt` print for the same options. Plus the protocol's refusals, a client that
//! leaves mid-command, a port in use, and the socket file removed on SIGTERM. Needs root
//! and scamper's tools (scripts/setup.sh); skips through vtnt-testkit otherwise.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use records_common::{hops, json_lines, of_type, replies, vtnt};
use serde_json::Value;
use vtnt_netns::{Chain, NetNs};

mod daemon_common;
mod records_common;

use daemon_common::{data_json, Daemon, Scratch, VTNT};

/// The records of a warts file, as sc_warts2json prints them.
fn warts(path: &Path) -> Vec<Value> {
    let out = Command::new("sc_warts2json").arg(path).output().unwrap();
    json_lines(&out, "sc_warts2json")
}

const TRACE: &str = "trace -q 1 -w 1";
const PING: &str = "ping -c 3 -i 0.2";
const TNT: &str = "tnt -q 1 -w 1";

/// Checks sc_attach's warts against `vtnt trace|ping|tnt` run directly with the same
/// options: one trace, one ping, and TNT's records (its initial trace, pings and
/// revelation traces), each as the command line measures it.
fn check_against_the_cli(ns: &NetNs, records: &[Value], target: &str) {
    assert_eq!(of_type(records, "cycle-start").len(), 1, "{records:?}");
    assert_eq!(of_type(records, "cycle-stop").len(), 1, "{records:?}");
    let traces = of_type(records, "trace");
    let pings = of_type(records, "ping");
    let words =
        |c: &str| -> Vec<String> { c.split(' ').chain([target]).map(String::from).collect() };
    let run = |c: &str| {
        let w = words(c);
        vtnt(ns, &w.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let cli_trace = run(TRACE);
    let cli_ping = run(PING);
    let cli_tnt = run(TNT);
    let (ct, cp, cn) = (
        of_type(&cli_trace, "trace")[0],
        of_type(&cli_ping, "ping")[0],
        of_type(&cli_tnt, "trace")[0],
    );
    // the plain trace and ping, and TNT's records: the same counts as the command line's
    let tnt_count = |ty: &str| of_type(&cli_tnt, ty).len();
    assert_eq!(
        (traces.len(), pings.len()),
        (1 + tnt_count("trace"), 1 + tnt_count("ping")),
        "{records:?}"
    );
    // a trace's method tells the plain trace (udp-paris) from TNT's initial trace
    // (icmp-echo-paris, to the target; its revelation traces go elsewhere)
    let by_method = |m: &Value| {
        *traces
            .iter()
            .find(|t| t["method"] == *m && t["dst"] == target)
            .unwrap()
    };
    // the plain ping: three probes (TNT's send one)
    let pings: Vec<&Value> = pings
        .into_iter()
        .filter(|p| p["ping_sent"] == cp["ping_sent"] && p["dst"] == target)
        .collect();
    assert_eq!(pings.len(), 1, "{records:?}");
    for (ours, cli) in [
        (by_method(&ct["method"]), ct),
        (by_method(&cn["method"]), cn),
    ] {
        assert_eq!(ours["dst"], target);
        assert_eq!(ours["stop_reason"], "COMPLETED");
        assert_eq!(hops(ours), hops(cli), "hops differ from the command line's");
        for key in ["method", "attempts", "wait", "probe_size", "dport"] {
            assert_eq!(ours[key], cli[key], "{key}");
        }
    }
    assert_eq!(
        hops(by_method(&ct["method"])).len(),
        3,
        "two routers and the target"
    );
    assert_eq!(pings[0]["dst"], target);
    assert_eq!(replies(pings[0]), replies(cp));
    assert_eq!(replies(pings[0]).len(), 3);
    for key in ["method", "probe_size", "ping_sent"] {
        assert_eq!(pings[0][key], cp[key], "{key}");
    }
}

/// Runs the trace, ping and tnt commands through sc_attach against a daemon in a chain's
/// vantage point, listening (`listen`: `-U PATH` or `-P PORT`) where sc_attach connects
/// (`connect`: its `-U PATH` or `-p PORT`); checks the records against the command line,
/// then SIGTERM. Returns the records.
fn through_sc_attach(
    chain: &Chain,
    dir: &Scratch,
    listen: [&str; 2],
    connect: [&str; 2],
) -> Vec<Value> {
    let target = chain.target();
    let ns = chain.vantage();
    let ready = || match listen[0] {
        "-U" => Path::new(listen[1]).exists(),
        _ => !ns
            .exec("ss", &["-Hltn", "sport", "=", &format!(":{}", listen[1])])
            .unwrap()
            .stdout
            .is_empty(),
    };
    // Debian's sc_attach is 20211212's: it refuses today's `DATA LEN id-N`
    let args = [listen[0], listen[1], "-p", "200", "--protocol", "20211212"];
    let daemon = Daemon::start(ns, &args, ready);
    if listen[0] == "-U" {
        let meta = std::fs::metadata(listen[1]).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions());
        assert_eq!(mode & 0o777, 0o600, "the socket is its owner's alone");
    }
    let cmds = dir.path("cmds.txt");
    let t = &target;
    std::fs::write(&cmds, format!("{TRACE} {t}\n{PING} {t}\n{TNT} {t}\n")).unwrap();
    let out = dir.path("out.warts");
    let (cmds, out_s) = (cmds.to_str().unwrap(), out.to_str().unwrap());
    let run = ns
        .exec(
            "sc_attach",
            &["-i", cmds, "-o", out_s, connect[0], connect[1]],
        )
        .unwrap();
    assert!(run.status.success(), "sc_attach: {run:?}");
    let records = warts(&out);
    check_against_the_cli(ns, &records, &target);
    // the daemon's build names itself in the cycle, as the CLI's does: in warts the
    // description of the cycle's list, which sc_warts2json does not print
    let first = vtnt_formats::WartsReader::new(std::fs::File::open(&out).unwrap()).next();
    let Some(Ok(vtnt_formats::Item::CycleStart(cycle))) = first else {
        panic!("no cycle start first: {first:?}")
    };
    let build = cycle.vtnt.unwrap_or_default();
    assert!(
        build.starts_with(&format!("{} (commit ", env!("CARGO_PKG_VERSION"))),
        "{build}"
    );
    let stopped = daemon.stop();
    assert!(stopped.status.success(), "{stopped:?}");
    records
}

#[test]
fn sc_attach_runs_trace_ping_and_tnt_over_the_unix_socket() {
    vtnt_testkit::require_root!("sc_attach", "sc_warts2json");
    let chain = Chain::build("vdu", 2).expect("namespace chain");
    let dir = Scratch::new("vtnt-daemon-unix");
    let sock = dir.path("ctl.sock");
    let sock_s = sock.to_str().unwrap();
    let records = through_sc_attach(&chain, &dir, ["-U", sock_s], ["-U", sock_s]);
    assert_eq!(
        of_type(&records, "cycle-start")[0]["list_name"],
        format!("{sock_s}:0"),
        "a unix-domain client's list is named by the socket, as scamper's"
    );
    assert!(!sock.exists(), "the socket file is removed on SIGTERM");
}

#[test]
fn sc_attach_runs_trace_ping_and_tnt_over_tcp() {
    vtnt_testkit::require_root!("sc_attach", "sc_warts2json");
    let chain = Chain::build("vdt", 2).expect("namespace chain");
    let dir = Scratch::new("vtnt-daemon-tcp");
    // the namespace's loopback is its own: any port is free there
    let records = through_sc_attach(&chain, &dir, ["-P", "31337"], ["-p", "31337"]);
    assert!(
        of_type(&records, "cycle-start")[0]["list_name"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:"),
        "a TCP client's list is named by its address, as scamper's"
    );
    // a port in use: one line, exit 1
    let _holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = _holder.local_addr().unwrap().port().to_string();
    let twice = Command::new(VTNT)
        .args(["daemon", "-P", &port])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&twice.stderr);
    assert_eq!(twice.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("-P {port}")) && err.contains("in use"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// A client of our own: sends `text`, reads until the daemon closes (or `wait` passes).
fn converse(sock: &Path, text: &str, wait: Duration) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    s.write_all(text.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn bad_commands_get_err_lines_and_the_daemon_carries_on() {
    vtnt_testkit::require_root!();
    let chain = Chain::build("vdb", 1).expect("namespace chain");
    let target = chain.target();
    let dir = Scratch::new("vtnt-daemon-bad");
    let sock = dir.path("ctl.sock");
    let sock_s = sock.to_str().unwrap();
    // a path holding something else is refused, untouched
    std::fs::write(dir.path("file"), "x").unwrap();
    let refused = chain
        .vantage()
        .exec(VTNT, &["daemon", "-U", dir.path("file").to_str().unwrap()])
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a socket"));
    assert_eq!(std::fs::read_to_string(dir.path("file")).unwrap(), "x");

    let daemon = Daemon::start(chain.vantage(), &["-U", sock_s, "-p", "200"], || {
        sock.exists()
    });
    let t = &target;
    let out = converse(
        &sock,
        &format!(
            "bogus\nattach format text\nattach\nbogus 1\ntrace\ntrace -q 0 {t}\n\
             trace -p 5000 {t}\ntrace {t} {t}\nping 8.8.8.8\ntrace -o /tmp/x {t}\n\
             trace -O json {t}\nping \"{t}\ndone\n"
        ),
        Duration::from_secs(10),
    );
    let errs: Vec<&str> = out.lines().filter(|l| l.starts_with("ERR")).collect();
    assert_eq!(errs.len(), 11, "{out}");
    for (i, want) in [
        "ERR unhandled command 'bogus'",
        "ERR format must be warts or json",
        "unknown command 'bogus'",
        "give one target",
        "--attempts",
        "-p/--pps is not accepted here",
        "give one target",
        "target `8.8.8.8`",
        "-o/--output is not accepted here",
        "a command takes only `-O ptr`",
        "ERR a double quote is not closed",
    ]
    .iter()
    .enumerate()
    {
        assert!(errs[i].contains(want), "{i}: {} !~ {want}\n{out}", errs[i]);
    }
    assert!(errs[7].contains("--allow-public"), "{out}");
    assert!(!out.contains("OK id-"), "{out}");
    // `done`: OK, then the cycle stop (17 bytes of warts, 28 uuencoded), then the end
    assert!(
        out.ends_with("`\n`\n") && out.contains("\nOK\nDATA 28\n"),
        "{out}"
    );

    // a client that leaves in the middle of a ping: the daemon drops it and serves on
    let mut s = UnixStream::connect(&sock).unwrap();
    s.write_all(format!("attach\nping -c 20 -i 0.5 {t}\n").as_bytes())
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    drop(s);

    // TNT's annotations travel in JSON
    let out = converse(
        &sock,
        &format!("get pps\nattach format json\n{TNT} {t}\ndone\n"),
        Duration::from_secs(30),
    );
    assert!(out.starts_with("OK pps 200\nOK\nMORE\n"), "{out}");
    let objs = data_json(&out);
    let traces = of_type(&objs, "trace");
    assert_eq!(traces.len(), 1, "{out}");
    assert!(traces[0]["tnt"].is_object(), "{}", traces[0]);
    assert_eq!(of_type(&objs, "cycle-stop").len(), 1);

    let stopped = daemon.stop();
    assert!(stopped.status.success(), "{stopped:?}");
    let said = String::from_utf8_lossy(&stopped.stderr);
    assert!(
        said.contains("client left") && said.contains("running=1"),
        "{said}"
    );
    assert!(!sock.exists(), "the socket file is removed on SIGTERM");
}

/// scamper's `trace -O ptr` through the daemon: every hop gets the name the host's
/// resolver gives it, here from the hosts file `ip netns exec` puts in place for the
/// daemon's namespace (/etc/netns/NS/hosts), and a hop without one gets none.
#[test]
fn a_daemon_trace_takes_o_ptr() {
    vtnt_testkit::require_root!();
    let chain = Chain::build("vdn", 2).expect("namespace chain");
    let target = chain.target();
    let etc = Path::new("/etc/netns").join(chain.vantage().name());
    std::fs::create_dir_all(&etc).unwrap();
    struct Gone(PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _gone = Gone(etc.clone());
    let r1 = Chain::right(0);
    std::fs::write(
        etc.join("hosts"),
        format!("{r1} r1.hosts.example\n{target} dst.hosts.example\n"),
    )
    .unwrap();
    let dir = Scratch::new("vtnt-daemon-ptr");
    let sock = dir.path("ctl.sock");
    let daemon = Daemon::start(
        chain.vantage(),
        &["-U", sock.to_str().unwrap(), "-p", "200"],
        || sock.exists(),
    );
    let out = converse(
        &sock,
        &format!("attach format json\ntrace -q 1 -w 1 -O ptr {target}\ndone\n"),
        Duration::from_secs(20),
    );
    let traces: Vec<Value> = data_json(&out)
        .into_iter()
        .filter(|v| v["type"] == "trace")
        .collect();
    assert_eq!(traces.len(), 1, "{out}");
    let names: Vec<(String, Option<String>)> = traces[0]["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let name = h["name"].as_str().map(str::to_string);
            (h["addr"].as_str().unwrap().to_string(), name)
        })
        .collect();
    assert_eq!(
        names,
        [
            (r1, Some("r1.hosts.example".to_string())),
            (Chain::right(1), None),
            (target, Some("dst.hosts.example".to_string())),
        ],
        "{out}"
    );
    assert!(daemon.stop().status.success());
}
