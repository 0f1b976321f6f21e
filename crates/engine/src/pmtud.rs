//! Path MTU discovery after a trace (`-M`), with the inferences of scamper 20211212's
//! (`scamper_trace_do.c`, PMTUD version 2), as a state machine the trace drives:
//!
//! - Probes go out with TTL 255 and the don't-fragment bit, `if_mtu` bytes first. A
//!   "fragmentation needed" (PTB) with a usable next-hop MTU is noted (`Ptb`) and the
//!   probes shrink to it; any other answer (the destination's, or a time exceeded)
//!   ends the search: the path MTU is that probe's size.
//! - Silence (every attempt at a size unanswered): the size is searched for between
//!   the media MTUs of RFC 1191's table (`L2` below): the next one down, then one byte
//!   above a size that passed, then halves, until the largest size that passes is one
//!   below the smallest that vanished. The silent size then goes out with TTLs between
//!   the last PTB's hop and the first node that answered, halving, to find the farthest
//!   router that still answers it with a time exceeded: the `Silence` note names it.
//!   When even the first hop is silent, the MTU towards it is the interface's
//!   `outmtu`. The search then goes on from the size found.
//! - A PTB whose next-hop MTU is 0 or not below the probe's size (`PtbBad`) starts the
//!   same size search, the PTB's sender setting the upper bound.
//!
//! Every reply it takes goes into the PMTUD hop list, in arrival order.
//!
//! Over IPv6 the search is the same; replies carry ICMPv6's numbers (a packet too big in
//! place of a "fragmentation needed"), and probes have no don't-fragment bit to set.

//!
//! The search is built only with the crate's `pmtud` feature, which the Linux driver
//! turns on: it alone can give the interface's MTU. Without it (the unikernel) the
//! search's types are empty, `-M` is refused when a measurement starts, and the image carries
//! none of it.

/// The smallest MTU an IPv4 link may have (RFC 791).
pub(crate) const MIN_MTU: u16 = 68;

/// What the trace does next. (Only the search makes these.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "pmtud"), allow(dead_code))]
pub(crate) enum Step {
    /// The reply is not taken; keep waiting.
    Ignore,
    /// The reply is recorded; keep waiting for the current probe.
    Wait,
    /// Send the next probe ([`Pmtud::probe`]) now, as a first attempt.
    Probe,
    /// Discovery is over.
    Done,
}

#[cfg(feature = "pmtud")]
mod search;
#[cfg(feature = "pmtud")]
pub(crate) use search::{Mode, Pmtud};

#[cfg(not(feature = "pmtud"))]
pub(crate) use absent::{Mode, Pmtud};

/// No search in this build: its types have no values, so every path through them is
/// gone at compile time.
#[cfg(not(feature = "pmtud"))]
mod absent {
    use vtnt_record::{Hop, Pmtud as Record};

    use super::Step;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Mode {}

    #[derive(Debug)]
    pub(crate) enum Pmtud {}

    impl Pmtud {
        pub fn probe(&self) -> (Mode, u8, u16) {
            match *self {}
        }
        pub fn hops_mut(&mut self) -> &mut alloc::vec::Vec<Hop> {
            match *self {}
        }
        pub fn into_record(self) -> Record {
            match self {}
        }
        pub fn on_reply(&mut self, _: Mode, _: Hop, _: &[Hop]) -> Step {
            match *self {}
        }
        pub fn on_timeout(&mut self, _: &[Hop]) -> Step {
            match *self {}
        }
    }
}
