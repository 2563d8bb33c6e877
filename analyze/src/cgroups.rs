//! Cgroups in the analyzer's outputs: the trace's id -> path table, the `cgroup` key of
//! `acts --json`, and `acts --by cgroup` (bytes and IOs per cgroup).

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use ioblame_attrib::{Act, Tables};
use ioblame_counters::output::printable;
use ioblame_format::Trace;
use ioblame_report::human_bytes;

/// The trace's cgroups by id; `None` for traces that recorded none (their outputs have no
/// cgroup key, as before cgroups were recorded).
pub struct CgroupNames(HashMap<u64, String>);

impl CgroupNames {
    /// The table of `trace`, if it recorded one.
    pub fn of(trace: &Trace) -> Option<CgroupNames> {
        let t = trace.cgroups();
        (!t.is_empty()).then(|| CgroupNames(t.into_iter().map(|c| (c.id, c.path)).collect()))
    }

    /// The path of cgroup `id`; `None` when not recorded (0) or not in the table (a cgroup
    /// created and removed while recording).
    pub fn path(&self, id: u64) -> Option<&str> {
        self.0.get(&id).map(String::as_str)
    }

    /// The cgroup of `act`'s role: the task that dirtied the pages or issued the IO.
    pub fn of_act<'a>(&'a self, act: &Act, tables: &Tables) -> Option<&'a str> {
        tables.role(act.role).and_then(|r| self.path(r.cgroup))
    }
}

/// `acts --by cgroup`: bytes and IOs per cgroup (of the task charged), most bytes first;
/// acts with no known cgroup (the lost intent, tasks seen only outside the stack events) as
/// `-`. With `json`, one object per line: `cgroup`, `read_bytes`, `read_ios`,
/// `readahead_bytes`, `readahead_ios`, `write_bytes`, `write_ios`, `acts`.
pub fn by_cgroup(
    out: &mut impl Write,
    tables: &Tables,
    names: Option<&CgroupNames>,
    show_recorder: bool,
    json: bool,
) -> io::Result<()> {
    #[derive(Default)]
    struct Row {
        bytes: [u64; 3],
        ios: [u64; 3],
        acts: u64,
    }
    let mut rows: BTreeMap<Option<&str>, Row> = BTreeMap::new();
    for (_, a, t) in tables.acts_with_totals() {
        if (a.recorder && !show_recorder) || t.total_ios() == 0 {
            continue;
        }
        let key = names.and_then(|n| n.of_act(a, tables));
        let r = rows.entry(key).or_default();
        for d in 0..3 {
            r.bytes[d] += t.bytes[d];
            r.ios[d] += t.ios[d];
        }
        r.acts += 1;
    }
    let mut rows: Vec<(Option<&str>, Row)> = rows.into_iter().collect();
    rows.sort_by_key(|(k, r)| (std::cmp::Reverse(r.bytes.iter().sum::<u64>()), *k));
    if json {
        for (k, r) in rows {
            let v = serde_json::json!({
                "cgroup": k,
                "read_bytes": r.bytes[0] + r.bytes[1],
                "read_ios": r.ios[0] + r.ios[1],
                "readahead_bytes": r.bytes[1],
                "readahead_ios": r.ios[1],
                "write_bytes": r.bytes[2],
                "write_ios": r.ios[2],
                "acts": r.acts,
            });
            writeln!(out, "{v}")?;
        }
        return Ok(());
    }
    let w = rows
        .iter()
        .map(|(k, _)| k.map_or(1, |p| printable(p).chars().count()))
        .fold(6, usize::max)
        .min(80);
    writeln!(
        out,
        "{:<w$} {:>12} {:>7} {:>12} {:>7} {:>5}",
        "CGROUP", "READ", "R_IOS", "WRITE", "W_IOS", "ACTS"
    )?;
    for (k, r) in rows {
        writeln!(
            out,
            "{:<w$} {:>12} {:>7} {:>12} {:>7} {:>5}",
            k.map_or("-".into(), printable),
            human_bytes(r.bytes[0] + r.bytes[1]),
            r.ios[0] + r.ios[1],
            human_bytes(r.bytes[2]),
            r.ios[2],
            r.acts
        )?;
    }
    Ok(())
}
