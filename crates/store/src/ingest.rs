//! [`Ingest`]: records into the store, in one write transaction. A run, a node and a job
//! ([`Provenance`]) are created or updated first; then every record becomes its rows: a
//! trace its hops (and, annotated by TNT, its tunnels, their LSRs and the signatures of
//! its addresses), a ping its replies. A record's identity is its tenant and the SHA-256
//! of its scamper-JSON line (annotations included): the same measurement read from warts,
//! from JSON or from a fleet's stream is one record, stored once.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use rusqlite::{params, Transaction};
use sha2::{Digest, Sha256};
use vtnt_formats::{Hop, Item, NoAnnotations, Ping, Record, TntFields, Trace};
use vtnt_tnt::RecordRole;

use crate::annotation::{PathEntry, TraceAnnotation};
use crate::error::{Result, StoreError};
use crate::{addr_n, now_us, Store, Tenant};

/// Where a run's records come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// `vtnt trace|ping|tnt` on this host.
    Cli,
    /// `vtnt import FILE`.
    Import,
    /// A fleet's results stream.
    Fleet,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Cli => "cli",
            Source::Import => "import",
            Source::Fleet => "fleet",
        }
    }
}

/// A run (a campaign): what a person names and compares.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// Its identity within the tenant (a later ingest with the same key adds to it).
    pub key: String,
    /// A name for people.
    pub name: String,
    pub source: Source,
    /// The command line, or the files, it came from.
    pub command: Option<String>,
}

/// A vantage point and what is known of it; unknown fields stay as they were.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct NodeInfo {
    pub name: String,
    pub location: Option<String>,
    /// The address its probes leave the network with (behind a NAT: the NAT's).
    pub public_addr: Option<String>,
    /// SHA-256 of the image (or binary) that measured.
    pub image_sha256: Option<String>,
    /// Its clock's offset from true time, milliseconds, when measured.
    pub clock_offset_ms: Option<f64>,
    /// `yes`, `no` or `unknown`: whether its clock was synchronised.
    pub clock_sync: Option<String>,
}

/// A job: one command's, one file's or one fleet job's records; unknown fields stay as
/// they were.
#[derive(Debug, Clone, Default)]
pub struct JobInfo {
    pub key: String,
    /// `trace`, `ping` or `tnt`.
    pub kind: Option<String>,
    pub runtime: Option<String>,
    pub location: Option<String>,
    /// How it ended (a fleet job's status: `ok`, `failed`, `refused`, `error`).
    pub status: Option<String>,
    pub error: Option<String>,
    pub exit_code: Option<i64>,
    /// Records the job says it produced (a fleet summary's count).
    pub records_declared: Option<i64>,
    pub delivery: Option<i64>,
    pub queue_ms: Option<f64>,
    pub exec_ms: Option<f64>,
    pub total_ms: Option<f64>,
    /// The vTNT build that measured (a cycle's `vtnt`).
    pub vtnt: Option<String>,
    /// The file it was imported from.
    pub file: Option<String>,
}

/// Who measured what, under which tenant.
#[derive(Debug, Clone)]
pub struct Provenance {
    pub tenant: Tenant,
    pub run: RunInfo,
    pub node: NodeInfo,
    pub job: JobInfo,
}

/// What an ingest stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct IngestReport {
    /// Traces and pings stored.
    pub traces: u64,
    pub pings: u64,
    /// Records that were stored already (by this tenant, by any run).
    pub known: u64,
}

/// One write transaction filing records under one job; dropped without
/// [`Ingest::commit`], it stores nothing.
pub struct Ingest<'s> {
    tx: Transaction<'s>,
    tenant: Tenant,
    job_id: i64,
    next_idx: i64,
    /// Addresses given their `addresses` row in this transaction.
    seen: HashSet<IpAddr>,
    /// Initial and plain traces stored in this transaction (their `run_paths` rows are
    /// filed at commit).
    paths: Vec<i64>,
    report: IngestReport,
}

impl Store {
    /// Starts filing records under `p`'s run, node and job (created or updated).
    pub fn ingest(&mut self, p: &Provenance) -> Result<Ingest<'_>> {
        let what = format!("{}: storing job {}", self.path, p.job.key);
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(StoreError::sql(&what))?;
        let job_id = provenance(&tx, p).map_err(StoreError::sql(&what))?;
        let next_idx = tx
            .query_row(
                "SELECT coalesce(max(idx) + 1, 0) FROM (SELECT idx FROM traces WHERE job_id = ?1 \
                 UNION ALL SELECT idx FROM pings WHERE job_id = ?1)",
                [job_id],
                |r| r.get(0),
            )
            .map_err(StoreError::sql(&what))?;
        Ok(Ingest {
            tx,
            tenant: p.tenant.clone(),
            job_id,
            next_idx,
            seen: HashSet::new(),
            paths: Vec::new(),
            report: IngestReport::default(),
        })
    }
}

/// The run, node and job rows of `p`; returns the job's id.
fn provenance(tx: &Transaction<'_>, p: &Provenance) -> rusqlite::Result<i64> {
    let now = now_us();
    let t = p.tenant.as_str();
    let run: i64 = tx.query_row(
        "INSERT INTO runs (tenant, key, name, source, command, created_us)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (tenant, key) DO UPDATE SET command = coalesce(command, excluded.command)
         RETURNING id",
        params![
            t,
            p.run.key,
            p.run.name,
            p.run.source.name(),
            p.run.command,
            now
        ],
        |r| r.get(0),
    )?;
    let n = &p.node;
    let node: i64 = tx.query_row(
        "INSERT INTO nodes (tenant, name, location, public_addr, image_sha256,
                            clock_offset_ms, clock_sync, first_seen_us, last_seen_us)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)
         ON CONFLICT (tenant, name) DO UPDATE SET
             location = coalesce(excluded.location, location),
             public_addr = coalesce(excluded.public_addr, public_addr),
             image_sha256 = coalesce(excluded.image_sha256, image_sha256),
             clock_offset_ms = coalesce(excluded.clock_offset_ms, clock_offset_ms),
             clock_sync = coalesce(excluded.clock_sync, clock_sync),
             last_seen_us = excluded.last_seen_us
         RETURNING id",
        params![
            t,
            n.name,
            n.location,
            n.public_addr,
            n.image_sha256,
            n.clock_offset_ms,
            n.clock_sync,
            now
        ],
        |r| r.get(0),
    )?;
    let j = &p.job;
    tx.query_row(
        "INSERT INTO jobs (tenant, run_id, key, node_id, kind, runtime, location, status, error,
                           exit_code, records_declared, delivery, queue_ms, exec_ms, total_ms,
                           public_addr, image_sha256, clock_offset_ms, clock_sync, vtnt, file,
                           created_us)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                 ?18, ?19, ?20, ?21, ?22)
         ON CONFLICT (tenant, key) DO UPDATE SET
             kind = coalesce(excluded.kind, kind),
             runtime = coalesce(excluded.runtime, runtime),
             location = coalesce(excluded.location, location),
             status = coalesce(excluded.status, status),
             error = coalesce(excluded.error, error),
             exit_code = coalesce(excluded.exit_code, exit_code),
             records_declared = coalesce(excluded.records_declared, records_declared),
             delivery = coalesce(excluded.delivery, delivery),
             queue_ms = coalesce(excluded.queue_ms, queue_ms),
             exec_ms = coalesce(excluded.exec_ms, exec_ms),
             total_ms = coalesce(excluded.total_ms, total_ms),
             public_addr = coalesce(excluded.public_addr, public_addr),
             image_sha256 = coalesce(excluded.image_sha256, image_sha256),
             clock_offset_ms = coalesce(excluded.clock_offset_ms, clock_offset_ms),
             clock_sync = coalesce(excluded.clock_sync, clock_sync),
             vtnt = coalesce(excluded.vtnt, vtnt),
             file = coalesce(excluded.file, file)
         RETURNING id",
        params![
            t,
            run,
            j.key,
            node,
            j.kind,
            j.runtime,
            j.location,
            j.status,
            j.error,
            j.exit_code,
            j.records_declared,
            j.delivery,
            j.queue_ms,
            j.exec_ms,
            j.total_ms,
            n.public_addr,
            n.image_sha256,
            n.clock_offset_ms,
            n.clock_sync,
            j.vtnt,
            j.file,
            now
        ],
        |r| r.get(0),
    )
}

/// The store's identity of a record: the first 16 bytes of the SHA-256 of its scamper-JSON
/// line (times in UTC), annotations included.
pub fn digest(r: &Record, tnt: Option<&TntFields>) -> [u8; 16] {
    let line = match tnt {
        Some(f) => vtnt_formats::record_line(r, f, 0),
        None => vtnt_formats::record_line(r, &NoAnnotations, 0),
    };
    let full = Sha256::digest(line.as_bytes());
    let mut d = [0u8; 16];
    d.copy_from_slice(&full[..16]);
    d
}

/// A value of TNT's vocabulary as its JSON word (`dup-ip`, `brpr`, `hop`).
pub(crate) fn word<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        other => format!("{other:?}"),
    }
}

/// Whether a record was new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filed {
    New,
    /// Stored before (same tenant, same record).
    Known,
}

/// A record filed, or why it cannot be (a malformed annotation; the caller knows where).
pub type FileResult = Result<std::result::Result<Filed, String>>;

impl Ingest<'_> {
    fn sql(&self, what: &str) -> impl FnOnce(rusqlite::Error) -> StoreError {
        StoreError::sql(format!("storing {what}"))
    }

    /// Files one object of a scamper file: a record (at index `idx` of the job, `None`:
    /// after the last one), or a cycle start, whose `vtnt` build the job keeps.
    pub fn item(&mut self, idx: Option<i64>, item: &Item) -> FileResult {
        match item {
            Item::Record(r) => self.record(idx, r, None),
            Item::Annotated(r, f) => self.record(idx, r, Some(f)),
            Item::CycleStart(c) => {
                if let Some(v) = &c.vtnt {
                    self.tx
                        .execute(
                            "UPDATE jobs SET vtnt = coalesce(vtnt, ?2) WHERE id = ?1",
                            params![self.job_id, v],
                        )
                        .map_err(self.sql("a cycle"))?;
                }
                Ok(Ok(Filed::Known))
            }
            Item::CycleStop(_) => Ok(Ok(Filed::Known)),
        }
    }

    /// Files one record at index `idx` of the job (`None`: after the last one).
    pub fn record(&mut self, idx: Option<i64>, r: &Record, tnt: Option<&TntFields>) -> FileResult {
        let role = match tnt.and_then(|f| f.record.as_deref()) {
            Some(text) => match vtnt_formats::record_role(text) {
                Ok(role) => Some(role),
                Err(e) => return Ok(Err(format!("tnt role: {e}"))),
            },
            None => None,
        };
        let idx = idx.unwrap_or(self.next_idx);
        self.next_idx = self.next_idx.max(idx + 1);
        let digest = digest(r, tnt);
        match (r, role) {
            (Record::Trace(t), None | Some(RecordRole::Initial | RecordRole::Reveal { .. })) => {
                let ann = match (role, tnt.and_then(|f| f.record.as_deref())) {
                    (Some(RecordRole::Initial), Some(text)) => {
                        match TraceAnnotation::parse(text, t.hops.len()) {
                            Ok(a) => Some(a),
                            Err(e) => return Ok(Err(format!("tnt: {e}"))),
                        }
                    }
                    _ => None,
                };
                self.trace(idx, &digest, t, role, ann.as_ref())
                    .map(|f| Ok(self.count(f, true)))
            }
            (Record::Ping(p), None | Some(RecordRole::Ping { .. })) => self
                .ping(idx, &digest, p, role)
                .map(|f| Ok(self.count(f, false))),
            (r, Some(role)) => {
                let kind = match r {
                    Record::Trace(_) => "a trace",
                    Record::Ping(_) => "a ping",
                };
                Ok(Err(format!("tnt role {role:?} on {kind}")))
            }
        }
    }

    fn count(&mut self, f: Filed, trace: bool) -> Filed {
        match (f, trace) {
            (Filed::Known, _) => self.report.known += 1,
            (Filed::New, true) => self.report.traces += 1,
            (Filed::New, false) => self.report.pings += 1,
        }
        f
    }

    /// Gives `a` its `addresses` row (with its AS) unless it has one.
    fn address(&mut self, a: IpAddr) -> Result<()> {
        if !self.seen.insert(a) {
            return Ok(());
        }
        self.tx
            .prepare_cached(
                "INSERT INTO addresses (addr, addr_n, asn) VALUES (?1, ?2, (SELECT CASE WHEN \
                 last_n >= ?2 THEN origin END FROM as_segments WHERE first_n <= ?2 ORDER BY \
                 first_n DESC LIMIT 1)) ON CONFLICT (addr) DO NOTHING",
            )
            .and_then(|mut s| s.execute(params![a.to_string(), addr_n(a)]))
            .map_err(self.sql("an address"))?;
        Ok(())
    }

    fn trace(
        &mut self,
        idx: i64,
        digest: &[u8; 16],
        t: &Trace,
        role: Option<RecordRole>,
        ann: Option<&TraceAnnotation>,
    ) -> Result<Filed> {
        let (role_name, reveal) = match role {
            None => (None, None),
            Some(RecordRole::Initial) => (Some("initial"), None),
            Some(RecordRole::Reveal {
                anchor,
                egress,
                trigger,
                method,
                step,
            }) => (
                Some("reveal"),
                Some((anchor, egress, trigger, method, step)),
            ),
            Some(RecordRole::Ping { .. }) => unreachable!("checked by the caller"),
        };
        let inserted = self
            .tx
            .prepare_cached(
                "INSERT INTO traces (tenant, job_id, idx, digest, role, method, src, dst, dst_n,
                     start_us, stop_reason, stop_data, firsthop, hop_count, attempts, userid,
                     probes, anchor, egress, trigger, reveal_method, reveal_step)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                     ?17, ?18, ?19, ?20, ?21, ?22)
                 ON CONFLICT (tenant, digest) DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    self.tenant.as_str(),
                    self.job_id,
                    idx,
                    &digest[..],
                    role_name,
                    t.method.trace_json_name(),
                    t.src.to_string(),
                    t.dst.to_string(),
                    addr_n(t.dst),
                    t.start.as_micros() as i64,
                    t.stop_reason.name(),
                    t.stop_data,
                    t.firsthop,
                    t.hop_count,
                    t.attempts,
                    t.userid,
                    ann.and_then(|a| a.probes),
                    reveal.map(|r| r.0.to_string()),
                    reveal.map(|r| r.1.to_string()),
                    reveal.map(|r| word(&r.2)),
                    reveal.map(|r| word(&r.3)),
                    reveal.map(|r| r.4),
                ])
            })
            .map_err(self.sql("a trace"))?;
        if inserted == 0 {
            return Ok(Filed::Known);
        }
        let id = self.tx.last_insert_rowid();
        if reveal.is_none() {
            self.paths.push(id);
        }
        let by_hop: HashMap<usize, &PathEntry> = ann
            .into_iter()
            .flat_map(|a| &a.path)
            .filter_map(|p| Some((p.hop?, p)))
            .collect();
        for (i, h) in t.hops.iter().enumerate() {
            self.hop(id, i, h, by_hop.get(&i).copied())?;
        }
        if let Some(a) = ann {
            self.findings(id, a)?;
        }
        Ok(Filed::New)
    }

    fn hop(&mut self, trace: i64, i: usize, h: &Hop, p: Option<&PathEntry>) -> Result<()> {
        let labels = (!h.mpls.is_empty()).then(|| {
            h.mpls
                .iter()
                .map(|l| format!("{}:{}", l.label, l.ttl))
                .collect::<Vec<_>>()
                .join(",")
        });
        let a = p.map(|p| &p.annotation);
        self.tx
            .prepare_cached(
                "INSERT INTO hops (trace_id, i, probe_ttl, probe_id, addr, rtt_us, reply_ttl,
                     reply_size, icmp_type, icmp_code, q_ttl, labels, uturn, frpla, rtla)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    trace,
                    i,
                    h.probe_ttl,
                    h.probe_id,
                    h.addr.to_string(),
                    h.rtt.as_micros() as i64,
                    h.reply_ttl,
                    h.reply_size,
                    h.icmp.map(|i| i.0),
                    h.icmp.map(|i| i.1),
                    h.quoted.map(|q| q.ttl),
                    labels,
                    a.map(|a| a.uturn),
                    a.map(|a| a.frpla),
                    a.map(|a| a.rtla),
                ])
            })
            .map_err(self.sql("a hop"))?;
        self.address(h.addr)
    }

    /// An initial trace's tunnels, their LSRs, and the signatures of its addresses.
    fn findings(&mut self, trace: i64, a: &TraceAnnotation) -> Result<()> {
        for (i, t) in a.tunnels.iter().enumerate() {
            let lsrs: Vec<String> = t
                .lsrs
                .iter()
                .map(|l| l.map_or("*".to_string(), |a| a.to_string()))
                .collect();
            let rev = t.revelation.as_ref();
            let status = rev.map(|r| r.status().unwrap_or_default());
            self.tx
                .prepare_cached(
                    "INSERT INTO tunnels (trace_id, i, class, evidence, trigger, ingress, egress,
                         lsrs, lsr_count, hidden_estimate, revelation, revelation_reason,
                         revelation_method, revelation_steps, revelation_traces,
                         revelation_probes, cached, note)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,
                         ?16, ?17, ?18)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        trace,
                        i,
                        t.class,
                        t.evidence,
                        t.trigger,
                        t.ingress.map(|a| a.to_string()),
                        t.egress.map(|a| a.to_string()),
                        lsrs.join(","),
                        t.lsrs.len(),
                        t.hidden_estimate,
                        status.as_ref().map(|s| s.0.clone()),
                        status.and_then(|s| s.1),
                        rev.and_then(|r| r.method.clone()),
                        rev.map(|r| r.steps),
                        rev.map(|r| r.traces),
                        rev.map(|r| r.probes),
                        rev.map(|r| r.cached),
                        t.note,
                    ])
                })
                .map_err(self.sql("a tunnel"))?;
            let tunnel = self.tx.last_insert_rowid();
            for (pos, lsr) in t.lsrs.iter().enumerate() {
                let revealed = a.path.iter().find_map(|p| {
                    let r = p.revealed.as_ref()?;
                    (r.tunnel == i && p.addr == *lsr).then_some(r)
                });
                self.tx
                    .prepare_cached(
                        "INSERT INTO lsrs (tunnel_id, pos, addr, revealed, method, step)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    )
                    .and_then(|mut s| {
                        s.execute(params![
                            tunnel,
                            pos,
                            lsr.map(|a| a.to_string()),
                            revealed.is_some(),
                            revealed.map(|r| &r.method),
                            revealed.map(|r| r.step),
                        ])
                    })
                    .map_err(self.sql("an LSR"))?;
            }
            for addr in t
                .ingress
                .iter()
                .chain(&t.egress)
                .chain(t.lsrs.iter().flatten())
            {
                self.address(*addr)?;
            }
        }
        for p in &a.path {
            let Some(addr) = p.addr else { continue };
            let s = &p.annotation.signature;
            // the most complete signature an address shows in the job wins
            self.tx
                .prepare_cached(
                    "INSERT INTO signatures (job_id, addr, te, er, vendor) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (job_id, addr) DO UPDATE SET te = excluded.te, er = excluded.er,
                         vendor = excluded.vendor
                     WHERE (excluded.te IS NOT NULL) + (excluded.er IS NOT NULL)
                         > (te IS NOT NULL) + (er IS NOT NULL)",
                )
                .and_then(|mut st| {
                    st.execute(params![
                        self.job_id,
                        addr.to_string(),
                        s.te,
                        s.er,
                        p.annotation.vendor.as_deref().unwrap_or("unknown"),
                    ])
                })
                .map_err(self.sql("a signature"))?;
            self.address(addr)?;
        }
        Ok(())
    }

    fn ping(
        &mut self,
        idx: i64,
        digest: &[u8; 16],
        p: &Ping,
        role: Option<RecordRole>,
    ) -> Result<Filed> {
        let purpose = match role {
            Some(RecordRole::Ping { purpose }) => Some(word(&purpose)),
            _ => None,
        };
        let inserted = self
            .tx
            .prepare_cached(
                "INSERT INTO pings (tenant, job_id, idx, digest, purpose, method, src, dst, dst_n,
                     start_us, sent, replies, userid)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
                 ON CONFLICT (tenant, digest) DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    self.tenant.as_str(),
                    self.job_id,
                    idx,
                    &digest[..],
                    purpose,
                    p.method.ping_json_name(),
                    p.src.to_string(),
                    p.dst.to_string(),
                    addr_n(p.dst),
                    p.start.as_micros() as i64,
                    p.ping_sent,
                    p.responses.len(),
                    p.userid,
                ])
            })
            .map_err(self.sql("a ping"))?;
        if inserted == 0 {
            return Ok(Filed::Known);
        }
        let id = self.tx.last_insert_rowid();
        for (i, r) in p.responses.iter().enumerate() {
            self.tx
                .prepare_cached(
                    "INSERT INTO ping_replies (ping_id, i, from_addr, seq, rtt_us, reply_ttl,
                         reply_size, icmp_type, icmp_code)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        id,
                        i,
                        r.from.to_string(),
                        r.seq,
                        r.rtt.as_micros() as i64,
                        r.reply_ttl,
                        r.reply_size,
                        r.icmp.map(|i| i.0),
                        r.icmp.map(|i| i.1),
                    ])
                })
                .map_err(self.sql("a ping reply"))?;
        }
        Ok(Filed::New)
    }

    /// What was filed so far.
    pub fn report(&self) -> IngestReport {
        self.report
    }

    /// Makes everything filed durable; returns what was stored.
    pub fn commit(self) -> Result<IngestReport> {
        let report = self.report;
        if report.traces > 0 {
            crate::summary::refresh_job(&self.tx, self.job_id)
                .and_then(|()| crate::summary::file_paths(&self.tx, &self.paths))
                .map_err(self.sql("the job's summary rows"))?;
        }
        self.tx.commit().map_err(StoreError::sql("committing"))?;
        Ok(report)
    }
}
