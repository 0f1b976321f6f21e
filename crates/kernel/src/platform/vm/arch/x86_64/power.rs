//! Powering the VM off with an exit status.
//!
//! Under QEMU the VMM adds `-device isa-debug-exit,iobase=0xf4,iosize=0x04`: writing `v`
//! there makes QEMU exit with status `(v << 1) | 1`. When that device is absent (e.g.
//! Firecracker) we fall back to the keyboard-controller reset (Firecracker stops the VM on
//! it) and finally to a triple fault (QEMU with `-no-reboot` then exits with status 0).
//! The status is also printed on the console beforehand, so a VMM without the exit device
//! can still recover it.

use super::io::outb;
use core::arch::asm;

/// The `isa-debug-exit` I/O port.
pub const DEBUG_EXIT_PORT: u16 = 0xf4;

/// Powers off with guest status `code` (< 128). Never returns.
pub fn exit(code: u8) -> ! {
    // SAFETY: port 0xf4 is the isa-debug-exit device when present and unassigned (writes
    // ignored) otherwise.
    unsafe { outb(DEBUG_EXIT_PORT, code & 0x7f) };
    // Still running: no debug-exit device. Pulse the reset line via the i8042.
    // SAFETY: 0x64 is the i8042 command port; 0xFE pulses the CPU reset line. Without an
    // i8042 the write is ignored.
    unsafe { outb(0x64, 0xfe) };
    triple_fault()
}

/// Resets the CPU by faulting with an empty IDT.
fn triple_fault() -> ! {
    #[repr(C, packed)]
    struct Idtr {
        limit: u16,
        base: u64,
    }
    let idtr = Idtr { limit: 0, base: 0 };
    // SAFETY: loading an empty IDT and raising an exception is the intended reset; nothing
    // runs afterwards.
    unsafe {
        asm!("lidt [{}]", "int3", in(reg) &idtr, options(noreturn));
    }
}
