//! The driver's clock: wall-clock microseconds that never go backwards.
//!
//! Records carry wall-clock times (scamper's timevals), but pacing must not jump when the
//! system clock is adjusted. [`Clock`] reads `CLOCK_REALTIME` once at start and advances
//! with `CLOCK_MONOTONIC` after that. Kernel receive timestamps are `CLOCK_REALTIME`;
//! [`Clock::from_realtime`] maps them onto the same scale.

use nix::time::{clock_gettime, ClockId};
use vtnt_record::Instant;

/// Monotonic wall-clock time in microseconds.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// realtime - monotonic at start, in microseconds.
    offset: i64,
}

fn micros(id: ClockId) -> i64 {
    clock_gettime(id)
        .map(|t| t.tv_sec() * 1_000_000 + t.tv_nsec() / 1000)
        .unwrap_or(0)
}

impl Clock {
    pub fn new() -> Clock {
        Clock {
            offset: micros(ClockId::CLOCK_REALTIME) - micros(ClockId::CLOCK_MONOTONIC),
        }
    }
    /// Now.
    pub fn now(&self) -> Instant {
        Instant::from_micros((micros(ClockId::CLOCK_MONOTONIC) + self.offset).max(0) as u64)
    }
    /// A `CLOCK_REALTIME` timestamp (seconds, nanoseconds) as an [`Instant`].
    pub fn from_realtime(&self, sec: i64, nsec: i64) -> Instant {
        Instant::from_micros((sec * 1_000_000 + nsec / 1000).max(0) as u64)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
