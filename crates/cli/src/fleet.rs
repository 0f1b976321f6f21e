//! `vtnt fleet up|down|submit|status|results|replay` and `vtnt agent`: options only; the broker,
//! the agent and the controller are `vtnt-fleet`'s (docs/fleet.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use vtnt_fleet::broker;
use vtnt_fleet::controller::{self, SubmitOptions};
use vtnt_fleet::{Connect, Mode, Outcome};
use vtnt_runtimes::net::Network;
use vtnt_runtimes::Runtime;

/// Where the broker is: every fleet command but `up` and `down` takes these.
#[derive(clap::Args, Debug)]
pub struct ConnectArgs {
    /// The NATS server (`nats://HOST:PORT`). Default: the running `vtnt fleet up`.
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// A NATS credentials file (JWT and nkey seed).
    #[arg(long, value_name = "FILE")]
    pub creds: Option<PathBuf>,
    /// User name (with --password).
    #[arg(long)]
    pub user: Option<String>,
    /// Password (with --user).
    #[arg(long)]
    pub password: Option<String>,
}

impl ConnectArgs {
    fn connect(&self) -> anyhow::Result<Connect> {
        let url = match &self.nats {
            Some(u) => u.clone(),
            None => broker::url(broker::DEFAULT_NAME).ok_or_else(|| {
                anyhow::anyhow!("no --nats URL and no running default fleet (`vtnt fleet up`)")
            })?,
        };
        Ok(Connect {
            url,
            creds: self.creds.clone(),
            user: self.user.clone(),
            password: self.password.clone(),
        })
    }
}

#[derive(clap::Subcommand)]
pub enum FleetCommand {
    /// Start a NATS server with JetStream on 127.0.0.1 (Debian's nats-server), state under
    /// /run/vtnt/fleet/NAME; prints its URL.
    Up {
        #[arg(long, default_value = broker::DEFAULT_NAME)]
        name: String,
        #[arg(long, default_value_t = broker::DEFAULT_PORT)]
        port: u16,
    },
    /// Stop it and remove its state.
    Down {
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
        /// wait: queue it until a slot frees; discard: drop it when every slot is busy.
        #[arg(long, default_value = "wait")]
        mode: Mode,
        #[arg(long, default_value = "default")]
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
        #[arg(long)]
        json: bool,
    },
    /// Results: each job's scamper JSON lines, in order, once; its summary on stderr.
    Results {
        #[command(flatten)]
        connect: ConnectArgs,
        /// Only this job.
        #[arg(long)]
        job: Option<String>,
        /// Keep reading as results arrive.
        #[arg(long)]
        follow: bool,
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
        #[arg(long, default_value = "default")]
        tenant: String,
        /// Seconds to wait for the jobs' summaries once the last event is placed.
        #[arg(long, default_value_t = 600)]
        results_timeout: u64,
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
    /// Image server bandwidth, Mbit/s.
    #[arg(long, default_value_t = vtnt_runtimes::DEFAULT_BANDWIDTH_MBPS)]
    bandwidth_mbps: u64,
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
        print!(
            "{}",
            vtnt_fleet::agent::systemd_unit(&exe, &args, &a.node, &a.location, timeout)
        );
        return Ok(ExitCode::SUCCESS);
    }
    anyhow::ensure!(
        vtnt_lab_linux::is_root(),
        "`vtnt agent` needs root: its jobs get cgroups, network namespaces and raw sockets"
    );
    anyhow::ensure!(a.heartbeat_ms >= 10, "--heartbeat-ms: at least 10");
    vtnt_fleet::agent::run(vtnt_fleet::agent::AgentOptions {
        connect: a.connect.connect()?,
        node: a.node,
        location: a.location,
        slots: a.slots,
        runtimes: a.runtimes,
        net: a.net.unwrap_or(Network::Lab(a.lab)),
        allow_public: a.allow_public,
        heartbeat: Duration::from_millis(a.heartbeat_ms),
        timeout: Duration::from_secs(a.timeout),
        bandwidth_bps: a.bandwidth_mbps * 1_000_000,
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn run(cmd: FleetCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        FleetCommand::Up { name, port } => {
            let b = broker::up(&name, port)?;
            println!("{}", b.url);
            eprintln!(
                "vtnt fleet: `{}` up, pid {}, state in {}",
                b.name,
                b.pid,
                b.dir.display()
            );
        }
        FleetCommand::Down { name } => broker::down(&name)?,
        FleetCommand::Submit {
            connect,
            runtime,
            location,
            mode,
            tenant,
            json,
            job,
        } => {
            let ev = controller::submit(
                &connect.connect()?,
                &SubmitOptions {
                    runtime,
                    location,
                    mode,
                    tenant,
                    words: job,
                },
            )?;
            if json {
                println!("{}", serde_json::to_string(&ev)?);
            } else {
                match &ev.outcome {
                    Outcome::Discarded { reason } => {
                        println!("discarded");
                        eprintln!("vtnt fleet: discarded: {reason}");
                    }
                    _ => println!("{}", ev.job),
                }
            }
        }
        FleetCommand::Status { connect, json } => {
            let st = controller::status(&connect.connect()?)?;
            if json {
                println!("{}", serde_json::to_string(&st)?);
            } else {
                println!(
                    "NODE\tLOCATION\tSTATE\tBUSY/SLOTS\tRUNTIMES\tHEARTBEAT\tCLOCK\tDONE\tFAILED\tRECONNECTS"
                );
                for n in &st.nodes {
                    let i = &n.info;
                    println!(
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
                for (subject, n) in &st.backlog {
                    println!("backlog {subject}: {n}");
                }
                println!("results stored: {} messages", st.results_stored);
            }
        }
        FleetCommand::Results {
            connect,
            job,
            follow,
        } => {
            let mut out = std::io::stdout().lock();
            let mut jobs = 0;
            controller::results(&connect.connect()?, job.as_deref(), follow, |r| {
                jobs += 1;
                for rec in &r.records {
                    writeln!(out, "{rec}")?;
                }
                out.flush()?;
                match &r.summary {
                    Some(s) => eprintln!(
                        "vtnt fleet: job {} on {}: {}, {} records, queue {:.1} ms, deploy {:.1} ms, execution {:.1} ms, cleanup {:.1} ms, total {:.1} ms, clock sync {}{}",
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
                        s.error.as_ref().map_or(String::new(), |e| format!(": {e}"))
                    ),
                    None => eprintln!(
                        "vtnt fleet: job {}: {} records, not finished",
                        r.job,
                        r.records.len()
                    ),
                }
                Ok(())
            })?;
            if let (Some(j), 0) = (&job, jobs) {
                eprintln!("vtnt fleet: no results for job {j} (yet)");
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
                &connect.connect()?,
                &nodes,
                &events,
                &vtnt_fleet::replay::ReplayOptions {
                    tenant,
                    results_timeout: Duration::from_secs(results_timeout),
                },
                |r| {
                    writeln!(out, "{}", serde_json::to_string(r)?)?;
                    Ok(())
                },
            )?;
            eprintln!(
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
