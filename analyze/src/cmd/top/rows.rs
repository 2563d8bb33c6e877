//! The rows of `ioblame top` as text: formed, sorted, filtered and laid out in columns for a
//! width. Shared by `--batch` ([`super::batch`]) and the terminal view ([`super::view`]);
//! nothing here touches the terminal.

use ioblame_attrib::{Tables, INTENT_LOST};

use super::model::{Base, GroupBy, Model, Row, RowKey, Stat};
use super::names::Names;

/// What rows are sorted by (descending; `r` reverses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    /// Bytes dirtied.
    Dirtied,
    /// Bytes written.
    Write,
    /// Bytes read.
    Read,
    /// IOs.
    Iops,
    /// Device time.
    DevTime,
    /// Mean queue latency.
    QLat,
    /// Mean device latency.
    DLat,
    /// The time other IOs waited behind the row's.
    Behind,
    /// Process id.
    Pid,
    /// Command name.
    Comm,
}

impl SortBy {
    /// All, in the order of the columns.
    pub const ALL: [SortBy; 10] = [
        SortBy::Dirtied,
        SortBy::Write,
        SortBy::Read,
        SortBy::Iops,
        SortBy::DevTime,
        SortBy::QLat,
        SortBy::DLat,
        SortBy::Behind,
        SortBy::Pid,
        SortBy::Comm,
    ];

    /// Its name (`--sort`).
    pub fn name(self) -> &'static str {
        match self {
            SortBy::Dirtied => "dirtied",
            SortBy::Write => "write",
            SortBy::Read => "read",
            SortBy::Iops => "iops",
            SortBy::DevTime => "devtime",
            SortBy::QLat => "qlat",
            SortBy::DLat => "dlat",
            SortBy::Behind => "behind",
            SortBy::Pid => "pid",
            SortBy::Comm => "comm",
        }
    }

    pub(super) fn step(self, by: isize) -> SortBy {
        let n = SortBy::ALL.len() as isize;
        let i = SortBy::ALL.iter().position(|&s| s == self).unwrap_or(0) as isize;
        SortBy::ALL[((i + by).rem_euclid(n)) as usize]
    }
}

impl std::str::FromStr for SortBy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        SortBy::ALL
            .into_iter()
            .find(|g| g.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = SortBy::ALL.iter().map(|g| g.name()).collect();
                format!("unknown column {s:?} (one of {})", names.join(", "))
            })
    }
}

/// What drawing a screen or printing an interval reads.
pub struct Ctx<'a> {
    /// The sums.
    pub model: &'a Model,
    /// The attribution's tables (roles).
    pub tables: &'a Tables,
    /// Paths, cgroups and intent names.
    pub names: &'a mut Names,
    /// The trace's kernel symbols (the stacks' frames).
    pub symbols: &'a ioblame_decode::Symbolizer,
    /// Notes to show once (the recording's problems).
    pub notes: &'a [String],
}

/// How rows are shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Rows formed by.
    pub group: GroupBy,
    /// Sorted by.
    pub sort: SortBy,
    /// Ascending instead.
    pub reverse: bool,
    /// The sums since the start instead of the last interval's rates.
    pub totals: bool,
    /// Only rows whose text holds this (case-insensitive).
    pub filter: String,
}

/// A row as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextRow {
    /// The row's key.
    pub key: RowKey,
    /// The base standing for it (its stack is the one `Enter` shows).
    pub top: Option<Base>,
    /// The numbers: dirtied, written, read, IOPS, device time, queue and device latency,
    /// the time others waited behind it.
    pub numbers: [String; 8],
    /// Process or task id, or `-`.
    pub pid: String,
    /// Command name.
    pub comm: String,
    /// Cgroup path.
    pub cgroup: String,
    /// Intent name.
    pub intent: String,
    /// File (path, or `dev D ino N`), or the device's name for device rows.
    pub file: String,
}

/// A byte count or rate, short: `512`, `12.3K`, `8.0M`, `1.2G`.
fn compact(n: f64) -> String {
    const UNITS: [&str; 5] = ["", "K", "M", "G", "T"];
    let mut v = n;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{:.0}", v)
    } else if v < 10.0 {
        format!("{v:.1}{}", UNITS[u])
    } else {
        format!("{v:.0}{}", UNITS[u])
    }
}

/// A latency in µs: `850us`, `12.3ms`, `1.20s`.
fn latency(us: u64) -> String {
    if us == 0 {
        "-".into()
    } else if us < 1000 {
        format!("{us}us")
    } else if us < 1_000_000 {
        format!("{:.1}ms", us as f64 / 1e3)
    } else {
        format!("{:.2}s", us as f64 / 1e6)
    }
}

/// The time others waited behind a row: the share of the interval (`250%`: on average two
/// and a half IOs waiting behind it), or seconds (`totals`).
fn behind(ns: u64, secs: f64, totals: bool) -> String {
    if ns == 0 {
        "-".into()
    } else if totals {
        format!("{:.2}s", ns as f64 / 1e9)
    } else {
        let pct = ns as f64 / 1e7 / secs;
        if pct < 9.95 {
            format!("{pct:.1}%")
        } else {
            format!("{pct:.0}%")
        }
    }
}

/// The number cells of `s`: rates over `secs` (an interval), or sums (`totals`).
fn numbers(s: &Stat, secs: f64, totals: bool) -> [String; 8] {
    let (r, iops, dev) = if totals {
        (
            1.0,
            s.ios.to_string(),
            if s.dev_us == 0 {
                "-".to_string()
            } else {
                format!("{:.2}s", s.dev_us as f64 / 1e6)
            },
        )
    } else {
        (
            secs,
            format!("{:.0}", s.ios as f64 / secs),
            if s.dev_us == 0 {
                "-".to_string()
            } else {
                format!("{:.0}%", s.dev_us as f64 / 1e4 / secs)
            },
        )
    };
    [
        compact(s.dirtied as f64 / r),
        compact(s.written as f64 / r),
        compact(s.read as f64 / r),
        iops,
        dev,
        latency(s.queue_lat_us()),
        latency(s.dev_lat_us()),
        behind(s.behind_ns, secs, totals),
    ]
}

/// Cuts `s` to `w` characters, marking the cut with `…`.
pub(super) fn fit(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    if w == 0 {
        return String::new();
    }
    let mut t: String = s.chars().take(w - 1).collect();
    t.push('…');
    t
}

/// The rows of `ctx` shaped by `shape`, over `secs` (the interval's length, or the run's
/// for totals).
pub fn text_rows(ctx: &mut Ctx<'_>, shape: &Shape, secs: f64) -> Vec<TextRow> {
    let sums = if shape.totals {
        &ctx.model.total
    } else {
        &ctx.model.interval
    };
    let mut rows: Vec<Row> = ctx.model.rows(sums, shape.group, ctx.tables);
    let key_of = |r: &Row| -> (u64, String) {
        let s = &r.stat;
        let role = r.top.and_then(|b| ctx.tables.role(b.role));
        match shape.sort {
            SortBy::Dirtied => (s.dirtied, String::new()),
            SortBy::Write => (s.written, String::new()),
            SortBy::Read => (s.read, String::new()),
            SortBy::Iops => (s.ios, String::new()),
            SortBy::DevTime => (s.dev_us, String::new()),
            SortBy::QLat => (s.queue_lat_us(), String::new()),
            SortBy::DLat => (s.dev_lat_us(), String::new()),
            SortBy::Behind => (s.behind_ns, String::new()),
            SortBy::Pid => (role.map_or(0, |r| r.pid as u64), String::new()),
            SortBy::Comm => (0, role.map_or(String::new(), |r| r.comm.clone())),
        }
    };
    let mut keyed: Vec<((u64, String), u64, Row)> = rows
        .drain(..)
        .map(|r| {
            let k = key_of(&r);
            let bytes = r.stat.dirtied + r.stat.read + r.stat.written;
            (k, bytes, r)
        })
        .collect();
    // Most first (names: alphabetical), then the most bytes, then the key: a stable order.
    keyed.sort_by(|a, b| {
        let by = if shape.sort == SortBy::Comm {
            a.0 .1.cmp(&b.0 .1)
        } else {
            b.0 .0.cmp(&a.0 .0)
        };
        let by = if shape.reverse { by.reverse() } else { by };
        by.then(b.1.cmp(&a.1)).then(a.2.key.cmp(&b.2.key))
    });
    let filter = shape.filter.to_lowercase();
    let mut out = Vec::with_capacity(keyed.len());
    for (_, _, r) in keyed {
        let t = text_row(ctx, &r, secs, shape.totals);
        if !filter.is_empty() {
            let hay =
                format!("{} {} {} {} {}", t.pid, t.comm, t.cgroup, t.intent, t.file).to_lowercase();
            if !hay.contains(&filter) {
                continue;
            }
        }
        out.push(t);
    }
    out
}

/// One row's text.
fn text_row(ctx: &mut Ctx<'_>, r: &Row, secs: f64, totals: bool) -> TextRow {
    let top = r.top;
    let role = top.and_then(|b| ctx.tables.role(b.role));
    let info = top.and_then(|b| ctx.model.info.get(&b).copied());
    let pid = match (r.key, role) {
        (RowKey::Role(_), Some(ro)) if ro.tid != ro.pid => format!("{}/{}", ro.pid, ro.tid),
        (RowKey::Device(_), _)
        | (RowKey::Stack(_), _)
        | (RowKey::Cgroup(_), _)
        | (RowKey::File(..), _) => {
            // Several tasks may be in it: the largest one's.
            role.map_or("-".into(), |r| r.pid.to_string())
        }
        (_, Some(ro)) => ro.pid.to_string(),
        (_, None) => "-".into(),
    };
    let comm = role.map_or("-".into(), |r| r.comm.clone());
    let cgroup = match role.map(|r| r.cgroup) {
        Some(0) | None => "-".into(),
        Some(id) => ctx
            .names
            .cgroup(id)
            .map_or_else(|| format!("cgroup {id}"), str::to_string),
    };
    let lost = info
        .and_then(|i| i.act)
        .and_then(|a| ctx.tables.act(a))
        .is_some_and(|a| a.intent == INTENT_LOST);
    let intent = match top {
        _ if lost => "lost: unknown origin".to_string(),
        Some(b) => ctx
            .names
            .intent(ctx.model, ctx.symbols, b.stack)
            .to_string(),
        None => "-".into(),
    };
    let file = match (r.key, top, info) {
        (RowKey::Device(dev), _, _) => ctx.names.device(dev),
        (_, Some(b), Some(i)) if b.ino != 0 => ctx
            .names
            .path(i.dev, b.ino, i.dev_exact)
            .unwrap_or_else(|| format!("dev {} ino {}", crate::text::dev_str(i.dev), b.ino)),
        _ => "-".into(),
    };
    TextRow {
        key: r.key,
        top,
        numbers: numbers(&r.stat, secs, totals),
        pid,
        comm,
        cgroup,
        intent,
        file,
    }
}

/// The width from which a row fits on one line with every column.
pub const WIDE: u16 = 140;

/// Column titles (rates, sums) and widths of the numbers.
const NUMBER_COLUMNS: [(&str, &str, usize); 8] = [
    ("DIRTY/s", "DIRTIED", 7),
    ("WRITE/s", "WRITTEN", 7),
    ("READ/s", "READ", 7),
    ("IOPS", "IOS", 5),
    ("DEV%", "DEVTIME", 7),
    ("QLAT", "QLAT", 6),
    ("DLAT", "DLAT", 6),
    ("BEHIND%", "BEHIND", 7),
];

/// Widths of the text columns on a wide terminal: pid, comm, cgroup, intent (the file takes
/// the rest); on a narrow one pid and comm.
fn text_widths(width: u16) -> (usize, usize, usize, usize) {
    let numbers: usize = NUMBER_COLUMNS.iter().map(|c| c.2 + 1).sum();
    if width >= WIDE {
        let rest = (width as usize).saturating_sub(numbers + 8 + 17 + 21);
        (7, 16, 20, (rest * 3 / 5).min(64))
    } else {
        let comm = (width as usize).saturating_sub(numbers + 8).clamp(4, 16);
        (7, comm, 0, 0)
    }
}

/// The header line of the rows, `width` wide; the sort column marked `*`.
pub fn header(width: u16, totals: bool, sort: SortBy) -> String {
    let mut s = String::new();
    for (i, (rate, sum, w)) in NUMBER_COLUMNS.iter().enumerate() {
        let mut t = (if totals { *sum } else { *rate }).to_string();
        if SortBy::ALL[i] == sort {
            t = format!("*{t}");
        }
        s.push_str(&format!("{t:>w$} "));
    }
    let pid = if sort == SortBy::Pid { "*PID" } else { "PID" };
    let comm = if sort == SortBy::Comm {
        "*COMM"
    } else {
        "COMM"
    };
    let (pw, cw, gw, iw) = text_widths(width);
    if width >= WIDE {
        s.push_str(&format!(
            "{pid:>pw$} {comm:<cw$} {:<gw$} {:<iw$} FILE",
            "CGROUP", "INTENT"
        ));
    } else {
        s.push_str(&format!("{pid:>pw$} {comm}"));
    }
    s
}

/// A row's lines, `width` wide: one on a wide terminal; else the numbers and the task on
/// the first, the file, the intent and the cgroup indented on the second.
pub fn row_lines(r: &TextRow, width: u16) -> Vec<String> {
    let mut s = String::new();
    for (i, (_, _, w)) in NUMBER_COLUMNS.iter().enumerate() {
        s.push_str(&format!("{:>w$} ", r.numbers[i]));
    }
    let (pw, cw, gw, iw) = text_widths(width);
    if width >= WIDE {
        s.push_str(&format!(
            "{:>pw$} {:<cw$} {:<gw$} {:<iw$} ",
            fit(&r.pid, pw),
            fit(&r.comm, cw),
            fit(&r.cgroup, gw),
            fit(&r.intent, iw)
        ));
        let rest = (width as usize).saturating_sub(s.chars().count());
        s.push_str(&fit_left(&r.file, rest));
        return vec![s];
    }
    s.push_str(&format!("{:>pw$} {}", fit(&r.pid, pw), fit(&r.comm, cw)));
    // The file's end (at most half the line), then the intent, then the cgroup.
    let w = width as usize;
    let mut second = String::from("  ");
    if r.file != "-" {
        second.push_str(&fit_left(&r.file, (w / 2).max(12)));
        second.push_str("  ");
    }
    second.push_str(&r.intent);
    if r.cgroup != "-" {
        second.push_str(&format!("  [{}]", r.cgroup));
    }
    vec![s, fit(&second, w)]
}

/// Cuts `s` to its last `w` characters (a path's end says the most), marking the cut.
fn fit_left(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n <= w {
        return s.to_string();
    }
    if w == 0 {
        return String::new();
    }
    let mut t = String::from("…");
    t.extend(s.chars().skip(n - (w - 1)));
    t
}

/// The summary line of an interval or of the run.
pub fn summary(s: &Stat, secs: f64, totals: bool) -> String {
    if totals {
        format!(
            "dirtied {}  written {}  read {}  IOs {}  device time {:.2}s",
            compact(s.dirtied as f64),
            compact(s.written as f64),
            compact(s.read as f64),
            s.ios,
            s.dev_us as f64 / 1e6
        )
    } else {
        format!(
            "dirtied {}/s  written {}/s  read {}/s  IOPS {:.0}",
            compact(s.dirtied as f64 / secs),
            compact(s.written as f64 / secs),
            compact(s.read as f64 / secs),
            s.ios as f64 / secs
        )
    }
}
