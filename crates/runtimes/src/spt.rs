//! The `spt` runtime: the vTNT unikernel as a sandboxed Linux process (Solo5's spt model;
//! the interface is `vtnt_spt`). The image is the kernel built for the process platform
//! (`vtnt-vmm`'s build with `spt`): a static ELF of a few hundred KiB.
//!
//! The tender is this process's child between `fork` and `execve`: it joins the
//! instance's cgroup, puts the network (a UDP socket bound to a free slot of the lab's VM
//! front and connected to the front, one Ethernet frame per datagram, as QEMU's
//! `-netdev dgram`) at descriptor 3 and non-blocking, keeps standard output (the
//! console) and closes every other descriptor, sets `no_new_privs`, installs the seccomp
//! filter (the guest's calls, its `execve` pinned to the image's path, and `seccomp`),
//! and executes the guest with its command line. Nothing of the tender stays resident:
//! an instance is one process, the guest. The guest's first act installs its own,
//! stricter filter (no `execve`, no `seccomp`).
//!
//! A guest that makes a call outside its filter is killed by SIGSYS; [`outcome`] says so.
//!
//! `unsafe` here: the tender's system calls between `fork` and `execve` (raw, because
//! nothing may allocate there), each in a commented block.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus};

use anyhow::Context;
use vtnt_spt::{SockFilter, GUEST_CALLS, NET_FD};

use crate::cgroup::{Cgroup, CONTROLLERS};
use crate::net::Attached;
use crate::paths;
use crate::proc::Supervised;
use crate::runtime::{BuildOptions, ImageInfo, Runtime};
use crate::spec::InstanceSpec;

/// File name of the spt guest in the image cache.
pub const IMAGE_NAME: &str = "vtnt-spt.elf";

/// Builds the kernel for the process platform and copies it to the cache.
pub fn build_image(_opts: &BuildOptions) -> anyhow::Result<ImageInfo> {
    let built = vtnt_vmm::image::build(&vtnt_vmm::image::BuildOptions {
        spt: true,
        ..Default::default()
    })
    .map_err(|e| anyhow::anyhow!("building the spt guest: {e}"))?;
    let dst = paths::images_dir()?.join(IMAGE_NAME);
    paths::copy_if_newer(&built.path, &dst)?;
    let size = paths::file_size(&dst)?;
    Ok(ImageInfo {
        runtime: Runtime::Spt,
        path: dst,
        download_bytes: size,
        size_bytes: size,
        size_note: "unikernel ELF (static Linux executable)".into(),
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
    rules.push(vtnt_spt::Rule {
        name: "execve",
        nr: vtnt_spt::nr::EXECVE,
        arg0: Some(path_ptr),
    });
    rules.push(vtnt_spt::Rule {
        name: "seccomp",
        nr: vtnt_spt::nr::SECCOMP,
        arg0: None,
    });
    let mut prog = vec![SockFilter::default(); vtnt_spt::filter_len(&rules)];
    let n = vtnt_spt::filter(&rules, &mut prog);
    prog.truncate(n);
    prog
}

/// The `execve` a tender makes, prepared before the fork (no allocation after it).
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
}

// SAFETY: the raw pointers point into the `CString`s the struct owns (heap memory that
// does not move with the struct); nothing mutates them.
unsafe impl Send for Exec {}
// SAFETY: as above: read-only data.
unsafe impl Sync for Exec {}

impl Exec {
    /// The tender's steps in the child (module docs). Only async-signal-safe calls.
    fn tender(&self) -> std::io::Result<()> {
        let last = || Err(std::io::Error::last_os_error());
        for f in &self.procs {
            // SAFETY: writes 1 byte from a static string to an open descriptor.
            if unsafe { libc::write(f.as_raw_fd(), b"0".as_ptr().cast(), 1) } != 1 {
                return last();
            }
        }
        // SAFETY: plain descriptor operations on descriptors this process owns.
        unsafe {
            // (dup2 onto itself keeps close-on-exec: clear it either way)
            if libc::dup2(self.net.as_raw_fd(), NET_FD as i32) < 0
                || libc::fcntl(NET_FD as i32, libc::F_SETFD, 0) < 0
            {
                return last();
            }
            let flags = libc::fcntl(NET_FD as i32, libc::F_GETFL);
            if flags < 0 || libc::fcntl(NET_FD as i32, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0
            {
                return last();
            }
            libc::close(0);
            libc::close(2);
            // every other descriptor closes at the execve (std's own error pipe, which
            // is already close-on-exec, stays usable until then)
            const CLOSE_RANGE_CLOEXEC: libc::c_uint = 4;
            if libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, CLOSE_RANGE_CLOEXEC) != 0 {
                for fd in 4..4096 {
                    if libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) < 0 {
                        continue;
                    }
                }
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return last();
            }
            let prog = libc::sock_fprog {
                len: self.filter.len() as u16,
                filter: self.filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::syscall(
                libc::SYS_seccomp,
                vtnt_spt::SET_MODE_FILTER,
                0,
                &prog as *const libc::sock_fprog,
            ) != 0
            {
                return last();
            }
            libc::execve(self.path.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr());
            // Only exit_group is left to say that the execve failed (the filter kills a
            // write to std's error pipe): a status of our own.
            libc::_exit(EXEC_FAILED)
        }
    }
}

/// The exit status of a tender whose `execve` of the guest failed.
const EXEC_FAILED: i32 = 126;

/// Starts the guest `image` with `spec`'s job on a free slot of the lab's VM front, in
/// `cgroup`. The returned lock holds the slot until the instance is gone.
pub fn start(
    image: &Path,
    net: &Attached,
    spec: &InstanceSpec,
    cgroup: &Cgroup,
    timeout: std::time::Duration,
) -> anyhow::Result<(Supervised, vtnt_vmm::lab::SlotLock)> {
    seccomp_kills_processes(&std::fs::read_to_string(ACTIONS_AVAIL).unwrap_or_default())?;
    let Attached::Lab(lab) = net else {
        anyhow::bail!("the spt runtime reaches a network through a lab's VM front (--net lab:NAME)")
    };
    if spec.dhcp {
        anyhow::bail!("the spt runtime takes its lab slot's static address (no --dhcp)");
    }
    let (slot, lock) = vtnt_vmm::lab::free_slot(&lab.name)
        .map_err(|e| anyhow::anyhow!("lab `{}`: {e}", lab.name))?;
    let sock = UdpSocket::bind(slot.local)
        .with_context(|| format!("binding the guest's end {}", slot.local))?;
    sock.connect(slot.remote)
        .with_context(|| format!("connecting to the lab's VM front {}", slot.remote))?;
    let mut run = vtnt_vmm::job::RunSpec::new(
        spec.job.clone(),
        vtnt_vmm::job::JobNet::Lab {
            name: lab.name.clone(),
        },
    );
    run.timeout = timeout;
    run.hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string());
    let cmdline = vtnt_vmm::job::process_cmdline(
        &run,
        &slot.address,
        &slot.gateway,
        Some(&slot.gateway_mac),
        &slot.mac,
    );
    let procs = CONTROLLERS
        .iter()
        .map(|c| {
            let p = cgroup.dir(c).join("cgroup.procs");
            std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .with_context(|| format!("opening {}", p.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let path = CString::new(image.as_os_str().as_bytes()).context("image path")?;
    let cmdline = CString::new(cmdline).context("the guest's command line has a NUL")?;
    let exec = Exec {
        filter: tender_filter(path.as_ptr() as u64),
        argv: [path.as_ptr(), cmdline.as_ptr(), std::ptr::null()],
        envp: [std::ptr::null()],
        path,
        _cmdline: cmdline,
        procs,
        net: OwnedFd::from(sock),
    };
    let mut cmd = Command::new(image);
    // SAFETY: the hook makes only async-signal-safe calls on data prepared before the
    // fork, and allocates nothing.
    unsafe { cmd.pre_exec(move || exec.tender()) };
    let child = Supervised::spawn(cmd, "the spt guest")?;
    Ok((child, lock))
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
        let guest = vtnt_spt::filter_len(&GUEST_CALLS);
        // the guest's rules, plus 7 instructions for execve's pinned pointer and 3 for seccomp
        assert_eq!(prog.len(), guest + 10);
    }

    #[test]
    fn a_sigsys_death_is_named() {
        let (code, why) = outcome(ExitStatus::from_raw(libc::SIGSYS));
        assert_eq!(code, None);
        assert!(why.unwrap().contains("SIGSYS"));
        assert_eq!(outcome(ExitStatus::from_raw(2 << 8)), (Some(2), None));
    }
}
