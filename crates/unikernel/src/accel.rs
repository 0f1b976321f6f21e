//! Which accelerator runs a VM, and how QEMU is told: [`Accelerator`] is what every
//! figure reports (`KVM`, `PVM-KVM` or `TCG`), [`Accelerator::qemu_args`] its `-accel`
//! and `-cpu` options.
//!
//! KVM comes in two kinds. On hardware virtualisation (VMX/SVM: `kvm_intel`/`kvm_amd`)
//! QEMU takes `-cpu host`. On PVM (`kvm_pvm`: pagetable-based virtualisation, guests run
//! in the host's ring 3 without VMX/SVM) QEMU 7.2's `-cpu host` aborts at start-up with
//! `failed to set MSR 0x10a` (IA32_ARCH_CAPABILITIES, which PVM does not emulate), so the
//! CPU model is `host,-arch-capabilities`. The kind is read from `/sys/module` and, when
//! that says hardware but the boot fails, found by trying the PVM model.
//!
//! Order for the unikernel under QEMU (`qemu::resolve`, which boots the probe; this
//! module is below `qemu` and boots nothing; `vtnt-monitor`, the default VMM where
//! `/dev/kvm` works, always runs on KVM, natively even under PVM because its guest runs in
//! ring 3): `VTNT_ACCEL=tcg|kvm` wins (`kvm` takes this
//! host's kind); no read-write `/dev/kvm` means TCG; PVM means TCG (see the last
//! paragraph: measured slower, and not yet equal); otherwise our own image is booted
//! once under KVM (microvm, `-- boot`, within `qemu::PROBE_TIMEOUT`), cached per process and
//! in `$TMPDIR/vtnt-accel` (keyed by the host's boot id, so a reboot re-probes). When
//! unsure, TCG.
//!
//! A Linux guest ([`for_linux`], the full Debian VM) is decided apart, because PVM cannot
//! boot a stock kernel: the spec (`Documentation/virt/kvm/x86/pvm-spec.rst` in
//! virt-pvm/linux) runs the guest's supervisor mode in the host's ring 3 with the IDT,
//! TR and GDT ignored (events arrive through `MSR_PVM_EVENT_ENTRY` and a shared
//! `pvm_vcpu_struct` instead), the interrupt flag is a field of that struct, and page
//! walks are confined to the lower half and a window of the upper half that excludes the
//! top 2 GiB, where a stock x86_64 kernel is linked. Only a kernel built as a PVM guest
//! (`CONFIG_KVM_PVM_GUEST`, relocatable into that window, with PVM event entry points;
//! nanovms/nanos added the same to its unikernel in its pull request 2102) boots there;
//! Debian's `linux-image-amd64` is not one: tried here (q35, 256 MiB, `earlyprintk`) it
//! printed `Probing EDD (edd=off to disable)... ok` (its real-mode set-up, which PVM
//! emulates) and nothing more in 30 s, the 64-bit kernel never reaching its console.
//! Our unikernel boots and runs its jobs there: it lives in the lower half (identity
//! mapped) and needs no exception delivered. So under PVM a Linux guest gets TCG (unless
//! `VTNT_ACCEL=kvm` insists), under hardware KVM it gets KVM.
//!
//! PVM-KVM is not fast for the unikernel under QEMU either, on the host measured: PVM starts a vCPU
//! in an emulated "non-PVM mode" and is meant to switch it to native execution once it
//! reaches 64-bit supervisor mode, but that host's `kvm_pvm` never switched ours (with
//! CR0 NE/WP/AM/MP, EFER SCE/NXE, MSR_STAR, null data segments, a second far return
//! tried), so KVM's instruction emulator runs the whole guest, at about 1 us an
//! instruction: slower than TCG's translated code (`vtnt-kernel-bench --breakdown`
//! counts the emulated instructions per boot step).

use std::path::Path;

/// The override variable.
pub const ENV: &str = "VTNT_ACCEL";
/// File name (in the temporary directory) of the cached probe result.
pub const CACHE: &str = "vtnt-accel";

/// The accelerator a VM ran under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Accelerator {
    /// KVM on hardware virtualisation (VMX/SVM).
    Kvm,
    /// KVM provided by PVM (`kvm_pvm`), no hardware virtualisation.
    PvmKvm,
    /// QEMU's emulator.
    Tcg,
}

impl Accelerator {
    /// `KVM`, `PVM-KVM` or `TCG`, as figures are labelled.
    pub fn name(self) -> &'static str {
        match self {
            Accelerator::Kvm => "KVM",
            Accelerator::PvmKvm => "PVM-KVM",
            Accelerator::Tcg => "TCG",
        }
    }

    /// Whether this is KVM of either kind.
    pub fn is_kvm(self) -> bool {
        self != Accelerator::Tcg
    }

    /// QEMU's options selecting it: `-accel` and, for KVM, the CPU model that works on
    /// this kind of KVM.
    pub fn qemu_args(self) -> &'static [&'static str] {
        match self {
            Accelerator::Kvm => &["-accel", "kvm", "-cpu", "host"],
            Accelerator::PvmKvm => &["-accel", "kvm", "-cpu", "host,-arch-capabilities"],
            // QEMU's TCG keeps up to 1 GiB of translated code per VM by default, filled as a
            // Linux guest boots: memory no hardware-accelerated VM spends, which would let
            // emulation, not the VM, decide memory figures and densities
            Accelerator::Tcg => &["-accel", "tcg,tb-size=128"],
        }
    }

    /// The word stored in the cache file.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Accelerator::Kvm => "kvm",
            Accelerator::PvmKvm => "pvm-kvm",
            Accelerator::Tcg => "tcg",
        }
    }

    fn from_word(w: &str) -> Option<Accelerator> {
        [Accelerator::Kvm, Accelerator::PvmKvm, Accelerator::Tcg]
            .into_iter()
            .find(|a| a.word() == w)
    }
}

impl std::fmt::Display for Accelerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What `VTNT_ACCEL` asks for, if anything (`kvm`: this host's kind of KVM).
pub fn overridden() -> Option<Accelerator> {
    match std::env::var(ENV).as_deref() {
        Ok("kvm") => Some(kvm_kind().unwrap_or(Accelerator::Kvm)),
        Ok("tcg") => Some(Accelerator::Tcg),
        _ => None,
    }
}

/// This host's kind of KVM from its loaded modules, if `/dev/kvm` opens read-write.
pub fn kvm_kind() -> Option<Accelerator> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .ok()?;
    let loaded = |m: &str| Path::new("/sys/module").join(m).exists();
    let hardware = loaded("kvm_intel") || loaded("kvm_amd");
    Some(if loaded("kvm_pvm") && !hardware {
        Accelerator::PvmKvm
    } else {
        Accelerator::Kvm
    })
}

/// The accelerator for a stock Linux guest: KVM on hardware virtualisation, TCG under
/// PVM (which cannot boot it: see the module docs) or without KVM; `VTNT_ACCEL` wins.
pub fn for_linux() -> Accelerator {
    overridden().unwrap_or(match kvm_kind() {
        Some(Accelerator::Kvm) => Accelerator::Kvm,
        _ => Accelerator::Tcg,
    })
}

/// Why [`for_linux`] chose TCG on a host with KVM, for reports; `None` otherwise.
pub fn linux_tcg_reason() -> Option<&'static str> {
    (overridden().is_none() && kvm_kind() == Some(Accelerator::PvmKvm)).then_some(
        "KVM here is PVM, which cannot boot a stock Linux kernel (it needs a PVM guest kernel): the full VM runs under TCG",
    )
}

/// The probe's result cached for this host boot, if any (no probe).
pub fn cached() -> Option<Accelerator> {
    recalled(CACHE).and_then(|w| Accelerator::from_word(&w))
}

/// The word a probe stored under `name` in the temporary directory during this host
/// boot, if any.
pub(crate) fn recalled(name: &str) -> Option<String> {
    let s = std::fs::read_to_string(std::env::temp_dir().join(name)).ok()?;
    let (id, w) = s.trim().split_once(' ')?;
    let boot_id = boot_id();
    (id == boot_id && !boot_id.is_empty()).then(|| w.to_string())
}

/// Stores a probe's `word` under `name` for the rest of this host boot ([`recalled`]).
pub(crate) fn remember(name: &str, word: &str) {
    let _ = std::fs::write(
        std::env::temp_dir().join(name),
        format!("{} {word}\n", boot_id()),
    );
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_words_and_cpu_models() {
        for a in [Accelerator::Kvm, Accelerator::PvmKvm, Accelerator::Tcg] {
            assert_eq!(Accelerator::from_word(a.word()), Some(a));
        }
        assert_eq!(Accelerator::PvmKvm.to_string(), "PVM-KVM");
        assert!(Accelerator::PvmKvm
            .qemu_args()
            .contains(&"host,-arch-capabilities"));
        assert_eq!(Accelerator::Tcg.qemu_args(), ["-accel", "tcg,tb-size=128"]);
        assert!(!Accelerator::Tcg.is_kvm() && Accelerator::PvmKvm.is_kvm());
        assert_eq!(Accelerator::from_word("1"), None);
    }
}
