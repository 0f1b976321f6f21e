//! `vtnt job LINE`: runs a job given in its canonical line (`vtnt-jobspec`), on this host,
//! printing scamper JSON, then stays alive for the line's `hold=`. This is what every
//! runtime's instance runs (the static binary in a process, a container or a VM): the
//! runtimes hand over the typed job itself, encoded, never `vtnt`'s option words.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use vtnt_job::{Format, Job, JobKind, Targets};

use crate::{interrupt, probe, tnt};

#[derive(clap::Args, Debug)]
pub struct JobLineArgs {
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
    let spec =
        vtnt_jobspec::decode(&a.line.join(" ")).map_err(|e| anyhow::anyhow!("job line: {e}"))?;
    anyhow::ensure!(
        !matches!(spec.targets, Targets::Module),
        "job line: targets=@module names the unikernel's boot module; give the targets inline"
    );
    if let Some(w) = vtnt_job::rate_warning(&spec.kind, spec.engine.pps, spec.engine.window) {
        eprintln!("vtnt: warning: {w}");
    }
    let hold = spec.hold;
    let job = Job {
        spec,
        format: Format::Json,
        output: None,
        some_bad: false,
    };
    let code = match job.spec.kind {
        JobKind::Tnt(_) => tnt::run_job(&job, Vec::new(), None, false)?,
        _ => probe::run(&job)?,
    };
    // The hold, cut short by a signal (the run caught them).
    let until = Instant::now() + hold;
    while !interrupt::stopped() && Instant::now() < until {
        std::thread::sleep(TICK.min(until.saturating_duration_since(Instant::now())));
    }
    Ok(code)
}
