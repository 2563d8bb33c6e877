//! The trace's side of a comparison: its acts summed into groups under the baseline's keys
//! and counters, each matched to the baseline group it belongs to.

use ioblame_counters::SLOTS;

use super::families::family_matches;
use crate::error::BaselineError;
use crate::model::{sum_inputs, ActInput, Baseline, Counter, GroupKey, Sum};

/// One group of the trace.
#[derive(Debug, Clone)]
pub(super) struct TraceGroup {
    /// Its key, normalised as the baseline's are.
    pub(super) key: GroupKey,
    /// Its IO; the histograms follow the baseline's counters.
    pub(super) sum: Sum,
    /// The baseline group it matched (index into [`Baseline::groups`]).
    pub(super) base: Option<usize>,
}

/// For each counter of the trace, the baseline counter with the same spec.
pub(super) fn counter_map(baseline: &[Counter], trace: &[Counter]) -> Vec<Option<usize>> {
    trace
        .iter()
        .map(|c| baseline.iter().position(|b| b.spec == c.spec))
        .collect()
}

/// The note naming the baseline's counters that no counter of the trace maps to (their
/// histograms are not compared); `None` when every one is compared.
pub(super) fn uncompared_note(baseline: &[Counter], cmap: &[Option<usize>]) -> Option<String> {
    let uncompared: Vec<&str> = baseline
        .iter()
        .enumerate()
        .filter(|(i, _)| !cmap.contains(&Some(*i)))
        .map(|(_, c)| c.spec.as_str())
        .collect();
    (!uncompared.is_empty()).then(|| {
        format!(
            "histograms of counters the trace was not analysed with are not compared: {}",
            uncompared.join("; ")
        )
    })
}

/// The acts of the trace summed into groups under the baseline's keys, in key order, their
/// histograms (one per each of the `n_trace` counters of the trace) moved to the baseline's
/// counters by `cmap` ([`counter_map`]). Not matched yet.
pub(super) fn trace_groups(
    baseline: &Baseline,
    inputs: &[ActInput<'_>],
    n_trace: usize,
    cmap: &[Option<usize>],
) -> Result<Vec<(GroupKey, Sum)>, BaselineError> {
    let sums = sum_inputs(inputs, n_trace, baseline.frames, baseline.user_frames)?;
    let n_base = baseline.counters.len();
    Ok(sums
        .into_iter()
        .map(|(k, mut s)| {
            let mut h = vec![[0u64; SLOTS]; n_base];
            for (j, hist) in s.hist.iter().enumerate() {
                if let Some(Some(i)) = cmap.get(j) {
                    for (x, y) in h[*i].iter_mut().zip(hist) {
                        *x = x.saturating_add(*y);
                    }
                }
            }
            s.hist = h;
            (k, s)
        })
        .collect())
}

/// Matches every group of the trace to the most specific baseline group: the one with the
/// same key, else the first whose key (globs in its strings) matches.
pub(super) fn match_groups(baseline: &Baseline, groups: Vec<(GroupKey, Sum)>) -> Vec<TraceGroup> {
    groups
        .into_iter()
        .map(|(key, sum)| {
            let base = baseline
                .groups
                .iter()
                .position(|g| g.key == key)
                .or_else(|| {
                    baseline
                        .groups
                        .iter()
                        .position(|g| key_matches(&g.key, &key))
                });
            TraceGroup { key, sum, base }
        })
        .collect()
}

/// Whether a trace key matches a baseline key (globs in the baseline's strings).
pub(super) fn key_matches(base: &GroupKey, k: &GroupKey) -> bool {
    base.reason == k.reason && family_matches(base, k)
}
