//! `ioblame report`: Parquet tables, charts, IO flame graphs and a self-contained HTML page
//! from one pass over the attribution's IOs.
//!
//! ```no_run
//! use ioblame_attrib::{Summary, Tables};
//! use ioblame_counters::CounterSet;
//! use ioblame_report::{ReportInput, ReportWriter};
//!
//! # fn main() -> Result<(), ioblame_report::ReportError> {
//! let tables = Tables::default();
//! let mut counters = CounterSet::default_set();
//! let mut w = ReportWriter::create("out", ReportInput::default())?;
//! // for each IO the attribution produces: counters.record(..); w.push_io(&io, &tables)?;
//! let report = w.finish(&tables, &counters, &Summary::default(), &|_: u64| None::<String>)?;
//! print!("{}", report.summary_text);
//! # Ok(()) }
//! ```
//!
//! [`ReportWriter::push_io`] streams each [`Io`] into `ios.parquet` (row groups of
//! [`IOS_ROW_GROUP`] rows, never the whole table in memory) and into bounded aggregates (per
//! act, per role and time bucket, a decimated sample of positions, latency histograms per
//! via class). [`ReportWriter::finish`] writes everything else into the output directory:
//!
//! | file | what |
//! | --- | --- |
//! | `ios.parquet`, `acts.parquet`, `intents.parquet`, `roles.parquet`, `files.parquet`, `histograms.parquet` | the tables (zstd), schemas in `docs/report.md` |
//! | `charts/counter-NN.svg` | each counter's eight-slot histogram for the top acts |
//! | `charts/throughput.svg` | throughput over time of the top roles |
//! | `charts/offset-N.svg`, `charts/offset-N.png` | IO position over time on the `N`th busiest device (at most 4), by direction |
//! | `charts/latency-wait.svg`, `charts/latency-io.svg` | wait and device time per via class |
//! | `flame-bytes.svg`, `flame-iotime.svg` | interactive IO flame graphs (inferno) |
//! | `report.html` | one self-contained page with all of the above |
//!
//! File names never come from the trace (charts are numbered); everything from the trace is
//! HTML-escaped in the page.
#![deny(missing_docs)]

mod agg;
mod charts;
mod error;
mod flame;
mod html;
mod summary_text;
mod tables;
mod util;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ioblame_attrib::{ActId, FileKey, Io, RoleId, Summary, Symbolizer, Tables};
use ioblame_counters::CounterSet;
use ioblame_format::{BlockDevice, Header};

pub use error::ReportError;
pub use flame::{flame_svg, folded_stacks, Weight};
pub use summary_text::{summary_text, SummaryInput};
pub use tables::IOS_ROW_GROUP;
pub use util::{dev_str, html_escape, human_bytes, printable};

/// What the report knows about the trace beyond the IOs.
#[derive(Debug, Clone)]
pub struct ReportInput {
    /// The trace's header (host, kernel, start time), if any.
    pub header: Option<Header>,
    /// Block devices of the recording host.
    pub block_devices: Vec<BlockDevice>,
    /// The trace files analysed (shown in the page).
    pub traces: Vec<String>,
    /// File paths by (dev, ino) where known.
    pub paths: BTreeMap<FileKey, String>,
    /// Base of the charts' time axis (ns, trace clock); `None`: the first IO's queue time.
    pub start_ns: Option<u64>,
    /// Acts in each top list of the summary text.
    pub top_summary: usize,
    /// Acts (and intents) in the page's tables.
    pub top_table: usize,
    /// Acts in each counter chart.
    pub top_chart_acts: usize,
    /// Roles in the throughput chart.
    pub top_chart_roles: usize,
    /// Devices charted (IO position over time), those with the most IOs.
    pub top_chart_devices: usize,
}

impl Default for ReportInput {
    fn default() -> Self {
        ReportInput {
            header: None,
            block_devices: Vec::new(),
            traces: Vec::new(),
            paths: BTreeMap::new(),
            start_ns: None,
            top_summary: 5,
            top_table: 100,
            top_chart_acts: 6,
            top_chart_roles: 6,
            top_chart_devices: 4,
        }
    }
}

/// The files a report wrote (absolute or as given by the output directory).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportFiles {
    /// The output directory.
    pub dir: PathBuf,
    /// The Parquet tables: ios, acts, intents, roles, files, histograms.
    pub tables: Vec<PathBuf>,
    /// The charts (SVG and PNG).
    pub charts: Vec<PathBuf>,
    /// The interactive flame graphs (by bytes, by device time).
    pub flames: Vec<PathBuf>,
    /// The folded stacks the flame graphs were drawn from.
    pub folded: Vec<PathBuf>,
    /// `report.html`.
    pub html: PathBuf,
}

impl ReportFiles {
    /// Every file, in a stable order (html first).
    pub fn all(&self) -> Vec<&Path> {
        let mut v: Vec<&Path> = vec![&self.html];
        v.extend(self.tables.iter().map(|p| p.as_path()));
        v.extend(self.flames.iter().map(|p| p.as_path()));
        v.extend(self.folded.iter().map(|p| p.as_path()));
        v.extend(self.charts.iter().map(|p| p.as_path()));
        v
    }

    /// Every file relative to [`ReportFiles::dir`].
    pub fn relative(&self) -> Vec<String> {
        self.all()
            .into_iter()
            .map(|p| {
                p.strip_prefix(&self.dir)
                    .unwrap_or(p)
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    }
}

/// A finished report.
#[derive(Debug, Clone)]
pub struct Report {
    /// What was written.
    pub files: ReportFiles,
    /// The terminal summary (also in the page).
    pub summary_text: String,
    /// Rows written to `ios.parquet`.
    pub ios_rows: u64,
}

/// Writes a report: create, [`push_io`](Self::push_io) every IO, [`finish`](Self::finish).
pub struct ReportWriter {
    dir: PathBuf,
    input: ReportInput,
    ios: tables::IosWriter,
    agg: agg::Aggregates,
}

impl std::fmt::Debug for ReportWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportWriter")
            .field("dir", &self.dir)
            .field("ios", &self.agg.n_ios)
            .finish()
    }
}

fn write_file(path: &Path, data: impl AsRef<[u8]>) -> Result<(), ReportError> {
    std::fs::write(path, data).map_err(|e| ReportError::io(path, e))
}

impl ReportWriter {
    /// Creates the output directory (and `charts/`) and opens `ios.parquet`.
    pub fn create(dir: impl AsRef<Path>, input: ReportInput) -> Result<ReportWriter, ReportError> {
        let dir = dir.as_ref().to_path_buf();
        let charts = dir.join("charts");
        std::fs::create_dir_all(&charts).map_err(|e| ReportError::io(&charts, e))?;
        let ios = tables::IosWriter::create(dir.join("ios.parquet"))?;
        let agg = agg::Aggregates::new(input.start_ns);
        Ok(ReportWriter {
            dir,
            input,
            ios,
            agg,
        })
    }

    /// Names files by (dev, ino), for the tables, summary and page: paths known only once the
    /// trace has been read (the recorder lists files at the end of a capture).
    pub fn set_paths(&mut self, paths: BTreeMap<FileKey, String>) {
        self.input.paths = paths;
    }

    /// Records one IO as the attribution charged it; `tables` must already hold its act and
    /// roles.
    pub fn push_io(&mut self, io: &Io, tables: &Tables) -> Result<(), ReportError> {
        self.ios.push(io, tables)?;
        self.agg.push(io, tables);
        Ok(())
    }

    /// Writes the tables, charts, flame graphs and page; `sym` names kernel frames.
    pub fn finish(
        self,
        t: &Tables,
        counters: &CounterSet,
        summary: &Summary,
        sym: &dyn Symbolizer,
    ) -> Result<Report, ReportError> {
        let ReportWriter {
            dir,
            input,
            ios,
            agg,
        } = self;
        let ios_rows = ios.finish()?;
        // Every output counts the IOs given to `push_io`, exactly those of `ios.parquet`: the
        // attribution's totals may also hold IO the caller left out (other devices, the
        // recorder).
        let shown = Tables {
            roles: t.roles.clone(),
            intents: t.intents.clone(),
            acts: t.acts.clone(),
            totals: agg.totals_for(t),
        };
        let t = &shown;
        let lost_window_bytes = if summary.lost_windows.is_empty() || ios_rows == 0 {
            0
        } else {
            let windows: Vec<(u64, u64)> = summary
                .lost_windows
                .iter()
                .map(|w| (w.start, w.end))
                .collect();
            tables::bytes_in_windows(&dir.join("ios.parquet"), ios_rows, &windows)?
        };
        let mut files = ReportFiles {
            dir: dir.clone(),
            html: dir.join("report.html"),
            ..ReportFiles::default()
        };

        // Tables.
        let p = |n: &str| dir.join(n);
        files.tables.push(p("ios.parquet"));
        tables::write_acts(&p("acts.parquet"), t, &agg)?;
        files.tables.push(p("acts.parquet"));
        tables::write_intents(&p("intents.parquet"), t, sym)?;
        files.tables.push(p("intents.parquet"));
        tables::write_roles(&p("roles.parquet"), t)?;
        files.tables.push(p("roles.parquet"));
        tables::write_files(&p("files.parquet"), t, &input.paths)?;
        files.tables.push(p("files.parquet"));
        tables::write_histograms(&p("histograms.parquet"), t, counters)?;
        files.tables.push(p("histograms.parquet"));

        // Flame graphs.
        let mut flames = Vec::new();
        for (w, name, title, count) in [
            (
                Weight::Bytes,
                "bytes",
                "IO flame graph: bytes charged",
                "bytes",
            ),
            (
                Weight::IoTime,
                "iotime",
                "IO flame graph: device time charged",
                "µs",
            ),
        ] {
            let lines = folded_stacks(t, sym, |a| match w {
                Weight::Bytes => t.totals.get(a.index()).map_or(0, |x| x.total_bytes()),
                Weight::IoTime => agg.io_us(a),
            });
            let folded = p(&format!("flame-{name}.folded"));
            let mut text = lines.join("\n");
            text.push('\n');
            write_file(&folded, text)?;
            files.folded.push(folded);
            let file = p(&format!("flame-{name}.svg"));
            let interactive =
                flame_svg(&lines, title, count, true).map_err(|e| ReportError::io(&file, e))?;
            write_file(&file, interactive)?;
            files.flames.push(file);
            let inline = flame_svg(&lines, title, count, false)
                .map_err(|e| ReportError::io(p(&format!("flame-{name}.svg")), e))?;
            // Without its script inferno still asks for `init` on load: drop the handler.
            let inline = inline.replacen(" onload=\"init(evt)\"", "", 1);
            flames.push((title.to_string(), inline, format!("flame-{name}.svg")));
        }

        // Charts.
        let by_bytes = summary_text::acts_by_bytes(t);
        let mut chart_markup: Vec<(String, String)> = Vec::new();
        let mut svg_chart = |files: &mut ReportFiles,
                             name: String,
                             title: String,
                             svg: String|
         -> Result<(), ReportError> {
            let path = p(&format!("charts/{name}"));
            write_file(&path, &svg)?;
            files.charts.push(path);
            chart_markup.push((title, html::inline_svg(&svg).to_string()));
            Ok(())
        };
        for (i, spec) in counters.specs().iter().enumerate() {
            let name = format!("counter-{i:02}.svg");
            let series = charts::counter_series(t, counters, i, &by_bytes, input.top_chart_acts);
            let path = p(&format!("charts/{name}"));
            let svg =
                charts::svg_string(&path, |root| charts::counter_chart(root, i, spec, &series))?;
            svg_chart(&mut files, name, format!("Counter #{i}: {spec}"), svg)?;
        }
        let mut roles: Vec<(RoleId, u64)> = agg.role_bytes.iter().map(|(&r, &b)| (r, b)).collect();
        roles.sort_by_key(|&(r, b)| (std::cmp::Reverse(b), r));
        let roles: Vec<RoleId> = roles
            .into_iter()
            .take(input.top_chart_roles)
            .map(|x| x.0)
            .collect();
        let path = p("charts/throughput.svg");
        let svg = charts::svg_string(&path, |root| {
            charts::throughput_chart(root, t, &agg, &roles)
        })?;
        svg_chart(
            &mut files,
            "throughput.svg".into(),
            "Throughput over time".into(),
            svg,
        )?;
        for (which, name, title) in [
            (0, "latency-wait.svg", "Wait time per via class"),
            (1, "latency-io.svg", "Device time per via class"),
        ] {
            let path = p(&format!("charts/{name}"));
            let svg = charts::svg_string(&path, |root| charts::latency_chart(root, &agg, which))?;
            svg_chart(&mut files, name.into(), title.into(), svg)?;
        }
        // IO position over time: one chart per device (the busiest first), each device
        // scaled to its own size.
        let (top_devs, devs_left) = agg.top_devices(input.top_chart_devices);
        for (i, (dev, d)) in top_devs.iter().enumerate() {
            let Some(sample) = d.sample.as_ref() else {
                continue;
            };
            let what = match input.block_devices.iter().find(|b| b.kernel_dev() == *dev) {
                Some(b) => format!(
                    "{} ({}:{}, {})",
                    b.name,
                    b.major,
                    b.minor,
                    util::human_bytes(b.size_sectors.saturating_mul(512))
                ),
                None => dev_str(*dev),
            };
            let title = format!("IO position on {what} over time");
            let caption = format!(
                "IO position on {what}: {} IOs, {} (seekwatcher style)",
                d.ios,
                util::human_bytes(d.bytes)
            );
            let path = p(&format!("charts/offset-{i}.svg"));
            let svg = charts::svg_string(&path, |root| {
                charts::offset_chart(root, &agg, sample, &title)
            })?;
            write_file(&path, &svg)?;
            files.charts.push(path);
            let png = p(&format!("charts/offset-{i}.png"));
            charts::png_file(&png, |root| {
                charts::offset_chart(root, &agg, sample, &title)
            })?;
            let png_bytes = std::fs::read(&png).map_err(|e| ReportError::io(&png, e))?;
            chart_markup.push((
                caption,
                format!(
                    "<img alt=\"IO position over time on {}\" width={} height={} src=\"data:image/png;base64,{}\">",
                    html_escape(&what),
                    charts::SIZE.0,
                    charts::SIZE.1,
                    html::base64(&png_bytes)
                ),
            ));
            files.charts.push(png);
        }
        if devs_left > 0 {
            chart_markup.push((
                format!(
                    "{devs_left} more device{} with IO not charted",
                    if devs_left == 1 { "" } else { "s" }
                ),
                String::new(),
            ));
        }

        // Summary and page.
        let rel = files.relative();
        let mut si = SummaryInput {
            tables: t,
            summary,
            lost_window_bytes: Some(lost_window_bytes),
            act_io_us: &agg.act_io_us,
            paths: &input.paths,
            top: input.top_summary,
            files: Some((&dir, &rel)),
        };
        let summary_text = summary_text::summary_text(&si, sym);
        // The page lists the files at its end: its summary leaves them out.
        si.files = None;
        let page_summary = summary_text::summary_text(&si, sym);
        let mut facts = Vec::new();
        if let Some(h) = &input.header {
            facts.push(("host".to_string(), h.hostname.clone()));
            facts.push((
                "kernel".to_string(),
                format!("{} {}", h.kernel_release, h.machine),
            ));
            facts.push(("recorder".to_string(), h.recorder_version.clone()));
            facts.push((
                "capture start".to_string(),
                chrono::DateTime::from_timestamp_nanos(h.start_time_ns.min(i64::MAX as u64) as i64)
                    .format("%Y-%m-%d %H:%M:%S%.3f UTC")
                    .to_string(),
            ));
        }
        if !input.traces.is_empty() {
            facts.push(("traces".to_string(), input.traces.join(" ")));
        }
        if !input.block_devices.is_empty() {
            let devs: Vec<String> = input
                .block_devices
                .iter()
                .map(|d| {
                    format!(
                        "{} ({}:{}, {})",
                        d.name,
                        d.major,
                        d.minor,
                        util::human_bytes(d.size_sectors.saturating_mul(512))
                    )
                })
                .collect();
            facts.push(("devices".to_string(), devs.join(", ")));
        }
        let top: Vec<ActId> = by_bytes.iter().copied().take(input.top_table).collect();
        let acts_html = html::acts_table(t, &top, &agg.act_io_us, &input.paths, sym);
        let intents_html = html::intents_table(t, sym, input.top_table);
        // Overview charts first, then the counters (drawn first above).
        let overview = chart_markup.split_off(counters.len().min(chart_markup.len()));
        let page = html::Page {
            title: "ioblame report".to_string(),
            facts,
            summary: &page_summary,
            charts: overview,
            counter_charts: chart_markup,
            flames,
            files: rel.iter().skip(1).cloned().collect(),
        };
        write_file(&files.html, html::page(&page, &acts_html, &intents_html))?;
        Ok(Report {
            files,
            summary_text,
            ios_rows,
        })
    }
}
