//! `ioblame export`: each trace analysed once and its tables written into the fleet dataset
//! (`ioblame_dataset`, `docs/dataset.md`), several traces at once.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{Context as _, Result};
use clap::Args;
use ioblame_counters::{CounterSet, DevSelection, IoContext};
use ioblame_dataset::{TraceInfo, TraceKeys, TraceWriter};
use ioblame_pipeline::Options;

use super::{blame, latency};
use crate::session::Session;

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Traces to export, each an ioblame trace directory, a ring file or a perf.data file.
    #[arg(value_name = "TRACE", required = true, num_args = 1..)]
    trace: Vec<PathBuf>,
    /// The dataset's root directory (created).
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    dataset: PathBuf,
    /// Host name of the traces (default: the host recorded in each trace).
    #[arg(long, value_name = "NAME")]
    host: Option<String>,
    /// A label KEY=VALUE carried by every row of these traces. Repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    /// Traces analysed at once (default: the number of CPUs).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
}

/// `ioblame export`: exit 1 when some traces failed. It flushes its output itself.
pub fn run(out: &mut impl std::io::Write, a: ExportArgs, session: &Session) -> Result<ExitCode> {
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let opts = ExportOptions {
        dataset: a.dataset,
        host: a.host,
        labels: a.labels,
        jobs,
    };
    let code = export(out, &a.trace, &opts, session)?;
    out.flush().context("writing the output")?;
    Ok(code)
}

/// What `ioblame export` was asked.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The dataset's root directory.
    pub dataset: PathBuf,
    /// The host name of every trace (default: each trace's recorded host).
    pub host: Option<String>,
    /// Labels `KEY=VALUE` of every trace.
    pub labels: Vec<String>,
    /// Traces analysed at once.
    pub jobs: usize,
}

/// Exports each trace; a trace that fails is reported on one line and the others go on.
/// Exit status 1 when some failed.
fn export(
    out: &mut impl std::io::Write,
    traces: &[PathBuf],
    opts: &ExportOptions,
    session: &Session,
) -> Result<ExitCode> {
    // Usage errors fail before any trace is read.
    if let Some(h) = &opts.host {
        ioblame_dataset::schema::check_host(h)?;
    }
    for l in &opts.labels {
        ioblame_dataset::schema::check_label(l)?;
    }
    ioblame_dataset::schema::prepare(&opts.dataset)
        .with_context(|| format!("dataset {}", opts.dataset.display()))?;
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, Result<String>)>> = Mutex::new(Vec::new());
    let jobs = opts.jobs.clamp(1, traces.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = traces.get(i) else { break };
                let r = export_one(path, opts, session);
                if let Ok(mut d) = done.lock() {
                    d.push((i, r));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_default();
    done.sort_by_key(|(i, _)| *i);
    let mut failed = 0;
    for (i, r) in done {
        match r {
            Ok(line) => writeln!(out, "{line}")?,
            Err(e) => {
                failed += 1;
                eprintln!("ioblame: error: {}: {e:#}", traces[i].display());
            }
        }
    }
    if failed > 0 {
        eprintln!("ioblame: {failed} of {} traces not exported", traces.len());
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Analyses one trace into the dataset; returns the line to print.
fn export_one(path: &Path, opts: &ExportOptions, session: &Session) -> Result<String> {
    let name = path.display().to_string();
    let say = |d: &ioblame_pipeline::Diagnostic| eprintln!("ioblame: {name}: {d}");
    let mut notes = Vec::new();
    let trace =
        ioblame_pipeline::open_trace_with(&[path.to_path_buf()], &session.side_files(), &mut notes);
    notes.iter().for_each(say);
    let trace = trace?;
    let h = trace.header().clone();
    let host = match &opts.host {
        Some(h) => h.clone(),
        None => ioblame_dataset::schema::sanitize_host(&h.hostname),
    };
    let mut labels = opts.labels.clone();
    labels.sort();
    labels.dedup();
    let keys = TraceKeys {
        host,
        trace_id: format!("{:016x}", h.trace_id),
        capture_start_ns: h.start_time_ns.min(i64::MAX as u64) as i64,
        kernel_release: h.kernel_release.clone(),
        labels,
    };
    let mut writer = TraceWriter::create(&opts.dataset, keys.clone())?;
    let (sym, note) = ioblame_pipeline::symbols_of(&trace);
    note.iter().for_each(say);
    let mut set = CounterSet::default_set();
    let devs = DevSelection::all();
    // The dataset holds all of a trace's IO (its rows carry roles and cgroups to select by):
    // `--scope` does not apply to `export`.
    let all = ioblame_pipeline::ResolvedScope::all();
    let aopts = Options {
        symbols: &sym,
        devs: &devs,
        show_recorder: false,
        scope: &all,
        user_symbols: session.user_symbols(),
    };
    let mut failed = None;
    // btt's latency breakdown of the same pass (per device, process and act).
    let engine = RefCell::new(latency::engine(&trace, &devs));
    // Who made the IO slow, of the same pass (the report's `blame` table).
    let blamer = RefCell::new(blame::Blamer::new(
        &trace,
        &devs,
        false,
        &all,
        (0, u64::MAX),
    ));
    let mut a = ioblame_pipeline::analyze_observed(
        &trace,
        &aopts,
        |ev| {
            engine.borrow_mut().push(ev);
            blamer.borrow_mut().event(ev);
        },
        |io, tables| {
            blamer.borrow_mut().io(io, tables);
            if tables.acts[io.act.index()].recorder {
                return;
            }
            latency::push_charged(&mut engine.borrow_mut(), io);
            set.record(io, &IoContext::for_io(tables, io));
            if failed.is_none() {
                if let Err(e) = writer.push_io(io, tables) {
                    failed = Some(e);
                }
            }
        },
        |_| {},
    );
    if let Some(e) = failed {
        return Err(e).context("writing ios");
    }
    a.diagnostics.iter().for_each(say);
    session.name_user_frames(trace.trace(), &mut a.tables);
    // Paths of the acts' files only (as `report` names them), looked up once.
    let charged = ioblame_pipeline::charged_paths(&trace, &a.tables);
    let files = ioblame_pipeline::file_paths(&a.tables, &charged);
    let latency = engine.into_inner().finish();
    let names = ioblame_attrib::intent_names(&a.tables, &sym);
    let frame = latency::with_labels(
        &trace,
        Some((&a.tables, &names)),
        &|f| files.get(f).cloned(),
        |labels| ioblame_dataset::latency::latency_frame(&latency, labels),
    )
    .context("building the latency table")?;
    writer.add_table("latency", frame)?;
    let cgroups = ioblame_attrib::CgroupNames::of(&trace);
    let blame = blamer.into_inner().finish();
    let blame_names = blame::Names::new(&trace, &a.tables, &names, &charged, cgroups.as_ref());
    let rows = blame::section(&blame, &blame_names, String::new(), Vec::new()).rows;
    let frame = ioblame_report::blame_frame(&rows).context("building the blame table")?;
    writer.add_table("blame", frame)?;
    let info = TraceInfo {
        source: name.clone(),
        recorded_host: h.hostname.clone(),
        machine: h.machine.clone(),
        recorder_version: h.recorder_version.clone(),
    };
    let done = writer.finish(&a.tables, &set, &sym, &files, cgroups.as_ref(), &info)?;
    Ok(format!(
        "{name}: host={} date={} trace {}: {} IO rows",
        keys.host,
        keys.date(),
        keys.trace_id,
        done.ios_rows
    ))
}
