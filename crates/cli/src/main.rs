//! `vtnt`: one binary, one subcommand per job. Each subcommand lives in its own module
//! and only parses options and calls into the crate that does the work.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use vtnt_job::say;

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

/// The options, or clap's error printed (long numbers in it cut short:
/// [`vtnt_job::elide_long_numbers`]) and the exit it calls for.
fn parse() -> Result<Cli, ExitCode> {
    let e = match Cli::try_parse() {
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
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let result = match cli.command {
        Command::Job(vtnt_job::JobArgs::Tnt(a)) => tnt::run(a),
        Command::Job(args) => {
            if let Some(w) = args.rate_warning() {
                say!("vtnt: warning: {w}");
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
            // a file an install lacks is one line that says where it was looked for and
            // how to get it, whatever was being done
            match e.chain().find_map(missing_artifact) {
                Some(missing) => say!("vtnt: {missing}"),
                None => {
                    let text = format!("{e:#}");
                    say!("vtnt: error: {}", vtnt_job::elide_long_numbers(&text));
                }
            }
            // a run stopped by a signal (its pipe closed, say) exits as the signal says
            interrupt::exit_code().unwrap_or(ExitCode::FAILURE)
        }
    }
}

/// `e` if it is an installed file that is missing (`vtnt_artifacts::Error::Missing`).
fn missing_artifact<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a vtnt_artifacts::Error> {
    e.downcast_ref::<vtnt_artifacts::Error>()
        .filter(|a| matches!(a, vtnt_artifacts::Error::Missing { .. }))
}
