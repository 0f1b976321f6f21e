//! `vtnt trace` and `vtnt ping`: options in scamper's letters, targets checked for
//! safety, the engine driven by the Linux driver, results in scamper's formats.

use std::io::IsTerminal;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use vtnt_engine::{Config, Engine, Event, Job, Method, PingOptions, TraceOptions};

use vtnt_engine::policy::{PrefixSet, MAX_PPS_LAB, MAX_PPS_PUBLIC};
use vtnt_engine::{LabAccess, Policy};

use crate::interrupt;
use crate::output::{self, Format, Output};
use crate::targets;

/// The exclusion list read on every run when it exists: prefixes never to probe, one per
/// line (`#` comments), as an operator's opt-out list. `--exclude FILE` adds more.
pub const DEFAULT_EXCLUDE: &str = "/etc/vtnt/exclude.conf";

/// Where the probes of a run leave from, which decides which lab addresses lead into a lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vantage {
    /// This host's network namespace: its routes say where the lab is.
    Host,
    /// A guest attached to the lab's own network (the unikernel on the lab front).
    Lab,
}

/// Options every probing command shares.
#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    /// Targets: addresses or host names.
    #[arg(value_name = "TARGET")]
    pub targets: Vec<String>,
    /// Read targets from FILE, one per line (`#` starts a comment); bad lines are reported
    /// with their line number and the rest probed.
    #[arg(long = "targets", value_name = "FILE")]
    pub targets_file: Option<PathBuf>,
    /// Probes per second for the whole run (scamper's -p). At most 500000; public targets
    /// are probed only in runs of at most 1000.
    #[arg(short = 'p', long = "pps", default_value_t = 20)]
    pub pps: u32,
    /// Output format.
    #[arg(short = 'O', long = "format", value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// Write results to FILE instead of stdout. FILE must be a regular file or not exist;
    /// it is replaced when the run ends (also on SIGINT or SIGTERM, with the records
    /// finished so far) and left untouched when the run fails.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Allow targets outside loopback and the lab's ranges. Probing other people's
    /// networks needs their consent.
    #[arg(long)]
    pub allow_public: bool,
    /// Never probe the prefixes listed in FILE (one per line, `#` comments), on top of
    /// /etc/vtnt/exclude.conf when it exists. May be repeated.
    #[arg(long = "exclude", value_name = "FILE")]
    pub exclude: Vec<PathBuf>,
    /// Source address of the probes: one of this host's addresses (default: the kernel's
    /// choice for the first target). vTNT does not spoof.
    #[arg(short = 'S', long = "src")]
    pub src: Option<Ipv4Addr>,
    /// Seed for probe identifiers (ICMP idents, source ports, Paris checksums and the tag
    /// every probe carries so that concurrent runs on one host never take each other's
    /// replies). Default: drawn from the process id and the time, so concurrent runs
    /// differ; give one to make a run reproducible (runs at the same time on one host
    /// need different seeds).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Measurements running at once; the rest wait their turn.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=32768))]
    pub window: u32,
}

pub fn seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(0.001..=3600.0).contains(&v) {
        return Err(format!("{v} s is out of range (0.001..=3600)"));
    }
    Ok(Duration::from_secs_f64(v))
}

pub fn method(s: &str) -> Result<Method, String> {
    Method::from_option(s)
        .ok_or_else(|| format!("unknown method `{s}` (icmp-paris, udp-paris, tcp)"))
}

/// `vtnt trace`.
#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    /// Probe method: icmp-paris, udp-paris or tcp.
    #[arg(short = 'P', long = "method", default_value = "udp-paris", value_parser = method)]
    pub method: Method,
    /// First TTL.
    #[arg(short = 'f', long = "first-ttl", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..))]
    pub first: u8,
    /// Maximum TTL.
    #[arg(short = 'm', long = "max-ttl", default_value_t = 255, value_parser = clap::value_parser!(u8).range(1..))]
    pub max: u8,
    /// Probes per hop.
    #[arg(short = 'q', long = "attempts", default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=20))]
    pub attempts: u8,
    /// Seconds to wait for a reply.
    #[arg(short = 'w', long = "wait", default_value = "5", value_parser = seconds)]
    pub wait: Duration,
    /// Unresponsive hops in a row before giving up.
    #[arg(short = 'g', long = "gap-limit", default_value_t = 5, value_parser = clap::value_parser!(u8).range(1..))]
    pub gaplimit: u8,
    /// Times an address may repeat (non-adjacently) before the trace stops with LOOP.
    #[arg(short = 'l', long = "loops", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..))]
    pub loops: u8,
    /// Destination port (UDP default 33435, TCP default 80).
    #[arg(short = 'd', long = "dport")]
    pub dport: Option<u16>,
    /// Source port (default: chosen per trace).
    #[arg(short = 's', long = "sport")]
    pub sport: Option<u16>,
    #[command(flatten)]
    pub common: Common,
}

impl TraceArgs {
    pub fn options(&self, dst: IpAddr) -> TraceOptions {
        let mut o = TraceOptions::new(dst).with_method(self.method);
        o.first_ttl = self.first;
        o.max_ttl = self.max;
        o.attempts = self.attempts;
        o.wait = self.wait;
        o.gaplimit = self.gaplimit;
        o.loops = self.loops;
        o.dport = self.dport;
        o.sport = self.sport;
        o
    }
}

/// `vtnt ping`.
#[derive(clap::Args, Debug)]
pub struct PingArgs {
    /// Probes to send.
    #[arg(short = 'c', long = "count", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub count: u16,
    /// Seconds between probes.
    #[arg(short = 'i', long = "interval", default_value = "1", value_parser = seconds)]
    pub interval: Duration,
    /// Probe method: icmp-paris (ICMP echo), udp-paris (UDP to a closed port) or tcp (SYN).
    #[arg(short = 'P', long = "method", default_value = "icmp-paris", value_parser = method)]
    pub method: Method,
    /// IP-TTL of the probes.
    #[arg(short = 'm', long = "ttl", default_value_t = 64, value_parser = clap::value_parser!(u8).range(1..))]
    pub ttl: u8,
    /// Seconds to wait for replies after the last probe.
    #[arg(short = 'W', long = "timeout", default_value = "1", value_parser = seconds)]
    pub timeout: Duration,
    #[command(flatten)]
    pub common: Common,
}

impl PingArgs {
    pub fn options(&self, dst: IpAddr) -> PingOptions {
        let mut o = PingOptions::new(dst).with_method(self.method);
        o.count = self.count;
        o.interval = self.interval;
        o.ttl = self.ttl;
        o.timeout = self.timeout;
        o
    }
}

/// The exclusion lists of the options: /etc/vtnt/exclude.conf when it exists and every
/// `--exclude FILE`, as one set.
fn exclusions(c: &Common) -> anyhow::Result<PrefixSet> {
    let default = std::path::Path::new(DEFAULT_EXCLUDE);
    let files = default
        .exists()
        .then(|| default.to_path_buf())
        .into_iter()
        .chain(c.exclude.iter().cloned());
    let mut prefixes = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f)
            .with_context(|| format!("reading exclusion list {}", f.display()))?;
        let set = PrefixSet::parse(&text)
            .map_err(|e| anyhow::anyhow!("exclusion list {}: {e}", f.display()))?;
        prefixes.extend(set.iter().copied());
    }
    Ok(prefixes.into_iter().collect())
}

/// Checks the common options and resolves the targets against the probing policy (consent
/// to public targets, the exclusion lists, which lab addresses lead into a lab from
/// `vantage`, and on the host that `-S` is one of its addresses); reports bad targets on
/// stderr. Returns the targets, the engine config (carrying the policy, which the engine
/// enforces again on every job) and whether some targets were bad.
pub fn prepare(c: &Common, vantage: Vantage) -> anyhow::Result<(Vec<IpAddr>, Config, bool)> {
    vtnt_engine::policy::check_rate(c.pps).map_err(|_| {
        anyhow::anyhow!(
            "--pps {} is out of range (1..={MAX_PPS_LAB}; {MAX_PPS_PUBLIC} at most with public targets)",
            c.pps
        )
    })?;
    let lab = match vantage {
        Vantage::Host => {
            let own = vtnt_linux::own_addresses().context("listing this host's addresses")?;
            if let Some(src) = c.src {
                vtnt_engine::policy::check_source(src, &own)
                    .map_err(|e| anyhow::anyhow!("-S: {e}"))?;
            }
            vtnt_linux::lab_access(&own).context("reading this host's routes")?
        }
        Vantage::Lab => LabAccess::All,
    };
    let policy = Policy {
        allow_public: c.allow_public,
        exclude: exclusions(c)?,
        lab,
    };
    let (good, bad) = targets::collect(&c.targets, c.targets_file.as_deref(), &policy, c.pps)?;
    for b in &bad {
        eprintln!("vtnt: skipping {b}");
    }
    if good.is_empty() {
        anyhow::bail!("no target to probe (give TARGET arguments or --targets FILE)");
    }
    let src = match c.src {
        Some(s) => s,
        None => targets::source_for(good[0])?,
    };
    let mut config = Config::new(src);
    config.pps = c.pps;
    config.burst = (c.pps / 1000).max(1);
    config.seed = c.seed.unwrap_or_else(default_seed);
    config.max_active = c.window as usize;
    config.policy = policy;
    Ok((good, config, !bad.is_empty()))
}

/// Warns when `--pps` is more than `--window` measurements can use while each waits `gap`
/// for an answer (a trace's `-w`, a ping's `-i`): unanswered probes hold the rate at
/// `window / gap`.
pub fn warn_unreachable_rate(c: &Common, gap: Duration) {
    let most = c.window as f64 / gap.as_secs_f64().max(1e-6);
    if c.pps as f64 > most && c.pps > 1 {
        eprintln!(
            "vtnt: warning: --pps {} is more than {} measurements at once can send while each waits {:?} for an answer (at most about {:.0} pps); raise --window",
            c.pps, c.window, gap, most
        );
    }
}

/// A seed no other process on the host is likely to have: the process id and the time.
fn default_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (u64::from(std::process::id()) << 32) ^ nanos
}

/// Reports the probes the kernel refused to send (`vtnt: N probes could not be sent:
/// why`); fails when none could be sent at all. Returns whether some were refused.
pub fn check_sent(stats: &vtnt_linux::LoopStats) -> anyhow::Result<bool> {
    let Some(errno) = stats.first_send_error else {
        return Ok(false);
    };
    let why = std::io::Error::from_raw_os_error(errno);
    eprintln!(
        "vtnt: {} probes could not be sent: {why}",
        stats.send_errors
    );
    if stats.sent == 0 {
        anyhow::bail!("no probe could be sent");
    }
    Ok(true)
}

/// A progress bar on stderr for long target lists, hidden when stderr is not a terminal.
pub fn progress(n: usize, what: &str) -> indicatif::ProgressBar {
    if n < 2 || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(n as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {pos}/{len} {msg} [{elapsed_precise}] {wide_bar} {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(what.to_string());
    bar
}

/// Runs one job per target and writes every record; on SIGINT or SIGTERM stops probing
/// and keeps the records finished so far.
pub fn run_jobs(c: &Common, jobs: impl Fn(IpAddr) -> Job, what: &str) -> anyhow::Result<ExitCode> {
    output::check(c.output.as_deref(), c.format)?;
    let (targets, config, some_bad) = prepare(c, Vantage::Host)?;
    let mut sockets = vtnt_linux::RawSockets::open()?;
    let clock = vtnt_linux::Clock::new();
    let mut engine = Engine::new(config).map_err(|e| anyhow::anyhow!("{e}"))?;
    let now = clock.now();
    for t in &targets {
        engine
            .start(now, jobs(*t))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let stop = interrupt::catch()?;
    let mut out = Output::open(c.output.as_deref(), c.format)?;
    let bar = progress(targets.len(), what);
    let stats = vtnt_linux::run_until(&mut engine, &mut sockets, &clock, stop, |ev| {
        let Event::Finished { record, .. } = ev;
        bar.inc(1);
        out.record(&record)
    })
    .context("probing")?;
    bar.finish_and_clear();
    let some_unsent = check_sent(&stats)?;
    let records = out.finish()?;
    Ok(if stats.interrupted {
        interrupt::report(records, c.output.as_deref())
    } else if some_bad || some_unsent {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
