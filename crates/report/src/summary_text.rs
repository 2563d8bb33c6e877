//! The terminal summary of a report.

use std::fmt::Write as _;
use std::path::Path;

use anstyle::{AnsiColor, Style};
use ioblame_attrib::{ActId, Dir, Summary, Tables, Via};

use crate::util::{act_comm, dev_str, human_bytes, human_us, printable, task_ids};

/// What [`summary_text`] prints beyond the attribution's own tables.
///
/// The IO figures (totals per direction, the unknown share, the top acts) are computed from
/// `tables.totals`, which must count exactly the IOs the report shows (the report passes the
/// totals of the IOs given to [`crate::ReportWriter::push_io`]: a device selection or the
/// hidden recorder leaves the others out). `summary` gives what only the attribution knows:
/// lost records, requests in flight at the end, discards; those are about the whole trace.
#[derive(Debug, Clone, Copy)]
pub struct SummaryInput<'a> {
    /// The attribution's tables, with the totals of the IOs shown.
    pub tables: &'a Tables,
    /// The attribution's summary.
    pub summary: &'a Summary,
    /// Bytes of the IOs shown whose queue..completion span touched a lost-record window;
    /// `None`: the attribution's figure for the whole trace
    /// ([`Summary::bytes_in_lost_windows`]).
    pub lost_window_bytes: Option<u64>,
    /// Device time (µs) summed per act id (missing ids count 0).
    pub act_io_us: &'a [u64],
    /// File paths by (dev, ino) where known.
    pub paths: &'a std::collections::BTreeMap<ioblame_attrib::FileKey, String>,
    /// The short name of each intent, by intent id ([`ioblame_attrib::intent_names`]).
    pub intent_names: &'a [String],
    /// Acts shown in each top list.
    pub top: usize,
    /// The output directory and the files written in it (relative names).
    pub files: Option<(&'a Path, &'a [String])>,
    /// Colour with ANSI escapes (the caller strips them where colour is off, e.g. through
    /// `anstream`).
    pub color: bool,
}

/// Acts with IO, most bytes first (ties by id).
pub(crate) fn acts_by_bytes(t: &Tables) -> Vec<ActId> {
    let mut ids: Vec<ActId> = t
        .acts_with_totals()
        .filter(|(_, _, tot)| tot.total_ios() > 0)
        .map(|(id, _, _)| id)
        .collect();
    ids.sort_by_key(|&id| (std::cmp::Reverse(t.totals[id.index()].total_bytes()), id));
    ids
}

/// Acts with IO, most device time first (ties by bytes, then id).
pub(crate) fn acts_by_io_time(t: &Tables, io_us: &[u64]) -> Vec<ActId> {
    let mut ids = acts_by_bytes(t);
    ids.sort_by_key(|&id| std::cmp::Reverse(io_us.get(id.index()).copied().unwrap_or(0)));
    ids
}

/// `text` in `style` when `color`, else as is.
pub(crate) fn paint(color: bool, style: Style, text: &str) -> String {
    if color {
        format!("{}{text}{}", style.render(), style.render_reset())
    } else {
        text.to_string()
    }
}

/// Headings.
const HEADING: Style = Style::new().bold();
/// Column titles and the second line of an act.
const DIM: Style = Style::new().dimmed();
/// Commands (comm).
const COMM: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Cyan)));
/// Warnings: unknown bytes, lost records.
const WARN: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Yellow)));

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "0.0%".to_string()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// One act of a top list, as its columns (number, bytes, IOs, device time, comm, task,
/// via, file) and its intent line.
struct ActRow {
    cols: [String; 8],
    intent: String,
}

fn act_row(n: usize, id: ActId, inp: &SummaryInput<'_>) -> Option<ActRow> {
    let t = inp.tables;
    let (a, tot) = (t.act(id)?, t.totals.get(id.index())?);
    let io_us = inp.act_io_us.get(id.index()).copied().unwrap_or(0);
    let file = match inp.paths.get(&a.file) {
        Some(p) => printable(p).into_owned(),
        None if a.file.ino == 0 => format!("{} (no inode)", dev_str(a.file.dev)),
        None => format!("{} ino {}", dev_str(a.file.dev), a.file.ino),
    };
    let name = inp
        .intent_names
        .get(a.intent.index())
        .map_or("?", |s| s.as_str());
    Some(ActRow {
        cols: [
            format!("{n}."),
            human_bytes(tot.total_bytes()),
            tot.total_ios().to_string(),
            human_us(io_us),
            act_comm(t, id).into_owned(),
            task_ids(t.role(a.role)),
            format!(
                "{}{}",
                a.via.name(),
                if a.recorder { " [recorder]" } else { "" }
            ),
            file,
        ],
        intent: format!("intent #{}: {}", a.intent, printable(name)),
    })
}

/// A top list of acts as an aligned table: every column as wide as its widest cell
/// (numbers right-aligned), the intent's name on a second line under the command.
fn act_table(out: &mut String, ids: &[ActId], inp: &SummaryInput<'_>) {
    const TITLES: [&str; 8] = [
        "", "BYTES", "IOs", "DEV TIME", "COMM", "TASK", "VIA", "FILE",
    ];
    const RIGHT: [bool; 8] = [true, true, true, true, false, false, false, false];
    let rows: Vec<ActRow> = ids
        .iter()
        .enumerate()
        .filter_map(|(n, &id)| act_row(n + 1, id, inp))
        .collect();
    if rows.is_empty() {
        let _ = writeln!(out, "  (no IO)");
        return;
    }
    let mut w = TITLES.map(|t| t.chars().count());
    for r in &rows {
        for (c, cell) in r.cols.iter().enumerate() {
            w[c] = w[c].max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 8], styles: [Style; 8]| {
        let mut l = String::new();
        for c in 0..8 {
            let pad = w[c] - cells[c].chars().count();
            // The last column is not padded (no trailing spaces).
            let (left, right) = match (RIGHT[c], c == 7) {
                (true, _) => (pad, 0),
                (false, false) => (0, pad),
                (false, true) => (0, 0),
            };
            l.push_str("  ");
            l.push_str(&" ".repeat(left));
            l.push_str(&paint(inp.color, styles[c], cells[c]));
            l.push_str(&" ".repeat(right));
        }
        l
    };
    let _ = writeln!(out, "{}", line(TITLES, [DIM; 8]));
    let plain = Style::new();
    let indent = " ".repeat(2 + w[0] + 2);
    for r in &rows {
        let cells: [&str; 8] = std::array::from_fn(|c| r.cols[c].as_str());
        let mut styles = [plain; 8];
        styles[4] = COMM;
        let _ = writeln!(out, "{}", line(cells, styles));
        let _ = writeln!(out, "{indent}{}", paint(inp.color, DIM, &r.intent));
    }
}

/// The terminal summary: totals per direction, lost records, the unknown share, the top acts
/// by bytes and by device time (role, file, the intent's name) and where the files were
/// written.
pub fn summary_text(inp: &SummaryInput<'_>) -> String {
    let s = inp.summary;
    let t = inp.tables;
    let mut out = String::new();
    let (mut bytes, mut ios) = ([0u64; 3], [0u64; 3]);
    let (mut unknown_bytes, mut unknown_ios) = (0u64, 0u64);
    for (_, a, tot) in t.acts_with_totals() {
        for d in 0..3 {
            bytes[d] += tot.bytes[d];
            ios[d] += tot.ios[d];
        }
        if a.via == Via::Unknown {
            unknown_bytes += tot.total_bytes();
            unknown_ios += tot.total_ios();
        }
    }
    let total: u64 = bytes.iter().sum();
    let n_ios: u64 = ios.iter().sum();
    let acts = acts_by_bytes(t);
    let head = format!(
        "ioblame report: {} in {n_ios} IOs charged to {} acts",
        human_bytes(total),
        acts.len()
    );
    let _ = writeln!(out, "{}", paint(inp.color, HEADING, &head));
    for (d, name) in [(Dir::R, "read"), (Dir::A, "readahead"), (Dir::W, "write")] {
        let i = d.index();
        let _ = writeln!(
            out,
            "  {name:<10} {:>11} {:>8} IOs",
            human_bytes(bytes[i]),
            ios[i]
        );
    }
    if s.other_ios > 0 {
        let _ = writeln!(
            out,
            "  {:<10} {:>11} {:>8} IOs (discards and other ops in the whole trace, not charged)",
            "other",
            human_bytes(s.other_bytes),
            s.other_ios
        );
    }
    let unknown = format!(
        "unknown origin: {} in {} IOs ({} of the bytes)",
        human_bytes(unknown_bytes),
        unknown_ios,
        pct(unknown_bytes, total)
    );
    let style = if unknown_bytes > 0 {
        WARN
    } else {
        Style::new()
    };
    let _ = writeln!(out, "{}", paint(inp.color, style, &unknown));
    if s.lost_records == 0 {
        let _ = writeln!(out, "lost records: none");
    } else {
        let lost = format!(
            "lost records: {} in {} window{}; {} of the IO shown overlapped them (attribution may be incomplete)",
            s.lost_records,
            s.lost_windows.len(),
            if s.lost_windows.len() == 1 { "" } else { "s" },
            human_bytes(inp.lost_window_bytes.unwrap_or(s.bytes_in_lost_windows))
        );
        let _ = writeln!(out, "{}", paint(inp.color, WARN, &lost));
    }
    if s.inflight_at_end > 0 {
        let _ = writeln!(
            out,
            "in flight at the end of the trace: {} requests, {}",
            s.inflight_at_end,
            human_bytes(s.inflight_bytes_at_end)
        );
    }
    if !s.warnings.is_empty() {
        let _ = writeln!(
            out,
            "warnings: {}",
            s.warnings.len() as u64 + s.warnings_suppressed
        );
    }

    let _ = writeln!(out, "\n{}", paint(inp.color, HEADING, "Top acts by bytes:"));
    let top: Vec<ActId> = acts.iter().copied().take(inp.top).collect();
    act_table(&mut out, &top, inp);
    let _ = writeln!(
        out,
        "\n{}",
        paint(inp.color, HEADING, "Top acts by device time:")
    );
    let top: Vec<ActId> = acts_by_io_time(t, inp.act_io_us)
        .into_iter()
        .take(inp.top)
        .collect();
    act_table(&mut out, &top, inp);
    if let Some((dir, files)) = inp.files {
        let _ = writeln!(out, "\nWritten to {}:", dir.display());
        for f in files {
            let _ = writeln!(out, "  {f}");
        }
    }
    out
}
