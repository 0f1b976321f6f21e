//! `vtnt`: one binary, one subcommand per job. Each subcommand lives in its own module
//! and only parses options and calls into the crate that does the work.

use std::process::ExitCode;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use vtnt_job::say;

/// `println!` for a command's output: see [`interrupt::stdout`] (no panic on a closed
/// pipe).
macro_rules! out {
    () => {
        $crate::interrupt::stdout(format_args!("\n"))
    };
    ($($t:tt)*) => {
        $crate::interrupt::stdout(format_args!("{}\n", format_args!($($t)*)))
    };
}

/// `print!` for a command's output: see [`interrupt::stdout`].
macro_rules! put {
    ($($t:tt)*) => {
        $crate::interrupt::stdout(format_args!($($t)*))
    };
}

#[cfg(feature = "bench")]
mod bench;
mod config;
mod convert;
mod correct_rtt;
mod daemon;
#[cfg(feature = "fleet")]
mod fleet;
mod fw;
mod interrupt;
mod jobline;
mod lab;
mod logs;
mod manual;
mod micro;
mod names;
mod output;
mod probe;
mod progress;
#[cfg(feature = "store")]
mod query;
mod runtime;
#[cfg(feature = "serve")]
mod serve;
#[cfg(feature = "store")]
mod store;
#[cfg(not(feature = "store"))]
mod store {
    //! Built without the results store: runs store nothing; `--store` is an error.
    pub fn sink(
        c: &vtnt_job::Common,
        _kind: &str,
    ) -> anyhow::Result<Option<Box<dyn crate::output::Sink>>> {
        anyhow::ensure!(
            c.store.is_none(),
            "--store: this vtnt was built without the results store (cargo feature `store`)"
        );
        Ok(None)
    }
}
mod text;
mod tnt;

/// This build: the version and the commit it was compiled from (`build.rs`), which
/// `--version`, every output cycle and every benchmark report name.
const VERSION: &str = env!("VTNT_VERSION");

/// vTNT: MPLS-revealing traceroute, from anywhere, in milliseconds.
#[derive(Parser)]
#[command(version = VERSION, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The configuration file, instead of /etc/vtnt/config.toml (VTNT_CONFIG names one
    /// too): the defaults of the commands' options (docs/config.md).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    log: logs::LogArgs,
}

#[derive(Subcommand)]
enum Command {
    /// trace, ping, tnt: probe from this host.
    #[command(flatten)]
    Job(vtnt_job::JobArgs),
    /// Run a job given as its canonical line (`vtnt-job=1 kind=... targets=...`): what
    /// every runtime's instance runs.
    #[command(name = "job")]
    JobLine(jobline::JobLineArgs),
    /// scamper's control socket (-P [ADDR:]PORT, -U PATH): sc_attach, scamper's Python
    /// module and other scamper drivers run trace, ping and tnt on this host.
    Daemon(daemon::DaemonArgs),
    /// Convert between warts and scamper JSON.
    Convert(convert::ConvertArgs),
    /// The emulated MPLS Internet with ground truth (up, exec, truth, down, generate).
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// Build the image of a runtime (native, runc, docker, vm, unikernel).
    #[command(subcommand)]
    Image(runtime::ImageCommand),
    /// Run one job (trace, ping, tnt) in a runtime: native, runc, docker, vm or microvm.
    Run(runtime::RunArgs),
    /// Benchmarks that re-measure every figure vTNT claims (tnt-accuracy, ...).
    #[cfg(feature = "bench")]
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// The firewall's rule files: check (read and compile, errors with file:line:col),
    /// gen (benchmark rule sets), trace (packet headers that hit them), classify.
    #[command(subcommand)]
    Fw(fw::FwCommand),
    /// Jobs on agents over NATS: a broker (up, down), submit, status, results; measurements
    /// (once, periodic, split in cycles, triggered by path changes and routing events),
    /// quotas, the opt-out list, the fleet-wide rate limit.
    #[cfg(feature = "fleet")]
    #[command(subcommand)]
    Fleet(fleet::FleetCommand),
    /// A fleet node: takes jobs from the broker while it has a free slot.
    #[cfg(feature = "fleet")]
    Agent(fleet::AgentArgs),
    /// The configuration: what every command takes from the file and the environment
    /// (show), a commented file (sample).
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// File scamper files (warts, JSON, gzip allowed) in the results store; each file
    /// whole or not at all.
    #[cfg(feature = "store")]
    Import(store::ImportArgs),
    /// One table of the results store as CSV (or Parquet), for pandas and R.
    #[cfg(feature = "store")]
    Export(store::ExportArgs),
    /// Ask the results store: runs, nodes, traces, tunnels, tunnels per AS and per
    /// vendor, classes per vantage point, revealed LSRs per AS, the diff of two runs.
    #[cfg(feature = "store")]
    #[command(subcommand)]
    Query(query::Question),
    /// The results store and a fleet's live events as web pages and JSON, per tenant
    /// (loopback by default; docs/serve.md); `vtnt serve token` makes a tenant's token.
    #[cfg(feature = "serve")]
    Serve(serve::ServeArgs),
    /// Shell completions (bash, zsh, fish) on stdout.
    Completions(manual::CompletionsArgs),
    /// Man pages for vtnt and every subcommand, into a directory (`cargo xtask man`).
    #[command(hide = true)]
    ManPages(manual::ManPagesArgs),
}

impl Command {
    /// How its log events look: the long-running commands' as a service's log.
    fn log_style(&self) -> logs::Style {
        match self {
            Command::Daemon(_) | Command::Lab(lab::LabCommand::Serve { .. }) => {
                logs::Style::Service
            }
            Command::Lab(lab::LabCommand::ServeFront { .. }) => logs::Style::Service,
            #[cfg(feature = "fleet")]
            Command::Agent(_) => logs::Style::Service,
            #[cfg(feature = "serve")]
            Command::Serve(a) if a.token.is_none() => logs::Style::Service,
            #[cfg(feature = "fleet")]
            Command::Fleet(f) if f.foreground() => logs::Style::Service,
            _ => logs::Style::Cli,
        }
    }
}

/// The options (their defaults from the configuration), or clap's error printed (long
/// numbers in it cut short: [`vtnt_job::elide_long_numbers`]) and the exit it calls for.
fn parse(settings: &config::Settings, argv: Vec<OsString>) -> Result<Cli, ExitCode> {
    let cmd = settings.command(Cli::command()).map_err(|e| {
        say!("vtnt: error: {e:#}");
        ExitCode::FAILURE
    })?;
    let parsed = cmd
        .try_get_matches_from(argv)
        .and_then(|m| Cli::from_arg_matches(&m));
    let e = match parsed {
        Ok(cli) => return Ok(cli),
        Err(e) => e,
    };
    let text = e.render().to_string();
    let short = vtnt_job::elide_long_numbers(&text);
    if short == text || !e.use_stderr() {
        e.exit()
    }
    say!("{}", short.trim_end());
    Err(ExitCode::from(e.exit_code().clamp(0, 255) as u8))
}

fn main() -> ExitCode {
    vtnt_measure::provenance::set_build(env!("CARGO_PKG_VERSION"), env!("VTNT_COMMIT"));
    let argv: Vec<OsString> = std::env::args_os().collect();
    let settings = match config::Settings::load(&argv) {
        Ok(s) => s,
        Err(e) => {
            say!("vtnt: error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let cli = match parse(&settings, argv) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    settings.apply();
    let style = cli.command.log_style();
    logs::init(&cli.log, style);
    let result = match cli.command {
        Command::Job(vtnt_job::JobArgs::Tnt(a)) => tnt::run(a),
        Command::Job(args) => {
            if let Some(w) = args.rate_warning() {
                say!("vtnt: warning: {w}");
            }
            let kind = match &args {
                vtnt_job::JobArgs::Ping(_) => "ping",
                _ => "trace",
            };
            output::check(args.common().output.as_deref(), args.common().format())
                .and_then(|()| Ok(args.job(vtnt_job::Vantage::Host)?))
                .and_then(|job| probe::run(&job, store::sink(args.common(), kind)?))
        }
        Command::JobLine(a) => jobline::run(a),
        Command::Daemon(a) => daemon::run(a),
        Command::Convert(a) => convert::run(a),
        Command::Lab(cmd) => lab::run(cmd, &cli.log),
        #[cfg(feature = "bench")]
        Command::Bench(cmd) => bench::run(cmd),
        Command::Fw(cmd) => fw::run(cmd),
        Command::Image(cmd) => runtime::image(cmd),
        Command::Run(args) => runtime::run(args),
        #[cfg(feature = "fleet")]
        Command::Fleet(cmd) => fleet::run(cmd),
        #[cfg(feature = "fleet")]
        Command::Agent(args) => fleet::agent(args),
        Command::Config(what) => config::run(what, &settings, Cli::command()),
        #[cfg(feature = "store")]
        Command::Import(a) => store::import(a),
        #[cfg(feature = "store")]
        Command::Export(a) => store::export(a),
        #[cfg(feature = "store")]
        Command::Query(q) => query::run(q),
        #[cfg(feature = "serve")]
        Command::Serve(a) => serve::run(a),
        Command::Completions(a) => manual::completions(a, Cli::command()),
        Command::ManPages(a) => manual::man_pages(a, Cli::command()),
    };
    match result {
        Ok(code) => code,
        // a reader of our output that went away (`| head`) is no error: quiet, as `cat`
        Err(e) if interrupt::is_broken_pipe(&e) => ExitCode::from(141),
        Err(e) => {
            // a file an install lacks is one line that says where it was looked for and
            // how to get it, whatever was being done
            let text = match e.chain().find_map(missing_artifact) {
                Some(missing) => missing.to_string(),
                None => format!("error: {}", vtnt_job::elide_long_numbers(&format!("{e:#}"))),
            };
            match style {
                // the last line of a service's log is a log event too
                logs::Style::Service => tracing::error!("{}", text.trim_start_matches("error: ")),
                logs::Style::Cli => say!("vtnt: {text}"),
            }
            // a run stopped by a signal (its pipe closed, say) exits as the signal says
            interrupt::exit_code().unwrap_or(ExitCode::FAILURE)
        }
    }
}

/// `e` if it is an installed file that is missing (`vtnt_artifacts::Error::Missing`), on
/// its own or as what a runtime's error wraps.
fn missing_artifact<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a vtnt_artifacts::Error> {
    e.downcast_ref::<vtnt_artifacts::Error>()
        .or_else(|| e.downcast_ref::<vtnt_runtimes::Error>()?.artifact())
        .filter(|a| matches!(a, vtnt_artifacts::Error::Missing { .. }))
}
