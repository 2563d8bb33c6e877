//! `acts --by cgroup`: bytes and IOs per cgroup (the names come from
//! [`ioblame_attrib::CgroupNames`], as for every output).

use std::io::{self, Write};

use ioblame_attrib::{per_cgroup, CgroupNames, Tables};
use ioblame_counters::output::printable;
use ioblame_report::human_bytes;

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
    let rows = per_cgroup(tables, names, show_recorder);
    if json {
        for r in rows {
            let mut v = serde_json::json!({
                "cgroup": r.cgroup,
                "acts": r.acts,
            });
            crate::text::add_totals_json(&mut v, &r.totals);
            writeln!(out, "{v}")?;
        }
        return Ok(());
    }
    let w = rows
        .iter()
        .map(|r| r.cgroup.map_or(1, |p| printable(p).chars().count()))
        .fold(6, usize::max)
        .min(80);
    writeln!(
        out,
        "{:<w$} {:>12} {:>7} {:>12} {:>7} {:>5}",
        "CGROUP", "READ", "R_IOS", "WRITE", "W_IOS", "ACTS"
    )?;
    for r in rows {
        let t = &r.totals;
        writeln!(
            out,
            "{:<w$} {:>12} {:>7} {:>12} {:>7} {:>5}",
            r.cgroup.map_or("-".into(), printable),
            human_bytes(t.bytes[0] + t.bytes[1]),
            t.ios[0] + t.ios[1],
            human_bytes(t.bytes[2]),
            t.ios[2],
            r.acts
        )?;
    }
    Ok(())
}
