//! The monitor's seccomp filter (Firecracker's practice): once the VM is set up, the
//! process may make only the system calls its run loop needs, and `ioctl` only with
//! `KVM_RUN` and `KVM_GET_REGS`. Anything else kills the process (`SIGSYS`), so a guest
//! that took over the monitor through a bug in a hypercall handler could not open files,
//! start programs or reach other devices. Installed on every thread (the monitor runs
//! one), after a monitor started as root has become `nobody` ([`drop_privileges`]).

use seccompiler::{
    apply_filter_all_threads, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp,
    SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// `_IO(KVMIO, 0x80)`.
const KVM_RUN: u64 = 0xae80;
/// `_IOR(KVMIO, 0x81, struct kvm_regs)`.
const KVM_GET_REGS: u64 = 0x8090_ae81;

/// System calls allowed whatever their arguments: console and frame I/O, waiting, the
/// watchdog's signal (its handler's return) and its timer's deletion, memory the
/// allocator returns or takes, closing descriptors (std checks them with
/// `fcntl(F_GETFD)` first) and the exit, `getrusage` for `--stats`, and what an abort
/// needs to raise its signal (`getpid`, `gettid`, `tgkill`). `mmap` and `mprotect` (the
/// allocator) are allowed without `PROT_EXEC` only ([`install`]).
const ALLOWED: &[libc::c_long] = &[
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_writev,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_ppoll,
    libc::SYS_poll,
    libc::SYS_futex,
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigprocmask,
    libc::SYS_sigaltstack,
    libc::SYS_tgkill,
    libc::SYS_getpid,
    libc::SYS_gettid,
    libc::SYS_clock_gettime,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
    libc::SYS_sched_yield,
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_madvise,
    libc::SYS_brk,
    libc::SYS_close,
    libc::SYS_fcntl,
    libc::SYS_getrusage,
    libc::SYS_timer_delete,
    libc::SYS_exit,
    libc::SYS_exit_group,
];

/// The user and group a monitor started as root runs its guest as (`nobody`).
const NOBODY: u32 = 65534;

/// Gives up root before the filter goes on (as Firecracker's jailer does): no
/// supplementary groups, then group and user `nobody`, real, effective and saved, which
/// takes every capability with them. The descriptors already open (the VM and its vCPU,
/// the NIC) stay usable. A monitor started by another user keeps that user. The kernel
/// clears the parent-death signal on a change of credentials: it is set again.
pub(crate) fn drop_privileges() -> Result<(), String> {
    use nix::unistd::{setgroups, setresgid, setresuid, Gid, Uid};
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let (g, u) = (Gid::from_raw(NOBODY), Uid::from_raw(NOBODY));
    setgroups(&[]).map_err(|e| format!("dropping supplementary groups: {e}"))?;
    setresgid(g, g, g).map_err(|e| format!("becoming group {NOBODY}: {e}"))?;
    setresuid(u, u, u).map_err(|e| format!("becoming user {NOBODY}: {e}"))?;
    crate::watchdog::die_with_parent().map_err(|e| format!("after dropping root: {e}"))
}

/// Installs the filter on every thread of the process.
pub(crate) fn install() -> Result<(), String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        ALLOWED.iter().map(|&nr| (nr, Vec::new())).collect();
    let ioctl = [KVM_RUN, KVM_GET_REGS]
        .into_iter()
        .map(|req| {
            let c = SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, req)
                .map_err(|e| e.to_string())?;
            SeccompRule::new(vec![c]).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, String>>()?;
    rules.insert(libc::SYS_ioctl, ioctl);
    // memory, but never executable: no new code after the filter
    for nr in [libc::SYS_mmap, libc::SYS_mprotect] {
        let no_exec = SeccompCondition::new(
            2,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(libc::PROT_EXEC as u64),
            0,
        )
        .and_then(|c| SeccompRule::new(vec![c]))
        .map_err(|e| e.to_string())?;
        rules.insert(nr, vec![no_exec]);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::KillProcess,
        SeccompAction::Allow,
        TargetArch::x86_64,
    )
    .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    apply_filter_all_threads(&program).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    /// Set in the child run of [`a_call_outside_the_filter_kills_the_process`].
    const CHILD: &str = "VTNT_JAIL_TEST_CHILD";

    /// The filter installed, a call it does not allow (`openat`) kills the process with
    /// SIGSYS. The test runs itself again as a child process, which installs the filter
    /// and opens a file.
    #[test]
    fn a_call_outside_the_filter_kills_the_process() {
        if std::env::var_os(CHILD).is_some() {
            super::install().unwrap();
            let _ = std::fs::File::open("/proc/self/status");
            std::process::exit(0);
        }
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "jail::tests::a_call_outside_the_filter_kills_the_process",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .output()
            .unwrap();
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGSYS),
            "{:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
