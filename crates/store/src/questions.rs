//! The questions researchers ask of a TNT campaign, each one SQL query over one tenant's
//! rows ([`crate::query::Scope`]) with a typed answer:
//!
//! - [`Store::tunnels_per_as`]: tunnels per AS of their ingress;
//! - [`Store::tunnels_per_vendor`]: tunnels per vendor of their ingress (its TTL
//!   signature in the same job);
//! - [`Store::classes_per_vantage_point`]: tunnel classes per vantage point;
//! - [`Store::revealed_lsrs_per_as`]: LSRs TNT revealed (DPR, BRPR, buddy), per AS;
//! - [`crate::diff`]: what changed between two campaigns.
//!
//! A tunnel is counted once per distinct (class, ingress, egress, LSRs), however many
//! traces crossed it (its *observations*), as TNT's own summary counts them. Where one
//! tunnel falls in two groups (its ingress fingerprinted differently by two jobs), each
//! group counts it.

use rusqlite::types::Value;
use serde::Serialize;
use std::collections::BTreeMap;

use crate::error::Result;
use crate::query::{classes, Filter, Joins, Scope};
use crate::{Store, Tenant};

/// Tunnels of one group (an AS, a vendor, a vantage point).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TunnelCount {
    /// The group: an AS (its origin as the prefix-to-AS file writes it), a vendor, a
    /// vantage point; `None`: no AS known.
    pub group: Option<String>,
    /// Distinct tunnels.
    pub tunnels: u64,
    /// Traces that crossed them.
    pub observations: u64,
    /// Distinct tunnels per class (every class listed).
    pub classes: BTreeMap<String, u64>,
}

/// Revealed LSRs of one AS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LsrCount {
    /// The AS of the LSRs' addresses (`None`: no AS known).
    pub asn: Option<String>,
    /// Distinct revealed LSR addresses.
    pub lsrs: u64,
    /// Distinct tunnels they were revealed in.
    pub tunnels: u64,
}

/// SQL: a tunnel's identity.
const KEY: &str = "(t.class || '|' || coalesce(t.ingress, '*') || '|' || coalesce(t.egress, '*') \
                   || '|' || t.lsrs)";

/// What a tunnel question groups by, and the SQL of it over the tunnels' scope (raw rows
/// or summary rows, [`Scope::summary`]).
#[derive(Clone, Copy)]
enum Group {
    /// The AS of the ingress.
    As,
    /// The ingress's vendor in the job.
    Vendor,
    /// The vantage point.
    Node,
    /// The run.
    Run,
    /// The tenant (one group).
    Tenant,
}

impl Group {
    fn sql(self, summary: bool) -> &'static str {
        match (self, summary) {
            (Group::As, _) => "(SELECT a.asn FROM addresses a WHERE a.addr = t.ingress)",
            (Group::Vendor, true) => "coalesce(t.vendor, 'unknown')",
            (Group::Vendor, false) => "coalesce(s.vendor, 'unknown')",
            (Group::Node, _) => "n.name",
            (Group::Run, _) => "u.key",
            (Group::Tenant, true) => "t.tenant",
            (Group::Tenant, false) => "r.tenant",
        }
    }

    fn joins(self) -> Joins {
        match self {
            Group::Node => Joins::Node,
            Group::Run => Joins::Run,
            _ => Joins::None,
        }
    }
}

impl Store {
    /// Tunnels grouped by `group`, largest group first, from the summary rows where the
    /// filter allows (else from the tunnels). Each distinct tunnel of a group is one row
    /// of the inner grouping (its observations added up there), so the outer one only
    /// adds up: one sort instead of a distinct set per class.
    fn tunnel_counts(&self, tenant: &Tenant, f: &Filter, group: Group) -> Result<Vec<TunnelCount>> {
        let (s, obs, g) = match Scope::summary("tunnel_groups", tenant, f, group.joins())? {
            Some(s) => (s, "sum(t.observations)", group.sql(true)),
            None => (
                Scope::tunnels_joining(tenant, f, group.joins())?,
                "count(*)",
                group.sql(false),
            ),
        };
        let per_class: Vec<String> = classes().map(|c| format!("sum(class = '{c}')")).collect();
        let sql = format!(
            "SELECT g, count(*), sum(obs), {} FROM \
             (SELECT {g} AS g, t.class AS class, {obs} AS obs {} \
              GROUP BY g, t.class, t.ingress, t.egress, t.lsrs) \
             GROUP BY g ORDER BY 2 DESC, g",
            per_class.join(", "),
            s.sql()
        );
        self.rows(&sql, &s.args, |r| {
            let mut counts = BTreeMap::new();
            for (i, c) in classes().enumerate() {
                counts.insert(c.to_string(), r.get(3 + i)?);
            }
            Ok(TunnelCount {
                group: r.get(0)?,
                tunnels: r.get(1)?,
                observations: r.get(2)?,
                classes: counts,
            })
        })
    }

    /// Tunnels per AS of their ingress (the AS of its address in the store's
    /// prefix-to-AS table; `None` when it has none, or the tunnel no ingress).
    pub fn tunnels_per_as(&self, tenant: &Tenant, f: &Filter) -> Result<Vec<TunnelCount>> {
        self.tunnel_counts(tenant, f, Group::As)
    }

    /// Tunnels per vendor of their ingress (TNT's fingerprint of it in the same job;
    /// `unknown` without one).
    pub fn tunnels_per_vendor(&self, tenant: &Tenant, f: &Filter) -> Result<Vec<TunnelCount>> {
        self.tunnel_counts(tenant, f, Group::Vendor)
    }

    /// Tunnel classes per vantage point (node).
    pub fn classes_per_vantage_point(
        &self,
        tenant: &Tenant,
        f: &Filter,
    ) -> Result<Vec<TunnelCount>> {
        self.tunnel_counts(tenant, f, Group::Node)
    }

    /// Tunnel classes of the tunnels `f` selects, all in one group (its run's key, the
    /// tenant's name for a filter of no run); `None` when it selects no tunnel.
    pub fn classes_per_run(&self, tenant: &Tenant, f: &Filter) -> Result<Option<TunnelCount>> {
        let group = match &f.run {
            Some(_) => Group::Run,
            None => Group::Tenant,
        };
        Ok(self.tunnel_counts(tenant, f, group)?.into_iter().next())
    }

    /// Revealed LSRs per AS of their address, most first, from the summary rows where
    /// the filter allows (else from the tunnels and their LSRs).
    pub fn revealed_lsrs_per_as(&self, tenant: &Tenant, f: &Filter) -> Result<Vec<LsrCount>> {
        let (mut s, lsr) = match Scope::summary("lsr_groups", tenant, f, Joins::None)? {
            Some(s) => (s, "t.addr"),
            None => {
                let mut s = Scope::tunnels_joining(tenant, f, Joins::None)?;
                s.from.push_str(
                    " JOIN lsrs l ON l.tunnel_id = t.id AND l.revealed AND l.addr IS NOT NULL",
                );
                (s, "l.addr")
            }
        };
        s.from
            .push_str(&format!(" LEFT JOIN addresses a ON a.addr = {lsr}"));
        let sql = format!(
            "SELECT a.asn AS g, count(DISTINCT {lsr}), count(DISTINCT {KEY}) {} \
             GROUP BY g ORDER BY 2 DESC, g",
            s.sql()
        );
        self.rows(&sql, &s.args, |r| {
            Ok(LsrCount {
                asn: r.get(0)?,
                lsrs: r.get(1)?,
                tunnels: r.get(2)?,
            })
        })
    }

    /// How many records of each kind the tenant has (for a summary line or page).
    pub fn counts(&self, tenant: &Tenant) -> Result<BTreeMap<String, u64>> {
        let t = [Value::Text(tenant.as_str().into())];
        let mut out = BTreeMap::new();
        for (name, sql) in [
            ("runs", "SELECT count(*) FROM runs WHERE tenant = ?1"),
            ("nodes", "SELECT count(*) FROM nodes WHERE tenant = ?1"),
            ("traces", "SELECT count(*) FROM traces WHERE tenant = ?1"),
            ("pings", "SELECT count(*) FROM pings WHERE tenant = ?1"),
            (
                "tunnels",
                "SELECT count(*) FROM tunnels t JOIN traces r ON r.id = t.trace_id \
                 WHERE r.tenant = ?1",
            ),
        ] {
            let n = self.rows(sql, &t, |r| r.get::<_, u64>(0))?;
            out.insert(name.to_string(), n.first().copied().unwrap_or(0));
        }
        Ok(out)
    }
}
