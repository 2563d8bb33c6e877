//! `ioblame`: the analyzer. Reads traces recorded by `ioblame-capture` and tells who caused
//! each IO.
//!
//! This file holds the command line's top level (the global flags, the list of subcommands)
//! and the dispatch: the global flags become a [`session::Session`], and each subcommand's
//! arguments and `run` are in its module under [`cmd`].

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{CommandFactory, Parser, Subcommand};

use cmd::acts::ActsArgs;
use cmd::baseline::BaselineArgs;
use cmd::blame::BlameArgs;
use cmd::check::CheckArgs;
use cmd::counters::CountersArgs;
use cmd::export::ExportArgs;
use cmd::fleet::FleetArgs;
use cmd::info::InfoArgs;
use cmd::intents::IntentsArgs;
use cmd::iolog::IologArgs;
use cmd::latency::LatencyArgs;
use cmd::perf_command::PerfCommandArgs;
use cmd::report::ReportArgs;
use cmd::timeline::TimelineArgs;
use cmd::top::TopCmdArgs;
use session::Session;

/// Events are decoded on worker threads and freed on the merging thread, where glibc's
/// malloc costs the analyzer about 40% of its speed (measured with `ioblame-bench run`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod cmd;
mod diagnostics;
mod session;
mod text;

/// Who caused this IO? Offline dirtier-to-IO attribution of ioblame traces.
#[derive(Parser, Debug)]
#[command(name = "ioblame", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
    /// A copy of the recording host's /proc/kallsyms, to name kernel frames of a perf.data
    /// recording analysed on another host (ioblame traces carry their own symbols).
    #[arg(long, global = true, value_name = "FILE")]
    kallsyms: Option<PathBuf>,
    /// The recording host's btrfs chunk maps, saved by `ioblame-capture btrfs-map` after a
    /// stock perf recording (perf.data has none; without them btrfs's writes cannot be linked
    /// to their dirtiers). Default: PERF.DATA.btrfs beside the perf.data file, if there is one.
    #[arg(long, global = true, value_name = "FILE")]
    btrfs_map: Option<PathBuf>,
    /// Which IO to speak of: `workload` (the command the capture ran and its descendants,
    /// with what the attribution charges to them), `all`, `pid:N` (process N and its
    /// descendants), `cgroup:/PATH` (a cgroup2 subtree). Default: all; for baseline and
    /// check, the baseline's scope, else workload when the trace names its command.
    #[arg(long, global = true, value_name = "SCOPE")]
    scope: Option<ioblame_pipeline::Scope>,
    /// Where to look for the symbols of user frames (traces recorded with `--user-stacks`)
    /// after the trace's own: a `.build-id` tree (`xx/REST.debug`) or a directory of
    /// binaries and debug files, matched by build id. Repeatable.
    #[arg(long = "symbols", global = true, value_name = "DIR")]
    symbols: Vec<PathBuf>,
    /// Name user frames from the trace and `--symbols` only: not from this machine's debug
    /// files (`/usr/lib/debug/.build-id`, perf's `~/.debug`) or its files of the same build id.
    #[arg(long, global = true)]
    no_local_symbols: bool,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::enum_variant_names)]
enum Command {
    /// Print a trace's header, metadata and chunk statistics.
    Info(InfoArgs),
    /// One row per act (role + intent + file) with bytes and IOs per direction.
    Acts(ActsArgs),
    /// Per-IO log as ioblame's iolog: direction, size @ sector, role, file, intent and stack.
    Iolog(IologArgs),
    /// The intents (kernel stack + modifier) that `int=NR` numbers refer to.
    Intents(IntentsArgs),
    /// ioblame's eight-slot histogram counters per act.
    Counters(CountersArgs),
    /// Analyse once and write Parquet tables, charts, flame graphs and an HTML report.
    Report(ReportArgs),
    /// Write a CI baseline (TOML, human-editable) of what the trace shows.
    Baseline(BaselineArgs),
    /// Compare a trace with a baseline: exit 0 within tolerance, 1 on a regression, 2 on a
    /// usage or input error.
    Check(CheckArgs),
    /// btt's latency breakdown (Q2Q, Q2G, G2I, Q2M, I2D, M2D, D2C, Q2C) per device, overall,
    /// per issuing process and per act, with p50/p95/p99.
    Latency(LatencyArgs),
    /// Who made the IO slow: each IO's queue-to-completion time split into its own service,
    /// the time it waited behind each other act's IO on its device, and idle time; per
    /// victim process, culprits ranked (docs/latency.md, "Blame").
    Blame(BlameArgs),
    /// Draw the analysis as a Perfetto trace: each task's dirtying, reads and fsyncs, each
    /// device's requests and queue, and an arrow from each write to the IO it caused
    /// (docs/timeline.md; open it at https://ui.perfetto.dev).
    Timeline(TimelineArgs),
    /// Print the `perf record` command line that records what the attribution needs on this
    /// kernel, for hosts with stock perf and no ioblame-capture.
    PerfCommand(PerfCommandArgs),
    /// Analyse traces and write their tables into a Hive-partitioned Parquet dataset
    /// (docs/dataset.md), several traces at once; exit 1 when some failed.
    Export(ExportArgs),
    /// Query a dataset written by `export`: top intents, acts, files and roles across hosts,
    /// per-host totals; optionally a page with the fleet's flame graph.
    Fleet(FleetArgs),
    /// Who is causing IO now: a live view of the acts dirtying, writing and reading, each
    /// IO charged back to whoever caused it (starts `ioblame-capture record`, as root, or
    /// follows a recording with --follow).
    Top(TopCmdArgs),
    #[command(flatten)]
    Docs(ioblame_clidoc::DocCommand),
}

fn run(cli: Cli) -> Result<ExitCode> {
    let session = Session::new(
        cli.kallsyms,
        cli.btrfs_map,
        cli.scope,
        cli.symbols,
        !cli.no_local_symbols,
    );
    let s = &session;
    let stdout = std::io::stdout();
    // Colour on a terminal; `anstream` strips the styles when stdout is not one, when
    // NO_COLOR is set, or when CLICOLOR=0.
    let mut out = std::io::BufWriter::new(anstream::AutoStream::auto(stdout.lock()));
    let out = &mut out;
    match cli.cmd {
        Command::Info(a) => cmd::info::run(out, a, s)?,
        Command::Acts(a) => cmd::acts::run(out, a, s)?,
        Command::Iolog(a) => cmd::iolog::run(out, a, s)?,
        Command::Intents(a) => cmd::intents::run(out, a, s)?,
        Command::Counters(a) => cmd::counters::run(out, a, s)?,
        Command::Report(a) => cmd::report::run(out, a, s)?,
        Command::Baseline(a) => cmd::baseline::run(a, s)?,
        // The verdict is the exit status; check flushes its output itself.
        Command::Check(a) => return cmd::check::run(out, a, s),
        Command::PerfCommand(a) => cmd::perf_command::run(out, a)?,
        Command::Latency(a) => cmd::latency::run(out, a, s)?,
        Command::Blame(a) => cmd::blame::run(out, a, s)?,
        Command::Timeline(a) => cmd::timeline::run(out, a, s)?,
        Command::Export(a) => return cmd::export::run(out, a, s),
        Command::Fleet(a) => cmd::fleet::run(out, a)?,
        Command::Top(a) => return cmd::top::run(out, a, s),
        Command::Docs(d) => d.run(&mut Cli::command(), out, MAN_SECTIONS)?,
    }
    out.flush().context("writing the output")?;
    Ok(ExitCode::SUCCESS)
}

/// The sections of `ioblame(1)` clap does not write.
const MAN_SECTIONS: &[ioblame_clidoc::ManSection] = &[
    ioblame_clidoc::ManSection {
        title: "EXAMPLES",
        entries: &[
            (
                "ioblame report /var/tmp/trace -o report",
                "Who caused the IO: a summary on the terminal, and report/report.html with Parquet tables, charts and flame graphs.",
            ),
            (
                "ioblame acts /var/tmp/trace --top 10",
                "The ten acts (task, intent, file) charged the most bytes.",
            ),
            (
                "ioblame latency sda.blktrace.0 sda.blktrace.1",
                "btt's latency breakdown of a blktrace recording, with percentiles.",
            ),
            (
                "ioblame check /var/tmp/trace --baseline io-baseline.toml",
                "Exit 1 when the IO regressed against a baseline written by ioblame baseline.",
            ),
        ],
    },
    ioblame_clidoc::ManSection {
        title: "ENVIRONMENT",
        entries: &[
            (
                "NO_COLOR",
                "When set to a non-empty value, no colour, even on a terminal or with CLICOLOR_FORCE. Without it, colour only on a terminal.",
            ),
            ("CLICOLOR", "0: no colour."),
            (
                "CLICOLOR_FORCE",
                "Any non-empty value: colour even when the output is not a terminal (NO_COLOR wins).",
            ),
            (
                "RAYON_NUM_THREADS",
                "Threads decoding and attributing a trace (default: one per CPU).",
            ),
        ],
    },
];

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // A closed pipe (`ioblame ... | head`) is not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("ioblame: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
