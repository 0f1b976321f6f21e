//! Measurements, not only jobs: `vtnt fleet measurement create|list|cancel`. A
//! measurement is a job (`vtnt` words, checked as `vtnt fleet submit` checks them), a
//! selection of vantage points (locations whose up nodes offer its runtime, how many) and
//! a schedule (once, or every N seconds until an end time or a number of cycles), within
//! the tenant's quota ([`crate::quota`]). Its
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

use crate::controller::{self, SubmitOptions};
pub use crate::vantage::{select, Selection};
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
    /// A split campaign's target list, kept in the tenant's data stream
    /// ([`crate::campaign`]): each cycle deals its /24s (/48s) to the cycle's vantage
    /// points, and the job's words name no target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<crate::proto::TargetList>,
    /// How many jobs each placed cycle queued, cycle by cycle (what an archive of the
    /// cycle waits for; absent from definitions stored before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycle_jobs: Vec<u64>,
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

    /// The seed of cycle `k`'s draw of vantage points: a function of the measurement's id
    /// and `k` alone, so whoever places the cycle, again after a crash, draws the same.
    pub fn seed(&self, k: u64) -> u64 {
        // FNV-1a of the id, then mixed with the cycle
        let id = self.id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        vtnt_rng::stafford13(id ^ vtnt_rng::stafford13(k))
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
    /// `--split FILE`'s targets: dealt by /24 (/48) across each cycle's vantage points
    /// ([`crate::campaign`]), appended to `words`.
    pub split: Option<Vec<std::net::IpAddr>>,
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

/// Checks `o` (tokens, job, selection against the nodes up now, interval) and stores the
/// definition in one write; refused, nothing is stored.
pub fn create(c: &Connect, o: &CreateOptions) -> crate::Result<Definition> {
    create_named(c, o, nuid::next().to_string())
}

/// [`create`] under an id of the caller's (a token; refused if it exists).
pub fn create_named(c: &Connect, o: &CreateOptions, id: String) -> crate::Result<Definition> {
    crate::check_token("measurement", &id)?;
    let s = &o.selection;
    ensure!(
        !(s.locations.is_empty() && s.tags.is_empty() && s.asns.is_empty() && s.countries.is_empty()),
        Invalid,
        "a measurement needs a selection: --location (a location, or `any`), --tag, --asn or --country"
    );
    s.check()?;
    // a split campaign's job: its words and every target, checked as one job
    let mut words = o.words.clone();
    if let Some(targets) = &o.split {
        ensure!(
            !targets.is_empty(),
            Invalid,
            "--split: the target list is empty"
        );
        ensure!(
            vtnt_job::parse_words(&o.words, vtnt_job::Vantage::Lab)
                .map_or(true, |j| j.spec.target_list().is_empty()),
            Invalid,
            "with --split the job's words name no target: --split's list is dealt across the vantage points"
        );
        words.extend(targets.iter().map(|t| t.to_string()));
    }
    let mut job = None;
    for l in s
        .locations
        .iter()
        .map(String::as_str)
        .chain(s.locations.is_empty().then_some(ANY))
    {
        let checked = controller::job_line(&SubmitOptions {
            runtime: o.runtime,
            location: l.to_string(),
            mode: Mode::Wait,
            tenant: o.tenant.clone(),
            words: words.clone(),
        })?;
        ensure!(
            o.split.is_some() || checked.targets.is_none(),
            Invalid,
            "a measurement's job takes at most {} targets",
            crate::INLINE_TARGETS
        );
        job = Some(checked);
    }
    let (line, probes) = job.map_or((String::new(), 0), |j| (j.line, j.probes));
    if let Some(every) = o.every {
        ensure!(
            every >= MIN_EVERY,
            Invalid,
            "--every {every:?} is shorter than the floor of {MIN_EVERY:?}"
        );
        // a split campaign's vantage points share its targets
        let targets = vtnt_job::parse_words(&words, vtnt_job::Vantage::Lab)?
            .spec
            .target_list()
            .len();
        let targets = match o.split {
            Some(_) => targets.div_ceil(s.count.unwrap_or(1).max(1)),
            None => targets,
        } as u32;
        let run = EXPECTED_PER_TARGET * targets;
        ensure!(
            every > run,
            Invalid,
            "--every {every:?} is shorter than a cycle's expected run ({targets} target(s) x {EXPECTED_PER_TARGET:?} = {run:?})"
        );
    }
    let now = crate::now_us();
    let mut m = Definition {
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
        split: None,
        cycle_jobs: Vec::new(),
    };
    ensure!(
        m.has_cycle(0),
        Invalid,
        "the measurement ends before its first cycle (--until, --cycles)"
    );
    crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet measurement create").await?;
        let points = select(
            &controller::nodes(&fleet).await?,
            &m.runtime,
            &m.selection,
            m.seed(0),
        )?;
        // a cycle's jobs run at once, each up to its probes (a split campaign's share
        // the list's)
        let n = points.len() as u64;
        let probes = if o.split.is_some() {
            probes
        } else {
            n * probes
        };
        crate::quota::check(&fleet, &o.tenant, n, probes).await?;
        stream(&fleet, &o.tenant).await?;
        if let Some(targets) = &o.split {
            m.split = Some(crate::campaign::store(&fleet, &o.tenant, &m.id, targets).await?);
        }
        write(&fleet, &m, 0).await?;
        Ok(m.clone())
    })
}

/// Stores `m` unless its subject moved past sequence `seq` (0: it must be new); the new
/// sequence, or an error when another write came first.
pub async fn write(fleet: &Fleet, m: &Definition, seq: u64) -> crate::Result<u64> {
    let body = serde_json::to_vec(m).parse(|| format!("measurement {}", m.id))?;
    let what = format!("measurement {}", m.id);
    match crate::cas::write_if(&fleet.js, &subject(&m.tenant, &m.id), seq, body, &what).await? {
        Some(written) => Ok(written),
        None => bail!(Invalid, "storing {what}: it changed meanwhile"),
    }
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
                // a split campaign's list, unless a started cycle still needs it
                if m.split.is_some() && m.placed == m.started {
                    crate::campaign::remove(&fleet, tenant, id)
                        .await
                        .context(|| format!("measurement {id} is cancelled"))?;
                }
                return Ok(m);
            }
        }
        bail!(Invalid, "measurement {id} kept changing; try again")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{NodeInfo, NodeState};
    use crate::vantage::NodeView;

    fn node(name: &str, location: &str, tags: &[&str], asn: u32, country: &str) -> NodeView {
        NodeView::new(
            NodeInfo {
                node: name.into(),
                location: location.into(),
                slots: 1,
                busy: 0,
                runtimes: vec!["native".into()],
                heartbeat_ms: 1000,
                deadline_ms: 3000,
                state: NodeState::Up,
                clock_sync: "yes".into(),
                jobs_done: 0,
                jobs_failed: 0,
                reconnects: 0,
                tags: tags.iter().map(|t| t.to_string()).collect(),
                asn: Some(asn),
                country: Some(country.into()),
                opt_out: Default::default(),
                clock: None,
            },
            0,
        )
    }

    fn sel(tags: &[&str], asns: &[u32], countries: &[&str], count: Option<usize>) -> Selection {
        Selection {
            locations: Vec::new(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            asns: asns.to_vec(),
            countries: countries.iter().map(|c| c.to_string()).collect(),
            count,
        }
    }

    fn fleet_of_six() -> Vec<NodeView> {
        vec![
            node("n1", "fr", &["ixp", "v6"], 64500, "FR"),
            node("n2", "pl", &["ixp"], 64501, "PL"),
            node("n3", "de", &["v6"], 64500, "DE"),
            node("n4", "ca", &["ixp", "v6"], 64502, "CA"),
            node("n5", "sg", &["ixp", "v6"], 64503, "SG"),
            node("n6", "au", &["ixp", "v6"], 64504, "AU"),
        ]
    }

    #[test]
    fn tags_as_and_country_select_vantage_points() {
        let nodes = fleet_of_six();
        let got = |s: &Selection| select(&nodes, "native", s, 0);
        assert_eq!(
            got(&sel(&["ixp", "v6"], &[], &[], None)).unwrap(),
            ["au", "ca", "fr", "sg"]
        );
        assert_eq!(got(&sel(&[], &[64500], &[], None)).unwrap(), ["de", "fr"]);
        assert_eq!(
            got(&sel(&["ixp"], &[], &["FR", "PL"], None)).unwrap(),
            ["fr", "pl"]
        );
        let none = got(&sel(&["ixp"], &[], &["DE"], None))
            .unwrap_err()
            .to_string();
        assert!(
            none.contains(
                "tags ixp, countries DE, runtime `native`, all) matches 0 vantage point(s)"
            ),
            "{none}"
        );
        let few = got(&sel(&[], &[64500], &[], Some(3)))
            .unwrap_err()
            .to_string();
        assert!(
            few.contains("AS64500")
                && few.contains("matches 2 vantage point(s) with an up node: de, fr"),
            "{few}"
        );
        // a location where another node, not selected, would take the jobs is left out
        let mut mixed = nodes.clone();
        mixed.push(node("n7", "fr", &[], 64500, "FR"));
        let out = select(&mixed, "native", &sel(&["ixp"], &[], &["FR"], None), 0)
            .unwrap_err()
            .to_string();
        assert!(
            out.contains("left out, since other nodes there would take its jobs: fr"),
            "{out}"
        );
        assert_eq!(
            select(&mixed, "native", &sel(&[], &[64500], &[], None), 0).unwrap(),
            ["de", "fr"]
        );
    }

    /// A periodic definition on 2 vantage points, for tests.
    fn definition() -> Definition {
        Definition {
            id: "MEAS1".into(),
            tenant: "t".into(),
            runtime: "native".into(),
            selection: sel(&[], &[], &[], Some(2)),
            words: Vec::new(),
            line: String::new(),
            every_s: Some(60),
            start_us: 0,
            until_us: None,
            max_cycles: None,
            state: State::Running,
            started: 0,
            placed: 0,
            split: None,
            cycle_jobs: Vec::new(),
        }
    }

    #[test]
    fn each_cycle_draws_its_own_vantage_points_and_the_same_when_placed_again() {
        let nodes = fleet_of_six();
        let m = definition();
        let draw = |k: u64| select(&nodes, "native", &m.selection, m.seed(k)).unwrap();
        let cycles: Vec<Vec<String>> = (0..20).map(draw).collect();
        for (k, c) in cycles.iter().enumerate() {
            assert_eq!(c.len(), 2);
            assert_eq!(*c, draw(k as u64), "cycle {k} drawn again");
        }
        // successive cycles spread over the six
        let mut seen: Vec<&String> = cycles.iter().flatten().collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 6, "{cycles:?}");
        assert!(cycles.windows(2).any(|w| w[0] != w[1]), "{cycles:?}");
        // another measurement, another draw
        let other = Definition {
            id: "MEAS2".into(),
            ..m.clone()
        };
        assert!((0..20).any(|k| other.seed(k) != m.seed(k)));
        // a definition stored before selection by tags still reads
        let old = r#"{"locations":["fr"],"count":null}"#;
        let s: Selection = serde_json::from_str(old).unwrap();
        assert_eq!(
            s,
            Selection {
                locations: vec!["fr".into()],
                ..sel(&[], &[], &[], None)
            }
        );
    }
}
