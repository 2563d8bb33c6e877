//! `ioblame report`: one analysis feeding the Parquet tables, charts, flame graphs and page.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use ioblame_counters::{CounterSet, IoContext};
use ioblame_pipeline::Input;
use ioblame_report::{ReportInput, ReportWriter};

use crate::pipeline;

/// Analyses `trace` once, writes the report into `outdir` and prints the terminal summary
/// (`top` acts in each of its lists).
#[allow(clippy::too_many_arguments)]
pub fn run(
    out: &mut impl Write,
    trace: Input,
    paths: &[PathBuf],
    outdir: &Path,
    mut set: CounterSet,
    sel: &pipeline::Selected<'_>,
    top: usize,
) -> Result<()> {
    let (devs, show_recorder) = (sel.devs, sel.show_recorder);
    crate::resolve_filter_devices(&mut set, &trace)?;
    let scope = pipeline::scope(&trace, sel.scope, false)?;
    let cgroups = ioblame_attrib::CgroupNames::of(&trace);
    let input = ReportInput {
        header: Some(trace.header().clone()),
        block_devices: trace.metadata().block_devices.clone(),
        traces: paths.iter().map(|p| p.display().to_string()).collect(),
        cgroups: cgroups.clone(),
        top_summary: top,
        // Styled always: the output stream strips the styles where colour is off.
        color: true,
        ..ReportInput::default()
    };
    let mut writer = ReportWriter::create(outdir, input)
        .with_context(|| format!("cannot write the report into {}", outdir.display()))?;
    let block_devices = trace.metadata().block_devices.clone();
    let sym = pipeline::symbols_of(&trace);
    let mut failed = None;
    let mut devs_with_io = std::collections::BTreeSet::new();
    // btt's latency breakdown of the same events, for the page's latency section.
    let latency = std::cell::RefCell::new(crate::latency_cmd::engine(&trace, devs));
    // Who made the IO slow, from the same events and IOs, for the page's blame section.
    let blamer = std::cell::RefCell::new(crate::blame_cmd::Blamer::new(
        devs,
        show_recorder,
        &scope,
        (0, u64::MAX),
    ));
    let on_event = |ev: &ioblame_decode::Event| {
        latency.borrow_mut().push(ev);
        blamer.borrow_mut().event(ev);
    };
    let outside = |io: &ioblame_attrib::Io, tables: &ioblame_attrib::Tables| {
        blamer.borrow_mut().culprit(io, tables)
    };
    let a = pipeline::analyze_observed_all(
        &trace,
        &sym,
        devs,
        show_recorder,
        &scope,
        on_event,
        |io, tables| {
            devs_with_io.insert(io.dev);
            // Every IO held the device, the recorder's too.
            blamer.borrow_mut().io(io, tables);
            // The pipeline's totals leave the recorder out the same way (and say so on stderr);
            // the report keeps its own per-act totals of the IOs pushed either way.
            if tables.acts[io.act.index()].recorder && !show_recorder {
                return;
            }
            crate::latency_cmd::push_charged(&mut latency.borrow_mut(), io);
            set.record(io, &IoContext::for_io(tables, io));
            if failed.is_none() {
                if let Err(e) = writer.push_io(io, tables) {
                    failed = Some(e);
                }
            }
        },
        outside,
    );
    if let Some(e) = failed {
        return Err(e).context("writing ios.parquet");
    }
    for w in devs.warnings(&block_devices, |d| devs_with_io.contains(&d)) {
        eprintln!("ioblame: warning: {w}");
    }
    let mut notes: Vec<String> = a.diagnostics.iter().map(|d| d.to_string()).collect();
    let charged = ioblame_pipeline::charged_paths(&trace, &a.tables);
    if let Some(d) = ioblame_pipeline::unnamed_files(&trace, &a.tables, &charged, show_recorder) {
        crate::pipeline::say(&d);
        notes.push(d.to_string());
    }
    writer.set_notes(notes);
    let files = ioblame_pipeline::file_paths(&a.tables, &charged);
    let intents = ioblame_attrib::intent_names(&a.tables, &sym);
    writer.set_latency(crate::latency_cmd::section(
        &trace,
        latency.into_inner(),
        &a.tables,
        &intents,
        &|f| files.get(f).cloned(),
    )?);
    let names =
        crate::blame_cmd::Names::new(&trace, &a.tables, &intents, &charged, cgroups.as_ref());
    writer.set_blame(blame_section(&trace, blamer.into_inner().finish(), &names)?);
    writer.set_paths(files);
    // Tables, charts and flame graphs take a while on a large trace: a spinner on stderr
    // (hidden when stderr is not a terminal).
    let spinner =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        spinner.set_style(style);
    }
    spinner.set_message(format!(
        "writing the tables, charts, flame graphs and page into {}",
        outdir.display()
    ));
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    let report = writer.finish(&a.tables, &set, &a.summary, &sym);
    spinner.finish_and_clear();
    let report = report.with_context(|| format!("writing the report into {}", outdir.display()))?;
    out.write_all(report.summary_text.as_bytes())?;
    writeln!(
        out,
        "\n{} IO rows; open {} in a browser",
        report.ios_rows,
        report.files.html.display()
    )?;
    Ok(())
}

/// The page's blame section: `ioblame blame`'s text and rows of the report's analysis.
fn blame_section(
    trace: &Input,
    blame: ioblame_latency::Blame,
    names: &crate::blame_cmd::Names<'_>,
) -> Result<ioblame_report::BlameSection> {
    let opts = crate::blame_cmd::Options {
        by: crate::blame_cmd::By::Act,
        victim: None,
        tail: None,
        from: None,
        to: None,
        top: 5,
        json: false,
        ios: false,
    };
    let mut text = Vec::new();
    crate::blame_cmd::render(&mut text, &blame, names, &opts, trace.blktrace().is_some())?;
    Ok(crate::blame_cmd::section(
        &blame,
        names,
        String::from_utf8_lossy(&text).into_owned(),
        Vec::new(),
    ))
}
