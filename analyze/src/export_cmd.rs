//! `ioblame export`: each trace analysed once and its tables written into the fleet dataset
//! (`ioblame_dataset`, `docs/dataset.md`), several traces at once.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{Context as _, Result};
use ioblame_counters::{CounterSet, DevSelection, IoContext};
use ioblame_dataset::{TraceInfo, TraceKeys, TraceWriter};
use ioblame_pipeline::Options;

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
pub fn run(
    out: &mut impl std::io::Write,
    traces: &[PathBuf],
    opts: &ExportOptions,
    kallsyms: Option<&Path>,
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
                let r = export_one(path, opts, kallsyms);
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
fn export_one(path: &Path, opts: &ExportOptions, kallsyms: Option<&Path>) -> Result<String> {
    let name = path.display().to_string();
    let say = |d: &ioblame_pipeline::Diagnostic| eprintln!("ioblame: {name}: {d}");
    let mut notes = Vec::new();
    let trace = ioblame_pipeline::open_trace(&[path.to_path_buf()], kallsyms, &mut notes);
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
    };
    let mut failed = None;
    // btt's latency breakdown of the same pass (per device, process and act).
    let engine = RefCell::new(crate::latency_cmd::engine(&trace, &devs));
    // Who made the IO slow, of the same pass (the report's `blame` table).
    let blamer = RefCell::new(crate::blame_cmd::Blamer::new(
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
            crate::latency_cmd::push_charged(&mut engine.borrow_mut(), io);
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
    crate::pipeline::name_user_frames(trace.trace(), &mut a.tables);
    // Paths of the acts' files only (as `report` names them), looked up once.
    let charged = ioblame_pipeline::charged_paths(&trace, &a.tables);
    let files = ioblame_pipeline::file_paths(&a.tables, &charged);
    let latency = engine.into_inner().finish();
    let names = ioblame_attrib::intent_names(&a.tables, &sym);
    let frame = crate::latency_cmd::with_labels(
        &trace,
        Some((&a.tables, &names)),
        &|f| files.get(f).cloned(),
        |labels| ioblame_dataset::latency::latency_frame(&latency, labels),
    )
    .context("building the latency table")?;
    writer.add_table("latency", frame)?;
    let cgroups = ioblame_attrib::CgroupNames::of(&trace);
    let blame = blamer.into_inner().finish();
    let blame_names =
        crate::blame_cmd::Names::new(&trace, &a.tables, &names, &charged, cgroups.as_ref());
    let rows = crate::blame_cmd::section(&blame, &blame_names, String::new(), Vec::new()).rows;
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
