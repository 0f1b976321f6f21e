//! The scamper JSON lines themselves, as strings: one object per call, byte for byte what
//! `sc_warts2json` (scamper 20211212) prints for the same measurement, including its
//! spacing quirks (`", "` between most fields, none inside `icmpext`,
//! `"start":{"sec":..,"usec":..}` without a space in pings) and its misspelt
//! `"icmp_nhmtu:"` key.
//!
//! `no_std + alloc`: the unikernel prints its results with exactly this code; the std
//! [`crate::JsonWriter`] wraps it around an `io::Write`. Extra fields (TNT annotations)
//! are appended at the end of a trace, ping or hop object through [`Annotate`];
//! scamper-JSON readers ignore fields they do not know.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use vtnt_record::{Hop, Ping, PingReply, Record, Trace};

use crate::json_fmt::{
    ftime, hop_icmp, icmp_ptb, icmp_quotes, loss_str, ordered_replies, ping_flags, ping_stats,
    quoted_or_default, rtt_ms, visible_hops, PING_FLAG_NAMES,
};
use crate::Cycle;

/// Supplies extra fields for the objects [`JsonWriter`] prints. Fields are appended after
/// scamper's own, in the map's order; a key that repeats one of scamper's is the caller's
/// mistake (JSON readers would see it twice).
/// Extra fields of an object: each key with its value as compact JSON text (the
/// unikernel prints them without building a `serde_json::Value`, which its image has no
/// room for).
pub type Extra = Vec<(&'static str, String)>;

pub trait Annotate {
    /// Extra fields for a trace or ping object.
    fn record_extra(&self, _record: &Record) -> Option<Extra> {
        None
    }
    /// Extra fields for the hop `trace.hops[index]`.
    fn hop_extra(&self, _trace: &Trace, _index: usize, _hop: &Hop) -> Option<Extra> {
        None
    }
}

/// The [`Annotate`] that adds nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoAnnotations;
impl Annotate for NoAnnotations {}

/// One trace or ping object as `sc_warts2json` prints it (without the newline), with
/// extra fields from `ann`. `utc_offset`: seconds east of UTC for a trace's `ftime`
/// (scamper prints local time).
pub fn record_line(r: &Record, ann: &dyn Annotate, utc_offset: i64) -> String {
    match r {
        Record::Trace(t) => trace_line(t, ann, r, utc_offset),
        Record::Ping(p) => ping_line(p, ann, r),
    }
}

/// The `cycle-start` object (without the newline).
/// vTNT's build, when the cycle names it, follows scamper's fields as `"vtnt"`.
pub fn cycle_start_line(c: &Cycle) -> String {
    let mut s = cycle_line("cycle-start", c, "start_time", c.start_time);
    if let Some(v) = &c.vtnt {
        s.pop();
        push_fmt(&mut s, format_args!(", \"vtnt\":{}}}", json_str(v)));
    }
    s
}

/// The `cycle-stop` object (without the newline).
pub fn cycle_stop_line(c: &Cycle) -> String {
    cycle_line("cycle-stop", c, "stop_time", c.stop_time)
}

/// Renders one trace as the line `sc_warts2json` prints (without the newline).
pub(crate) fn trace_line(t: &Trace, ann: &dyn Annotate, r: &Record, utc_offset: i64) -> String {
    let mut s = String::with_capacity(512 + 256 * t.hops.len());
    s.push_str("{\"type\":\"trace\",\"version\":\"0.1\"");
    push_fmt(&mut s, format_args!(", \"userid\":{}", t.userid));
    push_fmt(
        &mut s,
        format_args!(", \"method\":\"{}\"", t.method.trace_json_name()),
    );
    push_fmt(&mut s, format_args!(", \"src\":\"{}\"", t.src));
    push_fmt(&mut s, format_args!(", \"dst\":\"{}\"", t.dst));
    if t.method == vtnt_record::Method::IcmpParis {
        push_fmt(&mut s, format_args!(", \"icmp_sum\":{}", t.icmp_sum));
    } else {
        push_fmt(
            &mut s,
            format_args!(", \"sport\":{}, \"dport\":{}", t.sport, t.dport),
        );
    }
    push_fmt(
        &mut s,
        format_args!(
            ", \"stop_reason\":\"{}\", \"stop_data\":{}",
            t.stop_reason.name(),
            t.stop_data
        ),
    );
    push_fmt(
        &mut s,
        format_args!(
            ", \"start\":{{\"sec\":{}, \"usec\":{}, \"ftime\":\"{}\"}}",
            t.start.secs() as u32,
            t.start.subsec_micros(),
            ftime(u64::from(t.start.secs() as u32), utc_offset)
        ),
    );
    push_fmt(
        &mut s,
        format_args!(
            ", \"hop_count\":{}, \"attempts\":{}, \"hoplimit\":{}",
            t.hop_count, t.attempts, t.hoplimit
        ),
    );
    push_fmt(
        &mut s,
        format_args!(
            ", \"firsthop\":{}, \"wait\":{}, \"wait_probe\":{}",
            t.firsthop.max(1),
            wait_secs(t),
            wait_probe_cs(t)
        ),
    );
    push_fmt(
        &mut s,
        format_args!(
            ", \"tos\":{}, \"probe_size\":{}, \"probe_count\":{}",
            t.tos, t.probe_size, t.probe_count
        ),
    );
    let hops = visible_hops(t);
    if !hops.is_empty() {
        s.push_str(", \"hops\":[");
        for (n, (i, h)) in hops.iter().enumerate() {
            if n > 0 {
                s.push(',');
            }
            hop_obj(&mut s, h, ann.hop_extra(t, *i, h));
        }
        s.push(']');
    }
    push_extra(&mut s, ann.record_extra(r));
    s.push('}');
    s
}

/// The trace's per-probe wait in whole seconds, as warts stores it.
pub(crate) fn wait_secs(t: &Trace) -> u8 {
    u8::try_from(t.wait.as_secs()).unwrap_or(u8::MAX)
}

/// The trace's gap between probes in centiseconds, as warts stores it.
pub(crate) fn wait_probe_cs(t: &Trace) -> u8 {
    u8::try_from(t.wait_probe.as_millis() / 10).unwrap_or(u8::MAX)
}

fn hop_obj(s: &mut String, h: &Hop, extra: Option<Extra>) {
    push_fmt(s, format_args!("{{\"addr\":\"{}\"", h.addr));
    if let Some(name) = &h.name {
        push_fmt(s, format_args!(", \"name\":{}", json_str(name)));
    }
    push_fmt(
        s,
        format_args!(
            ", \"probe_ttl\":{}, \"probe_id\":{}, \"probe_size\":{}",
            h.probe_ttl,
            h.probe_id.max(1),
            h.probe_size
        ),
    );
    if h.tx.secs() as u32 != 0 {
        push_fmt(
            s,
            format_args!(
                ", \"tx\":{{\"sec\":{}, \"usec\":{}}}",
                h.tx.secs() as u32,
                h.tx.subsec_micros()
            ),
        );
    }
    push_fmt(s, format_args!(", \"rtt\":{}", rtt_ms(h.rtt)));
    push_fmt(
        s,
        format_args!(
            ", \"reply_ttl\":{}, \"reply_tos\":{}",
            h.reply_ttl, h.reply_tos
        ),
    );
    push_fmt(
        s,
        format_args!(
            ", \"reply_ipid\":{}, \"reply_size\":{}",
            h.reply_ipid, h.reply_size
        ),
    );
    let icmp = hop_icmp(h);
    if let Some((ty, code)) = icmp {
        push_fmt(
            s,
            format_args!(", \"icmp_type\":{}, \"icmp_code\":{}", ty, code),
        );
        if icmp_quotes(&h.addr, icmp) {
            let q = quoted_or_default(h);
            push_fmt(
                s,
                format_args!(", \"icmp_q_ttl\":{}, \"icmp_q_ipl\":{}", q.ttl, q.ip_len),
            );
            if h.addr.is_ipv4() {
                push_fmt(s, format_args!(", \"icmp_q_tos\":{}", q.tos));
            }
        }
        if icmp_ptb(&h.addr, icmp) {
            // scamper 20211212 spells this key with a colon inside the quotes.
            push_fmt(s, format_args!(", \"icmp_nhmtu:\":{}", h.nhmtu));
        }
    } else if let Some(f) = h.tcp_flags {
        push_fmt(s, format_args!(", \"tcp_flags\":{}", f));
    }
    if !h.mpls.is_empty() {
        push_fmt(
            s,
            format_args!(
                ", \"icmpext\":[{{\"ie_cn\":1,\"ie_ct\":1,\"ie_dl\":{},\"mpls_labels\":[",
                4 * h.mpls.len()
            ),
        );
        for (i, l) in h.mpls.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            push_fmt(
                s,
                format_args!(
                    "{{\"mpls_ttl\":{},\"mpls_s\":{},\"mpls_exp\":{},\"mpls_label\":{}}}",
                    l.ttl,
                    u8::from(l.bottom),
                    l.exp & 7,
                    l.label & 0xf_ffff
                ),
            );
        }
        s.push_str("]}]");
    }
    push_extra(s, extra);
    s.push('}');
}

/// Appends formatted text to `s` in place: what `s.push_str(&format!(..))` gives, without
/// the temporary string (and one shared call instead of `format!`'s inlined fast path at
/// every call site, which adds up in the unikernel).
fn push_fmt(s: &mut String, args: core::fmt::Arguments<'_>) {
    // Writing to a String cannot fail.
    let _ = core::fmt::Write::write_fmt(s, args);
}

/// `, "key":["a","b"]`: values that need no escaping (flag names, addresses).
fn push_strings<'a>(
    s: &mut String,
    key: &str,
    values: impl Iterator<Item = &'a dyn core::fmt::Display>,
) {
    push_fmt(s, format_args!(", \"{key}\":["));
    for (i, v) in values.enumerate() {
        let comma = if i > 0 { "," } else { "" };
        push_fmt(s, format_args!("{comma}\"{v}\""));
    }
    s.push(']');
}

/// `text` as a JSON string literal (quoted and escaped), as `Value::String` displays it.
fn json_str(text: &str) -> String {
    // Serializing a string cannot fail.
    serde_json::to_string(text).unwrap_or_default()
}

fn push_extra(s: &mut String, extra: Option<Extra>) {
    for (k, v) in extra.into_iter().flatten() {
        s.push_str(", ");
        s.push_str(&json_str(k));
        s.push(':');
        s.push_str(&v);
    }
}

fn ping_line(p: &Ping, ann: &dyn Annotate, r: &Record) -> String {
    let mut s = String::with_capacity(512 + 256 * p.responses.len());
    push_fmt(
        &mut s,
        format_args!(
            "{{\"type\":\"ping\", \"version\":\"0.4\", \"method\":\"{}\"",
            p.method.ping_json_name()
        ),
    );
    push_fmt(&mut s, format_args!(", \"src\":\"{}\"", p.src));
    push_fmt(&mut s, format_args!(", \"dst\":\"{}\"", p.dst));
    push_fmt(
        &mut s,
        format_args!(
            ", \"start\":{{\"sec\":{},\"usec\":{}}}",
            p.start.secs() as u32,
            p.start.subsec_micros()
        ),
    );
    push_fmt(
        &mut s,
        format_args!(
            ", \"ping_sent\":{}, \"probe_size\":{}, \"userid\":{}, \"ttl\":{}, \"wait\":{}",
            p.ping_sent,
            p.probe_size,
            p.userid,
            p.ttl,
            ping_wait_secs(p)
        ),
    );
    if p.wait.subsec_micros() != 0 {
        push_fmt(
            &mut s,
            format_args!(", \"wait_us\":{}", p.wait.subsec_micros()),
        );
    }
    push_fmt(
        &mut s,
        format_args!(", \"timeout\":{}", ping_timeout_secs(p)),
    );
    if p.method != vtnt_record::Method::IcmpParis {
        push_fmt(
            &mut s,
            format_args!(", \"sport\":{}, \"dport\":{}", p.sport, p.dport),
        );
    }
    if p.method.is_tcp() {
        push_fmt(
            &mut s,
            format_args!(", \"tcp_seq\":{}, \"tcp_ack\":{}", p.tcp_seq, p.tcp_ack),
        );
    }
    if let Some(d) = &p.data {
        let key = match d {
            vtnt_record::ProbeData::Payload(_) => "payload",
            vtnt_record::ProbeData::Pattern(_) => "pattern",
        };
        let hex = vtnt_record::to_hex(d.bytes());
        push_fmt(&mut s, format_args!(", \"{key}\":\"{hex}\""));
    }
    let flags = ping_flags(p);
    if flags != 0 {
        let set = PING_FLAG_NAMES.iter().enumerate();
        let set = set.filter(|(bit, _)| u32::from(flags) & (1 << bit) != 0);
        push_strings(
            &mut s,
            "flags",
            set.map(|(_, n)| n as &dyn core::fmt::Display),
        );
    }
    if let (vtnt_record::Method::IcmpParis, Some(c)) = (p.method, p.icmp_sum) {
        // scamper 20211212 puts a space after this key's colon.
        push_fmt(&mut s, format_args!(", \"icmp_csum\": {c}"));
    }
    s.push_str(", \"responses\":[");
    for (i, reply) in ordered_replies(p).into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        reply_obj(&mut s, reply);
    }
    s.push_str("],");
    let st = ping_stats(p);
    push_fmt(
        &mut s,
        format_args!("\"statistics\":{{\"replies\":{}", st.replies),
    );
    if p.ping_sent != 0 {
        push_fmt(
            &mut s,
            format_args!(", \"loss\":{}", loss_str(p.ping_sent, st.replies)),
        );
    }
    if st.replies > 0 {
        for (k, v) in [
            ("min", st.min),
            ("max", st.max),
            ("avg", st.avg),
            ("stddev", st.stddev),
        ] {
            push_fmt(
                &mut s,
                format_args!(
                    ", \"{}\":{}",
                    k,
                    rtt_ms(vtnt_record::Duration::from_micros(v.into()))
                ),
            );
        }
    }
    s.push('}');
    push_extra(&mut s, ann.record_extra(r));
    s.push('}');
    s
}

/// Whole seconds of the ping interval (warts `probe_wait`).
pub(crate) fn ping_wait_secs(p: &Ping) -> u8 {
    u8::try_from(p.wait.as_secs()).unwrap_or(u8::MAX)
}

/// The ping timeout in whole seconds (warts `probe_timeout`).
pub(crate) fn ping_timeout_secs(p: &Ping) -> u8 {
    u8::try_from(p.timeout.as_secs()).unwrap_or(u8::MAX)
}

/// scamper's `reply_proto` rendering: a name for ICMP/TCP/UDP, else the number.
fn reply_proto(r: &PingReply) -> String {
    match r.reply_proto {
        1 | 58 => "\"icmp\"".into(),
        6 => "\"tcp\"".into(),
        17 => "\"udp\"".into(),
        n => n.to_string(),
    }
}

/// Is this reply ICMP as scamper decides it (by protocol)?
pub(crate) fn reply_is_icmp(r: &PingReply) -> bool {
    r.reply_proto == 1 || r.reply_proto == 58
}

fn reply_obj(s: &mut String, r: &PingReply) {
    push_fmt(
        s,
        format_args!("{{\"from\":\"{}\", \"seq\":{}", r.from, r.seq),
    );
    push_fmt(
        s,
        format_args!(
            ", \"reply_size\":{}, \"reply_ttl\":{}",
            r.reply_size, r.reply_ttl
        ),
    );
    push_fmt(s, format_args!(", \"reply_proto\":{}", reply_proto(r)));
    if r.tx.secs() as u32 != 0 {
        let rx = r.tx + r.rtt;
        push_fmt(
            s,
            format_args!(
                ", \"tx\":{{\"sec\":{}, \"usec\":{}}}",
                r.tx.secs() as u32,
                r.tx.subsec_micros()
            ),
        );
        push_fmt(
            s,
            format_args!(
                ", \"rx\":{{\"sec\":{}, \"usec\":{}}}",
                rx.secs() as u32,
                rx.subsec_micros()
            ),
        );
    }
    push_fmt(s, format_args!(", \"rtt\":{}", rtt_ms(r.rtt)));
    if r.from.is_ipv4() {
        push_fmt(
            s,
            format_args!(
                ", \"probe_ipid\":{}, \"reply_ipid\":{}",
                r.probe_ipid, r.reply_ipid
            ),
        );
    }
    if reply_is_icmp(r) {
        let (t, c) = r.icmp.unwrap_or((0, 0));
        push_fmt(
            s,
            format_args!(", \"icmp_type\":{}, \"icmp_code\":{}", t, c),
        );
    } else if r.reply_proto == 6 {
        push_fmt(
            s,
            format_args!(", \"tcp_flags\":{}", r.tcp_flags.unwrap_or(0)),
        );
    }
    if !r.rr.is_empty() {
        push_strings(s, "RR", r.rr.iter().map(|a| a as &dyn core::fmt::Display));
    }
    s.push('}');
}

fn cycle_line(ty: &str, c: &Cycle, time_key: &str, time: u32) -> String {
    let mut s = format!(
        "{{\"type\":\"{}\", \"list_name\":{}, \"id\":{}",
        ty,
        json_str(&c.list_name),
        c.id
    );
    if let Some(h) = &c.hostname {
        push_fmt(&mut s, format_args!(", \"hostname\":{}", json_str(h)));
    }
    push_fmt(&mut s, format_args!(", \"{}\":{}}}", time_key, time));
    s
}
