//! A firewall network function, sans-IO: the rule engine issue 39 builds the firewall
//! of seed 002 (IncludeOS against iptables, 1 to 1,000,000 rules) on.
//!
//! - **Rules users already have**: [`parse::iptables_save`] reads `iptables-save` output
//!   (the filter table), [`parse::nft`] reads `nft list ruleset` (the same subset, with
//!   anonymous and named sets). Anything outside the subset is an error naming the file,
//!   line, column and construct, never dropped. [`print`] writes a [`Ruleset`] back in
//!   either syntax, so one file drives this engine and the iptables/nftables baselines.
//! - **The model** ([`rule`]): addresses and prefixes, protocol, port ranges, ICMP types,
//!   interfaces, connection states, TCP flags, each matched, negated or from a set;
//!   ACCEPT, DROP, REJECT, jumps, gotos and returns between chains; default policies.
//! - **Classification** ([`Classifier`]): first match in iptables' order, compiled into
//!   tuple-space hash tables with merged tuples and priority pruning (TupleMerge), so a
//!   packet costs a lookup per table, not a comparison per rule; [`Linear`] is the
//!   rule-by-rule reference it is tested against. Why this and not decision trees or
//!   bit vectors, and the measurements behind it, are in the `classify` module's
//!   documentation, docs/fw.md and docs/benchmarks.md: a million rules load in 1.2-1.4 s
//!   and take 60-75 bytes each; a cold lookup costs ~55 ns at 10 rules and ~0.7-0.8 us
//!   at a million (the same 14-27 tables probed; the difference is cache misses).
//! - **The network function** ([`Firewall`]): connection tracking (bounded table,
//!   nf_conntrack's states and timeouts, simplified) in front of the classifier, so an
//!   `ESTABLISHED` accept on top costs established traffic one hash lookup; REJECT's
//!   ICMP error or TCP reset built with `vtnt-wire`. Driven like the other sans-IO
//!   engines: packets and the time in, verdicts and replies out.
//! - **The bump in the wire** ([`Bridge`]): the firewall between two Ethernet sides,
//!   frames in and frames to send out, which every driver of the NF (the Linux process,
//!   the unikernel) moves and none decides.
//! - **Benchmark rules** ([`gen`]): ClassBench-style rule sets and packet traces from a
//!   documented distribution and a seed.
//!
//! IPv4 only (the stack and `vtnt-wire` are IPv4); `ip6` matches are refused by name.
//!
//! ```
//! use vtnt_fw::{parse, Classifier, CtState, Headers, Hook, IfId, Options, Packet};
//! let rules = parse::iptables_save(
//!     "rules.v4",
//!     "*filter\n:FORWARD DROP [0:0]\n-A FORWARD -p tcp -m tcp --dport 22 -j ACCEPT\nCOMMIT\n",
//! )
//! .unwrap();
//! let classifier = Classifier::compile(&rules, &Options::default()).unwrap();
//! let mut buf = [0u8; 64];
//! let ip = vtnt_wire::build::Ip {
//!     src: "192.0.2.1".parse().unwrap(),
//!     dst: "198.51.100.2".parse().unwrap(),
//!     ttl: 64,
//!     tos: 0,
//!     ipid: 1,
//! };
//! let syn = vtnt_wire::build::Tcp { sport: 40000, dport: 22, seq: 1, ack: 0, flags: 2, window: 64 };
//! let n = vtnt_wire::build::tcp(&mut buf, &ip, &syn).unwrap();
//! let h = Headers::parse(&buf[..n]).unwrap();
//! let p = Packet::new(&h, IfId::NONE, IfId::NONE, CtState::New);
//! let v = classifier.classify(Hook::Forward, &p);
//! assert_eq!(v.action, vtnt_fw::Action::Accept);
//! assert_eq!(v.rule.unwrap().index, 0);
//! ```
#![no_std]
extern crate alloc;

mod bridge;
mod check;
mod classify;
mod conntrack;
mod firewall;
pub mod gen;
mod hash;
mod linear;
mod packet;
pub mod parse;
pub mod print;
mod reject;
pub mod rule;

pub use bridge::{Bridge, BridgeStats, Sends, BRIDGE_BATCH};
pub use check::Invalid;
pub use classify::{
    Classifier, CompileError, Options, Stats, Strategy, BATCH, EXPAND_MAX, PEAK_BYTES_PER_ENTRY,
};
pub use conntrack::{CtConfig, CtStats, Timeouts, Track, BYTES_PER_CONN};
pub use firewall::{Config, Firewall, Outcome, Stats as FirewallStats};
pub use linear::{Linear, MAX_DEPTH};
pub use packet::{Headers, IfId, Malformed, Packet};
pub use reject::QUOTE_MAX;
pub use rule::{Action, ChainId, CtState, Hook, RejectWith, Rule, Ruleset, Target};

/// A rule: its chain and its index there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleRef {
    pub chain: ChainId,
    pub index: u32,
}

/// What the rules decide for a packet, and which rule did (`None`: the base chain's
/// policy, or no chain at that hook).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Verdict {
    pub action: Action,
    pub rule: Option<RuleRef>,
}
