//! Shared by the evaluation's tests: the runtime tests' helpers (a lab of our own, what
//! this host lacks), included from `crates/runtimes/tests/common/mod.rs` rather than
//! copied, and the figures' check (each figure a report names is drawn).

#![allow(dead_code)]

#[path = "../../../runtimes/tests/common/mod.rs"]
mod runtimes;
pub use runtimes::*;

use std::path::Path;

/// Every file of `names` in `out` exists and holds a drawing (over 10 kB of PNG).
pub fn assert_drawn(out: &Path, names: &[&str]) {
    for name in names {
        let p = out.join(name);
        let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
        assert!(
            len > 10_000,
            "{} missing or empty ({len} bytes)",
            p.display()
        );
    }
}
