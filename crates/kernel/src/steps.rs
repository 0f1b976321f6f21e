//! Boot steps: the TSC at the end of each step of the boot path, printed in the exit
//! line as `"steps_us":[...]` (guest microseconds since the first instruction, 0 for a
//! step not reached), so a run tells where its boot time went.
//!
//! With the `marks` option (`vtnt-kernel-bench --breakdown` passes it) each step also
//! writes its number to port [`MARK_PORT`] as it ends: a host tracing the VM's port I/O
//! (Linux's `kvm:kvm_pio` tracepoint) then sees where each step ends among the VM's exits
//! and can count them per step. Without the option the steps cost one `rdtsc` each.

use crate::arch::x86_64::io::{outb, rdtsc};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The port the `marks` option writes step numbers to (the PC's POST-code port, which
/// no device of ours uses).
pub const MARK_PORT: u16 = 0x80;

/// The steps, in boot order; the number is the index in `steps_us` plus one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    /// In 64-bit mode: the 32-bit PVH entry (page tables, long mode) is done.
    LongMode = 1,
    /// The console is set up and the banner printed.
    Console = 2,
    /// The TSC frequency is known.
    Clock = 3,
    /// IDT and local APIC timer set up.
    Idle = 4,
    /// Command line parsed, heap set up, boot line printed.
    Heap = 5,
    /// The virtio-net device found (PCI scan, virtio-mmio probing).
    NicFound = 6,
    /// The device's queues set up and receive buffers posted.
    VirtioUp = 7,
    /// The first hop's MAC address known (ARP).
    Arp = 8,
    /// The first probe sent.
    FirstProbe = 9,
}

const STEPS: usize = 9;

static TSC: [AtomicU64; STEPS] = [const { AtomicU64::new(0) }; STEPS];
static MARKS: AtomicBool = AtomicBool::new(false);

/// Turns the port marks on (the `marks` option).
pub fn enable_marks() {
    MARKS.store(true, Ordering::Relaxed);
}

/// Whether the raw command line has the `marks` option before its `--` (read before the
/// command line is parsed, so the first steps are marked too).
pub fn wanted(cmdline: &[u8]) -> bool {
    cmdline
        .split(|&b| b == b' ')
        .take_while(|&w| w != b"--")
        .any(|w| w == b"marks")
}

/// Records the end of `step` at TSC `tsc` (and marks it, with `marks`).
pub fn mark_at(step: Step, tsc: u64) {
    TSC[step as usize - 1].store(tsc, Ordering::Relaxed);
    if MARKS.load(Ordering::Relaxed) {
        // SAFETY: port 0x80 is the POST-code port: no device of ours uses it, a write has
        // no effect beyond the VM exit the host traces.
        unsafe { outb(MARK_PORT, step as u8) };
    }
}

/// Records the end of `step` now.
pub fn mark(step: Step) {
    mark_at(step, rdtsc());
}

/// Writes `"steps_us":[...]` (guest microseconds since the first instruction per step).
pub fn write_json(f: &mut impl core::fmt::Write) -> core::fmt::Result {
    f.write_str("\"steps_us\":[")?;
    for (i, t) in TSC.iter().enumerate() {
        let t = t.load(Ordering::Relaxed);
        let us = if t == 0 {
            0
        } else {
            crate::time::tsc_to_instant(t).as_micros()
        };
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{us}")?;
    }
    f.write_str("]")
}
