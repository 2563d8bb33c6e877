//! What the analyzer says while it runs: the diagnostics of `ioblame_pipeline` printed on
//! stderr (`ioblame: warning: ...`, `ioblame: note: ...`) as each step finds them, and a
//! progress bar drawn while the analysis runs. The session ([`crate::session`]) calls these
//! steps in the order each subcommand needs.

use std::path::PathBuf;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use ioblame_attrib::{Dirtied, Io, Tables};
use ioblame_decode::{Event, Symbolizer};
use ioblame_format::{PathTable, Trace};
use ioblame_pipeline::{
    Analysis, Diagnostic, Input, Options, Progress, SideFiles, UserSymbolOptions,
};

/// Names the user frames of `tables` ([`ioblame_pipeline::symbolize_user_frames`]) from the
/// places `opts` names, printing what could not be named.
pub fn name_user_frames(trace: &Trace, tables: &mut Tables, opts: &UserSymbolOptions) {
    for d in ioblame_pipeline::symbolize_user_frames(trace, tables, opts) {
        say(&d);
    }
}

/// Prints one diagnostic on stderr.
pub fn say(d: &Diagnostic) {
    eprintln!("ioblame: {d}");
}

/// Opens what the user named with the side files given ([`ioblame_pipeline::open_trace_with`]), printing its notes and the
/// damage found.
///
/// `IOBLAME_DROP_BUFFER_STACKS=1` analyses the dirty buffers as if recorded without their
/// callchains ([`Input::drop_buffer_stacks`]): the check, on a trace recorded with
/// `--stacks all`, of the rule that gives them their stacks (docs/attribution.md).
pub fn open_trace(paths: &[PathBuf], side: &SideFiles<'_>) -> Result<Input> {
    let mut notes = Vec::new();
    let trace = ioblame_pipeline::open_trace_with(paths, side, &mut notes);
    notes.iter().for_each(say);
    let mut trace = trace?;
    if std::env::var_os("IOBLAME_DROP_BUFFER_STACKS").is_some_and(|v| v == "1") {
        trace.drop_buffer_stacks();
    }
    Ok(trace)
}

/// Symbols of a trace, with a note on stderr when it has none.
pub fn symbols_of(trace: &Trace) -> Symbolizer {
    let (symbols, note) = ioblame_pipeline::symbols_of(trace);
    note.iter().for_each(say);
    symbols
}

/// Runs [`ioblame_pipeline::analyze_observed_all`] with a progress bar, then prints what it
/// found to say and names the user frames (from where `user` says).
pub fn analyze<D: FnMut(&Dirtied, &Tables)>(
    trace: &Input,
    opts: &Options<'_>,
    user: &UserSymbolOptions,
    on_event: impl FnMut(&Event),
    on_io: impl FnMut(&Io, &Tables),
    outside: impl FnMut(&Io, &Tables),
    on_dirtied: Option<D>,
) -> Analysis {
    let bar = Bar::new(trace);
    let mut a =
        ioblame_pipeline::analyze_logged(trace, opts, on_event, on_io, outside, on_dirtied, |p| {
            bar.show(p)
        });
    bar.done();
    a.diagnostics.iter().for_each(say);
    name_user_frames(trace.trace(), &mut a.tables, user);
    a
}

/// The paths of the charged files ([`ioblame_pipeline::charged_paths`]), with the note of
/// those that have none, and why, printed once.
pub fn charged_paths(trace: &Trace, tables: &Tables, show_recorder: bool) -> PathTable {
    let paths = ioblame_pipeline::charged_paths(trace, tables);
    note_unnamed(trace, tables, &paths, show_recorder);
    paths
}

/// Prints the note of the charged files `paths` does not name
/// ([`ioblame_pipeline::unnamed_files`]), and the damage met reading the path tables.
pub fn note_unnamed(trace: &Trace, tables: &Tables, paths: &PathTable, show_recorder: bool) {
    for p in trace.path_problems() {
        say(&ioblame_pipeline::Diagnostic::Trace(p));
    }
    if let Some(d) = ioblame_pipeline::unnamed_files(trace, tables, paths, show_recorder) {
        say(&d);
    }
}

/// Every decoded event to `on_event`, without the attribution ([`ioblame_pipeline::events`]),
/// with a progress bar, then what the run found to say.
pub fn events(trace: &Input, on_event: impl FnMut(&Event)) {
    let bar = Bar::new(trace);
    let run = ioblame_pipeline::events(trace, on_event, |p| bar.show(p));
    bar.done();
    run.diagnostics.iter().for_each(say);
}

/// A progress bar on stderr over the trace's time span (hidden when stderr is not a terminal).
struct Bar {
    bar: ProgressBar,
    first: u64,
}

impl Bar {
    fn new(trace: &Trace) -> Bar {
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
        Bar { bar, first }
    }

    /// Redraws at `p` (every [`ioblame_pipeline::PROGRESS_EVERY`] events).
    fn show(&self, p: Progress) {
        self.bar
            .set_position(p.time.saturating_sub(self.first) / 1_000_000);
        self.bar.set_message(format!("{} events", p.events));
    }

    fn done(&self) {
        self.bar.finish_and_clear();
    }
}
