//! `vtnt fleet`: measurement jobs placed on agents over NATS with JetStream.
//!
//! - [`broker`]: `vtnt fleet up|down`, Debian's `nats-server` with JetStream, on loopback,
//!   daemonised, its pid and URL under a state directory.
//! - [`agent`]: `vtnt agent`, one per node: dials out, heartbeats to `vtnt.nodes.<node>`
//!   (stream `VTNT_NODES`, the last one per node), takes a job only while it has a free
//!   slot, runs it with `vtnt_runtimes::Runtime::run`, publishes one message per scamper
//!   record and a summary.
//! - [`controller`]: `vtnt fleet submit|status|results`.
//! - [`measurement`]: `vtnt fleet measurement create|list|cancel`, definitions stored per
//!   tenant; [`schedule`]: `vtnt fleet measurement run`, the controller that starts their
//!   cycles on time.
//! - [`quota`]: per-tenant quotas (concurrent jobs, probes per day), set by the operator,
//!   enforced by the agents and checked first by the controller.
//! - [`rate`]: the fleet-wide rate limit per prefix and per destination, leased by each
//!   job's agent before it starts.
//! - [`replay`]: `vtnt fleet replay NODES EVENTS`, seed 000's event list placed on time.
//! - [`proto`]: the JSON messages.
//! - [`auth`]: the agents' and tenants' accounts, keys and permissions.
//! - [`backlog`]: a tenant's jobs waiting, counted by the agents for that tenant only.
//! - [`targets`]: long target lists, apart from their jobs' requests.
//! - [`watchdog`]: an agent's instances do not outlive it (its node's scope, lock and
//!   watchdog).
//!
//! Subjects and streams (docs/fleet.md):
//! - discard: a core request to `vtnt.deploy.<tenant>.<location>`; agents with a free
//!   slot listen in queue group `vtnt-agents` on `vtnt.deploy.*.<location>` and
//!   `vtnt.deploy.*.any`; none free: "no responders", the event is discarded.
//! - wait: stream `VTNT_JOBS` (work-queue retention) on `vtnt.wq.<tenant>.<location>`;
//!   one durable pull consumer per location (`wq-<location>`, on `vtnt.wq.*.<location>`),
//!   shared by that location's agents, who pull one job per free slot and ack it once its
//!   results are stored.
//! - results: one stream per tenant, `VTNT_RESULTS_<tenant>` (limits retention), on
//!   `vtnt.results.<tenant>.<job>.r` (records, `Nats-Msg-Id` = `<job>.<place>`) and
//!   `vtnt.results.<tenant>.<job>.s` (the summary, `<job>.s`), deduplicated by the
//!   server within its window, so a redelivered job's results land once. It is in the
//!   tenant's own NATS account, made by `vtnt fleet up`; only the tenant reads it
//!   ([`auth`]).
//! - backlog: a core request to `vtnt.backlog.<tenant>`, answered by one agent (queue
//!   group `vtnt-backlog`) with that tenant's jobs waiting ([`backlog`]).
//! - long target lists: `VTNT_DATA_<tenant>`, on `vtnt.data.<tenant>.<job>.<chunk>`
//!   ([`targets`]).
//! - quotas: `VTNT_QUOTA_<tenant>`, on `vtnt.quota.<tenant>.limit` (the operator's) and
//!   `vtnt.quota.<tenant>.use` (the agents', compare-and-set) ([`quota`]).
//! - rate limit: `VTNT_RATE`, on `vtnt.rate.limit` (the operator's) and
//!   `vtnt.rate.lease.<key>` (the agents', compare-and-set) ([`rate`]).
//! - progress: `VTNT_PROGRESS`, on `vtnt.progress.<tenant>.<job>`: which targets of a
//!   running wait-mode job have their records stored, so a delivery after the first
//!   probes only the others ([`progress`]).
//!
//! The tenant of a job is the token its subject carries, which the broker's accounts and
//! permissions tie to the tenant's key; the agent refuses a job whose body names another,
//! and answers a discard request only on that tenant's inbox.
//!
//! Every entry point takes a [`Connect`] (URL and credentials) and runs on its own tokio
//! runtime; the command line stays synchronous.

pub mod agent;
pub mod archive;
pub mod auth;
pub mod backlog;
pub mod bgp;
pub mod broker;
pub mod campaign;
mod cas;
pub mod clock;
pub mod controller;
mod error;
pub mod images;
pub mod measurement;
pub mod optout;
pub mod progress;
pub mod proto;
pub mod quota;
pub mod rate;
pub mod replay;
pub mod schedule;
pub mod targets;
pub mod vantage;
pub mod watch;
pub mod watchdog;

use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream;
pub use error::{chain, BoxError, Error, Result};
use error::{ensure, ResultExt};

pub use proto::{Event, JobStatus, JobSummary, Mode, NodeInfo, Outcome};

/// The work-queue stream (wait mode).
pub const JOBS_STREAM: &str = "VTNT_JOBS";
/// The object store of the runtimes' images ([`images`]).
pub const IMAGES_BUCKET: &str = "vtnt-images";
/// The nodes' heartbeats (`vtnt.nodes.<node>`), which every tenant may hear
/// ([`auth`]).
pub const HEARTBEATS: &str = "vtnt.nodes.*";
/// The subject of a node's heartbeats.
pub fn node_subject(node: &str) -> String {
    format!("vtnt.nodes.{node}")
}

/// A tenant's results stream.
pub fn results_stream(tenant: &str) -> String {
    format!("VTNT_RESULTS_{tenant}")
}

/// A tenant's stream of large target lists (`vtnt.data.<tenant>.<job>.<chunk>`): a job's
/// list too long to travel in its request, in chunks, until the job is done.
pub fn data_stream(tenant: &str) -> String {
    format!("VTNT_DATA_{tenant}")
}

/// The subject of chunk `chunk` of job `job`'s target list (`>`: all of the tenant's, as
/// `data_subject(t, ">", None)`; a job's: `data_subject(t, job, None)`).
pub fn data_subject(tenant: &str, job: &str, chunk: Option<u32>) -> String {
    match chunk {
        Some(c) => format!("vtnt.data.{tenant}.{job}.{c}"),
        None if job == ">" => format!("vtnt.data.{tenant}.>"),
        None => format!("vtnt.data.{tenant}.{job}.>"),
    }
}
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
/// The most targets one fleet job takes (`vtnt fleet submit` refuses more before anything
/// is sent).
pub const MAX_TARGETS: usize = 1 << 20;
/// The longest target list, bytes: [`MAX_TARGETS`] IPv4 addresses of 15 characters and a
/// newline each.
pub const MAX_TARGET_BYTES: usize = 16 * MAX_TARGETS;
/// A job with more targets than this sends them apart from its request, in chunks
/// ([`data_stream`]); its request stays small.
pub const INLINE_TARGETS: usize = 1000;
/// A tenant's large target lists, at most this many bytes at once (each list is at most
/// [`MAX_TARGET_BYTES`]).
pub const DATA_STREAM_BYTES: i64 = 256 << 20;
/// How long a large target list waits for its job at most.
pub const DATA_MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// The size of one chunk of a large target list (NATS's default largest message is 1 MiB).
pub const DATA_CHUNK_BYTES: usize = 512 << 10;
/// How long connecting to the broker may take before the command gives up.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The discard-mode subject of a tenant's jobs for a location (`*`: any tenant's).
pub fn deploy_subject(tenant: &str, location: &str) -> String {
    format!("vtnt.deploy.{tenant}.{location}")
}

/// The work-queue subject of a tenant's jobs for a location (`*`: any tenant's).
pub fn wq_subject(tenant: &str, location: &str) -> String {
    format!("vtnt.wq.{tenant}.{location}")
}

/// The subject tenant `t` asks its backlog on (`*`: every tenant's, the agents'), answered
/// by an agent ([`backlog`]).
pub fn backlog_subject(t: &str) -> String {
    format!("vtnt.backlog.{t}")
}

/// The tenant a job's subject (`vtnt.deploy.<tenant>.<location>` or
/// `vtnt.wq.<tenant>.<location>`) names.
pub fn subject_tenant(subject: &str) -> Option<&str> {
    match subject.split('.').collect::<Vec<_>>()[..] {
        ["vtnt", "deploy" | "wq", tenant, _] => Some(tenant),
        _ => None,
    }
}

/// The subject of a job's results: records (`r`) or summary (`s`).
pub fn results_subject(tenant: &str, job: &str, kind: &str) -> String {
    format!("vtnt.results.{tenant}.{job}.{kind}")
}

/// Checks that `value` (of `what`: a node, location, tenant, job id) can be one subject
/// token: letters, digits, `-` and `_`, 1 to 64 of them.
pub fn check_token(what: &str, value: &str) -> Result<()> {
    ensure!(
        !value.is_empty()
            && value.len() <= 64
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        Invalid,
        "{what} `{value}`: use 1 to 64 letters, digits, `-` or `_`"
    );
    Ok(())
}

/// Checks a country code: two upper-case letters (ISO 3166 alpha-2, `FR`).
pub fn check_country(value: &str) -> Result<()> {
    ensure!(
        value.len() == 2 && value.bytes().all(|b| b.is_ascii_uppercase()),
        Invalid,
        "country `{value}`: two upper-case letters (ISO 3166 alpha-2, e.g. FR)"
    );
    Ok(())
}

/// Where the broker is and who we are to it.
#[derive(Debug, Clone)]
pub struct Connect {
    /// `nats://host:port` or `tls://host:port` (or several, comma-separated).
    pub url: String,
    /// A NATS credentials file (JWT and nkey seed).
    pub creds: Option<PathBuf>,
    /// A file holding a user's nkey seed (`vtnt fleet up` makes them).
    pub nkey: Option<PathBuf>,
    pub user: Option<String>,
    pub password: Option<String>,
    /// The CA that signed the server's certificate (PEM).
    pub tls_ca: Option<PathBuf>,
    /// A client certificate and its key (PEM), for servers that verify clients.
    pub tls_cert: Option<(PathBuf, PathBuf)>,
    /// The JetStream domain of the fleet's streams, when they are on another server's
    /// (a leaf node's clients naming their hub's).
    pub js_domain: Option<String>,
    /// Whose inbox its replies come to ([`auth::Role::inbox_prefix`]).
    pub role: auth::Role,
}

impl Connect {
    /// `url` with no credentials, as `role`.
    pub fn open(url: &str, role: auth::Role) -> Connect {
        Connect {
            url: url.to_string(),
            creds: None,
            nkey: None,
            user: None,
            password: None,
            tls_ca: None,
            tls_cert: None,
            js_domain: None,
            role,
        }
    }

    /// The broker `vtnt fleet up --name <name>` started, as `role`, with the key and CA
    /// it keeps for local commands.
    pub fn local(name: &str, role: auth::Role) -> Result<Connect> {
        let url = broker::url(name).ok_or_else(|| {
            Error::Invalid(format!(
                "no --nats URL and no running fleet `{name}` (`vtnt fleet up --name {name}`)"
            ))
        })?;
        let dir = broker::state_dir(name);
        let key = auth::key_file(&dir, &role);
        ensure!(
            key.exists(),
            Auth,
            "fleet `{name}` has no key for {} ({}); `vtnt fleet up --tenant ...` names its tenants",
            role.key_name(),
            key.display()
        );
        let ca = dir.join(broker::TLS_CA_FILE);
        Ok(Connect {
            nkey: Some(key),
            tls_ca: ca.exists().then_some(ca),
            ..Connect::open(&url, role)
        })
    }

    /// The seeds of `--nkey`: the user's, then (a tenant's key that `vtnt fleet up` made)
    /// its discard-mode requests' user in the fleet's account ([`auth`]).
    fn seeds(&self) -> Result<Vec<String>> {
        self.nkey
            .as_deref()
            .map_or(Ok(Vec::new()), auth::read_seeds)
    }

    /// Connects ([`Connect::client`]); the fleet's streams through that connection. A
    /// tenant whose key holds a second seed is in an account of its own: the fleet's
    /// streams' info comes through [`auth::FLEET_API`], and its discard-mode requests go
    /// out as that second user ([`Fleet::requests`]).
    pub async fn fleet(&self, name: &str) -> Result<(async_nats::Client, Fleet)> {
        let seeds = self.seeds()?;
        let client = self.client_as(name, seeds.first()).await?;
        let js = match &self.js_domain {
            Some(d) => jetstream::with_domain(client.clone(), d),
            None => jetstream::new(client.clone()),
        };
        let requester = match (&self.role, seeds.get(1)) {
            (auth::Role::Tenant(_), Some(seed)) => Some((self.clone(), seed.clone())),
            _ => None,
        };
        let shared = match requester {
            Some(_) => jetstream::with_prefix(client.clone(), auth::FLEET_API),
            None => js.clone(),
        };
        // In a cluster every stream is kept on three servers, so losing one loses nothing
        // (fewer where the server turns that down: `ensure_stream`).
        let num_replicas = if client.server_info().cluster.is_some() {
            CLUSTER_REPLICAS
        } else {
            1
        };
        let fleet = Fleet {
            js,
            shared,
            num_replicas,
            client: client.clone(),
            requester,
            requests: tokio::sync::OnceCell::new(),
        };
        Ok((client, fleet))
    }

    /// Connects as `--nkey`'s user, giving up after [`CONNECT_TIMEOUT`] with an error naming the URL.
    pub async fn client(&self, name: &str) -> Result<async_nats::Client> {
        self.client_as(name, self.seeds()?.first()).await
    }

    /// The connection a tenant's discard-mode requests go out on: as its second user
    /// when its key holds one ([`Connect::fleet`]), else [`Connect::client`].
    pub async fn requests_client(&self, name: &str) -> Result<async_nats::Client> {
        let seeds = self.seeds()?;
        let seed = match self.role {
            auth::Role::Tenant(_) => seeds.get(1).or(seeds.first()),
            _ => seeds.first(),
        };
        self.client_as(name, seed).await
    }

    /// Connects with the nkey `seed` (if any) and the other credentials.
    async fn client_as(&self, name: &str, seed: Option<&String>) -> Result<async_nats::Client> {
        let mut opts = async_nats::ConnectOptions::new()
            .name(name)
            .custom_inbox_prefix(self.role.inbox_prefix())
            .connection_timeout(CONNECT_TIMEOUT)
            // A refusal (a permission the user lacks) comes back on its own, not as the
            // answer to what was refused, which would time out: it ends the command.
            .event_callback(|e| async move {
                use async_nats::ServerError;
                match e {
                    async_nats::Event::ServerError(e @ ServerError::AuthorizationViolation) => {
                        refused(format!("the NATS server refused: {e}"))
                    }
                    async_nats::Event::ServerError(ServerError::Other(e))
                        if e.contains("Permissions Violation") =>
                    {
                        refused(format!("the NATS server refused: {e}"))
                    }
                    async_nats::Event::ServerError(e) => {
                        tracing::warn!(error = %e, "the NATS server reports an error")
                    }
                    _ => {}
                }
            });
        if let Some(seed) = seed {
            opts = opts.nkey(seed.clone());
        }
        if let Some(ca) = &self.tls_ca {
            ensure!(
                ca.exists(),
                Invalid,
                "--tls-ca {}: no such file",
                ca.display()
            );
            opts = opts.add_root_certificates(ca.clone()).require_tls(true);
        }
        if let Some((cert, key)) = &self.tls_cert {
            opts = opts.add_client_certificate(cert.clone(), key.clone());
        }
        if let Some(c) = &self.creds {
            opts = opts
                .credentials_file(c)
                .await
                .io(|| format!("--creds {}", c.display()))?;
        }
        match (&self.user, &self.password) {
            (Some(u), Some(p)) => opts = opts.user_and_password(u.clone(), p.clone()),
            (None, None) => {}
            _ => return Err(Error::Invalid("--user and --password go together".into())),
        }
        let addrs = self
            .url
            .split(',')
            .map(|u| {
                u.trim()
                    .parse::<async_nats::ServerAddr>()
                    .map_err(|e| Error::Invalid(format!("--nats `{u}`: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        let connect = opts.connect(addrs);
        let what = || format!("connecting to the NATS server at {}", self.url);
        match tokio::time::timeout(CONNECT_TIMEOUT + Duration::from_secs(1), connect).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => {
                let source: BoxError = e.into();
                if error::chain(&*source).contains("could not add certificate or key") {
                    // rustls's own words say no more
                    Err(Error::Context {
                        what: what(),
                        source: Box::new(Error::Nats {
                            what: "--tls-cert and --tls-key: the certificate must be X.509 v3 and match the key".into(),
                            source,
                        }),
                    })
                } else {
                    Err(Error::Nats {
                        what: what(),
                        source,
                    })
                }
            }
            Err(_) => Err(Error::Context {
                what: what(),
                source: Box::new(Error::Unreachable {
                    url: self.url.clone(),
                    timeout: CONNECT_TIMEOUT,
                }),
            }),
        }
    }
}

/// The fleet's JetStream objects ([`Connect::fleet`]). `vtnt fleet up` makes every stream
/// (as each account's setup user, [`auth::Role::Setup`]); against a server of one's own
/// with no such setup, the first client to need a stream creates it.
pub struct Fleet {
    /// This user's own account's JetStream (a tenant's results; the fleet's streams for
    /// the agents and the operator).
    pub js: jetstream::Context,
    /// The fleet's streams (work queue, nodes) as this user reaches them: `js` itself, or
    /// for a tenant in an account of its own, the fleet's API it imports.
    pub shared: jetstream::Context,
    /// How many servers keep each stream.
    num_replicas: usize,
    client: async_nats::Client,
    /// A tenant's discard-mode requests' user: how to connect, its seed.
    requester: Option<(Connect, String)>,
    requests: tokio::sync::OnceCell<async_nats::Client>,
}

impl Fleet {
    /// The connection discard-mode requests go out on: the tenant's second user (connected
    /// once, when first needed) or this connection.
    pub async fn requests(&self) -> Result<&async_nats::Client> {
        self.requests
            .get_or_try_init(|| async {
                match &self.requester {
                    Some((c, seed)) => c.client_as("vtnt fleet (requests)", Some(seed)).await,
                    None => Ok(self.client.clone()),
                }
            })
            .await
    }

    /// Whether this is a tenant in an account of its own, whose streams `vtnt fleet up`
    /// made (it makes none itself).
    pub fn own_account(&self) -> bool {
        self.requester.is_some()
    }

    /// The work-queue stream, created unless it exists.
    pub async fn jobs(&self) -> Result<jetstream::stream::Stream> {
        let n = self.num_replicas;
        ensure_stream(
            &self.shared,
            jetstream::stream::Config {
                name: JOBS_STREAM.into(),
                num_replicas: n,
                subjects: vec!["vtnt.wq.>".into()],
                retention: jetstream::stream::RetentionPolicy::WorkQueue,
                ..Default::default()
            },
        )
        .await
        .nats(|| format!("the work-queue stream with {n} replica(s) (is JetStream on, on at least as many servers?)"))
    }

    /// The nodes' heartbeat stream, created unless it exists.
    pub async fn nodes(&self) -> Result<jetstream::stream::Stream> {
        ensure_stream(
            &self.shared,
            jetstream::stream::Config {
                name: NODES_STREAM.into(),
                num_replicas: self.num_replicas,
                subjects: vec![HEARTBEATS.into()],
                max_messages_per_subject: 1,
                max_age: Duration::from_secs(3600),
                ..Default::default()
            },
        )
        .await
        .nats("the nodes stream")
    }

    /// A tenant's stream of large target lists, created unless it exists: bounded in
    /// bytes (refusing more, so one tenant fills only its own) and in age.
    pub async fn data(&self, tenant: &str) -> Result<jetstream::stream::Stream> {
        ensure_stream(
            &self.shared,
            jetstream::stream::Config {
                name: data_stream(tenant),
                num_replicas: self.num_replicas,
                subjects: vec![data_subject(tenant, ">", None)],
                max_bytes: DATA_STREAM_BYTES,
                discard: jetstream::stream::DiscardPolicy::New,
                max_age: DATA_MAX_AGE,
                max_message_size: DATA_CHUNK_BYTES as i32 + 1024,
                duplicate_window: Duration::from_secs(120),
                ..Default::default()
            },
        )
        .await
        .nats(|| format!("tenant {tenant}'s target lists stream"))
    }

    /// A tenant's results stream, created unless it exists.
    pub async fn results(&self, tenant: &str) -> Result<jetstream::stream::Stream> {
        ensure_stream(
            &self.js,
            jetstream::stream::Config {
                name: results_stream(tenant),
                num_replicas: self.num_replicas,
                subjects: vec![format!("vtnt.results.{tenant}.>")],
                retention: jetstream::stream::RetentionPolicy::Limits,
                duplicate_window: DEDUP_WINDOW,
                ..Default::default()
            },
        )
        .await
        .nats(|| format!("tenant {tenant}'s results stream"))
    }

    /// The durable pull consumer of a location's work queue, shared by its agents.
    pub async fn wq_consumer(
        &self,
        jobs: &jetstream::stream::Stream,
        location: &str,
    ) -> Result<jetstream::consumer::PullConsumer> {
        let name = format!("wq-{location}");
        let config = jetstream::consumer::pull::Config {
            durable_name: Some(name.clone()),
            filter_subject: wq_subject("*", location),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait: ACK_WAIT,
            max_deliver: MAX_DELIVER,
            ..Default::default()
        };
        // twice: another agent of the location may create it between lookup and creation
        match jobs.get_or_create_consumer(&name, config.clone()).await {
            Ok(c) => Ok(c),
            Err(_) => jobs.get_or_create_consumer(&name, config).await,
        }
        .nats(|| format!("the work-queue consumer {name}"))
    }
}

/// A stream as `js` reaches it: `None` while nobody has made it (a server of one's own
/// before the first agent came).
pub async fn existing(
    js: &jetstream::Context,
    name: &str,
) -> Result<Option<jetstream::stream::Stream>> {
    match js.get_stream(name).await {
        Ok(s) => Ok(Some(s)),
        Err(e)
            if matches!(e.kind(), jetstream::context::GetStreamErrorKind::JetStream(j)
                if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND) =>
        {
            Ok(None)
        }
        Err(e) => Err(e).nats(|| format!("looking up stream {name}")),
    }
}

/// Gets or creates a stream; asks twice, since another client may create it between our
/// lookup and our creation. A server that holds no cluster's JetStream (the hub of a leaf
/// node says it is in a cluster) keeps one replica.
pub(crate) async fn ensure_stream(
    js: &jetstream::Context,
    mut config: jetstream::stream::Config,
) -> Result<jetstream::stream::Stream, jetstream::context::CreateStreamError> {
    use jetstream::context::CreateStreamErrorKind;
    match js.get_or_create_stream(config.clone()).await {
        Ok(s) => Ok(s),
        Err(e)
            if matches!(e.kind(), CreateStreamErrorKind::JetStream(j)
                if j.error_code() == jetstream::ErrorCode::STREAM_REPLICAS_NOT_SUPPORTED) =>
        {
            config.num_replicas = 1;
            js.get_or_create_stream(config).await
        }
        Err(_) => js.get_or_create_stream(config).await,
    }
}

/// Microseconds since the Unix epoch.
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// The first refusal a server sent on any connection of this process, and its signal.
static REFUSAL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
static REFUSED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Records a refusal of the server: the command in [`block_on`] ends with it.
fn refused(what: String) {
    if REFUSAL.set(what).is_ok() {
        REFUSED.notify_waiters();
    }
}

/// Runs `fut` on a fresh single-threaded tokio runtime (no hand-over between threads on
/// a placement's path; jobs run on blocking threads); a refusal by the server ends it
/// with that refusal as the error, and so does the stop flag ([`vtnt_measure::stop`]).
pub fn block_on<T, E: From<Error>>(
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let stop = async {
        if !vtnt_measure::stop::armed() {
            std::future::pending::<()>().await;
        }
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        while !vtnt_measure::stop::interrupted() {
            tick.tick().await;
        }
    };
    let refusal = async {
        let notified = REFUSED.notified();
        if REFUSAL.get().is_none() {
            notified.await;
        }
        REFUSAL.get().cloned().unwrap_or_default()
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .io("starting the tokio runtime")?
        .block_on(async {
            tokio::select! {
                r = fut => r,
                why = refusal => Err(Error::Refused(why).into()),
                () = stop => Err(Error::Interrupted.into()),
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_and_tokens() {
        assert_eq!(deploy_subject("t", "fr"), "vtnt.deploy.t.fr");
        assert_eq!(wq_subject("*", ANY), "vtnt.wq.*.any");
        assert_eq!(subject_tenant("vtnt.wq.t.fr"), Some("t"));
        assert_eq!(subject_tenant("vtnt.deploy.t.any"), Some("t"));
        assert_eq!(subject_tenant("vtnt.results.t.j.r"), None);
        assert_eq!(results_subject("t", "j", "r"), "vtnt.results.t.j.r");
        assert!(check_token("node", "n-1_a").is_ok());
        for bad in ["", "a.b", "a b", "*", ">", &"x".repeat(65)] {
            assert!(check_token("node", bad).is_err(), "{bad}");
        }
    }
}
