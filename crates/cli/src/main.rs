//! `vtnt`: one binary, one subcommand per job. Each subcommand lives in its own module
//! and only parses options and calls into the crate that does the work.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod convert;
mod interrupt;
mod lab;
mod output;
mod probe;
mod runtime;
mod targets;
mod text;
mod tnt;
mod unikernel;

/// vTNT: MPLS-revealing traceroute, from anywhere, in milliseconds.
#[derive(Parser)]
#[command(version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Paris traceroute (scamper's trace options).
    Trace(probe::TraceArgs),
    /// Ping with ICMP echo, UDP or TCP SYN.
    Ping(probe::PingArgs),
    /// TNT: reveal MPLS tunnels along the paths to the targets and fingerprint routers.
    Tnt(tnt::TntArgs),
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Trace(a) => {
            probe::warn_unreachable_rate(&a.common, a.wait);
            probe::run_jobs(
                &a.common,
                |dst| vtnt_engine::Job::Trace(a.options(dst)),
                "traces",
            )
        }
        Command::Ping(a) => {
            probe::warn_unreachable_rate(&a.common, a.interval);
            probe::run_jobs(
                &a.common,
                |dst| vtnt_engine::Job::Ping(a.options(dst)),
                "pings",
            )
        }
        Command::Tnt(a) => tnt::run(a),
        Command::Convert(a) => convert::run(a),
        Command::Lab(cmd) => lab::run(cmd),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Image(cmd) => runtime::image(cmd),
        Command::Run(args) => runtime::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("vtnt: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
