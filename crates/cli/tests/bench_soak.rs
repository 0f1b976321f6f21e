//! `vtnt bench soak` at CI size, both modes: the engine against the in-process lab under a
//! virtual clock, and the real `vtnt trace` binary against a real lab namespace. Every run
//! must end with every trace written (finding 12 of the safety issue: a campaign that
//! never ended).

mod lab_common;

use lab_common::vtnt;

#[test]
fn simulated_campaigns_all_end() {
    let out = vtnt(&[
        "bench",
        "soak",
        "--runs",
        "2",
        "--targets",
        "3000",
        "--seed",
        "5",
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{table}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(table.contains("| 2 | 2 | 0 |"), "{table}");
}

#[test]
fn real_lab_campaigns_all_end() {
    vtnt_testkit::require_root!("ip");
    let out = vtnt(&[
        "bench",
        "soak",
        "--lab",
        "--runs",
        "2",
        "--targets",
        "1400",
        "--pps",
        "5000",
        "--deadline-secs",
        "120",
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{table}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(table.contains("| 2 | 2 | 0 | 2 |"), "{table}");
}
