//! The report's blame section: who made the IO slow (`ioblame blame`, computed by the caller
//! with `ioblame_latency::BlameEngine` and named there), as `blame.parquet` (one row per
//! victim act and culprit, with own and idle time as rows of their own, so every victim's
//! rows add up to its IOs' Q2C), `blame.txt` (`ioblame blame`'s text), a victim × culprit
//! matrix by process and by cgroup, and a chart of the culprits of each victim process's
//! slowest IOs, `charts/blame-tail.svg` ([`crate::ReportWriter::set_blame`] is the hook).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use plotters::coord::Shift;
use plotters::prelude::*;
use polars::prelude::*;

use crate::charts::{self, DrawResult, FAMILY};
use crate::error::ReportError;
use crate::html;
use crate::tables::{col, frame, write_df};
use crate::util::html_escape as esc;
use crate::ReportFiles;

/// What stood ahead of a victim, or its own part of its Q2C.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BlameKind {
    /// Its own service.
    Own,
    /// Nothing in flight on its device.
    Idle,
    /// Another act's IO.
    Act,
    /// Cache flushes asked for by a task (no act).
    Flush,
    /// Discards and other ops of a task (no act).
    OtherOp,
}

impl BlameKind {
    /// As `blame.parquet`'s `culprit` column names it.
    pub fn name(&self) -> &'static str {
        match self {
            BlameKind::Own => "own",
            BlameKind::Idle => "idle",
            BlameKind::Act => "act",
            BlameKind::Flush => "flush",
            BlameKind::OtherOp => "other_op",
        }
    }
}

/// One row of `blame.parquet`: a victim act's time behind one culprit (or its own, or idle).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlameRow {
    /// The victim's act.
    pub victim_act: u32,
    /// The victim's process.
    pub victim_pid: u32,
    /// The victim's command name.
    pub victim_comm: String,
    /// The victim's cgroup, when recorded.
    pub victim_cgroup: Option<String>,
    /// What the time was.
    pub kind: BlameKind,
    /// The culprit's act ([`BlameKind::Act`]).
    pub culprit_act: Option<u32>,
    /// The culprit's process (an act's, or the task that asked for a flush or other op).
    pub culprit_pid: Option<u32>,
    /// The culprit's command name.
    pub culprit_comm: Option<String>,
    /// The culprit's cgroup, when recorded.
    pub culprit_cgroup: Option<String>,
    /// The culprit act's via.
    pub culprit_via: Option<String>,
    /// The culprit as a person reads it (as `ioblame blame` prints it).
    pub culprit_label: String,
    /// Nanoseconds of the victim act's IOs' Q2C.
    pub wait_ns: u64,
    /// The same over the victim's tail only: its process's IOs above the process's p99.
    pub tail_wait_ns: u64,
}

/// What the caller computed: `ioblame blame`'s text and the rows.
#[derive(Debug, Clone, Default)]
pub struct BlameSection {
    /// `ioblame blame`'s text output.
    pub text: String,
    /// The rows of `blame.parquet`.
    pub rows: Vec<BlameRow>,
    /// What the section must say besides (a scope that left culprits out, say).
    pub notes: Vec<String>,
}

/// Victims and culprits shown in a matrix (the rest summed).
const MATRIX: usize = 8;
/// Victim processes in the chart.
const CHART_VICTIMS: usize = 8;
/// Culprits named in the chart (the rest as "others").
const CHART_CULPRITS: usize = 5;

/// `blame.parquet`'s frame of `rows` (the fleet dataset stores it too, `docs/dataset.md`).
pub fn blame_frame(rows: &[BlameRow]) -> PolarsResult<DataFrame> {
    let opt_s = |f: &dyn Fn(&BlameRow) -> Option<String>| rows.iter().map(f).collect::<Vec<_>>();
    frame(vec![
        col(
            "victim_act",
            rows.iter().map(|r| r.victim_act).collect::<Vec<_>>(),
        ),
        col(
            "victim_pid",
            rows.iter().map(|r| r.victim_pid).collect::<Vec<_>>(),
        ),
        col(
            "victim_comm",
            rows.iter()
                .map(|r| r.victim_comm.clone())
                .collect::<Vec<_>>(),
        ),
        col("victim_cgroup", opt_s(&|r| r.victim_cgroup.clone())),
        col(
            "culprit",
            rows.iter().map(|r| r.kind.name()).collect::<Vec<_>>(),
        ),
        col(
            "culprit_act",
            rows.iter().map(|r| r.culprit_act).collect::<Vec<_>>(),
        ),
        col(
            "culprit_pid",
            rows.iter().map(|r| r.culprit_pid).collect::<Vec<_>>(),
        ),
        col("culprit_comm", opt_s(&|r| r.culprit_comm.clone())),
        col("culprit_cgroup", opt_s(&|r| r.culprit_cgroup.clone())),
        col("culprit_via", opt_s(&|r| r.culprit_via.clone())),
        col(
            "culprit_label",
            rows.iter()
                .map(|r| r.culprit_label.clone())
                .collect::<Vec<_>>(),
        ),
        col(
            "wait_ns",
            rows.iter().map(|r| r.wait_ns).collect::<Vec<_>>(),
        ),
        col(
            "tail_wait_ns",
            rows.iter().map(|r| r.tail_wait_ns).collect::<Vec<_>>(),
        ),
    ])
}

/// A column of a matrix: own, idle, or a culprit group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Col {
    Own,
    Idle,
    Culprit(String),
}

/// A victim × culprit matrix: per victim group (its label), its Q2C and its time per column.
struct Matrix {
    victims: Vec<(String, u64, HashMap<Col, u64>)>,
    culprits: Vec<String>,
}

fn matrix(
    rows: &[BlameRow],
    victim: impl Fn(&BlameRow) -> String,
    culprit: impl Fn(&BlameRow) -> String,
    tail: bool,
) -> Matrix {
    let mut v: BTreeMap<String, (u64, HashMap<Col, u64>)> = BTreeMap::new();
    let mut totals: HashMap<String, u64> = HashMap::new();
    for r in rows {
        let ns = if tail { r.tail_wait_ns } else { r.wait_ns };
        let e = v.entry(victim(r)).or_default();
        e.0 += ns;
        let c = match r.kind {
            BlameKind::Own => Col::Own,
            BlameKind::Idle => Col::Idle,
            _ => {
                let c = culprit(r);
                *totals.entry(c.clone()).or_default() += ns;
                Col::Culprit(c)
            }
        };
        *e.1.entry(c).or_default() += ns;
    }
    let mut victims: Vec<(String, u64, HashMap<Col, u64>)> = v
        .into_iter()
        .filter(|(_, (n, _))| *n > 0)
        .map(|(k, (n, m))| (k, n, m))
        .collect();
    victims.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut culprits: Vec<(String, u64)> = totals.into_iter().filter(|c| c.1 > 0).collect();
    culprits.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    Matrix {
        victims,
        culprits: culprits.into_iter().map(|c| c.0).collect(),
    }
}

fn ms(ns: u64) -> String {
    format!("{:.2} ms", ns as f64 / 1e6)
}

/// The matrix as a table: a row per victim (most Q2C first), a column per culprit (most
/// time first), then others, own and idle; each cell the share of the victim's Q2C, its time
/// in the title.
fn table(m: &Matrix, what: &str) -> String {
    let shown: Vec<&String> = m.culprits.iter().take(MATRIX).collect();
    let mut o = format!(
        "<div class=scroll><table class=blame><thead><tr><th>{} waited</th><th>Q2C</th>",
        esc(what)
    );
    for c in &shown {
        let _ = write!(o, "<th class=p>{}</th>", esc(c));
    }
    if m.culprits.len() > MATRIX {
        let _ = write!(o, "<th>{} others</th>", m.culprits.len() - MATRIX);
    }
    o.push_str("<th>own</th><th>idle</th></tr></thead><tbody>\n");
    let cell = |o: &mut String, ns: u64, whole: u64| {
        let pct = if whole == 0 {
            0.0
        } else {
            ns as f64 * 100.0 / whole as f64
        };
        let _ = write!(
            o,
            "<td class=n data-v=\"{ns}\" title=\"{}\">{}</td>",
            ms(ns),
            if ns == 0 {
                String::from("&ndash;")
            } else {
                format!("{pct:.1}%")
            }
        );
    };
    let mut rest_rows = 0;
    for (i, (victim, whole, cols)) in m.victims.iter().enumerate() {
        if i == MATRIX {
            rest_rows = m.victims.len() - MATRIX;
            break;
        }
        let _ = write!(
            o,
            "<tr><td class=p>{}</td><td class=n data-v=\"{whole}\">{}</td>",
            esc(victim),
            ms(*whole)
        );
        for c in &shown {
            cell(
                &mut o,
                cols.get(&Col::Culprit((*c).clone())).copied().unwrap_or(0),
                *whole,
            );
        }
        if m.culprits.len() > MATRIX {
            let others: u64 = m.culprits[MATRIX..]
                .iter()
                .map(|c| cols.get(&Col::Culprit(c.clone())).copied().unwrap_or(0))
                .sum();
            cell(&mut o, others, *whole);
        }
        cell(&mut o, cols.get(&Col::Own).copied().unwrap_or(0), *whole);
        cell(&mut o, cols.get(&Col::Idle).copied().unwrap_or(0), *whole);
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n");
    if rest_rows > 0 {
        let _ = writeln!(
            o,
            "<p class=note>{rest_rows} more, in <code>blame.parquet</code>.</p>"
        );
    }
    o
}

/// One bar of the chart: a victim, its tail's Q2C, and its parts (label, ns) in order.
type Bar = (String, u64, Vec<(String, u64)>);

fn bars(m: &Matrix) -> Vec<Bar> {
    m.victims
        .iter()
        .take(CHART_VICTIMS)
        .map(|(v, whole, cols)| {
            let mut parts: Vec<(String, u64)> = Vec::new();
            let mut named: Vec<(&String, u64)> = m
                .culprits
                .iter()
                .map(|c| (c, cols.get(&Col::Culprit(c.clone())).copied().unwrap_or(0)))
                .filter(|c| c.1 > 0)
                .collect();
            named.sort_by_key(|c| std::cmp::Reverse(c.1));
            let others: u64 = named.iter().skip(CHART_CULPRITS).map(|c| c.1).sum();
            parts.extend(
                named
                    .iter()
                    .take(CHART_CULPRITS)
                    .map(|(c, n)| ((*c).clone(), *n)),
            );
            if others > 0 {
                parts.push(("others".into(), others));
            }
            parts.push(("own".into(), cols.get(&Col::Own).copied().unwrap_or(0)));
            parts.push(("idle".into(), cols.get(&Col::Idle).copied().unwrap_or(0)));
            (v.clone(), *whole, parts)
        })
        .collect()
}

/// Stacked horizontal bars, one per victim, of the shares of its tail's Q2C.
fn chart<DB: DrawingBackend<ErrorType: 'static>>(
    root: DrawingArea<DB, Shift>,
    bars: &[Bar],
) -> DrawResult {
    root.fill(&WHITE)?;
    let n = bars.len().max(1);
    // One colour per part label across bars; own and idle fixed.
    let mut labels: Vec<String> = Vec::new();
    for (_, _, parts) in bars {
        for (l, _) in parts {
            if l != "own" && l != "idle" && !labels.contains(l) {
                labels.push(l.clone());
            }
        }
    }
    let colour = |l: &str| -> RGBAColor {
        match l {
            "own" => RGBColor(120, 120, 120).to_rgba(),
            "idle" => RGBColor(210, 210, 210).to_rgba(),
            _ => Palette99::pick(labels.iter().position(|x| x == l).unwrap_or(0)).to_rgba(),
        }
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "The slowest IOs (above each process's p99): what they waited behind",
            (FAMILY, 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(10)
        .build_cartesian_2d(0f64..100f64, 0f64..(n as f64 * 1.25 + 1.5))?;
    let names: Vec<String> = bars
        .iter()
        .map(|b| {
            let s: String = b.0.chars().take(60).collect();
            s
        })
        .collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc("share of their Q2C (%)")
        .label_style((FAMILY, 15))
        .axis_desc_style((FAMILY, 16))
        .draw()?;
    // Each victim's name above its bar.
    chart.draw_series(names.iter().enumerate().map(|(i, name)| {
        Text::new(
            name.clone(),
            (0.5, i as f64 + 0.98),
            (FAMILY, 15).into_font(),
        )
    }))?;
    let mut legend_done: Vec<String> = Vec::new();
    for (i, (_, whole, parts)) in bars.iter().enumerate() {
        let mut x = 0.0;
        for (l, ns) in parts {
            let w = if *whole == 0 {
                0.0
            } else {
                *ns as f64 * 100.0 / *whole as f64
            };
            if w <= 0.0 {
                continue;
            }
            let c = colour(l);
            let y = i as f64 + 0.05;
            let s = chart.draw_series(std::iter::once(Rectangle::new(
                [(x, y), (x + w, y + 0.6)],
                c.filled(),
            )))?;
            if !legend_done.contains(l) {
                legend_done.push(l.clone());
                let label: String = l.chars().take(40).collect();
                s.label(label).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled())
                });
            }
            x += w;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(root.present()?)
}

/// Writes `blame.parquet`, `blame.txt` and `charts/blame-tail.svg`; returns the page's
/// section body.
pub(crate) fn write(s: &BlameSection, files: &mut ReportFiles) -> Result<String, ReportError> {
    let pq = files.dir.join("blame.parquet");
    write_df(&pq, blame_frame(&s.rows))?;
    files.tables.push(pq);
    let txt = files.dir.join("blame.txt");
    std::fs::write(&txt, &s.text).map_err(|e| ReportError::io(&txt, e))?;
    let proc_label = |pid: Option<u32>, comm: Option<&String>| match (pid, comm) {
        (Some(p), Some(c)) => format!("{c} (pid {p})"),
        (Some(p), None) => format!("pid {p}"),
        _ => "(unknown)".into(),
    };
    let by_process = matrix(
        &s.rows,
        |r| proc_label(Some(r.victim_pid), Some(&r.victim_comm)),
        |r| match r.kind {
            BlameKind::Flush => format!(
                "flushes of {}",
                proc_label(r.culprit_pid, r.culprit_comm.as_ref())
            ),
            _ => proc_label(r.culprit_pid, r.culprit_comm.as_ref()),
        },
        false,
    );
    let mut body = String::from(
        "<p class=note>Each IO's time from queue to completion (Q2C) split into the time it \
waited behind each other request on its device, charged to that request's act (the dirtier of \
written-back pages, the issuer of reads and direct IO, a journal commit's handles), its own \
service, and idle time with nothing in flight (<code>ioblame blame</code>; \
<code>docs/latency.md</code>, &ldquo;Blame&rdquo;). Each cell: the share of the row's Q2C \
spent behind the column (its time on hover).</p>\n",
    );
    for n in &s.notes {
        let _ = writeln!(body, "<p class=note>{}</p>", esc(n));
    }
    if by_process.victims.is_empty() {
        body.push_str("<p>No IO completed on the devices analysed.</p>\n");
        return Ok(body);
    }
    body.push_str("<h3>By process</h3>\n");
    body.push_str(&table(&by_process, "victim"));
    if s.rows.iter().any(|r| r.victim_cgroup.is_some()) {
        let cg = |c: &Option<String>| c.clone().unwrap_or_else(|| "-".into());
        let by_cgroup = matrix(
            &s.rows,
            |r| cg(&r.victim_cgroup),
            |r| cg(&r.culprit_cgroup),
            false,
        );
        body.push_str("<h3>By cgroup</h3>\n");
        body.push_str(&table(&by_cgroup, "victim cgroup"));
    }
    let tail = matrix(
        &s.rows,
        |r| proc_label(Some(r.victim_pid), Some(&r.victim_comm)),
        |r| r.culprit_label.clone(),
        true,
    );
    let path = files.dir.join("charts/blame-tail.svg");
    let b = bars(&tail);
    let svg = charts::svg_string(&path, |root| chart(root, &b))?;
    std::fs::write(&path, &svg).map_err(|e| ReportError::io(&path, e))?;
    files.charts.push(path);
    let _ = write!(
        body,
        "<h3>The tail</h3>\n<p class=note>The IOs above each victim process's p99 of Q2C, \
what people are paged for: the shares of their Q2C by culprit act.</p>\n<div class=chart>{}</div>\n\
<details><summary><code>ioblame blame</code>'s text (<a href=\"blame.txt\">blame.txt</a>)</summary>\
<pre class=latency>{}</pre></details>\n",
        html::inline_svg(&svg),
        esc(&s.text)
    );
    Ok(body)
}
