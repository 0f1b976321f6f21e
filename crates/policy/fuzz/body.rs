//! What the `prefix_list` fuzz target does with one input, shared with the corpus test
//! (`crates/policy/tests/fuzz_corpus.rs`) so every corpus file also runs under `cargo test`.

#![allow(dead_code)]

use std::net::Ipv4Addr;

use vtnt_policy::{Policy, PrefixSet};

/// `prefix_list`: any text as an exclusion list. Nothing may panic; a list that parses
/// must print as a list that parses to the same set, and every entry must exclude its own
/// first and last address from a policy that otherwise allows everything.
pub fn prefix_list(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(set) = PrefixSet::parse(text) else {
        return;
    };
    let printed: String = set.iter().map(|p| format!("{p}\n")).collect();
    assert_eq!(PrefixSet::parse(&printed).as_ref(), Ok(&set), "{printed}");
    let policy = Policy {
        allow_public: true,
        exclude: set.clone(),
        ..Policy::default()
    };
    for p in set.iter() {
        let first = u32::from(p.addr());
        let last = first | u32::MAX.checked_shr(p.bits() as u32).unwrap_or(0);
        for a in [first, last] {
            assert!(set.find(Ipv4Addr::from(a)).is_some(), "{p} lost {a}");
            assert!(policy.check_target(Ipv4Addr::from(a).into(), 20).is_err());
        }
    }
}
