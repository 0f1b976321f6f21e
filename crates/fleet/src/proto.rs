//! The JSON messages of the fleet, as they travel over NATS: a job request (both modes),
//! the agent's reply to a discard-mode request, a node's heartbeat, a job's summary, and
//! the controller's record of one event (what `vtnt fleet submit --json` prints and what
//! `vtnt fleet replay` will write, one line per event). Result records themselves are the
//! scamper JSON lines, one message each, untouched.

use serde::{Deserialize, Serialize};

pub use crate::clock::ClockOffset;

/// A job placed on the fleet: what the controller sends and the agent runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    /// The job's id (a NATS subject token), unique per submission.
    pub id: String,
    pub tenant: String,
    /// The runtime's name (`native`, `runc`, ...: `Runtime::name`).
    pub runtime: String,
    /// Where it should run (`any`: anywhere).
    pub location: String,
    /// The job, as its canonical line (`vtnt_jobspec::encode`).
    pub line: String,
    /// A target list too long for the request (the line says `targets=@module`), stored
    /// apart in chunks (`crate::data_stream`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<TargetList>,
    /// When the controller submitted it, microseconds since the Unix epoch.
    pub submitted_us: u64,
    /// The measurement and cycle it belongs to (`vtnt fleet measurement`): every record
    /// and the summary it produces name them. `None`: a job submitted alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycle: Option<CycleOf>,
}

/// A measurement's cycle, which a job belongs to and its results name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CycleOf {
    pub measurement: String,
    pub cycle: u64,
}

/// Where a job's long target list is: `chunks` messages on
/// `vtnt.data.<tenant>.<job>.<0..chunks>`, `bytes` in all, one address a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetList {
    pub count: u64,
    pub bytes: u64,
    pub chunks: u32,
}

/// An agent's answer to a discard-mode request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployReply {
    pub accepted: bool,
    pub job: String,
    pub node: String,
    /// Not accepted for want of a free slot only (the agent filled its last one as the
    /// request came): another agent may take it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub busy: bool,
    /// Why not, when not accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What a node says of itself every heartbeat (the last message of
/// `vtnt.nodes.<node>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub node: String,
    pub location: String,
    pub slots: usize,
    pub busy: usize,
    pub runtimes: Vec<String>,
    /// Milliseconds between heartbeats.
    pub heartbeat_ms: u64,
    /// The node is down once its last heartbeat is older than this.
    pub deadline_ms: u64,
    pub state: NodeState,
    /// `yes`, `no` or `unknown` (timedatectl's NTPSynchronized).
    pub clock_sync: String,
    /// Jobs finished (any status) and failed (not `ok`) since the agent started.
    pub jobs_done: u64,
    pub jobs_failed: u64,
    /// Times the agent's connection to the broker came back after it was lost.
    #[serde(default)]
    pub reconnects: u64,
    /// What the node advertises for measurements' selection (`vtnt agent --tag`,
    /// `--asn`, `--country`); absent from an older agent's heartbeats.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asn: Option<u32>,
    /// ISO 3166 alpha-2, upper case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// The fleet's opt-out list as the agent applies it ([`crate::optout`]).
    #[serde(default)]
    pub opt_out: OptOutState,
    /// The broker's clock minus the node's, as its heartbeats measure it
    /// ([`crate::clock`]); absent before the first estimate and from an older agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockOffset>,
}

/// Which version of the opt-out list a node applies.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OptOutState {
    /// The list's revision (its stream sequence; 0: none was ever written).
    pub revision: u64,
    /// When the node applied it, µs since the epoch.
    pub applied_us: u64,
    /// Why the node could not read the last version (it takes no job meanwhile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeState {
    /// Taking jobs while it has a free slot.
    Up,
    /// SIGTERM: finishing its running jobs, taking no new ones.
    Draining,
    /// Exited cleanly.
    Stopped,
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobStatus {
    /// Ran and exited 0.
    Ok,
    /// Ran and failed (non-zero exit, killed, timed out).
    Failed,
    /// Refused before anything started: the probing policy, a runtime the node lacks, a
    /// line that does not decode.
    Refused,
    /// The runtime could not run it (image, deploy, network).
    Error,
}

impl JobStatus {
    /// Its name on the wire (`ok`, `failed`, ...).
    pub fn name(self) -> &'static str {
        match self {
            JobStatus::Ok => "ok",
            JobStatus::Failed => "failed",
            JobStatus::Refused => "refused",
            JobStatus::Error => "error",
        }
    }
}

/// The last message of a job's results: how it went and what it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSummary {
    pub job: String,
    pub tenant: String,
    pub node: String,
    pub location: String,
    pub runtime: String,
    pub status: JobStatus,
    /// What went wrong, when something did (stderr's tail for a failed run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The job's exit code, when it ran and exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// Result records stored before this summary, by every delivery (their places:
    /// [`crate::progress`]).
    pub records: u64,
    /// Targets whose records an earlier delivery stored, which this one did not probe
    /// again ([`crate::progress`]); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed: Option<u64>,
    /// Which delivery of the job this was (1: the first; more: redelivered).
    pub delivery: u64,
    /// How it came: from the work queue (`wait`) or as a core request (`discard`);
    /// absent from an older agent's summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    pub timings: Timings,
    /// The node's clock synchronisation when the job started (`yes`, `no`, `unknown`).
    pub clock_sync: String,
    /// The measurement and cycle the job belongs to, as its request said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycle: Option<CycleOf>,
    /// The provenance every record of the job carries too (docs/fleet.md, Provenance):
    /// the SHA-256 of the image the job ran, the address its probes leave from as the
    /// world sees it, the node's clock against the broker's as the job finished; each
    /// absent when unknown, and from an older agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<std::net::IpAddr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockOffset>,
}

/// A job's times, milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// Submission (controller's clock) to start on the agent (agent's clock).
    pub queue_ms: f64,
    /// Image fetch and install.
    pub deploy_ms: f64,
    /// Instance start to exit.
    pub exec_ms: f64,
    /// Everything else of the run: image lookup, image server, teardown.
    pub cleanup_ms: f64,
    /// Start on the agent to results ready.
    pub total_ms: f64,
}

/// The controller's record of one event (a submission).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The job id given to it (also for discarded events, so they can be named).
    pub job: String,
    pub mode: Mode,
    pub location: String,
    pub runtime: String,
    pub tenant: String,
    pub outcome: Outcome,
    /// When it was submitted, microseconds since the Unix epoch.
    pub submitted_us: u64,
    /// From submission to the decision (queued, accepted or discarded), microseconds.
    pub decision_us: u64,
}

/// What became of an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "outcome")]
pub enum Outcome {
    /// Wait mode: stored in the work queue.
    Queued,
    /// Discard mode: a node with a free slot took it.
    Accepted { node: String },
    /// Discard mode: no node had a free slot.
    Discarded { reason: String },
}

/// How the controller places a job when every slot is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Queue it (JetStream work queue) until a slot frees.
    Wait,
    /// Drop it (core request, "no responders").
    Discard,
}

impl Mode {
    /// Its word, as the command line and event files spell it.
    pub fn word(self) -> &'static str {
        match self {
            Mode::Wait => "wait",
            Mode::Discard => "discard",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "wait" => Ok(Mode::Wait),
            "discard" => Ok(Mode::Discard),
            _ => Err(format!("`{s}`: a mode is wait or discard")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_unknown_request_fields_are_refused() {
        let r = JobRequest {
            id: "j1".into(),
            tenant: "t".into(),
            runtime: "native".into(),
            location: "any".into(),
            line: "vtnt-job=1 kind=ping targets=192.0.2.1".into(),
            targets: None,
            submitted_us: 7,
            cycle: None,
        };
        let s = serde_json::to_string(&r).unwrap();
        assert!(!s.contains("cycle"), "{s}");
        assert_eq!(serde_json::from_str::<JobRequest>(&s).unwrap(), r);
        let of = JobRequest {
            cycle: Some(CycleOf {
                measurement: "m1".into(),
                cycle: 3,
            }),
            ..r.clone()
        };
        let s = serde_json::to_string(&of).unwrap();
        assert!(
            s.contains(r#""cycle":{"measurement":"m1","cycle":3}"#),
            "{s}"
        );
        assert_eq!(serde_json::from_str::<JobRequest>(&s).unwrap(), of);
        let bad = s.replace("\"tenant\"", "\"tennant\"");
        assert!(serde_json::from_str::<JobRequest>(&bad).is_err());
        let e = Event {
            job: "j1".into(),
            mode: Mode::Discard,
            location: "any".into(),
            runtime: "native".into(),
            tenant: "t".into(),
            outcome: Outcome::Discarded {
                reason: "no free agent".into(),
            },
            submitted_us: 1,
            decision_us: 2,
        };
        let s = serde_json::to_string(&e).unwrap();
        assert!(
            s.contains(r#""outcome":{"outcome":"discarded","reason":"no free agent"}"#),
            "{s}"
        );
        assert_eq!(serde_json::from_str::<Event>(&s).unwrap(), e);
        // a heartbeat of an agent from before tags, AS and country
        let old = r#"{"node":"n1","location":"fr","slots":1,"busy":0,"runtimes":["native"],"heartbeat_ms":1000,"deadline_ms":3000,"state":"up","clock_sync":"yes","jobs_done":0,"jobs_failed":0}"#;
        let info: NodeInfo = serde_json::from_str(old).unwrap();
        assert_eq!((info.tags.len(), info.asn, info.country), (0, None, None));
        assert_eq!("wait".parse::<Mode>(), Ok(Mode::Wait));
        assert!("later".parse::<Mode>().is_err());
    }
}
