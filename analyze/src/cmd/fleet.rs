//! `ioblame fleet`: the fleet query over a dataset (`ioblame_dataset::fleet`), printed as
//! text or JSON, and the fleet's page.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use clap::Args;
use ioblame_counters::output::printable;
use ioblame_dataset::fleet::{self, Filter, Fleet, Totals};
use ioblame_report::human_bytes;

use super::at_least_one;
use crate::text::columns;

#[derive(Args, Debug)]
pub struct FleetArgs {
    /// The dataset's root directory.
    #[arg(value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    dataset: PathBuf,
    /// First capture date read (YYYY-MM-DD, UTC), inclusive.
    #[arg(long, value_name = "DATE")]
    since: Option<String>,
    /// Last capture date read (YYYY-MM-DD, UTC), inclusive.
    #[arg(long, value_name = "DATE")]
    until: Option<String>,
    /// Hosts read: a glob on the host name (e.g. 'db-*').
    #[arg(long, value_name = "GLOB")]
    host: Option<String>,
    /// Read only traces with this label KEY=VALUE. Repeatable (all must match).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    /// Rows in each top list (at least 1).
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = at_least_one())]
    top: usize,
    /// One JSON document instead of text (keys in docs/dataset.md).
    #[arg(long)]
    json: bool,
    /// Also write a page (fleet.html) with the fleet's merged flame graph into OUTDIR.
    #[arg(long, value_name = "OUTDIR", value_hint = clap::ValueHint::DirPath)]
    report: Option<PathBuf>,
}

/// `ioblame fleet`.
pub fn run(out: &mut impl Write, a: FleetArgs) -> Result<()> {
    let host = match &a.host {
        Some(g) => Some(ioblame_dataset::Pattern::new(g).with_context(|| format!("--host {g:?}"))?),
        None => None,
    };
    let opts = FleetOptions {
        filter: Filter {
            since: a.since,
            until: a.until,
            host,
            labels: a.labels,
        },
        top: a.top,
        json: a.json,
        report: a.report,
    };
    show(out, &a.dataset, &opts)
}

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
fn show(out: &mut impl Write, dataset: &Path, o: &FleetOptions) -> Result<()> {
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

/// The totals' cells: bytes, read, readahead, write, IOs.
fn tot(t: &Totals) -> [String; 5] {
    [
        b(t.bytes),
        b(t.read_bytes),
        b(t.readahead_bytes),
        b(t.write_bytes),
        t.ios.to_string(),
    ]
}

const TOT_HEAD: [&str; 5] = ["BYTES", "READ", "READAHEAD", "WRITE", "IOs"];

/// A table: `head` then the totals' columns (right-aligned) then `tail`; each row as
/// (its cells before the totals, the totals, its cells after).
fn table(
    out: &mut impl Write,
    head: &[&str],
    head_right: &[bool],
    tail: &[&str],
    rows: Vec<(Vec<String>, &Totals, Vec<String>)>,
) -> Result<()> {
    let mut h: Vec<&str> = head.to_vec();
    h.extend(TOT_HEAD);
    h.extend(tail);
    let mut right = head_right.to_vec();
    right.extend([true; 5]);
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|(mut a, t, z)| {
            a.extend(tot(t));
            a.extend(z);
            a
        })
        .collect();
    columns(out, &h, &right, &rows)?;
    Ok(())
}

/// The text output: per-host totals, then each top list; columns as wide as their widest
/// cell, trace text (hosts, comms, paths, frames) escaped.
fn text(out: &mut impl Write, f: &Fleet) -> Result<()> {
    let p = |s: &str| printable(s).into_owned();
    writeln!(out, "{} traces, {} hosts", f.traces, f.hosts.len())?;
    writeln!(out, "\nhosts")?;
    table(
        out,
        &["HOST", "TRACES"],
        &[false, true],
        &["DATES"],
        f.hosts
            .iter()
            .map(|h| {
                (
                    vec![p(&h.host), h.traces.to_string()],
                    &h.totals,
                    vec![format!("{}..{}", p(&h.first_date), p(&h.last_date))],
                )
            })
            .collect(),
    )?;
    writeln!(out, "\ntop intents")?;
    table(
        out,
        &["INTENT KEY", "HOSTS"],
        &[false, true],
        &["INTENT NAME / HOSTS"],
        f.top_intents
            .iter()
            .map(|i| {
                let hosts: Vec<String> = i
                    .hosts
                    .iter()
                    .map(|(h, n)| format!("{} {}", p(h), b(*n)))
                    .collect();
                (
                    vec![
                        format!("{:016x}", i.intent_key as u64),
                        i.n_hosts.to_string(),
                    ],
                    &i.totals,
                    vec![format!("{}  (on {})", p(&i.name), hosts.join(", "))],
                )
            })
            .collect(),
    )?;
    writeln!(out, "\ntop acts")?;
    table(
        out,
        &["COMM", "HOSTS"],
        &[false, true],
        &["FILE", "INTENT NAME"],
        f.top_acts
            .iter()
            .map(|a| {
                (
                    vec![p(&a.comm), a.n_hosts.to_string()],
                    &a.totals,
                    vec![p(a.path.as_deref().unwrap_or("-")), p(&a.intent_name)],
                )
            })
            .collect(),
    )?;
    for (title, head, rows) in [
        ("top files", "PATH", &f.top_files),
        ("top roles", "COMM", &f.top_roles),
    ] {
        writeln!(out, "\n{title}")?;
        table(
            out,
            &["HOSTS"],
            &[true],
            &[head],
            rows.iter()
                .map(|r| {
                    (
                        vec![r.n_hosts.to_string()],
                        &r.totals,
                        vec![p(r.name.as_deref().unwrap_or("(not named by the traces)"))],
                    )
                })
                .collect(),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioblame_dataset::fleet::{HostTotals, TopAct};

    /// Columns stay aligned whatever the lengths of hosts and comms, and trace text is
    /// escaped.
    #[test]
    fn text_is_aligned_and_escaped() {
        let t = Totals {
            bytes: 4096,
            write_bytes: 4096,
            ios: 1,
            ..Totals::default()
        };
        let host = |h: &str| HostTotals {
            host: h.to_string(),
            traces: 1,
            first_date: "2026-11-01".into(),
            last_date: "2026-11-02".into(),
            kernels: vec![],
            totals: t,
        };
        let act = |c: &str| TopAct {
            comm: c.to_string(),
            intent_key: 1,
            intent_name: "write(2) › ext4_buffered_write_iter".into(),
            path: Some("/data/f".into()),
            n_hosts: 1,
            totals: t,
        };
        let f = Fleet {
            traces: 2,
            hosts: vec![host("a"), host("a-very-long-host-name.prod.example.com")],
            top_acts: vec![act("kw\x1b[31mRED"), act("a-comm-longer-than-sixteen")],
            ..Fleet::default()
        };
        let mut out = Vec::new();
        text(&mut out, &f).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(!s.contains('\x1b'), "{s}");
        assert!(s.contains("kw\\x1b[31mRED"), "{s}");
        for head in ["HOST ", "COMM "] {
            let block: Vec<&str> = s
                .lines()
                .skip_while(|l| !l.starts_with(head))
                .take_while(|l| !l.is_empty())
                .collect();
            assert_eq!(block.len(), 3, "{s}");
            // The end of the BYTES column is at the same place on every line.
            let end = block[0].find("BYTES").unwrap() + "BYTES".len();
            for l in &block[1..] {
                let cut: String = l.chars().take(end).collect();
                assert!(
                    cut.ends_with("4.00 KiB"),
                    "misaligned:\n{}",
                    block.join("\n")
                );
            }
        }
    }
}
