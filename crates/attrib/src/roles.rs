//! Roles: who acts. A role is a task under one name; forks, execs, renames and tid reuse
//! start new ones (see docs/attribution.md, "Roles: forks, exec, comm, flushers").
//!
//! [`Roles`] follows the tasks (forks, comm changes, execs, exits, the names kworkers take
//! for writeback) and hands out the role of the task running now, appending new roles to
//! the output table it is given.

use std::collections::VecDeque;

use ioblame_decode::Dev;
use ioblame_format::Task;
use rustc_hash::FxHashMap;

use crate::model::{Role, RoleId};

/// Exited tasks are forgotten this long after their exit (ns of trace time).
const TASK_GRACE_NS: u64 = 30_000_000_000;

/// What is known of one task (by tid).
#[derive(Debug)]
struct TaskState {
    pid: u32,
    comm: String,
    /// Its role since it last acted under its current name, if it acted.
    role: Option<RoleId>,
    generation: u32,
    /// When its exit was seen.
    exited: Option<u64>,
    /// An exec was seen and its second signal (perf COMM or `sched_process_exec`) may follow.
    fresh_exec: bool,
    /// It is the scope's root task or descends from it ([`Role::lineage`]).
    lineage: bool,
}

impl TaskState {
    /// A task not seen before, with generation `generation`.
    fn new(pid: u32, comm: String, generation: u32) -> TaskState {
        TaskState {
            pid,
            comm,
            role: None,
            generation,
            exited: None,
            fresh_exec: false,
            lineage: false,
        }
    }
}

/// The tasks of the trace and the roles they act as.
#[derive(Debug, Default)]
pub(crate) struct Roles {
    tasks: FxHashMap<u32, TaskState>,
    /// Exits in time order, for pruning `tasks`.
    exits: VecDeque<(u64, u32)>,
    /// The generation the next task of a pruned tid gets.
    next_gen: FxHashMap<u32, u32>,
    /// The `<unknown>` role, once made.
    unknown: Option<RoleId>,
    /// The last task [`Roles::role_in`] gave a role: `(pid, tid, cgroup, role)`.
    /// Consecutive events mostly come from one task; whatever changes `tasks` otherwise
    /// forgets it.
    last: Option<(u32, u32, u64, RoleId)>,
    /// The process whose tasks and descendants are the lineage ([`Role::lineage`]).
    root: Option<u32>,
}

impl Roles {
    /// The tasks alive when the capture started, none of which acted yet; the tasks of
    /// process `root` and their descendants make the lineage ([`Role::lineage`]).
    pub fn new(tasks: &[Task], root: Option<u32>) -> Roles {
        let mut r = Roles {
            root,
            ..Roles::default()
        };
        for t in tasks {
            let mut st = TaskState::new(t.pid, t.comm.clone(), 0);
            st.lineage = Some(t.pid) == root;
            r.tasks.insert(t.tid, st);
        }
        r
    }

    /// Tasks known (alive, or exited less than [`TASK_GRACE_NS`] ago).
    pub fn tasks_len(&self) -> usize {
        self.tasks.len()
    }

    /// Tids whose next generation is remembered after their task was forgotten.
    pub fn pruned_len(&self) -> usize {
        self.next_gen.len()
    }

    /// The generation a new task with `tid` gets.
    fn generation_of_new(next_gen: &FxHashMap<u32, u32>, tid: u32) -> u32 {
        next_gen.get(&tid).copied().unwrap_or(0)
    }

    /// The role of the task running `tid` (in process `pid`) now, in no known cgroup.
    #[cfg(test)]
    pub fn role_for(&mut self, roles: &mut Vec<Role>, pid: u32, tid: u32) -> RoleId {
        self.role_in(roles, pid, tid, 0)
    }

    /// The role of the task running `tid` (in process `pid`) now, in cgroup `cgroup` (0:
    /// not recorded), added to `roles` if new. A task that acts in another cgroup than its
    /// role's continues as a new role, as after a rename.
    #[inline]
    pub fn role_in(&mut self, roles: &mut Vec<Role>, pid: u32, tid: u32, cgroup: u64) -> RoleId {
        if let Some((p, t, c, r)) = self.last {
            // Nothing changed the task since: the same role, `fresh_exec` already cleared.
            if (p, t) == (pid, tid) && (c == cgroup || cgroup == 0) {
                return r;
            }
        }
        let r = self.role_for_task(roles, pid, tid, cgroup);
        self.last = Some((pid, tid, roles[r.index()].cgroup, r));
        r
    }

    fn role_for_task(&mut self, roles: &mut Vec<Role>, pid: u32, tid: u32, cgroup: u64) -> RoleId {
        let next_gen = &self.next_gen;
        let root = self.root;
        let st = self.tasks.entry(tid).or_insert_with(|| {
            let mut st = TaskState::new(
                pid,
                format!("<{tid}>"),
                Self::generation_of_new(next_gen, tid),
            );
            st.lineage = Some(pid) == root;
            st
        });
        st.fresh_exec = false;
        if st.pid != pid {
            if st.role.is_some() {
                // tid reuse we did not see: a new task.
                st.generation += 1;
                st.role = None;
                st.exited = None;
                st.lineage = Some(pid) == root;
            }
            st.pid = pid;
        }
        if let Some(r) = st.role {
            let have = &mut roles[r.index()].cgroup;
            if cgroup == 0 || *have == cgroup {
                return r;
            }
            if *have == 0 {
                // Its first events said nothing of the cgroup.
                *have = cgroup;
                return r;
            }
        }
        let id = new_role(roles, pid, tid, st.comm.clone(), st.generation);
        roles[id.index()].cgroup = cgroup;
        roles[id.index()].lineage = st.lineage;
        st.role = Some(id);
        id
    }

    /// The `<unknown>` role, what IOs no known task is charged for are charged to; added to
    /// `roles` when first needed.
    pub fn unknown(&mut self, roles: &mut Vec<Role>) -> RoleId {
        if let Some(r) = self.unknown {
            return r;
        }
        let r = new_role(roles, 0, 0, "<unknown>".to_string(), u32::MAX);
        self.unknown = Some(r);
        r
    }

    /// A perf FORK record: the child `tid` takes its parent `ptid`'s name.
    pub fn on_perf_fork(&mut self, pid: u32, tid: u32, ptid: u32) {
        let comm = self.tasks.get(&ptid).map(|t| t.comm.clone());
        self.on_fork(pid, tid, comm, true, ptid);
    }

    /// A fork of `tid` named `comm` by task `parent`: a new task, unless this fork was seen
    /// already. `exact_pid` tells whether `pid` is the child's process (perf FORK) or only
    /// its tid (`sched_process_fork`). The child is of the lineage if its parent is.
    pub fn on_fork(
        &mut self,
        pid: u32,
        tid: u32,
        comm: Option<String>,
        exact_pid: bool,
        parent: u32,
    ) {
        self.last = None;
        let comm = comm.unwrap_or_else(|| format!("<{tid}>"));
        let lineage = self.root.is_some()
            && (Some(pid) == self.root || self.tasks.get(&parent).is_some_and(|p| p.lineage));
        match self.tasks.get_mut(&tid) {
            Some(st) if st.exited.is_none() && st.role.is_none() => {
                // Same fork seen twice (perf FORK and sched_process_fork), or a tid
                // known from the start list that never acted: just refresh.
                if exact_pid {
                    st.pid = pid;
                }
                st.comm = comm;
                st.lineage |= lineage;
            }
            Some(st) => {
                st.generation += 1;
                st.pid = pid;
                st.comm = comm;
                st.role = None;
                st.exited = None;
                st.fresh_exec = false;
                st.lineage = lineage;
            }
            None => {
                let generation = Self::generation_of_new(&self.next_gen, tid);
                let mut st = TaskState::new(pid, comm, generation);
                st.lineage = lineage;
                self.tasks.insert(tid, st);
            }
        }
    }

    /// The exit of `tid` at `time`; tasks that exited long enough before are forgotten.
    pub fn on_exit(&mut self, time: u64, tid: u32) {
        self.last = None;
        if let Some(st) = self.tasks.get_mut(&tid) {
            if st.exited.is_none() {
                st.exited = Some(time);
                self.exits.push_back((time, tid));
            }
        }
        self.prune(time);
    }

    /// Forgets tasks that exited more than [`TASK_GRACE_NS`] ago (nothing refers to a task
    /// by its tid any more by then; roles stay in the tables). A tid that acted keeps only
    /// its next generation, so a later task with that tid is still told apart.
    pub fn prune(&mut self, now: u64) {
        self.last = None;
        while let Some(&(t, tid)) = self.exits.front() {
            if t.saturating_add(TASK_GRACE_NS) > now {
                break;
            }
            self.exits.pop_front();
            if let Some(st) = self.tasks.get(&tid) {
                if st.exited == Some(t) {
                    if st.role.is_some() {
                        self.next_gen.insert(tid, st.generation + 1);
                    } else if st.generation > 0 {
                        self.next_gen.insert(tid, st.generation);
                    }
                    self.tasks.remove(&tid);
                }
            }
        }
    }

    /// A perf COMM record: `tid` is now named `comm` (`exec`: by an exec).
    pub fn on_comm(&mut self, roles: &mut [Role], pid: u32, tid: u32, comm: &str, exec: bool) {
        self.last = None;
        if exec {
            self.on_exec(roles, pid, tid, comm, true);
            return;
        }
        self.rename(pid, tid, comm);
    }

    /// `tid` renamed itself `comm`.
    fn rename(&mut self, pid: u32, tid: u32, comm: &str) {
        let next_gen = &self.next_gen;
        let st = self.tasks.entry(tid).or_insert_with(|| {
            TaskState::new(pid, String::new(), Self::generation_of_new(next_gen, tid))
        });
        if st.comm != comm {
            st.comm = comm.to_string();
            // A role keeps the name it acted under (a kworker renames itself for each
            // work item): the task's next act starts a new role with the new name.
            st.role = None;
        }
    }

    /// A `sched_process_exec` of `filename` by task `tid`: named after the file, as the
    /// kernel names it (the base name, at most 15 bytes).
    pub fn on_sched_exec(&mut self, roles: &mut [Role], tid: u32, filename: &str) {
        let base = filename.rsplit('/').next().unwrap_or(filename);
        let mut end = base.len().min(15);
        while !base.is_char_boundary(end) {
            end -= 1;
        }
        let comm = &base[..end];
        let pid = self.tasks.get(&tid).map(|t| t.pid).unwrap_or(tid);
        self.on_exec(roles, pid, tid, comm, false);
    }

    /// A kworker starting writeback work is, as the kernel names it then,
    /// `kworker/N:M-flush-MAJ:MIN`: the name the capture read at start described whatever
    /// work item the worker ran then, and workqueue renames make no COMM record.
    pub fn flusher_name(&mut self, pid: u32, tid: u32, bdi: Dev) {
        if bdi == 0 {
            return;
        }
        let Some(st) = self.tasks.get(&tid) else {
            return;
        };
        let Some(rest) = st.comm.strip_prefix("kworker/") else {
            return;
        };
        let base = rest.split('-').next().unwrap_or(rest);
        let (major, minor) = (
            ioblame_decode::dev_major(bdi),
            ioblame_decode::dev_minor(bdi),
        );
        // A bdi named `btrfs-N` (the kernel's own worker name says `flush-btrfs-N`).
        let name = if major == ioblame_decode::event::BDI_SEQ_MAJOR {
            format!("kworker/{base}-flush-btrfs-{minor}")
        } else {
            format!("kworker/{base}-flush-{major}:{minor}")
        };
        if st.comm != name {
            self.last = None;
            self.rename(pid, tid, &name);
        }
    }

    /// An exec: a new role from now on. `from_comm_record` tells which of the two signals
    /// (perf COMM with exec, sched_process_exec) this is; the second one of a pair only
    /// renames (the role it may have made in between with it).
    fn on_exec(
        &mut self,
        roles: &mut [Role],
        pid: u32,
        tid: u32,
        comm: &str,
        from_comm_record: bool,
    ) {
        self.last = None;
        match self.tasks.get_mut(&tid) {
            Some(st) if st.fresh_exec => {
                st.fresh_exec = false;
                if from_comm_record || st.comm.is_empty() {
                    st.comm = comm.to_string();
                    if let Some(r) = st.role {
                        roles[r.index()].comm = comm.to_string();
                    }
                }
            }
            Some(st) => {
                if st.role.is_some() {
                    st.generation += 1;
                    st.role = None;
                }
                st.pid = pid;
                st.comm = comm.to_string();
                st.exited = None;
                st.fresh_exec = true;
            }
            None => {
                let generation = Self::generation_of_new(&self.next_gen, tid);
                let mut st = TaskState::new(pid, comm.to_string(), generation);
                st.fresh_exec = true;
                st.lineage = Some(pid) == self.root;
                self.tasks.insert(tid, st);
            }
        }
    }
}

/// Appends a role to `roles`.
fn new_role(roles: &mut Vec<Role>, pid: u32, tid: u32, comm: String, generation: u32) -> RoleId {
    let id = RoleId(roles.len() as u32);
    roles.push(Role {
        pid,
        tid,
        comm,
        generation,
        cgroup: 0,
        lineage: false,
    });
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(pid: u32, tid: u32, comm: &str) -> Task {
        Task {
            pid,
            tid,
            comm: comm.into(),
        }
    }

    fn role(roles: &[Role], id: RoleId) -> (u32, u32, &str, u32) {
        let r = &roles[id.index()];
        (r.pid, r.tid, r.comm.as_str(), r.generation)
    }

    #[test]
    fn a_task_acts_as_one_role_until_renamed() {
        let mut r = Roles::new(&[task(10, 10, "dd")], None);
        let mut roles = Vec::new();
        let a = r.role_for(&mut roles, 10, 10);
        assert_eq!(r.role_for(&mut roles, 10, 10), a);
        assert_eq!(role(&roles, a), (10, 10, "dd", 0));
        // a task not in the start list is named by its tid
        let b = r.role_for(&mut roles, 20, 21);
        assert_eq!(role(&roles, b), (20, 21, "<21>", 0));
        assert_eq!(r.role_for(&mut roles, 10, 10), a);
        // a rename after acting: a new role, same generation
        r.on_comm(&mut roles, 10, 10, "dd2", false);
        let c = r.role_for(&mut roles, 10, 10);
        assert_ne!(c, a);
        assert_eq!(role(&roles, c), (10, 10, "dd2", 0));
        // renaming to the same name changes nothing
        r.on_comm(&mut roles, 10, 10, "dd2", false);
        assert_eq!(r.role_for(&mut roles, 10, 10), c);
        assert_eq!(roles.len(), 3);
    }

    #[test]
    fn exec_and_tid_reuse_start_new_generations() {
        let mut r = Roles::default();
        let mut roles = Vec::new();
        let a = r.role_for(&mut roles, 5, 5);
        // perf COMM with exec, then sched_process_exec of the same exec: one new role
        r.on_comm(&mut roles, 5, 5, "sh", true);
        r.on_sched_exec(&mut roles, 5, "/usr/bin/sh");
        let b = r.role_for(&mut roles, 5, 5);
        assert_eq!(role(&roles, b), (5, 5, "sh", 1));
        assert_ne!(a, b);
        // tid 5 now seen in another process, without a fork: a new task
        let c = r.role_for(&mut roles, 6, 5);
        assert_eq!(role(&roles, c), (6, 5, "sh", 2));
        assert_eq!(roles.len(), 3);
    }

    #[test]
    fn exec_names_are_cut_to_what_the_kernel_keeps() {
        let mut r = Roles::default();
        let mut roles = Vec::new();
        r.on_sched_exec(&mut roles, 7, "/opt/a-very-long-program-name");
        let a = r.role_for(&mut roles, 7, 7);
        assert_eq!(role(&roles, a), (7, 7, "a-very-long-pro", 0));
    }

    #[test]
    fn the_two_signals_of_one_exec_make_one_exec() {
        // sched_process_exec, then the COMM record: the record's name wins
        let mut r = Roles::default();
        let mut roles = Vec::new();
        r.on_sched_exec(&mut roles, 7, "/bin/sched-name");
        r.on_comm(&mut roles, 7, 7, "perf-name", true);
        let a = r.role_for(&mut roles, 7, 7);
        assert_eq!(role(&roles, a), (7, 7, "perf-name", 0));
        // the COMM record, then sched_process_exec: the record's name stays
        let mut r = Roles::default();
        let mut roles = Vec::new();
        r.on_comm(&mut roles, 8, 8, "perf-name", true);
        r.on_sched_exec(&mut roles, 8, "/bin/sched-name");
        let b = r.role_for(&mut roles, 8, 8);
        assert_eq!(role(&roles, b), (8, 8, "perf-name", 0));
        // acting in between: the second signal is another exec
        r.on_sched_exec(&mut roles, 8, "/bin/next");
        let c = r.role_for(&mut roles, 8, 8);
        r.on_comm(&mut roles, 8, 8, "next", true);
        let d = r.role_for(&mut roles, 8, 8);
        assert_eq!(role(&roles, c), (8, 8, "next", 1));
        assert_eq!(role(&roles, d), (8, 8, "next", 2));
    }

    #[test]
    fn forks_make_tasks_once() {
        let mut r = Roles::new(&[task(1, 1, "parent")], None);
        let mut roles = Vec::new();
        // perf FORK then sched_process_fork of the same fork
        r.on_perf_fork(30, 31, 1);
        r.on_fork(31, 31, Some("child".into()), false, 1);
        let a = r.role_for(&mut roles, 30, 31);
        assert_eq!(role(&roles, a), (30, 31, "child", 0));
        // a fork of a tid that acted: the next generation
        r.on_fork(40, 31, None, true, 1);
        let b = r.role_for(&mut roles, 40, 31);
        assert_eq!(role(&roles, b), (40, 31, "<31>", 1));
    }

    #[test]
    fn exited_tasks_are_pruned_keeping_their_next_generation() {
        let mut r = Roles::default();
        let mut roles = Vec::new();
        r.role_for(&mut roles, 9, 9);
        r.on_exit(1_000, 9);
        assert_eq!(r.tasks_len(), 1);
        r.prune(1_000 + TASK_GRACE_NS - 1);
        assert_eq!((r.tasks_len(), r.pruned_len()), (1, 0));
        r.prune(1_000 + TASK_GRACE_NS);
        assert_eq!((r.tasks_len(), r.pruned_len()), (0, 1));
        // the tid reused later: told apart from the first task
        let b = r.role_for(&mut roles, 9, 9);
        assert_eq!(role(&roles, b), (9, 9, "<9>", 1));
    }

    #[test]
    fn flushers_are_named_after_their_device() {
        let mut r = Roles::new(&[task(50, 50, "kworker/u8:0-events_unbound")], None);
        let mut roles = Vec::new();
        let a = r.role_for(&mut roles, 50, 50);
        r.flusher_name(50, 50, (7 << 20) | 1);
        let b = r.role_for(&mut roles, 50, 50);
        assert_eq!(role(&roles, b).2, "kworker/u8:0-flush-7:1");
        assert_ne!(a, b);
        // already so named: the same role
        r.flusher_name(50, 50, (7 << 20) | 1);
        assert_eq!(r.role_for(&mut roles, 50, 50), b);
    }

    #[test]
    fn the_unknown_role_is_made_once_when_needed() {
        let mut r = Roles::default();
        let mut roles = Vec::new();
        let a = r.role_for(&mut roles, 1, 1);
        let u = r.unknown(&mut roles);
        assert_eq!(r.unknown(&mut roles), u);
        assert_eq!(role(&roles, u), (0, 0, "<unknown>", u32::MAX));
        assert_eq!((a, u), (RoleId(0), RoleId(1)));
    }

    #[test]
    fn the_lineage_follows_forks_threads_and_execs_from_the_root() {
        // 100 is the root; 7 is another process alive at start.
        let mut r = Roles::new(&[task(100, 100, "sh"), task(7, 7, "other")], Some(100));
        let mut roles = Vec::new();
        r.on_perf_fork(101, 101, 100); // a child process
        r.on_perf_fork(101, 102, 101); // its thread
        r.on_comm(&mut roles, 101, 101, "dd", true); // the child execs
        r.on_perf_fork(201, 201, 7); // a child of the other process
        r.on_fork(103, 103, Some("w".into()), false, 102); // sched_process_fork by the thread
        let lineage = |r: &mut Roles, roles: &mut Vec<Role>, pid, tid| {
            let id = r.role_for(roles, pid, tid);
            roles[id.index()].lineage
        };
        assert!(lineage(&mut r, &mut roles, 100, 100));
        assert!(lineage(&mut r, &mut roles, 101, 101));
        assert!(lineage(&mut r, &mut roles, 101, 102));
        assert!(lineage(&mut r, &mut roles, 103, 103));
        assert!(!lineage(&mut r, &mut roles, 7, 7));
        assert!(!lineage(&mut r, &mut roles, 201, 201));
        // A task first seen in a sample is of the lineage only if of the root's process.
        assert!(lineage(&mut r, &mut roles, 100, 150));
        assert!(!lineage(&mut r, &mut roles, 300, 300));
        // tid 101 reused by another process without a fork seen: not the lineage any more.
        assert!(!lineage(&mut r, &mut roles, 400, 101));
        // Without a root nothing is.
        let mut none = Roles::new(&[task(100, 100, "sh")], None);
        none.on_perf_fork(101, 101, 100);
        assert!(!lineage(&mut none, &mut roles, 101, 101));
    }

    #[test]
    fn a_task_acting_in_another_cgroup_is_a_new_role() {
        let mut r = Roles::new(&[task(10, 10, "dd")], None);
        let mut roles = Vec::new();
        let a = r.role_in(&mut roles, 10, 10, 0);
        // The first cgroup seen fills in the role's.
        assert_eq!(r.role_in(&mut roles, 10, 10, 55), a);
        assert_eq!(roles[a.index()].cgroup, 55);
        // Events without a cgroup stay with the current role.
        assert_eq!(r.role_in(&mut roles, 10, 10, 0), a);
        let b = r.role_in(&mut roles, 10, 10, 66);
        assert_ne!(b, a);
        assert_eq!(role(&roles, b), (10, 10, "dd", 0));
        assert_eq!(roles[b.index()].cgroup, 66);
        assert_eq!(r.role_in(&mut roles, 10, 10, 66), b);
        assert_eq!(r.role_in(&mut roles, 10, 10, 0), b);
    }
}
