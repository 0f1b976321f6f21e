//! The local APIC timer, one-shot, as the kernel's only interrupt source: it ends the
//! `hlt` the idle loop sits in.
//!
//! - Register access: x2APIC (MSRs 0x800+) when CPUID says so (KVM `-cpu host`),
//!   otherwise xAPIC MMIO at the base `IA32_APIC_BASE` names (0xFEE00000 on QEMU
//!   microvm/q35/pc; TCG's default CPU has no x2APIC). The top GiB is mapped uncached.
//! - Mode: TSC-deadline when CPUID.1:ECX[24] says so (a deadline is a TSC value, no
//!   calibration); otherwise one-shot with divide-by-1, its rate measured against the
//!   TSC lazily: the counter is started at [`init`] and read on the first [`arm`], so
//!   the measurement window is the boot itself (at least [`CAL_MIN_TSC_US`]) and costs
//!   the boot job nothing.
//!
//! Without a local APIC, [`init`] returns `None` and the kernel keeps busy-polling.

use super::interrupts::{SPURIOUS_VECTOR, TIMER_VECTOR, VTNT_APIC_EOI_MMIO};
use super::io::{cpuid, rdmsr, rdtsc, wrmsr};
use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};

const IA32_APIC_BASE: u32 = 0x1b;
const IA32_TSC_DEADLINE: u32 = 0x6e0;
const REG_TPR: u32 = 0x80;
const REG_SVR: u32 = 0xf0;
const REG_LVT_TIMER: u32 = 0x320;
const REG_INITIAL_COUNT: u32 = 0x380;
const REG_CURRENT_COUNT: u32 = 0x390;
const REG_DIVIDE: u32 = 0x3e0;
const LVT_MASKED: u32 = 1 << 16;
const LVT_TSC_DEADLINE: u32 = 0b10 << 17;
/// The shortest calibration window, in microseconds.
pub const CAL_MIN_TSC_US: u64 = 1000;

/// How the timer is driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    TscDeadline,
    OneShot,
}

impl Mode {
    pub const fn name(self) -> &'static str {
        match self {
            Mode::TscDeadline => "tsc-deadline",
            Mode::OneShot => "one-shot",
        }
    }
}

/// 0: not initialised; 1: TSC-deadline; 2: one-shot.
static MODE: AtomicU8 = AtomicU8::new(0);
/// xAPIC MMIO base, 0 in x2APIC mode.
static MMIO: AtomicU64 = AtomicU64::new(0);
/// One-shot mode: APIC ticks per TSC tick, 32.32 fixed point (0: not measured yet).
static APIC_PER_TSC_FP: AtomicU64 = AtomicU64::new(0);
/// One-shot mode: the TSC when the calibration count started.
static CAL_TSC: AtomicU64 = AtomicU64::new(0);

fn read(reg: u32) -> u32 {
    let mmio = MMIO.load(Ordering::Relaxed);
    if mmio == 0 {
        // SAFETY: x2APIC mode is enabled (init), so MSR 0x800 + reg/16 exists.
        unsafe { rdmsr(0x800 + (reg >> 4)) as u32 }
    } else {
        // SAFETY: `mmio` is the identity-mapped, uncached xAPIC page (init); `reg` is one
        // of its aligned 32-bit registers.
        unsafe { core::ptr::read_volatile((mmio + reg as u64) as *const u32) }
    }
}

fn write(reg: u32, value: u32) {
    let mmio = MMIO.load(Ordering::Relaxed);
    if mmio == 0 {
        // SAFETY: as in `read`; writes to these registers only program the APIC.
        unsafe { wrmsr(0x800 + (reg >> 4), value as u64) }
    } else {
        // SAFETY: as in `read`.
        unsafe { core::ptr::write_volatile((mmio + reg as u64) as *mut u32, value) }
    }
}

/// Enables the local APIC (x2APIC if available), sets the spurious vector and the timer
/// LVT (masked until the first [`arm`]). `None`: no usable local APIC.
pub fn init() -> Option<Mode> {
    let (_, _, ecx, edx) = cpuid(1);
    if edx & (1 << 9) == 0 {
        return None;
    }
    // SAFETY: CPUID says there is a local APIC, so IA32_APIC_BASE exists.
    let base = unsafe { rdmsr(IA32_APIC_BASE) };
    if ecx & (1 << 21) != 0 {
        // SAFETY: CPUID says x2APIC exists; setting EN and EXTD switches to it.
        unsafe { wrmsr(IA32_APIC_BASE, base | 1 << 11 | 1 << 10) };
        MMIO.store(0, Ordering::Relaxed);
    } else {
        let mmio = base & 0xf_ffff_f000;
        if base & (1 << 10) != 0 || !(0xc000_0000..0x1_0000_0000).contains(&mmio) {
            return None; // x2APIC already on without CPUID saying so, or unmapped base
        }
        // SAFETY: sets the global enable bit, keeping the base.
        unsafe { wrmsr(IA32_APIC_BASE, base | 1 << 11) };
        MMIO.store(mmio, Ordering::Relaxed);
    }
    // SAFETY: interrupts are disabled; the timer handler reads this only once enabled.
    unsafe { VTNT_APIC_EOI_MMIO = MMIO.load(Ordering::Relaxed) };
    write(REG_TPR, 0);
    write(REG_SVR, 0x100 | SPURIOUS_VECTOR as u32);
    let mode = if ecx & (1 << 24) != 0 {
        write(REG_LVT_TIMER, LVT_TSC_DEADLINE | TIMER_VECTOR as u32);
        Mode::TscDeadline
    } else {
        write(REG_DIVIDE, 0b1011); // divide by 1
        write(REG_LVT_TIMER, LVT_MASKED | TIMER_VECTOR as u32);
        start_calibration();
        Mode::OneShot
    };
    MODE.store(
        if mode == Mode::TscDeadline { 1 } else { 2 },
        Ordering::Relaxed,
    );
    Some(mode)
}

fn start_calibration() {
    write(REG_INITIAL_COUNT, u32::MAX);
    CAL_TSC.store(rdtsc(), Ordering::Relaxed);
}

/// One-shot mode: the APIC rate per TSC tick (32.32), measured on first use.
fn apic_per_tsc(tsc_per_us: u64) -> u64 {
    let fp = APIC_PER_TSC_FP.load(Ordering::Relaxed);
    if fp != 0 {
        return fp;
    }
    loop {
        let t0 = CAL_TSC.load(Ordering::Relaxed);
        while rdtsc().wrapping_sub(t0) < CAL_MIN_TSC_US * tsc_per_us {
            core::hint::spin_loop();
        }
        let count = read(REG_CURRENT_COUNT);
        let t1 = rdtsc();
        if count == 0 {
            // The counter ran out (a boot longer than 2^32 APIC ticks): measure again.
            start_calibration();
            continue;
        }
        let fp = (((u32::MAX - count) as u128) << 32) / (t1 - t0).max(1) as u128;
        let fp = (fp as u64).max(1);
        APIC_PER_TSC_FP.store(fp, Ordering::Relaxed);
        write(REG_INITIAL_COUNT, 0);
        write(REG_LVT_TIMER, TIMER_VECTOR as u32);
        return fp;
    }
}

/// Arms the timer to fire at TSC value `deadline` (at once if it has passed).
/// `tsc_per_us` calibrates one-shot mode on its first use.
pub fn arm(deadline: u64, tsc_per_us: u64) {
    match MODE.load(Ordering::Relaxed) {
        1 => {
            // SAFETY: TSC-deadline mode is on (init), so the MSR exists; the write arms it.
            unsafe { wrmsr(IA32_TSC_DEADLINE, deadline.max(1)) }
        }
        2 => {
            let fp = apic_per_tsc(tsc_per_us);
            let ticks = (deadline.saturating_sub(rdtsc()) as u128 * fp as u128) >> 32;
            write(REG_INITIAL_COUNT, ticks.clamp(1, u32::MAX as u128) as u32);
        }
        _ => {}
    }
}
