//! The results store through the real command line: a TNT campaign in a real lab
//! (`vtnt lab up`, `vtnt tnt` through its TUN front) files its records in the store as it
//! writes them, and every question's answer equals the lab's truth (`vtnt lab truth
//! --json`, compared by `vtnt_bench::store_truth`); the default store never costs a
//! measurement; imports are whole or nothing, and tenants are kept apart.

mod lab_common;
#[path = "../../store/tests/common/mod.rs"]
mod store_common;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use vtnt_store::{Store, Tenant};

use store_common::{Scratch, FIXTURE};

/// `vtnt ARGS` with `VTNT_STORE` set to `store` (`None`: unset).
fn vtnt_with(store: Option<&str>, args: &[&str]) -> Output {
    let mut c = Command::new(lab_common::VTNT);
    c.args(args);
    match store {
        Some(s) => c.env("VTNT_STORE", s),
        None => c.env_remove("VTNT_STORE"),
    };
    c.output().expect("running vtnt")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_str(&ok(o)).expect("JSON")
}

#[test]
fn a_lab_campaign_filed_as_it_runs_answers_as_the_truth() {
    vtnt_testkit::require_root!("ip");
    let lab = lab_common::Lab::up("store", None);
    let s = Scratch::new("lab");
    let db = s.arg("results.sqlite");
    let out = s.arg("tnt.json");
    let targets = lab.destinations();
    let mut args = vec![
        lab_common::VTNT,
        "tnt",
        "--pps",
        "1000",
        "--seed",
        "1",
        "--quiet",
        "--store",
        &db,
        "-o",
        &out,
    ];
    args.extend(targets.iter().map(String::as_str));
    ok(&lab.exec(&args));

    // the store holds what the output holds: importing the output stores nothing new
    let again = json(&vtnt_with(
        None,
        &["import", "--store", &db, "--json", &out],
    ));
    let written = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"type\":\"trace\"") || l.contains("\"type\":\"ping\""))
        .count();
    assert_eq!(again["stored"]["traces"], 0, "{again}");
    assert_eq!(again["stored"]["known"], written, "{again}");

    // the truth, and ASes for its routers
    let truth = lab.truth();
    let pfx2as = s.path("pfx2as");
    std::fs::write(&pfx2as, vtnt_bench::store_truth::pfx2as_for(&truth)).unwrap();
    let pfx = pfx2as.display().to_string();
    ok(&vtnt_with(
        None,
        &["import", "--store", &db, "--pfx2as", &pfx],
    ));
    let store = Store::open_existing(Path::new(&db)).unwrap();
    let local = Tenant::local();
    let d = vtnt_bench::store_truth::compare(&store, &local, &truth).unwrap();
    assert!(d.is_empty(), "{d:#?}");

    // the command line gives the library's answers, and the run its provenance
    let vendors = json(&vtnt_with(
        None,
        &["query", "tunnels-per-vendor", "--store", &db, "--json"],
    ));
    let lib = store
        .tunnels_per_vendor(&local, &vtnt_store::query::Filter::default())
        .unwrap();
    assert_eq!(vendors, serde_json::to_value(&lib).unwrap());
    let runs = json(&vtnt_with(
        None,
        &["query", "runs", "--store", &db, "--json"],
    ));
    let cli_run = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["source"] == "cli")
        .expect("the tnt run");
    assert!(
        cli_run["command"].as_str().unwrap().contains(" tnt "),
        "{cli_run}"
    );
    let traces = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"type\":\"trace\""))
        .count();
    assert_eq!(cli_run["traces"], traces, "{cli_run}");
    let nodes = json(&vtnt_with(
        None,
        &["query", "nodes", "--store", &db, "--json"],
    ));
    assert_eq!(nodes.as_array().unwrap().len(), 1, "{nodes}");
}

#[test]
fn the_default_store_never_costs_the_measurement() {
    vtnt_testkit::require_root!("ip");
    let lab = lab_common::Lab::up("stdef", None);
    let s = Scratch::new("default");
    let db = s.arg("default.sqlite");
    let trace = |store: Option<&str>, extra: &[&str]| {
        let mut a = vec![
            "lab",
            "exec",
            "--name",
            &lab.name,
            "--",
            lab_common::VTNT,
            "trace",
            "-q",
            "1",
            "--quiet",
            "203.0.113.10",
        ];
        a.extend_from_slice(extra);
        vtnt_with(store, &a)
    };
    // VTNT_STORE names the default store: a run files its trace there unasked
    let o = trace(Some(&db), &[]);
    assert!(ok(&o).contains("\"type\":\"trace\""));
    let traces = json(&vtnt_with(Some(&db), &["query", "traces", "--json"]));
    assert_eq!(traces.as_array().unwrap().len(), 1, "{traces}");
    // --no-store and VTNT_STORE=off file nothing
    ok(&trace(Some(&db), &["--no-store"]));
    ok(&trace(Some("off"), &[]));
    let traces = json(&vtnt_with(Some(&db), &["query", "traces", "--json"]));
    assert_eq!(traces.as_array().unwrap().len(), 1);
    // a default store that cannot be opened: a warning, the trace all the same, exit 0
    let bad = s.path("a-directory");
    std::fs::create_dir_all(&bad).unwrap();
    let o = trace(Some(&bad.display().to_string()), &[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("warning: results store") && stderr.contains("not stored"),
        "{stderr}"
    );
    assert!(
        ok(&o).contains("\"type\":\"trace\""),
        "the measurement is kept"
    );
    // the same store named with --store: an error before any probe
    let o = trace(None, &["--store", &bad.display().to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty(), "nothing measured");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--store"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn imports_are_whole_or_nothing_and_tenants_apart() {
    let s = Scratch::new("import");
    let db = s.arg("r.sqlite");
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[12] = "{\"type\":\"trace\", \"version\":";
    let bad = s.path("bad.json");
    std::fs::write(&bad, lines.join("\n")).unwrap();
    let bad = bad.display().to_string();
    // the good file goes in, the corrupt one not at all, and the command says where
    let o = vtnt_with(
        None,
        &["import", "--store", &db, "--tenant", "alice", FIXTURE, &bad],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{bad}, line 13: ")), "{err}");
    let runs = json(&vtnt_with(
        None,
        &[
            "query", "runs", "--store", &db, "--tenant", "alice", "--json",
        ],
    ));
    assert_eq!(
        runs.as_array().unwrap().len(),
        1,
        "the good file's run only: {runs}"
    );
    // bob asks for alice's data: he gets none of it, whatever he names
    for q in [
        &["query", "runs"][..],
        &[
            "query",
            "tunnels",
            "--run",
            runs[0]["key"].as_str().unwrap(),
        ],
        &["query", "tunnels-per-as"],
        &["query", "revealed-lsrs-per-as"],
    ] {
        let mut a = q.to_vec();
        a.extend(["--store", &db, "--tenant", "bob", "--json"]);
        assert_eq!(
            json(&vtnt_with(None, &a)),
            Value::Array(Vec::new()),
            "{q:?}"
        );
    }
    let key = runs[0]["key"].as_str().unwrap();
    let o = vtnt_with(
        None,
        &["query", "diff", key, key, "--store", &db, "--tenant", "bob"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no run"));
    let o = vtnt_with(
        None,
        &[
            "export", "--table", "hops", "--store", &db, "--tenant", "bob",
        ],
    );
    assert_eq!(ok(&o).lines().count(), 1, "bob's hops: the header only");
    let o = vtnt_with(
        None,
        &[
            "export", "--table", "hops", "--store", &db, "--tenant", "alice",
        ],
    );
    assert!(ok(&o).lines().count() > 100);
    let o = vtnt_with(None, &["query", "runs", "--store", &db, "--tenant", "a.b"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("tenant `a.b`"));
}
