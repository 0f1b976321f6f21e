//! Which runtimes there are and what their images are: [`Runtime`] (names and labels),
//! [`BuildOptions`] and [`ImageInfo`]. A leaf: every runtime module builds an
//! [`ImageInfo`] for its [`Runtime`], and the crate root (which dispatches to them in
//! `Runtime::build_image` and `Runtime::run`) imports them all, so these types live
//! apart from both.

use std::path::PathBuf;

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

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Native => "native",
            Runtime::Runc => "runc",
            Runtime::Docker => "docker",
            Runtime::DockerScratch => "docker-scratch",
            Runtime::Vm => "vm",
            Runtime::Microvm => "microvm",
            Runtime::Spt => "spt",
        }
    }

    /// The name used in figures (the paper's labels where there is one).
    pub fn label(self) -> &'static str {
        match self {
            Runtime::Native => "native",
            Runtime::Runc => "runc",
            Runtime::Docker => "Docker (Debian)",
            Runtime::DockerScratch => "Docker (scratch)",
            Runtime::Vm => "VM (Debian+systemd)",
            Runtime::Microvm => "vTNT (microVM)",
            Runtime::Spt => "vTNT (spt process)",
        }
    }

    /// Whether it runs under QEMU, hence under TCG emulation on a host without usable KVM.
    pub fn is_vm(self) -> bool {
        matches!(self, Runtime::Vm | Runtime::Microvm)
    }

    /// The most targets one job of this runtime takes, where the runtime sets a bound:
    /// the spt guest reads its job, targets included, from its one argument (the kernel
    /// command line), which Linux caps at 128 KiB (`MAX_ARG_STRLEN`), at most 16 bytes a
    /// target; the unikernel's heap is a fixed 8 MiB arena (measured under vtnt-monitor:
    /// 15,000 targets pinged 15,000 at once and 30,000 a thousand at once fit, 20,000 at
    /// once and 50,000 a thousand at once do not). The other runtimes take a long list as
    /// data ([`crate::guest::GuestJob`]) and run the host's `vtnt`: no bound of their own.
    pub fn max_targets(self) -> Option<usize> {
        match self {
            Runtime::Spt => Some(8000),
            Runtime::Microvm => Some(10_000),
            _ => None,
        }
    }

    /// Whether its instances have a network interface of their own (a VM's NIC, the spt
    /// guest's frames), attached to a lab's VM front or a TAP device, rather than the
    /// host's or a namespace's stack.
    pub fn has_nic(self) -> bool {
        self.is_vm() || self == Runtime::Spt
    }
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
