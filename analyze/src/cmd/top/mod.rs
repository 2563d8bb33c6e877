//! `ioblame top`: who is causing IO now. It starts `ioblame-capture record` into a bounded
//! temporary ring (or follows a recording someone else runs), reads the chunks as the
//! recorder flushes them ([`ioblame_pipeline::Follow`]), attributes them as they come
//! ([`ioblame_pipeline::Live`], the offline analysis' rules), and shows per interval the
//! bytes dirtied and the IO charged back to whoever caused it: a terminal view
//! ([`view`]), or text or JSON lines per interval (`--batch`, `--json`).

mod blame;
mod model;
mod names;
mod rows;
mod source;
mod view;

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use ioblame_attrib::{ActId, Dirtied, Io, Tables};
use ioblame_counters::DevSelection;
use ioblame_pipeline::{Follow, Live, Options, Scope, UserSymbolOptions};

use crate::session::{self, DevArgs, Session};

pub use model::GroupBy;
use model::Model;
pub use rows::SortBy;

/// `ioblame top`'s arguments.
#[derive(clap::Args, Debug)]
pub struct TopArgs {
    /// Follow a recording someone else runs (an `ioblame-capture record` output directory)
    /// instead of starting the recorder.
    #[arg(long, value_name = "TRACE_DIR", value_hint = clap::ValueHint::DirPath)]
    pub follow: Option<PathBuf>,
    /// Keep the recording in DIR (created; it must hold no trace) instead of a temporary
    /// ring removed at exit: `ioblame acts DIR` then shows the same totals.
    #[arg(long, value_name = "DIR", conflicts_with = "follow", value_hint = clap::ValueHint::DirPath)]
    pub keep: Option<PathBuf>,
    /// Time between two refreshes: each interval shows what the recording holds up to the
    /// time the recorder last flushed every CPU.
    #[arg(long, default_value = "1s", value_parser = ioblame_clidoc::parse_duration, value_name = "DUR")]
    pub interval: Duration,
    /// How often the recorder it starts flushes every CPU's records (its `--flush-interval`).
    #[arg(
        long,
        default_value = "250ms",
        value_name = "DUR",
        conflicts_with = "follow"
    )]
    pub flush_interval: String,
    /// The size cap of the ring it records into (the recorder's `--max-size`).
    #[arg(
        long,
        default_value = "256M",
        value_name = "SIZE",
        conflicts_with = "follow"
    )]
    pub max_size: String,
    /// The recorder to start (default: `ioblame-capture` beside this program, else on PATH).
    #[arg(long, value_name = "PATH", conflicts_with = "follow")]
    pub capture: Option<PathBuf>,
    /// Print each interval as text instead of drawing the view (like `top -b`).
    #[arg(long)]
    pub batch: bool,
    /// Print each interval as JSON lines: one object per act, with the keys of `ioblame acts
    /// --json` and the interval's; at exit the totals (docs/top.md).
    #[arg(long)]
    pub json: bool,
    /// Stop after N intervals (then stop the recorder and print the totals).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub iterations: Option<u64>,
    /// How rows are formed: act (role, stack and file), task, process, cgroup, file, intent
    /// or device.
    #[arg(long, default_value = "act", value_name = "KEY")]
    pub group: GroupBy,
    /// The column rows are sorted by: dirtied, write, read, iops, devtime, qlat, dlat, pid,
    /// comm.
    #[arg(long, default_value = "devtime", value_name = "COLUMN")]
    pub sort: SortBy,
    /// Rows printed per interval with --batch (the view shows what fits).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub rows: usize,
    /// Options for `ioblame-capture record` (after `--`), e.g. `-- --devices sda --stacks
    /// all`.
    #[arg(last = true, value_name = "RECORD_OPTIONS", conflicts_with = "follow")]
    pub record: Vec<String>,
}

#[derive(clap::Args, Debug)]
pub struct TopCmdArgs {
    #[command(flatten)]
    top: TopArgs,
    #[command(flatten)]
    devs: DevArgs,
}

/// Where the events come from, and how the run ends.
pub struct Run {
    follow: Follow,
    source: source::Source,
}

/// The live analysis' state between two intervals.
struct State<'a> {
    live: Live<'a>,
    model: Model,
    names: names::Names,
    ios: Vec<Io>,
    dirtied: Vec<Dirtied>,
    /// The interval's IOs (and the previous one's) for the time others waited behind each.
    blame: blame::LiveBlame,
    /// The trace time the current interval starts at, and the number of the interval.
    from: u64,
    interval: u64,
}

impl State<'_> {
    /// Takes what the live analysis charged since the last call into the model (`end`:
    /// every event was pushed).
    fn absorb(&mut self, end: bool) {
        self.live.take(&mut self.ios, &mut self.dirtied, end);
        let tables = self.live.tables();
        for io in self.ios.drain(..) {
            self.blame.push(&io);
            self.model.add_io(&io, tables);
        }
        for d in self.dirtied.drain(..) {
            let frames = self.live.stack_frames(d.stack);
            self.model.add_dirtied(&d, frames, tables);
        }
    }

    /// Splits the interval's IOs' waits into the model (before it is shown).
    fn split_waits(&mut self) {
        let tables = self.live.tables();
        for w in self.blame.interval() {
            self.model.add_wait(w, tables);
        }
    }
}

/// One interval as shown: its number, its start and length (ns of trace time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// 1 for the first interval.
    pub number: u64,
    /// The trace time it starts at, ns since the recording started.
    pub start_ns: u64,
    /// Its length, ns.
    pub len_ns: u64,
}

impl Span {
    /// Its length in seconds (at least a millisecond: rates stay finite).
    pub fn secs(&self) -> f64 {
        (self.len_ns.max(1_000_000)) as f64 / 1e9
    }
}

/// Runs `ioblame top`.
pub fn run(
    out: &mut impl Write,
    a: TopCmdArgs,
    session: &Session,
) -> Result<std::process::ExitCode> {
    let (devs, show_recorder) = (a.devs.devs.as_deref(), a.devs.show_recorder);
    let (a, scope) = (a.top, session.scope_given());
    if !a.batch && !a.json && !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        anyhow::bail!("the view needs a terminal: give --batch (text) or --json");
    }
    let stop = source::Stop::install();
    let source = source::Source::start(&a)?;
    // On an error the source, dropped, stops the recorder and removes the temporary ring.
    run_with(out, &a, devs, show_recorder, scope, source, &stop)
}

fn run_with(
    out: &mut impl Write,
    a: &TopArgs,
    devs: Option<&str>,
    show_recorder: bool,
    scope: Option<&Scope>,
    mut source: source::Source,
    stop: &source::Stop,
) -> Result<std::process::ExitCode> {
    let follow = source.wait_for_trace(stop)?;
    let mut run = Run { follow, source };
    let trace = run.follow.trace();
    let sel = match devs {
        Some(s) => DevSelection::parse(s, &trace.metadata().block_devices)?,
        None => DevSelection::all(),
    };
    let scope = session::resolve_scope(trace, scope, false)?;
    let (symbols, sym_note) = ioblame_pipeline::symbols_of(trace);
    let opts = Options {
        symbols: &symbols,
        devs: &sel,
        show_recorder,
        scope: &scope,
        // A trace being written has no unwind tables yet: stack copies are unwound by
        // frame pointers (the user frames are not shown by top).
        user_symbols: &UserSymbolOptions::default(),
    };
    let recorder_pid = (trace.header().recorder_pid != 0).then_some(trace.header().recorder_pid);
    let start_ns = trace.header().start_clock_ns;
    let names = names::Names::new(run.source.dir(), trace);
    let mut st = State {
        live: Live::new(&run.follow, &opts),
        model: Model::new(show_recorder, recorder_pid),
        names,
        ios: Vec::new(),
        dirtied: Vec::new(),
        blame: blame::LiveBlame::default(),
        from: start_ns,
        interval: 0,
    };
    let mut notes: Vec<String> = sym_note.iter().map(|d| d.to_string()).collect();
    let text = a.batch || a.json;
    let mut ui = if text {
        None
    } else {
        Some(view::Terminal::enter(a.group, a.sort)?)
    };
    if text {
        for n in &notes {
            eprintln!("ioblame: note: {n}");
        }
        notes.clear();
    }
    let mut next = Instant::now() + a.interval;
    loop {
        // Wait for the next refresh, handling keys meanwhile.
        let quit = match &mut ui {
            Some(t) => {
                let ctx = rows::Ctx {
                    model: &st.model,
                    tables: st.live.tables(),
                    names: &mut st.names,
                    symbols: &symbols,
                    notes: &notes,
                };
                t.wait(next, ctx)?
            }
            None => stop.wait_until(next),
        };
        if quit {
            break;
        }
        next += a.interval;
        if Instant::now() > next {
            // Asleep or stopped for longer: start counting again from now.
            next = Instant::now() + a.interval;
        }
        let step = run.follow.read()?;
        if st.interval == 0 && step.chunks > 0 && !run.follow.marked() {
            let n = format!(
                "the recorder writes no flush marks (a recorder before format 1.6): the view \
                 lags {} s behind the newest chunk",
                ioblame_pipeline::UNMARKED_LAG.as_secs()
            );
            if text {
                eprintln!("ioblame: note: {n}");
            }
            notes.push(n);
        }
        let to = run.follow.flushed().max(st.from);
        st.live.catch_up(&mut run.follow, false);
        st.absorb(false);
        st.split_waits();
        st.interval += 1;
        let span = Span {
            number: st.interval,
            start_ns: st.from.saturating_sub(start_ns),
            len_ns: to - st.from,
        };
        st.from = to;
        for p in run.follow.take_problems() {
            let line = format!("{p}");
            if text {
                eprintln!("ioblame: warning: {line}");
            } else {
                notes.push(line);
            }
        }
        show(out, a, &mut ui, &mut st, &symbols, span, &notes)?;
        st.model.next_interval();
        if a.iterations.is_some_and(|n| st.interval >= n) {
            break;
        }
        if step.ended || run.source.recorder_exited() {
            break;
        }
    }
    // Dropped: the terminal is given back.
    drop(ui.take());
    // The end: the recorder stops and flushes, and everything left is read.
    let status = run.source.stop_recorder(stop);
    run.follow.read()?;
    st.live.catch_up(&mut run.follow, true);
    st.absorb(true);
    let mut tail = Vec::new();
    let (from, number) = (st.from, st.interval + 1);
    let State {
        live,
        mut model,
        mut names,
        mut blame,
        ..
    } = st;
    let analysis = live.finish(&mut run.follow, |io, _| tail.push(io.clone()));
    for io in &tail {
        blame.push(io);
        model.add_io(io, &analysis.tables);
    }
    for w in blame.interval() {
        model.add_wait(w, &analysis.tables);
    }
    // The last interval runs to the last event.
    let to = run.follow.last_time().max(from);
    let last = Span {
        number,
        start_ns: from.saturating_sub(start_ns),
        len_ns: to.saturating_sub(from),
    };
    if text {
        if !model.interval.all.is_empty() {
            emit(out, a, &model, &analysis.tables, &mut names, &symbols, last)?;
        }
        let whole = Span {
            number: 0,
            start_ns: 0,
            len_ns: to.saturating_sub(start_ns),
        };
        let mut ctx = rows::Ctx {
            model: &model,
            tables: &analysis.tables,
            names: &mut names,
            symbols: &symbols,
            notes: &[],
        };
        if a.json {
            batch::totals_json(out, &mut ctx, whole)?;
        } else {
            batch::totals_text(out, a, &mut ctx, whole)?;
        }
        out.flush()?;
    }
    for d in &analysis.diagnostics {
        eprintln!("ioblame: {d}");
    }
    if !text {
        for n in &notes {
            eprintln!("ioblame: note: {n}");
        }
    }
    if let Some(dir) = run.source.kept() {
        eprintln!(
            "ioblame: the recording is kept in {} (`ioblame acts {}` shows the same totals)",
            dir.display(),
            dir.display()
        );
    }
    Ok(match status {
        Some(msg) => {
            eprintln!("ioblame: error: {msg}");
            std::process::ExitCode::from(2)
        }
        None => std::process::ExitCode::SUCCESS,
    })
}

/// Shows an interval: drawn on the terminal, or printed.
fn show(
    out: &mut impl Write,
    a: &TopArgs,
    ui: &mut Option<view::Terminal>,
    st: &mut State<'_>,
    symbols: &ioblame_decode::Symbolizer,
    span: Span,
    notes: &[String],
) -> Result<()> {
    match ui {
        Some(t) => {
            t.interval_done(span);
            let ctx = rows::Ctx {
                model: &st.model,
                tables: st.live.tables(),
                names: &mut st.names,
                symbols,
                notes,
            };
            t.draw(ctx)
        }
        None => emit(
            out,
            a,
            &st.model,
            st.live.tables(),
            &mut st.names,
            symbols,
            span,
        ),
    }
}

/// Prints an interval as text or JSON.
fn emit(
    out: &mut impl Write,
    a: &TopArgs,
    model: &Model,
    tables: &Tables,
    names: &mut names::Names,
    symbols: &ioblame_decode::Symbolizer,
    span: Span,
) -> Result<()> {
    let mut ctx = rows::Ctx {
        model,
        tables,
        names,
        symbols,
        notes: &[],
    };
    if a.json {
        batch::interval_json(out, &mut ctx, span)?;
    } else {
        batch::interval_text(out, a, &mut ctx, span)?;
    }
    out.flush().context("writing the output")
}

/// The acts of `model`'s sums, most bytes first, then by id.
fn acts_in_order(sums: &model::Sums) -> Vec<ActId> {
    let mut ids: Vec<(ActId, u64)> = sums
        .acts
        .iter()
        .map(|(id, s)| (*id, s.totals.total_bytes()))
        .collect();
    ids.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    ids.into_iter().map(|(id, _)| id).collect()
}

mod batch;
