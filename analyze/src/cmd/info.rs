//! `ioblame info`: header, metadata and chunk statistics of a trace (of a blktrace
//! recording: [`blktrace`]).

mod blktrace;

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::Result;
use clap::Args;
use ioblame_counters::DevSelection;
use ioblame_format::{
    PathTable, Trace, EVENT_CALLCHAIN, FILES_CAPPED, FILES_TIMED_OUT, FILES_TOUCHED,
};

use crate::session::{self, Session, TraceArgs};

#[derive(Args, Debug)]
pub struct InfoArgs {
    #[command(flatten)]
    trace: TraceArgs,
}

/// `ioblame info`.
pub fn run(out: &mut impl Write, a: InfoArgs, session: &Session) -> Result<()> {
    let t = session.open(&a.trace.trace)?;
    match t.blktrace() {
        Some(rec) => blktrace::print(out, rec)?,
        None => {
            // The charged files: an analysis of every device, quiet (its notes are the
            // analysis commands' to give), of all the trace's IO whatever `--scope` says.
            let (sym, _) = ioblame_pipeline::symbols_of(&t);
            let scope = session::resolve_scope(&t, None, false)?;
            let all = DevSelection::all();
            let opts = ioblame_pipeline::Options {
                symbols: &sym,
                devs: &all,
                show_recorder: false,
                scope: &scope,
                user_symbols: session.user_symbols(),
            };
            let r = ioblame_pipeline::analyze(&t, &opts, |_, _| {}, |_| {});
            let paths = ioblame_pipeline::charged_paths(&t, &r.tables);
            print(out, &t, &Charged::of(&t, &r.tables, &paths))?
        }
    }
    Ok(())
}

#[derive(Default)]
struct CpuStats {
    chunks: u64,
    records: u64,
    lost: u64,
    first: u64,
    last: u64,
}

/// Writes the `info` report.
/// `charged`: the charged files (an analysis of every device) and those the trace does not
/// name.
pub fn print(out: &mut impl Write, t: &Trace, charged: &Charged) -> std::io::Result<()> {
    let h = t.header();
    let m = t.metadata();
    writeln!(out, "trace")?;
    writeln!(out, "  files            {}", t.files().len())?;
    for f in t.files() {
        writeln!(
            out,
            "    {} ({} bytes, {} chunks{})",
            f.path().display(),
            f.len(),
            f.chunk_count(),
            if f.indexed() {
                ""
            } else {
                ", not closed cleanly"
            }
        )?;
    }
    writeln!(out, "  host             {} ({})", h.hostname, h.machine)?;
    writeln!(out, "  kernel           {}", h.kernel_release)?;
    writeln!(
        out,
        "  recorder         {} (pid {})",
        h.recorder_version, h.recorder_pid
    )?;
    writeln!(
        out,
        "  byte order       {:?}, word size {}, page size {}",
        h.byte_order, h.word_size, h.page_size
    )?;
    writeln!(out, "  cpus             {}", h.cpu_count)?;
    writeln!(out, "  clock id         {}", h.clock_id)?;
    writeln!(
        out,
        "  started          {} ns since the epoch",
        h.start_time_ns
    )?;
    writeln!(out, "  trace id         {:#018x}", h.trace_id)?;
    for (k, v) in &m.capture_info {
        writeln!(out, "  {k:<16} {v}")?;
    }
    let with_cc = m
        .events
        .iter()
        .filter(|e| e.flags & EVENT_CALLCHAIN != 0)
        .count();
    writeln!(
        out,
        "events             {} ({} with callchains)",
        m.events.len(),
        with_cc
    )?;
    for e in &m.events {
        writeln!(
            out,
            "  {:<48} id {:<5}{}{}",
            e.name,
            e.tracefs_id,
            if e.flags & EVENT_CALLCHAIN != 0 {
                " callchain"
            } else {
                ""
            },
            if e.filter.is_empty() {
                String::new()
            } else {
                format!(" filter: {}", e.filter)
            }
        )?;
    }
    match &m.kallsyms {
        Some(k) => writeln!(
            out,
            "kallsyms           {} symbols{}",
            k.text.lines().count(),
            if k.restricted {
                " (addresses hidden on the recording host)"
            } else {
                ""
            }
        )?,
        None => writeln!(out, "kallsyms           none")?,
    }
    writeln!(out, "block devices      {}", m.block_devices.len())?;
    for d in &m.block_devices {
        write!(
            out,
            "  {:<12} {}:{} {} sectors",
            d.name, d.major, d.minor, d.size_sectors
        )?;
        if !d.parent.is_empty() {
            write!(out, " partition of {} at {}", d.parent, d.part_start)?;
        }
        if !d.loop_backing_file.is_empty() {
            write!(out, " backed by {}", d.loop_backing_file)?;
        }
        writeln!(out)?;
    }
    // Format 1.7: where loop devices' and one-to-one dm targets' sectors go.
    let loops = t.loops();
    if !loops.is_empty() {
        writeln!(out, "loop devices       {}", loops.len())?;
        for l in &loops {
            write!(
                out,
                "  {}:{} over {}:{} ino {} at {}",
                l.major, l.minor, l.backing_major, l.backing_minor, l.backing_ino, l.offset
            )?;
            if l.direct_io {
                write!(out, " direct IO")?;
            }
            if l.since_ns > 0 {
                let at = l.since_ns.saturating_sub(t.header().start_clock_ns);
                write!(out, " from {:.3} s", at as f64 / 1e9)?;
            }
            writeln!(out, " {}", l.backing_file)?;
        }
    }
    let dm = t.dm_targets();
    if !dm.is_empty() {
        writeln!(out, "dm targets         {}", dm.len())?;
        for d in &dm {
            write!(
                out,
                "  {}:{} {} sectors {}+{} over {}:{} at {}",
                d.major,
                d.minor,
                d.target,
                d.start,
                d.length,
                d.lower_major,
                d.lower_minor,
                d.lower_offset
            )?;
            if d.since_ns > 0 {
                let at = d.since_ns.saturating_sub(t.header().start_clock_ns);
                write!(out, " from {:.3} s", at as f64 / 1e9)?;
            }
            writeln!(out)?;
        }
    }
    writeln!(out, "mounts             {}", m.mounts.len())?;
    writeln!(out, "tasks at start     {}", m.tasks.len())?;
    file_names(out, t, charged)?;

    let mut per_cpu: BTreeMap<u32, CpuStats> = BTreeMap::new();
    for c in t.chunks() {
        let s = per_cpu.entry(c.header.cpu).or_default();
        s.chunks += 1;
        s.records = s.records.saturating_add(c.header.records as u64);
        s.lost = s.lost.saturating_add(c.header.lost);
        if c.header.first_ts != 0 && (s.first == 0 || c.header.first_ts < s.first) {
            s.first = c.header.first_ts;
        }
        s.last = s.last.max(c.header.last_ts);
    }
    let total: CpuStats = per_cpu.values().fold(CpuStats::default(), |mut a, s| {
        a.chunks += s.chunks;
        a.records = a.records.saturating_add(s.records);
        a.lost = a.lost.saturating_add(s.lost);
        a
    });
    writeln!(
        out,
        "chunks             {} ({} records, {} lost)",
        total.chunks, total.records, total.lost
    )?;
    writeln!(out, "  cpu   chunks    records   lost  span (s)")?;
    for (cpu, s) in &per_cpu {
        writeln!(
            out,
            "  {:<5} {:>6} {:>10} {:>6}  {:.3}",
            cpu,
            s.chunks,
            s.records,
            s.lost,
            s.last.saturating_sub(s.first) as f64 / 1e9
        )?;
    }
    writeln!(out, "problems           {}", t.problems().len())?;
    Ok(())
}

/// The files the analysis charged, and the note of those without a path.
pub struct Charged {
    /// Distinct (dev, inode) of acts with a file.
    pub files: usize,
    /// What [`ioblame_pipeline::unnamed_files`] says of them, if any lack a path.
    pub unnamed: Option<ioblame_pipeline::Diagnostic>,
}

impl Charged {
    /// The charged files of `tables` and what `paths` (their lookup) lacks.
    pub fn of(t: &Trace, tables: &ioblame_attrib::Tables, paths: &PathTable) -> Charged {
        let files: std::collections::HashSet<(u32, u64)> = tables
            .acts
            .iter()
            .filter(|a| a.file.ino != 0 && !a.recorder)
            .map(|a| (a.file.dev, a.file.ino))
            .collect();
        Charged {
            files: files.len(),
            unnamed: ioblame_pipeline::unnamed_files(t, tables, paths, false),
        }
    }
}

/// The `file names` section: what the tables name, how they were made, and the charged files
/// without a path.
fn file_names(out: &mut impl Write, t: &Trace, charged: &Charged) -> std::io::Result<()> {
    let s = t.paths_summary();
    if s.tables == 0 {
        writeln!(
            out,
            "file names         none (recorded with --no-paths, or before format 1.1)"
        )?;
    } else {
        let all = t.paths();
        let how = if s.flags & FILES_TOUCHED != 0 {
            "the files the trace refers to"
        } else {
            "a walk of the recorded filesystems"
        };
        let cut = match (s.flags & FILES_TIMED_OUT != 0, s.flags & FILES_CAPPED != 0) {
            (false, false) => "",
            (true, false) => ", cut short by its time budget",
            (false, true) => ", cut short by its entry cap",
            (true, true) => ", cut short by its time budget and entry cap",
        };
        let unnamed = all.iter_unnamed().count();
        writeln!(
            out,
            "file names         {} named, {} known unnamed, in {} tables ({how}{cut})",
            all.len(),
            unnamed,
            s.tables
        )?;
    }
    write!(out, "  charged files    {}", charged.files)?;
    match &charged.unnamed {
        Some(d) => writeln!(out, "; {d}")?,
        None if charged.files > 0 && s.tables > 0 => writeln!(out, ", all named")?,
        None => writeln!(out)?,
    }
    Ok(())
}
