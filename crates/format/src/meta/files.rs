//! The paths of the recording host's files: the FILES table (formats 1.1 to 1.4, one zstd
//! frame) and the FILE_INDEX table (format 1.5: sorted entries in groups compressed apart,
//! behind an index of the groups' first keys, so that a lookup decompresses one group). The
//! lookups over a trace's tables are in `reader/paths.rs`.

use crate::codec::{zstd_frame, Dec, Enc, INITIAL_CAPACITY, MAX_METADATA_RATIO};
use crate::error::DecodeError;

/// One file of the recording host: which inode of which filesystem had which path.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileEntry {
    /// The filesystem's device in the kernel encoding (`major << 20 | minor`), as in the
    /// `dev`/`s_dev` fields of tracepoint payloads.
    pub dev: u32,
    /// Inode number.
    pub ino: u64,
    /// Absolute path on the recording host (non-UTF-8 bytes replaced by U+FFFD).
    pub path: String,
}

/// `FileTable::flags` bit: the walk stopped at its entry cap; other files exist.
pub const FILES_CAPPED: u32 = 1;
/// `FileTable::flags` bit: the walk stopped at its time budget; other files exist.
pub const FILES_TIMED_OUT: u32 = 2;
/// `FileTable::flags` bit: the table was taken when the capture ended (else when it started).
pub const FILES_AT_END: u32 = 4;

/// Cap on the uncompressed size of a FILES table.
pub const MAX_FILES_TABLE: usize = 256 << 20;

/// `FileTable::flags` bit: the table names the inodes the trace's events refer to (found by
/// file handle, or by a walk that stopped once it had found them), not every file of the
/// recorded filesystems (format 1.5).
pub const FILES_TOUCHED: u32 = 8;

/// Why a file the trace refers to has no path in a FILE_INDEX table (format 1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Unnamed {
    /// The inode no longer existed when the recorder looked it up: the file was deleted
    /// before it could be named.
    Deleted = 1,
    /// The recorder could not look it up by file handle (the filesystem takes none, or the
    /// recorder lacked the capability) and its walk did not find it within its budget.
    NotFound = 2,
    /// The inode exists but has no path the recorder could see (a filesystem's own inode,
    /// such as ext4's journal; or outside the mounts visible to the recorder).
    NoPath = 3,
    /// The inode number is held by several subvolumes of a btrfs filesystem the recorder sees
    /// mounted, and the events name the filesystem, not the subvolume: which file it is cannot
    /// be told (format 1.9; older readers show the inode unnamed for no known reason).
    Ambiguous = 4,
}

impl Unnamed {
    /// The value stored in a table entry's state byte.
    pub fn code(self) -> u8 {
        self as u8
    }
    /// The reason of a state byte; `None` for 0 (named) and unknown values.
    pub fn from_code(c: u8) -> Option<Unnamed> {
        match c {
            1 => Some(Unnamed::Deleted),
            2 => Some(Unnamed::NotFound),
            3 => Some(Unnamed::NoPath),
            4 => Some(Unnamed::Ambiguous),
            _ => None,
        }
    }
    /// What it means, for the outputs.
    pub fn describe(self) -> &'static str {
        match self {
            Unnamed::Deleted => "deleted before the recorder could name it",
            Unnamed::NotFound => "not found by the recorder (no file handles, walk cut short)",
            Unnamed::NoPath => {
                "no path (a filesystem's own inode, such as ext4's journal, or outside the recorder's mounts)"
            }
            Unnamed::Ambiguous => {
                "ambiguous (an inode number several mounted btrfs subvolumes hold: the events do not say which)"
            }
        }
    }
}

/// A file the trace refers to that the recorder could not name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnnamedFile {
    /// The filesystem's device (kernel encoding).
    pub dev: u32,
    /// Inode number.
    pub ino: u64,
    /// Why it has no path.
    pub why: Unnamed,
}

/// A FILES section: paths of the inodes of the recorded filesystems (format 1.1), written as a
/// FILE_INDEX block since format 1.5.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileTable {
    /// `FILES_*` flags.
    pub flags: u32,
    /// The files, in any order.
    pub entries: Vec<FileEntry>,
    /// Files the trace refers to that have no path, with the reason (format 1.5).
    pub unnamed: Vec<UnnamedFile>,
}

/// Smallest encoded entry: dev, ino and an empty path.
const FILE_ENTRY_MIN: usize = 16;

/// Entries per group of a FILE_INDEX table: a lookup decompresses one group, a few tens of
/// kilobytes of paths.
const GROUP_ENTRIES: usize = 512;
/// Bytes of a group's index entry: first dev u32, first inode u64, entries u32, raw length
/// u32, compressed length u32.
const GROUP_INDEX_LEN: usize = 24;
/// Smallest encoded FILE_INDEX entry: dev, inode, state and an empty path.
const INDEX_ENTRY_MIN: usize = 17;

/// Encodes a FILE_INDEX payload (format 1.5): the entries and the unnamed files sorted by
/// (dev, inode), one per inode (a named entry wins over an unnamed one, the first of equals
/// over the others), in groups of [`GROUP_ENTRIES`] compressed apart, behind an index of the
/// groups' first keys. See docs/format.md.
pub(crate) fn encode_file_index(t: &FileTable) -> Vec<u8> {
    let mut all: Vec<(u32, u64, u8, &str)> = t
        .entries
        .iter()
        .map(|e| (e.dev, e.ino, 0u8, e.path.as_str()))
        .chain(t.unnamed.iter().map(|u| (u.dev, u.ino, u.why.code(), "")))
        .collect();
    // Stable: among entries of one inode the named ones (listed first) and then the first
    // listed come first, and only the first is kept.
    all.sort_by_key(|&(d, i, _, _)| (d, i));
    all.dedup_by_key(|&mut (d, i, _, _)| (d, i));
    let named = all.iter().filter(|e| e.2 == 0).count();
    let mut index = Enc::default();
    let mut frames = Enc::default();
    let groups = all.chunks(GROUP_ENTRIES);
    let ngroups = groups.len();
    for g in groups {
        let mut raw = Enc::default();
        for &(dev, ino, state, path) in g {
            raw.u32(dev).u64(ino).u8(state).str(path);
        }
        let z = zstd::bulk::compress(&raw.buf, 3).unwrap_or_default();
        index
            .u32(g[0].0)
            .u64(g[0].1)
            .u32(g.len() as u32)
            .u32(raw.buf.len() as u32)
            .u32(z.len() as u32);
        frames.bytes(&z);
    }
    let mut e = Enc::default();
    e.u32(t.flags)
        .u32(named as u32)
        .u32((all.len() - named) as u32)
        .u32(ngroups as u32)
        .bytes(&index.buf)
        .bytes(&frames.buf);
    e.buf
}

/// A decoded FILE_INDEX entry: dev, inode, state (0: named, else an [`Unnamed`] code), path.
pub(crate) type FileIndexEntry = (u32, u64, u8, Box<str>);

/// One group of a FILE_INDEX table, as its index describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileGroup {
    /// The (dev, inode) of its first entry.
    pub first: (u32, u64),
    /// Entries in it.
    pub entries: u32,
    /// Uncompressed length.
    pub raw_len: u32,
    /// Where its zstd frame starts in the payload, and its length.
    pub at: usize,
    pub len: usize,
}

/// A FILE_INDEX payload's header and group index, decoded without decompressing a group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FileIndex {
    pub flags: u32,
    pub named: u32,
    pub unnamed: u32,
    pub groups: Vec<FileGroup>,
}

impl FileIndex {
    /// The group that would hold `key`: the last whose first key is at most `key`.
    pub fn group_of(&self, key: (u32, u64)) -> Option<usize> {
        let n = self.groups.partition_point(|g| g.first <= key);
        n.checked_sub(1)
    }
}

/// Decodes a FILE_INDEX payload's header and group index; checks that the groups are sorted,
/// that their frames lie in the payload and that their counts add up.
pub(crate) fn decode_file_index(b: &[u8]) -> Result<FileIndex, DecodeError> {
    let mut d = Dec::new(b);
    let flags = d.u32("files flags")?;
    let named = d.u32("named files")?;
    let unnamed = d.u32("unnamed files")?;
    let n = d.count(GROUP_INDEX_LEN, "file group count")?;
    let mut groups: Vec<FileGroup> = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    let mut total = 0u64;
    for _ in 0..n {
        let first = (d.u32("group dev")?, d.u64("group inode")?);
        let entries = d.u32("group entries")?;
        let raw_len = d.u32("group length")?;
        let len = d.u32("group compressed length")? as usize;
        if entries == 0 || (entries as usize).saturating_mul(INDEX_ENTRY_MIN) > raw_len as usize {
            return Err(DecodeError::new(
                d.pos(),
                format!("a group of {entries} files cannot hold {raw_len} bytes"),
            ));
        }
        if groups.last().is_some_and(|g| g.first >= first) {
            return Err(DecodeError::new(
                d.pos(),
                "file groups out of order".to_string(),
            ));
        }
        total += entries as u64;
        groups.push(FileGroup {
            first,
            entries,
            raw_len,
            at: 0,
            len,
        });
    }
    if total != named as u64 + unnamed as u64 {
        return Err(DecodeError::new(
            d.pos(),
            format!(
                "the groups hold {total} files, the table says {}",
                named as u64 + unnamed as u64
            ),
        ));
    }
    let mut at = d.pos();
    for g in &mut groups {
        g.at = at;
        at = at
            .checked_add(g.len)
            .filter(|&e| e <= b.len())
            .ok_or_else(|| DecodeError::new(at, "a file group runs past the block".to_string()))?;
    }
    Ok(FileIndex {
        flags,
        named,
        unnamed,
        groups,
    })
}

/// Decompresses and decodes one group of a FILE_INDEX payload `b`: its entries as (dev,
/// inode, state, path), sorted; an error if they are not, or do not fill the group.
pub(crate) fn decode_file_group(
    b: &[u8],
    g: &FileGroup,
) -> Result<Vec<FileIndexEntry>, DecodeError> {
    let z = b
        .get(g.at..g.at + g.len)
        .ok_or_else(|| DecodeError::new(g.at, "file group out of the block".to_string()))?;
    let raw = zstd_frame(
        z,
        g.raw_len as usize,
        MAX_FILES_TABLE,
        Some(MAX_METADATA_RATIO),
    )
    .map_err(|e| DecodeError::new(g.at, format!("file group: {e}")))?;
    let mut d = Dec::new(&raw);
    let inner = |e: DecodeError| {
        DecodeError::new(
            g.at,
            format!("file group, at byte {} of the group: {}", e.at, e.what),
        )
    };
    let mut v: Vec<FileIndexEntry> = Vec::with_capacity((g.entries as usize).min(GROUP_ENTRIES));
    for _ in 0..g.entries {
        let dev = d.u32("file dev").map_err(inner)?;
        let ino = d.u64("file inode").map_err(inner)?;
        let state = d.u8("file state").map_err(inner)?;
        let path = d.str("file path").map_err(inner)?;
        if v.last().is_some_and(|l| (l.0, l.1) >= (dev, ino))
            || (v.is_empty() && (dev, ino) != g.first)
        {
            return Err(DecodeError::new(
                g.at,
                "file group out of order".to_string(),
            ));
        }
        v.push((dev, ino, state, path.into()));
    }
    if d.remaining() != 0 {
        return Err(DecodeError::new(
            g.at,
            format!("{} bytes after the file group's entries", d.remaining()),
        ));
    }
    Ok(v)
}

/// Decodes a FILES payload, calling `f(dev, ino, path)` for each entry; returns the flags.
pub(crate) fn decode_files(
    b: &[u8],
    mut f: impl FnMut(u32, u64, &str),
) -> Result<u32, DecodeError> {
    let mut d = Dec::new(b);
    let flags = d.u32("files flags")?;
    let n = d.u32("file count")? as usize;
    let len = d.u32("file table length")? as usize;
    if n.saturating_mul(FILE_ENTRY_MIN) > len {
        return Err(DecodeError::new(
            4,
            format!("{n} files cannot fit in a table of {len} bytes"),
        ));
    }
    let z = d.take(d.remaining(), "file table")?;
    let raw = zstd_frame(z, len, MAX_FILES_TABLE, Some(MAX_METADATA_RATIO))
        .map_err(|e| DecodeError::new(8, format!("file table: {e}")))?;
    let mut d = Dec::new(&raw);
    let inner = |e: DecodeError| {
        DecodeError::new(
            12,
            format!("file table, at byte {} of the table: {}", e.at, e.what),
        )
    };
    for _ in 0..n {
        let dev = d.u32("file dev").map_err(inner)?;
        let ino = d.u64("file inode").map_err(inner)?;
        let path = d.str("file path").map_err(inner)?;
        f(dev, ino, &path);
    }
    Ok(flags)
}

#[cfg(all(test, feature = "reader"))]
mod tests {
    use super::*;

    fn table(n: u64) -> FileTable {
        FileTable {
            flags: FILES_TOUCHED,
            // Listed in reverse: the encoder sorts.
            entries: (0..n)
                .rev()
                .map(|i| FileEntry {
                    dev: (7 << 20) | (i % 2) as u32,
                    ino: 100 + i,
                    path: format!("/mnt/f{i}"),
                })
                .collect(),
            unnamed: vec![
                UnnamedFile {
                    dev: 7 << 20,
                    ino: 5,
                    why: Unnamed::Deleted,
                },
                // Named too: the name wins.
                UnnamedFile {
                    dev: 7 << 20,
                    ino: 100,
                    why: Unnamed::NotFound,
                },
            ],
        }
    }

    #[test]
    fn unnamed_codes_round_trip() {
        for w in [
            Unnamed::Deleted,
            Unnamed::NotFound,
            Unnamed::NoPath,
            Unnamed::Ambiguous,
        ] {
            assert_eq!(Unnamed::from_code(w.code()), Some(w));
            assert!(!w.describe().is_empty());
        }
        assert_eq!(Unnamed::Ambiguous.code(), 4);
        assert_eq!(Unnamed::from_code(0), None);
        assert_eq!(Unnamed::from_code(5), None);
    }

    #[test]
    fn file_index_groups_sorted_entries() {
        let b = encode_file_index(&table(3000));
        let ix = decode_file_index(&b).unwrap();
        assert_eq!((ix.flags, ix.named, ix.unnamed), (FILES_TOUCHED, 3000, 1));
        assert_eq!(ix.groups.len(), 3001usize.div_ceil(GROUP_ENTRIES));
        let mut all = Vec::new();
        for g in &ix.groups {
            let v = decode_file_group(&b, g).unwrap();
            assert_eq!((v[0].0, v[0].1), g.first);
            all.extend(v);
        }
        assert_eq!(all.len(), 3001);
        assert!(all.windows(2).all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)));
        assert_eq!(all[0], (7 << 20, 5, Unnamed::Deleted.code(), "".into()));
        let named_100 = all.iter().find(|e| (e.0, e.1) == (7 << 20, 100)).unwrap();
        assert_eq!((named_100.2, &*named_100.3), (0, "/mnt/f0"));
        // The group a key falls in holds it.
        for key in [
            (7 << 20, 5),
            (7 << 20, 2998 + 100),
            ((7 << 20) | 1, 2999 + 100),
        ] {
            let g = ix.group_of(key).unwrap();
            let v = decode_file_group(&b, &ix.groups[g]).unwrap();
            assert!(v.iter().any(|e| (e.0, e.1) == key), "{key:?}");
        }
        assert_eq!(ix.group_of((0, 0)), None);
    }

    #[test]
    fn file_index_damage_is_an_error() {
        let b = encode_file_index(&table(1200));
        // Every cut of the payload fails cleanly (no panic) at the index or at a group.
        for cut in [0, 7, 16, 30, 40, b.len() - 1] {
            let short = &b[..cut];
            if let Ok(ix) = decode_file_index(short) {
                assert!(ix
                    .groups
                    .iter()
                    .any(|g| decode_file_group(short, g).is_err()));
            }
        }
        // Groups listed out of order.
        let mut bad = b.clone();
        let first = 16;
        bad[first + 4..first + 12].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_file_index(&bad).is_err());
        // An empty table.
        let e = encode_file_index(&FileTable::default());
        let ix = decode_file_index(&e).unwrap();
        assert!(ix.groups.is_empty() && ix.group_of((1, 1)).is_none());
    }
}
