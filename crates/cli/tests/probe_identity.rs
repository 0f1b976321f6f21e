//! Two `vtnt ping` processes at once to one target in the lab, with their default seeds
//! (the user's experience): raw sockets hand every reply to both, and each must report
//! exactly its own three. Before the seed came from the process and probes carried a tag,
//! both picked the same ICMP ident and each reported six replies, half with wrong RTTs.

mod lab_common;

use std::process::{Command, Stdio};

use serde_json::Value;

#[test]
fn concurrent_pings_each_report_their_own_replies() {
    vtnt_testkit::require_root!("ip");
    let lab = lab_common::Lab::up("ident", None);
    let truth = lab.truth();
    let target = truth["destinations"][0]["dst"]
        .as_str()
        .expect("a destination")
        .to_string();
    assert!(target.starts_with("203.0.113."), "a lab target: {target}");
    let spawn = || {
        Command::new(lab_common::VTNT)
            .args(["lab", "exec", "--name", &lab.name, "--"])
            .args([lab_common::VTNT, "ping", "-c", "3", "-i", "0.5", &target])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running vtnt ping")
    };
    let runs = [spawn(), spawn()];
    for run in runs {
        let out = run.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let ping: Value = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|o| o["type"] == "ping")
            .expect("a ping record");
        let responses = ping["responses"].as_array().expect("responses");
        let mut seqs: Vec<u64> = responses
            .iter()
            .map(|r| r["seq"].as_u64().unwrap())
            .collect();
        seqs.sort();
        assert_eq!(seqs, vec![0, 1, 2], "exactly its own three replies: {ping}");
        assert_eq!(ping["statistics"]["replies"], 3, "{ping}");
    }
}
