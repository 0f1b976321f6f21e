//! `vtnt bench rtt`'s report as markdown: the noise floor per load, then per runtime and
//! load the raw and corrected RTTs against native (mean and p99, microseconds) and the
//! perturbation; a runtime that is not corrected says so and why in place of figures.

use std::fmt::Write;

use super::{Correction, Diff, Outcome, RttReport, Stat};

/// The report as markdown tables.
pub fn markdown(r: &RttReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# RTT correction: {} pings of {} at {} ms, configured round trip {:.1} us\n",
        r.count, r.target, r.interval_ms, r.configured_us
    );
    let _ = writeln!(
        s,
        "Microseconds. A difference is of the means (mean) and of the 99th percentiles (p99); \
         a trace's samples (every attempt of every hop, {} per hop) are each taken less their \
         hop's native mean first. Load: UDP datagrams of {} bytes a second through the lab's TUN, and as many with iperf3 \
         on the host's loopback (the VM front's device).\n",
        r.trace_attempts, r.load_size
    );
    let _ = writeln!(s, "CPUs: the lab's daemon and the runs, {}.\n", r.cpus);
    s.push_str("## Noise floor: native, lab-side capture on the lab's TUN\n\n");
    s.push_str("| load/s | sent (TUN, iperf3) | replies | paired | drops | tool - configured | capture - configured | tool - capture | capture's perturbation |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for l in &r.loads {
        let f = &l.floor;
        let _ = writeln!(
            s,
            "| {} | {}, {} | {} | {} | {} | {} | {} | {} | {} |",
            l.rate,
            l.sent,
            l.sent_loopback,
            f.replies,
            f.paired,
            f.drops,
            diff(f.tool_minus_configured),
            f.capture_minus_configured.map_or("-".into(), diff),
            f.tool_minus_capture.map_or("-".into(), stat),
            diff(f.perturbation),
        );
    }
    s.push_str("\n## Per runtime and load, against native at the same moments (pings: beside the run; traces: just before)\n\n");
    s.push_str("| runtime | kind | load/s | native | raw | raw - native | corrected - native | corrected - configured | refused | perturbation (on - off) |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    for l in &r.loads {
        for row in &l.runtimes {
            let head = format!(
                "| {} | {} | {} |",
                row.runtime.name(),
                row.kind.name(),
                l.rate
            );
            let m = match &row.outcome {
                Outcome::Measured(m) => m,
                Outcome::Failed(why) => {
                    let _ = writeln!(s, "{head} failed: {why} | | | | | | |");
                    continue;
                }
            };
            let (corrected, configured, refused) = match &m.correction {
                Correction::Corrected(c) => (
                    diff(c.minus_native),
                    c.minus_configured.map_or("-".into(), diff),
                    c.refused.to_string(),
                ),
                Correction::NotCorrected(why) => {
                    (format!("not corrected: {why}"), "-".into(), "-".into())
                }
            };
            let _ = writeln!(
                s,
                "{head} {} | {} | {} | {corrected} | {configured} | {refused} | {} |",
                stat(m.native),
                stat(m.raw),
                diff(m.raw_minus_native),
                diff(m.perturbation),
            );
        }
    }
    s
}

fn stat(s: Stat) -> String {
    format!("{:.1} / {:.1} (n {})", s.mean_us, s.p99_us, s.n)
}

fn diff(d: Diff) -> String {
    format!("{:+.1} / {:+.1}", d.mean_us, d.p99_us)
}
