//! What the pipeline found worth telling: warnings and notes, as data. The analyzer prints
//! each as `ioblame: {diagnostic}`.

use std::fmt;

use ioblame_attrib::{ActTotals, FileKey, LostWindow, Summary, Tables, WbReason};
use ioblame_decode::{DecoderProblem, SkipReason, StreamStats};

/// How much a [`Diagnostic`] matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Something went wrong or was lost: the answer may be incomplete.
    Warning,
    /// Something the user may want to know; the answer is complete.
    Note,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Note => "note",
        })
    }
}

/// Contexts of the IO charged to the lost intent named in [`Diagnostic::UnknownOrigin`],
/// largest first.
pub const UNKNOWN_CONTEXTS_SHOWN: usize = 5;

/// Loss windows named in [`Diagnostic::LostRecords`].
pub const LOST_WINDOWS_SHOWN: usize = 8;

/// One thing opening or analysing a trace found to say. Displays as `severity: message`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Diagnostic {
    /// A note of the perf.data conversion.
    PerfData(String),
    /// `--kallsyms` was given with an ioblame trace, which carries its own symbols.
    KallsymsIgnored,
    /// `--btrfs-map` was given with an ioblame trace or blktrace data: a trace carries its own
    /// chunk maps, blktrace sees the disks' sectors only.
    BtrfsMapIgnored,
    /// The btrfs map beside a perf.data file is older than it: not used.
    BtrfsMapStale {
        /// The map.
        path: std::path::PathBuf,
    },
    /// Damage the trace reader found; reading goes on up to it.
    Trace(ioblame_format::Problem),
    /// The recording host hid kernel addresses: no symbols.
    SymbolsHidden,
    /// The trace has no kernel symbols.
    NoSymbols,
    /// Something in the trace's metadata that limits decoding.
    Decoder(DecoderProblem),
    /// A chunk that could not be read, skipped.
    DamagedChunk(ioblame_decode::stream::DamagedChunk),
    /// Records the decoder skipped, counted by reason (non-zero counts only).
    RecordsSkipped(Vec<(SkipReason, u64)>),
    /// The kernel lost records during the capture.
    LostRecords {
        /// Records lost.
        records: u64,
        /// Where, in trace order.
        windows: Vec<LostWindow>,
        /// The capture's start (ns, the trace's clock): windows are shown from it.
        start: u64,
        /// Bytes of IO whose span touched a window.
        bytes: u64,
    },
    /// IO that saw no progress for two minutes of trace time, charged to the lost intent.
    StaleIo {
        /// Its bytes.
        bytes: u64,
        /// Issued requests among it (the rest were bios queued).
        requests: u64,
    },
    /// IO the end of the trace left queued or in flight, not charged.
    LeftAtEnd {
        /// Bytes queued but not issued.
        queued_bytes: u64,
        /// Bytes in flight.
        inflight_bytes: u64,
        /// Requests in flight.
        inflight_requests: u64,
    },
    /// Requests neither reads nor writes (discards, ...), not charged to acts.
    NeitherReadNorWrite {
        /// The requests.
        requests: u64,
        /// Their bytes.
        bytes: u64,
    },
    /// IO of no known origin, charged to the lost intent (#1).
    UnknownOrigin {
        /// Its bytes.
        bytes: u64,
        /// Its IOs.
        ios: u64,
        /// The largest contexts it was charged in (at most [`UNKNOWN_CONTEXTS_SHOWN`]).
        contexts: Vec<UnknownContextNote>,
        /// How many smaller contexts are not shown.
        more: usize,
    },
    /// A warning of the attribution.
    Attribution(String),
    /// Warnings of the attribution beyond those kept.
    WarningsSuppressed(u64),
    /// Damage or another thing the blktrace reader read past.
    Blktrace(ioblame_blktrace::Problem),
    /// The recording host's cgroup2 root enabled no controller: its kernel reported every
    /// task in the root cgroup (the recorder's capture info `cgroup_root_controllers=none`).
    /// Said by the outputs that name cgroups.
    CgroupsFlat,
    /// blktrace cannot see who dirtied the pages: writes issued by flushers are charged to
    /// them. Said once for every blktrace recording.
    BlktraceWriters {
        /// Bytes written by flushers and journal threads.
        flusher_bytes: u64,
        /// Bytes written in all.
        written_bytes: u64,
    },
    /// The trace's last file was not closed: the recorder was killed or crashed, or is still
    /// writing it. Every complete chunk is read; what the recorder had not yet written is
    /// missing (it writes each CPU's records at least once a second).
    NotClosed {
        /// The file.
        file: std::path::PathBuf,
        /// Where each CPU's records end, the earliest and the latest, in seconds since the
        /// capture started (none when the trace has no chunk).
        ends: Option<(f64, f64)>,
    },
    /// The recorder's walk for file paths stopped early (its time or entry limit): files it
    /// did not reach are shown by device and inode.
    PathsCutShort {
        /// The union of the FILES tables' flags ([`ioblame_format::FILES_CAPPED`],
        /// [`ioblame_format::FILES_TIMED_OUT`]).
        flags: u32,
        /// Paths known.
        paths: usize,
    },
    /// Charged files the trace does not name, by why (`None`: no table mentions them), with
    /// how many and the bytes charged to them.
    UnnamedFiles {
        /// (why, files, bytes): first those no table mentions, then by the recorder's reason.
        by_why: Vec<(Option<ioblame_format::Unnamed>, usize, u64)>,
        /// Whether the trace's table names what the trace touched (`FILES_TOUCHED`), not a
        /// walk of the filesystems.
        touched: bool,
    },
    /// Dirty buffers recorded without a callchain (`--stacks exact`) for which no stack was
    /// found: neither the dirty event of a folio they dirtied nor an earlier buffer of their
    /// thread gave one. Their dirtier and file are known; their intent has no stack.
    BuffersWithoutStack(u64),
    /// The recording kernel's iomap (xfs) writeback emits no sector map (5.10: no
    /// `iomap_writepage_map`, which is newer): the bytes written back from files with more
    /// than one dirtier, which no other rule linked, went to the lost intent with their file
    /// known. Said once, with those bytes.
    UnmappedWriteback {
        /// Those bytes.
        bytes: u64,
    },
    /// btrfs extents written without their filesystem's chunk map in the trace, or on chunks
    /// of a parity profile: their bytes could not be placed on the disk, so btrfs's rule did
    /// not charge them. Said once, with those bytes.
    BtrfsUnmapped {
        /// Bytes of extents of filesystems the trace has no chunk map of.
        no_map: u64,
        /// Bytes written on RAID5/RAID6 chunks.
        parity: u64,
    },
    /// btrfs writeback of inode numbers that two subvolumes of one filesystem wrote within
    /// 30 s of each other: the kernel's page-cache events name a btrfs file by its
    /// filesystem and number, not its subvolume, so these bytes may be charged to the other
    /// file's dirtier. Said once, with those bytes.
    BtrfsSharedInodes {
        /// Those bytes (as written).
        bytes: u64,
    },
    /// User stack copies (`--user-stacks dwarf`) whose unwinding reached the copy's end: the
    /// stack was deeper than the copy. Their intents' bytes are in [`Self::UserStacksShort`].
    StackCopiesCut {
        /// Copies cut.
        cut: u64,
        /// Copies unwound.
        copies: u64,
    },
    /// IO of loop devices' backing files charged to the acts the loop devices served, as
    /// copies on the lower device (`Io::lower`): counted for that device, not again in the
    /// acts' read and write bytes. Said once, with those bytes.
    LowerCopies {
        /// Bytes charged as copies.
        bytes: u64,
    },
    /// Bytes of loop devices' backing files for which no IO of the loop device was found
    /// (dirtied before the recording, or read ahead beyond what the loop device asked):
    /// charged as if there were no loop device, usually to its worker.
    LowerUnlinked {
        /// Those bytes.
        bytes: u64,
    },
    /// Modules with user frames nothing could name (no symbol there in the trace, in a
    /// matching file of `--symbols`, the system's debug files or this machine): those frames
    /// show as `MODULE+0xOFFSET`. Said once, with the bytes of the intents concerned.
    UserSymbolsMissing {
        /// `PATH (BUILD-ID)` of each module.
        modules: Vec<String>,
        /// Bytes charged to intents with a frame in them.
        bytes: u64,
    },
    /// User stacks that end inside a function that is not a thread's entry (`MODULE
    /// (FUNCTION)` each), and frames outside every recorded mapping: the frame-pointer walk
    /// stopped early or went astray, usually in code built without frame pointers. The
    /// intents name what the stacks hold. Said once, with the bytes concerned.
    UserStacksShort {
        /// Where the stacks end.
        ends: Vec<String>,
        /// Bytes charged to the intents of those stacks.
        bytes: u64,
        /// Bytes charged to intents with a frame outside every recorded mapping.
        outside_bytes: u64,
        /// The size of the stack copies when the stacks were unwound from copies
        /// (`--user-stacks dwarf:SIZE`), `None` for the frame-pointer walk.
        copied: Option<u32>,
    },
    /// User stacks as deep as the recording's limit (`sample_max_stack`: `--stack-depth` and
    /// 64 more with `--user-stacks`): their outermost frames were not recorded. Said once,
    /// with the bytes of their intents.
    UserStacksAtLimit {
        /// Bytes charged to those intents.
        bytes: u64,
        /// The limit, in frames (kernel and user, with perf's context markers).
        limit: u32,
    },
    /// The dirtying events' stacks were sampled (`--stacks sampled:N`): bytes per task and
    /// file are exact, intents a sample. Said once for every such trace.
    StacksSampled {
        /// The recorder's mode (`sampled:64`), when the trace names it.
        mode: Option<String>,
    },
    /// With sampled stacks: folios and inodes dirtied by a thread before any of its
    /// dirtying events was sampled (their intents have no stack).
    DirtiersWithoutSample(u64),
    /// The recorder's own IO is left out (`--show-recorder` shows it).
    RecorderLeftOut {
        /// Its bytes.
        bytes: u64,
        /// Its IOs.
        ios: u64,
    },
    /// The scope of the outputs and the IO that fell outside it (said whenever the scope is
    /// not `all`, or the trace has a workload).
    Scope(Box<crate::ScopeSummary>),
}

/// One context of IO charged to the lost intent, with its issuer resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownContextNote {
    /// Bytes.
    pub bytes: u64,
    /// The file, as well as known.
    pub file: FileKey,
    /// The task that queued the IO (pid, comm), if it was seen.
    pub issuer: Option<(u32, String)>,
    /// The writeback reason where writeback issued the IO.
    pub reason: Option<WbReason>,
}

impl Diagnostic {
    /// Whether it is a warning or a note.
    pub fn severity(&self) -> Severity {
        use Diagnostic::*;
        match self {
            Trace(_)
            | Decoder(_)
            | DamagedChunk(_)
            | RecordsSkipped(_)
            | LostRecords { .. }
            | NotClosed { .. }
            | PathsCutShort { .. }
            | StaleIo { .. }
            | Attribution(_)
            | WarningsSuppressed(_) => Severity::Warning,
            Blktrace(p) if p.is_damage() => Severity::Warning,
            Blktrace(_) => Severity::Note,
            PerfData(_)
            | KallsymsIgnored
            | BtrfsMapIgnored
            | BtrfsMapStale { .. }
            | SymbolsHidden
            | NoSymbols
            | LeftAtEnd { .. }
            | NeitherReadNorWrite { .. }
            | UnknownOrigin { .. }
            | BlktraceWriters { .. }
            | CgroupsFlat
            | BuffersWithoutStack(_)
            | UnnamedFiles { .. }
            | UnmappedWriteback { .. }
            | BtrfsUnmapped { .. }
            | BtrfsSharedInodes { .. }
            | StackCopiesCut { .. }
            | LowerCopies { .. }
            | LowerUnlinked { .. }
            | UserSymbolsMissing { .. }
            | UserStacksShort { .. }
            | UserStacksAtLimit { .. }
            | StacksSampled { .. }
            | DirtiersWithoutSample(_)
            | RecorderLeftOut { .. }
            | Scope(_) => Severity::Note,
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Diagnostic::*;
        write!(f, "{}: ", self.severity())?;
        match self {
            PerfData(n) => f.write_str(n),
            KallsymsIgnored => f.write_str(
                "--kallsyms is ignored for ioblame traces (they carry the recording host's symbols)",
            ),
            BtrfsMapIgnored => f.write_str(
                "--btrfs-map is used with a perf.data recording only (an ioblame trace carries \
                 its own chunk maps; blktrace data names disk sectors, not btrfs's)",
            ),
            BtrfsMapStale { path } => write!(
                f,
                "{} is older than the recording beside it, so it is not used: a map left from an \
                 earlier recording (perf record renames an old perf.data, not its map) may be \
                 of another mount; take it again after perf record, or name it with \
                 --btrfs-map to use it",
                path.display()
            ),
            Trace(p) => write!(f, "{p}"),
            SymbolsHidden => f.write_str(
                "the recording host hid kernel addresses (kptr_restrict); stacks are shown as addresses",
            ),
            NoSymbols => {
                f.write_str("the trace has no kernel symbols; stacks are shown as addresses")
            }
            Decoder(p) => write!(f, "{p}"),
            DamagedChunk(d) => write!(
                f,
                "cpu {} chunk {} unreadable, skipped: {}",
                d.cpu, d.seq, d.error
            ),
            RecordsSkipped(reasons) => {
                f.write_str("records skipped: ")?;
                for (i, (r, n)) in reasons.iter().enumerate() {
                    let sep = if i > 0 { ", " } else { "" };
                    write!(f, "{sep}{n} {}", r.as_str())?;
                }
                Ok(())
            }
            LostRecords {
                records,
                windows,
                start,
                bytes,
            } => {
                write!(f, "the kernel lost {records} records during the capture (")?;
                for (i, w) in windows.iter().take(LOST_WINDOWS_SHOWN).enumerate() {
                    write!(
                        f,
                        "{}{} on cpu {} at {:.3}s",
                        if i > 0 { ", " } else { "" },
                        w.count,
                        w.cpu,
                        w.end.saturating_sub(*start) as f64 / 1e9
                    )?;
                }
                write!(
                    f,
                    "{}); {bytes} bytes of IO overlap those windows and may be misattributed",
                    if windows.len() > LOST_WINDOWS_SHOWN {
                        ", ..."
                    } else {
                        ""
                    }
                )
            }
            StaleIo { bytes, requests } => write!(
                f,
                "{bytes} bytes of IO ({requests} requests issued, the rest bios queued) saw no issue or completion for two minutes of trace time; they are charged to the lost intent (#1) with their file, issuer and reason"
            ),
            LeftAtEnd {
                queued_bytes,
                inflight_bytes,
                inflight_requests,
            } => write!(
                f,
                "at the end of the trace {queued_bytes} bytes were queued but not issued and {inflight_bytes} bytes ({inflight_requests} requests) were in flight; they are not charged"
            ),
            NeitherReadNorWrite { requests, bytes } => write!(
                f,
                "{requests} requests ({bytes} bytes) were neither reads nor writes (discards, ...); they are not charged to acts"
            ),
            UnknownOrigin {
                bytes,
                ios,
                contexts,
                more,
            } => {
                write!(
                    f,
                    "{bytes} bytes ({ios} IOs) have no known origin (dirtied before the capture, or records lost) and are charged to the lost intent (#1): "
                )?;
                for (i, c) in contexts.iter().enumerate() {
                    write!(f, "{}{c}", if i > 0 { "; " } else { "" })?;
                }
                if *more > 0 {
                    write!(f, "; and {more} more contexts")?;
                }
                Ok(())
            }
            Attribution(w) => f.write_str(w),
            WarningsSuppressed(n) => write!(f, "... and {n} more warnings"),
            Blktrace(p) => write!(f, "{p}"),
            CgroupsFlat => f.write_str(
                "the recording host's cgroup2 hierarchy enabled no controller at its root \
                 (cgroup.subtree_control was empty): its kernel then reports every task in the \
                 root cgroup, so every act here is in / whatever cgroup its task was in. \
                 Enable a controller there before recording (echo +pids > \
                 /sys/fs/cgroup/cgroup.subtree_control), as systemd does at boot",
            ),
            BlktraceWriters {
                flusher_bytes,
                written_bytes,
            } => write!(
                f,
                "blktrace cannot see who dirtied the pages it sees written: buffered writes are charged to the thread that issued them, a flusher or journal thread (kworker, jbd2, xfsaild, ...): here {flusher_bytes} of {written_bytes} bytes written ({:.1}%). To charge them to the processes that wrote them, record with `ioblame-capture record --devices DEV` (or the `perf record` line of `ioblame perf-command`)",
                if *written_bytes == 0 {
                    0.0
                } else {
                    *flusher_bytes as f64 * 100.0 / *written_bytes as f64
                }
            ),
            NotClosed { file, ends } => {
                write!(
                    f,
                    "{} was not closed (the recorder was killed or crashed, or is still \
                     writing it): every complete chunk is read",
                    file.display()
                )?;
                match ends {
                    Some((a, b)) => write!(
                        f,
                        "; the CPUs' records end between {a:.3} s and {b:.3} s, and what the \
                         recorder had not yet written after that is missing (at most about the \
                         last second: it writes every CPU's records at least once a second)"
                    ),
                    None => f.write_str("; it holds no records yet"),
                }
            }
            PathsCutShort { flags, paths } => {
                let why = match (
                    flags & ioblame_format::FILES_TIMED_OUT != 0,
                    flags & ioblame_format::FILES_CAPPED != 0,
                ) {
                    (true, true) => "ran out of time (--paths-time) and of entries (--paths-max-entries)",
                    (true, false) => "ran out of time (--paths-time)",
                    _ => "reached its most entries (--paths-max-entries)",
                };
                write!(
                    f,
                    "the recorder's walk for file paths {why} after naming {paths} files and directories: those it did \
                     not reach are shown as device and inode (record with a larger limit)"
                )
            }
            UnnamedFiles { by_why, touched } => {
                let (files, bytes) = by_why
                    .iter()
                    .fold((0, 0), |(f, b), &(_, n, by)| (f + n, b + by));
                write!(
                    f,
                    "{files} charged files ({bytes} bytes) have no path, shown as device and inode:"
                )?;
                for (i, (why, n, by)) in by_why.iter().enumerate() {
                    let sep = if i == 0 { " " } else { "; " };
                    let why = match why {
                        Some(w) => w.describe(),
                        None if *touched => "not in the recorder's table",
                        None => "not reached by the recorder's walk of the filesystems",
                    };
                    write!(f, "{sep}{n} ({by} bytes) {why}")?;
                }
                Ok(())
            }
            BuffersWithoutStack(n) => write!(
                f,
                "{n} dirty buffers were recorded without a stack (the recorder's --stacks exact \
                 or sampled:N) and none was found for them (no folio dirtied with them, no other \
                 buffer of their thread with one): their writers are known, their intents have \
                 no stack (record with --stacks all to have every one)"
            ),
            UnmappedWriteback { bytes } => write!(
                f,
                "{bytes} bytes of xfs (iomap) writeback could not be linked to their dirtiers: the \
                 recording kernel emits no writeback sector map (iomap_writepage_map: not on 5.10, on 6.1 \
                 and later), so only a file with a single dirtier is linked; these bytes, from files \
                 with several, are charged to the lost intent (#1) with their file"
            ),
            BtrfsUnmapped { no_map, parity } => {
                if *no_map > 0 {
                    write!(
                        f,
                        "{no_map} bytes of btrfs extents were written without the filesystem's chunk \
                         map in the trace (a perf.data recording, or a recorder before format 1.9): \
                         their writeback could not be placed on the disk and linked to their \
                         dirtiers; it is charged by the other rules, mostly to the lost intent (#1) \
                         (record with ioblame-capture, or, after perf record, save the maps with \
                         ioblame-capture btrfs-map -o PERF.DATA.btrfs on the recording host)"
                    )?;
                }
                if *parity > 0 {
                    write!(
                        f,
                        "{}{parity} bytes were written on btrfs RAID5/RAID6 chunks, which ioblame \
                         does not map: charged by the other rules",
                        if *no_map > 0 { "; " } else { "" }
                    )?;
                }
                Ok(())
            }
            StackCopiesCut { cut, copies } => write!(
                f,
                "{cut} of {copies} user stack copies ended before their stack's root: the stacks \
                 were deeper than the copy (record with a larger --user-stacks dwarf:SIZE); their \
                 outermost frames are missing"
            ),
            BtrfsSharedInodes { bytes } => write!(
                f,
                "{bytes} bytes of btrfs writes were of inode numbers that two subvolumes of one \
                 filesystem (or a subvolume and a balance's relocation inode) wrote within 30 s \
                 of each other (each numbers its files from 257): the kernel's page-cache events \
                 name a btrfs file by its filesystem and number, not its subvolume, so where both \
                 files were dirty together these bytes may be charged to the other file's writer \
                 or to the lost intent (#1)"
            ),
            LowerCopies { bytes } => write!(
                f,
                "{bytes} bytes on loop devices' backing files are copies of IO charged on the loop \
                 devices above them: each is charged to the act the loop device served (marked \
                 lower), counted for its own device but not again in the act's read and write \
                 bytes (acts' LOWER column, lower_* keys in --json)"
            ),
            LowerUnlinked { bytes } => write!(
                f,
                "{bytes} bytes of loop devices' backing files matched no IO of their loop device \
                 (dirtied before the recording, or read ahead beyond what the loop device asked): \
                 charged as without the loop device, usually to its worker"
            ),
            UserSymbolsMissing { modules, bytes } => write!(
                f,
                "{bytes} bytes were charged to intents with user frames nothing could name (no \
                 symbol there in the trace, in --symbols directories, in the system's debug \
                 files, or in a local file of the same build id), in {}; those frames show as \
                 MODULE+0xOFFSET (--symbols DIR with debug files names them)",
                modules.join(", ")
            ),
            UserStacksShort {
                ends,
                bytes,
                outside_bytes,
                copied,
            } => {
                write!(f, "user stacks were cut short: ")?;
                if !ends.is_empty() {
                    write!(
                        f,
                        "{bytes} bytes' stacks end inside {}, not at a thread's entry",
                        ends.join(", ")
                    )?;
                }
                if *outside_bytes > 0 {
                    if !ends.is_empty() {
                        f.write_str("; ")?;
                    }
                    write!(
                        f,
                        "{outside_bytes} bytes' stacks have frames outside every recorded \
                         mapping ([unknown])"
                    )?;
                }
                match copied {
                    Some(size) => write!(
                        f,
                        ": the stacks were deeper than their {size}-byte copies, or went through \
                         code whose unwind tables the trace lacks (record with a larger \
                         --user-stacks dwarf:SIZE); the intents name the frames the copies hold"
                    ),
                    None => f.write_str(
                        ": the frame-pointer walk stopped or went astray in code built without \
                         frame pointers (build with -fno-omit-frame-pointer, or -C \
                         force-frame-pointers=yes, or record with --user-stacks dwarf); the \
                         intents name the frames the stacks hold",
                    ),
                }
            }
            UserStacksAtLimit { bytes, limit } => write!(
                f,
                "{bytes} bytes' user stacks reach the recording's limit of {limit} frames: their \
                 outermost frames are missing (record with a larger --stack-depth; perf's \
                 kernel.perf_event_max_stack bounds it)"
            ),
            StacksSampled { mode } => {
                let one_in = mode
                    .as_deref()
                    .and_then(|m| m.strip_prefix("sampled:"))
                    .map_or("N".to_string(), str::to_string);
                write!(
                    f,
                    "stacks were sampled (--stacks {}): one dirtying event in {one_in} per CPU \
                     carried a callchain, the others take the stack last sampled on their \
                     thread; bytes per task and file are exact, intents are a sample (record \
                     with --stacks exact for exact intents)",
                    mode.as_deref().unwrap_or("sampled:N")
                )
            }
            DirtiersWithoutSample(n) => write!(
                f,
                "{n} folio and inode dirty events came before any sampled stack of their thread: \
                 their intents have no stack"
            ),
            RecorderLeftOut { bytes, ios } => write!(
                f,
                "the recorder's own IO ({bytes} bytes in {ios} IOs) is left out; --show-recorder shows it"
            ),
            Scope(s) => write!(f, "{s}"),
        }
    }
}

impl fmt::Display for UnknownContextNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} B on {}:{} ino {} queued by ",
            self.bytes,
            ioblame_decode::dev_major(self.file.dev),
            ioblame_decode::dev_minor(self.file.dev),
            self.file.ino
        )?;
        match &self.issuer {
            Some((pid, comm)) => write!(f, "pid-{pid} ({comm})")?,
            None => f.write_str("an unseen task")?,
        }
        if let Some(r) = self.reason {
            write!(f, " for {}", r.name())?;
        }
        Ok(())
    }
}

/// What reading the trace met: damaged chunks, then the records skipped.
/// [`Diagnostic::CgroupsFlat`] when the recorder said the trace's cgroups are all the root.
pub fn cgroups_flat(trace: &ioblame_format::Trace) -> Option<Diagnostic> {
    (trace.metadata().info("cgroup_root_controllers") == Some("none"))
        .then_some(Diagnostic::CgroupsFlat)
}

pub(crate) fn of_stream(s: &StreamStats) -> Vec<Diagnostic> {
    let mut v: Vec<Diagnostic> = s
        .damaged
        .iter()
        .cloned()
        .map(Diagnostic::DamagedChunk)
        .collect();
    let skipped: Vec<(SkipReason, u64)> = s.decode.error_reasons().collect();
    if !skipped.is_empty() {
        v.push(Diagnostic::RecordsSkipped(skipped));
    }
    v
}

/// What the attribution says about the trace as a whole: records lost, the bytes not
/// charged to a known act, its own warnings. `start` is the capture's start (ns).
pub(crate) fn of_summary(s: &Summary, tables: &Tables, start: u64) -> Vec<Diagnostic> {
    let mut v = Vec::new();
    if s.lost_records > 0 {
        v.push(Diagnostic::LostRecords {
            records: s.lost_records,
            windows: s.lost_windows.clone(),
            start,
            bytes: s.bytes_in_lost_windows,
        });
    }
    v.extend(byte_accounting(s));
    if let Some(d) = unknown_origin(s, tables) {
        v.push(d);
    }
    v.extend(s.warnings.iter().cloned().map(Diagnostic::Attribution));
    if s.warnings_suppressed > 0 {
        v.push(Diagnostic::WarningsSuppressed(s.warnings_suppressed));
    }
    v
}

/// What accounts for IO bytes not charged to a known act: charged to the lost intent after
/// two minutes without progress, left queued or in flight at the end, or neither reads nor
/// writes. Every byte the trace shows is either in an act or here.
fn byte_accounting(s: &Summary) -> Vec<Diagnostic> {
    let mut v = Vec::new();
    if s.dirtiers_without_sample > 0 {
        v.push(Diagnostic::DirtiersWithoutSample(s.dirtiers_without_sample));
    }
    if s.buffers_without_stack > 0 {
        v.push(Diagnostic::BuffersWithoutStack(s.buffers_without_stack));
    }
    if s.unmapped_writeback_bytes > 0 {
        v.push(Diagnostic::UnmappedWriteback {
            bytes: s.unmapped_writeback_bytes,
        });
    }
    if s.btrfs_unmapped_bytes > 0 || s.btrfs_parity_bytes > 0 {
        v.push(Diagnostic::BtrfsUnmapped {
            no_map: s.btrfs_unmapped_bytes,
            parity: s.btrfs_parity_bytes,
        });
    }
    if s.stack_copies_cut > 0 {
        v.push(Diagnostic::StackCopiesCut {
            cut: s.stack_copies_cut,
            copies: s.stack_copies,
        });
    }
    if s.btrfs_shared_ino_bytes > 0 {
        v.push(Diagnostic::BtrfsSharedInodes {
            bytes: s.btrfs_shared_ino_bytes,
        });
    }
    if s.lower_bytes > 0 {
        v.push(Diagnostic::LowerCopies {
            bytes: s.lower_bytes,
        });
    }
    if s.lower_unlinked_bytes > 0 {
        v.push(Diagnostic::LowerUnlinked {
            bytes: s.lower_unlinked_bytes,
        });
    }
    if s.stale_bytes > 0 {
        v.push(Diagnostic::StaleIo {
            bytes: s.stale_bytes,
            requests: s.stale_requests,
        });
    }
    if s.pending_bytes_at_end > 0 || s.inflight_bytes_at_end > 0 {
        v.push(Diagnostic::LeftAtEnd {
            queued_bytes: s.pending_bytes_at_end,
            inflight_bytes: s.inflight_bytes_at_end,
            inflight_requests: s.inflight_at_end,
        });
    }
    if s.other_bytes > 0 {
        v.push(Diagnostic::NeitherReadNorWrite {
            requests: s.other_ios,
            bytes: s.other_bytes,
        });
    }
    v
}

/// The IO charged to the lost intent (#1), if any: how much, and the largest contexts
/// (file, issuer, reason) it was charged in.
fn unknown_origin(s: &Summary, tables: &Tables) -> Option<Diagnostic> {
    if s.unknown_bytes == 0 {
        return None;
    }
    let contexts = s
        .unknown_contexts
        .iter()
        .take(UNKNOWN_CONTEXTS_SHOWN)
        .map(|u| UnknownContextNote {
            bytes: u.bytes,
            file: u.file.clone(),
            issuer: match tables.role(u.issuer) {
                Some(r) if r.pid != 0 || r.tid != 0 => Some((r.pid, r.comm.to_string())),
                _ => None,
            },
            reason: u.reason,
        })
        .collect();
    Some(Diagnostic::UnknownOrigin {
        bytes: s.unknown_bytes,
        ios: s.unknown_ios,
        contexts,
        more: s
            .unknown_contexts
            .len()
            .saturating_sub(UNKNOWN_CONTEXTS_SHOWN),
    })
}

/// The note that the recorder's own IO is left out, if it is and there is some.
pub(crate) fn recorder_left_out(recorder: &ActTotals, show_recorder: bool) -> Option<Diagnostic> {
    (!show_recorder && recorder.total_ios() > 0).then(|| Diagnostic::RecorderLeftOut {
        bytes: recorder.total_bytes(),
        ios: recorder.total_ios(),
    })
}
