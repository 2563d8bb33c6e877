//! The terminal summary of a report.

use std::fmt::Write as _;
use std::path::Path;

use ioblame_attrib::{ActId, Dir, IntentId, Summary, Symbolizer, Tables, Via};

use crate::util::{
    act_comm, dev_str, frame_name, human_bytes, human_us, modifier_reason, printable, task_ids,
};

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
    /// Acts shown in each top list.
    pub top: usize,
    /// The output directory and the files written in it (relative names).
    pub files: Option<(&'a Path, &'a [String])>,
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

/// The first `n` frames of an intent, innermost first, joined by ` <- ` (with the writeback
/// reason in front where the intent has one).
pub(crate) fn intent_frames(
    t: &Tables,
    sym: &dyn Symbolizer,
    intent: IntentId,
    n: usize,
) -> String {
    let Some(it) = t.intent(intent) else {
        return "?".to_string();
    };
    let mut s = String::new();
    if let Some(r) = modifier_reason(it.modifier) {
        let _ = write!(s, "[wb:{}] ", r.name());
    }
    if it.stack.is_empty() {
        s.push_str(match intent {
            ioblame_attrib::INTENT_LOST => "[lost: origin unknown]",
            ioblame_attrib::INTENT_NOMEM => "[nomem]",
            _ => "[no stack]",
        });
    } else {
        let f: Vec<String> = it
            .stack
            .iter()
            .take(n)
            .map(|&a| frame_name(sym, a))
            .collect();
        s.push_str(&f.join(" <- "));
        if it.stack.len() > n {
            s.push_str(" <- ...");
        }
    }
    s
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "0.0%".to_string()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

fn act_line(out: &mut String, n: usize, id: ActId, inp: &SummaryInput<'_>, sym: &dyn Symbolizer) {
    let t = inp.tables;
    let (Some(a), Some(tot)) = (t.act(id), t.totals.get(id.index())) else {
        return;
    };
    let task = task_ids(t.role(a.role));
    let io_us = inp.act_io_us.get(id.index()).copied().unwrap_or(0);
    let file = match inp.paths.get(&a.file) {
        Some(p) => printable(p).into_owned(),
        None if a.file.ino == 0 => format!("{} (no inode)", dev_str(a.file.dev)),
        None => format!("{} ino {}", dev_str(a.file.dev), a.file.ino),
    };
    let _ = writeln!(
        out,
        "{n:>3}. {:>11} {:>6} IOs  io {:>10}  {} ({task}) via {}{}  file {file}",
        human_bytes(tot.total_bytes()),
        tot.total_ios(),
        human_us(io_us),
        act_comm(t, id),
        a.via.name(),
        if a.recorder { " [recorder]" } else { "" },
    );
    let _ = writeln!(
        out,
        "     intent #{}: {}",
        a.intent,
        intent_frames(t, sym, a.intent, 3)
    );
}

/// The terminal summary: totals per direction, lost records, the unknown share, the top acts
/// by bytes and by device time (role, top frames of the intent, file) and where the files
/// were written.
pub fn summary_text(inp: &SummaryInput<'_>, sym: &dyn Symbolizer) -> String {
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
    let _ = writeln!(
        out,
        "ioblame report: {} in {n_ios} IOs charged to {} acts",
        human_bytes(total),
        acts.len()
    );
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
    let _ = writeln!(
        out,
        "unknown origin: {} in {} IOs ({} of the bytes)",
        human_bytes(unknown_bytes),
        unknown_ios,
        pct(unknown_bytes, total)
    );
    if s.lost_records == 0 {
        let _ = writeln!(out, "lost records: none");
    } else {
        let _ = writeln!(
            out,
            "lost records: {} in {} window{}; {} of the IO shown overlapped them (attribution may be incomplete)",
            s.lost_records,
            s.lost_windows.len(),
            if s.lost_windows.len() == 1 { "" } else { "s" },
            human_bytes(inp.lost_window_bytes.unwrap_or(s.bytes_in_lost_windows))
        );
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

    let _ = writeln!(out, "\nTop acts by bytes:");
    if acts.is_empty() {
        let _ = writeln!(out, "  (no IO)");
    }
    for (n, &id) in acts.iter().take(inp.top).enumerate() {
        act_line(&mut out, n + 1, id, inp, sym);
    }
    let _ = writeln!(out, "\nTop acts by device time:");
    if acts.is_empty() {
        let _ = writeln!(out, "  (no IO)");
    }
    for (n, &id) in acts_by_io_time(t, inp.act_io_us)
        .iter()
        .take(inp.top)
        .enumerate()
    {
        act_line(&mut out, n + 1, id, inp, sym);
    }
    if let Some((dir, files)) = inp.files {
        let _ = writeln!(out, "\nWritten to {}:", dir.display());
        for f in files {
            let _ = writeln!(out, "  {f}");
        }
    }
    out
}
