//! Running cargo (and the other tools) from a task: the checkout's root and target
//! directory, a cargo command, and [`run`], whose failure is an error with the command's
//! last lines.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

/// The checkout's root (this crate sits at `crates/xtask`).
pub fn workspace() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .nth(2)
        .map_or_else(|| here.to_path_buf(), Path::to_path_buf)
}

/// Cargo's target directory: `CARGO_TARGET_DIR` (relative to the checkout), else
/// `<checkout>/target`.
pub fn target_dir() -> PathBuf {
    let ws = workspace();
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| ws.join("target"), |d| ws.join(d))
}

/// `cargo` (the one running this task, when there is one) in the checkout.
pub fn command() -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    c.current_dir(workspace());
    c
}

/// Runs `cmd` and returns its stdout; a failure names the command, with its last 40
/// lines of stderr.
pub fn run(cmd: &mut Command) -> anyhow::Result<String> {
    let what = format!("{cmd:?}");
    let out = cmd.output().with_context(|| format!("starting {what}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err.lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        bail!("{what} failed ({}):\n{tail}", out.status);
    }
    String::from_utf8(out.stdout).with_context(|| format!("{what} printed non-UTF-8"))
}

/// The directory cargo puts a profile's output in (`dev` -> `debug`).
pub fn profile_dir(profile: &str) -> &str {
    match profile {
        "dev" | "test" => "debug",
        "bench" => "release",
        p => p,
    }
}

/// Writes a copy of `input` without symbols to `output` (binutils' `objcopy`).
pub fn strip(input: &Path, output: &Path) -> anyhow::Result<()> {
    run(Command::new("objcopy")
        .arg("--strip-all")
        .arg(input)
        .arg(output))
    .context("stripping with objcopy (Debian package binutils)")?;
    Ok(())
}
