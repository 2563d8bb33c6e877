//! The reader: memory-maps trace files, finds their chunks (through the index or by scanning),
//! reports damage, and hands out decompressed chunks.

use std::collections::BTreeMap;
use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use crate::block::{
    kind, BlockHeader, HeaderFault, BLOCK_HEADER_LEN, BLOCK_MAGIC, FILE_MAGIC, FOOTER_LEN,
    FOOTER_MAGIC, FORMAT_MAJOR, PREAMBLE_LEN,
};
use crate::chunk::{ChunkHeader, RecordIter, CHUNK_HEADER_LEN};
use crate::codec::Dec;
use crate::error::{DecodeError, Error, Result};
use crate::meta::{self, Header, Metadata};
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
pub struct TraceFile {
    path: PathBuf,
    data: Data,
    header: Header,
    meta: Metadata,
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

/// Result of scanning a byte range for blocks.
enum Step {
    Block(BlockHeader, u64),
    End,
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
            meta: Metadata::default(),
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
            f.scan(b, after_header);
        }
        f.data = data;
        Ok(f)
    }

    /// Uses the index of a cleanly closed file. Returns false (nothing changed) when there is
    /// no usable index, in which case the file must be scanned.
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
        let mut offsets = Vec::with_capacity(n);
        for _ in 0..n {
            let Ok(off) = d.u64("offset") else {
                return false;
            };
            if d.take(INDEX_ENTRY_LEN - 8, "entry").is_err() {
                return false;
            }
            offsets.push(off);
        }
        // Metadata blocks sit between the header and the first chunk: read them by scanning that
        // stretch (every block is checked).
        let first_chunk = offsets.first().copied().unwrap_or(index_off);
        let mut chunks = Vec::with_capacity(n);
        for off in offsets {
            if off < start || off >= index_off {
                return false;
            }
            let Ok(h) = BlockHeader::parse(&b[off as usize..]) else {
                return false;
            };
            let Some(p) = payload_of(b, off, h) else {
                return false;
            };
            if h.kind != kind::CHUNK {
                return false;
            }
            match ChunkHeader::decode(p) {
                Ok(ch) if ch.compressed_len as usize + CHUNK_HEADER_LEN == p.len() => {
                    chunks.push((off, ch))
                }
                _ => return false,
            }
        }
        self.scan_range(b, start, first_chunk, false);
        self.chunks = chunks;
        self.indexed = true;
        true
    }

    fn scan(&mut self, b: &[u8], start: u64) {
        self.scan_range(b, start, b.len() as u64, true);
    }

    /// Walks blocks in `[start, end)`, decoding metadata and (if `take_chunks`) chunk headers.
    fn scan_range(&mut self, b: &[u8], start: u64, end: u64, take_chunks: bool) {
        let mut pos = start;
        while pos < end {
            match self.next_block(b, pos, end) {
                Step::End => break,
                Step::Block(h, at) => {
                    let next = at + BLOCK_HEADER_LEN as u64 + h.len as u64;
                    if let Some(payload) = payload_of(b, at, h) {
                        if crc32fast::hash(payload) != h.payload_crc {
                            self.problem(
                                at,
                                format!(
                                    "checksum mismatch in a block of kind {:#x} ({} bytes); skipped",
                                    h.kind, h.len
                                ),
                            );
                        } else {
                            self.take_block(at, h, payload, take_chunks);
                        }
                    }
                    pos = next;
                }
            }
        }
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
                // Resynchronise: look for the next block magic whose header checks out.
                let mut i = 1;
                while i + BLOCK_HEADER_LEN <= rest.len() {
                    if rest[i..i + 4] == BLOCK_MAGIC {
                        if let Ok(h) = BlockHeader::parse(&rest[i..]) {
                            if h.len as usize <= rest.len() - i - BLOCK_HEADER_LEN {
                                self.problem(
                                    pos,
                                    format!(
                                        "{}; skipped {} bytes to the next valid block",
                                        describe_fault(fault, "block header"),
                                        i
                                    ),
                                );
                                return Step::Block(h, pos + i as u64);
                            }
                        }
                    }
                    i += 1;
                }
                self.problem(
                    pos,
                    format!(
                        "{}; no valid block follows, {} bytes ignored",
                        describe_fault(fault, "block header"),
                        rest.len()
                    ),
                );
                Step::End
            }
        }
    }

    fn take_block(&mut self, at: u64, h: BlockHeader, p: &[u8], take_chunks: bool) {
        let body = at + BLOCK_HEADER_LEN as u64;
        let res: std::result::Result<(), DecodeError> = match h.kind {
            kind::CHUNK if take_chunks => match ChunkHeader::decode(p) {
                Ok(ch) if ch.compressed_len as usize + CHUNK_HEADER_LEN == p.len() => {
                    self.chunks.push((at, ch));
                    Ok(())
                }
                Ok(ch) => Err(DecodeError::new(
                    52,
                    format!(
                        "chunk declares {} compressed bytes but its block holds {}",
                        ch.compressed_len,
                        p.len().saturating_sub(CHUNK_HEADER_LEN)
                    ),
                )),
                Err(e) => Err(e),
            },
            kind::EVENTS => meta::decode_events(p).map(|v| self.meta.events = v),
            kind::KALLSYMS => meta::decode_kallsyms(p).map(|v| self.meta.kallsyms = Some(v)),
            kind::BLOCK_DEVICES => {
                meta::decode_block_devices(p).map(|v| self.meta.block_devices = v)
            }
            kind::MOUNTS => meta::decode_mounts(p).map(|v| self.meta.mounts = v),
            kind::TASKS => meta::decode_tasks(p).map(|v| self.meta.tasks = v),
            kind::CAPTURE_INFO => meta::decode_info(p).map(|v| self.meta.capture_info = v),
            // The header again, the index, and kinds from newer versions: skipped.
            _ => Ok(()),
        };
        if let Err(e) = res {
            self.problem(
                body + e.at as u64,
                format!("block of kind {:#x}: {}; skipped", h.kind, e.what),
            );
        }
    }

    fn problem(&mut self, offset: u64, what: String) {
        self.problems.push(Problem {
            path: self.path.clone(),
            offset,
            what,
        });
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The file's header.
    pub fn header(&self) -> &Header {
        &self.header
    }
    /// The file's metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }
    /// Damage found while opening the file.
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

    /// Decompresses and checks the chunk whose block starts at `offset`.
    pub fn decompress_at(&self, offset: u64) -> Result<Chunk> {
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
        let data = zstd::bulk::decompress(z, ch.uncompressed_len as usize)
            .map_err(|e| bad(offset, format!("chunk zstd frame: {e}")))?;
        if data.len() != ch.uncompressed_len as usize {
            return Err(bad(
                offset,
                format!(
                    "chunk decompressed to {} bytes, header says {}",
                    data.len(),
                    ch.uncompressed_len
                ),
            ));
        }
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
    pub fn from_files(files: Vec<TraceFile>, mut problems: Vec<Problem>) -> Trace {
        let mut chunks = Vec::new();
        for (i, f) in files.iter().enumerate() {
            problems.extend(f.problems.iter().cloned());
            chunks.extend(f.chunks.iter().map(|&(offset, header)| ChunkRef {
                file: i,
                offset,
                header,
            }));
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
        }
    }

    /// The header of the oldest surviving file (the capture's header).
    pub fn header(&self) -> &Header {
        &self.files[0].header
    }
    /// The metadata of the oldest surviving file.
    pub fn metadata(&self) -> &Metadata {
        &self.files[0].meta
    }
    /// The files of the trace, oldest first.
    pub fn files(&self) -> &[TraceFile] {
        &self.files
    }
    /// All chunks, in file and write order.
    pub fn chunks(&self) -> &[ChunkRef] {
        &self.chunks
    }
    /// Damage found while opening.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }
    /// Decompresses and checks one chunk.
    pub fn decompress(&self, c: &ChunkRef) -> Result<Chunk> {
        self.files[c.file].decompress_at(c.offset)
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
