//! The arguments of `record` (`RecordArgs`), checked against this host's limits, and the
//! ring's limits they ask for.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
// The size and duration arguments, parsed as the analyzer's (`ioblame top`) are.
use ioblame_clidoc::{parse_duration, parse_size};
use ioblame_format::RingOptions;
use ioblame_tracepoints as events;

/// Which files the FILES table names (`--paths`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathsMode {
    /// The inodes the recorded events refer to.
    Touched,
    /// Every file of the recorded filesystems, walked at start and at end.
    Walk,
    /// None.
    None,
}

/// How user stacks are recorded (`--user-stacks`): one home with `ioblame perf-command`'s.
pub use ioblame_tracepoints::UserStacks as UserStackMode;

/// Arguments of `record`.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Output directory for the ring files (created; must not already hold a trace).
    #[arg(short = 'o', long = "output", value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub output: PathBuf,
    /// Stop after this long (e.g. 30s, 500ms, 2m).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Only record IO of these block devices (names such as sda, loop0, or MAJ:MIN),
    /// filtered in the kernel.
    #[arg(long, value_name = "DEV,...")]
    pub devices: Option<String>,
    /// Event set: default, minimal, full, or a comma-separated list of sys:name.
    #[arg(long, default_value = "default")]
    pub events: String,
    /// Roll to a new ring file at this size (0: never) [default: 64M, or a quarter of
    /// --max-size when that is less]. Every file begins with the trace's metadata, about
    /// 1 MiB (the kernel's symbols; more with --paths walk), so that it reads alone: a size
    /// under twice that is raised to it.
    #[arg(long, value_parser = parse_size)]
    pub file_size: Option<u64>,
    /// Delete the oldest ring files beyond this total size (0: never) [default: 1G; none with
    /// --file-size 0]. It must hold two ring files and one file's metadata more; the file
    /// being written is never deleted.
    #[arg(long, value_parser = parse_size)]
    pub max_size: Option<u64>,
    /// perf ring buffer size per CPU (rounded up to a power of two pages).
    #[arg(long, default_value = "16M", value_parser = parse_size)]
    pub buffer_size: u64,
    /// Deepest kernel callchain recorded on the stack events.
    #[arg(long, default_value_t = 32)]
    pub stack_depth: u16,
    /// Which stack events carry a kernel callchain. `exact`: one per dirtying write
    /// (`block_dirty_buffer` goes without; the analyzer gives each dirty buffer the stack of
    /// its thread's dirtying event, the same intent); `all`: every stack event, at about
    /// twice the kernel's cost on buffered writes; `sampled:N`: the dirtying events
    /// without, plus a callchain on one hit in N per CPU (bytes per task and file stay
    /// exact, intents are a sample); `none`: no callchain at all (bytes per task and file
    /// stay exact, intents have no stacks).
    #[arg(long, default_value = "exact", value_name = "MODE")]
    pub stacks: events::Stacks,
    /// zstd level of the chunks (-7..=19; negative levels are zstd's fast ones). The default
    /// -1 costs the recorder about 40% less CPU than level 3 for 0-5% more bytes
    /// (docs/benchmarks.md).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub level: i32,
    /// Which files the FILES table names. `touched`: the inodes the recorded events refer to,
    /// each named by file handle (on btrfs, by its own inode-to-path lookup in each mounted
    /// subvolume) as soon as it appears (a file deleted later keeps the name it had) and
    /// again at the end (a renamed file gets its new name), with a walk, at the end, for what
    /// no handle names; its size and cost follow the trace, not the host.
    /// `walk`: every file of the recorded filesystems, walked at start and at end (up to
    /// --paths-max-entries and --paths-time). `none`: no table (as --no-paths).
    #[arg(long, value_enum, default_value = "touched", value_name = "WHICH")]
    pub paths: PathsMode,
    /// Do not record file paths (the same as --paths none).
    #[arg(long)]
    pub no_paths: bool,
    /// Most files named: in each walked table (`--paths walk`), or in all (`touched`).
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    pub paths_max_entries: usize,
    /// Longest time spent naming files when recording ends (and, with `--paths walk`, when it
    /// starts).
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "DUR")]
    pub paths_time: Duration,
    /// Do not record the cgroup of the tasks (`PERF_SAMPLE_CGROUP` on the stack events, and
    /// the cgroup2 hierarchy's id -> path table).
    #[arg(long)]
    pub no_cgroups: bool,
    /// How often every CPU's records are handed to the writer (10ms to 10s), each time
    /// followed by a mark in the trace of the time up to which it is complete, which a reader
    /// of the trace being written (such as `ioblame top`) follows. Shorter: such a reader
    /// sees events sooner, in smaller chunks; longer: a host crash may lose up to about this
    /// plus a second of records.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DUR")]
    pub flush_interval: Duration,
    /// Record user-space stacks too, with the executable mappings of the processes they
    /// name and their files' build ids (MMAP2 records, `/proc/PID/maps`), and, when the
    /// recording stops, the symbol tables of the files the stacks went through, so that
    /// another machine can name the functions. `fp` (the default): the stack events'
    /// callchains go on into user space, walked by frame pointers in the kernel (code built
    /// without them gives short stacks, and a C library's system call wrapper hides its
    /// caller); each keeps up to --stack-depth kernel frames and 64 user frames more (within
    /// kernel.perf_event_max_stack). `dwarf[:SIZE]`: each stack event of a user task also
    /// copies SIZE bytes (default 8K) of the top of its user stack and the registers that
    /// unwind it, and the trace keeps the unwind tables (`.eh_frame`, `.debug_frame`) of every
    /// executable file those processes map: the analysis unwinds them by call frame
    /// information, as `perf --call-graph dwarf` does. The copies hold application memory
    /// (whatever the stack held) and stay in the trace: use `fp` where that matters.
    #[arg(long, num_args = 0..=1, default_missing_value = "fp",
          value_parser = |s: &str| s.parse::<UserStackMode>(), value_name = "fp|dwarf[:SIZE]")]
    pub user_stacks: Option<UserStackMode>,
    /// With --user-stacks: most bytes of symbol tables copied into the trace (the files
    /// beyond are named in the capture info, `user_symbols_left_out`).
    #[arg(long, default_value = "256M", value_parser = parse_size, value_name = "SIZE")]
    pub user_symbols_max: u64,
    /// Command to run while recording (system-wide); the capture exits with its status.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// The shortest `--flush-interval`.
const FLUSH_INTERVAL_MIN: Duration = Duration::from_millis(10);
/// The longest `--flush-interval`.
const FLUSH_INTERVAL_MAX: Duration = Duration::from_secs(10);

impl RecordArgs {
    /// `--paths`, with `--no-paths`.
    pub(super) fn paths_mode(&self) -> PathsMode {
        if self.no_paths {
            PathsMode::None
        } else {
            self.paths
        }
    }
}

/// Checks the arguments against this host's limits; returns the page size.
pub(super) fn check_args(a: &RecordArgs) -> Result<usize> {
    let page = crate::snapshot::page_size().max(4096);
    let max_stack_sys = max_stack_sys();
    if a.stack_depth == 0 || a.stack_depth > max_stack_sys {
        bail!(
            "--stack-depth {} must be within 1..={max_stack_sys} (kernel.perf_event_max_stack)",
            a.stack_depth
        );
    }
    if a.buffer_size < page as u64 * 2 || a.buffer_size > 1 << 30 {
        bail!("--buffer-size must be between {} and 1G", page * 2);
    }
    if !(-7..=19).contains(&a.level) {
        bail!("--level must be within -7..=19 (negative levels are zstd's fast ones)");
    }
    if !(FLUSH_INTERVAL_MIN..=FLUSH_INTERVAL_MAX).contains(&a.flush_interval) {
        bail!(
            "--flush-interval {:?} must be within 10ms..=10s",
            a.flush_interval
        );
    }
    if a.file_size == Some(0) && a.max_size.is_some_and(|m| m > 0) {
        bail!(
            "--max-size {} needs ring files that roll: with --file-size 0 there is one file, \
             which the cap never deletes; give a --file-size, or --max-size 0",
            human(a.max_size.unwrap_or(0))
        );
    }
    Ok(page)
}

/// The ring's limits asked for, defaults filled in (before they are fitted to the metadata):
/// `--max-size` 1G, none with `--file-size 0`; `--file-size` 64M, or a quarter of the cap
/// when that is less.
pub(super) fn ring_options(a: &RecordArgs) -> RingOptions {
    let max_size = a
        .max_size
        .unwrap_or(if a.file_size == Some(0) { 0 } else { 1 << 30 });
    let file_size = a.file_size.unwrap_or(match max_size {
        0 => 64 << 20,
        // Never 0 (one file that never rolls): a tiny cap is then refused as too small.
        m => (m / 4).clamp(1, 64 << 20),
    });
    RingOptions {
        file_size,
        max_size,
    }
}

/// `n` bytes as a size argument, rounded up to whole MiB (`--max-size` takes integers).
pub(super) fn size_arg_up(n: u64) -> String {
    format!("{}M", n.div_ceil(1 << 20))
}

/// `kernel.perf_event_max_stack` (127 when it cannot be read).
pub(super) fn max_stack_sys() -> u16 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_stack")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(127)
}

pub(super) fn human(n: u64) -> String {
    let f = n as f64;
    if f >= (1u64 << 30) as f64 {
        format!("{:.1} GiB", f / (1u64 << 30) as f64)
    } else if f >= (1u64 << 20) as f64 {
        format!("{:.1} MiB", f / (1u64 << 20) as f64)
    } else if f >= 1024.0 {
        format!("{:.1} KiB", f / 1024.0)
    } else {
        format!("{n} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `record -o /nonexistent/never-created EXTRA...` parsed.
    fn parse_record(extra: &[&str]) -> Result<RecordArgs, clap::Error> {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            a: RecordArgs,
        }
        let mut v = vec!["record", "-o", "/nonexistent/never-created"];
        v.extend_from_slice(extra);
        <Cli as clap::Parser>::try_parse_from(v).map(|c| c.a)
    }

    #[test]
    fn ring_limits_default_from_each_other() {
        let args = |extra: &[&str]| parse_record(extra).unwrap();
        let o = |file_size: u64, max_size: u64| RingOptions {
            file_size,
            max_size,
        };
        let limits = |extra: &[&str]| ring_options(&args(extra));
        assert_eq!(limits(&[]), o(64 << 20, 1 << 30));
        // A cap alone (`ioblame top --max-size`): files of a quarter of it, 64M at most.
        assert_eq!(limits(&["--max-size", "100M"]), o(25 << 20, 100 << 20));
        assert_eq!(limits(&["--max-size", "10G"]), o(64 << 20, 10 << 30));
        assert_eq!(limits(&["--max-size", "0"]), o(64 << 20, 0));
        assert_eq!(limits(&["--max-size", "3"]), o(1, 3));
        // One file that never rolls: no cap unless asked, and then an error.
        assert_eq!(limits(&["--file-size", "0"]), o(0, 0));
        check_args(&args(&["--file-size", "0"])).unwrap();
        let e = check_args(&args(&["--file-size", "0", "--max-size", "1G"])).unwrap_err();
        assert!(e.to_string().contains("needs ring files that roll"), "{e}");
        assert_eq!(limits(&["--file-size", "8M"]), o(8 << 20, 1 << 30));
        // The least cap as an argument: whole MiB, rounded up.
        assert_eq!(size_arg_up(5 << 20), "5M");
        assert_eq!(size_arg_up((5 << 20) + 1), "6M");
    }

    #[test]
    fn flush_interval_is_checked() {
        let args = parse_record;
        assert_eq!(args(&[]).unwrap().flush_interval, Duration::from_secs(1));
        for ok in ["10ms", "250ms", "1s", "10s"] {
            let a = args(&["--flush-interval", ok]).unwrap();
            check_args(&a).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in ["9ms", "0.5ms", "10.5s", "1m"] {
            let a = args(&["--flush-interval", bad]).unwrap();
            let e = check_args(&a).unwrap_err().to_string();
            assert!(
                e.starts_with("--flush-interval ") && e.ends_with("must be within 10ms..=10s"),
                "{bad}: {e}"
            );
        }
        assert!(args(&["--flush-interval", "0"]).is_err());
        assert!(args(&["--flush-interval", "fast"]).is_err());
    }
}
