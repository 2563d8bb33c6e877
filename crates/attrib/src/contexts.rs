//! What each thread is doing: the brackets it is in (writeback work, a single inode's
//! writeback, an inode write, ext4 or iomap writepages, a direct IO, a jbd2 commit), the
//! file it last read, and the sector->file maps it just emitted for its next bios (see
//! docs/attribution.md, "Thread contexts").

use ioblame_decode::{CommitPhase, Dev, EventKind, XfsFileOp};
use rustc_hash::FxHashMap;

use crate::context::Devices;
use crate::interval::{adv_off, Advance, IntervalMap};

/// No writeback reason: the thread is not in writeback work.
pub(crate) const NO_REASON: u32 = u32::MAX;
/// No jbd2 transaction: the thread is not committing one.
pub(crate) const NO_TXN: u32 = u32::MAX;
/// `IOMAP_MAPPED`, `IOMAP_UNWRITTEN`.
const IOMAP_MAPPED: u16 = 2;
const IOMAP_UNWRITTEN: u16 = 3;
/// A thread's sector->file maps beyond this many intervals are dropped (stale).
const MAX_TID_RMAP: usize = 4096;
/// A thread's sector->file maps not followed by their bio within this time are forgotten
/// (ns); so is what it last read.
const RMAP_STALE_NS: u64 = 5_000_000_000;

/// A sector->file mapping emitted by the filesystem just before the bio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rmap {
    /// The file's inode.
    pub ino: u64,
    /// The file byte offset of the interval's first sector.
    pub foff: u64,
    /// When it was emitted.
    pub t: u64,
}

impl Advance for Rmap {
    fn advance(&self, sectors: u64) -> Self {
        Rmap {
            foff: adv_off(self.foff, sectors),
            ..*self
        }
    }
}

/// A direct IO in progress on a thread (`iomap_dio_rw_begin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dio {
    /// The file's device.
    pub dev: Dev,
    /// The file's inode.
    pub ino: u64,
    /// Bytes of data bios still expected: the state ends when they are queued, even when
    /// `iomap_dio_complete` fires elsewhere (aio, io_uring).
    pub left: u64,
}

/// The brackets a thread is in, and the file it last read: what the charging rules read
/// when it queues a bio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BioCtx {
    /// The writeback work's reason, or [`NO_REASON`].
    pub reason: u32,
    /// The inode of a `single_inode` bracket.
    pub wb_ino: Option<(Dev, u64)>,
    /// The inode of a `write_inode` bracket.
    pub wi_ino: Option<(Dev, u64)>,
    /// The inode ext4 or iomap writepages is writing.
    pub wp_ino: Option<(Dev, u64)>,
    /// Inside `ext4_writepages..ext4_writepages_result`.
    pub ext4_wp: bool,
    /// `wp_ino` comes from iomap's per-folio writeback event (`iomap_writeback_folio`,
    /// `iomap_writepage` before 6.17), on any thread: the flusher's, or the caller's of an
    /// fsync or msync. It lasts until the thread's writeback bracket ends, or it writes
    /// another file's folio.
    pub iomap_wp: bool,
    /// A direct IO in progress.
    pub dio: Option<Dio>,
    /// The jbd2 transaction being committed, or [`NO_TXN`].
    pub txn: u32,
    /// The device of the journal's filesystem of `txn` (`j_fs_dev`).
    pub txn_dev: Dev,
    /// The file the thread last read.
    pub read_file: Option<(Dev, u64)>,
}

impl Default for BioCtx {
    fn default() -> Self {
        BioCtx {
            reason: NO_REASON,
            wb_ino: None,
            wi_ino: None,
            wp_ino: None,
            ext4_wp: false,
            iomap_wp: false,
            dio: None,
            txn: NO_TXN,
            txn_dev: 0,
            read_file: None,
        }
    }
}

/// Per-thread context: brackets and fresh maps.
#[derive(Debug, Default)]
struct TidCtx {
    /// What a bio queued now sees.
    ctx: BioCtx,
    /// When the `single_inode` bracket of `ctx.wb_ino` began.
    wb_since: u64,
    /// Per disk: sector -> file maps.
    rmap: Vec<(Dev, IntervalMap<Rmap>)>,
    /// When a map was last added, or the context last set.
    touched: u64,
    /// ext4 map events of a filesystem whose block size is not known yet (a perf.data
    /// recording has no mount table), waiting for the thread's next bio to tell it.
    unsized_maps: Vec<EventKind>,
}

impl TidCtx {
    /// Whether nothing is open or remembered.
    fn is_idle(&self) -> bool {
        self.ctx == BioCtx::default()
            && self.rmap.iter().all(|r| r.1.is_empty())
            && self.unsized_maps.is_empty()
    }

    fn rmap_mut(&mut self, disk: Dev) -> &mut IntervalMap<Rmap> {
        let i = match self.rmap.iter().position(|r| r.0 == disk) {
            Some(i) => i,
            None => {
                self.rmap.push((disk, IntervalMap::default()));
                self.rmap.len() - 1
            }
        };
        &mut self.rmap[i].1
    }
}

/// A sector->file map one event tells: disk sectors `[a, b)` hold the file bytes from
/// `foff` of inode `ino`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileMap {
    /// The disk.
    pub disk: Dev,
    /// First sector.
    pub a: u64,
    /// End sector.
    pub b: u64,
    /// The file's inode.
    pub ino: u64,
    /// File byte offset of sector `a`.
    pub foff: u64,
    /// The file the map reads, for a map that tells what the thread reads (iomap's
    /// `iomap_iter_dstmap`).
    pub read: Option<(Dev, u64)>,
}

/// The sector->file map an ext4 `map_blocks_exit`, `iomap_add_to_ioend`,
/// `iomap_iter_dstmap` or xfs `map_blocks_found`/`_alloc` (with the filesystem's geometry)
/// event tells, if any (a mapped extent).
pub(crate) fn file_map(devs: &Devices, kind: &EventKind) -> Option<FileMap> {
    match *kind {
        EventKind::Ext4MapBlocks {
            dev,
            ino,
            pblk,
            lblk,
            ret,
            ..
        } if ret > 0 && pblk > 0 => {
            let bs = devs.block_size(dev);
            let spb = bs / 512;
            let info = devs.info(dev);
            let a = pblk.saturating_mul(spb).saturating_add(info.part_start);
            let b = a.saturating_add((ret as u64).saturating_mul(spb));
            Some(FileMap {
                disk: info.disk,
                a,
                b,
                ino,
                foff: lblk.saturating_mul(bs),
                read: None,
            })
        }
        EventKind::IomapAddToIoend {
            dev,
            ino,
            pos,
            dirty_len,
            addr,
            offset,
            bdev,
            ..
        } if addr != u64::MAX && pos >= offset => {
            let byte = addr.saturating_add(pos - offset);
            Some(iomap_map(devs, (dev, bdev), byte, dirty_len, ino, pos))
        }
        EventKind::IomapIterDstmap {
            dev,
            ino,
            addr,
            offset,
            length,
            typ,
            bdev,
            ..
        } if (typ == IOMAP_MAPPED || typ == IOMAP_UNWRITTEN) && addr != u64::MAX => Some(FileMap {
            read: Some((dev, ino)),
            ..iomap_map(devs, (dev, bdev), addr, length, ino, offset)
        }),
        EventKind::XfsMapBlocks {
            dev,
            ino,
            startoff,
            startblock,
            blockcount,
            bmap_state,
        } if blockcount > 0 && bmap_state & BMAP_ATTRFORK == 0 => {
            let byte = devs.xfs_block_byte(dev, startblock)?;
            let bs = devs.block_size(dev);
            Some(iomap_map(
                devs,
                (dev, 0),
                byte,
                blockcount.saturating_mul(bs),
                ino,
                startoff.saturating_mul(bs),
            ))
        }
        _ => None,
    }
}

/// `xfs_bmap_post_update`'s `bmap_state` bit of an extended attribute fork's extent.
const BMAP_ATTRFORK: u32 = 1 << 8;

/// The map of the `len` bytes from byte `byte` of iomap's block device `bdev` (the
/// filesystem's `dev` when 0), which hold the bytes from `foff` of file `ino`.
fn iomap_map(
    devs: &Devices,
    (dev, bdev): (Dev, Dev),
    byte: u64,
    len: u64,
    ino: u64,
    foff: u64,
) -> FileMap {
    let info = devs.info(if bdev != 0 { bdev } else { dev });
    let a = (byte / 512).saturating_add(info.part_start);
    FileMap {
        disk: info.disk,
        a,
        b: a.saturating_add(len.div_ceil(512)),
        ino,
        foff,
        read: None,
    }
}

/// The contexts of the threads that have one.
#[derive(Debug, Default)]
pub(crate) struct Contexts {
    tids: FxHashMap<u32, TidCtx>,
}

impl Contexts {
    /// Threads with a context.
    pub fn len(&self) -> usize {
        self.tids.len()
    }

    /// Sector->file map intervals held.
    pub fn maps_len(&self) -> usize {
        self.tids
            .values()
            .flat_map(|c| c.rmap.iter())
            .map(|r| r.1.len())
            .sum()
    }

    /// The context of `tid`, made if it has none, touched at `now`.
    fn tid(&mut self, tid: u32, now: u64) -> &mut TidCtx {
        let c = self.tids.entry(tid).or_default();
        c.touched = now;
        c
    }

    /// Records the map an event of `tid` tells (see [`file_map`]), if any.
    pub fn on_file_map(&mut self, devs: &Devices, tid: u32, now: u64, kind: &EventKind) {
        if let EventKind::Ext4MapBlocks { dev, .. } = *kind {
            if !devs.knows_block_size(dev) && file_map(devs, kind).is_some() {
                // Its sectors depend on a block size not known yet: the next bio tells it.
                let c = self.tid(tid, now);
                if c.unsized_maps.len() >= 64 {
                    c.unsized_maps.remove(0);
                }
                c.unsized_maps.push(kind.clone());
                return;
            }
        }
        let Some(m) = file_map(devs, kind) else {
            return;
        };
        self.add_map(
            tid,
            now,
            m.disk,
            m.a,
            m.b,
            Rmap {
                ino: m.ino,
                foff: m.foff,
                t: 0,
            },
        );
        if let Some(f) = m.read {
            self.tid(tid, now).ctx.read_file = Some(f);
        }
    }

    /// Adds a sector->file map of `tid` for its next bios.
    fn add_map(&mut self, tid: u32, now: u64, disk: Dev, a: u64, b: u64, r: Rmap) {
        let c = self.tids.entry(tid).or_default();
        if now.saturating_sub(c.touched) > RMAP_STALE_NS {
            // Maps never followed by their bio (blocks found cached, say): forget them.
            c.rmap.clear();
        }
        c.touched = now;
        let m = c.rmap_mut(disk);
        if m.len() >= 256 && m.len() % 256 == 0 {
            // Maps of a thread that maps without queueing (an ext4 writer looking up the
            // blocks it overwrites): keep the recent ones.
            let limit = now.saturating_sub(RMAP_STALE_NS);
            m.retain(|r| r.t >= limit);
        }
        if m.len() >= MAX_TID_RMAP {
            m.clear();
        }
        m.insert(a, b, Rmap { t: now, ..r });
    }

    /// The block size of a filesystem whose ext4 maps `tid` emitted before its block size
    /// was known, told by a bio of `tid` starting at sector `s` of `disk`: the one size
    /// (1 KiB to 64 KiB) that puts a waiting map's first block at `s`. The maps then become
    /// maps; the block size learnt is returned with its device.
    pub fn size_ext4_maps(
        &mut self,
        devs: &mut Devices,
        tid: u32,
        now: u64,
        disk: Dev,
        s: u64,
    ) -> Option<(Dev, u64)> {
        let c = self.tids.get_mut(&tid)?;
        if c.unsized_maps.is_empty() {
            return None;
        }
        let known = |k: &EventKind| match *k {
            EventKind::Ext4MapBlocks { dev, .. } => devs.knows_block_size(dev),
            _ => true,
        };
        if c.unsized_maps.iter().any(known) {
            // Sized since (a buffer told the block size): maps now.
            let (now_known, waiting): (Vec<EventKind>, Vec<EventKind>) =
                std::mem::take(&mut c.unsized_maps)
                    .into_iter()
                    .partition(known);
            c.unsized_maps = waiting;
            for k in &now_known {
                self.on_file_map(devs, tid, now, k);
            }
        }
        let c = self.tids.get_mut(&tid)?;
        let mut found: Option<(Dev, u64)> = None;
        for k in &c.unsized_maps {
            let EventKind::Ext4MapBlocks { dev, pblk, .. } = *k else {
                continue;
            };
            let info = devs.info(dev);
            if info.disk != disk || devs.knows_block_size(dev) {
                continue;
            }
            let fits: Vec<u64> = (10..=16)
                .map(|log| 1u64 << log)
                .filter(|bs| {
                    pblk.saturating_mul(bs / 512)
                        .saturating_add(info.part_start)
                        == s
                })
                .collect();
            if let [bs] = fits[..] {
                found = Some((dev, bs));
                break;
            }
        }
        let (dev, bs) = found?;
        devs.learn_block_size(dev, bs);
        let waiting = std::mem::take(&mut c.unsized_maps);
        for k in &waiting {
            self.on_file_map(devs, tid, now, k);
        }
        Some((dev, bs))
    }

    /// `writeback_start`: `tid` runs writeback work for `reason`.
    pub fn writeback_start(&mut self, tid: u32, now: u64, reason: u32) {
        self.tid(tid, now).ctx.reason = reason;
    }

    /// The writeback reason of the work `tid` runs, or [`NO_REASON`].
    pub fn reason(&self, tid: u32) -> u32 {
        self.tids.get(&tid).map_or(NO_REASON, |c| c.ctx.reason)
    }

    /// `writeback_written`: the work is done.
    pub fn writeback_written(&mut self, tid: u32, now: u64) {
        let c = self.tid(tid, now);
        c.ctx.reason = NO_REASON;
        c.ctx.wp_ino = None;
        c.ctx.iomap_wp = false;
        c.rmap.clear();
    }

    /// `writeback_single_inode_start` at `time`.
    pub fn single_inode_start(&mut self, tid: u32, now: u64, inode: (Dev, u64), time: u64) {
        let c = self.tid(tid, now);
        c.ctx.wb_ino = Some(inode);
        c.wb_since = time;
    }

    /// `writeback_single_inode`: the bracket ends; returns when it began if it was this
    /// inode's.
    pub fn single_inode_end(&mut self, tid: u32, now: u64, inode: (Dev, u64)) -> Option<u64> {
        let c = self.tid(tid, now);
        let began = (c.ctx.wb_ino == Some(inode)).then_some(c.wb_since);
        c.ctx.wb_ino = None;
        c.ctx.wp_ino = None;
        c.ctx.iomap_wp = false;
        c.rmap.clear();
        began
    }

    /// `writeback_write_inode_start`.
    pub fn write_inode_start(&mut self, tid: u32, now: u64, inode: (Dev, u64)) {
        self.tid(tid, now).ctx.wi_ino = Some(inode);
    }

    /// `writeback_write_inode`.
    pub fn write_inode_end(&mut self, tid: u32, now: u64) {
        self.tid(tid, now).ctx.wi_ino = None;
    }

    /// The inode whose `write_inode` bracket `tid` is in.
    #[inline]
    pub fn write_inode(&self, tid: u32) -> Option<(Dev, u64)> {
        self.tids.get(&tid).and_then(|c| c.ctx.wi_ino)
    }

    /// The inode whose `ext4_writepages` bracket `tid` is in.
    #[inline]
    pub fn ext4_writepages_inode(&self, tid: u32) -> Option<(Dev, u64)> {
        self.tids
            .get(&tid)
            .filter(|c| c.ctx.ext4_wp)
            .and_then(|c| c.ctx.wp_ino)
    }

    /// `ext4_writepages`: `tid` writes the pages of `inode`.
    pub fn ext4_writepages(&mut self, tid: u32, now: u64, inode: (Dev, u64)) {
        let c = self.tid(tid, now);
        c.ctx.wp_ino = Some(inode);
        c.ctx.ext4_wp = true;
        c.ctx.iomap_wp = false;
        c.ctx.dio = None;
    }

    /// `ext4_writepages_result`.
    pub fn ext4_writepages_result(&mut self, tid: u32, now: u64) {
        let c = self.tid(tid, now);
        c.ctx.wp_ino = None;
        c.ctx.iomap_wp = false;
        c.ctx.ext4_wp = false;
        c.rmap.clear();
    }

    /// `iomap_writeback_folio`: `tid` writes a folio of `inode`.
    pub fn iomap_writeback(&mut self, tid: u32, now: u64, inode: (Dev, u64)) {
        let c = self.tid(tid, now);
        c.ctx.wp_ino = Some(inode);
        c.ctx.iomap_wp = true;
        c.ctx.dio = None;
    }

    /// `iomap_dio_rw_begin` of `count` bytes.
    pub fn dio_begin(&mut self, tid: u32, now: u64, dev: Dev, ino: u64, count: u64) {
        self.tid(tid, now).ctx.dio = (count > 0).then_some(Dio {
            dev,
            ino,
            left: count,
        });
    }

    /// `iomap_dio_complete`: with aio or io_uring this fires in another context, so only
    /// the thread that began this direct IO ends it.
    pub fn dio_complete(&mut self, tid: u32, dev: Dev, ino: u64) {
        if let Some(c) = self.tids.get_mut(&tid) {
            if c.ctx.dio.is_some_and(|d| d.dev == dev && d.ino == ino) {
                c.ctx.dio = None;
                c.rmap.clear();
            }
        }
    }

    /// `tid` queued `bytes` of its direct IO: the bracket ends when all are queued.
    pub fn dio_queued(&mut self, tid: u32, bytes: u64) {
        if let Some(c) = self.tids.get_mut(&tid) {
            if let Some(d) = &mut c.ctx.dio {
                d.left = d.left.saturating_sub(bytes);
                if d.left == 0 {
                    c.ctx.dio = None;
                }
            }
        }
    }

    /// A page-cache read of `file` (readahead, a fault): whatever direct IO `tid` did is
    /// over.
    pub fn page_cache_read(&mut self, tid: u32, now: u64, file: (Dev, u64)) {
        let c = self.tid(tid, now);
        c.ctx.read_file = Some(file);
        c.ctx.dio = None;
    }

    /// A folio of `file` added to the page cache by `tid`: what it reads next is that file
    /// (a read-ahead or a read of the page a partial write needs), until another read
    /// names another. A direct IO in progress stays open (it adds no folio of its own).
    pub fn page_cache_added(&mut self, tid: u32, now: u64, file: (Dev, u64)) {
        self.tid(tid, now).ctx.read_file = Some(file);
    }

    /// An xfs read or write call: a direct IO begins after it, if any.
    pub fn xfs_file(&mut self, tid: u32, now: u64, op: XfsFileOp, file: (Dev, u64)) {
        let c = self.tid(tid, now);
        c.ctx.dio = None;
        if matches!(op, XfsFileOp::BufferedRead | XfsFileOp::DirectRead) {
            c.ctx.read_file = Some(file)
        }
    }

    /// Something `tid` did ends its direct IO, if any (an fsync, dirtying a page).
    #[inline]
    pub fn end_dio(&mut self, tid: u32) {
        if let Some(c) = self.tids.get_mut(&tid) {
            c.ctx.dio = None;
        }
    }

    /// `jbd2_start_commit` ... `jbd2_end_commit` of `transaction` of `dev`'s journal.
    pub fn jbd2_commit(
        &mut self,
        tid: u32,
        now: u64,
        phase: CommitPhase,
        dev: Dev,
        transaction: u32,
    ) {
        let c = self.tid(tid, now);
        match phase {
            CommitPhase::End => (c.ctx.txn, c.ctx.txn_dev) = (NO_TXN, 0),
            _ => (c.ctx.txn, c.ctx.txn_dev) = (transaction, dev),
        }
    }

    /// The context of `tid` as a bio over sectors `[s, e)` of `disk` queued now sees it;
    /// the maps `tid` emitted for those sectors are taken into `maps`.
    #[inline]
    pub fn for_bio(
        &mut self,
        tid: u32,
        disk: Dev,
        s: u64,
        e: u64,
        maps: &mut Vec<(u64, u64, Rmap)>,
    ) -> BioCtx {
        match self.tids.get_mut(&tid) {
            Some(c) => {
                if let Some(m) = c.rmap.iter_mut().find(|r| r.0 == disk) {
                    m.1.take(s, e, maps);
                }
                c.ctx
            }
            None => BioCtx::default(),
        }
    }

    /// `tid` exited.
    pub fn remove(&mut self, tid: u32) {
        self.tids.remove(&tid);
    }

    /// Forgets maps and reads older than [`RMAP_STALE_NS`], and the contexts left idle.
    pub fn sweep(&mut self, now: u64) {
        let limit_maps = now.saturating_sub(RMAP_STALE_NS);
        self.tids.retain(|_, c| {
            if c.touched < limit_maps {
                c.rmap.clear();
                c.unsized_maps.clear();
                c.ctx.read_file = None;
            }
            !c.is_idle()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioblame_format::BlockDevice;

    const DISK: Dev = 8 << 20;
    const PART: Dev = (8 << 20) | 1;

    fn devices() -> Devices {
        let d = |name: &str, minor, part_start, parent: &str| BlockDevice {
            name: name.into(),
            major: 8,
            minor,
            size_sectors: 1 << 20,
            part_start,
            parent: parent.into(),
            ..BlockDevice::default()
        };
        Devices::new(&[d("sda", 0, 0, ""), d("sda1", 1, 2048, "sda")], &[])
    }

    #[test]
    fn map_events_tell_disk_sectors() {
        let devs = devices();
        let ext4 = |ret| EventKind::Ext4MapBlocks {
            dev: PART,
            ino: 12,
            flags: 0,
            pblk: 100,
            lblk: 3,
            len: 2,
            mflags: 0,
            ret,
        };
        let m = file_map(&devs, &ext4(2)).unwrap();
        assert_eq!(
            (m.disk, m.a, m.b, m.ino, m.foff, m.read),
            (DISK, 2048 + 800, 2048 + 816, 12, 3 * 4096, None)
        );
        // not mapped
        assert_eq!(file_map(&devs, &ext4(0)), None);
        let ioend = EventKind::IomapAddToIoend {
            dev: PART,
            ino: 13,
            pos: 8192,
            dirty_len: 4096,
            addr: 1 << 20,
            offset: 4096,
            length: 1 << 20,
            typ: IOMAP_MAPPED,
            flags: 0,
            bdev: 0,
        };
        let m = file_map(&devs, &ioend).unwrap();
        assert_eq!(
            (m.disk, m.a, m.b, m.foff),
            (DISK, 2048 + 2048 + 8, 2048 + 2048 + 16, 8192)
        );
        let dstmap = EventKind::IomapIterDstmap {
            dev: PART,
            ino: 14,
            addr: 4096,
            offset: 0,
            length: 1000,
            typ: IOMAP_UNWRITTEN,
            flags: 0,
            bdev: PART,
        };
        let m = file_map(&devs, &dstmap).unwrap();
        assert_eq!((m.a, m.b, m.read), (2048 + 8, 2048 + 10, Some((PART, 14))));
        // a hole
        let hole = EventKind::IomapIterDstmap {
            dev: PART,
            ino: 14,
            addr: u64::MAX,
            offset: 0,
            length: 1000,
            typ: 0,
            flags: 0,
            bdev: PART,
        };
        assert_eq!(file_map(&devs, &hole), None);
    }

    #[test]
    fn a_bio_takes_the_maps_of_its_sectors_with_the_brackets() {
        let mut devs = devices();
        // (known: ext4 maps of a filesystem of unknown block size wait for their bio)
        devs.learn_block_size(DISK, 4096);
        let mut c = Contexts::default();
        let ext4 = |pblk, lblk| EventKind::Ext4MapBlocks {
            dev: DISK,
            ino: 12,
            flags: 0,
            pblk,
            lblk,
            len: 1,
            mflags: 0,
            ret: 1,
        };
        c.on_file_map(&devs, 1, 10, &ext4(10, 0));
        c.on_file_map(&devs, 1, 11, &ext4(20, 1));
        c.writeback_start(1, 12, 2);
        c.ext4_writepages(1, 13, (DISK, 12));
        let mut maps = Vec::new();
        let ctx = c.for_bio(1, DISK, 80, 88, &mut maps);
        assert_eq!(
            maps,
            vec![(
                80,
                88,
                Rmap {
                    ino: 12,
                    foff: 0,
                    t: 10
                }
            )]
        );
        assert_eq!(ctx.reason, 2);
        assert_eq!(ctx.wp_ino, Some((DISK, 12)));
        assert!(ctx.ext4_wp);
        // taken: a second bio over the same sectors finds no map; the other map stays
        maps.clear();
        c.for_bio(1, DISK, 80, 88, &mut maps);
        assert!(maps.is_empty());
        assert_eq!(c.maps_len(), 1);
        // another thread has no context
        assert_eq!(c.for_bio(2, DISK, 160, 168, &mut maps), BioCtx::default());
        c.ext4_writepages_result(1, 14);
        c.writeback_written(1, 15);
        assert_eq!(c.maps_len(), 0);
        assert_eq!(c.for_bio(1, DISK, 160, 168, &mut maps), BioCtx::default());
    }

    #[test]
    fn stale_maps_are_forgotten() {
        let mut c = Contexts::default();
        let r = Rmap {
            ino: 1,
            foff: 0,
            t: 0,
        };
        c.add_map(1, 1_000, DISK, 0, 8, r);
        // the next map long after: the first one was never followed by its bio
        c.add_map(1, 1_000 + RMAP_STALE_NS + 1, DISK, 8, 16, r);
        assert_eq!(c.maps_len(), 1);
        // a sweep long after forgets the maps, and the context with nothing else open
        c.sweep(1_000 + 3 * RMAP_STALE_NS);
        assert_eq!(c.len(), 0);
        // an open bracket keeps the context, not its maps
        c.add_map(2, 0, DISK, 0, 8, r);
        c.dio_begin(2, 0, DISK, 5, 4096);
        c.sweep(2 * RMAP_STALE_NS);
        assert_eq!((c.len(), c.maps_len()), (1, 0));
    }

    #[test]
    fn a_direct_io_ends_when_its_bytes_are_queued_or_it_completes() {
        let mut c = Contexts::default();
        let mut maps = Vec::new();
        c.dio_begin(1, 0, DISK, 5, 8192);
        c.dio_queued(1, 4096);
        assert_eq!(
            c.for_bio(1, DISK, 0, 8, &mut maps).dio,
            Some(Dio {
                dev: DISK,
                ino: 5,
                left: 4096
            })
        );
        c.dio_queued(1, 4096);
        assert_eq!(c.for_bio(1, DISK, 0, 8, &mut maps).dio, None);
        // completion in another thread (aio) ends nothing; another file's neither
        c.dio_begin(1, 0, DISK, 5, 8192);
        c.dio_complete(2, DISK, 5);
        c.dio_complete(1, DISK, 6);
        assert!(c.for_bio(1, DISK, 0, 8, &mut maps).dio.is_some());
        c.dio_complete(1, DISK, 5);
        assert!(c.for_bio(1, DISK, 0, 8, &mut maps).dio.is_none());
        // an empty direct IO opens nothing
        c.dio_begin(1, 0, DISK, 5, 0);
        assert!(c.for_bio(1, DISK, 0, 8, &mut maps).dio.is_none());
    }

    #[test]
    fn single_inode_brackets_tell_when_they_began() {
        let mut c = Contexts::default();
        c.single_inode_start(1, 100, (DISK, 7), 90);
        assert_eq!(c.single_inode_end(1, 200, (DISK, 8)), None);
        c.single_inode_start(1, 300, (DISK, 7), 290);
        assert_eq!(c.single_inode_end(1, 400, (DISK, 7)), Some(290));
        let mut maps = Vec::new();
        c.write_inode_start(1, 500, (DISK, 7));
        assert_eq!(c.write_inode(1), Some((DISK, 7)));
        assert_eq!(c.for_bio(1, DISK, 0, 8, &mut maps).wi_ino, Some((DISK, 7)));
        c.write_inode_end(1, 600);
        assert_eq!(c.write_inode(1), None);
        c.jbd2_commit(1, 700, CommitPhase::Start, DISK, 42);
        assert_eq!(c.for_bio(1, DISK, 0, 8, &mut maps).txn, 42);
        c.jbd2_commit(1, 800, CommitPhase::End, DISK, 42);
        assert_eq!(c.for_bio(1, DISK, 0, 8, &mut maps).txn, NO_TXN);
    }
}
