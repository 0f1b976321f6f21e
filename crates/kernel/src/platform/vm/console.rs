//! The VM's console device: QEMU's debug console (`isa-debugcon` at port 0xe9) when the
//! VMM has one, else the serial port COM1 (0x3f8). (Under `vtnt-monitor` the monitor's
//! line hypercall replaces both: `super::hvt::puts`.)
//!
//! A line leaves with one `rep outsb` on the debug console: one exit to the VMM per byte
//! (KVM emulates string port I/O an iteration at a time; a 4-byte write to the byte-wide
//! device comes out of QEMU scrambled) and no status polling. COM1 takes a byte at a
//! time and its line status must be polled before each: two exits per byte, which under
//! KVM on PVM cost tens of microseconds each (vtnt-kernel-bench --breakdown). `vtnt-unikernel`
//! gives QEMU guests the debug console; Firecracker has none, so its guests keep COM1.

use super::arch::x86_64::io::{inb, outb};
use core::sync::atomic::{AtomicBool, Ordering};

const COM1: u16 = 0x3f8;
/// QEMU's `isa-debugcon` port; reading it returns 0xe9 when the device is there.
const DEBUGCON: u16 = 0xe9;

static ON_DEBUGCON: AtomicBool = AtomicBool::new(false);

/// Picks the debug console if there is one, else programs COM1 for 115200 8N1 with FIFOs
/// on (QEMU ignores the rate, real UARTs don't).
pub fn init() {
    // SAFETY: port 0xe9 is QEMU's debug console when present; elsewhere it is unassigned
    // and a read has no effect.
    if unsafe { inb(DEBUGCON) } == 0xe9 {
        ON_DEBUGCON.store(true, Ordering::Relaxed);
        return;
    }
    // SAFETY: COM1 is the 16550 UART at 0x3f8 on every PC-compatible VMM we target; these
    // writes only configure it. Without a UART they are ignored.
    unsafe {
        outb(COM1 + 1, 0x00); // no interrupts
        outb(COM1 + 3, 0x80); // DLAB on
        outb(COM1, 0x01); // divisor 1 = 115200 baud
        outb(COM1 + 1, 0x00);
        outb(COM1 + 3, 0x03); // 8N1, DLAB off
        outb(COM1 + 2, 0xc7); // FIFO on, cleared, 14-byte threshold
        outb(COM1 + 4, 0x03); // DTR + RTS
    }
}

/// Reads the debug console's port: an exit to the VMM with no effect (the micro job's
/// "system call" under QEMU; see `super::leave`).
pub fn read_port() {
    // SAFETY: reading port 0xe9 returns a constant from QEMU's debug console, or nothing
    // from an unassigned port; no device state changes.
    unsafe { inb(DEBUGCON) };
}

/// Writes `bytes` to the console device now.
pub fn emit(bytes: &[u8]) {
    if ON_DEBUGCON.load(Ordering::Relaxed) {
        // SAFETY: `rep outsb` reads `bytes` (rsi, rcx) and writes them to the debug
        // console's port; the direction flag is clear (Rust's ABI).
        unsafe {
            core::arch::asm!(
                "rep outsb",
                in("dx") DEBUGCON,
                inout("rsi") bytes.as_ptr() => _,
                inout("rcx") bytes.len() => _,
                options(nostack, preserves_flags, readonly)
            );
        }
        return;
    }
    for &b in bytes {
        let mut spins = 0u32;
        // SAFETY: reading the line status register of COM1 has no side effects.
        while unsafe { inb(COM1 + 5) } & 0x20 == 0 && spins < 100_000 {
            spins += 1;
            core::hint::spin_loop();
        }
        // SAFETY: writing the transmit holding register sends one byte.
        unsafe { outb(COM1, b) };
    }
}
