//! Per-stage measurements, each in a fresh child process so peak memory is its own.
//!
//! Every stage is timed from `Trace::open` (which maps the ring files and reads their index)
//! to its last event, and includes the stages before it:
//!
//! * `decompress`: every chunk decompressed (in parallel), nothing else;
//! * `decode`: every chunk decompressed and decoded to typed events (in parallel), no merge;
//! * `merge`: the analyzer's stream (`for_each_event`: parallel decode windows merged into
//!   one time-ordered stream) with a consumer that only counts;
//! * `attribute`: what `ioblame` does end to end (`ioblame_pipeline::analyze`): the stream
//!   fed to the attribution with the trace's kernel symbols, every charged IO counted per act
//!   and handed to a consumer with the tables at hand, then `finish()` and its leftover IOs;
//! * `blame`: `attribute` with the blame pass of `ioblame blame` (`docs/latency.md`,
//!   "Blame"): every event shown to the engine, every charged IO pushed to it (a victim too),
//!   and every victim's Q2C split at the end. Not in [`STAGES`]: `blame-vs` times it against
//!   `attribute` in interleaved rounds.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use ioblame_counters::DevSelection;
use ioblame_decode::stream::{for_each_event, StreamOptions};
use ioblame_decode::Decoder;
use ioblame_format::Trace;

/// The stages, each including the ones before it.
pub const STAGES: &[&str] = &["decompress", "decode", "merge", "attribute"];

/// What one measurement printed.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Records (decompress) or events (other stages) processed.
    pub events: u64,
    /// Wall seconds of the stage, from opening the trace.
    pub secs: f64,
    /// Peak resident memory of the process (`VmHWM`), KiB: heap plus the pages of the
    /// memory-mapped trace files that were read.
    pub peak_kib: u64,
    /// Peak anonymous resident memory (`RssAnon`, sampled every 2 ms), KiB: the heap alone;
    /// 0 when not sampled.
    pub peak_anon_kib: u64,
    /// What the stage said about its result (attribute: acts, bytes charged).
    pub note: String,
    /// Wall seconds of the whole child process (start-up and exit included).
    pub process_secs: f64,
}

impl Figures {
    /// Events per second.
    pub fn rate(&self) -> f64 {
        self.events as f64 / self.secs
    }
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Samples `RssAnon` until finished (if started with `sample`; else it reports 0).
struct AnonPeak {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AnonPeak {
    fn start(sample: bool) -> AnonPeak {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let (s, p) = (stop.clone(), peak.clone());
        let thread = sample.then(|| {
            std::thread::spawn(move || loop {
                p.fetch_max(status_kib("RssAnon:"), Ordering::Relaxed);
                if s.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            })
        });
        AnonPeak { stop, peak, thread }
    }
    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

/// Runs `stage` on `trace` with a pool of `threads`, in this process; prints the figures
/// (`events secs peak_kib peak_anon_kib`, then the note). Without `sample`, no thread
/// samples the anonymous memory, and its peak prints as 0.
pub fn measure_here(stage: &str, threads: usize, trace: &Path, sample: bool) -> Result<()> {
    if !STAGES.contains(&stage) && stage != "blame" && stage != "timeline" {
        bail!("unknown stage {stage} (expected {})", STAGES.join(", "));
    }
    let so = StreamOptions::default();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let anon = AnonPeak::start(sample);
    let t0 = Instant::now();
    let mut note = String::new();
    let events = pool.install(|| -> Result<u64> {
        let t = Trace::open(trace).with_context(|| format!("opening {}", trace.display()))?;
        Ok(match stage {
            "decompress" => t
                .par_map_chunks(|c, r| r.map(|_| c.header.records as u64).unwrap_or(0))
                .iter()
                .sum(),
            "decode" => {
                let d = Decoder::new(t.header(), t.metadata());
                t.par_map_chunks(|_, r| {
                    r.map(|ch| d.decode_chunk(&ch).events.len() as u64)
                        .unwrap_or(0)
                })
                .iter()
                .sum()
            }
            "merge" => {
                let d = Decoder::new(t.header(), t.metadata());
                let mut n = 0u64;
                for_each_event(&t, &d, &so, |_| n += 1);
                n
            }
            _ => {
                // What `ioblame` runs, every device selected and every IO counted.
                let t = ioblame_pipeline::Input::from(t);
                let (symbols, _) = ioblame_pipeline::symbols_of(&t);
                let all = ioblame_pipeline::ResolvedScope::all();
                let opts = ioblame_pipeline::Options {
                    symbols: &symbols,
                    devs: &DevSelection::all(),
                    show_recorder: true,
                    scope: &all,
                    user_symbols: &Default::default(),
                };
                let blame = stage == "blame";
                let engine = std::cell::RefCell::new(ioblame_latency::BlameEngine::new());
                // `ioblame timeline`'s side: its feed, then the file written.
                let timeline = (stage == "timeline").then(|| {
                    let page = t.trace().header().page_size.max(512) as u64;
                    ioblame_timeline::Feed::new(page, true)
                });
                let dirtied = timeline.as_ref().map(|f| {
                    |d: &ioblame_attrib::Dirtied, tables: &ioblame_attrib::Tables| {
                        f.dirtied(d, tables)
                    }
                });
                let a = ioblame_pipeline::analyze_logged(
                    &t,
                    &opts,
                    |ev| {
                        if blame {
                            engine.borrow_mut().push_event(ev);
                        }
                        if let Some(f) = &timeline {
                            f.event(ev);
                        }
                    },
                    |io, tables| {
                        std::hint::black_box(tables.acts.len());
                        if blame {
                            let mut e = engine.borrow_mut();
                            ioblame_pipeline::blame::push_io(&mut e, io, tables, |_, _| true);
                        }
                        if let Some(f) = &timeline {
                            f.io(io, tables);
                        }
                    },
                    |_, _| {},
                    dirtied,
                    |_| {},
                );
                if let Some(f) = timeline {
                    note = write_timeline(f, &a.tables, &symbols)?;
                }
                if blame {
                    let t = Instant::now();
                    let b = engine.into_inner().finish();
                    let finish = t.elapsed().as_secs_f64();
                    let culprits: usize =
                        b.victims.iter().map(|v| b.culprits_of(v).len()).sum();
                    note = format!(
                        "blame: {} victims, {culprits} (victim, culprit) pairs, {} requests; the split at the end (`finish`) {finish:.3} s",
                        b.victims.len(),
                        b.stats.requests
                    );
                }
                let (ios, bytes) = a.tables.totals.iter().fold((0, 0), |(n, b), t| {
                    (n + t.total_ios(), b + t.total_bytes())
                });
                if !note.is_empty() {
                    note.push('\n');
                }
                note += &format!(
                    "attribution: {ios} IOs, {:.1} GiB, {} acts, {} roles, {} intents, {:.2}% of the bytes unknown",
                    bytes as f64 / (1u64 << 30) as f64,
                    a.tables.acts.len(),
                    a.tables.roles.len(),
                    a.tables.intents.len(),
                    100.0 * a.summary.unknown_bytes as f64 / bytes.max(1) as f64
                );
                a.stream.events
            }
        })
    })?;
    let secs = t0.elapsed().as_secs_f64();
    let peak_anon = anon.finish();
    println!("{events} {secs:.6} {} {peak_anon}", status_kib("VmHWM:"));
    if !note.is_empty() {
        println!("{note}");
    }
    Ok(())
}

/// Writes the timeline `f` collected (named by `tables` and `symbols`, the files by inode) to
/// a temporary file, as `ioblame timeline` does; its figures as a note.
fn write_timeline(
    f: ioblame_timeline::Feed,
    tables: &ioblame_attrib::Tables,
    symbols: &ioblame_decode::Symbolizer,
) -> Result<String> {
    let c = f.finish();
    let intents = ioblame_attrib::intent_names(tables, symbols);
    let stacks: Vec<String> = tables
        .intents
        .iter()
        .map(|it| {
            let frames: Vec<String> = it.stack.iter().map(|&a| symbols.format_frame(a)).collect();
            frames.join("\n")
        })
        .collect();
    let path = |_: u32, ino: u64| Some(format!("/data/file-{ino}"));
    let device = |dev: u32| format!("{}:{}", dev >> 20, dev & 0xfffff);
    let names = ioblame_timeline::Names {
        tables,
        intents: &intents,
        stacks: &stacks,
        path: &path,
        device: &device,
    };
    let file = std::env::temp_dir().join(format!(
        "ioblame-bench-{}.perfetto-trace",
        std::process::id()
    ));
    let out = std::io::BufWriter::new(std::fs::File::create(&file)?);
    let s = ioblame_timeline::write(&c, &names, &ioblame_timeline::Options::default(), out);
    let _ = std::fs::remove_file(&file);
    let s = s?;
    Ok(format!(
        "timeline: {} slices, {} flows, {} tracks, {} packets, {:.1} MiB ({:.1} bytes/slice); {} \
         requests, {} dirtying runs, {} fsyncs",
        s.slices,
        s.flows,
        s.tracks,
        s.packets,
        s.bytes as f64 / (1 << 20) as f64,
        s.bytes as f64 / s.slices.max(1) as f64,
        c.requests.len(),
        c.runs.len(),
        c.blocked.len()
    ))
}

/// Runs `stage` in a child process of this binary, with the anonymous memory sampler if
/// `sample` (else [`Figures::peak_anon_kib`] is 0).
pub fn measure_child(stage: &str, threads: usize, trace: &Path, sample: bool) -> Result<Figures> {
    let exe = std::env::current_exe()?;
    let t0 = Instant::now();
    let mut c = Command::new(exe);
    c.args(["measure", stage, &threads.to_string()]).arg(trace);
    if !sample {
        c.arg("--no-sampler");
    }
    let o = c.output()?;
    let process_secs = t0.elapsed().as_secs_f64();
    if !o.status.success() {
        bail!("measure {stage}: {}", String::from_utf8_lossy(&o.stderr));
    }
    let err = String::from_utf8_lossy(&o.stderr);
    if !err.trim().is_empty() {
        eprint!("{err}");
    }
    let out = String::from_utf8_lossy(&o.stdout);
    let mut lines = out.lines();
    let first = lines.next().unwrap_or("");
    let f: Vec<&str> = first.split_whitespace().collect();
    let [e, s, p, a] = f[..] else {
        bail!("measure {stage}: unexpected output {out:?}")
    };
    Ok(Figures {
        events: e.parse()?,
        secs: s.parse()?,
        peak_kib: p.parse()?,
        peak_anon_kib: a.parse()?,
        note: lines.collect::<Vec<_>>().join("\n"),
        process_secs,
    })
}

/// Every stage for every thread count, with the ratios of the last thread count to the
/// first.
pub fn run_all(trace: &Path, threads: &[usize], repeat: usize) -> Result<()> {
    let compressed: u64 = std::fs::read_dir(trace)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or_else(|_| std::fs::metadata(trace).map(|m| m.len()).unwrap_or(0));
    println!(
        "trace {} ({:.1} MiB on disk); each figure from a fresh process, timed from opening the \
         trace, best of {repeat}; load average before: {}",
        trace.display(),
        compressed as f64 / 1048576.0,
        loadavg()
    );
    println!(
        "{:<11} {:>7} {:>11} {:>8} {:>14} {:>9} {:>9}",
        "stage", "threads", "events", "secs", "events/s", "peak RSS", "peak anon"
    );
    let mut notes = Vec::new();
    let mut ratios = Vec::new();
    for stage in STAGES {
        let mut per_thread = Vec::new();
        for &n in threads {
            // The first run samples the anonymous memory; the others, unsampled, give the
            // time without the sampler's load (it reads /proc every 2 ms).
            let mut f = measure_child(stage, n, trace, true)?;
            for _ in 1..repeat.max(1) {
                let g = measure_child(stage, n, trace, false)?;
                let peak = (
                    f.peak_kib.max(g.peak_kib),
                    f.peak_anon_kib.max(g.peak_anon_kib),
                );
                if g.secs < f.secs {
                    f = g;
                }
                (f.peak_kib, f.peak_anon_kib) = peak;
            }
            println!(
                "{:<11} {:>7} {:>11} {:>8.3} {:>14} {:>5.0} MiB {:>5.0} MiB",
                stage,
                n,
                f.events,
                f.secs,
                group(f.rate()),
                f.peak_kib as f64 / 1024.0,
                f.peak_anon_kib as f64 / 1024.0
            );
            if !f.note.is_empty() && !notes.contains(&f.note) {
                notes.push(f.note.clone());
            }
            per_thread.push((n, f));
        }
        if let (Some((a, fa)), Some((b, fb))) = (per_thread.first(), per_thread.last()) {
            if a != b {
                ratios.push(format!("{stage} x{:.2}", fb.rate() / fa.rate()));
            }
        }
    }
    if let (Some(a), Some(b)) = (threads.first(), threads.last()) {
        if a != b && !ratios.is_empty() {
            println!("{b} vs {a} threads: {}", ratios.join(", "));
        }
    }
    for n in notes {
        println!("{n}");
    }
    println!("load average after: {}", loadavg());
    Ok(())
}

/// The 1, 5 and 15 minute load averages (other work on the machine skews the figures).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// `12345678.9` as `12,345,679`.
pub fn group(x: f64) -> String {
    ioblame_latency::output::thousands(x.round() as u64)
}

/// `attribute` against `stage` (`blame`: the same with `ioblame blame`'s pass; `timeline`:
/// with `ioblame timeline`'s feed and file) on `trace` with `threads`, in `repeat`
/// interleaved rounds of fresh processes: the best time of each, the ratio, and peak memory.
pub fn stage_vs(trace: &Path, stage: &str, threads: usize, repeat: usize) -> Result<()> {
    let what = match stage {
        "blame" => "the same with the blame pass of `ioblame blame`",
        _ => "the same with `ioblame timeline`'s feed and its file written",
    };
    println!(
        "trace {}; `attribute` (what `ioblame acts` runs) and `{stage}` ({what}), {threads} \
         thread(s), best of {repeat} interleaved rounds; load average before: {}",
        trace.display(),
        loadavg()
    );
    let (mut att, mut bl): (Option<Figures>, Option<Figures>) = (None, None);
    let keep = |best: &mut Option<Figures>, f: Figures| match best {
        Some(b) => {
            b.peak_kib = b.peak_kib.max(f.peak_kib);
            if f.secs < b.secs {
                b.secs = f.secs;
            }
        }
        None => *best = Some(f),
    };
    for _ in 0..repeat.max(1) {
        keep(&mut att, measure_child("attribute", threads, trace, false)?);
        keep(&mut bl, measure_child(stage, threads, trace, false)?);
    }
    let (a, b) = (att.unwrap(), bl.unwrap());
    for (name, f) in [("attribute", &a), (stage, &b)] {
        println!(
            "{name:<10} {:>11} events {:>8.3} s {:>14} events/s peak RSS {:>5.0} MiB",
            f.events,
            f.secs,
            group(f.rate()),
            f.peak_kib as f64 / 1024.0
        );
    }
    println!("{}", b.note);
    println!(
        "{stage} / attribute: {:.3} in time ({:+.1}%), {:.3} in peak memory",
        b.secs / a.secs,
        100.0 * (b.secs / a.secs - 1.0),
        b.peak_kib as f64 / a.peak_kib.max(1) as f64
    );
    Ok(())
}
