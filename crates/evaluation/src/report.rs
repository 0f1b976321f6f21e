//! The report of `bench_deploy`: `report.md` (tables in the order of the
//! paper's Figs. 4-8, ratios against Docker (Debian) and the full VM, the conditions,
//! which numbers come from TCG emulation), `report.json` (everything), and the figures
//! ([`crate::plot`]).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;

use vtnt_stats::mean_sd;

use crate::results::{DensityResult, Report, RuntimeReport};

fn mib(b: u64) -> f64 {
    b as f64 / 1048576.0
}

/// `x / y` as "N.Nx", or "-" when either is missing.
fn ratio(x: Option<f64>, y: Option<f64>) -> String {
    match (x, y) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => format!("{:.1}x", a / b),
        _ => "-".into(),
    }
}

fn find<'a>(rep: &'a Report, name: &str) -> Option<&'a RuntimeReport> {
    rep.runtimes
        .iter()
        .find(|r| r.runtime == name && r.skipped.is_none())
}

/// Whether a runtime's value of a density metric is only a lower bound (capped).
fn capped(r: &RuntimeReport, which: &str) -> bool {
    let d = match which {
        "dens_mem" => &r.density_memory,
        "dens_cpu" => &r.density_cpu,
        _ => return false,
    };
    d.as_ref().is_some_and(|d| d.capped())
}

/// `ratio(x, y)` where `x` or `y` may be a lower bound: `>=` when only `x` is, `<=` when
/// only `y` is, unknown when both are.
fn bounded_ratio(x: (Option<f64>, bool), y: (Option<f64>, bool)) -> String {
    let r = ratio(x.0, y.0);
    match (x.1, y.1) {
        _ if r == "-" => r,
        (true, true) => format!("? (both capped; {r} at the caps)"),
        (true, false) => format!(">= {r}"),
        (false, true) => format!("<= {r}"),
        (false, false) => r,
    }
}

/// Per-runtime values of one metric, for ratios.
fn metric(r: &RuntimeReport, which: &str) -> Option<f64> {
    let totals: Vec<f64> = r.reps.iter().map(|x| x.total_s()).collect();
    let cpu: Vec<f64> = r.reps.iter().map(|x| x.cpu_s).collect();
    match which {
        "size" => (r.image_bytes > 0).then_some(r.image_bytes as f64),
        "mem" => r.memory.map(|m| m.late_mib),
        "mem_ksm" => r.memory_ksm.or(r.memory).map(|m| m.late_mib),
        "time" => mean_sd(&totals).map(|m| m.0),
        "cpu" => mean_sd(&cpu).map(|m| m.0),
        "dens_mem" => r.density_memory.as_ref().map(|d| f64::from(d.peak)),
        "dens_cpu" => r.density_cpu.as_ref().map(|d| f64::from(d.peak)),
        _ => None,
    }
}

/// Writes report.md, report.json and the figures into `out`; records the files.
pub fn write(rep: &mut Report, out: &Path) -> anyhow::Result<()> {
    let figs = crate::plot::all(rep, out)?;
    rep.files.extend(figs);
    write_md_json(rep, out, "report", markdown, |r| &mut r.files)
}

/// Writes `<stem>.md` (`markdown` of `rep`) and `<stem>.json` (all of `rep`, its list of
/// files, `files`, already naming both) into `out`.
pub(crate) fn write_md_json<R: serde::Serialize>(
    rep: &mut R,
    out: &Path,
    stem: &str,
    markdown: fn(&R) -> String,
    files: fn(&mut R) -> &mut Vec<std::path::PathBuf>,
) -> anyhow::Result<()> {
    let md_path = out.join(format!("{stem}.md"));
    std::fs::write(&md_path, markdown(rep))
        .with_context(|| format!("writing {}", md_path.display()))?;
    let json_path = out.join(format!("{stem}.json"));
    files(rep).extend([md_path, json_path.clone()]);
    std::fs::write(&json_path, serde_json::to_vec_pretty(rep)?)
        .with_context(|| format!("writing {}", json_path.display()))
}

/// The markdown report.
pub fn markdown(rep: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# vtnt bench deploy\n");
    let _ = writeln!(
        s,
        "Host: {}. Job: `vtnt {}`. {} repetitions. Image server: {} Mbit/s on 127.0.0.1. QEMU accelerators: **{}**.\n",
        rep.host, rep.job, rep.reps, rep.bandwidth_mbps, rep.accel
    );
    let _ = writeln!(
        s,
        "cgroups: `favordynmods` {} (joining a cgroup {}).\n",
        if rep.cgroup_favordynmods { "on" } else { "off" },
        if rep.cgroup_favordynmods {
            "takes microseconds"
        } else {
            "waits for an RCU grace period: `--favordynmods`"
        }
    );
    let _ = writeln!(s, "Provenance:\n\n{}", rep.provenance.markdown());
    if let Some(note) = &rep.accel_note {
        let _ = writeln!(s, "> {note}.\n");
    }
    if rep.runtimes.iter().any(|r| r.emulated) {
        let _ = writeln!(s, "> Rows marked (TCG) ran under QEMU's TCG emulator: their times, CPU and density are emulation figures, far worse than under KVM. Their memory includes QEMU's TCG translation buffer (hundreds of MiB for a Linux guest), which KVM does not have; image sizes are not affected. Ratios between a (TCG) row and a (KVM) or (PVM-KVM) row mix accelerators.\n");
    }
    let tag = |r: &RuntimeReport| {
        r.accel
            .as_ref()
            .map_or(String::new(), |a| format!(" ({a})"))
    };
    let _ = writeln!(
        s,
        "## Fig. 4: image size\n\n| runtime | image | download | what |\n|---|---:|---:|---|"
    );
    for r in &rep.runtimes {
        if let Some(why) = &r.skipped {
            let _ = writeln!(
                s,
                "| {} | skipped | | {} |",
                r.label,
                why.lines().next().unwrap_or("")
            );
            continue;
        }
        let _ = writeln!(
            s,
            "| {} | {:.2} MiB | {:.2} MiB | {} |",
            r.label,
            mib(r.image_bytes),
            mib(r.download_bytes),
            r.image_note
        );
    }
    let _ = writeln!(s, "\n## Fig. 5: memory of one instance (PSS of its processes and its engine's, MiB)\n\n| runtime | running | peak | with KSM | KSM pages_sharing |\n|---|---:|---:|---:|---:|");
    for r in rep.runtimes.iter().filter(|r| r.skipped.is_none()) {
        let m = r
            .memory
            .map_or("-".into(), |m| format!("{:.1}", m.late_mib));
        let p = r
            .memory
            .map_or("-".into(), |m| format!("{:.1}", m.peak_mib));
        let k = r
            .memory_ksm
            .map_or("-".into(), |m| format!("{:.1}", m.late_mib));
        let c = r
            .memory_ksm
            .and_then(|m| m.ksm)
            .map_or("-".into(), |c| c.pages_sharing.to_string());
        let _ = writeln!(s, "| {}{} | {m} | {p} | {k} | {c} |", r.label, tag(r));
    }
    let reps = match rep.vm_reps {
        Some(v) => format!("{} reps, the VM {v}", rep.reps),
        None => format!("{} reps", rep.reps),
    };
    let _ = writeln!(s, "\n## Figs. 6, 7: deploy + execution time and CPU ({reps}, mean ± sd)\n\n| runtime | deploy s | execution s | cleanup s | total s | CPU s | spawn -> first probe ms (median) | of which cgroup join ms | ok | same output as native |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rep.runtimes.iter().filter(|r| r.skipped.is_none()) {
        let f = |v: Vec<f64>| {
            let (m, sd) = mean_sd(&v).unwrap_or_default();
            format!("{m:.2} ± {sd:.2}")
        };
        let ok = r.reps.iter().filter(|x| x.ok).count();
        let same = r.reps.iter().filter(|x| x.same_as_native).count();
        let median = |v: fn(&crate::results::Rep) -> Option<f64>| {
            let mut x: Vec<f64> = r.reps.iter().filter_map(v).collect();
            x.sort_by(f64::total_cmp);
            x.get(x.len() / 2).map_or("-".into(), |m| format!("{m:.2}"))
        };
        let first = median(|x| x.first_probe_ms);
        let join = median(|x| x.cgroup_join_ms);
        let _ = writeln!(
            s,
            "| {}{} | {} | {} | {} | {} | {} | {first} | {join} | {ok}/{n} | {same}/{n} |",
            r.label,
            tag(r),
            f(r.reps.iter().map(|x| x.deploy_s).collect()),
            f(r.reps.iter().map(|x| x.exec_s).collect()),
            f(r.reps.iter().map(|x| x.cleanup_s).collect()),
            f(r.reps.iter().map(|x| x.total_s()).collect()),
            f(r.reps.iter().map(|x| x.cpu_s).collect()),
            n = r.reps.len()
        );
    }
    let _ = writeln!(s, "\n## Fig. 8: instances alive and working at once within a budget\n\nMemory: {}. CPU: {} (the paper's 4 of 16 cores at 25 %; here a quarter of this machine: one core of two, at 50 %). A ramp starts an instance once the one before has printed its result (and at least 0.1 s after it), each a one-hop trace then a hold that outlasts the ramp (idle in the memory budget; in the CPU budget tracing again every {} s, so that the instances counted keep working), and ends at the first failure (an instance that cannot start, exits, prints no result in time, or in the CPU budget falls more than a round behind; in either budget also the group plus the daemons' share passing it). The figure is the most instances alive and working at once. Daemons a runtime needs outside the group (Docker: dockerd, containerd, the shims; the unikernels' front): their memory growth is charged to the memory budget, their CPU use to the CPU budget, and their share is reported; the lab's network, which every runtime shares, is not charged.\n", rep.memory_budget, rep.cpu_budget, rep.density_every_s);
    let _ = writeln!(s, "| runtime | memory budget | memory + KSM | CPU budget | daemons per instance | memory run ended by | CPU run ended by |\n|---|---:|---:|---:|---:|---|---|");
    let ended = |d: &Option<DensityResult>| {
        d.as_ref()
            .and_then(|d| d.cap.clone().or_else(|| d.first_failure.clone()))
            .unwrap_or_default()
            .replace('|', "/")
            .chars()
            .take(160)
            .collect::<String>()
    };
    for r in rep.runtimes.iter().filter(|r| r.skipped.is_none()) {
        let d = |x: &Option<DensityResult>| {
            x.as_ref().map_or("-".into(), |d| {
                format!("{}{}", d.peak, if d.capped() { "+" } else { "" })
            })
        };
        let daemons = [&r.density_memory, &r.density_cpu]
            .iter()
            .find_map(|d| d.as_ref().and_then(|d| d.daemons.clone()))
            .map_or("-".into(), |x| {
                format!(
                    "{:.1} MiB, {:.2} CPU s",
                    x.mem_mib_per_instance, x.cpu_secs_per_instance
                )
            });
        let _ = writeln!(
            s,
            "| {}{} | {} | {} | {} | {} | {} | {} |",
            r.label,
            tag(r),
            d(&r.density_memory),
            d(&r.density_memory_ksm),
            d(&r.density_cpu),
            daemons,
            ended(&r.density_memory),
            ended(&r.density_cpu)
        );
    }
    let _ = writeln!(
        s,
        "\n`N+`: capped: the ramp ended without a failure (its limit, a slot limit of the lab, or the host's memory, as said); the real density is higher.\n"
    );
    // The VM / vTNT column says so when its two runtimes ran under different accelerators.
    let accel = |n: &str| find(rep, n).and_then(|r| r.accel.clone());
    let vm_col = match (accel("vm"), accel("microvm")) {
        (Some(a), Some(b)) if a != b => format!("VM ({a}) / vTNT ({b}): mixed accelerators"),
        (Some(a), Some(_)) => format!("VM / vTNT ({a})"),
        _ => "VM / vTNT".into(),
    };
    let _ = writeln!(s, "## Ratios (the paper's: vTNT vs Docker / Vagrant VM)\n\n| metric | paper | Docker / vTNT | {vm_col} | Docker / scratch | Docker / runc |\n|---|---|---:|---:|---:|---:|");
    let micro = find(rep, "microvm");
    let rows = [
        ("image size", "size", "430x / 1170x smaller", false),
        ("memory", "mem", "7.2x / 32x less", false),
        ("memory with KSM", "mem_ksm", "17x / 74x less", false),
        (
            "deploy + execution time",
            "time",
            "2.4x / 13x faster",
            false,
        ),
        ("CPU time", "cpu", "less than both", false),
        (
            "instances in the memory budget",
            "dens_mem",
            "5x / 53x more",
            true,
        ),
        (
            "instances in the CPU budget",
            "dens_cpu",
            "3x / 81x more",
            true,
        ),
    ];
    for (name, key, paper, inverse) in rows {
        let get =
            |n: &str| find(rep, n).map_or((None, false), |r| (metric(r, key), capped(r, key)));
        let v = micro.map_or((None, false), |r| (metric(r, key), capped(r, key)));
        let q = |other, base| {
            if inverse {
                bounded_ratio(base, other)
            } else {
                bounded_ratio(other, base)
            }
        };
        let _ = writeln!(
            s,
            "| {name} | {paper} | {} | {} | {} | {} |",
            q(get("docker"), v),
            q(get("vm"), v),
            q(get("docker"), get("docker-scratch")),
            q(get("docker"), get("runc"))
        );
    }
    let _ = writeln!(
        s,
        "\nRatios are > 1 when the first runtime costs more (or fits fewer instances).\n"
    );
    let errs: Vec<String> = rep
        .runtimes
        .iter()
        .flat_map(|r| {
            r.errors
                .iter()
                .map(move |e| format!("- {}: {}", r.runtime, e.replace('\n', " ")))
        })
        .collect();
    if !errs.is_empty() {
        let _ = writeln!(s, "## Errors\n\n{}\n", errs.join("\n"));
    }
    let retried: Vec<String> = rep
        .runtimes
        .iter()
        .flat_map(|r| {
            r.retried
                .iter()
                .map(move |e| format!("- {}: {}", r.runtime, e.replace('\n', " ")))
        })
        .collect();
    if !retried.is_empty() {
        let _ = writeln!(
            s,
            "## Retried after a timeout (the figures are the retry's)\n\n{}\n",
            retried.join("\n")
        );
    }
    let _ = writeln!(s, "## Figures\n\n![Fig. 4](fig4_image_size.png)\n![Fig. 5](fig5_memory.png)\n![Fig. 6](fig6_time.png)\n![Fig. 7](fig7_cpu.png)\n![Fig. 8](fig8_density.png)\n![Fig. 8a](fig8a_memory_timeline.png)\n![Fig. 8c](fig8c_working_timeline.png)\n![Fig. 8b](fig8b_cpu_timeline.png)");
    s
}
