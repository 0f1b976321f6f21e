//! Fuzz target: arbitrary packets into a busy engine must never panic.
#![no_main]

#[path = "../body.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::handle_packet(data));
