//! A [`Ruleset`] as the nft ruleset a user would write for speed ([`nft_sets`]): rules
//! with the same verdict and the same matched fields (addresses, protocol, ports;
//! nothing else) become one rule that looks the packet's fields up in a set of
//! concatenated intervals (`ip saddr . ip daddr . meta l4proto . th sport . th dport
//! @sN`), which the kernel matches in one lookup (its pipapo set). First-match order stays
//! exact: inside a set every rule says the same, and a rule moves up into an earlier set
//! only past rules of other verdicts that no packet matches together with it (see
//! [`runs`] for the bounds that keep this linear). A rule wholly inside an earlier
//! element of its set is dropped (it can never decide); one that only overlaps one
//! starts a new set (nft refuses overlapping intervals). Other rules, and chains without a hook, print as [`super::nft`]
//! prints them.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use super::{nft_ports, nft_prefix, nft_rule, nft_table, PrintError};
use crate::rule::{Match, PortRange, Prefix, Rule, Ruleset, Target};

/// The fields a set rule can look up, in concatenation order.
const FIELDS: [(&str, &str); 5] = [
    ("ip saddr", "ipv4_addr"),
    ("ip daddr", "ipv4_addr"),
    ("meta l4proto", "inet_proto"),
    ("th sport", "inet_service"),
    ("th dport", "inet_service"),
];

/// A rule's fields as closed intervals, `None` where it matches anything.
type Key = [Option<(u32, u32)>; 5];

/// The rule's intervals, if it is a verdict on single values of [`FIELDS`] alone.
fn key(r: &Rule) -> Option<Key> {
    let plain = matches!(r.target, Target::Verdict(_))
        && r.icmp.is_any()
        && r.in_if.is_any()
        && r.out_if.is_any()
        && r.state.is_none()
        && r.tcp_flags.is_none();
    if !plain {
        return None;
    }
    let prefix = |m: &Match<Prefix>| match m {
        Match::Any => Some(None),
        Match::Is(p) => Some(Some((p.bits(), p.last()))),
        _ => None,
    };
    let port = |m: &Match<PortRange>| match m {
        Match::Any => Some(None),
        Match::Is(p) => Some(Some((u32::from(p.lo), u32::from(p.hi)))),
        _ => None,
    };
    let proto = match r.proto {
        Match::Any => None,
        Match::Is(p) => Some((u32::from(p), u32::from(p))),
        _ => return None,
    };
    Some([
        prefix(&r.src)?,
        prefix(&r.dst)?,
        proto,
        port(&r.sport)?,
        port(&r.dport)?,
    ])
}

/// Which fields a key matches on: rules merge only with rules of the same shape.
fn shape(k: &Key) -> [bool; 5] {
    k.map(|f| f.is_some())
}

/// Whether some packet matches both keys (of one shape).
fn overlaps(a: &Key, b: &Key) -> bool {
    a.iter().zip(b).all(|(x, y)| match (x, y) {
        (Some(x), Some(y)) => x.0 <= y.1 && y.0 <= x.1,
        _ => true,
    })
}

/// Whether every packet `inner` matches, `outer` matches too.
fn within(inner: &Key, outer: &Key) -> bool {
    inner.iter().zip(outer).all(|(i, o)| match (i, o) {
        (Some(i), Some(o)) => o.0 <= i.0 && i.1 <= o.1,
        _ => true,
    })
}

/// One printed rule of a base chain: the chain's rules it stands for, in order.
struct Group {
    rules: Vec<usize>,
    keys: Vec<Key>,
}

/// Per chain (by index), per printed rule, the chain's rules it stands for (a rule
/// dropped as unreachable stands in no list).
pub type Groups = Vec<Vec<Vec<usize>>>;

/// `rs` as an nft ruleset with sets, and which rules each printed rule stands for.
pub fn nft_sets(rs: &Ruleset) -> Result<(String, Groups), PrintError> {
    let runs: Vec<Vec<Group>> = rs.chains.iter().map(|c| runs(&c.rules)).collect();
    let mut sets = String::new();
    let mut set_count = 0;
    let mut lines: Vec<Vec<String>> = Vec::new();
    for (c, runs) in rs.chains.iter().zip(&runs) {
        let mut ls = Vec::new();
        for run in runs {
            let first = &c.rules[run.rules[0]];
            if run.keys.len() < 2 {
                ls.push(nft_rule(rs, c, run.rules[0], first)?);
                continue;
            }
            let on: Vec<usize> = (0..5).filter(|&f| run.keys[0][f].is_some()).collect();
            let name = alloc::format!("s{set_count}");
            set_count += 1;
            let types: Vec<&str> = on.iter().map(|&f| FIELDS[f].1).collect();
            let _ = write!(
                sets,
                "\tset {name} {{\n\t\ttype {}\n\t\tflags interval\n\t\telements = {{ ",
                types.join(" . ")
            );
            for (n, k) in run.keys.iter().enumerate() {
                let parts: Vec<String> = on.iter().map(|&f| element(f, k[f])).collect();
                let sep = if n == 0 { "" } else { ",\n\t\t\t" };
                let _ = write!(sets, "{sep}{}", parts.join(" . "));
            }
            let _ = writeln!(sets, " }}\n\t}}");
            let verdict = nft_rule(rs, c, run.rules[0], &Rule::new(first.target))?;
            let fields: Vec<&str> = on.iter().map(|&f| FIELDS[f].0).collect();
            ls.push(alloc::format!("{} @{name} {verdict}", fields.join(" . ")));
        }
        lines.push(ls);
    }
    let mut next = lines.into_iter();
    let text = nft_table(rs, &sets, |_| Ok(next.next().unwrap_or_default()))?;
    let groups = runs
        .into_iter()
        .map(|rs| rs.into_iter().map(|r| r.rules).collect())
        .collect();
    Ok((text, groups))
}

/// Keys a set holds at most (each new rule is checked against those of its set).
const RUN_MAX: usize = 512;
/// Keys of other verdicts a rule is checked against, at most, to move it up past them.
const LOOKBACK: usize = 2048;
/// Runs a rule looks back over, at most, for one it may join.
const RUNS_BACK: usize = 256;

/// A chain's rules cut into runs that print as one rule each. A rule joins the latest
/// run of its verdict and shape if no rule of another verdict placed after that run
/// could match a packet it matches (so moving it up changes no verdict), looking back
/// over at most [`LOOKBACK`] such rules in at most [`RUNS_BACK`] runs, and never past a
/// rule that is no key: each rule costs a bounded number of comparisons, so printing
/// is linear in the rule count.
fn runs(rules: &[Rule]) -> Vec<Group> {
    let mut runs: Vec<Group> = Vec::new();
    'rule: for (i, r) in rules.iter().enumerate() {
        if let Some(k) = key(r) {
            let mut budget = LOOKBACK;
            for run in runs.iter_mut().rev().take(RUNS_BACK) {
                let Some(first) = run.keys.first() else {
                    break;
                };
                let same_verdict = rules[run.rules[0]].target == r.target;
                if same_verdict && shape(first) == shape(&k) && run.keys.len() < RUN_MAX {
                    if run.keys.iter().any(|e| within(&k, e)) {
                        continue 'rule;
                    }
                    if !run.keys.iter().any(|e| overlaps(&k, e)) {
                        run.rules.push(i);
                        run.keys.push(k);
                        continue 'rule;
                    }
                    break;
                }
                if same_verdict {
                    continue;
                }
                budget = match budget.checked_sub(run.keys.len()) {
                    Some(b) if !run.keys.iter().any(|e| overlaps(&k, e)) => b,
                    _ => break,
                };
            }
        }
        runs.push(Group {
            rules: alloc::vec![i],
            keys: key(r).into_iter().collect(),
        });
    }
    runs
}

/// One set element of field `f`.
fn element(f: usize, v: Option<(u32, u32)>) -> String {
    let (lo, hi) = v.unwrap_or((0, u32::MAX));
    match f {
        0 | 1 => {
            let len = 32 - (hi - lo).count_ones() as u8;
            nft_prefix(&Prefix::new(lo.into(), len).unwrap_or(Prefix::host(lo.into())))
        }
        2 => alloc::format!("{lo}"),
        _ => nft_ports(&PortRange {
            lo: lo as u16,
            hi: hi as u16,
        }),
    }
}
