//! What a counter's filter sees of an IO besides the [`Io`] itself: the task charged.

use ioblame_attrib::{Act, ActId, Io, Role, Tables};

/// What a filter needs beyond the [`Io`]: the task ids and comm of the role the IO is
/// charged to.
///
/// Roles are threads. As in ioblame, `pid` is the task's own pid (what userspace calls the
/// thread id, [`Role::tid`]), the number the `counters_pipe` header prints as `pid-N`; `tgid`
/// is its process ([`Role::pid`]). Borrowed from the attribution tables, so building one costs
/// two index lookups ([`IoContext::for_act`]) and no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoContext<'a> {
    /// The charged task's own pid (its thread id; the filter field `pid`).
    pub pid: u32,
    /// The charged task's process id, its thread group id (the filter field `tgid`).
    pub tgid: u32,
    /// Command name of the charged role (empty when unknown).
    pub comm: &'a str,
    /// The charged role's cgroup id (the filter field `cgroup`; 0 when not recorded).
    pub cgroup: u64,
}

impl<'a> IoContext<'a> {
    /// A context of a single-threaded task: `tgid` is `pid`.
    pub fn new(pid: u32, comm: &'a str) -> IoContext<'a> {
        IoContext {
            pid,
            tgid: pid,
            comm,
            cgroup: 0,
        }
    }

    /// The context of act `act`: its role's tid (as `pid`), pid (as `tgid`) and comm; zeros
    /// and an empty comm when the act or its role is not in the tables.
    #[inline]
    pub fn for_act(acts: &[Act], roles: &'a [Role], act: ActId) -> IoContext<'a> {
        acts.get(act.index())
            .and_then(|a| roles.get(a.role.index()))
            .map_or_else(IoContext::default, |r| IoContext {
                pid: r.tid,
                tgid: r.pid,
                comm: &r.comm,
                cgroup: r.cgroup,
            })
    }

    /// The context of the act an IO is charged to, looked up in `tables`.
    #[inline]
    pub fn for_io(tables: &'a Tables, io: &Io) -> IoContext<'a> {
        IoContext::for_act(&tables.acts, &tables.roles, io.act)
    }
}

#[cfg(test)]
mod tests {
    use ioblame_attrib::{FileKey, IntentId, RoleId, Via};

    use super::*;

    fn role(pid: u32, tid: u32, comm: &str) -> Role {
        Role {
            pid,
            tid,
            comm: comm.into(),
            generation: 0,
            cgroup: 0,
            lineage: false,
        }
    }

    fn act(role: u32) -> Act {
        Act {
            role: RoleId(role),
            intent: IntentId(0),
            file: FileKey { dev: 0, ino: 0 },
            via: Via::Page,
            reason: None,
            issuer: None,
            recorder: false,
        }
    }

    #[test]
    fn an_act_names_its_role_thread_first() {
        let roles = [role(10, 10, "main"), role(10, 12, "worker")];
        let acts = [act(0), act(1), act(7)];
        assert_eq!(
            IoContext::for_act(&acts, &roles, ActId(1)),
            IoContext {
                pid: 12,
                tgid: 10,
                comm: "worker",
                cgroup: 0,
            }
        );
        assert_eq!(
            IoContext::for_act(&acts, &roles, ActId(0)),
            IoContext::new(10, "main")
        );
        // An act whose role is missing, and an act that is missing.
        assert_eq!(
            IoContext::for_act(&acts, &roles, ActId(2)),
            IoContext::default()
        );
        assert_eq!(
            IoContext::for_act(&acts, &roles, ActId(3)),
            IoContext::default()
        );
    }
}
