//! The serial console on COM1 (I/O port 0x3f8) and the `print!`/`println!` macros.
//!
//! Single core, interrupts only ever enabled inside `hlt` (whose handlers print nothing):
//! no lock is needed. Lines end in `\n` only; the host side
//! reads them from QEMU's / Firecracker's stdout.

use crate::arch::x86_64::io::{inb, outb};
use core::fmt;

const COM1: u16 = 0x3f8;

/// Programs COM1 for 115200 8N1 with FIFOs on (QEMU ignores the rate, real UARTs don't).
pub fn init() {
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

/// Writes raw bytes to COM1, waiting (boundedly) for room in the transmitter.
pub fn write_bytes(bytes: &[u8]) {
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
