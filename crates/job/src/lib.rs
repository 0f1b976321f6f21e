//! vTNT's job vocabulary for every host-side consumer: the `vtnt` command, the runtimes
//! (`vtnt-runtimes`), the evaluation and a fleet agent all take the same typed [`Job`].
//!
//! A user gives a job in `vtnt`'s own words (`trace -P icmp-paris -q 1 203.0.113.10`);
//! [`options`] holds those options as clap types and [`parse_words`] (or
//! [`JobArgs::job`] for options clap has already parsed) checks them the way `vtnt`
//! does before any probe: the rate ceiling, consent to public targets, the exclusion
//! lists, host names resolved in parallel ([`targets`]), bad targets reported on
//! stderr. The result is a [`Job`]: the canonical [`JobSpec`] (what `vtnt-jobspec`
//! encodes for guests and the unikernel: kind, engine settings, targets, hold) plus where
//! its results go on this host.
//!
//! Where a job runs decides which lab addresses it may reach ([`Vantage`]): on this host,
//! its routes say; in a runtime attached to the lab, every lab range is reachable.
//!
//! Imports: the sans-IO core (`vtnt-engine`, `vtnt-tnt`, `vtnt-jobspec`) and
//! `vtnt-linux` (this host's addresses and routes); nothing that runs a job.

pub mod error;
pub mod lookup;
pub mod options;
pub mod targets;

/// `eprintln!` that never panics: one line to stderr, dropped when stderr cannot take it
/// (a full device, a closed pipe), so that a report never changes how a run ends.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::stderr_line(::core::format_args!($($arg)*))
    };
}

/// The longest run of digits a message shows whole (a `u64` has 20).
const DIGITS_SHOWN: usize = 20;

/// `text` with every run of more than 20 digits cut to its first 20 and its length
/// (`99999999999999999999… (300 digits)`), so that an error quoting a number someone
/// typed 300 digits long stays readable.
pub fn elide_long_numbers(text: &str) -> std::borrow::Cow<'_, str> {
    let long = |run: &str| run.len() > DIGITS_SHOWN;
    let runs = || text.split(|c: char| !c.is_ascii_digit());
    if !runs().any(long) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        out.push_str(&rest[..start]);
        let run = &rest[start..];
        let len = run.find(|c: char| !c.is_ascii_digit()).unwrap_or(run.len());
        if len > DIGITS_SHOWN {
            out.push_str(&run[..DIGITS_SHOWN]);
            out.push_str(&format!("… ({len} digits)"));
        } else {
            out.push_str(&run[..len]);
        }
        rest = &run[len..];
    }
    out.push_str(rest);
    out.into()
}

/// What [`say!`] does: writes `args` and a newline to stderr, ignoring failure.
#[doc(hidden)]
pub fn stderr_line(args: std::fmt::Arguments) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{args}");
}

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use vtnt_engine::policy::{PrefixSet, MAX_PPS_LAB, MAX_PPS_PUBLIC};
use vtnt_engine::{Config, Engine, LabAccess, Policy};

pub use error::{Error, Result};
pub use vtnt_jobspec::{micro, EngineSpec, JobKind, JobSpec, Targets, MAX_HOLD};

pub use options::{Common, Format, OutputOption, PingArgs, TntArgs, TraceArgs};

/// The exclusion list read on every run when it exists: prefixes never to probe, one per
/// line (`#` comments), as an operator's opt-out list. `--exclude FILE` adds more.
pub const DEFAULT_EXCLUDE: &str = "/etc/vtnt/exclude.conf";

/// Where the probes of a job leave from, which decides which lab addresses lead into a
/// lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vantage {
    /// This host's network namespace: its routes say where the lab is, and the source
    /// address is one of its own.
    Host,
    /// A runtime attached to the lab's own network (every runtime's instance in the lab):
    /// the source is the instance's own address unless `-S` names one.
    Lab,
}

/// One job, typed: what to run and where its results go.
#[derive(Debug, Clone)]
pub struct Job {
    /// The job itself, as every runtime and the unikernel take it.
    pub spec: JobSpec,
    /// Output format (`-O`).
    pub format: Format,
    /// Look up hop names (`-O ptr`): only for traces run on this host, through its
    /// resolver; never part of the [`JobSpec`] (a runtime's job cannot take it).
    pub names: bool,
    /// Output file (`-o`); stdout when `None`.
    pub output: Option<PathBuf>,
    /// Some targets were refused or could not be resolved (reported on stderr; the job
    /// exits 2 when it ends).
    pub some_bad: bool,
    /// No progress display (`--quiet`).
    pub quiet: bool,
}

impl Job {
    /// The same job held `hold` after its results (the density job's delay), and run
    /// again every `every` meanwhile (zero: once).
    pub fn with_hold(mut self, hold: Duration, every: Duration) -> Result<Job> {
        self.spec.hold = hold;
        self.spec.every = every;
        match self.spec.hold_error() {
            Some((key, why)) => Err(Error::invalid(format!("--{key}: {why}"))),
            None => Ok(self),
        }
    }
}

/// What this host's network says for the policy: its addresses (`-S` must be one), which
/// lab addresses lead into a lab, and the prefixes of its links.
struct HostNet {
    own: Vec<Ipv4Addr>,
    lab: LabAccess,
    links: Vec<vtnt_engine::policy::Prefix>,
}

impl HostNet {
    fn read() -> Result<HostNet> {
        let own = vtnt_linux::own_addresses()
            .map_err(|e| Error::io("listing this host's addresses", e))?;
        let lab =
            vtnt_linux::lab_access(&own).map_err(|e| Error::io("reading this host's routes", e))?;
        let links =
            vtnt_linux::own_links().map_err(|e| Error::io("listing this host's links", e))?;
        Ok(HostNet { own, lab, links })
    }

    /// Fails unless `-S src` is one of this host's addresses.
    fn check_source(&self, src: Option<Ipv4Addr>) -> Result<()> {
        match src {
            Some(s) => vtnt_engine::policy::check_source(s, &self.own)
                .map_err(|e| Error::invalid(format!("-S: {e}"))),
            None => Ok(()),
        }
    }
}

/// The engine configuration of `spec` for a run on this host: the source is `-S` (which
/// must be one of this host's addresses; without it the engine of [`host_engine`] asks
/// the kernel per destination and `src` is unspecified), this host's routes say which lab
/// addresses lead into a lab, and its links which addresses are their network and
/// broadcast addresses.
pub fn host_config(spec: &JobSpec) -> Result<Config> {
    let net = HostNet::read()?;
    net.check_source(spec.engine.src)?;
    let src = spec.engine.src.unwrap_or(Ipv4Addr::UNSPECIFIED);
    let mut config = spec
        .engine
        .config(src)
        .map_err(|e| Error::invalid(e.to_string()))?;
    config.policy.lab = net.lab;
    config.policy.links = net.links;
    Ok(config)
}

/// The engine of `spec` on this host ([`host_config`]): without `-S`, each measurement's
/// source is the one the kernel's route to its destination gives
/// ([`vtnt_linux::RouteSources`]), so a loopback target is probed from 127.0.0.1 and
/// changes nothing for the others.
pub fn host_engine(spec: &JobSpec) -> Result<Engine> {
    let mut engine = Engine::new(host_config(spec)?).map_err(|e| Error::invalid(e.to_string()))?;
    if spec.engine.src.is_none() {
        engine.set_source_lookup(vtnt_linux::RouteSources::new().into_lookup());
    }
    Ok(engine)
}

/// `vtnt`'s job subcommands, as clap parses them.
#[derive(clap::Subcommand, Debug)]
pub enum JobArgs {
    /// Paris traceroute (scamper's trace options).
    Trace(TraceArgs),
    /// Ping with ICMP echo, UDP or TCP SYN.
    Ping(PingArgs),
    /// TNT: reveal MPLS tunnels along the paths to the targets and fingerprint routers.
    Tnt(TntArgs),
}

impl JobArgs {
    /// The options every kind shares.
    pub fn common(&self) -> &Common {
        match self {
            JobArgs::Trace(a) => &a.common,
            JobArgs::Ping(a) => &a.common,
            JobArgs::Tnt(a) => &a.common,
        }
    }

    /// The job's kind with its options (a trace or ping template's `dst` is unspecified:
    /// each target gets its own).
    pub fn kind(&self) -> JobKind {
        let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        match self {
            JobArgs::Trace(a) => JobKind::Trace(a.options(any)),
            JobArgs::Ping(a) => JobKind::Ping(vtnt_engine::PingOptions {
                probe_size: a.size.unwrap_or(vtnt_jobspec::DEFAULT_SIZE),
                ..a.options(any)
            }),
            JobArgs::Tnt(a) => JobKind::Tnt(a.config()),
        }
    }

    /// The warning for a rate the window cannot reach ([`rate_warning`]), known before
    /// any target is checked.
    pub fn rate_warning(&self) -> Option<String> {
        let c = self.common();
        rate_warning(&self.kind(), c.pps, c.window)
    }

    /// Checks the options and targets for a run from `vantage` (see [`job`]).
    pub fn job(&self, vantage: Vantage) -> Result<Job> {
        if let (JobArgs::Tnt(a), Vantage::Lab) = (self, vantage) {
            if a.from.is_some() {
                return Err(Error::invalid(
                    "tnt --from reads local files; a job for a runtime cannot take it",
                ));
            }
        }
        job(self.kind(), self.common(), vantage)
    }
}

#[derive(Parser, Debug)]
#[command(name = "vtnt")]
struct Words {
    #[command(subcommand)]
    job: JobArgs,
}

/// Parses a job given in `vtnt`'s words (`["trace", "-q", "1", "192.0.2.9"]`) and checks
/// it for a run from `vantage`. `--help` in the words is an error carrying clap's help.
/// `-O ptr` is refused: hop names are looked up through this host's resolver by `vtnt
/// trace` itself, which a job for a runtime is not (and the unikernel has no resolver);
/// so are `--store` and `--no-store` (a runtime's results go where the runtime sends them).
pub fn parse_words(words: &[String], vantage: Vantage) -> Result<Job> {
    // a runtime's job writes its results where the runtime says, in no store of its own
    let args = parse_args(words, &["store", "no_store"])?;
    if args.common().ptr() {
        return Err(Error::invalid(
            "-O ptr: hop names are looked up by `vtnt trace` on this host; a job for a \
             runtime cannot take it (the unikernel has no resolver)",
        ));
    }
    args.job(vantage)
}

/// Parses a job given in `vtnt`'s words into its options, unchecked; an option whose
/// field is named in `refused` (`"pps"`, `"output"`...) is an error naming its flag when
/// the words give it (a daemon's commands may not set its run-wide options).
pub fn parse_args(words: &[String], refused: &[&str]) -> Result<JobArgs> {
    use clap::{CommandFactory, FromArgMatches};
    let argv = std::iter::once("vtnt".to_string()).chain(words.iter().cloned());
    let render = |e: clap::Error| {
        let text = e.render().to_string();
        Error::Words(elide_long_numbers(text.trim_end()).into_owned())
    };
    let cmd = Words::command();
    let matches = cmd.clone().try_get_matches_from(argv).map_err(render)?;
    if let Some((name, sub)) = matches.subcommand() {
        let given = refused.iter().find(|id| {
            sub.try_get_raw(id).is_ok_and(|v| v.is_some())
                && sub.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
        });
        if let Some(id) = given {
            let arg = cmd
                .find_subcommand(name)
                .and_then(|c| c.get_arguments().find(|a| a.get_id() == *id));
            let flag = match arg.map(|a| (a.get_short(), a.get_long())) {
                Some((Some(s), Some(l))) => format!("-{s}/--{l}"),
                Some((None, Some(l))) => format!("--{l}"),
                _ => (*id).to_string(),
            };
            return Err(Error::NotAccepted { flag });
        }
    }
    Ok(Words::from_arg_matches(&matches).map_err(render)?.job)
}

/// Checks the common options and resolves the targets against the probing policy (consent
/// to public targets, the exclusion lists, which lab addresses lead into a lab from
/// `vantage`, only unicast addresses; on the host also that `-S` is one of its addresses,
/// that no target is the network or broadcast address of one of its links, and, without
/// `-S`, that the kernel routes each target to a source address); reports bad targets on
/// stderr, one line each, and the job goes on with the rest (it exits 2 at the end). The
/// engine enforces the same policy again on every probe.
pub fn job(kind: JobKind, c: &Common, vantage: Vantage) -> Result<Job> {
    let (job, bad) = check_job(kind, c, vantage)?;
    for b in &bad {
        say!("vtnt: skipping {b}");
    }
    job.ok_or(Error::NoTarget)
}

/// [`job`], printing nothing: the targets refused (or not resolved) come back beside the
/// job, which is `None` when no target is left.
pub fn check_job(
    kind: JobKind,
    c: &Common,
    vantage: Vantage,
) -> Result<(Option<Job>, Vec<targets::BadTarget>)> {
    check_options(&kind)?;
    if c.ptr() && !matches!(kind, JobKind::Trace(_)) {
        return Err(Error::invalid(
            "-O ptr: only `vtnt trace` looks up hop names (scamper's trace option)",
        ));
    }
    vtnt_engine::policy::check_rate(c.pps).map_err(|_| {
        Error::Invalid(format!(
            "--pps {} is out of range (1..={MAX_PPS_LAB}; {MAX_PPS_PUBLIC} at most with public targets)",
            c.pps
        ))
    })?;
    let (lab, links, mut routes) = match vantage {
        Vantage::Host => {
            let net = HostNet::read()?;
            net.check_source(c.src)?;
            // with -S every probe leaves from it; without, from its route's source
            let routes = c.src.is_none().then(vtnt_linux::RouteSources::new);
            (net.lab, net.links, routes)
        }
        Vantage::Lab => (LabAccess::All, Vec::new(), None),
    };
    let exclude = exclusions(c)?;
    let policy = Policy {
        allow_public: c.allow_public,
        exclude: exclude.clone(),
        lab,
        links,
    };
    let (good, bad) = targets::collect(
        &c.targets,
        c.targets_file.as_deref(),
        &policy,
        c.pps,
        routes.as_mut(),
    )?;
    if good.is_empty() {
        return Ok((None, bad));
    }
    let engine = EngineSpec {
        pps: c.pps,
        burst: (c.pps / 1000).max(1),
        seed: c.seed.unwrap_or_else(default_seed),
        window: c.window,
        src: c.src,
        allow_public: c.allow_public,
        exclude,
    };
    let job = Job {
        spec: JobSpec {
            kind,
            engine,
            targets: Targets::List(good),
            hold: Duration::ZERO,
            every: Duration::ZERO,
        },
        format: c.format(),
        names: c.ptr(),
        output: c.output.clone(),
        some_bad: !bad.is_empty(),
        quiet: c.quiet,
    };
    Ok((Some(job), bad))
}

/// Checks what the flags cannot check one by one (`-m` below `-f`, port 0...) as the
/// engine will, naming the flags the user typed rather than the engine's fields.
fn check_options(kind: &JobKind) -> Result<()> {
    let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    let jobs = match kind {
        JobKind::Tnt(t) => vec![
            vtnt_engine::Measurement::Trace(vtnt_engine::TraceOptions {
                dst: any,
                ..t.trace.clone()
            }),
            vtnt_engine::Measurement::Ping(vtnt_engine::PingOptions {
                dst: any,
                ..t.ping.clone()
            }),
        ],
        k => k.measurement(any).into_iter().collect(),
    };
    for j in jobs {
        if let Err(vtnt_engine::MeasurementError::OutOfRange { option, range }) = j.validate() {
            let ping = matches!(j, vtnt_engine::Measurement::Ping(_));
            return Err(Error::Invalid(format!(
                "{} out of range (allowed: {})",
                flag(option, ping),
                range.replace("first_ttl", "-f")
            )));
        }
    }
    Ok(())
}

/// The flag that sets an engine option of a trace (or of a ping: `ping`).
fn flag(option: &str, ping: bool) -> String {
    let f = match (option, ping) {
        ("attempts", _) => "-q/--attempts",
        ("first_ttl", _) => "-f/--first-ttl",
        ("max_ttl", _) => "-m/--max-ttl",
        ("gaplimit", _) => "-g/--gap-limit",
        ("wait", _) => "-w/--wait",
        ("sport", _) => "-s/--sport",
        ("dport", _) => "-d/--dport",
        ("count", true) => "-c/--count",
        ("interval", true) => "-i/--interval",
        ("ttl", true) => "-m/--ttl",
        ("timeout", true) => "-W/--timeout",
        ("payload" | "probe_size", false) => "--payload",
        ("probe_size", true) => "-s/--size",
        ("icmp_sum", true) => "-C/--icmp-sum",
        ("data", true) => "--pattern/-B/--payload",
        ("tcp_ack", true) => "-A/--tcp-ack",
        ("method", _) => "-P/--method",
        ("squeries", false) => "-N/--squeries",
        ("confidence", false) => "-c/--confidence",
        ("pmtud" | "if_mtu", false) => "-M/--pmtud",
        _ => {
            return format!(
                "the {} option `{option}`",
                if ping { "ping" } else { "trace" }
            )
        }
    };
    f.to_string()
}

/// The warning for a `--pps` that `--window` measurements of `kind` cannot reach while
/// each waits for an answer (a trace's `-w`, a ping's `-i`): unanswered probes hold the
/// rate at `window / gap`.
pub fn rate_warning(kind: &JobKind, pps: u32, window: u32) -> Option<String> {
    let gap = match kind {
        JobKind::Trace(o) => o.wait,
        JobKind::Ping(o) => o.interval,
        JobKind::Tnt(c) => c.trace.wait,
        JobKind::Micro(_) => return None,
    };
    let most = f64::from(window) / gap.as_secs_f64().max(1e-6);
    (f64::from(pps) > most && pps > 1).then(|| {
        format!(
            "--pps {pps} is more than {window} measurements at once can send while each waits {gap:?} for an answer (at most about {most:.0} pps); raise --window"
        )
    })
}

/// The exclusion lists of the options: /etc/vtnt/exclude.conf when it exists and every
/// `--exclude FILE`, as one set.
fn exclusions(c: &Common) -> Result<PrefixSet> {
    exclusion_list(&c.exclude)
}

/// The exclusion lists the configuration names (`probe.exclude`), set once per process.
static CONFIGURED: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();

/// Adds `files` to this host's exclusion lists for the rest of this process (`vtnt`'s
/// configuration: `probe.exclude`); the first call counts.
pub fn configure_exclusions(files: impl IntoIterator<Item = PathBuf>) {
    let _ = CONFIGURED.set(files.into_iter().collect());
}

/// This host's exclusion lists ([`DEFAULT_EXCLUDE`], when it exists, and those of
/// [`configure_exclusions`]) and every file of `extra`, as one set: what a job accepted
/// here (a fleet agent's, too) must not probe.
pub fn exclusion_list(extra: &[PathBuf]) -> Result<PrefixSet> {
    let default = std::path::Path::new(DEFAULT_EXCLUDE);
    let files = default
        .exists()
        .then(|| default.to_path_buf())
        .into_iter()
        .chain(CONFIGURED.get().into_iter().flatten().cloned())
        .chain(extra.iter().cloned());
    let mut prefixes = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f)
            .map_err(|e| Error::io(format!("reading exclusion list {}", f.display()), e))?;
        let set = PrefixSet::parse(&text)
            .map_err(|e| Error::invalid(format!("exclusion list {}: {e}", f.display())))?;
        prefixes.extend(set.iter().copied());
    }
    Ok(prefixes.into_iter().collect())
}

/// A seed no other process on the host is likely to have: the process id and the time.
fn default_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (u64::from(std::process::id()) << 32) ^ nanos
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn job_words_become_the_canonical_spec() {
        let job = parse_words(
            &words("trace -P icmp-paris -q 1 -w 1 --seed 7 198.51.100.1"),
            Vantage::Lab,
        )
        .unwrap();
        assert_eq!(
            vtnt_jobspec::encode(&job.spec),
            "vtnt-job=1 kind=trace trace.method=icmp-paris trace.attempts=1 trace.wait=1s seed=7 targets=198.51.100.1"
        );
        let job = parse_words(&words("ping -c 3 -i 0.1 --seed 1 192.0.2.1"), Vantage::Lab).unwrap();
        assert_eq!(
            vtnt_jobspec::encode(&job.spec),
            "vtnt-job=1 kind=ping ping.count=3 ping.interval=100ms targets=192.0.2.1"
        );
        let job = parse_words(
            &words("tnt -b --no-buddy -p 100 203.0.113.10 203.0.113.11"),
            Vantage::Lab,
        )
        .unwrap();
        let line = vtnt_jobspec::encode(&job.spec);
        assert!(line.starts_with("vtnt-job=1 kind=tnt "), "{line}");
        assert!(
            line.contains(" tnt.brute-force=true tnt.buddy=false "),
            "{line}"
        );
        assert_eq!(vtnt_jobspec::decode(&line).unwrap(), job.spec);
    }

    #[test]
    fn where_results_go_and_refused_targets_are_kept_apart() {
        let job = parse_words(
            &words("ping -O text -o /tmp/x 192.0.2.1 8.8.8.8"),
            Vantage::Lab,
        )
        .unwrap();
        assert_eq!(job.format, Format::Text);
        assert_eq!(job.output, Some(PathBuf::from("/tmp/x")));
        assert!(job.some_bad, "8.8.8.8 needs --allow-public");
        assert_eq!(
            job.spec.target_list(),
            &["192.0.2.1".parse::<IpAddr>().unwrap()]
        );
    }

    #[test]
    fn ptr_is_a_trace_option_of_this_host_only() {
        let parsed = parse_args(&words("trace -O warts -O ptr 192.0.2.1"), &[]).unwrap();
        assert_eq!(parsed.common().format(), Format::Warts);
        assert!(parsed.common().ptr());
        let job = parsed.job(Vantage::Lab).unwrap();
        assert!(job.names);
        assert_eq!(job.format, Format::Warts);
        let plain = parse_args(&words("trace -O ptr 192.0.2.1"), &[]).unwrap();
        assert_eq!(plain.common().format(), Format::Json);
        let refused = |e: Error, want: &str| {
            assert!(matches!(e, Error::Invalid(_)), "{e:?}");
            let e = e.to_string();
            assert!(e.starts_with("-O ptr: ") && e.contains(want), "{e}");
        };
        for w in ["ping -O ptr 192.0.2.1", "tnt -O ptr 192.0.2.1"] {
            let parsed = parse_args(&words(w), &[]).unwrap();
            refused(parsed.job(Vantage::Lab).unwrap_err(), "only `vtnt trace`");
        }
        let e = parse_words(&words("trace -O ptr 192.0.2.1"), Vantage::Lab).unwrap_err();
        refused(e, "a job for a runtime cannot take it");
        for (w, want) in [
            (
                "trace --store /tmp/s 192.0.2.1",
                "--store is not accepted here",
            ),
            (
                "tnt --no-store 192.0.2.1",
                "--no-store is not accepted here",
            ),
        ] {
            let e = parse_words(&words(w), Vantage::Lab)
                .unwrap_err()
                .to_string();
            assert_eq!(e, want);
        }
    }

    #[test]
    fn callers_tell_errors_apart_by_variant() {
        let e = parse_words(&words("ping 8.8.8.8"), Vantage::Lab).unwrap_err();
        assert!(matches!(e, Error::NoTarget), "{e:?}");
        let e = parse_words(&words("trace --store /tmp/s 192.0.2.1"), Vantage::Lab).unwrap_err();
        assert!(
            matches!(&e, Error::NotAccepted { flag } if flag == "--store"),
            "{e:?}"
        );
        let e = parse_words(&words("trace --bogus 192.0.2.1"), Vantage::Lab).unwrap_err();
        assert!(matches!(e, Error::Words(_)), "{e:?}");
        let e = exclusion_list(&[PathBuf::from("/nonexistent/vtnt-exclude")]).unwrap_err();
        assert!(
            matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "reading exclusion list /nonexistent/vtnt-exclude"
        );
    }

    #[test]
    fn max_ttl_zero_is_scampers_default() {
        for w in ["trace -m 0 192.0.2.1", "tnt -m 0 192.0.2.1"] {
            let parsed = parse_args(&words(w), &[]).unwrap();
            let max = match parsed.job(Vantage::Lab).unwrap().spec.kind {
                JobKind::Trace(t) => t.max_ttl,
                JobKind::Tnt(c) => c.trace.max_ttl,
                k => panic!("{w}: {k:?}"),
            };
            assert_eq!(max, 255, "{w}");
        }
        let e = parse_args(&words("trace -m 256 192.0.2.1"), &[]).unwrap_err();
        assert!(e.to_string().contains("is not a TTL"), "{e}");
    }

    #[test]
    fn options_out_of_range_together_name_the_flags() {
        for (w, want) in [
            (
                "trace -f 10 -m 5 192.0.2.1",
                "-m/--max-ttl out of range (allowed: -f..=255)",
            ),
            (
                "trace -d 0 192.0.2.1",
                "-d/--dport out of range (allowed: 1..=65535)",
            ),
            (
                "trace -N 9 192.0.2.1",
                "-N/--squeries out of range (allowed: 1..=255, at most the gap limit (-N, -g))",
            ),
            (
                "trace -c 95 -Q 192.0.2.1",
                "-c/--confidence out of range (allowed: 0, 95 or 99 (-c), and not with all attempts (-Q))",
            ),
            (
                "trace -M -P icmp-paris 192.0.2.1",
                "-M/--pmtud out of range (allowed: udp-paris only, from -f 1 (as scamper's -M), one hop at a time (-N 1))",
            ),
            (
                "trace -s 0 192.0.2.1",
                "-s/--sport out of range (allowed: 1..=65535)",
            ),
            (
                "trace -P tcp --payload 00 192.0.2.1",
                "--payload out of range (allowed: none for tcp)",
            ),
            (
                "ping -C 0 192.0.2.1",
                "-C/--icmp-sum out of range (allowed: 1..=65534, icmp-echo only)",
            ),
            (
                "ping -P udp -C 7 192.0.2.1",
                "-C/--icmp-sum out of range (allowed: 1..=65534, icmp-echo only)",
            ),
            (
                "ping -R -s 60 192.0.2.1",
                "-s/--size out of range (allowed: 32..=1500)",
            ),
            (
                "ping -B 0102 -s 30 192.0.2.1",
                "-s/--size out of range (allowed: 32..=1500)",
            ),
            (
                "ping -P tcp -A 5 192.0.2.1",
                "-A/--tcp-ack out of range (allowed: tcp-ack only, not 0)",
            ),
            (
                "trace -P tcp-ack --payload 00 192.0.2.1",
                "--payload out of range (allowed: none for tcp)",
            ),
        ] {
            let e = parse_words(&words(w), Vantage::Lab)
                .map(|_| ())
                .unwrap_err();
            assert_eq!(e.to_string(), want, "{w}");
        }
    }

    #[test]
    fn bad_job_words_are_errors() {
        for w in [
            "trace -P ICMP-Paris 192.0.2.1",
            "ping -P ICMP 192.0.2.1",
            "tnt -P TCP 192.0.2.1",
        ] {
            assert!(parse_words(&words(w), Vantage::Lab).is_ok(), "{w}");
        }
        let classic = parse_words(&words("trace -P icmp 192.0.2.1"), Vantage::Lab).unwrap_err();
        assert!(
            classic.to_string().contains("classic traceroute"),
            "{classic}"
        );
        for w in [
            "trace -q 0 192.0.2.1",
            "trace -P udp 192.0.2.1",
            "tnt -P icmp 192.0.2.1",
            "dance 192.0.2.1",
            "trace",
            "trace 8.8.8.8",
            "ping -p 0 192.0.2.1",
            "tnt --from /etc/hostname",
            "trace --payload abc 192.0.2.1",
            "ping --pattern 0102 -B 03 192.0.2.1",
            "ping --pattern 000102030405060708090a0b0c0d0e0f10 192.0.2.1",
            "ping -B zz 192.0.2.1",
        ] {
            assert!(parse_words(&words(w), Vantage::Lab).is_err(), "{w}");
        }
        let long = Job {
            spec: JobSpec::new(
                JobKind::Ping(vtnt_engine::PingOptions::new(IpAddr::V4(
                    Ipv4Addr::LOCALHOST,
                ))),
                vec![],
            ),
            format: Format::Json,
            names: false,
            output: None,
            some_bad: false,
            quiet: false,
        };
        let s = Duration::from_secs;
        let err = |j: &Job, h, e| j.clone().with_hold(s(h), s(e)).unwrap_err().to_string();
        assert_eq!(
            err(&long, 3601, 0),
            "--hold: out of range (allowed: 0s..=3600s)"
        );
        assert_eq!(
            err(&long, 5, 10),
            "--every: 10s is longer than the hold (5s)"
        );
        assert_eq!(long.with_hold(s(60), s(1)).unwrap().spec.every, s(1));
    }

    #[test]
    fn refused_options_are_named_by_their_flags() {
        let refused = ["pps", "allow_public", "output", "from"];
        for (w, want) in [
            ("trace -p 100 192.0.2.1", "-p/--pps is not accepted here"),
            (
                "ping --allow-public 8.8.8.8",
                "--allow-public is not accepted here",
            ),
            ("tnt --from x.json", "--from is not accepted here"),
            (
                "ping -o/tmp/x 192.0.2.1",
                "-o/--output is not accepted here",
            ),
        ] {
            let e = parse_args(&words(w), &refused).unwrap_err();
            assert_eq!(e.to_string(), want, "{w}");
        }
        let a = parse_args(&words("trace -q 1 -w 1 192.0.2.1"), &refused).unwrap();
        assert_eq!(a.common().targets, ["192.0.2.1"]);
        assert!(parse_args(&words("trace --bogus 192.0.2.1"), &refused).is_err());
    }

    #[test]
    fn long_numbers_are_cut_in_messages() {
        let n = "9".repeat(300);
        let e = parse_args(&words(&format!("trace -q {n} 192.0.2.1")), &[]).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("99999999999999999999… (300 digits)"), "{e}");
        assert!(e.len() < 300, "{e}");
        assert_eq!(
            elide_long_numbers("port 65535, id 18446744073709551615"),
            "port 65535, id 18446744073709551615"
        );
        assert_eq!(
            elide_long_numbers(&format!("a{}b 1", "1".repeat(21))),
            "a11111111111111111111… (21 digits)b 1"
        );
    }

    #[test]
    fn the_rate_warning_names_the_window() {
        let job = parse_words(
            &words("trace -p 5000 -w 5 --window 10 192.0.2.1"),
            Vantage::Lab,
        )
        .unwrap();
        let e = &job.spec.engine;
        let w = rate_warning(&job.spec.kind, e.pps, e.window).unwrap();
        assert!(w.contains("raise --window"), "{w}");
        let job = parse_words(&words("trace 192.0.2.1"), Vantage::Lab).unwrap();
        let e = &job.spec.engine;
        assert_eq!(rate_warning(&job.spec.kind, e.pps, e.window), None);
    }
}
