//! Running one measurement job in a microVM end to end: [`run_job`] encodes the
//! [`JobSpec`] (`vtnt-jobspec`, long target lists as a boot module), boots the unikernel
//! on the chosen network (a running `vtnt lab`'s VM front, or a TAP device), and splits
//! the console into the scamper JSON result lines and everything else. An image that
//! runs no job (the stream endpoint) goes the same way with its own words after `--`
//! ([`Payload::Words`]).
//!
//! ```no_run
//! use vtnt_unikernel::launch::{run_job, JobNet, RunSpec};
//! # fn spec() -> vtnt_jobspec::JobSpec { unimplemented!() }
//! let out = run_job(&RunSpec::new(spec(), JobNet::Lab { name: "vtnt-lab".into() }))?;
//! for line in &out.json_lines {
//!     println!("{line}");
//! }
//! # Ok::<(), vtnt_unikernel::Error>(())
//! ```

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use vtnt_jobspec::JobSpec;
use vtnt_lab_linux::state::to_v6;

use crate::accel::{kvm_kind, Accelerator};
use crate::firecracker::{self, FcConfig};
use crate::image;
use crate::monitor::{self, MonitorConfig, MonitorNet};
use crate::qemu::{self, Accel, Machine, NetBackend, VmConfig};
use crate::{lab, ConsoleTap, Error, GuestStatus, Outcome};

/// The guest's network, before the chosen VMM's own form of it.
enum GuestNet {
    /// A lab slot: QEMU's `-netdev` value and id, or the same UDP ends for the monitor.
    Lab {
        netdev: String,
        id: String,
        local: SocketAddr,
        remote: SocketAddr,
    },
    Tap(String),
}

/// Targets beyond this many go to a boot module instead of the command line.
pub const MAX_INLINE_TARGETS: usize = 16;

/// Which VMM runs the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vmm {
    /// `vtnt-monitor` where it can run the job (see [`Vmm::resolve`]), else QEMU.
    Auto,
    /// Our own monitor (`vtnt-monitor`, [`crate::monitor`]): needs `/dev/kvm`.
    Monitor,
    Qemu,
    /// Needs a `firecracker` binary, working KVM and a TAP network.
    Firecracker,
}

impl Vmm {
    /// Parses `auto`, `vtnt` (also `monitor`), `qemu`, `firecracker` (also `fc`).
    pub fn from_name(s: &str) -> Option<Vmm> {
        match s {
            "auto" => Some(Vmm::Auto),
            "vtnt" | "monitor" => Some(Vmm::Monitor),
            "qemu" => Some(Vmm::Qemu),
            "firecracker" | "fc" => Some(Vmm::Firecracker),
            _ => None,
        }
    }

    /// The name `from_name` takes.
    pub fn name(self) -> &'static str {
        match self {
            Vmm::Auto => "auto",
            Vmm::Monitor => "vtnt",
            Vmm::Qemu => "qemu",
            Vmm::Firecracker => "firecracker",
        }
    }

    /// The VMM that runs `spec` (its image `image`): `Auto` is the monitor when it is
    /// usable here ([`default_vmm`]) and the job asks for nothing only QEMU has (another
    /// machine type, TCG, port-0x80 step marks); otherwise QEMU.
    pub fn resolve(self, spec: &RunSpec, image: &Path) -> Vmm {
        match self {
            Vmm::Auto
                if spec.machine == Machine::Microvm && spec.accel != Accel::Tcg && !spec.marks =>
            {
                default_vmm(image)
            }
            Vmm::Auto => Vmm::Qemu,
            v => v,
        }
    }

    /// The accelerator this VMM runs `image` under (`accel`: what QEMU was asked for).
    pub fn accelerator(self, image: &Path, accel: Accel) -> Accelerator {
        match self {
            Vmm::Monitor | Vmm::Firecracker => kvm_kind().unwrap_or(Accelerator::Kvm),
            Vmm::Qemu | Vmm::Auto => accel.resolve(image),
        }
    }
}

/// The VMM of a plain microVM job booting `image` on this host: the monitor where
/// `/dev/kvm` works, the monitor is installed ([`crate::monitor::binary`]) and boots here
/// ([`crate::monitor::boots`]), else QEMU. A monitor missing where KVM works is said on
/// stderr, once.
pub fn default_vmm(image: &Path) -> Vmm {
    if kvm_kind().is_none() {
        return Vmm::Qemu;
    }
    match crate::monitor::binary() {
        Ok(_) if crate::monitor::boots(image) => Vmm::Monitor,
        Ok(_) => Vmm::Qemu,
        Err(e) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| tracing::warn!("{e}: microVMs run under QEMU"));
            Vmm::Qemu
        }
    }
}

/// The guest's network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobNet {
    /// A running `vtnt lab` (`/run/vtnt/lab/<name>/vm.json`): the first free VM slot.
    Lab { name: String },
    /// An existing TAP device (in `netns`, where the VMM then runs) on a segment where
    /// `gateway` routes; `guest` is `ADDR/LEN`; `ipv6` the guest's static IPv6 side, if
    /// it has one: (`ADDR6/LEN6`, `GATEWAY6`).
    Tap {
        ifname: String,
        netns: Option<String>,
        guest: String,
        gateway: String,
        ipv6: Option<(String, String)>,
    },
}

/// What the guest runs: what follows `--` on its command line.
// one per run, as the `JobSpec` held inline before: its size costs nothing
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Payload {
    /// A measurement job: `vtnt-jobspec`'s line (long target lists as a boot module).
    Job(JobSpec),
    /// The words of an image that runs no job: the stream endpoint's (`vtnt-kernel`
    /// feature `stream`) `stream port=P tests=N`.
    Words(String),
}

impl Payload {
    /// The words after `--`, and the boot module's text when the targets do not fit.
    fn encode(&self, max_inline: usize) -> (String, Option<String>) {
        match self {
            Payload::Job(job) => vtnt_jobspec::encode_split(job, max_inline),
            Payload::Words(w) => (w.clone(), None),
        }
    }

    /// Whether the job has an IPv6 target (in its list: a boot module's targets are not
    /// looked at).
    fn has_ipv6_target(&self) -> bool {
        matches!(self, Payload::Job(job) if matches!(&job.targets,
            vtnt_jobspec::Targets::List(t) if t.iter().any(|a| a.is_ipv6())))
    }

    /// How long the guest holds after its results (a job's `hold`).
    fn hold(&self) -> Duration {
        match self {
            Payload::Job(job) => job.hold,
            Payload::Words(_) => Duration::ZERO,
        }
    }
}

/// One job (or other payload) to run in a microVM.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub vmm: Vmm,
    pub machine: Machine,
    pub memory_mib: u32,
    pub payload: Payload,
    pub net: JobNet,
    pub accel: Accel,
    /// Guest watchdog; the host kills the VM 10 s later (plus the job's `hold`, which the
    /// guest spends after its results, outside the watchdog).
    pub timeout: Duration,
    /// `hostname` of the `cycle-start` line (the native CLI prints the machine's).
    pub hostname: Option<String>,
    /// The image to boot; `None`: the installed job image ([`image::job`]).
    pub image: Option<PathBuf>,
    /// The guest asks for its address by DHCP (`ip=dhcp`; the lab's VM front serves it)
    /// instead of taking the lab slot's (or the TAP spec's) static address.
    pub dhcp: bool,
    /// The guest marks its boot steps on port 0x80 (`marks`, for [`crate::breakdown`]).
    pub marks: bool,
    /// A command the VMM process runs under, whichever VMM it is ([`VmConfig::wrapper`],
    /// [`MonitorConfig::wrapper`]): `perf record`, a placement into cgroups.
    pub wrapper: Vec<String>,
    /// Where console lines also go as they arrive.
    pub console: Option<ConsoleTap>,
    /// Where the boot module of a long target list is written while the VM runs (`None`:
    /// the temporary directory); a caller that cleans up after itself names its own.
    pub scratch: Option<PathBuf>,
}

impl RunSpec {
    /// The automatic VMM (microvm shape), 16 MiB, automatic acceleration, a 300 s
    /// watchdog, no hostname, a static address.
    pub fn new(job: JobSpec, net: JobNet) -> RunSpec {
        RunSpec::with_payload(Payload::Job(job), net)
    }

    /// The same defaults with another payload.
    pub fn with_payload(payload: Payload, net: JobNet) -> RunSpec {
        RunSpec {
            vmm: Vmm::Auto,
            machine: Machine::Microvm,
            memory_mib: 16,
            payload,
            net,
            accel: Accel::Auto,
            timeout: Duration::from_secs(300),
            hostname: None,
            image: None,
            dhcp: false,
            marks: false,
            wrapper: Vec::new(),
            console: None,
            scratch: None,
        }
    }
}

/// Host-side timings of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timings {
    /// From spawning the VMM to the guest's `first-probe` line.
    pub spawn_to_first_probe: Option<Duration>,
    /// From spawning the VMM to its exit.
    pub total: Duration,
    /// Guest time (TSC) from its first instruction to its first probe, in microseconds.
    pub guest_first_probe_us: Option<u64>,
}

/// What a job run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The scamper JSON lines, exactly as the native CLI prints them.
    pub json_lines: Vec<String>,
    /// Every other console line (boot, NIC, timing, exit, `vtnt: ...` messages).
    pub diagnostics: Vec<String>,
    pub status: GuestStatus,
    pub timings: Timings,
    /// The VMM's peak resident set, KiB.
    pub peak_rss_kib: Option<u64>,
    /// The VMM's largest PSS seen, KiB ([`crate::outcome::Outcome::peak_pss_kib`]).
    pub peak_pss_kib: Option<u64>,
    /// The VMM's host CPU time (user + system, 10 ms resolution).
    pub cpu: Option<Duration>,
    /// The accelerator the VM ran under.
    pub accel: crate::accel::Accelerator,
    /// The VMM that ran it.
    pub vmm: Vmm,
    /// The VMM's stderr.
    pub vmm_stderr: String,
    /// The kernel command line used.
    pub cmdline: String,
}

impl RunOutcome {
    /// The first `vtnt: error: ...` diagnostic, if any.
    pub fn error(&self) -> Option<&str> {
        self.diagnostics
            .iter()
            .find_map(|l| l.strip_prefix("vtnt: error: "))
    }
}

/// Whether a console line is a result: scamper JSON (cycle-start/stop, trace, ping) or a
/// micro job's line.
pub fn is_result_line(line: &str) -> bool {
    [
        "cycle-start",
        "cycle-stop",
        "trace",
        "ping",
        vtnt_jobspec::micro::TYPE,
    ]
    .iter()
    .any(|t| line.starts_with(&format!("{{\"type\":\"{t}\"")))
}

/// Splits console lines into (results, diagnostics).
pub fn split_console(lines: &[String]) -> (Vec<String>, Vec<String>) {
    lines.iter().cloned().partition(|l| is_result_line(l))
}

/// Where the guest is on its network, as its command line says it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestAddr {
    /// `ADDR/LEN` (unused when the run asks for DHCP).
    pub guest: String,
    pub gateway: String,
    /// The gateway's MAC, when known (a lab's): the guest then sends no ARP request.
    pub gateway_mac: Option<String>,
    /// The guest's static IPv6 side, if it has one: (`ADDR6/LEN6`, `GATEWAY6`).
    pub ipv6: Option<(String, String)>,
}

impl GuestAddr {
    /// A lab slot's guest: its address and gateway (`ADDR/LEN`, `GATEWAY`), at the
    /// gateway's MAC, with their IPv6 twins (`vtnt_lab_linux::state::to_v6`, on the twin
    /// of the slot's prefix: docs/lab.md "Attaching VMs").
    pub fn lab(address: &str, gateway: &str, gateway_mac: &str) -> GuestAddr {
        let twins = || {
            let (addr, len) = address.split_once('/')?;
            let (addr, len): (Ipv4Addr, u8) = (addr.parse().ok()?, len.parse().ok()?);
            let gw: Ipv4Addr = gateway.parse().ok()?;
            Some((
                format!("{}/{}", to_v6(addr), 96 + len),
                to_v6(gw).to_string(),
            ))
        };
        GuestAddr {
            guest: address.to_string(),
            gateway: gateway.to_string(),
            gateway_mac: Some(gateway_mac.to_string()),
            ipv6: twins(),
        }
    }
}

/// The kernel command line for `spec` on a guest at `at` (or `ip=dhcp` when
/// `spec.dhcp`), and the boot module text (long target lists).
pub fn cmdline(spec: &RunSpec, at: &GuestAddr) -> (String, Option<String>) {
    let (job, module) = spec.payload.encode(MAX_INLINE_TARGETS);
    let options = options(spec, at);
    (format!("{options} -- {job}"), module)
}

/// The kernel command line of a guest that is a process (the spt platform): no boot
/// module, so every target inline, and the interface's own MAC `mac` (a socket has none).
pub fn process_cmdline(spec: &RunSpec, at: &GuestAddr, mac: &str) -> String {
    let options = options(spec, at);
    format!(
        "{options} mac={mac} -- {}",
        spec.payload.encode(usize::MAX).0
    )
}

/// The options before the job (see [`cmdline`]). A DHCP guest with IPv6 targets takes
/// its IPv6 address from the link too (`ip6=auto`: router discovery, then DHCPv6 on a
/// lab, whose front gives the twin of the lease).
fn options(spec: &RunSpec, at: &GuestAddr) -> String {
    let epoch_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let ip = match &at.ipv6 {
        _ if spec.dhcp && spec.payload.has_ipv6_target() => "ip=dhcp ip6=auto".to_string(),
        _ if spec.dhcp => "ip=dhcp".to_string(),
        Some((ip6, gw6)) => format!("ip={} gw={} ip6={ip6} gw6={gw6}", at.guest, at.gateway),
        None => format!("ip={} gw={}", at.guest, at.gateway),
    };
    let mut c = format!(
        "console=ttyS0 {ip} watchdog={} epoch_us={epoch_us}",
        spec.timeout.as_secs().max(1)
    );
    if let Some(m) = &at.gateway_mac {
        c.push_str(&format!(" gwmac={m}"));
    }
    if spec.marks {
        c.push_str(" marks");
    }
    if let Some(h) = spec.hostname.as_deref().filter(|h| valid_hostname(h)) {
        c.push_str(&format!(" hostname={h}"));
    }
    c
}

fn valid_hostname(h: &str) -> bool {
    !h.is_empty()
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
}

/// Boots the unikernel with `spec`'s job and waits for it.
pub fn run_job(spec: &RunSpec) -> Result<RunOutcome, Error> {
    let image = match &spec.image {
        Some(p) => p.clone(),
        None => image::job()?,
    };
    let vmm = spec.vmm.resolve(spec, &image);
    // A lab slot stays ours until the VM is gone.
    let mut slot_lock = None;
    let (at, net, mac, netns) = match &spec.net {
        JobNet::Lab { name } => {
            let (slot, lock) = lab::free_slot(name)?;
            slot_lock = Some(lock);
            let at = GuestAddr::lab(&slot.address, &slot.gateway, &slot.gateway_mac);
            let net = GuestNet::Lab {
                netdev: slot.netdev,
                id: slot.id,
                local: slot.local,
                remote: slot.remote,
            };
            (at, net, slot.mac, None)
        }
        JobNet::Tap {
            ifname,
            netns,
            guest,
            gateway,
            ipv6,
        } => (
            GuestAddr {
                guest: guest.clone(),
                gateway: gateway.clone(),
                gateway_mac: None,
                ipv6: ipv6.clone(),
            },
            GuestNet::Tap(ifname.clone()),
            "52:54:00:12:34:56".to_string(),
            netns.clone(),
        ),
    };
    let (cmdline, module) = cmdline(spec, &at);
    let module_file = match &module {
        Some(text) => {
            let p = spec
                .scratch
                .clone()
                .unwrap_or_else(std::env::temp_dir)
                .join(format!(
                    "vtnt-targets-{}-{}",
                    std::process::id(),
                    crate::netns::unique_name("m")
                ));
            std::fs::write(&p, text)?;
            Some(TempFile(p))
        }
        None => None,
    };
    let host_timeout = spec.timeout + spec.payload.hold() + Duration::from_secs(10);
    let out: Outcome = match vmm {
        Vmm::Monitor => {
            let mut cfg = MonitorConfig::new(image, &cmdline);
            cfg.memory_mib = spec.memory_mib;
            cfg.net = Some(match net {
                GuestNet::Lab { local, remote, .. } => MonitorNet::Udp { local, remote },
                GuestNet::Tap(ifname) => MonitorNet::Tap { ifname },
            });
            cfg.mac = mac;
            cfg.timeout = host_timeout;
            cfg.netns = netns;
            cfg.modules = module_file.iter().map(|f| f.0.clone()).collect();
            cfg.wrapper = spec.wrapper.clone();
            cfg.console = spec.console.clone();
            monitor::run(&cfg)?
        }
        Vmm::Qemu | Vmm::Auto => {
            let mut cfg = VmConfig::new(image, spec.machine, &cmdline);
            cfg.memory_mib = spec.memory_mib;
            cfg.net = Some(match net {
                GuestNet::Lab { netdev, id, .. } => NetBackend::Netdev { netdev, id },
                GuestNet::Tap(ifname) => NetBackend::Tap { ifname },
            });
            cfg.mac = mac;
            cfg.accel = spec.accel;
            cfg.timeout = host_timeout;
            cfg.netns = netns;
            cfg.module = module_file.as_ref().map(|f| f.0.clone());
            cfg.wrapper = spec.wrapper.clone();
            cfg.console = spec.console.clone();
            qemu::run(&cfg)?
        }
        Vmm::Firecracker => {
            let GuestNet::Tap(ifname) = net else {
                return Err(Error::Setup {
                    command: "firecracker".into(),
                    stderr: "Firecracker attaches TAP devices only; the lab's VM front is a UDP socket (use qemu)".into(),
                });
            };
            if !spec.wrapper.is_empty() {
                return Err(Error::Setup {
                    command: "firecracker".into(),
                    stderr: "the Firecracker path runs no wrapper (perf, cgroup placement) yet"
                        .into(),
                });
            }
            if module.is_some() {
                return Err(Error::Setup {
                    command: "firecracker".into(),
                    stderr: format!(
                        "more than {MAX_INLINE_TARGETS} targets need a boot module, which the Firecracker path does not pass yet"
                    ),
                });
            }
            let mut cfg = FcConfig::new(image, &cmdline);
            cfg.memory_mib = spec.memory_mib;
            cfg.tap = Some(ifname);
            cfg.mac = mac;
            cfg.timeout = host_timeout;
            cfg.netns = netns;
            cfg.console = spec.console.clone();
            firecracker::run(&cfg)?
        }
    };
    drop(module_file);
    drop(slot_lock);
    let (json_lines, diagnostics) = split_console(&out.lines);
    let first = out
        .lines
        .iter()
        .position(|l| l.starts_with("{\"type\":\"first-probe\""));
    let timings = Timings {
        spawn_to_first_probe: first.and_then(|i| out.line_times.get(i).copied()),
        total: out.wall,
        guest_first_probe_us: out.json_u64("first-probe", "guest_us"),
    };
    Ok(RunOutcome {
        json_lines,
        diagnostics,
        status: out.status,
        timings,
        peak_rss_kib: out.peak_rss_kib,
        peak_pss_kib: out.peak_pss_kib,
        cpu: out.cpu,
        accel: out.accel,
        vmm,
        vmm_stderr: out.stderr,
        cmdline,
    })
}

/// A file removed on drop.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vtnt_jobspec::{JobKind, Targets};
    use vtnt_tnt::TntConfig;

    #[test]
    fn console_splits_into_results_and_diagnostics() {
        let lines: Vec<String> = [
            "vtnt-kernel 0.1.0 booting (pvh v1, cmdline \"\")",
            "{\"type\":\"boot\",\"tsc_hz\":1}",
            "{\"type\":\"cycle-start\", \"list_name\":\"default\", \"id\":0, \"start_time\":1}",
            "{\"type\":\"trace\",\"version\":\"0.1\"}",
            "{\"type\":\"ping\", \"version\":\"0.4\"}",
            "{\"type\":\"first-probe\",\"guest_us\":5}",
            "{\"type\":\"cycle-stop\", \"list_name\":\"default\", \"id\":0, \"stop_time\":2}",
            "{\"type\":\"exit\",\"status\":0}",
        ]
        .map(String::from)
        .to_vec();
        let (r, d) = split_console(&lines);
        assert_eq!(r.len(), 4);
        assert_eq!(d.len(), 4);
        assert!(r[1].starts_with("{\"type\":\"trace\""));
    }

    #[test]
    fn long_target_lists_become_a_module() {
        let targets = (1..=20)
            .map(|i| format!("198.51.100.{i}").parse().unwrap())
            .collect();
        let job = JobSpec::new(JobKind::Tnt(TntConfig::default()), targets);
        let mut spec = RunSpec::new(job, JobNet::Lab { name: "x".into() });
        spec.hostname = Some("host-1".into());
        let (c, m) = cmdline(
            &spec,
            &GuestAddr::lab("192.0.2.10/24", "192.0.2.1", "02:00:00:00:00:01"),
        );
        assert!(
            c.starts_with(
                "console=ttyS0 ip=192.0.2.10/24 gw=192.0.2.1 ip6=2001:db8:64::c000:20a/120 \
                 gw6=2001:db8:64::c000:201 watchdog=300 epoch_us="
            ),
            "{c}"
        );
        assert!(
            c.ends_with(
                " gwmac=02:00:00:00:00:01 hostname=host-1 -- vtnt-job=1 kind=tnt targets=@module"
            ),
            "{c}"
        );
        assert_eq!(m.unwrap().lines().count(), 20);
        assert_eq!(
            vtnt_jobspec::decode(c.split(" -- ").nth(1).unwrap())
                .unwrap()
                .targets,
            Targets::Module
        );
        spec.dhcp = true;
        let (c, _) = cmdline(
            &spec,
            &GuestAddr::lab("192.0.2.10/24", "192.0.2.1", "02:00:00:00:00:01"),
        );
        assert!(
            c.starts_with("console=ttyS0 ip=dhcp watchdog=300 epoch_us="),
            "{c}"
        );
    }
}
