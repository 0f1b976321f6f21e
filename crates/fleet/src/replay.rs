//! `vtnt fleet replay NODES EVENTS`: seed 000's controller experiment (section V, Figs.
//! 9-11) as a command. NODES lists the nodes the run needs, EVENTS the deployments and
//! when they happen; every event is placed at its time, over one connection, as `vtnt
//! fleet submit` places one (concurrently: a slow answer delays no other event); then
//! the summaries of the jobs placed are awaited, up to a deadline, and one JSON line per
//! event is written: the event, how late it was placed, and its job's summary (node,
//! status, queue / deploy / execution / cleanup times).
//!
//! File formats (text, one item per line, `#` starts a comment, fields split by blanks):
//! - NODES: `NAME LOCATION`: each must be up (a recent heartbeat) in that location
//!   before anything is placed;
//! - EVENTS: `AT LOCATION RUNTIME MODE JOB...`: seconds from the start (`0.5`), where
//!   (`any` or a location), the runtime, `wait` or `discard`, and the job in `vtnt`'s
//!   words (`trace -q 1 203.0.113.10`). One deployment a second for a minute is 60 lines
//!   (`seq 0 59 | sed 's/$/ fr microvm wait trace -q 1 203.0.113.10/'`).
//!
//! Every line is checked first, and an error names the file, the line and the field:
//! nothing is placed from a file with a bad line.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{ensure, ResultExt};
use crate::Error;
use async_nats::jetstream;
use futures::StreamExt;
use serde::Serialize;
use vtnt_runtimes::Runtime;

use crate::controller::{self, JobLine, NodeView, SubmitOptions};
use crate::proto::{Event, JobSummary, Mode, Outcome};
use crate::Connect;

/// The latest an event may be (a day).
const MAX_AT: f64 = 86_400.0;

/// A node the run needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLine {
    pub line: usize,
    pub name: String,
    pub location: String,
}

/// One event: a deployment at a time.
#[derive(Debug, Clone)]
pub struct EventLine {
    pub line: usize,
    pub at: Duration,
    pub submit: SubmitOptions,
}

/// How a replay goes.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub tenant: String,
    /// How long to wait for the summaries of the jobs placed, once the last is placed.
    pub results_timeout: Duration,
}

/// One event as it went: what `vtnt fleet replay` writes, a JSON line each.
#[derive(Debug, Clone, Serialize)]
pub struct Replayed {
    /// Its line in the events file.
    pub line: usize,
    /// Its time, seconds from the start.
    pub at_s: f64,
    /// How late it was placed against its time, microseconds.
    pub late_us: u64,
    #[serde(flatten)]
    pub event: Event,
    /// Its job's summary (`None`: discarded, or not finished before the deadline).
    pub summary: Option<JobSummary>,
}

/// What a replay did, in counts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReplayStats {
    pub events: usize,
    pub queued: usize,
    pub accepted: usize,
    pub discarded: usize,
    /// Jobs placed whose summary came back.
    pub finished: usize,
    /// Jobs placed whose summary did not come back before the deadline.
    pub unfinished: usize,
    /// Seconds from the first event's time to the last summary.
    pub duration_s: f64,
}

/// Splits a file into its lines' fields: (line number, fields), comments and blank
/// lines left out.
fn lines(path: &Path) -> crate::Result<Vec<(usize, Vec<String>)>> {
    let text = std::fs::read_to_string(path).io(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let l = l.split('#').next().unwrap_or_default();
            let f: Vec<String> = l.split_whitespace().map(String::from).collect();
            (!f.is_empty()).then_some((i + 1, f))
        })
        .collect())
}

/// Reads a nodes file (`NAME LOCATION` per line).
pub fn parse_nodes(path: &Path) -> crate::Result<Vec<NodeLine>> {
    let mut out: Vec<NodeLine> = Vec::new();
    for (line, f) in lines(path)? {
        let at = |field: &str| format!("{}:{line}: {field}", path.display());
        let [name, location] = &f[..] else {
            return Err(Error::Invalid(format!(
                "{}: want `NAME LOCATION`, got {} fields",
                at("line"),
                f.len()
            )));
        };
        crate::check_token("node", name).context(|| at("NAME"))?;
        crate::check_token("location", location).context(|| at("LOCATION"))?;
        ensure!(
            !out.iter().any(|n| &n.name == name),
            Invalid,
            "{}: node `{name}` is listed twice",
            at("NAME")
        );
        out.push(NodeLine {
            line,
            name: name.clone(),
            location: location.clone(),
        });
    }
    ensure!(
        !out.is_empty(),
        Invalid,
        "{}: no node listed",
        path.display()
    );
    Ok(out)
}

/// Reads an events file (`AT LOCATION RUNTIME MODE JOB...` per line) for `tenant`, each
/// job checked as `vtnt fleet submit` checks it; sorted by time (stable).
pub fn parse_events(path: &Path, tenant: &str) -> crate::Result<Vec<EventLine>> {
    let mut out = Vec::new();
    for (line, f) in lines(path)? {
        let at = |field: &str| format!("{}:{line}: {field}", path.display());
        ensure!(
            f.len() >= 5,
            Invalid,
            "{}: want `AT LOCATION RUNTIME MODE JOB...`, got {} fields",
            at("line"),
            f.len()
        );
        let secs: f64 = f[0]
            .parse()
            .ok()
            .filter(|s: &f64| (0.0..=MAX_AT).contains(s))
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "{}: `{}` is not a time in seconds from 0 to {MAX_AT}",
                    at("AT"),
                    f[0]
                ))
            })?;
        let runtime = Runtime::ALL
            .into_iter()
            .find(|r| r.name() == f[2])
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "{}: unknown runtime `{}` (known: {})",
                    at("RUNTIME"),
                    f[2],
                    Runtime::ALL.map(Runtime::name).join(", ")
                ))
            })?;
        let mode: Mode = f[3]
            .parse()
            .map_err(|e| Error::Invalid(format!("{}: {e}", at("MODE"))))?;
        let submit = SubmitOptions {
            runtime,
            location: f[1].clone(),
            mode,
            tenant: tenant.to_string(),
            words: f[4..].to_vec(),
        };
        crate::check_token("location", &submit.location).context(|| at("LOCATION"))?;
        controller::job_line(&submit).context(|| at("JOB"))?;
        out.push(EventLine {
            line,
            at: Duration::from_secs_f64(secs),
            submit,
        });
    }
    ensure!(
        !out.is_empty(),
        Invalid,
        "{}: no event listed",
        path.display()
    );
    out.sort_by_key(|e| e.at);
    Ok(out)
}

/// Checks that every node of `want` is up in its location, and that a node there can run
/// every event; errors name the line.
fn check_fleet(
    nodes: &[NodeView],
    want: &[NodeLine],
    nodes_file: &Path,
    events: &[EventLine],
    events_file: &Path,
) -> crate::Result<()> {
    for n in want {
        let live = nodes.iter().find(|v| v.info.node == n.name);
        let at = format!("{}:{}", nodes_file.display(), n.line);
        match live {
            None => {
                return Err(Error::NoNode(format!(
                    "{at}: node `{}` has never announced itself",
                    n.name
                )))
            }
            Some(v) if v.status != "up" => {
                return Err(Error::NoNode(format!(
                    "{at}: node `{}` is {}",
                    n.name, v.status
                )))
            }
            Some(v) if v.info.location != n.location => {
                return Err(Error::NoNode(format!(
                    "{at}: node `{}` is in `{}`, not `{}`",
                    n.name, v.info.location, n.location
                )))
            }
            Some(_) => {}
        }
    }
    let listed: Vec<NodeView> = nodes
        .iter()
        .filter(|v| want.iter().any(|n| n.name == v.info.node))
        .cloned()
        .collect();
    for e in events {
        controller::check_placeable(&listed, &e.submit)
            .context(|| format!("{}:{}", events_file.display(), e.line))?;
    }
    Ok(())
}

/// Replays `events_file` on the nodes of `nodes_file`; hands each event to `out` in the
/// events' order once the results are in (or the deadline has passed). An error of `out`
/// (of the caller's type) ends the replay and is returned as it is.
pub fn replay<E: From<crate::Error>>(
    c: &Connect,
    nodes_file: &Path,
    events_file: &Path,
    o: &ReplayOptions,
    mut out: impl FnMut(&Replayed) -> Result<(), E>,
) -> Result<ReplayStats, E> {
    crate::check_token("--tenant", &o.tenant)?;
    let want = parse_nodes(nodes_file)?;
    let events = parse_events(events_file, &o.tenant)?;
    let lines: Vec<JobLine> = events
        .iter()
        .map(|e| controller::job_line(&e.submit))
        .collect::<crate::Result<_>>()?;
    crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet replay").await?;
        let results = fleet.results(&o.tenant).await?;
        check_fleet(
            &controller::nodes(&fleet).await?,
            &want,
            nodes_file,
            &events,
            events_file,
        )?;
        let t0 = Instant::now();
        let placed = place_all(
            &fleet,
            events
                .iter()
                .zip(lines)
                .map(|(e, line)| (e.at, &e.submit, line)),
        )
        .await;
        let mut stats = ReplayStats {
            events: events.len(),
            ..Default::default()
        };
        let mut replayed = Vec::new();
        for (e, r) in events.iter().zip(placed) {
            let (late, event) = r.context(|| format!("{}:{}", events_file.display(), e.line))?;
            match &event.outcome {
                Outcome::Queued => stats.queued += 1,
                Outcome::Accepted { .. } => stats.accepted += 1,
                Outcome::Discarded { .. } => stats.discarded += 1,
            }
            replayed.push(Replayed {
                line: e.line,
                at_s: e.at.as_secs_f64(),
                late_us: late.as_micros() as u64,
                event,
                summary: None,
            });
        }
        let jobs: HashSet<String> = replayed
            .iter()
            .filter(|r| !matches!(r.event.outcome, Outcome::Discarded { .. }))
            .map(|r| r.event.job.clone())
            .collect();
        let mut summaries = summaries(&results, &o.tenant, &jobs, o.results_timeout).await?;
        for r in &mut replayed {
            r.summary = summaries.remove(&r.event.job);
        }
        stats.finished = replayed.iter().filter(|r| r.summary.is_some()).count();
        stats.unfinished = jobs.len() - stats.finished;
        stats.duration_s = t0.elapsed().as_secs_f64();
        for r in &replayed {
            out(r)?;
        }
        Ok(stats)
    })
}

/// Places every event (its time from now, its options, its checked job line) at its time,
/// concurrently, over one connection: a slow answer delays no other event. Each result is
/// how late the event was placed against its time, and the placement.
pub async fn place_all<'a>(
    fleet: &crate::Fleet,
    events: impl IntoIterator<Item = (Duration, &'a SubmitOptions, JobLine)>,
) -> Vec<crate::Result<(Duration, Event)>> {
    let t0 = tokio::time::Instant::now();
    futures::future::join_all(events.into_iter().map(|(at, submit, line)| async move {
        let due = t0 + at;
        tokio::time::sleep_until(due).await;
        let late = tokio::time::Instant::now().saturating_duration_since(due);
        Ok((late, controller::place(fleet, submit, line).await?))
    }))
    .await
}

/// The summaries of `jobs` (of `tenant`), read from the results stream until all are in
/// or `timeout` has passed since the call.
async fn summaries(
    results: &jetstream::stream::Stream,
    tenant: &str,
    jobs: &HashSet<String>,
    timeout: Duration,
) -> crate::Result<BTreeMap<String, JobSummary>> {
    let mut found = BTreeMap::new();
    if jobs.is_empty() {
        return Ok(found);
    }
    let deadline = Instant::now() + timeout;
    let consumer = results
        .create_consumer(jetstream::consumer::pull::OrderedConfig {
            filter_subject: crate::results_subject(tenant, "*", "s"),
            deliver_policy: jetstream::consumer::DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .nats("reading the results stream")?;
    let mut msgs = consumer.messages().await?;
    while found.len() < jobs.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(next) = tokio::time::timeout(left, msgs.next()).await else {
            break;
        };
        let Some(m) = next else { break };
        let m = m?;
        let Ok(s) = serde_json::from_slice::<JobSummary>(&m.payload) else {
            continue;
        };
        if jobs.contains(&s.job) {
            found.insert(s.job.clone(), s);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file holding `text`, removed when dropped.
    struct File(std::path::PathBuf);

    impl File {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for File {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn file(text: &str) -> File {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("vtnt-replay-{}-{n}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        File(p)
    }

    #[test]
    fn node_and_event_files_read_with_comments_in_time_order() {
        let n = file("# the paper's nodes\nfr-1 france\n\npl-1 poland # second\n");
        let nodes = parse_nodes(n.path()).unwrap();
        assert_eq!(nodes.len(), 2);
        assert_eq!((nodes[1].line, nodes[1].name.as_str()), (4, "pl-1"));
        let e = file(
            "1.5 poland microvm discard trace -q 1 192.0.2.1\n0 any docker wait ping -c 1 192.0.2.1\n",
        );
        let events = parse_events(e.path(), "t").unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].line, 2);
        assert_eq!(events[0].submit.location, "any");
        assert_eq!(events[1].at, Duration::from_millis(1500));
        assert_eq!(events[1].submit.mode, Mode::Discard);
    }

    #[test]
    fn bad_lines_name_file_line_and_field() {
        let err = |text: &str, nodes: bool| {
            let f = file(text);
            let e = if nodes {
                parse_nodes(f.path()).map(|_| ())
            } else {
                parse_events(f.path(), "t").map(|_| ())
            };
            let msg = format!("{:#}", e.unwrap_err());
            let at = format!("{}:", f.path().display());
            assert!(msg.starts_with(&at), "{msg}");
            msg[at.len()..].to_string()
        };
        assert!(err("fr-1\n", true).starts_with("1: line: want `NAME LOCATION`"));
        assert!(err("a fr\na pl\n", true).starts_with("2: NAME: node `a` is listed twice"));
        assert!(err("a.b fr\n", true).starts_with("1: NAME"));
        assert!(err("# none\n", true).contains("no node listed"));
        let ev = "0 fr microvm wait trace 192.0.2.1\n";
        assert!(err(&ev.replace("0 ", "-1 "), false).starts_with("1: AT: `-1`"));
        assert!(err(&ev.replace("microvm", "lxc"), false).starts_with("1: RUNTIME"));
        assert!(err(&ev.replace("wait", "later"), false).starts_with("1: MODE"));
        assert!(err(&ev.replace(" fr ", " f.r "), false).starts_with("1: LOCATION"));
        assert!(err(&ev.replace("192.0.2.1", "8.8.8.8"), false).starts_with("1: JOB"));
        assert!(err("0 fr microvm wait\n", false).starts_with("1: line: want"));
    }
}
