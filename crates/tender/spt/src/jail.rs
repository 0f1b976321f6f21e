//! The jail: the tender's seccomp filter (the guest's calls of `vtnt_abi::spt`, a job's or
//! a network function's, plus its
//! own `execve` of the guest pinned to one path pointer and `seccomp` for the guest's
//! stricter filter), and the refusal to run a guest on a kernel that cannot kill it.

use vtnt_abi::spt::{Rule, SockFilter};

use crate::Error;

/// The tender's filter: the guest's `calls`, `execve` of the one path at `path_ptr`, and
/// `seccomp` (for the guest's own, stricter filter).
pub fn tender_filter(calls: &[Rule], path_ptr: u64) -> Vec<SockFilter> {
    let mut rules = calls.to_vec();
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

/// Where Linux lists the seccomp actions it supports.
pub const ACTIONS_AVAIL: &str = "/proc/sys/kernel/seccomp/actions_avail";

/// Whether a kernel whose `actions_avail` reads `avail` can hold a guest: seccomp filters
/// with the kill-process action (Linux 4.14+, `CONFIG_SECCOMP_FILTER`).
pub fn seccomp_kills_processes(avail: &str) -> Result<(), Error> {
    if avail.split_whitespace().any(|a| a == "kill_process") {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "seccomp is unavailable: this kernel's {ACTIONS_AVAIL} does not list kill_process \
         (Linux 4.14 or later with CONFIG_SECCOMP_FILTER): the spt runtime will not run a \
         guest unfiltered"
    )))
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
    fn the_tender_adds_only_its_execve_and_seccomp() {
        use vtnt_abi::spt::GUEST_CALLS;
        let prog = tender_filter(&GUEST_CALLS, 0x7fff_0000_1000);
        let guest = vtnt_abi::spt::filter_len(&GUEST_CALLS);
        // the guest's rules, plus 7 instructions for execve's pinned pointer and 3 for seccomp
        assert_eq!(prog.len(), guest + 10);
    }
}
