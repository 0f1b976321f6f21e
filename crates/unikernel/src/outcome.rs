//! What a VM run produced: console lines, the guest's status, timings and the VMM's peak
//! memory, and how the guest status is recovered from QEMU's exit code.
//!
//! The kernel's last console line is its exit record (`vtnt_abi::record`, read here with
//! its typed parser) and, under QEMU, it writes `N` to `isa-debug-exit`, so QEMU exits with `(N << 1) | 1`. QEMU also exits
//! with 1 on its own errors, so the console line is what counts: a QEMU status that
//! disagrees with it, or a missing line, is reported as such.

use crate::accel::Accelerator;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use vtnt_abi::record::{ExitRecord, RecordError};

/// Console lines as they arrive, shared with whoever watches a VM while it runs (a
/// density ramp counts an instance as working once its result line is here).
pub type ConsoleTap = Arc<Mutex<Vec<String>>>;

/// How the guest ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestStatus {
    /// The guest printed its exit record with this status (a `vtnt_abi::exit::Status`:
    /// 0 = success, 1 panic, 2 bad command line, 3 no NIC, 4 no ARP, 5 watchdog, 6 job
    /// failed, 7 boot failed, 8 no DHCP lease), or (no record) QEMU's `isa-debug-exit`
    /// gave it.
    Exited(u8),
    /// The host killed the VM at the timeout.
    TimedOut,
    /// The VM stopped without an exit line (crash, triple fault before the console).
    Vanished,
}

/// The result of one VM run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: GuestStatus,
    /// Console lines (serial output), without line ends.
    pub lines: Vec<String>,
    /// When each line arrived, since the VMM was spawned (parallel to `lines`).
    pub line_times: Vec<Duration>,
    /// The VMM's stderr.
    pub stderr: String,
    /// The VMM's raw exit code, if it exited.
    pub vmm_code: Option<i32>,
    /// Wall time from spawning the VMM to its exit.
    pub wall: Duration,
    /// Peak resident set of the VMM process (VmHWM), in KiB, if it could be read.
    pub peak_rss_kib: Option<u64>,
    /// Largest proportional set size of the VMM process seen (sampled every 100 ms, so
    /// a VM of a few milliseconds may show none), in KiB.
    pub peak_pss_kib: Option<u64>,
    /// Host CPU time of the VMM process (user + system, all threads; 10 ms resolution),
    /// if it could be read.
    pub cpu: Option<Duration>,
    /// The accelerator the VM ran under.
    pub accel: Accelerator,
}

impl Outcome {
    /// The first console line containing `needle`.
    pub fn line_with(&self, needle: &str) -> Option<&str> {
        self.lines
            .iter()
            .map(String::as_str)
            .find(|l| l.contains(needle))
    }

    /// The integer value of `"key":N` in the first JSON line of type `ty`.
    pub fn json_u64(&self, ty: &str, key: &str) -> Option<u64> {
        let line = self.line_with(&format!("\"type\":\"{ty}\""))?;
        json_u64(line, key)
    }

    /// The guest's exit record (its last one), typed.
    pub fn exit_record(&self) -> Result<ExitRecord, RecordError> {
        ExitRecord::last(self.lines.iter().map(String::as_str))
    }

    /// All console lines, joined (for assertion messages).
    pub fn console(&self) -> String {
        self.lines.join("\n")
    }
}

/// The integer value of `"key":N` in a flat JSON line.
pub fn json_u64(line: &str, key: &str) -> Option<u64> {
    let pat = format!("\"{key}\":");
    let rest = &line[line.find(&pat)? + pat.len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The guest status `isa-debug-exit` encodes in a QEMU exit code, if it is one.
pub fn status_from_qemu_code(code: i32) -> Option<u8> {
    (code & 1 == 1).then_some((code >> 1) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_qemu_codes_and_numbers() {
        assert_eq!(status_from_qemu_code(9), Some(4));
        assert_eq!(status_from_qemu_code(1), Some(0));
        assert_eq!(status_from_qemu_code(0), None);
        assert_eq!(
            json_u64("{\"type\":\"ready\",\"guest_us\":12}", "guest_us"),
            Some(12)
        );
    }
}
