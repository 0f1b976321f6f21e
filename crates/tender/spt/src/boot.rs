//! Set-up and boot of an spt guest: the tender is this process's child between a
//! `vfork`-style `clone` and the guest's `execve` ([`spawn`]); in order it starts a
//! process group, joins the instance's cgroup, puts the network at descriptor 3 (a
//! network function's second at 4, both non-blocking, and its rules at 5) and the
//! console at 1, closes everything else, sets `no_new_privs`,
//! installs the jail's filter and executes the guest. Nothing of it stays resident.
//!
//! `unsafe` here: the `clone` and the tender's system calls before its `execve` (raw,
//! because nothing may allocate there), each in a commented block.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use vtnt_abi::spt::{SockFilter, CONSOLE_FD};

use crate::{Error, EXEC_FAILED};

/// What the tender needs, prepared before the `clone` (nothing is allocated after it).
pub(crate) struct Exec {
    pub(crate) path: CString,
    /// Keeps the strings `argv` points into.
    pub(crate) _cmdline: CString,
    pub(crate) argv: [*const libc::c_char; 3],
    pub(crate) envp: [*const libc::c_char; 1],
    pub(crate) filter: Vec<SockFilter>,
    /// `cgroup.procs` of each controller, open for the child to write itself into.
    pub(crate) procs: Vec<std::fs::File>,
    /// Each descriptor, the number the guest finds it at, and whether it is made
    /// non-blocking (the networks).
    pub(crate) fds: Vec<(OwnedFd, u32, bool)>,
    /// The write end of the console's pipe: the guest's standard output.
    pub(crate) console: OwnedFd,
    /// Where a failed step is reported (close-on-exec: a successful `execve` closes it).
    pub(crate) report: OwnedFd,
    /// The signal mask to give back to the child before it executes the guest.
    pub(crate) sigmask: libc::sigset_t,
    /// How long the child's writes to `procs` took, nanoseconds (it shares our memory).
    pub(crate) join_ns: AtomicU64,
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
            Step::Descriptors => "setting up the guest's descriptors",
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
            // (every descriptor Exec holds is at ABOVE_GUEST or higher, so no dup2
            // overwrites one still to be moved; dup2 onto itself would keep
            // close-on-exec: clear it either way)
            if libc::dup2(self.console.as_raw_fd(), CONSOLE_FD as i32) < 0
                || libc::fcntl(CONSOLE_FD as i32, libc::F_SETFD, 0) < 0
            {
                return (Step::Descriptors, errno());
            }
            let mut last = CONSOLE_FD as i32;
            for (fd, at, nonblocking) in &self.fds {
                let at = *at as i32;
                last = last.max(at);
                if libc::dup2(fd.as_raw_fd(), at) < 0 || libc::fcntl(at, libc::F_SETFD, 0) < 0 {
                    return (Step::Descriptors, errno());
                }
                let flags = libc::fcntl(at, libc::F_GETFL);
                if *nonblocking
                    && (flags < 0 || libc::fcntl(at, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0)
                {
                    return (Step::Descriptors, errno());
                }
            }
            libc::close(0);
            libc::close(2);
            // every other descriptor closes at the execve (the report pipe, already
            // close-on-exec, stays usable until then)
            const CLOSE_RANGE_CLOEXEC: libc::c_uint = 4;
            let first = (last + 1) as u32;
            if libc::syscall(libc::SYS_close_range, first, u32::MAX, CLOSE_RANGE_CLOEXEC) != 0 {
                for fd in first as i32..4096 {
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
/// The lowest number a descriptor the tender moves keeps before its `dup2`s: above
/// every number the guest is given, so that no `dup2` overwrites a descriptor still to
/// be moved (or the report pipe).
pub(crate) const ABOVE_GUEST: i32 = 16;

/// `fd` at a number of at least [`ABOVE_GUEST`] (close-on-exec).
pub(crate) fn above_guest(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    if fd.as_raw_fd() >= ABOVE_GUEST {
        return Ok(fd);
    }
    // SAFETY: duplicates a descriptor we own; the new one is owned by nobody else.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, ABOVE_GUEST) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `n` was just opened and is ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

pub(crate) fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
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
pub(crate) fn spawn(exec: &Exec, report: OwnedFd) -> Result<u32, Error> {
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
        return Err(Error::Io {
            what: "starting the spt tender (clone)".into(),
            source: std::io::Error::last_os_error(),
        });
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
        return Err(Error::Io {
            what: format!("the spt tender failed {what}"),
            source: std::io::Error::from_raw_os_error(errno),
        });
    }
    Ok(pid as u32)
}

/// This thread's signal mask (the tender gives it back to the guest).
pub(crate) fn current_sigmask() -> libc::sigset_t {
    // SAFETY: reads this thread's signal mask into a zeroed set.
    unsafe {
        let mut m: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut m);
        m
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: the guest's clock, read from outside.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live timespec the kernel writes.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
