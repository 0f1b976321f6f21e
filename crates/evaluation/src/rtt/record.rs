//! One `vtnt run ... -- ping -O json` of `vtnt bench rtt`, read from its JSON: the raw
//! RTT of every reply (scamper's `rtt`) and, with `--correct-rtt`, the corrected one
//! beside it or the reason there is none (docs/rtt-correction.md). Nothing here measures:
//! it only reads what the run printed, so a runtime that is not corrected can never be
//! counted as corrected.

use serde::Serialize;
use serde_json::Value;

/// One ping run's RTTs, microseconds, by echo sequence number (scamper's `seq`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PingRecord {
    /// The runtime's own RTT of every reply.
    pub raw_us: Vec<(u64, f64)>,
    /// The corrected RTTs, or why there are none.
    pub corrected: Corrected,
}

/// What `--correct-rtt` said about a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Corrected {
    /// The run was made without `--correct-rtt`.
    #[default]
    Off,
    /// The whole record is not corrected, for this reason (native, the VMs, spt).
    Not(String),
    /// Replies corrected (by seq, microseconds) and those refused (by seq, why).
    Replies {
        us: Vec<(u64, f64)>,
        refused: Vec<(u64, String)>,
    },
}

impl PingRecord {
    /// The ping record of a run's standard output (JSON lines, scamper's format).
    pub fn parse(stdout: &str) -> Result<PingRecord, String> {
        let record = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["type"] == "ping")
            .ok_or("no ping record in the run's output")?;
        let raw_us = record["responses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| Some((r["seq"].as_u64()?, ms_to_us(r["rtt"].as_f64()?))))
            .collect();
        let c = &record["rtt_correction"];
        let corrected = if c.is_null() {
            Corrected::Off
        } else if let Some(why) = c["not_corrected"].as_str() {
            Corrected::Not(why.into())
        } else {
            let (mut us, mut refused) = (Vec::new(), Vec::new());
            for r in c["responses"].as_array().into_iter().flatten() {
                let seq = r["seq"].as_u64().ok_or("a correction without seq")?;
                match (r["rtt_corrected"].as_f64(), r["not_corrected"].as_str()) {
                    (Some(ms), _) => us.push((seq, ms_to_us(ms))),
                    (None, Some(why)) => refused.push((seq, why.to_string())),
                    (None, None) => return Err(format!("a correction of seq {seq} says nothing")),
                }
            }
            Corrected::Replies { us, refused }
        };
        Ok(PingRecord { raw_us, corrected })
    }

    /// The raw RTTs, microseconds.
    pub fn raw(&self) -> Vec<f64> {
        self.raw_us.iter().map(|&(_, v)| v).collect()
    }

    /// The corrected RTTs, microseconds (`None`: not corrected, and why).
    pub fn corrected(&self) -> Result<Vec<f64>, String> {
        match &self.corrected {
            Corrected::Off => Err("run without --correct-rtt".into()),
            Corrected::Not(why) => Err(why.clone()),
            Corrected::Replies { us, .. } => Ok(us.iter().map(|&(_, v)| v).collect()),
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

    const HEAD: &str = r#"{"type":"ping", "method":"icmp-echo", "dst":"203.0.113.10", "responses":[{"seq":0, "rtt":19.915},{"seq":1, "rtt":19.920}]"#;

    #[test]
    fn a_run_not_corrected_keeps_its_raw_rtts_and_gives_the_reason_never_a_value() {
        let out = format!(
            "noise\n{HEAD}, \"rtt_correction\":{{\"not_corrected\":\"vm: not captured\"}}}}\n"
        );
        let run = PingRecord::parse(&out).unwrap();
        assert_eq!(run.raw(), [19_915.0, 19_920.0]);
        assert_eq!(run.corrected(), Err("vm: not captured".into()));
        let off = PingRecord::parse(&format!("{HEAD}}}")).unwrap();
        assert_eq!(off.corrected, Corrected::Off);
        assert!(off.corrected().is_err());
    }

    #[test]
    fn corrected_replies_and_refusals_are_kept_apart() {
        let c = r#"{"at":"vtnt0","responses":[{"seq":0,"rtt_corrected":19.922,"rtt_overhead":-0.007},{"seq":1,"not_corrected":"not seen on the host side"}]}"#;
        let run = PingRecord::parse(&format!("{HEAD}, \"rtt_correction\":{c}}}")).unwrap();
        assert_eq!(run.corrected(), Ok(vec![19_922.0]));
        let Corrected::Replies { refused, .. } = &run.corrected else {
            panic!("{run:?}")
        };
        assert_eq!(refused, &[(1, "not seen on the host side".to_string())]);
        assert!(PingRecord::parse("{\"type\":\"trace\"}").is_err());
    }
}
