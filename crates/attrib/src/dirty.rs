//! Dirty state: who dirtied what is not yet written. Dirty folios per `(bdi, ino)` (first
//! dirtier since the last writeback) with the folio orders of the page cache, dirty
//! buffer_head sector ranges per disk, and inode dirtiers per `(bdi, ino)` (see
//! docs/attribution.md, "Dirty folios and the sector maps", "Dirty buffers" and
//! "write_inode brackets").
//!
//! All of it is removed when written (the charging rules take it), when the kernel says it
//! is clean, or when so old that it must have been written or freed unseen.

use std::collections::BTreeSet;

use ioblame_decode::Dev;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::blocks::Blocks;
use crate::context::{Devices, InodeBits};
use crate::intents::StackId;
use crate::interval::{Advance, IntervalMap, NO_OFF};
use crate::model::{RoleId, Via};
use crate::summary::Summary;

/// Blocknrs at or above this are delalloc/unmapped sentinels.
pub(crate) const BH_SENTINEL: u64 = 1 << 62;
/// Dirty folios, buffer_heads and inode dirtiers older than this were written or freed
/// unseen (a file unlinked while dirty, whose one-page folios leave the page cache without
/// an event since the recorder filters order-0 page cache events; a block freed before
/// writeback): forgotten (ns). Writeback normally cleans a page within about 35 s.
const DIRTY_STALE_NS: u64 = 600_000_000_000;
/// Calls of [`Dirty::prefetch_next`] between loading a block's page slot and its value.
const AHEAD_STAGE: usize = 4;

/// Who dirtied something: the role and its stack at that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Dirtier {
    /// The role.
    pub role: RoleId,
    /// Its stack when it dirtied.
    pub stack: StackId,
}

/// A dirty buffer_head range's owner.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BhEnt {
    /// The dirtier charged.
    pub owner: Dirtier,
    /// How: [`Via::Buffer`], or [`Via::Inode`] for a buffer dirtied inside a `write_inode`
    /// bracket (the inode's dirtier).
    pub via: Via,
    /// Inode known at dirtying time (inode-bh propagation), else 0.
    pub ino: u64,
    /// When it was dirtied.
    pub t: u64,
}

impl Advance for BhEnt {
    fn advance(&self, _: u64) -> Self {
        *self
    }
}

/// A block whose page slot [`Dirty::prefetch_next`] started loading, and whose value it
/// loads [`AHEAD_STAGE`] calls later.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ahead {
    /// A dirty folio.
    Folio { bdi: Dev, ino: u64, index: u64 },
    /// A dirty buffer.
    Buffer { disk: Dev, a: u64 },
}

/// The dirty state of the trace.
#[derive(Debug)]
pub(crate) struct Dirty {
    /// Page size (bytes).
    page: u64,
    /// The kernel's inode state bits.
    bits: InodeBits,
    /// Folio orders per `(disk, ino, index)` while in the page cache.
    orders: FolioOrders,
    /// Dirty folios per `(bdi, ino)`.
    files: FxHashMap<(Dev, u64), DirtyFile>,
    /// Dirty buffer_heads per disk.
    bh: FxHashMap<Dev, IntervalMap<BhEnt>>,
    /// Inode dirtiers per `(bdi, ino)`, with when they dirtied it.
    inodes: FxHashMap<(Dev, u64), (Dirtier, u64)>,
    /// Blocks whose page slots [`Dirty::prefetch_next`] started loading during its last
    /// [`AHEAD_STAGE`] calls (a ring, next at `ahead_pos`): their values are loaded next.
    ahead: [Option<Ahead>; AHEAD_STAGE],
    ahead_pos: usize,
}

impl Dirty {
    /// Nothing dirty, on a host with pages of `page_size` bytes (4 KiB if that is no page
    /// size) whose kernel numbers inode states with `bits`.
    pub fn new(page_size: u32, bits: InodeBits) -> Dirty {
        let page = if page_size.is_power_of_two() && page_size >= 512 {
            page_size as u64
        } else {
            4096
        };
        Dirty {
            page,
            bits,
            orders: FolioOrders::default(),
            files: FxHashMap::default(),
            bh: FxHashMap::default(),
            inodes: FxHashMap::default(),
            ahead: [None; AHEAD_STAGE],
            ahead_pos: 0,
        }
    }

    // ------------------------------------------------------------------ prefetch

    /// Starts loading the page slot of the dirty folio `index` of `(bdi, ino)`, if that file
    /// has dirty folios: what to pass [`Dirty::prefetch_next`].
    #[inline]
    pub fn prefetch_folio(&self, bdi: Dev, ino: u64, index: u64) -> Option<Ahead> {
        self.files.get(&(bdi, ino)).map(|df| {
            df.folios.prefetch(index);
            Ahead::Folio { bdi, ino, index }
        })
    }

    /// Starts loading the page slot of the dirty buffer at sector `a` of `disk`, if the disk
    /// has dirty buffers: what to pass [`Dirty::prefetch_next`].
    #[inline]
    pub fn prefetch_buffer(&self, disk: Dev, a: u64) -> Option<Ahead> {
        self.bh.get(&disk).map(|m| {
            m.prefetch(a);
            Ahead::Buffer { disk, a }
        })
    }

    /// Queues `next` (whose page slot is loading) and starts loading the value of the block
    /// queued [`AHEAD_STAGE`] calls ago, its slot now in cache.
    #[inline]
    pub fn prefetch_next(&mut self, next: Option<Ahead>) {
        let due = std::mem::replace(&mut self.ahead[self.ahead_pos], next);
        self.ahead_pos = (self.ahead_pos + 1) % AHEAD_STAGE;
        match due {
            Some(Ahead::Folio { bdi, ino, index }) => {
                if let Some(df) = self.files.get(&(bdi, ino)) {
                    df.folios.prefetch_value(index);
                }
            }
            Some(Ahead::Buffer { disk, a }) => {
                if let Some(m) = self.bh.get(&disk) {
                    m.prefetch_value(a);
                }
            }
            None => {}
        }
    }

    // ------------------------------------------------------------------ page cache

    /// `mm_filemap_add_to_page_cache`: a folio of `1 << order` pages at `index`.
    pub fn folio_added(&mut self, devs: &Devices, s_dev: Dev, ino: u64, index: u64, order: u8) {
        let disk = devs.folio_disk(s_dev, ino);
        self.orders.insert((disk, ino, index), order.min(30));
    }

    /// `mm_filemap_delete_from_page_cache`: a folio leaving the page cache is no longer
    /// dirty (truncated, or written and evicted): its dirtier is forgotten.
    pub fn folio_deleted(&mut self, devs: &Devices, s_dev: Dev, ino: u64, index: u64, order: u8) {
        let disk = devs.folio_disk(s_dev, ino);
        self.orders.remove((disk, ino, index));
        let end = index.saturating_add(1u64 << order.min(30));
        for key in [(disk, ino), (0, ino)] {
            if let Some(df) = self.files.get_mut(&key) {
                df.remove_pages(index, end);
                if df.folios.is_empty() {
                    self.files.remove(&key);
                }
                break;
            }
        }
    }

    /// iomap writeback names each folio it writes with its size: a folio added to the page
    /// cache before the capture (order unknown, assumed one page when it was dirtied) gets its
    /// real extent, so the IO covering its other pages finds the dirtier.
    pub fn learn_folio_size(
        &mut self,
        devs: &Devices,
        s_dev: Dev,
        ino: u64,
        offset: u64,
        length: u64,
    ) {
        let page = self.page;
        if length <= page || offset % page != 0 || length % page != 0 {
            return;
        }
        let pages = length / page;
        let index = offset / page;
        // Folios are naturally aligned powers of two pages.
        if !pages.is_power_of_two() || index % pages != 0 || pages > 1 << 18 {
            return;
        }
        let disk = devs.folio_disk(s_dev, ino);
        self.orders
            .insert((disk, ino, index), pages.trailing_zeros().min(30) as u8);
        let key = if self.files.contains_key(&(disk, ino)) {
            (disk, ino)
        } else {
            (0, ino)
        };
        let Some(df) = self.files.get_mut(&key) else {
            return;
        };
        let end = index.saturating_add(pages);
        // Only a lone short record at the folio's head is widened; other records inside the
        // range would contradict the size, and are left as they are.
        if df.folios.overlaps(index + 1, end) {
            return;
        }
        if let Some((_, &f)) = df.folios.get(index) {
            if f.pages < pages {
                let wide = FolioEnt {
                    remaining: f.remaining.saturating_add((pages - f.pages) * page),
                    pages,
                    ..f
                };
                df.folios.insert(index, end, wide);
            }
        }
    }

    /// btrfs: pages `[p0, p1)` of `(bdi, ino)` are written by one ordered extent, so every
    /// one of them is dirty. A folio recorded as one page because its size was not seen (added
    /// to the page cache before the capture: no order) holds the pages after it that no other
    /// record holds, as far as a folio can reach: naturally aligned (at most the largest power
    /// of two dividing its index), before the next record, inside the extent, and at most
    /// [`MAX_FOLIO_PAGES`]. Returns the pages added.
    pub fn widen_unsized(&mut self, bdi: Dev, ino: u64, p0: u64, p1: u64) -> u64 {
        let page = self.page;
        let Some(df) = self.files.get_mut(&(bdi, ino)) else {
            return 0;
        };
        let mut keys: Vec<u64> = df.folios.overlapping(p0, p1).into_iter().collect();
        keys.sort_unstable();
        let mut added = 0;
        for (k, &i) in keys.iter().enumerate() {
            let Some((_, &f)) = df.folios.get(i) else {
                continue;
            };
            if f.pages != 1 || i < p0 || self.orders.get((bdi, ino, i)).is_some() {
                continue;
            }
            let next = keys.get(k + 1).copied().unwrap_or(p1).min(p1);
            let align = if i == 0 {
                MAX_FOLIO_PAGES
            } else {
                1u64 << i.trailing_zeros().min(62)
            };
            let mut n = align.min(MAX_FOLIO_PAGES);
            while n > 1 && i.saturating_add(n) > next {
                n /= 2;
            }
            if n > 1 {
                let wide = FolioEnt {
                    remaining: f.remaining.saturating_add((n - 1) * page),
                    pages: n,
                    ..f
                };
                df.folios.insert(i, i + n, wide);
                added += n - 1;
            }
        }
        added
    }

    /// The page size (bytes).
    pub fn page_size(&self) -> u64 {
        self.page
    }

    // ------------------------------------------------------------------ dirtying

    /// `writeback_dirty_folio`: folio `index` of `(bdi, ino)` went clean->dirty at `t`,
    /// dirtied by `owner`. It replaces whatever was recorded there (that was written).
    /// Returns the folio's bytes.
    pub fn put_folio(
        &mut self,
        bdi: Dev,
        ino: u64,
        index: u64,
        owner: Dirtier,
        via: Via,
        t: u64,
    ) -> u64 {
        let order = self.orders.get((bdi, ino, index)).unwrap_or(0);
        let pages = 1u64 << order;
        let df = self.files.entry((bdi, ino)).or_default();
        let ent = FolioEnt {
            pages,
            remaining: pages * self.page,
            owner,
            via,
            t,
            claimable: false,
        };
        df.put(index, ent);
        pages * self.page
    }

    /// [`Dirty::put_folio`], its dirtier's write covering pages `[wa, wb)` (its write range,
    /// where the trace gives it): the pages of a large folio outside it are left claimable
    /// by another task's write ([`Dirty::claim`]). Returns the folio's bytes.
    #[allow(clippy::too_many_arguments)]
    pub fn put_folio_written(
        &mut self,
        bdi: Dev,
        ino: u64,
        index: u64,
        owner: Dirtier,
        via: Via,
        t: u64,
        (wa, wb): (u64, u64),
    ) -> u64 {
        let bytes = self.put_folio(bdi, ino, index, owner, via, t);
        let pages = bytes / self.page;
        let (fa, fb) = (index, index.saturating_add(pages));
        let (a, b) = (wa.max(fa), wb.min(fb));
        if pages <= 1 || a >= b || (a == fa && b == fb) {
            return bytes;
        }
        let page = self.page;
        if let Some(df) = self.files.get_mut(&(bdi, ino)) {
            if let Some((_, &f)) = df.folios.get(index) {
                df.split(index, f, (a, b), None, page);
            }
        }
        bytes
    }

    /// A write by `owner` over pages `[a, b)` of `(bdi, ino)`: the claimable pages there (of
    /// a large folio dirtied first outside that write) become `owner`'s, via `via`, and
    /// claimable no more. Returns the pages taken from another dirtier.
    pub fn claim(
        &mut self,
        bdi: Dev,
        ino: u64,
        (a, b): (u64, u64),
        owner: Dirtier,
        via: Via,
    ) -> u64 {
        let page = self.page;
        let Some(df) = self.files.get_mut(&(bdi, ino)) else {
            return 0;
        };
        let mut taken = 0;
        for k in df.folios.overlapping(a, b) {
            let Some((_, &f)) = df.folios.get(k) else {
                continue;
            };
            if !f.claimable {
                continue;
            }
            let (ca, cb) = (a.max(k), b.min(k + f.pages));
            if ca >= cb {
                continue;
            }
            // Its first dirtier writing more of it makes those pages its own for good.
            if f.owner != owner || f.via != via {
                taken += cb - ca;
            }
            df.split(k, f, (ca, cb), Some((owner, via)), page);
        }
        taken
    }

    /// Whether sectors `[a, b)` of `disk` are one dirty buffer recorded recently enough at
    /// time `now` to be still dirty (the first dirtier wins until it is written).
    pub fn buffer_dirty(&self, disk: Dev, a: u64, b: u64, now: u64) -> bool {
        let limit = now.saturating_sub(DIRTY_STALE_NS);
        self.bh
            .get(&disk)
            .is_some_and(|m| m.covered_by(a, b, |e| e.t >= limit))
    }

    /// Records sectors `[a, b)` of `disk` as a dirty buffer, where no buffer dirtied
    /// recently enough (before `ent.t`) is recorded: a record so old that the buffer must
    /// have been written or freed unseen (a block freed while dirty and now reused) is
    /// replaced.
    pub fn put_buffer(&mut self, disk: Dev, a: u64, b: u64, ent: BhEnt) {
        let limit = ent.t.saturating_sub(DIRTY_STALE_NS);
        let m = self.bh.entry(disk).or_default();
        m.insert_if_free_keeping(a, b, ent, |e| e.t >= limit);
    }

    /// The dirty buffer recorded at sectors from `a` of `disk`, if one starts there.
    pub fn buffer_at_mut(&mut self, disk: Dev, a: u64) -> Option<&mut BhEnt> {
        self.bh.get_mut(&disk)?.starting_at_mut(a)
    }

    /// Whether `writeback_mark_inode_dirty` with `flags` on `(bdi, ino)` records a dirtier:
    /// the inode itself dirtied, and no dirtier recorded yet.
    pub fn wants_inode_dirtier(&self, bdi: Dev, ino: u64, flags: u64) -> bool {
        flags & self.bits.dirty_inode != 0 && !self.inodes.contains_key(&(bdi, ino))
    }

    /// Records `d` as the dirtier of inode `(bdi, ino)` at `t`.
    pub fn put_inode(&mut self, bdi: Dev, ino: u64, d: Dirtier, t: u64) {
        self.inodes.insert((bdi, ino), (d, t));
    }

    /// The dirtier of `inode`, if recorded.
    #[inline]
    pub fn inode_dirtier(&self, inode: (Dev, u64)) -> Option<Dirtier> {
        self.inodes.get(&inode).map(|&(d, _)| d)
    }

    /// `writeback_write_inode`: the inode was written.
    pub fn inode_written(&mut self, inode: (Dev, u64)) {
        self.inodes.remove(&inode);
    }

    /// `writeback_single_inode`: the inode left writeback, whose bracket began at `since`,
    /// in `state`. With no dirty page left, every folio dirtied before the bracket began
    /// was written (or dropped), whether or not its IO could be linked to it; likewise the
    /// inode itself, written or not (xfs has no write_inode).
    pub fn left_writeback(&mut self, bdi: Dev, ino: u64, state: u64, since: u64) {
        if state & self.bits.dirty_pages == 0 {
            self.forget_folios_before(bdi, ino, since);
        }
        if state & self.bits.dirty_inode == 0 {
            if let Some(&(_, dt)) = self.inodes.get(&(bdi, ino)) {
                if dt < since {
                    self.inodes.remove(&(bdi, ino));
                }
            }
        }
    }

    // ------------------------------------------------------------------ writing

    /// The dirty folios of `(bdi, ino)` (or of `(0, ino)` when the bdi name was not a
    /// device), as the page lookups find them.
    fn file_key(&self, bdi: Dev, ino: u64) -> Option<(Dev, u64)> {
        if self.files.contains_key(&(bdi, ino)) {
            Some((bdi, ino))
        } else if self.files.contains_key(&(0, ino)) {
            Some((0, ino))
        } else {
            None
        }
    }

    /// Whether `(bdi, ino)` itself (no fallback) has dirty folios.
    pub fn has_folios(&self, bdi: Dev, ino: u64) -> bool {
        self.files.contains_key(&(bdi, ino))
    }

    /// Forgets the folios of `(bdi, ino)` dirtied before `t`.
    fn forget_folios_before(&mut self, bdi: Dev, ino: u64, t: u64) {
        let Some(key) = self.file_key(bdi, ino) else {
            return;
        };
        if let Some(df) = self.files.get_mut(&key) {
            df.remove_older_than(t);
            if df.folios.is_empty() {
                self.files.remove(&key);
            }
        }
    }

    /// Takes the dirty buffers overlapping sectors `[s, e)` of `disk` (cut to them, in
    /// order) into `out`: they are being written.
    pub fn take_buffers(&mut self, disk: Dev, s: u64, e: u64, out: &mut Vec<(u64, u64, BhEnt)>) {
        if let Some(m) = self.bh.get_mut(&disk) {
            m.take(s, e, out);
            if m.is_empty() {
                self.bh.remove(&disk);
            }
        }
    }

    /// Sectors `[a, b)` write the file bytes from `foff` of `(bdi, ino)`: calls
    /// `f(first sector, end sector, dirtier, via, file offset)` for each part of a dirty folio
    /// they write, and counts those bytes as written (a folio wholly written is forgotten).
    pub fn write_folios(
        &mut self,
        bdi: Dev,
        ino: u64,
        a: u64,
        b: u64,
        foff: u64,
        mut f: impl FnMut(u64, u64, Dirtier, Via, u64),
    ) {
        if foff == NO_OFF {
            return;
        }
        let key = if self.files.contains_key(&(bdi, ino)) {
            (bdi, ino)
        } else if self.files.contains_key(&(0, ino)) {
            (0, ino)
        } else {
            return;
        };
        let page = self.page;
        let Some(df) = self.files.get_mut(&key) else {
            return;
        };
        let fb0 = foff;
        let fb1 = foff.saturating_add((b - a).saturating_mul(512));
        let p0 = fb0 / page;
        let p1 = fb1.div_ceil(page);
        for k in df.folios.overlapping(p0, p1) {
            let Some((_, e)) = df.folios.get_mut(k) else {
                continue;
            };
            let fs = k.saturating_mul(page);
            let fe = k.saturating_add(e.pages).saturating_mul(page);
            let ob0 = fs.max(fb0);
            let ob1 = fe.min(fb1);
            if ob0 >= ob1 {
                continue;
            }
            let sa = a + (ob0 - fb0) / 512;
            let sb = a.saturating_add((ob1 - fb0).div_ceil(512)).min(b);
            f(sa, sb, e.owner, e.via, ob0);
            e.remaining = e.remaining.saturating_sub(ob1 - ob0);
            if e.remaining == 0 {
                df.forget(k);
            }
        }
        if df.folios.is_empty() {
            self.files.remove(&key);
        }
    }

    /// Counts `bytes` of `d`'s dirty folios of `(bdi, ino)` as written (see
    /// [`DirtyFile::consume`]).
    pub fn consume(&mut self, bdi: Dev, ino: u64, d: Dirtier, via: Via, bytes: u64) {
        let Some(key) = self.file_key(bdi, ino) else {
            return;
        };
        if let Some(df) = self.files.get_mut(&key) {
            df.consume(d, via, bytes);
            if df.folios.is_empty() {
                self.files.remove(&key);
            }
        }
    }

    /// `(bdi, ino)`'s dirty folios (no fallback) owned by `from` become `to`'s; returns how
    /// many.
    pub fn reown_folios(&mut self, bdi: Dev, ino: u64, from: Dirtier, to: Dirtier) -> u64 {
        match self.files.get_mut(&(bdi, ino)) {
            Some(df) => df.reown(from, to),
            None => 0,
        }
    }

    /// The dirty folio starting at page `index` of `(bdi, ino)` becomes `to`'s if `from`
    /// dirtied it at `t` (it was not written since); returns whether it did.
    pub fn reown_folio(
        &mut self,
        bdi: Dev,
        ino: u64,
        index: u64,
        (from, t): (Dirtier, u64),
        to: Dirtier,
    ) -> bool {
        let Some(df) = self.files.get_mut(&(bdi, ino)) else {
            return false;
        };
        let Some((_, &ent)) = df.folios.get(index) else {
            return false;
        };
        if ent.owner != from || ent.t != t || from == to {
            return false;
        }
        df.put(index, FolioEnt { owner: to, ..ent });
        true
    }

    /// `(bdi, ino)`'s inode dirtier becomes `to` if it is `from`; returns whether it did.
    pub fn reown_inode(&mut self, bdi: Dev, ino: u64, from: Dirtier, to: Dirtier) -> bool {
        match self.inodes.get_mut(&(bdi, ino)) {
            Some((d, _)) if *d == from => {
                *d = to;
                true
            }
            _ => false,
        }
    }

    /// The only dirtier of `(bdi, ino)`'s dirty folios (no fallback), if it has exactly one.
    pub fn only_dirtier(&self, bdi: Dev, ino: u64) -> Option<(Dirtier, Via)> {
        self.files
            .get(&(bdi, ino))
            .and_then(|df| match df.owners[..] {
                [(d, via, _)] => Some((d, via)),
                _ => None,
            })
    }

    // ------------------------------------------------------------------ bookkeeping

    /// Forgets what is older than [`DIRTY_STALE_NS`] at `now`: dirty state that outlived any
    /// writeback was freed or unlinked unseen.
    pub fn sweep(&mut self, now: u64) {
        let limit_dirty = now.saturating_sub(DIRTY_STALE_NS);
        self.bh.retain(|_, m| {
            m.retain(|e| e.t >= limit_dirty);
            !m.is_empty()
        });
        self.inodes.retain(|_, o| o.1 >= limit_dirty);
        self.files.retain(|_, df| {
            df.remove_older_than(limit_dirty);
            !df.folios.is_empty()
        });
    }

    /// Adds what is still dirty to the summary's leftovers.
    pub fn leftovers(&self, s: &mut Summary) {
        for df in self.files.values() {
            s.dirty_folios_left += df.folios.len() as u64;
            s.dirty_pages_left += df.folios.iter().map(|(_, _, f)| f.pages).sum::<u64>();
        }
        s.dirty_buffers_left = self.bh.values().map(|m| m.len() as u64).sum();
        s.dirty_inodes_left = self.inodes.len() as u64;
    }

    /// Files with dirty folios.
    pub fn files_len(&self) -> usize {
        self.files.len()
    }

    /// Dirty folios.
    pub fn folios_len(&self) -> usize {
        self.files.values().map(|d| d.folios.len()).sum()
    }

    /// Dirty buffer_head intervals.
    pub fn buffers_len(&self) -> usize {
        self.bh.values().map(IntervalMap::len).sum()
    }

    /// Inodes with a recorded dirtier.
    pub fn inodes_len(&self) -> usize {
        self.inodes.len()
    }

    /// Folio orders of the page cache.
    pub fn orders_len(&self) -> usize {
        self.orders.young.len() + self.orders.old.len()
    }
}

/// The largest folio the page cache makes, in pages (`MAX_PAGECACHE_ORDER` is the PMD order,
/// 9 on x86-64 with 4 KiB pages: 2 MiB).
pub(crate) const MAX_FOLIO_PAGES: u64 = 512;

/// A dirty folio.
#[derive(Debug, Clone, Copy)]
struct FolioEnt {
    pages: u64,
    /// Bytes not yet seen written.
    remaining: u64,
    owner: Dirtier,
    via: Via,
    /// When it was dirtied.
    t: u64,
    /// Pages of a large folio outside its first dirtier's write: another task's write
    /// there takes them ([`Dirty::claim`]).
    claimable: bool,
}

/// The dirty folios of one `(bdi, ino)`, keyed by page index (folios are naturally
/// aligned powers of two pages, so [`Blocks`] finds them by hashing).
#[derive(Debug, Default)]
struct DirtyFile {
    folios: Blocks<FolioEnt>,
    /// Distinct owners with their folio counts.
    owners: Vec<(Dirtier, Via, u32)>,
    /// The indexes of a dirtier's folios in order, for each dirtier [`DirtyFile::consume`]
    /// was called for: built by its first call, then kept up to date as folios come and go,
    /// so each call costs what it consumes, not a walk of the file's folios.
    queues: Vec<(Dirtier, Via, BTreeSet<u64>)>,
}

impl DirtyFile {
    fn inc(&mut self, d: Dirtier, via: Via) {
        match self.owners.iter_mut().find(|o| o.0 == d && o.1 == via) {
            Some(o) => o.2 += 1,
            None => self.owners.push((d, via, 1)),
        }
    }
    fn dec(&mut self, d: Dirtier, via: Via) {
        if let Some(i) = self.owners.iter().position(|o| o.0 == d && o.1 == via) {
            self.owners[i].2 -= 1;
            if self.owners[i].2 == 0 {
                self.owners.swap_remove(i);
            }
        }
    }

    /// The queue of `d`'s folios, if [`DirtyFile::consume`] made one.
    fn queue(&mut self, d: Dirtier, via: Via) -> Option<&mut BTreeSet<u64>> {
        self.queues
            .iter_mut()
            .find(|q| q.0 == d && q.1 == via)
            .map(|q| &mut q.2)
    }

    /// Records a dirtied folio, forgetting the folios it overlaps.
    fn put(&mut self, index: u64, ent: FolioEnt) {
        let end = index.saturating_add(ent.pages.max(1));
        if end <= index {
            return;
        }
        let mut gone: SmallVec<[(u64, Dirtier, Via); 2]> = SmallVec::new();
        self.folios.replace(index, end, ent, |k, _, old| {
            gone.push((k, old.owner, old.via))
        });
        for (k, d, via) in gone {
            self.dec(d, via);
            if let Some(q) = self.queue(d, via) {
                q.remove(&k);
            }
        }
        self.inc(ent.owner, ent.via);
        if let Some(q) = self.queue(ent.owner, ent.via) {
            q.insert(index);
        }
    }

    /// Cuts the folio record `f` at `k` around pages `[a, b)` (inside it): that part is
    /// `to`'s when given (claimed: no longer claimable), else `f`'s owner's as it is; the
    /// rest stays `f`'s owner's, claimable. Bytes not yet written are shared by pages.
    fn split(
        &mut self,
        k: u64,
        f: FolioEnt,
        (a, b): (u64, u64),
        to: Option<(Dirtier, Via)>,
        page: u64,
    ) {
        self.forget(k);
        let end = k + f.pages;
        let share = |n: u64| (f.remaining as u128 * n as u128 / f.pages.max(1) as u128) as u64;
        let piece = |pages: u64, claimable: bool| FolioEnt {
            pages,
            remaining: share(pages).min(pages * page),
            claimable,
            ..f
        };
        if k < a {
            self.put(k, piece(a - k, true));
        }
        let mut mid = piece(b - a, to.is_none() && f.claimable);
        if let Some((owner, via)) = to {
            mid.owner = owner;
            mid.via = via;
        }
        self.put(a, mid);
        if b < end {
            self.put(b, piece(end - b, true));
        }
    }

    /// Forgets the folios overlapping pages `[index, end)`.
    fn remove_pages(&mut self, index: u64, end: u64) {
        for k in self.folios.overlapping(index, end) {
            self.forget(k);
        }
    }

    /// Forgets the folio at `k`, if any.
    fn forget(&mut self, k: u64) {
        if let Some((_, old)) = self.folios.remove(k) {
            self.dec(old.owner, old.via);
            if let Some(q) = self.queue(old.owner, old.via) {
                q.remove(&k);
            }
        }
    }

    /// The folios owned by `from` become `to`'s (with the same via); returns how many.
    fn reown(&mut self, from: Dirtier, to: Dirtier) -> u64 {
        if from == to || !self.owners.iter().any(|o| o.0 == from) {
            return 0;
        }
        // Rare: the queues are rebuilt when next needed.
        self.queues.clear();
        let mut n = 0;
        let mine: Vec<u64> = self
            .folios
            .iter()
            .filter(|(_, _, f)| f.owner == from)
            .map(|(k, _, _)| k)
            .collect();
        for k in mine {
            if let Some((_, f)) = self.folios.get_mut(k) {
                if f.owner == from {
                    f.owner = to;
                    n += 1;
                }
            }
        }
        let mut owners: Vec<(Dirtier, Via, u32)> = Vec::with_capacity(self.owners.len());
        for (d, via, c) in self.owners.drain(..) {
            let d = if d == from { to } else { d };
            match owners.iter_mut().find(|o| o.0 == d && o.1 == via) {
                Some(o) => o.2 += c,
                None => owners.push((d, via, c)),
            }
        }
        self.owners = owners;
        n
    }

    /// Forgets the folios dirtied before `t`.
    fn remove_older_than(&mut self, t: u64) {
        // Rare: the queues are rebuilt when next needed.
        self.queues.clear();
        let mut gone = Vec::new();
        self.folios.retain(|f| {
            if f.t < t {
                gone.push((f.owner, f.via));
            }
            f.t >= t
        });
        for (d, via) in gone {
            self.dec(d, via);
        }
    }

    /// Counts `bytes` of `d`'s folios as written when the IO that wrote them gives no file
    /// offset (a buffer_head link, the single-dirtier rule): lowest index first, as
    /// writeback goes. Returns nothing; emptied folios are forgotten.
    fn consume(&mut self, d: Dirtier, via: Via, mut bytes: u64) {
        if bytes == 0 || !self.owners.iter().any(|o| o.0 == d && o.1 == via) {
            return;
        }
        let qi = match self.queues.iter().position(|q| q.0 == d && q.1 == via) {
            Some(i) => i,
            None => {
                let mine = self
                    .folios
                    .iter()
                    .filter(|(_, _, f)| f.owner == d && f.via == via)
                    .map(|(k, _, _)| k)
                    .collect();
                self.queues.push((d, via, mine));
                self.queues.len() - 1
            }
        };
        while bytes > 0 {
            let Some(&k) = self.queues[qi].2.first() else {
                break;
            };
            let left = match self.folios.get_mut(k) {
                Some((_, f)) if f.owner == d && f.via == via => {
                    let n = bytes.min(f.remaining);
                    f.remaining -= n;
                    bytes -= n;
                    f.remaining
                }
                _ => {
                    // Not `d`'s folio any more. The queue is kept up to date, so this is
                    // only a safeguard.
                    self.queues[qi].2.remove(&k);
                    continue;
                }
            };
            if left > 0 {
                // `bytes` ran out inside this folio.
                break;
            }
            // Also takes it out of the queue.
            self.forget(k);
        }
        if self.queues[qi].2.is_empty() {
            self.queues.swap_remove(qi);
        }
    }
}

/// Folio orders per `(disk, ino, index)` while in the page cache. Two generations bound
/// the memory when `delete_from_page_cache` is not recorded: when the young one is full it
/// becomes the old one; lookups refresh what they find.
#[derive(Debug, Default)]
struct FolioOrders {
    young: FxHashMap<(Dev, u64, u64), u8>,
    old: FxHashMap<(Dev, u64, u64), u8>,
}

/// Entries per generation of [`FolioOrders`].
const FOLIO_ORDERS_CAP: usize = 1 << 21;

impl FolioOrders {
    /// Records the order of the folio at `k`. Order 0 is what a missing entry means, so it is
    /// stored as the absence of one (small-folio workloads keep the maps small).
    fn insert(&mut self, k: (Dev, u64, u64), order: u8) {
        if order == 0 {
            self.remove(k);
            return;
        }
        if self.young.len() >= FOLIO_ORDERS_CAP {
            self.old = std::mem::take(&mut self.young);
        }
        self.young.insert(k, order);
    }
    fn remove(&mut self, k: (Dev, u64, u64)) {
        self.young.remove(&k);
        self.old.remove(&k);
    }
    fn get(&mut self, k: (Dev, u64, u64)) -> Option<u8> {
        if let Some(&o) = self.young.get(&k) {
            return Some(o);
        }
        let o = self.old.remove(&k)?;
        self.insert(k, o);
        Some(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    /// `DirtyFile::consume` as it was before the queues: collect the dirtier's folios, sort
    /// them, consume lowest index first.
    fn consume_by_walk(f: &mut DirtyFile, d: Dirtier, via: Via, mut bytes: u64) {
        if bytes == 0 || !f.owners.iter().any(|o| o.0 == d && o.1 == via) {
            return;
        }
        let mut mine: Vec<u64> = f
            .folios
            .iter()
            .filter(|(_, _, e)| e.owner == d && e.via == via)
            .map(|(k, _, _)| k)
            .collect();
        mine.sort_unstable();
        for k in mine {
            if bytes == 0 {
                break;
            }
            let Some((_, e)) = f.folios.get_mut(k) else {
                continue;
            };
            let n = bytes.min(e.remaining);
            e.remaining -= n;
            bytes -= n;
            if e.remaining == 0 {
                f.forget(k);
            }
        }
    }

    /// A folio as the model test compares it: start, end, bytes remaining, owner.
    type Folio = (u64, u64, u64, Dirtier, Via);

    /// What a dirty file holds: its folios in order, and its owners' counts.
    fn contents(f: &DirtyFile) -> (Vec<Folio>, Vec<(Dirtier, Via, u32)>) {
        let mut folios: Vec<_> = f
            .folios
            .iter()
            .map(|(k, e, v)| (k, e, v.remaining, v.owner, v.via))
            .collect();
        folios.sort_unstable_by_key(|x| x.0);
        let mut owners = f.owners.clone();
        owners.sort_unstable_by_key(|o| (o.0.role, o.0.stack, o.1));
        (folios, owners)
    }

    /// One folio re-owned: only if its dirtier and time are the ones given (not written and
    /// dirtied again since), the owners' counts moved with it.
    #[test]
    fn reown_folio_moves_one_folio_if_unchanged() {
        let mut d = Dirty::new(4096, InodeBits::V6_18);
        let (w, x) = (
            Dirtier {
                role: RoleId(1),
                stack: 7,
            },
            Dirtier {
                role: RoleId(2),
                stack: 7,
            },
        );
        d.put_folio(5, 1, 10, w, Via::Page, 100);
        d.put_folio(5, 1, 11, w, Via::Page, 100);
        assert!(!d.reown_folio(5, 1, 10, (w, 99), x), "another time");
        assert!(!d.reown_folio(5, 1, 12, (w, 100), x), "no folio there");
        assert!(!d.reown_folio(5, 2, 10, (w, 100), x), "another file");
        assert!(d.reown_folio(5, 1, 10, (w, 100), x));
        assert!(!d.reown_folio(5, 1, 10, (w, 100), x), "already moved");
        let (folios, owners) = contents(&d.files[&(5, 1)]);
        assert_eq!(
            folios.iter().map(|f| (f.0, f.3)).collect::<Vec<_>>(),
            [(10, x), (11, w)]
        );
        assert_eq!(owners, [(w, Via::Page, 1), (x, Via::Page, 1)]);
    }

    /// The consume queues give what walking the folios gave, whatever dirtying, forgetting
    /// and consuming come between calls; and a queue holds exactly its dirtier's folios.
    #[test]
    fn consume_queues_match_walking_the_folios() {
        let owners = [
            (
                Dirtier {
                    role: RoleId(1),
                    stack: 1,
                },
                Via::Page,
            ),
            (
                Dirtier {
                    role: RoleId(2),
                    stack: 1,
                },
                Via::Page,
            ),
            (
                Dirtier {
                    role: RoleId(1),
                    stack: 1,
                },
                Via::Buffer,
            ),
        ];
        for seed in 1..=30u64 {
            let mut rng = Rng::new(seed);
            let (mut fast, mut slow) = (DirtyFile::default(), DirtyFile::default());
            for step in 0..600 {
                let (d, via) = owners[rng.below(owners.len() as u64) as usize];
                match rng.below(10) {
                    0..=4 => {
                        let pages = 1 << rng.below(3);
                        let index = rng.below(256) & !(pages - 1);
                        let ent = FolioEnt {
                            pages,
                            remaining: pages * 4096 - rng.below(4096),
                            owner: d,
                            via,
                            t: step,
                            claimable: false,
                        };
                        fast.put(index, ent);
                        slow.put(index, ent);
                    }
                    5 => {
                        let k = rng.below(256);
                        fast.forget(k);
                        slow.forget(k);
                    }
                    6 if rng.below(8) == 0 => {
                        let t = step.saturating_sub(rng.below(100));
                        fast.remove_older_than(t);
                        slow.remove_older_than(t);
                    }
                    _ => {
                        let bytes = rng.below(6 * 4096);
                        fast.consume(d, via, bytes);
                        consume_by_walk(&mut slow, d, via, bytes);
                    }
                }
                assert_eq!(contents(&fast), contents(&slow), "seed {seed} step {step}");
                for (qd, qv, q) in &fast.queues {
                    let mine: BTreeSet<u64> = fast
                        .folios
                        .iter()
                        .filter(|(_, _, e)| e.owner == *qd && e.via == *qv)
                        .map(|(k, _, _)| k)
                        .collect();
                    assert_eq!(q, &mine, "seed {seed} step {step}: queue of {qd:?} {qv:?}");
                }
            }
        }
    }

    const DISK: Dev = 8 << 20;

    fn d(role: u32) -> Dirtier {
        Dirtier {
            role: RoleId(role),
            stack: 0,
        }
    }

    /// What `write_folios` hands out: `(first sector, end sector, role, file offset)`.
    fn written(
        dirty: &mut Dirty,
        ino: u64,
        a: u64,
        b: u64,
        foff: u64,
    ) -> Vec<(u64, u64, u32, u64)> {
        let mut out = Vec::new();
        dirty.write_folios(DISK, ino, a, b, foff, |sa, sb, o, _, off| {
            out.push((sa, sb, o.role.0, off))
        });
        out
    }

    #[test]
    fn written_folios_are_charged_to_their_dirtiers_and_forgotten() {
        let devs = Devices::default();
        let mut dirty = Dirty::new(4096, InodeBits::V6_18);
        // a folio of 4 pages at index 4, one page at index 8
        dirty.folio_added(&devs, DISK, 12, 4, 2);
        dirty.put_folio(DISK, 12, 4, d(1), Via::Page, 0);
        dirty.put_folio(DISK, 12, 8, d(2), Via::Page, 0);
        assert_eq!(dirty.only_dirtier(DISK, 12), None);
        // file bytes 8 KiB..40 KiB at sectors 100..164: no folio at 8 KiB, then the big
        // folio, then the page
        assert_eq!(
            written(&mut dirty, 12, 100, 164, 8192),
            vec![(116, 148, 1, 16384), (148, 156, 2, 32768)]
        );
        assert_eq!(dirty.folios_len(), 0);
        assert_eq!(dirty.files_len(), 0);
        // an unknown offset writes nothing
        dirty.put_folio(DISK, 12, 0, d(1), Via::Page, 0);
        assert!(written(&mut dirty, 12, 0, 8, NO_OFF).is_empty());
        // part of a page: the rest stays dirty
        assert_eq!(written(&mut dirty, 12, 0, 4, 0), vec![(0, 4, 1, 0)]);
        assert_eq!(dirty.folios_len(), 1);
        assert_eq!(dirty.only_dirtier(DISK, 12), Some((d(1), Via::Page)));
        assert_eq!(written(&mut dirty, 12, 4, 8, 2048), vec![(4, 8, 1, 2048)]);
        assert_eq!(dirty.folios_len(), 0);
    }

    #[test]
    fn folios_of_an_unnamed_bdi_are_found_by_inode() {
        let mut dirty = Dirty::new(4096, InodeBits::V6_18);
        dirty.put_folio(0, 12, 0, d(1), Via::Page, 0);
        assert!(!dirty.has_folios(DISK, 12));
        assert_eq!(written(&mut dirty, 12, 0, 8, 0), vec![(0, 8, 1, 0)]);
        dirty.put_folio(0, 12, 1, d(1), Via::Page, 0);
        dirty.consume(DISK, 12, d(1), Via::Page, 4096);
        assert_eq!(dirty.files_len(), 0);
    }

    #[test]
    fn page_cache_events_follow_folios() {
        let devs = Devices::default();
        let mut dirty = Dirty::new(4096, InodeBits::V6_18);
        dirty.folio_added(&devs, DISK, 12, 16, 2);
        dirty.put_folio(DISK, 12, 16, d(1), Via::Page, 0);
        assert_eq!((dirty.orders_len(), dirty.folios_len()), (1, 1));
        // leaving the page cache: no longer dirty
        dirty.folio_deleted(&devs, DISK, 12, 16, 2);
        assert_eq!((dirty.orders_len(), dirty.files_len()), (0, 0));
        // a folio dirtied with its order unknown, whose size iomap writeback tells
        dirty.put_folio(DISK, 12, 32, d(1), Via::Page, 0);
        dirty.learn_folio_size(&devs, DISK, 12, 32 * 4096, 4 * 4096);
        assert_eq!(
            written(&mut dirty, 12, 0, 32, 32 * 4096),
            vec![(0, 32, 1, 32 * 4096)]
        );
        assert_eq!(dirty.files_len(), 0);
    }

    #[test]
    fn the_first_buffer_dirtier_wins_until_stale() {
        let mut dirty = Dirty::new(4096, InodeBits::V6_18);
        let ent = |role, t| BhEnt {
            owner: d(role),
            via: Via::Buffer,
            ino: 0,
            t,
        };
        assert!(!dirty.buffer_dirty(DISK, 0, 8, 10));
        dirty.put_buffer(DISK, 0, 8, ent(1, 10));
        assert!(dirty.buffer_dirty(DISK, 0, 8, 20));
        dirty.put_buffer(DISK, 0, 8, ent(2, 20));
        let mut out = Vec::new();
        dirty.take_buffers(DISK, 0, 8, &mut out);
        assert_eq!(
            out.iter().map(|x| x.2.owner.role.0).collect::<Vec<_>>(),
            vec![1]
        );
        assert_eq!(dirty.buffers_len(), 0);
        // a record so old the buffer must have been written unseen: replaced
        dirty.put_buffer(DISK, 0, 8, ent(1, 10));
        let late = 10 + DIRTY_STALE_NS + 1;
        assert!(!dirty.buffer_dirty(DISK, 0, 8, late));
        dirty.put_buffer(DISK, 0, 8, ent(2, late));
        out.clear();
        dirty.take_buffers(DISK, 0, 8, &mut out);
        assert_eq!(
            out.iter().map(|x| x.2.owner.role.0).collect::<Vec<_>>(),
            vec![2]
        );
    }

    #[test]
    fn an_inode_leaving_writeback_clean_forgets_what_was_dirtied_before() {
        let bits = InodeBits::V6_18;
        let mut dirty = Dirty::new(4096, bits);
        assert!(!dirty.wants_inode_dirtier(DISK, 12, bits.dirty_pages));
        assert!(dirty.wants_inode_dirtier(DISK, 12, bits.dirty_inode));
        dirty.put_inode(DISK, 12, d(1), 10);
        assert!(!dirty.wants_inode_dirtier(DISK, 12, bits.dirty_inode));
        dirty.put_folio(DISK, 12, 0, d(1), Via::Page, 10);
        dirty.put_folio(DISK, 12, 1, d(2), Via::Page, 30);
        // still dirty: nothing forgotten
        dirty.left_writeback(DISK, 12, bits.dirty_pages | bits.dirty_inode, 20);
        assert_eq!((dirty.folios_len(), dirty.inodes_len()), (2, 1));
        // clean: what was dirtied before the bracket began (at 20) is forgotten
        dirty.left_writeback(DISK, 12, 0, 20);
        assert_eq!((dirty.folios_len(), dirty.inodes_len()), (1, 0));
        assert_eq!(dirty.only_dirtier(DISK, 12), Some((d(2), Via::Page)));
        dirty.put_inode(DISK, 12, d(1), 10);
        dirty.inode_written((DISK, 12));
        assert_eq!(dirty.inode_dirtier((DISK, 12)), None);
    }

    #[test]
    fn stale_dirty_state_is_swept() {
        let mut dirty = Dirty::new(4096, InodeBits::V6_18);
        dirty.put_folio(DISK, 12, 0, d(1), Via::Page, 10);
        dirty.put_folio(DISK, 12, 1, d(1), Via::Page, 1_000);
        dirty.put_inode(DISK, 12, d(1), 10);
        dirty.put_buffer(
            DISK,
            0,
            8,
            BhEnt {
                owner: d(1),
                via: Via::Buffer,
                ino: 0,
                t: 10,
            },
        );
        dirty.sweep(500 + DIRTY_STALE_NS);
        assert_eq!(
            (dirty.folios_len(), dirty.inodes_len(), dirty.buffers_len()),
            (1, 0, 0)
        );
        let mut s = Summary::default();
        dirty.leftovers(&mut s);
        assert_eq!((s.dirty_folios_left, s.dirty_pages_left), (1, 1));
    }

    #[test]
    fn folio_orders_keep_recent_entries_within_two_generations() {
        let mut f = FolioOrders::default();
        f.insert((1, 1, 0), 8);
        for i in 1..FOLIO_ORDERS_CAP as u64 {
            f.insert((1, 2, i), 1);
        }
        // the young generation is full: the next insert retires it
        f.insert((1, 3, 0), 4);
        assert_eq!(f.young.len(), 1);
        // found in the old generation, and refreshed
        assert_eq!(f.get((1, 1, 0)), Some(8));
        assert!(f.young.contains_key(&(1, 1, 0)));
        f.remove((1, 1, 0));
        assert_eq!(f.get((1, 1, 0)), None);
        assert_eq!(f.get((1, 3, 0)), Some(4));
        // order 0 is the default: stored as no entry, and it replaces a larger one
        f.insert((1, 3, 0), 0);
        assert_eq!(f.get((1, 3, 0)), None);
        assert!(!f.young.contains_key(&(1, 3, 0)));
    }
}
