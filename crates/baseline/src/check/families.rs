//! Families of sibling groups: baseline groups that differ only in their writeback reason
//! (the same role, via, file and code path, written back by the task's fsync, by sync(2) or
//! by the flusher on its own schedule, which depends on timing), compared as one, and the
//! trace's groups sorted into them.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use super::compared_as_group;
use super::groups::TraceGroup;
use crate::keys::{glob_match, ReasonClass};
use crate::model::{key_label, role_label, Baseline, GroupKey, Sum};
use crate::tolerances::Tolerances;

/// Whether a trace key matches a baseline key but for the writeback reason: the two are
/// siblings (the same role, via, file and code path, kernel and user frames), whose bytes
/// move between reasons with timing (sync(2) or the flusher's own schedule, or the task's
/// fsync).
pub(super) fn family_matches(base: &GroupKey, k: &GroupKey) -> bool {
    base.via == k.via
        && glob_match(&base.role, &k.role)
        && glob_match(&base.file, &k.file)
        && frames_match(&base.frames, &k.frames)
        && frames_match(&base.user, &k.user)
}

/// Whether a trace key's frames match a baseline key's, one by one (globs in the
/// baseline's): as many, each matching.
fn frames_match(base: &[String], frames: &[String]) -> bool {
    base.len() == frames.len() && base.iter().zip(frames).all(|(p, f)| glob_match(p, f))
}

/// Whether two keys are the same but for the reason (exact strings).
fn same_family(a: &GroupKey, b: &GroupKey) -> bool {
    a.role == b.role
        && a.via == b.via
        && a.file == b.file
        && a.frames == b.frames
        && a.user == b.user
}

/// The label of a family of sibling groups spanning `reasons`.
pub(super) fn family_label(k: &GroupKey, reasons: &BTreeSet<ReasonClass>) -> String {
    if reasons.len() <= 1 {
        let mut k = k.clone();
        if let Some(r) = reasons.iter().next() {
            k.reason = *r;
        }
        return key_label(&k);
    }
    let mut s = format!("{} via {}", role_label(k), k.via.name());
    let wb: Vec<&str> = reasons
        .iter()
        .filter(|r| **r != ReasonClass::None)
        .map(|r| r.name())
        .collect();
    if reasons.contains(&ReasonClass::None) {
        s.push_str(&format!(" (own IO or {} writeback)", wb.join(" or ")));
    } else {
        s.push_str(&format!(" ({} writeback)", wb.join(" or ")));
    }
    if k.file != "-" {
        s.push_str(" on ");
        s.push_str(&k.file);
    }
    s
}

/// Baseline groups that differ only in their writeback reason, and the trace's IO that
/// matched any of them: bytes move freely between them (compared as one).
#[derive(Debug, Clone)]
pub(super) struct Family {
    /// The key of the first member (its reason is not part of the family).
    pub(super) key: GroupKey,
    /// Indexes of the member groups in the baseline.
    pub(super) members: Vec<usize>,
    /// The members' metrics summed.
    pub(super) base: Sum,
    /// The trace's IO of the family.
    pub(super) trace: Sum,
    /// Reason classes on either side.
    pub(super) reasons: BTreeSet<ReasonClass>,
    /// The loosest of the members' tolerances.
    pub(super) tol: Tolerances,
}

/// Trace groups that match no baseline group, summed by family.
#[derive(Debug, Clone)]
pub(super) struct NewFamily {
    /// The key of the first of them.
    pub(super) key: GroupKey,
    /// Their IO.
    pub(super) sum: Sum,
    /// Their reason classes.
    pub(super) reasons: BTreeSet<ReasonClass>,
}

/// One family to judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Item {
    /// A family of the baseline (index into [`Families::base`]).
    Base(usize),
    /// A family the baseline does not have (index into [`Families::new`]).
    New(usize),
}

/// The groups compared as groups (all but unattributed IO unless strict), as families.
#[derive(Debug, Clone, Default)]
pub(super) struct Families {
    /// The baseline's families, in the order of their first member.
    pub(super) base: Vec<Family>,
    /// Per baseline group, the trace's IO that matched it.
    pub(super) matched: Vec<Option<Sum>>,
    /// The trace's families that match no baseline family, in order of appearance.
    pub(super) new: Vec<NewFamily>,
}

impl Families {
    /// Gathers the baseline's groups into families, then sorts the trace's groups into them:
    /// a trace group goes to the family of the baseline group it matched, else to the first
    /// family it is a sibling of, else to a new family.
    pub(super) fn build(baseline: &Baseline, trace: &[TraceGroup], strict: bool) -> Families {
        let mut base: Vec<Family> = Vec::new();
        let mut family_of: Vec<Option<usize>> = vec![None; baseline.groups.len()];
        for (i, g) in baseline.groups.iter().enumerate() {
            if !compared_as_group(strict, g.key.via) {
                continue;
            }
            let t = g.tolerance.or(&baseline.defaults.tolerances);
            let f = match base.iter().position(|f| same_family(&f.key, &g.key)) {
                Some(f) => {
                    let fam = &mut base[f];
                    fam.tol = fam.tol.loosest(&t);
                    f
                }
                None => {
                    base.push(Family {
                        key: g.key.clone(),
                        members: Vec::new(),
                        base: Sum::default(),
                        trace: Sum::default(),
                        reasons: BTreeSet::new(),
                        tol: t,
                    });
                    base.len() - 1
                }
            };
            let fam = &mut base[f];
            fam.members.push(i);
            fam.base.add(&g.sum());
            fam.reasons.insert(g.key.reason);
            family_of[i] = Some(f);
        }
        let mut matched: Vec<Option<Sum>> = vec![None; baseline.groups.len()];
        let mut new: Vec<NewFamily> = Vec::new();
        for TraceGroup {
            key: k,
            sum: s,
            base: a,
        } in trace
        {
            if !compared_as_group(strict, k.via) {
                continue;
            }
            if let Some(i) = *a {
                if let Some(f) = family_of[i] {
                    matched[i].get_or_insert_with(Sum::default).add(s);
                    base[f].trace.add(s);
                    base[f].reasons.insert(k.reason);
                    continue;
                }
            }
            if let Some(f) = base.iter_mut().find(|f| family_matches(&f.key, k)) {
                f.trace.add(s);
                f.reasons.insert(k.reason);
                continue;
            }
            match new.iter_mut().find(|n| same_family(&n.key, k)) {
                Some(n) => {
                    n.sum.add(s);
                    n.reasons.insert(k.reason);
                }
                None => new.push(NewFamily {
                    key: k.clone(),
                    sum: s.clone(),
                    reasons: BTreeSet::from([k.reason]),
                }),
            }
        }
        Families { base, matched, new }
    }

    /// The order families are judged in: largest change of bytes first (they draw on the
    /// pool of unattributed bytes in that order), the baseline's before new ones on a tie.
    pub(super) fn order(&self) -> Vec<Item> {
        let mut items: Vec<(u64, Item)> = Vec::new();
        for (f, fam) in self.base.iter().enumerate() {
            items.push((fam.base.total().abs_diff(fam.trace.total()), Item::Base(f)));
        }
        for (n, nf) in self.new.iter().enumerate() {
            items.push((nf.sum.total(), Item::New(n)));
        }
        items.sort_by_key(|a| Reverse(a.0));
        items.into_iter().map(|(_, item)| item).collect()
    }
}
