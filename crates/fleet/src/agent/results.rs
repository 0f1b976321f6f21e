//! A job's results stored as they come ([`Results`]): each record under its place
//! ([`crate::progress::Places`]) with its provenance, a bounded number in flight, the
//! targets whose records the server acknowledged kept as the job's progress
//! ([`crate::progress`]), then its summary.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use async_nats::jetstream::context::PublishAckFuture;

use crate::error::ResultExt;
use crate::progress::{Done, Places};
use crate::proto::{JobRequest, JobSummary};
use crate::Fleet;

/// Records published before their acknowledgements are awaited.
const PUBLISH_WINDOW: usize = 1024;
/// How often a running job's progress is stored (when it moved).
pub const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// A job's results on their way to its tenant's results stream.
pub struct Results<'a> {
    fleet: &'a Fleet,
    req: &'a JobRequest,
    /// The provenance every record carries (the summary as the job started).
    provenance: JobSummary,
    subject: String,
    places: Places,
    done: Done,
    targets: usize,
    /// Whether the progress is stored (a wait-mode job run once on a target list).
    keep_progress: bool,
    /// Stored since the progress was last written.
    moved: bool,
    last_progress: Instant,
    in_flight: VecDeque<(PublishAckFuture, Option<usize>)>,
    /// Records this delivery published.
    published: u64,
}

impl<'a> Results<'a> {
    /// The results of job `req`, whose targets are `list`; `done`: those an earlier
    /// delivery stored (not probed again); `provenance`: what its records say of where
    /// they come from.
    pub fn new(
        fleet: &'a Fleet,
        req: &'a JobRequest,
        provenance: JobSummary,
        list: &[std::net::IpAddr],
        done: Done,
        keep_progress: bool,
    ) -> Results<'a> {
        Results {
            fleet,
            req,
            provenance,
            subject: crate::results_subject(&req.tenant, &req.id, "r"),
            places: Places::new(list, &done),
            done,
            targets: list.len(),
            keep_progress,
            moved: false,
            last_progress: Instant::now(),
            in_flight: VecDeque::with_capacity(PUBLISH_WINDOW),
            published: 0,
        }
    }

    /// Publishes one record (a scamper JSON line) under its place.
    pub async fn record(&mut self, line: &str) -> crate::Result<()> {
        let (place, target) = self.places.place(line);
        let h = super::record_headers(&self.provenance, place);
        let ack = self
            .fleet
            .js
            .publish_with_headers(
                self.subject.clone(),
                h,
                line.to_string().into_bytes().into(),
            )
            .await
            .nats("storing a record")?;
        self.in_flight.push_back((ack, target));
        self.published += 1;
        // a bounded number in flight, however many records a job has
        if self.in_flight.len() == PUBLISH_WINDOW {
            self.settle_one().await?;
        }
        Ok(())
    }

    async fn settle_one(&mut self) -> crate::Result<()> {
        if let Some((ack, target)) = self.in_flight.pop_front() {
            ack.await.nats("storing a record")?;
            if let Some(i) = target {
                self.done.set(i);
                self.moved = true;
            }
        }
        Ok(())
    }

    async fn settle(&mut self) -> crate::Result<()> {
        while !self.in_flight.is_empty() {
            self.settle_one().await?;
        }
        Ok(())
    }

    /// Every record published so far acknowledged, and the progress stored if it moved
    /// and [`PROGRESS_EVERY`] has passed since it last was. A progress that cannot be
    /// stored (the broker busy electing a leader) is tried at the next checkpoint: it
    /// only spares a later delivery some probes, the records are what counts.
    pub async fn checkpoint(&mut self) -> crate::Result<()> {
        self.settle().await?;
        if self.keep_progress && self.moved && self.last_progress.elapsed() >= PROGRESS_EVERY {
            let (t, j) = (&self.req.tenant, &self.req.id);
            self.last_progress = Instant::now();
            match crate::progress::write(self.fleet, t, j, &self.done, self.targets).await {
                Ok(()) => self.moved = false,
                Err(e) => {
                    tracing::warn!(job = %j, error = %crate::error::chain(&e), "storing the job's progress failed; trying again")
                }
            }
        }
        Ok(())
    }

    /// Records this delivery published.
    pub fn published(&self) -> u64 {
        self.published
    }

    /// Every record acknowledged, then the summary stored (it says the job is over);
    /// the progress is emptied then.
    pub async fn finish(mut self, summary: &JobSummary) -> crate::Result<()> {
        self.settle().await?;
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-Msg-Id", format!("{}.s", self.req.id).as_str());
        self.fleet
            .js
            .publish_with_headers(
                crate::results_subject(&self.req.tenant, &self.req.id, "s"),
                h,
                serde_json::to_vec(summary)
                    .parse("encoding the summary")?
                    .into(),
            )
            .await?
            .await
            .nats("storing the summary")?;
        // left behind, it is dropped by the stream's age limit, and the summary says the
        // job is over
        if self.keep_progress {
            let (t, j) = (&self.req.tenant, &self.req.id);
            if let Err(e) = crate::progress::clear(self.fleet, t, j).await {
                tracing::warn!(job = %j, error = %crate::error::chain(&e), "emptying the job's progress failed");
            }
        }
        Ok(())
    }
}
