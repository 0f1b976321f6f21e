//! The monitor's seccomp filter (Firecracker's practice): once the VM is set up, the
//! process may make only the system calls its run loop needs, and `ioctl` only with
//! `KVM_RUN` and `KVM_GET_REGS`. Anything else kills the process (`SIGSYS`), so a guest
//! that took over the monitor through a bug in a hypercall handler could not open files,
//! start programs or reach other devices. Installed on every thread (the monitor runs one).

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
/// needs to raise its signal (`getpid`, `gettid`, `tgkill`).
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
    libc::SYS_mmap,
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
