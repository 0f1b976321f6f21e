//! Benchmark rule sets and packet traces, ClassBench-style (Taylor & Turner, "ClassBench:
//! a packet classification benchmark", IEEE/ACM ToN 2007), from a seed.
//!
//! [`rules`] draws a FORWARD chain of N rules from one of three families shaped after
//! ClassBench's published seed statistics: `acl` (access lists: specific destinations,
//! TCP to exact ports), `fw` (firewalls: many wildcards, mixed protocols and port
//! classes) and `ipc` (IP chains: specific pairs both ways). Per rule, independently:
//!
//! 1. the protocol, from the family's mix of TCP, UDP, ICMP and any ([`family`]);
//! 2. for TCP and UDP, a port-class pair (source, destination) from WC (wildcard), HI
//!    (1024:65535), LO (0:1023), AR (an arbitrary range, from a list of ranges real
//!    sets use) and EM (one port, well-known ports weighted by use); for ICMP a type
//!    (and sometimes a code);
//! 3. a (source, destination) prefix-length pair from the family's list of pairs. At
//!    most [`WIDE_MAX`] rules of a set get a wide pair (lengths summing to less than
//!    24): such a rule covers a whole protocol or port class and shadows every later
//!    rule it overlaps, so large real sets have few (ClassBench's generator reaches the
//!    same by growing its address trees with the set), and they go last, as people
//!    order general rules after specific ones. A rule with no port or ICMP type gets a
//!    pair with a /24 or longer;
//! 4. the addresses: a /16 "site" from a pool of sites (sources and destinations have
//!    their own pools, of N/16 and N/32 sites, at least 16), then random low bits, so
//!    rules cluster in a few networks and their prefixes nest and overlap, as in real
//!    sets. First octets avoid 0, 100 (the namespaces' links), 127, 169 and 224-255, so
//!    every address is routable unicast;
//! 5. the action, from the family's mix of ACCEPT, DROP and REJECT.
//!
//! With `stateful`, the first rule is `-m conntrack --ctstate RELATED,ESTABLISHED -j
//! ACCEPT`, as in most real firewalls. The same seed gives the same set on every
//! machine (SplitMix64, `vtnt_rng::Rng`).
//!
//! [`trace`] draws packet headers that hit a rule set, as ClassBench's trace_generator:
//! a rule at random, a header inside it (a corner of each field's range half the time,
//! a point within otherwise), repeated a Pareto-distributed number of times (shape 1,
//! scale `locality`: 0 no repetition, 1 long bursts) for locality of reference.

mod datagram;
mod family;

use alloc::vec::Vec;
use core::net::Ipv4Addr;

use hashbrown::HashTable;
use vtnt_rng::Rng;

use crate::hash::hash2;

use crate::rule::{
    Action, CtState, Hook, IcmpType, Match, PortRange, Prefix, RejectWith, Rule, Ruleset, StateSet,
    Target,
};

pub use datagram::datagram;
pub use family::Family;
use family::{Ports, Weighted};

/// Rules of a set that may have a wide prefix pair (see the module documentation).
pub const WIDE_MAX: usize = 16;

fn prefix_len(m: &Match<Prefix>) -> u8 {
    match m {
        Match::Is(p) => p.len(),
        _ => 0,
    }
}

/// What rule set to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleSpec {
    /// Rules in the FORWARD chain (the state rule included).
    pub rules: usize,
    pub seed: u64,
    pub family: Family,
    /// The first rule accepts RELATED and ESTABLISHED packets.
    pub stateful: bool,
    /// The FORWARD chain's policy.
    pub policy: Action,
}

impl RuleSpec {
    pub fn new(rules: usize, seed: u64) -> RuleSpec {
        RuleSpec {
            rules,
            seed,
            family: Family::Fw,
            stateful: false,
            policy: Action::Drop,
        }
    }
}

/// A uniform draw in `[0, 1)`.
fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// One of `items` by weight (weights need not sum to 1).
fn pick<T: Copy>(rng: &mut Rng, items: &[Weighted<T>]) -> T {
    let total: f64 = items.iter().map(|w| w.0).sum();
    let mut x = unit(rng) * total;
    for &(w, v) in items {
        if x < w {
            return v;
        }
        x -= w;
    }
    items[items.len() - 1].1
}

/// A routable unicast first octet (see the module documentation).
fn first_octet(rng: &mut Rng) -> u32 {
    loop {
        let o = 1 + rng.below(223) as u32;
        if !matches!(o, 100 | 127 | 169) {
            return o;
        }
    }
}

/// A routable unicast address: a random one, or one in a site of `sites`.
fn address(rng: &mut Rng, sites: &[u32]) -> u32 {
    match sites.is_empty() {
        true => first_octet(rng) << 24 | (rng.next_u64() as u32 & 0x00ff_ffff),
        false => sites[rng.below(sites.len() as u64) as usize] | (rng.next_u64() as u32 & 0xffff),
    }
}

fn pool(rng: &mut Rng, n: usize) -> Vec<u32> {
    (0..n)
        .map(|_| first_octet(rng) << 24 | (rng.next_u64() as u32 & 0x00ff_0000))
        .collect()
}

fn ports(rng: &mut Rng, class: Ports, fam: Family) -> Match<PortRange> {
    match class {
        Ports::Wc => Match::Any,
        Ports::Hi => Match::Is(PortRange {
            lo: 1024,
            hi: 65535,
        }),
        Ports::Lo => Match::Is(PortRange { lo: 0, hi: 1023 }),
        Ports::Ar => Match::Is(pick(rng, fam.ranges())),
        Ports::Em => Match::Is(PortRange::one(
            pick(rng, family::EXACT_PORTS).unwrap_or_else(|| 1024 + rng.below(64512) as u16),
        )),
    }
}

/// Draws a rule set (see the module documentation).
pub fn rules(spec: &RuleSpec) -> Ruleset {
    let mut rng = Rng::new(spec.seed);
    let fam = spec.family;
    let src_sites = pool(&mut rng, (spec.rules / 16).max(16));
    let dst_sites = pool(&mut rng, (spec.rules / 32).max(16));
    let mut rs = Ruleset::filter();
    let fwd = rs
        .hook_chain(Hook::Forward)
        .unwrap_or(crate::rule::ChainId(1));
    let chain = rs.chain_mut(fwd);
    chain.policy = spec.policy;
    chain.rules.reserve(spec.rules);
    // The matches drawn so far: a rule that matches exactly what an earlier one does is
    // drawn again (ClassBench removes such redundant rules too).
    let mut seen: HashTable<[u64; 4]> = HashTable::new();
    // Wide pairs (lengths summing to less than 24): at most WIDE_MAX rules have one.
    let narrow: Vec<Weighted<(u8, u8)>> = fam
        .prefix_pairs()
        .iter()
        .copied()
        .filter(|&(_, (s, d))| s + d >= 24)
        .collect();
    let mut wide = 0;
    for i in 0..spec.rules {
        if i == 0 && spec.stateful {
            let mut r = Rule::new(Target::Verdict(Action::Accept));
            r.state = Some(
                StateSet::default()
                    .with(CtState::Related)
                    .with(CtState::Established),
            );
            chain.rules.push(r);
            continue;
        }
        let pairs = if wide < WIDE_MAX {
            fam.prefix_pairs()
        } else {
            &narrow
        };
        let mut r = draw_rule(&mut rng, fam, pairs, &src_sites, &dst_sites);
        for _ in 0..64 {
            let f = fingerprint(&r);
            let hash =
                |g: &[u64; 4]| hash2(g[0] ^ g[2].rotate_left(40), g[1] ^ g[3].rotate_left(17));
            if seen.find(hash(&f), |g| *g == f).is_none() {
                seen.insert_unique(hash(&f), f, hash);
                break;
            }
            r = draw_rule(&mut rng, fam, pairs, &src_sites, &dst_sites);
        }
        wide += usize::from(prefix_len(&r.src) + prefix_len(&r.dst) < 24);
        chain.rules.push(r);
    }
    // Specific rules before general ones, as people order them.
    let first = usize::from(spec.stateful).min(chain.rules.len());
    chain.rules[first..].sort_by_key(|r| prefix_len(&r.src) + prefix_len(&r.dst) < 24);
    rs
}

/// What a drawn rule matches, packed (its fields are `Any` or `Is`; `Any` is the /0
/// prefix and the whole port range, which match the same).
fn fingerprint(r: &Rule) -> [u64; 4] {
    let pfx = |m: &Match<Prefix>| match m {
        Match::Is(p) => u64::from(p.bits()) << 8 | u64::from(p.len()),
        _ => 0,
    };
    let ports = |m: &Match<PortRange>| match m {
        Match::Is(p) => u64::from(p.lo) << 16 | u64::from(p.hi),
        _ => 0xffff,
    };
    let proto = match r.proto {
        Match::Is(p) => u64::from(p) + 1,
        _ => 0,
    };
    let icmp = match r.icmp {
        Match::Is(t) => 1 << 16 | u64::from(t.ty) << 8 | t.code.map_or(0x8000, u64::from),
        _ => 0,
    };
    [
        pfx(&r.src),
        pfx(&r.dst),
        proto << 32 | icmp,
        ports(&r.sport) << 32 | ports(&r.dport),
    ]
}

/// One rule of family `fam`, its prefix lengths from `pairs`, its addresses from the
/// site pools.
fn draw_rule(
    rng: &mut Rng,
    fam: Family,
    pairs: &[Weighted<(u8, u8)>],
    src_sites: &[u32],
    dst_sites: &[u32],
) -> Rule {
    let mut r = Rule::new(Target::Verdict(pick(rng, fam.actions())));
    let proto = pick(rng, fam.protocols());
    r.proto = proto.map_or(Match::Any, Match::Is);
    match proto {
        Some(6 | 17) => {
            let (s, d) = pick(rng, fam.port_pairs());
            r.sport = ports(rng, s, fam);
            r.dport = ports(rng, d, fam);
        }
        Some(1) => {
            let ty = pick(rng, family::ICMP_TYPES);
            let code = (ty == 3 && rng.below(2) == 0).then(|| rng.below(4) as u8);
            r.icmp = Match::Is(IcmpType { ty, code });
        }
        _ => {}
    }
    if let Target::Verdict(Action::Reject(_)) = r.target {
        if proto == Some(6) && rng.below(2) == 0 {
            r.target = Target::Verdict(Action::Reject(RejectWith::TcpReset));
        }
    }
    // No catch-all in the middle of a set: a rule with no port or ICMP type names a /24
    // or longer on one side at least (other pairs are drawn again).
    let open = r.sport.is_any() && r.dport.is_any() && r.icmp.is_any();
    let (mut sl, mut dl) = pick(rng, pairs);
    while open && sl.max(dl) < 24 {
        (sl, dl) = pick(rng, pairs);
    }
    let s = Prefix::new(Ipv4Addr::from(address(rng, src_sites)), sl);
    let d = Prefix::new(Ipv4Addr::from(address(rng, dst_sites)), dl);
    r.src = s.filter(|p| !p.is_any()).map_or(Match::Any, Match::Is);
    r.dst = d.filter(|p| !p.is_any()).map_or(Match::Any, Match::Is);
    r
}

/// A packet header of a trace, and the rule it was drawn from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub proto: u8,
    /// TCP/UDP ports; ICMP type and code.
    pub sport: u16,
    pub dport: u16,
    /// The index (in the chain drawn from) of the rule it was drawn to hit.
    pub rule: u32,
}

impl core::fmt::Display for Header {
    /// ClassBench's trace line: source, destination, ports, protocol, rule (tabs).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (s, d, p, q, pr, r) = (
            self.src, self.dst, self.sport, self.dport, self.proto, self.rule,
        );
        write!(f, "{s}\t{d}\t{p}\t{q}\t{pr}\t{r}")
    }
}

/// What trace to draw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceSpec {
    pub packets: usize,
    pub seed: u64,
    /// Pareto scale `b` of the burst length (shape 1): 0 (each header once) to 1.
    pub locality: f64,
}

/// A value in `lo..=hi`: an end half the time (ClassBench's corners), else uniform.
fn within(rng: &mut Rng, lo: u32, hi: u32) -> u32 {
    match rng.below(4) {
        0 => lo,
        1 => hi,
        _ => lo + rng.below(u64::from(hi - lo) + 1) as u32,
    }
}

/// A value `m` allows (`bounds`: an element's range; `any`: a value of the whole
/// field), or `None` when a set is empty or tries miss a negation.
fn draw<T: crate::rule::Element + Copy>(
    rng: &mut Rng,
    rs: &Ruleset,
    m: &Match<T>,
    bounds: impl Fn(&T) -> (u32, u32),
    any: impl Fn(&mut Rng) -> u32,
) -> Option<u32> {
    let inside = |rng: &mut Rng, x: &T| {
        let (lo, hi) = bounds(x);
        within(rng, lo, hi)
    };
    match m {
        Match::Any => Some(any(rng)),
        Match::Is(x) => Some(inside(rng, x)),
        Match::In(s) => {
            let set = rs.set::<T>(*s);
            let k = rng.below(set.len() as u64) as usize;
            set.get(k).map(|x| inside(rng, x))
        }
        Match::Not(_) | Match::NotIn(_) => (0..16).find_map(|_| {
            let v = any(rng);
            rs.matches(m, |x| {
                let (lo, hi) = bounds(x);
                (lo..=hi).contains(&v)
            })
            .then_some(v)
        }),
    }
}

/// Draws a header that `r` matches (its interfaces and state aside), if one is found.
fn header(rng: &mut Rng, rs: &Ruleset, r: &Rule, index: u32) -> Option<Header> {
    let addr = |rng: &mut Rng| address(rng, &[]);
    let pfx = |p: &Prefix| (p.bits(), p.last());
    let src = draw(rng, rs, &r.src, pfx, addr)?;
    let dst = draw(rng, rs, &r.dst, pfx, addr)?;
    let proto = draw(
        rng,
        rs,
        &r.proto,
        |p| (u32::from(*p), u32::from(*p)),
        |rng| [6, 17, 1, 47][rng.below(4) as usize],
    )? as u8;
    let port = |p: &PortRange| (u32::from(p.lo), u32::from(p.hi));
    let any_port = |rng: &mut Rng| rng.below(65536) as u32;
    let (sport, dport) = match proto {
        6 | 17 => (
            draw(rng, rs, &r.sport, port, any_port)? as u16,
            draw(rng, rs, &r.dport, port, any_port)? as u16,
        ),
        1 => {
            let ty = draw(
                rng,
                rs,
                &r.icmp,
                |t| (u32::from(t.ty), u32::from(t.ty)),
                |rng| [0, 3, 8, 11][rng.below(4) as usize],
            )? as u16;
            let code = match r.icmp {
                Match::Is(IcmpType { code: Some(c), .. }) => u16::from(c),
                _ => rng.below(4) as u16,
            };
            (ty, code)
        }
        _ => (0, 0),
    };
    Some(Header {
        src: src.into(),
        dst: dst.into(),
        proto,
        sport,
        dport,
        rule: index,
    })
}

/// Draws a trace of `spec.packets` headers hitting the rules of `rs`'s FORWARD chain
/// (see the module documentation). Rules no header can be drawn for (a negation the
/// draws keep missing) are passed over; an empty chain gives an empty trace.
pub fn trace(rs: &Ruleset, spec: &TraceSpec) -> Vec<Header> {
    let mut rng = Rng::new(spec.seed ^ 0x7472_6163_6500_0000);
    let Some(fwd) = rs.hook_chain(Hook::Forward) else {
        return Vec::new();
    };
    let rules = &rs.chain(fwd).rules;
    let drawable: Vec<usize> = (0..rules.len())
        .filter(|&i| matches!(rules[i].target, Target::Verdict(_)) && rules[i].state.is_none())
        .collect();
    let mut out = Vec::with_capacity(spec.packets);
    let mut misses = 0;
    while out.len() < spec.packets && !drawable.is_empty() && misses < 1000 {
        let i = drawable[rng.below(drawable.len() as u64) as usize];
        let Some(h) = header(&mut rng, rs, &rules[i], i as u32) else {
            misses += 1;
            continue;
        };
        let b = spec.locality.clamp(0.0, 1.0);
        let copies = match b > 0.0 {
            // Pareto with shape 1: b / (1 - u), rounded up, at most a tenth of the trace.
            true => {
                let x = b / (1.0 - unit(&mut rng));
                let c = x as usize;
                (c + usize::from((c as f64) < x)).clamp(1, (spec.packets / 10).max(1))
            }
            false => 1,
        };
        for _ in 0..copies.min(spec.packets - out.len()) {
            out.push(h);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[allow(unused_imports)]
    use alloc::{string::ToString, vec, vec::Vec};

    #[test]
    fn the_same_seed_draws_the_same_set() {
        let spec = RuleSpec::new(500, 7);
        assert_eq!(rules(&spec), rules(&spec));
        assert_ne!(rules(&spec), rules(&RuleSpec::new(500, 8)));
        let rs = rules(&spec);
        assert_eq!(rs.rule_count(), 500);
        rs.check().unwrap();
        for n in [0, 1] {
            let spec = RuleSpec {
                stateful: true,
                ..RuleSpec::new(n, 7)
            };
            assert_eq!(rules(&spec).rule_count(), n);
            assert!(trace(
                &rules(&spec),
                &TraceSpec {
                    packets: 10,
                    seed: 1,
                    locality: 1.0
                }
            )
            .is_empty());
        }
    }

    #[test]
    fn every_header_matches_its_rule() {
        for family in [Family::Acl, Family::Fw, Family::Ipc] {
            let spec = RuleSpec {
                family,
                stateful: true,
                ..RuleSpec::new(300, 3)
            };
            let rs = rules(&spec);
            let lin = crate::Linear::new(&rs);
            let t = trace(
                &rs,
                &TraceSpec {
                    packets: 2000,
                    seed: 1,
                    locality: 0.1,
                },
            );
            assert_eq!(t.len(), 2000);
            let fwd = rs.hook_chain(Hook::Forward).unwrap();
            for h in &t {
                let p = crate::Packet {
                    src: h.src,
                    dst: h.dst,
                    proto: h.proto,
                    sport: h.sport,
                    dport: h.dport,
                    tcp_flags: 0x10,
                    fragment: false,
                    in_if: crate::IfId::NONE,
                    out_if: crate::IfId::NONE,
                    state: CtState::New,
                };
                let r = &rs.chain(fwd).rules[h.rule as usize];
                assert!(lin.rule_matches(r, &p), "{h} misses {r:?}");
            }
        }
    }
}
