//! What the attribution says about the trace as a whole.

use crate::model::{FileKey, RoleId, WbReason};

/// Bytes charged to the lost intent in one context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownContext {
    /// The file, as well as known (ino 0 when not even the inode is known).
    pub file: FileKey,
    /// The task that queued the IO.
    pub issuer: RoleId,
    /// The writeback reason where writeback issued the IO.
    pub reason: Option<WbReason>,
    /// Bytes.
    pub bytes: u64,
    /// IOs.
    pub ios: u64,
}

/// A place in the trace where the kernel dropped records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostWindow {
    /// Time of the previous record seen on that CPU (ns); the loss happened after it.
    pub start: u64,
    /// Time of the loss record (ns).
    pub end: u64,
    /// CPU whose ring lost records.
    pub cpu: u32,
    /// Records lost.
    pub count: u64,
}

/// Totals, leftovers and anomalies of one attribution run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// Bytes charged per direction (R, A, W).
    pub bytes: [u64; 3],
    /// IOs charged per direction (R, A, W).
    pub ios: [u64; 3],
    /// Bytes charged to the lost intent (origin unknown).
    pub unknown_bytes: u64,
    /// IOs charged to the lost intent.
    pub unknown_ios: u64,
    /// The contexts of the unknown bytes, largest first.
    pub unknown_contexts: Vec<UnknownContext>,
    /// Records the kernel reported lost.
    pub lost_records: u64,
    /// Where they were lost.
    pub lost_windows: Vec<LostWindow>,
    /// Bytes of IOs whose queue..completion span touched a lost-record window (their
    /// attribution may be incomplete).
    pub bytes_in_lost_windows: u64,
    /// Requests issued but not completed when the trace ended.
    pub inflight_at_end: u64,
    /// Their bytes.
    pub inflight_bytes_at_end: u64,
    /// Bytes of bios queued but never issued (or completed, for bio-based devices).
    pub pending_bytes_at_end: u64,
    /// Dirty folios whose writeback was not seen.
    pub dirty_folios_left: u64,
    /// Their pages.
    pub dirty_pages_left: u64,
    /// Dirty buffer_head ranges whose writeback was not seen.
    pub dirty_buffers_left: u64,
    /// Inodes with a recorded dirtier not written.
    pub dirty_inodes_left: u64,
    /// Flush requests issued.
    pub flushes_issued: u64,
    /// Flush requests completed.
    pub flushes_completed: u64,
    /// Empty (preflush-only) bios queued.
    pub empty_flush_bios: u64,
    /// Repeated issues of an inflight request (dispatch retries).
    pub reissues: u64,
    /// Requeue events.
    pub requeues: u64,
    /// Partial completions.
    pub partial_completions: u64,
    /// Completions with no matching issued request (charged to the lost intent).
    pub unmatched_completions: u64,
    /// Zero-sized completions ignored (end of a flush sequence).
    pub ignored_zero_completions: u64,
    /// Completions reporting an error.
    pub io_errors: u64,
    /// Bytes of completed requests that are neither reads nor writes (discards, ...).
    pub other_bytes: u64,
    /// Their count.
    pub other_ios: u64,
    /// Events whose time went backwards.
    pub out_of_order_events: u64,
    /// Bytes of bios queued or requests issued that saw no progress for two minutes of
    /// trace time (their issue or completion was not recorded): they were charged to the
    /// lost intent with the file, issuer and reason they were queued with.
    pub stale_bytes: u64,
    /// Issued requests charged that way.
    pub stale_requests: u64,
    /// Dirty buffers recorded without a callchain (`--stacks exact`) that dirtied no folio
    /// and whose thread had no stack given before: their dirtier is known, their intent has
    /// no stack.
    pub buffers_without_stack: u64,
    /// With sampled stacks (`--stacks sampled:N`): folios and inodes dirtied without a
    /// stack by a thread that had no sampled stack for that event yet.
    pub dirtiers_without_sample: u64,
    /// Bytes of buffered writes that iomap writeback queued with no sector map (kernels
    /// like 5.10 emit none: `iomap_writepage_map` is newer, on 6.1) and that no other rule
    /// linked: charged to the lost intent, with the file known.
    pub unmapped_writeback_bytes: u64,
    /// Bytes btrfs wrote in extents (its ordered extents, as written) of filesystems the
    /// trace has no chunk map of (a perf.data recording, a recorder before format 1.9):
    /// their writeback cannot be placed on the disk, and falls to the rules that need no
    /// map (mostly the lost intent).
    pub btrfs_unmapped_bytes: u64,
    /// Bytes written on btrfs chunks of a parity profile (RAID5, RAID6), which the
    /// attribution does not map: charged by the other rules.
    pub btrfs_parity_bytes: u64,
    /// Bytes btrfs wrote (its ordered extents, as written) of inode numbers that two
    /// subvolumes of one filesystem wrote within 30 s of each other: the page-cache events
    /// do not tell the subvolume, so these bytes may be charged to the other file's dirtier.
    pub btrfs_shared_ino_bytes: u64,
    /// Bytes of a loop device's backing file read or written by the lower device for which
    /// no IO of the loop device was found (dirtied before the recording, through a loop
    /// device the trace does not list, or read ahead beyond what the loop device asked):
    /// charged as if there were no loop device, usually to its worker.
    pub lower_unlinked_bytes: u64,
    /// Bytes charged as lower layers' copies ([`crate::Io::lower`]): in `bytes` (the devices'
    /// IO), but of acts already charged on the device above.
    pub lower_bytes: u64,
    /// Pages of large folios that another task's write took from the folio's first dirtier
    /// (outside that dirtier's own write: docs/attribution.md, "Large folios").
    pub folio_pages_claimed: u64,
    /// User stack copies unwound (`--user-stacks dwarf`).
    pub stack_copies: u64,
    /// Of them, those whose next frame lay beyond the copy: the stack was deeper than the
    /// copy (`--user-stacks dwarf:SIZE`).
    pub stack_copies_cut: u64,
    /// Human-readable warnings (the first 64).
    pub warnings: Vec<String>,
    /// Warnings beyond those kept.
    pub warnings_suppressed: u64,
}

impl Summary {
    /// Bytes charged over all directions.
    pub fn total_bytes(&self) -> u64 {
        self.bytes.iter().sum()
    }

    /// Adds a warning, up to [`MAX_WARNINGS`]; beyond, only counts it.
    pub(crate) fn warn(&mut self, msg: impl FnOnce() -> String) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(msg());
        } else {
            self.warnings_suppressed += 1;
        }
    }
}

/// Warnings kept in the summary; more are only counted.
const MAX_WARNINGS: usize = 64;

/// Loss windows kept (more are merged).
const MAX_LOST_WINDOWS: usize = 1024;

/// Where the kernel dropped records, as the attribution follows it: the time of the last
/// record per CPU (where the next loss on that CPU began), and the loss windows merged into
/// sorted, disjoint intervals for the test of whether an IO touched one.
#[derive(Debug, Default)]
pub(crate) struct Losses {
    /// Per CPU: the time of its last record other than a loss.
    cpu_last: Vec<u64>,
    /// Sorted, disjoint loss windows.
    merged: Vec<(u64, u64)>,
}

impl Losses {
    /// Notes a record of `cpu` at `time` (`lost`: a loss record, which ends a window
    /// rather than starting the next one).
    #[inline]
    pub fn saw(&mut self, cpu: u32, time: u64, lost: bool) {
        let cpu = cpu as usize;
        if cpu < 4096 {
            if cpu >= self.cpu_last.len() {
                self.cpu_last.resize(cpu + 1, 0);
            }
            if !lost {
                self.cpu_last[cpu] = time;
            }
        }
    }

    /// A loss record of `cpu` at `time` telling that `lost` records were dropped since the
    /// CPU's previous record: counted and its window recorded in `s`.
    pub fn lost(&mut self, s: &mut Summary, cpu: u32, time: u64, lost: u64) {
        let start = self
            .cpu_last
            .get(cpu as usize)
            .copied()
            .filter(|&t| t > 0)
            .unwrap_or(time);
        let start = start.min(time);
        s.lost_records = s.lost_records.saturating_add(lost);
        self.note(&mut s.lost_windows, start, time, cpu, lost);
    }

    /// Records a loss window: merged with the previous window of the same CPU when they
    /// touch (a burst of losses), and with its neighbours for the overlap test; both lists
    /// stay within [`MAX_LOST_WINDOWS`] (beyond, the last window grows).
    fn note(&mut self, ws: &mut Vec<LostWindow>, start: u64, end: u64, cpu: u32, count: u64) {
        let n = ws.len();
        let same_cpu = (n.saturating_sub(8)..n)
            .rev()
            .find(|&i| ws[i].cpu == cpu)
            .filter(|&i| start <= ws[i].end);
        let into = same_cpu.or_else(|| (n >= MAX_LOST_WINDOWS).then(|| n - 1));
        match into.and_then(|i| ws.get_mut(i)) {
            Some(w) => {
                w.start = w.start.min(start);
                w.end = w.end.max(end);
                w.count = w.count.saturating_add(count);
            }
            None => ws.push(LostWindow {
                start,
                end,
                cpu,
                count,
            }),
        }
        // Sorted, disjoint intervals.
        let m = &mut self.merged;
        let i = m.partition_point(|w| w.1 < start);
        let mut j = i;
        let (mut a, mut b) = (start, end);
        while j < m.len() && m[j].0 <= end {
            a = a.min(m[j].0);
            b = b.max(m[j].1);
            j += 1;
        }
        m.splice(i..j, [(a, b)]);
        if m.len() > MAX_LOST_WINDOWS {
            // Coarser: the two closest neighbours at the end become one.
            let last = m.pop().unwrap_or((a, b));
            if let Some(prev) = m.last_mut() {
                prev.1 = prev.1.max(last.1);
            }
        }
    }

    /// Whether `[start, end]` touches a loss window.
    pub fn touches(&self, start: u64, end: u64) -> bool {
        if self.merged.is_empty() {
            return false;
        }
        let i = self.merged.partition_point(|w| w.1 < start);
        self.merged.get(i).is_some_and(|w| w.0 <= end)
    }

    /// How many merged windows are held.
    pub fn merged_len(&self) -> usize {
        self.merged.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_beyond_the_limit_are_counted() {
        let mut s = Summary::default();
        for i in 0..MAX_WARNINGS + 3 {
            s.warn(|| format!("w{i}"));
        }
        assert_eq!(s.warnings.len(), MAX_WARNINGS);
        assert_eq!(s.warnings[0], "w0");
        assert_eq!(s.warnings_suppressed, 3);
    }

    #[test]
    fn a_loss_window_starts_at_the_cpus_previous_record() {
        let mut l = Losses::default();
        let mut s = Summary::default();
        l.saw(1, 100, false);
        l.saw(1, 200, true);
        l.lost(&mut s, 1, 200, 5);
        // a CPU never seen: the window starts at the loss itself
        l.saw(3, 500, true);
        l.lost(&mut s, 3, 500, 2);
        assert_eq!(s.lost_records, 7);
        assert_eq!(
            s.lost_windows,
            vec![
                LostWindow {
                    start: 100,
                    end: 200,
                    cpu: 1,
                    count: 5
                },
                LostWindow {
                    start: 500,
                    end: 500,
                    cpu: 3,
                    count: 2
                },
            ]
        );
        assert!(l.touches(150, 160));
        assert!(l.touches(0, 100));
        assert!(l.touches(500, 600));
        assert!(!l.touches(201, 499));
        assert!(!l.touches(501, 900));
    }

    #[test]
    fn loss_windows_of_one_cpu_merge_and_stay_bounded() {
        let mut l = Losses::default();
        let mut s = Summary::default();
        // a burst on one CPU: one window
        l.saw(0, 10, false);
        l.lost(&mut s, 0, 20, 1);
        l.lost(&mut s, 0, 20, 1);
        assert_eq!(s.lost_windows.len(), 1);
        assert_eq!(s.lost_windows[0].count, 2);
        // far more disjoint windows than kept
        for i in 0..3 * MAX_LOST_WINDOWS as u64 {
            let t = 1000 + i * 100;
            l.saw(1, t, false);
            l.lost(&mut s, 1, t + 10, 1);
        }
        assert!(s.lost_windows.len() <= MAX_LOST_WINDOWS);
        assert!(l.merged_len() <= MAX_LOST_WINDOWS);
        assert_eq!(s.lost_records, 2 + 3 * MAX_LOST_WINDOWS as u64);
        // the early windows stay apart; the last one grew over the latest
        assert!(l.touches(1005, 1005));
        assert!(!l.touches(1050, 1050));
        let last = 1000 + (3 * MAX_LOST_WINDOWS as u64 - 1) * 100;
        assert!(l.touches(last + 5, last + 5));
        assert!(l.touches(last - 50, last - 50));
    }
}
