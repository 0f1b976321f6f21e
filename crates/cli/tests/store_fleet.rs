//! `vtnt fleet store`: a tenant's results stream into the results store, against a real
//! broker (`vtnt fleet up`, Debian's nats-server). Results are published as an agent
//! publishes them (subject, `Nats-Msg-Id`, `Vtnt-Index`, `Vtnt-Node`, `Vtnt-Clock-Sync`
//! and the provenance headers) by a client of the test's own that speaks NATS's raw
//! protocol with the agents' key, so it can also publish what no agent would. The store
//! catches up after being down, stores nothing twice, skips and reports a message that
//! is no record, follows new results, and another tenant's key is refused.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod fleet_common;
#[path = "../../store/tests/common/mod.rs"]
mod store_common;

use fleet_common::{vtnt, Broker, Raw, VTNT};
use store_common::{Scratch, FIXTURE};

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
    // the records' provenance (docs/fleet.md): source, image, clock offset in ms
    assert_eq!(nodes[0]["public_addr"], "192.0.2.2", "{nodes}");
    assert_eq!(nodes[0]["image_sha256"], fleet_common::PROVENANCE_SHA256);
    assert_eq!(nodes[0]["clock_offset_ms"], -0.25);
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
