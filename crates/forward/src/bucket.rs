//! The rate budget every instance shares: a token bucket that drops, never delays.
//!
//! A probe that finds no token is dropped (and counted by the caller): holding it back
//! would make it leave later than the instance's engine believes, and its RTTs wrong.
//! Tokens are counted in millionths, `pps` of them per microsecond, so any rate is exact
//! without floating point; at most `burst` whole tokens are kept.

use vtnt_record::Instant;

const UNIT: u64 = 1_000_000;

#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    pps: u64,
    cap: u64,
    /// Millionths of a token held at `at`.
    held: u64,
    at: Instant,
}

impl Bucket {
    /// A full bucket.
    pub fn new(pps: u32, burst: u32) -> Bucket {
        let cap = u64::from(burst.max(1)) * UNIT;
        Bucket {
            pps: u64::from(pps),
            cap,
            held: cap,
            at: Instant::ZERO,
        }
    }

    /// Refills up to `now` (a `now` older than the last is taken as the last) and says
    /// whether a whole token is there.
    pub fn ready(&mut self, now: Instant) -> bool {
        if now > self.at {
            let us = now.as_micros() - self.at.as_micros();
            self.held = us
                .saturating_mul(self.pps)
                .saturating_add(self.held)
                .min(self.cap);
            self.at = now;
        }
        self.held >= UNIT
    }

    /// Spends the token [`Bucket::ready`] found.
    pub fn spend(&mut self) {
        self.held = self.held.saturating_sub(UNIT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_the_rate_and_no_credit_beyond_burst() {
        let mut b = Bucket::new(1000, 3);
        let t = Instant::from_micros(5_000_000);
        let mut sent = 0;
        while b.ready(t) {
            b.spend();
            sent += 1;
        }
        assert_eq!(sent, 3, "the burst");
        assert!(!b.ready(t + core::time::Duration::from_micros(999)));
        assert!(b.ready(t + core::time::Duration::from_micros(1000)));
        // One second later: 1,000 tokens arrived, 3 are kept.
        let later = t + core::time::Duration::from_secs(1);
        let mut n = 0;
        while b.ready(later) {
            b.spend();
            n += 1;
        }
        assert_eq!(n, 3);
    }
}
