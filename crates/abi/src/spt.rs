//! The spt interface: what the vTNT unikernel, built as a Linux process (the kernel's
//! `spt` feature), and its tender (`vtnt run --runtime spt`) agree on. After Solo5's spt
//! ("unikernels as processes", Williams et al., SoCC 2018): the same guest, linked
//! against a tiny process platform, given a network descriptor and locked into a seccomp
//! filter of a handful of system calls.
//!
//! - **Start.** The tender executes the guest with one argument, the kernel command line
//!   (`ip=... gw=... mac=... -- <job>`, as a VM's), and an empty environment.
//! - **Descriptors.** [`CONSOLE_FD`] (standard output: the console's lines) and
//!   [`NET_FD`] (non-blocking, one Ethernet frame per `read` or `write`: a datagram
//!   socket connected to the lab's VM front, as QEMU's `-netdev dgram` is, or a TAP
//!   device). No other descriptor is open, but for a network function (the kernel's
//!   `fw` build): its second network at [`NET2_FD`] (as [`NET_FD`]) and its rules at
//!   [`MODULE_FD`] (a file open for reading: the boot module a VM gets from its VMM).
//! - **System calls.** Exactly [`GUEST_CALLS`]: `write` on the console, `read` and
//!   `write` on the network, `ppoll` to wait for a frame or a deadline, the monotonic
//!   clock and `exit_group`; a network function's [`NF_CALLS`] add `read` and `write` on
//!   its second network and `read` of its module. The exit status is a [`crate::exit::Status`].
//! - **The filter.** [`filter`] compiles a rule list into classic BPF for
//!   `seccomp(SECCOMP_SET_MODE_FILTER)`: any call outside the list kills the process
//!   (`SECCOMP_RET_KILL_PROCESS`, SIGSYS), and so does any other architecture or ABI.
//!   The tender installs [`GUEST_CALLS`] plus its own `execve` of the guest (pinned to
//!   one path pointer) and `seccomp`; the guest's first act installs [`GUEST_CALLS`]
//!   alone, so from its first line of job code no `execve` is left. Filters stack, and
//!   the stricter decides.

/// The console: standard output.
pub const CONSOLE_FD: u32 = 1;
/// The network: a datagram socket, one Ethernet frame per datagram.
pub const NET_FD: u32 = 3;

/// A network function's second network, as [`NET_FD`].
pub const NET2_FD: u32 = 4;
/// A network function's boot module (its rules): a file open for reading.
pub const MODULE_FD: u32 = 5;

/// x86_64 system call numbers the interface names.
pub mod nr {
    pub const READ: u32 = 0;
    pub const WRITE: u32 = 1;
    pub const EXECVE: u32 = 59;
    pub const CLOCK_GETTIME: u32 = 228;
    pub const EXIT_GROUP: u32 = 231;
    pub const PPOLL: u32 = 271;
    pub const SECCOMP: u32 = 317;
}

/// One allowed system call: its number, and the value its first argument must have
/// (`None`: any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub name: &'static str,
    pub nr: u32,
    pub arg0: Option<u64>,
}

/// The calls the guest may make, and on which descriptor.
pub const GUEST_CALLS: [Rule; 6] = [
    Rule {
        name: "write",
        nr: nr::WRITE,
        arg0: Some(CONSOLE_FD as u64),
    },
    Rule {
        name: "write",
        nr: nr::WRITE,
        arg0: Some(NET_FD as u64),
    },
    Rule {
        name: "read",
        nr: nr::READ,
        arg0: Some(NET_FD as u64),
    },
    Rule {
        name: "ppoll",
        nr: nr::PPOLL,
        arg0: None,
    },
    Rule {
        name: "clock_gettime",
        nr: nr::CLOCK_GETTIME,
        arg0: None,
    },
    Rule {
        name: "exit_group",
        nr: nr::EXIT_GROUP,
        arg0: None,
    },
];

/// A network function's calls: the guest's, and its second network and module.
pub const NF_CALLS: [Rule; 9] = {
    let mut r = [GUEST_CALLS[0]; 9];
    let mut i = 0;
    while i < GUEST_CALLS.len() {
        r[i] = GUEST_CALLS[i];
        i += 1;
    }
    r[6] = Rule {
        name: "write",
        nr: nr::WRITE,
        arg0: Some(NET2_FD as u64),
    };
    r[7] = Rule {
        name: "read",
        nr: nr::READ,
        arg0: Some(NET2_FD as u64),
    };
    r[8] = Rule {
        name: "read",
        nr: nr::READ,
        arg0: Some(MODULE_FD as u64),
    };
    r
};

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// `AUDIT_ARCH_X86_64`.
pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// `SECCOMP_RET_KILL_PROCESS`.
pub const RET_KILL_PROCESS: u32 = 0x8000_0000;
/// `SECCOMP_RET_ALLOW`.
pub const RET_ALLOW: u32 = 0x7fff_0000;
/// `SECCOMP_SET_MODE_FILTER`.
pub const SET_MODE_FILTER: u32 = 1;

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K
                         // offsets in `struct seccomp_data`
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LO: u32 = 16;
const ARG0_HI: u32 = 20;

/// Instructions [`filter`] writes for `rules`.
pub const fn filter_len(rules: &[Rule]) -> usize {
    let mut n = 4; // arch check (3) + the final kill
    let mut i = 0;
    while i < rules.len() {
        n += if rules[i].arg0.is_some() { 7 } else { 3 };
        i += 1;
    }
    n
}

const fn op(code: u16, k: u32, jt: u8, jf: u8) -> SockFilter {
    SockFilter { code, jt, jf, k }
}

/// Compiles `rules` into `out` (at least [`filter_len`] long); returns the length used.
/// The program: kill unless the architecture is x86_64; for each rule, allow when the
/// number (and the first argument, both halves) match; kill otherwise.
pub const fn filter(rules: &[Rule], out: &mut [SockFilter]) -> usize {
    let mut at = 0;
    out[0] = op(LD_W_ABS, ARCH, 0, 0);
    out[1] = op(JEQ_K, AUDIT_ARCH_X86_64, 1, 0);
    out[2] = op(RET_K, RET_KILL_PROCESS, 0, 0);
    at += 3;
    let mut i = 0;
    while i < rules.len() {
        let r = rules[i];
        out[at] = op(LD_W_ABS, NR, 0, 0);
        match r.arg0 {
            None => {
                out[at + 1] = op(JEQ_K, r.nr, 0, 1);
                out[at + 2] = op(RET_K, RET_ALLOW, 0, 0);
                at += 3;
            }
            Some(v) => {
                // a mismatch skips to the next rule, which loads the number again
                out[at + 1] = op(JEQ_K, r.nr, 0, 5);
                out[at + 2] = op(LD_W_ABS, ARG0_LO, 0, 0);
                out[at + 3] = op(JEQ_K, v as u32, 0, 3);
                out[at + 4] = op(LD_W_ABS, ARG0_HI, 0, 0);
                out[at + 5] = op(JEQ_K, (v >> 32) as u32, 0, 1);
                out[at + 6] = op(RET_K, RET_ALLOW, 0, 0);
                at += 7;
            }
        }
        i += 1;
    }
    out[at] = op(RET_K, RET_KILL_PROCESS, 0, 0);
    at + 1
}

/// The guest's own filter, compiled at build time.
pub const GUEST_FILTER: [SockFilter; filter_len(&GUEST_CALLS)] = {
    let mut out = [op(0, 0, 0, 0); filter_len(&GUEST_CALLS)];
    filter(&GUEST_CALLS, &mut out);
    out
};

/// A network function's own filter, compiled at build time.
pub const NF_FILTER: [SockFilter; filter_len(&NF_CALLS)] = {
    let mut out = [op(0, 0, 0, 0); filter_len(&NF_CALLS)];
    filter(&NF_CALLS, &mut out);
    out
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;
    use std::vec::Vec;

    /// Runs the program on one `seccomp_data` (number, architecture, first argument).
    fn run(prog: &[SockFilter], nr: u32, arch: u32, arg0: u64) -> u32 {
        let data = |off: u32| match off {
            NR => nr,
            ARCH => arch,
            ARG0_LO => arg0 as u32,
            ARG0_HI => (arg0 >> 32) as u32,
            _ => panic!("unexpected load at {off}"),
        };
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = prog[pc];
            pc += 1;
            match i.code {
                LD_W_ABS => acc = data(i.k),
                JEQ_K => pc += if acc == i.k { i.jt } else { i.jf } as usize,
                RET_K => return i.k,
                c => panic!("unexpected opcode {c:#x}"),
            }
        }
    }

    #[test]
    fn the_guest_may_make_exactly_its_listed_calls_on_its_own_descriptors() {
        let f = &GUEST_FILTER;
        let x86 = AUDIT_ARCH_X86_64;
        assert_eq!(run(f, nr::WRITE, x86, 1), RET_ALLOW);
        assert_eq!(run(f, nr::WRITE, x86, 3), RET_ALLOW);
        assert_eq!(run(f, nr::WRITE, x86, 2), RET_KILL_PROCESS);
        assert_eq!(run(f, nr::WRITE, x86, 4), RET_KILL_PROCESS);
        assert_eq!(run(f, nr::WRITE, x86, 1 | 1 << 32), RET_KILL_PROCESS);
        assert_eq!(run(f, nr::READ, x86, 3), RET_ALLOW);
        assert_eq!(run(f, nr::READ, x86, 0), RET_KILL_PROCESS);
        assert_eq!(run(f, nr::READ, x86, 1), RET_KILL_PROCESS);
        for n in [nr::PPOLL, nr::CLOCK_GETTIME, nr::EXIT_GROUP] {
            assert_eq!(run(f, n, x86, 12345), RET_ALLOW);
        }
        // every other call, including the tender's own, and another ABI, are killed
        for n in (0..450).filter(|n| {
            ![
                nr::READ,
                nr::WRITE,
                nr::PPOLL,
                nr::CLOCK_GETTIME,
                nr::EXIT_GROUP,
            ]
            .contains(n)
        }) {
            assert_eq!(run(f, n, x86, 3), RET_KILL_PROCESS, "call {n}");
        }
        assert_eq!(run(f, nr::WRITE | 0x4000_0000, x86, 1), RET_KILL_PROCESS);
        assert_eq!(run(f, nr::WRITE, 0x4000_0003, 1), RET_KILL_PROCESS);
    }

    #[test]
    fn a_network_function_reads_its_module_and_moves_frames_on_both_networks() {
        let f = &NF_FILTER;
        let x86 = AUDIT_ARCH_X86_64;
        for fd in [NET_FD, NET2_FD] {
            assert_eq!(run(f, nr::READ, x86, fd as u64), RET_ALLOW);
            assert_eq!(run(f, nr::WRITE, x86, fd as u64), RET_ALLOW);
        }
        assert_eq!(run(f, nr::READ, x86, MODULE_FD as u64), RET_ALLOW);
        // the module is not written, nothing else is read or written
        assert_eq!(run(f, nr::WRITE, x86, MODULE_FD as u64), RET_KILL_PROCESS);
        assert_eq!(run(f, nr::READ, x86, 6), RET_KILL_PROCESS);
        assert_eq!(run(f, nr::WRITE, x86, 2), RET_KILL_PROCESS);
        assert_eq!(run(f, nr::EXECVE, x86, 0), RET_KILL_PROCESS);
        // a job's filter keeps its one network
        assert_eq!(
            run(&GUEST_FILTER, nr::READ, x86, NET2_FD as u64),
            RET_KILL_PROCESS
        );
        assert_eq!(
            run(&GUEST_FILTER, nr::READ, x86, MODULE_FD as u64),
            RET_KILL_PROCESS
        );
    }

    #[test]
    fn the_documented_list_is_the_list() {
        let names: [&str; 6] = GUEST_CALLS.map(|r| r.name);
        assert_eq!(
            names,
            [
                "write",
                "write",
                "read",
                "ppoll",
                "clock_gettime",
                "exit_group"
            ]
        );
        assert_eq!(GUEST_FILTER.len(), filter_len(&GUEST_CALLS));
    }

    /// docs/deploy.md's table of the guest's calls is [`GUEST_CALLS`], row for row.
    #[test]
    fn the_docs_list_the_filter() {
        let doc = include_str!("../../../docs/deploy.md");
        let rows: Vec<(&str, &str)> = doc
            .lines()
            .skip_while(|l| *l != "| call | allowed on |")
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| {
                let mut cells = l.split('|').map(str::trim).filter(|c| !c.is_empty());
                Some((cells.next()?.trim_matches('`'), cells.next()?))
            })
            .collect();
        assert_eq!(rows.len(), GUEST_CALLS.len(), "{rows:?}");
        for (rule, (name, on)) in GUEST_CALLS.iter().zip(&rows) {
            assert_eq!(rule.name, *name);
            match rule.arg0 {
                Some(fd) => assert!(on.starts_with(&format!("descriptor {fd}")), "{on}"),
                None => assert!(on.starts_with("any"), "{on}"),
            }
        }
    }

    #[test]
    fn a_pinned_argument_compares_both_halves() {
        let rules = [Rule {
            name: "execve",
            nr: nr::EXECVE,
            arg0: Some(0x7fff_1234_5678),
        }];
        let mut prog = [SockFilter::default(); 16];
        let n = filter(&rules, &mut prog);
        let x86 = AUDIT_ARCH_X86_64;
        assert_eq!(
            run(&prog[..n], nr::EXECVE, x86, 0x7fff_1234_5678),
            RET_ALLOW
        );
        assert_eq!(
            run(&prog[..n], nr::EXECVE, x86, 0x1234_5678),
            RET_KILL_PROCESS
        );
        assert_eq!(
            run(&prog[..n], nr::EXECVE, x86, 0x7ffe_1234_5678),
            RET_KILL_PROCESS
        );
    }
}
