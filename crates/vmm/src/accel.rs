//! Is KVM usable? Present is not enough: some hosts expose a `/dev/kvm` that hangs
//! ordinary guests (e.g. PVM-backed ones). So "usable" means our own image booted under
//! `-accel kvm` (microvm, `-- boot`) and reported success within [`PROBE_TIMEOUT`].
//!
//! Order: `VTNT_ACCEL=tcg|kvm` wins; no read-write `/dev/kvm` means TCG; otherwise the
//! probe decides, cached per process and in `$TMPDIR/vtnt-kvm-usable` (keyed by the
//! host's boot id, so a reboot re-probes). When unsure, TCG.

use crate::qemu::{self, Accel, Machine, VmConfig};
use crate::GuestStatus;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// How long the KVM probe boot may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The override variable.
pub const ENV: &str = "VTNT_ACCEL";

static USABLE: OnceLock<bool> = OnceLock::new();

/// The accelerator to use for `image` under [`Accel::Auto`].
pub fn resolve(image: &Path) -> Accel {
    match std::env::var(ENV).as_deref() {
        Ok("kvm") => return Accel::Kvm,
        Ok("tcg") => return Accel::Tcg,
        _ => {}
    }
    if kvm_usable(image) {
        Accel::Kvm
    } else {
        Accel::Tcg
    }
}

/// Whether KVM can run `image` (probed once, see the module docs).
pub fn kvm_usable(image: &Path) -> bool {
    *USABLE.get_or_init(|| {
        if std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/kvm")
            .is_err()
        {
            return false;
        }
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .unwrap_or_default()
            .trim()
            .to_string();
        let cache = std::env::temp_dir().join("vtnt-kvm-usable");
        if let Ok(s) = std::fs::read_to_string(&cache) {
            if let Some((id, v)) = s.trim().split_once(' ') {
                if id == boot_id && !boot_id.is_empty() {
                    return v == "1";
                }
            }
        }
        let usable = probe(image);
        let _ = std::fs::write(&cache, format!("{boot_id} {}\n", u8::from(usable)));
        usable
    })
}

/// Boots `image` once under KVM.
pub fn probe(image: &Path) -> bool {
    let mut cfg = VmConfig::new(image.to_path_buf(), Machine::Microvm, "-- boot");
    cfg.accel = Accel::Kvm;
    cfg.timeout = PROBE_TIMEOUT;
    matches!(qemu::run(&cfg), Ok(o) if o.status == GuestStatus::Exited(0))
}
