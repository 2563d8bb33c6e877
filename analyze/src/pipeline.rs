//! The analysis driver: trace -> decode -> attribution -> per-IO consumers, run once.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use indicatif::{ProgressBar, ProgressStyle};
use ioblame_attrib::{ActTotals, Attributor, Context, Io, Summary, Tables};
use ioblame_counters::DevSelection;
use ioblame_decode::stream::{for_each_event_ahead, StreamOptions, StreamStats};
use ioblame_decode::{Decoder, Symbolizer};
use ioblame_format::{Trace, TraceFile};
use ioblame_perfdata::PerfDataOptions;

/// What one analysis run produced (the IOs went to the caller's consumer as they came).
pub struct Analysis {
    /// Roles, intents, acts; `totals` count only IOs on the selected devices, and the
    /// recorder's own acts only when shown (they are zero otherwise).
    pub tables: Tables,
    /// Totals, leftovers, anomalies of the attribution.
    pub summary: Summary,
    /// What reading the trace met: damaged chunks, records skipped, event counts.
    pub stream: StreamStats,
}

/// Per-act totals of the IOs counted: on a selected device, and not the recorder's own
/// unless shown.
struct Totals<'a> {
    devs: &'a DevSelection,
    show_recorder: bool,
    acts: Vec<ActTotals>,
    recorder: ActTotals,
}

impl Totals<'_> {
    /// Counts `io`; whether the caller's consumer gets it (it is on a selected device).
    fn count(&mut self, io: &Io, tables: &Tables) -> bool {
        if !self.devs.enabled(io.dev) {
            return false;
        }
        if tables.act(io.act).is_some_and(|a| a.recorder) {
            self.recorder.add(io.dir, io.size);
            if !self.show_recorder {
                return true;
            }
        }
        let i = io.act.index();
        if self.acts.len() <= i {
            self.acts.resize(i + 1, ActTotals::default());
        }
        self.acts[i].add(io.dir, io.size);
        true
    }
}

/// Opens what the user named: an ioblame trace directory, one or more ring files of one
/// capture, or a `perf.data` recording (converted in memory; its notes go to stderr). Damage
/// the reader found is reported on stderr, and reading goes on up to it.
pub fn open_trace(paths: &[PathBuf], kallsyms: Option<&Path>) -> Result<Trace> {
    let t = match paths {
        [] => anyhow::bail!("no trace given"),
        [one] if ioblame_perfdata::is_perf_data(one) => {
            let opts = PerfDataOptions {
                kallsyms: kallsyms.map(Path::to_path_buf),
            };
            let c = ioblame_perfdata::open_perf_data(one, &opts)
                .with_context(|| format!("cannot read perf.data {}", one.display()))?;
            for n in &c.notes {
                eprintln!("ioblame: note: {n}");
            }
            c.trace
        }
        [one] => {
            if kallsyms.is_some() {
                eprintln!("ioblame: note: --kallsyms is ignored for ioblame traces (they carry the recording host's symbols)");
            }
            Trace::open(one).with_context(|| format!("cannot read trace {}", one.display()))?
        }
        many => {
            let mut files = Vec::new();
            for p in many {
                if p.is_dir() || ioblame_perfdata::is_perf_data(p) {
                    anyhow::bail!(
                        "{}: several inputs must all be ring files (.iob) of one capture; give a directory or a perf.data file alone",
                        p.display()
                    );
                }
                files.push(
                    TraceFile::open(p)
                        .with_context(|| format!("cannot read trace file {}", p.display()))?,
                );
            }
            files.sort_by_key(|f| f.header().file_index);
            if let Some(w) = files
                .windows(2)
                .find(|w| w[0].header().file_index == w[1].header().file_index)
            {
                anyhow::bail!(
                    "{} and {} are the same ring file (index {}) of one capture; give each once",
                    w[0].path().display(),
                    w[1].path().display(),
                    w[0].header().file_index
                );
            }
            let id = files[0].header().trace_id;
            if let Some(f) = files.iter().find(|f| f.header().trace_id != id) {
                anyhow::bail!(
                    "{} belongs to another capture than {} (trace ids differ)",
                    f.path().display(),
                    files[0].path().display()
                );
            }
            Trace::from_files(files, Vec::new())
        }
    };
    for p in t.problems() {
        eprintln!("ioblame: warning: {p}");
    }
    Ok(t)
}

/// Symbols of a trace, with a note on stderr when it has none.
pub fn symbols_of(trace: &Trace) -> Symbolizer {
    match &trace.metadata().kallsyms {
        Some(k) if !k.restricted => Symbolizer::from_kallsyms(&k.text),
        Some(_) => {
            eprintln!(
                "ioblame: note: the recording host hid kernel addresses (kptr_restrict); stacks are shown as addresses"
            );
            Symbolizer::default()
        }
        None => {
            eprintln!(
                "ioblame: note: the trace has no kernel symbols; stacks are shown as addresses"
            );
            Symbolizer::default()
        }
    }
}

/// Runs decode and attribution over the whole trace, calling `on_io` for each charged IO on
/// a selected device, in completion order, with the tables as they are at that point (the
/// recorder's own IOs included: their act is flagged [`ioblame_attrib::Act::recorder`]).
/// The per-act totals of the result leave the recorder's IO out unless `show_recorder`,
/// as the per-IO outputs do.
pub fn analyze(
    trace: &Trace,
    symbols: &Symbolizer,
    devs: &DevSelection,
    show_recorder: bool,
    mut on_io: impl FnMut(&Io, &Tables),
) -> Result<Analysis> {
    let decoder = Decoder::new(trace.header(), trace.metadata());
    for p in decoder.problems() {
        eprintln!("ioblame: warning: {p}");
    }
    let mut ctx = Context::from_trace(trace.header(), trace.metadata());
    if !symbols.is_empty() {
        // A clone shares the table.
        ctx.symbols = Some(Box::new(symbols.clone()));
    }
    let mut attr = Attributor::new(ctx);
    let progress = Progress::new(trace);
    let mut totals = Totals {
        devs,
        show_recorder,
        acts: Vec::new(),
        recorder: ActTotals::default(),
    };
    let mut buf: Vec<Io> = Vec::new();
    let stream = for_each_event_ahead(trace, &decoder, &StreamOptions::default(), |ev, ahead| {
        progress.tick(ev.time);
        if let Some(a) = ahead {
            attr.prefetch(a);
        }
        attr.push(ev);
        attr.drain_ios_into(&mut buf);
        if !buf.is_empty() {
            let tables = attr.tables();
            for io in buf.drain(..) {
                if totals.count(&io, tables) {
                    on_io(&io, tables);
                }
            }
        }
    });
    progress.done();
    let done = attr.finish();
    let mut tables = done.tables;
    for io in &done.ios {
        if totals.count(io, &tables) {
            on_io(io, &tables);
        }
    }
    let recorder = totals.recorder;
    let mut acts = totals.acts;
    acts.resize(tables.acts.len(), ActTotals::default());
    tables.totals = acts;
    report_stream(&stream, &decoder);
    report_summary(&done.summary, &tables, trace);
    if let Some(note) = recorder_note(&recorder, show_recorder) {
        eprintln!("ioblame: {note}");
    }
    Ok(Analysis {
        tables,
        summary: done.summary,
        stream,
    })
}

fn report_stream(s: &StreamStats, _decoder: &Decoder) {
    for d in &s.damaged {
        eprintln!(
            "ioblame: warning: cpu {} chunk {} unreadable, skipped: {}",
            d.cpu, d.seq, d.error
        );
    }
    let errors: Vec<String> = s
        .decode
        .error_reasons()
        .map(|(r, n)| format!("{n} {}", r.as_str()))
        .collect();
    if !errors.is_empty() {
        eprintln!("ioblame: warning: records skipped: {}", errors.join(", "));
    }
}

fn report_summary(s: &Summary, tables: &Tables, trace: &Trace) {
    if s.lost_records > 0 {
        let start = trace.header().start_clock_ns;
        let when: Vec<String> = s
            .lost_windows
            .iter()
            .take(8)
            .map(|w| {
                format!(
                    "{} on cpu {} at {:.3}s",
                    w.count,
                    w.cpu,
                    w.end.saturating_sub(start) as f64 / 1e9
                )
            })
            .collect();
        eprintln!(
            "ioblame: warning: the kernel lost {} records during the capture ({}{}); {} bytes of IO overlap those windows and may be misattributed",
            s.lost_records,
            when.join(", "),
            if s.lost_windows.len() > 8 { ", ..." } else { "" },
            s.bytes_in_lost_windows
        );
    }
    for line in byte_accounting(s) {
        eprintln!("ioblame: {line}");
    }
    if let Some(line) = unknown_note(s, tables) {
        eprintln!("ioblame: {line}");
    }
    for w in &s.warnings {
        eprintln!("ioblame: warning: {w}");
    }
    if s.warnings_suppressed > 0 {
        eprintln!(
            "ioblame: warning: ... and {} more warnings",
            s.warnings_suppressed
        );
    }
}

/// The lines that account for IO bytes not charged to a known act: charged to the lost
/// intent after two minutes without progress, left queued or in flight at the end, or
/// neither reads nor writes. Every byte the trace shows is either in an act or here.
pub fn byte_accounting(s: &Summary) -> Vec<String> {
    let mut v = Vec::new();
    if s.stale_bytes > 0 {
        v.push(format!(
            "warning: {} bytes of IO ({} requests issued, the rest bios queued) saw no issue or completion for two minutes of trace time; they are charged to the lost intent (#1) with their file, issuer and reason",
            s.stale_bytes, s.stale_requests
        ));
    }
    if s.pending_bytes_at_end > 0 || s.inflight_bytes_at_end > 0 {
        v.push(format!(
            "note: at the end of the trace {} bytes were queued but not issued and {} bytes ({} requests) were in flight; they are not charged",
            s.pending_bytes_at_end, s.inflight_bytes_at_end, s.inflight_at_end
        ));
    }
    if s.other_bytes > 0 {
        v.push(format!(
            "note: {} requests ({} bytes) were neither reads nor writes (discards, ...); they are not charged to acts",
            s.other_ios, s.other_bytes
        ));
    }
    v
}

/// The note saying the recorder's own IO is left out, if it is and there is some.
fn recorder_note(recorder: &ActTotals, show_recorder: bool) -> Option<String> {
    (!show_recorder && recorder.total_ios() > 0).then(|| {
        format!(
            "note: the recorder's own IO ({} bytes in {} IOs) is left out; --show-recorder shows it",
            recorder.total_bytes(),
            recorder.total_ios()
        )
    })
}

/// Contexts of the IO charged to the lost intent shown on stderr, largest first.
const UNKNOWN_CONTEXTS_SHOWN: usize = 5;

/// The note on IO charged to the lost intent (#1): how much, and the largest contexts
/// (file, issuer, reason) it was charged in.
pub fn unknown_note(s: &Summary, tables: &Tables) -> Option<String> {
    if s.unknown_bytes == 0 {
        return None;
    }
    let ctx: Vec<String> = s
        .unknown_contexts
        .iter()
        .take(UNKNOWN_CONTEXTS_SHOWN)
        .map(|u| {
            let issuer = match tables.role(u.issuer) {
                Some(r) if r.pid != 0 || r.tid != 0 => format!("pid-{} ({})", r.pid, r.comm),
                _ => "an unseen task".to_string(),
            };
            format!(
                "{} B on {}:{} ino {} queued by {}{}",
                u.bytes,
                ioblame_decode::dev_major(u.file.dev),
                ioblame_decode::dev_minor(u.file.dev),
                u.file.ino,
                issuer,
                u.reason
                    .map(|r| format!(" for {}", r.name()))
                    .unwrap_or_default()
            )
        })
        .collect();
    let more = s
        .unknown_contexts
        .len()
        .saturating_sub(UNKNOWN_CONTEXTS_SHOWN);
    Some(format!(
        "note: {} bytes ({} IOs) have no known origin (dirtied before the capture, or records lost) and are charged to the lost intent (#1): {}{}",
        s.unknown_bytes,
        s.unknown_ios,
        ctx.join("; "),
        if more > 0 {
            format!("; and {more} more contexts")
        } else {
            String::new()
        }
    ))
}

/// A progress bar on stderr over the trace's time span (hidden when stderr is not a terminal).
struct Progress {
    bar: ProgressBar,
    first: u64,
    n: std::cell::Cell<u64>,
}

impl Progress {
    fn new(trace: &Trace) -> Progress {
        let first = trace
            .chunks()
            .iter()
            .map(|c| c.header.first_ts)
            .min()
            .unwrap_or(0);
        let last = trace
            .chunks()
            .iter()
            .map(|c| c.header.last_ts)
            .max()
            .unwrap_or(0);
        let span_ms = last.saturating_sub(first) / 1_000_000;
        let bar = ProgressBar::with_draw_target(
            Some(span_ms.max(1)),
            indicatif::ProgressDrawTarget::stderr(),
        );
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} analysing [{bar:30}] {percent}% of the trace's time, {msg} ({elapsed}, eta {eta})",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        Progress {
            bar,
            first,
            n: std::cell::Cell::new(0),
        }
    }

    /// Called per event; redraws every 64Ki events.
    fn tick(&self, time: u64) {
        let n = self.n.get() + 1;
        self.n.set(n);
        if n % 65_536 == 0 {
            self.bar
                .set_position(time.saturating_sub(self.first) / 1_000_000);
            self.bar.set_message(format!("{n} events"));
        }
    }

    fn done(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioblame_attrib::RoleId;
    use ioblame_decode::synth::{builtin_format, TraceBuilder, Val};

    /// A one-CPU synthetic trace with `block_bio_queue`, `block_rq_issue` and
    /// `block_rq_complete` (their ids in that order), and a time 1 ms into it.
    fn request_trace() -> (TraceBuilder, [u16; 3], u64) {
        let mut t = TraceBuilder::new(ioblame_format::ByteOrder::native(), 1);
        let ids = [
            "block:block_bio_queue",
            "block:block_rq_issue",
            "block:block_rq_complete",
        ]
        .map(|name| {
            t.add_event(name, builtin_format(name).unwrap(), false)
                .unwrap()
        });
        let base = t.header().start_clock_ns + 1_000_000;
        (t, ids, base)
    }

    /// The fields of a successful 8-sector `block_rq_complete`.
    fn done(
        dev: Val<'static>,
        sector: Val<'static>,
        rwbs: &'static str,
    ) -> Vec<(&'static str, Val<'static>)> {
        vec![
            ("dev", dev),
            ("sector", sector),
            ("nr_sector", Val::U(8)),
            ("error", Val::I(0)),
            ("rwbs", Val::Str(rwbs)),
        ]
    }

    /// A bio queued and never issued, and a discard: neither is charged to an act, and both
    /// are accounted for on stderr.
    #[test]
    fn bytes_not_charged_are_accounted_for() {
        let (mut t, [q, d, c], base) = request_trace();
        let dev = Val::U(7 << 20);
        let bio = |sector: u64, rwbs: &'static str| {
            vec![
                ("dev", dev),
                ("sector", Val::U(sector)),
                ("nr_sector", Val::U(8)),
                ("rwbs", Val::Str(rwbs)),
                ("comm", Val::Str("w")),
            ]
        };
        t.sample(0, q, base, 42, 42, &[], &bio(2048, "W")).unwrap();
        let mut issue = bio(4096, "D");
        issue.push(("bytes", Val::U(4096)));
        t.sample(0, d, base + 10, 0, 0, &[], &issue).unwrap();
        t.sample(0, c, base + 20, 0, 0, &[], &done(dev, Val::U(4096), "D"))
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        t.write(&path).unwrap();
        let trace = Trace::open(&path).unwrap();
        let a = analyze(
            &trace,
            &Symbolizer::default(),
            &DevSelection::all(),
            false,
            |_, _| {},
        )
        .unwrap();
        assert_eq!(
            a.tables.totals.iter().map(|t| t.total_bytes()).sum::<u64>(),
            0
        );
        let lines = byte_accounting(&a.summary);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].contains("4096 bytes were queued but not issued"),
            "{lines:?}"
        );
        assert!(
            lines[1].contains("1 requests (4096 bytes) were neither reads nor writes"),
            "{lines:?}"
        );
        let stale = Summary {
            stale_bytes: 8192,
            stale_requests: 1,
            ..Summary::default()
        };
        assert!(byte_accounting(&stale)[0].contains("8192 bytes of IO (1 requests issued"));
    }

    /// The recorder's own IO is left out of the per-act totals unless shown, as from the
    /// per-IO outputs; the consumer still sees it, flagged.
    #[test]
    fn recorder_io_is_left_out_of_totals_unless_shown() {
        let (mut t, [q, d, c], base) = request_trace();
        let recorder = t.header().recorder_pid;
        let dev = Val::U(7 << 20);
        for (i, pid) in [(0u64, recorder), (1, recorder + 41)] {
            let sector = Val::U(2048 + 8 * i);
            let at = base + 100 * i;
            let bio = [
                ("dev", dev),
                ("sector", sector),
                ("nr_sector", Val::U(8)),
                ("rwbs", Val::Str("RA")),
                ("comm", Val::Str("x")),
            ];
            t.sample(0, q, at, pid, pid, &[], &bio).unwrap();
            let mut issue = bio.to_vec();
            issue.push(("bytes", Val::U(4096)));
            t.sample(0, d, at + 10, 0, 0, &[], &issue).unwrap();
            t.sample(0, c, at + 20, 0, 0, &[], &done(dev, sector, "RA"))
                .unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        t.write(&path).unwrap();
        for show in [false, true] {
            let trace = Trace::open(&path).unwrap();
            let mut seen = 0;
            let a = analyze(
                &trace,
                &Symbolizer::default(),
                &DevSelection::all(),
                show,
                |_, _| seen += 1,
            )
            .unwrap();
            assert_eq!(seen, 2, "the consumer gets every IO");
            let total: u64 = a.tables.totals.iter().map(|t| t.total_bytes()).sum();
            assert_eq!(total, if show { 8192 } else { 4096 }, "show {show}");
            let recorder = a
                .tables
                .acts_with_totals()
                .filter(|(_, a, _)| a.recorder)
                .map(|(_, _, t)| t.total_bytes())
                .sum::<u64>();
            assert_eq!(recorder, if show { 4096 } else { 0 });
        }
        let mut r = ActTotals::default();
        r.add(ioblame_attrib::Dir::W, 4096);
        assert!(recorder_note(&r, false)
            .unwrap()
            .contains("4096 bytes in 1 IOs"));
        assert!(recorder_note(&r, true).is_none());
    }

    /// The lost intent's contexts are printed: file, issuer, reason.
    #[test]
    fn unknown_contexts_are_noted() {
        use ioblame_attrib::{FileKey, Role, UnknownContext, WbReason};
        let tables = Tables {
            roles: vec![Role {
                pid: 50,
                tid: 50,
                comm: "kworker/u8:0".into(),
                generation: 0,
            }],
            ..Tables::default()
        };
        let s = Summary {
            unknown_bytes: 4096,
            unknown_ios: 1,
            unknown_contexts: vec![UnknownContext {
                file: FileKey {
                    dev: 7 << 20,
                    ino: 219,
                },
                issuer: RoleId(0),
                reason: Some(WbReason(2)),
                bytes: 4096,
                ios: 1,
            }],
            ..Summary::default()
        };
        let n = unknown_note(&s, &tables).unwrap();
        assert!(
            n.contains("4096 B on 7:0 ino 219 queued by pid-50 (kworker/u8:0) for sync"),
            "{n}"
        );
        assert!(unknown_note(&Summary::default(), &tables).is_none());
    }
}
