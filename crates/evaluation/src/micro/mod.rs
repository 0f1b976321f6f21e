//! `vtnt bench micro`: seed 001's micro-benchmarks (Figs. 3-5) in every runtime.
//!
//! Each runtime runs a `micro` job (`vtnt_jobspec::micro`): the same loops, in the host
//! `vtnt` binary its image already carries (native, runc, Docker, the full VM) or in the
//! unikernel (microVM, spt), so no runtime needs an image of its own. Per row, `reps`
//! times each (30 by default; the seed ran 100):
//! 1. **boot + shutdown**: spawn to exit of the empty job (no loop), as the seed timed
//!    `main() { return 0; }` with `time`;
//! 2. **the loops** (one instance per repetition): ns per iteration of fib(`fib`), the
//!    "system call" (what it is per runtime: docs/benchmarks.md), the function call and
//!    the clock read, from the job's own result line; and the most memory the
//!    instance's cgroup was charged (its processes', a container's; not a container
//!    engine's, which serves every container);
//! 3. **image size**: what the runtime's image takes installed (`vtnt-runtimes`).
//!
//! A row is a runtime, and for the microVM a VMM and accelerator ([`crate::row::Row`]), so that the
//! unikernel is measured under `vtnt-monitor` and under QEMU with each accelerator. A
//! row that cannot run here (a runtime not installed, a VMM not usable) is reported as
//! not measured, with why, and the others go on. The report ([`report`]) puts the seeds'
//! rows beside ours.

pub mod data;
pub mod report;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use vtnt_job::micro::{self, Options, Totals};
use vtnt_job::{JobKind, JobSpec};
use vtnt_runtimes::instance::{self, Deployed, RunOutput};
use vtnt_runtimes::net::Network;
use vtnt_runtimes::server::ImageServer;
use vtnt_runtimes::{BuildOptions, EngineGuard, InstanceSpec, Runtime};

use crate::row::Row;
use data::{MicroReport, RowReport};

/// Options of `vtnt bench micro`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchMicroArgs {
    /// Repetitions of each measurement per row (the seed ran 100).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub reps: u32,
    /// Where the report (micro.md, micro.json, micro_*.png) goes.
    #[arg(long, default_value = "bench-micro")]
    pub out: PathBuf,
    /// Rows to measure: runtimes, the microVM as `microvm:VMM` (monitor, qemu, qemu-kvm,
    /// qemu-tcg, firecracker; plain `microvm`: its default VMM).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "native,runc,docker,docker-scratch,vm,microvm:monitor,microvm:qemu-tcg,microvm:qemu-kvm,microvm:firecracker,spt"
    )]
    pub runtimes: Vec<Row>,
    /// The lab whose network every instance joins (`vtnt lab up`): the loops use none,
    /// but the VMs' instances need one to start.
    #[arg(long, default_value = vtnt_runtimes::DEFAULT_LAB)]
    pub lab: String,
    /// Which Fibonacci number the CPU loop computes (the seed's 40).
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u32).range(0..=i64::from(micro::MAX_FIB)))]
    pub fib: u32,
    /// Iterations of the CPU, function-call and clock loops (the seed's million).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u32).range(1..=i64::from(micro::MAX_CALLS)))]
    pub calls: u32,
    /// Iterations of the "system call" loop: fewer than the seed's million, since an exit
    /// to the VMM costs up to 0.15 ms under PVM.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=i64::from(micro::MAX_CALLS)))]
    pub syscalls: u32,
    /// Seconds one instance may run before it is killed (a Debian VM under TCG boots in
    /// a minute or two).
    #[arg(long, default_value_t = 900, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_secs: u64,
}

impl Default for BenchMicroArgs {
    fn default() -> Self {
        crate::bench::clap_defaults("bench-micro")
    }
}

/// Runs the micro-benchmarks and writes the report into `args.out`.
pub fn bench_micro(args: &BenchMicroArgs) -> anyhow::Result<MicroReport> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let net = Network::Lab(args.lab.clone());
    let mut report = MicroReport {
        provenance: vtnt_measure::provenance::Provenance::now(),
        reps: args.reps,
        fib: args.fib,
        calls: args.calls,
        syscalls: args.syscalls,
        ..Default::default()
    };
    let mut rows = args.runtimes.clone();
    rows.dedup();
    // images first, each once: a row whose image cannot be built is not measured
    let mut images = Vec::new();
    for &row in &rows {
        let mut r = RowReport {
            row: row.to_string(),
            runtime: row.runtime.name().into(),
            label: row.label(),
            ..Default::default()
        };
        let built = images.iter().position(|(rt, _)| *rt == row.runtime);
        let image = match built {
            Some(i) => Ok(i),
            None => row
                .runtime
                .build_image(&BuildOptions::default())
                .map(|im| {
                    images.push((row.runtime, im));
                    images.len() - 1
                })
                .map_err(anyhow::Error::from),
        };
        let ready = image.and_then(|i| {
            if let Some(why) = row.vmm_missing() {
                anyhow::bail!("{why}");
            }
            Ok(net.attach(row.runtime).map(|_| &images[i].1)?)
        });
        match ready {
            Ok(im) => {
                r.image_bytes = im.size_bytes;
                r.image_note = im.size_note.clone();
                let accel = match row.runtime {
                    Runtime::Microvm => {
                        Some(vtnt_runtimes::microvm::accel(&im.path, row.vmm, row.accel))
                    }
                    _ => row.runtime.accelerator(im),
                };
                r.emulated = accel == Some(vtnt_unikernel::accel::Accelerator::Tcg);
                r.accel = accel.map_or("host kernel".into(), |a| a.to_string());
            }
            Err(e) => {
                eprintln!("vtnt bench micro: not measuring {row}: {e:#}");
                r.skipped = Some(format!("{e:#}"));
            }
        }
        report.rows.push(r);
    }
    let server = ImageServer::start(
        &images.iter().map(|(_, i)| i).collect::<Vec<_>>(),
        vtnt_runtimes::DEFAULT_BANDWIDTH_MBPS * 1_000_000,
    )?;
    for (row, r) in rows.iter().zip(&mut report.rows) {
        vtnt_measure::stop::check()?;
        let Some((_, image)) = images.iter().find(|(rt, _)| *rt == row.runtime) else {
            continue;
        };
        if r.skipped.is_some() {
            continue;
        }
        eprintln!("vtnt bench micro: {row} ({} reps)", args.reps);
        let engine = EngineGuard::for_runtime(row.runtime, &net).map_err(anyhow::Error::from);
        let measured = engine.and_then(|engine| {
            let deployed = instance::deploy(
                row.runtime,
                image,
                &server.url(row.runtime)?,
                engine.docker(),
                &net,
            )?;
            measure_row(*row, &deployed, args, r)
        });
        if let Err(e) = measured {
            eprintln!("vtnt bench micro: {row}: {e:#}");
            r.errors.push(format!("{e:#}"));
        }
    }
    drop(server);
    vtnt_measure::stop::check()?;
    report::write(&mut report, &args.out)?;
    Ok(report)
}

/// The repetitions of one row on its deployed image.
fn measure_row(
    row: Row,
    deployed: &Deployed,
    args: &BenchMicroArgs,
    r: &mut RowReport,
) -> anyhow::Result<()> {
    let timeout = Duration::from_secs(args.timeout_secs);
    let job = |o: Options| JobSpec::new(JobKind::Micro(o), Vec::new());
    let empty = job(Options::EMPTY);
    let loops = job(Options {
        fib: args.fib,
        calls: args.calls,
        syscalls: args.syscalls,
    });
    let run = |job: &JobSpec| -> anyhow::Result<RunOutput> {
        let mut spec = InstanceSpec::new(job.clone());
        spec.vmm = row.vmm;
        spec.accel = row.accel;
        // no PSS samples: their pauses would decide when the exit is seen
        spec.sample_every = None;
        spec.guest_timeout = timeout;
        let out = deployed.start(&spec)?.wait(timeout)?;
        anyhow::ensure!(
            out.ok(),
            "exit {:?}: {}",
            out.code,
            vtnt_measure::proc::tail(&out.stderr, 300)
        );
        Ok(out)
    };
    for i in 0..args.reps {
        vtnt_measure::stop::check()?;
        match run(&empty) {
            Ok(o) => {
                r.boot_ms.push(o.exec_time.as_secs_f64() * 1e3);
                if let Some(a) = o.accelerator {
                    r.accel = a;
                }
            }
            Err(e) => r.errors.push(format!("boot rep {i}: {e:#}")),
        }
    }
    for i in 0..args.reps {
        vtnt_measure::stop::check()?;
        let got = run(&loops).and_then(|o| {
            let line = o.stdout.lines().find_map(Totals::parse).with_context(|| {
                format!(
                    "no micro result line in the output: {}",
                    vtnt_measure::proc::tail(&o.stdout, 300)
                )
            })?;
            let per = |total: u64, n: u32| total as f64 / f64::from(n.max(1));
            r.fib_ns.push(per(line.fib_ns, line.calls));
            r.funcall_ns.push(per(line.funcall_ns, line.calls));
            r.clock_ns.push(per(line.clock_ns, line.calls));
            r.syscall_ns.push(per(line.syscall_ns, line.syscalls));
            r.syscall = Some(line.syscall.to_string());
            r.peak_mib.push(o.mem_peak_bytes as f64 / 1048576.0);
            Ok(())
        });
        if let Err(e) = got {
            r.errors.push(format!("loops rep {i}: {e:#}"));
        }
        eprintln!("  rep {}/{}", i + 1, args.reps);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_runtime_is_a_default_row() {
        assert_eq!(
            BenchMicroArgs::default().runtimes.len(),
            10,
            "every runtime and the microVM under each VMM"
        );
    }

    #[test]
    fn values_out_of_range_are_refused_by_name() {
        use clap::{Args, FromArgMatches};
        let cmd = BenchMicroArgs::augment_args(clap::Command::new("micro"));
        for (args, says) in [
            (&["--fib", "94"][..], "--fib"),
            (&["--reps", "0"], "--reps"),
            (&["--calls", "100000001"], "--calls"),
            (&["--syscalls", "0"], "--syscalls"),
            (&["--runtimes", "native,microvm:xen"], "microvm:xen"),
        ] {
            let e = cmd
                .clone()
                .try_get_matches_from(std::iter::once("micro").chain(args.iter().copied()))
                .and_then(|m| BenchMicroArgs::from_arg_matches(&m))
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }
}
