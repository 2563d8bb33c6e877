//! `ioblame blame`'s culprit keys (`--by`) and the names of victims and culprits: acts,
//! tasks, processes and cgroups named from the analysis' tables, the trace's task table, the
//! charged files' paths and the cgroup table.

use std::collections::HashMap;

use ioblame_attrib::{Act, CgroupNames, Role, Tables};
use ioblame_counters::output::printable;
use ioblame_format::PathTable;
use ioblame_latency::blame::Culprit;
use serde_json::Value;

use crate::text::dev_str;

/// What culprits (and, for `cgroup`, victims) are summed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    /// Each act (role + intent + file): the finest, what `ioblame acts` lists.
    Act,
    /// Each task (thread).
    Task,
    /// Each process.
    Process,
    /// Each cgroup (victims by cgroup too).
    Cgroup,
}

/// A culprit group's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum CKey {
    Act(u32),
    Task(u32),
    Process(u32),
    Cgroup(Option<String>),
    /// Flushes asked for by a task (thread id) with no data request charged.
    FlushBy(u32),
    /// Discards and other ops queued by a task (thread id).
    OtherBy(u32),
    Flush,
    OtherOp,
}

/// What naming needs.
pub struct Names<'a> {
    pub(super) tables: &'a Tables,
    /// The first role of each process, to name it.
    pub(super) proc_role: HashMap<u32, u32>,
    /// Each thread's latest role, and the trace's task table for threads without one:
    /// `tid -> (role, pid, comm)`.
    pub(super) tasks: HashMap<u32, (Option<u32>, u32, String)>,
    pub(super) intents: &'a [String],
    pub(super) paths: &'a PathTable,
    pub(super) cgroups: Option<&'a CgroupNames>,
}

impl<'a> Names<'a> {
    /// Names for `trace`'s analysis `tables`: the intents' short names, the charged files'
    /// paths, the trace's cgroups.
    pub fn new(
        trace: &ioblame_format::Trace,
        tables: &'a Tables,
        intents: &'a [String],
        paths: &'a PathTable,
        cgroups: Option<&'a CgroupNames>,
    ) -> Names<'a> {
        let mut tasks: HashMap<u32, (Option<u32>, u32, String)> = trace
            .metadata()
            .tasks
            .iter()
            .map(|t| (t.tid, (None, t.pid, t.comm.clone())))
            .collect();
        let mut proc_role: HashMap<u32, u32> = HashMap::new();
        for (i, r) in tables.roles.iter().enumerate() {
            tasks.insert(r.tid, (Some(i as u32), r.pid, r.comm.clone()));
            proc_role.entry(r.pid).or_insert(i as u32);
        }
        Names {
            tables,
            proc_role,
            tasks,
            intents,
            paths,
            cgroups,
        }
    }

    pub(super) fn act(&self, k: u32) -> &Act {
        &self.tables.acts[k as usize]
    }

    /// The role of act `k`.
    pub(super) fn role_of(&self, k: u32) -> &Role {
        &self.tables.roles[self.act(k).role.index()]
    }

    /// The cgroup of role `r`, when the trace names it.
    pub(super) fn cgroup_of_role(&self, r: u32) -> Option<String> {
        let role = &self.tables.roles[r as usize];
        self.cgroups?.of_role(role).map(str::to_owned)
    }

    pub(super) fn cgroup_of_act(&self, act: &Act) -> Option<String> {
        self.cgroup_of_role(act.role.0)
    }

    pub(super) fn ckey(&self, key: u32, by: By) -> CKey {
        let tid = match Culprit::of(key) {
            Culprit::Flush => return CKey::Flush,
            Culprit::Other => return CKey::OtherOp,
            Culprit::Key(a) => {
                let act = self.act(a);
                return match by {
                    By::Act => CKey::Act(a),
                    By::Task => CKey::Task(act.role.0),
                    By::Process => CKey::Process(self.role_of(a).pid),
                    By::Cgroup => CKey::Cgroup(self.cgroup_of_act(act)),
                };
            }
            Culprit::FlushBy(t) | Culprit::OtherBy(t) => t,
        };
        let task = self.tasks.get(&tid);
        let role = task.and_then(|t| t.0);
        match (by, role) {
            (By::Task, Some(r)) => CKey::Task(r),
            (By::Process, _) if task.is_some() => CKey::Process(task.map_or(0, |t| t.1)),
            (By::Cgroup, _) => CKey::Cgroup(role.and_then(|r| self.cgroup_of_role(r))),
            _ if matches!(Culprit::of(key), Culprit::FlushBy(_)) => CKey::FlushBy(tid),
            _ => CKey::OtherBy(tid),
        }
    }

    /// `comm (pid P tid T)` of a thread.
    pub(super) fn task_label(&self, tid: u32) -> String {
        match self.tasks.get(&tid) {
            Some((_, pid, comm)) => format!("{} (pid {pid} tid {tid})", printable(comm)),
            None => format!("task {tid}"),
        }
    }

    pub(super) fn file(&self, act: &Act) -> String {
        if act.file.ino == 0 {
            return "-".to_owned();
        }
        match self.paths.get(act.file.dev, act.file.ino) {
            Some(p) => printable(p).into_owned(),
            None => format!("{}/{}", dev_str(act.file.dev), act.file.ino),
        }
    }

    /// A culprit as a person reads it.
    pub(super) fn clabel(&self, k: &CKey) -> String {
        match k {
            CKey::Act(a) => {
                let (act, role) = (self.act(*a), self.role_of(*a));
                let intent = self
                    .intents
                    .get(act.intent.index())
                    .map_or_else(|| "?".to_owned(), |n| printable(n).into_owned());
                format!(
                    "{} (pid {}, {intent} via {}, {})",
                    printable(&role.comm),
                    role.pid,
                    act.via.name(),
                    self.file(act)
                )
            }
            CKey::Task(r) => {
                let role = &self.tables.roles[*r as usize];
                format!(
                    "{} (pid {} tid {})",
                    printable(&role.comm),
                    role.pid,
                    role.tid
                )
            }
            CKey::Process(pid) => {
                let comm = self
                    .proc_role
                    .get(pid)
                    .map(|&r| printable(&self.tables.roles[r as usize].comm).into_owned())
                    .unwrap_or_default();
                format!("{comm} (pid {pid})")
            }
            CKey::Cgroup(c) => format!("cgroup {}", c.as_deref().unwrap_or("(not recorded)")),
            CKey::FlushBy(t) => format!("cache flushes asked for by {}", self.task_label(*t)),
            CKey::OtherBy(t) => format!("discards and other ops of {}", self.task_label(*t)),
            CKey::Flush => "cache flushes (who asked for them is not in the trace)".to_owned(),
            CKey::OtherOp => {
                "discards and other ops (who queued them is not in the trace)".to_owned()
            }
        }
    }

    /// A culprit's keys as `ioblame acts --json` names them.
    pub(super) fn cjson(&self, k: &CKey, v: &mut Value) {
        match k {
            CKey::Act(a) => {
                let (act, role) = (self.act(*a), self.role_of(*a));
                v["act"] = (*a).into();
                v["comm"] = role.comm.clone().into();
                v["pid"] = role.pid.into();
                v["tid"] = role.tid.into();
                v["intent"] = act.intent.0.into();
                v["intent_name"] = self.intents.get(act.intent.index()).cloned().into();
                v["via"] = act.via.name().into();
                v["reason"] = act.reason.map(|r| r.name()).into();
                v["dev"] = dev_str(act.file.dev).into();
                v["ino"] = act.file.ino.into();
                v["path"] = (act.file.ino != 0)
                    .then(|| self.paths.get(act.file.dev, act.file.ino))
                    .flatten()
                    .into();
                if self.cgroups.is_some() {
                    v["cgroup"] = self.cgroup_of_act(act).into();
                }
            }
            CKey::Task(r) => {
                let role = &self.tables.roles[*r as usize];
                v["comm"] = role.comm.clone().into();
                v["pid"] = role.pid.into();
                v["tid"] = role.tid.into();
            }
            CKey::Process(pid) => {
                v["comm"] = self
                    .proc_role
                    .get(pid)
                    .map(|&r| self.tables.roles[r as usize].comm.clone())
                    .into();
                v["pid"] = (*pid).into();
            }
            CKey::Cgroup(c) => v["cgroup"] = c.clone().into(),
            CKey::FlushBy(t) | CKey::OtherBy(t) => {
                v["via"] = if matches!(k, CKey::FlushBy(_)) {
                    "flush"
                } else {
                    "other_op"
                }
                .into();
                let task = self.tasks.get(t);
                v["comm"] = task.map(|t| t.2.clone()).into();
                v["pid"] = task.map(|t| t.1).into();
                v["tid"] = (*t).into();
            }
            CKey::Flush => v["via"] = "flush".into(),
            CKey::OtherOp => v["via"] = "other_op".into(),
        }
    }
}
