//! The report's latency section: btt's breakdown (`ioblame latency`'s table, computed by
//! the caller with `ioblame_latency`) as `latency.txt`, and a chart of each device's Q2C and
//! D2C percentiles, `charts/latency-percentiles.svg`. Both go into the page with the other
//! charts ([`crate::ReportWriter::set_latency`] is the hook; nothing else of the page knows
//! about it).

use std::path::Path;

use ioblame_latency::{Interval, Latency};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::charts::{self, DrawResult, FAMILY};
use crate::error::ReportError;
use crate::html;
use crate::util::html_escape;
use crate::ReportFiles;

/// What the caller computed: the breakdown, its text table, and the devices' names.
#[derive(Debug, Clone)]
pub struct LatencySection {
    /// The breakdown.
    pub latency: Latency,
    /// `ioblame latency`'s text table of it.
    pub text: String,
    /// Device names (kernel device number, name), for the chart's legend.
    pub dev_names: Vec<(u32, String)>,
}

/// Devices drawn in the chart (the ones with the most Q2C values).
const CHART_DEVICES: usize = 4;

/// The points of each line: p50, p95, p99, max.
const POINTS: [&str; 4] = ["p50", "p95", "p99", "max"];

/// One line of the chart: its label and its four values (µs).
type Line = (String, [f64; 4]);

fn lines(s: &LatencySection) -> Vec<Line> {
    let mut devs: Vec<_> = s.latency.devices.iter().collect();
    devs.sort_by_key(|(d, b)| (std::cmp::Reverse(b.get(Interval::Q2C).n), *d));
    let mut v = Vec::new();
    for (dev, b) in devs.into_iter().take(CHART_DEVICES) {
        let name = s.dev_names.iter().find(|(d, _)| d == dev).map_or_else(
            || ioblame_latency::output::dev_str(*dev),
            |(_, n)| n.clone(),
        );
        for i in [Interval::Q2C, Interval::D2C, Interval::Q2Cdm] {
            let st = b.get(i);
            if st.n == 0 {
                continue;
            }
            let p = |q: f64| st.percentile(q).unwrap_or(0) as f64 / 1000.0;
            v.push((
                format!("{name} {}", i.name()),
                [p(50.0), p(95.0), p(99.0), st.max as f64 / 1000.0],
            ));
        }
    }
    v
}

fn chart<DB: DrawingBackend<ErrorType: 'static>>(
    root: DrawingArea<DB, Shift>,
    lines: &[Line],
) -> DrawResult {
    root.fill(&WHITE)?;
    let all = lines.iter().flat_map(|l| l.1).filter(|&v| v > 0.0);
    let lo = all.clone().fold(f64::INFINITY, f64::min);
    let hi = all.fold(0f64, f64::max);
    let (lo, hi) = if hi > 0.0 {
        (lo / 2.0, hi * 2.0)
    } else {
        (1.0, 10.0)
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Q2C and D2C percentiles per device (btt's definitions)",
            (FAMILY, 22),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.2f64..3.2f64, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .x_labels(4)
        .x_label_formatter(&|x| {
            let k = x.round();
            if (x - k).abs() > 1e-6 || !(0.0..=3.0).contains(&k) {
                return String::new();
            }
            POINTS[k as usize].to_string()
        })
        .y_label_formatter(&|y| {
            if *y < 1000.0 {
                format!("{y:.0}µs")
            } else if *y < 1e6 {
                format!("{:.1}ms", y / 1e3)
            } else {
                format!("{:.1}s", y / 1e6)
            }
        })
        .y_desc("latency (log scale)")
        .label_style((FAMILY, 16))
        .axis_desc_style((FAMILY, 17))
        .draw()?;
    for (j, (name, vals)) in lines.iter().enumerate() {
        let c = Palette99::pick(j).to_rgba();
        let pts: Vec<(f64, f64)> = vals
            .iter()
            .enumerate()
            .filter(|(_, &v)| v > 0.0)
            .map(|(k, &v)| (k as f64, v))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FAMILY, 15))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(root.present()?)
}

/// Writes `latency.txt` and `charts/latency-percentiles.svg`; returns the page's markup
/// (title, html): the chart and the table.
pub(crate) fn write(
    s: &LatencySection,
    files: &mut ReportFiles,
) -> Result<(String, String), ReportError> {
    let txt = files.dir.join("latency.txt");
    // Not one of `files.tables` (the Parquet tables): the page holds the same text.
    std::fs::write(&txt, &s.text).map_err(|e| ReportError::io(&txt, e))?;
    let path = files.dir.join("charts/latency-percentiles.svg");
    let ls = lines(s);
    let svg = charts::svg_string(&path, |root| chart(root, &ls))?;
    write_file(&path, &svg)?;
    files.charts.push(path);
    let markup = format!(
        "{}\n<pre class=latency>{}</pre>",
        html::inline_svg(&svg),
        html_escape(&s.text)
    );
    Ok((
        "Latency breakdown (btt's Q2Q .. Q2C, per device, process and act)".into(),
        markup,
    ))
}

fn write_file(path: &Path, data: &str) -> Result<(), ReportError> {
    std::fs::write(path, data).map_err(|e| ReportError::io(path, e))
}
