//! Boot steps (`vtnt_abi::steps`): the platform's timestamp ([`platform::ticks`]: the TSC
//! in a VM) at the end of each step of the boot path, printed in the exit record
//! (guest microseconds since the first instruction, 0 for a step not reached), so a run
//! tells where its boot time went.
//!
//! With the `marks` option (`vtnt-kernel-bench --breakdown` passes it) a VM also writes
//! each step's number to port 0x80 as it ends ([`platform::mark_step`]): a host tracing
//! the VM's port I/O (Linux's `kvm:kvm_pio` tracepoint) then sees where each step ends
//! among the VM's exits and can count them per step.

use crate::platform;
use core::sync::atomic::{AtomicU64, Ordering};

pub use vtnt_abi::steps::Step;
use vtnt_abi::steps::COUNT;

static TICKS: [AtomicU64; COUNT] = [const { AtomicU64::new(0) }; COUNT];

/// Records the end of `step` at timestamp `ticks` (and marks it, with `marks`).
pub fn mark_at(step: Step, ticks: u64) {
    TICKS[step.index()].store(ticks, Ordering::Relaxed);
    platform::mark_step(step as u8);
}

/// Records the end of `step` now.
pub fn mark(step: Step) {
    mark_at(step, platform::ticks());
}

/// Guest microseconds since the first instruction at the end of each step (0: not
/// reached), for the exit record.
pub fn us() -> impl Iterator<Item = u64> {
    TICKS.iter().map(|t| match t.load(Ordering::Relaxed) {
        0 => 0,
        t => platform::ticks_to_instant(t).as_micros(),
    })
}
