//! Thin wrappers over x86_64 instructions the kernel needs: port I/O, `rdtsc`, `cpuid`,
//! a spin hint. Port I/O is `unsafe` because a write to the wrong port can do anything.

use core::arch::asm;

/// Writes a byte to an I/O port.
///
/// # Safety
/// The port must belong to a device whose side effects the caller intends.
#[inline]
pub unsafe fn outb(port: u16, value: u8) {
    // SAFETY: the caller vouches for the port; `out` touches no memory.
    unsafe {
        asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack, preserves_flags))
    }
}

/// Reads a byte from an I/O port.
///
/// # Safety
/// As for [`outb`]: reads can have side effects (e.g. latch or FIFO registers).
#[inline]
pub unsafe fn inb(port: u16) -> u8 {
    let value: u8;
    // SAFETY: the caller vouches for the port; `in` touches no memory.
    unsafe {
        asm!("in al, dx", out("al") value, in("dx") port, options(nomem, nostack, preserves_flags))
    }
    value
}

/// Writes a 32-bit value to an I/O port.
///
/// # Safety
/// As for [`outb`].
#[inline]
pub unsafe fn outl(port: u16, value: u32) {
    // SAFETY: the caller vouches for the port; `out` touches no memory.
    unsafe {
        asm!("out dx, eax", in("dx") port, in("eax") value, options(nomem, nostack, preserves_flags))
    }
}

/// Reads a 32-bit value from an I/O port.
///
/// # Safety
/// As for [`inb`].
#[inline]
pub unsafe fn inl(port: u16) -> u32 {
    let value: u32;
    // SAFETY: the caller vouches for the port; `in` touches no memory.
    unsafe {
        asm!("in eax, dx", out("eax") value, in("dx") port, options(nomem, nostack, preserves_flags))
    }
    value
}

/// Reads the time-stamp counter.
#[inline]
pub fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` only reads the TSC into edx:eax (CR4.TSD is clear: we run at CPL 0).
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Executes `cpuid` for `leaf` (sub-leaf 0); returns (eax, ebx, ecx, edx).
#[inline]
pub fn cpuid(leaf: u32) -> (u32, u32, u32, u32) {
    let r = core::arch::x86_64::__cpuid_count(leaf, 0);
    (r.eax, r.ebx, r.ecx, r.edx)
}

/// Reads a model-specific register.
///
/// # Safety
/// `msr` must exist on this CPU (else #GP) and reading it must have no unwanted effect.
#[inline]
pub unsafe fn rdmsr(msr: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: the caller vouches for the MSR; `rdmsr` touches no memory.
    unsafe {
        asm!("rdmsr", in("ecx") msr, out("eax") lo, out("edx") hi, options(nomem, nostack, preserves_flags))
    }
    (hi as u64) << 32 | lo as u64
}

/// Writes a model-specific register.
///
/// # Safety
/// `msr` must exist on this CPU and the write must be one the caller intends.
#[inline]
pub unsafe fn wrmsr(msr: u32, value: u64) {
    // SAFETY: the caller vouches for the MSR and value; `wrmsr` touches no memory.
    unsafe {
        asm!("wrmsr", in("ecx") msr, in("eax") value as u32, in("edx") (value >> 32) as u32, options(nomem, nostack, preserves_flags))
    }
}
