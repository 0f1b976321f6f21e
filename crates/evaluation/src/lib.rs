//! Seed 000's evaluation of the runtimes, as a library call (`vtnt bench deploy`).
//!
//! [`bench_deploy`] measures, per runtime: image size, memory of one instance with and
//! without KSM, CPU time, deploy / execution / total time, and density under a 1 GB
//! memory cgroup and a CPU budget; [`report`] writes it as markdown with PNG plots
//! ([`plot`]) in the style of the paper's Figs. 4-8. [`bench_micro`] is seed 001's
//! micro-benchmarks in every runtime (`vtnt bench micro`, [`micro`]).
//!
//! [`net::bench_net`] is seed 004's TCP/UDP stream study (`vtnt bench net`): iperf3
//! against an endpoint in each runtime, its own report and figures ([`net::report`],
//! drawn with [`plot`]).
//!
//! [`rtt::bench_rtt`] is seed 003's RTT-correction study (`vtnt bench rtt`): pings and
//! traces from native and every runtime through the lab, raw and corrected, at background loads,
//! against the lab's configured delays and native ([`rtt::report`]).
//!
//! [`fw`] draws `vtnt bench fw`'s figures (seed 002's Figs. 3-12) as SVGs from its
//! JSON rows, which `vtnt-bench` measures.
//!
//! `fleet` (feature `fleet`) is seed 000's fleet experiment (`vtnt bench fleet`, Figs. 10 and 11) and the
//! fleet's scale run (`vtnt bench fleet-scale`), over `vtnt-fleet`.
//!
//! What it may import: `vtnt-runtimes` (images, instances, jobs), `vtnt-measure`
//! (processes, cgroups, KSM), `vtnt-unikernel` (accelerators), `vtnt-fleet` (the fleet
//! benchmarks), `vtnt-stats`, and for `rtt` `vtnt-lab` (configured delays), `vtnt-linux`
//! (the lab-side capture) and `vtnt-mace` (its pairing); nothing imports it but the
//! command line. Inside, imports go one way:
//! - [`bench`](mod@bench) uses `density`, [`report`] and [`results`];
//! - [`report`] uses [`plot`] and [`results`];
//! - `density` and [`plot`] use [`results`] only;
//! - [`results`] (the report's data) uses no other module;
//! - [`micro`] uses [`plot`] and [`results`]; nothing uses it;
//! - [`net`] uses [`plot`] only;
//! - `fleet` uses [`plot`] only;
//! - [`fw`] uses [`plot`] only;
//! - [`rtt`] uses no other module;
//! - [`micro`], [`net`] and [`plot`] name their rows with [`row`], which uses no other
//!   module.

pub mod bench;
#[cfg(feature = "fleet")]
pub mod fleet;
pub mod fw;
pub mod micro;
pub mod net;
pub mod plot;
pub mod report;
pub mod results;
pub mod row;
pub mod rtt;

mod density;

pub use bench::{bench_deploy, BenchDeployArgs};
pub use micro::{bench_micro, BenchMicroArgs};
pub use net::{bench_net, BenchNetArgs};
pub use results::Report;
pub use rtt::{bench_rtt, BenchRttArgs};
