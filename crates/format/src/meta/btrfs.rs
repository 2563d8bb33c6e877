//! The btrfs filesystems of the recording host (BTRFS block, format 1.9): what turns btrfs's
//! logical addresses into device sectors (its chunk map), the block devices each filesystem
//! spans, and the names its events give it (the superblock's anonymous device, the bdi).

use crate::codec::{Dec, Enc, INITIAL_CAPACITY};
use crate::error::DecodeError;

/// A chunk holds data (`BTRFS_BLOCK_GROUP_DATA`).
pub const BTRFS_CHUNK_DATA: u64 = 1 << 0;
/// A chunk holds the chunk tree (`BTRFS_BLOCK_GROUP_SYSTEM`).
pub const BTRFS_CHUNK_SYSTEM: u64 = 1 << 1;
/// A chunk holds tree blocks (`BTRFS_BLOCK_GROUP_METADATA`).
pub const BTRFS_CHUNK_METADATA: u64 = 1 << 2;
/// Striped over its stripes (`BTRFS_BLOCK_GROUP_RAID0`).
pub const BTRFS_CHUNK_RAID0: u64 = 1 << 3;
/// Mirrored on two devices (`BTRFS_BLOCK_GROUP_RAID1`).
pub const BTRFS_CHUNK_RAID1: u64 = 1 << 4;
/// Two copies on one device (`BTRFS_BLOCK_GROUP_DUP`).
pub const BTRFS_CHUNK_DUP: u64 = 1 << 5;
/// Striped over mirrored pairs (`BTRFS_BLOCK_GROUP_RAID10`).
pub const BTRFS_CHUNK_RAID10: u64 = 1 << 6;
/// Striped with parity (`BTRFS_BLOCK_GROUP_RAID5`).
pub const BTRFS_CHUNK_RAID5: u64 = 1 << 7;
/// Striped with two parities (`BTRFS_BLOCK_GROUP_RAID6`).
pub const BTRFS_CHUNK_RAID6: u64 = 1 << 8;
/// Mirrored on three devices (`BTRFS_BLOCK_GROUP_RAID1C3`).
pub const BTRFS_CHUNK_RAID1C3: u64 = 1 << 9;
/// Mirrored on four devices (`BTRFS_BLOCK_GROUP_RAID1C4`).
pub const BTRFS_CHUNK_RAID1C4: u64 = 1 << 10;

/// One btrfs filesystem of the recording host (BTRFS block, format 1.9).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BtrfsFs {
    /// The filesystem's UUID (`fsid`, as btrfs's tracepoints carry it).
    pub fsid: [u8; 16],
    /// The superblock's anonymous device, as `/proc/self/mountinfo` shows it and the generic
    /// inode events carry it (`inode->i_sb->s_dev`): major (0).
    pub major: u32,
    /// The same device's minor.
    pub minor: u32,
    /// The filesystem's backing device info name (`btrfs-N`), the `name` of the writeback
    /// events.
    pub bdi: String,
    /// The filesystem's sector size in bytes (its data block).
    pub sector_size: u32,
    /// The size of a tree block in bytes.
    pub node_size: u32,
    /// The block devices it spans.
    pub devices: Vec<BtrfsDevice>,
    /// Its chunks: every chunk the recorder saw, those allocated while recording with the
    /// time they were found.
    pub chunks: Vec<BtrfsChunk>,
}

/// A block device of a btrfs filesystem.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BtrfsDevice {
    /// btrfs's id of the device in the filesystem (`devid`).
    pub devid: u64,
    /// The block device's major number.
    pub major: u32,
    /// The block device's minor number.
    pub minor: u32,
}

/// A chunk: logical bytes `[logical, logical + length)` of the filesystem, stored on its
/// stripes as its profile (`flags`) says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BtrfsChunk {
    /// First logical byte.
    pub logical: u64,
    /// Logical bytes.
    pub length: u64,
    /// `BTRFS_CHUNK_*`: what it holds and its profile (none of the profile bits: single).
    pub flags: u64,
    /// Bytes per stripe before the next stripe (striped profiles).
    pub stripe_len: u64,
    /// Stripes per mirror group of RAID10.
    pub sub_stripes: u16,
    /// Where its stripes are.
    pub stripes: Vec<BtrfsStripe>,
    /// From when the chunk exists (trace clock, ns): 0 when it did before the recording.
    pub since_ns: u64,
}

/// One stripe of a chunk: device bytes from `physical` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct BtrfsStripe {
    /// The device's `devid`.
    pub devid: u64,
    /// Its first byte on the device.
    pub physical: u64,
}

impl BtrfsFs {
    /// The superblock's device in the kernel encoding.
    pub fn kernel_dev(&self) -> u32 {
        super::host::kernel_dev(self.major, self.minor)
    }
}

/// Merges the filesystems of one BTRFS list into `into` (one entry per filesystem, by
/// `fsid`, with every device and chunk either names; devices sorted by id, chunks by
/// logical address then time); returns whether `into` gained a filesystem, a device or a
/// chunk. `Trace::btrfs` merges a ring's files with it, a live follower each newer list.
pub fn merge_btrfs(into: &mut Vec<BtrfsFs>, from: &[BtrfsFs]) -> bool {
    let mut changed = false;
    for fs in from {
        let Some(x) = into.iter_mut().find(|x| x.fsid == fs.fsid) else {
            into.push(fs.clone());
            changed = true;
            continue;
        };
        for d in &fs.devices {
            if !x.devices.contains(d) {
                x.devices.push(d.clone());
                changed = true;
            }
        }
        // By key, not by comparing every pair: a list may hold 2^18 chunks.
        let mut known: std::collections::HashSet<ChunkKey> =
            x.chunks.iter().map(ChunkKey::of).collect();
        for c in &fs.chunks {
            if known.insert(ChunkKey::of(c)) {
                x.chunks.push(c.clone());
                changed = true;
            }
        }
    }
    if changed {
        for fs in into.iter_mut() {
            fs.devices.sort_by_key(|d| d.devid);
            fs.chunks.sort_by_key(|c| (c.logical, c.since_ns));
        }
    }
    changed
}

/// What makes two chunks the same ([`BtrfsChunk::same_chunk`]), hashable.
#[derive(PartialEq, Eq, Hash)]
struct ChunkKey(u64, u64, u64, Vec<(u64, u64)>);

impl ChunkKey {
    fn of(c: &BtrfsChunk) -> ChunkKey {
        ChunkKey(
            c.logical,
            c.length,
            c.flags,
            c.stripes.iter().map(|s| (s.devid, s.physical)).collect(),
        )
    }
}

impl BtrfsChunk {
    /// Whether `other` is the same chunk (the same logical range on the same stripes),
    /// whenever it was found.
    pub fn same_chunk(&self, other: &BtrfsChunk) -> bool {
        (self.logical, self.length, self.flags, &self.stripes)
            == (other.logical, other.length, other.flags, &other.stripes)
    }
}

/// Most filesystems a BTRFS block may hold.
pub const MAX_BTRFS_FS: usize = 1 << 10;
/// Most chunks of one filesystem (1 GiB data chunks: 256 TiB at 1 << 18).
pub const MAX_BTRFS_CHUNKS: usize = 1 << 18;
/// Most stripes of one chunk (the kernel's own limit for RAID0/10/5/6 is the device count).
pub const MAX_BTRFS_STRIPES: usize = 1 << 12;

/// A BTRFS payload (format 1.9): a count, then each filesystem as a length-prefixed entry
/// (so that newer minor versions can add trailing fields to an entry).
pub(crate) fn encode_btrfs(v: &[BtrfsFs]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(v.len() as u32);
    for f in v {
        let mut x = Enc::default();
        x.bytes(&f.fsid)
            .u32(f.major)
            .u32(f.minor)
            .str(&f.bdi)
            .u32(f.sector_size)
            .u32(f.node_size);
        x.u32(f.devices.len() as u32);
        for d in &f.devices {
            x.u64(d.devid).u32(d.major).u32(d.minor);
        }
        x.u32(f.chunks.len() as u32);
        for c in &f.chunks {
            x.u64(c.logical)
                .u64(c.length)
                .u64(c.flags)
                .u64(c.stripe_len)
                .u64(c.since_ns)
                .u32(c.sub_stripes as u32)
                .u32(c.stripes.len() as u32);
            for s in &c.stripes {
                x.u64(s.devid).u64(s.physical);
            }
        }
        e.u32(x.buf.len() as u32).bytes(&x.buf);
    }
    e.buf
}

/// Decodes a BTRFS payload; bytes after the known fields of an entry are skipped.
pub(crate) fn decode_btrfs(b: &[u8]) -> Result<Vec<BtrfsFs>, DecodeError> {
    let mut d = Dec::new(b);
    let n = d.count(4 + 16 + 24, "btrfs filesystem count")?;
    if n > MAX_BTRFS_FS {
        return Err(DecodeError::new(
            0,
            format!("{n} btrfs filesystems: more than {MAX_BTRFS_FS}"),
        ));
    }
    let mut v = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    for _ in 0..n {
        let len = d.u32("btrfs entry length")? as usize;
        let at = d.pos();
        let entry = d.take(len, "btrfs entry")?;
        let rel = |e: DecodeError| DecodeError::new(at + e.at, e.what);
        v.push(decode_fs(entry).map_err(rel)?);
    }
    Ok(v)
}

fn decode_fs(entry: &[u8]) -> Result<BtrfsFs, DecodeError> {
    let mut x = Dec::new(entry);
    let mut f = BtrfsFs::default();
    f.fsid.copy_from_slice(x.take(16, "btrfs fsid")?);
    f.major = x.u32("btrfs major")?;
    f.minor = x.u32("btrfs minor")?;
    f.bdi = x.str("btrfs bdi")?;
    f.sector_size = x.u32("btrfs sector size")?;
    f.node_size = x.u32("btrfs node size")?;
    let nd = x.count(16, "btrfs device count")?;
    for _ in 0..nd {
        f.devices.push(BtrfsDevice {
            devid: x.u64("btrfs devid")?,
            major: x.u32("btrfs device major")?,
            minor: x.u32("btrfs device minor")?,
        });
    }
    let nc = x.count(48, "btrfs chunk count")?;
    if nc > MAX_BTRFS_CHUNKS {
        return Err(DecodeError::new(
            x.pos(),
            format!("{nc} btrfs chunks: more than {MAX_BTRFS_CHUNKS}"),
        ));
    }
    f.chunks.reserve(nc.min(INITIAL_CAPACITY));
    for _ in 0..nc {
        let mut c = BtrfsChunk {
            logical: x.u64("chunk logical")?,
            length: x.u64("chunk length")?,
            flags: x.u64("chunk flags")?,
            stripe_len: x.u64("chunk stripe length")?,
            since_ns: x.u64("chunk since")?,
            ..BtrfsChunk::default()
        };
        let sub = x.u32("chunk sub stripes")?;
        c.sub_stripes = u16::try_from(sub).unwrap_or(u16::MAX);
        let ns = x.count(16, "chunk stripe count")?;
        if ns > MAX_BTRFS_STRIPES {
            return Err(DecodeError::new(
                x.pos(),
                format!("{ns} stripes in a chunk: more than {MAX_BTRFS_STRIPES}"),
            ));
        }
        for _ in 0..ns {
            c.stripes.push(BtrfsStripe {
                devid: x.u64("stripe devid")?,
                physical: x.u64("stripe physical")?,
            });
        }
        f.chunks.push(c);
    }
    Ok(f)
}

#[cfg(all(test, feature = "reader"))]
mod tests {
    use super::*;

    pub(crate) fn sample() -> BtrfsFs {
        BtrfsFs {
            fsid: *b"0123456789abcdef",
            major: 0,
            minor: 40,
            bdi: "btrfs-1".into(),
            sector_size: 4096,
            node_size: 16384,
            devices: vec![BtrfsDevice {
                devid: 1,
                major: 7,
                minor: 0,
            }],
            chunks: vec![
                BtrfsChunk {
                    logical: 13631488,
                    length: 8 << 20,
                    flags: BTRFS_CHUNK_DATA,
                    stripe_len: 65536,
                    sub_stripes: 1,
                    stripes: vec![BtrfsStripe {
                        devid: 1,
                        physical: 13631488,
                    }],
                    since_ns: 0,
                },
                BtrfsChunk {
                    logical: 30408704,
                    length: 256 << 20,
                    flags: BTRFS_CHUNK_METADATA | BTRFS_CHUNK_DUP,
                    stripe_len: 65536,
                    sub_stripes: 1,
                    stripes: vec![
                        BtrfsStripe {
                            devid: 1,
                            physical: 38797312,
                        },
                        BtrfsStripe {
                            devid: 1,
                            physical: 307232768,
                        },
                    ],
                    since_ns: 77,
                },
            ],
        }
    }

    #[test]
    fn round_trips_and_skips_trailing_entry_bytes() {
        let v = vec![sample(), BtrfsFs::default()];
        assert_eq!(decode_btrfs(&encode_btrfs(&v)).unwrap(), v);
        // A newer minor version's trailing field in an entry is skipped.
        let one = encode_btrfs(&v[..1]);
        let mut longer = Vec::new();
        let len = u32::from_le_bytes(one[4..8].try_into().unwrap());
        longer.extend(1u32.to_le_bytes());
        longer.extend((len + 3).to_le_bytes());
        longer.extend(&one[8..]);
        longer.extend([9, 9, 9]);
        assert_eq!(decode_btrfs(&longer).unwrap(), v[..1]);
    }

    #[test]
    fn damage_is_an_error_not_a_panic() {
        let b = encode_btrfs(&[sample()]);
        for cut in 0..b.len() {
            let _ = decode_btrfs(&b[..cut]);
        }
        assert!(decode_btrfs(&b[..b.len() - 1]).is_err());
        let mut huge = b.clone();
        huge[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_btrfs(&huge).is_err());
    }
}
