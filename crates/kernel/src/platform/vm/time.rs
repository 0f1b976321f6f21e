//! The clock: the TSC, with its frequency measured at boot, as microsecond [`Instant`]s
//! counted from the kernel's first instruction.
//!
//! Frequency sources, in order: CPUID leaf 0x15 (crystal ratio, when fully reported),
//! the hypervisor timing leaf 0x4000_0010 (KVM/VMware/Firecracker style, when present),
//! KVM's paravirtual clock (kvmclock: the host's TSC-to-nanoseconds scale, read once),
//! and otherwise a measurement of the TSC against PIT channel 0 over [`PIT_WINDOW_TICKS`]
//! (about 2 ms: the one source that costs boot time, so KVM guests avoid it).
//! No frequency is ever assumed: without a source, boot fails with an error. Under
//! `vtnt-monitor` the monitor's TSC frequency replaces the calibration.
//!
//! The clock is the bottom of the platform's time: waiting until a deadline (which needs
//! the monitor's hypercalls, themselves timestamped with [`now`]) is `super::idle`'s.

use super::arch::x86_64::boot::boot_tsc;
use super::arch::x86_64::io::{cpuid, inb, outb, rdtsc, wrmsr};
use core::sync::atomic::{AtomicU64, Ordering};
pub use vtnt_record::Instant;

/// PIT input clock in Hz.
const PIT_HZ: u64 = 1_193_182;
/// Calibration window: 2386 PIT ticks = 2 ms (error ~ 1 tick / 2386 = 0.04 %).
pub const PIT_WINDOW_TICKS: u32 = 2386;

/// Microseconds per TSC tick, as a 32.32 fixed-point number.
static US_PER_TICK_FP: AtomicU64 = AtomicU64::new(0);
/// The TSC frequency in Hz.
static TSC_HZ: AtomicU64 = AtomicU64::new(0);

/// Where the TSC frequency came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Cpuid15,
    Hypervisor,
    KvmClock,
    Pit,
    /// Given by `vtnt-monitor` (KVM's TSC frequency).
    Monitor,
}

impl Source {
    pub const fn name(self) -> &'static str {
        match self {
            Source::Cpuid15 => "cpuid-0x15",
            Source::Hypervisor => "cpuid-0x40000010",
            Source::KvmClock => "kvmclock",
            Source::Pit => "pit",
            Source::Monitor => "monitor",
        }
    }
}

/// Determines the TSC frequency; `None` if no source works.
pub fn calibrate() -> Option<(u64, Source)> {
    let (hz, src) = if let Some(hz) = from_cpuid15() {
        (hz, Source::Cpuid15)
    } else if let Some(hz) = from_hypervisor_leaf() {
        (hz, Source::Hypervisor)
    } else if let Some(hz) = from_kvmclock() {
        (hz, Source::KvmClock)
    } else {
        (from_pit()?, Source::Pit)
    };
    Some(use_frequency(hz, src))
}

/// Uses `hz` from `src` as the TSC frequency.
pub fn use_frequency(hz: u64, src: Source) -> (u64, Source) {
    set_frequency(hz);
    (hz, src)
}

fn set_frequency(hz: u64) {
    TSC_HZ.store(hz, Ordering::Relaxed);
    US_PER_TICK_FP.store(
        ((1_000_000u128 << 32) / hz as u128) as u64,
        Ordering::Relaxed,
    );
}

/// Converts a TSC reading to microseconds since the first instruction.
pub fn tsc_to_instant(tsc: u64) -> Instant {
    let ticks = tsc.saturating_sub(boot_tsc()) as u128;
    let fp = US_PER_TICK_FP.load(Ordering::Relaxed) as u128;
    Instant::from_micros(((ticks * fp) >> 32) as u64)
}

/// Now, in microseconds since the kernel's first instruction (zero before calibration).
pub fn now() -> Instant {
    tsc_to_instant(rdtsc())
}

/// TSC ticks per microsecond (at least 1).
pub fn tsc_per_us() -> u64 {
    (TSC_HZ.load(Ordering::Relaxed) / 1_000_000).max(1)
}

/// The TSC value at guest time `t` (the inverse of [`tsc_to_instant`]).
pub fn instant_to_tsc(t: Instant) -> u64 {
    let hz = TSC_HZ.load(Ordering::Relaxed) as u128;
    boot_tsc().saturating_add((t.as_micros() as u128 * hz / 1_000_000) as u64)
}

fn from_cpuid15() -> Option<u64> {
    let (max, ..) = cpuid(0);
    if max < 0x15 {
        return None;
    }
    let (den, num, crystal, _) = cpuid(0x15);
    if den == 0 || num == 0 || crystal == 0 {
        return None;
    }
    Some(crystal as u64 * num as u64 / den as u64)
}

/// KVM's `pvclock_vcpu_time_info`, which the host fills in at the address written to
/// the kvmclock MSR.
#[repr(C, align(64))]
struct PvclockTimeInfo {
    version: u32,
    _pad0: u32,
    _tsc_timestamp: u64,
    _system_time: u64,
    tsc_to_system_mul: u32,
    tsc_shift: i8,
    _flags: u8,
    _pad: [u8; 2],
}

/// Where the host writes kvmclock's scale (only while [`from_kvmclock`] runs).
static mut PVCLOCK: PvclockTimeInfo = PvclockTimeInfo {
    version: 0,
    _pad0: 0,
    _tsc_timestamp: 0,
    _system_time: 0,
    tsc_to_system_mul: 0,
    tsc_shift: 0,
    _flags: 0,
    _pad: [0; 2],
};

/// The TSC frequency from kvmclock, when KVM's signature and clock feature are there:
/// register [`PVCLOCK`] with the host, read a consistent scale (even `version`,
/// unchanged across the read), unregister.
fn from_kvmclock() -> Option<u64> {
    let (_, _, ecx, _) = cpuid(1);
    if ecx & (1 << 31) == 0 {
        return None;
    }
    let (max, b, c, d) = cpuid(0x4000_0000);
    let kvm = [b, c, d] == [0x4b4d_564b, 0x564b_4d56, 0x0000_004d]; // "KVMKVMKVM\0\0\0"
    if !kvm || max < 0x4000_0001 {
        return None;
    }
    let (features, ..) = cpuid(0x4000_0001);
    let msr = if features & (1 << 3) != 0 {
        0x4b56_4d01 // MSR_KVM_SYSTEM_TIME_NEW
    } else if features & 1 != 0 {
        0x12 // MSR_KVM_SYSTEM_TIME
    } else {
        return None;
    };
    let info = core::ptr::addr_of_mut!(PVCLOCK);
    // SAFETY: KVM advertised this MSR; the value is the (identity-mapped, 64-byte aligned)
    // physical address of a static nothing else uses, with bit 0 set to enable updates.
    unsafe { wrmsr(msr, info as u64 | 1) };
    core::sync::atomic::compiler_fence(Ordering::SeqCst);
    let mut scale = None;
    for _ in 0..1000 {
        // SAFETY: `info` points at the static above; the host writes it, so every read is
        // volatile, and the version check below discards a torn read.
        let (v0, mul, shift, v1) = unsafe {
            let v0 = core::ptr::addr_of!((*info).version).read_volatile();
            let mul = core::ptr::addr_of!((*info).tsc_to_system_mul).read_volatile();
            let shift = core::ptr::addr_of!((*info).tsc_shift).read_volatile();
            (
                v0,
                mul,
                shift,
                core::ptr::addr_of!((*info).version).read_volatile(),
            )
        };
        if v0 == v1 && v0 % 2 == 0 && mul != 0 {
            scale = Some((mul, shift));
            break;
        }
        core::hint::spin_loop();
    }
    // the reads above stay before the write that stops the host's updates
    core::sync::atomic::compiler_fence(Ordering::SeqCst);
    // SAFETY: as above; 0 stops the host from writing to the static.
    unsafe { wrmsr(msr, 0) };
    scale.and_then(|(mul, shift)| super::pvclock::tsc_hz(mul, shift))
}

fn from_hypervisor_leaf() -> Option<u64> {
    let (_, _, ecx, _) = cpuid(1);
    if ecx & (1 << 31) == 0 {
        return None;
    }
    let (max, ..) = cpuid(0x4000_0000);
    if !(0x4000_0010..0x4001_0000).contains(&max) {
        return None;
    }
    let (khz, ..) = cpuid(0x4000_0010);
    (khz != 0).then_some(khz as u64 * 1000)
}

/// Latches and reads PIT channel 0's count.
fn pit_count() -> u16 {
    // SAFETY: ports 0x40/0x43 are the i8254 PIT; latching and reading the count of
    // channel 0 has no effect beyond the read. Without a PIT the reads return 0xff.
    unsafe {
        outb(0x43, 0x00);
        let lo = inb(0x40) as u16;
        let hi = inb(0x40) as u16;
        lo | hi << 8
    }
}

/// Measures the TSC against PIT channel 0 (reprogrammed as a free-running rate
/// generator; interrupts stay off so IRQ0 never fires).
fn from_pit() -> Option<u64> {
    // SAFETY: programs channel 0 (lobyte/hibyte, mode 2, binary) with reload 65536. We own
    // the machine's timers and run with interrupts disabled.
    unsafe {
        outb(0x43, 0x34);
        outb(0x40, 0);
        outb(0x40, 0);
    }
    // Give up after ~2^31 TSC ticks (about a second on any plausible host) without motion.
    let give_up = rdtsc().wrapping_add(1 << 31);
    // Synchronise on a count change so the window starts at a tick edge.
    let mut prev = pit_count();
    loop {
        let c = pit_count();
        if c != prev {
            prev = c;
            break;
        }
        if rdtsc() > give_up {
            return None;
        }
    }
    let t0 = rdtsc();
    let mut elapsed: u32 = 0;
    let t1 = loop {
        let c = pit_count();
        let t = rdtsc();
        elapsed += prev.wrapping_sub(c) as u32;
        prev = c;
        if elapsed >= PIT_WINDOW_TICKS {
            break t;
        }
        if t > give_up.wrapping_add(1 << 31) {
            return None;
        }
    };
    // SAFETY: as above: channel 0 to mode 0 (interrupt on terminal count) with the longest
    // count, so it stops generating periodic timer events once it has counted down.
    unsafe {
        outb(0x43, 0x30);
        outb(0x40, 0xff);
        outb(0x40, 0xff);
    }
    let hz = (t1 - t0) as u128 * PIT_HZ as u128 / elapsed as u128;
    (hz > 1_000_000).then_some(hz as u64)
}
