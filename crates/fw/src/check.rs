//! What a ruleset must be before anything evaluates it ([`Ruleset::check`]): targets
//! that name chains it has, no jump loops (iptables refuses them too) and no deeper
//! nesting than [`MAX_DEPTH`], at most one base chain per hook, and matches whose
//! protocol allows them (ports need TCP or UDP, an ICMP type ICMP, TCP flags and a TCP
//! reset TCP). The parsers check most of it with a column as they read; this is the
//! whole-table part and the backstop for rulesets made in code.

use alloc::string::String;
use alloc::vec;

use crate::linear::MAX_DEPTH;
use crate::rule::{Action, Match, RejectWith, Rule, Ruleset, Target};

/// Why a ruleset cannot be evaluated; `line` is the rule's (or chain's) line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("a rule jumps to chain number {target}, which the table does not have")]
    NoChain { target: u32, line: u32 },
    #[error("chain `{chain}` is reached again from itself (a jump loop)")]
    Loop { chain: String, line: u32 },
    #[error("jumps nest deeper than {MAX_DEPTH} chains")]
    TooDeep { line: u32 },
    #[error("chains `{first}` and `{second}` are both entered by the {hook} hook")]
    TwoBaseChains {
        hook: &'static str,
        first: String,
        second: String,
        line: u32,
    },
    #[error("a port match needs protocol tcp or udp")]
    PortsNeedTcpOrUdp { line: u32 },
    #[error("an ICMP type match needs protocol icmp")]
    IcmpNeedsIcmp { line: u32 },
    #[error("a TCP flags match needs protocol tcp")]
    FlagsNeedTcp { line: u32 },
    #[error("REJECT with a TCP reset needs protocol tcp")]
    ResetNeedsTcp { line: u32 },
    #[error("a base chain's policy must be ACCEPT or DROP")]
    RejectPolicy { line: u32 },
}

impl Invalid {
    /// The line it is about.
    pub fn line(&self) -> u32 {
        match *self {
            Invalid::NoChain { line, .. }
            | Invalid::Loop { line, .. }
            | Invalid::TooDeep { line }
            | Invalid::TwoBaseChains { line, .. }
            | Invalid::PortsNeedTcpOrUdp { line }
            | Invalid::IcmpNeedsIcmp { line }
            | Invalid::FlagsNeedTcp { line }
            | Invalid::ResetNeedsTcp { line }
            | Invalid::RejectPolicy { line } => line,
        }
    }
}

/// Whether the rule's protocol is exactly `p`.
fn proto_is(r: &Rule, p: u8) -> bool {
    r.proto == Match::Is(p)
}

fn check_rule(r: &Rule) -> Result<(), Invalid> {
    let line = r.line;
    let ports = !r.sport.is_any() || !r.dport.is_any();
    let tcp_or_udp = proto_is(r, 6) || proto_is(r, 17);
    if ports && !tcp_or_udp {
        return Err(Invalid::PortsNeedTcpOrUdp { line });
    }
    if !r.icmp.is_any() && !proto_is(r, 1) {
        return Err(Invalid::IcmpNeedsIcmp { line });
    }
    if r.tcp_flags.is_some() && !proto_is(r, 6) {
        return Err(Invalid::FlagsNeedTcp { line });
    }
    if r.target == Target::Verdict(Action::Reject(RejectWith::TcpReset)) && !proto_is(r, 6) {
        return Err(Invalid::ResetNeedsTcp { line });
    }
    Ok(())
}

impl Ruleset {
    /// Checks what evaluation relies on (see the module documentation).
    pub fn check(&self) -> Result<(), Invalid> {
        let n = self.chains.len();
        for (i, c) in self.chains.iter().enumerate() {
            if let Some(h) = c.hook {
                if let Some(first) = self.chains[..i].iter().find(|d| d.hook == Some(h)) {
                    return Err(Invalid::TwoBaseChains {
                        hook: h.chain_name(),
                        first: first.name.clone(),
                        second: c.name.clone(),
                        line: c.line,
                    });
                }
                if matches!(c.policy, Action::Reject(_)) {
                    return Err(Invalid::RejectPolicy { line: c.line });
                }
            }
            for r in &c.rules {
                check_rule(r)?;
                if let Target::Jump(t) | Target::Goto(t) = r.target {
                    if t.0 as usize >= n {
                        return Err(Invalid::NoChain {
                            target: t.0,
                            line: r.line,
                        });
                    }
                }
            }
        }
        // Depth-first over jump edges: 0 unvisited, 1 on the path, 2 done (with its depth).
        let mut mark = vec![0u8; n];
        let mut depth = vec![0usize; n];
        for start in 0..n {
            self.visit(start, 0, &mut mark, &mut depth)?;
        }
        Ok(())
    }

    /// The deepest nesting below chain `c`, entered at nesting `level` (recursion is
    /// bounded by [`MAX_DEPTH`] however many chains there are).
    fn visit(
        &self,
        c: usize,
        level: usize,
        mark: &mut [u8],
        depth: &mut [usize],
    ) -> Result<usize, Invalid> {
        if mark[c] == 2 {
            return Ok(depth[c]);
        }
        mark[c] = 1;
        let mut deepest = 0;
        for r in &self.chains[c].rules {
            if let Target::Jump(t) | Target::Goto(t) = r.target {
                let t = t.0 as usize;
                if mark[t] == 1 {
                    return Err(Invalid::Loop {
                        chain: self.chains[t].name.clone(),
                        line: r.line,
                    });
                }
                if level + 1 > MAX_DEPTH {
                    return Err(Invalid::TooDeep { line: r.line });
                }
                let d = 1 + self.visit(t, level + 1, mark, depth)?;
                if level + d > MAX_DEPTH {
                    return Err(Invalid::TooDeep { line: r.line });
                }
                deepest = deepest.max(d);
            }
        }
        mark[c] = 2;
        depth[c] = deepest;
        Ok(deepest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::{Chain, ChainId, PortRange};
    #[allow(unused_imports)]
    use alloc::{string::ToString, vec, vec::Vec};

    fn chain(name: &str, rules: Vec<Rule>) -> Chain {
        Chain {
            name: name.into(),
            hook: None,
            policy: Action::Accept,
            rules,
            line: 0,
        }
    }

    #[test]
    fn loops_and_protocols_are_refused() {
        let mut rs = Ruleset::filter();
        rs.chains
            .push(chain("a", vec![Rule::new(Target::Jump(ChainId(4)))]));
        rs.chains
            .push(chain("b", vec![Rule::new(Target::Goto(ChainId(3)))]));
        assert!(
            matches!(rs.check(), Err(Invalid::Loop { .. })),
            "{:?}",
            rs.check()
        );
        rs.chains[4].rules.clear();
        assert_eq!(rs.check(), Ok(()));
        let mut r = Rule::new(Target::Verdict(Action::Drop));
        r.dport = Match::Is(PortRange::one(22));
        r.line = 7;
        rs.chains[1].rules.push(r.clone());
        assert_eq!(rs.check(), Err(Invalid::PortsNeedTcpOrUdp { line: 7 }));
        rs.chains[1].rules[0].proto = Match::Is(6);
        assert_eq!(rs.check(), Ok(()));
    }

    #[test]
    fn nesting_is_bounded() {
        let mut rs = Ruleset::filter();
        for i in 0..=MAX_DEPTH {
            let next = ChainId((4 + i) as u32);
            rs.chains
                .push(chain("c", vec![Rule::new(Target::Jump(next))]));
        }
        rs.chains.push(chain("last", vec![]));
        rs.chains[1].rules.push(Rule::new(Target::Jump(ChainId(3))));
        assert!(matches!(rs.check(), Err(Invalid::TooDeep { .. })));
    }
}
