//! The reader: memory-maps trace files, finds their chunks (through the index or by scanning),
//! reports damage, and hands out decompressed chunks.

use std::collections::{BTreeMap, HashMap, HashSet};
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

enum Data {
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

/// Where a chunk is, and what its header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRef {
    /// Index of the file in [`Trace::files`].
    pub file: usize,
    /// Offset of the chunk's block header in that file.
    pub offset: u64,
    /// The chunk header.
    pub header: ChunkHeader,
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
/// sections only through [`Trace::paths`]. A trace of many ring files thus holds the decoded
/// metadata (kernel symbols included) of the files that are asked for, normally only the
/// oldest one.
pub struct TraceFile {
    path: PathBuf,
    data: Data,
    header: Header,
    /// Metadata blocks (kinds below 0x100 but the header) whose checksums hold, in file order.
    meta_blocks: Vec<(u64, BlockHeader)>,
    /// The decoded metadata and the faults found decoding it.
    meta: OnceLock<(Metadata, Vec<Problem>)>,
    chunks: Vec<(u64, ChunkHeader)>,
    problems: Vec<Problem>,
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
    fn on_demand<T>(
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

    /// Decompresses and checks the chunk whose block starts at `offset`.
    pub fn decompress_at(&self, offset: u64) -> Result<Chunk> {
        self.decompress_at_into(offset, Vec::new())
    }

    /// [`TraceFile::decompress_at`], decompressing into `buf` (see [`Trace::decompress_into`]).
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
    fn files_blocks(&self) -> impl Iterator<Item = (u64, BlockHeader)> + '_ {
        self.meta_blocks
            .iter()
            .rev()
            .filter(|(_, h)| h.kind == kind::FILES || h.kind == kind::FILE_INDEX)
            .copied()
    }
}

/// What a trace says of one inode's name ([`Trace::file_name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileName<'a> {
    /// Its path on the recording host.
    Path(&'a str),
    /// The recorder knew the trace refers to it but could not name it, and why.
    Unnamed(meta::Unnamed),
    /// No table mentions it (no table at all, a walk cut short, or an older recorder that
    /// named what it walked and not what the trace touched).
    Unknown,
}

/// Paths of inodes, merged from the FILES sections of a trace (see [`Trace::paths`]).
#[derive(Debug, Default)]
pub struct PathTable {
    map: HashMap<(u32, u64), Box<str>>,
    unnamed: HashMap<(u32, u64), meta::Unnamed>,
    flags: u32,
    tables: usize,
    problems: Vec<Problem>,
}

impl PathTable {
    /// The path of inode `ino` on the filesystem whose kernel dev_t (`major << 20 | minor`, as
    /// in tracepoint payloads) is `dev`.
    pub fn get(&self, dev: u32, ino: u64) -> Option<&str> {
        self.map.get(&(dev, ino)).map(|p| &**p)
    }
    /// Why the recorder could not name an inode the trace refers to, when it said so.
    pub fn unnamed(&self, dev: u32, ino: u64) -> Option<meta::Unnamed> {
        self.unnamed.get(&(dev, ino)).copied()
    }
    /// Number of (dev, inode) pairs with a path.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    /// Whether no path is known (the trace has no FILES section, or they were empty).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    /// Every known `(dev, ino, path)`, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u64, &str)> {
        self.map.iter().map(|(&(d, i), p)| (d, i, &**p))
    }
    /// Every inode the recorder could not name, with why, in no particular order.
    pub fn iter_unnamed(&self) -> impl Iterator<Item = (u32, u64, meta::Unnamed)> + '_ {
        self.unnamed.iter().map(|(&(d, i), &w)| (d, i, w))
    }
    /// The union of the `FILES_*` flags of the tables read: [`crate::FILES_CAPPED`] or
    /// [`crate::FILES_TIMED_OUT`] mean a walk stopped early and some paths are unknown.
    pub fn flags(&self) -> u32 {
        self.flags
    }
    /// Number of distinct FILES tables read.
    pub fn tables(&self) -> usize {
        self.tables
    }
    /// Damaged FILES sections (skipped).
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }
}

/// What the FILES tables of a trace hold, from their headers alone ([`Trace::paths_summary`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathsSummary {
    /// Distinct tables (FILES and FILE_INDEX blocks; the start table repeated in each ring
    /// file counts once).
    pub tables: usize,
    /// The union of their `FILES_*` flags.
    pub flags: u32,
    /// Entries with a path in the largest table (tables overlap: the table at the end of a
    /// capture repeats the start's, so they are not added up).
    pub largest: usize,
}

/// A decoded group of a FILE_INDEX table: (dev, inode, state, path), sorted.
type Group = Vec<meta::FileIndexEntry>;

/// One FILES or FILE_INDEX block, ready for lookups: nothing is decompressed until a lookup
/// needs it, and then only the group that may hold the inode (or, for a FILES block of
/// format 1.1 to 1.4, the whole table).
#[derive(Debug)]
struct PathSource {
    file: usize,
    at: u64,
    header: BlockHeader,
    flags: u32,
    kind: SourceKind,
}

#[derive(Debug)]
enum SourceKind {
    Index {
        index: meta::FileIndex,
        groups: Vec<OnceLock<Group>>,
    },
    Legacy {
        entries: usize,
        table: OnceLock<HashMap<(u32, u64), Box<str>>>,
    },
}

/// The FILES tables of a trace, newest first, each opened for lookups.
#[derive(Debug, Default)]
struct PathIndex {
    sources: Vec<PathSource>,
    /// Damage found in block headers, group indexes and (as lookups decode them) groups.
    problems: std::sync::Mutex<Vec<Problem>>,
}

impl PathIndex {
    /// Reads the headers and group indexes of the FILES blocks of `files` (oldest file
    /// first), newest first; identical blocks (the ring files repeat the start table) once.
    fn open(files: &[TraceFile]) -> PathIndex {
        let mut sources = Vec::new();
        let mut problems = Vec::new();
        let mut seen: HashSet<(u16, u32, u32)> = HashSet::new();
        for (fi, f) in files.iter().enumerate().rev() {
            for (at, h) in f.files_blocks() {
                if !seen.insert((h.kind, h.len, h.payload_crc)) {
                    continue;
                }
                let Some(p) = payload_of(&f.data, at, h) else {
                    continue;
                };
                let damaged = |e: DecodeError| Problem {
                    path: f.path.clone(),
                    offset: at + BLOCK_HEADER_LEN as u64 + e.at as u64,
                    what: format!("FILES block: {}; skipped", e.what),
                };
                let kind = if h.kind == kind::FILE_INDEX {
                    match meta::decode_file_index(p) {
                        Ok(index) => {
                            let groups = (0..index.groups.len()).map(|_| OnceLock::new()).collect();
                            SourceKind::Index { index, groups }
                        }
                        Err(e) => {
                            problems.push(damaged(e));
                            continue;
                        }
                    }
                } else {
                    let mut d = Dec::new(p);
                    match (d.u32("files flags"), d.u32("file count")) {
                        (Ok(_), Ok(n)) => SourceKind::Legacy {
                            entries: n as usize,
                            table: OnceLock::new(),
                        },
                        (Err(e), _) | (_, Err(e)) => {
                            problems.push(damaged(e));
                            continue;
                        }
                    }
                };
                let flags = p
                    .get(..4)
                    .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                sources.push(PathSource {
                    file: fi,
                    at,
                    header: h,
                    flags,
                    kind,
                });
            }
        }
        PathIndex {
            sources,
            problems: std::sync::Mutex::new(problems),
        }
    }

    fn problem(&self, files: &[TraceFile], s: &PathSource, e: DecodeError) {
        let p = Problem {
            path: files[s.file].path.clone(),
            offset: s.at + BLOCK_HEADER_LEN as u64 + e.at as u64,
            what: format!("FILES block: {}; skipped", e.what),
        };
        self.problems
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(p);
    }

    fn payload<'a>(files: &'a [TraceFile], s: &PathSource) -> &'a [u8] {
        payload_of(&files[s.file].data, s.at, s.header).unwrap_or_default()
    }

    /// Group `g` of source `s`, decoded on first use (empty, and a problem noted, if damaged).
    fn group<'a>(&'a self, files: &[TraceFile], s: &'a PathSource, g: usize) -> &'a Group {
        let SourceKind::Index { index, groups } = &s.kind else {
            unreachable!("groups of a FILE_INDEX source only")
        };
        groups[g].get_or_init(|| {
            meta::decode_file_group(Self::payload(files, s), &index.groups[g]).unwrap_or_else(|e| {
                self.problem(files, s, e);
                Vec::new()
            })
        })
    }

    /// The table of a FILES source of format 1.1 to 1.4, decoded whole on first use.
    fn legacy<'a>(
        &'a self,
        files: &[TraceFile],
        s: &'a PathSource,
    ) -> &'a HashMap<(u32, u64), Box<str>> {
        let SourceKind::Legacy { table, .. } = &s.kind else {
            unreachable!("a FILES source only")
        };
        table.get_or_init(|| {
            // Entries go to a scratch map first, so that a table damaged half way adds
            // nothing.
            let mut one = HashMap::new();
            match meta::decode_files(Self::payload(files, s), |dev, ino, path| {
                one.entry((dev, ino)).or_insert_with(|| path.into());
            }) {
                Ok(_) => one,
                Err(e) => {
                    self.problem(files, s, e);
                    HashMap::new()
                }
            }
        })
    }

    /// What the newest table that names the inode says; else the newest reason it has none.
    fn lookup<'a>(&'a self, files: &[TraceFile], dev: u32, ino: u64) -> FileName<'a> {
        let mut unnamed = None;
        for s in &self.sources {
            match &s.kind {
                SourceKind::Index { index, .. } => {
                    let Some(g) = index.group_of((dev, ino)) else {
                        continue;
                    };
                    let group = self.group(files, s, g);
                    if let Ok(i) = group.binary_search_by_key(&(dev, ino), |e| (e.0, e.1)) {
                        let (_, _, state, path) = &group[i];
                        match meta::Unnamed::from_code(*state) {
                            None if *state == 0 => return FileName::Path(path),
                            None => {}
                            Some(w) => {
                                unnamed.get_or_insert(w);
                            }
                        }
                    }
                }
                SourceKind::Legacy { .. } => {
                    if let Some(p) = self.legacy(files, s).get(&(dev, ino)) {
                        return FileName::Path(p);
                    }
                }
            }
            // The whole table of a recorder that named what the trace touched, written at the
            // end: the older blocks (the parts written while recording) hold nothing more.
            let whole = meta::FILES_TOUCHED | crate::FILES_AT_END;
            if s.flags & whole == whole {
                break;
            }
        }
        unnamed.map_or(FileName::Unknown, FileName::Unnamed)
    }

    fn summary(&self) -> PathsSummary {
        let mut out = PathsSummary {
            tables: self.sources.len(),
            ..Default::default()
        };
        for s in &self.sources {
            out.flags |= s.flags;
            let n = match &s.kind {
                SourceKind::Index { index, .. } => index.named as usize,
                SourceKind::Legacy { entries, .. } => *entries,
            };
            out.largest = out.largest.max(n);
        }
        out
    }

    /// Every table decoded whole, merged (newest wins).
    fn table(&self, files: &[TraceFile], wanted: Option<&HashSet<(u32, u64)>>) -> PathTable {
        let mut t = PathTable {
            tables: self.sources.len(),
            ..Default::default()
        };
        let add = |t: &mut PathTable, dev: u32, ino: u64, state: u8, path: &str| {
            if wanted.is_some_and(|w| !w.contains(&(dev, ino))) {
                return;
            }
            match meta::Unnamed::from_code(state) {
                None if state == 0 => {
                    t.map.entry((dev, ino)).or_insert_with(|| path.into());
                }
                None => {}
                Some(w) => {
                    t.unnamed.entry((dev, ino)).or_insert(w);
                }
            }
        };
        for s in &self.sources {
            t.flags |= s.flags;
            match &s.kind {
                SourceKind::Index { index, .. } => {
                    for g in 0..index.groups.len() {
                        for (dev, ino, state, path) in self.group(files, s, g) {
                            add(&mut t, *dev, *ino, *state, path);
                        }
                    }
                }
                SourceKind::Legacy { .. } => {
                    for (&(dev, ino), path) in self.legacy(files, s) {
                        add(&mut t, dev, ino, 0, path);
                    }
                }
            }
        }
        let named = &t.map;
        t.unnamed.retain(|k, _| !named.contains_key(k));
        t.problems = self
            .problems
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        t
    }
}

fn payload_of(b: &[u8], at: u64, h: BlockHeader) -> Option<&[u8]> {
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

/// A whole trace: one file, or the surviving files of a ring directory.
#[derive(Debug)]
pub struct Trace {
    files: Vec<TraceFile>,
    chunks: Vec<ChunkRef>,
    problems: Vec<Problem>,
    paths: OnceLock<PathTable>,
    path_index: OnceLock<PathIndex>,
}

impl Trace {
    /// Opens a trace file, or a directory of ring files.
    ///
    /// Damage is not an error: the trace is read up to it (or past it, when the damage is
    /// local) and [`Trace::problems`] says what was skipped. Errors are for input that is not a
    /// trace at all.
    pub fn open(path: &Path) -> Result<Trace> {
        let meta = std::fs::metadata(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if !meta.is_dir() {
            return Ok(Self::from_files(vec![TraceFile::open(path)?], Vec::new()));
        }
        let mut names: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "iob"))
            .collect();
        names.sort();
        let mut files = Vec::new();
        let mut problems = Vec::new();
        let mut first_err = None;
        for n in names {
            match TraceFile::open(&n) {
                Ok(f) => files.push(f),
                Err(e) => {
                    problems.push(Problem {
                        path: n.clone(),
                        offset: 0,
                        what: format!("unreadable, skipped: {e}"),
                    });
                    first_err.get_or_insert(e);
                }
            }
        }
        if files.is_empty() {
            return Err(first_err.unwrap_or(Error::Empty {
                path: path.to_path_buf(),
            }));
        }
        files.sort_by_key(|f| f.header.file_index);
        let id = files[0].header.trace_id;
        files.retain(|f| {
            if f.header.trace_id != id {
                problems.push(Problem {
                    path: f.path.clone(),
                    offset: 0,
                    what: format!(
                        "belongs to another capture (trace id {:#x}, expected {id:#x}); skipped",
                        f.header.trace_id
                    ),
                });
                false
            } else {
                true
            }
        });
        Ok(Self::from_files(files, problems))
    }

    /// Builds a trace from files already opened (in ring order).
    ///
    /// The metadata of the first (oldest) file, which [`Trace::metadata`] returns, is decoded
    /// here and its faults join [`Trace::problems`]; the other files' metadata stays undecoded
    /// unless asked for through [`TraceFile::metadata`].
    pub fn from_files(files: Vec<TraceFile>, mut problems: Vec<Problem>) -> Trace {
        let mut chunks = Vec::new();
        for (i, f) in files.iter().enumerate() {
            problems.extend(f.problems.iter().cloned());
            if i == 0 {
                problems.extend(f.metadata_problems().iter().cloned());
            }
            chunks.extend(f.chunks.iter().map(|&(offset, header)| ChunkRef {
                file: i,
                offset,
                header,
            }));
        }
        // Ring data the recorder discarded is a loss of unknown size: say where.
        for c in &chunks {
            if c.header.ring_discarded() {
                problems.push(Problem {
                    path: files[c.file].path.clone(),
                    offset: c.offset,
                    what: format!(
                        "cpu {}: chunk {}: the recorder discarded {} bytes of inconsistent perf \
                         ring data; records between {} and {} are missing",
                        c.header.cpu,
                        c.header.seq,
                        c.header.discarded,
                        c.header.first_ts,
                        c.header.last_ts
                    ),
                });
            }
        }
        // Report gaps in each CPU's chunk sequence (deleted files, damaged chunks).
        let mut per_cpu: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for c in &chunks {
            per_cpu.entry(c.header.cpu).or_default().push(c.header.seq);
        }
        let first_index = files.first().map_or(0, |f| f.header.file_index);
        for (cpu, mut seqs) in per_cpu {
            seqs.sort_unstable();
            if seqs[0] > 0 {
                let why = if first_index > 0 {
                    "older ring files were deleted by the size cap"
                } else {
                    "missing"
                };
                problems.push(Problem {
                    path: files[0].path.clone(),
                    offset: 0,
                    what: format!(
                        "cpu {cpu}: chunks 0..{} are not in the trace ({why})",
                        seqs[0]
                    ),
                });
            }
            // Runs of equal numbers are duplicates; a step over 1 is a gap. No arithmetic can
            // overflow: `w[0] < w[1]` in the gap case, so `w[0] + 1` fits.
            let mut i = 0;
            while i < seqs.len() {
                let s = seqs[i];
                let run = seqs[i..].iter().take_while(|&&x| x == s).count();
                if run > 1 {
                    problems.push(Problem {
                        path: files[0].path.clone(),
                        offset: 0,
                        what: format!("cpu {cpu}: chunk {s} appears {run} times"),
                    });
                }
                i += run;
                if let Some(&next) = seqs.get(i) {
                    if next - s > 1 {
                        problems.push(Problem {
                            path: files[0].path.clone(),
                            offset: 0,
                            what: format!("cpu {cpu}: chunks {}..{next} are missing", s + 1),
                        });
                    }
                }
            }
        }
        Trace {
            files,
            chunks,
            problems,
            paths: OnceLock::new(),
            path_index: OnceLock::new(),
        }
    }

    /// The header of the oldest surviving file (the capture's header).
    pub fn header(&self) -> &Header {
        &self.files[0].header
    }
    /// The metadata of the oldest surviving file.
    pub fn metadata(&self) -> &Metadata {
        self.files[0].metadata()
    }
    /// The cgroups of the recording host's cgroup2 hierarchy (id -> path), sorted by id: the
    /// oldest file's table merged with the newest file's (the recorder appends a table taken
    /// at the end of the capture, which names the cgroups created while recording; for an
    /// id in both, the newest wins). Empty for traces before format 1.3.
    pub fn cgroups(&self) -> Vec<meta::Cgroup> {
        let mut by_id: BTreeMap<u64, String> = BTreeMap::new();
        for f in [self.files.first(), self.files.last()]
            .into_iter()
            .flatten()
        {
            for c in &f.metadata().cgroups {
                by_id.insert(c.id, c.path.clone());
            }
        }
        by_id
            .into_iter()
            .map(|(id, path)| meta::Cgroup { id, path })
            .collect()
    }
    /// The loop devices over files of the recording (format 1.7): every file's list merged,
    /// one entry per loop device and mapping (the same device set up again over another file
    /// is a second entry, from its `since_ns`), sorted by device then time. Empty for traces
    /// before 1.7 and recordings without loop devices.
    pub fn loops(&self) -> Vec<meta::LoopDevice> {
        let mut v: Vec<meta::LoopDevice> = Vec::new();
        for f in &self.files {
            for l in &f.metadata().loops {
                if !v.iter().any(|x| x.same_mapping(l)) {
                    v.push(l.clone());
                }
            }
        }
        v.sort_by_key(|l| (l.major, l.minor, l.since_ns));
        v
    }
    /// The executable mappings the recorder read of the processes whose user stacks it
    /// recorded (format 1.8): every file's list merged, sorted by process, address and time.
    pub fn user_maps(&self) -> Vec<meta::UserMap> {
        let mut set: std::collections::HashSet<&meta::UserMap> = Default::default();
        for f in &self.files {
            set.extend(f.metadata().user_maps.iter());
        }
        let mut v: Vec<meta::UserMap> = set.into_iter().cloned().collect();
        v.sort_by(|a, b| {
            (a.pid, a.start, a.seen_ns, &a.path).cmp(&(b.pid, b.start, b.seen_ns, &b.path))
        });
        v
    }
    /// The symbol tables of user-space ELF files copied into the trace (format 1.8), one per
    /// build id (the first file's copy), with the faults of blocks that could not be read.
    pub fn user_symbols(&self) -> (Vec<meta::UserSymbols>, Vec<Problem>) {
        let mut v: Vec<meta::UserSymbols> = Vec::new();
        let mut problems = Vec::new();
        let mut budget = MAX_USER_SYMBOLS_TOTAL;
        for f in &self.files {
            let (s, p) = f.on_demand(
                kind::USER_SYMBOLS,
                "user symbols",
                &mut budget,
                meta::decode_user_symbols,
            );
            problems.extend(p);
            for one in s {
                if !v.iter().any(|x| x.build_id == one.build_id) {
                    v.push(one);
                }
            }
        }
        (v, problems)
    }
    /// The JIT symbol maps copied into the trace (format 1.8), one per process (the last
    /// file's copy: the map grows as the JIT compiles), with the faults of blocks that could
    /// not be read.
    pub fn perf_maps(&self) -> (Vec<meta::PerfMap>, Vec<Problem>) {
        let mut v: Vec<meta::PerfMap> = Vec::new();
        let mut problems = Vec::new();
        let mut budget = MAX_PERF_MAPS_TOTAL;
        for f in &self.files {
            let (s, p) = f.on_demand(
                kind::PERF_MAPS,
                "perf map",
                &mut budget,
                meta::decode_perf_map,
            );
            problems.extend(p);
            for one in s {
                match v.iter_mut().find(|x| x.pid == one.pid) {
                    Some(x) => *x = one,
                    None => v.push(one),
                }
            }
        }
        (v, problems)
    }
    /// The device-mapper targets of the recording (format 1.7): every file's list merged,
    /// sorted by device, start and time. Empty before 1.7 and without device-mapper.
    pub fn dm_targets(&self) -> Vec<meta::DmTarget> {
        let mut v: Vec<meta::DmTarget> = Vec::new();
        for f in &self.files {
            for t in &f.metadata().dm_targets {
                if !v.iter().any(|x| x.same_target(t)) {
                    v.push(t.clone());
                }
            }
        }
        v.sort_by_key(|t| (t.major, t.minor, t.start, t.since_ns));
        v
    }
    /// The files of the trace, oldest first.
    pub fn files(&self) -> &[TraceFile] {
        &self.files
    }
    /// All chunks, in file and write order.
    pub fn chunks(&self) -> &[ChunkRef] {
        &self.chunks
    }
    /// Damage found while opening, and chunks whose span lost ring data
    /// ([`ChunkHeader::ring_discarded`]).
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }
    fn path_index(&self) -> &PathIndex {
        self.path_index.get_or_init(|| PathIndex::open(&self.files))
    }
    /// Paths of inodes from the FILES sections of every file of the trace (a table taken at
    /// the end of the capture wins over the one taken at its start), every table decoded
    /// whole on the first call: for listings. Lookups of a few inodes cost less through
    /// [`Trace::file_name`] and [`Trace::paths_of`]. Empty for traces without FILES sections
    /// (format 1.0, or recorded with `--no-paths`).
    pub fn paths(&self) -> &PathTable {
        self.paths
            .get_or_init(|| self.path_index().table(&self.files, None))
    }
    /// The tables' count, flags and size, from their headers (nothing is decompressed).
    pub fn paths_summary(&self) -> PathsSummary {
        self.path_index().summary()
    }
    /// The name of inode `ino` on the filesystem of kernel dev_t `dev` (`major << 20 |
    /// minor`, as in tracepoint payloads): the newest table's path; else, when the recorder
    /// said why it could not name it, the reason. Decompresses only the group of each table
    /// that may hold it (once: later lookups in the group cost a binary search); tables of
    /// format 1.1 to 1.4 are decoded whole on the first lookup.
    pub fn file_name(&self, dev: u32, ino: u64) -> FileName<'_> {
        self.path_index().lookup(&self.files, dev, ino)
    }
    /// The paths of the inodes in `wanted` only (`(dev, ino)`, as in [`PathTable::get`]),
    /// and the reasons of those the recorder could not name: what [`Trace::paths`] holds for
    /// them, through [`Trace::file_name`]. Not cached.
    pub fn paths_of(&self, wanted: &HashSet<(u32, u64)>) -> PathTable {
        let ix = self.path_index();
        let mut t = PathTable {
            tables: ix.sources.len(),
            flags: ix.summary().flags,
            ..Default::default()
        };
        for &(dev, ino) in wanted {
            match ix.lookup(&self.files, dev, ino) {
                FileName::Path(p) => {
                    t.map.insert((dev, ino), p.into());
                }
                FileName::Unnamed(w) => {
                    t.unnamed.insert((dev, ino), w);
                }
                FileName::Unknown => {}
            }
        }
        t.problems = self.path_problems();
        t
    }
    /// Damaged FILES sections met so far (at open, and by the lookups made).
    pub fn path_problems(&self) -> Vec<Problem> {
        self.path_index()
            .problems
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    /// The path of inode `ino` on the filesystem of kernel dev_t `dev` (`major << 20 |
    /// minor`, as in tracepoint payloads), if the recorder found it. See [`Trace::file_name`].
    pub fn path_of(&self, dev: u32, ino: u64) -> Option<&str> {
        match self.file_name(dev, ino) {
            FileName::Path(p) => Some(p),
            _ => None,
        }
    }
    /// Decompresses and checks one chunk.
    pub fn decompress(&self, c: &ChunkRef) -> Result<Chunk> {
        self.files[c.file].decompress_at(c.offset)
    }

    /// [`Trace::decompress`] into `buf`, a [`Chunk::data`] done with (whatever it holds is
    /// dropped): a stream of chunks reuses a few buffers instead of allocating, and first
    /// touching, fresh memory for each.
    pub fn decompress_into(&self, c: &ChunkRef, buf: Vec<u8>) -> Result<Chunk> {
        self.files[c.file].decompress_at_into(c.offset, buf)
    }

    /// Decompresses every chunk, in order, on the current rayon pool. A damaged chunk gives an
    /// error in its place; the others are unaffected.
    #[cfg(feature = "parallel")]
    pub fn decompress_all(&self) -> Vec<Result<Chunk>> {
        use rayon::prelude::*;
        self.chunks.par_iter().map(|c| self.decompress(c)).collect()
    }

    /// Maps `f` over the decompressed chunks in parallel and returns the results in chunk order.
    #[cfg(feature = "parallel")]
    pub fn par_map_chunks<R: Send>(
        &self,
        f: impl Fn(&ChunkRef, Result<Chunk>) -> R + Sync + Send,
    ) -> Vec<R> {
        use rayon::prelude::*;
        self.chunks
            .par_iter()
            .map(|c| f(c, self.decompress(c)))
            .collect()
    }
}
