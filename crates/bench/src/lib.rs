//! Benchmarks that re-measure vTNT's claims. Each prints its figure next to what it is
//! compared with (a peer measured in the same run, or the lab's ground truth).
//!
//! - [`tnt_accuracy`]: TNT against the lab's truth on the reference topology and on
//!   generated ones (`vtnt bench tnt-accuracy`).
//! - [`soak::soak`]: large campaigns again and again, counting the runs that never end
//!   (`vtnt bench soak`).
//! - [`fw::sweep`]: the firewall's classifier at 0 to 1,000,000 rules: load time, bytes
//!   per rule, nanoseconds per classification (`vtnt bench fw-classify`).
//! - [`fw_nf::sweep`]: the firewall NF between namespaces, in every runtime, beside
//!   iptables and nftables (`vtnt bench fw`); [`fw_scale::run`]: several NFs at once
//!   (`vtnt bench fw-scale`).
//! - [`store::store_bench`]: the results store at campaign scale: import time, database
//!   size, every question's time (`vtnt bench store`).
//!
//! ```no_run
//! let report = vtnt_bench::tnt_accuracy(&vtnt_bench::AccuracyOptions::new(10, 42)).unwrap();
//! println!("{}", report.to_markdown());
//! ```

pub mod accuracy;
pub mod drive;
pub mod fw;
pub mod fw_host;
pub mod fw_lxd;
pub mod fw_nf;
pub mod fw_rr;
pub mod fw_scale;
pub mod probe_rate;
pub mod soak;
pub mod soak_lab;
#[cfg(feature = "store")]
pub mod store;
#[cfg(feature = "store")]
pub mod store_truth;

pub use accuracy::{
    control_options, control_seed, tnt_accuracy, topology_seed, AccuracyOptions, AccuracyReport,
    BruteForceScore, ClassScore, ControlScore, OracleScore, PartialReports, ProbeScore,
    RouterScore, StrictScore,
};
pub use drive::{lab_engine_config, run_tnt, DriveError, LabRun};
