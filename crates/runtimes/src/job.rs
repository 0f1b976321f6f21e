//! The job every runtime runs, and what it is compared on.
//!
//! A [`Job`] is the words after `vtnt` (`trace -P icmp-paris 203.0.113.10`, `tnt ...`),
//! plus an optional *hold*: seconds to stay alive after the job (the paper's density job:
//! "a traceroute on the address of the network interface, then a 10-second delay"; see
//! [`LOCAL`]). In
//! every guest the job runs as `vtnt run --runtime native --local --hold S -- WORDS` (or
//! plain `vtnt WORDS` without a hold), so the same code does the same thing everywhere.
//!
//! [`normalize`] removes what legitimately differs between runs and runtimes from scamper
//! JSON lines: times (`start`, `tx`, `rtt`, `start_time`, `stop_time`), the host name,
//! reply IP ids (the lab's per-router counters advance between runs) and the vantage
//! address (`src`: containers share the lab's 192.0.2.2, VMs take a guest slot address).

use std::path::PathBuf;

use anyhow::Context;
use serde_json::Value;

/// A job word replaced at start by the vantage LAN's gateway (`192.0.2.1`): the density
/// job traces it. The paper traced the local interface; one on-link hop is the same
/// trivial trace, and every runtime (the unikernel has no loopback) can run it alike.
pub const LOCAL: &str = "@local";

/// One job: `vtnt <words>`, then stay alive `hold_secs`.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub words: Vec<String>,
    pub hold_secs: u32,
}

impl Job {
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(words: I) -> Job {
        Job {
            words: words.into_iter().map(Into::into).collect(),
            hold_secs: 0,
        }
    }

    pub fn with_hold(mut self, secs: u32) -> Job {
        self.hold_secs = secs;
        self
    }

    /// The paper's density job: a one-hop trace (of [`LOCAL`]), then hold 10 s.
    pub fn density() -> Job {
        Job::new(["trace", "-P", "icmp-paris", "-q", "1", "-w", "1", LOCAL]).with_hold(10)
    }

    /// Arguments after the `vtnt` binary inside a guest.
    pub fn guest_args(&self) -> Vec<String> {
        if self.hold_secs == 0 {
            return self.words.clone();
        }
        let mut v: Vec<String> = ["run", "--runtime", "native", "--local", "--hold"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.push(self.hold_secs.to_string());
        v.push("--".into());
        v.extend(self.words.iter().cloned());
        v
    }

    /// The same job with `from` replaced by `to` in its words (a VM traces its own address).
    pub fn replace_word(&self, from: &str, to: &str) -> Job {
        Job {
            words: self
                .words
                .iter()
                .map(|w| if w == from { to.to_string() } else { w.clone() })
                .collect(),
            hold_secs: self.hold_secs,
        }
    }
}

/// Where a job's network comes from: a running lab (`vtnt lab up --name NAME`).
#[derive(Debug, Clone)]
pub struct Lab {
    pub name: String,
    /// `/run/netns/<netns>`.
    pub netns_path: PathBuf,
    /// The vantage point's address without prefix (`192.0.2.2`).
    pub vp_address: String,
    /// The VM attach contract.
    pub vm: VmAttach,
}

/// What a QEMU guest needs to join the lab's vantage LAN.
#[derive(Debug, Clone)]
pub struct VmAttach {
    /// UDP port of the lab's VM front on 127.0.0.1.
    pub port: u16,
    /// `192.0.2.0/24`.
    pub prefix: String,
    pub gateway: String,
}

impl VmAttach {
    /// Guest `i`'s address (`192.0.2.<230 + i>`) and prefix length; instance numbers
    /// keep concurrent guests apart. The LAN's other hosts: .10-.129 are the unikernel
    /// slots of `vm.json`, .130-.229 the VM front's DHCP pool (docs/lab.md).
    pub fn guest(&self, i: u32) -> anyhow::Result<(String, u8)> {
        let (net, len) = self
            .prefix
            .split_once('/')
            .with_context(|| format!("bad lab prefix {}", self.prefix))?;
        let len: u8 = len
            .parse()
            .with_context(|| format!("bad lab prefix {}", self.prefix))?;
        let base: std::net::Ipv4Addr = net
            .parse()
            .with_context(|| format!("bad lab prefix {}", self.prefix))?;
        let host = 230 + i;
        if len < 20 || host >= (1u32 << (32 - u32::from(len))) - 1 {
            anyhow::bail!("lab prefix {} has no room for guest {i}", self.prefix);
        }
        Ok((
            std::net::Ipv4Addr::from(u32::from(base) + host).to_string(),
            len,
        ))
    }
}

impl Lab {
    /// Reads a running lab's state and VM front through `vtnt-lab-linux`'s types.
    pub fn open(name: &str) -> anyhow::Result<Lab> {
        let state = vtnt_lab_linux::lab_state(name)?;
        let vm = vtnt_lab_linux::vm_info(name)?;
        let netns_path = PathBuf::from("/run/netns").join(&state.netns);
        if !netns_path.exists() {
            anyhow::bail!(
                "lab `{name}`: namespace {} is gone; restart the lab",
                netns_path.display()
            );
        }
        let vp = state.vp_address.as_str();
        Ok(Lab {
            name: name.to_string(),
            netns_path,
            vp_address: vp.split('/').next().unwrap_or(vp).to_string(),
            vm: VmAttach {
                port: vm.port,
                prefix: vm.prefix,
                gateway: vm.gateway,
            },
        })
    }
}

const VARYING: [&str; 8] = [
    "start",
    "tx",
    "rtt",
    "start_time",
    "stop_time",
    "hostname",
    "reply_ipid",
    "src",
];

/// The job's JSON lines with run-dependent fields removed (see the module docs), one
/// canonical line each; lines that are not JSON objects are dropped.
pub fn normalize(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|v| v.is_object())
        .map(|mut v| {
            strip(&mut v);
            v.to_string()
        })
        .collect()
}

fn strip(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for k in VARYING {
                m.remove(k);
            }
            m.values_mut().for_each(strip);
        }
        Value::Array(a) => a.iter_mut().for_each(strip),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_drops_times_and_vantage() {
        let a = r#"{"type":"trace","src":"192.0.2.2","dst":"203.0.113.10","start":{"sec":1},"hops":[{"addr":"192.0.2.1","rtt":1.2,"tx":{"sec":3},"reply_ipid":7,"reply_ttl":255}]}"#;
        let b = r#"{"type":"trace","src":"192.0.2.40","dst":"203.0.113.10","start":{"sec":9},"hops":[{"addr":"192.0.2.1","rtt":3.4,"tx":{"sec":4},"reply_ipid":9,"reply_ttl":255}]}"#;
        assert_eq!(normalize(a), normalize(&format!("boot noise\n{b}\n")));
        assert_ne!(normalize(a), normalize(&a.replace("255", "254")));
    }

    #[test]
    fn guest_args_wrap_holds() {
        let j = Job::density().replace_word(LOCAL, "192.0.2.2");
        let a = j.guest_args();
        assert_eq!(
            &a[..6],
            &["run", "--runtime", "native", "--local", "--hold", "10"]
        );
        assert_eq!(a.last().unwrap(), "192.0.2.2");
        assert_eq!(Job::new(["trace", "x"]).guest_args(), ["trace", "x"]);
    }

    #[test]
    fn guest_addresses() {
        let v = VmAttach {
            port: 1,
            prefix: "192.0.2.0/24".into(),
            gateway: "192.0.2.1".into(),
        };
        assert_eq!(v.guest(0).unwrap(), ("192.0.2.230".to_string(), 24));
        assert!(v.guest(300).is_err());
    }
}
