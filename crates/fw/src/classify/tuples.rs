//! Tuple space search with merged tuples (TupleMerge, Daly & Torng, ICCCN 2016) and
//! priority pruning: the classifier of one chain.
//!
//! Each [`Entry`] (a rule, or one element of a set it expanded) has a *tuple*: the
//! prefix lengths of its source and destination, whether it names a protocol, and the
//! lengths of the prefixes its two port ranges share (16 for one port, 0 for a range
//! that spans the middle of the port space; ICMP type and code sit in the port fields).
//! A [`Table`] hashes entries on their fields masked to the table's tuple, which must be
//! no longer than the entry's in any field, so a packet masked the same way finds the
//! bucket of every entry that can match it with one hash lookup per table. Port ranges
//! need no expansion into prefixes: an entry goes in whole, keyed on the prefix its
//! range lies in, and the bucket's entries are checked exactly.
//!
//! Classic tuple space search keeps one table per distinct tuple; rule sets with mixed
//! prefix lengths have hundreds. Here an entry joins the first table it fits whose
//! bucket for it holds fewer than `bucket` entries, and a new table gets a *relaxed*
//! tuple (lengths rounded down) so that later entries with nearby tuples fit it too;
//! only when that table exists already and is full for this key does the entry get a
//! table with its own exact tuple (and beyond that, its bucket grows). Entries arrive
//! in rule order, so the early tables hold the early rules.
//!
//! Lookup walks the tables in the order of the first rule each holds and stops as soon
//! as that rule comes after the best match found: a packet matched by an early rule
//! probes one or two tables. Buckets keep their entries in rule order and are stored
//! contiguously, so a probe is one hash slot and one short, sequential run.

use alloc::vec;
use alloc::vec::Vec;

use alloc::collections::BTreeMap;

use hashbrown::HashTable;

use crate::hash::hash2 as hash;
use crate::packet::Packet;
use crate::rule::mask;

use super::cond::{Conds, Ifaces};

/// An entry names no protocol: any protocol matches.
pub(crate) const ANY_PROTO: u8 = 1;
/// An entry matches ports, an ICMP type or TCP flags: never a non-first fragment.
pub(crate) const TRANSPORT: u8 = 2;
/// An entry without conditions.
pub(crate) const NO_COND: u32 = u32::MAX;

/// One matchable unit of a rule: a source and destination prefix, a protocol, two
/// ranges (ports, or ICMP type and code), and the index of its conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub src: u32,
    pub dst: u32,
    pub sport: (u16, u16),
    pub dport: (u16, u16),
    /// The rule's index in its chain: its priority.
    pub rule: u32,
    pub cond: u32,
    pub slen: u8,
    pub dlen: u8,
    pub proto: u8,
    pub flags: u8,
}

impl Entry {
    const EMPTY: Entry = Entry {
        src: 0,
        dst: 0,
        sport: (0, 0),
        dport: (0, 0),
        rule: 0,
        cond: NO_COND,
        slen: 0,
        dlen: 0,
        proto: 0,
        flags: 0,
    };

    /// The exact check of the hashed fields.
    #[inline]
    fn matches(&self, k: &Key) -> bool {
        let src = (k.a >> 32) as u32;
        let dst = k.a as u32;
        let proto = (k.b >> 32) as u8;
        let sport = (k.b >> 16) as u16;
        let dport = k.b as u16;
        (src ^ self.src) & fast_mask(self.slen) == 0
            && (dst ^ self.dst) & fast_mask(self.dlen) == 0
            && (self.flags & ANY_PROTO != 0 || proto == self.proto)
            && sport.wrapping_sub(self.sport.0) <= self.sport.1.wrapping_sub(self.sport.0)
            && dport.wrapping_sub(self.dport.0) <= self.dport.1.wrapping_sub(self.dport.0)
            && !(k.fragment && self.flags & TRANSPORT != 0)
    }

    /// Its fields as the two hash words (see [`Key`]).
    fn words(&self) -> (u64, u64) {
        (
            u64::from(self.src) << 32 | u64::from(self.dst),
            u64::from(self.proto) << 32 | u64::from(self.sport.0) << 16 | u64::from(self.dport.0),
        )
    }
}

/// The netmask of a length, without a branch (`len` <= 32).
#[inline]
fn fast_mask(len: u8) -> u32 {
    (u64::MAX << (32 - u32::from(len))) as u32
}

/// A packet as two words: source and destination; protocol, source and destination
/// port. A table's masks turn them into its key with two ANDs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key {
    pub a: u64,
    pub b: u64,
    pub fragment: bool,
}

impl Key {
    pub fn new(p: &Packet) -> Key {
        Key {
            a: u64::from(u32::from(p.src)) << 32 | u64::from(u32::from(p.dst)),
            b: u64::from(p.proto) << 32 | u64::from(p.sport) << 16 | u64::from(p.dport),
            fragment: p.fragment,
        }
    }
}

/// What a table hashes on: source and destination prefix lengths, the protocol or not,
/// source and destination port prefix lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Tuple {
    pub src: u8,
    pub dst: u8,
    pub proto: bool,
    pub sport: u8,
    pub dport: u8,
}

/// The length of the prefix every port in `lo..=hi` shares.
fn port_prefix((lo, hi): (u16, u16)) -> u8 {
    (lo ^ hi).leading_zeros() as u8
}

impl Tuple {
    fn of(e: &Entry) -> Tuple {
        let proto = e.flags & ANY_PROTO == 0;
        Tuple {
            src: e.slen,
            dst: e.dlen,
            proto,
            sport: if proto { port_prefix(e.sport) } else { 0 },
            dport: if proto { port_prefix(e.dport) } else { 0 },
        }
    }
    /// Whether a table of this tuple can hold an entry of tuple `t` (its address
    /// lengths at most `slack` bits shorter).
    fn within(&self, t: &Tuple, slack: u8) -> bool {
        self.src <= t.src
            && self.dst <= t.dst
            && t.src - self.src <= slack
            && t.dst - self.dst <= slack
            && (!self.proto || t.proto)
            && self.sport <= t.sport
            && self.dport <= t.dport
    }
    fn masks(&self) -> (u64, u64) {
        let port = |l: u8| u64::from(0xffff_u32 << (16 - u32::from(l)) & 0xffff);
        (
            u64::from(mask(self.src)) << 32 | u64::from(mask(self.dst)),
            if self.proto { 0xff << 32 } else { 0 } | port(self.sport) << 16 | port(self.dport),
        )
    }
    /// TupleMerge's relaxation: address lengths down to a multiple of 8 (so /17-/23
    /// rules share a /16 table), a port range that is not one port down to a wildcard.
    fn relaxed(&self) -> Tuple {
        let port = |l: u8| if l == 16 { 16 } else { 0 };
        Tuple {
            src: self.src & !7,
            dst: self.dst & !7,
            proto: self.proto,
            sport: port(self.sport),
            dport: port(self.dport),
        }
    }
}

/// How entries are spread over tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Classic tuple space search: one table per distinct tuple.
    Exact,
    /// Merged tuples (the default): a table takes any entry it can hold while the
    /// entry's bucket has fewer than `bucket` entries.
    Merged { bucket: u32, slack: u8 },
}

impl Default for Strategy {
    fn default() -> Strategy {
        Strategy::Merged {
            bucket: 8,
            slack: 8,
        }
    }
}

/// A hash slot: the bucket's first entry (its key is that entry's fields under the
/// table's masks, so no key is stored) and where the bucket's other entries are. Most
/// buckets hold one entry, so a probe that finds its bucket usually reads no further.
#[derive(Debug, Clone, Copy)]
struct Slot {
    head: Entry,
    start: u32,
    more: u32,
}

/// One hash table of entries sharing a tuple.
#[derive(Debug)]
pub(crate) struct Table {
    pub tuple: Tuple,
    ma: u64,
    mb: u64,
    /// The first and last rule it holds.
    pub min_rule: u32,
    pub max_rule: u32,
    slots: HashTable<Slot>,
}

impl Table {
    fn new(tuple: Tuple) -> Table {
        let (ma, mb) = tuple.masks();
        Table {
            tuple,
            ma,
            mb,
            min_rule: u32::MAX,
            max_rule: 0,
            slots: HashTable::new(),
        }
    }
    /// The key of entry `e` in this table.
    #[inline]
    fn key(&self, e: &Entry) -> (u64, u64) {
        let (a, b) = e.words();
        (a & self.ma, b & self.mb)
    }
    fn slot_mut(&mut self, e: &Entry) -> (Option<&mut Slot>, u64) {
        let (ka, kb) = self.key(e);
        let h = hash(ka, kb);
        let (ma, mb) = (self.ma, self.mb);
        let eq = move |s: &Slot| {
            let (a, b) = s.head.words();
            a & ma == ka && b & mb == kb
        };
        (self.slots.find_mut(h, eq), h)
    }
    /// Counts `e` into its bucket unless the bucket holds `limit` already.
    fn admit(&mut self, e: &Entry, limit: u32) -> bool {
        let (ma, mb) = (self.ma, self.mb);
        let (slot, h) = self.slot_mut(e);
        match slot {
            Some(s) if s.more + 1 >= limit => return false,
            Some(s) => s.more += 1,
            None => {
                let s = Slot {
                    head: *e,
                    start: 0,
                    more: 0,
                };
                let rehash = |s: &Slot| {
                    let (a, b) = s.head.words();
                    hash(a & ma, b & mb)
                };
                self.slots.insert_unique(h, s, rehash);
            }
        }
        self.min_rule = self.min_rule.min(e.rule);
        self.max_rule = self.max_rule.max(e.rule);
        true
    }
    pub fn buckets(&self) -> usize {
        self.slots.len()
    }
    pub fn bytes(&self) -> usize {
        self.slots.allocation_size()
    }
    fn largest_bucket(&self) -> u32 {
        self.slots.iter().map(|s| s.more + 1).max().unwrap_or(0)
    }
}

/// The compiled classifier of one chain.
#[derive(Debug, Default)]
pub(crate) struct Tables {
    pub tables: Vec<Table>,
    /// The buckets' entries after their first, bucket after bucket, in rule order.
    more: Vec<Entry>,
    /// Entries in all (first and more).
    entries: usize,
    /// A blocked Bloom filter over (table, key): 16 bits per bucket, two bits of one
    /// word set per key, so a table without the packet's key is passed over after one
    /// access to a bit array that stays in cache (2 MiB for a million buckets), not a
    /// probe of its hash table (a cache miss each at that size).
    bloom: Vec<u64>,
}

/// Bloom filter bits per bucket.
pub(crate) const BLOOM_BITS: usize = 8;

/// The Bloom filter's word and bits for a key's hash in table `t`.
#[inline]
fn bloom_bits(h: u64, t: usize, words: usize) -> (usize, u64) {
    let g = h ^ (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let word = (g >> 24) as usize & (words - 1);
    (word, 1 << (g & 63) | 1 << ((g >> 6) & 63))
}

impl Tables {
    /// Spreads `entries` (in rule order) over tables by `strategy`.
    pub fn build(entries: Vec<Entry>, strategy: Strategy) -> Tables {
        let limit = match strategy {
            Strategy::Exact => u32::MAX,
            Strategy::Merged { bucket, .. } => bucket.max(1),
        };
        let mut tables: Vec<Table> = Vec::new();
        let mut exact: BTreeMap<Tuple, usize> = BTreeMap::new();
        // Each natural tuple met so far, with the tables that can hold its entries.
        let mut tuple_ids: BTreeMap<Tuple, usize> = BTreeMap::new();
        let mut tuples: Vec<Tuple> = Vec::new();
        let mut fits: Vec<Vec<usize>> = Vec::new();
        let holds = |t: &Tuple, nat: &Tuple| match strategy {
            Strategy::Exact => t == nat,
            Strategy::Merged { slack, .. } => t.within(nat, slack),
        };
        let mut placed: Vec<u32> = Vec::with_capacity(entries.len());
        for e in &entries {
            let nat = Tuple::of(e);
            let id = *tuple_ids.entry(nat).or_insert_with(|| {
                tuples.push(nat);
                let ts = tables
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| holds(&t.tuple, &nat));
                fits.push(ts.map(|(i, _)| i).collect());
                tuples.len() - 1
            });
            let mut at = None;
            for &ti in &fits[id] {
                if tables[ti].admit(e, limit) {
                    at = Some(ti);
                    break;
                }
            }
            let ti = match at {
                Some(ti) => ti,
                None => {
                    let relaxed = match strategy {
                        Strategy::Exact => nat,
                        Strategy::Merged { .. } => nat.relaxed(),
                    };
                    let tuple = [relaxed, nat].into_iter().find(|t| !exact.contains_key(t));
                    let ti = match tuple {
                        Some(t) => {
                            tables.push(Table::new(t));
                            let ti = tables.len() - 1;
                            exact.insert(t, ti);
                            for (k, n) in tuples.iter().enumerate() {
                                if holds(&t, n) {
                                    fits[k].push(ti);
                                }
                            }
                            ti
                        }
                        None => exact[&nat],
                    };
                    let admitted = tables[ti].admit(e, u32::MAX);
                    debug_assert!(admitted);
                    ti
                }
            };
            placed.push(ti as u32);
        }
        // Lay the buckets' further entries out one after the other, then fill them in
        // rule order; the first entry a bucket met is its head (`more` = MAX until then).
        let mut start = 0;
        for t in &mut tables {
            for s in t.slots.iter_mut() {
                (s.start, start, s.more) = (start, start + s.more, u32::MAX);
            }
        }
        let mut laid = vec![Entry::EMPTY; start as usize];
        for (e, &ti) in entries.iter().zip(&placed) {
            if let (Some(s), _) = tables[ti as usize].slot_mut(e) {
                if s.more == u32::MAX {
                    s.more = 0;
                } else {
                    laid[(s.start + s.more) as usize] = *e;
                    s.more += 1;
                }
            }
        }
        let count = entries.len();
        drop(entries);
        tables.sort_by_key(|t| t.min_rule);
        let buckets: usize = tables.iter().map(|t| t.slots.len()).sum();
        let words = (buckets * BLOOM_BITS / 64).next_power_of_two().max(1);
        let mut bloom = vec![0u64; words];
        for (ti, t) in tables.iter().enumerate() {
            for s in t.slots.iter() {
                let (ka, kb) = t.key(&s.head);
                let (w, bits) = bloom_bits(hash(ka, kb), ti, words);
                bloom[w] |= bits;
            }
        }
        Tables {
            tables,
            more: laid,
            entries: count,
            bloom,
        }
    }

    /// The first rule at or after `from` that matches, if any.
    #[inline]
    pub fn first_match(
        &self,
        k: &Key,
        from: u32,
        p: &Packet,
        conds: &Conds,
        ifs: &Ifaces,
    ) -> Option<u32> {
        let mut best = u32::MAX;
        let words = self.bloom.len();
        for (ti, t) in self.tables.iter().enumerate() {
            if t.min_rule >= best {
                break;
            }
            if t.max_rule < from {
                continue;
            }
            let (ka, kb) = (k.a & t.ma, k.b & t.mb);
            let h = hash(ka, kb);
            let (w, bits) = bloom_bits(h, ti, words);
            if self.bloom[w] & bits != bits {
                continue;
            }
            let Some(s) = t.slots.find(h, |s| t.key(&s.head) == (ka, kb)) else {
                continue;
            };
            if s.head.rule >= best {
                continue;
            }
            let more = &self.more[s.start as usize..(s.start + s.more) as usize];
            for e in core::iter::once(&s.head).chain(more) {
                if e.rule >= best {
                    break;
                }
                if e.rule >= from
                    && e.matches(k)
                    && (e.cond == NO_COND || conds.hold(e.cond, p, ifs))
                {
                    best = e.rule;
                    break;
                }
            }
        }
        (best != u32::MAX).then_some(best)
    }

    /// Reads, for each of `keys`, what [`Tables::first_match`] would read first (the
    /// Bloom filter words of every table, then the hash slot and first further entry of
    /// every table the filter lets through), and changes nothing. Stage by stage over
    /// the whole batch, the loads of one stage do not depend on each other, so the
    /// processor has many cache misses in flight at once instead of one packet's chain
    /// of them; the lookups that follow find their lines in cache. Returns a fold of
    /// what it read, for the caller to pass to [`core::hint::black_box`] so the reads
    /// stay. Tables past the 64th are left for the lookup itself.
    pub fn touch(&self, keys: &[Key], passed: &mut [u64]) -> u64 {
        let words = self.bloom.len();
        let tables = &self.tables[..self.tables.len().min(64)];
        for (k, pass) in keys.iter().zip(passed.iter_mut()) {
            *pass = 0;
            for (ti, t) in tables.iter().enumerate() {
                let (w, bits) = bloom_bits(hash(k.a & t.ma, k.b & t.mb), ti, words);
                *pass |= u64::from(self.bloom[w] & bits == bits) << ti;
            }
        }
        let mut seen = 0u64;
        for (k, &pass) in keys.iter().zip(passed.iter()) {
            let mut left = pass;
            while left != 0 {
                let ti = left.trailing_zeros() as usize;
                left &= left - 1;
                let t = &tables[ti];
                let (ka, kb) = (k.a & t.ma, k.b & t.mb);
                if let Some(s) = t.slots.find(hash(ka, kb), |s| t.key(&s.head) == (ka, kb)) {
                    seen ^= u64::from(s.head.rule);
                    if let Some(e) = self.more.get(s.start as usize).filter(|_| s.more > 0) {
                        seen ^= u64::from(e.rule);
                    }
                }
            }
        }
        seen
    }

    pub fn entries(&self) -> usize {
        self.entries
    }
    pub fn largest_bucket(&self) -> u32 {
        self.tables
            .iter()
            .map(Table::largest_bucket)
            .max()
            .unwrap_or(0)
    }
    pub fn bytes(&self) -> usize {
        self.bloom.len() * 8
            + self.more.capacity() * core::mem::size_of::<Entry>()
            + self
                .tables
                .iter()
                .map(|t| t.bytes() + core::mem::size_of::<Table>())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[allow(unused_imports)]
    use alloc::{string::ToString, vec, vec::Vec};

    #[test]
    fn an_entry_is_28_bytes() {
        assert_eq!(core::mem::size_of::<Entry>(), 28);
    }

    #[test]
    fn port_prefixes_and_masks() {
        assert_eq!(port_prefix((80, 80)), 16);
        assert_eq!(port_prefix((0, 1023)), 6);
        assert_eq!(port_prefix((1024, 65535)), 0);
        let t = Tuple {
            src: 8,
            dst: 0,
            proto: true,
            sport: 0,
            dport: 16,
        };
        assert_eq!(t.masks(), (0xff00_0000_0000_0000, 0xff_0000_ffff));
        assert!(t.within(
            &Tuple {
                src: 24,
                dst: 0,
                proto: true,
                sport: 3,
                dport: 16
            },
            32
        ));
        assert!(!t.within(
            &Tuple {
                src: 24,
                dst: 0,
                proto: true,
                sport: 3,
                dport: 16
            },
            8
        ));
        assert!(!t.within(
            &Tuple {
                src: 24,
                dst: 0,
                proto: false,
                sport: 0,
                dport: 0
            },
            32
        ));
    }

    #[test]
    fn fast_mask_is_the_mask() {
        for l in 0..=32 {
            assert_eq!(fast_mask(l), mask(l), "{l}");
        }
    }
}
