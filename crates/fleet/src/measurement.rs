//! Measurements, not only jobs: `vtnt fleet measurement create|list|cancel`. A
//! measurement is a job (`vtnt` words, checked as `vtnt fleet submit` checks them), a
//! selection of vantage points (locations whose up nodes offer its runtime, how many) and
//! a schedule (once, or every N seconds until an end time or a number of cycles). Its
//! definition is the last message on `vtnt.meas.<tenant>.<id>` in the tenant's stream
//! `VTNT_MEAS_<tenant>` (in the tenant's own account, made by `vtnt fleet up`), so it
//! survives a controller's restart and no other tenant reaches it ([`crate::auth`]). Every
//! change is written against the sequence it was read at (JetStream's
//! `Nats-Expected-Last-Subject-Sequence`): two writers never both win, which is how a
//! cycle is recorded as started once ([`crate::schedule`] runs them).

use std::time::Duration;

use crate::error::{bail, ensure, ResultExt};
use async_nats::jetstream;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use vtnt_runtimes::Runtime;

use crate::controller::{self, NodeView, SubmitOptions};
use crate::{Connect, Error, Fleet, Mode, ANY};

/// The shortest interval between a periodic measurement's cycles: each cycle's
/// definition is written twice and its jobs are queued, which takes milliseconds, and
/// the controller looks every [`crate::schedule::TICK`].
pub const MIN_EVERY: Duration = Duration::from_secs(1);
/// How long one job is expected to take per target at least (a trace's probes' waits),
/// which the interval must leave room for: an interval shorter than its run is refused.
pub const EXPECTED_PER_TARGET: Duration = Duration::from_millis(500);

/// A tenant's stream of measurement definitions.
pub fn stream_name(tenant: &str) -> String {
    format!("VTNT_MEAS_{tenant}")
}

/// The subject of a definition (`*`: all of the tenant's).
pub fn subject(tenant: &str, id: &str) -> String {
    format!("vtnt.meas.{tenant}.{id}")
}

/// Where a measurement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Its first cycle is not yet due.
    Scheduled,
    /// At least one cycle started, more to come.
    Running,
    /// Its last cycle's jobs are queued.
    Done,
    Cancelled,
}

/// Which vantage points run each cycle: the locations (or `any`) whose up nodes offer
/// the runtime, the first `count` of them by name (all when `None`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selection {
    pub locations: Vec<String>,
    pub count: Option<usize>,
}

/// A measurement's definition, as stored (`Definition`: in this workspace a
/// "measurement" type is the engine's one trace or ping, ARCHITECTURE.md's glossary).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Definition {
    pub id: String,
    pub tenant: String,
    pub runtime: String,
    pub selection: Selection,
    /// The job in `vtnt`'s words, and its canonical line (`vtnt-jobspec`).
    pub words: Vec<String>,
    pub line: String,
    /// Seconds between cycles; `None`: once.
    pub every_s: Option<u64>,
    /// When cycle 0 is due (µs since the epoch); cycle k is due `k * every_s` later.
    pub start_us: u64,
    /// No cycle is started at or after this.
    pub until_us: Option<u64>,
    /// At most this many cycles.
    pub max_cycles: Option<u64>,
    pub state: State,
    /// Cycles recorded as started.
    pub started: u64,
    /// Cycles whose jobs are all queued (done, for the controller).
    pub placed: u64,
}

impl Definition {
    /// When cycle `k` is due (µs since the epoch).
    pub fn due_us(&self, k: u64) -> u64 {
        self.start_us + k * self.every_s.unwrap_or(0) * 1_000_000
    }

    /// Whether cycle `k` is within the measurement's end (time and count).
    pub fn has_cycle(&self, k: u64) -> bool {
        let most = match self.every_s {
            None => 1,
            Some(_) => self.max_cycles.unwrap_or(u64::MAX),
        };
        k < most && self.until_us.is_none_or(|u| self.due_us(k) < u)
    }

    /// Its runtime, as this vtnt knows it.
    pub fn runtime(&self) -> crate::Result<Runtime> {
        Runtime::ALL
            .into_iter()
            .find(|r| r.name() == self.runtime)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "measurement {}: no runtime `{}`",
                    self.id, self.runtime
                ))
            })
    }

    /// The job id of cycle `k` on the `i`-th selected vantage point: the same whoever
    /// places it, so a cycle placed again after a crash is deduplicated by the work queue.
    pub fn job_id(&self, k: u64, i: usize) -> String {
        format!("{}-c{k}-{i}", self.id)
    }
}

/// What `vtnt fleet measurement create` makes.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    pub tenant: String,
    pub runtime: Runtime,
    pub selection: Selection,
    pub every: Option<Duration>,
    /// From now.
    pub start_in: Duration,
    pub until_us: Option<u64>,
    pub max_cycles: Option<u64>,
    pub words: Vec<String>,
}

/// The tenant's definitions' stream, created unless it exists (by `vtnt fleet up`'s
/// setup user on a fleet with accounts).
pub async fn stream(fleet: &Fleet, tenant: &str) -> crate::Result<jetstream::stream::Stream> {
    crate::ensure_stream(
        &fleet.js,
        jetstream::stream::Config {
            name: stream_name(tenant),
            num_replicas: fleet.num_replicas,
            subjects: vec![subject(tenant, "*")],
            max_messages_per_subject: 1,
            ..Default::default()
        },
    )
    .await
    .nats(|| format!("tenant {tenant}'s measurements stream"))
}

/// The vantage points (locations) that `s` selects among `nodes` for `runtime`, sorted;
/// an error saying what there is when fewer than asked (or none) match.
pub fn select(nodes: &[NodeView], runtime: &str, s: &Selection) -> crate::Result<Vec<String>> {
    let mut found: Vec<String> = nodes
        .iter()
        .filter(|n| n.status == "up" && n.info.runtimes.iter().any(|r| r == runtime))
        .filter(|n| {
            s.locations
                .iter()
                .any(|l| l == ANY || *l == n.info.location)
        })
        .map(|n| n.info.location.clone())
        .collect();
    found.sort();
    found.dedup();
    let want = s.count.unwrap_or(found.len()).max(1);
    ensure!(
        found.len() >= want,
        NoNode,
        "the selection (locations {}, runtime `{runtime}`, {}) matches {} vantage point(s) with an up node{}",
        s.locations.join(","),
        s.count.map_or("all".to_string(), |c| format!("{c} wanted")),
        found.len(),
        if found.is_empty() { String::new() } else { format!(": {}", found.join(", ")) }
    );
    found.truncate(want);
    Ok(found)
}

/// Checks `o` (tokens, job, selection against the nodes up now, interval) and stores the
/// definition in one write; refused, nothing is stored.
pub fn create(c: &Connect, o: &CreateOptions) -> crate::Result<Definition> {
    create_named(c, o, nuid::next().to_string())
}

/// [`create`] under an id of the caller's (a token; refused if it exists).
pub fn create_named(c: &Connect, o: &CreateOptions, id: String) -> crate::Result<Definition> {
    crate::check_token("measurement", &id)?;
    ensure!(
        !o.selection.locations.is_empty(),
        Invalid,
        "a measurement needs --location (a location, or `any`)"
    );
    let mut line = None;
    for l in &o.selection.locations {
        let job = controller::job_line(&SubmitOptions {
            runtime: o.runtime,
            location: l.clone(),
            mode: Mode::Wait,
            tenant: o.tenant.clone(),
            words: o.words.clone(),
        })?;
        ensure!(
            job.targets.is_none(),
            Invalid,
            "a measurement's job takes at most {} targets",
            crate::INLINE_TARGETS
        );
        line = Some(job.line);
    }
    let line = line.unwrap_or_default();
    if let Some(every) = o.every {
        ensure!(
            every >= MIN_EVERY,
            Invalid,
            "--every {every:?} is shorter than the floor of {MIN_EVERY:?}"
        );
        let targets = vtnt_job::parse_words(&o.words, vtnt_job::Vantage::Lab)?
            .spec
            .target_list()
            .len() as u32;
        let run = EXPECTED_PER_TARGET * targets;
        ensure!(
            every > run,
            Invalid,
            "--every {every:?} is shorter than a cycle's expected run ({targets} target(s) x {EXPECTED_PER_TARGET:?} = {run:?})"
        );
    }
    let now = crate::now_us();
    let m = Definition {
        id,
        tenant: o.tenant.clone(),
        runtime: o.runtime.name().to_string(),
        selection: o.selection.clone(),
        words: o.words.clone(),
        line,
        every_s: o.every.map(|d| d.as_secs()),
        start_us: now + o.start_in.as_micros() as u64,
        until_us: o.until_us,
        max_cycles: o.max_cycles,
        state: State::Scheduled,
        started: 0,
        placed: 0,
    };
    ensure!(
        m.has_cycle(0),
        Invalid,
        "the measurement ends before its first cycle (--until, --cycles)"
    );
    crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet measurement create").await?;
        select(&controller::nodes(&fleet).await?, &m.runtime, &m.selection)?;
        stream(&fleet, &o.tenant).await?;
        write(&fleet, &m, 0).await?;
        Ok(m.clone())
    })
}

/// Stores `m` unless its subject moved past sequence `seq` (0: it must be new); the new
/// sequence, or an error when another write came first.
pub async fn write(fleet: &Fleet, m: &Definition, seq: u64) -> crate::Result<u64> {
    let mut h = async_nats::HeaderMap::new();
    h.insert(
        "Nats-Expected-Last-Subject-Sequence",
        seq.to_string().as_str(),
    );
    let ack = fleet
        .js
        .publish_with_headers(
            subject(&m.tenant, &m.id),
            h,
            serde_json::to_vec(m)
                .parse(|| format!("measurement {}", m.id))?
                .into(),
        )
        .await
        .nats(|| format!("storing measurement {}", m.id))?
        .await
        .nats(|| format!("storing measurement {} (changed meanwhile?)", m.id))?;
    Ok(ack.sequence)
}

/// Every definition of the tenant, with its sequence, by id.
pub async fn all(fleet: &Fleet, tenant: &str) -> crate::Result<Vec<(Definition, u64)>> {
    let st = stream(fleet, tenant).await?;
    let what = || format!("listing tenant {tenant}'s measurements");
    let mut subjects = st
        .info_with_subjects(subject(tenant, "*"))
        .await
        .nats(what)?;
    let mut names = Vec::new();
    while let Some((s, _)) = subjects.try_next().await.nats(what)? {
        names.push(s);
    }
    names.sort();
    let mut out = Vec::new();
    for s in names {
        let m = st
            .get_last_raw_message_by_subject(&s)
            .await
            .nats(|| format!("reading {s}"))?;
        let def: Definition =
            serde_json::from_slice(&m.payload).parse(|| format!("the definition on {s}"))?;
        out.push((def, m.sequence));
    }
    Ok(out)
}

/// One definition and its sequence; an error naming it when the tenant has none such.
pub async fn one(fleet: &Fleet, tenant: &str, id: &str) -> crate::Result<(Definition, u64)> {
    let st = stream(fleet, tenant).await?;
    let m = st
        .get_last_raw_message_by_subject(&subject(tenant, id))
        .await
        .map_err(|_| Error::Invalid(format!("tenant {tenant} has no measurement `{id}`")))?;
    let def = serde_json::from_slice(&m.payload).parse(|| format!("measurement {id}"))?;
    Ok((def, m.sequence))
}

/// `vtnt fleet measurement list`.
pub fn list(c: &Connect, tenant: &str) -> crate::Result<Vec<Definition>> {
    crate::check_token("--tenant", tenant)?;
    crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet measurement list").await?;
        Ok(all(&fleet, tenant)
            .await?
            .into_iter()
            .map(|(m, _)| m)
            .collect())
    })
}

/// `vtnt fleet measurement cancel`: no cycle starts after it (one already started still
/// has its jobs queued); a finished or cancelled one is refused.
pub fn cancel(c: &Connect, tenant: &str, id: &str) -> crate::Result<Definition> {
    crate::check_token("--tenant", tenant)?;
    crate::check_token("the measurement", id)?;
    crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet measurement cancel").await?;
        // again when the controller wrote between our read and our write
        for _ in 0..5 {
            let (mut m, seq) = one(&fleet, tenant, id).await?;
            ensure!(
                matches!(m.state, State::Scheduled | State::Running),
                Invalid,
                "measurement {id} is already {:?}",
                m.state
            );
            m.state = State::Cancelled;
            if write(&fleet, &m, seq).await.is_ok() {
                return Ok(m);
            }
        }
        bail!(Invalid, "measurement {id} kept changing; try again")
    })
}
