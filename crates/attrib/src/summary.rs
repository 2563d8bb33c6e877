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
}
