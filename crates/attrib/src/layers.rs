//! Layers: the IO of a loop device's backing file charged to the act whose IO the loop
//! device was serving there, as a copy on the lower device (see docs/attribution.md, "Loop
//! devices").
//!
//! The loop worker writes (or reads) sector `S` of the loop device at byte `S * 512 +
//! offset` of the backing file while the loop device's request is in flight. So:
//! * a folio of a backing file dirtied while a request of its loop device covering it is in
//!   flight records that request's charges per file sector; the worker's dirty buffers of
//!   the same write take the charges of the file sectors they hold, in order (the buffers of
//!   a folio are marked dirty in order, the first just before the folio's own event);
//! * a bio of the backing filesystem's disk then takes those charges for the sectors they
//!   cover (a dirty buffer copied) or the file sectors its maps name (a dirty folio copied);
//!   a direct or read bio of a backing file takes the charges of the loop request in flight
//!   at the file offset its maps name.
//!
//! The copies keep the upper charge whole (role, stack, file, via, reason, issuer): they are
//! the same act's, marked [`crate::Io::lower`].

use ioblame_decode::Dev;
use ioblame_format::{DmTarget, LoopDevice};
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

use crate::charge::{Charge, Frag};
use crate::context::Devices;
use crate::interval::{IntervalMap, Paint, NO_OFF};
use crate::model::Via;
use crate::requests::Requests;

/// Copies not written this long after they were made are forgotten (ns), as dirty buffers.
const FORGET_NS: u64 = 600_000_000_000;
/// Threads whose buffers are followed beyond this many are forgotten.
const THREADS_MAX: usize = 4096;
/// A buffer dirtied this long after the thread's last backing-file folio (or the buffer
/// before it) is not of that folio's write (ns); the decoder's rule for a buffer's folio.
const BUFFER_GAP_NS: u64 = ioblame_decode::BUFFER_FOLIO_MAX_GAP_NS;
/// A thread that dirtied a backing file's folio for a loop device this long ago is still
/// taken for that loop device's worker (ns).
const WORKER_NS: u64 = 1_000_000_000;

/// A loop device over a backing file.
#[derive(Debug, Clone, Copy)]
struct Mapping {
    /// The loop device (a disk).
    upper: Dev,
    /// Byte offset in the backing file of its sector 0.
    offset: u64,
}

/// Which file sectors a thread's next dirty buffers hold.
#[derive(Debug, Clone, Copy, Default)]
struct Thread {
    /// The backing file `(disk, ino)` of the folio the thread dirtied last, the next file
    /// sector of it a buffer takes, the folio's end, and when the last of them was dirtied.
    folio: Option<((Dev, u64), u64, u64, u64)>,
    /// A buffer of a backing filesystem's disk dirtied before any folio: `(disk, a, b, t)`.
    before: Option<(Dev, u64, u64, u64)>,
    /// When the thread last dirtied a backing file's folio for a loop device's IO (0:
    /// never): only such a thread's other buffers may be that IO's.
    worker_at: u64,
}

/// A device-mapper target mapping a dm device's sectors one to one onto a lower disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DmMap {
    /// The dm device.
    upper: Dev,
    /// Its first sector the target covers.
    start: u64,
    /// Sectors covered.
    length: u64,
    /// The lower disk's sector of `start` (the partition start included).
    lower: u64,
}

/// The loop mappings of the trace and the copies waiting for the lower device's IO.
#[derive(Debug, Default)]
pub(crate) struct Layers {
    /// Loop devices per backing file `(disk of its filesystem, ino)`.
    files: FxHashMap<(Dev, u64), SmallVec<[Mapping; 1]>>,
    /// The disks holding backing files.
    disks: FxHashSet<Dev>,
    /// Per backing file, the upper charges of its dirty file sectors.
    pages: FxHashMap<(Dev, u64), IntervalMap<Frag>>,
    /// Per disk, the upper charges of dirty buffers (disk sectors).
    buffers: FxHashMap<Dev, IntervalMap<Frag>>,
    /// Per thread, where its dirty buffers are in the file it writes.
    threads: FxHashMap<u32, Thread>,
    /// One-to-one device-mapper targets per lower disk.
    dm: FxHashMap<Dev, SmallVec<[DmMap; 1]>>,
}

impl Layers {
    /// The loop devices `loops` and one-to-one dm targets `dm` of a trace whose devices are
    /// `devs`.
    pub fn new(loops: &[LoopDevice], dm: &[DmTarget], devs: &Devices) -> Layers {
        let mut l = Layers::default();
        l.add(loops, dm, devs);
        l
    }

    /// Adds the loop devices and dm targets not known yet (a follower's newer lists: set up
    /// while recording); those known stay, with the copies waiting for their lower IO.
    pub fn add(&mut self, loops: &[LoopDevice], dm: &[DmTarget], devs: &Devices) {
        let l = self;
        for t in dm
            .iter()
            .filter(|t| t.start.checked_add(t.length).is_some())
        {
            let info = devs.info(t.lower_kernel_dev());
            let Some(lower) = info.part_start.checked_add(t.lower_offset) else {
                continue;
            };
            if lower.checked_add(t.length).is_none() {
                continue;
            }
            let m = DmMap {
                upper: t.kernel_dev(),
                start: t.start,
                length: t.length,
                lower,
            };
            let v = l.dm.entry(info.disk).or_default();
            if !v.contains(&m) {
                v.push(m);
            }
        }
        // Offsets not on a sector boundary cannot be followed by sector.
        for lo in loops.iter().filter(|l| l.offset % 512 == 0) {
            let disk = devs.info(lo.backing_kernel_dev()).disk;
            let m = Mapping {
                upper: lo.kernel_dev(),
                offset: lo.offset,
            };
            let v = l.files.entry((disk, lo.backing_ino)).or_default();
            if !v.iter().any(|x| x.upper == m.upper && x.offset == m.offset) {
                v.push(m);
            }
            l.disks.insert(disk);
        }
    }

    /// Whether the trace has no loop device over a file and no one-to-one dm target.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.dm.is_empty()
    }

    /// A bio of sectors `[a, b)` of `disk`, queued at `time` without a remap event and
    /// painted `paint` by the rules: the sectors a one-to-one dm target maps there from a
    /// bio still queued on the dm device above take that bio's charges, as a remap would have
    /// handed them on (dm-crypt before 5.16 resubmits its writes from a worker and traces no
    /// remap); the rules' charges stay where no such bio is.
    pub fn link_dm(
        &self,
        req: &Requests,
        disk: Dev,
        (a, b): (u64, u64),
        time: u64,
        paint: &mut Paint<Frag>,
    ) {
        let Some(maps) = self.dm.get(&disk) else {
            return;
        };
        let mut out = Paint::default();
        for m in maps {
            // Checked in `add`: neither end overflows.
            let (la, lb) = (a.max(m.lower), b.min(m.lower + m.length));
            if la >= lb {
                continue;
            }
            let ua = m.start + (la - m.lower);
            for (s, e, mut f) in req.queued_over(m.upper, ua, ua + (lb - la)).segs {
                f.c.qtime = time;
                out.fill(la + (s - ua), la + (e - ua), &f, None);
            }
        }
        if out.segs.is_empty() {
            return;
        }
        for &(s, e, f) in &paint.segs {
            out.fill(s, e, &f, None);
        }
        *paint = out;
    }

    /// A folio of `(bdi, ino)`, file bytes `[a, b)`, went dirty at `t` on thread `tid`: if
    /// it is a backing file and a request of its loop device in flight covers it, the
    /// request's charges are recorded for its file sectors. Whether they were.
    pub fn folio_dirtied(
        &mut self,
        req: &Requests,
        tid: u32,
        (bdi, ino): (Dev, u64),
        (a, b): (u64, u64),
        t: u64,
    ) -> bool {
        let Some(maps) = self.files.get(&(bdi, ino)) else {
            return false;
        };
        // Whatever an earlier write left there was written, or is overwritten now.
        if let Some(p) = self.pages.get_mut(&(bdi, ino)) {
            p.take(a / 512, b.div_ceil(512), &mut Vec::new());
        }
        let maps = maps.clone();
        let mut found = false;
        for m in maps {
            // The part of the folio at or after the loop device's sector 0 (offsets are
            // sector-aligned: `new`).
            let from = a.max(m.offset);
            if from >= b || from % 512 != 0 {
                continue;
            }
            let (ls, le) = ((from - m.offset) / 512, (b - m.offset) / 512);
            let paint = req.inflight_over(m.upper, ls, le);
            let shift = m.offset / 512;
            let mut any = false;
            for (s, e, f) in paint.segs.into_iter().filter(|p| p.2.c.rwbs.is_write()) {
                let pages = self.pages.entry((bdi, ino)).or_default();
                pages.insert(s + shift, e + shift, f);
                any = true;
            }
            found |= any;
        }
        if !found {
            return false;
        }
        if self.threads.len() >= THREADS_MAX && !self.threads.contains_key(&tid) {
            self.threads.clear();
        }
        let th = self.threads.entry(tid).or_default();
        th.worker_at = t;
        // Its buffers follow only when the first of them came just before it (a folio
        // written through its buffers: ext4 over allocated blocks); a folio dirtied without
        // (delayed allocation: no buffer traced) leaves no place for the next buffers, which
        // are another folio's.
        th.folio = None;
        if let Some((disk, ba, bb, bt)) = th.before.take() {
            if t.saturating_sub(bt) <= BUFFER_GAP_NS {
                th.folio = Some(((bdi, ino), a / 512, b.div_ceil(512), t));
                self.buffer_dirtied(req, tid, disk, (ba, bb), t, true, false);
            }
        }
        true
    }

    /// A dirty buffer, sectors `[a, b)` of `disk`, marked dirty by thread `tid` at `t`
    /// (`fresh`: it was clean, and its dirtier is recorded; else it was dirty already and
    /// keeps its first dirtier): if the thread is writing a backing file's folio whose sectors
    /// have upper charges, the buffer holds the next file sectors (a fresh one takes their
    /// charges).
    /// `loop_stack`: the buffer's stack is a loop worker's (the trace's symbols tell).
    #[allow(clippy::too_many_arguments)]
    pub fn buffer_dirtied(
        &mut self,
        req: &Requests,
        tid: u32,
        disk: Dev,
        (a, b): (u64, u64),
        t: u64,
        fresh: bool,
        loop_stack: bool,
    ) {
        if !self.disks.contains(&disk) {
            return;
        }
        if !fresh {
            // Its place in the folio is taken all the same: the next buffer holds the
            // sectors after it.
            if let Some(th) = self.threads.get_mut(&tid) {
                if let Some((file, next, end, last)) = th.folio {
                    if t.saturating_sub(last) <= BUFFER_GAP_NS && next < end && file.0 == disk {
                        th.folio = Some((file, next + (b - a), end, t));
                    }
                }
            }
            return;
        }
        if self.threads.len() >= THREADS_MAX && !self.threads.contains_key(&tid) {
            self.threads.clear();
        }
        let th = self.threads.entry(tid).or_default();
        let cursor = th.folio.filter(|&(file, next, end, last)| {
            t.saturating_sub(last) <= BUFFER_GAP_NS && next < end && file.0 == disk
        });
        let Some((file, next, end, _)) = cursor else {
            // Not of a folio the thread just dirtied (the first buffer of one, or one of a
            // folio dirty already): which file sectors it holds is not known. When the
            // thread is a loop device's worker (it just dirtied a backing file for one), it
            // is that loop device's IO all the same if every write in flight on the loop
            // devices over this disk's files is one act's.
            th.folio = None;
            th.before = Some((disk, a, b, t));
            let worker =
                loop_stack || (th.worker_at > 0 && t.saturating_sub(th.worker_at) <= WORKER_NS);
            if worker {
                if let Some(mut u) = self.only_upper(req, disk) {
                    // Swept by its own time.
                    u.c.qtime = t;
                    self.buffers.entry(disk).or_default().insert(a, b, u);
                }
            }
            return;
        };
        let n = b - a;
        th.folio = Some((file, next + n, end, t));
        let Some(pages) = self.pages.get(&file) else {
            return;
        };
        let mut got = Vec::new();
        pages.peek(next, next + n, &mut got);
        let bufs = self.buffers.entry(disk).or_default();
        for (s, e, f) in got {
            bufs.insert(a + (s - next), a + (e - next), f);
        }
    }

    /// The one charge of all the requests in flight on the loop devices over files of
    /// `disk`, if they have one (file offset unknown).
    fn only_upper(&self, req: &Requests, disk: Dev) -> Option<Frag> {
        let mut one: Option<Charge> = None;
        let mut uppers: SmallVec<[Dev; 4]> = SmallVec::new();
        for (_, maps) in self.files.iter().filter(|(k, _)| k.0 == disk) {
            for m in maps {
                if !uppers.contains(&m.upper) {
                    uppers.push(m.upper);
                }
            }
        }
        for upper in uppers {
            let segs = req.inflight_over(upper, 0, u64::MAX).segs;
            for (_, _, f) in segs.into_iter().filter(|p| p.2.c.rwbs.is_write()) {
                let c = Charge {
                    qtime: 0,
                    rwbs: Default::default(),
                    ..f.c
                };
                match one {
                    None => one = Some(c),
                    Some(o) if o == c => {}
                    Some(_) => return None,
                }
            }
        }
        one.map(|c| Frag { c, foff: NO_OFF })
    }

    /// The lower device's bio of `disk` painted `paint`: the sectors that are a copy of an
    /// upper device's IO take the upper charges, marked lower. Returns the bytes of backing
    /// files left with their own charge (no upper IO found for them).
    pub fn apply(&mut self, req: &Requests, disk: Dev, paint: &mut Paint<Frag>) -> u64 {
        if !self.disks.contains(&disk) {
            return 0;
        }
        let mut copies: Vec<(u64, u64, Frag)> = Vec::new();
        let mut got = Vec::new();
        for &(a, b, f) in &paint.segs {
            if let Some(bufs) = self.buffers.get_mut(&disk) {
                got.clear();
                bufs.take(a, b, &mut got);
                copies.extend(got.iter().map(|&(s, e, u)| (s, e, lower(u, &f))));
            }
            if f.c.ino == 0 || f.foff == NO_OFF || f.foff % 512 != 0 {
                continue;
            }
            let Some(maps) = self.files.get(&(disk, f.c.ino)) else {
                continue;
            };
            let fs = f.foff / 512;
            let issuer = matches!(
                f.c.via,
                Via::Direct | Via::Read | Via::Readahead | Via::Issuer
            );
            if issuer {
                // Direct IO or a read by the loop worker: the request it serves now, in the
                // same direction (the part of the bio at or after the loop device's sector
                // 0).
                let fe = fs + (b - a);
                for m in maps.iter() {
                    let shift = m.offset / 512;
                    if fe <= shift {
                        continue;
                    }
                    let from = fs.max(shift);
                    let (ls, base) = (from - shift, a + (from - fs));
                    let segs = req.inflight_over(m.upper, ls, ls + (fe - from)).segs;
                    let same = |u: &Frag| u.c.rwbs.is_write() == f.c.rwbs.is_write();
                    for (s, e, u) in segs.into_iter().filter(|p| same(&p.2)) {
                        copies.push((base + (s - ls), base + (e - ls), lower(u, &f)));
                    }
                }
            } else if let Some(pages) = self.pages.get_mut(&(disk, f.c.ino)) {
                got.clear();
                pages.take(fs, fs + (b - a), &mut got);
                copies.extend(
                    got.iter()
                        .map(|&(s, e, u)| (a + (s - fs), a + (e - fs), lower(u, &f))),
                );
            }
        }
        let mut unlinked = 0;
        if copies.is_empty() {
            for &(a, b, f) in &paint.segs {
                if f.c.ino != 0 && self.files.contains_key(&(disk, f.c.ino)) {
                    unlinked += (b - a) * 512;
                }
            }
            return unlinked;
        }
        let mut out = Paint::default();
        for (s, e, u) in &copies {
            out.fill(*s, *e, u, None);
        }
        let mut kept = Vec::new();
        for &(a, b, f) in &paint.segs {
            kept.clear();
            out.fill(a, b, &f, Some(&mut kept));
            if f.c.ino != 0 && self.files.contains_key(&(disk, f.c.ino)) {
                unlinked += kept.iter().map(|(x, y)| (y - x) * 512).sum::<u64>();
            }
        }
        *paint = out;
        unlinked
    }

    /// Forgets the copies made before `now - FORGET_NS` (their IO never came).
    pub fn sweep(&mut self, now: u64) {
        let old = |f: &Frag| now.saturating_sub(f.c.qtime) <= FORGET_NS;
        for m in self.pages.values_mut() {
            m.retain(old);
        }
        self.pages.retain(|_, m| !m.is_empty());
        for m in self.buffers.values_mut() {
            m.retain(old);
        }
        self.buffers.retain(|_, m| !m.is_empty());
        self.threads.retain(|_, t| {
            let last = t.folio.map(|f| f.3).max(t.before.map(|b| b.3)).unwrap_or(0);
            now.saturating_sub(last.max(t.worker_at)) <= FORGET_NS
        });
    }

    /// The thread `tid` exited.
    pub fn remove_thread(&mut self, tid: u32) {
        self.threads.remove(&tid);
    }
}

/// The upper charge `u` as the lower device's copy, queued as the lower bio `f` was.
fn lower(u: Frag, f: &Frag) -> Frag {
    Frag {
        c: Charge {
            lower: true,
            qtime: f.c.qtime,
            rwbs: f.c.rwbs,
            ..u.c
        },
        foff: u.foff,
    }
}
