//! The writer thread: the messages the recording hands it (`ToWriter`), and the trace's
//! files written, rolled and forced to disk; what it shares with the recording (`Shared`);
//! the recording's way to it (`WriterLink`), the one place that says whether writing failed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use ioblame_format::{
    ChunkBuilder, ChunkEncoder, ChunkHeader, FileTable, RingStats, RingWriter, FILES_TOUCHED,
};

use crate::{names, snapshot};

/// How far before the clock read at the start of a flush round its FLUSHED mark is put: a
/// record being written on another CPU while its ring was read carries an earlier time.
const FLUSHED_MARGIN_NS: u64 = 2_000_000;
/// The writer forces what it wrote to stable storage at least this often (fdatasync). With
/// the default `--flush-interval` (1 s), a host crash loses at most about the last two
/// seconds of records (plus any backlog of the writer, which the status line shows as
/// written bytes lagging).
const SYNC_EVERY: Duration = Duration::from_secs(1);

/// Shared state between the reader loop and the writer thread.
#[derive(Default)]
pub(super) struct Shared {
    /// Set once writing failed: the writer has stopped.
    failed: AtomicBool,
    /// Why writing failed.
    error: Mutex<Option<String>>,
    /// Bytes written so far.
    pub(super) bytes: AtomicU64,
    /// Chunks written so far.
    pub(super) chunks: AtomicU64,
    /// Ring files created so far.
    pub(super) files: AtomicU64,
}

impl Shared {
    /// Whether writing the trace failed (and the writer stopped).
    fn failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// Records that writing failed, and why.
    fn fail(&self, what: String) {
        *self.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(what);
        self.failed.store(true, Ordering::SeqCst);
    }

    /// Why writing failed, if it did.
    pub(super) fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The recording's way to the writer thread (a clone for each thread that hands it tables),
/// and the one place that says whether writing failed: after a failure nothing more is sent,
/// as the writer has stopped.
#[derive(Clone)]
pub(super) struct WriterLink {
    tx: SyncSender<ToWriter>,
    shared: Arc<Shared>,
}

/// Starts the writer thread on `w`, chunks compressed at zstd `level`; returns the way to it
/// and the thread, which returns the ring's statistics (none when writing failed) once every
/// link is dropped.
pub(super) fn start(
    w: RingWriter,
    level: i32,
) -> Result<(WriterLink, JoinHandle<Option<RingStats>>)> {
    let shared = Arc::new(Shared::default());
    let (tx, rx) = sync_channel::<ToWriter>(64);
    let wshared = shared.clone();
    let wt = std::thread::Builder::new()
        .name("ioblame-writer".into())
        .spawn(move || writer_thread(w, rx, level, wshared))
        .context("starting the writer thread")?;
    Ok((WriterLink { tx, shared }, wt))
}

impl WriterLink {
    /// Whether writing the trace failed (and the writer stopped).
    pub(super) fn failed(&self) -> bool {
        self.shared.failed()
    }

    /// The bytes the writer wrote so far.
    pub(super) fn bytes_written(&self) -> u64 {
        self.shared.bytes.load(Ordering::Relaxed)
    }

    /// Hands `msg` to the writer; nothing after a write failure.
    pub(super) fn send(&self, msg: ToWriter) {
        if !self.failed() {
            let _ = self.tx.send(msg);
        }
    }

    /// Makes a message and hands it to the writer, unless writing failed: then it is not
    /// made at all (a walk of the filesystems, say). `make` may find nothing to send.
    pub(super) fn send_with(&self, make: impl FnOnce() -> Option<ToWriter>) {
        if !self.failed() {
            if let Some(msg) = make() {
                let _ = self.tx.send(msg);
            }
        }
    }

    /// Hands the chunk of `b`, if any, to the writer. Blocks when the writer lags: the kernel
    /// then drops (and reports) records instead of this process growing without bound. After
    /// a write failure chunks are dropped.
    pub(super) fn send_chunk(&self, b: &mut ChunkBuilder) {
        if let Some(c) = b.take_raw() {
            if let Err(TrySendError::Full(c)) = self.tx.try_send(ToWriter::Chunk(c)) {
                if !self.failed() {
                    let _ = self.tx.send(c);
                }
            }
        }
    }

    /// Sends the FLUSHED mark of a flush round (see [`flushed_mark`]) after its chunks.
    /// Nothing after a write failure.
    pub(super) fn mark_flushed(&self, clock_ns: u64) {
        self.send(ToWriter::Flushed(flushed_mark(clock_ns)));
    }

    /// Drops this link (the writer finishes once every link is dropped); returns the state
    /// shared with the writer.
    pub(super) fn close(self) -> Arc<Shared> {
        self.shared
    }
}

type RawChunk = (ChunkHeader, Vec<u8>);

/// What the recording loop hands to the writer thread.
pub(super) enum ToWriter {
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
    /// Every btrfs filesystem seen so far with every chunk, after a new one was found: a
    /// BTRFS block.
    Btrfs(Vec<ioblame_format::BtrfsFs>),
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
    let fail = |what: String| shared.fail(what);
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
            Ok(ToWriter::Btrfs(b)) => w.write_btrfs(&b),
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

pub(super) fn io_message(e: &ioblame_format::Error) -> String {
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

/// The time of the FLUSHED mark of a flush round whose clock reading, taken before the rings
/// were read, is `clock_ns`: [`FLUSHED_MARGIN_NS`] earlier.
fn flushed_mark(clock_ns: u64) -> u64 {
    clock_ns.saturating_sub(FLUSHED_MARGIN_NS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf;
    use ioblame_format::{ring_file_name, ByteOrder, Header, Metadata, RingOptions, Task, Trace};
    use std::sync::mpsc::sync_channel;

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
        let link = WriterLink {
            tx,
            shared: shared.clone(),
        };
        // Marks alone for longer than SYNC_EVERY: nothing forced to disk.
        for m in [10, 20, 30] {
            link.mark_flushed(m + FLUSHED_MARGIN_NS);
            std::thread::sleep(Duration::from_millis(450));
        }
        let file = dir.path().join(ring_file_name(0));
        let f = ioblame_format::TraceFile::open(&file).unwrap();
        assert_eq!(f.flushed(), Some(30));
        assert!(f.chunks().is_empty());
        // A chunk, then a mark: the mark lands after the chunk.
        let mut b = ChunkBuilder::new(0);
        link.send(ToWriter::Chunk(chunk(&mut b, 4 << 10, 1)));
        link.mark_flushed(40 + FLUSHED_MARGIN_NS);
        drop(link);
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
        shared.fail("full".into());
        let link = WriterLink { tx, shared };
        link.mark_flushed(50);
        assert!(rx.try_recv().is_err());
        assert_eq!(flushed_mark(1), 0, "saturates");
    }
}
