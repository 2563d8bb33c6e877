//! The page's per-cgroup section, for traces that recorded cgroups: bytes and IOs per
//! cgroup of the task charged (`ioblame_attrib::per_cgroup`, as `acts --by cgroup`), as a
//! table and as a bar chart (`charts/cgroups.svg`).

use std::fmt::Write as _;

use ioblame_attrib::{per_cgroup, CgroupNames, CgroupTotals, Tables};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::charts::{self, DrawResult, FAMILY};
use crate::util::{html_escape as esc, human_bytes, printable};

/// Cgroups drawn in the chart (the table lists them all).
pub(crate) const CHART_CGROUPS: usize = 12;

/// What stands for the acts whose cgroup is unknown.
const UNKNOWN: &str = "-";

/// The rows of the section, most bytes first, from the shown tables and the trace's cgroup
/// names; `None` when the trace recorded no cgroups (no section).
pub(crate) fn rows<'a>(
    t: &'a Tables,
    names: Option<&'a CgroupNames>,
) -> Option<Vec<CgroupTotals<'a>>> {
    let names = names?;
    // The shown tables count only the IOs given to the report (the recorder's when asked).
    Some(per_cgroup(t, Some(names), true))
}

/// A cgroup's name in the page and chart.
fn name(r: &CgroupTotals<'_>) -> String {
    r.cgroup
        .map_or_else(|| UNKNOWN.to_string(), |p| printable(p).into_owned())
}

/// The section's table: cgroup, bytes and IOs read (readahead included) and written, acts.
pub(crate) fn table(rows: &[CgroupTotals<'_>]) -> String {
    let mut o = String::from(
        "<div class=scroll><table class=sortable id=cgroups><thead><tr><th>cgroup</th>\
<th>read</th><th>read IOs</th><th>written</th><th>write IOs</th><th>acts</th></tr></thead><tbody>\n",
    );
    for r in rows {
        let t = &r.totals;
        let (rb, ri) = (t.bytes[0] + t.bytes[1], t.ios[0] + t.ios[1]);
        let _ = write!(o, "<tr><td class=p>{}</td>", esc(&name(r)));
        for (v, text) in [
            (rb, human_bytes(rb)),
            (ri, ri.to_string()),
            (t.bytes[2], human_bytes(t.bytes[2])),
            (t.ios[2], t.ios[2].to_string()),
            (r.acts, r.acts.to_string()),
        ] {
            let _ = write!(o, "<td class=n data-v=\"{v}\">{}</td>", esc(&text));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n");
    o
}

/// A label of at most `max` characters that keeps the end of a path (the unit's name):
/// `…/nginx.service`.
fn tail_label(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let mut out = String::from("…");
    out.extend(s.chars().skip(n - (max - 1)));
    out
}

/// Bytes per cgroup as horizontal bars, written and read (readahead included) side by
/// side, for the first [`CHART_CGROUPS`] rows (most bytes at the top).
pub(crate) fn chart<DB: DrawingBackend<ErrorType: 'static>>(
    root: DrawingArea<DB, Shift>,
    rows: &[CgroupTotals<'_>],
) -> DrawResult {
    root.fill(&WHITE)?;
    let rows = &rows[..rows.len().min(CHART_CGROUPS)];
    let labels: Vec<String> = rows.iter().map(|r| tail_label(&name(r), 28)).collect();
    const MIB: f64 = 1048576.0;
    let xmax = rows
        .iter()
        .map(|r| {
            let t = &r.totals;
            (t.bytes[0] + t.bytes[1]).max(t.bytes[2])
        })
        .max()
        .unwrap_or(0)
        .max(1) as f64
        / MIB
        * 1.15;
    let n = rows.len().max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption("Bytes per cgroup", charts::caption_style())
        .margin(12)
        .x_label_area_size(55)
        .y_label_area_size(230)
        .build_cartesian_2d(0f64..xmax, 0f64..n as f64)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n * 2 + 1)
        .y_label_formatter(&|y| {
            // Row i (from the top) spans [n-1-i, n-i); label its middle.
            let k = y - y.floor();
            if (k - 0.5).abs() > 1e-6 {
                return String::new();
            }
            let i = n - 1 - y.floor() as usize;
            labels.get(i).cloned().unwrap_or_default()
        })
        .x_desc("MiB")
        .label_style((FAMILY, charts::LABEL_PX))
        .axis_desc_style((FAMILY, charts::DESC_PX))
        .draw()?;
    for (j, (what, color)) in [
        ("written", charts::dir_color(ioblame_attrib::Dir::W)),
        ("read", charts::dir_color(ioblame_attrib::Dir::R)),
    ]
    .into_iter()
    .enumerate()
    {
        chart
            .draw_series(rows.iter().enumerate().map(|(i, r)| {
                let t = &r.totals;
                let b = if j == 0 {
                    t.bytes[2]
                } else {
                    t.bytes[0] + t.bytes[1]
                };
                let y0 = (n - 1 - i) as f64 + 0.1 + j as f64 * 0.4;
                Rectangle::new([(0.0, y0), (b as f64 / MIB, y0 + 0.4)], color.filled())
            }))?
            .label(what)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    // Lower right: the rows with the fewest bytes are at the bottom.
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FAMILY, charts::LEGEND_PX))
        .draw()?;
    Ok(root.present()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_keep_the_unit_name() {
        assert_eq!(tail_label("/a.service", 28), "/a.service");
        let l = tail_label("/system.slice/some-very-long-name.service", 20);
        assert_eq!(l.chars().count(), 20);
        assert!(l.starts_with('…') && l.ends_with("name.service"), "{l}");
    }

    #[test]
    fn table_rows_escape_and_name_the_unknown() {
        let row = |cgroup, w: u64| CgroupTotals {
            cgroup,
            totals: ioblame_attrib::ActTotals {
                bytes: [1, 2, w],
                ios: [1, 1, 1],
                ..Default::default()
            },
            acts: 1,
        };
        let html = table(&[row(Some("/<x>"), 4096), row(None, 0)]);
        assert!(html.contains("<td class=p>/&lt;x&gt;</td>"), "{html}");
        assert!(html.contains("<td class=n data-v=\"3\">3 B</td>"), "{html}");
        assert!(html.contains("<td class=p>-</td>"), "{html}");
    }
}
