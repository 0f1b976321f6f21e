//! `vtnt fleet measurement run`: the controller that starts a tenant's measurements'
//! cycles on time ([`crate::measurement`]). It keeps nothing of its own: each cycle is
//! first recorded as started in the definition (a write against the sequence it read, so
//! one controller wins), then its jobs are queued in wait mode under ids of the cycle's
//! own (`<id>-c<k>-<i>`), then it is recorded as placed. A controller that stopped between
//! the two records places that cycle again on its next start, and the work queue drops
//! the jobs it already holds (their message ids, within its window): no cycle is lost and
//! none runs twice. A cycle that fell due while no controller ran starts when one does,
//! each in turn. Cycle k's vantage points are a draw seeded by the measurement's id and k
//! ([`Definition::seed`]): the same for a cycle placed again, another for the next cycle.
//! A cycle is started only within the tenant's quota ([`crate::quota::check`]); over it,
//! it waits. A split campaign's cycle deals its target list's /24s (/48s) across the
//! vantage points drawn, from the same seed ([`crate::campaign::deal`]): one job per
//! vantage point with a share, the same jobs when placed again. How many jobs a cycle
//! queued is recorded with it (what its archive waits for).

use std::time::Duration;

use crate::controller::{self, JobLine, SubmitOptions};
use crate::measurement::{self, Definition, State};
use crate::{Connect, Fleet, Mode};

/// How often the controller looks at the definitions.
pub const TICK: Duration = Duration::from_millis(200);

/// Runs the tenant's measurements' cycles until stopped (SIGINT or SIGTERM, when armed),
/// or, with `until_idle`, until none is scheduled or running.
pub fn run(c: &Connect, tenant: &str, until_idle: bool) -> crate::Result<()> {
    crate::check_token("--tenant", tenant)?;
    crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet measurement run").await?;
        // what was last logged of each measurement: a cycle waiting for its quota says so
        // once, not at every tick
        let mut said: std::collections::HashMap<String, String> = Default::default();
        loop {
            let mut active = 0;
            for (m, seq) in measurement::all(&fleet, tenant).await? {
                if !matches!(m.state, State::Scheduled | State::Running) {
                    continue;
                }
                active += 1;
                match step(&fleet, m.clone(), seq).await {
                    Err(e) => {
                        let text = crate::chain(&e);
                        if said.get(&m.id) != Some(&text) {
                            tracing::warn!(measurement = %m.id, "{text}");
                            said.insert(m.id.clone(), text);
                        }
                    }
                    Ok(()) => {
                        said.remove(&m.id);
                    }
                }
            }
            if until_idle && active == 0 {
                return Ok(());
            }
            tokio::time::sleep(TICK).await;
        }
    })
}

/// Does what is due for `m` (read at `seq`): places a cycle recorded as started but not
/// as placed, or starts the next due cycle, or records the end.
async fn step(fleet: &Fleet, mut m: Definition, seq: u64) -> crate::Result<()> {
    if m.placed < m.started {
        let k = m.placed;
        let jobs = place_cycle(fleet, &m, k).await?;
        if m.cycle_jobs.len() as u64 == k {
            m.cycle_jobs.push(jobs);
        }
        m.placed = k + 1;
        measurement::write(fleet, &m, seq).await?;
        tracing::info!(measurement = %m.id, cycle = k, "cycle placed");
        return Ok(());
    }
    let k = m.started;
    if !m.has_cycle(k) {
        // a split campaign's list is no longer needed: its last cycle is placed
        if m.split.is_some() {
            crate::campaign::remove(fleet, &m.tenant, &m.id).await?;
        }
        m.state = State::Done;
        measurement::write(fleet, &m, seq).await?;
        tracing::info!(measurement = %m.id, cycles = k, "measurement done");
        return Ok(());
    }
    if crate::now_us() < m.due_us(k) {
        return Ok(());
    }
    // the tenant's quota before the cycle is recorded as started: over it, the cycle
    // waits (the error is logged) and is tried again at the next tick
    let jobs = cycle_jobs(fleet, &m, k).await?;
    let probes = jobs.iter().map(|(_, j)| j.probes).sum();
    crate::quota::check(fleet, &m.tenant, jobs.len() as u64, probes).await?;
    m.started = k + 1;
    m.state = State::Running;
    // the record that this cycle started; lost to a concurrent write (a cancel, another
    // controller), nothing is placed
    let seq = measurement::write(fleet, &m, seq).await?;
    tracing::info!(measurement = %m.id, cycle = k, "cycle started");
    Box::pin(step(fleet, m, seq)).await
}

/// Cycle `k`'s jobs, one on each vantage point drawn for it ([`Definition::seed`]); of a
/// split campaign, one on each vantage point dealt a share of its targets.
async fn cycle_jobs(
    fleet: &Fleet,
    m: &Definition,
    k: u64,
) -> crate::Result<Vec<(SubmitOptions, JobLine)>> {
    let runtime = m.runtime()?;
    let nodes = controller::nodes(fleet).await?;
    let points = measurement::select(&nodes, &m.runtime, &m.selection, m.seed(k))?;
    let words: Vec<Vec<String>> = match m.split {
        None => vec![m.words.clone(); points.len()],
        Some(list) => {
            let targets = crate::campaign::targets(fleet, &m.tenant, &m.id, list).await?;
            crate::campaign::deal(&targets, points.len(), m.seed(k))
                .into_iter()
                .map(|share| match share.is_empty() {
                    // fewer prefixes than vantage points: no job
                    true => Vec::new(),
                    false => m
                        .words
                        .iter()
                        .cloned()
                        .chain(share.iter().map(|t| t.to_string()))
                        .collect(),
                })
                .collect()
        }
    };
    points
        .into_iter()
        .zip(words)
        .filter(|(_, w)| !w.is_empty())
        .map(|(location, words)| {
            let o = SubmitOptions {
                runtime,
                location,
                mode: Mode::Wait,
                tenant: m.tenant.clone(),
                words,
            };
            let job = controller::job_line(&o)?;
            Ok((o, job))
        })
        .collect()
}

/// Queues cycle `k`'s job on each vantage point drawn for it; how many.
async fn place_cycle(fleet: &Fleet, m: &Definition, k: u64) -> crate::Result<u64> {
    let jobs = cycle_jobs(fleet, m, k).await?;
    let n = jobs.len() as u64;
    for (i, (o, job)) in jobs.into_iter().enumerate() {
        let cycle = crate::proto::CycleOf {
            measurement: m.id.clone(),
            cycle: k,
        };
        controller::place_as(fleet, &o, job, m.job_id(k, i), Some(cycle)).await?;
    }
    Ok(n)
}
