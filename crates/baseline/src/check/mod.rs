//! Comparing a trace against a baseline.
//!
//! [`check_with`] runs a [`Comparison`] stage by stage:
//!
//! 1. the groups of the trace: its acts summed under the baseline's keys and counters
//!    ([`groups::trace_groups`]), each matched to the baseline group it belongs to
//!    ([`groups::match_groups`]);
//! 2. unattributed IO on both sides ([`pool::LostIntent`]): a note, and the pool that
//!    explains shifts of writeback-linked bytes;
//! 3. the groups, as families of siblings ([`families::Families`]), largest change first:
//!    new and vanished families, then each metric ([`judge::Subject`]: bytes, sync-write
//!    share, average IO size, histogram shapes);
//! 4. the role aggregates ([`aggregates::role_aggregates`]): bytes and sync-write share of
//!    a role on a file, unless its groups said it already;
//! 5. the verdict ([`CheckReport`]).

mod aggregates;
mod families;
mod groups;
mod judge;
mod pool;
mod report;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use ioblame_attrib::{Dir, Via};

use crate::error::{BaselineError, SymbolsMismatch};
use crate::file::human_bytes;
use crate::model::{
    inputs_have_user_frames, inputs_symbolized, parse_counters, sat_sum, si, ActInput, Baseline,
    Sum, Unattributed, ViaKey,
};
use crate::tolerances::bytes_key;
use aggregates::{aggregate_of, role_aggregates, Aggregate};
use families::{family_label, Families, Family, Item, NewFamily};
use groups::{counter_map, match_groups, trace_groups, uncompared_note, TraceGroup};
use judge::{dominant_dir, Subject};
use pool::{pool_eligible, LostIntent, Pool};
pub use report::{CheckReport, Finding, FindingKind, Scope, ScopeNote};

/// Options of [`check_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// Judge unattributed IO strictly whatever the baseline says (`ioblame check
    /// --strict`): it is compared like any other group and explains nothing, so a writer
    /// whose bytes went unattributed has vanished (see [`Unattributed::Strict`]).
    pub strict: bool,
}

/// Compares the acts of a trace with a baseline, with the baseline's own settings. See
/// [`check_with`].
pub fn check<S: AsRef<str>>(
    baseline: &Baseline,
    inputs: &[ActInput<'_>],
    counter_specs: &[S],
) -> Result<CheckReport, BaselineError> {
    check_with(baseline, inputs, counter_specs, &CheckOptions::default())
}

/// Compares the acts of a trace with a baseline. `counter_specs` are the counters the
/// inputs' histograms follow; histograms are compared for counters whose spec is also in
/// the baseline.
///
/// Fails with [`BaselineError::Symbols`] when one side has kernel symbols and the other has
/// none: their intent keys could never match, and every group would look new or vanished;
/// and with [`BaselineError::NoUserFrames`] when the baseline keys its groups by the
/// application's frames and the trace has none, for the same reason.
pub fn check_with<S: AsRef<str>>(
    baseline: &Baseline,
    inputs: &[ActInput<'_>],
    counter_specs: &[S],
    opts: &CheckOptions,
) -> Result<CheckReport, BaselineError> {
    let mut c = Comparison::new(baseline, inputs, counter_specs, opts)?;
    c.judge_groups();
    c.judge_aggregates();
    Ok(c.verdict())
}

/// Whether groups of this via are compared as groups: all of them when unattributed IO is
/// judged strictly, else all but unattributed IO (which then only explains changes).
fn compared_as_group(strict: bool, via: ViaKey) -> bool {
    strict || via.via() != Via::Unknown
}

/// Fails when the baseline keys groups by the application's frames and no input has user
/// frames (a trace recorded without `--user-stacks`). The other way round is the baseline
/// of a trace without user frames, or a file written before they were keyed: it keeps no
/// user frames, and the trace's are left out of its keys.
fn user_frames_comparable(
    baseline: &Baseline,
    inputs: &[ActInput<'_>],
) -> Result<(), BaselineError> {
    let keyed = baseline.user_frames > 0 && baseline.groups.iter().any(|g| !g.key.user.is_empty());
    if keyed && !inputs_have_user_frames(inputs) {
        return Err(BaselineError::NoUserFrames {
            user_frames: baseline.user_frames,
        });
    }
    Ok(())
}

/// Fails when one side has kernel symbols and the other has none (`trace`: what
/// [`inputs_symbolized`] says of the trace).
fn symbols_comparable(baseline: bool, trace: Option<bool>) -> Result<(), BaselineError> {
    match (baseline, trace) {
        (true, Some(false)) => Err(SymbolsMismatch::TraceUnsymbolized.into()),
        (false, Some(true)) => Err(SymbolsMismatch::BaselineUnsymbolized.into()),
        _ => Ok(()),
    }
}

/// One comparison of a trace with a baseline, judged stage by stage (see the module's
/// documentation); what the stages find accumulates in it until [`Comparison::verdict`].
struct Comparison<'b> {
    /// The baseline.
    baseline: &'b Baseline,
    /// Unattributed IO compared like any group and explaining nothing.
    strict: bool,
    /// The groups of the trace, matched.
    trace: Vec<TraceGroup>,
    /// Unattributed IO of both sides.
    lost: LostIntent,
    /// Total bytes of the baseline.
    base_total: u64,
    /// Total bytes of the trace.
    trace_total: u64,
    /// The significance floor in bytes.
    floor: u64,
    /// The regressions found so far.
    regressions: Vec<Finding>,
    /// The notes so far.
    notes: Vec<String>,
    /// (role, file) patterns of aggregates already reported at group level for bytes: the
    /// aggregate check would repeat it.
    flagged_bytes: BTreeSet<(String, String)>,
    /// The same for the sync-write share.
    flagged_sync: BTreeSet<(String, String)>,
    /// Baseline groups compared (significant on either side).
    groups_compared: usize,
    /// New groups below the floor: how many.
    small_new: usize,
    /// New groups below the floor: their bytes.
    small_new_bytes: u64,
}

impl<'b> Comparison<'b> {
    /// The first stages: the counters and symbols of both sides checked, the groups of the
    /// trace built and matched to the baseline's, unattributed IO measured.
    fn new<S: AsRef<str>>(
        baseline: &'b Baseline,
        inputs: &[ActInput<'_>],
        counter_specs: &[S],
        opts: &CheckOptions,
    ) -> Result<Comparison<'b>, BaselineError> {
        let counters = parse_counters(counter_specs)?;
        symbols_comparable(baseline.symbolized, inputs_symbolized(inputs))?;
        user_frames_comparable(baseline, inputs)?;
        let strict = opts.strict || baseline.defaults.unattributed == Unattributed::Strict;
        let mut notes = Vec::new();
        let cmap = counter_map(&baseline.counters, &counters);
        notes.extend(uncompared_note(&baseline.counters, &cmap));
        let groups = trace_groups(baseline, inputs, counters.len(), &cmap)?;
        let trace_total = sat_sum(groups.iter().map(|(_, s)| s.total()));
        let base_total = baseline.total();
        let floor = baseline.defaults.floor(&[base_total, trace_total]);
        let trace = match_groups(baseline, groups);
        let lost = LostIntent::measure(baseline, &trace);
        notes.extend(lost.note(strict));
        Ok(Comparison {
            baseline,
            strict,
            trace,
            lost,
            base_total,
            trace_total,
            floor,
            regressions: Vec::new(),
            notes,
            flagged_bytes: BTreeSet::new(),
            flagged_sync: BTreeSet::new(),
            groups_compared: 0,
            small_new: 0,
            small_new_bytes: 0,
        })
    }

    /// Judges the groups as families of siblings, largest change first, drawing on one pool
    /// of unattributed bytes.
    fn judge_groups(&mut self) {
        let families = Families::build(self.baseline, &self.trace, self.strict);
        let mut pool = self.lost.pool(self.strict);
        for item in families.order() {
            match item {
                Item::New(n) => self.judge_new(&families.new[n], &mut pool),
                Item::Base(f) => self.judge_family(&families.base[f], &families.matched, &mut pool),
            }
        }
        if self.small_new > 0 {
            self.notes.push(format!(
                "{} new group{} below the floor ({} together): ignored",
                self.small_new,
                if self.small_new == 1 { "" } else { "s" },
                human_bytes(self.small_new_bytes as f64)
            ));
        }
    }

    /// Judges a family the baseline does not have: ignored below the floor, a note when the
    /// unattributed bytes it took explain it, else a regression.
    fn judge_new(&mut self, nf: &NewFamily, pool: &mut Pool) {
        let NewFamily {
            key: k,
            sum: s,
            reasons,
        } = nf;
        if s.total() == 0 {
            return;
        }
        let label = family_label(k, reasons);
        if s.total() < self.floor {
            self.small_new += 1;
            self.small_new_bytes = self.small_new_bytes.saturating_add(s.total());
            return;
        }
        if pool_eligible(k.via) {
            let mut eff = 0i64;
            for dd in 0..3 {
                let delta = si(s.bytes[dd]);
                eff = eff.saturating_add(delta.saturating_add(pool.take(&k.file, dd, delta)));
            }
            if eff < si(self.floor) {
                self.notes.push(format!(
                    "{label}: new group of {} matched by fewer unattributed bytes: not a regression",
                    human_bytes(s.total() as f64)
                ));
                return;
            }
        }
        let subj = Subject::group(label, k, reasons);
        self.regressions
            .push(subj.new_group_finding(s, self.trace_total));
        let agg = aggregate_of(self.baseline, k);
        self.flagged_bytes.insert(agg.clone());
        self.flagged_sync.insert(agg);
    }

    /// Judges a family of the baseline: vanished, or its bytes per direction and
    /// sync-write share, then each member's average IO sizes and histogram shapes.
    /// `matched`: the trace's IO per baseline group.
    fn judge_family(&mut self, fam: &Family, matched: &[Option<Sum>], pool: &mut Pool) {
        let (bt, ct) = (fam.base.total(), fam.trace.total());
        if bt < self.floor && ct < self.floor {
            return;
        }
        self.groups_compared += fam.members.len();
        let name = if fam.members.len() == 1 && fam.reasons.len() == 1 {
            self.baseline.groups[fam.members[0]].name.clone()
        } else {
            family_label(&fam.key, &fam.reasons)
        };
        let subj = Subject::group(name, &fam.key, &fam.reasons);
        if ct == 0 {
            self.judge_vanished(fam, &subj, pool);
            return;
        }
        let agg = (fam.key.role.clone(), fam.key.file.clone());
        let eligible = pool_eligible(fam.key.via);
        for dir in Dir::ALL {
            let dd = dir.index();
            let (b, cb) = (fam.base.bytes[dd], fam.trace.bytes[dd]);
            if b.max(cb) < self.floor || b.max(cb) == 0 {
                continue;
            }
            let delta = si(cb).saturating_sub(si(b));
            let credit = if eligible {
                pool.take(&fam.key.file, dd, delta)
            } else {
                0
            };
            if let Some(f) = subj.bytes_finding(dir, b, cb, credit, &fam.tol, self.floor) {
                self.regressions.push(f);
                self.flagged_bytes.insert(agg.clone());
            }
        }
        if let Some(f) = subj.sync_finding(&fam.base, &fam.trace, &fam.tol, self.floor) {
            self.regressions.push(f);
            self.flagged_sync.insert(agg);
        }
        // IO sizes and histogram shapes per member: bytes moving between siblings move
        // their IOs along.
        for &i in &fam.members {
            let Some(c) = matched[i].as_ref() else {
                continue;
            };
            let g = &self.baseline.groups[i];
            let name = if fam.members.len() == 1 {
                subj.name.clone()
            } else {
                g.name.clone()
            };
            self.judge_shapes(&Subject::group(name, &g.key, &BTreeSet::new()), i, c);
        }
    }

    /// Judges a family of the baseline that the trace does not have: not a regression when
    /// the unattributed bytes it may have become (within the bytes tolerance of its dominant
    /// direction) explain all of it.
    fn judge_vanished(&mut self, fam: &Family, subj: &Subject, pool: &mut Pool) {
        let bt = fam.base.total();
        let mut eff = 0i64;
        if pool_eligible(fam.key.via) {
            for dd in 0..3 {
                let delta = -si(fam.base.bytes[dd]);
                eff = eff.saturating_add(pool.take(&fam.key.file, dd, delta));
            }
        }
        if bt < self.floor {
            return;
        }
        let t = fam
            .tol
            .get(bytes_key(dominant_dir(&fam.base.bytes)))
            .and_then(|t| t.value());
        if eff > 0 && eff as f64 * (1.0 + t.unwrap_or(0.0)) >= bt as f64 {
            self.notes.push(format!(
                "{}: all its {} are unattributed in this trace: not a regression",
                subj.name,
                human_bytes(bt as f64)
            ));
            return;
        }
        self.regressions
            .push(subj.vanished_finding(&fam.base, self.base_total, eff));
        let agg = (fam.key.role.clone(), fam.key.file.clone());
        self.flagged_bytes.insert(agg.clone());
        self.flagged_sync.insert(agg);
    }

    /// Judges the average IO sizes and histogram shapes of baseline group `i` against the
    /// trace's IO that matched it (`c`), with the group's own tolerances.
    fn judge_shapes(&mut self, subj: &Subject, i: usize, c: &Sum) {
        let g = &self.baseline.groups[i];
        let tol = g.tolerance.or(&self.baseline.defaults.tolerances);
        let min_ios = self.baseline.defaults.min_ios.max(1);
        let b = g.sum();
        for dir in Dir::ALL {
            if let Some(f) = subj.io_size_finding(dir, &b, c, &tol, min_ios) {
                self.regressions.push(f);
            }
        }
        if let Some(sb) = g.behind_share {
            let b_ios = sat_sum(g.ios.iter().copied());
            if let Some(f) = subj.behind_finding(sb, b_ios, c, &tol, min_ios) {
                self.regressions.push(f);
            }
        }
        for h in &g.hist {
            let Some(counter) = self.baseline.counters.get(h.counter) else {
                continue;
            };
            let Some(ch) = c.hist.get(h.counter) else {
                continue;
            };
            if let Some(f) = subj.histogram_finding(counter, h, ch, &tol, min_ios) {
                self.regressions.push(f);
            }
        }
    }

    /// Judges the role aggregates, drawing on a fresh pool of unattributed bytes (the same
    /// bytes may explain a group and its aggregate).
    fn judge_aggregates(&mut self) {
        let aggs = role_aggregates(self.baseline, &self.trace, self.strict);
        let mut pool = self.lost.pool(self.strict);
        for a in &aggs {
            self.judge_aggregate(a, &mut pool);
        }
    }

    /// Judges one role aggregate: its bytes per direction (only the change of
    /// writeback-linked bytes can be explained by the pool) and its sync-write share, each
    /// unless a group of it was reported for the same.
    fn judge_aggregate(&mut self, a: &Aggregate, pool: &mut Pool) {
        let subj = Subject::role(&a.role, &a.file);
        let key = a.key();
        if !self.flagged_bytes.contains(&key) {
            for dir in Dir::ALL {
                let dd = dir.index();
                let (bb, cb) = (a.base.bytes[dd], a.trace.bytes[dd]);
                if bb.max(cb) < self.floor || bb == 0 {
                    continue;
                }
                let eligible_delta =
                    si(a.trace_eligible[dd]).saturating_sub(si(a.base_eligible[dd]));
                let credit = pool.take(&a.file, dd, eligible_delta);
                if let Some(f) = subj.bytes_finding(dir, bb, cb, credit, &a.tol, self.floor) {
                    self.regressions.push(f);
                }
            }
        }
        if !self.flagged_sync.contains(&key) {
            if let Some(f) = subj.sync_finding(&a.base, &a.trace, &a.tol, self.floor) {
                self.regressions.push(f);
            }
        }
    }

    /// The verdict: what the stages found.
    fn verdict(self) -> CheckReport {
        CheckReport {
            regressions: self.regressions,
            notes: self.notes,
            floor_bytes: self.floor,
            baseline_bytes: self.base_total,
            trace_bytes: self.trace_total,
            groups_compared: self.groups_compared,
            baseline_groups: self.baseline.groups.len(),
            trace_groups: self.trace.len(),
            scope: None,
        }
    }
}
