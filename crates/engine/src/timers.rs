//! [`Timers`]: the engine's one timer per measurement slot, earliest first: a binary heap
//! with lazy deletion (a cancelled or moved timer's entry stays in the heap until it comes
//! to the top or the heap is rebuilt), faster than an ordered set at many measurements in
//! flight and a fraction of its code in the unikernel's image.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Reverse;

use crate::Instant;

/// At most one timer per slot; [`Timers::first`] and [`Timers::pop_due`] give the
/// earliest, ties in slot order (as an ordered set of `(instant, slot)` would).
#[derive(Debug, Default)]
pub(crate) struct Timers {
    /// Every timer set, and some cancelled or moved since: an entry counts only while it
    /// equals its slot's in `at`. The top always counts (see [`Timers::settle`]).
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Each slot's timer.
    at: Vec<Option<Instant>>,
    /// Slots with a timer.
    live: usize,
}

impl Timers {
    /// Slot `i`'s timer.
    pub(crate) fn get(&self, i: usize) -> Option<Instant> {
        self.at.get(i).copied().flatten()
    }

    /// Sets slot `i`'s timer to `t`, replacing the one it had.
    pub(crate) fn set(&mut self, i: usize, t: Instant) {
        if i >= self.at.len() {
            self.at.resize(i + 1, None);
        }
        match self.at[i].replace(t) {
            Some(old) if old == t => return,
            Some(_) => {}
            None => self.live += 1,
        }
        self.heap.push(Reverse((t, i)));
        self.settle();
    }

    /// Takes slot `i`'s timer away.
    pub(crate) fn cancel(&mut self, i: usize) {
        if let Some(slot) = self.at.get_mut(i) {
            if slot.take().is_some() {
                self.live -= 1;
                self.settle();
            }
        }
    }

    /// The earliest timer.
    pub(crate) fn first(&self) -> Option<Instant> {
        self.heap.peek().map(|&Reverse((t, _))| t)
    }

    /// The slot of the earliest timer if it is due at `now`; that timer is then gone.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<usize> {
        let &Reverse((t, i)) = self.heap.peek()?;
        if t > now {
            return None;
        }
        self.heap.pop();
        self.cancel(i);
        Some(i)
    }

    /// Every timer, by slot.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, Instant)> + '_ {
        self.at
            .iter()
            .enumerate()
            .filter_map(|(i, t)| Some((i, (*t)?)))
    }

    /// Whether the heap holds every timer and its top counts (for `Engine::check`).
    pub(crate) fn consistent(&self) -> bool {
        let mut held: Vec<(Instant, usize)> = self.heap.iter().map(|e| e.0).collect();
        held.sort_unstable();
        let top_counts = self
            .heap
            .peek()
            .is_none_or(|&Reverse((t, i))| self.get(i) == Some(t));
        top_counts
            && self.iter().count() == self.live
            && self
                .iter()
                .all(|(i, t)| held.binary_search(&(t, i)).is_ok())
    }

    /// Drops entries that no longer count from the top, so that the top is a timer; when
    /// most entries no longer count, builds the heap anew from `at`. Only once the heap
    /// is longer than `at` too: a rebuild then costs no more than the entries it drops
    /// (at least half), even with few timers among many slots.
    fn settle(&mut self) {
        if self.heap.len() > (2 * self.live + 64).max(self.at.len()) {
            let heap = self
                .iter()
                .map(|(i, t)| Reverse((t, i)))
                .collect::<Vec<_>>();
            self.heap = BinaryHeap::from(heap);
            return;
        }
        while let Some(&Reverse((t, i))) = self.heap.peek() {
            if self.get(i) == Some(t) {
                break;
            }
            self.heap.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Timers;
    use crate::Instant;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    #[test]
    fn due_timers_come_out_earliest_first_ties_by_slot() {
        let mut t = Timers::default();
        t.set(3, ms(20));
        t.set(1, ms(20));
        t.set(2, ms(10));
        t.set(0, ms(5));
        t.cancel(0);
        t.set(2, ms(30)); // moved: its entry at 10 no longer counts
        assert_eq!(t.first(), Some(ms(20)));
        assert!(t.consistent());
        assert_eq!(t.pop_due(ms(19)), None);
        assert_eq!(t.pop_due(ms(25)), Some(1));
        assert_eq!(t.pop_due(ms(25)), Some(3));
        assert_eq!(t.pop_due(ms(25)), None);
        // cancelled and set again at the same time: one timer, fired once
        t.cancel(2);
        t.set(2, ms(30));
        assert_eq!(t.pop_due(ms(30)), Some(2));
        assert_eq!(t.pop_due(ms(30)), None);
        assert_eq!(t.first(), None);
        assert!(t.consistent());
    }

    #[test]
    fn the_heap_is_rebuilt_when_most_entries_no_longer_count() {
        let mut t = Timers::default();
        t.set(0, ms(1_000_000));
        for n in 0..10_000 {
            t.set(1, ms(n + 1));
        }
        assert!(t.heap.len() <= 2 * t.live + 65);
        assert!(t.consistent());
        assert_eq!(t.pop_due(Instant::from_micros(u64::MAX)), Some(1));
        assert_eq!(t.pop_due(Instant::from_micros(u64::MAX)), Some(0));
    }
}
