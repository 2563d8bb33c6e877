//! A counting global allocator, for tests that prove allocation bounds: the largest single
//! allocation and the peak of live heap bytes while a closure runs.
//!
//! A test binary installs it and measures:
//!
//! ```no_run
//! use ioblame_testkit::alloc::{measure, one_test_at_a_time, Counting};
//!
//! #[global_allocator]
//! static A: Counting = Counting;
//!
//! let _serial = one_test_at_a_time();
//! let (v, largest, peak) = measure(|| vec![0u8; 1000]);
//! assert!(largest >= 1000 && peak >= 1000 && v.len() == 1000);
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The system allocator, counting: install it with `#[global_allocator]`.
#[derive(Debug)]
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

fn note_alloc(size: usize) {
    let live = LIVE.fetch_add(size, Ordering::Relaxed) + size;
    PEAK.fetch_max(live, Ordering::Relaxed);
    LARGEST.fetch_max(size, Ordering::Relaxed);
}

// SAFETY: every method forwards to the system allocator with the caller's arguments unchanged
// and only updates counters besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `alloc`'s contract.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            note_alloc(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            note_alloc(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded as is; `p` was allocated by `System` with layout `l`.
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: forwarded as is; `p` was allocated by `System` with layout `l`.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            LIVE.fetch_sub(l.size(), Ordering::Relaxed);
            note_alloc(new);
        }
        q
    }
}

/// Holds the tests of one binary to one at a time: the counters see every thread, so another
/// test's allocations would land in the one being measured. Every measuring test takes it
/// first.
pub fn one_test_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// What `f` allocated: (its result, the largest single allocation, the peak of live bytes
/// above the start). Meaningful only with [`Counting`] installed and under
/// [`one_test_at_a_time`].
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, usize, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    LARGEST.store(0, Ordering::Relaxed);
    let r = f();
    let largest = LARGEST.load(Ordering::Relaxed);
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    (r, largest, peak)
}
