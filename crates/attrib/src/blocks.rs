//! Non-overlapping intervals found by hashing where they are blocks.
//!
//! What the attribution keeps by position is mostly blocks: buffer heads one file system
//! block long at a multiple of their size, folios of a power of two pages at a multiple of
//! their size. Such an interval is found from any position inside it by rounding down to
//! its size, so [`Blocks`] keeps them in pages of [`PAGE`] neighbouring blocks of one size,
//! in a hash map by page, and finds them by probing the pages of each size in use: hash
//! lookups instead of the B-tree descents, inserts and node shifts that were a quarter of
//! the attribution's time on 4 KiB random writes, and neighbours (the blocks one request
//! writes) in one page. A page holds only its occupied slots, so blocks scattered one to a
//! page (random writes over a large file) cost about two slots of the page table each (it
//! is kept at most half full), not a page each.
//! Any other interval (an extent, a buffer of a partition that starts off its block size)
//! goes to a B-tree beside them.

use std::collections::BTreeMap;

use smallvec::SmallVec;

/// Starts of intervals: most range queries find one or two, kept inline.
pub(crate) type Starts = SmallVec<[u64; 4]>;

/// Blocks per page (a power of two).
const PAGE: u64 = 16;
const PAGE_BITS: u32 = PAGE.trailing_zeros();

/// Room a page's blocks get when they first leave the map's entry; a page that outgrows it
/// gets room for all [`PAGE`] blocks.
const GROW_FIRST: usize = 4;

/// Largest order kept in pages (the page index of a block is its start >> (order + 4)).
const MAX_ORDER: u8 = 56;

/// The order (log2 of the length) of `[a, b)` if it is a naturally aligned power of two
/// small enough for a page.
fn order_of(a: u64, b: u64) -> Option<u8> {
    let n = b.checked_sub(a)?;
    let o = n.trailing_zeros() as u8;
    (n.is_power_of_two() && a & (n - 1) == 0 && o <= MAX_ORDER).then_some(o)
}

/// The page key and slot of the block of order `o` starting at `s`.
#[inline]
fn place(o: u8, s: u64) -> ((u8, u64), usize) {
    let i = s >> o;
    ((o, i >> PAGE_BITS), (i & (PAGE - 1)) as usize)
}

/// The start of slot `slot` of page `(o, p)`.
#[inline]
fn start_of(o: u8, p: u64, slot: usize) -> u64 {
    ((p << PAGE_BITS) | slot as u64) << o
}

/// The positions of the bits set in `mask`, lowest first.
fn set_bits(mut mask: u64) -> impl Iterator<Item = u32> {
    std::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let i = mask.trailing_zeros();
        mask &= mask - 1;
        Some(i)
    })
}

/// The orders set in `orders`, smallest first.
fn each_order(orders: u64) -> impl Iterator<Item = u8> {
    set_bits(orders).map(|o| o as u8)
}

/// Asks the CPU to start loading the cache line of `p`: a hint, with no effect on what the
/// program computes.
#[inline]
#[allow(unused_unsafe)] // `_mm_prefetch` is a safe function from Rust 1.87 on.
fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing into the program and cannot fault, whatever the
    // address; SSE, which provides it, is part of every x86_64 CPU.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((p as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Neighbouring blocks of one order: slot `i` holds the block `i` places after the first.
/// Only the occupied slots take room (a lone block stays inside the table's slot; more
/// spill to the heap), so scattered blocks cost about two table slots each.
///
/// The blocks are kept in no particular order, with each slot's position in a table: a
/// block is added at the end and taken out by moving the last one into its place (and a
/// second table says whose block is where). Kept in slot order, every insert and removal
/// shifted the blocks after it (a call to `memmove` each), 6% of the attribution's time on
/// 4 KiB random writes.
#[derive(Debug, Clone)]
struct Page<V> {
    /// Bit `i` is set while slot `i` holds a block.
    mask: u16,
    /// Nibble `i` is where slot `i`'s block is in `vals` (while bit `i` of `mask` is set).
    pos: u64,
    /// Nibble `r` is the slot of the block at `r` in `vals` (for `r` below its length).
    slot_of: u64,
    /// The blocks of the set slots.
    vals: SmallVec<[V; 1]>,
}

impl<V> Page<V> {
    fn new() -> Page<V> {
        Page {
            mask: 0,
            pos: 0,
            slot_of: 0,
            vals: SmallVec::new(),
        }
    }

    /// Where slot `i`'s block is in `vals` (meaningless when the slot is free).
    #[inline]
    fn at(&self, i: usize) -> usize {
        ((self.pos >> (4 * i)) & 15) as usize
    }

    /// Records that slot `i`'s block is at `r` in `vals`.
    #[inline]
    fn set_at(&mut self, i: usize, r: usize) {
        self.pos = self.pos & !(15 << (4 * i)) | (r as u64) << (4 * i);
        self.slot_of = self.slot_of & !(15 << (4 * r)) | (i as u64) << (4 * r);
    }

    fn get(&self, i: usize) -> Option<&V> {
        (self.mask & 1 << i != 0).then(|| &self.vals[self.at(i)])
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut V> {
        let r = self.at(i);
        (self.mask & 1 << i != 0).then(|| &mut self.vals[r])
    }

    /// Puts `v` in slot `i`: the block it held, if any.
    fn put(&mut self, i: usize, v: V) -> Option<V> {
        if self.mask & 1 << i != 0 {
            let r = self.at(i);
            return Some(std::mem::replace(&mut self.vals[r], v));
        }
        let n = self.vals.len();
        if n == self.vals.capacity() {
            // Grow in two steps, not by doubling: a request fills a page's slots one by one,
            // and each reallocation copied the page and touched fresh memory.
            self.vals.reserve_exact(
                if n < GROW_FIRST {
                    GROW_FIRST
                } else {
                    PAGE as usize
                } - n,
            );
        }
        self.vals.push(v);
        self.set_at(i, n);
        self.mask |= 1 << i;
        None
    }

    /// Takes slot `i`'s block out.
    fn take(&mut self, i: usize) -> Option<V> {
        if self.mask & 1 << i == 0 {
            return None;
        }
        let r = self.at(i);
        self.mask &= !(1 << i);
        let last = self.vals.len() - 1;
        if r != last {
            // The last block moves to `r`.
            let j = ((self.slot_of >> (4 * last)) & 15) as usize;
            self.set_at(j, r);
        }
        Some(self.vals.swap_remove(r))
    }

    /// The occupied slots, in slot order.
    fn slots(&self) -> impl Iterator<Item = usize> {
        set_bits(u64::from(self.mask)).map(|i| i as usize)
    }

    /// The occupied slots and their blocks, in slot order.
    fn iter(&self) -> impl Iterator<Item = (usize, &V)> {
        self.slots().map(|i| (i, &self.vals[self.at(i)]))
    }
}

/// A page's key: the order of its blocks and its index among the pages of that order.
type PageKey = (u8, u64);

/// The order of a free slot's key (orders go up to [`MAX_ORDER`]).
const FREE: u8 = u8::MAX;

/// A slot of [`PageMap`]: a key and its page, or a free slot (key order [`FREE`], page
/// empty).
#[derive(Debug, Clone)]
struct Slot<V> {
    key: PageKey,
    page: Page<V>,
}

impl<V> Slot<V> {
    fn free() -> Slot<V> {
        Slot {
            key: (FREE, 0),
            page: Page::new(),
        }
    }
}

/// The pages by key, in a hash table whose slot for a key follows from the key alone:
/// [`PageMap::prefetch`] starts loading it without reading memory. (In a map of the
/// standard library, finding the slot reads the table: the prefetch itself waited on two
/// cache misses per event on 4 KiB random writes, 8% of the merging thread's samples.)
/// Open addressing with linear probing, at most half full, removals shifting the probe run
/// back.
#[derive(Debug, Clone)]
struct PageMap<V> {
    /// A power of two of them, or none.
    slots: Vec<Slot<V>>,
    /// Keys held.
    len: usize,
    /// 64 minus the log2 of the slot count: a key's home slot is the top bits of its hash.
    shift: u32,
}

impl<V> Default for PageMap<V> {
    fn default() -> Self {
        PageMap {
            slots: Vec::new(),
            len: 0,
            shift: 64,
        }
    }
}

impl<V> PageMap<V> {
    /// Slots in a new table: two, for the one page most maps hold (a map per dirty file:
    /// many small files must not cost a large table each).
    const FIRST: usize = 2;

    fn len(&self) -> usize {
        self.len
    }

    /// The slot where the probe for `k` starts (the table has slots).
    #[inline]
    fn home(&self, k: &PageKey) -> usize {
        // Fibonacci hashing: the top bits of the product mix every bit of the key (the low
        // bits of page indices are often alike, as are their orders).
        let h = (k.1 ^ u64::from(k.0) << 57).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> self.shift) as usize
    }

    /// The slot holding `k`.
    #[inline]
    fn find(&self, k: &PageKey) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(k);
        // At most half the slots are taken: every probe run ends at a free one.
        loop {
            let s = &self.slots[i];
            if s.key == *k {
                return Some(i);
            }
            if s.key.0 == FREE {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    fn get(&self, k: &PageKey) -> Option<&Page<V>> {
        self.find(k).map(|i| &self.slots[i].page)
    }

    #[inline]
    fn get_mut(&mut self, k: &PageKey) -> Option<&mut Page<V>> {
        self.find(k).map(|i| &mut self.slots[i].page)
    }

    /// The page of `k`, an empty one added if there is none.
    fn get_or_insert(&mut self, k: PageKey) -> &mut Page<V> {
        if let Some(i) = self.find(&k) {
            return &mut self.slots[i].page;
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let i = self.free_slot(&k);
        self.slots[i].key = k;
        self.len += 1;
        &mut self.slots[i].page
    }

    /// The first free slot of `k`'s probe run.
    fn free_slot(&self, k: &PageKey) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = self.home(k);
        while self.slots[i].key.0 != FREE {
            i = (i + 1) & mask;
        }
        i
    }

    /// Doubles the slots, moving every page to its place in the new table.
    fn grow(&mut self) {
        let n = (self.slots.len() * 2).max(Self::FIRST);
        let old = std::mem::replace(&mut self.slots, Vec::with_capacity(n));
        self.slots.resize_with(n, Slot::free);
        self.shift = 64 - n.trailing_zeros();
        for s in old {
            if s.key.0 != FREE {
                let i = self.free_slot(&s.key);
                self.slots[i] = s;
            }
        }
    }

    /// Removes the page of `k` (its blocks dropped).
    fn remove(&mut self, k: &PageKey) {
        let Some(mut hole) = self.find(k) else {
            return;
        };
        self.slots[hole] = Slot::free();
        self.len -= 1;
        // Shift back the keys after the hole whose probe runs pass through it.
        let mask = self.slots.len() - 1;
        let mut j = (hole + 1) & mask;
        while self.slots[j].key.0 != FREE {
            let home = self.home(&self.slots[j].key);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots.swap(hole, j);
                hole = j;
            }
            j = (j + 1) & mask;
        }
    }

    /// Every page with its key, in no particular order.
    fn iter(&self) -> impl Iterator<Item = (&PageKey, &Page<V>)> {
        self.slots
            .iter()
            .filter(|s| s.key.0 != FREE)
            .map(|s| (&s.key, &s.page))
    }

    /// Keeps the pages `keep` accepts (it may change them).
    fn retain(&mut self, mut keep: impl FnMut(&PageKey, &mut Page<V>) -> bool) {
        let mut gone = Vec::new();
        for s in &mut self.slots {
            if s.key.0 != FREE && !keep(&s.key, &mut s.page) {
                gone.push(s.key);
            }
        }
        for k in gone {
            self.remove(&k);
        }
    }

    /// Starts loading the slot where the page of `k` would be found first (a hint: nothing
    /// is read).
    #[inline]
    fn prefetch(&self, k: &PageKey) {
        if self.slots.is_empty() {
            return;
        }
        if let Some(s) = self.slots.get(self.home(k)) {
            prefetch(s);
            // A slot may straddle two cache lines.
            prefetch(&s.page.vals);
        }
    }
}

/// Above this many probes per page, a range query walks the pages instead.
const PROBES_PER_PAGE: u64 = 8;

/// Non-overlapping intervals `[start, end)` keyed by their start, with values. The caller
/// keeps them from overlapping: [`Blocks::insert`] replaces only an interval with the same
/// start.
#[derive(Debug, Clone)]
pub(crate) struct Blocks<V> {
    /// Naturally aligned power-of-two intervals, in pages: (order, page index) -> page.
    pages: PageMap<V>,
    /// How many intervals of each order the pages hold.
    per_order: [u32; MAX_ORDER as usize + 1],
    /// Bit `o` is set while `per_order[o] > 0`.
    orders: u64,
    /// Intervals in the pages.
    paged: usize,
    /// Every other interval: start -> (end, value).
    other: BTreeMap<u64, (u64, V)>,
}

impl<V> Default for Blocks<V> {
    fn default() -> Self {
        Blocks {
            pages: PageMap::default(),
            per_order: [0; MAX_ORDER as usize + 1],
            orders: 0,
            paged: 0,
            other: BTreeMap::new(),
        }
    }
}

impl<V> Blocks<V> {
    /// Number of intervals.
    pub fn len(&self) -> usize {
        self.paged + self.other.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.paged == 0 && self.other.is_empty()
    }

    /// Removes everything.
    pub fn clear(&mut self) {
        *self = Blocks::default();
    }

    fn count(&mut self, o: u8) {
        self.per_order[o as usize] += 1;
        self.orders |= 1 << o;
        self.paged += 1;
    }

    fn uncount(&mut self, o: u8) {
        self.per_order[o as usize] -= 1;
        if self.per_order[o as usize] == 0 {
            self.orders &= !(1 << o);
        }
        self.paged -= 1;
    }

    /// The paged block of order `o` starting at `a`.
    fn slot(&self, o: u8, a: u64) -> Option<&V> {
        if a & ((1u64 << o) - 1) != 0 {
            return None;
        }
        let (k, i) = place(o, a);
        self.pages.get(&k)?.get(i)
    }

    /// Takes the paged block of order `o` starting at `a` out.
    fn take_slot(&mut self, o: u8, a: u64) -> Option<V> {
        if a & ((1u64 << o) - 1) != 0 {
            return None;
        }
        let (k, i) = place(o, a);
        let page = self.pages.get_mut(&k)?;
        let v = page.take(i)?;
        if page.mask == 0 {
            self.pages.remove(&k);
        }
        self.uncount(o);
        Some(v)
    }

    /// The interval starting at `a`: its end and value.
    pub fn get(&self, a: u64) -> Option<(u64, &V)> {
        for o in each_order(self.orders) {
            if let Some(v) = self.slot(o, a) {
                return Some((a + (1 << o), v));
            }
        }
        self.other.get(&a).map(|(e, v)| (*e, v))
    }

    /// The interval starting at `a`, its value mutable.
    pub fn get_mut(&mut self, a: u64) -> Option<(u64, &mut V)> {
        if self.orders.is_power_of_two() && self.other.is_empty() {
            // Blocks of one size only: one lookup. (With several, the borrow checker does
            // not let a loop return the block it found, so they are looked up twice.)
            let o = self.orders.trailing_zeros() as u8;
            if a & ((1u64 << o) - 1) != 0 {
                return None;
            }
            let (k, i) = place(o, a);
            return self
                .pages
                .get_mut(&k)?
                .get_mut(i)
                .map(|v| (a + (1 << o), v));
        }
        let found = each_order(self.orders).find(|&o| self.slot(o, a).is_some());
        match found {
            Some(o) => {
                let (k, i) = place(o, a);
                let v = self.pages.get_mut(&k)?.get_mut(i)?;
                Some((a + (1 << o), v))
            }
            None => self.other.get_mut(&a).map(|(e, v)| (*e, v)),
        }
    }

    /// Puts the block of order `o` at `a` in its page; the block that was in that slot, if
    /// any.
    fn put(&mut self, o: u8, a: u64, v: V) -> Option<V> {
        let (k, i) = place(o, a);
        let old = self.pages.get_or_insert(k).put(i, v);
        if old.is_none() {
            self.count(o);
        }
        old
    }

    /// Inserts `[a, b)` and returns the interval that started at `a`, if any (its end and
    /// value). Nothing else may overlap `[a, b)`.
    pub fn insert(&mut self, a: u64, b: u64, v: V) -> Option<(u64, V)> {
        debug_assert!(a < b);
        match order_of(a, b) {
            Some(o) => {
                if let Some(old) = self.put(o, a, v) {
                    return Some((b, old));
                }
                // A block of another size, or an extent, at the same start.
                let other =
                    each_order(self.orders).find(|&oo| oo != o && self.slot(oo, a).is_some());
                match other {
                    Some(oo) => self.take_slot(oo, a).map(|old| (a + (1 << oo), old)),
                    None if self.other.is_empty() => None,
                    None => self.other.remove(&a),
                }
            }
            None => match self.other.insert(a, (b, v)) {
                Some(old) => Some(old),
                None => self.remove_paged(a),
            },
        }
    }

    fn remove_paged(&mut self, a: u64) -> Option<(u64, V)> {
        each_order(self.orders).find_map(|o| self.take_slot(o, a).map(|v| (a + (1 << o), v)))
    }

    /// Removes the interval starting at `a`: its end and value.
    pub fn remove(&mut self, a: u64) -> Option<(u64, V)> {
        match self.remove_paged(a) {
            Some(x) => Some(x),
            None if self.other.is_empty() => None,
            None => self.other.remove(&a),
        }
    }

    /// Whether every interval is paged and of order `o`: then an aligned block of that
    /// order can only overlap the interval at its own start.
    fn only_order(&self, o: u8) -> bool {
        self.other.is_empty() && self.orders & !(1u64 << o) == 0
    }

    /// Puts `[a, b)` in place of every interval overlapping it, handing each of those to
    /// `gone` (start, end, value).
    pub fn replace(&mut self, a: u64, b: u64, v: V, mut gone: impl FnMut(u64, u64, V)) {
        if let Some(o) = order_of(a, b).filter(|&o| self.only_order(o)) {
            // The common case (a page dirtied again): one hash lookup.
            if let Some(old) = self.put(o, a, v) {
                gone(a, b, old);
            }
            return;
        }
        for s in self.overlapping(a, b) {
            if let Some((e, old)) = self.remove(s) {
                gone(s, e, old);
            }
        }
        self.insert(a, b, v);
    }

    /// Inserts `[a, b)` where only the interval at `a` can overlap it (see
    /// [`Blocks::only_order`]): kept if `keep` accepts it, else replaced. Hands `v` back
    /// when other intervals could overlap, for the caller's general path.
    pub fn insert_alone_unless(
        &mut self,
        a: u64,
        b: u64,
        v: V,
        keep: impl FnOnce(&V) -> bool,
    ) -> Result<(), V> {
        let Some(o) = order_of(a, b).filter(|&o| self.only_order(o)) else {
            return Err(v);
        };
        let (k, i) = place(o, a);
        let page = self.pages.get_or_insert(k);
        match page.get_mut(i) {
            Some(old) => {
                if !keep(old) {
                    *old = v;
                }
            }
            None => {
                page.put(i, v);
                self.count(o);
            }
        }
        Ok(())
    }

    /// Starts loading the page slot of the block holding `x`, for a lookup soon after (a
    /// hint: nothing is read).
    pub fn prefetch(&self, x: u64) {
        for o in each_order(self.orders) {
            let (k, _) = place(o, x & !((1u64 << o) - 1));
            self.pages.prefetch(&k);
        }
    }

    /// Starts loading the block holding `x` itself, for a lookup soon after: its page's
    /// slot is read (it should be in cache, from [`Blocks::prefetch`] a few events
    /// earlier), and the block, which a page of several keeps elsewhere, prefetched.
    pub fn prefetch_value(&self, x: u64) {
        for o in each_order(self.orders) {
            let (k, i) = place(o, x & !((1u64 << o) - 1));
            if let Some(v) = self.pages.get(&k).and_then(|p| p.get(i)) {
                prefetch(v);
            }
        }
    }

    /// The interval holding `x`: its start, end and value.
    pub fn containing(&self, x: u64) -> Option<(u64, u64, &V)> {
        for o in each_order(self.orders) {
            let s = x & !((1u64 << o) - 1);
            if let Some(v) = self.slot(o, s) {
                return Some((s, s + (1 << o), v));
            }
        }
        let (&s, (e, v)) = self.other.range(..=x).next_back()?;
        (*e > x).then_some((s, *e, v))
    }

    /// The pages of order `o` a range query over `[a, b)` visits: first and last page
    /// index, or `None` when walking every page is cheaper.
    fn page_span(&self, o: u8, a: u64, b: u64) -> Option<(u64, u64)> {
        let first = (a >> o) >> PAGE_BITS;
        let last = ((b - 1) >> o) >> PAGE_BITS;
        let probes = last - first + 1;
        (probes <= PROBES_PER_PAGE.max(self.pages.len() as u64 / PROBES_PER_PAGE))
            .then_some((first, last))
    }

    /// Calls `f(start, end, value)` for the intervals overlapping `[a, b)`, in no particular
    /// order, until it returns `false`.
    pub fn visit_overlapping(&self, a: u64, b: u64, mut f: impl FnMut(u64, u64, &V) -> bool) {
        if a >= b {
            return;
        }
        for o in each_order(self.orders) {
            let len = 1u64 << o;
            let mut visit = |p: u64, page: &Page<V>| -> bool {
                for (i, v) in page.iter() {
                    let s = start_of(o, p, i);
                    if s < b && s + len > a && !f(s, s + len, v) {
                        return false;
                    }
                }
                true
            };
            match self.page_span(o, a, b) {
                Some((first, last)) => {
                    for p in first..=last {
                        if let Some(page) = self.pages.get(&(o, p)) {
                            if !visit(p, page) {
                                return;
                            }
                        }
                    }
                }
                None => {
                    for (&(po, p), page) in self.pages.iter() {
                        if po == o && !visit(p, page) {
                            return;
                        }
                    }
                }
            }
        }
        if !self.other.is_empty() {
            if let Some((&s, (e, v))) = self.other.range(..a).next_back() {
                if *e > a && !f(s, *e, v) {
                    return;
                }
            }
            for (&s, (e, v)) in self.other.range(a..b) {
                if !f(s, *e, v) {
                    return;
                }
            }
        }
    }

    /// Removes the intervals overlapping `[a, b)`, in order, handing each to `f` (start,
    /// end, value). Where every interval is a block of one size, each page of them is
    /// found in one hash lookup.
    pub fn remove_overlapping(&mut self, a: u64, b: u64, mut f: impl FnMut(u64, u64, V)) {
        if a >= b {
            return;
        }
        if self.other.is_empty() && self.orders.is_power_of_two() {
            let o = self.orders.trailing_zeros() as u8;
            if let Some((first, last)) = self.page_span(o, a, b) {
                let len = 1u64 << o;
                for p in first..=last {
                    let Some(page) = self.pages.get_mut(&(o, p)) else {
                        continue;
                    };
                    let mut taken = 0u32;
                    for i in page.slots() {
                        let s = start_of(o, p, i);
                        if s < b && s + len > a {
                            if let Some(v) = page.take(i) {
                                taken += 1;
                                f(s, s + len, v);
                            }
                        }
                    }
                    if page.mask == 0 {
                        self.pages.remove(&(o, p));
                    }
                    for _ in 0..taken {
                        self.uncount(o);
                    }
                }
                return;
            }
        }
        for s in self.overlapping(a, b) {
            if let Some((e, v)) = self.remove(s) {
                f(s, e, v);
            }
        }
    }

    /// Whether any interval overlaps `[a, b)`.
    pub fn overlaps(&self, a: u64, b: u64) -> bool {
        let mut any = false;
        self.visit_overlapping(a, b, |_, _, _| {
            any = true;
            false
        });
        any
    }

    /// The starts of the intervals overlapping `[a, b)`, in order.
    pub fn overlapping(&self, a: u64, b: u64) -> Starts {
        let mut out = Starts::new();
        self.visit_overlapping(a, b, |s, _, _| {
            out.push(s);
            true
        });
        if out.len() > 1 {
            out.sort_unstable();
        }
        out
    }

    /// Keeps the intervals whose value `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        let mut gone: Vec<u8> = Vec::new();
        self.pages.retain(|&(o, _), page| {
            for i in page.slots() {
                if page.get(i).is_some_and(|v| !keep(v)) {
                    page.take(i);
                    gone.push(o);
                }
            }
            page.mask != 0
        });
        for o in gone {
            self.uncount(o);
        }
        self.other.retain(|_, (_, v)| keep(v));
    }

    /// Every interval as `(start, end, value)`, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, &V)> {
        self.pages
            .iter()
            .flat_map(|(&(o, p), page)| {
                page.iter().map(move |(i, v)| {
                    let s = start_of(o, p, i);
                    (s, s + (1 << o), v)
                })
            })
            .chain(self.other.iter().map(|(&s, (e, v))| (s, *e, v)))
    }

    /// The starts of every interval, in order.
    #[cfg(test)]
    pub fn starts(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.iter().map(|x| x.0).collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    /// The page table agrees with a map of the standard library through random puts,
    /// takes, removals, retains and growth, with keys from a small range (long probe runs,
    /// wrapping at the end of the table, and removals shifting them back), and every page
    /// stays findable from its key alone.
    #[test]
    fn page_map_agrees_with_a_hash_map() {
        use std::collections::HashMap;
        for seed in 0..20 {
            let mut rng = Rng::new(seed);
            let mut m: PageMap<u32> = PageMap::default();
            let mut model: HashMap<PageKey, Vec<(usize, u32)>> = HashMap::new();
            let keys = 8 + rng.below(200);
            for step in 0..3000u32 {
                let k = (rng.below(3) as u8, rng.below(keys));
                let i = rng.below(PAGE) as usize;
                match rng.below(10) {
                    0..=4 => {
                        let old = m.get_or_insert(k).put(i, step);
                        let slots = model.entry(k).or_default();
                        let was = slots
                            .iter()
                            .position(|s| s.0 == i)
                            .map(|p| slots.remove(p).1);
                        slots.push((i, step));
                        assert_eq!(old, was);
                    }
                    5..=6 => {
                        let got = m.get_mut(&k).and_then(|p| p.take(i));
                        let slots = model.get_mut(&k);
                        let want = slots.and_then(|s| {
                            let p = s.iter().position(|x| x.0 == i)?;
                            Some(s.remove(p).1)
                        });
                        assert_eq!(got, want);
                    }
                    7 => {
                        m.remove(&k);
                        model.remove(&k);
                    }
                    8 if step % 16 == 0 => {
                        let cut = rng.below(3) as u8;
                        m.retain(|k, _| k.0 != cut);
                        model.retain(|k, _| k.0 != cut);
                    }
                    _ => {}
                }
                // Empty pages are kept by both until removed.
                assert_eq!(m.len(), model.len(), "seed {seed} step {step}");
            }
            for (k, slots) in &model {
                let page = m.get(k).expect("a page of the model");
                let mut got: Vec<(usize, u32)> = page.iter().map(|(i, v)| (i, *v)).collect();
                let mut want = slots.clone();
                got.sort_unstable();
                want.sort_unstable();
                assert_eq!(got, want, "seed {seed} key {k:?}");
            }
            let mut listed: Vec<PageKey> = m.iter().map(|(k, _)| *k).collect();
            listed.sort_unstable();
            let mut want: Vec<PageKey> = model.keys().copied().collect();
            want.sort_unstable();
            assert_eq!(listed, want);
            assert!(m.len() * 2 <= m.slots.len().max(1));
        }
    }

    #[test]
    fn aligned_intervals_are_hashed_others_are_not() {
        let mut m = Blocks::default();
        assert!(m.insert(8, 16, 'a').is_none());
        assert!(m.insert(64, 128, 'b').is_none());
        assert!(m.insert(3, 5, 'c').is_none());
        assert_eq!(m.paged, 2);
        assert_eq!(m.other.len(), 1);
        assert_eq!(m.orders, (1 << 3) | (1 << 6));
        assert_eq!(m.containing(100), Some((64, 128, &'b')));
        assert_eq!(m.containing(4), Some((3, 5, &'c')));
        assert_eq!(m.containing(5), None);
        assert_eq!(m.get(8), Some((16, &'a')));
        // Replacing at the same start moves between the two sides.
        assert_eq!(m.insert(8, 11, 'd'), Some((16, 'a')));
        assert_eq!(m.orders, 1 << 6);
        assert_eq!(m.insert(8, 9, 'e'), Some((11, 'd')));
        assert_eq!(m.orders, 1 | (1 << 6));
        assert_eq!(m.overlapping(0, 200).as_slice(), [3, 8, 64]);
        assert!(m.overlapping(9, 64).is_empty());
        assert!(!m.overlaps(9, 64));
        assert!(m.overlaps(9, 65));
        m.retain(|&v| v != 'b');
        assert_eq!(m.orders, 1);
        assert_eq!(m.remove(8), Some((9, 'e')));
        assert_eq!(m.orders, 0);
        assert_eq!(m.starts(), vec![3]);
    }

    #[test]
    fn replace_and_insert_alone_agree_with_the_general_path() {
        let mut m = Blocks::default();
        let mut gone = Vec::new();
        // One order in use: the fast paths.
        m.replace(8, 16, 'a', |s, e, v| gone.push((s, e, v)));
        m.replace(8, 16, 'b', |s, e, v| gone.push((s, e, v)));
        assert_eq!(gone, vec![(8, 16, 'a')]);
        assert_eq!(m.insert_alone_unless(8, 16, 'c', |&v| v == 'b'), Ok(()));
        assert_eq!(m.get(8), Some((16, &'b')));
        assert_eq!(m.insert_alone_unless(8, 16, 'c', |_| false), Ok(()));
        assert_eq!(m.get(8), Some((16, &'c')));
        assert_eq!(m.insert_alone_unless(24, 32, 'd', |_| true), Ok(()));
        assert_eq!(m.len(), 2);
        // Another order: a block may overlap bigger or smaller ones, so the general path.
        assert_eq!(m.insert_alone_unless(0, 64, 'e', |_| true), Err('e'));
        gone.clear();
        m.replace(0, 64, 'e', |s, e, v| gone.push((s, e, v)));
        assert_eq!(gone, vec![(8, 16, 'c'), (24, 32, 'd')]);
        assert_eq!(m.starts(), vec![0]);
        assert_eq!(m.orders, 1 << 6);
        gone.clear();
        m.replace(4, 5, 'f', |s, e, v| gone.push((s, e, v)));
        assert_eq!(gone, vec![(0, 64, 'e')]);
        assert_eq!(m.containing(4), Some((4, 5, &'f')));
        assert_eq!(m.orders, 1);
    }

    #[test]
    fn remove_overlapping_on_no_block() {
        let mut m: Blocks<u8> = Blocks::default();
        m.remove_overlapping(0, 100, |_, _, _| panic!("nothing to remove"));
        m.insert(3, 5, 1);
        let mut got = Vec::new();
        m.remove_overlapping(0, 100, |s, e, v| got.push((s, e, v)));
        assert_eq!(got, vec![(3, 5, 1)]);
        assert!(m.is_empty());
    }

    #[test]
    fn remove_overlapping_takes_every_overlap_in_order() {
        for extra in [false, true] {
            let mut m = Blocks::default();
            for k in 0..20u64 {
                m.insert(k * 8, k * 8 + 8, k);
            }
            if extra {
                // An extent: the general path.
                m.insert(500, 503, 99);
            }
            let mut got = Vec::new();
            m.remove_overlapping(20, 45, |s, e, v| got.push((s, e, v)));
            assert_eq!(
                got,
                vec![(16, 24, 2), (24, 32, 3), (32, 40, 4), (40, 48, 5)]
            );
            assert_eq!(m.len(), 16 + usize::from(extra));
            assert!(!m.overlaps(16, 48));
            assert!(m.overlaps(15, 16) && m.overlaps(48, 49));
        }
    }

    #[test]
    fn the_last_blocks_of_the_address_space() {
        let mut m = Blocks::default();
        let a = u64::MAX - 15; // 2^64 - 16: aligned to 16
        assert!(m.insert(a, a + 8, 1).is_none());
        assert!(m.insert(a + 8, u64::MAX, 2).is_none());
        // The probes stop at the end of the address space instead of wrapping.
        assert_eq!(m.overlapping(a, u64::MAX).as_slice(), [a, a + 8]);
        assert_eq!(m.containing(u64::MAX - 1), Some((a + 8, u64::MAX, &2)));
        assert_eq!(m.containing(a + 7), Some((a, a + 8, &1)));
    }

    /// Random inserts, removals, point lookups and queries agree with a plain list of
    /// intervals, through both the probing and the walking range queries. Odd seeds use
    /// blocks of one size only (the one-lookup paths), even ones mix sizes and extents.
    #[test]
    fn agrees_with_a_list() {
        for seed in 1..=20u64 {
            let mut rng = Rng::new(seed);
            let one_size = seed % 2 == 1;
            let mut m: Blocks<u64> = Blocks::default();
            let mut model: Vec<(u64, u64, u64)> = Vec::new();
            for step in 0..2000u64 {
                let op = rng.below(12);
                if op >= 10 {
                    // A point lookup or removal anywhere: a start, inside, or free.
                    let a = if rng.below(2) == 0 && !model.is_empty() {
                        model[rng.below(model.len() as u64) as usize].0 + rng.below(2)
                    } else {
                        rng.below(4200)
                    };
                    let i = model.iter().position(|&(s, _, _)| s == a);
                    if op == 10 {
                        let got = m.get_mut(a).map(|(e, v)| {
                            *v += 1_000_000;
                            (e, *v)
                        });
                        let want = i.map(|i| {
                            model[i].2 += 1_000_000;
                            (model[i].1, model[i].2)
                        });
                        assert_eq!(got, want, "seed {seed} step {step} get_mut {a}");
                    } else {
                        let want = i.map(|i| {
                            let (_, e, v) = model.swap_remove(i);
                            (e, v)
                        });
                        assert_eq!(m.remove(a), want, "seed {seed} step {step} remove {a}");
                    }
                } else if op < 6 {
                    // Mostly aligned blocks of a few sizes, sometimes odd extents.
                    let (a, b) = if one_size {
                        let a = rng.below(4096 / 8) * 8;
                        (a, a + 8)
                    } else if rng.below(5) == 0 {
                        let a = rng.below(4096);
                        (a, a + 1 + rng.below(40))
                    } else {
                        let n = [1u64, 8, 8, 8, 64][rng.below(5) as usize];
                        let a = rng.below(4096 / n) * n;
                        (a, a + n)
                    };
                    if model.iter().any(|&(s, e, _)| s < b && e > a) {
                        continue;
                    }
                    assert!(m.insert(a, b, step).is_none());
                    model.push((a, b, step));
                } else if op < 8 && !model.is_empty() {
                    let i = rng.below(model.len() as u64) as usize;
                    let (s, e, v) = model.swap_remove(i);
                    assert_eq!(m.remove(s), Some((e, v)));
                } else {
                    let a = rng.below(4200);
                    let span = if rng.below(2) == 0 { 16 } else { 4096 };
                    let b = a + 1 + rng.below(span);
                    let mut want: Vec<u64> = model
                        .iter()
                        .filter(|&&(s, e, _)| s < b && e > a)
                        .map(|x| x.0)
                        .collect();
                    want.sort_unstable();
                    let got = m.overlapping(a, b);
                    assert_eq!(got.as_slice(), want, "seed {seed} step {step} [{a}, {b})");
                    let want_c = model.iter().find(|&&(s, e, _)| s <= a && a < e);
                    assert_eq!(
                        m.containing(a),
                        want_c.map(|(s, e, v)| (*s, *e, v)),
                        "seed {seed} step {step} containing {a}"
                    );
                }
                assert_eq!(m.len(), model.len());
            }
            let mut all: Vec<u64> = model.iter().map(|x| x.0).collect();
            all.sort_unstable();
            assert_eq!(m.starts(), all);
        }
    }
}
