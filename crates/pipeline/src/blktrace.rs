//! Where blktrace recordings enter the analysis (`ioblame_blktrace`): the recording's
//! description becomes an ioblame trace's header and metadata (no chunks), so every output
//! that reads a trace's devices, tasks and clock reads them unchanged, and its records reach
//! the attribution as typed events straight from the reader ([`Feed`]), not through an
//! in-memory trace: converting 10 M records into perf records, compressing and decoding
//! them again would cost more than the attribution itself (`docs/blktrace.md`).

use std::path::{Path, PathBuf};

use ioblame_attrib::{EventFeed, Tables};
use ioblame_blktrace::Recording;
use ioblame_decode::Event;
use ioblame_format::{
    BlockDevice, ByteOrder, FileWriter, Header, Metadata, Task, Trace, TraceFile,
};

/// The recording's events, read on a second thread, for the attribution.
pub(crate) struct Feed<'a>(pub &'a Recording);

impl EventFeed for Feed<'_> {
    fn feed(self, f: impl FnMut(&Event, Option<&Event>)) {
        self.0.for_each_event(f);
    }
}

/// The name `blktrace` gives a task no process notify names.
pub fn unnamed_task(pid: u32) -> String {
    format!("pid {pid}")
}

/// The header and metadata of `rec` as an ioblame trace without chunks: its devices (sizes
/// are the highest sector the recording touched: blktrace records none), partitions,
/// tasks (named by the process notifies, else `pid N`), CPUs and wall clock. An error is
/// the trace's, made in a temporary file (the caller names the recording's first path).
pub(crate) fn trace_of(rec: &Recording, paths: &[PathBuf]) -> Result<Trace, ioblame_format::Error> {
    let s = rec.scan();
    let (start_time_ns, start_clock_ns) = s.wall_clock.unwrap_or((0, s.span.0));
    let name_of = |dev: u32| {
        s.device(dev)
            .map(|d| d.name.clone())
            .unwrap_or_else(|| format!("{}:{}", dev >> 20, dev & 0xfffff))
    };
    let block_devices = s
        .devices
        .iter()
        .map(|d| {
            let (part_start, parent) = match d.partition_of {
                Some((disk, start)) => (start, name_of(disk)),
                None => (0, String::new()),
            };
            BlockDevice {
                name: d.name.clone(),
                major: d.dev >> 20,
                minor: d.dev & 0xfffff,
                size_sectors: d.sector_end,
                part_start,
                parent,
                loop_backing_file: String::new(),
                logical_block_size: 512,
            }
        })
        .collect();
    let tasks = s
        .tasks
        .iter()
        .map(|(pid, comm)| (*pid, comm.clone()))
        .chain(s.unnamed.iter().map(|&p| (p, unnamed_task(p))))
        .map(|(pid, comm)| Task {
            pid,
            tid: pid,
            comm,
        })
        .collect();
    let files: Vec<String> = rec.files().map(|(p, _)| p.display().to_string()).collect();
    let meta = Metadata {
        block_devices,
        tasks,
        capture_info: vec![
            ("input".into(), "blktrace".into()),
            ("blktrace_files".into(), files.join(" ")),
        ],
        ..Metadata::default()
    };
    let header = Header {
        byte_order: ByteOrder::native(),
        word_size: 8,
        page_size: 4096,
        cpu_count: s.cpus.max(1),
        clock_id: 1,
        recorder_pid: 0,
        file_index: 0,
        start_time_ns,
        start_clock_ns,
        trace_id: fnv1a(files.join("\0").as_bytes()),
        hostname: String::new(),
        kernel_release: String::new(),
        machine: String::new(),
        recorder_version: "blktrace".into(),
    };
    let path = paths.first().cloned().unwrap_or_default();
    let io = |p: &Path, source| ioblame_format::Error::Io {
        path: p.to_path_buf(),
        source,
    };
    let dir = tempfile::tempdir().map_err(|e| io(&std::env::temp_dir(), e))?;
    let tmp = dir.path().join("blktrace.iob");
    let w = FileWriter::create(&tmp, &header, &meta)?;
    w.finish()?;
    let bytes = std::fs::read(&tmp).map_err(|e| io(&tmp, e))?;
    let tf = TraceFile::from_bytes(Path::new(&path), bytes)?;
    Ok(Trace::from_files(vec![tf], Vec::new()))
}

/// FNV-1a, a stable trace id from the file names.
fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, &c| {
        (h ^ u64::from(c)).wrapping_mul(0x100000001b3)
    })
}

/// Task names that mark a writeback or journal thread: what blktrace charges buffered
/// writes to, since it cannot see who dirtied the pages.
const FLUSHERS: [&str; 8] = [
    "kworker", "jbd2", "xfsaild", "xfs-", "flush-", "kswapd", "btrfs-", "ext4-",
];

/// Whether a task of this name writes on behalf of others (a flusher, a journal thread).
pub fn is_flusher(comm: &str) -> bool {
    FLUSHERS.iter().any(|f| comm.starts_with(f))
}

/// Bytes written by flushers and bytes written in all, over the counted per-act totals.
pub(crate) fn flusher_share(tables: &Tables) -> (u64, u64) {
    let mut flush = 0;
    let mut all = 0;
    for (a, t) in tables.acts.iter().zip(&tables.totals) {
        let w = t.bytes[2];
        all += w;
        if tables.role(a.role).is_some_and(|r| is_flusher(&r.comm)) {
            flush += w;
        }
    }
    (flush, all)
}
