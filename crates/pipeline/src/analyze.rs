//! One analysis run: trace -> decode -> attribution, with per-act totals of the selected
//! devices and what the run found to say.

use std::collections::BTreeMap;

use ioblame_attrib::{
    attribute_events, attribute_stream_logged, ActTotals, Context, Dirtied, EventFeed, FileKey, Io,
    Progress, Summary, Tables, PROGRESS_EVERY,
};
use ioblame_counters::DevSelection;
use ioblame_decode::{for_each_event, Decoder, Event, StreamOptions, StreamStats, Symbolizer};

use ioblame_format::{PathTable, Trace};

use crate::diag::{self, Diagnostic};
use crate::open::Input;
use crate::scope::{ResolvedScope, ScopeCounter, ScopeSummary};

/// What an analysis run is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// Kernel symbols to classify stacks with (empty: stacks stay addresses).
    pub symbols: &'a Symbolizer,
    /// The devices whose IO is counted and handed out.
    pub devs: &'a DevSelection,
    /// Whether the recorder's own IO counts in the per-act totals.
    pub show_recorder: bool,
    /// The IO spoken of: IO outside it is counted in [`Analysis::scope`] only, neither handed
    /// to the caller nor in the per-act totals.
    pub scope: &'a ResolvedScope,
    /// Where user files are looked for beyond the trace: the unwind tables of stack copies
    /// in a recording that has none (perf.data), as the symbols of user frames are.
    pub user_symbols: &'a crate::UserSymbolOptions,
}

/// What one analysis run produced (the IOs went to the caller's consumer as they came).
#[derive(Debug)]
pub struct Analysis {
    /// Roles, intents, acts; `totals` count only IOs on the selected devices, and the
    /// recorder's own acts only when shown (they are zero otherwise).
    pub tables: Tables,
    /// Totals, leftovers, anomalies of the attribution.
    pub summary: Summary,
    /// What reading the trace met: damaged chunks, records skipped, event counts.
    pub stream: StreamStats,
    /// What the run found to say, in the order to tell it: the decoder's problems, the
    /// stream's damage, records lost, bytes not charged to a known act, the attribution's
    /// warnings, the recorder's IO left out, the scope.
    pub diagnostics: Vec<Diagnostic>,
    /// The scope and the IO inside and outside it.
    pub scope: ScopeSummary,
}

/// The paths of the files `tables`' acts are charged to, and of no other inode: a FILES
/// table can list millions (a host whose root filesystem was walked), and parsing it all is
/// most of a short analysis ([`Trace::paths_of`]).
pub fn charged_paths(trace: &Trace, tables: &Tables) -> PathTable {
    let charged: std::collections::HashSet<(u32, u64)> = tables
        .acts
        .iter()
        .filter(|act| act.file.ino != 0)
        .map(|act| (act.file.dev, act.file.ino))
        .collect();
    trace.paths_of(&charged)
}

/// The charged files (of acts shown: the recorder's own only with `show_recorder`) that
/// `paths` (from [`charged_paths`]) does not name, counted by why, with the bytes charged to
/// them: the note every output that prints paths gives, once. `None` when all are named, or
/// when the trace holds no table at all (recorded with `--no-paths`).
pub fn unnamed_files(
    trace: &Trace,
    tables: &Tables,
    paths: &PathTable,
    show_recorder: bool,
) -> Option<crate::Diagnostic> {
    let summary = trace.paths_summary();
    if summary.tables == 0 {
        return None;
    }
    // Why (an `Unnamed` code; `None`, listed first: not in any table) -> (files, bytes).
    type Files = std::collections::HashSet<(u32, u64)>;
    let mut by_why: BTreeMap<Option<u8>, (Files, u64)> = BTreeMap::new();
    for (_, act, tot) in tables.acts_with_totals() {
        let (dev, ino) = (act.file.dev, act.file.ino);
        // A block device's own inode (`ino == dev_t`) is shown as the device.
        if ino == 0
            || ino == dev as u64
            || (act.recorder && !show_recorder)
            || paths.get(dev, ino).is_some()
        {
            continue;
        }
        let why = paths.unnamed(dev, ino).map(|w| w.code());
        let e = by_why.entry(why).or_default();
        e.0.insert((dev, ino));
        e.1 += tot.bytes.iter().sum::<u64>();
    }
    if by_why.is_empty() {
        return None;
    }
    Some(crate::Diagnostic::UnnamedFiles {
        by_why: by_why
            .into_iter()
            .map(|(w, (files, bytes))| {
                (
                    w.and_then(ioblame_format::Unnamed::from_code),
                    files.len(),
                    bytes,
                )
            })
            .collect(),
        touched: summary.flags & ioblame_format::FILES_TOUCHED != 0,
    })
}

/// [`charged_paths`] keyed by file: each charged file the trace names, with its path (what
/// the report's and the dataset's tables name files by).
pub fn charged_file_paths(trace: &Trace, tables: &Tables) -> BTreeMap<FileKey, String> {
    file_paths(tables, &charged_paths(trace, tables))
}

/// [`charged_file_paths`] from the charged paths already looked up.
pub fn file_paths(tables: &Tables, paths: &PathTable) -> BTreeMap<FileKey, String> {
    tables
        .acts
        .iter()
        .filter(|act| act.file.ino != 0)
        .filter_map(|act| {
            Some((
                act.file.clone(),
                paths.get(act.file.dev, act.file.ino)?.to_string(),
            ))
        })
        .collect()
}

/// Per-act totals of the IOs counted: on a selected device, and not the recorder's own
/// unless shown.
pub(crate) struct Totals<'a> {
    devs: &'a DevSelection,
    show_recorder: bool,
    acts: Vec<ActTotals>,
    recorder: ActTotals,
    scope: ScopeCounter<'a>,
}

impl<'a> Totals<'a> {
    /// No IO counted yet, selecting as `opts` says.
    pub(crate) fn new(opts: &Options<'a>) -> Totals<'a> {
        Totals {
            devs: opts.devs,
            show_recorder: opts.show_recorder,
            acts: Vec::new(),
            recorder: ActTotals::default(),
            scope: ScopeCounter::new(opts.scope),
        }
    }

    /// Counts `io`; whether the caller's consumer gets it (it is on a selected device, in
    /// the scope).
    pub(crate) fn count(&mut self, io: &Io, tables: &Tables) -> bool {
        if !self.devs.enabled(io.dev) {
            return false;
        }
        if !self.scope.count(io, tables) {
            return false;
        }
        if tables.act(io.act).is_some_and(|a| a.recorder) {
            self.recorder.add_io(io);
            if !self.show_recorder {
                return true;
            }
        }
        let i = io.act.index();
        if self.acts.len() <= i {
            self.acts.resize(i + 1, ActTotals::default());
        }
        self.acts[i].add_io(io);
        true
    }
}

/// Decodes and attributes the whole trace, calling `on_io` for each charged IO on a
/// selected device, in completion order, with the tables as they are at that point (the
/// recorder's own IOs included: their act is flagged [`ioblame_attrib::Act::recorder`]),
/// and `progress` every [`ioblame_attrib::PROGRESS_EVERY`] events. The per-act totals of
/// the result leave the recorder's IO out unless [`Options::show_recorder`], as the
/// per-IO outputs do.
pub fn analyze(
    input: &Input,
    opts: &Options<'_>,
    on_io: impl FnMut(&Io, &Tables),
    progress: impl FnMut(Progress),
) -> Analysis {
    analyze_observed(input, opts, |_| {}, on_io, progress)
}

/// A feed that also shows each event to an observer first.
struct Observed<F, E>(F, E);

impl<F: EventFeed, E: FnMut(&Event)> EventFeed for Observed<F, E> {
    fn feed(self, mut f: impl FnMut(&Event, Option<&Event>)) {
        let Observed(feed, mut on_event) = self;
        feed.feed(|ev, ahead| {
            on_event(ev);
            f(ev, ahead)
        });
    }
}

/// [`analyze`], also showing `on_event` every event, in time order, before the attribution
/// takes it ([`ioblame_attrib::attribute_stream_observed`]).
pub fn analyze_observed(
    input: &Input,
    opts: &Options<'_>,
    on_event: impl FnMut(&Event),
    on_io: impl FnMut(&Io, &Tables),
    progress: impl FnMut(Progress),
) -> Analysis {
    analyze_observed_all(input, opts, on_event, on_io, |_, _| {}, progress)
}

/// [`analyze_observed`], also showing `outside` each charged IO on a selected device that
/// the scope leaves out (neither counted nor handed to `on_io`): what stood ahead of the
/// scope's IO on its devices, for the blame pass (`docs/latency.md`, "Blame").
pub fn analyze_observed_all(
    input: &Input,
    opts: &Options<'_>,
    on_event: impl FnMut(&Event),
    on_io: impl FnMut(&Io, &Tables),
    outside: impl FnMut(&Io, &Tables),
    progress: impl FnMut(Progress),
) -> Analysis {
    let none: Option<fn(&Dirtied, &Tables)> = None;
    analyze_logged(input, opts, on_event, on_io, outside, none, progress)
}

/// [`analyze_observed_all`], also showing `on_dirtied`, when given, what each role dirtied
/// ([`ioblame_attrib::attribute_stream_logged`]; a blktrace recording dirties nothing), on
/// every device (the caller selects).
pub fn analyze_logged<D: FnMut(&Dirtied, &Tables)>(
    input: &Input,
    opts: &Options<'_>,
    on_event: impl FnMut(&Event),
    mut on_io: impl FnMut(&Io, &Tables),
    mut outside: impl FnMut(&Io, &Tables),
    on_dirtied: Option<D>,
    progress: impl FnMut(Progress),
) -> Analysis {
    let trace = input.trace();
    let (decoder, mut diagnostics) = decoder_of(input);
    let mut ctx = context_of(trace, &decoder, opts, &mut diagnostics);
    ctx.issuer_only = input.blktrace().is_some();
    let mut totals = Totals::new(opts);
    let devs = opts.devs;
    let on_io = |io: &Io, tables: &Tables| {
        if totals.count(io, tables) {
            on_io(io, tables);
        } else if devs.enabled(io.dev) {
            outside(io, tables);
        }
    };
    let (done, stream) = match input.blktrace() {
        Some(rec) => {
            let feed = Observed(crate::blktrace::Feed(rec), on_event);
            let done = attribute_events(ctx, feed, on_io, progress);
            let stream = StreamStats {
                events: rec.scan().records,
                ..StreamStats::default()
            };
            (done, stream)
        }
        None => {
            let run = attribute_stream_logged(
                trace, &decoder, ctx, on_event, on_io, on_dirtied, progress,
            );
            (run.attribution, run.stream)
        }
    };
    conclude(
        done,
        totals,
        stream,
        diagnostics,
        trace,
        opts,
        input.blktrace().is_some(),
    )
}

/// The end of an analysis run, whole or live ([`crate::Live::finish`]): the per-act totals
/// into the tables, and what the run found to say after the decoder's problems.
pub(crate) fn conclude(
    done: ioblame_attrib::Attribution,
    totals: Totals<'_>,
    stream: StreamStats,
    mut diagnostics: Vec<Diagnostic>,
    trace: &Trace,
    opts: &Options<'_>,
    blktrace: bool,
) -> Analysis {
    let mut tables = done.tables;
    let mut acts = totals.acts;
    acts.resize(tables.acts.len(), ActTotals::default());
    tables.totals = acts;
    diagnostics.extend(diag::of_stream(&stream));
    diagnostics.extend(diag::of_summary(
        &done.summary,
        &tables,
        trace.header().start_clock_ns,
    ));
    diagnostics.extend(diag::recorder_left_out(
        &totals.recorder,
        opts.show_recorder,
    ));
    if blktrace {
        let (flusher_bytes, written_bytes) = crate::blktrace::flusher_share(&tables);
        diagnostics.push(Diagnostic::BlktraceWriters {
            flusher_bytes,
            written_bytes,
        });
    }
    let scope = totals.scope.summary;
    if !(opts.scope.is_all() && scope.outside_workload.is_none()) {
        diagnostics.push(Diagnostic::Scope(Box::new(scope.clone())));
    }
    Analysis {
        tables,
        summary: done.summary,
        stream,
        diagnostics,
        scope,
    }
}

/// What [`events`] met.
#[derive(Debug)]
pub struct EventsRun {
    /// What reading the input met: damaged chunks, records skipped, event counts.
    pub stream: StreamStats,
    /// What the run found to say: the decoder's problems, the stream's damage.
    pub diagnostics: Vec<Diagnostic>,
}

/// Shows `on_event` every event of the input in time order, without the attribution (for
/// an analysis that needs the events only, such as btt's latency breakdown of an input
/// without dirtier events); `progress` every [`PROGRESS_EVERY`] events.
pub fn events(
    input: &Input,
    mut on_event: impl FnMut(&Event),
    mut progress: impl FnMut(Progress),
) -> EventsRun {
    let mut n = 0u64;
    let mut each = |ev: &Event| {
        n += 1;
        if n % PROGRESS_EVERY == 0 {
            progress(Progress {
                events: n,
                time: ev.time,
            });
        }
        on_event(ev);
    };
    if let Some(rec) = input.blktrace() {
        rec.for_each_event(|ev, _| each(ev));
        let stream = StreamStats {
            events: rec.scan().records,
            ..StreamStats::default()
        };
        return EventsRun {
            diagnostics: diag::of_stream(&stream),
            stream,
        };
    }
    let trace = input.trace();
    let (decoder, mut diagnostics) = decoder_of(input);
    let stream = for_each_event(trace, &decoder, &StreamOptions::default(), |ev| each(ev));
    diagnostics.extend(diag::of_stream(&stream));
    EventsRun {
        stream,
        diagnostics,
    }
}

/// The decoder of `trace`'s records, and the problems it found in the trace's formats as the
/// first diagnostics.
fn decoder_of(input: &Input) -> (Decoder, Vec<Diagnostic>) {
    let trace = input.trace();
    let mut decoder = Decoder::new(trace.header(), trace.metadata());
    if input.drops_buffer_stacks() {
        decoder.drop_buffer_stacks(trace.metadata());
    }
    let diagnostics = decoder_problems(&decoder);
    (decoder, diagnostics)
}

/// The problems `decoder` found in the trace's formats, as diagnostics.
pub(crate) fn decoder_problems(decoder: &Decoder) -> Vec<Diagnostic> {
    decoder
        .problems()
        .iter()
        .cloned()
        .map(Diagnostic::Decoder)
        .collect()
}

/// The attribution's context of an ioblame trace decoded by `decoder`, with the symbols
/// and scope of `opts` (a note on sampled stacks joins `diagnostics`).
pub(crate) fn context_of(
    trace: &Trace,
    decoder: &Decoder,
    opts: &Options<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Context {
    let mut ctx = Context::from_trace(trace.header(), trace.metadata());
    // Every file's loop devices (one set up while recording is in the later files).
    ctx.loops = trace.loops();
    ctx.btrfs = trace.btrfs();
    ctx.user_maps = trace.user_maps();
    if let Some(u) = &ctx.unwinder {
        // Stack copies: unwound by the unwind tables the recorder copied (the blocks'
        // faults are said once, when the frames are named).
        let (symbols, _) = trace.user_symbols();
        let tables = ioblame_unwind::UnwindTables::new(&symbols);
        // The files the trace lacks (all of a perf.data's), where the symbols are looked for.
        let mut look = ioblame_symbolize::UnwindSource::new(opts.user_symbols.clone());
        let loader = move |build_id: &[u8], path: &str| look.tables(build_id, path);
        ctx.unwinder =
            Some(ioblame_unwind::Unwinder::new(u.arch(), tables).with_loader(Box::new(loader)));
    }
    ctx.dm_targets = trace.dm_targets();
    // The trace's own stack mode is in the context; dropping the buffers' stacks is not.
    ctx.buffer_stacks_from_thread = decoder.buffer_stacks_derived();
    if ctx.stacks_sampled {
        diagnostics.push(Diagnostic::StacksSampled {
            mode: trace.metadata().info("stacks").map(str::to_string),
        });
    }
    if !opts.symbols.is_empty() {
        // A clone shares the table.
        ctx.symbols = Some(Box::new(opts.symbols.clone()));
    }
    ctx.scope_root = opts.scope.root;
    ctx
}
