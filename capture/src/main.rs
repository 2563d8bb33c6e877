//! `ioblame-capture`: records block, writeback and filesystem tracepoints system-wide with
//! perf_event_open into ioblame ring files (see `docs/format.md`).

use ioblame_tracepoints as events;
mod btrfs;
mod btrfs_map;
mod cgroups;
mod host;
mod layers;
mod names;
mod paths;
mod perf;
mod record;
mod snapshot;
mod touched;
mod ustack;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// Records who causes block IO, for offline analysis with `ioblame`.
#[derive(Parser, Debug)]
#[command(name = "ioblame-capture", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Record tracepoints system-wide into a directory of ring files.
    ///
    /// Stops when COMMAND exits (exiting with its status), after --duration, or on
    /// SIGINT/SIGTERM; every way closes the files cleanly. The recorder's own pid is stored in
    /// the trace header (recorder_pid) and the analyzer hides its IO, so the recorder does not
    /// feed on itself; writing the output to another device than the traced ones is still
    /// best. If recording stops before COMMAND exits (--duration, a signal), COMMAND gets
    /// SIGTERM (or the signal received) and is waited for; if writing the trace fails (a full
    /// disk), COMMAND runs on to its end, and the recorder exits non-zero.
    Record(Box<record::RecordArgs>),
    /// List the event sets and which of their tracepoints exist on this kernel.
    Events,
    /// Save the chunk maps of the btrfs filesystems mounted here (as root), for a recording
    /// that lacks them.
    ///
    /// btrfs writes at logical addresses, which only its chunk map places on the disk, and no
    /// event gives the map: `record` reads it into the trace, stock `perf record` cannot. Run
    /// this on the recording host after `perf record` (chunks allocated while recording are
    /// then included) and analyse the perf.data with `--btrfs-map FILE`, or name the file
    /// PERF.DATA.btrfs beside it. Only reads: the chunk trees, the devices, the mounts.
    BtrfsMap(btrfs_map::BtrfsMapArgs),
    #[command(flatten)]
    Docs(ioblame_clidoc::DocCommand),
}

/// The sections of `ioblame-capture(1)` clap does not write.
const MAN_SECTIONS: &[ioblame_clidoc::ManSection] = &[ioblame_clidoc::ManSection {
    title: "EXAMPLES",
    entries: &[
        (
            "ioblame-capture record -o /var/tmp/trace --devices sda -- ./my-workload",
            "Record while the workload runs (as root), only the IO of sda; then ioblame report /var/tmp/trace on any machine.",
        ),
        (
            "ioblame-capture record -o /var/tmp/trace --duration 60s --max-size 2G",
            "Record one minute of the whole system, keeping at most 2 GiB of ring files.",
        ),
        (
            "perf record -o perf.data ... ; ioblame-capture btrfs-map -o perf.data.btrfs",
            "After a stock perf recording of btrfs filesystems: their chunk maps, which the analysis of perf.data finds beside it.",
        ),
        (
            "ioblame-capture events",
            "Which of the tracepoints the recorder uses this kernel has.",
        ),
    ],
}];

fn events_cmd() -> anyhow::Result<()> {
    use std::fmt::Write as _;
    let tfs = host::tracefs()?;
    let mut out = String::new();
    macro_rules! println {
        ($($t:tt)*) => { let _ = writeln!(out, $($t)*); };
    }
    println!("tracefs: {}", tfs.display());
    for (set, what) in events::SETS {
        let names = events::set_names(set)?;
        println!("\n{set}: {what}");
        for n in names {
            let state = match events::lookup(&tfs, &n)? {
                Some(t) if t.callchain && events::STACK_FROM_FOLIO_EVENTS.contains(&n.as_str()) => {
                    "present, with kernel callchain under --stacks all (by default none: the \
                     analyzer gives it its thread's dirtying stack)"
                        .to_string()
                }
                Some(t) if t.callchain => "present, with kernel callchain".to_string(),
                Some(_) => "present".to_string(),
                None => match events::resolve(&tfs, std::slice::from_ref(&n), true) {
                    Ok((t, _)) => format!("absent; uses {}", t[0].name),
                    Err(_) => "ABSENT (skipped when recording)".to_string(),
                },
            };
            println!("  {n:<48} {state}");
        }
    }
    println!("\nAny other tracepoint can be given as a comma-separated list of sys:name.");
    use std::io::Write as _;
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Events => events_cmd().map(|_| 0),
        Cmd::Record(a) => record::run(*a),
        Cmd::BtrfsMap(a) => btrfs_map::run(&a),
        Cmd::Docs(d) => d
            .run(&mut Cli::command(), &mut std::io::stdout(), MAN_SECTIONS)
            .map(|()| 0)
            .map_err(anyhow::Error::from),
    };
    match r {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let mut msg = format!("{e}");
            for c in e.chain().skip(1) {
                msg.push_str(&format!(": {c}"));
            }
            eprintln!("ioblame-capture: error: {msg}");
            ExitCode::from(2)
        }
    }
}
