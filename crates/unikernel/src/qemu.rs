//! Launching the unikernel under QEMU and supervising it.
//!
//! Every run gets `-nodefaults -no-user-config -display none -no-reboot`, the console on
//! QEMU's debug console (`-chardev stdio` to `isa-debugcon` at port 0xe9, `-serial none`:
//! one exit per byte and no status polling, where the serial port takes two per byte) and
//! `-device isa-debug-exit,iobase=0xf4,iosize=0x04` (the guest's exit status), plus per
//! machine:
//! - `microvm`: `x-option-roms=off,rtc=off,acpi=off,isa-serial=off` (without ACPI QEMU
//!   names the virtio-mmio slot on the kernel command line, so the guest probes no other;
//!   the guest does not use ACPI), under KVM also `pit=off,pic=off` (the clock comes from
//!   kvmclock; TCG's calibration needs the PIT), modern virtio-mmio
//!   (`-global virtio-mmio.force-legacy=false`), `virtio-net-device`;
//! - `q35` / `pc`: `virtio-net-pci` without an option ROM (`romfile=`).
//!
//! The console is read line by line from QEMU's stdout; the VM is killed at
//! [`VmConfig::timeout`]; QEMU's peak RSS (VmHWM) is sampled while it runs, its exit is
//! timed exactly (`waitid` without reaping), and its CPU time (user + system, all
//! threads) is read from `/proc/<pid>/stat` once it has exited but before it is reaped
//! (a zombie's stat still holds the totals).

use crate::accel::{self, Accelerator};
use crate::outcome::{status_from_qemu_code, ConsoleTap, GuestStatus, Outcome};
use crate::Error;
use nix::sys::wait::{waitid, Id, WaitPidFlag};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};
use vtnt_abi::record::ExitRecord;

/// The QEMU binary used unless [`VmConfig::qemu`] says otherwise.
pub const QEMU: &str = "qemu-system-x86_64";

/// QEMU machine types the kernel supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Machine {
    Microvm,
    Q35,
    Pc,
}

impl Machine {
    pub const ALL: [Machine; 3] = [Machine::Microvm, Machine::Q35, Machine::Pc];

    pub fn name(self) -> &'static str {
        match self {
            Machine::Microvm => "microvm",
            Machine::Q35 => "q35",
            Machine::Pc => "pc",
        }
    }
}

/// The accelerator asked for (what was used is an [`Accelerator`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// KVM if [`resolve`] finds it works for the unikernel, else TCG.
    Auto,
    /// This host's kind of KVM ([`accel::kvm_kind`]).
    Kvm,
    Tcg,
}

impl Accel {
    /// The accelerator this request stands for when booting `image`.
    pub fn resolve(self, image: &std::path::Path) -> Accelerator {
        match self {
            Accel::Auto => resolve(image),
            Accel::Kvm => accel::kvm_kind().unwrap_or(Accelerator::Kvm),
            Accel::Tcg => Accelerator::Tcg,
        }
    }
}

/// How long the KVM probe boot may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The accelerator for the unikernel `image` (see `accel`'s module docs).
pub fn resolve(image: &Path) -> Accelerator {
    accel::overridden().unwrap_or_else(|| probed(image))
}

/// The probed accelerator for the unikernel (once per process, cached per host boot).
pub fn probed(image: &Path) -> Accelerator {
    static PROBED: OnceLock<Accelerator> = OnceLock::new();
    *PROBED.get_or_init(|| {
        let Some(kind) = accel::kvm_kind() else {
            return Accelerator::Tcg;
        };
        // Measured on PVM (docs/benchmarks.md): the whole unikernel runs in KVM's
        // instruction emulator there, slower than TCG on every figure and with a reply
        // lost in the TNT equality run; TCG until the guest speaks PVM's protocol.
        // `VTNT_ACCEL=kvm` still chooses PVM-KVM.
        if kind == Accelerator::PvmKvm {
            return Accelerator::Tcg;
        }
        if let Some(a) = accel::cached() {
            return a;
        }
        let found = [kind, Accelerator::PvmKvm]
            .into_iter()
            .find(|&a| probe(image, a))
            .unwrap_or(Accelerator::Tcg);
        accel::remember(accel::CACHE, found.word());
        found
    })
}

/// Boots `image` once under `accel` (`-- boot` on microvm); true if it exits with 0.
pub fn probe(image: &Path, accel: Accelerator) -> bool {
    let mut cfg = VmConfig::new(image.to_path_buf(), Machine::Microvm, "-- boot");
    cfg.timeout = PROBE_TIMEOUT;
    matches!(supervise(cfg.command(accel), cfg.timeout, true, accel, None), Ok(o) if o.status == GuestStatus::Exited(0))
}

/// The VM's network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetBackend {
    /// An existing TAP device (`-netdev tap,ifname=..,script=no,downscript=no`), in the
    /// namespace QEMU runs in.
    Tap { ifname: String },
    /// QEMU's socket netdev with these options, e.g. `connect=127.0.0.1:5555`,
    /// `listen=:5555` or `udp=127.0.0.1:5556,localaddr=127.0.0.1:5555`.
    Socket { options: String },
    /// QEMU's stream netdev over a Unix socket (QEMU >= 7.2): `server` listens.
    Stream { path: PathBuf, server: bool },
    /// A complete `-netdev` value (e.g. a lab's `dgram,id=vtnt0,...`) whose id is `id`.
    Netdev { netdev: String, id: String },
}

impl NetBackend {
    /// The `-netdev` value and its id (`id` unless the value names its own).
    pub fn netdev(&self, id: &str) -> (String, String) {
        match self {
            NetBackend::Tap { ifname } => (
                format!("tap,id={id},ifname={ifname},script=no,downscript=no"),
                id.into(),
            ),
            NetBackend::Socket { options } => (format!("socket,id={id},{options}"), id.into()),
            NetBackend::Stream { path, server } => (
                format!(
                    "stream,id={id},server={},addr.type=unix,addr.path={}",
                    if *server { "on" } else { "off" },
                    path.display()
                ),
                id.into(),
            ),
            NetBackend::Netdev { netdev, id } => (netdev.clone(), id.clone()),
        }
    }
}

/// `mac` (`aa:bb:..`) with its last byte plus one (wrapping).
fn next_mac(mac: &str) -> String {
    match mac.rsplit_once(':') {
        Some((head, last)) => match u8::from_str_radix(last, 16) {
            Ok(b) => format!("{head}:{:02x}", b.wrapping_add(1)),
            Err(_) => mac.to_string(),
        },
        None => mac.to_string(),
    }
}

/// One VM to run.
#[derive(Debug, Clone)]
pub struct VmConfig {
    pub image: PathBuf,
    pub machine: Machine,
    pub memory_mib: u32,
    /// The kernel command line (options, then `--` and the job).
    pub cmdline: String,
    pub net: Option<NetBackend>,
    /// A second network (a network function's), after the first: its MAC is `mac`'s
    /// with the last byte plus one.
    pub net2: Option<NetBackend>,
    /// The guest's MAC address.
    pub mac: String,
    pub accel: Accel,
    /// Kill the VM after this long.
    pub timeout: Duration,
    /// Run QEMU inside this network namespace (`ip netns exec`).
    pub netns: Option<String>,
    /// A file handed to the guest as PVH module 0 (`-initrd`), e.g. a target list.
    pub module: Option<PathBuf>,
    /// The QEMU binary.
    pub qemu: PathBuf,
    /// A command QEMU runs under (program and arguments before QEMU's own), e.g.
    /// `perf record ... --` ([`crate::breakdown::perf_wrapper`]); empty: none.
    pub wrapper: Vec<String>,
    /// Where console lines also go as they arrive.
    pub console: Option<ConsoleTap>,
}

impl VmConfig {
    /// A VM with 16 MiB, no network, automatic acceleration and a 60 s timeout.
    pub fn new(image: PathBuf, machine: Machine, cmdline: &str) -> VmConfig {
        VmConfig {
            image,
            machine,
            memory_mib: 16,
            cmdline: cmdline.to_string(),
            net: None,
            net2: None,
            mac: "52:54:00:12:34:56".into(),
            accel: Accel::Auto,
            timeout: Duration::from_secs(60),
            netns: None,
            module: None,
            qemu: PathBuf::from(QEMU),
            wrapper: Vec::new(),
            console: None,
        }
    }

    /// QEMU's arguments for a run under `accel`.
    pub fn args(&self, accel: Accelerator) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let mut push = |s: &str| a.push(s.to_string());
        match self.machine {
            Machine::Microvm => {
                push("-M");
                push(if accel.is_kvm() {
                    "microvm,x-option-roms=off,rtc=off,acpi=off,isa-serial=off,pit=off,pic=off"
                } else {
                    "microvm,x-option-roms=off,rtc=off,acpi=off,isa-serial=off"
                });
                push("-global");
                push("virtio-mmio.force-legacy=false");
            }
            Machine::Q35 => {
                push("-M");
                push("q35");
            }
            Machine::Pc => {
                push("-M");
                push("pc");
            }
        }
        for s in accel.qemu_args() {
            push(s);
        }
        for s in [
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-chardev",
            "stdio,id=vtntcon",
            "-device",
            "isa-debugcon,iobase=0xe9,chardev=vtntcon",
            "-serial",
            "none",
            "-no-reboot",
            "-device",
            "isa-debug-exit,iobase=0xf4,iosize=0x04",
        ] {
            push(s);
        }
        push("-m");
        push(&self.memory_mib.to_string());
        for (i, net) in [&self.net, &self.net2].into_iter().enumerate() {
            let Some(net) = net else { continue };
            let (netdev, id) = net.netdev(&format!("n{i}"));
            let mac = if i == 0 {
                self.mac.clone()
            } else {
                next_mac(&self.mac)
            };
            push("-netdev");
            push(&netdev);
            let device = match self.machine {
                Machine::Microvm => format!("virtio-net-device,netdev={id},mac={mac}"),
                _ => format!("virtio-net-pci,netdev={id},mac={mac},romfile="),
            };
            push("-device");
            push(&device);
        }
        push("-kernel");
        push(&self.image.display().to_string());
        push("-append");
        push(&self.cmdline);
        if let Some(m) = &self.module {
            push("-initrd");
            push(&m.display().to_string());
        }
        a
    }

    /// The full command: the wrapper, then `ip netns exec` when a namespace is set,
    /// then QEMU.
    pub fn command(&self, accel: Accelerator) -> Command {
        // the wrapper first (it may join cgroups, which `ip netns exec`'s own /sys hides)
        let mut words: Vec<std::ffi::OsString> = self.wrapper.iter().map(Into::into).collect();
        if let Some(ns) = &self.netns {
            words.extend(["ip", "netns", "exec", ns].map(Into::into));
        }
        words.push(self.qemu.clone().into());
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..]);
        cmd.args(self.args(accel));
        cmd
    }
}

/// Boots `cfg` and waits for the guest to finish (or the timeout).
pub fn run(cfg: &VmConfig) -> Result<Outcome, Error> {
    let accel = cfg.accel.resolve(&cfg.image);
    supervise(
        cfg.command(accel),
        cfg.timeout,
        true,
        accel,
        cfg.console.as_ref(),
    )
}

/// Runs a VMM process: collects console lines and stderr, samples its peak RSS, kills it
/// at `timeout`. `debug_exit`: the VMM's exit code encodes the guest status
/// (`isa-debug-exit`); `accel`: what it runs under, for the outcome.
pub(crate) fn supervise(
    mut cmd: Command,
    timeout: Duration,
    debug_exit: bool,
    accel: Accelerator,
    tap: Option<&ConsoleTap>,
) -> Result<Outcome, Error> {
    let program = format!("{:?}", cmd.get_program());
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|source| Error::Spawn { program, source })?;
    let pid = child.id();
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let (tx, rx) = mpsc::channel();
    let tap = tap.cloned();
    let out_thread = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(tap) = &tap {
                tap.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(line.trim_end_matches('\r').to_string());
            }
            if tx.send((start.elapsed(), line)).is_err() {
                break;
            }
        }
    });
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    // The exit's moment, exactly: a thread blocks in waitid(WNOWAIT), which returns when
    // the VMM exits but leaves it a zombie, whose /proc stat still holds its CPU total.
    let (exited_tx, exited_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
        let _ = waitid(Id::Pid(Pid::from_raw(pid as i32)), flags);
        let _ = exited_tx.send(start.elapsed());
    });
    let mut peak_rss_kib = None;
    let (mut peak_pss_kib, mut pss_at) = (None, None::<Instant>);
    let mut timed_out = false;
    let wall = loop {
        if let Some(kib) = vm_hwm_kib(pid) {
            peak_rss_kib = Some(kib);
        }
        if pss_at.is_none_or(|t| t.elapsed() >= PSS_EVERY) {
            let kib = vtnt_measure::proc::pss_kib(pid);
            if kib > 0 {
                peak_pss_kib = Some(peak_pss_kib.map_or(kib, |k: u64| k.max(kib)));
            }
            pss_at = Some(Instant::now());
        }
        // VmHWM every 5 ms while a VM is young (most live milliseconds), then every
        // 200 ms: hundreds of held VMs must not keep their host busy reading /proc. The
        // exit is seen at once either way (the channel wakes the wait).
        let every = if start.elapsed() < Duration::from_secs(2) {
            Duration::from_millis(5)
        } else {
            Duration::from_millis(200)
        };
        match exited_rx.recv_timeout(every) {
            Ok(at) => break at,
            Err(mpsc::RecvTimeoutError::Disconnected) => break start.elapsed(),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if !timed_out && start.elapsed() >= timeout {
            timed_out = true;
            let _ = child.kill();
        }
    };
    let cpu = cpu_time(pid).map(|(_, t)| t);
    let exit = child.wait()?;
    let _ = out_thread.join();
    let stderr = err_thread.join().unwrap_or_default();
    let (line_times, lines): (Vec<Duration>, Vec<String>) = rx
        .try_iter()
        .map(|(t, l)| (t, l.trim_end_matches('\r').to_string()))
        .unzip();
    let vmm_code = exit.code();
    let record = ExitRecord::last(lines.iter().map(String::as_str)).ok();
    let status = match record.map(|r| r.status as u8) {
        Some(s) => GuestStatus::Exited(s),
        None if timed_out => GuestStatus::TimedOut,
        None if lines.is_empty() && vmm_code.is_some_and(|c| c != 0) => {
            return Err(Error::Vmm {
                status: vmm_code,
                stderr,
            });
        }
        None => match vmm_code.and_then(status_from_qemu_code) {
            Some(s) if debug_exit && s > 0 => GuestStatus::Exited(s),
            _ => GuestStatus::Vanished,
        },
    };
    Ok(Outcome {
        status,
        lines,
        line_times,
        stderr,
        vmm_code,
        wall,
        peak_rss_kib,
        peak_pss_kib,
        cpu,
        accel,
    })
}

/// How often [`supervise`] reads a VMM's PSS (`smaps_rollup` walks its every mapping).
const PSS_EVERY: Duration = Duration::from_millis(100);

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`, 100 on every x86_64 Linux).
const USER_HZ: u64 = 100;

/// The state and CPU time (user + system, all threads: utime + stime) of process `pid`
/// from `/proc/<pid>/stat`, at `USER_HZ` resolution (10 ms).
pub fn cpu_time(pid: u32) -> Option<(char, Duration)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let mut f = s.get(s.rfind(')')? + 1..)?.split_ascii_whitespace();
    let state = f.next()?.chars().next()?;
    // utime and stime are fields 14 and 15; `state` was field 3.
    let mut f = f.skip(10);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some((
        state,
        Duration::from_millis((utime + stime) * 1000 / USER_HZ),
    ))
}

/// The peak resident set size of process `pid`, in KiB.
pub fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
