//! Fuzz target `iptables_parse`: no input may panic (see ../body.rs).
#![no_main]

#[path = "../body.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::rule_file(data, vtnt_fw::parse::Format::IptablesSave));
