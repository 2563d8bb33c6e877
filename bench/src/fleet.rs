//! The fleet's per-trace costs (issue 21's benchmark):
//!
//! * `ioblame-bench paths TRACE`: an analysis's path lookup, the whole FILES table
//!   (`Trace::paths`, what every command did) against the charged inodes only
//!   (`ioblame_pipeline::charged_paths`, what they do now), each from a fresh open of the
//!   trace, interleaved.
//! * `ioblame-bench fleet-vs OUT --fixtures DIR`: `ioblame export` of the fixture traces
//!   with one job and with two (wall, CPU, and CPU per wall: both cores busy is 2.0), then a
//!   dataset of `--traces` traces made from those exports under many host names and dates
//!   (files copied, as an export of as many hosts would write them), and `ioblame fleet`
//!   over it: the whole fleet, and one host glob that prunes to a tenth of it.
//!
//! Both run the release `ioblame` beside this binary (`fleet-vs`) or the same library calls
//! (`paths`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context as _, Result};

use crate::blktrace::{run, Run};

/// Opens `path` and runs the default analysis (all devices, all IO); the tables.
fn analyse(path: &Path) -> Result<(ioblame_pipeline::Input, ioblame_attrib::Tables)> {
    let mut notes = Vec::new();
    let input = ioblame_pipeline::open_trace(&[path.to_path_buf()], None, &mut notes)?;
    let (symbols, _) = ioblame_pipeline::symbols_of(&input);
    let devs = ioblame_counters::DevSelection::all();
    let all = ioblame_pipeline::ResolvedScope::all();
    let opts = ioblame_pipeline::Options {
        symbols: &symbols,
        devs: &devs,
        show_recorder: false,
        scope: &all,
        user_symbols: &Default::default(),
    };
    let a = ioblame_pipeline::analyze(&input, &opts, |_, _| {}, |_| {});
    Ok((input, a.tables))
}

/// Median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `paths TRACE`: the analysis plus each way of naming the files, interleaved.
pub fn paths(trace: &Path, repeat: usize) -> Result<()> {
    let (t, tables) = analyse(trace)?;
    let files = t.paths().len();
    let charged = ioblame_pipeline::charged_paths(&t, &tables).len();
    drop(t);
    println!(
        "{}: FILES names {files} inodes; the acts are charged to {charged} named ones; \
median of {repeat} interleaved rounds",
        trace.display()
    );
    let (mut whole, mut only) = (Vec::new(), Vec::new());
    let (mut whole_lookup, mut only_lookup) = (Vec::new(), Vec::new());
    for _ in 0..repeat {
        for charged_only in [false, true] {
            let t0 = Instant::now();
            let (t, tables) = analyse(trace)?;
            let t1 = Instant::now();
            let n = if charged_only {
                ioblame_pipeline::charged_paths(&t, &tables).len()
            } else {
                t.paths().len()
            };
            std::hint::black_box(n);
            let (total, lookup) = (t0.elapsed().as_secs_f64(), t1.elapsed().as_secs_f64());
            if charged_only {
                only.push(total);
                only_lookup.push(lookup);
            } else {
                whole.push(total);
                whole_lookup.push(lookup);
            }
        }
    }
    let (w, o) = (median(&mut whole), median(&mut only));
    let (wl, ol) = (median(&mut whole_lookup), median(&mut only_lookup));
    println!("{:<44} {:>10} {:>12}", "", "total s", "paths s");
    println!(
        "{:<44} {w:>10.3} {wl:>12.3}",
        "analysis + whole FILES table (before)"
    );
    println!(
        "{:<44} {o:>10.3} {ol:>12.3}",
        "analysis + charged inodes only (now)"
    );
    println!(
        "ratio before/now: total {:.2}x, path lookup {:.1}x",
        w / o,
        wl / ol.max(1e-9)
    );
    Ok(())
}

/// Every `*.parquet` file under `dir` (recursively).
fn parquet_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| d.display().to_string())? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn show(name: &str, r: &Run) {
    println!(
        "{name:<52} {:>8.3} {:>8.3} {:>9.2} {:>8} MiB",
        r.secs,
        r.cpu_secs,
        r.cpu_secs / r.secs,
        r.max_rss_kib / 1024
    );
}

/// `fleet-vs`: export speed with one and two jobs, then `ioblame fleet` over `traces`
/// traces built in `out` from the exports of the traces in `fixtures`.
pub fn fleet_vs(out: &Path, fixtures: &Path, traces: usize, repeat: usize) -> Result<()> {
    let ioblame = std::env::current_exe()?.with_file_name("ioblame");
    if !ioblame.exists() {
        bail!("{}: build the release analyzer first", ioblame.display());
    }
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(fixtures)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("baseline.toml").exists() && !p.ends_with("blktrace-buffered"))
        // An ioblame fixture keeps its trace in `trace/`; a blktrace one is its own directory.
        .map(|p| {
            if p.join("trace").is_dir() {
                p.join("trace")
            } else {
                p
            }
        })
        .collect();
    inputs.sort();
    if inputs.is_empty() {
        bail!("no fixture traces in {}", fixtures.display());
    }
    if out.exists() {
        bail!("{} exists; give a new directory", out.display());
    }
    std::fs::create_dir_all(out)?;
    let seed = out.join("seed");
    println!(
        "export of {} traces ({}); best of {repeat} interleaved rounds",
        inputs.len(),
        inputs
            .iter()
            .filter_map(|p| p.strip_prefix(fixtures).ok()?.to_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "{:<52} {:>8} {:>8} {:>9} {:>12}",
        "", "wall s", "CPU s", "CPU/wall", "peak RSS"
    );
    let mut best: [Option<Run>; 2] = [None, None];
    for round in 0..repeat {
        for (i, jobs) in ["1", "2"].into_iter().enumerate() {
            let ds = out.join(format!("export-{jobs}-{round}"));
            let r = run(Command::new(&ioblame)
                .args(["export", "--jobs", jobs, "--dataset"])
                .arg(&ds)
                .args(&inputs))?;
            if best[i].as_ref().is_none_or(|b| r.secs < b.secs) {
                best[i] = Some(r);
            }
            if round == 0 && jobs == "2" {
                std::fs::rename(&ds, &seed)?;
            } else {
                std::fs::remove_dir_all(&ds)?;
            }
        }
    }
    for (jobs, r) in ["1", "2"].iter().zip(&best) {
        if let Some(r) = r {
            show(&format!("ioblame export --jobs {jobs}"), r);
        }
    }
    // The seed's traces: each one's files, by table.
    let files = parquet_files(&seed)?;
    let mut seed_traces: Vec<Vec<(String, PathBuf)>> = Vec::new();
    let ids: std::collections::BTreeSet<String> = files
        .iter()
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_string()))
        .collect();
    for id in &ids {
        let mut v = Vec::new();
        for p in files
            .iter()
            .filter(|p| p.file_stem().is_some_and(|s| s == id.as_str()))
        {
            let table = p
                .ancestors()
                .nth(3)
                .and_then(|d| d.file_name()?.to_str())
                .context("dataset layout")?
                .to_string();
            v.push((table, p.clone()));
        }
        seed_traces.push(v);
    }
    let fleet = out.join("fleet");
    std::fs::create_dir_all(&fleet)?;
    std::fs::copy(
        seed.join("_ioblame_dataset.json"),
        fleet.join("_ioblame_dataset.json"),
    )?;
    let hosts = traces.div_ceil(10).max(1);
    let mut bytes = 0u64;
    for i in 0..traces {
        let (host, day) = (i % hosts, i / hosts);
        let date = format!("2026-10-{:02}", 1 + day % 28);
        for (table, src) in &seed_traces[i % seed_traces.len()] {
            let dir = fleet.join(format!("{table}/host=h{host:04}/date={date}"));
            std::fs::create_dir_all(&dir)?;
            let name = src.file_name().context("file name")?;
            bytes += std::fs::copy(src, dir.join(name))?;
        }
    }
    println!(
        "fleet dataset: {traces} traces ({} seeds) on {hosts} hosts, {:.1} MiB in {} files",
        seed_traces.len(),
        bytes as f64 / 1048576.0,
        parquet_files(&fleet)?.len()
    );
    let queries: [(&str, Vec<&str>); 2] = [
        ("ioblame fleet DIR --json (all traces)", vec!["--json"]),
        (
            "ioblame fleet DIR --json --host 'h000*' (a tenth)",
            vec!["--json", "--host", "h000*"],
        ),
    ];
    let mut best: Vec<Option<Run>> = vec![None, None];
    for _ in 0..repeat {
        for (i, (_, args)) in queries.iter().enumerate() {
            let r = run(Command::new(&ioblame).arg("fleet").arg(&fleet).args(args))?;
            if best[i].as_ref().is_none_or(|b| r.secs < b.secs) {
                best[i] = Some(r);
            }
        }
    }
    println!(
        "{:<52} {:>8} {:>8} {:>9} {:>12}",
        "", "wall s", "CPU s", "CPU/wall", "peak RSS"
    );
    for ((name, _), r) in queries.iter().zip(&best) {
        if let Some(r) = r {
            show(name, r);
        }
    }
    Ok(())
}
