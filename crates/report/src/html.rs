//! The self-contained HTML page: inline CSS, SVG charts and flame graphs, a PNG as a data
//! URI, the data of the linked views as inline JSON, and a small inline script (sorting,
//! filtering, the detail of the chosen act or intent). Everything from the trace is escaped.
//!
//! The page is a list of [`Section`]s, each with its own `<h2>` and a link in the page's
//! navigation; `write::sections` decides their order. A new part of the report is one more
//! `Section`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ioblame_attrib::{ActId, FileKey, IntentId, RoleId, Tables};

use crate::util::{act_comm, dev_str, html_escape as esc, human_bytes, human_us, modifier_reason};

const CSS: &str = "*{box-sizing:border-box}
body{font-family:'DejaVu Sans',Arial,sans-serif;margin:0;color:#222;background:#fafafa;font-size:15px}
main{max-width:1400px;margin:0 auto;padding:0 16px 32px}
header{background:#243447;color:#fff;padding:10px 16px}header h1{font-size:1.3em;margin:0 0 4px}
header dl{display:flex;flex-wrap:wrap;gap:2px 18px;margin:0;font-size:.8em;color:#cfd8e3}header dt{display:inline;font-weight:bold}header dd{display:inline;margin:0 0 0 4px;overflow-wrap:anywhere}
nav{position:sticky;top:0;z-index:5;background:#fff;border-bottom:1px solid #ddd;padding:6px 16px;white-space:nowrap;overflow-x:auto}
nav a{margin-right:14px;color:#245;text-decoration:none;font-size:.9em}nav a:hover{text-decoration:underline}
section{margin-top:18px;background:#fff;border:1px solid #e2e2e2;border-radius:6px;padding:10px 14px}
h2{font-size:1.15em;margin:0 0 8px}h3{font-size:.95em;margin:10px 0 6px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:10px}
.card{border:1px solid #e4e4e4;border-radius:6px;padding:8px 10px;background:#fcfcfc}.card .k{font-size:.8em;color:#666}
.card .v{font-size:1.45em;font-weight:bold;margin:2px 0}.card .s{font-size:.8em;color:#666}.card.warn{border-color:#e0a400;background:#fff8e1}
.two{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:16px}
.bar{display:grid;grid-template-columns:minmax(0,14em) 1fr auto;gap:8px;align-items:center;font-size:.85em;margin:3px 0}
.bar .l{display:flex;min-width:0;white-space:nowrap}.bar .l .c{overflow:hidden;text-overflow:ellipsis;min-width:0}.bar .l .p{flex:none;white-space:pre;color:#555}.bar .t{background:#eef1f4;height:14px;border-radius:3px}
.bar .t span{display:block;height:14px;border-radius:3px;background:#3b78c2}.bar.r .t span{background:#2f9e6e}.bar .n{text-align:right;white-space:nowrap}
table{border-collapse:collapse;font-size:.82em;width:100%}
th,td{border-bottom:1px solid #eee;padding:3px 6px;text-align:left;vertical-align:top}
td.n{text-align:right;white-space:nowrap}td.f{white-space:nowrap}td.p{overflow-wrap:break-word;min-width:14em}
.scroll{max-height:32em;overflow:auto;border:1px solid #ddd;border-radius:4px}
.scroll thead th{position:sticky;top:0;z-index:1}
th{background:#eef1f4;cursor:pointer;user-select:none;white-space:nowrap}th[data-dir=asc]::after{content:' \\25B2'}th[data-dir=desc]::after{content:' \\25BC'}
tbody tr{cursor:pointer}tbody tr:hover{background:#f3f7fc}tbody tr.sel{background:#dfeafa}
.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin-bottom:8px}
.filters input{flex:1 1 16em;padding:5px 8px;font-size:1em}.filters select{padding:5px;font-size:1em}
.explore>div{min-width:0}
#detail{border:1px solid #ddd;border-radius:4px;padding:8px 10px;font-size:.85em;min-height:6em;overflow-wrap:anywhere;display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,420px),1fr));gap:6px 18px}
#detail>*{min-width:0}
#detail ol{padding-left:2.2em;margin:4px 0;font-family:'DejaVu Sans Mono',monospace;font-size:.92em}#detail svg{width:100%;height:auto}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,560px),1fr));gap:10px}.charts>*{min-width:0}
pre.latency{overflow:auto;max-width:100%;font-size:.8em;background:#fcfcfc;border:1px solid #eee;border-radius:4px;padding:6px 8px}
.chart svg,.chart img,.wide svg,.wide img{max-width:100%;height:auto;border:1px solid #eee}.chart svg text{font-family:'DejaVu Sans',Arial,sans-serif}
.flame svg{width:100%;height:auto}.note{color:#666;font-size:.85em}.name{font-weight:bold}
@media (max-width:900px){main{padding:0 8px 24px}section{padding:8px}}
@media (max-width:520px){body{font-size:14px}.bar{grid-template-columns:minmax(0,11em) 1fr auto}.card .v{font-size:1.2em}
.chart,.wide,.flame{overflow-x:auto}.chart svg,.chart img,.wide svg,.wide img{max-width:none;width:680px}.flame svg{width:760px}}";

const JS: &str = "(function(){
var D=JSON.parse(document.getElementById('ioblame-data').textContent);
var NS='http://www.w3.org/2000/svg';
function el(t,a,txt){var e=document.createElement(t);for(var k in a){e.setAttribute(k,a[k]);}if(txt!==undefined){e.textContent=txt;}return e;}
function sv(t,a){var e=document.createElementNS(NS,t);for(var k in a){e.setAttribute(k,a[k]);}return e;}
function bytes(b){var u=['B','KiB','MiB','GiB','TiB'],i=0;while(b>=1024&&i<u.length-1){b/=1024;i++;}return i?b.toFixed(2)+' '+u[i]:b+' B';}
function us(v){return v<1000?v+' \\u00b5s':v<1e6?(v/1e3).toFixed(2)+' ms':(v/1e6).toFixed(2)+' s';}
/* A bar chart of n values: labels under the first, middle and last bar. */
function bars(vals,lab,color,title){
 var w=600,h=150,b=22,n=vals.length,m=Math.max.apply(null,vals.concat([1]));
 var s=sv('svg',{viewBox:'0 0 '+w+' '+(h+b+4),role:'img'});var tt=sv('title',{});tt.textContent=title;s.appendChild(tt);
 var bw=w/n;
 vals.forEach(function(v,i){var bh=v/m*(h-14);var r=sv('rect',{x:i*bw+1,y:h-bh,width:Math.max(bw-2,1),height:bh,fill:color});var t=sv('title',{});t.textContent=lab[i]+': '+v;r.appendChild(t);s.appendChild(r);});
 s.appendChild(sv('line',{x1:0,y1:h,x2:w,y2:h,stroke:'#999'}));
 [0,Math.floor((n-1)/2),n-1].forEach(function(i,k){var t=sv('text',{x:Math.min(Math.max(i*bw+bw/2,30),w-30),y:h+16,'font-size':13,'text-anchor':'middle',fill:'#444'});t.textContent=lab[i];s.appendChild(t);});
 var t=sv('text',{x:4,y:12,'font-size':12,fill:'#444'});t.textContent='max '+title.split(':')[0]+' '+(title.indexOf('bytes')>=0?bytes(m):m);s.appendChild(t);
 return s;}
function stack(div,i){var it=D.intents[i];if(!it){return;}
 div.appendChild(el('h3',{},'Stack of intent #'+i+' (innermost first)'));var ol=el('ol',{});
 it.frames.forEach(function(f){ol.appendChild(el('li',{},f));});if(!it.frames.length){ol.appendChild(el('li',{},'(no stack)'));}div.appendChild(ol);}
function files(div,i,title){var it=D.intents[i];if(!it){return;}div.appendChild(el('h3',{},title));var ul=el('ul',{});
 it.files.forEach(function(f){ul.appendChild(el('li',{},f[0]+' \\u2014 '+bytes(f[1])));});div.appendChild(ul);}
function panes(){var d=document.getElementById('detail');d.textContent='';var l=el('div',{}),r=el('div',{});d.appendChild(l);d.appendChild(r);return [l,r];}
function showAct(id,row){var a=D.acts[id];if(!a){return;}var p=panes(),d=p[1];
 p[0].appendChild(el('h3',{},'Act '+id+': '+a.who));p[0].appendChild(el('p',{class:'name'},'#'+a.i+' '+(D.intents[a.i]?D.intents[a.i].name:'')));
 p[0].appendChild(el('p',{},'file: '+a.file+' \\u2014 via '+a.via+' \\u2014 '+bytes(a.bytes)+' in '+a.ios+' IOs'));
 var lat=[],ll=[];for(var k=0;k<D.lat_buckets;k++){lat.push(0);ll.push(k?'<'+us(Math.pow(2,k)):'0');}
 a.lat.forEach(function(p){lat[p[0]]=p[1];});var lo=0,hi=lat.length-1;while(lo<hi&&!lat[lo]){lo++;}while(hi>lo&&!lat[hi]){hi--;}
 d.appendChild(el('h3',{},'Device time of its IOs'));d.appendChild(bars(lat.slice(lo,hi+1),ll.slice(lo,hi+1),'#8a5cc2','IOs: device time, log2 buckets'));
 var n=Math.max(1,Math.floor(D.end_ns/D.act_bucket_ns)+1),tv=[],tl=[];for(var j=0;j<n;j++){tv.push(0);tl.push((j*D.act_bucket_ns/1e9).toFixed(2)+' s');}
 a.t.forEach(function(p){if(p[0]<n){tv[p[0]]=p[1];}});
 d.appendChild(el('h3',{},'Its IOs over time ('+us(D.act_bucket_ns/1000)+' buckets)'));d.appendChild(bars(tv,tl,'#3b78c2','bytes: per bucket'));
 stack(p[0],a.i);files(p[0],a.i,'Files of intent #'+a.i);select(row);}
function showIntent(id,row){var it=D.intents[id];if(!it){return;}var p=panes();
 p[0].appendChild(el('h3',{},'Intent #'+id));p[0].appendChild(el('p',{class:'name'},it.name));
 var pa=el('p',{},'acts: ');it.acts.forEach(function(a,k){if(k){pa.appendChild(document.createTextNode(', '));}var r=actRow(a);
  if(r){var l=el('a',{href:'#acts'},String(a));l.addEventListener('click',function(e){e.preventDefault();showAct(a,r);r.scrollIntoView({block:'nearest'});});pa.appendChild(l);}else{pa.appendChild(document.createTextNode(String(a)));}});
 p[0].appendChild(pa);stack(p[0],id);files(p[1],id,'Its files');select(row);
 document.getElementById('detail').scrollIntoView({block:'nearest'});}
function select(row){document.querySelectorAll('tr.sel').forEach(function(r){r.classList.remove('sel');});if(row){row.classList.add('sel');}}
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
var q=document.getElementById('q'),dev=document.getElementById('dev');
function devOk(r){var dv=dev.value;return !dv||(' '+r.getAttribute('data-devs')+' ').indexOf(' '+dv+' ')>=0;}
function textOk(r,t){return !t||r.textContent.toLowerCase().indexOf(t)>=0;}
/* Acts match the text and the device; an intent matches the device and either the text or
   an act shown (filtering by comm or file keeps the intents of the acts found). The detail
   follows: a hidden choice gives way to the first act shown. */
function filter(){var t=q.value.toLowerCase(),shown=0,all=0,its={};
 document.querySelectorAll('#acts tbody tr').forEach(function(r){var ok=textOk(r,t)&&devOk(r);
  r.style.display=ok?'':'none';all++;if(ok){shown++;var a=D.acts[r.getAttribute('data-act')];if(a){its[a.i]=1;}}});
 document.querySelectorAll('#intents tbody tr').forEach(function(r){
  var ok=devOk(r)&&(textOk(r,t)||its[r.getAttribute('data-intent')]===1);r.style.display=ok?'':'none';});
 var c=document.getElementById('count');c.textContent=shown+' of '+all+' acts'+(c.getAttribute('data-more')||'');
 var sel=document.querySelector('tr.sel');if(!sel||sel.style.display==='none'){
  var f=Array.prototype.find.call(document.querySelectorAll('#acts tbody tr'),function(r){return r.style.display!=='none';});
  if(f){showAct(f.getAttribute('data-act'),f);}else if(all||t||dev.value){select(null);var d=document.getElementById('detail');d.textContent='';d.appendChild(el('p',{class:'note'},'No act matches the filter.'));}}}
function actRow(id){return document.querySelector('#acts tbody tr[data-act=\\''+id+'\\']');}
function choose(r){if(r.hasAttribute('data-act')){showAct(r.getAttribute('data-act'),r);}else{showIntent(r.getAttribute('data-intent'),r);}}
document.querySelectorAll('#acts tbody tr,#intents tbody tr').forEach(function(r){r.tabIndex=0;
 r.addEventListener('click',function(){choose(r);});
 r.addEventListener('keydown',function(e){if(e.key==='Enter'||e.key===' '){e.preventDefault();choose(r);}});});
q.addEventListener('input',filter);dev.addEventListener('change',filter);
/* With nothing chosen yet, the filter shows the first act shown. */
filter();
})();";

/// One part of the page: its anchor id, its heading, and its HTML body.
pub(crate) struct Section {
    /// The anchor (`#id`), also the `<section>`'s id.
    pub id: String,
    /// The heading, and the navigation link's text.
    pub title: String,
    /// The body, already escaped.
    pub body: String,
}

/// The parts of the page, already rendered.
pub(crate) struct Page {
    pub title: String,
    pub facts: Vec<(String, String)>,
    /// The sections, in page order.
    pub sections: Vec<Section>,
    /// The data of the linked views (JSON), see [`page_data`].
    pub data: String,
}

/// An SVG document without its XML prolog and doctype, for inlining.
pub(crate) fn inline_svg(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

fn num(out: &mut String, v: u64, text: &str) {
    let _ = write!(out, "<td class=n data-v=\"{v}\">{}</td>", esc(text));
}

fn txt(out: &mut String, class: &str, text: &str) {
    let _ = write!(out, "<td class={class}>{}</td>", esc(text));
}

/// A file as the page names it: `path (dev ino N)` or `dev ino N`.
fn file_text(paths: &BTreeMap<FileKey, String>, f: &FileKey) -> String {
    match paths.get(f) {
        Some(p) => format!("{p} ({} ino {})", dev_str(f.dev), f.ino),
        None => format!("{} ino {}", dev_str(f.dev), f.ino),
    }
}

/// A role as the page names it: `comm (pid T)`, with the tgid when it differs.
fn role_text(t: &Tables, r: RoleId) -> String {
    let (comm, rest) = role_parts(t, r);
    format!("{comm} {rest}").trim_end().to_string()
}

/// [`role_text`] in two parts: the comm, and `(pid T)` with the tgid when it differs.
fn role_parts(t: &Tables, r: RoleId) -> (String, String) {
    match t.role(r) {
        Some(x) if x.pid != x.tid => (x.comm.clone(), format!("(pid {} tgid {})", x.tid, x.pid)),
        Some(x) => (x.comm.clone(), format!("(pid {})", x.tid)),
        None => ("?".into(), String::new()),
    }
}

/// The numbers of the summary at a glance.
pub(crate) struct Glance {
    /// Bytes and IOs per direction (R, A, W).
    pub bytes: [u64; 3],
    /// IOs per direction.
    pub ios: [u64; 3],
    /// Bytes and IOs of unknown origin.
    pub unknown: (u64, u64),
    /// Lost records, lost windows, bytes of IO overlapping them.
    pub lost: (u64, usize, u64),
    /// Acts with IO.
    pub acts: usize,
}

/// The summary at a glance: cards of totals, then the top writers and readers as bars.
pub(crate) fn glance(g: &Glance, t: &Tables, top: usize) -> String {
    let total: u64 = g.bytes.iter().sum();
    let pct = |part: u64| {
        if total == 0 {
            "0.0%".to_string()
        } else {
            format!("{:.1}%", part as f64 * 100.0 / total as f64)
        }
    };
    let mut o = String::from("<div class=cards id=cards>\n");
    let mut card = |k: &str, v: String, s: String, warn: bool| {
        let _ = writeln!(
            o,
            "<div class=\"card{}\"><div class=k>{}</div><div class=v>{}</div><div class=s>{}</div></div>",
            if warn { " warn" } else { "" },
            esc(k),
            esc(&v),
            esc(&s)
        );
    };
    card(
        "written",
        human_bytes(g.bytes[2]),
        format!("{} IOs", g.ios[2]),
        false,
    );
    card(
        "read",
        human_bytes(g.bytes[0]),
        format!("{} IOs", g.ios[0]),
        false,
    );
    card(
        "readahead",
        human_bytes(g.bytes[1]),
        format!("{} IOs", g.ios[1]),
        false,
    );
    card(
        "unknown origin",
        pct(g.unknown.0),
        format!("{} in {} IOs", human_bytes(g.unknown.0), g.unknown.1),
        g.unknown.0 > 0,
    );
    card(
        "lost records",
        if g.lost.0 == 0 {
            "none".into()
        } else {
            g.lost.0.to_string()
        },
        if g.lost.0 == 0 {
            "the trace is complete".into()
        } else {
            format!(
                "{} windows; {} of IO overlapped them",
                g.lost.1,
                human_bytes(g.lost.2)
            )
        },
        g.lost.0 > 0,
    );
    card(
        "acts",
        g.acts.to_string(),
        format!("{} IOs", g.ios.iter().sum::<u64>()),
        false,
    );
    o.push_str("</div>\n<div class=two>\n");
    // Bytes per role: written, and read (readahead included).
    let mut per: BTreeMap<RoleId, [u64; 2]> = BTreeMap::new();
    for (_, a, tot) in t.acts_with_totals() {
        let e = per.entry(a.role).or_default();
        e[0] += tot.bytes[2];
        e[1] += tot.bytes[0] + tot.bytes[1];
    }
    for (k, title, class, id) in [
        (0, "Top writers", "bar", "writers"),
        (1, "Top readers", "bar r", "readers"),
    ] {
        let mut v: Vec<(RoleId, u64)> = per
            .iter()
            .map(|(&r, b)| (r, b[k]))
            .filter(|x| x.1 > 0)
            .collect();
        v.sort_by_key(|&(r, b)| (std::cmp::Reverse(b), r));
        let max = v.first().map_or(1, |x| x.1.max(1));
        let _ = writeln!(o, "<div id={id}><h3>{title}</h3>");
        if v.is_empty() {
            o.push_str("<p class=note>none</p>\n");
        }
        for (r, b) in v.into_iter().take(top) {
            let (comm, rest) = role_parts(t, r);
            let _ = writeln!(
                o,
                "<div class=\"{class}\"><span class=l title=\"{}\"><span class=c>{}</span><span class=p> {}</span></span><span class=t><span style=\"width:{:.1}%\"></span></span><span class=n>{}</span></div>",
                esc(&role_text(t, r)),
                esc(&comm),
                esc(&rest),
                b as f64 * 100.0 / max as f64,
                human_bytes(b),
            );
        }
        o.push_str("</div>\n");
    }
    o.push_str("</div>\n");
    o
}

/// The devices of the acts' files (`MAJ:MIN`, sorted) for the device filter.
fn devices_of(t: &Tables, acts: &[ActId]) -> Vec<String> {
    let mut v: Vec<u32> = acts
        .iter()
        .filter_map(|&a| t.act(a))
        .map(|a| a.file.dev)
        .collect();
    v.sort_unstable();
    v.dedup();
    v.into_iter().map(dev_str).collect()
}

/// The intents with IO, most bytes first, at most `max`: (id, bytes, IOs, acts).
fn top_intents(t: &Tables, max: usize) -> Vec<(IntentId, u64, u64, Vec<ActId>)> {
    let mut per: Vec<(IntentId, u64, u64, Vec<ActId>)> = t
        .intents_with_ids()
        .map(|(i, _)| (i, 0, 0, vec![]))
        .collect();
    for (id, a, tot) in t.acts_with_totals() {
        if let Some(e) = per.get_mut(a.intent.index()) {
            e.1 += tot.total_bytes();
            e.2 += tot.total_ios();
            if tot.total_ios() > 0 {
                e.3.push(id);
            }
        }
    }
    per.retain(|e| e.2 > 0);
    per.sort_by_key(|e| (std::cmp::Reverse(e.1), e.0));
    per.truncate(max);
    per
}

/// What the explorer shows: the filters, the acts table (the given acts, in order), the
/// detail pane the script fills, and the intents table.
pub(crate) fn explore(
    t: &Tables,
    acts: &[ActId],
    io_us: &[u64],
    paths: &BTreeMap<FileKey, String>,
    names: &[String],
    max_intents: usize,
) -> String {
    let mut o = String::from(
        "<div class=filters><input id=q type=search placeholder=\"Filter by comm, pid, intent, file, via\" aria-label=filter>\
<select id=dev aria-label=device><option value=\"\">all devices</option>",
    );
    for d in devices_of(t, acts) {
        let _ = write!(o, "<option>{}</option>", esc(&d));
    }
    // The table holds the acts given (the report's top); the count says when there are more.
    let with_io = t
        .acts_with_totals()
        .filter(|(_, _, tot)| tot.total_ios() > 0)
        .count();
    let more = if acts.len() < with_io {
        format!(
            " data-more=\" shown: the {} with the most bytes of {with_io} (acts.parquet has every act)\"",
            acts.len()
        )
    } else {
        String::new()
    };
    let _ = write!(o, "</select><span id=count class=note{more}></span>");
    o.push_str(
        "</div>\n<div class=explore><div>\n\
<h3>Acts</h3><p class=note>Click a row for its intent's stack, its files, the device time of its IOs \
and its IOs over time; click a header to sort.</p>\n\
<div class=scroll><table class=sortable id=acts><thead><tr><th>act</th><th>comm</th><th>pid</th>\
<th>intent</th><th>via</th><th>file</th><th>read</th><th>readahead</th><th>write</th>\
<th>IOs</th><th>device time</th></tr></thead><tbody>\n",
    );
    for &id in acts {
        let (Some(a), Some(tot)) = (t.act(id), t.totals.get(id.index())) else {
            continue;
        };
        let _ = write!(
            o,
            "<tr data-act={} data-devs=\"{}\">",
            id.0,
            dev_str(a.file.dev)
        );
        num(&mut o, id.0.into(), &id.to_string());
        txt(&mut o, "f", &act_comm(t, id));
        let role = t.role(a.role);
        let tid = role.map_or(0, |r| r.tid);
        let text = match role {
            Some(r) if r.pid != r.tid => format!("{tid} (tgid {})", r.pid),
            _ => tid.to_string(),
        };
        num(&mut o, tid.into(), &text);
        let name = names.get(a.intent.index()).map_or("", |s| s.as_str());
        txt(&mut o, "p", &format!("#{} {name}", a.intent));
        let via = format!(
            "{}{}",
            a.via.name(),
            if a.recorder { " (recorder)" } else { "" }
        );
        txt(&mut o, "f", &via);
        txt(&mut o, "p", &file_text(paths, &a.file));
        for d in 0..3 {
            num(&mut o, tot.bytes[d], &human_bytes(tot.bytes[d]));
        }
        num(&mut o, tot.total_ios(), &tot.total_ios().to_string());
        let us = io_us.get(id.index()).copied().unwrap_or(0);
        num(&mut o, us, &human_us(us));
        o.push_str("</tr>\n");
    }
    o.push_str(
        "</tbody></table></div></div>\n<div><h3>Detail</h3><div id=detail>\
<p class=note>Choose an act or an intent.</p></div></div></div>\n\
<h3>Intents</h3>\n<div class=scroll><table class=sortable id=intents><thead><tr><th>intent</th>\
<th>name</th><th>reason</th><th>bytes</th><th>IOs</th><th>acts</th></tr></thead><tbody>\n",
    );
    for (id, bytes, ios, its_acts) in top_intents(t, max_intents) {
        let mut devs: Vec<u32> = its_acts
            .iter()
            .filter_map(|&a| t.act(a))
            .map(|a| a.file.dev)
            .collect();
        devs.sort_unstable();
        devs.dedup();
        let devs: Vec<String> = devs.into_iter().map(dev_str).collect();
        let _ = write!(
            o,
            "<tr data-intent={} data-devs=\"{}\">",
            id.0,
            devs.join(" ")
        );
        let m = t.intent(id).map_or(0, |i| i.modifier);
        num(&mut o, id.0.into(), &format!("#{id}"));
        txt(
            &mut o,
            "p",
            names.get(id.index()).map_or("", |s| s.as_str()),
        );
        txt(&mut o, "f", modifier_reason(m).map_or("-", |r| r.name()));
        num(&mut o, bytes, &human_bytes(bytes));
        num(&mut o, ios, &ios.to_string());
        num(&mut o, its_acts.len() as u64, &its_acts.len().to_string());
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n");
    o
}

/// What the linked views draw, as JSON: per act of the table its intent, owner, file, the
/// device time histogram and its bytes over time; per intent its name, frames (innermost
/// first) and files. Text is escaped by the browser when the script sets it (`textContent`).
pub(crate) struct PageData<'a> {
    pub t: &'a Tables,
    pub acts: &'a [ActId],
    pub agg: &'a crate::agg::Aggregates,
    pub paths: &'a BTreeMap<FileKey, String>,
    pub names: &'a [String],
    pub frames: &'a dyn Fn(IntentId) -> Vec<String>,
    pub max_intents: usize,
}

/// The JSON of [`PageData`], safe inside a `<script>` element (`<`, `>` and `&` escaped).
pub(crate) fn page_data(d: &PageData<'_>) -> String {
    use serde_json::{json, Map, Value};
    let t = d.t;
    let mut acts = Map::new();
    let mut intents: Vec<IntentId> = top_intents(t, d.max_intents)
        .into_iter()
        .map(|x| x.0)
        .collect();
    for &id in d.acts {
        let (Some(a), Some(tot)) = (t.act(id), t.totals.get(id.index())) else {
            continue;
        };
        intents.push(a.intent);
        let lat: Vec<(u8, u64)> = d
            .agg
            .act_latency
            .range((id.0, 0)..=(id.0, u8::MAX))
            .map(|(&(_, b), &c)| (b, c))
            .collect();
        let series: Vec<(u64, u64)> = d
            .agg
            .act_buckets
            .range((id.0, 0)..=(id.0, u64::MAX))
            .map(|(&(_, b), &v)| (b, v))
            .collect();
        acts.insert(
            id.0.to_string(),
            json!({
                "i": a.intent.0,
                "who": role_text(t, a.role),
                "via": a.via.name(),
                "file": file_text(d.paths, &a.file),
                "bytes": tot.total_bytes(),
                "ios": tot.total_ios(),
                "lat": lat,
                "t": series,
            }),
        );
    }
    intents.sort_unstable();
    intents.dedup();
    // Files and acts per intent.
    let mut files: BTreeMap<IntentId, BTreeMap<FileKey, u64>> = BTreeMap::new();
    let mut its_acts: BTreeMap<IntentId, Vec<u32>> = BTreeMap::new();
    for (id, a, tot) in t.acts_with_totals() {
        if tot.total_ios() == 0 || intents.binary_search(&a.intent).is_err() {
            continue;
        }
        *files
            .entry(a.intent)
            .or_default()
            .entry(a.file.clone())
            .or_default() += tot.total_bytes();
        its_acts.entry(a.intent).or_default().push(id.0);
    }
    let mut ints = Map::new();
    for i in intents {
        let mut f: Vec<(FileKey, u64)> = files.remove(&i).unwrap_or_default().into_iter().collect();
        f.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
        let f: Vec<(String, u64)> = f
            .into_iter()
            .take(20)
            .map(|(k, b)| (file_text(d.paths, &k), b))
            .collect();
        let mut a = its_acts.remove(&i).unwrap_or_default();
        a.truncate(50);
        ints.insert(
            i.0.to_string(),
            json!({
                "name": d.names.get(i.index()).cloned().unwrap_or_default(),
                "frames": (d.frames)(i),
                "files": f,
                "acts": a,
            }),
        );
    }
    let v = json!({
        "end_ns": d.agg.end,
        "act_bucket_ns": d.agg.act_bucket_ns,
        "lat_buckets": crate::agg::LAT_BUCKETS,
        "acts": Value::Object(acts),
        "intents": Value::Object(ints),
    });
    v.to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// Charts in a grid: (title, inline SVG or `<img>` markup) each.
pub(crate) fn chart_grid(charts: &[(String, String)]) -> String {
    let mut o = String::from("<div class=charts>\n");
    for (title, markup) in charts {
        let _ = writeln!(
            o,
            "<div class=chart><h3>{}</h3>{}</div>",
            esc(title),
            markup
        );
    }
    o.push_str("</div>\n");
    o
}

/// The whole page.
pub(crate) fn page(p: &Page) -> String {
    let mut o = String::with_capacity(1 << 20);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>\
<meta name=viewport content=\"width=device-width, initial-scale=1\"><title>{}</title><style>{CSS}</style></head><body>\n<header><h1>{}</h1>\n",
        esc(&p.title),
        esc(&p.title)
    );
    if !p.facts.is_empty() {
        o.push_str("<dl id=facts>");
        for (k, v) in &p.facts {
            let _ = write!(o, "<div><dt>{}</dt><dd>{}</dd></div>", esc(k), esc(v));
        }
        o.push_str("</dl>\n");
    }
    o.push_str("</header>\n<nav>");
    for s in &p.sections {
        let _ = write!(o, "<a href=\"#{}\">{}</a>", esc(&s.id), esc(&s.title));
    }
    o.push_str("</nav>\n<main>\n");
    for s in &p.sections {
        let _ = writeln!(
            o,
            "<section id=\"{}\"><h2>{}</h2>\n{}</section>",
            esc(&s.id),
            esc(&s.title),
            s.body
        );
    }
    let _ = write!(
        o,
        "</main>\n<script type=\"application/json\" id=ioblame-data>{}</script>\n<script>{JS}</script>\n</body></html>\n",
        p.data
    );
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
