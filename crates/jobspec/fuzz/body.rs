//! What the `job_decode` fuzz target does with one input, shared with the corpus test
//! (`crates/jobspec/tests/fuzz_corpus.rs`) so every corpus file also runs under `cargo test`.

#![allow(dead_code)]

use vtnt_jobspec::{decode, encode, parse_target_list};

/// `job_decode`: the first line is a job line as the kernel command line carries it, the
/// rest a boot module's target list. Nothing may panic; a line that decodes must survive
/// the round trip (its canonical encoding decodes to the same job), and every target
/// read from the list must print as text that reads back the same.
pub fn job_decode(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (line, list) = text.split_once('\n').unwrap_or((text, ""));
    if let Ok(spec) = decode(line) {
        let canonical = encode(&spec);
        match decode(&canonical) {
            Ok(back) => assert_eq!(back, spec, "{line:?} -> {canonical:?}"),
            Err(e) => panic!("{line:?} -> {canonical:?} does not decode: {e}"),
        }
    }
    if let Ok(targets) = parse_target_list(list) {
        let again: String = targets.iter().map(|t| format!("{t}\n")).collect();
        assert_eq!(parse_target_list(&again).ok(), Some(targets));
    }
}
