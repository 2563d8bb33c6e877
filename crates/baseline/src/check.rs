//! Comparing a trace against a baseline.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

use ioblame_attrib::{Dir, Via};
use ioblame_counters::SLOTS;
use serde::Serialize;

use crate::error::BaselineError;
use crate::file::human_bytes;
use crate::keys::{glob_match, ReasonClass};
use crate::model::{
    bytes_key, dir_word, hist_key, io_size_key, key_label, parse_counters, proportions, sat_sum,
    si, sum_inputs, ActInput, Baseline, Group, GroupKey, Sum, Tol, Tolerances, TOLERANCE_KEYS,
};

/// What kind of regression a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// Bytes of a direction changed beyond the tolerance.
    Bytes,
    /// The average IO size of a direction changed beyond the tolerance.
    IoSize,
    /// The share of sync write bytes changed beyond the tolerance.
    SyncWriteShare,
    /// A histogram's shape moved beyond the tolerance.
    Histogram,
    /// A significant group that the baseline does not have.
    NewGroup,
    /// A significant group of the baseline that the trace does not have.
    VanishedGroup,
}

/// What a finding is about: one group, or a role's IO on a file over all its intents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One group (role, via, reason, file, intent frames).
    Group,
    /// A role on a file, all vias and intents together.
    Role,
}

/// One regression, with the numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Kind of regression.
    pub kind: FindingKind,
    /// Group or role aggregate.
    pub scope: Scope,
    /// The group's name, or `role on file` for a role aggregate.
    pub subject: String,
    /// Role pattern.
    pub role: String,
    /// Via (`None` for a role aggregate).
    pub via: Option<String>,
    /// Writeback reason class (`None` for a role aggregate).
    pub reason: Option<String>,
    /// File pattern (`-` when unknown).
    pub file: String,
    /// Intent frames, innermost first (empty for a role aggregate).
    pub frames: Vec<String>,
    /// The metric (`write_bytes`, `write_io_size`, `sync_write_share`, a histogram's
    /// counter spec, `bytes` for new and vanished groups).
    pub metric: String,
    /// The baseline's value.
    pub baseline: f64,
    /// The trace's value.
    pub current: f64,
    /// Relative change `current / baseline - 1` where that is meaningful.
    pub change: Option<f64>,
    /// The tolerance that was exceeded.
    pub tolerance: Option<f64>,
    /// The finding in plain words.
    pub message: String,
}

/// The result of [`check`].
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// The regressions found (empty: the trace is within tolerance).
    pub regressions: Vec<Finding>,
    /// What was noticed but is not a regression (small new groups, shifts explained by
    /// unattributed IO, counters that could not be compared).
    pub notes: Vec<String>,
    /// The significance floor used, in bytes.
    pub floor_bytes: u64,
    /// Total bytes of the baseline.
    pub baseline_bytes: u64,
    /// Total bytes of the trace.
    pub trace_bytes: u64,
    /// Baseline groups compared (significant on either side).
    pub groups_compared: usize,
    /// Groups of the baseline.
    pub baseline_groups: usize,
    /// Groups of the trace (by key).
    pub trace_groups: usize,
}

impl CheckReport {
    /// Whether the trace regressed (at least one finding).
    pub fn regressed(&self) -> bool {
        !self.regressions.is_empty()
    }

    /// The report as one JSON document.
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct Doc<'a> {
            regressed: bool,
            #[serde(flatten)]
            report: &'a CheckReport,
        }
        serde_json::to_string_pretty(&Doc {
            regressed: self.regressed(),
            report: self,
        })
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The report for people.
    pub fn render_text(&self, out: &mut impl Write) -> io::Result<()> {
        if self.regressed() {
            writeln!(
                out,
                "ioblame check: REGRESSION: {} finding{}",
                self.regressions.len(),
                if self.regressions.len() == 1 { "" } else { "s" }
            )?;
            for f in &self.regressions {
                writeln!(out, "  - {}", f.message)?;
                if !f.frames.is_empty() {
                    writeln!(out, "      intent: {}", f.frames.join(" <- "))?;
                }
            }
        } else {
            writeln!(out, "ioblame check: OK: within the baseline's tolerances")?;
        }
        if !self.notes.is_empty() {
            writeln!(out, "notes:")?;
            for n in &self.notes {
                writeln!(out, "  - {n}")?;
            }
        }
        writeln!(
            out,
            "compared {} of {} baseline groups with {} groups of the trace; {} vs {} baseline in total; changes below {} ignored",
            self.groups_compared,
            self.baseline_groups,
            self.trace_groups,
            human_bytes(self.trace_bytes as f64),
            human_bytes(self.baseline_bytes as f64),
            human_bytes(self.floor_bytes as f64),
        )
    }
}

/// Unattributed bytes (the lost intent) per file pattern and direction, trace minus
/// baseline: what shifts of attributed bytes may be explained by.
struct Pool {
    delta: BTreeMap<String, [i64; 3]>,
}

impl Pool {
    /// How much of `delta` (a group's change in direction `d`) the pool explains, taken out
    /// of it: a positive return means "add this to the group's trace bytes".
    fn take(&mut self, file: &str, d: usize, delta: i64) -> i64 {
        let mut want = si(delta.unsigned_abs());
        let mut comp = 0;
        for key in [file, "-"] {
            if want == 0 {
                break;
            }
            let Some(e) = self.delta.get_mut(key) else {
                continue;
            };
            let avail = &mut e[d];
            if delta < 0 && *avail > 0 {
                // The group lost bytes that the lost intent gained.
                let t = want.min(*avail);
                *avail -= t;
                want -= t;
                comp += t;
            } else if delta > 0 && *avail < 0 {
                let t = want.min(-*avail);
                *avail += t;
                want -= t;
                comp -= t;
            }
            if file == "-" {
                break;
            }
        }
        comp
    }
}

/// `c/b` bounded by a tolerance factor: within when `1/(1+t) <= c/b <= 1+t`.
fn ratio_within(b: f64, c: f64, t: f64) -> bool {
    if b <= 0.0 {
        return c <= 0.0;
    }
    let r = c / b;
    r <= 1.0 + t + 1e-9 && r * (1.0 + t) >= 1.0 - 1e-9
}

/// Earth mover's distance between two distributions over ordered slots, in slots.
/// Both are normalised to sum 1 first.
fn emd(p: &[f64; SLOTS], q: &[f64; SLOTS]) -> f64 {
    let (sp, sq) = (p.iter().sum::<f64>(), q.iter().sum::<f64>());
    if sp <= 0.0 || sq <= 0.0 {
        return 0.0;
    }
    let (mut cp, mut cq, mut d) = (0.0, 0.0, 0.0);
    for i in 0..SLOTS - 1 {
        cp += p[i] / sp;
        cq += q[i] / sq;
        d += f64::abs(cp - cq);
    }
    d
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn change_text(b: f64, c: f64) -> String {
    if b <= 0.0 {
        "new".to_string()
    } else {
        format!("{:+.0}%", (c / b - 1.0) * 100.0)
    }
}

fn shape_text(p: &[f64; SLOTS]) -> String {
    let v: Vec<String> = p.iter().map(|x| format!("{:.0}", x * 100.0)).collect();
    format!("[{}]%", v.join(" "))
}

/// A finding about a group or aggregate, with the fields filled from its key.
struct Subject<'a> {
    scope: Scope,
    name: String,
    key: &'a GroupKey,
}

impl Subject<'_> {
    #[allow(clippy::too_many_arguments)]
    fn finding(
        &self,
        kind: FindingKind,
        metric: &str,
        baseline: f64,
        current: f64,
        change: Option<f64>,
        tolerance: Option<f64>,
        message: String,
    ) -> Finding {
        let group = self.scope == Scope::Group;
        Finding {
            kind,
            scope: self.scope,
            subject: self.name.clone(),
            role: self.key.role.clone(),
            via: group.then(|| self.key.via.name().to_string()),
            reason: group.then(|| self.key.reason.name().to_string()),
            file: self.key.file.clone(),
            frames: if group {
                self.key.frames.clone()
            } else {
                Vec::new()
            },
            metric: metric.to_string(),
            baseline,
            current,
            change,
            tolerance,
            message,
        }
    }
}

/// Whether a trace key matches a baseline key (globs in the baseline's strings).
fn key_matches(base: &GroupKey, k: &GroupKey) -> bool {
    base.via == k.via
        && base.reason == k.reason
        && base.frames.len() == k.frames.len()
        && glob_match(&base.role, &k.role)
        && glob_match(&base.file, &k.file)
        && base
            .frames
            .iter()
            .zip(&k.frames)
            .all(|(p, f)| glob_match(p, f))
}

/// The metrics of a baseline group as a [`Sum`] (histograms as proportions, not counts).
fn group_sum(g: &Group) -> Sum {
    Sum {
        bytes: g.bytes,
        ios: g.ios,
        sync_write_bytes: (g.sync_write_share * g.bytes[Dir::W.index()] as f64).round() as u64,
        hist: Vec::new(),
    }
}

/// Compares the acts of a trace with a baseline. `counter_specs` are the counters the
/// inputs' histograms follow; histograms are compared for counters whose spec is also in
/// the baseline.
pub fn check<S: AsRef<str>>(
    baseline: &Baseline,
    inputs: &[ActInput<'_>],
    counter_specs: &[S],
) -> Result<CheckReport, BaselineError> {
    let counters = parse_counters(counter_specs)?;
    let mut notes = Vec::new();
    // Trace counter j -> baseline counter.
    let cmap: Vec<Option<usize>> = counters
        .iter()
        .map(|c| baseline.counters.iter().position(|b| b.spec == c.spec))
        .collect();
    let uncompared: Vec<&str> = baseline
        .counters
        .iter()
        .enumerate()
        .filter(|(i, _)| !cmap.contains(&Some(*i)))
        .map(|(_, c)| c.spec.as_str())
        .collect();
    if !uncompared.is_empty() {
        notes.push(format!(
            "histograms of counters the trace was not analysed with are not compared: {}",
            uncompared.join("; ")
        ));
    }
    let sums = sum_inputs(inputs, counters.len(), baseline.frames)?;
    let nb = baseline.counters.len();
    // Histograms remapped to the baseline's counters.
    let sums: Vec<(GroupKey, Sum)> = sums
        .into_iter()
        .map(|(k, mut s)| {
            let mut h = vec![[0u64; SLOTS]; nb];
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
        .collect();
    let trace_total = sat_sum(sums.iter().map(|(_, s)| s.total()));
    let base_total = baseline.total();
    let d = &baseline.defaults;
    let floor = d.floor(&[base_total, trace_total]);

    // Match every trace key to the most specific baseline group.
    let assign: Vec<Option<usize>> = sums
        .iter()
        .map(|(k, _)| {
            baseline
                .groups
                .iter()
                .position(|g| &g.key == k)
                .or_else(|| baseline.groups.iter().position(|g| key_matches(&g.key, k)))
        })
        .collect();
    let mut matched: Vec<Option<Sum>> = vec![None; baseline.groups.len()];
    let mut unmatched: Vec<(GroupKey, Sum)> = Vec::new();
    for ((k, s), a) in sums.iter().zip(&assign) {
        match a {
            Some(i) => matched[*i].get_or_insert_with(Sum::default).add(s),
            None => unmatched.push((k.clone(), s.clone())),
        }
    }

    // The pool of unattributed bytes.
    let (pool_delta, base_unknown, trace_unknown) = unknown_pool(baseline, &sums, &assign);
    if base_unknown > 0 || trace_unknown > 0 {
        notes.push(format!(
            "unattributed bytes (lost intent): {} vs {} baseline; shifts between attributed and unattributed bytes are not regressions",
            human_bytes(trace_unknown as f64),
            human_bytes(base_unknown as f64)
        ));
    }

    let mut regressions: Vec<Finding> = Vec::new();
    // (role, file) patterns of aggregates already reported at group level for bytes or
    // sync share: the aggregate check would repeat it.
    let mut flagged_bytes: BTreeSet<(String, String)> = BTreeSet::new();
    let mut flagged_sync: BTreeSet<(String, String)> = BTreeSet::new();
    let mut groups_compared = 0;
    let (mut small_new, mut small_new_bytes) = (0usize, 0u64);

    // Group checks, largest change first (they draw on the pool in that order).
    enum Item<'a> {
        Base(usize),
        New(&'a GroupKey, &'a Sum),
    }
    let zero = Sum::default();
    let mut items: Vec<(u64, Item)> = Vec::new();
    for (i, g) in baseline.groups.iter().enumerate() {
        if g.is_unknown() {
            continue;
        }
        let c = matched[i].as_ref().map_or(0, Sum::total);
        items.push((g.total_bytes().abs_diff(c), Item::Base(i)));
    }
    for (k, s) in &unmatched {
        if k.via.via() != Via::Unknown {
            items.push((s.total(), Item::New(k, s)));
        }
    }
    items.sort_by_key(|a| std::cmp::Reverse(a.0));
    let mut pool = Pool { delta: pool_delta };

    for (_, item) in &items {
        match item {
            Item::New(k, s) => {
                let mut eff = 0i64;
                for dd in 0..3 {
                    let delta = si(s.bytes[dd]);
                    eff = eff.saturating_add(delta.saturating_add(pool.take(&k.file, dd, delta)));
                }
                let label = key_label(k);
                if s.total() < floor {
                    small_new += 1;
                    small_new_bytes = small_new_bytes.saturating_add(s.total());
                    continue;
                }
                if eff < si(floor) {
                    notes.push(format!(
                        "{label}: new group of {} matched by fewer unattributed bytes: not a regression",
                        human_bytes(s.total() as f64)
                    ));
                    continue;
                }
                let what: Vec<String> = Dir::ALL
                    .iter()
                    .filter(|d| s.bytes[d.index()] > 0)
                    .map(|d| {
                        format!(
                            "{} {} in {} IOs",
                            dir_word(*d),
                            human_bytes(s.bytes[d.index()] as f64),
                            s.ios[d.index()]
                        )
                    })
                    .collect();
                let subj = Subject {
                    scope: Scope::Group,
                    name: label.clone(),
                    key: k,
                };
                regressions.push(subj.finding(
                    FindingKind::NewGroup,
                    "bytes",
                    0.0,
                    s.total() as f64,
                    None,
                    None,
                    format!(
                        "new group {label}: {} ({} of the trace), not in the baseline",
                        what.join(", "),
                        pct(s.total() as f64 / trace_total.max(1) as f64)
                    ),
                ));
                if let Some(a) = aggregate_of(baseline, k) {
                    flagged_bytes.insert(a.clone());
                    flagged_sync.insert(a);
                }
            }
            Item::Base(i) => {
                let g = &baseline.groups[*i];
                let c = matched[*i].as_ref().unwrap_or(&zero);
                let (bt, ct) = (g.total_bytes(), c.total());
                if bt < floor && ct < floor {
                    continue;
                }
                groups_compared += 1;
                let tol = g.tolerance.or(&d.tolerances);
                let agg = (g.key.role.clone(), g.key.file.clone());
                let subj = Subject {
                    scope: Scope::Group,
                    name: g.name.clone(),
                    key: &g.key,
                };
                if ct == 0 {
                    let mut eff = 0i64;
                    for dd in 0..3 {
                        let delta = -si(g.bytes[dd]);
                        eff = eff.saturating_add(pool.take(&g.key.file, dd, delta));
                    }
                    if bt < floor {
                        continue;
                    }
                    let t = tol.get(bytes_key(dominant_dir(g))).and_then(|t| t.value());
                    if eff as f64 * (1.0 + t.unwrap_or(0.0)) >= bt as f64 {
                        notes.push(format!(
                            "{}: all its {} are unattributed in this trace: not a regression",
                            g.name,
                            human_bytes(bt as f64)
                        ));
                        continue;
                    }
                    regressions.push(subj.finding(
                        FindingKind::VanishedGroup,
                        "bytes",
                        bt as f64,
                        0.0,
                        Some(-1.0),
                        None,
                        format!(
                            "{}: vanished: {} {} in the baseline ({} of it), none in this trace",
                            g.name,
                            dir_word(dominant_dir(g)),
                            human_bytes(bt as f64),
                            pct(bt as f64 / base_total.max(1) as f64)
                        ),
                    ));
                    flagged_bytes.insert(agg.clone());
                    flagged_sync.insert(agg);
                    continue;
                }
                for dir in Dir::ALL {
                    let dd = dir.index();
                    let (b, cb) = (g.bytes[dd], c.bytes[dd]);
                    if b.max(cb) < floor {
                        continue;
                    }
                    let delta = si(cb).saturating_sub(si(b));
                    let eff = delta.saturating_add(pool.take(&g.key.file, dd, delta));
                    if eff.unsigned_abs() < floor {
                        continue;
                    }
                    let Some(t) = tol.get(bytes_key(dir)).and_then(|t| t.value()) else {
                        continue;
                    };
                    let ce = si(b).saturating_add(eff).max(0) as f64;
                    if ratio_within(b as f64, ce, t) {
                        continue;
                    }
                    let explained = if eff != delta {
                        format!(
                            "; {} of the change matched by unattributed bytes",
                            human_bytes(delta.saturating_sub(eff).unsigned_abs() as f64)
                        )
                    } else {
                        String::new()
                    };
                    regressions.push(subj.finding(
                        FindingKind::Bytes,
                        bytes_key(dir),
                        b as f64,
                        cb as f64,
                        (b > 0).then(|| ce / b as f64 - 1.0),
                        Some(t),
                        format!(
                            "{}: {} bytes {} vs {} baseline ({}, tolerance {}{explained})",
                            g.name,
                            dir_word(dir),
                            human_bytes(cb as f64),
                            human_bytes(b as f64),
                            change_text(b as f64, ce),
                            pct(t)
                        ),
                    ));
                    flagged_bytes.insert(agg.clone());
                }
                shape_checks(
                    baseline,
                    &subj,
                    g.bytes,
                    g.ios,
                    g.sync_write_share,
                    &g.hist
                        .iter()
                        .map(|h| (h.counter, h.n, h.p))
                        .collect::<Vec<_>>(),
                    c,
                    &tol,
                    floor,
                    &mut regressions,
                    &mut flagged_sync,
                );
            }
        }
    }
    if small_new > 0 {
        notes.push(format!(
            "{small_new} new group{} below the floor ({} together): ignored",
            if small_new == 1 { "" } else { "s" },
            human_bytes(small_new_bytes as f64)
        ));
    }

    // Role aggregates: a role's IO on a file over all vias and intents, the most stable
    // measure of how much it does.
    // The tolerance of an aggregate is the loosest of its groups' (a group loosened by hand
    // loosens its role's aggregate too).
    let mut aggs: Vec<((String, String), Sum, Sum, Tolerances)> = Vec::new();
    for g in baseline.groups.iter().filter(|g| !g.is_unknown()) {
        let k = (g.key.role.clone(), g.key.file.clone());
        let t = g.tolerance.or(&d.tolerances);
        match aggs.iter_mut().find(|a| a.0 == k) {
            Some(a) => {
                a.1.add(&group_sum(g));
                a.3 = loosest(&a.3, &t);
            }
            None => aggs.push((k, group_sum(g), Sum::default(), t)),
        }
    }
    for (k, s) in &sums {
        if k.via.via() == Via::Unknown {
            continue;
        }
        if let Some(a) = aggs
            .iter_mut()
            .find(|a| glob_match(&a.0 .0, &k.role) && glob_match(&a.0 .1, &k.file))
        {
            let mut s = s.clone();
            s.hist.clear();
            a.2.add(&s);
        }
    }
    // A fresh pool for this layer: the same bytes may explain a group and its aggregate.
    let mut pool = Pool {
        delta: unknown_pool(baseline, &sums, &assign).0,
    };
    for ((role, file), b, c, tol) in &aggs {
        let key = GroupKey {
            role: role.clone(),
            via: crate::model::ViaKey::of(Via::Page),
            reason: ReasonClass::None,
            file: file.clone(),
            frames: Vec::new(),
        };
        let name = if file == "-" {
            format!("{role} (all intents)")
        } else {
            format!("{role} on {file} (all intents)")
        };
        let subj = Subject {
            scope: Scope::Role,
            name,
            key: &key,
        };
        let agg = (role.clone(), file.clone());
        if !flagged_bytes.contains(&agg) {
            for dir in Dir::ALL {
                let dd = dir.index();
                let (bb, cb) = (b.bytes[dd], c.bytes[dd]);
                if bb.max(cb) < floor || bb == 0 {
                    continue;
                }
                let delta = si(cb).saturating_sub(si(bb));
                let eff = delta.saturating_add(pool.take(file, dd, delta));
                if eff.unsigned_abs() < floor {
                    continue;
                }
                let Some(t) = tol.get(bytes_key(dir)).and_then(|t| t.value()) else {
                    continue;
                };
                let ce = si(bb).saturating_add(eff).max(0) as f64;
                if ratio_within(bb as f64, ce, t) {
                    continue;
                }
                regressions.push(subj.finding(
                    FindingKind::Bytes,
                    bytes_key(dir),
                    bb as f64,
                    cb as f64,
                    Some(ce / bb as f64 - 1.0),
                    Some(t),
                    format!(
                        "{}: {} bytes {} vs {} baseline ({}, tolerance {})",
                        subj.name,
                        dir_word(dir),
                        human_bytes(cb as f64),
                        human_bytes(bb as f64),
                        change_text(bb as f64, ce),
                        pct(t)
                    ),
                ));
            }
        }
        if !flagged_sync.contains(&agg) {
            let w = Dir::W.index();
            if let Some(t) = tol.sync_write_share.and_then(|t| t.value()) {
                if b.bytes[w] >= floor && c.bytes[w] >= floor {
                    let (sb, sc) = (b.sync_share(), c.sync_share());
                    if (sc - sb).abs() > t + 1e-9 {
                        regressions.push(subj.finding(
                            FindingKind::SyncWriteShare,
                            "sync_write_share",
                            sb,
                            sc,
                            None,
                            Some(t),
                            format!(
                                "{}: sync writes {} of write bytes vs {} baseline (tolerance {:.0} points)",
                                subj.name,
                                pct(sc),
                                pct(sb),
                                t * 100.0
                            ),
                        ));
                    }
                }
            }
        }
    }

    Ok(CheckReport {
        regressions,
        notes,
        floor_bytes: floor,
        baseline_bytes: base_total,
        trace_bytes: trace_total,
        groups_compared,
        baseline_groups: baseline.groups.len(),
        trace_groups: sums.len(),
    })
}

/// Unattributed bytes per file pattern and direction, trace minus baseline, and the two
/// totals. Trace keys take the file pattern of the baseline group they matched.
fn unknown_pool(
    baseline: &Baseline,
    sums: &[(GroupKey, Sum)],
    assign: &[Option<usize>],
) -> (BTreeMap<String, [i64; 3]>, u64, u64) {
    let mut delta: BTreeMap<String, [i64; 3]> = BTreeMap::new();
    let (mut base, mut trace) = (0u64, 0u64);
    for g in baseline.groups.iter().filter(|g| g.is_unknown()) {
        let e = delta.entry(g.key.file.clone()).or_default();
        for (x, b) in e.iter_mut().zip(g.bytes) {
            *x = x.saturating_sub(si(b));
            base = base.saturating_add(b);
        }
    }
    for ((k, s), a) in sums.iter().zip(assign) {
        if k.via.via() != Via::Unknown {
            continue;
        }
        let file = a.map_or(&k.file, |i| &baseline.groups[i].key.file);
        let e = delta.entry(file.clone()).or_default();
        for (x, b) in e.iter_mut().zip(s.bytes) {
            *x = x.saturating_add(si(b));
            trace = trace.saturating_add(b);
        }
    }
    (delta, base, trace)
}

/// Per key, the looser of two tolerance sets (`off` is the loosest).
fn loosest(a: &Tolerances, b: &Tolerances) -> Tolerances {
    let mut out = Tolerances::default();
    for k in TOLERANCE_KEYS {
        let t = match (a.get(k), b.get(k)) {
            (Some(Tol::Off), _) | (_, Some(Tol::Off)) => Tol::Off,
            (Some(Tol::Value(x)), Some(Tol::Value(y))) => Tol::Value(x.max(y)),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => continue,
        };
        out.set(k, t);
    }
    out
}

/// The direction with the most bytes of a group.
fn dominant_dir(g: &Group) -> Dir {
    Dir::ALL
        .into_iter()
        .max_by_key(|d| g.bytes[d.index()])
        .unwrap_or(Dir::W)
}

/// The (role, file) aggregate of the baseline a trace key belongs to.
fn aggregate_of(baseline: &Baseline, k: &GroupKey) -> Option<(String, String)> {
    baseline
        .groups
        .iter()
        .filter(|g| !g.is_unknown())
        .find(|g| glob_match(&g.key.role, &k.role) && glob_match(&g.key.file, &k.file))
        .map(|g| (g.key.role.clone(), g.key.file.clone()))
        .or_else(|| Some((k.role.clone(), k.file.clone())))
}

/// Average IO sizes, sync-write share and histogram shapes of one group.
#[allow(clippy::too_many_arguments)]
fn shape_checks(
    baseline: &Baseline,
    subj: &Subject<'_>,
    bytes: [u64; 3],
    ios: [u64; 3],
    sync_share: f64,
    hist: &[(usize, u64, [f64; SLOTS])],
    c: &Sum,
    tol: &Tolerances,
    floor: u64,
    out: &mut Vec<Finding>,
    flagged_sync: &mut BTreeSet<(String, String)>,
) {
    let min_ios = baseline.defaults.min_ios.max(1);
    for dir in Dir::ALL {
        let dd = dir.index();
        if ios[dd] < min_ios || c.ios[dd] < min_ios || bytes[dd] == 0 || c.bytes[dd] == 0 {
            continue;
        }
        let Some(t) = tol.get(io_size_key(dir)).and_then(|t| t.value()) else {
            continue;
        };
        let ab = bytes[dd] as f64 / ios[dd] as f64;
        let ac = c.bytes[dd] as f64 / c.ios[dd] as f64;
        if ratio_within(ab, ac, t) {
            continue;
        }
        out.push(subj.finding(
            FindingKind::IoSize,
            io_size_key(dir),
            ab,
            ac,
            Some(ac / ab - 1.0),
            Some(t),
            format!(
                "{}: average {} size {} vs {} baseline ({}, tolerance {}; {} IOs vs {})",
                subj.name,
                dir_word(dir),
                human_bytes(ac),
                human_bytes(ab),
                change_text(ab, ac),
                pct(t),
                c.ios[dd],
                ios[dd]
            ),
        ));
    }
    let w = Dir::W.index();
    if let Some(t) = tol.sync_write_share.and_then(|t| t.value()) {
        if bytes[w] >= floor && c.bytes[w] >= floor {
            let sc = c.sync_share();
            if (sc - sync_share).abs() > t + 1e-9 {
                out.push(subj.finding(
                    FindingKind::SyncWriteShare,
                    "sync_write_share",
                    sync_share,
                    sc,
                    None,
                    Some(t),
                    format!(
                        "{}: sync writes {} of write bytes vs {} baseline (tolerance {:.0} points)",
                        subj.name,
                        pct(sc),
                        pct(sync_share),
                        t * 100.0
                    ),
                ));
                flagged_sync.insert((subj.key.role.clone(), subj.key.file.clone()));
            }
        }
    }
    for &(counter, n, p) in hist {
        let Some(cnt) = baseline.counters.get(counter) else {
            continue;
        };
        let Some(h) = c.hist.get(counter) else {
            continue;
        };
        let nc = sat_sum(h.iter().copied());
        if n < min_ios || nc < min_ios {
            continue;
        }
        let Some(t) = tol.get(hist_key(cnt.parsed.field)).and_then(|t| t.value()) else {
            continue;
        };
        let q = proportions(h);
        let dist = emd(&p, &q);
        if dist <= t + 1e-9 {
            continue;
        }
        out.push(subj.finding(
            FindingKind::Histogram,
            &cnt.spec,
            0.0,
            dist,
            None,
            Some(t),
            format!(
                "{}: histogram `{}` moved {:.2} slots (tolerance {}): {} vs {} baseline",
                subj.name,
                cnt.spec,
                dist,
                t,
                shape_text(&q),
                shape_text(&p)
            ),
        ));
    }
}
