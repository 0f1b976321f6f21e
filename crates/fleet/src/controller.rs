//! The controller's commands: `vtnt fleet submit` (a job placed in wait or discard mode,
//! within the tenant's quota, on a location or one drawn among those of given tags, AS or
//! country),
//! `vtnt fleet status` (nodes from their heartbeats, the work queues' backlog) and
//! `vtnt fleet results` (each job's records, deduplicated and in order, then its
//! summary); the pieces of `submit` serve `vtnt fleet replay` too (`crate::replay`).

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use crate::error::{ensure, ResultExt};
use crate::Error;
use async_nats::jetstream;
use futures::StreamExt;
use serde::Serialize;
use vtnt_job::{Format, Vantage};
use vtnt_runtimes::Runtime;

use crate::proto::{DeployReply, Event, JobRequest, JobSummary, Mode, Outcome};
pub use crate::vantage::{nodes, NodeView};
use crate::vantage::{select, Selection};
use crate::{Connect, Fleet, ANY};

/// How long a discard-mode request waits for an agent that is listening to answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How many times a discard-mode job is asked for while agents answer that they are busy.
const DISCARD_ASKS: u32 = 3;

/// What `vtnt fleet submit` places.
#[derive(Debug, Clone)]
pub struct SubmitOptions {
    pub runtime: Runtime,
    pub location: String,
    pub mode: Mode,
    pub tenant: String,
    /// The job in `vtnt`'s words (`trace -q 1 192.0.2.1`).
    pub words: Vec<String>,
}

/// Checks the job as `vtnt run` does, then places it; the event says what became of it.
/// With `among` (tags, AS, country), the job goes to one location drawn at random among
/// those whose up nodes offering its runtime all match ([`crate::measurement::select`]),
/// within `o.location` unless that is `any`.
pub fn submit(c: &Connect, o: &SubmitOptions, among: Option<&Selection>) -> crate::Result<Event> {
    let line = job_line(o)?;
    if let Some(s) = among {
        s.check()?;
    }
    crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet submit").await?;
        let nodes = nodes(&fleet).await?;
        let mut o = o.clone();
        if let Some(s) = among {
            let s = Selection {
                locations: if o.location == ANY {
                    Vec::new()
                } else {
                    vec![o.location.clone()]
                },
                count: Some(1),
                ..s.clone()
            };
            let seed = vtnt_rng::stafford13(crate::now_us());
            o.location = select(&nodes, o.runtime.name(), &s, seed)?.remove(0);
        }
        let o = &o;
        check_placeable(&nodes, o)?;
        // the tenant's quota, before anything is placed (the agent checks it again)
        crate::quota::check(&fleet, &o.tenant, 1, line.probes).await?;
        // where its results will land, before an agent stores them
        fleet.results(&o.tenant).await?;
        place(&fleet, o, line).await
    })
}

/// A checked job: its canonical line and, past [`INLINE_TARGETS`](crate::INLINE_TARGETS)
/// targets, its target list apart (the line says `targets=@module`), one address a line.
#[derive(Debug, Clone)]
pub struct JobLine {
    pub line: String,
    pub targets: Option<String>,
    /// The most probes it sends ([`crate::quota::probe_bound`]).
    pub probes: u64,
}

/// The job of `o` as its canonical line, once its words, location, tenant and size are
/// checked as `vtnt run` checks them.
pub fn job_line(o: &SubmitOptions) -> crate::Result<JobLine> {
    crate::check_token("--location", &o.location)?;
    crate::check_token("--tenant", &o.tenant)?;
    let job = vtnt_job::parse_words(&o.words, Vantage::Lab)?;
    ensure!(
        job.format == Format::Json && job.output.is_none(),
        Invalid,
        "a fleet job prints scamper JSON (no -O, no -o); its records come back through `vtnt fleet results`"
    );
    ensure!(
        !job.some_bad,
        Invalid,
        "some targets were refused (above); submit only targets the policy accepts"
    );
    let n = job.spec.target_list().len();
    let (most, whose) = match o.runtime.max_targets() {
        Some(m) if m < crate::MAX_TARGETS => (m, format!("the {} runtime", o.runtime.name())),
        _ => (crate::MAX_TARGETS, "a fleet job".to_string()),
    };
    ensure!(
        n <= most,
        Invalid,
        "{whose} takes at most {most} targets and this job has {n}: split it into several jobs"
    );
    let (line, targets) = vtnt_jobspec::encode_split(&job.spec, crate::INLINE_TARGETS);
    Ok(JobLine {
        line,
        targets,
        probes: crate::quota::probe_bound(&job.spec),
    })
}

/// Refuses a job that no known node could run: none in its location offers its runtime.
pub fn check_placeable(nodes: &[NodeView], o: &SubmitOptions) -> crate::Result<()> {
    let rt = o.runtime.name();
    ensure!(
        nodes
            .iter()
            .any(|n| (o.location == ANY || n.info.location == o.location)
                && n.info.runtimes.iter().any(|r| r == rt)),
        NoNode,
        "no node {} runs `{rt}` (known nodes: {})",
        if o.location == ANY {
            "anywhere".to_string()
        } else {
            format!("in location `{}`", o.location)
        },
        describe(nodes)
    );
    Ok(())
}

/// Places the job `job` of `o` (checked: [`job_line`], [`check_placeable`]) in its mode;
/// a long target list goes first ([`crate::targets`]).
pub async fn place(fleet: &Fleet, o: &SubmitOptions, job: JobLine) -> crate::Result<Event> {
    place_as(fleet, o, job, nuid::next().to_string(), None).await
}

/// [`place`] under the job id `id`, of a measurement's cycle `cycle` (its id is the
/// cycle's: placed again, it is deduplicated by the work queue within its window).
pub async fn place_as(
    fleet: &Fleet,
    o: &SubmitOptions,
    job: JobLine,
    id: String,
    cycle: Option<crate::proto::CycleOf>,
) -> crate::Result<Event> {
    // connected before the clocks start (a tenant's requests' user connects when first
    // needed): the times are the placement's
    let requests = match o.mode {
        Mode::Discard => Some(fleet.requests().await?),
        Mode::Wait => None,
    };
    let submitted_us = crate::now_us();
    let targets = match &job.targets {
        Some(list) => Some(crate::targets::store(fleet, &o.tenant, &id, list).await?),
        None => None,
    };
    let req = JobRequest {
        id,
        tenant: o.tenant.clone(),
        runtime: o.runtime.name().to_string(),
        location: o.location.clone(),
        line: job.line,
        targets,
        submitted_us,
        cycle,
    };
    let payload: bytes::Bytes = serde_json::to_vec(&req)
        .parse("encoding the job request")?
        .into();
    let t0 = Instant::now();
    let outcome = match o.mode {
        Mode::Wait => {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Nats-Msg-Id", req.id.as_str());
            fleet
                .js
                .publish_with_headers(crate::wq_subject(&o.tenant, &o.location), h, payload)
                .await?
                .await
                .nats("queueing the job")?;
            Outcome::Queued
        }
        Mode::Discard => {
            let subject = crate::deploy_subject(&o.tenant, &o.location);
            let mut asked = 0;
            loop {
                asked += 1;
                let answer = requests
                    .ok_or_else(|| Error::Invalid("no connection for requests".into()))?
                    .request(subject.clone(), payload.clone());
                match tokio::time::timeout(REQUEST_TIMEOUT, answer).await {
                    Err(_) => {
                        return Err(Error::TimedOut(format!(
                            "no agent answered within {REQUEST_TIMEOUT:?}"
                        )))
                    }
                    Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
                        break Outcome::Discarded {
                            reason: "no free slot".into(),
                        }
                    }
                    Ok(Err(e)) => return Err(e).nats("asking the agents"),
                    Ok(Ok(m)) => {
                        let r: DeployReply =
                            serde_json::from_slice(&m.payload).parse("the agent's reply")?;
                        match (r.accepted, r.busy, r.reason) {
                            (true, _, _) => break Outcome::Accepted { node: r.node },
                            // it filled its last slot as the request came, and has left
                            // the group since: another may be free
                            (false, true, _) if asked < DISCARD_ASKS => continue,
                            (false, _, reason) => {
                                break Outcome::Discarded {
                                    reason: reason.unwrap_or_else(|| "refused".into()),
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(Event {
        job: req.id,
        mode: o.mode,
        location: req.location,
        runtime: req.runtime,
        tenant: req.tenant,
        outcome,
        submitted_us,
        decision_us: t0.elapsed().as_micros() as u64,
    })
}

/// What `vtnt fleet status` shows a tenant.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub nodes: Vec<NodeView>,
    /// The tenant's jobs waiting, per work-queue subject, as an agent counted them
    /// ([`crate::backlog`]); `None` while no agent is up to count them.
    pub backlog: Option<crate::backlog::Backlog>,
    /// Messages stored in the tenant's results stream (records and summaries).
    pub results_stored: u64,
}

pub fn status(c: &Connect, tenant: &str) -> crate::Result<Status> {
    crate::check_token("--tenant", tenant)?;
    crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet status").await?;
        let nodes = nodes(&fleet).await?;
        let results_stored =
            match crate::existing(&fleet.js, &crate::results_stream(tenant)).await? {
                Some(mut r) => r.info().await?.state.messages,
                None => 0,
            };
        let backlog = if nodes.iter().any(|n| !n.down && n.status != "stopped") {
            crate::backlog::ask(&fleet, tenant).await?
        } else {
            None
        };
        Ok(Status {
            nodes,
            backlog,
            results_stored,
        })
    })
}

fn describe(nodes: &[NodeView]) -> String {
    if nodes.is_empty() {
        return "none; start `vtnt agent`".into();
    }
    nodes
        .iter()
        .map(|n| {
            format!(
                "{} in {} ({})",
                n.info.node,
                n.info.location,
                n.info.runtimes.join(",")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// One job's results.
#[derive(Debug, Clone)]
pub struct JobResults {
    pub job: String,
    /// Its scamper JSON records, in order, each once.
    pub records: Vec<String>,
    /// `None`: the job has not finished (or its agent died before it published it).
    pub summary: Option<JobSummary>,
}

/// Reads the results stream (one job's, or all), and hands each job to `each` once its
/// summary is in, in the order the summaries were stored; without `follow` it stops at
/// the end of the stream and then hands over the jobs still without a summary. An error
/// of `each` (of the caller's type) ends the reading and is returned as it is.
pub fn results<E: From<crate::Error>>(
    c: &Connect,
    tenant: &str,
    job: Option<&str>,
    follow: bool,
    mut each: impl FnMut(JobResults) -> Result<(), E>,
) -> Result<(), E> {
    crate::check_token("--tenant", tenant)?;
    if let Some(j) = job {
        crate::check_token("--job", j)?;
    }
    crate::block_on(async {
        let results = c
            .fleet("vtnt fleet results")
            .await?
            .1
            .results(tenant)
            .await?;
        let filter = crate::results_subject(tenant, job.unwrap_or("*"), "*");
        let mut consumer = results
            .create_consumer(jetstream::consumer::pull::OrderedConfig {
                filter_subject: filter,
                deliver_policy: jetstream::consumer::DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .nats("reading the results stream")?;
        let mut open: BTreeMap<String, BTreeMap<u64, String>> = BTreeMap::new();
        let mut finished: HashSet<String> = HashSet::new();
        let empty = consumer
            .info()
            .await
            .nats("reading the results stream")?
            .num_pending
            == 0;
        if !empty || follow {
            let mut msgs = consumer
                .messages()
                .await
                .nats("reading the results stream")?;
            while let Some(m) = msgs.next().await {
                let m = m.nats("reading the results stream")?;
                let pending = m.info().map_or(0, |i| i.pending);
                let parts: Vec<&str> = m.subject.split('.').collect();
                if let [_, _, _tenant, job, kind] = parts[..] {
                    let job = job.to_string();
                    match kind {
                        "r" if !finished.contains(&job) => {
                            let idx = m
                                .headers
                                .as_ref()
                                .and_then(|h| h.get("Vtnt-Index"))
                                .and_then(|v| v.as_str().parse().ok());
                            if let Some(i) = idx {
                                open.entry(job).or_default().entry(i).or_insert_with(|| {
                                    String::from_utf8_lossy(&m.payload).into_owned()
                                });
                            }
                        }
                        "s" if finished.insert(job.clone()) => {
                            let summary: JobSummary = serde_json::from_slice(&m.payload)
                                .parse(|| format!("job {job}'s summary"))?;
                            let records = open.remove(&job).unwrap_or_default();
                            each(JobResults {
                                job,
                                records: records.into_values().collect(),
                                summary: Some(summary),
                            })?;
                        }
                        _ => {}
                    }
                }
                if pending == 0 && !follow {
                    break;
                }
            }
        }
        for (job, records) in open {
            each(JobResults {
                job,
                records: records.into_values().collect(),
                summary: None,
            })?;
        }
        Ok(())
    })
}
