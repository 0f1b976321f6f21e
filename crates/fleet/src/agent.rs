//! `vtnt agent`: one per node. It dials out to the broker (a node opens no port),
//! heartbeats its [`NodeInfo`] to `vtnt.nodes.<node>` (stream `VTNT_NODES`, the last
//! one per node), and takes a job only while it has a free slot:
//!
//! - discard mode: it listens on `vtnt.deploy.<location>` and `vtnt.deploy.any` in the
//!   queue group `vtnt-agents` while a slot is free, and stops listening when the last
//!   one is taken (right after its answer), so a request with no free agent gets "no
//!   responders" at once;
//! - wait mode: while a slot is free it pulls one message at a time from its location's
//!   work queue and from `any`'s (a long poll on each; should both deliver at once with
//!   one slot free, the second is given back with a NAK), reports progress while the job
//!   runs (so JetStream does not redeliver it before [`ACK_WAIT`](crate::ACK_WAIT) passes
//!   without news), and acks it once its results are stored. A job of an agent that dies
//!   is redelivered.
//!
//! A job is re-checked here as the command line checks it (the line decoded, the probing
//! policy with this host's exclusion list and this agent's consent to public targets),
//! admitted within its tenant's quota (a lease renewed while it runs, returned with its
//! probes settled when it ends: [`crate::quota`]), then run by `vtnt_runtimes::Runtime::run` on a blocking thread. Its scamper records go
//! out one message each, then its [`JobSummary`]. SIGTERM (or SIGINT) drains: running
//! jobs finish, no new one is taken, the node says `stopped`, exit 0.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{ensure, ResultExt};
use crate::Error;
use async_nats::jetstream::{self, AckKind};
use futures::stream::SelectAll;
use futures::StreamExt;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};
use vtnt_job::{JobSpec, Targets};
use vtnt_policy::PrefixSet;
use vtnt_runtimes::net::Network;
use vtnt_runtimes::{ImageSource, RunOptions, Runtime};

use crate::proto::{
    DeployReply, JobRequest, JobStatus, JobSummary, Mode, NodeInfo, NodeState, OptOutState, Timings,
};
use crate::{Connect, Fleet, ANY, DEPLOY_GROUP};

mod results;

/// How an agent runs.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    pub connect: Connect,
    pub node: String,
    pub location: String,
    pub slots: usize,
    pub runtimes: Vec<Runtime>,
    /// Where jobs probe (a lab's namespace, or this host's network).
    pub net: Network,
    /// Whether jobs may probe public targets (each job must ask too).
    pub allow_public: bool,
    pub heartbeat: Duration,
    /// How long one job may run once started.
    pub timeout: Duration,
    /// Image server bandwidth, bit/s.
    pub bandwidth_bps: u64,
    /// Fetch images from this image server (`http://HOST:PORT`), or from the fleet's
    /// object store (`nats`: [`crate::images`]), rather than one server per job.
    pub images_from: Option<String>,
    /// What it advertises for measurements' selection: free tags, its AS number, its
    /// country (ISO 3166 alpha-2).
    pub tags: Vec<String>,
    pub asn: Option<u32>,
    pub country: Option<String>,
    /// The address its probes leave from as the world sees it (`--public-address`);
    /// `None`: the network's vantage address, where it has one
    /// (`Network::vantage_address`).
    pub public_address: Option<std::net::IpAddr>,
    /// Who probes and how to reach them, carried in the payload of every job's probes
    /// where the method allows (`--contact`, [`vtnt_jobspec::JobKind::carry_contact`]).
    pub contact: Option<String>,
}

/// `--images-from` naming the fleet's object store.
pub const IMAGES_FROM_NATS: &str = "nats";
/// Heartbeats a node may miss before it is shown down.
pub const MISSED_HEARTBEATS: u32 = 3;
/// How long a discard-mode answer may take to leave (a broker that is away holds nothing
/// up longer).
const ANSWER_FLUSH: Duration = Duration::from_millis(100);
/// How long leaving the discard queue group may take ([`leave`]).
const LEAVE_WITHIN: Duration = Duration::from_secs(2);
/// How much of an error (a failed job's stderr) its summary keeps, bytes.
const ERROR_BYTES: usize = 2000;
/// How long a wait-mode pull waits at the server for a job before the agent asks again
/// (and looks whether it is draining).
const PULL_EXPIRES: Duration = Duration::from_millis(250);

/// Runs the agent until SIGTERM or SIGINT, then drains. Before anything runs a thread,
/// it takes its node's lock on this host, removes what a dead predecessor left and
/// starts its watchdog ([`crate::watchdog`]).
pub fn run(o: AgentOptions) -> crate::Result<()> {
    crate::check_token("--node", &o.node)?;
    crate::check_token("--location", &o.location)?;
    ensure!(o.slots > 0, Invalid, "--slots: at least 1");
    ensure!(!o.runtimes.is_empty(), Invalid, "--runtimes: at least one");
    for t in &o.tags {
        crate::check_token("--tag", t)?;
    }
    if let Some(c) = &o.contact {
        ensure!(
            !c.is_empty()
                && c.len() <= vtnt_jobspec::MAX_CONTACT
                && c.bytes().all(|b| (b' '..=b'~').contains(&b)),
            Invalid,
            "--contact `{c}`: printable ASCII, 1 to {} bytes",
            vtnt_jobspec::MAX_CONTACT
        );
    }
    if let Some(c) = &o.country {
        crate::check_country(c)?;
    }
    let _leftovers = crate::watchdog::start(&o.node)?;
    crate::block_on(agent(o))
}

/// What every job task shares.
struct Ctx {
    o: AgentOptions,
    nats: async_nats::Client,
    fleet: Fleet,
    slots: Arc<Semaphore>,
    /// Told when a slot frees (the puller waits on it).
    freed: Notify,
    done: AtomicU64,
    failed: AtomicU64,
    clock_sync: String,
    /// Where jobs fetch their images.
    images: ImageSource,
    /// Told when a slot frees (the main loop re-joins the discard queue group).
    freed_tx: mpsc::UnboundedSender<()>,
    /// The fleet's opt-out list as last read ([`crate::optout`]).
    opt_out: std::sync::RwLock<crate::optout::Held>,
    /// The heartbeats' stream, read back for the clock's offset ([`crate::clock`]).
    nodes: jetstream::stream::Stream,
    /// The recent estimates of the broker's clock against this node's.
    clock: std::sync::Mutex<crate::clock::Recent>,
    /// The SHA-256 of each runtime's image, by runtime name, hashed once at start-up.
    image_sha256: HashMap<String, String>,
}

impl Ctx {
    fn info(&self, state: NodeState) -> NodeInfo {
        NodeInfo {
            node: self.o.node.clone(),
            location: self.o.location.clone(),
            slots: self.o.slots,
            busy: self.o.slots - self.slots.available_permits(),
            runtimes: self
                .o
                .runtimes
                .iter()
                .map(|r| r.name().to_string())
                .collect(),
            heartbeat_ms: self.o.heartbeat.as_millis() as u64,
            deadline_ms: (self.o.heartbeat * MISSED_HEARTBEATS).as_millis() as u64,
            state,
            clock_sync: self.clock_sync.clone(),
            jobs_done: self.done.load(Ordering::Relaxed),
            jobs_failed: self.failed.load(Ordering::Relaxed),
            tags: self.o.tags.clone(),
            asn: self.o.asn,
            country: self.o.country.clone(),
            // its first connection counted out
            reconnects: self
                .nats
                .statistics()
                .connects
                .load(Ordering::Relaxed)
                .saturating_sub(1),
            opt_out: {
                let h = self.held();
                OptOutState {
                    revision: h.version.revision,
                    applied_us: h.applied_us,
                    unreadable: h.unreadable.clone(),
                }
            },
            clock: self.clock(),
        }
    }

    /// Where its probes leave from as the world sees it, when known: `--public-address`,
    /// else the network's vantage address, looked up as a job starts (a lab may come up,
    /// or come back, after the agent).
    fn source(&self) -> Option<std::net::IpAddr> {
        self.o.public_address.or_else(|| {
            self.o.net.vantage_address().unwrap_or_else(|e| {
                tracing::debug!(node = self.node(), "no source address: {e}");
                None
            })
        })
    }

    /// The tightest recent estimate of the broker's clock against this node's.
    fn clock(&self) -> Option<crate::clock::ClockOffset> {
        // a lock a panicking writer left still holds whole estimates
        self.clock.lock().unwrap_or_else(|p| p.into_inner()).best()
    }

    /// The opt-out list as last read (a lock a panicking writer left is still read: it
    /// holds a whole version, written in one assignment).
    fn held(&self) -> std::sync::RwLockReadGuard<'_, crate::optout::Held> {
        self.opt_out.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes the node's heartbeat and, from its round trip and the time the broker
    /// stored it, estimates the clock's offset ([`crate::clock`]).
    async fn heartbeat(&self, state: NodeState) -> crate::Result<()> {
        let v = serde_json::to_vec(&self.info(state)).parse("encoding the heartbeat")?;
        let t0 = crate::now_us();
        let ack = self
            .fleet
            .js
            .publish(crate::node_subject(&self.o.node), v.into())
            .await?
            .await
            .nats("heartbeat")?;
        let t1 = crate::now_us();
        // no estimate this time when the message is gone (a newer heartbeat replaced it)
        match self.nodes.get_raw_message(ack.sequence).await {
            Ok(m) => {
                let server_us = u64::try_from(m.time.unix_timestamp_nanos() / 1000).ok();
                if let Some(o) = server_us.and_then(|t| crate::clock::offset(t0, t1, t)) {
                    self.clock.lock().unwrap_or_else(|p| p.into_inner()).push(o);
                }
            }
            Err(e) => tracing::debug!(node = self.node(), "heartbeat not read back: {e}"),
        }
        Ok(())
    }

    fn node(&self) -> &str {
        &self.o.node
    }
}

async fn agent(o: AgentOptions) -> crate::Result<()> {
    for rt in &o.runtimes {
        o.net.check(*rt)?;
    }
    // Images (and the static vtnt they carry) are made before the node announces itself:
    // a node that is up starts a job at once, and a job's times are the job's.
    // Each image is hashed once here, for the records' provenance.
    let runtimes = o.runtimes.clone();
    let (built, image_sha256) = tokio::task::spawn_blocking(move || {
        let build = vtnt_runtimes::BuildOptions::default();
        let built = runtimes
            .iter()
            .map(|rt| rt.build_image(&build))
            .collect::<vtnt_runtimes::Result<Vec<_>>>()?;
        let hashes = built
            .iter()
            .map(|im| Ok((im.runtime.name().to_string(), im.sha256()?)))
            .collect::<vtnt_runtimes::Result<HashMap<_, _>>>()?;
        vtnt_runtimes::Result::Ok((built, hashes))
    })
    .await
    .map_err(|e| Error::Thread {
        what: "preparing the images".into(),
        source: Box::new(e),
    })??;
    let (client, fleet) = o.connect.fleet(&format!("vtnt-agent {}", o.node)).await?;
    let jobs = fleet.jobs().await?;
    // the heartbeats' stream, before the first heartbeat
    let nodes = fleet.nodes().await?;
    // the opt-out list, read before the first job
    crate::optout::create(&fleet).await?;
    let mut opt_out = crate::optout::Held::default();
    opt_out.take(crate::optout::read(&fleet).await);
    let mut queues = vec![fleet.wq_consumer(&jobs, &o.location).await?];
    if o.location != ANY {
        queues.push(fleet.wq_consumer(&jobs, ANY).await?);
    }
    let images = match o.images_from.as_deref() {
        None => ImageSource::Own,
        Some(IMAGES_FROM_NATS) => {
            let store = crate::images::open(&fleet).await?;
            crate::images::check(&store, &built).await?;
            ImageSource::Fetch(crate::images::fetcher(
                store,
                tokio::runtime::Handle::current(),
            ))
        }
        Some(url) => {
            ensure!(
                url.starts_with("http://"),
                Invalid,
                "--images-from `{url}`: an image server's http://HOST:PORT, or `{IMAGES_FROM_NATS}` (the fleet's object store)"
            );
            ImageSource::Server(url.trim_end_matches('/').to_string())
        }
    };
    // the tenants' backlogs, each counted for the tenant that asks only
    let backlogs = tokio::spawn(serve_backlogs(client.clone(), jobs.clone()));
    let (freed_tx, mut freed_rx) = mpsc::unbounded_channel();
    let ctx = Arc::new(Ctx {
        slots: Arc::new(Semaphore::new(o.slots)),
        freed: Notify::new(),
        done: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        clock_sync: clock_sync().await,
        images,
        freed_tx,
        opt_out: std::sync::RwLock::new(opt_out),
        nodes,
        clock: Default::default(),
        image_sha256,
        nats: client.clone(),
        fleet,
        o,
    });
    let opt_out = tokio::spawn(follow_opt_out(ctx.clone()));
    let mut term = signal(SignalKind::terminate()).io("handling SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).io("handling SIGINT")?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let pullers: Vec<_> = queues
        .into_iter()
        .map(|q| tokio::spawn(pull(ctx.clone(), q, stop_rx.clone())))
        .collect();
    let mut beat = tokio::time::interval(ctx.o.heartbeat);
    let mut deploy: Option<SelectAll<async_nats::Subscriber>> = None;
    tracing::info!(
        node = ctx.node(),
        location = %ctx.o.location,
        slots = ctx.o.slots,
        url = %ctx.o.connect.url,
        "agent up"
    );
    enum Ev {
        Stop,
        Beat,
        Request(async_nats::Message),
        Freed,
    }
    loop {
        // In the queue group only while a slot is free.
        let free = ctx.slots.available_permits() > 0;
        if free && deploy.is_none() {
            let mut subs = SelectAll::new();
            for loc in [ctx.o.location.as_str(), ANY] {
                subs.push(
                    client
                        .queue_subscribe(crate::deploy_subject("*", loc), DEPLOY_GROUP.into())
                        .await?,
                );
                if loc == ANY {
                    break;
                }
            }
            deploy = Some(subs);
        } else if !free {
            // a pull took the last slot: out of the group, answering what was on its way
            if let Some(subs) = deploy.take() {
                leave(&client, subs, &ctx.o.node).await;
            }
        }
        let ev = tokio::select! {
            _ = term.recv() => Ev::Stop,
            _ = int.recv() => Ev::Stop,
            _ = beat.tick() => Ev::Beat,
            Some(()) = freed_rx.recv() => Ev::Freed,
            Some(m) = next_request(&mut deploy) => Ev::Request(m),
        };
        match ev {
            Ev::Stop => break,
            Ev::Beat => {
                if let Err(e) = ctx.heartbeat(NodeState::Up).await {
                    tracing::warn!(node = ctx.node(), error = %format!("{e:#}"), "heartbeat failed");
                }
            }
            Ev::Freed => {}
            Ev::Request(m) => {
                let Some(reply) = reply_to(&m) else {
                    tracing::warn!(
                        node = ctx.node(),
                        subject = %m.subject,
                        reply = ?m.reply,
                        "a request without a usable reply subject"
                    );
                    continue;
                };
                let req = request(&m.subject, &m.payload);
                let permit = ctx.slots.clone().try_acquire_owned().ok();
                let answer = answer(&req, permit.is_some(), &ctx.o.node);
                // the answer goes out first: the controller's decision is this round trip
                client
                    .publish(
                        reply,
                        serde_json::to_vec(&answer)
                            .parse("encoding the answer")?
                            .into(),
                    )
                    .await?;
                let full = ctx.slots.available_permits() == 0;
                if full || answer.accepted {
                    // On the wire before the group changes and before the job starts:
                    // the server held an answer read together with an UNSUB until it had
                    // changed the queue group (half a millisecond), and a job started at
                    // once ran before the answer left. Bounded: a broker that is away
                    // holds nothing up.
                    let _ = tokio::time::timeout(ANSWER_FLUSH, client.flush()).await;
                }
                if full {
                    // so that a request with no other free agent gets "no responders"
                    if let Some(subs) = deploy.take() {
                        leave(&client, subs, &ctx.o.node).await;
                    }
                }
                if let (Ok(req), Some(permit)) = (req, permit) {
                    tokio::spawn(job(ctx.clone(), permit, req, None));
                }
            }
        }
    }
    // Drain: out of the queue group (what was on its way answered), no more pulls,
    // running jobs finish.
    if let Some(subs) = deploy.take() {
        leave(&client, subs, &ctx.o.node).await;
    }
    let _ = stop_tx.send(true);
    opt_out.abort();
    tracing::info!(
        node = ctx.node(),
        "draining: no new job, the running ones finish"
    );
    let _ = ctx.heartbeat(NodeState::Draining).await;
    for p in pullers {
        let _ = p.await;
    }
    let all = u32::try_from(ctx.o.slots).unwrap_or(u32::MAX);
    let mut beat = tokio::time::interval(ctx.o.heartbeat);
    let drained = ctx.slots.acquire_many(all);
    tokio::pin!(drained);
    loop {
        tokio::select! {
            _ = &mut drained => break,
            _ = beat.tick() => { let _ = ctx.heartbeat(NodeState::Draining).await; }
        }
    }
    backlogs.abort();
    ctx.heartbeat(NodeState::Stopped).await?;
    client.flush().await?;
    tracing::info!(node = ctx.node(), "agent stopped");
    Ok(())
}

/// Leaves the discard queue group (its last slot taken): the subscriptions are drained
/// (UNSUB, then a PING whose PONG ends them), so every request the server routed here
/// before it took the UNSUB is still read and answered `busy`, and the controller asks
/// again; none is dropped unanswered (it would wait out its timeout). Bounded by
/// [`LEAVE_WITHIN`]: a broker that is away holds nothing up.
async fn leave(client: &async_nats::Client, subs: SelectAll<async_nats::Subscriber>, node: &str) {
    let deadline = tokio::time::Instant::now() + LEAVE_WITHIN;
    for mut sub in subs {
        if sub.drain().await.is_err() {
            continue;
        }
        while let Ok(Some(m)) = tokio::time::timeout_at(deadline, sub.next()).await {
            let req = request(&m.subject, &m.payload);
            let (Some(reply), true) = (reply_to(&m), req.is_ok()) else {
                continue;
            };
            if let Ok(v) = serde_json::to_vec(&answer(&req, false, node)) {
                let _ = client.publish(reply, v.into()).await;
            }
        }
    }
}

async fn next_request(
    subs: &mut Option<SelectAll<async_nats::Subscriber>>,
) -> Option<async_nats::Message> {
    match subs {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

/// Wait mode: while a slot is free, one job at a time from one work queue (one such task
/// per queue: the location's and `any`'s).
async fn pull(
    ctx: Arc<Ctx>,
    queue: jetstream::consumer::PullConsumer,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    while !*stop.borrow() {
        if ctx.slots.available_permits() == 0 {
            tokio::select! {
                _ = ctx.freed.notified() => {}
                _ = tokio::time::sleep(PULL_EXPIRES) => {}
            }
            continue;
        }
        let msg = match queue
            .batch()
            .max_messages(1)
            .expires(PULL_EXPIRES)
            .messages()
            .await
        {
            Ok(mut batch) => batch.next().await,
            Err(e) => {
                tracing::warn!(node = ctx.node(), error = %e, "pulling a job failed");
                tokio::time::sleep(PULL_EXPIRES).await;
                continue;
            }
        };
        let msg = match msg {
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                tracing::warn!(node = ctx.node(), error = %e, "pulling a job failed");
                continue;
            }
            None => continue,
        };
        let Ok(permit) = ctx.slots.clone().try_acquire_owned() else {
            // another queue's job or a discard-mode one took the slot meanwhile: give it
            // back at once (a delivery counted against MAX_DELIVER)
            let _ = msg.ack_with(AckKind::Nak(None)).await;
            continue;
        };
        if ctx.slots.available_permits() == 0 {
            // wake the main loop, which leaves the discard queue group
            let _ = ctx.freed_tx.send(());
        }
        match request(&msg.subject, &msg.payload) {
            Ok(req) => {
                tokio::spawn(job(ctx.clone(), permit, req, Some(msg)));
            }
            Err(e) => {
                tracing::warn!(node = ctx.node(), error = %e, "a job request refused");
                // never runnable: terminate it rather than have it redelivered
                let _ = msg.ack_with(AckKind::Term).await;
            }
        }
    }
}

/// The tenant whose backlog a request on `subject` asks for, and whether its reply
/// subject may be answered: the server's mapped reply of a request that came through the
/// tenant's service import (`_R_.`), or the tenant's own inbox (a broker without
/// accounts). An answer goes out with the agent's rights, so nowhere else.
fn backlog_asked(subject: &str, reply: Option<&str>) -> Option<String> {
    let t = match subject.split('.').collect::<Vec<_>>()[..] {
        ["vtnt", "backlog", t] if crate::check_token("--tenant", t).is_ok() => t,
        _ => return None,
    };
    let reply = reply?;
    let inbox = crate::auth::Role::Tenant(t.to_string()).inbox_prefix();
    let ok = reply.starts_with("_R_.")
        || reply
            .strip_prefix(inbox.as_str())
            .is_some_and(|r| r.starts_with('.'));
    ok.then(|| t.to_string())
}

/// Answers backlog requests ([`crate::backlog`]) until `client` closes (an agent's
/// task): each counted in `jobs` for the tenant its subject names only.
pub async fn serve_backlogs(
    client: async_nats::Client,
    jobs: jetstream::stream::Stream,
) -> crate::Result<()> {
    let mut requests = client
        .queue_subscribe(crate::backlog_subject("*"), crate::backlog::GROUP.into())
        .await
        .nats("listening for backlog requests")?;
    while let Some(m) = requests.next().await {
        let Some(t) = backlog_asked(&m.subject, m.reply.as_deref()) else {
            tracing::warn!(subject = %m.subject, reply = ?m.reply, "a backlog request refused");
            continue;
        };
        let Some(reply) = m.reply else { continue };
        let answer = match crate::backlog::count(&jobs, &t).await {
            Ok(b) => serde_json::to_vec(&b).parse("encoding a backlog")?,
            Err(e) => {
                tracing::warn!(tenant = %t, error = %format!("{e:#}"), "counting a backlog failed");
                continue;
            }
        };
        client
            .publish(reply, answer.into())
            .await
            .nats("answering a backlog request")?;
    }
    Ok(())
}

/// Reads the opt-out list every [`crate::optout::POLL`]; a new version is applied to the
/// jobs admitted from then on and announced at once in a heartbeat.
async fn follow_opt_out(ctx: Arc<Ctx>) {
    let mut t = tokio::time::interval(crate::optout::POLL);
    loop {
        t.tick().await;
        let read = crate::optout::read(&ctx.fleet).await;
        {
            let mut held = ctx.opt_out.write().unwrap_or_else(|p| p.into_inner());
            if !held.take(read) {
                continue;
            }
            tracing::info!(
                node = ctx.node(),
                revision = held.version.revision,
                prefixes = held.version.prefixes.len(),
                unreadable = ?held.unreadable,
                "opt-out list applied"
            );
        }
        if let Err(e) = ctx.heartbeat(NodeState::Up).await {
            tracing::warn!(node = ctx.node(), error = %format!("{e:#}"), "heartbeat failed");
        }
    }
}

/// Where a discard-mode request may be answered: on the inbox of the tenant its subject
/// names, nowhere else. The reply subject is the requester's to choose, and an answer
/// goes out with the agent's rights (which store results for every tenant), so an answer
/// elsewhere could land in another tenant's results or inbox ([`crate::auth`]).
fn reply_to(m: &async_nats::Message) -> Option<async_nats::Subject> {
    let reply = m.reply.as_ref()?;
    let tenant = crate::subject_tenant(&m.subject)?;
    let inbox = crate::auth::Role::Tenant(tenant.to_string()).inbox_prefix();
    (reply.strip_prefix(inbox.as_str())?.starts_with('.')).then(|| reply.clone())
}

/// The answer to a discard-mode request: accepted with a free slot, `busy` without one
/// (another agent may take it), refused with the reason when the request is bad.
fn answer(req: &Result<JobRequest, String>, free: bool, node: &str) -> DeployReply {
    DeployReply {
        accepted: req.is_ok() && free,
        job: req.as_ref().map_or(String::new(), |r| r.id.clone()),
        node: node.to_string(),
        busy: req.is_ok() && !free,
        reason: match (req, free) {
            (Ok(_), true) => None,
            (Ok(_), false) => Some("no free slot".into()),
            (Err(e), _) => Some(e.clone()),
        },
    }
}

/// The job request of a message on `subject`, whose tenant must be the one the subject
/// names (the broker lets a tenant publish under its own name only): a tenant cannot
/// have its job's results stored as another's.
fn request(subject: &str, payload: &[u8]) -> Result<JobRequest, String> {
    let req: JobRequest =
        serde_json::from_slice(payload).map_err(|e| format!("malformed job request: {e}"))?;
    // a cycle's job is named after it (`Definition::job_id`), so its records' envelope
    // names what its id says
    if let Some(c) = &req.cycle {
        let prefix = format!("{}-c{}-", c.measurement, c.cycle);
        if crate::check_token("measurement", &c.measurement).is_err()
            || !req.id.starts_with(&prefix)
        {
            return Err(format!(
                "refused: job `{}` is not of measurement `{}`'s cycle {}",
                req.id, c.measurement, c.cycle
            ));
        }
    }
    match crate::subject_tenant(subject) {
        Some(t) if t == req.tenant => Ok(req),
        t => Err(format!(
            "refused: the job names tenant `{}` but came under {}",
            req.tenant,
            t.map_or_else(|| format!("subject {subject}"), |t| format!("tenant `{t}`"))
        )),
    }
}

/// Runs one job, publishes its results, acks its work-queue message, frees its slot.
async fn job(
    ctx: Arc<Ctx>,
    permit: OwnedSemaphorePermit,
    req: JobRequest,
    wq: Option<jetstream::Message>,
) {
    let start_us = crate::now_us();
    let t0 = Instant::now();
    let delivery = wq
        .as_ref()
        .and_then(|m| m.info().ok().map(|i| i.delivered as u64))
        .unwrap_or(1);
    let mode = match wq {
        Some(_) => Mode::Wait,
        None => Mode::Discard,
    };
    tracing::info!(
        node = ctx.node(),
        job = %req.id,
        runtime = %req.runtime,
        delivery,
        tenant = %req.tenant,
        "job started"
    );
    let wq = wq.map(Arc::new);
    // Progress reports while the job runs, so JetStream does not give it to another.
    let progress = wq.clone().map(|m| {
        tokio::spawn(async move {
            let mut t = tokio::time::interval(crate::ACK_WAIT / 4);
            t.tick().await;
            loop {
                t.tick().await;
                let _ = m.ack_with(AckKind::Progress).await;
            }
        })
    });
    let opts = RunOptions {
        net: ctx.o.net.clone(),
        bandwidth_bps: ctx.o.bandwidth_bps,
        images: ctx.images.clone(),
        timeout: ctx.o.timeout,
        ..Default::default()
    };
    let (allow_public, runtimes) = (ctx.o.allow_public, ctx.o.runtimes.clone());
    let opt_out = ctx.held().exclusions().cloned();
    let contact = ctx.o.contact.clone();
    let r = req.clone();
    fn thread<T>(e: tokio::task::JoinError) -> Result<T, (JobStatus, String)> {
        Err((JobStatus::Error, format!("the job's thread: {e}")))
    }
    let checked = match patiently(mode, || crate::targets::fetch(&ctx.fleet, &req)).await {
        Err(e) => Err((JobStatus::Error, crate::error::chain(&e))),
        Ok(list) => tokio::task::spawn_blocking(move || -> Result<_, (JobStatus, String)> {
            let (rt, mut spec) = admit(&r, list.as_deref(), &runtimes, allow_public, opt_out)
                .map_err(|e| (JobStatus::Refused, e))?;
            // who probes, in the payload where the method allows
            if let Some(c) = &contact {
                spec.kind.carry_contact(c.as_bytes());
            }
            // IPv6 where this node's network has none: refused, not run
            opts.net
                .check_job(&spec)
                .map_err(|e| (JobStatus::Refused, crate::error::chain(&e)))?;
            Ok((rt, spec, opts))
        })
        .await
        .unwrap_or_else(thread),
    };
    // the fleet-wide rate limit: the job's pps lowered to its share of every prefix and
    // destination it probes ([`crate::rate`]), waiting for one in wait mode
    let (checked, rate) = match checked {
        Ok((rt, mut spec, opts)) => match rate_lease(&ctx, &req, &spec, mode).await {
            Ok(held) => {
                spec.engine.pps = held.pps;
                (Ok((rt, spec, opts)), held.keys)
            }
            Err(e) => (Err(e), Vec::new()),
        },
        Err(e) => (Err(e), Vec::new()),
    };
    // the tenant's quota, as the job starts: refused over it, else its lease renewed
    // while it runs ([`crate::quota`])
    let leased = match checked {
        Ok((rt, spec, opts)) => {
            let probes = crate::quota::probe_bound(&spec);
            let admit =
                || crate::quota::admit(&ctx.fleet, &req.tenant, &req.id, ctx.node(), probes);
            match patiently(mode, admit).await {
                Ok(Ok(())) => Ok((rt, spec, opts)),
                Ok(Err(why)) => Err((JobStatus::Refused, why)),
                Err(e) => Err((JobStatus::Error, crate::error::chain(&e))),
            }
        }
        Err(e) => Err(e),
    };
    if leased.is_err() {
        release_rate(&ctx, &req, &rate).await;
    }
    let lease = leased.is_ok().then(|| {
        let (ctx, req, rate) = (ctx.clone(), req.clone(), rate.clone());
        tokio::spawn(async move {
            let mut t = tokio::time::interval(crate::quota::RENEW);
            t.tick().await;
            loop {
                t.tick().await;
                let _ = crate::quota::renew(&ctx.fleet, &req.tenant, &req.id).await;
                let _ = crate::rate::renew(&ctx.fleet, &req.id, &rate).await;
            }
        })
    });
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut summary = JobSummary {
        job: req.id.clone(),
        tenant: req.tenant.clone(),
        node: ctx.o.node.clone(),
        location: ctx.o.location.clone(),
        runtime: req.runtime.clone(),
        status: JobStatus::Ok,
        error: None,
        code: None,
        records: 0,
        resumed: None,
        delivery,
        mode: Some(mode),
        timings: Timings {
            queue_ms: start_us.saturating_sub(req.submitted_us) as f64 / 1e3,
            deploy_ms: 0.0,
            exec_ms: 0.0,
            cleanup_ms: 0.0,
            total_ms: 0.0,
        },
        clock_sync: ctx.clock_sync.clone(),
        cycle: req.cycle.clone(),
        image_sha256: ctx.image_sha256.get(&req.runtime).cloned(),
        source: ctx.source(),
        clock: ctx.clock(),
    };
    // a wait-mode job run once on a target list keeps its progress; delivered again, it
    // probes only the targets whose records are not stored yet ([`crate::progress`])
    let (list, keep_progress) = match &leased {
        Ok((_, spec, _)) => (
            spec.target_list().to_vec(),
            mode == Mode::Wait && spec.every.is_zero() && !spec.target_list().is_empty(),
        ),
        Err(_) => (Vec::new(), false),
    };
    let mut done = crate::progress::Done::new(list.len());
    if keep_progress && delivery > 1 {
        let (t, j, n) = (&req.tenant, &req.id, list.len());
        match patiently(mode, || crate::progress::read(&ctx.fleet, t, j, n)).await {
            Ok(d) => done = d,
            Err(e) => {
                tracing::warn!(node = ctx.node(), job = %req.id, error = %crate::error::chain(&e), "reading the job's progress failed: running it whole")
            }
        }
    }
    if done.count() > 0 {
        summary.resumed = Some(done.count());
    }
    let left: Vec<std::net::IpAddr> = (0..list.len())
        .filter(|i| !done.contains(*i))
        .map(|i| list[i])
        .collect();
    let mut results = results::Results::new(
        &ctx.fleet,
        &req,
        summary.clone(),
        &list,
        done,
        keep_progress,
    );
    // the job runs; its records are stored as it prints them
    let mut streamed = 0usize;
    let mut storing: crate::Result<()> = Ok(());
    let ran = match leased {
        Ok((rt, mut spec, opts)) => {
            if summary.resumed.is_some() {
                spec.targets = vtnt_job::Targets::List(left);
            }
            let (tx, mut lines) = mpsc::unbounded_channel::<String>();
            let run = tokio::task::spawn_blocking(move || {
                if spec.target_list().is_empty() && !list.is_empty() {
                    // every target's records were stored by an earlier delivery
                    return Ok(vtnt_runtimes::RunOutput {
                        code: Some(0),
                        ..Default::default()
                    });
                }
                rt.run_streaming(&spec, &opts, |l| {
                    let _ = tx.send(l);
                })
                .map_err(|e| (JobStatus::Error, crate::error::chain(&e)))
            });
            let mut tick = tokio::time::interval(results::PROGRESS_EVERY);
            loop {
                tokio::select! {
                    line = lines.recv() => {
                        let Some(line) = line else { break };
                        streamed += 1;
                        if storing.is_ok() {
                            storing = results.record(&line).await;
                        }
                    }
                    _ = tick.tick() => {
                        if storing.is_ok() {
                            storing = results.checkpoint().await;
                        }
                    }
                }
            }
            run.await.unwrap_or_else(thread)
        }
        Err(e) => Err(e),
    };
    let total = t0.elapsed();
    summary.timings.total_ms = ms(total);
    let stdout = match ran {
        Ok(out) => {
            summary.code = out.code;
            summary.timings.deploy_ms = ms(out.deploy_time);
            summary.timings.exec_ms = ms(out.exec_time);
            summary.timings.cleanup_ms = ms(total.saturating_sub(out.deploy_time + out.exec_time));
            if !out.ok() {
                summary.status = JobStatus::Failed;
                summary.error = Some(tail(out.stderr.trim()));
            }
            out.stdout
        }
        Err((status, e)) => {
            summary.status = status;
            summary.error = Some(tail(&e));
            String::new()
        }
    };
    let records = || stdout.lines().filter(|l| !l.trim().is_empty());
    // the lines printed after the last one handed on while it ran
    for line in records().skip(streamed) {
        if storing.is_ok() {
            storing = results.record(line).await;
        }
    }
    summary.records = summary.resumed.unwrap_or(0) + results.published();
    let stored = match storing {
        Ok(()) => results.finish(&summary).await,
        Err(e) => Err(e),
    };
    if let Some(p) = progress {
        p.abort();
    }
    if let Some(renewing) = lease {
        renewing.abort();
        // what it sent, as its records say, when it ran to the end
        let sent = (summary.status == JobStatus::Ok).then(|| crate::quota::sent_probes(records()));
        if let Err(e) = crate::quota::release(&ctx.fleet, &req.tenant, &req.id, sent).await {
            tracing::warn!(node = ctx.node(), job = %req.id, error = %format!("{e:#}"), "returning the job's quota lease failed");
        }
        release_rate(&ctx, &req, &rate).await;
    }
    match (&stored, &wq) {
        (Ok(()), Some(m)) => {
            if let Err(e) = m.double_ack().await {
                tracing::warn!(node = ctx.node(), job = %req.id, error = %e, "acknowledging the job failed");
            }
        }
        (Err(e), _) => tracing::warn!(
            node = ctx.node(),
            job = %req.id,
            error = %format!("{e:#}"),
            "storing the job's results failed"
        ),
        _ => {}
    }
    if stored.is_ok() {
        if let Err(e) = crate::targets::remove(&ctx.fleet, &req).await {
            tracing::warn!(
                node = ctx.node(),
                job = %req.id,
                error = %format!("{e:#}"),
                "removing the job's target list failed"
            );
        }
    }
    ctx.done.fetch_add(1, Ordering::Relaxed);
    if summary.status != JobStatus::Ok {
        ctx.failed.fetch_add(1, Ordering::Relaxed);
    }
    tracing::info!(
        node = ctx.node(),
        job = %req.id,
        tenant = %req.tenant,
        status = summary.status.name(),
        records = summary.records,
        total_ms = summary.timings.total_ms,
        error = summary.error.as_deref(),
        "job done"
    );
    drop(permit);
    ctx.freed.notify_one();
    let _ = ctx.freed_tx.send(());
}

/// A systemd unit that runs `exe args` as node `node`'s agent: it starts once the
/// network is up and again after a failure; stopping it sends SIGTERM to the agent alone
/// (`KillMode=mixed`: its jobs' processes are left to finish, so it drains), and gives
/// the drain a job's `timeout` and half a minute before SIGKILL.
pub fn systemd_unit(
    exe: &std::path::Path,
    args: &[String],
    node: &str,
    location: &str,
    timeout: Duration,
) -> String {
    let exec: Vec<String> = std::iter::once(exe.display().to_string())
        .chain(args.iter().cloned())
        .map(|w| systemd_word(&w))
        .collect();
    format!(
        "[Unit]\n\
         Description=vTNT agent {node} ({location})\n\
         After=network-online.target\n\
         Wants=network-online.target\n\
         \n\
         [Service]\n\
         ExecStart={}\n\
         KillMode=mixed\n\
         KillSignal=SIGTERM\n\
         TimeoutStopSec={}\n\
         Restart=on-failure\n\
         RestartSec=2\n\
         \n\
         [Install]\n\
         WantedBy=multi-user.target\n",
        exec.join(" "),
        timeout.as_secs() + 30
    )
}

/// One word of an `ExecStart=` line: `%` and `$` doubled (systemd's specifiers and
/// variables), and in double quotes, `\` and `"` escaped, when it is empty or holds a
/// blank, a quote, a backslash or a `;`.
fn systemd_word(w: &str) -> String {
    let w = w.replace('%', "%%").replace('$', "$$");
    let plain = !w.is_empty()
        && !w
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | ';'));
    if plain {
        return w;
    }
    format!(
        "\"{}\"",
        w.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    )
}

/// How long a wait-mode job's admission tries again a read or write the broker did not
/// answer ([`patiently`]).
pub const BROKER_WAIT: Duration = Duration::from_secs(60);

/// Runs `step` of a job's admission (its target list fetched, its rate and quota
/// leased) until it works: in wait mode an error of the broker's (a server of a cluster
/// lost, the broker restarting: [`Error::is_transient`]) is tried again every
/// [`crate::rate::RETRY`] for up to [`BROKER_WAIT`], since the job has probed nothing yet
/// and its message's progress is acked meanwhile. In discard mode, or past the wait, or
/// for any other error, the error ends the job.
async fn patiently<T, F>(mode: Mode, mut step: impl FnMut() -> F) -> crate::Result<T>
where
    F: std::future::Future<Output = crate::Result<T>>,
{
    let t0 = Instant::now();
    loop {
        match step().await {
            Err(e) if mode == Mode::Wait && e.is_transient() && t0.elapsed() < BROKER_WAIT => {
                tracing::warn!(error = %crate::error::chain(&e), "the broker did not answer a job's admission; trying again");
                tokio::time::sleep(crate::rate::RETRY).await;
            }
            done => return done,
        }
    }
}

/// Job `req`'s rate leases ([`crate::rate::acquire`]): its share now, or in wait mode
/// (its message's progress acked meanwhile) as soon as one frees within
/// [`crate::rate::WAIT`]; else refused, naming the prefix or destination whose limit
/// others hold.
async fn rate_lease(
    ctx: &Ctx,
    req: &JobRequest,
    spec: &vtnt_jobspec::JobSpec,
    mode: Mode,
) -> Result<crate::rate::Held, (JobStatus, String)> {
    let t0 = Instant::now();
    loop {
        let got = patiently(mode, || {
            crate::rate::acquire(
                &ctx.fleet,
                &req.id,
                ctx.node(),
                spec.target_list(),
                spec.engine.pps,
            )
        })
        .await;
        match got {
            Ok(Ok(held)) => return Ok(held),
            Ok(Err(why)) if mode == Mode::Discard || t0.elapsed() >= crate::rate::WAIT => {
                return Err((JobStatus::Refused, why))
            }
            Ok(Err(_)) => tokio::time::sleep(crate::rate::RETRY).await,
            Err(e) => return Err((JobStatus::Error, crate::error::chain(&e))),
        }
    }
}

/// Returns job `req`'s rate leases on `keys`.
async fn release_rate(ctx: &Ctx, req: &JobRequest, keys: &[String]) {
    if let Err(e) = crate::rate::release(&ctx.fleet, &req.id, keys).await {
        tracing::warn!(node = ctx.node(), job = %req.id, error = %format!("{e:#}"), "returning the job's rate leases failed");
    }
}

/// Checks a job, its long target list `list` if it has one, as the command line would
/// before any probe; returns what to run.
fn admit(
    req: &JobRequest,
    list: Option<&str>,
    runtimes: &[Runtime],
    allow_public: bool,
    opt_out: Result<PrefixSet, String>,
) -> Result<(Runtime, JobSpec), String> {
    let opt_out = opt_out?;
    let rt = runtimes
        .iter()
        .copied()
        .find(|r| r.name() == req.runtime)
        .ok_or_else(|| format!("this node has no runtime `{}`", req.runtime))?;
    let mut spec = vtnt_jobspec::decode(&req.line).map_err(|e| format!("job line: {e}"))?;
    match (&spec.targets, list) {
        (Targets::List(_), None) => {}
        (Targets::Module, Some(text)) => {
            let v = vtnt_jobspec::parse_target_list(text)
                .map_err(|e| format!("its target list: {e}"))?;
            let declared = req.targets.map_or(0, |t| t.count);
            if v.len() as u64 != declared || v.len() > crate::MAX_TARGETS {
                return Err(format!(
                    "its target list holds {} targets, its request says {declared} (at most {})",
                    v.len(),
                    crate::MAX_TARGETS
                ));
            }
            spec.targets = Targets::List(v);
        }
        (Targets::List(_), Some(_)) => {
            return Err("job line: inline targets and a target list apart".into())
        }
        (Targets::Module, None) => {
            return Err("job line: targets=@module, and no target list came with it".into())
        }
    }
    if spec.engine.allow_public && !allow_public {
        return Err(
            "refused: the job asks to probe public targets and this agent was not started with --allow-public"
                .into(),
        );
    }
    // the fleet's opt-out list, named as such
    if let Some((t, p)) = spec.target_list().iter().find_map(|t| match t {
        std::net::IpAddr::V4(a) => opt_out.find(*a).map(|p| (a, p)),
        std::net::IpAddr::V6(_) => None,
    }) {
        return Err(format!(
            "refused: target {t} is in {p}, on the fleet's opt-out list"
        ));
    }
    let host = vtnt_job::exclusion_list(&[]).map_err(|e| format!("{e:#}"))?;
    spec.engine.exclude = spec
        .engine
        .exclude
        .iter()
        .chain(host.iter())
        .chain(opt_out.iter())
        .copied()
        .collect();
    spec.check_targets(spec.target_list())
        .map_err(|e| format!("refused: {e}"))?;
    Ok((rt, spec))
}

/// The envelope of the record at place `i` ([`crate::progress::Places`]) of the job that
/// `s` sums up: its id (deduplication) and place, and its provenance, the same as its summary's (docs/fleet.md, Provenance):
/// the node, its clock (synchronised, and its offset to the broker's with the error),
/// the image's hash, the source address, the measurement and cycle it belongs to. A
/// header is absent when what it would say is unknown.
fn record_headers(s: &JobSummary, i: u64) -> async_nats::HeaderMap {
    let mut h = async_nats::HeaderMap::new();
    h.insert("Nats-Msg-Id", format!("{}.{i}", s.job).as_str());
    h.insert("Vtnt-Index", i.to_string().as_str());
    h.insert("Vtnt-Node", s.node.as_str());
    h.insert("Vtnt-Clock-Sync", s.clock_sync.as_str());
    if let Some(c) = &s.clock {
        h.insert("Vtnt-Clock-Offset-Us", c.offset_us.to_string().as_str());
        h.insert("Vtnt-Clock-Error-Us", c.error_us.to_string().as_str());
    }
    if let Some(sha) = &s.image_sha256 {
        h.insert("Vtnt-Image-Sha256", sha.as_str());
    }
    if let Some(a) = &s.source {
        h.insert("Vtnt-Source", a.to_string().as_str());
    }
    if let Some(c) = &s.cycle {
        h.insert("Vtnt-Measurement", c.measurement.as_str());
        h.insert("Vtnt-Cycle", c.cycle.to_string().as_str());
    }
    h
}

/// The end of `text`, at most [`ERROR_BYTES`] of it: what a summary keeps of an error.
fn tail(text: &str) -> String {
    let mut from = text.len().saturating_sub(ERROR_BYTES);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    text[from..].to_string()
}

/// Whether this host's clock is synchronised (`timedatectl`'s NTPSynchronized): `yes`,
/// `no`, or `unknown` when it cannot say within a second.
async fn clock_sync() -> String {
    let out = tokio::process::Command::new("timedatectl")
        .args(["show", "-p", "NTPSynchronized", "--value"])
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(1), out).await {
        Ok(Ok(o)) if o.status.success() => match String::from_utf8_lossy(&o.stdout).trim() {
            "yes" => "yes".into(),
            "no" => "no".into(),
            _ => "unknown".into(),
        },
        _ => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(words: &str, runtime: &str) -> JobRequest {
        let w: Vec<String> = words.split_whitespace().map(String::from).collect();
        let job = vtnt_job::parse_words(&w, vtnt_job::Vantage::Lab).unwrap();
        JobRequest {
            id: "j".into(),
            tenant: "t".into(),
            runtime: runtime.into(),
            location: ANY.into(),
            line: vtnt_jobspec::encode(&job.spec),
            targets: None,
            submitted_us: 0,
            cycle: None,
        }
    }

    /// A summary of `r` on node `n1`, before any provenance but the node's.
    fn summary(r: &JobRequest) -> JobSummary {
        JobSummary {
            job: r.id.clone(),
            tenant: r.tenant.clone(),
            node: "n1".into(),
            location: "fr".into(),
            runtime: r.runtime.clone(),
            status: JobStatus::Ok,
            error: None,
            code: Some(0),
            records: 1,
            resumed: None,
            delivery: 1,
            mode: Some(Mode::Wait),
            timings: Timings {
                queue_ms: 0.0,
                deploy_ms: 0.0,
                exec_ms: 0.0,
                cleanup_ms: 0.0,
                total_ms: 0.0,
            },
            clock_sync: "yes".into(),
            cycle: r.cycle.clone(),
            image_sha256: None,
            source: None,
            clock: None,
        }
    }

    #[test]
    fn every_record_carries_its_jobs_provenance() {
        let r = req("trace 192.0.2.1", "native");
        let mut s = summary(&r);
        // unknown: absent, not empty
        let h = record_headers(&s, 0);
        for name in [
            "Vtnt-Clock-Offset-Us",
            "Vtnt-Clock-Error-Us",
            "Vtnt-Image-Sha256",
            "Vtnt-Source",
        ] {
            assert!(h.get(name).is_none(), "{name}");
        }
        s.clock = Some(crate::clock::ClockOffset {
            offset_us: -1234,
            error_us: 56,
        });
        s.image_sha256 = Some("ab".repeat(32));
        s.source = Some("198.51.100.7".parse().unwrap());
        let h = record_headers(&s, 7);
        let get = |n: &str| h.get(n).unwrap().as_str().to_string();
        assert_eq!(get("Nats-Msg-Id"), "j.7");
        assert_eq!(get("Vtnt-Node"), "n1");
        assert_eq!(get("Vtnt-Clock-Sync"), "yes");
        assert_eq!(get("Vtnt-Clock-Offset-Us"), "-1234");
        assert_eq!(get("Vtnt-Clock-Error-Us"), "56");
        assert_eq!(get("Vtnt-Image-Sha256"), "ab".repeat(32));
        assert_eq!(get("Vtnt-Source"), "198.51.100.7");
        // the summary says the same, and an older agent's summary still reads
        let back: JobSummary = serde_json::from_slice(&serde_json::to_vec(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let mut old = serde_json::to_value(summary(&r)).unwrap();
        for k in ["image_sha256", "source", "clock"] {
            assert!(old.as_object_mut().unwrap().remove(k).is_none(), "{k}");
        }
        let back: JobSummary = serde_json::from_value(old).unwrap();
        assert_eq!(back.clock, None);
    }

    #[test]
    fn a_cycles_records_name_its_measurement_and_cycle() {
        let mut r = req("trace 192.0.2.1", "native");
        let h = record_headers(&summary(&r), 2);
        assert_eq!(h.get("Nats-Msg-Id").unwrap().as_str(), "j.2");
        assert_eq!(h.get("Vtnt-Index").unwrap().as_str(), "2");
        assert!(h.get("Vtnt-Measurement").is_none());
        r.id = "m1-c3-0".into();
        r.cycle = Some(crate::proto::CycleOf {
            measurement: "m1".into(),
            cycle: 3,
        });
        let h = record_headers(&summary(&r), 0);
        assert_eq!(h.get("Vtnt-Measurement").unwrap().as_str(), "m1");
        assert_eq!(h.get("Vtnt-Cycle").unwrap().as_str(), "3");
        let body = serde_json::to_vec(&r).unwrap();
        assert_eq!(request("vtnt.wq.t.any", &body).unwrap().cycle, r.cycle);
        // an envelope that its id contradicts, or not a token, is refused
        for (id, m, k) in [
            ("m1-c4-0", "m1", 3),
            ("m2-c3-0", "m1", 3),
            ("m.1-c3-0", "m.1", 3),
        ] {
            r.id = id.into();
            r.cycle = Some(crate::proto::CycleOf {
                measurement: m.into(),
                cycle: k,
            });
            let body = serde_json::to_vec(&r).unwrap();
            let e = request("vtnt.wq.t.any", &body).unwrap_err();
            assert!(e.contains("is not of measurement"), "{e}");
        }
    }

    #[test]
    fn a_systemd_unit_runs_the_same_command_and_lets_it_drain() {
        let args: Vec<String> = ["agent", "--node", "n1", "--password", "a b\"c$%", ""]
            .map(String::from)
            .to_vec();
        let u = systemd_unit(
            std::path::Path::new("/usr/local/bin/vtnt"),
            &args,
            "n1",
            "fr",
            Duration::from_secs(600),
        );
        assert!(
            u.contains(
                "ExecStart=/usr/local/bin/vtnt agent --node n1 --password \"a b\\\"c$$%%\" \"\"\n"
            ),
            "{u}"
        );
        assert!(u.contains("KillMode=mixed\n"), "{u}");
        assert!(u.contains("TimeoutStopSec=630\n"), "{u}");
        assert!(
            u.starts_with("[Unit]\nDescription=vTNT agent n1 (fr)\n"),
            "{u}"
        );
    }

    #[test]
    fn a_job_under_another_tenants_name_is_refused() {
        let body = serde_json::to_vec(&req("trace 192.0.2.1", "native")).unwrap();
        assert_eq!(request("vtnt.wq.t.fr", &body).unwrap().tenant, "t");
        assert!(request("vtnt.deploy.t.any", &body).is_ok());
        let e = request("vtnt.wq.u.fr", &body).unwrap_err();
        assert!(
            e.contains("names tenant `t` but came under tenant `u`"),
            "{e}"
        );
        assert!(request("vtnt.other", &body)
            .unwrap_err()
            .contains("subject vtnt.other"));
        assert!(request("vtnt.wq.t.fr", b"{")
            .unwrap_err()
            .starts_with("malformed job request"));
    }

    fn no_opt_out() -> Result<PrefixSet, String> {
        Ok(PrefixSet::new())
    }

    #[test]
    fn the_fleets_opt_out_list_refuses_its_targets_and_travels_with_the_job() {
        let rts = [Runtime::Native];
        let list = crate::optout::parse("192.0.2.0/28\n").unwrap();
        let job = req("trace 192.0.2.1", "native");
        let e = admit(&job, None, &rts, false, Ok(list.clone())).unwrap_err();
        assert_eq!(
            e,
            "refused: target 192.0.2.1 is in 192.0.2.0/28, on the fleet's opt-out list"
        );
        // a target outside: its probes (TNT's revelations too) stay out of the list
        let (_, spec) = admit(
            &req("trace 192.0.2.99", "native"),
            None,
            &rts,
            false,
            Ok(list),
        )
        .unwrap();
        assert!(spec
            .engine
            .exclude
            .find("192.0.2.5".parse().unwrap())
            .is_some());
        let e = admit(&job, None, &rts, false, Err("refused: unreadable".into())).unwrap_err();
        assert_eq!(e, "refused: unreadable");
    }

    #[test]
    fn the_agent_rechecks_what_it_is_given() {
        let rts = [Runtime::Native];
        assert!(admit(
            &req("trace 192.0.2.1", "native"),
            None,
            &rts,
            false,
            no_opt_out()
        )
        .is_ok());
        let e = admit(
            &req("trace 192.0.2.1", "runc"),
            None,
            &rts,
            false,
            no_opt_out(),
        )
        .unwrap_err();
        assert!(e.contains("no runtime `runc`"), "{e}");
        let public = req("trace --allow-public 8.8.8.8", "native");
        let e = admit(&public, None, &rts, false, no_opt_out()).unwrap_err();
        assert!(e.contains("--allow-public"), "{e}");
        assert!(admit(&public, None, &rts, true, no_opt_out()).is_ok());
        let mut bad = req("trace 192.0.2.1", "native");
        bad.line = "vtnt-job=1 kind=dance targets=192.0.2.1".into();
        assert!(admit(&bad, None, &rts, false, no_opt_out())
            .unwrap_err()
            .starts_with("job line:"));
        // a line that never went through the command line's checks: the public target
        // without the job's consent is refused even by an agent that allows them
        bad.line = "vtnt-job=1 kind=trace targets=8.8.8.8".into();
        let e = admit(&bad, None, &rts, true, no_opt_out()).unwrap_err();
        assert!(e.contains("8.8.8.8"), "{e}");
        // a long list apart: parsed, counted and checked like inline targets
        let mut long = req("trace 192.0.2.1", "native");
        long.line = "vtnt-job=1 kind=trace targets=@module".into();
        long.targets = Some(crate::proto::TargetList {
            count: 2,
            bytes: 22,
            chunks: 1,
        });
        let (_, spec) = admit(
            &long,
            Some("192.0.2.1\n192.0.2.2\n"),
            &rts,
            false,
            no_opt_out(),
        )
        .unwrap();
        assert_eq!(spec.target_list().len(), 2);
        let e = admit(&long, Some("192.0.2.1\n"), &rts, false, no_opt_out()).unwrap_err();
        assert!(e.contains("holds 1 targets, its request says 2"), "{e}");
        let e = admit(
            &long,
            Some("192.0.2.1\n8.8.8.8\n"),
            &rts,
            false,
            no_opt_out(),
        )
        .unwrap_err();
        assert!(e.contains("8.8.8.8"), "{e}");
        let e = admit(&long, None, &rts, false, no_opt_out()).unwrap_err();
        assert!(e.contains("no target list came with it"), "{e}");
    }

    #[test]
    fn a_backlog_is_counted_for_the_tenant_its_subject_names_and_answered_only_to_it() {
        assert_eq!(crate::backlog_subject("a"), "vtnt.backlog.a");
        assert_eq!(
            backlog_asked("vtnt.backlog.a", Some("_R_.x.y")).as_deref(),
            Some("a")
        );
        assert_eq!(
            backlog_asked("vtnt.backlog.a", Some("_INBOX_T.a.k1")).as_deref(),
            Some("a")
        );
        for (s, r) in [
            ("vtnt.backlog.a", Some("_INBOX_T.b.k1")),
            ("vtnt.backlog.a", Some("_INBOX_T.ab")),
            ("vtnt.backlog.a", Some("vtnt.results.a.x.s")),
            ("vtnt.backlog.a", None),
            ("vtnt.backlog.*", Some("_R_.x")),
            ("vtnt.backlog.>", Some("_R_.x")),
            ("vtnt.backlog.a.b", Some("_R_.x")),
            ("vtnt.wq.a.fr", Some("_R_.x")),
        ] {
            assert_eq!(backlog_asked(s, r), None, "{s} {r:?}");
        }
    }

    #[test]
    fn a_discard_request_is_answered_on_its_tenants_inbox_only() {
        let msg = |subject: &str, reply: Option<&str>| async_nats::Message {
            subject: subject.into(),
            reply: reply.map(Into::into),
            payload: Default::default(),
            headers: None,
            status: None,
            description: None,
            length: 0,
        };
        let ok = msg("vtnt.deploy.a.fr", Some("_INBOX_T.a.x1.2"));
        assert_eq!(reply_to(&ok).as_deref(), Some("_INBOX_T.a.x1.2"));
        for bad in [
            msg("vtnt.deploy.a.fr", Some("vtnt.results.b.j.s")),
            msg("vtnt.deploy.a.fr", Some("_INBOX_T.b.x1")),
            msg("vtnt.deploy.a.fr", Some("_INBOX_T.ab.x1")),
            msg("vtnt.deploy.a.fr", Some("_INBOX_T.a")),
            msg("vtnt.deploy.a.fr", None),
            msg("vtnt.other", Some("_INBOX_T.a.x")),
        ] {
            assert_eq!(reply_to(&bad), None, "{:?}", bad.reply);
        }
    }
}
