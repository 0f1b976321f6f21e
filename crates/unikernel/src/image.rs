//! The unikernel's images as installed (`vtnt-artifacts`: `lib/vtnt` beside the
//! executable, `/usr/lib/vtnt`, ...; docs/install.md), each checked against its manifest's
//! SHA-256 before it is booted. Building them is `cargo xtask dist`'s job (crates/xtask),
//! never a run's.

use std::path::PathBuf;

pub use vtnt_artifacts::Artifact;

use crate::Error;

/// The stripped job image's budget, in bytes (docs/benchmarks.md, "Unikernel budgets"):
/// 256 KiB until 2026-11-26, 272 KiB since scamper's trace and ping options, TNT's full
/// record and the micro-benchmark job grew the image past it (by 6.7 KiB, after 5.0 KiB
/// of trims). CI holds it (`the_stripped_image_fits_its_budget`).
pub const IMAGE_BUDGET: u64 = 272 * 1024;

/// The installed image `artifact`, checked.
pub fn find(artifact: Artifact) -> Result<PathBuf, Error> {
    vtnt_artifacts::find(artifact)
        .map(|f| f.path)
        .map_err(Error::Artifact)
}

/// The job image for a VM.
pub fn job() -> Result<PathBuf, Error> {
    find(Artifact::JobVm)
}

/// The stream endpoint's image for a VM or (`spt`) a process (`vtnt bench net`).
pub fn stream(spt: bool) -> Result<PathBuf, Error> {
    find(if spt {
        Artifact::StreamSpt
    } else {
        Artifact::StreamVm
    })
}
