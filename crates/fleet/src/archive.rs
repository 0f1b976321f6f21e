//! `vtnt fleet measurement archive ID --cycle K -o FILE.warts.gz`: one cycle of a
//! measurement (a split campaign's, [`crate::campaign`], or any other) as one
//! gzip-compressed warts file, as CAIDA's Ark publishes its cycles: a list named after the
//! measurement, a cycle start (id K, the cycle's due time), every trace and ping of the
//! cycle's jobs read from the tenant's results, a cycle stop (its last record's start).
//! Refused while the cycle is not placed or one of its jobs has no summary; written to a
//! temporary file beside the output, synced and renamed into place, so no half file is
//! ever seen.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{bail, ensure, ResultExt};
use crate::measurement;
use crate::{Connect, Error};

/// What [`archive`] wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ArchiveReport {
    pub path: PathBuf,
    pub jobs: u64,
    /// Traces and pings written.
    pub records: u64,
    /// Bytes of the compressed file.
    pub bytes: u64,
}

/// Cycle `k` of measurement `id` as a gzip-compressed
/// warts file at `out` (replaced whole, never half written). Refused while the cycle is
/// not placed or one of its jobs has no summary.
pub fn archive(
    c: &Connect,
    tenant: &str,
    id: &str,
    k: u64,
    out: &Path,
) -> crate::Result<ArchiveReport> {
    crate::check_token("--tenant", tenant)?;
    crate::check_token("the measurement", id)?;
    let m = crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet measurement archive").await?;
        Ok::<_, Error>(measurement::one(&fleet, tenant, id).await?.0)
    })?;
    ensure!(
        k < m.placed,
        Invalid,
        "cycle {k} of measurement {id} is not placed yet ({} cycle(s) placed): nothing to archive",
        m.placed
    );
    let Some(&jobs) = m.cycle_jobs.get(k as usize) else {
        bail!(
            Invalid,
            "measurement {id} does not record how many jobs its cycle {k} had (defined before archives): it cannot be archived"
        )
    };
    let prefix = format!("{id}-c{k}-");
    let mut found: BTreeMap<u64, crate::controller::JobResults> = BTreeMap::new();
    crate::controller::results(c, tenant, None, false, |r| {
        if let Some(i) = r.job.strip_prefix(&prefix).and_then(|i| i.parse().ok()) {
            found.insert(i, r);
        }
        Ok::<_, Error>(())
    })?;
    for i in 0..jobs {
        let job = m.job_id(k, i as usize);
        ensure!(
            found.get(&i).is_some_and(|r| r.summary.is_some()),
            Invalid,
            "cycle {k} of measurement {id} is not finished: job {job} has no summary yet ({jobs} job(s) in the cycle); try again later"
        );
    }
    let cycle = vtnt_formats::Cycle {
        list_name: id.to_string(),
        list_id: 1,
        id: k as u32,
        hostname: None,
        start_time: (m.due_us(k) / 1_000_000) as u32,
        stop_time: 0,
        vtnt: None,
    };
    let tmp = out.with_file_name(format!(
        ".{}.{}.tmp",
        out.file_name()
            .map_or("archive".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    let written = write_archive(&tmp, &cycle, found.values());
    let records = match written {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    std::fs::rename(&tmp, out).io(|| format!("renaming {} to {}", tmp.display(), out.display()))?;
    let bytes = std::fs::metadata(out)
        .io(|| format!("{}", out.display()))?
        .len();
    Ok(ArchiveReport {
        path: out.to_path_buf(),
        jobs,
        records,
        bytes,
    })
}

/// Writes the cycle's warts to `path` (gzip), synced; the records written.
fn write_archive<'a>(
    path: &Path,
    cycle: &vtnt_formats::Cycle,
    jobs: impl Iterator<Item = &'a crate::controller::JobResults>,
) -> crate::Result<u64> {
    let file = std::fs::File::create(path).io(|| format!("creating {}", path.display()))?;
    let gz = flate2::write::GzEncoder::new(
        std::io::BufWriter::new(file),
        flate2::Compression::default(),
    );
    let mut w = vtnt_formats::WartsWriter::new(gz);
    let warts = |what: String| move |e| Error::Warts { what, source: e };
    w.cycle_start(cycle)
        .map_err(warts(format!("writing {}", path.display())))?;
    let mut records = 0;
    let mut stop = cycle.start_time;
    for j in jobs {
        for (n, line) in j.records.iter().enumerate() {
            let item = vtnt_formats::parse_json_line(line, n + 1).map_err(|e| {
                Error::Invalid(format!(
                    "job {}'s record {n} is not scamper JSON: {e}",
                    j.job
                ))
            })?;
            let Some(r) = item.record() else { continue };
            stop = stop.max(record_start(r));
            w.write_item(&item)
                .map_err(warts(format!("job {}'s record {n}", j.job)))?;
            records += 1;
        }
    }
    w.cycle_stop(&vtnt_formats::Cycle {
        stop_time: stop,
        ..cycle.clone()
    })
    .map_err(warts(format!("writing {}", path.display())))?;
    let gz = w.into_inner();
    let file = gz
        .finish()
        .and_then(|b| b.into_inner().map_err(|e| e.into_error()))
        .io(|| format!("writing {}", path.display()))?;
    file.sync_all()
        .io(|| format!("syncing {}", path.display()))?;
    Ok(records)
}

/// When a record started, Unix seconds.
fn record_start(r: &vtnt_formats::Record) -> u32 {
    match r {
        vtnt_formats::Record::Trace(t) => (t.start.as_micros() / 1_000_000) as u32,
        vtnt_formats::Record::Ping(p) => (p.start.as_micros() / 1_000_000) as u32,
    }
}
