//! `vtnt serve` in a real browser: Debian's Chromium, headless, driven over its DevTools
//! protocol by the small client below (a websocket; nothing downloads a browser). A lab
//! campaign (`vtnt lab up`, `vtnt tnt --store`) fills a store; the browser logs in with a
//! tenant's token, loads every page, and the numbers each shows (`data-k` cells) equal the
//! store's own answers; screenshots are kept under `target/serve-screenshots/`. A live
//! test: a job summary an agent publishes on a real broker (`vtnt fleet up`) appears on
//! the fleet page within a second. And `vtnt serve` twice on one port fails clearly.

mod fleet_common;
mod lab_common;
#[path = "../../store/tests/common/mod.rs"]
mod store_common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};
use vtnt_store::query::Filter;
use vtnt_store::{Store, Tenant};

use fleet_common::{vtnt, Broker, Raw, VTNT};
use store_common::Scratch;

/// A child process killed (and reaped) on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

/// `vtnt serve ARGS` on a free port: the process and its base URL (its first line).
fn serve(args: &[&str]) -> (Proc, String) {
    let listen = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(VTNT)
        .args(["serve", "--listen", &listen])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("vtnt serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("http://"), "vtnt serve said {line:?}");
    (Proc(child), line.trim().trim_end_matches('/').to_string())
}

/// Headless Chromium and one page of it, spoken to over the DevTools protocol.
struct Browser {
    _proc: Proc,
    ws: tungstenite::WebSocket<TcpStream>,
    next: u64,
    _profile: Scratch,
}

impl Browser {
    fn start(tag: &str) -> Browser {
        let profile = Scratch::new(&format!("chromium-{tag}"));
        let port = free_port();
        let proc = Proc(
            Command::new("chromium")
                .args([
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--no-first-run",
                    "--disable-extensions",
                    "--disable-background-networking",
                    "--window-size=1280,900",
                    &format!("--remote-debugging-port={port}"),
                    &format!("--user-data-dir={}", profile.0.display()),
                    "about:blank",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("chromium"),
        );
        // its page's DevTools address, once it listens
        let deadline = Instant::now() + Duration::from_secs(30);
        let page = loop {
            if let Ok(list) = http_get(port, "/json/list") {
                let targets: Value = serde_json::from_str(&list).unwrap_or(Value::Null);
                let page = targets.as_array().and_then(|t| {
                    t.iter()
                        .find(|t| t["type"] == "page")
                        .and_then(|t| t["webSocketDebuggerUrl"].as_str().map(String::from))
                });
                if let Some(p) = page {
                    break p;
                }
            }
            assert!(
                Instant::now() < deadline,
                "chromium's DevTools did not come up"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let (ws, _) = tungstenite::client(page.as_str(), tcp).expect("DevTools websocket");
        Browser {
            _proc: proc,
            ws,
            next: 0,
            _profile: profile,
        }
    }

    /// One DevTools command: its result (events before it are skipped).
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let msg = json!({"id": id, "method": method, "params": params}).to_string();
        self.ws.send(tungstenite::Message::text(msg)).unwrap();
        loop {
            let m = self.ws.read().expect("DevTools");
            let Ok(text) = m.to_text() else { continue };
            let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// A JavaScript expression's value.
    fn eval(&mut self, js: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": js, "returnByValue": true}),
        );
        r["result"]["value"].clone()
    }

    /// Loads `url` and waits until it is complete.
    fn open(&mut self, url: &str) {
        self.call("Page.navigate", json!({ "url": url }));
        self.wait_for(&format!(
            "document.readyState == 'complete' && location.href.startsWith({:?})",
            url.split('?').next().unwrap()
        ));
    }

    /// Waits (10 s at most) until `js` is true.
    fn wait_for(&mut self, js: &str) -> Duration {
        let t0 = Instant::now();
        while self.eval(js) != json!(true) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{js}: not so after 10 s, on {}",
                self.eval("location.href + ' ' + document.body.innerText.slice(0, 300)")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        t0.elapsed()
    }

    /// The page's `data-k` numbers.
    fn numbers(&mut self) -> BTreeMap<String, String> {
        let v = self.eval(
            "JSON.stringify(Object.fromEntries([...document.querySelectorAll('[data-k]')]\
             .map(e => [e.dataset.k, e.textContent])))",
        );
        serde_json::from_str(v.as_str().unwrap()).unwrap()
    }

    /// Saves a screenshot as `name`.png under the artifacts directory.
    fn screenshot(&mut self, name: &str) {
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}));
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap();
        let dir = artifacts();
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join(format!("{name}.png"));
        std::fs::write(&f, png).unwrap();
        println!("screenshot: {}", f.display());
    }

    /// Logs in at `base` with `token` through the login form.
    fn login(&mut self, base: &str, token: &str) {
        self.open(&format!("{base}/login"));
        self.eval(&format!(
            "document.querySelector('input[name=token]').value = {token:?}; \
             document.forms[0].submit(); true"
        ));
        self.wait_for("document.readyState == 'complete' && location.pathname.startsWith('/t/')");
    }
}

/// Where the screenshots go: `target/serve-screenshots/`.
fn artifacts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/serve-screenshots")
}

/// GET `path` of 127.0.0.1:`port`: the body (of its Content-Length: DevTools' server
/// keeps the connection open).
fn http_get(port: u16, path: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut r = BufReader::new(s);
    let mut len = 0;
    loop {
        let mut line = String::new();
        r.read_line(&mut line)?;
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body)?;
    Ok(String::from_utf8_lossy(&body).to_string())
}

fn key_file(dir: &Scratch) -> String {
    let f = dir.arg("local.nk");
    std::fs::write(&f, nkeys::KeyPair::new_user().seed().unwrap()).unwrap();
    f
}

fn token(tenant: &str, key: &str) -> String {
    let o = vtnt(&["serve", "token", "--tenant", tenant, "--key", key]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn n(v: impl ToString) -> String {
    v.to_string()
}

#[test]
fn every_page_shows_the_stores_numbers() {
    vtnt_testkit::require_root!("ip");
    vtnt_testkit::require_tools!("chromium");
    let lab = lab_common::Lab::up("serve", None);
    let dir = Scratch::new("serve-pages");
    let db = dir.arg("results.sqlite");
    let mut args = vec![
        VTNT, "tnt", "--pps", "1000", "--seed", "1", "--quiet", "--store", &db,
    ];
    let targets = lab.destinations();
    args.extend(targets.iter().map(String::as_str));
    let o = lab.exec(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    drop(lab);

    let reports = dir.path("reports");
    std::fs::create_dir_all(&reports).unwrap();
    std::fs::write(
        reports.join("figures.md"),
        "# Figures\n\n| x | y |\n|---|---|\n| 1 | 2 |\n",
    )
    .unwrap();
    let key = key_file(&dir);
    let (_server, base) = serve(&[
        "--store",
        &db,
        "--tenant",
        "local",
        "--key",
        &key,
        "--reports",
        &reports.display().to_string(),
    ]);
    let store = Store::open_existing(Path::new(&db)).unwrap();
    let t = Tenant::local();
    let f = Filter::default();
    let mut b = Browser::start("pages");
    b.login(&base, &token("local", &key));

    // the fleet page: what the store holds
    b.open(&format!("{base}/t/local/"));
    let shown = b.numbers();
    for (k, v) in store.counts(&t).unwrap() {
        assert_eq!(shown[&k], n(v), "fleet page, {k}");
    }
    b.screenshot("fleet");

    // the campaigns and the campaign
    let runs = store.runs(&t).unwrap();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    b.open(&format!("{base}/t/local/campaigns"));
    let shown = b.numbers();
    assert_eq!(shown[&format!("traces-{}", run.key)], n(run.traces));
    assert_eq!(shown[&format!("jobs-{}", run.key)], n(run.jobs));
    b.screenshot("campaigns");
    let c = store.campaign(&t, &run.key).unwrap().unwrap();
    assert!(c.tunnels > 0 && c.lsrs_revealed > 0, "{c:?}");
    b.open(&format!("{base}/t/local/campaigns/{}", run.key));
    let shown = b.numbers();
    for (k, v) in [
        ("tunnels", c.tunnels),
        ("lsrs_revealed", c.lsrs_revealed),
        ("targets_done", c.targets_done),
        ("probes", c.probes),
        ("traces", run.traces),
    ] {
        assert_eq!(shown[k], n(v), "campaign page, {k}");
    }
    for (class, v) in &c.tunnels_per_class {
        assert_eq!(
            shown[&format!("class-{class}")],
            n(v),
            "campaign page, {class}"
        );
    }
    b.screenshot("campaign");

    // the questions
    for (name, answer) in [
        ("tunnels-per-as", store.tunnels_per_as(&t, &f).unwrap()),
        (
            "tunnels-per-vendor",
            store.tunnels_per_vendor(&t, &f).unwrap(),
        ),
        (
            "classes-per-vantage-point",
            store.classes_per_vantage_point(&t, &f).unwrap(),
        ),
    ] {
        b.open(&format!("{base}/t/local/questions/{name}"));
        let shown = b.numbers();
        assert!(!answer.is_empty(), "{name}");
        for row in &answer {
            let g = row.group.clone().unwrap_or_else(|| "(none)".into());
            assert_eq!(shown[&format!("tunnels-{g}")], n(row.tunnels), "{name} {g}");
            assert_eq!(
                shown[&format!("observations-{g}")],
                n(row.observations),
                "{name} {g}"
            );
        }
        b.screenshot(name);
    }
    b.open(&format!("{base}/t/local/questions/revealed-lsrs-per-as"));
    let shown = b.numbers();
    for row in store.revealed_lsrs_per_as(&t, &f).unwrap() {
        let g = row.asn.clone().unwrap_or_else(|| "(none)".into());
        assert_eq!(
            shown[&format!("lsrs-{g}")],
            n(row.lsrs),
            "revealed LSRs {g}"
        );
    }
    b.screenshot("revealed-lsrs-per-as");

    // the traces, and the path of one that crossed a tunnel with revealed LSRs
    let traces = store.traces(&t, &f).unwrap();
    b.open(&format!("{base}/t/local/traces"));
    assert_eq!(b.numbers()["shown"], n(traces.len().min(500)));
    b.screenshot("traces");
    let tunnel = store
        .tunnels(&t, &f)
        .unwrap()
        .into_iter()
        .find(|tu| tu.lsrs.iter().any(|l| l.revealed))
        .expect("a tunnel with revealed LSRs");
    let p = store.trace_path(&t, tunnel.trace).unwrap().unwrap();
    b.open(&format!("{base}/t/local/paths/{}", tunnel.trace));
    let rows = b.eval("document.querySelectorAll('#hops tbody tr').length");
    assert_eq!(rows, json!(p.hops.len()));
    let revealed: usize = p
        .tunnels
        .iter()
        .map(|tu| tu.lsrs.iter().filter(|l| l.revealed).count())
        .sum();
    let shown_revealed = b.eval(
        "[...document.querySelectorAll('#tunnels [data-k=revealed]')]\
         .reduce((s, e) => s + +e.textContent, 0)",
    );
    assert_eq!(shown_revealed, json!(revealed));
    assert_eq!(
        b.eval("document.querySelectorAll('#path-svg circle[stroke-dasharray]').length"),
        json!(revealed)
    );
    b.screenshot("path");

    // a report, and another tenant's page refused
    b.open(&format!("{base}/reports/figures.md"));
    assert_eq!(
        b.eval("document.querySelectorAll('main table').length"),
        json!(1)
    );
    b.screenshot("report");
    b.open(&format!("{base}/t/other/"));
    assert_eq!(
        b.eval("document.querySelector('[data-k=error]').textContent"),
        json!("tenant local may not see tenant other's data")
    );
}

#[test]
fn a_fleet_event_appears_on_the_page_within_a_second() {
    let test = vtnt_testkit::test_name!();
    if let Some(why) = vtnt_testkit::missing_root_or(&["nats-server", "chromium"]) {
        vtnt_testkit::skip_or_fail(test, &why, None);
        return;
    }
    let broker = Broker::up(&["t1"]);
    let dir = Scratch::new("serve-live");
    let db = dir.arg("results.sqlite");
    drop(Store::open(Path::new(&db)).unwrap());
    let (_server, base) = serve(&["--store", &db, "--fleet", &broker.name, "--tenant", "t1"]);
    let o = vtnt(&["serve", "token", "--tenant", "t1", "--fleet", &broker.name]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let token = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let mut b = Browser::start("live");
    b.login(&base, &token);
    b.open(&format!("{base}/t/t1/"));
    let mut agent = Raw::connect(&broker.url, &broker.key("agent"));
    // a first job until it shows: the server's consumer and the page's stream are up
    let t0 = Instant::now();
    let mut i = 0;
    loop {
        i += 1;
        agent.summary("t1", &format!("warm{i}"), 0);
        let seen = b.eval(&format!(
            "document.querySelector('#live tbody').innerText.includes('warm{i}')"
        ));
        if seen == json!(true) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no live event after 30 s"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    // then one timed
    agent.summary("t1", "timed-job", 0);
    let took = b.wait_for("document.querySelector('#live tbody').innerText.includes('timed-job')");
    println!("the event reached the page in {took:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    b.screenshot("fleet-live");
    // and the store filed it (the server's durable consumer)
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stored = Store::open_existing(Path::new(&db))
            .unwrap()
            .jobs(&Tenant::new("t1").unwrap(), 100)
            .unwrap();
        if stored
            .iter()
            .any(|j| j.job == "timed-job" && j.status.as_deref() == Some("ok"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the store did not file the job: {stored:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A node's heartbeat, raw, as its agent publishes it: down `deadline_ms` after it.
fn heartbeat(agent: &mut Raw, node: &str, deadline_ms: u64) {
    let info = json!({
        "node": node, "location": "fr", "slots": 2, "busy": 1, "runtimes": ["native"],
        "heartbeat_ms": 200, "deadline_ms": deadline_ms, "state": "up", "clock_sync": "yes",
        "jobs_done": 3, "jobs_failed": 0,
    });
    agent.hpub(
        &format!("vtnt.nodes.{node}"),
        &[],
        info.to_string().as_bytes(),
    );
    agent.flush();
}

#[test]
fn a_new_node_appears_on_the_page_within_a_second_and_a_silent_one_turns_down() {
    let test = vtnt_testkit::test_name!();
    if let Some(why) = vtnt_testkit::missing_root_or(&["nats-server", "chromium"]) {
        vtnt_testkit::skip_or_fail(test, &why, None);
        return;
    }
    let broker = Broker::up(&["t1"]);
    let dir = Scratch::new("serve-nodes");
    let db = dir.arg("results.sqlite");
    drop(Store::open(Path::new(&db)).unwrap());
    let (_server, base) = serve(&["--store", &db, "--fleet", &broker.name, "--tenant", "t1"]);
    let o = vtnt(&["serve", "token", "--tenant", "t1", "--fleet", &broker.name]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let token = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let mut b = Browser::start("nodes");
    b.login(&base, &token);
    b.open(&format!("{base}/t/t1/"));
    let mut agent = Raw::connect(&broker.url, &broker.key("agent"));
    let state = |b: &mut Browser, node: &str| {
        b.eval(&format!(
            "(document.querySelector('[data-k=\"state-{node}\"]')||{{}}).textContent||''"
        ))
    };
    // a first node until it shows: the server's subscription and the page's stream are up
    let t0 = Instant::now();
    while state(&mut b, "warm") != json!("up") {
        heartbeat(&mut agent, "warm", 60_000);
        assert!(t0.elapsed() < Duration::from_secs(30), "no node after 30 s");
        std::thread::sleep(Duration::from_millis(300));
    }
    // then a new node, timed, which falls silent
    heartbeat(&mut agent, "new1", 1500);
    let took =
        b.wait_for("(document.querySelector('[data-k=\"state-new1\"]')||{}).textContent=='up'");
    println!("the new node reached the page in {took:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(b.numbers().get("slots-new1").map(String::as_str), Some("2"));
    b.screenshot("fleet-nodes");
    let silent = Instant::now();
    b.wait_for("(document.querySelector('[data-k=\"state-new1\"]')||{}).textContent=='down'");
    let down = silent.elapsed();
    println!("the silent node turned down after {down:?} (deadline 1.5 s)");
    assert!(
        down > Duration::from_millis(1000),
        "down too soon: {down:?}"
    );
    assert_eq!(state(&mut b, "warm"), json!("up"));
}

#[test]
fn serve_twice_on_one_port_fails_clearly() {
    let dir = Scratch::new("serve-twice");
    let db = dir.arg("results.sqlite");
    drop(Store::open(Path::new(&db)).unwrap());
    let (_first, base) = serve(&["--store", &db]);
    let listen = base.trim_start_matches("http://");
    let o = vtnt(&["serve", "--listen", listen, "--store", &db]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("listening on {listen}: the address is taken")),
        "{err}"
    );
    let o = vtnt(&["serve", "--listen", "0.0.0.0:0", "--store", &db]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("give --public"));
}

#[test]
fn the_page_benchmark_runs_at_a_small_size() {
    let dir = Scratch::new("serve-bench");
    let o = vtnt(&[
        "bench",
        "serve",
        "--targets",
        "200",
        "--destinations",
        "16",
        "--repeats",
        "1",
        "--json",
        "--dir",
        &dir.arg("b"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let pages = r["report"]["pages"]["pages"].as_array().unwrap();
    // every kind of page, each answered 200 (the benchmark fails on anything else)
    assert_eq!(pages.len(), 12, "{pages:?}");
    for kind in [
        "/campaigns/",
        "/paths/",
        "/diff?",
        "/questions/revealed-lsrs-per-as",
    ] {
        assert!(
            pages
                .iter()
                .any(|p| p["page"].as_str().unwrap().contains(kind)),
            "{kind}"
        );
    }
    assert!(r["report"]["pages"]["traces"].as_u64().unwrap() >= 400);
}
