//! `vtnt bench net`'s report: report.md (provenance, one table per sweep with a row per
//! runtime, family and point naming its accelerator, IPv6 beside IPv4 with their ratio,
//! the seed's published rows, what is missing and why), report.json (every repetition)
//! and the figures (throughput and throughput over native against the swept value, one
//! line per runtime, per family; over IPv6 also throughput over IPv4's).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{Family, NetReport, Point, Sweep};
use crate::plot::{self, Line, Unit};
use crate::row::Row;

/// Seed 004's published TCP_STREAM rows (netperf -s 100 and 1100, -m 131072, 10 s, a
/// 100 Mbit/s cable): (runtime, socket size, Mbit/s, ratio to the local OS).
pub const SEED_ROWS: [(&str, u32, f64, f64); 8] = [
    ("local OS", 100, 4.33, 1.0),
    ("OSv (unikernel)", 100, 4.85, 4.85 / 4.33),
    ("Docker", 100, 3.85, 3.85 / 4.33),
    ("KVM (Ubuntu guest)", 100, 2.99, 2.99 / 4.33),
    ("local OS", 1100, 0.28, 1.0),
    ("OSv (unikernel)", 1100, 0.28, 1.0),
    ("Docker", 1100, 0.28, 1.0),
    ("KVM (Ubuntu guest)", 1100, 0.28, 1.0),
];

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "n/a".into(), f)
}

/// The effective socket buffers of a point's tests (the client's send and receive
/// buffers as Linux set them), `SND/RCV`.
fn effective(p: &Point) -> String {
    let r = p.reps.first();
    match (r.and_then(|r| r.sndbuf), r.and_then(|r| r.rcvbuf)) {
        (Some(s), Some(r)) => format!("{s}/{r}"),
        _ => "n/a".into(),
    }
}

/// The markdown report.
pub fn markdown(rep: &NetReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# vtnt bench net\n");
    let _ = writeln!(
        s,
        "Seed 004's stream study with {} as the driver (netperf is not packaged in Debian: \
         `-w` stands for netperf's `-s`, `-l` for `-m`, `-u -b 0` for UDP_STREAM). \
         {} s per test, {} repetitions. The client runs in a namespace of its own; \
         native, runc and Docker serve `iperf3 -s` in a namespace behind a veth, the \
         unikernel serves its own endpoint (smoltcp) behind a TAP. Each point runs over \
         IPv4, then over IPv6 where the runtime has it (the Linux runtimes' namespace is \
         dual stack; \"Missing\" says why a runtime has no IPv6 row). Ratios are to \
         native at the same point and family of this run, and an IPv6 row's throughput \
         over its IPv4 row's; only ratios compare with the seed's rows. CPU is the \
         endpoint side's cgroup (for a VM: its VMM's threads), per gigabit received.\n",
        if rep.iperf3.is_empty() {
            "iperf3"
        } else {
            &rep.iperf3
        },
        rep.seconds,
        rep.reps
    );
    let _ = writeln!(s, "{}", rep.provenance.markdown());
    for sweep in Sweep::ALL {
        let points: Vec<&Point> = rep.points.iter().filter(|p| p.sweep == sweep).collect();
        if points.is_empty() {
            continue;
        }
        let _ = writeln!(s, "## {}\n", sweep.title());
        let _ = writeln!(
            s,
            "| runtime | family | accelerator | asked (bytes) | client SO_SNDBUF/SO_RCVBUF | Mbit/s (sd) | x native | IPv6/IPv4 | CPU s/Gbit | UDP loss |"
        );
        let _ = writeln!(s, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
        for p in points {
            let loss = p.reps.iter().filter_map(|r| r.loss_pct).collect::<Vec<_>>();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                p.runtime,
                p.family.name(),
                p.accel.as_deref().unwrap_or("host kernel"),
                p.value,
                effective(p),
                p.mbps().map_or_else(
                    || format!("failed: {}", p.errors.first().map_or("", String::as_str)),
                    |(m, sd)| format!("{m:.1} ({sd:.1})")
                ),
                opt(rep.ratio(p), |r| format!("{r:.2}")),
                match p.family {
                    Family::Ipv4 => String::new(),
                    Family::Ipv6 => opt(rep.ipv6_over_ipv4(p), |r| format!("{r:.2}")),
                },
                opt(p.cpu_per_gbit(), |c| format!("{c:.3}")),
                opt(vtnt_stats::mean_sd(&loss).map(|x| x.0), |l| format!(
                    "{l:.1} %"
                )),
            );
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## Seed 004's published rows (TCP_STREAM)\n");
    let _ = writeln!(s, "| runtime | netperf -s (bytes) | Mbit/s | x local OS |");
    let _ = writeln!(s, "|---|---:|---:|---:|");
    for (rt, size, mbps, ratio) in SEED_ROWS {
        let _ = writeln!(s, "| {rt} | {size} | {mbps:.2} | {ratio:.2} |");
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Linux doubles a socket buffer it is given and never goes below its minimum \
         (`SO_SNDBUF` 4,608, `SO_RCVBUF` 2,304 bytes), so the seed's smallest sizes are one \
         point on Linux runtimes: the effective sizes are in the tables. iperf3 sets `-w` \
         on both ends (netperf's `-s` is the sender's only); the unikernel ignores it and \
         keeps its fixed receive window (256 KiB, scaled). UDP messages above 1,472 bytes \
         are IP fragments (above 1,452 over IPv6: its header is 20 bytes longer, and the \
         sender fragments): a datagram with one fragment lost is lost whole.\n"
    );
    if !rep.missing.is_empty() {
        let _ = writeln!(s, "## Missing\n");
        for (rt, why) in &rep.missing {
            let _ = writeln!(s, "- {}: {}", rt, why.replace('\n', " "));
        }
        let _ = writeln!(s);
    }
    if !rep.files.is_empty() {
        let _ = writeln!(s, "## Figures\n");
        for f in rep
            .files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "png"))
        {
            if let Some(n) = f.file_name() {
                let _ = writeln!(s, "![{}]({})", n.to_string_lossy(), n.to_string_lossy());
            }
        }
    }
    s
}

/// One line per runtime of `sweep` over `family`: (value, `y(point)`).
fn series(
    rep: &NetReport,
    sweep: Sweep,
    family: Family,
    y: impl Fn(&Point) -> Option<f64>,
) -> Vec<Line> {
    let mut runtimes: Vec<Row> = rep.points.iter().map(|p| p.runtime).collect();
    runtimes.dedup();
    runtimes
        .into_iter()
        .filter_map(|rt| {
            let pts: Vec<&Point> = rep
                .points
                .iter()
                .filter(|p| p.runtime == rt && p.sweep == sweep && p.family == family)
                .collect();
            let points: Vec<(f64, f64)> = pts
                .iter()
                .filter_map(|p| Some((f64::from(p.value), y(p)?)))
                .collect();
            (!points.is_empty()).then(|| Line {
                runtime: rt.to_string(),
                emulated: pts.iter().any(|p| p.accel.as_deref() == Some("TCG")),
                points,
            })
        })
        .collect()
}

/// What a figure plots of a point.
type Value<'a> = dyn Fn(&Point) -> Option<f64> + 'a;

/// Draws the figures; returns the files written.
fn figures(rep: &NetReport, out: &Path) -> Vec<PathBuf> {
    if let Err(e) = plot::ensure_font() {
        eprintln!("vtnt bench net: no figures: {e:#}");
        return Vec::new();
    }
    let mut files = Vec::new();
    let throughput = |p: &Point| p.mbps().map(|m| m.0);
    for (i, sweep) in Sweep::ALL.into_iter().enumerate() {
        // (family, file name's kind, y axis, what it plots)
        let figs: [(Family, &str, &str, Box<Value>); 4] = [
            (Family::Ipv4, "throughput", "Mbit/s", Box::new(throughput)),
            (
                Family::Ipv4,
                "ratio",
                "throughput / native",
                Box::new(|p: &Point| rep.ratio(p)),
            ),
            (
                Family::Ipv6,
                "ipv6_throughput",
                "Mbit/s",
                Box::new(throughput),
            ),
            (
                Family::Ipv6,
                "ipv6_over_ipv4",
                "IPv6 throughput / IPv4's",
                Box::new(|p: &Point| rep.ipv6_over_ipv4(p)),
            ),
        ];
        for (family, kind, ylabel, y) in figs {
            let lines = series(rep, sweep, family, y);
            if lines.is_empty() {
                continue;
            }
            let path = out.join(format!("fig{}_{}_{kind}.png", i + 1, sweep_file(sweep)));
            let title = format!("{}, {} ({kind})", sweep.title(), family.name());
            match plot::lines_over(
                &path,
                &title,
                (sweep.axis(), Unit::Count),
                ylabel,
                Unit::Number,
                &lines,
            ) {
                Ok(()) => files.push(path),
                Err(e) => eprintln!("vtnt bench net: figure {}: {e:#}", path.display()),
            }
        }
    }
    files
}

fn sweep_file(s: Sweep) -> &'static str {
    match s {
        Sweep::TcpBuffer => "tcp_buffer",
        Sweep::TcpMsg => "tcp_msg",
        Sweep::UdpMsg => "udp_msg",
    }
}

/// Writes the figures, report.md and report.json into `out`; records the files.
pub fn write(rep: &mut NetReport, out: &Path) -> anyhow::Result<()> {
    let figs = figures(rep, out);
    rep.files.extend(figs);
    let md = out.join("report.md");
    let json = out.join("report.json");
    rep.files.push(md.clone());
    rep.files.push(json.clone());
    std::fs::write(&md, markdown(rep)).with_context(|| format!("writing {}", md.display()))?;
    std::fs::write(&json, serde_json::to_vec_pretty(rep)?)
        .with_context(|| format!("writing {}", json.display()))?;
    Ok(())
}
