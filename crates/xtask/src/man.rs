//! `cargo xtask man`: the man pages of `vtnt` and of each of its subcommands, made from
//! its clap definitions by the binary itself (the hidden `vtnt man-pages DIR`), so that
//! they say exactly what that build accepts (`cargo xtask dist` asks its own `bin/vtnt`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

use crate::cargo;

/// Writes the man pages of the `vtnt` binary at `vtnt` into `out`; returns them, sorted.
pub fn write(vtnt: &Path, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let st = Command::new(vtnt)
        .arg("man-pages")
        .arg(out)
        .status()
        .with_context(|| format!("running {}", vtnt.display()))?;
    if !st.success() {
        bail!(
            "{} man-pages {} failed ({st})",
            vtnt.display(),
            out.display()
        );
    }
    let mut pages = std::fs::read_dir(out)
        .with_context(|| format!("reading {}", out.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("reading {}", out.display()))?;
    pages.retain(|p| p.extension().is_some_and(|e| e == "1"));
    pages.sort();
    Ok(pages)
}

/// Builds the `vtnt` command (default features, dev profile) and returns its path.
pub fn build_vtnt() -> anyhow::Result<PathBuf> {
    cargo::run(cargo::command().args(["build", "--locked", "-q", "-p", "vtnt"]))?;
    Ok(cargo::target_dir().join("debug/vtnt"))
}
