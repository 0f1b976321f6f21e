//! A rule into entries: the cross product of its positive values (a set of sources
//! times a set of ports is one entry per pair, all with the rule's index, so the first
//! that matches is the rule matching), plus conditions for the rest (negations,
//! interfaces, states, TCP flags). A product above [`EXPAND_MAX`] expands only its
//! largest set and checks the others as conditions, so a rule never becomes more
//! entries than its largest set has elements.

use alloc::vec::Vec;
use core::slice::from_ref;

use crate::rule::{Element, IcmpType, Match, PortRange, Prefix, Rule, Ruleset};

use super::cond::{Cond, Conds};
use super::tuples::{Entry, ANY_PROTO, NO_COND, TRANSPORT};

/// The most entries a rule's sets multiply into before only the largest is expanded.
pub const EXPAND_MAX: usize = 4096;

/// The values a field's positive match allows (`any` when it allows everything or
/// only excludes).
fn values<'a, T: Element>(rs: &'a Ruleset, m: &'a Match<T>, any: &'a [T]) -> &'a [T] {
    match m {
        Match::Is(x) => from_ref(x),
        Match::In(s) => rs.set::<T>(*s),
        _ => any,
    }
}

const ANY_PREFIX: &[Prefix] = &[Prefix::ANY];
const ANY_PORT: &[PortRange] = &[PortRange::ANY];
const ANY_PROTO_LIST: &[u8] = &[0];
const NO_ICMP: &[IcmpType] = &[];

/// How one rule becomes entries.
pub(crate) struct Plan<'a> {
    rule: &'a Rule,
    src: &'a [Prefix],
    dst: &'a [Prefix],
    proto: &'a [u8],
    sport: &'a [PortRange],
    dport: &'a [PortRange],
    icmp: &'a [IcmpType],
    /// Which of src, dst, proto, sport, dport, icmp are checked as conditions instead.
    as_cond: [bool; 6],
    any_proto: bool,
}

impl<'a> Plan<'a> {
    pub fn new(rs: &'a Ruleset, r: &'a Rule) -> Plan<'a> {
        let any_proto = !matches!(r.proto, Match::Is(_) | Match::In(_));
        let mut p = Plan {
            rule: r,
            src: values(rs, &r.src, ANY_PREFIX),
            dst: values(rs, &r.dst, ANY_PREFIX),
            proto: values(rs, &r.proto, ANY_PROTO_LIST),
            sport: values(rs, &r.sport, ANY_PORT),
            dport: values(rs, &r.dport, ANY_PORT),
            icmp: values(rs, &r.icmp, NO_ICMP),
            as_cond: [false; 6],
            any_proto,
        };
        if p.count() > EXPAND_MAX {
            let sizes = p.sizes();
            let largest = (0..6).max_by_key(|&i| sizes[i]).unwrap_or(0);
            for (i, &n) in sizes.iter().enumerate() {
                if i != largest && n > 1 {
                    p.as_cond[i] = true;
                }
            }
            if p.as_cond[0] {
                p.src = ANY_PREFIX;
            }
            if p.as_cond[1] {
                p.dst = ANY_PREFIX;
            }
            if p.as_cond[2] {
                (p.proto, p.any_proto) = (ANY_PROTO_LIST, true);
            }
            if p.as_cond[3] {
                p.sport = ANY_PORT;
            }
            if p.as_cond[4] {
                p.dport = ANY_PORT;
            }
            if p.as_cond[5] {
                p.icmp = NO_ICMP;
            }
        }
        p
    }

    fn icmp_rule(&self) -> bool {
        matches!(self.rule.icmp, Match::Is(_) | Match::In(_))
    }

    fn sizes(&self) -> [usize; 6] {
        [
            self.src.len(),
            self.dst.len(),
            self.proto.len(),
            self.sport.len(),
            self.dport.len(),
            if self.icmp_rule() && !self.as_cond[5] {
                self.icmp.len()
            } else {
                1
            },
        ]
    }

    /// The entries it makes (0 when a positive set is empty: the rule never matches).
    pub fn count(&self) -> usize {
        self.sizes()
            .iter()
            .fold(1usize, |a, &n| a.saturating_mul(n))
    }

    /// Appends its entries (with index `index`) to `out`, its conditions to `conds`.
    pub fn emit(&self, rs: &Ruleset, index: u32, conds: &mut Conds, out: &mut Vec<Entry>) {
        let r = self.rule;
        let start = conds.begin();
        let c = self.as_cond;
        conds.prefixes(rs, &r.src, false, c[0]);
        conds.prefixes(rs, &r.dst, true, c[1]);
        conds.proto(rs, &r.proto, c[2]);
        conds.ports(rs, &r.sport, false, c[3]);
        conds.ports(rs, &r.dport, true, c[4]);
        conds.icmp(rs, &r.icmp, c[5]);
        conds.iface(rs, &r.in_if, false);
        conds.iface(rs, &r.out_if, true);
        if let Some(s) = r.state {
            conds.push(Cond::State(s));
        }
        if let Some(f) = r.tcp_flags {
            conds.push(Cond::Flags(f));
        }
        let cond = conds.finish(start).unwrap_or(NO_COND);
        if self.count() == 0 {
            return;
        }
        let flags = if self.any_proto { ANY_PROTO } else { 0 }
            | if r.needs_transport() { TRANSPORT } else { 0 };
        // ICMP type and code travel in the port fields.
        let icmp: Vec<((u16, u16), (u16, u16))> = match self.icmp_rule() && !c[5] {
            true => self
                .icmp
                .iter()
                .map(|t| {
                    let code = t.code.map_or((0, u16::MAX), |c| (c.into(), c.into()));
                    ((t.ty.into(), t.ty.into()), code)
                })
                .collect(),
            false => Vec::new(),
        };
        for s in self.src {
            for d in self.dst {
                for &p in self.proto {
                    let mut push = |sport: (u16, u16), dport: (u16, u16)| {
                        out.push(Entry {
                            src: s.bits(),
                            dst: d.bits(),
                            sport,
                            dport,
                            rule: index,
                            cond,
                            slen: s.len(),
                            dlen: d.len(),
                            proto: p,
                            flags,
                        })
                    };
                    if self.icmp_rule() && !c[5] {
                        for &(t, code) in &icmp {
                            push(t, code);
                        }
                    } else {
                        for sp in self.sport {
                            for dp in self.dport {
                                push((sp.lo, sp.hi), (dp.lo, dp.hi));
                            }
                        }
                    }
                }
            }
        }
    }
}
