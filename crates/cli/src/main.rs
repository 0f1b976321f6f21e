//! `vtnt`: one binary, one subcommand per job. Each subcommand lives in its own module
//! and only parses options and calls into the crate that does the work.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod lab;
mod output;
mod probe;
mod targets;
mod text;

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
    /// The emulated MPLS Internet with ground truth (up, exec, truth, down, generate).
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// Benchmarks that re-measure every figure vTNT claims (tnt-accuracy, ...).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Trace(a) => probe::run_jobs(&a.common, |dst| vtnt_engine::Job::Trace(a.options(dst)), "traces"),
        Command::Ping(a) => probe::run_jobs(&a.common, |dst| vtnt_engine::Job::Ping(a.options(dst)), "pings"),
        Command::Lab(cmd) => lab::run(cmd),
        Command::Bench(cmd) => bench::run(cmd),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("vtnt: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
