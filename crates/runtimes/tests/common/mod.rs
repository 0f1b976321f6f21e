//! Shared by the runtime tests, and included by path in vtnt-evaluation's and vtnt-fleet's
//! (their `tests/common/mod.rs`, `tests/fleet.rs`): a lab of our own (`vtnt lab up --name <unique>`, taken down on drop),
//! and why a test cannot run here (handed to vtnt-testkit to skip).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether the deploy tests can run here at all; when not, skips `test` through
/// vtnt-testkit. cgroup v1 missing is on its allow-list (the host's boot-time choice);
/// the rest is not (scripts/setup.sh provides it).
pub fn basics_ready(test: &str) -> bool {
    let (why, allowed) = if !vtnt_measure::cgroup::available() {
        let why = format!(
            "cgroup v1 controllers {:?} are not mounted",
            vtnt_measure::cgroup::CONTROLLERS
        );
        (why, Some(vtnt_testkit::Allowed::CgroupV1))
    } else if let Some(why) = basic_missing() {
        (why, None)
    } else {
        return true;
    };
    vtnt_testkit::skip_or_fail(test, &why, allowed);
    false
}

/// Why the deploy tests cannot run here (cgroup v1 aside), if they cannot.
fn basic_missing() -> Option<String> {
    if let Some(why) = vtnt_testkit::missing_root_or(&[]) {
        return Some(why);
    }
    for (p, pkg) in [
        ("ip", "iproute2"),
        ("nsenter", "util-linux"),
        ("tar", "tar"),
    ] {
        if vtnt_runtimes::paths::which(p).is_none() {
            return Some(format!("`{p}` missing (Debian package {pkg})"));
        }
    }
    // the runtimes take their static vtnt and images from the installed tree
    vtnt_runtimes::paths::static_vtnt()
        .err()
        .map(|e| format!("{e:#}"))
}

/// Why `rt` cannot run here, if it cannot.
pub fn runtime_missing(rt: vtnt_runtimes::Runtime) -> Option<String> {
    use vtnt_runtimes::paths::which;
    use vtnt_runtimes::Runtime::*;
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
        // a process: the kernel's build (the toolchain's bare-metal target) is all it needs
        Spt => None,
    }
}

/// A lab of our own, down on drop.
pub struct LabGuard {
    pub name: String,
    vtnt: PathBuf,
}

impl LabGuard {
    pub fn up(tag: &str) -> anyhow::Result<LabGuard> {
        LabGuard::up_with(tag, &[])
    }

    /// `vtnt lab up` with `extra` words (a topology file).
    pub fn up_with(tag: &str, extra: &[&str]) -> anyhow::Result<LabGuard> {
        let vtnt = vtnt_runtimes::paths::static_vtnt()?;
        let name = format!("vd{tag}{}", std::process::id());
        run(
            &vtnt,
            &[&["lab", "up", "--name", &name][..], extra].concat(),
        )?;
        Ok(LabGuard { name, vtnt })
    }

    /// A front (`vtnt lab front`) whose upstream is this lab's namespace: VMs behind it
    /// probe the lab from its vantage address; taken down on drop.
    pub fn front(&self) -> anyhow::Result<LabGuard> {
        let name = format!("{}f", self.name);
        run(
            &self.vtnt,
            &[
                "lab",
                "front",
                "--name",
                &name,
                "--upstream",
                &self.name,
                "--pps",
                "2000",
            ],
        )?;
        Ok(LabGuard {
            name,
            vtnt: self.vtnt.clone(),
        })
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
