//! What `bench_deploy` measured: the [`Report`] (per runtime:
//! repetitions, memory, density results) that `bench` and `density` fill in and
//! `report` and `plot` read (their statistics: `vtnt_stats`). A leaf: it
//! imports no other module of this crate, so the producers and the consumers of a
//! report depend on it rather than on each other.

use std::path::PathBuf;

use vtnt_measure::ksm;

/// One deploy + run + destroy.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Rep {
    pub deploy_s: f64,
    pub exec_s: f64,
    pub cleanup_s: f64,
    pub cpu_s: f64,
    pub ok: bool,
    pub same_as_native: bool,
    /// From the instance's spawn to its first probe, where the runtime tells (the
    /// unikernels'), milliseconds.
    pub first_probe_ms: Option<f64>,
    /// Of that, joining the instance's cgroup, where the runtime tells (spt), ms.
    pub cgroup_join_ms: Option<f64>,
}

impl Rep {
    pub fn total_s(&self) -> f64 {
        self.deploy_s + self.exec_s + self.cleanup_s
    }
}

/// Memory of one instance.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Memory {
    pub late_mib: f64,
    pub peak_mib: f64,
    pub duration_s: f64,
    pub ksm: Option<ksm::Counters>,
}

/// Everything measured for one runtime.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RuntimeReport {
    pub runtime: String,
    pub label: String,
    /// The accelerator of a VM runtime (`KVM`, `PVM-KVM`, `TCG`); `None` for the others.
    pub accel: Option<String>,
    /// Ran under TCG.
    pub emulated: bool,
    pub skipped: Option<String>,
    pub image_bytes: u64,
    pub download_bytes: u64,
    pub image_note: String,
    pub reps: Vec<Rep>,
    pub memory: Option<Memory>,
    pub memory_ksm: Option<Memory>,
    pub density_memory: Option<DensityResult>,
    pub density_memory_ksm: Option<DensityResult>,
    pub density_cpu: Option<DensityResult>,
    pub errors: Vec<String>,
    /// Runs that timed out and were retried once (see `retry_timeout`).
    pub retried: Vec<String>,
}

/// The whole report.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// The accelerators of the VM runtimes, e.g. `vm: TCG, microvm: PVM-KVM`.
    pub accel: String,
    /// Why a Linux VM runs under TCG on a host with KVM (PVM), if it does.
    pub accel_note: Option<String>,
    pub host: String,
    /// Whether the kernel's cgroup `favordynmods` was on (see `vtnt_measure::dynmods`).
    pub cgroup_favordynmods: bool,
    /// The machine, tool versions, commit and command of this run.
    pub provenance: vtnt_measure::provenance::Provenance,
    pub job: String,
    pub reps: u32,
    /// The full VM's repetitions, where they differ from `reps` (`--vm-reps`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm_reps: Option<u32>,
    pub bandwidth_mbps: u64,
    pub memory_budget: String,
    pub cpu_budget: String,
    /// How often instances traced again while they held in the CPU budget, seconds.
    pub density_every_s: u64,
    pub runtimes: Vec<RuntimeReport>,
    /// Files written (report.md, report.json, figures).
    pub files: Vec<PathBuf>,
}

/// One timeline sample.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Sample {
    pub t: f64,
    pub mem_mib: f64,
    /// CPU use of the group in percent of one core over the last interval.
    pub cpu_pct: f64,
    /// Instances started and alive.
    pub running: u32,
    /// Of those, the ones whose result has appeared.
    pub working: u32,
    /// Memory growth of the runtime's daemons outside the group since the ramp began.
    pub daemon_mib: f64,
    /// CPU use of those daemons in percent of one core over the last interval.
    pub daemon_cpu_pct: f64,
}

/// What the daemons a runtime needs (Docker's engine and shims) cost during a density
/// ramp, and how that was charged.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DaemonShare {
    pub rule: String,
    /// Their memory growth (PSS) when the most instances worked at once.
    pub mem_mib_at_peak: f64,
    pub mem_mib_per_instance: f64,
    /// Their CPU time during the ramp.
    pub cpu_secs: f64,
    pub cpu_secs_per_instance: f64,
}

/// What a density ramp found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DensityResult {
    pub budget: String,
    /// How often each held instance ran its job again, seconds (0: it held idle).
    pub every_s: f64,
    /// Instances the ramp would start at most.
    pub limit: u32,
    pub started: u32,
    /// The density: the most instances alive and working at once.
    pub peak: u32,
    /// Why the ramp ended without a failure (the density is then at least `peak`).
    pub cap: Option<String>,
    /// The failure that ended the ramp.
    pub first_failure: Option<String>,
    pub oom_kills: u64,
    /// Median seconds from an instance's start to its result.
    pub median_time_to_result_s: f64,
    pub daemons: Option<DaemonShare>,
    pub timeline: Vec<Sample>,
}

impl DensityResult {
    /// Whether the real density is higher than `peak`.
    pub fn capped(&self) -> bool {
        self.cap.is_some()
    }

    /// Refuses a result that reached its limit without saying why it stopped there (a
    /// cap, or the failure that ended it), or that ended with neither.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.peak >= self.limit && !self.capped() && self.first_failure.is_none() {
            anyhow::bail!(
                "density run under {}: {} instances at the ramp's limit of {}, not marked as capped",
                self.budget,
                self.peak,
                self.limit
            );
        }
        if !self.capped() && self.first_failure.is_none() {
            anyhow::bail!(
                "density run under {}: ended with neither a failure nor a cap",
                self.budget
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(peak: u32, limit: u32, cap: Option<&str>, failure: Option<&str>) -> DensityResult {
        DensityResult {
            budget: "test".into(),
            limit,
            started: peak,
            peak,
            cap: cap.map(String::from),
            first_failure: failure.map(String::from),
            ..Default::default()
        }
    }

    #[test]
    fn a_run_at_its_limit_must_say_it_is_capped() {
        assert!(result(120, 120, None, None).check().is_err());
        assert!(result(120, 120, None, Some("budget full")).check().is_ok());
        assert!(result(120, 120, Some("the ramp's limit"), None)
            .check()
            .is_ok());
        assert!(result(53, 1000, None, Some("instance 53 exited"))
            .check()
            .is_ok());
        assert!(result(53, 1000, None, None).check().is_err());
    }
}
