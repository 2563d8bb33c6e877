//! End-to-end tests of the report: summary golden, Parquet round trips (polars and DuckDB),
//! charts (SVG parsed as XML, PNG decoded), flame graphs and the page in headless Chromium.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{fixture, out_dir, sym, write_report};
use ioblame_attrib::{ActId, RoleId};
use ioblame_report::{folded_stacks, summary_text, SummaryInput, IOS_ROW_GROUP};
use polars::prelude::*;

fn golden(name: &str, actual: &str) {
    ioblame_testkit::assert_golden!(name, actual);
}

/// In CI a missing tool is a failure; elsewhere the test says why it skips.
fn missing(what: &str) {
    ioblame_testkit::need::skip(what)
}

#[test]
fn summary_text_golden() {
    let f = fixture(0);
    let mut io_us = vec![0u64; f.tables.acts.len()];
    for io in &f.ios {
        io_us[io.act.index()] += io.io_time;
    }
    let files = vec!["report.html".to_string(), "ios.parquet".to_string()];
    let names = ioblame_attrib::intent_names(&f.tables, &sym);
    let mut input = SummaryInput {
        tables: &f.tables,
        summary: &f.summary,
        lost_window_bytes: None,
        act_io_us: &io_us,
        paths: &f.paths,
        intent_names: &names,
        top: 3,
        files: Some((Path::new("OUT"), &files)),
        color: false,
    };
    let text = summary_text(&input);
    golden("summary.txt", &text);
    // In colour: the same text with ANSI styles around headings, comms and intent lines.
    input.color = true;
    let colored = summary_text(&input);
    assert!(colored.contains("\x1b[1m"), "{colored}");
    assert_eq!(strip_ansi(&colored), text);
    // Fewer acts in each list with a smaller `top`.
    input.color = false;
    input.top = 1;
    let one = summary_text(&input);
    assert!(one.contains("  1.  ") && !one.contains("  2.  "), "{one}");
}

/// `text` without ANSI CSI sequences (`ESC [ ... letter`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Every table of the summary is aligned, whatever the length of comms and paths: each
/// column starts at the same position on every row.
#[test]
fn summary_tables_align_long_comms_and_paths() {
    let mut f = fixture(0);
    f.tables.roles[0].comm = "a-very-long-command-name-from-prctl".to_string();
    f.paths.insert(
        ioblame_attrib::FileKey {
            dev: common::DEV,
            ino: 12,
        },
        "/a/rather/long/path/to/some/deeply/nested/file.bin".to_string(),
    );
    let r = write_report(&f, &out_dir("align"));
    let table: Vec<&str> = r
        .summary_text
        .lines()
        .skip_while(|l| !l.starts_with("Top acts by bytes"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| !l.trim_start().starts_with("intent #"))
        .collect();
    assert!(table.len() >= 3, "{}", r.summary_text);
    // The VIA column: where the header puts it, each row has its via.
    let at = table[0].find("VIA").unwrap();
    for row in &table[1..] {
        let via = &row[row.char_indices().nth(at).map_or(row.len(), |x| x.0)..];
        assert!(
            [
                "page",
                "direct",
                "readahead",
                "read",
                "unknown",
                "buffer",
                "journal"
            ]
            .iter()
            .any(|v| via.starts_with(v)),
            "misaligned: {row:?}\n{}",
            r.summary_text
        );
    }
}

fn read_parquet(path: &Path) -> DataFrame {
    let f = std::fs::File::open(path).unwrap();
    ParquetReader::new(f).finish().unwrap()
}

fn sum_u64(df: &DataFrame, col: &str) -> u64 {
    let ca = df
        .column(col)
        .unwrap()
        .as_materialized_series()
        .u64()
        .unwrap()
        .clone();
    (0..ca.len()).map(|i| ca.get(i).unwrap_or(0)).sum()
}

#[test]
fn parquet_round_trip_polars() {
    let f = fixture(0);
    let dir = out_dir("polars");
    let r = write_report(&f, &dir);
    assert_eq!(r.ios_rows, f.ios.len() as u64);

    let ios = read_parquet(&dir.join("ios.parquet"));
    assert_eq!(ios.height(), f.ios.len());
    let total: u64 = f.ios.iter().map(|i| i.size).sum();
    assert_eq!(sum_u64(&ios, "size"), total);

    let acts = read_parquet(&dir.join("acts.parquet"));
    assert_eq!(acts.height(), f.tables.acts.len());
    for (d, col) in ["read_bytes", "readahead_bytes", "write_bytes"]
        .iter()
        .enumerate()
    {
        let want: u64 = f.tables.totals.iter().map(|t| t.bytes[d]).sum();
        assert_eq!(sum_u64(&acts, col), want, "{col}");
    }
    let comm = acts.column("comm").unwrap().str().unwrap().get(1).unwrap();
    assert_eq!(
        comm, "<script>alert(1)</script>",
        "the table keeps raw values"
    );

    let intents = read_parquet(&dir.join("intents.parquet"));
    assert_eq!(intents.height(), f.tables.intents.len());
    let frames = intents
        .column("frames")
        .unwrap()
        .list()
        .unwrap()
        .get_as_series(2)
        .unwrap();
    let frames = frames.str().unwrap();
    let frames: Vec<&str> = (0..frames.len()).map(|i| frames.get(i).unwrap()).collect();
    assert_eq!(
        frames,
        [
            "folio_mark_dirty",
            "generic_perform_write",
            "vfs_write",
            "ksys_write"
        ]
    );

    let roles = read_parquet(&dir.join("roles.parquet"));
    assert_eq!(roles.height(), f.tables.roles.len());
    let files = read_parquet(&dir.join("files.parquet"));
    assert_eq!(files.height(), 5, "distinct (dev, ino) of the acts");

    // Histograms: every counted act x counter x slot, counts equal to the counter set.
    let h = read_parquet(&dir.join("histograms.parquet"));
    let counted = (0..f.tables.acts.len() as u32)
        .map(ActId)
        .filter(|&a| f.counters.is_used(a))
        .count();
    assert_eq!(h.height(), counted * f.counters.len() * 8);
    let mut want = 0;
    for a in (0..f.tables.acts.len() as u32).map(ActId) {
        want += f.counters.act_histograms(a).iter().flatten().sum::<u64>();
    }
    assert_eq!(sum_u64(&h, "count"), want);
    assert!(want > 0);
}

#[test]
fn parquet_duckdb() {
    let ok = Command::new("python3")
        .args(["-c", "import duckdb"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return missing("the DuckDB Python package (scripts/install-test-deps.sh installs it)");
    }
    // More IOs than one row group, so ios.parquet is streamed in several.
    let f = fixture(IOS_ROW_GROUP);
    let dir = out_dir("duckdb");
    write_report(&f, &dir);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/duckdb_check.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let j = |k: &str| -> String {
        // The script prints one flat JSON object; find `"k": value`.
        let start = text
            .find(&format!("\"{k}\": "))
            .unwrap_or_else(|| panic!("{k} in {text}"));
        let rest = &text[start + k.len() + 4..];
        let end = rest
            .char_indices()
            .scan(0i32, |depth, (i, c)| {
                match c {
                    '[' => *depth += 1,
                    ']' => *depth -= 1,
                    ',' | '}' if *depth == 0 => return Some(Some(i)),
                    _ => {}
                }
                Some(None)
            })
            .flatten()
            .next()
            .unwrap();
        rest[..end].trim().to_string()
    };
    let total: u64 = f.ios.iter().map(|i| i.size).sum();
    assert_eq!(j("ios_rows"), f.ios.len().to_string());
    assert_eq!(j("acts_rows"), f.tables.acts.len().to_string());
    assert_eq!(j("intents_rows"), f.tables.intents.len().to_string());
    assert_eq!(j("roles_rows"), f.tables.roles.len().to_string());
    assert_eq!(j("act_mismatches"), "0");
    assert_eq!(j("total_bytes"), total.to_string());
    assert_eq!(j("roles_bytes"), total.to_string());
    assert_eq!(j("files_bytes"), total.to_string());
    let hist_total: u64 = (0..f.tables.acts.len() as u32)
        .map(|a| {
            f.counters
                .act_histograms(ActId(a))
                .iter()
                .flatten()
                .sum::<u64>()
        })
        .sum();
    assert_eq!(j("histogram_count"), hist_total.to_string());
    // Counter 2 (W size) of act 0, slot by slot with bounds (upper null = unbounded).
    let h = f.counters.histogram(ActId(0), 2).unwrap();
    let b = [0u64, 4096, 8192, 16384, 32768, 65536, 131072, 524288];
    let want: Vec<String> = (0..8)
        .map(|s| {
            let hi = if s == 7 {
                "null".to_string()
            } else {
                b[s + 1].to_string()
            };
            format!("[2, {s}, {}, {hi}, {}]", b[s], h[s])
        })
        .collect();
    assert_eq!(j("histogram_act0"), format!("[{}]", want.join(", ")));
    assert_eq!(
        j("intent_frames"),
        r#"["folio_mark_dirty", "generic_perform_write", "vfs_write", "ksys_write"]"#
    );
    assert_eq!(j("paths"), r#"["/data/big&file.bin", "/etc/<odd>name"]"#);
    assert_eq!(j("row_groups"), "2");
    assert_eq!(j("compression"), r#"["ZSTD"]"#);
}

fn svg_doc(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let opt = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(&text, opt)
        .unwrap_or_else(|e| panic!("{} is not valid XML: {e}", path.display()));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    // All text of the chart, to look for series names.
    doc.descendants()
        .filter_map(|n| n.text())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn charts_and_flame_graphs() {
    let f = fixture(0);
    let dir = out_dir("charts");
    let r = write_report(&f, &dir);
    let c = dir.join("charts");
    let counter = svg_doc(&c.join("counter-02.svg"));
    assert!(counter.contains("dd #2 (act 0)"), "{counter}");
    assert!(counter.contains("dd #5 (act 3)"), "{counter}");
    // The acts with the most IOs in the counter come first (act 0: 10 writes; act 3 has more
    // bytes in 5).
    assert!(
        counter.find("dd #2 (act 0)") < counter.find("dd #5 (act 3)"),
        "{counter}"
    );
    assert!(counter.contains("IO size"), "axis label: {counter}");
    let tp = svg_doc(&c.join("throughput.svg"));
    assert!(tp.contains("dd (100)") && tp.contains("MiB/s"), "{tp}");
    let lat = svg_doc(&c.join("latency-io.svg"));
    for via in ["page", "read", "readahead", "journal", "direct", "unknown"] {
        assert!(lat.lines().any(|l| l == via), "{via} in {lat}");
    }
    assert!(!lat.lines().any(|l| l == "inode"), "no inode IO: {lat}");
    let off = svg_doc(&c.join("offset-0.svg"));
    for s in ["read", "readahead", "write", "offset (% of the device)"] {
        assert!(off.lines().any(|l| l == s), "{s} in {off}");
    }
    assert_eq!(
        r.files.charts.len(),
        f.counters.len() + 5,
        "{:?}",
        r.files.charts
    );
    for p in r
        .files
        .charts
        .iter()
        .filter(|p| p.extension().unwrap() == "svg")
    {
        svg_doc(p);
    }

    // PNG: magic, decodes, expected size.
    let png_bytes = std::fs::read(c.join("offset-0.png")).unwrap();
    assert_eq!(&png_bytes[..8], b"\x89PNG\r\n\x1a\n");
    let dec = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (900, 420));
    // Not blank: some pixels are neither white nor black (the coloured points).
    assert!(buf
        .chunks(info.line_size / info.width as usize)
        .any(|p| p.len() >= 3 && p[0] != p[1]));

    // Flame graphs: folded stacks with the frames outermost first, the role as the leaf.
    let folded = std::fs::read_to_string(dir.join("flame-bytes.folded")).unwrap();
    let w0 = f.tables.totals[0].total_bytes();
    assert!(
        folded.contains(&format!(
            "ksys_write;vfs_write;generic_perform_write;folio_mark_dirty;\
             write(2) › generic_perform_write › folio_mark_dirty [wb:background];dd {w0}\n"
        )),
        "{folded}"
    );
    assert!(folded.contains("[lost];kworker/u8:2 "), "{folded}");
    assert!(
        folded
            .lines()
            .any(|l| l.starts_with("0xffffffff81000000;ext4_file_write_iter;")),
        "unknown frames in hex: {folded}"
    );
    let names = ioblame_attrib::intent_names(&f.tables, &sym);
    let lines = folded_stacks(&f.tables, &sym, &names, |a| u64::from(a == ActId(2)));
    assert_eq!(
        lines,
        ["jbd2_journal_commit_transaction;jbd2_journal_commit_transaction;jbd2/sda1-8 1"]
    );
    let flame = svg_doc(&dir.join("flame-bytes.svg"));
    assert!(flame.contains("ksys_write"), "{flame}");
    svg_doc(&dir.join("flame-iotime.svg"));
}

/// The page stays legible on a large trace: chart text is at least 12 px at the charts' own
/// size, which the page keeps; long tables scroll in their own box; the page's summary leaves
/// the file list to the Files section.
#[test]
fn page_is_legible() {
    let f = fixture(0);
    let dir = out_dir("legible");
    let r = write_report(&f, &dir);
    for p in r
        .files
        .charts
        .iter()
        .filter(|p| p.extension().unwrap() == "svg")
    {
        let text = std::fs::read_to_string(p).unwrap();
        let sizes: Vec<f64> = text
            .split("font-size=\"")
            .skip(1)
            .map(|x| x.split('"').next().unwrap().parse().unwrap())
            .collect();
        assert!(!sizes.is_empty(), "{}", p.display());
        let min = sizes.iter().copied().fold(f64::MAX, f64::min);
        assert!(min >= 12.0, "{}: text of {min} px", p.display());
    }
    let html = std::fs::read_to_string(&r.files.html).unwrap();
    assert!(
        html.contains("minmax(min(100%,560px),1fr)"),
        "charts side by side only where they fit"
    );
    assert!(html.contains("<meta name=viewport content=\"width=device-width, initial-scale=1\">"));
    assert!(html.contains("@media (max-width:520px)"), "a phone layout");
    assert!(html.contains("<div class=scroll><table class=sortable id=acts>"));
    assert!(html.contains("<div class=scroll><table class=sortable id=intents>"));
    // The summary is cards and bars, not preformatted text.
    assert!(!html.contains("<pre"), "no preformatted block");
    for card in [
        "written",
        "read",
        "readahead",
        "unknown origin",
        "lost records",
    ] {
        assert!(
            html.contains(&format!("<div class=k>{card}</div>")),
            "card {card}"
        );
    }
    assert!(html.contains("<div id=writers><h3>Top writers</h3>"));
    assert!(html.contains("<div id=readers><h3>Top readers</h3>"));
    // Every section has its link in the navigation.
    for id in [
        "glance",
        "throughput",
        "explore",
        "flames",
        "charts",
        "counters",
        "files",
    ] {
        assert!(html.contains(&format!("<a href=\"#{id}\">")), "nav to {id}");
        assert!(
            html.contains(&format!("<section id=\"{id}\">")),
            "section {id}"
        );
    }
    assert!(
        r.summary_text.contains("Written to"),
        "the terminal still says where"
    );
}

/// IO on several devices: one position chart per device (each scaled to its own size), the
/// busiest first, at most four; the page says how many are left out.
#[test]
fn offset_charts_per_device() {
    let f = fixture(0);
    let dir = out_dir("devices");
    let devs: Vec<ioblame_format::BlockDevice> = (0..6u32)
        .map(|i| ioblame_format::BlockDevice {
            name: format!("sd{}", (b'a' + i as u8) as char),
            major: 8,
            minor: 16 * i,
            size_sectors: 1 << (20 + i),
            logical_block_size: 512,
            ..Default::default()
        })
        .collect();
    let input = ioblame_report::ReportInput {
        block_devices: devs.clone(),
        ..Default::default()
    };
    let mut w = ioblame_report::ReportWriter::create(&dir, input).unwrap();
    // Device i gets 1 + i IOs per fixture IO, reads only on sdf: sdf, sde, sdd, sdc charted.
    for io in &f.ios {
        for (i, d) in devs.iter().enumerate() {
            for _ in 0..=i {
                let mut x = io.clone();
                x.dev = d.kernel_dev();
                x.dir = if i == 5 {
                    ioblame_attrib::Dir::R
                } else {
                    ioblame_attrib::Dir::W
                };
                w.push_io(&x, &f.tables).unwrap();
            }
        }
    }
    let r = w.finish(&f.tables, &f.counters, &f.summary, &sym).unwrap();
    let c = dir.join("charts");
    for (n, name, size) in [
        (0, "sdf (8:80", "16.00 GiB"),
        (1, "sde (8:64", "8.00 GiB"),
        (3, "sdc (8:32", "2.00 GiB"),
    ] {
        let text = svg_doc(&c.join(format!("offset-{n}.svg")));
        assert!(
            text.contains(&format!("IO position on {name}, {size}) over time")),
            "{n}: {text}"
        );
        assert!(
            text.lines().any(|l| l == "offset (% of the device)"),
            "{text}"
        );
        assert!(text.lines().any(|l| l == "time since start (s)"), "{text}");
        assert!(c.join(format!("offset-{n}.png")).is_file());
    }
    assert!(!c.join("offset-4.svg").exists(), "at most four devices");
    // sdf only read, sde only wrote: the points are each device's own.
    let sdf = std::fs::read_to_string(c.join("offset-0.svg")).unwrap();
    let sde = std::fs::read_to_string(c.join("offset-1.svg")).unwrap();
    let (read, write) = ("fill=\"#0072B2\"", "fill=\"#D55E00\"");
    assert!(sdf.matches(read).count() > 10 && sdf.matches(write).count() <= 2);
    assert!(sde.matches(write).count() > 10 && sde.matches(read).count() <= 2);
    let html = std::fs::read_to_string(&r.files.html).unwrap();
    assert!(html.contains("2 more devices with IO not charted"));
    assert!(html.contains("IO position on sdf (8:80, 16.00 GiB): 240 IOs, "));
}

/// One code path taken by several roles is one tower (issue 6: "the widest tower is the
/// code path that caused the most IO, with the role on top").
#[test]
fn flame_graph_towers_are_code_paths() {
    let mut f = fixture(0);
    // Acts 1 and 5 both read through intent 3; give them different roles.
    f.tables.acts[1].role = RoleId(0);
    let names = ioblame_attrib::intent_names(&f.tables, &sym);
    let lines = folded_stacks(&f.tables, &sym, &names, |a| {
        u64::from(a == ActId(1) || a == ActId(5)) * 10
    });
    assert_eq!(
        lines,
        [
            "filemap_read;ext4_mpage_readpages;submit_bio;filemap_read › ext4_mpage_readpages;\
             <script>alert(1)</script> 10",
            "filemap_read;ext4_mpage_readpages;submit_bio;filemap_read › ext4_mpage_readpages;\
             dd 10",
        ]
    );
    // Drawn, the code path is one frame 20 wide at the root.
    let svg = ioblame_report::flame_svg(&lines, "t", "bytes", false).unwrap();
    assert!(
        svg.contains("<title>filemap_read (20 bytes, 100.00%)</title>"),
        "{svg}"
    );
}

#[test]
fn html_escapes_trace_text() {
    let f = fixture(0);
    let dir = out_dir("escape");
    write_report(&f, &dir);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(!html.contains("<script>alert"), "raw comm in the page");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("/data/big&amp;file.bin"));
    assert!(
        !html.contains("http://") || !html.contains("src=\"http"),
        "no network"
    );
    // No file name comes from the trace.
    for e in std::fs::read_dir(dir.join("charts")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'),
            "{name}"
        );
    }
}

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|n| {
            std::env::split_paths(&std::env::var_os("PATH")?)
                .map(|d| d.join(n))
                .find(|p| p.is_file())
        })
}

fn run_chromium(bin: &Path, profile: &Path, extra: &[String], url: &str) -> (String, String) {
    run_chromium_at(bin, profile, extra, url, (1300, 2400))
}

fn run_chromium_at(
    bin: &Path,
    profile: &Path,
    extra: &[String],
    url: &str,
    (w, h): (u32, u32),
) -> (String, String) {
    let out = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--enable-logging=stderr",
            // Verbose level 1 logs every file the page loads (FileURLLoader::Start).
            "--v=1",
            "--hide-scrollbars",
        ])
        .arg(format!("--window-size={w},{h}"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("run chromium");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What went wrong while Chromium showed the page at `url`, from its log: every console
/// message (Chromium 156 logs `console.error`, `console.log` and uncaught exceptions alike
/// as `INFO:CONSOLE:N] "..."`; the page should say nothing) and every file loaded besides
/// the page itself (a self-contained page loads none; a missing one fails silently).
fn page_problems(log: &str, url: &str) -> Vec<String> {
    pages_problems(log, &[url])
}

/// [`page_problems`] of a page made of `urls` (a frame and the page in it).
fn pages_problems(log: &str, urls: &[&str]) -> Vec<String> {
    log.lines()
        .filter(|l| {
            l.contains(":CONSOLE")
                || l.split_once("FileURLLoader::Start: ")
                    .is_some_and(|(_, u)| !urls.contains(&u.trim()))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn html_in_headless_chromium() {
    let Some(bin) = chromium() else {
        return missing("chromium (apt-get install chromium)");
    };
    let profile = tempfile::tempdir().unwrap();

    // First check the check: a throwaway page with a console error, a console message and a
    // missing image must be caught.
    let dir = out_dir("html-selftest");
    let bad = dir.join("bad.html");
    std::fs::write(
        &bad,
        "<!DOCTYPE html><html><body><img src=\"missing.png\" alt=x>\
         <script>console.error('injected-error');console.log('injected-log');</script>\
         </body></html>",
    )
    .unwrap();
    let bad_url = format!("file://{}", bad.canonicalize().unwrap().display());
    let (_, log) = run_chromium(&bin, profile.path(), &["--dump-dom".into()], &bad_url);
    let found = page_problems(&log, &bad_url);
    for what in ["injected-error", "injected-log", "missing.png"] {
        assert!(
            found.iter().any(|l| l.contains(what)),
            "the check misses {what}: {found:?}\n{log}"
        );
    }

    let f = fixture(0);
    let dir = out_dir("html");
    write_report_with_latency(&f, &dir);
    let page = dir.join("report.html").canonicalize().unwrap();
    let url = format!("file://{}", page.display());

    let (dom, log) = run_chromium(&bin, profile.path(), &["--dump-dom".into()], &url);
    std::fs::write(dir.join("chromium-dom.log"), &log).unwrap();
    assert!(
        log.contains(&format!("FileURLLoader::Start: {url}")),
        "the page was not loaded:\n{log}"
    );
    let found = page_problems(&log, &url);
    assert!(found.is_empty(), "the page logged or loaded: {found:#?}");
    let acts = dom
        .split("id=\"acts\"")
        .nth(1)
        .expect("acts table in the DOM")
        .split("</table>")
        .next()
        .unwrap();
    assert_eq!(acts.matches("<tr data-act=").count(), 6, "6 acts");
    assert!(dom.contains("id=\"intents\""));
    let svgs = dom.matches("<svg").count();
    // Counter charts, throughput, two latency charts, two flame graphs.
    assert!(svgs >= f.counters.len() + 5, "{svgs} svg elements");
    assert!(dom.contains("data:image/png;base64,"));
    assert!(dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    // The script ran: the filter counts the acts, and the first act's detail is shown (its
    // intent's stack, its files, the device time of its IOs and its IOs over time).
    assert!(dom.contains("6 of 6 acts"), "filter count");
    let detail = dom.split("id=\"detail\"").nth(1).expect("detail pane");
    for what in [
        "Stack of intent #",
        "Files of intent #",
        "Device time of its IOs",
        "Its IOs over time",
        "<li>submit_bio</li>",
    ] {
        assert!(detail.contains(what), "detail lacks {what}: {detail}");
    }

    // Screenshots at a laptop's width and a phone's, kept as test artefacts in
    // $CARGO_TARGET_DIR/report-test/html/; the page is shown in a frame of the width wanted.
    for (w, h) in [(1280, 2000), (390, 2400)] {
        let shot = dir.join(format!("report-{w}.png"));
        let framed = framed(&dir, "report.html", w, h);
        let (_, log) = run_chromium_at(
            &bin,
            profile.path(),
            &[format!("--screenshot={}", shot.display())],
            &framed,
            (w, h),
        );
        let found = pages_problems(&log, &[&url, &framed]);
        assert!(found.is_empty(), "the page logged or loaded: {found:#?}");
        assert!(shot.is_file(), "no screenshot:\n{log}");
        assert_not_blank(&shot, (w, h));
        assert_fits(&bin, profile.path(), &page, w);
    }

    // Filtering by a comm keeps the intents of the acts found (their rows name no comm),
    // and the detail leaves an act the filter hides for the first act shown.
    let shown = "function shown(t){return Array.prototype.filter.call(document.querySelectorAll(t+' tbody tr'),\
function(r){return r.style.display!=='none';}).map(function(r){return r.getAttribute(t==='#acts'?\
'data-act':'data-intent');}).join(',');}\
var q=document.getElementById('q');q.value='SCRIPT';q.dispatchEvent(new Event('input'));\
v=shown('#acts')+' | '+shown('#intents')+' | '+document.querySelector('#detail h3').textContent+' | '+\
document.getElementById('count').textContent;";
    let filtered = probe(&bin, profile.path(), &page, 1280, "filter", shown);
    assert_eq!(
        filtered, "5,1 | 3 | Act 5: <script>alert(1)</script> (pid 200) | 2 of 6 acts",
        "filter by a comm"
    );
}

/// The fixture's report with a latency section whose text is wider than a laptop's screen
/// (long act titles), as `ioblame report` writes one.
fn write_report_with_latency(f: &common::Fixture, dir: &Path) {
    let input = ioblame_report::ReportInput {
        paths: f.paths.clone(),
        traces: vec!["test.iob".to_string()],
        ..Default::default()
    };
    let mut w = ioblame_report::ReportWriter::create(dir, input).unwrap();
    let mut engine = ioblame_latency::Engine::default();
    for io in &f.ios {
        w.push_io(io, &f.tables).unwrap();
        engine.push_act_io(
            io.act.index(),
            io.queue_time,
            io.issue_time,
            io.complete_time,
        );
    }
    let title = format!(
        "== act 3: dd (pid 100) {} ==",
        "/data/a/long/path".repeat(12)
    );
    w.set_latency(ioblame_report::LatencySection {
        latency: engine.finish(),
        text: format!(
            "{title}\ninterval          n       min_us\nQ2C               5       12.000\n"
        ),
        dev_names: vec![],
    });
    w.set_blame(blame_section());
    w.finish(&f.tables, &f.counters, &f.summary, &sym).unwrap();
}

/// A blame section as `ioblame report` gives one: a victim (pid 200, a long comm) behind two
/// acts, a flush and its own IO, in two cgroups.
fn blame_section() -> ioblame_report::BlameSection {
    use ioblame_report::{BlameKind, BlameRow};
    let row = |kind: BlameKind, pid: Option<u32>, comm: &str, ns: u64, tail: u64| BlameRow {
        victim_act: 5,
        victim_pid: 200,
        victim_comm: "<script>alert(1)</script>".into(),
        victim_cgroup: Some("/db.slice".into()),
        kind: kind.clone(),
        culprit_act: (kind == BlameKind::Act).then_some(3),
        culprit_pid: pid,
        culprit_comm: pid.map(|_| comm.to_string()),
        culprit_cgroup: pid.map(|_| "/backup.slice".to_string()),
        culprit_via: (kind == BlameKind::Act).then(|| "page".to_string()),
        culprit_label: format!("{comm} (pid {})", pid.unwrap_or(0)),
        wait_ns: ns,
        tail_wait_ns: tail,
    };
    ioblame_report::BlameSection {
        text: "<script>x</script> waited 1.00 s in 10 IOs\n".into(),
        rows: vec![
            row(BlameKind::Own, None, "own", 100_000_000, 1_000_000),
            row(BlameKind::Idle, None, "idle", 50_000_000, 0),
            row(BlameKind::Act, Some(100), "dd", 800_000_000, 30_000_000),
            row(
                BlameKind::Flush,
                Some(101),
                "jbd2/sda1-8",
                50_000_000,
                2_000_000,
            ),
        ],
        notes: vec!["a note".into()],
    }
}

/// `blame.parquet` reads back with every row; the page has the section, its matrices (by
/// process, by cgroup) with the shares, and the chart; trace text is escaped.
#[test]
fn blame_section_round_trip() {
    let f = fixture(0);
    let dir = out_dir("blame");
    write_report_with_latency(&f, &dir);
    let df = read_parquet(&dir.join("blame.parquet"));
    assert_eq!(df.height(), 4);
    assert_eq!(sum_u64(&df, "wait_ns"), 1_000_000_000);
    assert_eq!(sum_u64(&df, "tail_wait_ns"), 33_000_000);
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let section = page
        .split("<section id=\"blame\">")
        .nth(1)
        .expect("blame section")
        .split("</section>")
        .next()
        .unwrap();
    for want in [
        "By process",
        "By cgroup",
        "/backup.slice",
        "80.0%",
        "flushes of jbd2/sda1-8 (pid 101)",
        "a note",
        "blame.txt",
    ] {
        assert!(section.contains(want), "{want} in {section}");
    }
    assert!(!section.contains("<script>"), "escaped");
    svg_doc(&dir.join("charts/blame-tail.svg"));
    assert_eq!(
        std::fs::read_to_string(dir.join("blame.txt")).unwrap(),
        "<script>x</script> waited 1.00 s in 10 IOs\n"
    );
}

/// The URL of a page showing `page` (a file of `dir`) in a frame `w` x `h` px, at its top
/// left corner: a window of that size shows exactly the page laid out at `w` px. (Headless
/// Chromium lays a window out at least 500 px wide.)
fn framed(dir: &Path, page: &str, w: u32, h: u32) -> String {
    let file = dir.join(format!("frame-{w}-{page}"));
    std::fs::write(
        &file,
        format!(
            "<!DOCTYPE html><html><body style=\"margin:0\"><iframe src=\"{page}\" \
style=\"border:0;display:block;width:{w}px;height:{h}px\"></iframe><script>\
window.addEventListener('message',function(e){{document.body.setAttribute('data-fit',e.data);}});\
</script></body></html>"
        ),
    )
    .unwrap();
    format!("file://{}", file.canonicalize().unwrap().display())
}

/// Runs `script` (JavaScript ending in an expression's value `v`, a string) in a copy of
/// `page` after it loaded, at `width` px in a [`framed`] page, and returns `v`: the copy
/// sends it to the frame, which writes it into the DOM Chromium dumps.
fn probe(bin: &Path, profile: &Path, page: &Path, width: u32, name: &str, script: &str) -> String {
    let dir = page.parent().unwrap();
    let html = std::fs::read_to_string(page).unwrap();
    let tail = format!(
        "<script>window.addEventListener('load',function(){{var v;{script}\nparent.postMessage(v,'*');}});</script></body>"
    );
    let copy = format!("probe-{name}-{width}.html");
    std::fs::write(dir.join(&copy), html.replacen("</body>", &tail, 1)).unwrap();
    let url = framed(dir, &copy, width, 1200);
    let (dom, log) = run_chromium_at(
        bin,
        profile,
        &["--dump-dom".into(), "--virtual-time-budget=5000".into()],
        &url,
        (width, 1200),
    );
    dom.split("data-fit=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .map(|v| {
            v.replace("&amp;", "&")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
        })
        .unwrap_or_else(|| panic!("the probe {name} did not run:\n{log}"))
}

/// The page at `width` px is no wider than the window: wide content (tables, charts, the
/// latency text) scrolls in its own box instead of widening the page. A [`probe`] gives the
/// page's width and the sections wider than their box.
fn assert_fits(bin: &Path, profile: &Path, page: &Path, width: u32) {
    let fit = probe(
        bin,
        profile,
        page,
        width,
        "fit",
        "var wide=[];document.querySelectorAll('section').forEach(function(s){\
if(s.scrollWidth>s.clientWidth+1){wide.push(s.id+':'+s.scrollWidth);}});\
v=document.documentElement.scrollWidth+' '+window.innerWidth+' '+wide.join(',');",
    );
    let mut parts = fit.splitn(3, ' ');
    let page_w: u32 = parts.next().unwrap().parse().unwrap();
    let window: u32 = parts.next().unwrap().parse().unwrap();
    let wide = parts.next().unwrap_or("");
    assert_eq!(window, width, "{fit}");
    assert!(
        page_w <= width && wide.is_empty(),
        "at {width} px the page is {page_w} px wide; sections wider than their box: {wide}"
    );
}

/// A screenshot of `size` with content: the page's own colours (header, bars, charts) and
/// a good share of pixels that are not background.
fn assert_not_blank(png_path: &Path, size: (u32, u32)) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), size, "{}", png_path.display());
    let channels = info.color_type.samples();
    let px: Vec<&[u8]> = buf[..info.buffer_size()].chunks(channels).collect();
    let background = px
        .iter()
        .filter(|p| p[..3].iter().all(|&c| c >= 0xf0))
        .count();
    let colours: std::collections::BTreeSet<[u8; 3]> = px
        .iter()
        .map(|p| [p[0] & 0xf0, p[1] & 0xf0, p[2] & 0xf0])
        .collect();
    let content = 1.0 - background as f64 / px.len() as f64;
    assert!(
        content > 0.1 && colours.len() > 20,
        "{} looks blank: {:.1}% content, {} colours",
        png_path.display(),
        content * 100.0,
        colours.len()
    );
    // The header's dark blue is at the top left, as the page draws it.
    assert!(
        px[0][2] < 0x60 && px[0][0] < 0x40,
        "{}: no header",
        png_path.display()
    );
}

/// Writes a report of the fixture giving only the IOs `keep` accepts (as `--devs` or the
/// hidden recorder do), while the tables' totals and the summary still count every IO.
fn write_report_of(
    f: &common::Fixture,
    dir: &Path,
    keep: impl Fn(&ioblame_attrib::Io) -> bool,
) -> ioblame_report::Report {
    let input = ioblame_report::ReportInput {
        paths: f.paths.clone(),
        ..Default::default()
    };
    let mut w = ioblame_report::ReportWriter::create(dir, input).unwrap();
    let mut counters = ioblame_counters::CounterSet::default_set();
    for io in f.ios.iter().filter(|io| keep(io)) {
        counters.record(io, &ioblame_counters::IoContext::for_io(&f.tables, io));
        w.push_io(io, &f.tables).unwrap();
    }
    w.finish(&f.tables, &counters, &f.summary, &sym).unwrap()
}

/// Per act, (bytes per direction, IOs) of the given IOs.
fn per_act(ios: &[&ioblame_attrib::Io], n: usize) -> Vec<([u64; 3], u64)> {
    let mut v = vec![([0u64; 3], 0u64); n];
    for io in ios {
        v[io.act.index()].0[io.dir.index()] += io.size;
        v[io.act.index()].1 += 1;
    }
    v
}

/// The summary's totals, unknown share and top lists count only the IOs the report was given
/// (a device selection leaves the others out), not the attribution's whole-trace summary.
#[test]
fn summary_counts_only_the_ios_given() {
    let f = fixture(0);
    // Leave out the direct writes (act 3) and the unknown ones (act 4).
    let keep = |io: &ioblame_attrib::Io| io.act != ActId(3) && io.act != ActId(4);
    let kept: Vec<_> = f.ios.iter().filter(|io| keep(io)).collect();
    let dir = out_dir("summary-subset");
    let r = write_report_of(&f, &dir, keep);
    let total: u64 = kept.iter().map(|i| i.size).sum();
    let first = r.summary_text.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "ioblame report: {} in {} IOs charged to 4 acts",
            ioblame_report::human_bytes(total),
            kept.len()
        )
    );
    let w: u64 = kept
        .iter()
        .filter(|i| i.dir == ioblame_attrib::Dir::W)
        .map(|i| i.size)
        .sum();
    assert!(
        r.summary_text.contains(&format!(
            "  {:<10} {:>11}",
            "write",
            ioblame_report::human_bytes(w)
        )),
        "{}",
        r.summary_text
    );
    assert!(
        r.summary_text.contains("unknown origin: 0 B in 0 IOs"),
        "{}",
        r.summary_text
    );
    assert!(!r.summary_text.contains(" direct "), "{}", r.summary_text);
    // The lost window (1.5 s) overlaps one read of act 1, kept.
    assert!(
        r.summary_text
            .contains("4.00 KiB of the IO shown overlapped them"),
        "{}",
        r.summary_text
    );
    // The same in the data: each window, its records and the bytes touching it.
    let lw = read_parquet(&dir.join("lost_windows.parquet"));
    assert_eq!(lw.height(), f.summary.lost_windows.len());
    assert!(lw.height() > 0);
    assert_eq!(sum_u64(&lw, "records"), f.summary.lost_records);
    assert_eq!(sum_u64(&lw, "bytes"), 4096);
    assert_eq!(
        sum_u64(&lw, "start_ns"),
        f.summary.lost_windows.iter().map(|w| w.start).sum::<u64>()
    );

    // Nothing given: no IO anywhere in the summary.
    let r = write_report_of(&f, &out_dir("summary-none"), |_| false);
    assert!(
        r.summary_text
            .starts_with("ioblame report: 0 B in 0 IOs charged to 0 acts\n"),
        "{}",
        r.summary_text
    );
    assert!(
        r.summary_text
            .contains("0 B of the IO shown overlapped them"),
        "{}",
        r.summary_text
    );
}

/// Roles are threads: the summary and the page name a task by its own pid (ioblame's
/// `pid-N`), with its process when it is not the main thread.
#[test]
fn threads_are_named_by_their_own_pid() {
    let mut f = fixture(0);
    f.tables.roles[0].tid = 101;
    let dir = out_dir("threads");
    let r = write_report(&f, &dir);
    assert!(
        r.summary_text.lines().any(|l| l.contains(" dd ")
            && l.contains(" pid 101 tgid 100 ")
            && l.contains("direct")),
        "{}",
        r.summary_text
    );
    assert!(r.summary_text.contains("  pid 200  "), "{}", r.summary_text);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<td class=n data-v=\"101\">101 (tgid 100)</td>"));
}

/// Comms and paths from the trace never put control characters on the terminal: the summary
/// escapes them as the counters outputs do; the page shows the same escapes.
#[test]
fn control_characters_are_escaped() {
    let mut f = fixture(0);
    f.tables.roles[0].comm = "d\nd\u{1b}]0;owned\u{7}".to_string();
    f.paths.insert(
        ioblame_attrib::FileKey {
            dev: common::DEV,
            ino: 12,
        },
        "/tmp/a\rb".to_string(),
    );
    let dir = out_dir("control");
    let r = write_report(&f, &dir);
    assert!(
        r.summary_text
            .lines()
            .any(|l| l.contains(r" d\nd\x1b]0;owned\x07 ")
                && l.contains(" pid 100 ")
                && l.contains(" direct ")
                && l.ends_with(r" /tmp/a\rb")),
        "{}",
        r.summary_text
    );
    assert!(!r.summary_text.chars().any(|c| c.is_control() && c != '\n'));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains(r"<td class=f>d\nd\x1b]0;owned\x07</td>"));
    let folded = std::fs::read_to_string(dir.join("flame-bytes.folded")).unwrap();
    assert!(folded.contains(r";d\nd\x1b]0:owned\x07 "), "{folded}");
}

/// Every table agrees with ios.parquet when some IOs are left out (the recorder's, or a
/// device's): `sum(ios.size) group by act == acts.bytes`, and roles, files, intents and the
/// flame graph count the same IOs.
#[test]
fn tables_count_only_the_ios_given() {
    let f = fixture(0);
    let keep = |io: &ioblame_attrib::Io| io.act != ActId(0);
    let kept: Vec<_> = f.ios.iter().filter(|io| keep(io)).collect();
    let dir = out_dir("tables-subset");
    let r = write_report_of(&f, &dir, keep);
    assert_eq!(r.ios_rows, kept.len() as u64);
    let want = per_act(&kept, f.tables.acts.len());
    let acts = read_parquet(&dir.join("acts.parquet"));
    let col = |name: &str| -> Vec<u64> {
        let c = acts
            .column(name)
            .unwrap()
            .as_materialized_series()
            .u64()
            .unwrap()
            .clone();
        (0..c.len()).map(|i| c.get(i).unwrap()).collect()
    };
    let (r_, a_, w_) = (
        col("read_bytes"),
        col("readahead_bytes"),
        col("write_bytes"),
    );
    let bytes = col("bytes");
    let ios: Vec<u64> = col("read_ios")
        .iter()
        .zip(col("readahead_ios"))
        .zip(col("write_ios"))
        .map(|((a, b), c)| a + b + c)
        .collect();
    for (id, (b, n)) in want.iter().enumerate() {
        assert_eq!([r_[id], a_[id], w_[id]], *b, "act {id} bytes per direction");
        assert_eq!(bytes[id], b.iter().sum::<u64>(), "act {id} bytes");
        assert_eq!(ios[id], *n, "act {id} IOs");
    }
    let total: u64 = kept.iter().map(|i| i.size).sum();
    for t in ["roles", "files", "intents"] {
        let df = read_parquet(&dir.join(format!("{t}.parquet")));
        let s = sum_u64(&df, "read_bytes")
            + sum_u64(&df, "readahead_bytes")
            + sum_u64(&df, "write_bytes");
        assert_eq!(s, total, "{t}.parquet");
    }
    let folded = std::fs::read_to_string(dir.join("flame-bytes.folded")).unwrap();
    let flame: u64 = folded
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(flame, total, "{folded}");
    assert!(
        !folded.contains("folio_mark_dirty"),
        "act 0 left out: {folded}"
    );
    assert!(!r.summary_text.contains("via page"), "{}", r.summary_text);
}

#[test]
fn unwritable_outdir_is_an_error() {
    let dir = out_dir("unwritable");
    let file = dir.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let err =
        ioblame_report::ReportWriter::create(file.join("out"), Default::default()).unwrap_err();
    assert!(err.to_string().contains("a-file"), "{err}");
}

/// The strings of a column, nulls as `None`.
fn opt_strs(df: &DataFrame, col: &str) -> Vec<Option<String>> {
    let ca = df.column(col).unwrap().str().unwrap().clone();
    ca.iter().map(|v| v.map(str::to_string)).collect()
}

#[test]
fn cgroups_in_the_tables_and_the_page() {
    // The fixture's roles in three cgroups (one with a hostile name); the kworker's unknown.
    let mut f = fixture(0);
    let ids = [9u64, 7, 1, 0];
    for (r, id) in f.tables.roles.iter_mut().zip(ids) {
        r.cgroup = id;
    }
    let table = [
        (1, "/"),
        (7, "/user.slice/<b>"),
        (9, "/db.slice"),
        (42, "/gone"),
    ];
    let names = ioblame_attrib::CgroupNames::new(table.map(|(id, p)| ioblame_format::Cgroup {
        id,
        path: p.to_string(),
    }))
    .unwrap();
    let path_of = |id: u64| table.iter().find(|t| t.0 == id).map(|t| t.1.to_string());
    let dir = out_dir("cgroups");
    let input = ioblame_report::ReportInput {
        paths: f.paths.clone(),
        cgroups: Some(names.clone()),
        ..Default::default()
    };
    let mut w = ioblame_report::ReportWriter::create(&dir, input).unwrap();
    for io in &f.ios {
        w.push_io(io, &f.tables).unwrap();
    }
    let r = w.finish(&f.tables, &f.counters, &f.summary, &sym).unwrap();

    // The tables read back: each row's role's cgroup, null where unknown.
    let acts = read_parquet(&dir.join("acts.parquet"));
    let want: Vec<Option<String>> = f
        .tables
        .acts
        .iter()
        .map(|a| path_of(f.tables.roles[a.role.index()].cgroup))
        .collect();
    assert_eq!(opt_strs(&acts, "cgroup"), want);
    assert_eq!(want[4], None, "the kworker's act");
    let roles = read_parquet(&dir.join("roles.parquet"));
    let want: Vec<Option<String>> = ids.iter().map(|&id| path_of(id)).collect();
    assert_eq!(opt_strs(&roles, "cgroup"), want);
    assert_eq!(
        roles.get_column_names().last().map(|c| c.as_str()),
        Some("cgroup"),
        "added at the end"
    );

    // The page: one row per cgroup with IO, most bytes first, the unknown as `-`; the same
    // sums as the tables.
    let html = std::fs::read_to_string(&r.files.html).unwrap();
    assert!(html.contains("<section id=\"cgroups\"><h2>Cgroups</h2>"));
    let start = html.find("<table class=sortable id=cgroups>").unwrap();
    let end = start + html[start..].find("</table>").unwrap();
    let rows: Vec<&str> = html[start..end].split("<tr><td class=p>").skip(1).collect();
    let mut per: std::collections::BTreeMap<Option<String>, u64> = Default::default();
    for (a, t) in f.tables.acts.iter().zip(&f.tables.totals) {
        *per.entry(path_of(f.tables.roles[a.role.index()].cgroup))
            .or_default() += t.total_bytes();
    }
    let mut order: Vec<(u64, Option<String>)> = per.into_iter().map(|(k, v)| (v, k)).collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    assert_eq!(rows.len(), order.len(), "{}", &html[start..end]);
    for (row, (bytes, cg)) in rows.iter().zip(&order) {
        let shown = cg
            .as_deref()
            .unwrap_or("-")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert!(row.starts_with(&format!("{shown}</td>")), "{row}");
        let cells: Vec<u64> = row
            .split("data-v=\"")
            .skip(1)
            .map(|c| c[..c.find('"').unwrap()].parse().unwrap())
            .collect();
        assert_eq!(cells[0] + cells[2], *bytes, "{row}");
    }
    assert!(!html.contains("/user.slice/<b>"), "escaped");
    assert!(!html.contains("/gone"), "no IO, no row");
    // The chart names the cgroups with the most bytes and both directions.
    let chart = svg_doc(&dir.join("charts/cgroups.svg"));
    assert!(
        chart.contains("/db.slice") && chart.contains("written"),
        "{chart}"
    );
    assert!(r.files.charts.contains(&dir.join("charts/cgroups.svg")));

    // Without a cgroup table: null columns, no section, no chart.
    let dir = out_dir("no-cgroups");
    let r = write_report(&f, &dir);
    let acts = read_parquet(&dir.join("acts.parquet"));
    assert!(opt_strs(&acts, "cgroup").iter().all(Option::is_none));
    let html = std::fs::read_to_string(&r.files.html).unwrap();
    assert!(!html.contains("<section id=\"cgroups\">"));
    assert!(!html.contains("id=cgroups"));
    assert!(!dir.join("charts/cgroups.svg").exists());
}
