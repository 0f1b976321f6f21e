//! What changed between two campaigns, in the spirit of scamper's `sc_tracediff`: for
//! every (vantage point, target) both runs traced, the two paths (the reply address at
//! each TTL, `*` where none came) and the tunnels TNT found on them. A pair is *changed*
//! when the hop sequences differ (then the changed segment is given: what lies between
//! the longest common start and the longest common end) or when tunnels appeared or
//! disappeared. Each run's last initial trace (or plain trace) of a pair counts;
//! revelation traces are TNT's means, not paths of the campaign.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::types::Value;
use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::query::{path_of, HOPS_TEXT};
use crate::{Store, Tenant};

/// A tunnel as the diff compares it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct TunnelKey {
    pub class: String,
    pub ingress: Option<String>,
    pub egress: Option<String>,
    pub lsrs: Vec<String>,
}

/// A (vantage point, target) pair.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct PathKey {
    pub node: String,
    pub target: String,
}

/// The part of a path that changed: from `ttl` on, `a` in the first run became `b`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Segment {
    pub ttl: usize,
    pub a: Vec<String>,
    pub b: Vec<String>,
}

/// One pair whose path or tunnels changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathChange {
    #[serde(flatten)]
    pub key: PathKey,
    pub a: Vec<String>,
    pub b: Vec<String>,
    /// `None` when only the tunnels changed.
    pub segment: Option<Segment>,
    pub tunnels_gone: Vec<TunnelKey>,
    pub tunnels_new: Vec<TunnelKey>,
}

/// Two runs compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diff {
    pub a: String,
    pub b: String,
    /// Pairs both runs traced, and of those the unchanged ones.
    pub compared: u64,
    pub unchanged: u64,
    pub changed: Vec<PathChange>,
    pub only_in_a: Vec<PathKey>,
    pub only_in_b: Vec<PathKey>,
}

/// One run's paths and tunnels per pair.
type Paths = BTreeMap<PathKey, (Vec<String>, BTreeSet<TunnelKey>)>;

impl Store {
    /// The last path (and its tunnels) per (node, target) of run `run` of `tenant`.
    fn paths(&self, tenant: &Tenant, run: &str) -> Result<Paths> {
        let args = [Value::Text(tenant.as_str().into()), Value::Text(run.into())];
        let known = self.rows(
            "SELECT 1 FROM runs WHERE tenant = ?1 AND key = ?2",
            &args,
            |_| Ok(()),
        )?;
        if known.is_empty() {
            return Err(StoreError::Invalid(format!(
                "no run `{run}` (`vtnt query runs` lists them)"
            )));
        }
        let sql = format!(
            "SELECT r.id, n.name, r.dst, r.firsthop, {HOPS_TEXT}
             FROM traces r JOIN jobs j ON j.id = r.job_id JOIN nodes n ON n.id = j.node_id
                  JOIN runs u ON u.id = j.run_id
             WHERE r.tenant = ?1 AND u.key = ?2 AND coalesce(r.role, 'initial') = 'initial'
             ORDER BY r.start_us, r.id"
        );
        let traces = self.rows(&sql, &args, |r| {
            let firsthop: u8 = r.get(3)?;
            Ok((
                r.get::<_, i64>(0)?,
                PathKey {
                    node: r.get(1)?,
                    target: r.get(2)?,
                },
                path_of(firsthop, r.get(4)?),
            ))
        })?;
        let tunnels = self.rows(
            "SELECT t.trace_id, t.class, t.ingress, t.egress, t.lsrs
             FROM tunnels t JOIN traces r ON r.id = t.trace_id JOIN jobs j ON j.id = r.job_id
                  JOIN runs u ON u.id = j.run_id
             WHERE r.tenant = ?1 AND u.key = ?2",
            &args,
            |r| {
                let lsrs: String = r.get(4)?;
                Ok((
                    r.get::<_, i64>(0)?,
                    TunnelKey {
                        class: r.get(1)?,
                        ingress: r.get(2)?,
                        egress: r.get(3)?,
                        lsrs: lsrs
                            .split(',')
                            .filter(|l| !l.is_empty())
                            .map(String::from)
                            .collect(),
                    },
                ))
            },
        )?;
        let mut of_trace: BTreeMap<i64, BTreeSet<TunnelKey>> = BTreeMap::new();
        for (trace, t) in tunnels {
            of_trace.entry(trace).or_default().insert(t);
        }
        // later traces of a pair replace earlier ones
        Ok(traces
            .into_iter()
            .map(|(id, key, path)| (key, (path, of_trace.remove(&id).unwrap_or_default())))
            .collect())
    }

    /// Compares run `a` with run `b` (their keys) of `tenant`.
    pub fn diff(&self, tenant: &Tenant, a: &str, b: &str) -> Result<Diff> {
        let pa = self.paths(tenant, a)?;
        let mut pb = self.paths(tenant, b)?;
        let mut d = Diff {
            a: a.into(),
            b: b.into(),
            compared: 0,
            unchanged: 0,
            changed: Vec::new(),
            only_in_a: Vec::new(),
            only_in_b: Vec::new(),
        };
        for (key, (path_a, tun_a)) in pa {
            let Some((path_b, tun_b)) = pb.remove(&key) else {
                d.only_in_a.push(key);
                continue;
            };
            d.compared += 1;
            let segment = segment(&path_a, &path_b);
            let gone: Vec<TunnelKey> = tun_a.difference(&tun_b).cloned().collect();
            let new: Vec<TunnelKey> = tun_b.difference(&tun_a).cloned().collect();
            if segment.is_none() && gone.is_empty() && new.is_empty() {
                d.unchanged += 1;
                continue;
            }
            d.changed.push(PathChange {
                key,
                a: path_a,
                b: path_b,
                segment,
                tunnels_gone: gone,
                tunnels_new: new,
            });
        }
        d.only_in_b = pb.into_keys().collect();
        Ok(d)
    }
}

/// Where two paths differ: past their longest common start, before their longest common
/// end; `None` when they are equal. `ttl` counts from 1 at the paths' first entry.
fn segment(a: &[String], b: &[String]) -> Option<Segment> {
    if a == b {
        return None;
    }
    let start = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let end = a[start..]
        .iter()
        .rev()
        .zip(b[start..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    Some(Segment {
        ttl: start + 1,
        a: a[start..a.len() - end].to_vec(),
        b: b[start..b.len() - end].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_segment_is_between_the_common_ends() {
        assert_eq!(segment(&p("a b c"), &p("a b c")), None);
        let s = segment(&p("a b c d"), &p("a x y d")).unwrap();
        assert_eq!((s.ttl, s.a, s.b), (2, p("b c"), p("x y")));
        let s = segment(&p("a b"), &p("a b c")).unwrap();
        assert_eq!((s.ttl, s.a, s.b), (3, p(""), p("c")));
        let s = segment(&p("a b a"), &p("a a")).unwrap();
        assert_eq!((s.ttl, s.a, s.b), (2, p("b"), p("")));
    }
}
