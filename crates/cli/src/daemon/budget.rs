//! The daemon's probes per second, one budget for every command of every client: a token
//! bucket at the daemon's `-p`, `max(pps/1000, 1)` deep, as a run's own pacer. Whose probe
//! takes the next token is [`vtnt_daemon::Turns`]' business, not the budget's.

use vtnt_engine::Instant;

/// GCRA: the theoretical arrival time of the next probe, in nanoseconds on the daemon's
/// clock.
pub struct Budget {
    interval_ns: u64,
    /// How far ahead of now the next probe may be and still leave (burst - 1 intervals).
    slack_ns: u64,
    next_ns: u64,
}

impl Budget {
    pub fn new(pps: u32) -> Budget {
        let interval_ns = 1_000_000_000 / u64::from(pps.max(1));
        let burst = u64::from((pps / 1000).max(1));
        Budget {
            interval_ns,
            slack_ns: (burst - 1) * interval_ns,
            next_ns: 0,
        }
    }

    /// `None` when a probe may leave at `now`, else when one may.
    pub fn wait(&self, now: Instant) -> Option<Instant> {
        let now_ns = now.as_micros() * 1000;
        (self.next_ns > now_ns + self.slack_ns)
            .then(|| Instant::from_micros((self.next_ns - self.slack_ns).div_ceil(1000)))
    }

    /// A probe left at `now`.
    pub fn charge(&mut self, now: Instant) {
        self.next_ns = self.next_ns.max(now.as_micros() * 1000) + self.interval_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_spaces_probes() {
        let mut b = Budget::new(100);
        let t = Instant::from_millis(1_000);
        assert_eq!(b.wait(t), None);
        b.charge(t);
        // the next probe waits 10 ms
        assert_eq!(b.wait(t), Some(Instant::from_millis(1_010)));
        assert_eq!(b.wait(Instant::from_millis(1_010)), None);
        // 2000 pps: a burst of two, then every 0.5 ms
        let mut b = Budget::new(2000);
        b.charge(t);
        assert_eq!(b.wait(t), None);
        b.charge(t);
        assert_eq!(b.wait(t), Some(Instant::from_micros(1_000_500)));
    }
}
