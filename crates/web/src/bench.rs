//! `vtnt bench serve`: every page's load time against a store (the command builds one of
//! `--targets` targets with `vtnt bench store`'s campaign first). The server runs in this
//! process on a loopback port, serving the store's tenant with a throwaway key; each page
//! (its HTML, the whole answer read by a raw HTTP client) is fetched `repeats` times, and
//! its median and slowest times are reported, the slowest page last.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::io;
use crate::{Error, Result};
use serde::Serialize;
use vtnt_store::query::Filter;
use vtnt_store::{Store, Tenant};

use crate::auth::{make_token, TenantKey};
use crate::{Config, Limits};

/// One page's times.
#[derive(Debug, Clone, Serialize)]
pub struct PageTime {
    pub page: String,
    pub bytes: usize,
    pub median_ms: f64,
    pub max_ms: f64,
}

/// What `vtnt bench serve` measured.
#[derive(Debug, Clone, Serialize)]
pub struct PageTimes {
    pub tenant: String,
    pub traces: u64,
    pub repeats: usize,
    pub pages: Vec<PageTime>,
}

impl PageTimes {
    /// As docs/benchmarks.md quotes it.
    pub fn to_markdown(&self) -> String {
        let mut s = format!(
            "Pages of `vtnt serve` over a store of {} traces (tenant {}), {} loads each\n\n\
             | page | bytes | median | slowest |\n|---|---:|---:|---:|\n",
            self.traces, self.tenant, self.repeats
        );
        for p in &self.pages {
            s.push_str(&format!(
                "| `{}` | {} | {:.1} ms | {:.1} ms |\n",
                p.page, p.bytes, p.median_ms, p.max_ms
            ));
        }
        if let Some(p) = self
            .pages
            .iter()
            .max_by(|a, b| a.max_ms.total_cmp(&b.max_ms))
        {
            s.push_str(&format!(
                "\nSlowest page: `{}` ({:.1} ms)\n",
                p.page, p.max_ms
            ));
        }
        s
    }
}

/// The pages of `tenant` in `store`: every kind, with a run, a trace and two runs to
/// compare taken from the store.
fn pages(store: &Store, t: &Tenant) -> Result<Vec<String>> {
    let runs = store.runs(t)?;
    let base = format!("/t/{t}");
    let mut p: Vec<String> = ["/", "/campaigns", "/traces", "/questions"]
        .iter()
        .map(|x| format!("{base}{x}"))
        .collect();
    for (q, _) in crate::views::QUESTIONS {
        p.push(format!("{base}/questions/{q}"));
    }
    if let Some(r) = runs.first() {
        p.push(format!("{base}/campaigns/{}", r.key));
    }
    if let [b, a, ..] = &runs[..] {
        p.push(format!("{base}/diff?a={}&b={}", a.key, b.key));
    }
    if let Some(tr) = store.traces_limited(t, &Filter::default(), 1)?.first() {
        p.push(format!("{base}/paths/{}", tr.id));
        p.push(format!("{base}/traces?target={}", tr.dst));
    }
    Ok(p)
}

fn fetch(addr: SocketAddr, path: &str, token: &str) -> std::io::Result<(u16, usize)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(120)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let text = String::from_utf8_lossy(&out);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, out.len()))
}

/// Serves `db` and times each page of `tenant` `repeats` times.
pub fn page_times(db: &Path, tenant: &Tenant, repeats: usize) -> Result<PageTimes> {
    if repeats < 1 {
        return Err(Error::Invalid("--repeats must be at least 1".into()));
    }
    let store = Store::open_existing(db)?;
    let paths = pages(&store, tenant)?;
    let traces = store.counts(tenant)?.get("traces").copied().unwrap_or(0);
    drop(store);
    let dir = std::env::temp_dir().join(format!("vtnt-bench-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
    let key = dir.join("bench.nk");
    let seed = nkeys::KeyPair::new_user()
        .seed()
        .map_err(|e| Error::Key(format!("a throwaway key: {e}")))?;
    std::fs::write(&key, seed).map_err(io(format!("writing {}", key.display())))?;
    let keyed = TenantKey::from_file(tenant.as_str(), &key);
    let token = make_token(tenant.as_str(), &key, 3600);
    let _ = std::fs::remove_dir_all(&dir);
    let config = Config {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        public: false,
        store: db.to_path_buf(),
        reports: None,
        tenants: vec![keyed?],
        fleet: None,
        limits: Limits {
            query_time: Duration::from_secs(600),
            ..Limits::default()
        },
    };
    let token = token?;
    let bound = crate::server::Bound::bind(config)?;
    let addr = bound.local_addr();
    // (the server lives as long as this process: the command ends with the report)
    std::thread::spawn(move || crate::serve(bound));
    let mut out = Vec::new();
    for path in paths {
        let mut times = Vec::new();
        let mut bytes = 0;
        for _ in 0..repeats {
            let t0 = Instant::now();
            let (status, n) = fetch(addr, &path, &token).map_err(io(path.clone()))?;
            times.push(t0.elapsed().as_secs_f64() * 1e3);
            if status != 200 {
                return Err(Error::Http { path, status });
            }
            bytes = n;
        }
        times.sort_by(f64::total_cmp);
        out.push(PageTime {
            page: path,
            bytes,
            median_ms: times[times.len() / 2],
            max_ms: times[times.len() - 1],
        });
    }
    out.sort_by(|a, b| a.max_ms.total_cmp(&b.max_ms));
    Ok(PageTimes {
        tenant: tenant.to_string(),
        traces,
        repeats,
        pages: out,
    })
}
