//! `vtnt fleet store`: a tenant's results stream into the results store, against a real
//! broker (`vtnt fleet up`, Debian's nats-server). Results are published as an agent
//! publishes them (subject, `Nats-Msg-Id`, `Vtnt-Index`, `Vtnt-Node` and
//! `Vtnt-Clock-Sync` headers) by a client of the test's own that speaks NATS's raw
//! protocol with the agents' key, so it can also publish what no agent would. The store
//! catches up after being down, stores nothing twice, skips and reports a message that
//! is no record, follows new results, and another tenant's key is refused.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const VTNT: &str = env!("CARGO_BIN_EXE_vtnt");
#[path = "../../store/tests/common/mod.rs"]
mod store_common;

use store_common::{Scratch, FIXTURE};

fn vtnt(args: &[&str]) -> Output {
    Command::new(VTNT)
        .args(args)
        .output()
        .expect("running vtnt")
}

/// A broker of the test's own, down (and its state removed) on drop.
struct Broker {
    name: String,
    url: String,
}

impl Broker {
    fn up(tenants: &[&str]) -> Broker {
        let name = format!("tstore{}", std::process::id());
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port()
            .to_string();
        let mut args = vec!["fleet", "up", "--name", &name, "--port", &port];
        for t in tenants {
            args.extend(["--tenant", t]);
        }
        let out = vtnt(&args);
        assert!(
            out.status.success(),
            "fleet up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Broker { name, url }
    }

    fn key(&self, role: &str) -> String {
        format!("/run/vtnt/fleet/{}/keys/{role}.nk", self.name)
    }

    /// `vtnt fleet store --fleet NAME ARGS`.
    fn store(&self, args: &[&str]) -> Output {
        let mut a = vec!["fleet", "store", "--fleet", &self.name];
        a.extend_from_slice(args);
        vtnt(&a)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = vtnt(&["fleet", "down", "--name", &self.name]);
    }
}

/// base64url without padding (what NATS takes for an nkey signature).
fn base64url(data: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = c.iter().fold(0u32, |n, b| n << 8 | u32::from(*b)) << (8 * (3 - c.len()));
        for i in 0..=c.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// A NATS connection speaking the raw protocol.
struct Raw {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Raw {
    /// Connects to `url` (`nats://127.0.0.1:PORT`) with the nkey seed in `key`.
    fn connect(url: &str, key: &str) -> Raw {
        let addr = url.trim_start_matches("nats://");
        let w = TcpStream::connect(addr).expect("the broker");
        w.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut r = BufReader::new(w.try_clone().unwrap());
        let mut info = String::new();
        r.read_line(&mut info).unwrap();
        let info: Value = serde_json::from_str(info.trim_start_matches("INFO ")).unwrap();
        let seed = std::fs::read_to_string(key).unwrap();
        let kp = nkeys::KeyPair::from_seed(seed.trim()).unwrap();
        let sig = kp.sign(info["nonce"].as_str().unwrap().as_bytes()).unwrap();
        let connect = serde_json::json!({
            "verbose": false, "pedantic": false, "headers": true, "protocol": 1,
            "nkey": kp.public_key(), "sig": base64url(&sig),
        });
        let mut raw = Raw { w, r };
        raw.send(format!("CONNECT {connect}\r\n").as_bytes());
        raw.flush();
        raw
    }

    fn send(&mut self, b: &[u8]) {
        self.w.write_all(b).unwrap();
    }

    /// PING, and wait for the PONG: everything before it was taken (an `-ERR` fails).
    fn flush(&mut self) {
        self.send(b"PING\r\n");
        loop {
            let mut l = String::new();
            self.r.read_line(&mut l).unwrap();
            assert!(!l.starts_with("-ERR"), "the broker refused: {l}");
            if l.starts_with("PONG") {
                return;
            }
        }
    }

    /// Publishes `payload` on `subject` with `headers`.
    fn hpub(&mut self, subject: &str, headers: &[(&str, &str)], payload: &[u8]) {
        let mut h = String::from("NATS/1.0\r\n");
        for (k, v) in headers {
            h.push_str(&format!("{k}: {v}\r\n"));
        }
        h.push_str("\r\n");
        let head = format!("HPUB {subject} {} {}\r\n", h.len(), h.len() + payload.len());
        self.send(head.as_bytes());
        self.send(h.as_bytes());
        self.send(payload);
        self.send(b"\r\n");
    }

    /// The records of `job` as its agent publishes them, message ids `<id_prefix>.<i>`.
    fn records(&mut self, tenant: &str, job: &str, id_prefix: &str, records: &[String]) {
        for (i, rec) in records.iter().enumerate() {
            let (id, index) = (format!("{id_prefix}.{i}"), i.to_string());
            self.hpub(
                &format!("vtnt.results.{tenant}.{job}.r"),
                &[
                    ("Nats-Msg-Id", &id),
                    ("Vtnt-Index", &index),
                    ("Vtnt-Node", "node-1"),
                    ("Vtnt-Clock-Sync", "yes"),
                ],
                rec.as_bytes(),
            );
        }
        self.flush();
    }

    /// The job's summary.
    fn summary(&mut self, tenant: &str, job: &str, records: usize) {
        let s = serde_json::json!({
            "job": job, "tenant": tenant, "node": "node-1", "location": "fr",
            "runtime": "native", "status": "ok", "code": 0, "records": records,
            "delivery": 1, "clock_sync": "yes",
            "timings": {"queue_ms": 1.0, "deploy_ms": 2.0, "exec_ms": 3.0, "cleanup_ms": 0.5, "total_ms": 6.5},
        });
        self.hpub(
            &format!("vtnt.results.{tenant}.{job}.s"),
            &[("Nats-Msg-Id", &format!("{job}.s"))],
            s.to_string().as_bytes(),
        );
        self.flush();
    }
}

fn stdout_json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: exit {:?}, {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// The fixture's traces and pings, one JSON line each.
fn fixture() -> Vec<String> {
    std::fs::read_to_string(FIXTURE)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("\"type\":\"cycle-"))
        .map(String::from)
        .collect()
}

#[test]
fn a_fleets_results_reach_the_store_once_after_any_downtime() {
    let test = vtnt_testkit::test_name!();
    if let Some(why) = vtnt_testkit::missing_root_or(&["nats-server"]) {
        vtnt_testkit::skip_or_fail(test, &why, None);
        return;
    }
    let broker = Broker::up(&["t1", "t2"]);
    let dir = Scratch::new("fleet");
    let db = dir.arg("results.sqlite");
    let st = ["--tenant", "t1", "--store", &db, "--json"];

    // before any result: nothing to do
    let r = stdout_json(&broker.store(&st));
    assert_eq!(r["messages"], 0);
    // (the tenant's results stream, as `vtnt fleet results` finds or makes it)
    let o = vtnt(&[
        "fleet",
        "results",
        "--fleet",
        &broker.name,
        "--tenant",
        "t1",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let recs = fixture();
    let (first, rest) = recs.split_at(30);
    let mut agent = Raw::connect(&broker.url, &broker.key("agent"));
    agent.records("t1", "j1", "j1", first);
    agent.summary("t1", "j1", first.len());
    let r = stdout_json(&broker.store(&st));
    assert_eq!(r["messages"], 31, "{r}");
    assert_eq!(r["summaries"], 1);
    let stored = |r: &Value| {
        r["stored"]["traces"].as_u64().unwrap() + r["stored"]["pings"].as_u64().unwrap()
    };
    assert_eq!(stored(&r), 30);

    // while the store is down: j1 again (the same ids: the server drops them; new ids, as
    // a job delivered again after the deduplication window: the store drops them), j2,
    // and a message that is no record
    agent.records("t1", "j1", "j1", first);
    agent.records("t1", "j1", "j1-late", first);
    agent.records("t1", "j2", "j2", rest);
    agent.hpub(
        "vtnt.results.t1.j3.r",
        &[("Vtnt-Index", "0")],
        b"{\"type\":\"trace\", oops",
    );
    agent.flush();
    let o = broker.store(&st);
    assert_eq!(o.status.code(), Some(2), "a skipped message: exit 2");
    let r = stdout_json(&o);
    assert_eq!(r["messages"], 30 + rest.len() + 1, "{r}");
    assert_eq!(stored(&r), rest.len() as u64, "only j2 is new: {r}");
    assert_eq!(r["stored"]["known"], 30);
    let rejected = r["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 1);
    assert!(
        rejected[0]
            .as_str()
            .unwrap()
            .contains("vtnt.results.t1.j3.r"),
        "{r}"
    );
    // up to date: nothing more
    assert_eq!(stdout_json(&broker.store(&st))["messages"], 0);

    // what the store holds: every record once, under its job, with its node
    let q = |what: &str| {
        let o = vtnt(&["query", what, "--store", &db, "--tenant", "t1", "--json"]);
        stdout_json(&o)
    };
    let runs = q("runs");
    let total: u64 = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["traces"].as_u64().unwrap() + r["pings"].as_u64().unwrap())
        .sum();
    assert_eq!(total, recs.len() as u64, "{runs}");
    let nodes = q("nodes");
    assert_eq!(nodes[0]["name"], "node-1");
    assert_eq!(nodes[0]["location"], "fr");
    assert_eq!(nodes[0]["clock_sync"], "yes");
    let o = vtnt(&[
        "export", "--store", &db, "--tenant", "t1", "--table", "jobs",
    ]);
    let jobs = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        jobs.lines()
            .any(|l| l.contains(",j1,") && l.contains(",ok,")),
        "{jobs}"
    );

    // following: a result published later lands without another command
    let mut follow = Command::new(VTNT)
        .args(["fleet", "store", "--fleet", &broker.name, "--follow"])
        .args(&st[..4])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let later: Vec<String> = first
        .iter()
        .map(|l| l.replacen("\"usec\":", "\"usec\":1", 1))
        .collect();
    agent.records("t1", "j4", "j4", &later);
    let t0 = Instant::now();
    let landed = loop {
        let runs = q("runs");
        if runs
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["key"] == "j4" && r["traces"].as_u64() > Some(0))
        {
            break true;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = follow.kill();
    let _ = follow.wait();
    assert!(landed, "j4 never reached the store");

    // t2's key asking for t1's results: the broker refuses
    let o = broker.store(&[
        "--tenant",
        "t1",
        "--store",
        &db,
        "--nkey",
        &broker.key("tenant-t2"),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("Permissions Violation") || err.contains("refused"),
        "{err}"
    );
}
