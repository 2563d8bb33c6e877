//! `ioblame baseline`: a CI baseline (TOML, human-editable) of what the trace shows, from the
//! analysis `ioblame check` compares ([`super::regress`]).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use super::regress::{self, BaselineMode};
use super::{counter_set, resolve_filter_devices, CounterArgs};
use crate::session::{DevArgs, Session, TraceArgs};

#[derive(Args, Debug)]
pub struct BaselineArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// The baseline file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    #[command(flatten)]
    counters: CounterArgs,
    #[command(flatten)]
    devs: DevArgs,
    /// For a deterministic input (a committed trace checked by a changed analyzer): no
    /// significance floor, zero tolerances, every histogram compared, unattributed IO
    /// strict. Not for real captures, which jitter.
    #[arg(long)]
    exact: bool,
    /// Judge unattributed IO strictly (`unattributed = "strict"`): it explains no other
    /// change, so a writer whose bytes went unattributed has vanished.
    #[arg(long)]
    strict: bool,
    /// Write the baseline even when the trace has no kernel symbols (every intent `?`).
    #[arg(long)]
    allow_unsymbolized: bool,
}

/// `ioblame baseline`.
pub fn run(a: BaselineArgs, session: &Session) -> Result<()> {
    let mut set = counter_set(&a.counters)?;
    let o = session.open_selected(&a.trace, &a.devs)?;
    resolve_filter_devices(&mut set, &o.trace)?;
    let mode = BaselineMode {
        exact: a.exact,
        strict: a.strict,
        allow_unsymbolized: a.allow_unsymbolized,
    };
    regress::baseline(o, set, &a.output, mode, session.scope_given())
}
