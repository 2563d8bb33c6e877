//! Role aggregates: a role's IO on a file over all its vias and intents, the most stable
//! measure of how much it does, compared after the groups.

use super::compared_as_group;
use super::groups::TraceGroup;
use super::pool::pool_eligible;
use crate::keys::glob_match;
use crate::model::{add_bytes, Baseline, GroupKey, Sum};
use crate::tolerances::Tolerances;

/// A role's IO on a file (patterns of the baseline) over all its vias and intents.
#[derive(Debug, Clone)]
pub(super) struct Aggregate {
    /// Role pattern.
    pub(super) role: String,
    /// File pattern.
    pub(super) file: String,
    /// The baseline's IO (no histograms).
    pub(super) base: Sum,
    /// The trace's IO (no histograms).
    pub(super) trace: Sum,
    /// Baseline bytes per direction of vias that unattributed IO may stand for.
    pub(super) base_eligible: [u64; 3],
    /// Trace bytes per direction of vias that unattributed IO may stand for.
    pub(super) trace_eligible: [u64; 3],
    /// The loosest of its groups' tolerances (a group loosened by hand loosens its role's
    /// aggregate too).
    pub(super) tol: Tolerances,
}

impl Aggregate {
    /// The aggregate's (role, file) patterns.
    pub(super) fn key(&self) -> (String, String) {
        (self.role.clone(), self.file.clone())
    }
}

/// The aggregates of the baseline's groups compared as groups, in order of their first
/// group, with the trace's IO of each: every trace group compared as a group goes to the
/// first aggregate whose patterns match its role and file.
pub(super) fn role_aggregates(
    baseline: &Baseline,
    trace: &[TraceGroup],
    strict: bool,
) -> Vec<Aggregate> {
    let mut aggs: Vec<Aggregate> = Vec::new();
    for g in baseline
        .groups
        .iter()
        .filter(|g| compared_as_group(strict, g.key.via))
    {
        let t = g.tolerance.or(&baseline.defaults.tolerances);
        let i = match aggs
            .iter()
            .position(|a| a.role == g.key.role && a.file == g.key.file)
        {
            Some(i) => {
                aggs[i].tol = aggs[i].tol.loosest(&t);
                i
            }
            None => {
                aggs.push(Aggregate {
                    role: g.key.role.clone(),
                    file: g.key.file.clone(),
                    base: Sum::default(),
                    trace: Sum::default(),
                    base_eligible: [0; 3],
                    trace_eligible: [0; 3],
                    tol: t,
                });
                aggs.len() - 1
            }
        };
        let a = &mut aggs[i];
        a.base.add(&g.sum());
        if pool_eligible(g.key.via) {
            add_bytes(&mut a.base_eligible, &g.bytes);
        }
    }
    for TraceGroup { key: k, sum: s, .. } in trace {
        if !compared_as_group(strict, k.via) {
            continue;
        }
        if let Some(a) = aggs
            .iter_mut()
            .find(|a| glob_match(&a.role, &k.role) && glob_match(&a.file, &k.file))
        {
            a.trace.add_counts(s);
            if pool_eligible(k.via) {
                add_bytes(&mut a.trace_eligible, &s.bytes);
            }
        }
    }
    aggs
}

/// The (role, file) aggregate a trace key belongs to: that of the first baseline group
/// (unattributed IO aside) whose patterns match its role and file, else its own.
pub(super) fn aggregate_of(baseline: &Baseline, k: &GroupKey) -> (String, String) {
    baseline
        .groups
        .iter()
        .filter(|g| !g.is_unknown())
        .find(|g| glob_match(&g.key.role, &k.role) && glob_match(&g.key.file, &k.file))
        .map_or_else(
            || (k.role.clone(), k.file.clone()),
            |g| (g.key.role.clone(), g.key.file.clone()),
        )
}
