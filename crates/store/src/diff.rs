//! What changed between two campaigns, in the spirit of scamper's `sc_tracediff`: for
//! every (vantage point, target) both runs traced, the two paths (the reply address at
//! each TTL, `*` where none came) and the tunnels TNT found on them. A pair is *changed*
//! when the hop sequences differ (then the changed segment is given: what lies between
//! the longest common start and the longest common end) or when tunnels appeared or
//! disappeared. Each run's last initial trace (or plain trace) of a pair counts;
//! revelation traces are TNT's means, not paths of the campaign. Each pair's path and
//! tunnels, and a digest of both, are kept at ingest (`run_paths`, [`crate::summary`]),
//! so the diff merges the two runs' digest lists in key order and reads only the pairs
//! whose digests differ.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};

use rusqlite::types::Value;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::{Store, Tenant};

/// A tunnel as the diff compares it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TunnelKey {
    pub class: String,
    pub ingress: Option<String>,
    pub egress: Option<String>,
    pub lsrs: Vec<String>,
}

impl TunnelKey {
    /// The key of a `tunnels` row: `lsrs` is its comma-joined LSR addresses.
    pub fn new(class: String, ingress: Option<String>, egress: Option<String>, lsrs: &str) -> Self {
        TunnelKey {
            class,
            ingress,
            egress,
            lsrs: lsrs
                .split(',')
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect(),
        }
    }
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

impl Store {
    /// The id of run `run` of `tenant`.
    fn run_id(&self, tenant: &Tenant, run: &str) -> Result<i64> {
        let args = [Value::Text(tenant.as_str().into()), Value::Text(run.into())];
        let id = self.rows(
            "SELECT id FROM runs WHERE tenant = ?1 AND key = ?2",
            &args,
            |r| r.get(0),
        )?;
        id.first().copied().ok_or_else(|| {
            StoreError::Invalid(format!("no run `{run}` (`vtnt query runs` lists them)"))
        })
    }

    /// Run `run`'s pairs (vantage point id, target) with their digests, in key order:
    /// a scan of `run_paths_digest`, which holds them all and no text.
    fn digests(&self, run: i64) -> Result<Vec<(i64, String, i64)>> {
        self.rows(
            "SELECT node_id, dst, digest FROM run_paths INDEXED BY run_paths_digest
             WHERE run_id = ?1 ORDER BY node_id, dst",
            &[Value::Integer(run)],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
    }

    /// Compares run `a` with run `b` (their keys) of `tenant`, from their `run_paths`
    /// (docs/store.md): one merge of both runs' digest lists in key order matches the
    /// pairs and counts the unchanged ones; only the pairs whose digests differ are read.
    pub fn diff(&self, tenant: &Tenant, a: &str, b: &str) -> Result<Diff> {
        let (ia, ib) = (self.run_id(tenant, a)?, self.run_id(tenant, b)?);
        let names: HashMap<i64, String> = self
            .rows(
                "SELECT id, name FROM nodes WHERE tenant = ?1",
                &[Value::Text(tenant.as_str().into())],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?
            .into_iter()
            .collect();
        let (xs, ys) = (self.digests(ia)?, self.digests(ib)?);
        let (mut only_a, mut only_b, mut differ) = (Vec::new(), Vec::new(), Vec::new());
        let (mut x, mut y) = (xs.into_iter().peekable(), ys.into_iter().peekable());
        let (mut compared, mut unchanged) = (0, 0);
        loop {
            let order = match (x.peek(), y.peek()) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(p), Some(q)) => (p.0, &p.1).cmp(&(q.0, &q.1)),
            };
            match order {
                Ordering::Less => only_a.extend(x.next()),
                Ordering::Greater => only_b.extend(y.next()),
                Ordering::Equal => {
                    if let (Some(p), Some(q)) = (x.next(), y.next()) {
                        compared += 1;
                        if p.2 == q.2 {
                            unchanged += 1;
                        } else {
                            differ.push((p.0, p.1));
                        }
                    }
                }
            }
        }
        let key = |(node, target): (i64, String)| PathKey {
            node: names.get(&node).cloned().unwrap_or_default(),
            target,
        };
        let keys = |pairs: Vec<(i64, String, i64)>| {
            let mut k: Vec<PathKey> = pairs.into_iter().map(|(n, t, _)| key((n, t))).collect();
            k.sort();
            k
        };
        let mut changed = differ
            .into_iter()
            .map(|(node, dst)| {
                let (pa, ta) = self.kept(ia, node, &dst)?;
                let (pb, tb) = self.kept(ib, node, &dst)?;
                Ok(PathChange {
                    key: key((node, dst)),
                    segment: segment(&pa, &pb),
                    tunnels_gone: ta.difference(&tb).cloned().collect(),
                    tunnels_new: tb.difference(&ta).cloned().collect(),
                    a: pa,
                    b: pb,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        changed.sort_by(|p, q| p.key.cmp(&q.key));
        Ok(Diff {
            a: a.into(),
            b: b.into(),
            compared,
            unchanged,
            changed,
            only_in_a: keys(only_a),
            only_in_b: keys(only_b),
        })
    }

    /// The path and tunnels run `run` keeps for (vantage point `node`, target `dst`).
    fn kept(&self, run: i64, node: i64, dst: &str) -> Result<(Vec<String>, BTreeSet<TunnelKey>)> {
        let what = || format!("{}: reading the path of {dst} in run {run}", self.path);
        let (path, tunnels): (String, String) = self
            .conn
            .prepare_cached(
                "SELECT path, tunnels FROM run_paths WHERE run_id = ?1 AND node_id = ?2 \
                 AND dst = ?3",
            )
            .and_then(|mut st| {
                st.query_row(rusqlite::params![run, node, dst], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
            })
            .map_err(StoreError::sql(what()))?;
        let keys = serde_json::from_str(&tunnels)
            .map_err(|e| StoreError::Invalid(format!("{}: {e}", what())))?;
        Ok((path.split_whitespace().map(String::from).collect(), keys))
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
