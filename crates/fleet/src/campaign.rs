//! Ark-style campaigns (issue 42): a measurement whose target list is split across its
//! vantage points, and one warts archive per cycle.
//!
//! - **Split**: `vtnt fleet measurement create --split FILE` stores FILE's targets in the
//!   tenant's data stream under [`list_key`] ([`crate::targets::store`]), not in the
//!   definition; each cycle k deals every /24 (IPv4) or /48 (IPv6) of the list to exactly
//!   one of the cycle's vantage points ([`deal`]): the prefixes shuffled from the cycle's
//!   seed ([`Definition::seed`]) and dealt in turn, so the same (id, k) deals the same
//!   (a cycle placed again after a crash makes the same jobs, which the work queue drops)
//!   and another cycle deals anew.
//! - **Archive**: `vtnt fleet measurement archive ID --cycle K -o FILE.warts.gz` ([`archive`])
//!   reads the cycle's jobs' records from the tenant's results and writes them as a
//!   gzip-compressed warts file: a list named after the measurement, a cycle start, every
//!   record, a cycle stop; refused while a job of the cycle has no summary, and written to
//!   a temporary file renamed into place, so no half file is ever seen.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::error::{bail, ensure, ResultExt};
use crate::measurement::{self, Definition};
use crate::proto::TargetList;
use crate::{Connect, Error, Fleet};

/// Where a split measurement's target list is kept in the tenant's data stream (a job id
/// of its own: no cycle's job is named so).
pub fn list_key(id: &str) -> String {
    format!("{id}-list")
}

/// The prefix a target is dealt with: its /24 (IPv4) or /48 (IPv6).
pub fn prefix_of(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V4(v) => IpAddr::V4((u32::from(v) & 0xffff_ff00).into()),
        IpAddr::V6(v) => IpAddr::V6((u128::from(v) & !((1u128 << 80) - 1)).into()),
    }
}

/// Deals `targets` (each once, duplicates dropped) to `points` vantage points: every /24
/// (/48) to exactly one, the prefixes in a shuffle seeded by `seed` and dealt in turn, so
/// each point gets as many prefixes as another, give or take one. A point's targets are
/// in address order; a point may get none when there are fewer prefixes than points.
pub fn deal(targets: &[IpAddr], points: usize, seed: u64) -> Vec<Vec<IpAddr>> {
    let mut by_prefix: BTreeMap<IpAddr, Vec<IpAddr>> = BTreeMap::new();
    for &t in targets {
        by_prefix.entry(prefix_of(t)).or_default().push(t);
    }
    let mut prefixes: Vec<Vec<IpAddr>> = by_prefix.into_values().collect();
    // its own stream: not the draw of the vantage points, which uses `seed` as it is
    vtnt_rng::Rng::new(vtnt_rng::stafford13(seed ^ 0x005e_ed0f_dea1)).shuffle(&mut prefixes);
    let mut out = vec![Vec::new(); points];
    if points == 0 {
        return out;
    }
    for (i, mut p) in prefixes.into_iter().enumerate() {
        out[i % points].append(&mut p);
    }
    for o in &mut out {
        o.sort();
        o.dedup();
    }
    out
}

/// A split measurement's target list, as stored at its creation.
pub async fn targets(fleet: &Fleet, m: &Definition) -> crate::Result<Vec<IpAddr>> {
    let Some(t) = m.split else {
        bail!(Invalid, "measurement {} is not split", m.id)
    };
    let text = crate::targets::fetch_list(fleet, &m.tenant, &list_key(&m.id), t)
        .await
        .map_err(|e| {
            Error::Invalid(format!(
                "measurement {}: {e} (a split measurement's list is kept {} h)",
                m.id,
                crate::DATA_MAX_AGE.as_secs() / 3600
            ))
        })?;
    vtnt_jobspec::parse_target_list(&text)
        .map_err(|e| Error::Invalid(format!("measurement {}'s target list: {e}", m.id)))
}

/// Stores a split measurement's targets (checked) under [`list_key`].
pub async fn store(
    fleet: &Fleet,
    tenant: &str,
    id: &str,
    targets: &[IpAddr],
) -> crate::Result<TargetList> {
    let mut list = String::new();
    for t in targets {
        list.push_str(&t.to_string());
        list.push('\n');
    }
    crate::targets::store(fleet, tenant, &list_key(id), &list).await
}

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

/// `vtnt fleet measurement archive`: cycle `k` of measurement `id` as a gzip-compressed
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

#[cfg(test)]
mod tests {
    use super::*;

    fn list() -> Vec<IpAddr> {
        let mut v: Vec<IpAddr> = (0..40u32)
            .flat_map(|p| (1..=5u32).map(move |h| IpAddr::V4((0x6440_0000 + (p << 8) + h).into())))
            .collect();
        v.push("2001:db8:1::1".parse().unwrap());
        v.push("2001:db8:1:2::1".parse().unwrap());
        v.push("2001:db8:2::1".parse().unwrap());
        v
    }

    #[test]
    fn every_target_goes_to_one_point_and_prefixes_are_never_split() {
        let targets = list();
        for points in [1, 2, 3, 7] {
            for k in 0..10 {
                let d = deal(&targets, points, k);
                assert_eq!(d.len(), points);
                let mut all: Vec<IpAddr> = d.iter().flatten().copied().collect();
                all.sort();
                let mut want = targets.clone();
                want.sort();
                assert_eq!(all, want, "every target exactly once");
                let mut owner: BTreeMap<IpAddr, usize> = BTreeMap::new();
                for (i, share) in d.iter().enumerate() {
                    for t in share {
                        assert_eq!(*owner.entry(prefix_of(*t)).or_insert(i), i, "{t}");
                    }
                }
                // 41 v4 /24s and /48s... balanced within one prefix
                let counts: Vec<usize> = d
                    .iter()
                    .map(|s| {
                        let mut p: Vec<IpAddr> = s.iter().map(|t| prefix_of(*t)).collect();
                        p.dedup();
                        p.len()
                    })
                    .collect();
                let (lo, hi) = (counts.iter().min(), counts.iter().max());
                assert!(hi.unwrap() - lo.unwrap() <= 1, "{counts:?}");
            }
        }
        // the two addresses of 2001:db8:1::/48 stay together
        assert_eq!(
            prefix_of("2001:db8:1:2::1".parse().unwrap()),
            prefix_of("2001:db8:1::1".parse().unwrap())
        );
        // duplicates are dealt once
        let twice: Vec<IpAddr> = targets.iter().chain(&targets).copied().collect();
        assert_eq!(deal(&twice, 3, 1), deal(&targets, 3, 1));
    }

    #[test]
    fn the_same_cycle_deals_the_same_and_other_cycles_deal_anew() {
        let targets = list();
        let m = Definition {
            id: "CAMP1".into(),
            ..crate::measurement::tests::definition()
        };
        let dealt: Vec<_> = (0..10).map(|k| deal(&targets, 3, m.seed(k))).collect();
        for (k, d) in dealt.iter().enumerate() {
            assert_eq!(*d, deal(&targets, 3, m.seed(k as u64)), "cycle {k} again");
        }
        for w in dealt.windows(2) {
            assert_ne!(w[0], w[1]);
        }
        // a given prefix is not always on the same point
        let owner = |d: &Vec<Vec<IpAddr>>| d.iter().position(|s| s.contains(&targets[0]));
        let owners: std::collections::BTreeSet<_> = dealt.iter().map(owner).collect();
        assert!(owners.len() > 1, "{owners:?}");
    }
}
