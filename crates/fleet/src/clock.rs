//! The agent's clock against the broker's, NTP-style, from what JetStream already gives:
//! the agent notes its clock before publishing a heartbeat (`t0`) and once the stream has
//! acknowledged it (`t1`), reads the stored message back by its sequence (the stream's
//! MSG.GET) and takes the server's timestamp `T` of it. The broker stamped it somewhere
//! in `[t0, t1]` of the agent's clock, so the offset (broker minus agent) is
//! `T - (t0 + t1) / 2`, within `±(t1 - t0) / 2`. [`Recent`] keeps the last few and
//! answers with the tightest. The arithmetic is here, sans I/O; the agent does the I/O
//! (`agent::Ctx::heartbeat`).

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// How many recent estimates [`Recent`] chooses from.
pub const RECENT: usize = 8;

/// The broker's clock minus the agent's, and how far off that may be, microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockOffset {
    pub offset_us: i64,
    pub error_us: u64,
}

/// The offset that a message published at `t0_us`, acknowledged at `t1_us` (the agent's
/// clock) and stamped `server_us` by the broker gives; `None` when `t1_us < t0_us` (the
/// agent's clock stepped back meanwhile: no estimate).
pub fn offset(t0_us: u64, t1_us: u64, server_us: u64) -> Option<ClockOffset> {
    let span = t1_us.checked_sub(t0_us)?;
    let mid = i128::from(t0_us) + i128::from(span / 2);
    let offset_us = i64::try_from(i128::from(server_us) - mid).ok()?;
    Some(ClockOffset {
        offset_us,
        // rounded up: the odd microsecond of the midpoint's rounding included
        error_us: span.div_ceil(2),
    })
}

/// The last [`RECENT`] estimates.
#[derive(Debug, Default)]
pub struct Recent {
    kept: VecDeque<ClockOffset>,
}

impl Recent {
    /// Keeps `o`, forgetting the oldest beyond [`RECENT`].
    pub fn push(&mut self, o: ClockOffset) {
        if self.kept.len() == RECENT {
            self.kept.pop_front();
        }
        self.kept.push_back(o);
    }

    /// The estimate with the smallest error among the recent ones (the latest of equals);
    /// `None` before the first.
    pub fn best(&self) -> Option<ClockOffset> {
        self.kept.iter().rev().min_by_key(|o| o.error_us).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_the_server_time_against_the_midpoint() {
        // a broker 1 s ahead, a 400 µs round trip
        let o = offset(1_000_000, 1_000_400, 2_000_200).unwrap();
        assert_eq!(o.offset_us, 1_000_000);
        assert_eq!(o.error_us, 200);
        // a broker behind
        let o = offset(5_000, 5_010, 1_000).unwrap();
        assert_eq!(o.offset_us, -4_005);
        assert_eq!(o.error_us, 5);
        // an odd span: the error covers the rounded midpoint
        let o = offset(0, 3, 1).unwrap();
        assert_eq!((o.offset_us, o.error_us), (0, 2));
        // the same clock: within the error of 0 wherever in the span it stamped
        for t in 100..=110 {
            let o = offset(100, 110, t).unwrap();
            assert!(o.offset_us.unsigned_abs() <= o.error_us, "{o:?}");
        }
        // a clock that stepped back: no estimate
        assert_eq!(offset(10, 9, 10), None);
    }

    #[test]
    fn the_tightest_recent_estimate_is_kept() {
        let mut r = Recent::default();
        assert_eq!(r.best(), None);
        let e = |offset_us, error_us| ClockOffset {
            offset_us,
            error_us,
        };
        r.push(e(10, 50));
        r.push(e(20, 5));
        r.push(e(30, 5));
        r.push(e(40, 90));
        // the latest of the two tightest
        assert_eq!(r.best(), Some(e(30, 5)));
        // the tight ones forgotten after RECENT more
        for i in 0..RECENT as i64 {
            r.push(e(i, 100 + i as u64));
        }
        assert_eq!(r.best(), Some(e(0, 100)));
    }
}
