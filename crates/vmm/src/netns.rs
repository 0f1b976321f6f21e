//! A network namespace of our own with a TAP device in it, deleted on drop (even when a
//! test fails). Everything a guest sends stays inside it. Needs root and iproute2.

use crate::Error;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A namespace name unique to this process: `<prefix>-<pid>-<n>`.
pub fn unique_name(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{n}", std::process::id())
}

/// Whether we run as root (uid 0).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("Uid:"))?.to_string();
            l.split_whitespace().nth(1).map(|u| u == "0")
        })
        .unwrap_or(false)
}

fn ip(args: &[&str]) -> Result<Output, Error> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|source| Error::Spawn {
            program: "ip".into(),
            source,
        })?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(Error::Setup {
            command: format!("ip {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// A network namespace, deleted on drop.
#[derive(Debug)]
pub struct NetNs {
    name: String,
}

impl NetNs {
    /// Creates namespace `name` with loopback up.
    pub fn create(name: &str) -> Result<NetNs, Error> {
        ip(&["netns", "add", name])?;
        let ns = NetNs {
            name: name.to_string(),
        };
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Adds TAP device `ifname` with address `cidr` (e.g. `192.0.2.1/24`), up.
    pub fn add_tap(&self, ifname: &str, cidr: &str) -> Result<(), Error> {
        let n = self.name.as_str();
        ip(&["-n", n, "tuntap", "add", "dev", ifname, "mode", "tap"])?;
        ip(&["-n", n, "addr", "add", cidr, "dev", ifname])?;
        ip(&["-n", n, "link", "set", ifname, "up"])?;
        Ok(())
    }

    /// Runs a command inside the namespace.
    pub fn exec(&self, program: &str, args: &[&str]) -> Result<Output, Error> {
        Command::new("ip")
            .args(["netns", "exec", &self.name, program])
            .args(args)
            .output()
            .map_err(|source| Error::Spawn {
                program: program.into(),
                source,
            })
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}
