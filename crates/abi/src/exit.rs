//! The guest's exit statuses: the same number on every platform (the monitor's and a
//! process's exit status, the `isa-debug-exit` value under QEMU, the exit record's
//! `status`), stable because the host side and the docs rely on them.

/// How a guest run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    /// The job ran and succeeded (ping: at least one reply).
    Ok = 0,
    /// The kernel panicked.
    Panic = 1,
    /// The command line is malformed (unknown job, bad address, bad option).
    BadCmdline = 2,
    /// No network was found (or it failed to initialise).
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
    /// Every status, in the order of its number.
    pub const ALL: [Status; 9] = [
        Status::Ok,
        Status::Panic,
        Status::BadCmdline,
        Status::NoNic,
        Status::NoArp,
        Status::Watchdog,
        Status::JobFailed,
        Status::BootFailed,
        Status::NoDhcp,
    ];

    /// A short machine-readable name (the exit record's `reason`).
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

    /// The status numbered `code`, if there is one.
    pub fn from_code(code: u8) -> Option<Status> {
        Status::ALL.get(code as usize).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_positions() {
        for (i, s) in Status::ALL.iter().enumerate() {
            assert_eq!(*s as usize, i);
            assert_eq!(Status::from_code(i as u8), Some(*s));
        }
        assert_eq!(Status::from_code(9), None);
    }
}
