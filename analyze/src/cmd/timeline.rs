//! `ioblame timeline`: the analysis drawn as a Perfetto trace ([`ioblame_timeline`];
//! docs/timeline.md): each role's dirtying, reads, direct IO and fsyncs, each device's
//! requests and queue, and flows from each write to the IO it caused.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use clap::Args;
use ioblame_attrib::Tables;
use ioblame_counters::output::printable;
use ioblame_timeline::{Feed, Names, Options, Stats};

use super::at_least_one;
use crate::session::{DevArgs, Ready, Session, TraceArgs};
use crate::text::{dev_names, stack_lines, SymFrames};

#[derive(Args, Debug)]
pub struct TimelineArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    devs: DevArgs,
    /// The Perfetto trace written (open it at https://ui.perfetto.dev).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        default_value = "ioblame.perfetto-trace",
        value_hint = clap::ValueHint::FilePath
    )]
    output: PathBuf,
    /// Only what happened from this many seconds into the trace (requests queued, runs and
    /// fsyncs that overlap).
    #[arg(long, value_name = "SECONDS")]
    from: Option<f64>,
    /// Only what happened before this many seconds into the trace.
    #[arg(long, value_name = "SECONDS")]
    to: Option<f64>,
    /// At most this many slices (runs, requests, reads and direct IOs, fsyncs): the earliest
    /// are kept and the rest counted in a note.
    #[arg(long, value_name = "N", default_value_t = 2_000_000, value_parser = at_least_one())]
    max_slices: usize,
    /// At most this many flows (arrows from a write to its IO, from a read to its request).
    #[arg(long, value_name = "N", default_value_t = 2_000_000)]
    max_flows: usize,
}

/// `ioblame timeline`.
pub fn run(out: &mut impl Write, a: TimelineArgs, session: &Session) -> Result<()> {
    if let (Some(f), Some(t)) = (a.from, a.to) {
        if f >= t {
            bail!("--from must come before --to");
        }
    }
    let r = session.ready(&a.trace, &a.devs)?;
    let start = r.trace.header().start_clock_ns;
    let at = |s: Option<f64>, dflt: u64| {
        s.map_or(dflt, |s| start.saturating_add((s.max(0.0) * 1e9) as u64))
    };
    let opts = Options {
        window: (at(a.from, 0), at(a.to, u64::MAX)),
        max_slices: a.max_slices as u64,
        max_flows: a.max_flows as u64,
    };
    let stats = write_file(&r, &opts, &a.output)?;
    say_left_out(&stats);
    writeln!(
        out,
        "{}: {} slices, {} flows on {} tracks ({} bytes); open it at https://ui.perfetto.dev",
        a.output.display(),
        stats.slices,
        stats.flows,
        stats.tracks,
        stats.bytes
    )?;
    Ok(())
}

/// Runs the analysis `r` is ready for and writes its timeline to `path`.
pub fn write_file(r: &Ready<'_>, opts: &Options, path: &Path) -> Result<Stats> {
    let feed = feed(r);
    let a = r.analyze_logged(
        |ev| feed.event(ev),
        |io, tables| feed.io(io, tables),
        |io, _| feed.outside(io),
        Some(|d: &ioblame_attrib::Dirtied, tables: &Tables| dirtied(r, &feed, d, tables)),
    );
    write_collected(r, feed.finish(), &a.tables, opts, path)
}

/// What a role dirtied, to `feed` when the role is in the scope.
pub fn dirtied(r: &Ready<'_>, feed: &Feed, d: &ioblame_attrib::Dirtied, tables: &Tables) {
    if tables
        .role(d.role)
        .is_some_and(|role| r.scope.role_in(role))
    {
        feed.dirtied(d, tables);
    }
}

/// The timeline's side of the analysis `r` is ready for.
pub fn feed(r: &Ready<'_>) -> Feed {
    Feed::new(r.trace.header().page_size.max(512) as u64, r.show_recorder)
}

/// Writes what an analysis collected (`c`, with its final `tables`) to `path`, named from
/// the trace `r` holds; the fsyncs of threads none of whose roles is in the scope left out.
pub fn write_collected(
    r: &Ready<'_>,
    mut c: ioblame_timeline::Collected,
    tables: &Tables,
    opts: &Options,
    path: &Path,
) -> Result<Stats> {
    if !r.scope.is_all() {
        let inside: std::collections::HashSet<u32> = tables
            .roles
            .iter()
            .filter(|role| r.scope.role_in(role))
            .map(|role| role.tid)
            .collect();
        c.blocked.retain(|b| inside.contains(&b.tid));
    }
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let intents = ioblame_attrib::intent_names(tables, &r.symbols);
    let frames = SymFrames(&r.symbols);
    let stacks: Vec<String> = tables
        .intents
        .iter()
        .map(|it| {
            let lines: Vec<String> = stack_lines(it, &frames)
                .map(|l| l.trim().to_owned())
                .collect();
            lines.join("\n")
        })
        .collect();
    let paths = ioblame_pipeline::charged_paths(&r.trace, tables);
    let path_of = |dev: u32, ino: u64| paths.get(dev, ino).map(|p| printable(p).into_owned());
    let devices = dev_names(&r.trace);
    let device = |dev: u32| {
        let num = crate::text::dev_str(dev);
        match devices.iter().find(|d| d.0 == dev) {
            Some((_, name)) if *name != num => format!("{name} ({num})"),
            _ => num,
        }
    };
    let names = Names {
        tables,
        intents: &intents,
        stacks: &stacks,
        path: &path_of,
        device: &device,
    };
    ioblame_timeline::write(&c, &names, opts, BufWriter::new(file))
        .with_context(|| format!("writing {}", path.display()))
}

/// The notes of what the caps left out and of written-back IO no dirtying was found for.
pub fn say_left_out(s: &Stats) {
    let (n, bytes, from) = s.slices_left_out;
    if n > 0 {
        eprintln!(
            "ioblame: note: the timeline leaves out {n} slices ({bytes} bytes of IO) from {:.3} s \
             of the trace clock on (--max-slices; or narrow it with --from/--to, --devs, --scope)",
            from as f64 / 1e9
        );
    }
    if s.flows_left_out > 0 {
        eprintln!(
            "ioblame: note: the timeline leaves out {} flows (--max-flows)",
            s.flows_left_out
        );
    }
    let (parts, bytes) = s.unlinked;
    if parts > 0 {
        eprintln!(
            "ioblame: note: {parts} written-back IOs ({bytes} bytes) have no flow: what they \
             wrote was dirtied before the recording, or its dirtying was not recorded"
        );
    }
}
