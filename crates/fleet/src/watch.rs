//! Events that trigger measurements (docs/fleet.md "Events"): path changes in the fleet's
//! own traces (`vtnt fleet measurement watch ID -- JOB...`, [`watch`]) and routing events
//! from a BGP speaker (`vtnt fleet measurement watch-routes`, [`watch_routes`]).
//!
//! A periodic trace measurement is watched: every trace its cycles bring back is compared
//! with the previous one from the same vantage point to the same destination
//! ([`PathWatch`], sans-IO). When a hop changes (another address at the same TTL, or the
//! destination reached at another distance), the watch defines a one-off measurement of
//! the job it was given, toward that destination, on the vantage point (location) that
//! saw the change: the one whose path crosses it. The new measurement's id is a function of
//! the change (`<ID>-pc<cycle>-<node>`), so a watch started again after a crash finds the
//! ones it made and makes none twice; cycles started before the watch started only set
//! what later ones are compared with.
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

use crate::bgp::{RouteChange, RoutePrefix, RouteWatch};
use crate::controller::{self, JobResults};
use crate::error::bail;
use crate::measurement::{self, CreateOptions, Selection};
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
    /// The measurement the change triggered.
    pub triggered: Option<String>,
    /// Why none was triggered (the selection matched no up node, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
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

/// What `vtnt fleet measurement watch` is told.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub tenant: String,
    /// The watched measurement (its traces).
    pub measurement: String,
    /// The triggered measurements' runtime (default: the watched one's).
    pub runtime: Option<Runtime>,
    /// The triggered job, in `vtnt` words; the destination is appended.
    pub then: Vec<String>,
    /// Return after this many changes.
    pub max_changes: Option<u64>,
}

/// Watches `o.measurement`'s traces and triggers `o.then` on each path change, handing
/// each change to `each`; until stopped, the results stream fails, or `max_changes`.
pub fn watch(
    c: &Connect,
    o: &WatchOptions,
    mut each: impl FnMut(&PathChange) -> crate::Result<()>,
) -> crate::Result<()> {
    crate::check_token("measurement", &o.measurement)?;
    if o.then.is_empty() {
        bail!(Invalid, "watch: the job to trigger is missing (after --)");
    }
    let (def, _) = crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet measurement watch").await?;
        measurement::one(&fleet, &o.tenant, &o.measurement).await
    })?;
    let runtime = match o.runtime {
        Some(r) => r,
        None => def.runtime()?,
    };
    // the triggered job is checked now, with a destination of the lab's, not at the
    // first change
    let probe: Vec<String> = o.then.iter().cloned().chain(["192.0.2.1".into()]).collect();
    vtnt_job::parse_words(&probe, vtnt_job::Vantage::Lab)?;
    let from_cycle = def.started;
    let (tx, rx) = mpsc::channel::<crate::Result<JobResults>>();
    let (connect, tenant) = (c.clone(), o.tenant.clone());
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
    let mut paths = PathWatch::default();
    let mut changes = 0u64;
    for job in rx {
        let job = job?;
        let Some(s) = job.summary.as_ref() else {
            continue;
        };
        let Some(cycle) = s.cycle.as_ref().filter(|cy| cy.measurement == def.id) else {
            continue;
        };
        if s.status != JobStatus::Ok {
            continue;
        }
        for rec in &job.records {
            let Some((dst, path)) = trace_path(rec) else {
                continue;
            };
            let Some((ttl, before)) = paths.observe(&s.node, cycle.cycle, &dst, path.clone())
            else {
                continue;
            };
            if cycle.cycle < from_cycle {
                continue;
            }
            let id = format!("{}-pc{}-{}", def.id, cycle.cycle, s.node);
            let words = o.then.iter().cloned().chain([dst.clone()]).collect();
            let made = trigger(c, &o.tenant, runtime, &s.location, &id, words);
            let change = PathChange {
                source: "path-change",
                measurement: def.id.clone(),
                cycle: cycle.cycle,
                node: s.node.clone(),
                location: s.location.clone(),
                dst,
                ttl,
                before,
                after: path,
                seen_us: crate::now_us(),
                triggered: made.as_ref().ok().map(|_| id),
                error: made.err().map(|e| crate::error::chain(&e)),
            };
            each(&change)?;
            if enough(&mut changes, o.max_changes) {
                return Ok(());
            }
        }
    }
    Err(Error::Broker("the results stream ended".into()))
}

/// A routing change that touched targets of interest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoutingChange {
    pub source: &'static str,
    /// `announced`, `withdrawn` or `changed`.
    pub kind: &'static str,
    pub prefix: String,
    /// The AS paths before and after (none: no route).
    pub as_path_before: Option<Vec<u32>>,
    pub as_path_after: Option<Vec<u32>>,
    /// When the speaker's table showed it, µs since the epoch.
    pub seen_us: u64,
    /// The targets in the prefix, which the triggered measurement probes.
    pub targets: Vec<String>,
    pub triggered: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What `vtnt fleet measurement watch-routes` is told.
#[derive(Debug, Clone)]
pub struct RoutesOptions {
    pub tenant: String,
    /// The BGP speaker's control socket (BIRD's), whose learned routes are watched.
    pub bird: std::path::PathBuf,
    /// The targets of interest: a change of a prefix holding some triggers `then` on them.
    pub targets: Vec<std::net::IpAddr>,
    /// Where the triggered measurements run, and on what.
    pub location: String,
    pub runtime: Runtime,
    /// The triggered job, in `vtnt` words; the prefix's targets are appended.
    pub then: Vec<String>,
    pub max_changes: Option<u64>,
}

/// How often the speaker's table is read.
pub const ROUTES_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Watches the routes BIRD at `o.bird` learned (its table when the watch starts is the
/// baseline) and on each change of a prefix holding targets of `o.targets` defines a
/// one-off measurement of `o.then` toward them; hands each to `each`.
pub fn watch_routes(
    c: &Connect,
    o: &RoutesOptions,
    mut each: impl FnMut(&RoutingChange) -> crate::Result<()>,
) -> crate::Result<()> {
    if o.then.is_empty() {
        bail!(
            Invalid,
            "watch-routes: the job to trigger is missing (after --)"
        );
    }
    if o.targets.is_empty() {
        bail!(
            Invalid,
            "watch-routes: no target of interest (--targets FILE)"
        );
    }
    crate::check_token("--location", &o.location)?;
    let probe: Vec<String> = o.then.iter().cloned().chain(["192.0.2.1".into()]).collect();
    vtnt_job::parse_words(&probe, vtnt_job::Vantage::Lab)?;
    let mut routes = RouteWatch::new(&o.bird, ROUTES_POLL)?;
    routes.poll()?;
    let mut changes = 0u64;
    loop {
        for e in routes.next_events(std::time::Duration::from_secs(3600))? {
            let prefix = e.change.prefix();
            let targets: Vec<String> = o
                .targets
                .iter()
                .filter(|a| holds(&prefix, **a))
                .take(crate::INLINE_TARGETS)
                .map(|a| a.to_string())
                .collect();
            if targets.is_empty() {
                continue;
            }
            let seen_us = e
                .seen
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64);
            let (kind, before, after) = match &e.change {
                RouteChange::Announced { route } => ("announced", None, Some(route)),
                RouteChange::Withdrawn { last } => ("withdrawn", Some(last), None),
                RouteChange::Changed { before, after } => ("changed", Some(before), Some(after)),
            };
            let id = format!("rt{}-{}", seen_us / 1000, changes);
            let words = o
                .then
                .iter()
                .cloned()
                .chain(targets.iter().cloned())
                .collect();
            let made = trigger(c, &o.tenant, o.runtime, &o.location, &id, words);
            let change = RoutingChange {
                source: "bgp",
                kind,
                prefix: prefix.to_string(),
                as_path_before: before.map(|r| r.as_path.clone()),
                as_path_after: after.map(|r| r.as_path.clone()),
                seen_us,
                targets,
                triggered: made.as_ref().ok().map(|_| id),
                error: made.err().map(|e| crate::error::chain(&e)),
            };
            each(&change)?;
            if enough(&mut changes, o.max_changes) {
                return Ok(());
            }
        }
    }
}

/// Counts one more change handed over; whether `max` of them are.
fn enough(changes: &mut u64, max: Option<u64>) -> bool {
    *changes += 1;
    max.is_some_and(|m| *changes >= m)
}

/// Whether `p` holds `a` (same family, the first `len` bits equal).
fn holds(p: &RoutePrefix, a: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    match (p.addr, a) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(p.len)).unwrap_or(0);
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(p.len)).unwrap_or(0);
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

/// Defines measurement `id` (once: one that exists already was made by an earlier watch
/// for the same change).
fn trigger(
    c: &Connect,
    tenant: &str,
    runtime: Runtime,
    location: &str,
    id: &str,
    words: Vec<String>,
) -> crate::Result<()> {
    let exists = crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet measurement watch").await?;
        Ok::<_, Error>(measurement::one(&fleet, tenant, id).await.is_ok())
    })?;
    if exists {
        return Ok(());
    }
    let o = CreateOptions {
        tenant: tenant.to_string(),
        runtime,
        selection: Selection {
            locations: vec![location.to_string()],
            tags: Vec::new(),
            asns: Vec::new(),
            countries: Vec::new(),
            count: Some(1),
        },
        every: None,
        start_in: std::time::Duration::ZERO,
        until_us: None,
        max_cycles: None,
        words,
        split: None,
    };
    measurement::create_named(c, &o, id.to_string()).map(|_| ())
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
    fn a_prefix_holds_the_addresses_under_its_length_only() {
        let p: RoutePrefix = "203.0.113.0/29".parse().unwrap();
        assert!(holds(&p, "203.0.113.2".parse().unwrap()));
        assert!(holds(&p, "203.0.113.7".parse().unwrap()));
        assert!(!holds(&p, "203.0.113.8".parse().unwrap()));
        assert!(!holds(&p, "2001:db8::1".parse().unwrap()));
        let all: RoutePrefix = "0.0.0.0/0".parse().unwrap();
        assert!(holds(&all, "198.51.100.1".parse().unwrap()));
        let p6: RoutePrefix = "2001:db8:64::/48".parse().unwrap();
        assert!(holds(&p6, "2001:db8:64::cb00:710a".parse().unwrap()));
        assert!(!holds(&p6, "2001:db8:65::1".parse().unwrap()));
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
