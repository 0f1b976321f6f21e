//! The `spt` runtime: the vTNT unikernel as a sandboxed Linux process (Solo5's spt model;
//! the interface is `vtnt_abi::spt`). The image is the kernel built for the process platform
//! (`vtnt-unikernel`'s build with `spt`): a static ELF of a few hundred KiB.
//!
//! The tender is this process's child between a `vfork`-style `clone` and `execve`
//! ([`spawn`]): it starts a process group, joins the instance's cgroup, puts the network (a UDP socket bound to a free slot of the lab's VM
//! front and connected to the front, one Ethernet frame per datagram, as QEMU's
//! `-netdev dgram`; or a TAP device, one frame per read and write: [`start_on_tap`],
//! `vtnt bench net`'s endpoint) at descriptor 3 and non-blocking, keeps standard output (the
//! console) and closes every other descriptor, sets `no_new_privs`, installs the seccomp
//! filter (the guest's calls, its `execve` pinned to the image's path, and `seccomp`),
//! and executes the guest with its command line. Nothing of the tender stays resident:
//! an instance is one process, the guest. The guest's first act installs its own,
//! stricter filter (no `execve`, no `seccomp`).
//!
//! A guest that makes a call outside its filter is killed by SIGSYS; [`outcome`] says so.
//!
//! `unsafe` here: the `clone` and the tender's system calls before its `execve` (raw,
//! because nothing may allocate there), each in a commented block.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io::Read;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use vtnt_abi::spt::{SockFilter, CONSOLE_FD, GUEST_CALLS, NET_FD};

use crate::cgroup::Cgroup;
use crate::net::{Attached, Tap};
use crate::paths;
use crate::proc::Supervised;
use crate::runtime::{BuildOptions, ImageInfo, Runtime};
use crate::spec::InstanceSpec;

/// File name of the spt guest in the image cache.
pub const IMAGE_NAME: &str = "vtnt-spt.elf";

/// Copies the installed kernel for the process platform (`lib/vtnt/vtnt-spt.elf`) into
/// the image cache.
pub fn build_image(_opts: &BuildOptions) -> anyhow::Result<ImageInfo> {
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
pub fn install(file: &Path) -> anyhow::Result<std::path::PathBuf> {
    let head =
        std::fs::read(file).with_context(|| format!("reading the spt image {}", file.display()))?;
    let elf = head.len() > 64
        && head.starts_with(b"\x7fELF\x02\x01")
        && u16::from_le_bytes([head[16], head[17]]) == 2 // ET_EXEC: static, not PIE
        && u16::from_le_bytes([head[18], head[19]]) == 62; // EM_X86_64
    if !elf {
        anyhow::bail!(
            "the spt image {} is not a static x86_64 ELF executable (corrupt or not an spt build)",
            file.display()
        );
    }
    paths::make_executable(file)
}

/// The tender's filter: the guest's calls, `execve` of the one path at `path_ptr`, and
/// `seccomp` (for the guest's own, stricter filter).
fn tender_filter(path_ptr: u64) -> Vec<SockFilter> {
    let mut rules = GUEST_CALLS.to_vec();
    rules.push(vtnt_abi::spt::Rule {
        name: "execve",
        nr: vtnt_abi::spt::nr::EXECVE,
        arg0: Some(path_ptr),
    });
    rules.push(vtnt_abi::spt::Rule {
        name: "seccomp",
        nr: vtnt_abi::spt::nr::SECCOMP,
        arg0: None,
    });
    let mut prog = vec![SockFilter::default(); vtnt_abi::spt::filter_len(&rules)];
    let n = vtnt_abi::spt::filter(&rules, &mut prog);
    prog.truncate(n);
    prog
}

/// What the tender needs, prepared before the `clone` (nothing is allocated after it).
struct Exec {
    path: CString,
    /// Keeps the strings `argv` points into.
    _cmdline: CString,
    argv: [*const libc::c_char; 3],
    envp: [*const libc::c_char; 1],
    filter: Vec<SockFilter>,
    /// `cgroup.procs` of each controller, open for the child to write itself into.
    procs: Vec<std::fs::File>,
    net: OwnedFd,
    /// The write end of the console's pipe: the guest's standard output.
    console: OwnedFd,
    /// Where a failed step is reported (close-on-exec: a successful `execve` closes it).
    report: OwnedFd,
    /// The signal mask to give back to the child before it executes the guest.
    sigmask: libc::sigset_t,
    /// How long the child's writes to `procs` took, nanoseconds (it shares our memory).
    join_ns: AtomicU64,
}

/// The tender's steps, in order, as reported when one fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Step {
    ProcessGroup,
    Cgroup,
    Descriptors,
    NoNewPrivs,
    Seccomp,
}

impl Step {
    const ALL: [Step; 5] = [
        Step::ProcessGroup,
        Step::Cgroup,
        Step::Descriptors,
        Step::NoNewPrivs,
        Step::Seccomp,
    ];

    fn describe(self) -> &'static str {
        match self {
            Step::ProcessGroup => "starting a process group",
            Step::Cgroup => "joining the instance's cgroup",
            Step::Descriptors => "setting up descriptors 1 and 3",
            Step::NoNewPrivs => "setting no_new_privs",
            Step::Seccomp => "installing the seccomp filter (is seccomp available?)",
        }
    }
}

impl Exec {
    /// The tender's steps in the child (module docs): only system calls, on data prepared
    /// before the `clone`. Returns only when a step failed, with that step and its errno.
    fn tender(&self) -> (Step, i32) {
        let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        // SAFETY: plain system calls on descriptors and memory this process owns; the
        // filter and the strings outlive the calls (they are the parent's, which waits).
        unsafe {
            if libc::setpgid(0, 0) != 0 {
                return (Step::ProcessGroup, errno());
            }
            let t0 = monotonic_ns();
            for f in &self.procs {
                if libc::write(f.as_raw_fd(), b"0".as_ptr().cast(), 1) != 1 {
                    return (Step::Cgroup, errno());
                }
            }
            self.join_ns.store(monotonic_ns() - t0, Ordering::Relaxed);
            // (dup2 onto itself keeps close-on-exec: clear it either way)
            if libc::dup2(self.console.as_raw_fd(), CONSOLE_FD as i32) < 0
                || libc::fcntl(CONSOLE_FD as i32, libc::F_SETFD, 0) < 0
                || libc::dup2(self.net.as_raw_fd(), NET_FD as i32) < 0
                || libc::fcntl(NET_FD as i32, libc::F_SETFD, 0) < 0
            {
                return (Step::Descriptors, errno());
            }
            let flags = libc::fcntl(NET_FD as i32, libc::F_GETFL);
            if flags < 0 || libc::fcntl(NET_FD as i32, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0
            {
                return (Step::Descriptors, errno());
            }
            libc::close(0);
            libc::close(2);
            // every other descriptor closes at the execve (the report pipe, already
            // close-on-exec, stays usable until then)
            const CLOSE_RANGE_CLOEXEC: libc::c_uint = 4;
            if libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, CLOSE_RANGE_CLOEXEC) != 0 {
                for fd in 4..4096 {
                    libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                }
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.sigmask, std::ptr::null_mut());
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return (Step::NoNewPrivs, errno());
            }
            let prog = libc::sock_fprog {
                len: self.filter.len() as u16,
                filter: self.filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::syscall(
                libc::SYS_seccomp,
                vtnt_abi::spt::SET_MODE_FILTER,
                0,
                &prog as *const libc::sock_fprog,
            ) != 0
            {
                return (Step::Seccomp, errno());
            }
            libc::execve(self.path.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr());
            // Only exit_group is left to say that the execve failed (the filter kills a
            // write to the report pipe): a status of our own.
            libc::_exit(EXEC_FAILED)
        }
    }
}

/// The child of the `clone`: runs the tender; reports the step that failed.
extern "C" fn tender_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Exec` the parent passed, alive until the child has executed
    // the guest or exited (CLONE_VFORK suspends the parent until then).
    let exec = unsafe { &*(arg as *const Exec) };
    let (step, errno) = exec.tender();
    let mut msg = [0u8; 8];
    msg[..4].copy_from_slice(&(step as u32).to_le_bytes());
    msg[4..].copy_from_slice(&errno.to_le_bytes());
    // SAFETY: writes 8 bytes from a live array to the report pipe, then exits without
    // running anything of the parent's (atexit handlers, buffers).
    unsafe {
        libc::write(exec.report.as_raw_fd(), msg.as_ptr().cast(), msg.len());
        libc::_exit(127)
    }
}

/// A pipe, both ends close-on-exec: (read, write).
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into a live array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just opened and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Starts the tender: a `clone` that shares this process's memory and suspends the
/// calling thread until the child has executed the guest or failed (what `vfork` does,
/// and `posix_spawn` inside). A plain `fork` would copy this process's page tables and
/// mappings for every guest, then throw them away at the `execve`: with thousands of
/// guests supervised (a reader thread and its stack each) that costs milliseconds of
/// system time per start, charged to the new instance. Returns the child's pid.
fn spawn(exec: &Exec, report: OwnedFd) -> anyhow::Result<u32> {
    const STACK: usize = 64 * 1024;
    let mut stack = vec![0u8; STACK];
    // SAFETY: the stack's end, aligned down to 16 bytes as the ABI wants.
    let top = unsafe { stack.as_mut_ptr().add(STACK) } as usize & !15;
    // SAFETY: blocks every signal in this thread while the child runs on our memory (a
    // handler of ours must not run in it); the child restores `exec.sigmask` itself.
    // The child runs `tender_main` on its own stack with `exec` alive (CLONE_VFORK: we
    // resume only once it has executed the guest or exited).
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            tender_main,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            exec as *const Exec as *mut libc::c_void,
        );
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        pid
    };
    drop(stack);
    if pid < 0 {
        anyhow::bail!(
            "starting the spt tender (clone): {}",
            std::io::Error::last_os_error()
        );
    }
    // the child has executed the guest or failed a step (CLONE_VFORK): a report, if any,
    // is already in the pipe, whose write end we still hold, so read without waiting
    let mut msg = [0u8; 8];
    // SAFETY: sets a flag on a descriptor we own.
    unsafe { libc::fcntl(report.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    let n = std::fs::File::from(report).read(&mut msg).unwrap_or(0);
    if n == msg.len() {
        let step = u32::from_le_bytes([msg[0], msg[1], msg[2], msg[3]]);
        let errno = i32::from_le_bytes([msg[4], msg[5], msg[6], msg[7]]);
        // SAFETY: reaps our own child, which has exited.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        let what = Step::ALL
            .get(step as usize)
            .map_or("an unknown step", |s| s.describe());
        anyhow::bail!(
            "the spt tender failed {what}: {}",
            std::io::Error::from_raw_os_error(errno)
        );
    }
    Ok(pid as u32)
}

/// The exit status of a tender whose `execve` of the guest failed.
const EXEC_FAILED: i32 = 126;

/// A started guest: the process, the lab slot it holds until it is dropped,
/// `CLOCK_MONOTONIC` just before the fork (for [`spawn_to_first_probe`]) and how long
/// the tender took to join the instance's cgroup (on cgroup v1 the kernel makes that
/// write wait for an RCU grace period unless `favordynmods` is set: often most of the
/// time to the first probe).
pub struct Started {
    pub child: Supervised,
    pub slot: vtnt_unikernel::lab::SlotLock,
    pub spawn_ns: u64,
    pub cgroup_join: std::time::Duration,
}

/// Starts the guest `image` with `spec`'s job on a free slot of the lab's VM front, in
/// `cgroup`.
pub fn start(
    image: &Path,
    net: &Attached,
    spec: &InstanceSpec,
    cgroup: &Cgroup,
    timeout: std::time::Duration,
) -> anyhow::Result<Started> {
    seccomp_kills_processes(&std::fs::read_to_string(ACTIONS_AVAIL).unwrap_or_default())?;
    let Attached::Lab(lab) = net else {
        anyhow::bail!("the spt runtime reaches a network through a lab's VM front (--net lab:NAME)")
    };
    if spec.dhcp {
        anyhow::bail!("the spt runtime takes its lab slot's static address (no --dhcp)");
    }
    let (slot, lock) = vtnt_unikernel::lab::free_slot(&lab.name)
        .map_err(|e| anyhow::anyhow!("lab `{}`: {e}", lab.name))?;
    let sock = UdpSocket::bind(slot.local)
        .with_context(|| format!("binding the guest's end {}", slot.local))?;
    sock.connect(slot.remote)
        .with_context(|| format!("connecting to the lab's VM front {}", slot.remote))?;
    let mut run = vtnt_unikernel::launch::RunSpec::new(
        spec.job.clone(),
        vtnt_unikernel::launch::JobNet::Lab {
            name: lab.name.clone(),
        },
    );
    run.timeout = timeout;
    run.hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string());
    let cmdline = vtnt_unikernel::launch::process_cmdline(
        &run,
        &slot.address,
        &slot.gateway,
        Some(&slot.gateway_mac),
        &slot.mac,
    );
    let (child, spawn_ns, cgroup_join) = launch(image, OwnedFd::from(sock), cmdline, cgroup)?;
    Ok(Started {
        child,
        slot: lock,
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
) -> anyhow::Result<Supervised> {
    seccomp_kills_processes(&std::fs::read_to_string(ACTIONS_AVAIL).unwrap_or_default())?;
    let dev = vtnt_lab_linux::open_tap(tap.netns.as_deref(), &tap.ifname)
        .with_context(|| format!("opening the TAP device {}", tap.ifname))?;
    let gateway = tap.gateway.to_string();
    let mut run = vtnt_unikernel::launch::RunSpec::with_payload(
        payload,
        vtnt_unikernel::launch::JobNet::Tap {
            ifname: tap.ifname.clone(),
            netns: tap.netns.clone(),
            guest: tap.guest(),
            gateway: gateway.clone(),
        },
    );
    run.timeout = timeout;
    let cmdline =
        vtnt_unikernel::launch::process_cmdline(&run, &tap.guest(), &gateway, None, TAP_MAC);
    Ok(launch(image, OwnedFd::from(dev), cmdline, cgroup)?.0)
}

/// The longest argument Linux passes to a program (`MAX_ARG_STRLEN`, with its NUL).
const MAX_ARG_BYTES: usize = 128 << 10;

/// Executes the guest `image` with `cmdline` through the tender, its network `net` at
/// descriptor 3, in `cgroup`: the process, `CLOCK_MONOTONIC` before the fork, and how
/// long the tender took to join the cgroup.
fn launch(
    image: &Path,
    net: OwnedFd,
    cmdline: String,
    cgroup: &Cgroup,
) -> anyhow::Result<(Supervised, u64, std::time::Duration)> {
    let procs = cgroup
        .procs_files()
        .into_iter()
        .map(|p| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .with_context(|| format!("opening {}", p.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    anyhow::ensure!(
        cmdline.len() < MAX_ARG_BYTES,
        "the spt guest reads its job, targets included, from its one argument, which Linux caps at {MAX_ARG_BYTES} bytes: this job's is {} (the spt runtime takes at most {} targets)",
        cmdline.len(),
        Runtime::Spt.max_targets().unwrap_or(0)
    );
    let path = CString::new(image.as_os_str().as_bytes()).context("image path")?;
    let cmdline = CString::new(cmdline).context("the guest's command line has a NUL")?;
    let (console_r, console_w) = pipe().context("the console's pipe")?;
    let (report_r, report_w) = pipe().context("the tender's report pipe")?;
    let exec = Exec {
        filter: tender_filter(path.as_ptr() as u64),
        argv: [path.as_ptr(), cmdline.as_ptr(), std::ptr::null()],
        envp: [std::ptr::null()],
        path,
        _cmdline: cmdline,
        procs,
        net,
        console: console_w,
        report: report_w,
        // SAFETY: reads this thread's signal mask into a zeroed set.
        sigmask: unsafe {
            let mut m: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut m);
            m
        },
        join_ns: AtomicU64::new(0),
    };
    let started = std::time::Instant::now();
    let spawn_ns = monotonic_ns();
    let pid = spawn(&exec, report_r)?;
    let cgroup_join = std::time::Duration::from_nanos(exec.join_ns.load(Ordering::Relaxed));
    // our copies of the child's ends (the console's write end above all) close here, so
    // that the guest's exit ends the console's reads
    drop(exec);
    let child = Supervised::adopt(pid, console_r, "the spt guest", started);
    Ok((child, spawn_ns, cgroup_join))
}

/// `CLOCK_MONOTONIC` in nanoseconds: the guest's clock, read from outside.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live timespec the kernel writes.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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

/// Where Linux lists the seccomp actions it supports.
const ACTIONS_AVAIL: &str = "/proc/sys/kernel/seccomp/actions_avail";

/// Whether a kernel whose `actions_avail` reads `avail` can hold a guest: seccomp filters
/// with the kill-process action (Linux 4.14+, `CONFIG_SECCOMP_FILTER`).
fn seccomp_kills_processes(avail: &str) -> anyhow::Result<()> {
    if avail.split_whitespace().any(|a| a == "kill_process") {
        return Ok(());
    }
    anyhow::bail!(
        "seccomp is unavailable: this kernel's {ACTIONS_AVAIL} does not list kill_process \
         (Linux 4.14 or later with CONFIG_SECCOMP_FILTER): the spt runtime will not run a \
         guest unfiltered"
    )
}

/// What the guest's exit means: its status (the kernel's `exit::Status`), or why there
/// is none, as a `vtnt: error:` line for the instance's diagnostics.
pub fn outcome(status: ExitStatus) -> (Option<i32>, Option<String>) {
    match (status.code(), status.signal()) {
        (Some(EXEC_FAILED), _) => (
            None,
            Some("vtnt: error: the spt tender could not execute the guest image".into()),
        ),
        (Some(c), _) => (Some(c), None),
        (None, Some(libc::SIGSYS)) => (
            None,
            Some(
                "vtnt: error: the spt guest was killed by SIGSYS: it made a system call its \
                 seccomp filter does not allow"
                    .into(),
            ),
        ),
        (None, Some(sig)) => (
            None,
            Some(format!(
                "vtnt: error: the spt guest was killed by signal {sig}"
            )),
        ),
        (None, None) => (
            None,
            Some("vtnt: error: the spt guest ended without a status".into()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_without_seccomp_filters_is_refused_by_name() {
        assert!(seccomp_kills_processes(
            "kill_process kill_thread trap errno user_notif log allow"
        )
        .is_ok());
        for avail in ["", "kill_thread trap errno allow"] {
            let e = seccomp_kills_processes(avail).unwrap_err().to_string();
            assert!(e.contains("seccomp is unavailable"), "{e}");
        }
    }

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
    fn the_tender_adds_only_its_execve_and_seccomp() {
        let prog = tender_filter(0x7fff_0000_1000);
        let guest = vtnt_abi::spt::filter_len(&GUEST_CALLS);
        // the guest's rules, plus 7 instructions for execve's pinned pointer and 3 for seccomp
        assert_eq!(prog.len(), guest + 10);
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

    #[test]
    fn a_sigsys_death_is_named() {
        let (code, why) = outcome(ExitStatus::from_raw(libc::SIGSYS));
        assert_eq!(code, None);
        assert!(why.unwrap().contains("SIGSYS"));
        assert_eq!(outcome(ExitStatus::from_raw(2 << 8)), (Some(2), None));
    }
}
