//! The report of `bench_micro`: `micro.md` (one table of means ± sd in seed 001's layout,
//! Figs. 3-5 merged, with the seeds' rows under ours, which accelerator each row ran on,
//! and what was not measured and why), `micro.json` (everything) and one bar chart per
//! measurement (`micro_*.png`, the seeds' rows in grey beside ours).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::data::{stat, MicroReport, RowReport, Sd, SeedRow, EL_KABIR, SEED_001};
use crate::plot::{self, Bar, BarChart, Group, Unit};

/// The table's measurements: column title, figure file and title, unit of the figure,
/// how to read a row of ours (in the table's unit) and a seed's row, and the factor from
/// the table's unit to the figure's.
struct Measure {
    column: &'static str,
    figure: &'static str,
    title: &'static str,
    ylabel: &'static str,
    unit: Unit,
    to_figure: f64,
    decimals: usize,
    ours: fn(&RowReport) -> Sd,
    seed: fn(&SeedRow) -> Sd,
}

fn ns(v: &[f64]) -> Sd {
    stat(v)
}

fn mib(r: &RowReport) -> Sd {
    (r.image_bytes > 0).then_some((r.image_bytes as f64 / 1048576.0, 0.0))
}

const MEASURES: [Measure; 7] = [
    Measure {
        column: "boot + shutdown (ms)",
        figure: "micro_boot.png",
        title: "Boot + shutdown (empty job, spawn to exit)",
        ylabel: "seconds",
        unit: Unit::Seconds,
        to_figure: 1e-3,
        decimals: 2,
        ours: |r| ns(&r.boot_ms),
        seed: |s| s.boot_ms,
    },
    Measure {
        column: "CPU: fib (ns)",
        figure: "micro_cpu.png",
        title: "CPU: one iterative fib(n)",
        ylabel: "ns",
        unit: Unit::Nanoseconds,
        to_figure: 1.0,
        decimals: 2,
        ours: |r| ns(&r.fib_ns),
        seed: |s| s.fib_ns,
    },
    Measure {
        column: "\"system call\" (ns)",
        figure: "micro_syscall.png",
        title: "\"System call\" (the cheapest call that leaves the program)",
        ylabel: "ns",
        unit: Unit::Nanoseconds,
        to_figure: 1.0,
        decimals: 2,
        ours: |r| ns(&r.syscall_ns),
        seed: |s| s.syscall_ns,
    },
    Measure {
        column: "function call (ns)",
        figure: "micro_funcall.png",
        title: "Function call",
        ylabel: "ns",
        unit: Unit::Nanoseconds,
        to_figure: 1.0,
        decimals: 2,
        ours: |r| ns(&r.funcall_ns),
        seed: |s| s.funcall_ns,
    },
    Measure {
        column: "clock gap (us)",
        figure: "micro_clock.png",
        title: "Gap between two reads of the clock",
        ylabel: "ns",
        unit: Unit::Nanoseconds,
        to_figure: 1e3,
        decimals: 3,
        ours: |r| stat(&r.clock_ns.iter().map(|v| v / 1e3).collect::<Vec<_>>()),
        seed: |s| s.clock_us,
    },
    Measure {
        column: "image (MiB)",
        figure: "micro_image.png",
        title: "Image size",
        ylabel: "MiB",
        unit: Unit::MiB,
        to_figure: 1.0,
        decimals: 2,
        ours: mib,
        seed: |s| s.image_mib.map(|v| (v, 0.0)),
    },
    Measure {
        column: "peak memory, cgroup (MiB)",
        figure: "micro_memory.png",
        title: "Peak memory while the loops run (the instance's cgroup)",
        ylabel: "MiB",
        unit: Unit::MiB,
        to_figure: 1.0,
        decimals: 2,
        ours: |r| stat(&r.peak_mib),
        seed: |s| s.memory_mib.map(|v| (v, 0.0)),
    },
];

/// `mean ± sd` at `decimals`, `-` when not measured.
fn cell(v: Sd, decimals: usize) -> String {
    match v {
        Some((m, sd)) if sd > 0.0 => format!("{m:.decimals$} ± {sd:.decimals$}"),
        Some((m, _)) => format!("{m:.decimals$}"),
        None => "-".into(),
    }
}

/// Writes micro.md, micro.json and the figures into `out`; records the files.
pub fn write(rep: &mut MicroReport, out: &Path) -> anyhow::Result<()> {
    let figs = figures(rep, out);
    rep.files.extend(figs);
    crate::report::write_md_json(rep, out, "micro", markdown, |r| &mut r.files)
}

/// The markdown report.
pub fn markdown(rep: &MicroReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# vtnt bench micro\n");
    let _ = writeln!(
        s,
        "Seed 001's micro-benchmarks in every runtime: {} repetitions of each measurement; the CPU loop computes fib({}) and, like the function-call and clock loops, runs {} times per repetition; {} \"system calls\" per repetition. Values are mean ± sd over the repetitions, per iteration. What the \"system call\" is in each runtime: docs/benchmarks.md.\n",
        rep.reps, rep.fib, rep.calls, rep.syscalls
    );
    let _ = writeln!(s, "Provenance:\n\n{}", rep.provenance.markdown());
    if rep.rows.iter().any(|r| r.emulated) {
        let _ = writeln!(s, "> Rows that ran on TCG ran under QEMU's emulator: their times are emulation figures, not a guest's on KVM.\n");
    }
    let head: Vec<&str> = MEASURES.iter().map(|m| m.column).collect();
    let _ = writeln!(
        s,
        "| runtime | runs on | \"system call\" | {} |\n|---|---|---|{}",
        head.join(" | "),
        "---:|".repeat(head.len())
    );
    for r in rep.rows.iter().filter(|r| r.measured()) {
        let cells: Vec<String> = MEASURES
            .iter()
            .map(|m| cell((m.ours)(r), m.decimals))
            .collect();
        let _ = writeln!(
            s,
            "| {} (`{}`) | {} | {} | {} |",
            r.label,
            r.row,
            r.accel,
            r.syscall.as_deref().unwrap_or("-"),
            cells.join(" | ")
        );
    }
    for (seed, note) in SEED_001
        .iter()
        .map(|x| (x, "QEMU+KVM"))
        .chain(EL_KABIR.iter().map(|x| (x, "-")))
    {
        let cells: Vec<String> = MEASURES
            .iter()
            .map(|m| cell((m.seed)(seed), m.decimals))
            .collect();
        let _ = writeln!(
            s,
            "| *{}* | {note} | {} | {} |",
            seed.name,
            if seed.syscall_ns.is_some() {
                "close(3)"
            } else {
                "-"
            },
            cells.join(" | ")
        );
    }
    let _ = writeln!(
        s,
        "\nThe seeds' rows: seed 001 (Cheekhooree 2022, Figs. 3-5: 100 runs, C at `-O0`, loops of a million, QEMU 4.2 with KVM on a Ryzen 7 5700U; image: the system-call program's) and El-Kabir's figures in its annex (Fig. 6: no fib (his CPU test was a sort), no clock gap; the VM's boot is its later boots', 2.17 s, the first took 24 s). Ours are built optimised (release), the seeds' at `-O0`: CPU and function-call figures compare code generation as much as runtimes.\n"
    );
    let missing: Vec<&RowReport> = rep.rows.iter().filter(|r| !r.measured()).collect();
    if !missing.is_empty() {
        let _ = writeln!(s, "## Not measured\n");
        for r in missing {
            let why = r.skipped.clone().unwrap_or_else(|| r.errors.join("; "));
            let _ = writeln!(s, "- `{}`: {}", r.row, one_line(&why));
        }
        let _ = writeln!(s);
    }
    let failed: Vec<&RowReport> = rep
        .rows
        .iter()
        .filter(|r| r.measured() && !r.errors.is_empty())
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(s, "## Repetitions that failed\n");
        for r in failed {
            for e in &r.errors {
                let _ = writeln!(s, "- `{}`: {}", r.row, one_line(e));
            }
        }
        let _ = writeln!(s);
    }
    let figs: Vec<String> = rep
        .files
        .iter()
        .filter_map(|f| f.file_name()?.to_str())
        .filter(|n| n.ends_with(".png"))
        .map(|n| format!("![]({n})"))
        .collect();
    if !figs.is_empty() {
        let _ = writeln!(s, "## Figures\n\n{}\n", figs.join("\n"));
    }
    s
}

/// `s` on one line (a table cell or list item), shortened.
fn one_line(s: &str) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(400) {
        Some((i, _)) => format!("{}...", &flat[..i]),
        None => flat,
    }
}

/// One bar chart per measurement (our rows, then the seeds' that have a value, in grey);
/// figures that cannot be drawn are left out with a message.
fn figures(rep: &MicroReport, out: &Path) -> Vec<PathBuf> {
    if let Err(e) = plot::ensure_font() {
        eprintln!("vtnt bench micro: no figures: {e:#}");
        return Vec::new();
    }
    let mut files = Vec::new();
    for m in &MEASURES {
        let bar = |v: Sd| {
            v.map_or(Bar::default(), |(mean, sd)| Bar {
                value: Some(mean * m.to_figure),
                sd: sd * m.to_figure,
                capped: false,
            })
        };
        let mut groups: Vec<Group> = rep
            .rows
            .iter()
            .map(|r| Group {
                runtime: r.row.clone(),
                emulated: r.emulated,
                gap: (!r.measured()).then(|| "not measured".to_string()),
                bars: vec![bar((m.ours)(r))],
            })
            .collect();
        groups.extend(
            SEED_001
                .iter()
                .chain(&EL_KABIR)
                .filter(|x| (m.seed)(x).is_some())
                .map(|x| Group {
                    runtime: x.name.to_string(),
                    emulated: false,
                    gap: None,
                    bars: vec![bar((m.seed)(x))],
                }),
        );
        let path = out.join(m.figure);
        let chart = BarChart {
            title: m.title,
            ylabel: m.ylabel,
            unit: m.unit,
            series: &[],
            groups,
        };
        match chart.draw(&path) {
            Ok(()) => files.push(path),
            Err(e) => eprintln!("vtnt bench micro: figure {}: {e:#}", m.figure),
        }
    }
    files
}
