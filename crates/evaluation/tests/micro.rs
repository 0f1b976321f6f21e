//! `bench_micro` end to end at small scale: 2 repetitions of the rows that are quick here
//! (native, the unikernel as a process and as a microVM under its default VMM), a row
//! whose VMM is not installed (Firecracker, where it is not) that the report must name
//! without stopping the others, and the report and its figures.
//! Needs root; skipped through vtnt-testkit when the basics are missing.

mod common;

use vtnt_evaluation::{bench_micro, BenchMicroArgs};

#[test]
fn small_micro_report_is_complete() {
    let test = "small_micro_report_is_complete";
    if !common::basics_ready(test) {
        return;
    }
    let mut rows = vec!["native", "spt"];
    if let Some(why) = common::runtime_missing(vtnt_runtimes::Runtime::Microvm) {
        vtnt_testkit::skip_or_fail(test, &format!("microvm: {why}"), None);
    } else {
        rows.push("microvm");
    }
    // a VMM this host lacks (no package installs Firecracker)
    let firecracker = vtnt_unikernel::firecracker::binary().is_none();
    if firecracker {
        rows.push("microvm:firecracker");
    }
    let lab = common::LabGuard::up("mic").expect("vtnt lab up");
    let out = std::env::temp_dir().join(format!("vtnt-bench-micro-{}", std::process::id()));
    let args = BenchMicroArgs {
        reps: 2,
        out: out.clone(),
        runtimes: rows.iter().map(|r| r.parse().unwrap()).collect(),
        lab: lab.name.clone(),
        calls: 100_000,
        syscalls: 1000,
        timeout_secs: 240,
        ..BenchMicroArgs::default()
    };
    let rep = bench_micro(&args).expect("bench_micro");
    let md = std::fs::read_to_string(out.join("micro.md")).expect("micro.md");
    let json = std::fs::read_to_string(out.join("micro.json")).expect("micro.json");
    assert!(
        md.contains("Provenance:") && md.contains(&rep.provenance.commit),
        "micro.md lacks its provenance"
    );
    assert!(json.contains("\"boot_ms\""), "{json}");
    // the seeds' rows beside ours
    for seed in [
        "Unikraft (seed 001)",
        "Hermitux (seed 001)",
        "Nanos (seed 001)",
        "Docker (seed 001)",
    ] {
        assert!(md.contains(seed), "micro.md lacks {seed}");
    }
    if firecracker {
        let fc = rep
            .rows
            .iter()
            .find(|r| r.row == "microvm:firecracker")
            .expect("firecracker row");
        let why = fc.skipped.as_deref().expect("firecracker not measured");
        assert!(why.contains("not installed"), "{why}");
        assert!(
            md.contains("## Not measured") && md.contains("- `microvm:firecracker`: "),
            "micro.md does not say Firecracker is missing:\n{md}"
        );
    }
    for r in rep.rows.iter().filter(|r| r.row != "microvm:firecracker") {
        assert!(
            r.skipped.is_none() && r.errors.is_empty(),
            "{}: {r:?}",
            r.row
        );
        assert!(!r.accel.is_empty(), "{}: no accelerator", r.row);
        for (what, v, lo, hi) in [
            ("boot ms", &r.boot_ms, 0.05, 10_000.0),
            ("fib ns", &r.fib_ns, 1.0, 10_000.0),
            ("syscall ns", &r.syscall_ns, 1.0, 1_000_000.0),
            ("funcall ns", &r.funcall_ns, 0.1, 1000.0),
            ("clock ns", &r.clock_ns, 1.0, 100_000.0),
            ("peak MiB", &r.peak_mib, 0.01, 1024.0),
        ] {
            assert_eq!(v.len(), 2, "{} {what}: {v:?}", r.row);
            assert!(
                v.iter().all(|x| (lo..hi).contains(x)),
                "{} {what} out of {lo}..{hi}: {v:?}",
                r.row
            );
        }
        assert!(r.image_bytes > 0, "{}", r.row);
        let row = md.lines().find(|l| l.contains(&format!("(`{}`)", r.row)));
        assert!(
            row.is_some_and(|l| l.contains(&r.accel) && l.contains(" ± ")),
            "micro.md has no row with mean ± sd and accelerator for {}",
            r.row
        );
    }
    common::assert_drawn(
        &out,
        &[
            "micro_boot.png",
            "micro_cpu.png",
            "micro_syscall.png",
            "micro_funcall.png",
            "micro_clock.png",
            "micro_image.png",
            "micro_memory.png",
        ],
    );
    let _ = std::fs::remove_dir_all(&out);
}
