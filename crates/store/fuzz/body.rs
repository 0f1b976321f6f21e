//! What the `pfx2as_parse` fuzz target does with one input, shared with the corpus test
//! (`crates/store/tests/fuzz_corpus.rs`) so every corpus file also runs under `cargo test`.

#![allow(dead_code)]

use std::net::Ipv4Addr;

use vtnt_store::pfx2as::{parse, Entry, Pfx2As};

/// The origin of the most specific entry holding `a`, found the slow way.
fn slow_lookup(entries: &[Entry], a: Ipv4Addr) -> Option<&str> {
    entries
        .iter()
        .filter(|e| e.prefix.contains(a))
        .max_by_key(|e| e.prefix.bits())
        .map(|e| e.origin.as_str())
}

/// `pfx2as_parse`: any bytes as a prefix-to-AS file. Nothing may panic; a file that
/// parses flattens into sorted, disjoint segments, and the longest-prefix match of each
/// entry's first and last address, and of the addresses around them, is the slow one's.
pub fn pfx2as_parse(data: &[u8]) {
    let Ok(entries) = parse(data) else {
        return;
    };
    let table = Pfx2As::new(&entries);
    for w in table.segments().windows(2) {
        assert!(
            w[0].1 < w[1].0,
            "segments overlap or are out of order: {w:?}"
        );
    }
    assert!(table.segments().iter().all(|s| s.0 <= s.1));
    // (the slow way is quadratic: a few hundred entries at most)
    for e in entries.iter().take(300) {
        let first = u32::from(e.prefix.addr());
        let last = first
            | u32::MAX
                .checked_shr(u32::from(e.prefix.bits()))
                .unwrap_or(0);
        for a in [first, last, first.wrapping_sub(1), last.wrapping_add(1)] {
            let a = Ipv4Addr::from(a);
            assert_eq!(table.lookup(a), slow_lookup(&entries, a), "{a}");
        }
    }
}
