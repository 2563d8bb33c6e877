//! The inodes the recording refers to: read from the samples as they are drained, from the
//! fields the event registry says name an inode (`Tracepoint::inode_at`), so that the FILES
//! table names those and only those (`--paths touched`, the default).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use ioblame_perfrec::{ByteOrder, SampleLayout, HEADER_LEN, SAMPLE_CALLCHAIN};
use ioblame_tracepoints::InodeAt;

use crate::perf::{RECORD_SAMPLE, SAMPLE_TYPE};

/// The recorder's hasher for the kernel's event ids (small sequential numbers) and (dev,
/// inode) pairs: one multiplication per word. The count of each id is bumped for every
/// record, and this set is looked up for every sample that names an inode: the default
/// SipHash cost more than the rest of the bookkeeping around them.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Fast = BuildHasherDefault<IdHasher>;

/// The records are read where they were written.
const NATIVE: ByteOrder = ByteOrder::native();

/// Where one event id's samples name an inode.
#[derive(Debug, Clone, Copy)]
struct IdInode {
    at: InodeAt,
    /// Where its samples keep the raw payload (after the callchain, when they carry one).
    layout: SampleLayout,
}

/// The (dev, inode) pairs seen in the samples, each reported once.
#[derive(Default)]
pub struct Touched {
    by_id: HashMap<u64, IdInode, Fast>,
    seen: HashSet<(u32, u64), Fast>,
    last: Option<(u32, u64)>,
    /// Pairs seen for the first time since the last [`Touched::take_fresh`].
    fresh: Vec<(u32, u64)>,
    /// Most pairs kept; beyond it new ones are counted, not kept.
    cap: usize,
    /// Distinct pairs not kept because of the cap (counted up to the cap again).
    over: HashSet<(u32, u64), Fast>,
    /// The filesystems whose inodes are kept (the recorded ones; none: all).
    devs: Option<HashSet<u32>>,
    /// A disk's device -> the one recorded filesystem on a partition of it: the writeback
    /// events name the backing device (the disk), not the partition.
    bdi_to_fs: HashMap<u32, u32>,
    /// The writeback device names of the recorded btrfs filesystems (`btrfs-N`, not a
    /// `MAJ:MIN`) -> their superblock's device (what their other events carry).
    bdi_names: Vec<(Vec<u8>, u32)>,
}

/// The layout of the samples without a callchain; with one, [`STACK_LAYOUT`] (the cgroup id
/// some carry comes after the raw payload, the last field read here).
const LAYOUT: SampleLayout = match SampleLayout::new(SAMPLE_TYPE) {
    Some(l) => l,
    None => panic!("SAMPLE_TYPE is one ioblame-perfrec parses"),
};
/// The layout of the samples with a callchain.
const STACK_LAYOUT: SampleLayout = match SampleLayout::new(SAMPLE_TYPE | SAMPLE_CALLCHAIN) {
    Some(l) => l,
    None => panic!("SAMPLE_TYPE is one ioblame-perfrec parses"),
};

impl Touched {
    /// Reads the inodes of the events of `ids` (each event's sample ids, in the order of
    /// `ats`), keeping at most `cap` pairs.
    #[cfg(test)]
    pub fn new(ats: &[(Option<InodeAt>, bool)], ids: &[Vec<u64>], cap: usize) -> Touched {
        Self::for_filesystems(ats, ids, cap, None, HashMap::new())
    }

    /// [`Touched::new`], keeping only the inodes of the filesystems `devs` (kernel dev_t),
    /// with the devices of the bdi-named events mapped through `bdi_to_fs`; the btrfs
    /// filesystems of `devs` (their superblock's anonymous device, major 0) are found by
    /// their bdi names (`names::btrfs_bdis`).
    pub fn for_filesystems(
        ats: &[(Option<InodeAt>, bool)],
        ids: &[Vec<u64>],
        cap: usize,
        devs: Option<HashSet<u32>>,
        bdi_to_fs: HashMap<u32, u32>,
    ) -> Touched {
        let mut by_id = HashMap::default();
        for ((at, callchain), ids) in ats.iter().zip(ids) {
            if let Some(at) = at {
                for &id in ids {
                    by_id.insert(
                        id,
                        IdInode {
                            at: *at,
                            layout: if *callchain { STACK_LAYOUT } else { LAYOUT },
                        },
                    );
                }
            }
        }
        let bdi_names = devs
            .as_ref()
            .map(crate::names::btrfs_bdis)
            .unwrap_or_default();
        Touched {
            by_id,
            cap,
            devs,
            bdi_to_fs,
            bdi_names,
            ..Default::default()
        }
    }

    /// Looks at one drained record; remembers its inode if it names one not seen before.
    #[inline]
    pub fn see(&mut self, rec: &[u8]) {
        if self.by_id.is_empty() || NATIVE.u32_at(rec, 0) != Some(RECORD_SAMPLE) {
            return;
        }
        let Some(id) = NATIVE.u64_at(rec, HEADER_LEN) else {
            return;
        };
        let Some(e) = self.by_id.get(&id) else {
            return;
        };
        let bdi = e.at.bdi;
        let Some(mut key) = inode_of(rec, e, &self.bdi_names) else {
            return;
        };
        if bdi {
            if let Some(&fs) = self.bdi_to_fs.get(&key.0) {
                key.0 = fs;
            }
        }
        if self.last == Some(key) {
            return;
        }
        self.last = Some(key);
        // A block device's own inode (`ino == dev_t`, of a real device: an anonymous one,
        // major 0, is a filesystem's such as btrfs's) is the device; inodes of filesystems
        // not recorded (tmpfs, pipes) have no name to find.
        if (key.0 >> 20 != 0 && key.1 == key.0 as u64)
            || self.devs.as_ref().is_some_and(|d| !d.contains(&key.0))
        {
            return;
        }
        if self.seen.len() >= self.cap {
            if !self.seen.contains(&key) && self.over.len() < self.cap {
                self.over.insert(key);
            }
            return;
        }
        if self.seen.insert(key) {
            self.fresh.push(key);
        }
    }

    /// Distinct pairs left out by the cap (at most the cap: "at least" beyond it).
    pub fn over_cap(&self) -> usize {
        self.over.len()
    }

    /// The pairs seen for the first time since the last call.
    pub fn take_fresh(&mut self) -> Vec<(u32, u64)> {
        std::mem::take(&mut self.fresh)
    }

    /// Every pair seen (at most the cap).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.seen.len()
    }
}

/// The (dev, inode) a sample names, `None` if it is too short or names inode 0. A bdi name
/// that is no `MAJ:MIN` is looked up in `bdi_names`.
fn inode_of(rec: &[u8], e: &IdInode, bdi_names: &[(Vec<u8>, u32)]) -> Option<(u32, u64)> {
    let raw = e.layout.parse(rec.get(HEADER_LEN..)?, NATIVE)?.raw?;
    let field = |f: ioblame_tracepoints::FieldAt| raw.get(f.offset..f.offset + f.size);
    let ino = match field(e.at.ino)? {
        b if b.len() == 8 => u64::from_ne_bytes(b.try_into().ok()?),
        b if b.len() == 4 => u32::from_ne_bytes(b.try_into().ok()?) as u64,
        _ => return None,
    };
    if ino == 0 {
        return None;
    }
    let d = field(e.at.dev)?;
    let dev = if e.at.bdi {
        // "MAJ:MIN", NUL-padded; btrfs's "btrfs-N".
        let end = d.iter().position(|&c| c == 0).unwrap_or(d.len());
        let name = &d[..end];
        let majmin = std::str::from_utf8(name)
            .ok()
            .and_then(|s| s.split_once(':'))
            .and_then(|(maj, min)| Some((maj.parse().ok()?, min.parse().ok()?)));
        match majmin {
            Some((maj, min)) => ioblame_format::kernel_dev(maj, min),
            None => bdi_names.iter().find(|(n, _)| n.as_slice() == name)?.1,
        }
    } else {
        u32::from_ne_bytes(d.try_into().ok()?)
    };
    Some((dev, ino))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioblame_tracepoints::FieldAt;

    /// A sample of id `id` whose raw payload is `raw`, with a callchain of `nr` frames.
    fn sample(id: u64, nr: Option<u64>, raw: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend(RECORD_SAMPLE.to_ne_bytes());
        r.extend([0u8; 4]);
        r.extend(id.to_ne_bytes());
        r.extend([0u8; 24]);
        if let Some(nr) = nr {
            r.extend(nr.to_ne_bytes());
            for i in 0..nr {
                r.extend((0xffff_ffff_8100_0000u64 + i).to_ne_bytes());
            }
        }
        r.extend((raw.len() as u32).to_ne_bytes());
        r.extend(raw);
        r
    }

    fn payload(dev: &[u8], ino: u64) -> Vec<u8> {
        let mut p = vec![0u8; 8];
        p.extend(dev);
        p.resize(40, 0);
        p.extend(ino.to_ne_bytes());
        p
    }

    #[test]
    fn keeps_the_recorded_filesystems_and_maps_the_disk_to_its_partition() {
        let bdi = InodeAt {
            dev: FieldAt {
                offset: 8,
                size: 32,
            },
            bdi: true,
            ino: FieldAt {
                offset: 40,
                size: 8,
            },
        };
        let int = InodeAt {
            dev: FieldAt { offset: 8, size: 4 },
            bdi: false,
            ..bdi
        };
        let sda1 = (8u32 << 20) | 1;
        let mut t = Touched::for_filesystems(
            &[(Some(bdi), false), (Some(int), false)],
            &[vec![1], vec![2]],
            10,
            Some([sda1].into()),
            [(8u32 << 20, sda1)].into(),
        );
        t.see(&sample(1, None, &payload(b"8:0\0", 12)));
        t.see(&sample(2, None, &payload(&sda1.to_ne_bytes(), 13)));
        // A tmpfs inode, and the disk's own inode: not kept.
        t.see(&sample(2, None, &payload(&5u32.to_ne_bytes(), 14)));
        t.see(&sample(2, None, &payload(&sda1.to_ne_bytes(), sda1 as u64)));
        assert_eq!(t.take_fresh(), [(sda1, 12), (sda1, 13)]);

        // A btrfs: its superblock's anonymous device (0:45), also by its bdi name; an inode
        // number equal to that dev_t is a file. An unknown bdi name: nothing.
        let sb = 45u32;
        let mut t = Touched::for_filesystems(
            &[(Some(bdi), false), (Some(int), false)],
            &[vec![1], vec![2]],
            10,
            Some([sb].into()),
            HashMap::new(),
        );
        t.bdi_names = vec![(b"btrfs-3".to_vec(), sb)];
        t.see(&sample(1, None, &payload(b"btrfs-3\0", 257)));
        t.see(&sample(1, None, &payload(b"btrfs-4\0", 258)));
        t.see(&sample(2, None, &payload(&sb.to_ne_bytes(), 259)));
        t.see(&sample(2, None, &payload(&sb.to_ne_bytes(), sb as u64)));
        assert_eq!(t.take_fresh(), [(sb, 257), (sb, 259), (sb, sb as u64)]);
    }

    #[test]
    fn reads_each_inode_once() {
        let int = InodeAt {
            dev: FieldAt { offset: 8, size: 4 },
            bdi: false,
            ino: FieldAt {
                offset: 40,
                size: 8,
            },
        };
        let bdi = InodeAt {
            dev: FieldAt {
                offset: 8,
                size: 32,
            },
            bdi: true,
            ..int
        };
        let mut t = Touched::new(
            &[(Some(int), true), (None, false), (Some(bdi), false)],
            &[vec![10, 11], vec![20], vec![30]],
            3,
        );
        let dev = ((7u32 << 20) | 1).to_ne_bytes();
        t.see(&sample(10, Some(3), &payload(&dev, 12)));
        t.see(&sample(11, Some(0), &payload(&dev, 12)));
        t.see(&sample(20, None, &payload(&dev, 99)));
        t.see(&sample(30, None, &payload(b"7:1\0", 13)));
        // Inode 0, a short record, an unknown id: nothing.
        t.see(&sample(30, None, &payload(b"7:1\0", 0)));
        t.see(&sample(10, Some(3), &payload(&dev, 12))[..50]);
        t.see(&sample(99, None, &payload(&dev, 14)));
        assert_eq!(t.take_fresh(), [((7 << 20) | 1, 12), ((7 << 20) | 1, 13)]);
        assert!(t.take_fresh().is_empty());
        t.see(&sample(10, Some(1), &payload(&dev, 15)));
        // The cap: a fourth inode is counted, not kept.
        t.see(&sample(10, Some(1), &payload(&dev, 16)));
        assert_eq!(t.take_fresh(), [((7 << 20) | 1, 15)]);
        t.see(&sample(10, Some(1), &payload(&dev, 16)));
        assert_eq!((t.len(), t.over_cap()), (3, 1));
    }
}
