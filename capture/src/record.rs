//! `ioblame-capture record`: open the events, drain the rings, hand chunks to the writer.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use ioblame_format::{
    kernel_dev, BlockDevice, ChunkBuilder, ChunkEncoder, ChunkHeader, EventDesc, FileTable, Header,
    Metadata, Mount, RingOptions, RingStats, RingWriter, EVENT_CALLCHAIN, EVENT_STACK_SAMPLE,
    EVENT_TASK_RECORDS, FILES_AT_END, FILES_CAPPED, FILES_TIMED_OUT, FILES_TOUCHED,
};

use crate::names::{self, Found, Name, Namer};
use crate::perf::{self, Event, EventSpec, Ring};
use crate::touched::{IdHasher, Touched};
use crate::ustack::UserStacks;
use crate::{cgroups, host, layers, paths, snapshot};
use ioblame_tracepoints::{self as events, FilterDev, Tracepoint};

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

/// Arguments of `record`.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Output directory for the ring files (created; must not already hold a trace).
    #[arg(short = 'o', long = "output", value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub output: PathBuf,
    /// Stop after this long (e.g. 30s, 500ms, 2m).
    #[arg(long, value_parser = crate::parse_duration)]
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
    #[arg(long, value_parser = crate::parse_size)]
    pub file_size: Option<u64>,
    /// Delete the oldest ring files beyond this total size (0: never) [default: 1G; none with
    /// --file-size 0]. It must hold two ring files and one file's metadata more; the file
    /// being written is never deleted.
    #[arg(long, value_parser = crate::parse_size)]
    pub max_size: Option<u64>,
    /// perf ring buffer size per CPU (rounded up to a power of two pages).
    #[arg(long, default_value = "16M", value_parser = crate::parse_size)]
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
    /// each named by file handle as soon as it appears (a file deleted later keeps the name
    /// it had) and again at the end (a renamed file gets its new name), with a walk, at the
    /// end, for what no handle names; its size and cost follow the trace, not the host.
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
    #[arg(long, default_value = "2s", value_parser = crate::parse_duration, value_name = "DUR")]
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
    #[arg(long, default_value = "1s", value_parser = crate::parse_duration, value_name = "DUR")]
    pub flush_interval: Duration,
    /// Record user-space stacks too: the stack events' callchains go on into user space
    /// (walked by frame pointers in the kernel: code built without them gives short
    /// stacks), with the executable mappings of the processes they name and their files'
    /// build ids (MMAP2 records, `/proc/PID/maps`), and, when the recording stops, the
    /// symbol tables of the files the stacks went through, so that another machine can name
    /// the functions. Each stack event keeps up to --stack-depth kernel frames and 64 user
    /// frames more (within kernel.perf_event_max_stack).
    #[arg(long)]
    pub user_stacks: bool,
    /// With --user-stacks: most bytes of symbol tables copied into the trace (the files
    /// beyond are named in the capture info, `user_symbols_left_out`).
    #[arg(long, default_value = "256M", value_parser = crate::parse_size, value_name = "SIZE")]
    pub user_symbols_max: u64,
    /// Command to run while recording (system-wide); the capture exits with its status.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

fn install_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a plain handler that only stores an atomic is
        // async-signal-safe; no SA_RESTART so poll() returns EINTR.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// User frames a stack event may carry beyond `--stack-depth` kernel frames
/// (`--user-stacks`).
const USER_STACK_FRAMES: u16 = 64;
/// Most user mappings kept (`--user-stacks`); the capture info says when more were seen.
const USER_MAPS_MAX: usize = 200_000;

/// Chunks flush at this many bytes per CPU, or at least every `--flush-interval`.
const CHUNK_BYTES: usize = 1 << 20;
/// The shortest `--flush-interval`.
const FLUSH_INTERVAL_MIN: Duration = Duration::from_millis(10);
/// The longest `--flush-interval`.
const FLUSH_INTERVAL_MAX: Duration = Duration::from_secs(10);
/// The longest wait for the rings between two reads (a flush due sooner wakes the loop
/// sooner): how late a signal, the command's exit or `--duration` may be seen.
const POLL_MAX: Duration = Duration::from_millis(100);
/// How far before the clock read at the start of a flush round its FLUSHED mark is put: a
/// record being written on another CPU while its ring was read carries an earlier time.
const FLUSHED_MARGIN_NS: u64 = 2_000_000;
/// The writer forces what it wrote to stable storage at least this often (fdatasync). With
/// the default `--flush-interval` (1 s), a host crash loses at most about the last two
/// seconds of records (plus any backlog of the writer, which the status line shows as
/// written bytes lagging).
const SYNC_EVERY: Duration = Duration::from_secs(1);

struct Cpu {
    cpu: u32,
    events: Vec<Event>,
    ring: Ring,
    builder: ChunkBuilder,
}

/// Shared state between the reader loop and the writer thread.
#[derive(Default)]
struct Shared {
    failed: AtomicBool,
    error: Mutex<Option<String>>,
    bytes: AtomicU64,
    chunks: AtomicU64,
    files: AtomicU64,
}

type RawChunk = (ChunkHeader, Vec<u8>);

/// What the recording loop hands to the writer thread.
enum ToWriter {
    /// Records of one CPU, to compress and append.
    Chunk(RawChunk),
    /// The FILES table taken when the capture ended, appended after the last chunk.
    Files(FileTable),
    /// Files named since the last such message (`--paths touched`): appended to the current
    /// file; every file opened later repeats all the names so far.
    Names(FileTable),
    /// The capture's facts again, once the command started (its pid).
    Info(Vec<(String, String)>),
    /// The cgroups of the start and end walks, appended after the last chunk.
    Cgroups(Vec<ioblame_format::Cgroup>),
    /// Every record of every CPU with an earlier time (perf clock, ns) was in a chunk sent
    /// before this message: a FLUSHED block, appended to the current file (the channel is
    /// FIFO, so it follows those chunks).
    Flushed(u64),
    /// Every loop mapping seen so far, after a new one was found: a LOOPS block.
    Loops(Vec<ioblame_format::LoopDevice>),
    /// Every dm target seen so far, after a new one was found: a DM_TARGETS block.
    DmTargets(Vec<ioblame_format::DmTarget>),
    /// Every user mapping read so far, after new ones were read: a USER_MAPS block.
    UserMaps(Vec<ioblame_format::UserMap>),
    /// The symbol tables of one ELF file, at stop: a USER_SYMBOLS block.
    UserSymbols(Box<ioblame_format::UserSymbols>),
    /// A JIT's symbol map, at stop.
    PerfMap(ioblame_format::PerfMap),
}

fn writer_thread(
    mut w: RingWriter,
    rx: Receiver<ToWriter>,
    level: i32,
    shared: Arc<Shared>,
) -> Option<RingStats> {
    use std::sync::mpsc::RecvTimeoutError;
    let fail = |what: String| {
        *shared.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(what);
        shared.failed.store(true, Ordering::SeqCst);
    };
    let mut encoder = ChunkEncoder::new(level);
    // Every name of `Names` messages so far, repeated in each new file's metadata (encoded
    // again only when it changed since the last roll).
    let mut names = names::Table::default();
    let mut names_changed = false;
    // When the oldest write not yet forced to disk was made.
    let mut unsynced: Option<Instant> = None;
    loop {
        let msg = match unsynced {
            Some(t) => rx.recv_timeout(SYNC_EVERY.saturating_sub(t.elapsed())),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        // A mark alone does not call for an fdatasync: it is for readers of the file being
        // written, which read it from the page cache; the next chunks' sync covers it.
        let durable = !matches!(msg, Ok(ToWriter::Flushed(_)));
        let res = match msg {
            Ok(ToWriter::Chunk((h, recs))) => {
                let enc = encoder.encode(h, &recs);
                if w.needs_roll(enc.block.len()) {
                    // The new file lists the tasks alive now (docs/format.md, TASKS), and the
                    // files named so far.
                    w.set_tasks(snapshot::tasks());
                    if names_changed {
                        w.set_files(&names.table(FILES_TOUCHED));
                        names_changed = false;
                    }
                }
                w.write_chunk(&enc)
            }
            Ok(ToWriter::Files(t)) => w.write_files(&t),
            Ok(ToWriter::Names(t)) => {
                names.merge(&t);
                names_changed = true;
                w.append_files(&t)
            }
            Ok(ToWriter::Info(i)) => w.write_capture_info(&i),
            Ok(ToWriter::Cgroups(c)) => w.write_cgroups(&c),
            Ok(ToWriter::Flushed(t)) => w.write_flushed(t),
            Ok(ToWriter::Loops(l)) => w.write_loops(&l),
            Ok(ToWriter::DmTargets(t)) => w.write_dm_targets(&t),
            Ok(ToWriter::UserMaps(m)) => w.write_user_maps(&m),
            Ok(ToWriter::UserSymbols(s)) => w.write_user_symbols(&s),
            Ok(ToWriter::PerfMap(m)) => w.write_perf_map(&m),
            Err(RecvTimeoutError::Timeout) => Ok(()),
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if let Err(e) = res {
            fail(io_message(&e));
            // Stop writing: the file was cut back to its last whole block and stays readable.
            return None;
        }
        let s = w.stats();
        if durable && s.bytes_written > shared.bytes.load(Ordering::Relaxed) {
            unsynced.get_or_insert_with(Instant::now);
        }
        shared.bytes.store(s.bytes_written, Ordering::Relaxed);
        shared.chunks.store(s.chunks, Ordering::Relaxed);
        shared
            .files
            .store(s.files_created as u64, Ordering::Relaxed);
        if unsynced.is_some_and(|t| t.elapsed() >= SYNC_EVERY) {
            if let Err(e) = w.sync() {
                fail(io_message(&e));
                return None;
            }
            unsynced = None;
        }
    }
    match w.finish() {
        Ok(s) => Some(s),
        Err(e) => {
            fail(io_message(&e));
            None
        }
    }
}

fn io_message(e: &ioblame_format::Error) -> String {
    if let ioblame_format::Error::Io { path, source } = e {
        if source.raw_os_error() == Some(libc::ENOSPC)
            || source.raw_os_error() == Some(libc::EDQUOT)
        {
            return format!(
                "output filesystem is full writing {} ({source}); recording stopped, the chunks \
                 already written stay readable; free space or use a smaller --max-size",
                path.display()
            );
        }
    }
    format!("writing the trace failed: {e}")
}

#[derive(Default)]
struct Counts {
    records: u64,
    samples: u64,
    lost: u64,
    ring_errors: u64,
    per_id: HashMap<u64, u64, BuildHasherDefault<IdHasher>>,
    /// The cgroups the kernel said were created while recording (CGROUP records), in
    /// order: named in the trace's cgroup table even if removed before the end.
    cgroups: Vec<ioblame_format::Cgroup>,
    /// The inodes the records refer to (`--paths touched`).
    touched: Touched,
    /// The user stacks' processes, mappings and files (`--user-stacks`).
    ustack: Option<UserStacks>,
}

fn send(tx: &SyncSender<ToWriter>, b: &mut ChunkBuilder, shared: &Shared) {
    if let Some(c) = b.take_raw() {
        // Blocks when the writer lags: the kernel then drops (and reports) records instead of
        // this process growing without bound. After a write failure chunks are dropped.
        if let Err(TrySendError::Full(c)) = tx.try_send(ToWriter::Chunk(c)) {
            if !shared.failed.load(Ordering::Relaxed) {
                let _ = tx.send(c);
            }
        }
    }
}

/// The time of the FLUSHED mark of a flush round whose clock reading, taken before the rings
/// were read, is `clock_ns`: [`FLUSHED_MARGIN_NS`] earlier.
fn flushed_mark(clock_ns: u64) -> u64 {
    clock_ns.saturating_sub(FLUSHED_MARGIN_NS)
}

/// Sends the FLUSHED mark of a flush round (see [`flushed_mark`]) after its chunks. Nothing
/// after a write failure.
fn mark_flushed(tx: &SyncSender<ToWriter>, shared: &Shared, clock_ns: u64) {
    if !shared.failed.load(Ordering::Relaxed) {
        let _ = tx.send(ToWriter::Flushed(flushed_mark(clock_ns)));
    }
}

fn drain(c: &mut Cpu, counts: &mut Counts, tx: &SyncSender<ToWriter>, shared: &Shared) {
    let Cpu {
        ring, builder, cpu, ..
    } = c;
    let r = ring.drain(|rec| {
        // A cgroup created: kept for the cgroup table, not in the chunks.
        if let Some(c) = perf::cgroup_record(rec) {
            counts.cgroups.push(c);
            return;
        }
        counts.touched.see(rec);
        if let Some(u) = &mut counts.ustack {
            u.see(rec);
        }
        let info = perf::record_info(rec);
        builder.push(rec, info.ts);
        counts.records += 1;
        if rec.len() >= 16
            && u32::from_ne_bytes([rec[0], rec[1], rec[2], rec[3]]) == perf::RECORD_SAMPLE
        {
            counts.samples += 1;
            let mut id = [0u8; 8];
            id.copy_from_slice(&rec[8..16]);
            *counts.per_id.entry(u64::from_ne_bytes(id)).or_default() += 1;
        }
        if info.lost > 0 {
            builder.add_lost(info.lost);
            counts.lost += info.lost;
        }
        if builder.len() >= CHUNK_BYTES {
            send(tx, builder, shared);
        }
    });
    if let Err(e) = r {
        // Marked in the chunk header (CHUNK_RING_DISCARDED), so the analyzer reports it too.
        builder.add_discarded(e.pending);
        counts.ring_errors += 1;
        eprintln!("ioblame-capture: warning: cpu {cpu}: {e}");
    }
}

fn human(n: u64) -> String {
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

/// Runs `record`; returns the process exit code.
pub fn run(a: RecordArgs) -> Result<u8> {
    // First of all: a SIGINT or SIGTERM during the start (opening the events, reading the
    // kernel's symbols, the FILES walk: seconds on a busy host) stops the recording as soon
    // as it starts, with its files closed, instead of killing the process mid-way.
    install_signals();
    let page = check_args(&a)?;
    let plan = plan(&a)?;
    let opened = open_events(&a, &plan, page)?;
    let (mut writer, files, facts) = create_trace(&a, &plan, &opened, page)?;
    let naming_mounts =
        (a.paths_mode() == PathsMode::Touched).then(|| naming_mounts(&plan, a.devices.is_some()));
    let touched = naming_mounts.as_ref().map(|ms| {
        let ats: Vec<_> = plan
            .tps
            .iter()
            .zip(&opened.specs)
            .map(|(t, s)| (t.inode_at(), s.callchain))
            .collect();
        let devs = ms.iter().map(|m| kernel_dev(m.major, m.minor)).collect();
        Touched::for_filesystems(
            &ats,
            &opened.ids,
            a.paths_max_entries,
            Some(devs),
            bdi_to_fs(ms, &plan.block_devices),
        )
    });
    let ustack = a.user_stacks.then(|| {
        let ids = opened
            .specs
            .iter()
            .zip(&opened.ids)
            .filter(|(s, _)| s.user_callchain)
            .flat_map(|(_, ids)| ids.iter().copied());
        UserStacks::new(ids, USER_MAPS_MAX, a.user_symbols_max)
    });
    let started = enable(&opened.per_cpu, &mut writer)?;
    // From here on every event is recorded: a workload started separately (not as the
    // command) should wait for this line.
    eprintln!(
        "ioblame-capture: recording {} tracepoints on {} CPUs into {}",
        opened.specs.len(),
        opened.per_cpu.len(),
        a.output.display()
    );

    let shared = Arc::new(Shared::default());
    let (tx, rx) = sync_channel::<ToWriter>(64);
    let wshared = shared.clone();
    let level = a.level;
    let wt = std::thread::Builder::new()
        .name("ioblame-writer".into())
        .spawn(move || writer_thread(writer, rx, level, wshared))
        .context("starting the writer thread")?;

    let (mut child, spawn_err) = match start_command(&a.command) {
        Ok(c) => (c, None),
        Err(e) => (None, Some(e)),
    };
    let mut info = facts.info.clone();
    if let Some(c) = &child {
        // The workload scope of the analyzer is this process and its descendants.
        info.push(("command_pid".into(), c.id().to_string()));
        let _ = tx.send(ToWriter::Info(info.clone()));
    }
    let naming = match naming_mounts {
        Some(ms) => Some(start_naming(ms, &tx)?),
        None => None,
    };
    let mut status = StatusLine::new();
    let mut rec = Recorder {
        per_cpu: opened.per_cpu,
        counts: Counts {
            touched: touched.unwrap_or_default(),
            ustack,
            ..Counts::default()
        },
        info,
        names_tx: naming.as_ref().map(|n| n.tx.clone()),
        tx,
        shared,
        layers: facts.layers,
    };
    let (stop_reason, child_status) = match spawn_err {
        Some(_) => ("the command could not start".to_string(), None),
        None => record_loop(
            &mut rec,
            child.as_mut(),
            a.duration,
            started,
            a.flush_interval,
            &mut status,
        ),
    };
    status.clear();

    let write_failed = rec.failed();
    let stopped = stop(
        rec,
        started,
        files.as_ref(),
        naming.map(|n| (n, a.paths_time)),
        facts.cgroups.as_deref(),
        wt,
    );
    let child_status = wait_command(child, child_status, write_failed);
    let error = stopped
        .shared
        .error
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    summary(
        &stopped.counts,
        &names_by_id(&plan.tps, &opened.ids),
        stopped.elapsed,
        stopped.stats.as_ref(),
        &stopped.shared,
        &stop_reason,
    );
    if let Some(e) = spawn_err {
        bail!("{e}");
    }
    if let Some(e) = error {
        bail!("{e}");
    }
    Ok(match child_status {
        Some(st) => exit_code(st),
        None => 0,
    })
}

/// Checks the arguments against this host's limits; returns the page size.
fn check_args(a: &RecordArgs) -> Result<usize> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
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
fn ring_options(a: &RecordArgs) -> RingOptions {
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
fn size_arg_up(n: u64) -> String {
    format!("{}M", n.div_ceil(1 << 20))
}

/// What to record: the events of `--events` found on this kernel and the devices of
/// `--devices`.
struct Plan {
    /// The events, as this kernel has them; with `--stacks sampled:N`, then a second
    /// event for each dirtying one (`stack_samples`).
    tps: Vec<Tracepoint>,
    /// Parallel to `tps`: the sample period of an event that samples the stacks of the
    /// event of the same name, `None` for the others.
    stack_samples: Vec<Option<u32>>,
    /// The block devices of this host.
    block_devices: Vec<BlockDevice>,
    /// The devices to filter on (none: every device).
    fdevs: Vec<FilterDev>,
}

/// Finds the events in tracefs (with a note for each missing or renamed one) and resolves
/// `--devices`.
fn plan(a: &RecordArgs) -> Result<Plan> {
    let tfs = host::tracefs()?;
    let names = events::set_names(&a.events)?;
    let is_set = matches!(a.events.as_str(), "default" | "minimal" | "full");
    let (tps, notes) = events::resolve(&tfs, &names, !is_set)?;
    for n in &notes {
        eprintln!("ioblame-capture: note: {n}");
    }
    let block_devices = host::block_devices();
    let fdevs: Vec<FilterDev> = match &a.devices {
        Some(s) => events::resolve_devices(s, &block_devices)?,
        None => Vec::new(),
    };
    let mut tps = tps;
    let mut stack_samples = vec![None; tps.len()];
    let sampled: Vec<(Tracepoint, u32)> = tps
        .iter()
        .filter_map(|t| Some((t.clone(), a.stacks.sampled(&t.name)?)))
        .collect();
    for (t, n) in sampled {
        tps.push(t);
        stack_samples.push(Some(n));
    }
    Ok(Plan {
        tps,
        stack_samples,
        block_devices,
        fdevs,
    })
}

/// The online CPUs, and how many CPUs the kernel may number (the header's `cpu_count`).
fn cpus() -> Result<(Vec<u32>, u32)> {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .context("reading /sys/devices/system/cpu/online")?;
    let cpus = snapshot::parse_cpulist(&online).context("parsing the online CPU list")?;
    let possible = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| snapshot::parse_cpulist(&s).ok())
        .and_then(|v| v.into_iter().max())
        .map_or(0, |m| m + 1)
        .max(cpus.iter().max().map_or(1, |m| m + 1));
    Ok((cpus, possible))
}

/// The plan's events, open (disabled) on every online CPU.
struct Opened {
    /// Each CPU's events, the first one owning the ring the others write into.
    per_cpu: Vec<Cpu>,
    /// How each event was opened, in the plan's order.
    specs: Vec<EventSpec>,
    /// Each event's in-kernel filter (empty: none).
    filters: Vec<String>,
    /// Each event's sample ids, one per CPU.
    ids: Vec<Vec<u64>>,
    /// How many CPUs the kernel may number.
    possible: u32,
    /// The size of each CPU's ring data area.
    data_bytes: usize,
}

/// Opens every event of the plan on every online CPU, disabled, with its filter, each CPU's
/// events writing into one ring.
fn open_events(a: &RecordArgs, plan: &Plan, page: usize) -> Result<Opened> {
    let (cpus, possible) = cpus()?;
    let tps = &plan.tps;
    let data_pages = (a.buffer_size as usize).div_ceil(page).next_power_of_two();
    let data_bytes = data_pages * page;
    let watermark = (data_bytes / 4).min(4 << 20) as u32;
    let filters: Vec<String> = tps
        .iter()
        .map(|t| events::plan_filter(t, &plan.fdevs, tps))
        .collect();
    // With user stacks, the user frames come after the kernel's, within the same limit.
    let max_stack = if a.user_stacks {
        (a.stack_depth.saturating_add(USER_STACK_FRAMES)).min(max_stack_sys())
    } else {
        a.stack_depth
    };
    let specs: Vec<EventSpec> = tps
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let callchain =
                plan.stack_samples[i].is_some() || (t.callchain && a.stacks.callchain(&t.name));
            EventSpec {
                config: t.id,
                callchain,
                user_callchain: callchain && a.user_stacks,
                sample_period: plan.stack_samples[i].unwrap_or(1).into(),
                cgroup: t.callchain && !a.no_cgroups,
                max_stack,
                task: i == 0,
                mmap: i == 0 && a.user_stacks,
                mmap_build_id: i == 0 && a.user_stacks,
                cgroup_records: i == 0 && !a.no_cgroups,
                watermark,
            }
        })
        .collect();
    let specs = with_cgroups_if_supported(specs, &cpus, tps);
    let specs = with_mmap_build_id_if_supported(specs, &cpus, tps);
    if a.user_stacks && !specs.iter().any(|s| s.user_callchain) {
        eprintln!(
            "ioblame-capture: warning: --user-stacks: no recorded event carries a stack \
             (--stacks {}): no user stack will be recorded",
            a.stacks.name()
        );
    }

    let mut per_cpu: Vec<Cpu> = Vec::new();
    let mut ids: Vec<Vec<u64>> = vec![Vec::new(); tps.len()];
    for &cpu in &cpus {
        let mut evs = Vec::with_capacity(tps.len());
        for (i, (t, spec)) in tps.iter().zip(&specs).enumerate() {
            let ev = Event::open(spec, cpu, &t.name)?;
            if !filters[i].is_empty() {
                ev.set_filter(&filters[i], &t.name)?;
            }
            ids[i].push(ev.id()?);
            evs.push(ev);
        }
        let ring = Ring::map(&evs[0], data_pages, page)?;
        for ev in &evs[1..] {
            ev.set_output(&evs[0])?;
        }
        per_cpu.push(Cpu {
            cpu,
            events: evs,
            ring,
            builder: ChunkBuilder::new(cpu),
        });
    }
    Ok(Opened {
        per_cpu,
        specs,
        filters,
        ids,
        possible,
        data_bytes,
    })
}

/// `specs`, without `PERF_SAMPLE_CGROUP` when this kernel refuses it (before 5.7, or
/// without cgroup2): a probe opens the first event asking for it on the first CPU. A
/// warning says what is lost.
fn with_cgroups_if_supported(
    mut specs: Vec<EventSpec>,
    cpus: &[u32],
    tps: &[Tracepoint],
) -> Vec<EventSpec> {
    let Some(i) = specs.iter().position(|s| s.cgroup) else {
        return specs;
    };
    let probe = EventSpec {
        task: false,
        ..specs[i]
    };
    if let Err(e) = Event::open(&probe, cpus.first().copied().unwrap_or(0), &tps[i].name) {
        eprintln!(
            "ioblame-capture: warning: this kernel does not record the cgroup of samples \
             (PERF_SAMPLE_CGROUP, Linux 5.7): acts will have no cgroup ({e:#})"
        );
        for s in &mut specs {
            s.cgroup = false;
            s.cgroup_records = false;
        }
    }
    specs
}

/// `specs`, without the build id in the MMAP2 records when this kernel refuses it (before
/// 5.12): a probe opens the event of the task records on the first CPU. The recorder then
/// reads the build ids of the files itself.
fn with_mmap_build_id_if_supported(
    mut specs: Vec<EventSpec>,
    cpus: &[u32],
    tps: &[Tracepoint],
) -> Vec<EventSpec> {
    let Some(i) = specs.iter().position(|s| s.mmap_build_id) else {
        return specs;
    };
    let cpu = cpus.first().copied().unwrap_or(0);
    if let Err(e) = Event::open(&specs[i], cpu, &tps[i].name) {
        let without = EventSpec {
            mmap_build_id: false,
            ..specs[i]
        };
        if Event::open(&without, cpu, &tps[i].name).is_ok() {
            eprintln!(
                "ioblame-capture: note: this kernel does not put build ids in MMAP2 records \
                 (Linux 5.12): the recorder reads them from the files ({e:#})"
            );
            for s in &mut specs {
                s.mmap_build_id = false;
            }
        }
    }
    specs
}

/// `kernel.perf_event_max_stack` (127 when it cannot be read).
fn max_stack_sys() -> u16 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_stack")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(127)
}

/// The walk of the recorded filesystems that makes a FILES table.
struct FilesWalk<'a> {
    mounts: Vec<Mount>,
    /// The devices of `--devices` (none: every block device's filesystems).
    devs: Option<Vec<(u32, u32)>>,
    block_devices: &'a [BlockDevice],
    limits: paths::Limits,
}

impl FilesWalk<'_> {
    /// Walks the filesystems; `flags` is added to the table's.
    /// Warns when the walk was cut short (the analyzer says so too).
    fn walk(&self, flags: u32) -> FileTable {
        let ms = paths::mounts_to_walk(&self.mounts, self.devs.as_deref(), self.block_devices);
        let t = paths::walk(&ms, self.limits, flags);
        let when = if flags & FILES_AT_END != 0 {
            "end"
        } else {
            "start"
        };
        if t.flags & FILES_TIMED_OUT != 0 {
            eprintln!(
                "ioblame-capture: warning: the walk for file paths at the {when} stopped after \
                 {:?} (--paths-time) with {} paths: some files will be unnamed",
                self.limits.budget,
                t.entries.len()
            );
        }
        if t.flags & FILES_CAPPED != 0 {
            eprintln!(
                "ioblame-capture: warning: the walk for file paths at the {when} stopped at \
                 {} paths (--paths-max-entries): some files will be unnamed",
                self.limits.max_entries
            );
        }
        t
    }
}

/// How often the namer hands the names it found to the writer while recording: a recorder
/// killed later keeps them.
const NAMES_EVERY: Duration = Duration::from_secs(2);

impl RecordArgs {
    /// `--paths`, with `--no-paths`.
    fn paths_mode(&self) -> PathsMode {
        if self.no_paths {
            PathsMode::None
        } else {
            self.paths
        }
    }
}

/// What the namer thread returns: itself, every name found, the inodes left to the walk.
type NamerDone = (Namer, names::Table, HashSet<(u32, u64)>);

/// The naming of the inodes the trace refers to (`--paths touched`): a thread that names them
/// as the recording finds them.
struct Naming {
    tx: std::sync::mpsc::Sender<Vec<(u32, u64)>>,
    thread: JoinHandle<NamerDone>,
    /// The mounts it names in (one per filesystem), for the walk at the end.
    mounts: Vec<Mount>,
    /// Set when the recording ends: past it the namer leaves what is queued to the walk, so
    /// a backlog of lookups cannot hold the stop beyond `--paths-time`.
    deadline: Arc<std::sync::OnceLock<Instant>>,
}

/// The filesystems whose files are named: one mount each, of the recorded devices
/// (`devices_given`), or of every block device.
fn naming_mounts(plan: &Plan, devices_given: bool) -> Vec<Mount> {
    let all = snapshot::mounts();
    let devs: Option<Vec<(u32, u32)>> =
        devices_given.then(|| plan.fdevs.iter().map(|d| (d.major, d.minor)).collect());
    paths::mounts_to_walk(&all, devs.as_deref(), &plan.block_devices)
        .into_iter()
        .cloned()
        .collect()
}

/// For each disk with exactly one of `mounts` on a partition of it: the disk's kernel dev_t
/// -> the partition's (writeback events name the backing device, the disk).
fn bdi_to_fs(mounts: &[Mount], block_devices: &[BlockDevice]) -> HashMap<u32, u32> {
    let mut on_disk: HashMap<u32, Vec<u32>> = HashMap::new();
    for m in mounts {
        let part = block_devices
            .iter()
            .find(|b| (b.major, b.minor) == (m.major, m.minor) && !b.parent.is_empty());
        let disk = part.and_then(|p| block_devices.iter().find(|b| b.name == p.parent));
        if let Some(d) = disk {
            on_disk
                .entry(kernel_dev(d.major, d.minor))
                .or_default()
                .push(kernel_dev(m.major, m.minor));
        }
    }
    on_disk
        .into_iter()
        .filter_map(|(disk, fss)| (fss.len() == 1).then(|| (disk, fss[0])))
        .collect()
}

/// Starts the namer thread on `mounts`.
fn start_naming(mounts: Vec<Mount>, tx: &SyncSender<ToWriter>) -> Result<Naming> {
    let namer = Namer::new(&mounts.iter().collect::<Vec<_>>());
    let (ntx, nrx) = std::sync::mpsc::channel::<Vec<(u32, u64)>>();
    let wtx = tx.clone();
    let deadline: Arc<std::sync::OnceLock<Instant>> = Arc::default();
    let d = deadline.clone();
    let thread = std::thread::Builder::new()
        .name("ioblame-namer".into())
        .spawn(move || namer_thread(namer, nrx, wtx, &d))
        .context("starting the namer thread")?;
    Ok(Naming {
        tx: ntx,
        thread,
        mounts,
        deadline,
    })
}

/// Names each inode as it first appears; every [`NAMES_EVERY`] hands the new names to the
/// writer. Returns, when the recording ends, the namer, every name found and the inodes left
/// to the walk.
fn namer_thread(
    mut namer: Namer,
    rx: Receiver<Vec<(u32, u64)>>,
    tx: SyncSender<ToWriter>,
    deadline: &std::sync::OnceLock<Instant>,
) -> NamerDone {
    use std::sync::mpsc::RecvTimeoutError;
    let mut table = names::Table::default();
    let mut part = names::Table::default();
    let mut to_walk: HashSet<(u32, u64)> = HashSet::new();
    let mut last = Instant::now();
    loop {
        match rx.recv_timeout(NAMES_EVERY) {
            Ok(batch) => {
                for k in batch {
                    // Touched keeps only the recorded filesystems' inodes; a filesystem whose
                    // mount point could not be read is not known here.
                    if !namer.knows(k.0) || table.get(k).is_some() || to_walk.contains(&k) {
                        continue;
                    }
                    if deadline.get().is_some_and(|d| Instant::now() >= *d) {
                        to_walk.insert(k);
                        continue;
                    }
                    let name = match namer.name(k.0, k.1) {
                        Found::Named(p) => Name::Path(p),
                        Found::Unnamed(w) => Name::Unnamed(w),
                        Found::Walk => {
                            to_walk.insert(k);
                            continue;
                        }
                    };
                    table.set(k, name.clone());
                    part.set(k, name);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if last.elapsed() >= NAMES_EVERY && !part.is_empty() {
            let _ = tx.send(ToWriter::Names(part.table(FILES_TOUCHED)));
            part = names::Table::default();
            last = Instant::now();
        }
    }
    (namer, table, to_walk)
}

impl Naming {
    /// Ends the naming (the sender must be dropped, or this waits for it): looks every named
    /// inode up again (a renamed file gets its new name; half of `budget` at most), walks the
    /// filesystems for the inodes no handle named (the rest of `budget`), and returns the
    /// whole table, with the flags of what was left out. Prints what it did.
    fn finish(self, budget: Duration, over_cap: usize) -> FileTable {
        let started = Instant::now();
        let _ = self.deadline.set(started + budget / 2);
        drop(self.tx);
        let Ok((mut namer, mut table, mut to_walk)) = self.thread.join() else {
            eprintln!("ioblame-capture: warning: the namer thread failed: no file names");
            return FileTable::default();
        };
        let while_recording = namer.stats;
        let named: Vec<(u32, u64)> = table
            .iter()
            .filter(|(_, n)| matches!(n, Name::Path(_)))
            .map(|(k, _)| *k)
            .collect();
        let mut renames_left = 0;
        for (i, k) in named.iter().enumerate() {
            if started.elapsed() >= budget / 2 {
                renames_left = named.len() - i;
                break;
            }
            if let Found::Named(p) = namer.name(k.0, k.1) {
                table.set(*k, Name::Path(p));
            }
        }
        let mut flags = FILES_TOUCHED | FILES_AT_END;
        let mut by_walk = 0;
        if !to_walk.is_empty() {
            let ms: Vec<&Mount> = self.mounts.iter().collect();
            let t = paths::find(&ms, &mut to_walk, budget.saturating_sub(started.elapsed()));
            by_walk = t.entries.len();
            for e in t.entries {
                table.set((e.dev, e.ino), Name::Path(e.path));
            }
            flags |= t.flags & FILES_TIMED_OUT;
        }
        for k in to_walk {
            table.set(k, Name::Unnamed(ioblame_format::Unnamed::NotFound));
        }
        if over_cap > 0 {
            flags |= FILES_CAPPED;
            eprintln!(
                "ioblame-capture: warning: {over_cap} or more files beyond --paths-max-entries \
                 were touched and are not named"
            );
        }
        if renames_left > 0 {
            eprintln!(
                "ioblame-capture: note: {renames_left} files were not looked up again within \
                 --paths-time: if renamed, they keep their earlier name"
            );
        }
        let (n, unnamed) = table.counts();
        let mut line = format!(
            "ioblame-capture: named {n} of {} files the trace refers to ({} by file handle, \
             {by_walk} by a walk): {} lookups in {:.3} s while recording, {:.3} s at the end",
            n + unnamed.values().sum::<usize>(),
            n - by_walk,
            while_recording.by_handle + while_recording.deleted + while_recording.to_walk,
            while_recording.time.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
        for (code, k) in unnamed {
            if let Some(w) = ioblame_format::Unnamed::from_code(code) {
                line.push_str(&format!("; {k} {}", w.describe()));
            }
        }
        eprintln!("{line}");
        table.table(flags)
    }
}

/// What the trace was created with that the capture adds to later.
struct Facts {
    /// The CAPTURE_INFO pairs (the command's pid is added once it started).
    info: Vec<(String, String)>,
    /// The cgroups at start; `None` when cgroups are not recorded.
    cgroups: Option<Vec<ioblame_format::Cgroup>>,
    /// The stacked devices at start, looked at again while recording.
    layers: layers::LayerWatch,
}

/// Creates the output directory and the trace in it: the header, the metadata and the FILES
/// table taken before recording starts (so that the walk's own reads are not recorded).
/// Returns the writer, the walk to repeat
/// when recording ends (none with `--no-paths`) and the facts written.
fn create_trace<'a>(
    a: &RecordArgs,
    plan: &'a Plan,
    opened: &Opened,
    page: usize,
) -> Result<(RingWriter, Option<FilesWalk<'a>>, Facts)> {
    let created = !a.output.exists();
    std::fs::create_dir_all(&a.output)
        .with_context(|| format!("creating output directory {}", a.output.display()))?;
    let out_abs = std::fs::canonicalize(&a.output).unwrap_or_else(|_| a.output.clone());
    let output_dev = snapshot::dev_of(&out_abs)?;
    let descs: Vec<EventDesc> = plan
        .tps
        .iter()
        .zip(&opened.specs)
        .zip(opened.filters.iter().zip(opened.ids.iter().cloned()))
        .map(|((t, s), (f, ids))| event_desc(t, s, f, ids))
        .collect();
    let (kallsyms, kwarn) = snapshot::kallsyms();
    if let Some(w) = kwarn {
        eprintln!("ioblame-capture: warning: {w}");
    }
    let devices_info = plan
        .fdevs
        .iter()
        .map(|d| format!("{}:{}", d.major, d.minor))
        .collect::<Vec<_>>()
        .join(",");
    let mounts = snapshot::mounts();
    let files = FilesWalk {
        mounts: mounts.clone(),
        devs: a
            .devices
            .as_ref()
            .map(|_| plan.fdevs.iter().map(|d| (d.major, d.minor)).collect()),
        block_devices: &plan.block_devices,
        limits: paths::Limits {
            max_entries: a.paths_max_entries,
            budget: a.paths_time,
        },
    };
    let walk = a.paths_mode() == PathsMode::Walk;
    let start_files = walk.then(|| files.walk(0));
    let start_cgroups = opened
        .specs
        .iter()
        .any(|s| s.cgroup)
        .then(cgroups::snapshot);
    let layer_watch = layers::LayerWatch::start();
    let (hostname, kernel_release, machine) = snapshot::uname();
    let word_size = snapshot::kernel_word_size(kallsyms.as_ref(), &machine);
    let meta = Metadata {
        events: descs,
        kallsyms,
        block_devices: plan.block_devices.clone(),
        mounts,
        tasks: snapshot::tasks(),
        cgroups: start_cgroups.clone().unwrap_or_default(),
        loops: layer_watch.loops().to_vec(),
        dm_targets: layer_watch.dm_targets().to_vec(),
        user_maps: Vec::new(),
        capture_info: vec![
            ("command".into(), shell_join(&a.command)),
            ("devices".into(), devices_info),
            ("event_set".into(), a.events.clone()),
            ("output_dir".into(), out_abs.display().to_string()),
            ("output_dev".into(), output_dev),
            ("stack_depth".into(), a.stack_depth.to_string()),
            ("stacks".into(), a.stacks.name()),
            ("buffer_size".into(), opened.data_bytes.to_string()),
        ],
    };
    let mut meta = meta;
    if a.user_stacks {
        let build_id = opened.specs.iter().any(|s| s.mmap_build_id);
        meta.capture_info.extend([
            ("user_stacks".into(), "fp".into()),
            (
                "mmap_build_id".into(),
                if build_id { "yes" } else { "no" }.into(),
            ),
        ]);
        // Which boot recorded: an analysis on this same boot may read what the trace lacks
        // from here (a JIT's perf map), and no other may.
        if let Ok(id) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
            meta.capture_info
                .push(("boot_id".into(), id.trim().to_string()));
        }
    }
    let header = Header {
        byte_order: ioblame_format::ByteOrder::native(),
        word_size,
        page_size: page as u32,
        cpu_count: opened.possible,
        clock_id: libc::CLOCK_MONOTONIC,
        recorder_pid: std::process::id(),
        file_index: 0,
        start_time_ns: snapshot::clock_ns(libc::CLOCK_REALTIME),
        start_clock_ns: snapshot::clock_ns(libc::CLOCK_MONOTONIC),
        trace_id: snapshot::random_u64(),
        hostname,
        kernel_release,
        machine,
        recorder_version: format!("ioblame-capture {}", env!("CARGO_PKG_VERSION")),
    };
    let opts = ring_options(a);
    let facts = Facts {
        info: meta.capture_info.clone(),
        cgroups: start_cgroups,
        layers: layer_watch,
    };
    let writer = RingWriter::create_fitted(&a.output, header, meta, start_files.as_ref(), opts);
    if writer.is_err() && created {
        // Refused before any file was made: leave no empty directory behind.
        let _ = std::fs::remove_dir(&a.output);
    }
    // (`--file-size 0` with a cap, the other refusal, is `check_args`'.)
    let writer = writer.map_err(|e| match e {
        ioblame_format::Error::RingTooSmall {
            file_start,
            file_size,
            max_size,
        } => anyhow::anyhow!(
            "--max-size {} cannot hold two ring files of {} and their last blocks (each \
             begins with {} of metadata, the kernel's symbols and any walk's file names, so \
             that it reads alone): the ring would keep only the file being written; use \
             --max-size {} or more, or 0 for no cap",
            human(max_size),
            human(file_size),
            human(file_start),
            size_arg_up(RingOptions::least_max_size(file_size, file_start))
        ),
        e => anyhow::anyhow!(io_message(&e)),
    })?;
    let fitted = writer.options();
    if a.file_size.is_some_and(|f| f != fitted.file_size) {
        eprintln!(
            "ioblame-capture: --file-size {} is less than twice the {} of metadata every ring \
             file begins with; files roll at {} ({} bytes)",
            human(opts.file_size),
            human(fitted.file_size / 2),
            human(fitted.file_size),
            fitted.file_size
        );
    }
    Ok((writer, walk.then_some(files), facts))
}

/// Enables the events, then lists the tasks again: the first file names every task alive
/// before or after the events were enabled, so none forked (or exited) in between is missed.
/// The second list is a later TASKS block, which wins (docs/format.md). Returns when
/// recording started.
fn enable(per_cpu: &[Cpu], writer: &mut RingWriter) -> Result<Instant> {
    let tasks_before = snapshot::tasks();
    for c in per_cpu {
        for ev in &c.events {
            ev.enable()?;
        }
    }
    let started = Instant::now();
    writer
        .write_tasks(&snapshot::merge_tasks(tasks_before, snapshot::tasks()))
        .map_err(|e| anyhow::anyhow!(io_message(&e)))?;
    Ok(started)
}

/// Starts the command to run while recording, if any; the error says why it could not
/// start.
fn start_command(command: &[String]) -> Result<Option<Child>, String> {
    if command.is_empty() {
        return Ok(None);
    }
    std::process::Command::new(&command[0])
        .args(&command[1..])
        .spawn()
        .map(Some)
        .map_err(|e| format!("cannot run {}: {e}", command[0]))
}

/// The events being recorded, what was counted of them, and the way to the writer thread.
struct Recorder {
    per_cpu: Vec<Cpu>,
    counts: Counts,
    /// Where the inodes seen for the first time go to be named (`--paths touched`).
    names_tx: Option<std::sync::mpsc::Sender<Vec<(u32, u64)>>>,
    tx: SyncSender<ToWriter>,
    shared: Arc<Shared>,
    /// The stacked devices seen so far.
    layers: layers::LayerWatch,
    /// The CAPTURE_INFO pairs written so far (added to at stop with `--user-stacks`).
    info: Vec<(String, String)>,
}

impl Recorder {
    /// Reads every CPU's ring into its chunk, sending the chunks that are full, and the
    /// inodes seen for the first time to the namer.
    fn drain_all(&mut self) {
        for c in self.per_cpu.iter_mut() {
            drain(c, &mut self.counts, &self.tx, &self.shared);
        }
        if let Some(n) = &self.names_tx {
            let fresh = self.counts.touched.take_fresh();
            if !fresh.is_empty() {
                let _ = n.send(fresh);
            }
        }
    }

    /// Sends every CPU's chunk as it is.
    fn flush_all(&mut self) {
        for c in self.per_cpu.iter_mut() {
            send(&self.tx, &mut c.builder, &self.shared);
        }
    }

    /// Has the writer mark the trace complete below `clock_ns`, taken before the rings were
    /// read for the chunks just sent (see [`flushed_mark`]).
    fn mark_flushed(&self, clock_ns: u64) {
        mark_flushed(&self.tx, &self.shared, clock_ns);
    }

    /// Whether the writer failed (and stopped).
    fn failed(&self) -> bool {
        self.shared.failed.load(Ordering::SeqCst)
    }
}

/// The status line printed while recording: on a terminal one line, rewritten every second;
/// otherwise a line every five seconds.
struct StatusLine {
    tty: bool,
    every: Duration,
    last: Instant,
    last_records: u64,
}

impl StatusLine {
    fn new() -> StatusLine {
        let tty = std::io::stderr().is_terminal();
        StatusLine {
            tty,
            every: if tty {
                Duration::from_secs(1)
            } else {
                Duration::from_secs(5)
            },
            last: Instant::now(),
            last_records: 0,
        }
    }

    /// Prints the line when it is due; `written`: bytes the writer wrote.
    fn tick(&mut self, counts: &Counts, written: u64) {
        if self.last.elapsed() >= self.every {
            let secs = self.last.elapsed().as_secs_f64();
            let rate = (counts.records - self.last_records) as f64 / secs;
            let line = format!(
                "ioblame-capture: {:.0} events/s, {} records, {} written, {} lost",
                rate,
                counts.records,
                human(written),
                counts.lost
            );
            if self.tty {
                eprint!("\r{line}\x1b[K");
            } else {
                eprintln!("{line}");
            }
            self.last = Instant::now();
            self.last_records = counts.records;
        }
    }

    /// Clears the line on a terminal.
    fn clear(&self) {
        if self.tty {
            eprint!("\r\x1b[K");
        }
    }
}

/// Drains the rings into the writer until something stops the recording: a write failure,
/// a signal, the command's exit or `--duration` since `started`. Returns why, with the
/// command's exit status when it exited.
///
/// Every `flush_every` it sends every CPU's chunk as it is, then a FLUSHED mark: the clock is
/// read before the rings are, so every record older than the mark was in a ring when it was
/// read, and is in a chunk sent before the mark.
fn record_loop(
    rec: &mut Recorder,
    mut child: Option<&mut Child>,
    duration: Option<Duration>,
    started: Instant,
    flush_every: Duration,
    status: &mut StatusLine,
) -> (String, Option<ExitStatus>) {
    let mut last_flush = Instant::now();
    let mut pfds: Vec<libc::pollfd> = rec
        .per_cpu
        .iter()
        .map(|c| libc::pollfd {
            fd: c.events[0].fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // Until the next flush is due, at most POLL_MAX (rounded up to whole milliseconds).
        let wait = POLL_MAX.min(flush_every.saturating_sub(last_flush.elapsed()));
        let wait_ms = wait.as_micros().div_ceil(1000) as libc::c_int;
        // SAFETY: pfds is a valid array of pollfd of the given length.
        unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, wait_ms) };
        // The events' clock (perf's clockid), read before the rings.
        let flush = (last_flush.elapsed() >= flush_every)
            .then(|| (Instant::now(), snapshot::clock_ns(libc::CLOCK_MONOTONIC)));
        rec.drain_all();
        // User stacks: the mappings and symbols of what was drained, read now, while short
        // lived processes (a container's job) most likely still live; written at the flush.
        if flush.is_none() {
            if let Some(u) = rec.counts.ustack.as_mut().filter(|u| u.has_work()) {
                u.work(snapshot::clock_ns(libc::CLOCK_MONOTONIC));
            }
        }
        if let Some((at, clock)) = flush {
            rec.flush_all();
            rec.mark_flushed(clock);
            // A loop device or dm target set up since: its mapping, from about now
            // (before the IO through it is charged, the analysis needs it; a second is
            // early enough for a device that must be set up, formatted and mounted first).
            if let Some(l) = rec.layers.rescan_loops(clock) {
                let _ = rec.tx.send(ToWriter::Loops(l));
            }
            if let Some(t) = rec.layers.rescan_dm(clock) {
                let _ = rec.tx.send(ToWriter::DmTargets(t));
            }
            // The mappings of the processes whose user stacks were seen since, and the
            // symbols of the files they went through, read while the processes live.
            if let Some(m) = rec.counts.ustack.as_mut().and_then(|u| u.flush(clock)) {
                if !rec.failed() {
                    let _ = rec.tx.send(ToWriter::UserMaps(m));
                }
            }
            last_flush = at;
        }
        if rec.failed() {
            return ("write failure".into(), None);
        }
        let sig = SIGNAL.load(Ordering::SeqCst);
        if sig != 0 {
            return (format!("signal {sig}"), None);
        }
        if let Some(ch) = child.as_mut() {
            if let Ok(Some(st)) = ch.try_wait() {
                return ("command exited".into(), Some(st));
            }
        }
        if duration.is_some_and(|d| started.elapsed() >= d) {
            return ("duration reached".into(), None);
        }
        status.tick(&rec.counts, rec.shared.bytes.load(Ordering::Relaxed));
    }
}

/// What is left when recording has stopped.
struct Stopped {
    counts: Counts,
    shared: Arc<Shared>,
    /// How long recording lasted.
    elapsed: Duration,
    /// The writer's statistics; none when it failed.
    stats: Option<RingStats>,
}

/// Stops recording: disables the events, drains what is left, has the FILES table of the
/// end (`files`) written after the last chunk, waits for the writer to finish the trace, then
/// closes the events.
fn stop(
    rec: Recorder,
    started: Instant,
    files: Option<&FilesWalk>,
    naming: Option<(Naming, Duration)>,
    start_cgroups: Option<&[ioblame_format::Cgroup]>,
    wt: JoinHandle<Option<RingStats>>,
) -> Stopped {
    let Recorder {
        mut per_cpu,
        mut counts,
        names_tx,
        tx,
        shared,
        layers: _,
        mut info,
    } = rec;
    for c in &per_cpu {
        for ev in &c.events {
            ev.disable();
        }
    }
    // Read before the last drain, as in the recording loop: the last mark covers every
    // record the events made.
    let clock = snapshot::clock_ns(libc::CLOCK_MONOTONIC);
    if !shared.failed.load(Ordering::SeqCst) {
        for c in per_cpu.iter_mut() {
            drain(c, &mut counts, &tx, &shared);
            send(&tx, &mut c.builder, &shared);
        }
        mark_flushed(&tx, &shared, clock);
    }
    let elapsed = started.elapsed();
    // The last records' mappings and every symbol table the stacks need, read before the
    // workload is stopped: after the last chunk.
    if let Some(u) = counts.ustack.take() {
        let done = u.finish(clock);
        eprintln!(
            "ioblame-capture: user stacks: {} mappings, symbols of {} files ({}){}",
            done.info
                .iter()
                .find(|(k, _)| k == "user_maps")
                .map_or("0", |(_, v)| v.as_str()),
            done.symbols.len(),
            human(done.symbols.iter().map(symbols_bytes).sum()),
            if done.left_out > 0 {
                format!(
                    ", {} files left out (capture info user_symbols_left_out)",
                    done.left_out
                )
            } else {
                String::new()
            }
        );
        if !shared.failed.load(Ordering::SeqCst) {
            if let Some(m) = done.maps {
                let _ = tx.send(ToWriter::UserMaps(m));
            }
            for s in done.symbols {
                let _ = tx.send(ToWriter::UserSymbols(Box::new(s)));
            }
            for m in done.perf_maps {
                let _ = tx.send(ToWriter::PerfMap(m));
            }
            info.extend(done.info);
            let _ = tx.send(ToWriter::Info(info));
        }
    }
    hand_off_events(&mut per_cpu);
    // The inodes of the last records, then the names: those found while recording, looked up
    // again (renamed files get their new name), and a walk for what no handle named.
    if let Some((n, budget)) = naming {
        let fresh = counts.touched.take_fresh();
        if !fresh.is_empty() {
            let _ = n.tx.send(fresh);
        }
        drop(names_tx);
        let over_cap = counts.touched.over_cap();
        let t = n.finish(budget, over_cap);
        if !shared.failed.load(Ordering::SeqCst) {
            let _ = tx.send(ToWriter::Names(t));
        }
    }
    // The FILES table at the end names the files created during the capture. A failed
    // writer has stopped: nothing more is written.
    if let Some(f) = files {
        if !shared.failed.load(Ordering::SeqCst) {
            let _ = tx.send(ToWriter::Files(f.walk(FILES_AT_END)));
        }
    }
    // The cgroups created while recording, with those of the start (a reader takes the
    // first file's table and the last's).
    if let Some(start) = start_cgroups {
        if !shared.failed.load(Ordering::SeqCst) {
            // The walk at the end wins over the CGROUP records (a path reused), which win
            // over the start's.
            let seen = cgroups::merge(start, std::mem::take(&mut counts.cgroups));
            let end = cgroups::merge(&seen, cgroups::snapshot());
            if end.as_slice() != start {
                let _ = tx.send(ToWriter::Cgroups(end));
            }
        }
    }
    drop(tx);
    let stats = wt.join().unwrap_or(None);
    drop(per_cpu);
    Stopped {
        counts,
        shared,
        elapsed,
        stats,
    }
}

/// Closes the (disabled, drained) events of `per_cpu` without making the recorder wait for
/// the kernel's teardown: a forked child holds the last references and closes them when it
/// exits, after this process has dropped its own. The rings stay mapped until `per_cpu` is
/// dropped.
///
/// The last close of a tracepoint's perf events unregisters its probe and waits for RCU
/// grace periods (`perf_trace_destroy` → `tracepoint_synchronize_unregister`) under the
/// kernel's `event_mutex`: 25-60 ms per tracepoint on this kernel, about 2.4 s for the
/// default set. The mutex serialises them, so closing from several threads gains nothing
/// (measured: the closes of 35 threads, one per tracepoint, completed one after another).
/// The events are disabled and drained before this runs, so the child's teardown cannot
/// lose or add a record; a capture started right after this one waits for it in
/// `perf_event_open`. Where no child can be forked, the events are closed here.
fn hand_off_events(per_cpu: &mut [Cpu]) {
    let events: Vec<Event> = per_cpu
        .iter_mut()
        .flat_map(|c| std::mem::take(&mut c.events))
        .collect();
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let [rd, wr] = fds;
    // SAFETY: the child of a multithreaded process calls only async-signal-safe functions
    // (close, read, _exit) on descriptors it inherited, and allocates nothing.
    match unsafe { libc::fork() } {
        // SAFETY: as above: the child only closes, reads and exits.
        0 => unsafe {
            libc::close(wr);
            for fd in 0..3 {
                libc::close(fd);
            }
            // Until the parent has closed its copies of the events (and so the write end).
            let mut b = 0u8;
            while libc::read(rd, (&mut b as *mut u8).cast(), 1) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
            // Exiting closes the events: the last references, so the teardown runs here.
            libc::_exit(0)
        },
        _ => {
            // After the fork (failed or not) the parent closes its read end, then its events
            // (cheap while the child holds references), then the write end, which lets the
            // child go on.
            // SAFETY: `rd` is ours and closed once.
            unsafe { libc::close(rd) };
            drop(events);
            // SAFETY: `wr` is ours and closed once.
            unsafe { libc::close(wr) };
        }
    }
}

/// Waits for the command once recording has stopped. One that has not exited (`status`
/// none) first gets the signal that stopped the capture, or SIGTERM when `--duration` did.
/// When writing the trace failed (`write_failed`: the output filesystem is full, say), the
/// workload is not the trace's to stop: it runs to its end, and a signal the recorder gets
/// meanwhile is passed on to it. Returns its exit status.
fn wait_command(
    child: Option<Child>,
    status: Option<ExitStatus>,
    write_failed: bool,
) -> Option<ExitStatus> {
    let Some(mut ch) = child else {
        return status;
    };
    if status.is_some() {
        return status;
    }
    let mut sig = SIGNAL.load(Ordering::SeqCst);
    if write_failed && sig == 0 {
        eprintln!(
            "ioblame-capture: recording stopped; the command runs on to its end (pid {})",
            ch.id()
        );
        loop {
            if let Ok(Some(st)) = ch.try_wait() {
                return Some(st);
            }
            sig = SIGNAL.load(Ordering::SeqCst);
            if sig != 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // SAFETY: sending a signal to our own child; without one, --duration ended the capture.
    unsafe { libc::kill(ch.id() as i32, if sig != 0 { sig } else { libc::SIGTERM }) };
    ch.wait().ok()
}

/// The event names by sample id: `ids` holds each of `tps`'s ids.
fn names_by_id<'a>(tps: &'a [Tracepoint], ids: &[Vec<u64>]) -> HashMap<u64, &'a str> {
    let mut names: HashMap<u64, &str> = HashMap::new();
    for (t, d) in tps.iter().zip(ids) {
        for id in d {
            names.insert(*id, t.name.as_str());
        }
    }
    names
}

fn exit_code(st: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(s)) => 128u8.wrapping_add(s as u8),
        _ => 1,
    }
}

fn summary(
    c: &Counts,
    names: &HashMap<u64, &str>,
    elapsed: Duration,
    stats: Option<&RingStats>,
    shared: &Shared,
    why: &str,
) {
    let secs = elapsed.as_secs_f64().max(1e-9);
    let (bytes, files, chunks) = match stats {
        Some(s) => (s.bytes_on_disk, s.files_created, s.chunks),
        None => (
            shared.bytes.load(Ordering::Relaxed),
            shared.files.load(Ordering::Relaxed).max(1) as u32,
            shared.chunks.load(Ordering::Relaxed),
        ),
    };
    eprintln!(
        "ioblame-capture: stopped ({why}) after {:.1} s: {} records ({} samples, {:.0}/s), \
         {} chunks, {} on disk in {} file(s), {} lost{}",
        secs,
        c.records,
        c.samples,
        c.samples as f64 / secs,
        chunks,
        human(bytes),
        files,
        c.lost,
        if c.ring_errors > 0 {
            format!(", {} ring errors", c.ring_errors)
        } else {
            String::new()
        }
    );
    let mut per_event: HashMap<&str, u64> = HashMap::new();
    for (id, n) in &c.per_id {
        *per_event
            .entry(names.get(id).copied().unwrap_or("?"))
            .or_default() += n;
    }
    let mut v: Vec<_> = per_event.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    if !v.is_empty() {
        let top: Vec<String> = v.iter().take(8).map(|(n, k)| format!("{n} {k}")).collect();
        eprintln!("ioblame-capture: top events: {}", top.join(", "));
    }
    if c.lost > 0 {
        eprintln!(
            "ioblame-capture: warning: the kernel dropped {} records; raise --buffer-size, \
             narrow --devices or use --events minimal",
            c.lost
        );
    }
}

fn event_desc(t: &Tracepoint, s: &EventSpec, filter: &str, ids: Vec<u64>) -> EventDesc {
    EventDesc {
        name: t.name.clone(),
        tracefs_id: t.id as u32,
        sample_type: s.sample_type(),
        read_format: 0,
        flags: if s.callchain { EVENT_CALLCHAIN } else { 0 }
            | if s.task { EVENT_TASK_RECORDS } else { 0 }
            | if s.sample_period > 1 {
                EVENT_STACK_SAMPLE
            } else {
                0
            },
        max_stack: if s.callchain { s.max_stack } else { 0 },
        filter: filter.to_string(),
        format: t.format.clone(),
        ids,
    }
}

/// The bytes of the sections of a symbol table.
fn symbols_bytes(s: &ioblame_format::UserSymbols) -> u64 {
    s.sections.iter().map(|x| x.data.len() as u64).sum()
}

fn shell_join(v: &[String]) -> String {
    v.iter()
        .map(|s| {
            if !s.is_empty()
                && s.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&c))
            {
                s.clone()
            } else {
                format!("'{}'", s.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioblame_format::{ring_file_name, ByteOrder, Task, Trace};

    /// A chunk of about `bytes` incompressible record bytes.
    fn chunk(b: &mut ChunkBuilder, bytes: usize, seed: u64) -> RawChunk {
        let mut x = seed | 1;
        let mut done = 0;
        while done < bytes {
            let mut rec = vec![0u8; 1024];
            rec[..4].copy_from_slice(&perf::RECORD_SAMPLE.to_ne_bytes());
            rec[6..8].copy_from_slice(&1024u16.to_ne_bytes());
            for v in &mut rec[8..] {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *v = x as u8;
            }
            b.push(&rec, Some(done as u64));
            done += rec.len();
        }
        b.take_raw().unwrap()
    }

    fn test_header() -> Header {
        Header {
            byte_order: ByteOrder::native(),
            word_size: 8,
            page_size: 4096,
            cpu_count: 1,
            clock_id: 1,
            recorder_pid: std::process::id(),
            file_index: 0,
            start_time_ns: 1,
            start_clock_ns: 1,
            trace_id: 3,
            hostname: "h".into(),
            kernel_release: "r".into(),
            machine: "m".into(),
            recorder_version: "t".into(),
        }
    }

    #[test]
    fn writer_syncs_every_second_and_lists_current_tasks_in_new_files() {
        let dir = tempfile::tempdir().unwrap();
        let header = test_header();
        let stale = Task {
            pid: u32::MAX,
            tid: u32::MAX,
            comm: "stale".into(),
        };
        let meta = Metadata {
            tasks: vec![stale.clone()],
            ..Metadata::default()
        };
        let opts = RingOptions {
            file_size: 64 << 10,
            max_size: 0,
        };
        let w = RingWriter::create(dir.path(), header, meta, opts).unwrap();
        let (tx, rx) = sync_channel::<ToWriter>(4);
        let shared = Arc::new(Shared::default());
        let s2 = shared.clone();
        let t = std::thread::spawn(move || writer_thread(w, rx, 1, s2));
        let mut b = ChunkBuilder::new(0);
        tx.send(ToWriter::Chunk(chunk(&mut b, 40 << 10, 1)))
            .unwrap();
        std::thread::sleep(Duration::from_millis(1300));
        // The first chunk was forced to disk though nothing else came.
        tx.send(ToWriter::Chunk(chunk(&mut b, 40 << 10, 2)))
            .unwrap();
        std::thread::sleep(Duration::from_millis(1300));
        drop(tx);
        let stats = t.join().unwrap().expect("writer succeeded");
        assert!(stats.syncs >= 2, "{stats:?}");
        assert_eq!(stats.files_created, 2, "{stats:?}");
        let first = Trace::open(&dir.path().join(ring_file_name(0))).unwrap();
        assert_eq!(first.metadata().tasks, vec![stale.clone()]);
        let second = Trace::open(&dir.path().join(ring_file_name(1))).unwrap();
        let tasks = &second.metadata().tasks;
        assert!(
            !tasks.contains(&stale),
            "the second file lists tasks alive when it started"
        );
        assert!(tasks.iter().any(|t| t.pid == std::process::id()));
    }

    #[test]
    fn flushed_marks_follow_their_chunks_and_alone_force_no_sync() {
        let dir = tempfile::tempdir().unwrap();
        let w = RingWriter::create(
            dir.path(),
            test_header(),
            Metadata::default(),
            RingOptions::default(),
        )
        .unwrap();
        let (tx, rx) = sync_channel::<ToWriter>(4);
        let shared = Arc::new(Shared::default());
        let s2 = shared.clone();
        let t = std::thread::spawn(move || writer_thread(w, rx, 1, s2));
        // Marks alone for longer than SYNC_EVERY: nothing forced to disk.
        for m in [10, 20, 30] {
            mark_flushed(&tx, &shared, m + FLUSHED_MARGIN_NS);
            std::thread::sleep(Duration::from_millis(450));
        }
        let file = dir.path().join(ring_file_name(0));
        let f = ioblame_format::TraceFile::open(&file).unwrap();
        assert_eq!(f.flushed(), Some(30));
        assert!(f.chunks().is_empty());
        // A chunk, then a mark: the mark lands after the chunk.
        let mut b = ChunkBuilder::new(0);
        tx.send(ToWriter::Chunk(chunk(&mut b, 4 << 10, 1))).unwrap();
        mark_flushed(&tx, &shared, 40 + FLUSHED_MARGIN_NS);
        drop(tx);
        let stats = t.join().unwrap().expect("writer succeeded");
        assert_eq!(stats.syncs, 0, "{stats:?}");
        let bytes = std::fs::read(&file).unwrap();
        let f = ioblame_format::TraceFile::open(&file).unwrap();
        assert_eq!(f.flushed(), Some(40));
        assert_eq!(f.chunks().len(), 1);
        let last_mark = bytes
            .windows(6)
            .rposition(|w| w[..4] == *b"IOBk" && w[4..] == 0x1Au16.to_le_bytes())
            .unwrap();
        assert!(f.chunks()[0].0 < last_mark as u64);
        // After a write failure no mark is sent.
        let (tx, rx) = sync_channel::<ToWriter>(1);
        shared.failed.store(true, Ordering::SeqCst);
        mark_flushed(&tx, &shared, 50);
        assert!(rx.try_recv().is_err());
        assert_eq!(flushed_mark(1), 0, "saturates");
    }

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
