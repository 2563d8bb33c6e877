//! Interval maps over 512-byte sectors.
//!
//! Values know how to describe a sub-interval that starts later ([`Advance`]), so cutting
//! an interval keeps, for example, the file offset of each part right.

use smallvec::SmallVec;

use crate::blocks::Blocks;

/// A value attached to a sector interval that can be cut.
pub(crate) trait Advance: Clone {
    /// The value of the part of the interval that starts `sectors` later.
    fn advance(&self, sectors: u64) -> Self;
}

/// A file offset not known.
pub(crate) const NO_OFF: u64 = u64::MAX;

/// File offset `off` (or [`NO_OFF`]) moved `sectors` 512-byte sectors on.
#[inline]
pub(crate) fn adv_off(off: u64, sectors: u64) -> u64 {
    if off == NO_OFF {
        NO_OFF
    } else {
        off.saturating_add(sectors.saturating_mul(512))
    }
}

/// Non-overlapping intervals `[start, end)` with values; block-shaped ones (a buffer head)
/// are found by hashing ([`Blocks`]).
#[derive(Debug, Clone)]
pub(crate) struct IntervalMap<V> {
    map: Blocks<V>,
}

impl<V> Default for IntervalMap<V> {
    fn default() -> Self {
        IntervalMap {
            map: Blocks::default(),
        }
    }
}

impl<V: Advance> IntervalMap<V> {
    /// Number of intervals.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Removes everything.
    pub fn clear(&mut self) {
        self.map.clear()
    }

    /// Keeps the intervals whose value `keep` accepts.
    pub fn retain(&mut self, keep: impl FnMut(&V) -> bool) {
        self.map.retain(keep);
    }

    /// Starts loading the interval holding `x` (see [`Blocks::prefetch`]).
    pub fn prefetch(&self, x: u64) {
        self.map.prefetch(x);
    }

    /// Starts loading the value of the interval holding `x` (see [`Blocks::prefetch_value`]).
    pub fn prefetch_value(&self, x: u64) {
        self.map.prefetch_value(x);
    }

    /// Whether one interval whose value `keep` accepts covers `[a, b)`.
    pub fn covered_by(&self, a: u64, b: u64, keep: impl FnOnce(&V) -> bool) -> bool {
        match self.map.containing(a) {
            Some((_, e, v)) => e >= b && keep(v),
            None => false,
        }
    }

    /// Inserts the parts of `[a, b)` not covered by intervals whose value `keep` accepts;
    /// the overlapping intervals it refuses are removed (whole) first. A free range costs a
    /// lookup and an insert. (Callers that can skip work when an accepted interval already
    /// covers `[a, b)`, a buffer dirtied again, ask [`IntervalMap::covered_by`] first.)
    pub fn insert_if_free_keeping(
        &mut self,
        a: u64,
        b: u64,
        v: V,
        mut keep: impl FnMut(&V) -> bool,
    ) {
        if a >= b {
            return;
        }
        // A block among blocks of its size only (buffer heads): one hash lookup.
        let v = match self.map.insert_alone_unless(a, b, v, &mut keep) {
            Ok(()) => return,
            Err(v) => v,
        };
        let starts = self.map.overlapping(a, b);
        if starts.is_empty() {
            // A free range: one insert.
            self.map.insert(a, b, v);
            return;
        }
        let mut cur = a;
        let mut gaps: SmallVec<[(u64, u64); 4]> = SmallVec::new();
        for s in starts {
            let Some((e, old)) = self.map.get(s) else {
                continue;
            };
            if !keep(old) {
                self.map.remove(s);
                continue;
            }
            if s > cur {
                gaps.push((cur, s));
            }
            cur = cur.max(e);
        }
        if cur < b {
            gaps.push((cur, b));
        }
        for (ga, gb) in gaps {
            self.map.insert(ga, gb, v.advance(ga - a));
        }
    }

    /// Removes the parts overlapping `[a, b)` and appends them (cut to `[a, b)`, in order)
    /// to `out`; the parts outside stay.
    pub fn take(&mut self, a: u64, b: u64, out: &mut Vec<(u64, u64, V)>) {
        if a >= b {
            return;
        }
        let first = out.len();
        self.map
            .remove_overlapping(a, b, |s, e, v| out.push((s, e, v)));
        // Cut the ends: what lies outside `[a, b)` goes back.
        for part in &mut out[first..] {
            let (s, e) = (part.0, part.1);
            if s < a || e > b {
                let v = part.2.clone();
                let os = s.max(a);
                *part = (os, e.min(b), v.advance(os - s));
                if e > b {
                    self.map.insert(b, e, v.advance(b - s));
                }
                if s < a {
                    self.map.insert(s, a, v);
                }
            }
        }
    }

    /// The parts overlapping `[a, b)`, cut to it, appended to `out` in order (the map is
    /// left as it is).
    pub fn peek(&self, a: u64, b: u64, out: &mut Vec<(u64, u64, V)>) {
        if a >= b {
            return;
        }
        let first = out.len();
        self.map.visit_overlapping(a, b, |s, e, v| {
            let os = s.max(a);
            out.push((os, e.min(b), v.advance(os - s)));
            true
        });
        out[first..].sort_unstable_by_key(|p| p.0);
    }

    /// The value of the interval starting at `a`.
    pub fn starting_at_mut(&mut self, a: u64) -> Option<&mut V> {
        self.map.get_mut(a).map(|(_, v)| v)
    }

    /// The value at `sector`, with the start of its interval.
    #[cfg(test)]
    pub fn get(&self, sector: u64) -> Option<(u64, u64, &V)> {
        self.map.containing(sector)
    }

    /// Inserts `[a, b)`, replacing whatever overlapped it.
    pub fn insert(&mut self, a: u64, b: u64, v: V) {
        if a >= b {
            return;
        }
        let mut gone = Vec::new();
        self.take(a, b, &mut gone);
        self.map.insert(a, b, v);
    }

    /// Inserts the parts of `[a, b)` not already covered (earlier values win).
    #[cfg(test)]
    pub fn insert_if_free(&mut self, a: u64, b: u64, v: V) {
        self.insert_if_free_keeping(a, b, v, |_| true);
    }

    /// Iterates over all intervals, in order.
    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, &V)> {
        let mut all: Vec<_> = self.map.iter().collect();
        all.sort_unstable_by_key(|x| x.0);
        all.into_iter()
    }
}

/// Sector intervals being assembled for one bio or request: earlier fills win.
#[derive(Debug, Clone)]
pub(crate) struct Paint<V> {
    /// Sorted, non-overlapping.
    pub segs: Vec<(u64, u64, V)>,
}

impl<V> Default for Paint<V> {
    fn default() -> Self {
        Paint { segs: Vec::new() }
    }
}

impl<V: Advance> Paint<V> {
    /// Fills the parts of `[a, b)` not yet covered with `v` (advanced to each part's
    /// start); the filled parts are appended to `filled` when given.
    pub fn fill(&mut self, a: u64, b: u64, v: &V, mut filled: Option<&mut Vec<(u64, u64)>>) {
        if a >= b {
            return;
        }
        let mut i = self.segs.partition_point(|s| s.1 <= a);
        let mut cur = a;
        while cur < b {
            if i < self.segs.len() && self.segs[i].0 <= cur {
                cur = cur.max(self.segs[i].1);
                i += 1;
                continue;
            }
            let next = if i < self.segs.len() {
                self.segs[i].0.min(b)
            } else {
                b
            };
            if cur < next {
                self.segs.insert(i, (cur, next, v.advance(cur - a)));
                i += 1;
                if let Some(f) = filled.as_deref_mut() {
                    f.push((cur, next));
                }
            }
            cur = next;
        }
    }

    /// Whether `[a, b)` is entirely covered.
    pub fn covers(&self, a: u64, b: u64) -> bool {
        let mut cur = a;
        let i = self.segs.partition_point(|s| s.1 <= a);
        for s in &self.segs[i..] {
            if s.0 > cur {
                return false;
            }
            cur = cur.max(s.1);
            if cur >= b {
                return true;
            }
        }
        cur >= b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct Off(u64);
    impl Advance for Off {
        fn advance(&self, s: u64) -> Self {
            Off(self.0 + s)
        }
    }

    #[test]
    fn file_offsets_advance_unless_unknown() {
        assert_eq!(adv_off(4096, 2), 5120);
        assert_eq!(adv_off(NO_OFF, 2), NO_OFF);
        assert_eq!(adv_off(u64::MAX - 1, 2), u64::MAX);
    }

    #[test]
    fn take_cuts_and_keeps_the_rest() {
        let mut m = IntervalMap::default();
        m.insert(10, 20, Off(100));
        m.insert(30, 40, Off(300));
        let mut out = Vec::new();
        m.take(15, 35, &mut out);
        assert_eq!(out, vec![(15, 20, Off(105)), (30, 35, Off(300))]);
        assert_eq!(
            m.iter().map(|(a, b, v)| (a, b, v.0)).collect::<Vec<_>>(),
            vec![(10, 15, 100), (35, 40, 305)]
        );
        assert_eq!(m.get(36).map(|(a, b, v)| (a, b, v.0)), Some((35, 40, 305)));
        assert!(m.get(20).is_none());
    }

    #[test]
    fn insert_replaces_and_insert_if_free_keeps() {
        let mut m = IntervalMap::default();
        m.insert(0, 10, Off(0));
        m.insert(5, 15, Off(50));
        assert_eq!(
            m.iter().map(|(a, b, v)| (a, b, v.0)).collect::<Vec<_>>(),
            vec![(0, 5, 0), (5, 15, 50)]
        );
        m.insert_if_free(12, 20, Off(1000));
        assert_eq!(
            m.iter().map(|(a, b, v)| (a, b, v.0)).collect::<Vec<_>>(),
            vec![(0, 5, 0), (5, 15, 50), (15, 20, 1003)]
        );
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn insert_if_free_keeping_replaces_only_refused() {
        let mut m = IntervalMap::default();
        m.insert(0, 10, Off(0));
        m.insert(20, 30, Off(2000));
        // covered by an accepted interval: nothing changes
        m.insert_if_free_keeping(2, 8, Off(500), |_| true);
        // the refused interval goes; the gaps are filled
        m.insert_if_free_keeping(5, 40, Off(5000), |v| v.0 != 2000);
        assert_eq!(
            m.iter().map(|(a, b, v)| (a, b, v.0)).collect::<Vec<_>>(),
            vec![(0, 10, 0), (10, 40, 5005)]
        );
    }

    #[test]
    fn paint_first_fill_wins() {
        let mut p = Paint::default();
        p.fill(10, 20, &Off(0), None);
        let mut f = Vec::new();
        p.fill(0, 30, &Off(1000), Some(&mut f));
        assert_eq!(f, vec![(0, 10), (20, 30)]);
        assert_eq!(
            p.segs,
            vec![(0, 10, Off(1000)), (10, 20, Off(0)), (20, 30, Off(1020))]
        );
        assert!(p.covers(0, 30));
        assert!(!p.covers(0, 31));
    }
}
