//! MACE-style RTT correction (seed 003, Misa et al., ANRW 2019), sans-IO. A vantage
//! point in a container or VM adds latency of its own between its probe and the wire
//! (veth pair, bridge, TAP device). MACE stamps each packet where it leaves the virtual
//! device and subtracts the time spent before that point from the tool's RTT. Here the
//! host side of the runtime's device supplies kernel stamps of every packet crossing it
//! (a driver outside this crate captures them); [`pair`] pairs each outbound probe with
//! its reply by the probe's identity ([`key`]), and [`correct`] matches those pairs to
//! the runtime's own probe records and reports, per probe,
//!
//! `overhead = rtt_runtime - (t_host_recv - t_host_send)` and
//! `rtt_corrected = rtt_runtime - overhead = t_host_recv - t_host_send`.
//!
//! Only differences of stamps on one clock are used, so host and runtime clocks need not
//! agree. Nothing is ever attributed on a guess: a reply that could belong to more than
//! one probe is reported ambiguous and its probe gets no correction.

#![no_std]

extern crate alloc;

pub mod correct;
pub mod key;
pub mod pair;

pub use correct::{correct, Correction, ToolProbe};
pub use key::{Ident, Key};
pub use pair::{pair, Dir, Event, Fate, Pairing, ProbeStamps};
