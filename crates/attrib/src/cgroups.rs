//! The names of cgroups, for every output that shows the cgroup of an act or role: the
//! trace's CGROUPS table (`ioblame_format::Trace::cgroups`), id -> path under the cgroup2
//! mount. The attribution itself keeps ids only ([`Role::cgroup`]).

use std::collections::{HashMap, HashSet};

use ioblame_format::{Cgroup, Trace};

use crate::{Act, ActTotals, Role, Tables};

/// A trace's cgroups by id. Built only for a trace that recorded cgroups
/// ([`CgroupNames::of`] gives `None` otherwise): outputs then leave out their cgroup keys and
/// sections, as before cgroups were recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupNames(HashMap<u64, String>);

impl CgroupNames {
    /// The names of `table`; `None` when it is empty (nothing recorded).
    pub fn new(table: impl IntoIterator<Item = Cgroup>) -> Option<CgroupNames> {
        let m: HashMap<u64, String> = table.into_iter().map(|c| (c.id, c.path)).collect();
        (!m.is_empty()).then_some(CgroupNames(m))
    }

    /// The table of `trace`, if it recorded one.
    pub fn of(trace: &Trace) -> Option<CgroupNames> {
        CgroupNames::new(trace.cgroups())
    }

    /// The path of cgroup `id` (`/` for the root, `/system.slice/nginx.service`); `None`
    /// when not recorded (0) or not in the table (a perf.data recorded without
    /// `--all-cgroups`, an id the recorder never heard of).
    pub fn path(&self, id: u64) -> Option<&str> {
        self.0.get(&id).map(String::as_str)
    }

    /// The cgroup `role` acted in.
    pub fn of_role(&self, role: &Role) -> Option<&str> {
        self.path(role.cgroup)
    }

    /// The cgroup of `act`'s role: the task that dirtied the pages or issued the IO.
    pub fn of_act<'a>(&'a self, act: &Act, tables: &Tables) -> Option<&'a str> {
        tables.role(act.role).and_then(|r| self.of_role(r))
    }

    /// The ids of `path` and of every cgroup below it (`/` is all of them; a trailing `/`
    /// changes nothing).
    pub fn subtree(&self, path: &str) -> HashSet<u64> {
        let top = path.trim_end_matches('/');
        let below = format!("{top}/");
        self.0
            .iter()
            .filter(|(_, p)| top.is_empty() || *p == top || p.starts_with(&below))
            .map(|(&id, _)| id)
            .collect()
    }

    /// Every (id, path), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &str)> + '_ {
        self.0.iter().map(|(&id, p)| (id, p.as_str()))
    }
}

/// The IO of one cgroup ([`per_cgroup`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupTotals<'a> {
    /// The cgroup's path; `None` for the acts whose cgroup is unknown.
    pub cgroup: Option<&'a str>,
    /// Bytes and IOs per direction, summed over its acts.
    pub totals: ActTotals,
    /// Its acts with IO.
    pub acts: u64,
}

/// Bytes and IOs per cgroup (of the role charged) over the acts with IO, the recorder's
/// only with `show_recorder`: most bytes first, then by path (unknown first among equals).
/// Acts with no known cgroup (the lost intent, whose `<unknown>` role has none, tasks seen
/// only outside the stack events, a trace without cgroups: `names` `None`) are one row
/// whose `cgroup` is `None`.
pub fn per_cgroup<'a>(
    tables: &Tables,
    names: Option<&'a CgroupNames>,
    show_recorder: bool,
) -> Vec<CgroupTotals<'a>> {
    let mut rows: HashMap<Option<&'a str>, CgroupTotals<'a>> = HashMap::new();
    for (_, a, t) in tables.acts_with_totals() {
        if (a.recorder && !show_recorder) || t.total_ios() == 0 {
            continue;
        }
        let key = names.and_then(|n| n.of_act(a, tables));
        let r = rows.entry(key).or_insert(CgroupTotals {
            cgroup: key,
            totals: ActTotals::default(),
            acts: 0,
        });
        for d in 0..3 {
            r.totals.bytes[d] += t.bytes[d];
            r.totals.ios[d] += t.ios[d];
        }
        r.acts += 1;
    }
    let mut rows: Vec<CgroupTotals<'a>> = rows.into_values().collect();
    rows.sort_by_key(|r| (std::cmp::Reverse(r.totals.total_bytes()), r.cgroup));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FileKey, IntentId, RoleId, Via};

    fn table() -> Vec<Cgroup> {
        [
            (1, "/"),
            (7, "/system.slice"),
            (9, "/system.slice/a.service"),
        ]
        .into_iter()
        .chain([(11, "/system.slicer")])
        .map(|(id, p)| Cgroup { id, path: p.into() })
        .collect()
    }

    fn role(cgroup: u64) -> Role {
        Role {
            pid: 1,
            tid: 1,
            comm: "w".into(),
            generation: 0,
            cgroup,
            lineage: false,
        }
    }

    fn act(role: u32, ino: u64, recorder: bool) -> Act {
        Act {
            role: RoleId(role),
            intent: IntentId(2),
            file: FileKey { dev: 0, ino },
            via: Via::Page,
            reason: None,
            issuer: None,
            recorder,
        }
    }

    #[test]
    fn nothing_recorded_is_no_table() {
        assert_eq!(CgroupNames::new(Vec::new()), None);
    }

    #[test]
    fn paths_by_id_and_subtrees_by_path() {
        let n = CgroupNames::new(table()).unwrap();
        assert_eq!(n.path(9), Some("/system.slice/a.service"));
        assert_eq!(n.path(0), None);
        assert_eq!(n.path(5), None);
        let sorted = |s: HashSet<u64>| {
            let mut v: Vec<u64> = s.into_iter().collect();
            v.sort();
            v
        };
        // A sibling whose name starts the same is not below.
        assert_eq!(sorted(n.subtree("/system.slice")), [7, 9]);
        assert_eq!(sorted(n.subtree("/system.slice/")), [7, 9]);
        assert_eq!(sorted(n.subtree("/")), [1, 7, 9, 11]);
        assert!(n.subtree("/nope").is_empty());
        assert_eq!(n.iter().count(), 4);
    }

    #[test]
    fn an_act_is_in_its_roles_cgroup() {
        let n = CgroupNames::new(table()).unwrap();
        let t = Tables {
            roles: vec![role(9), role(0)],
            ..Tables::default()
        };
        assert_eq!(
            n.of_act(&act(0, 0, false), &t),
            Some("/system.slice/a.service")
        );
        assert_eq!(n.of_act(&act(1, 0, false), &t), None);
        assert_eq!(n.of_act(&act(5, 0, false), &t), None);
    }

    #[test]
    fn per_cgroup_sums_acts_most_bytes_first() {
        let n = CgroupNames::new(table()).unwrap();
        let tot = |r: u64, w: u64| ActTotals {
            bytes: [r, 0, w],
            ios: [u64::from(r > 0), 0, u64::from(w > 0)],
            ..ActTotals::default()
        };
        let t = Tables {
            roles: vec![role(9), role(7), role(0)],
            acts: vec![
                act(0, 1, false),
                act(0, 2, false),
                act(1, 3, false),
                act(2, 4, false),
                act(1, 5, true),
                act(1, 6, false),
            ],
            totals: vec![
                tot(100, 0),
                tot(0, 50),
                tot(0, 400),
                tot(10, 0),
                tot(0, 1000),
                tot(0, 0),
            ],
            ..Tables::default()
        };
        let rows = per_cgroup(&t, Some(&n), false);
        let got: Vec<(Option<&str>, u64, u64)> = rows
            .iter()
            .map(|r| (r.cgroup, r.totals.total_bytes(), r.acts))
            .collect();
        assert_eq!(
            got,
            [
                (Some("/system.slice"), 400, 1),
                (Some("/system.slice/a.service"), 150, 2),
                (None, 10, 1),
            ]
        );
        assert_eq!(rows[1].totals.ios, [1, 0, 1]);
        // The recorder's act, when shown; no names: one unknown row.
        assert_eq!(per_cgroup(&t, Some(&n), true)[0].totals.total_bytes(), 1400);
        let none = per_cgroup(&t, None, false);
        assert_eq!(none.len(), 1);
        assert_eq!((none[0].cgroup, none[0].acts), (None, 4));
    }
}
