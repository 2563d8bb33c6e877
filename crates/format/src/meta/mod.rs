//! The trace header and the metadata sections, one module per table, each type with its
//! codec: `header` (the HEADER block, `ByteOrder`), `events` (EVENTS), `host` (block
//! devices, mounts, tasks, cgroups), `ksyms` (kernel symbols), `layers` (loop devices and
//! dm targets), `files` (FILES and FILE_INDEX), `ustacks` (user maps, user symbols, perf
//! maps), `btrfs` (the btrfs filesystems and their chunk maps). Here: the `Metadata` container, and the two small payloads of no table of their
//! own, CAPTURE_INFO and FLUSHED.
//!
//! All of these are ioblame's own structures and are always encoded little-endian; see
//! `docs/format.md` for the byte layout.
// The decoding half serves the reader (feature `reader`); the recorder builds the format
// without it and only encodes.
#![cfg_attr(not(feature = "reader"), allow(dead_code))]

mod btrfs;
mod events;
mod files;
mod header;
mod host;
mod ksyms;
mod layers;
mod ustacks;

pub use btrfs::{
    merge_btrfs, BtrfsChunk, BtrfsDevice, BtrfsFs, BtrfsStripe, BTRFS_CHUNK_DATA, BTRFS_CHUNK_DUP,
    BTRFS_CHUNK_METADATA, BTRFS_CHUNK_RAID0, BTRFS_CHUNK_RAID1, BTRFS_CHUNK_RAID10,
    BTRFS_CHUNK_RAID1C3, BTRFS_CHUNK_RAID1C4, BTRFS_CHUNK_RAID5, BTRFS_CHUNK_RAID6,
    BTRFS_CHUNK_SYSTEM, MAX_BTRFS_CHUNKS, MAX_BTRFS_FS,
};
pub use events::{EventDesc, EVENT_CALLCHAIN, EVENT_STACK_SAMPLE, EVENT_TASK_RECORDS};
pub use files::{
    FileEntry, FileTable, Unnamed, UnnamedFile, FILES_AT_END, FILES_CAPPED, FILES_TIMED_OUT,
    FILES_TOUCHED, MAX_FILES_TABLE,
};
pub use header::{ByteOrder, Header};
pub use host::{kernel_dev, user_dev, BlockDevice, Cgroup, Mount, Task};
pub use ksyms::{Kallsyms, MAX_KALLSYMS};
pub use layers::{merge_dm_targets, merge_loops, DmTarget, LoopDevice};
pub use ustacks::{
    build_id_hex, ElfLoad, ElfSection, PerfMap, UserMap, UserSymbols, MAX_BUILD_ID, MAX_PERF_MAP,
    MAX_PERF_MAPS_TOTAL, MAX_USER_MAPS, MAX_USER_SYMBOLS_TOTAL, UNWIND_SECTIONS,
};

// The encoders, for the writer.
pub(crate) use btrfs::encode_btrfs;
pub(crate) use events::encode_events;
pub(crate) use files::encode_file_index;
pub(crate) use host::{encode_block_devices, encode_cgroups, encode_mounts, encode_tasks};
pub(crate) use ksyms::encode_kallsyms_parts;
pub(crate) use layers::{encode_dm_targets, encode_loops};
pub(crate) use ustacks::{encode_perf_map, encode_user_maps, encode_user_symbols};

// The decoders, for the reader.
#[cfg(feature = "reader")]
pub(crate) use btrfs::decode_btrfs;
#[cfg(feature = "reader")]
pub(crate) use events::decode_events;
#[cfg(feature = "reader")]
pub(crate) use files::{
    decode_file_group, decode_file_index, decode_files, FileIndex, FileIndexEntry,
};
#[cfg(feature = "reader")]
pub(crate) use host::{decode_block_devices, decode_cgroups, decode_mounts, decode_tasks};
#[cfg(feature = "reader")]
pub(crate) use ksyms::{decode_kallsyms, decode_kallsyms_parts};
#[cfg(feature = "reader")]
pub(crate) use layers::{decode_dm_targets, decode_loops};
#[cfg(feature = "reader")]
pub(crate) use ustacks::{decode_perf_map, decode_user_maps, decode_user_symbols};

use crate::codec::{Dec, Enc, INITIAL_CAPACITY};
use crate::error::DecodeError;

/// Everything a trace says about its recording besides the records themselves.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Metadata {
    /// The recorded events.
    pub events: Vec<EventDesc>,
    /// Kernel symbols, if the recorder could read them.
    pub kallsyms: Option<Kallsyms>,
    /// Block devices.
    pub block_devices: Vec<BlockDevice>,
    /// Mounts.
    pub mounts: Vec<Mount>,
    /// Tasks alive at start.
    pub tasks: Vec<Task>,
    /// Free-form facts about the capture (`key`, `value`): command line, device filter, ...
    pub capture_info: Vec<(String, String)>,
    /// The cgroup2 hierarchy's cgroups (id -> path), format 1.3; empty when not recorded.
    pub cgroups: Vec<Cgroup>,
    /// The loop devices over files and where their sectors go (LOOPS block, format 1.7):
    /// every mapping the recorder saw, those set up while recording with the time they were
    /// found; empty when there was none (or before 1.7).
    pub loops: Vec<LoopDevice>,
    /// The device-mapper targets that map their sectors one to one onto a lower device
    /// (`linear`, `crypt`; DM_TARGETS block, format 1.7): empty when there was none.
    pub dm_targets: Vec<DmTarget>,
    /// The executable mappings of the processes whose user stacks were recorded, read by the
    /// recorder (USER_MAPS block, format 1.8; `record --user-stacks`): empty otherwise.
    /// Mappings made while recording are in the records (`PERF_RECORD_MMAP2`).
    pub user_maps: Vec<UserMap>,
    /// The btrfs filesystems with their devices and chunk maps (BTRFS block, format 1.9):
    /// empty when there was none (or before 1.9). Chunks allocated while recording are in a
    /// later list, with the time they were found.
    pub btrfs: Vec<BtrfsFs>,
}

impl Metadata {
    /// Looks up a capture-info value by key.
    pub fn info(&self, key: &str) -> Option<&str> {
        self.capture_info
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

pub(crate) fn encode_info(v: &[(String, String)]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(v.len() as u32);
    for (k, val) in v {
        e.str(k).str(val);
    }
    e.buf
}

pub(crate) fn decode_info(b: &[u8]) -> Result<Vec<(String, String)>, DecodeError> {
    let mut d = Dec::new(b);
    let n = d.count(8, "info count")?;
    let mut v = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    for _ in 0..n {
        v.push((d.str("key")?, d.str("value")?));
    }
    Ok(v)
}

/// A FLUSHED payload (format 1.6): the time below which every record is written.
pub(crate) fn encode_flushed(time_ns: u64) -> Vec<u8> {
    let mut e = Enc::default();
    e.u64(time_ns);
    e.buf
}

/// Decodes a FLUSHED payload. Bytes after the time belong to newer minor versions: ignored.
pub(crate) fn decode_flushed(b: &[u8]) -> Result<u64, DecodeError> {
    Dec::new(b).u64("flushed time")
}

#[cfg(all(test, feature = "reader"))]
mod tests {
    use super::*;

    #[test]
    fn capture_info_round_trips_and_is_looked_up_by_key() {
        let info = vec![
            ("command".to_string(), "ioblame-capture -o t".to_string()),
            ("devices".to_string(), String::new()),
        ];
        assert_eq!(decode_info(&encode_info(&info)).unwrap(), info);
        let m = Metadata {
            capture_info: info,
            ..Default::default()
        };
        assert_eq!(m.info("command"), Some("ioblame-capture -o t"));
        assert_eq!(m.info("devices"), Some(""));
        assert_eq!(m.info("nothing"), None);
    }

    #[test]
    fn flushed_ignores_trailing_bytes() {
        let mut b = encode_flushed(123_456);
        assert_eq!(decode_flushed(&b).unwrap(), 123_456);
        b.push(1);
        assert_eq!(decode_flushed(&b).unwrap(), 123_456);
        assert!(decode_flushed(&b[..7]).is_err());
    }
}
