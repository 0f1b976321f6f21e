//! The canonical wire form of a vTNT job: one line of `key=value` words, versioned, that
//! the CLI (or any host tool) writes and the unikernel reads, so the kernel needs no
//! option parser of its own. Users never type it: they give `vtnt`'s own options, the CLI
//! parses them with clap into a [`JobSpec`] and [`encode`]s it.
//!
//! ```text
//! vtnt-job=1 kind=trace trace.method=icmp-paris trace.attempts=1 trace.wait=1s seed=7 targets=198.51.100.1,203.0.113.9
//! ```
//!
//! Rules (version 1):
//! - the first word is `vtnt-job=1`; words are separated by ASCII whitespace, values
//!   contain none;
//! - `kind` is `trace`, `ping`, `tnt` or `micro`; options of the trace template are `trace.*`,
//!   of the ping template `ping.*` (a `tnt` job has both: its initial/revelation traces
//!   and its fingerprint pings), TNT's own are `tnt.*`, the engine's are bare (`pps`,
//!   `burst`, `seed`, `window`, `src`), the probing policy's are `allow-public` and
//!   `exclude` (a comma list of prefixes never to probe), and `targets` is a comma list or
//!   `@module` (the list comes separately, one address per line: see
//!   [`parse_target_list`] and [`JobSpec::check_targets`]);
//! - the job is checked against the probing policy ([`vtnt_engine::Policy`]) where it is
//!   decoded: inline targets outside it, a rate above the policy's ceilings and (when the
//!   prober's address is known, [`EngineSpec::config`]) a source that is not the prober's
//!   own are errors, so a guest enforces what the host's CLI does;
//! - `hold` (default `0s`, at most [`MAX_HOLD`]) is how long the runner stays alive after
//!   the job has printed its results (the density job's "trace, then a 10 s delay");
//! - `every` (default `0s`: once) runs the job again every `every` while it holds, each
//!   round a whole cycle of output: a vantage point that stays alive and keeps working
//!   (at least [`MIN_EVERY`], at most the hold);
//! - an absent key has its default for the kind (`vtnt trace`, `vtnt ping` and TNT's
//!   defaults; a `method` also resets `probe-size` to the method's default). [`encode`]
//!   writes exactly the keys that differ from those defaults, in a fixed order, so one
//!   job has one spelling; [`decode`] accepts keys in any order;
//! - durations are integers with a unit: `1s`, `250ms`, `40us`;
//!   booleans are `true`/`false`;
//! - unknown keys, repeated keys, malformed and out-of-range values are errors that name
//!   the key ([`Error`]).
#![no_std]
extern crate alloc;

mod codec;
mod keys;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr};

use vtnt_engine::policy::PrefixSet;
use vtnt_engine::{Config, LabAccess, PingOptions, Policy, Refusal, TraceOptions};
use vtnt_tnt::TntConfig;

pub use codec::{decode, encode, encode_split, parse_target_list};
use keys::dur as codec_dur;
pub use keys::parse_hex;
/// Seed 001's micro-benchmarks, the loops a `micro` job runs.
pub use vtnt_micro as micro;

/// The version this crate writes and reads.
pub const VERSION: u32 = 1;
/// The first word of every spec.
pub const MAGIC: &str = "vtnt-job";
/// The longest `hold=` accepted.
pub const MAX_HOLD: vtnt_engine::Duration = vtnt_engine::Duration::from_secs(3600);
/// The shortest non-zero `every=`: a held job repeats at most once a second.
pub const MIN_EVERY: vtnt_engine::Duration = vtnt_engine::Duration::from_secs(1);

/// A ping template's probe size that stands for scamper's default for each target's
/// family and options (no IP packet is 0 bytes long).
pub const DEFAULT_SIZE: u16 = 0;

/// What the job does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobKind {
    /// One Paris traceroute per target (the template's `dst` is ignored).
    Trace(TraceOptions),
    /// One ping per target. A template's `probe_size` of [`DEFAULT_SIZE`] stands for
    /// scamper's default for each target (20 bytes more over IPv6); any other is sent
    /// as given, whatever the family (scamper's `-s`).
    Ping(PingOptions),
    /// A TNT campaign over all targets.
    Tnt(TntConfig),
    /// Seed 001's micro-benchmarks ([`micro::run`]): no probe, no target.
    Micro(micro::Options),
}

/// The most bytes of a contact string in probes ([`JobKind::carry_contact`]): what a
/// default ping's payload holds beside Paris ICMP's two checksum bytes.
pub const MAX_CONTACT: usize = 54;

impl JobKind {
    /// Puts `contact` (who probes and how to reach them) in the payload of the job's
    /// probes where the method allows (the fleet's etiquette, docs/fleet.md): trace and
    /// ping templates, TNT's too, of a UDP or ICMP method that carry no payload of their
    /// own and have room for it. A trace's probes grow to hold it, as with scamper's
    /// `-p`; a ping's keep their size. TCP probes carry none. How many templates took it.
    pub fn carry_contact(&mut self, contact: &[u8]) -> usize {
        if contact.is_empty() || contact.len() > MAX_CONTACT {
            return 0;
        }
        let trace = |t: &mut TraceOptions| {
            let takes = !t.method.is_tcp() && t.payload.is_empty();
            if takes {
                *t = t.clone().with_payload(contact.to_vec());
            }
            usize::from(takes)
        };
        let ping = |p: &mut PingOptions| {
            let size = match p.probe_size {
                DEFAULT_SIZE => p.default_size(),
                s => s,
            };
            let headers = 28 + if p.record_route { 40 } else { 0 };
            let lead = if p.icmp_sum.is_some() { 2 } else { 0 };
            let room = usize::from(size).saturating_sub(headers + lead);
            let takes = !p.method.is_tcp() && p.data.is_none() && contact.len() <= room;
            if takes {
                p.data = Some(vtnt_engine::ProbeData::Payload(contact.to_vec()));
            }
            usize::from(takes)
        };
        match self {
            JobKind::Trace(t) => trace(t),
            JobKind::Ping(p) => ping(p),
            JobKind::Tnt(c) => trace(&mut c.trace) + ping(&mut c.ping),
            JobKind::Micro(_) => 0,
        }
    }

    /// The `kind=` value.
    pub fn name(&self) -> &'static str {
        match self {
            JobKind::Trace(_) => "trace",
            JobKind::Ping(_) => "ping",
            JobKind::Tnt(_) => "tnt",
            JobKind::Micro(_) => "micro",
        }
    }

    /// The engine measurement of a trace or ping job towards `dst` (the template with its
    /// destination set); `None` for TNT, which runs as a campaign over all targets, and
    /// for a micro job, which probes nothing. A ping template of [`DEFAULT_SIZE`] gets
    /// the default for `dst`'s family (scamper's: 20 bytes more over IPv6), as does a
    /// trace template of its default size (60 bytes over IPv6, or 48 and the payload).
    pub fn measurement(&self, dst: IpAddr) -> Option<vtnt_engine::Measurement> {
        match self {
            JobKind::Trace(t) => {
                let mut o = TraceOptions { dst, ..t.clone() };
                // a template's default size is IPv4's (scamper's trace has no size option)
                if vtnt_engine::PROBES_IPV6 && dst.is_ipv6() && t.probe_size == t.default_size() {
                    o.probe_size = o.default_size();
                }
                Some(vtnt_engine::Measurement::Trace(o))
            }
            JobKind::Ping(p) => {
                let mut o = PingOptions { dst, ..p.clone() };
                if p.probe_size == DEFAULT_SIZE {
                    o.probe_size = o.default_size();
                }
                Some(vtnt_engine::Measurement::Ping(o))
            }
            JobKind::Tnt(_) | JobKind::Micro(_) => None,
        }
    }
}

/// Engine-wide settings (`vtnt`'s `-p`, `--seed`, `--window`, `-S`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineSpec {
    /// Probes per second for the whole job (20).
    pub pps: u32,
    /// Token-bucket depth (1).
    pub burst: u32,
    /// Seed of probe identifiers (1, as `vtnt --seed`).
    pub seed: u64,
    /// Measurements running at once (1000).
    pub window: u32,
    /// Source address; `None`: the prober's own interface address. Anything but that
    /// address is refused ([`EngineSpec::config`]).
    pub src: Option<Ipv4Addr>,
    /// Public targets may be probed (`--allow-public`; false).
    pub allow_public: bool,
    /// Prefixes never to probe (the exclusion list; empty).
    pub exclude: PrefixSet,
}

impl Default for EngineSpec {
    fn default() -> Self {
        EngineSpec {
            pps: 20,
            burst: 1,
            seed: 1,
            window: 1000,
            src: None,
            allow_public: false,
            exclude: PrefixSet::new(),
        }
    }
}

impl EngineSpec {
    /// The engine configuration of a prober whose address is `iface`: `src` may only
    /// repeat that address (vTNT never spoofs).
    pub fn config(&self, iface: Ipv4Addr) -> Result<Config, Error> {
        if let Some(src) = self.src {
            vtnt_engine::policy::check_source(src, &[iface]).map_err(|r| Error {
                key: "src".into(),
                kind: ErrorKind::Refused(r),
            })?;
        }
        Ok(self.unchecked_config(iface))
    }

    /// The configuration without the source check (decoding validates ranges before the
    /// prober's address is known).
    pub(crate) fn unchecked_config(&self, iface: Ipv4Addr) -> Config {
        let mut c = Config::new(self.src.unwrap_or(iface));
        c.pps = self.pps;
        c.burst = self.burst;
        c.seed = self.seed;
        c.max_active = self.window as usize;
        c.policy = self.policy();
        c
    }

    /// The probing policy of the job. A guest decoding a job sits on the lab's own network
    /// (every runtime attaches to the lab), so every lab range is reachable; the prober
    /// adds the prefixes of its own links once it knows them ([`Policy::links`]).
    pub fn policy(&self) -> Policy {
        Policy {
            allow_public: self.allow_public,
            exclude: self.exclude.clone(),
            lab: LabAccess::All,
            links: Vec::new(),
        }
    }
}

/// Where the targets are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Targets {
    /// In the spec (`targets=a,b,c`).
    List(Vec<IpAddr>),
    /// In a separate list, one per line (`targets=@module`: the unikernel's PVH module).
    Module,
}

/// One job in its canonical form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    pub kind: JobKind,
    pub engine: EngineSpec,
    pub targets: Targets,
    /// How long to stay alive after the results are out (`hold=`, 0..=[`MAX_HOLD`]).
    pub hold: vtnt_engine::Duration,
    /// While holding, run the job again this often (`every=`; zero: once).
    pub every: vtnt_engine::Duration,
}

impl JobSpec {
    /// A job of `kind` over `targets` with default engine settings.
    pub fn new(kind: JobKind, targets: Vec<IpAddr>) -> JobSpec {
        JobSpec {
            kind,
            engine: EngineSpec::default(),
            targets: Targets::List(targets),
            hold: vtnt_engine::Duration::ZERO,
            every: vtnt_engine::Duration::ZERO,
        }
    }

    /// What is wrong with `hold` and `every`, as the key at fault and why (the codec's
    /// and the CLI's check).
    pub fn hold_error(&self) -> Option<(&'static str, String)> {
        let dur = codec_dur;
        if self.hold > MAX_HOLD {
            return Some((
                "hold",
                alloc::format!("out of range (allowed: 0s..={})", dur(MAX_HOLD)),
            ));
        }
        if !self.every.is_zero() && !(MIN_EVERY..=MAX_HOLD).contains(&self.every) {
            return Some((
                "every",
                alloc::format!(
                    "out of range (allowed: 0s, or {}..={})",
                    dur(MIN_EVERY),
                    dur(MAX_HOLD)
                ),
            ));
        }
        (self.every > self.hold).then(|| {
            (
                "every",
                alloc::format!(
                    "{} is longer than the hold ({})",
                    dur(self.every),
                    dur(self.hold)
                ),
            )
        })
    }

    /// When the rounds after the first start, as offsets from the first's start: each
    /// multiple of `every` that comes before the hold ends (the hold counts from the end
    /// of the first round, which took `first_took`).
    pub fn repeats(
        &self,
        first_took: vtnt_engine::Duration,
    ) -> impl Iterator<Item = vtnt_engine::Duration> {
        let end = first_took.saturating_add(self.hold);
        let every = self.every;
        (1u32..).map_while(move |k| {
            let at = every.checked_mul(k)?;
            (!every.is_zero() && at < end).then_some(at)
        })
    }

    /// Checks targets (a boot module's list, or any other) against the job's policy; the
    /// error names the first refused target.
    pub fn check_targets(&self, targets: &[IpAddr]) -> Result<(), Error> {
        let policy = self.engine.policy();
        for t in targets {
            policy
                .check_target(*t, self.engine.pps)
                .map_err(|r| Error {
                    key: "targets".into(),
                    kind: ErrorKind::Refused(r),
                })?;
        }
        Ok(())
    }

    /// The inline targets (empty for [`Targets::Module`]).
    pub fn target_list(&self) -> &[IpAddr] {
        match &self.targets {
            Targets::List(v) => v,
            Targets::Module => &[],
        }
    }
}

/// What is wrong with a spec, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The key concerned (`""` when the spec as a whole is wrong).
    pub key: String,
    pub kind: ErrorKind,
}

/// The ways a spec can be wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The spec does not start with `vtnt-job=N`.
    NoVersion,
    /// A version this decoder does not know.
    UnsupportedVersion(String),
    /// A word without `=`.
    NotKeyValue,
    /// A key this version does not define (or not for this kind).
    UnknownKey,
    /// The key appears twice.
    Repeated,
    /// A required key is missing (`kind`, `targets`).
    Missing,
    /// The value is malformed or out of range; says why.
    BadValue(String),
    /// A line of a target list is not an address (1-based line number).
    BadTarget { line: usize, text: String },
    /// The probing policy refuses the value (a target, the source address).
    Refused(Refusal),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::NoVersion => write!(f, "job spec must start with `{MAGIC}={VERSION}`"),
            ErrorKind::UnsupportedVersion(v) => {
                write!(
                    f,
                    "job spec version `{v}` is not supported (this build reads {VERSION})"
                )
            }
            ErrorKind::NotKeyValue => write!(f, "job spec word `{}` is not key=value", self.key),
            ErrorKind::UnknownKey => write!(f, "job spec: unknown key `{}`", self.key),
            ErrorKind::Repeated => write!(f, "job spec: key `{}` given twice", self.key),
            ErrorKind::Missing => write!(f, "job spec: key `{}` is missing", self.key),
            ErrorKind::BadValue(why) => write!(f, "job spec: key `{}`: {why}", self.key),
            ErrorKind::Refused(r) => write!(f, "job spec: key `{}`: {r}", self.key),
            ErrorKind::BadTarget { line, text } => {
                write!(f, "target list line {line}: `{text}` is not an IP address")
            }
        }
    }
}

impl core::error::Error for Error {}

#[cfg(test)]
mod tests;
