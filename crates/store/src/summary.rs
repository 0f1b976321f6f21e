//! Summary rows kept at ingest, so that the whole-store questions read a small table
//! instead of every tunnel (issue 41: every page under 200 ms at 100,000 targets):
//!
//! - `tunnel_groups`: per job, one row per distinct tunnel (class, ingress, egress,
//!   LSRs) with its ingress's vendor in that job and how many traces crossed it;
//! - `lsr_groups`: per job, one row per distinct (tunnel, revealed LSR address);
//! - `run_paths`: per run, vantage point and target, its last initial (or plain) trace's
//!   path and tunnels as text and a 64-bit digest of both ([`path_digest`]), so that the
//!   diff of two runs merges two lists of digests in key order and reads the text of the
//!   pairs that differ only ([`file_paths`], at ingest for the traces it stored).
//!
//! A job's rows are recomputed from its records at the end of every ingest transaction
//! that stored a trace ([`refresh_job`]), in that transaction: a refused import leaves
//! them as they were, and a later signature of the job (which may change a tunnel's
//! vendor) is never missed. Schema version 2 ([`crate::schema`]) creates the tables and
//! fills them for every job of an older store with the same SQL; version 4 files every
//! path of an older store with [`file_all_paths`].

use std::collections::BTreeSet;

use rusqlite::Transaction;
use sha2::{Digest, Sha256};

use crate::diff::TunnelKey;
use crate::paths::{path_of, HOPS_TEXT};

/// The SQL that (re)fills both summaries for the jobs its `WHERE` condition `$w` (on
/// traces `r`) selects; one literal for the ingest and the migration.
macro_rules! fill_sql {
    ($w:literal) => {
        concat!(
            "INSERT INTO tunnel_groups (job_id, tenant, class, ingress, egress, lsrs, vendor,
                 observations)
             SELECT r.job_id, r.tenant, t.class, t.ingress, t.egress, t.lsrs, s.vendor, count(*)
             FROM traces r JOIN tunnels t ON t.trace_id = r.id
                  LEFT JOIN signatures s ON s.job_id = r.job_id AND s.addr = t.ingress
             WHERE ",
            $w,
            " GROUP BY r.job_id, t.class, t.ingress, t.egress, t.lsrs, s.vendor;
             INSERT INTO lsr_groups (job_id, tenant, class, ingress, egress, lsrs, vendor, addr)
             SELECT DISTINCT r.job_id, r.tenant, t.class, t.ingress, t.egress, t.lsrs, s.vendor,
                  l.addr
             FROM traces r JOIN tunnels t ON t.trace_id = r.id
                  JOIN lsrs l ON l.tunnel_id = t.id AND l.revealed AND l.addr IS NOT NULL
                  LEFT JOIN signatures s ON s.job_id = r.job_id AND s.addr = t.ingress
             WHERE ",
            $w,
            ";"
        )
    };
}
pub(crate) use fill_sql;

/// Recomputes job `job`'s summary rows from its records, inside `tx`.
pub(crate) fn refresh_job(tx: &Transaction<'_>, job: i64) -> rusqlite::Result<()> {
    tx.execute("DELETE FROM tunnel_groups WHERE job_id = ?1", [job])?;
    tx.execute("DELETE FROM lsr_groups WHERE job_id = ?1", [job])?;
    let sql = fill_sql!("r.job_id = ?1");
    for one in sql.split(';').filter(|s| !s.trim().is_empty()) {
        tx.prepare_cached(one)?.execute([job])?;
    }
    Ok(())
}

/// Files the path and tunnels of each trace of `traces` (initial or plain ones) in
/// `run_paths`, where it is its run's last trace of its (vantage point, target) pair, by
/// start time then id, as the diff counts them.
pub(crate) fn file_paths(tx: &Transaction<'_>, traces: &[i64]) -> rusqlite::Result<()> {
    let mut trace = tx.prepare_cached(&format!(
        "SELECT r.firsthop, {HOPS_TEXT}, j.run_id, j.node_id, r.dst, r.start_us
         FROM traces r JOIN jobs j ON j.id = r.job_id WHERE r.id = ?1"
    ))?;
    let mut tunnels =
        tx.prepare_cached("SELECT class, ingress, egress, lsrs FROM tunnels WHERE trace_id = ?1")?;
    let mut file = tx.prepare_cached(
        "INSERT INTO run_paths (run_id, node_id, dst, start_us, trace_id, path, tunnels,
             digest)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (run_id, node_id, dst) DO UPDATE SET start_us = excluded.start_us,
             trace_id = excluded.trace_id, path = excluded.path, tunnels = excluded.tunnels,
             digest = excluded.digest
         WHERE (excluded.start_us, excluded.trace_id) > (start_us, trace_id)",
    )?;
    for &id in traces {
        let (firsthop, hops, run, node, dst, start): (u8, _, i64, i64, String, i64) = trace
            .query_row([id], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            })?;
        let keys = tunnels
            .query_map([id], |r| {
                let lsrs: String = r.get(3)?;
                Ok(TunnelKey::new(r.get(0)?, r.get(1)?, r.get(2)?, &lsrs))
            })?
            .collect::<rusqlite::Result<BTreeSet<TunnelKey>>>()?;
        let keys = serde_json::to_string(&keys)
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        let path = path_of(firsthop, hops).join(" ");
        let digest = path_digest(&path, &keys);
        file.execute(rusqlite::params![
            run, node, dst, start, id, path, keys, digest
        ])?;
    }
    Ok(())
}

/// A pair's digest: the first 8 bytes of the SHA-256 of its path and tunnels text. Two
/// pairs with equal text have equal digests; two that differ share one with probability
/// 2^-64 (the diff would count them unchanged).
pub(crate) fn path_digest(path: &str, tunnels: &str) -> i64 {
    let mut h = Sha256::new();
    h.update(path.as_bytes());
    h.update([0]);
    h.update(tunnels.as_bytes());
    let mut first = [0; 8];
    first.copy_from_slice(&h.finalize()[..8]);
    i64::from_be_bytes(first)
}

/// [`file_paths`] for every initial or plain trace of the store (schema version 4).
pub(crate) fn file_all_paths(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    let ids = tx
        .prepare("SELECT id FROM traces WHERE coalesce(role, 'initial') = 'initial'")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<i64>>>()?;
    file_paths(tx, &ids)
}
