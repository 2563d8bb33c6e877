//! `ioblame fleet`: the fleet query over a dataset (`ioblame_dataset::fleet`), printed as
//! text or JSON, and the fleet's page.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use ioblame_dataset::fleet::{self, Filter, Fleet, Totals};
use ioblame_report::human_bytes;

/// What `ioblame fleet` was asked.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// The traces read.
    pub filter: Filter,
    /// Rows of each top list.
    pub top: usize,
    /// One JSON document instead of text.
    pub json: bool,
    /// Write the page into this directory.
    pub report: Option<PathBuf>,
}

/// Runs the query and prints it; writes the page when asked.
pub fn run(out: &mut impl Write, dataset: &Path, o: &FleetOptions) -> Result<()> {
    let f = fleet::query(dataset, &o.filter, o.top)
        .with_context(|| format!("dataset {}", dataset.display()))?;
    if o.json {
        serde_json::to_writer_pretty(&mut *out, &f)?;
        writeln!(out)?;
    } else {
        text(out, &f)?;
    }
    if let Some(dir) = &o.report {
        let title = format!("ioblame fleet: {}", dataset.display());
        let files = ioblame_dataset::page::write(&f, dir, &title)
            .with_context(|| format!("writing the fleet page into {}", dir.display()))?;
        eprintln!("ioblame: open {} in a browser", files.html.display());
    }
    Ok(())
}

fn b(n: i64) -> String {
    human_bytes(n.max(0) as u64)
}

fn tot(t: &Totals) -> String {
    format!(
        "{:>10} {:>10} {:>10} {:>10} {:>8}",
        b(t.bytes),
        b(t.read_bytes),
        b(t.readahead_bytes),
        b(t.write_bytes),
        t.ios
    )
}

const TOT_HEAD: &str = "     bytes       read  readahead      write      IOs";

/// The text output: per-host totals, then each top list.
fn text(out: &mut impl Write, f: &Fleet) -> Result<()> {
    writeln!(out, "{} traces, {} hosts", f.traces, f.hosts.len())?;
    writeln!(
        out,
        "\nhosts\n{:<20} {:>6} {TOT_HEAD}  dates",
        "host", "traces"
    )?;
    for h in &f.hosts {
        writeln!(
            out,
            "{:<20} {:>6} {}  {}..{}",
            h.host,
            h.traces,
            tot(&h.totals),
            h.first_date,
            h.last_date
        )?;
    }
    writeln!(
        out,
        "\ntop intents\n{:<16} {:>5} {TOT_HEAD}  stack / hosts",
        "intent key", "hosts"
    )?;
    for i in &f.top_intents {
        let mut stack: Vec<&str> = i.frames.iter().take(3).map(|s| s.as_str()).collect();
        if i.frames.len() > 3 {
            stack.push("...");
        }
        let wb = i
            .reason
            .as_deref()
            .map(|r| format!(" [wb:{r}]"))
            .unwrap_or_default();
        writeln!(
            out,
            "{:016x} {:>5} {}  {}{wb}",
            i.intent_key as u64,
            i.n_hosts,
            tot(&i.totals),
            stack.join(" <- ")
        )?;
        let hosts: Vec<String> = i
            .hosts
            .iter()
            .map(|(h, n)| format!("{h} {}", b(*n)))
            .collect();
        writeln!(out, "{:>16}   on {}", "", hosts.join(", "))?;
    }
    writeln!(
        out,
        "\ntop acts\n{:<16} {:<16} {:>5} {TOT_HEAD}  file",
        "comm", "intent key", "hosts"
    )?;
    for a in &f.top_acts {
        writeln!(
            out,
            "{:<16} {:016x} {:>5} {}  {}",
            a.comm,
            a.intent_key as u64,
            a.n_hosts,
            tot(&a.totals),
            a.path.as_deref().unwrap_or("-")
        )?;
    }
    for (title, rows) in [("top files", &f.top_files), ("top roles", &f.top_roles)] {
        writeln!(out, "\n{title}\n{:>5} {TOT_HEAD}  name", "hosts")?;
        for r in rows {
            writeln!(
                out,
                "{:>5} {}  {}",
                r.n_hosts,
                tot(&r.totals),
                r.name.as_deref().unwrap_or("(not named by the traces)")
            )?;
        }
    }
    Ok(())
}
