//! `vtnt run`'s RTT correction (on by default) end to end on a lab of the test's own: a runc container's
//! ICMP echo replies get `rtt_corrected` and `rtt_overhead` from the capture on the lab's
//! TUN, beside their unchanged `rtt`, one per reply, by sequence number (40 replies at
//! 20 ms: more than a capture read only at the end keeps, its ring's 64 blocks each
//! closed 5 ms after its first packet), and a trace's hops by TTL and attempt; the
//! unikernel as an spt process, whose frames cross the lab's VM front as UDP datagrams on
//! loopback, the same from a capture there; native's JSON is left as scamper's by
//! default and, with `--correct-rtt`, says no correction is needed instead of a number;
//! `--no-correct-rtt` leaves a runtime's as its tool printed it. Needs root, runc, cgroup v1 and the installed static vtnt and unikernel;
//! skipped through vtnt-testkit otherwise.

mod lab_common;

use lab_common::{vtnt, Lab};
use serde_json::Value;

const TEST: &str = "correct_rtt";

/// The ping record of `vtnt run --runtime RUNTIME FLAGS...` on `lab`.
fn ping(lab: &Lab, runtime: &str, flags: &[&str]) -> Value {
    record(lab, runtime, flags, "ping", &["-c", "40", "-i", "0.02"])
}

/// The `kind` record of `vtnt run --runtime RUNTIME FLAGS... -- KIND ARGS...` on `lab`,
/// to the lab's explicit-tunnel destination.
fn record(lab: &Lab, runtime: &str, flags: &[&str], kind: &str, args: &[&str]) -> Value {
    let head = ["run", "--runtime", runtime, "--lab", &lab.name];
    let head = [&head[..], flags, &["--", kind]].concat();
    let out = vtnt(&[&head[..], args, &["-O", "json", "203.0.113.10"]].concat());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{runtime}: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == kind)
        .unwrap_or_else(|| panic!("{runtime}: no {kind} record in {stdout}"))
}

#[test]
fn runc_replies_get_corrected_rtts_beside_the_raw_ones_and_native_says_none_is_needed() {
    vtnt_testkit::require_root!("runc", "ip", "tar");
    if !vtnt_measure::cgroup::available() {
        let why = "cgroup v1 controllers are not mounted";
        vtnt_testkit::skip_or_fail(TEST, why, Some(vtnt_testkit::Allowed::CgroupV1));
        return;
    }
    if let Err(e) = vtnt_runtimes::paths::static_vtnt() {
        vtnt_testkit::skip_or_fail(TEST, &format!("{e:#}"), None);
        return;
    }
    let lab = Lab::up("crt", None);

    let port = vtnt_lab_linux::lab_state(&lab.name)
        .expect("the lab's state")
        .vm_port;
    for (runtime, at) in [
        ("runc", format!("vtnt0 in /run/netns/{}", lab.name)),
        (
            "spt",
            format!("the VM front of `{}` (UDP port {port} on lo)", lab.name),
        ),
    ] {
        // on by default
        let record = ping(&lab, runtime, &[]);
        let replies = record["responses"].as_array().unwrap();
        assert_eq!(replies.len(), 40, "{record}");
        let c = &record["rtt_correction"];
        assert_eq!(c["at"], at, "{c}");
        let corrected = c["responses"].as_array().unwrap();
        assert_eq!(corrected.len(), 40, "one correction per reply: {c}");
        for (r, k) in replies.iter().zip(corrected) {
            assert_eq!(r["seq"], k["seq"], "{c}");
            let raw = r["rtt"].as_f64().unwrap();
            let wire = k["rtt_corrected"].as_f64().unwrap_or_else(|| panic!("{k}"));
            let overhead = k["rtt_overhead"].as_f64().unwrap();
            // milliseconds to the microsecond, like scamper's rtt
            assert!((raw - wire - overhead).abs() < 0.0015, "{r} {k}");
            assert!(wire > 0.0, "{k}");
            if runtime == "runc" {
                // the same kernel path on both clocks: a millisecond is generous
                assert!(overhead.abs() < 1.0, "{r} {k}");
            }
        }
    }

    // a trace's hops, each by its TTL and attempt (time exceeded paired by their quote)
    let runc = record(&lab, "runc", &[], "trace", &["-q", "2"]);
    let hops = runc["hops"].as_array().unwrap();
    let c = &runc["rtt_correction"]["hops"];
    assert_eq!(c.as_array().map(Vec::len), Some(hops.len()), "{runc}");
    assert!(hops.len() >= 5, "{runc}");
    for (h, k) in hops.iter().zip(c.as_array().unwrap()) {
        assert_eq!(
            (&h["probe_ttl"], &h["probe_id"]),
            (&k["probe_ttl"], &k["probe_id"])
        );
        let raw = h["rtt"].as_f64().unwrap();
        let wire = k["rtt_corrected"].as_f64().unwrap_or_else(|| panic!("{k}"));
        let overhead = k["rtt_overhead"].as_f64().unwrap();
        assert!((raw - wire - overhead).abs() < 0.0015, "{h} {k}");
        assert!(wire > 0.0 && overhead.abs() < 1.0, "{h} {k}");
    }

    // native's JSON is scamper's own unless asked; asked, it says why nothing is corrected
    let native = ping(&lab, "native", &[]);
    assert!(native.get("rtt_correction").is_none(), "{native}");
    let native = ping(&lab, "native", &["--correct-rtt"]);
    let why = native["rtt_correction"]["not_corrected"].as_str().unwrap();
    assert!(why.starts_with("native: "), "{native}");
    assert!(native["responses"][0]["rtt"].is_number(), "{native}");
    // and a runtime's is left as its tool printed it when told
    let runc = ping(&lab, "runc", &["--no-correct-rtt"]);
    assert!(runc.get("rtt_correction").is_none(), "{runc}");
}
