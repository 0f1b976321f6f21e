//! Host side of the vTNT unikernel: build the image, boot it, read what it says.
//!
//! - [`image`]: the unikernel's installed images (`vtnt-artifacts`), checked before boot.
//! - [`qemu`]: launch QEMU (microvm / q35 / pc; KVM or TCG) with a TAP or socket/stream
//!   network, capture the serial console, enforce a timeout, and map QEMU's
//!   `isa-debug-exit` status back to the guest's [`GuestStatus`].
//! - [`accel`]: which accelerator runs a guest ([`accel::Accelerator`]: KVM, PVM-KVM or
//!   TCG, with the CPU model that works on it): KVM when our own image boots under it
//!   (probed once), TCG for a stock Linux guest under PVM, `VTNT_ACCEL=tcg|kvm` as an
//!   override.
//! - [`breakdown`]: where a boot's time and exits go, step by step (guest step marks,
//!   KVM tracepoints through `perf`).
//! - [`monitor`]: the same over `vtnt-monitor`, our own monitor (one process per VM, only
//!   `/dev/kvm`; the guest runs at privilege level 3, natively even under PVM).
//! - [`firecracker`]: the same over Firecracker (`--no-api --config-file`), when a
//!   `firecracker` binary is on `PATH`.
//! - [`netns`]: a network namespace with a TAP device, removed on drop (tests, benchmarks).
//! - [`launch`]: [`launch::run_job`], a VM launched for one job end to end: job spec in, scamper JSON
//!   lines, guest status, timings and peak RSS out; on a running `vtnt lab` ([`lab`]) or
//!   a TAP device.
//!
//! ```no_run
//! use vtnt_unikernel::{image, qemu::{Machine, VmConfig}};
//! let img = image::job()?;
//! let cfg = VmConfig::new(img, Machine::Microvm, "-- boot");
//! let out = vtnt_unikernel::qemu::run(&cfg)?;
//! assert_eq!(out.status, vtnt_unikernel::GuestStatus::Exited(0));
//! # Ok::<(), vtnt_unikernel::Error>(())
//! ```

pub mod accel;
pub mod breakdown;
pub mod firecracker;
pub mod image;
pub mod lab;
pub mod launch;
pub mod monitor;
pub use vtnt_netns as netns;
pub use vtnt_netns::which;
pub mod outcome;
pub mod qemu;

pub use outcome::{ConsoleTap, GuestStatus, Outcome};

/// Errors of the host side.
#[derive(Debug)]
pub enum Error {
    /// A program could not be started (`program`: what, `source`: why).
    Spawn {
        program: String,
        source: std::io::Error,
    },
    /// An installed file (image, monitor) is missing or refused.
    Artifact(vtnt_artifacts::Error),
    /// The VMM refused to start or died without a guest status; `stderr` is its message.
    Vmm { status: Option<i32>, stderr: String },
    /// A host command needed for setup failed (`ip netns add`, ...).
    Setup { command: String, stderr: String },
    /// Other I/O.
    Io(std::io::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Spawn { program, source } => write!(f, "cannot run `{program}`: {source}"),
            Error::Artifact(e) => write!(f, "{e}"),
            Error::Vmm { status, stderr } => {
                write!(
                    f,
                    "VMM exited (status {status:?}) without a guest status: {stderr}"
                )
            }
            Error::Setup { command, stderr } => write!(f, "`{command}` failed: {stderr}"),
            Error::Io(e) => write!(f, "I/O error: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}
