//! A tenant's backlog (its jobs waiting in the work queue, per subject), counted by the
//! fleet for the tenant that asks. JetStream's stream info takes a subject filter of the
//! requester's choosing, so a tenant given the work queue's info could ask for
//! `vtnt.wq.>` and learn every other tenant's jobs; instead the agents answer requests
//! on `vtnt.backlog.<tenant>` ([`crate::backlog_subject`], `agent::serve_backlogs`),
//! counting only the jobs under the tenant the subject names, and the broker lets each
//! tenant's account reach its own subject only ([`crate::auth`]).

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::jetstream;
use futures::TryStreamExt;

use crate::error::ResultExt;
use crate::Fleet;

/// The agents' queue group for backlog requests (one agent answers each).
pub const GROUP: &str = "vtnt-backlog";
/// How long `vtnt fleet status` waits for an agent to count the backlog.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// A tenant's jobs waiting, per work-queue subject (`vtnt.wq.<tenant>.<location>`).
pub type Backlog = BTreeMap<String, u64>;

/// Tenant `t`'s jobs waiting in `jobs`, per subject.
pub async fn count(jobs: &jetstream::stream::Stream, t: &str) -> crate::Result<Backlog> {
    let mut subjects = jobs.info_with_subjects(crate::wq_subject(t, "*")).await?;
    let mut out = Backlog::new();
    while let Some((s, n)) = subjects.try_next().await? {
        out.insert(s, n as u64);
    }
    Ok(out)
}

/// Tenant `t`'s backlog as an agent counts it; `None` when none answers within
/// [`TIMEOUT`] (no agent up: across accounts nats-server 2.9 gives no "no responders").
pub async fn ask(fleet: &Fleet, t: &str) -> crate::Result<Option<Backlog>> {
    let asked = fleet
        .client
        .request(crate::backlog_subject(t), bytes::Bytes::new());
    match tokio::time::timeout(TIMEOUT, asked).await {
        Err(_) => Ok(None),
        Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::NoResponders => Ok(None),
        Ok(Err(e)) => Err(e).nats("asking for the backlog"),
        Ok(Ok(m)) => Ok(Some(
            serde_json::from_slice(&m.payload).parse("an agent's backlog")?,
        )),
    }
}
