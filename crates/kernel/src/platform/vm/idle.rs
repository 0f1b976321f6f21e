//! Waiting: [`init`] sets up the IDT and the local APIC timer; [`wait_until`] then halts
//! the CPU (`sti; hlt`) until a deadline, so a waiting guest costs its host almost
//! nothing. Without a local APIC it degrades to one busy-poll turn. Under `vtnt-monitor`
//! the monitor waits instead (one hypercall, which also returns when a frame arrives).
//!
//! Above both [`super::time`] (the clock) and [`super::hvt`] (the hypercalls, which
//! timestamp frames with the clock), so neither reaches the other's way.

use super::arch::x86_64::{apic, interrupts};
use super::hvt;
use super::time::{instant_to_tsc, now, tsc_per_us};
use core::sync::atomic::{AtomicBool, Ordering};
use vtnt_record::Instant;

/// Whether [`wait_until`] may halt (a local APIC timer is armed to wake us).
static HALTS: AtomicBool = AtomicBool::new(false);

/// Installs the IDT and sets up the local APIC timer so [`wait_until`] can halt. Call
/// after the clock is calibrated. Returns the idle mechanism's name (`tsc-deadline`,
/// `one-shot`, or `spin` without a local APIC; `monitor-poll` under `vtnt-monitor`, which
/// waits for us and needs neither).
pub fn init() -> &'static str {
    if hvt::active() {
        return "monitor-poll";
    }
    interrupts::init();
    match apic::init() {
        Some(mode) => {
            HALTS.store(true, Ordering::Relaxed);
            mode.name()
        }
        None => "spin",
    }
}

/// Whether [`wait_until`] also returns when a frame arrives (under `vtnt-monitor`), so
/// callers need not poll the NIC while they expect one.
pub fn wakes_on_frames() -> bool {
    hvt::active()
}

/// Waits until guest time `deadline` or an earlier interrupt, whichever comes first
/// (callers loop and re-check their conditions). The CPU halts meanwhile; without a
/// local APIC this is one busy-poll turn.
pub fn wait_until(deadline: Instant) {
    if hvt::active() {
        let left = deadline.as_micros().saturating_sub(now().as_micros());
        if left > 0 {
            hvt::poll(left.saturating_mul(1000));
        }
        return;
    }
    if !HALTS.load(Ordering::Relaxed) {
        core::hint::spin_loop();
        return;
    }
    if now() >= deadline {
        return;
    }
    apic::arm(instant_to_tsc(deadline), tsc_per_us());
    interrupts::halt();
}
