//! `ioblame acts`: one row per act (role + intent + file) with bytes and IOs per direction,
//! as a table or JSON lines, or summed by cgroup (`--by cgroup`, [`cgroups`]).

mod cgroups;

use std::io::Write;

use anyhow::Result;
use clap::Args;

use super::at_least_one;
use crate::diagnostics;
use crate::session::{DevArgs, Session, TraceArgs};
use crate::text::{self, SymFrames};

#[derive(Args, Debug)]
pub struct ActsArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// One JSON object per line (keys documented in docs/outputs.md).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    devs: DevArgs,
    /// Sum the acts by a key instead: `cgroup` (of the task charged).
    #[arg(long, value_name = "KEY", value_parser = ["cgroup"])]
    by: Option<String>,
    /// Only the N acts with the most bytes (N at least 1).
    #[arg(long, value_name = "N", value_parser = at_least_one())]
    top: Option<usize>,
}

/// `ioblame acts`.
pub fn run(out: &mut impl Write, a: ActsArgs, session: &Session) -> Result<()> {
    let r = session.ready(&a.trace, &a.devs)?;
    let (t, sym, show_recorder) = (&r.trace, &r.symbols, r.show_recorder);
    let an = r.analyze(|_, _| {});
    let frames = SymFrames(sym);
    let intent_names = ioblame_attrib::intent_names(&an.tables, sym);
    let cgroup_names = ioblame_attrib::CgroupNames::of(t);
    let paths = diagnostics::charged_paths(t, &an.tables, show_recorder);
    let (tables, paths) = (&an.tables, &paths);
    if a.by.is_some() {
        if let Some(d) = ioblame_pipeline::cgroups_flat(t) {
            diagnostics::say(&d);
        }
        cgroups::by_cgroup(out, tables, cgroup_names.as_ref(), show_recorder, a.json)?;
    } else if a.json {
        let mut ids = text::sorted_acts(tables, show_recorder);
        ids.truncate(a.top.unwrap_or(usize::MAX));
        text::acts_json(
            out,
            tables,
            &frames,
            &intent_names,
            paths,
            cgroup_names.as_ref(),
            &ids,
        )?;
    } else {
        text::acts_table(
            out,
            tables,
            &intent_names,
            paths,
            show_recorder,
            a.top,
            true,
        )?;
    }
    Ok(())
}
