//! `ioblame-bench`: the analyzer's speed and memory (issue 4's benchmark). Not a test: it
//! prints figures.
//!
//! * `ioblame-bench gen -o DIR [--events N] [--seed S]` writes a deterministic, realistic
//!   trace (see `gen.rs`), streaming to disk.
//! * `ioblame-bench stats TRACE` prints the shape of a trace (event mix, tasks, files,
//!   stacks, bytes per event), to compare a generated trace with a real capture.
//! * `ioblame-bench run TRACE [--threads 1,2] [--repeat 3]` measures each stage (decompress,
//!   decode, decode+merge, end to end with the attribution) in a fresh child process per
//!   measurement, printing events/s and peak RSS, and the 2-thread/1-thread ratios.
//! * `ioblame-bench blame-vs TRACE [--threads 2] [--repeat 3]`: the attribution alone
//!   against the attribution with `ioblame blame`'s pass, interleaved, and the ratio.
//! * `ioblame-bench timeline-vs TRACE [--threads 2] [--repeat 3]`: the same for `ioblame
//!   timeline`'s feed and file, with the file's size.
//! * `ioblame-bench blktrace-gen -o DIR [--records N]` and `blktrace-vs DIR`: a generated
//!   blktrace recording, and `ioblame acts` timed against `blkparse` on it (`blktrace.rs`).
//! * `ioblame-bench paths TRACE` and `fleet-vs OUT --fixtures DIR`: the FILES path table
//!   whole against the charged inodes only; `ioblame export` with one and two jobs and
//!   `ioblame fleet` over a dataset of 1,000 traces (`fleet.rs`).
//! * `ioblame-bench vs-perf [--secs 4] [--keep]` (root) records one real workload with
//!   `perf record` (the line `ioblame perf-command` prints) and `ioblame-capture` at once,
//!   then times `perf script -F comm,pid,tid,time,event,trace,ip,sym` against ioblame's
//!   end-to-end analysis.

mod blktrace;
mod fleet;
mod gen;
mod latency;
mod measure;
mod stats;
mod vsperf;

use std::path::PathBuf;

use anyhow::Result;

/// The analyzer's allocator (events are decoded on worker threads and freed on the merging
/// thread; glibc's malloc is slow at that).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "ioblame-bench", about = "ioblame analyzer benchmark")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Generate a deterministic trace.
    Gen {
        /// Output directory.
        #[arg(short = 'o')]
        out: PathBuf,
        /// Events (samples), at least.
        #[arg(long, default_value_t = 5_000_000)]
        events: u64,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Measure every stage on a trace, 1 and 2 threads.
    Run {
        /// The trace.
        trace: PathBuf,
        /// Thread counts.
        #[arg(long, value_delimiter = ',', default_value = "1,2")]
        threads: Vec<usize>,
        /// Runs of each measurement; the fastest is shown (peaks are the highest).
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// The blame pass's cost: `attribute` against `blame` (the same with `ioblame blame`'s
    /// pass), interleaved rounds of fresh processes, and the ratio.
    BlameVs {
        /// The trace.
        trace: PathBuf,
        /// Threads.
        #[arg(long, default_value_t = 2)]
        threads: usize,
        /// Rounds, interleaved; the best time of each is reported.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// The timeline's cost: `attribute` against `timeline` (the same with `ioblame
    /// timeline`'s feed and its file written), interleaved rounds of fresh processes; the
    /// ratio and the file's size.
    TimelineVs {
        /// The trace.
        trace: PathBuf,
        /// Threads.
        #[arg(long, default_value_t = 2)]
        threads: usize,
        /// Rounds, interleaved; the best time of each is reported.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// One measurement (run by `run` in a child process).
    #[command(hide = true)]
    Measure {
        stage: String,
        threads: usize,
        trace: PathBuf,
        /// Do not sample `RssAnon` (a thread reading /proc every 2 ms, which takes CPU from
        /// the analysis on a 2-core machine): the peak anonymous memory prints as 0.
        #[arg(long)]
        no_sampler: bool,
    },
    /// The shape of a trace: event mix, stacks, tasks, files, bytes per event.
    Stats {
        /// The trace.
        trace: PathBuf,
    },
    /// Generate a blktrace recording (per-CPU files of a disk `sda`).
    BlktraceGen {
        /// Output directory.
        #[arg(short = 'o')]
        out: PathBuf,
        /// Records, at least.
        #[arg(long, default_value_t = 10_000_000)]
        records: u64,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// blkparse vs `ioblame acts` on a blktrace recording of `sda` (the release `ioblame`
    /// beside this binary).
    BlktraceVs {
        /// The directory of the per-CPU files.
        dir: PathBuf,
        /// Rounds, interleaved; the best time of each is reported.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// btt vs `ioblame latency` on a blktrace recording of `sda` (the release `ioblame`
    /// beside this binary).
    LatencyVs {
        /// The directory of the per-CPU files.
        dir: PathBuf,
        /// Rounds, interleaved; the best time of each is reported.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// `ioblame latency --json` of a trace or recording to stdout, through the same library
    /// calls (`latency-vs` times this, so that the benchmark needs no release build of the
    /// whole analyzer).
    Latency {
        /// The trace, perf.data or blktrace files.
        input: PathBuf,
    },
    /// ioblame's analysis of a blktrace recording (run by `blktrace-vs` in a child process).
    #[command(hide = true)]
    BlktraceAnalyze {
        /// The recording.
        dir: PathBuf,
    },
    /// An analysis's path lookup: the whole FILES table against the charged inodes only.
    Paths {
        /// The trace (one whose recorder walked a large filesystem shows the difference).
        trace: PathBuf,
        /// Rounds, interleaved; the median is reported.
        #[arg(long, default_value_t = 5)]
        repeat: usize,
    },
    /// `ioblame export` with one and two jobs, then `ioblame fleet` over a dataset of
    /// `--traces` traces made from the exports (the release `ioblame` beside this binary).
    FleetVs {
        /// A new directory for the datasets.
        out: PathBuf,
        /// The directory of the fixture traces to export.
        #[arg(long, default_value = "fixtures")]
        fixtures: PathBuf,
        /// Traces in the fleet dataset.
        #[arg(long, default_value_t = 1000)]
        traces: usize,
        /// Rounds, interleaved; the best time of each is reported.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// perf script vs ioblame on one real workload (root).
    VsPerf {
        /// Seconds of workload.
        #[arg(long, default_value_t = 4)]
        secs: u32,
        /// Keep the ioblame trace and the perf.data (under /var/tmp/iob-vsperf.*).
        #[arg(long)]
        keep: bool,
        /// Rounds of timing (perf script, ioblame with 2 threads, with 1), interleaved;
        /// the best of each is reported.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
        /// Time the recordings an earlier `--keep` left in this directory instead of
        /// recording (no root needed).
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Gen { out, events, seed } => {
            let t0 = std::time::Instant::now();
            let o = gen::GenOptions {
                events,
                seed,
                ..Default::default()
            };
            let n = gen::generate(&out, &o)?;
            let bytes: u64 = std::fs::read_dir(&out)?
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum();
            println!(
                "generated {n} events into {} ({:.1} MiB, {:.1} bytes/event) in {:.1} s",
                out.display(),
                bytes as f64 / 1048576.0,
                bytes as f64 / n as f64,
                t0.elapsed().as_secs_f64()
            );
        }
        Cmd::Run {
            trace,
            threads,
            repeat,
        } => measure::run_all(&trace, &threads, repeat)?,
        Cmd::BlameVs {
            trace,
            threads,
            repeat,
        } => measure::stage_vs(&trace, "blame", threads, repeat)?,
        Cmd::TimelineVs {
            trace,
            threads,
            repeat,
        } => measure::stage_vs(&trace, "timeline", threads, repeat)?,
        Cmd::Measure {
            stage,
            threads,
            trace,
            no_sampler,
        } => measure::measure_here(&stage, threads, &trace, !no_sampler)?,
        Cmd::Stats { trace } => stats::print(&trace)?,
        Cmd::BlktraceGen { out, records, seed } => {
            let t0 = std::time::Instant::now();
            let n = blktrace::generate(&out, records, seed)?;
            println!(
                "generated {n} blktrace records into {} in {:.1} s",
                out.display(),
                t0.elapsed().as_secs_f64()
            );
        }
        Cmd::BlktraceVs { dir, repeat } => blktrace::vs(&dir, repeat)?,
        Cmd::LatencyVs { dir, repeat } => latency::vs(&dir, repeat)?,
        Cmd::Latency { input } => latency::latency(&input)?,
        Cmd::BlktraceAnalyze { dir } => blktrace::analyze(&dir)?,
        Cmd::Paths { trace, repeat } => fleet::paths(&trace, repeat)?,
        Cmd::FleetVs {
            out,
            fixtures,
            traces,
            repeat,
        } => fleet::fleet_vs(&out, &fixtures, traces, repeat)?,
        Cmd::VsPerf {
            secs,
            keep,
            repeat,
            from,
        } => vsperf::run(secs, keep, repeat, from)?,
    }
    Ok(())
}
