//! How a run ends: the documented exit statuses, the final console line, and the error
//! path (`vtnt: error: ...` then a non-zero status).
//!
//! The final line is always `{"type":"exit","status":N,"reason":"...","guest_us":T,
//! "steps_us":[...]}` (`steps_us`: see [`crate::steps`]). Under QEMU with
//! `isa-debug-exit` the process exit status is `(N << 1) | 1`, so success is QEMU status 1;
//! `vtnt-vmm` maps it back to `N`. Under the monitor and as a process, the status is `N`.

use core::fmt::{self, Write};

/// Guest exit statuses (stable: the host side and docs rely on them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    /// The job ran and succeeded (ping: at least one reply).
    Ok = 0,
    /// The kernel panicked.
    Panic = 1,
    /// The command line is malformed (unknown job, bad address, bad option).
    BadCmdline = 2,
    /// No virtio-net device was found (or it failed to initialise).
    NoNic = 3,
    /// The gateway (or on-link target) did not answer ARP.
    NoArp = 4,
    /// The watchdog deadline passed before the job finished.
    Watchdog = 5,
    /// The job ran but failed (ping: no reply at all).
    JobFailed = 6,
    /// Boot failed: no usable memory map, no clock source.
    BootFailed = 7,
    /// `ip=dhcp` and no DHCP server granted a lease in time.
    NoDhcp = 8,
}

impl Status {
    /// A short machine-readable name.
    pub const fn reason(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Panic => "panic",
            Status::BadCmdline => "bad-cmdline",
            Status::NoNic => "no-nic",
            Status::NoArp => "no-arp",
            Status::Watchdog => "watchdog",
            Status::JobFailed => "job-failed",
            Status::BootFailed => "boot-failed",
            Status::NoDhcp => "no-dhcp",
        }
    }
}

/// Prints the final line and powers off with `status`.
pub fn finish(status: Status) -> ! {
    let mut con = crate::console::Console;
    let _ = write!(
        con,
        "{{\"type\":\"exit\",\"status\":{},\"reason\":\"{}\",\"guest_us\":{},",
        status as u8,
        status.reason(),
        crate::platform::now().as_micros()
    );
    let _ = crate::steps::write_json(&mut con);
    crate::println!("}}");
    crate::console::flush();
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
    ($status:expr, $($arg:tt)*) => { $crate::exit::fail($status, format_args!($($arg)*)) };
}
