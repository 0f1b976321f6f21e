//! `vtnt tnt`: TNT over the Linux driver. Options follow `vtnt trace` for the initial
//! traces, plus TNT's own (thresholds, brute force, revelation switches). Records already
//! measured can stand in for measurements (`--from`, as PyTNT allows): traces of any
//! scamper file as initial traces, and from a `vtnt tnt` output also its pings and
//! revelation traces, told apart by their role, so nothing it holds is probed again.
//!
//! Output: every record TNT made, per target: its initial trace, then the pings and
//! revelation traces it started, each with a `"tnt"` field saying its role (docs/tnt.md).
//! A run stopped by a signal also writes the targets whose pings or revelations were not
//! over, as far as they went (`"incomplete": true`).
//! In scamper JSON that is an extra field on the objects (scamper-JSON readers ignore
//! it); in warts a list object of the record's own carries it, so warts goes to stdout
//! too; `-O text` prints the sc_tnt-like view per target.

use std::cell::RefCell;
use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use vtnt_formats::{Item, Ping, Record, TntAnnotations, Trace};
use vtnt_job::{say, Common, Format, Job, JobKind, Targets, TntArgs, Vantage};
use vtnt_tnt::{RecordRole, Tnt, TntResult, TntRunner};

use crate::interrupt;
use crate::output::{self, Output, Sink};
use crate::probe;
use crate::progress::Progress;

/// What `--from` holds: initial traces (a scamper file's traces, or those whose role says
/// so), and the pings and revelation traces of a `vtnt tnt` output.
#[derive(Default)]
pub struct ReadBack {
    seeds: Vec<Trace>,
    pings: Vec<Ping>,
    reveals: Vec<(IpAddr, IpAddr, Trace)>,
}

impl ReadBack {
    /// Files one record by its role (`None`: a record without annotations).
    fn add(&mut self, r: Record, role: Option<RecordRole>) -> Result<(), String> {
        match (role, r) {
            (None | Some(RecordRole::Initial), Record::Trace(t)) => self.seeds.push(t),
            (None, Record::Ping(_)) => {}
            (Some(RecordRole::Ping { .. }), Record::Ping(p)) => self.pings.push(p),
            (Some(RecordRole::Reveal { anchor, egress, .. }), Record::Trace(t)) => {
                self.reveals.push((anchor, egress, t))
            }
            (Some(role), r) => {
                let kind = match r {
                    Record::Trace(_) => "a trace",
                    Record::Ping(_) => "a ping",
                };
                return Err(format!("role {role:?} on {kind}"));
            }
        }
        Ok(())
    }
}

/// Reads the records to start from; bad records (unreadable, or a malformed role) are
/// reported with their position and skipped. Also returns how many were skipped.
fn read_back(path: &Path) -> anyhow::Result<(ReadBack, usize)> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut r = BufReader::new(f);
    let warts = r.fill_buf()?.starts_with(&[0x12, 0x05]);
    // Each item with where it is.
    let items: Vec<(Result<Item, String>, String)> = if warts {
        let mut rd = vtnt_formats::WartsReader::new(r);
        std::iter::from_fn(|| {
            let i = rd.next()?;
            Some((
                i.map_err(|e| e.to_string()),
                format!("byte {}", rd.offset()),
            ))
        })
        .collect()
    } else {
        let mut rd = vtnt_formats::JsonReader::new(r);
        std::iter::from_fn(|| {
            let i = rd.next()?;
            Some((i.map_err(|e| e.to_string()), format!("line {}", rd.line())))
        })
        .collect()
    };
    let mut back = ReadBack::default();
    let mut bad = 0;
    for (n, (item, at)) in items.into_iter().enumerate() {
        let filed = match item {
            Ok(Item::Record(r)) => back.add(r, None),
            Ok(Item::Annotated(r, f)) => match f.record.as_deref() {
                Some(tnt) => vtnt_formats::record_role(tnt)
                    .and_then(|role| back.add(r, Some(role)))
                    .map_err(|e| format!("object {} (ending at {at}): tnt role: {e}", n + 1)),
                None => Err(format!("object {} (ending at {at}): no tnt role", n + 1)),
            },
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = filed {
            bad += 1;
            say!("vtnt: {}: skipping {e}", path.display());
        }
    }
    Ok((back, bad))
}

pub fn run(a: TntArgs) -> anyhow::Result<ExitCode> {
    output::check(a.common.output.as_deref(), a.common.format())?;
    let (back, bad_seeds) = match &a.from {
        Some(p) => read_back(p)?,
        None => (ReadBack::default(), 0),
    };
    let seeds = &back.seeds;
    let from_only =
        a.from.is_some() && a.common.targets.is_empty() && a.common.targets_file.is_none();
    let kind = JobKind::Tnt(a.config());
    if let Some(w) = vtnt_job::rate_warning(&kind, a.common.pps, a.common.window) {
        say!("vtnt: warning: {w}");
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
    let sink = crate::store::sink(&a.common, "tnt")?;
    run_job(&job, back, from_only, sink)
}

/// Runs a TNT job on this host: its targets, and the records in `back` instead of
/// measurements (`from_only`: every seed's destination has been reported already when
/// refused); every record written goes to `sink` too.
pub fn run_job(
    job: &Job,
    back: ReadBack,
    from_only: bool,
    sink: Option<Box<dyn Sink>>,
) -> anyhow::Result<ExitCode> {
    let (mut runner, n, some_bad) = runner(job, back, from_only)?;
    let mut sockets = vtnt_linux::RawSockets::open()?;
    let clock = vtnt_linux::Clock::new();
    let stop = interrupt::catch_run()?;
    let mut out = Output::open(job.output.as_deref(), job.format)?.with_sink(sink);
    // (both closures tell it what happened; the loop calls them one at a time)
    let progress = RefCell::new(Progress::new(n, "targets", job.quiet));
    let mut failed = 0usize;
    let mut on_result = |r: TntResult| {
        progress.borrow_mut().target_done();
        let Some(trace) = &r.trace else {
            failed += 1;
            let why = r.error.as_ref().map(|e| e.to_string()).unwrap_or_default();
            progress
                .borrow()
                .suspend(|| say!("vtnt: {}: {why}", r.target));
            return Ok(());
        };
        if job.format == Format::Text {
            let record = Record::Trace(trace.clone());
            return out.annotated(&record, &TntAnnotations(&r), Some(&vtnt_tnt::dump(&r)));
        }
        let mut written = Ok(());
        vtnt_formats::tnt_records(&r, |record, ann| {
            if written.is_ok() {
                written = out.annotated(record, ann, None);
            }
        });
        written
    };
    let stats = vtnt_linux::run_watched(
        &mut runner,
        &mut sockets,
        &clock,
        stop,
        &mut on_result,
        |s| progress.borrow_mut().stats(s),
    )
    .context("probing")?;
    if stats.interrupted {
        // every trace and ping that finished, of targets whose revelation had not
        for r in runner.take_unfinished() {
            on_result(r).context("writing results")?;
        }
    }
    progress.into_inner().finish();
    let some_unsent = probe::check_sent(&stats)?;
    let written = out.finish()?;
    let s = runner.summary();
    say!(
        "vtnt: {} targets: tunnels explicit {} implicit {} opaque {} invisible-php {} invisible-uhp {}; {} LSRs revealed; {} not revealable; {} blind spots clear; {} not revealed (send errors); {} probes ({} in initial traces, {} in pings, {} in revelation traces)",
        s.targets, s.explicit, s.implicit, s.opaque, s.invisible_php, s.invisible_uhp, s.lsrs_revealed, s.unrevealed, s.blind_spots_clear, s.reveal_send_errors, s.probes(), s.trace_probes, s.ping_probes, s.revelation_probes
    );
    say!("vtnt: probe budget: {}", s.budget);
    Ok(if stats.interrupted {
        interrupt::report(written.records, job.output.as_deref())
    } else if some_bad || failed > 0 || some_unsent || written.unstored {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// TNT's runner for a job on this host: its targets, and the records in `back` (the
/// traces that pass the policy instead of initial traces, pings and revelation traces
/// instead of measuring them again; `from_only`: every seed's destination has been
/// reported already when refused). Returns the runner, the number of targets and seeds it
/// took, and whether a seed or target was refused.
pub fn runner(
    job: &Job,
    back: ReadBack,
    from_only: bool,
) -> anyhow::Result<(TntRunner, usize, bool)> {
    let JobKind::Tnt(tnt_config) = &job.spec.kind else {
        bail!("not a TNT job");
    };
    let tnt = Tnt::new(tnt_config.clone()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let engine = vtnt_job::host_engine(&job.spec)?;
    let config = engine.config();
    let targets = job.spec.target_list().to_vec();
    let ReadBack {
        seeds,
        pings,
        reveals,
    } = back;
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
                    say!("vtnt: skipping the trace to {} from --from: {e}", s.dst);
                }
                false
            }
        })
        .collect();
    let some_bad = job.some_bad || seeds.len() < before;
    if targets.is_empty() && seeds.is_empty() {
        anyhow::bail!("no target to probe: every trace of --from was refused");
    }
    let mut runner = TntRunner::new(engine, tnt);
    let n = targets.len() + seeds.len();
    for t in targets {
        runner.add_target(t);
    }
    // (pings and revelation traces before the seeds that use them)
    for p in &pings {
        runner.add_ping(p);
    }
    for (anchor, egress, t) in reveals {
        runner.add_revelation_trace(anchor, egress, t);
    }
    for s in seeds {
        runner.add_seed_trace(s);
    }
    Ok((runner, n, some_bad))
}
