//! The streaming attribution: [`Attributor`] owns the parts of its state and hands each
//! event to the part it concerns (see docs/attribution.md, "Where the code lives"):
//! * [`Roles`]: tasks (forks, comm changes, execs, exits) and the roles they act as;
//! * [`Intents`]: stacks interned and classified, intents and acts numbered;
//! * [`Dirty`]: dirty folios, buffers and inodes with their dirtiers;
//! * [`Contexts`]: per thread, the brackets it is in and the sector->file maps it emitted;
//! * [`Requests`]: bios queued and requests in flight, per disk;
//! * [`Charging`]: the rules that charge a queued bio's sectors ([`charge_bio`]) and the
//!   IOs a completed request makes;
//! * [`Losses`] and the [`Summary`]: lost records, totals and anomalies.
//!
//! An event that links two parts (a page dirtied: the role and stack of the dirtier into
//! the dirty state) is handled here, in a few named steps.

use ioblame_decode::{CommitPhase, Dev, Event, EventKind, Rwbs, WorkPhase, XfsFileOp};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::charge::{Charge, Frag, Parts};
use crate::charging::{charge_bio, Bio, Books, Charging, Done};
use crate::context::{Context, Devices, STACK_LOOP};
use crate::contexts::{Contexts, NO_TXN};
use crate::dirty::{BhEnt, Dirtier, Dirty, BH_SENTINEL};
use crate::intents::{Intents, StackId};
use crate::interval::NO_OFF;
use crate::journal::Journals;
use crate::layers::Layers;
use crate::model::*;
use crate::requests::Requests;
use crate::roles::Roles;
use crate::summary::{Losses, Summary};

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
    /// Entries in `stackless_buffers`, over all threads (bounded by
    /// [`STACKLESS_WAITING_MAX`]).
    stackless_waiting: usize,
    /// With [`Context::stacks_sampled`]: per (thread, dirtying event), the stack last
    /// sampled; `None` otherwise.
    sampled_stacks: Option<SampledStacks>,
    /// With [`Context::stacks_sampled`]: per (thread, dirtying event) not sampled yet, the
    /// files it dirtied without a stack, with the role: its first sample's stack is given to
    /// what of them is still dirty.
    unsampled: FxHashMap<(u32, bool), Vec<Unsampled>>,
    /// With [`Attributor::log_dirtied`]: what was dirtied since the last
    /// [`Attributor::drain_dirtied_into`]; `None` otherwise.
    dirtied: Option<Vec<Dirtied>>,
    /// With [`Attributor::log_dirtied`]: per thread, its last folio dirtied (see
    /// [`Attributor::log_dirty_buffer`]).
    last_folio: FxHashMap<u32, LastFolio>,
    /// Per thread, its last buffered write's range (`xfs_file_buffered_write`,
    /// `ext4_da_write_begin`): the folio `(bdi, ino)`, pages `[a, b)`, when.
    write_ranges: FxHashMap<u32, ((Dev, u64), u64, u64, u64)>,
    /// Per thread, the stack of its last folio dirtied (a write range has none).
    folio_stacks: FxHashMap<u32, StackId>,
}

/// A thread's last folio dirtied, for the dirty buffers that follow it.
#[derive(Debug, Clone, Copy)]
struct LastFolio {
    ino: u64,
    time: u64,
    /// Its record's position in the dirtied list, while there.
    at: Option<usize>,
}

/// Something a role dirtied (a folio or a buffer made dirty), as a live view counts the
/// bytes dirtied per second ([`Attributor::log_dirtied`]). Not an act yet: its IO, and the
/// writeback reason that completes its intent, come later, and are charged to the same role,
/// stack and file when it is written (a folio dirtied again before its writeback is not
/// dirtied anew).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dirtied {
    /// The role charged with it.
    pub role: RoleId,
    /// Its stack when it dirtied ([`Attributor::stack_frames`]).
    pub stack: u32,
    /// How its IO will be linked back (page, buffer, or through the inode's dirtier).
    pub via: Via,
    /// The device the kernel named: a folio's backing device (the disk of a filesystem on a
    /// partition), a buffer's disk.
    pub dev: Dev,
    /// The inode, 0 when unknown (a buffer of no known file).
    pub ino: u64,
    /// Bytes made dirty: the folio's (its order as the page cache told it) or the buffer's.
    pub bytes: u64,
    /// When (ns, the trace's clock).
    pub time: u64,
}

/// A file (`bdi`, `ino`) a role dirtied without a stack before its thread's first sample.
type Unsampled = (Dev, u64, RoleId);

/// Per (thread, whether a folio's or an inode's dirty event), the stack last sampled.
type SampledStacks = FxHashMap<(u32, bool), Arc<[u64]>>;

/// Threads whose last dirty-buffer stack is remembered (then the map starts over).
const BUFFER_STACKS_MAX: usize = 1 << 16;
/// A thread's write range names the folios it dirties this long after (ns): one write
/// call's copy.
const WRITE_RANGE_NS: u64 = 1_000_000_000;

/// Stackless dirty buffers remembered per thread until it has a stack to give them.
const STACKLESS_PER_THREAD_MAX: usize = 1 << 12;

/// Stackless dirty buffers remembered over all threads (then they are forgotten).
const STACKLESS_WAITING_MAX: usize = 1 << 16;

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
            dirtied: None,
            last_folio: FxHashMap::default(),
            write_ranges: FxHashMap::default(),
            folio_stacks: FxHashMap::default(),
        }
    }

    /// Keeps what is dirtied from now on, for [`Attributor::drain_dirtied_into`] (off by
    /// default: an offline analysis has no use for it). It changes nothing else.
    pub fn log_dirtied(&mut self) {
        self.dirtied.get_or_insert_with(Vec::new);
    }

    /// Moves what was dirtied since the last call into `out` (nothing unless
    /// [`Attributor::log_dirtied`]): all of it at the end of the events (`all`), otherwise
    /// all but the last [`ioblame_decode::BUFFER_FOLIO_MAX_GAP_NS`] before the latest event
    /// (a folio's record may yet give way to its buffers', [`Attributor::log_dirty_buffer`]).
    pub fn drain_dirtied_into(&mut self, out: &mut Vec<Dirtied>, all: bool) {
        let Some(d) = &mut self.dirtied else {
            return;
        };
        let keep_from = if all {
            u64::MAX
        } else {
            self.last_time
                .saturating_sub(ioblame_decode::BUFFER_FOLIO_MAX_GAP_NS)
        };
        let n = d.partition_point(|x| x.time < keep_from);
        out.extend(d.drain(..n).filter(|x| x.bytes > 0));
        for f in self.last_folio.values_mut() {
            f.at = f.at.and_then(|i| i.checked_sub(n));
        }
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
            EventKind::DirtyFolio { bdi, ino, index } => self.dirty.prefetch_folio(bdi, ino, index),
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
        if self.sampled_stacks.is_some() {
            if let Some(with) = self.with_sampled_stack(ev) {
                return self.push_event(&with);
            }
        }
        self.push_event(ev)
    }

    /// With sampled stacks: a folio or inode dirty event without a stack, given the stack
    /// last sampled on its thread for that event (`None`: `ev` as it is). Each sampled
    /// stack is remembered; a thread's first one is also given to what it dirtied before
    /// it, without a stack, that is still dirty (as a thread's first stack is given to its
    /// stackless buffers): one intent per thread and path, not one more for the events
    /// before the first sample (the single-dirtier rule needs a file's dirtier to be one).
    fn with_sampled_stack(&mut self, ev: &Event) -> Option<Event> {
        let (folio, bdi, ino) = match ev.kind {
            EventKind::DirtyFolio { bdi, ino, .. } => (true, bdi, ino),
            EventKind::MarkInodeDirty { bdi, ino, .. } => (false, bdi, ino),
            _ => return None,
        };
        let map = self.sampled_stacks.as_mut()?;
        match &ev.stack {
            Some(s) => {
                if map.len() >= BUFFER_STACKS_MAX {
                    map.clear();
                }
                map.insert((ev.tid, folio), s.clone());
                if let Some(waiting) = self.unsampled.remove(&(ev.tid, folio)) {
                    let s = s.clone();
                    self.give_first_sample(folio, &s, ev.pid, waiting);
                }
                None
            }
            None => match map.get(&(ev.tid, folio)) {
                Some(s) => {
                    let mut with = ev.clone();
                    with.stack = Some(s.clone());
                    Some(with)
                }
                None => {
                    self.summary.dirtiers_without_sample += 1;
                    if self.unsampled.len() >= BUFFER_STACKS_MAX {
                        // Bounded: those waiting keep no stack (they stay counted).
                        self.unsampled.clear();
                    }
                    let role =
                        self.roles
                            .role_in(&mut self.tables.roles, ev.pid, ev.tid, ev.cgroup);
                    let v = self.unsampled.entry((ev.tid, folio)).or_default();
                    if v.len() < STACKLESS_PER_THREAD_MAX
                        && !v.iter().any(|w| w.0 == bdi && w.1 == ino && w.2 == role)
                    {
                        v.push((bdi, ino, role));
                    }
                    None
                }
            },
        }
    }

    /// A thread's first sampled `stack` for its folio (`folio`) or inode dirty events,
    /// given to the folios or inodes of `waiting` it dirtied before without one, where still
    /// its; those are no longer counted as without a sample.
    fn give_first_sample(
        &mut self,
        folio: bool,
        stack: &Arc<[u64]>,
        pid: u32,
        waiting: Vec<Unsampled>,
    ) {
        let to_stack = self.intents.stack(Some(stack), pid);
        let empty = self.intents.stack(None, pid);
        for (bdi, ino, role) in waiting {
            let from = Dirtier { role, stack: empty };
            let to = Dirtier {
                role,
                stack: to_stack,
            };
            let n = if folio {
                self.dirty.reown_folios(bdi, ino, from, to)
            } else {
                u64::from(self.dirty.reown_inode(bdi, ino, from, to))
            };
            self.summary.dirtiers_without_sample =
                self.summary.dirtiers_without_sample.saturating_sub(n);
        }
    }

    /// [`Attributor::push`] once the event has its stack.
    fn push_event(&mut self, ev: &Event) {
        self.clock(ev);
        let now = self.last_time;
        let tid = ev.tid;
        match &ev.kind {
            // ---- dirtiers ----
            EventKind::DirtyFolio { bdi, ino, index } => {
                self.on_dirty_folio(ev, *bdi, *ino, *index)
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
                self.contexts
                    .single_inode_start(tid, now, (*bdi, *ino), ev.time)
            }
            EventKind::SingleInode {
                bdi, ino, state, ..
            } => self.on_single_inode(tid, *bdi, *ino, *state),
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
        self.contexts.sweep(now);
        self.journals.sweep(now);
        self.roles.prune(now);
        for (disk, parts, rwbs, at) in stale {
            self.emit_lost(disk, parts, rwbs, at);
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

    // ------------------------------------------------------------------ dirtiers

    /// The owner to record for something dirtied now by `ev`'s task: inside a write_inode
    /// bracket, the inode's dirtier (with the inode).
    fn dirtier_now(&mut self, ev: &Event, plain: Via) -> (Dirtier, Via, u64) {
        if let Some(wi) = self.contexts.write_inode(ev.tid) {
            if let Some(d) = self.dirty.inode_dirtier(wi) {
                return (d, Via::Inode, wi.1);
            }
        }
        let role = self
            .roles
            .role_in(&mut self.tables.roles, ev.pid, ev.tid, ev.cgroup);
        let stack = self.intents.stack_of(ev);
        (Dirtier { role, stack }, plain, 0)
    }

    /// `writeback_dirty_folio`: the folio's first dirtier since it was last written.
    fn on_dirty_folio(&mut self, ev: &Event, bdi: Dev, ino: u64, index: u64) {
        // A buffered write: whatever direct IO the thread did is over.
        self.contexts.end_dio(ev.tid);
        let (owner, via, _) = self.dirtier_now(ev, Via::Page);
        // The thread's write range, if it is of this file and recent: a large folio's
        // pages outside it are left for another task's write to claim.
        let range = self
            .write_ranges
            .get(&ev.tid)
            .filter(|w| w.0 == (bdi, ino) && ev.time.saturating_sub(w.3) <= WRITE_RANGE_NS)
            .map(|w| (w.1, w.2));
        let bytes = match range {
            Some(r) => self
                .dirty
                .put_folio_written(bdi, ino, index, owner, via, ev.time, r),
            None => self.dirty.put_folio(bdi, ino, index, owner, via, ev.time),
        };
        if ev.stack.is_some() {
            if self.folio_stacks.len() >= BUFFER_STACKS_MAX {
                self.folio_stacks.clear();
            }
            self.folio_stacks.insert(ev.tid, owner.stack);
        }
        if !self.layers.is_empty() {
            let a = index.saturating_mul(self.dirty.page_size());
            let range = (a, a.saturating_add(bytes));
            self.layers
                .folio_dirtied(&self.requests, ev.tid, (bdi, ino), range, ev.time);
        }
        if let Some(d) = &mut self.dirtied {
            let at = Some(d.len());
            d.push(Dirtied {
                role: owner.role,
                stack: owner.stack,
                via,
                dev: bdi,
                ino,
                bytes,
                time: ev.time,
            });
            if self.last_folio.len() >= BUFFER_STACKS_MAX {
                self.last_folio.clear();
            }
            self.last_folio.insert(
                ev.tid,
                LastFolio {
                    ino,
                    time: ev.time,
                    at,
                },
            );
        }
    }

    /// A buffered write's range (`xfs_file_buffered_write`, `ext4_da_write_begin`; bytes
    /// `[pos, pos + len)` of `(s_dev, ino)`): remembered for the folios the thread dirties
    /// next, and the pages of large folios another task dirtied first, outside its own write,
    /// that this one writes become this task's (docs/attribution.md, "Large folios").
    fn on_write_range(&mut self, ev: &Event, s_dev: Dev, ino: u64, pos: u64, len: u64) {
        if len == 0 {
            return;
        }
        let page = self.dirty.page_size();
        let bdi = self.devices.folio_disk(s_dev, ino);
        let (a, b) = (pos / page, pos.saturating_add(len).div_ceil(page));
        if self.write_ranges.len() >= BUFFER_STACKS_MAX {
            self.write_ranges.clear();
        }
        self.write_ranges
            .insert(ev.tid, ((bdi, ino), a, b, ev.time));
        if !self.dirty.has_folios(bdi, ino) {
            return;
        }
        let role = self
            .roles
            .role_in(&mut self.tables.roles, ev.pid, ev.tid, ev.cgroup);
        let stack = match self.folio_stacks.get(&ev.tid) {
            Some(&s) => s,
            None => self.intents.stack_of(ev),
        };
        let pages = self
            .dirty
            .claim(bdi, ino, (a, b), Dirtier { role, stack }, Via::Page);
        self.summary.folio_pages_claimed += pages;
    }

    /// With [`Attributor::log_dirtied`]: a dirty buffer's record. A buffer its thread
    /// dirtied right after a folio ([`ioblame_decode::BUFFER_FOLIO_MAX_GAP_NS`], the rule
    /// that gives it the folio's stack) is part of that folio, dirtied through its buffers
    /// (ext4 writing over allocated blocks): it is of the folio's file, and the bytes are
    /// counted by buffer (exact where the folio's size is not known), the folio's record
    /// dropped. Delayed-allocation buffers are not traced: their folio's record stands.
    fn log_dirty_buffer(&mut self, tid: u32, mut rec: Dirtied) {
        let Some(d) = &mut self.dirtied else {
            return;
        };
        if let Some(f) = self.last_folio.get_mut(&tid) {
            if rec.time.saturating_sub(f.time) <= ioblame_decode::BUFFER_FOLIO_MAX_GAP_NS {
                if rec.ino == 0 {
                    rec.ino = f.ino;
                }
                if let Some(x) = f.at.take().and_then(|i| d.get_mut(i)) {
                    x.bytes = 0;
                }
                // The next buffers of the same write follow this one.
                f.time = rec.time;
            }
        }
        d.push(rec);
    }

    /// `block_dirty_buffer`: the buffer's first dirtier until it is written.
    fn on_dirty_buffer(&mut self, ev: &Event, dev: Dev, blocknr: u64, size: u64) {
        if !self.devices.learn_block_size(dev, size) || blocknr >= BH_SENTINEL {
            return;
        }
        let carried = self.buffer_stack(ev);
        let info = self.devices.info(dev);
        let a = info.buffer_sector(blocknr, size);
        let b = a.saturating_add(size / 512);
        if self.dirty.buffer_dirty(info.disk, a, b, ev.time) {
            // Dirtied again before its writeback: nothing changes (but where the thread is
            // in the loop device's backing file it writes).
            if !self.layers.is_empty() {
                let r = &self.requests;
                self.layers
                    .buffer_dirtied(r, ev.tid, info.disk, (a, b), ev.time, false, false);
            }
            return;
        }
        let (mut owner, via, ino) = self.dirtier_now(ev, Via::Buffer);
        let mut stackless = false;
        if via == Via::Buffer && ev.stack.is_none() && self.buffer_stacks.is_some() {
            match carried {
                Some(s) => owner.stack = s,
                None => stackless = true,
            }
        }
        let ent = BhEnt {
            owner,
            via,
            ino,
            t: ev.time,
        };
        self.dirty.put_buffer(info.disk, a, b, ent);
        if !self.layers.is_empty() {
            let loop_stack = self.intents.flags(owner.stack) & STACK_LOOP != 0;
            let r = &self.requests;
            self.layers
                .buffer_dirtied(r, ev.tid, info.disk, (a, b), ev.time, true, loop_stack);
        }
        if self.dirtied.is_some() {
            let rec = Dirtied {
                role: owner.role,
                stack: owner.stack,
                via,
                dev: info.disk,
                ino,
                bytes: (b - a) * 512,
                time: ev.time,
            };
            self.log_dirty_buffer(ev.tid, rec);
        }
        if stackless {
            self.summary.buffers_without_stack += 1;
            if self.stackless_waiting >= STACKLESS_WAITING_MAX {
                // Bounded: the oldest waiting buffers keep no stack (they stay counted).
                self.stackless_buffers.clear();
                self.stackless_waiting = 0;
            }
            let v = self.stackless_buffers.entry(ev.tid).or_default();
            if v.len() < STACKLESS_PER_THREAD_MAX {
                v.push((info.disk, a, owner.role));
                self.stackless_waiting += 1;
            }
        }
    }

    /// With the dirty buffers' stacks left out by the recorder: the stack of `ev` is
    /// remembered as its thread's when it has one (its own, or the one the decoder gave it
    /// from its folio's dirty event), and without one the thread's is returned.
    fn buffer_stack(&mut self, ev: &Event) -> Option<StackId> {
        let map = self.buffer_stacks.as_mut()?;
        match &ev.stack {
            Some(s) => {
                let id = self.intents.stack(Some(s), ev.pid);
                if map.len() >= BUFFER_STACKS_MAX {
                    map.clear();
                }
                map.insert(ev.tid, id);
                // The thread's earlier buffers that had none take it, if still dirty.
                if let Some(waiting) = self.stackless_buffers.remove(&ev.tid) {
                    self.stackless_waiting -= waiting.len();
                    let empty = self.intents.stack(None, 0);
                    for (disk, a, role) in waiting {
                        if let Some(e) = self.dirty.buffer_at_mut(disk, a) {
                            if e.owner.role == role
                                && e.owner.stack == empty
                                && e.via == Via::Buffer
                            {
                                e.owner.stack = id;
                                self.summary.buffers_without_stack =
                                    self.summary.buffers_without_stack.saturating_sub(1);
                            }
                        }
                    }
                }
                None
            }
            None => map.get(&ev.tid).copied(),
        }
    }

    /// `writeback_mark_inode_dirty`: the inode's first dirtier, unless a kworker.
    fn on_mark_inode_dirty(&mut self, ev: &Event, bdi: Dev, ino: u64, flags: u64) {
        if !self.dirty.wants_inode_dirtier(bdi, ino, flags) {
            return;
        }
        let role = self
            .roles
            .role_in(&mut self.tables.roles, ev.pid, ev.tid, ev.cgroup);
        if !self.tables.roles[role.index()].comm.starts_with("kworker") {
            let stack = self.intents.stack_of(ev);
            self.dirty
                .put_inode(bdi, ino, Dirtier { role, stack }, ev.time);
        }
    }

    /// The role of the only dirtier of the file thread `tid`'s ext4 writepages bracket is
    /// writing, if it is in one and the file has exactly one dirtier (rule 5's test).
    fn writeback_dirtier(&self, tid: u32) -> Option<RoleId> {
        let (dev, ino) = self.contexts.ext4_writepages_inode(tid)?;
        let disk = self.devices.info(dev).disk;
        self.dirty.only_dirtier(disk, ino).map(|(d, _)| d.role)
    }

    /// `writeback_single_inode`: the bracket ends; what the inode's state says is clean
    /// now is forgotten.
    fn on_single_inode(&mut self, tid: u32, bdi: Dev, ino: u64, state: u64) {
        let began = self
            .contexts
            .single_inode_end(tid, self.last_time, (bdi, ino));
        if let Some(t) = began {
            self.dirty.left_writeback(bdi, ino, state, t);
        }
    }

    // ------------------------------------------------------------------ bios

    /// `block_bio_queue`: each sector of the bio gets its charge (see [`charge_bio`]) and
    /// waits, queued, for the request that takes it.
    fn on_bio_queue(&mut self, ev: &Event, dev: Dev, sector: u64, nr: u32, rwbs: Rwbs) {
        if nr == 0 {
            self.summary.empty_flush_bios += 1;
            return;
        }
        // A partition's bio carries its disk; its remap named the partition.
        let dev = self.requests.bio_dev(dev, sector);
        let info = self.devices.info(dev);
        let seq = self.requests.next_seq();
        // A bio remapped from a stacked device inherits the upper bio's charges.
        if self
            .requests
            .queue_remapped(info.disk, sector, seq, ev.time)
        {
            return;
        }
        let (s, e) = (sector, sector.saturating_add(nr as u64));
        let issuer = self
            .roles
            .role_in(&mut self.tables.roles, ev.pid, ev.tid, ev.cgroup);
        let stack = self.intents.stack_of(ev);
        // ext4 maps waiting for their filesystem's block size (no mount table: perf.data).
        self.contexts
            .size_ext4_maps(&mut self.devices, ev.tid, ev.time, info.disk, s);
        // The thread's context, and the maps it emitted for these sectors (consumed).
        let mut maps = Vec::new();
        let ctx = self.contexts.for_bio(ev.tid, info.disk, s, e, &mut maps);
        let bio = Bio {
            dev,
            info,
            s,
            e,
            rwbs,
            time: ev.time,
            issuer,
            stack,
            flags: self.intents.flags(stack),
            ctx,
            issuer_only: self.charging.issuer_only,
        };
        if bio.is_direct() && ctx.dio.is_some() {
            self.contexts.dio_queued(ev.tid, (nr as u64) * 512);
        }
        let mut paint = charge_bio(&mut self.dirty, &self.devices, &bio, &maps);
        if ctx.txn != NO_TXN {
            // A commit's journal IO, divided among its transaction's handles.
            self.journals.apportion(ctx.txn_dev, ctx.txn, &mut paint);
        }
        if !self.layers.is_empty() {
            self.summary.lower_unlinked_bytes +=
                self.layers.apply(&self.requests, info.disk, &mut paint);
            // A dm target that resubmits without a remap (dm-crypt before 5.16).
            let r = &self.requests;
            self.layers
                .link_dm(r, info.disk, (s, e), ev.time, &mut paint);
        }
        if ctx.iomap_wp && maps.is_empty() && rwbs.is_write() {
            // iomap writeback with no map (5.10): what no rule linked is a kernel gap.
            self.summary.unmapped_writeback_bytes += paint
                .segs
                .iter()
                .filter(|(_, _, f)| f.c.via == Via::Unknown)
                .map(|(a, b, _)| (b - a) * 512)
                .sum::<u64>();
        }
        self.requests.queue(info.disk, seq, paint.segs);
    }

    /// `block_bio_remap`: a partition's remap tells its start and names the partition of
    /// the bio queued next; a stacked device's hands the upper bio's charges to the lower
    /// one ([`Requests::remap`]).
    fn on_remap(&mut self, dev: Dev, sector: u64, nr: u32, old_dev: Dev, old_sector: u64) {
        let r = &mut self.requests;
        let contradicted = r.remap(&mut self.devices, (dev, sector), nr, (old_dev, old_sector));
        if let Some(old) = contradicted {
            let start = sector - old_sector;
            self.summary.warn(|| {
                format!(
                    "device {}:{}: partition start {start} from remap differs from metadata {old}",
                    old_dev >> 20,
                    old_dev & 0xfffff
                )
            });
        }
    }

    // ------------------------------------------------------------------ requests

    /// `block_rq_issue`: the request takes the queued sectors it covers; those no bio was
    /// seen for are charged to the lost intent.
    fn on_issue(&mut self, time: u64, dev: Dev, sector: u64, nr: u32, rwbs: Rwbs) {
        let disk = self.devices.info(dev).disk;
        let Some(mut paint) = self
            .requests
            .issue(&mut self.summary, disk, time, sector, nr)
        else {
            return;
        };
        let e = sector.saturating_add(nr as u64);
        if !paint.covers(sector, e) {
            // Bios queued before the capture or lost: charged to the lost intent.
            let c = self.unmatched_charge(dev, time, rwbs);
            paint.fill(sector, e, &Frag { c, foff: NO_OFF }, None);
        }
        self.requests
            .start(disk, sector, nr, time, rwbs, paint.segs);
    }

    /// `block_rq_requeue`: counted when a request in flight is there.
    fn on_requeue(&mut self, dev: Dev, sector: u64) {
        let disk = self.devices.info(dev).disk;
        if self.requests.requeued(disk, sector) {
            self.summary.requeues += 1;
        }
    }

    /// `block_rq_complete`: the IOs of the completed part of the request.
    fn on_complete(&mut self, time: u64, dev: Dev, sector: u64, nr: u32, error: i32, rwbs: Rwbs) {
        let disk = self.devices.info(dev).disk;
        if nr == 0 {
            if rwbs.has(Rwbs::FLUSH) && self.requests.flush_completed(disk) {
                self.summary.flushes_completed += 1;
            } else {
                self.summary.ignored_zero_completions += 1;
            }
            return;
        }
        if error != 0 {
            self.summary.io_errors += 1;
        }
        let n = nr as u64;
        let Some(done) = self.requests.complete(disk, sector, n) else {
            self.emit_unmatched(dev, disk, (sector, sector.saturating_add(n)), time, rwbs);
            return;
        };
        self.emit(Done {
            disk,
            parts: &done.parts,
            rwbs: done.rwbs,
            issue: done.issue,
            complete: time,
            swept: false,
        });
        if done.partial {
            self.summary.partial_completions += 1;
        }
    }

    /// `block_bio_complete` on a disk without a request layer: the IOs of the bio.
    fn on_bio_complete(
        &mut self,
        time: u64,
        dev: Dev,
        sector: u64,
        nr: u32,
        error: i32,
        rwbs: Rwbs,
    ) {
        let disk = self.devices.info(dev).disk;
        if self.requests.is_rq_based(disk) || nr == 0 {
            return;
        }
        if error != 0 {
            self.summary.io_errors += 1;
        }
        let e = sector.saturating_add(nr as u64);
        // None: a bio completed already with the bio it was chained to.
        let Some(parts) = self.requests.bio_complete(disk, sector, e) else {
            return;
        };
        if parts.is_empty() {
            self.emit_unmatched(dev, disk, (sector, e), time, rwbs);
            return;
        }
        // No request layer: the device saw the bio when it was queued.
        let issue = parts.iter().map(|p| p.2.c.qtime).min().unwrap_or(time);
        self.emit(Done {
            disk,
            parts: &parts,
            rwbs,
            issue,
            complete: time,
            swept: false,
        });
    }

    // ------------------------------------------------------------------ charging

    /// The charge of IO that matches nothing queued or issued (see [`Charge::unmatched`]).
    fn unmatched_charge(&mut self, dev: Dev, time: u64, rwbs: Rwbs) -> Charge {
        let unknown = self.roles.unknown(&mut self.tables.roles);
        Charge::unmatched(unknown, dev, time, rwbs)
    }

    /// A completion of sectors `[a, b)` that matches nothing queued or issued: one IO
    /// charged to the lost intent, with no file, issuer or reason known.
    fn emit_unmatched(&mut self, dev: Dev, disk: Dev, (a, b): (u64, u64), time: u64, rwbs: Rwbs) {
        self.summary.unmatched_completions += 1;
        let c = self.unmatched_charge(dev, time, rwbs);
        self.emit(Done {
            disk,
            parts: &[(a, b, Frag { c, foff: NO_OFF })],
            rwbs,
            issue: time,
            complete: time,
            swept: false,
        });
    }

    /// Emits parts that will never complete as IOs charged to the lost intent, with the
    /// file, issuer and reason they were queued with (no device time, no seek).
    fn emit_lost(&mut self, disk: Dev, mut parts: Parts, rwbs: Rwbs, at: u64) {
        let unknown = self.roles.unknown(&mut self.tables.roles);
        for p in &mut parts {
            p.2.c = p.2.c.lost(unknown);
        }
        self.emit(Done {
            disk,
            parts: &parts,
            rwbs,
            issue: at,
            complete: at,
            swept: true,
        });
    }

    /// Emits the IOs of (the completed part of) one request: one per act.
    fn emit(&mut self, done: Done<'_>) {
        let books = Books {
            tables: &mut self.tables,
            roles: &mut self.roles,
            intents: &mut self.intents,
            summary: &mut self.summary,
            devices: &self.devices,
            losses: &self.losses,
        };
        self.charging.emit(books, done);
    }
}
