//! btrfs: its logical addresses turned into device sectors (the trace's chunk map, format
//! 1.9), the ordered extents that say which file bytes a logical extent holds, and what the
//! copies of a mirrored write were charged (see docs/attribution.md, "btrfs").
//!
//! btrfs writes data and tree blocks at logical addresses; the chunk map places each logical
//! range on one or more devices (DUP and the RAID1 profiles write every byte twice or more).
//! A write bio on a device is turned back into logical ranges here. A data range is linked to
//! its file by the ordered extent the writing thread created just before (`btrfs_ordered_
//! extent_add`: inode, file offset, logical start, compressed or not), and the file's dirty
//! folios (keyed by the filesystem's superblock device, as the generic page-cache events name
//! it) give the dirtiers, as on ext4. A tree block is a folio of btrfs's btree inode (inode
//! 1), at the file offset of its logical address: its dirtier is whoever first dirtied it
//! since its last write. Whatever the first copy of a logical range was charged, the other
//! copies are charged the same.

use ioblame_decode::{BtrfsOrderedOp, Dev};
use ioblame_format::{
    BtrfsFs, BTRFS_CHUNK_RAID0, BTRFS_CHUNK_RAID10, BTRFS_CHUNK_RAID5, BTRFS_CHUNK_RAID6,
};
use rustc_hash::FxHashMap;

use crate::charge::{Charge, Frag};
use crate::context::Devices;
use crate::contexts::NO_REASON;
use crate::dirty::{Dirtier, Dirty};
use crate::interval::{Advance, IntervalMap, NO_OFF};
use crate::model::Via;

/// btrfs's btree inode: the page cache of its tree blocks, at their logical addresses.
pub(crate) const BTREE_INO: u64 = 1;

/// An ordered extent is forgotten this long after it was added if its removal was not seen.
const ORDERED_TTL_NS: u64 = 120_000_000_000;
/// What a logical range was charged is kept this long for its other copies.
const COPIES_TTL_NS: u64 = 10_000_000_000;

/// The device bytes of btrfs's superblock copies (`btrfs_sb_offset`: 64 KiB, 64 MiB,
/// 256 GiB), 4 KiB each. A chunk's device range may cover one (the allocator keeps the
/// copy's bytes out of its extents), so a superblock write there is no tree block.
const SUPER_COPIES: [u64; 3] = [64 << 10, 64 << 20, 256 << 30];
const SUPER_LEN: u64 = 4096;

/// At most this many places of one iomap mapping are kept (a direct IO of 64 MiB over
/// RAID0 stripes of 64 KiB); the rest of a larger one is left unmapped.
const MAX_PLACES: usize = 1024;

/// The profiles with parity, which are not mapped.
const PARITY: u64 = BTRFS_CHUNK_RAID5 | BTRFS_CHUNK_RAID6;

/// An ordered extent, by the logical sectors it writes.
#[derive(Debug, Clone, Copy)]
struct Ordered {
    ino: u64,
    /// An extent of the data relocation tree (a balance moving data): its bytes are
    /// charged without a file (the relocation inode is no file of the filesystem's).
    relocation: bool,
    /// Its first logical sector.
    lsec: u64,
    /// Its logical sectors.
    lsecs: u64,
    file_offset: u64,
    /// File bytes it holds (more than `lsecs * 512` when compressed).
    len: u64,
    compressed: bool,
    /// The writeback reason of the thread that made it ([`NO_REASON`] outside writeback
    /// work): the intent modifier of its bytes when the bio's own thread has none (btrfs's
    /// checksum workers submit data bios before 6.5).
    reason: u32,
    /// Its dirty folios were looked up (and the charges kept in `copies`).
    resolved: bool,
    t: u64,
    /// The direct IO writer whose bios wrote it (their issuer's role and stack): its data
    /// is charged to it as issuer and keeps no charges in `copies`.
    dio: Option<Dirtier>,
}

/// An ordered extent event, as [`Btrfs::on_ordered`] takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OrderedEvent {
    pub op: BtrfsOrderedOp,
    pub fsid: u128,
    /// The subvolume's tree id (`root_objectid`).
    pub root: u64,
    pub ino: u64,
    pub file_offset: u64,
    /// First logical byte.
    pub start: u64,
    /// File bytes.
    pub len: u64,
    /// Logical bytes written.
    pub disk_len: u64,
    pub compressed: bool,
    /// The writeback reason of the thread that made it.
    pub reason: u32,
}

impl Advance for Ordered {
    fn advance(&self, _sectors: u64) -> Self {
        *self
    }
}

/// What a logical range was charged, for the other copies.
#[derive(Debug, Clone, Copy)]
struct Copy {
    frag: Frag,
    t: u64,
}

impl Advance for Copy {
    fn advance(&self, sectors: u64) -> Self {
        Copy {
            frag: self.frag.advance(sectors),
            t: self.t,
        }
    }
}

/// One chunk, its stripes on disks.
#[derive(Debug, Clone)]
struct Chunk {
    logical: u64,
    length: u64,
    flags: u64,
    stripe_len: u64,
    sub_stripes: u64,
    /// (disk, first byte on the disk: a partition's start added) per stripe.
    stripes: Vec<(Dev, u64)>,
}

impl Chunk {
    /// Bytes each stripe holds on its device.
    fn stripe_bytes(&self) -> u64 {
        let n = self.stripes.len() as u64;
        if self.flags & BTRFS_CHUNK_RAID0 != 0 {
            self.length / n.max(1)
        } else if self.flags & BTRFS_CHUNK_RAID10 != 0 {
            self.length / (n / self.sub_stripes.max(1)).max(1)
        } else {
            self.length
        }
    }

    /// The logical byte that device byte `off` into stripe `i` holds (saturating: a damaged
    /// table maps nowhere sensible, but never panics).
    fn logical_of(&self, i: usize, off: u64) -> u64 {
        let sl = self.stripe_len.max(512);
        let n = self.stripes.len() as u64;
        let (row, within) = (off / sl, off % sl);
        let stripe = if self.flags & BTRFS_CHUNK_RAID0 != 0 {
            Some(row.saturating_mul(n).saturating_add(i as u64))
        } else if self.flags & BTRFS_CHUNK_RAID10 != 0 {
            let sub = self.sub_stripes.max(1);
            let groups = (n / sub).max(1);
            Some(row.saturating_mul(groups).saturating_add(i as u64 / sub))
        } else {
            None
        };
        match stripe {
            Some(k) => self
                .logical
                .saturating_add(k.saturating_mul(sl))
                .saturating_add(within),
            None => self.logical.saturating_add(off),
        }
    }

    /// Whether its stripes are cut every `stripe_len` bytes (RAID0, RAID10).
    fn striped(&self) -> bool {
        self.flags & (BTRFS_CHUNK_RAID0 | BTRFS_CHUNK_RAID10) != 0
    }
}

/// A stripe's device bytes, for the way back from a disk's sector.
#[derive(Debug, Clone, Copy)]
struct OnDisk {
    /// First and end sector on the disk.
    a: u64,
    b: u64,
    fs: usize,
    chunk: usize,
    stripe: usize,
}

/// One btrfs filesystem of the trace.
#[derive(Debug)]
struct Fs {
    /// The superblock's device: the key of its inodes' dirty folios, and the device its files
    /// are charged with.
    sb_dev: Dev,
    fsid: u128,
    chunks: Vec<Chunk>,
    /// Ordered extents by logical sector.
    ordered: IntervalMap<Ordered>,
    /// What each logical range was charged, for its other copies.
    copies: IntervalMap<Copy>,
    /// Per inode number, the subvolumes that wrote it lately ([`Btrfs::shared_bytes`]).
    writers: FxHashMap<u64, Vec<RootSeen>>,
    /// Its devices (kernel device numbers), where its superblock copies are.
    devs: Vec<Dev>,
    /// Its tree blocks' size (bytes; 0 when not known).
    node_size: u64,
    /// The last number given to a transaction or log transaction of it: the analyzer's
    /// count of both, from 1 (not the kernel's generation or log transid, which no
    /// recorded event gives).
    ids: u32,
    /// The transaction its tree blocks are dirtied in now.
    txn: u32,
    /// The transaction before it (forgotten when the next starts).
    prev_txn: Option<u32>,
    /// Whether that transaction's commit has begun writing (a commit's bio was seen): the
    /// next tree block dirtied starts the next transaction.
    committed: bool,
    /// The transaction the last commit-dirtied tree block was dirtied in: the one being
    /// committed, whose commit's writes are divided among its acts.
    commit_txn: Option<u32>,
    /// The superblock copies its commits wrote last.
    supers: SuperWrites,
    /// Its log syncs, counted as its commits are ([`LogCount`]).
    log: LogCount,
    /// Per inode number, the writeback reason and time of the last writeback pass over it
    /// (at its start and end): the reason of the compressed extents the pass queued.
    passes: FxHashMap<u64, (u32, u64)>,
}

/// A filesystem's log transactions (fsyncs through the log tree), as the analyzer counts
/// them: the log tree blocks its fsyncs dirty until a log sync changes its own block (the
/// log root tree's item for the log) are that log transaction's; the next log block
/// dirtied starts the next.
#[derive(Debug, Clone, Default)]
struct LogCount {
    /// The log transaction log blocks are dirtied in now, and the one before it.
    now: Option<u32>,
    prev: Option<u32>,
    /// Whether a log sync of `now` changed its own block: the next log block starts the
    /// next.
    synced: bool,
    /// The log transaction the last log sync changed its own block for.
    sync_txn: Option<u32>,
    /// The superblock copies its log syncs wrote last.
    supers: SuperWrites,
}

/// The superblock copies the commits (or the log syncs) of a filesystem wrote last: a
/// commit that changed no block of its own is told by its copies, written again for a
/// transaction whose copies were written, blocks dirtied in between. A copy is told by its
/// place (disk and sector): a filesystem over several devices writes one bio per device,
/// and blocks another task dirties between two of them do not make the second another
/// commit's.
#[derive(Debug, Clone, Default)]
struct SuperWrites {
    /// The transaction they were written for.
    txn: Option<u32>,
    /// The copies written for it (at most [`MAX_SUPER_WRITES`]).
    copies: Vec<(Dev, u64)>,
    /// Whether a block was dirtied since the last copy written.
    dirtied_since: bool,
}

/// Copies remembered per [`SuperWrites`] (three per device at most).
const MAX_SUPER_WRITES: usize = 64;

impl SuperWrites {
    /// Whether the copy at `at`, written now by a sync of `txn`, is another sync's: one that
    /// changed no block of its own, of the running transaction.
    fn again(&self, txn: u32, at: (Dev, u64)) -> bool {
        self.txn == Some(txn) && self.dirtied_since && self.copies.contains(&at)
    }

    /// The copy at `at` was written for `txn`.
    fn written(&mut self, txn: u32, at: (Dev, u64)) {
        if self.txn != Some(txn) || self.copies.contains(&at) {
            self.txn = Some(txn);
            self.copies.clear();
        }
        if self.copies.len() < MAX_SUPER_WRITES {
            self.copies.push(at);
        }
        self.dirtied_since = false;
    }
}

/// A subvolume seen writing an inode number: its tree id, its last extent's time, and the
/// bytes of its extents not yet counted as shared.
#[derive(Debug, Clone)]
struct RootSeen {
    root: u64,
    t: u64,
    /// Its extents not counted as shared yet: (time, bytes), oldest first, none older than
    /// the window.
    pending: std::collections::VecDeque<(u64, u64)>,
}

/// At most this many extents of one tree and inode number wait in [`RootSeen::pending`]
/// (the oldest are merged into the next when more come).
const MAX_PENDING: usize = 256;

/// How long two subvolumes' extents of one inode number count as written together: the
/// kernel's default `dirty_expire_centisecs` (30 s), the longest a folio usually stays
/// dirty.
const SHARED_WINDOW_NS: u64 = 30_000_000_000;

/// How long after a writeback pass over a file (`writeback_single_inode`) the compressed
/// extents btrfs's workers make of it take the pass's writeback reason: the pass queues the
/// compression of the file's dirty ranges and returns; the workers compress them and add
/// their ordered extents shortly after (ms to a second; seconds under emulation).
const PASS_REASON_NS: u64 = 5_000_000_000;

/// At most this many files' writeback passes are remembered per filesystem (then those
/// older than [`PASS_REASON_NS`] are dropped).
const MAX_PASSES: usize = 65536;

/// The data relocation tree (`BTRFS_DATA_RELOC_TREE_OBJECTID`, -9): a balance copies the
/// data it moves into an inode of this tree (dirtying its page cache), which writes it at
/// the new place. Its inode numbers are its own: they name no file of a subvolume.
const DATA_RELOC_TREE: u64 = -9i64 as u64;

/// Whether a tree id is one whose files' inode numbers the page-cache events carry: a
/// subvolume's (the top level, 5, or 256 to `BTRFS_LAST_FREE_OBJECTID`, -256) or the data
/// relocation tree.
fn has_files(root: u64) -> bool {
    root == 5 || root == DATA_RELOC_TREE || (256..=u64::MAX - 255).contains(&root)
}

/// A part of a write bio btrfs could not link to a dirtier, with what is known of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unlinked {
    /// Its sectors on the bio's disk.
    pub a: u64,
    pub b: u64,
    /// The filesystem's superblock device.
    pub sb_dev: Dev,
    /// The file (the btree inode for tree blocks), 0 when not known.
    pub ino: u64,
    /// Its file offset, or [`NO_OFF`].
    pub foff: u64,
    /// The writeback reason of the ordered extent's thread, or [`NO_REASON`].
    pub reason: u32,
}

/// The btrfs filesystems of a trace, and their ordered extents in flight.
#[derive(Debug, Default)]
pub(crate) struct Btrfs {
    fs: Vec<Fs>,
    /// Per disk, its stripes sorted by first sector.
    on_disk: FxHashMap<Dev, Vec<OnDisk>>,
    /// Per disk, the sectors of its btrfs devices' superblock copies ([`SUPER_COPIES`]):
    /// inside chunks' device ranges, never part of a chunk's data.
    /// Each copy's filesystem (superblock device) is the third.
    supers: FxHashMap<Dev, Vec<(u64, u64, Dev)>>,
    /// bdi sequence number (`btrfs-N`) -> superblock device.
    bdis: FxHashMap<u32, Dev>,
    /// Bytes written on stripes of a parity profile (RAID5/6), which are not mapped.
    pub parity_bytes: u64,
    /// Bytes of the ordered extents (as written: `disk_len`) of filesystems the trace's
    /// table does not name (no chunk map: a perf.data recording, a recorder before 1.9).
    pub unmapped_bytes: u64,
    /// Bytes of the ordered extents (as written) of inode numbers that two subvolumes of one
    /// filesystem wrote within [`SHARED_WINDOW_NS`] of each other: the page-cache events
    /// name a btrfs file by its filesystem and number, not its subvolume, so the dirty
    /// folios of the two files are one file's to the attribution, and these bytes may be
    /// charged to the other file's dirtier (or the lost intent).
    pub shared_bytes: u64,
}

impl Btrfs {
    /// The filesystems of the trace's BTRFS table (`ioblame_format::Trace::btrfs`); `devices`
    /// places a filesystem's partitions on their disks, whose sectors the bios name.
    pub fn new(table: &[BtrfsFs], devices: &Devices) -> Btrfs {
        let mut b = Btrfs::default();
        b.update(table, devices);
        b
    }

    /// A newer BTRFS table (a recording followed while it is written, whose recorder
    /// writes the table again when a chunk is allocated or a filesystem mounted): the chunk
    /// maps and devices of the filesystems it names replace those known, a filesystem new to
    /// it is added, and what was learnt of their extents, copies and transactions stays.
    pub fn update(&mut self, table: &[BtrfsFs], devices: &Devices) {
        for t in table {
            let fsid = u128::from_be_bytes(t.fsid);
            let chunks = chunks_of(t, devices);
            let devs: Vec<Dev> = t
                .devices
                .iter()
                .map(|d| ioblame_format::kernel_dev(d.major, d.minor))
                .collect();
            if let Some(n) = t
                .bdi
                .strip_prefix("btrfs-")
                .and_then(|n| n.parse::<u32>().ok())
            {
                self.bdis.insert(n, t.kernel_dev());
            }
            match self.fs.iter_mut().find(|f| f.fsid == fsid) {
                Some(f) => {
                    f.chunks = chunks;
                    f.devs = devs;
                    f.node_size = t.node_size as u64;
                }
                None => self.fs.push(Fs {
                    sb_dev: t.kernel_dev(),
                    fsid,
                    chunks,
                    devs,
                    ordered: IntervalMap::default(),
                    copies: IntervalMap::default(),
                    writers: FxHashMap::default(),
                    node_size: t.node_size as u64,
                    ids: 1,
                    txn: 1,
                    prev_txn: None,
                    committed: false,
                    commit_txn: None,
                    supers: SuperWrites::default(),
                    log: LogCount::default(),
                    passes: FxHashMap::default(),
                }),
            }
        }
        // Where every filesystem's stripes and superblock copies are.
        self.on_disk.clear();
        self.supers.clear();
        for (idx, f) in self.fs.iter().enumerate() {
            for &dev in &f.devs {
                let info = devices.info(dev);
                let (start, size) = (
                    info.part_start.saturating_mul(512),
                    info.size.saturating_mul(512),
                );
                let v = self.supers.entry(info.disk).or_default();
                // The kernel writes a copy only inside the device (`btrfs_sb_offset` + 4 KiB
                // below its size); of a device of unknown size, the first copy alone.
                for at in SUPER_COPIES {
                    let inside = if size > 0 {
                        at + SUPER_LEN < size
                    } else {
                        at == SUPER_COPIES[0]
                    };
                    if inside {
                        let a = start.saturating_add(at) / 512;
                        v.push((a, a + SUPER_LEN / 512, f.sb_dev));
                    }
                }
            }
            for (ci, c) in f.chunks.iter().enumerate() {
                let bytes = c.stripe_bytes();
                for (si, &(disk, phys)) in c.stripes.iter().enumerate() {
                    self.on_disk.entry(disk).or_default().push(OnDisk {
                        a: phys / 512,
                        b: phys.saturating_add(bytes) / 512,
                        fs: idx,
                        chunk: ci,
                        stripe: si,
                    });
                }
            }
        }
        for v in self.on_disk.values_mut() {
            v.sort_by_key(|s| s.a);
        }
    }

    /// Whether the trace has a btrfs filesystem on `disk`.
    #[inline]
    pub fn on(&self, disk: Dev) -> bool {
        // A device without a chunk yet (just added) has its superblock copies written.
        self.on_disk.contains_key(&disk) || self.supers.contains_key(&disk)
    }

    /// The superblock device of the filesystem with a stripe at `sector` of `disk`: the
    /// device a read or direct IO there charges its file with, as the filesystem's writes
    /// and page-cache events do.
    pub fn sb_dev_at(&self, disk: Dev, sector: u64) -> Option<Dev> {
        let v = self.on_disk.get(&disk)?;
        let od = v.get(v.partition_point(|x| x.b <= sector))?;
        (od.a <= sector).then(|| self.fs[od.fs].sb_dev)
    }

    /// The places on disk of logical bytes `[logical, + len)` of the filesystem whose
    /// superblock device is `sb_dev`: `(disk, first byte on the disk, bytes, offset from
    /// logical)` for every copy, cut at chunk and stripe ends. `None` when `sb_dev` is no
    /// btrfs of the trace (so the caller keeps its own reading).
    pub fn places(&self, sb_dev: Dev, logical: u64, len: u64) -> Option<Vec<(Dev, u64, u64, u64)>> {
        let fs = self.fs.iter().find(|f| f.sb_dev == sb_dev)?;
        let mut out = Vec::new();
        let end = logical.saturating_add(len);
        let first = fs
            .chunks
            .partition_point(|c| c.logical.saturating_add(c.length) <= logical);
        for c in &fs.chunks[first..] {
            if c.logical >= end || out.len() >= MAX_PLACES {
                break;
            }
            let (a, b) = (
                logical.max(c.logical),
                end.min(c.logical.saturating_add(c.length)),
            );
            if c.flags & PARITY != 0 || a >= b {
                continue;
            }
            if c.striped() {
                // Stripe by stripe: stripe `k` of the chunk is on device `k % n` (RAID0), or
                // on the `sub_stripes` devices of group `k % (n / sub_stripes)` (RAID10).
                let sl = c.stripe_len.max(512);
                let sub = if c.flags & BTRFS_CHUNK_RAID10 != 0 {
                    c.sub_stripes.max(1) as usize
                } else {
                    1
                };
                let groups = (c.stripes.len() / sub).max(1) as u64;
                let mut cur = a;
                while cur < b && out.len() < MAX_PLACES {
                    let off = cur - c.logical;
                    let k = off / sl;
                    let next = b
                        .min(
                            c.logical
                                .saturating_add(k.saturating_add(1).saturating_mul(sl)),
                        )
                        .max(cur + 1);
                    let g = (k % groups) as usize;
                    let dev_off = (k / groups) * sl + off % sl;
                    for &(disk, start) in c.stripes.iter().skip(g * sub).take(sub) {
                        out.push((
                            disk,
                            start.saturating_add(dev_off),
                            next - cur,
                            cur - logical,
                        ));
                    }
                    cur = next;
                }
            } else {
                for &(disk, start) in &c.stripes {
                    out.push((
                        disk,
                        start.saturating_add(a - c.logical),
                        b - a,
                        a - logical,
                    ));
                }
            }
        }
        Some(out)
    }

    /// Whether the trace names no btrfs filesystem.
    pub fn is_empty(&self) -> bool {
        self.fs.is_empty()
    }

    /// The superblock device of the filesystem whose bdi is `btrfs-N`, for the
    /// writeback events' `BDI_SEQ_MAJOR << 20 | N`; `None` when the trace does not name it.
    pub fn sb_dev_of_bdi(&self, seq: u32) -> Option<Dev> {
        self.bdis.get(&seq).copied()
    }

    /// `btrfs_ordered_extent_add` / `_remove`.
    pub fn on_ordered(&mut self, e: &OrderedEvent, time: u64) {
        let Some(fs) = self.fs.iter_mut().find(|f| f.fsid == e.fsid) else {
            if e.op == BtrfsOrderedOp::Add {
                self.unmapped_bytes = self.unmapped_bytes.saturating_add(e.disk_len);
            }
            return;
        };
        let (a, b) = (
            e.start / 512,
            e.start.saturating_add(e.disk_len).div_ceil(512),
        );
        if e.op == BtrfsOrderedOp::Add && has_files(e.root) {
            self.shared_bytes =
                self.shared_bytes
                    .saturating_add(note_writer(&mut fs.writers, e, time));
        }
        // A compressed extent is made by btrfs's compression workers, not the thread writing
        // back: its reason is that of the last writeback pass over the file, if recent.
        let reason = match fs.passes.get(&e.ino) {
            Some(&(r, t)) if e.compressed && e.reason == NO_REASON => {
                if time.saturating_sub(t) <= PASS_REASON_NS {
                    r
                } else {
                    NO_REASON
                }
            }
            _ => e.reason,
        };
        match e.op {
            BtrfsOrderedOp::Add if b > a && e.len > 0 => fs.ordered.insert(
                a,
                b,
                Ordered {
                    ino: e.ino,
                    relocation: e.root == DATA_RELOC_TREE,
                    lsec: a,
                    lsecs: b - a,
                    file_offset: e.file_offset,
                    len: e.len,
                    compressed: e.compressed,
                    reason,
                    resolved: false,
                    t: time,
                    dio: None,
                },
            ),
            BtrfsOrderedOp::Add => {}
            BtrfsOrderedOp::Remove => {
                let mut gone = Vec::new();
                fs.ordered.take(a, b, &mut gone);
            }
        }
    }

    /// A tree block of the filesystem whose superblock device is `sb_dev` is first dirtied,
    /// by a transaction commit (`commit`) or not: the transaction it is dirtied in, and the
    /// one before the last, to forget, when this dirtying starts a transaction (the last
    /// one's commit has begun writing). A commit's dirtying notes the transaction being
    /// committed: btrfs commits one transaction at a time, and a commit changes its tree
    /// blocks before it writes any. `None`: no btrfs of the table.
    pub fn txn_dirtied(&mut self, sb_dev: Dev, commit: bool) -> Option<(u32, Option<u32>)> {
        let fs = self.fs_mut(sb_dev)?;
        let mut forget = None;
        if fs.committed {
            fs.committed = false;
            forget = fs.prev_txn;
            fs.prev_txn = Some(fs.txn);
            fs.ids = fs.ids.wrapping_add(1);
            fs.txn = fs.ids;
            // The commit dropped the log trees: the next log block starts a log transaction.
            fs.log.synced = fs.log.now.is_some();
        }
        if commit {
            fs.commit_txn = Some(fs.txn);
        }
        fs.supers.dirtied_since = true;
        Some((fs.txn, forget))
    }

    /// The transaction the tree blocks of the filesystem whose superblock device is `sb_dev`
    /// are dirtied in now.
    pub fn txn_now(&self, sb_dev: Dev) -> Option<u32> {
        self.fs.iter().find(|f| f.sb_dev == sb_dev).map(|f| f.txn)
    }

    /// A commit of the filesystem whose superblock device is `sb_dev` writes its own tree
    /// blocks (whoever submits them) or, from its own thread, the superblock copy at
    /// `supers` (disk, first sector): the transaction it commits, the one its tree blocks
    /// were dirtied in (else the running one). Tree blocks dirtied after the first such write
    /// are the next transaction's.
    pub fn txn_committing(&mut self, sb_dev: Dev, supers: Option<(Dev, u64)>) -> Option<u32> {
        let fs = self.fs_mut(sb_dev)?;
        // A note older than the transaction before the running one is of an earlier
        // commit (this one dirtied nothing).
        let mut txn = fs
            .commit_txn
            .filter(|&t| t == fs.txn || Some(t) == fs.prev_txn)
            .unwrap_or(fs.txn);
        if let Some(at) = supers {
            // A copy of a transaction whose copies were written already, tree blocks
            // dirtied since: a commit that changed no block of its own (those it changed
            // were dirty already), committing the running transaction.
            if fs.supers.again(txn, at) {
                txn = fs.txn;
                fs.commit_txn = Some(txn);
            }
            fs.supers.written(txn, at);
        }
        if txn == fs.txn {
            fs.committed = true;
        }
        Some(txn)
    }

    /// A log tree block of the filesystem whose superblock device is `sb_dev` is first
    /// dirtied by an fsync logging (`btrfs_log_*`): the log transaction it is dirtied in,
    /// and the one before the last, to forget, when this dirtying starts a log transaction
    /// (the last one's sync changed its own block). `None`: no btrfs of the table.
    pub fn log_block_dirtied(&mut self, sb_dev: Dev) -> Option<(u32, Option<u32>)> {
        let fs = self.fs_mut(sb_dev)?;
        let log = &mut fs.log;
        let mut forget = None;
        let now = match log.now {
            Some(n) if !log.synced => n,
            _ => {
                forget = log.prev;
                log.prev = log.now;
                log.synced = false;
                fs.ids = fs.ids.wrapping_add(1);
                log.now = Some(fs.ids);
                fs.ids
            }
        };
        log.supers.dirtied_since = true;
        Some((now, forget))
    }

    /// A log sync (`btrfs_sync_log`) of the filesystem whose superblock device is `sb_dev`
    /// first dirties a block of its own (the log root tree's item for the log it writes):
    /// it syncs the running log transaction; log blocks dirtied after are the next's.
    pub fn log_sync_dirtied(&mut self, sb_dev: Dev) {
        if let Some(fs) = self.fs_mut(sb_dev) {
            let log = &mut fs.log;
            log.sync_txn = log.now;
            log.synced = log.now.is_some();
        }
    }

    /// A log sync of the filesystem whose superblock device is `sb_dev` writes its own
    /// blocks (whoever submits them) or, from its own thread, the superblock copy at
    /// `supers` (disk, first sector): the log transaction it syncs. A copy written again for
    /// a log transaction whose copies were written, log blocks dirtied since, and a copy
    /// written when no log sync changed a block of its own, are of a log sync that changed
    /// no block of its own: it syncs the running log transaction.
    pub fn log_syncing(&mut self, sb_dev: Dev, supers: Option<(Dev, u64)>) -> Option<u32> {
        let log = &mut self.fs_mut(sb_dev)?.log;
        let known = log
            .sync_txn
            .filter(|&t| Some(t) == log.now || Some(t) == log.prev);
        let Some(at) = supers else {
            return known;
        };
        let txn = match known {
            Some(t) if !log.supers.again(t, at) => t,
            _ => {
                let t = log.now?;
                log.sync_txn = Some(t);
                log.synced = true;
                t
            }
        };
        log.supers.written(txn, at);
        Some(txn)
    }

    /// The filesystem whose superblock device is `sb_dev`.
    fn fs_mut(&mut self, sb_dev: Dev) -> Option<&mut Fs> {
        self.fs.iter_mut().find(|f| f.sb_dev == sb_dev)
    }

    /// A writeback pass (`writeback_single_inode`, its start or end) over inode `ino` of the
    /// filesystem whose superblock device is `sb_dev`, by a thread doing writeback work for
    /// `reason`: the compressed extents btrfs's workers make of it next take that reason
    /// (docs/attribution.md, "btrfs", "Compressed extents' reason").
    pub fn inode_writeback(&mut self, sb_dev: Dev, ino: u64, reason: u32, now: u64) {
        let Some(fs) = self.fs_mut(sb_dev) else {
            return;
        };
        if fs.passes.len() >= MAX_PASSES && !fs.passes.contains_key(&ino) {
            let limit = now.saturating_sub(PASS_REASON_NS);
            fs.passes.retain(|_, p| p.1 >= limit);
            if fs.passes.len() >= MAX_PASSES {
                fs.passes.clear();
            }
        }
        fs.passes.insert(ino, (reason, now));
    }

    /// The filesystem (superblock device) whose superblock copy holds `sector` of `disk`,
    /// and the copy's first sector.
    pub fn super_at(&self, disk: Dev, sector: u64) -> Option<(Dev, u64)> {
        self.supers
            .get(&disk)?
            .iter()
            .find(|s| s.0 <= sector && sector < s.1)
            .map(|s| (s.2, s.0))
    }

    /// Whether `dev` is the superblock device of a filesystem of the table (the key of its
    /// inodes' dirty folios).
    pub fn is_sb_dev(&self, dev: Dev) -> bool {
        self.fs.iter().any(|f| f.sb_dev == dev)
    }

    /// The dirtier charged the most of the data the ordered extent at logical bytes
    /// `[start, start + disk_len)` of filesystem `fsid` wrote (still known: before its
    /// removal is taken), of the charges kept for its copies ([`COPIES_TTL_NS`]) since it was
    /// added that found a dirtier (via page): its role and the stack of its first such
    /// charge, with the filesystem's superblock device; a direct IO's extent (its data
    /// charged to its issuer, keeping no copies), the writer that made it. `None` when none
    /// did.
    pub fn data_dirtier(&self, fsid: u128, start: u64, disk_len: u64) -> Option<(Dirtier, Dev)> {
        let fs = self.fs.iter().find(|f| f.fsid == fsid)?;
        let (a, b) = (start / 512, start.saturating_add(disk_len).div_ceil(512));
        let mut found = Vec::new();
        fs.ordered.peek(a, a.saturating_add(1), &mut found);
        let first = found.first()?;
        // A range written again later: the charges of this extent's bios only.
        let since = first.2.t;
        let mut parts = Vec::new();
        fs.copies.peek(a, b, &mut parts);
        let mut by_role: Vec<(Dirtier, u64)> = Vec::new();
        for (x, y, c) in parts {
            if c.frag.c.via != Via::Page || c.t < since {
                continue;
            }
            match by_role.iter_mut().find(|r| r.0.role == c.frag.c.role) {
                Some(r) => r.1 += y - x,
                None => by_role.push((
                    Dirtier {
                        role: c.frag.c.role,
                        stack: c.frag.c.stack,
                    },
                    y - x,
                )),
            }
        }
        // The most sectors; of equals, the first found (the lowest address). An extent none
        // of whose data was found dirty, made by a direct IO write, is its writer's (an
        // extent the direct IO path made of dirty folios it flushed first is theirs).
        by_role
            .iter()
            .fold(None, |best: Option<(Dirtier, u64)>, &r| match best {
                Some(b) if b.1 >= r.1 => Some(b),
                _ => Some(r),
            })
            .map(|r| r.0)
            .or(first.2.dio)
            .map(|w| (w, fs.sb_dev))
    }

    /// The pages of one tree block (its node size) of the filesystem whose superblock device
    /// is `sb_dev`, with pages of `page` bytes (at least one).
    pub fn node_pages(&self, sb_dev: Dev, page: u64) -> u64 {
        let node = self
            .fs
            .iter()
            .find(|f| f.sb_dev == sb_dev)
            .map_or(0, |f| f.node_size);
        (node / page.max(1)).max(1)
    }

    /// Forgets ordered extents whose removal never came and the charges kept for copies
    /// that are long written.
    pub fn sweep(&mut self, now: u64) {
        for fs in &mut self.fs {
            fs.ordered
                .retain(|o| now.saturating_sub(o.t) <= ORDERED_TTL_NS);
            fs.copies
                .retain(|c| now.saturating_sub(c.t) <= COPIES_TTL_NS);
            fs.writers.retain(|_, roots| {
                roots.retain(|r| now.saturating_sub(r.t) <= SHARED_WINDOW_NS);
                !roots.is_empty()
            });
            fs.passes
                .retain(|_, p| now.saturating_sub(p.1) <= PASS_REASON_NS);
        }
    }

    /// The logical pieces of sectors `[s, e)` of `disk`: (first and end sector on the disk,
    /// filesystem, chunk, first logical byte). Sectors on a parity profile's stripes are left
    /// out, and counted in [`Btrfs::parity_bytes`] when `count_parity` (once per bio: when
    /// charging it).
    fn pieces(
        &mut self,
        disk: Dev,
        s: u64,
        e: u64,
        count_parity: bool,
    ) -> Vec<(u64, u64, usize, usize, u64)> {
        let mut out = Vec::new();
        let Some(v) = self.on_disk.get(&disk) else {
            return out;
        };
        let first = v.partition_point(|x| x.b <= s);
        for od in &v[first..] {
            if od.a >= e {
                break;
            }
            let (pa, pb) = (s.max(od.a), e.min(od.b));
            if pa >= pb {
                continue;
            }
            let c = &self.fs[od.fs].chunks[od.chunk];
            if c.flags & PARITY != 0 {
                if count_parity {
                    self.parity_bytes = self.parity_bytes.saturating_add((pb - pa) * 512);
                }
                continue;
            }
            let stripe_start = c.stripes[od.stripe].1;
            // Cut at the stripe boundaries of striped profiles.
            let step = if c.striped() {
                (c.stripe_len.max(512) / 512).max(1)
            } else {
                u64::MAX
            };
            let mut cur = pa;
            while cur < pb {
                let off = (cur * 512).saturating_sub(stripe_start);
                let next = if step == u64::MAX {
                    pb
                } else {
                    let in_stripe = (off / 512) % step;
                    (cur + step - in_stripe).min(pb)
                };
                out.push((cur, next, od.fs, od.chunk, c.logical_of(od.stripe, off)));
                cur = next;
            }
        }
        out
    }

    /// A direct IO write bio on `disk` (sectors `[s, e)`) by `writer` (its issuer's role
    /// and stack): the ordered extents it writes are that writer's, for what their removal
    /// charges ([`Btrfs::data_dirtier`]).
    pub fn direct_write(&mut self, disk: Dev, (s, e): (u64, u64), writer: Dirtier) {
        let mut parts = Vec::new();
        for (a, b, fsi, _, logical) in self.pieces(disk, s, e, false) {
            let fs = &mut self.fs[fsi];
            let lsec = logical / 512;
            parts.clear();
            fs.ordered.peek(lsec, lsec + (b - a), &mut parts);
            for &(_, _, o) in &parts {
                if let Some(x) = fs.ordered.starting_at_mut(o.lsec) {
                    x.dio.get_or_insert(writer);
                }
            }
        }
    }

    /// Charges the sectors of a buffered write bio on `disk` that btrfs links to a dirtier,
    /// through `fill(a, b, frag)`; returns the parts it could not link, with their file.
    pub fn charge(
        &mut self,
        dirty: &mut Dirty,
        disk: Dev,
        (s, e): (u64, u64),
        base: &Charge,
        time: u64,
        mut fill: impl FnMut(u64, u64, &Frag),
    ) -> Vec<Unlinked> {
        let mut unlinked = Vec::new();
        let mut parts = Vec::new();
        // The superblock copies: written at the end of each transaction commit or log sync
        // (`write_all_supers`; only the first copy has FUA), journal IO of its issuer.
        let mut ranges = vec![(s, e)];
        if let Some(sup) = self.supers.get(&disk) {
            for &(x, y, _) in sup {
                let (a, b) = (x.max(s), y.min(e));
                if a < b {
                    let c = Charge {
                        via: Via::Journal,
                        ..*base
                    };
                    fill(a, b, &Frag { c, foff: NO_OFF });
                }
                ranges = ranges
                    .into_iter()
                    .flat_map(|(a, b)| {
                        if y <= a || x >= b {
                            vec![(a, b)]
                        } else {
                            [(a, x.max(a)), (y.min(b), b)]
                                .into_iter()
                                .filter(|r| r.0 < r.1)
                                .collect()
                        }
                    })
                    .collect();
            }
        }
        let mut pieces = Vec::new();
        for (a, b) in ranges {
            pieces.extend(self.pieces(disk, a, b, true));
        }
        for (a, b, fsi, ci, logical) in pieces {
            let fs = &mut self.fs[fsi];
            let lsec = logical / 512;
            let lend = lsec + (b - a);
            let base_fs = Charge {
                fdev: fs.sb_dev,
                ..*base
            };
            // Data: resolve the ordered extents of these sectors not resolved yet.
            parts.clear();
            fs.ordered.peek(lsec, lend, &mut parts);
            for &(_, _, o) in &parts {
                if !o.resolved {
                    resolve(dirty, fs, o, &base_fs, time);
                }
            }
            if !parts.is_empty() {
                for &(_, _, o) in &parts {
                    if let Some(x) = fs.ordered.starting_at_mut(o.lsec) {
                        x.resolved = true;
                    }
                }
            } else if fs.chunks[ci].flags & ioblame_format::BTRFS_CHUNK_DATA == 0 {
                // Tree blocks: the btree inode's folios at their logical address. The dirty
                // folios first: a tree block freed and allocated again is a new write, whose
                // first copy finds its new dirtier; the other copies find the folios written
                // and take what the first was charged.
                let mut charged = Vec::new();
                dirty.write_folios(
                    fs.sb_dev,
                    BTREE_INO,
                    lsec,
                    lend,
                    lsec * 512,
                    |x, y, owner, via, foff| {
                        let c = Charge {
                            role: owner.role,
                            stack: owner.stack,
                            via,
                            ino: BTREE_INO,
                            ..base_fs
                        };
                        charged.push((x, y, Frag { c, foff }));
                    },
                );
                for (x, y, f) in charged {
                    fs.copies.insert(x, y, Copy { frag: f, t: time });
                }
            }
            // Paint from what the logical range was charged (by this copy or an earlier one).
            let mut got = Vec::new();
            fs.copies.peek(lsec, lend, &mut got);
            let mut cur = lsec;
            let mut holes = Vec::new();
            for (ca, cb, cp) in got {
                if ca > cur {
                    holes.push((cur, ca));
                }
                fill(a + (ca - lsec), a + (cb - lsec), &cp.frag);
                cur = cur.max(cb);
            }
            if cur < lend {
                holes.push((cur, lend));
            }
            // What no dirtier was found for: its file, where an ordered extent names it.
            for (ha, hb) in holes {
                let mut of = Vec::new();
                fs.ordered.peek(ha, hb, &mut of);
                let mut at = ha;
                for (oa, ob, o) in of {
                    if oa > at {
                        unlinked.push(meta_or_unknown(
                            fs,
                            ci,
                            a + (at - lsec),
                            a + (oa - lsec),
                            at,
                        ));
                    }
                    let foff = if o.compressed || o.relocation {
                        NO_OFF
                    } else {
                        o.file_offset
                            .saturating_add(oa.saturating_sub(o.lsec).saturating_mul(512))
                    };
                    unlinked.push(Unlinked {
                        a: a + (oa - lsec),
                        b: a + (ob - lsec),
                        sb_dev: fs.sb_dev,
                        ino: if o.relocation { 0 } else { o.ino },
                        foff,
                        reason: o.reason,
                    });
                    at = ob;
                }
                if at < hb {
                    unlinked.push(meta_or_unknown(
                        fs,
                        ci,
                        a + (at - lsec),
                        a + (hb - lsec),
                        at,
                    ));
                }
            }
        }
        unlinked
    }
}

/// The chunks of a filesystem of the BTRFS table, placed on their disks (`devices` places a
/// partition on its disk), sorted by logical address; a chunk of a device the table does not
/// name, or not sector aligned (a damaged table), is left out.
fn chunks_of(t: &BtrfsFs, devices: &Devices) -> Vec<Chunk> {
    // A device by devid: its disk, and its first byte there.
    let disk_of = |devid: u64| {
        t.devices.iter().find(|d| d.devid == devid).map(|d| {
            let info = devices.info(ioblame_format::kernel_dev(d.major, d.minor));
            (info.disk, info.part_start.saturating_mul(512))
        })
    };
    let mut chunks = Vec::new();
    for c in &t.chunks {
        // Each stripe's place as a byte of its disk.
        let stripes: Option<Vec<(Dev, u64)>> = c
            .stripes
            .iter()
            .map(|s| disk_of(s.devid).map(|(d, start)| (d, s.physical.saturating_add(start))))
            .collect();
        let Some(stripes) = stripes.filter(|s| !s.is_empty()) else {
            continue;
        };
        // Chunks are sector aligned, and a striped one's stripe length is a power of
        // two no longer than it; a table that says otherwise is damaged.
        let striped = c.flags & (BTRFS_CHUNK_RAID0 | BTRFS_CHUNK_RAID10) != 0;
        let aligned = c.logical % 512 == 0
            && c.length % 512 == 0
            && c.length > 0
            && stripes.iter().all(|s| s.1 % 512 == 0)
            && (!striped
                || (c.stripe_len.is_power_of_two()
                    && c.stripe_len >= 512
                    && c.stripe_len <= c.length));
        if !aligned {
            continue;
        }
        chunks.push(Chunk {
            logical: c.logical,
            length: c.length,
            flags: c.flags,
            stripe_len: c.stripe_len,
            sub_stripes: c.sub_stripes as u64,
            stripes,
        });
    }
    chunks.sort_by_key(|c| c.logical);
    chunks.dedup_by_key(|c| c.logical);
    chunks
}

/// A part of a chunk no ordered extent names: a tree block (the btree inode) in a metadata
/// or system chunk, else data of an unknown file.
fn meta_or_unknown(fs: &Fs, ci: usize, a: u64, b: u64, lsec: u64) -> Unlinked {
    let data = fs.chunks[ci].flags & ioblame_format::BTRFS_CHUNK_DATA != 0;
    Unlinked {
        a,
        b,
        sb_dev: fs.sb_dev,
        ino: if data { 0 } else { BTREE_INO },
        foff: if data { NO_OFF } else { lsec * 512 },
        reason: NO_REASON,
    }
}

/// Notes tree `e.root` writing inode number `e.ino` at `t`; returns the bytes that became
/// shared: when another tree wrote the number within the window, this extent's and every
/// extent of either written within the window and not counted yet.
fn note_writer(writers: &mut FxHashMap<u64, Vec<RootSeen>>, e: &OrderedEvent, t: u64) -> u64 {
    let roots = writers.entry(e.ino).or_default();
    let fresh = |x: u64| t.saturating_sub(x) <= SHARED_WINDOW_NS;
    roots.retain(|r| fresh(r.t));
    for r in roots.iter_mut() {
        while r.pending.front().is_some_and(|p| !fresh(p.0)) {
            r.pending.pop_front();
        }
    }
    let mine = match roots.iter().position(|r| r.root == e.root) {
        Some(i) => i,
        None => {
            roots.push(RootSeen {
                root: e.root,
                t,
                pending: Default::default(),
            });
            roots.len() - 1
        }
    };
    let r = &mut roots[mine];
    r.t = t;
    if r.pending.len() >= MAX_PENDING {
        // Merged into the next: counted with it (its time the later one's).
        if let Some((_, old)) = r.pending.pop_front() {
            if let Some(next) = r.pending.front_mut() {
                next.1 = next.1.saturating_add(old);
            }
        }
    }
    r.pending.push_back((t, e.disk_len));
    if roots.len() < 2 {
        return 0;
    }
    // Another tree wrote this number within the window: what waits is shared.
    roots
        .iter_mut()
        .flat_map(|r| r.pending.drain(..).map(|p| p.1))
        .fold(0u64, u64::saturating_add)
}

/// Looks up the dirty folios an ordered extent writes (counting them written) and keeps
/// their charges by logical sector for every copy and bio of the extent. A compressed
/// extent's logical sectors are spread over its file bytes in proportion.
fn resolve(dirty: &mut Dirty, fs: &mut Fs, o: Ordered, base: &Charge, time: u64) {
    let mut charged: Vec<(u64, u64, Frag)> = Vec::new();
    let base = &Charge {
        reason: if base.reason == NO_REASON {
            o.reason
        } else {
            base.reason
        },
        ..*base
    };
    // Every page the extent writes is dirty: folios whose size was not seen reach as far as
    // they can (docs/attribution.md, "btrfs").
    let page = dirty.page_size();
    let (p0, p1) = (
        o.file_offset / page,
        o.file_offset.saturating_add(o.len).div_ceil(page),
    );
    dirty.widen_unsized(fs.sb_dev, o.ino, p0, p1);
    // File bytes as "sectors" from 0: [0, len/512).
    let fsecs = o.len.div_ceil(512);
    dirty.write_folios(
        fs.sb_dev,
        o.ino,
        0,
        fsecs,
        o.file_offset,
        |x, y, owner, via, foff| {
            let c = Charge {
                role: owner.role,
                stack: owner.stack,
                via,
                ino: if o.relocation { 0 } else { o.ino },
                ..*base
            };
            // In u128: a damaged trace's sizes must not overflow.
            let scale = |v: u64| (v as u128 * o.lsecs as u128 / fsecs.max(1) as u128) as u64;
            let (la, lb) = if o.compressed {
                (
                    o.lsec.saturating_add(scale(x)),
                    o.lsec.saturating_add(scale(y)),
                )
            } else {
                (
                    o.lsec.saturating_add(x),
                    o.lsec.saturating_add(y.min(o.lsecs)),
                )
            };
            let foff = if o.compressed || o.relocation {
                NO_OFF
            } else {
                foff
            };
            if la < lb {
                charged.push((la, lb, Frag { c, foff }));
            }
        },
    );
    for (a, b, f) in charged {
        fs.copies.insert(a, b, Copy { frag: f, t: time });
    }
}
