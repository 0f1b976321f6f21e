//! `vtnt bench rtt` end to end at a small N on a lab of its own: runc (captured on the
//! lab's TUN) and spt (its host side not captured), with no load. Exact
//! behaviour only, no timing thresholds (the figures are the benchmark's): the load has
//! its noise floor with every native reply paired by the lab-side capture, the configured
//! round trip is the emulator's, runc has a corrected RTT for every reply, spt has its raw
//! rows and says it is not corrected and why, in the JSON and the text. Needs root, runc,
//! cgroup v1 and the installed static vtnt; skipped through vtnt-testkit otherwise.

mod common;

use std::net::Ipv4Addr;

use vtnt_evaluation::rtt::{
    bench_rtt, configured_rtt_us, report, BenchRttArgs, Correction, Outcome,
};
use vtnt_lab::Topology;
use vtnt_runtimes::Runtime;

const TEST: &str = "rtt";

#[test]
fn runc_is_corrected_spt_says_why_not_and_the_noise_floor_pairs_every_reply() {
    vtnt_testkit::require_root!("runc", "ip");
    if !common::basics_ready(TEST) {
        return;
    }
    let target = Ipv4Addr::new(203, 0, 113, 10);
    let args = BenchRttArgs {
        runtimes: vec![Runtime::Runc, Runtime::Spt],
        loads: vec![0],
        load_size: 200,
        count: 8,
        interval_ms: 20,
        target,
        topology: None,
        json: true,
    };
    // the installed tree's vtnt (bin/vtnt beside lib/vtnt/vtnt-static): `run` and `lab`
    let lib = std::fs::canonicalize(vtnt_runtimes::paths::static_vtnt().unwrap()).unwrap();
    let exe = lib.ancestors().nth(3).unwrap().join("bin/vtnt");
    let r = bench_rtt(&args, &exe).unwrap();
    let configured = configured_rtt_us(&Topology::reference(), target).unwrap();
    assert_eq!(r.configured_us, configured);
    assert_eq!(r.loads.len(), 1);
    assert_eq!(r.loads[0].sent, 0);
    let text = report::markdown(&r);
    let json = serde_json::to_value(&r).unwrap();
    for (l, jl) in r.loads.iter().zip(json["loads"].as_array().unwrap()) {
        let f = &l.floor;
        assert_eq!(f.replies, 8, "{f:?}");
        if f.drops == 0 {
            assert_eq!(
                f.paired, f.replies,
                "every native reply on the capture: {f:?}"
            );
        }
        assert_eq!(l.native.n, 8);
        assert_eq!(l.runtimes.len(), 2);
        let Outcome::Measured(runc) = &l.runtimes[0].outcome else {
            panic!("runc: {:?}", l.runtimes[0])
        };
        let Correction::Corrected(c) = &runc.correction else {
            panic!("runc not corrected: {runc:?}")
        };
        assert_eq!((c.stat.n, c.refused), (8, 0), "{c:?}");
        let Outcome::Measured(spt) = &l.runtimes[1].outcome else {
            panic!("spt: {:?}", l.runtimes[1])
        };
        assert_eq!(spt.raw.n, 8);
        let Correction::NotCorrected(why) = &spt.correction else {
            panic!("spt labelled corrected: {spt:?}")
        };
        assert!(why.starts_with("spt: "), "{why}");
        let spt_json = &jl["runtimes"][1]["outcome"]["measured"]["correction"];
        assert_eq!(spt_json["not_corrected"], why.as_str(), "{spt_json}");
        assert!(spt_json.get("corrected").is_none());
        let line = format!("| spt | {} |", l.rate);
        let row = text.lines().find(|s| s.starts_with(&line)).unwrap();
        assert!(row.contains(&format!("not corrected: {why}")), "{row}");
    }
}
