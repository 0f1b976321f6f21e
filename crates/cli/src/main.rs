//! `vtnt`: one binary, one subcommand per job. Each subcommand lives in its own module
//! and only parses options and calls into the crate that does the work.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod bench;
mod convert;
mod daemon;
#[cfg(feature = "fleet")]
mod fleet;
mod interrupt;
mod jobline;
mod lab;
mod manual;
mod micro;
mod names;
mod output;
mod probe;
mod progress;
#[cfg(feature = "store")]
mod query;
mod runtime;
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
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Jobs on agents over NATS: a broker (up, down), submit, status, results.
    #[cfg(feature = "fleet")]
    #[command(subcommand)]
    Fleet(fleet::FleetCommand),
    /// A fleet node: takes jobs from the broker while it has a free slot.
    #[cfg(feature = "fleet")]
    Agent(fleet::AgentArgs),
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
    /// Shell completions (bash, zsh, fish) on stdout.
    Completions(manual::CompletionsArgs),
    /// Man pages for vtnt and every subcommand, into a directory (`cargo xtask man`).
    #[command(hide = true)]
    ManPages(manual::ManPagesArgs),
}

fn main() -> ExitCode {
    vtnt_measure::provenance::set_build(env!("CARGO_PKG_VERSION"), env!("VTNT_COMMIT"));
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Job(vtnt_job::JobArgs::Tnt(a)) => tnt::run(a),
        Command::Job(args) => {
            if let Some(w) = args.rate_warning() {
                eprintln!("vtnt: warning: {w}");
            }
            let kind = match &args {
                vtnt_job::JobArgs::Ping(_) => "ping",
                _ => "trace",
            };
            output::check(args.common().output.as_deref(), args.common().format())
                .and_then(|()| args.job(vtnt_job::Vantage::Host))
                .and_then(|job| probe::run(&job, store::sink(args.common(), kind)?))
        }
        Command::JobLine(a) => jobline::run(a),
        Command::Daemon(a) => daemon::run(a),
        Command::Convert(a) => convert::run(a),
        Command::Lab(cmd) => lab::run(cmd),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Image(cmd) => runtime::image(cmd),
        Command::Run(args) => runtime::run(args),
        #[cfg(feature = "fleet")]
        Command::Fleet(cmd) => fleet::run(cmd),
        #[cfg(feature = "fleet")]
        Command::Agent(args) => fleet::agent(args),
        #[cfg(feature = "store")]
        Command::Import(a) => store::import(a),
        #[cfg(feature = "store")]
        Command::Export(a) => store::export(a),
        #[cfg(feature = "store")]
        Command::Query(q) => query::run(q),
        Command::Completions(a) => manual::completions(a, Cli::command()),
        Command::ManPages(a) => manual::man_pages(a, Cli::command()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("vtnt: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
