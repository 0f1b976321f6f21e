//! Which runtimes there are and what their images are: [`Runtime`] and its one table,
//! [`Runtime::entry`] (name, label, [`Driver`], limits), [`BuildOptions`] and
//! [`ImageInfo`]. A leaf: every runtime module builds an [`ImageInfo`] for its
//! [`Runtime`], and `drivers` (which dispatches to them by [`Driver`]) imports them all,
//! so these types live apart from both.

use std::path::PathBuf;

use crate::error::{IoContext, Result};

/// The runtimes, in the order reports list them.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum, serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// The static (musl) `vtnt` binary run as a process in the lab's namespace.
    Native,
    /// An OCI bundle (the static binary in a minimal rootfs) run by runc.
    Runc,
    /// Docker engine, Debian-based image (debootstrap minbase + vtnt): the paper's setup.
    Docker,
    /// Docker engine, `scratch` image holding only the static binary.
    DockerScratch,
    /// A Debian VM booting systemd (256 MB, like the paper's Vagrant box) under QEMU.
    Vm,
    /// The vTNT unikernel in a microVM: under vtnt-monitor where /dev/kvm works, else QEMU microvm.
    #[value(alias = "unikernel")]
    Microvm,
    /// The vTNT unikernel as a sandboxed Linux process (Solo5's spt model): a seccomp
    /// filter of six system calls, no VMM.
    Spt,
}

impl Runtime {
    pub const ALL: [Runtime; 7] = [
        Runtime::Native,
        Runtime::Runc,
        Runtime::Docker,
        Runtime::DockerScratch,
        Runtime::Vm,
        Runtime::Microvm,
        Runtime::Spt,
    ];

    /// Everything this crate knows of the runtime as data: the one table of runtimes
    /// (with the variant's doc above, the only place one is declared; its [`Driver`]
    /// says which module builds, installs and starts it).
    pub const fn entry(self) -> Entry {
        const fn e(
            name: &'static str,
            label: &'static str,
            colour: [u8; 3],
            driver: Driver,
        ) -> Entry {
            Entry {
                name,
                label,
                colour,
                driver,
                max_targets: None,
                slots: Slots::Unbounded,
            }
        }
        match self {
            Runtime::Native => e("native", "native", [204, 121, 167], Driver::Native),
            Runtime::Runc => e("runc", "runc", [0, 158, 115], Driver::Runc),
            Runtime::Docker => e(
                "docker",
                "Docker (Debian)",
                [0, 114, 178],
                Driver::Docker(Flavor::Debian),
            ),
            Runtime::DockerScratch => e(
                "docker-scratch",
                "Docker (scratch)",
                [86, 180, 233],
                Driver::Docker(Flavor::Scratch),
            ),
            Runtime::Vm => Entry {
                slots: Slots::LabVmPrefix,
                ..e("vm", "VM (Debian+systemd)", [230, 159, 0], Driver::Vm)
            },
            Runtime::Microvm => Entry {
                max_targets: Some(10_000),
                slots: Slots::VmFront,
                ..e("microvm", "vTNT (microVM)", [213, 94, 0], Driver::Microvm)
            },
            Runtime::Spt => Entry {
                max_targets: Some(8000),
                slots: Slots::VmFront,
                ..e("spt", "vTNT (spt process)", [0, 0, 0], Driver::Spt)
            },
        }
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        self.entry().name
    }

    /// The name used in figures (the paper's labels where there is one).
    pub fn label(self) -> &'static str {
        self.entry().label
    }

    /// Whether it runs under QEMU, hence under TCG emulation on a host without usable KVM.
    pub fn is_vm(self) -> bool {
        matches!(self.entry().driver, Driver::Vm | Driver::Microvm)
    }

    /// The most targets one job of this runtime takes, where the runtime sets a bound
    /// ([`Entry::max_targets`]).
    pub fn max_targets(self) -> Option<usize> {
        self.entry().max_targets
    }

    /// Whether its instances have a network interface of their own (a VM's NIC, the spt
    /// guest's frames), attached to a lab's VM front or a TAP device, rather than the
    /// host's or a namespace's stack.
    pub fn has_nic(self) -> bool {
        self.is_vm() || self.entry().driver == Driver::Spt
    }
}

/// The first IPv6 target of `job`'s own list, if any.
pub(crate) fn ipv6_target(job: &vtnt_job::JobSpec) -> Option<std::net::IpAddr> {
    match &job.targets {
        vtnt_job::Targets::List(targets) => targets.iter().copied().find(|t| t.is_ipv6()),
        _ => None,
    }
}

/// A runtime as data ([`Runtime::entry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The name used on the command line and in reports.
    pub name: &'static str,
    /// The name used in figures (the paper's labels where there is one).
    pub label: &'static str,
    /// Its series' colour in every figure, RGB: the Okabe-Ito palette, which stays
    /// distinct under the common colour-vision deficiencies (its yellow left out: too pale
    /// on white); Docker's two images are two blues, the unikernel's spt process black.
    pub colour: [u8; 3],
    /// The module that builds its image, installs it and starts its instances.
    pub driver: Driver,
    /// The most targets one job takes, where the runtime sets a bound: the spt guest
    /// reads its job, targets included, from its one argument (the kernel command line),
    /// which Linux caps at 128 KiB (`MAX_ARG_STRLEN`), at most 16 bytes a target; the
    /// unikernel's heap is a fixed 8 MiB arena (measured under vtnt-monitor: 15,000
    /// targets pinged 15,000 at once and 30,000 a thousand at once fit, 20,000 at once and
    /// 50,000 a thousand at once do not). The other runtimes take a long list as data
    /// ([`crate::guest::GuestJob`]) and run the host's `vtnt`: no bound of their own.
    pub max_targets: Option<usize>,
    /// What bounds how many of its instances a lab holds at once.
    pub slots: Slots,
}

/// The driver modules, each one way to build, install and start an instance (a runtime
/// is a driver with its settings: both Docker runtimes are the Docker driver).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// `crate::native`: the static binary as a process.
    Native,
    /// `crate::runc`: an OCI bundle under runc.
    Runc,
    /// `crate::docker`: an image of this base on Docker's engine (started for the run).
    Docker(Flavor),
    /// `crate::vm`: a Debian VM under QEMU.
    Vm,
    /// `crate::microvm`: the unikernel in a microVM.
    Microvm,
    /// `crate::spt`: the unikernel as a sandboxed process.
    Spt,
}

/// Which Docker image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Debian,
    Scratch,
}

/// What bounds how many instances of a runtime a lab holds at once (a limit of ours, not
/// the runtime's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slots {
    /// Nothing of ours: instances share the lab's namespace.
    Unbounded,
    /// The lab's VM front's fixed guest slots.
    VmFront,
    /// The guests the lab's VM prefix numbers.
    LabVmPrefix,
}

/// What every image build needs.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Rebuild even if the cache holds an image.
    pub rebuild: bool,
}

/// A built image: the file the server offers and what it weighs.
#[derive(Debug, Clone)]
pub struct ImageInfo {
    pub runtime: Runtime,
    /// The file downloaded at deploy time (binary, tarball, VM box).
    pub path: PathBuf,
    /// Bytes downloaded.
    pub download_bytes: u64,
    /// Bytes the image takes once installed (Docker's image size, the VM's disk
    /// allocation), which is what Fig. 4 compares.
    pub size_bytes: u64,
    /// How the size was measured.
    pub size_note: String,
    /// What the installed manifest pins the file to (the images that are installed
    /// artifacts: the static binary, the unikernel's); a deploy refuses a fetched copy
    /// that differs. `None` for images built on this host (containers, the VM).
    pub pin: Option<vtnt_artifacts::Pin>,
}

impl ImageInfo {
    /// The SHA-256 (lower-case hex) of the file a job of this image runs: the manifest's
    /// pin for an installed artifact (the static binary, the unikernel's), else the file
    /// built on this host hashed (the Docker tarball, the VM box, runc's bundle).
    pub fn sha256(&self) -> Result<String> {
        match &self.pin {
            Some(p) => Ok(p.sha256.clone()),
            None => vtnt_artifacts::Pin::of(&self.path)
                .map(|p| p.sha256)
                .doing(|| format!("hashing image {}", self.path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn the_table_agrees_with_the_command_line_and_reports() {
        // ALL lists every variant once, in clap's (declaration) order
        assert_eq!(Runtime::value_variants(), &Runtime::ALL[..]);
        for rt in Runtime::ALL {
            let e = rt.entry();
            assert_eq!(rt.to_possible_value().unwrap().get_name(), e.name);
            assert_eq!(serde_json::to_value(rt).unwrap(), e.name);
            assert!(!e.label.is_empty(), "{rt:?}");
            // a guest with a NIC of its own is what the lab's slots bound
            assert_eq!(rt.has_nic(), e.slots != Slots::Unbounded, "{rt:?}");
        }
        let names: std::collections::HashSet<_> = Runtime::ALL.map(Runtime::name).into();
        assert_eq!(names.len(), Runtime::ALL.len());
    }
}
