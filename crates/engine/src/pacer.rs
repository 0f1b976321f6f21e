//! The global probe budget: a GCRA (virtual scheduling) pacer.
//!
//! While probes are waiting, the n-th probe leaves at `t0 + n / pps` exactly: the
//! theoretical send time advances by `1/pps` per probe in integer units of
//! `1 / (pps * 10^6)` seconds, so no rounding error accumulates however long the run.
//! `burst` probes may leave back to back (a token bucket of `burst` tokens), so a driver
//! that wakes up late sends the probes it missed at once and keeps the long-run rate. After a longer idle
//! period the schedule restarts from the next send (no credit beyond `burst`).

use crate::Instant;

const US_PER_S: u128 = 1_000_000;

#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    pps: u128,
    /// Tolerance: `(burst - 1)` send intervals, in scaled units.
    slack: u128,
    /// Theoretical arrival time of the next probe, in microseconds times `pps`.
    tat: u128,
}

impl Pacer {
    /// `pps >= 1` and `burst >= 1` (checked by [`crate::Config`]).
    pub fn new(pps: u32, burst: u32) -> Pacer {
        let pps = pps.max(1) as u128;
        Pacer {
            pps,
            slack: (burst.max(1) as u128 - 1) * US_PER_S,
            tat: 0,
        }
    }

    fn scaled(&self, now: Instant) -> u128 {
        now.as_micros() as u128 * self.pps
    }

    /// May a probe leave at `now`?
    pub fn allows(&self, now: Instant) -> bool {
        self.scaled(now) + self.slack >= self.tat
    }

    /// The earliest instant a probe may leave (in the past when one may leave now).
    /// When `k` probes may leave back to back, `k` capped at a quarter of the burst: a prober with
    /// `k` probes waiting can sleep until then and send them with one wakeup, at the same
    /// long-run rate. A quarter, not all: the tokens that arrive while a late wakeup is
    /// overdue still fit in the bucket instead of being lost.
    pub fn next_batch(&self, k: usize) -> Instant {
        let extra = ((k.max(1) as u128 - 1) * US_PER_S).min(self.slack / 4);
        let t = (self.tat + extra).saturating_sub(self.slack);
        let us = t.div_ceil(self.pps);
        Instant::from_micros(u64::try_from(us).unwrap_or(u64::MAX))
    }

    /// Accounts for one probe sent at `now`.
    ///
    /// A send within the microsecond that [`Pacer::next_batch`] rounded up to counts as on
    /// time (keeping the exact schedule); a later one restarts the schedule from `now`.
    pub fn consume(&mut self, now: Instant) {
        let now = self.scaled(now);
        if now >= self.tat + self.pps {
            self.tat = now;
        }
        self.tat += US_PER_S;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends as soon as allowed, for `n` probes; returns the send times in microseconds.
    fn run(pps: u32, burst: u32, n: usize, start: u64) -> alloc::vec::Vec<u64> {
        let mut p = Pacer::new(pps, burst);
        let mut now = Instant::from_micros(start);
        let mut out = alloc::vec::Vec::new();
        while out.len() < n {
            if p.allows(now) {
                p.consume(now);
                out.push(now.as_micros());
            } else {
                now = p.next_batch(1);
            }
        }
        out
    }

    #[test]
    fn nth_probe_at_t0_plus_n_over_pps_without_drift() {
        // 3 pps does not divide a second into whole microseconds.
        let t = run(3, 1, 3001, 1_000_000);
        for (n, at) in t.iter().enumerate() {
            let ideal = 1_000_000 + (n as u64 * 1_000_000).div_ceil(3);
            assert_eq!(*at, ideal, "probe {n}");
        }
        assert_eq!(t[3000] - t[0], 1_000_000_000);
    }

    #[test]
    fn a_batch_waits_for_its_tokens_up_to_a_quarter_of_the_burst() {
        let mut p = Pacer::new(100, 9);
        for _ in 0..9 {
            p.consume(Instant::ZERO);
        }
        assert_eq!(p.next_batch(1), Instant::from_micros(10_000));
        assert_eq!(p.next_batch(3), Instant::from_micros(30_000));
        // capped at a quarter of the burst (2 more tokens), leaving room for a late wakeup
        assert_eq!(p.next_batch(50), Instant::from_micros(30_000));
        let t = p.next_batch(3) + crate::Duration::from_millis(20);
        for _ in 0..5 {
            assert!(p.allows(t));
            p.consume(t);
        }
        assert!(!p.allows(t));
    }

    #[test]
    fn burst_then_steady_rate() {
        let t = run(100, 5, 10, 0);
        assert_eq!(&t[..5], &[0, 0, 0, 0, 0]);
        assert_eq!(&t[5..], &[10_000, 20_000, 30_000, 40_000, 50_000]);
    }

    #[test]
    fn late_wakeups_within_burst_do_not_lose_rate() {
        let mut p = Pacer::new(1000, 3);
        p.consume(Instant::ZERO);
        // The driver oversleeps to 2.5 ms, missing the 1 ms and 2 ms slots: the bucket
        // lets the missed probes leave now, then the rate resumes.
        let late = Instant::from_micros(2_500);
        for _ in 0..3 {
            assert!(p.allows(late));
            p.consume(late);
        }
        assert!(!p.allows(late));
        assert_eq!(p.next_batch(1), Instant::from_micros(3_500));
    }

    #[test]
    fn idle_time_gives_no_credit_beyond_burst() {
        let mut p = Pacer::new(10, 2);
        p.consume(Instant::ZERO);
        let later = Instant::from_micros(60_000_000);
        p.consume(later);
        p.consume(later);
        assert!(!p.allows(later));
        assert_eq!(p.next_batch(1), Instant::from_micros(60_100_000));
    }
}
