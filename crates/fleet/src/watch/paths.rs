//! Path changes as events (`vtnt fleet measurement watch ID -- JOB...`): a periodic trace
//! measurement is watched, every trace its cycles bring back compared with the previous
//! one from the same vantage point to the same destination ([`PathWatch`], sans-IO).
//! When a hop changes (another address at the same TTL, or the destination reached at
//! another distance), the event is a one-off measurement of the job the watch was given,
//! toward that destination, on the vantage point (location) that saw the change: the
//! one whose path crosses it. Its id is a function of the change
//! (`<ID>-pc<cycle>-<node>`); cycles started before the watch started only set what later
//! ones are compared with.
//!
//! A hop that did not answer in one of the two traces compares with anything (a lost reply
//! or a rate limit is no change), so a change needs two answers that differ. A trace
//! whose flow differs from cycle to cycle across load balancers shows changes that are
//! the balancers' (Paris traces keep one flow per trace): give the watched trace a fixed
//! flow (`-s SPORT` for UDP, `-d DPORT`).

use std::collections::BTreeMap;
use std::sync::mpsc;

use serde::Serialize;
use vtnt_runtimes::Runtime;

use super::{Event, EventSource};
use crate::controller::{self, JobResults};
use crate::measurement::{self, Definition};
use crate::proto::JobStatus;
use crate::{Connect, Error};

/// A trace's path: the address that answered at each TTL (from 1), `None` where none did.
pub type Path = Vec<Option<String>>;

/// A path that changed, seen in `cycle` of `measurement` on `node`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathChange {
    pub source: &'static str,
    pub measurement: String,
    pub cycle: u64,
    pub node: String,
    pub location: String,
    pub dst: String,
    /// The first TTL whose answer changed.
    pub ttl: usize,
    pub before: Path,
    pub after: Path,
    /// When the watch saw it, µs since the epoch.
    pub seen_us: u64,
}

/// The last path per vantage point and destination, and the cycle it came from.
#[derive(Debug, Default)]
pub struct PathWatch {
    last: BTreeMap<(String, String), (u64, Path)>,
}

impl PathWatch {
    /// Takes a trace of `cycle` from `node`; the first TTL at which it differs from the
    /// last one seen from that node to that destination, with the old path. A cycle
    /// older than the last one seen is ignored (results may come out of order).
    pub fn observe(
        &mut self,
        node: &str,
        cycle: u64,
        dst: &str,
        path: Path,
    ) -> Option<(usize, Path)> {
        let key = (node.to_string(), dst.to_string());
        match self.last.get(&key) {
            Some((seen, _)) if *seen > cycle => return None,
            _ => {}
        }
        let before = self.last.insert(key, (cycle, path.clone()))?.1;
        first_change(&before, &path, dst).map(|ttl| (ttl, before))
    }
}

/// The first TTL (from 1) at which two answers differ, or at which one path reaches `dst`
/// and the other answers with something else; `None` when nothing changed.
pub fn first_change(before: &Path, after: &Path, dst: &str) -> Option<usize> {
    let reach = |p: &Path| p.iter().position(|a| a.as_deref() == Some(dst));
    let differs = before
        .iter()
        .zip(after)
        .position(|(a, b)| matches!((a, b), (Some(a), Some(b)) if a != b));
    let moved = match (reach(before), reach(after)) {
        (Some(x), Some(y)) if x != y => Some(x.min(y)),
        _ => None,
    };
    [differs, moved].into_iter().flatten().min().map(|i| i + 1)
}

/// A scamper JSON trace record's destination and path; `None` for another record.
pub fn trace_path(line: &str) -> Option<(String, Path)> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v["type"] != "trace" {
        return None;
    }
    let dst = v["dst"].as_str()?.to_string();
    let mut path: Path = Vec::new();
    for h in v["hops"].as_array().into_iter().flatten() {
        let (Some(ttl), Some(addr)) = (h["probe_ttl"].as_u64(), h["addr"].as_str()) else {
            continue;
        };
        let i = usize::try_from(ttl).ok()?.checked_sub(1)?;
        if i >= 255 {
            return None;
        }
        if path.len() <= i {
            path.resize(i + 1, None);
        }
        // the first answer of a TTL stands for it
        path[i].get_or_insert_with(|| addr.to_string());
    }
    Some((dst, path))
}

/// The path changes in a periodic trace measurement's results, as they come.
pub struct PathChanges {
    def: Definition,
    runtime: Runtime,
    results: mpsc::Receiver<crate::Result<JobResults>>,
    paths: PathWatch,
}

impl PathChanges {
    /// Follows the results of `tenant`'s measurement `id`; its changes trigger measurements
    /// on `runtime` (default: the watched measurement's).
    pub fn follow(
        c: &Connect,
        tenant: &str,
        id: &str,
        runtime: Option<Runtime>,
    ) -> crate::Result<PathChanges> {
        crate::check_token("measurement", id)?;
        let (def, _) = crate::block_on(async {
            let (_, fleet) = c.fleet("vtnt fleet measurement watch").await?;
            measurement::one(&fleet, tenant, id).await
        })?;
        let runtime = match runtime {
            Some(r) => r,
            None => def.runtime()?,
        };
        let (tx, results) = mpsc::channel::<crate::Result<JobResults>>();
        let (connect, tenant) = (c.clone(), tenant.to_string());
        std::thread::spawn(move || {
            let sent = tx.clone();
            let end = controller::results(&connect, &tenant, None, true, |r| {
                sent.send(Ok(r))
                    .map_err(|_| Error::Invalid("the watch has stopped".into()))
            });
            if let Err(e) = end {
                let _ = tx.send(Err(e));
            }
        });
        Ok(PathChanges {
            def,
            runtime,
            results,
            paths: PathWatch::default(),
        })
    }

    /// The changes one job's results show.
    fn changes(&mut self, job: &JobResults) -> Vec<Event<PathChange>> {
        let Some(s) = job.summary.as_ref() else {
            return Vec::new();
        };
        let Some(cycle) = s.cycle.as_ref().filter(|cy| cy.measurement == self.def.id) else {
            return Vec::new();
        };
        if s.status != JobStatus::Ok {
            return Vec::new();
        }
        let mut events = Vec::new();
        for rec in &job.records {
            let Some((dst, path)) = trace_path(rec) else {
                continue;
            };
            let Some((ttl, before)) = self.paths.observe(&s.node, cycle.cycle, &dst, path.clone())
            else {
                continue;
            };
            if cycle.cycle < self.def.started {
                continue;
            }
            events.push(Event {
                id: format!("{}-pc{}-{}", self.def.id, cycle.cycle, s.node),
                location: s.location.clone(),
                runtime: self.runtime,
                targets: vec![dst.clone()],
                detail: PathChange {
                    source: "path-change",
                    measurement: self.def.id.clone(),
                    cycle: cycle.cycle,
                    node: s.node.clone(),
                    location: s.location.clone(),
                    dst,
                    ttl,
                    before,
                    after: path,
                    seen_us: crate::now_us(),
                },
            });
        }
        events
    }
}

impl EventSource for PathChanges {
    type Detail = PathChange;

    fn next(&mut self) -> crate::Result<Vec<Event<PathChange>>> {
        loop {
            let job = self
                .results
                .recv()
                .map_err(|_| Error::Broker("the results stream ended".into()))??;
            let events = self.changes(&job);
            if !events.is_empty() {
                return Ok(events);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(hops: &[&str]) -> Path {
        hops.iter()
            .map(|h| (*h != "*").then(|| h.to_string()))
            .collect()
    }

    #[test]
    fn a_hop_that_answers_elsewhere_is_a_change_and_a_silent_one_is_not() {
        let d = "203.0.113.2";
        let a = p(&["10.0.0.1", "10.0.1.1", "10.0.2.1", d]);
        assert_eq!(first_change(&a, &a, d), None);
        assert_eq!(
            first_change(&a, &p(&["10.0.0.1", "*", "10.0.2.1", d]), d),
            None
        );
        assert_eq!(
            first_change(&a, &p(&["10.0.0.1", "10.0.9.1", "10.0.2.1", d]), d),
            Some(2)
        );
        // a longer way round: the destination answers further away
        let longer = p(&["10.0.0.1", "*", "*", "*", d]);
        assert_eq!(first_change(&a, &longer, d), Some(4));
        // a trace cut short (gap limit) is no change
        assert_eq!(first_change(&a, &p(&["10.0.0.1", "10.0.1.1"]), d), None);
    }

    #[test]
    fn changes_are_per_vantage_point_and_destination_and_old_cycles_are_ignored() {
        let mut w = PathWatch::default();
        let a = p(&["10.0.0.1", "10.0.1.1", "x"]);
        let b = p(&["10.0.0.1", "10.0.5.1", "x"]);
        assert_eq!(
            w.observe("n1", 0, "x", a.clone()),
            None,
            "the first is a baseline"
        );
        assert_eq!(w.observe("n2", 0, "x", b.clone()), None, "another node's");
        assert_eq!(w.observe("n1", 1, "x", a.clone()), None);
        assert_eq!(w.observe("n1", 2, "x", b.clone()), Some((2, a.clone())));
        assert_eq!(w.observe("n1", 1, "x", a), None, "an older cycle");
        assert_eq!(w.observe("n1", 3, "x", b), None);
    }

    #[test]
    fn a_trace_record_gives_its_path_by_ttl_and_other_records_none() {
        let line = r#"{"type":"trace","dst":"203.0.113.2","hops":[{"addr":"10.0.0.1","probe_ttl":1},{"addr":"10.0.2.1","probe_ttl":3},{"addr":"10.0.2.9","probe_ttl":3}]}"#;
        let (dst, path) = trace_path(line).unwrap();
        assert_eq!(dst, "203.0.113.2");
        assert_eq!(path, p(&["10.0.0.1", "*", "10.0.2.1"]));
        assert_eq!(trace_path(r#"{"type":"ping","dst":"x"}"#), None);
        assert_eq!(trace_path("not json"), None);
        let bad_ttl = r#"{"type":"trace","dst":"x","hops":[{"addr":"a","probe_ttl":0}]}"#;
        assert_eq!(trace_path(bad_ttl), None);
    }
}
