//! The same vTNT job in every runtime: build an image, deploy it, run an instance,
//! destroy it.
//!
//! A *runtime* is a way to run one job (`vtnt trace ...`, `vtnt tnt ...`): a static
//! binary ([`native`]), an OCI bundle under runc ([`runc`]), a Docker image on Debian's
//! engine ([`docker`], Debian-based like the paper, or `scratch`), a full Debian VM with
//! systemd under QEMU ([`vm`]), the unikernel microVM ([`microvm`]) and the unikernel as a
//! sandboxed process ([`spt`]). Each has an
//! *image* built once and cached under [`paths::cache_dir`] (`/var/cache/vtnt`), served by
//! a local HTTP [`server`] with a bandwidth limit (the paper's download from the Internet),
//! fetched, started inside the lab's network (`vtnt lab up`), run, destroyed and cleaned
//! up ([`Runtime::run`], or step by step with [`instance`]).
//!
//! The job's output (scamper JSON lines) is the same in every runtime once run-dependent
//! fields are taken out ([`normalize()`]). Seed 000's evaluation of the runtimes is
//! `vtnt-evaluation`'s.
//!
//! Everything started here is stopped by a guard on drop: containers, VMs, engines,
//! cgroups, servers, temporary directories.
//!
//! What it may import: `vtnt-measure` (processes, cgroups, KSM), `vtnt-unikernel`,
//! `vtnt-lab-linux` and `vtnt-policy`; never `vtnt-evaluation`. Inside, imports go one
//! way, from the top down:
//! - this root (`Runtime::run`, [`EngineGuard`]), [`instance`] (which starts, samples
//!   and destroys any runtime's instance) and [`scope`] (which removes what the
//!   instances of a dead process left) use the runtime modules; `drivers`
//!   (`Runtime::build_image`, the install) is the one place a driver module is chosen by
//!   a runtime's [`Driver`], which its entry in [`Runtime::entry`] names;
//! - the runtime modules ([`native`], [`runc`], [`docker`], [`vm`], [`microvm`], [`spt`]) use
//!   [`spec`] (what to start), [`runtime`], [`guest`], [`ran`] (what a run left),
//!   [`paths`], [`debian`] and `vtnt-measure`, never [`instance`] or this root;
//! - [`server`] uses [`runtime`]; [`debian`] uses [`paths`]; [`spec`] uses [`guest`];
//!   [`runtime`], [`guest`], [`ran`] and [`paths`] use no other module but `error` ([`Error`], what
//!   every module returns: variants a caller matches on, texts as users read them; print
//!   one with its causes as `anyhow`'s `{:#}` does), which uses none.
//!
//! ```no_run
//! use vtnt_runtimes::{Runtime, RunOptions};
//! use vtnt_job::{parse_words, Vantage};
//! let words = ["trace", "-P", "icmp-paris", "203.0.113.10"].map(String::from);
//! let job = parse_words(&words, Vantage::Lab)?;
//! let out = Runtime::Runc.run(&job.spec, &RunOptions::default())?;
//! print!("{}", out.stdout);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod debian;
pub mod docker;
mod drivers;
mod error;
pub mod guest;
pub mod instance;
pub mod microvm;
pub mod native;
pub mod net;
mod normalize;
pub mod paths;
pub mod ran;
pub mod runc;
pub mod runtime;
pub mod scope;
pub mod server;
pub mod spec;
pub mod spt;
pub mod vm;

// vtnt-measure's modules, under the paths they had when they were modules of this crate
// (`crate::proc::Supervised`, `crate::cgroup::Cgroup`): imports of another crate, not
// modules of this one, and private (callers use vtnt-measure).
use vtnt_measure::{cgroup, ksm, proc};

pub use error::{timed_out, BoxError, Error, Result};
pub use instance::{Instance, LineTap, RunOutput};
pub use normalize::normalize;
pub use runtime::{BuildOptions, Driver, Entry, ImageInfo, Runtime, Slots};
pub use spec::InstanceSpec;

use std::time::{Duration, Instant};

impl Runtime {
    /// Deploys from a fresh image server, runs `job` once, destroys and cleans up.
    pub fn run(self, job: &vtnt_job::JobSpec, opts: &RunOptions) -> Result<RunOutput> {
        self.run_inner(job, opts, None)
    }

    /// [`Runtime::run`], handing each line of the job's output (not empty) to `each` as
    /// the instance prints it (read every [`STREAM_POLL`] by a thread of its own, so the
    /// run's times are as `run`'s): results leave while the job runs. The lines handed
    /// over are the first of the output's ([`RunOutput::stdout`]'s, not empty), which
    /// holds them all.
    pub fn run_streaming(
        self,
        job: &vtnt_job::JobSpec,
        opts: &RunOptions,
        mut each: impl FnMut(String) + Send,
    ) -> Result<RunOutput> {
        self.run_inner(job, opts, Some(&mut each))
    }

    fn run_inner(
        self,
        job: &vtnt_job::JobSpec,
        opts: &RunOptions,
        each: Option<&mut (dyn FnMut(String) + Send)>,
    ) -> Result<RunOutput> {
        // a network that is not there (a lab not up, a TAP missing), or one without the
        // IPv6 the job needs, is said before any image is built (with --dhcp the
        // unikernel takes IPv6 from the link: `ip6=auto`, DHCPv6 from a lab's front)
        opts.net.check_job(job)?;
        opts.net.attach(self)?;
        let image = self.build_image(&opts.build)?;
        let name = server::file_name(&image)?;
        let mut _own_server = None;
        let fetch: Box<FetchFile> = match &opts.images {
            ImageSource::Fetch(f) => Box::new(move |file| f(&name, file)),
            ImageSource::Server(base) => {
                let url = format!("{base}/{name}");
                Box::new(move |file| Ok(server::fetch(&url, file)?))
            }
            ImageSource::Own => {
                let s = server::ImageServer::start(&[&image], opts.bandwidth_bps)?;
                let url = s.url(self)?;
                _own_server = Some(s);
                Box::new(move |file| Ok(server::fetch(&url, file)?))
            }
        };
        let engine = EngineGuard::for_runtime(self, &opts.net)?;
        let t0 = Instant::now();
        let deployed = instance::deploy_from(self, &image, &fetch, engine.docker(), &opts.net)?;
        let deploy_time = t0.elapsed();
        let mut spec = InstanceSpec::new(job.clone());
        spec.dhcp = opts.dhcp;
        spec.vmm = opts.vmm;
        spec.guest_timeout = opts.timeout;
        let mut inst = deployed.start(&spec)?;
        let mut out = match each {
            None => inst.wait(opts.timeout)?,
            Some(each) => {
                let mut tap = inst.tap();
                let waited = std::sync::atomic::AtomicBool::new(false);
                std::thread::scope(|s| {
                    s.spawn(|| loop {
                        let last = waited.load(std::sync::atomic::Ordering::Acquire);
                        tap.new_lines().into_iter().for_each(&mut *each);
                        if last {
                            break;
                        }
                        std::thread::sleep(STREAM_POLL);
                    });
                    let out = inst.wait(opts.timeout);
                    waited.store(true, std::sync::atomic::Ordering::Release);
                    out
                })?
            }
        };
        out.deploy_time = deploy_time;
        drop(inst);
        drop(deployed);
        Ok(out)
    }
}

/// How [`Runtime::run`] runs.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub build: BuildOptions,
    /// The network the job probes (a lab's by default).
    pub net: net::Network,
    /// Image server bandwidth in bits per second.
    pub bandwidth_bps: u64,
    /// Where the image comes from.
    pub images: ImageSource,
    /// How long the job may take once started (VM boots under TCG are slow).
    pub timeout: Duration,
    /// The guest leases its address by DHCP (the microvm runtime only).
    pub dhcp: bool,
    /// The VMM of the microvm runtime.
    pub vmm: vtnt_unikernel::launch::Vmm,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            build: BuildOptions::default(),
            net: net::Network::Lab(DEFAULT_LAB.to_string()),
            bandwidth_bps: DEFAULT_BANDWIDTH_MBPS * 1_000_000,
            images: ImageSource::Own,
            timeout: Duration::from_secs(600),
            dhcp: false,
            vmm: vtnt_unikernel::launch::Vmm::Auto,
        }
    }
}

/// A fetcher of images: (the image's file name, where to write it) to bytes written.
///
/// Its error is any error (a [`BoxError`]), not this crate's: a fetcher is the caller's
/// (the fleet reads a NATS object store), its failures are the caller's to say, and
/// [`Error::Fetch`] keeps them, chain and all, under "fetching the ... image".
pub type FetchImage =
    dyn Fn(&str, &std::path::Path) -> std::result::Result<u64, BoxError> + Send + Sync;

/// Fetches one run's image into a file, returning the bytes fetched.
type FetchFile<'a> = dyn Fn(&std::path::Path) -> std::result::Result<u64, BoxError> + 'a;

/// Where [`Runtime::run`] fetches its image from.
#[derive(Clone, Default)]
pub enum ImageSource {
    /// An image server of the run's own, at [`RunOptions::bandwidth_bps`].
    #[default]
    Own,
    /// An image server (`http://HOST:PORT`) serving the same images by file name
    /// ([`server::ImageServer`]).
    Server(String),
    /// A fetcher of the caller's (a NATS object store, for the fleet's agents).
    Fetch(std::sync::Arc<FetchImage>),
}

impl std::fmt::Debug for ImageSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImageSource::Own => f.write_str("Own"),
            ImageSource::Server(url) => write!(f, "Server({url})"),
            ImageSource::Fetch(_) => f.write_str("Fetch"),
        }
    }
}

/// How often [`Runtime::run_streaming`] reads what the instance printed.
pub const STREAM_POLL: Duration = Duration::from_millis(50);

/// The lab every runtime joins unless told otherwise (`vtnt lab up`'s default name).
pub const DEFAULT_LAB: &str = vtnt_lab_linux::DEFAULT_NAME;
/// The image server's default bandwidth, Mbit/s.
pub const DEFAULT_BANDWIDTH_MBPS: u64 = 100;

/// The Docker engine a run needs, started for it (and stopped on drop) when needed.
pub struct EngineGuard(Option<docker::Engine>);

impl EngineGuard {
    pub fn for_runtime(rt: Runtime, net: &net::Network) -> Result<EngineGuard> {
        Ok(EngineGuard(match rt {
            rt if matches!(rt.entry().driver, runtime::Driver::Docker(_)) => {
                Some(docker::Engine::start(net.netns())?)
            }
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
