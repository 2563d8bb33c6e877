//! The simulated kernel's code: a symbol table of [`SYMS`] functions (the first [`NAMED`],
//! those the attribution recognises stacks by) and the kernel stacks of each kind of IO
//! ([`Stacks`]), code paths of 10 to 28 frames inside it.

use super::rng::Rng;

const KBASE: u64 = 0xffff_ffff_8100_0000;
const SYMS: u64 = 60_000;
const SYM_SIZE: u64 = 0x200;

/// Names of the first symbols; the rest are `ioblame_bench_fn_N`. Stacks of a kind start
/// with its real frames (the attribution recognises direct IO and journal stacks by name).
const NAMED: &[&str] = &[
    "submit_bio_noacct_nocheck", // 0
    "iomap_dio_bio_iter",        // 1
    "__iomap_dio_rw",            // 2
    "iomap_dio_rw",              // 3
    "ext4_mpage_readpages",      // 4
    "page_cache_ra_order",       // 5
    "jbd2_journal_commit_transaction",
    "kjournald2",         // 7
    "__folio_mark_dirty", // 8
    "generic_perform_write",
    "ext4_writepages", // 10
    "wb_writeback",    // 11
    "mark_buffer_dirty",
    "jbd2__journal_start", // 13
    "__mark_inode_dirty",  // 14
    "ext4_dirty_inode",    // 15
];

/// Kernel stacks: `paths` distinct code paths of 10 to 28 frames inside the symbol table,
/// each starting with the frames of `prefix` (indexes into [`NAMED`]).
fn stacks(rng: &mut Rng, paths: usize, prefix: &[u64]) -> Vec<Vec<u64>> {
    (0..paths)
        .map(|_| {
            let depth = 10 + rng.below(19) as usize;
            let mut s: Vec<u64> = prefix.iter().map(|&i| frame(rng, i)).collect();
            while s.len() < depth {
                let sym = NAMED.len() as u64 + rng.below(SYMS - NAMED.len() as u64);
                s.push(frame(rng, sym));
            }
            s
        })
        .collect()
}

fn frame(rng: &mut Rng, sym: u64) -> u64 {
    KBASE + sym * SYM_SIZE + 0x10 + rng.below(SYM_SIZE - 0x20)
}

/// The same code path entered through another innermost function.
fn with_top(rng: &mut Rng, s: &[u64], tops: &[u64]) -> Vec<u64> {
    let mut v: Vec<u64> = tops.iter().map(|&i| frame(rng, i)).collect();
    v.extend_from_slice(&s[2.min(s.len())..]);
    v
}

/// The simulated kernel's `/proc/kallsyms`: [`NAMED`], then `ioblame_bench_fn_N`.
pub(super) fn kallsyms() -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(SYMS as usize * 40);
    for i in 0..SYMS {
        let addr = KBASE + i * SYM_SIZE;
        let t = if i % 7 == 0 { 't' } else { 'T' };
        let _ = match NAMED.get(i as usize) {
            Some(n) => writeln!(s, "{addr:016x} {t} {n}"),
            None => writeln!(s, "{addr:016x} {t} ioblame_bench_fn_{i}"),
        };
    }
    s
}

/// Code paths of each kind of IO.
pub(super) struct Stacks {
    pub(super) write: Vec<Vec<u64>>,
    pub(super) buffer: Vec<Vec<u64>>,
    pub(super) handle: Vec<Vec<u64>>,
    pub(super) inode: Vec<Vec<u64>>,
    pub(super) wb: Vec<Vec<u64>>,
    pub(super) dio: Vec<Vec<u64>>,
    pub(super) ra: Vec<Vec<u64>>,
    pub(super) jbd: Vec<Vec<u64>>,
}

impl Stacks {
    /// The code paths of the simulated tasks, flusher and journal thread, drawn from `rng`.
    pub(super) fn new(rng: &mut Rng) -> Stacks {
        let write = stacks(rng, 240, &[8, 9]);
        let buffer: Vec<Vec<u64>> = write.iter().map(|s| with_top(rng, s, &[12, 9])).collect();
        let handle: Vec<Vec<u64>> = write.iter().map(|s| with_top(rng, s, &[13, 9])).collect();
        let inode: Vec<Vec<u64>> = write.iter().map(|s| with_top(rng, s, &[14, 15])).collect();
        Stacks {
            write,
            buffer,
            handle,
            inode,
            wb: stacks(rng, 24, &[0, 10, 11]),
            dio: stacks(rng, 80, &[0, 1, 2, 3]),
            ra: stacks(rng, 80, &[0, 4, 5]),
            jbd: stacks(rng, 4, &[0, 6, 7]),
        }
    }
}
