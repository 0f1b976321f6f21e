//! The reference: a straightforward, rule-by-rule evaluation of a [`Ruleset`], in
//! iptables' order (first match, jumps, returns, the base chain's policy). It shares no
//! matching code with the compiled classifier, so the differential tests
//! (`tests/differential.rs`) compare two independent readings of the same rules. Its
//! cost grows with the rule count; nothing but tests and `vtnt fw classify` use it.

use alloc::string::String;
use alloc::vec::Vec;

use crate::packet::{IfId, Packet};
use crate::rule::{Action, ChainId, Hook, Match, Rule, Ruleset, Target};
use crate::{RuleRef, Verdict};

/// Jumps deeper than this are refused when a ruleset is checked (iptables allows any
/// depth without a loop; real rule sets nest a handful).
pub const MAX_DEPTH: usize = 64;

/// Evaluates a ruleset rule by rule.
#[derive(Debug)]
pub struct Linear<'a> {
    rules: &'a Ruleset,
    ifaces: Vec<String>,
}

impl<'a> Linear<'a> {
    /// The ruleset must have passed [`Ruleset::check`] (no loops, known chains).
    pub fn new(rules: &'a Ruleset) -> Linear<'a> {
        Linear {
            rules,
            ifaces: Vec::new(),
        }
    }

    /// The id packets use for interface `name` (registered in the same order, the
    /// compiled classifier gives the same ids).
    pub fn interface(&mut self, name: &str) -> IfId {
        let i = match self.ifaces.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                self.ifaces.push(name.into());
                self.ifaces.len() - 1
            }
        };
        IfId(i as u16)
    }

    fn iface_matches(&self, m: &Match<crate::rule::Iface>, id: IfId) -> bool {
        let name = self.ifaces.get(usize::from(id.0));
        self.rules.matches(m, |pat| {
            name.is_some_and(|n| self.rules.ifaces[pat.0 as usize].matches(n))
        })
    }

    /// Whether `r` matches `p`, field by field.
    pub fn rule_matches(&self, r: &Rule, p: &Packet) -> bool {
        let rs = self.rules;
        let (src, dst) = (u32::from(p.src), u32::from(p.dst));
        if p.fragment && r.needs_transport() {
            return false;
        }
        rs.matches(&r.src, |x| x.contains(src))
            && rs.matches(&r.dst, |x| x.contains(dst))
            && rs.matches(&r.proto, |x| *x == p.proto)
            && rs.matches(&r.sport, |x| x.contains(p.sport))
            && rs.matches(&r.dport, |x| x.contains(p.dport))
            && (r.icmp.is_any() || p.proto == 1)
            && rs.matches(&r.icmp, |x| x.matches(p.sport, p.dport))
            && self.iface_matches(&r.in_if, p.in_if)
            && self.iface_matches(&r.out_if, p.out_if)
            && r.state.is_none_or(|s| s.contains(p.state))
            && r.tcp_flags
                .is_none_or(|f| p.proto == 6 && f.matches(p.tcp_flags))
    }

    /// The verdict for `p` entering at `hook` (ACCEPT where the table has no such chain).
    pub fn classify(&self, hook: Hook, p: &Packet) -> Verdict {
        let Some(base) = self.rules.hook_chain(hook) else {
            return Verdict {
                action: Action::Accept,
                rule: None,
            };
        };
        let policy = Verdict {
            action: self.rules.chain(base).policy,
            rule: None,
        };
        let mut stack: Vec<(ChainId, usize)> = Vec::new();
        let (mut chain, mut next) = (base, 0);
        loop {
            let rules = &self.rules.chain(chain).rules;
            let hit = (next..rules.len()).find(|&i| self.rule_matches(&rules[i], p));
            match hit.map(|i| (i, rules[i].target)) {
                Some((i, Target::Verdict(action))) => {
                    return Verdict {
                        action,
                        rule: Some(RuleRef {
                            chain,
                            index: i as u32,
                        }),
                    }
                }
                Some((i, Target::Jump(c))) => {
                    stack.push((chain, i + 1));
                    (chain, next) = (c, 0);
                }
                Some((_, Target::Goto(c))) => (chain, next) = (c, 0),
                Some((i, Target::Continue)) => next = i + 1,
                Some((_, Target::Return)) | None => match stack.pop() {
                    Some(at) => (chain, next) = at,
                    None => return policy,
                },
            }
        }
    }
}
