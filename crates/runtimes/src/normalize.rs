//! Runtimes are compared on their output: [`normalize`] removes what legitimately differs
//! between runs and runtimes from scamper JSON lines: times (`start`, `tx`, `rx`, `rtt` and a ping's round-trip statistics `min`,
//! `avg`, `max`, `stddev`, TNT's `rtt_us`, `start_time`, `stop_time`), the host name,
//! reply IP ids (the lab's per-router counters advance between runs) and the vantage
//! address (`src`: containers share the lab's 192.0.2.2, VMs take a guest slot address);
//! and the order of the lines: a campaign's records come out as its measurements finish,
//! which timing decides (a TNT campaign's pings and revelation traces in a slow TCG
//! guest finish in another order than natively, with the same content).

use serde_json::Value;

const VARYING: [&str; 14] = [
    "start",
    "tx",
    "rx",
    "rtt",
    "min",
    "avg",
    "max",
    "stddev",
    "rtt_us",
    "start_time",
    "stop_time",
    "hostname",
    "reply_ipid",
    "src",
];

/// The job's JSON lines with run-dependent fields removed (see the module docs), one
/// canonical line each, sorted; lines that are not JSON objects are dropped.
pub fn normalize(stdout: &str) -> Vec<String> {
    let mut lines: Vec<String> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|v| v.is_object())
        .map(|mut v| {
            strip(&mut v);
            v.to_string()
        })
        .collect();
    lines.sort_unstable();
    lines
}

fn strip(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for k in VARYING {
                m.remove(k);
            }
            m.values_mut().for_each(strip);
        }
        Value::Array(a) => a.iter_mut().for_each(strip),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_drops_times_and_vantage() {
        let a = r#"{"type":"trace","src":"192.0.2.2","dst":"203.0.113.10","start":{"sec":1},"hops":[{"addr":"192.0.2.1","rtt":1.2,"tx":{"sec":3},"reply_ipid":7,"reply_ttl":255}]}"#;
        let b = r#"{"type":"trace","src":"192.0.2.40","dst":"203.0.113.10","start":{"sec":9},"hops":[{"addr":"192.0.2.1","rtt":3.4,"tx":{"sec":4},"reply_ipid":9,"reply_ttl":255}]}"#;
        assert_eq!(normalize(a), normalize(&format!("boot noise\n{b}\n")));
        assert_ne!(normalize(a), normalize(&a.replace("255", "254")));
        // the same records in another order (measurements that finished otherwise)
        let c = r#"{"type":"ping","dst":"192.0.2.1"}"#;
        assert_eq!(
            normalize(&format!("{a}\n{c}")),
            normalize(&format!("{c}\n{b}"))
        );
    }
}
