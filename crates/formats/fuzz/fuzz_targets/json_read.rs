//! Fuzz target `json_read`: its body is `fuzz/body.rs`, which the corpus test runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../body.rs"]
mod body;

fuzz_target!(|data: &[u8]| {
    body::json_read(data);
});
