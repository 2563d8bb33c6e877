//! Journal apportioning: the handles of each jbd2 transaction and the blocks each added
//! to it, and the division of the transaction's commit IO among their acts in proportion
//! (see docs/attribution.md, "Journal IO").
//!
//! A handle is opened by `jbd2_handle_start` in the task that modifies the filesystem (its
//! stack is the handle's intent) and closed by `jbd2_handle_stats` on the same thread,
//! which tells the transaction and the blocks the handle dirtied first in it. Nested
//! handles emit neither event (the kernel counts them on the outer handle); a restarted
//! handle keeps its thread's start. A `jbd2_handle_stats` with no start open on its thread
//! and device (the handle began before the recording, or a kernel whose
//! `jbd2_journal_start_reserved` fires no start) adds its blocks to the transaction as
//! *unexplained*: the journal thread keeps their share.
//!
//! Memory: a transaction is forgotten when its commit ends (`jbd2_end_commit`), and any
//! transaction or open handle untouched for [`JOURNAL_STALE_NS`] at the next sweep.

use ioblame_decode::Dev;
use rustc_hash::FxHashMap;

use crate::charge::{Frag, SHARE_ONE};
use crate::dirty::Dirtier;
use crate::interval::Paint;
use crate::model::Via;

/// Transactions and open handles untouched this long are forgotten (ns): a commit whose end
/// was not recorded, a handle whose stop was lost. Longer than any commit interval in use
/// (ext4's `commit=` is 5 s by default, up to a few minutes on laptops).
pub(crate) const JOURNAL_STALE_NS: u64 = 600_000_000_000;

/// Transactions remembered at most (then the least recently touched half is dropped). A
/// journal has at most two not yet committed (the running one and the one committing); more
/// are commits whose end was not recorded.
const MAX_TXNS: usize = 512;

/// Distinct acts remembered per transaction (then further handles are unexplained).
const MAX_OWNERS: usize = 1024;

/// A handle open on a thread.
#[derive(Debug, Clone, Copy)]
struct Open {
    /// The filesystem's device (`j_fs_dev`).
    dev: Dev,
    /// The task and the stack of its `jbd2_handle_start`.
    owner: Dirtier,
    /// When it started.
    t: u64,
}

/// An act's part of a transaction.
#[derive(Debug, Clone, Copy)]
struct Owner {
    who: Dirtier,
    /// Blocks its handles dirtied in the transaction.
    blocks: u64,
    /// Journal sectors of the transaction's commit charged to it so far.
    charged: u64,
}

/// A transaction's handles.
#[derive(Debug, Default, Clone)]
struct Txn {
    /// Per act, in order of its first handle.
    owners: Vec<Owner>,
    /// Each owner's index in `owners`, by (role, stack).
    index: FxHashMap<(u32, u32), usize>,
    /// Blocks of handles whose start was not seen.
    unexplained: u64,
    /// Journal sectors charged to the journal thread for the unexplained blocks.
    unexplained_charged: u64,
    /// Last event that touched it.
    t: u64,
}

impl Txn {
    fn blocks(&self) -> u64 {
        self.owners
            .iter()
            .fold(self.unexplained, |a, o| a.saturating_add(o.blocks))
    }
}

/// The handles of the transactions not yet committed, per `(dev, tid)`.
#[derive(Debug, Default)]
pub(crate) struct Journals {
    open: FxHashMap<u32, Open>,
    txns: FxHashMap<(Dev, u32), Txn>,
}

impl Journals {
    /// `jbd2_handle_start` on thread `tid`: `owner` holds a handle on `dev`'s journal. A
    /// handle still open on the thread (its stop was not recorded) is replaced.
    pub fn handle_start(&mut self, tid: u32, dev: Dev, owner: Dirtier, now: u64) {
        self.open.insert(tid, Open { dev, owner, t: now });
    }

    /// `jbd2_handle_stats` on thread `tid`: its handle added `dirtied` blocks to
    /// transaction `txn` of `dev`'s journal.
    pub fn handle_stats(&mut self, tid: u32, dev: Dev, txn: u32, dirtied: i32, now: u64) {
        let owner = match self.open.get(&tid) {
            Some(o) if o.dev == dev => {
                let w = o.owner;
                self.open.remove(&tid);
                Some(w)
            }
            _ => None,
        };
        let blocks = u64::try_from(dirtied).unwrap_or(0);
        self.add_blocks(dev, txn, owner, blocks, now);
    }

    /// `blocks` first dirtied in transaction `txn` of `dev` by `owner` (`None`: a handle
    /// whose start was not seen, *unexplained*). jbd2's handles report theirs at their stop;
    /// btrfs's are its tree blocks' first dirtiers between two commits (docs/attribution.md,
    /// "btrfs").
    pub fn add_blocks(
        &mut self,
        dev: Dev,
        txn: u32,
        owner: Option<Dirtier>,
        blocks: u64,
        now: u64,
    ) {
        if blocks == 0 {
            return;
        }
        if self.txns.len() >= MAX_TXNS && !self.txns.contains_key(&(dev, txn)) {
            self.drop_oldest();
        }
        let t = self.txns.entry((dev, txn)).or_default();
        t.t = now;
        match owner {
            Some(w) => match t.index.get(&(w.role.0, w.stack)) {
                Some(&i) => t.owners[i].blocks = t.owners[i].blocks.saturating_add(blocks),
                None if t.owners.len() < MAX_OWNERS => {
                    t.index.insert((w.role.0, w.stack), t.owners.len());
                    t.owners.push(Owner {
                        who: w,
                        blocks,
                        charged: 0,
                    });
                }
                None => t.unexplained = t.unexplained.saturating_add(blocks),
            },
            None => t.unexplained = t.unexplained.saturating_add(blocks),
        }
    }

    /// Whether transaction `txn` of `dev` has blocks some act dirtied (a commit of it can be
    /// divided).
    pub fn has_owners(&self, dev: Dev, txn: u32) -> bool {
        self.txns
            .get(&(dev, txn))
            .is_some_and(|t| t.owners.iter().any(|o| o.blocks > 0))
    }

    /// `jbd2_end_commit`: the transaction is committed, its handles forgotten.
    pub fn commit_end(&mut self, dev: Dev, txn: u32) {
        self.txns.remove(&(dev, txn));
    }

    /// `tid` exited: its open handle goes.
    pub fn remove_thread(&mut self, tid: u32) {
        self.open.remove(&tid);
    }

    /// Forgets transactions and open handles untouched for [`JOURNAL_STALE_NS`].
    pub fn sweep(&mut self, now: u64) {
        let limit = now.saturating_sub(JOURNAL_STALE_NS);
        self.open.retain(|_, o| o.t >= limit);
        self.txns.retain(|_, t| t.t >= limit);
    }

    /// Drops the least recently touched half of the transactions.
    fn drop_oldest(&mut self) {
        let mut ts: Vec<u64> = self.txns.values().map(|t| t.t).collect();
        let mid = ts.len() / 2;
        let (_, &mut cut, _) = ts.select_nth_unstable(mid);
        self.txns.retain(|_, t| t.t > cut);
    }

    /// Transactions held.
    pub fn txns_len(&self) -> usize {
        self.txns.len()
    }

    /// Handles open.
    pub fn open_len(&self) -> usize {
        self.open.len()
    }

    /// Divides the journal sectors of a bio queued inside the commit of `txn` of `dev`'s
    /// journal (the parts of `paint` charged via journal with that transaction) among the
    /// acts of the transaction's handles, in proportion to the blocks they dirtied; the
    /// journal thread keeps the share of the unexplained blocks. Over the transaction's
    /// bios the division is exact to a sector per act (each bio's sectors go where the
    /// running totals fall short of the shares). Nothing changes when no handle of the
    /// transaction was recorded.
    pub fn apportion(&mut self, dev: Dev, txn: u32, paint: &mut Paint<Frag>) {
        let Some(t) = self.txns.get_mut(&(dev, txn)) else {
            return;
        };
        let is_ours = |f: &Frag| f.c.via == Via::Journal && f.c.txn == txn;
        let n: u64 = paint
            .segs
            .iter()
            .filter(|s| is_ours(&s.2))
            .map(|s| s.1 - s.0)
            .sum();
        let total_blocks = t.blocks();
        if n == 0 || total_blocks == 0 {
            return;
        }
        // Entries: the owners, then the journal thread (unexplained blocks).
        let k = t.owners.len();
        let weights: Vec<u64> = t
            .owners
            .iter()
            .map(|o| o.blocks)
            .chain([t.unexplained])
            .collect();
        let charged: Vec<u64> = t
            .owners
            .iter()
            .map(|o| o.charged)
            .chain([t.unexplained_charged])
            .collect();
        let weight = |i: usize| weights[i];
        let done = charged.iter().fold(n, |a, &c| a.saturating_add(c));
        let after = done as u128;
        let w = total_blocks as u128;
        // What each entry falls short of its share of everything charged after this bio,
        // scaled by `w` (may be negative where an entry is ahead). Both products are below
        // 2^128, their difference is clamped to i128.
        let wide = |x: u128| i128::try_from(x).unwrap_or(i128::MAX);
        let need: Vec<i128> = (0..=k)
            .map(|i| wide(after * weight(i) as u128).saturating_sub(wide(charged[i] as u128 * w)))
            .collect();
        let mut give = vec![0u64; k + 1];
        let mut left = n;
        for i in 0..=k {
            if need[i] > 0 {
                let g = u64::try_from(need[i] as u128 / w)
                    .unwrap_or(u64::MAX)
                    .min(left);
                give[i] = g;
                left -= g;
            }
        }
        // The rest (fewer than the entries), one each to the largest remaining need.
        while left > 0 {
            let best = (0..=k).filter(|&i| weight(i) > 0).max_by_key(|&i| {
                let given = wide(give[i] as u128 * w);
                (need[i].saturating_sub(given), std::cmp::Reverse(i))
            });
            let Some(i) = best else { break };
            give[i] += 1;
            left -= 1;
        }
        give[k] += left;
        for (i, g) in give.iter().enumerate() {
            if i < k {
                t.owners[i].charged = t.owners[i].charged.saturating_add(*g);
            } else {
                t.unexplained_charged = t.unexplained_charged.saturating_add(*g);
            }
        }
        let share = |i: usize| (weight(i) as u128 * SHARE_ONE as u128 / w) as u32;
        // Rewrite the journal parts, entry by entry in order over their sectors.
        let mut out = Vec::with_capacity(paint.segs.len() + k);
        let mut entry = 0;
        for &(a, b, f) in &paint.segs {
            if !is_ours(&f) {
                out.push((a, b, f));
                continue;
            }
            let mut cur = a;
            while cur < b {
                while entry <= k && give[entry] == 0 {
                    entry += 1;
                }
                let (len, mut c) = if entry > k {
                    (b - cur, f.c)
                } else {
                    ((b - cur).min(give[entry]), f.c)
                };
                if entry < k {
                    c.role = t.owners[entry].who.role;
                    c.stack = t.owners[entry].who.stack;
                }
                if entry <= k {
                    c.share = share(entry);
                    give[entry] -= len;
                }
                let frag = Frag { c, foff: f.foff };
                match out.last_mut() {
                    Some(last) if last.1 == cur && last.2.c == c => last.1 = cur + len,
                    _ => out.push((cur, cur + len, frag)),
                }
                cur += len;
            }
        }
        paint.segs = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charge::{Charge, NO_SHARE};
    use crate::contexts::NO_TXN;
    use crate::interval::NO_OFF;
    use crate::model::RoleId;
    use ioblame_decode::Rwbs;

    const DEV: Dev = 7 << 20;
    const JBD2: u32 = 9;

    fn who(role: u32) -> Dirtier {
        Dirtier {
            role: RoleId(role),
            stack: role,
        }
    }

    fn journal_paint(a: u64, b: u64, txn: u32) -> Paint<Frag> {
        let mut p = Paint::default();
        let c = Charge {
            via: Via::Journal,
            txn,
            ..Charge::unmatched(RoleId(JBD2), DEV, 0, Rwbs::parse("WS"))
        };
        p.fill(a, b, &Frag { c, foff: NO_OFF }, None);
        p
    }

    /// Sectors per role.
    fn per_role(p: &Paint<Frag>, into: &mut FxHashMap<u32, u64>) {
        for &(a, b, f) in &p.segs {
            *into.entry(f.c.role.0).or_default() += b - a;
        }
    }

    #[test]
    fn bios_of_a_commit_are_split_by_dirtied_blocks() {
        let mut j = Journals::default();
        j.handle_start(1, DEV, who(1), 0);
        j.handle_stats(1, DEV, 5, 3, 1);
        j.handle_start(2, DEV, who(2), 2);
        j.handle_stats(2, DEV, 5, 1, 3);
        // a handle whose start was not seen
        j.handle_stats(3, DEV, 5, 0, 4);
        let mut got = FxHashMap::default();
        for i in 0..5 {
            let mut p = journal_paint(i * 8, i * 8 + 8, 5);
            j.apportion(DEV, 5, &mut p);
            assert_eq!(p.segs.iter().map(|s| s.1 - s.0).sum::<u64>(), 8);
            per_role(&p, &mut got);
        }
        assert_eq!((got[&1], got[&2]), (30, 10));
        assert!(!got.contains_key(&JBD2));
        // another transaction's bio, and journal IO outside a commit, are not touched
        let mut p = journal_paint(0, 8, 6);
        j.apportion(DEV, 5, &mut p);
        assert_eq!(p.segs[0].2.c.role, RoleId(JBD2));
        let mut p = journal_paint(0, 8, NO_TXN);
        j.apportion(DEV, 5, &mut p);
        assert_eq!(p.segs[0].2.c.share, NO_SHARE);
        j.commit_end(DEV, 5);
        assert_eq!(j.txns_len(), 0);
        assert_eq!(j.open_len(), 0);
    }

    #[test]
    fn unexplained_blocks_stay_with_the_journal_thread() {
        let mut j = Journals::default();
        j.handle_start(1, DEV, who(1), 0);
        j.handle_stats(1, DEV, 5, 1, 1);
        j.handle_stats(4, DEV, 5, 1, 1); // no start on thread 4
        j.handle_start(2, DEV + 1, who(2), 0);
        j.handle_stats(2, DEV, 5, 2, 1); // a start on another journal
        let mut p = journal_paint(0, 8, 5);
        j.apportion(DEV, 5, &mut p);
        let mut got = FxHashMap::default();
        per_role(&p, &mut got);
        assert_eq!((got[&1], got[&JBD2]), (2, 6));
        let shares: Vec<u32> = p.segs.iter().map(|s| s.2.c.share).collect();
        assert_eq!(shares, vec![250_000, 750_000]);
    }

    #[test]
    fn memory_is_bounded() {
        let mut j = Journals::default();
        for i in 0..(MAX_TXNS as u32 + 10) {
            j.handle_stats(1, DEV, i, 1, i as u64);
        }
        assert!(j.txns_len() <= MAX_TXNS);
        j.handle_start(1, DEV, who(1), 0);
        j.sweep(JOURNAL_STALE_NS + MAX_TXNS as u64 + 20);
        assert_eq!((j.txns_len(), j.open_len()), (0, 0));
    }

    /// Absurd block counts (the field is the kernel's int) neither overflow nor panic, and
    /// every sector still goes to one act.
    #[test]
    fn huge_counts_do_not_overflow() {
        let mut j = Journals::default();
        for _ in 0..4 {
            j.handle_start(1, DEV, who(1), 0);
            j.handle_stats(1, DEV, 5, i32::MAX, 1);
            j.handle_start(2, DEV, who(2), 0);
            j.handle_stats(2, DEV, 5, i32::MAX, 1);
        }
        j.handle_stats(3, DEV, 5, -7, 1);
        let mut got = FxHashMap::default();
        for i in 0..3 {
            let mut p = journal_paint(i * 1000, i * 1000 + 999, 5);
            j.apportion(DEV, 5, &mut p);
            assert_eq!(p.segs.iter().map(|s| s.1 - s.0).sum::<u64>(), 999);
            per_role(&p, &mut got);
        }
        assert_eq!(got[&1] + got[&2], 2997);
        assert!(got[&1].abs_diff(got[&2]) <= 1);
    }
}
