//! Scopes: which IO of a trace an analysis speaks of. `all`, the capture's `workload` (the
//! command it ran and its descendants), one process tree (`pid:N`) or one cgroup subtree
//! (`cgroup:PATH`). An IO is in a scope when the role it is charged to is (for IO of the
//! lost intent, its issuer); see docs/attribution.md, "Scopes".

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use ioblame_attrib::{Act, ActTotals, CgroupNames, Role, Tables, Via};
use ioblame_format::Trace;

/// A scope as the user names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every IO of the trace.
    All,
    /// The command the capture ran (`ioblame-capture record -- COMMAND`) and its descendants.
    Workload,
    /// Process `N` and its descendants forked while recording.
    Pid(u32),
    /// The cgroup at this path of the cgroup2 hierarchy and the cgroups below it.
    Cgroup(String),
}

impl FromStr for Scope {
    type Err = ScopeError;
    fn from_str(s: &str) -> Result<Scope, ScopeError> {
        match s {
            "all" => Ok(Scope::All),
            "workload" => Ok(Scope::Workload),
            _ => {
                if let Some(n) = s.strip_prefix("pid:") {
                    return n
                        .parse()
                        .map(Scope::Pid)
                        .map_err(|_| ScopeError::Syntax(s.to_string()));
                }
                if let Some(p) = s.strip_prefix("cgroup:") {
                    if p.starts_with('/') {
                        return Ok(Scope::Cgroup(normalise(p)));
                    }
                }
                Err(ScopeError::Syntax(s.to_string()))
            }
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::All => f.write_str("all"),
            Scope::Workload => f.write_str("workload"),
            Scope::Pid(n) => write!(f, "pid:{n}"),
            Scope::Cgroup(p) => write!(f, "cgroup:{p}"),
        }
    }
}

/// `/a/b/` -> `/a/b`; `/` stays.
fn normalise(p: &str) -> String {
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        "/".into()
    } else {
        t.to_string()
    }
}

/// Why a scope cannot apply to a trace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// Not `workload`, `all`, `pid:N` or `cgroup:/PATH`.
    #[error("scope {0:?}: expected workload, all, pid:N or cgroup:/PATH")]
    Syntax(String),
    /// `workload` on a trace that names no command's pid.
    #[error(
        "the trace names no command (recorded without `-- COMMAND`, from perf.data, or before \
         format 1.3), so it has no workload: use --scope all, pid:N or cgroup:/PATH"
    )]
    NoWorkload,
    /// `cgroup:` on a trace without a cgroup table.
    #[error(
        "the trace recorded no cgroups (before format 1.3, --no-cgroups, or a kernel before \
         5.7): --scope cgroup:PATH cannot apply"
    )]
    NoCgroups,
    /// `cgroup:PATH` naming no cgroup of the trace's table.
    #[error("no cgroup {0} in the trace's cgroup table")]
    UnknownCgroup(String),
}

/// A scope resolved against one trace.
#[derive(Debug, Clone)]
pub struct ResolvedScope {
    /// The scope.
    pub scope: Scope,
    /// The root process of the lineage the attribution marks ([`Role::lineage`]): the
    /// scope's for `workload` and `pid:N`; for the others the workload's, when the trace has
    /// one, so outputs can say how much IO lies outside it.
    pub root: Option<u32>,
    /// The command the capture ran, when the trace names it.
    pub command: Option<String>,
    /// For `cgroup:PATH`: the ids of that cgroup and those below it.
    cgroups: HashSet<u64>,
}

impl ResolvedScope {
    /// `all`, with no lineage marked (the scope of traces that have no workload).
    pub fn all() -> ResolvedScope {
        ResolvedScope {
            scope: Scope::All,
            root: None,
            command: None,
            cgroups: HashSet::new(),
        }
    }

    /// Resolves `scope` against `trace`.
    pub fn resolve(scope: &Scope, trace: &Trace) -> Result<ResolvedScope, ScopeError> {
        let meta = trace.metadata();
        let workload = meta
            .info("command_pid")
            .and_then(|p| p.trim().parse::<u32>().ok());
        let command = meta
            .info("command")
            .filter(|c| !c.is_empty())
            .map(str::to_string);
        let mut r = ResolvedScope {
            scope: scope.clone(),
            root: workload,
            command,
            cgroups: HashSet::new(),
        };
        match scope {
            Scope::All => {}
            Scope::Workload => {
                if workload.is_none() {
                    return Err(ScopeError::NoWorkload);
                }
            }
            Scope::Pid(n) => r.root = Some(*n),
            Scope::Cgroup(path) => {
                let names = CgroupNames::of(trace).ok_or(ScopeError::NoCgroups)?;
                r.cgroups = names.subtree(path);
                if r.cgroups.is_empty() {
                    return Err(ScopeError::UnknownCgroup(path.clone()));
                }
            }
        }
        Ok(r)
    }

    /// The default scope of `baseline` and `check`: `workload` when the trace names its
    /// command's pid, else `all`.
    pub fn default_for_ci(trace: &Trace) -> ResolvedScope {
        ResolvedScope::resolve(&Scope::Workload, trace)
            .or_else(|_| ResolvedScope::resolve(&Scope::All, trace))
            .unwrap_or_else(|_| ResolvedScope::all())
    }

    /// Whether the scope is all of the trace.
    pub fn is_all(&self) -> bool {
        self.scope == Scope::All
    }

    /// Whether `role` is in the scope (its lineage for `workload` and `pid:N`, its cgroup for
    /// `cgroup:PATH`).
    pub fn role_in(&self, role: &Role) -> bool {
        match &self.scope {
            Scope::All => true,
            Scope::Workload | Scope::Pid(_) => role.lineage,
            Scope::Cgroup(_) => self.cgroups.contains(&role.cgroup),
        }
    }

    /// Whether `act` is in the scope: its role is, or for an act of the lost intent
    /// (charged to the `<unknown>` role), the task that queued its IO is.
    pub fn act_in(&self, act: &Act, tables: &Tables) -> bool {
        self.is_all() || deciding_role(act, tables).is_some_and(|r| self.role_in(r))
    }

    /// Whether `act` is of the workload's lineage (for the figure `all` gives).
    fn act_in_workload(act: &Act, tables: &Tables) -> bool {
        deciding_role(act, tables).is_some_and(|r| r.lineage)
    }
}

/// The role whose scope an act is in: its own, or for an act of the lost intent the task
/// that queued its IO (none when no bio was seen).
fn deciding_role<'t>(act: &Act, tables: &'t Tables) -> Option<&'t Role> {
    let role = match (act.via, act.issuer) {
        (Via::Unknown, Some(issuer)) => issuer,
        (Via::Unknown, None) => return None,
        _ => act.role,
    };
    tables.role(role)
}

/// What a run counted inside and outside its scope (IO on the selected devices).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeSummary {
    /// The scope, as the user names it (`workload`, `pid:N`, ...).
    pub scope: String,
    /// The root process of the lineage, for `workload` and `pid:N`.
    pub root: Option<u32>,
    /// The command the capture ran, when the trace names it.
    pub command: Option<String>,
    /// IO in the scope.
    pub inside: ActTotals,
    /// IO outside it (not handed to the caller, not in the per-act totals).
    pub outside: ActTotals,
    /// For `all` on a trace with a workload: the IO outside the workload.
    pub outside_workload: Option<ActTotals>,
}

/// Per-act membership, decided once per act.
#[derive(Debug)]
pub(crate) struct ScopeCounter<'a> {
    scope: &'a ResolvedScope,
    /// Per act: 0 not decided, 1 in, 2 out; 3/4 for the workload figure of `all`.
    seen: Vec<u8>,
    pub(crate) summary: ScopeSummary,
}

impl<'a> ScopeCounter<'a> {
    pub(crate) fn new(scope: &'a ResolvedScope) -> Self {
        let workload_figure = scope.is_all() && scope.root.is_some();
        ScopeCounter {
            scope,
            seen: Vec::new(),
            summary: ScopeSummary {
                scope: scope.scope.to_string(),
                root: match scope.scope {
                    Scope::Workload | Scope::Pid(_) => scope.root,
                    _ => None,
                },
                command: scope.command.clone(),
                outside_workload: workload_figure.then(ActTotals::default),
                ..ScopeSummary::default()
            },
        }
    }

    /// Counts `io` inside or outside the scope; whether it is inside.
    #[inline]
    pub(crate) fn count(&mut self, io: &ioblame_attrib::Io, tables: &Tables) -> bool {
        let i = io.act.index();
        if self.seen.len() <= i {
            self.seen.resize(i + 1, 0);
        }
        if self.seen[i] == 0 {
            let Some(act) = tables.act(io.act) else {
                return true;
            };
            let inside = self.scope.act_in(act, tables);
            let in_workload = ResolvedScope::act_in_workload(act, tables);
            self.seen[i] = 1 + u8::from(!inside) + 2 * u8::from(!in_workload);
        }
        let v = self.seen[i];
        if let Some(w) = &mut self.summary.outside_workload {
            if v >= 3 {
                w.add(io.dir, io.size);
            }
        }
        if v % 2 == 1 {
            self.summary.inside.add(io.dir, io.size);
            true
        } else {
            self.summary.outside.add(io.dir, io.size);
            false
        }
    }
}

impl fmt::Display for ScopeSummary {
    /// `scope workload (pid 1234 `cmd` and its descendants): 3145728 of 10485760 bytes
    /// (30.0%) of the trace's IO fell outside it`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outside = self.outside.total_bytes();
        let total = outside + self.inside.total_bytes();
        let pct = |n: u64| {
            if total == 0 {
                0.0
            } else {
                n as f64 * 100.0 / total as f64
            }
        };
        write!(f, "scope {}", self.scope)?;
        if let Some(pid) = self.root {
            write!(f, " (pid {pid}")?;
            if let (Some(c), "workload") = (&self.command, self.scope.as_str()) {
                write!(f, " `{c}`")?;
            }
            f.write_str(" and its descendants)")?;
        }
        write!(
            f,
            ": {outside} of {total} bytes ({:.1}%) of the trace's IO fell outside it",
            pct(outside)
        )?;
        if let Some(w) = &self.outside_workload {
            let n = w.total_bytes();
            write!(
                f,
                "; {n} bytes ({:.1}%) are outside the workload (--scope workload leaves them out)",
                pct(n)
            )?;
        }
        Ok(())
    }
}
