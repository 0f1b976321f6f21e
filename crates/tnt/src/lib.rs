//! TNT (Trace the Naughty Tunnels) on top of the sans-IO engine: MPLS tunnel
//! classification (explicit, implicit, opaque, invisible PHP/UHP), revelation of hidden
//! LSRs (DPR, BRPR, buddy) and router vendor fingerprints from `<te, er>` TTL signatures.
//!
//! `no_std + alloc`, no unsafe: the unikernel runs exactly this code.
//!
//! Layers, each usable alone:
//! - [`analysis`](initial_ttl): pure per-hop numbers (iTTL, FRPLA, RTLA, u-turn,
//!   signatures, vendors, thresholds);
//! - [`classify()`]: one path's visible tunnels and invisible-tunnel candidates;
//! - [`Revelation`]: the DPR/BRPR/buddy state machine of one candidate;
//! - [`Tnt`]: the sans-IO campaign (measurements out, records in, [`TntResult`]s out);
//! - [`TntRunner`]: [`Tnt`] and the engine together, driven like the engine;
//! - [`dump`]: the `sc_tnt`-like text view.
//!
//! ```
//! use vtnt_tnt::{Tnt, TntConfig};
//! let mut tnt = Tnt::new(TntConfig::default()).unwrap();
//! tnt.add_target("192.0.2.9".parse().unwrap());
//! let (_tag, measurement) = tnt.poll_measurement().unwrap();
//! assert!(matches!(measurement, vtnt_engine::Measurement::Trace(_)));
//! ```
#![no_std]
#![forbid(unsafe_code)]
extern crate alloc;

mod analysis;
mod classify;
mod maps;
mod orchestrator;
mod output;
mod path;
mod reveal;
mod runner;
#[cfg(test)]
mod testutil;
mod text;

pub use analysis::{
    frpla, initial_ttl, return_length, rtla, uturn, ConfigError, Signature, Thresholds, Vendor,
};
pub use classify::{
    classify, hop_metrics, Candidate, Classification, ClassifyOptions, Evidence, HopMetrics, Role,
    Trigger, TunnelClass, VisibleTunnel,
};
pub use orchestrator::{MeasurementTag, Tnt, TntConfig};
pub use output::{
    annotate, build_result, Budget, HopAnnotation, Membership, PathEntry, PingPurpose, RecordRole,
    Revealed, RevelationInfo, RoleRecord, Summary, Tested, TntError, TntResult, TraceAnnotation,
    Tunnel, Unrevealed,
};
pub use path::{ping_reply_ttl, Path, PathHop, ReplyKind};
pub use reveal::{
    buddies, read_revelation, RevealFailure, RevealMethod, RevealStatus, RevealedHop, Revelation,
    Subject, TraceReading, TraceRequest,
};
pub use runner::TntRunner;
pub use text::{dump, status_name};
