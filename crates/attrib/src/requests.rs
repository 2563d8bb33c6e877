//! Requests: a bio's way from queue to completion. Queued bio fragments per disk carry
//! their charges (sector intervals) until a request issued at their sectors takes them; an
//! issued request is keyed `(disk, current sector)` until it completes, whole or in parts.
//! Merges need no event of their own (a request takes every queued sector it covers);
//! splits and partial completions cut the sector intervals; a bio remapped from a stacked
//! device inherits the charges of the bio it came from, and a partition's remap to its disk
//! names the partition of the bio queued next (bio events carry the disk); requeues and
//! repeated issues re-dispatch the same request (see docs/attribution.md, "Requests: merges,
//! splits, remaps, requeues").

use std::collections::{BTreeMap, VecDeque};

use ioblame_decode::{Dev, Rwbs};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::charge::{Frag, Parts};
use crate::context::Devices;
use crate::interval::{Advance, Paint};
use crate::summary::Summary;

/// Bios queued or requests issued this long ago without progress are forgotten (ns).
const STALE_NS: u64 = 120_000_000_000;
/// Flushes waiting for completion per device beyond this many are forgotten.
const MAX_FLUSHES: usize = 1024;
/// Remap hints beyond this many are dropped.
const MAX_REMAP_HINTS: usize = 4096;

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

    /// The sectors of the bio queued in order `seq` whose fragment `[s, e)` is: its
    /// fragments of the same order that follow each other before and after it.
    fn extent_of(&self, seq: u64, mut s: u64, mut e: u64) -> (u64, u64) {
        let same = |x: &(u64, u64, u64, Frag)| x.0 == seq;
        while s > 0 {
            match self.overlapping(s - 1, s).into_iter().find(same) {
                Some(f) => s = f.1,
                None => break,
            }
        }
        while let Some(f) = self.overlapping(e, e + 1).into_iter().find(same) {
            if f.1 != e {
                break;
            }
            e = f.2;
        }
        (s, e)
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
    parts: Parts,
}

/// The completed part of an issued request.
#[derive(Debug)]
pub(crate) struct Completed {
    /// Its sectors with their charges, in order.
    pub parts: Parts,
    /// The request's rwbs.
    pub rwbs: Rwbs,
    /// When it was (last) issued.
    pub issue: u64,
    /// Whether part of the request is still in flight.
    pub partial: bool,
}

/// What a sweep found stale: parts of one disk that will never complete, with their rwbs
/// and when they were last seen (queued or issued).
pub(crate) type Stale = (Dev, Parts, Rwbs, u64);

/// The bios queued and the requests in flight.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    /// Queue order of bios.
    seq: u64,
    /// Queued bio fragments per disk.
    pending: FxHashMap<Dev, Pending>,
    /// Issued requests.
    inflight: Inflight,
    /// Issue times of the flushes waiting for completion, per disk.
    flushes: FxHashMap<Dev, VecDeque<u64>>,
    /// Disks with a request layer (requests were issued): their bio completions are not
    /// IOs of their own.
    rq_based: FxHashSet<Dev>,
    /// The charges a stacked device's bio hands to the lower device's bio it is remapped
    /// to, by `(lower disk, sector)`.
    remap_hints: FxHashMap<(Dev, u64), Parts>,
    /// The partition of the bio about to be queued at `(disk, sector)`: a partition's
    /// remap to its disk names it, the bio's own events carry the disk.
    part_bios: FxHashMap<(Dev, u64), Dev>,
    /// Bios of disks without a request layer completed with the bio they were chained to:
    /// `(disk, start, end)`, oldest first.
    chained: VecDeque<(Dev, u64, u64)>,
}

impl Requests {
    /// Queued bio fragments.
    pub fn pending_len(&self) -> usize {
        self.pending.values().map(|p| p.map.len()).sum()
    }

    /// Issued requests.
    pub fn inflight_len(&self) -> usize {
        self.inflight.len()
    }

    /// The queue order of the next bio.
    #[inline]
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The device of the bio queued at `sector` of `dev`: the partition whose remap to
    /// `dev` (its disk) came just before, else `dev`.
    #[inline]
    pub fn bio_dev(&mut self, dev: Dev, sector: u64) -> Dev {
        if self.part_bios.is_empty() {
            return dev;
        }
        self.part_bios.remove(&(dev, sector)).unwrap_or(dev)
    }

    /// Queues the bio at `sector` of `disk` with the charges of the upper bio it was
    /// remapped from, if it was (true): queued at `time`, in order `seq`.
    #[inline]
    pub fn queue_remapped(&mut self, disk: Dev, sector: u64, seq: u64, time: u64) -> bool {
        if self.remap_hints.is_empty() {
            return false;
        }
        let Some(parts) = self.remap_hints.remove(&(disk, sector)) else {
            return false;
        };
        let p = self.pending.entry(disk).or_default();
        for (a, b, mut f) in parts {
            f.c.qtime = time;
            p.insert(a, b, seq, f);
        }
        true
    }

    /// Queues a bio of `disk` in order `seq`: its sectors with their charges (sorted,
    /// disjoint). Neighbours charged alike are kept as one fragment.
    pub fn queue(&mut self, disk: Dev, seq: u64, segs: Parts) {
        let p = self.pending.entry(disk).or_default();
        let mut run: Option<(u64, u64, Frag)> = None;
        for (a, b, f) in segs {
            match &mut run {
                Some((ra, rb, rf)) if *rb == a && rf.continued_by(*ra, a, &f) => {
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

    /// `block_bio_remap` of `nr` sectors from `old_sector` of `old_dev` to `sector` of
    /// `dev`, which is always a whole disk (`bio_dev()`), or the partition itself in the
    /// form older ioblame tests and blktrace recordings of a partition give.
    ///
    /// * `old_dev` a partition of `dev` (the device table says so), or `dev` itself: the
    ///   partition's own remap, relative sector to absolute. Its start is learnt (a
    ///   contradiction of the table is returned: the start it gave); a stacked device's
    ///   hint waiting at the relative sector (a dm target over the partition remaps to the
    ///   disk's number with the partition's sector) moves to the absolute one; the bio
    ///   queued next at `(dev, sector)` is the partition's ([`Requests::bio_dev`]).
    /// * Another `old_dev` (a stacked device: dm, md): the lower bio, when queued, inherits
    ///   the upper bio's charges.
    pub fn remap(
        &mut self,
        devices: &mut Devices,
        (dev, sector): (Dev, u64),
        nr: u32,
        (old_dev, old_sector): (Dev, u64),
    ) -> Option<u64> {
        let disk = devices.info(dev).disk;
        if old_dev == dev || devices.info(old_dev).disk == dev {
            if let Some(parts) = self.remap_hints.remove(&(disk, old_sector)) {
                let parts = parts
                    .into_iter()
                    .map(|(a, b, f)| {
                        (
                            (a - old_sector).saturating_add(sector),
                            (b - old_sector).saturating_add(sector),
                            f,
                        )
                    })
                    .collect();
                self.remap_hints.insert((disk, sector), parts);
            }
            if old_dev != dev {
                if self.part_bios.len() >= MAX_REMAP_HINTS {
                    self.part_bios.clear();
                }
                self.part_bios.insert((disk, sector), old_dev);
            }
            return devices.learn_part_start(old_dev, sector, old_sector);
        }
        let old_disk = devices.info(old_dev).disk;
        let p = self.pending.get(&old_disk)?;
        let n = nr as u64;
        let paint = p.peek(old_sector, old_sector.saturating_add(n));
        if paint.segs.is_empty() {
            return None;
        }
        let parts: Parts = paint
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
        self.remap_hints.insert((disk, sector), parts);
        None
    }

    /// Takes the queued sectors `[a, b)` of `disk` (earliest queued first, each sector
    /// once); gaps are left uncovered.
    fn take_pending(&mut self, disk: Dev, a: u64, b: u64) -> Paint<Frag> {
        match self.pending.get_mut(&disk) {
            Some(p) => {
                let paint = p.take(a, b);
                if p.map.is_empty() {
                    self.pending.remove(&disk);
                }
                paint
            }
            None => Paint::default(),
        }
    }

    /// `block_rq_issue` of `nr` sectors at `sector` of `disk` at `time`: the queued
    /// sectors it takes, for a new request ([`Requests::start`] it then). `None` for a
    /// flush (no sectors) or a repeated issue of a request in flight (counted in `s`).
    pub fn issue(
        &mut self,
        s: &mut Summary,
        disk: Dev,
        time: u64,
        sector: u64,
        nr: u32,
    ) -> Option<Paint<Frag>> {
        if nr == 0 {
            let q = self.flushes.entry(disk).or_default();
            if q.len() >= MAX_FLUSHES {
                // Completions are not being seen: forget the oldest.
                q.pop_front();
            }
            q.push_back(time);
            s.flushes_issued += 1;
            return None;
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
                s.reissues += 1;
                return None;
            }
        }
        Some(self.take_pending(disk, sector, e))
    }

    /// A request of `nr` sectors at `sector` of `disk`, issued at `time`, is in flight
    /// with its parts (sorted, covering it).
    pub fn start(&mut self, disk: Dev, sector: u64, nr: u32, time: u64, rwbs: Rwbs, parts: Parts) {
        self.inflight.push(
            (disk, sector),
            Req {
                left: nr as u64,
                last_issue: time,
                rwbs,
                parts,
            },
        );
    }

    /// `block_rq_requeue` at `sector` of `disk`: whether a request in flight is there.
    pub fn requeued(&self, disk: Dev, sector: u64) -> bool {
        self.inflight.contains(&(disk, sector))
    }

    /// A flush of `disk` completed: whether one was waiting.
    pub fn flush_completed(&mut self, disk: Dev) -> bool {
        self.flushes
            .get_mut(&disk)
            .and_then(|q| q.pop_front())
            .is_some()
    }

    /// `block_rq_complete` of `n` sectors at `sector` of `disk`: the completed part of the
    /// oldest request there, if any; a partial completion leaves the rest in flight at the
    /// next sector.
    pub fn complete(&mut self, disk: Dev, sector: u64, n: u64) -> Option<Completed> {
        let mut r = self.inflight.pop(&(disk, sector))?;
        let done = n.min(r.left);
        let cut = sector.saturating_add(done);
        let rest_at = r.parts.partition_point(|p| p.1 <= cut);
        let mut now: Parts = r.parts.drain(..rest_at).collect();
        if let Some(first) = r.parts.first_mut() {
            if first.0 < cut {
                now.push((first.0, cut, first.2));
                first.2 = first.2.advance(cut - first.0);
                first.0 = cut;
            }
        }
        let (rwbs, issue) = (r.rwbs, r.last_issue);
        let partial = done < r.left;
        if partial {
            r.left -= done;
            self.inflight.push((disk, cut), r);
        }
        Some(Completed {
            parts: now,
            rwbs,
            issue,
            partial,
        })
    }

    /// The charges of the bios queued on `disk` (and not completed: a bio-based device's)
    /// over sectors `[a, b)`, cut to it, earliest queued first (the map is left as it is).
    pub fn queued_over(&self, disk: Dev, a: u64, b: u64) -> Paint<Frag> {
        match self.pending.get(&disk) {
            Some(p) => p.peek(a, b),
            None => Paint::default(),
        }
    }

    /// The charges of the requests in flight on `disk` over sectors `[a, b)`, cut to it
    /// (what a loop device's worker is serving while it writes the backing file).
    pub fn inflight_over(&self, disk: Dev, a: u64, b: u64) -> Paint<Frag> {
        let mut paint = Paint::default();
        let all = self.inflight.first.iter().chain(
            self.inflight
                .more
                .iter()
                .flat_map(|(k, q)| q.iter().map(move |r| (k, r))),
        );
        for (_, r) in all.filter(|(k, _)| k.0 == disk) {
            for &(s, e, f) in &r.parts {
                if s < b && e > a {
                    let os = s.max(a);
                    paint.fill(os, e.min(b), &f.advance(os - s), None);
                }
            }
        }
        paint
    }

    /// Whether `disk` has a request layer (its bio completions are not IOs of their own).
    pub fn is_rq_based(&self, disk: Dev) -> bool {
        self.rq_based.contains(&disk)
    }

    /// `block_bio_complete` of sectors `[a, b)` of a disk without a request layer: the
    /// queued parts it completes, or `None` for the completion of bios already completed
    /// with the one they were chained to.
    ///
    /// A completion takes the whole of each bio queued at `[a, b)`: a bio the device split
    /// (dm on 5.10 cuts a large bio with `bio_split` and chains the part it maps first to
    /// the remainder) is reported with the remainder's sectors only. And it takes the bios
    /// chained to it: before 5.13 or so `bio_endio()` traced a completion only for the
    /// last bio of a chain (the chained ones jump to their parent first), and iomap
    /// writeback chains each full bio to the next (`iomap_chain_bio`: the next starts where
    /// it ends). So the bios queued earlier by the same task with the same flags that end
    /// where this one starts, each after the other, complete with it (seen on 5.10: a
    /// 4 MiB xfs writeback on dm-linear traced one completion of its last 1.7 MiB). Their
    /// own completion, where a kernel traces it after all (or a bio completed early so was
    /// not chained), is recognised and ignored.
    pub fn bio_complete(&mut self, disk: Dev, a: u64, b: u64) -> Option<Parts> {
        let Some(p) = self.pending.get(&disk) else {
            return self.completed_with_chain(disk, a, b);
        };
        let hits = p.overlapping(a, b);
        let Some(&(mut seq, _, _, first)) = hits.first() else {
            return self.completed_with_chain(disk, a, b);
        };
        let (mut a, mut b) = (a, b);
        for &(q, s, e, _) in &hits {
            let (s, e) = p.extent_of(q, s, e);
            a = a.min(s);
            b = b.max(e);
        }
        let (issuer, rwbs) = (first.c.issuer, first.c.rwbs);
        while a > 0 {
            let prev = p
                .overlapping(a - 1, a)
                .into_iter()
                .filter(|f| f.0 < seq && f.2 == a && f.3.c.issuer == issuer && f.3.c.rwbs == rwbs)
                .max_by_key(|f| f.0);
            let Some((q, s, e, _)) = prev else {
                break;
            };
            let (s, e) = p.extent_of(q, s, e);
            if self.chained.len() >= MAX_REMAP_HINTS {
                self.chained.pop_front();
            }
            self.chained.push_back((disk, s, e));
            seq = q;
            a = s;
        }
        Some(self.take_pending(disk, a, b).segs)
    }

    /// A completion of `[a, b)` of `disk` that matches no queued bio: `None` if a bio
    /// there was completed with the one it was chained to (forgotten then), else no parts.
    fn completed_with_chain(&mut self, disk: Dev, a: u64, b: u64) -> Option<Parts> {
        let i = self
            .chained
            .iter()
            .position(|&(d, s, e)| d == disk && s <= a && b <= e);
        match i {
            Some(i) => {
                self.chained.remove(i);
                None
            }
            None => Some(Vec::new()),
        }
    }

    /// Takes the bios queued and the requests issued before `now - STALE_NS` (their issue
    /// or completion was not recorded), counted in `s`, oldest first.
    pub fn sweep(&mut self, now: u64, s: &mut Summary) -> Vec<Stale> {
        let limit = now.saturating_sub(STALE_NS);
        let mut stale: Vec<Stale> = Vec::new();
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
        s.stale_bytes += bytes;
        s.stale_requests += requests;
        stale.sort_by_key(|s| s.3);
        stale
    }

    /// Adds what is still queued or in flight to the summary's leftovers.
    pub fn leftovers(&self, s: &mut Summary) {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charge::Charge;
    use crate::interval::NO_OFF;
    use crate::model::RoleId;

    const DISK: Dev = 8 << 20;

    /// A fragment charged to role `role`, queued at `qtime`, file bytes from `foff`.
    fn frag(role: u32, qtime: u64, foff: u64) -> Frag {
        Frag {
            c: Charge {
                role: RoleId(role),
                ..Charge::unmatched(RoleId(0), DISK, qtime, Rwbs::parse("W"))
            },
            foff,
        }
    }

    /// The roles of parts, with their sectors.
    fn roles(parts: &[(u64, u64, Frag)]) -> Vec<(u64, u64, u32)> {
        parts.iter().map(|p| (p.0, p.1, p.2.c.role.0)).collect()
    }

    #[test]
    fn queued_fragments_are_taken_earliest_first_and_cut() {
        let mut p = Pending::default();
        p.insert(0, 16, 1, frag(1, 0, NO_OFF));
        p.insert(8, 24, 2, frag(2, 0, 4096));
        assert_eq!(roles(&p.peek(4, 20).segs), vec![(4, 16, 1), (16, 20, 2)]);
        let taken = p.take(4, 20);
        assert_eq!(roles(&taken.segs), vec![(4, 16, 1), (16, 20, 2)]);
        // the second bio's part advanced to where it was cut
        assert_eq!(taken.segs[1].2.foff, 4096 + 8 * 512);
        // what was not taken stays, with its queue order
        let rest: Vec<_> = p
            .map
            .iter()
            .map(|(&(a, q), &(b, f))| (a, b, q, f.c.role.0))
            .collect();
        assert_eq!(rest, vec![(0, 4, 1, 1), (8, 16, 2, 2), (20, 24, 2, 2)]);
    }

    #[test]
    fn a_bio_is_queued_as_runs_of_like_sectors() {
        let mut r = Requests::default();
        let seq = r.next_seq();
        let f = frag(1, 5, 0);
        r.queue(
            DISK,
            seq,
            vec![
                (0, 8, f),
                (8, 16, f.advance(8)),
                // same charge, but the file offset does not follow: a new fragment
                (16, 24, f),
                (24, 32, frag(2, 5, NO_OFF)),
            ],
        );
        assert_eq!(r.pending_len(), 3);
        let mut s = Summary::default();
        let paint = r.issue(&mut s, DISK, 10, 0, 32).unwrap();
        assert_eq!(
            roles(&paint.segs),
            vec![(0, 16, 1), (16, 24, 1), (24, 32, 2)]
        );
        assert_eq!(r.pending_len(), 0);
    }

    #[test]
    fn requests_complete_whole_or_in_parts() {
        let mut r = Requests::default();
        let mut s = Summary::default();
        let seq = r.next_seq();
        r.queue(
            DISK,
            seq,
            vec![(100, 108, frag(1, 5, 0)), (108, 116, frag(2, 5, 0))],
        );
        let paint = r.issue(&mut s, DISK, 10, 100, 16).unwrap();
        r.start(DISK, 100, 16, 10, Rwbs::parse("W"), paint.segs);
        assert!(r.requeued(DISK, 100));
        // a repeated issue re-dispatches it
        assert!(r.issue(&mut s, DISK, 20, 100, 16).is_none());
        assert_eq!(s.reissues, 1);
        // 4 sectors, then the rest at the sector after them
        let c = r.complete(DISK, 100, 4).unwrap();
        assert_eq!(roles(&c.parts), vec![(100, 104, 1)]);
        assert_eq!((c.issue, c.partial), (20, true));
        assert!(r.complete(DISK, 100, 4).is_none());
        let c = r.complete(DISK, 104, 12).unwrap();
        assert_eq!(roles(&c.parts), vec![(104, 108, 1), (108, 116, 2)]);
        assert_eq!(c.parts[0].2.foff, 4 * 512);
        assert!(!c.partial);
        assert_eq!(r.inflight_len(), 0);
    }

    #[test]
    fn two_requests_at_one_sector_complete_in_issue_order() {
        let mut r = Requests::default();
        let mut s = Summary::default();
        for role in [1, 2] {
            let seq = r.next_seq();
            r.queue(DISK, seq, vec![(0, 8, frag(role, 5, NO_OFF))]);
            // fresh bios wait at the sector: a new request, not a re-dispatch
            let paint = r.issue(&mut s, DISK, 10, 0, 8).unwrap();
            r.start(DISK, 0, 8, 10, Rwbs::parse("R"), paint.segs);
        }
        assert_eq!(s.reissues, 0);
        assert_eq!(r.inflight_len(), 2);
        assert_eq!(r.complete(DISK, 0, 8).unwrap().parts[0].2.c.role, RoleId(1));
        assert_eq!(r.complete(DISK, 0, 8).unwrap().parts[0].2.c.role, RoleId(2));
    }

    #[test]
    fn flushes_are_counted_not_charged() {
        let mut r = Requests::default();
        let mut s = Summary::default();
        assert!(r.issue(&mut s, DISK, 10, 0, 0).is_none());
        assert_eq!(s.flushes_issued, 1);
        assert!(r.flush_completed(DISK));
        assert!(!r.flush_completed(DISK));
        // a flush issue marks no disk as request-based
        assert!(!r.is_rq_based(DISK));
    }

    const DM: Dev = 254 << 20;
    /// A partition of DISK at sector 2048, in the devices' table.
    const PART: Dev = 259 << 20;

    fn devices() -> Devices {
        let d = |name: &str, major, part_start, parent: &str| ioblame_format::BlockDevice {
            name: name.into(),
            major,
            minor: 0,
            size_sectors: 1 << 20,
            part_start,
            parent: parent.into(),
            ..Default::default()
        };
        Devices::new(
            &[
                d("sda", 8, 0, ""),
                d("sda1", 259, 2048, "sda"),
                d("dm-0", 254, 0, ""),
            ],
            &[],
        )
    }

    #[test]
    fn a_remapped_bio_inherits_the_upper_bios_charges() {
        let mut devs = devices();
        let mut r = Requests::default();
        let seq = r.next_seq();
        r.queue(DM, seq, vec![(0, 8, frag(1, 5, 0)), (8, 16, frag(2, 5, 0))]);
        assert_eq!(r.remap(&mut devs, (DISK, 1000), 16, (DM, 0)), None);
        let seq = r.next_seq();
        assert_eq!(r.bio_dev(DISK, 1000), DISK, "no partition");
        assert!(!r.queue_remapped(DISK, 999, seq, 7));
        assert!(r.queue_remapped(DISK, 1000, seq, 7));
        let parts = r.bio_complete(DISK, 1000, 1016).unwrap();
        assert_eq!(roles(&parts), vec![(1000, 1008, 1), (1008, 1016, 2)]);
        // queued when the lower bio was
        assert!(parts.iter().all(|p| p.2.c.qtime == 7));
        // the hint is used once
        assert!(!r.queue_remapped(DISK, 1000, seq, 8));
    }

    /// A partition's bio as every kernel traces it (5.10 to 7.3): its remap goes from the
    /// partition's relative sector to the disk's absolute one with `dev` the disk, and the
    /// bio is queued on the disk. The bio is the partition's; nothing is handed over.
    #[test]
    fn a_partition_remap_names_the_partition_of_the_next_bio() {
        let mut devs = devices();
        let mut r = Requests::default();
        assert_eq!(r.remap(&mut devs, (DISK, 2048 + 80), 8, (PART, 80)), None);
        assert!(r.remap_hints.is_empty());
        assert_eq!(r.bio_dev(DISK, 2048 + 79), DISK);
        assert_eq!(r.bio_dev(DISK, 2048 + 80), PART);
        // once
        assert_eq!(r.bio_dev(DISK, 2048 + 80), DISK);
        // a remap that contradicts the table: the remap wins, the table's start is told
        assert_eq!(
            r.remap(&mut devs, (DISK, 4096 + 80), 8, (PART, 80)),
            Some(2048)
        );
        assert_eq!(devs.info(PART).part_start, 4096);
        // the form a blktrace recording of the partition itself gives: dev == old_dev
        assert_eq!(r.remap(&mut devs, (PART, 4096 + 8), 8, (PART, 8)), None);
        assert_eq!(r.bio_dev(PART, 4096 + 8), PART);
    }

    /// dm-linear over a partition: dm's remap names the disk with the partition's sector
    /// (16408, `bio_dev()` of the clone), the partition's remap follows (16408 -> 18456),
    /// then the bio is queued on the disk at 18456: it takes the dm bio's charges there.
    #[test]
    fn a_stacked_device_over_a_partition_hands_its_charges_down() {
        let mut devs = devices();
        let mut r = Requests::default();
        let seq = r.next_seq();
        r.queue(DM, seq, vec![(24, 32, frag(1, 5, 0))]);
        // an unrelated bio of the disk waits at the relative sector: not taken
        let seq = r.next_seq();
        r.queue(DISK, seq, vec![(16408, 16416, frag(3, 5, 0))]);
        assert_eq!(r.remap(&mut devs, (DISK, 16408), 8, (DM, 24)), None);
        assert_eq!(r.remap(&mut devs, (DISK, 18456), 8, (PART, 16408)), None);
        assert_eq!(r.bio_dev(DISK, 18456), PART);
        let seq = r.next_seq();
        assert!(r.queue_remapped(DISK, 18456, seq, 9));
        assert!(r.remap_hints.is_empty());
        let mut s = Summary::default();
        let paint = r.issue(&mut s, DISK, 10, 18456, 8).unwrap();
        assert_eq!(roles(&paint.segs), vec![(18456, 18464, 1)]);
        let paint = r.issue(&mut s, DISK, 11, 16408, 8).unwrap();
        assert_eq!(roles(&paint.segs), vec![(16408, 16416, 3)]);
    }

    /// dm on 5.10 splits a large bio and traces one completion, of the remainder's
    /// sectors, when the whole bio is done (seen: a 4 MiB xfs writeback bio on dm-linear
    /// completed as sectors 6888..10432 of 2240..10432): the whole bio completes, and only
    /// it.
    #[test]
    fn a_split_bios_completion_completes_the_whole_bio() {
        let mut r = Requests::default();
        let seq = r.next_seq();
        r.queue(
            DM,
            seq,
            vec![(2240, 4288, frag(1, 5, 0)), (4288, 10432, frag(2, 5, 0))],
        );
        // the bios queued before and after it, touching it
        let seq = r.next_seq();
        r.queue(DM, seq, vec![(10432, 10440, frag(3, 6, 0))]);
        let seq = r.next_seq();
        r.queue(DM, seq, vec![(2232, 2240, frag(4, 7, 0))]);
        let parts = r.bio_complete(DM, 6888, 10432).unwrap();
        assert_eq!(roles(&parts), vec![(2240, 4288, 1), (4288, 10432, 2)]);
        assert_eq!(r.pending_len(), 2);
        // a completion of exactly one bio's sectors takes that bio alone
        assert_eq!(
            roles(&r.bio_complete(DM, 10432, 10440).unwrap()),
            vec![(10432, 10440, 3)]
        );
        assert_eq!(
            roles(&r.bio_complete(DM, 2232, 2240).unwrap()),
            vec![(2232, 2240, 4)]
        );
        assert_eq!(r.pending_len(), 0);
    }

    /// iomap chains each full writeback bio to the next; before about 5.13 only the last
    /// one's completion is traced: the bios queued before it by the same task with the
    /// same flags, each ending where the next starts, complete with it, and their own
    /// completion, if it comes, is ignored. Another task's bio next to them waits.
    #[test]
    fn a_chained_bios_completion_completes_the_chain() {
        let mut r = Requests::default();
        let by = |issuer, role| Frag {
            c: Charge {
                issuer: RoleId(issuer),
                ..frag(role, 5, 0).c
            },
            foff: 0,
        };
        for (a, b, issuer, role) in [
            (0, 8, 9, 4),
            (8, 2056, 7, 1),
            (2056, 4104, 7, 2),
            (4104, 5000, 7, 3),
        ] {
            let seq = r.next_seq();
            r.queue(DM, seq, vec![(a, b, by(issuer, role))]);
        }
        let parts = r.bio_complete(DM, 4104, 5000).unwrap();
        assert_eq!(
            roles(&parts),
            vec![(8, 2056, 1), (2056, 4104, 2), (4104, 5000, 3)]
        );
        // their own completions, traced after all: nothing more
        assert!(r.bio_complete(DM, 8, 2056).is_none());
        assert!(r.bio_complete(DM, 2056, 4104).is_none());
        // once only: a second is unmatched
        assert_eq!(r.bio_complete(DM, 8, 2056), Some(Vec::new()));
        assert_eq!(roles(&r.bio_complete(DM, 0, 8).unwrap()), vec![(0, 8, 4)]);
    }

    #[test]
    fn stale_bios_and_requests_are_swept_oldest_first() {
        let mut r = Requests::default();
        let mut s = Summary::default();
        let seq = r.next_seq();
        r.queue(DISK, seq, vec![(0, 8, frag(1, 50, NO_OFF))]);
        let seq = r.next_seq();
        r.queue(DISK, seq, vec![(100, 108, frag(2, 10, NO_OFF))]);
        let paint = r.issue(&mut s, DISK, 20, 100, 8).unwrap();
        r.start(DISK, 100, 8, 20, Rwbs::parse("W"), paint.segs);
        let seq = r.next_seq();
        r.queue(DISK, seq, vec![(200, 208, frag(3, STALE_NS + 60, NO_OFF))]);
        let stale = r.sweep(STALE_NS + 55, &mut s);
        let got: Vec<_> = stale.iter().map(|x| (x.3, x.1[0].2.c.role.0)).collect();
        assert_eq!(got, vec![(20, 2), (50, 1)]);
        assert_eq!((s.stale_bytes, s.stale_requests), (16 * 512, 1));
        assert_eq!((r.pending_len(), r.inflight_len()), (1, 0));
        let mut end = Summary::default();
        r.leftovers(&mut end);
        assert_eq!(end.pending_bytes_at_end, 8 * 512);
    }
}
