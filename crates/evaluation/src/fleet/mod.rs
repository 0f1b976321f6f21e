//! The fleet's benchmarks (`vtnt bench fleet`, `vtnt bench fleet-scale`), apart from the
//! fleet itself, so that an agent links neither them nor the plots:
//! - [`paper`]: seed 000's Figs. 10 and 11 over five sites;
//! - [`scale`]: dispatch overhead with many agents, and the controller's capacity;
//! - [`edge`]: `scale`'s etiquette phase, the fleet-wide rate limit counted at the lab's
//!   edge;
//! - [`local`]: a broker and agent processes on this host, which both start;
//! - [`site`]: a network namespace behind a link of a given round trip and bandwidth
//!   (`paper`'s sites).
//!
//! They drive `vtnt-fleet` through its public interface only (broker, controller,
//! replay), as a user's controller would.

pub mod edge;
pub mod local;
pub mod paper;
pub mod scale;
pub mod site;
