//! One deployed image and the instances started from it, the same way for every runtime:
//! [`deploy`] fetches the image from the [`crate::server::ImageServer`] and installs it (untar a bundle,
//! `docker load`, unpack a VM box); [`Deployed::start`] starts an [`Instance`] in a cgroup
//! of its own; [`Instance::wait`] collects its output and what it cost (PSS sampled while
//! it runs, CPU from `cpuacct` plus the engine's processes). Dropping an instance
//! destroys it (container removed, VM killed, cgroup emptied and removed); dropping a
//! [`Deployed`] removes the installed image.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{BoxError, Error, Result};

use crate::cgroup::Cgroup;
use crate::drivers::{self, install, Kind};
use crate::net::{Attached, Network};
use crate::paths::TempDir;
use crate::proc::{Finished, Supervised};
use crate::runtime::Slots;
use crate::runtime::{ImageInfo, Runtime};
use crate::spec::InstanceSpec;
use crate::{docker, microvm, native, runc, spt, vm};

/// What one run produced and cost.
#[derive(Debug, Clone, Default)]
pub struct RunOutput {
    pub stdout: String,
    pub stderr: String,
    /// The job's exit code (the guest's, for VMs), None when killed or unknown.
    pub code: Option<i32>,
    /// Fetch + install.
    pub deploy_time: Duration,
    /// Start to exit (boot, job, shutdown, for VMs).
    pub exec_time: Duration,
    /// CPU seconds: the instance's cgroup plus the engine processes' increase.
    pub cpu_secs: f64,
    /// Memory samples: (seconds since start, PSS KiB summed over the instance's processes
    /// and the engine's).
    pub pss_samples: Vec<(f64, u64)>,
    /// The highest KSM `pages_sharing` seen while sampling (KSM counts only while the
    /// merged pages exist, i.e. while the instance runs).
    pub ksm_pages_sharing_max: u64,
    /// What a VM ran under (`PVM-KVM (vtnt-monitor)`, `TCG`); None for containers.
    pub accelerator: Option<String>,
    /// From the instance's spawn to its first probe, where the runtime can tell (the
    /// unikernel's: it prints when it sent its first probe).
    pub spawn_to_first_probe: Option<Duration>,
    /// Of that, the time the instance's first process took to join its cgroup, where the
    /// runtime can tell (spt's tender times its own writes).
    pub cgroup_join: Option<Duration>,
    /// The most memory its cgroup was charged at once (`memory.max_usage_in_bytes`: its
    /// processes', a container's, page cache they brought in), bytes; exact however short
    /// the run, where PSS samples may miss it.
    pub mem_peak_bytes: u64,
}

impl RunOutput {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
    /// The highest PSS sample, KiB.
    pub fn peak_pss_kib(&self) -> u64 {
        self.pss_samples.iter().map(|s| s.1).max().unwrap_or(0)
    }
    /// Median PSS of the samples taken in the last `secs` seconds, KiB.
    pub fn late_pss_kib(&self, secs: f64) -> u64 {
        let end = self.pss_samples.last().map_or(0.0, |s| s.0);
        let mut v: Vec<u64> = self
            .pss_samples
            .iter()
            .filter(|s| s.0 >= end - secs)
            .map(|s| s.1)
            .collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    }
}

/// An installed image, ready to start instances.
pub struct Deployed {
    pub runtime: Runtime,
    pub(crate) dir: TempDir,
    pub(crate) net: Attached,
    pub(crate) kind: Kind,
}

/// Fetches `image` from `url` (an image server's: [`crate::server::ImageServer::url`]) and installs it
/// for lab `lab`; `engine` is needed for Docker images.
pub fn deploy(
    rt: Runtime,
    image: &ImageInfo,
    url: &str,
    engine: Option<&docker::Engine>,
    net: &Network,
) -> Result<Deployed> {
    deploy_from(
        rt,
        image,
        &|file| Ok(crate::server::fetch(url, file)?),
        engine,
        net,
    )
}

/// Fetches `rt`'s image into `file` with `fetch` and checks it against `pin`:
/// [`Error::Fetch`] if the fetcher failed, [`Error::Pinned`] if the file is not the one
/// pinned.
pub(crate) fn fetch_checked(
    rt: Runtime,
    file: &Path,
    pin: Option<&vtnt_artifacts::Pin>,
    fetch: &dyn Fn(&Path) -> std::result::Result<u64, BoxError>,
) -> Result<()> {
    fetch(file).map_err(|source| Error::Fetch {
        runtime: rt.name(),
        source,
    })?;
    if let Some(pin) = pin {
        pin.verify(file).map_err(|source| Error::Pinned {
            runtime: rt.name(),
            source,
        })?;
    }
    Ok(())
}

/// [`deploy`], the image fetched by `fetch` (it writes the file it is given and returns
/// the bytes written): an image server's or another store's.
pub fn deploy_from(
    rt: Runtime,
    image: &ImageInfo,
    fetch: &dyn Fn(&Path) -> std::result::Result<u64, BoxError>,
    engine: Option<&docker::Engine>,
    net: &Network,
) -> Result<Deployed> {
    let net = net.attach(rt)?;
    let dir = TempDir::new(&format!("deploy-{}", rt.name()))?;
    let file = dir.path().join(
        image
            .path
            .file_name()
            .ok_or_else(|| Error::Image("image without a file name".into()))?,
    );
    fetch_checked(rt, &file, image.pin.as_ref(), fetch)?;
    let kind = install(rt, file, dir.path(), engine)?;
    Ok(Deployed {
        runtime: rt,
        dir,
        net,
        kind,
    })
}

impl Deployed {
    /// Starts one instance.
    pub fn start(&self, spec: &InstanceSpec) -> Result<Instance> {
        let rel = match &spec.cgroup_parent {
            Some(p) => format!("{p}/i{}", spec.index),
            None => format!(
                "{}/{}",
                crate::paths::cgroup_parent(),
                crate::paths::unique("inst")
            ),
        };
        let cgroup = Cgroup::create(&rel)?;
        let mut cleanup = Cleanup::None;
        let mut engine_pids = Vec::new();
        let child = match &self.kind {
            Kind::Native { bin } => native::start(bin, &self.net, spec, &cgroup)?.into(),
            Kind::Runc { rootfs } => {
                let (child, id, root) =
                    runc::start(rootfs, self.dir.path(), &self.net, spec, &cgroup)?;
                cleanup = Cleanup::Runc { id, root };
                child.into()
            }
            Kind::Docker { client, image } => {
                let name = crate::paths::unique("vtnt");
                engine_pids = client.engine_pids();
                let child = client.start(image, &name, spec, &cgroup)?;
                cleanup = Cleanup::Docker {
                    client: client.clone(),
                    name,
                };
                child.into()
            }
            Kind::Vm { box_dir } => vm::start(box_dir, &self.net, spec, &cgroup)?.into(),
            Kind::Microvm { image } => Running::Microvm(microvm::start(
                image,
                &self.net,
                spec,
                &cgroup,
                spec.vmm,
                spec.guest_timeout,
            )?),
            Kind::Spt { image } => {
                let started = spt::start(image, &self.net, spec, &cgroup, spec.guest_timeout)?;
                cleanup = Cleanup::Spt {
                    _slot: started.slot,
                    spawn_ns: started.spawn_ns,
                    cgroup_join: started.cgroup_join,
                };
                started.child.into()
            }
        };
        let cpu0 = engine_pids.iter().map(|&p| crate::proc::cpu_secs(p)).sum();
        Ok(Instance {
            runtime: self.runtime,
            child: Some(child),
            cgroup,
            cleanup,
            engine_pids,
            engine_cpu0: cpu0,
            spec: spec.clone(),
        })
    }
}

impl Deployed {
    /// The processes outside any instance that this runtime's instances need and make
    /// grow, whose cost a fair density run charges to the budget: Docker's dockerd,
    /// containerd and containerd shims; the front (`vtnt lab front`) VMs share one
    /// address through. Empty when there is none (a lab's own VM front is the lab, which
    /// every runtime shares).
    pub fn daemon_pids(&self) -> Vec<u32> {
        let mut pids = match &self.kind {
            Kind::Docker { client, .. } => {
                let mut pids = client.engine_pids();
                pids.extend(crate::proc::pids_named("containerd-shim"));
                pids
            }
            _ => Vec::new(),
        };
        if let Attached::Lab(lab) = &self.net {
            if let Ok(state) = vtnt_lab_linux::lab_state(&lab.name) {
                if state.topology == vtnt_lab_linux::state::FRONT_TOPOLOGY && state.pid > 0 {
                    pids.push(state.pid as u32);
                }
            }
        }
        pids
    }

    /// How many instances the network can hold at once when that is a limit of ours,
    /// not the runtime's, and why: a lab's VM front has a fixed set of guest slots.
    pub fn capacity(&self) -> Option<(u32, String)> {
        let Attached::Lab(lab) = &self.net else {
            return None;
        };
        match self.runtime.entry().slots {
            Slots::VmFront => vtnt_lab_linux::vm_info(&lab.name).ok().map(|v| {
                let n = v.slots;
                (
                    n,
                    format!("`{}`'s VM front has {n} unikernel slots", lab.name),
                )
            }),
            Slots::LabVmPrefix => lab.vm.guest_capacity().ok().map(|n| {
                (
                    n,
                    format!("lab prefix {} numbers {n} VM guests", lab.vm.prefix),
                )
            }),
            Slots::Unbounded => None,
        }
    }
}

impl Drop for Deployed {
    fn drop(&mut self) {
        if let Kind::Docker { client, image } = &self.kind {
            client.remove_image(image);
        }
    }
}

enum Cleanup {
    None,
    /// An spt guest's lab slot, released when dropped, when it was spawned and how long
    /// its tender took to join the cgroup.
    Spt {
        _slot: Option<vtnt_unikernel::lab::SlotLock>,
        spawn_ns: u64,
        cgroup_join: Duration,
    },
    Runc {
        id: String,
        root: PathBuf,
    },
    Docker {
        client: docker::Client,
        name: String,
    },
}

/// A running instance; destroyed on drop.
pub struct Instance {
    pub runtime: Runtime,
    child: Option<Running>,
    cgroup: Cgroup,
    cleanup: Cleanup,
    engine_pids: Vec<u32>,
    engine_cpu0: f64,
    spec: InstanceSpec,
}

/// An instance's process (a container's runtime, the VM's QEMU, the native process), or
/// the unikernel's VMM run by `vtnt-unikernel` from a thread of this process.
enum Running {
    Process(Supervised),
    Microvm(microvm::Running),
}

impl From<Supervised> for Running {
    fn from(s: Supervised) -> Running {
        Running::Process(s)
    }
}

impl Running {
    fn started(&self) -> Instant {
        match self {
            Running::Process(p) => p.started(),
            Running::Microvm(m) => m.started(),
        }
    }

    fn finished(&mut self) -> bool {
        match self {
            Running::Process(p) => p.try_status().is_some(),
            Running::Microvm(m) => m.finished(),
        }
    }
}

/// The job's own output as an instance prints it ([`Instance::tap`]).
pub struct LineTap {
    source: Tap,
    driver: crate::runtime::Driver,
    /// Where the last read ended: a byte of a process's output, a line of a console.
    seen: usize,
}

enum Tap {
    Process(crate::proc::OutputTap),
    Console(vtnt_unikernel::ConsoleTap),
    Nothing,
}

impl LineTap {
    /// The lines of the job's own output (not empty) printed since the last call: the
    /// first lines of [`RunOutput::stdout`]'s, in its order. A process's output read
    /// after its wait has collected it gives nothing more.
    pub fn new_lines(&mut self) -> Vec<String> {
        let raw: Vec<String> = match &self.source {
            Tap::Process(out) => {
                let new = out.lines_from(self.seen);
                self.seen += new.len();
                String::from_utf8_lossy(&new)
                    .lines()
                    .map(str::to_string)
                    .collect()
            }
            Tap::Console(lines) => {
                let lines = lines.lock().unwrap_or_else(|e| e.into_inner());
                let new = lines.get(self.seen..).unwrap_or_default().to_vec();
                self.seen = lines.len();
                new
            }
            Tap::Nothing => Vec::new(),
        };
        raw.iter()
            .filter_map(|l| drivers::job_line(self.driver, l))
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect()
    }
}

impl Instance {
    /// Its cgroup (budget accounting, pids).
    pub fn cgroup(&self) -> &Cgroup {
        &self.cgroup
    }

    /// When it was started.
    pub fn started(&self) -> Option<Instant> {
        self.child.as_ref().map(|c| c.started())
    }

    /// What it prints, readable from another thread while this one waits for it.
    pub fn tap(&self) -> LineTap {
        let source = match &self.child {
            Some(Running::Process(p)) => Tap::Process(p.stdout_tap()),
            Some(Running::Microvm(m)) => Tap::Console(m.console()),
            None => Tap::Nothing,
        };
        LineTap {
            source,
            driver: self.runtime.entry().driver,
            seen: 0,
        }
    }

    /// Result records (scamper `trace` and `ping` lines) it has printed since `*seen`, a
    /// position in its output that the call advances: cheap to poll, to tell when an
    /// instance works and to count the rounds of a job that repeats.
    pub fn new_records(&self, seen: &mut usize) -> usize {
        let mut tap = self.tap();
        tap.seen = *seen;
        let n = tap.new_lines().iter().filter(|l| is_record(l)).count();
        *seen = tap.seen;
        n
    }

    /// Whether it has exited.
    pub fn exited(&mut self) -> bool {
        self.child.as_mut().is_none_or(|c| c.finished())
    }

    /// PSS of the instance's processes and the engine's, KiB.
    pub fn pss_kib(&self) -> u64 {
        let mut pids = self.cgroup.pids();
        match &self.child {
            // a `docker run` client only relays output (see `docker::Client::start`)
            Some(Running::Process(c)) if !matches!(self.cleanup, Cleanup::Docker { .. }) => {
                pids.push(c.pid())
            }
            _ => {}
        }
        pids.extend(&self.engine_pids);
        if matches!(self.cleanup, Cleanup::Docker { .. }) {
            pids.extend(crate::proc::pids_named("containerd-shim"));
        }
        pids.sort_unstable();
        pids.dedup();
        pids.iter().map(|&p| crate::proc::pss_kib(p)).sum()
    }

    /// Waits for the instance to finish (killing it after `timeout`), sampling memory.
    pub fn wait(&mut self, timeout: Duration) -> Result<RunOutput> {
        let mut child = self
            .child
            .take()
            .ok_or_else(|| Error::Runtime("instance already waited for".into()))?;
        let t0 = child.started();
        let mut samples = Vec::new();
        let mut ksm_max = 0;
        if let Some(every) = self.spec.sample_every {
            while !child.finished() && t0.elapsed() < timeout && !vtnt_measure::stop::interrupted()
            {
                samples.push((t0.elapsed().as_secs_f64(), self.pss_kib()));
                ksm_max = ksm_max.max(crate::ksm::Counters::read().pages_sharing);
                std::thread::sleep(every);
            }
        }
        let mut cgroup_join = None;
        let ran = match child {
            // `Supervised::wait` counts `timeout` from the start, as the loop above did.
            Running::Process(p) => {
                let fin: Finished = p.wait(timeout).map_err(|e| match &self.cleanup {
                    Cleanup::Docker { client, name } => Error::Context {
                        what: format!("container state: {}", client.state(name)),
                        source: Box::new(e.into()),
                    },
                    _ => e.into(),
                })?;
                let mut spawned = None;
                if let Cleanup::Spt {
                    spawn_ns,
                    cgroup_join: join,
                    ..
                } = self.cleanup
                {
                    spawned = Some(spawn_ns);
                    cgroup_join = Some(join);
                }
                drivers::read_run(self.runtime.entry().driver, fin, spawned)
            }
            Running::Microvm(m) => {
                let deadline = t0 + timeout;
                while !m.finished() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if !m.finished() {
                    // its VMM is in the instance's group
                    self.cgroup.kill_all(Duration::from_secs(5));
                    return Err(Error::TimedOut {
                        what: "the vTNT microVM".into(),
                        timeout,
                    });
                }
                m.wait()?
            }
        };
        let engine_cpu: f64 = self
            .engine_pids
            .iter()
            .map(|&p| crate::proc::cpu_secs(p))
            .sum::<f64>()
            - self.engine_cpu0;
        Ok(RunOutput {
            stdout: ran.stdout,
            stderr: ran.stderr,
            code: ran.code,
            deploy_time: Duration::ZERO,
            exec_time: ran.elapsed,
            cpu_secs: self.cgroup.cpu_secs() + engine_cpu.max(0.0),
            mem_peak_bytes: self.cgroup.mem_peak(),
            pss_samples: samples,
            ksm_pages_sharing_max: ksm_max,
            accelerator: ran.accelerator,
            spawn_to_first_probe: ran.spawn_to_first_probe,
            cgroup_join,
        })
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        drop(self.child.take());
        match &self.cleanup {
            Cleanup::None | Cleanup::Spt { .. } => {}
            Cleanup::Runc { id, root } => runc::destroy(id, root),
            Cleanup::Docker { client, name } => client.remove(name),
        }
    }
}

/// Whether a line of a job's output is a result record (a trace or a ping).
pub fn is_record(line: &str) -> bool {
    line.starts_with("{\"type\":\"trace\"") || line.starts_with("{\"type\":\"ping\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deploy whose fetcher fails and one whose image is not the one pinned: the same
    /// call, two errors a caller (the fleet's agent, a test) tells apart by variant.
    #[test]
    fn a_failed_fetch_and_an_unpinned_image_are_told_apart() {
        let dir = std::env::temp_dir().join(format!("vtnt-rterr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pinned = dir.join("pinned");
        std::fs::write(&pinned, b"the image as built").unwrap();
        let pin = vtnt_artifacts::Pin::of(&pinned).unwrap();
        let fetched = dir.join("fetched");
        let failing = |_: &Path| -> std::result::Result<u64, BoxError> {
            Err("image `vtnt-static` from the fleet's object store: no such object".into())
        };
        let altered = |dst: &Path| -> std::result::Result<u64, BoxError> {
            std::fs::write(dst, b"an altered image")?;
            Ok(16)
        };
        let fetch = |f: &dyn Fn(&Path) -> std::result::Result<u64, BoxError>| {
            fetch_checked(Runtime::Native, &fetched, Some(&pin), f)
        };
        let e = fetch(&failing).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Fetch {
                    runtime: "native",
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            format!("{:#}", anyhow::Error::new(e)),
            "fetching the native image: image `vtnt-static` from the fleet's object store: no such object"
        );
        let e = fetch(&altered).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Pinned {
                    runtime: "native",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(format!("{:#}", anyhow::Error::new(e)).starts_with(
            "the native image as fetched differs from what this host's artifacts.toml pins: "
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
