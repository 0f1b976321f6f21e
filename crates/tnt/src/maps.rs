//! The campaign's maps, shaped so that the unikernel's image (which pays for a `BTreeMap`'s
//! code once per key and value type, ~3 KB each) carries little code: [`Dense`] for keys
//! handed out in order (measurement ids, tags), a deque indexed by `key - base`; and
//! [`PairMap`] for values by a pair of addresses, whose one B-tree maps the pair to a
//! position whatever the value type.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::net::IpAddr;

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

/// Two addresses: an (anchor, egress) candidate, or one address twice.
pub(crate) type Pair = (IpAddr, IpAddr);

/// Values by [`Pair`], never removed: the B-tree gives each key's position in `values`.
#[derive(Debug)]
pub(crate) struct PairMap<V> {
    at: BTreeMap<Pair, usize>,
    values: Vec<V>,
}

impl<V> PairMap<V> {
    pub(crate) fn new() -> PairMap<V> {
        PairMap {
            at: BTreeMap::new(),
            values: Vec::new(),
        }
    }

    pub(crate) fn get(&self, key: &Pair) -> Option<&V> {
        self.values.get(*self.at.get(key)?)
    }

    pub(crate) fn get_mut(&mut self, key: &Pair) -> Option<&mut V> {
        self.values.get_mut(*self.at.get(key)?)
    }

    pub(crate) fn contains_key(&self, key: &Pair) -> bool {
        self.at.contains_key(key)
    }

    /// Puts `value` under `key`; returns the value it replaces.
    pub(crate) fn insert(&mut self, key: Pair, value: V) -> Option<V> {
        if let Some(v) = self.get_mut(&key) {
            return Some(core::mem::replace(v, value));
        }
        self.at.insert(key, self.values.len());
        self.values.push(value);
        None
    }

    /// Every entry in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Pair, &V)> {
        self.at.iter().map(|(k, &i)| (k, &self.values[i]))
    }
}

#[cfg(test)]
mod tests {
    use super::{Dense, PairMap};

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

    #[test]
    fn pairs_come_back_in_key_order_with_their_values() {
        let a = |n: u8| -> core::net::IpAddr { [192, 0, 2, n].into() };
        let mut m = PairMap::new();
        assert_eq!(m.insert((a(9), a(1)), "nine"), None);
        assert_eq!(m.insert((a(3), a(4)), "three"), None);
        assert_eq!(m.insert((a(9), a(1)), "NINE"), Some("nine"));
        assert!(m.contains_key(&(a(3), a(4))) && !m.contains_key(&(a(4), a(3))));
        *m.get_mut(&(a(3), a(4))).unwrap() = "THREE";
        let all: alloc::vec::Vec<_> = m.iter().map(|(k, v)| (k.0, *v)).collect();
        assert_eq!(all, [(a(3), "THREE"), (a(9), "NINE")]);
        assert_eq!(m.get(&(a(1), a(1))), None);
    }
}
