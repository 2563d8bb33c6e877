//! A bounded, in-order work pipeline: one consumer takes the results of positions
//! `0, 1, 2, ...` in turn, while helpers work ahead of it, at most a window ahead.
//!
//! The stream decoder uses it with chunks as positions, in the order the merge needs them:
//! helpers decode chunks ahead while the merging thread consumes them, with no barrier
//! between batches, so neither side waits for the slower one's whole batch. A position no
//! helper has claimed when the consumer needs it is worked on by the consumer itself, so
//! the pipeline makes progress with no helper at all (a pool of one thread), and a helper
//! that dies (a panic) leaves its position to the consumer instead of a wait forever.

use std::sync::{Condvar, Mutex, MutexGuard};

/// The pipeline's shared state; see the module documentation.
pub(crate) struct Pipe<T> {
    state: Mutex<State<T>>,
    /// Signalled when a result is delivered or a claim abandoned.
    ready: Condvar,
    /// Weight of each position (the stream uses a chunk's uncompressed bytes).
    weights: Vec<u64>,
    /// Most positions claimed and not yet taken (at least 1).
    most_ahead: usize,
    /// Most weight claimed and not yet taken (one position is always allowed).
    most_weight: u64,
}

enum Slot<T> {
    /// Not claimed, or claimed and being worked on.
    Open,
    Done(T),
    /// Claimed by a helper that stopped without delivering.
    Abandoned,
}

struct State<T> {
    /// Positions below this one are claimed (by a helper or the consumer).
    claimed: usize,
    /// Positions below this one were taken by the consumer.
    taken: usize,
    /// Weight of the positions claimed and not yet taken.
    weight_ahead: u64,
    /// Helpers started and not finished.
    helpers: usize,
    slots: Vec<Slot<T>>,
}

impl<T> Pipe<T> {
    /// A pipeline of `weights.len()` positions.
    pub(crate) fn new(weights: Vec<u64>, most_ahead: usize, most_weight: u64) -> Self {
        Pipe {
            state: Mutex::new(State {
                claimed: 0,
                taken: 0,
                weight_ahead: 0,
                helpers: 0,
                slots: weights.iter().map(|_| Slot::Open).collect(),
            }),
            ready: Condvar::new(),
            weights,
            most_ahead: most_ahead.max(1),
            most_weight,
        }
    }

    /// Number of positions.
    pub(crate) fn len(&self) -> usize {
        self.weights.len()
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic elsewhere while holding the lock leaves consistent state: every update
        // under it is a handful of assignments.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the next unclaimed position may be worked on now: it exists and is within
    /// the window of the consumer (the position the consumer needs next always is).
    fn has_room(&self, st: &State<T>) -> bool {
        st.claimed < self.len()
            && (st.claimed == st.taken
                || (st.claimed - st.taken < self.most_ahead
                    && st.weight_ahead + self.weights[st.claimed] <= self.most_weight))
    }

    /// Claims the next position for a helper, if there is room for it.
    pub(crate) fn claim_ahead(&self) -> Option<Claim<'_, T>> {
        let mut st = self.lock();
        if !self.has_room(&st) {
            return None;
        }
        let pos = st.claimed;
        st.claimed += 1;
        st.weight_ahead += self.weights[pos];
        Some(Claim {
            pipe: self,
            pos,
            delivered: false,
        })
    }

    /// Whether one more helper should start (at most `most` at once, and only while there
    /// is work within the window). A `true` counts the helper as started: it must run
    /// [`Pipe::help`].
    pub(crate) fn wants_helper(&self, most: usize) -> bool {
        let mut st = self.lock();
        if st.helpers < most && self.has_room(&st) {
            st.helpers += 1;
            true
        } else {
            false
        }
    }

    /// A helper's work: claims positions and delivers `work(position)` until the window is
    /// full or every position is claimed, then stops (see [`Pipe::wants_helper`]).
    pub(crate) fn help(&self, work: impl Fn(usize) -> T) {
        struct Stop<'a, T>(&'a Pipe<T>);
        impl<T> Drop for Stop<'_, T> {
            fn drop(&mut self) {
                self.0.lock().helpers -= 1;
            }
        }
        let _stop = Stop(self);
        while let Some(c) = self.claim_ahead() {
            let v = work(c.pos);
            c.deliver(v);
        }
    }

    /// The result of position `pos`, which must be the first one not taken: delivered by
    /// a helper, or worked out here by `work` if no helper claimed it or its helper stopped
    /// without delivering. While a helper works on it, the consumer works on the next
    /// positions within the window, as a helper would, and waits only when there is none.
    pub(crate) fn take(&self, pos: usize, work: impl Fn(usize) -> T) -> T {
        let mut st = self.lock();
        assert_eq!(st.taken, pos, "pipeline positions are taken in order");
        let v = loop {
            match std::mem::replace(&mut st.slots[pos], Slot::Open) {
                Slot::Done(v) => break v,
                Slot::Abandoned => {
                    drop(st);
                    let v = work(pos);
                    st = self.lock();
                    break v;
                }
                Slot::Open if st.claimed == pos => {
                    st.claimed += 1;
                    st.weight_ahead += self.weights[pos];
                    drop(st);
                    let v = work(pos);
                    st = self.lock();
                    break v;
                }
                Slot::Open if self.has_room(&st) => {
                    // A helper works on `pos`: rather than wait for it, work on the next
                    // position, as a helper would.
                    let i = st.claimed;
                    st.claimed += 1;
                    st.weight_ahead += self.weights[i];
                    drop(st);
                    let v = work(i);
                    st = self.lock();
                    st.slots[i] = Slot::Done(v);
                }
                Slot::Open => st = self.ready.wait(st).unwrap_or_else(|e| e.into_inner()),
            }
        };
        st.taken = pos + 1;
        st.weight_ahead -= self.weights[pos];
        v
    }
}

/// A position claimed by a helper. Dropped without [`Claim::deliver`] (the helper's work
/// panicked), it is left to the consumer.
pub(crate) struct Claim<'a, T> {
    pipe: &'a Pipe<T>,
    pos: usize,
    delivered: bool,
}

impl<T> Claim<'_, T> {
    /// The claimed position.
    #[cfg(test)]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Hands the position's result to the consumer.
    pub(crate) fn deliver(mut self, v: T) {
        self.pipe.lock().slots[self.pos] = Slot::Done(v);
        self.delivered = true;
        self.pipe.ready.notify_all();
    }
}

impl<T> Drop for Claim<'_, T> {
    fn drop(&mut self) {
        if !self.delivered {
            self.pipe.lock().slots[self.pos] = Slot::Abandoned;
            self.pipe.ready.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn consumer_alone_works_every_position_in_order() {
        let p: Pipe<usize> = Pipe::new(vec![1; 5], 2, u64::MAX);
        let seen = Mutex::new(Vec::new());
        for j in 0..p.len() {
            let v = p.take(j, |i| {
                seen.lock().unwrap().push(i);
                i * 10
            });
            assert_eq!(v, j * 10);
        }
        assert_eq!(*seen.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn helpers_stay_within_the_window() {
        // At most 3 positions ahead.
        let p: Pipe<usize> = Pipe::new(vec![1; 10], 3, u64::MAX);
        let c: Vec<_> = std::iter::from_fn(|| p.claim_ahead()).collect();
        assert_eq!(c.iter().map(Claim::pos).collect::<Vec<_>>(), vec![0, 1, 2]);
        for c in c {
            let pos = c.pos();
            c.deliver(pos);
        }
        assert!(p.claim_ahead().is_none());
        assert_eq!(p.take(0, |_| unreachable!()), 0);
        assert_eq!(p.claim_ahead().map(|c| c.pos()), Some(3));

        // At most 10 in weight ahead, but the next position is always allowed.
        let p: Pipe<usize> = Pipe::new(vec![4, 4, 4, 40, 1], 100, 10);
        let c: Vec<_> = std::iter::from_fn(|| p.claim_ahead()).collect();
        assert_eq!(c.iter().map(Claim::pos).collect::<Vec<_>>(), vec![0, 1]);
        drop(c); // abandoned: the consumer works them out
        assert_eq!(p.take(0, |i| i + 100), 100);
        assert_eq!(p.take(1, |i| i + 100), 101);
        assert_eq!(p.claim_ahead().map(|c| c.pos()), Some(2)); // abandoned again
        assert_eq!(p.take(2, |i| i + 100), 102);
        let big = p.claim_ahead().expect("the next position, however heavy");
        assert_eq!(big.pos(), 3);
        assert!(p.claim_ahead().is_none(), "40 in weight is more than 10");
        big.deliver(3);
        assert_eq!(p.take(3, |_| unreachable!()), 3);
        assert_eq!(p.take(4, |i| i), 4);
        assert!(p.claim_ahead().is_none());
    }

    #[test]
    fn the_consumer_works_ahead_while_a_helper_holds_its_position() {
        let p: Pipe<usize> = Pipe::new(vec![1; 5], 3, u64::MAX);
        let held = p.claim_ahead().expect("position 0");
        let worked = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            let w = &worked;
            s.spawn(move || {
                // The helper delivers once the consumer has worked on the rest of the window
                // (or after a while, for the assertion below to fail rather than hang).
                let t0 = std::time::Instant::now();
                while w.lock().unwrap().len() < 2 && t0.elapsed().as_secs() < 5 {
                    std::thread::yield_now();
                }
                held.deliver(0);
            });
            let v = p.take(0, |i| {
                worked.lock().unwrap().push(i);
                i + 100
            });
            assert_eq!(v, 0);
        });
        assert_eq!(
            *worked.lock().unwrap(),
            vec![1, 2],
            "not past the window of 3"
        );
        assert_eq!(p.take(1, |_| unreachable!()), 101);
        assert_eq!(p.take(2, |_| unreachable!()), 102);
        assert_eq!(p.take(3, |i| i), 3);
    }

    #[test]
    fn wants_helper_counts_helpers_and_needs_work() {
        let p: Pipe<usize> = Pipe::new(vec![1; 4], 2, u64::MAX);
        assert!(p.wants_helper(2));
        assert!(p.wants_helper(2));
        assert!(!p.wants_helper(2), "two helpers already");
        p.help(|i| i);
        assert!(!p.wants_helper(2), "the window is full");
        assert_eq!(p.take(0, |_| unreachable!()), 0);
        assert!(
            p.wants_helper(2),
            "one helper stopped, and there is room again"
        );
    }

    #[test]
    fn a_helper_that_panics_leaves_its_position_to_the_consumer() {
        let p: Pipe<usize> = Pipe::new(vec![1; 3], 8, u64::MAX);
        assert!(p.wants_helper(1));
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                p.help(|i| {
                    if i == 1 {
                        panic!("helper dies");
                    }
                    i
                })
            });
            assert!(h.join().is_err());
        });
        assert_eq!(p.take(0, |_| unreachable!()), 0);
        assert_eq!(p.take(1, |i| i + 100), 101);
        assert!(p.wants_helper(1), "the dead helper is not counted");
        assert_eq!(p.take(2, |i| i + 200), 202, "never claimed: the consumer's");
    }

    #[test]
    fn consumer_and_helpers_together_see_each_result_once_in_order() {
        let n = 2000;
        let p: Pipe<usize> = Pipe::new((0..n as u64).map(|i| i % 7).collect(), 5, 20);
        let worked = AtomicUsize::new(0);
        let work = |i: usize| {
            worked.fetch_add(1, Ordering::Relaxed);
            // Uneven work, so that either side is sometimes the slower one.
            let spins = if i % 13 == 0 { 20_000 } else { 100 };
            (0..spins).fold(i, |a, b| std::hint::black_box(a ^ b))
                ^ (0..spins).fold(0, |a, b| a ^ b)
        };
        std::thread::scope(|s| {
            for j in 0..n {
                while p.wants_helper(2) {
                    s.spawn(|| p.help(work));
                }
                assert_eq!(p.take(j, work), j);
            }
        });
        assert_eq!(worked.load(Ordering::Relaxed), n);
    }
}
