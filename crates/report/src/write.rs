//! The stages of [`crate::ReportWriter::finish`], one function each: the tables, the flame
//! graphs, the charts and the page. Each writes its files into the output directory and
//! lists them in [`ReportFiles`], in the order [`ReportFiles::all`] gives.

use std::path::{Path, PathBuf};

use ioblame_attrib::{ActId, IntentId, RoleId, Summary, Symbolizer, Tables};
use ioblame_counters::CounterSet;
use ioblame_format::BlockDevice;
use plotters::coord::Shift;
use plotters::prelude::{DrawingArea, SVGBackend};

use crate::agg::Aggregates;
use crate::charts::{self, DrawResult};
use crate::flame::{flame_svg, folded_stacks, Weight};
use crate::html::{self, Glance, Page, PageData, Section};
use crate::summary_text::{summary_text, SummaryInput};
use crate::util::{dev_str, frame_name, html_escape, human_bytes};
use crate::{tables, ReportError, ReportFiles, ReportInput};

/// What every stage reads.
pub(crate) struct Shown<'a> {
    /// The attribution's tables, with the totals of the IOs given to `push_io`.
    pub t: &'a Tables,
    /// The aggregates of those IOs.
    pub agg: &'a Aggregates,
    /// The counters filled from the same IOs.
    pub counters: &'a CounterSet,
    /// What the report knows beyond the IOs.
    pub input: &'a ReportInput,
    /// Names kernel frames.
    pub sym: &'a dyn Symbolizer,
    /// The short name of each intent, by intent id.
    pub names: &'a [String],
}

/// A chart or note for the page: its title, and its inline SVG or `<img>` markup.
type Markup = (String, String);

/// The charts' markup for the page.
pub(crate) struct ChartMarkup {
    /// Throughput, latency and IO position charts, in that order (then the latency
    /// breakdown, when the caller gave one).
    pub(crate) overview: Vec<Markup>,
    /// One histogram per counter.
    counters: Vec<Markup>,
    /// Bytes per cgroup, for a trace that recorded cgroups.
    cgroups: Option<Markup>,
    /// The blame section's body, when the caller gave one (`crate::blame`).
    pub(crate) blame: Option<String>,
}

/// A flame graph for the page: its title, its inline SVG (without script) and the file name
/// of its interactive version.
pub(crate) type Flame = (String, String, String);

fn write_file(path: &Path, data: impl AsRef<[u8]>) -> Result<(), ReportError> {
    std::fs::write(path, data).map_err(|e| ReportError::io(path, e))
}

/// The list of a report's files in `dir`, none written yet.
pub(crate) fn no_files(dir: PathBuf) -> ReportFiles {
    ReportFiles {
        html: dir.join("report.html"),
        dir,
        ..ReportFiles::default()
    }
}

/// Bytes of the IOs in `ios.parquet` whose span touched one of the summary's lost-record
/// windows (read back from the finished table); writes `lost_windows.parquet`, each window
/// with the bytes touching it.
pub(crate) fn lost_window_bytes(
    dir: &Path,
    ios_rows: u64,
    summary: &Summary,
) -> Result<u64, ReportError> {
    let windows: Vec<(u64, u64)> = summary
        .lost_windows
        .iter()
        .map(|w| (w.start, w.end))
        .collect();
    let (total, each) = if windows.is_empty() || ios_rows == 0 {
        (0, vec![0; windows.len()])
    } else {
        tables::bytes_in_windows(&dir.join("ios.parquet"), ios_rows, &windows)?
    };
    tables::write_lost_windows(
        &dir.join("lost_windows.parquet"),
        &summary.lost_windows,
        &each,
    )?;
    Ok(total)
}

/// Writes the Parquet tables besides `ios.parquet` (already written) and lists them all.
pub(crate) fn write_tables(s: &Shown<'_>, files: &mut ReportFiles) -> Result<(), ReportError> {
    let p = |n: &str| files.dir.join(n);
    let written = [
        p("ios.parquet"),
        p("acts.parquet"),
        p("intents.parquet"),
        p("roles.parquet"),
        p("files.parquet"),
        p("histograms.parquet"),
        p("lost_windows.parquet"),
    ];
    let cgroups = s.input.cgroups.as_ref();
    tables::write_df(
        &written[1],
        tables::acts_frame(s.t, s.agg, s.names, cgroups),
    )?;
    tables::write_df(&written[2], tables::intents_frame(s.t, s.sym, s.names))?;
    tables::write_df(&written[3], tables::roles_frame(s.t, cgroups))?;
    tables::write_df(&written[4], tables::files_frame(s.t, &s.input.paths))?;
    tables::write_df(&written[5], tables::histograms_frame(s.t, s.counters))?;
    // written[6], lost_windows.parquet, was written with the lost-window bytes.
    files.tables.extend(written);
    Ok(())
}

/// The flame graphs: what each is weighted by, its file name part, title and unit.
const FLAME_GRAPHS: [(Weight, &str, &str, &str); 2] = [
    (
        Weight::Bytes,
        "bytes",
        "IO flame graph: bytes charged",
        "bytes",
    ),
    (
        Weight::IoTime,
        "iotime",
        "IO flame graph: device time charged",
        "µs",
    ),
];

/// Writes each flame graph's folded stacks and interactive SVG; returns them for the page.
pub(crate) fn write_flame_graphs(
    s: &Shown<'_>,
    files: &mut ReportFiles,
) -> Result<Vec<Flame>, ReportError> {
    FLAME_GRAPHS
        .iter()
        .map(|&(w, name, title, count)| write_flame_graph(s, files, w, name, title, count))
        .collect()
}

/// One flame graph of [`FLAME_GRAPHS`].
fn write_flame_graph(
    s: &Shown<'_>,
    files: &mut ReportFiles,
    w: Weight,
    name: &str,
    title: &str,
    count: &str,
) -> Result<Flame, ReportError> {
    let t = s.t;
    let lines = folded_stacks(t, s.sym, s.names, |a| match w {
        Weight::Bytes => t.totals.get(a.index()).map_or(0, |x| x.total_bytes()),
        Weight::IoTime => s.agg.io_us(a),
    });
    let folded = files.dir.join(format!("flame-{name}.folded"));
    let mut text = lines.join("\n");
    text.push('\n');
    write_file(&folded, text)?;
    files.folded.push(folded);
    let file = files.dir.join(format!("flame-{name}.svg"));
    let interactive =
        flame_svg(&lines, title, count, true).map_err(|e| ReportError::io(&file, e))?;
    write_file(&file, interactive)?;
    let inline = flame_svg(&lines, title, count, false).map_err(|e| ReportError::io(&file, e))?;
    files.flames.push(file);
    // Without its script inferno still asks for `init` on load: drop the handler.
    let inline = inline.replacen(" onload=\"init(evt)\"", "", 1);
    Ok((title.to_string(), inline, format!("flame-{name}.svg")))
}

/// Writes the charts (`by_bytes`: the acts with IO, most bytes first) and returns their
/// markup for the page.
pub(crate) fn write_charts(
    s: &Shown<'_>,
    by_bytes: &[ActId],
    files: &mut ReportFiles,
) -> Result<ChartMarkup, ReportError> {
    let counters = counter_charts(s, by_bytes, files)?;
    let mut overview = vec![throughput_chart(s, files)?];
    overview.extend(latency_charts(s, files)?);
    overview.extend(offset_charts(s, files)?);
    let cgroups = match crate::cgroups::rows(s.t, s.input.cgroups.as_ref()) {
        Some(rows) => Some(svg_chart(
            files,
            "cgroups.svg",
            "Bytes per cgroup".into(),
            |root| crate::cgroups::chart(root, &rows),
        )?),
        None => None,
    };
    Ok(ChartMarkup {
        overview,
        counters,
        cgroups,
        blame: None,
    })
}

/// Draws one SVG chart into `charts/<name>`; returns its markup for the page.
fn svg_chart(
    files: &mut ReportFiles,
    name: &str,
    title: String,
    draw: impl FnOnce(DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult,
) -> Result<Markup, ReportError> {
    let path = files.dir.join(format!("charts/{name}"));
    let svg = charts::svg_string(&path, draw)?;
    write_file(&path, &svg)?;
    files.charts.push(path);
    Ok((title, html::inline_svg(&svg).to_string()))
}

/// Each counter's histogram for its top acts: `charts/counter-NN.svg`.
fn counter_charts(
    s: &Shown<'_>,
    by_bytes: &[ActId],
    files: &mut ReportFiles,
) -> Result<Vec<Markup>, ReportError> {
    let mut v = Vec::with_capacity(s.counters.len());
    for (i, spec) in s.counters.specs().iter().enumerate() {
        let series = charts::counter_series(s.t, s.counters, i, by_bytes, s.input.top_chart_acts);
        v.push(svg_chart(
            files,
            &format!("counter-{i:02}.svg"),
            format!("Counter #{i}: {spec}"),
            |root| charts::counter_chart(root, i, spec, &series),
        )?);
    }
    Ok(v)
}

/// Throughput over time of the roles with the most bytes: `charts/throughput.svg`.
fn throughput_chart(s: &Shown<'_>, files: &mut ReportFiles) -> Result<Markup, ReportError> {
    let mut roles: Vec<(RoleId, u64)> = s.agg.role_bytes.iter().map(|(&r, &b)| (r, b)).collect();
    roles.sort_by_key(|&(r, b)| (std::cmp::Reverse(b), r));
    let roles: Vec<RoleId> = roles
        .into_iter()
        .take(s.input.top_chart_roles)
        .map(|x| x.0)
        .collect();
    svg_chart(
        files,
        "throughput.svg",
        "Throughput over time".into(),
        |root| charts::throughput_chart(root, s.t, s.agg, &roles),
    )
}

/// Wait and device time per via class: `charts/latency-wait.svg`, `charts/latency-io.svg`.
fn latency_charts(s: &Shown<'_>, files: &mut ReportFiles) -> Result<Vec<Markup>, ReportError> {
    [
        (0, "latency-wait.svg", "Wait time per via class"),
        (1, "latency-io.svg", "Device time per via class"),
    ]
    .into_iter()
    .map(|(which, name, title)| {
        svg_chart(files, name, title.into(), |root| {
            charts::latency_chart(root, s.agg, which)
        })
    })
    .collect()
}

/// `name (major:minor, size)` of a block device of the recording host.
fn describe_device(b: &BlockDevice) -> String {
    format!(
        "{} ({}:{}, {})",
        b.name,
        b.major,
        b.minor,
        human_bytes(b.size_sectors.saturating_mul(512))
    )
}

/// IO position over time, one chart per device (the busiest first), each device scaled to
/// its own size: `charts/offset-N.svg` and `charts/offset-N.png` (the page shows the PNG);
/// then a note of the devices left out.
fn offset_charts(s: &Shown<'_>, files: &mut ReportFiles) -> Result<Vec<Markup>, ReportError> {
    let mut v = Vec::new();
    let (top_devs, devs_left) = s.agg.top_devices(s.input.top_chart_devices);
    for (i, (dev, d)) in top_devs.iter().enumerate() {
        let Some(sample) = d.sample.as_ref() else {
            continue;
        };
        let what = match s
            .input
            .block_devices
            .iter()
            .find(|b| b.kernel_dev() == *dev)
        {
            Some(b) => describe_device(b),
            None => dev_str(*dev),
        };
        let title = format!("IO position on {what} over time");
        let caption = format!(
            "IO position on {what}: {} IOs, {} (seekwatcher style)",
            d.ios,
            human_bytes(d.bytes)
        );
        let svg_path = files.dir.join(format!("charts/offset-{i}.svg"));
        let svg = charts::svg_string(&svg_path, |root| {
            charts::offset_chart(root, s.agg, sample, &title)
        })?;
        write_file(&svg_path, &svg)?;
        files.charts.push(svg_path);
        let png = files.dir.join(format!("charts/offset-{i}.png"));
        charts::png_file(&png, |root| {
            charts::offset_chart(root, s.agg, sample, &title)
        })?;
        let png_bytes = std::fs::read(&png).map_err(|e| ReportError::io(&png, e))?;
        files.charts.push(png);
        v.push((
            caption,
            format!(
                "<img alt=\"IO position over time on {}\" width={} height={} src=\"data:image/png;base64,{}\">",
                html_escape(&what),
                charts::SIZE.0,
                charts::SIZE.1,
                html::base64(&png_bytes)
            ),
        ));
    }
    if devs_left > 0 {
        v.push((
            format!(
                "{devs_left} more device{} with IO not charted",
                if devs_left == 1 { "" } else { "s" }
            ),
            String::new(),
        ));
    }
    Ok(v)
}

/// The terminal summary, ending with the files written.
pub(crate) fn terminal_summary(
    s: &Shown<'_>,
    summary: &Summary,
    lost_window_bytes: u64,
    files: &ReportFiles,
) -> String {
    let rel = files.relative();
    summary_text(&SummaryInput {
        tables: s.t,
        summary,
        lost_window_bytes: Some(lost_window_bytes),
        act_io_us: &s.agg.act_io_us,
        paths: &s.input.paths,
        intent_names: s.names,
        top: s.input.top_summary,
        files: Some((&files.dir, &rel)),
        color: s.input.color,
    })
}

/// The page's table of facts about the capture: host, kernel, recorder, start, traces,
/// devices (those known).
fn facts(input: &ReportInput) -> Vec<(String, String)> {
    let mut facts = Vec::new();
    if let Some(h) = &input.header {
        // A blktrace recording knows neither host nor kernel: facts it lacks are left out.
        let mut known = |k: &str, v: String| {
            if !v.trim().is_empty() {
                facts.push((k.to_string(), v.trim().to_string()));
            }
        };
        known("host", h.hostname.clone());
        known("kernel", format!("{} {}", h.kernel_release, h.machine));
        known("recorder", h.recorder_version.clone());
        facts.push((
            "capture start".to_string(),
            chrono::DateTime::from_timestamp_nanos(h.start_time_ns.min(i64::MAX as u64) as i64)
                .format("%Y-%m-%d %H:%M:%S%.3f UTC")
                .to_string(),
        ));
    }
    if !input.traces.is_empty() {
        facts.push(("traces".to_string(), input.traces.join(" ")));
    }
    if !input.block_devices.is_empty() {
        let devs: Vec<String> = input.block_devices.iter().map(describe_device).collect();
        facts.push(("devices".to_string(), devs.join(", ")));
    }
    facts
}

/// The page's glance numbers: totals of the IOs shown, the unknown share, lost records.
pub(crate) fn glance_numbers(t: &Tables, summary: &Summary, lost_window_bytes: u64) -> Glance {
    let mut g = Glance {
        bytes: [0; 3],
        ios: [0; 3],
        unknown: (0, 0),
        lost: (
            summary.lost_records,
            summary.lost_windows.len(),
            lost_window_bytes,
        ),
        acts: 0,
    };
    for (_, a, tot) in t.acts_with_totals() {
        for d in 0..3 {
            g.bytes[d] += tot.bytes[d];
            g.ios[d] += tot.ios[d];
        }
        if a.via == ioblame_attrib::Via::Unknown {
            g.unknown.0 += tot.total_bytes();
            g.unknown.1 += tot.total_ios();
        }
        g.acts += usize::from(tot.total_ios() > 0);
    }
    g
}

/// The page's sections, in order: the summary at a glance, the notes on the trace (what
/// the analysis said on stderr, when it said anything), throughput, the cgroups (for a
/// trace that recorded them), the explorer (acts, intents, the detail of the one chosen),
/// the flame graphs, the other charts, the counters and the files (`top`: the acts of the tables, most bytes first). A new part of the report
/// is one more [`Section`] pushed here.
pub(crate) fn sections(
    s: &Shown<'_>,
    glance: &Glance,
    top: &[ActId],
    flames: Vec<Flame>,
    charts: ChartMarkup,
    files: &ReportFiles,
) -> Vec<Section> {
    let section = |id: &str, title: &str, body: String| Section {
        id: id.into(),
        title: title.into(),
        body,
    };
    let mut v = vec![section(
        "glance",
        "At a glance",
        html::glance(glance, s.t, s.input.top_summary.max(8)),
    )];
    if !s.input.notes.is_empty() {
        let mut list = String::from("<ul class=notes>\n");
        for n in &s.input.notes {
            list.push_str(&format!("<li>{}</li>\n", html_escape(n)));
        }
        list.push_str("</ul>\n");
        v.push(section("notes", "Notes on the trace", list));
    }
    let mut overview = charts.overview.into_iter();
    if let Some((title, markup)) = overview.next() {
        v.push(section(
            "throughput",
            "Throughput",
            format!(
                "<p class=note>{}: bytes per bucket of the top roles, stacked (the bucket width \
follows the trace's length).</p>\n<div class=wide>{markup}</div>\n",
                html_escape(&title)
            ),
        ));
    }
    if let (Some(rows), Some((_, markup))) = (
        crate::cgroups::rows(s.t, s.input.cgroups.as_ref()),
        &charts.cgroups,
    ) {
        v.push(section(
            "cgroups",
            "Cgroups",
            format!(
                "<p class=note>Bytes and IOs per cgroup of the task charged (the one that \
dirtied the pages or issued the IO), as paths under the cgroup2 mount, most bytes first; &ldquo;-&rdquo;: \
cgroup unknown. The bars show the first {}.</p>\n<div class=two><div>{}</div>\n<div \
class=chart>{markup}</div></div>\n",
                crate::cgroups::CHART_CGROUPS,
                crate::cgroups::table(&rows)
            ),
        ));
    }
    if let Some(body) = charts.blame {
        v.push(section("blame", "Who made the IO slow", body));
    }
    if let Some(t) = &s.input.timeline {
        v.push(section(
            "timeline",
            "Timeline",
            format!(
                "<p><a href=\"{f}\">{f}</a>: {} slices and {} flows, a Perfetto trace of when it \
happened: each task's dirtying, reads, direct IO and fsyncs on its thread, each device's requests \
(queued, then on the device) with its queue depth and bytes per second, and an arrow from each \
write to the IO that wrote it back, whoever issued it.</p>\n<p class=note>Open it at \
<a href=\"https://ui.perfetto.dev\">ui.perfetto.dev</a> (&ldquo;Open trace file&rdquo;: the \
file stays in the browser), or, when it is large, with Perfetto's <code>trace_processor \
--httpd</code> and the same page. Click a slice for its act, file, bytes and stack; its \
flows lead to the IO it caused (docs/timeline.md).</p>\n",
                t.slices,
                t.flows,
                f = html_escape(&t.file)
            ),
        ));
    }
    v.push(section(
        "explore",
        "Acts and intents",
        html::explore(
            s.t,
            top,
            &s.agg.act_io_us,
            &s.input.paths,
            s.names,
            s.input.top_table,
        ),
    ));
    let mut flame = String::from(
        "<p class=note>Each tower is an intent's kernel stack, outermost frame at the bottom, \
then the intent's name (with its writeback reason), and on top the role (comm) that took that \
path: the widest tower is the code path that caused the most IO, split at the top by the roles \
that caused it.</p>\n",
    );
    for (title, svg, file) in &flames {
        flame.push_str(&format!(
            "<h3>{}</h3>\n<p class=note>Interactive version (search, zoom): <a href=\"{}\">{}</a></p>\n<div class=flame>{}</div>\n",
            html_escape(title),
            html_escape(file),
            html_escape(file),
            html::inline_svg(svg)
        ));
    }
    v.push(section("flames", "IO flame graphs", flame));
    let rest: Vec<Markup> = overview.collect();
    v.push(section(
        "charts",
        "Latency and IO position",
        html::chart_grid(&rest),
    ));
    v.push(section(
        "counters",
        "Counters",
        html::chart_grid(&charts.counters),
    ));
    let mut list = String::from("<ul>\n");
    for f in files.relative().into_iter().skip(1) {
        list.push_str(&format!(
            "<li><a href=\"{}\">{}</a></li>\n",
            html_escape(&f),
            html_escape(&f)
        ));
    }
    list.push_str("</ul>\n");
    v.push(section("files", "Files", list));
    v
}

/// Writes `report.html`: the facts, then the [`sections`], then the data of the linked views.
pub(crate) fn write_page(
    s: &Shown<'_>,
    glance: &Glance,
    by_bytes: &[ActId],
    flames: Vec<Flame>,
    charts: ChartMarkup,
    files: &ReportFiles,
) -> Result<(), ReportError> {
    let top: Vec<ActId> = by_bytes.iter().copied().take(s.input.top_table).collect();
    let frames = |i: IntentId| -> Vec<String> {
        s.t.intent(i).map_or_else(Vec::new, |it| {
            let user = it.user.iter().map(ioblame_attrib::names::user_frame_label);
            it.stack
                .iter()
                .map(|&a| frame_name(s.sym, a))
                .chain(user)
                .collect()
        })
    };
    let data = html::page_data(&PageData {
        t: s.t,
        acts: &top,
        agg: s.agg,
        paths: &s.input.paths,
        names: s.names,
        frames: &frames,
        max_intents: s.input.top_table,
    });
    let page = Page {
        title: "ioblame report".to_string(),
        facts: facts(s.input),
        sections: sections(s, glance, &top, flames, charts, files),
        data,
    };
    write_file(&files.html, html::page(&page))
}

#[cfg(test)]
mod tests {
    use super::*;

    use ioblame_format::{ByteOrder, Header};

    fn device(name: &str, major: u32, minor: u32, size_sectors: u64) -> BlockDevice {
        BlockDevice {
            name: name.into(),
            major,
            minor,
            size_sectors,
            ..BlockDevice::default()
        }
    }

    #[test]
    fn devices_by_name_number_and_size() {
        assert_eq!(
            describe_device(&device("sdb", 8, 16, 2 * 1024 * 1024)),
            "sdb (8:16, 1.00 GiB)"
        );
    }

    #[test]
    fn facts_of_what_is_known() {
        assert!(facts(&ReportInput::default()).is_empty());
        let input = ReportInput {
            header: Some(Header {
                byte_order: ByteOrder::Little,
                word_size: 8,
                page_size: 4096,
                cpu_count: 2,
                clock_id: 1,
                recorder_pid: 1,
                file_index: 0,
                start_time_ns: 1_700_000_000_123_456_789,
                start_clock_ns: 0,
                trace_id: 0,
                hostname: "box".into(),
                kernel_release: "6.1.0".into(),
                machine: "x86_64".into(),
                recorder_version: "ioblame-capture 0.1.0".into(),
            }),
            block_devices: vec![device("loop0", 7, 0, 2048), device("sda", 8, 0, 0)],
            traces: vec!["t/a.iob".into(), "t/b.iob".into()],
            ..ReportInput::default()
        };
        let f = facts(&input);
        let kv: Vec<(&str, &str)> = f.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            kv,
            [
                ("host", "box"),
                ("kernel", "6.1.0 x86_64"),
                ("recorder", "ioblame-capture 0.1.0"),
                ("capture start", "2023-11-14 22:13:20.123 UTC"),
                ("traces", "t/a.iob t/b.iob"),
                ("devices", "loop0 (7:0, 1.00 MiB), sda (8:0, 0 B)"),
            ]
        );
        // A blktrace recording's header has no host or kernel (its recorder is `blktrace`).
        let mut blk = input.clone();
        if let Some(h) = blk.header.as_mut() {
            h.hostname.clear();
            h.kernel_release.clear();
            h.machine.clear();
        }
        let keys: Vec<String> = facts(&blk).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            ["recorder", "capture start", "traces", "devices"],
            "no empty facts"
        );
    }

    #[test]
    fn no_lost_windows_reads_nothing() {
        // No `ios.parquet` in the directory: nothing is read when there are no windows, and
        // the table of windows is written empty.
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            lost_window_bytes(dir.path(), 10, &Summary::default()).unwrap(),
            0
        );
        assert!(dir.path().join("lost_windows.parquet").is_file());
    }

    #[test]
    fn files_listed_in_the_order_of_the_stages() {
        let mut files = no_files(PathBuf::from("out"));
        assert_eq!(files.html, Path::new("out/report.html"));
        assert!(files.all().len() == 1);
        files.charts.push("out/charts/x.svg".into());
        files.tables.push("out/ios.parquet".into());
        assert_eq!(
            files.relative(),
            ["report.html", "ios.parquet", "charts/x.svg"]
        );
    }
}
