//! The self-contained HTML page: inline CSS, SVG charts and flame graphs, a PNG as a data
//! URI, and a small inline script that sorts tables. Everything from the trace is escaped.

use std::fmt::Write as _;

use ioblame_attrib::{ActId, IntentId, Symbolizer, Tables};

use crate::summary_text::intent_frames;
use crate::util::{act_comm, dev_str, html_escape as esc, human_bytes, human_us, modifier_reason};

const CSS: &str = "body{font-family:'DejaVu Sans',Arial,sans-serif;margin:1.5em;color:#222;max-width:1900px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}
pre{background:#f6f6f6;padding:.8em;overflow-x:auto;font-size:.85em}
table{border-collapse:collapse;font-size:.8em;margin:.5em 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
td.n,td.f{text-align:right;white-space:nowrap}td.f{text-align:left}
.scroll{max-height:34em;overflow:auto;border:1px solid #ddd;margin:.5em 0}.scroll table{margin:0}
.scroll thead th{position:sticky;top:0;z-index:1}
th{background:#eee;cursor:pointer;user-select:none}th[data-dir=asc]::after{content:' \\25B2'}th[data-dir=desc]::after{content:' \\25BC'}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(900px,1fr));gap:10px}
.chart h3{font-size:.95em;margin:.4em 0}.chart svg text{font-family:'DejaVu Sans',Arial,sans-serif}.chart svg,.chart img{max-width:100%;height:auto;border:1px solid #eee}
.flame svg{width:100%;height:auto}.note{color:#666;font-size:.85em}";

const JS: &str = "(function(){
document.querySelectorAll('table.sortable').forEach(function(tb){
 var hs=tb.querySelectorAll('th');
 hs.forEach(function(th,i){th.addEventListener('click',function(){
  var body=tb.tBodies[0],rows=Array.prototype.slice.call(body.rows);
  var asc=th.getAttribute('data-dir')!=='asc';
  hs.forEach(function(h){h.removeAttribute('data-dir');});
  th.setAttribute('data-dir',asc?'asc':'desc');
  rows.sort(function(a,b){
   var x=a.cells[i].getAttribute('data-v'),y=b.cells[i].getAttribute('data-v'),r;
   if(x!==null&&y!==null){r=Number(x)-Number(y);}else{r=a.cells[i].textContent.localeCompare(b.cells[i].textContent);}
   return asc?r:-r;});
  rows.forEach(function(r){body.appendChild(r);});
 });});
});
})();";

/// The parts of the page, already rendered.
pub(crate) struct Page<'a> {
    pub title: String,
    pub facts: Vec<(String, String)>,
    pub summary: &'a str,
    /// (title, inline SVG or `<img>` markup) of the overview charts.
    pub charts: Vec<(String, String)>,
    /// The same for the counters' histograms.
    pub counter_charts: Vec<(String, String)>,
    /// (title, inline SVG, file name of the interactive version).
    pub flames: Vec<(String, String, String)>,
    /// (title, file name) of the other files.
    pub files: Vec<String>,
}

/// An SVG document without its XML prolog and doctype, for inlining.
pub(crate) fn inline_svg(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

fn num(out: &mut String, v: u64, text: &str) {
    let _ = write!(out, "<td class=n data-v=\"{v}\">{}</td>", esc(text));
}

fn txt(out: &mut String, text: &str) {
    let _ = write!(out, "<td>{}</td>", esc(text));
}

/// A text cell that does not wrap (short identifiers such as a file's `dev ino`).
fn txt_nowrap(out: &mut String, text: &str) {
    let _ = write!(out, "<td class=f>{}</td>", esc(text));
}

/// The acts table (the given acts, in order).
pub(crate) fn acts_table(
    t: &Tables,
    acts: &[ActId],
    io_us: &[u64],
    paths: &std::collections::BTreeMap<ioblame_attrib::FileKey, String>,
    sym: &dyn Symbolizer,
) -> String {
    let mut o = String::from(
        "<div class=scroll><table class=sortable id=acts><thead><tr><th>act</th><th>comm</th><th>pid</th>\
<th>intent</th><th>via</th><th>file</th><th>read</th><th>readahead</th><th>write</th>\
<th>IOs</th><th>device time</th><th>frames (innermost first)</th></tr></thead><tbody>\n",
    );
    for &id in acts {
        let (Some(a), Some(tot)) = (t.act(id), t.totals.get(id.index())) else {
            continue;
        };
        o.push_str("<tr>");
        num(&mut o, id.0.into(), &id.to_string());
        txt(&mut o, &act_comm(t, id));
        // The task's own pid (its thread id, as ioblame's `pid-N`), and its process when the
        // task is not the main thread.
        let role = t.role(a.role);
        let tid = role.map_or(0, |r| r.tid);
        let text = match role {
            Some(r) if r.pid != r.tid => format!("{tid} (tgid {})", r.pid),
            _ => tid.to_string(),
        };
        num(&mut o, tid.into(), &text);
        num(&mut o, a.intent.0.into(), &format!("#{}", a.intent));
        txt(
            &mut o,
            &format!(
                "{}{}",
                a.via.name(),
                if a.recorder { " (recorder)" } else { "" }
            ),
        );
        match paths.get(&a.file) {
            Some(p) => txt(
                &mut o,
                &format!("{p} ({} ino {})", dev_str(a.file.dev), a.file.ino),
            ),
            None => txt_nowrap(
                &mut o,
                &format!("{} ino {}", dev_str(a.file.dev), a.file.ino),
            ),
        }
        for d in 0..3 {
            num(&mut o, tot.bytes[d], &human_bytes(tot.bytes[d]));
        }
        num(&mut o, tot.total_ios(), &tot.total_ios().to_string());
        let us = io_us.get(id.index()).copied().unwrap_or(0);
        num(&mut o, us, &human_us(us));
        txt(&mut o, &intent_frames(t, sym, a.intent, 6));
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n");
    o
}

/// The intents table: intents with IO, most bytes first, at most `max`.
pub(crate) fn intents_table(t: &Tables, sym: &dyn Symbolizer, max: usize) -> String {
    let mut per: Vec<(IntentId, u64, u64, u64)> =
        t.intents_with_ids().map(|(i, _)| (i, 0, 0, 0)).collect();
    for (_, a, tot) in t.acts_with_totals() {
        if let Some(e) = per.get_mut(a.intent.index()) {
            e.1 += tot.total_bytes();
            e.2 += tot.total_ios();
            e.3 += 1;
        }
    }
    per.retain(|e| e.2 > 0);
    per.sort_by_key(|e| (std::cmp::Reverse(e.1), e.0));
    let mut o = String::from(
        "<div class=scroll><table class=sortable id=intents><thead><tr><th>intent</th><th>reason</th>\
<th>bytes</th><th>IOs</th><th>acts</th><th>frames (innermost first)</th></tr></thead><tbody>\n",
    );
    for (id, bytes, ios, acts) in per.into_iter().take(max) {
        let m = t.intent(id).map_or(0, |i| i.modifier);
        o.push_str("<tr>");
        num(&mut o, id.0.into(), &format!("#{id}"));
        txt(&mut o, modifier_reason(m).map_or("-", |r| r.name()));
        num(&mut o, bytes, &human_bytes(bytes));
        num(&mut o, ios, &ios.to_string());
        num(&mut o, acts, &acts.to_string());
        txt(&mut o, &intent_frames(t, sym, id, 12));
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n");
    o
}

/// The whole page.
pub(crate) fn page(p: &Page<'_>, acts_table: &str, intents_table: &str) -> String {
    let mut o = String::with_capacity(1 << 20);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>\
<meta name=viewport content=\"width=device-width\"><title>{}</title><style>{CSS}</style></head><body>\n<h1>{}</h1>\n",
        esc(&p.title),
        esc(&p.title)
    );
    if !p.facts.is_empty() {
        o.push_str("<table id=facts><tbody>\n");
        for (k, v) in &p.facts {
            let _ = writeln!(o, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
        }
        o.push_str("</tbody></table>\n");
    }
    let _ = writeln!(
        o,
        "<h2>Summary</h2>\n<pre id=summary>{}</pre>",
        esc(p.summary)
    );
    o.push_str("<h2>Top acts</h2>\n<p class=note>Click a column header to sort.</p>\n");
    o.push_str(acts_table);
    o.push_str("<h2>Top intents</h2>\n");
    o.push_str(intents_table);
    o.push_str(
        "<h2>IO flame graphs</h2>\n<p class=note>Each tower is an intent's kernel stack, \
outermost frame at the bottom, then the writeback reason where there is one, and on top the \
role (comm) that took that path: the widest tower is the code path that caused the most IO, \
split at the top by the roles that caused it.</p>\n",
    );
    for (title, svg, file) in &p.flames {
        let _ = writeln!(
            o,
            "<h3>{}</h3>\n<p class=note>Interactive version (search, zoom): <a href=\"{}\">{}</a></p>\n<div class=flame>{}</div>",
            esc(title),
            esc(file),
            esc(file),
            inline_svg(svg)
        );
    }
    for (h, charts) in [("Charts", &p.charts), ("Counters", &p.counter_charts)] {
        let _ = writeln!(o, "<h2>{h}</h2>\n<div class=charts>");
        for (title, markup) in charts {
            let _ = writeln!(
                o,
                "<div class=chart><h3>{}</h3>{}</div>",
                esc(title),
                markup
            );
        }
        o.push_str("</div>\n");
    }
    o.push_str("<h2>Files</h2>\n<ul>\n");
    for f in &p.files {
        let _ = writeln!(o, "<li><a href=\"{}\">{}</a></li>", esc(f), esc(f));
    }
    let _ = write!(o, "</ul>\n<script>{JS}</script>\n</body></html>\n");
    o
}

/// Standard base64 of `data` (for the PNG data URI).
pub(crate) fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let b = [
            c[0],
            c.get(1).copied().unwrap_or(0),
            c.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        o.push(A[(n >> 18) as usize & 63] as char);
        o.push(A[(n >> 12) as usize & 63] as char);
        o.push(if c.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        o.push(if c.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b64() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn svg_prolog_removed() {
        assert_eq!(
            inline_svg("<?xml version=\"1.0\"?><!DOCTYPE svg><svg a>"),
            "<svg a>"
        );
    }
}
