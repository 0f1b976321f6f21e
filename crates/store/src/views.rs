//! What one page of `vtnt serve` shows of one run or one trace, as one typed answer each
//! (the page and its JSON endpoint serialise the same value): a campaign's progress and
//! findings ([`Store::campaign`]) and one path hop by hop, with its tunnels, labels, TTL
//! signatures and vendors ([`Store::trace_path`]). Both are scoped to one tenant like every
//! query of [`crate::query`].

use std::collections::BTreeMap;

use rusqlite::types::Value;
use serde::Serialize;

use crate::error::Result;
use crate::query::{Filter, RunRow, Scope, TraceRow, TunnelRow};
use crate::{Store, Tenant};

/// One campaign (run): how far it got and what it found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Campaign {
    pub run: RunRow,
    /// Its jobs per status (`pending`: no summary yet).
    pub jobs_by_status: BTreeMap<String, u64>,
    /// Records its jobs declared in their summaries, and of those stored.
    pub records_declared: u64,
    pub records_stored: u64,
    /// Distinct targets of its initial (or plain) traces.
    pub targets_done: u64,
    /// Probes its traces spent, as TNT's annotations count them.
    pub probes: u64,
    /// Distinct tunnels per class (every class listed), and in all.
    pub tunnels_per_class: BTreeMap<String, u64>,
    pub tunnels: u64,
    /// Distinct LSR addresses TNT revealed.
    pub lsrs_revealed: u64,
}

/// One hop of a path as traceroute users read it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HopView {
    pub ttl: u8,
    pub addr: String,
    pub rtt_us: i64,
    pub reply_ttl: u8,
    /// The TTL the probe had when the router quoted it (RFC 4950 users read `qttl`).
    pub q_ttl: Option<u8>,
    /// MPLS labels the reply quoted (`label|exp|s|ttl` stacks as stored).
    pub labels: Option<String>,
    pub icmp_type: Option<u8>,
    pub icmp_code: Option<u8>,
    pub asn: Option<String>,
    /// TNT's TTL signature of this address in the same job (`<te, er>`) and its vendor.
    pub signature: Option<(Option<u8>, Option<u8>)>,
    pub vendor: Option<String>,
}

/// One trace with its hops and the tunnels TNT found on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathView {
    pub trace: TraceRow,
    pub hops: Vec<HopView>,
    pub tunnels: Vec<TunnelRow>,
}

impl Store {
    /// Run `run` of `tenant`; `None` when the tenant has no such run.
    pub fn campaign(&self, tenant: &Tenant, run: &str) -> Result<Option<Campaign>> {
        let Some(row) = self.runs(tenant)?.into_iter().find(|r| r.key == run) else {
            return Ok(None);
        };
        let args = [Value::Text(tenant.as_str().into()), Value::Text(run.into())];
        let jobs_by_status = self.rows(
            "SELECT coalesce(j.status, 'pending'), count(*), sum(coalesce(j.records_declared, 0))
                 FROM jobs j JOIN runs u ON u.id = j.run_id
                 WHERE u.tenant = ?1 AND u.key = ?2 GROUP BY 1",
            &args,
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, u64>(1)?,
                    r.get::<_, u64>(2)?,
                ))
            },
        )?;
        let stats = self.rows(
            "SELECT count(DISTINCT CASE WHEN coalesce(r.role, 'initial') = 'initial' THEN r.dst END),
                sum(coalesce(r.probes, 0))
             FROM traces r JOIN jobs j ON j.id = r.job_id JOIN runs u ON u.id = j.run_id
             WHERE u.tenant = ?1 AND u.key = ?2",
            &args,
            |r| Ok((r.get::<_, u64>(0)?, r.get::<_, Option<u64>>(1)?.unwrap_or(0))),
        )?;
        let (targets_done, probes) = stats.first().copied().unwrap_or((0, 0));
        let f = Filter {
            run: Some(run.into()),
            ..Filter::default()
        };
        let per_class = self.classes_per_run(tenant, &f)?;
        let lsrs_revealed = self
            .revealed_lsrs_per_as(tenant, &f)?
            .iter()
            .map(|c| c.lsrs)
            .sum();
        Ok(Some(Campaign {
            records_declared: jobs_by_status.iter().map(|j| j.2).sum(),
            records_stored: row.traces + row.pings,
            jobs_by_status: jobs_by_status.into_iter().map(|(s, n, _)| (s, n)).collect(),
            targets_done,
            probes,
            tunnels: per_class.as_ref().map_or(0, |c| c.tunnels),
            tunnels_per_class: per_class.map(|c| c.classes).unwrap_or_else(|| {
                crate::query::classes()
                    .map(|c| (c.to_string(), 0))
                    .collect()
            }),
            lsrs_revealed,
            run: row,
        }))
    }

    /// Trace `id` of `tenant`, hop by hop; `None` when the tenant has no such trace.
    pub fn trace_path(&self, tenant: &Tenant, id: i64) -> Result<Option<PathView>> {
        let mut s = Scope::traces(tenant, &Filter::default())?;
        s.cond("r.id = ?", Value::Integer(id));
        let Some(trace) = self.traces_in(&s, Some(1))?.into_iter().next() else {
            return Ok(None);
        };
        let hops = self.rows(
            "SELECT h.probe_ttl, h.addr, h.rtt_us, h.reply_ttl, h.q_ttl, h.labels, h.icmp_type,
                h.icmp_code, a.asn, s.te, s.er, s.vendor, s.addr IS NOT NULL
             FROM hops h JOIN traces r ON r.id = h.trace_id
             LEFT JOIN addresses a ON a.addr = h.addr
             LEFT JOIN signatures s ON s.job_id = r.job_id AND s.addr = h.addr
             WHERE r.tenant = ?1 AND h.trace_id = ?2 ORDER BY h.probe_ttl, h.i",
            &[Value::Text(tenant.as_str().into()), Value::Integer(id)],
            |r| {
                Ok(HopView {
                    ttl: r.get(0)?,
                    addr: r.get(1)?,
                    rtt_us: r.get(2)?,
                    reply_ttl: r.get(3)?,
                    q_ttl: r.get(4)?,
                    labels: r.get(5)?,
                    icmp_type: r.get(6)?,
                    icmp_code: r.get(7)?,
                    asn: r.get(8)?,
                    signature: r.get::<_, bool>(12)?.then_some((r.get(9)?, r.get(10)?)),
                    vendor: r.get(11)?,
                })
            },
        )?;
        let mut t = Scope::tunnels(tenant, &Filter::default())?;
        t.cond("r.id = ?", Value::Integer(id));
        Ok(Some(PathView {
            trace,
            hops,
            tunnels: self.tunnels_in(&t)?,
        }))
    }
}

/// A job as the fleet page lists it: where it ran, how it ended, what it took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobRow {
    pub job: String,
    pub run: String,
    pub node: String,
    pub location: Option<String>,
    pub runtime: Option<String>,
    /// `None`: no summary yet.
    pub status: Option<String>,
    pub delivery: Option<i64>,
    pub queue_ms: Option<f64>,
    pub exec_ms: Option<f64>,
    pub total_ms: Option<f64>,
    pub records_declared: Option<i64>,
    pub created_us: i64,
}

impl Store {
    /// The tenant's `limit` newest jobs, newest first.
    pub fn jobs(&self, tenant: &Tenant, limit: u32) -> Result<Vec<JobRow>> {
        self.rows(
            "SELECT j.key, u.key, n.name, j.location, j.runtime, j.status, j.delivery,
                j.queue_ms, j.exec_ms, j.total_ms, j.records_declared, j.created_us
             FROM jobs j JOIN runs u ON u.id = j.run_id JOIN nodes n ON n.id = j.node_id
             WHERE j.tenant = ?1 ORDER BY j.created_us DESC, j.id DESC LIMIT ?2",
            &[
                Value::Text(tenant.as_str().into()),
                Value::Integer(limit.into()),
            ],
            |r| {
                Ok(JobRow {
                    job: r.get(0)?,
                    run: r.get(1)?,
                    node: r.get(2)?,
                    location: r.get(3)?,
                    runtime: r.get(4)?,
                    status: r.get(5)?,
                    delivery: r.get(6)?,
                    queue_ms: r.get(7)?,
                    exec_ms: r.get(8)?,
                    total_ms: r.get(9)?,
                    records_declared: r.get(10)?,
                    created_us: r.get(11)?,
                })
            },
        )
    }
}
