//! `ioblame counters`: ioblame's eight-slot histogram counters per act, as its pipe format,
//! a readable variant or JSON lines.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use ioblame_counters::IoContext;

use super::{counter_set, resolve_filter_devices, CounterArgs};
use crate::session::{DevArgs, Session, TraceArgs};

#[derive(Args, Debug)]
pub struct CountersArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    counters: CounterArgs,
    #[command(flatten)]
    devs: DevArgs,
    /// A readable variant with headers.
    #[arg(long, conflicts_with = "json")]
    pretty: bool,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

/// `ioblame counters`.
pub fn run(out: &mut impl Write, a: CountersArgs, session: &Session) -> Result<()> {
    let mut set = counter_set(&a.counters)?;
    let r = session.ready_checked(&a.trace, &a.devs, |t| resolve_filter_devices(&mut set, t))?;
    let block_devices = r.trace.metadata().block_devices.clone();
    let show_recorder = r.show_recorder;
    let mut devs_with_io = std::collections::BTreeSet::new();
    let an = r.analyze(|io, tables| {
        devs_with_io.insert(io.dev);
        let act = &tables.acts[io.act.index()];
        if act.recorder && !show_recorder {
            return;
        }
        set.record(io, &IoContext::for_io(tables, io));
    });
    for w in r
        .devs
        .warnings(&block_devices, |d| devs_with_io.contains(&d))
    {
        eprintln!("ioblame: warning: {w}");
    }
    let (acts, roles) = (&an.tables.acts, &an.tables.roles);
    if a.json {
        ioblame_counters::output::json(out, &set, acts, roles)?;
    } else if a.pretty {
        let names = ioblame_attrib::intent_names(&an.tables, &r.symbols);
        ioblame_counters::output::pretty_named(out, &set, acts, roles, &names)?;
    } else {
        ioblame_counters::output::counters_pipe(out, &set, acts, roles)?;
    }
    Ok(())
}
