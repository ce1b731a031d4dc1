//! `statstorm diagnose --format html`: the diagnosis as one self-contained
//! HTML5 page. Inline CSS only, no script, no URL of any kind (a
//! Content-Security-Policy that forbids every fetch says so to the
//! browser); every text HTML-escaped. The words are the text renderer's
//! ([`crate::diagnose`]); the plots are drawn by `plotters` as SVG and
//! embedded inline, each in a `<figure class="plot">` of a fixed size
//! framed by [`FRAME`], a colour used nowhere else on the page (so a
//! screenshot test can find every plot). A plot whose data the input does
//! not have is left out and a sentence says why.

use crate::diagnose::{
    assignments, effect_parts, evidence, figures_line, mechanism, name, not_proposed_groups,
    summary, unknown,
};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use statstorm_engine::diagnose::candidates::{Layer, Risk, Setting};
use statstorm_engine::diagnose::figures::{Distribution, RequestPoint};
use statstorm_engine::diagnose::findings::Severity;
use statstorm_engine::diagnose::{
    Basis, CounterSource, Diagnosis, Plan, Topic, Unknown, MAX_SERIES_S,
};
use std::io;

/// A plot's size in pixels (the SVG and its frame's interior).
pub const PLOT_WIDTH: u32 = 1000;
pub const PLOT_HEIGHT: u32 = 380;
/// The colour of the plots' 3px frames, used for nothing else.
pub const FRAME: [u8; 3] = [0x1f, 0x6f, 0xeb];

use statstorm_engine::diagnose::figures::{stall_above, STALL_EXTRA_MS, STALL_FACTOR};

// the plots' colours (none is FRAME)
const METADATA: RGBColor = RGBColor(0x0b, 0x7a, 0x75);
const BURST: RGBColor = RGBColor(0xf4, 0xa2, 0x61);
const BARS: RGBColor = RGBColor(0x5e, 0x60, 0xce);
const BEFORE: RGBColor = RGBColor(0xd6, 0x28, 0x28);
const AFTER: RGBColor = RGBColor(0x2a, 0x9d, 0x8f);
const RPC_BEFORE: RGBColor = RGBColor(0xf7, 0x7f, 0x00);
const RPC_AFTER: RGBColor = RGBColor(0x6a, 0x4c, 0x93);
const STALL: RGBColor = RGBColor(0x11, 0x11, 0x11);
const GUIDE: RGBColor = RGBColor(0x80, 0x80, 0x80);

const FONT: &str = "sans-serif";
/// plotters writes `font-size` = size / 1.24.
const LABEL_SIZE: f64 = 17.0;
const DESC_SIZE: f64 = 18.5;

const CSS: &str = "\
:root{color-scheme:light}
*{box-sizing:border-box}
body{font:15px/1.45 \"Liberation Sans\",Arial,Helvetica,sans-serif;color:#1b1b1b;background:#fff;margin:0 auto;padding:16px 24px 48px;max-width:1060px}
h1{font-size:26px;margin:8px 0 6px}
h2{font-size:21px;margin:30px 0 8px;padding-bottom:3px;border-bottom:2px solid #d4d4d4}
h3{font-size:17px;margin:20px 0 6px}
h4{font-size:15px;margin:12px 0 4px}
dl.head{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;margin:8px 0}
dl.head dt{font-weight:bold}
dl.head dd{margin:0;overflow-wrap:anywhere}
code,pre{font-family:\"DejaVu Sans Mono\",\"Liberation Mono\",monospace;font-size:13px}
code{background:#f2f2f2;padding:0 3px;border-radius:3px}
pre{background:#f6f6f6;border:1px solid #dadada;border-radius:4px;padding:6px 10px;margin:4px 0 8px;white-space:pre-wrap;overflow-wrap:anywhere}
ol.findings>li{margin:0 0 12px}
ol.findings p{margin:3px 0}
.badge{display:inline-block;padding:0 7px;border-radius:3px;font-size:12px;font-weight:bold;text-transform:uppercase;color:#fff;vertical-align:1px;margin-right:6px}
.sev-critical,.risk-high{background:#9b1c1c}
.sev-major,.risk-medium{background:#c2410c}
.sev-minor,.risk-low{background:#8a6a00}
.sev-info,.risk-none{background:#4b5563}
.label{color:#555;font-weight:bold}
.share{color:#555;font-weight:normal;font-size:15px}
.empty{color:#777;font-style:italic}
section.plan{border-top:1px solid #e2e2e2;margin-top:14px;padding-top:2px}
ul{margin:4px 0 8px;padding-left:22px}
table{border-collapse:collapse;margin:6px 0 10px}
th,td{border:1px solid #d8d8d8;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f2f2f2}
td.num{text-align:right}
figure.plot{display:block;width:1006px;height:386px;border:3px solid #1f6feb;margin:8px 0 4px;padding:0;background:#fff;overflow:hidden}
figure.plot svg{display:block;width:1000px;height:380px}
p.caption{color:#444;font-size:13px;margin:2px 0 16px;max-width:1000px}
p.absent{color:#444;font-style:italic;background:#f7f7f7;border-left:4px solid #9a9a9a;padding:6px 10px;margin:8px 0 14px}
p.warn{background:#fff4e5;border-left:4px solid #c2410c;padding:6px 10px}
footer{margin-top:36px;color:#666;font-size:12px}
";

/// `s` with `& < > " '` escaped, for text and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A sentence with "->" shown as an arrow, escaped.
fn arrows(s: &str) -> String {
    esc(s).replace(" -&gt; ", " \u{2192} ")
}

fn num(v: f64) -> String {
    if v >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn risk_word(r: Risk) -> &'static str {
    match r {
        Risk::None => "none",
        Risk::Low => "low",
        Risk::Medium => "medium",
        Risk::High => "high",
    }
}

fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::Info => "info",
        Severity::Minor => "minor",
        Severity::Major => "major",
        Severity::Critical => "critical",
    }
}

/// The page as it is built.
struct Page(String);

impl Page {
    fn raw(&mut self, s: &str) {
        self.0.push_str(s);
    }
    /// `<tag>escaped text</tag>`.
    fn el(&mut self, tag: &str, text: &str) {
        let t = tag.split(' ').next().unwrap_or(tag);
        self.0.push_str(&format!("<{tag}>{}</{t}>\n", esc(text)));
    }
    fn list(&mut self, items: impl IntoIterator<Item = String>) {
        self.raw("<ul>\n");
        for i in items {
            self.raw(&format!("<li>{i}</li>\n"));
        }
        self.raw("</ul>\n");
    }
    /// A plot in its frame with its caption, or the sentence saying why
    /// it is absent.
    fn plot(&mut self, title: &str, plot: Plot) {
        self.el("h3", title);
        match plot {
            Plot::Drawn { svg, caption } => {
                // inline SVG is in the SVG namespace by the HTML parser:
                // the namespace attribute (a name, not a URL to fetch) is
                // left out so the page holds no URL at all
                let svg = svg
                    .replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1)
                    .replacen(
                        "<svg ",
                        &format!("<svg role=\"img\" aria-label=\"{}\" ", esc(title)),
                        1,
                    );
                self.raw("<figure class=\"plot\">\n");
                self.raw(&svg);
                self.raw("</figure>\n");
                if !caption.is_empty() {
                    self.el("p class=\"caption\"", &caption);
                }
            }
            Plot::Absent(why) => self.el("p class=\"absent\"", &why),
        }
    }
}

/// A plot, or why it is not drawn.
enum Plot {
    Drawn { svg: String, caption: String },
    Absent(String),
}

type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// `svg!(|root| { ...; Ok(()) })`: an SVG of the plot size, drawn by the
/// block on `root` (a macro, not a closure taking the drawing area: the
/// charts' legends borrow the backend's lifetime, which a higher-ranked
/// closure parameter cannot name).
macro_rules! svg {
    (|$root:ident| $body:block) => {{
        let mut s = String::new();
        let res: DrawResult = {
            let area =
                SVGBackend::with_string(&mut s, (PLOT_WIDTH, PLOT_HEIGHT)).into_drawing_area();
            let $root = &area;
            (|| -> DrawResult {
                $root.fill(&WHITE)?;
                let drawn: DrawResult = $body;
                drawn?;
                $root.present()?;
                Ok(())
            })()
        };
        res.map_err(|e| io::Error::other(format!("drawing a plot: {e}")))
            .map(|()| s)
    }};
}

/// `chart!(root, X_RANGE, Y_RANGE, Y_LABEL_AREA, X_DESC, Y_DESC)`: a chart
/// on `root` with the report's axes drawn (margins, labels, ticks, grid),
/// for the plots on numeric axes (a macro: the coordinate types differ).
macro_rules! chart {
    ($root:expr, $x:expr, $y:expr, $ylabels:expr, $xdesc:expr, $ydesc:expr) => {{
        let mut chart = ChartBuilder::on($root)
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size($ylabels)
            .build_cartesian_2d($x, $y)?;
        chart
            .configure_mesh()
            .x_desc($xdesc)
            .y_desc($ydesc)
            .label_style(label_style())
            .axis_desc_style(desc_style())
            .x_label_formatter(&|x| tick(*x))
            .y_label_formatter(&|y| tick(*y))
            .light_line_style(RGBColor(0xf0, 0xf0, 0xf0))
            .bold_line_style(RGBColor(0xdc, 0xdc, 0xdc))
            .max_light_lines(2)
            .draw()?;
        chart
    }};
}

fn label_style() -> TextStyle<'static> {
    (FONT, LABEL_SIZE).into_font().color(&BLACK)
}

fn desc_style() -> TextStyle<'static> {
    (FONT, DESC_SIZE).into_font().color(&BLACK)
}

/// An axis value for people: whole numbers without decimals.
fn tick(v: f64) -> String {
    let a = v.abs();
    if a >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if a >= 10.0 || v == v.round() {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A range's upper end with headroom (at least `min`).
fn top(max: f64, min: f64) -> f64 {
    room(max, min, 1.08)
}

/// A range's upper end `factor` times `max` (at least `min`): room above
/// the data for a legend in the upper corner.
fn room(max: f64, min: f64, factor: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        (max * factor).max(min)
    } else {
        min
    }
}

/// A legend's solid line.
fn legend_line(c: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 19, y)], c.stroke_width(3))
}

/// A legend's ring.
fn legend_ring(c: RGBColor) -> impl Fn((i32, i32)) -> Circle<(i32, i32), i32> {
    move |(x, y)| Circle::new((x + 9, y), 6, c.stroke_width(2))
}

/// A legend's dashed line (a closure: the composed element's type is
/// not to be named, and a `DynElement` would have to be `'static`).
macro_rules! legend_dashed {
    ($c:expr) => {{
        let c: RGBColor = $c;
        move |(x, y): (i32, i32)| {
            EmptyElement::at((x, y))
                + PathElement::new(vec![(0, 0), (7, 0)], c.stroke_width(3))
                + PathElement::new(vec![(12, 0), (19, 0)], c.stroke_width(3))
        }
    }};
}

/// 1: metadata calls per second, bursts shaded.
fn timeline(d: &Diagnosis) -> io::Result<Plot> {
    let p = &d.plots;
    let v = &p.metadata_per_s;
    let timed = !d.unknown.contains(&Unknown::NoTimestamps);
    let Some(start) = p.start_s.filter(|_| timed && !v.is_empty()) else {
        let why = if !timed {
            "Not plotted: metadata calls over time need timestamps, and the trace has none (record with strace -ttt)."
                .to_string()
        } else {
            format!(
                "Not plotted: no per-second series (the trace recorded no metadata call, or spans more than {MAX_SERIES_S} s)."
            )
        };
        return Ok(Plot::Absent(why));
    };
    let max = v.iter().copied().max().unwrap_or(0) as f64;
    let legend_rows = if p.bursts.is_empty() { 1.0 } else { 2.0 };
    let (xmax, ymax) = (
        v.len().max(1) as f64,
        room(max, 1.0, 1.12 + 0.08 * legend_rows),
    );
    let svg = svg!(|root| {
        let mut chart = chart!(
            root,
            0f64..xmax,
            0f64..ymax,
            78,
            "seconds from the first second of the trace",
            "metadata calls per second"
        );
        if !p.bursts.is_empty() {
            chart
                .draw_series(p.bursts.iter().map(|b| {
                    Rectangle::new(
                        [
                            ((b.start_s - start) as f64, 0.0),
                            ((b.end_s - start + 1) as f64, ymax),
                        ],
                        BURST.mix(0.35).filled(),
                    )
                }))?
                .label("burst (several times the median rate)")
                .legend(|(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 19, y + 6)], BURST.mix(0.35).filled())
                });
        }
        // each second covers [i, i + 1)
        let steps = v
            .iter()
            .enumerate()
            .flat_map(|(i, &n)| [(i as f64, n as f64), ((i + 1) as f64, n as f64)]);
        chart
            .draw_series(LineSeries::new(steps, METADATA.stroke_width(2)))?
            .label("metadata calls per second (every process)")
            .legend(legend_line(METADATA));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font(label_style())
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.4))
            .draw()?;
        Ok(())
    })?;
    let total: u64 = v.iter().sum();
    let mut caption = format!(
        "{total} metadata calls in {} s; at most {} in one second.",
        v.len(),
        max
    );
    if p.bursts.is_empty() {
        caption.push_str(" No burst: no second has several times the median rate.");
    } else {
        caption.push_str(&format!(
            " {} burst{} shaded.",
            p.bursts.len(),
            if p.bursts.len() == 1 { "" } else { "s" }
        ));
    }
    Ok(Plot::Drawn { svg, caption })
}

/// A path cut to `max` characters from the left.
fn shorten(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        s.to_string()
    } else {
        let tail: String = s.chars().skip(n - (max - 1)).collect();
        format!("\u{2026}{tail}")
    }
}

/// 2: the directories with the most metadata calls, horizontal bars.
fn top_dirs(d: &Diagnosis) -> io::Result<Plot> {
    let dirs = &d.plots.top_dirs;
    if dirs.is_empty() {
        return Ok(Plot::Absent(
            "Not plotted: no metadata call with a path was recorded.".into(),
        ));
    }
    const MAX_LABEL: usize = 52;
    let labels: Vec<String> = dirs.iter().map(|(p, _)| shorten(p, MAX_LABEL)).collect();
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(1);
    let label_area = (longest as f64 * 7.6 + 24.0).clamp(80.0, 430.0) as u32;
    let n = dirs.len() as i32;
    // at least 3 rows (a lone bar is not a slab), the most at the top:
    // rank r in row rows - 1 - r
    let rows = n.max(3);
    let row = |r: usize| rows - 1 - r as i32;
    let max = dirs.iter().map(|(_, c)| *c).max().unwrap_or(0) as f64;
    let xmax = top(max * 1.06, 1.0);
    // bars at most about 24 px thick (the plotting area is ~298 px high;
    // the segments of 0..rows - 1 are 0..=rows - 1)
    let gap = ((298.0 / rows as f64 - 24.0) / 2.0).max(3.0) as u32;
    let svg = svg!(|root| {
        let mut chart = ChartBuilder::on(root)
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(label_area)
            .build_cartesian_2d(0f64..xmax, (0..rows - 1).into_segmented())?;
        let label = |v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(i) if (rows - n..rows).contains(i) => {
                labels[(rows - 1 - i) as usize].clone()
            }
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows as usize)
            .y_label_formatter(&label)
            .x_label_formatter(&|x| tick(*x))
            .x_desc("metadata calls")
            .label_style((FONT, 15.5).into_font().color(&BLACK))
            .axis_desc_style(desc_style())
            .light_line_style(RGBColor(0xf0, 0xf0, 0xf0))
            .bold_line_style(RGBColor(0xdc, 0xdc, 0xdc))
            .max_light_lines(2)
            .draw()?;
        chart.draw_series(dirs.iter().enumerate().map(|(r, (_, c))| {
            let i = row(r);
            let mut bar = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (*c as f64, SegmentValue::Exact(i + 1)),
                ],
                BARS.filled(),
            );
            bar.set_margin(gap, gap, 0, 0);
            bar
        }))?;
        let value_style = (FONT, 15.0)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        chart.draw_series(dirs.iter().enumerate().map(|(r, (_, c))| {
            let i = row(r);
            Text::new(
                c.to_string(),
                (*c as f64 + xmax * 0.006, SegmentValue::CenterOf(i)),
                value_style.clone(),
            )
        }))?;
        Ok(())
    })?;
    let cut = dirs.iter().any(|(p, _)| p.chars().count() > MAX_LABEL);
    let mut caption = format!(
        "The {} director{} whose entries get the most metadata calls (stat, open, access, readlink of a path in them).",
        dirs.len(),
        if dirs.len() == 1 { "y" } else { "ies" }
    );
    if cut {
        caption.push_str(" Long paths are shown by their last characters: ");
        caption.push_str(
            &dirs
                .iter()
                .filter(|(p, _)| p.chars().count() > MAX_LABEL)
                .map(|(p, _)| p.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        );
        caption.push('.');
    }
    Ok(Plot::Drawn { svg, caption })
}

/// The x of each point: seconds from the first request's start, or the
/// request's number without timestamps; the axis's end and description.
fn request_xs(d: &Diagnosis, points: &[RequestPoint]) -> (Vec<f64>, f64, &'static str) {
    if d.unknown.contains(&Unknown::NoTimestamps) {
        let xs: Vec<f64> = (1..=points.len()).map(|i| i as f64).collect();
        return (
            xs,
            points.len() as f64 + 1.0,
            "request, in trace order (the trace has no timestamps)",
        );
    }
    let t0 = points.first().map(|p| p.start_s).unwrap_or(0.0);
    let xs: Vec<f64> = points.iter().map(|p| (p.start_s - t0).max(0.0)).collect();
    let span = xs.iter().copied().fold(0.0, f64::max);
    let xmax = if span > 0.0 { span * 1.03 } else { 1.0 };
    (xs, xmax, "request start, seconds from the first request")
}

/// 3: each request's metadata calls (and RPCs) before and after the best
/// plan.
fn requests(d: &Diagnosis) -> io::Result<Plot> {
    let pts = &d.plots.requests;
    if pts.is_empty() {
        return Ok(Plot::Absent(
            "Not plotted: the capture has no requests.".into(),
        ));
    }
    let plan = !d.plans.is_empty();
    let rpcs = pts.iter().any(|p| p.rpcs_before.is_some());
    let (xs, xmax, xdesc) = request_xs(d, pts);
    let max = pts
        .iter()
        .flat_map(|p| {
            [
                p.calls_before,
                if plan { p.calls_after } else { 0 },
                p.rpcs_before.unwrap_or(0),
                if plan { p.rpcs_after.unwrap_or(0) } else { 0 },
            ]
        })
        .max()
        .unwrap_or(0) as f64;
    let rows = 1 + usize::from(plan) + usize::from(rpcs) * (1 + usize::from(plan));
    let ymax = room(max, 1.0, 1.12 + 0.11 * rows as f64);
    let markers = pts.len() <= 120;
    let svg = svg!(|root| {
        let mut chart = chart!(root, 0f64..xmax, 0f64..ymax, 78, xdesc, "per request");
        let mut series: Vec<Series> = Vec::new();
        let (b, a) = if plan {
            (" before", " after plan 1")
        } else {
            ("", "")
        };
        series.push((
            format!("metadata calls{b}"),
            BEFORE,
            false,
            xs.iter()
                .zip(pts)
                .map(|(x, p)| (*x, p.calls_before as f64))
                .collect(),
        ));
        if plan {
            series.push((
                format!("metadata calls{a}"),
                AFTER,
                false,
                xs.iter()
                    .zip(pts)
                    .map(|(x, p)| (*x, p.calls_after as f64))
                    .collect(),
            ));
        }
        if rpcs {
            series.push((
                format!("NFS RPCs{b}"),
                RPC_BEFORE,
                true,
                xs.iter()
                    .zip(pts)
                    .map(|(x, p)| (*x, p.rpcs_before.unwrap_or(0) as f64))
                    .collect(),
            ));
            if plan {
                series.push((
                    format!("NFS RPCs{a}"),
                    RPC_AFTER,
                    true,
                    xs.iter()
                        .zip(pts)
                        .map(|(x, p)| (*x, p.rpcs_after.unwrap_or(0) as f64))
                        .collect(),
                ));
            }
        }
        for (label, c, dashed, v) in series {
            if dashed {
                chart
                    .draw_series(DashedLineSeries::new(
                        v.iter().copied(),
                        8,
                        5,
                        c.stroke_width(2),
                    ))?
                    .label(label)
                    .legend(legend_dashed!(c));
            } else {
                chart
                    .draw_series(LineSeries::new(v.iter().copied(), c.stroke_width(2)))?
                    .label(label)
                    .legend(legend_line(c));
            }
            if markers {
                chart.draw_series(v.iter().map(|&(x, y)| Circle::new((x, y), 4, c.filled())))?;
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font(label_style())
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.4))
            .draw()?;
        Ok(())
    })?;
    let mut caption = format!(
        "{} request{} in start order",
        pts.len(),
        if pts.len() == 1 { "" } else { "s" }
    );
    if pts.len() < d.requests {
        caption.push_str(&format!(" (evenly picked from {})", d.requests));
    }
    caption.push_str(if plan {
        ": the model's figures under the recorded settings and with plan 1."
    } else {
        ": the model's figures under the recorded settings (no change is predicted to help)."
    });
    if !rpcs {
        caption.push_str(" No RPCs: the storage is not NFS.");
    }
    Ok(Plot::Drawn { svg, caption })
}

/// A line of a plot: its label, colour, whether dashed, and its points.
type Series = (String, RGBColor, bool, Vec<(f64, f64)>);

/// The median of `v` (not empty).
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Why no latency was simulated.
fn no_latency(d: &Diagnosis) -> &'static str {
    if d.baseline.nfs.is_none() {
        "the storage is not NFS, so no latency is simulated (give --mounts FILE, --from-mount OPTS or --nfs-root DIR)"
    } else {
        "no latency was simulated for this capture"
    }
}

/// 4: a plan's simulated TTFB distribution before and after (CDF).
fn ttfb_cdf(d: &Diagnosis, plan: &Plan) -> io::Result<Plot> {
    let Some(Distribution {
        before_ms,
        after_ms,
    }) = plan.predicted.ttfb.as_ref()
    else {
        return Ok(Plot::Absent(format!(
            "Not plotted: no TTFB distribution: {}.",
            no_latency(d)
        )));
    };
    if before_ms.is_empty() && after_ms.is_empty() {
        return Ok(Plot::Absent(
            "Not plotted: no request was served in the simulation.".into(),
        ));
    }
    let all = before_ms.iter().chain(after_ms).copied();
    let lo = all.clone().fold(f64::INFINITY, f64::min).max(0.0);
    let hi = all.fold(0.0, f64::max);
    // a log axis when the quantiles span more than 20x
    let log = lo > 0.0 && hi / lo > 20.0;
    let steps = |q: &[f64]| -> Vec<(f64, f64)> {
        let mut v = Vec::with_capacity(q.len() * 2);
        for (i, &x) in q.iter().enumerate() {
            v.push((x, i as f64));
            v.push((x, (i + 1) as f64));
        }
        v
    };
    let (b, a) = (steps(before_ms), steps(after_ms));
    let rank = plan.rank;
    // the same drawing on a log or a linear axis
    macro_rules! cdf {
        ($xr:expr, $desc:expr) => {
            svg!(|root| {
                let mut chart = chart!(
                    root,
                    $xr,
                    0f64..100f64,
                    70,
                    $desc,
                    "% of requests at most this slow"
                );
                if !b.is_empty() {
                    chart
                        .draw_series(LineSeries::new(b.iter().copied(), BEFORE.stroke_width(4)))?
                        .label("before (recorded settings)")
                        .legend(legend_line(BEFORE));
                }
                // over the wider "before": where they agree both show
                if !a.is_empty() {
                    chart
                        .draw_series(LineSeries::new(a.iter().copied(), AFTER.stroke_width(2)))?
                        .label(format!("after plan {rank}"))
                        .legend(legend_line(AFTER));
                }
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::LowerRight)
                    .label_font(label_style())
                    .background_style(WHITE.mix(0.9))
                    .border_style(BLACK.mix(0.4))
                    .draw()?;
                Ok(())
            })?
        };
    }
    let svg = if log {
        cdf!(
            (lo / 1.3..hi * 1.3).log_scale(),
            "simulated TTFB, ms (log scale)"
        )
    } else {
        let pad = ((hi - lo) * 0.06).max(hi * 0.02).max(0.5);
        cdf!((lo - pad).max(0.0)..hi + pad, "simulated TTFB, ms")
    };
    let mut caption =
        "The simulated time to first byte: the share of requests served within each time."
            .to_string();
    if let (Some(x), Some(y)) = (
        &plan.predicted.before.latency,
        &plan.predicted.after.latency,
    ) {
        caption.push_str(&format!(
            " p50 {} \u{2192} {} ms, p99 {} \u{2192} {} ms.",
            num(x.p50_ms),
            num(y.p50_ms),
            num(x.p99_ms),
            num(y.p99_ms)
        ));
    }
    Ok(Plot::Drawn { svg, caption })
}

/// 5: stall episodes: each request's simulated TTFB over time before and
/// after the best plan, stalls marked (requests past the engine's
/// `stall_above` the median before).
fn stalls(d: &Diagnosis) -> io::Result<Plot> {
    let pts = &d.plots.requests;
    let with: Vec<&RequestPoint> = pts.iter().filter(|p| p.ttfb_before_ms.is_some()).collect();
    if pts.is_empty() || with.is_empty() {
        return Ok(Plot::Absent(format!(
            "Not plotted: no TTFB per request: {}.",
            no_latency(d)
        )));
    }
    let plan = !d.plans.is_empty();
    let (xs, xmax, xdesc) = request_xs(d, pts);
    let before: Vec<(f64, f64)> = xs
        .iter()
        .zip(pts)
        .filter_map(|(x, p)| p.ttfb_before_ms.map(|t| (*x, t)))
        .collect();
    let after: Vec<(f64, f64)> = if plan {
        xs.iter()
            .zip(pts)
            .filter_map(|(x, p)| p.ttfb_after_ms.map(|t| (*x, t)))
            .collect()
    } else {
        Vec::new()
    };
    let med = median(&before.iter().map(|p| p.1).collect::<Vec<_>>());
    let limit = stall_above(med);
    let slow: Vec<(f64, f64)> = before.iter().copied().filter(|p| p.1 > limit).collect();
    let slow_after = after.iter().filter(|p| p.1 > limit).count();
    let max = before
        .iter()
        .chain(&after)
        .map(|p| p.1)
        .fold(limit, f64::max);
    let rows = 3 + usize::from(plan);
    let ymax = room(max, 1.0, 1.12 + 0.11 * rows as f64);
    let markers = pts.len() <= 120;
    let svg = svg!(|root| {
        let mut chart = chart!(
            root,
            0f64..xmax,
            0f64..ymax,
            78,
            xdesc,
            "simulated TTFB, ms"
        );
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, limit), (xmax, limit)],
                10,
                6,
                GUIDE.stroke_width(1),
            ))?
            .label(format!(
                "the stall line: {STALL_FACTOR} \u{d7} the median before, {STALL_EXTRA_MS} ms over it at the least ({} ms)",
                num(limit)
            ))
            .legend(legend_dashed!(GUIDE));
        let mut series = vec![(
            if plan { "TTFB before" } else { "TTFB" }.to_string(),
            BEFORE,
            &before,
        )];
        if plan {
            series.push(("TTFB after plan 1".to_string(), AFTER, &after));
        }
        for (label, c, v) in series {
            chart
                .draw_series(LineSeries::new(v.iter().copied(), c.stroke_width(2)))?
                .label(label)
                .legend(legend_line(c));
            if markers {
                chart.draw_series(v.iter().map(|&(x, y)| Circle::new((x, y), 4, c.filled())))?;
            }
        }
        chart
            .draw_series(
                slow.iter()
                    .map(|&(x, y)| Circle::new((x, y), 8, STALL.stroke_width(2))),
            )?
            .label("stall: past the stall line")
            .legend(legend_ring(STALL));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font(label_style())
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.4))
            .draw()?;
        Ok(())
    })?;
    let mut caption = format!(
        "Median TTFB before: {} ms. {} of {} requests are stalls (slower than {STALL_FACTOR} \u{d7} that and {STALL_EXTRA_MS} ms over it: {} ms)",
        num(med),
        slow.len(),
        before.len(),
        num(limit)
    );
    if plan {
        caption.push_str(&format!("; after plan 1: {slow_after}."));
    } else {
        caption.push('.');
    }
    Ok(Plot::Drawn { svg, caption })
}

fn change_item(s: &Setting) -> String {
    let layer = match s.layer {
        Layer::Php => "php.ini",
        Layer::Mount => "NFS mount option",
        Layer::MountApart => {
            return format!(
                "<code>{}</code> on a mount of its own, <code>{}</code> as now <span class=\"label\">(NFS mount, apart from <code>{}</code>)</span>",
                esc(&s.key),
                esc(&s.value),
                esc(&s.from)
            )
        }
    };
    let recorded = if s.from.is_empty() {
        "unset".to_string()
    } else {
        format!("<code>{}</code>", esc(&s.from))
    };
    if s.value.is_empty() && s.layer == Layer::Mount {
        format!(
            "<code>{}</code> <span class=\"label\">({layer}; recorded: {recorded})</span>",
            esc(&s.key)
        )
    } else {
        format!(
            "<code>{}</code>: {recorded} \u{2192} <code>{}</code> <span class=\"label\">({layer})</span>",
            esc(&s.key),
            esc(&s.value)
        )
    }
}

fn plan_section(pg: &mut Page, d: &Diagnosis, p: &Plan, cdf_absent_said: bool) -> io::Result<()> {
    pg.raw("<section class=\"plan\">\n");
    pg.raw(&format!(
        "<h3>Plan {} <span class=\"badge risk-{r}\">risk: {r}</span> <code>{}</code></h3>\n",
        p.rank,
        esc(&assignments(&p.changes)),
        r = risk_word(p.risk)
    ));
    pg.el("h4", "Changes");
    pg.list(p.changes.iter().map(change_item));
    pg.el("h4", "Predicted (before \u{2192} after)");
    pg.list(
        effect_parts(&p.effect, d.requests)
            .iter()
            .map(|s| arrows(s)),
    );
    if !p.snippets.php_ini.is_empty() {
        pg.el("h4", "php.ini");
        pg.el("pre", &p.snippets.php_ini.join("\n"));
    }
    if !p.snippets.fpm_pool.is_empty() {
        pg.el("h4", "or in the php-fpm pool (wins over php.ini)");
        pg.el("pre", &p.snippets.fpm_pool.join("\n"));
    }
    if !p.snippets.set_at.is_empty() {
        pg.list(p.snippets.set_at.iter().map(|(k, at)| {
            format!(
                "<span class=\"label\">Note:</span> <code>{}</code> is set at <code>{}</code>: change it there",
                esc(k),
                esc(at)
            )
        }));
    }
    if let Some(m) = &p.snippets.mount_options {
        pg.el("h4", "Mount options (fstab's fourth field)");
        pg.el("pre", m);
    }
    if !p.snippets.apart_mounts.is_empty() {
        pg.el("h4", "Mounts of their own (today's options)");
        pg.el(
            "pre",
            &p.snippets
                .apart_mounts
                .iter()
                .map(|(d, o)| format!("{d}  {o}"))
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
    if !p.risks.is_empty() {
        pg.el("h4", "Risk");
        pg.list(p.risks.iter().map(|r| esc(r)));
    }
    if !p.deploy.is_empty() {
        pg.el("h4", "Deploy");
        pg.list(p.deploy.iter().map(|r| esc(r)));
    }
    if !p.verify.is_empty() {
        pg.el("h4", "Verify");
        pg.list(p.verify.iter().map(|v| {
            let how = match v.source {
                CounterSource::Syscalls => "strace -c -f, or statstorm analyze of a new capture",
                CounterSource::NfsOps => "nfsstat -c or /proc/self/mountstats",
            };
            format!(
                "<code>{}</code> per request ({}) should fall from {} to about {}",
                esc(&v.counter),
                esc(how),
                num(v.per_request_before),
                num(v.per_request_after)
            )
        }));
    }
    if p.rank == 1 {
        pg.plot(
            "Per request: metadata calls and RPCs before and after plan 1",
            requests(d)?,
        );
        pg.plot(
            "Stall episodes: TTFB per request before and after plan 1",
            stalls(d)?,
        );
    }
    if p.predicted.ttfb.is_some() || !cdf_absent_said {
        pg.plot(
            &format!("TTFB distribution before and after plan {}", p.rank),
            ttfb_cdf(d, p)?,
        );
    }
    pg.raw("</section>\n");
    Ok(())
}

/// The diagnosis as one self-contained HTML page.
pub fn html(d: &Diagnosis, out: &mut dyn io::Write) -> io::Result<()> {
    let mut pg = Page(String::with_capacity(256 * 1024));
    let title = match d.inputs.first() {
        Some(i) => format!("statstorm diagnose: {}", i.rsplit('/').next().unwrap_or(i)),
        None => "statstorm diagnose".to_string(),
    };
    pg.raw("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    pg.raw("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n");
    pg.raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    pg.el("title", &title);
    pg.raw(&format!("<style>\n{CSS}</style>\n</head>\n<body>\n"));

    // header
    pg.raw("<header>\n");
    pg.el("h1", "statstorm diagnose");
    pg.raw("<dl class=\"head\">\n");
    pg.el("dt", "Inputs");
    pg.el("dd", &d.inputs.join(", "));
    pg.el("dt", "Requests");
    pg.el("dd", &format!("{} ({})", d.requests, d.split));
    pg.el("dt", "Storage");
    match &d.baseline.nfs {
        Some(m) => pg.el("dd", &format!("NFS under {} ({})", m.root, m.options)),
        None => pg.el("dd", "not NFS (no mount given)"),
    }
    if let Some(p) = &d.pool {
        let children = p
            .max_children
            .map_or("pm.max_children not stated".to_string(), |n| {
                format!("pm.max_children {n}")
            });
        pg.el("dt", "php-fpm pool");
        pg.raw("<dd>");
        pg.raw(&esc(&format!(
            "[{}] of {}: {children}, listen.backlog {}, {} php values the model uses",
            p.name,
            p.file,
            p.listen_backlog,
            p.php.len()
        )));
        for s in &p.skipped {
            pg.raw(&format!("<br>skipped: {}", esc(s)));
        }
        pg.raw("</dd>\n");
    }
    pg.el("dt", "Now");
    if d.summary.is_some() {
        pg.el(
            "dd",
            &format!(
                "{} metadata calls in the table (totals only)",
                d.baseline.recorded.metadata_calls
            ),
        );
    } else {
        pg.el("dd", &figures_line(&d.baseline.modelled, d.requests));
    }
    pg.raw("</dl>\n");
    if let Some(m) = d.baseline.nfs.as_ref().filter(|m| !m.unknown.is_empty()) {
        pg.el(
            "p class=\"warn\"",
            &format!("Warning: {}.", crate::diagnose::unknown_options(&m.unknown)),
        );
    }
    let bc = &d.baseline.before_check;
    if bc.requests_beyond > 0 {
        pg.el(
            "p class=\"warn\"",
            &format!(
                "Warning: the model's figures under the recorded settings differ from the recorded calls on {} of {} requests: check {} (give the php.ini the capture ran under).",
                bc.requests_beyond,
                bc.requests,
                bc.suspects.join(", ")
            ),
        );
    }
    pg.raw("</header>\n");

    if let Some(s) = &d.summary {
        unknown_section(&mut pg, d);
        pg.el("h2", "Metadata calls in the table");
        pg.raw("<table>\n<tr><th>syscall</th><th>calls</th><th>errors</th></tr>\n");
        for r in s
            .rows
            .iter()
            .filter(|r| d.baseline.recorded.syscalls.contains_key(&r.name))
        {
            pg.raw(&format!(
                "<tr><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
                esc(&r.name),
                r.calls,
                r.errors
            ));
        }
        pg.raw("</table>\n");
        pg.el(
            "p class=\"absent\"",
            "No plots: an strace -c table holds totals only, with no times, paths or requests to plot.",
        );
        assumed_section(&mut pg, d);
        return finish(pg, out);
    }

    counters_section(&mut pg, d);

    // what is wrong
    pg.el("h2", "What is wrong");
    if d.findings.is_empty() {
        pg.el("p", "Nothing the models can attribute to a setting.");
    } else {
        pg.raw("<ol class=\"findings\">\n");
        for f in &d.findings {
            let sev = severity_word(f.severity);
            // the summary is the name and the share
            let n = name(&f.kind);
            let sum = summary(f);
            let share = sum.strip_prefix(n).unwrap_or(&sum).trim();
            pg.raw(&format!(
                "<li><h3><span class=\"badge sev-{sev}\">{sev}</span>{} <span class=\"share\">{}</span></h3>\n",
                esc(n),
                esc(share)
            ));
            pg.el("p", &mechanism(&f.kind));
            pg.raw(&format!(
                "<p><span class=\"label\">Evidence:</span> {}</p>\n</li>\n",
                esc(&evidence(f))
            ));
        }
        pg.raw("</ol>\n");
    }
    pg.plot("Metadata calls per second", timeline(d)?);
    pg.plot("Directories with the most metadata calls", top_dirs(d)?);

    // what to change
    pg.el("h2", "What to change (best first)");
    if d.plans.is_empty() {
        pg.el("p", "No candidate change is predicted to help.");
        pg.plot("Per request: metadata calls and RPCs", requests(d)?);
        pg.plot("Stall episodes: TTFB per request", stalls(d)?);
    } else {
        // one sentence for all plans when none has a distribution
        let none = d.plans.iter().all(|p| p.predicted.ttfb.is_none());
        if none {
            pg.el(
                "p class=\"absent\"",
                &format!("No TTFB distributions plotted: {}.", no_latency(d)),
            );
        }
        for p in &d.plans {
            plan_section(&mut pg, d, p, none)?;
        }
    }

    if !d.will_not_help.is_empty() {
        pg.el("h2", "Will not help here (predicted)");
        pg.raw("<table>\n<tr><th>change</th><th>predicted</th></tr>\n");
        for n in &d.will_not_help {
            pg.raw(&format!(
                "<tr><td><code>{}</code>{}{}</td><td>{}</td></tr>\n",
                esc(&assignments(&n.changes)),
                if n.worse { " (makes it worse)" } else { "" },
                if n.hypothetical {
                    " (in no released kernel)"
                } else {
                    ""
                },
                arrows(&effect_parts(&n.effect, d.requests).join("; "))
            ));
        }
        pg.raw("</table>\n");
    }
    if !d.unavailable.is_empty() {
        pg.el(
            "h2",
            "In no released Linux kernel (predicted for comparison)",
        );
        pg.raw("<table>\n<tr><th>change</th><th>predicted</th></tr>\n");
        for n in &d.unavailable {
            pg.raw(&format!(
                "<tr><td><code>{}</code></td><td>{}</td></tr>\n",
                esc(&assignments(&n.changes)),
                arrows(&effect_parts(&n.effect, d.requests).join("; "))
            ));
        }
        pg.raw("</table>\n");
    }
    if !d.not_proposed.is_empty() {
        pg.el("h2", "Not proposed");
        pg.list(not_proposed_groups(d).into_iter().map(|(why, changes)| {
            format!(
                "{}: {}",
                changes
                    .iter()
                    .map(|c| format!("<code>{}</code>", esc(c)))
                    .collect::<Vec<_>>()
                    .join(", "),
                esc(why)
            )
        }));
    }
    unknown_section(&mut pg, d);
    assumed_section(&mut pg, d);
    finish(pg, out)
}

fn unknown_section(pg: &mut Page, d: &Diagnosis) {
    if !d.unknown.is_empty() {
        pg.el("h2", "Could not determine");
        pg.list(d.unknown.iter().map(|u| esc(unknown(*u))));
    }
}

/// The NFS client's counters beside the model's RPCs.
fn counters_section(pg: &mut Page, d: &Diagnosis) {
    if d.counters.is_empty() {
        return;
    }
    pg.el("h2", "Measured by the NFS client");
    for c in &d.counters {
        let w = crate::diagnose::counters_words(c);
        pg.el("p", &w.headline);
        for x in [&w.warning, &w.slot_warning].into_iter().flatten() {
            pg.el("p class=\"warn\"", x);
        }
        if let Some(t) = &w.transport {
            pg.el("p", t);
        }
        if c.mix.is_empty() {
            pg.el("p", &w.mix);
            continue;
        }
        pg.raw("<table>\n<tr><th>RPC</th><th>modelled</th><th>share</th><th>measured</th><th>share</th></tr>\n");
        for r in &c.mix {
            pg.raw(&format!(
                "<tr><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{:.0}%</td><td class=\"num\">{}</td><td class=\"num\">{:.0}%</td></tr>\n",
                esc(&r.op),
                r.modelled,
                r.modelled_share * 100.0,
                r.measured,
                r.measured_share * 100.0
            ));
        }
        pg.raw("</table>\n");
        if c.compared != statstorm_engine::diagnose::Compared::Yes {
            pg.el("p", &w.mix);
        }
    }
}

fn assumed_section(pg: &mut Page, d: &Diagnosis) {
    if d.assumed.is_empty() {
        return;
    }
    pg.el("h2", "Assumed (state them for a sharper answer)");
    pg.raw("<table>\n<tr><th>what</th><th>value</th><th>from</th><th>how to state it</th></tr>\n");
    for a in &d.assumed {
        let basis = match (a.topic, a.basis) {
            (Topic::Php, Basis::Inferred) => "read from the trace",
            (Topic::Php, Basis::Default) => "PHP 8.2's default",
            (_, Basis::Inferred) => "inferred",
            (_, Basis::Default) => "default",
            (_, Basis::Measured) => "measured",
        };
        pg.raw(&format!(
            "<tr><td><code>{}</code></td><td>{}</td><td>{basis}</td><td>{}</td></tr>\n",
            esc(&a.what),
            if a.value.is_empty() {
                "<span class=\"empty\">(empty)</span>".to_string()
            } else {
                format!("<code>{}</code>", esc(&a.value))
            },
            esc(&a.supply)
        ));
    }
    pg.raw("</table>\n");
}

fn finish(mut pg: Page, out: &mut dyn io::Write) -> io::Result<()> {
    pg.raw(&format!(
        "<footer>{} (statstorm.diagnose/1): predictions of statstorm's models, not measurements.</footer>\n</body>\n</html>\n",
        esc("statstorm diagnose")
    ));
    out.write_all(pg.0.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_text() {
        assert_eq!(
            esc("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(arrows("1 -> 2"), "1 \u{2192} 2");
    }

    #[test]
    fn frame_colour_only_on_plot_frames() {
        let hex = format!("#{:02x}{:02x}{:02x}", FRAME[0], FRAME[1], FRAME[2]);
        assert_eq!(CSS.matches(&hex).count(), 1);
        assert!(CSS.contains(&format!(
            "figure.plot{{display:block;width:{}px;height:{}px;border:3px solid {hex}",
            PLOT_WIDTH + 6,
            PLOT_HEIGHT + 6
        )));
        for c in [
            METADATA, BURST, BARS, BEFORE, AFTER, RPC_BEFORE, RPC_AFTER, STALL, GUIDE,
        ] {
            assert_ne!([c.0, c.1, c.2], FRAME);
        }
    }

    #[test]
    fn shortens_from_the_left() {
        assert_eq!(shorten("/a/b", 10), "/a/b");
        assert_eq!(shorten("/abcdefghij", 5), "\u{2026}ghij");
    }
}
