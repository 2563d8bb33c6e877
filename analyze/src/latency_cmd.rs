//! `ioblame latency`: btt's latency breakdown ([`ioblame_latency`]) per device, overall, per
//! issuing process and, where the trace knows dirtiers, per act; and the same section of
//! `ioblame report`.

use std::cell::RefCell;
use std::io::Write;

use anyhow::Result;
use ioblame_attrib::Tables;
use ioblame_counters::output::printable;
use ioblame_counters::DevSelection;
use ioblame_format::Trace;
use ioblame_latency::output::{self, ActLabel, Labels};
use ioblame_latency::{Engine, Latency};
use ioblame_pipeline::{Input, ResolvedScope};
use ioblame_report::LatencySection;

use crate::pipeline;

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

/// The trace's device names.
fn dev_names(trace: &Trace) -> Vec<(u32, String)> {
    trace
        .metadata()
        .block_devices
        .iter()
        .map(|b| (b.major << 20 | b.minor, printable(&b.name).into_owned()))
        .collect()
}

/// Each act's label (by act index) from the attribution's tables.
fn act_labels(trace: &Trace, tables: &Tables) -> Vec<Option<ActLabel>> {
    let paths = trace.paths();
    tables
        .acts
        .iter()
        .enumerate()
        .map(|(i, act)| {
            let role = &tables.roles[act.role.index()];
            let file = match (act.file.ino != 0)
                .then(|| paths.get(act.file.dev, act.file.ino))
                .flatten()
            {
                Some(p) => printable(p).into_owned(),
                None => format!("{}/{}", output::dev_str(act.file.dev), act.file.ino),
            };
            Some(ActLabel {
                act: i as u32,
                role: printable(&role.comm).into_owned(),
                pid: role.pid,
                intent: u32::from(act.intent),
                via: act.via.name().to_owned(),
                file,
            })
        })
        .collect()
}

/// Renders `lat` as text or JSON lines.
fn render(
    out: &mut impl Write,
    lat: &Latency,
    devs: &[(u32, String)],
    acts: &[Option<ActLabel>],
    json: bool,
) -> std::io::Result<()> {
    let dev_name = |d: u32| devs.iter().find(|(x, _)| *x == d).map(|(_, n)| n.clone());
    let act = |i: usize| acts.get(i).cloned().flatten();
    let labels = Labels {
        dev_name: &dev_name,
        act: &act,
    };
    if json {
        output::json_lines(out, lat, &labels)
    } else {
        output::text(out, lat, &labels)
    }
}

/// The report's latency section, from the engine that saw the report's analysis.
pub fn section(trace: &Trace, engine: Engine, tables: &Tables) -> Result<LatencySection> {
    let latency = engine.finish();
    let dev_names = dev_names(trace);
    let mut text = Vec::new();
    render(
        &mut text,
        &latency,
        &dev_names,
        &act_labels(trace, tables),
        false,
    )?;
    Ok(LatencySection {
        latency,
        text: String::from_utf8_lossy(&text).into_owned(),
        dev_names,
    })
}

/// Computes the breakdown of `trace` on the devices `sel` selects and prints it.
pub fn run(
    out: &mut impl Write,
    trace: &Input,
    sel: &DevSelection,
    show_recorder: bool,
    scope: &ResolvedScope,
    json: bool,
) -> Result<()> {
    let mut engine = engine(trace, sel);
    let (lat, acts) = if knows_dirtiers(trace) {
        let sym = pipeline::symbols_of(trace);
        let engine = RefCell::new(engine);
        let a = pipeline::analyze_observed(
            trace,
            &sym,
            sel,
            show_recorder,
            scope,
            |ev| engine.borrow_mut().push(ev),
            |io, tables| {
                if show_recorder || !tables.acts[io.act.index()].recorder {
                    engine.borrow_mut().push_act_io(
                        io.act.index(),
                        io.queue_time,
                        io.issue_time,
                        io.complete_time,
                    );
                }
            },
        );
        (engine.into_inner().finish(), act_labels(trace, &a.tables))
    } else {
        pipeline::events(trace, |ev| engine.push(ev));
        (engine.finish(), Vec::new())
    };
    render(out, &lat, &dev_names(trace), &acts, json)?;
    Ok(())
}
