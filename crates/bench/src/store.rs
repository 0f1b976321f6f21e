//! `store`: the results store at campaign scale (`vtnt bench store`). A TNT campaign over
//! a generated topology runs in process (virtual clock); its records are then replicated
//! into a campaign of `targets` targets: block `k` of the topology's destinations is the
//! same traces towards fresh addresses (10.0.0.0/8, one per target), `k` campaign-lengths
//! later, with the destinations' pings; the routers' pings and the revelation traces are
//! the first block's only, as one campaign pings each router once. So the store holds
//! `targets` initial traces with their TNT annotations over the topology's routers.
//!
//! Measured, as `vtnt import` does it (the library call, one transaction per file): the
//! campaign imported into a fresh store (a prefix-to-AS file loaded first, one synthetic
//! AS per /24 of the routers' addresses), then the same campaign again later (a second
//! run, so the campaign diff has two campaigns to compare); the database's size on disk
//! after each; and every question's time over the whole store.

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use vtnt_formats::{Cycle, Record, TntFields};
use vtnt_lab::{generate, GenOptions, Lab, Truth};
use vtnt_store::query::Filter;
use vtnt_store::{import, Store, Tenant};
use vtnt_tnt::TntConfig;

use crate::drive::run_tnt;

/// The tenant the campaigns are filed under.
pub const TENANT: &str = "bench";

/// What to measure.
#[derive(Debug, Clone, Serialize)]
pub struct StoreBenchOptions {
    /// Targets of the campaign.
    pub targets: usize,
    /// Destinations of the generated topology (a block of the campaign).
    pub destinations: usize,
    pub seed: u64,
    /// Where the campaign files (removed once imported) and the store (kept) go.
    pub dir: PathBuf,
}

/// One question and its time.
#[derive(Debug, Clone, Serialize)]
pub struct QueryTime {
    pub question: String,
    pub rows: usize,
    pub ms: f64,
}

/// One campaign imported.
#[derive(Debug, Clone, Serialize)]
pub struct ImportTime {
    pub run: String,
    pub json_bytes: u64,
    pub records: u64,
    /// Wall-clock seconds, and this process's CPU seconds (user and system) meanwhile:
    /// on a busy host the second says what the import itself took.
    pub secs: f64,
    pub cpu_secs: f64,
    /// The database file after the import (its write-ahead log checkpointed into it).
    pub db_bytes: u64,
}

/// What `vtnt bench store` prints.
#[derive(Debug, Clone, Serialize)]
pub struct StoreBenchReport {
    pub options: StoreBenchOptions,
    /// The base campaign: destinations, records, tunnels TNT found.
    pub base_records: usize,
    pub base_tunnels: usize,
    pub imports: Vec<ImportTime>,
    pub queries: Vec<QueryTime>,
    pub db: String,
}

impl StoreBenchReport {
    /// The report as docs/benchmarks.md quotes it.
    pub fn to_markdown(&self) -> String {
        let o = &self.options;
        let mut s = format!(
            "Results store: {} targets (blocks of {} destinations of generated topology seed {}; \
             base campaign {} records, {} tunnels); store {}\n\n\
             | import | JSON | records | time (CPU) | records/s | database after |\n|---|---:|---:|---:|---:|---:|\n",
            o.targets, o.destinations, o.seed, self.base_records, self.base_tunnels, self.db
        );
        for i in &self.imports {
            s.push_str(&format!(
                "| {} | {:.1} MB | {} | {:.1} s ({:.1} s) | {:.0} | {:.1} MB ({:.0} B per target) |\n",
                i.run,
                i.json_bytes as f64 / 1e6,
                i.records,
                i.secs,
                i.cpu_secs,
                i.records as f64 / i.secs.max(1e-9),
                i.db_bytes as f64 / 1e6,
                i.db_bytes as f64 / o.targets.max(1) as f64,
            ));
        }
        s.push_str("\n| question (whole store) | rows | time |\n|---|---:|---:|\n");
        for q in &self.queries {
            s.push_str(&format!(
                "| {} | {} | {:.1} ms |\n",
                q.question, q.rows, q.ms
            ));
        }
        if let Some(q) = self.queries.iter().max_by(|a, b| a.ms.total_cmp(&b.ms)) {
            s.push_str(&format!("\nSlowest: {} ({:.1} ms)\n", q.question, q.ms));
        }
        s
    }
}

/// A campaign's records with their `"tnt"` fields, in the order `vtnt tnt` writes them.
pub type Records = Vec<(Record, Option<TntFields>)>;

/// TNT from the first vantage point of `lab` towards every destination of its truth.
pub fn campaign(lab: &mut Lab, truth: &Truth, seed: u64) -> anyhow::Result<Records> {
    let targets: Vec<IpAddr> = truth.destinations.iter().map(|d| d.dst.into()).collect();
    let run = run_tnt(lab, &targets, TntConfig::default(), seed)
        .map_err(|e| anyhow::anyhow!("the lab campaign: {e}"))?;
    let mut out = Vec::new();
    for r in &run.results {
        vtnt_formats::tnt_records(r, |rec, ann| {
            out.push((rec.clone(), TntFields::from_annotate(rec, ann)));
        });
    }
    Ok(out)
}

/// A prefix-to-AS text for a truth: one AS per /24 holding router addresses.
pub fn pfx2as_of(truth: &Truth) -> String {
    let nets: BTreeSet<u32> = truth
        .routers
        .iter()
        .flat_map(|r| &r.addresses)
        .map(|a| u32::from(*a) & 0xffff_ff00)
        .collect();
    nets.iter()
        .enumerate()
        .map(|(i, n)| format!("{}\t24\t{}\n", Ipv4Addr::from(*n), 64_512 + i))
        .collect()
}

/// Block `k` of the campaign: `records` with the first `take` destinations of `dsts` (the
/// one at index `j` moved to 10.0.0.0 + k * |dsts| + j), `shift` later; block 0 also
/// keeps the records towards routers (their pings, the revelation traces).
fn block(records: &Records, dsts: &[IpAddr], take: usize, k: usize, shift: Duration) -> Records {
    let fresh = |j: usize| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (k * dsts.len() + j) as u32));
    let index: HashMap<IpAddr, usize> = dsts.iter().enumerate().map(|(j, d)| (*d, j)).collect();
    let mut out = Vec::new();
    for (r, f) in records {
        let dst = match r {
            Record::Trace(t) => t.dst,
            Record::Ping(p) => p.dst,
        };
        let (from, to) = match index.get(&dst) {
            Some(&j) if j < take => (dst, fresh(j)),
            Some(_) => continue,
            None if k == 0 => (dst, dst),
            None => continue,
        };
        // a path meets its own destination only: it is the one address to move
        let map = |a: &mut IpAddr| {
            if *a == from {
                *a = to;
            }
        };
        let mut r = r.clone();
        match &mut r {
            Record::Trace(t) => {
                map(&mut t.dst);
                t.start = t.start + shift;
                for h in &mut t.hops {
                    map(&mut h.addr);
                    h.tx = h.tx + shift;
                }
            }
            Record::Ping(p) => {
                map(&mut p.dst);
                p.start = p.start + shift;
                for reply in &mut p.responses {
                    map(&mut reply.from);
                    reply.tx = reply.tx + shift;
                }
            }
        }
        let (qf, qt) = (format!("\"{from}\""), format!("\"{to}\""));
        let move_text = |t: &str| t.replace(&qf, &qt);
        let f = f.as_ref().map(|f| TntFields {
            record: f.record.as_deref().map(move_text),
            hops: f.hops.iter().map(|h| h.as_deref().map(move_text)).collect(),
        });
        out.push((r, f));
    }
    out
}

/// Writes the records of `blocks` as one cycle of scamper JSON to `path`; returns how
/// many.
pub fn write_json(path: &Path, blocks: impl IntoIterator<Item = Records>) -> anyhow::Result<u64> {
    let file = std::fs::File::create(path)?;
    let mut w = vtnt_formats::JsonWriter::new(std::io::BufWriter::new(file));
    let cycle = Cycle {
        list_name: "default".into(),
        hostname: Some("bench-vp".into()),
        start_time: 1_700_000_000,
        ..Cycle::default()
    };
    w.cycle_start(&cycle)?;
    let mut n = 0;
    for recs in blocks {
        for (r, f) in &recs {
            match f {
                Some(f) => w.write_annotated(r, f)?,
                None => w.write(r)?,
            }
            n += 1;
        }
    }
    w.cycle_stop(&Cycle {
        stop_time: 1_700_000_001,
        ..cycle
    })?;
    w.into_inner().flush()?;
    Ok(n)
}

/// Writes the campaign of `targets` targets (blocks of `base`, the first `offset` later)
/// as scamper JSON to `path`; returns the records written.
fn write_campaign(
    path: &Path,
    base: &Records,
    dsts: &[IpAddr],
    targets: usize,
    offset: Duration,
) -> anyhow::Result<u64> {
    let span = campaign_span(base) + Duration::from_secs(1);
    let n = dsts.len().max(1);
    let blocks = (0..targets.div_ceil(n)).map(|k| {
        let take = (targets - k * n).min(n);
        block(base, dsts, take, k, offset + span * k as u32)
    });
    write_json(path, blocks)
}

/// From the first record's start to the last's.
fn campaign_span(records: &Records) -> Duration {
    let starts: Vec<u64> = records
        .iter()
        .map(|(r, _)| match r {
            Record::Trace(t) => t.start.as_micros(),
            Record::Ping(p) => p.start.as_micros(),
        })
        .collect();
    let lo = starts.iter().min().copied().unwrap_or(0);
    let hi = starts.iter().max().copied().unwrap_or(0);
    Duration::from_micros(hi - lo)
}

/// This process's CPU time so far (user and system), seconds.
fn cpu_secs() -> anyhow::Result<f64> {
    use nix::sys::resource::{getrusage, UsageWho};
    let u = getrusage(UsageWho::RUSAGE_SELF)?;
    let s = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Ok(s(u.user_time()) + s(u.system_time()))
}

/// The store's files on disk (the log is empty after a checkpoint).
fn db_bytes(db: &Path) -> u64 {
    ["", "-wal"]
        .iter()
        .filter_map(|s| std::fs::metadata(format!("{}{s}", db.display())).ok())
        .map(|m| m.len())
        .sum()
}

/// Runs the benchmark.
pub fn store_bench(o: &StoreBenchOptions) -> anyhow::Result<StoreBenchReport> {
    anyhow::ensure!(o.targets >= 1, "--targets must be at least 1");
    anyhow::ensure!(
        o.targets <= 1 << 24,
        "--targets: at most 16,777,216 (10.0.0.0/8)"
    );
    std::fs::create_dir_all(&o.dir)?;
    let topo = generate(
        o.seed,
        &GenOptions {
            destinations: o.destinations,
            ..GenOptions::default()
        },
    );
    let mut lab = Lab::new(topo);
    let truth = lab.truth();
    let base = campaign(&mut lab, &truth, o.seed)?;
    let dsts: Vec<IpAddr> = truth.destinations.iter().map(|d| d.dst.into()).collect();
    let base_tunnels: BTreeSet<String> = base
        .iter()
        .filter_map(|(_, f)| f.as_ref()?.record.clone())
        .filter_map(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .flat_map(|v| v["tunnels"].as_array().cloned().unwrap_or_default())
        .map(|t| t.to_string())
        .collect();
    let db = o.dir.join("results.sqlite");
    for f in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{f}", db.display()));
    }
    let pfx2as = o.dir.join("pfx2as.txt");
    std::fs::write(&pfx2as, pfx2as_of(&truth))?;
    let mut store = Store::open(&db)?;
    store.load_pfx2as(&pfx2as)?;
    let tenant = Tenant::new(TENANT)?;
    let mut imports = Vec::new();
    for (run, offset) in [("a", Duration::ZERO), ("b", Duration::from_secs(86_400))] {
        let json = o.dir.join(format!("campaign-{run}.json"));
        let records = write_campaign(&json, &base, &dsts, o.targets, offset)?;
        let (t0, cpu0) = (Instant::now(), cpu_secs()?);
        let r = import::import_file(
            &mut store,
            &json,
            &import::ImportOptions {
                tenant: tenant.clone(),
                node: None,
                run: Some(run.into()),
            },
        )?;
        let secs = t0.elapsed().as_secs_f64();
        let cpu = cpu_secs()? - cpu0;
        store.checkpoint()?;
        anyhow::ensure!(
            r.stored.traces + r.stored.pings == records,
            "campaign {run}: {records} records written, {:?} stored",
            r.stored
        );
        let json_bytes = std::fs::metadata(&json)?.len();
        // (gigabytes at full size, and made again from the seed in seconds)
        std::fs::remove_file(&json)?;
        imports.push(ImportTime {
            run: run.into(),
            json_bytes,
            records,
            secs,
            cpu_secs: cpu,
            db_bytes: db_bytes(&db),
        });
    }
    let all = Filter::default();
    let target = Filter {
        target: Some(IpAddr::V4(Ipv4Addr::from(
            0x0a00_0000 + o.targets as u32 / 2,
        ))),
        ..Filter::default()
    };
    let prefix = Filter {
        prefix: Some("10.0.0.0/24".parse().expect("a prefix")),
        ..Filter::default()
    };
    let class = Filter {
        class: Some("invisible-php".into()),
        ..Filter::default()
    };
    let mut queries = Vec::new();
    let mut time = |question: &str, f: &dyn Fn() -> vtnt_store::Result<usize>| {
        let t0 = Instant::now();
        let rows = f()?;
        queries.push(QueryTime {
            question: question.into(),
            rows,
            ms: t0.elapsed().as_secs_f64() * 1e3,
        });
        Ok::<_, anyhow::Error>(())
    };
    let t = &tenant;
    time("traces --target (one)", &|| {
        Ok(store.traces(t, &target)?.len())
    })?;
    time("traces --prefix /24", &|| {
        Ok(store.traces(t, &prefix)?.len())
    })?;
    time("tunnels --class invisible-php", &|| {
        Ok(store.tunnels(t, &class)?.len())
    })?;
    time("tunnels-per-as", &|| {
        Ok(store.tunnels_per_as(t, &all)?.len())
    })?;
    time("tunnels-per-vendor", &|| {
        Ok(store.tunnels_per_vendor(t, &all)?.len())
    })?;
    time("classes-per-vp", &|| {
        Ok(store.classes_per_vantage_point(t, &all)?.len())
    })?;
    time("revealed-lsrs-per-as", &|| {
        Ok(store.revealed_lsrs_per_as(t, &all)?.len())
    })?;
    time("diff a b", &|| {
        Ok(store.diff(t, "a", "b")?.compared as usize)
    })?;
    Ok(StoreBenchReport {
        options: o.clone(),
        base_records: base.len(),
        base_tunnels: base_tunnels.len(),
        imports,
        queries,
        db: db.display().to_string(),
    })
}
