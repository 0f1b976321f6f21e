//! Records out of the store, one tenant's only: runs, nodes, traces with their paths, and
//! tunnels, selected by a [`Filter`] (target, prefix, tunnel class, vendor, node, run,
//! time). Every answer is a typed, serde-serialisable value, so a web layer returns it as
//! JSON as it is. Every query here and in [`crate::questions`] and [`crate::diff`] is
//! built on [`Scope`], whose first condition is the tenant's: no code path reads another
//! tenant's rows.

use std::net::IpAddr;

use rusqlite::types::Value;
use serde::{Deserialize, Serialize};
pub use vtnt_policy::Prefix;

use crate::error::{Result, StoreError};
use crate::paths::{path_of, HOPS_TEXT};
use crate::{NodeInfo, Store, Tenant};

/// Which records a question looks at; every field narrows it (unset: no condition).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// Traces towards this address.
    pub target: Option<IpAddr>,
    /// Traces towards an address of this IPv4 prefix (`a.b.c.d/len`).
    #[serde(default, with = "prefix_text")]
    pub prefix: Option<Prefix>,
    /// Tunnels of this class (`explicit`, `implicit`, `opaque`, `invisible-php`,
    /// `invisible-uhp`).
    pub class: Option<String>,
    /// Tunnels whose ingress has this vendor (TNT's: `cisco`, `juniper`, `linux`,
    /// `junos-e`, `unknown`, `unresponsive`).
    pub vendor: Option<String>,
    /// Records of this vantage point.
    pub node: Option<String>,
    /// Records of this run (its key).
    pub run: Option<String>,
    /// Records that started at or after this time (microseconds since the Unix epoch).
    pub since_us: Option<i64>,
    /// Records that started before this time.
    pub until_us: Option<i64>,
}

/// `Option<Prefix>` as its text.
mod prefix_text {
    use serde::{Deserialize, Deserializer, Serializer};
    use vtnt_policy::Prefix;

    pub fn serialize<S: Serializer>(p: &Option<Prefix>, s: S) -> Result<S::Ok, S::Error> {
        match p {
            Some(p) => s.serialize_some(&p.to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Prefix>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| t.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

pub use crate::annotation::classes;

/// The vendors TNT's signatures name.
pub const VENDORS: &[&str] = &[
    "cisco",
    "juniper",
    "linux",
    "junos-e",
    "unknown",
    "unresponsive",
];

impl Filter {
    /// Checks the words of `class` and `vendor`.
    pub fn check(&self) -> Result<()> {
        if let Some(c) = &self.class {
            if !classes().any(|k| k == c) {
                let names: Vec<&str> = classes().collect();
                return Err(StoreError::Invalid(format!(
                    "class `{c}`: one of {}",
                    names.join(", ")
                )));
            }
        }
        if let Some(v) = &self.vendor {
            if !VENDORS.contains(&v.as_str()) {
                return Err(StoreError::Invalid(format!(
                    "vendor `{v}`: one of {}",
                    VENDORS.join(", ")
                )));
            }
        }
        Ok(())
    }
}

/// Which of a trace's job `j`, node `n` and run `u` a [`Scope`] joins besides those its
/// filter needs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Joins {
    /// Traces `r` (and tunnels `t`, signatures `s`) alone.
    None,
    /// Its job and node.
    Node,
    /// Its job and run.
    Run,
    /// All three.
    All,
}

/// The rows of traces a filter selects, as SQL: `FROM` traces `r`, its job `j`, node `n`
/// and run `u`, the tenant's condition first, then the filter's; tunnel queries add
/// tunnels `t` (and the ingress's signature `s`) through [`Scope::tunnels`].
pub(crate) struct Scope {
    pub from: String,
    pub conds: Vec<String>,
    pub args: Vec<Value>,
}

impl Scope {
    /// The traces of `tenant` that `f` selects (its class and vendor aside).
    pub fn traces(tenant: &Tenant, f: &Filter) -> Result<Scope> {
        Scope::traces_joining(tenant, f, Joins::All)
    }

    /// [`Scope::traces`] joining only what `joins` and the filter need: every trace has
    /// one job, node and run (foreign keys, `NOT NULL`), so leaving a join out selects
    /// the same rows, sooner (the whole-store questions, see docs/store.md).
    fn traces_joining(tenant: &Tenant, f: &Filter, joins: Joins) -> Result<Scope> {
        f.check()?;
        let mut s = Scope::joining("traces r", "r", joins, f);
        s.cond("r.tenant = ?", Value::Text(tenant.as_str().into()));
        match f.target.map(|t| (t, crate::addr_n(t))) {
            Some((_, Some(n))) => s.cond("r.dst_n = ?", Value::Integer(n)),
            Some((t, None)) => s.cond("r.dst = ?", Value::Text(t.to_string())),
            None => {}
        }
        if let Some(p) = &f.prefix {
            let first = u32::from(p.addr());
            let last = first | u32::MAX.checked_shr(u32::from(p.bits())).unwrap_or(0);
            s.cond("r.dst_n >= ?", Value::Integer(first.into()));
            s.cond("r.dst_n <= ?", Value::Integer(last.into()));
        }
        s.provenance(f);
        if let Some(t) = f.since_us {
            s.cond("r.start_us >= ?", Value::Integer(t));
        }
        if let Some(t) = f.until_us {
            s.cond("r.start_us < ?", Value::Integer(t));
        }
        Ok(s)
    }

    /// The tunnels found on the traces `f` selects, of its class and vendor.
    pub fn tunnels(tenant: &Tenant, f: &Filter) -> Result<Scope> {
        Scope::tunnels_joining(tenant, f, Joins::All)
    }

    /// [`Scope::tunnels`] joining only what `joins` and the filter need.
    pub fn tunnels_joining(tenant: &Tenant, f: &Filter, joins: Joins) -> Result<Scope> {
        let mut s = Scope::traces_joining(tenant, f, joins)?;
        s.from.push_str(
            " JOIN tunnels t ON t.trace_id = r.id \
             LEFT JOIN signatures s ON s.job_id = r.job_id AND s.addr = t.ingress",
        );
        s.tunnel_conds(f, "s.vendor");
        Ok(s)
    }

    /// The summary rows of `table` (`tunnel_groups` or `lsr_groups`, alias `t`;
    /// [`crate::summary`]) of the tunnels `f` selects, joining its job `j`, node `n` and
    /// run `u` as `joins` and the filter need; `None` when `f` selects traces by what the
    /// summaries do not keep (target, prefix, time): then the question reads the tunnels.
    pub fn summary(
        table: &str,
        tenant: &Tenant,
        f: &Filter,
        joins: Joins,
    ) -> Result<Option<Scope>> {
        f.check()?;
        if f.target.is_some() || f.prefix.is_some() || f.since_us.is_some() || f.until_us.is_some()
        {
            return Ok(None);
        }
        let mut s = Scope::joining(&format!("{table} t"), "t", joins, f);
        s.cond("t.tenant = ?", Value::Text(tenant.as_str().into()));
        s.provenance(f);
        s.tunnel_conds(f, "t.vendor");
        Ok(Some(s))
    }

    /// `rows` (alias `alias`, with a `job_id`) joined to their job `j`, node `n` and run
    /// `u` as `joins` and `f`'s node and run need; no condition yet.
    fn joining(rows: &str, alias: &str, joins: Joins, f: &Filter) -> Scope {
        let node = joins == Joins::All || joins == Joins::Node || f.node.is_some();
        let run = joins == Joins::All || joins == Joins::Run || f.run.is_some();
        let mut from = String::from(rows);
        if node || run {
            from.push_str(&format!(" JOIN jobs j ON j.id = {alias}.job_id"));
        }
        if node {
            from.push_str(" JOIN nodes n ON n.id = j.node_id");
        }
        if run {
            from.push_str(" JOIN runs u ON u.id = j.run_id");
        }
        Scope {
            from,
            conds: Vec::new(),
            args: Vec::new(),
        }
    }

    /// `f`'s node and run conditions (on the aliases [`Scope::joining`] makes).
    fn provenance(&mut self, f: &Filter) {
        if let Some(n) = &f.node {
            self.cond("n.name = ?", Value::Text(n.clone()));
        }
        if let Some(r) = &f.run {
            self.cond("u.key = ?", Value::Text(r.clone()));
        }
    }

    /// `f`'s class and vendor conditions on tunnels `t` whose ingress's vendor is `vendor`.
    fn tunnel_conds(&mut self, f: &Filter, vendor: &str) {
        if let Some(c) = &f.class {
            self.cond("t.class = ?", Value::Text(c.clone()));
        }
        if let Some(v) = &f.vendor {
            self.cond(
                &format!("coalesce({vendor}, 'unknown') = ?"),
                Value::Text(v.clone()),
            );
        }
    }

    pub fn cond(&mut self, sql: &str, v: Value) {
        self.conds.push(sql.into());
        self.args.push(v);
    }

    /// `FROM ... WHERE ...` (positional `?` parameters in [`Scope::args`] order).
    pub fn sql(&self) -> String {
        format!("FROM {} WHERE {}", self.from, self.conds.join(" AND "))
    }
}

impl Store {
    /// Runs `sql` with `args`, one value per row from `row`.
    pub(crate) fn rows<T>(
        &self,
        sql: &str,
        args: &[Value],
        row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let what = || format!("{}: querying", self.path);
        let mut st = self.conn.prepare(sql).map_err(StoreError::sql(what()))?;
        let rows = st
            .query_map(rusqlite::params_from_iter(args), row)
            .map_err(StoreError::sql(what()))?;
        rows.collect::<rusqlite::Result<Vec<T>>>()
            .map_err(StoreError::sql(what()))
    }
}

/// A run (campaign).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRow {
    pub key: String,
    pub name: String,
    pub source: String,
    pub command: Option<String>,
    pub created_us: i64,
    pub jobs: u64,
    pub nodes: u64,
    pub traces: u64,
    pub pings: u64,
    /// First and last record start, microseconds since the Unix epoch.
    pub first_us: Option<i64>,
    pub last_us: Option<i64>,
}

/// A vantage point and its provenance (the latest its jobs gave).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeRow {
    #[serde(flatten)]
    pub node: NodeInfo,
    pub first_seen_us: i64,
    pub last_seen_us: i64,
    pub jobs: u64,
}

/// A trace, with its path: the reply address at each TTL from its first (`*`: none).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceRow {
    pub id: i64,
    pub run: String,
    pub node: String,
    /// `initial`, `reveal` or none (a plain trace).
    pub role: Option<String>,
    pub method: String,
    pub src: String,
    pub dst: String,
    pub start_us: i64,
    pub stop_reason: String,
    pub firsthop: u8,
    pub path: Vec<String>,
}

/// A tunnel as one trace crossed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TunnelRow {
    pub trace: i64,
    pub run: String,
    pub node: String,
    pub dst: String,
    pub start_us: i64,
    pub class: String,
    pub evidence: Option<String>,
    pub trigger: Option<String>,
    pub ingress: Option<String>,
    pub egress: Option<String>,
    /// LSRs in path order.
    pub lsrs: Vec<LsrRow>,
    pub hidden_estimate: Option<u8>,
    pub revelation: Option<String>,
    /// The ingress's vendor (its signature in the same job) and AS.
    pub ingress_vendor: String,
    pub ingress_as: Option<String>,
    pub egress_as: Option<String>,
}

/// One LSR of a tunnel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LsrRow {
    /// `None`: a slot that did not answer.
    pub addr: Option<String>,
    /// Revealed by a revelation trace (DPR, BRPR, buddy), not seen in the trace itself.
    pub revealed: bool,
    pub asn: Option<String>,
}

impl Store {
    /// The tenant's runs, newest first.
    pub fn runs(&self, tenant: &Tenant) -> Result<Vec<RunRow>> {
        self.rows(
            "SELECT u.key, u.name, u.source, u.command, u.created_us,
                (SELECT count(*) FROM jobs j WHERE j.run_id = u.id),
                (SELECT count(DISTINCT j.node_id) FROM jobs j WHERE j.run_id = u.id),
                (SELECT count(*) FROM traces r JOIN jobs j ON j.id = r.job_id WHERE j.run_id = u.id),
                (SELECT count(*) FROM pings p JOIN jobs j ON j.id = p.job_id WHERE j.run_id = u.id),
                (SELECT min(r.start_us) FROM traces r JOIN jobs j ON j.id = r.job_id WHERE j.run_id = u.id),
                (SELECT max(r.start_us) FROM traces r JOIN jobs j ON j.id = r.job_id WHERE j.run_id = u.id)
             FROM runs u WHERE u.tenant = ?1 ORDER BY u.created_us DESC, u.id DESC",
            &[Value::Text(tenant.as_str().into())],
            |r| {
                Ok(RunRow {
                    key: r.get(0)?,
                    name: r.get(1)?,
                    source: r.get(2)?,
                    command: r.get(3)?,
                    created_us: r.get(4)?,
                    jobs: r.get(5)?,
                    nodes: r.get(6)?,
                    traces: r.get(7)?,
                    pings: r.get(8)?,
                    first_us: r.get(9)?,
                    last_us: r.get(10)?,
                })
            },
        )
    }

    /// The tenant's vantage points, by name.
    pub fn nodes(&self, tenant: &Tenant) -> Result<Vec<NodeRow>> {
        self.rows(
            "SELECT n.name, n.location, n.public_addr, n.image_sha256, n.clock_offset_ms,
                n.clock_sync, n.first_seen_us, n.last_seen_us,
                (SELECT count(*) FROM jobs j WHERE j.node_id = n.id)
             FROM nodes n WHERE n.tenant = ?1 ORDER BY n.name",
            &[Value::Text(tenant.as_str().into())],
            |r| {
                Ok(NodeRow {
                    node: NodeInfo {
                        name: r.get(0)?,
                        location: r.get(1)?,
                        public_addr: r.get(2)?,
                        image_sha256: r.get(3)?,
                        clock_offset_ms: r.get(4)?,
                        clock_sync: r.get(5)?,
                    },
                    first_seen_us: r.get(6)?,
                    last_seen_us: r.get(7)?,
                    jobs: r.get(8)?,
                })
            },
        )
    }

    /// The traces `f` selects (its class and vendor aside), oldest first.
    pub fn traces(&self, tenant: &Tenant, f: &Filter) -> Result<Vec<TraceRow>> {
        self.traces_in(&Scope::traces(tenant, f)?, None)
    }

    /// The first `limit` traces `f` selects (a page of them), oldest first.
    pub fn traces_limited(&self, tenant: &Tenant, f: &Filter, limit: u32) -> Result<Vec<TraceRow>> {
        self.traces_in(&Scope::traces(tenant, f)?, Some(limit))
    }

    /// The traces of scope `s`, oldest first (the first `limit`).
    pub(crate) fn traces_in(&self, s: &Scope, limit: Option<u32>) -> Result<Vec<TraceRow>> {
        let sql = format!(
            "SELECT r.id, u.key, n.name, r.role, r.method, r.src, r.dst, r.start_us,
                r.stop_reason, r.firsthop, {HOPS_TEXT} {} ORDER BY r.start_us, r.id {}",
            s.sql(),
            limit.map_or(String::new(), |l| format!("LIMIT {l}"))
        );
        self.rows(&sql, &s.args, |r| {
            let firsthop: u8 = r.get(9)?;
            Ok(TraceRow {
                id: r.get(0)?,
                run: r.get(1)?,
                node: r.get(2)?,
                role: r.get(3)?,
                method: r.get(4)?,
                src: r.get(5)?,
                dst: r.get(6)?,
                start_us: r.get(7)?,
                stop_reason: r.get(8)?,
                firsthop,
                path: path_of(firsthop, r.get(10)?),
            })
        })
    }

    /// Every tunnel of the traces `f` selects, one row per trace that crossed it.
    pub fn tunnels(&self, tenant: &Tenant, f: &Filter) -> Result<Vec<TunnelRow>> {
        self.tunnels_in(&Scope::tunnels(tenant, f)?)
    }

    /// The tunnels of scope `s` (a [`Scope::tunnels`]), one row per trace that crossed it.
    pub(crate) fn tunnels_in(&self, s: &Scope) -> Result<Vec<TunnelRow>> {
        let sql = format!(
            "SELECT r.id, u.key, n.name, r.dst, r.start_us, t.class, t.evidence, t.trigger,
                t.ingress, t.egress,
                (SELECT group_concat(coalesce(l.addr, '*') || ' ' || l.revealed || ' ' ||
                     coalesce(a.asn, '-'), ',' ORDER BY l.pos)
                 FROM lsrs l LEFT JOIN addresses a ON a.addr = l.addr WHERE l.tunnel_id = t.id),
                t.hidden_estimate, t.revelation, coalesce(s.vendor, 'unknown'),
                (SELECT asn FROM addresses a WHERE a.addr = t.ingress),
                (SELECT asn FROM addresses a WHERE a.addr = t.egress)
             {} ORDER BY r.start_us, r.id, t.i",
            s.sql()
        );
        self.rows(&sql, &s.args, |r| {
            let lsrs: Option<String> = r.get(10)?;
            Ok(TunnelRow {
                trace: r.get(0)?,
                run: r.get(1)?,
                node: r.get(2)?,
                dst: r.get(3)?,
                start_us: r.get(4)?,
                class: r.get(5)?,
                evidence: r.get(6)?,
                trigger: r.get(7)?,
                ingress: r.get(8)?,
                egress: r.get(9)?,
                lsrs: lsrs
                    .iter()
                    .flat_map(|l| l.split(','))
                    .map(lsr_row)
                    .collect(),
                hidden_estimate: r.get(11)?,
                revelation: r.get(12)?,
                ingress_vendor: r.get(13)?,
                ingress_as: r.get(14)?,
                egress_as: r.get(15)?,
            })
        })
    }
}

/// An LSR as `addr revealed asn` (`*` and `-` for none).
fn lsr_row(text: &str) -> LsrRow {
    let mut w = text.split(' ');
    let mut next = || {
        w.next()
            .filter(|v| *v != "*" && *v != "-")
            .map(String::from)
    };
    LsrRow {
        addr: next(),
        revealed: next().as_deref() == Some("1"),
        asn: next(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_read_from_json_and_check_their_words() {
        let f: Filter =
            serde_json::from_str(r#"{"prefix":"192.0.2.0/24","class":"opaque"}"#).unwrap();
        assert_eq!(f.prefix, Some("192.0.2.0/24".parse().unwrap()));
        f.check().unwrap();
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"target":null,"prefix":"192.0.2.0/24","class":"opaque","vendor":null,"node":null,"run":null,"since_us":null,"until_us":null}"#
        );
        assert!(serde_json::from_str::<Filter>(r#"{"prefix":"x"}"#).is_err());
        assert!(serde_json::from_str::<Filter>(r#"{"tenant":"b"}"#).is_err());
        let bad = Filter {
            class: Some("visible".into()),
            ..Filter::default()
        };
        assert!(bad
            .check()
            .unwrap_err()
            .to_string()
            .contains("invisible-php"));
        let bad = Filter {
            vendor: Some("huawei".into()),
            ..Filter::default()
        };
        assert!(bad.check().unwrap_err().to_string().contains("junos-e"));
    }
}
