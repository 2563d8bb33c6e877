//! Text outputs of `acts`, `iolog` and `intents`, in ioblame's formats where it had one.

use std::io::{self, Write};

use ioblame_attrib::{Act, ActId, ActTotals, Io, Tables, Via, WbReason};
use ioblame_counters::output::printable;
use ioblame_decode::{dev_major, dev_minor};
use ioblame_format::PathTable;
use ioblame_report::human_bytes;

/// How stack frames are shown: `[addr] name+0xoff/0xsize` and the bare function name.
pub trait Frames {
    /// A frame as ioblame printed it: `[ffffffff811c55b0] __mark_inode_dirty+0x220/0x330`.
    fn frame_line(&self, addr: u64) -> String;
    /// The function name alone (`__mark_inode_dirty`), or the hex address when unknown.
    fn name(&self, addr: u64) -> String;
}

/// Stack frames through the trace's kernel symbols.
pub struct SymFrames<'a>(pub &'a ioblame_decode::Symbolizer);

impl Frames for SymFrames<'_> {
    fn frame_line(&self, addr: u64) -> String {
        self.0.format_frame(addr)
    }
    fn name(&self, addr: u64) -> String {
        match self.0.resolve(addr) {
            Some(s) => s.name.to_string(),
            None => format!("{addr:#x}"),
        }
    }
}

/// The trace's block devices' names, by kernel-encoded device.
pub fn dev_names(trace: &ioblame_format::Trace) -> Vec<(u32, String)> {
    trace
        .metadata()
        .block_devices
        .iter()
        .map(|b| (b.major << 20 | b.minor, printable(&b.name).into_owned()))
        .collect()
}

/// An intent's stack as `ioblame intents` prints it: a line per kernel frame, then per user
/// frame.
pub fn stack_lines<'a>(
    it: &'a ioblame_attrib::Intent,
    frames: &'a dyn Frames,
) -> impl Iterator<Item = String> + 'a {
    let kernel = it.stack.iter().map(|&a| frames.frame_line(a));
    kernel.chain(it.user.iter().map(user_frame_line))
}

/// `MAJ:MIN` of a kernel-encoded device.
pub fn dev_str(dev: u32) -> String {
    format!("{}:{}", dev_major(dev), dev_minor(dev))
}

fn reason_name(r: Option<WbReason>) -> &'static str {
    r.map_or("-", |r| r.name())
}

/// Where a text output looks a file's path up: the charged files' table, or the trace itself
/// (`iolog`, which prints as it goes, before the charged files are known).
pub trait Paths {
    /// The path of inode `ino` of the filesystem `dev`, if the trace names it.
    fn path(&self, dev: u32, ino: u64) -> Option<&str>;
}

impl Paths for PathTable {
    fn path(&self, dev: u32, ino: u64) -> Option<&str> {
        self.get(dev, ino)
    }
}

impl Paths for ioblame_format::Trace {
    fn path(&self, dev: u32, ino: u64) -> Option<&str> {
        self.path_of(dev, ino)
    }
}

/// The path of an act's file as the trace names it (`-` when unknown), printable.
fn path_text<'a>(paths: &'a PathTable, a: &Act) -> std::borrow::Cow<'a, str> {
    match (a.file.ino != 0)
        .then(|| paths.get(a.file.dev, a.file.ino))
        .flatten()
    {
        Some(p) => printable(p),
        None => "-".into(),
    }
}

/// Acts in report order: most bytes first, then by id (deterministic).
pub fn sorted_acts(tables: &Tables, show_recorder: bool) -> Vec<ActId> {
    let mut ids: Vec<ActId> = tables
        .acts_with_totals()
        .filter(|(_, a, t)| {
            // An act with only lower copies on the devices selected (a loop device's
            // backing file, `--devs` its disk) is shown: its LOWER bytes are there.
            (show_recorder || !a.recorder) && t.total_ios() + t.lower_ios.iter().sum::<u64>() > 0
        })
        .map(|(id, _, _)| id)
        .collect();
    ids.sort_by_key(|&id| {
        let t = &tables.totals[id.index()];
        let lower: u64 = t.lower_bytes.iter().sum();
        (std::cmp::Reverse(t.total_bytes() + lower), id)
    });
    ids
}

/// Column titles.
const TITLE: anstyle::Style = anstyle::Style::new().bold();
/// The comm column.
const COMM: anstyle::Style = anstyle::Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(anstyle::AnsiColor::Cyan)));

/// `text` padded to `width` columns (left-aligned), in `style` when `color`.
fn painted(color: bool, style: anstyle::Style, text: &str, width: usize) -> String {
    let pad = width.saturating_sub(text.chars().count());
    if color {
        format!(
            "{}{text}{}{}",
            style.render(),
            style.render_reset(),
            " ".repeat(pad)
        )
    } else {
        format!("{text}{}", " ".repeat(pad))
    }
}

/// Writes `rows` under `head` in columns as wide as their widest cell (in characters), each
/// right-aligned where `right` says so; the last column is not padded. Cells are printed as
/// given: escape trace text ([`printable`]) first.
pub fn columns(
    out: &mut impl Write,
    head: &[&str],
    right: &[bool],
    rows: &[Vec<String>],
) -> io::Result<()> {
    let n = head.len();
    let mut w: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        let mut l = String::new();
        for (i, c) in cells.enumerate().take(n) {
            let pad = " ".repeat(w[i].saturating_sub(c.chars().count()));
            if i > 0 {
                l.push_str("  ");
            }
            if right.get(i).copied().unwrap_or(false) {
                l.push_str(&pad);
                l.push_str(c);
            } else {
                l.push_str(c);
                if i + 1 < n {
                    l.push_str(&pad);
                }
            }
        }
        l
    };
    writeln!(out, "{}", line(&mut head.iter().copied()))?;
    for r in rows {
        writeln!(out, "{}", line(&mut r.iter().map(String::as_str)))?;
    }
    Ok(())
}

/// `ioblame acts`: one row per act (the first `top`, all when `None`), the intent named by
/// `names` (by intent id). `color` adds ANSI styles (the caller strips them where colour is
/// off).
#[allow(clippy::too_many_arguments)]
pub fn acts_table(
    out: &mut impl Write,
    tables: &Tables,
    names: &[String],
    paths: &PathTable,
    show_recorder: bool,
    top: Option<usize>,
    color: bool,
) -> io::Result<()> {
    let mut ids = sorted_acts(tables, show_recorder);
    ids.truncate(top.unwrap_or(usize::MAX));
    // COMM and FILE are as wide as their longest entry, so columns align whatever the
    // comms and paths.
    let width = |f: &dyn Fn(&Act) -> usize, min: usize| {
        ids.iter()
            .map(|&id| f(&tables.acts[id.index()]))
            .fold(min, usize::max)
    };
    let comm_w = width(
        &|a| {
            printable(&tables.roles[a.role.index()].comm)
                .chars()
                .count()
        },
        16,
    );
    let file_w = width(&|a| path_text(paths, a).chars().count(), 4);
    // 64-bit inode numbers (xfs) and the longest writeback reasons (`fs_free_space`).
    let ino_w = width(&|a| a.file.ino.to_string().len(), 10);
    let reason_w = width(&|a| reason_name(a.reason).len(), 10);
    // The lower layers' copies (a loop device's backing file), only where there are some.
    let lower = ids
        .iter()
        .any(|id| tables.totals[id.index()].lower_bytes.iter().any(|&b| b > 0));
    let lower_col = |t: &ActTotals| {
        if lower {
            format!(" {:>12}", human_bytes(t.lower_bytes.iter().sum()))
        } else {
            String::new()
        }
    };
    let head = format!(
        "{:>7} {:<comm_w$} {:>6} {:>10} {:>7} {:>ino_w$} {:<file_w$} {:<9} {:<reason_w$} {:>12} {:>7} {:>12} {:>7}{}  INTENT NAME",
        "PID",
        "COMM",
        "INTENT",
        "MODIFIER",
        "DEV",
        "INO",
        "FILE",
        "VIA",
        "REASON",
        "READ",
        "R_IOS",
        "WRITE",
        "W_IOS",
        if lower {
            format!(" {:>12}", "LOWER")
        } else {
            String::new()
        }
    );
    writeln!(out, "{}", painted(color, TITLE, &head, 0))?;
    for id in ids {
        let a = &tables.acts[id.index()];
        let t = &tables.totals[id.index()];
        let role = &tables.roles[a.role.index()];
        let intent = &tables.intents[a.intent.index()];
        let mut name = names
            .get(a.intent.index())
            .map_or_else(|| "-".to_string(), |n| printable(n).into_owned());
        if let Some(issuer) = a.issuer.and_then(|r| tables.role(r)) {
            // The lost intent has no stack: say who queued the IO instead.
            name.push_str(&format!(
                " (issued by pid-{} {})",
                issuer.tid,
                printable(&issuer.comm)
            ));
        }
        writeln!(
            out,
            "{:>7} {} {:>6} {:>#10x} {:>7} {:>ino_w$} {:<file_w$} {:<9} {:<reason_w$} {:>12} {:>7} {:>12} {:>7}{}  {}",
            role.tid,
            painted(color, COMM, &printable(&role.comm), comm_w),
            format!("#{}", a.intent),
            intent.modifier,
            dev_str(a.file.dev),
            a.file.ino,
            path_text(paths, a),
            a.via.name(),
            reason_name(a.reason),
            human_bytes(t.bytes[0] + t.bytes[1]),
            t.ios[0] + t.ios[1],
            human_bytes(t.bytes[2]),
            t.ios[2],
            lower_col(t),
            name
        )?;
    }
    Ok(())
}

/// Adds the per-direction totals of `t` to the JSON object `v`: `read_bytes`, `read_ios`
/// (readahead included), `readahead_bytes`, `readahead_ios`, `write_bytes`, `write_ios`.
pub fn add_totals_json(v: &mut serde_json::Value, t: &ActTotals) {
    for (k, x) in [
        ("read_bytes", t.bytes[0] + t.bytes[1]),
        ("read_ios", t.ios[0] + t.ios[1]),
        ("readahead_bytes", t.bytes[1]),
        ("readahead_ios", t.ios[1]),
        ("write_bytes", t.bytes[2]),
        ("write_ios", t.ios[2]),
    ] {
        v[k] = x.into();
    }
}

/// `ioblame acts --json`: one JSON object per act of `ids` and line (in that order: the
/// first of [`sorted_acts`], say).
pub fn acts_json(
    out: &mut impl Write,
    tables: &Tables,
    frames: &dyn Frames,
    names: &[String],
    paths: &PathTable,
    cgroups: Option<&ioblame_attrib::CgroupNames>,
    ids: &[ActId],
) -> io::Result<()> {
    for &id in ids {
        let v = act_json(
            tables,
            frames,
            names,
            paths,
            cgroups,
            id,
            &tables.totals[id.index()],
        );
        writeln!(out, "{v}")?;
    }
    Ok(())
}

/// One act as `ioblame acts --json` shows it, with the totals `t` (the whole analysis', or
/// an interval's for `ioblame top --json`).
pub fn act_json(
    tables: &Tables,
    frames: &dyn Frames,
    names: &[String],
    paths: &dyn Paths,
    cgroups: Option<&ioblame_attrib::CgroupNames>,
    id: ActId,
    t: &ActTotals,
) -> serde_json::Value {
    let a: &Act = &tables.acts[id.index()];
    let role = &tables.roles[a.role.index()];
    let intent = &tables.intents[a.intent.index()];
    let issuer = a.issuer.and_then(|r| tables.role(r));
    let mut v = serde_json::json!({
        "act": id.0,
        "role": a.role.0,
        "pid": role.pid,
        "tid": role.tid,
        "gen": role.generation,
        "comm": role.comm,
        "intent": a.intent.0,
        "intent_name": names.get(a.intent.index()),
        "modifier": intent.modifier,
        "dev": dev_str(a.file.dev),
        "ino": a.file.ino,
        "path": (a.file.ino != 0).then(|| paths.path(a.file.dev, a.file.ino)).flatten(),
        "via": a.via.name(),
        "reason": a.reason.map(|r| r.name()),
        "issuer_pid": issuer.map(|r| r.pid),
        "issuer_tid": issuer.map(|r| r.tid),
        "issuer_comm": issuer.map(|r| r.comm.as_str()),
        "recorder": a.recorder,
        "frames": intent.stack.iter().map(|&x| frames.name(x)).collect::<Vec<_>>(),
    });
    add_totals_json(&mut v, t);
    v["lost_window_bytes"] = t.lost_window_bytes.into();
    // Acts with copies on a lower device (a loop device's backing file) have these keys:
    // those bytes are not in `read_bytes` and `write_bytes`.
    if t.lower_ios.iter().any(|&n| n > 0) {
        v["lower_read_bytes"] = (t.lower_bytes[0] + t.lower_bytes[1]).into();
        v["lower_read_ios"] = (t.lower_ios[0] + t.lower_ios[1]).into();
        v["lower_write_bytes"] = t.lower_bytes[2].into();
        v["lower_write_ios"] = t.lower_ios[2].into();
    }
    // Only acts charged a part of a commit's journal IO by its handles have the key.
    if let Some(s) = t.journal_share() {
        v["journal_share"] = s.into();
        v["journal_shared_bytes"] = t.journal_shared_bytes.into();
    }
    // Only traces that recorded cgroups have the key (older outputs stay as they were).
    if let Some(c) = cgroups {
        v["cgroup"] = c.of_act(a, tables).into();
    }
    // Only intents with user frames (`--user-stacks`) have the key.
    if !intent.user.is_empty() {
        v["user_frames"] = user_frames_json(&intent.user);
    }
    v
}

/// An intent's user frames as JSON, innermost first: each with its module's path and build
/// id, the file offset, the function whose code it is (`null` unsymbolized) and, when that
/// was inlined, the functions it was inlined into, innermost first.
pub fn user_frames_json(frames: &[ioblame_attrib::UserFrame]) -> serde_json::Value {
    frames
        .iter()
        .map(|f| {
            serde_json::json!({
                "module": f.module.as_ref().map(|m| m.path.as_str()),
                "build_id": f.module.as_ref().map(|m| ioblame_format::build_id_hex(&m.build_id)),
                "offset": f.offset,
                "function": f.names.first(),
                "inlined_into": f.names.iter().skip(1).collect::<Vec<_>>(),
                "label": ioblame_attrib::names::user_frame_label(f),
            })
        })
        .collect()
}

/// One user frame of the `intents` dump: `  u: LABEL (MODULE+0xOFFSET)`.
fn user_frame_line(f: &ioblame_attrib::UserFrame) -> String {
    let label = ioblame_attrib::names::user_frame_label(f);
    let inlined = if f.names.len() > 1 {
        format!(" [inlined in {}]", f.names[1..].join(" < "))
    } else {
        String::new()
    };
    match &f.module {
        Some(m) if !f.names.is_empty() => {
            let base = m.path.rsplit('/').next().unwrap_or(&m.path);
            format!(
                "  u {}{inlined} ({base}+{:#x})",
                printable(&label),
                f.offset
            )
        }
        _ => format!("  u {}", printable(&label)),
    }
}

/// `ioblame intents`: the intents dump as ioblame printed it, except that each header
/// (`#NR modifier=0x...`) is followed by the intent's short name from `names` (by intent id)
/// in parentheses.
pub fn intents(
    out: &mut impl Write,
    tables: &Tables,
    names: &[String],
    frames: &dyn Frames,
) -> io::Result<()> {
    for (id, it) in tables.intents_with_ids() {
        write!(out, "#{id} modifier={:#x}", it.modifier)?;
        match names.get(id.index()) {
            Some(n) if !n.is_empty() => writeln!(out, " ({})", printable(n))?,
            _ => writeln!(out)?,
        }
        for line in stack_lines(it, frames) {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// One `iolog` entry: ioblame's header line and intent, with the link, reason and issuer
/// appended.
pub fn iolog_entry(
    out: &mut impl Write,
    io: &Io,
    tables: &Tables,
    frames: &dyn Frames,
    paths: &impl Paths,
) -> io::Result<()> {
    let a = &tables.acts[io.act.index()];
    let role = &tables.roles[a.role.index()];
    let issuer = &tables.roles[io.issuer.index()];
    let intent = &tables.intents[a.intent.index()];
    write!(
        out,
        "{} {} @ {} pid-{} ({}) dev={:#x} ino={:#x} gen=0x0 via={}",
        io.dir.letter(),
        io.size,
        io.sector,
        role.tid,
        printable(&role.comm),
        a.file.dev,
        a.file.ino,
        io.via.name()
    )?;
    if a.file.ino != 0 {
        if let Some(p) = paths.path(a.file.dev, a.file.ino) {
            write!(out, " path={}", printable(p))?;
        }
    }
    if let Some(r) = io.reason {
        write!(out, " reason={}", r.name())?;
    }
    if io.issuer != a.role {
        write!(
            out,
            " issuer=pid-{} ({})",
            issuer.tid,
            printable(&issuer.comm)
        )?;
    }
    if let Some(off) = io.file_offset {
        write!(out, " file_offset={off}")?;
    }
    if io.via == Via::Journal {
        if let Some(t) = io.journal_txn {
            write!(out, " txn={t}")?;
        }
        if let Some(s) = io.journal_share {
            write!(out, " share={s:.4}")?;
        }
    }
    write!(
        out,
        " rwbs={} wait={}us io={}us",
        io.rwbs, io.wait_time, io.io_time
    )?;
    if io.lower {
        // A copy on the lower device (a loop device's backing file) of the act's IO.
        write!(out, " lower={}:{}", io.dev >> 20, io.dev & 0xfffff)?;
    }
    if io.in_lost_window {
        // The kernel lost records while this IO was in progress.
        write!(out, " lost_window")?;
    }
    writeln!(out)?;
    writeln!(out, "  #{} modifier={:#x}", a.intent, intent.modifier)?;
    for &x in &intent.stack {
        writeln!(out, "  {}", frames.frame_line(x))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioblame_attrib::{ActTotals, FileKey, Intent, IntentId, Role, RoleId};

    struct NoFrames;
    impl Frames for NoFrames {
        fn frame_line(&self, addr: u64) -> String {
            format!("[{addr:x}]")
        }
        fn name(&self, addr: u64) -> String {
            format!("{addr:#x}")
        }
    }

    /// Two tasks with one pid (pid reuse) are two rows told apart by `role` and `gen`.
    #[test]
    fn acts_json_tells_pid_reuse_apart() {
        let role = |generation| Role {
            pid: 500,
            tid: 500,
            comm: "dd".into(),
            generation,
            cgroup: 0,
            lineage: false,
        };
        let act = |role| Act {
            role: RoleId(role),
            intent: IntentId(2),
            file: FileKey {
                dev: 7 << 20,
                ino: 12,
            },
            via: Via::Page,
            reason: Some(WbReason(2)),
            issuer: None,
            recorder: false,
        };
        let mut totals = ActTotals::default();
        totals.add(ioblame_attrib::Dir::W, 4096);
        let tables = Tables {
            roles: vec![role(0), role(1)],
            intents: vec![
                Intent {
                    modifier: 0,
                    stack: vec![],
                    user: Vec::new(),
                },
                Intent {
                    modifier: 0,
                    stack: vec![],
                    user: Vec::new(),
                },
                Intent {
                    modifier: 0x1000_0002,
                    stack: vec![0xffff_0001],
                    user: Vec::new(),
                },
            ],
            acts: vec![act(0), act(1)],
            totals: vec![totals, totals],
        };
        let mut out = Vec::new();
        acts_json(
            &mut out,
            &tables,
            &NoFrames,
            &[],
            &PathTable::default(),
            None,
            &sorted_acts(&tables, false),
        )
        .unwrap();
        let rows: Vec<serde_json::Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let keys: Vec<(u64, u64, u64)> = rows
            .iter()
            .map(|v| {
                (
                    v["pid"].as_u64().unwrap(),
                    v["role"].as_u64().unwrap(),
                    v["gen"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(keys, vec![(500, 0, 0), (500, 1, 1)]);
        assert_eq!(rows[0]["reason"], "sync");
        assert!(rows[0]["issuer_pid"].is_null());
    }
}
