//! The rule model: what a filter table says, whatever syntax it was read from
//! (`iptables-save`, `nft list ruleset`) and however it is classified (the linear
//! reference in `linear`, the compiled classifier in `classify`).
//!
//! A [`Ruleset`] holds chains; a [`Chain`] holds [`Rule`]s in order and, for a chain a
//! hook enters (INPUT, FORWARD, OUTPUT), a default policy. A rule matches when every one
//! of its fields matches (an absent field matches anything) and then its [`Target`]
//! decides, jumps to another chain, returns, or (no target) lets evaluation go on.
//! Sets (`-s a,b`, `-m multiport`, nft's `{ ... }` and named sets) live once in the
//! ruleset and rules refer to them, so a named set used by many rules is stored once.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::net::Ipv4Addr;

/// An IPv4 prefix (address and length; the bits past the length are zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    addr: u32,
    len: u8,
}

/// The netmask of a prefix length (0..=32).
pub(crate) fn mask(len: u8) -> u32 {
    match len {
        0 => 0,
        l => u32::MAX << (32 - u32::from(l.min(32))),
    }
}

impl Prefix {
    /// Every address.
    pub const ANY: Prefix = Prefix { addr: 0, len: 0 };

    /// `addr/len` with the host bits cleared, as iptables does; `None` past /32.
    pub fn new(addr: Ipv4Addr, len: u8) -> Option<Prefix> {
        (len <= 32).then(|| Prefix {
            addr: u32::from(addr) & mask(len),
            len,
        })
    }
    /// One address (/32).
    pub fn host(addr: Ipv4Addr) -> Prefix {
        Prefix {
            addr: addr.into(),
            len: 32,
        }
    }
    pub fn addr(&self) -> Ipv4Addr {
        self.addr.into()
    }
    pub fn bits(&self) -> u32 {
        self.addr
    }
    /// The prefix length (not a count: there is no `is_empty`).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u8 {
        self.len
    }
    /// Whether this is /0 (every address).
    pub fn is_any(&self) -> bool {
        self.len == 0
    }
    pub fn mask(&self) -> u32 {
        mask(self.len)
    }
    pub fn contains(&self, a: u32) -> bool {
        (a ^ self.addr) & self.mask() == 0
    }
    /// The last address inside.
    pub fn last(&self) -> u32 {
        self.addr | !self.mask()
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr(), self.len)
    }
}

/// The fewest prefixes that cover exactly `first..=last` (at most 62).
pub fn range_prefixes(first: u32, last: u32) -> Vec<Prefix> {
    let mut out = Vec::new();
    let mut a = u64::from(first);
    let end = u64::from(last);
    while a <= end {
        // the largest aligned block at `a` that stays inside
        let mut size = if a == 0 {
            1u64 << 32
        } else {
            a & a.wrapping_neg()
        };
        while a + size - 1 > end {
            size >>= 1;
        }
        out.push(Prefix {
            addr: a as u32,
            len: 32 - size.trailing_zeros() as u8,
        });
        a += size;
    }
    out
}

/// Ports `lo..=hi` (TCP or UDP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    pub const ANY: PortRange = PortRange {
        lo: 0,
        hi: u16::MAX,
    };
    pub fn one(p: u16) -> PortRange {
        PortRange { lo: p, hi: p }
    }
    pub fn contains(&self, p: u16) -> bool {
        (self.lo..=self.hi).contains(&p)
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.lo == self.hi {
            true => write!(f, "{}", self.lo),
            false => write!(f, "{}:{}", self.lo, self.hi),
        }
    }
}

/// An ICMP type, and a code when the match names one (`--icmp-type 3/3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IcmpType {
    pub ty: u8,
    pub code: Option<u8>,
}

impl IcmpType {
    /// Whether a packet whose port fields hold `ty` and `code` (as [`crate::Packet`]
    /// carries ICMP's) has this type (and code).
    pub fn matches(&self, ty: u16, code: u16) -> bool {
        u16::from(self.ty) == ty && self.code.is_none_or(|c| u16::from(c) == code)
    }
}

/// An interface name as rules give it; `wildcard`: any name that starts with `name`
/// (iptables' `eth+`, nft's `"eth*"`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IfName {
    pub name: String,
    pub wildcard: bool,
}

impl IfName {
    pub fn matches(&self, iface: &str) -> bool {
        match self.wildcard {
            true => iface.starts_with(self.name.as_str()),
            false => iface == self.name,
        }
    }
}

/// Names an interface pattern of [`Ruleset::ifaces`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Iface(pub u32);

/// Names one of the ruleset's sets of the element type at hand ([`Element::sets`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SetId(pub u32);

/// How a field matches: anything, one value, a set, or the negation of either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Match<T> {
    #[default]
    Any,
    Is(T),
    Not(T),
    In(SetId),
    NotIn(SetId),
}

impl<T> Match<T> {
    pub fn is_any(&self) -> bool {
        matches!(self, Match::Any)
    }
}

/// The connection-tracking states a packet can be in (`--ctstate`, nft `ct state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CtState {
    New,
    Established,
    Related,
    Invalid,
    Untracked,
}

impl CtState {
    pub const ALL: [CtState; 5] = [
        CtState::New,
        CtState::Established,
        CtState::Related,
        CtState::Invalid,
        CtState::Untracked,
    ];
    /// iptables' name (`ESTABLISHED`); nft's is the same in lower case.
    pub fn name(self) -> &'static str {
        match self {
            CtState::New => "NEW",
            CtState::Established => "ESTABLISHED",
            CtState::Related => "RELATED",
            CtState::Invalid => "INVALID",
            CtState::Untracked => "UNTRACKED",
        }
    }
    pub fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of connection-tracking states; a negated match is stored as its complement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct StateSet(pub u8);

impl StateSet {
    pub const ALL: StateSet = StateSet(0x1f);
    pub fn contains(self, s: CtState) -> bool {
        self.0 & s.bit() != 0
    }
    pub fn with(self, s: CtState) -> StateSet {
        StateSet(self.0 | s.bit())
    }
    pub fn complement(self) -> StateSet {
        StateSet(!self.0 & Self::ALL.0)
    }
    pub fn states(self) -> impl Iterator<Item = CtState> {
        CtState::ALL.into_iter().filter(move |s| self.contains(*s))
    }
}

/// `--tcp-flags MASK COMP` (`--syn` is `SYN,RST,ACK,FIN SYN`): the flags under `mask`
/// must be exactly `comp`, or (`invert`) must not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpFlags {
    pub mask: u8,
    pub comp: u8,
    pub invert: bool,
}

impl TcpFlags {
    pub fn matches(&self, flags: u8) -> bool {
        (flags & self.mask == self.comp) != self.invert
    }
}

/// The reply a REJECT sends (`--reject-with`; iptables' default is port unreachable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RejectWith {
    NetUnreachable,
    HostUnreachable,
    #[default]
    PortUnreachable,
    ProtoUnreachable,
    NetProhibited,
    HostProhibited,
    AdminProhibited,
    TcpReset,
}

impl RejectWith {
    /// The ICMP destination-unreachable code, or `None` for a TCP reset.
    pub fn icmp_code(self) -> Option<u8> {
        Some(match self {
            RejectWith::NetUnreachable => 0,
            RejectWith::HostUnreachable => 1,
            RejectWith::ProtoUnreachable => 2,
            RejectWith::PortUnreachable => 3,
            RejectWith::NetProhibited => 9,
            RejectWith::HostProhibited => 10,
            RejectWith::AdminProhibited => 13,
            RejectWith::TcpReset => return None,
        })
    }
}

/// What a verdict does with the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Accept,
    Drop,
    Reject(RejectWith),
}

/// Names a chain of [`Ruleset::chains`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChainId(pub u32);

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// ACCEPT, DROP or REJECT: the verdict.
    Verdict(Action),
    /// `-j CHAIN`: evaluate that chain; if it returns, go on after this rule.
    Jump(ChainId),
    /// `-g CHAIN`: evaluate that chain; if it returns, return from this one too.
    Goto(ChainId),
    /// `-j RETURN`: leave this chain (in a base chain: its policy decides).
    Return,
    /// No target (counting rules): evaluation goes on with the next rule.
    Continue,
}

/// The hooks packets enter the filter table at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    Input,
    Forward,
    Output,
}

impl Hook {
    pub const ALL: [Hook; 3] = [Hook::Input, Hook::Forward, Hook::Output];
    /// iptables' built-in chain for the hook.
    pub fn chain_name(self) -> &'static str {
        match self {
            Hook::Input => "INPUT",
            Hook::Forward => "FORWARD",
            Hook::Output => "OUTPUT",
        }
    }
}

/// One rule. Fields not given match anything. `sport`/`dport` need `proto` to be TCP or
/// UDP and `icmp` needs ICMP (the parsers check it, as iptables does).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    pub src: Match<Prefix>,
    pub dst: Match<Prefix>,
    /// IP protocol number (`Any`: every protocol).
    pub proto: Match<u8>,
    pub sport: Match<PortRange>,
    pub dport: Match<PortRange>,
    pub icmp: Match<IcmpType>,
    pub in_if: Match<Iface>,
    pub out_if: Match<Iface>,
    /// The states that match (negations already folded in).
    pub state: Option<StateSet>,
    pub tcp_flags: Option<TcpFlags>,
    pub target: Target,
    /// The line of the rule file it came from (0: made in code).
    pub line: u32,
}

impl Rule {
    /// A rule that matches everything and does `target`.
    pub fn new(target: Target) -> Rule {
        Rule {
            src: Match::Any,
            dst: Match::Any,
            proto: Match::Any,
            sport: Match::Any,
            dport: Match::Any,
            icmp: Match::Any,
            in_if: Match::Any,
            out_if: Match::Any,
            state: None,
            tcp_flags: None,
            target,
            line: 0,
        }
    }
    /// Whether a match needs the transport header (ports, ICMP type, TCP flags), which a
    /// non-first fragment does not carry: iptables' tcp, udp and icmp matches and nft's
    /// transport expressions never match one.
    pub fn needs_transport(&self) -> bool {
        !self.sport.is_any()
            || !self.dport.is_any()
            || !self.icmp.is_any()
            || self.tcp_flags.is_some()
    }
}

/// A chain: rules in order and, for the chain a hook enters, the default policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub name: String,
    /// The hook that enters this chain (a base chain), if any.
    pub hook: Option<Hook>,
    /// What a packet that falls off the end of a base chain gets (ACCEPT or DROP).
    pub policy: Action,
    pub rules: Vec<Rule>,
    /// The line that declared it (0: made in code).
    pub line: u32,
}

/// The element types sets hold, each with its own list of sets in the ruleset.
pub trait Element: Sized {
    fn sets(rs: &Ruleset) -> &[Vec<Self>];
    fn sets_mut(rs: &mut Ruleset) -> &mut Vec<Vec<Self>>;
}

macro_rules! element {
    ($t:ty, $field:ident) => {
        impl Element for $t {
            fn sets(rs: &Ruleset) -> &[Vec<Self>] {
                &rs.$field
            }
            fn sets_mut(rs: &mut Ruleset) -> &mut Vec<Vec<Self>> {
                &mut rs.$field
            }
        }
    };
}
element!(Prefix, prefix_sets);
element!(PortRange, port_sets);
element!(u8, proto_sets);
element!(IcmpType, icmp_sets);
element!(Iface, iface_sets);

/// A filter table: chains, the interface names rules mention, and the sets rules use.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ruleset {
    pub chains: Vec<Chain>,
    pub ifaces: Vec<IfName>,
    pub prefix_sets: Vec<Vec<Prefix>>,
    pub port_sets: Vec<Vec<PortRange>>,
    pub proto_sets: Vec<Vec<u8>>,
    pub icmp_sets: Vec<Vec<IcmpType>>,
    pub iface_sets: Vec<Vec<Iface>>,
}

impl Ruleset {
    /// INPUT, FORWARD and OUTPUT with policy ACCEPT and no rules, as a fresh filter
    /// table is.
    pub fn filter() -> Ruleset {
        Ruleset {
            chains: Hook::ALL
                .into_iter()
                .map(|h| Chain {
                    name: h.chain_name().into(),
                    hook: Some(h),
                    policy: Action::Accept,
                    rules: Vec::new(),
                    line: 0,
                })
                .collect(),
            ..Ruleset::default()
        }
    }
    /// The base chain of `hook`, if the table has one.
    pub fn hook_chain(&self, hook: Hook) -> Option<ChainId> {
        self.chains
            .iter()
            .position(|c| c.hook == Some(hook))
            .map(|i| ChainId(i as u32))
    }
    pub fn chain_by_name(&self, name: &str) -> Option<ChainId> {
        self.chains
            .iter()
            .position(|c| c.name == name)
            .map(|i| ChainId(i as u32))
    }
    pub fn chain(&self, id: ChainId) -> &Chain {
        &self.chains[id.0 as usize]
    }
    pub fn chain_mut(&mut self, id: ChainId) -> &mut Chain {
        &mut self.chains[id.0 as usize]
    }
    /// Rules in all chains.
    pub fn rule_count(&self) -> usize {
        self.chains.iter().map(|c| c.rules.len()).sum()
    }
    /// The elements of set `id` (empty for an id this ruleset does not have).
    pub fn set<T: Element>(&self, id: SetId) -> &[T] {
        T::sets(self)
            .get(id.0 as usize)
            .map_or(&[], |v| v.as_slice())
    }
    /// Stores a set and returns its id.
    pub fn add_set<T: Element>(&mut self, items: Vec<T>) -> SetId {
        let sets = T::sets_mut(self);
        sets.push(items);
        SetId(sets.len() as u32 - 1)
    }
    /// The id of an interface pattern, added when new.
    pub fn iface(&mut self, name: &str, wildcard: bool) -> Iface {
        let i = self
            .ifaces
            .iter()
            .position(|f| f.name == name && f.wildcard == wildcard)
            .unwrap_or_else(|| {
                self.ifaces.push(IfName {
                    name: name.into(),
                    wildcard,
                });
                self.ifaces.len() - 1
            });
        Iface(i as u32)
    }
    /// Whether `m` holds `v` (`contains(x, v)` decides one element).
    pub fn matches<T: Element + Copy>(&self, m: &Match<T>, contains: impl Fn(&T) -> bool) -> bool {
        match m {
            Match::Any => true,
            Match::Is(x) => contains(x),
            Match::Not(x) => !contains(x),
            Match::In(s) => self.set::<T>(*s).iter().any(&contains),
            Match::NotIn(s) => !self.set::<T>(*s).iter().any(&contains),
        }
    }
    /// The heap bytes this ruleset holds, roughly (what [`crate::Limits`] counts).
    pub fn heap_bytes(&self) -> usize {
        use core::mem::size_of;
        let sets = |n: usize, each: usize| n * (size_of::<Vec<u8>>()) + each;
        self.chains
            .iter()
            .map(|c| size_of::<Chain>() + c.name.len() + c.rules.capacity() * size_of::<Rule>())
            .sum::<usize>()
            + self
                .ifaces
                .iter()
                .map(|f| size_of::<IfName>() + f.name.len())
                .sum::<usize>()
            + sets(
                self.prefix_sets.len(),
                self.prefix_sets
                    .iter()
                    .map(|s| s.len() * size_of::<Prefix>())
                    .sum(),
            )
            + sets(
                self.port_sets.len(),
                self.port_sets
                    .iter()
                    .map(|s| s.len() * size_of::<PortRange>())
                    .sum(),
            )
            + sets(
                self.proto_sets.len(),
                self.proto_sets.iter().map(Vec::len).sum(),
            )
            + sets(
                self.icmp_sets.len(),
                self.icmp_sets
                    .iter()
                    .map(|s| s.len() * size_of::<IcmpType>())
                    .sum(),
            )
            + sets(
                self.iface_sets.len(),
                self.iface_sets
                    .iter()
                    .map(|s| s.len() * size_of::<Iface>())
                    .sum(),
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[allow(unused_imports)]
    use alloc::{string::ToString, vec, vec::Vec};

    #[test]
    fn prefixes_clear_host_bits_and_contain() {
        let p = Prefix::new(Ipv4Addr::new(10, 1, 2, 3), 8).unwrap();
        assert_eq!(p.to_string(), "10.0.0.0/8");
        assert!(p.contains(u32::from(Ipv4Addr::new(10, 255, 0, 1))));
        assert!(!p.contains(u32::from(Ipv4Addr::new(11, 0, 0, 0))));
        assert!(Prefix::ANY.contains(7));
        assert_eq!(Prefix::new(Ipv4Addr::UNSPECIFIED, 33), None);
        assert_eq!(p.last(), u32::from(Ipv4Addr::new(10, 255, 255, 255)));
    }

    #[test]
    fn ranges_become_the_fewest_prefixes() {
        let a = |s: &str| u32::from(s.parse::<Ipv4Addr>().unwrap());
        let ps = range_prefixes(a("10.0.0.1"), a("10.0.0.9"));
        let shown: Vec<_> = ps.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            shown,
            ["10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/30", "10.0.0.8/31"]
        );
        assert_eq!(range_prefixes(0, u32::MAX), [Prefix::ANY]);
        assert_eq!(range_prefixes(1, u32::MAX - 1).len(), 62);
        assert_eq!(range_prefixes(5, 5), [Prefix::host(Ipv4Addr::from(5))]);
    }

    #[test]
    fn negated_states_are_complements() {
        let s = StateSet::default().with(CtState::New);
        assert_eq!(s.complement().states().count(), 4);
        assert!(!s.complement().contains(CtState::New));
    }
}
