//! `ioblame info` on a blktrace recording: its files, records per action and version,
//! devices (with their levels), tasks, the wall clock of the start, messages and cgroups.

use std::io::Write;

use ioblame_blktrace::{Action, Kind, Recording};

/// Writes the `info` report of a blktrace recording.
pub fn print(out: &mut impl Write, rec: &Recording) -> std::io::Result<()> {
    let s = rec.scan();
    writeln!(out, "blktrace recording")?;
    let files: Vec<_> = rec.files().collect();
    writeln!(out, "  files            {}", files.len())?;
    for (p, k) in files {
        let kind = match k {
            Kind::Binary => "blktrace records",
            Kind::Text => "blkparse text",
        };
        writeln!(out, "    {} ({kind})", p.display())?;
    }
    writeln!(
        out,
        "  records          {} (version 7: {}, version 8: {})",
        s.records, s.versions[0], s.versions[1]
    )?;
    writeln!(out, "  cpus             {}", s.cpus)?;
    let span = s.span.1.saturating_sub(s.span.0);
    writeln!(out, "  span             {:.6} s", span as f64 / 1e9)?;
    match s.wall_clock {
        Some((wall, at)) => {
            // The wall clock of the first record.
            let start = wall.saturating_sub(at.saturating_sub(s.span.0));
            writeln!(
                out,
                "  started          {}.{:09} s since the epoch (timestamp notify)",
                start / 1_000_000_000,
                start % 1_000_000_000
            )?
        }
        None => writeln!(out, "  started          unknown (no timestamp notify)")?,
    }
    writeln!(out, "actions")?;
    for a in Action::ALL {
        let n = s.by_action[a.index()];
        if n > 0 {
            writeln!(out, "  {:<10} {n}", a.letters())?;
        }
    }
    if s.by_action[23] > 0 {
        writeln!(out, "  {:<10} {}", "unknown", s.by_action[23])?;
    }
    writeln!(out, "devices            {}", s.devices.len())?;
    for d in &s.devices {
        let mut what = Vec::new();
        if d.upper {
            what.push("stacked: remapped to a lower device".to_string());
        }
        if let Some((disk, start)) = d.partition_of {
            what.push(format!(
                "partition of {}:{} at sector {start}",
                disk >> 20,
                disk & 0xfffff
            ));
        }
        writeln!(
            out,
            "  {:<12} {}:{}  {} records, {} Q, {} D, {} C{}{}",
            d.name,
            d.dev >> 20,
            d.dev & 0xfffff,
            d.records,
            d.queued,
            d.issued,
            d.completed,
            if what.is_empty() { "" } else { "; " },
            what.join(", ")
        )?;
    }
    writeln!(
        out,
        "tasks              {} named by process notifies, {} issuers unnamed (shown as `pid N`)",
        s.tasks.len(),
        s.unnamed.len()
    )?;
    for (pid, comm) in &s.tasks {
        writeln!(out, "  {pid:>7} {comm}")?;
    }
    writeln!(
        out,
        "cgroups            {} records carry a cgroup id ({} distinct)",
        s.cgroup_records,
        s.cgroups.len()
    )?;
    writeln!(out, "messages           {}", s.message_count)?;
    for (t, dev, text) in &s.messages {
        writeln!(
            out,
            "  {:.6} {}:{} {text}",
            t.saturating_sub(s.span.0) as f64 / 1e9,
            dev >> 20,
            dev & 0xfffff
        )?;
    }
    writeln!(out, "problems           {}", s.problems.len())?;
    for p in &s.problems {
        writeln!(out, "  {p}")?;
    }
    Ok(())
}
