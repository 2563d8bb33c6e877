//! The streaming attribution state machine.
//!
//! See `kernel-events.md` §6 for the algorithm. State kept, all removed when consumed:
//! * dirty folios per `(bdi, ino)` (first dirtier since the last writeback), folio orders
//!   per `(disk, ino, index)` while in the page cache;
//! * dirty buffer_head sector ranges per disk, inode dirtiers per `(bdi, ino)`;
//! * per thread: the brackets it is in and the sector->file maps it just emitted;
//! * per disk: queued bio fragments (sector intervals carrying their charge), and the
//!   issued requests keyed `(disk, current sector)`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use ioblame_decode::{CommitPhase, Dev, Event, EventKind, Rwbs, WorkPhase, XfsFileOp};
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

use crate::blocks::Blocks;
use crate::context::{classify_stack, Context, DevInfo, STACK_DIO, STACK_JOURNAL};
use crate::interval::{Advance, IntervalMap, Paint};
use crate::model::*;
use crate::summary::{LostWindow, Summary, UnknownContext};

/// Interned stack id (0 = empty stack).
type StackId = u32;

/// What tells acts apart: role, intent, file, link, and (for the lost intent) reason and
/// issuer.
type ActKey = (RoleId, IntentId, Dev, u64, Via, u32, RoleId);

const NO_OFF: u64 = u64::MAX;
const NO_REASON: u32 = u32::MAX;
const NO_TXN: u32 = u32::MAX;
/// Blocknrs at or above this are delalloc/unmapped sentinels.
const BH_SENTINEL: u64 = 1 << 62;
/// `IOMAP_MAPPED`, `IOMAP_UNWRITTEN`.
const IOMAP_MAPPED: u16 = 2;
const IOMAP_UNWRITTEN: u16 = 3;
/// A thread's sector->file maps beyond this many intervals are dropped (stale).
const MAX_TID_RMAP: usize = 4096;
/// Bios queued or requests issued this long ago without progress are forgotten (ns).
const STALE_NS: u64 = 120_000_000_000;
/// Trace time between sweeps for stale state (ns).
const SWEEP_INTERVAL_NS: u64 = 10_000_000_000;
/// Dirty folios, buffer_heads and inode dirtiers older than this were written or freed
/// unseen (a file unlinked while dirty, whose one-page folios leave the page cache without
/// an event since the recorder filters order-0 page cache events; a block freed before
/// writeback): forgotten (ns). Writeback normally cleans a page within about 35 s.
const DIRTY_STALE_NS: u64 = 600_000_000_000;
/// A thread's sector->file maps not followed by their bio within this time are forgotten
/// (ns); so is what it last read.
const RMAP_STALE_NS: u64 = 5_000_000_000;
/// Loss windows kept (more are merged).
const MAX_LOST_WINDOWS: usize = 1024;
/// Exited tasks are forgotten this long after their exit (ns of trace time).
const TASK_GRACE_NS: u64 = 30_000_000_000;
/// Warnings kept in the summary; more are only counted.
const MAX_WARNINGS: usize = 64;

/// Adds a warning to the summary, up to [`MAX_WARNINGS`].
fn warn(s: &mut Summary, msg: impl FnOnce() -> String) {
    if s.warnings.len() < MAX_WARNINGS {
        s.warnings.push(msg());
    } else {
        s.warnings_suppressed += 1;
    }
}

/// Flushes waiting for completion per device beyond this many are forgotten.
const MAX_FLUSHES: usize = 1024;
/// Remap hints beyond this many are dropped.
const MAX_REMAP_HINTS: usize = 4096;

/// Who dirtied something: the role and its stack at that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Dirtier {
    role: RoleId,
    stack: StackId,
}

/// What a sector of a queued bio is charged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Charge {
    role: RoleId,
    stack: StackId,
    via: Via,
    fdev: Dev,
    ino: u64,
    issuer: RoleId,
    reason: u32,
    txn: u32,
    qtime: u64,
    /// The rwbs of the bio (the request's, for sectors no bio was seen for).
    rwbs: Rwbs,
}

/// A charge plus the file byte offset of the interval's first sector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Frag {
    c: Charge,
    foff: u64,
}

impl Advance for Frag {
    fn advance(&self, sectors: u64) -> Self {
        Frag {
            c: self.c,
            foff: adv_off(self.foff, sectors),
        }
    }
}

fn adv_off(off: u64, sectors: u64) -> u64 {
    if off == NO_OFF {
        NO_OFF
    } else {
        off.saturating_add(sectors.saturating_mul(512))
    }
}

/// A sector->file mapping emitted by the filesystem just before the bio.
#[derive(Debug, Clone, Copy)]
struct Rmap {
    ino: u64,
    foff: u64,
    /// When it was emitted.
    t: u64,
}

impl Advance for Rmap {
    fn advance(&self, sectors: u64) -> Self {
        Rmap {
            foff: adv_off(self.foff, sectors),
            ..*self
        }
    }
}

/// A dirty buffer_head range's owner.
#[derive(Debug, Clone, Copy)]
struct BhEnt {
    owner: Dirtier,
    via: Via,
    /// Inode known at dirtying time (inode-bh propagation), else 0.
    ino: u64,
    /// When it was dirtied.
    t: u64,
}

impl Advance for BhEnt {
    fn advance(&self, _: u64) -> Self {
        *self
    }
}

/// Neighbouring dirty buffers of a request charged alike: sectors `[a, b)`, their charge,
/// and the dirtier whose folios their bytes count against, if any.
struct BhRun {
    a: u64,
    b: u64,
    frag: Frag,
    consume: Option<Dirtier>,
}

#[derive(Debug, Clone, Copy)]
struct FolioEnt {
    pages: u64,
    /// Bytes not yet seen written.
    remaining: u64,
    owner: Dirtier,
    via: Via,
    /// When it was dirtied.
    t: u64,
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

/// Most decoded stacks remembered by address (then the map starts over).
const STACK_BY_PTR_MAX: usize = 1 << 14;

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

/// A direct IO in progress on a thread (`iomap_dio_rw_begin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Dio {
    dev: Dev,
    ino: u64,
    /// Bytes of data bios still expected: the state ends when they are queued, even when
    /// `iomap_dio_complete` fires elsewhere (aio, io_uring).
    left: u64,
}

/// Per-thread context: brackets and fresh maps.
#[derive(Debug)]
struct TidCtx {
    reason: u32,
    wb_ino: Option<(Dev, u64)>,
    /// When the `single_inode` bracket of `wb_ino` began.
    wb_since: u64,
    wi_ino: Option<(Dev, u64)>,
    wp_ino: Option<(Dev, u64)>,
    /// Inside `ext4_writepages..ext4_writepages_result` (a closed bracket, unlike iomap's).
    ext4_wp: bool,
    dio: Option<Dio>,
    txn: u32,
    read_file: Option<(Dev, u64)>,
    /// Per disk: sector -> file maps.
    rmap: Vec<(Dev, IntervalMap<Rmap>)>,
    /// When a map was last added, or the context last set.
    touched: u64,
}

impl Default for TidCtx {
    fn default() -> Self {
        TidCtx {
            reason: NO_REASON,
            wb_ino: None,
            wb_since: 0,
            wi_ino: None,
            wp_ino: None,
            ext4_wp: false,
            dio: None,
            txn: NO_TXN,
            read_file: None,
            rmap: Vec::new(),
            touched: 0,
        }
    }
}

impl TidCtx {
    /// Whether nothing is open or remembered.
    fn is_idle(&self) -> bool {
        self.reason == NO_REASON
            && self.wb_ino.is_none()
            && self.wi_ino.is_none()
            && self.wp_ino.is_none()
            && !self.ext4_wp
            && self.dio.is_none()
            && self.txn == NO_TXN
            && self.read_file.is_none()
            && self.rmap.iter().all(|r| r.1.is_empty())
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

/// Queued bio fragments of one disk (may overlap: two readers of one block).
#[derive(Debug, Default)]
struct Pending {
    /// `(start, seq) -> (end, frag)`; seq orders by queue time.
    map: BTreeMap<(u64, u64), (u64, Frag)>,
    max_len: u64,
}

impl Pending {
    fn insert(&mut self, a: u64, b: u64, seq: u64, f: Frag) {
        if a < b {
            self.max_len = self.max_len.max(b - a);
            self.map.insert((a, seq), (b, f));
        }
    }

    /// Fragments overlapping `[a, b)`, in queue order.
    fn overlapping(&self, a: u64, b: u64) -> Vec<(u64, u64, u64, Frag)> {
        let lo = a.saturating_sub(self.max_len);
        let mut v: Vec<_> = self
            .map
            .range((lo, 0)..(b, 0))
            .filter(|(_, (e, _))| *e > a)
            .map(|(&(s, q), &(e, f))| (q, s, e, f))
            .collect();
        v.sort_by_key(|x| x.0);
        v
    }

    /// Takes the sectors of `[a, b)` (earliest queued first, each sector once); gaps are
    /// left uncovered in the result.
    fn take(&mut self, a: u64, b: u64) -> Paint<Frag> {
        let mut paint = Paint::default();
        for (seq, s, e, f) in self.overlapping(a, b) {
            let mut filled = Vec::new();
            let os = s.max(a);
            let oe = e.min(b);
            paint.fill(os, oe, &f.advance(os - s), Some(&mut filled));
            if filled.is_empty() {
                continue;
            }
            self.map.remove(&(s, seq));
            // Put back what was not taken.
            let mut cur = s;
            for (fa, fb) in filled {
                if fa > cur {
                    self.map.insert((cur, seq), (fa, f.advance(cur - s)));
                }
                cur = fb;
            }
            if cur < e {
                self.map.insert((cur, seq), (e, f.advance(cur - s)));
            }
        }
        paint
    }

    fn peek(&self, a: u64, b: u64) -> Paint<Frag> {
        let mut paint = Paint::default();
        for (_, s, e, f) in self.overlapping(a, b) {
            let os = s.max(a);
            paint.fill(os, e.min(b), &f.advance(os - s), None);
        }
        paint
    }
}

/// Sector intervals with their charges.
type Parts = Vec<(u64, u64, Frag)>;

/// Issued requests keyed `(disk, current sector)`; several requests at one key (two
/// readers of one block) complete in issue order.
#[derive(Debug, Default)]
struct Inflight {
    /// The oldest request at each key.
    first: FxHashMap<(Dev, u64), Req>,
    /// Younger requests at the same key, oldest first (rare).
    more: FxHashMap<(Dev, u64), VecDeque<Req>>,
}

impl Inflight {
    fn contains(&self, k: &(Dev, u64)) -> bool {
        self.first.contains_key(k)
    }

    /// The request issued last at `k` (the one a repeated issue re-dispatches).
    fn last_mut(&mut self, k: &(Dev, u64)) -> Option<&mut Req> {
        match self.more.get_mut(k).and_then(|q| q.back_mut()) {
            Some(r) => Some(r),
            None => self.first.get_mut(k),
        }
    }

    /// Adds a request behind those already at `k`.
    fn push(&mut self, k: (Dev, u64), r: Req) {
        match self.first.entry(k) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(r);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                self.more.entry(k).or_default().push_back(r);
            }
        }
    }

    /// Takes the oldest request at `k`.
    fn pop(&mut self, k: &(Dev, u64)) -> Option<Req> {
        let r = self.first.remove(k)?;
        if !self.more.is_empty() {
            if let Some(q) = self.more.get_mut(k) {
                if let Some(next) = q.pop_front() {
                    self.first.insert(*k, next);
                }
                if q.is_empty() {
                    self.more.remove(k);
                }
            }
        }
        Some(r)
    }

    fn len(&self) -> usize {
        self.first.len() + self.more.values().map(VecDeque::len).sum::<usize>()
    }

    fn values(&self) -> impl Iterator<Item = &Req> {
        self.first.values().chain(self.more.values().flatten())
    }

    /// Removes the requests `keep` refuses (oldest at a key keep their place).
    fn retain(&mut self, mut keep: impl FnMut(&(Dev, u64), &mut Req) -> bool) {
        for (k, q) in self.more.iter_mut() {
            q.retain_mut(|r| keep(k, r));
        }
        self.more.retain(|_, q| !q.is_empty());
        let mut emptied = Vec::new();
        self.first.retain(|k, r| {
            let kept = keep(k, r);
            if !kept {
                emptied.push(*k);
            }
            kept
        });
        for k in emptied {
            if let Some(q) = self.more.get_mut(&k) {
                if let Some(next) = q.pop_front() {
                    self.first.insert(k, next);
                }
                if q.is_empty() {
                    self.more.remove(&k);
                }
            }
        }
    }
}

/// An issued request.
#[derive(Debug)]
struct Req {
    /// Sectors not completed yet, from the current key.
    left: u64,
    last_issue: u64,
    rwbs: Rwbs,
    /// Sorted parts.
    parts: Vec<(u64, u64, Frag)>,
}

/// The disk sector where buffer `blocknr` of `size` bytes on the device of `info` starts.
fn buffer_sector(info: DevInfo, blocknr: u64, size: u64) -> u64 {
    blocknr
        .saturating_mul(size / 512)
        .saturating_add(info.part_start)
}

/// Calls of [`Attributor::prefetch`] between loading a block's page slot and its value.
const AHEAD_STAGE: usize = 4;

/// A block whose page slot [`Attributor::prefetch`] started loading, and whose value it
/// loads [`AHEAD_STAGE`] calls later.
#[derive(Debug, Clone, Copy)]
enum Ahead {
    Folio { bdi: Dev, ino: u64, index: u64 },
    Buffer { disk: Dev, a: u64 },
}

#[derive(Debug)]
struct TaskState {
    pid: u32,
    comm: String,
    role: Option<RoleId>,
    generation: u32,
    /// When its exit was seen.
    exited: Option<u64>,
    fresh_exec: bool,
}

/// The result of [`Attributor::finish`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attribution {
    /// Roles, intents, acts and per-act totals.
    pub tables: Tables,
    /// Totals, leftovers, anomalies.
    pub summary: Summary,
    /// IOs produced since the last [`Attributor::drain_ios`].
    pub ios: Vec<Io>,
}

/// How much per-trace state an [`Attributor`] holds, by kind: it follows what is
/// outstanding (dirty and not yet written, queued or in flight, tasks alive), not the
/// length of the trace. The output tables (roles, intents, acts) are not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateSizes {
    /// Tasks known (alive, or exited less than 30 s of trace time ago).
    pub tasks: usize,
    /// Tids whose next generation is remembered after their task was forgotten.
    pub pruned_tids: usize,
    /// Per-thread contexts (open brackets, fresh maps).
    pub thread_contexts: usize,
    /// Sector->file map intervals held for the threads' next bios.
    pub thread_maps: usize,
    /// Files with dirty folios.
    pub dirty_files: usize,
    /// Dirty folios.
    pub dirty_folios: usize,
    /// Dirty buffer_head intervals.
    pub dirty_buffers: usize,
    /// Inodes with a recorded dirtier.
    pub inode_dirtiers: usize,
    /// Folio orders of the page cache.
    pub folio_orders: usize,
    /// Queued bio fragments.
    pub pending_fragments: usize,
    /// Issued requests.
    pub inflight: usize,
    /// Loss windows (summary list and merged list).
    pub lost_windows: usize,
}

/// Streaming attribution: feed time-ordered events with [`Attributor::push`], take the
/// charged IOs with [`Attributor::drain_ios`], and end with [`Attributor::finish`].
pub struct Attributor {
    ctx: Context,
    page: u64,
    devs: FxHashMap<Dev, DevInfo>,
    tables: Tables,
    ios: Vec<Io>,
    summary: Summary,

    // roles
    tasks: FxHashMap<u32, TaskState>,
    /// Exits in time order, for pruning `tasks`.
    exits: VecDeque<(u64, u32)>,
    /// The generation the next task of a pruned tid gets.
    next_gen: FxHashMap<u32, u32>,
    unknown_role: Option<RoleId>,
    // intents
    stacks: Vec<Box<[u64]>>,
    stack_flags: Vec<u8>,
    stack_index: FxHashMap<Box<[u64]>, StackId>,
    /// Decoded stacks by address: the decoder shares one allocation among the events with
    /// the same stack, so most lookups are by address. Each entry holds its stack, so an
    /// address cannot be reused by another stack while it is here. Bounded.
    stack_by_ptr: FxHashMap<usize, (Arc<[u64]>, StackId)>,
    /// The address of the last stack looked up (in `stack_by_ptr`, or 0) and its id.
    last_stack: (usize, StackId),
    /// Blocks whose page slots [`Attributor::prefetch`] started loading during its last
    /// [`AHEAD_STAGE`] calls (a ring, next at `ahead_pos`): their values are loaded next.
    ahead: [Option<Ahead>; AHEAD_STAGE],
    ahead_pos: usize,
    /// The last task [`Attributor::role_for`] gave a role: `(pid, tid, role)`. Consecutive
    /// events mostly come from one task; whatever changes `tasks` otherwise forgets it.
    last_role: Option<(u32, u32, RoleId)>,
    intent_index: FxHashMap<(u32, StackId), IntentId>,
    act_index: FxHashMap<ActKey, ActId>,

    // dirty state
    folio_order: FolioOrders,
    dirty: FxHashMap<(Dev, u64), DirtyFile>,
    bh: FxHashMap<Dev, IntervalMap<BhEnt>>,
    bsize: FxHashMap<Dev, u64>,
    inode_owner: FxHashMap<(Dev, u64), (Dirtier, u64)>,
    tid_ctx: FxHashMap<u32, TidCtx>,

    // requests
    seq: u64,
    pending: FxHashMap<Dev, Pending>,
    inflight: Inflight,
    flushes: FxHashMap<Dev, VecDeque<u64>>,
    rq_based: FxHashSet<Dev>,
    last_end: FxHashMap<Dev, u64>,
    remap_hints: FxHashMap<(Dev, u64), Parts>,

    // accounting
    unknown_ctx: FxHashMap<(Dev, u64, RoleId, u32), (u64, u64)>,
    lost_merged: Vec<(u64, u64)>,
    cpu_last: Vec<u64>,
    last_time: u64,
    /// Trace time of the next sweep for stale state.
    next_sweep: u64,
    warned_no_size: FxHashSet<Dev>,
}

impl std::fmt::Debug for Attributor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attributor")
            .field("roles", &self.tables.roles.len())
            .field("intents", &self.tables.intents.len())
            .field("acts", &self.tables.acts.len())
            .field("dirty_files", &self.dirty.len())
            .field("inflight", &self.inflight.len())
            .finish()
    }
}

impl Attributor {
    /// A fresh attributor for a trace described by `ctx`.
    pub fn new(ctx: Context) -> Attributor {
        let mut devs = FxHashMap::default();
        for d in &ctx.devices {
            let kd = d.kernel_dev();
            let disk = if d.parent.is_empty() {
                kd
            } else {
                ctx.devices
                    .iter()
                    .find(|p| p.name == d.parent)
                    .map(|p| p.kernel_dev())
                    .unwrap_or(kd)
            };
            devs.insert(
                kd,
                DevInfo {
                    disk,
                    part_start: if disk == kd { 0 } else { d.part_start },
                    size: d.size_sectors,
                },
            );
        }
        let mut tasks = FxHashMap::default();
        for t in &ctx.tasks {
            tasks.insert(
                t.tid,
                TaskState {
                    pid: t.pid,
                    comm: t.comm.clone(),
                    role: None,
                    generation: 0,
                    exited: None,
                    fresh_exec: false,
                },
            );
        }
        let page = if ctx.page_size.is_power_of_two() && ctx.page_size >= 512 {
            ctx.page_size as u64
        } else {
            4096
        };
        let mut stack_index = FxHashMap::default();
        stack_index.insert(Box::from([] as [u64; 0]), 0);
        // Filesystem block sizes from the mount table, until a buffer_head says otherwise.
        let bsize: FxHashMap<Dev, u64> = ctx
            .block_sizes
            .iter()
            .filter(|(_, b)| (512..=1 << 16).contains(b) && b.is_power_of_two())
            .map(|&(d, b)| (d, b as u64))
            .collect();
        Attributor {
            ctx,
            page,
            devs,
            tables: Tables {
                intents: vec![
                    Intent {
                        modifier: 0,
                        stack: Vec::new(),
                    },
                    Intent {
                        modifier: 0,
                        stack: Vec::new(),
                    },
                ],
                ..Tables::default()
            },
            ios: Vec::new(),
            summary: Summary::default(),
            tasks,
            exits: VecDeque::new(),
            next_gen: FxHashMap::default(),
            unknown_role: None,
            stacks: vec![Box::from([] as [u64; 0])],
            stack_flags: vec![0],
            stack_by_ptr: FxHashMap::default(),
            last_stack: (0, 0),
            last_role: None,
            ahead: [None; AHEAD_STAGE],
            ahead_pos: 0,
            stack_index,
            intent_index: FxHashMap::default(),
            act_index: FxHashMap::default(),
            folio_order: FolioOrders::default(),
            dirty: FxHashMap::default(),
            bh: FxHashMap::default(),
            bsize,
            inode_owner: FxHashMap::default(),
            tid_ctx: FxHashMap::default(),
            seq: 0,
            pending: FxHashMap::default(),
            inflight: Inflight::default(),
            flushes: FxHashMap::default(),
            rq_based: FxHashSet::default(),
            last_end: FxHashMap::default(),
            remap_hints: FxHashMap::default(),
            unknown_ctx: FxHashMap::default(),
            lost_merged: Vec::new(),
            cpu_last: Vec::new(),
            last_time: 0,
            next_sweep: 0,
            warned_no_size: FxHashSet::default(),
        }
    }

    /// The tables so far (roles, intents, acts referenced by the IOs produced so far).
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The sizes of the state held now.
    pub fn state_sizes(&self) -> StateSizes {
        StateSizes {
            tasks: self.tasks.len(),
            pruned_tids: self.next_gen.len(),
            thread_contexts: self.tid_ctx.len(),
            thread_maps: self
                .tid_ctx
                .values()
                .flat_map(|c| c.rmap.iter())
                .map(|r| r.1.len())
                .sum(),
            dirty_files: self.dirty.len(),
            dirty_folios: self.dirty.values().map(|d| d.folios.len()).sum(),
            dirty_buffers: self.bh.values().map(IntervalMap::len).sum(),
            inode_dirtiers: self.inode_owner.len(),
            folio_orders: self.folio_order.young.len() + self.folio_order.old.len(),
            pending_fragments: self.pending.values().map(|p| p.map.len()).sum(),
            inflight: self.inflight.len(),
            lost_windows: self.summary.lost_windows.len().max(self.lost_merged.len()),
        }
    }

    /// Takes the IOs charged since the last call.
    pub fn drain_ios(&mut self) -> Vec<Io> {
        std::mem::take(&mut self.ios)
    }

    /// Moves the IOs charged since the last call into `out` (keeps this buffer's capacity).
    pub fn drain_ios_into(&mut self, out: &mut Vec<Io>) {
        out.append(&mut self.ios);
    }

    /// Ends the attribution: leftovers go to the summary.
    pub fn finish(mut self) -> Attribution {
        let s = &mut self.summary;
        for r in self.inflight.values() {
            s.inflight_at_end += 1;
            s.inflight_bytes_at_end += r.left * 512;
        }
        for p in self.pending.values() {
            s.pending_bytes_at_end += p
                .map
                .iter()
                .map(|(&(a, _), &(b, _))| (b - a) * 512)
                .sum::<u64>();
        }
        for df in self.dirty.values() {
            s.dirty_folios_left += df.folios.len() as u64;
            s.dirty_pages_left += df.folios.iter().map(|(_, _, f)| f.pages).sum::<u64>();
        }
        s.dirty_buffers_left = self.bh.values().map(|m| m.len() as u64).sum();
        s.dirty_inodes_left = self.inode_owner.len() as u64;
        let mut uc: Vec<UnknownContext> = self
            .unknown_ctx
            .iter()
            .map(
                |(&(dev, ino, issuer, reason), &(bytes, ios))| UnknownContext {
                    file: FileKey { dev, ino },
                    issuer,
                    reason: (reason != NO_REASON).then_some(WbReason(reason)),
                    bytes,
                    ios,
                },
            )
            .collect();
        uc.sort_by(|a, b| {
            b.bytes
                .cmp(&a.bytes)
                .then(a.file.cmp(&b.file))
                .then(a.issuer.cmp(&b.issuer))
                .then(a.reason.cmp(&b.reason))
        });
        s.unknown_contexts = uc;
        Attribution {
            tables: self.tables,
            summary: self.summary,
            ios: self.ios,
        }
    }

    /// Starts loading the dirty-page or dirty-buffer state `ev` will touch, when it is
    /// pushed a few events later: the maps of dirty blocks are larger than the caches, and
    /// a lookup that waits for memory costs more than one that finds its line on the way.
    /// In two steps: the slot of the block's page now (found from the key alone, nothing
    /// read), and [`AHEAD_STAGE`] calls later, that slot then in cache, the block itself
    /// (a page of several blocks keeps them elsewhere: on 4 KiB random writes, replacing
    /// a dirtied folio's record waited on that line for two thirds of its time).
    /// A hint only: what [`Attributor::push`] does is the same with or without it
    /// (`ioblame_decode::for_each_event_ahead` hands out the events to call it with, one
    /// call per event).
    pub fn prefetch(&mut self, ev: &Event) {
        let next = match ev.kind {
            EventKind::DirtyFolio { bdi, ino, index } => self.dirty.get(&(bdi, ino)).map(|df| {
                df.folios.prefetch(index);
                Ahead::Folio { bdi, ino, index }
            }),
            EventKind::DirtyBuffer { dev, blocknr, size }
                if (512..=1 << 16).contains(&size) && blocknr < BH_SENTINEL =>
            {
                let info = self.dev_info(dev);
                let a = buffer_sector(info, blocknr, size);
                self.bh.get(&info.disk).map(|m| {
                    m.prefetch(a);
                    Ahead::Buffer { disk: info.disk, a }
                })
            }
            _ => None,
        };
        let due = std::mem::replace(&mut self.ahead[self.ahead_pos], next);
        self.ahead_pos = (self.ahead_pos + 1) % AHEAD_STAGE;
        match due {
            Some(Ahead::Folio { bdi, ino, index }) => {
                if let Some(df) = self.dirty.get(&(bdi, ino)) {
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

    /// Feeds one event (events must come in time order).
    pub fn push(&mut self, ev: &Event) {
        if ev.time < self.last_time {
            self.summary.out_of_order_events += 1;
        } else {
            self.last_time = ev.time;
            if ev.time >= self.next_sweep {
                if self.next_sweep != 0 {
                    self.sweep(ev.time);
                }
                self.next_sweep = ev.time.saturating_add(SWEEP_INTERVAL_NS);
            }
        }
        let cpu = ev.cpu as usize;
        if cpu < 4096 {
            if cpu >= self.cpu_last.len() {
                self.cpu_last.resize(cpu + 1, 0);
            }
            if !matches!(ev.kind, EventKind::Lost { .. }) {
                self.cpu_last[cpu] = ev.time;
            }
        }
        match &ev.kind {
            // ---- dirtiers ----
            EventKind::DirtyFolio { bdi, ino, index } => {
                self.on_dirty_folio(ev, *bdi, *ino, *index)
            }
            EventKind::DirtyBuffer { dev, blocknr, size } => {
                self.on_dirty_buffer(ev, *dev, *blocknr, *size)
            }
            EventKind::MarkInodeDirty {
                bdi, ino, flags, ..
            } => self.on_mark_inode_dirty(ev, *bdi, *ino, *flags),
            EventKind::AddToPageCache {
                s_dev,
                ino,
                index,
                order,
                ..
            } => {
                let disk = self.order_disk(*s_dev, *ino);
                self.folio_order
                    .insert((disk, *ino, *index), (*order).min(30));
            }
            EventKind::DeleteFromPageCache {
                s_dev,
                ino,
                index,
                order,
                ..
            } => {
                let disk = self.order_disk(*s_dev, *ino);
                self.folio_order.remove((disk, *ino, *index));
                // A folio leaving the page cache is no longer dirty (truncated, or written
                // and evicted): forget its dirtier.
                let end = index.saturating_add(1u64 << (*order).min(30));
                for key in [(disk, *ino), (0, *ino)] {
                    if let Some(df) = self.dirty.get_mut(&key) {
                        df.remove_pages(*index, end);
                        if df.folios.is_empty() {
                            self.dirty.remove(&key);
                        }
                        break;
                    }
                }
            }

            // ---- maps on the issuing thread ----
            EventKind::Ext4MapBlocks {
                dev,
                ino,
                pblk,
                lblk,
                ret,
                ..
            } if *ret > 0 && *pblk > 0 => {
                let bs = self.bsize.get(dev).copied().unwrap_or(4096);
                let spb = bs / 512;
                let info = self.dev_info(*dev);
                let a = pblk.saturating_mul(spb).saturating_add(info.part_start);
                let b = a.saturating_add((*ret as u64).saturating_mul(spb));
                let foff = lblk.saturating_mul(bs);
                self.add_rmap(
                    ev.tid,
                    info.disk,
                    a,
                    b,
                    Rmap {
                        ino: *ino,
                        foff,
                        t: 0,
                    },
                );
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
            } => {
                let bd = if *bdev != 0 { *bdev } else { *dev };
                if *addr != u64::MAX && pos >= offset {
                    let byte = addr.saturating_add(pos - offset);
                    let info = self.dev_info(bd);
                    let a = (byte / 512).saturating_add(info.part_start);
                    let b = a.saturating_add(dirty_len.div_ceil(512));
                    self.add_rmap(
                        ev.tid,
                        info.disk,
                        a,
                        b,
                        Rmap {
                            ino: *ino,
                            foff: *pos,
                            t: 0,
                        },
                    );
                }
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
            } => {
                let bd = if *bdev != 0 { *bdev } else { *dev };
                if (*typ == IOMAP_MAPPED || *typ == IOMAP_UNWRITTEN) && *addr != u64::MAX {
                    let info = self.dev_info(bd);
                    let a = (addr / 512).saturating_add(info.part_start);
                    let b = a.saturating_add(length.div_ceil(512));
                    self.add_rmap(
                        ev.tid,
                        info.disk,
                        a,
                        b,
                        Rmap {
                            ino: *ino,
                            foff: *offset,
                            t: 0,
                        },
                    );
                    self.tid(ev.tid).read_file = Some((*dev, *ino));
                }
            }

            // ---- brackets ----
            EventKind::WritebackWork {
                phase, reason, bdi, ..
            } => match phase {
                WorkPhase::Start => {
                    self.tid(ev.tid).reason = *reason;
                    self.flusher_name(ev.pid, ev.tid, *bdi);
                }
                WorkPhase::Written => {
                    let c = self.tid(ev.tid);
                    c.reason = NO_REASON;
                    c.wp_ino = None;
                    c.rmap.clear();
                }
                WorkPhase::Queue | WorkPhase::Exec => {}
            },
            EventKind::SingleInodeStart { bdi, ino, .. } => {
                let c = self.tid(ev.tid);
                c.wb_ino = Some((*bdi, *ino));
                c.wb_since = ev.time;
            }
            EventKind::SingleInode {
                bdi, ino, state, ..
            } => {
                let c = self.tid(ev.tid);
                let began = (c.wb_ino == Some((*bdi, *ino))).then_some(c.wb_since);
                c.wb_ino = None;
                c.wp_ino = None;
                c.rmap.clear();
                // The inode left writeback with no dirty page: every folio dirtied before
                // the bracket began was written (or dropped), whether or not its IO could
                // be linked to it.
                if let Some(t) = began {
                    if *state & self.ctx.inode_bits.dirty_pages == 0 {
                        self.forget_dirty_before(*bdi, *ino, t);
                    }
                    // Likewise the inode itself, written or not (xfs has no write_inode).
                    if *state & self.ctx.inode_bits.dirty_inode == 0 {
                        if let Some(&(_, dt)) = self.inode_owner.get(&(*bdi, *ino)) {
                            if dt < t {
                                self.inode_owner.remove(&(*bdi, *ino));
                            }
                        }
                    }
                }
            }
            EventKind::WriteInodeStart { bdi, ino, .. } => {
                self.tid(ev.tid).wi_ino = Some((*bdi, *ino))
            }
            EventKind::WriteInode { bdi, ino, .. } => {
                self.tid(ev.tid).wi_ino = None;
                self.inode_owner.remove(&(*bdi, *ino));
            }
            EventKind::Ext4Writepages { dev, ino, .. } => {
                let c = self.tid(ev.tid);
                c.wp_ino = Some((*dev, *ino));
                c.ext4_wp = true;
                c.dio = None;
            }
            EventKind::Ext4WritepagesResult { .. } => {
                let c = self.tid(ev.tid);
                c.wp_ino = None;
                c.ext4_wp = false;
                c.rmap.clear();
            }
            EventKind::IomapWritebackFolio {
                dev,
                ino,
                offset,
                length,
            } => {
                let c = self.tid(ev.tid);
                c.wp_ino = Some((*dev, *ino));
                c.dio = None;
                self.learn_folio_size(*dev, *ino, *offset, *length);
            }
            EventKind::IomapDioBegin {
                dev, ino, count, ..
            } => {
                self.tid(ev.tid).dio = (*count > 0).then_some(Dio {
                    dev: *dev,
                    ino: *ino,
                    left: *count,
                })
            }
            EventKind::IomapDioComplete { dev, ino, .. } => {
                // With aio or io_uring this fires in another context: only the thread that
                // began this direct IO ends it.
                if let Some(c) = self.tid_ctx.get_mut(&ev.tid) {
                    if c.dio.is_some_and(|d| d.dev == *dev && d.ino == *ino) {
                        c.dio = None;
                        c.rmap.clear();
                    }
                }
            }
            EventKind::Readahead { s_dev, ino, .. }
            | EventKind::FilemapFault { s_dev, ino, .. } => {
                // A page-cache read: whatever direct IO this thread did is over.
                let c = self.tid(ev.tid);
                c.read_file = Some((*s_dev, *ino));
                c.dio = None;
            }
            EventKind::IomapReadahead { dev, ino, .. } => {
                let c = self.tid(ev.tid);
                c.read_file = Some((*dev, *ino));
                c.dio = None;
            }
            EventKind::XfsFile { op, dev, ino, .. } => {
                // A new read or write call: a direct IO begins after it, if any.
                let c = self.tid(ev.tid);
                c.dio = None;
                if matches!(op, XfsFileOp::BufferedRead | XfsFileOp::DirectRead) {
                    c.read_file = Some((*dev, *ino))
                }
            }
            EventKind::Ext4SyncFile { .. } => {
                if let Some(c) = self.tid_ctx.get_mut(&ev.tid) {
                    c.dio = None;
                }
            }
            EventKind::Jbd2Commit {
                phase, transaction, ..
            } => {
                let c = self.tid(ev.tid);
                match phase {
                    CommitPhase::End => c.txn = NO_TXN,
                    _ => c.txn = *transaction,
                }
            }

            // ---- block layer ----
            EventKind::BioQueue {
                dev,
                sector,
                nr_sector,
                rwbs,
            } => self.on_bio_queue(ev, *dev, *sector, *nr_sector, *rwbs),
            EventKind::BioRemap {
                dev,
                sector,
                nr_sector,
                old_dev,
                old_sector,
                ..
            } => self.on_remap(*dev, *sector, *nr_sector, *old_dev, *old_sector),
            EventKind::RqIssue {
                dev,
                sector,
                nr_sector,
                rwbs,
                ..
            } => self.on_issue(ev.time, *dev, *sector, *nr_sector, *rwbs),
            EventKind::RqRequeue { dev, sector, .. } => {
                let disk = self.dev_info(*dev).disk;
                if self.inflight.contains(&(disk, *sector)) {
                    self.summary.requeues += 1;
                }
            }
            EventKind::RqComplete {
                dev,
                sector,
                nr_sector,
                error,
                rwbs,
            } => self.on_complete(ev.time, *dev, *sector, *nr_sector, *error, *rwbs),
            EventKind::BioComplete {
                dev,
                sector,
                nr_sector,
                error,
                rwbs,
            } => self.on_bio_complete(ev.time, *dev, *sector, *nr_sector, *error, *rwbs),

            // ---- tasks ----
            EventKind::Comm {
                pid,
                tid,
                comm,
                exec,
            } => self.on_comm(*pid, *tid, comm, *exec),
            EventKind::SchedExec { pid, filename, .. } => {
                let base = filename.rsplit('/').next().unwrap_or(filename);
                let mut end = base.len().min(15);
                while !base.is_char_boundary(end) {
                    end -= 1;
                }
                let comm = &base[..end];
                let pid_of = self.tasks.get(pid).map(|t| t.pid).unwrap_or(*pid);
                self.on_exec(pid_of, *pid, comm, false);
            }
            EventKind::Fork { pid, tid, ptid, .. } => {
                let comm = self.tasks.get(ptid).map(|t| t.comm.clone());
                self.on_fork(*pid, *tid, comm, true);
            }
            EventKind::SchedFork {
                child_pid,
                child_comm,
                ..
            } => self.on_fork(*child_pid, *child_pid, Some(child_comm.clone()), false),
            EventKind::Exit { tid, .. } => self.on_exit(ev.time, *tid),
            EventKind::SchedExit { pid, .. } => self.on_exit(ev.time, *pid),

            EventKind::Lost { lost } => {
                let start = self
                    .cpu_last
                    .get(cpu)
                    .copied()
                    .filter(|&t| t > 0)
                    .unwrap_or(ev.time);
                let start = start.min(ev.time);
                self.summary.lost_records += lost;
                self.note_lost(start, ev.time, ev.cpu, *lost);
            }
            _ => {}
        }
    }

    // ------------------------------------------------------------------ helpers

    fn dev_info(&self, dev: Dev) -> DevInfo {
        self.devs.get(&dev).copied().unwrap_or(DevInfo {
            disk: dev,
            part_start: 0,
            size: 0,
        })
    }

    /// The dirty folios of `(bdi, ino)` (or of `(0, ino)` when the bdi name was not a
    /// device), as the page lookups find them.
    fn dirty_key(&self, bdi: Dev, ino: u64) -> Option<(Dev, u64)> {
        if self.dirty.contains_key(&(bdi, ino)) {
            Some((bdi, ino))
        } else if self.dirty.contains_key(&(0, ino)) {
            Some((0, ino))
        } else {
            None
        }
    }

    /// Forgets the folios of `(bdi, ino)` dirtied before `t`.
    fn forget_dirty_before(&mut self, bdi: Dev, ino: u64, t: u64) {
        let Some(key) = self.dirty_key(bdi, ino) else {
            return;
        };
        if let Some(df) = self.dirty.get_mut(&key) {
            df.remove_older_than(t);
            if df.folios.is_empty() {
                self.dirty.remove(&key);
            }
        }
    }

    /// Counts `bytes` of `d`'s dirty folios of `(bdi, ino)` as written (see
    /// [`DirtyFile::consume`]).
    fn consume_dirty(&mut self, bdi: Dev, ino: u64, d: Dirtier, via: Via, bytes: u64) {
        let Some(key) = self.dirty_key(bdi, ino) else {
            return;
        };
        if let Some(df) = self.dirty.get_mut(&key) {
            df.consume(d, via, bytes);
            if df.folios.is_empty() {
                self.dirty.remove(&key);
            }
        }
    }

    /// The disk a page-cache event's folio belongs to (the bdev inode has `s_dev` 0).
    fn order_disk(&self, s_dev: Dev, ino: u64) -> Dev {
        if s_dev == 0 {
            self.dev_info(ino as Dev).disk
        } else {
            self.dev_info(s_dev).disk
        }
    }

    fn tid(&mut self, tid: u32) -> &mut TidCtx {
        let now = self.last_time;
        let c = self.tid_ctx.entry(tid).or_default();
        c.touched = now;
        c
    }

    fn add_rmap(&mut self, tid: u32, disk: Dev, a: u64, b: u64, r: Rmap) {
        let now = self.last_time;
        let c = self.tid_ctx.entry(tid).or_default();
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

    fn intern_stack(&mut self, stack: Option<&Arc<[u64]>>) -> StackId {
        let Some(a) = stack else {
            return self.intern_frames(&[]);
        };
        let key = Arc::as_ptr(a) as *const u64 as usize;
        // Consecutive events often carry the same stack (one writer's page after page).
        if key == self.last_stack.0 {
            return self.last_stack.1;
        }
        let id = match self.stack_by_ptr.get(&key) {
            Some(&(_, id)) => id,
            None => {
                let id = self.intern_frames(a);
                if self.stack_by_ptr.len() >= STACK_BY_PTR_MAX {
                    self.stack_by_ptr.clear();
                }
                self.stack_by_ptr.insert(key, (a.clone(), id));
                id
            }
        };
        self.last_stack = (key, id);
        id
    }

    /// The id of a stack by its frames.
    fn intern_frames(&mut self, s: &[u64]) -> StackId {
        if let Some(&id) = self.stack_index.get(s) {
            return id;
        }
        let id = self.stacks.len() as StackId;
        let b: Box<[u64]> = Box::from(s);
        let flags = self
            .ctx
            .symbols
            .as_deref()
            .map(|sym| classify_stack(sym, s))
            .unwrap_or(0);
        self.stacks.push(b.clone());
        self.stack_flags.push(flags);
        self.stack_index.insert(b, id);
        id
    }

    fn intern_intent(&mut self, modifier: u32, stack: StackId) -> IntentId {
        if let Some(&id) = self.intent_index.get(&(modifier, stack)) {
            return id;
        }
        let id = self.tables.intents.len() as IntentId;
        self.tables.intents.push(Intent {
            modifier,
            stack: self.stacks[stack as usize].to_vec(),
        });
        self.intent_index.insert((modifier, stack), id);
        id
    }

    fn intern_act(
        &mut self,
        role: RoleId,
        intent: IntentId,
        file: FileKey,
        via: Via,
        reason: u32,
        issuer: Option<RoleId>,
    ) -> ActId {
        let key = (
            role,
            intent,
            file.dev,
            file.ino,
            via,
            reason,
            issuer.unwrap_or(RoleId::MAX),
        );
        if let Some(&id) = self.act_index.get(&key) {
            return id;
        }
        let id = self.tables.acts.len() as ActId;
        let recorder = self.ctx.recorder_pid.is_some_and(|p| {
            std::iter::once(role)
                .chain(issuer)
                .any(|r| self.tables.roles[r as usize].pid == p)
        });
        self.tables.acts.push(Act {
            role,
            intent,
            file,
            via,
            reason: (reason != NO_REASON).then_some(WbReason(reason)),
            issuer,
            recorder,
        });
        self.tables.totals.push(ActTotals::default());
        self.act_index.insert(key, id);
        id
    }

    // ------------------------------------------------------------------ roles

    fn new_role(&mut self, pid: u32, tid: u32, comm: String, generation: u32) -> RoleId {
        let id = self.tables.roles.len() as RoleId;
        self.tables.roles.push(Role {
            pid,
            tid,
            comm,
            generation,
        });
        id
    }

    /// The role of the task running `tid` now.
    fn role_for(&mut self, pid: u32, tid: u32) -> RoleId {
        if let Some((p, t, r)) = self.last_role {
            // Nothing changed the task since: the same role, `fresh_exec` already cleared.
            if (p, t) == (pid, tid) {
                return r;
            }
        }
        let r = self.role_for_task(pid, tid);
        self.last_role = Some((pid, tid, r));
        r
    }

    fn role_for_task(&mut self, pid: u32, tid: u32) -> RoleId {
        let next_gen = &self.next_gen;
        let st = self.tasks.entry(tid).or_insert_with(|| TaskState {
            pid,
            comm: format!("<{tid}>"),
            role: None,
            generation: next_gen.get(&tid).copied().unwrap_or(0),
            exited: None,
            fresh_exec: false,
        });
        st.fresh_exec = false;
        if st.pid != pid {
            if st.role.is_some() {
                // tid reuse we did not see: a new task.
                st.generation += 1;
                st.role = None;
                st.exited = None;
            }
            st.pid = pid;
        }
        if let Some(r) = st.role {
            return r;
        }
        let (comm, generation) = (st.comm.clone(), st.generation);
        let id = self.new_role(pid, tid, comm, generation);
        if let Some(st) = self.tasks.get_mut(&tid) {
            st.role = Some(id);
        }
        id
    }

    fn unknown_role(&mut self) -> RoleId {
        if let Some(r) = self.unknown_role {
            return r;
        }
        let r = self.new_role(0, 0, "<unknown>".to_string(), u32::MAX);
        self.unknown_role = Some(r);
        r
    }

    fn on_fork(&mut self, pid: u32, tid: u32, comm: Option<String>, exact_pid: bool) {
        self.last_role = None;
        let comm = comm.unwrap_or_else(|| format!("<{tid}>"));
        let next_gen = &self.next_gen;
        match self.tasks.get_mut(&tid) {
            Some(st) if st.exited.is_none() && st.role.is_none() => {
                // Same fork seen twice (perf FORK and sched_process_fork), or a tid
                // known from the start list that never acted: just refresh.
                if exact_pid {
                    st.pid = pid;
                }
                st.comm = comm;
            }
            Some(st) => {
                st.generation += 1;
                st.pid = pid;
                st.comm = comm;
                st.role = None;
                st.exited = None;
                st.fresh_exec = false;
            }
            None => {
                self.tasks.insert(
                    tid,
                    TaskState {
                        pid,
                        comm,
                        role: None,
                        generation: next_gen.get(&tid).copied().unwrap_or(0),
                        exited: None,
                        fresh_exec: false,
                    },
                );
            }
        }
    }

    fn on_exit(&mut self, time: u64, tid: u32) {
        self.last_role = None;
        if let Some(st) = self.tasks.get_mut(&tid) {
            if st.exited.is_none() {
                st.exited = Some(time);
                self.exits.push_back((time, tid));
            }
        }
        self.tid_ctx.remove(&tid);
        self.prune_tasks(time);
    }

    /// Forgets tasks that exited more than [`TASK_GRACE_NS`] ago (nothing refers to a task
    /// by its tid any more by then; roles stay in the tables). A tid that acted keeps only
    /// its next generation, so a later task with that tid is still told apart.
    fn prune_tasks(&mut self, now: u64) {
        self.last_role = None;
        while let Some(&(t, tid)) = self.exits.front() {
            if t.saturating_add(TASK_GRACE_NS) > now {
                break;
            }
            self.exits.pop_front();
            if let Some(st) = self.tasks.get(&tid) {
                if st.exited == Some(t) {
                    if st.role.is_some() {
                        self.next_gen.insert(tid, st.generation + 1);
                    } else if st.generation > 0 {
                        self.next_gen.insert(tid, st.generation);
                    }
                    self.tasks.remove(&tid);
                }
            }
        }
    }

    fn on_comm(&mut self, pid: u32, tid: u32, comm: &str, exec: bool) {
        self.last_role = None;
        if exec {
            self.on_exec(pid, tid, comm, true);
            return;
        }
        let next_gen = &self.next_gen;
        let st = self.tasks.entry(tid).or_insert_with(|| TaskState {
            pid,
            comm: String::new(),
            role: None,
            generation: next_gen.get(&tid).copied().unwrap_or(0),
            exited: None,
            fresh_exec: false,
        });
        if st.comm != comm {
            st.comm = comm.to_string();
            // A role keeps the name it acted under (a kworker renames itself for each
            // work item): the task's next act starts a new role with the new name.
            st.role = None;
        }
    }

    /// A kworker starting writeback work is, as the kernel names it then,
    /// `kworker/N:M-flush-MAJ:MIN`: the name the capture read at start described whatever
    /// work item the worker ran then, and workqueue renames make no COMM record.
    fn flusher_name(&mut self, pid: u32, tid: u32, bdi: Dev) {
        if bdi == 0 {
            return;
        }
        let Some(st) = self.tasks.get(&tid) else {
            return;
        };
        let Some(rest) = st.comm.strip_prefix("kworker/") else {
            return;
        };
        let base = rest.split('-').next().unwrap_or(rest);
        let name = format!(
            "kworker/{base}-flush-{}:{}",
            ioblame_decode::dev_major(bdi),
            ioblame_decode::dev_minor(bdi)
        );
        if st.comm != name {
            self.on_comm(pid, tid, &name, false);
        }
    }

    /// An exec: a new role from now on. `from_comm_record` tells which of the two signals
    /// (perf COMM with exec, sched_process_exec) this is; the second one of a pair only
    /// renames.
    fn on_exec(&mut self, pid: u32, tid: u32, comm: &str, from_comm_record: bool) {
        self.last_role = None;
        let next_gen = &self.next_gen;
        match self.tasks.get_mut(&tid) {
            Some(st) if st.fresh_exec => {
                st.fresh_exec = false;
                if from_comm_record || st.comm.is_empty() {
                    st.comm = comm.to_string();
                    if let Some(r) = st.role {
                        self.tables.roles[r as usize].comm = comm.to_string();
                    }
                }
            }
            Some(st) => {
                if st.role.is_some() {
                    st.generation += 1;
                    st.role = None;
                }
                st.pid = pid;
                st.comm = comm.to_string();
                st.exited = None;
                st.fresh_exec = true;
            }
            None => {
                self.tasks.insert(
                    tid,
                    TaskState {
                        pid,
                        comm: comm.to_string(),
                        role: None,
                        generation: next_gen.get(&tid).copied().unwrap_or(0),
                        exited: None,
                        fresh_exec: true,
                    },
                );
            }
        }
    }

    // ------------------------------------------------------------------ dirtiers

    /// The owner to record for something dirtied now by `ev`'s task: inside a write_inode
    /// bracket, the inode's dirtier.
    fn dirtier_now(&mut self, ev: &Event, plain: Via) -> (Dirtier, Via, u64) {
        if let Some(wi) = self.tid_ctx.get(&ev.tid).and_then(|c| c.wi_ino) {
            if let Some(&(d, _)) = self.inode_owner.get(&wi) {
                return (d, Via::Inode, wi.1);
            }
        }
        let role = self.role_for(ev.pid, ev.tid);
        let stack = self.intern_stack(ev.stack.as_ref());
        (Dirtier { role, stack }, plain, 0)
    }

    fn on_mark_inode_dirty(&mut self, ev: &Event, bdi: Dev, ino: u64, flags: u64) {
        if flags & self.ctx.inode_bits.dirty_inode == 0
            || self.inode_owner.contains_key(&(bdi, ino))
        {
            return;
        }
        let role = self.role_for(ev.pid, ev.tid);
        if !self.tables.roles[role as usize].comm.starts_with("kworker") {
            let stack = self.intern_stack(ev.stack.as_ref());
            self.inode_owner
                .insert((bdi, ino), (Dirtier { role, stack }, ev.time));
        }
    }

    fn on_dirty_folio(&mut self, ev: &Event, bdi: Dev, ino: u64, index: u64) {
        if let Some(c) = self.tid_ctx.get_mut(&ev.tid) {
            c.dio = None;
        }
        let (owner, via, _) = self.dirtier_now(ev, Via::Page);
        let order = self.folio_order.get((bdi, ino, index)).unwrap_or(0);
        let pages = 1u64 << order;
        let df = self.dirty.entry((bdi, ino)).or_default();
        let ent = FolioEnt {
            pages,
            remaining: pages * self.page,
            owner,
            via,
            t: ev.time,
        };
        // A new clean->dirty event replaces whatever we had there (it was written).
        df.put(index, ent);
    }

    /// iomap writeback names each folio it writes with its size: a folio added to the page
    /// cache before the capture (order unknown, assumed one page when it was dirtied) gets its
    /// real extent, so the IO covering its other pages finds the dirtier.
    fn learn_folio_size(&mut self, s_dev: Dev, ino: u64, offset: u64, length: u64) {
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
        let disk = self.order_disk(s_dev, ino);
        self.folio_order
            .insert((disk, ino, index), pages.trailing_zeros().min(30) as u8);
        let key = if self.dirty.contains_key(&(disk, ino)) {
            (disk, ino)
        } else {
            (0, ino)
        };
        let Some(df) = self.dirty.get_mut(&key) else {
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

    fn on_dirty_buffer(&mut self, ev: &Event, dev: Dev, blocknr: u64, size: u64) {
        if (512..=1 << 16).contains(&size) && size.is_power_of_two() {
            if self.bsize.get(&dev) != Some(&size) {
                self.bsize.insert(dev, size);
            }
        } else {
            return;
        }
        if blocknr >= BH_SENTINEL {
            return;
        }
        let info = self.dev_info(dev);
        let a = buffer_sector(info, blocknr, size);
        let b = a.saturating_add(size / 512);
        // First dirtier wins, but not a record so old that the buffer must have been
        // written or freed unseen (a block freed while dirty and now reused).
        let limit = ev.time.saturating_sub(DIRTY_STALE_NS);
        if self
            .bh
            .get(&info.disk)
            .is_some_and(|m| m.covered_by(a, b, |e| e.t >= limit))
        {
            // Dirtied again before its writeback: nothing changes.
            return;
        }
        let (owner, via, ino) = self.dirtier_now(ev, Via::Buffer);
        let m = self.bh.entry(info.disk).or_default();
        m.insert_if_free_keeping(
            a,
            b,
            BhEnt {
                owner,
                via,
                ino,
                t: ev.time,
            },
            |e| e.t >= limit,
        );
    }

    // ------------------------------------------------------------------ bio queue

    fn on_bio_queue(&mut self, ev: &Event, dev: Dev, sector: u64, nr: u32, rwbs: Rwbs) {
        if nr == 0 {
            self.summary.empty_flush_bios += 1;
            return;
        }
        let info = self.dev_info(dev);
        let disk = info.disk;
        let (s, e) = (sector, sector.saturating_add(nr as u64));
        self.seq += 1;
        let seq = self.seq;
        if !self.remap_hints.is_empty() {
            if let Some(parts) = self.remap_hints.remove(&(dev, sector)) {
                let p = self.pending.entry(disk).or_default();
                for (a, b, mut f) in parts {
                    f.c.qtime = ev.time;
                    p.insert(a, b, seq, f);
                }
                return;
            }
        }
        let issuer = self.role_for(ev.pid, ev.tid);
        let stack = self.intern_stack(ev.stack.as_ref());
        let sflags = self.stack_flags[stack as usize];

        // The thread's context, and the maps it emitted for these sectors (consumed).
        let mut rm: Vec<(u64, u64, Rmap)> = Vec::new();
        let (reason, wb_ino, wi_ino, wp_ino, ext4_wp, dio, txn, read_file) =
            match self.tid_ctx.get_mut(&ev.tid) {
                Some(c) => {
                    if let Some(m) = c.rmap.iter_mut().find(|r| r.0 == disk) {
                        m.1.take(s, e, &mut rm);
                    }
                    (
                        c.reason,
                        c.wb_ino,
                        c.wi_ino,
                        c.wp_ino,
                        c.ext4_wp,
                        c.dio,
                        c.txn,
                        c.read_file,
                    )
                }
                None => (NO_REASON, None, None, None, false, None, NO_TXN, None),
            };
        // Direct IO: inside a direct IO's bracket (bounded by its size) or with a direct IO
        // stack, but never metadata (bitmap or extent reads the direct IO needed).
        let is_dio = !rwbs.has(Rwbs::META) && (dio.is_some() || sflags & STACK_DIO != 0);
        if is_dio && dio.is_some() {
            if let Some(c) = self.tid_ctx.get_mut(&ev.tid) {
                if let Some(d) = &mut c.dio {
                    d.left = d.left.saturating_sub((nr as u64) * 512);
                    if d.left == 0 {
                        c.dio = None;
                    }
                }
            }
        }
        let journal = txn != NO_TXN || sflags & STACK_JOURNAL != 0;
        let base = Charge {
            role: issuer,
            stack,
            via: Via::Unknown,
            fdev: dev,
            ino: 0,
            issuer,
            reason,
            txn: if journal { txn } else { NO_TXN },
            qtime: ev.time,
            rwbs,
        };
        let mut paint: Paint<Frag> = Paint::default();
        if !rwbs.is_write() || is_dio {
            let via = if is_dio {
                Via::Direct
            } else if rwbs.has(Rwbs::AHEAD) {
                Via::Readahead
            } else {
                Via::Read
            };
            let c = Charge { via, ..base };
            for &(a, b, r) in &rm {
                paint.fill(
                    a,
                    b,
                    &Frag {
                        c: Charge { ino: r.ino, ..c },
                        foff: r.foff,
                    },
                    None,
                );
            }
            let ino = if is_dio {
                dio.map(|d| d.ino).unwrap_or(0)
            } else if rwbs.is_read() && !rwbs.has(Rwbs::META) {
                read_file.map(|f| f.1).unwrap_or(0)
            } else {
                0
            };
            paint.fill(
                s,
                e,
                &Frag {
                    c: Charge { ino, ..c },
                    foff: NO_OFF,
                },
                None,
            );
        } else {
            let bracket_ino = wb_ino
                .filter(|w| w.0 == disk || w.0 == 0)
                .or(wp_ino)
                .map(|w| w.1)
                .unwrap_or(0);
            // 1. buffer_head dirtiers: exact sectors.
            let mut bhs = Vec::new();
            if let Some(m) = self.bh.get_mut(&disk) {
                m.take(s, e, &mut bhs);
                if m.is_empty() {
                    self.bh.remove(&disk);
                }
            }
            let bdev_ino = dev as u64;
            // Neighbouring buffers of one dirtier (writeback merges a file's dirty blocks
            // into one bio) are filled, and their bytes consumed, as one run.
            let mut run: Option<BhRun> = None;
            for (a, b, bh) in bhs {
                let hit = rm.iter().find(|r| r.0 <= a && a < r.1);
                let (ino, foff) = match hit {
                    Some(&(ra, _, r)) => (r.ino, adv_off(r.foff, a - ra)),
                    None if bh.ino != 0 => (bh.ino, NO_OFF),
                    None => (bracket_ino, NO_OFF),
                };
                let c = Charge {
                    role: bh.owner.role,
                    stack: bh.owner.stack,
                    via: bh.via,
                    ino,
                    ..base
                };
                // A data buffer written with no map (an ext4 overwrite): the page holding
                // it is written too, though which one is not known; count the bytes
                // against the dirtier's folios of the file (the maps do it exactly).
                let consume = (hit.is_none()
                    && bh.ino == 0
                    && bh.via == Via::Buffer
                    && ino != 0
                    && ino != bdev_ino
                    && !rwbs.has(Rwbs::META))
                .then_some(bh.owner);
                match &mut run {
                    Some(r)
                        if r.b == a
                            && r.frag.c == c
                            && adv_off(r.frag.foff, a - r.a) == foff
                            && r.consume == consume =>
                    {
                        r.b = b;
                    }
                    _ => {
                        if let Some(r) = run.take() {
                            self.charge_bh_run(disk, r, &mut paint);
                        }
                        run = Some(BhRun {
                            a,
                            b,
                            frag: Frag { c, foff },
                            consume,
                        });
                    }
                }
            }
            if let Some(r) = run {
                self.charge_bh_run(disk, r, &mut paint);
            }
            // 2. page dirtiers via the maps, then the block-device inode.
            for &(a, b, r) in &rm {
                self.page_owners(disk, r.ino, a, b, r.foff, &base, &mut paint);
            }
            if self.dirty.contains_key(&(disk, bdev_ino)) && s >= info.part_start {
                let foff = (s - info.part_start).saturating_mul(512);
                self.page_owners(disk, bdev_ino, s, e, foff, &base, &mut paint);
            }
            // 3. journal IO: charged to the journal thread itself. A metadata write with
            //    preflush or FUA is a log write too (xfs log, jbd2 commit record) even
            //    without the bracket or symbols.
            let log_write =
                rwbs.has(Rwbs::META) && (rwbs.has(Rwbs::PREFLUSH) || rwbs.has(Rwbs::FUA));
            if journal || log_write {
                paint.fill(
                    s,
                    e,
                    &Frag {
                        c: Charge {
                            via: Via::Journal,
                            ..base
                        },
                        foff: NO_OFF,
                    },
                    None,
                );
            }
            // 4. inside write_inode: the inode's dirtier.
            if let Some(wi) = wi_ino {
                if let Some(&(d, _)) = self.inode_owner.get(&wi) {
                    let c = Charge {
                        role: d.role,
                        stack: d.stack,
                        via: Via::Inode,
                        ino: wi.1,
                        ..base
                    };
                    paint.fill(s, e, &Frag { c, foff: NO_OFF }, None);
                }
            }
            // 5. inside a single-inode (or ext4 writepages) bracket: the single dirtier of
            //    that inode.
            let single = wb_ino.filter(|w| w.0 == disk || w.0 == 0).or(wp_ino
                .filter(|_| ext4_wp)
                .map(|(d, i)| (self.dev_info(d).disk, i)));
            if let Some(wb) = single {
                let only = self.dirty.get(&wb).and_then(|df| match df.owners[..] {
                    [(d, via, _)] => Some((d, via)),
                    _ => None,
                });
                if let Some((d, via)) = only {
                    let c = Charge {
                        role: d.role,
                        stack: d.stack,
                        via,
                        ino: wb.1,
                        ..base
                    };
                    let mut filled = Vec::new();
                    paint.fill(s, e, &Frag { c, foff: NO_OFF }, Some(&mut filled));
                    // The pages written are the owner's, at offsets not known.
                    let bytes = filled.iter().map(|(a, b)| (b - a) * 512).sum();
                    self.consume_dirty(wb.0, wb.1, d, via, bytes);
                }
            }
            // 6. unknown, with the best context known.
            for &(a, b, r) in &rm {
                paint.fill(
                    a,
                    b,
                    &Frag {
                        c: Charge { ino: r.ino, ..base },
                        foff: r.foff,
                    },
                    None,
                );
            }
            paint.fill(
                s,
                e,
                &Frag {
                    c: Charge {
                        ino: bracket_ino,
                        ..base
                    },
                    foff: NO_OFF,
                },
                None,
            );
        }
        let p = self.pending.entry(disk).or_default();
        let mut run: Option<(u64, u64, Frag)> = None;
        for (a, b, f) in paint.segs {
            match &mut run {
                Some((ra, rb, rf))
                    if *rb == a && rf.c == f.c && adv_off(rf.foff, a - *ra) == f.foff =>
                {
                    *rb = b;
                }
                _ => {
                    if let Some((ra, rb, rf)) = run.take() {
                        p.insert(ra, rb, seq, rf);
                    }
                    run = Some((a, b, f));
                }
            }
        }
        if let Some((ra, rb, rf)) = run {
            p.insert(ra, rb, seq, rf);
        }
    }

    /// Fills a run of dirty buffers into the request being assembled and, for data buffers
    /// written without a map, counts their bytes against the dirtier's folios.
    fn charge_bh_run(&mut self, disk: Dev, r: BhRun, paint: &mut Paint<Frag>) {
        paint.fill(r.a, r.b, &r.frag, None);
        if let Some(owner) = r.consume {
            self.consume_dirty(disk, r.frag.c.ino, owner, Via::Page, (r.b - r.a) * 512);
        }
    }

    /// Charges the dirty folios of `(bdi, ino)` that the sectors `[a, b)` (file bytes from
    /// `foff`) write, and forgets the written parts.
    #[allow(clippy::too_many_arguments)]
    fn page_owners(
        &mut self,
        bdi: Dev,
        ino: u64,
        a: u64,
        b: u64,
        foff: u64,
        base: &Charge,
        paint: &mut Paint<Frag>,
    ) {
        if foff == NO_OFF {
            return;
        }
        let key = if self.dirty.contains_key(&(bdi, ino)) {
            (bdi, ino)
        } else if self.dirty.contains_key(&(0, ino)) {
            (0, ino)
        } else {
            return;
        };
        let page = self.page;
        let Some(df) = self.dirty.get_mut(&key) else {
            return;
        };
        let fb0 = foff;
        let fb1 = foff.saturating_add((b - a).saturating_mul(512));
        let p0 = fb0 / page;
        let p1 = fb1.div_ceil(page);
        for k in df.folios.overlapping(p0, p1) {
            let Some((_, f)) = df.folios.get_mut(k) else {
                continue;
            };
            let fs = k.saturating_mul(page);
            let fe = k.saturating_add(f.pages).saturating_mul(page);
            let ob0 = fs.max(fb0);
            let ob1 = fe.min(fb1);
            if ob0 >= ob1 {
                continue;
            }
            let sa = a + (ob0 - fb0) / 512;
            let sb = a.saturating_add((ob1 - fb0).div_ceil(512)).min(b);
            let c = Charge {
                role: f.owner.role,
                stack: f.owner.stack,
                via: f.via,
                ino,
                ..*base
            };
            paint.fill(sa, sb, &Frag { c, foff: ob0 }, None);
            f.remaining = f.remaining.saturating_sub(ob1 - ob0);
            if f.remaining == 0 {
                df.forget(k);
            }
        }
        if df.folios.is_empty() {
            self.dirty.remove(&key);
        }
    }

    fn on_remap(&mut self, dev: Dev, sector: u64, nr: u32, old_dev: Dev, old_sector: u64) {
        if dev == old_dev {
            // Partition remap: learn the partition start if the metadata lacked it.
            if sector >= old_sector {
                let start = sector - old_sector;
                let e = self.devs.entry(dev).or_insert(DevInfo {
                    disk: dev,
                    part_start: 0,
                    size: 0,
                });
                if e.part_start != start && start != 0 {
                    if e.part_start != 0 {
                        let old = e.part_start;
                        warn(&mut self.summary, || {
                            format!(
                                "device {}:{}: partition start {start} from remap differs from metadata {old}",
                                dev >> 20,
                                dev & 0xfffff
                            )
                        });
                    }
                    e.part_start = start;
                }
            }
            return;
        }
        // Stacked device: the lower bio inherits the upper bio's charges.
        let old_disk = self.dev_info(old_dev).disk;
        let Some(p) = self.pending.get(&old_disk) else {
            return;
        };
        let n = nr as u64;
        let paint = p.peek(old_sector, old_sector.saturating_add(n));
        if paint.segs.is_empty() {
            return;
        }
        let parts: Vec<(u64, u64, Frag)> = paint
            .segs
            .into_iter()
            .map(|(a, b, f)| {
                (
                    (a - old_sector).saturating_add(sector),
                    (b - old_sector).saturating_add(sector),
                    f,
                )
            })
            .collect();
        if self.remap_hints.len() >= MAX_REMAP_HINTS {
            self.remap_hints.clear();
        }
        self.remap_hints.insert((dev, sector), parts);
    }

    // ------------------------------------------------------------------ requests

    fn on_issue(&mut self, time: u64, dev: Dev, sector: u64, nr: u32, rwbs: Rwbs) {
        let disk = self.dev_info(dev).disk;
        if nr == 0 {
            let q = self.flushes.entry(disk).or_default();
            if q.len() >= MAX_FLUSHES {
                // Completions are not being seen: forget the oldest.
                q.pop_front();
            }
            q.push_back(time);
            self.summary.flushes_issued += 1;
            return;
        }
        self.rq_based.insert(disk);
        let e = sector.saturating_add(nr as u64);
        if self.inflight.contains(&(disk, sector)) {
            // Issued again: a re-dispatch of the same request, unless fresh bios wait for
            // these sectors (another request at the same sector, say two readers of one
            // block).
            let fresh = self
                .pending
                .get(&disk)
                .is_some_and(|p| !p.overlapping(sector, e).is_empty());
            if !fresh {
                if let Some(r) = self.inflight.last_mut(&(disk, sector)) {
                    r.last_issue = time;
                }
                self.summary.reissues += 1;
                return;
            }
        }
        let mut paint = match self.pending.get_mut(&disk) {
            Some(p) => {
                let paint = p.take(sector, e);
                if p.map.is_empty() {
                    self.pending.remove(&disk);
                }
                paint
            }
            None => Paint::default(),
        };
        if !paint.covers(sector, e) {
            // Bios queued before the capture or lost: charged to the lost intent.
            let c = self.unmatched_charge(dev, time, rwbs);
            paint.fill(sector, e, &Frag { c, foff: NO_OFF }, None);
        }
        self.inflight.push(
            (disk, sector),
            Req {
                left: nr as u64,
                last_issue: time,
                rwbs,
                parts: paint.segs,
            },
        );
    }

    fn on_complete(&mut self, time: u64, dev: Dev, sector: u64, nr: u32, error: i32, rwbs: Rwbs) {
        let disk = self.dev_info(dev).disk;
        if nr == 0 {
            if rwbs.has(Rwbs::FLUSH)
                && self
                    .flushes
                    .get_mut(&disk)
                    .and_then(|q| q.pop_front())
                    .is_some()
            {
                self.summary.flushes_completed += 1;
            } else {
                self.summary.ignored_zero_completions += 1;
            }
            return;
        }
        if error != 0 {
            self.summary.io_errors += 1;
        }
        let n = nr as u64;
        let Some(mut r) = self.inflight.pop(&(disk, sector)) else {
            self.summary.unmatched_completions += 1;
            let c = self.unmatched_charge(dev, time, rwbs);
            let parts = vec![(sector, sector.saturating_add(n), Frag { c, foff: NO_OFF })];
            self.emit(disk, &parts, rwbs, time, time, false);
            return;
        };
        let done = n.min(r.left);
        let cut = sector.saturating_add(done);
        let rest_at = r.parts.partition_point(|p| p.1 <= cut);
        let mut now: Vec<(u64, u64, Frag)> = r.parts.drain(..rest_at).collect();
        if let Some(first) = r.parts.first_mut() {
            if first.0 < cut {
                now.push((first.0, cut, first.2));
                first.2 = first.2.advance(cut - first.0);
                first.0 = cut;
            }
        }
        self.emit(disk, &now, r.rwbs, r.last_issue, time, false);
        if done < r.left {
            self.summary.partial_completions += 1;
            r.left -= done;
            self.inflight.push((disk, cut), r);
        }
    }

    fn on_bio_complete(
        &mut self,
        time: u64,
        dev: Dev,
        sector: u64,
        nr: u32,
        error: i32,
        rwbs: Rwbs,
    ) {
        let disk = self.dev_info(dev).disk;
        if self.rq_based.contains(&disk) || nr == 0 {
            return;
        }
        if error != 0 {
            self.summary.io_errors += 1;
        }
        let e = sector.saturating_add(nr as u64);
        let parts = match self.pending.get_mut(&disk) {
            Some(p) => {
                let paint = p.take(sector, e);
                if p.map.is_empty() {
                    self.pending.remove(&disk);
                }
                paint.segs
            }
            None => Vec::new(),
        };
        if parts.is_empty() {
            self.summary.unmatched_completions += 1;
            let c = self.unmatched_charge(dev, time, rwbs);
            self.emit(
                disk,
                &[(sector, e, Frag { c, foff: NO_OFF })],
                rwbs,
                time,
                time,
                false,
            );
            return;
        }
        // No request layer: the device saw the bio when it was queued.
        let issue = parts.iter().map(|p| p.2.c.qtime).min().unwrap_or(time);
        self.emit(disk, &parts, rwbs, issue, time, false);
    }

    /// Charges bios queued and requests issued longer than [`STALE_NS`] ago to the lost
    /// intent (their issue or completion was not recorded), with the context they had, so
    /// memory stays bounded and no byte goes uncounted.
    fn sweep(&mut self, now: u64) {
        let limit = now.saturating_sub(STALE_NS);
        let mut stale: Vec<(Dev, Parts, Rwbs, u64)> = Vec::new();
        let mut bytes = 0;
        self.pending.retain(|&disk, p| {
            p.map.retain(|&(a, _), (b, f)| {
                let keep = f.c.qtime >= limit;
                if !keep {
                    bytes += (*b - a) * 512;
                    stale.push((disk, vec![(a, *b, *f)], f.c.rwbs, f.c.qtime));
                }
                keep
            });
            !p.map.is_empty()
        });
        let mut requests = 0;
        self.inflight.retain(|&(disk, _), r| {
            let keep = r.last_issue >= limit;
            if !keep {
                requests += 1;
                bytes += r.left * 512;
                stale.push((disk, std::mem::take(&mut r.parts), r.rwbs, r.last_issue));
            }
            keep
        });
        self.summary.stale_bytes += bytes;
        self.summary.stale_requests += requests;
        // Dirty state that outlived any writeback: freed or unlinked unseen.
        let limit_dirty = now.saturating_sub(DIRTY_STALE_NS);
        self.bh.retain(|_, m| {
            m.retain(|e| e.t >= limit_dirty);
            !m.is_empty()
        });
        self.inode_owner.retain(|_, o| o.1 >= limit_dirty);
        self.dirty.retain(|_, df| {
            df.remove_older_than(limit_dirty);
            !df.folios.is_empty()
        });
        // Thread contexts: stale maps go, idle contexts too.
        let limit_maps = now.saturating_sub(RMAP_STALE_NS);
        self.tid_ctx.retain(|_, c| {
            if c.touched < limit_maps {
                c.rmap.clear();
                c.read_file = None;
            }
            !c.is_idle()
        });
        self.prune_tasks(now);
        stale.sort_by_key(|s| s.3);
        for (disk, parts, rwbs, at) in stale {
            self.emit_lost(disk, parts, rwbs, at);
        }
    }

    /// The charge of a completion that matches nothing queued or issued: the lost intent,
    /// with no file, issuer or reason known.
    fn unmatched_charge(&mut self, dev: Dev, time: u64, rwbs: Rwbs) -> Charge {
        let unknown = self.unknown_role();
        Charge {
            role: unknown,
            stack: 0,
            via: Via::Unknown,
            fdev: dev,
            ino: 0,
            issuer: unknown,
            reason: NO_REASON,
            txn: NO_TXN,
            qtime: time,
            rwbs,
        }
    }

    /// Emits parts that will never complete as IOs charged to the lost intent, with the
    /// file, issuer and reason they were queued with (no device time, no seek).
    fn emit_lost(&mut self, disk: Dev, mut parts: Parts, rwbs: Rwbs, at: u64) {
        let unknown = self.unknown_role();
        for p in &mut parts {
            p.2.c = Charge {
                role: unknown,
                stack: 0,
                via: Via::Unknown,
                txn: NO_TXN,
                ..p.2.c
            };
        }
        self.emit(disk, &parts, rwbs, at, at, true);
    }

    fn scale(&mut self, disk: Dev, sectors: u64) -> u32 {
        let size = self.dev_info(disk).size;
        if size == 0 {
            if self.warned_no_size.insert(disk) {
                warn(&mut self.summary, || {
                    format!(
                        "device {}:{} has no known size: offsets and seek distances are 0",
                        disk >> 20,
                        disk & 0xfffff
                    )
                });
            }
            return 0;
        }
        ((sectors as u128 * 65536 / size as u128).min(65535)) as u32
    }

    /// Emits the IOs of (the completed part of) one request: one per act.
    fn emit(
        &mut self,
        disk: Dev,
        parts: &[(u64, u64, Frag)],
        rwbs: Rwbs,
        issue: u64,
        complete: u64,
        swept: bool,
    ) {
        let Some(&(first, _, _)) = parts.first() else {
            return;
        };
        let last = parts.iter().map(|p| p.1).max().unwrap_or(first);
        let total: u64 = parts.iter().map(|p| (p.1 - p.0) * 512).sum();
        let Some(dir) = Dir::from_rwbs(rwbs) else {
            self.summary.other_bytes += total;
            self.summary.other_ios += 1;
            return;
        };
        let prev_end = if swept {
            None
        } else {
            self.last_end.insert(disk, last)
        };
        let seek = match prev_end {
            Some(pe) => self.scale(disk, first.abs_diff(pe)),
            None => 0,
        };
        let offset_base = disk;
        // Group parts by what they are charged to.
        let mut groups: Vec<(Charge, u64, u64, u64, u64)> = Vec::new(); // charge, sector, bytes, qtime, foff
        for &(a, b, f) in parts {
            let key = Charge {
                qtime: 0,
                rwbs: Rwbs::default(),
                ..f.c
            };
            match groups.iter_mut().find(|g| g.0 == key) {
                Some(g) => {
                    g.2 += (b - a) * 512;
                    g.3 = g.3.min(f.c.qtime);
                }
                None => groups.push((key, a, (b - a) * 512, f.c.qtime, f.foff)),
            }
        }
        let split = groups.len() > 1;
        let in_lost = self.touches_lost(
            parts.iter().map(|p| p.2.c.qtime).min().unwrap_or(issue),
            complete,
        );
        for (c, sector, bytes, qtime, foff) in groups {
            let reason = (c.reason != NO_REASON).then_some(WbReason(c.reason));
            let intent = if c.via == Via::Unknown {
                INTENT_LOST
            } else {
                self.intern_intent(reason.map(|r| r.modifier()).unwrap_or(0), c.stack)
            };
            let file = FileKey {
                dev: c.fdev,
                ino: c.ino,
            };
            let act = if c.via == Via::Unknown {
                // Charged to nobody known: the <unknown> role, told apart by who queued
                // the IO and why.
                let unknown = self.unknown_role();
                let issuer = (c.issuer != unknown).then_some(c.issuer);
                self.intern_act(unknown, intent, file, c.via, c.reason, issuer)
            } else {
                self.intern_act(c.role, intent, file, c.via, c.reason, None)
            };
            let offset = self.scale(offset_base, sector);
            self.tables.totals[act as usize].add(dir, bytes);
            let s = &mut self.summary;
            s.bytes[dir.index()] += bytes;
            s.ios[dir.index()] += 1;
            if in_lost {
                s.bytes_in_lost_windows += bytes;
            }
            if c.via == Via::Unknown {
                s.unknown_bytes += bytes;
                s.unknown_ios += 1;
                let u = self
                    .unknown_ctx
                    .entry((c.fdev, c.ino, c.issuer, c.reason))
                    .or_default();
                u.0 += bytes;
                u.1 += 1;
            }
            let queue_time = qtime.min(issue);
            self.ios.push(Io {
                dev: disk,
                sector,
                size: bytes,
                dir,
                rwbs,
                queue_time,
                issue_time: issue,
                complete_time: complete,
                wait_time: issue.saturating_sub(queue_time) / 1000,
                io_time: complete.saturating_sub(issue) / 1000,
                offset,
                seek_dist: seek,
                issuer: c.issuer,
                act,
                via: c.via,
                reason,
                ino: (c.ino != 0).then_some(c.ino),
                file_offset: (foff != NO_OFF).then_some(foff),
                split,
                journal_txn: (c.txn != NO_TXN).then_some(c.txn),
            });
        }
    }

    /// Records a loss window: merged with the previous window of the same CPU when they
    /// touch (a burst of losses), and with its neighbours for the overlap test; both lists
    /// stay within [`MAX_LOST_WINDOWS`] (beyond, the last window grows).
    fn note_lost(&mut self, start: u64, end: u64, cpu: u32, count: u64) {
        let ws = &mut self.summary.lost_windows;
        let n = ws.len();
        let same_cpu = (n.saturating_sub(8)..n)
            .rev()
            .find(|&i| ws[i].cpu == cpu)
            .filter(|&i| start <= ws[i].end);
        let into = same_cpu.or_else(|| (n >= MAX_LOST_WINDOWS).then(|| n - 1));
        match into.and_then(|i| ws.get_mut(i)) {
            Some(w) => {
                w.start = w.start.min(start);
                w.end = w.end.max(end);
                w.count += count;
            }
            None => ws.push(LostWindow {
                start,
                end,
                cpu,
                count,
            }),
        }
        // Sorted, disjoint intervals.
        let m = &mut self.lost_merged;
        let i = m.partition_point(|w| w.1 < start);
        let mut j = i;
        let (mut a, mut b) = (start, end);
        while j < m.len() && m[j].0 <= end {
            a = a.min(m[j].0);
            b = b.max(m[j].1);
            j += 1;
        }
        m.splice(i..j, [(a, b)]);
        if m.len() > MAX_LOST_WINDOWS {
            // Coarser: the two closest neighbours at the end become one.
            let last = m.pop().unwrap_or((a, b));
            if let Some(prev) = m.last_mut() {
                prev.1 = prev.1.max(last.1);
            }
        }
    }

    fn touches_lost(&self, start: u64, end: u64) -> bool {
        if self.lost_merged.is_empty() {
            return false;
        }
        let i = self.lost_merged.partition_point(|w| w.1 < start);
        self.lost_merged.get(i).is_some_and(|w| w.0 <= end)
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

    /// The consume queues give what walking the folios gave, whatever dirtying, forgetting
    /// and consuming come between calls; and a queue holds exactly its dirtier's folios.
    #[test]
    fn consume_queues_match_walking_the_folios() {
        let owners = [
            (Dirtier { role: 1, stack: 1 }, Via::Page),
            (Dirtier { role: 2, stack: 1 }, Via::Page),
            (Dirtier { role: 1, stack: 1 }, Via::Buffer),
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
