//! `vtnt daemon` against clients of our own over the raw sockets: a driver of today's
//! control protocol ([`Ctrl`], written from scamper(1)'s ATTACH MODE section and
//! scamper 20260420's scamper_control.c and libscamperctrl.c: synchronous and
//! asynchronous tasks, several in flight, `halt`, `done`, each task's result in the
//! `DATA LEN id-N` block that ends it); clients that flood commands and never read
//! (unix-domain and TCP), which must not grow the daemon's threads or memory and are
//! dropped while others are served; and a client with 1,500 pings queued, which must not
//! hold up another's three. The daemon runs in the test's own namespace and probes
//! 127.0.0.1 only. Needs root; skips through vtnt-testkit otherwise.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

mod daemon_common;

use daemon_common::{Daemon, Scratch};

const TARGET: &str = "127.0.0.1";

/// One response of the daemon.
#[derive(Debug)]
enum Resp {
    Ok(String),
    More,
    Err(String),
    Data(Option<u32>, Value),
}

/// A client of today's protocol: `attach format json`, then commands answered `OK
/// id-N`, and each task's result in the `DATA LEN id-N` block that ends it (objects of no
/// task, the cycle's, come untagged).
struct Ctrl {
    r: BufReader<Box<dyn Read + Send>>,
    w: Box<dyn Write + Send>,
    /// The tagged object of each finished task.
    done: BTreeMap<u32, Value>,
    /// Untagged objects (the cycle's, and a tnt task's records before its last).
    loose: Vec<Value>,
    mores: usize,
}

impl Ctrl {
    fn unix(path: &Path) -> Ctrl {
        let s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Ctrl::over(Box::new(s.try_clone().unwrap()), Box::new(s))
    }

    fn tcp(at: &str) -> Ctrl {
        let s = TcpStream::connect(at).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Ctrl::over(Box::new(s.try_clone().unwrap()), Box::new(s))
    }

    fn over(r: Box<dyn Read + Send>, w: Box<dyn Write + Send>) -> Ctrl {
        let mut c = Ctrl {
            r: BufReader::new(r),
            w,
            done: BTreeMap::new(),
            loose: Vec::new(),
            mores: 0,
        };
        c.send("attach format json");
        assert!(matches!(c.next(), Some(Resp::Ok(s)) if s.is_empty()));
        c
    }

    fn send(&mut self, line: &str) {
        self.w.write_all(format!("{line}\n").as_bytes()).unwrap();
    }

    /// The next response (`None` at the end of the connection); `DATA` blocks are
    /// checked against their length, MOREs counted.
    fn next(&mut self) -> Option<Resp> {
        let mut line = String::new();
        if self.r.read_line(&mut line).unwrap() == 0 {
            return None;
        }
        let line = line.strip_suffix('\n').expect("a whole line");
        assert!(!line.is_empty(), "libscamperctrl refuses empty lines");
        let resp = if line == "MORE" {
            self.mores += 1;
            Resp::More
        } else if let Some(rest) = line.strip_prefix("DATA ") {
            let mut words = rest.split(' ');
            let len: usize = words.next().unwrap().parse().unwrap();
            let id = words.next().map(|w| {
                w.strip_prefix("id-")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("bad tag in {line}"))
            });
            assert_eq!(words.next(), None, "{line}");
            let mut body = vec![0u8; len];
            self.r.read_exact(&mut body).unwrap();
            assert_eq!(body.last(), Some(&b'\n'), "the length counts the newline");
            Resp::Data(id, serde_json::from_slice(&body).unwrap())
        } else if let Some(e) = line.strip_prefix("ERR") {
            Resp::Err(e.trim().to_string())
        } else if let Some(ok) = line.strip_prefix("OK") {
            Resp::Ok(ok.trim().to_string())
        } else {
            panic!("unknown response {line:?}")
        };
        Some(resp)
    }

    /// Reads until an `OK ...`/`ERR ...`, keeping what else comes (results, MOREs).
    fn answer(&mut self) -> Resp {
        loop {
            match self.next().expect("the daemon closed") {
                Resp::Data(id, v) => self.keep(id, v),
                Resp::More => {}
                r => return r,
            }
        }
    }

    fn keep(&mut self, id: Option<u32>, v: Value) {
        match id {
            Some(id) => assert!(self.done.insert(id, v).is_none(), "id-{id} tagged twice"),
            None => self.loose.push(v),
        }
    }

    /// Sends a command; its task id.
    fn task(&mut self, cmd: &str) -> u32 {
        self.send(cmd);
        self.ids(1)[0]
    }

    /// The ids of the next `n` commands sent.
    fn ids(&mut self, n: usize) -> Vec<u32> {
        (0..n)
            .map(|_| match self.answer() {
                Resp::Ok(ok) => ok.strip_prefix("id-").unwrap().parse().unwrap(),
                other => panic!("a command refused: {other:?}"),
            })
            .collect()
    }

    /// Waits for task `id`'s result.
    fn wait(&mut self, id: u32) -> Value {
        while !self.done.contains_key(&id) {
            match self.next().expect("the daemon closed") {
                Resp::Data(i, v) => self.keep(i, v),
                Resp::More => {}
                other => panic!("waiting for id-{id}: {other:?}"),
            }
        }
        self.done[&id].clone()
    }

    /// `done`: `OK`, the last results, the cycle stop, the end.
    fn done(mut self) -> Ctrl {
        self.send("done");
        assert!(matches!(self.answer(), Resp::Ok(s) if s.is_empty()));
        while let Some(r) = self.next() {
            match r {
                Resp::Data(id, v) => self.keep(id, v),
                Resp::More => panic!("MORE after done"),
                other => panic!("after done: {other:?}"),
            }
        }
        assert_eq!(
            self.loose.last().map(|v| v["type"].clone()),
            Some("cycle-stop".into())
        );
        self
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn listening(port: u16) -> impl Fn() -> bool {
    move || TcpStream::connect(("127.0.0.1", port)).is_ok()
}

#[test]
fn a_driver_of_today_s_protocol_runs_to_the_end() {
    vtnt_testkit::require_root!();
    let dir = Scratch::new("vtnt-daemon-ctrl");
    let sock = dir.path("ctl.sock");
    let port = free_port();
    let at = format!("127.0.0.1:{port}");
    let sock_s = sock.to_str().unwrap();
    // scamper's `-P ADDR:PORT`
    let daemon = Daemon::start_here(&["-U", sock_s, "-P", &at, "-p", "200"], || sock.exists());
    let mut c = Ctrl::unix(&sock);
    assert_eq!(c.mores, 0);
    // synchronous: one task, then its result
    let id = c.task(&format!("ping -c 1 {TARGET}"));
    assert_eq!(id, 1);
    let ping = c.wait(id);
    assert_eq!(
        (ping["type"].as_str(), ping["dst"].as_str()),
        (Some("ping"), Some(TARGET))
    );
    // asynchronous: three in flight before any result, then the results as they come
    c.send(&format!("ping -c 3 -i 0.2 {TARGET}"));
    c.send(&format!("trace -q 1 -w 1 {TARGET}"));
    c.send(&format!("tnt -q 1 -w 1 {TARGET}"));
    let ids = c.ids(3);
    assert_eq!(ids, [2, 3, 4]);
    let kinds: Vec<Value> = ids.iter().map(|&i| c.wait(i)["type"].clone()).collect();
    assert_eq!(
        kinds,
        ["ping", "trace", "ping"],
        "tnt's last record is one of its pings"
    );
    assert_eq!(c.done[&2]["ping_sent"], 3);
    assert!(c.done[&4]["tnt"].is_object(), "{}", c.done[&4]);
    // tnt's first records (its trace) came untagged, before the tagged last one
    assert!(
        c.loose
            .iter()
            .any(|v| v["type"] == "trace" && v["tnt"].is_object()),
        "{:?}",
        c.loose
    );
    // halt a long ping (its result comes, as far as it got); then an id that is no task's
    let long = c.task(&format!("ping -c 30 -i 0.5 {TARGET}"));
    std::thread::sleep(Duration::from_millis(300));
    c.send(&format!("halt {long}"));
    assert!(matches!(c.answer(), Resp::Ok(s) if s == format!("halted {long}")));
    c.send("halt 99");
    assert!(matches!(c.answer(), Resp::Err(e) if e == "no task id-99"));
    assert!(c.mores >= 3, "MORE once nothing waits: {}", c.mores);
    let c = c.done();
    // a halted task's result is what it measured until then, tagged, as scamper's
    let halted = &c.done[&long];
    assert_eq!(halted["type"], "ping", "{halted}");
    let sent = halted["ping_sent"].as_u64().unwrap();
    assert!((1..30).contains(&sent), "{halted}");
    assert_eq!(c.loose[0]["type"], "cycle-start");

    // over TCP too, synchronously
    let mut t = Ctrl::tcp(&at);
    let id = t.task(&format!("trace -q 1 -w 1 {TARGET}"));
    assert_eq!(t.wait(id)["stop_reason"], "COMPLETED");
    let t = t.done();
    assert!(t.loose[0]["list_name"]
        .as_str()
        .unwrap()
        .starts_with("127.0.0.1:"));
    assert!(daemon.stop().status.success());
}

/// Floods `ping` commands at the daemon without ever reading, until writing fails
/// (dropped) or `for_` passes; returns whether it was dropped and the lines it sent.
fn flood(mut w: impl Write, for_: Duration) -> (bool, usize) {
    let line = format!("ping -c 1 {TARGET}\n");
    let t0 = Instant::now();
    let mut sent = 0;
    if w.write_all(b"attach\n").is_err() {
        return (true, 0);
    }
    let mut left = line.as_bytes();
    while t0.elapsed() < for_ {
        match w.write(left) {
            Ok(n) if n == left.len() => {
                sent += 1;
                left = line.as_bytes();
            }
            Ok(n) => left = &left[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(_) => return (true, sent),
        }
    }
    (false, sent)
}

/// The `Threads` and `VmRSS` (KiB) of process `pid`.
fn threads_and_rss(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("Threads:"), field("VmRSS:"))
}

#[test]
fn clients_that_flood_and_never_read_are_bounded_then_dropped() {
    vtnt_testkit::require_root!();
    const WINDOW: u64 = 8;
    let dir = Scratch::new("vtnt-daemon-flood");
    let sock = dir.path("ctl.sock");
    let port = free_port();
    let at = format!("127.0.0.1:{port}");
    let daemon = Daemon::start_here(
        &[
            "-U",
            sock.to_str().unwrap(),
            "-P",
            &at,
            "-p",
            "500",
            "--window",
            &WINDOW.to_string(),
            "--client-buffer",
            "65536",
            "--stall-timeout",
            "2",
            "--max-clients",
            "4",
        ],
        listening(port),
    );
    let pid = daemon.pid();
    // (a flood lasts until it is dropped: the daemon first fills the kernel's buffers,
    // some MB over loopback TCP, then its own, then waits --stall-timeout)
    let flood_for = Duration::from_secs(40);
    let u = UnixStream::connect(&sock).unwrap();
    u.set_nonblocking(true).unwrap();
    let t = TcpStream::connect(&at).unwrap();
    t.set_nonblocking(true).unwrap();
    let floods = [
        std::thread::spawn(move || flood(u, flood_for)),
        std::thread::spawn(move || flood(t, flood_for)),
    ];
    let (mut threads, mut rss) = (0, 0);
    while floods.iter().any(|f| !f.is_finished()) {
        let (th, r) = threads_and_rss(pid);
        (threads, rss) = (threads.max(th), rss.max(r));
        std::thread::sleep(Duration::from_millis(100));
    }
    let floods: Vec<(bool, usize)> = floods.map(|f| f.join().unwrap()).into();
    assert!(
        threads <= WINDOW + 4,
        "{threads} threads with a window of {WINDOW}"
    );
    assert!(rss < 100 * 1024, "{rss} KiB resident");
    for (dropped, sent) in &floods {
        assert!(*sent > 100, "{floods:?}");
        assert!(*dropped, "a client that never reads is dropped: {floods:?}");
    }
    // the daemon serves on: --max-clients idle clients, one more told so, and a client
    // that reads gets its ping
    let idle: Vec<UnixStream> = (0..4)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut extra = UnixStream::connect(&sock).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut said = String::new();
    extra.read_to_string(&mut said).unwrap();
    assert!(
        said.starts_with("ERR too many clients: 4 connected"),
        "{said}"
    );
    drop(idle);
    std::thread::sleep(Duration::from_millis(300));
    let mut c = Ctrl::unix(&sock);
    let id = c.task(&format!("ping -c 1 {TARGET}"));
    assert_eq!(c.wait(id)["type"], "ping");
    c.done();
    let out = daemon.stop();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("took none of its output").count(), 2, "{err}");
    assert!(out.status.success(), "{err}");
}

/// Client B's three pings through a fresh connection; how long until all three ended.
fn three_pings(sock: &Path) -> Duration {
    let t0 = Instant::now();
    let mut c = Ctrl::unix(sock);
    for _ in 0..3 {
        c.send(&format!("ping -c 3 -i 0.2 {TARGET}"));
    }
    let ids = c.ids(3);
    for id in ids {
        let p = c.wait(id);
        assert_eq!(p["ping_sent"], 3, "{p}");
    }
    let took = t0.elapsed();
    c.done();
    took
}

#[test]
fn a_client_with_1500_pings_queued_does_not_hold_up_another() {
    vtnt_testkit::require_root!();
    let dir = Scratch::new("vtnt-daemon-fair");
    let sock = dir.path("ctl.sock");
    let daemon = Daemon::start_here(
        &[
            "-U",
            sock.to_str().unwrap(),
            "-p",
            "200",
            "--window",
            "1000",
        ],
        || sock.exists(),
    );
    let alone = three_pings(&sock);
    // A: 1,500 pings of two probes at once (it reads everything it gets)
    let a = UnixStream::connect(&sock).unwrap();
    let mut aw = a.try_clone().unwrap();
    let (all_in, accepted) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut r = BufReader::new(a);
        let mut oks = 0;
        let mut line = String::new();
        while r.read_line(&mut line).unwrap_or(0) > 0 {
            oks += usize::from(line.starts_with("OK id-"));
            if oks == 1500 && line.starts_with("OK id-") {
                let _ = all_in.send(());
            }
            line.clear();
        }
        oks
    });
    let mut cmds = String::from("attach\n");
    for _ in 0..1500 {
        cmds.push_str(&format!("ping -c 2 -i 0.5 {TARGET}\n"));
    }
    aw.write_all(cmds.as_bytes()).unwrap();
    accepted
        .recv_timeout(Duration::from_secs(60))
        .expect("A's 1,500 pings accepted");
    let loaded = three_pings(&sock);
    aw.shutdown(std::net::Shutdown::Both).unwrap();
    assert_eq!(reader.join().unwrap(), 1500);
    eprintln!("three pings: {alone:?} alone, {loaded:?} beside 1,500 queued");
    assert!(
        loaded <= alone * 2 + Duration::from_millis(500),
        "three pings took {loaded:?} beside 1,500 others, {alone:?} alone"
    );
    assert!(daemon.stop().status.success());
}
