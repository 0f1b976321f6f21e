//! `vtnt bench deploy`: seed 000's Sec. IV evaluation, per runtime.
//!
//! 1. **Image size** (Fig. 4): what each image takes installed, and what is downloaded.
//! 2. **Time and CPU** (Figs. 6, 7): `reps` times (30 in the paper): deploy (download
//!    from the image server at `--bandwidth-mbps`, install), execution (start to exit,
//!    including a VM's boot and shutdown), destruction and cleanup; CPU seconds of the
//!    instance's cgroup plus the engine's processes (dockerd, containerd).
//! 3. **Memory** (Fig. 5): one instance running the job and then holding `--hold-secs`,
//!    PSS of its processes plus the engine's sampled every 200 ms, reported as the median
//!    of the last `hold/2` s and the peak; again with KSM on (QEMU runtimes).
//! 4. **Density** (Fig. 8): `density` under the memory and the CPU budget.
//!
//! Every execution's output is compared with the native one
//! ([`vtnt_runtimes::normalize`]).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;

use vtnt_job::JobSpec;
use vtnt_measure::{ksm, stop};
use vtnt_runtimes::guest::Lab;
use vtnt_runtimes::instance::{self, RunOutput};
use vtnt_runtimes::net::{Front, Network};
use vtnt_runtimes::server::ImageServer;
use vtnt_runtimes::{BuildOptions, EngineGuard, ImageInfo, InstanceSpec, Runtime};

use crate::density::{self, Budget, DensityOptions};

/// Instances of a density ramp started and not yet working at most: one, so that each
/// starts once the one before works, and the ramp measures how many fit at once.
const DENSITY_MAX_PENDING: u32 = 1;

/// Probes per second for all the unikernels behind a density run's front: a ramp starts
/// 10 instances a second, each a one-hop trace, and under the CPU budget every instance
/// traces once a second; far above what thousands of them send, so that this is never
/// the limit.
const DENSITY_FRONT_PPS: u32 = 20000;
use crate::results::{Memory, Rep, Report, RuntimeReport};

/// Options of `vtnt bench deploy`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchDeployArgs {
    /// Repetitions of deploy + run + destroy per runtime.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub reps: u32,
    /// Repetitions of the full VM, if not `--reps` (a VM boot under TCG takes a minute
    /// or more).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub vm_reps: Option<u32>,
    /// Where the report (report.md, report.json, fig*.png) goes.
    #[arg(long, default_value = "bench-deploy")]
    pub out: PathBuf,
    /// Runtimes to measure.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "native,runc,docker,docker-scratch,vm,microvm,spt"
    )]
    pub runtimes: Vec<Runtime>,
    /// The lab whose network every runtime joins (`vtnt lab up`).
    #[arg(long, default_value = vtnt_runtimes::DEFAULT_LAB)]
    pub lab: String,
    /// The job, as `vtnt` words. Give it a `--seed` so that every runtime probes the
    /// same flows (and so the same paths) as the native run it is compared with.
    #[arg(long, default_value = "trace -P icmp-paris --seed 1 203.0.113.10")]
    pub job: String,
    /// Image server bandwidth, Mbit/s (the paper's Internet download).
    #[arg(long, default_value_t = vtnt_runtimes::DEFAULT_BANDWIDTH_MBPS)]
    pub bandwidth_mbps: u64,
    /// Seconds an instance holds after its job in the memory runs (density instances hold
    /// until their ramp ends).
    #[arg(long, default_value_t = 10)]
    pub hold_secs: u32,
    /// Skip the KSM configurations.
    #[arg(long)]
    pub no_ksm: bool,
    /// Skip the density experiments.
    #[arg(long)]
    pub no_density: bool,
    /// Set the kernel's cgroup `favordynmods` for this run (a remount of the cgroup2
    /// hierarchy, restored after): joining a cgroup then takes microseconds instead of an
    /// RCU grace period (10-20 ms on this kind of host), what hosts that start many
    /// instances set. Every runtime joins cgroups, so all rows run under it.
    #[arg(long)]
    pub favordynmods: bool,
    /// Runtimes whose density is measured (of those measured at all).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "native,runc,docker,docker-scratch,vm,microvm,spt"
    )]
    pub density_runtimes: Vec<Runtime>,
    /// Memory budget of the density run, MiB.
    #[arg(long, default_value_t = 1024)]
    pub memory_budget_mib: u64,
    /// CPUs of the CPU budget (cpuset.cpus) [default: the last CPU].
    #[arg(long)]
    pub cpu_budget_cpus: Option<String>,
    /// CPU quota of the CPU budget, percent of one core.
    #[arg(long, default_value_t = 50)]
    pub cpu_budget_pct: u32,
    /// The density ramp's limit (processes, containers, microVMs): far above what a
    /// runtime reaches, so that runs end at a failure, not here (the lab's VM front has
    /// 16000 slots).
    #[arg(long, default_value_t = 16000, value_parser = clap::value_parser!(u32).range(1..))]
    pub density_max: u32,
    /// The density ramp's limit for the full VM.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub density_max_vm: u32,
    /// Under the CPU budget, each held instance traces again every this many seconds, so
    /// that the ramp counts instances that keep working, not idle ones (0: they hold idle,
    /// as in the memory budget).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub density_every: u64,
    /// Under the CPU budget an instance must finish within this many times its
    /// unconstrained duration (and at least 5 s more than it).
    #[arg(long, default_value_t = 2.0)]
    pub deadline_factor: f64,
    /// Seconds one instance may run before it is killed (VM boots under TCG are slow).
    #[arg(long, default_value_t = 900)]
    pub timeout_secs: u64,
}

impl Default for BenchDeployArgs {
    fn default() -> Self {
        clap_defaults("bench-deploy")
    }
}

/// A command's options as clap defaults them (no argument given).
pub(crate) fn clap_defaults<A: clap::Args + clap::FromArgMatches>(name: &'static str) -> A {
    let m = A::augment_args(clap::Command::new(name)).get_matches_from([name]);
    A::from_arg_matches(&m).unwrap_or_else(|e| panic!("{name}: its defaults do not parse: {e}"))
}

fn host() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{cpus} CPUs, {} GiB RAM, Linux {}",
        mem >> 20,
        kernel.trim()
    )
}

/// Runs the evaluation and writes the report into `args.out`.
pub fn bench_deploy(args: &BenchDeployArgs) -> anyhow::Result<Report> {
    let lab = Lab::open(&args.lab)?;
    anyhow::ensure!(
        vtnt_measure::cgroup::available(),
        "cgroup v1 memory/cpu/cpuacct/cpuset controllers are needed"
    );
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let words: Vec<String> = args.job.split_whitespace().map(String::from).collect();
    let job = vtnt_job::parse_words(&words, vtnt_job::Vantage::Lab)?.spec;
    let _dynmods = args
        .favordynmods
        .then(vtnt_measure::dynmods::FavorDynmods::enable)
        .transpose()?;
    let cpus = args.cpu_budget_cpus.clone().unwrap_or_else(|| {
        (std::thread::available_parallelism().map_or(1, |n| n.get()) - 1).to_string()
    });
    let mut report = Report {
        accel_note: vtnt_unikernel::accel::linux_tcg_reason().map(String::from),
        host: host(),
        cgroup_favordynmods: vtnt_measure::dynmods::enabled(),
        provenance: vtnt_measure::provenance::Provenance::now(),
        job: args.job.clone(),
        reps: args.reps,
        vm_reps: args.vm_reps.filter(|&n| n != args.reps),
        bandwidth_mbps: args.bandwidth_mbps,
        memory_budget: Budget::Memory {
            bytes: args.memory_budget_mib << 20,
        }
        .describe(),
        cpu_budget: Budget::Cpu {
            cpus: cpus.clone(),
            quota_pct: args.cpu_budget_pct,
        }
        .describe(),
        density_every_s: args.density_every,
        ..Default::default()
    };
    let mut runtimes = args.runtimes.clone();
    runtimes.sort();
    runtimes.dedup();
    // images first: a runtime whose image cannot be built is reported as skipped
    let mut images: Vec<(Runtime, ImageInfo)> = Vec::new();
    for &rt in &runtimes {
        stop::check()?;
        let mut r = RuntimeReport {
            runtime: rt.name().into(),
            label: rt.label().into(),
            ..Default::default()
        };
        match rt.build_image(&BuildOptions::default()) {
            Ok(im) => {
                let accel = rt.accelerator(&im);
                r.emulated = accel == Some(vtnt_unikernel::accel::Accelerator::Tcg);
                r.accel = accel.map(|a| a.name().to_string());
                r.image_bytes = im.size_bytes;
                r.download_bytes = im.download_bytes;
                r.image_note = im.size_note.clone();
                images.push((rt, im));
            }
            Err(e) => {
                let e = anyhow::Error::new(e);
                eprintln!("vtnt bench deploy: skipping {}: {e:#}", rt.name());
                r.skipped = Some(format!("{e:#}"));
            }
        }
        report.runtimes.push(r);
    }
    report.accel = report
        .runtimes
        .iter()
        .filter_map(|r| Some(format!("{}: {}", r.runtime, r.accel.as_ref()?)))
        .collect::<Vec<_>>()
        .join(", ");
    let server = ImageServer::start(
        &images.iter().map(|(_, i)| i).collect::<Vec<_>>(),
        args.bandwidth_mbps * 1_000_000,
    )?;
    let mut reference: Option<Vec<String>> = None;
    let native_out = Runtime::Native.run(
        &job,
        &vtnt_runtimes::RunOptions {
            net: Network::Lab(args.lab.clone()),
            ..Default::default()
        },
    );
    if let Ok(o) = &native_out {
        reference = Some(vtnt_runtimes::normalize(&o.stdout));
    }
    for (rt, image) in &images {
        let r = report
            .runtimes
            .iter_mut()
            .find(|r| r.runtime == rt.name())
            .context("report entry")?;
        eprintln!(
            "vtnt bench deploy: {} ({} reps)",
            rt.name(),
            reps_of(args, *rt)
        );
        if let Err(e) = measure_runtime(
            *rt,
            image,
            &server,
            &lab,
            &job,
            reference.as_deref(),
            args,
            &cpus,
            r,
        ) {
            // a signal ends the run: no report of half a run
            stop::check()?;
            eprintln!("vtnt bench deploy: {}: {e:#}", rt.name());
            r.errors.push(format!("{e:#}"));
        }
    }
    drop(server);
    crate::report::write(&mut report, &args.out)?;
    Ok(report)
}

/// The repetitions of runtime `rt` (`--vm-reps` for the full VM).
fn reps_of(args: &BenchDeployArgs, rt: Runtime) -> u32 {
    match (rt, args.vm_reps) {
        (Runtime::Vm, Some(n)) => n,
        _ => args.reps,
    }
}

#[allow(clippy::too_many_arguments)]
fn measure_runtime(
    rt: Runtime,
    image: &ImageInfo,
    server: &ImageServer,
    lab: &Lab,
    job: &JobSpec,
    reference: Option<&[String]>,
    args: &BenchDeployArgs,
    cpus: &str,
    r: &mut RuntimeReport,
) -> anyhow::Result<()> {
    let engine = EngineGuard::for_runtime(rt, &Network::Lab(lab.name.clone()))?;
    let timeout = Duration::from_secs(args.timeout_secs);
    let reps = reps_of(args, rt);
    for i in 0..reps {
        stop::check()?;
        let once = || -> anyhow::Result<(f64, RunOutput, f64)> {
            let t0 = Instant::now();
            let deployed = instance::deploy(
                rt,
                image,
                &server.url(rt)?,
                engine.docker(),
                &Network::Lab(lab.name.clone()),
            )?;
            let deploy_s = t0.elapsed().as_secs_f64();
            let mut spec = InstanceSpec::new(job.clone());
            spec.sample_every = None;
            let mut inst = deployed.start(&spec)?;
            let out = inst.wait(timeout);
            let t1 = Instant::now();
            drop(inst);
            drop(deployed);
            Ok((deploy_s, out?, t1.elapsed().as_secs_f64()))
        };
        match retry_timeout(r, &format!("rep {i}"), once) {
            Ok((deploy_s, o, cleanup_s)) => {
                let same =
                    reference.is_some_and(|r| r == vtnt_runtimes::normalize(&o.stdout).as_slice());
                if !o.ok() || !same {
                    r.errors.push(format!(
                        "rep {i}: exit {:?}, same output as native: {same}; stderr: {}",
                        o.code,
                        vtnt_measure::proc::tail(&o.stderr, 300)
                    ));
                }
                r.reps.push(Rep {
                    deploy_s,
                    exec_s: o.exec_time.as_secs_f64(),
                    cleanup_s,
                    cpu_s: o.cpu_secs,
                    ok: o.ok(),
                    same_as_native: same,
                    first_probe_ms: o.spawn_to_first_probe.map(|d| d.as_secs_f64() * 1e3),
                    cgroup_join_ms: o.cgroup_join.map(|d| d.as_secs_f64() * 1e3),
                });
            }
            Err(e) => r.errors.push(format!("rep {i}: {e:#}")),
        }
        eprintln!(
            "  rep {}/{}: {:.2} s",
            i + 1,
            reps,
            r.reps.last().map_or(0.0, |x| x.total_s())
        );
    }
    stop::check()?;
    // memory of one instance, without and with KSM
    let deployed = instance::deploy(
        rt,
        image,
        &server.url(rt)?,
        engine.docker(),
        &Network::Lab(lab.name.clone()),
    )?;
    let held = JobSpec {
        hold: Duration::from_secs(u64::from(args.hold_secs)),
        ..job.clone()
    };
    let measure = |ksm: bool| -> anyhow::Result<Memory> {
        let guard = if ksm {
            Some(ksm::Ksm::enable(5000, 20)?)
        } else {
            None
        };
        let mut spec = InstanceSpec::new(held.clone());
        spec.sample_every = Some(Duration::from_millis(200));
        let mut inst = deployed.start(&spec)?;
        let out = inst.wait(timeout)?;
        let counters = guard.as_ref().map(|_| ksm::Counters {
            pages_sharing: out.ksm_pages_sharing_max,
            ..ksm::Counters::read()
        });
        anyhow::ensure!(
            out.ok(),
            "memory run exited with {:?}: {}",
            out.code,
            vtnt_measure::proc::tail(&out.stderr, 300)
        );
        drop(guard);
        Ok(Memory {
            late_mib: out.late_pss_kib(f64::from(args.hold_secs) / 2.0) as f64 / 1024.0,
            peak_mib: out.peak_pss_kib() as f64 / 1024.0,
            duration_s: out.exec_time.as_secs_f64(),
            ksm: counters,
        })
    };
    r.memory = Some(retry_timeout(r, "memory", || measure(false))?);
    if !args.no_ksm && rt.is_vm() && ksm::available() {
        match retry_timeout(r, "memory with KSM", || measure(true)) {
            Ok(m) => r.memory_ksm = Some(m),
            Err(e) => r.errors.push(format!("memory with KSM: {e:#}")),
        }
    }
    if args.no_density || !args.density_runtimes.contains(&rt) {
        return Ok(());
    }
    stop::check()?;
    let solo = r.memory.map_or(30.0, |m| m.duration_s);
    let max = if rt == Runtime::Vm {
        args.density_max_vm
    } else {
        args.density_max
    };
    let djob = vtnt_runtimes::guest::density(lab, vtnt_job::MAX_HOLD)?;
    // Unikernels go through a front over the lab: the lab's own VM front numbers 120
    // guests on its /24, which would cap their density at a limit of ours; the front's
    // process is charged like any daemon (`Deployed::daemon_pids`).
    let front = match rt {
        Runtime::Microvm => Some(Front::up(&lab.name, DENSITY_FRONT_PPS)?),
        _ => None,
    };
    let behind_front;
    let deployed = match &front {
        Some(f) => {
            behind_front = instance::deploy(
                rt,
                image,
                &server.url(rt)?,
                None,
                &Network::Lab(f.name.clone()),
            )?;
            &behind_front
        }
        None => &deployed,
    };
    let mem_opts = DensityOptions {
        budget: Budget::Memory {
            bytes: args.memory_budget_mib << 20,
        },
        max,
        stagger: Duration::from_millis(100),
        max_pending: DENSITY_MAX_PENDING,
        deadline: Duration::from_secs_f64(solo * 4.0 + 60.0).min(timeout),
    };
    eprintln!("  density under {}", mem_opts.budget.describe());
    r.density_memory = Some(density::run(deployed, &djob, &mem_opts)?);
    if !args.no_ksm && rt.is_vm() && ksm::available() {
        let _ksm = ksm::Ksm::enable(5000, 20)?;
        eprintln!("  density under {} with KSM", mem_opts.budget.describe());
        r.density_memory_ksm = Some(density::run(deployed, &djob, &mem_opts)?);
    }
    let cpu_opts = DensityOptions {
        budget: Budget::Cpu {
            cpus: cpus.to_string(),
            quota_pct: args.cpu_budget_pct,
        },
        max,
        stagger: Duration::from_millis(100),
        max_pending: DENSITY_MAX_PENDING,
        deadline: Duration::from_secs_f64((solo * args.deadline_factor).max(solo + 5.0))
            .min(timeout),
    };
    eprintln!(
        "  density under {} (a trace every {} s, deadline {:.0} s)",
        cpu_opts.budget.describe(),
        args.density_every,
        cpu_opts.deadline.as_secs_f64()
    );
    let working = JobSpec {
        every: Duration::from_secs(args.density_every),
        ..djob
    };
    r.density_cpu = Some(density::run(deployed, &working, &cpu_opts)?);
    Ok(())
}

/// Runs `f`, and once more if the instance outlived its timeout: a full Debian guest
/// under TCG on a loaded 2-core host has, rarely, never finished its job, and a `docker
/// run` client has, once in many CI runs, never returned. The first attempt's error is
/// kept in `r.retried` and shown in the report; a second timeout is an error like any
/// other.
fn retry_timeout<T>(
    r: &mut RuntimeReport,
    what: &str,
    f: impl FnMut() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    vtnt_measure::proc::retry_once_if(
        f,
        |e| vtnt_runtimes::timed_out(e.as_ref()),
        |e| {
            eprintln!("  {what}: the instance timed out; retrying once");
            r.retried.push(format!("{what}: {e:#}"));
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use vtnt_measure::proc::TimedOut;

    #[test]
    fn no_repetitions_is_refused() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: BenchDeployArgs,
        }
        use clap::Parser;
        for bad in [["--reps", "0"], ["--vm-reps", "0"]] {
            let e = Cli::try_parse_from(["deploy", bad[0], bad[1]])
                .err()
                .expect(bad[0]);
            assert!(e.to_string().contains("0 is not in 1.."), "{e}");
        }
        assert!(Cli::try_parse_from(["deploy", "--reps", "2", "--vm-reps", "1"]).is_ok());
    }

    /// A run's timeout as `Runtime::run` returns it: vtnt-measure's `TimedOut` inside
    /// vtnt-runtimes' error, under the container's state.
    fn timed_out() -> anyhow::Error {
        let measured = vtnt_measure::Error::TimedOut(TimedOut {
            what: "docker container x".into(),
            timeout: Duration::from_secs(1),
            stdout_tail: String::new(),
            stderr_tail: String::new(),
        });
        anyhow::Error::new(vtnt_runtimes::Error::Context {
            what: "container state: exited exit=0 pid=0".into(),
            source: Box::new(measured.into()),
        })
    }

    #[test]
    fn a_timeout_is_retried_once_and_recorded() {
        let mut r = RuntimeReport::default();
        let mut calls = 0;
        let got = retry_timeout(&mut r, "rep 0", || {
            calls += 1;
            if calls == 1 {
                Err(timed_out())
            } else {
                Ok(7)
            }
        });
        assert_eq!(got.unwrap(), 7);
        assert_eq!(calls, 2);
        assert_eq!(r.retried.len(), 1);
        assert!(
            r.retried[0].contains("container state: exited"),
            "{:?}",
            r.retried
        );
    }

    #[test]
    fn a_second_timeout_or_another_error_is_returned() {
        let mut r = RuntimeReport::default();
        let mut calls = 0;
        let got: anyhow::Result<()> = retry_timeout(&mut r, "rep 0", || {
            calls += 1;
            Err(timed_out())
        });
        assert!(got.is_err());
        assert_eq!(calls, 2);
        let mut calls = 0;
        let got: anyhow::Result<()> = retry_timeout(&mut r, "rep 1", || {
            calls += 1;
            anyhow::bail!("no such image")
        });
        assert!(got.is_err());
        assert_eq!(calls, 1);
    }
}
