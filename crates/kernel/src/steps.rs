//! Boot steps: the platform's timestamp ([`platform::ticks`]: the TSC in a VM) at the
//! end of each step of the boot path, printed in the exit line as `"steps_us":[...]`
//! (guest microseconds since the first instruction, 0 for a step not reached), so a run
//! tells where its boot time went.
//!
//! With the `marks` option (`vtnt-kernel-bench --breakdown` passes it) a VM also writes
//! each step's number to port 0x80 as it ends ([`platform::mark_step`]): a host tracing
//! the VM's port I/O (Linux's `kvm:kvm_pio` tracepoint) then sees where each step ends
//! among the VM's exits and can count them per step.

use crate::platform;
use core::sync::atomic::{AtomicU64, Ordering};

/// The steps, in boot order; the number is the index in `steps_us` plus one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    /// The first Rust instruction: in a VM, the 32-bit PVH entry (page tables, long mode)
    /// is done; as a process, the guest's own seccomp filter is in.
    LongMode = 1,
    /// The console is set up and the banner printed.
    Console = 2,
    /// The clock is known (a VM's TSC frequency; a process's clock needs nothing).
    Clock = 3,
    /// A VM's IDT and local APIC timer set up (a process waits in `ppoll`).
    Idle = 4,
    /// Heap set up, boot line printed.
    Heap = 5,
    /// The network found (a VM's PCI scan or virtio-mmio probing; a process's fd 3).
    NicFound = 6,
    /// The link ready: virtio's queues set up and receive buffers posted, the monitor's
    /// or the socket's buffers allocated.
    LinkUp = 7,
    /// The first hop's MAC address known (ARP).
    Arp = 8,
    /// The first probe sent.
    FirstProbe = 9,
}

const STEPS: usize = 9;

static TICKS: [AtomicU64; STEPS] = [const { AtomicU64::new(0) }; STEPS];

/// Records the end of `step` at timestamp `ticks` (and marks it, with `marks`).
pub fn mark_at(step: Step, ticks: u64) {
    TICKS[step as usize - 1].store(ticks, Ordering::Relaxed);
    platform::mark_step(step as u8);
}

/// Records the end of `step` now.
pub fn mark(step: Step) {
    mark_at(step, platform::ticks());
}

/// Writes `"steps_us":[...]` (guest microseconds since the first instruction per step).
pub fn write_json(f: &mut impl core::fmt::Write) -> core::fmt::Result {
    f.write_str("\"steps_us\":[")?;
    for (i, t) in TICKS.iter().enumerate() {
        let t = t.load(Ordering::Relaxed);
        let us = if t == 0 {
            0
        } else {
            platform::ticks_to_instant(t).as_micros()
        };
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{us}")?;
    }
    f.write_str("]")
}
