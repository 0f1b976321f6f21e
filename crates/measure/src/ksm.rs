//! Kernel samepage merging for the "(+KSM)" configurations: [`Ksm::enable`] saves the
//! settings of `/sys/kernel/mm/ksm/`, starts the scanner with a faster scan rate than the
//! default 100 pages / 20 ms (so one instance's pages merge within seconds), and restores
//! everything on drop (unmerging first when KSM was off). QEMU marks guest RAM mergeable
//! (`mem-merge=on` by default); processes and containers are not marked, so KSM changes
//! nothing for them, as in the paper, which reports KSM for the VM and vTNT only.

use std::path::Path;

use crate::error::{Error, IoContext, Result};

const DIR: &str = "/sys/kernel/mm/ksm";

/// KSM's counters at one moment.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Counters {
    pub pages_shared: u64,
    /// In bench reports: the highest value seen while the instance ran.
    pub pages_sharing: u64,
    pub pages_unshared: u64,
    pub full_scans: u64,
    /// Bytes saved minus the scanner's own metadata (`general_profit`, Linux >= 6.4; 0
    /// when absent).
    pub general_profit: i64,
}

impl Counters {
    pub fn read() -> Counters {
        let r = |f: &str| {
            std::fs::read_to_string(Path::new(DIR).join(f))
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok())
                .unwrap_or(0)
        };
        Counters {
            pages_shared: r("pages_shared") as u64,
            pages_sharing: r("pages_sharing") as u64,
            pages_unshared: r("pages_unshared") as u64,
            full_scans: r("full_scans") as u64,
            general_profit: r("general_profit"),
        }
    }
    /// Bytes saved: pages_sharing x page size.
    pub fn saved_bytes(&self) -> u64 {
        self.pages_sharing * 4096
    }
}

/// Whether this kernel has KSM.
pub fn available() -> bool {
    Path::new(DIR).join("run").exists()
}

/// KSM running while this lives; settings restored on drop.
#[derive(Debug)]
pub struct Ksm {
    saved: Vec<(&'static str, String)>,
}

const SETTINGS: [&str; 3] = ["run", "pages_to_scan", "sleep_millisecs"];

impl Ksm {
    /// Starts KSM scanning `pages_to_scan` pages every `sleep_ms` milliseconds.
    pub fn enable(pages_to_scan: u32, sleep_ms: u32) -> Result<Ksm> {
        if !available() {
            return Err(Error::Unavailable(format!(
                "this kernel has no KSM ({DIR}/run missing)"
            )));
        }
        let mut saved = Vec::new();
        for s in SETTINGS {
            let p = Path::new(DIR).join(s);
            saved.push((
                s,
                std::fs::read_to_string(&p)
                    .doing(|| format!("reading {}", p.display()))?
                    .trim()
                    .to_string(),
            ));
        }
        let k = Ksm { saved };
        write("pages_to_scan", &pages_to_scan.to_string())?;
        write("sleep_millisecs", &sleep_ms.to_string())?;
        write("run", "1")?;
        Ok(k)
    }

    /// The saved value of a setting.
    pub fn saved(&self, name: &str) -> Option<&str> {
        self.saved
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn write(name: &str, v: &str) -> Result<()> {
    let p = Path::new(DIR).join(name);
    std::fs::write(&p, v).doing(|| format!("writing {v} to {}", p.display()))
}

impl Drop for Ksm {
    fn drop(&mut self) {
        if self.saved("run") == Some("0") {
            let _ = write("run", "2");
        }
        for (n, v) in self.saved.iter().rev() {
            let _ = write(n, v);
        }
    }
}
