//! Shared by the tests of `vtnt daemon` (`daemon`, `daemon_clients`): a daemon started
//! in a namespace, a scratch directory, and the JSON objects of `DATA` blocks.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use vtnt_netns::{unique_name, NetNs};

pub const VTNT: &str = env!("CARGO_BIN_EXE_vtnt");

/// A scratch directory, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(unique_name(tag));
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A daemon running in a namespace; SIGTERM and reaped when dropped.
pub struct Daemon {
    pub child: Option<Child>,
}

impl Daemon {
    /// Starts `vtnt daemon ARGS` in `ns` and waits until `ready` says it listens.
    pub fn start(ns: &NetNs, args: &[&str], ready: impl Fn() -> bool) -> Daemon {
        let mut cmd = ns.command(VTNT);
        cmd.arg("daemon").args(args);
        Daemon::spawn(cmd, ready)
    }

    /// Starts `vtnt daemon ARGS` in this test's own namespace (its commands probe
    /// loopback only).
    pub fn start_here(args: &[&str], ready: impl Fn() -> bool) -> Daemon {
        let mut cmd = std::process::Command::new(VTNT);
        cmd.arg("daemon").args(args);
        Daemon::spawn(cmd, ready)
    }

    /// Starts `cmd` (a `vtnt daemon`) and waits until `ready` says it listens.
    pub fn spawn(mut cmd: std::process::Command, ready: impl Fn() -> bool) -> Daemon {
        let child = cmd
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("starting vtnt daemon");
        let mut d = Daemon { child: Some(child) };
        let t0 = Instant::now();
        while !ready() {
            if let Some(st) = d.child.as_mut().unwrap().try_wait().unwrap() {
                let out = d.child.take().unwrap().wait_with_output().unwrap();
                panic!(
                    "daemon exited {st}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "daemon not ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// SIGTERM, then the daemon's exit and stderr.
    pub fn stop(mut self) -> Output {
        let child = self.child.take().unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        child.wait_with_output().unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The JSON objects of every `DATA` block (attach format json).
pub fn data_json(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if let Some(n) = l.strip_prefix("DATA ") {
            // (`DATA LEN` or today's `DATA LEN id-N`)
            let n = n.split(' ').next().unwrap();
            let line = lines.next().unwrap();
            assert_eq!(line.len() + 1, n.parse::<usize>().unwrap());
            out.push(serde_json::from_str(line).unwrap());
        }
    }
    out
}
