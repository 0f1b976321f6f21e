//! `vtnt serve`'s server in process against a store of two tenants filled from the
//! campaign fixture, spoken to in raw HTTP over a TcpStream: every JSON answer equals
//! the store's own, a tenant is refused another's data (403) and a request without a
//! good token (401), and hostile clients (oversized heads, a slowloris, too many event
//! streams, path traversal, bad parameters, oversized bodies) get a clear 4xx while the
//! server goes on serving.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use vtnt_store::import::{import_file, ImportOptions};
use vtnt_store::query::Filter;
use vtnt_store::{Store, Tenant};
use vtnt_web::auth::{make_token, TenantKey};
use vtnt_web::{Config, Limits};

#[path = "../../store/tests/common/mod.rs"]
mod store_common;
use store_common::{Scratch, FIXTURE};

struct Server {
    addr: SocketAddr,
    token_a: String,
    store: std::path::PathBuf,
    _dir: Scratch,
}

fn key(dir: &Path, name: &str) -> std::path::PathBuf {
    let f = dir.join(name);
    std::fs::write(&f, nkeys::KeyPair::new_user().seed().unwrap()).unwrap();
    f
}

/// A server of tenants `a` and `b` (each the fixture as run `camp`), a report directory.
fn server(tag: &str) -> Server {
    server_with(tag, Duration::from_secs(1))
}

/// [`server`] with a header time of `header_time`.
fn server_with(tag: &str, header_time: Duration) -> Server {
    let dir = Scratch::new(&format!("web-{tag}"));
    let store = dir.path("s.sqlite");
    let mut s = Store::open(&store).unwrap();
    for t in ["a", "b"] {
        let o = ImportOptions {
            tenant: Tenant::new(t).unwrap(),
            node: None,
            run: Some("camp".into()),
        };
        import_file(&mut s, Path::new(FIXTURE), &o).unwrap();
    }
    drop(s);
    std::fs::create_dir_all(dir.path("reports/plots")).unwrap();
    std::fs::write(
        dir.path("reports/report.md"),
        "# Report\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
    )
    .unwrap();
    std::fs::write(dir.path("reports/plots/p.svg"), "<svg/>").unwrap();
    let (ka, kb) = (key(&dir.0, "a.nk"), key(&dir.0, "b.nk"));
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        public: false,
        store: store.clone(),
        reports: Some(dir.path("reports")),
        tenants: vec![
            TenantKey::from_file("a", &ka).unwrap(),
            TenantKey::from_file("b", &kb).unwrap(),
        ],
        fleet: None,
        limits: Limits {
            header_time,
            streams_per_client: 3,
            ..Limits::default()
        },
    };
    let bound = vtnt_web::server::Bound::bind(config).unwrap();
    let addr = bound.local_addr();
    std::thread::spawn(move || vtnt_web::serve(bound));
    Server {
        addr,
        token_a: make_token("a", &ka, 600).unwrap(),
        store,
        _dir: dir,
    }
}

/// Sends `raw` and reads the answer to its end: status and body.
fn raw(addr: SocketAddr, raw: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(raw).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |b| b.1).to_string();
    (status, body)
}

fn get(srv: &Server, path: &str, token: Option<&str>) -> (u16, String) {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n");
    raw(srv.addr, req.as_bytes())
}

fn json(srv: &Server, path: &str) -> Value {
    let (status, body) = get(srv, path, Some(&srv.token_a));
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

#[test]
fn json_answers_equal_the_stores() {
    let srv = server("json");
    let s = Store::open_existing(&srv.store).unwrap();
    let a = Tenant::new("a").unwrap();
    let f = Filter::default();
    let v = |x: &dyn erased::Ser| x.value();
    assert_eq!(json(&srv, "/api/t/a/campaigns"), v(&s.runs(&a).unwrap()));
    assert_eq!(
        json(&srv, "/api/t/a/campaigns/camp"),
        v(&s.campaign(&a, "camp").unwrap().unwrap())
    );
    for (name, want) in [
        ("tunnels-per-as", v(&s.tunnels_per_as(&a, &f).unwrap())),
        (
            "tunnels-per-vendor",
            v(&s.tunnels_per_vendor(&a, &f).unwrap()),
        ),
        (
            "classes-per-vantage-point",
            v(&s.classes_per_vantage_point(&a, &f).unwrap()),
        ),
        (
            "revealed-lsrs-per-as",
            v(&s.revealed_lsrs_per_as(&a, &f).unwrap()),
        ),
    ] {
        assert_eq!(
            json(&srv, &format!("/api/t/a/questions/{name}"))["answer"],
            want,
            "{name}"
        );
    }
    let traces = s.traces(&a, &f).unwrap();
    assert_eq!(json(&srv, "/api/t/a/traces")["traces"], v(&traces));
    let one = traces[0].id;
    assert_eq!(
        json(&srv, &format!("/api/t/a/paths/{one}")),
        v(&s.trace_path(&a, one).unwrap().unwrap())
    );
    let fleet = json(&srv, "/api/t/a/fleet");
    assert_eq!(fleet["counts"], v(&s.counts(&a).unwrap()));
    assert_eq!(fleet["nodes"], Value::Null);
    assert_eq!(json(&srv, "/api/t/a/diff?a=camp&b=camp")["unchanged"], 7);
    // a filter narrows the answer as the store's does
    let f = Filter {
        vendor: Some("juniper".into()),
        ..Filter::default()
    };
    assert_eq!(
        json(&srv, "/api/t/a/questions/tunnels-per-as?vendor=juniper")["answer"],
        v(&s.tunnels_per_as(&a, &f).unwrap())
    );
    // and pages show what their JSON says
    let (status, page) = get(&srv, "/t/a/campaigns/camp", Some(&srv.token_a));
    assert_eq!(status, 200);
    let tunnels = json(&srv, "/api/t/a/campaigns/camp")["tunnels"].to_string();
    assert!(
        page.contains(&format!("data-k=\"tunnels\">{tunnels}<")),
        "{page}"
    );
    // the report directory: listing, markdown as a page, a plot as it is
    assert_eq!(
        json(&srv, "/api/reports")["files"],
        serde_json::json!(["plots/p.svg", "report.md"])
    );
    let (status, md) = get(&srv, "/reports/report.md", Some(&srv.token_a));
    assert_eq!(status, 200);
    assert!(md.contains("<table>"), "{md}");
}

/// serde_json values of the store's answers, whatever their type.
mod erased {
    pub trait Ser {
        fn value(&self) -> serde_json::Value;
    }
    impl<T: serde::Serialize> Ser for T {
        fn value(&self) -> serde_json::Value {
            serde_json::to_value(self).unwrap()
        }
    }
}

#[test]
fn tenants_see_only_their_own_data() {
    let srv = server("auth");
    for path in [
        "/api/t/b/campaigns",
        "/t/b/campaigns",
        "/api/t/b/questions/tunnels-per-as",
        "/api/t/b/paths/1",
        "/t/b/events",
        "/api/t/b/fleet",
    ] {
        let (status, body) = get(&srv, path, Some(&srv.token_a));
        assert_eq!(status, 403, "{path}: {body}");
        assert!(body.contains("tenant a may not see tenant b"), "{body}");
    }
    let (status, body) = get(&srv, "/api/t/a/campaigns", None);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("no token"), "{body}");
    let forged = srv.token_a.replacen(".a.", ".b.", 1);
    let (status, body) = get(&srv, "/api/t/b/campaigns", Some(&forged));
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("signature does not match"), "{body}");
    // the cookie the login form sets carries the token too
    let req = format!(
        "GET /api/whoami HTTP/1.1\r\nHost: x\r\nCookie: x=1; vtnt_token={}\r\nConnection: close\r\n\r\n",
        srv.token_a
    );
    let (status, body) = raw(srv.addr, req.as_bytes());
    assert_eq!((status, body.as_str()), (200, r#"{"tenant":"a"}"#));
    let form = format!("token={}", srv.token_a);
    let req = format!(
        "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
        form.len()
    );
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 303"), "{out}");
    assert!(out.contains("set-cookie: vtnt_token="), "{out}");
}

#[test]
fn hostile_clients_get_4xx_and_the_server_stays_up() {
    let srv = server("hostile");
    let t = srv.token_a.clone();
    let bad = |path: &str, want: u16, says: &str| {
        let (status, body) = get(&srv, path, Some(&t));
        assert_eq!(status, want, "{path}: {body}");
        assert!(body.contains(says), "{path}: {body}");
    };
    bad("/api/t/a/traces?class=visible", 400, "invisible-php");
    bad("/api/t/a/traces?target=not-an-address", 400, "target");
    bad("/api/t/a/traces?tenant=b", 400, "unknown field");
    bad("/api/t/a/traces?since_us=soon", 400, "since_us");
    bad(
        "/api/t/a/questions/tunnels-per-as?vendor=huawei",
        400,
        "junos-e",
    );
    bad("/api/t/a/questions/who-knows", 404, "one of tunnels-per-as");
    bad("/api/t/a/paths/abc", 400, "its number");
    bad("/api/t/a/paths/999999", 404, "nothing there");
    bad("/api/t/a/campaigns/nope", 404, "nothing there");
    bad("/api/t/a/diff?a=camp", 400, "?a=RUN&b=RUN");
    bad("/api/t/a/diff?a=camp&b=nope", 400, "nope");
    bad("/nowhere", 404, "no such page");
    // path traversal, however spelt
    bad(
        "/reports/..%2F..%2F..%2Fetc%2Fpasswd",
        400,
        "not a plain path",
    );
    bad("/reports/%2e%2e/%2e%2e/etc/passwd", 400, "not a plain path");
    bad(
        "/reports/plots/%2e%2e/%2e%2e/s.sqlite",
        400,
        "not a plain path",
    );
    bad("/reports/.hidden", 400, "not a plain path");
    bad("/reports/missing.md", 404, "no such file");
    let (status, _) = raw(
        srv.addr,
        b"GET /reports/../../etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!((400..500).contains(&status), "{status}");
    // an oversized head
    let big = format!(
        "GET /api/whoami HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\nConnection: close\r\n\r\n",
        "a".repeat(64 << 10)
    );
    let (status, _) = raw(srv.addr, big.as_bytes());
    assert_eq!(status, 431);
    // an oversized body
    let body = "token=".to_string() + &"a".repeat(64 << 10);
    let req = format!(
        "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (status, _) = raw(srv.addr, req.as_bytes());
    assert_eq!(status, 413);
    // not HTTP at all
    let (status, _) = raw(srv.addr, b"\x16\x03\x01\x00\xff garbage\r\n\r\n");
    assert_eq!(status, 400);
    // a slowloris: half a head, then nothing; the server hangs up after its header time
    let mut slow = TcpStream::connect(srv.addr).unwrap();
    slow.write_all(b"GET /api/whoami HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let t0 = Instant::now();
    let mut out = Vec::new();
    let _ = slow.read_to_end(&mut out);
    assert!(
        t0.elapsed() < Duration::from_secs(8),
        "held for {:?}",
        t0.elapsed()
    );
    let text = String::from_utf8_lossy(&out);
    assert!(out.is_empty() || text.starts_with("HTTP/1.1 408"), "{text}");
    // event streams: three per client, the fourth refused
    let open = |n: usize| {
        (0..n)
            .map(|_| {
                let mut s = TcpStream::connect(srv.addr).unwrap();
                let req = format!(
                    "GET /t/a/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {t}\r\n\r\n"
                );
                s.write_all(req.as_bytes()).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut head = [0u8; 12];
                s.read_exact(&mut head).unwrap();
                (String::from_utf8_lossy(&head).to_string(), s)
            })
            .collect::<Vec<_>>()
    };
    let streams = open(3);
    assert!(
        streams.iter().all(|s| s.0 == "HTTP/1.1 200"),
        "{:?}",
        streams.iter().map(|s| &s.0).collect::<Vec<_>>()
    );
    let (status, body) = get(&srv, "/t/a/events", Some(&t));
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("3 event streams open"), "{body}");
    drop(streams);
    // closed streams free their places
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let again = open(1);
        if again[0].0 == "HTTP/1.1 200" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the streams' places were not freed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // and the server still serves
    let (status, body) = get(&srv, "/api/whoami", Some(&t));
    assert_eq!((status, body.as_str()), (200, r#"{"tenant":"a"}"#));
}

/// Idle keep-alive connections: a raw client that got its answer and then says nothing
/// is hung up on after the header time (hyper's header timer also runs while a
/// connection waits for its next request), and one address holds at most
/// `connections_per_client` (32) connections, idle or not: the ones past it are closed
/// at once, and a connection opened after the idle ones went is served.
#[test]
fn idle_keep_alive_connections_are_bounded() {
    // (a header time of 3 s leaves a busy host time to accept 40 connections)
    let srv = server_with("idle", Duration::from_secs(3));
    let req = format!(
        "GET /api/whoami HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
        srv.token_a
    );
    let mut idle = TcpStream::connect(srv.addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let t0 = Instant::now();
    idle.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = idle.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        t0.elapsed() < Duration::from_secs(8),
        "an idle keep-alive connection held for {:?}",
        t0.elapsed()
    );
    // 40 connections that send nothing: 32 held (until the header time), 8 closed at once
    let conns: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(srv.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let closed = conns
        .iter()
        .filter(|s| {
            s.set_nonblocking(true).unwrap();
            let mut b = [0u8; 1];
            matches!((&**s).read(&mut b), Ok(0))
        })
        .count();
    assert_eq!(closed, 8, "connections past the per-client bound");
    // once the idle ones are hung up on, the client is served again
    std::thread::sleep(Duration::from_secs(4));
    let (status, _) = raw(
        srv.addr,
        req.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!(status, 200);
}

#[test]
fn a_taken_port_and_a_public_address_without_keys_are_errors() {
    let srv = server("twice");
    let config = |listen: SocketAddr| Config {
        listen,
        public: false,
        store: srv.store.clone(),
        reports: None,
        tenants: Vec::new(),
        fleet: None,
        limits: Limits::default(),
    };
    let e = vtnt_web::server::Bound::bind(config(srv.addr))
        .err()
        .unwrap();
    assert!(format!("{e:#}").contains("the address is taken"), "{e:#}");
    let e = vtnt_web::server::Bound::bind(config("0.0.0.0:0".parse().unwrap()))
        .err()
        .unwrap();
    assert!(format!("{e:#}").contains("--public"), "{e:#}");
    let e = vtnt_web::server::Bound::bind(Config {
        public: true,
        ..config("0.0.0.0:0".parse().unwrap())
    })
    .err()
    .unwrap();
    assert!(format!("{e:#}").contains("tenants' keys"), "{e:#}");
}
