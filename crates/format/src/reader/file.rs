//! One trace file, memory-mapped: its blocks found through the index or by a scan, the
//! damage met on the way (`Problem`), its metadata decoded on first use, and its chunks
//! decompressed and checked.

use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::block::{
    kind, BlockHeader, HeaderFault, BLOCK_HEADER_LEN, BLOCK_MAGIC, FILE_MAGIC, FOOTER_LEN,
    FOOTER_MAGIC, FORMAT_MAJOR, PREAMBLE_LEN,
};
use crate::chunk::{ChunkHeader, RecordIter, CHUNK_HEADER_LEN, MAX_CHUNK_UNCOMPRESSED};
use crate::codec::{zstd_frame_into, Dec};
use crate::error::{DecodeError, Error, Result};
use crate::meta::{self, Header, Metadata, MAX_PERF_MAPS_TOTAL, MAX_USER_SYMBOLS_TOTAL};
use crate::writer::INDEX_ENTRY_LEN;

/// Damage found while reading: where, and what the reader did about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file concerned.
    pub path: PathBuf,
    /// Byte offset of the damage.
    pub offset: u64,
    /// What was found and what was skipped.
    pub what: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: offset {}: {}",
            self.path.display(),
            self.offset,
            self.what
        )
    }
}

pub(super) enum Data {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for Data {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Data::Map(m) => m,
            Data::Owned(v) => v,
        }
    }
}

/// A decompressed chunk: its header and its raw perf records.
#[derive(Debug, Clone)]
pub struct Chunk {
    /// The chunk header.
    pub header: ChunkHeader,
    /// The raw perf records, in the recording host's byte order.
    pub data: Vec<u8>,
}

impl Chunk {
    /// Iterates the chunk's records in the given byte order (the trace header's).
    pub fn records(&self, order: meta::ByteOrder) -> RecordIter<'_> {
        RecordIter::new(&self.data, order)
    }
}

/// One trace file, memory-mapped.
///
/// Opening a file finds its blocks and checks their checksums, but decodes no metadata: the
/// metadata sections are decoded on the first call of [`TraceFile::metadata`], and the FILES
/// sections only through [`Trace::paths`](crate::Trace::paths). A trace of many ring files
/// thus holds the decoded metadata (kernel symbols included) of the files that are asked for,
/// normally only the oldest one.
pub struct TraceFile {
    pub(super) path: PathBuf,
    pub(super) data: Data,
    pub(super) header: Header,
    /// Metadata blocks (kinds below 0x100 but the header) whose checksums hold, in file order.
    meta_blocks: Vec<(u64, BlockHeader)>,
    /// The decoded metadata and the faults found decoding it.
    meta: OnceLock<(Metadata, Vec<Problem>)>,
    pub(super) chunks: Vec<(u64, ChunkHeader)>,
    pub(super) problems: Vec<Problem>,
    indexed: bool,
}

impl std::fmt::Debug for TraceFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceFile")
            .field("path", &self.path)
            .field("len", &self.data.len())
            .field("chunks", &self.chunks.len())
            .field("indexed", &self.indexed)
            .finish()
    }
}

/// Result of looking for a block at a position.
enum Step {
    /// A block whose header checks out starts here.
    Block(BlockHeader, u64),
    /// A damaged stretch was skipped: continue at this offset.
    Resync(u64),
    /// Nothing more can be read.
    End,
}

/// What a block walk may take.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// Everything: metadata and chunks (a scan of a file without a usable index).
    All,
    /// Metadata only, between the chunks an index lists. A chunk or damage found there means
    /// the index does not describe the file.
    Gap,
}

impl TraceFile {
    /// Opens and memory-maps one trace file.
    pub fn open(path: &Path) -> Result<TraceFile> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let data = if len == 0 {
            Data::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only. A concurrent writer may append to the file (a live
            // capture); bytes past our length are never touched, and every byte we read is
            // bounds-checked and validated, so a changing file yields errors, not UB in safe code
            // beyond what reading shared memory implies.
            Data::Map(unsafe { memmap2::Mmap::map(&file) }.map_err(io)?)
        };
        Self::from_data(path, data)
    }

    /// Parses a trace file held in memory (used by tests and fuzzing).
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<TraceFile> {
        Self::from_data(path, Data::Owned(bytes))
    }

    fn corrupt(path: &Path, offset: u64, what: impl Into<String>) -> Error {
        Error::Corrupt {
            path: path.to_path_buf(),
            offset,
            what: what.into(),
        }
    }

    fn from_data(path: &Path, data: Data) -> Result<TraceFile> {
        let b: &[u8] = &data;
        if b.len() < PREAMBLE_LEN {
            if b.len() < FILE_MAGIC.len() || b[..FILE_MAGIC.len()] == FILE_MAGIC {
                return Err(Self::corrupt(
                    path,
                    0,
                    format!(
                        "truncated: {} bytes, shorter than the file preamble",
                        b.len()
                    ),
                ));
            }
            return Err(Error::NotATrace {
                path: path.to_path_buf(),
            });
        }
        if b[..8] != FILE_MAGIC {
            return Err(Error::NotATrace {
                path: path.to_path_buf(),
            });
        }
        let major = u16::from_le_bytes([b[8], b[9]]);
        if major > FORMAT_MAJOR {
            return Err(Error::UnsupportedVersion {
                path: path.to_path_buf(),
                found: major,
                supported: FORMAT_MAJOR,
            });
        }
        let mut f = TraceFile {
            path: path.to_path_buf(),
            header: placeholder_header(),
            meta_blocks: Vec::new(),
            meta: OnceLock::new(),
            chunks: Vec::new(),
            problems: Vec::new(),
            indexed: false,
            data: Data::Owned(Vec::new()),
        };
        // The header block must come first, whole and valid.
        let first = PREAMBLE_LEN as u64;
        let hdr = match BlockHeader::parse(&b[PREAMBLE_LEN..]) {
            Ok(h) if h.kind == kind::HEADER => h,
            Ok(h) => {
                return Err(Self::corrupt(
                    path,
                    first,
                    format!("first block is of kind {:#x}, not the header", h.kind),
                ))
            }
            Err(e) => {
                return Err(Self::corrupt(
                    path,
                    first,
                    describe_fault(e, "header block"),
                ))
            }
        };
        let payload = payload_of(b, first, hdr)
            .ok_or_else(|| Self::corrupt(path, first, "truncated inside the header block"))?;
        if crc32fast::hash(payload) != hdr.payload_crc {
            return Err(Self::corrupt(path, first, "header block checksum mismatch"));
        }
        f.header = Header::decode(payload).map_err(|e| {
            Self::corrupt(path, first + BLOCK_HEADER_LEN as u64 + e.at as u64, e.what)
        })?;
        let after_header = first + (BLOCK_HEADER_LEN as u64) + hdr.len as u64;

        if !f.read_index(b, after_header) {
            // The index was unusable or did not describe the file: forget what it gave.
            f.chunks.clear();
            f.meta_blocks.clear();
            f.problems.clear();
            f.indexed = false;
            f.scan_range(b, after_header, b.len() as u64, Walk::All);
        }
        f.data = data;
        Ok(f)
    }

    /// Uses the index of a cleanly closed file. Returns false when there is no usable index or
    /// it does not describe the file, in which case the file must be scanned.
    ///
    /// The blocks between the chunks the index lists (metadata before the first chunk, and any
    /// written later, such as a FILES table at the end of a capture) are walked, so an indexed
    /// file yields the same metadata as a scan.
    fn read_index(&mut self, b: &[u8], start: u64) -> bool {
        let Some(footer) = b.len().checked_sub(FOOTER_LEN).map(|o| &b[o..]) else {
            return false;
        };
        if footer[..8] != FOOTER_MAGIC {
            return false;
        }
        let index_off = u64::from_le_bytes(footer[8..16].try_into().unwrap_or_default());
        if index_off < start || index_off >= b.len() as u64 {
            return false;
        }
        let Ok(h) = BlockHeader::parse(&b[index_off as usize..]) else {
            return false;
        };
        if h.kind != kind::INDEX
            || index_off + (BLOCK_HEADER_LEN as u64) + h.len as u64 + FOOTER_LEN as u64
                != b.len() as u64
        {
            return false;
        }
        let Some(payload) = payload_of(b, index_off, h) else {
            return false;
        };
        if crc32fast::hash(payload) != h.payload_crc {
            return false;
        }
        let mut d = Dec::new(payload);
        let Ok(n) = d.count(INDEX_ENTRY_LEN, "index entries") else {
            return false;
        };
        let mut pos = start;
        for _ in 0..n {
            let Ok(off) = d.u64("offset") else {
                return false;
            };
            if d.take(INDEX_ENTRY_LEN - 8, "entry").is_err() {
                return false;
            }
            // Entries are in file order and point at whole chunk blocks before the index.
            if off < pos || off >= index_off {
                return false;
            }
            let Ok(h) = BlockHeader::parse(&b[off as usize..]) else {
                return false;
            };
            let Some(p) = payload_of(b, off, h) else {
                return false;
            };
            let end = off + BLOCK_HEADER_LEN as u64 + h.len as u64;
            if h.kind != kind::CHUNK || end > index_off {
                return false;
            }
            if !self.scan_range(b, pos, off, Walk::Gap) {
                return false;
            }
            match self.check_chunk(p) {
                Ok(ch) => self.chunks.push((off, ch)),
                Err(e) => self.chunk_problem(off, e),
            }
            pos = end;
        }
        if !self.scan_range(b, pos, index_off, Walk::Gap) {
            return false;
        }
        self.indexed = true;
        true
    }

    /// Walks the blocks in `[start, end)`. Returns false, in [`Walk::Gap`] mode, when it met a
    /// chunk or damage (the index does not describe the file).
    fn scan_range(&mut self, b: &[u8], start: u64, end: u64, walk: Walk) -> bool {
        let problems_before = self.problems.len();
        let mut pos = start;
        while pos < end {
            match self.next_block(b, pos, end) {
                Step::End => break,
                Step::Resync(to) => pos = to,
                Step::Block(h, at) => {
                    let next = at + BLOCK_HEADER_LEN as u64 + h.len as u64;
                    if let Some(payload) = payload_of(b, at, h) {
                        if walk == Walk::Gap && h.kind == kind::CHUNK {
                            return false;
                        }
                        if crc32fast::hash(payload) != h.payload_crc {
                            self.problem(
                                at,
                                format!(
                                    "checksum mismatch in a block of kind {:#x} ({} bytes); skipped",
                                    h.kind, h.len
                                ),
                            );
                        } else {
                            self.take_block(at, h, payload);
                        }
                    }
                    pos = next;
                }
            }
        }
        walk == Walk::All || self.problems.len() == problems_before
    }

    /// Finds the next valid block header at or after `pos`, recording problems on the way.
    fn next_block(&mut self, b: &[u8], pos: u64, end: u64) -> Step {
        let rest = &b[pos as usize..end as usize];
        if rest.len() == FOOTER_LEN && rest[..8] == FOOTER_MAGIC {
            return Step::End;
        }
        match BlockHeader::parse(rest) {
            Ok(h) => {
                if (h.len as usize) > rest.len() - BLOCK_HEADER_LEN {
                    self.problem(
                        pos,
                        format!(
                            "truncated: a block of kind {:#x} needs {} bytes, {} remain; the file ends here",
                            h.kind,
                            h.len as usize + BLOCK_HEADER_LEN,
                            rest.len()
                        ),
                    );
                    return Step::End;
                }
                Step::Block(h, pos)
            }
            Err(HeaderFault::Short) => {
                self.problem(
                    pos,
                    format!(
                        "truncated: {} trailing bytes, less than a block header",
                        rest.len()
                    ),
                );
                Step::End
            }
            Err(fault) => {
                // Resynchronise on the next block magic whose header checks out. Whether its
                // block is whole is for the next step to say (it may be cut by the file end).
                let mut i = 1;
                while i + BLOCK_HEADER_LEN <= rest.len() {
                    if rest[i..i + 4] == BLOCK_MAGIC && BlockHeader::parse(&rest[i..]).is_ok() {
                        self.problem(
                            pos,
                            format!(
                                "{}; skipped {} bytes to the next valid block header",
                                describe_fault(fault, "block header"),
                                i
                            ),
                        );
                        return Step::Resync(pos + i as u64);
                    }
                    i += 1;
                }
                self.problem(
                    pos,
                    format!(
                        "{}; no valid block header follows, {} bytes ignored",
                        describe_fault(fault, "block header"),
                        rest.len()
                    ),
                );
                Step::End
            }
        }
    }

    /// Checks a chunk block's payload: its header, its length and its CPU.
    fn check_chunk(&self, p: &[u8]) -> std::result::Result<ChunkHeader, DecodeError> {
        let ch = ChunkHeader::decode(p)?;
        if ch.compressed_len as usize + CHUNK_HEADER_LEN != p.len() {
            return Err(DecodeError::new(
                52,
                format!(
                    "chunk declares {} compressed bytes but its block holds {}",
                    ch.compressed_len,
                    p.len().saturating_sub(CHUNK_HEADER_LEN)
                ),
            ));
        }
        if ch.cpu >= self.header.cpu_count {
            return Err(DecodeError::new(
                0,
                format!(
                    "chunk of cpu {}, but the header counts {} CPUs",
                    ch.cpu, self.header.cpu_count
                ),
            ));
        }
        Ok(ch)
    }

    fn chunk_problem(&mut self, at: u64, e: DecodeError) {
        self.problem(
            at + BLOCK_HEADER_LEN as u64 + e.at as u64,
            format!("block of kind {:#x}: {}; skipped", kind::CHUNK, e.what),
        );
    }

    fn take_block(&mut self, at: u64, h: BlockHeader, p: &[u8]) {
        match h.kind {
            kind::CHUNK => match self.check_chunk(p) {
                Ok(ch) => self.chunks.push((at, ch)),
                Err(e) => self.chunk_problem(at, e),
            },
            // The header again: skipped. Other metadata is decoded when asked for.
            kind::HEADER => {}
            k if k < kind::CHUNK => self.meta_blocks.push((at, h)),
            // The index, and kinds from newer versions: skipped.
            _ => {}
        }
    }

    fn problem(&mut self, offset: u64, what: String) {
        self.problems.push(Problem {
            path: self.path.clone(),
            offset,
            what,
        });
    }

    /// Decodes the metadata blocks in file order; for each kind the last valid one wins.
    fn decode_metadata(&self) -> (Metadata, Vec<Problem>) {
        let b: &[u8] = &self.data;
        let mut m = Metadata::default();
        let mut problems = Vec::new();
        for &(at, h) in &self.meta_blocks {
            let Some(p) = payload_of(b, at, h) else {
                continue;
            };
            let res: std::result::Result<(), DecodeError> = match h.kind {
                kind::EVENTS => meta::decode_events(p).map(|v| m.events = v),
                kind::KALLSYMS => meta::decode_kallsyms(p).map(|v| m.kallsyms = Some(v)),
                kind::KALLSYMS_PARTS => {
                    meta::decode_kallsyms_parts(p).map(|v| m.kallsyms = Some(v))
                }
                kind::BLOCK_DEVICES => meta::decode_block_devices(p).map(|v| m.block_devices = v),
                kind::MOUNTS => meta::decode_mounts(p).map(|v| m.mounts = v),
                kind::TASKS => meta::decode_tasks(p).map(|v| m.tasks = v),
                kind::CAPTURE_INFO => meta::decode_info(p).map(|v| m.capture_info = v),
                kind::CGROUPS => meta::decode_cgroups(p).map(|v| m.cgroups = v),
                kind::LOOPS => meta::decode_loops(p).map(|v| m.loops = v),
                kind::DM_TARGETS => meta::decode_dm_targets(p).map(|v| m.dm_targets = v),
                kind::USER_MAPS => meta::decode_user_maps(p).map(|v| m.user_maps = v),
                kind::BTRFS => meta::decode_btrfs(p).map(|v| m.btrfs = v),
                // Read on demand by `TraceFile::user_symbols` and `TraceFile::perf_maps`.
                kind::USER_SYMBOLS | kind::PERF_MAPS => Ok(()),
                // Read by `TraceFile::flushed` alone; checked here so that a malformed one is
                // reported with the other faults.
                kind::FLUSHED => meta::decode_flushed(p).map(|_| ()),
                // FILES is read by `Trace::paths`; kinds of newer minor versions are skipped.
                _ => Ok(()),
            };
            if let Err(e) = res {
                problems.push(Problem {
                    path: self.path.clone(),
                    offset: at + BLOCK_HEADER_LEN as u64 + e.at as u64,
                    what: format!("block of kind {:#x}: {}; skipped", h.kind, e.what),
                });
            }
        }
        (m, problems)
    }

    fn decoded(&self) -> &(Metadata, Vec<Problem>) {
        self.meta.get_or_init(|| self.decode_metadata())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The symbol tables of user-space ELF files the file holds (USER_SYMBOLS blocks, format
    /// 1.8), decoded now, with the faults of the blocks that could not be (each skipped).
    pub fn user_symbols(&self) -> (Vec<meta::UserSymbols>, Vec<Problem>) {
        let mut budget = MAX_USER_SYMBOLS_TOTAL;
        self.on_demand(
            kind::USER_SYMBOLS,
            "user symbols",
            &mut budget,
            meta::decode_user_symbols,
        )
    }
    /// The JIT symbol maps the file holds (PERF_MAPS blocks, format 1.8), decoded now, with
    /// the faults of the blocks that could not be (each skipped).
    pub fn perf_maps(&self) -> (Vec<meta::PerfMap>, Vec<Problem>) {
        let mut budget = MAX_PERF_MAPS_TOTAL;
        self.on_demand(
            kind::PERF_MAPS,
            "perf map",
            &mut budget,
            meta::decode_perf_map,
        )
    }
    /// Decodes the blocks of `k`, metadata read on demand whose payload declares its
    /// uncompressed length in bytes 4..8: while their declared lengths fit in `budget` (what
    /// an untrusted trace may make the reader hold), the others skipped as a fault.
    pub(super) fn on_demand<T>(
        &self,
        k: u16,
        what: &str,
        budget: &mut u64,
        decode: impl Fn(&[u8]) -> std::result::Result<T, DecodeError>,
    ) -> (Vec<T>, Vec<Problem>) {
        let b: &[u8] = &self.data;
        let mut v = Vec::new();
        let mut problems = Vec::new();
        for &(at, h) in &self.meta_blocks {
            if h.kind != k {
                continue;
            }
            let Some(p) = payload_of(b, at, h) else {
                continue;
            };
            let declared = p
                .get(4..8)
                .map_or(0, |x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as u64);
            let problem = |at_: u64, why: String| Problem {
                path: self.path.clone(),
                offset: at + BLOCK_HEADER_LEN as u64 + at_,
                what: format!("{what} block: {why}; skipped"),
            };
            if declared > *budget {
                problems.push(problem(
                    4,
                    format!("{declared} bytes over what is left of the readers' bound for them"),
                ));
                continue;
            }
            *budget -= declared;
            match decode(p) {
                Ok(x) => v.push(x),
                Err(e) => problems.push(problem(e.at as u64, e.what)),
            }
        }
        (v, problems)
    }
    /// The file's header.
    pub fn header(&self) -> &Header {
        &self.header
    }
    /// The file's metadata, decoded on the first call.
    pub fn metadata(&self) -> &Metadata {
        &self.decoded().0
    }
    /// Faults found decoding the metadata (each faulty block was skipped; an earlier block of
    /// the same kind, if any, stands). Decodes the metadata on the first call.
    pub fn metadata_problems(&self) -> &[Problem] {
        &self.decoded().1
    }
    /// Damage found while opening the file: in its block structure, checksums and chunk
    /// headers (faults inside metadata sections are in [`TraceFile::metadata_problems`]).
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }
    /// Whether the file was closed cleanly and its chunks were found through the index.
    pub fn indexed(&self) -> bool {
        self.indexed
    }
    /// The file's length in bytes.
    pub fn len(&self) -> u64 {
        self.data.len() as u64
    }
    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    /// Number of chunks found.
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }
    /// The chunks found, in file order: the offset of each chunk's block header (for
    /// [`TraceFile::decompress_at`]) and its chunk header. Chunks whose block or header is
    /// damaged are not listed (they are in [`TraceFile::problems`]); for a file being written,
    /// those whole when it was opened.
    pub fn chunks(&self) -> &[(u64, ChunkHeader)] {
        &self.chunks
    }
    /// How far the records are written, by the file's FLUSHED blocks (format 1.6): every
    /// record of every recorded CPU with a timestamp (the trace's clock, ns) below the time
    /// returned is in a chunk written before the last valid FLUSHED block, in this file or an
    /// earlier file of the ring. `None` when the file has no valid FLUSHED block (files before
    /// 1.6, a ring file just started, a recorder that wrote none).
    ///
    /// Decodes only that block: a live reader can ask of a file opened again and again
    /// without decoding its metadata (kernel symbols included). A damaged block is skipped
    /// and the one before it stands.
    pub fn flushed(&self) -> Option<u64> {
        let b: &[u8] = &self.data;
        self.meta_blocks
            .iter()
            .rev()
            .filter(|(_, h)| h.kind == kind::FLUSHED)
            .find_map(|&(at, h)| meta::decode_flushed(payload_of(b, at, h)?).ok())
    }

    /// The offset of the file's last block of `kind` (valid or not), without decoding it:
    /// for the lists the recorder writes again as they grow ([`kind::LOOPS`],
    /// [`kind::DM_TARGETS`], [`kind::BTRFS`]), a live reader can skip a list it has seen.
    pub fn latest_offset(&self, kind: u16) -> Option<u64> {
        self.meta_blocks
            .iter()
            .rev()
            .find(|(_, h)| h.kind == kind)
            .map(|&(at, _)| at)
    }

    /// The file's last valid block of `kind` decoded by `decode`, with its offset.
    fn latest<T>(
        &self,
        kind: u16,
        decode: fn(&[u8]) -> std::result::Result<T, DecodeError>,
    ) -> Option<(u64, T)> {
        let b: &[u8] = &self.data;
        self.meta_blocks
            .iter()
            .rev()
            .filter(|(_, h)| h.kind == kind)
            .find_map(|&(at, h)| Some((at, decode(payload_of(b, at, h)?).ok()?)))
    }

    /// The file's last valid BTRFS list (format 1.9; the recorder writes it again when a
    /// chunk is allocated or a filesystem mounted), with its block's offset: `None` when the
    /// file has none. Decodes only that block, as [`TraceFile::flushed`], for a live reader
    /// that opens the file again and again (it can skip a list whose offset it has seen).
    pub fn btrfs_latest(&self) -> Option<(u64, Vec<meta::BtrfsFs>)> {
        self.latest(kind::BTRFS, meta::decode_btrfs)
    }

    /// The file's last valid LOOPS list (format 1.7; the recorder writes it again when a
    /// loop device is set up), with its block's offset, as [`TraceFile::btrfs_latest`].
    pub fn loops_latest(&self) -> Option<(u64, Vec<meta::LoopDevice>)> {
        self.latest(kind::LOOPS, meta::decode_loops)
    }

    /// The file's last valid DM_TARGETS list (format 1.7; the recorder writes it again when
    /// a device-mapper target appears), with its block's offset, as
    /// [`TraceFile::btrfs_latest`].
    pub fn dm_targets_latest(&self) -> Option<(u64, Vec<meta::DmTarget>)> {
        self.latest(kind::DM_TARGETS, meta::decode_dm_targets)
    }

    /// Decompresses and checks the chunk whose block starts at `offset`.
    pub fn decompress_at(&self, offset: u64) -> Result<Chunk> {
        self.decompress_at_into(offset, Vec::new())
    }

    /// [`TraceFile::decompress_at`], decompressing into `buf` (see
    /// [`Trace::decompress_into`](crate::Trace::decompress_into)).
    pub fn decompress_at_into(&self, offset: u64, buf: Vec<u8>) -> Result<Chunk> {
        let b: &[u8] = &self.data;
        let bad = |off: u64, what: String| Self::corrupt(&self.path, off, what);
        let h = BlockHeader::parse(b.get(offset as usize..).unwrap_or_default())
            .map_err(|e| bad(offset, describe_fault(e, "chunk block header")))?;
        let p =
            payload_of(b, offset, h).ok_or_else(|| bad(offset, "chunk block truncated".into()))?;
        if crc32fast::hash(p) != h.payload_crc {
            return Err(bad(offset, "chunk checksum mismatch".into()));
        }
        let ch = ChunkHeader::decode(p)
            .map_err(|e| bad(offset + BLOCK_HEADER_LEN as u64 + e.at as u64, e.what))?;
        let z = p.get(CHUNK_HEADER_LEN..).unwrap_or_default();
        let data = zstd_frame_into(
            z,
            ch.uncompressed_len as usize,
            MAX_CHUNK_UNCOMPRESSED as usize,
            None,
            buf,
        )
        .map_err(|e| bad(offset, format!("chunk: {e}")))?;
        if crc32fast::hash(&data) != ch.content_crc {
            return Err(bad(offset, "chunk content checksum mismatch".into()));
        }
        let mut n = 0u32;
        for r in RecordIter::new(&data, self.header.byte_order) {
            if let Err(e) = r {
                return Err(bad(
                    offset,
                    format!("chunk record at byte {}: {}", e.at, e.what),
                ));
            }
            n += 1;
        }
        if n != ch.records {
            return Err(bad(
                offset,
                format!("chunk holds {n} records, header says {}", ch.records),
            ));
        }
        Ok(Chunk { header: ch, data })
    }

    /// The FILES and FILE_INDEX blocks of this file, latest first.
    pub(super) fn files_blocks(&self) -> impl Iterator<Item = (u64, BlockHeader)> + '_ {
        self.meta_blocks
            .iter()
            .rev()
            .filter(|(_, h)| h.kind == kind::FILES || h.kind == kind::FILE_INDEX)
            .copied()
    }
}

pub(super) fn payload_of(b: &[u8], at: u64, h: BlockHeader) -> Option<&[u8]> {
    let s = (at as usize).checked_add(BLOCK_HEADER_LEN)?;
    b.get(s..s.checked_add(h.len as usize)?)
}

fn describe_fault(f: HeaderFault, what: &str) -> String {
    match f {
        HeaderFault::Short => format!("truncated {what}"),
        HeaderFault::Magic => format!("damaged {what} (bad magic)"),
        HeaderFault::Crc => format!("damaged {what} (checksum mismatch)"),
        HeaderFault::TooLong(n) => format!("damaged {what} (declares {n} bytes, over the cap)"),
    }
}

fn placeholder_header() -> Header {
    Header {
        byte_order: meta::ByteOrder::Little,
        word_size: 8,
        page_size: 0,
        cpu_count: 0,
        clock_id: 0,
        recorder_pid: 0,
        file_index: 0,
        start_time_ns: 0,
        start_clock_ns: 0,
        trace_id: 0,
        hostname: String::new(),
        kernel_release: String::new(),
        machine: String::new(),
        recorder_version: String::new(),
    }
}
