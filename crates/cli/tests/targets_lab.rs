//! Targets checked one by one, in a lab (root): a loopback target is probed from
//! 127.0.0.1 and every other target from its own route's source, whatever their order;
//! the vantage LAN's broadcast and network addresses, multicast, the limited broadcast,
//! 0.0.0.0 and class E are each refused with a line naming the target and why, the rest
//! is probed, and the run exits 2. For `trace`, `ping` and `tnt` alike.

mod lab_common;

use serde_json::Value;

use lab_common::Lab;

/// The lab's vantage point: its address on the vantage LAN 192.0.2.0/24.
const VP: &str = "192.0.2.2";

/// The records of a run's JSON output.
fn records(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .filter(|v| v["type"] == "trace" || v["type"] == "ping")
        .collect()
}

/// The options of a short run of `cmd`.
fn quick(cmd: &str) -> Vec<&str> {
    match cmd {
        "ping" => vec!["ping", "-c", "1", "-i", "0.2", "--pps", "100"],
        _ => vec![cmd, "-q", "1", "-w", "0.5", "--pps", "100"],
    }
}

#[test]
fn a_loopback_target_changes_nothing_for_the_others() {
    vtnt_testkit::require_root!("ip");
    let lab = Lab::up("tgtlo", None);
    for cmd in ["trace", "ping", "tnt"] {
        for order in [["127.0.0.1", "203.0.113.10"], ["203.0.113.10", "127.0.0.1"]] {
            let mut args = vec![lab_common::VTNT];
            args.extend(quick(cmd));
            args.extend(order);
            let o = lab.exec(&args);
            let what = format!("{cmd} {order:?}");
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{what}: {err}");
            let rs = records(&o.stdout);
            // each target's own record (tnt: its initial trace) leaves from its source
            for (dst, src) in [("127.0.0.1", "127.0.0.1"), ("203.0.113.10", VP)] {
                let r = rs
                    .iter()
                    .find(|r| r["dst"] == dst && (cmd != "tnt" || r["tnt"]["role"] == "initial"))
                    .unwrap_or_else(|| panic!("{what}: no record for {dst}: {rs:?}"));
                assert_eq!(r["src"], src, "{what}: {r}");
                let answered = match cmd {
                    "ping" => r["statistics"]["replies"].as_u64().unwrap_or(0) > 0,
                    _ => r["stop_reason"] == "COMPLETED",
                };
                assert!(answered, "{what}: {dst} was not reached: {r}");
            }
            // every measurement of the run (tnt's pings of lab hops too) from the right place
            for r in &rs {
                let loopback = r["dst"].as_str().is_some_and(|d| d.starts_with("127."));
                let want = if loopback { "127.0.0.1" } else { VP };
                assert_eq!(r["src"], want, "{what}: {r}");
            }
        }
    }
}

#[test]
fn addresses_that_are_not_unicast_targets_are_refused_one_by_one() {
    vtnt_testkit::require_root!("ip");
    let lab = Lab::up("tgtbc", None);
    let dir = std::env::temp_dir().join(format!("vtnt-targets-lab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("targets.txt");
    // The vantage LAN's broadcast first: it once failed the whole run before any probe.
    let lines = [
        ("192.0.2.255", "the broadcast address of 192.0.2.0/24"),
        ("203.0.113.10", ""),
        ("192.0.2.0", "the network address of 192.0.2.0/24"),
        ("224.0.0.1", "a multicast address"),
        ("255.255.255.255", "the limited broadcast address"),
        ("0.0.0.0", "the unspecified address"),
        ("240.0.0.1", "reserved (240.0.0.0/4, class E)"),
    ];
    let body: String = lines.iter().map(|(a, _)| format!("{a}\n")).collect();
    std::fs::write(&file, body).unwrap();
    let path = file.to_str().unwrap();
    for cmd in ["trace", "ping", "tnt"] {
        let mut args = vec![lab_common::VTNT];
        args.extend(quick(cmd));
        args.extend(["--targets", path]);
        let o = lab.exec(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{cmd}: refused targets exit 2: {err}"
        );
        for (n, (addr, why)) in lines.iter().enumerate() {
            if why.is_empty() {
                continue;
            }
            let want = format!(
                "vtnt: skipping {path}:{}: target `{addr}`: {addr} is {why}",
                n + 1
            );
            assert!(
                err.lines().any(|l| l.starts_with(&want)),
                "{cmd}: no `{want}` in:\n{err}"
            );
        }
        let rs = records(&o.stdout);
        let initial: Vec<&Value> = rs
            .iter()
            .filter(|r| cmd != "tnt" || r["tnt"]["role"] == "initial")
            .collect();
        assert_eq!(initial.len(), 1, "{cmd}: {rs:?}");
        assert_eq!(initial[0]["dst"], "203.0.113.10", "{cmd}");
        assert_eq!(initial[0]["src"], VP, "{cmd}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
