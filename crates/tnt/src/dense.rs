//! [`Dense`]: a map from keys handed out in increasing order (measurement ids, tags) to
//! values, kept as a deque indexed by `key - base`: constant-time and a fraction of a
//! `BTreeMap`'s code, which the unikernel's image pays for once per key and value type.

use alloc::collections::VecDeque;

/// Values under `u64` keys that are mostly handed out in increasing order and taken out
/// in about the same order. Its memory is the span between the oldest and the newest key
/// held (a key far ahead of the others makes room for every key between).
#[derive(Debug)]
pub(crate) struct Dense<V> {
    /// The key of `items[0]`.
    base: u64,
    /// Never starts or ends with `None`.
    items: VecDeque<Option<V>>,
    len: usize,
}

impl<V> Dense<V> {
    pub(crate) fn new() -> Dense<V> {
        Dense {
            base: 0,
            items: VecDeque::new(),
            len: 0,
        }
    }

    /// Puts `value` under `key`, replacing what was there.
    pub(crate) fn insert(&mut self, key: u64, value: V) {
        if self.items.is_empty() {
            self.base = key;
        }
        while key < self.base {
            self.items.push_front(None);
            self.base -= 1;
        }
        let i = (key - self.base) as usize;
        if i >= self.items.len() {
            self.items.resize_with(i + 1, || None);
        }
        if self.items[i].replace(value).is_none() {
            self.len += 1;
        }
    }

    /// Takes out the value under `key`.
    pub(crate) fn remove(&mut self, key: u64) -> Option<V> {
        let i = usize::try_from(key.checked_sub(self.base)?).ok()?;
        let value = self.items.get_mut(i)?.take()?;
        self.len -= 1;
        while let Some(None) = self.items.front() {
            self.items.pop_front();
            self.base += 1;
        }
        while let Some(None) = self.items.back() {
            self.items.pop_back();
        }
        Some(value)
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::Dense;

    #[test]
    fn keys_in_any_order_come_back_once() {
        let mut d = Dense::new();
        for k in [5u64, 6, 9, 7] {
            d.insert(k, k * 10);
        }
        d.insert(3, 30);
        assert_eq!(d.len(), 5);
        assert_eq!(d.remove(8), None);
        assert_eq!(d.remove(6), Some(60));
        assert_eq!(d.remove(6), None);
        assert_eq!(d.remove(3), Some(30));
        assert_eq!(d.remove(5), Some(50));
        assert_eq!(d.remove(2), None);
        assert_eq!(d.remove(u64::MAX), None);
        d.insert(7, 71);
        assert_eq!(d.len(), 2);
        assert_eq!(d.remove(9), Some(90));
        assert_eq!(d.remove(7), Some(71));
        assert!(d.is_empty());
        // empty again: a new first key starts anew (an engine rewound to id 0)
        d.insert(0, 1);
        assert_eq!((d.len(), d.items.len(), d.base), (1, 1, 0));
        assert_eq!(d.remove(0), Some(1));
    }
}
