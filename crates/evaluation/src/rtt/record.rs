//! One `vtnt run ... -- ping|trace -O json` of `vtnt bench rtt`, read from its JSON: the
//! raw RTT of every reply or hop (scamper's `rtt`) and, when corrected, the corrected
//! one beside it or the reason there is none (docs/rtt-correction.md). Nothing here
//! measures: it only reads what the run printed, so a runtime that is not corrected can
//! never be counted as corrected.

use serde::Serialize;
use serde_json::Value;

use super::Kind;

/// Where a sample sits in its record: a ping reply's `(0, seq)`, a trace hop's
/// `(probe_ttl, probe_id)`. Its first member is the sample's *slot*: samples of one slot
/// are compared with the native run's of the same slot (one for a ping, one per hop).
pub type Place = (u64, u64);

/// One run's RTTs, microseconds, by place.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RttRecord {
    /// The runtime's own RTT of every reply or hop.
    pub raw_us: Vec<(Place, f64)>,
    /// When each of those probes left, by the runtime's clock (scamper's `tx`,
    /// microseconds since the epoch), where the record says.
    pub tx_us: Vec<u64>,
    /// The corrected RTTs, or why there are none.
    pub corrected: Corrected,
}

/// What the correction said about a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Corrected {
    /// The run was made without correction.
    #[default]
    Off,
    /// The whole record is not corrected, for this reason (native, a runtime whose host
    /// side is not captured).
    Not(String),
    /// Replies corrected (by place, microseconds) and those refused (by place, why).
    Replies {
        us: Vec<(Place, f64)>,
        refused: Vec<(Place, String)>,
    },
}

impl RttRecord {
    /// The `kind` record of a run's standard output (JSON lines, scamper's format).
    pub fn parse(stdout: &str, kind: Kind) -> Result<RttRecord, String> {
        let (ty, list) = match kind {
            Kind::Ping => ("ping", "responses"),
            Kind::Trace => ("trace", "hops"),
        };
        let record = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["type"] == ty)
            .ok_or_else(|| format!("no {ty} record in the run's output"))?;
        let place = |r: &Value| match kind {
            Kind::Ping => Some((0, r["seq"].as_u64()?)),
            Kind::Trace => Some((r["probe_ttl"].as_u64()?, r["probe_id"].as_u64()?)),
        };
        let samples = record[list].as_array().into_iter().flatten();
        let raw_us = samples
            .clone()
            .filter_map(|r| Some((place(r)?, ms_to_us(r["rtt"].as_f64()?))))
            .collect();
        let tx_us = samples
            .filter_map(|r| Some(r["tx"]["sec"].as_u64()? * 1_000_000 + r["tx"]["usec"].as_u64()?))
            .collect();
        let c = &record["rtt_correction"];
        let corrected = if c.is_null() {
            Corrected::Off
        } else if let Some(why) = c["not_corrected"].as_str() {
            Corrected::Not(why.into())
        } else {
            let (mut us, mut refused) = (Vec::new(), Vec::new());
            for r in c[list].as_array().into_iter().flatten() {
                let at = place(r).ok_or("a correction without its place")?;
                match (r["rtt_corrected"].as_f64(), r["not_corrected"].as_str()) {
                    (Some(ms), _) => us.push((at, ms_to_us(ms))),
                    (None, Some(why)) => refused.push((at, why.to_string())),
                    (None, None) => return Err(format!("a correction of {at:?} says nothing")),
                }
            }
            Corrected::Replies { us, refused }
        };
        Ok(RttRecord {
            raw_us,
            tx_us,
            corrected,
        })
    }

    /// When its first and last probes left (`None`: the record gives no times).
    pub fn span_us(&self) -> Option<(u64, u64)> {
        Some((*self.tx_us.iter().min()?, *self.tx_us.iter().max()?))
    }

    /// The corrected RTTs, microseconds, by place (`Err`: not corrected, and why).
    pub fn corrected(&self) -> Result<&[(Place, f64)], String> {
        match &self.corrected {
            Corrected::Off => Err("run without correction".into()),
            Corrected::Not(why) => Err(why.clone()),
            Corrected::Replies { us, .. } => Ok(us),
        }
    }
}

/// scamper's milliseconds (to the microsecond) as microseconds.
fn ms_to_us(ms: f64) -> f64 {
    (ms * 1e3 * 1e3).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = r#"{"type":"ping", "method":"icmp-echo", "dst":"203.0.113.10", "responses":[{"seq":0, "rtt":19.915, "tx":{"sec":7, "usec":5}},{"seq":1, "rtt":19.920, "tx":{"sec":7, "usec":20005}}]"#;

    #[test]
    fn a_run_not_corrected_keeps_its_raw_rtts_and_gives_the_reason_never_a_value() {
        let out = format!(
            "noise\n{HEAD}, \"rtt_correction\":{{\"not_corrected\":\"vm: not captured\"}}}}\n"
        );
        let run = RttRecord::parse(&out, Kind::Ping).unwrap();
        assert_eq!(run.raw_us, [((0, 0), 19_915.0), ((0, 1), 19_920.0)]);
        assert_eq!(run.span_us(), Some((7_000_005, 7_020_005)));
        assert_eq!(run.corrected(), Err("vm: not captured".into()));
        let off = RttRecord::parse(&format!("{HEAD}}}"), Kind::Ping).unwrap();
        assert_eq!(off.corrected, Corrected::Off);
        assert!(off.corrected().is_err());
    }

    #[test]
    fn corrected_replies_and_refusals_are_kept_apart() {
        let c = r#"{"at":"vtnt0","responses":[{"seq":0,"rtt_corrected":19.922,"rtt_overhead":-0.007},{"seq":1,"not_corrected":"not seen on the host side"}]}"#;
        let run =
            RttRecord::parse(&format!("{HEAD}, \"rtt_correction\":{c}}}"), Kind::Ping).unwrap();
        assert_eq!(run.corrected(), Ok(&[((0, 0), 19_922.0)][..]));
        let Corrected::Replies { refused, .. } = &run.corrected else {
            panic!("{run:?}")
        };
        assert_eq!(
            refused,
            &[((0, 1), "not seen on the host side".to_string())]
        );
        assert!(RttRecord::parse("{\"type\":\"trace\"}", Kind::Ping).is_err());
    }

    #[test]
    fn a_trace_is_read_hop_by_hop_by_ttl_and_attempt() {
        let out = r#"{"type":"trace","dst":"203.0.113.10","hops":[{"addr":"192.0.2.1","probe_ttl":1,"probe_id":1,"rtt":0.105},{"addr":"192.0.2.1","probe_ttl":1,"probe_id":2,"rtt":0.110},{"addr":"10.0.0.1","probe_ttl":2,"probe_id":1,"rtt":1.2}], "rtt_correction":{"at":"vtnt0","hops":[{"probe_ttl":1,"probe_id":1,"rtt_corrected":0.1,"rtt_overhead":0.005},{"probe_ttl":1,"probe_id":2,"not_corrected":"ambiguous"},{"probe_ttl":2,"probe_id":1,"rtt_corrected":1.19,"rtt_overhead":0.01}]}}"#;
        let run = RttRecord::parse(out, Kind::Trace).unwrap();
        assert_eq!(
            run.raw_us,
            [((1, 1), 105.0), ((1, 2), 110.0), ((2, 1), 1_200.0)]
        );
        assert_eq!(
            run.corrected(),
            Ok(&[((1, 1), 100.0), ((2, 1), 1_190.0)][..])
        );
        assert!(RttRecord::parse(out, Kind::Ping).is_err());
    }
}
