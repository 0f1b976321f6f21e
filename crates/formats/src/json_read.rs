//! The scamper JSON reader: parses `cycle-start`, `cycle-stop`, `trace` and `ping` lines
//! (ours or scamper's) back into [`Item`]s. Each line gives its own result, so one bad
//! line does not stop the rest; errors carry the line number and the field at fault.
//! Fields the reader does not know (`statistics`, `rx`) are ignored; `"tnt"` fields on a
//! trace, ping or hop object are kept as they are written ([`Item::Annotated`]).

use std::io::BufRead;

use serde_json::{Map, Value};
use vtnt_record::{
    Duration, Hop, Instant, IpAddr, Method, MplsLabel, Ping, PingReply, ProbeData, Quoted, Record,
    StopReason, Trace,
};

use crate::error::{JsonError, JsonErrorKind};
use crate::{Cycle, Item, TntFields};

/// Reads scamper JSON lines; an iterator of per-line results (blank lines are skipped).
#[derive(Debug)]
pub struct JsonReader<R: BufRead> {
    input: R,
    line: usize,
    done: bool,
}

impl<R: BufRead> JsonReader<R> {
    /// Reads from `input`.
    pub fn new(input: R) -> JsonReader<R> {
        JsonReader {
            input,
            line: 0,
            done: false,
        }
    }

    /// The line of the last item (lines read so far).
    pub fn line(&self) -> usize {
        self.line
    }
}

impl<R: BufRead> Iterator for JsonReader<R> {
    type Item = Result<Item, JsonError>;
    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let mut buf = Vec::new();
            self.line += 1;
            match self.input.read_until(b'\n', &mut buf) {
                Ok(0) => self.done = true,
                Ok(_) => {
                    let text = match std::str::from_utf8(&buf) {
                        Ok(t) => t,
                        Err(e) => {
                            let kind = JsonErrorKind::Syntax(format!("not UTF-8: {e}"));
                            return Some(Err(JsonError::new(self.line, kind)));
                        }
                    };
                    if text.trim().is_empty() {
                        continue;
                    }
                    return Some(parse_json_line(text, self.line));
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(JsonError::new(self.line, JsonErrorKind::Io(e))));
                }
            }
        }
        None
    }
}

/// Parses one line of scamper JSON; `line` is used in errors.
pub fn parse_json_line(text: &str, line: usize) -> Result<Item, JsonError> {
    let err = |kind| JsonError::new(line, kind);
    let v: Value =
        serde_json::from_str(text).map_err(|e| err(JsonErrorKind::Syntax(e.to_string())))?;
    let Value::Object(o) = v else {
        return Err(err(JsonErrorKind::Syntax("not a JSON object".into())));
    };
    let o = Obj {
        map: &o,
        path: String::new(),
    };
    let ty = o.str("type").map_err(err)?;
    match ty {
        "cycle-start" | "cycle-stop" => {
            let start = ty == "cycle-start";
            let c = Cycle {
                list_name: o.str("list_name").map_err(err)?.to_string(),
                list_id: 0,
                id: o.num("id").map_err(err)?,
                hostname: o.opt_str("hostname").map_err(err)?.map(str::to_string),
                start_time: if start {
                    o.num("start_time").map_err(err)?
                } else {
                    0
                },
                stop_time: if start {
                    0
                } else {
                    o.num("stop_time").map_err(err)?
                },
                vtnt: o.opt_str("vtnt").map_err(err)?.map(str::to_string),
            };
            Ok(if start {
                Item::CycleStart(c)
            } else {
                Item::CycleStop(c)
            })
        }
        "trace" | "ping" => {
            let r = if ty == "trace" {
                Record::Trace(trace(&o).map_err(err)?)
            } else {
                Record::Ping(ping(&o).map_err(err)?)
            };
            let annotated = o.map.contains_key("tnt")
                || o.array("hops")
                    .map_err(err)?
                    .iter()
                    .any(|h| h.map.contains_key("tnt"));
            if !annotated {
                return Ok(Item::Record(r));
            }
            let fields = tnt_fields(text, &r).map_err(err)?;
            Ok(Item::Annotated(r, fields))
        }
        other => Err(err(JsonErrorKind::UnknownType(other.to_string()))),
    }
}

/// The `"tnt"` fields of the object `text` (which holds `r`), as they are written.
fn tnt_fields(text: &str, r: &Record) -> Result<TntFields, JsonErrorKind> {
    use serde_json::value::RawValue;
    use std::collections::BTreeMap;
    type Raw<'a> = BTreeMap<String, &'a RawValue>;
    let syntax = |e: serde_json::Error| JsonErrorKind::Syntax(e.to_string());
    let top: Raw = serde_json::from_str(text).map_err(syntax)?;
    let tnt = |m: &Raw| m.get("tnt").map(|v| v.get().to_string());
    let hops = match (r, top.get("hops")) {
        (Record::Trace(_), Some(h)) => {
            let hops: Vec<Raw> = serde_json::from_str(h.get()).map_err(syntax)?;
            hops.iter().map(tnt).collect()
        }
        _ => Vec::new(),
    };
    Ok(TntFields {
        record: tnt(&top),
        hops,
    })
}

/// A JSON object with the path that leads to it, for error messages.
struct Obj<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

impl<'a> Obj<'a> {
    fn field(&self, k: &str) -> String {
        if self.path.is_empty() {
            k.to_string()
        } else {
            format!("{}.{}", self.path, k)
        }
    }
    fn get(&self, k: &str) -> Result<&'a Value, JsonErrorKind> {
        self.map
            .get(k)
            .ok_or_else(|| JsonErrorKind::Missing(self.field(k)))
    }
    fn bad(&self, k: &str, why: impl Into<String>) -> JsonErrorKind {
        JsonErrorKind::Bad {
            field: self.field(k),
            why: why.into(),
        }
    }
    fn str(&self, k: &str) -> Result<&'a str, JsonErrorKind> {
        self.get(k)?
            .as_str()
            .ok_or_else(|| self.bad(k, "not a string"))
    }
    fn opt_str(&self, k: &str) -> Result<Option<&'a str>, JsonErrorKind> {
        match self.map.get(k) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| self.bad(k, "not a string")),
        }
    }
    fn num<T: TryFrom<u64>>(&self, k: &str) -> Result<T, JsonErrorKind> {
        let v = self.get(k)?;
        let n = v
            .as_u64()
            .ok_or_else(|| self.bad(k, "not an unsigned integer"))?;
        T::try_from(n).map_err(|_| self.bad(k, format!("{n} out of range")))
    }
    fn opt_num<T: TryFrom<u64>>(&self, k: &str) -> Result<Option<T>, JsonErrorKind> {
        if self.map.contains_key(k) {
            self.num(k).map(Some)
        } else {
            Ok(None)
        }
    }
    fn addr(&self, k: &str) -> Result<IpAddr, JsonErrorKind> {
        let s = self.str(k)?;
        s.parse()
            .map_err(|_| self.bad(k, format!("{s:?} is not an IP address")))
    }
    /// A millisecond value with up to three decimals, as microseconds.
    fn ms(&self, k: &str) -> Result<Duration, JsonErrorKind> {
        let v = self.get(k)?;
        let f = v.as_f64().ok_or_else(|| self.bad(k, "not a number"))?;
        if !(0.0..=4.3e6).contains(&f) {
            return Err(self.bad(k, format!("{f} ms out of range")));
        }
        Ok(Duration::from_micros((f * 1000.0).round() as u64))
    }
    fn obj(&self, k: &str) -> Result<Obj<'a>, JsonErrorKind> {
        let m = self
            .get(k)?
            .as_object()
            .ok_or_else(|| self.bad(k, "not an object"))?;
        Ok(Obj {
            map: m,
            path: self.field(k),
        })
    }
    fn opt_obj(&self, k: &str) -> Result<Option<Obj<'a>>, JsonErrorKind> {
        if self.map.contains_key(k) {
            self.obj(k).map(Some)
        } else {
            Ok(None)
        }
    }
    fn array(&self, k: &str) -> Result<Vec<Obj<'a>>, JsonErrorKind> {
        let Some(v) = self.map.get(k) else {
            return Ok(Vec::new());
        };
        let a = v.as_array().ok_or_else(|| self.bad(k, "not an array"))?;
        a.iter()
            .enumerate()
            .map(|(i, e)| {
                let path = format!("{}[{i}]", self.field(k));
                e.as_object()
                    .map(|m| Obj {
                        map: m,
                        path: path.clone(),
                    })
                    .ok_or(JsonErrorKind::Bad {
                        field: path,
                        why: "not an object".into(),
                    })
            })
            .collect()
    }
    /// An array of strings (empty when absent).
    fn strings(&self, k: &str) -> Result<Vec<String>, JsonErrorKind> {
        let Some(v) = self.map.get(k) else {
            return Ok(Vec::new());
        };
        let a = v.as_array().ok_or_else(|| self.bad(k, "not an array"))?;
        a.iter()
            .map(|e| e.as_str().map(String::from))
            .collect::<Option<_>>()
            .ok_or_else(|| self.bad(k, "not an array of strings"))
    }
    /// `{"sec":..,"usec":..}` as an [`Instant`].
    fn timeval(&self, k: &str) -> Result<Instant, JsonErrorKind> {
        let t = self.obj(k)?;
        let sec: u64 = t.num::<u32>("sec")?.into();
        let usec: u64 = t.num("usec")?;
        if usec >= 1_000_000 {
            return Err(t.bad("usec", format!("{usec} is not below 1000000")));
        }
        Ok(Instant::from_micros(sec * 1_000_000 + usec))
    }
}

fn trace(o: &Obj) -> Result<Trace, JsonErrorKind> {
    let name = o.str("method")?;
    // classic UDP traceroute ("udp") is not one of vTNT's trace methods
    let method = Method::ALL
        .into_iter()
        .find(|m| m.trace_json_name() == name && *m != Method::UdpDport)
        .ok_or_else(|| JsonErrorKind::Unsupported {
            what: "trace method",
            why: name.into(),
        })?;
    let stop = o.str("stop_reason")?;
    let stop_reason =
        StopReason::from_name(stop).ok_or_else(|| o.bad("stop_reason", format!("{stop:?}")))?;
    // scamper lists only these hops; one outside would vanish when written as JSON.
    let (firsthop, hop_count): (u8, u8) = (o.num("firsthop")?, o.num("hop_count")?);
    let mut hops = Vec::new();
    for h in o.array("hops")? {
        let hop = hop(&h)?;
        if !(firsthop.max(1)..=hop_count).contains(&hop.probe_ttl) {
            let why = format!("{} is outside firsthop..=hop_count", hop.probe_ttl);
            return Err(h.bad("probe_ttl", why));
        }
        hops.push(hop);
    }
    let wait_probe: u64 = o.num::<u8>("wait_probe")?.into();
    Ok(Trace {
        src: o.addr("src")?,
        dst: o.addr("dst")?,
        method,
        sport: o.opt_num("sport")?.unwrap_or(0),
        dport: o.opt_num("dport")?.unwrap_or(0),
        icmp_sum: o.opt_num("icmp_sum")?.unwrap_or(0),
        userid: o.num("userid")?,
        start: o.timeval("start")?,
        stop_reason,
        stop_data: o.num("stop_data")?,
        attempts: o.num("attempts")?,
        hoplimit: o.num("hoplimit")?,
        firsthop,
        gaplimit: o.opt_num("gaplimit")?.unwrap_or(5),
        wait: Duration::from_secs(o.num::<u8>("wait")?.into()),
        wait_probe: Duration::from_millis(wait_probe * 10),
        tos: o.num("tos")?,
        probe_size: o.num("probe_size")?,
        probe_count: o.opt_num("probe_count")?.unwrap_or(0),
        hop_count,
        // scamper's JSON does not show these trace flags (its warts does)
        all_attempts: false,
        ignore_ttl_dst: false,
        // scamper's JSON shows neither
        last_ditch: false,
        lastditch: Vec::new(),
        squeries: 1,
        confidence: 0,
        // nor the PTR flag; a hop name says names were looked up
        ptr: hops.iter().any(|h| h.name.is_some()),
        hops,
        pmtud: false,
        pmtud_result: None,
    })
}

fn hop(h: &Obj) -> Result<Hop, JsonErrorKind> {
    let addr = h.addr("addr")?;
    let icmp = match h.opt_num::<u8>("icmp_type")? {
        Some(t) => Some((t, h.num("icmp_code")?)),
        None => None,
    };
    let quoted = match h.opt_num::<u8>("icmp_q_ttl")? {
        Some(ttl) => Some(Quoted {
            ttl,
            ip_len: h.num("icmp_q_ipl")?,
            tos: h.opt_num("icmp_q_tos")?.unwrap_or(0),
        }),
        None => None,
    };
    let mut mpls = Vec::new();
    for ext in h.array("icmpext")? {
        if ext.num::<u8>("ie_cn")? != 1 || ext.num::<u8>("ie_ct")? != 1 {
            continue;
        }
        for l in ext.array("mpls_labels")? {
            let label: u32 = l.num("mpls_label")?;
            let exp: u8 = l.num("mpls_exp")?;
            if label > 0xf_ffff || exp > 7 {
                return Err(l.bad("mpls_label", "label above 2^20 or exp above 7"));
            }
            mpls.push(MplsLabel {
                label,
                exp,
                bottom: l.num::<u8>("mpls_s")? != 0,
                ttl: l.num("mpls_ttl")?,
            });
        }
    }
    Ok(Hop {
        addr,
        probe_ttl: h.num("probe_ttl")?,
        probe_id: h.num("probe_id")?,
        probe_size: h.num("probe_size")?,
        tx: match h.opt_obj("tx")? {
            Some(_) => h.timeval("tx")?,
            None => Instant::ZERO,
        },
        rtt: h.ms("rtt")?,
        reply_ttl: h.num("reply_ttl")?,
        reply_tos: h.opt_num("reply_tos")?.unwrap_or(0),
        reply_ipid: h.opt_num("reply_ipid")?.unwrap_or(0),
        reply_size: h.opt_num("reply_size")?.unwrap_or(0),
        icmp,
        tcp_flags: h.opt_num("tcp_flags")?,
        quoted,
        mpls,
        name: h.opt_str("name")?.map(String::from),
        // (scamper 20211212 spells the key with a colon inside the quotes)
        nhmtu: h.opt_num("icmp_nhmtu:")?.unwrap_or(0),
    })
}

fn ping(o: &Obj) -> Result<Ping, JsonErrorKind> {
    let name = o.str("method")?;
    let method = Method::ALL
        .into_iter()
        .find(|m| m.ping_json_name() == name)
        .ok_or_else(|| JsonErrorKind::Unsupported {
            what: "ping method",
            why: name.into(),
        })?;
    // scamper lists only these replies; warts refuses others, JSON drops them.
    let ping_sent: u16 = o.num("ping_sent")?;
    let mut responses = Vec::new();
    for r in o.array("responses")? {
        let reply = reply(&r)?;
        if reply.seq >= ping_sent {
            let why = format!("{} is not below ping_sent {ping_sent}", reply.seq);
            return Err(r.bad("seq", why));
        }
        responses.push(reply);
    }
    let flags = o.strings("flags")?;
    let flag = |name: &str| flags.iter().any(|f| f == name);
    let hex = |k: &str| -> Result<Option<Vec<u8>>, JsonErrorKind> {
        match o.map.get(k) {
            None => Ok(None),
            Some(_) => {
                let s = o.str(k)?;
                let b = vtnt_record::from_hex(s).ok_or_else(|| o.bad(k, "not hex bytes"))?;
                Ok(Some(b))
            }
        }
    };
    let data = match (hex("payload")?, hex("pattern")?) {
        (Some(b), None) if flag("payload") => Some(ProbeData::Payload(b)),
        (None, Some(b)) if !flag("payload") => Some(ProbeData::Pattern(b)),
        (None, None) => None,
        _ => return Err(o.bad("payload", "payload and pattern disagree with flags")),
    };
    let icmp_sum = match o.opt_num::<u16>("icmp_csum")? {
        Some(c) if flag("icmpsum") => Some(c),
        None if !flag("icmpsum") => None,
        _ => return Err(o.bad("icmp_csum", "disagrees with flags")),
    };
    let wait_s: u64 = o.num::<u8>("wait")?.into();
    let wait_us: u64 = o.opt_num::<u32>("wait_us")?.unwrap_or(0).into();
    let timeout: u64 = o.opt_num::<u8>("timeout")?.map(u64::from).unwrap_or(wait_s);
    Ok(Ping {
        src: o.addr("src")?,
        dst: o.addr("dst")?,
        method,
        sport: o.opt_num("sport")?.unwrap_or(0),
        dport: o.opt_num("dport")?.unwrap_or(0),
        userid: o.num("userid")?,
        start: o.timeval("start")?,
        ping_sent,
        probe_size: o.num("probe_size")?,
        ttl: o.num("ttl")?,
        wait: Duration::from_secs(wait_s) + Duration::from_micros(wait_us),
        timeout: Duration::from_secs(timeout),
        tcp_seq: o.opt_num("tcp_seq")?.unwrap_or(0),
        tcp_ack: o.opt_num("tcp_ack")?.unwrap_or(0),
        // scamper's JSON shows neither the ToS nor the reply count (its warts does)
        tos: 0,
        icmp_sum,
        reply_count: 0,
        data,
        record_route: flag("v4rr"),
        responses,
    })
}

fn reply(r: &Obj) -> Result<PingReply, JsonErrorKind> {
    let from = r.addr("from")?;
    let proto = match r.get("reply_proto")? {
        Value::String(s) => match s.as_str() {
            "icmp" if from.is_ipv6() => 58,
            "icmp" => 1,
            "tcp" => 6,
            "udp" => 17,
            other => return Err(r.bad("reply_proto", format!("unknown protocol {other:?}"))),
        },
        _ => r.num("reply_proto")?,
    };
    let icmp = match r.opt_num::<u8>("icmp_type")? {
        Some(t) => Some((t, r.num("icmp_code")?)),
        None => None,
    };
    Ok(PingReply {
        from,
        seq: r.num("seq")?,
        tx: match r.opt_obj("tx")? {
            Some(_) => r.timeval("tx")?,
            None => Instant::ZERO,
        },
        rtt: r.ms("rtt")?,
        reply_size: r.num("reply_size")?,
        reply_ttl: r.num("reply_ttl")?,
        reply_tos: 0,
        reply_proto: proto,
        probe_ipid: r.opt_num("probe_ipid")?.unwrap_or(0),
        reply_ipid: r.opt_num::<u32>("reply_ipid")?.unwrap_or(0) as u16,
        icmp,
        tcp_flags: r.opt_num("tcp_flags")?,
        rr: r
            .strings("RR")?
            .iter()
            .map(|a| {
                a.parse()
                    .map_err(|_| r.bad("RR", format!("{a:?} is not an IP address")))
            })
            .collect::<Result<_, _>>()?,
    })
}
