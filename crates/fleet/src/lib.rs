//! `vtnt fleet`: measurement jobs placed on agents over NATS with JetStream.
//!
//! - [`broker`]: `vtnt fleet up|down`, Debian's `nats-server` with JetStream, on loopback,
//!   daemonised, its pid and URL under a state directory.
//! - [`agent`]: `vtnt agent`, one per node: dials out, heartbeats to `vtnt.nodes.<node>`
//!   (stream `VTNT_NODES`, the last one per node), takes a job only while it has a free
//!   slot, runs it with `vtnt_runtimes::Runtime::run`, publishes one message per scamper
//!   record and a summary.
//! - [`controller`]: `vtnt fleet submit|status|results`.
//! - [`replay`]: `vtnt fleet replay NODES EVENTS`, seed 000's event list placed on time.
//! - [`scale`]: `vtnt bench fleet-scale`, dispatch overhead with many agents.
//! - [`proto`]: the JSON messages.
//!
//! Subjects and streams (docs/fleet.md):
//! - discard: a core request to `vtnt.deploy.<location>`; agents with a free slot listen
//!   in queue group `vtnt-agents` on their location's subject and on `vtnt.deploy.any`;
//!   none free: "no responders", the event is discarded.
//! - wait: stream `VTNT_JOBS` (work-queue retention) on `vtnt.wq.<location>`; one durable
//!   pull consumer per location (`wq-<location>`), shared by that location's agents, who
//!   pull one job per free slot and ack it once its results are stored.
//! - results: stream `VTNT_RESULTS` (limits retention) on
//!   `vtnt.results.<tenant>.<job>.r` (records, `Nats-Msg-Id` = `<job>.<index>`) and
//!   `vtnt.results.<tenant>.<job>.s` (the summary, `<job>.s`), deduplicated by the
//!   server within its window, so a redelivered job's results land once.
//!
//! Every entry point takes a [`Connect`] (URL and credentials) and runs on its own tokio
//! runtime; the command line stays synchronous.

pub mod agent;
pub mod broker;
pub mod controller;
pub mod proto;
pub mod replay;
pub mod scale;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream;

pub use proto::{Event, JobStatus, JobSummary, Mode, NodeInfo, Outcome};

/// The work-queue stream (wait mode).
pub const JOBS_STREAM: &str = "VTNT_JOBS";
/// The subject of a node's heartbeats.
pub fn node_subject(node: &str) -> String {
    format!("vtnt.nodes.{node}")
}

/// The results stream.
pub const RESULTS_STREAM: &str = "VTNT_RESULTS";
/// The stream of node heartbeats, the last one per node (`vtnt.nodes.<node>`): a
/// key-value bucket in all but name: creating a real one with async-nats 0.51 against
/// Debian's nats-server 2.9.10 failed here (its reply did not parse).
pub const NODES_STREAM: &str = "VTNT_NODES";
/// The queue group of discard-mode agents.
pub const DEPLOY_GROUP: &str = "vtnt-agents";
/// The location that matches every node.
pub const ANY: &str = "any";
/// How long a pulled job may go without an ack or a progress report before JetStream
/// gives it to another agent (an agent reports progress every quarter of it).
pub const ACK_WAIT: Duration = Duration::from_secs(4);
/// How often a job is delivered at most.
pub const MAX_DELIVER: i64 = 5;
/// The results stream's deduplication window.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(600);
/// How many servers of a cluster keep each of the fleet's streams (JetStream's usual R3;
/// a cluster needs at least three servers with JetStream on).
pub const CLUSTER_REPLICAS: usize = 3;
/// How long connecting to the broker may take before the command gives up.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The discard-mode subject of a location.
pub fn deploy_subject(location: &str) -> String {
    format!("vtnt.deploy.{location}")
}

/// The work-queue subject of a location.
pub fn wq_subject(location: &str) -> String {
    format!("vtnt.wq.{location}")
}

/// The subject of a job's results: records (`r`) or summary (`s`).
pub fn results_subject(tenant: &str, job: &str, kind: &str) -> String {
    format!("vtnt.results.{tenant}.{job}.{kind}")
}

/// Checks that `value` (of `what`: a node, location, tenant, job id) can be one subject
/// token: letters, digits, `-` and `_`, 1 to 64 of them.
pub fn check_token(what: &str, value: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        !value.is_empty()
            && value.len() <= 64
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "{what} `{value}`: use 1 to 64 letters, digits, `-` or `_`"
    );
    Ok(())
}

/// Where the broker is and who we are to it.
#[derive(Debug, Clone, Default)]
pub struct Connect {
    /// `nats://host:port` (or several, comma-separated).
    pub url: String,
    /// A NATS credentials file (JWT and nkey seed).
    pub creds: Option<PathBuf>,
    pub user: Option<String>,
    pub password: Option<String>,
}

impl Connect {
    /// Connects, giving up after [`CONNECT_TIMEOUT`] with an error naming the URL.
    pub async fn client(&self, name: &str) -> anyhow::Result<async_nats::Client> {
        let mut opts = async_nats::ConnectOptions::new()
            .name(name)
            .connection_timeout(CONNECT_TIMEOUT);
        if let Some(c) = &self.creds {
            opts = opts
                .credentials_file(c)
                .await
                .with_context(|| format!("--creds {}", c.display()))?;
        }
        match (&self.user, &self.password) {
            (Some(u), Some(p)) => opts = opts.user_and_password(u.clone(), p.clone()),
            (None, None) => {}
            _ => anyhow::bail!("--user and --password go together"),
        }
        let addrs = self
            .url
            .split(',')
            .map(|u| {
                u.trim()
                    .parse::<async_nats::ServerAddr>()
                    .map_err(|e| anyhow::anyhow!("--nats `{u}`: {e}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let connect = opts.connect(addrs);
        tokio::time::timeout(CONNECT_TIMEOUT + Duration::from_secs(1), connect)
            .await
            .map_err(|_| anyhow::anyhow!("no answer from {} within {CONNECT_TIMEOUT:?}", self.url))?
            .with_context(|| format!("connecting to the NATS server at {}", self.url))
    }
}

/// The fleet's JetStream objects, created on first use by whoever comes first.
pub struct Fleet {
    pub js: jetstream::Context,
    pub jobs: jetstream::stream::Stream,
    pub results: jetstream::stream::Stream,
    pub nodes: jetstream::stream::Stream,
}

impl Fleet {
    pub async fn open(client: async_nats::Client) -> anyhow::Result<Fleet> {
        // In a cluster every stream is kept on three servers, so losing one loses nothing.
        let num_replicas = if client.server_info().cluster.is_some() {
            CLUSTER_REPLICAS
        } else {
            1
        };
        let js = jetstream::new(client);
        let jobs = ensure_stream(
            &js,
            jetstream::stream::Config {
                name: JOBS_STREAM.into(),
                num_replicas,
                subjects: vec!["vtnt.wq.>".into()],
                retention: jetstream::stream::RetentionPolicy::WorkQueue,
                ..Default::default()
            },
        )
        .await
        .with_context(|| format!("creating the work-queue stream with {num_replicas} replica(s) (is JetStream on, on at least as many servers?)"))?;
        let results = ensure_stream(
            &js,
            jetstream::stream::Config {
                name: RESULTS_STREAM.into(),
                num_replicas,
                subjects: vec!["vtnt.results.>".into()],
                retention: jetstream::stream::RetentionPolicy::Limits,
                duplicate_window: DEDUP_WINDOW,
                ..Default::default()
            },
        )
        .await
        .context("creating the results stream")?;
        let nodes = ensure_stream(
            &js,
            jetstream::stream::Config {
                name: NODES_STREAM.into(),
                num_replicas,
                subjects: vec!["vtnt.nodes.*".into()],
                max_messages_per_subject: 1,
                max_age: Duration::from_secs(3600),
                ..Default::default()
            },
        )
        .await
        .context("creating the nodes stream")?;
        Ok(Fleet {
            js,
            jobs,
            results,
            nodes,
        })
    }

    /// The durable pull consumer of a location's work queue, shared by its agents.
    pub async fn wq_consumer(
        &self,
        location: &str,
    ) -> anyhow::Result<jetstream::consumer::PullConsumer> {
        let name = format!("wq-{location}");
        let config = jetstream::consumer::pull::Config {
            durable_name: Some(name.clone()),
            filter_subject: wq_subject(location),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait: ACK_WAIT,
            max_deliver: MAX_DELIVER,
            ..Default::default()
        };
        // twice: another agent of the location may create it between lookup and creation
        match self
            .jobs
            .get_or_create_consumer(&name, config.clone())
            .await
        {
            Ok(c) => Ok(c),
            Err(_) => self.jobs.get_or_create_consumer(&name, config).await,
        }
        .with_context(|| format!("the work-queue consumer {name}"))
    }
}

/// Gets or creates a stream; asks twice, since another client may create it between our
/// lookup and our creation.
async fn ensure_stream(
    js: &jetstream::Context,
    config: jetstream::stream::Config,
) -> anyhow::Result<jetstream::stream::Stream> {
    match js.get_or_create_stream(config.clone()).await {
        Ok(s) => Ok(s),
        Err(_) => Ok(js.get_or_create_stream(config).await?),
    }
}

/// Microseconds since the Unix epoch.
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Runs `fut` on a fresh multi-threaded tokio runtime.
pub fn block_on<T>(fut: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?
        .block_on(fut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_and_tokens() {
        assert_eq!(deploy_subject("fr"), "vtnt.deploy.fr");
        assert_eq!(wq_subject(ANY), "vtnt.wq.any");
        assert_eq!(results_subject("t", "j", "r"), "vtnt.results.t.j.r");
        assert!(check_token("node", "n-1_a").is_ok());
        for bad in ["", "a.b", "a b", "*", ">", &"x".repeat(65)] {
            assert!(check_token("node", bad).is_err(), "{bad}");
        }
    }
}
