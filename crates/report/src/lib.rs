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
//! | `ios.parquet`, `acts.parquet`, `intents.parquet`, `roles.parquet`, `files.parquet`, `histograms.parquet`, `lost_windows.parquet` | the tables (zstd), schemas in `docs/report.md` |
//! | `charts/counter-NN.svg` | each counter's eight-slot histogram for the top acts |
//! | `charts/throughput.svg` | throughput over time of the top roles |
//! | `charts/cgroups.svg` | bytes per cgroup, for a trace that recorded cgroups ([`ReportInput::cgroups`]) |
//! | `charts/offset-N.svg`, `charts/offset-N.png` | IO position over time on the `N`th busiest device (at most 4), by direction |
//! | `charts/latency-wait.svg`, `charts/latency-io.svg` | wait and device time per via class |
//! | `blame.parquet`, `blame.txt`, `charts/blame-tail.svg` | who made the IO slow, when the caller gave it ([`ReportWriter::set_blame`]) |
//! | `flame-bytes.svg`, `flame-iotime.svg` | interactive IO flame graphs (inferno) |
//! | `report.html` | one self-contained page with all of the above |
//!
//! File names never come from the trace (charts are numbered); everything from the trace is
//! HTML-escaped in the page.
#![deny(missing_docs)]

mod agg;
mod blame;
mod cgroups;
mod charts;
mod error;
mod flame;
mod html;
mod latency;
mod summary_text;
mod table_writer;
mod tables;
mod util;
mod write;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ioblame_attrib::{CgroupNames, FileKey, Io, Summary, Symbolizer, Tables};
use ioblame_counters::CounterSet;
use ioblame_format::{BlockDevice, Header};

pub use blame::{blame_frame, BlameKind, BlameRow, BlameSection};
pub use error::{ChartError, ReportError};
pub use flame::{flame_svg, folded_stack, folded_stacks, Weight};
pub use latency::LatencySection;
pub use summary_text::{summary_text, SummaryInput};
pub use table_writer::{TableFrames, TableWriter};
pub use tables::{FrameMap, IOS_ROW_GROUP};
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
    /// The trace's cgroups (`ioblame_attrib::CgroupNames::of`): the `cgroup` columns of
    /// `acts.parquet` and `roles.parquet`, and the page's per-cgroup section. `None` when the
    /// trace recorded none (null columns, no section).
    pub cgroups: Option<CgroupNames>,
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
    /// Colour the terminal summary with ANSI escapes ([`Report::summary_text`]; the page's
    /// copy never is).
    pub color: bool,
    /// What the analysis found to say about the trace (its diagnostics, one sentence each:
    /// damage, lost records, what a blktrace recording cannot see), shown on the page under
    /// the summary; empty: no notes section.
    pub notes: Vec<String>,
    /// The timeline written beside the page by the caller (`ioblame timeline`'s file), linked
    /// from it with how to open it.
    pub timeline: Option<TimelineLink>,
}

/// A timeline beside the report ([`ReportInput::timeline`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineLink {
    /// Its file name in the output directory.
    pub file: String,
    /// Its slices and flows.
    pub slices: u64,
    /// See [`TimelineLink::slices`].
    pub flows: u64,
}

impl Default for ReportInput {
    fn default() -> Self {
        ReportInput {
            header: None,
            block_devices: Vec::new(),
            traces: Vec::new(),
            paths: BTreeMap::new(),
            cgroups: None,
            start_ns: None,
            top_summary: 5,
            top_table: 100,
            top_chart_acts: 6,
            top_chart_roles: 6,
            top_chart_devices: 4,
            color: false,
            notes: Vec::new(),
            timeline: None,
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
    /// The timeline the caller wrote beside it ([`ReportInput::timeline`]).
    pub timeline: Option<PathBuf>,
}

impl ReportFiles {
    /// Every file, in a stable order (html first).
    pub fn all(&self) -> Vec<&Path> {
        let mut v: Vec<&Path> = vec![&self.html];
        v.extend(self.tables.iter().map(|p| p.as_path()));
        v.extend(self.flames.iter().map(|p| p.as_path()));
        v.extend(self.folded.iter().map(|p| p.as_path()));
        v.extend(self.charts.iter().map(|p| p.as_path()));
        v.extend(self.timeline.as_deref());
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
    /// The terminal summary.
    pub summary_text: String,
    /// Rows written to `ios.parquet`.
    pub ios_rows: u64,
}

/// Writes a report: create, [`push_io`](Self::push_io) every IO, [`finish`](Self::finish).
pub struct ReportWriter {
    dir: PathBuf,
    input: ReportInput,
    tables: TableWriter,
    latency: Option<LatencySection>,
    blame: Option<BlameSection>,
}

impl std::fmt::Debug for ReportWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportWriter")
            .field("dir", &self.dir)
            .field("ios", &self.tables.n_ios())
            .finish()
    }
}

impl ReportWriter {
    /// Creates the output directory (and `charts/`) and opens `ios.parquet`.
    pub fn create(dir: impl AsRef<Path>, input: ReportInput) -> Result<ReportWriter, ReportError> {
        let dir = dir.as_ref().to_path_buf();
        let charts = dir.join("charts");
        std::fs::create_dir_all(&charts).map_err(|e| ReportError::io(&charts, e))?;
        let tables = TableWriter::create_based(dir.join("ios.parquet"), None, input.start_ns)?;
        Ok(ReportWriter {
            dir,
            input,
            tables,
            latency: None,
            blame: None,
        })
    }

    /// Adds btt's latency breakdown (`ioblame latency`'s figures and table): `latency.txt`,
    /// `charts/latency-percentiles.svg` and a section of the page.
    pub fn set_latency(&mut self, section: LatencySection) {
        self.latency = Some(section);
    }

    /// Adds who made the IO slow (`ioblame blame`'s rows and text): `blame.parquet`,
    /// `blame.txt`, `charts/blame-tail.svg` and a section of the page.
    pub fn set_blame(&mut self, section: BlameSection) {
        self.blame = Some(section);
    }

    /// Links the timeline the caller wrote into the output directory from the page, with
    /// how to open it.
    pub fn set_timeline(&mut self, link: TimelineLink) {
        self.input.timeline = Some(link);
    }

    /// The output directory (the caller writes the timeline there).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Names files by (dev, ino), for the tables, summary and page: paths known only once the
    /// trace has been read (the recorder lists files at the end of a capture).
    pub fn set_paths(&mut self, paths: BTreeMap<FileKey, String>) {
        self.input.paths = paths;
    }

    /// What the analysis found to say, for the page ([`ReportInput::notes`]): known only
    /// once the trace has been read.
    pub fn set_notes(&mut self, notes: Vec<String>) {
        self.input.notes = notes;
    }

    /// Records one IO as the attribution charged it; `tables` must already hold its act and
    /// roles.
    pub fn push_io(&mut self, io: &Io, tables: &Tables) -> Result<(), ReportError> {
        self.tables.push_io(io, tables)
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
            tables,
            latency,
            blame,
        } = self;
        let (ios_rows, shown, agg) = tables.finish_ios(t)?;
        let lost_window_bytes = write::lost_window_bytes(&dir, ios_rows, summary)?;
        let names = ioblame_attrib::intent_names(&shown, sym);
        let s = write::Shown {
            t: &shown,
            agg: &agg,
            counters,
            input: &input,
            sym,
            names: &names,
        };
        let mut files = write::no_files(dir);
        files.timeline = input.timeline.as_ref().map(|t| files.dir.join(&t.file));
        write::write_tables(&s, &mut files)?;
        let flames = write::write_flame_graphs(&s, &mut files)?;
        let by_bytes = summary_text::acts_by_bytes(&shown);
        let mut charts = write::write_charts(&s, &by_bytes, &mut files)?;
        if let Some(l) = &latency {
            charts.overview.push(latency::write(l, &mut files)?);
        }
        if let Some(b) = &blame {
            charts.blame = Some(blame::write(b, &mut files)?);
        }
        let summary_text = write::terminal_summary(&s, summary, lost_window_bytes, &files);
        let glance = write::glance_numbers(&shown, summary, lost_window_bytes);
        write::write_page(&s, &glance, &by_bytes, flames, charts, &files)?;
        Ok(Report {
            files,
            summary_text,
            ios_rows,
        })
    }
}
