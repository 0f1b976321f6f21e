//! `vtnt trace` and `vtnt ping` on this host: a typed job (`vtnt-job`) driven by the Linux
//! driver, results in scamper's formats (with `-O ptr`, a trace's hop names: [`crate::names`]).

use std::cell::RefCell;
use std::process::ExitCode;

use anyhow::Context;
use vtnt_engine::{Engine, Event};
use vtnt_job::{say, Job, JobKind};

use crate::interrupt;
use crate::names::Names;
use crate::output::{self, Output, Sink};
use crate::progress::Progress;

/// Reports the probes the kernel refused to send (`vtnt: N probes could not be sent:
/// why`); fails when none could be sent at all. Returns whether some were refused.
pub fn check_sent(stats: &vtnt_linux::LoopStats) -> anyhow::Result<bool> {
    let Some(errno) = stats.first_send_error else {
        return Ok(false);
    };
    let why = std::io::Error::from_raw_os_error(errno);
    say!(
        "vtnt: {} probes could not be sent: {why}",
        stats.send_errors
    );
    if stats.sent == 0 {
        anyhow::bail!("no probe could be sent");
    }
    Ok(true)
}

/// The engine of a trace or ping job on this host, every target's measurement started at
/// `now`. A target the engine refuses (the policy, no source address) is reported on
/// stderr and left out; fails when none is left.
pub fn engine(job: &Job, now: vtnt_engine::Instant) -> anyhow::Result<Engine> {
    started(job, now).map(|(engine, _)| engine)
}

/// [`engine`], and how many targets it refused.
fn started(job: &Job, now: vtnt_engine::Instant) -> anyhow::Result<(Engine, usize)> {
    let mut engine = vtnt_job::host_engine(&job.spec)?;
    let mut refused = 0;
    for t in job.spec.target_list() {
        let mut measurement = job
            .spec
            .kind
            .measurement(*t)
            .context("a trace or ping job")?;
        if let vtnt_engine::Measurement::Trace(o) = &mut measurement {
            if o.pmtud {
                o.if_mtu = vtnt_linux::interface_mtu(*t)
                    .with_context(|| format!("-M: the MTU of the interface towards {t}"))?;
            }
        }
        if let Err(e) = engine.start(now, measurement) {
            refused += 1;
            say!("vtnt: skipping {t}: {e}");
        }
    }
    if refused == job.spec.target_list().len() {
        anyhow::bail!("no target to probe: every one was refused");
    }
    Ok((engine, refused))
}

/// Runs a trace or ping job (one measurement per target) and writes every record (to
/// `sink` too); on SIGINT or SIGTERM stops probing and keeps the records finished so far.
pub fn run(job: &Job, sink: Option<Box<dyn Sink>>) -> anyhow::Result<ExitCode> {
    let what = match &job.spec.kind {
        JobKind::Trace(_) => "traces",
        JobKind::Ping(_) => "pings",
        JobKind::Tnt(_) => anyhow::bail!("a TNT job runs through `vtnt tnt`"),
        JobKind::Micro(_) => anyhow::bail!("a micro job runs through `vtnt job`"),
    };
    output::check(job.output.as_deref(), job.format)?;
    let targets = job.spec.target_list();
    let mut sockets = vtnt_linux::RawSockets::open()?;
    let clock = vtnt_linux::Clock::new();
    let (mut engine, refused) = started(job, clock.now())?;
    let stop = interrupt::catch_run()?;
    let mut out = Output::open(job.output.as_deref(), job.format)?.with_sink(sink);
    // (both closures tell it what happened; the loop calls them one at a time)
    let progress = RefCell::new(Progress::new(targets.len(), what, job.quiet));
    let mut names = job.names.then(Names::start);
    let stats = vtnt_linux::run_watched(
        &mut engine,
        &mut sockets,
        &clock,
        stop,
        |ev| {
            let Event::Finished { record, .. } = ev;
            progress.borrow_mut().target_done();
            match &mut names {
                None => out.record(&record),
                Some(n) => {
                    n.hold((), record);
                    n.ready().iter().try_for_each(|(_, r)| out.record(r))
                }
            }
        },
        |s| progress.borrow_mut().stats(s),
    )
    .context("probing")?;
    progress.into_inner().finish();
    if let Some(n) = names {
        for (_, r) in n.rest(!stats.interrupted) {
            out.record(&r).context("writing results")?;
        }
    }
    let some_unsent = check_sent(&stats)?;
    let written = out.finish()?;
    Ok(if stats.interrupted {
        interrupt::report(written.records, job.output.as_deref())
    } else if job.some_bad || refused > 0 || some_unsent || written.unstored {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
