//! How a run ends: the documented exit statuses, the final console line, and the error
//! path (`vtnt: error: ...` then a non-zero status).
//!
//! The final line is always the exit record (`vtnt_abi::record`: status, reason, guest
//! time, `steps_us`), the statuses are `vtnt_abi::exit::Status`. Under QEMU with
//! `isa-debug-exit` the process exit status is `(N << 1) | 1`, so success is QEMU status 1;
//! the host side maps it back to `N`. Under the monitor and as a process, the status is `N`.

use core::fmt;
pub use vtnt_abi::exit::Status;
use vtnt_abi::record;

/// Prints the final line and powers off with `status`.
pub fn finish(status: Status) -> ! {
    let _ = record::write(
        &mut crate::platform::console::Console,
        status,
        crate::platform::now().as_micros(),
        crate::platform::steps::us(),
    );
    crate::platform::console::write_bytes(b"\n");
    crate::platform::console::flush();
    crate::platform::exit(status)
}

/// Prints `vtnt: error: <what>` and powers off with `status`.
pub fn fail(status: Status, what: fmt::Arguments) -> ! {
    crate::println!("vtnt: error: {}", what);
    finish(status)
}

/// `fail!(Status::X, "format", args..)`: report an error and power off.
#[macro_export]
macro_rules! fail {
    ($status:expr, $($arg:tt)*) => { $crate::platform::finish::fail($status, format_args!($($arg)*)) };
}
