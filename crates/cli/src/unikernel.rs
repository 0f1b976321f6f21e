//! The unikernel runtime: `vtnt image build unikernel` ([`build_image`]) and
//! `vtnt run --runtime microvm [--hold S] ...` ([`run_microvm`]).
//!
//! The job is given with `vtnt`'s own words (`trace -P icmp-paris -q 1 TARGET`,
//! `ping -c 3 TARGET`, `tnt ... TARGET`), parsed by the very clap parsers of `vtnt trace`,
//! `vtnt ping` and `vtnt tnt`, turned into the canonical job spec (`vtnt-jobspec`) and
//! run in a microVM by `vtnt-vmm` on a running lab's VM front. The guest prints the
//! scamper JSON lines the native command prints (same engine, same writer); they are
//! passed through unchanged, so `vtnt run --runtime microvm -- trace ...` and
//! `vtnt trace ...` print the same objects (RTTs, timestamps and the source address
//! aside).

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use vtnt_jobspec::{EngineSpec, JobKind, JobSpec, Targets};
use vtnt_vmm::job::{run_job, JobNet, RunSpec, Vmm};
use vtnt_vmm::GuestStatus;

use crate::output::Format;
use crate::probe::{self, Common, PingArgs, TraceArgs};
use crate::tnt::TntArgs;

/// Guest watchdog for one run.
const TIMEOUT: Duration = Duration::from_secs(900);

/// Builds the unikernel image; returns its path and size in bytes.
pub fn build_image() -> anyhow::Result<(PathBuf, u64)> {
    let img = vtnt_vmm::image::build(&vtnt_vmm::image::BuildOptions::default())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((img.path, img.size))
}

/// The job words, as `vtnt` itself parses them.
#[derive(Parser, Debug)]
#[command(name = "vtnt", no_binary_name = false)]
struct JobWords {
    #[command(subcommand)]
    job: WordsJob,
}

#[derive(clap::Subcommand, Debug)]
enum WordsJob {
    Trace(TraceArgs),
    Ping(PingArgs),
    Tnt(TntArgs),
}

/// Parses `words` (e.g. `["trace", "-q", "1", "192.0.2.9"]`) into a job spec. Returns the
/// spec, the output format and file, and whether some targets were bad (reported on
/// stderr, as the native command does).
fn job_spec(words: &[String]) -> anyhow::Result<(JobSpec, Format, Option<PathBuf>, bool)> {
    let argv = std::iter::once("vtnt".to_string()).chain(words.iter().cloned());
    let parsed = match JobWords::try_parse_from(argv) {
        Ok(p) => p,
        Err(e) if !e.use_stderr() => {
            // --help / --version: print as clap would and stop.
            print!("{}", e.render());
            bail!("the job words asked for help, not a run");
        }
        Err(e) => bail!("job: {}", e.render().to_string().trim_end()),
    };
    let unspecified = std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    let (kind, common) = match &parsed.job {
        WordsJob::Trace(a) => (JobKind::Trace(a.options(unspecified)), &a.common),
        WordsJob::Ping(a) => (JobKind::Ping(a.options(unspecified)), &a.common),
        WordsJob::Tnt(a) => {
            if a.from.is_some() {
                bail!("tnt --from reads local files; a microVM job cannot take it");
            }
            (JobKind::Tnt(a.config()), &a.common)
        }
    };
    let (targets, engine, some_bad) = engine_spec(common)?;
    let spec = JobSpec {
        kind,
        engine,
        targets: Targets::List(targets),
        hold: Duration::ZERO,
    };
    Ok((spec, common.format, common.output.clone(), some_bad))
}

/// The engine settings and targets of the common options, checked as natively (target
/// safety, rate ceiling). The source address is the guest's own unless `-S` says
/// otherwise: the host's route to the target says nothing about the VM's.
fn engine_spec(c: &Common) -> anyhow::Result<(Vec<std::net::IpAddr>, EngineSpec, bool)> {
    let mut checked = c.clone();
    checked.src = Some(c.src.unwrap_or(Ipv4Addr::UNSPECIFIED));
    let (targets, config, some_bad) = probe::prepare(&checked, probe::Vantage::Lab)?;
    let engine = EngineSpec {
        pps: config.pps,
        burst: config.burst,
        seed: config.seed,
        window: config.max_active as u32,
        src: c.src,
        allow_public: config.policy.allow_public,
        exclude: config.policy.exclude,
    };
    Ok((targets, engine, some_bad))
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Runs the job `job_words` in a microVM under `vmm` (`auto`, `vtnt`, `qemu` or
/// `firecracker`) attached
/// to lab `lab` (default [`vtnt_lab_linux::DEFAULT_NAME`]) and prints the result lines as the native
/// command would. Guest diagnostics go to stderr with `--verbose`-free brevity: only
/// errors. The guest then stays up (halted) `hold` after printing its results (the job
/// spec's `hold=`, at most `vtnt_jobspec::MAX_HOLD`; the density job's delay). The image booted is
/// With `dhcp` the guest leases its address from the lab's VM front. The image booted is
/// `$VTNT_UNIKERNEL_IMAGE` when set (the file `vtnt-runtimes` downloaded), else this
/// workspace's, built if needed.
pub fn run_microvm(
    vmm: &str,
    job_words: &[String],
    lab: Option<&str>,
    hold: Duration,
    dhcp: bool,
) -> anyhow::Result<ExitCode> {
    let Some(vmm) = Vmm::from_name(vmm) else {
        bail!("unknown VMM `{vmm}` (auto, vtnt, qemu, firecracker)");
    };
    let (mut spec, format, output, some_bad) = job_spec(job_words)?;
    if hold > vtnt_jobspec::MAX_HOLD {
        bail!("--hold: at most {} s", vtnt_jobspec::MAX_HOLD.as_secs());
    }
    spec.hold = hold;
    let image = match std::env::var_os("VTNT_UNIKERNEL_IMAGE").filter(|p| !p.is_empty()) {
        Some(p) => {
            let p = PathBuf::from(p);
            if !p.is_file() {
                bail!("VTNT_UNIKERNEL_IMAGE={}: no such file", p.display());
            }
            Some(p)
        }
        None => None,
    };
    if format != Format::Json {
        bail!("a microVM job prints scamper JSON only (-O json); convert with `vtnt convert`");
    }
    let lab = lab.unwrap_or(vtnt_lab_linux::DEFAULT_NAME);
    let mut run = RunSpec::new(
        spec,
        JobNet::Lab {
            name: lab.to_string(),
        },
    );
    run.vmm = vmm;
    run.timeout = TIMEOUT;
    run.hostname = hostname();
    run.image = image;
    run.dhcp = dhcp;
    let out = run_job(&run).map_err(|e| anyhow::anyhow!("{e}"))?;
    match out.status {
        GuestStatus::Exited(0) => {}
        GuestStatus::Exited(n) => {
            let why = out.error().unwrap_or("no error message");
            bail!("the unikernel failed (status {n}): {why}");
        }
        GuestStatus::TimedOut => bail!(
            "the microVM did not finish within {} s",
            (TIMEOUT + hold).as_secs() + 10
        ),
        GuestStatus::Vanished => bail!(
            "the microVM stopped without a status: {}",
            out.vmm_stderr.trim()
        ),
    }
    for d in &out.diagnostics {
        if let Some(w) = d.strip_prefix("vtnt: warning: ") {
            eprintln!("vtnt: {w}");
        }
    }
    let mut text = String::new();
    for l in &out.json_lines {
        text.push_str(l);
        text.push('\n');
    }
    match output {
        Some(path) => {
            let (file, mut f) = crate::output::AtomicFile::create(&path)
                .with_context(|| format!("creating output file {}", path.display()))?;
            f.write_all(text.as_bytes())?;
            drop(f);
            file.commit()?;
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(text.as_bytes())?;
            stdout.flush()?;
        }
    }
    Ok(if some_bad {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn job_words_become_the_canonical_spec() {
        let (spec, ..) = job_spec(&words(
            "trace -P icmp-paris -q 1 -w 1 --seed 7 198.51.100.1",
        ))
        .unwrap();
        assert_eq!(
            vtnt_jobspec::encode(&spec),
            "vtnt-job=1 kind=trace trace.method=icmp-paris trace.attempts=1 trace.wait=1s seed=7 targets=198.51.100.1"
        );
        let (spec, ..) = job_spec(&words("ping -c 3 -i 0.1 --seed 1 192.0.2.1")).unwrap();
        assert_eq!(
            vtnt_jobspec::encode(&spec),
            "vtnt-job=1 kind=ping ping.count=3 ping.interval=100ms targets=192.0.2.1"
        );
        let (spec, ..) =
            job_spec(&words("tnt -b --no-buddy -p 100 203.0.113.10 203.0.113.11")).unwrap();
        let line = vtnt_jobspec::encode(&spec);
        assert!(line.starts_with("vtnt-job=1 kind=tnt "), "{line}");
        assert!(
            line.contains(" tnt.brute-force=true tnt.buddy=false "),
            "{line}"
        );
        assert_eq!(vtnt_jobspec::decode(&line).unwrap(), spec);
    }

    #[test]
    fn bad_job_words_are_errors() {
        assert!(job_spec(&words("trace -q 0 192.0.2.1")).is_err());
        assert!(job_spec(&words("dance 192.0.2.1")).is_err());
        assert!(job_spec(&words("trace")).is_err(), "no target");
    }
}
