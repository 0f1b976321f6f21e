//! `vtnt job LINE`: runs a job given in its canonical line (`vtnt-jobspec`), on this host,
//! printing scamper JSON (a micro job: its one result line, [`crate::micro`]), then stays
//! alive for the line's `hold=` (running the job again
//! every `every=` meanwhile, each round a whole cycle). This is what every
//! runtime's instance runs (the static binary in a process, a container or a VM): the
//! runtimes hand over the typed job itself, encoded, never `vtnt`'s option words. A long
//! target list travels as data, never as an argument: the line says `targets=@module`
//! and `--targets FILE` (`-`: standard input) holds the list, one address a line.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;

use vtnt_job::{say, Format, Job, JobKind, Targets};

use crate::{interrupt, micro, probe, tnt};

#[derive(clap::Args, Debug)]
pub struct JobLineArgs {
    /// The job's targets, one address a line (`-`: standard input), for a line that says
    /// `targets=@module`.
    #[arg(long, value_name = "FILE")]
    pub targets: Option<std::path::PathBuf>,
    /// The job line (`vtnt-job=1 kind=trace ... targets=192.0.2.1`), as one argument or
    /// as several words.
    #[arg(
        value_name = "LINE",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub line: Vec<String>,
}

/// How often the hold looks at the signal flag.
const TICK: Duration = Duration::from_millis(100);

pub fn run(a: JobLineArgs) -> anyhow::Result<ExitCode> {
    let mut spec =
        vtnt_jobspec::decode(&a.line.join(" ")).map_err(|e| anyhow::anyhow!("job line: {e}"))?;
    match (&spec.targets, &a.targets) {
        (Targets::Module, Some(file)) => {
            let text = if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin()).context("--targets -: standard input")?
            } else {
                std::fs::read_to_string(file)
                    .with_context(|| format!("--targets {}", file.display()))?
            };
            let list = vtnt_jobspec::parse_target_list(&text)
                .and_then(|v| spec.check_targets(&v).map(|()| v))
                .map_err(|e| anyhow::anyhow!("--targets {}: {e}", file.display()))?;
            anyhow::ensure!(!list.is_empty(), "--targets {}: no target", file.display());
            spec.targets = Targets::List(list);
        }
        (Targets::Module, None) => anyhow::bail!(
            "job line: targets=@module: give the list with --targets FILE (`-`: standard input)"
        ),
        (Targets::List(_), Some(_)) => {
            anyhow::bail!("--targets goes with a line that says targets=@module")
        }
        (Targets::List(_), None) => {}
    }
    if let Some(w) = vtnt_job::rate_warning(&spec.kind, spec.engine.pps, spec.engine.window) {
        say!("vtnt: warning: {w}");
    }
    let job = Job {
        spec,
        format: Format::Json,
        names: false,
        output: None,
        some_bad: false,
        quiet: true,
    };
    let round = |job: &Job| match job.spec.kind {
        JobKind::Tnt(_) => tnt::run_job(job, tnt::ReadBack::default(), false, None),
        JobKind::Micro(o) => micro::run(&o),
        _ => probe::run(job, None),
    };
    let start = Instant::now();
    let mut code = round(&job)?;
    let until = Instant::now() + job.spec.hold;
    for at in job.spec.repeats(start.elapsed()) {
        if !sleep_until(start + at) {
            break;
        }
        // a failed round is the instance's status; later rounds still run
        let c = round(&job)?;
        if c != ExitCode::SUCCESS {
            code = c;
        }
    }
    sleep_until(until);
    Ok(code)
}

/// Sleeps until `t`, cut short by a signal (the run caught them): false when cut short.
fn sleep_until(t: Instant) -> bool {
    while !interrupt::stopped() && Instant::now() < t {
        std::thread::sleep(TICK.min(t.saturating_duration_since(Instant::now())));
    }
    !interrupt::stopped()
}
