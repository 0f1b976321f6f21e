//! What the pages show, each a serialisable value given as JSON under `/api/...` or as the
//! page [`crate::html`] makes of it (the same value, so a page never shows what its JSON
//! lacks), and the live events the pages receive.

use std::collections::BTreeMap;

use serde::Serialize;
use vtnt_fleet::JobSummary;
use vtnt_store::query::{Filter, TraceRow};
use vtnt_store::questions::{LsrCount, TunnelCount};
use vtnt_store::Tenant;

/// The fleet page: the tenant's nodes (from the fleet, when the server follows one), its
/// newest jobs with their outcomes and times, and what the store holds.
#[derive(Debug, Serialize)]
pub struct FleetView {
    pub tenant: Tenant,
    pub counts: BTreeMap<String, u64>,
    /// `None`: this server follows no fleet.
    pub nodes: Option<Vec<vtnt_fleet::controller::NodeView>>,
    pub nodes_error: Option<String>,
    pub jobs: Vec<vtnt_store::views::JobRow>,
}

/// A list of traces, the first [`TRACES_SHOWN`] of those a filter selects.
#[derive(Debug, Serialize)]
pub struct TracesView {
    pub filter: Filter,
    pub limit: u32,
    pub traces: Vec<TraceRow>,
}

/// The researchers' questions, by the name of their page.
pub const QUESTIONS: &[(&str, &str)] = &[
    ("tunnels-per-as", "Tunnels per AS of their ingress"),
    ("tunnels-per-vendor", "Tunnels per vendor of their ingress"),
    (
        "classes-per-vantage-point",
        "Tunnel classes per vantage point",
    ),
    ("revealed-lsrs-per-as", "Revealed LSRs per AS"),
];

/// One question's answer.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Answer {
    Tunnels(Vec<TunnelCount>),
    Lsrs(Vec<LsrCount>),
}

#[derive(Debug, Serialize)]
pub struct QuestionView {
    pub question: String,
    pub filter: Filter,
    pub answer: Answer,
}

#[derive(Debug, Serialize)]
pub struct Listing {
    /// Paths relative to the directory, sorted.
    pub files: Vec<String>,
}

/// One live event of a tenant.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum LiveEvent {
    /// A job's summary, as its agent sent it.
    Job(JobSummary),
    /// A result record as it arrived.
    Result {
        job: String,
        node: Option<String>,
        /// `trace` or `ping` (scamper's `type`).
        record: Option<String>,
        dst: Option<String>,
    },
    /// A node's heartbeat as it arrived (age 0), as the fleet page's nodes table shows
    /// it; the page turns it down once `deadline_ms` pass without another.
    Node(vtnt_fleet::controller::NodeView),
    /// The store filed a batch: its running totals.
    Stored {
        messages: u64,
        traces: u64,
        pings: u64,
    },
}

impl LiveEvent {
    pub fn name(&self) -> &'static str {
        match self {
            LiveEvent::Job(_) => "job",
            LiveEvent::Result { .. } => "result",
            LiveEvent::Stored { .. } => "stored",
            LiveEvent::Node(_) => "node",
        }
    }
}
