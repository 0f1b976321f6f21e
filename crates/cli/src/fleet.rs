//! `vtnt fleet up|down|submit|status|results|replay|images|measurement|opt-out|quota` and `vtnt agent`: options only; the broker,
//! the agent and the controller are `vtnt-fleet`'s (docs/fleet.md).

mod measurement;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use vtnt_fleet::auth::Role;
use vtnt_fleet::broker;
use vtnt_fleet::controller::{self, SubmitOptions};
use vtnt_fleet::{Connect, Mode, Outcome};
use vtnt_job::say;
use vtnt_runtimes::net::Network;
use vtnt_runtimes::Runtime;

/// Where the broker is and who we are: every fleet command but `up` and `down` takes
/// these.
#[derive(clap::Args, Debug)]
pub struct ConnectArgs {
    /// The NATS server(s) (`nats://HOST:PORT`, `tls://HOST:PORT`, comma-separated).
    /// Default: the fleet of --fleet, with its key for this command's role.
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// A fleet this host runs (`vtnt fleet up --name NAME`): its URL, key and CA.
    #[arg(long, value_name = "NAME", conflicts_with = "nats")]
    pub fleet: Option<String>,
    /// A file holding this user's nkey seed (`vtnt fleet up` writes them under
    /// /run/vtnt/fleet/NAME/keys/).
    #[arg(long, value_name = "FILE")]
    pub nkey: Option<PathBuf>,
    /// A NATS credentials file (JWT and nkey seed).
    #[arg(long, value_name = "FILE")]
    pub creds: Option<PathBuf>,
    /// User name (with --password).
    #[arg(long)]
    pub user: Option<String>,
    /// Password (with --user).
    #[arg(long)]
    pub password: Option<String>,
    /// The CA (PEM) that signed the server's certificate: TLS, verified against it.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// A client certificate (PEM, with --tls-key), for servers that verify clients.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The client certificate's key (PEM, with --tls-cert).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The JetStream domain holding the fleet's streams, when another server holds them
    /// (a leaf node's clients naming their hub's domain).
    #[arg(long, value_name = "DOMAIN")]
    pub js_domain: Option<String>,
}

impl ConnectArgs {
    fn connect(&self, role: Role) -> anyhow::Result<Connect> {
        // --fleet before --nats: only the URL may come from the configuration
        let mut c = match (&self.fleet, &self.nats) {
            (Some(f), _) => Connect::local(f, role)?,
            (None, Some(u)) => Connect::open(u, role),
            (None, None) => Connect::local(broker::DEFAULT_NAME, role)?,
        };
        anyhow::ensure!(
            self.tls_cert.is_some() == self.tls_key.is_some(),
            "--tls-cert and --tls-key go together (on the command line or in the configuration)"
        );
        if self.nkey.is_some() {
            c.nkey = self.nkey.clone();
        }
        if self.tls_ca.is_some() {
            c.tls_ca = self.tls_ca.clone();
        }
        c.creds = self.creds.clone();
        c.user = self.user.clone();
        c.password = self.password.clone();
        c.tls_cert = self.tls_cert.clone().zip(self.tls_key.clone());
        c.js_domain = self.js_domain.clone();
        Ok(c)
    }
}

/// The vantage points' nodes a job or a measurement may use, by what their agents say
/// of them (`vtnt agent --tag`, `--asn`, `--country`).
#[derive(clap::Args, Debug, Clone)]
pub struct VantageFilter {
    /// Only nodes with this tag; repeat: every one of them.
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    /// Only nodes in this AS; repeat: any of them.
    #[arg(long = "asn", value_name = "N")]
    asns: Vec<u32>,
    /// Only nodes in this country (ISO 3166 alpha-2); repeat: any of them.
    #[arg(long = "country", value_name = "CC")]
    countries: Vec<String>,
}

impl VantageFilter {
    fn is_empty(&self) -> bool {
        self.tags.is_empty() && self.asns.is_empty() && self.countries.is_empty()
    }

    /// The selection of `count` vantage points (none: all that match) among `locations`
    /// (none: any) whose nodes match.
    pub fn selection(
        self,
        locations: Vec<String>,
        count: Option<usize>,
    ) -> vtnt_fleet::measurement::Selection {
        vtnt_fleet::measurement::Selection {
            locations,
            tags: self.tags,
            asns: self.asns,
            countries: self.countries,
            count,
        }
    }
}

#[derive(clap::Subcommand)]
pub enum FleetCommand {
    /// Start a NATS server with JetStream on 127.0.0.1 (Debian's nats-server), state under
    /// /run/vtnt/fleet/NAME; prints its URL.
    ///
    /// Every client needs a key: one for the agents and one per tenant, made under
    /// /run/vtnt/fleet/NAME/keys/ (root only); each tenant is a NATS account of its own,
    /// submits under its own name only and alone reads its results; `up` makes every
    /// stream (docs/fleet.md).
    Up {
        /// The fleet's name: its state is /run/vtnt/fleet/NAME, and this host's commands
        /// name it with --fleet NAME.
        #[arg(long, default_value = broker::DEFAULT_NAME)]
        name: String,
        /// The address to listen on: another host's agents need a reachable one.
        #[arg(long, default_value = "127.0.0.1")]
        listen: std::net::IpAddr,
        /// The clients' TCP port.
        #[arg(long, default_value_t = broker::DEFAULT_PORT)]
        port: u16,
        /// A tenant who may place jobs (repeat for more).
        #[arg(long = "tenant", value_name = "NAME", default_value = broker::DEFAULT_TENANT)]
        tenants: Vec<String>,
        /// The server's certificate (PEM): clients must speak TLS.
        #[arg(long, value_name = "FILE", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The server certificate's key (PEM, with --tls-cert).
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// The CA that signed --tls-cert, given to this host's commands.
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        tls_ca: Option<PathBuf>,
        /// Mutual TLS: every client (agents, tenants, this host's commands) must also
        /// present a certificate signed by --tls-ca (`--tls-cert`/`--tls-key`).
        #[arg(long, requires = "tls_ca")]
        tls_verify: bool,
        /// Stay in the foreground, as a service does: nats-server runs as this command's
        /// child and its log lines are this command's log events (--log-format); SIGTERM
        /// or SIGINT stops it and keeps its state (keys, store) for the next start.
        #[arg(long)]
        foreground: bool,
    },
    /// Stop it and remove its state.
    Down {
        /// The fleet's name (`up --name`).
        #[arg(long, default_value = broker::DEFAULT_NAME)]
        name: String,
    },
    /// Place a job on the fleet; prints its id, or `discarded`.
    Submit {
        #[command(flatten)]
        connect: ConnectArgs,
        /// native, runc, docker, docker-scratch, vm, microvm.
        #[arg(long)]
        runtime: Runtime,
        /// Where it runs: a node's location, or `any`.
        #[arg(long, default_value = vtnt_fleet::ANY)]
        location: String,
        /// On a location whose nodes match, drawn at random among those that do.
        #[command(flatten)]
        nodes: VantageFilter,
        /// wait: queue it until a slot frees; discard: drop it when every slot is busy.
        #[arg(long, default_value = "wait")]
        mode: Mode,
        /// The tenant the job is placed for (its key: --nkey, or --fleet's).
        #[arg(long, default_value = broker::DEFAULT_TENANT)]
        tenant: String,
        /// Print the event as a JSON line instead.
        #[arg(long)]
        json: bool,
        /// The job: `vtnt` words, after `--` (e.g. `-- trace -q 1 203.0.113.10`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        job: Vec<String>,
    },
    /// Nodes (location, slots busy/total, runtimes, last heartbeat; down when late) and
    /// the work queues' backlog.
    Status {
        #[command(flatten)]
        connect: ConnectArgs,
        /// The tenant whose backlog and results count are shown.
        #[arg(long, default_value = broker::DEFAULT_TENANT)]
        tenant: String,
        #[arg(long)]
        json: bool,
    },
    /// Results: each job's scamper JSON lines, in order, once; its summary on stderr.
    Results {
        #[command(flatten)]
        connect: ConnectArgs,
        /// The tenant whose results these are.
        #[arg(long, default_value = broker::DEFAULT_TENANT)]
        tenant: String,
        /// Only this job.
        #[arg(long)]
        job: Option<String>,
        /// Keep reading as results arrive.
        #[arg(long)]
        follow: bool,
    },
    /// Copy a tenant's results into the results store (docs/store.md) through a durable
    /// consumer of the store's own: a store that was down catches up from where it was,
    /// and nothing is stored twice.
    #[cfg(feature = "store")]
    Store {
        #[command(flatten)]
        connect: ConnectArgs,
        #[arg(long, default_value = broker::DEFAULT_TENANT)]
        tenant: String,
        /// The store (default: as `vtnt import`'s).
        #[arg(long = "store", value_name = "PATH")]
        store: Option<PathBuf>,
        /// Keep storing results as they come, until stopped (Ctrl-C at any moment: a
        /// batch not yet acknowledged comes again).
        #[arg(long)]
        follow: bool,
        /// Print what was stored as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Seed 000's controller experiment: place the events of EVENTS (`AT LOCATION RUNTIME
    /// MODE JOB...` per line) at their times on the nodes of NODES (`NAME LOCATION` per
    /// line, all up), then write one JSON line per event: its outcome, how late it was
    /// placed, its job's summary and times (docs/fleet.md).
    Replay {
        #[command(flatten)]
        connect: ConnectArgs,
        nodes: PathBuf,
        events: PathBuf,
        /// The tenant the events are placed for.
        #[arg(long, default_value = broker::DEFAULT_TENANT)]
        tenant: String,
        /// Seconds to wait for the jobs' summaries once the last event is placed.
        #[arg(long, default_value_t = 600)]
        results_timeout: u64,
    },
    /// The runtimes' images in the fleet's object store (bucket `vtnt-images`), which
    /// agents started with `--images-from nats` fetch from. Uses the operator's key.
    Images {
        #[command(subcommand)]
        what: ImagesCommand,
    },
    /// Measurements: jobs run once or periodically on selected vantage points, their
    /// definitions stored in the fleet (docs/fleet.md, "Measurements").
    Measurement {
        #[command(subcommand)]
        what: measurement::DefinitionCommand,
    },
    /// The fleet's opt-out list: prefixes no agent probes, applied by every agent within
    /// about a second of a change (docs/fleet.md, "Etiquette"). Uses the operator's key.
    OptOut {
        #[command(subcommand)]
        what: OptOutCommand,
    },
    /// Per-tenant quotas: jobs running at once and probes per day, which the agents
    /// enforce (docs/fleet.md, "Quotas").
    Quota {
        #[command(subcommand)]
        what: QuotaCommand,
    },
    /// The fleet-wide rate limit toward one prefix (/24, /48) and one destination,
    /// summed over every agent's jobs (docs/fleet.md, "Etiquette"). Uses the operator's
    /// key.
    RateLimit {
        #[command(subcommand)]
        what: RateLimitCommand,
    },
}

#[derive(clap::Subcommand)]
pub enum RateLimitCommand {
    /// Set the limits (probes per second, at least 1, or `unlimited`); a limit not given
    /// stays as it was; neither given: 100 per prefix and 20 per destination.
    Set {
        #[command(flatten)]
        connect: ConnectArgs,
        /// Probes per second toward one IPv4 /24 or IPv6 /48, from the whole fleet.
        #[arg(long, value_name = "PPS", value_parser = rate, allow_hyphen_values = true)]
        per_prefix: Option<Rate>,
        /// Probes per second toward one address, from the whole fleet.
        #[arg(long, value_name = "PPS", value_parser = rate, allow_hyphen_values = true)]
        per_destination: Option<Rate>,
    },
    /// The limits now.
    Show {
        #[command(flatten)]
        connect: ConnectArgs,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Subcommand)]
pub enum OptOutCommand {
    /// Add prefixes (`a.b.c.d/len`), from the command line or a file of one a line (`#`
    /// comments); prefixes already covered fold into the wider one.
    Add {
        #[command(flatten)]
        connect: ConnectArgs,
        prefixes: Vec<String>,
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
    },
    /// Remove prefixes, each exactly as listed.
    Remove {
        #[command(flatten)]
        connect: ConnectArgs,
        #[arg(required = true)]
        prefixes: Vec<String>,
    },
    /// The list (one prefix a line) and its revision on stderr.
    List {
        #[command(flatten)]
        connect: ConnectArgs,
    },
}

#[derive(clap::Subcommand)]
pub enum QuotaCommand {
    /// Set a tenant's limits (the operator's key); a limit not given stays as it was.
    Set {
        #[command(flatten)]
        connect: ConnectArgs,
        /// The tenant.
        tenant: String,
        /// Its jobs running at once, at most: a number or `unlimited`.
        #[arg(long, value_name = "N", value_parser = limit)]
        concurrent_jobs: Option<Limit>,
        /// The probes its jobs send per UTC day, at most: a number or `unlimited`.
        #[arg(long, value_name = "N", value_parser = limit)]
        probes_per_day: Option<Limit>,
    },
    /// A tenant's limits and use: TENANT's with the operator's key, or without it the
    /// tenant of --tenant's own, with its key.
    Show {
        #[command(flatten)]
        connect: ConnectArgs,
        /// The tenant (read as the operator).
        of: Option<String>,
        /// Read as this tenant, its own quota.
        #[arg(long, default_value = broker::DEFAULT_TENANT, conflicts_with = "of")]
        tenant: String,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

impl FleetCommand {
    /// `up --foreground`: a long-running command.
    pub fn foreground(&self) -> bool {
        matches!(
            self,
            FleetCommand::Up {
                foreground: true,
                ..
            }
        )
    }
}

#[derive(clap::Subcommand)]
pub enum ImagesCommand {
    /// Build the images of --runtimes and store each under its file name (an object of
    /// that name is replaced).
    Put {
        #[command(flatten)]
        connect: ConnectArgs,
        /// The runtimes whose images to store, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        runtimes: Vec<Runtime>,
    },
    /// The images stored: name, bytes, chunks, and the SHA-256 an installed artifact is
    /// pinned to (`-` for images built on a host).
    List {
        #[command(flatten)]
        connect: ConnectArgs,
    },
}

#[derive(clap::Args)]
pub struct AgentArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// This node's name.
    #[arg(long)]
    node: String,
    /// Its location (e.g. `fr`); jobs for it or for `any` come here.
    #[arg(long)]
    location: String,
    /// Jobs it runs at once.
    #[arg(long, default_value_t = 1)]
    slots: usize,
    /// The runtimes it offers, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "native")]
    runtimes: Vec<Runtime>,
    /// The lab jobs probe (`vtnt lab up --name LAB`), unless --net says otherwise.
    #[arg(long, default_value = vtnt_runtimes::DEFAULT_LAB)]
    lab: String,
    /// The network jobs probe: `lab[:NAME]`, `host`, `tap:...` (as `vtnt run --net`).
    #[arg(long, value_name = "NET")]
    net: Option<Network>,
    /// Jobs may probe public targets (each job must ask with --allow-public too).
    #[arg(long)]
    allow_public: bool,
    /// Milliseconds between heartbeats; the node is down after 3 missed.
    #[arg(long, default_value_t = 1000)]
    heartbeat_ms: u64,
    /// Seconds a job may run once started.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Bandwidth of each job's own image server, Mbit/s.
    #[arg(long, default_value_t = vtnt_runtimes::DEFAULT_BANDWIDTH_MBPS)]
    bandwidth_mbps: u64,
    /// Fetch images from this image server (`http://HOST:PORT`, serving vtnt's images by
    /// file name), or `nats`: from the fleet's object store (`vtnt fleet images put`),
    /// instead of one server of each job's own, so downloads cross the real path.
    #[arg(long, value_name = "URL")]
    images_from: Option<String>,
    /// A tag it advertises for measurements' selection (`fleet measurement create
    /// --tag`); repeat for more.
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    /// The AS number its probes leave from, for selection (`--asn`).
    #[arg(long, value_name = "N")]
    asn: Option<u32>,
    /// Its country, ISO 3166 alpha-2 (`FR`), for selection (`--country`).
    #[arg(long, value_name = "CC")]
    country: Option<String>,
    /// The address its probes leave from as the world sees it (a NAT's outside address),
    /// which every record names (`Vtnt-Source`). Default: the network's vantage address
    /// (a lab's vantage point, a TAP guest's address); none on the host's network.
    #[arg(long, value_name = "ADDR")]
    public_address: Option<std::net::IpAddr>,
    /// Who probes and how operators of probed networks reach you
    /// (`"vtnt measurement; ops@example.org"`, printable ASCII, at most 54 bytes): carried
    /// in the payload of every job's UDP and ICMP probes that have room and no payload
    /// of their own (docs/fleet.md, "Etiquette").
    #[arg(long, value_name = "TEXT")]
    contact: Option<String>,
    /// Print a systemd unit that runs this agent with these options, and exit:
    /// `vtnt agent ... --systemd-unit > /etc/systemd/system/vtnt-agent.service`.
    #[arg(long)]
    systemd_unit: bool,
}

pub fn agent(a: AgentArgs) -> anyhow::Result<ExitCode> {
    if a.systemd_unit {
        vtnt_fleet::check_token("--node", &a.node)?;
        vtnt_fleet::check_token("--location", &a.location)?;
        let exe = std::env::current_exe()?;
        let args: Vec<String> = std::env::args()
            .skip(1)
            .filter(|w| w != "--systemd-unit")
            .collect();
        let timeout = Duration::from_secs(a.timeout);
        put!(
            "{}",
            vtnt_fleet::agent::systemd_unit(&exe, &args, &a.node, &a.location, timeout)
        );
        return Ok(ExitCode::SUCCESS);
    }
    anyhow::ensure!(
        vtnt_linux::is_root(),
        "`vtnt agent` needs root: its jobs get cgroups, network namespaces and raw sockets"
    );
    anyhow::ensure!(a.heartbeat_ms >= 10, "--heartbeat-ms: at least 10");
    vtnt_fleet::agent::run(vtnt_fleet::agent::AgentOptions {
        connect: a.connect.connect(Role::Agent)?,
        node: a.node,
        location: a.location,
        slots: a.slots,
        runtimes: a.runtimes,
        net: a.net.unwrap_or(Network::Lab(a.lab)),
        allow_public: a.allow_public,
        heartbeat: Duration::from_millis(a.heartbeat_ms),
        timeout: Duration::from_secs(a.timeout),
        bandwidth_bps: a.bandwidth_mbps * 1_000_000,
        images_from: a.images_from,
        tags: a.tags,
        asn: a.asn,
        country: a.country,
        public_address: a.public_address,
        contact: a.contact,
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn run(cmd: FleetCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        FleetCommand::Up {
            name,
            listen,
            port,
            tenants,
            tls_cert,
            tls_key,
            tls_ca,
            tls_verify,
            foreground,
        } => {
            if !listen.is_loopback() && tls_cert.is_none() {
                tracing::warn!(%listen, "the broker listens without TLS: keys authenticate, but jobs and results cross the network in clear");
            }
            anyhow::ensure!(
                tls_cert.is_some() == tls_key.is_some(),
                "--tls-cert and --tls-key go together (on the command line or in the configuration)"
            );
            let o = broker::UpOptions {
                listen,
                tenants,
                tls: tls_cert.zip(tls_key),
                tls_ca,
                tls_verify,
                ..broker::UpOptions::new(&name, port)
            };
            if foreground {
                broker::serve(&o, crate::interrupt::catch()?)?;
                return Ok(ExitCode::SUCCESS);
            }
            let b = broker::up(&o)?;
            out!("{}", b.url);
            tracing::info!(
                name = %b.name,
                pid = b.pid,
                dir = %b.dir.display(),
                "broker up (its keys in DIR/keys)"
            );
        }
        FleetCommand::Down { name } => broker::down(&name)?,
        FleetCommand::Submit {
            connect,
            runtime,
            location,
            nodes,
            mode,
            tenant,
            json,
            job,
        } => {
            let ev = controller::submit(
                &connect.connect(Role::Tenant(tenant.clone()))?,
                &SubmitOptions {
                    runtime,
                    location,
                    mode,
                    tenant,
                    words: job,
                },
                (!nodes.is_empty())
                    .then(|| nodes.selection(Vec::new(), Some(1)))
                    .as_ref(),
            )?;
            if json {
                out!("{}", serde_json::to_string(&ev)?);
            } else {
                match &ev.outcome {
                    Outcome::Discarded { reason } => {
                        out!("discarded");
                        say!("vtnt fleet: discarded: {reason}");
                    }
                    _ => out!("{}", ev.job),
                }
            }
        }
        FleetCommand::Measurement { what } => measurement::run(what)?,
        FleetCommand::OptOut { what } => opt_out(what)?,
        FleetCommand::Quota { what } => quota(what)?,
        FleetCommand::RateLimit { what } => rate_limit(what)?,
        FleetCommand::Images { what } => {
            let stored = match what {
                ImagesCommand::Put { connect, runtimes } => {
                    vtnt_fleet::images::put(&connect.connect(Role::Operator)?, &runtimes)?
                }
                ImagesCommand::List { connect } => {
                    vtnt_fleet::images::list(&connect.connect(Role::Operator)?)?
                }
            };
            out!("NAME\tBYTES\tCHUNKS\tSHA256");
            for i in stored {
                let sha256 = i.sha256.as_deref().unwrap_or("-");
                out!("{}\t{}\t{}\t{sha256}", i.name, i.bytes, i.chunks);
            }
        }
        FleetCommand::Status {
            connect,
            tenant,
            json,
        } => {
            let st = controller::status(&connect.connect(Role::Tenant(tenant.clone()))?, &tenant)?;
            if json {
                out!("{}", serde_json::to_string(&st)?);
            } else {
                out!(
                    "NODE\tLOCATION\tSTATE\tBUSY/SLOTS\tRUNTIMES\tHEARTBEAT\tCLOCK\tDONE\tFAILED\tRECONNECTS"
                );
                for n in &st.nodes {
                    let i = &n.info;
                    out!(
                        "{}\t{}\t{}\t{}/{}\t{}\t{:.1} s ago\t{}\t{}\t{}\t{}",
                        i.node,
                        i.location,
                        n.status,
                        i.busy,
                        i.slots,
                        i.runtimes.join(","),
                        n.age_ms as f64 / 1e3,
                        i.clock_sync,
                        i.jobs_done,
                        i.jobs_failed,
                        i.reconnects
                    );
                }
                match &st.backlog {
                    Some(b) => {
                        for (subject, n) in b {
                            out!("backlog {subject}: {n}");
                        }
                    }
                    None => out!("backlog: unknown (no agent up to count it)"),
                }
                out!("results stored: {} messages", st.results_stored);
            }
        }
        #[cfg(feature = "store")]
        FleetCommand::Store {
            connect,
            tenant,
            store,
            follow,
            json,
        } => {
            let c = connect.connect(Role::Tenant(tenant.clone()))?;
            let (mut store, tenant) = crate::store::StoreArgs { store, tenant }.open()?;
            let o = vtnt_store::feed::FeedOptions {
                tenant,
                follow,
                batch: 500,
            };
            let r = vtnt_store::feed::feed(&c, &mut store, &o, |r| {
                if follow {
                    eprintln!(
                        "vtnt fleet: {} messages: {} traces, {} pings stored",
                        r.messages, r.stored.traces, r.stored.pings
                    );
                }
            })?;
            for why in &r.rejected {
                eprintln!("vtnt fleet: skipped {why}");
            }
            if json {
                out!("{}", serde_json::to_string(&r)?);
            } else {
                eprintln!(
                    "vtnt fleet: {} messages ({} summaries): {} traces, {} pings stored, {} stored already, {} skipped, in {}",
                    r.messages,
                    r.summaries,
                    r.stored.traces,
                    r.stored.pings,
                    r.stored.known,
                    r.rejected.len(),
                    store.path()
                );
            }
            if !r.rejected.is_empty() {
                return Ok(ExitCode::from(2));
            }
        }
        FleetCommand::Results {
            connect,
            tenant,
            job,
            follow,
        } => {
            let mut out = std::io::stdout().lock();
            let mut jobs = 0;
            let c = connect.connect(Role::Tenant(tenant.clone()))?;
            controller::results(&c, &tenant, job.as_deref(), follow, |r| {
                jobs += 1;
                for rec in &r.records {
                    writeln!(out, "{rec}")?;
                }
                out.flush()?;
                match &r.summary {
                    Some(s) => say!(
                        "vtnt fleet: job {} on {}: {}, {} records, queue {:.1} ms, deploy {:.1} ms, execution {:.1} ms, cleanup {:.1} ms, total {:.1} ms, clock sync {}{}{}",
                        r.job,
                        s.node,
                        serde_json::to_value(s.status)?.as_str().unwrap_or("?"),
                        s.records,
                        s.timings.queue_ms,
                        s.timings.deploy_ms,
                        s.timings.exec_ms,
                        s.timings.cleanup_ms,
                        s.timings.total_ms,
                        s.clock_sync,
                        s.resumed.map_or(String::new(), |k| format!(
                            ", resumed: {k} targets stored by an earlier delivery"
                        )),
                        s.error.as_ref().map_or(String::new(), |e| format!(": {e}"))
                    ),
                    None => say!(
                        "vtnt fleet: job {}: {} records, not finished",
                        r.job,
                        r.records.len()
                    ),
                }
                Ok::<(), anyhow::Error>(())
            })?;
            if let (Some(j), 0) = (&job, jobs) {
                say!("vtnt fleet: no results for job {j} (yet)");
            }
        }
        FleetCommand::Replay {
            connect,
            nodes,
            events,
            tenant,
            results_timeout,
        } => {
            let mut out = std::io::stdout().lock();
            let st = vtnt_fleet::replay::replay(
                &connect.connect(Role::Tenant(tenant.clone()))?,
                &nodes,
                &events,
                &vtnt_fleet::replay::ReplayOptions {
                    tenant,
                    results_timeout: Duration::from_secs(results_timeout),
                },
                |r| {
                    writeln!(out, "{}", serde_json::to_string(r)?)?;
                    Ok::<(), anyhow::Error>(())
                },
            )?;
            say!(
                "vtnt fleet: replayed {} events in {:.1} s: {} queued, {} accepted, {} discarded; {} jobs finished, {} not within the deadline",
                st.events, st.duration_s, st.queued, st.accepted, st.discarded, st.finished, st.unfinished
            );
            if st.unfinished > 0 {
                return Ok(ExitCode::from(2));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A quota's limit on the command line (`None`: unlimited).
#[derive(Debug, Clone, Copy)]
pub struct Limit(Option<u64>);

fn limit(s: &str) -> Result<Limit, String> {
    vtnt_fleet::quota::parse_limit(s).map(Limit)
}

fn quota(cmd: QuotaCommand) -> anyhow::Result<()> {
    let q = match cmd {
        QuotaCommand::Set {
            connect,
            tenant,
            concurrent_jobs,
            probes_per_day,
        } => {
            anyhow::ensure!(
                concurrent_jobs.is_some() || probes_per_day.is_some(),
                "quota set: give --concurrent-jobs, --probes-per-day or both"
            );
            let c = connect.connect(Role::Operator)?;
            vtnt_fleet::quota::set(
                &c,
                &tenant,
                concurrent_jobs.map(|l| l.0),
                probes_per_day.map(|l| l.0),
            )?;
            vtnt_fleet::quota::show(&c, &tenant)?
        }
        QuotaCommand::Show {
            connect,
            of,
            tenant,
            json,
        } => {
            let q = match of {
                Some(t) => vtnt_fleet::quota::show(&connect.connect(Role::Operator)?, &t)?,
                None => vtnt_fleet::quota::show(
                    &connect.connect(Role::Tenant(tenant.clone()))?,
                    &tenant,
                )?,
            };
            if json {
                out!("{}", serde_json::to_string(&q)?);
                return Ok(());
            }
            q
        }
    };
    let limit = |l: Option<u64>| l.map_or("unlimited".to_string(), |n| n.to_string());
    out!("TENANT\tQUOTA\tLIMIT\tUSE");
    out!(
        "{}\tconcurrent-jobs\t{}\t{}",
        q.tenant,
        limit(q.limits.concurrent_jobs),
        q.jobs_running
    );
    out!(
        "{}\tprobes-per-day\t{}\t{}",
        q.tenant,
        limit(q.limits.probes_per_day),
        q.probes_today
    );
    Ok(())
}

/// A rate limit on the command line (`None`: unlimited).
#[derive(Debug, Clone, Copy)]
pub struct Rate(Option<u32>);

fn rate(s: &str) -> Result<Rate, String> {
    vtnt_fleet::rate::parse_limit(s).map(Rate)
}

/// `vtnt fleet rate-limit set|show`.
fn rate_limit(cmd: RateLimitCommand) -> anyhow::Result<()> {
    use vtnt_fleet::rate;
    let l = match cmd {
        RateLimitCommand::Set {
            connect,
            per_prefix,
            per_destination,
        } => {
            let (p, d) = match (per_prefix, per_destination) {
                (None, None) => (
                    Some(Some(rate::DEFAULT_PER_PREFIX)),
                    Some(Some(rate::DEFAULT_PER_DESTINATION)),
                ),
                (p, d) => (p.map(|r| r.0), d.map(|r| r.0)),
            };
            rate::set(&connect.connect(Role::Operator)?, p, d)?
        }
        RateLimitCommand::Show { connect, json } => {
            let l = rate::show(&connect.connect(Role::Operator)?)?;
            if json {
                out!("{}", serde_json::to_string(&l)?);
                return Ok(());
            }
            l
        }
    };
    let limit = |l: Option<u32>| l.map_or("unlimited".to_string(), |n| n.to_string());
    out!("LIMIT\tPPS");
    out!("per-prefix\t{}", limit(l.per_prefix));
    out!("per-destination\t{}", limit(l.per_destination));
    Ok(())
}

/// `vtnt fleet opt-out add|remove|list`.
fn opt_out(what: OptOutCommand) -> anyhow::Result<()> {
    use vtnt_fleet::optout::{self, Change};
    let words = |v: &[String]| optout::parse(&v.join("\n"));
    let version = match what {
        OptOutCommand::Add {
            connect,
            prefixes,
            file,
        } => {
            let mut add = words(&prefixes)?;
            if let Some(f) = &file {
                let read = std::fs::read_to_string(f)
                    .with_context(|| format!("reading {}", f.display()))?;
                let listed = optout::parse(&read).with_context(|| f.display().to_string())?;
                add = add.iter().chain(listed.iter()).copied().collect();
            }
            anyhow::ensure!(
                !add.is_empty(),
                "opt-out add: no prefix given (PREFIX... or --file FILE)"
            );
            optout::update(&connect.connect(Role::Operator)?, &Change::Add(add))?
        }
        OptOutCommand::Remove { connect, prefixes } => optout::update(
            &connect.connect(Role::Operator)?,
            &Change::Remove(words(&prefixes)?),
        )?,
        OptOutCommand::List { connect } => optout::show(&connect.connect(Role::Operator)?)?,
    };
    for p in version.prefixes.iter() {
        out!("{p}");
    }
    eprintln!(
        "opt-out list: revision {}, {} prefixes",
        version.revision,
        version.prefixes.len()
    );
    Ok(())
}
