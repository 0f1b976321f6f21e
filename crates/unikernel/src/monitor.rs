//! Booting the unikernel under `vtnt-monitor`, our own microVM monitor (crate
//! `vtnt-monitor`; the guest interface is `vtnt_abi::hvt`): one monitor process per VM, which
//! needs only `/dev/kvm`. The vCPU starts in 64-bit mode at privilege level 3 and every
//! device is a hypercall, so under KVM on PVM the guest runs natively (QEMU's guests are
//! emulated there an instruction at a time); see ARCHITECTURE.md.
//!
//! The monitor prints the guest's console lines on stdout and exits with the guest's
//! status (125: it could not start the VM, 126: the guest faulted, 124: the watchdog);
//! [`run`] supervises it like QEMU ([`crate::qemu::supervise`]) and takes its peak RSS
//! and CPU time from the monitor's own `--stats` line.

use crate::accel::{self, Accelerator};
use crate::outcome::{json_u64, ConsoleTap, Outcome};
use crate::{qemu, Error, GuestStatus};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// The monitor's program name.
pub const PROGRAM: &str = "vtnt-monitor";

/// The monitor binary as installed (`vtnt-artifacts`: `lib/vtnt/vtnt-monitor`, a static
/// musl build, which maps no shared libraries, so each microVM's monitor holds ~110 KiB
/// less memory; docs/benchmarks.md, Fig. 8), checked against its manifest.
pub fn binary() -> Result<PathBuf, Error> {
    crate::image::find(crate::image::Artifact::Monitor)
}

/// The guest's network under the monitor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MonitorNet {
    /// Raw Ethernet frames, one per UDP datagram, from `local` to `remote` (a lab's VM
    /// front).
    Udp {
        local: SocketAddr,
        remote: SocketAddr,
    },
    /// An existing TAP device in the namespace the monitor runs in.
    Tap { ifname: String },
}

/// One VM under the monitor.
#[derive(Debug, Clone)]
pub struct MonitorConfig {
    pub image: PathBuf,
    pub memory_mib: u32,
    /// The kernel command line (options, then `--` and the job).
    pub cmdline: String,
    pub net: Option<MonitorNet>,
    pub mac: String,
    /// A second network (a network function's other side; only with `net`) and its MAC.
    pub net2: Option<MonitorNet>,
    pub mac2: String,
    /// The monitor's watchdog; the supervisor kills it a little later still.
    pub timeout: Duration,
    /// Run the monitor inside this network namespace (`ip netns exec`).
    pub netns: Option<String>,
    /// Files handed to the guest as boot modules (e.g. a target list).
    pub modules: Vec<PathBuf>,
    /// A command the monitor runs under (after `ip netns exec`): e.g. one that places it
    /// in cgroups, then execs it. Empty: none.
    pub wrapper: Vec<String>,
    /// Where console lines also go as they arrive.
    pub console: Option<ConsoleTap>,
}

impl MonitorConfig {
    /// A VM with 16 MiB, no network and a 60 s timeout.
    pub fn new(image: PathBuf, cmdline: &str) -> MonitorConfig {
        MonitorConfig {
            image,
            memory_mib: 16,
            cmdline: cmdline.to_string(),
            net: None,
            mac: "52:54:00:12:34:56".into(),
            net2: None,
            mac2: "52:54:00:12:34:57".into(),
            timeout: Duration::from_secs(60),
            netns: None,
            modules: Vec::new(),
            wrapper: Vec::new(),
            console: None,
        }
    }

    /// The monitor's arguments.
    pub fn args(&self) -> Vec<String> {
        let mut a = vec![
            "--mem-mib".to_string(),
            self.memory_mib.to_string(),
            "--timeout".into(),
            self.timeout.as_secs().max(1).to_string(),
            "--mac".into(),
            self.mac.clone(),
        ];
        if self.net2.is_some() {
            a.push("--mac".into());
            a.push(self.mac2.clone());
        }
        for net in self.net.iter().chain(&self.net2) {
            a.push("--net".into());
            a.push(match net {
                MonitorNet::Udp { local, remote } => format!("udp={local},{remote}"),
                MonitorNet::Tap { ifname } => format!("tap={ifname}"),
            });
        }
        for m in &self.modules {
            a.push("--module".into());
            a.push(m.display().to_string());
        }
        // Its timings, exit counts, peak RSS and CPU time (a JSON line on stderr).
        a.push("--stats".into());
        a.push(self.image.display().to_string());
        a.push("--cmdline".into());
        a.push(self.cmdline.clone());
        a
    }
}

/// Where [`boots`] keeps its answer for this host boot.
const BOOTS_CACHE: &str = "vtnt-monitor-boots";

/// Whether the monitor boots `image` on this host, checked once: on PVM, where every
/// release is tested (CI), yes; on other KVM (hardware virtualisation: CI runs it only on
/// AMD SVM nested under TCG, crates/xtask/tests/package/nested_kvm.rs, never on bare
/// metal), a `-- boot` job must exit 0 under it, once per host boot (the answer is
/// cached in the temporary directory, like QEMU's accelerator probe). A failed check is
/// said on stderr, once.
pub fn boots(image: &Path) -> bool {
    static BOOTS: OnceLock<bool> = OnceLock::new();
    *BOOTS.get_or_init(|| {
        if accel::kvm_kind() == Some(Accelerator::PvmKvm) {
            return true;
        }
        if let Some(word) = accel::recalled(BOOTS_CACHE) {
            return word == "yes";
        }
        let mut cfg = MonitorConfig::new(image.to_path_buf(), "-- boot");
        cfg.timeout = Duration::from_secs(5);
        let ok = run(&cfg).is_ok_and(|o| o.status == GuestStatus::Exited(0));
        accel::remember(BOOTS_CACHE, if ok { "yes" } else { "no" });
        if !ok {
            tracing::warn!(
                "vtnt-monitor did not boot a test guest on this host's KVM: microVMs run \
                 under QEMU (`--vmm vtnt` forces the monitor)"
            );
        }
        ok
    })
}

/// Whether the monitor can run VMs here: its binary is installed and `/dev/kvm` opens
/// read-write.
pub fn usable() -> bool {
    binary().is_ok() && accel::kvm_kind().is_some()
}

/// The command that boots `cfg`: the wrapper, then `ip netns exec` when a namespace is
/// set, then the monitor with [`MonitorConfig::args`].
pub fn command(cfg: &MonitorConfig) -> Result<Command, Error> {
    let program = binary()?;
    // the wrapper first (it may join cgroups, which `ip netns exec`'s own /sys hides)
    let mut words: Vec<std::ffi::OsString> = cfg.wrapper.iter().map(Into::into).collect();
    if let Some(ns) = &cfg.netns {
        words.extend(["ip", "netns", "exec", ns].map(Into::into));
    }
    words.push(program.into());
    let mut cmd = Command::new(&words[0]);
    cmd.args(&words[1..]).args(cfg.args());
    Ok(cmd)
}

/// Boots `cfg` under the monitor and waits for it.
pub fn run(cfg: &MonitorConfig) -> Result<Outcome, Error> {
    let cmd = command(cfg)?;
    let accel = accel::kvm_kind().unwrap_or(Accelerator::Kvm);
    let supervised = qemu::supervise(
        cmd,
        cfg.timeout + Duration::from_secs(5),
        false,
        accel,
        cfg.console.as_ref(),
    );
    let mut out = match supervised {
        // the monitor's one-line message, without its statistics line
        Err(Error::Vmm { status, stderr }) => {
            return Err(Error::Vmm {
                status,
                stderr: message(&stderr),
            })
        }
        r => r?,
    };
    // the monitor's watchdog stopped a guest that had printed lines but never its exit
    if out.status == GuestStatus::Vanished && out.vmm_code == Some(EXIT_TIMED_OUT) {
        out.status = GuestStatus::TimedOut;
    }
    // The monitor's own account of its peak RSS and CPU time (getrusage) is exact, where
    // sampling /proc from outside misses most of a VM that lives a few milliseconds.
    if let Some(line) = stats_line(&out.stderr) {
        if let Some(kib) = json_u64(line, "maxrss_kib") {
            out.peak_rss_kib = Some(out.peak_rss_kib.map_or(kib, |k| k.max(kib)));
        }
        if let Some(us) = json_u64(line, "cpu_us") {
            out.cpu = Some(Duration::from_micros(us));
        }
    }
    Ok(out)
}

/// The monitor's exit status when its watchdog stopped the guest.
const EXIT_TIMED_OUT: i32 = 124;

/// What the monitor said on stderr, its statistics line left out, on one line.
fn message(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("{\"type\":\"monitor\""))
        .collect();
    lines.join("; ")
}

/// The monitor's `--stats` line in its stderr.
pub fn stats_line(stderr: &str) -> Option<&str> {
    stderr
        .lines()
        .find(|l| l.starts_with("{\"type\":\"monitor\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_network_follows_the_first_with_its_own_mac() {
        let mut cfg = MonitorConfig::new("nf.elf".into(), "-- fw ta0 tb0");
        let tap = |i: &str| MonitorNet::Tap { ifname: i.into() };
        cfg.net = Some(tap("ta0"));
        cfg.net2 = Some(tap("tb0"));
        let a = cfg.args().join(" ");
        assert!(
            a.contains(
                "--mac 52:54:00:12:34:56 --mac 52:54:00:12:34:57 --net tap=ta0 --net tap=tb0 "
            ),
            "{a}"
        );
        cfg.net2 = None;
        let a = cfg.args().join(" ");
        assert!(a.contains("--mac 52:54:00:12:34:56 --net tap=ta0 "), "{a}");
        assert_eq!(a.matches("--net ").count(), 1, "{a}");
    }

    #[test]
    fn the_message_is_one_line_without_the_statistics() {
        let stderr = "vtnt-monitor: the guest faulted at rip 0x1234 (page fault)\n\
                      {\"type\":\"monitor\",\"exits\":3}\n\n";
        assert_eq!(
            message(stderr),
            "vtnt-monitor: the guest faulted at rip 0x1234 (page fault)"
        );
        assert_eq!(message("a\nb\n"), "a; b");
    }
}
