//! scamper's parallel trace mode, `-N squeries` above 1 (`MODE_PARALLEL` in
//! `scamper_trace_do.c`, 20211212), which differs from one hop at a time:
//!
//! - A new TTL goes out while it is at most `hop_count + squeries`, at most `max_ttl`,
//!   and at most `gaplimit` past the highest TTL that answered. `hop_count` here is the
//!   highest TTL that answered or used up its `attempts` (not the count of hops done),
//!   so one answer deep in the window lets the window slide past silent hops before it.
//! - A probe unanswered after `wait` is sent again (before any new TTL) until its hop has
//!   had `attempts`; the first reply to a hop's last probe ends the hop (`-Q` and `-c`
//!   play no part, nor does `-G 2`).
//! - Every reply is recorded and, until the trace has a stop reason, checked for one; a
//!   stop lets the probes in flight finish (their replies recorded, beyond the
//!   destination too, and `hop_count` with them), without new TTLs.
//! - HOPLIMIT once `hop_count` reaches `max_ttl`; GAPLIMIT once nothing is in flight and
//!   the last `gaplimit` TTLs up to `hop_count` are silent.
//!
//! Where scamper would start no TTL at all (`-f` beyond `-g`, its highest answered TTL
//! starting at 0), TTLs before `first_ttl` count as answered here.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use vtnt_record::StopReason;

use super::{Sent, State, TraceState};
use crate::Instant;

/// A hop with a probe out.
#[derive(Debug, Clone, Copy)]
struct Flight {
    ttl: u16,
    /// Probes sent at this TTL.
    attempt: u8,
    /// When its last probe left, and that probe's number.
    tx: Instant,
    number: u16,
}

/// The hops in flight.
#[derive(Debug)]
pub(super) struct Window {
    /// Waiting for a reply, oldest probe first.
    out: Vec<Flight>,
    /// Timed out with attempts left: probed again before any new TTL.
    retry: VecDeque<Flight>,
    /// The highest TTL that answered.
    answered: u16,
    /// The trace has a stop reason: no new TTLs, the ones in flight finish.
    finishing: bool,
}

impl Window {
    pub(super) fn new(first_ttl: u8) -> Window {
        Window {
            out: Vec::new(),
            retry: VecDeque::new(),
            answered: u16::from(first_ttl) - 1,
            finishing: false,
        }
    }

    /// The TTL and attempt of probe `number`, leaving at `now`: a hop to retry, else the
    /// new TTL `next` (then stepped on).
    pub(super) fn next_probe(&mut self, next: &mut u16, number: u16, now: Instant) -> (u16, u8) {
        let mut f = self.retry.pop_front().unwrap_or_else(|| {
            *next += 1;
            Flight {
                ttl: *next - 1,
                attempt: 0,
                tx: now,
                number,
            }
        });
        f.attempt += 1;
        f.tx = now;
        f.number = number;
        self.out.push(f);
        (f.ttl, f.attempt)
    }

    fn idle(&self) -> bool {
        self.out.is_empty() && self.retry.is_empty()
    }
}

impl TraceState {
    /// scamper's `trace_queue` in parallel mode: hops whose probe timed out are retried
    /// or given up, then the next probe, the end, or the wait for the oldest probe.
    pub(super) fn queue(&mut self, now: Instant) {
        let wait = self.opts.wait;
        while let Some(f) = self.window.out.first().copied() {
            if f.tx + wait > now {
                break;
            }
            self.window.out.remove(0);
            if f.attempt < self.opts.attempts {
                self.window.retry.push_back(f);
            } else {
                self.hop_count = self.hop_count.max(f.ttl);
            }
        }
        if !self.window.retry.is_empty() {
            return self.send_next(now);
        }
        if !self.window.finishing {
            let ttl = self.ttl;
            if ttl <= self.hop_count + u16::from(self.opts.squeries)
                && ttl <= u16::from(self.opts.max_ttl)
                && ttl - self.window.answered <= u16::from(self.opts.gaplimit)
            {
                return self.send_next(now);
            }
        } else if self.window.idle() {
            self.state = State::Done;
            return;
        }
        if self.at_hop_limit() {
            return self.stop_with(StopReason::HopLimit, 0);
        }
        if self.window.idle() && self.gap_reached() {
            return self.stop_with(StopReason::GapLimit, 0);
        }
        match self.window.out.first() {
            Some(f) => self.state = State::Wait(f.tx + wait),
            // (nothing in flight and no new TTL: one of the limits above holds)
            None => self.stop_with(StopReason::GapLimit, 0),
        }
    }

    /// A reply to probe `p` (number `number`), recorded at `at` in the hops.
    pub(super) fn parallel_reply(&mut self, now: Instant, p: &Sent, number: u16, at: usize) {
        let ttl = u16::from(p.ttl);
        self.hop_count = self.hop_count.max(ttl);
        self.window.answered = self.window.answered.max(ttl);
        // (a reply to an earlier attempt leaves the hop waiting for its last probe)
        self.window.out.retain(|f| f.number != number);
        if self.stop.0 == StopReason::None {
            if let Some(stop) = self.stop_reason(at) {
                self.stop = stop;
                self.window.finishing = true;
            }
        }
        if self.window.finishing && self.window.idle() {
            self.state = State::Done;
        } else {
            self.queue(now);
        }
    }
}
