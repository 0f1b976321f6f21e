//! File helpers of the tree builders (`dist`, `share`, `deb`): each error names its path.

use std::path::Path;

use anyhow::Context;

pub(crate) fn mkdir(d: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))
}

pub(crate) fn write(p: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))
}

/// Every regular file under `root`, relative to it, sorted.
pub(crate) fn files(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let p = e?.path();
            if p.is_dir() {
                dirs.push(p);
            } else if let Ok(rel) = p.strip_prefix(root) {
                out.push(rel.display().to_string());
            }
        }
    }
    out.sort();
    Ok(out)
}
