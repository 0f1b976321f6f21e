//! The console and the `print!`/`println!` macros, over the platform's console
//! (`crate::platform::console_emit`: a VM's debug console, COM1 or the monitor's line
//! hypercall; a process's standard output).
//!
//! Output is gathered a line at a time ([`LINE`] bytes at most) and written when the line
//! ends, so that each line costs the platform one write (one VM exit, one system call).
//! Where the platform says writes are dear (`console_batches`: the monitor's), whole
//! lines wait in the buffer until it is full or [`flush`] is called (before every wait
//! and at the exit). Single thread, nothing prints from an interrupt handler: no lock is
//! needed. Lines end in `\n` only.

use crate::platform;
use core::cell::UnsafeCell;
use core::fmt;

/// The longest piece written at once (longer lines leave in several).
const LINE: usize = 4096;

/// The line being gathered.
struct LineBuf(UnsafeCell<([u8; LINE], usize)>);

// SAFETY: one core, and nothing prints from an interrupt handler (module docs), so the
// buffer is never accessed concurrently.
unsafe impl Sync for LineBuf {}

static PENDING: LineBuf = LineBuf(UnsafeCell::new(([0; LINE], 0)));

/// Adds `bytes` to the line being gathered, writing it out at each `\n` (and when full;
/// when the platform batches, only when full or flushed).
pub fn write_bytes(bytes: &[u8]) {
    let batch = platform::console_batches();
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
            platform::console_emit(&buf[..*len]);
            *len = 0;
        }
    }
}

/// Writes out what the buffer holds.
pub fn flush() {
    // SAFETY: see `LineBuf`: nothing else accesses the buffer meanwhile.
    let (buf, len) = unsafe { &mut *PENDING.0.get() };
    if *len > 0 {
        platform::console_emit(&buf[..*len]);
        *len = 0;
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
    ($($arg:tt)*) => { $crate::platform::console::_print(format_args!($($arg)*)) };
}

/// Prints a line to the serial console.
#[macro_export]
macro_rules! println {
    () => { $crate::platform::console::write_bytes(b"\n") };
    ($($arg:tt)*) => {{
        $crate::platform::console::_print(format_args!($($arg)*));
        $crate::platform::console::write_bytes(b"\n");
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
