//! A microsecond instant that works without `std` (the engine never reads a clock; it is
//! handed one of these).

use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in time in microseconds on the driver's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);
    pub const fn from_micros(us: u64) -> Instant {
        Instant(us)
    }
    pub const fn from_millis(ms: u64) -> Instant {
        Instant(ms * 1000)
    }
    pub const fn as_micros(self) -> u64 {
        self.0
    }
    /// Whole seconds, as scamper's timevals store them.
    pub const fn secs(self) -> u64 {
        self.0 / 1_000_000
    }
    /// Microseconds within the second.
    pub const fn subsec_micros(self) -> u32 {
        (self.0 % 1_000_000) as u32
    }
    /// Time since `earlier`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.as_micros() as u64))
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.as_micros() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_micros(1_500_000);
        assert_eq!(t.secs(), 1);
        assert_eq!(t.subsec_micros(), 500_000);
        assert_eq!((t + Duration::from_millis(1)).as_micros(), 1_501_000);
        assert_eq!(Instant::ZERO.saturating_since(t), Duration::ZERO);
        assert_eq!((Instant::ZERO - Duration::from_secs(1)), Instant::ZERO);
    }
}
