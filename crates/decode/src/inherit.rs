//! Stacks of dirty buffers recorded without a callchain (`ioblame-capture --stacks exact`,
//! `ioblame perf-command --stacks exact`): a `block_dirty_buffer` whose next event of its
//! thread on its CPU is the dirty event of the folio it made dirty takes that event's stack
//! from its `mark_buffer_dirty` frame on (where the buffer's event fires), the stack the
//! buffer's own callchain would have had; without the kernel's symbols, the folio's stack
//! minus its innermost frame (one frame on 6.x; 5.10 has two, `account_page_dirtied` and
//! `__set_page_dirty`: see docs/attribution.md, "Stacks of dirty buffers"). The attribution
//! gives the buffers that dirtied no folio the stack last given on their thread.

use std::sync::Arc;

use crate::event::{Event, EventKind};

/// Longest time between a buffer's event and its folio's (they are a few hundred
/// nanoseconds apart: `mark_buffer_dirty` calls `__folio_mark_dirty`).
pub const MAX_GAP_NS: u64 = 100_000;

/// Events looked at past a buffer's for its thread's next one.
const LOOK_AHEAD: usize = 16;

/// Gives the stackless dirty buffers of one CPU's events, in order, the stack of the folio
/// dirty event that follows each on its thread. With `drop`, the buffers' own stacks are
/// left out first (the analysis of a trace recorded with every stack, as if recorded
/// without theirs: the check of this rule). `mark_buffer_dirty` is that function's address
/// range in the trace's symbols, if known.
pub(crate) fn derive_buffer_stacks(
    events: &mut [Event],
    drop: bool,
    mark_buffer_dirty: Option<(u64, u64)>,
) {
    // The last folio stack (by address) and the stack derived from it.
    let mut cache: Option<(usize, Arc<[u64]>)> = None;
    for i in 0..events.len() {
        if !matches!(events[i].kind, EventKind::DirtyBuffer { .. }) {
            continue;
        }
        if drop {
            events[i].stack = None;
        }
        if events[i].stack.is_some() {
            continue;
        }
        let (tid, time) = (events[i].tid, events[i].time);
        let Some(next) = events[i + 1..]
            .iter()
            .take(LOOK_AHEAD)
            .find(|e| e.tid == tid)
        else {
            continue;
        };
        if !matches!(next.kind, EventKind::DirtyFolio { .. })
            || next.time.saturating_sub(time) > MAX_GAP_NS
        {
            continue;
        }
        let Some(folio) = next.stack.as_ref().filter(|s| s.len() >= 2) else {
            continue;
        };
        let key = Arc::as_ptr(folio) as *const u64 as usize;
        let derived = match &cache {
            Some((k, d)) if *k == key => d.clone(),
            _ => {
                let from = mark_buffer_dirty
                    .and_then(|(a, b)| folio.iter().position(|&f| a <= f && f < b))
                    .unwrap_or(1);
                let d: Arc<[u64]> = Arc::from(&folio[from..]);
                cache = Some((key, d.clone()));
                d
            }
        };
        events[i].stack = Some(derived);
    }
}

/// The address range `[start, end)` of the text symbol `name` in a `/proc/kallsyms` text:
/// its address, and the next higher address of any symbol (the text need not be sorted).
/// `None` when it is absent, or listed more than once (a module's or a static's namesake).
pub(crate) fn text_symbol_range(text: &str, name: &str) -> Option<(u64, u64)> {
    let mut start = None;
    for l in text.lines() {
        let mut it = l.split_ascii_whitespace();
        let (Some(addr), Some(ty), Some(sym)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if sym == name && matches!(ty, "t" | "T") {
            if start.is_some() {
                return None;
            }
            start = u64::from_str_radix(addr, 16).ok();
        }
    }
    let start = start.filter(|&a| a != 0)?;
    let end = text
        .lines()
        .filter_map(|l| u64::from_str_radix(l.split_ascii_whitespace().next()?, 16).ok())
        .filter(|&a| a > start)
        .min()?;
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(tid: u32, time: u64, kind: EventKind, stack: Option<&[u64]>) -> Event {
        Event {
            stack: stack.map(Arc::from),
            ..Event::of_task(time, tid, kind)
        }
    }

    fn buffer(tid: u32, time: u64, stack: Option<&[u64]>) -> Event {
        ev(
            tid,
            time,
            EventKind::DirtyBuffer {
                dev: 7 << 20,
                blocknr: 100,
                size: 4096,
            },
            stack,
        )
    }

    fn folio(tid: u32, time: u64, stack: &[u64]) -> Event {
        ev(
            tid,
            time,
            EventKind::DirtyFolio {
                bdi: 7 << 20,
                ino: 12,
                index: 0,
            },
            Some(stack),
        )
    }

    fn stack(e: &Event) -> Option<&[u64]> {
        e.stack.as_deref()
    }

    #[test]
    fn a_buffer_followed_by_its_folio_takes_its_stack_less_the_innermost_frame() {
        let mut evs = vec![
            buffer(5, 1000, None),
            // Another thread's event in between is skipped.
            buffer(6, 1100, None),
            folio(5, 1200, &[0xf0, 0xb0, 0x10, 0x20]),
            // The next buffer of the thread: no folio follows (its folio is dirty already).
            buffer(5, 1300, None),
            buffer(5, 1400, None),
        ];
        derive_buffer_stacks(&mut evs, false, None);
        assert_eq!(stack(&evs[0]), Some(&[0xb0, 0x10, 0x20][..]));
        assert_eq!(stack(&evs[1]), None, "thread 6 dirtied no folio");
        assert_eq!(
            stack(&evs[3]),
            None,
            "left to the attribution's thread stack"
        );
        assert_eq!(stack(&evs[4]), None);
    }

    #[test]
    fn a_folio_too_late_or_a_buffer_with_its_own_stack_is_left_alone() {
        let mut evs = vec![
            buffer(5, 1000, None),
            folio(5, 1000 + MAX_GAP_NS + 1, &[0xf0, 0xb0]),
            buffer(5, 200_000, Some(&[0xb1, 0x11])),
            folio(5, 200_100, &[0xf0, 0xb0]),
            // A folio stack of one frame gives nothing.
            buffer(5, 300_000, None),
            folio(5, 300_100, &[0xf0]),
        ];
        derive_buffer_stacks(&mut evs, false, None);
        assert_eq!(stack(&evs[0]), None);
        assert_eq!(stack(&evs[2]), Some(&[0xb1, 0x11][..]));
        assert_eq!(stack(&evs[4]), None);
    }

    #[test]
    fn dropping_the_buffers_stacks_derives_them_again() {
        let mut evs = vec![
            buffer(5, 1000, Some(&[0xb1, 0x11])),
            folio(5, 1100, &[0xf0, 0xb0, 0x10]),
            buffer(5, 1200, Some(&[0xb1, 0x11])),
        ];
        derive_buffer_stacks(&mut evs, true, None);
        assert_eq!(stack(&evs[0]), Some(&[0xb0, 0x10][..]));
        assert_eq!(stack(&evs[1]), Some(&[0xf0, 0xb0, 0x10][..]));
        assert_eq!(stack(&evs[2]), None);
    }

    /// 5.10: the folio's dirty event fires two frames inside `mark_buffer_dirty`
    /// (`account_page_dirtied`, `__set_page_dirty`): with the symbols, the derived stack
    /// starts at `mark_buffer_dirty`'s frame; a folio stack without it falls back to one
    /// frame less.
    #[test]
    fn with_the_symbols_the_stack_starts_at_mark_buffer_dirty() {
        let kallsyms = "ffffffff81200000 T account_page_dirtied\n\
                        ffffffff81200100 T __set_page_dirty\n\
                        ffffffff81300000 T mark_buffer_dirty\n\
                        ffffffff81300200 t __block_commit_write\n\
                        ffffffff81400000 T other [mod]\n";
        let range = text_symbol_range(kallsyms, "mark_buffer_dirty");
        assert_eq!(range, Some((0xffffffff81300000, 0xffffffff81300200)));
        assert_eq!(text_symbol_range(kallsyms, "nope"), None);
        let twice = format!("{kallsyms}ffffffff81500000 t mark_buffer_dirty [ext9]\n");
        assert_eq!(text_symbol_range(&twice, "mark_buffer_dirty"), None);
        let mut evs = vec![
            buffer(5, 1000, None),
            folio(
                5,
                1200,
                &[
                    0xffffffff81200010,
                    0xffffffff81200110,
                    0xffffffff81300040,
                    0x20,
                ],
            ),
            buffer(6, 2000, None),
            folio(6, 2100, &[0xf0, 0xb0, 0x10]),
        ];
        derive_buffer_stacks(&mut evs, false, range);
        assert_eq!(stack(&evs[0]), Some(&[0xffffffff81300040, 0x20][..]));
        assert_eq!(stack(&evs[2]), Some(&[0xb0, 0x10][..]));
    }
}
