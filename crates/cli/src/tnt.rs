//! `vtnt tnt`: TNT over the Linux driver. Options follow `vtnt trace` for the initial
//! traces, plus TNT's own (thresholds, brute force, revelation switches). Traces already
//! measured (scamper JSON or warts, ours or scamper's) can stand in for the initial traces
//! (`--from`), as PyTNT allows.
//!
//! Output: scamper JSON whose trace and hop objects carry an extra `"tnt"` field (see
//! docs/tnt.md; scamper-JSON readers ignore it), sc_tnt-like text (`-O text`), or warts
//! with the annotations in a JSON sidecar `FILE.tnt.json` (warts has no place for them
//! that current scamper releases leave free), so `-O warts` needs `-o FILE`. The sidecar
//! follows the same rules as the output file (regular files only, committed on SIGINT
//! and SIGTERM with the records finished so far).

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use vtnt_engine::Engine;
use vtnt_formats::{Item, Record, TntAnnotations, Trace};
use vtnt_job::{Common, Format, Job, JobKind, Targets, TntArgs, Vantage};
use vtnt_tnt::{Tnt, TntResult, TntRunner};

use crate::interrupt;
use crate::output::{self, AtomicFile, Output};
use crate::probe;
use crate::progress::Progress;

/// Reads traces to start from; bad records are reported with their position and skipped.
fn seed_traces(path: &PathBuf) -> anyhow::Result<(Vec<Trace>, usize)> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut r = BufReader::new(f);
    let warts = r.fill_buf()?.starts_with(&[0x12, 0x05]);
    let items: Vec<Result<Item, String>> = if warts {
        vtnt_formats::WartsReader::new(r)
            .map(|i| i.map_err(|e| e.to_string()))
            .collect()
    } else {
        vtnt_formats::JsonReader::new(r)
            .map(|i| i.map_err(|e| e.to_string()))
            .collect()
    };
    let mut traces = Vec::new();
    let mut bad = 0;
    for item in items {
        match item {
            Ok(Item::Record(Record::Trace(t))) => traces.push(t),
            Ok(_) => {}
            Err(e) => {
                bad += 1;
                eprintln!("vtnt: {}: skipping {e}", path.display());
            }
        }
    }
    Ok((traces, bad))
}

/// The annotations file beside a warts output.
fn sidecar_path(output: &Path) -> PathBuf {
    let mut p = output.as_os_str().to_os_string();
    p.push(".tnt.json");
    PathBuf::from(p)
}

/// Where results go, checked before anything else: the output and, with warts, its
/// sidecar (which warts to stdout would have nowhere to put).
fn check_outputs(c: &Common) -> anyhow::Result<Option<PathBuf>> {
    output::check(c.output.as_deref(), c.format)?;
    match (c.format, &c.output) {
        (Format::Warts, None) => bail!(
            "-O warts needs -o FILE: TNT's annotations (tunnels, revealed hops) have no place \
             in warts and go to FILE.tnt.json beside it"
        ),
        (Format::Warts, Some(p)) => {
            let side = sidecar_path(p);
            output::check_destination(&side)?;
            Ok(Some(side))
        }
        _ => Ok(None),
    }
}

pub fn run(a: TntArgs) -> anyhow::Result<ExitCode> {
    let side = check_outputs(&a.common)?;
    let (seeds, bad_seeds) = match &a.from {
        Some(p) => seed_traces(p)?,
        None => (Vec::new(), 0),
    };
    let from_only =
        a.from.is_some() && a.common.targets.is_empty() && a.common.targets_file.is_none();
    let kind = JobKind::Tnt(a.config());
    if let Some(w) = vtnt_job::rate_warning(&kind, a.common.pps, a.common.window) {
        eprintln!("vtnt: warning: {w}");
    }
    let mut job = if from_only {
        // Only the traces' destinations, checked as targets would be. The source is this
        // host's (`-S` or the kernel's choice), never the one recorded in the file, which
        // may be another host's.
        seeds.first().context("no trace to start from")?;
        let check = Common {
            targets: seeds.iter().map(|t| t.dst.to_string()).collect(),
            targets_file: None,
            ..a.common.clone()
        };
        let mut job = vtnt_job::job(kind, &check, Vantage::Host)?;
        job.spec.targets = Targets::List(Vec::new());
        job
    } else {
        vtnt_job::job(kind, &a.common, Vantage::Host)?
    };
    job.some_bad |= bad_seeds > 0;
    run_job(&job, seeds, side, from_only)
}

/// Runs a TNT job on this host: its targets, and the traces in `seeds` instead of initial
/// traces (`from_only`: every seed's destination has been reported already when
/// refused); `side`: the warts output's sidecar file.
pub fn run_job(
    job: &Job,
    seeds: Vec<Trace>,
    side: Option<PathBuf>,
    from_only: bool,
) -> anyhow::Result<ExitCode> {
    let (mut runner, n, some_bad) = runner(job, seeds, from_only)?;
    let mut sockets = vtnt_linux::RawSockets::open()?;
    let clock = vtnt_linux::Clock::new();
    let stop = interrupt::catch()?;
    let mut out = Output::open(job.output.as_deref(), job.format)?;
    let mut sidecar = match &side {
        Some(p) => {
            let (f, w) = AtomicFile::create(p)?;
            Some((f, std::io::BufWriter::new(w)))
        }
        None => None,
    };
    // (both closures tell it what happened; the loop calls them one at a time)
    let progress = RefCell::new(Progress::new(n, "targets", job.quiet));
    let mut failed = 0usize;
    let on_result = |r: TntResult| {
        progress.borrow_mut().target_done();
        let Some(trace) = &r.trace else {
            failed += 1;
            let why = r.error.as_ref().map(|e| e.to_string()).unwrap_or_default();
            progress
                .borrow()
                .suspend(|| eprintln!("vtnt: {}: {why}", r.target));
            return Ok(());
        };
        let record = Record::Trace(trace.clone());
        out.annotated(&record, &TntAnnotations(&r), Some(&vtnt_tnt::dump(&r)))?;
        if let Some((_, w)) = &mut sidecar {
            let line = serde_json::json!({
                "type": "tnt", "vtnt_version": env!("CARGO_PKG_VERSION"),
                "dst": r.target.to_string(),
                "tnt": r.trace_annotation(), "hops": r.hops,
            });
            writeln!(w, "{line}")?;
        }
        Ok(())
    };
    let stats = vtnt_linux::run_watched(&mut runner, &mut sockets, &clock, stop, on_result, |s| {
        progress.borrow_mut().stats(s)
    })
    .context("probing")?;
    progress.into_inner().finish();
    let some_unsent = probe::check_sent(&stats)?;
    let records = out.finish()?;
    if let Some((f, mut w)) = sidecar {
        w.flush()?;
        drop(w);
        f.commit()?;
    }
    let s = runner.summary();
    eprintln!(
        "vtnt: {} targets: tunnels explicit {} implicit {} opaque {} invisible-php {} invisible-uhp {}; {} LSRs revealed; {} not revealable; {} blind spots clear; {} not revealed (send errors); {} probes",
        s.targets, s.explicit, s.implicit, s.opaque, s.invisible_php, s.invisible_uhp, s.lsrs_revealed, s.unrevealed, s.blind_spots_clear, s.reveal_send_errors, s.probes()
    );
    Ok(if stats.interrupted {
        interrupt::report(records, job.output.as_deref())
    } else if some_bad || failed > 0 || some_unsent {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// TNT's runner for a job on this host: its targets, and the traces in `seeds` that pass
/// the policy instead of initial traces (`from_only`: every seed's destination has been
/// reported already when refused). Returns the runner, the number of targets and seeds it
/// took, and whether a seed or target was refused.
pub fn runner(
    job: &Job,
    seeds: Vec<Trace>,
    from_only: bool,
) -> anyhow::Result<(TntRunner, usize, bool)> {
    let JobKind::Tnt(tnt_config) = &job.spec.kind else {
        bail!("not a TNT job");
    };
    let tnt = Tnt::new(tnt_config.clone()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let config = vtnt_job::host_config(&job.spec)?;
    let targets = job.spec.target_list().to_vec();
    // Seeds go through the same policy as targets (the engine enforces it again on every
    // probe TNT sends, hop addresses included).
    let before = seeds.len();
    let seeds: Vec<Trace> = seeds
        .into_iter()
        .filter(|s| match config.policy.check_target(s.dst, config.pps) {
            Ok(()) => true,
            Err(e) => {
                // (with --from alone, the job's checks have reported it already)
                if !from_only {
                    eprintln!("vtnt: skipping the trace to {} from --from: {e}", s.dst);
                }
                false
            }
        })
        .collect();
    let some_bad = job.some_bad || seeds.len() < before;
    if targets.is_empty() && seeds.is_empty() {
        anyhow::bail!("no target to probe: every trace of --from was refused");
    }
    let engine = Engine::new(config).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut runner = TntRunner::new(engine, tnt);
    let n = targets.len() + seeds.len();
    for t in targets {
        runner.add_target(t);
    }
    for s in seeds {
        runner.add_seed_trace(s);
    }
    Ok((runner, n, some_bad))
}
