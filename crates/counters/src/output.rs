//! The counters outputs: ioblame's `counters_pipe` text, a readable variant and JSON lines.
//!
//! Every function writes the acts of `acts` (the attribution's act table, indexed by
//! [`ActId`]) that were used ([`CounterSet::is_used`]: an IO charged to them was recorded,
//! whether or not a counter counted it, as ioblame's `counters_pipe` listed "all acts which
//! have been used"), in act order; `roles` is the role table
//! the acts point into. An act whose role is missing from `roles` is printed with pid 0 and
//! no comm.
//!
//! Roles are threads: as in ioblame, the `pid` of the text outputs is the task's own pid (the
//! thread id, [`Role::tid`]), the number the filter field `pid` compares. The JSON output
//! names both: `pid` the process (as `acts --json` and the Parquet tables) and `tid` the task.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};

use ioblame_attrib::{Act, ActId, Role};
use serde::Serialize;

use crate::set::{CounterSet, Histogram};
use crate::spec::SLOTS;

fn counted<'a>(
    set: &'a CounterSet,
    acts: &'a [Act],
    roles: &'a [Role],
) -> impl Iterator<Item = (ActId, &'a Act, Option<&'a Role>)> + 'a {
    acts.iter().enumerate().filter_map(move |(i, a)| {
        let id = ActId::from_index(i)?;
        set.is_used(id).then(|| (id, a, roles.get(a.role.index())))
    })
}

/// Text from the trace (a comm, a path) made safe for line-based text outputs and terminals:
/// a backslash becomes `\\`, a line break, tab or carriage return `\n` `\t` `\r`, any other
/// control character `\xHH` (below U+0080) or `\u{HHHH}`. Everything else is kept, so text
/// without such characters is returned as it is, unallocated. JSON and Parquet outputs keep
/// the raw value.
///
/// ```
/// use ioblame_counters::output::printable;
/// assert_eq!(printable("kworker/u8:2"), "kworker/u8:2");
/// assert_eq!(printable("a\nb\u{1b}[0m\\"), r"a\nb\x1b[0m\\");
/// ```
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c == '\\' || c.is_control()) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() && (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn maj_min(dev: u32) -> String {
    format!("{}:{}", dev >> 20, dev & 0xfffff)
}

/// ioblame's `counters_pipe` format: per act a line
/// `pid-N (comm) int=NR dev=0x... ino=0x... gen=0x0` (comm through [`printable`], so one
/// act is always one line; N the task's own pid, i.e. its thread
/// id; dev in the kernel encoding
/// `major << 20 | minor`; `(comm)` left out when unknown; `gen` is always 0, traces have no
/// inode generations), then one line per counter: a tab and the eight counts, the first
/// right-aligned in 3 columns, the others in 7 columns after a space.
pub fn counters_pipe(
    mut w: impl Write,
    set: &CounterSet,
    acts: &[Act],
    roles: &[Role],
) -> io::Result<()> {
    for (id, act, role) in counted(set, acts, roles) {
        write!(w, "pid-{}", role.map_or(0, |r| r.tid))?;
        if let Some(r) = role.filter(|r| !r.comm.is_empty()) {
            write!(w, " ({})", printable(&r.comm))?;
        }
        writeln!(
            w,
            " int={} dev={:#x} ino={:#x} gen=0x0",
            act.intent, act.file.dev, act.file.ino
        )?;
        for h in set.act_histograms(id) {
            write!(w, "\t{:>3}", h[0])?;
            for c in &h[1..] {
                write!(w, " {c:>7}")?;
            }
            writeln!(w)?;
        }
    }
    Ok(())
}

/// A readable report: each counter with its spec, unit and slot ranges, then per act a
/// header (comm, the task's own pid, its process id as `tgid` when it differs, intent, dev
/// as MAJ:MIN, ino, via) and a table of its counts with a
/// total per counter, and finally the totals over all acts.
pub fn pretty(w: impl Write, set: &CounterSet, acts: &[Act], roles: &[Role]) -> io::Result<()> {
    pretty_named(w, set, acts, roles, &[])
}

/// [`pretty`], each act's header followed by its intent's short name from `names` (by intent
/// id; `ioblame_attrib::intent_names`), where there is one.
pub fn pretty_named(
    mut w: impl Write,
    set: &CounterSet,
    acts: &[Act],
    roles: &[Role],
    names: &[String],
) -> io::Result<()> {
    let specs = set.specs();
    let mut totals = vec![[0u64; SLOTS]; specs.len()];
    let mut n_acts = 0usize;
    let mut widest = 0u64;
    for (id, _, _) in counted(set, acts, roles) {
        n_acts += 1;
        for (t, h) in totals.iter_mut().zip(set.act_histograms(id)) {
            for (x, y) in t.iter_mut().zip(h) {
                *x += *y;
            }
        }
    }
    for t in &totals {
        widest = widest.max(t.iter().sum());
    }
    let width = widest.to_string().len().max(6) + 2;
    let labels: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| format!("#{i} {} {}", s.dirs, s.field.name()))
        .collect();
    let label_w = labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
        .max(7);

    writeln!(w, "Counters ({}):", specs.len())?;
    for (i, s) in specs.iter().enumerate() {
        writeln!(w, "  #{i} {s}")?;
        write!(w, "     slots ({}):", s.field.unit())?;
        for k in 0..SLOTS {
            write!(w, " {}", s.slot_range(k))?;
        }
        writeln!(w)?;
    }

    let table_head = |w: &mut dyn Write| -> io::Result<()> {
        write!(w, "  {:<label_w$}", "counter")?;
        for k in 0..SLOTS {
            write!(w, "{:>width$}", format!("slot{k}"))?;
        }
        writeln!(w, "{:>width$}", "total")
    };
    let row = |w: &mut dyn Write, label: &str, h: &Histogram| -> io::Result<()> {
        write!(w, "  {label:<label_w$}")?;
        for c in h {
            write!(w, "{c:>width$}")?;
        }
        writeln!(w, "{:>width$}", h.iter().sum::<u64>())
    };

    for (id, act, role) in counted(set, acts, roles) {
        writeln!(w)?;
        let comm = role.map_or(Cow::Borrowed("?"), |r| {
            if r.comm.is_empty() {
                Cow::Borrowed("?")
            } else {
                printable(&r.comm)
            }
        });
        write!(w, "act {id}: {comm} pid {}", role.map_or(0, |r| r.tid))?;
        if let Some(r) = role.filter(|r| r.pid != r.tid) {
            write!(w, " tgid {}", r.pid)?;
        }
        write!(
            w,
            " intent #{} dev {} ino {} via {}",
            act.intent,
            maj_min(act.file.dev),
            act.file.ino,
            act.via.name()
        )?;
        if act.recorder {
            write!(w, " (recorder)")?;
        }
        writeln!(w)?;
        if let Some(n) = names.get(act.intent.index()).filter(|n| !n.is_empty()) {
            writeln!(w, "  intent #{}: {}", act.intent, printable(n))?;
        }
        table_head(&mut w)?;
        for (label, h) in labels.iter().zip(set.act_histograms(id)) {
            row(&mut w, label, h)?;
        }
    }

    writeln!(w)?;
    writeln!(w, "Totals over {n_acts} acts:")?;
    table_head(&mut w)?;
    for (label, h) in labels.iter().zip(&totals) {
        row(&mut w, label, h)?;
    }
    Ok(())
}

#[derive(Serialize)]
struct JsonCounter<'a> {
    spec: String,
    dir: String,
    field: &'a str,
    bounds: &'a [u64; 9],
    filter: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonHeader<'a> {
    counters: Vec<JsonCounter<'a>>,
}

#[derive(Serialize)]
struct JsonAct<'a> {
    act: u32,
    pid: u32,
    tid: u32,
    comm: &'a str,
    intent: u32,
    dev: String,
    ino: u64,
    via: &'a str,
    counters: &'a [Histogram],
}

/// JSON lines: first `{"counters":[{"spec","dir","field","bounds","filter"}...]}`, then one
/// object per act: `act` (its id), `pid` (the process id), `tid` (the task's own pid, the
/// `pid-N` of [`counters_pipe`]), `comm` (empty when unknown), `intent`, `dev`
/// (`MAJ:MIN`), `ino`, `via`, `counters` (one array of eight counts per counter).
pub fn json(mut w: impl Write, set: &CounterSet, acts: &[Act], roles: &[Role]) -> io::Result<()> {
    let header = JsonHeader {
        counters: set
            .specs()
            .iter()
            .map(|s| JsonCounter {
                spec: s.spec_text(),
                dir: s.dirs.to_string(),
                field: s.field.name(),
                bounds: &s.bounds,
                filter: s.filter.as_ref().map(|f| f.text()),
            })
            .collect(),
    };
    serde_json::to_writer(&mut w, &header)?;
    writeln!(w)?;
    for (id, act, role) in counted(set, acts, roles) {
        let line = JsonAct {
            act: id.0,
            pid: role.map_or(0, |r| r.pid),
            tid: role.map_or(0, |r| r.tid),
            comm: role.map_or("", |r| &r.comm),
            intent: act.intent.0,
            dev: maj_min(act.file.dev),
            ino: act.file.ino,
            via: act.via.name(),
            counters: set.act_histograms(id),
        };
        serde_json::to_writer(&mut w, &line)?;
        writeln!(w)?;
    }
    Ok(())
}
