//! The same TNT campaign twice: in-process against the lab core under a virtual clock,
//! and through the real CLI and raw sockets against the lab's TUN front, to every
//! destination and its IPv6 twin. The annotations (tunnels, roles, triggers, revelation,
//! signatures) must be the same; only times differ.

mod lab_common;

use serde_json::Value;
use vtnt_tnt::TntConfig;

/// Drops every field that depends on time (RTTs), recursively.
fn timeless(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.contains("rtt"))
                .map(|(k, v)| (k.clone(), timeless(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(timeless).collect()),
        v => v.clone(),
    }
}

#[test]
fn cli_through_tun_equals_in_process_run() {
    vtnt_testkit::require_root!("ip");
    let lab = lab_common::Lab::up("tntx", None);
    let v4 = lab.destinations();
    assert!(
        v4.len() >= 6,
        "reference topology has a destination per class"
    );
    // and their IPv6 twins in the same campaign (TNT over IPv6, issue 38)
    let twins = v4
        .iter()
        .map(|t| vtnt_lab::addr::to_v6(t.parse().unwrap()).to_string());
    let targets: Vec<String> = v4.iter().cloned().chain(twins).collect();

    // The in-process run's engine seed (1): the same probe flows, so the same ECMP paths.
    let mut args = vec![
        lab_common::VTNT,
        "tnt",
        "-O",
        "json",
        "--pps",
        "1000",
        "--seed",
        "1",
    ];
    args.extend(targets.iter().map(String::as_str));
    let out = lab.exec(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let native: Vec<(String, Value, Vec<Value>)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|o| o["type"] == "trace" && o["tnt"]["role"] == "initial")
        .map(|t| {
            let hops = t["hops"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| timeless(&h["tnt"]))
                .collect();
            (
                t["dst"].as_str().unwrap().to_string(),
                timeless(&t["tnt"]),
                hops,
            )
        })
        .collect();
    assert_eq!(native.len(), targets.len());
    for (dst, ann, _) in &native {
        let lab_only = dst.contains(':').then_some("lab-only");
        assert_eq!(ann["validated"].as_str(), lab_only, "{dst}: {ann}");
    }

    let mut sim = vtnt_lab::Lab::new(vtnt_lab::Topology::reference());
    let addrs: Vec<std::net::IpAddr> = targets.iter().map(|t| t.parse().unwrap()).collect();
    let run =
        vtnt_bench::run_tnt(&mut sim, &addrs, TntConfig::default(), 1).expect("in-process run");
    for r in &run.results {
        let dst = r.target.to_string();
        let (_, trace_ann, hops) = native
            .iter()
            .find(|(d, _, _)| *d == dst)
            .expect("same targets");
        let ours = timeless(&serde_json::to_value(r.trace_annotation()).unwrap());
        assert_eq!(&ours, trace_ann, "{dst}: trace annotation differs");
        let ours_hops: Vec<Value> = r
            .hops
            .iter()
            .map(|h| timeless(&serde_json::to_value(h).unwrap()))
            .collect();
        assert_eq!(&ours_hops, hops, "{dst}: hop annotations differ");
        // every class of the reference topology shows up somewhere
    }
    let classes: std::collections::BTreeSet<String> = native
        .iter()
        .flat_map(|(_, t, _)| t["tunnels"].as_array().cloned().unwrap_or_default())
        .map(|t| t["class"].as_str().unwrap_or("").to_string())
        .collect();
    for c in [
        "explicit",
        "implicit",
        "opaque",
        "invisible-php",
        "invisible-uhp",
    ] {
        assert!(
            classes.contains(c),
            "no {c} tunnel found through the TUN front: {classes:?}"
        );
    }
}

/// A run longer than 10 s with stderr not a terminal says how it stands every 10 s
/// (targets done, probes, replies, ETA); `--quiet` says nothing but the summary.
#[test]
fn a_long_run_reports_progress_unless_quiet() {
    vtnt_testkit::require_root!("ip");
    let lab = lab_common::Lab::up("prog", None);
    let targets = lab.destinations();
    let run = |quiet: bool| {
        let mut args = vec![lab_common::VTNT, "tnt", "--pps", "10", "--seed", "4"];
        if quiet {
            args.push("--quiet");
        }
        args.extend(targets.iter().map(String::as_str));
        let o = lab.exec(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let (loud, quiet) = std::thread::scope(|s| {
        let loud = s.spawn(|| run(false));
        let quiet = s.spawn(|| run(true));
        (loud.join().unwrap(), quiet.join().unwrap())
    });
    let n = targets.len();
    let status: Vec<&str> = loud
        .lines()
        .filter(|l| l.contains(" probes sent, "))
        .collect();
    assert!(!status.is_empty(), "no progress line in:\n{loud}");
    let prefix = format!("/{n} targets, ");
    assert!(
        status
            .iter()
            .all(|l| l.starts_with("vtnt: ") && l.contains(&prefix)),
        "{status:?}"
    );
    assert!(!quiet.contains(" probes sent, "), "{quiet}");
    assert!(
        quiet.contains(&format!("vtnt: {n} targets: tunnels")),
        "{quiet}"
    );
}
