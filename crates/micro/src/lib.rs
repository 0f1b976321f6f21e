//! Seed 001's micro-benchmarks as one set of loops that every runtime runs: the host's
//! `vtnt job` (the native process, the runc and Docker containers, the full VM) and the
//! unikernel (microVM and spt process) call the same [`run`] over their own [`Platform`],
//! so a figure differs between runtimes because the platform does, never the loop.
//!
//! What is measured, each loop `calls` times (the seed's million), timed on the job's
//! own clock ([`Platform::now_ns`]) and reported as a total, divided by the host:
//! - **CPU**: the Fibonacci number `fib` (40 in the seed), iteratively, on `u64`;
//! - **function call**: an indirect call of a function that returns 100 (indirect, so
//!   that the compiler can neither inline it nor hoist it out of the loop);
//! - **clock gap**: consecutive reads of the clock (the seed's two `gettimeofday`);
//! - **"system call"** (`syscalls` times): [`Platform::leave`], the cheapest call that
//!   leaves the program for whatever runs it: `close` of a descriptor that is not open
//!   on Linux (the seed's `close(3)`), a hypercall or an I/O port read in a VM, a system
//!   call through seccomp for the unikernel as a process (docs/benchmarks.md).
//!
//! The result is one JSON line, [`Totals`]'s `Display` (integers only: no float
//! formatting in the unikernel's image), read back by [`Totals::parse`].
#![no_std]

use core::fmt;
use core::hint::black_box;

/// The `type` of the result line.
pub const TYPE: &str = "micro";
/// The largest `fib` (fib(93) is the last that fits 64 bits).
pub const MAX_FIB: u32 = 93;
/// The most iterations of a loop.
pub const MAX_CALLS: u32 = 100_000_000;

/// What a micro job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Which Fibonacci number the CPU loop computes (0..=[`MAX_FIB`]).
    pub fib: u32,
    /// Iterations of the CPU, function-call and clock loops (0..=[`MAX_CALLS`]).
    pub calls: u32,
    /// Iterations of the loop of calls that leave the program (0..=[`MAX_CALLS`]): apart
    /// from `calls`, since one costs tens of microseconds where an exit is slow.
    pub syscalls: u32,
}

impl Default for Options {
    /// The seed's: fib(40), a million of each.
    fn default() -> Self {
        Options {
            fib: 40,
            calls: 1_000_000,
            syscalls: 1_000_000,
        }
    }
}

impl Options {
    /// The job that does nothing (boot and shutdown alone).
    pub const EMPTY: Options = Options {
        fib: 0,
        calls: 0,
        syscalls: 0,
    };

    /// The first field out of range, as (its name, the range allowed).
    pub fn out_of_range(&self) -> Option<(&'static str, &'static str)> {
        if self.fib > MAX_FIB {
            Some(("fib", "0..=93"))
        } else if self.calls > MAX_CALLS {
            Some(("calls", "0..=100000000"))
        } else if self.syscalls > MAX_CALLS {
            Some(("syscalls", "0..=100000000"))
        } else {
            None
        }
    }
}

/// What a runtime gives the loops.
pub trait Platform {
    /// Now on the job's clock, in nanoseconds (any origin; its resolution may be coarser).
    fn now_ns(&mut self) -> u64;
    /// The cheapest call that leaves the program for whatever runs it, with no effect.
    fn leave(&mut self);
    /// What [`Platform::leave`] is, for the report (`close(3)`, `hypercall`, ...).
    fn leave_name(&self) -> &'static str;
}

/// The `n`-th Fibonacci number, iteratively (wrapping past [`MAX_FIB`]).
pub fn fib(n: u32) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        (a, b) = (b, a.wrapping_add(b));
    }
    a
}

#[inline(never)]
fn hundred() -> u32 {
    100
}

/// Nanoseconds the loops took in total.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Totals<S = &'static str> {
    pub fib: u32,
    pub calls: u32,
    pub syscalls: u32,
    /// What one "system call" was ([`Platform::leave_name`]).
    pub syscall: S,
    pub fib_ns: u64,
    pub funcall_ns: u64,
    pub clock_ns: u64,
    pub syscall_ns: u64,
}

/// `n` runs of `body`, timed on `p`'s clock: generic over the body, so that each loop is
/// compiled with its body inline (an indirect call per iteration would be a function
/// call's cost).
fn timed(p: &mut dyn Platform, n: u32, mut body: impl FnMut(&mut dyn Platform)) -> u64 {
    let t0 = p.now_ns();
    for _ in 0..n {
        body(p);
    }
    p.now_ns().saturating_sub(t0)
}

/// Runs the loops of `o` on `p`; the result line is the returned value's `Display`.
///
/// Not generic over the platform: the loops are compiled here, with this crate's
/// optimisation, in every runtime (the unikernel's profile sets it: Cargo.toml). The
/// clock and the "system call" are reached through `p`'s vtable, an indirect call each
/// in every runtime.
pub fn run(o: &Options, p: &mut dyn Platform) -> Totals {
    let fib_ns = timed(p, o.calls, |_| {
        black_box(fib(black_box(o.fib)));
    });
    let f = black_box(hundred as fn() -> u32);
    let funcall_ns = timed(p, o.calls, |_| {
        black_box(f());
    });
    let clock_ns = timed(p, o.calls, |p| {
        black_box(p.now_ns());
    });
    let syscall_ns = timed(p, o.syscalls, |p| p.leave());
    Totals {
        fib: o.fib,
        calls: o.calls,
        syscalls: o.syscalls,
        syscall: p.leave_name(),
        fib_ns,
        funcall_ns,
        clock_ns,
        syscall_ns,
    }
}

impl<S: AsRef<str>> fmt::Display for Totals<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{\"type\":\"{TYPE}\",\"fib\":{},\"calls\":{},\"syscalls\":{},\"syscall\":\"{}\",\"fib_ns\":{},\"funcall_ns\":{},\"clock_ns\":{},\"syscall_ns\":{}}}",
            self.fib,
            self.calls,
            self.syscalls,
            self.syscall.as_ref(),
            self.fib_ns,
            self.funcall_ns,
            self.clock_ns,
            self.syscall_ns
        )
    }
}

impl<'a> Totals<&'a str> {
    /// Reads a result line back (every field `Display` writes, once each, and no other);
    /// `None` if `line` is not one.
    pub fn parse(line: &'a str) -> Option<Totals<&'a str>> {
        const NUMBERS: [&str; 7] = [
            "fib",
            "calls",
            "syscalls",
            "fib_ns",
            "funcall_ns",
            "clock_ns",
            "syscall_ns",
        ];
        let body = line
            .trim()
            .strip_prefix("{\"type\":\"micro\",")?
            .strip_suffix('}')?;
        let mut n: [Option<u64>; 7] = [None; 7];
        let mut syscall = None;
        for field in body.split(',') {
            let (k, v) = field.split_once(':')?;
            let k = k.strip_prefix('"')?.strip_suffix('"')?;
            let slot = match NUMBERS.iter().position(|x| *x == k) {
                Some(i) if n[i].is_none() => &mut n[i],
                None if k == "syscall" && syscall.is_none() => {
                    syscall = Some(v.strip_prefix('"')?.strip_suffix('"')?);
                    continue;
                }
                _ => return None,
            };
            *slot = Some(v.parse().ok()?);
        }
        let small = |i: usize| u32::try_from(n[i]?).ok();
        Some(Totals {
            fib: small(0)?,
            calls: small(1)?,
            syscalls: small(2)?,
            syscall: syscall?,
            fib_ns: n[3]?,
            funcall_ns: n[4]?,
            clock_ns: n[5]?,
            syscall_ns: n[6]?,
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::ToString;

    /// A clock that advances 7 ns a read; leaving costs 100 ns more.
    struct Fake(u64);
    impl Platform for Fake {
        fn now_ns(&mut self) -> u64 {
            self.0 += 7;
            self.0
        }
        fn leave(&mut self) {
            self.0 += 100;
        }
        fn leave_name(&self) -> &'static str {
            "close(3)"
        }
    }

    #[test]
    fn fib_is_fibonacci() {
        assert_eq!([0, 1, 2, 10, 40].map(fib), [0, 1, 1, 55, 102_334_155]);
        assert_eq!(fib(MAX_FIB), 12_200_160_415_121_876_738);
    }

    #[test]
    fn the_loops_are_timed_on_the_platform_clock() {
        let o = Options {
            fib: 10,
            calls: 5,
            syscalls: 3,
        };
        let t = run(&o, &mut Fake(0));
        // each loop: a read before and after; the clock loop reads 5 times between
        assert_eq!((t.fib_ns, t.funcall_ns), (7, 7));
        assert_eq!(t.clock_ns, 7 * 6);
        assert_eq!(t.syscall_ns, 3 * 100 + 7);
        assert_eq!(t.syscall, "close(3)");
        let empty = run(&Options::EMPTY, &mut Fake(0));
        assert_eq!(empty.calls + empty.syscalls, 0);
    }

    #[test]
    fn the_line_reads_back() {
        let t = run(&Options::default(), &mut Fake(0));
        let line = t.to_string();
        assert!(line.starts_with("{\"type\":\"micro\","), "{line}");
        assert_eq!(Totals::parse(&line), Some(t));
        for bad in [
            "",
            "{\"type\":\"trace\"}",
            &line.replace("\"fib\":40,", ""),
            &line.replace("}", ",\"fib\":40}"),
            &line.replace("\"calls\":1000000", "\"calls\":-1"),
            &line.replace("\"clock_ns\"", "\"other\""),
        ] {
            assert_eq!(Totals::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn ranges() {
        assert_eq!(Options::default().out_of_range(), None);
        let o = Options {
            fib: 94,
            ..Options::default()
        };
        assert_eq!(o.out_of_range(), Some(("fib", "0..=93")));
        let o = Options {
            syscalls: MAX_CALLS + 1,
            ..Options::default()
        };
        assert_eq!(o.out_of_range().map(|e| e.0), Some("syscalls"));
    }
}
