//! Splitting the busy time: the clocks of each device and the sweep of its requests in time
//! order ([`prepare`], then [`sweep`] over ranges of victims, in parallel).

use rustc_hash::FxHashMap;

use ioblame_events::event::Dev;

use super::{DevLog, Idle, Victim, VictimIn, IOCOST, NONE, WBT};

/// A breakpoint of a device's busy clocks: from `t` on, `n` requests in flight;
/// `f = ∫ 1/n` and `g = ∫ [n > 0]` up to `t`.
#[derive(Debug, Clone, Copy)]
struct Clock {
    t: u64,
    f: f64,
    g: u64,
    n: u32,
}

/// A breakpoint of one culprit key: from `t` on, weight `k` in flight; `h = ∫ k/n` up to
/// `t`, when the device's `f` was `f`.
#[derive(Debug, Clone, Copy, Default)]
struct KeyPoint {
    t: u64,
    h: f64,
    f: f64,
    k: f64,
}

#[derive(Debug, Default)]
struct KeyState {
    /// The last of `points` (all zero before the first), kept inline: most reads need only
    /// it, and the history is elsewhere on the heap.
    last: KeyPoint,
    points: Vec<KeyPoint>,
    /// Requests of the key in flight.
    count: u32,
}

impl KeyState {
    fn now(&self) -> KeyPoint {
        self.last
    }

    /// `H(t)` for any `t` up to the key's last point or later, given the device's `F(t)`.
    fn h_at(&self, t: u64, f_t: f64) -> f64 {
        let p = self.last;
        if p.t <= t {
            // Before the first point `last` is all zero: H is 0.
            return p.h + p.k * (f_t - p.f);
        }
        // A victim's span is recent: gallop back from the last point, then search.
        let n = self.points.len();
        let mut step = 1;
        let mut lo = n.saturating_sub(1);
        while lo > 0 && self.points[lo].t > t {
            lo = lo.saturating_sub(step);
            step *= 2;
        }
        let hi = (lo + step).min(n);
        let i = lo + self.points[lo..hi].partition_point(|p| p.t <= t);
        if i == 0 {
            return 0.0;
        }
        let p = self.points[i - 1];
        p.h + p.k * (f_t - p.f)
    }
}

struct Sweep {
    clocks: Vec<Clock>,
    /// Per dense key id.
    keys: Vec<KeyState>,
    /// Per dense key id: its last change, or `u64::MAX`.
    last_change: Vec<u64>,
    /// Per dense key id: its place in `active`, or `u32::MAX`.
    active_at: Vec<u32>,
    /// The dense ids with requests in flight.
    active: Vec<u32>,
    /// `(time, key)` of the keys' changes in time order (the sweep's order), for the keys
    /// that changed inside a span: an entry counts only if it is its key's last
    /// (`last_at`); the others are dropped now and then ([`Sweep::compact`]).
    changes: Vec<(u64, u32)>,
    /// Per dense key id: the place of its last change in `changes`, or `u32::MAX`.
    last_at: Vec<u32>,
    /// Keys with an entry in `changes`.
    changed: usize,
    /// Per dense key id: the victim (plus one) that last visited it.
    seen: Vec<u32>,
}

impl Sweep {
    fn new(keys: usize) -> Sweep {
        Sweep {
            clocks: vec![Clock {
                t: 0,
                f: 0.0,
                g: 0,
                n: 0,
            }],
            keys: (0..keys).map(|_| KeyState::default()).collect(),
            last_change: vec![u64::MAX; keys],
            active_at: vec![u32::MAX; keys],
            active: Vec::new(),
            changes: Vec::new(),
            last_at: vec![u32::MAX; keys],
            changed: 0,
            seen: vec![0; keys],
        }
    }

    /// `(F(t), G(t))` for any `t` up to now.
    fn clocks_at(&self, t: u64) -> (f64, u64) {
        let last = self.clocks[self.clocks.len() - 1];
        let c = if t >= last.t {
            last
        } else {
            let i = self.clocks.partition_point(|c| c.t <= t).max(1);
            self.clocks[i - 1]
        };
        if c.n == 0 || t <= c.t {
            (c.f, c.g)
        } else {
            (c.f + (t - c.t) as f64 / c.n as f64, c.g + (t - c.t))
        }
    }

    /// `n` changes by `delta` at `t`.
    fn step(&mut self, t: u64, delta: i32) -> f64 {
        let (f, g) = self.clocks_at(t);
        let n = self.clocks.last().map_or(0, |c| c.n);
        let n = (n as i64 + delta as i64).max(0) as u32;
        match self.clocks.last_mut() {
            Some(c) if c.t == t => {
                c.n = n;
            }
            _ => self.clocks.push(Clock { t, f, g, n }),
        }
        f
    }

    /// Key `key`'s (dense id) weight in flight changes by `dw` at `t`, when the device's `F`
    /// is `f`.
    fn key_step(&mut self, key: u32, t: u64, f: f64, dw: f64, starts: bool) {
        let s = &mut self.keys[key as usize];
        let p = s.now();
        let h = p.h + p.k * (f - p.f);
        if starts {
            s.count += 1;
        } else {
            s.count = s.count.saturating_sub(1);
        }
        let k = if s.count == 0 {
            0.0
        } else {
            (p.k + dw).max(0.0)
        };
        let point = KeyPoint { t, h, f, k };
        match s.points.last_mut() {
            Some(last) if last.t == t => *last = point,
            _ => s.points.push(point),
        }
        s.last = point;
        let at = self.active_at[key as usize];
        if s.count == 0 {
            if at != u32::MAX {
                self.active.swap_remove(at as usize);
                if let Some(&moved) = self.active.get(at as usize) {
                    self.active_at[moved as usize] = at;
                }
                self.active_at[key as usize] = u32::MAX;
            }
        } else if at == u32::MAX {
            self.active_at[key as usize] = self.active.len() as u32;
            self.active.push(key);
        }
        let old = std::mem::replace(&mut self.last_change[key as usize], t);
        if old != t {
            if old == u64::MAX {
                self.changed += 1;
            }
            self.last_at[key as usize] = self.changes.len() as u32;
            self.changes.push((t, key));
            if self.changes.len() > 2 * self.changed + 4096 {
                self.compact();
            }
        }
    }

    /// Drops the entries of `changes` that are not their key's last (keeping the order): at
    /// most as many stale entries as live ones, plus 4,096, stay between two compactions.
    fn compact(&mut self) {
        let mut j = 0;
        for i in 0..self.changes.len() {
            let (t, key) = self.changes[i];
            if self.last_at[key as usize] == i as u32 {
                self.changes[j] = (t, key);
                self.last_at[key as usize] = j as u32;
                j += 1;
            }
        }
        self.changes.truncate(j);
    }

    /// Appends to `keys` the keys in flight now and those whose last change is after `a`,
    /// once each (`stamp`, new for each call, marks those taken).
    fn keys_since(&mut self, a: u64, stamp: u32, keys: &mut Vec<u32>) {
        let from = self.changes.partition_point(|&(t, _)| t <= a);
        let later = self.changes[from..]
            .iter()
            .enumerate()
            .filter(|&(i, &(_, key))| self.last_at[key as usize] == (from + i) as u32)
            .map(|(_, &(_, key))| key);
        for k in self.active.iter().copied().chain(later) {
            if self.seen[k as usize] != stamp {
                self.seen[k as usize] = stamp;
                keys.push(k);
            }
        }
    }
}

/// One device's victims and their culprits.
#[derive(Default)]
pub(super) struct Swept {
    pub(super) victims: Vec<Victim>,
    pub(super) culprits: Vec<(u32, u64)>,
    pub(super) unshared: u64,
}

/// What every sweep of one device reads: its culprit keys as dense ids, its parts with
/// them, and its points in time order.
pub(super) struct Prepared {
    pub(super) dev: Dev,
    pub(super) log: DevLog,
    pub(super) throttlers: u8,
    pub(super) parts: Vec<(u32, f64)>,
    pub(super) original: Vec<u32>,
    /// `(time, what, index)`: 0 a request starts, 1 a request ends, 2 a victim ends.
    pub(super) points: Vec<(u64, u8, u32)>,
}

/// Weighs and settles a device's log, and lays its points out in time order.
pub(super) fn prepare(dev: Dev, mut log: DevLog, throttlers: u8) -> Prepared {
    log.weigh();
    log.settle();
    let mut dense: FxHashMap<u32, u32> = FxHashMap::default();
    let mut original: Vec<u32> = Vec::new();
    let parts: Vec<(u32, f64)> = log
        .parts
        .iter()
        .map(|&(key, w)| {
            let id = *dense.entry(key).or_insert_with(|| {
                original.push(key);
                (original.len() - 1) as u32
            });
            (id, w)
        })
        .collect();
    // (time, what): 0 a request starts, 1 a request ends, 2 a victim ends.
    let mut points: Vec<(u64, u8, u32)> =
        Vec::with_capacity(log.reqs.len() * 2 + log.victims.len());
    for (i, r) in log.reqs.iter().enumerate() {
        points.push((r.issue, 0, i as u32));
        points.push((r.complete, 1, i as u32));
    }
    for (i, v) in log.victims.iter().enumerate() {
        points.push((v.complete, 2, i as u32));
    }
    // At one instant the order does not change any integral; starts first, then ends.
    points.sort_unstable();
    Prepared {
        dev,
        log,
        throttlers,
        parts,
        original,
        points,
    }
}

/// Sweeps one device's requests in time order, splitting its victims of ranks `victims`
/// (their order of completion): the requests before the first are replayed to build the
/// clocks, so the victims of one device can be split by several sweeps in parallel.
pub(super) fn sweep(p: &Prepared, victims: std::ops::Range<usize>) -> Swept {
    let (dev, log, throttlers) = (p.dev, &p.log, p.throttlers);
    let (parts, original) = (&p.parts, &p.original);
    let mut out = Swept {
        victims: Vec::with_capacity(victims.len()),
        ..Swept::default()
    };
    let mut rank = 0usize;
    let mut s = Sweep::new(original.len());
    let mut vals: Vec<(u32, f64)> = Vec::new();
    let mut keys: Vec<u32> = Vec::new();
    let mut cut = Cut::default();
    let mut stamp = 0u32;
    for &(t, what, i) in &p.points {
        match what {
            0 | 1 => {
                let r = log.reqs[i as usize];
                let starts = what == 0;
                let f = s.step(t, if starts { 1 } else { -1 });
                for &(key, w) in &parts[r.first_part as usize..(r.first_part + r.parts) as usize] {
                    s.key_step(key, t, f, if starts { w } else { -w }, starts);
                }
            }
            _ => {
                rank += 1;
                if rank <= victims.start {
                    continue;
                }
                if rank > victims.end {
                    break;
                }
                let v = log.victims[i as usize];
                let (a, b) = (v.queue, v.complete);
                let (fa, ga) = s.clocks_at(a);
                let (fb, gb) = s.clocks_at(b);
                let busy = gb - ga;
                let q2c = b - a;
                let idle = q2c - busy;
                let r = log.reqs[v.req as usize];
                let own_parts = &parts[r.first_part as usize..(r.first_part + r.parts) as usize];
                let (fs, _) = s.clocks_at(r.issue.max(a));
                let own = (fb - fs).max(0.0);
                // The keys in flight now, and those that changed inside the span, once each.
                stamp = stamp.wrapping_add(1).max(1);
                keys.clear();
                s.keys_since(a, stamp, &mut keys);
                vals.clear();
                for &key in &keys {
                    let st = &s.keys[key as usize];
                    let mut x = st.h_at(b, fb) - st.h_at(a, fa);
                    for &(k, w) in own_parts {
                        if k == key {
                            x -= w * own;
                        }
                    }
                    if x > 0.0 {
                        vals.push((original[key as usize], x));
                    }
                }
                let first = out.culprits.len() as u32;
                let idle_by = idle_split(&s, &v, a, r.issue.max(a), idle, throttlers);
                let (own_ns, unshared) = cut.apportion(busy, own, &vals, &mut out.culprits);
                if unshared {
                    out.unshared += 1;
                }
                out.victims.push(Victim {
                    key: v.key,
                    dev,
                    queue: a,
                    complete: b,
                    bytes: v.bytes,
                    q2c,
                    own: own_ns,
                    idle,
                    idle_by,
                    part: 0,
                    first_culprit: first,
                    culprits: out.culprits.len() as u32 - first,
                });
            }
        }
    }
    out
}

/// A victim's idle time in `[a, issue)` cut at its request's phases (its own request is in
/// flight from `issue` on: no idle after). The parts add up to `idle` exactly.
fn idle_split(
    s: &Sweep,
    v: &VictimIn,
    a: u64,
    issue: u64,
    idle: u64,
    throttlers: u8,
) -> [u64; Idle::COUNT] {
    let mut by = [0u64; Idle::COUNT];
    if idle == 0 {
        return by;
    }
    let before = match (
        throttlers & WBT != 0 && v.wbt_may_hold,
        throttlers & IOCOST != 0,
    ) {
        (true, true) => Idle::WbtOrIocost,
        (true, false) => Idle::Wbt,
        (false, true) => Idle::Iocost,
        (false, false) => Idle::Submit,
    };
    let p = v.phases;
    // The phases in order, each from the end of the one before, clamped to [a, issue]
    // (steps ending at `issue` after it are empty).
    use Idle::{Dispatch, Plug, Requeue, Scheduler, Unexplained};
    let end = (issue, Requeue);
    let steps = match (p.g != NONE, p.i != NONE, p.d != NONE) {
        (_, _, false) => [(issue, Unexplained); 4],
        (true, true, true) => [(p.g, before), (p.i, Plug), (p.d, Scheduler), end],
        (true, false, true) => [(p.g, before), (p.d, Dispatch), end, end],
        (false, true, true) => [(p.i, Unexplained), (p.d, Scheduler), end, end],
        (false, false, true) => [(p.d, Unexplained), end, end, end],
    };
    // Idle in [at, to) is its length less the busy clock's growth, each boundary's clock
    // read once.
    let (mut at, mut busy_at) = (a, s.clocks_at(a).1);
    for (to, cause) in steps {
        let to = to.clamp(at, issue.max(at));
        let busy_to = s.clocks_at(to).1;
        by[cause as usize] += (to - at) - (busy_to - busy_at);
        (at, busy_at) = (to, busy_to);
    }
    // Exact by construction (the victim's own request is in flight from `issue`); any
    // difference is the trace's, and stays unexplained.
    let sum: u64 = by.iter().sum();
    let u = &mut by[Idle::Unexplained as usize];
    if sum <= idle {
        *u += idle - sum;
    } else {
        *u = u.saturating_sub(sum - idle);
    }
    by
}

/// The scratch of [`Cut::apportion`], reused from victim to victim.
#[derive(Debug, Default)]
struct Cut {
    /// (index: 0 own, i + 1 culprit i; floor; remainder)
    parts: Vec<(usize, u64, f64)>,
    order: Vec<usize>,
}

impl Cut {
    /// Cuts `total` integer nanoseconds in proportion to `own` and the culprits' real-valued
    /// shares `vals` by largest remainder (ties to own, then in `vals`' order, the order the
    /// sweep met the keys): the integers
    /// add up to `total`. Appends the culprits' non-zero shares to `out`; returns own's.
    /// When the shares are all zero but `total` is not (no part accounted for the busy time),
    /// `total` goes to own and the flag says so.
    fn apportion(
        &mut self,
        total: u64,
        own: f64,
        vals: &[(u32, f64)],
        out: &mut Vec<(u32, u64)>,
    ) -> (u64, bool) {
        if total == 0 {
            return (0, false);
        }
        let sum: f64 = own + vals.iter().map(|v| v.1).sum::<f64>();
        if sum <= 0.0 {
            return (total, true);
        }
        let scale = total as f64 / sum;
        self.parts.clear();
        self.parts.extend(
            std::iter::once(own)
                .chain(vals.iter().map(|v| v.1))
                .enumerate()
                .map(|(i, x)| {
                    let y = x * scale;
                    let fl = (y.floor() as u64).min(total);
                    (i, fl, y - fl as f64)
                }),
        );
        let floors: u64 = self.parts.iter().map(|c| c.1).sum();
        if floors > total {
            // Rounding pushed the floors over (only possible by a nanosecond or so): take
            // the excess from the largest.
            let mut excess = floors - total;
            self.order.clear();
            self.order.extend(0..self.parts.len());
            let parts = &self.parts;
            self.order
                .sort_by_key(|&i| (std::cmp::Reverse(parts[i].1), i));
            for &i in &self.order {
                let c = &mut self.parts[i];
                let t = excess.min(c.1);
                c.1 -= t;
                excess -= t;
            }
        } else if floors < total {
            let mut left = total - floors;
            self.order.clear();
            self.order.extend(0..self.parts.len());
            let parts = &self.parts;
            let by_remainder =
                |x: &usize, y: &usize| parts[*y].2.total_cmp(&parts[*x].2).then(x.cmp(y));
            let n = self.order.len();
            if (left as usize) < n {
                // Only the `left` largest remainders take a nanosecond: select them, no sort
                // (the order is total, so which they are does not depend on the method).
                self.order
                    .select_nth_unstable_by(left as usize, by_remainder);
            } else {
                self.order.sort_by(by_remainder);
            }
            while left > 0 {
                let take = (left as usize).min(n);
                for &i in &self.order[..take] {
                    self.parts[i].1 += 1;
                }
                left -= take as u64;
            }
        }
        for c in &self.parts[1..] {
            if c.1 > 0 {
                out.push((vals[c.0 - 1].0, c.1));
            }
        }
        (self.parts[0].1, false)
    }
}
