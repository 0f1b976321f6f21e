//! Fuzz target `forward_packet`: no packet, from an instance or from upstream, may make
//! the forwarder panic or hand out a packet that breaks its invariants (see ../body.rs).
#![no_main]

#[path = "../body.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::forward_packet(data));
