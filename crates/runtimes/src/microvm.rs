//! The `microvm` runtime: the vTNT unikernel under `vtnt-monitor` where `/dev/kvm` works,
//! else under QEMU's microvm machine (`vtnt_unikernel::launch::default_vmm`).
//!
//! The image is `vtnt-unikernel`'s build of the unikernel, registered in the image cache. An
//! instance is `vtnt_unikernel::launch::run_job` called with the typed job and the downloaded image
//! in a thread of this process, whose VMM process runs under the instance's cgroup
//! ([`Cgroup::wrapper`]): the VMM alone is the instance, measured like a container's
//! processes. The job's hold is in the job itself (`hold=`): the guest sits halted that
//! long after its results, then powers off.

use crate::error::{Error, IoContext, Result};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use vtnt_unikernel::accel::Accelerator;
use vtnt_unikernel::launch::{JobNet, RunOutcome, RunSpec, Vmm};
use vtnt_unikernel::qemu::Accel;
use vtnt_unikernel::GuestStatus;

use crate::cgroup::Cgroup;
use crate::net::Attached;
use crate::paths;
use crate::runtime::{BuildOptions, ImageInfo, Runtime};
use crate::spec::InstanceSpec;

/// File name of the unikernel in the image cache.
pub const IMAGE_NAME: &str = "vtnt-unikernel.elf";

/// Copies the installed unikernel (`lib/vtnt/vtnt-unikernel.elf`) into the image cache.
pub fn build_image(_opts: &BuildOptions) -> Result<ImageInfo> {
    let (path, pin) = paths::stage(vtnt_artifacts::Artifact::JobVm, IMAGE_NAME)?;
    Ok(ImageInfo {
        runtime: Runtime::Microvm,
        path,
        download_bytes: pin.size,
        size_bytes: pin.size,
        size_note: "unikernel ELF (PVH)".into(),
        pin: Some(pin),
    })
}

/// The accelerator `vmm` boots `image` under: KVM (of this host's kind) under
/// `vtnt-monitor` where it is usable, else QEMU's choice `accel` (`Auto`: `VTNT_ACCEL`,
/// else KVM when the image boots under it, else TCG; `vtnt_unikernel::qemu::resolve`).
pub fn accel(image: &Path, vmm: Vmm, accel: Accel) -> Accelerator {
    let vmm = match vmm {
        Vmm::Auto => vtnt_unikernel::launch::default_vmm(image),
        v => v,
    };
    vmm.accelerator(image, accel)
}

/// A unikernel instance booting or running.
pub struct Running {
    /// The VMM's run and when it ended (so that the time does not depend on when it is
    /// joined).
    thread: JoinHandle<(
        std::result::Result<RunOutcome, vtnt_unikernel::Error>,
        Instant,
    )>,
    started: Instant,
    console: vtnt_unikernel::ConsoleTap,
}

/// Boots one unikernel instance of `spec`'s job from `image` under `vmm`, on a free VM
/// slot of the lab's front or on a TAP device, its VMM in `cgroup`; `timeout`: the
/// guest's watchdog.
pub fn start(
    image: &Path,
    net: &Attached,
    spec: &InstanceSpec,
    cgroup: &Cgroup,
    vmm: Vmm,
    timeout: Duration,
) -> Result<Running> {
    let job_net = match net {
        Attached::Lab(lab) => JobNet::Lab {
            name: lab.name.clone(),
        },
        Attached::Tap(t) => JobNet::Tap {
            ifname: t.ifname.clone(),
            netns: t.netns.clone(),
            guest: t.guest(),
            gateway: t.gateway.to_string(),
            ipv6: t.guest6(),
        },
        Attached::Host => {
            return Err(Error::Network(
                "the unikernel reaches a network through a lab or a TAP device".into(),
            ))
        }
    };
    let mut run = RunSpec::new(spec.job.clone(), job_net);
    run.vmm = vmm;
    run.accel = spec.accel;
    run.image = Some(image.to_path_buf());
    run.dhcp = spec.dhcp;
    run.timeout = timeout;
    run.hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string());
    run.wrapper = cgroup.wrapper();
    // a long target list's boot module, with the rest of the run's files
    run.scratch = Some(crate::paths::run_dir()?);
    let console = vtnt_unikernel::ConsoleTap::default();
    run.console = Some(console.clone());
    let started = Instant::now();
    let thread = std::thread::Builder::new()
        .name("vtnt-microvm".into())
        .spawn(move || (vtnt_unikernel::launch::run_job(&run), Instant::now()))
        .doing(|| "spawning the microVM's thread".into())?;
    Ok(Running {
        thread,
        started,
        console,
    })
}

impl Running {
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Its console's lines as they arrive.
    pub fn console(&self) -> vtnt_unikernel::ConsoleTap {
        self.console.clone()
    }

    /// Whether the VM has stopped.
    pub fn finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for the VM (its own watchdog bounds the wait).
    pub fn wait(self) -> Result<crate::ran::Ran> {
        let (out, ended) = self
            .thread
            .join()
            .map_err(|_| Error::Runtime("the microVM's thread panicked".into()))?;
        let out = out.map_err(|e| Error::Runtime(format!("the microVM: {e}")))?;
        let elapsed = ended.saturating_duration_since(self.started);
        let code = match out.status {
            GuestStatus::Exited(n) => Some(i32::from(n)),
            GuestStatus::TimedOut | GuestStatus::Vanished => None,
        };
        let mut stderr = out.diagnostics.join("\n");
        stderr.push('\n');
        stderr.push_str(&out.vmm_stderr);
        Ok(crate::ran::Ran {
            stdout: out.json_lines.iter().map(|l| format!("{l}\n")).collect(),
            stderr,
            code,
            elapsed,
            accelerator: Some(format!("{} ({})", out.accel, vmm_label(out.vmm))),
            spawn_to_first_probe: out.timings.spawn_to_first_probe,
        })
    }
}

/// How `vmm` is named to users.
pub fn vmm_label(vmm: Vmm) -> &'static str {
    match vmm {
        Vmm::Monitor => "vtnt-monitor",
        Vmm::Firecracker => "Firecracker",
        Vmm::Qemu | Vmm::Auto => "QEMU",
    }
}

/// Starts the firewall network function `image` (`vtnt-kernel --features fw`) under `vmm`
/// (`Auto`: `vtnt-monitor` where /dev/kvm works, else QEMU) between the existing TAP
/// devices `taps` of this network namespace (the monitor's networks 0 and 1, or QEMU's
/// first and second virtio-net devices, named so in the rules' `-i`/`-o`), with the rule
/// file `rules` as its boot module and a connection table of `max_conns`; memory for the
/// rules (`rule_bytes` of text: about 30 MiB, plus 6 bytes for each byte of the file,
/// which holds a million rules' text, model and compiled tables). It runs until it is
/// killed; its console says when its rules hold. Returns the VMM it runs under and the
/// accelerator.
pub fn start_nf(
    image: &Path,
    taps: [&str; 2],
    rules: &Path,
    max_conns: u32,
    vmm: Vmm,
) -> Result<(crate::proc::Supervised, Vmm, Accelerator)> {
    use vtnt_unikernel::monitor::{self, MonitorConfig, MonitorNet};
    use vtnt_unikernel::qemu::{Machine, NetBackend, VmConfig};
    let rule_bytes = std::fs::metadata(rules)
        .doing(|| format!("reading {}", rules.display()))?
        .len();
    let cmdline = format!(
        "console=ttyS0 -- fw {} {} max-conns={max_conns}",
        taps[0], taps[1]
    );
    let memory_mib = (32 + rule_bytes * 6 / (1 << 20)).min(u32::MAX as u64 - 1) as u32;
    let vmm = match vmm {
        Vmm::Auto => vtnt_unikernel::launch::default_vmm(image),
        v => v,
    };
    let (command, accel) = match vmm {
        Vmm::Monitor => {
            let mut cfg = MonitorConfig::new(image.to_path_buf(), &cmdline);
            // the monitor takes an even number of MiB
            cfg.memory_mib = memory_mib.next_multiple_of(2);
            cfg.net = Some(MonitorNet::Tap {
                ifname: taps[0].into(),
            });
            cfg.net2 = Some(MonitorNet::Tap {
                ifname: taps[1].into(),
            });
            cfg.modules = vec![rules.to_path_buf()];
            // it runs until it is killed (the monitor's watchdog allows a year at most)
            cfg.timeout = Duration::from_secs(365 * 86400);
            let command = monitor::command(&cfg)
                .map_err(|e| Error::Runtime(format!("the NF's vtnt-monitor: {e}")))?;
            (command, vmm.accelerator(image, Accel::Auto))
        }
        Vmm::Qemu | Vmm::Auto => {
            let mut cfg = VmConfig::new(image.to_path_buf(), Machine::Microvm, &cmdline);
            cfg.memory_mib = memory_mib;
            cfg.net = Some(NetBackend::Tap {
                ifname: taps[0].into(),
            });
            cfg.net2 = Some(NetBackend::Tap {
                ifname: taps[1].into(),
            });
            cfg.module = Some(rules.to_path_buf());
            let accel = vtnt_unikernel::qemu::resolve(image);
            (cfg.command(accel), accel)
        }
        Vmm::Firecracker => {
            return Err(Error::Runtime(
                "the network function runs under vtnt-monitor or QEMU, not Firecracker".into(),
            ))
        }
    };
    let what = format!("the NF's {}", vmm_label(vmm));
    let child = crate::proc::Supervised::spawn(command, &what)?;
    Ok((child, vmm, accel))
}
