//! `vtnt image build <runtime>` and `vtnt run --runtime <runtime> -- <job>`: options only.
//! The job words are parsed into a typed job (`vtnt-job`) here, once; the runtimes
//! (`vtnt-runtimes`: images cached in /var/cache/vtnt, a local image server, one instance
//! started in the lab's network, destroyed and cleaned up afterwards) take that job and
//! hand it to their instance encoded as its canonical line (`vtnt job LINE` in processes,
//! containers and VMs; the kernel command line of the unikernel).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use vtnt_job::{say, Format, Vantage};

use crate::correct_rtt::Mode;
use vtnt_runtimes::net::Network;
use vtnt_runtimes::{BuildOptions, RunOptions, Runtime};
use vtnt_unikernel::launch::Vmm;

#[derive(clap::Subcommand)]
pub enum ImageCommand {
    /// Make (or find in /var/cache/vtnt) the image of a runtime and print its size: native,
    /// microvm and spt copy the installed files (lib/vtnt, checked against their
    /// manifest; docs/install.md), runc, docker and vm build theirs here.
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
    /// The network the job probes: `lab[:NAME]` (a running `vtnt lab`), `host` (this
    /// host's own network: native, runc, docker) or `tap:IFACE,ip=ADDR/LEN,gw=GATEWAY`
    /// (an existing TAP device, up: vm, microvm; add `,ip6=ADDR6/LEN6,gw6=GATEWAY6` for
    /// IPv6 jobs, `,netns=NAME` for a device in another namespace). Default: the lab of
    /// `--lab`.
    #[arg(long, value_name = "NET")]
    pub net: Option<Network>,
    /// The lab of `--net lab` (`vtnt lab up --name NAME`).
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
    /// While holding, run the job again every this many seconds (0: once): a vantage
    /// point that stays alive and keeps measuring.
    #[arg(long, default_value_t = 0)]
    pub every: u32,
    /// The VMM for the microVM: auto (vtnt-monitor where /dev/kvm works, else QEMU),
    /// vtnt, qemu, firecracker.
    #[arg(long, default_value = "auto")]
    pub vmm: String,
    /// microvm only: the guest asks the lab for its address by DHCP (`ip=dhcp`) instead
    /// of taking a static lab slot.
    #[arg(long)]
    pub dhcp: bool,
    /// RTT correction for the runtime's own latency (docs/rtt-correction.md), on by
    /// default for every runtime but native: each ping and trace record gets
    /// `rtt_correction`, every ICMP echo reply's and trace hop's `rtt_corrected` and
    /// `rtt_overhead` (ms) beside its `rtt` (the runtime's, unchanged) where the runtime's
    /// host side is captured (containers, VMs, microVMs and spt on a lab, VMs on a TAP),
    /// else the reason not. `--correct-rtt` also annotates native and held jobs, and
    /// fails if the capture cannot start.
    #[arg(long, conflicts_with = "no_correct_rtt")]
    pub correct_rtt: bool,
    /// No RTT correction: the runtime's JSON exactly as its tool printed it.
    #[arg(long)]
    pub no_correct_rtt: bool,
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
    let info = runtime.build_image(&BuildOptions { rebuild })?;
    if print_path {
        out!("{}", info.path.display());
    } else {
        let accel = runtime.accelerator(&info);
        out!(
            "{}: {} ({:.2} MiB; download {:.2} MiB; {}){}",
            runtime.name(),
            info.path.display(),
            info.size_bytes as f64 / 1048576.0,
            info.download_bytes as f64 / 1048576.0,
            info.size_note,
            accel.map_or(String::new(), |a| format!("; runs under {a}"))
        );
        if runtime == Runtime::Vm {
            if let Some(why) = vtnt_unikernel::accel::linux_tcg_reason() {
                out!("vm: {why}");
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
    let Some(vmm) = Vmm::from_name(&args.vmm) else {
        anyhow::bail!(
            "--vmm: unknown VMM `{}` (auto, vtnt, qemu, firecracker)",
            args.vmm
        );
    };
    anyhow::ensure!(
        vtnt_linux::is_root(),
        "`vtnt run` needs root: instances get cgroups, network namespaces and raw sockets, VMs TAP devices"
    );
    let net = args.net.clone().unwrap_or(Network::Lab(args.lab.clone()));
    net.check(args.runtime)?;
    // On the host's own network, targets are checked as `vtnt trace` checks them there.
    let vantage = match net {
        Network::Host => Vantage::Host,
        Network::Lab(_) | Network::Tap(_) => Vantage::Lab,
    };
    let job = vtnt_job::parse_words(&args.job, vantage)?.with_hold(
        Duration::from_secs(u64::from(args.hold)),
        Duration::from_secs(u64::from(args.every)),
    )?;
    anyhow::ensure!(
        job.format == Format::Json,
        "a job in a runtime prints scamper JSON only (-O json); convert with `vtnt convert`"
    );
    if let Some(p) = &job.output {
        crate::output::check_destination(p)?;
    }
    let mode = match (args.correct_rtt, args.no_correct_rtt) {
        (true, _) => Mode::On,
        (_, true) => Mode::Off,
        _ => Mode::Auto,
    };
    let held = args.hold > 0 || args.every > 0;
    let (correction, capture) = crate::correct_rtt::prepare(mode, args.runtime, &net, held)?;
    let opts = RunOptions {
        net,
        bandwidth_bps: args.bandwidth_mbps * 1_000_000,
        timeout: Duration::from_secs(args.timeout),
        dhcp: args.dhcp,
        vmm,
        ..Default::default()
    };
    let out = args
        .runtime
        .run(&job.spec, &opts)
        .with_context(|| format!("running the job in the {} runtime", args.runtime.name()))?;
    let stdout = match (capture, &correction) {
        (Some(c), _) => c.finish(&out.stdout)?,
        (None, Some(crate::correct_rtt::Plan::Not(why))) => {
            crate::correct_rtt::annotate(&out.stdout, &Err(why))
        }
        (None, _) => out.stdout.clone(),
    };
    match &job.output {
        Some(path) => {
            let (file, mut f) = crate::output::AtomicFile::create(path)
                .with_context(|| format!("creating output file {}", path.display()))?;
            f.write_all(stdout.as_bytes())?;
            drop(f);
            file.commit()?;
        }
        None => put!("{stdout}"),
    }
    if !out.ok() {
        say!("{}", out.stderr.trim_end());
    }
    let accel = out.accelerator.clone();
    if args.runtime == Runtime::Vm {
        if let Some(why) = vtnt_unikernel::accel::linux_tcg_reason() {
            say!("vtnt run: vm: {why}");
        }
    }
    say!(
        "vtnt run: {}: deploy {:.3} s, execution {:.3} s, CPU {:.3} s, exit {:?}{}",
        args.runtime.name(),
        out.deploy_time.as_secs_f64(),
        out.exec_time.as_secs_f64(),
        out.cpu_secs,
        out.code,
        accel.map_or(String::new(), |a| format!(", accelerator {a}"))
    );
    Ok(match out.code {
        Some(0) if job.some_bad => ExitCode::from(2),
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}
