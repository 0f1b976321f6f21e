//! Where each [`Driver`] plugs in: its image build, its accelerator, its install (what a
//! [`Kind`] holds for starting instances) and how a run's output is read back ([`read_run`],
//! [`job_line`]), one arm per driver in each; a runtime
//! that reuses a driver (as `docker-scratch` does Docker's) needs no arm here, only its
//! entry in [`Runtime::entry`].

use std::path::{Path, PathBuf};

use crate::error::{Context, Error, Result};

use crate::proc::Finished;
use crate::ran::Ran;
use crate::runtime::{BuildOptions, Driver, ImageInfo, Runtime};
use crate::{docker, microvm, native, runc, spt, vm};

impl Runtime {
    /// Builds (or finds in the cache) this runtime's image.
    pub fn build_image(self, opts: &BuildOptions) -> Result<ImageInfo> {
        match self.entry().driver {
            Driver::Native => native::build_image(opts),
            Driver::Runc => runc::build_image(opts),
            Driver::Docker(flavor) => docker::build_image(opts, flavor),
            Driver::Vm => vm::build_image(opts),
            Driver::Microvm => microvm::build_image(opts),
            Driver::Spt => spt::build_image(opts),
        }
        .during(|| format!("building the {} image", self.name()))
    }

    /// The accelerator an instance of `image` runs under: `None` for the runtimes that
    /// run on this host's kernel.
    pub fn accelerator(self, image: &ImageInfo) -> Option<vtnt_unikernel::accel::Accelerator> {
        match self.entry().driver {
            Driver::Vm => Some(vm::accel()),
            Driver::Microvm => Some(microvm::accel(
                &image.path,
                vtnt_unikernel::launch::Vmm::Auto,
                vtnt_unikernel::qemu::Accel::Auto,
            )),
            _ => None,
        }
    }
}

/// An installed image, as its driver starts instances from it.
pub(crate) enum Kind {
    Native {
        bin: PathBuf,
    },
    Runc {
        rootfs: PathBuf,
    },
    Docker {
        client: docker::Client,
        image: String,
    },
    Vm {
        box_dir: PathBuf,
    },
    Microvm {
        image: PathBuf,
    },
    Spt {
        image: PathBuf,
    },
}

/// Installs the fetched image `file` of `rt` (in `dir`, the deploy's own directory);
/// `engine` is needed for Docker images.
pub(crate) fn install(
    rt: Runtime,
    file: PathBuf,
    dir: &Path,
    engine: Option<&docker::Engine>,
) -> Result<Kind> {
    Ok(match rt.entry().driver {
        Driver::Native => Kind::Native {
            bin: native::install(&file)?,
        },
        Driver::Runc => Kind::Runc {
            rootfs: runc::install(&file, dir)?,
        },
        Driver::Docker(flavor) => {
            let e = engine.ok_or_else(|| {
                Error::Runtime("a Docker image needs the engine (EngineGuard)".into())
            })?;
            Kind::Docker {
                client: e.client(),
                image: e.client().load(&file, flavor)?,
            }
        }
        Driver::Vm => Kind::Vm {
            box_dir: vm::install(&file, dir)?,
        },
        Driver::Microvm => Kind::Microvm { image: file },
        Driver::Spt => Kind::Spt {
            image: spt::install(&file)?,
        },
    })
}

/// Reads the run of a process the driver started (the microVM's thread reads its own,
/// [`microvm::Instance::wait`]); `spawn_ns` is when an spt guest was spawned.
pub(crate) fn read_run(driver: Driver, fin: Finished, spawn_ns: Option<u64>) -> Ran {
    match driver {
        Driver::Vm => vm::ran(fin),
        Driver::Spt => spt::ran(fin, spawn_ns),
        Driver::Native | Driver::Runc | Driver::Docker(_) | Driver::Microvm => Ran {
            code: fin.status.code(),
            stdout: fin.stdout,
            stderr: fin.stderr,
            elapsed: fin.elapsed,
            accelerator: None,
            spawn_to_first_probe: None,
        },
    }
}

/// The job's own output in a line the driver's instance printed (a Debian VM's reach
/// its serial console behind a marker; a unikernel's console mixes its results with its
/// own lines); None for a line that is the console's.
pub(crate) fn job_line(driver: Driver, line: &str) -> Option<&str> {
    match driver {
        Driver::Vm => vm::job_line(line),
        Driver::Spt | Driver::Microvm => {
            vtnt_unikernel::launch::is_result_line(line).then_some(line)
        }
        Driver::Native | Driver::Runc | Driver::Docker(_) => Some(line),
    }
}
