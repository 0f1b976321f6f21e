//! TNT against the lab's ground truth: the reference topology and at least 100 generated
//! topologies, seeds drawn at random by the test and printed (rerun one with
//! `VTNT_ACCURACY_SEED=<seed>`; `VTNT_ACCURACY_TOPOLOGIES=<n>` changes the count).

use vtnt_bench::{tnt_accuracy, AccuracyOptions, AccuracyReport};

fn seed() -> u64 {
    match std::env::var("VTNT_ACCURACY_SEED") {
        Ok(s) => s.parse().expect("VTNT_ACCURACY_SEED must be a u64"),
        Err(_) => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            t ^ (std::process::id() as u64).rotate_left(32)
        }
    }
}

fn check(report: &AccuracyReport) {
    println!("{}", report.to_markdown());
    for m in &report.misses {
        println!("miss: {m}");
    }
    let seed = report.seed;
    for c in &report.classes {
        if matches!(c.class, "explicit" | "implicit" | "opaque") {
            assert_eq!(
                c.detected_detectable, c.detectable,
                "every detectable {} tunnel detected (seed {seed})",
                c.class
            );
        }
        assert_eq!(
            c.correct, c.reported,
            "every reported {} tunnel matches a truth tunnel of its class (seed {seed})",
            c.class
        );
    }
    let h = &report.hidden;
    assert!(
        h.possible.share >= 0.95,
        "hidden LSRs revealed where the truth says revelation is possible: {:.3} < 0.95 (seed {seed})",
        h.possible.share
    );
    let b = report.brute_force.as_ref().expect("brute-force run");
    assert_eq!(
        b.false_tunnels_on_mpls_free_paths, 0,
        "brute force false tunnels (seed {seed})"
    );
    assert_eq!(
        report.false_tunnels_on_mpls_free_paths, 0,
        "false tunnels (seed {seed})"
    );
    assert_eq!(
        report.routers.signature_wrong, 0,
        "wrong signatures (seed {seed})"
    );
}

#[test]
fn reference_topology() {
    let opts = AccuracyOptions::new(0, 0);
    let report = tnt_accuracy(&opts).expect("campaign runs");
    check(&report);
    // The reference topology has one tunnel of every class.
    for c in &report.classes {
        assert!(c.truth >= 1, "reference has a {} tunnel", c.class);
    }
}

#[test]
fn generated_topologies() {
    let seed = seed();
    let n = std::env::var("VTNT_ACCURACY_TOPOLOGIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    println!(
        "tnt-accuracy seed {seed} ({n} generated topologies); rerun with VTNT_ACCURACY_SEED={seed}"
    );
    let mut opts = AccuracyOptions::new(n, seed);
    opts.reference = false;
    let report = tnt_accuracy(&opts).expect("campaign runs");
    check(&report);
}
