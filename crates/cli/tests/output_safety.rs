//! `-o` and interruption, on the real `vtnt` binary (as root):
//!
//! - `-o` naming a FIFO, a device node, a symbolic link, a directory, or a file in a
//!   missing directory is refused with an error naming the path and what it is; the run
//!   sends no probe (it runs in a namespace of its own whose only way out is a veth into
//!   nowhere, whose tx counter must not move), creates nothing and changes nothing.
//! - SIGINT, SIGTERM, SIGHUP and SIGPIPE at seeded random points of lab campaigns
//!   (`VTNT_SIGNAL_SEED` replays a run) stop `vtnt trace` and `vtnt tnt` within about a
//!   second, exit 128 + the signal, and leave at the path a file that vtnt-formats reads
//!   to the end (JSON with its cycle-stop line, warts with its cycle stop record, text),
//!   holding exactly the records the run says it finished, and no temporary file; two
//!   signals at once end the run at once, also without a temporary file.
//! - A tnt campaign stopped while its targets wait for their pings writes their initial
//!   traces, marked `"incomplete": true`.
//! - `-o` onto an existing file keeps its mode and owner; a file with two hard links is
//!   refused before any probe; stderr that cannot be written (a full device, a closed
//!   pipe, closed) never changes the exit status.
//! - Output into a pipe whose reader is gone (`vtnt lab truth | head`) ends the command
//!   quietly with 141, as SIGPIPE ends `cat`: no panic, no message.

mod lab_common;

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use vtnt_formats::{Item, JsonReader, WartsReader};
use vtnt_testkit::Rng;

/// A lab-range target: probing it is allowed, and in [`Isolated`] it leads into the veth.
const TARGET: &str = "203.0.113.10";

fn sh(args: &[&str]) -> Output {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("spawn");
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// A network namespace holding only `lo` and a veth pair `d0`/`d1` (this kernel has no
/// dummy device), `d0` carrying the route to 203.0.113.0/24 via a fixed neighbour: a probe sent from
/// it moves `d0`'s tx counter and ends at `d1`, which has no address and drops it.
struct Isolated {
    name: String,
}

impl Isolated {
    fn new(tag: &str) -> Isolated {
        let name = format!("vt-os-{tag}-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        sh(&["ip", "netns", "add", &name]);
        let ns = Isolated { name };
        // No IPv6: its neighbour discovery would send on d0 by itself.
        for key in ["all", "default"] {
            let set = format!("net.ipv6.conf.{key}.disable_ipv6=1");
            sh(&["ip", "netns", "exec", &ns.name, "sysctl", "-qw", &set]);
        }
        for cmd in [
            "link set lo up",
            "link add d0 type veth peer name d1",
            "addr add 10.254.0.2/24 dev d0",
            "link set d0 up",
            "link set d1 up",
            // A fixed neighbour: no ARP on d0, only what vtnt sends.
            "neigh add 10.254.0.1 lladdr 02:00:00:00:00:01 dev d0 nud permanent",
            // The lab range the tests probe, not a default route: the probing policy
            // sends lab-range probes only where a route other than the default leads.
            "route add 203.0.113.0/24 via 10.254.0.1",
        ] {
            let mut args = vec!["ip", "-n", &ns.name];
            args.extend(cmd.split(' '));
            sh(&args);
        }
        ns
    }

    fn tx_packets(&self) -> u64 {
        let o = sh(&[
            "ip",
            "netns",
            "exec",
            &self.name,
            "cat",
            "/sys/class/net/d0/statistics/tx_packets",
        ]);
        String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
    }

    /// A short trace to [`TARGET`] into `path`.
    fn trace_to(&self, path: &Path) -> Output {
        self.vtnt(&[
            "trace",
            "-q",
            "1",
            "-w",
            "0.1",
            "-m",
            "2",
            "-o",
            path_str(path),
            TARGET,
        ])
    }

    fn vtnt(&self, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.name, lab_common::VTNT])
            .args(args)
            .output()
            .expect("running vtnt")
    }
}

impl Drop for Isolated {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// A fresh empty directory under the system's temp dir.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vtnt-output-safety-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The names in a directory, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn refused_outputs_fail_before_any_probe_and_touch_nothing() {
    vtnt_testkit::require_root!("ip", "mkfifo", "mknod");
    let ns = Isolated::new("refuse");
    let dir = scratch("refuse");
    sh(&["mkfifo", path_str(&dir.join("fifo"))]);
    // A device node of our own (the numbers of /dev/null), never one under /dev.
    sh(&["mknod", path_str(&dir.join("null")), "c", "1", "3"]);
    std::os::unix::fs::symlink(dir.join("victim"), dir.join("link")).unwrap();
    std::fs::create_dir(dir.join("subdir")).unwrap();
    std::fs::create_dir(dir.join("side")).unwrap();
    let before = names(&dir);

    // Control: the same command with a good path probes, and the counter sees it.
    let good = dir.join("side/good.json");
    let tx0 = ns.tx_packets();
    let o = ns.trace_to(&good);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(ns.tx_packets() > tx0, "the control run sent nothing");
    std::fs::remove_file(&good).unwrap();

    let path = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let missing = path("nodir/out.json");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["trace".into(), "-o".into(), path("fifo")], "is a FIFO"),
        (
            vec!["trace".into(), "-o".into(), path("null")],
            "is a character device",
        ),
        (
            vec!["ping".into(), "-o".into(), path("link")],
            "is a symbolic link",
        ),
        (
            vec![
                "trace".into(),
                "-O".into(),
                "warts".into(),
                "-o".into(),
                path("subdir"),
            ],
            "is a directory",
        ),
        (vec!["trace".into(), "-o".into(), missing], "does not exist"),
        (vec!["tnt".into(), "-o".into(), path("fifo")], "is a FIFO"),
        (
            vec![
                "tnt".into(),
                "-O".into(),
                "warts".into(),
                "-o".into(),
                path("link"),
            ],
            "is a symbolic link",
        ),
    ];
    for (args, why) in cases {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        if all[0] != "ping" {
            all.extend(["-q", "1", "-w", "0.1"]);
        }
        all.push(TARGET);
        let tx0 = ns.tx_packets();
        let t0 = Instant::now();
        let o = ns.vtnt(&all);
        let took = t0.elapsed();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{all:?}: {err}");
        assert!(err.contains(why), "{all:?}: wanted `{why}` in: {err}");
        if let Some(p) = all.iter().position(|a| *a == "-o") {
            assert!(
                err.contains(all[p + 1]),
                "{all:?}: error does not name the path: {err}"
            );
        }
        assert!(o.stdout.is_empty(), "{all:?} printed results");
        assert_eq!(ns.tx_packets(), tx0, "{all:?} sent a probe");
        assert!(took < Duration::from_secs(2), "{all:?} took {took:?}");
        assert_eq!(names(&dir), before, "{all:?} created or removed something");
        assert!(names(&dir.join("subdir")).is_empty());
        assert!(names(&dir.join("side")).is_empty());
        assert!(!dir.join("victim").exists(), "{all:?} followed a link");
    }
    let kind = |n: &str| std::fs::symlink_metadata(dir.join(n)).unwrap().file_type();
    use std::os::unix::fs::FileTypeExt;
    assert!(kind("fifo").is_fifo());
    assert!(kind("null").is_char_device());
    assert!(kind("link").is_symlink());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failed_run_leaves_the_old_file_alone() {
    vtnt_testkit::require_root!();
    let dir = scratch("old");
    let out = dir.join("out.json");
    std::fs::write(&out, "old results\n").unwrap();
    // A public target is refused before any packet: the run fails with nothing to probe.
    let o = lab_common::vtnt(&["trace", "-o", path_str(&out), "192.0.0.1"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "old results\n");
    assert_eq!(names(&dir), ["out.json"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The exit status of a run a signal stopped: 128 + the signal.
fn signal_code(sig: &str) -> i32 {
    128 + match sig {
        "HUP" => 1,
        "INT" => 2,
        "PIPE" => 13,
        "TERM" => 15,
        _ => panic!("signal {sig}"),
    }
}

/// Uniform in `lo..hi` milliseconds.
fn millis(rng: &mut Rng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(lo + rng.below((hi - lo) as usize) as u64)
}

/// What an interrupted run wrote.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Json,
    Warts,
    Text,
}

/// Reads an output completely: the records in it. Panics on anything incomplete.
fn records(bytes: &[u8], kind: Kind) -> usize {
    let items: Vec<Item> = match kind {
        Kind::Json => JsonReader::new(BufReader::new(bytes))
            .map(|i| i.expect("a JSON line that does not parse"))
            .collect(),
        Kind::Warts => WartsReader::new(BufReader::new(bytes))
            .map(|i| i.expect("a warts record that does not parse"))
            .collect(),
        Kind::Text => {
            let text = String::from_utf8(bytes.to_vec()).unwrap();
            assert!(text.is_empty() || text.ends_with('\n'), "text cut short");
            return text.matches("traceroute from").count();
        }
    };
    assert!(
        matches!(items.first(), Some(Item::CycleStart(_))),
        "no cycle start"
    );
    assert!(
        matches!(items.last(), Some(Item::CycleStop(_))),
        "no cycle stop at the end"
    );
    items.iter().filter(|i| i.record().is_some()).count()
}

/// `N` of the run's `interrupted by SIG: N records written to ...` line.
fn written(stderr: &str, sig: &str) -> usize {
    let pre = format!("interrupted by {sig}: ");
    let line = stderr
        .lines()
        .find_map(|l| l.split_once(&pre).map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("no `{pre}` line in: {stderr}"));
    line.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn lab_signals_stop_runs_with_complete_output() {
    vtnt_testkit::require_root!("ip");
    let seed = vtnt_testkit::seed("VTNT_SIGNAL_SEED", || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let mut rng = Rng::new(seed);
    let lab = lab_common::Lab::up("outsig", None);
    let dsts = lab.destinations();
    let dir = scratch("signals");
    // (command, format, to a file?, signal): each a campaign of several seconds.
    let cases = [
        ("trace", Kind::Json, true, "INT"),
        ("trace", Kind::Warts, true, "TERM"),
        ("trace", Kind::Text, true, "INT"),
        ("trace", Kind::Json, false, "TERM"),
        ("tnt", Kind::Warts, true, "INT"),
        ("tnt", Kind::Json, true, "TERM"),
        ("trace", Kind::Json, true, "HUP"),
        ("tnt", Kind::Json, true, "HUP"),
        ("trace", Kind::Warts, true, "PIPE"),
        ("tnt", Kind::Json, true, "PIPE"),
    ];
    for (i, (cmd, kind, to_file, sig)) in cases.into_iter().enumerate() {
        let format = match kind {
            Kind::Json => "json",
            Kind::Warts => "warts",
            Kind::Text => "text",
        };
        let out = dir.join(format!("run{i}.{format}"));
        let mut args: Vec<String> = [cmd, "-q", "1", "-w", "1", "-O", format]
            .map(String::from)
            .to_vec();
        // Campaigns whose records finish one after another: traces from about 0.5 s to
        // 6 s after the start, TNT's from about 3 s to 10 s.
        let (pace, rounds, delay) = match cmd {
            "trace" => (
                ["--pps", "20", "--window", "2"],
                3,
                millis(&mut rng, 300, 4000),
            ),
            _ => (
                ["--pps", "50", "--window", "6"],
                2,
                millis(&mut rng, 1500, 8000),
            ),
        };
        args.extend(pace.map(String::from));
        if to_file {
            args.extend(["-o".to_string(), path_str(&out).to_string()]);
        }
        for _ in 0..rounds {
            args.extend(dsts.iter().cloned());
        }
        let child = Command::new("ip")
            .args(["netns", "exec", &lab.name, lab_common::VTNT])
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let signalled = Instant::now();
        sh(&["kill", &format!("-{sig}"), &child.id().to_string()]);
        let o = child.wait_with_output().unwrap();
        let stop = signalled.elapsed();
        let err = String::from_utf8_lossy(&o.stderr);
        let what = format!(
            "case {i} ({cmd} -O {format}, file {to_file}, SIG{sig} after {delay:?}, seed {seed})"
        );
        let code = signal_code(sig);
        assert_eq!(o.status.code(), Some(code), "{what}: {err}");
        assert!(
            stop < Duration::from_millis(1500),
            "{what}: stopped {stop:?} after the signal"
        );
        let n = written(&err, &format!("SIG{sig}"));
        let bytes = if to_file {
            assert!(o.stdout.is_empty(), "{what}: printed to stdout");
            std::fs::read(&out).unwrap_or_else(|e| panic!("{what}: {}: {e}", out.display()))
        } else {
            o.stdout.clone()
        };
        assert_eq!(records(&bytes, kind), n, "{what}: records in the output");
        println!("{what}: {n} records, stopped in {stop:?}");
    }
    let mut want: Vec<String> = cases
        .iter()
        .enumerate()
        .filter(|(_, c)| c.2)
        .map(|(i, c)| {
            format!(
                "run{i}.{}",
                match c.1 {
                    Kind::Json => "json",
                    Kind::Warts => "warts",
                    Kind::Text => "text",
                }
            )
        })
        .collect();
    want.sort();
    assert_eq!(
        names(&dir),
        want,
        "seed {seed}: temporary files left behind"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The names of a directory's files being written under a temporary name.
fn temporaries(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.contains(".tmp-"))
        .collect()
}

/// `vtnt ARGS` inside the lab `lab`, its stdout and stderr piped.
fn spawn_in(lab: &str, args: &[String]) -> std::process::Child {
    Command::new("ip")
        .args(["netns", "exec", lab, lab_common::VTNT])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn two_signals_at_once_end_a_run_at_once_and_leave_no_temporary_file() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    vtnt_testkit::require_root!("ip");
    let lab = lab_common::Lab::up("outtwo", None);
    let dir = scratch("two");
    let out = dir.join("out.json");
    let mut args: Vec<String> = ["trace", "-q", "1", "-w", "1", "--pps", "20", "-o"]
        .map(String::from)
        .to_vec();
    args.push(path_str(&out).to_string());
    args.extend(lab.destinations());
    for round in 0..3 {
        let child = spawn_in(&lab.name, &args);
        std::thread::sleep(Duration::from_millis(700 + 300 * round));
        let pid = Pid::from_raw(child.id() as i32);
        // two different signals, so that they cannot merge into one
        kill(pid, Signal::SIGINT).unwrap();
        kill(pid, Signal::SIGTERM).unwrap();
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            matches!(o.status.code(), Some(130 | 143)),
            "round {round}: {:?}: {err}",
            o.status
        );
        assert_eq!(temporaries(&dir), Vec::<String>::new(), "round {round}");
        if let Ok(bytes) = std::fs::read(&out) {
            records(&bytes, Kind::Json);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_tnt_campaign_stopped_early_keeps_its_finished_traces_marked_incomplete() {
    vtnt_testkit::require_root!("ip");
    let lab = lab_common::Lab::up("outinc", None);
    let dsts = lab.destinations();
    let dir = scratch("incomplete");
    let out = dir.join("tnt.json");
    // Each hop address is pinged 100 times, one a second: the targets' initial traces
    // are in after about a second, their pings last 100 s.
    let mut args: Vec<String> = [
        "tnt",
        "-q",
        "1",
        "-w",
        "0.5",
        "--pps",
        "200",
        "--ping-count",
        "100",
        "-o",
    ]
    .map(String::from)
    .to_vec();
    args.push(path_str(&out).to_string());
    args.extend(dsts.iter().take(3).cloned());
    let child = spawn_in(&lab.name, &args);
    std::thread::sleep(Duration::from_secs(6));
    sh(&["kill", "-INT", &child.id().to_string()]);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    let n = written(&err, "SIGINT");
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(records(&bytes, Kind::Json), n, "{err}");
    let traces: Vec<serde_json::Value> = String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v["type"] == "trace")
        .collect();
    assert_eq!(traces.len(), 3, "every target's initial trace: {err}");
    for t in &traces {
        assert_eq!(t["tnt"]["role"], "initial", "{t}");
        assert_eq!(t["tnt"]["incomplete"], true, "{t}");
        assert!(t["hops"].as_array().is_some_and(|h| !h.is_empty()), "{t}");
    }
    assert_eq!(names(&dir), ["tnt.json"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_existing_file_keeps_its_mode_and_owner_and_a_linked_one_is_refused() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    vtnt_testkit::require_root!("ip");
    let ns = Isolated::new("keep");
    let dir = scratch("keep");
    let out = dir.join("kept.json");
    std::fs::write(&out, "old\n").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(&out, Some(4242), Some(4343)).unwrap();
    let o = ns.trace_to(&out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = std::fs::metadata(&out).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o640);
    assert_eq!((m.uid(), m.gid()), (4242, 4343));
    records(&std::fs::read(&out).unwrap(), Kind::Json);

    // two names for one file: replacing one would leave the other with the old results
    let other = dir.join("other-name.json");
    std::fs::hard_link(&out, &other).unwrap();
    let before = std::fs::read(&out).unwrap();
    let tx0 = ns.tx_packets();
    let o = ns.trace_to(&out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("has 2 hard links"), "{err}");
    assert_eq!(ns.tx_packets(), tx0, "it probed before refusing");
    assert_eq!(std::fs::read(&out).unwrap(), before);
    assert_eq!(std::fs::metadata(&other).unwrap().ino(), m.ino());
    assert_eq!(names(&dir), ["kept.json", "other-name.json"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_whose_owner_cannot_be_kept_is_not_replaced() {
    use std::os::unix::fs::PermissionsExt;
    vtnt_testkit::require_root!("setpriv");
    let dir = scratch("owner");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let input = dir.join("in.json");
    std::fs::write(
        &input,
        "{\"type\":\"cycle-start\", \"list_name\":\"default\", \"id\":0, \"start_time\":1}\n",
    )
    .unwrap();
    let out = dir.join("root-owned.json");
    std::fs::write(&out, "old\n").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o666)).unwrap();
    // as nobody, who may write the file and the directory but not give a file to root
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(lab_common::VTNT)
        .args(["convert", path_str(&input), path_str(&out)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("belongs to user 0 and group 0"), "{err}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "old\n");
    assert_eq!(names(&dir), ["in.json", "root-owned.json"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stderr_that_cannot_be_written_never_changes_the_exit_status() {
    vtnt_testkit::require_root!("ip", "sh");
    let ns = Isolated::new("stderr");
    let dir = scratch("stderr");
    // 192.0.0.1 is refused (public) and reported on stderr: the run exits 2
    for (i, redirect) in ["2>/dev/full", "2>&-", "2>/dev/null"].iter().enumerate() {
        let out = dir.join(format!("out{i}.json"));
        let script = format!(
            "exec ip netns exec {} {} trace -q 1 -w 0.1 -m 2 -o {} {TARGET} 192.0.0.1 {redirect}",
            ns.name,
            lab_common::VTNT,
            path_str(&out)
        );
        let o = Command::new("sh").args(["-c", &script]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{redirect}: {:?}", o.status);
        assert_eq!(records(&std::fs::read(&out).unwrap(), Kind::Json), 1);
    }
    assert_eq!(temporaries(&dir), Vec::<String>::new());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    // the reader is gone before vtnt writes a byte: every write fails with EPIPE
    for args in [&["lab", "truth"][..], &["lab", "truth", "--json"][..]] {
        let mut child = Command::new(lab_common::VTNT)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "vtnt {args:?}: {stderr}");
        assert!(stderr.is_empty(), "vtnt {args:?} said: {stderr}");
    }
}
