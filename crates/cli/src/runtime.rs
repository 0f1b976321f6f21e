//! `vtnt image build <runtime>` and `vtnt run --runtime <runtime> -- <job>`: options only;
//! the work is in `vtnt-runtimes` (images cached in /var/cache/vtnt, a local image server,
//! one instance started in the lab's network, destroyed and cleaned up afterwards), and
//! for the unikernel in this command's `unikernel` module.
//!
//! Inside every guest the job runs as `vtnt run --runtime native --local [--hold S] --
//! WORDS`: the job with this very binary, then a hold (the paper's density job sleeps
//! 10 s after its trace). `--local --runtime microvm` boots the unikernel directly (what
//! `vtnt-runtimes` starts for a microVM instance).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use vtnt_runtimes::{job::Job, BuildOptions, RunOptions, Runtime};

#[derive(clap::Subcommand)]
pub enum ImageCommand {
    /// Build (or find in /var/cache/vtnt) the image of a runtime and print its size.
    Build {
        /// native, runc, docker, docker-scratch, vm, unikernel (= microvm).
        runtime: Runtime,
        /// Rebuild even when the cache holds the image (debootstrap again too).
        #[arg(long)]
        rebuild: bool,
        /// Print only the image's path (last line of stdout).
        #[arg(long)]
        print_path: bool,
    },
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Where the job runs.
    #[arg(long, default_value = "native")]
    pub runtime: Runtime,
    /// The lab whose network the job joins (`vtnt lab up --name NAME`).
    #[arg(long, default_value = vtnt_runtimes::DEFAULT_LAB)]
    pub lab: String,
    /// Image server bandwidth, Mbit/s.
    #[arg(long, default_value_t = vtnt_runtimes::DEFAULT_BANDWIDTH_MBPS)]
    pub bandwidth_mbps: u64,
    /// Seconds the job may run once started (VM boots under TCG take minutes).
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Stay alive this many seconds after the job (the density job's hold).
    #[arg(long, default_value_t = 0)]
    pub hold: u32,
    /// Run the job here with this binary, no image, no deploy (what guests run).
    #[arg(long, hide = true)]
    pub local: bool,
    /// The unikernel image to boot with `--local --runtime microvm`.
    #[arg(long, hide = true)]
    pub image: Option<PathBuf>,
    /// The VMM for the microVM: auto (vtnt-monitor where /dev/kvm works, else QEMU),
    /// vtnt, qemu, firecracker.
    #[arg(long, default_value = "auto")]
    pub vmm: String,
    /// microvm only: the guest asks the lab for its address by DHCP (`ip=dhcp`) instead
    /// of taking a static lab slot.
    #[arg(long)]
    pub dhcp: bool,
    /// The job: `vtnt` words, after `--` (e.g. `-- trace -P icmp-paris 203.0.113.10`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub job: Vec<String>,
}

pub fn image(cmd: ImageCommand) -> anyhow::Result<ExitCode> {
    let ImageCommand::Build {
        runtime,
        rebuild,
        print_path,
    } = cmd;
    let info = if runtime == Runtime::Microvm {
        let (path, _) = unikernel_build_image()?;
        if print_path {
            println!("{}", path.display());
            return Ok(ExitCode::SUCCESS);
        }
        vtnt_runtimes::microvm::from_built(&path)?
    } else {
        runtime.build_image(&BuildOptions { rebuild })?
    };
    if print_path {
        println!("{}", info.path.display());
    } else {
        let accel = match runtime {
            Runtime::Vm => Some(vtnt_runtimes::vm::accel()),
            Runtime::Microvm => Some(vtnt_runtimes::microvm::accel(&info.path)),
            _ => None,
        };
        println!(
            "{}: {} ({:.2} MiB; download {:.2} MiB; {}){}",
            runtime.name(),
            info.path.display(),
            info.size_bytes as f64 / 1048576.0,
            info.download_bytes as f64 / 1048576.0,
            info.size_note,
            accel.map_or(String::new(), |a| format!("; runs under {a}"))
        );
        if runtime == Runtime::Vm {
            if let Some(why) = vtnt_vmm::accel::linux_tcg_reason() {
                println!("vm: {why}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if args.dhcp && args.runtime != Runtime::Microvm {
        anyhow::bail!(
            "--dhcp: only the microvm runtime takes its address by DHCP, not {}",
            args.runtime.name()
        );
    }
    if args.local {
        return run_local(&args);
    }
    let job = Job::new(args.job.iter().cloned()).with_hold(args.hold);
    let opts = RunOptions {
        lab: args.lab.clone(),
        bandwidth_bps: args.bandwidth_mbps * 1_000_000,
        timeout: Duration::from_secs(args.timeout),
        dhcp: args.dhcp,
        ..Default::default()
    };
    let out = args
        .runtime
        .run(&job, &opts)
        .with_context(|| format!("running the job in the {} runtime", args.runtime.name()))?;
    print!("{}", out.stdout);
    if !out.ok() {
        eprint!("{}", out.stderr);
    }
    // After the run: the launcher has probed (and cached) the unikernel's accelerator.
    let accel = match args.runtime {
        Runtime::Vm => Some(vtnt_runtimes::vm::accel().to_string()),
        Runtime::Microvm => match vtnt_vmm::job::default_vmm() {
            vtnt_vmm::job::Vmm::Monitor => {
                vtnt_vmm::accel::kvm_kind().map(|a| format!("{a} (vtnt-monitor)"))
            }
            _ => vtnt_vmm::accel::overridden()
                .or_else(vtnt_vmm::accel::cached)
                .map(|a| format!("{a} (QEMU)")),
        },
        _ => None,
    };
    if args.runtime == Runtime::Vm {
        if let Some(why) = vtnt_vmm::accel::linux_tcg_reason() {
            eprintln!("vtnt run: vm: {why}");
        }
    }
    eprintln!(
        "vtnt run: {}: deploy {:.3} s, execution {:.3} s, CPU {:.3} s, exit {:?}{}",
        args.runtime.name(),
        out.deploy_time.as_secs_f64(),
        out.exec_time.as_secs_f64(),
        out.cpu_secs,
        out.code,
        accel.map_or(String::new(), |a| format!(", accelerator {a}"))
    );
    Ok(match out.code {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

/// How often a native job's parent looks at its job and at the signal flag.
const TICK: Duration = Duration::from_millis(100);

/// The job here: this binary with the words (native), or the unikernel booted directly.
fn run_local(args: &RunArgs) -> anyhow::Result<ExitCode> {
    match args.runtime {
        Runtime::Native => {
            let me = std::env::current_exe().context("locating this executable")?;
            // A signal stops the job, which finishes its output as on its own; this
            // process waits for it and passes its exit code on.
            let stop = crate::interrupt::catch()?;
            let mut child = std::process::Command::new(&me)
                .args(&args.job)
                .spawn()
                .with_context(|| format!("running {}", me.display()))?;
            let mut forwarded = false;
            let st = loop {
                if let Some(st) = child.try_wait().context("waiting for the job")? {
                    break st;
                }
                if !forwarded && stop.load(Ordering::SeqCst) {
                    crate::interrupt::forward_sigterm(child.id())?;
                    forwarded = true;
                }
                std::thread::sleep(TICK);
            };
            let code = ExitCode::from(st.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(1));
            // The hold, cut short by a signal.
            let until = Instant::now() + Duration::from_secs(u64::from(args.hold));
            while !stop.load(Ordering::SeqCst) && Instant::now() < until {
                std::thread::sleep(TICK.min(until.saturating_duration_since(Instant::now())));
            }
            Ok(code)
        }
        Runtime::Microvm => {
            if let Some(img) = &args.image {
                std::env::set_var("VTNT_UNIKERNEL_IMAGE", img);
            }
            unikernel_run_microvm(&args.vmm, &args.job, Some(&args.lab), args.hold, args.dhcp)
        }
        other => anyhow::bail!("--local runs native or microvm jobs, not {}", other.name()),
    }
}

// The unikernel side lives in this command's `unikernel` module. The image deployed
// from the image server reaches `run_microvm` through `VTNT_UNIKERNEL_IMAGE` (set above).
fn unikernel_build_image() -> anyhow::Result<(PathBuf, u64)> {
    crate::unikernel::build_image().context("building the unikernel image")
}

fn unikernel_run_microvm(
    vmm: &str,
    job: &[String],
    lab: Option<&str>,
    hold: u32,
    dhcp: bool,
) -> anyhow::Result<ExitCode> {
    crate::unikernel::run_microvm(vmm, job, lab, Duration::from_secs(u64::from(hold)), dhcp)
}
