//! Summary rows kept at ingest, so that the whole-store questions read a small table
//! instead of every tunnel (issue 41: every page under 200 ms at 100,000 targets):
//!
//! - `tunnel_groups`: per job, one row per distinct tunnel (class, ingress, egress,
//!   LSRs) with its ingress's vendor in that job and how many traces crossed it;
//! - `lsr_groups`: per job, one row per distinct (tunnel, revealed LSR address).
//!
//! A job's rows are recomputed from its records at the end of every ingest transaction
//! that stored a trace ([`refresh_job`]), in that transaction: a refused import leaves
//! them as they were, and a later signature of the job (which may change a tunnel's
//! vendor) is never missed. Schema version 2 ([`crate::schema`]) creates the tables and
//! fills them for every job of an older store with the same SQL.

use rusqlite::Transaction;

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
