//! Changes at run time, end to end with real packets (root): a lab of
//! `topologies/cases/reroute.toml` is traced with `vtnt trace`, a link of its LSP's path
//! is taken down with `vtnt lab change`, the trace shows the new path the lab's truth
//! (`vtnt lab truth --name`) now gives, and the old one once the link is back; an LSP
//! reroute shows in a `vtnt tnt` run as the tunnel's new LSRs. Each change returns only
//! once the daemon applies it, so the traces after it need no waiting; the changes log
//! lists them in order; a refused change fails, says why and is not logged.

mod lab_common;

use serde_json::Value;

use lab_common::{destination, hop_addrs, strs, vtnt, Lab};

const TOPOLOGY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../topologies/cases/reroute.toml"
);

fn change(lab: &Lab, words: &[&str]) -> std::process::Output {
    let mut args = vec!["lab", "change", "--name", &lab.name];
    args.extend_from_slice(words);
    vtnt(&args)
}

fn applied(lab: &Lab, words: &[&str]) {
    let out = change(lab, words);
    assert!(
        out.status.success(),
        "{words:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `vtnt trace` (Paris ICMP, one probe a hop) from the vantage point to `dst`: the
/// addresses that answered, in TTL order.
fn trace(lab: &Lab, dst: &str) -> Vec<String> {
    let out = lab.exec(&[
        lab_common::VTNT,
        "trace",
        "-P",
        "icmp-paris",
        "-q",
        "1",
        "-w",
        "1",
        "-O",
        "json",
        dst,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t: Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|o| o["type"] == "trace")
        .expect("a trace object");
    hop_addrs(&t)
}

/// The truth's forward path to `name` as a trace shows it: each router's address, then
/// the destination.
fn expected(truth: &Value, name: &str) -> Vec<String> {
    let d = destination(truth, name);
    let mut v: Vec<String> = d["forward"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["addr"].as_str().unwrap().to_string())
        .collect();
    v.push(d["dst"].as_str().unwrap().to_string());
    v
}

fn routers(truth: &Value, name: &str) -> Vec<String> {
    destination(truth, name)["forward"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["router"].as_str().unwrap().to_string())
        .collect()
}

/// The changes log of the lab, as its records' `change` fields.
fn logged(lab: &Lab) -> Vec<String> {
    let path = format!("/run/vtnt/lab/{}/changes.jsonl", lab.name);
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["change"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn a_link_down_shows_in_the_next_trace_and_the_truth_and_up_again_restores_both() {
    vtnt_testkit::require_root!("ip");
    let lab = Lab::up("chg", Some(TOPOLOGY));
    let before = lab.truth();
    let dst = destination(&before, "dst")["dst"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        routers(&before, "dst"),
        ["gw", "r1", "r2", "r3", "r4", "r8"]
    );
    assert_eq!(trace(&lab, &dst), expected(&before, "dst"));

    applied(&lab, &["link-down", "r2", "r3"]);
    let after = lab.truth();
    assert_eq!(
        routers(&after, "dst"),
        ["gw", "r1", "r5", "r6", "r7", "r4", "r8"]
    );
    assert_eq!(after["links_down"][0]["prefix"], "100.64.0.8/30");
    assert_eq!(trace(&lab, &dst), expected(&after, "dst"));

    // refused: nothing changes, nothing is logged, the error says why
    let out = change(&lab, &["link-down", "r2", "r3"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the link r2-r3 is already down"), "{err}");
    let out = change(&lab, &["link-down", "r2", "r9"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no router is named \"r9\""), "{err}");

    applied(&lab, &["link-up", "r2", "r3"]);
    assert_eq!(lab.truth(), before);
    assert_eq!(trace(&lab, &dst), expected(&before, "dst"));
    assert_eq!(logged(&lab), ["link-down r2 r3", "link-up r2 r3"]);
}

/// The explicit tunnel `vtnt tnt` finds to `dst`: (ingress, LSRs, egress).
fn tunnel(lab: &Lab, dst: &str) -> (String, Vec<String>, String) {
    let out = lab.exec(&[lab_common::VTNT, "tnt", "-O", "json", "--seed", "1", dst]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t: Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|o| o["type"] == "trace" && o["tnt"]["role"] == "initial")
        .expect("TNT's trace");
    let tunnels = t["tnt"]["tunnels"].as_array().expect("tunnels");
    assert_eq!(tunnels.len(), 1, "{t}");
    assert_eq!(tunnels[0]["class"], "explicit");
    (
        tunnels[0]["ingress"].as_str().unwrap().to_string(),
        strs(&tunnels[0]["lsrs"]),
        tunnels[0]["egress"].as_str().unwrap().to_string(),
    )
}

/// The truth's one tunnel to `name`: (ingress, LSRs, egress).
fn truth_tunnel(truth: &Value, name: &str) -> (String, Vec<String>, String) {
    let t = &destination(truth, name)["tunnels"][0];
    (
        t["ingress"].as_str().unwrap().to_string(),
        strs(&t["lsrs"]),
        t["egress"].as_str().unwrap().to_string(),
    )
}

#[test]
fn an_lsp_reroute_shows_as_the_new_lsrs_of_the_tunnel_tnt_finds() {
    vtnt_testkit::require_root!("ip");
    let lab = Lab::up("rrt", Some(TOPOLOGY));
    let before = lab.truth();
    let dst = destination(&before, "dst")["dst"]
        .as_str()
        .unwrap()
        .to_string();
    let old = truth_tunnel(&before, "dst");
    assert_eq!(old.1.len(), 2);
    assert_eq!(tunnel(&lab, &dst), old);

    applied(&lab, &["lsp-reroute", "core", "r5,r6,r7"]);
    let after = lab.truth();
    let new = truth_tunnel(&after, "dst");
    assert_eq!(
        destination(&after, "dst")["tunnels"][0]["lsr_routers"],
        serde_json::json!(["r5", "r6", "r7"])
    );
    assert_eq!(tunnel(&lab, &dst), new);

    // a reroute over a link that does not exist is refused and changes nothing
    let out = change(&lab, &["lsp-reroute", "core", "r2,r6"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no link joins \"r2\" and \"r6\""), "{err}");
    assert_eq!(lab.truth(), after);

    applied(&lab, &["lsp-up", "core"]);
    assert_eq!(lab.truth(), before);
    assert_eq!(tunnel(&lab, &dst), old);
    assert_eq!(logged(&lab), ["lsp-reroute core r5,r6,r7", "lsp-up core"]);
}

#[test]
fn a_change_to_a_lab_that_is_not_running_says_so() {
    vtnt_testkit::require_root!("ip");
    let out = vtnt(&[
        "lab",
        "change",
        "--name",
        "vt-nosuchlab",
        "link-down",
        "a",
        "b",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lab `vt-nosuchlab` takes no changes"), "{err}");
    // bad text is refused before anything is sent
    let out = vtnt(&[
        "lab",
        "change",
        "--name",
        "vt-nosuchlab",
        "link-sideways",
        "a",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad change"), "{err}");
}
