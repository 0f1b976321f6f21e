//! `vtnt bench rtt` end to end at a small N on a lab of its own: runc (captured on the
//! lab's TUN) and spt (captured at the lab's VM front, on loopback), pings and traces
//! (every attempt of every hop), with no load and with 1000 datagrams a second through
//! the lab. Exact
//! behaviour only, no timing thresholds (the figures are the benchmark's): the load has
//! its noise floor with every native reply paired by the lab-side capture, the configured
//! round trip is the emulator's, runc and spt have a corrected RTT for every reply and hop, in the
//! JSON and the text (a run that is not corrected keeps its raw rows and says why: the
//! unit tests of `rtt`). Needs root, runc, iperf3, cgroup v1 and the installed static vtnt and
//! unikernel; skipped through vtnt-testkit otherwise.

mod common;

use std::net::Ipv4Addr;

use vtnt_evaluation::rtt::{
    bench_rtt, configured_rtt_us, report, BenchRttArgs, Correction, Kind, Outcome,
};
use vtnt_lab::Topology;
use vtnt_runtimes::Runtime;

const TEST: &str = "rtt";

#[test]
fn runc_and_spt_are_corrected_and_the_noise_floor_pairs_every_reply() {
    vtnt_testkit::require_root!("runc", "ip", "iperf3");
    if !common::basics_ready(TEST) {
        return;
    }
    let target = Ipv4Addr::new(203, 0, 113, 10);
    let args = BenchRttArgs {
        runtimes: vec![Runtime::Runc, Runtime::Spt],
        loads: vec![0, 1000],
        load_size: 200,
        count: 25,
        interval_ms: 20,
        trace_attempts: 2,
        target,
        topology: None,
        no_pin: false,
        json: true,
    };
    // the installed tree's vtnt (bin/vtnt beside lib/vtnt/vtnt-static): `run` and `lab`
    let lib = std::fs::canonicalize(vtnt_runtimes::paths::static_vtnt().unwrap()).unwrap();
    let exe = lib.ancestors().nth(3).unwrap().join("bin/vtnt");
    let r = bench_rtt(&args, &exe).unwrap();
    let configured = configured_rtt_us(&Topology::reference(), target).unwrap();
    assert_eq!(r.configured_us, configured);
    assert_eq!(r.loads.len(), 2);
    // the loaded run ends (its captures read the ring a lap at a time) and sent its load,
    // through the lab and with iperf3 on the loopback
    assert_eq!((r.loads[0].sent, r.loads[0].sent_loopback), (0, 0));
    assert!(r.loads[1].sent > 0, "{:?}", r.loads[1].sent);
    assert!(
        r.loads[1].sent_loopback > 0,
        "{:?}",
        r.loads[1].sent_loopback
    );
    let text = report::markdown(&r);
    let json = serde_json::to_value(&r).unwrap();
    for (l, jl) in r.loads.iter().zip(json["loads"].as_array().unwrap()) {
        let f = &l.floor;
        assert_eq!(f.replies, 25, "{f:?}");
        if f.drops == 0 {
            assert_eq!(
                f.paired, f.replies,
                "every native reply on the capture: {f:?}"
            );
        }
        // pings then traces, each runtime's after a native run of their own
        let kinds: Vec<_> = l.runtimes.iter().map(|r| (r.runtime, r.kind)).collect();
        assert_eq!(
            kinds,
            [
                (Runtime::Runc, Kind::Ping),
                (Runtime::Runc, Kind::Trace),
                (Runtime::Spt, Kind::Ping),
                (Runtime::Spt, Kind::Trace),
            ]
        );
        for (i, row) in l.runtimes.iter().enumerate() {
            let (name, kind) = (row.runtime.name(), row.kind.name());
            let Outcome::Measured(m) = &row.outcome else {
                panic!("{name} {kind}: {row:?}")
            };
            let Correction::Corrected(c) = &m.correction else {
                panic!("{name} {kind} not corrected: {m:?}")
            };
            assert_eq!(c.refused, 0, "{name} {kind}: {c:?}");
            assert_eq!(c.stat.n, m.raw.n, "{name} {kind}: {c:?}");
            match row.kind {
                Kind::Ping => {
                    // native's pings beside the run, within its span
                    assert_eq!(m.raw.n, 25, "{name}");
                    assert!(m.native.n >= 1, "{name}: {m:?}");
                    assert!(c.minus_configured.is_some(), "{name}");
                }
                // every attempt of every hop: two per hop, at least five hops
                Kind::Trace => {
                    assert!(m.raw.n >= 10 && m.raw.n % 2 == 0, "{name}: {m:?}");
                    assert!(m.native.n >= 10, "{name}: {m:?}");
                }
            }
            let j = &jl["runtimes"][i]["outcome"]["measured"]["correction"];
            assert!(j.get("corrected").is_some(), "{name} {kind}: {j}");
            let line = format!("| {name} | {kind} | {} |", l.rate);
            let row = text.lines().find(|s| s.starts_with(&line)).unwrap();
            assert!(!row.contains("not corrected"), "{row}");
        }
    }
}
