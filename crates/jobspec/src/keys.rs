//! The keys of version 1, per options struct: how each field is written ([`Fields`]) and
//! read back (`set_*`), and the value syntax (durations, booleans, optional ports).

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use vtnt_engine::{Duration, Method, PingOptions, ProbeData, TraceOptions};
use vtnt_tnt::TntConfig;

/// `(key without prefix, value)` in canonical order.
pub(crate) type Fields = Vec<(&'static str, String)>;

/// Why a value was refused.
pub(crate) type Why = String;

/// Writes a duration with the largest unit that keeps it exact.
pub(crate) fn dur(d: Duration) -> String {
    // u64 (584,000 years of microseconds): u128's formatting costs the unikernel 1 KiB
    let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    if us.is_multiple_of(1_000_000) {
        format!("{}s", us / 1_000_000)
    } else if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

/// Reads `N`+`s|ms|us`.
pub(crate) fn parse_dur(v: &str) -> Result<Duration, Why> {
    let (num, mult) = if let Some(n) = v.strip_suffix("us") {
        (n, 1)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1000)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1_000_000)
    } else {
        return Err(format!("`{v}` is not a duration (e.g. 1s, 250ms, 40us)"));
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{v}` is not a duration (e.g. 1s, 250ms, 40us)"))?;
    n.checked_mul(mult)
        .map(Duration::from_micros)
        .ok_or_else(|| format!("`{v}` is too long"))
}

/// An integer: read as a u64 once, then narrowed, so that the unikernel carries one
/// integer parser rather than one per type.
pub(crate) fn num<T: TryFrom<u64>>(v: &str, what: &str) -> Result<T, Why> {
    v.parse::<u64>()
        .ok()
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| format!("`{v}` is not {what}"))
}

/// An IPv4 address.
pub(crate) fn addr(v: &str) -> Result<core::net::Ipv4Addr, Why> {
    v.parse()
        .map_err(|_| format!("`{v}` is not an IPv4 address"))
}

pub(crate) fn boolean(v: &str) -> Result<bool, Why> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("`{v}` is not true or false")),
    }
}

pub(crate) fn method(v: &str) -> Result<Method, Why> {
    Method::ALL
        .into_iter()
        .find(|m| m.option_name() == v)
        .ok_or_else(|| format!("`{v}` is not a method ({})", Method::OPTION_NAMES))
}

use vtnt_record::to_hex as hex;

/// Reads hex digits, two per byte (scamper's `-p` and `-B`; `vtnt` takes the same), at
/// most `max` bytes. Empty is no bytes.
pub fn parse_hex(v: &str, max: usize) -> Result<Vec<u8>, Why> {
    match vtnt_record::from_hex(v) {
        Some(b) if b.len() <= max => Ok(b),
        Some(b) => Err(format!("{} bytes is more than {max}", b.len())),
        None => Err(format!(
            "`{v}` is not hex bytes (two digits a byte, 0-9 and a-f)"
        )),
    }
}

fn port(p: Option<u16>) -> String {
    p.map_or_else(String::new, |p| p.to_string())
}

fn parse_port(v: &str) -> Result<Option<u16>, Why> {
    match num::<u16>(v, "a port (1..=65535)")? {
        0 => Err("port 0 is not allowed".into()),
        p => Ok(Some(p)),
    }
}

/// The trace template's fields except `method` (written first, on its own).
pub(crate) fn trace_fields(o: &TraceOptions) -> Fields {
    alloc::vec![
        ("first-ttl", o.first_ttl.to_string()),
        ("max-ttl", o.max_ttl.to_string()),
        ("attempts", o.attempts.to_string()),
        ("wait", dur(o.wait)),
        ("wait-probe", dur(o.wait_probe)),
        ("gap-limit", o.gaplimit.to_string()),
        ("loops", o.loops.to_string()),
        ("sport", port(o.sport)),
        ("dport", port(o.dport)),
        ("probe-size", o.probe_size.to_string()),
        ("tos", o.tos.to_string()),
        ("userid", o.userid.to_string()),
        ("all-attempts", o.all_attempts.to_string()),
        ("ignore-ttl-dst", o.ignore_ttl_dst.to_string()),
        ("last-ditch", o.last_ditch.to_string()),
        ("payload", hex(&o.payload)),
        ("squeries", o.squeries.to_string()),
        ("confidence", o.confidence.to_string()),
        ("pmtud", o.pmtud.to_string()),
    ]
}

/// Sets one trace field; `Ok(false)`: no such key.
pub(crate) fn set_trace(o: &mut TraceOptions, key: &str, v: &str) -> Result<bool, Why> {
    const TTL: &str = "a TTL (1..=255)";
    match key {
        "first-ttl" => o.first_ttl = num(v, TTL)?,
        "max-ttl" => o.max_ttl = num(v, TTL)?,
        "attempts" => o.attempts = num(v, "a count (1..=20)")?,
        "wait" => o.wait = parse_dur(v)?,
        "wait-probe" => o.wait_probe = parse_dur(v)?,
        "gap-limit" => o.gaplimit = num(v, "a count (0..=255; 0: no limit)")?,
        "loops" => o.loops = num(v, "a count (1..=255)")?,
        "sport" => o.sport = parse_port(v)?,
        "dport" => o.dport = parse_port(v)?,
        "probe-size" => o.probe_size = num(v, "a size in bytes")?,
        "tos" => o.tos = num(v, "a byte")?,
        "userid" => o.userid = num(v, "a 32-bit number")?,
        "all-attempts" => o.all_attempts = boolean(v)?,
        "ignore-ttl-dst" => o.ignore_ttl_dst = boolean(v)?,
        "last-ditch" => o.last_ditch = boolean(v)?,
        "pmtud" => o.pmtud = boolean(v)?,
        "payload" => o.payload = parse_hex(v, usize::from(vtnt_engine::MAX_PROBE_SIZE))?,
        "squeries" => o.squeries = num(v, "a count (1..=255)")?,
        "confidence" => o.confidence = num(v, "0, 95 or 99")?,
        _ => return Ok(false),
    }
    Ok(true)
}

/// The ping template's fields except `method`.
pub(crate) fn ping_fields(o: &PingOptions) -> Fields {
    alloc::vec![
        ("count", o.count.to_string()),
        ("interval", dur(o.interval)),
        ("ttl", o.ttl.to_string()),
        ("timeout", dur(o.timeout)),
        ("sport", port(o.sport)),
        ("dport", port(o.dport)),
        ("probe-size", o.probe_size.to_string()),
        ("userid", o.userid.to_string()),
        ("tos", o.tos.to_string()),
        (
            "icmp-sum",
            o.icmp_sum.map_or_else(String::new, |c| c.to_string())
        ),
        ("reply-count", o.reply_count.to_string()),
        ("pattern", data(o, true)),
        ("payload", data(o, false)),
        ("record-route", o.record_route.to_string()),
        (
            "tcp-ack",
            o.tcp_ack.map_or_else(String::new, |a| a.to_string())
        ),
    ]
}

/// A ping's pattern (`pattern`) or payload as hex; empty when it has not that one.
fn data(o: &PingOptions, pattern: bool) -> String {
    match &o.data {
        Some(ProbeData::Pattern(b)) if pattern => hex(b),
        Some(ProbeData::Payload(b)) if !pattern => hex(b),
        _ => String::new(),
    }
}

/// Sets a ping's pattern or payload, refusing both.
fn set_data(o: &mut PingOptions, d: ProbeData) -> Result<(), Why> {
    if o.data.is_some() {
        return Err("a ping carries a pattern or a payload, not both".into());
    }
    o.data = (!d.bytes().is_empty()).then_some(d);
    Ok(())
}

/// Sets one ping field; `Ok(false)`: no such key.
pub(crate) fn set_ping(o: &mut PingOptions, key: &str, v: &str) -> Result<bool, Why> {
    match key {
        "count" => o.count = num(v, "a count (1..=65535)")?,
        "interval" => o.interval = parse_dur(v)?,
        "ttl" => o.ttl = num(v, "a TTL (1..=255)")?,
        "timeout" => o.timeout = parse_dur(v)?,
        "sport" => o.sport = parse_port(v)?,
        "dport" => o.dport = parse_port(v)?,
        "probe-size" => o.probe_size = num(v, "a size in bytes")?,
        "userid" => o.userid = num(v, "a 32-bit number")?,
        "tos" => o.tos = num(v, "a byte")?,
        "icmp-sum" => o.icmp_sum = Some(num(v, "a checksum (1..=65534)")?),
        "reply-count" => o.reply_count = num(v, "a count (0..=65535)")?,
        "pattern" => set_data(o, ProbeData::Pattern(parse_hex(v, 16)?))?,
        "payload" => set_data(o, ProbeData::Payload(parse_hex(v, 1000)?))?,
        "record-route" => o.record_route = boolean(v)?,
        "tcp-ack" => o.tcp_ack = Some(num(v, "a 32-bit number")?),
        _ => return Ok(false),
    }
    Ok(true)
}

/// TNT's own fields (`tnt.*`).
pub(crate) fn tnt_fields(c: &TntConfig) -> Fields {
    let th = &c.classify.thresholds;
    alloc::vec![
        ("frpla", th.frpla.to_string()),
        ("rtla", th.rtla.to_string()),
        ("uturn", th.uturn.to_string()),
        ("brute-force", c.classify.brute_force.to_string()),
        ("frpla-relative", c.classify.frpla_relative.to_string()),
        ("uturn-shape", c.classify.uturn_shape.to_string()),
        ("egress-label", c.classify.egress_label.to_string()),
        ("blind-spots", c.classify.blind_spots.to_string()),
        ("reveal", c.reveal.to_string()),
        ("buddy", c.buddy.to_string()),
        ("max-brpr-steps", c.max_brpr_steps.to_string()),
        ("walk-back", c.walk_back.to_string()),
        ("walk-forward", c.walk_forward.to_string()),
        ("ingress-retries", c.ingress_retries.to_string()),
    ]
}

/// Sets one TNT field; `Ok(false)`: no such key.
pub(crate) fn set_tnt(c: &mut TntConfig, key: &str, v: &str) -> Result<bool, Why> {
    const TH: &str = "a threshold (1..=64)";
    match key {
        "frpla" => c.classify.thresholds.frpla = num(v, TH)?,
        "rtla" => c.classify.thresholds.rtla = num(v, TH)?,
        "uturn" => c.classify.thresholds.uturn = num(v, TH)?,
        "brute-force" => c.classify.brute_force = boolean(v)?,
        "frpla-relative" => c.classify.frpla_relative = boolean(v)?,
        "uturn-shape" => c.classify.uturn_shape = boolean(v)?,
        "egress-label" => c.classify.egress_label = boolean(v)?,
        "blind-spots" => c.classify.blind_spots = boolean(v)?,
        "reveal" => c.reveal = boolean(v)?,
        "buddy" => c.buddy = boolean(v)?,
        "max-brpr-steps" => c.max_brpr_steps = num(v, "a step count (1..=64)")?,
        "walk-back" => c.walk_back = num(v, "a count (0..=8)")?,
        "walk-forward" => c.walk_forward = num(v, "a count (0..=8)")?,
        "ingress-retries" => c.ingress_retries = num(v, "a count (0..=8)")?,
        _ => return Ok(false),
    }
    Ok(true)
}

/// A micro job's fields (`micro.*`).
pub(crate) fn micro_fields(o: &vtnt_micro::Options) -> Fields {
    alloc::vec![
        ("fib", o.fib.to_string()),
        ("calls", o.calls.to_string()),
        ("syscalls", o.syscalls.to_string()),
    ]
}

/// Sets one micro field; `Ok(false)`: no such key.
pub(crate) fn set_micro(o: &mut vtnt_micro::Options, key: &str, v: &str) -> Result<bool, Why> {
    const COUNT: &str = "a count";
    match key {
        "fib" => o.fib = num(v, "a Fibonacci index")?,
        "calls" => o.calls = num(v, COUNT)?,
        "syscalls" => o.syscalls = num(v, COUNT)?,
        _ => return Ok(false),
    }
    Ok(true)
}

/// The spec key of an engine `MeasurementError::OutOfRange` option name.
pub(crate) fn engine_option_key(option: &str) -> &'static str {
    match option {
        "attempts" => "attempts",
        "first_ttl" => "first-ttl",
        "max_ttl" => "max-ttl",
        "gaplimit" => "gap-limit",
        "wait" => "wait",
        "wait_probe" => "wait-probe",
        "sport" => "sport",
        "dport" => "dport",
        "probe_size" => "probe-size",
        "count" => "count",
        "interval" => "interval",
        "ttl" => "ttl",
        "timeout" => "timeout",
        "payload" => "payload",
        "icmp_sum" => "icmp-sum",
        "tcp_ack" => "tcp-ack",
        "method" => "method",
        "data" => "pattern|payload",
        _ => "?",
    }
}
