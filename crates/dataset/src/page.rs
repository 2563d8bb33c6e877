//! The fleet's HTML page (`ioblame fleet --report OUTDIR`): the per-host totals, the top
//! lists and a flame graph of the whole fleet merged (every trace's acts by intent key and
//! comm, weighted by bytes), drawn with the report's flame graph code. Self-contained: no
//! script, no network access, every string from the dataset escaped.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use ioblame_report::{flame_svg, html_escape, human_bytes};

use crate::atomic;
use crate::error::DatasetError;
use crate::fleet::{Fleet, Totals};

/// The files [`write`] produced.
#[derive(Debug, Clone)]
pub struct PageFiles {
    /// `fleet.html`.
    pub html: PathBuf,
    /// `fleet-bytes.svg`: the interactive flame graph (inferno's search and zoom).
    pub flame: PathBuf,
    /// `fleet-bytes.folded`: the folded stacks it is drawn from.
    pub folded: PathBuf,
}

fn bytes(n: i64) -> String {
    human_bytes(n.max(0) as u64)
}

fn totals_cells(t: &Totals) -> String {
    format!(
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
        bytes(t.bytes),
        bytes(t.read_bytes),
        bytes(t.readahead_bytes),
        bytes(t.write_bytes),
        t.ios
    )
}

const TOTALS_HEAD: &str = "<th>bytes</th><th>read</th><th>readahead</th><th>write</th><th>IOs</th>";

/// Writes a table's head row: the cells `before`, the totals' columns, then `after` (which
/// closes the row).
fn totals_head(h: &mut String, before: &str, after: &str) {
    h.push_str(before);
    h.push_str(TOTALS_HEAD);
    h.push_str(after);
}

/// A stack, innermost frame first, for a cell's title.
fn stack_title(frames: &[String], reason: Option<&str>) -> String {
    let mut out = frames.join(" ← ");
    if let Some(r) = reason {
        let _ = write!(out, " [wb:{r}]");
    }
    out
}

/// The page's HTML.
pub fn render(fleet: &Fleet, title: &str, flame_inline: &str) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse;\
         margin-bottom:1.5em}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}\
         td.l,th.l{{text-align:left}}.flame svg{{max-width:100%;height:auto}}</style></head>\
         <body><h1>{t}</h1><p>{n} traces from {h} hosts.</p>",
        t = html_escape(title),
        n = fleet.traces,
        h = fleet.hosts.len()
    );
    let _ = write!(
        h,
        "<h2>Flame graph of the fleet (bytes)</h2><p>The code path at the root, the comm on \
         top; <a href=\"fleet-bytes.svg\">interactive version</a>.</p>\
         <div class=\"flame\">{flame_inline}</div>"
    );
    totals_head(&mut h, "<h2>Hosts</h2><table><tr><th class=\"l\">host</th><th>traces</th><th>dates</th><th class=\"l\">kernels</th>", "</tr>");
    for x in &fleet.hosts {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{} – {}</td><td class=\"l\">{}</td>{}</tr>",
            html_escape(&x.host),
            x.traces,
            html_escape(&x.first_date),
            html_escape(&x.last_date),
            html_escape(&x.kernels.join(", ")),
            totals_cells(&x.totals)
        );
    }
    totals_head(&mut h, "</table><h2>Top intents</h2><table><tr><th class=\"l\">intent key</th><th class=\"l\">intent (its stack on hover)</th><th>hosts</th><th>traces</th>", "<th class=\"l\">where</th></tr>");
    for x in &fleet.top_intents {
        let hosts: Vec<String> = x
            .hosts
            .iter()
            .map(|(n, b)| format!("{} ({})", html_escape(n), bytes(*b)))
            .collect();
        let _ = write!(
            h,
            "<tr><td class=\"l\"><code>{:016x}</code></td><td class=\"l\" title=\"{}\">{}</td><td>{}</td><td>{}</td>{}<td class=\"l\">{}</td></tr>",
            x.intent_key as u64,
            html_escape(&stack_title(&x.frames, x.reason.as_deref())),
            html_escape(&x.name),
            x.n_hosts,
            x.n_traces,
            totals_cells(&x.totals),
            hosts.join(", ")
        );
    }
    totals_head(&mut h, "</table><h2>Top acts</h2><table><tr><th class=\"l\">comm</th><th class=\"l\">intent</th><th class=\"l\">file</th><th>hosts</th>", "</tr>");
    for x in &fleet.top_acts {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\" title=\"intent key {:016x}\">{}</td><td class=\"l\">{}</td><td>{}</td>{}</tr>",
            html_escape(&x.comm),
            x.intent_key as u64,
            html_escape(&x.intent_name),
            html_escape(x.path.as_deref().unwrap_or("")),
            x.n_hosts,
            totals_cells(&x.totals)
        );
    }
    for (name, head, rows) in [
        ("Top files", "path", &fleet.top_files),
        ("Top roles", "comm", &fleet.top_roles),
    ] {
        let _ = write!(
            h,
            "</table><h2>{name}</h2><table><tr><th class=\"l\">{head}</th><th>hosts</th>{TOTALS_HEAD}</tr>"
        );
        for x in rows {
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td>{}</td>{}</tr>",
                html_escape(x.name.as_deref().unwrap_or("(not named by the traces)")),
                x.n_hosts,
                totals_cells(&x.totals)
            );
        }
    }
    h.push_str("</table></body></html>\n");
    h
}

/// Writes `fleet.html`, `fleet-bytes.svg` and `fleet-bytes.folded` into `outdir` (created),
/// each atomically.
pub fn write(fleet: &Fleet, outdir: &Path, title: &str) -> Result<PageFiles, DatasetError> {
    std::fs::create_dir_all(outdir).map_err(|e| DatasetError::io(outdir, e))?;
    let files = PageFiles {
        html: outdir.join("fleet.html"),
        flame: outdir.join("fleet-bytes.svg"),
        folded: outdir.join("fleet-bytes.folded"),
    };
    let graph = |interactive| {
        flame_svg(
            &fleet.folded,
            "IO flame graph of the fleet: bytes charged",
            "bytes",
            interactive,
        )
        .map_err(|e| DatasetError::io(&files.flame, e))
    };
    let mut folded = fleet.folded.join("\n");
    folded.push('\n');
    atomic::write_file(&files.folded, folded.as_bytes())?;
    atomic::write_file(&files.flame, graph(true)?.as_bytes())?;
    let inline = graph(false)?;
    // The inline copy starts at `<svg`, without the XML prolog.
    let inline = inline
        .find("<svg")
        .map_or(inline.as_str(), |i| &inline[i..]);
    atomic::write_file(&files.html, render(fleet, title, inline).as_bytes())?;
    Ok(files)
}
