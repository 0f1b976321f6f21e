//! The figures of `report.md`, in the style of the paper's Figs. 4-8, drawn with
//! `plotters` into PNGs. Text is rendered through plotters' `ab_glyph` feature with
//! DejaVu Sans from Debian's `fonts-dejavu-core` (`VTNT_FONT` overrides the file); without
//! a font the figures are skipped with a message, the report stays complete.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use plotters::coord::ranged1d::{AsRangedCoord, SegmentedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordusize;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::results::{mean_sd, DensityResult, Rep, Report, RuntimeReport, Sample};

const FONT_FILES: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];
const FONT: &str = "sans-serif";
const SIZE: (u32, u32) = (1000, 560);
const COLORS: [RGBColor; 7] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];

/// Registers the font once; fails when no font file is found.
pub fn ensure_font() -> anyhow::Result<()> {
    use std::sync::OnceLock;
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let path = std::env::var("VTNT_FONT")
            .ok()
            .map(PathBuf::from)
            .or_else(|| FONT_FILES.iter().map(PathBuf::from).find(|p| p.is_file()));
        let Some(path) = path else {
            return Err("no DejaVuSans.ttf: install Debian package fonts-dejavu-core".into());
        };
        let bytes: &'static [u8] = Box::leak(
            std::fs::read(&path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?
                .into_boxed_slice(),
        );
        plotters::style::register_font(FONT, FontStyle::Normal, bytes)
            .map_err(|_| format!("{} is not a usable font", path.display()))
    })
    .clone()
    .map_err(anyhow::Error::msg)
}

/// Whether text actually renders (some dark pixels after drawing a string), which
/// plotters does not check for itself.
pub fn text_renders() -> anyhow::Result<bool> {
    ensure_font()?;
    let mut buf = vec![255u8; 200 * 50 * 3];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (200, 50)).into_drawing_area();
        root.draw(&Text::new("vTNT 123", (5, 10), (FONT, 24).into_font()))?;
        root.present()?;
    }
    Ok(buf.iter().any(|&b| b < 128))
}

/// One bar: label, value, error (sd), whether it comes from TCG emulation.
pub struct Bar {
    pub label: String,
    pub value: f64,
    pub err: f64,
    pub emulated: bool,
}

/// A bar chart with the value written above each bar; `log` for a log10 axis.
pub fn bars(path: &Path, title: &str, ylabel: &str, data: &[Bar], log: bool) -> anyhow::Result<()> {
    ensure_font()?;
    if data.is_empty() {
        bail!("no data for {}", path.display());
    }
    let width = SIZE.0.max(160 * data.len() as u32 + 120);
    let root = BitMapBackend::new(path, (width, SIZE.1)).into_drawing_area();
    root.fill(&WHITE)?;
    let max = data
        .iter()
        .map(|b| b.value + b.err)
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let min_pos = data
        .iter()
        .map(|b| b.value)
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let labels: Vec<String> = data
        .iter()
        .map(|b| {
            if b.emulated {
                format!("{} (TCG)", b.label)
            } else {
                b.label.clone()
            }
        })
        .collect();
    let axes = Axes {
        title,
        ylabel,
        labels: &labels,
    };
    if log {
        let floor = (min_pos / 3.0).max(1e-6);
        axes.draw(&root, (floor..max * 3.0).log_scale(), data, floor)?;
    } else {
        axes.draw(&root, 0.0..max * 1.15, data, 0.0)?;
    }
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

type Chart<'a, Y> =
    ChartContext<'a, BitMapBackend<'a>, Cartesian2d<SegmentedCoord<RangedCoordusize>, Y>>;

/// What a bar chart's frame shows: its title, the y axis's name, one label per bar.
struct Axes<'l> {
    title: &'l str,
    ylabel: &'l str,
    labels: &'l [String],
}

impl Axes<'_> {
    /// Draws the frame with the y axis `y` (linear or log) and the bars from `floor` up.
    fn draw<'a, Y>(
        &self,
        root: &DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>,
        y: Y,
        data: &[Bar],
        floor: f64,
    ) -> anyhow::Result<()>
    where
        Y: AsRangedCoord<Value = f64>,
        Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let fmt_x = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(i) => self.labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        };
        let n = data.len();
        // a segmented 0..k has k + 1 slots; one bar still needs a non-empty range
        let last = n.max(2) - 1;
        let mut chart = ChartBuilder::on(root)
            .caption(self.title, (FONT, 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d((0..last).into_segmented(), y)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&fmt_x)
            .y_desc(self.ylabel)
            .label_style((FONT, 14))
            .draw()?;
        draw_bars(&mut chart, data, floor)
    }
}

fn draw_bars<'a, Y: Ranged<ValueType = f64>>(
    chart: &mut Chart<'a, Y>,
    data: &[Bar],
    floor: f64,
) -> anyhow::Result<()> {
    for (i, b) in data.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let top = b.value.max(floor);
        let fill = c.mix(if b.emulated { 0.45 } else { 0.85 }).filled();
        let mut rect = Rectangle::new(
            [
                (SegmentValue::Exact(i), floor),
                (SegmentValue::Exact(i + 1), top),
            ],
            fill,
        );
        rect.set_margin(0, 0, 6, 6);
        chart.draw_series(std::iter::once(rect))?;
        let style =
            TextStyle::from((FONT, 15).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
        chart.draw_series(std::iter::once(Text::new(
            format_value(b.value),
            (SegmentValue::CenterOf(i), top),
            style,
        )))?;
        if b.err > 0.0 {
            let (lo, hi) = ((b.value - b.err).max(floor), b.value + b.err);
            chart.draw_series(std::iter::once(PathElement::new(
                vec![
                    (SegmentValue::CenterOf(i), lo),
                    (SegmentValue::CenterOf(i), hi),
                ],
                BLACK.stroke_width(2),
            )))?;
        }
    }
    Ok(())
}

fn format_value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// One series per runtime with a density run picked by `run`: (time, `value`) points.
fn timelines(
    live: &[&RuntimeReport],
    run: impl Fn(&RuntimeReport) -> Option<&DensityResult>,
    value: impl Fn(&Sample) -> f64,
) -> Vec<(String, Vec<(f64, f64)>)> {
    live.iter()
        .filter_map(|r| {
            run(r).map(|d| {
                (
                    r.runtime.clone(),
                    d.timeline.iter().map(|x| (x.t, value(x))).collect(),
                )
            })
        })
        .collect()
}

/// Lines over time, one per series.
pub fn lines(
    path: &Path,
    title: &str,
    ylabel: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> anyhow::Result<()> {
    ensure_font()?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let tmax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .fold(1.0f64, f64::max);
    let ymax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .fold(1.0f64, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..tmax, 0.0..ymax * 1.1)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the first start")
        .y_desc(ylabel)
        .label_style((FONT, 14))
        .draw()?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font((FONT, 14))
        .draw()?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Draws every figure of the report into `out`; returns the files written.
pub fn all(rep: &Report, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if let Err(e) = ensure_font() {
        eprintln!("vtnt bench deploy: no figures: {e:#}");
        return Ok(Vec::new());
    }
    let live: Vec<_> = rep
        .runtimes
        .iter()
        .filter(|r| r.skipped.is_none())
        .collect();
    let mut files = Vec::new();
    let mut emit = |name: &str, f: &dyn Fn(&Path) -> anyhow::Result<()>| {
        let p = out.join(name);
        match f(&p) {
            Ok(()) => files.push(p),
            Err(e) => eprintln!("vtnt bench deploy: figure {name}: {e:#}"),
        }
    };
    let bar = |label: &str, value: f64, err: f64, emulated: bool| Bar {
        label: label.to_string(),
        value,
        err,
        emulated,
    };
    emit("fig4_image_size.png", &|p| {
        let d: Vec<Bar> = live
            .iter()
            .map(|r| bar(&r.runtime, r.image_bytes as f64 / 1048576.0, 0.0, false))
            .collect();
        bars(p, "Fig. 4: image size", "MiB (log scale)", &d, true)
    });
    emit("fig5_memory.png", &|p| {
        let mut d = Vec::new();
        for r in &live {
            if let Some(m) = r.memory {
                d.push(bar(&r.runtime, m.late_mib, 0.0, r.emulated));
            }
            if let Some(m) = r.memory_ksm {
                d.push(bar(
                    &format!("{}+KSM", r.runtime),
                    m.late_mib,
                    0.0,
                    r.emulated,
                ));
            }
        }
        bars(
            p,
            "Fig. 5: memory of one instance (PSS incl. engine)",
            "MiB",
            &d,
            false,
        )
    });
    let stat =
        |r: &RuntimeReport, f: fn(&Rep) -> f64| mean_sd(&r.reps.iter().map(f).collect::<Vec<_>>());
    emit("fig6_time.png", &|p| {
        let mut d = Vec::new();
        for r in live.iter().filter(|r| !r.reps.is_empty()) {
            let (dm, dsd) = stat(r, |x| x.deploy_s);
            let (em, esd) = stat(r, |x| x.exec_s + x.cleanup_s);
            d.push(bar(&format!("{} deploy", r.runtime), dm, dsd, false));
            d.push(bar(&format!("{} exec", r.runtime), em, esd, r.emulated));
        }
        bars(
            p,
            "Fig. 6: deployment and execution time (mean, sd)",
            "seconds (log scale)",
            &d,
            true,
        )
    });
    emit("fig7_cpu.png", &|p| {
        let d: Vec<Bar> = live
            .iter()
            .filter(|r| !r.reps.is_empty())
            .map(|r| {
                let (m, sd) = stat(r, |x| x.cpu_s);
                bar(&r.runtime, m, sd, r.emulated)
            })
            .collect();
        bars(
            p,
            "Fig. 7: CPU time of one deploy + run (mean, sd)",
            "CPU seconds (log scale)",
            &d,
            true,
        )
    });
    emit("fig8_density.png", &|p| {
        let mut d = Vec::new();
        for r in &live {
            for (budget, x) in [
                ("mem", &r.density_memory),
                ("mem+KSM", &r.density_memory_ksm),
                ("cpu", &r.density_cpu),
            ] {
                if let Some(x) = x {
                    d.push(bar(
                        &format!("{} {budget}", r.runtime),
                        f64::from(x.completed),
                        0.0,
                        r.emulated,
                    ));
                }
            }
        }
        bars(
            p,
            "Fig. 8: instances completed within the memory / CPU budget",
            "instances",
            &d,
            false,
        )
    });
    emit("fig8a_memory_timeline.png", &|p| {
        let s = timelines(&live, |r| r.density_memory.as_ref(), |x| x.mem_mib);
        lines(
            p,
            "Fig. 8a: memory of the budget group over time",
            "MiB",
            &s,
        )
    });
    emit("fig8b_cpu_timeline.png", &|p| {
        let s = timelines(&live, |r| r.density_cpu.as_ref(), |x| x.cpu_pct);
        lines(
            p,
            "Fig. 8b: CPU use of the budget group over time",
            "% of one core",
            &s,
        )
    });
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_and_log_bar_charts_are_drawn() {
        if let Err(e) = ensure_font() {
            eprintln!("skipped: {e:#}");
            return;
        }
        let dir = std::env::temp_dir().join(format!("vtnt-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data = [
            Bar {
                label: "docker".into(),
                value: 170.0,
                err: 2.0,
                emulated: false,
            },
            Bar {
                label: "microvm".into(),
                value: 0.25,
                err: 0.0,
                emulated: true,
            },
        ];
        for log in [false, true] {
            let path = dir.join(format!("bars-{log}.png"));
            bars(&path, "title", "MiB", &data, log).unwrap();
            let png = std::fs::read(&path).unwrap();
            assert!(
                png.starts_with(b"\x89PNG"),
                "{} is not a PNG",
                path.display()
            );
        }
        bars(&dir.join("one.png"), "t", "y", &data[..1], false).unwrap();
        assert!(bars(&dir.join("none.png"), "t", "y", &[], false).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
