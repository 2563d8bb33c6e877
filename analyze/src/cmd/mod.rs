//! One module per subcommand, each holding its clap arguments (`...Args`) and its `run`;
//! `main.rs` keeps the command line's top level and the dispatch. What several subcommands
//! share is here: the counter flags and their parsing, and `--top N`'s parser.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::Args;
use ioblame_counters::CounterSet;

pub mod acts;
pub mod baseline;
pub mod blame;
pub mod check;
pub mod counters;
pub mod export;
pub mod fleet;
pub mod info;
pub mod intents;
pub mod iolog;
pub mod latency;
pub mod perf_command;
mod regress;
pub mod report;
pub mod timeline;
pub mod top;

/// Counter configuration, as ioblame's `counters/NR` and `NR_filter` files.
#[derive(Args, Debug, Clone, Default)]
pub struct CounterArgs {
    /// A counter: 'DIR FIELD B0 .. B8 [if FILTER]', e.g. 'RA offset 0 8192 16384 24576
    /// 32768 40960 49152 57344 0 if size >= 4096'. Repeatable.
    #[arg(long = "counter", value_name = "SPEC")]
    pub counter: Vec<String>,
    /// A file of counters, one per line, `#` comments.
    #[arg(long = "counters", value_name = "FILE")]
    pub counters_file: Option<PathBuf>,
}

/// Parses counters before any trace is read (a bad spec fails fast).
fn counter_set(c: &CounterArgs) -> Result<CounterSet> {
    Ok(match &c.counters_file {
        Some(f) => {
            let set = CounterSet::parse_file(f)?;
            if !c.counter.is_empty() {
                anyhow::bail!(
                    "give counters either with --counter or with --counters FILE, not both"
                );
            }
            set
        }
        None => CounterSet::parse_args(&c.counter)?,
    })
}

/// Resolves device names in the counters' filters (`dev == sda`) against the trace's own
/// device table, as `--devs` is.
fn resolve_filter_devices(set: &mut CounterSet, trace: &ioblame_format::Trace) -> Result<()> {
    set.resolve_devices(&trace.metadata().block_devices)
        .context("the counters' filters")?;
    let cgroups = trace.cgroups();
    let by_id: Vec<(u64, &str)> = cgroups.iter().map(|c| (c.id, c.path.as_str())).collect();
    set.resolve_cgroups(&by_id).context("the counters' filters")
}

/// `--top N`: a count of at least 1 (`--top 0` would print lists with nothing in them).
fn at_least_one() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
}
