//! Writers: one trace file, and the ring of numbered files a capture writes.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::block::{encode_block, kind, preamble, FOOTER_MAGIC, PREAMBLE_LEN};
use crate::chunk::EncodedChunk;
use crate::codec::Enc;
use crate::error::{Error, Result};
use crate::meta::{self, FileTable, Header, Metadata, Task};

/// One entry of the chunk index that closes a finished file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// File offset of the chunk's block header.
    pub offset: u64,
    /// CPU of the chunk.
    pub cpu: u32,
    /// Records in the chunk.
    pub records: u32,
    /// Sequence number of the chunk.
    pub seq: u64,
    /// First timestamp of the chunk.
    pub first_ts: u64,
    /// Last timestamp of the chunk.
    pub last_ts: u64,
}

/// Size of one encoded index entry.
pub const INDEX_ENTRY_LEN: usize = 40;

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The encoded metadata blocks that follow the header in every file. The static sections are
/// encoded once per capture (kallsyms compression is the costly part); the task list can be
/// replaced between files, and a FILES block is added once known.
#[derive(Debug, Clone, Default)]
struct EncodedMeta {
    /// EVENTS, KALLSYMS, BLOCK_DEVICES, MOUNTS.
    head: Vec<u8>,
    /// TASKS.
    tasks: Vec<u8>,
    /// CAPTURE_INFO.
    info: Vec<u8>,
    /// FILES, when the recorder has walked the filesystems.
    files: Vec<u8>,
    /// CGROUPS, when the recorder read the cgroup2 hierarchy (empty otherwise).
    cgroups: Vec<u8>,
    /// LOOPS, when there are loop devices over files (empty otherwise).
    loops: Vec<u8>,
    /// DM_TARGETS, when there are one-to-one device-mapper targets (empty otherwise).
    dm_targets: Vec<u8>,
    /// USER_MAPS, when user stacks are recorded (empty otherwise).
    user_maps: Vec<u8>,
    /// BTRFS, when there are btrfs filesystems (empty otherwise).
    btrfs: Vec<u8>,
}

impl EncodedMeta {
    fn new(meta: &Metadata) -> Self {
        let mut head = Vec::new();
        head.extend(encode_block(
            kind::EVENTS,
            0,
            &meta::encode_events(&meta.events),
        ));
        if let Some(k) = &meta.kallsyms {
            head.extend(encode_block(
                kind::KALLSYMS_PARTS,
                0,
                &meta::encode_kallsyms_parts(k),
            ));
        }
        head.extend(encode_block(
            kind::BLOCK_DEVICES,
            0,
            &meta::encode_block_devices(&meta.block_devices),
        ));
        head.extend(encode_block(
            kind::MOUNTS,
            0,
            &meta::encode_mounts(&meta.mounts),
        ));
        EncodedMeta {
            head,
            tasks: encode_tasks_block(&meta.tasks),
            info: encode_block(
                kind::CAPTURE_INFO,
                0,
                &meta::encode_info(&meta.capture_info),
            ),
            files: Vec::new(),
            cgroups: encode_cgroups_block(&meta.cgroups),
            loops: encode_loops_block(&meta.loops),
            dm_targets: encode_dm_block(&meta.dm_targets),
            user_maps: encode_user_maps_block(&meta.user_maps),
            btrfs: encode_btrfs_block(&meta.btrfs),
        }
    }

    fn len(&self) -> usize {
        self.head.len()
            + self.tasks.len()
            + self.info.len()
            + self.cgroups.len()
            + self.loops.len()
            + self.dm_targets.len()
            + self.user_maps.len()
            + self.btrfs.len()
            + self.files.len()
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        out.extend_from_slice(&self.head);
        out.extend_from_slice(&self.tasks);
        out.extend_from_slice(&self.info);
        out.extend_from_slice(&self.cgroups);
        out.extend_from_slice(&self.loops);
        out.extend_from_slice(&self.dm_targets);
        out.extend_from_slice(&self.user_maps);
        out.extend_from_slice(&self.btrfs);
        out.extend_from_slice(&self.files);
        out
    }
}

fn encode_tasks_block(tasks: &[Task]) -> Vec<u8> {
    encode_block(kind::TASKS, 0, &meta::encode_tasks(tasks))
}

/// Encodes a block of kind `kind` holding the list `items` as `encode` writes it; nothing
/// for an empty list (CGROUPS: no cgroup2 hierarchy read; LOOPS, DM_TARGETS, USER_MAPS).
fn encode_list_block<T>(kind: u16, items: &[T], encode: fn(&[T]) -> Vec<u8>) -> Vec<u8> {
    if items.is_empty() {
        return Vec::new();
    }
    encode_block(kind, 0, &encode(items))
}

fn encode_cgroups_block(cgroups: &[crate::Cgroup]) -> Vec<u8> {
    encode_list_block(kind::CGROUPS, cgroups, meta::encode_cgroups)
}

fn encode_user_maps_block(maps: &[crate::UserMap]) -> Vec<u8> {
    encode_list_block(kind::USER_MAPS, maps, meta::encode_user_maps)
}

fn encode_btrfs_block(fs: &[crate::BtrfsFs]) -> Vec<u8> {
    encode_list_block(kind::BTRFS, fs, meta::encode_btrfs)
}

fn encode_loops_block(loops: &[crate::LoopDevice]) -> Vec<u8> {
    encode_list_block(kind::LOOPS, loops, meta::encode_loops)
}

fn encode_dm_block(targets: &[crate::DmTarget]) -> Vec<u8> {
    encode_list_block(kind::DM_TARGETS, targets, meta::encode_dm_targets)
}

/// Encodes a FILES table, as a FILE_INDEX block (format 1.5).
fn encode_files_block(t: &FileTable) -> Vec<u8> {
    encode_block(kind::FILE_INDEX, 0, &meta::encode_file_index(t))
}

/// Writes one trace file: preamble, header, metadata, then chunks, then (on `finish`) the
/// chunk index and footer.
///
/// Every block goes to the file in a single `write`, so a file cut at any point holds every
/// block written before the cut. After a failed write the file is truncated back to its last
/// whole block and the writer refuses further writes.
#[derive(Debug)]
pub struct FileWriter {
    path: PathBuf,
    file: File,
    len: u64,
    index: Vec<IndexEntry>,
    failed: bool,
}

impl FileWriter {
    /// Creates `path` (which must not exist) and writes the header and metadata.
    pub fn create(path: &Path, header: &Header, meta: &Metadata) -> Result<Self> {
        Self::create_encoded(path, header, &EncodedMeta::new(meta).bytes())
    }

    fn create_encoded(path: &Path, header: &Header, meta_blocks: &[u8]) -> Result<Self> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io_err(path))?;
        let mut w = FileWriter {
            path: path.to_path_buf(),
            file,
            len: 0,
            index: Vec::new(),
            failed: false,
        };
        let mut start = preamble().to_vec();
        start.extend(encode_block(kind::HEADER, 0, &header.encode()));
        start.extend_from_slice(meta_blocks);
        w.append(&start)?;
        Ok(w)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no chunk has been written yet.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        if self.failed {
            return Err(Error::Io {
                path: self.path.clone(),
                source: std::io::Error::other("an earlier write to this file failed"),
            });
        }
        if let Err(e) = self.file.write_all(bytes) {
            self.failed = true;
            // Keep the file readable: cut off the partial block.
            let _ = self.file.set_len(self.len);
            return Err(io_err(&self.path)(e));
        }
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Appends a chunk.
    pub fn write_chunk(&mut self, chunk: &EncodedChunk) -> Result<()> {
        let offset = self.len;
        self.append(&chunk.block)?;
        let h = &chunk.header;
        self.index.push(IndexEntry {
            offset,
            cpu: h.cpu,
            records: h.records,
            seq: h.seq,
            first_ts: h.first_ts,
            last_ts: h.last_ts,
        });
        Ok(())
    }

    /// Appends a FILES block (paths of inodes; see `docs/format.md`). Readers use every FILES
    /// block of a file, later ones first, so a table taken when the capture ends may follow
    /// the chunks.
    pub fn write_files(&mut self, table: &FileTable) -> Result<()> {
        self.append(&encode_files_block(table))
    }

    /// Forces written data to stable storage (`fdatasync`).
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync_data().map_err(io_err(&self.path))
    }

    /// Writes the chunk index and the footer, syncs and closes the file.
    pub fn finish(mut self) -> Result<u64> {
        let mut e = Enc::default();
        e.u32(self.index.len() as u32);
        for x in &self.index {
            e.u64(x.offset)
                .u32(x.cpu)
                .u32(x.records)
                .u64(x.seq)
                .u64(x.first_ts)
                .u64(x.last_ts);
        }
        let index_offset = self.len;
        let mut tail = encode_block(kind::INDEX, 0, &e.buf);
        tail.extend_from_slice(&FOOTER_MAGIC);
        tail.extend_from_slice(&index_offset.to_le_bytes());
        self.append(&tail)?;
        self.sync()?;
        Ok(self.len)
    }
}

/// Limits of a ring of trace files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingOptions {
    /// Start a new file once the current one would exceed this many bytes (0: never).
    pub file_size: u64,
    /// Delete the oldest files while the ring exceeds this many bytes in total (0: never).
    /// The file being written is never deleted.
    pub max_size: u64,
}

impl RingOptions {
    /// The options a ring can keep when each of its files begins with `file_start` bytes
    /// (preamble, header and metadata, repeated in every file so that each reads alone).
    /// A file size under twice that is raised to it, so that at least half of every file
    /// holds events; a size cap (not 0) must then hold two files and what a file gets after
    /// its last chunk (FLUSHED marks, metadata blocks, the index: at most `file_start` is
    /// allowed for them, [`RingOptions::least_max_size`]), or the ring would keep only the
    /// file being written: [`Error::RingTooSmall`]. A cap with a file size of 0 (one file
    /// that never rolls) is refused the same way. Metadata that grows while recording (a
    /// longer task list, names of files) is not foreseen.
    pub fn fit(self, file_start: u64) -> Result<RingOptions> {
        let least = file_start.saturating_mul(2);
        let file_size = match self.file_size {
            0 => 0,
            n => n.max(least),
        };
        if self.max_size > 0
            && (file_size == 0 || self.max_size < Self::least_max_size(file_size, file_start))
        {
            return Err(Error::RingTooSmall {
                file_start,
                file_size,
                max_size: self.max_size,
            });
        }
        Ok(RingOptions {
            file_size,
            max_size: self.max_size,
        })
    }

    /// The least size cap [`RingOptions::fit`] accepts for files of `file_size` bytes that
    /// begin with `file_start`: two files, and `file_start` more.
    pub fn least_max_size(file_size: u64, file_start: u64) -> u64 {
        file_size.saturating_mul(2).saturating_add(file_start)
    }
}

impl Default for RingOptions {
    fn default() -> Self {
        RingOptions {
            file_size: 64 << 20,
            max_size: 1 << 30,
        }
    }
}

/// What a ring writer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Files created.
    pub files_created: u32,
    /// Old files deleted to stay under the size cap.
    pub files_deleted: u32,
    /// Chunks written.
    pub chunks: u64,
    /// Bytes written (all files, deleted ones included).
    pub bytes_written: u64,
    /// Bytes currently on disk.
    pub bytes_on_disk: u64,
    /// Times the current file's data was forced to stable storage ([`RingWriter::sync`]).
    pub syncs: u64,
}

/// File name of ring file number `index`.
pub fn ring_file_name(index: u32) -> String {
    format!("ioblame-{index:06}.iob")
}

/// Writes a capture as a directory of numbered trace files with bounded total size.
///
/// Every file repeats the header (with its own `file_index`) and the metadata, so each file
/// can be read alone after older ones are deleted.
#[derive(Debug)]
pub struct RingWriter {
    dir: PathBuf,
    opts: RingOptions,
    header: Header,
    meta: EncodedMeta,
    current: Option<FileWriter>,
    closed: VecDeque<(PathBuf, u64)>,
    stats: RingStats,
}

impl RingWriter {
    /// Creates `dir` if needed (it must not already hold trace files) and the first file.
    pub fn create(dir: &Path, header: Header, meta: Metadata, opts: RingOptions) -> Result<Self> {
        Self::create_encoded(dir, header, EncodedMeta::new(&meta), opts)
    }

    fn create_encoded(
        dir: &Path,
        header: Header,
        meta: EncodedMeta,
        opts: RingOptions,
    ) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let existing = std::fs::read_dir(dir)
            .map_err(io_err(dir))?
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().ends_with(".iob"));
        if existing {
            return Err(Error::Io {
                path: dir.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "directory already holds a trace; choose an empty or new directory",
                ),
            });
        }
        let mut w = RingWriter {
            dir: dir.to_path_buf(),
            opts,
            header,
            meta,
            current: None,
            closed: VecDeque::new(),
            stats: RingStats::default(),
        };
        w.open_next()?;
        Ok(w)
    }

    /// Like [`RingWriter::create`] followed by [`RingWriter::write_files`] of `files`, with
    /// `opts` fitted first to the bytes each file begins with, that table included
    /// ([`RingOptions::fit`]): a ring whose cap cannot hold two files is refused before
    /// anything is created. [`RingWriter::options`] says what was kept.
    pub fn create_fitted(
        dir: &Path,
        header: Header,
        meta: Metadata,
        files: Option<&FileTable>,
        opts: RingOptions,
    ) -> Result<Self> {
        let encoded = EncodedMeta::new(&meta);
        let files_block = files.map(encode_files_block);
        let file_start = (PREAMBLE_LEN
            + encode_block(kind::HEADER, 0, &header.encode()).len()
            + encoded.len()
            + files_block.as_ref().map_or(0, Vec::len)) as u64;
        let opts = opts.fit(file_start)?;
        let mut w = Self::create_encoded(dir, header, encoded, opts)?;
        if let Some(block) = files_block {
            w.write_files_block(block)?;
        }
        Ok(w)
    }

    /// The limits the ring keeps (after [`RingWriter::create_fitted`], the fitted ones).
    pub fn options(&self) -> RingOptions {
        self.opts
    }

    fn open_next(&mut self) -> Result<()> {
        self.header.file_index = self.stats.files_created;
        let path = self.dir.join(ring_file_name(self.header.file_index));
        let f = FileWriter::create_encoded(&path, &self.header, &self.meta.bytes())?;
        // Make the new directory entry durable too; a failure only weakens crash safety.
        if let Ok(d) = File::open(&self.dir) {
            let _ = d.sync_all();
        }
        self.stats.files_created += 1;
        self.stats.bytes_written += f.len();
        self.current = Some(f);
        Ok(())
    }

    fn current(&mut self) -> Result<&mut FileWriter> {
        self.current.as_mut().ok_or_else(|| Error::Io {
            path: self.dir.clone(),
            source: std::io::Error::other("the ring writer failed to open its next file"),
        })
    }

    /// Replaces the task list written into files opened from now on (the recorder refreshes
    /// it before each new file, see [`RingWriter::needs_roll`]).
    pub fn set_tasks(&mut self, tasks: Vec<Task>) {
        self.meta.tasks = encode_tasks_block(&tasks);
    }

    /// Appends a TASKS block to the current file (for that kind the last valid block of a file
    /// wins), and uses `tasks` in every file opened from now on.
    pub fn write_tasks(&mut self, tasks: &[Task]) -> Result<()> {
        self.write_repeated(encode_tasks_block(tasks), |m| &mut m.tasks)
    }

    /// Appends a CAPTURE_INFO block to the current file (the last one of a file wins), and
    /// uses `info` in every file opened from now on: facts known once recording started, such
    /// as the pid of the command it runs.
    pub fn write_capture_info(&mut self, info: &[(String, String)]) -> Result<()> {
        let block = encode_block(kind::CAPTURE_INFO, 0, &meta::encode_info(info));
        self.write_repeated(block, |m| &mut m.info)
    }

    /// Appends a CGROUPS block to the current file (the last one of a file wins), and uses
    /// `cgroups` in every file opened from now on. Nothing is written for an empty table.
    pub fn write_cgroups(&mut self, cgroups: &[crate::Cgroup]) -> Result<()> {
        self.write_repeated(encode_cgroups_block(cgroups), |m| &mut m.cgroups)
    }

    /// Appends a FILES block to the current file only (a part of the table, written as the
    /// recorder names files: see [`RingWriter::set_files`] for what later files repeat).
    pub fn append_files(&mut self, table: &FileTable) -> Result<()> {
        self.append_block(&encode_files_block(table))?;
        self.enforce_cap()
    }

    /// The FILES table the metadata of every file opened from now on repeats (nothing is
    /// written now).
    pub fn set_files(&mut self, table: &FileTable) {
        self.meta.files = encode_files_block(table);
    }

    /// Appends a FILES block to the current file, and repeats it in the metadata of every file
    /// opened from now on.
    pub fn write_files(&mut self, table: &FileTable) -> Result<()> {
        self.write_files_block(encode_files_block(table))
    }

    /// [`RingWriter::write_files`] of an encoded FILES block.
    fn write_files_block(&mut self, block: Vec<u8>) -> Result<()> {
        self.write_repeated(block, |m| &mut m.files)
    }

    /// Appends `block` to the current file and keeps it, in the slot of `meta` that `slot`
    /// names, for the metadata of every file opened from now on; an empty block (of an
    /// empty list) writes and replaces nothing.
    fn write_repeated(
        &mut self,
        block: Vec<u8>,
        slot: fn(&mut EncodedMeta) -> &mut Vec<u8>,
    ) -> Result<()> {
        if block.is_empty() {
            return Ok(());
        }
        self.append_block(&block)?;
        *slot(&mut self.meta) = block;
        self.enforce_cap()
    }

    /// Appends a LOOPS block (format 1.7) to the current file, and repeats it in the metadata
    /// of every file opened from now on: `loops` is every loop mapping seen so far (a reader
    /// takes a file's last list).
    pub fn write_loops(&mut self, loops: &[crate::LoopDevice]) -> Result<()> {
        self.write_repeated(encode_loops_block(loops), |m| &mut m.loops)
    }

    /// Appends a BTRFS block (format 1.9) to the current file, and repeats it in the metadata
    /// of every file opened from now on: `fs` is every filesystem with every chunk seen so far
    /// (a reader takes a file's last list).
    pub fn write_btrfs(&mut self, fs: &[crate::BtrfsFs]) -> Result<()> {
        self.write_repeated(encode_btrfs_block(fs), |m| &mut m.btrfs)
    }

    /// Appends a USER_MAPS block (format 1.8) to the current file, and repeats it in the
    /// metadata of every file opened from now on: `maps` is every mapping read so far.
    pub fn write_user_maps(&mut self, maps: &[crate::UserMap]) -> Result<()> {
        self.write_repeated(encode_user_maps_block(maps), |m| &mut m.user_maps)
    }

    /// Appends a USER_SYMBOLS block (format 1.8) to the current file: the symbol tables of one
    /// ELF file. Written once, when the recording stops; not repeated in later files.
    pub fn write_user_symbols(&mut self, symbols: &crate::UserSymbols) -> Result<()> {
        let block = encode_block(kind::USER_SYMBOLS, 0, &meta::encode_user_symbols(symbols));
        self.append_block(&block)?;
        self.enforce_cap()
    }

    /// Appends a PERF_MAPS block (format 1.8) to the current file: one process's JIT symbol
    /// map. Written once, when the recording stops.
    pub fn write_perf_map(&mut self, map: &crate::PerfMap) -> Result<()> {
        let block = encode_block(kind::PERF_MAPS, 0, &meta::encode_perf_map(map));
        self.append_block(&block)?;
        self.enforce_cap()
    }

    /// Appends a DM_TARGETS block (format 1.7) to the current file, and repeats it in the
    /// metadata of every file opened from now on: `targets` is every target seen so far.
    pub fn write_dm_targets(&mut self, targets: &[crate::DmTarget]) -> Result<()> {
        self.write_repeated(encode_dm_block(targets), |m| &mut m.dm_targets)
    }

    /// Appends a FLUSHED block (format 1.6) to the current file: the promise that every
    /// record of every recorded CPU with a timestamp below `time_ns` (the trace's clock) is
    /// in a chunk written before it, in this file or an earlier one of the ring. The caller
    /// must have written those chunks first. A live reader takes the last such block of the
    /// newest file (`TraceFile::flushed`).
    ///
    /// Files opened later do not repeat the block: until the next call, the newest file has
    /// none and the previous file's last one holds.
    pub fn write_flushed(&mut self, time_ns: u64) -> Result<()> {
        self.append_block(&encode_block(
            kind::FLUSHED,
            0,
            &meta::encode_flushed(time_ns),
        ))?;
        self.enforce_cap()
    }

    /// Appends a metadata block to the current file and counts its bytes.
    fn append_block(&mut self, block: &[u8]) -> Result<()> {
        let cur = self.current()?;
        let before = cur.len();
        cur.append(block)?;
        self.stats.bytes_written += cur.len() - before;
        Ok(())
    }

    /// Whether writing a chunk block of `block_len` bytes now would start a new file (so the
    /// caller can refresh the task list first).
    pub fn needs_roll(&self, block_len: usize) -> bool {
        let file_size = self.opts.file_size;
        match &self.current {
            Some(cur) => {
                file_size > 0 && !cur.is_empty() && cur.len() + block_len as u64 > file_size
            }
            None => false,
        }
    }

    /// The path of the file being written.
    pub fn current_path(&self) -> Option<&Path> {
        self.current.as_ref().map(|f| f.path())
    }

    /// Appends a chunk, rolling to a new file and deleting old ones as the limits require.
    pub fn write_chunk(&mut self, chunk: &EncodedChunk) -> Result<()> {
        self.current()?;
        if self.needs_roll(chunk.block.len()) {
            self.roll()?;
        }
        let cur = self.current()?;
        let before = cur.len();
        cur.write_chunk(chunk)?;
        let added = cur.len() - before;
        self.stats.chunks += 1;
        self.stats.bytes_written += added;
        self.enforce_cap()
    }

    fn roll(&mut self) -> Result<()> {
        self.close_current()?;
        self.open_next()
    }

    /// Finishes the current file, if any, with its index and footer, and counts it closed.
    fn close_current(&mut self) -> Result<()> {
        if let Some(f) = self.current.take() {
            let path = f.path().to_path_buf();
            let before = f.len();
            let len = f.finish()?;
            self.stats.bytes_written += len - before;
            self.closed.push_back((path, len));
        }
        Ok(())
    }

    fn enforce_cap(&mut self) -> Result<()> {
        if self.opts.max_size == 0 {
            return Ok(());
        }
        let cur = self.current.as_ref().map_or(0, |f| f.len());
        let mut total: u64 = cur + self.closed.iter().map(|(_, l)| l).sum::<u64>();
        while total > self.opts.max_size {
            let Some((path, len)) = self.closed.pop_front() else {
                break;
            };
            std::fs::remove_file(&path).map_err(io_err(&path))?;
            self.stats.files_deleted += 1;
            total -= len;
        }
        Ok(())
    }

    /// Forces the current file's data to stable storage (`fdatasync`). Closed files were
    /// synced when they were closed.
    pub fn sync(&mut self) -> Result<()> {
        self.current()?.sync()?;
        self.stats.syncs += 1;
        Ok(())
    }

    /// Closes the current file with its index and footer.
    pub fn finish(mut self) -> Result<RingStats> {
        self.close_current()?;
        self.stats.bytes_on_disk = self.closed.iter().map(|(_, l)| l).sum();
        Ok(self.stats)
    }

    /// Statistics so far.
    pub fn stats(&self) -> RingStats {
        let mut s = self.stats;
        s.bytes_on_disk = self.closed.iter().map(|(_, l)| l).sum::<u64>()
            + self.current.as_ref().map_or(0, |f| f.len());
        s
    }
}
