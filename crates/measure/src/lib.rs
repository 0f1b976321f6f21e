//! What processes cost on a Linux host, and the processes themselves.
//!
//! - [`proc`]: a child spawned in its own process group, its output read while it runs,
//!   the whole group killed on timeout or drop ([`proc::Supervised`]); and from `/proc`
//!   what a process costs: proportional set size (PSS), resident set size, CPU time.
//! - [`cgroup`]: cgroup v1 groups of our own, one per instance (what it costs) or per
//!   density run (the budget), emptied and removed on drop.
//! - [`ksm`]: kernel samepage merging switched on for a measurement and restored after,
//!   and its counters.
//! - [`dynmods`]: the kernel's cgroup `favordynmods` (joining a cgroup without waiting
//!   for an RCU grace period) switched on for a measurement and restored after.
//! - [`provenance`]: the machine, tool versions, commit and command a measurement ran
//!   with, for every report.
//! - [`cpus`]: the CPUs split between a part of a measurement that runs alone and the
//!   rest, and every thread of some processes pinned.
//! - [`stop`]: the flag a signal sets to end a long measurement at its next step, so its
//!   guards are dropped rather than left behind.
//!
//! `Supervised` lives here rather than with the runtimes because it is the process
//! side of a measurement (its start time, elapsed time and process group are what the
//! costs are read against) and shares `proc`'s kill(2); it knows nothing of images or
//! instances. Unsafe code is in `proc` and `dynmods` (mount(2)) only.
//!
//! Errors are [`Error`] ([`error`]): typed, so that callers can tell a missing file, a
//! host without cgroup v1 or KSM, a timeout and an interruption apart.
//!
//! What it may import: std, libc, nix, thiserror and serde only; no other vTNT crate. Inside,
//! `cgroup` uses `proc` (to kill what is left in a group); `proc` uses `stop` (a
//! wait ends when the run is interrupted); `ksm`, `dynmods`, `provenance`, `cpus` and `stop`
//! use no other module.

pub mod cgroup;
pub mod cpus;
pub mod error;
// mount(2), to remount the cgroup2 hierarchy (its SAFETY note).
#[allow(unsafe_code)]
pub mod dynmods;
pub mod ksm;
pub mod provenance;
pub mod stop;
// `proc` calls libc's kill(2) (a process group or one process),
// waitpid(2) (a child it adopted) and sysconf(_SC_CLK_TCK), each call with its SAFETY note.
#[allow(unsafe_code)]
pub mod proc;

pub use error::{Error, Result};
