//! Shared helpers of the `lab_*` integration tests: run the real `vtnt` binary, start a
//! lab under a unique name and always take it down again (Drop guard), run scamper in it.

#![allow(dead_code)]

use std::process::{Command, Output};

use serde_json::Value;

pub const VTNT: &str = env!("CARGO_BIN_EXE_vtnt");

pub fn vtnt(args: &[&str]) -> Output {
    Command::new(VTNT)
        .args(args)
        .output()
        .expect("running vtnt")
}

/// A running lab, taken down when dropped.
pub struct Lab {
    pub name: String,
}

impl Lab {
    /// `vtnt lab up --name vt-<tag>-<pid> [topology]`.
    pub fn up(tag: &str, topology: Option<&str>) -> Lab {
        let name = format!("vt-{tag}-{}", std::process::id());
        let mut args = vec!["lab", "up", "--name", &name];
        if let Some(t) = topology {
            args.push(t);
        }
        let out = vtnt(&args);
        let lab = Lab { name };
        assert!(
            out.status.success(),
            "lab up failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        lab
    }

    pub fn exec(&self, cmd: &[&str]) -> Output {
        let mut args = vec!["lab", "exec", "--name", &self.name, "--"];
        args.extend_from_slice(cmd);
        vtnt(&args)
    }

    /// scamper's JSON objects of one command.
    pub fn scamper(&self, command: &str, dst: &str) -> Vec<Value> {
        let out = self.exec(&["scamper", "-c", command, "-O", "json", "-i", dst]);
        assert!(
            out.status.success(),
            "scamper: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// scamper's Paris ICMP trace to `dst` (one attempt per hop, 1 s wait).
    pub fn trace(&self, dst: &str) -> Value {
        let objs = self.scamper("trace -P icmp-paris -q 1 -w 1", dst);
        objs.into_iter()
            .find(|o| o["type"] == "trace")
            .expect("no trace object")
    }

    /// The running lab's ground truth.
    pub fn truth(&self) -> Value {
        let out = vtnt(&["lab", "truth", "--json", "--name", &self.name]);
        assert!(out.status.success());
        serde_json::from_slice(&out.stdout).expect("truth JSON")
    }

    /// The destinations of the lab's ground truth, as addresses.
    pub fn destinations(&self) -> Vec<String> {
        self.truth()["destinations"]
            .as_array()
            .expect("destinations")
            .iter()
            .map(|d| d["dst"].as_str().expect("dst").to_string())
            .collect()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = vtnt(&["lab", "down", "--name", &self.name]);
    }
}

/// The hops of a scamper trace as (probe_ttl, addr) in TTL order.
pub fn hop_addrs(trace: &Value) -> Vec<String> {
    trace["hops"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| h["addr"].as_str().unwrap_or("*").to_string())
        .collect()
}

/// The hop answering probe TTL `ttl`.
pub fn hop(trace: &Value, ttl: u64) -> &Value {
    trace["hops"]
        .as_array()
        .and_then(|hs| hs.iter().find(|h| h["probe_ttl"] == ttl))
        .unwrap_or(&Value::Null)
}

/// The first MPLS label stack entry of a hop's RFC 4950 extension, if any.
pub fn label(h: &Value) -> Option<&Value> {
    h["icmpext"].as_array()?.first()?["mpls_labels"]
        .as_array()?
        .first()
}

/// The truth's destination entry for a host name.
pub fn destination<'a>(truth: &'a Value, name: &str) -> &'a Value {
    truth["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name)
        .unwrap()
}

/// The TTL at which a traceroute reaches the router answering from `addr`.
pub fn ttl_of(trace: &Value, addr: &str) -> Option<u64> {
    trace["hops"]
        .as_array()?
        .iter()
        .find(|h| h["addr"] == addr)?["probe_ttl"]
        .as_u64()
}

pub fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|x| x.as_str().unwrap_or("").to_string())
        .collect()
}
