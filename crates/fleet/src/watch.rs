//! Events that trigger measurements (docs/fleet.md "Events"). An [`EventSource`] says
//! what happened and what to measure because of it ([`Event`]: where, toward which
//! targets, under an id that is a function of the event); [`react`] turns each event into
//! a one-off measurement of the job it was given and reports both. Two sources:
//! path changes in a periodic measurement's own traces ([`paths`], `vtnt fleet
//! measurement watch`) and routing changes read from a BGP speaker ([`routes`], `vtnt
//! fleet measurement watch-routes`). An event whose measurement exists already was
//! handled by an earlier watch, so a watch started again after a crash triggers none
//! twice.

pub mod paths;
pub mod routes;

use serde::Serialize;
use vtnt_runtimes::Runtime;

pub use paths::{first_change, trace_path, Path, PathChange, PathChanges, PathWatch};
pub use routes::{RoutingChange, RoutingChanges, ROUTES_POLL};

use crate::error::bail;
use crate::measurement::{self, CreateOptions, Selection};
use crate::{Connect, Error};

/// What happened, and the measurement it calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event<D> {
    /// The triggered measurement's id, a function of the event.
    pub id: String,
    /// Where it runs (the vantage points' location) and on what.
    pub location: String,
    pub runtime: Runtime,
    /// The destinations appended to the triggered job.
    pub targets: Vec<String>,
    /// What the source says of the event.
    pub detail: D,
}

/// A source of events.
pub trait EventSource {
    /// What the source says of an event, reported as it is with what it triggered.
    type Detail: Serialize;
    /// Blocks until the next events come; an error ends the watch.
    fn next(&mut self) -> crate::Result<Vec<Event<Self::Detail>>>;
}

/// An event reported: the source's words, and the measurement it triggered or why none.
#[derive(Debug, Clone, Serialize)]
pub struct Reaction<'a, D> {
    #[serde(flatten)]
    pub event: &'a D,
    /// The measurement the event triggered.
    pub triggered: Option<String>,
    /// Why none was triggered (the selection matched no up node, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a watch triggers: `tenant`'s job `then` (in `vtnt` words, each event's targets
/// appended), for `max_events` events or until the source fails.
#[derive(Debug, Clone)]
pub struct Reactions {
    tenant: String,
    then: Vec<String>,
    max_events: Option<u64>,
}

impl Reactions {
    /// The job is checked now, as the command line would with a destination of the lab's
    /// appended, not at the first event.
    pub fn new(
        tenant: &str,
        then: Vec<String>,
        max_events: Option<u64>,
    ) -> crate::Result<Reactions> {
        crate::check_token("--tenant", tenant)?;
        if then.is_empty() {
            bail!(Invalid, "watch: the job to trigger is missing (after --)");
        }
        let probe: Vec<String> = then.iter().cloned().chain(["192.0.2.1".into()]).collect();
        vtnt_job::parse_words(&probe, vtnt_job::Vantage::Lab)?;
        Ok(Reactions {
            tenant: tenant.to_string(),
            then,
            max_events,
        })
    }
}

/// Triggers `r`'s job on every event of `source` and hands each reaction to `each`.
pub fn react<S: EventSource>(
    c: &Connect,
    r: &Reactions,
    source: &mut S,
    mut each: impl FnMut(&Reaction<S::Detail>) -> crate::Result<()>,
) -> crate::Result<()> {
    let mut seen = 0u64;
    loop {
        for e in source.next()? {
            let words = r.then.iter().chain(&e.targets).cloned().collect();
            let made = trigger(c, &r.tenant, e.runtime, &e.location, &e.id, words);
            each(&Reaction {
                event: &e.detail,
                triggered: made.as_ref().ok().map(|_| e.id.clone()),
                error: made.err().map(|e| crate::error::chain(&e)),
            })?;
            seen += 1;
            if r.max_events.is_some_and(|m| seen >= m) {
                return Ok(());
            }
        }
    }
}

/// Defines measurement `id` (once: one that exists already was made by an earlier watch
/// for the same change).
fn trigger(
    c: &Connect,
    tenant: &str,
    runtime: Runtime,
    location: &str,
    id: &str,
    words: Vec<String>,
) -> crate::Result<()> {
    let exists = crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet measurement watch").await?;
        Ok::<_, Error>(measurement::one(&fleet, tenant, id).await.is_ok())
    })?;
    if exists {
        return Ok(());
    }
    let o = CreateOptions {
        tenant: tenant.to_string(),
        runtime,
        selection: Selection {
            locations: vec![location.to_string()],
            tags: Vec::new(),
            asns: Vec::new(),
            countries: Vec::new(),
            count: Some(1),
        },
        every: None,
        start_in: std::time::Duration::ZERO,
        until_us: None,
        max_cycles: None,
        words,
        split: None,
    };
    measurement::create_named(c, &o, id.to_string()).map(|_| ())
}
