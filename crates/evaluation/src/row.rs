//! A row of a benchmark's report: a runtime, and for the microVM the VMM and QEMU
//! accelerator it runs under, named `RUNTIME` or `microvm:VMM` (`microvm:qemu-tcg`).
//! `vtnt bench micro` and `vtnt bench net` take their rows as these names, and the
//! figures colour a row by its runtime ([`crate::plot`]).

use serde::{Serialize, Serializer};
use vtnt_runtimes::Runtime;
use vtnt_unikernel::launch::Vmm;
use vtnt_unikernel::qemu::Accel;

/// A runtime, with the VMM and QEMU accelerator of a microVM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub runtime: Runtime,
    pub vmm: Vmm,
    pub accel: Accel,
}

/// The microVM rows by name, after `microvm:`.
const MICROVM_ROWS: [(&str, Vmm, Accel); 5] = [
    ("monitor", Vmm::Monitor, Accel::Auto),
    ("qemu", Vmm::Qemu, Accel::Auto),
    ("qemu-kvm", Vmm::Qemu, Accel::Kvm),
    ("qemu-tcg", Vmm::Qemu, Accel::Tcg),
    ("firecracker", Vmm::Firecracker, Accel::Auto),
];

impl Row {
    /// A runtime's row (its default VMM, for the microVM).
    pub const fn of(runtime: Runtime) -> Row {
        Row {
            runtime,
            vmm: Vmm::Auto,
            accel: Accel::Auto,
        }
    }

    /// Why the VMM this row names cannot run here, if it cannot.
    pub fn vmm_missing(self) -> Option<&'static str> {
        match (self.runtime, self.vmm) {
            (Runtime::Microvm, Vmm::Monitor) if !vtnt_unikernel::monitor::usable() => {
                Some("vtnt-monitor cannot run here: its binary or a usable /dev/kvm is missing")
            }
            (Runtime::Microvm, Vmm::Firecracker) if vtnt_unikernel::firecracker::binary().is_none() => {
                Some("`firecracker` is not installed (no Debian package: github.com/firecracker-microvm/firecracker releases)")
            }
            (Runtime::Microvm, Vmm::Qemu) if vtnt_unikernel::which("qemu-system-x86_64").is_none() => {
                Some("`qemu-system-x86_64` is not installed (Debian package qemu-system-x86)")
            }
            (Runtime::Microvm, Vmm::Qemu) if self.accel == Accel::Kvm && vtnt_unikernel::accel::kvm_kind().is_none() => {
                Some("no usable /dev/kvm for QEMU")
            }
            _ => None,
        }
    }

    /// Its label in figures: the runtime's, and the microVM's VMM when the row names it.
    pub fn label(self) -> String {
        match (self.runtime, self.vmm) {
            (Runtime::Microvm, Vmm::Monitor) => "vTNT (microVM, vtnt-monitor)".into(),
            (Runtime::Microvm, Vmm::Firecracker) => "vTNT (microVM, Firecracker)".into(),
            (Runtime::Microvm, Vmm::Qemu) => match self.accel {
                Accel::Auto => "vTNT (microVM, QEMU)".into(),
                Accel::Kvm => "vTNT (microVM, QEMU+KVM)".into(),
                Accel::Tcg => "vTNT (microVM, QEMU+TCG)".into(),
            },
            (rt, _) => rt.label().into(),
        }
    }
}

impl std::str::FromStr for Row {
    type Err = String;

    /// A runtime's name, or `microvm:monitor|qemu|qemu-kvm|qemu-tcg|firecracker`.
    fn from_str(s: &str) -> Result<Row, String> {
        use clap::ValueEnum;
        let (name, vmm) = s.split_once(':').unwrap_or((s, ""));
        let runtime = Runtime::from_str(name, false).map_err(|_| {
            format!(
                "`{s}`: not a runtime ({}; microvm:monitor, microvm:qemu, microvm:qemu-kvm, microvm:qemu-tcg, microvm:firecracker)",
                Runtime::ALL.map(Runtime::name).join(", ")
            )
        })?;
        let (vmm, accel) = match (runtime, vmm) {
            (_, "") => (Vmm::Auto, Accel::Auto),
            (Runtime::Microvm, v) => MICROVM_ROWS
                .iter()
                .find(|r| r.0 == v)
                .map(|r| (r.1, r.2))
                .ok_or_else(|| {
                    format!(
                        "`{s}`: the microVM's VMM is monitor, qemu, qemu-kvm, qemu-tcg or firecracker"
                    )
                })?,
            _ => return Err(format!("`{s}`: only the microvm runtime takes a VMM")),
        };
        Ok(Row {
            runtime,
            vmm,
            accel,
        })
    }
}

impl std::fmt::Display for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.runtime.name())?;
        match MICROVM_ROWS
            .iter()
            .find(|r| (r.1, r.2) == (self.vmm, self.accel))
        {
            Some(r) if self.runtime == Runtime::Microvm => write!(f, ":{}", r.0),
            _ => Ok(()),
        }
    }
}

/// As its name.
impl Serialize for Row {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_parse_and_print() {
        for s in [
            "native",
            "docker-scratch",
            "microvm",
            "microvm:monitor",
            "microvm:qemu",
            "microvm:qemu-kvm",
            "microvm:qemu-tcg",
            "microvm:firecracker",
            "spt",
        ] {
            assert_eq!(s.parse::<Row>().unwrap().to_string(), s);
        }
        for (bad, why) in [
            ("nope", "not a runtime"),
            (
                "microvm:xen",
                "monitor, qemu, qemu-kvm, qemu-tcg or firecracker",
            ),
            ("native:qemu", "only the microvm runtime"),
        ] {
            let e = bad.parse::<Row>().unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert_eq!(
            serde_json::to_string(&"microvm:qemu-tcg".parse::<Row>().unwrap()).unwrap(),
            "\"microvm:qemu-tcg\""
        );
        assert_eq!(Row::of(Runtime::Vm).to_string(), "vm");
    }
}
