//! `bench_deploy` end to end at small scale: 2 repetitions of every runtime that can run
//! here (the full VM 1, `--vm-reps`), a reduced density ramp (limit 4: every runtime that fits 4 in the budgets ends
//! capped, and the report must say so), the report and its figures.
//! Needs root; skipped through vtnt-testkit when the basics are missing.

mod common;

use vtnt_evaluation::{bench_deploy, BenchDeployArgs};
use vtnt_runtimes::Runtime;

#[test]
fn small_report_is_complete() {
    let test = "small_report_is_complete";
    if !common::basics_ready(test) {
        return;
    }
    // a runtime this host lacks is left out of the report, through vtnt-testkit
    let runtimes: Vec<Runtime> = Runtime::ALL
        .into_iter()
        .filter(|&rt| match common::runtime_missing(rt) {
            Some(why) => {
                vtnt_testkit::skip_or_fail(test, &format!("{}: {why}", rt.name()), None);
                false
            }
            None => true,
        })
        .collect();
    let lab = common::LabGuard::up("rep").expect("vtnt lab up");
    let out = std::env::temp_dir().join(format!("vtnt-bench-deploy-{}", std::process::id()));
    let args = BenchDeployArgs {
        reps: 2,
        // one boot of the full VM (about a minute under TCG) per rep: the runtimes
        // tests boot it three more times
        vm_reps: Some(1),
        out: out.clone(),
        runtimes: runtimes.clone(),
        lab: lab.name.clone(),
        bandwidth_mbps: 1000,
        hold_secs: 2,
        density_max: 4,
        density_max_vm: 1,
        density_runtimes: runtimes
            .iter()
            .copied()
            .filter(|&r| r != Runtime::Vm)
            .collect(),
        // a guest takes under a minute here; a hung one (retried once) should not cost 15
        timeout_secs: 240,
        ..BenchDeployArgs::default()
    };
    let rep = bench_deploy(&args).expect("bench_deploy");
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    // every report says where its figures come from
    let json = std::fs::read_to_string(out.join("report.json")).expect("report.json");
    assert!(
        md.contains("Provenance:") && md.contains(&rep.provenance.commit),
        "report.md lacks its provenance"
    );
    if runtimes.contains(&Runtime::Vm) {
        assert!(md.contains("(2 reps, the VM 1, mean ± sd)"), "{md}");
    }
    assert!(
        json.contains("\"provenance\"") && json.contains("\"cpu_model\""),
        "{json}"
    );
    for rt in &rep.runtimes {
        if let Some(why) = &rt.skipped {
            vtnt_testkit::skip_or_fail(test, &format!("{}: {why}", rt.runtime), None);
            continue;
        }
        assert!(rt.errors.is_empty(), "{}: {:?}", rt.runtime, rt.errors);
        let reps = if rt.runtime == "vm" { 1 } else { 2 };
        assert_eq!(rt.reps.len(), reps, "{}", rt.runtime);
        assert!(
            rt.reps.iter().all(|r| r.ok && r.same_as_native),
            "{}: {:?}",
            rt.runtime,
            rt.reps
        );
        assert!(
            rt.image_bytes > 0 && rt.memory.is_some_and(|m| m.late_mib > 0.0),
            "{}",
            rt.runtime
        );
        if rt.runtime != "vm" {
            for d in [&rt.density_memory, &rt.density_cpu] {
                let d = d.as_ref().expect("density runs");
                assert!(d.peak >= 1, "{}: {d:?}", rt.runtime);
                // 4 alive and working at once in 1 GiB and a quarter of the machine: every
                // runtime here but the full VM reaches the ramp's limit, which must read
                // as a cap, never as a density
                assert_eq!(d.peak, 4, "{}: {d:?}", rt.runtime);
                assert!(
                    d.cap.as_deref().is_some_and(|c| c.contains("limit of 4")),
                    "{}: at the ramp's limit but not marked capped: {d:?}",
                    rt.runtime
                );
                assert!(
                    d.timeline.iter().any(|x| x.working == 4),
                    "{}: the timeline never shows the 4 working: {d:?}",
                    rt.runtime
                );
            }
            let row = md
                .lines()
                .find(|l| l.starts_with(&format!("| {}", rt.label)) && l.contains("4+"));
            assert!(row.is_some(), "report.md shows no `4+` for {}", rt.label);
        }
        assert!(md.contains(&rt.label), "report.md lacks {}", rt.label);
    }
    common::assert_drawn(
        &out,
        &[
            "fig4_image_size.png",
            "fig5_memory.png",
            "fig6_time.png",
            "fig7_cpu.png",
            "fig8_density.png",
            "fig8c_working_timeline.png",
        ],
    );
    assert!(
        vtnt_evaluation::plot::text_renders().expect("font"),
        "plot text does not render"
    );
    let _ = std::fs::remove_dir_all(&out);
}
