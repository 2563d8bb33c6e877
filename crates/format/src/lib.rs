//! The ioblame trace format.
//!
//! A trace is what `ioblame-capture` writes on a production host and `ioblame` reads on
//! another machine: a directory of numbered ring files (or one file), each self-describing
//! (header and metadata repeated), holding raw perf ring records of each CPU in independent
//! zstd chunks. The byte layout is specified in `docs/format.md`.
//!
//! ```
//! use ioblame_format::*;
//! let dir = tempfile::tempdir().unwrap();
//! let header = Header {
//!     byte_order: ByteOrder::native(), word_size: 8, page_size: 4096, cpu_count: 1,
//!     clock_id: 1, recorder_pid: 1, file_index: 0, start_time_ns: 0, start_clock_ns: 0,
//!     trace_id: 7, hostname: "h".into(), kernel_release: "6.18".into(),
//!     machine: "x86_64".into(), recorder_version: "test".into(),
//! };
//! let mut w = RingWriter::create(dir.path(), header, Metadata::default(), RingOptions::default()).unwrap();
//! let mut b = ChunkBuilder::new(0);
//! let mut rec = vec![0u8; 16];
//! rec[..4].copy_from_slice(&9u32.to_ne_bytes());
//! rec[6..8].copy_from_slice(&16u16.to_ne_bytes());
//! b.push(&rec, Some(1));
//! w.write_chunk(&b.finish(3).unwrap()).unwrap();
//! w.finish().unwrap();
//!
//! let t = Trace::open(dir.path()).unwrap();
//! assert!(t.problems().is_empty());
//! let c = t.decompress(&t.chunks()[0]).unwrap();
//! assert_eq!(c.records(t.header().byte_order).count(), 1);
//! ```
#![deny(missing_docs)]

pub mod block;
mod chunk;
mod codec;
mod error;
mod meta;
#[cfg(feature = "reader")]
mod reader;
mod writer;

pub use chunk::{
    encode_chunk, ChunkBuilder, ChunkEncoder, ChunkHeader, EncodedChunk, RawRecord, RecordIter,
    CHUNK_HEADER_LEN, CHUNK_RING_DISCARDED, MAX_CHUNK_UNCOMPRESSED, PERF_HEADER_LEN,
};
pub use codec::{MAX_METADATA_RATIO, MAX_STRING};
pub use error::{DecodeError, Error, Result};
pub use meta::{
    build_id_hex, kernel_dev, merge_btrfs, merge_dm_targets, merge_loops, user_dev, BlockDevice,
    BtrfsChunk, BtrfsDevice, BtrfsFs, BtrfsStripe, ByteOrder, Cgroup, DmTarget, ElfLoad,
    ElfSection, EventDesc, FileEntry, FileTable, Header, Kallsyms, LoopDevice, Metadata, Mount,
    PerfMap, Task, Unnamed, UnnamedFile, UserMap, UserSymbols, BTRFS_CHUNK_DATA, BTRFS_CHUNK_DUP,
    BTRFS_CHUNK_METADATA, BTRFS_CHUNK_RAID0, BTRFS_CHUNK_RAID1, BTRFS_CHUNK_RAID10,
    BTRFS_CHUNK_RAID1C3, BTRFS_CHUNK_RAID1C4, BTRFS_CHUNK_RAID5, BTRFS_CHUNK_RAID6,
    BTRFS_CHUNK_SYSTEM, EVENT_CALLCHAIN, EVENT_STACK_SAMPLE, EVENT_TASK_RECORDS, FILES_AT_END,
    FILES_CAPPED, FILES_TIMED_OUT, FILES_TOUCHED, MAX_BTRFS_CHUNKS, MAX_BTRFS_FS, MAX_BUILD_ID,
    MAX_FILES_TABLE, MAX_KALLSYMS, MAX_PERF_MAP, MAX_PERF_MAPS_TOTAL, MAX_USER_MAPS,
    MAX_USER_SYMBOLS_TOTAL, UNWIND_SECTIONS,
};
#[cfg(feature = "reader")]
pub use reader::{Chunk, ChunkRef, FileName, PathTable, PathsSummary, Problem, Trace, TraceFile};
pub use writer::{
    ring_file_name, FileWriter, IndexEntry, RingOptions, RingStats, RingWriter, INDEX_ENTRY_LEN,
};
