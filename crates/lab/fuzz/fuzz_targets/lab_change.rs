//! Fuzz target `lab_change`: no input may panic (see ../body.rs).
#![no_main]

#[path = "../body.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::lab_change(data));
