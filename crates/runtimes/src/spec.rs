//! What to start: [`InstanceSpec`], handed by `instance` to every runtime
//! module's `start`. Its own module so that the runtime modules need not import
//! `instance`, which imports them.

use std::time::Duration;

use vtnt_job::JobSpec;
use vtnt_unikernel::launch::Vmm;
use vtnt_unikernel::qemu::Accel;

/// What to start.
#[derive(Debug, Clone)]
pub struct InstanceSpec {
    pub job: JobSpec,
    /// Distinguishes concurrent instances (container names, guest addresses).
    pub index: u32,
    /// The budget group the instance's own group goes under (relative, `vtnt/...`).
    pub cgroup_parent: Option<String>,
    /// Sample memory every this often while waiting (None: only CPU and time).
    pub sample_every: Option<Duration>,
    /// The guest leases its address by DHCP (microvm only; the others ignore it).
    pub dhcp: bool,
    /// The VMM of a microvm instance (the others ignore it).
    pub vmm: Vmm,
    /// QEMU's accelerator for a microvm instance under QEMU (the others ignore it).
    pub accel: Accel,
    /// How long a microvm guest may run before its watchdog stops it.
    pub guest_timeout: Duration,
}

impl InstanceSpec {
    pub fn new(job: JobSpec) -> InstanceSpec {
        InstanceSpec {
            job,
            index: 0,
            cgroup_parent: None,
            sample_every: Some(Duration::from_millis(100)),
            dhcp: false,
            vmm: Vmm::Auto,
            accel: Accel::Auto,
            guest_timeout: Duration::from_secs(600),
        }
    }
}
