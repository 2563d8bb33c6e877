//! The dirtiers' events: a folio, a buffer or an inode made dirty is recorded in the dirty
//! state with its dirtier (the task's role and stack, or inside a `write_inode` bracket the
//! inode's dirtier); a buffered write's range lets the thread claim the pages of large
//! folios another task dirtied first; the end of a `single_inode` bracket forgets what the
//! inode's state says is clean (see docs/attribution.md, "Dirty buffers", "Dirty folios and
//! the sector maps", "Large folios").

use ioblame_decode::{Dev, Event};

use super::{Attributor, Finishing, BUFFER_STACKS_MAX};
use crate::context::{STACK_BTRFS_FINISH, STACK_LOOP};
use crate::dirtied::Dirtied;
use crate::dirty::{BhEnt, Dirtier, BH_SENTINEL};
use crate::model::{RoleId, Via};

/// A thread's write range names the folios it dirties this long after (ns): one write
/// call's copy.
const WRITE_RANGE_NS: u64 = 1_000_000_000;

/// At most this many tree blocks of one btrfs worker wait for the ordered extent it is
/// finishing (a finish changes a few leaves).
const FINISHING_MAX: usize = 4096;

impl Attributor {
    /// The owner to record for something dirtied now by `ev`'s task: inside a write_inode
    /// bracket, the inode's dirtier (with the inode).
    pub(super) fn dirtier_now(&mut self, ev: &Event, plain: Via) -> (Dirtier, Via, u64) {
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
    pub(super) fn on_dirty_folio(&mut self, ev: &Event, bdi: Dev, ino: u64, index: u64) {
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
        if ino == crate::btrfs::BTREE_INO && self.btrfs.is_sb_dev(bdi) {
            // Its own stack: a sampled one (`--stacks sampled:N`) may be of other work.
            let finishing = ev.stack.is_some()
                && !self.stack_borrowed
                && self.intents.flags(owner.stack) & STACK_BTRFS_FINISH != 0;
            let held = finishing
                && self
                    .finishing
                    .get(&ev.tid)
                    .is_none_or(|v| v.len() < FINISHING_MAX);
            let pages = bytes / self.dirty.page_size();
            let txn = self.tree_block_dirtied(bdi, owner, pages, held, ev.time);
            if held {
                self.finishing.entry(ev.tid).or_default().push(Finishing {
                    bdi,
                    index,
                    owner,
                    t: ev.time,
                    pages,
                    txn,
                });
            }
        }
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
        if self.dirtied.is_on() {
            let rec = Dirtied {
                role: owner.role,
                stack: owner.stack,
                via,
                dev: bdi,
                ino,
                pos: index.saturating_mul(self.dirty.page_size()),
                buffer: false,
                bytes,
                time: ev.time,
            };
            self.dirtied.folio(ev.tid, rec);
        }
    }

    /// A buffered write's range (`xfs_file_buffered_write`, `ext4_da_write_begin`; bytes
    /// `[pos, pos + len)` of `(s_dev, ino)`): remembered for the folios the thread dirties
    /// next, and the pages of large folios another task dirtied first, outside its own write,
    /// that this one writes become this task's (docs/attribution.md, "Large folios").
    pub(super) fn on_write_range(&mut self, ev: &Event, s_dev: Dev, ino: u64, pos: u64, len: u64) {
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

    /// `block_dirty_buffer`: the buffer's first dirtier until it is written.
    pub(super) fn on_dirty_buffer(&mut self, ev: &Event, dev: Dev, blocknr: u64, size: u64) {
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
        if self.dirtied.is_on() {
            let rec = Dirtied {
                role: owner.role,
                stack: owner.stack,
                via,
                dev: info.disk,
                ino,
                pos: a,
                buffer: true,
                bytes: (b - a) * 512,
                time: ev.time,
            };
            self.dirtied.buffer(ev.tid, rec);
        }
        if stackless {
            self.wait_for_stack(ev.tid, info.disk, a, owner.role);
        }
    }

    /// `writeback_mark_inode_dirty`: the inode's first dirtier, unless a kworker.
    pub(super) fn on_mark_inode_dirty(&mut self, ev: &Event, bdi: Dev, ino: u64, flags: u64) {
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
    pub(super) fn writeback_dirtier(&self, tid: u32) -> Option<RoleId> {
        let (dev, ino) = self.contexts.ext4_writepages_inode(tid)?;
        let disk = self.devices.info(dev).disk;
        self.dirty.only_dirtier(disk, ino).map(|(d, _)| d.role)
    }

    /// `writeback_single_inode`: the bracket ends; what the inode's state says is clean
    /// now is forgotten.
    pub(super) fn on_single_inode(&mut self, tid: u32, bdi: Dev, ino: u64, state: u64) {
        let began = self
            .contexts
            .single_inode_end(tid, self.last_time, (bdi, ino));
        if let Some(t) = began {
            self.dirty.left_writeback(bdi, ino, state, t);
        }
    }
}
