//! [`encode`] and [`decode`]: a [`JobSpec`] to its one canonical line and back.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr};

use vtnt_engine::{Duration, MeasurementError, PingOptions, TraceOptions};
use vtnt_tnt::TntConfig;

use crate::keys::{self, Fields, Why};
use crate::{EngineSpec, Error, ErrorKind, JobKind, JobSpec, Targets, MAGIC, VERSION};

const UNSPECIFIED: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

fn default_trace() -> TraceOptions {
    TraceOptions::new(UNSPECIFIED)
}

fn default_ping() -> PingOptions {
    PingOptions {
        probe_size: crate::DEFAULT_SIZE,
        ..PingOptions::new(UNSPECIFIED)
    }
}

/// Appends ` prefix.key=value` for every field of `now` that differs from `base`.
fn push_diff(out: &mut String, prefix: &str, now: Fields, base: Fields) {
    for ((k, v), (_, b)) in now.into_iter().zip(base) {
        if v != b {
            out.push_str(&format!(" {prefix}{k}={v}"));
        }
    }
}

fn push_trace(out: &mut String, o: &TraceOptions, base: TraceOptions) {
    let base = if o.method != base.method {
        out.push_str(&format!(" trace.method={}", o.method.option_name()));
        base.with_method(o.method)
    } else {
        base
    };
    push_diff(
        out,
        "trace.",
        keys::trace_fields(o),
        keys::trace_fields(&base),
    );
}

fn push_ping(out: &mut String, o: &PingOptions, base: PingOptions) {
    let base = if o.method != base.method {
        out.push_str(&format!(" ping.method={}", o.method.option_name()));
        // (a ping job's default size stays [`crate::DEFAULT_SIZE`] whatever the method)
        let size = base.probe_size;
        PingOptions {
            probe_size: size,
            ..base.with_method(o.method)
        }
    } else {
        base
    };
    push_diff(out, "ping.", keys::ping_fields(o), keys::ping_fields(&base));
}

fn engine_fields(e: &EngineSpec) -> Fields {
    alloc::vec![
        ("pps", e.pps.to_string()),
        ("burst", e.burst.to_string()),
        ("seed", e.seed.to_string()),
        ("window", e.window.to_string()),
        ("src", e.src.map_or_else(String::new, |a| a.to_string())),
        ("allow-public", e.allow_public.to_string()),
        ("exclude", {
            let v: Vec<String> = e.exclude.iter().map(|p| p.to_string()).collect();
            v.join(",")
        }),
    ]
}

/// The canonical line of `spec`: `vtnt-job=1`, `kind`, the keys that differ from the
/// kind's defaults in a fixed order, `targets` last (none for a micro job, which has no
/// target). Templates' `dst` is not written.
pub fn encode(spec: &JobSpec) -> String {
    let mut s = format!("{MAGIC}={VERSION} kind={}", spec.kind.name());
    match &spec.kind {
        JobKind::Trace(t) => push_trace(&mut s, t, default_trace()),
        JobKind::Ping(p) => push_ping(&mut s, p, default_ping()),
        JobKind::Tnt(c) => {
            let d = TntConfig::default();
            push_trace(&mut s, &c.trace, d.trace.clone());
            push_ping(&mut s, &c.ping, d.ping.clone());
            push_diff(&mut s, "tnt.", keys::tnt_fields(c), keys::tnt_fields(&d));
        }
        JobKind::Micro(m) => push_diff(
            &mut s,
            "micro.",
            keys::micro_fields(m),
            keys::micro_fields(&vtnt_micro::Options::default()),
        ),
    }
    push_diff(
        &mut s,
        "",
        engine_fields(&spec.engine),
        engine_fields(&EngineSpec::default()),
    );
    if spec.hold != Duration::ZERO {
        s.push_str(&format!(" hold={}", keys::dur(spec.hold)));
    }
    if spec.every != Duration::ZERO {
        s.push_str(&format!(" every={}", keys::dur(spec.every)));
    }
    if matches!(spec.kind, JobKind::Micro(_)) {
        return s;
    }
    s.push_str(" targets=");
    match &spec.targets {
        Targets::Module => s.push_str("@module"),
        Targets::List(v) => {
            for (i, t) in v.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(&t.to_string());
            }
        }
    }
    s
}

/// [`encode`], but with more than `max_inline` targets the line says `targets=@module`
/// and the list comes back separately (one address per line) for a boot module.
pub fn encode_split(spec: &JobSpec, max_inline: usize) -> (String, Option<String>) {
    match &spec.targets {
        Targets::List(v) if v.len() > max_inline => {
            let mut list = String::new();
            for t in v {
                list.push_str(&t.to_string());
                list.push('\n');
            }
            let line = encode(&JobSpec {
                targets: Targets::Module,
                ..spec.clone()
            });
            (line, Some(list))
        }
        _ => (encode(spec), None),
    }
}

/// Parses a target list: one address per line; blank lines and `#` comments skipped.
pub fn parse_target_list(text: &str) -> Result<Vec<IpAddr>, Error> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.split('#').next().unwrap_or("").trim();
        if t.is_empty() {
            continue;
        }
        let addr = t.parse().map_err(|_| Error {
            key: "targets".into(),
            kind: ErrorKind::BadTarget {
                line: i + 1,
                text: t.to_string(),
            },
        })?;
        out.push(addr);
    }
    Ok(out)
}

fn err(key: &str, kind: ErrorKind) -> Error {
    Error {
        key: key.to_string(),
        kind,
    }
}

fn bad(key: &str, why: impl Into<String>) -> Error {
    err(key, ErrorKind::BadValue(why.into()))
}

fn job_error(prefix: &str, e: MeasurementError) -> Error {
    match e {
        MeasurementError::OutOfRange { option, range } => bad(
            &format!("{prefix}{}", keys::engine_option_key(option)),
            format!("out of range (allowed: {range})"),
        ),
        other => bad(prefix.trim_end_matches('.'), other.to_string()),
    }
}

/// Reads a spec line (see the crate docs for the rules).
pub fn decode(line: &str) -> Result<JobSpec, Error> {
    let mut words = line.split_ascii_whitespace();
    let first = words.next().ok_or_else(|| err("", ErrorKind::NoVersion))?;
    let version = first
        .strip_prefix(MAGIC)
        .and_then(|r| r.strip_prefix('='))
        .ok_or_else(|| err("", ErrorKind::NoVersion))?;
    if version != "1" {
        return Err(err(
            MAGIC,
            ErrorKind::UnsupportedVersion(version.to_string()),
        ));
    }
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for w in words {
        let (k, v) = w
            .split_once('=')
            .ok_or_else(|| err(w, ErrorKind::NotKeyValue))?;
        if pairs.iter().any(|(x, _)| *x == k) {
            return Err(err(k, ErrorKind::Repeated));
        }
        pairs.push((k, v));
    }
    let get = |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|&(_, v)| v);
    let kind_name = get("kind").ok_or_else(|| err("kind", ErrorKind::Missing))?;
    let mut micro = None;
    let (mut trace, mut ping, tnt) = match kind_name {
        "trace" => (Some(default_trace()), None, None),
        "ping" => (None, Some(default_ping()), None),
        "tnt" => {
            let d = TntConfig::default();
            (Some(d.trace.clone()), Some(d.ping.clone()), Some(d))
        }
        "micro" => {
            micro = Some(vtnt_micro::Options::default());
            (None, None, None)
        }
        other => {
            return Err(bad(
                "kind",
                format!("`{other}` is not a job kind (trace, ping, tnt, micro)"),
            ))
        }
    };
    // A method first: it resets the probe size, which an explicit key then overrides.
    if let (Some(t), Some(v)) = (trace.as_mut(), get("trace.method")) {
        t.set_method(keys::method(v).map_err(|w| bad("trace.method", w))?);
    }
    if let (Some(p), Some(v)) = (ping.as_mut(), get("ping.method")) {
        p.set_method(keys::method(v).map_err(|w| bad("ping.method", w))?);
        if tnt.is_none() {
            // a ping job's size stays each target's default unless given
            p.probe_size = crate::DEFAULT_SIZE;
        }
    }
    let mut st = Parts {
        trace,
        ping,
        tnt,
        micro,
        engine: EngineSpec::default(),
        targets: None,
        hold: Duration::ZERO,
        every: Duration::ZERO,
    };
    for &(k, v) in &pairs {
        if !st.set(k, v).map_err(|w| bad(k, w))? {
            return Err(err(k, ErrorKind::UnknownKey));
        }
    }
    let Parts {
        trace,
        mut ping,
        tnt,
        micro,
        engine,
        targets,
        hold,
        every,
    } = st;
    let targets = match (targets, &micro) {
        (Some(t), _) => t,
        (None, Some(_)) => Targets::List(Vec::new()),
        (None, None) => return Err(err("targets", ErrorKind::Missing)),
    };
    if let Some(t) = &trace {
        t.validate().map_err(|e| job_error("trace.", e))?;
    }
    if let Some(p) = &mut ping {
        // a ping job's default size is checked as the default for IPv4 targets
        let given = p.probe_size;
        if tnt.is_none() && given == crate::DEFAULT_SIZE {
            p.probe_size = p.default_size();
        }
        let checked = p.validate();
        p.probe_size = given;
        checked.map_err(|e| job_error("ping.", e))?;
    }
    engine
        .unchecked_config(Ipv4Addr::UNSPECIFIED)
        .validate()
        .map_err(|e| match e {
            vtnt_engine::ConfigError::OutOfRange { option, range } => {
                let key = if option == "max_active" {
                    "window"
                } else {
                    option
                };
                bad(key, format!("out of range (allowed: {range})"))
            }
        })?;
    let kind = match (kind_name, trace, ping, tnt, micro) {
        (_, _, _, _, Some(m)) => {
            if let Some((field, range)) = m.out_of_range() {
                return Err(bad(
                    &format!("micro.{field}"),
                    format!("out of range (allowed: {range})"),
                ));
            }
            JobKind::Micro(m)
        }
        ("trace", Some(t), _, _, _) => JobKind::Trace(t),
        ("ping", _, Some(p), _, _) => JobKind::Ping(p),
        (_, Some(t), Some(p), Some(mut c), _) => {
            c.trace = t;
            c.ping = p;
            c.validate().map_err(|e| {
                let key = match e.option {
                    "ping-count" => "ping.count".to_string(),
                    o => format!("tnt.{o}"),
                };
                bad(&key, format!("out of range (allowed: {})", e.range))
            })?;
            JobKind::Tnt(c)
        }
        _ => unreachable!("the kind fixed which templates exist"),
    };
    let spec = JobSpec {
        kind,
        engine,
        targets,
        hold,
        every,
    };
    if let Some((k, why)) = spec.hold_error() {
        return Err(bad(k, why));
    }
    spec.check_targets(spec.target_list())?;
    Ok(spec)
}

fn parse_targets(v: &str) -> Result<Targets, Why> {
    if v == "@module" {
        return Ok(Targets::Module);
    }
    if v.is_empty() {
        return Err("no target given".into());
    }
    v.split(',')
        .map(|t| t.parse().map_err(|_| format!("`{t}` is not an IP address")))
        .collect::<Result<Vec<IpAddr>, Why>>()
        .map(Targets::List)
}

/// What [`decode`] assembles, key by key.
struct Parts {
    trace: Option<TraceOptions>,
    ping: Option<PingOptions>,
    tnt: Option<TntConfig>,
    micro: Option<vtnt_micro::Options>,
    engine: EngineSpec,
    targets: Option<Targets>,
    hold: Duration,
    every: Duration,
}

impl Parts {
    /// Applies one `key=value`; `Ok(false)`: no such key for this kind. One error path
    /// for every key (the unikernel's image pays for each). Not inlined into `decode`,
    /// its only caller: inlined, the image was 900 bytes larger.
    #[inline(never)]
    fn set(&mut self, k: &str, v: &str) -> Result<bool, Why> {
        let e = &mut self.engine;
        match k {
            // applied first; a template the kind lacks makes the key unknown
            "kind" => {}
            "trace.method" => return Ok(self.trace.is_some()),
            "ping.method" => return Ok(self.ping.is_some()),
            "pps" => e.pps = keys::num(v, "a rate (1..=500000)")?,
            "burst" => e.burst = keys::num(v, "a count (1..=100000)")?,
            "seed" => e.seed = keys::num(v, "a 64-bit number")?,
            "window" => e.window = keys::num(v, "a count (1..=32768)")?,
            "src" => e.src = Some(keys::addr(v)?),
            "allow-public" => e.allow_public = keys::boolean(v)?,
            "exclude" => {
                for p in v.split(',') {
                    e.exclude.insert(p.parse().map_err(|x| format!("{x}"))?);
                }
            }
            // a micro job probes nothing: `targets` is not one of its keys
            "targets" if self.micro.is_none() => self.targets = Some(parse_targets(v)?),
            "hold" => self.hold = keys::parse_dur(v)?,
            "every" => self.every = keys::parse_dur(v)?,
            _ => {
                return if let (Some(rest), Some(t)) = (k.strip_prefix("trace."), &mut self.trace) {
                    keys::set_trace(t, rest, v)
                } else if let (Some(rest), Some(p)) = (k.strip_prefix("ping."), &mut self.ping) {
                    keys::set_ping(p, rest, v)
                } else if let (Some(rest), Some(c)) = (k.strip_prefix("tnt."), &mut self.tnt) {
                    keys::set_tnt(c, rest, v)
                } else if let (Some(rest), Some(m)) = (k.strip_prefix("micro."), &mut self.micro) {
                    keys::set_micro(m, rest, v)
                } else {
                    Ok(false)
                };
            }
        }
        Ok(true)
    }
}
