//! ioblame's dirtier-to-IO attribution.
//!
//! [`Attributor`] is fed the decoder's time-ordered [`ioblame_decode::Event`]s and charges
//! every completed block IO to an act (role + intent + file): buffered writes to the task
//! that dirtied the pages, buffer_heads or inode, direct IO and reads to the issuer, a jbd2
//! commit's journal IO to the tasks whose handles filled its transaction (in proportion to
//! the blocks each dirtied), other journal IO to the journal thread, and what cannot be linked to intent #1 (lost) with the best
//! context known. docs/attribution.md specifies every rule ("The charging order" and the
//! sections it names); `Attributor` keeps its state in one module per kind (roles,
//! intents, dirty state, thread contexts, jbd2 transactions, requests, charging).
//!
//! How the sectors of a queued write bio (not direct IO) find their owner, first match wins
//! per sector:
//! 1. a dirty buffer_head covering the sector (`block_dirty_buffer`, first dirtier until
//!    written; inside a `write_inode` bracket the inode's dirtier);
//! 2. a dirty folio, found through the sector->file maps the issuing thread just emitted
//!    (ext4 `map_blocks_exit`, `iomap_add_to_ioend`, `iomap_iter_dstmap`) or, for the
//!    block-device inode (`ino == dev_t`), through the sector itself;
//! 3. journal IO (jbd2 commit bracket, a jbd2/xlog stack, or a metadata write with
//!    preflush/FUA such as a log or commit record): the issuing journal thread; a
//!    commit's, divided among the acts of its transaction's handles (`jbd2_handle_start`,
//!    `jbd2_handle_stats`) in proportion to the blocks each dirtied;
//! 4. inside a `write_inode` bracket: the inode's dirtier (`I_DIRTY_SYNC|DATASYNC`);
//! 5. inside a `single_inode` (or `ext4_writepages`) bracket: the inode's only dirtier,
//!    if it has exactly one;
//! 6. otherwise intent #1 (lost), with the file, issuer and reason known.
//!
//! Reads, readahead and direct IO are charged to the issuer with the `bio_queue` stack.
//! Intent modifiers follow ioblame: `0x10000000 | wb_reason` when the IO was issued by
//! writeback work (inside `writeback_start..writeback_written` on the issuing thread),
//! whatever stack is charged; 0 otherwise (fsync, sync_file_range, direct IO, reads).
//! Requests holding sectors of several acts are split by sector, one [`Io`] per act.
#![deny(missing_docs)]

mod attributor;
mod blocks;
mod btrfs;
mod cgroups;
mod charge;
mod charging;
mod context;
mod contexts;
mod dirtied;
mod dirty;
mod intents;
mod interval;
mod journal;
mod layers;
pub mod model;
pub mod names;
mod requests;
mod roles;
mod run;
mod summary;
#[cfg(test)]
mod test_rng;
#[cfg(test)]
mod tests;
mod uspace;

pub use attributor::{Attribution, Attributor, StateSizes};
pub use cgroups::{per_cgroup, CgroupNames, CgroupTotals};
pub use context::{Context, InodeBits, Symbolizer};
pub use dirtied::Dirtied;
pub use model::*;
pub use names::intent_names;
pub use run::{
    attribute_events, attribute_stream, attribute_stream_logged, attribute_stream_observed,
    attribute_trace, EventFeed, Progress, Run, PROGRESS_EVERY,
};
pub use summary::{LostWindow, Summary, UnknownContext};
