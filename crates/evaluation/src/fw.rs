//! The figures of `vtnt bench fw` (seed 002's Figs. 3-12): one SVG per metric the run
//! measured, the metric against the rule count on a log axis (0 rules one decade left of
//! the smallest other count, labelled "0"), a line per (NF, runtime, stateless/stateful)
//! with mean ± sd error bars, the accelerator in the legend. Drawn from the rows of
//! `vtnt bench fw --json` ([`parse`]), so a saved run is redrawn the same way
//! (`vtnt bench fw-plot`); rendered to strings, which the command line writes.

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Deserialize;

use crate::plot::{color_of, ensure_font, log_axis, Unit, FONT, MUTED};

const SIZE: (u32, u32) = (1100, 560);
/// The margin right of the chart, which holds the legend, in pixels.
const LEGEND_PX: u32 = 360;

/// One row of `vtnt bench fw --json` as the figures read it: what names its line and
/// its measurements, `[mean, sd]` each (`null`: not measured).
#[derive(Debug, Clone, Deserialize)]
pub struct Row {
    pub rules: u64,
    pub stateful: bool,
    pub nf: String,
    pub runtime: String,
    pub accelerator: String,
    /// Whether the NF and the drivers ran on CPUs of their own (`--pin`); absent in runs
    /// made before it was recorded.
    #[serde(default)]
    pub pinned: bool,
    #[serde(flatten)]
    values: BTreeMap<String, serde_json::Value>,
}

impl Row {
    /// The `[mean, sd]` of `key`; `None` when not measured (absent, or `null`).
    fn get(&self, key: &str) -> anyhow::Result<Option<(f64, f64)>> {
        let Some(v) = self.values.get(key) else {
            return Ok(None);
        };
        let pair = v.as_array().filter(|a| a.len() == 2);
        let num = |x: &serde_json::Value| match x {
            serde_json::Value::Null => Ok(None),
            x => x.as_f64().map(Some).ok_or(()),
        };
        match pair.map(|a| (num(&a[0]), num(&a[1]))) {
            Some((Ok(Some(m)), Ok(sd))) => Ok(Some((m, sd.unwrap_or(0.0)))),
            Some((Ok(None), Ok(_))) => Ok(None),
            _ => bail!("`{key}` is {v}, not [mean, sd]"),
        }
    }
}

/// The rows of `vtnt bench fw --json` output (`{"provenance": ..., "report": [rows]}`,
/// or the rows alone); `what` names the text in errors.
pub fn parse(text: &str, what: &str) -> anyhow::Result<Vec<Row>> {
    let v: serde_json::Value =
        serde_json::from_str(text).with_context(|| format!("{what}: not JSON"))?;
    let rows = match v {
        serde_json::Value::Object(mut o) => o.remove("report").with_context(|| {
            format!("{what}: no \"report\" (not the output of `vtnt bench fw --json`)")
        })?,
        v => v,
    };
    let rows: Vec<Row> = serde_json::from_value(rows)
        .with_context(|| format!("{what}: not the rows of `vtnt bench fw --json`"))?;
    if rows.is_empty() {
        bail!("{what}: no rows");
    }
    for (i, r) in rows.iter().enumerate() {
        for (key, ..) in METRICS {
            r.get(key)
                .with_context(|| format!("{what}: row {} ({})", i + 1, label(r)))?;
        }
    }
    Ok(rows)
}

/// One figure: the row's field, the file's name, the title, the y axis, the unit, and
/// the factor from the field to that unit.
type Metric = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Unit,
    f64,
);

/// Every figure, in the order of seed 002's (load time and memory at the end).
#[rustfmt::skip]
const METRICS: [Metric; 15] = [
    ("pps", "pps", "Packet rate of a many-flow trace", "packets/s", Unit::Number, 1.0),
    ("tcp_mbps", "tcp_mbps", "TCP throughput", "Mbit/s", Unit::Number, 1.0),
    ("udp_mbps", "udp_mbps", "UDP throughput", "Mbit/s", Unit::Number, 1.0),
    ("tcp_rr_tps", "tcp_rr_tps", "TCP requests per second", "requests/s", Unit::Number, 1.0),
    ("udp_rr_tps", "udp_rr_tps", "UDP requests per second", "requests/s", Unit::Number, 1.0),
    ("tcp_rr_us", "tcp_rr_us", "TCP request round trip (mean)", "µs", Unit::Number, 1.0),
    ("udp_rr_us", "udp_rr_us", "UDP request round trip (mean)", "µs", Unit::Number, 1.0),
    ("tcp_rr_p99_us", "tcp_rr_p99_us", "TCP request round trip (p99)", "µs", Unit::Number, 1.0),
    ("udp_rr_p99_us", "udp_rr_p99_us", "UDP request round trip (p99)", "µs", Unit::Number, 1.0),
    ("tcp_syn_us", "tcp_syn_us", "TCP latency (SYN, hping3)", "µs", Unit::Number, 1.0),
    ("icmp_us", "icmp_us", "ICMP latency (ping)", "µs", Unit::Number, 1.0),
    ("tcp_conn_per_s", "tcp_conn_per_s", "TCP connections per second", "connections/s", Unit::Number, 1.0),
    ("load_ms", "load_ms", "Rule load time", "ms", Unit::Number, 1.0),
    ("rss_kib", "rss", "NF resident memory", "MiB", Unit::MiB, 1.0 / 1024.0),
    ("cpu_pct", "cpu", "NF CPU during the packet-rate test", "% of one core", Unit::Percent, 1.0),
];

/// The line a row belongs to, as the legend names it.
fn label(r: &Row) -> String {
    // a kernel baseline is named by its runtime where it is not the host's (the VM's)
    let who = if r.nf == "vtnt" || r.runtime != "native" {
        format!("{} {}", r.nf, r.runtime)
    } else {
        r.nf.clone()
    };
    let mode = if r.stateful { "stateful" } else { "stateless" };
    let pinned = if r.pinned { ", pinned" } else { "" };
    format!("{who}, {mode} ({}{pinned})", r.accelerator)
}

/// One line: its legend, colour, dashing (stateful), and its (rules, mean, sd) points.
struct Line {
    name: String,
    color: RGBColor,
    dashed: bool,
    points: Vec<(u64, f64, f64)>,
}

/// The kernel baselines' colours (our NF's rows take their runtime's).
fn color(r: &Row) -> RGBColor {
    match r.nf.as_str() {
        "vtnt" => color_of(&r.runtime, false),
        "iptables" => RGBColor(0, 0, 0),
        _ => MUTED,
    }
}

/// The lines of `value`, in the order their first rows come.
fn lines(rows: &[Row], value: impl Fn(&Row) -> Option<(f64, f64)>) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    for r in rows {
        let name = label(r);
        let Some((mean, sd)) = value(r).filter(|v| v.0.is_finite()) else {
            continue;
        };
        let i = match out.iter().position(|l| l.name == name) {
            Some(i) => i,
            None => {
                out.push(Line {
                    name,
                    color: color(r),
                    dashed: r.stateful,
                    points: Vec::new(),
                });
                out.len() - 1
            }
        };
        out[i].points.push((r.rules, mean, sd));
    }
    for l in &mut out {
        l.points.sort_by_key(|p| p.0);
    }
    out
}

/// Memory per rule: a line's resident memory above its own 0-rule row, over the rules.
fn per_rule(rows: &[Row]) -> Vec<Line> {
    let rss = |r: &Row| r.get("rss_kib").ok().flatten();
    let base = |r: &Row| {
        rows.iter()
            .find(|z| z.rules == 0 && label(z) == label(r))
            .and_then(rss)
    };
    lines(rows, |r| {
        let (m, sd) = rss(r)?;
        let (m0, _) = base(r)?;
        (r.rules > 0).then(|| {
            let n = r.rules as f64;
            ((m - m0) * 1024.0 / n, sd * 1024.0 / n)
        })
    })
}

/// Every figure the rows have a value for, as (file name, SVG text); a metric measured
/// in no row has none.
pub fn svgs(rows: &[Row]) -> anyhow::Result<Vec<(String, String)>> {
    ensure_font()?;
    let mut out = Vec::new();
    for (i, (key, file, title, ylabel, unit, scale)) in METRICS.into_iter().enumerate() {
        let lines = lines(rows, |r| {
            r.get(key)
                .ok()
                .flatten()
                .map(|(v, sd)| (v * scale, sd * scale))
        });
        if !lines.is_empty() {
            let file = format!("fw{:02}_{file}.svg", i + 1);
            out.push((file, draw(title, ylabel, unit, &lines)?));
        }
    }
    let lines = per_rule(rows);
    if !lines.is_empty() {
        let svg = draw(
            "NF memory per rule (above its 0-rule RSS)",
            "bytes/rule",
            Unit::Number,
            &lines,
        )?;
        out.push((format!("fw{:02}_mem_per_rule.svg", METRICS.len() + 1), svg));
    }
    Ok(out)
}

/// The x position of a rule count: its decade; 0 rules at `zero`.
fn xpos(rules: u64, zero: f64) -> f64 {
    if rules == 0 {
        zero
    } else {
        (rules as f64).log10()
    }
}

/// A rule count as a tick: 1, 10, 100, 1k, ..., 1M.
fn count(v: f64) -> String {
    let n = 10f64.powf(v).round();
    match n {
        n if n >= 1e6 => format!("{}M", n / 1e6),
        n if n >= 1e3 => format!("{}k", n / 1e3),
        n => format!("{n}"),
    }
}

/// One figure of `lines`.
fn draw(title: &str, ylabel: &str, unit: Unit, lines: &[Line]) -> anyhow::Result<String> {
    let pts = || lines.iter().flat_map(|l| &l.points);
    let smallest = pts().map(|p| p.0).filter(|r| *r > 0).min().unwrap_or(1);
    let zero = (smallest as f64).log10().floor() - 1.0;
    let xmax = pts().map(|p| xpos(p.0, zero)).fold(zero + 1.0, f64::max);
    let log = log_axis(unit, pts().map(|p| p.1));
    let top = pts().map(|p| p.1 + p.2).fold(0.0, f64::max);
    let (ylo, yhi) = if log {
        let low = pts()
            .map(|p| p.1 - p.2)
            .chain(pts().map(|p| p.1))
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        (low.log10().floor(), top.log10().ceil())
    } else {
        (0.0, if top > 0.0 { top * 1.1 } else { 1.0 })
    };
    let fy = |v: f64| {
        if log {
            v.max(10f64.powf(ylo)).log10()
        } else {
            v
        }
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 22))
            .margin(12)
            .margin_right(LEGEND_PX)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d(zero - 0.4..xmax + 0.4, ylo..yhi)?;
        // ticks at whole decades only
        let whole = |v: f64| Some(v.round()).filter(|r| (v - r).abs() < 1e-9);
        let xtick = |v: &f64| match whole(*v) {
            None => String::new(),
            Some(v) if v == zero => "0".into(),
            Some(v) => count(v),
        };
        let ytick = |v: &f64| match (log, whole(*v)) {
            (true, None) => String::new(),
            (true, Some(v)) => unit.tick(10f64.powf(v)),
            (false, _) => unit.tick(*v),
        };
        let ydesc = if log {
            format!("{ylabel} (log scale)")
        } else {
            ylabel.to_string()
        };
        chart
            .configure_mesh()
            .x_desc("rules (log scale; 0 at the left)")
            .x_labels((xmax - zero) as usize + 2)
            .x_label_formatter(&xtick)
            .y_desc(ydesc)
            .y_label_formatter(&ytick)
            .label_style((FONT, 14))
            .bold_line_style(BLACK.mix(0.15))
            .light_line_style(TRANSPARENT)
            .draw()?;
        let (x, top) = chart.backend_coord(&(xmax + 0.4, yhi));
        let legend =
            TextStyle::from((FONT, 14).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        for (i, l) in lines.iter().enumerate() {
            let style = l.color.stroke_width(2);
            let xy: Vec<(f64, f64)> = l
                .points
                .iter()
                .map(|p| (xpos(p.0, zero), fy(p.1)))
                .collect();
            if l.dashed {
                chart.draw_series(DashedLineSeries::new(xy.clone(), 8, 5, style))?;
            } else {
                chart.draw_series(LineSeries::new(xy.clone(), style))?;
            }
            chart.draw_series(xy.iter().map(|p| Circle::new(*p, 3, l.color.filled())))?;
            chart.draw_series(l.points.iter().filter(|p| p.2 > 0.0).map(|p| {
                let x = xpos(p.0, zero);
                ErrorBar::new_vertical(x, fy(p.1 - p.2), fy(p.1), fy(p.1 + p.2), style, 8)
            }))?;
            let y = top + 10 + 22 * i as i32;
            let swatch: &[(i32, i32)] = if l.dashed {
                &[(0, 10), (16, 26)]
            } else {
                &[(0, 26)]
            };
            for (from, to) in swatch {
                root.draw(&PathElement::new(
                    vec![(x + 16 + from, y), (x + 16 + to, y)],
                    style,
                ))?;
            }
            root.draw(&Text::new(l.name.clone(), (x + 50, y), legend.clone()))?;
        }
        if pts().any(|p| p.2 > 0.0) {
            let note = TextStyle::from((FONT, 13).into_font())
                .color(&MUTED)
                .pos(Pos::new(HPos::Left, VPos::Bottom));
            root.draw(&Text::new(
                "error bars: mean ± sd of the repetitions; dashed: stateful".to_string(),
                (12, SIZE.1 as i32 - 4),
                note,
            ))?;
        }
        root.present().context("drawing the figure")?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rules: u64, nf: &str, stateful: bool, pps: &str) -> String {
        format!(
            r#"{{"rules":{rules},"stateful":{stateful},"nf":"{nf}","runtime":"native","accelerator":"none","pps":{pps},"tcp_mbps":[null,null],"rss_kib":[2048.0,0.0]}}"#
        )
    }

    #[test]
    fn a_saved_run_draws_a_figure_per_measured_metric_with_a_line_per_setup() {
        if crate::plot::ensure_font().is_err() {
            return;
        }
        let rows = [
            row(0, "vtnt", false, "[100.0, 5.0]"),
            row(10, "vtnt", false, "[90.0, 0.0]"),
            row(0, "vtnt", true, "[80.0, 1.0]"),
            row(0, "iptables", false, "[70.0, 0.0]"),
            row(10, "iptables", false, "[60.0, 0.0]"),
        ];
        let text = format!(r#"{{"provenance":{{}},"report":[{}]}}"#, rows.join(","));
        let rows = parse(&text, "run.json").unwrap();
        let figs = svgs(&rows).unwrap();
        let names: Vec<&str> = figs.iter().map(|f| f.0.as_str()).collect();
        // TCP throughput was not measured (null): no figure; memory per rule from the
        // lines with a 0-rule row and more
        assert_eq!(
            names,
            ["fw01_pps.svg", "fw14_rss.svg", "fw16_mem_per_rule.svg"]
        );
        let pps = &figs[0].1;
        assert!(pps.starts_with("<svg"), "{pps}");
        for name in [
            "vtnt native, stateless (none)",
            "vtnt native, stateful (none)",
            "iptables, stateless (none)",
        ] {
            assert!(pps.contains(name), "{name} in {pps}");
        }
        // "0" under the x axis (0 rules) and beside the y axis
        assert_eq!(pps.matches("\n0\n</text>").count(), 2, "{pps}");
    }

    #[test]
    fn bad_runs_are_named_with_their_problem() {
        let err = |t: &str| format!("{:#}", parse(t, "run.json").unwrap_err());
        assert!(err("{").contains("run.json: not JSON"), "{}", err("{"));
        assert!(err(r#"{"provenance":{}}"#).contains("no \"report\""));
        assert!(err("[]").contains("run.json: no rows"));
        assert!(err(r#"[{"rules":"ten"}]"#).contains("not the rows"));
        let bad = format!("[{}]", row(0, "vtnt", false, r#""fast""#));
        assert!(
            err(&bad).contains("row 1 (vtnt native, stateless (none)): `pps` is \"fast\""),
            "{}",
            err(&bad)
        );
    }
}
