//! `ioblame latency`: btt's latency breakdown ([`ioblame_latency`]) per device, overall, per
//! issuing process and, where the trace knows dirtiers, per act; and the same section of
//! `ioblame report`.

use std::cell::RefCell;
use std::io::Write;

use anyhow::Result;
use clap::Args;
use ioblame_attrib::{FileKey, Io, Tables};
use ioblame_counters::output::printable;
use ioblame_counters::DevSelection;
use ioblame_format::Trace;
use ioblame_latency::output::{self, ActLabel, Labels};
use ioblame_latency::{Engine, Latency};
use ioblame_report::LatencySection;

use crate::diagnostics;
use crate::session::{DevArgs, Ready, Session, TraceArgs};

#[derive(Args, Debug)]
pub struct LatencyArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// One JSON object per line and group (keys documented in docs/latency.md).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    devs: DevArgs,
}

/// Events whose presence says the trace knows who dirtied the pages it writes (the
/// attribution then runs, for the per-act figures).
const DIRTIER_EVENTS: [&str; 3] = [
    "writeback:writeback_dirty_folio",
    "writeback:writeback_dirty_page",
    "block:block_dirty_buffer",
];

/// Whether the trace recorded any dirtier event.
fn knows_dirtiers(trace: &Trace) -> bool {
    trace
        .metadata()
        .events
        .iter()
        .any(|e| DIRTIER_EVENTS.contains(&e.name.as_str()))
}

/// An engine for the devices `sel` selects, knowing the trace's task names at start.
pub fn engine(trace: &Trace, sel: &DevSelection) -> Engine {
    let mut engine = {
        let sel = sel.clone();
        Engine::new(move |d| sel.enabled(d))
    };
    for t in &trace.metadata().tasks {
        // A blktrace task no notify named stays unnamed (btt's `pidNNNNNNNNN`).
        if t.comm != ioblame_pipeline::unnamed_task(t.pid) {
            engine.set_comm(t.tid, &t.comm);
        }
    }
    engine
}

/// Gives `engine` one charged IO: its act's Q2C and D2C (not for a lower layer's copy, the
/// act's IO again on a loop device's backing file: the per-device figures have it).
pub fn push_charged(engine: &mut Engine, io: &Io) {
    if io.lower {
        return;
    }
    engine.push_act_io(
        io.act.index(),
        io.queue_time,
        io.issue_time,
        io.complete_time,
    );
}

/// Each act's label (by act index) from the attribution's tables; `path_of` names files.
fn act_labels(
    tables: &Tables,
    names: &[String],
    path_of: &dyn Fn(&FileKey) -> Option<String>,
) -> Vec<Option<ActLabel>> {
    tables
        .acts
        .iter()
        .enumerate()
        .map(|(i, act)| {
            let role = &tables.roles[act.role.index()];
            let file = match (act.file.ino != 0).then(|| path_of(&act.file)).flatten() {
                Some(p) => printable(&p).into_owned(),
                None => format!("{}/{}", output::dev_str(act.file.dev), act.file.ino),
            };
            Some(ActLabel {
                act: i as u32,
                role: printable(&role.comm).into_owned(),
                pid: role.pid,
                intent: u32::from(act.intent),
                via: act.via.name().to_owned(),
                file,
                intent_name: names
                    .get(act.intent.index())
                    .map(|n| printable(n).into_owned())
                    .unwrap_or_default(),
            })
        })
        .collect()
}

/// Calls `f` with the row labels: `trace`'s device names and, with `tables`, its acts (their
/// files named by `path_of`, their intents by `names`, by intent id); process names escaped.
pub fn with_labels<T>(
    trace: &Trace,
    tables: Option<(&Tables, &[String])>,
    path_of: &dyn Fn(&FileKey) -> Option<String>,
    f: impl FnOnce(&Labels<'_>) -> T,
) -> T {
    let devs = crate::text::dev_names(trace);
    let acts = tables.map_or_else(Vec::new, |(t, names)| act_labels(t, names, path_of));
    let dev_name = |d: u32| devs.iter().find(|(x, _)| *x == d).map(|(_, n)| n.clone());
    let act = |i: usize| acts.get(i).cloned().flatten();
    f(&Labels {
        dev_name: &dev_name,
        act: &act,
        process: &|p| printable(p).into_owned(),
    })
}

/// Renders `lat` as text or JSON lines.
fn render(
    out: &mut impl Write,
    lat: &Latency,
    labels: &Labels<'_>,
    json: bool,
) -> std::io::Result<()> {
    if json {
        output::json_lines(out, lat, labels)
    } else {
        output::text(out, lat, labels)
    }
}

/// The report's latency section, from the engine that saw the report's analysis; `path_of`
/// names the acts' files (the report's own table of them).
pub fn section(
    trace: &Trace,
    engine: Engine,
    tables: &Tables,
    names: &[String],
    path_of: &dyn Fn(&FileKey) -> Option<String>,
) -> Result<LatencySection> {
    let latency = engine.finish();
    let mut text = Vec::new();
    with_labels(trace, Some((tables, names)), path_of, |labels| {
        render(&mut text, &latency, labels, false)
    })?;
    Ok(LatencySection {
        latency,
        text: String::from_utf8_lossy(&text).into_owned(),
        dev_names: crate::text::dev_names(trace),
    })
}

/// `ioblame latency`: computes the breakdown of the trace on the devices selected and
/// prints it.
pub fn run(out: &mut impl Write, a: LatencyArgs, session: &Session) -> Result<()> {
    let mut o = session.open_selected(&a.trace, &a.devs)?;
    if !o.devs_given {
        // Every level of stacked devices by default, as btt.
        o.devs = DevSelection::all();
    }
    // The scope selects the acts of the per-act rows; the device and process rows are btt's,
    // over all the IO of the selected devices.
    let scope = session.scope(&o.trace, false)?;
    let mut engine = engine(&o.trace, &o.devs);
    if knows_dirtiers(&o.trace) {
        let r = o.ready(scope);
        by_act(out, &r, engine, a.json)?;
    } else {
        diagnostics::events(&o.trace, |ev| engine.push(ev));
        let lat = engine.finish();
        with_labels(&o.trace, None, &|_| None, |labels| {
            render(out, &lat, labels, a.json)
        })?;
    }
    Ok(())
}

/// The breakdown with the per-act rows: `engine` fed the analysis' events and charged IOs.
fn by_act(out: &mut impl Write, r: &Ready<'_>, engine: Engine, json: bool) -> Result<()> {
    let (trace, show_recorder) = (&r.trace, r.show_recorder);
    let engine = RefCell::new(engine);
    let a = r.analyze_observed(
        |ev| engine.borrow_mut().push(ev),
        |io, tables| {
            if show_recorder || !tables.acts[io.act.index()].recorder {
                push_charged(&mut engine.borrow_mut(), io);
            }
        },
    );
    let lat = engine.into_inner().finish();
    let files = ioblame_pipeline::charged_file_paths(trace, &a.tables);
    let names = ioblame_attrib::intent_names(&a.tables, &r.symbols);
    with_labels(
        trace,
        Some((&a.tables, &names)),
        &|f| files.get(f).cloned(),
        |labels| render(out, &lat, labels, json),
    )?;
    Ok(())
}
