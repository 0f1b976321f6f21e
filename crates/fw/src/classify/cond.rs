//! What a compiled entry checks beyond its hashed fields: negations, interfaces,
//! connection states, TCP flags, and sets too large to expand into entries. A rule's
//! conditions are stored once ([`Conds::add`]) and shared by all its entries; most
//! rules have none.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::packet::{IfId, Packet};
use crate::rule::{
    IcmpType, IfName, Iface, Match, PortRange, Prefix, Ruleset, SetId, StateSet, TcpFlags,
};

/// Sorted, disjoint, inclusive intervals; membership by binary search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Intervals<T>(Arc<[(T, T)]>);

impl<T: Ord + Copy> Intervals<T> {
    /// From possibly overlapping intervals, merged (adjacent ones are kept apart: they
    /// cost a step of the search, not a wrong answer).
    fn new(mut v: Vec<(T, T)>) -> Intervals<T> {
        v.sort_unstable();
        let mut out: Vec<(T, T)> = Vec::with_capacity(v.len());
        for (lo, hi) in v {
            match out.last_mut() {
                Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        Intervals(out.into())
    }
    fn contains(&self, x: T) -> bool {
        let i = self.0.partition_point(|&(lo, _)| lo <= x);
        i > 0 && self.0[i - 1].1 >= x
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// One condition; `bool` fields: negated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cond {
    Src(Intervals<u32>, bool),
    Dst(Intervals<u32>, bool),
    Proto([u64; 4], bool),
    Sport(Intervals<u16>, bool),
    Dport(Intervals<u16>, bool),
    Icmp(Arc<[IcmpType]>, bool),
    InIf(Arc<[u32]>, bool),
    OutIf(Arc<[u32]>, bool),
    State(StateSet),
    Flags(TcpFlags),
}

/// Interface names the driver registered and, for each, which of the rules' patterns
/// it matches.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ifaces {
    patterns: Vec<IfName>,
    names: Vec<String>,
    /// `words` bits per registered name, pattern `p` at bit `p`.
    bits: Vec<u64>,
    words: usize,
}

impl Ifaces {
    pub fn new(patterns: Vec<IfName>) -> Ifaces {
        let words = patterns.len().div_ceil(64).max(1);
        Ifaces {
            patterns,
            names: Vec::new(),
            bits: Vec::new(),
            words,
        }
    }
    pub fn names(&self) -> &[String] {
        &self.names
    }
    /// The id of interface `name`, registered when new (ids count up from 0; at most
    /// 65,535 names).
    pub fn id(&mut self, name: &str) -> IfId {
        if let Some(i) = self.names.iter().position(|n| n == name) {
            return IfId(i as u16);
        }
        let at = self.bits.len();
        self.bits.resize(at + self.words, 0);
        for (p, pat) in self.patterns.iter().enumerate() {
            if pat.matches(name) {
                self.bits[at + p / 64] |= 1 << (p % 64);
            }
        }
        self.names.push(name.into());
        IfId((self.names.len() - 1) as u16)
    }
    fn matches(&self, id: IfId, pattern: u32) -> bool {
        let p = pattern as usize;
        let at = usize::from(id.0) * self.words + p / 64;
        id != IfId::NONE && self.bits.get(at).is_some_and(|w| w & (1 << (p % 64)) != 0)
    }
    fn any(&self, id: IfId, pats: &[u32]) -> bool {
        pats.iter().any(|&p| self.matches(id, p))
    }
    pub fn bytes(&self) -> usize {
        self.bits.len() * 8 + self.names.iter().map(|n| n.len() + 24).sum::<usize>()
    }
}

/// All conditions of a chain set, and the spans rules use.
#[derive(Debug, Clone, Default)]
pub(crate) struct Conds {
    conds: Vec<Cond>,
    spans: Vec<(u32, u32)>,
    /// Sets already compiled, by id, so a named set many rules use is stored once.
    v4: BTreeMap<SetId, Intervals<u32>>,
    ports: BTreeMap<SetId, Intervals<u16>>,
}

fn prefix_intervals(ps: &[Prefix]) -> Intervals<u32> {
    Intervals::new(ps.iter().map(|p| (p.bits(), p.last())).collect())
}

fn port_intervals(ps: &[PortRange]) -> Intervals<u16> {
    Intervals::new(ps.iter().map(|p| (p.lo, p.hi)).collect())
}

impl Conds {
    /// Starts a rule's span; conditions pushed until [`Conds::finish`] belong to it.
    pub fn begin(&mut self) -> usize {
        self.conds.len()
    }
    /// Ends the span begun at `start`: its id, or `None` when the rule has none.
    pub fn finish(&mut self, start: usize) -> Option<u32> {
        (self.conds.len() > start).then(|| {
            self.spans
                .push((start as u32, (self.conds.len() - start) as u32));
            (self.spans.len() - 1) as u32
        })
    }
    pub fn push(&mut self, c: Cond) {
        self.conds.push(c);
    }

    /// A condition on a prefix field (`dst`: the destination), for a negation or a set
    /// left unexpanded (`keep_positive`). Nothing for `Any` and expanded matches.
    pub fn prefixes(&mut self, rs: &Ruleset, m: &Match<Prefix>, dst: bool, keep_positive: bool) {
        let (set, neg) = match *m {
            Match::Not(p) => (prefix_intervals(&[p]), true),
            Match::NotIn(id) => (self.v4_set(rs, id), true),
            Match::In(id) if keep_positive => (self.v4_set(rs, id), false),
            _ => return,
        };
        self.push(if dst {
            Cond::Dst(set, neg)
        } else {
            Cond::Src(set, neg)
        });
    }

    fn v4_set(&mut self, rs: &Ruleset, id: SetId) -> Intervals<u32> {
        self.v4
            .entry(id)
            .or_insert_with(|| prefix_intervals(rs.set::<Prefix>(id)))
            .clone()
    }

    /// As [`Conds::prefixes`] for a port field (`dport`: the destination port).
    pub fn ports(&mut self, rs: &Ruleset, m: &Match<PortRange>, dport: bool, keep_positive: bool) {
        let (set, neg) = match *m {
            Match::Not(p) => (port_intervals(&[p]), true),
            Match::NotIn(id) => (self.port_set(rs, id), true),
            Match::In(id) if keep_positive => (self.port_set(rs, id), false),
            _ => return,
        };
        self.push(if dport {
            Cond::Dport(set, neg)
        } else {
            Cond::Sport(set, neg)
        });
    }

    fn port_set(&mut self, rs: &Ruleset, id: SetId) -> Intervals<u16> {
        self.ports
            .entry(id)
            .or_insert_with(|| port_intervals(rs.set::<PortRange>(id)))
            .clone()
    }

    pub fn proto(&mut self, rs: &Ruleset, m: &Match<u8>, keep_positive: bool) {
        let (items, neg) = match *m {
            Match::Not(p) => (core::slice::from_ref(&p).to_vec(), true),
            Match::NotIn(id) => (rs.set::<u8>(id).to_vec(), true),
            Match::In(id) if keep_positive => (rs.set::<u8>(id).to_vec(), false),
            _ => return,
        };
        let mut bits = [0u64; 4];
        for p in items {
            bits[usize::from(p / 64)] |= 1 << (p % 64);
        }
        self.push(Cond::Proto(bits, neg));
    }

    pub fn icmp(&mut self, rs: &Ruleset, m: &Match<IcmpType>, keep_positive: bool) {
        let (items, neg): (Arc<[IcmpType]>, bool) = match *m {
            Match::Not(t) => (Arc::from([t]), true),
            Match::NotIn(id) => (rs.set::<IcmpType>(id).into(), true),
            Match::In(id) if keep_positive => (rs.set::<IcmpType>(id).into(), false),
            _ => return,
        };
        self.push(Cond::Icmp(items, neg));
    }

    /// Interface matches are always conditions (they are not hashed).
    pub fn iface(&mut self, rs: &Ruleset, m: &Match<Iface>, out: bool) {
        let ids = |v: &[Iface]| -> Arc<[u32]> { v.iter().map(|i| i.0).collect() };
        let (pats, neg) = match *m {
            Match::Any => return,
            Match::Is(i) => (ids(&[i]), false),
            Match::Not(i) => (ids(&[i]), true),
            Match::In(s) => (ids(rs.set::<Iface>(s)), false),
            Match::NotIn(s) => (ids(rs.set::<Iface>(s)), true),
        };
        self.push(if out {
            Cond::OutIf(pats, neg)
        } else {
            Cond::InIf(pats, neg)
        });
    }

    /// Whether `p` meets every condition of span `span`.
    pub fn hold(&self, span: u32, p: &Packet, ifs: &Ifaces) -> bool {
        let (start, len) = self.spans[span as usize];
        self.conds[start as usize..(start + len) as usize]
            .iter()
            .all(|c| Self::holds(c, p, ifs))
    }

    fn holds(c: &Cond, p: &Packet, ifs: &Ifaces) -> bool {
        match c {
            Cond::Src(s, neg) => s.contains(p.src.into()) != *neg,
            Cond::Dst(s, neg) => s.contains(p.dst.into()) != *neg,
            Cond::Proto(bits, neg) => {
                (bits[usize::from(p.proto / 64)] & (1 << (p.proto % 64)) != 0) != *neg
            }
            Cond::Sport(s, neg) => s.contains(p.sport) != *neg,
            Cond::Dport(s, neg) => s.contains(p.dport) != *neg,
            Cond::Icmp(items, neg) => {
                let hit = items.iter().any(|t| t.matches(p.sport, p.dport));
                p.proto == 1 && hit != *neg
            }
            Cond::InIf(pats, neg) => ifs.any(p.in_if, pats) != *neg,
            Cond::OutIf(pats, neg) => ifs.any(p.out_if, pats) != *neg,
            Cond::State(s) => s.contains(p.state),
            Cond::Flags(f) => p.proto == 6 && f.matches(p.tcp_flags),
        }
    }

    /// Heap bytes, roughly.
    pub fn bytes(&self) -> usize {
        let sets: usize = self
            .conds
            .iter()
            .map(|c| match c {
                Cond::Src(s, _) | Cond::Dst(s, _) => s.len() * 8,
                Cond::Sport(s, _) | Cond::Dport(s, _) => s.len() * 4,
                Cond::Icmp(v, _) => v.len() * 4,
                Cond::InIf(v, _) | Cond::OutIf(v, _) => v.len() * 4,
                _ => 0,
            })
            .sum();
        self.conds.capacity() * core::mem::size_of::<Cond>() + self.spans.capacity() * 8 + sets
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[allow(unused_imports)]
    use alloc::{string::ToString, vec, vec::Vec};

    #[test]
    fn intervals_merge_and_search() {
        let s = Intervals::new(alloc::vec![(10u16, 20), (15, 30), (40, 40), (0, 1)]);
        assert_eq!(&*s.0, &[(0, 1), (10, 30), (40, 40)]);
        for (x, hit) in [
            (0, true),
            (2, false),
            (10, true),
            (30, true),
            (31, false),
            (40, true),
            (41, false),
        ] {
            assert_eq!(s.contains(x), hit, "{x}");
        }
        assert!(!Intervals::<u16>::new(alloc::vec![]).contains(0));
    }

    #[test]
    fn wildcard_interfaces() {
        let mut ifs = Ifaces::new(alloc::vec![
            IfName {
                name: "eth".into(),
                wildcard: true
            },
            IfName {
                name: "eth0".into(),
                wildcard: false
            },
        ]);
        let (e0, e1, lo) = (ifs.id("eth0"), ifs.id("eth1"), ifs.id("lo"));
        assert_eq!(ifs.id("eth1"), e1);
        assert!(ifs.matches(e0, 0) && ifs.matches(e0, 1));
        assert!(ifs.matches(e1, 0) && !ifs.matches(e1, 1));
        assert!(!ifs.matches(lo, 0) && !ifs.matches(IfId::NONE, 0));
    }
}
