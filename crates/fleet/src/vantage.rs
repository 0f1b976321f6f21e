//! Vantage points: the fleet's nodes as their last heartbeats show them ([`nodes`],
//! [`NodeView`]), and the selection of the locations a job or a measurement's cycle runs
//! at ([`Selection`], [`select`]), which `vtnt fleet submit` and the measurements share.

use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use crate::error::ensure;
use crate::proto::{NodeInfo, NodeState};
use crate::{Fleet, ANY};

/// A node as `status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct NodeView {
    #[serde(flatten)]
    pub info: NodeInfo,
    /// Milliseconds since its last heartbeat reached the broker (broker's clock).
    pub age_ms: u64,
    /// Its last heartbeat is older than its deadline.
    pub down: bool,
    /// What to show: `up`, `draining`, `stopped` (its own word) or `down` (late).
    pub status: &'static str,
}

impl NodeView {
    /// The node of heartbeat `info`, `age_ms` after it reached the broker.
    pub fn new(info: NodeInfo, age_ms: u64) -> NodeView {
        let down = age_ms > info.deadline_ms;
        let status = match (down, info.state) {
            (_, NodeState::Stopped) => "stopped",
            (true, _) => "down",
            (false, NodeState::Up) => "up",
            (false, NodeState::Draining) => "draining",
        };
        NodeView {
            info,
            age_ms,
            down,
            status,
        }
    }
}

/// Every node that ever heartbeated (within the stream's hour), by name; none before the
/// first agent came.
pub async fn nodes(fleet: &Fleet) -> crate::Result<Vec<NodeView>> {
    let Some(stream) = crate::existing(&fleet.shared, crate::NODES_STREAM).await? else {
        return Ok(Vec::new());
    };
    let mut subjects = stream.info_with_subjects(crate::HEARTBEATS).await?;
    let mut names = Vec::new();
    while let Some((s, _)) = subjects.try_next().await? {
        names.push(s);
    }
    let now_ns = crate::now_us() as i128 * 1000;
    let mut out = Vec::new();
    for s in names {
        // a node's subject listed a moment ago may have aged out since
        let Ok(m) = stream.get_last_raw_message_by_subject(&s).await else {
            continue;
        };
        let Ok(info) = serde_json::from_slice::<NodeInfo>(&m.payload) else {
            continue;
        };
        let age_ms = ((now_ns - m.time.unix_timestamp_nanos()).max(0) / 1_000_000) as u64;
        out.push(NodeView::new(info, age_ms));
    }
    out.sort_by(|a, b| a.info.node.cmp(&b.info.node));
    Ok(out)
}

/// Which vantage points run each cycle: the locations (or `any`; none named: any) whose
/// up nodes offering the runtime all have every tag of `tags`, an AS of `asns` and a
/// country of `countries` (each when given), so that whichever node of the location
/// takes the job is one selected; `count` of them (all when `None`), drawn anew at each
/// cycle ([`select`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selection {
    pub locations: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asns: Vec<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub countries: Vec<String>,
    pub count: Option<usize>,
}

impl Selection {
    /// Checks its tags and countries (subject tokens, ISO 3166 alpha-2).
    pub fn check(&self) -> crate::Result<()> {
        for t in &self.tags {
            crate::check_token("--tag", t)?;
        }
        for c in &self.countries {
            crate::check_country(c)?;
        }
        Ok(())
    }

    /// Whether node `n` is one this selection takes (its runtime and state aside).
    fn takes(&self, n: &NodeInfo) -> bool {
        (self.locations.is_empty() || self.locations.iter().any(|l| l == ANY || *l == n.location))
            && self.tags.iter().all(|t| n.tags.contains(t))
            && (self.asns.is_empty() || n.asn.is_some_and(|a| self.asns.contains(&a)))
            && (self.countries.is_empty()
                || n.country
                    .as_ref()
                    .is_some_and(|c| self.countries.contains(c)))
    }

    /// The selection in words, for errors.
    fn describe(&self) -> String {
        let mut what = vec![format!(
            "locations {}",
            if self.locations.is_empty() {
                ANY.to_string()
            } else {
                self.locations.join(",")
            }
        )];
        if !self.tags.is_empty() {
            what.push(format!("tags {}", self.tags.join(",")));
        }
        if !self.asns.is_empty() {
            let asns: Vec<String> = self.asns.iter().map(|a| format!("AS{a}")).collect();
            what.push(asns.join(","));
        }
        if !self.countries.is_empty() {
            what.push(format!("countries {}", self.countries.join(",")));
        }
        what.join(", ")
    }
}

/// The vantage points (locations) that `s` selects among `nodes` for `runtime`: all that
/// match, sorted, or when fewer are wanted, `count` of them drawn from `seed` (a shuffle
/// of the matches, [`Definition::seed`]); an error saying what there is when fewer than
/// asked (or none) match.
pub fn select(
    nodes: &[NodeView],
    runtime: &str,
    s: &Selection,
    seed: u64,
) -> crate::Result<Vec<String>> {
    let candidates: Vec<&NodeView> = nodes
        .iter()
        .filter(|n| n.status == "up" && n.info.runtimes.iter().any(|r| r == runtime))
        .collect();
    let mut found: Vec<String> = candidates
        .iter()
        .filter(|n| s.takes(&n.info))
        .map(|n| n.info.location.clone())
        .collect();
    found.sort();
    found.dedup();
    // a location of which another node would take the job and is not selected: out
    let mixed: Vec<String> = found
        .iter()
        .filter(|l| {
            candidates
                .iter()
                .any(|n| n.info.location == **l && !s.takes(&n.info))
        })
        .cloned()
        .collect();
    found.retain(|l| !mixed.contains(l));
    let want = s.count.unwrap_or(found.len()).max(1);
    ensure!(
        found.len() >= want,
        NoNode,
        "the selection ({}, runtime `{runtime}`, {}) matches {} vantage point(s) with an up node{}{}",
        s.describe(),
        s.count.map_or("all".to_string(), |c| format!("{c} wanted")),
        found.len(),
        if found.is_empty() { String::new() } else { format!(": {}", found.join(", ")) },
        if mixed.is_empty() {
            String::new()
        } else {
            format!(
                " (left out, since other nodes there would take its jobs: {})",
                mixed.join(", ")
            )
        }
    );
    if want < found.len() {
        vtnt_rng::Rng::new(seed).shuffle(&mut found);
        found.truncate(want);
    }
    Ok(found)
}
