//! The console and the `print!`/`println!` macros: the monitor's line hypercall under
//! `vtnt-monitor`, else QEMU's debug console (`isa-debugcon` at port 0xe9) when the VMM
//! has one, else the serial port COM1 (0x3f8).
//!
//! Output is gathered a line at a time ([`LINE`] bytes at most) and written when the line
//! ends, with one `rep outsb` on the debug console: one exit to the VMM per byte (KVM
//! emulates string port I/O an iteration at a time; a 4-byte write to the byte-wide
//! device comes out of QEMU scrambled) and no status polling. COM1 takes a byte at a
//! time and its line status must be polled before each: two exits per byte, which under
//! KVM on PVM cost tens of microseconds each (vtnt-kernel-bench --breakdown). `vtnt-vmm` gives QEMU guests the debug console;
//! Firecracker has none, so its guests keep COM1.
//!
//! Single core, interrupts only ever enabled inside `hlt` (whose handlers print nothing):
//! no lock is needed. Lines end in `\n` only; the host side
//! reads them from QEMU's / Firecracker's stdout.

use crate::arch::x86_64::io::{inb, outb};
use core::cell::UnsafeCell;
use core::fmt;
use core::sync::atomic::{AtomicBool, Ordering};

const COM1: u16 = 0x3f8;
/// QEMU's `isa-debugcon` port; reading it returns 0xe9 when the device is there.
const DEBUGCON: u16 = 0xe9;
/// The longest piece written at once (longer lines leave in several): one exit to the
/// monitor under `vtnt-monitor`, which takes several lines at a time.
const LINE: usize = 4096;

static ON_DEBUGCON: AtomicBool = AtomicBool::new(false);

/// The line being gathered.
struct LineBuf(UnsafeCell<([u8; LINE], usize)>);

// SAFETY: one core, and nothing prints from an interrupt handler (module docs), so the
// buffer is never accessed concurrently.
unsafe impl Sync for LineBuf {}

static PENDING: LineBuf = LineBuf(UnsafeCell::new(([0; LINE], 0)));

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

/// Adds `bytes` to the line being gathered, writing it out at each `\n` (and when full).
/// Under `vtnt-monitor` whole lines wait in the buffer until it is full or [`flush`] is
/// called (before every wait and at the exit): one exit to the monitor for many lines.
pub fn write_bytes(bytes: &[u8]) {
    let batch = crate::hvt::active();
    // SAFETY: see `LineBuf`: nothing else accesses the buffer meanwhile.
    let (buf, len) = unsafe { &mut *PENDING.0.get() };
    let mut rest = bytes;
    while !rest.is_empty() {
        let line_end = rest.iter().position(|&b| b == b'\n').map(|i| i + 1);
        let take = line_end.unwrap_or(rest.len()).min(LINE - *len);
        buf[*len..*len + take].copy_from_slice(&rest[..take]);
        *len += take;
        rest = &rest[take..];
        if *len == LINE || (!batch && buf[*len - 1] == b'\n') {
            emit(&buf[..*len]);
            *len = 0;
        }
    }
}

/// Writes out what the buffer holds.
pub fn flush() {
    // SAFETY: see `LineBuf`: nothing else accesses the buffer meanwhile.
    let (buf, len) = unsafe { &mut *PENDING.0.get() };
    if *len > 0 {
        emit(&buf[..*len]);
        *len = 0;
    }
}

/// Writes `bytes` to the console device now.
fn emit(bytes: &[u8]) {
    if crate::hvt::active() {
        crate::hvt::puts(bytes);
        return;
    }
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

/// A `fmt::Write` sink for the console.
pub struct Console;

impl fmt::Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        write_bytes(s.as_bytes());
        Ok(())
    }
}

/// Prints `s` and a newline (no formatting machinery: for long result lines).
pub fn println_str(s: &str) {
    write_bytes(s.as_bytes());
    write_bytes(b"\n");
}

#[doc(hidden)]
pub fn _print(args: fmt::Arguments) {
    let _ = fmt::Write::write_fmt(&mut Console, args);
}

/// Prints to the serial console.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::console::_print(format_args!($($arg)*)) };
}

/// Prints a line to the serial console.
#[macro_export]
macro_rules! println {
    () => { $crate::console::write_bytes(b"\n") };
    ($($arg:tt)*) => {{
        $crate::console::_print(format_args!($($arg)*));
        $crate::console::write_bytes(b"\n");
    }};
}

/// Formats `s` as a JSON string body (without quotes): escapes `"`, `\` and controls.
pub struct JsonStr<'a>(pub &'a str);

impl fmt::Display for JsonStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Most strings need no escape: write them whole (char by char costs ~50
        // instructions a character, which matters where each one is emulated).
        if !self.0.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
            return f.write_str(self.0);
        }
        for c in self.0.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
                c => fmt::Write::write_char(f, c)?,
            }
        }
        Ok(())
    }
}
