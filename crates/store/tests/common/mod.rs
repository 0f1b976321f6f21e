//! What the results store's tests share, here and in other crates' tests (`#[path]`):
//! a scratch directory of a test's own and the campaign fixture.

#![allow(dead_code)]

use std::path::PathBuf;

/// A TNT campaign's records (the reference topology, in process): scamper JSON with
/// `"tnt"` annotations, 7 initial traces, 15 revelation traces, 45 pings.
pub const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../store/tests/data/reference.json"
);

/// A directory of a test's own, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("vtnt-store-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// [`Scratch::path`] as a command-line argument.
    pub fn arg(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
