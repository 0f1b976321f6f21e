//! What an instance is given: the job every runtime runs, as one line, its long target
//! lists as data, and the lab it measures.
//!
//! A job is typed (`vtnt_job::JobSpec`: kind, engine settings, targets and a *hold*,
//! seconds to stay alive after the results; the paper's density job is "a traceroute on
//! the address of the network interface, then a 10-second delay", see [`density`]).
//! Every instance receives it encoded as its canonical line ([`guest_job`]: `vtnt job
//! LINE` for the static binary in a process, a container or a VM; the kernel command
//! line for the unikernel), so the same code does the same thing everywhere and no
//! runtime re-parses option words. A long target list travels as data, never in an
//! argument (Linux caps one at 128 KiB): past [`INLINE_TARGETS`] targets the line says
//! `targets=@module` and the list comes as the process's standard input (a process, a
//! container), a disk of its own (a VM) or a boot module (the unikernel).
//!
//! What they print is compared after [`crate::normalize()`].

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, IoContext, Result};
use vtnt_job::{JobKind, JobSpec};

/// The paper's density job: a one-hop trace, then `hold`. The paper traced the local
/// interface; the vantage LAN's gateway (`lab`'s) is the same trivial one-hop trace, and
/// every runtime (the unikernel has no loopback) can run it alike, from the vantage LAN
/// or the VM LAN.
pub fn density(lab: &Lab, hold: Duration) -> Result<JobSpec> {
    let gateway: IpAddr = lab
        .gateway
        .parse()
        .map_err(|_| Error::Lab(format!("lab `{}`: bad gateway {}", lab.name, lab.gateway)))?;
    let mut trace =
        vtnt_engine::TraceOptions::new(gateway).with_method(vtnt_engine::Method::IcmpParis);
    trace.attempts = 1;
    trace.wait = Duration::from_secs(1);
    let mut spec = JobSpec::new(JobKind::Trace(trace), vec![gateway]);
    spec.hold = hold;
    Ok(spec)
}

/// Targets beyond this many travel as data, not in the job's line.
pub const INLINE_TARGETS: usize = 64;

/// A job as a process, container or VM instance receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestJob {
    /// The words after the `vtnt` binary: `job [--targets AT] LINE`.
    pub args: Vec<String>,
    /// The target list (one address a line) the instance reads at `AT`, when the line
    /// does not hold it.
    pub targets: Option<String>,
}

/// `job` for an instance that finds a long target list at `targets_at` (`-`: its
/// standard input; a VM: the disk it sees it on).
pub fn guest_job(job: &JobSpec, targets_at: &str) -> GuestJob {
    let (line, targets) = vtnt_jobspec::encode_split(job, INLINE_TARGETS);
    let mut args = vec!["job".to_string()];
    if targets.is_some() {
        args.extend(["--targets".to_string(), targets_at.to_string()]);
    }
    args.push(line);
    GuestJob { args, targets }
}

impl GuestJob {
    /// Its target list as a process's standard input ([`targets_input`]), if it has one.
    pub fn input(&self) -> Result<Option<std::fs::File>> {
        self.targets.as_deref().map(targets_input).transpose()
    }
}

/// A file holding `list`, open for reading from its start and already unlinked (nothing
/// is left behind however the instance ends): the standard input of an instance.
pub fn targets_input(list: &str) -> Result<std::fs::File> {
    use std::io::{Seek, Write};
    let path = crate::paths::run_dir()?.join(crate::paths::unique("targets"));
    let mut f = std::fs::File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .doing(|| format!("creating {}", path.display()))?;
    let _ = std::fs::remove_file(&path);
    f.write_all(list.as_bytes())
        .and_then(|()| f.rewind())
        .doing(|| format!("writing the target list to {}", path.display()))?;
    Ok(f)
}

/// Where a job's network comes from: a running lab (`vtnt lab up --name NAME`).
#[derive(Debug, Clone)]
pub struct Lab {
    pub name: String,
    /// `/run/netns/<netns>`.
    pub netns_path: PathBuf,
    /// The vantage point's address without prefix (`192.0.2.2`).
    pub vp_address: String,
    /// The vantage point LAN's gateway (`192.0.2.1`): every guest's first hop.
    pub gateway: String,
    /// The VM attach contract.
    pub vm: VmAttach,
}

/// What a QEMU guest needs to join the lab's VM LAN (`vm.json`'s last LAN).
#[derive(Debug, Clone)]
pub struct VmAttach {
    /// UDP port of the lab's VM front on 127.0.0.1.
    pub port: u16,
    /// `10.253.0.0/16`.
    pub prefix: String,
    /// The guests' gateway on it (`10.253.0.1`).
    pub gateway: String,
    /// The host number of guest 0 of [`VmAttach::guest`]: the first after the LAN's
    /// unikernel slots and DHCP pool (`vm.json`'s `first_guest`, 24010).
    pub first_guest: u32,
}

impl VmAttach {
    /// Guest `i`'s address (host `first_guest + i`: `10.253.93.<202 + i>` on a lab) and
    /// prefix length; instance numbers keep concurrent guests apart. The LAN's other
    /// hosts: from .10 the unikernel slots of `vm.json`, then the DHCP pool (docs/lab.md).
    pub fn guest(&self, i: u32) -> Result<(String, u8)> {
        let (base, len) = self.parse_prefix()?;
        if i >= self.guest_capacity()? {
            return Err(Error::Lab(format!(
                "lab prefix {} has no room for guest {i}",
                self.prefix
            )));
        }
        Ok((
            std::net::Ipv4Addr::from(u32::from(base) + self.first_guest + i).to_string(),
            len,
        ))
    }

    /// How many guests [`VmAttach::guest`] can number.
    pub fn guest_capacity(&self) -> Result<u32> {
        let (_, len) = self.parse_prefix()?;
        let hosts = (1u32 << (32 - u32::from(len))) - 1;
        Ok(hosts.saturating_sub(self.first_guest))
    }

    fn parse_prefix(&self) -> Result<(std::net::Ipv4Addr, u8)> {
        let bad = || Error::Lab(format!("bad lab prefix {}", self.prefix));
        let (net, len) = self.prefix.split_once('/').ok_or_else(bad)?;
        let len: u8 = len.parse().map_err(|_| bad())?;
        let base = net.parse().map_err(|_| bad())?;
        if !(8..=30).contains(&len) {
            return Err(Error::Lab(format!(
                "lab prefix {}: expected /8 to /30",
                self.prefix
            )));
        }
        Ok((base, len))
    }
}

impl Lab {
    /// Reads a running lab's state and VM front through `vtnt-lab-linux`'s types.
    pub fn open(name: &str) -> Result<Lab> {
        let state = vtnt_lab_linux::lab_state(name)?;
        let vm = vtnt_lab_linux::vm_info(name)?;
        let netns_path = PathBuf::from("/run/netns").join(&state.netns);
        if !netns_path.exists() {
            return Err(Error::Lab(format!(
                "lab `{name}`: namespace {} is gone; restart the lab",
                netns_path.display()
            )));
        }
        let vp = state.vp_address.as_str();
        let lan = vm
            .guest_lan()
            .ok_or_else(|| Error::Lab(format!("lab `{name}`: vm.json has no LAN")))?;
        Ok(Lab {
            name: name.to_string(),
            netns_path,
            vp_address: vp.split('/').next().unwrap_or(vp).to_string(),
            vm: VmAttach {
                port: vm.port,
                prefix: lan.prefix.clone(),
                gateway: lan.gateway.clone(),
                first_guest: vm.first_guest,
            },
            gateway: vm.gateway,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_target_lists_travel_apart_from_the_line() {
        let many: Vec<IpAddr> = (0..=INLINE_TARGETS as u32)
            .map(|i| IpAddr::from([198, 51, 100, (i % 250) as u8]))
            .collect();
        let mut spec = JobSpec::new(
            JobKind::Ping(vtnt_engine::PingOptions::new(many[0])),
            many[..INLINE_TARGETS].to_vec(),
        );
        let short = guest_job(&spec, "-");
        assert_eq!((short.args.len(), short.targets), (2, None));
        spec.targets = vtnt_job::Targets::List(many.clone());
        let long = guest_job(&spec, "/dev/vdb");
        assert_eq!(long.args[..3], ["job", "--targets", "/dev/vdb"]);
        assert!(long.args[3].ends_with("targets=@module"), "{:?}", long.args);
        let list = long.targets.unwrap();
        assert_eq!(vtnt_jobspec::parse_target_list(&list).unwrap(), many);
        let mut f = targets_input(&list).unwrap();
        let mut back = String::new();
        std::io::Read::read_to_string(&mut f, &mut back).unwrap();
        assert_eq!(back, list);
    }

    #[test]
    fn guests_get_the_job_line() {
        let lab = Lab {
            name: "t".into(),
            netns_path: PathBuf::new(),
            vp_address: "192.0.2.2".into(),
            gateway: "192.0.2.1".into(),
            vm: VmAttach {
                port: 1,
                prefix: "10.253.0.0/16".into(),
                gateway: "10.253.0.1".into(),
                first_guest: 16010,
            },
        };
        let a = guest_job(&density(&lab, Duration::from_secs(10)).unwrap(), "-").args;
        assert_eq!(
            a,
            [
                "job",
                "vtnt-job=1 kind=trace trace.method=icmp-paris trace.attempts=1 trace.wait=1s hold=10s targets=192.0.2.1"
            ]
        );
        assert_eq!(
            vtnt_jobspec::decode(&a[1]).unwrap().hold,
            Duration::from_secs(10)
        );
    }

    #[test]
    fn guest_addresses() {
        let v = VmAttach {
            port: 1,
            prefix: "192.0.2.0/24".into(),
            gateway: "192.0.2.1".into(),
            first_guest: 230,
        };
        assert_eq!(v.guest(0).unwrap(), ("192.0.2.230".to_string(), 24));
        assert!(v.guest(300).is_err());
        // a lab's VM LAN or a front's: past their 16000 slots and 8000 leases
        let f = VmAttach {
            prefix: "10.253.0.0/16".into(),
            gateway: "10.253.0.1".into(),
            first_guest: 16010,
            ..v
        };
        assert_eq!(f.guest(0).unwrap(), ("10.253.62.138".to_string(), 16));
        assert_eq!(f.guest_capacity().unwrap(), 65535 - 16010);
    }
}
