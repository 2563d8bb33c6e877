//! `ioblame latency`: btt's latency breakdown ([`ioblame_latency`]) per device, overall, per
//! issuing process and, where the trace knows dirtiers, per act.

use std::cell::RefCell;
use std::io::Write;

use anyhow::Result;
use ioblame_counters::output::printable;
use ioblame_counters::DevSelection;
use ioblame_format::Trace;
use ioblame_latency::output::{self, ActLabel, Labels};
use ioblame_latency::{Engine, Latency};
use ioblame_pipeline::Input;

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

/// Computes the breakdown of `trace` on the devices `sel` selects and prints it.
pub fn run(
    out: &mut impl Write,
    trace: &Input,
    sel: &DevSelection,
    show_recorder: bool,
    json: bool,
) -> Result<()> {
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
    let devices = &trace.metadata().block_devices;
    let dev_name = |d: u32| {
        devices
            .iter()
            .find(|b| (b.major << 20 | b.minor) == d)
            .map(|b| printable(&b.name).into_owned())
    };
    let (lat, labels): (Latency, Vec<Option<ActLabel>>) = if knows_dirtiers(trace) {
        let sym = pipeline::symbols_of(trace);
        let engine = RefCell::new(engine);
        let a = pipeline::analyze_observed(
            trace,
            &sym,
            sel,
            show_recorder,
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
        let paths = trace.paths();
        let labels = a
            .tables
            .acts
            .iter()
            .enumerate()
            .map(|(i, act)| {
                let role = &a.tables.roles[act.role.index()];
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
            .collect();
        (engine.into_inner().finish(), labels)
    } else {
        pipeline::events(trace, |ev| engine.push(ev));
        (engine.finish(), Vec::new())
    };
    let act_label = |i: usize| labels.get(i).cloned().flatten();
    let labels = Labels {
        dev_name: &dev_name,
        act: &act_label,
    };
    if json {
        output::json_lines(out, &lat, &labels)?;
    } else {
        output::text(out, &lat, &labels)?;
    }
    Ok(())
}
