//! The results store's answers against the lab's ground truth: what its acceptance tests
//! compare (a campaign in process, `crates/bench/tests/store_truth.rs`; one through the
//! real lab and `vtnt tnt`, `crates/cli/tests/store_lab.rs`). The truth is taken as
//! `vtnt lab truth --json` prints it, so both sides read one form.
//!
//! Every question is answered twice, by the store (its typed queries) and from the truth
//! (its tunnels per destination, router names, signatures), and the answers must be
//! equal: distinct tunnels per class, per vendor of the ingress (the family TNT's table
//! gives the truth's signature of the ingress router), per AS of the ingress, and
//! revealed LSRs per AS (the LSRs of tunnels of the classes that hide them, where the
//! truth says a revelation can show them). The ASes come from [`pfx2as_for`]: every
//! router's addresses as /32s of an AS of four (by the router's place in the truth),
//! inside a /10 of a fifth AS, so the longest-prefix match is exercised. The store's
//! tunnels, mapped from addresses to routers, must also be the truth's tunnels.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use vtnt_store::query::Filter;
use vtnt_store::{Store, Tenant};
use vtnt_tnt::Signature;

/// A router's AS in [`pfx2as_for`].
fn router_as(index: usize) -> String {
    (64_500 + index % 4).to_string()
}

/// The AS of every other address of 100.64.0.0/10 in [`pfx2as_for`].
const COVER_AS: &str = "64999";

/// A prefix-to-AS file for `truth` (see the module's text).
pub fn pfx2as_for(truth: &Value) -> String {
    let mut out = format!("100.64.0.0\t10\t{COVER_AS}\n");
    for (i, r) in routers(truth).iter().enumerate() {
        for a in r["addresses"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "{}\t32\t{}\n",
                a.as_str().unwrap_or(""),
                router_as(i)
            ));
        }
    }
    out
}

fn routers(truth: &Value) -> Vec<Value> {
    truth["routers"].as_array().cloned().unwrap_or_default()
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|x| x.as_str().unwrap_or("").to_string())
        .collect()
}

/// A tunnel by routers: class, ingress, egress, LSRs.
type Key = (String, String, String, Vec<String>);

/// Differences between the store's answers for `tenant` and the truth's; empty when
/// every answer is the truth's.
pub fn compare(store: &Store, tenant: &Tenant, truth: &Value) -> vtnt_store::Result<Vec<String>> {
    let routers = routers(truth);
    let mut router_of: BTreeMap<String, String> = BTreeMap::new();
    let mut as_of: BTreeMap<String, String> = BTreeMap::new();
    let mut vendor_of: BTreeMap<String, String> = BTreeMap::new();
    for (i, r) in routers.iter().enumerate() {
        let name = r["name"].as_str().unwrap_or("").to_string();
        for a in strs(&r["addresses"]) {
            router_of.insert(a, name.clone());
        }
        as_of.insert(name.clone(), router_as(i));
        let sig = |k: usize| r["signature"][k].as_u64().map(|v| v as u8);
        let family = Signature {
            te: sig(0),
            er: sig(1),
        }
        .vendor()
        .name();
        vendor_of.insert(name, family.to_string());
    }
    // the truth's tunnels and what it says of them
    let mut want: BTreeSet<Key> = BTreeSet::new();
    let mut revealable: BTreeSet<String> = BTreeSet::new();
    for d in truth["destinations"].as_array().into_iter().flatten() {
        for t in d["tunnels"].as_array().into_iter().flatten() {
            let class = t["class"].as_str().unwrap_or("").to_string();
            let key = (
                class.clone(),
                t["ingress_router"].as_str().unwrap_or("").to_string(),
                t["egress_router"].as_str().unwrap_or("").to_string(),
                strs(&t["lsr_routers"]),
            );
            let hides = matches!(class.as_str(), "opaque" | "invisible-php" | "invisible-uhp");
            if hides && matches!(t["revelation"].as_str(), Some("dpr" | "brpr")) {
                revealable.extend(key.3.iter().cloned());
            }
            want.insert(key);
        }
    }
    let mut diffs = Vec::new();
    // the store's tunnels, by router
    let router = |a: &Option<String>| {
        a.as_ref()
            .map(|a| router_of.get(a).cloned().unwrap_or_else(|| a.clone()))
            .unwrap_or_else(|| "?".into())
    };
    let rows = store.tunnels(tenant, &Filter::default())?;
    let got: BTreeSet<Key> = rows
        .iter()
        .map(|r| {
            (
                r.class.clone(),
                router(&r.ingress),
                router(&r.egress),
                r.lsrs.iter().map(|l| router(&l.addr)).collect(),
            )
        })
        .collect();
    for k in want.difference(&got) {
        diffs.push(format!("tunnel of the truth not in the store: {k:?}"));
    }
    for k in got.difference(&want) {
        diffs.push(format!("tunnel in the store not in the truth: {k:?}"));
    }
    // the questions, as the truth answers them
    let mut per_class: BTreeMap<String, u64> = BTreeMap::new();
    let mut per_vendor: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut per_as: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for (class, ingress, _, _) in &want {
        *per_class.entry(class.clone()).or_default() += 1;
        let v = vendor_of
            .get(ingress)
            .cloned()
            .unwrap_or_else(|| "unknown".into());
        *per_vendor
            .entry(v)
            .or_default()
            .entry(class.clone())
            .or_default() += 1;
        let a = as_of
            .get(ingress)
            .cloned()
            .unwrap_or_else(|| COVER_AS.into());
        *per_as
            .entry(a)
            .or_default()
            .entry(class.clone())
            .or_default() += 1;
    }
    let mut lsrs_per_as: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in &revealable {
        let a = as_of.get(r).cloned().unwrap_or_else(|| COVER_AS.into());
        lsrs_per_as.entry(a).or_default().insert(r.clone());
    }
    let all = Filter::default();
    let answers = |groups: Vec<vtnt_store::questions::TunnelCount>| {
        groups
            .into_iter()
            .map(|g| {
                let classes = g.classes.into_iter().filter(|(_, n)| *n > 0).collect();
                (g.group.unwrap_or_else(|| "(none)".into()), classes)
            })
            .collect::<BTreeMap<String, BTreeMap<String, u64>>>()
    };
    let by_vp = answers(store.classes_per_vantage_point(tenant, &all)?);
    let mut store_per_class: BTreeMap<String, u64> = BTreeMap::new();
    for classes in by_vp.values() {
        for (c, n) in classes {
            *store_per_class.entry(c.clone()).or_default() += n;
        }
    }
    let mut same = |what: &str, store: String, truth: String| {
        if store != truth {
            diffs.push(format!("{what}: the store says {store}, the truth {truth}"));
        }
    };
    same(
        "tunnels per class",
        format!("{store_per_class:?}"),
        format!("{per_class:?}"),
    );
    same(
        "tunnels per vendor",
        format!("{:?}", answers(store.tunnels_per_vendor(tenant, &all)?)),
        format!("{per_vendor:?}"),
    );
    same(
        "tunnels per AS",
        format!("{:?}", answers(store.tunnels_per_as(tenant, &all)?)),
        format!("{per_as:?}"),
    );
    let store_lsrs: BTreeMap<String, u64> = store
        .revealed_lsrs_per_as(tenant, &all)?
        .into_iter()
        .map(|l| (l.asn.unwrap_or_else(|| "(none)".into()), l.lsrs))
        .collect();
    let truth_lsrs: BTreeMap<String, u64> = lsrs_per_as
        .iter()
        .map(|(a, rs)| (a.clone(), rs.len() as u64))
        .collect();
    same(
        "revealed LSRs per AS",
        format!("{store_lsrs:?}"),
        format!("{truth_lsrs:?}"),
    );
    // revealed LSRs by router, too: the count could hide one router for another
    let revealed: BTreeSet<String> = rows
        .iter()
        .flat_map(|r| &r.lsrs)
        .filter(|l| l.revealed)
        .map(|l| router(&l.addr))
        .collect();
    same(
        "revealed LSR routers",
        format!("{revealed:?}"),
        format!("{revealable:?}"),
    );
    Ok(diffs)
}
