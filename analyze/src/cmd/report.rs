//! `ioblame report`: one analysis feeding the Parquet tables, charts, flame graphs and page.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::Args;
use ioblame_counters::IoContext;
use ioblame_pipeline::Input;
use ioblame_report::{ReportInput, ReportWriter};

use super::{
    at_least_one, blame, counter_set, latency, resolve_filter_devices, timeline, CounterArgs,
};
use crate::diagnostics;
use crate::session::{DevArgs, Session, TraceArgs};

#[derive(Args, Debug)]
pub struct ReportArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Output directory (created; files in it are replaced).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "OUTDIR",
        default_value = "ioblame-report",
        value_hint = clap::ValueHint::DirPath
    )]
    outdir: PathBuf,
    #[command(flatten)]
    counters: CounterArgs,
    #[command(flatten)]
    devs: DevArgs,
    /// Acts in each top list of the terminal summary (at least 1; the page's lists of
    /// writers and readers show at least 8).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = at_least_one())]
    top: usize,
}

/// `ioblame report`: analyses the trace once, writes the report into its output directory
/// and prints the terminal summary (`--top` acts in each of its lists).
pub fn run(out: &mut impl Write, a: ReportArgs, session: &Session) -> Result<()> {
    let mut set = counter_set(&a.counters)?;
    let o = session.open_selected(&a.trace, &a.devs)?;
    resolve_filter_devices(&mut set, &o.trace)?;
    let scope = session.scope(&o.trace, false)?;
    let (paths, outdir, top) = (&a.trace.trace, &a.outdir, a.top);
    let cgroups = ioblame_attrib::CgroupNames::of(&o.trace);
    let input = ReportInput {
        header: Some(o.trace.header().clone()),
        block_devices: o.trace.metadata().block_devices.clone(),
        traces: paths.iter().map(|p| p.display().to_string()).collect(),
        cgroups: cgroups.clone(),
        top_summary: top,
        // Styled always: the output stream strips the styles where colour is off.
        color: true,
        ..ReportInput::default()
    };
    let mut writer = ReportWriter::create(outdir, input)
        .with_context(|| format!("cannot write the report into {}", outdir.display()))?;
    let block_devices = o.trace.metadata().block_devices.clone();
    let r = o.ready(scope);
    let (trace, sym, devs, show_recorder) = (&r.trace, &r.symbols, &r.devs, r.show_recorder);
    let mut failed = None;
    let mut devs_with_io = std::collections::BTreeSet::new();
    // btt's latency breakdown of the same events, for the page's latency section.
    let latency = std::cell::RefCell::new(latency::engine(trace, devs));
    // Who made the IO slow, from the same events and IOs, for the page's blame section.
    let blamer = std::cell::RefCell::new(blame::Blamer::new(
        trace,
        devs,
        show_recorder,
        &r.scope,
        (0, u64::MAX),
    ));
    // The timeline beside the page, from the same events, IOs and dirtying.
    let feed = timeline::feed(&r);
    let on_event = |ev: &ioblame_decode::Event| {
        latency.borrow_mut().push(ev);
        blamer.borrow_mut().event(ev);
        feed.event(ev);
    };
    let outside = |io: &ioblame_attrib::Io, tables: &ioblame_attrib::Tables| {
        blamer.borrow_mut().culprit(io, tables);
        feed.outside(io);
    };
    let a = r.analyze_logged(
        on_event,
        |io, tables| {
            devs_with_io.insert(io.dev);
            feed.io(io, tables);
            // Every IO held the device, the recorder's too.
            blamer.borrow_mut().io(io, tables);
            // The pipeline's totals leave the recorder out the same way (and say so on stderr);
            // the report keeps its own per-act totals of the IOs pushed either way.
            if tables.acts[io.act.index()].recorder && !show_recorder {
                return;
            }
            latency::push_charged(&mut latency.borrow_mut(), io);
            set.record(io, &IoContext::for_io(tables, io));
            if failed.is_none() {
                if let Err(e) = writer.push_io(io, tables) {
                    failed = Some(e);
                }
            }
        },
        outside,
        Some(|d: &ioblame_attrib::Dirtied, t: &ioblame_attrib::Tables| {
            timeline::dirtied(&r, &feed, d, t)
        }),
    );
    if let Some(e) = failed {
        return Err(e).context("writing ios.parquet");
    }
    for w in devs.warnings(&block_devices, |d| devs_with_io.contains(&d)) {
        eprintln!("ioblame: warning: {w}");
    }
    let mut notes: Vec<String> = a.diagnostics.iter().map(|d| d.to_string()).collect();
    if let Some(d) = ioblame_pipeline::cgroups_flat(trace) {
        diagnostics::say(&d);
        notes.push(d.to_string());
    }
    let charged = ioblame_pipeline::charged_paths(trace, &a.tables);
    if let Some(d) = ioblame_pipeline::unnamed_files(trace, &a.tables, &charged, show_recorder) {
        diagnostics::say(&d);
        notes.push(d.to_string());
    }
    writer.set_notes(notes);
    let files = ioblame_pipeline::file_paths(&a.tables, &charged);
    let intents = ioblame_attrib::intent_names(&a.tables, sym);
    writer.set_latency(latency::section(
        trace,
        latency.into_inner(),
        &a.tables,
        &intents,
        &|f| files.get(f).cloned(),
    )?);
    let names = blame::Names::new(trace, &a.tables, &intents, &charged, cgroups.as_ref());
    writer.set_blame(blame_section(trace, blamer.into_inner().finish(), &names)?);
    writer.set_paths(files);
    let file = "timeline.perfetto-trace";
    let t = timeline::write_collected(
        &r,
        feed.finish(),
        &a.tables,
        &ioblame_timeline::Options::default(),
        &writer.dir().join(file),
    )?;
    timeline::say_left_out(&t);
    writer.set_timeline(ioblame_report::TimelineLink {
        file: file.into(),
        slices: t.slices,
        flows: t.flows,
    });
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
    let report = writer.finish(&a.tables, &set, &a.summary, sym);
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
    names: &blame::Names<'_>,
) -> Result<ioblame_report::BlameSection> {
    let opts = blame::Options {
        by: blame::By::Act,
        victim: None,
        tail: None,
        from: None,
        to: None,
        top: 5,
        json: false,
        ios: false,
    };
    let mut text = Vec::new();
    blame::render(&mut text, &blame, names, &opts, trace.blktrace().is_some())?;
    Ok(blame::section(
        &blame,
        names,
        String::from_utf8_lossy(&text).into_owned(),
        Vec::new(),
    ))
}
