//! Shared by the deploy tests: a lab of our own (`vtnt lab up --name <unique>`, taken
//! down on drop), and skips with a printed reason when a component is missing.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Prints why a test is skipped and returns true, when `reason` is Some.
pub fn skip(test: &str, reason: Option<String>) -> bool {
    if let Some(r) = reason {
        eprintln!("SKIPPED {test}: {r}");
        true
    } else {
        false
    }
}

/// Why the deploy tests cannot run at all here, if they cannot.
pub fn basic_missing() -> Option<String> {
    if !vtnt_deploy::cgroup::available() {
        return Some("cgroup v1 memory/cpu/cpuacct/cpuset controllers are not mounted".into());
    }
    if std::fs::read_to_string("/proc/self/status").map_or(true, |s| {
        !s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    }) {
        return Some("needs root (namespaces, cgroups, containers)".into());
    }
    for (p, pkg) in [
        ("ip", "iproute2"),
        ("nsenter", "util-linux"),
        ("tar", "tar"),
    ] {
        if vtnt_deploy::paths::which(p).is_none() {
            return Some(format!("`{p}` missing (Debian package {pkg})"));
        }
    }
    if !rustup_has_musl() && std::env::var_os("VTNT_STATIC_BIN").is_none() {
        return Some(
            "rustup target x86_64-unknown-linux-musl is not installed (scripts/setup.sh)".into(),
        );
    }
    None
}

fn rustup_has_musl() -> bool {
    Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("x86_64-unknown-linux-musl"))
}

/// Why `rt` cannot run here, if it cannot.
pub fn runtime_missing(rt: vtnt_deploy::Runtime) -> Option<String> {
    use vtnt_deploy::paths::which;
    use vtnt_deploy::Runtime::*;
    let need = |progs: &[(&str, &str)]| {
        progs
            .iter()
            .find(|(p, _)| which(p).is_none())
            .map(|(p, pkg)| format!("`{p}` missing (Debian package {pkg})"))
    };
    match rt {
        Native => None,
        Runc => need(&[("runc", "runc")]),
        Docker => need(&[
            ("dockerd", "docker.io"),
            ("containerd", "containerd"),
            ("debootstrap", "debootstrap"),
            ("gzip", "gzip"),
        ]),
        DockerScratch => need(&[
            ("dockerd", "docker.io"),
            ("containerd", "containerd"),
            ("gzip", "gzip"),
        ]),
        Vm => need(&[
            ("qemu-system-x86_64", "qemu-system-x86"),
            ("qemu-img", "qemu-utils"),
            ("debootstrap", "debootstrap"),
            ("mkfs.ext4", "e2fsprogs"),
        ]),
        Microvm => need(&[("qemu-system-x86_64", "qemu-system-x86")]),
    }
}

/// A lab of our own, down on drop.
pub struct LabGuard {
    pub name: String,
    vtnt: PathBuf,
}

impl LabGuard {
    pub fn up(tag: &str) -> anyhow::Result<LabGuard> {
        let vtnt = vtnt_deploy::paths::static_vtnt()?;
        let name = format!("vd{tag}{}", std::process::id());
        run(&vtnt, &["lab", "up", "--name", &name])?;
        Ok(LabGuard { name, vtnt })
    }
}

fn run(vtnt: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(vtnt).args(args).output()?;
    anyhow::ensure!(
        out.status.success(),
        "vtnt {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = run(&self.vtnt, &["lab", "down", "--name", &self.name]);
    }
}
