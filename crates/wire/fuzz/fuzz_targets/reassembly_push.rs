//! Fuzz target `reassembly_push`: no run of packets may panic, and every datagram put
//! back together is a valid IPv4 packet (see ../body.rs).
#![no_main]

#[path = "../body.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::reassembly_push(data));
