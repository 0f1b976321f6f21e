//! [`Turns`]: weighted round robin among the daemon's clients, for what they share: the
//! probe budget (a turn is one probe) and the window (a turn is one command started). A
//! client of weight w (its `attach priority`) takes up to w turns in a row, then the
//! next client is offered; one that has nothing to do when offered loses its place until
//! the next round. So each client with work gets its weight's share, whatever the others
//! have queued.

use std::collections::VecDeque;

/// The ring of clients, with whose turn it is.
#[derive(Debug, Default)]
pub struct Turns<K> {
    ring: VecDeque<(K, u32)>,
    /// Turns the client at the front has taken in a row.
    taken: u32,
}

impl<K: Copy + Eq> Turns<K> {
    pub fn new() -> Turns<K> {
        Turns {
            ring: VecDeque::new(),
            taken: 0,
        }
    }

    /// Adds `k` (at the back of the ring) with `weight` turns a round (at least 1), or
    /// changes its weight.
    pub fn insert(&mut self, k: K, weight: u32) {
        match self.ring.iter_mut().find(|(x, _)| *x == k) {
            Some(e) => e.1 = weight.max(1),
            None => self.ring.push_back((k, weight.max(1))),
        }
    }

    pub fn remove(&mut self, k: K) {
        if self.ring.front().is_some_and(|(x, _)| *x == k) {
            self.taken = 0;
        }
        self.ring.retain(|(x, _)| *x != k);
    }

    /// Offers one turn, starting with the client whose turn it is, once round the ring at
    /// most: `take(k)` does k's work and says whether it had any. Returns who took it.
    pub fn next(&mut self, mut take: impl FnMut(K) -> bool) -> Option<K> {
        for _ in 0..self.ring.len() {
            let (k, weight) = *self.ring.front()?;
            if take(k) {
                self.taken += 1;
                if self.taken >= weight {
                    self.pass();
                }
                return Some(k);
            }
            self.pass();
        }
        None
    }

    fn pass(&mut self) {
        self.taken = 0;
        self.ring.rotate_left(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Who gets the first `n` turns when every client always has work.
    fn order(t: &mut Turns<char>, n: usize) -> String {
        (0..n).filter_map(|_| t.next(|_| true)).collect()
    }

    #[test]
    fn equal_clients_alternate_whatever_they_have_queued() {
        let mut t = Turns::new();
        t.insert('a', 1);
        t.insert('b', 1);
        assert_eq!(order(&mut t, 6), "ababab");
        t.insert('c', 1);
        assert_eq!(order(&mut t, 6), "abcabc");
        t.remove('b');
        assert_eq!(order(&mut t, 4), "acac");
    }

    #[test]
    fn weights_give_that_many_turns_in_a_row() {
        let mut t = Turns::new();
        t.insert('a', 3);
        t.insert('b', 1);
        assert_eq!(order(&mut t, 8), "aaabaaab");
        t.insert('b', 2);
        assert_eq!(order(&mut t, 5), "aaabb");
    }

    #[test]
    fn a_client_with_nothing_to_do_is_passed_over() {
        let mut t = Turns::new();
        for k in ['a', 'b', 'c'] {
            t.insert(k, 1);
        }
        let mut asked = String::new();
        let got = t.next(|k| {
            asked.push(k);
            k == 'c'
        });
        assert_eq!((got, asked.as_str()), (Some('c'), "abc"));
        // nobody has work: one round, then None
        let mut n = 0;
        assert_eq!(
            t.next(|_| {
                n += 1;
                false
            }),
            None
        );
        assert_eq!(n, 3);
        assert_eq!(Turns::<char>::new().next(|_| true), None);
    }
}
