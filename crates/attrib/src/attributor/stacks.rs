//! Stacks given to the dirty events the recorder recorded without one: with the dirty
//! buffers' stacks left out ([`crate::Context::buffer_stacks_from_thread`]), a buffer takes
//! its thread's last stack; with stacks sampled ([`crate::Context::stacks_sampled`]), a
//! folio's or inode's dirty event takes its thread's last sample for that event. A thread's
//! first stack also goes to what it dirtied before it without one, where still dirty.

use ioblame_decode::{Dev, Event, EventKind};
use std::sync::Arc;

use super::{Attributor, Unsampled, BUFFER_STACKS_MAX};
use crate::dirty::Dirtier;
use crate::intents::StackId;
use crate::model::{RoleId, Via};

/// Stackless dirty buffers remembered per thread until it has a stack to give them.
const STACKLESS_PER_THREAD_MAX: usize = 1 << 12;

/// Stackless dirty buffers remembered over all threads (then they are forgotten).
const STACKLESS_WAITING_MAX: usize = 1 << 16;

impl Attributor {
    /// With sampled stacks: a folio or inode dirty event without a stack, given the stack
    /// last sampled on its thread for that event (`None`: `ev` as it is). Each sampled
    /// stack is remembered; a thread's first one is also given to what it dirtied before
    /// it, without a stack, that is still dirty (as a thread's first stack is given to its
    /// stackless buffers): one intent per thread and path, not one more for the events
    /// before the first sample (the single-dirtier rule needs a file's dirtier to be one).
    pub(super) fn with_sampled_stack(&mut self, ev: &Event) -> Option<Event> {
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
    pub(super) fn give_first_sample(
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

    /// With the dirty buffers' stacks left out by the recorder: the stack of `ev` is
    /// remembered as its thread's when it has one (its own, or the one the decoder gave it
    /// from its folio's dirty event), and without one the thread's is returned.
    pub(super) fn buffer_stack(&mut self, ev: &Event) -> Option<StackId> {
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

    /// A dirty buffer (disk, first sector) of thread `tid` recorded for `role` with no
    /// stack to give it: counted, and remembered until the thread's next stack
    /// ([`Attributor::buffer_stack`]).
    pub(super) fn wait_for_stack(&mut self, tid: u32, disk: Dev, a: u64, role: RoleId) {
        self.summary.buffers_without_stack += 1;
        if self.stackless_waiting >= STACKLESS_WAITING_MAX {
            // Bounded: the oldest waiting buffers keep no stack (they stay counted).
            self.stackless_buffers.clear();
            self.stackless_waiting = 0;
        }
        let v = self.stackless_buffers.entry(tid).or_default();
        if v.len() < STACKLESS_PER_THREAD_MAX {
            v.push((disk, a, role));
            self.stackless_waiting += 1;
        }
    }
}
