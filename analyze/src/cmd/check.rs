//! `ioblame check`: a trace compared with a baseline written by `ioblame baseline`
//! ([`super::regress`]); the verdict is the exit status (0 within tolerance, 1 on a
//! regression, 2 on a usage or input error).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Args;
use ioblame_counters::CounterSet;

use super::{counter_set, regress, resolve_filter_devices, CounterArgs};
use crate::session::{DevArgs, Session, TraceArgs};

#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// The baseline written by `ioblame baseline`.
    #[arg(long, value_name = "FILE")]
    baseline: PathBuf,
    /// Counters to compare (default: the baseline's own counters).
    #[command(flatten)]
    counters: CounterArgs,
    #[command(flatten)]
    devs: DevArgs,
    /// One JSON document instead of text.
    #[arg(long)]
    json: bool,
    /// Judge unattributed IO strictly whatever the baseline says: it is compared like any
    /// group and explains no other change (an analyzer or capture that loses a writer's
    /// attribution fails).
    #[arg(long)]
    strict: bool,
}

/// `ioblame check`: exit 0 within tolerance, 1 on a regression. It flushes its output
/// itself.
pub fn run(out: &mut impl Write, a: CheckArgs, session: &Session) -> Result<ExitCode> {
    let text = std::fs::read_to_string(&a.baseline)
        .with_context(|| format!("cannot read baseline {}", a.baseline.display()))?;
    let base = ioblame_baseline::Baseline::from_toml(&text)
        .with_context(|| format!("baseline {}", a.baseline.display()))?;
    let mut set = if a.counters.counter.is_empty() && a.counters.counters_file.is_none() {
        let specs: Vec<&str> = base.counters.iter().map(|c| c.spec.as_str()).collect();
        CounterSet::parse_args(&specs).context("the baseline's counters")?
    } else {
        counter_set(&a.counters)?
    };
    let o = session.open_selected(&a.trace, &a.devs)?;
    resolve_filter_devices(&mut set, &o.trace)?;
    let opts = ioblame_baseline::CheckOptions { strict: a.strict };
    let report = regress::check(o, set, &base, &opts, session.scope_given())?;
    // The verdict does not depend on whether anyone reads the report: a closed pipe
    // (`ioblame check ... | head`) keeps exit 1 on a regression.
    let code = if report.regressed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    };
    let written = if a.json {
        writeln!(out, "{}", report.to_json())
    } else {
        report.render_text(out)
    }
    .and_then(|()| out.flush());
    match written {
        Ok(()) => Ok(code),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(code),
        Err(e) => Err(anyhow::Error::from(e).context("writing the output")),
    }
}
