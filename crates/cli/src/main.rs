//! `vtnt`: one binary, one subcommand per job. Each subcommand lives in its own module
//! and only parses options and calls into the crate that does the work.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod bench;
mod convert;
mod daemon;
#[cfg(feature = "fleet")]
mod fleet;
mod fw;
mod interrupt;
mod jobline;
mod lab;
mod manual;
mod micro;
mod names;
mod output;
mod probe;
mod progress;
mod runtime;
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
    /// The firewall's rule files: check (read and compile, errors with file:line:col),
    /// gen (benchmark rule sets), trace (packet headers that hit them), classify.
    #[command(subcommand)]
    Fw(fw::FwCommand),
    /// Jobs on agents over NATS: a broker (up, down), submit, status, results.
    #[cfg(feature = "fleet")]
    #[command(subcommand)]
    Fleet(fleet::FleetCommand),
    /// A fleet node: takes jobs from the broker while it has a free slot.
    #[cfg(feature = "fleet")]
    Agent(fleet::AgentArgs),
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
            output::check(args.common().output.as_deref(), args.common().format())
                .and_then(|()| args.job(vtnt_job::Vantage::Host))
                .and_then(|job| probe::run(&job))
        }
        Command::JobLine(a) => jobline::run(a),
        Command::Daemon(a) => daemon::run(a),
        Command::Convert(a) => convert::run(a),
        Command::Lab(cmd) => lab::run(cmd),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Fw(cmd) => fw::run(cmd),
        Command::Image(cmd) => runtime::image(cmd),
        Command::Run(args) => runtime::run(args),
        #[cfg(feature = "fleet")]
        Command::Fleet(cmd) => fleet::run(cmd),
        #[cfg(feature = "fleet")]
        Command::Agent(args) => fleet::agent(args),
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
