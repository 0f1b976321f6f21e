//! What changed between two campaigns, in the spirit of scamper's `sc_tracediff`: for
//! every (vantage point, target) both runs traced, the two paths (the reply address at
//! each TTL, `*` where none came) and the tunnels TNT found on them. A pair is *changed*
//! when the hop sequences differ (then the changed segment is given: what lies between
//! the longest common start and the longest common end) or when tunnels appeared or
//! disappeared. Each run's last initial trace (or plain trace) of a pair counts;
//! revelation traces are TNT's means, not paths of the campaign. Each pair's path and
//! tunnels are kept at ingest (`run_paths`, [`crate::summary`]), so the diff matches
//! pairs in SQL and reads only the changed ones.

use std::collections::BTreeSet;

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

    /// The pairs of run `a` (ids) that run `b` has not, in (vantage point, target) order.
    fn only_in(&self, a: i64, b: i64) -> Result<Vec<PathKey>> {
        self.rows(
            "SELECT n.name, x.dst FROM run_paths x JOIN nodes n ON n.id = x.node_id
             WHERE x.run_id = ?1 AND NOT EXISTS (SELECT 1 FROM run_paths y
                 WHERE y.run_id = ?2 AND y.node_id = x.node_id AND y.dst = x.dst)
             ORDER BY n.name, x.dst",
            &[Value::Integer(a), Value::Integer(b)],
            |r| {
                Ok(PathKey {
                    node: r.get(0)?,
                    target: r.get(1)?,
                })
            },
        )
    }

    /// Compares run `a` with run `b` (their keys) of `tenant`, from their `run_paths`
    /// (docs/store.md): the pairs are matched, and the unchanged ones counted, in SQL;
    /// only the changed ones are read.
    pub fn diff(&self, tenant: &Tenant, a: &str, b: &str) -> Result<Diff> {
        let (ia, ib) = (self.run_id(tenant, a)?, self.run_id(tenant, b)?);
        let ids = [Value::Integer(ia), Value::Integer(ib)];
        const PAIRS: &str = "FROM run_paths x JOIN run_paths y ON y.run_id = ?2 \
             AND y.node_id = x.node_id AND y.dst = x.dst WHERE x.run_id = ?1";
        let counts = self.rows(
            &format!(
                "SELECT count(*), coalesce(sum(x.path = y.path AND x.tunnels = y.tunnels), 0) \
                 {PAIRS}"
            ),
            &ids,
            |r| Ok((r.get::<_, u64>(0)?, r.get::<_, u64>(1)?)),
        )?;
        let (compared, unchanged) = counts.first().copied().unwrap_or((0, 0));
        let changed = self.rows(
            &format!(
                "SELECT n.name, x.dst, x.path, y.path, x.tunnels, y.tunnels {} \
                 AND (x.path != y.path OR x.tunnels != y.tunnels) ORDER BY n.name, x.dst",
                PAIRS.replace(" WHERE", " JOIN nodes n ON n.id = x.node_id WHERE")
            ),
            &ids,
            |r| {
                let words = |i| -> rusqlite::Result<Vec<String>> {
                    let p: String = r.get(i)?;
                    Ok(p.split_whitespace().map(String::from).collect())
                };
                let keys = |i| -> rusqlite::Result<BTreeSet<TunnelKey>> {
                    let t: String = r.get(i)?;
                    serde_json::from_str(&t).map_err(|e| {
                        rusqlite::Error::FromSqlConversionFailure(
                            i,
                            rusqlite::types::Type::Text,
                            Box::new(e),
                        )
                    })
                };
                let (path_a, path_b) = (words(2)?, words(3)?);
                let (tun_a, tun_b) = (keys(4)?, keys(5)?);
                Ok(PathChange {
                    key: PathKey {
                        node: r.get(0)?,
                        target: r.get(1)?,
                    },
                    segment: segment(&path_a, &path_b),
                    tunnels_gone: tun_a.difference(&tun_b).cloned().collect(),
                    tunnels_new: tun_b.difference(&tun_a).cloned().collect(),
                    a: path_a,
                    b: path_b,
                })
            },
        )?;
        Ok(Diff {
            a: a.into(),
            b: b.into(),
            compared,
            unchanged,
            changed,
            only_in_a: self.only_in(ia, ib)?,
            only_in_b: self.only_in(ib, ia)?,
        })
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
