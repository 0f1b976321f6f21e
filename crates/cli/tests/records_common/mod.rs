//! Shared by the tests that compare scamper-JSON records (`trace_vs_scamper`, `daemon`,
//! `lab_scamper`):
//! a run's JSON objects, and the parts of traces and pings they compare.

#![allow(dead_code)]

use std::process::Output;

use serde_json::Value;
use vtnt_netns::NetNs;

/// The JSON objects `out` printed, one a line; fails unless `who` succeeded.
pub fn json_lines(out: &Output, who: &str) -> Vec<Value> {
    assert!(
        out.status.success(),
        "{who} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{who}: bad JSON {l}: {e}")))
        .collect()
}

pub fn of_type<'a>(objs: &'a [Value], ty: &str) -> Vec<&'a Value> {
    objs.iter().filter(|o| o["type"] == ty).collect()
}

/// `vtnt ARGS` in `ns`, as JSON objects.
pub fn vtnt(ns: &NetNs, args: &[&str]) -> Vec<Value> {
    let out = ns.exec(env!("CARGO_BIN_EXE_vtnt"), args).expect("run vtnt");
    json_lines(&out, "vtnt")
}

/// (probe_ttl, addr, reply_ttl) of every hop.
pub fn hops(trace: &Value) -> Vec<(u64, String, u64)> {
    trace["hops"]
        .as_array()
        .map(|hs| {
            hs.iter()
                .map(|h| {
                    (
                        h["probe_ttl"].as_u64().unwrap(),
                        h["addr"].as_str().unwrap().to_string(),
                        h["reply_ttl"].as_u64().unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// (from, reply_ttl) of every reply of a ping.
pub fn replies(ping: &Value) -> Vec<(String, u64)> {
    ping["responses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["from"].as_str().unwrap().to_string(),
                r["reply_ttl"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A record with what differs between any two runs taken out: times, RTTs, IP IDs, the
/// source port, a trace's random ICMP checksum and a TCP ping's sequence and
/// acknowledgment numbers (both tools draw their own; a case with `-A` checks it).
pub fn normalised(v: &Value) -> Value {
    const VOLATILE: [&str; 14] = [
        "start",
        "tcp_seq",
        "tcp_ack",
        "tx",
        "rx",
        "rtt",
        "sport",
        "icmp_sum",
        "reply_ipid",
        "probe_ipid",
        "min",
        "max",
        "avg",
        "stddev",
    ];
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !VOLATILE.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), normalised(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalised).collect()),
        v => v.clone(),
    }
}
