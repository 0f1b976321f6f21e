//! What a run left, in one shape for every driver (`drivers::read_run` picks the driver
//! module that reads it from what its instance printed; the microVM's thread reads its
//! own), so that `Instance::wait` knows no driver's console.

/// What a run left, in one shape for every driver: the job's results, its diagnostics, its
/// exit status and what it ran under, read from what the driver's instance printed.
#[derive(Debug, Clone)]
pub struct Ran {
    /// The result lines (scamper JSON), one per line.
    pub stdout: String,
    /// The job's diagnostics (and its VMM's or tender's).
    pub stderr: String,
    /// The job's exit status (None: killed, timed out or vanished).
    pub code: Option<i32>,
    pub elapsed: std::time::Duration,
    /// What a VM or guest ran under (`PVM-KVM (vtnt-monitor)`, `TCG`); None on the host's
    /// kernel.
    pub accelerator: Option<String>,
    /// From the spawn to the first probe, where the guest says when it sent it.
    pub spawn_to_first_probe: Option<std::time::Duration>,
}
