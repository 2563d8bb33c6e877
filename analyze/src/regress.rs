//! `ioblame baseline` and `ioblame check`: the attribution reduced to per-act inputs of the
//! regression check.

use std::path::Path;

use anyhow::{Context as _, Result};
use ioblame_attrib::{Dir, Tables, WbReason};
use ioblame_baseline::{ActInput, Baseline, BuildOptions, CheckReport};
use ioblame_counters::{CounterSet, DevSelection, IoContext};
use ioblame_decode::{Rwbs, Symbolizer};
use ioblame_format::Trace;

use crate::pipeline;

/// What the check needs from one analysis run.
struct Collected {
    tables: Tables,
    set: CounterSet,
    /// Bytes of synchronous (`S`) write requests per act.
    sync_write: Vec<u64>,
    sym: Symbolizer,
}

fn collect(
    trace: Trace,
    mut set: CounterSet,
    devs: &DevSelection,
    show_recorder: bool,
) -> Result<Collected> {
    let sym = pipeline::symbols_of(&trace);
    let mut sync_write: Vec<u64> = Vec::new();
    let a = pipeline::analyze(trace, &sym, devs, |io, tables| {
        if tables.acts[io.act as usize].recorder && !show_recorder {
            return;
        }
        set.record(io, &IoContext::for_io(tables, io));
        if io.dir == Dir::W && io.rwbs.0 & Rwbs::SYNC != 0 {
            let i = io.act as usize;
            if sync_write.len() <= i {
                sync_write.resize(i + 1, 0);
            }
            sync_write[i] += io.size;
        }
    })?;
    sync_write.resize(a.tables.acts.len(), 0);
    Ok(Collected {
        tables: a.tables,
        set,
        sync_write,
        sym,
    })
}

/// One [`ActInput`] per act that did IO (the recorder's own acts left out unless asked).
fn act_inputs(c: &Collected, show_recorder: bool) -> Vec<ActInput<'_>> {
    let t = &c.tables;
    t.acts_with_totals()
        .filter(|(_, act, tot)| (show_recorder || !act.recorder) && tot.ios.iter().any(|&n| n > 0))
        .map(|(id, act, tot)| {
            let intent = &t.intents[act.intent as usize];
            let reason = (intent.modifier & 0x1000_0000 != 0)
                .then_some(WbReason(intent.modifier & 0x0fff_ffff));
            ActInput {
                role: &t.roles[act.role as usize],
                intent,
                frames: intent
                    .stack
                    .iter()
                    .map(|&a| c.sym.format_frame(a))
                    .collect(),
                file_path: None,
                via: act.via,
                reason,
                recorder: act.recorder,
                totals: *tot,
                sync_write_bytes: c.sync_write[id as usize],
                histograms: c.set.act_histograms(id).to_vec(),
            }
        })
        .collect()
}

fn spec_texts(set: &CounterSet) -> Vec<String> {
    set.specs().iter().map(|s| s.to_string()).collect()
}

/// `ioblame baseline`: writes the baseline of `trace` to `output`.
pub fn baseline(
    trace: Trace,
    set: CounterSet,
    devs: &DevSelection,
    show_recorder: bool,
    output: &Path,
) -> Result<()> {
    let c = collect(trace, set, devs, show_recorder)?;
    let inputs = act_inputs(&c, show_recorder);
    let base = Baseline::build(&inputs, &spec_texts(&c.set), &BuildOptions::default())?;
    std::fs::write(output, base.to_toml())
        .with_context(|| format!("cannot write {}", output.display()))?;
    eprintln!(
        "ioblame: wrote {} ({} groups, {} counters)",
        output.display(),
        base.groups.len(),
        base.counters.len()
    );
    Ok(())
}

/// `ioblame check`: compares `trace` with `base`.
pub fn check(
    trace: Trace,
    set: CounterSet,
    devs: &DevSelection,
    show_recorder: bool,
    base: &Baseline,
) -> Result<CheckReport> {
    let c = collect(trace, set, devs, show_recorder)?;
    let inputs = act_inputs(&c, show_recorder);
    Ok(ioblame_baseline::check(base, &inputs, &spec_texts(&c.set))?)
}
