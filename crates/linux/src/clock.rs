//! The driver's clock: wall-clock microseconds that never go backwards, and the kernel's
//! packet timestamps on the same scale.
//!
//! Records carry wall-clock times (scamper's timevals), but pacing must not jump when the
//! system clock is adjusted. [`Clock`] reads `CLOCK_REALTIME` once at start and advances
//! with `CLOCK_MONOTONIC` after that: one monotonic time base for the prober's `now` and
//! for every packet timestamp.
//!
//! The kernel stamps packets (received: `SO_TIMESTAMPNS`; sent: `SO_TIMESTAMPING`) with
//! `CLOCK_REALTIME`. [`Clock::stamps`] maps them onto the clock with the difference of
//! the two clocks read at that moment. NTP slewing moves both clocks alike, so the
//! difference only changes when the system clock is stepped (settimeofday, an NTP step,
//! a leap second): a stamp taken before a step and mapped after it is off by the step,
//! every other stamp is exact to the microsecond.

use nix::time::{clock_gettime, ClockId};
use vtnt_record::Instant;

/// Monotonic wall-clock time in microseconds.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// realtime - monotonic at start, in nanoseconds.
    offset: i64,
}

fn nanos(id: ClockId) -> i64 {
    clock_gettime(id)
        .map(|t| t.tv_sec() * 1_000_000_000 + t.tv_nsec())
        .unwrap_or(0)
}

fn instant(ns: i64) -> Instant {
    Instant::from_micros((ns / 1000).max(0) as u64)
}

impl Clock {
    pub fn new() -> Clock {
        Clock {
            offset: nanos(ClockId::CLOCK_REALTIME) - nanos(ClockId::CLOCK_MONOTONIC),
        }
    }

    /// Now.
    pub fn now(&self) -> Instant {
        instant(nanos(ClockId::CLOCK_MONOTONIC) + self.offset)
    }

    /// Maps the kernel timestamps of packets read from now on (until the next call) onto
    /// this clock.
    pub fn stamps(&self) -> KernelStamps {
        let realtime = nanos(ClockId::CLOCK_REALTIME);
        let now = nanos(ClockId::CLOCK_MONOTONIC) + self.offset;
        KernelStamps {
            shift: realtime - now,
        }
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// Kernel packet timestamps (`CLOCK_REALTIME`) as [`Instant`]s of a [`Clock`]; see
/// [`Clock::stamps`].
#[derive(Debug, Clone, Copy)]
pub struct KernelStamps {
    /// `CLOCK_REALTIME` - the clock, in nanoseconds, when made.
    shift: i64,
}

impl KernelStamps {
    /// The kernel timestamp `(sec, nsec)` on the clock.
    pub fn instant(&self, sec: i64, nsec: i64) -> Instant {
        instant(sec * 1_000_000_000 + nsec - self.shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_realtime_stamp_of_now_is_now_on_the_clock() {
        let clock = Clock::new();
        let before = clock.now();
        let stamps = clock.stamps();
        let t = clock_gettime(ClockId::CLOCK_REALTIME).unwrap();
        let after = clock.now();
        let at = stamps.instant(t.tv_sec(), t.tv_nsec());
        // One microsecond either way: the two clocks are not read at the same instant.
        assert!(
            before.as_micros() <= at.as_micros() + 1 && at.as_micros() <= after.as_micros() + 1,
            "{before:?} <= {at:?} <= {after:?}"
        );
    }

    /// A clock made with another offset (as if the system clock had been stepped since
    /// it started) still maps a stamp of now to now: the offset is read per mapping.
    #[test]
    fn a_step_of_the_system_clock_moves_stamps_with_the_clock() {
        let stepped = Clock {
            offset: Clock::new().offset - 3_600_000_000_000,
        };
        let stamps = stepped.stamps();
        let t = clock_gettime(ClockId::CLOCK_REALTIME).unwrap();
        let at = stamps.instant(t.tv_sec(), t.tv_nsec());
        let now = stepped.now();
        assert!(
            at <= now && now.as_micros() - at.as_micros() < 1_000_000,
            "{at:?} {now:?}"
        );
    }
}
