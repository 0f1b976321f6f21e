//! The `spt` runtime: the vTNT unikernel as a sandboxed Linux process (Solo5's spt model;
//! the interface is `vtnt_abi::spt`). The image is the kernel built for the process platform
//! (`vtnt-kernel`'s build with `spt`): a static ELF of a few hundred KiB.
//!
//! The tender (`vtnt-tender-spt`, beside the hvt monitor) is this process's child
//! between a `vfork`-style `clone` and `execve`: it starts a process group, joins the instance's cgroup, puts the network (a UDP socket bound to a free slot of the lab's VM
//! front and connected to the front, one Ethernet frame per datagram, as QEMU's
//! `-netdev dgram`; or a TAP device, one frame per read and write: `--net tap:` jobs
//! and [`start_on_tap`], `vtnt bench net`'s endpoint) at descriptor 3 and non-blocking, keeps standard output (the
//! console) and closes every other descriptor, sets `no_new_privs`, installs the seccomp
//! filter (the guest's calls, its `execve` pinned to the image's path, and `seccomp`),
//! and executes the guest with its command line. Nothing of the tender stays resident:
//! an instance is one process, the guest. The guest's first act installs its own,
//! stricter filter (no `execve`, no `seccomp`).
//!
//! A guest that makes a call outside its filter is killed by SIGSYS;
//! [`outcome`] (the tender's) says so.

use std::net::UdpSocket;
use std::os::fd::OwnedFd;
use std::path::Path;

use crate::error::{Error, IoContext, Result};
pub use vtnt_tender_spt::outcome;

use crate::cgroup::Cgroup;
use crate::net::{Attached, Tap};
use crate::paths;
use crate::proc::Supervised;
use crate::runtime::{BuildOptions, ImageInfo, Runtime};
use crate::spec::InstanceSpec;
use vtnt_unikernel::launch::GuestAddr;

/// File name of the spt guest in the image cache.
pub const IMAGE_NAME: &str = "vtnt-spt.elf";

/// Copies the installed kernel for the process platform (`lib/vtnt/vtnt-spt.elf`) into
/// the image cache.
pub fn build_image(_opts: &BuildOptions) -> Result<ImageInfo> {
    let (path, pin) = paths::stage(vtnt_artifacts::Artifact::JobSpt, IMAGE_NAME)?;
    Ok(ImageInfo {
        runtime: Runtime::Spt,
        path,
        download_bytes: pin.size,
        size_bytes: pin.size,
        size_note: "unikernel ELF (static Linux executable)".into(),
        pin: Some(pin),
    })
}

/// Checks that the downloaded `file` is a static x86_64 Linux executable and makes it
/// executable: a corrupt image is refused here, with its reason, not by a dying guest.
pub fn install(file: &Path) -> Result<std::path::PathBuf> {
    let head = std::fs::read(file).doing(|| format!("reading the spt image {}", file.display()))?;
    let elf = head.len() > 64
        && head.starts_with(b"\x7fELF\x02\x01")
        && u16::from_le_bytes([head[16], head[17]]) == 2 // ET_EXEC: static, not PIE
        && u16::from_le_bytes([head[18], head[19]]) == 62; // EM_X86_64
    if !elf {
        return Err(Error::Image(format!(
            "the spt image {} is not a static x86_64 ELF executable (corrupt or not an spt build)",
            file.display()
        )));
    }
    paths::make_executable(file)
}

/// A started guest: the process, the lab slot it holds until it is dropped (none on a
/// TAP device), `CLOCK_MONOTONIC` just before the fork (for [`spawn_to_first_probe`]) and
/// how long the tender took to join the instance's cgroup (on cgroup v1 the kernel makes
/// that write wait for an RCU grace period unless `favordynmods` is set: often most of
/// the time to the first probe).
pub struct Started {
    pub child: Supervised,
    pub slot: Option<vtnt_unikernel::lab::SlotLock>,
    pub spawn_ns: u64,
    pub cgroup_join: std::time::Duration,
}

/// Starts the guest `image` with `spec`'s job in `cgroup`: on a free slot of the lab's VM
/// front, or on an existing TAP device at the address `--net tap:` gave it.
pub fn start(
    image: &Path,
    net: &Attached,
    spec: &InstanceSpec,
    cgroup: &Cgroup,
    timeout: std::time::Duration,
) -> Result<Started> {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string());
    let (dev, cmdline, slot) = match net {
        Attached::Lab(lab) => {
            let (slot, lock) = vtnt_unikernel::lab::free_slot(&lab.name)
                .map_err(|e| Error::Lab(format!("lab `{}`: {e}", lab.name)))?;
            let sock = UdpSocket::bind(slot.local)
                .doing(|| format!("binding the guest's end {}", slot.local))?;
            sock.connect(slot.remote)
                .doing(|| format!("connecting to the lab's VM front {}", slot.remote))?;
            let mut run = vtnt_unikernel::launch::RunSpec::new(
                spec.job.clone(),
                vtnt_unikernel::launch::JobNet::Lab {
                    name: lab.name.clone(),
                },
            );
            run.timeout = timeout;
            run.hostname = hostname;
            run.dhcp = spec.dhcp;
            let at = GuestAddr::lab(&slot.address, &slot.gateway, &slot.gateway_mac);
            let cmdline = vtnt_unikernel::launch::process_cmdline(&run, &at, &slot.mac);
            (OwnedFd::from(sock), cmdline, Some(lock))
        }
        Attached::Tap(tap) => {
            let payload = vtnt_unikernel::launch::Payload::Job(spec.job.clone());
            let (dev, cmdline) = on_tap(tap, payload, timeout, hostname, spec.dhcp)?;
            (dev, cmdline, None)
        }
        Attached::Host => {
            return Err(Error::Network(
                "the spt runtime reaches a network through a lab's VM front (--net lab:NAME) \
                 or a TAP device (--net tap:...)"
                    .into(),
            ))
        }
    };
    let fds = vtnt_tender_spt::Descriptors::Job { net: dev };
    let (child, spawn_ns, cgroup_join) = launch(image, fds, cmdline, Some(cgroup))?;
    Ok(Started {
        child,
        slot,
        spawn_ns,
        cgroup_join,
    })
}

/// The MAC address of a guest on a TAP device (a process's frames carry the one it is
/// given; its lab slot's otherwise).
const TAP_MAC: &str = "52:54:00:73:70:74";

/// Starts the guest `image` with `payload` (an image that runs no job: the stream
/// endpoint's words) on the existing TAP device `tap`, at its static address, in
/// `cgroup`; the guest's watchdog is `timeout`.
pub fn start_on_tap(
    image: &Path,
    tap: &Tap,
    payload: vtnt_unikernel::launch::Payload,
    cgroup: &Cgroup,
    timeout: std::time::Duration,
) -> Result<Supervised> {
    let (net, cmdline) = on_tap(tap, payload, timeout, None, false)?;
    let fds = vtnt_tender_spt::Descriptors::Job { net };
    Ok(launch(image, fds, cmdline, Some(cgroup))?.0)
}

/// The TAP device `tap`, opened, and the command line of a guest on it with `payload`
/// (its addresses by DHCP, and SLAAC or DHCPv6, when `dhcp`).
fn on_tap(
    tap: &Tap,
    payload: vtnt_unikernel::launch::Payload,
    timeout: std::time::Duration,
    hostname: Option<String>,
    dhcp: bool,
) -> Result<(OwnedFd, String)> {
    let dev = vtnt_lab_linux::open_tap(tap.netns.as_deref(), &tap.ifname)
        .doing(|| format!("opening the TAP device {}", tap.ifname))?;
    let gateway = tap.gateway.to_string();
    let mut run = vtnt_unikernel::launch::RunSpec::with_payload(
        payload,
        vtnt_unikernel::launch::JobNet::Tap {
            ifname: tap.ifname.clone(),
            netns: tap.netns.clone(),
            guest: tap.guest(),
            gateway: gateway.clone(),
            ipv6: tap.guest6(),
        },
    );
    run.timeout = timeout;
    run.hostname = hostname;
    run.dhcp = dhcp;
    let at = GuestAddr {
        guest: tap.guest(),
        gateway,
        ipv6: tap.guest6(),
        ..GuestAddr::default()
    };
    let cmdline = vtnt_unikernel::launch::process_cmdline(&run, &at, TAP_MAC);
    Ok((OwnedFd::from(dev), cmdline))
}

/// The MAC address a network function's guest is given (a bridge sends frames on as they
/// came, so it never appears on the wire).
const NF_MAC: &str = "52:54:00:66:77:00";

/// Starts the firewall network function `image` (`vtnt-kernel --features spt,fw`)
/// between the existing TAP devices `taps` of this network namespace (named so in the
/// rules' `-i`/`-o`), with the rule file `rules` (open for reading: the guest reads it
/// whole at descriptor 5) and a connection table of `max_conns`, in the caller's cgroup
/// (as the native NF runs). It runs until it is killed; its console says when its rules
/// hold.
pub fn start_nf(
    image: &Path,
    taps: [&str; 2],
    rules: std::fs::File,
    max_conns: u32,
) -> Result<Supervised> {
    let open = |name: &str| {
        vtnt_lab_linux::open_tap(None, name)
            .map(OwnedFd::from)
            .doing(|| format!("opening the TAP device {name}"))
    };
    let nets = [open(taps[0])?, open(taps[1])?];
    let cmdline = format!(
        "mac={NF_MAC} -- fw {} {} max-conns={max_conns}",
        taps[0], taps[1]
    );
    let fds = vtnt_tender_spt::Descriptors::Nf {
        nets,
        module: OwnedFd::from(rules),
    };
    Ok(launch(image, fds, cmdline, None)?.0)
}

/// The longest command line the spt guest takes (Linux's `MAX_ARG_STRLEN`).
const MAX_ARG_BYTES: usize = vtnt_tender_spt::MAX_ARG_BYTES;

/// Executes the guest `image` with `cmdline` through the tender (`vtnt-tender-spt`), its
/// descriptors `fds`, in `cgroup` (none: the caller's): the process, `CLOCK_MONOTONIC`
/// before the fork, and how long the tender took to join the cgroup.
fn launch(
    image: &Path,
    fds: vtnt_tender_spt::Descriptors,
    cmdline: String,
    cgroup: Option<&Cgroup>,
) -> Result<(Supervised, u64, std::time::Duration)> {
    let procs = cgroup
        .map(Cgroup::procs_files)
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .doing(|| format!("opening {}", p.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    if cmdline.len() >= MAX_ARG_BYTES {
        return Err(Error::Runtime(format!(
        "the spt guest reads its job, targets included, from its one argument, which Linux caps at {MAX_ARG_BYTES} bytes: this job's is {} (the spt runtime takes at most {} targets)",
        cmdline.len(),
        Runtime::Spt.max_targets().unwrap_or(0)
    )));
    }
    let t = vtnt_tender_spt::exec(image, fds, &cmdline, procs)?;
    let child = Supervised::adopt(t.pid, t.console, "the spt guest", t.started);
    Ok((child, t.spawn_ns, t.cgroup_join))
}

/// The guest's run read from its console (results and diagnostics apart) and its
/// tender's exit status; `spawn_ns` is when it was spawned, for its first-probe time.
pub fn ran(fin: crate::proc::Finished, spawn_ns: Option<u64>) -> crate::ran::Ran {
    let lines: Vec<String> = fin.stdout.lines().map(String::from).collect();
    let (results, mut diagnostics) = vtnt_unikernel::launch::split_console(&lines);
    let (code, why) = outcome(fin.status);
    diagnostics.extend(why);
    crate::ran::Ran {
        stdout: results.iter().map(|l| format!("{l}\n")).collect(),
        stderr: diagnostics.join("\n") + "\n" + &fin.stderr,
        code,
        elapsed: fin.elapsed,
        accelerator: Some("none (a Linux process under seccomp)".into()),
        spawn_to_first_probe: spawn_ns.and_then(|at| spawn_to_first_probe(at, &fin.stdout)),
    }
}

/// From the fork of a guest started at `spawn_ns` to its first probe, read from its
/// console: its clock's origin (`mono_start_ns` of the boot line, the same clock) plus
/// the first probe's guest time.
pub fn spawn_to_first_probe(spawn_ns: u64, console: &str) -> Option<std::time::Duration> {
    let line = |ty: &str| {
        console
            .lines()
            .find(|l| l.starts_with(&format!("{{\"type\":\"{ty}\"")))
    };
    let start = vtnt_unikernel::outcome::json_u64(line("boot")?, "mono_start_ns")?;
    let first_us = vtnt_unikernel::outcome::json_u64(line("first-probe")?, "guest_us")?;
    let at = (start + first_us * 1000).checked_sub(spawn_ns)?;
    Some(std::time::Duration::from_nanos(at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_corrupt_image_is_refused_with_its_reason() {
        let dir = std::env::temp_dir().join(format!("vtnt-spt-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = install(&dir.join("none.elf")).unwrap_err();
        assert!(format!("{missing:#}").contains("none.elf"), "{missing:#}");
        let corrupt = dir.join("corrupt.elf");
        std::fs::write(
            &corrupt,
            b"\x7fELF but not really an executable of any kind at all, no",
        )
        .unwrap();
        let e = install(&corrupt).unwrap_err().to_string();
        assert!(e.contains("not a static x86_64 ELF executable"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn spawn_to_first_probe_is_read_on_the_guests_clock() {
        let console = "vtnt-kernel 0.1.0 booting (spt v1)\n{\"type\":\"boot\",\"platform\":\"spt\",\"mono_start_ns\":5000300,\"heap_kib\":8192}\n{\"type\":\"first-probe\",\"guest_us\":154}\n";
        assert_eq!(
            spawn_to_first_probe(5_000_000, console),
            Some(std::time::Duration::from_nanos(154_300))
        );
        assert_eq!(spawn_to_first_probe(5_000_000, "no lines"), None);
    }
}
