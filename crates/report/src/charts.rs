//! Charts drawn with plotters: SVG always, PNG for the IO position scatter (a bitmap suits
//! thousands of points). Text uses the bundled DejaVu Sans, registered through plotters'
//! `ab_glyph` feature, so no system font is needed.

use std::path::Path;
use std::sync::OnceLock;

use ioblame_attrib::{ActId, Dir, RoleId, Tables, Via};
use ioblame_counters::{CounterSet, CounterSpec, Field, SLOTS};
use plotters::coord::ranged1d::Ranged;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::agg::{Aggregates, Sampler, LAT_BUCKETS};
use crate::error::{ChartError, ReportError};
use crate::util::{act_comm, label};

/// The bundled font (DejaVu Sans, see `assets/DejaVuSans-LICENSE.txt`).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
/// The family name charts ask for; the bundled font is registered under it.
pub(crate) const FAMILY: &str = "sans-serif";

/// Chart size in pixels.
pub(crate) const SIZE: (u32, u32) = (900, 420);

/// Registers the bundled font once.
pub(crate) fn register_font() -> Result<(), ReportError> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok()
            && plotters::style::register_font(FAMILY, FontStyle::Bold, FONT).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(ReportError::Font)
    }
}

/// Series colours (colour-blind friendly, Okabe-Ito).
const COLORS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(0, 0, 0),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// Colour of a direction class in the position chart.
pub(crate) fn dir_color(d: Dir) -> RGBColor {
    match d {
        Dir::R => RGBColor(0, 114, 178),
        Dir::A => RGBColor(0, 158, 115),
        Dir::W => RGBColor(213, 94, 0),
    }
}

/// What drawing a chart gives.
pub(crate) type DrawResult = Result<(), ChartError>;

/// Renders a chart into an SVG string.
pub(crate) fn svg_string(
    path: &Path,
    draw: impl FnOnce(DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult,
) -> Result<String, ReportError> {
    register_font()?;
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, SIZE).into_drawing_area();
        draw(root).map_err(|e| ReportError::chart(path, e))?;
    }
    Ok(s)
}

/// Renders a chart into a PNG file.
pub(crate) fn png_file(
    path: &Path,
    draw: impl FnOnce(DrawingArea<BitMapBackend<'_>, Shift>) -> DrawResult,
) -> Result<(), ReportError> {
    register_font()?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    draw(root).map_err(|e| ReportError::chart(path, e))
}

/// Text sizes on the 900x420 canvas (the SVG backend writes about 0.8 of them as
/// `font-size`). The page shows charts at their own size unless the window holds two side by
/// side, so labels stay at 12 px or more.
const CAPTION_PX: u32 = 22;
pub(crate) const LABEL_PX: u32 = 16;
pub(crate) const DESC_PX: u32 = 17;
pub(crate) const LEGEND_PX: u32 = 15;

pub(crate) fn caption_style() -> TextStyle<'static> {
    (FAMILY, CAPTION_PX).into_font().into()
}

/// How much taller than the data the y axis is, so that a legend of `n` entries in the upper
/// right corner does not cover the data: the legend takes about `n * 22 + 12` px of the
/// ~300 px plot.
fn headroom(n: usize) -> f64 {
    let legend = (n as f64 * 22.0 + 12.0) / 300.0;
    1.1 / (1.0 - legend.min(0.6))
}

/// A y tick label for a count: integers only (fractional ticks stay unlabelled).
fn count_label(y: &f64) -> String {
    if (y - y.round()).abs() < 1e-6 && *y >= 0.0 {
        format!("{y:.0}")
    } else {
        String::new()
    }
}

/// A boundary value of a counter in its unit, short.
fn bound_label(field: Field, v: u64) -> String {
    match field {
        Field::Size => {
            if v >= 1 << 20 && v % (1 << 20) == 0 {
                format!("{}M", v >> 20)
            } else if v >= 1024 && v % 1024 == 0 {
                format!("{}K", v >> 10)
            } else {
                format!("{v}")
            }
        }
        Field::WaitTime | Field::IoTime => {
            if v >= 1000 && v % 100 == 0 {
                format!("{}ms", v as f64 / 1000.0)
            } else {
                format!("{v}µs")
            }
        }
        Field::Offset | Field::SeekDist => format!("{:.1}%", v as f64 * 100.0 / 65536.0),
    }
}

/// The x axis description of a counter's histogram.
fn field_desc(field: Field) -> &'static str {
    match field {
        Field::Size => "IO size (bytes; slot boundaries)",
        Field::WaitTime => "wait time, queued -> issued (slot boundaries)",
        Field::IoTime => "device time, issued -> completed (slot boundaries)",
        Field::Offset => "offset on the device (% of the device; slot boundaries)",
        Field::SeekDist => "seek distance (% of the device; slot boundaries)",
    }
}

/// A label for an act in legends: `comm #intent act N`.
pub(crate) fn act_label(t: &Tables, id: ActId) -> String {
    let intent = t.act(id).map_or(0, |a| a.intent.0);
    // `act_comm` is already escaped: cut it without escaping it twice.
    let comm = act_comm(t, id);
    let mut short: String = comm.chars().take(16).collect();
    if comm.chars().count() > 16 {
        short.push('…');
    }
    format!("{short} #{intent} (act {id})")
}

/// One counter's eight-slot histogram for the given acts, as grouped bars.
pub(crate) fn counter_chart<DB: DrawingBackend<ErrorType: 'static>>(
    root: DrawingArea<DB, Shift>,
    index: usize,
    spec: &CounterSpec,
    series: &[(String, [u64; SLOTS])],
) -> DrawResult {
    root.fill(&WHITE)?;
    let ymax = series
        .iter()
        .flat_map(|(_, h)| h.iter().copied())
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * headroom(series.len());
    let mut title = format!("counter #{index}: {spec}");
    if title.chars().count() > 90 {
        title = label(&title, 90);
    }
    let mut chart = ChartBuilder::on(&root)
        .caption(title, caption_style())
        .margin(12)
        .x_label_area_size(55)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..SLOTS as f64, 0f64..ymax)?;
    let field = spec.field;
    let bounds = spec.bounds;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(SLOTS + 1)
        .x_label_formatter(&|x| {
            let k = x.round() as usize;
            if (x - x.round()).abs() > 1e-6 || k > SLOTS {
                String::new()
            } else if k == SLOTS && bounds[SLOTS] == 0 {
                "∞".to_string()
            } else {
                bound_label(field, bounds[k])
            }
        })
        .y_label_formatter(&count_label)
        .x_desc(field_desc(field))
        .y_desc("IOs")
        .label_style((FAMILY, LABEL_PX))
        .axis_desc_style((FAMILY, DESC_PX))
        .draw()?;
    let n = series.len().max(1) as f64;
    let w = 0.8 / n;
    for (j, (name, h)) in series.iter().enumerate() {
        let c = color(j);
        chart
            .draw_series((0..SLOTS).map(|s| {
                let x0 = s as f64 + 0.1 + j as f64 * w;
                Rectangle::new([(x0, 0.0), (x0 + w, h[s] as f64)], c.filled())
            }))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    legend(&mut chart)?;
    Ok(root.present()?)
}

fn legend<'a, DB: DrawingBackend<ErrorType: 'static> + 'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
) -> DrawResult {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FAMILY, LEGEND_PX))
        .draw()?;
    Ok(())
}
/// The acts of a counter's chart: the `max` acts of `acts` with the most IOs counted by that
/// counter (ties keep the order of `acts`, most bytes first), leaving out acts it did not
/// count.
pub(crate) fn counter_series(
    t: &Tables,
    set: &CounterSet,
    counter: usize,
    acts: &[ActId],
    max: usize,
) -> Vec<(String, [u64; SLOTS])> {
    let mut v: Vec<(u64, ActId, [u64; SLOTS])> = acts
        .iter()
        .filter_map(|&a| {
            let h = set.histogram(a, counter)?;
            let n: u64 = h.iter().sum();
            (n > 0).then_some((n, a, *h))
        })
        .collect();
    // Stable: equal counts keep the byte order.
    v.sort_by_key(|x| std::cmp::Reverse(x.0));
    v.into_iter()
        .take(max)
        .map(|(_, a, h)| (act_label(t, a), h))
        .collect()
}

/// The throughput chart's bucket width, chosen from the trace's length: the smallest
/// multiple of the aggregate's width that cuts the time span into at most
/// [`CHART_BUCKETS`] buckets (a 0.3 s trace gets 10 ms buckets, a 1 h trace 80 s ones);
/// returns (aggregate buckets merged per chart bucket, chart buckets).
pub(crate) fn chart_buckets(agg: &Aggregates) -> (u64, u64) {
    let k = (agg.end / agg.bucket_ns + 1).div_ceil(CHART_BUCKETS).max(1);
    (k, agg.end / (agg.bucket_ns * k) + 1)
}

/// Buckets of the throughput chart: enough to show the shape, few enough that each holds
/// several IOs.
const CHART_BUCKETS: u64 = 48;

/// Throughput over time as a stacked area: one layer per role in `roles` (the first at the
/// bottom), then the other roles together, in MiB/s per bucket.
pub(crate) fn throughput_chart<DB: DrawingBackend<ErrorType: 'static>>(
    root: DrawingArea<DB, Shift>,
    t: &Tables,
    agg: &Aggregates,
    roles: &[RoleId],
) -> DrawResult {
    root.fill(&WHITE)?;
    let (k, n_buckets) = chart_buckets(agg);
    let bucket_ns = agg.bucket_ns * k;
    let width_s = bucket_ns as f64 / 1e9;
    // Bytes per layer and bucket: the roles charted, then everyone else.
    let mut layers = vec![vec![0u64; n_buckets as usize]; roles.len() + 1];
    for (&(b, role), &bytes) in &agg.role_buckets {
        let layer = roles.iter().position(|&r| r == role).unwrap_or(roles.len());
        if let Some(x) = layers[layer].get_mut((b / k) as usize) {
            *x += bytes;
        }
    }
    let mut names: Vec<String> = roles
        .iter()
        .map(|&r| {
            t.role(r).map_or_else(
                || "?".to_string(),
                |x| format!("{} ({})", label(&x.comm, 16), x.tid),
            )
        })
        .collect();
    names.push("other roles".into());
    let others = layers.last().is_some_and(|l| l.iter().any(|&b| b > 0));
    // Cumulative MiB/s: layer j's top edge is the sum of layers 0..=j.
    let mut tops: Vec<Vec<f64>> = Vec::with_capacity(layers.len());
    let mut acc = vec![0f64; n_buckets as usize];
    for l in &layers {
        for (a, &b) in acc.iter_mut().zip(l) {
            *a += b as f64 / 1048576.0 / width_s;
        }
        tops.push(acc.clone());
    }
    let ymax = acc.iter().copied().fold(0f64, f64::max);
    let xmax = (n_buckets as f64 * width_s).max(width_s);
    let n_series = roles.len() + usize::from(others);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Throughput per role ({} buckets)",
                crate::util::human_us(bucket_ns / 1000)
            ),
            caption_style(),
        )
        .margin(12)
        .x_label_area_size(55)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..xmax, 0f64..(ymax.max(0.001) * headroom(n_series)))?;
    chart
        .configure_mesh()
        .x_desc("time since start (s)")
        .y_desc("throughput (MiB/s)")
        .label_style((FAMILY, LABEL_PX))
        .axis_desc_style((FAMILY, DESC_PX))
        .draw()?;
    // Steps: each bucket is flat over its width. Drawn top layer first, so that each lower
    // layer paints over the part of the area below its edge.
    for j in (0..tops.len()).rev() {
        if j == roles.len() && !others {
            continue;
        }
        let c = if j == roles.len() {
            RGBColor(170, 170, 170)
        } else {
            color(j)
        };
        let pts: Vec<(f64, f64)> = tops[j]
            .iter()
            .enumerate()
            .flat_map(|(b, &y)| [(b as f64 * width_s, y), ((b + 1) as f64 * width_s, y)])
            .collect();
        chart
            .draw_series(AreaSeries::new(pts, 0.0, c.mix(0.85)).border_style(c.stroke_width(1)))?
            .label(names[j].clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], c.filled()));
    }
    legend(&mut chart)?;
    Ok(root.present()?)
}

/// One device's IO position over time (seekwatcher style), one colour per direction class.
/// `title` names the device; the time axis spans the whole report (`agg.end`) so the
/// charts of several devices line up.
pub(crate) fn offset_chart<DB: DrawingBackend<ErrorType: 'static>>(
    root: DrawingArea<DB, Shift>,
    agg: &Aggregates,
    sample: &Sampler,
    title: &str,
) -> DrawResult {
    root.fill(&WHITE)?;
    let xmax = (agg.end as f64 / 1e9).max(0.001) * 1.02;
    let mut chart = ChartBuilder::on(&root)
        .caption(label(title, 80), caption_style())
        .margin(12)
        .x_label_area_size(55)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..xmax, 0f64..100f64)?;
    chart
        .configure_mesh()
        .x_desc("time since start (s)")
        .y_desc("offset (% of the device)")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style((FAMILY, LABEL_PX))
        .axis_desc_style((FAMILY, DESC_PX))
        .draw()?;
    for (d, name) in [(Dir::R, "read"), (Dir::A, "readahead"), (Dir::W, "write")] {
        // Directions without IO on this device stay out of the legend.
        if !sample.points.iter().any(|p| p.dir == d) {
            continue;
        }
        let c = dir_color(d);
        chart
            .draw_series(sample.points.iter().filter(|p| p.dir == d).map(|p| {
                Circle::new(
                    (p.t as f64 / 1e9, p.offset as f64 * 100.0 / 65536.0),
                    2,
                    c.filled(),
                )
            }))?
            .label(name)
            .legend(move |(x, y)| Circle::new((x + 6, y), 4, c.filled()));
    }
    legend(&mut chart)?;
    Ok(root.present()?)
}

/// Latency distribution per via class: `which` 0 = wait time, 1 = device time.
pub(crate) fn latency_chart<DB: DrawingBackend<ErrorType: 'static>>(
    root: DrawingArea<DB, Shift>,
    agg: &Aggregates,
    which: usize,
) -> DrawResult {
    root.fill(&WHITE)?;
    let hists = &agg.latency[which.min(1)];
    let last = hists
        .iter()
        .flat_map(|h| h.iter().rposition(|&c| c != 0))
        .max()
        .unwrap_or(1)
        .max(1);
    let n_series = hists.iter().filter(|h| h.iter().any(|&c| c != 0)).count();
    let ymax =
        hists.iter().flatten().copied().max().unwrap_or(0).max(1) as f64 * headroom(n_series);
    let title = if which == 0 {
        "Wait time (queued -> issued) by via class"
    } else {
        "Device time (issued -> completed) by via class"
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, caption_style())
        .margin(12)
        .x_label_area_size(55)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..(last + 1) as f64, 0f64..ymax)?;
    chart
        .configure_mesh()
        // At most 12 labels: more would overlap.
        .x_labels((last + 2).min(LAT_BUCKETS).min(12))
        .x_label_formatter(&|x| {
            let k = x.round();
            if (x - k).abs() > 1e-6 || k < 0.0 {
                return String::new();
            }
            // Bucket k holds [2^(k-1), 2^k) µs; label its lower edge.
            let lo = if k < 1.0 { 0 } else { 1u64 << (k as u32 - 1) };
            if lo < 1000 {
                format!("{lo}µs")
            } else if lo < 10_000 {
                format!("{:.1}ms", lo as f64 / 1e3)
            } else if lo < 1_000_000 {
                format!("{:.0}ms", lo as f64 / 1e3)
            } else {
                format!("{:.1}s", lo as f64 / 1e6)
            }
        })
        .y_label_formatter(&count_label)
        .x_desc("latency (µs, log2 buckets: lower edge)")
        .y_desc("IOs")
        .label_style((FAMILY, LABEL_PX))
        .axis_desc_style((FAMILY, DESC_PX))
        .draw()?;
    for (j, (via, h)) in Via::ALL.iter().zip(hists).enumerate() {
        if h.iter().all(|&c| c == 0) {
            continue;
        }
        let c = color(j);
        let pts: Vec<(f64, f64)> = (0..=last).map(|k| (k as f64 + 0.5, h[k] as f64)).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
            .label(via.name())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart.draw_series(
            pts.into_iter()
                .filter(|p| p.1 > 0.0)
                .map(|p| Circle::new(p, 3, c.filled())),
        )?;
    }
    legend(&mut chart)?;
    Ok(root.present()?)
}
