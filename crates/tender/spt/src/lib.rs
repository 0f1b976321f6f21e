//! The spt tender: the vTNT unikernel as a sandboxed Linux process (Solo5's spt,
//! "unikernels as processes", Williams et al., SoCC 2018; the interface is
//! `vtnt_abi::spt`). The hvt monitor's sibling (`crates/tender/hvt`, `vtnt-monitor`),
//! with the same module shape where spt has the part:
//!
//! - set-up and boot ([`boot`]): the tender as the child of a `vfork`-style `clone`:
//!   process group, cgroup, descriptors 1 and 3, `no_new_privs`, filter, `execve`;
//! - the jail ([`jail`]): the seccomp filter, and a kernel that cannot kill is refused;
//! - no run loop and no call handlers: the guest's calls go to Linux itself, which the
//!   filter holds to `vtnt_abi::spt::GUEST_CALLS`; what is left is reading how the guest
//!   ended ([`outcome`]).
//!
//! [`exec`] is the whole of it for a caller (`vtnt-runtimes`' spt runtime, `vtnt bench
//! net`'s endpoint): the guest's image, its descriptors ([`Descriptors`]: a job's network,
//! or a network function's two networks and rules), its command line and the cgroup files
//! to join in; back come its pid and console.

pub mod boot;
pub mod jail;

pub use boot::monotonic_ns;

use std::ffi::CString;
use std::fmt;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Why a guest could not be started.
#[derive(Debug)]
pub enum Error {
    /// A step failed with this system error (`what`: which).
    Io {
        what: String,
        source: std::io::Error,
    },
    /// The tender will not start this guest here (`.0`: why).
    Refused(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, source } => write!(f, "{what}: {source}"),
            Error::Refused(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Refused(_) => None,
        }
    }
}

/// The exit status of a tender whose `execve` of the guest failed.
pub(crate) const EXEC_FAILED: i32 = 126;

/// The longest argument Linux passes to a program (`MAX_ARG_STRLEN`, with its NUL).
pub const MAX_ARG_BYTES: usize = 128 << 10;

/// A guest the tender executed.
pub struct Tendered {
    pub pid: u32,
    /// The read end of the guest's console (its standard output).
    pub console: OwnedFd,
    /// When the tender started (for the instance's own clock).
    pub started: Instant,
    /// `CLOCK_MONOTONIC` just before the `clone`, nanoseconds: the guest's clock.
    pub spawn_ns: u64,
    /// How long the tender took to join the cgroup (`procs`).
    pub cgroup_join: Duration,
}

/// What the guest is given beside its console (`vtnt_abi::spt`'s descriptors).
pub enum Descriptors {
    /// A job's network, at descriptor 3.
    Job { net: OwnedFd },
    /// A network function's (the kernel's `fw` build): its two networks at 3 and 4, its
    /// rules at 5; the filter then holds it to `vtnt_abi::spt::NF_CALLS`.
    Nf { nets: [OwnedFd; 2], module: OwnedFd },
}

/// Executes the guest `image` with `cmdline` through the tender: its descriptors `fds`
/// at the interface's numbers, written into each of `procs` (a cgroup's `cgroup.procs`,
/// open for writing) before anything else. Refused: a kernel without seccomp's kill
/// action, a command line Linux would not pass.
pub fn exec(
    image: &Path,
    fds: Descriptors,
    cmdline: &str,
    procs: Vec<File>,
) -> Result<Tendered, Error> {
    jail::seccomp_kills_processes(
        &std::fs::read_to_string(jail::ACTIONS_AVAIL).unwrap_or_default(),
    )?;
    if cmdline.len() >= MAX_ARG_BYTES {
        return Err(Error::Refused(format!(
            "the spt guest reads its job, targets included, from its one argument, which Linux caps at {MAX_ARG_BYTES} bytes: this job's is {}",
            cmdline.len()
        )));
    }
    let io = |what: &str| {
        let what = what.to_string();
        move |source| Error::Io { what, source }
    };
    let path = CString::new(image.as_os_str().as_bytes())
        .map_err(|_| Error::Refused(format!("the image path {} has a NUL", image.display())))?;
    let cmdline = CString::new(cmdline)
        .map_err(|_| Error::Refused("the guest's command line has a NUL".into()))?;
    let (console_r, console_w) = boot::pipe().map_err(io("the console's pipe"))?;
    let (report_r, report_w) = boot::pipe().map_err(io("the tender's report pipe"))?;
    let moved =
        |fd| boot::above_guest(fd).map_err(io("moving a descriptor out of the guest's numbers"));
    let (console_w, report_w) = (moved(console_w)?, moved(report_w)?);
    use vtnt_abi::spt::{GUEST_CALLS, MODULE_FD, NET2_FD, NET_FD, NF_CALLS};
    let (calls, fds): (&[vtnt_abi::spt::Rule], Vec<(OwnedFd, u32, bool)>) = match fds {
        Descriptors::Job { net } => (&GUEST_CALLS, vec![(net, NET_FD, true)]),
        Descriptors::Nf {
            nets: [a, b],
            module,
        } => (
            &NF_CALLS,
            vec![
                (a, NET_FD, true),
                (b, NET2_FD, true),
                (module, MODULE_FD, false),
            ],
        ),
    };
    let fds = fds
        .into_iter()
        .map(|(fd, at, nonblocking)| Ok((moved(fd)?, at, nonblocking)))
        .collect::<Result<Vec<_>, Error>>()?;
    let exec = boot::Exec {
        filter: jail::tender_filter(calls, path.as_ptr() as u64),
        argv: [path.as_ptr(), cmdline.as_ptr(), std::ptr::null()],
        envp: [std::ptr::null()],
        path,
        _cmdline: cmdline,
        procs,
        fds,
        console: console_w,
        report: report_w,
        sigmask: boot::current_sigmask(),
        join_ns: AtomicU64::new(0),
    };
    let started = Instant::now();
    let spawn_ns = monotonic_ns();
    let pid = boot::spawn(&exec, report_r)?;
    let cgroup_join = Duration::from_nanos(exec.join_ns.load(Ordering::Relaxed));
    // our copies of the child's ends (the console's write end above all) close here, so
    // that the guest's exit ends the console's reads
    drop(exec);
    Ok(Tendered {
        pid,
        console: console_r,
        started,
        spawn_ns,
        cgroup_join,
    })
}

/// What the guest's exit means: its status (a `vtnt_abi::exit::Status`), or why there
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
    fn a_sigsys_death_is_named() {
        let (code, why) = outcome(ExitStatus::from_raw(libc::SIGSYS));
        assert_eq!(code, None);
        assert!(why.unwrap().contains("SIGSYS"));
        assert_eq!(outcome(ExitStatus::from_raw(2 << 8)), (Some(2), None));
    }

    #[test]
    fn a_command_line_linux_would_not_pass_is_refused() {
        let (r, _w) = boot::pipe().unwrap();
        let long = "x".repeat(MAX_ARG_BYTES);
        let e = exec(
            Path::new("/nonexistent"),
            Descriptors::Job { net: r },
            &long,
            Vec::new(),
        );
        let e = e.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            e.contains("caps at") || e.contains("seccomp is unavailable"),
            "{e}"
        );
    }
}
