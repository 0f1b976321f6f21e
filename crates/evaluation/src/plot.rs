//! The figures of `report.md`, in the style of the paper's Figs. 4-8, drawn with
//! `plotters` into PNGs. Text is rendered through plotters' `ab_glyph` feature with
//! DejaVu Sans from Debian's `fonts-dejavu-core` (`VTNT_FONT` overrides the file); without
//! a font the figures are skipped with a message, the report stays complete.
//!
//! Made to be read at a glance, and deterministic (nothing in a figure but the report):
//! - each runtime has one colour in every figure ([`color`], the colour-blind-safe
//!   Okabe-Ito palette), named under its bars or in the legend;
//! - bar charts group the runtime's series (deploy / execution / total, with / without
//!   KSM, ...) side by side, told apart by hatching explained in a legend;
//! - a runtime that ran under TCG is drawn lighter and labelled "(TCG)"; a runtime
//!   skipped or failed is a labelled gap, a value not measured reads "n/a";
//! - values carry their unit and a precision that fits them ([`Unit`]); counts are
//!   integers, a density at the experiment's limit reads `N+` under a "cap" marker;
//! - the y axis is logarithmic when the values span more than two orders of magnitude
//!   ([`log_axis`]), linear otherwise; error bars are mean ± sd over the repetitions
//!   ([`Bar::from_reps`]).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use vtnt_runtimes::Runtime;

use vtnt_stats::mean_sd;

use crate::results::{DensityResult, Rep, Report, RuntimeReport, Sample};

const FONT_FILES: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];
pub(crate) const FONT: &str = "sans-serif";
const SIZE: (u32, u32) = (1000, 560);
/// The strip under a chart that holds its legend and notes, in pixels.
const FOOT: u32 = 34;
/// The width of one bar at least, in pixels, so that its value label fits.
const BAR_PX: u32 = 62;
/// The margin right of a line chart, which holds its legend, in pixels.
const LEGEND_PX: u32 = 170;
/// How much lighter a runtime is drawn where it ran under TCG (0: not, 1: white).
const TCG_LIGHTER: f64 = 0.4;
/// Notes, gaps and "n/a".
pub(crate) const MUTED: RGBColor = RGBColor(110, 110, 110);
/// The series swatches of a legend, which stand for every runtime's colour.
const SWATCH: RGBColor = RGBColor(90, 90, 90);

/// The colour of a runtime in every figure (its entry's, `vtnt_runtimes::Entry::colour`).
pub fn color(rt: Runtime) -> RGBColor {
    let [r, g, b] = rt.entry().colour;
    RGBColor(r, g, b)
}

/// The colour of the runtime a report names (`microvm`, or a row of it such as
/// `microvm:qemu-tcg`), drawn lighter if it ran under TCG; grey for a name no runtime has
/// (a seed's row).
pub(crate) fn color_of(name: &str, emulated: bool) -> RGBColor {
    let c = name
        .parse::<crate::row::Row>()
        .map_or(MUTED, |r| color(r.runtime));
    if emulated {
        lighten(c, TCG_LIGHTER)
    } else {
        c
    }
}

/// `c` mixed with white: `amount` 0 keeps it, 1 is white.
fn lighten(c: RGBColor, amount: f64) -> RGBColor {
    let f = |x: u8| (f64::from(x) + (255.0 - f64::from(x)) * amount).round() as u8;
    RGBColor(f(c.0), f(c.1), f(c.2))
}

/// What a figure's values are, which decides how they are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    MiB,
    Seconds,
    /// Instances: integers.
    Count,
    Percent,
    Nanoseconds,
    /// Throughput, or a ratio: plain numbers.
    Number,
}

impl Unit {
    /// `v` with its unit, at a precision that fits its size: `0.25 MiB`, `5.5 MiB`,
    /// `703 MiB`, `30 ms`, `6.17 s`, `69`.
    pub fn format(self, v: f64) -> String {
        match self {
            Unit::MiB if v >= 1024.0 => format!("{:.1} GiB", v / 1024.0),
            Unit::MiB if v >= 10.0 => format!("{v:.0} MiB"),
            Unit::MiB if v >= 1.0 => format!("{v:.1} MiB"),
            Unit::MiB => format!("{v:.2} MiB"),
            Unit::Seconds if v == 0.0 => "0 s".into(),
            Unit::Seconds if v < 0.01 => format!("{:.1} ms", v * 1e3),
            Unit::Seconds if v < 1.0 => format!("{:.0} ms", v * 1e3),
            Unit::Seconds if v < 10.0 => format!("{v:.2} s"),
            Unit::Seconds => format!("{v:.1} s"),
            Unit::Count => format!("{v:.0}"),
            Unit::Percent => format!("{v:.0} %"),
            Unit::Nanoseconds if v >= 1e6 => format!("{:.1} ms", v / 1e6),
            Unit::Nanoseconds if v >= 1e4 => format!("{:.0} us", v / 1e3),
            Unit::Nanoseconds if v >= 1e3 => format!("{:.1} us", v / 1e3),
            Unit::Nanoseconds if v >= 100.0 => format!("{v:.0} ns"),
            Unit::Nanoseconds if v >= 10.0 => format!("{v:.1} ns"),
            Unit::Nanoseconds => format!("{v:.2} ns"),
            Unit::Number => format!("{v:.3}"),
        }
    }

    /// A tick label of the y axis: the number alone (the unit is in the axis' name) to
    /// three significant digits, trailing zeros dropped; counts only at integers.
    pub(crate) fn tick(self, v: f64) -> String {
        if self == Unit::Count && v.fract() != 0.0 {
            return String::new();
        }
        if v == 0.0 {
            return "0".into();
        }
        let decimals = (2 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
        let s = format!("{v:.decimals$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    }
}

/// Whether values get a log axis: the positive ones span more than two orders of
/// magnitude (zeros do not count). Counts never do: a count of 0 is a result, and
/// instances are compared by difference.
pub fn log_axis(unit: Unit, values: impl IntoIterator<Item = f64>) -> bool {
    if unit == Unit::Count {
        return false;
    }
    let (lo, hi) = values
        .into_iter()
        .filter(|v| *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    hi / lo > 100.0
}

/// One bar: its value (`None`: not measured), the sd of the repetitions behind it,
/// whether it is at the experiment's cap (the real value is higher).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bar {
    pub value: Option<f64>,
    pub sd: f64,
    pub capped: bool,
}

impl Bar {
    /// A single measurement.
    pub fn of(v: f64) -> Bar {
        Bar {
            value: Some(v),
            ..Bar::default()
        }
    }

    /// Mean ± sd of the repetitions' values; not measured without repetitions.
    pub fn from_reps(v: &[f64]) -> Bar {
        let Some((mean, sd)) = mean_sd(v) else {
            return Bar::default();
        };
        Bar {
            value: Some(mean),
            sd,
            capped: false,
        }
    }

    /// The most instances a density run had alive and working at once; capped when the
    /// ramp ended without a failure.
    pub fn density(d: &DensityResult) -> Bar {
        Bar {
            capped: d.capped(),
            ..Bar::of(f64::from(d.peak))
        }
    }

    /// What the error bar spans: mean ± sd, not below zero.
    pub fn range(&self) -> Option<(f64, f64)> {
        self.value.map(|v| ((v - self.sd).max(0.0), v + self.sd))
    }

    /// The value as written above the bar: `N+` at the cap, `n/a` when not measured.
    pub fn label(&self, unit: Unit) -> String {
        match self.value {
            None => "n/a".into(),
            Some(v) if self.capped => format!("{}+", unit.format(v)),
            Some(v) => unit.format(v),
        }
    }
}

/// One runtime's bars, one per series of its chart.
#[derive(Debug, Clone)]
pub struct Group {
    /// The runtime's name, which picks its colour.
    pub runtime: String,
    /// Drawn lighter and labelled "(TCG)".
    pub emulated: bool,
    /// Why the runtime has no bars at all ("skipped", "failed"), written in their place.
    pub gap: Option<String>,
    pub bars: Vec<Bar>,
}

impl Group {
    /// `r`'s bars; a gap when it was skipped or none of them was measured ("failed" if
    /// it has errors). `tcg` says whether the accelerator matters to these values.
    pub fn of(r: &RuntimeReport, tcg: bool, bars: Vec<Bar>) -> Group {
        let gap = if r.skipped.is_some() {
            Some("skipped")
        } else if bars.iter().all(|b| b.value.is_none()) {
            Some(if r.errors.is_empty() {
                "not run"
            } else {
                "failed"
            })
        } else {
            None
        };
        Group {
            runtime: r.runtime.clone(),
            emulated: tcg && r.emulated,
            gap: gap.map(String::from),
            bars,
        }
    }
}

/// A bar chart: one group of bars per runtime, one bar per series in each.
pub struct BarChart<'a> {
    pub title: &'a str,
    /// The y axis' name; " (log scale)" is added when [`log_axis`] picks one.
    pub ylabel: &'a str,
    pub unit: Unit,
    /// The series' names, for the legend (none with a single series).
    pub series: &'a [&'a str],
    pub groups: Vec<Group>,
}

impl BarChart<'_> {
    /// Draws the chart into the PNG `path`.
    pub fn draw(&self, path: &Path) -> anyhow::Result<()> {
        ensure_font()?;
        if self.groups.is_empty() {
            bail!("no data for {}", path.display());
        }
        let bars = self.groups.len() * self.series.len().max(1);
        // room for every group's bars and for its name under them
        let name_px = self
            .groups
            .iter()
            .map(|g| g.runtime.chars().count() as u32 * 8 + 30)
            .max()
            .unwrap_or(0);
        let width = SIZE
            .0
            .max((BAR_PX * bars as u32).max(name_px * self.groups.len() as u32) + 160);
        let root = BitMapBackend::new(path, (width, SIZE.1)).into_drawing_area();
        root.fill(&WHITE)?;
        let (main, foot) = root.split_vertically(SIZE.1 - FOOT);
        let shown = || {
            self.groups
                .iter()
                .filter(|g| g.gap.is_none())
                .flat_map(|g| &g.bars)
        };
        let top = shown()
            .filter_map(Bar::range)
            .map(|r| r.1)
            .fold(0.0, f64::max);
        let x = 0.0..self.groups.len() as f64;
        if log_axis(self.unit, shown().filter_map(|b| b.value)) {
            let min = shown()
                .filter_map(|b| b.value)
                .filter(|v| *v > 0.0)
                .fold(f64::INFINITY, f64::min);
            // from the decade below half the smallest value, so that it is a visible bar;
            // a hair lower, so that the decade gets its tick
            let floor = 10f64.powf((min / 2.0).log10().floor()) * 0.999;
            let ylabel = format!("{} (log scale)", self.ylabel);
            self.frame(&main, &ylabel, x, (floor..top * 4.0).log_scale(), floor)?;
        } else {
            let top = if top > 0.0 { top * 1.25 } else { 1.0 };
            self.frame(&main, self.ylabel, x, 0.0..top, 0.0)?;
        }
        self.legend(&foot)?;
        root.present()
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    }

    /// Draws the axes on `area` with the y axis `y` (linear or log), then the groups.
    fn frame<Y>(
        &self,
        area: &DrawingArea<BitMapBackend, Shift>,
        ylabel: &str,
        x: std::ops::Range<f64>,
        y: Y,
        floor: f64,
    ) -> anyhow::Result<()>
    where
        Y: AsRangedCoord<Value = f64>,
        Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let mut chart = ChartBuilder::on(area)
            .caption(self.title, (FONT, 22))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d(x, y)?;
        let tick = |v: &f64| self.unit.tick(*v);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_label_formatter(&tick)
            .y_desc(ylabel)
            .label_style((FONT, 14))
            .bold_line_style(BLACK.mix(0.15))
            .light_line_style(TRANSPARENT)
            .draw()?;
        let px = |x: f64, y: f64| chart.backend_coord(&(x, y));
        let base = px(0.0, floor).1;
        let w = 0.8 / self.series.len().max(1) as f64;
        for (i, g) in self.groups.iter().enumerate() {
            let c = color_of(&g.runtime, g.emulated);
            let centre = px(i as f64 + 0.5, floor).0;
            runtime_label(area, g, c, (centre, base + 8))?;
            if let Some(gap) = &g.gap {
                text(area, gap, 15, MUTED, (centre, base - 6), VPos::Bottom)?;
                continue;
            }
            for (j, b) in g.bars.iter().enumerate() {
                let x0 = i as f64 + 0.1 + j as f64 * w;
                let (l, r) = (px(x0, floor).0 + 2, px(x0 + w, floor).0 - 2);
                let mid = (l + r) / 2;
                let Some(v) = b.value else {
                    text(area, "n/a", 12, MUTED, (mid, base - 4), VPos::Bottom)?;
                    continue;
                };
                let t = px(x0, v.max(floor)).1;
                hatched(area, (l, t, r, base), c, j)?;
                let mut above = t;
                let whisker = b
                    .range()
                    .map(|(lo, hi)| (px(x0, lo.max(floor)).1, px(x0, hi).1));
                // one too short to see would be a blot
                if let Some((ylo, yhi)) = whisker.filter(|(lo, hi)| lo - hi >= 4) {
                    let stroke = BLACK.stroke_width(2);
                    area.draw(&PathElement::new(vec![(mid, ylo), (mid, yhi)], stroke))?;
                    for y in [ylo, yhi] {
                        area.draw(&PathElement::new(vec![(mid - 6, y), (mid + 6, y)], stroke))?;
                    }
                    above = above.min(yhi);
                }
                text(
                    area,
                    &b.label(self.unit),
                    13,
                    BLACK,
                    (mid, above - 3),
                    VPos::Bottom,
                )?;
                if b.capped {
                    area.draw(&TriangleMarker::new((mid, above - 25), 5, BLACK.filled()))?;
                    text(area, "cap", 12, BLACK, (mid, above - 31), VPos::Bottom)?;
                }
            }
        }
        Ok(())
    }

    /// The strip under the chart: the series' hatchings, then what marks mean.
    fn legend(&self, area: &DrawingArea<BitMapBackend, Shift>) -> anyhow::Result<()> {
        let mut x = 90;
        let y = (FOOT / 2) as i32;
        let note = |s: &str, x: &mut i32| -> anyhow::Result<()> {
            let style =
                TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
            let w = area.estimate_text_size(s, &style)?.0 as i32;
            area.draw(&Text::new(s.to_string(), (*x, y), style))?;
            *x += w + 22;
            Ok(())
        };
        if self.series.len() > 1 {
            for (j, name) in self.series.iter().enumerate() {
                hatched(area, (x, y - 7, x + 22, y + 7), SWATCH, j)?;
                x += 28;
                note(name, &mut x)?;
            }
        }
        let bars = || self.groups.iter().flat_map(|g| &g.bars);
        if self.groups.iter().any(|g| g.emulated) {
            note("(TCG), lighter: ran under QEMU's TCG emulator", &mut x)?;
        }
        if bars().any(|b| b.capped) {
            note("N+ cap: the ramp ended without a failure", &mut x)?;
        }
        if bars().any(|b| b.sd > 0.0) {
            note("error bars: mean ± sd of the repetitions", &mut x)?;
        }
        Ok(())
    }
}

/// `s` centred on `at`, `v` saying which of its edges `at` is.
fn text(
    area: &DrawingArea<BitMapBackend, Shift>,
    s: &str,
    size: u32,
    color: RGBColor,
    at: (i32, i32),
    v: VPos,
) -> anyhow::Result<()> {
    let style = TextStyle::from((FONT, size).into_font())
        .color(&color)
        .pos(Pos::new(HPos::Center, v));
    area.draw(&Text::new(s.to_string(), at, style))?;
    Ok(())
}

/// A runtime's name under its group, after a square of its colour; "(TCG)" under it.
fn runtime_label(
    area: &DrawingArea<BitMapBackend, Shift>,
    g: &Group,
    c: RGBColor,
    (x, y): (i32, i32),
) -> anyhow::Result<()> {
    let style = TextStyle::from((FONT, 15).into_font()).pos(Pos::new(HPos::Left, VPos::Top));
    let w = area.estimate_text_size(&g.runtime, &style)?.0 as i32 + 16;
    let left = x - w / 2;
    area.draw(&Rectangle::new(
        [(left, y + 3), (left + 11, y + 14)],
        c.filled(),
    ))?;
    area.draw(&Text::new(g.runtime.clone(), (left + 16, y), style))?;
    if g.emulated {
        text(area, "(TCG)", 13, BLACK, (x, y + 19), VPos::Top)?;
    }
    Ok(())
}

/// The rectangle `(left, top, right, bottom)` in `c`, filled after the series `j`: solid,
/// light with diagonal hatching, lighter with horizontal hatching.
fn hatched(
    area: &DrawingArea<BitMapBackend, Shift>,
    (l, t, r, b): (i32, i32, i32, i32),
    c: RGBColor,
    j: usize,
) -> anyhow::Result<()> {
    const STEP: i32 = 7;
    let fill = match j % 3 {
        0 => c,
        1 => lighten(c, 0.5),
        _ => lighten(c, 0.75),
    };
    area.draw(&Rectangle::new([(l, t), (r, b)], fill.filled()))?;
    let lines: Vec<[(i32, i32); 2]> = match j % 3 {
        0 => Vec::new(),
        // "/": x + y = s, clipped to the rectangle
        1 => (l + t..=r + b)
            .step_by(STEP as usize)
            .filter_map(|s| {
                let (x1, x2) = ((s - b).max(l), (s - t).min(r));
                (x1 <= x2).then_some([(x1, s - x1), (x2, s - x2)])
            })
            .collect(),
        _ => (t..=b)
            .step_by(STEP as usize)
            .map(|y| [(l, y), (r, y)])
            .collect(),
    };
    for [p, q] in lines {
        area.draw(&PathElement::new(vec![p, q], c.stroke_width(1)))?;
    }
    area.draw(&Rectangle::new([(l, t), (r, b)], c.stroke_width(1)))?;
    Ok(())
}

/// One runtime's line over time.
pub struct Line {
    pub runtime: String,
    /// Drawn lighter and dashed, labelled "(TCG)".
    pub emulated: bool,
    pub points: Vec<(f64, f64)>,
}

/// One line per runtime with a density run picked by `run`: (time, `value`) points.
fn timelines(
    rep: &Report,
    run: impl Fn(&RuntimeReport) -> Option<&DensityResult>,
    value: impl Fn(&Sample) -> f64,
) -> Vec<Line> {
    rep.runtimes
        .iter()
        .filter_map(|r| {
            run(r).map(|d| Line {
                runtime: r.runtime.clone(),
                emulated: r.emulated,
                points: d.timeline.iter().map(|x| (x.t, value(x))).collect(),
            })
        })
        .collect()
}

/// Lines over time, one per runtime in its colour, named in a legend.
pub fn lines(
    path: &Path,
    title: &str,
    ylabel: &str,
    unit: Unit,
    series: &[Line],
) -> anyhow::Result<()> {
    lines_over(
        path,
        title,
        ("seconds since the first start", Unit::Seconds),
        ylabel,
        unit,
        series,
    )
}

/// Lines over `x` (its axis name and unit), one per runtime in its colour, named in a
/// legend.
pub fn lines_over(
    path: &Path,
    title: &str,
    x: (&str, Unit),
    ylabel: &str,
    unit: Unit,
    series: &[Line],
) -> anyhow::Result<()> {
    ensure_font()?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let points = || series.iter().flat_map(|s| &s.points);
    let tmax = points().map(|p| p.0).fold(1.0f64, f64::max);
    let ymax = points().map(|p| p.1).fold(1.0f64, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 22))
        .margin(12)
        .margin_right(LEGEND_PX)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..tmax, 0.0..ymax * 1.1)?;
    let tick = |v: &f64| unit.tick(*v);
    let xtick = |v: &f64| x.1.tick(*v);
    chart
        .configure_mesh()
        .x_desc(x.0)
        .x_label_formatter(&xtick)
        .y_desc(ylabel)
        .y_label_formatter(&tick)
        .label_style((FONT, 14))
        .bold_line_style(BLACK.mix(0.15))
        .light_line_style(TRANSPARENT)
        .draw()?;
    // the legend right of the lines, never over them
    let (x, top) = chart.backend_coord(&(tmax, ymax * 1.1));
    let label = TextStyle::from((FONT, 15).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, s) in series.iter().enumerate() {
        let c = color_of(&s.runtime, s.emulated);
        let style = c.stroke_width(3);
        let pts = s.points.iter().copied();
        let (name, swatch) = if s.emulated {
            chart.draw_series(DashedLineSeries::new(pts, 10, 6, style))?;
            (format!("{} (TCG)", s.runtime), &[(0, 10), (16, 26)][..])
        } else {
            chart.draw_series(LineSeries::new(pts, style))?;
            (s.runtime.clone(), &[(0, 26)][..])
        };
        let y = top + 10 + 24 * i as i32;
        // a dashed line's swatch is two dashes
        for (from, to) in swatch {
            root.draw(&PathElement::new(
                vec![(x + 16 + from, y), (x + 16 + to, y)],
                style,
            ))?;
        }
        root.draw(&Text::new(name, (x + 50, y), label.clone()))?;
    }
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

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

/// Draws every figure of the report into `out`; returns the files written.
pub fn all(rep: &Report, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if let Err(e) = ensure_font() {
        eprintln!("vtnt bench deploy: no figures: {e:#}");
        return Ok(Vec::new());
    }
    let mut files = Vec::new();
    let mut emit = |name: &str, f: &dyn Fn(&Path) -> anyhow::Result<()>| {
        let p = out.join(name);
        match f(&p) {
            Ok(()) => files.push(p),
            Err(e) => eprintln!("vtnt bench deploy: figure {name}: {e:#}"),
        }
    };
    // every runtime of the report, skipped ones as gaps; `tcg`: whether the accelerator
    // matters to the values
    let groups = |tcg: bool, bars: &dyn Fn(&RuntimeReport) -> Vec<Bar>| -> Vec<Group> {
        rep.runtimes
            .iter()
            .map(|r| Group::of(r, tcg, bars(r)))
            .collect()
    };
    let reps = |r: &RuntimeReport, f: fn(&Rep) -> f64| {
        Bar::from_reps(&r.reps.iter().map(f).collect::<Vec<_>>())
    };
    emit("fig4_image_size.png", &|p| {
        BarChart {
            title: "Fig. 4: image size",
            ylabel: "MiB",
            unit: Unit::MiB,
            series: &["image"],
            groups: groups(false, &|r| vec![Bar::of(r.image_bytes as f64 / 1048576.0)]),
        }
        .draw(p)
    });
    emit("fig5_memory.png", &|p| {
        let late = |m: Option<crate::results::Memory>| Bar {
            value: m.map(|m| m.late_mib),
            ..Bar::default()
        };
        BarChart {
            title: "Fig. 5: memory of one instance (PSS incl. engine)",
            ylabel: "MiB",
            unit: Unit::MiB,
            series: &["without KSM", "with KSM"],
            groups: groups(true, &|r| vec![late(r.memory), late(r.memory_ksm)]),
        }
        .draw(p)
    });
    emit("fig6_time.png", &|p| {
        BarChart {
            title: "Fig. 6: deployment and execution time (mean ± sd)",
            ylabel: "seconds",
            unit: Unit::Seconds,
            series: &["deploy", "execution + cleanup", "total"],
            groups: groups(true, &|r| {
                vec![
                    reps(r, |x| x.deploy_s),
                    reps(r, |x| x.exec_s + x.cleanup_s),
                    reps(r, Rep::total_s),
                ]
            }),
        }
        .draw(p)
    });
    emit("fig7_cpu.png", &|p| {
        BarChart {
            title: "Fig. 7: CPU time of one deploy + run (mean ± sd)",
            ylabel: "CPU seconds",
            unit: Unit::Seconds,
            series: &["CPU"],
            groups: groups(true, &|r| vec![reps(r, |x| x.cpu_s)]),
        }
        .draw(p)
    });
    emit("fig8_density.png", &|p| {
        let density = |d: &Option<DensityResult>| d.as_ref().map_or(Bar::default(), Bar::density);
        BarChart {
            title: "Fig. 8: instances alive and working at once within a budget",
            ylabel: "instances",
            unit: Unit::Count,
            series: &["memory budget", "memory + KSM", "CPU budget"],
            groups: groups(true, &|r| {
                vec![
                    density(&r.density_memory),
                    density(&r.density_memory_ksm),
                    density(&r.density_cpu),
                ]
            }),
        }
        .draw(p)
    });
    emit("fig8a_memory_timeline.png", &|p| {
        let s = timelines(
            rep,
            |r| r.density_memory.as_ref(),
            |x| x.mem_mib + x.daemon_mib,
        );
        lines(
            p,
            "Fig. 8a: memory of the budget group (+ daemons' growth) over time",
            "MiB",
            Unit::MiB,
            &s,
        )
    });
    emit("fig8c_working_timeline.png", &|p| {
        let s = timelines(rep, |r| r.density_memory.as_ref(), |x| f64::from(x.working));
        lines(
            p,
            "Fig. 8c: instances alive and working in the memory budget over time",
            "instances",
            Unit::Count,
            &s,
        )
    });
    emit("fig8b_cpu_timeline.png", &|p| {
        let s = timelines(
            rep,
            |r| r.density_cpu.as_ref(),
            |x| x.cpu_pct + x.daemon_cpu_pct,
        );
        lines(
            p,
            "Fig. 8b: CPU use of the budget group (+ daemons) over time",
            "% of one core",
            Unit::Percent,
            &s,
        )
    });
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Memory;

    /// The PNG at `path` decodes; its size.
    fn decoded(path: &Path) -> (u32, u32) {
        let img = image::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        (img.width(), img.height())
    }

    /// Three repetitions whose mean is `m` and whose sd is `sd`.
    fn three(m: f64, sd: f64) -> [f64; 3] {
        [m - sd, m, m + sd]
    }

    /// A density run of `n` instances (`capped` at the limit), `mib` and `cpu_pct` of a
    /// core each, 0.1 s apart and held 10 s.
    fn density(n: u32, capped: bool, mib: f64, cpu_pct: f64) -> Option<DensityResult> {
        let timeline = (0..=40)
            .map(|i| {
                let t = f64::from(i) * 0.5;
                let running = (t * 10.0).min(f64::from(n));
                Sample {
                    t,
                    mem_mib: running * mib,
                    cpu_pct: (running * cpu_pct).min(57.0),
                    running: running as u32,
                    working: running as u32,
                    daemon_mib: 0.0,
                    daemon_cpu_pct: 0.0,
                }
            })
            .collect();
        Some(DensityResult {
            budget: "memory".into(),
            limit: 120,
            started: n,
            peak: n,
            cap: capped.then(|| "the ramp's limit of 120 instances".into()),
            timeline,
            ..DensityResult::default()
        })
    }

    /// Seed 000's evaluation as docs/benchmarks.md reports it (the 18:17 run, 3 reps,
    /// the microVM's 20:40 re-run).
    fn sample() -> Report {
        // name, accelerator ("TCG": emulated), image MiB, memory MiB, with KSM,
        // (deploy, exec, cleanup, CPU) s as (mean, sd), densities (memory, KSM, CPU) as
        // (completed, capped)
        type Row = (
            &'static str,
            Option<&'static str>,
            f64,
            f64,
            Option<f64>,
            [(f64, f64); 4],
            [Option<(u32, bool)>; 3],
        );
        #[rustfmt::skip]
        let rows: [Row; 6] = [
            ("native", None, 5.51, 2.2, None, [(0.49, 0.004), (0.34, 0.004), (0.004, 0.001), (0.004, 0.001)], [Some((120, true)), None, Some((120, true))]),
            ("runc", None, 5.52, 11.3, None, [(0.50, 0.004), (0.37, 0.01), (0.01, 0.002), (0.03, 0.004)], [Some((120, true)), None, Some((120, true))]),
            ("docker", None, 121.37, 175.2, None, [(6.17, 0.02), (0.63, 0.05), (0.68, 0.12), (0.11, 0.01)], [Some((116, false)), None, Some((120, true))]),
            ("docker-scratch", None, 5.52, 170.7, None, [(0.32, 0.01), (0.51, 0.02), (0.05, 0.004), (0.10, 0.01)], [Some((113, false)), None, Some((120, true))]),
            ("vm", Some("TCG"), 703.25, 693.6, Some(646.6), [(23.40, 0.19), (20.40, 0.76), (0.12, 0.01), (20.23, 0.79)], [Some((1, false)), Some((1, false)), Some((0, false))]),
            ("microvm", Some("PVM-KVM"), 0.25, 1.7, Some(1.7), [(0.03, 0.004), (0.35, 0.01), (0.004, 0.001), (0.01, 0.002)], [Some((120, true)), Some((120, true)), Some((120, true))]),
        ];
        let mem = |v: f64| Memory {
            late_mib: v,
            peak_mib: v,
            ..Memory::default()
        };
        let runtimes = rows
            .into_iter()
            .map(|(name, accel, image, memory, ksm, times, dens)| {
                let [d, e, c, cpu] = times.map(|(m, sd)| three(m, sd));
                let per_instance = if name == "vm" {
                    690.0
                } else {
                    memory / 20.0 + 1.5
                };
                let [dm, dk, dc] = dens.map(|x| {
                    x.and_then(|(n, cap)| density(n, cap, per_instance, times[3].0 * 10.0))
                });
                RuntimeReport {
                    runtime: name.into(),
                    label: name.into(),
                    accel: accel.map(String::from),
                    emulated: accel == Some("TCG"),
                    image_bytes: (image * 1048576.0) as u64,
                    reps: (0..3)
                        .map(|i| Rep {
                            deploy_s: d[i],
                            exec_s: e[i],
                            cleanup_s: c[i],
                            cpu_s: cpu[i],
                            ok: true,
                            same_as_native: true,
                            first_probe_ms: None,
                            cgroup_join_ms: None,
                        })
                        .collect(),
                    memory: Some(mem(memory)),
                    memory_ksm: ksm.map(mem),
                    density_memory: dm,
                    density_memory_ksm: dk,
                    density_cpu: dc,
                    ..RuntimeReport::default()
                }
            })
            .collect();
        Report {
            reps: 3,
            runtimes,
            ..Report::default()
        }
    }

    #[test]
    fn each_runtime_has_one_colour_distinct_from_the_others() {
        let colours: Vec<RGBColor> = Runtime::ALL.into_iter().map(color).collect();
        for (i, (rt, c)) in Runtime::ALL.into_iter().zip(&colours).enumerate() {
            assert_eq!(color_of(rt.name(), false), *c, "{rt:?} by name");
            assert_ne!(color_of(rt.name(), true), *c, "{rt:?} under TCG is lighter");
            assert!(!colours[..i].contains(c), "{rt:?} shares its colour");
            assert_ne!(*c, MUTED, "{rt:?} is grey");
        }
        assert_eq!(color_of("no such runtime", false), MUTED);
    }

    #[test]
    fn a_density_at_the_cap_reads_n_plus() {
        let d = |peak, capped: bool| DensityResult {
            peak,
            cap: capped.then(|| "the ramp's limit".into()),
            ..DensityResult::default()
        };
        assert_eq!(Bar::density(&d(120, true)).label(Unit::Count), "120+");
        assert_eq!(Bar::density(&d(116, false)).label(Unit::Count), "116");
        assert_eq!(Bar::default().label(Unit::Count), "n/a");
    }

    #[test]
    fn counts_are_integers_and_sizes_and_times_carry_units() {
        assert_eq!(Unit::Count.format(69.0), "69");
        assert_eq!(Unit::Count.tick(40.0), "40");
        assert_eq!(Unit::Count.tick(2.5), "", "no tick between counts");
        assert_eq!(Unit::MiB.format(0.25), "0.25 MiB");
        assert_eq!(Unit::MiB.format(5.51), "5.5 MiB");
        assert_eq!(Unit::MiB.format(703.25), "703 MiB");
        assert_eq!(Unit::MiB.format(2048.0), "2.0 GiB");
        assert_eq!(Unit::Seconds.format(0.004), "4.0 ms");
        assert_eq!(Unit::Seconds.format(0.38), "380 ms");
        assert_eq!(Unit::Seconds.format(6.17), "6.17 s");
        assert_eq!(Unit::Seconds.format(43.92), "43.9 s");
        assert_eq!(Unit::Percent.format(57.2), "57 %");
        for (v, tick) in [(0.01, "0.01"), (0.1, "0.1"), (1.0, "1"), (1000.0, "1000")] {
            assert_eq!(Unit::MiB.tick(v), tick);
        }
    }

    #[test]
    fn a_log_axis_when_values_span_more_than_two_orders_of_magnitude() {
        assert!(log_axis(Unit::MiB, [0.25, 5.5, 703.25]));
        assert!(!log_axis(Unit::Seconds, [0.84, 7.49]));
        assert!(
            !log_axis(Unit::Seconds, [0.0, 1.0, 99.0]),
            "zeros do not count"
        );
        assert!(!log_axis(Unit::Count, [1.0, 120.0]), "counts stay linear");
        assert!(!log_axis(Unit::MiB, []));
    }

    #[test]
    fn error_bars_span_mean_plus_minus_sd_of_the_repetitions() {
        let b = Bar::from_reps(&[1.0, 2.0, 3.0]);
        assert_eq!((b.value, b.sd), (Some(2.0), 1.0));
        assert_eq!(b.range(), Some((1.0, 3.0)));
        let b = Bar::from_reps(&[0.1, 0.1, 1.0]);
        assert_eq!(b.range().unwrap().0, 0.0, "not below zero");
        assert_eq!(Bar::from_reps(&[]), Bar::default(), "no reps: not measured");
        assert_eq!(Bar::of(5.0).range(), Some((5.0, 5.0)));
    }

    #[test]
    fn skipped_and_failed_runtimes_are_labelled_gaps() {
        let mut r = RuntimeReport {
            runtime: "vm".into(),
            skipped: Some("no image".into()),
            emulated: true,
            ..RuntimeReport::default()
        };
        let gap = |r: &RuntimeReport, bars| Group::of(r, true, bars).gap;
        assert_eq!(gap(&r, vec![Bar::of(1.0)]).as_deref(), Some("skipped"));
        r.skipped = None;
        r.errors.push("boot timed out".into());
        assert_eq!(gap(&r, vec![Bar::default()]).as_deref(), Some("failed"));
        assert_eq!(gap(&r, vec![Bar::default(), Bar::of(1.0)]), None);
        assert!(Group::of(&r, true, vec![]).emulated);
        assert!(
            !Group::of(&r, false, vec![]).emulated,
            "TCG does not matter"
        );
    }

    #[test]
    fn linear_and_log_bar_charts_are_drawn() {
        if let Err(e) = ensure_font() {
            eprintln!("skipped: {e:#}");
            return;
        }
        let dir = std::env::temp_dir().join(format!("vtnt-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let group = |runtime: &str, v: f64, sd: f64, emulated: bool| Group {
            runtime: runtime.into(),
            emulated,
            gap: None,
            bars: vec![Bar {
                value: Some(v),
                sd,
                capped: false,
            }],
        };
        let chart = |groups| BarChart {
            title: "title",
            ylabel: "MiB",
            unit: Unit::MiB,
            series: &["size"],
            groups,
        };
        // linear, then log (170 / 0.25 > 100)
        for small in [100.0, 0.25] {
            let path = dir.join(format!("bars-{small}.png"));
            let groups = vec![
                group("docker", 170.0, 2.0, false),
                group("microvm", small, 0.0, true),
            ];
            chart(groups).draw(&path).unwrap();
            assert_eq!(decoded(&path), SIZE);
        }
        chart(vec![group("docker", 170.0, 2.0, false)])
            .draw(&dir.join("one.png"))
            .unwrap();
        assert!(chart(vec![]).draw(&dir.join("none.png")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Draws every figure of the sample report into a fixed directory under the
    /// temporary one, left there to be looked at (`vtnt-evaluation-figures`), and the
    /// same with a runtime skipped and one failed (`vtnt-evaluation-figures-gaps`).
    #[test]
    fn the_sample_report_figures_are_drawn_under_the_names_the_report_shows() {
        if let Err(e) = ensure_font() {
            eprintln!("skipped: {e:#}");
            return;
        }
        let mut gaps = sample();
        gaps.runtimes[3].skipped = Some("docker: no such image".into());
        gaps.runtimes[1] = RuntimeReport {
            errors: vec!["runc: exit 1".into()],
            ..RuntimeReport {
                runtime: "runc".into(),
                ..RuntimeReport::default()
            }
        };
        for (rep, name) in [(sample(), "figures"), (gaps, "figures-gaps")] {
            let dir = std::env::temp_dir().join(format!("vtnt-evaluation-{name}"));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let files = all(&rep, &dir).unwrap();
            assert_eq!(files.len(), 8, "{files:?}");
            let md = crate::report::markdown(&rep);
            for f in &files {
                let (w, h) = decoded(f);
                assert!(w >= SIZE.0 && h == SIZE.1, "{}: {w}x{h}", f.display());
                let name = f.file_name().unwrap().to_str().unwrap();
                assert!(md.contains(&format!("({name})")), "report.md lacks {name}");
            }
        }
    }
}
