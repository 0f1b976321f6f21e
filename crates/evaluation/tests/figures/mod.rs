//! Shared by the evaluation's report tests: each figure a report names is drawn.

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
