//! `vtnt fleet measurement create|list|cancel|archive|watch|watch-routes|run`: the command
//! line of `vtnt_fleet::measurement` (definitions), `vtnt_fleet::archive` (a
//! cycle's warts), `vtnt_fleet::watch` (path changes) and `vtnt_fleet::schedule`
//! (the controller);
//! it only parses and prints.

use std::time::Duration;

use anyhow::Context;

use vtnt_fleet::auth::Role;
use vtnt_fleet::broker;
use vtnt_fleet::measurement::{self, CreateOptions, Definition};
use vtnt_fleet::watch::{PathChanges, Reaction, Reactions, RoutingChanges};
use vtnt_runtimes::Runtime;

use super::{ConnectArgs, VantageFilter};

#[derive(clap::Subcommand)]
pub enum DefinitionCommand {
    /// Define a measurement: its job on the selected vantage points, once or every
    /// --every; prints its id. Refused (nothing stored) when the selection matches no up
    /// node, the interval is too short or a cycle does not fit the tenant's quota.
    Create {
        #[command(flatten)]
        connect: ConnectArgs,
        #[arg(long, default_value = broker::DEFAULT_TENANT)]
        tenant: String,
        /// native, runc, docker, docker-scratch, vm, microvm.
        #[arg(long)]
        runtime: Runtime,
        /// A vantage point's location, or `any` (repeat for more; none: any).
        #[arg(long = "location", value_name = "LOCATION")]
        locations: Vec<String>,
        /// Only vantage points whose nodes match.
        #[command(flatten)]
        nodes: VantageFilter,
        /// How many vantage points (locations) each cycle runs on, drawn anew each cycle
        /// (default: all selected).
        #[arg(long)]
        count: Option<usize>,
        /// Run every DURATION (`90s`, `5m`, `1h`); without it, once.
        #[arg(long, value_parser = duration)]
        every: Option<Duration>,
        /// The first cycle DURATION from now (default: at once).
        #[arg(long, value_parser = duration, default_value = "0s")]
        start_in: Duration,
        /// No cycle starts DURATION after now or later (`+DURATION`), or after this Unix
        /// time (seconds).
        #[arg(long, value_parser = until_us)]
        until: Option<u64>,
        /// At most N cycles.
        #[arg(long, value_name = "N")]
        cycles: Option<u64>,
        /// An Ark-style campaign: the targets of FILE (one address a line), each cycle
        /// dealing every /24 (IPv4) or /48 (IPv6) of them to one of its vantage points,
        /// shuffled per cycle; the job's words then name no target.
        #[arg(long, value_name = "FILE")]
        split: Option<std::path::PathBuf>,
        /// The job: `vtnt` words, after `--`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        job: Vec<String>,
    },
    /// The tenant's measurements with their state and cycles.
    List {
        #[command(flatten)]
        connect: ConnectArgs,
        #[arg(long, default_value = broker::DEFAULT_TENANT)]
        tenant: String,
        /// One JSON object a line (the stored definitions).
        #[arg(long)]
        json: bool,
    },
    /// Start no more cycles of measurement ID.
    Cancel {
        #[command(flatten)]
        connect: ConnectArgs,
        #[arg(long, default_value = broker::DEFAULT_TENANT)]
        tenant: String,
        id: String,
    },
    /// Write cycle K of measurement ID as one gzip-compressed warts file: a list named ID,
    /// a cycle start, every record of the cycle's jobs, a cycle stop. Refused while a job
    /// of the cycle has not finished; the file is replaced whole or not at all.
    Archive {
        #[command(flatten)]
        connect: ConnectArgs,
        #[arg(long, default_value = broker::DEFAULT_TENANT)]
        tenant: String,
        id: String,
        /// The cycle (0 is the first).
        #[arg(long, value_name = "K")]
        cycle: u64,
        /// The file to write (`.warts.gz`).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: std::path::PathBuf,
    },
    /// Watch measurement ID's traces: on a path change (a hop answering from another
    /// address, the destination at another distance) define a one-off measurement of JOB
    /// toward the changed destination on the vantage point that saw it; one JSON line per
    /// change (docs/fleet.md, "Events").
    Watch {
        #[command(flatten)]
        connect: ConnectArgs,
        #[arg(long, default_value = broker::DEFAULT_TENANT)]
        tenant: String,
        id: String,
        /// The triggered measurements' runtime (default: the watched one's).
        #[arg(long)]
        runtime: Option<Runtime>,
        /// Exit after N changes.
        #[arg(long, value_name = "N")]
        max_changes: Option<u64>,
        /// The job to trigger, `vtnt` words after `--`; the destination is appended.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        then: Vec<String>,
    },
    /// Watch the routes a BGP speaker learned (BIRD's control socket): on each
    /// withdrawal, announcement or AS-path change of a prefix holding targets of --targets,
    /// define a one-off measurement of JOB toward them at --location; one JSON line per
    /// change (docs/fleet.md, "Events").
    WatchRoutes {
        #[command(flatten)]
        connect: ConnectArgs,
        #[arg(long, default_value = broker::DEFAULT_TENANT)]
        tenant: String,
        /// BIRD's control socket (`birdc -s`), e.g. a lab's `bgp-vp.ctl`.
        #[arg(long, value_name = "SOCKET")]
        bird: std::path::PathBuf,
        /// The targets of interest, one address a line.
        #[arg(long, value_name = "FILE")]
        targets: std::path::PathBuf,
        /// Where the triggered measurements run (a location, or `any`).
        #[arg(long, default_value = "any")]
        location: String,
        /// native, runc, docker, docker-scratch, vm, microvm.
        #[arg(long)]
        runtime: Runtime,
        /// Exit after N changes.
        #[arg(long, value_name = "N")]
        max_changes: Option<u64>,
        /// The job to trigger, `vtnt` words after `--`; the prefix's targets are appended.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        then: Vec<String>,
    },
    /// The controller: start the tenant's measurements' cycles on time, until stopped.
    Run {
        #[command(flatten)]
        connect: ConnectArgs,
        #[arg(long, default_value = broker::DEFAULT_TENANT)]
        tenant: String,
        /// Exit once no measurement is scheduled or running.
        #[arg(long)]
        until_idle: bool,
    },
}

pub fn run(cmd: DefinitionCommand) -> anyhow::Result<()> {
    match cmd {
        DefinitionCommand::Create {
            connect,
            tenant,
            runtime,
            locations,
            nodes,
            count,
            every,
            start_in,
            until,
            cycles,
            split,
            job,
        } => {
            let split = match split {
                None => None,
                Some(p) => {
                    let text = std::fs::read_to_string(&p)
                        .with_context(|| format!("reading {}", p.display()))?;
                    Some(
                        vtnt_jobspec::parse_target_list(&text)
                            .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?,
                    )
                }
            };
            let m = measurement::create(
                &connect.connect(Role::Tenant(tenant.clone()))?,
                &CreateOptions {
                    tenant,
                    runtime,
                    selection: nodes.selection(locations, count),
                    every,
                    start_in,
                    until_us: until,
                    max_cycles: cycles,
                    words: job,
                    split,
                },
            )?;
            out!("{}", m.id);
        }
        DefinitionCommand::List {
            connect,
            tenant,
            json,
        } => {
            let all = measurement::list(&connect.connect(Role::Tenant(tenant.clone()))?, &tenant)?;
            if !json {
                out!("ID\tSTATE\tCYCLES\tEVERY\tRUNTIME\tLOCATIONS\tJOB");
            }
            for m in all {
                if json {
                    out!("{}", serde_json::to_string(&m)?);
                } else {
                    out!("{}", row(&m));
                }
            }
        }
        DefinitionCommand::Cancel {
            connect,
            tenant,
            id,
        } => {
            let m = measurement::cancel(
                &connect.connect(Role::Tenant(tenant.clone()))?,
                &tenant,
                &id,
            )?;
            out!("{}\tcancelled after {} cycle(s)", m.id, m.started);
        }
        DefinitionCommand::Archive {
            connect,
            tenant,
            id,
            cycle,
            output,
        } => {
            let r = vtnt_fleet::archive::archive(
                &connect.connect(Role::Tenant(tenant.clone()))?,
                &tenant,
                &id,
                cycle,
                &output,
            )?;
            out!(
                "{}\tcycle {cycle} of {id}: {} record(s) of {} job(s), {} bytes",
                r.path.display(),
                r.records,
                r.jobs,
                r.bytes
            );
        }
        DefinitionCommand::Watch {
            connect,
            tenant,
            id,
            runtime,
            max_changes,
            then,
        } => {
            let r = Reactions::new(&tenant, then, max_changes)?;
            let c = connect.connect(Role::Tenant(tenant.clone()))?;
            let mut changes = PathChanges::follow(&c, &tenant, &id, runtime)?;
            vtnt_fleet::watch::react(&c, &r, &mut changes, print_reaction)?;
        }
        DefinitionCommand::WatchRoutes {
            connect,
            tenant,
            bird,
            targets,
            location,
            runtime,
            max_changes,
            then,
        } => {
            let r = Reactions::new(&tenant, then, max_changes)?;
            let text = std::fs::read_to_string(&targets)
                .with_context(|| format!("reading {}", targets.display()))?;
            let targets = vtnt_jobspec::parse_target_list(&text)
                .map_err(|e| anyhow::anyhow!("{}: {e}", targets.display()))?;
            let c = connect.connect(Role::Tenant(tenant.clone()))?;
            let mut changes = RoutingChanges::follow(&bird, targets, &location, runtime)?;
            vtnt_fleet::watch::react(&c, &r, &mut changes, print_reaction)?;
        }
        DefinitionCommand::Run {
            connect,
            tenant,
            until_idle,
        } => vtnt_fleet::schedule::run(
            &connect.connect(Role::Tenant(tenant.clone()))?,
            &tenant,
            until_idle,
        )?,
    }
    Ok(())
}

/// One event of a watch and what it triggered, a JSON line.
fn print_reaction<D: serde::Serialize>(r: &Reaction<D>) -> vtnt_fleet::Result<()> {
    out!("{}", serde_json::to_string(r).unwrap_or_default());
    Ok(())
}

fn row(m: &Definition) -> String {
    let state = serde_json::to_value(m.state).unwrap_or_default();
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}{}\t{}",
        m.id,
        state.as_str().unwrap_or("?"),
        m.placed,
        m.every_s.map_or("once".into(), |s| format!("{s}s")),
        m.runtime,
        m.selection.locations.join(","),
        m.selection
            .count
            .map_or(String::new(), |c| format!(" ({c})")),
        m.words.join(" ")
    )
}

/// `90`, `90s`, `5m`, `1h`.
fn duration(s: &str) -> Result<Duration, String> {
    let (n, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: u64 = n
        .parse()
        .map_err(|_| format!("`{s}`: a whole number with s, m or h (`90s`, `5m`)"))?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("`{s}`: the unit is s, m or h")),
    };
    Ok(Duration::from_secs(secs))
}

/// `+DURATION` from now, or Unix seconds; as µs since the epoch.
fn until_us(s: &str) -> Result<u64, String> {
    match s.strip_prefix('+') {
        Some(d) => Ok(vtnt_fleet::now_us() + duration(d)?.as_micros() as u64),
        None => s
            .parse::<u64>()
            .map(|t| t * 1_000_000)
            .map_err(|_| format!("`{s}`: `+DURATION` or Unix seconds")),
    }
}
