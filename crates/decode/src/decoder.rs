//! From raw perf records to typed [`Event`]s.
//!
//! [`Decoder::new`] parses every event's format text once and resolves, by name, the fields
//! its typed form needs; decoding a record is then a table lookup and a few bounds-checked
//! loads.

use ioblame_format::{ByteOrder, Chunk, Header, Metadata, RawRecord, EVENT_TASK_RECORDS};
use std::cell::RefCell;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::event::*;
use crate::format::{EventFormat, Field, FieldError, FormatError};
use crate::record::{
    check_sample_type, parse_sample, parse_task_record, RecordError, SampleLayout, TaskRecord,
    RECORD_COMM, RECORD_EXIT, RECORD_FORK, RECORD_LOST, RECORD_LOST_SAMPLES, RECORD_SAMPLE,
    SAMPLE_CPU, SAMPLE_ID, SAMPLE_IDENTIFIER, SAMPLE_RAW, SAMPLE_STREAM_ID, SAMPLE_TID,
    SAMPLE_TIME,
};

/// Something in the trace's metadata that limits decoding (reported, not fatal).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecoderProblem {
    /// An event's format text does not parse: its samples decode as `EventKind::Other`.
    #[error("event `{event}`: {source}")]
    Format {
        /// The event.
        event: String,
        /// The parse error.
        source: FormatError,
    },
    /// A field the typed form needs is missing or unusable: samples decode as
    /// `EventKind::Other`.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// The event's sample type cannot be parsed: its samples are counted as errors.
    #[error("event `{event}`: {source}")]
    SampleType {
        /// The event.
        event: String,
        /// Why.
        source: RecordError,
    },
    /// Samples cannot be told apart (no `IDENTIFIER` and no other way).
    #[error("{0}")]
    Identification(String),
}

/// Why a record was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum SkipReason {
    /// The record is shorter than its type requires.
    Truncated,
    /// The sample's event has an unsupported sample type.
    UnsupportedSampleType,
    /// The sample's identifier matches no event of the trace.
    UnknownIdentifier,
    /// A tracepoint field lies outside the payload.
    FieldOutOfBounds,
    /// A callchain longer than the cap.
    CallchainTooLong,
    /// The chunk's record framing broke (size field impossible); the rest of the chunk is lost.
    Framing,
    /// Samples cannot be identified in this trace.
    Unidentified,
}

impl SkipReason {
    /// Number of reasons.
    pub const COUNT: usize = 7;
    /// All reasons, in order.
    pub const ALL: [SkipReason; Self::COUNT] = [
        SkipReason::Truncated,
        SkipReason::UnsupportedSampleType,
        SkipReason::UnknownIdentifier,
        SkipReason::FieldOutOfBounds,
        SkipReason::CallchainTooLong,
        SkipReason::Framing,
        SkipReason::Unidentified,
    ];
    /// A short description.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Truncated => "truncated record",
            SkipReason::UnsupportedSampleType => "unsupported sample type",
            SkipReason::UnknownIdentifier => "unknown sample identifier",
            SkipReason::FieldOutOfBounds => "tracepoint field out of bounds",
            SkipReason::CallchainTooLong => "callchain too long",
            SkipReason::Framing => "broken record framing",
            SkipReason::Unidentified => "sample event unidentifiable",
        }
    }
    fn of_record(e: RecordError) -> Self {
        match e {
            RecordError::Truncated { .. } => SkipReason::Truncated,
            RecordError::UnsupportedSampleType { .. } => SkipReason::UnsupportedSampleType,
            RecordError::CallchainTooLong(_) => SkipReason::CallchainTooLong,
        }
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Counts of what decoding saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Perf records read.
    pub records: u64,
    /// Samples decoded, per event index of the trace (typed or `Other`).
    pub per_event: Vec<u64>,
    /// COMM records decoded.
    pub comm: u64,
    /// FORK records decoded.
    pub fork: u64,
    /// EXIT records decoded.
    pub exit: u64,
    /// LOST and LOST_SAMPLES records decoded.
    pub lost_records: u64,
    /// Sum of the records they say were lost.
    pub lost: u64,
    /// Records of other types, skipped.
    pub other_records: u64,
    /// Records that failed to decode, by reason ([`SkipReason`] as index).
    pub errors: [u64; SkipReason::COUNT],
}

impl DecodeStats {
    /// Events produced.
    pub fn events(&self) -> u64 {
        self.per_event.iter().sum::<u64>() + self.comm + self.fork + self.exit + self.lost_records
    }
    /// Records that failed to decode.
    pub fn error_count(&self) -> u64 {
        self.errors.iter().sum()
    }
    /// Non-zero error counts.
    pub fn error_reasons(&self) -> impl Iterator<Item = (SkipReason, u64)> + '_ {
        SkipReason::ALL
            .iter()
            .zip(self.errors.iter())
            .filter(|(_, &n)| n > 0)
            .map(|(&r, &n)| (r, n))
    }
    /// Adds `o` into `self`.
    pub fn merge(&mut self, o: &DecodeStats) {
        self.records += o.records;
        if self.per_event.len() < o.per_event.len() {
            self.per_event.resize(o.per_event.len(), 0);
        }
        for (a, b) in self.per_event.iter_mut().zip(&o.per_event) {
            *a += b;
        }
        self.comm += o.comm;
        self.fork += o.fork;
        self.exit += o.exit;
        self.lost_records += o.lost_records;
        self.lost += o.lost;
        self.other_records += o.other_records;
        for (a, b) in self.errors.iter_mut().zip(&o.errors) {
            *a += b;
        }
    }
    fn error(&mut self, r: SkipReason) {
        self.errors[r as usize] += 1;
    }
}

/// The events of one chunk, in record order, and what decoding them saw.
#[derive(Debug, Clone, Default)]
pub struct DecodedChunk {
    /// Events in record order.
    pub events: Vec<Event>,
    /// Counts.
    pub stats: DecodeStats,
}

/// A field the payload could not give (too short, or not of the resolved kind): the event
/// is skipped and counted, so the reason is not kept.
struct Bad;

/// What reading a field gives.
type Got<T> = Result<T, Bad>;

/// Reads the resolved fields of one payload.
struct R<'a> {
    f: &'a [Option<Field>],
    raw: &'a [u8],
    o: ByteOrder,
}

impl R<'_> {
    #[inline]
    fn u(&self, i: usize) -> Got<u64> {
        match self.f.get(i).copied().flatten() {
            Some(f) => f.read_u64(self.raw, self.o).ok_or(Bad),
            None => Ok(0),
        }
    }
    #[inline]
    fn i(&self, i: usize) -> Got<i64> {
        self.u(i).map(|v| v as i64)
    }
    #[inline]
    fn u32(&self, i: usize) -> Got<u32> {
        self.u(i).map(|v| v as u32)
    }
    #[inline]
    fn i32(&self, i: usize) -> Got<i32> {
        self.u(i).map(|v| v as i32)
    }
    #[inline]
    fn u16(&self, i: usize) -> Got<u16> {
        self.u(i).map(|v| v as u16)
    }
    #[inline]
    fn bytes(&self, i: usize) -> Got<&[u8]> {
        match self.f.get(i).copied().flatten() {
            Some(f) => f.read_bytes(self.raw, self.o).ok_or(Bad),
            None => Ok(&[]),
        }
    }
    #[inline]
    fn rwbs(&self, i: usize) -> Got<Rwbs> {
        Ok(Rwbs::parse_bytes(self.bytes(i)?))
    }
    #[inline]
    fn bdi(&self, i: usize) -> Got<Dev> {
        Ok(parse_bdi(self.bytes(i)?))
    }
    fn s(&self, i: usize) -> Got<String> {
        Ok(String::from_utf8_lossy(self.bytes(i)?).into_owned())
    }
}

/// Parses a bdi name `"MAJ:MIN"` into a kernel dev (`major << 20 | minor`); 0 if the name is
/// not of that form (e.g. `btrfs-1`).
pub fn parse_bdi(name: &[u8]) -> Dev {
    fn num(b: &[u8]) -> Option<u32> {
        if b.is_empty() || b.len() > 7 || !b.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(b.iter().fold(0u32, |a, &c| a * 10 + (c - b'0') as u32))
    }
    let Some(colon) = name.iter().position(|&c| c == b':') else {
        return 0;
    };
    match (num(&name[..colon]), num(&name[colon + 1..])) {
        (Some(ma), Some(mi)) if ma < (1 << 12) && mi < (1 << 20) => (ma << 20) | mi,
        _ => 0,
    }
}

/// Builds an event's kind from its payload into the event already in place (in the decoded
/// chunk's vector): returning the kind by value, through the function pointer, made the
/// caller copy each one from the stack where it had just been written piecewise, and that
/// reload waited on the stores (a third of the decoding time).
type Build = fn(&R<'_>, &mut EventKind) -> Got<()>;

/// A typed event: its name, the fields it reads (`$name` a string, `name?` optional with
/// default 0, `a|b` alternatives), and its constructor.
struct Spec {
    name: &'static str,
    fields: &'static [&'static str],
    build: Build,
}

macro_rules! spec {
    ($name:literal, [$($f:literal),*], $b:expr) => {
        Spec {
            name: $name,
            fields: &[$($f),*],
            build: |r, out| {
                let b: fn(&R<'_>) -> Got<EventKind> = $b;
                *out = b(r)?;
                Ok(())
            },
        }
    };
}

use EventKind as K;

static SPECS: &[Spec] = &[
    // ---- block ----
    spec!(
        "block:block_bio_queue",
        ["dev", "sector", "nr_sector", "$rwbs"],
        |r| Ok(K::BioQueue {
            dev: r.u32(0)?,
            sector: r.u(1)?,
            nr_sector: r.u32(2)?,
            rwbs: r.rwbs(3)?
        })
    ),
    spec!(
        "block:block_bio_backmerge",
        ["dev", "sector", "nr_sector", "$rwbs"],
        |r| Ok(K::BioBackmerge {
            dev: r.u32(0)?,
            sector: r.u(1)?,
            nr_sector: r.u32(2)?,
            rwbs: r.rwbs(3)?
        })
    ),
    spec!(
        "block:block_bio_frontmerge",
        ["dev", "sector", "nr_sector", "$rwbs"],
        |r| Ok(K::BioFrontmerge {
            dev: r.u32(0)?,
            sector: r.u(1)?,
            nr_sector: r.u32(2)?,
            rwbs: r.rwbs(3)?
        })
    ),
    spec!(
        "block:block_getrq",
        ["dev", "sector", "nr_sector", "$rwbs"],
        |r| Ok(K::GetRq {
            dev: r.u32(0)?,
            sector: r.u(1)?,
            nr_sector: r.u32(2)?,
            rwbs: r.rwbs(3)?
        })
    ),
    spec!(
        "block:block_split",
        ["dev", "sector", "new_sector", "$rwbs"],
        |r| Ok(K::BioSplit {
            dev: r.u32(0)?,
            sector: r.u(1)?,
            new_sector: r.u(2)?,
            rwbs: r.rwbs(3)?
        })
    ),
    spec!(
        "block:block_bio_remap",
        [
            "dev",
            "sector",
            "nr_sector",
            "old_dev",
            "old_sector",
            "$rwbs"
        ],
        |r| Ok(K::BioRemap {
            dev: r.u32(0)?,
            sector: r.u(1)?,
            nr_sector: r.u32(2)?,
            old_dev: r.u32(3)?,
            old_sector: r.u(4)?,
            rwbs: r.rwbs(5)?
        })
    ),
    spec!(
        "block:block_bio_complete",
        ["dev", "sector", "nr_sector", "error", "$rwbs"],
        |r| Ok(K::BioComplete {
            dev: r.u32(0)?,
            sector: r.u(1)?,
            nr_sector: r.u32(2)?,
            error: r.i32(3)?,
            rwbs: r.rwbs(4)?
        })
    ),
    spec!(
        "block:block_rq_insert",
        ["dev", "sector", "nr_sector", "bytes", "$rwbs"],
        |r| Ok(K::RqInsert {
            dev: r.u32(0)?,
            sector: r.u(1)?,
            nr_sector: r.u32(2)?,
            bytes: r.u32(3)?,
            rwbs: r.rwbs(4)?
        })
    ),
    spec!(
        "block:block_rq_issue",
        ["dev", "sector", "nr_sector", "bytes", "$rwbs"],
        |r| Ok(K::RqIssue {
            dev: r.u32(0)?,
            sector: r.u(1)?,
            nr_sector: r.u32(2)?,
            bytes: r.u32(3)?,
            rwbs: r.rwbs(4)?
        })
    ),
    spec!(
        "block:block_rq_merge",
        ["dev", "sector", "nr_sector", "bytes", "$rwbs"],
        |r| Ok(K::RqMerge {
            dev: r.u32(0)?,
            sector: r.u(1)?,
            nr_sector: r.u32(2)?,
            bytes: r.u32(3)?,
            rwbs: r.rwbs(4)?
        })
    ),
    spec!(
        "block:block_rq_requeue",
        ["dev", "sector", "nr_sector", "$rwbs"],
        |r| Ok(K::RqRequeue {
            dev: r.u32(0)?,
            sector: r.u(1)?,
            nr_sector: r.u32(2)?,
            rwbs: r.rwbs(3)?
        })
    ),
    spec!(
        "block:block_rq_complete",
        ["dev", "sector", "nr_sector", "error", "$rwbs"],
        |r| Ok(K::RqComplete {
            dev: r.u32(0)?,
            sector: r.u(1)?,
            nr_sector: r.u32(2)?,
            error: r.i32(3)?,
            rwbs: r.rwbs(4)?
        })
    ),
    spec!(
        "block:block_rq_error",
        ["dev", "sector", "nr_sector", "error", "$rwbs"],
        |r| Ok(K::RqError {
            dev: r.u32(0)?,
            sector: r.u(1)?,
            nr_sector: r.u32(2)?,
            error: r.i32(3)?,
            rwbs: r.rwbs(4)?
        })
    ),
    spec!("block:block_dirty_buffer", ["dev", "sector", "size"], |r| {
        Ok(K::DirtyBuffer {
            dev: r.u32(0)?,
            blocknr: r.u(1)?,
            size: r.u(2)?,
        })
    }),
    // ---- writeback ----
    spec!(
        "writeback:writeback_dirty_folio",
        ["$name", "ino", "index"],
        |r| Ok(K::DirtyFolio {
            bdi: r.bdi(0)?,
            ino: r.u(1)?,
            index: r.u(2)?
        })
    ),
    spec!(
        "writeback:writeback_dirty_page",
        ["$name", "ino", "index"],
        |r| Ok(K::DirtyFolio {
            bdi: r.bdi(0)?,
            ino: r.u(1)?,
            index: r.u(2)?
        })
    ),
    spec!(
        "writeback:writeback_mark_inode_dirty",
        ["$name", "ino", "state", "flags"],
        |r| Ok(K::MarkInodeDirty {
            bdi: r.bdi(0)?,
            ino: r.u(1)?,
            state: r.u(2)?,
            flags: r.u(3)?
        })
    ),
    spec!(
        "writeback:writeback_dirty_inode_start",
        ["$name", "ino", "state", "flags"],
        |r| Ok(K::DirtyInode {
            bdi: r.bdi(0)?,
            ino: r.u(1)?,
            state: r.u(2)?,
            flags: r.u(3)?,
            start: true
        })
    ),
    spec!(
        "writeback:writeback_dirty_inode",
        ["$name", "ino", "state", "flags"],
        |r| Ok(K::DirtyInode {
            bdi: r.bdi(0)?,
            ino: r.u(1)?,
            state: r.u(2)?,
            flags: r.u(3)?,
            start: false
        })
    ),
    spec!(
        "writeback:writeback_single_inode_start",
        ["$name", "ino", "state", "nr_to_write"],
        |r| Ok(K::SingleInodeStart {
            bdi: r.bdi(0)?,
            ino: r.u(1)?,
            state: r.u(2)?,
            nr_to_write: r.i(3)?
        })
    ),
    spec!(
        "writeback:writeback_single_inode",
        ["$name", "ino", "state", "nr_to_write", "wrote"],
        |r| Ok(K::SingleInode {
            bdi: r.bdi(0)?,
            ino: r.u(1)?,
            state: r.u(2)?,
            nr_to_write: r.i(3)?,
            wrote: r.u(4)?
        })
    ),
    spec!(
        "writeback:writeback_write_inode_start",
        ["$name", "ino", "sync_mode"],
        |r| Ok(K::WriteInodeStart {
            bdi: r.bdi(0)?,
            ino: r.u(1)?,
            sync_mode: r.i32(2)?
        })
    ),
    spec!(
        "writeback:writeback_write_inode",
        ["$name", "ino", "sync_mode"],
        |r| Ok(K::WriteInode {
            bdi: r.bdi(0)?,
            ino: r.u(1)?,
            sync_mode: r.i32(2)?
        })
    ),
    spec!(
        "writeback:writeback_queue",
        ["$name", "sb_dev", "nr_pages", "sync_mode", "reason"],
        |r| work(r, WorkPhase::Queue)
    ),
    spec!(
        "writeback:writeback_exec",
        ["$name", "sb_dev", "nr_pages", "sync_mode", "reason"],
        |r| work(r, WorkPhase::Exec)
    ),
    spec!(
        "writeback:writeback_start",
        ["$name", "sb_dev", "nr_pages", "sync_mode", "reason"],
        |r| work(r, WorkPhase::Start)
    ),
    spec!(
        "writeback:writeback_written",
        ["$name", "sb_dev", "nr_pages", "sync_mode", "reason"],
        |r| work(r, WorkPhase::Written)
    ),
    spec!("writeback:sb_mark_inode_writeback", ["dev", "ino"], |r| Ok(
        K::SbInodeWriteback {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            clear: false
        }
    )),
    spec!(
        "writeback:sb_clear_inode_writeback",
        ["dev", "ino"],
        |r| Ok(K::SbInodeWriteback {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            clear: true
        })
    ),
    // ---- page cache ----
    spec!(
        "filemap:mm_filemap_add_to_page_cache",
        ["s_dev", "i_ino", "index", "order?", "pfn"],
        |r| Ok(K::AddToPageCache {
            s_dev: r.u32(0)?,
            ino: r.u(1)?,
            index: r.u(2)?,
            order: r.u(3)? as u8,
            pfn: r.u(4)?
        })
    ),
    spec!(
        "filemap:mm_filemap_delete_from_page_cache",
        ["s_dev", "i_ino", "index", "order?", "pfn"],
        |r| Ok(K::DeleteFromPageCache {
            s_dev: r.u32(0)?,
            ino: r.u(1)?,
            index: r.u(2)?,
            order: r.u(3)? as u8,
            pfn: r.u(4)?
        })
    ),
    spec!(
        "filemap:mm_filemap_fault",
        ["s_dev", "i_ino", "index"],
        |r| Ok(K::FilemapFault {
            s_dev: r.u32(0)?,
            ino: r.u(1)?,
            index: r.u(2)?
        })
    ),
    spec!(
        "readahead:page_cache_sync_ra",
        ["s_dev", "i_ino", "index", "order?", "size", "async_size"],
        |r| ra(r, RaKind::Sync)
    ),
    spec!(
        "readahead:page_cache_async_ra",
        ["s_dev", "i_ino", "index", "order?", "size", "async_size"],
        |r| ra(r, RaKind::Async)
    ),
    spec!(
        "readahead:page_cache_ra_order",
        ["s_dev", "i_ino", "index", "order?", "size", "async_size"],
        |r| ra(r, RaKind::Order)
    ),
    spec!(
        "readahead:page_cache_ra_unbounded",
        [
            "s_dev",
            "i_ino",
            "index",
            "order?",
            "size|nr_to_read",
            "async_size|lookahead_size"
        ],
        |r| ra(r, RaKind::Unbounded)
    ),
    // ---- ext4 ----
    spec!(
        "ext4:ext4_da_write_begin",
        ["dev", "ino", "pos", "len"],
        |r| Ok(K::Ext4WriteBegin {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            pos: r.u(2)?,
            len: r.u32(3)?
        })
    ),
    spec!("ext4:ext4_write_begin", ["dev", "ino", "pos", "len"], |r| {
        Ok(K::Ext4WriteBegin {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            pos: r.u(2)?,
            len: r.u32(3)?,
        })
    }),
    spec!(
        "ext4:ext4_ext_map_blocks_exit",
        ["dev", "ino", "flags", "pblk", "lblk", "len", "mflags", "ret"],
        map_blocks
    ),
    spec!(
        "ext4:ext4_ind_map_blocks_exit",
        ["dev", "ino", "flags", "pblk", "lblk", "len", "mflags", "ret"],
        map_blocks
    ),
    spec!(
        "ext4:ext4_da_write_pages_extent",
        ["dev", "ino", "lblk", "len", "flags"],
        |r| Ok(K::Ext4DaWritePagesExtent {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            lblk: r.u(2)?,
            len: r.u32(3)?,
            flags: r.u32(4)?
        })
    ),
    spec!("ext4:ext4_writepages", ["dev", "ino", "sync_mode"], |r| Ok(
        K::Ext4Writepages {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            sync_mode: r.i32(2)?
        }
    )),
    spec!(
        "ext4:ext4_writepages_result",
        ["dev", "ino", "pages_written"],
        |r| Ok(K::Ext4WritepagesResult {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            pages_written: r.i32(2)?
        })
    ),
    spec!("ext4:ext4_sync_file_enter", ["dev", "ino"], |r| Ok(
        K::Ext4SyncFile {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            exit: false
        }
    )),
    spec!("ext4:ext4_sync_file_exit", ["dev", "ino"], |r| Ok(
        K::Ext4SyncFile {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            exit: true
        }
    )),
    // ---- iomap / xfs ----
    spec!(
        "iomap:iomap_add_to_ioend",
        [
            "dev",
            "ino",
            "pos",
            "dirty_len",
            "addr",
            "offset",
            "length",
            "type",
            "flags",
            "bdev"
        ],
        |r| Ok(K::IomapAddToIoend {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            pos: r.u(2)?,
            dirty_len: r.u(3)?,
            addr: r.u(4)?,
            offset: r.u(5)?,
            length: r.u(6)?,
            typ: r.u16(7)?,
            flags: r.u16(8)?,
            bdev: r.u32(9)?
        })
    ),
    spec!(
        "iomap:iomap_writeback_folio",
        ["dev", "ino", "offset", "length"],
        |r| Ok(K::IomapWritebackFolio {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            offset: r.u(2)?,
            length: r.u(3)?
        })
    ),
    spec!(
        "iomap:iomap_iter_dstmap",
        ["dev", "ino", "addr", "offset", "length", "type", "flags", "bdev"],
        |r| Ok(K::IomapIterDstmap {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            addr: r.u(2)?,
            offset: r.u(3)?,
            length: r.u(4)?,
            typ: r.u16(5)?,
            flags: r.u16(6)?,
            bdev: r.u32(7)?
        })
    ),
    spec!(
        "iomap:iomap_dio_rw_begin",
        ["dev", "ino", "pos", "count"],
        |r| Ok(K::IomapDioBegin {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            pos: r.u(2)?,
            count: r.u(3)?
        })
    ),
    spec!("iomap:iomap_dio_complete", ["dev", "ino", "pos"], |r| Ok(
        K::IomapDioComplete {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            pos: r.u(2)?
        }
    )),
    spec!("iomap:iomap_readahead", ["dev", "ino", "nr_pages"], |r| Ok(
        K::IomapReadahead {
            dev: r.u32(0)?,
            ino: r.u(1)?,
            nr_pages: r.u32(2)?
        }
    )),
    spec!(
        "xfs:xfs_file_buffered_write",
        ["dev", "ino", "offset", "count"],
        |r| xfs(r, XfsFileOp::BufferedWrite)
    ),
    spec!(
        "xfs:xfs_file_buffered_read",
        ["dev", "ino", "offset", "count"],
        |r| xfs(r, XfsFileOp::BufferedRead)
    ),
    spec!(
        "xfs:xfs_file_direct_write",
        ["dev", "ino", "offset", "count"],
        |r| xfs(r, XfsFileOp::DirectWrite)
    ),
    spec!(
        "xfs:xfs_file_direct_read",
        ["dev", "ino", "offset", "count"],
        |r| xfs(r, XfsFileOp::DirectRead)
    ),
    spec!(
        "xfs:xfs_buf_submit",
        ["dev", "bno", "nblks", "flags"],
        |r| Ok(K::XfsBufSubmit {
            dev: r.u32(0)?,
            bno: r.u(1)?,
            nblks: r.u32(2)?,
            flags: r.u32(3)?
        })
    ),
    // ---- jbd2 ----
    spec!(
        "jbd2:jbd2_handle_start",
        ["dev", "tid", "requested_blocks"],
        |r| Ok(K::Jbd2HandleStart {
            dev: r.u32(0)?,
            tid: r.u32(1)?,
            requested_blocks: r.i32(2)?
        })
    ),
    spec!(
        "jbd2:jbd2_start_commit",
        ["dev", "transaction"],
        |r| commit(r, CommitPhase::Start)
    ),
    spec!("jbd2:jbd2_commit_flushing", ["dev", "transaction"], |r| {
        commit(r, CommitPhase::Flushing)
    }),
    spec!("jbd2:jbd2_commit_logging", ["dev", "transaction"], |r| {
        commit(r, CommitPhase::Logging)
    }),
    spec!("jbd2:jbd2_end_commit", ["dev", "transaction"], |r| commit(
        r,
        CommitPhase::End
    )),
    spec!("jbd2:jbd2_submit_inode_data", ["dev", "ino"], |r| Ok(
        K::Jbd2SubmitInodeData {
            dev: r.u32(0)?,
            ino: r.u(1)?
        }
    )),
    // ---- tasks ----
    spec!(
        "sched:sched_process_exec",
        ["pid", "old_pid", "$filename"],
        |r| Ok(K::SchedExec {
            pid: r.u32(0)?,
            old_pid: r.u32(1)?,
            filename: r.s(2)?
        })
    ),
    spec!(
        "sched:sched_process_fork",
        ["parent_pid", "child_pid", "$child_comm"],
        |r| Ok(K::SchedFork {
            parent_pid: r.u32(0)?,
            child_pid: r.u32(1)?,
            child_comm: r.s(2)?
        })
    ),
    spec!("sched:sched_process_exit", ["pid", "$comm"], |r| Ok(
        K::SchedExit {
            pid: r.u32(0)?,
            comm: r.s(1)?
        }
    )),
];

fn work(r: &R<'_>, phase: WorkPhase) -> Got<EventKind> {
    Ok(K::WritebackWork {
        phase,
        bdi: r.bdi(0)?,
        sb_dev: r.u32(1)?,
        nr_pages: r.i(2)?,
        sync_mode: r.i32(3)?,
        reason: r.u32(4)?,
    })
}
fn ra(r: &R<'_>, kind: RaKind) -> Got<EventKind> {
    Ok(K::Readahead {
        kind,
        s_dev: r.u32(0)?,
        ino: r.u(1)?,
        index: r.u(2)?,
        order: r.u32(3)?,
        size: r.u32(4)?,
        async_size: r.u32(5)?,
    })
}
fn map_blocks(r: &R<'_>) -> Got<EventKind> {
    Ok(K::Ext4MapBlocks {
        dev: r.u32(0)?,
        ino: r.u(1)?,
        flags: r.u32(2)?,
        pblk: r.u(3)?,
        lblk: r.u(4)?,
        len: r.u32(5)?,
        mflags: r.u32(6)?,
        ret: r.i32(7)?,
    })
}
fn xfs(r: &R<'_>, op: XfsFileOp) -> Got<EventKind> {
    Ok(K::XfsFile {
        op,
        dev: r.u32(0)?,
        ino: r.u(1)?,
        offset: r.u(2)?,
        count: r.u(3)?,
    })
}
fn commit(r: &R<'_>, phase: CommitPhase) -> Got<EventKind> {
    Ok(K::Jbd2Commit {
        phase,
        dev: r.u32(0)?,
        transaction: r.u32(1)?,
    })
}

/// The names of the tracepoints the decoder turns into typed events (`subsystem:name`).
pub fn typed_event_names() -> impl Iterator<Item = &'static str> {
    SPECS.iter().map(|s| s.name)
}

/// Resolves a spec's fields against a format.
fn resolve(spec: &Spec, fmt: &EventFormat, event: &str) -> Result<Vec<Option<Field>>, FieldError> {
    let mut out = Vec::with_capacity(spec.fields.len());
    for decl in spec.fields {
        let (decl, string) = match decl.strip_prefix('$') {
            Some(d) => (d, true),
            None => (*decl, false),
        };
        let (decl, optional) = match decl.strip_suffix('?') {
            Some(d) => (d, true),
            None => (decl, false),
        };
        let found = decl.split('|').find_map(|n| fmt.spec(n).map(|s| (n, s)));
        let Some((name, s)) = found else {
            if optional {
                out.push(None);
                continue;
            }
            return Err(FieldError::MissingField {
                event: event.to_string(),
                field: decl.split('|').next().unwrap_or(decl).to_string(),
            });
        };
        let f = Field::from_spec(s);
        let ok = if string {
            f.is_string()
        } else {
            f.is_integer()
        };
        if !ok {
            return Err(FieldError::BadField {
                event: event.to_string(),
                field: name.to_string(),
                what: format!(
                    "declared `{}` of {} bytes, expected {}",
                    s.type_name,
                    s.size,
                    if string {
                        "a char array or __data_loc string"
                    } else {
                        "an integer of 1, 2, 4 or 8 bytes"
                    }
                ),
            });
        }
        out.push(Some(f));
    }
    Ok(out)
}

#[derive(Debug)]
struct Entry {
    name: String,
    sample_type: u64,
    sample_type_ok: bool,
    /// Where a sample's fields lie (when the sample type is supported).
    layout: Option<SampleLayout>,
    build: Option<Build>,
    fields: Vec<Option<Field>>,
    common_pid: Option<Field>,
}

/// How samples are attributed to their event.
#[derive(Debug, Clone, Copy)]
enum IdMode {
    /// First u64 of the body is the `IDENTIFIER`.
    Identifier,
    /// Only one event.
    Single,
    /// All events share this sample type (with RAW): the payload's `common_type` tells.
    CommonType(u64),
    /// No way.
    None,
}

const TRAILER_BITS: u64 =
    SAMPLE_TID | SAMPLE_TIME | SAMPLE_ID | SAMPLE_STREAM_ID | SAMPLE_CPU | SAMPLE_IDENTIFIER;

/// Decodes the chunks of one trace into typed events.
#[derive(Debug)]
pub struct Decoder {
    order: ByteOrder,
    entries: Vec<Entry>,
    by_id: FxHashMap<u64, u16>,
    by_common_type: FxHashMap<u32, u16>,
    id_mode: IdMode,
    /// Trailer layout of non-sample records when it is the same for every event.
    trailer_type: Option<u64>,
    fallback_trailer_type: u64,
    problems: Vec<DecoderProblem>,
}

impl Decoder {
    /// Prepares the decoding of a trace: parses every event's format and resolves the fields
    /// of its typed form. Whatever limits decoding is kept in [`Decoder::problems`].
    pub fn new(header: &Header, meta: &Metadata) -> Decoder {
        let mut problems = Vec::new();
        let mut entries = Vec::with_capacity(meta.events.len());
        let mut by_id = FxHashMap::default();
        let mut by_common_type = FxHashMap::default();
        for (i, ev) in meta.events.iter().enumerate().take(u16::MAX as usize) {
            let i = i as u16;
            for &id in &ev.ids {
                if let Some(prev) = by_id.insert(id, i) {
                    if prev != i {
                        problems.push(DecoderProblem::Identification(format!(
                            "sample id {id} belongs to both `{}` and `{}`",
                            meta.events[prev as usize].name, ev.name
                        )));
                    }
                }
            }
            by_common_type.insert(ev.tracefs_id, i);
            let sample_type_ok = match check_sample_type(ev.sample_type) {
                Ok(()) => true,
                Err(source) => {
                    problems.push(DecoderProblem::SampleType {
                        event: ev.name.clone(),
                        source,
                    });
                    false
                }
            };
            let mut entry = Entry {
                name: ev.name.clone(),
                sample_type: ev.sample_type,
                sample_type_ok,
                layout: SampleLayout::new(ev.sample_type),
                build: None,
                fields: Vec::new(),
                common_pid: None,
            };
            let spec = SPECS.iter().find(|s| s.name == ev.name);
            match EventFormat::parse(&ev.format) {
                Ok(fmt) => {
                    entry.common_pid = fmt.field("common_pid").ok().filter(|f| f.is_integer());
                    if let Some(spec) = spec {
                        match resolve(spec, &fmt, &ev.name) {
                            Ok(fields) => {
                                entry.build = Some(spec.build);
                                entry.fields = fields;
                            }
                            Err(e) => problems.push(e.into()),
                        }
                    }
                }
                Err(source) => {
                    // Formats of events we do not type are only needed for common_pid.
                    if spec.is_some() || !ev.format.is_empty() {
                        problems.push(DecoderProblem::Format {
                            event: ev.name.clone(),
                            source,
                        });
                    }
                }
            }
            entries.push(entry);
        }
        let all_identifier = !entries.is_empty()
            && entries
                .iter()
                .all(|e| e.sample_type & SAMPLE_IDENTIFIER != 0);
        let id_mode = if all_identifier {
            IdMode::Identifier
        } else if entries.len() == 1 {
            IdMode::Single
        } else if let Some(first) = entries.first() {
            let st = first.sample_type;
            if st & SAMPLE_RAW != 0
                && entries.iter().all(|e| e.sample_type == st)
                && by_common_type.len() == entries.len()
            {
                IdMode::CommonType(st)
            } else {
                problems.push(DecoderProblem::Identification(
                    "events lack PERF_SAMPLE_IDENTIFIER and differ in sample type: samples cannot be attributed to their event".into(),
                ));
                IdMode::None
            }
        } else {
            IdMode::None
        };
        let trailer_types: Vec<u64> = entries
            .iter()
            .map(|e| e.sample_type & TRAILER_BITS)
            .collect();
        let trailer_type = match trailer_types.first() {
            Some(&t) if trailer_types.iter().all(|&x| x == t) => Some(t),
            None => Some(0),
            _ => None,
        };
        let fallback_trailer_type = meta
            .events
            .iter()
            .find(|e| e.flags & EVENT_TASK_RECORDS != 0)
            .or(meta.events.first())
            .map_or(0, |e| e.sample_type);
        Decoder {
            order: header.byte_order,
            entries,
            by_id,
            by_common_type,
            id_mode,
            trailer_type,
            fallback_trailer_type,
            problems,
        }
    }

    /// What limits decoding: formats that do not parse, fields missing from typed events
    /// (those decode as `EventKind::Other`), unsupported sample types.
    pub fn problems(&self) -> &[DecoderProblem] {
        &self.problems
    }

    /// The name (`subsystem:name`) of event `idx` of the trace.
    pub fn event_name(&self, idx: u16) -> Option<&str> {
        self.entries.get(idx as usize).map(|e| e.name.as_str())
    }

    /// Number of events of the trace.
    pub fn event_count(&self) -> usize {
        self.entries.len()
    }

    /// Whether event `idx` decodes to a typed kind (not `Other`).
    pub fn is_typed(&self, idx: u16) -> bool {
        self.entries
            .get(idx as usize)
            .is_some_and(|e| e.build.is_some())
    }

    /// The trace's byte order.
    pub fn byte_order(&self) -> ByteOrder {
        self.order
    }

    /// Decodes every record of a chunk. Never panics; a record that cannot be decoded is
    /// counted in the stats by reason and skipped.
    pub fn decode_chunk(&self, chunk: &Chunk) -> DecodedChunk {
        self.decode_chunk_into(chunk, Vec::new())
    }

    /// [`Decoder::decode_chunk`] into `events` (cleared first), so a caller decoding many
    /// chunks can reuse its vectors.
    pub fn decode_chunk_into(&self, chunk: &Chunk, mut events: Vec<Event>) -> DecodedChunk {
        let mut stats = DecodeStats {
            per_event: vec![0; self.entries.len()],
            ..Default::default()
        };
        let need = (chunk.header.records as usize).min(1 << 20);
        if events.capacity() < need {
            // A fresh vector: growing this one would copy its stale contents.
            events = Vec::with_capacity(need);
        } else {
            events.clear();
        }
        let cpu = chunk.header.cpu;
        let mut last_time = chunk.header.first_ts;
        let mut recent = RecentStacks {
            last: vec![None; self.entries.len()],
        };
        for r in chunk.records(self.order) {
            let rec = match r {
                Ok(rec) => rec,
                Err(_) => {
                    stats.error(SkipReason::Framing);
                    break;
                }
            };
            stats.records += 1;
            let res = match rec.kind {
                RECORD_SAMPLE => self.sample(
                    &rec,
                    cpu,
                    &mut last_time,
                    &mut stats,
                    &mut recent,
                    &mut events,
                ),
                RECORD_COMM | RECORD_EXIT | RECORD_FORK | RECORD_LOST | RECORD_LOST_SAMPLES => self
                    .task(&rec, cpu, &mut last_time, &mut stats)
                    .map(|ev| events.push(ev)),
                _ => {
                    stats.other_records += 1;
                    continue;
                }
            };
            if let Err(reason) = res {
                stats.error(reason);
            }
        }
        DecodedChunk { events, stats }
    }

    #[inline]
    fn identify(&self, body: &[u8]) -> Result<u16, SkipReason> {
        match self.id_mode {
            IdMode::Identifier => {
                let b: [u8; 8] = body
                    .get(..8)
                    .and_then(|s| s.try_into().ok())
                    .ok_or(SkipReason::Truncated)?;
                let id = self.order.u64(b);
                self.by_id
                    .get(&id)
                    .copied()
                    .ok_or(SkipReason::UnknownIdentifier)
            }
            IdMode::Single => Ok(0),
            IdMode::CommonType(st) => {
                let s = parse_sample(body, st, self.order).map_err(SkipReason::of_record)?;
                let raw = s.raw.unwrap_or_default();
                let t = raw.get(..2).ok_or(SkipReason::FieldOutOfBounds)?;
                let ty = self.order.u16([t[0], t[1]]) as u32;
                self.by_common_type
                    .get(&ty)
                    .copied()
                    .ok_or(SkipReason::UnknownIdentifier)
            }
            IdMode::None => Err(SkipReason::Unidentified),
        }
    }

    /// Decodes a SAMPLE record and appends its event to `events` (nothing on error).
    #[inline]
    fn sample<'a>(
        &self,
        rec: &RawRecord<'a>,
        cpu: u32,
        last_time: &mut u64,
        stats: &mut DecodeStats,
        recent: &mut RecentStacks<'a>,
        events: &mut Vec<Event>,
    ) -> Result<(), SkipReason> {
        let body = rec.body();
        let idx = self.identify(body)?;
        let e = &self.entries[idx as usize];
        if !e.sample_type_ok {
            return Err(SkipReason::UnsupportedSampleType);
        }
        let s = match e.layout.and_then(|l| l.parse(body, self.order)) {
            Some(s) => s,
            // The whole walk, which says why (a truncated or damaged record).
            None => parse_sample(body, e.sample_type, self.order)
                .map_err(SkipReason::of_record)?
                .into(),
        };
        let (pid, tid) = match s.pid_tid {
            Some(p) => p,
            None => {
                let p = match (e.common_pid, s.raw) {
                    (Some(f), Some(raw)) => f.u64(raw, self.order).unwrap_or(0) as u32,
                    _ => 0,
                };
                (p, p)
            }
        };
        let time = s.time.unwrap_or(*last_time);
        events.push(Event {
            time,
            cpu,
            pid,
            tid,
            kind: EventKind::Other { event: idx },
            stack: None,
        });
        let Some(ev) = events.last_mut() else {
            return Ok(()); // Unreachable: the event was just pushed.
        };
        if let (Some(build), Some(raw)) = (e.build, s.raw) {
            let r = R {
                f: &e.fields,
                raw,
                o: self.order,
            };
            if build(&r, &mut ev.kind).is_err() {
                events.pop();
                return Err(SkipReason::FieldOutOfBounds);
            }
        }
        *last_time = time;
        stats.per_event[idx as usize] += 1;
        ev.stack = s.callchain.map(|c| recent.stack(idx, c));
        Ok(())
    }

    fn trailer_type_of(&self, rec: &RawRecord<'_>) -> u64 {
        if let Some(t) = self.trailer_type {
            return t;
        }
        // Trailers differ between events: the IDENTIFIER (always last) tells whose it is.
        let b = rec.bytes;
        if let IdMode::Identifier = self.id_mode {
            if let Some(s) = b.len().checked_sub(8).and_then(|o| b.get(o..)) {
                let id = self
                    .order
                    .u64([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]);
                if let Some(&i) = self.by_id.get(&id) {
                    return self.entries[i as usize].sample_type;
                }
            }
        }
        self.fallback_trailer_type
    }

    fn task(
        &self,
        rec: &RawRecord<'_>,
        cpu: u32,
        last_time: &mut u64,
        stats: &mut DecodeStats,
    ) -> Result<Event, SkipReason> {
        let st = self.trailer_type_of(rec);
        let Some((r, sid)) =
            parse_task_record(rec, st, self.order).map_err(SkipReason::of_record)?
        else {
            return Err(SkipReason::Truncated);
        };
        let (mut pid, mut tid) = sid.pid_tid.unwrap_or((0, 0));
        let mut time = sid.time;
        let kind = match r {
            TaskRecord::Comm {
                pid: p,
                tid: t,
                comm,
                exec,
            } => {
                stats.comm += 1;
                (pid, tid) = (p, t);
                EventKind::Comm {
                    pid: p,
                    tid: t,
                    comm: String::from_utf8_lossy(comm).into_owned(),
                    exec,
                }
            }
            TaskRecord::Fork {
                pid: p,
                ppid,
                tid: t,
                ptid,
                time: tm,
            } => {
                stats.fork += 1;
                (pid, tid) = (p, t);
                time = time.or(Some(tm));
                EventKind::Fork {
                    pid: p,
                    ppid,
                    tid: t,
                    ptid,
                }
            }
            TaskRecord::Exit {
                pid: p,
                ppid,
                tid: t,
                ptid,
                time: tm,
            } => {
                stats.exit += 1;
                (pid, tid) = (p, t);
                time = time.or(Some(tm));
                EventKind::Exit {
                    pid: p,
                    ppid,
                    tid: t,
                    ptid,
                }
            }
            TaskRecord::Lost { lost, .. } | TaskRecord::LostSamples { lost } => {
                stats.lost_records += 1;
                stats.lost += lost;
                EventKind::Lost { lost }
            }
        };
        let time = match time {
            Some(t) => {
                *last_time = t;
                t
            }
            None => *last_time,
        };
        Ok(Event {
            time,
            cpu,
            pid,
            tid,
            kind,
            stack: None,
        })
    }
}

/// A callchain as recorded, and its stack.
type Recorded<'a> = (&'a [u8], Arc<[u64]>);

/// The stack of the last sample of each event in a chunk, with its callchain as recorded.
struct RecentStacks<'a> {
    last: Vec<Option<Recorded<'a>>>,
}

impl<'a> RecentStacks<'a> {
    /// The stack of `c`, a callchain of event `idx`: the last one of that event when the
    /// recorded entries are the same (a task repeating an action repeats its stack, and
    /// comparing them costs less than the hash lookup of [`shared_stack`]).
    fn stack(&mut self, idx: u16, c: crate::record::Callchain<'a>) -> Arc<[u64]> {
        let Some(slot) = self.last.get_mut(idx as usize) else {
            return shared_stack(c);
        };
        if let Some((b, a)) = slot {
            if *b == c.recorded() {
                return a.clone();
            }
        }
        let a = shared_stack(c);
        *slot = Some((c.recorded(), a.clone()));
        a
    }
}

/// Most distinct stacks a decoding thread keeps to share (then it starts over).
const SHARED_STACKS_MAX: usize = 1 << 14;

/// The stacks a thread decoded lately, by their callchain as recorded (in one byte order).
type StackCache = (Option<ByteOrder>, FxHashMap<Box<[u8]>, Arc<[u64]>>);

thread_local! {
    static STACKS: RefCell<StackCache> = RefCell::new((None, FxHashMap::default()));
}

/// The kernel stack of `c`, shared with the earlier events of this thread that had the same
/// one: most events of a trace carry one of a few thousand stacks, and one allocation per
/// stack instead of per event spares the decoder an allocation and the consumer a free and
/// a comparison ([`Arc::ptr_eq`]) per event.
fn shared_stack(c: crate::record::Callchain<'_>) -> Arc<[u64]> {
    STACKS.with(|cell| {
        let Ok(mut st) = cell.try_borrow_mut() else {
            return Arc::from(c.kernel());
        };
        let (order, map) = &mut *st;
        // Equal records are equal stacks: found without converting the entries.
        if *order != Some(c.order()) {
            map.clear();
            *order = Some(c.order());
        }
        if let Some(a) = map.get(c.recorded()) {
            return a.clone();
        }
        if map.len() >= SHARED_STACKS_MAX {
            map.clear();
        }
        let a: Arc<[u64]> = Arc::from(c.kernel());
        map.insert(c.recorded().into(), a.clone());
        a
    })
}
