//! `ioblame`: the analyzer. Reads traces recorded by `ioblame-capture` and tells who caused
//! each IO.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{Args, CommandFactory, Parser, Subcommand};
use ioblame_counters::{CounterSet, DevSelection, IoContext};
use ioblame_pipeline::Scope;

/// Events are decoded on worker threads and freed on the merging thread, where glibc's
/// malloc costs the analyzer about 40% of its speed (measured with `ioblame-bench run`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod blame_cmd;
mod cgroups;
mod export_cmd;
mod fleet_cmd;
mod info;
mod info_blktrace;
mod latency_cmd;
mod pipeline;
mod regress;
mod report_cmd;
mod text;
mod top;

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

/// The input: an ioblame trace (directory, or ring files of one capture) or a perf.data file.
#[derive(Args, Debug, Clone)]
struct TraceArgs {
    /// An ioblame trace directory, one or more of its ring files (.iob), or a perf.data
    /// recording.
    #[arg(value_name = "TRACE", required = true, num_args = 1..)]
    trace: Vec<PathBuf>,
}

/// Device selection, as ioblame's `devs` file.
#[derive(Args, Debug, Clone, Default)]
struct DevArgs {
    /// Devices to analyse: white-space separated names or MAJ:MIN, `!` negates
    /// (e.g. 'sda sdb !8:0'), resolved against the trace's own device table.
    #[arg(long, value_name = "LIST")]
    devs: Option<String>,
    /// Also show the recorder's own IO (hidden by default).
    #[arg(long)]
    show_recorder: bool,
}

/// Counter configuration, as ioblame's `counters/NR` and `NR_filter` files.
#[derive(Args, Debug, Clone, Default)]
struct CounterArgs {
    /// A counter: 'DIR FIELD B0 .. B8 [if FILTER]', e.g. 'RA offset 0 8192 16384 24576
    /// 32768 40960 49152 57344 0 if size >= 4096'. Repeatable.
    #[arg(long = "counter", value_name = "SPEC")]
    counter: Vec<String>,
    /// A file of counters, one per line, `#` comments.
    #[arg(long = "counters", value_name = "FILE")]
    counters_file: Option<PathBuf>,
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

// The arguments of each subcommand, one struct each; the subcommand's help is its variant's
// doc comment in `Command`.

#[derive(Args, Debug)]
struct InfoArgs {
    #[command(flatten)]
    trace: TraceArgs,
}

#[derive(Args, Debug)]
struct ActsArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// One JSON object per line (keys documented in docs/outputs.md).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    devs: DevArgs,
    /// Sum the acts by a key instead: `cgroup` (of the task charged).
    #[arg(long, value_name = "KEY", value_parser = ["cgroup"])]
    by: Option<String>,
    /// Only the N acts with the most bytes (N at least 1).
    #[arg(long, value_name = "N", value_parser = at_least_one())]
    top: Option<usize>,
}

#[derive(Args, Debug)]
struct IologArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    devs: DevArgs,
}

#[derive(Args, Debug)]
struct IntentsArgs {
    #[command(flatten)]
    trace: TraceArgs,
}

#[derive(Args, Debug)]
struct CountersArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    counters: CounterArgs,
    #[command(flatten)]
    devs: DevArgs,
    /// A readable variant with headers.
    #[arg(long, conflicts_with = "json")]
    pretty: bool,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct ReportArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Output directory (created; files in it are replaced).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "OUTDIR",
        default_value = "ioblame-report",
        value_hint = clap::ValueHint::DirPath
    )]
    outdir: PathBuf,
    #[command(flatten)]
    counters: CounterArgs,
    #[command(flatten)]
    devs: DevArgs,
    /// Acts in each top list of the terminal summary (at least 1; the page's lists of
    /// writers and readers show at least 8).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = at_least_one())]
    top: usize,
}

#[derive(Args, Debug)]
struct BaselineArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// The baseline file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    #[command(flatten)]
    counters: CounterArgs,
    #[command(flatten)]
    devs: DevArgs,
    /// For a deterministic input (a committed trace checked by a changed analyzer): no
    /// significance floor, zero tolerances, every histogram compared, unattributed IO
    /// strict. Not for real captures, which jitter.
    #[arg(long)]
    exact: bool,
    /// Judge unattributed IO strictly (`unattributed = "strict"`): it explains no other
    /// change, so a writer whose bytes went unattributed has vanished.
    #[arg(long)]
    strict: bool,
    /// Write the baseline even when the trace has no kernel symbols (every intent `?`).
    #[arg(long)]
    allow_unsymbolized: bool,
}

#[derive(Args, Debug)]
struct CheckArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// The baseline written by `ioblame baseline`.
    #[arg(long, value_name = "FILE")]
    baseline: PathBuf,
    /// Counters to compare (default: the baseline's own counters).
    #[command(flatten)]
    counters: CounterArgs,
    #[command(flatten)]
    devs: DevArgs,
    /// One JSON document instead of text.
    #[arg(long)]
    json: bool,
    /// Judge unattributed IO strictly whatever the baseline says: it is compared like any
    /// group and explains no other change (an analyzer or capture that loses a writer's
    /// attribution fails).
    #[arg(long)]
    strict: bool,
}

#[derive(Args, Debug)]
struct LatencyArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// One JSON object per line and group (keys documented in docs/latency.md).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    devs: DevArgs,
}

#[derive(Args, Debug)]
struct BlameArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    devs: DevArgs,
    /// What the culprits are summed by: `act` (role + intent + file), `task`, `process`, or
    /// `cgroup` (then the victims are summed by cgroup too).
    #[arg(long, value_enum, default_value = "act", value_name = "KEY")]
    by: blame_cmd::By,
    /// One victim group instead of one per process: `pid:N`, `comm:NAME`, `cgroup:/PATH`
    /// (and below) or `act:N`.
    #[arg(long, value_name = "WHO")]
    victim: Option<blame_cmd::VictimSel>,
    /// Only each victim group's slowest IOs: those above its P-th percentile of Q2C (the
    /// tail people are paged for), 0 <= P < 100.
    #[arg(long, value_name = "P", value_parser = tail_percentile)]
    tail: Option<f64>,
    /// Only victims queued at or after this many seconds into the trace.
    #[arg(long, value_name = "SECONDS")]
    from: Option<f64>,
    /// Only victims queued before this many seconds into the trace.
    #[arg(long, value_name = "SECONDS")]
    to: Option<f64>,
    /// Culprits listed per victim group (at least 1; the rest are summed).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = at_least_one())]
    top: usize,
    /// JSON lines: one `"kind": "victim"` object per victim group and one `"kind":
    /// "culprit"` per culprit of it (keys in docs/latency.md).
    #[arg(long)]
    json: bool,
    /// One JSON line per victim IO, with its own, idle and culprits' times (they add up to
    /// its Q2C).
    #[arg(long)]
    ios: bool,
}

/// `--tail P`: a percentile in [0, 100).
fn tail_percentile(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..100.0).contains(&p) => Ok(p),
        _ => Err(format!("{s:?}: a percentile from 0 to below 100")),
    }
}

#[derive(Args, Debug)]
struct PerfCommandArgs {
    /// Devices to record (names or MAJ:MIN); default all.
    #[arg(long, value_delimiter = ',', value_name = "DEV,...")]
    devices: Vec<String>,
    /// Which stack events get a kernel callchain, as `ioblame-capture --stacks`: `exact`
    /// (not `block_dirty_buffer`, whose stack the analyzer takes from its thread's dirtying
    /// event: the same intents at about half the kernel's cost), `all` or `none` (no
    /// callchain: no intents). `sampled:N` has no perf line (perf takes no per-event sample
    /// period on tracepoints): record it with `ioblame-capture`.
    #[arg(long, default_value = "exact", value_name = "MODE")]
    stacks: ioblame_perfdata::Stacks,
    /// User-space stacks too, as `ioblame-capture record --user-stacks`: the stack events'
    /// callchains go on into user space (frame pointers: code built without them gives
    /// short stacks), and perf's MMAP2 records carry the files' build ids (`--buildid-mmap`,
    /// Linux and perf 5.12 or later; before 5.12, `--buildid-all`: perf's build-id table),
    /// so that the analysis names the functions from files of the same build id
    /// (`--symbols`, debug directories, the local file).
    #[arg(long)]
    user_stacks: bool,
}

#[derive(Args, Debug)]
struct TopCmdArgs {
    #[command(flatten)]
    top: top::TopArgs,
    #[command(flatten)]
    devs: DevArgs,
}

// `ioblame export` and `ioblame fleet` (the fleet dataset): arguments here, logic in
// `export_cmd.rs` and `fleet_cmd.rs`.

#[derive(Args, Debug)]
struct ExportArgs {
    /// Traces to export, each an ioblame trace directory, a ring file or a perf.data file.
    #[arg(value_name = "TRACE", required = true, num_args = 1..)]
    trace: Vec<PathBuf>,
    /// The dataset's root directory (created).
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    dataset: PathBuf,
    /// Host name of the traces (default: the host recorded in each trace).
    #[arg(long, value_name = "NAME")]
    host: Option<String>,
    /// A label KEY=VALUE carried by every row of these traces. Repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    /// Traces analysed at once (default: the number of CPUs).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
}

#[derive(Args, Debug)]
struct FleetArgs {
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

/// `ioblame export`.
fn export(out: &mut impl Write, a: ExportArgs, ks: Option<&Path>) -> Result<ExitCode> {
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let opts = export_cmd::ExportOptions {
        dataset: a.dataset,
        host: a.host,
        labels: a.labels,
        jobs,
    };
    let code = export_cmd::run(out, &a.trace, &opts, ks)?;
    out.flush().context("writing the output")?;
    Ok(code)
}

/// `ioblame fleet`.
fn fleet(out: &mut impl Write, a: FleetArgs) -> Result<()> {
    let host = match &a.host {
        Some(g) => Some(ioblame_dataset::Pattern::new(g).with_context(|| format!("--host {g:?}"))?),
        None => None,
    };
    let opts = fleet_cmd::FleetOptions {
        filter: ioblame_dataset::fleet::Filter {
            since: a.since,
            until: a.until,
            host,
            labels: a.labels,
        },
        top: a.top,
        json: a.json,
        report: a.report,
    };
    fleet_cmd::run(out, &a.dataset, &opts)
}

/// Parses counters before any trace is read (a bad spec fails fast).
fn counter_set(c: &CounterArgs) -> Result<CounterSet> {
    Ok(match &c.counters_file {
        Some(f) => {
            let set = CounterSet::parse_file(f)?;
            if !c.counter.is_empty() {
                anyhow::bail!(
                    "give counters either with --counter or with --counters FILE, not both"
                );
            }
            set
        }
        None => CounterSet::parse_args(&c.counter)?,
    })
}

fn dev_selection(d: &DevArgs, trace: &ioblame_pipeline::Input) -> Result<DevSelection> {
    match &d.devs {
        Some(s) => Ok(DevSelection::parse(s, &trace.metadata().block_devices)?),
        // For blktrace recordings: the lowest level of stacked devices.
        None => Ok(trace.default_devs()),
    }
}

/// Resolves device names in the counters' filters (`dev == sda`) against the trace's own
/// device table, as `--devs` is.
fn resolve_filter_devices(set: &mut CounterSet, trace: &ioblame_format::Trace) -> Result<()> {
    set.resolve_devices(&trace.metadata().block_devices)
        .context("the counters' filters")?;
    let cgroups = trace.cgroups();
    let by_id: Vec<(u64, &str)> = cgroups.iter().map(|c| (c.id, c.path.as_str())).collect();
    set.resolve_cgroups(&by_id).context("the counters' filters")
}

fn run(cli: Cli) -> Result<ExitCode> {
    pipeline::set_user_symbols(ioblame_pipeline::UserSymbolOptions {
        dirs: cli.symbols.clone(),
        system: !cli.no_local_symbols,
        local_files: !cli.no_local_symbols,
    });
    let ks = cli.kallsyms.as_deref();
    let sc = cli.scope.as_ref();
    let stdout = std::io::stdout();
    // Colour on a terminal; `anstream` strips the styles when stdout is not one, when
    // NO_COLOR is set, or when CLICOLOR=0.
    let mut out = std::io::BufWriter::new(anstream::AutoStream::auto(stdout.lock()));
    let out = &mut out;
    match cli.cmd {
        Command::Info(a) => info(out, a, ks)?,
        Command::Acts(a) => acts(out, a, ks, sc)?,
        Command::Iolog(a) => iolog(out, a, ks, sc)?,
        Command::Intents(a) => intents(out, a, ks, sc)?,
        Command::Counters(a) => counters(out, a, ks, sc)?,
        Command::Report(a) => report(out, a, ks, sc)?,
        Command::Baseline(a) => baseline(a, ks, sc)?,
        // The verdict is the exit status; check flushes its output itself.
        Command::Check(a) => return check(out, a, ks, sc),
        Command::PerfCommand(a) => perf_command(out, a)?,
        Command::Latency(a) => {
            let t = pipeline::open_trace(&a.trace.trace, ks)?;
            // Every level of stacked devices by default, as btt.
            let sel = match &a.devs.devs {
                Some(_) => dev_selection(&a.devs, &t)?,
                None => DevSelection::all(),
            };
            // The scope selects the acts of the per-act rows; the device and process rows
            // are btt's, over all the IO of the selected devices.
            let scope = pipeline::scope(&t, sc, false)?;
            latency_cmd::run(out, &t, &sel, a.devs.show_recorder, &scope, a.json)?
        }
        Command::Blame(a) => {
            let t = pipeline::open_trace(&a.trace.trace, ks)?;
            let sel = dev_selection(&a.devs, &t)?;
            let scope = pipeline::scope(&t, sc, false)?;
            let opts = blame_cmd::Options {
                by: a.by,
                victim: a.victim,
                tail: a.tail,
                from: a.from,
                to: a.to,
                top: a.top,
                json: a.json,
                ios: a.ios,
            };
            blame_cmd::run(out, &t, &sel, a.devs.show_recorder, &scope, &opts)?
        }
        Command::Export(a) => return export(out, a, ks),
        Command::Fleet(a) => fleet(out, a)?,
        Command::Top(a) => {
            let devs = a.devs.devs.as_deref();
            return top::run(out, a.top, devs, a.devs.show_recorder, sc);
        }
        Command::Docs(d) => d.run(&mut Cli::command(), out, MAN_SECTIONS)?,
    }
    out.flush().context("writing the output")?;
    Ok(ExitCode::SUCCESS)
}

/// `ioblame info`.
fn info(out: &mut impl Write, a: InfoArgs, ks: Option<&Path>) -> Result<()> {
    let t = pipeline::open_trace(&a.trace.trace, ks)?;
    match t.blktrace() {
        Some(rec) => info_blktrace::print(out, rec)?,
        None => {
            // The charged files: an analysis of every device, quiet (its notes are the
            // analysis commands' to give).
            let (sym, _) = ioblame_pipeline::symbols_of(&t);
            let scope = pipeline::scope(&t, None, false)?;
            let all = DevSelection::all();
            let opts = ioblame_pipeline::Options {
                symbols: &sym,
                devs: &all,
                show_recorder: false,
                scope: &scope,
            };
            let r = ioblame_pipeline::analyze(&t, &opts, |_, _| {}, |_| {});
            let paths = ioblame_pipeline::charged_paths(&t, &r.tables);
            info::print(out, &t, &info::Charged::of(&t, &r.tables, &paths))?
        }
    }
    Ok(())
}

/// `ioblame acts`.
fn acts(out: &mut impl Write, a: ActsArgs, ks: Option<&Path>, sc: Option<&Scope>) -> Result<()> {
    let t = pipeline::open_trace(&a.trace.trace, ks)?;
    let sel = dev_selection(&a.devs, &t)?;
    let sym = pipeline::symbols_of(&t);
    let show_recorder = a.devs.show_recorder;
    let scope = pipeline::scope(&t, sc, false)?;
    let r = pipeline::analyze(&t, &sym, &sel, show_recorder, &scope, |_, _| {});
    let frames = SymFrames(&sym);
    let intent_names = ioblame_attrib::intent_names(&r.tables, &sym);
    let cgroup_names = ioblame_attrib::CgroupNames::of(&t);
    let paths = pipeline::charged_paths(&t, &r.tables, show_recorder);
    let (tables, paths) = (&r.tables, &paths);
    if a.by.is_some() {
        cgroups::by_cgroup(out, tables, cgroup_names.as_ref(), show_recorder, a.json)?;
    } else if a.json {
        let mut ids = text::sorted_acts(tables, show_recorder);
        ids.truncate(a.top.unwrap_or(usize::MAX));
        text::acts_json(
            out,
            tables,
            &frames,
            &intent_names,
            paths,
            cgroup_names.as_ref(),
            &ids,
        )?;
    } else {
        text::acts_table(
            out,
            tables,
            &intent_names,
            paths,
            show_recorder,
            a.top,
            true,
        )?;
    }
    Ok(())
}

/// `ioblame iolog`: one line per IO, written as the analysis charges it.
fn iolog(out: &mut impl Write, a: IologArgs, ks: Option<&Path>, sc: Option<&Scope>) -> Result<()> {
    let t = pipeline::open_trace(&a.trace.trace, ks)?;
    let sel = dev_selection(&a.devs, &t)?;
    let sym = pipeline::symbols_of(&t);
    let frames = SymFrames(&sym);
    let show_recorder = a.devs.show_recorder;
    let mut err = None;
    // Looked up as the IOs come: each lookup decompresses at most the group of the table that
    // holds the inode, once.
    let paths: &ioblame_format::Trace = &t;
    let scope = pipeline::scope(&t, sc, false)?;
    let r = pipeline::analyze(&t, &sym, &sel, show_recorder, &scope, |io, tables| {
        if err.is_some() {
            return;
        }
        let act = &tables.acts[io.act.index()];
        if act.recorder && !show_recorder {
            return;
        }
        if let Err(e) = text::iolog_entry(out, io, tables, &frames, paths) {
            err = Some(e);
        }
    });
    pipeline::charged_paths(&t, &r.tables, show_recorder);
    match err {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// `ioblame intents`: every intent, the recorder's and all devices' included.
fn intents(
    out: &mut impl Write,
    a: IntentsArgs,
    ks: Option<&Path>,
    sc: Option<&Scope>,
) -> Result<()> {
    let t = pipeline::open_trace(&a.trace.trace, ks)?;
    let sym = pipeline::symbols_of(&t);
    let scope = pipeline::scope(&t, sc, false)?;
    let r = pipeline::analyze(&t, &sym, &DevSelection::all(), true, &scope, |_, _| {});
    let names = ioblame_attrib::intent_names(&r.tables, &sym);
    text::intents(out, &r.tables, &names, &SymFrames(&sym))?;
    Ok(())
}

/// `ioblame counters`.
fn counters(
    out: &mut impl Write,
    a: CountersArgs,
    ks: Option<&Path>,
    sc: Option<&Scope>,
) -> Result<()> {
    let mut set = counter_set(&a.counters)?;
    let t = pipeline::open_trace(&a.trace.trace, ks)?;
    let sel = dev_selection(&a.devs, &t)?;
    resolve_filter_devices(&mut set, &t)?;
    let block_devices = t.metadata().block_devices.clone();
    let show_recorder = a.devs.show_recorder;
    let sym = pipeline::symbols_of(&t);
    let mut devs_with_io = std::collections::BTreeSet::new();
    let scope = pipeline::scope(&t, sc, false)?;
    let r = pipeline::analyze(&t, &sym, &sel, show_recorder, &scope, |io, tables| {
        devs_with_io.insert(io.dev);
        let act = &tables.acts[io.act.index()];
        if act.recorder && !show_recorder {
            return;
        }
        set.record(io, &IoContext::for_io(tables, io));
    });
    for w in sel.warnings(&block_devices, |d| devs_with_io.contains(&d)) {
        eprintln!("ioblame: warning: {w}");
    }
    let (acts, roles) = (&r.tables.acts, &r.tables.roles);
    if a.json {
        ioblame_counters::output::json(out, &set, acts, roles)?;
    } else if a.pretty {
        let names = ioblame_attrib::intent_names(&r.tables, &sym);
        ioblame_counters::output::pretty_named(out, &set, acts, roles, &names)?;
    } else {
        ioblame_counters::output::counters_pipe(out, &set, acts, roles)?;
    }
    Ok(())
}

/// `ioblame report`.
fn report(
    out: &mut impl Write,
    a: ReportArgs,
    ks: Option<&Path>,
    sc: Option<&Scope>,
) -> Result<()> {
    let set = counter_set(&a.counters)?;
    let t = pipeline::open_trace(&a.trace.trace, ks)?;
    let sel = dev_selection(&a.devs, &t)?;
    let sel = pipeline::Selected {
        devs: &sel,
        devs_given: a.devs.devs.is_some(),
        show_recorder: a.devs.show_recorder,
        scope: sc,
    };
    report_cmd::run(out, t, &a.trace.trace, &a.outdir, set, &sel, a.top)
}

/// `ioblame baseline`.
fn baseline(a: BaselineArgs, ks: Option<&Path>, sc: Option<&Scope>) -> Result<()> {
    let mut set = counter_set(&a.counters)?;
    let t = pipeline::open_trace(&a.trace.trace, ks)?;
    let sel = dev_selection(&a.devs, &t)?;
    resolve_filter_devices(&mut set, &t)?;
    let mode = regress::BaselineMode {
        exact: a.exact,
        strict: a.strict,
        allow_unsymbolized: a.allow_unsymbolized,
        devs_given: a.devs.devs.is_some(),
    };
    regress::baseline(t, set, &sel, a.devs.show_recorder, &a.output, mode, sc)
}

/// `ioblame check`: exit 0 within tolerance, 1 on a regression.
fn check(
    out: &mut impl Write,
    a: CheckArgs,
    ks: Option<&Path>,
    sc: Option<&Scope>,
) -> Result<ExitCode> {
    let text = std::fs::read_to_string(&a.baseline)
        .with_context(|| format!("cannot read baseline {}", a.baseline.display()))?;
    let base = ioblame_baseline::Baseline::from_toml(&text)
        .with_context(|| format!("baseline {}", a.baseline.display()))?;
    let mut set = if a.counters.counter.is_empty() && a.counters.counters_file.is_none() {
        let specs: Vec<&str> = base.counters.iter().map(|c| c.spec.as_str()).collect();
        CounterSet::parse_args(&specs).context("the baseline's counters")?
    } else {
        counter_set(&a.counters)?
    };
    let t = pipeline::open_trace(&a.trace.trace, ks)?;
    let sel = dev_selection(&a.devs, &t)?;
    resolve_filter_devices(&mut set, &t)?;
    let opts = ioblame_baseline::CheckOptions { strict: a.strict };
    let sel = pipeline::Selected {
        devs: &sel,
        devs_given: a.devs.devs.is_some(),
        show_recorder: a.devs.show_recorder,
        scope: sc,
    };
    let report = regress::check(t, set, &base, &opts, &sel)?;
    // The verdict does not depend on whether anyone reads the report: a closed pipe
    // (`ioblame check ... | head`) keeps exit 1 on a regression.
    let code = if report.regressed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    };
    let written = if a.json {
        writeln!(out, "{}", report.to_json())
    } else {
        report.render_text(out)
    }
    .and_then(|()| out.flush());
    match written {
        Ok(()) => Ok(code),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(code),
        Err(e) => Err(anyhow::Error::from(e).context("writing the output")),
    }
}

/// `ioblame perf-command`.
fn perf_command(out: &mut impl Write, a: PerfCommandArgs) -> Result<()> {
    let opts = ioblame_perfdata::CommandOptions {
        stacks: a.stacks,
        user_stacks: a.user_stacks,
    };
    let (cmd, notes) = ioblame_perfdata::perf_command_for(&a.devices, opts)?;
    for n in notes {
        eprintln!("ioblame: note: {n}");
    }
    writeln!(out, "{cmd}")?;
    Ok(())
}

/// Stack frames through the trace's kernel symbols.
struct SymFrames<'a>(pub &'a ioblame_decode::Symbolizer);

impl text::Frames for SymFrames<'_> {
    fn frame_line(&self, addr: u64) -> String {
        self.0.format_frame(addr)
    }
    fn name(&self, addr: u64) -> String {
        match self.0.resolve(addr) {
            Some(s) => s.name.to_string(),
            None => format!("{addr:#x}"),
        }
    }
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

/// `--top N`: a count of at least 1 (`--top 0` would print lists with nothing in them).
fn at_least_one() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
}

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
