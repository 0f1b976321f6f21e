//! The process platform ("spt", after Solo5's): the kernel as a static Linux executable
//! that talks to Linux through raw system calls only, on the descriptors its tender gave
//! it (the interface is `vtnt_abi::spt`; read its docs first).
//!
//! Entry ([`_start`], the ELF entry point): the stack Linux built holds `argc`, `argv`;
//! `argv[1]` is the command line. The first act installs the guest's own seccomp filter
//! (`vtnt_abi::spt::GUEST_FILTER`: no `execve`, no `seccomp`, no file system), then the clock
//! starts, the heap is a static arena in `.bss` (pages Linux maps only when touched), and
//! the job starts. The clock is `CLOCK_MONOTONIC`; waiting is `ppoll` on the network
//! descriptor with the deadline as its timeout (so a wait ends when a frame arrives);
//! frames go out and come in with `write`/`read` on it (non-blocking: one Ethernet frame
//! per call); the console is `write` on standard output; the exit is `exit_group` with
//! the kernel's status.
//!
//! A network function (feature `fw`) has a second network at `NET2_FD`, polled beside the
//! first, and reads its rules from `MODULE_FD` as its boot module; its filter is
//! `vtnt_abi::spt::NF_FILTER` and its heap is large enough for a million rules.

use crate::fail;
use crate::platform::{Link, LinkError, Received};
use alloc::boxed::Box;
use core::arch::{asm, global_asm};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, Ordering};
use vtnt_abi::exit::Status;
use vtnt_abi::spt::{nr, CONSOLE_FD, NET_FD};
#[cfg(feature = "fw")]
use vtnt_abi::spt::{MODULE_FD, NET2_FD};
use vtnt_record::Instant;

/// Bytes of heap: far more than a job needs (its peak is printed); untouched pages cost
/// no memory.
#[cfg(not(feature = "fw"))]
const HEAP: usize = 8 << 20;
/// A network function's: a million rules, read and compiled (docs/benchmarks.md: about
/// 60-75 bytes a rule compiled, and the rule file itself); untouched pages cost nothing.
#[cfg(feature = "fw")]
const HEAP: usize = 1 << 30;
/// The guest's own filter.
#[cfg(not(feature = "fw"))]
const FILTER: &[vtnt_abi::spt::SockFilter] = &vtnt_abi::spt::GUEST_FILTER;
#[cfg(feature = "fw")]
const FILTER: &[vtnt_abi::spt::SockFilter] = &vtnt_abi::spt::NF_FILTER;
/// The network descriptors [`wait_until`] polls: the first's, and a network function's
/// second once opened.
static POLLED: AtomicU64 = AtomicU64::new(1);
/// The second network's descriptor (`vtnt_abi::spt::NET2_FD`).
const NET2: u32 = vtnt_abi::spt::NET2_FD;
const EAGAIN: isize = 11;
const EBADF: isize = 9;
const EINTR: isize = 4;
const POLLIN: i16 = 1;
const POLLNVAL: i16 = 0x20;
const CLOCK_MONOTONIC: usize = 1;

/// One system call with up to six arguments; the kernel's return value (`-errno` on
/// failure).
///
/// # Safety
/// The arguments must be valid for call `n` (pointers to live memory of the right size).
unsafe fn syscall(n: u32, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the `syscall` instruction enters Linux, which reads the arguments (and the
    // memory they point to, valid by the caller's contract) and clobbers rcx and r11.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") n as isize => ret,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2],
            in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack)
        )
    };
    ret
}

// The ELF entry: Linux enters with rsp at argc (16-byte aligned); pass it to `spt_main`.
global_asm!(
    ".globl _start",
    "_start:",
    "mov rdi, rsp",
    "and rsp, -16",
    "call {main}",
    "ud2",
    main = sym spt_main,
);

/// The heap arena.
#[repr(C, align(4096))]
struct Arena(UnsafeCell<[u8; HEAP]>);
// SAFETY: handed to the allocator once, in `spt_main`, and never touched otherwise.
unsafe impl Sync for Arena {}
static ARENA: Arena = Arena(UnsafeCell::new([0; HEAP]));

/// `CLOCK_MONOTONIC` at the first instruction, in nanoseconds.
static START_NS: AtomicU64 = AtomicU64::new(0);

extern "C" fn spt_main(sp: *const usize) -> ! {
    // SAFETY: the filter is a valid BPF program that outlives the call (a static);
    // installing it only restricts us.
    let sealed = unsafe {
        let prog = SockFprog {
            len: FILTER.len() as u16,
            filter: FILTER.as_ptr(),
        };
        syscall(
            nr::SECCOMP,
            [
                vtnt_abi::spt::SET_MODE_FILTER as usize,
                0,
                &prog as *const SockFprog as usize,
                0,
                0,
                0,
            ],
        )
    };
    #[cfg(feature = "spt-forbidden-call")]
    // SAFETY: `open` of a static NUL-terminated path; the filter kills us first.
    unsafe {
        syscall(2, [c"/etc/hostname".as_ptr() as usize, 0, 0, 0, 0, 0])
    };
    START_NS.store(mono_ns(), Ordering::Relaxed);
    let start_ticks = ticks();
    crate::platform::steps::mark_at(crate::platform::steps::Step::LongMode, start_ticks);
    if sealed != 0 {
        fail!(
            Status::BootFailed,
            "seccomp: the guest could not install its own filter (errno {})",
            -sealed
        );
    }
    // SAFETY: Linux's initial stack: argc, then argc pointers to NUL-terminated strings.
    let cmdline = unsafe {
        let argc = *sp;
        if argc < 2 {
            &[][..]
        } else {
            let p = *sp.add(2) as *const u8;
            let mut n = 0;
            while *p.add(n) != 0 {
                n += 1;
            }
            core::slice::from_raw_parts(p, n)
        }
    };
    super::banner("spt", 1, cmdline);
    crate::platform::steps::mark(crate::platform::steps::Step::Console);
    crate::platform::steps::mark(crate::platform::steps::Step::Clock);
    crate::platform::steps::mark(crate::platform::steps::Step::Idle);
    // SAFETY: the arena is a static used by nothing else, and this is the only call.
    unsafe { crate::platform::heap::init(ARENA.0.get().cast(), HEAP as u64) };
    crate::println!(
        "{{\"type\":\"boot\",\"platform\":\"spt\",\"mono_start_ns\":{},\"heap_kib\":{},\"boot_us\":{}}}",
        START_NS.load(Ordering::Relaxed),
        HEAP / 1024,
        now().as_micros()
    );
    crate::platform::steps::mark(crate::platform::steps::Step::Heap);
    super::start(cmdline)
}

/// `struct sock_fprog`.
#[repr(C)]
struct SockFprog {
    len: u16,
    filter: *const vtnt_abi::spt::SockFilter,
}

/// `struct timespec`.
#[repr(C)]
#[derive(Default)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

/// `struct pollfd`.
#[repr(C)]
struct PollFd {
    fd: i32,
    events: i16,
    revents: i16,
}

fn mono_ns() -> u64 {
    let mut ts = Timespec::default();
    // SAFETY: `ts` is a live timespec the kernel writes.
    unsafe {
        syscall(
            nr::CLOCK_GETTIME,
            [
                CLOCK_MONOTONIC,
                &mut ts as *mut Timespec as usize,
                0,
                0,
                0,
                0,
            ],
        )
    };
    ts.sec as u64 * 1_000_000_000 + ts.nsec as u64
}

/// Now, in microseconds since the first instruction.
pub fn now() -> Instant {
    ticks_to_instant(ticks())
}

/// Nanoseconds of `CLOCK_MONOTONIC`, for the boot steps.
pub fn ticks() -> u64 {
    mono_ns()
}

/// A [`ticks`] value as guest time.
pub fn ticks_to_instant(t: u64) -> Instant {
    Instant::from_micros(t.saturating_sub(START_NS.load(Ordering::Relaxed)) / 1000)
}

/// The micro job's "system call" (`vtnt_micro::Platform::leave`): the cheapest call into
/// Linux the guest's filter allows, `clock_gettime` (the filter forbids `close`, and
/// descriptor 3 is the network).
pub fn leave() {
    mono_ns();
}

/// What [`leave`] is, for the micro job's result.
pub fn leave_name() -> &'static str {
    "clock_gettime"
}

/// Waits until `deadline` or until a frame arrives, whichever is first.
pub fn wait_until(deadline: Instant) {
    let left_us = deadline.as_micros().saturating_sub(now().as_micros());
    if left_us > 0 {
        poll(left_us);
    }
}

/// `ppoll` on the network descriptors (the first [`POLLED`] of `NET_FD` and `NET2_FD`)
/// for at most `us` microseconds; the first one's `revents`.
fn poll(us: u64) -> i16 {
    poll_fds(
        &[NET_FD, NET2][..POLLED.load(Ordering::Relaxed) as usize],
        us,
    )[0]
}

/// `ppoll` on `fds` (at most two) for at most `us` microseconds; their `revents`.
fn poll_fds(fds: &[u32], us: u64) -> [i16; 2] {
    let ts = Timespec {
        sec: (us / 1_000_000) as i64,
        nsec: (us % 1_000_000 * 1000) as i64,
    };
    let mut p = [NET_FD, NET2].map(|fd| PollFd {
        fd: fd as i32,
        events: POLLIN,
        revents: 0,
    });
    let n = fds.len().min(2);
    for (p, &fd) in p.iter_mut().zip(fds) {
        p.fd = fd as i32;
    }
    // SAFETY: `n` live pollfds and a live timespec; no signal mask.
    unsafe {
        syscall(
            nr::PPOLL,
            [
                p.as_mut_ptr() as usize,
                n,
                &ts as *const Timespec as usize,
                0,
                8,
                0,
            ],
        )
    };
    [p[0].revents, p[1].revents]
}

/// A wait ends when a frame arrives: callers need not poll while they expect one.
pub fn wakes_on_frames() -> bool {
    true
}

/// Writes `bytes` to standard output.
pub fn console_emit(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: writes from a live slice.
        let n = unsafe {
            syscall(
                nr::WRITE,
                [
                    CONSOLE_FD as usize,
                    bytes.as_ptr() as usize,
                    bytes.len(),
                    0,
                    0,
                    0,
                ],
            )
        };
        match n {
            n if n > 0 => bytes = &bytes[(n as usize).min(bytes.len())..],
            n if n == -EINTR => {}
            _ => return,
        }
    }
}

/// Each line leaves as it ends (a system call costs little).
pub fn console_batches() -> bool {
    false
}

/// Ends the process with `status`.
pub fn exit(status: Status) -> ! {
    loop {
        // SAFETY: exit_group takes no pointer and does not return.
        unsafe { syscall(nr::EXIT_GROUP, [status as usize, 0, 0, 0, 0, 0]) };
    }
}

/// A process has no boot modules (targets come in the job line).
#[cfg(not(feature = "fw"))]
pub fn module(_: usize) -> Option<&'static [u8]> {
    None
}

/// A network function's one module, its rules: all of `MODULE_FD`, read once (a read
/// error fails the guest, naming it).
#[cfg(feature = "fw")]
pub fn module(i: usize) -> Option<&'static [u8]> {
    static READ: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
    if i != 0 || READ.swap(true, Ordering::Relaxed) {
        return None;
    }
    let mut text = alloc::vec::Vec::new();
    let mut chunk = alloc::vec![0u8; 1 << 20];
    loop {
        // SAFETY: reads into a live buffer of its own length.
        let n = unsafe {
            syscall(
                nr::READ,
                [
                    MODULE_FD as usize,
                    chunk.as_mut_ptr() as usize,
                    chunk.len(),
                    0,
                    0,
                    0,
                ],
            )
        };
        match n {
            0 => break,
            n if n > 0 => text.extend_from_slice(&chunk[..n as usize]),
            n if n == -EINTR => {}
            n if n == -EBADF => return None,
            n => fail!(
                Status::BootFailed,
                "reading the module at descriptor {MODULE_FD}: errno {}",
                -n
            ),
        }
    }
    Some(alloc::vec::Vec::leak(text))
}

/// No port marks: a process's steps are read from its exit line alone.
pub fn mark_step(_: u8) {}

/// A seed for DHCP's transaction ids.
pub fn random_seed() -> u64 {
    // SAFETY: `rdtsc` only reads the time-stamp counter.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The network descriptor, with the MAC the command line gives (`mac=`).
pub fn open_net(mac: Option<[u8; 6]>, _mmio: &[(u64, u64)]) -> Box<dyn Link> {
    let Some(mac) = mac else {
        fail!(
            Status::NoNic,
            "a process's network needs its MAC on the command line (mac=)"
        );
    };
    if poll(0) & POLLNVAL != 0 {
        fail!(
            Status::NoNic,
            "descriptor {NET_FD} is not open: the tender gives the network there"
        );
    }
    crate::platform::steps::mark(crate::platform::steps::Step::NicFound);
    crate::platform::steps::mark(crate::platform::steps::Step::LinkUp);
    Box::new(SocketLink {
        fd: NET_FD,
        mac,
        tx: new_frame(),
        rx: new_frame(),
    })
}

/// A network function's second network, at `NET2_FD` (the first is [`open_net`]'s);
/// polled beside the first from now on.
#[cfg(feature = "fw")]
pub fn open_second_net(mac: [u8; 6], _mmio: &[(u64, u64)]) -> Box<dyn Link> {
    if poll_fds(&[NET2_FD], 0)[0] & POLLNVAL != 0 {
        fail!(
            Status::NoNic,
            "descriptor {NET2_FD} is not open: the tender gives a network function's second network there"
        );
    }
    POLLED.store(2, Ordering::Relaxed);
    Box::new(SocketLink {
        fd: NET2_FD,
        mac,
        tx: new_frame(),
        rx: new_frame(),
    })
}

fn new_frame() -> Box<[u8]> {
    alloc::vec![0u8; vtnt_abi::hvt::FRAME_MAX].into_boxed_slice()
}

/// Frames over a network descriptor (`fd`), one per datagram or TAP read.
struct SocketLink {
    fd: u32,
    mac: [u8; 6],
    tx: Box<[u8]>,
    rx: Box<[u8]>,
}

impl Link for SocketLink {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn location(&self) -> &dyn core::fmt::Display {
        if self.fd == NET_FD {
            &"fd 3"
        } else {
            &"fd 4"
        }
    }

    fn tx_take(&mut self) -> Result<(Box<[u8]>, usize), LinkError> {
        Ok((core::mem::take(&mut self.tx), 0))
    }

    fn tx_give(&mut self, buf: Box<[u8]>, len: usize) -> Result<(), LinkError> {
        // SAFETY: writes from a live buffer of at least `len` bytes.
        let n = unsafe {
            syscall(
                nr::WRITE,
                [
                    self.fd as usize,
                    buf.as_ptr() as usize,
                    len.min(buf.len()),
                    0,
                    0,
                    0,
                ],
            )
        };
        self.tx = buf;
        // A full queue, or the front not there yet (a refused datagram): try again later.
        if n < 0 {
            Err(LinkError::Busy)
        } else {
            Ok(())
        }
    }

    fn next_frame(&mut self) -> Option<Received> {
        loop {
            // SAFETY: reads into a live buffer of its own length.
            let n = unsafe {
                syscall(
                    nr::READ,
                    [
                        self.fd as usize,
                        self.rx.as_mut_ptr() as usize,
                        self.rx.len(),
                        0,
                        0,
                        0,
                    ],
                )
            };
            if n > 0 {
                return Some(Received {
                    at: (0, n as usize),
                    t: now(),
                    buf: core::mem::take(&mut self.rx),
                });
            }
            // EAGAIN: nothing waiting; any other error (one queued by an earlier send, a
            // refused datagram): read on, unless it is the descriptor's own.
            if n == -EAGAIN || n == 0 || n == -EBADF {
                return None;
            }
        }
    }

    fn frame_done(&mut self, buf: Box<[u8]>) -> bool {
        self.rx = buf;
        true
    }
}
