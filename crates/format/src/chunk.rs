//! Chunks: runs of raw perf records of one CPU, compressed as one zstd frame.
// The decoding half serves the reader (feature `reader`); the recorder builds the format
// without it and only encodes.
#![cfg_attr(not(feature = "reader"), allow(dead_code))]

use crate::block::{encode_block, kind};
use crate::codec::{Dec, Enc};
use crate::error::DecodeError;
use crate::meta::ByteOrder;

/// Size of the chunk header at the start of a chunk block's payload.
pub const CHUNK_HEADER_LEN: usize = 64;
/// Hard cap on the uncompressed size of one chunk.
pub const MAX_CHUNK_UNCOMPRESSED: u32 = 64 << 20;
/// Size of a perf record header (`struct perf_event_header`).
pub const PERF_HEADER_LEN: usize = 8;
/// `ChunkHeader::flags` bit: the recorder found this CPU's perf ring buffer inconsistent
/// within the chunk's span and discarded `ChunkHeader::discarded` bytes of ring data: records
/// of an unknown number are missing between the chunk's first and last timestamps.
pub const CHUNK_RING_DISCARDED: u32 = 1;

/// The header of a chunk, describing the records it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkHeader {
    /// CPU whose ring buffer the records come from.
    pub cpu: u32,
    /// Chunk flags (`CHUNK_*`).
    pub flags: u32,
    /// Sequence number of this chunk among the chunks of the same CPU, from 0, continuous
    /// across the ring files of one capture. A gap means chunks were lost or deleted.
    pub seq: u64,
    /// Timestamp of the first record that carries one (perf clock, ns); 0 if none.
    pub first_ts: u64,
    /// Timestamp of the last record that carries one; 0 if none.
    pub last_ts: u64,
    /// Number of perf records in the chunk.
    pub records: u32,
    /// Bytes of perf ring data the recorder discarded within this chunk's span (the ring was
    /// inconsistent), saturating at `u32::MAX`; 0 unless [`CHUNK_RING_DISCARDED`] is set.
    pub discarded: u32,
    /// Records the kernel reported lost (PERF_RECORD_LOST / LOST_SAMPLES) within this span.
    pub lost: u64,
    /// Length of the decompressed record bytes.
    pub uncompressed_len: u32,
    /// Length of the zstd frame following the header.
    pub compressed_len: u32,
    /// CRC-32 (IEEE) of the decompressed record bytes.
    pub content_crc: u32,
}

impl ChunkHeader {
    pub(crate) fn encode(&self, e: &mut Enc) {
        e.u32(self.cpu)
            .u32(self.flags)
            .u64(self.seq)
            .u64(self.first_ts)
            .u64(self.last_ts)
            .u32(self.records)
            .u32(self.discarded)
            .u64(self.lost)
            .u32(self.uncompressed_len)
            .u32(self.compressed_len)
            .u32(self.content_crc)
            .u32(0);
    }

    pub(crate) fn decode(b: &[u8]) -> Result<ChunkHeader, DecodeError> {
        let mut d = Dec::new(b);
        let h = ChunkHeader {
            cpu: d.u32("cpu")?,
            flags: d.u32("chunk flags")?,
            seq: d.u64("seq")?,
            first_ts: d.u64("first timestamp")?,
            last_ts: d.u64("last timestamp")?,
            records: d.u32("record count")?,
            discarded: d.u32("discarded bytes")?,
            lost: d.u64("lost count")?,
            uncompressed_len: d.u32("uncompressed length")?,
            compressed_len: d.u32("compressed length")?,
            content_crc: d.u32("content crc")?,
        };
        d.u32("reserved")?;
        if h.uncompressed_len > MAX_CHUNK_UNCOMPRESSED {
            return Err(DecodeError::new(
                48,
                format!(
                    "chunk declares {} uncompressed bytes, over the cap of {}",
                    h.uncompressed_len, MAX_CHUNK_UNCOMPRESSED
                ),
            ));
        }
        Ok(h)
    }

    /// Whether the recorder discarded ring data within this chunk's span
    /// ([`CHUNK_RING_DISCARDED`]): records are missing there.
    pub fn ring_discarded(&self) -> bool {
        self.flags & CHUNK_RING_DISCARDED != 0
    }
}

/// Accumulates the records of one CPU into a chunk.
///
/// ```
/// use ioblame_format::ChunkBuilder;
/// let mut b = ChunkBuilder::new(0);
/// // A perf record: type 9 (SAMPLE), misc 0, size 16, then 8 bytes of body.
/// let mut rec = vec![9, 0, 0, 0, 0, 0, 16, 0];
/// rec.extend_from_slice(&42u64.to_le_bytes());
/// b.push(&rec, Some(42));
/// assert_eq!(b.len(), 16);
/// let chunk = b.finish(3).expect("one chunk");
/// assert_eq!(chunk.header.records, 1);
/// ```
#[derive(Debug)]
pub struct ChunkBuilder {
    cpu: u32,
    next_seq: u64,
    buf: Vec<u8>,
    records: u32,
    lost: u64,
    discarded: Option<u32>,
    first_ts: u64,
    last_ts: u64,
    has_ts: bool,
}

/// A finished, compressed chunk ready to append to a file.
#[derive(Debug, Clone)]
pub struct EncodedChunk {
    /// The chunk's header.
    pub header: ChunkHeader,
    /// The whole block: block header, chunk header and zstd frame.
    pub block: Vec<u8>,
}

impl ChunkBuilder {
    /// A builder for the chunks of `cpu`, numbering them from 0.
    pub fn new(cpu: u32) -> Self {
        ChunkBuilder {
            cpu,
            next_seq: 0,
            buf: Vec::new(),
            records: 0,
            lost: 0,
            discarded: None,
            first_ts: 0,
            last_ts: 0,
            has_ts: false,
        }
    }

    /// Appends one whole perf record (header included) with its timestamp, if it has one.
    pub fn push(&mut self, record: &[u8], ts: Option<u64>) {
        self.buf.extend_from_slice(record);
        self.records += 1;
        if let Some(ts) = ts {
            if !self.has_ts {
                self.first_ts = ts;
                self.has_ts = true;
            }
            self.last_ts = ts;
        }
    }

    /// Adds to the count of records the kernel reported lost in this span.
    pub fn add_lost(&mut self, n: u64) {
        self.lost = self.lost.saturating_add(n);
    }

    /// Marks that `bytes` of ring data were discarded (the ring was inconsistent) within the
    /// current chunk's span: the chunk gets [`CHUNK_RING_DISCARDED`] and the byte count.
    pub fn add_discarded(&mut self, bytes: u64) {
        let b = u32::try_from(bytes).unwrap_or(u32::MAX);
        self.discarded = Some(self.discarded.unwrap_or(0).saturating_add(b));
    }

    /// Bytes of records accumulated so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing (neither records nor losses nor discarded ring data) is pending.
    pub fn is_empty(&self) -> bool {
        self.records == 0 && self.lost == 0 && self.discarded.is_none()
    }

    /// Compresses what has accumulated into a chunk (zstd level `level`) and starts the next
    /// one. Returns `None` when nothing is pending.
    pub fn finish(&mut self, level: i32) -> Option<EncodedChunk> {
        let (header, records) = self.take_raw()?;
        Some(encode_chunk(header, &records, level))
    }

    /// Takes what has accumulated, uncompressed, with its header (lengths and checksum are
    /// filled in by [`encode_chunk`], e.g. on another thread), and starts the next chunk.
    /// Returns `None` when nothing is pending.
    pub fn take_raw(&mut self) -> Option<(ChunkHeader, Vec<u8>)> {
        if self.is_empty() {
            return None;
        }
        let header = ChunkHeader {
            cpu: self.cpu,
            flags: if self.discarded.is_some() {
                CHUNK_RING_DISCARDED
            } else {
                0
            },
            seq: self.next_seq,
            first_ts: self.first_ts,
            last_ts: self.last_ts,
            records: self.records,
            discarded: self.discarded.unwrap_or(0),
            lost: self.lost,
            uncompressed_len: self.buf.len() as u32,
            compressed_len: 0,
            content_crc: 0,
        };
        self.next_seq += 1;
        self.records = 0;
        self.lost = 0;
        self.discarded = None;
        self.first_ts = 0;
        self.last_ts = 0;
        self.has_ts = false;
        // The next chunk starts with room for as much: growing a vector from nothing to a
        // chunk's size would copy it several times over.
        let room = Vec::with_capacity(self.buf.capacity());
        Some((header, std::mem::replace(&mut self.buf, room)))
    }
}

/// Compresses `records` and frames them as a chunk block with `header` (whose length and
/// checksum fields are filled in here). A writer encoding many chunks uses a
/// [`ChunkEncoder`], which keeps its compression context.
pub fn encode_chunk(header: ChunkHeader, records: &[u8], level: i32) -> EncodedChunk {
    ChunkEncoder::new(level).encode(header, records)
}

/// Encodes chunks with one zstd compression context, reused from chunk to chunk: setting
/// up a context costs about as much as compressing a small chunk.
pub struct ChunkEncoder {
    level: i32,
    /// `None` when the context could not be made (out of memory): each chunk then makes its
    /// own.
    cctx: Option<zstd::bulk::Compressor<'static>>,
}

impl std::fmt::Debug for ChunkEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkEncoder")
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}

impl ChunkEncoder {
    /// An encoder compressing at zstd level `level`.
    pub fn new(level: i32) -> Self {
        ChunkEncoder {
            level,
            cctx: zstd::bulk::Compressor::new(level).ok(),
        }
    }

    /// Compresses `records` and frames them as a chunk block with `header` (whose length and
    /// checksum fields are filled in here).
    pub fn encode(&mut self, header: ChunkHeader, records: &[u8]) -> EncodedChunk {
        let level = self.level;
        // Compressing from memory into a vector cannot fail except on allocation failure.
        let z = self
            .cctx
            .as_mut()
            .and_then(|c| c.compress(records).ok())
            .or_else(|| zstd::bulk::compress(records, level).ok())
            .unwrap_or_else(|| {
                zstd::bulk::compress(records, 1).expect("zstd compression of an in-memory buffer")
            });
        frame_chunk(header, records, &z)
    }
}

/// Frames a compressed chunk: fills in `header`'s lengths and checksum and builds the block.
fn frame_chunk(mut header: ChunkHeader, records: &[u8], z: &[u8]) -> EncodedChunk {
    header.uncompressed_len = records.len() as u32;
    header.compressed_len = z.len() as u32;
    header.content_crc = crc32fast::hash(records);
    let mut e = Enc::default();
    e.buf.reserve(CHUNK_HEADER_LEN + z.len());
    header.encode(&mut e);
    e.bytes(z);
    EncodedChunk {
        header,
        block: encode_block(kind::CHUNK, 0, &e.buf),
    }
}

/// One raw perf record inside a decompressed chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord<'a> {
    /// `perf_event_header.type` (PERF_RECORD_*).
    pub kind: u32,
    /// `perf_event_header.misc`.
    pub misc: u16,
    /// The whole record, header included, in the recording host's byte order.
    pub bytes: &'a [u8],
}

impl<'a> RawRecord<'a> {
    /// The record body after the 8-byte perf header.
    pub fn body(&self) -> &'a [u8] {
        &self.bytes[PERF_HEADER_LEN..]
    }
}

/// Iterates the perf records of a decompressed chunk, honouring the recording host's byte order.
///
/// Stops with an error at the first record whose size is impossible (smaller than its header,
/// or running past the end of the chunk).
#[derive(Debug, Clone)]
pub struct RecordIter<'a> {
    data: &'a [u8],
    pos: usize,
    order: ByteOrder,
    failed: bool,
}

impl<'a> RecordIter<'a> {
    /// Iterates the records of `data`, written in `order`.
    pub fn new(data: &'a [u8], order: ByteOrder) -> Self {
        RecordIter {
            data,
            pos: 0,
            order,
            failed: false,
        }
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RawRecord<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.data.len() {
            return None;
        }
        let rest = &self.data[self.pos..];
        let Some(h) = rest.get(..PERF_HEADER_LEN) else {
            self.failed = true;
            return Some(Err(DecodeError::new(
                self.pos,
                format!(
                    "{} trailing bytes, too short for a perf record header",
                    rest.len()
                ),
            )));
        };
        let kind = self.order.u32([h[0], h[1], h[2], h[3]]);
        let misc = self.order.u16([h[4], h[5]]);
        let size = self.order.u16([h[6], h[7]]) as usize;
        if size < PERF_HEADER_LEN || size > rest.len() {
            self.failed = true;
            return Some(Err(DecodeError::new(
                self.pos,
                format!(
                    "perf record of type {kind} declares size {size}, {} bytes remain",
                    rest.len()
                ),
            )));
        }
        self.pos += size;
        Some(Ok(RawRecord {
            kind,
            misc,
            bytes: &rest[..size],
        }))
    }
}
