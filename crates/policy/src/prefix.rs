//! IPv4 prefixes and sets of them: the exclusion list's entries and the lab prefixes a
//! host routes, with lookups in O(log n) however long the list.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::net::Ipv4Addr;
use core::str::FromStr;

/// An IPv4 prefix `addr/len` with the host bits clear.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix {
    addr: Ipv4Addr,
    len: u8,
}

fn mask(len: u8) -> u32 {
    u32::MAX.checked_shl(32 - len as u32).unwrap_or(0)
}

impl Prefix {
    /// `addr/len` with the host bits of `addr` cleared; `None` when `len > 32`.
    pub fn new(addr: Ipv4Addr, len: u8) -> Option<Prefix> {
        (len <= 32).then(|| Prefix {
            addr: Ipv4Addr::from(u32::from(addr) & mask(len)),
            len,
        })
    }

    /// For constants: `addr` must have no host bits set and `len <= 32`.
    pub const fn new_unchecked(addr: Ipv4Addr, len: u8) -> Prefix {
        Prefix { addr, len }
    }

    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }
    /// The prefix length in bits.
    pub fn bits(&self) -> u8 {
        self.len
    }
    /// First address as a number.
    fn first(&self) -> u32 {
        u32::from(self.addr)
    }
    /// Last address as a number.
    fn last(&self) -> u32 {
        self.first() | !mask(self.len)
    }

    /// Whether `a` is in this prefix.
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        u32::from(a) & mask(self.len) == self.first()
    }

    /// Whether `other` lies wholly inside this prefix.
    pub fn covers(&self, other: &Prefix) -> bool {
        other.len >= self.len && self.contains(other.addr)
    }

    /// The smaller of two overlapping prefixes (CIDR prefixes nest or are disjoint).
    pub fn intersection(&self, other: &Prefix) -> Option<Prefix> {
        if self.covers(other) {
            Some(*other)
        } else if other.covers(self) {
            Some(*self)
        } else {
            None
        }
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// Why a prefix did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsePrefixError(pub String);

impl fmt::Display for ParsePrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not an IPv4 prefix (a.b.c.d/len or a.b.c.d)",
            self.0
        )
    }
}

impl core::error::Error for ParsePrefixError {}

impl FromStr for Prefix {
    type Err = ParsePrefixError;
    /// `a.b.c.d/len` (host bits are cleared, as ZMap's blocklist does) or `a.b.c.d` (a /32).
    fn from_str(s: &str) -> Result<Prefix, ParsePrefixError> {
        let bad = || ParsePrefixError(s.to_string());
        let (a, len) = match s.split_once('/') {
            Some((a, l)) if !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()) => {
                (a, l.parse::<u8>().map_err(|_| bad())?)
            }
            Some(_) => return Err(bad()),
            None => (s, 32),
        };
        let addr: Ipv4Addr = a.parse().map_err(|_| bad())?;
        Prefix::new(addr, len).ok_or_else(bad)
    }
}

/// A set of prefixes, kept sorted with nested entries folded into the prefix that covers
/// them, so a lookup is one binary search.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PrefixSet {
    /// Disjoint, sorted by first address.
    prefixes: Vec<Prefix>,
}

/// A line of a prefix list that is not a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixSetError {
    /// 1-based line number.
    pub line: usize,
    pub error: ParsePrefixError,
}

impl fmt::Display for PrefixSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.error)
    }
}

impl core::error::Error for PrefixSetError {}

impl PrefixSet {
    pub fn new() -> PrefixSet {
        PrefixSet::default()
    }

    /// Reads a list: one prefix per line, `#` starts a comment, blank lines ignored.
    pub fn parse(text: &str) -> Result<PrefixSet, PrefixSetError> {
        let mut v = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let t = line.split('#').next().unwrap_or("").trim();
            if t.is_empty() {
                continue;
            }
            v.push(
                t.parse()
                    .map_err(|error| PrefixSetError { line: i + 1, error })?,
            );
        }
        Ok(v.into_iter().collect())
    }

    /// Adds `p` (a no-op when a prefix already in the set covers it; entries it covers
    /// fold into it). O(n) per call and no sorting code, which the unikernel's image
    /// budget prefers; build large sets with `collect`.
    pub fn insert(&mut self, p: Prefix) {
        if self.find(p.addr()).is_some_and(|q| q.covers(&p)) {
            return;
        }
        let from = self.prefixes.partition_point(|q| q.first() < p.first());
        let to = self.prefixes.partition_point(|q| q.first() <= p.last());
        self.prefixes.splice(from..to, [p]);
    }

    /// The entry containing `a`, if any.
    pub fn find(&self, a: Ipv4Addr) -> Option<Prefix> {
        let n = u32::from(a);
        let i = self.prefixes.partition_point(|p| p.first() <= n);
        let p = *self.prefixes.get(i.checked_sub(1)?)?;
        (n <= p.last()).then_some(p)
    }

    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }
    pub fn len(&self) -> usize {
        self.prefixes.len()
    }
    pub fn iter(&self) -> impl Iterator<Item = &Prefix> {
        self.prefixes.iter()
    }
}

impl FromIterator<Prefix> for PrefixSet {
    fn from_iter<I: IntoIterator<Item = Prefix>>(it: I) -> PrefixSet {
        let mut v: Vec<Prefix> = it.into_iter().collect();
        // Wider prefixes first among those starting at the same address, so each nested
        // entry comes after the one that covers it.
        v.sort_by_key(|p| (p.first(), p.len));
        let mut out: Vec<Prefix> = Vec::with_capacity(v.len());
        for p in v {
            match out.last() {
                Some(last) if last.covers(&p) => {}
                _ => out.push(p),
            }
        }
        PrefixSet { prefixes: out }
    }
}
