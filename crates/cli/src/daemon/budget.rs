//! One probe-rate budget for every job of the daemon. Each job runs its own prober on its
//! own sockets; [`Budgeted`] wraps the prober so that a probe leaves only when the shared
//! [`Budget`] (a token bucket at the daemon's `-p`, `max(pps/1000, 1)` deep, as a run's
//! own pacer) has room, and tells the driver loop when it will.

use std::sync::Mutex;

use vtnt_engine::{Instant, Prober};

/// The daemon's probes per second, shared by every job (GCRA: the theoretical arrival
/// time of the next probe, in nanoseconds on the daemon's clock).
pub struct Budget {
    interval_ns: u64,
    /// How far ahead of now the next probe may be and still leave (burst - 1 intervals).
    slack_ns: u64,
    next_ns: Mutex<u64>,
}

impl Budget {
    pub fn new(pps: u32) -> Budget {
        let interval_ns = 1_000_000_000 / u64::from(pps.max(1));
        let burst = u64::from((pps / 1000).max(1));
        Budget {
            interval_ns,
            slack_ns: (burst - 1) * interval_ns,
            next_ns: Mutex::new(0),
        }
    }

    /// Calls `send` if the budget has a probe at `now` and charges it when `send` put
    /// one out (`Some`); otherwise returns when the budget will have one.
    fn spend<T>(
        &self,
        now: Instant,
        send: impl FnOnce() -> Option<T>,
    ) -> Result<Option<T>, Instant> {
        let now_ns = now.as_micros() * 1000;
        let mut next = self.next_ns.lock().unwrap_or_else(|e| e.into_inner());
        if *next > now_ns + self.slack_ns {
            return Err(Instant::from_micros((*next - self.slack_ns).div_ceil(1000)));
        }
        let sent = send();
        if sent.is_some() {
            *next = (*next).max(now_ns) + self.interval_ns;
        }
        Ok(sent)
    }
}

/// A prober whose probes come out of a shared [`Budget`].
pub struct Budgeted<'a, P> {
    pub inner: P,
    budget: &'a Budget,
    /// The budget had no probe for us: when it will.
    held: Option<Instant>,
}

impl<'a, P> Budgeted<'a, P> {
    pub fn new(inner: P, budget: &'a Budget) -> Self {
        Budgeted {
            inner,
            budget,
            held: None,
        }
    }
}

impl<P: Prober> Prober for Budgeted<'_, P> {
    type Output = P::Output;
    fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        self.inner.handle_packet(now, packet)
    }
    fn handle_transmitted(&mut self, at: Instant, packet: &[u8]) {
        self.inner.handle_transmitted(at, packet)
    }
    fn handle_send_error(&mut self, now: Instant, packet: &[u8], errno: i32) {
        self.inner.handle_send_error(now, packet, errno)
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now)
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let inner = &mut self.inner;
        match self.budget.spend(now, || inner.poll_transmit(now, buf)) {
            Ok(sent) => {
                self.held = None;
                sent
            }
            Err(at) => {
                self.held = Some(at);
                None
            }
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        match (self.inner.poll_timeout(), self.held) {
            (Some(t), Some(h)) => Some(t.max(h)),
            (t, _) => t,
        }
    }
    fn poll_output(&mut self) -> Option<P::Output> {
        self.inner.poll_output()
    }
    fn is_idle(&self) -> bool {
        self.inner.is_idle()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_spaces_probes_across_its_users() {
        let b = Budget::new(100);
        let t = Instant::from_millis(1_000);
        assert_eq!(b.spend(t, || Some(1)), Ok(Some(1)));
        // a second user at the same moment waits 10 ms
        assert_eq!(b.spend(t, || Some(2)), Err(Instant::from_millis(1_010)));
        // nothing sent costs nothing
        assert_eq!(
            b.spend(Instant::from_millis(1_010), || None::<u8>),
            Ok(None)
        );
        assert_eq!(
            b.spend(Instant::from_millis(1_010), || Some(3)),
            Ok(Some(3))
        );
        // 2000 pps: a burst of two, then every 0.5 ms
        let b = Budget::new(2000);
        assert!(b.spend(t, || Some(())).is_ok());
        assert!(b.spend(t, || Some(())).is_ok());
        assert_eq!(
            b.spend(t, || Some(())),
            Err(Instant::from_micros(1_000_500))
        );
    }
}
