//! The same vTNT job in every runtime, and seed 000's evaluation as a library call.
//!
//! A *runtime* is a way to run one job (`vtnt trace ...`, `vtnt tnt ...`): a static
//! binary ([`native`]), an OCI bundle under runc ([`runc`]), a Docker image on Debian's
//! engine ([`docker`], Debian-based like the paper, or `scratch`), a full Debian VM with
//! systemd under QEMU ([`vm`]) and the unikernel microVM ([`microvm`]). Each has an
//! *image* built once and cached under [`paths::cache_dir`] (`/var/cache/vtnt`), served by
//! a local HTTP [`server`] with a bandwidth limit (the paper's download from the Internet),
//! fetched, started inside the lab's network (`vtnt lab up`), run, destroyed and cleaned
//! up ([`Runtime::run`]).
//!
//! The job's output (scamper JSON lines) is the same in every runtime once run-dependent
//! fields are taken out ([`job::normalize`]).
//!
//! [`bench_deploy`] measures, per runtime: image size, memory of one instance with and
//! without KSM, CPU time, deploy / execution / total time, and density under a 1 GB
//! memory cgroup and a CPU budget; [`report`] writes it as markdown with PNG plots in the
//! style of the paper's Figs. 4-8.
//!
//! Everything started here is stopped by a guard on drop: containers, VMs, engines,
//! cgroups, servers, temporary directories.
//!
//! ```no_run
//! use vtnt_deploy::{Runtime, job::Job, RunOptions};
//! let job = Job::new(["trace", "-P", "icmp-paris", "203.0.113.10"]);
//! let out = Runtime::Runc.run(&job, &RunOptions::default())?;
//! print!("{}", out.stdout);
//! # Ok::<(), anyhow::Error>(())
//! ```

pub mod bench;
pub mod cgroup;
pub mod debian;
pub mod docker;
pub mod instance;
pub mod job;
pub mod ksm;
pub mod microvm;
pub mod native;
pub mod paths;
pub mod plot;
// The only unsafe code: `proc` calls libc's kill(2) (a process group or one process) and
// sysconf(_SC_CLK_TCK), each call with its SAFETY note.
#[allow(unsafe_code)]
pub mod proc;
pub mod report;
pub mod runc;
pub mod server;
pub mod vm;

mod density;

pub use bench::{bench_deploy, BenchDeployArgs, Report};
pub use instance::{Instance, InstanceSpec, RunOutput};

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;

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
}

impl Runtime {
    pub const ALL: [Runtime; 6] = [
        Runtime::Native,
        Runtime::Runc,
        Runtime::Docker,
        Runtime::DockerScratch,
        Runtime::Vm,
        Runtime::Microvm,
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
        }
    }

    /// Whether it runs under QEMU, hence under TCG emulation on a host without usable KVM.
    pub fn is_vm(self) -> bool {
        matches!(self, Runtime::Vm | Runtime::Microvm)
    }

    /// Builds (or finds in the cache) this runtime's image.
    pub fn build_image(self, opts: &BuildOptions) -> anyhow::Result<ImageInfo> {
        match self {
            Runtime::Native => native::build_image(opts),
            Runtime::Runc => runc::build_image(opts),
            Runtime::Docker => docker::build_image(opts, docker::Flavor::Debian),
            Runtime::DockerScratch => docker::build_image(opts, docker::Flavor::Scratch),
            Runtime::Vm => vm::build_image(opts),
            Runtime::Microvm => microvm::build_image(opts),
        }
        .with_context(|| format!("building the {} image", self.name()))
    }

    /// Deploys from a fresh image server, runs `job` once, destroys and cleans up.
    pub fn run(self, job: &job::Job, opts: &RunOptions) -> anyhow::Result<RunOutput> {
        let image = self.build_image(&opts.build)?;
        let server = server::ImageServer::start(&[&image], opts.bandwidth_bps)?;
        let engine = EngineGuard::for_runtime(self, &opts.lab)?;
        let t0 = Instant::now();
        let deployed = instance::deploy(self, &image, &server, engine.docker(), &opts.lab)?;
        let deploy_time = t0.elapsed();
        let mut spec = InstanceSpec::new(job.clone(), opts.lab.clone());
        spec.dhcp = opts.dhcp;
        let mut inst = deployed.start(&spec)?;
        let mut out = inst.wait(opts.timeout)?;
        out.deploy_time = deploy_time;
        drop(inst);
        drop(deployed);
        Ok(out)
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
}

/// How [`Runtime::run`] runs.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub build: BuildOptions,
    /// The lab (its network namespace and VM front) the job runs in.
    pub lab: String,
    /// Image server bandwidth in bits per second.
    pub bandwidth_bps: u64,
    /// How long the job may take once started (VM boots under TCG are slow).
    pub timeout: Duration,
    /// The guest leases its address by DHCP (the microvm runtime only).
    pub dhcp: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            build: BuildOptions::default(),
            lab: DEFAULT_LAB.to_string(),
            bandwidth_bps: DEFAULT_BANDWIDTH_MBPS * 1_000_000,
            timeout: Duration::from_secs(600),
            dhcp: false,
        }
    }
}

/// The lab every runtime joins unless told otherwise (`vtnt lab up`'s default name).
pub const DEFAULT_LAB: &str = vtnt_lab_linux::DEFAULT_NAME;
/// The image server's default bandwidth, Mbit/s.
pub const DEFAULT_BANDWIDTH_MBPS: u64 = 100;

/// The Docker engine a run needs, started for it (and stopped on drop) when needed.
pub struct EngineGuard(Option<docker::Engine>);

impl EngineGuard {
    pub fn for_runtime(rt: Runtime, lab: &str) -> anyhow::Result<EngineGuard> {
        Ok(EngineGuard(match rt {
            Runtime::Docker | Runtime::DockerScratch => Some(docker::Engine::start(lab)?),
            _ => None,
        }))
    }
    pub fn none() -> EngineGuard {
        EngineGuard(None)
    }
    pub fn docker(&self) -> Option<&docker::Engine> {
        self.0.as_ref()
    }
}
