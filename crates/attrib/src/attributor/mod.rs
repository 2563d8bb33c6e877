//! The streaming attribution: [`Attributor`] owns the parts of its state and hands each
//! event to the part it concerns (see docs/attribution.md, "Where the code lives"):
//! * [`Roles`]: tasks (forks, comm changes, execs, exits) and the roles they act as;
//! * [`Intents`]: stacks interned and classified, intents and acts numbered;
//! * [`Dirty`]: dirty folios, buffers and inodes with their dirtiers;
//! * [`Contexts`]: per thread, the brackets it is in and the sector->file maps it emitted;
//! * [`Requests`]: bios queued and requests in flight, per disk;
//! * [`Charging`]: the rules that charge a queued bio's sectors
//!   ([`crate::charging::charge_bio`]) and the IOs a completed request makes;
//! * [`Losses`] and the [`Summary`]: lost records, totals and anomalies.
//!
//! An event that changes one part goes straight to it from [`Attributor::push`]'s dispatch,
//! here; one that links two parts (a page dirtied: the role and stack of the dirtier into
//! the dirty state) has a short handler in a submodule, by event family:
//! * `dirtiers`: pages, buffers and inodes dirtied, buffered writes' ranges, the end of a
//!   `single_inode` bracket;
//! * `stacks`: stacks given to the dirty events the recorder recorded without one (dirty
//!   buffers' stacks left out, stacks sampled);
//! * `block_io`: bios queued and remapped, requests issued, requeued and completed, and the
//!   IOs they make.
//!
//! Here remain the public calls, the dispatch, the clock and its sweeps, and the tasks'
//! exits. What each role dirtied, for a live view, is logged by [`DirtiedLog`].

use ioblame_decode::{CommitPhase, Dev, Event, EventKind, WorkPhase, XfsFileOp};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::charging::Charging;
use crate::context::{Context, Devices, STACK_BTRFS_COMMIT, STACK_BTRFS_LOG, STACK_BTRFS_LOG_SYNC};
use crate::contexts::Contexts;
use crate::dirtied::{Dirtied, DirtiedLog};
use crate::dirty::{Dirtier, Dirty, BH_SENTINEL};
use crate::intents::{Intents, StackId};
use crate::journal::Journals;
use crate::layers::Layers;
use crate::model::*;
use crate::requests::Requests;
use crate::roles::Roles;
use crate::summary::{Losses, Summary};

mod block_io;
mod dirtiers;
mod stacks;

/// Trace time between sweeps for stale state (ns).
const SWEEP_INTERVAL_NS: u64 = 10_000_000_000;

/// The result of [`Attributor::finish`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attribution {
    /// Roles, intents, acts and per-act totals.
    pub tables: Tables,
    /// Totals, leftovers, anomalies.
    pub summary: Summary,
    /// IOs produced since the last [`Attributor::drain_ios`].
    pub ios: Vec<Io>,
}

/// How much per-trace state an [`Attributor`] holds, by kind: it follows what is
/// outstanding (dirty and not yet written, queued or in flight, tasks alive), not the
/// length of the trace. The output tables (roles, intents, acts) are not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateSizes {
    /// Tasks known (alive, or exited less than 30 s of trace time ago).
    pub tasks: usize,
    /// Tids whose next generation is remembered after their task was forgotten.
    pub pruned_tids: usize,
    /// Per-thread contexts (open brackets, fresh maps).
    pub thread_contexts: usize,
    /// Sector->file map intervals held for the threads' next bios.
    pub thread_maps: usize,
    /// Files with dirty folios.
    pub dirty_files: usize,
    /// Dirty folios.
    pub dirty_folios: usize,
    /// Dirty buffer_head intervals.
    pub dirty_buffers: usize,
    /// Inodes with a recorded dirtier.
    pub inode_dirtiers: usize,
    /// Folio orders of the page cache.
    pub folio_orders: usize,
    /// Queued bio fragments.
    pub pending_fragments: usize,
    /// Issued requests.
    pub inflight: usize,
    /// Loss windows (summary list and merged list).
    pub lost_windows: usize,
    /// jbd2 transactions whose handles are held until their commit ends.
    pub journal_txns: usize,
    /// jbd2 handles open (started, not stopped yet).
    pub journal_handles: usize,
}

/// How long a btrfs worker's tree blocks wait for the ordered extent it is finishing to be
/// removed (`Attributor::finishing`): the removal follows within the same work item.
const FINISHING_TTL_NS: u64 = 10_000_000_000;

/// Streaming attribution: feed time-ordered events with [`Attributor::push`], take the
/// charged IOs with [`Attributor::drain_ios`], and end with [`Attributor::finish`].
pub struct Attributor {
    devices: Devices,
    tables: Tables,
    summary: Summary,
    roles: Roles,
    intents: Intents,
    dirty: Dirty,
    contexts: Contexts,
    requests: Requests,
    charging: Charging,
    /// Loop devices' backing files: their IO charged to the acts the loop devices served.
    layers: Layers,
    /// The btrfs filesystems: chunk maps and ordered extents in flight.
    btrfs: crate::btrfs::Btrfs,
    /// Unwinds the user stack copies ([`Context::unwinder`]).
    unwinder: Option<ioblame_unwind::Unwinder>,
    /// The frames of the last copy unwound (a buffer kept).
    unwound: Vec<u64>,
    losses: Losses,
    /// The handles of the jbd2 transactions not yet committed.
    journals: Journals,
    /// The time of the latest event.
    last_time: u64,
    /// Trace time of the next sweep for stale state.
    next_sweep: u64,
    /// With [`Context::buffer_stacks_from_thread`]: per thread, the stack last given to one
    /// of its dirty buffers; `None` otherwise.
    buffer_stacks: Option<FxHashMap<u32, StackId>>,
    /// Per thread, the dirty buffers it recorded with no stack to give them (its first ones
    /// dirtied no folio): (disk, first sector, role). Its next stack is given to those still
    /// dirty.
    stackless_buffers: FxHashMap<u32, Vec<(Dev, u64, RoleId)>>,
    /// Entries in `stackless_buffers`, over all threads (bounded: module `stacks`).
    stackless_waiting: usize,
    /// With [`Context::stacks_sampled`]: per (thread, dirtying event), the stack last
    /// sampled; `None` otherwise.
    sampled_stacks: Option<SampledStacks>,
    /// With [`Context::stacks_sampled`]: per (thread, dirtying event) not sampled yet, the
    /// files it dirtied without a stack, with the role: its first sample's stack is given to
    /// what of them is still dirty.
    unsampled: FxHashMap<(u32, bool), Vec<Unsampled>>,
    /// With [`Attributor::log_dirtied`]: what was dirtied since the last
    /// [`Attributor::drain_dirtied_into`].
    dirtied: DirtiedLog,
    /// Per thread, its last buffered write's range (`xfs_file_buffered_write`,
    /// `ext4_da_write_begin`): the folio `(bdi, ino)`, pages `[a, b)`, when.
    write_ranges: FxHashMap<u32, ((Dev, u64), u64, u64, u64)>,
    /// Per thread, the stack of its last folio dirtied (a write range has none).
    folio_stacks: FxHashMap<u32, StackId>,
    /// Per btrfs worker thread, the tree blocks it was the first to dirty while finishing
    /// an ordered extent (the btree inode's folios, dirtied with a stack of class
    /// `STACK_BTRFS_FINISH`): the folio's bdi and index, its dirtier, time and pages. At
    /// the extent's `btrfs_ordered_extent_remove` on the same thread, those still dirty
    /// become the extent's data dirtier's (docs/attribution.md, "btrfs").
    finishing: FxHashMap<u32, Vec<Finishing>>,
    /// Whether the event being pushed carries its thread's last sampled stack rather than
    /// its own (`--stacks sampled:N`): a worker's sampled finishing stack says nothing of
    /// its later work.
    stack_borrowed: bool,
}

/// A tree block a btrfs worker dirtied first while finishing an ordered extent.
#[derive(Debug, Clone, Copy)]
struct Finishing {
    /// The folio: its bdi (the filesystem's superblock device) and index.
    bdi: Dev,
    index: u64,
    /// Its dirtier (the worker), when, and its pages.
    owner: Dirtier,
    t: u64,
    pages: u64,
    /// The transaction it was dirtied in, which its weight counts in.
    txn: Option<u32>,
}

/// A file (`bdi`, `ino`) a role dirtied without a stack before its thread's first sample.
type Unsampled = (Dev, u64, RoleId);

/// Per (thread, whether a folio's or an inode's dirty event), the stack last sampled.
type SampledStacks = FxHashMap<(u32, bool), Arc<[u64]>>;

/// Threads whose last dirty-buffer stack is remembered (then the map starts over).
const BUFFER_STACKS_MAX: usize = 1 << 16;

impl std::fmt::Debug for Attributor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attributor")
            .field("roles", &self.tables.roles.len())
            .field("intents", &self.tables.intents.len())
            .field("acts", &self.tables.acts.len())
            .field("dirty_files", &self.dirty.files_len())
            .field("inflight", &self.requests.inflight_len())
            .finish()
    }
}

impl Attributor {
    /// A fresh attributor for a trace described by `ctx`.
    pub fn new(ctx: Context) -> Attributor {
        let devices =
            Devices::new(&ctx.devices, &ctx.block_sizes).with_xfs_geometry(&ctx.xfs_geometry);
        Attributor {
            layers: Layers::new(&ctx.loops, &ctx.dm_targets, &devices),
            btrfs: crate::btrfs::Btrfs::new(&ctx.btrfs, &devices),
            unwinder: ctx.unwinder,
            unwound: Vec::new(),
            devices,
            tables: Tables {
                intents: Intents::reserved(),
                ..Tables::default()
            },
            summary: Summary::default(),
            roles: Roles::new(&ctx.tasks, ctx.scope_root),
            dirty: Dirty::new(ctx.page_size, ctx.inode_bits),
            intents: Intents::new(ctx.symbols, ctx.recorder_pid)
                .with_spaces(crate::uspace::AddressSpaces::new(&ctx.user_maps)),
            contexts: Contexts::default(),
            requests: Requests::default(),
            charging: Charging::new(ctx.issuer_only),
            losses: Losses::default(),
            journals: Journals::default(),
            last_time: 0,
            next_sweep: 0,
            buffer_stacks: ctx.buffer_stacks_from_thread.then(FxHashMap::default),
            stackless_buffers: FxHashMap::default(),
            stackless_waiting: 0,
            sampled_stacks: ctx.stacks_sampled.then(FxHashMap::default),
            unsampled: FxHashMap::default(),
            dirtied: DirtiedLog::default(),
            write_ranges: FxHashMap::default(),
            folio_stacks: FxHashMap::default(),
            finishing: FxHashMap::default(),
            stack_borrowed: false,
        }
    }

    /// A follower's newer loop devices and one-to-one dm targets (every file's lists merged,
    /// `ioblame_format::merge_loops`, `merge_dm_targets`): those set up while recording
    /// link the IO through them from now on; those known stay as they were.
    pub fn update_layers(
        &mut self,
        loops: &[ioblame_format::LoopDevice],
        dm: &[ioblame_format::DmTarget],
    ) {
        self.layers.add(loops, dm, &self.devices);
    }

    /// The trace's BTRFS table as it is now, for a recording followed while it is written
    /// (its recorder writes the table again when a chunk is allocated or a filesystem
    /// mounted): the IO on a chunk it names from now on is placed through it
    /// (docs/attribution.md, "btrfs"). What was learnt so far stays. `table` is the whole
    /// table, every list read so far merged (`ioblame_format::merge_btrfs`): a
    /// filesystem's chunks it does not name are forgotten.
    pub fn update_btrfs(&mut self, table: &[ioblame_format::BtrfsFs]) {
        self.btrfs.update(table, &self.devices);
    }

    /// Keeps what is dirtied from now on, for [`Attributor::drain_dirtied_into`] (off by
    /// default: an offline analysis has no use for it). It changes nothing else.
    pub fn log_dirtied(&mut self) {
        self.dirtied.start();
    }

    /// Moves what was dirtied since the last call into `out` (nothing unless
    /// [`Attributor::log_dirtied`]): all of it at the end of the events (`all`), otherwise
    /// all but the last [`ioblame_decode::BUFFER_FOLIO_MAX_GAP_NS`] before the latest event
    /// (a folio's record may yet give way to its buffers', dirtied right after it).
    pub fn drain_dirtied_into(&mut self, out: &mut Vec<Dirtied>, all: bool) {
        self.dirtied.drain_into(out, all, self.last_time);
    }

    /// The frames of stack `id` of a [`Dirtied`] (kernel return addresses, innermost
    /// first; empty for an unknown id).
    pub fn stack_frames(&self, id: u32) -> &[u64] {
        self.intents.frames(id)
    }

    /// The tables so far (roles, intents, acts referenced by the IOs produced so far).
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The sizes of the state held now.
    pub fn state_sizes(&self) -> StateSizes {
        StateSizes {
            tasks: self.roles.tasks_len(),
            pruned_tids: self.roles.pruned_len(),
            thread_contexts: self.contexts.len(),
            thread_maps: self.contexts.maps_len(),
            dirty_files: self.dirty.files_len(),
            dirty_folios: self.dirty.folios_len(),
            dirty_buffers: self.dirty.buffers_len(),
            inode_dirtiers: self.dirty.inodes_len(),
            folio_orders: self.dirty.orders_len(),
            pending_fragments: self.requests.pending_len(),
            inflight: self.requests.inflight_len(),
            lost_windows: self
                .summary
                .lost_windows
                .len()
                .max(self.losses.merged_len()),
            journal_txns: self.journals.txns_len(),
            journal_handles: self.journals.open_len(),
        }
    }

    /// Takes the IOs charged since the last call.
    pub fn drain_ios(&mut self) -> Vec<Io> {
        std::mem::take(&mut self.charging.ios)
    }

    /// Moves the IOs charged since the last call into `out` (keeps this buffer's capacity).
    pub fn drain_ios_into(&mut self, out: &mut Vec<Io>) {
        out.append(&mut self.charging.ios);
    }

    /// Ends the attribution: leftovers go to the summary.
    pub fn finish(mut self) -> Attribution {
        self.requests.leftovers(&mut self.summary);
        self.dirty.leftovers(&mut self.summary);
        self.summary.unknown_contexts = self.charging.unknown_contexts();
        self.summary.btrfs_unmapped_bytes = self.btrfs.unmapped_bytes;
        self.summary.btrfs_shared_ino_bytes = self.btrfs.shared_bytes;
        self.summary.btrfs_parity_bytes = self.btrfs.parity_bytes;
        Attribution {
            tables: self.tables,
            summary: self.summary,
            ios: self.charging.ios,
        }
    }

    /// Starts loading the dirty-page or dirty-buffer state `ev` will touch, when it is
    /// pushed a few events later: the maps of dirty blocks are larger than the caches, and
    /// a lookup that waits for memory costs more than one that finds its line on the way.
    /// In two steps: the slot of the block's page now (found from the key alone, nothing
    /// read), and a few calls later, that slot then in cache, the block itself (a page of
    /// several blocks keeps them elsewhere: on 4 KiB random writes, replacing a dirtied
    /// folio's record waited on that line for two thirds of its time).
    /// A hint only: what [`Attributor::push`] does is the same with or without it
    /// (`ioblame_decode::for_each_event_ahead` hands out the events to call it with, one
    /// call per event).
    pub fn prefetch(&mut self, ev: &Event) {
        let next = match ev.kind {
            EventKind::DirtyFolio { bdi, ino, index } => {
                self.dirty.prefetch_folio(self.fs_bdi(bdi), ino, index)
            }
            EventKind::DirtyBuffer { dev, blocknr, size }
                if (512..=1 << 16).contains(&size) && blocknr < BH_SENTINEL =>
            {
                let info = self.devices.info(dev);
                self.dirty
                    .prefetch_buffer(info.disk, info.buffer_sector(blocknr, size))
            }
            _ => None,
        };
        self.dirty.prefetch_next(next);
    }

    /// Feeds one event (events must come in time order).
    pub fn push(&mut self, ev: &Event) {
        if ev.stack_copy.is_some() {
            let with = self.unwind(ev);
            return self.push_unwound(&with);
        }
        self.push_unwound(ev)
    }

    /// `ev` with its stack copy unwound into the user frames of its stack, in its
    /// process's address space as it is now (docs/attribution.md, "User frames"); without an
    /// unwinder, only the kernel frames.
    fn unwind(&mut self, ev: &Event) -> Event {
        let mut e = ev.clone();
        let Some(copy) = e.stack_copy.take() else {
            return e;
        };
        let kernel = e
            .stack
            .as_deref()
            .map_or(&[][..], ioblame_decode::kernel_frames);
        let mut frames = kernel.to_vec();
        if let Some(u) = &mut self.unwinder {
            let spaces = &self.intents.spaces;
            let generation = spaces.generation(ev.pid);
            let end = u.unwind(
                ev.pid,
                generation,
                || spaces.executable(ev.pid),
                &copy,
                &mut self.unwound,
            );
            self.summary.stack_copies += 1;
            if end == ioblame_unwind::End::CopyEnd {
                self.summary.stack_copies_cut += 1;
            }
            if !self.unwound.is_empty() {
                frames.push(ioblame_decode::USER_MARK);
                frames.extend_from_slice(&self.unwound);
            }
        }
        e.stack = Some(frames.into());
        e
    }

    /// [`Attributor::push`] once the event's user stack is unwound.
    fn push_unwound(&mut self, ev: &Event) {
        if self.sampled_stacks.is_some() {
            if let Some(with) = self.with_sampled_stack(ev) {
                // Its thread's last sampled stack, not its own.
                self.stack_borrowed = true;
                self.push_event(&with);
                self.stack_borrowed = false;
                return;
            }
        }
        self.push_event(ev)
    }

    /// [`Attributor::push`] once the event has its stack.
    fn push_event(&mut self, ev: &Event) {
        self.clock(ev);
        let now = self.last_time;
        let tid = ev.tid;
        match &ev.kind {
            EventKind::DirtyFolio { bdi, ino, index } => {
                let bdi = self.fs_bdi(*bdi);
                self.on_dirty_folio(ev, bdi, *ino, *index)
            }
            EventKind::BtrfsOrdered {
                op,
                fsid,
                root,
                ino,
                file_offset,
                start,
                len,
                disk_len,
                compress_type,
                ..
            } => {
                if *op == ioblame_decode::BtrfsOrderedOp::Remove {
                    self.finished(tid, *fsid, *start, *disk_len, now);
                }
                let reason = self.contexts.reason(tid);
                let o = crate::btrfs::OrderedEvent {
                    op: *op,
                    fsid: *fsid,
                    root: *root,
                    ino: *ino,
                    file_offset: *file_offset,
                    start: *start,
                    len: *len,
                    disk_len: *disk_len,
                    compressed: *compress_type != 0 || disk_len < len,
                    reason,
                };
                self.btrfs.on_ordered(&o, now)
            }
            EventKind::DirtyBuffer { dev, blocknr, size } => {
                self.on_dirty_buffer(ev, *dev, *blocknr, *size)
            }
            EventKind::MarkInodeDirty {
                bdi, ino, flags, ..
            } => self.on_mark_inode_dirty(ev, *bdi, *ino, *flags),
            EventKind::AddToPageCache {
                s_dev,
                ino,
                index,
                order,
                ..
            } => {
                self.dirty
                    .folio_added(&self.devices, *s_dev, *ino, *index, *order);
                // In the reader's context just before its read bios: the file it reads, on
                // kernels without the readahead events (docs/attribution.md, "Direct IO
                // and reads").
                if *s_dev != 0 {
                    self.contexts.page_cache_added(tid, now, (*s_dev, *ino));
                }
            }
            EventKind::DeleteFromPageCache {
                s_dev,
                ino,
                index,
                order,
                ..
            } => self
                .dirty
                .folio_deleted(&self.devices, *s_dev, *ino, *index, *order),

            // ---- maps on the issuing thread ----
            // btrfs's iomap (direct IO) gives logical addresses: placed on their disks
            // through the chunk map.
            EventKind::IomapIterDstmap {
                dev,
                ino,
                addr,
                offset,
                length,
                typ,
                flags,
                ..
            } if *addr != u64::MAX && !self.btrfs.is_empty() => {
                match self.btrfs.places(*dev, *addr, *length) {
                    Some(places) => {
                        for (disk, byte, len, delta) in places {
                            let kind = EventKind::IomapIterDstmap {
                                dev: *dev,
                                ino: *ino,
                                addr: byte,
                                offset: offset.saturating_add(delta),
                                length: len,
                                typ: *typ,
                                flags: *flags,
                                bdev: disk,
                            };
                            self.contexts.on_file_map(&self.devices, tid, now, &kind);
                        }
                    }
                    None => self.contexts.on_file_map(&self.devices, tid, now, &ev.kind),
                }
            }
            EventKind::Ext4MapBlocks { .. }
            | EventKind::IomapAddToIoend { .. }
            | EventKind::IomapIterDstmap { .. }
            | EventKind::XfsMapBlocks { .. } => {
                self.contexts.on_file_map(&self.devices, tid, now, &ev.kind)
            }

            // ---- brackets ----
            EventKind::WritebackWork {
                phase, reason, bdi, ..
            } => self.on_writeback_work(ev, *phase, *reason, *bdi),
            EventKind::SingleInodeStart { bdi, ino, .. } => {
                self.btrfs_pass(tid, *bdi, *ino, now);
                self.contexts
                    .single_inode_start(tid, now, (*bdi, *ino), ev.time)
            }
            EventKind::SingleInode {
                bdi, ino, state, ..
            } => {
                self.btrfs_pass(tid, *bdi, *ino, now);
                self.on_single_inode(tid, *bdi, *ino, *state)
            }
            EventKind::WriteInodeStart { bdi, ino, .. } => {
                self.contexts.write_inode_start(tid, now, (*bdi, *ino))
            }
            EventKind::WriteInode { bdi, ino, .. } => {
                self.contexts.write_inode_end(tid, now);
                self.dirty.inode_written((*bdi, *ino));
            }
            EventKind::Ext4Writepages { dev, ino, .. } => {
                self.contexts.ext4_writepages(tid, now, (*dev, *ino))
            }
            EventKind::Ext4WritepagesResult { .. } => {
                self.contexts.ext4_writepages_result(tid, now)
            }
            EventKind::IomapWritebackFolio {
                dev,
                ino,
                offset,
                length,
            } => {
                self.contexts.iomap_writeback(tid, now, (*dev, *ino));
                self.dirty
                    .learn_folio_size(&self.devices, *dev, *ino, *offset, *length);
            }
            EventKind::IomapDioBegin {
                dev, ino, count, ..
            } => self.contexts.dio_begin(tid, now, *dev, *ino, *count),
            EventKind::IomapDioComplete { dev, ino, .. } => {
                self.contexts.dio_complete(tid, *dev, *ino)
            }
            EventKind::Readahead { s_dev, ino, .. }
            | EventKind::FilemapFault { s_dev, ino, .. } => {
                self.contexts.page_cache_read(tid, now, (*s_dev, *ino))
            }
            EventKind::IomapReadahead { dev, ino, .. } => {
                self.contexts.page_cache_read(tid, now, (*dev, *ino))
            }
            EventKind::XfsFile {
                op,
                dev,
                ino,
                offset,
                count,
            } => {
                if *op == XfsFileOp::BufferedWrite {
                    self.on_write_range(ev, *dev, *ino, *offset, *count);
                }
                self.contexts.xfs_file(tid, now, *op, (*dev, *ino))
            }
            EventKind::Ext4WriteBegin { dev, ino, pos, len } => {
                self.on_write_range(ev, *dev, *ino, *pos, *len as u64)
            }
            EventKind::Ext4SyncFile { .. } => self.contexts.end_dio(tid),
            EventKind::Jbd2Commit {
                phase,
                dev,
                transaction,
            } => {
                self.contexts
                    .jbd2_commit(tid, now, *phase, *dev, *transaction);
                if *phase == CommitPhase::End {
                    self.journals.commit_end(*dev, *transaction);
                }
            }
            EventKind::Jbd2HandleStart { dev, .. } => {
                let stack = self.intents.stack_of(ev);
                // A handle started by ext4's writepages (delayed allocation at writeback, by
                // a flusher, a sync or another task's fsync) is the pages' dirtier's, when
                // the file has one ("Journal IO", apportioning).
                let role = match self.writeback_dirtier(tid) {
                    Some(role) => role,
                    None => self
                        .roles
                        .role_in(&mut self.tables.roles, ev.pid, ev.tid, ev.cgroup),
                };
                self.journals
                    .handle_start(tid, *dev, Dirtier { role, stack }, now);
            }
            EventKind::Jbd2HandleStats {
                dev,
                tid: txn,
                dirtied_blocks,
                ..
            } => self
                .journals
                .handle_stats(tid, *dev, *txn, *dirtied_blocks, now),

            // ---- block layer ----
            EventKind::BioQueue {
                dev,
                sector,
                nr_sector,
                rwbs,
            } => self.on_bio_queue(ev, *dev, *sector, *nr_sector, *rwbs),
            EventKind::BioRemap {
                dev,
                sector,
                nr_sector,
                old_dev,
                old_sector,
                ..
            } => self.on_remap(*dev, *sector, *nr_sector, *old_dev, *old_sector),
            EventKind::RqIssue {
                dev,
                sector,
                nr_sector,
                rwbs,
                ..
            } => self.on_issue(ev.time, *dev, *sector, *nr_sector, *rwbs),
            EventKind::RqRequeue { dev, sector, .. } => self.on_requeue(*dev, *sector),
            EventKind::RqComplete {
                dev,
                sector,
                nr_sector,
                error,
                rwbs,
            } => self.on_complete(ev.time, *dev, *sector, *nr_sector, *error, *rwbs),
            EventKind::BioComplete {
                dev,
                sector,
                nr_sector,
                error,
                rwbs,
            } => self.on_bio_complete(ev.time, *dev, *sector, *nr_sector, *error, *rwbs),

            // ---- tasks ----
            EventKind::Comm {
                pid,
                tid,
                comm,
                exec,
            } => {
                self.intents.spaces.on_event(ev);
                self.roles
                    .on_comm(&mut self.tables.roles, *pid, *tid, comm, *exec)
            }
            EventKind::Mmap { .. } => self.intents.spaces.on_event(ev),
            EventKind::SchedExec { pid, filename, .. } => {
                self.roles
                    .on_sched_exec(&mut self.tables.roles, *pid, filename)
            }
            EventKind::Fork { pid, tid, ptid, .. } => {
                self.intents.spaces.on_event(ev);
                self.roles.on_perf_fork(*pid, *tid, *ptid)
            }
            EventKind::SchedFork {
                child_pid,
                child_comm,
                ..
            } => self.roles.on_fork(
                *child_pid,
                *child_pid,
                Some(child_comm.clone()),
                false,
                ev.tid,
            ),
            EventKind::Exit { tid, .. } => {
                self.intents.spaces.on_event(ev);
                self.on_exit(ev.time, *tid)
            }
            EventKind::SchedExit { pid, .. } => self.on_exit(ev.time, *pid),

            EventKind::Lost { lost } => self.losses.lost(&mut self.summary, ev.cpu, ev.time, *lost),
            _ => {}
        }
    }

    // ------------------------------------------------------------------ time

    /// Follows the trace's time: counts events out of order, sweeps stale state every
    /// [`SWEEP_INTERVAL_NS`], and notes each CPU's last record (where its next loss starts).
    #[inline]
    fn clock(&mut self, ev: &Event) {
        if ev.time < self.last_time {
            self.summary.out_of_order_events += 1;
        } else {
            self.last_time = ev.time;
            if ev.time >= self.next_sweep {
                if self.next_sweep != 0 {
                    self.sweep(ev.time);
                }
                self.next_sweep = ev.time.saturating_add(SWEEP_INTERVAL_NS);
            }
        }
        self.losses
            .saw(ev.cpu, ev.time, matches!(ev.kind, EventKind::Lost { .. }));
    }

    /// Charges bios queued and requests issued too long ago to the lost intent (their
    /// issue or completion was not recorded), with the context they had, so memory stays
    /// bounded and no byte goes uncounted; forgets stale dirty state, thread maps and
    /// exited tasks.
    fn sweep(&mut self, now: u64) {
        let stale = self.requests.sweep(now, &mut self.summary);
        self.dirty.sweep(now);
        self.layers.sweep(now);
        self.btrfs.sweep(now);
        self.finishing.retain(|_, v| {
            v.retain(|e| now.saturating_sub(e.t) <= FINISHING_TTL_NS);
            !v.is_empty()
        });
        self.contexts.sweep(now);
        self.journals.sweep(now);
        self.roles.prune(now);
        for (disk, parts, rwbs, at) in stale {
            self.emit_lost(disk, parts, rwbs, at);
        }
    }

    /// `btrfs_ordered_extent_remove` on `tid` of the extent at logical bytes `[start, start +
    /// disk_len)` of filesystem `fsid`: the tree blocks `tid` first dirtied while finishing
    /// it, still dirty, become the extent's data dirtier's, with the worker's stack
    /// (docs/attribution.md, "btrfs").
    fn finished(&mut self, tid: u32, fsid: u128, start: u64, disk_len: u64, now: u64) {
        let held = self.finishing.remove(&tid).unwrap_or_default();
        let data = self.btrfs.data_dirtier(fsid, start, disk_len);
        // The extent's item and reference, which the commit adds to the extent tree, count
        // in the transaction as one tree block of its data's dirtier (with the stack that
        // dirtied the data): the transaction the worker changed the trees in, if it was
        // the first to dirty a block, else the running one.
        if let Some((who, sb)) = data {
            if let Some(txn) = held.iter().find_map(|f| f.txn).or(self.btrfs.txn_now(sb)) {
                let pages = self.btrfs.node_pages(sb, self.dirty.page_size());
                self.journals.add_blocks(sb, txn, Some(who), pages, now);
            }
        }
        for f in held {
            let d = f.owner;
            let to = match data {
                Some((w, _)) => Dirtier {
                    role: w.role,
                    stack: d.stack,
                },
                None => d,
            };
            let moved = data.is_some()
                && self
                    .dirty
                    .reown_folio(f.bdi, crate::btrfs::BTREE_INO, f.index, (d, f.t), to);
            // The block counts in its transaction for whoever it is now.
            if let Some(txn) = f.txn {
                let who = if moved { to } else { d };
                self.journals
                    .add_blocks(f.bdi, txn, Some(who), f.pages, now);
            }
        }
    }

    /// A btrfs tree block (`pages` pages of the btree inode of the filesystem whose
    /// superblock device is `sb_dev`) first dirtied by `owner`: it counts in the
    /// filesystem's running transaction as `owner`'s blocks, for the division of the
    /// transaction's commit; dirtied by the commit itself, it notes the transaction being
    /// committed; dirtied by a worker finishing an ordered extent (`held`), it is
    /// counted at the extent's removal, for the extent's dirtier. A log tree block (an
    /// fsync logging) counts in the filesystem's running log transaction instead, for the
    /// division of its log sync; a log sync's own block ends that log transaction
    /// (docs/attribution.md, "btrfs"). Returns the transaction it was dirtied in.
    fn tree_block_dirtied(
        &mut self,
        sb_dev: Dev,
        owner: Dirtier,
        pages: u64,
        held: bool,
        now: u64,
    ) -> Option<u32> {
        let flags = self.intents.flags(owner.stack);
        let commit = flags & STACK_BTRFS_COMMIT != 0;
        let (txn, forget) = self.btrfs.txn_dirtied(sb_dev, commit)?;
        if let Some(old) = forget {
            self.journals.commit_end(sb_dev, old);
        }
        if commit || held {
            return Some(txn);
        }
        if flags & STACK_BTRFS_LOG_SYNC != 0 {
            // The log sync's own block (the log root tree's): its log transaction ends.
            self.btrfs.log_sync_dirtied(sb_dev);
        } else if flags & STACK_BTRFS_LOG != 0 {
            // A log tree block: it weighs in the log sync that writes it, not the commit
            // (the commit drops the log trees).
            if let Some((log, forget)) = self.btrfs.log_block_dirtied(sb_dev) {
                if let Some(old) = forget {
                    self.journals.commit_end(sb_dev, old);
                }
                self.journals
                    .add_blocks(sb_dev, log, Some(owner), pages, now);
            }
        } else {
            self.journals
                .add_blocks(sb_dev, txn, Some(owner), pages, now);
        }
        Some(txn)
    }

    /// A writeback pass over inode `ino` of `bdi` by thread `tid`, at its start or end: on a
    /// btrfs, its writeback reason for the compressed extents btrfs's workers make of the
    /// file next ([`crate::btrfs::Btrfs::inode_writeback`]).
    fn btrfs_pass(&mut self, tid: u32, bdi: Dev, ino: u64, now: u64) {
        if self.btrfs.is_empty() {
            return;
        }
        let reason = self.contexts.reason(tid);
        if reason != crate::contexts::NO_REASON {
            let sb = self.fs_bdi(bdi);
            self.btrfs.inode_writeback(sb, ino, reason, now);
        }
    }

    /// The device a writeback event's bdi stands for: a btrfs filesystem's superblock device
    /// for its bdi `btrfs-N` (the key its inodes' page-cache events use), else the bdi.
    #[inline]
    fn fs_bdi(&self, bdi: Dev) -> Dev {
        if bdi >> 20 == ioblame_decode::event::BDI_SEQ_MAJOR {
            self.btrfs.sb_dev_of_bdi(bdi & 0xfffff).unwrap_or(bdi)
        } else {
            bdi
        }
    }

    // ------------------------------------------------------------------ tasks

    /// The exit of `tid`: its context goes; the task is forgotten after a grace period.
    fn on_exit(&mut self, time: u64, tid: u32) {
        self.roles.on_exit(time, tid);
        self.contexts.remove(tid);
        self.layers.remove_thread(tid);
        self.write_ranges.remove(&tid);
        self.folio_stacks.remove(&tid);
        self.finishing.remove(&tid);
        self.journals.remove_thread(tid);
        // A reused thread id must not inherit the dead thread's stacks.
        if let Some(m) = self.buffer_stacks.as_mut() {
            m.remove(&tid);
        }
        if let Some(m) = self.sampled_stacks.as_mut() {
            m.remove(&(tid, true));
            m.remove(&(tid, false));
        }
        self.unsampled.remove(&(tid, true));
        self.unsampled.remove(&(tid, false));
        if let Some(v) = self.stackless_buffers.remove(&tid) {
            self.stackless_waiting -= v.len();
        }
    }

    /// `writeback_start` and `writeback_written` bracket writeback work on the flusher.
    fn on_writeback_work(&mut self, ev: &Event, phase: WorkPhase, reason: u32, bdi: Dev) {
        match phase {
            WorkPhase::Start => {
                self.contexts
                    .writeback_start(ev.tid, self.last_time, reason);
                self.roles.flusher_name(ev.pid, ev.tid, bdi);
            }
            WorkPhase::Written => self.contexts.writeback_written(ev.tid, self.last_time),
            WorkPhase::Queue | WorkPhase::Exec => {}
        }
    }
}
