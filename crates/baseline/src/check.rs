//! Comparing a trace against a baseline.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

use ioblame_attrib::{Dir, Via};
use ioblame_counters::SLOTS;
use serde::Serialize;

use crate::error::BaselineError;
use crate::file::{hist_decimals, human_bytes, rounded};
use crate::keys::{glob_match, ReasonClass};
use crate::model::{
    bytes_key, dir_word, hist_key, inputs_symbolized, io_size_key, key_label, parse_counters,
    proportions, sat_sum, si, sum_inputs, ActInput, Baseline, Group, GroupKey, Sum, Tol,
    Tolerances, Unattributed, ViaKey, TOLERANCE_KEYS,
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
/// baseline: what shifts of attributed bytes may be explained by (`unattributed = "pool"`;
/// empty and unused when strict).
struct Pool {
    delta: BTreeMap<String, [i64; 3]>,
}

impl Pool {
    /// How much of `delta` (a change in direction `d` of bytes that writeback links to their
    /// dirtier) the pool explains, taken out of it: a positive return means "add this to the
    /// trace's bytes". The return has the opposite sign of `delta` and is at most as large.
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

/// Whether unattributed IO can stand for IO of this via: only writeback loses the link to
/// the dirtier (page, buffer and inode dirtiers); direct IO, reads and journal IO are
/// charged to their issuer and never become unattributed.
fn pool_eligible(v: ViaKey) -> bool {
    matches!(v.via(), Via::Page | Via::Buffer | Via::Inode)
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

/// What a finding is about, with the fields it fills.
struct Subject {
    scope: Scope,
    name: String,
    role: String,
    via: Option<String>,
    reason: Option<String>,
    file: String,
    frames: Vec<String>,
}

impl Subject {
    /// A group (or a family of sibling groups) with the reason classes it spans.
    fn group(name: String, key: &GroupKey, reasons: &BTreeSet<ReasonClass>) -> Subject {
        let reason = if reasons.is_empty() {
            key.reason.name().to_string()
        } else {
            reasons
                .iter()
                .map(|r| r.name())
                .collect::<Vec<_>>()
                .join("+")
        };
        Subject {
            scope: Scope::Group,
            name,
            role: key.role.clone(),
            via: Some(key.via.name().to_string()),
            reason: Some(reason),
            file: key.file.clone(),
            frames: key.frames.clone(),
        }
    }

    /// A role's IO on a file over all its vias and intents.
    fn role(role: &str, file: &str) -> Subject {
        let name = if file == "-" {
            format!("{role} (all intents)")
        } else {
            format!("{role} on {file} (all intents)")
        };
        Subject {
            scope: Scope::Role,
            name,
            role: role.to_string(),
            via: None,
            reason: None,
            file: file.to_string(),
            frames: Vec::new(),
        }
    }

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
        Finding {
            kind,
            scope: self.scope,
            subject: self.name.clone(),
            role: self.role.clone(),
            via: self.via.clone(),
            reason: self.reason.clone(),
            file: self.file.clone(),
            frames: self.frames.clone(),
            metric: metric.to_string(),
            baseline,
            current,
            change,
            tolerance,
            message,
        }
    }

    /// The byte check of one direction: `None` within tolerance (or below the floor).
    /// `credit` is what unattributed bytes explain of the change (0 when strict); the
    /// change and the verdict are computed after it, and the message says how much it was.
    #[allow(clippy::too_many_arguments)]
    fn bytes_finding(
        &self,
        dir: Dir,
        b: u64,
        c: u64,
        credit: i64,
        tol: &Tolerances,
        floor: u64,
    ) -> Option<Finding> {
        let delta = si(c).saturating_sub(si(b));
        let eff = delta.saturating_add(credit);
        if eff.unsigned_abs() < floor {
            return None;
        }
        let t = tol.get(bytes_key(dir)).and_then(|t| t.value())?;
        let ce = si(b).saturating_add(eff).max(0) as f64;
        if ratio_within(b as f64, ce, t) {
            return None;
        }
        let explained = if credit != 0 {
            format!(
                "; {} of the change matched by unattributed bytes",
                human_bytes(credit.unsigned_abs() as f64)
            )
        } else {
            String::new()
        };
        Some(self.finding(
            FindingKind::Bytes,
            bytes_key(dir),
            b as f64,
            c as f64,
            (b > 0).then(|| ce / b as f64 - 1.0),
            Some(t),
            format!(
                "{}: {} bytes {} vs {} baseline ({}, tolerance {}{explained})",
                self.name,
                dir_word(dir),
                human_bytes(c as f64),
                human_bytes(b as f64),
                change_text(b as f64, ce),
                pct(t)
            ),
        ))
    }

    /// The sync-write share check of a write-byte sum.
    fn sync_finding(&self, b: &Sum, c: &Sum, tol: &Tolerances, floor: u64) -> Option<Finding> {
        let w = Dir::W.index();
        let t = tol.sync_write_share.and_then(|t| t.value())?;
        if b.bytes[w] == 0 || c.bytes[w] == 0 || b.bytes[w] < floor || c.bytes[w] < floor {
            return None;
        }
        let (sb, sc) = (b.sync_share(), c.sync_share());
        if (sc - sb).abs() <= t + 1e-9 {
            return None;
        }
        Some(self.finding(
            FindingKind::SyncWriteShare,
            "sync_write_share",
            sb,
            sc,
            None,
            Some(t),
            format!(
                "{}: sync writes {} of write bytes vs {} baseline (tolerance {:.0} points)",
                self.name,
                pct(sc),
                pct(sb),
                t * 100.0
            ),
        ))
    }
}

/// Whether a trace key matches a baseline key (globs in the baseline's strings).
fn key_matches(base: &GroupKey, k: &GroupKey) -> bool {
    base.reason == k.reason && family_matches(base, k)
}

/// Whether a trace key matches a baseline key but for the writeback reason: the two are
/// siblings (the same role, via, file and code path), whose bytes move between reasons with
/// timing (sync(2) or the flusher's own schedule, or the task's fsync).
fn family_matches(base: &GroupKey, k: &GroupKey) -> bool {
    base.via == k.via
        && base.frames.len() == k.frames.len()
        && glob_match(&base.role, &k.role)
        && glob_match(&base.file, &k.file)
        && base
            .frames
            .iter()
            .zip(&k.frames)
            .all(|(p, f)| glob_match(p, f))
}

/// Whether two keys are the same but for the reason (exact strings).
fn same_family(a: &GroupKey, b: &GroupKey) -> bool {
    a.role == b.role && a.via == b.via && a.file == b.file && a.frames == b.frames
}

/// The label of a family of sibling groups spanning `reasons`.
fn family_label(k: &GroupKey, reasons: &BTreeSet<ReasonClass>) -> String {
    if reasons.len() <= 1 {
        let mut k = k.clone();
        if let Some(r) = reasons.iter().next() {
            k.reason = *r;
        }
        return key_label(&k);
    }
    let mut s = format!("{} via {}", k.role, k.via.name());
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

/// The metrics of a baseline group as a [`Sum`] (histograms as proportions, not counts).
fn group_sum(g: &Group) -> Sum {
    Sum {
        bytes: g.bytes,
        ios: g.ios,
        sync_write_bytes: (g.sync_write_share * g.bytes[Dir::W.index()] as f64).round() as u64,
        hist: Vec::new(),
    }
}

/// Baseline groups that differ only in their writeback reason, and the trace's IO that
/// matched any of them: bytes move freely between them (compared as one).
struct Family {
    /// The key of the first member (its reason is not part of the family).
    key: GroupKey,
    /// Indexes of the member groups in the baseline.
    members: Vec<usize>,
    /// The members' metrics summed.
    base: Sum,
    /// The trace's IO of the family.
    trace: Sum,
    /// Reason classes on either side.
    reasons: BTreeSet<ReasonClass>,
    /// The loosest of the members' tolerances.
    tol: Tolerances,
}

/// Trace keys that match no baseline group, summed by family.
struct NewFamily {
    key: GroupKey,
    sum: Sum,
    reasons: BTreeSet<ReasonClass>,
}

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
/// none: their intent keys could never match, and every group would look new or vanished.
pub fn check_with<S: AsRef<str>>(
    baseline: &Baseline,
    inputs: &[ActInput<'_>],
    counter_specs: &[S],
    opts: &CheckOptions,
) -> Result<CheckReport, BaselineError> {
    let counters = parse_counters(counter_specs)?;
    match (baseline.symbolized, inputs_symbolized(inputs)) {
        (true, Some(false)) => {
            return Err(BaselineError::Symbols(
                "the trace has no kernel symbols (every intent frame is \"?\") but the baseline \
                 was made with them: the intents cannot be compared. For a perf.data recording \
                 pass --kallsyms FILE (a copy of the recording host's /proc/kallsyms)"
                    .into(),
            ))
        }
        (false, Some(true)) => {
            return Err(BaselineError::Symbols(
                "the baseline was made without kernel symbols (every intent frame is \"?\", \
                 `symbols = false`) but the trace has them: the intents cannot be compared. \
                 Make the baseline again from a trace with symbols"
                    .into(),
            ))
        }
        _ => {}
    }
    let strict = opts.strict || baseline.defaults.unattributed == Unattributed::Strict;
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
    // What is compared as a group: everything when strict, else all but unattributed IO.
    let counted = |v: ViaKey| strict || v.via() != Via::Unknown;

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

    // Families of sibling groups.
    let mut families: Vec<Family> = Vec::new();
    let mut family_of: Vec<Option<usize>> = vec![None; baseline.groups.len()];
    for (i, g) in baseline.groups.iter().enumerate() {
        if !counted(g.key.via) {
            continue;
        }
        let t = g.tolerance.or(&d.tolerances);
        let f = match families.iter().position(|f| same_family(&f.key, &g.key)) {
            Some(f) => {
                let fam = &mut families[f];
                fam.tol = loosest(&fam.tol, &t);
                f
            }
            None => {
                families.push(Family {
                    key: g.key.clone(),
                    members: Vec::new(),
                    base: Sum::default(),
                    trace: Sum::default(),
                    reasons: BTreeSet::new(),
                    tol: t,
                });
                families.len() - 1
            }
        };
        let fam = &mut families[f];
        fam.members.push(i);
        fam.base.add(&group_sum(g));
        fam.reasons.insert(g.key.reason);
        family_of[i] = Some(f);
    }
    let mut matched: Vec<Option<Sum>> = vec![None; baseline.groups.len()];
    let mut new_families: Vec<NewFamily> = Vec::new();
    for ((k, s), a) in sums.iter().zip(&assign) {
        if !counted(k.via) {
            continue;
        }
        if let Some(i) = *a {
            if let Some(f) = family_of[i] {
                matched[i].get_or_insert_with(Sum::default).add(s);
                families[f].trace.add(s);
                families[f].reasons.insert(k.reason);
                continue;
            }
        }
        if let Some(f) = families.iter_mut().find(|f| family_matches(&f.key, k)) {
            f.trace.add(s);
            f.reasons.insert(k.reason);
            continue;
        }
        match new_families.iter_mut().find(|n| same_family(&n.key, k)) {
            Some(n) => {
                n.sum.add(s);
                n.reasons.insert(k.reason);
            }
            None => new_families.push(NewFamily {
                key: k.clone(),
                sum: s.clone(),
                reasons: BTreeSet::from([k.reason]),
            }),
        }
    }

    // The pool of unattributed bytes.
    let (pool_delta, base_unknown, trace_unknown) = unknown_pool(baseline, &sums, &assign);
    if strict {
        if base_unknown > 0 || trace_unknown > 0 {
            notes.push(format!(
                "unattributed bytes (lost intent): {} vs {} baseline; strict: compared like any group, they explain no other change",
                human_bytes(trace_unknown as f64),
                human_bytes(base_unknown as f64)
            ));
        }
    } else if base_unknown > 0 || trace_unknown > 0 {
        notes.push(format!(
            "unattributed bytes (lost intent): {} vs {} baseline; shifts between them and writeback-linked bytes (via page, buffer, inode) are not regressions",
            human_bytes(trace_unknown as f64),
            human_bytes(base_unknown as f64)
        ));
    }
    let fresh_pool = || Pool {
        delta: if strict {
            BTreeMap::new()
        } else {
            pool_delta.clone()
        },
    };

    let mut regressions: Vec<Finding> = Vec::new();
    // (role, file) patterns of aggregates already reported at group level for bytes or
    // sync share: the aggregate check would repeat it.
    let mut flagged_bytes: BTreeSet<(String, String)> = BTreeSet::new();
    let mut flagged_sync: BTreeSet<(String, String)> = BTreeSet::new();
    let mut groups_compared = 0;
    let (mut small_new, mut small_new_bytes) = (0usize, 0u64);

    // Group checks, largest change first (they draw on the pool in that order).
    enum Item {
        Base(usize),
        New(usize),
    }
    let mut items: Vec<(u64, Item)> = Vec::new();
    for (f, fam) in families.iter().enumerate() {
        items.push((fam.base.total().abs_diff(fam.trace.total()), Item::Base(f)));
    }
    for (n, nf) in new_families.iter().enumerate() {
        items.push((nf.sum.total(), Item::New(n)));
    }
    items.sort_by_key(|a| std::cmp::Reverse(a.0));
    let mut pool = fresh_pool();

    for (_, item) in &items {
        match *item {
            Item::New(n) => {
                let NewFamily { key: k, sum: s, .. } = &new_families[n];
                let label = family_label(k, &new_families[n].reasons);
                if s.total() == 0 {
                    continue;
                }
                if s.total() < floor {
                    small_new += 1;
                    small_new_bytes = small_new_bytes.saturating_add(s.total());
                    continue;
                }
                if pool_eligible(k.via) {
                    let mut eff = 0i64;
                    for dd in 0..3 {
                        let delta = si(s.bytes[dd]);
                        eff =
                            eff.saturating_add(delta.saturating_add(pool.take(&k.file, dd, delta)));
                    }
                    if eff < si(floor) {
                        notes.push(format!(
                            "{label}: new group of {} matched by fewer unattributed bytes: not a regression",
                            human_bytes(s.total() as f64)
                        ));
                        continue;
                    }
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
                let subj = Subject::group(label.clone(), k, &new_families[n].reasons);
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
            Item::Base(f) => {
                let fam = &families[f];
                let (bt, ct) = (fam.base.total(), fam.trace.total());
                if bt < floor && ct < floor {
                    continue;
                }
                groups_compared += fam.members.len();
                let tol = &fam.tol;
                let agg = (fam.key.role.clone(), fam.key.file.clone());
                let first = &baseline.groups[fam.members[0]];
                let name = if fam.members.len() == 1 && fam.reasons.len() == 1 {
                    first.name.clone()
                } else {
                    family_label(&fam.key, &fam.reasons)
                };
                let subj = Subject::group(name, &fam.key, &fam.reasons);
                let eligible = pool_eligible(fam.key.via);
                let dominant = dominant_dir(&fam.base.bytes);
                if ct == 0 {
                    let mut eff = 0i64;
                    if eligible {
                        for dd in 0..3 {
                            let delta = -si(fam.base.bytes[dd]);
                            eff = eff.saturating_add(pool.take(&fam.key.file, dd, delta));
                        }
                    }
                    if bt < floor {
                        continue;
                    }
                    let t = tol.get(bytes_key(dominant)).and_then(|t| t.value());
                    if eff > 0 && eff as f64 * (1.0 + t.unwrap_or(0.0)) >= bt as f64 {
                        notes.push(format!(
                            "{}: all its {} are unattributed in this trace: not a regression",
                            subj.name,
                            human_bytes(bt as f64)
                        ));
                        continue;
                    }
                    let explained = if eff > 0 {
                        format!(
                            "; {} of it matched by unattributed bytes",
                            human_bytes(eff as f64)
                        )
                    } else {
                        String::new()
                    };
                    regressions.push(subj.finding(
                        FindingKind::VanishedGroup,
                        "bytes",
                        bt as f64,
                        0.0,
                        Some(-1.0),
                        None,
                        format!(
                            "{}: vanished: {} {} in the baseline ({} of it), none in this trace{explained}",
                            subj.name,
                            dir_word(dominant),
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
                    let (b, cb) = (fam.base.bytes[dd], fam.trace.bytes[dd]);
                    if b.max(cb) < floor || b.max(cb) == 0 {
                        continue;
                    }
                    let delta = si(cb).saturating_sub(si(b));
                    let credit = if eligible {
                        pool.take(&fam.key.file, dd, delta)
                    } else {
                        0
                    };
                    if let Some(fi) = subj.bytes_finding(dir, b, cb, credit, tol, floor) {
                        regressions.push(fi);
                        flagged_bytes.insert(agg.clone());
                    }
                }
                if let Some(fi) = subj.sync_finding(&fam.base, &fam.trace, tol, floor) {
                    regressions.push(fi);
                    flagged_sync.insert(agg.clone());
                }
                // IO sizes and histogram shapes per member: bytes moving between siblings
                // move their IOs along.
                for &i in &fam.members {
                    let g = &baseline.groups[i];
                    let Some(c) = matched[i].as_ref() else {
                        continue;
                    };
                    let name = if fam.members.len() == 1 {
                        subj.name.clone()
                    } else {
                        g.name.clone()
                    };
                    let msubj = Subject::group(name, &g.key, &BTreeSet::new());
                    shape_checks(
                        baseline,
                        &msubj,
                        g.bytes,
                        g.ios,
                        &g.hist
                            .iter()
                            .map(|h| (h.counter, h.n, h.p))
                            .collect::<Vec<_>>(),
                        c,
                        &g.tolerance.or(&d.tolerances),
                        &mut regressions,
                    );
                }
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
    struct Agg {
        role: String,
        file: String,
        base: Sum,
        trace: Sum,
        /// Bytes per direction of vias that unattributed IO may stand for.
        base_eligible: [u64; 3],
        trace_eligible: [u64; 3],
        tol: Tolerances,
    }
    let mut aggs: Vec<Agg> = Vec::new();
    for g in baseline.groups.iter().filter(|g| counted(g.key.via)) {
        let t = g.tolerance.or(&d.tolerances);
        let i = match aggs
            .iter()
            .position(|a| a.role == g.key.role && a.file == g.key.file)
        {
            Some(i) => {
                aggs[i].tol = loosest(&aggs[i].tol, &t);
                i
            }
            None => {
                aggs.push(Agg {
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
        a.base.add(&group_sum(g));
        if pool_eligible(g.key.via) {
            for (x, b) in a.base_eligible.iter_mut().zip(g.bytes) {
                *x = x.saturating_add(b);
            }
        }
    }
    for (k, s) in &sums {
        if !counted(k.via) {
            continue;
        }
        if let Some(a) = aggs
            .iter_mut()
            .find(|a| glob_match(&a.role, &k.role) && glob_match(&a.file, &k.file))
        {
            let mut s = s.clone();
            s.hist.clear();
            a.trace.add(&s);
            if pool_eligible(k.via) {
                for (x, b) in a.trace_eligible.iter_mut().zip(s.bytes) {
                    *x = x.saturating_add(b);
                }
            }
        }
    }
    // A fresh pool for this layer: the same bytes may explain a group and its aggregate.
    let mut pool = fresh_pool();
    for a in &aggs {
        let subj = Subject::role(&a.role, &a.file);
        let key = (a.role.clone(), a.file.clone());
        if !flagged_bytes.contains(&key) {
            for dir in Dir::ALL {
                let dd = dir.index();
                let (bb, cb) = (a.base.bytes[dd], a.trace.bytes[dd]);
                if bb.max(cb) < floor || bb == 0 {
                    continue;
                }
                // Only the change of writeback-linked bytes can be explained by the pool.
                let eligible_delta =
                    si(a.trace_eligible[dd]).saturating_sub(si(a.base_eligible[dd]));
                let credit = pool.take(&a.file, dd, eligible_delta);
                if let Some(fi) = subj.bytes_finding(dir, bb, cb, credit, &a.tol, floor) {
                    regressions.push(fi);
                }
            }
        }
        if !flagged_sync.contains(&key) {
            if let Some(fi) = subj.sync_finding(&a.base, &a.trace, &a.tol, floor) {
                regressions.push(fi);
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

/// The direction with the most bytes.
fn dominant_dir(bytes: &[u64; 3]) -> Dir {
    Dir::ALL
        .into_iter()
        .max_by_key(|d| bytes[d.index()])
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

/// Average IO sizes and histogram shapes of one group.
#[allow(clippy::too_many_arguments)]
fn shape_checks(
    baseline: &Baseline,
    subj: &Subject,
    bytes: [u64; 3],
    ios: [u64; 3],
    hist: &[(usize, u64, [f64; SLOTS])],
    c: &Sum,
    tol: &Tolerances,
    out: &mut Vec<Finding>,
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
        // Rounded as the baseline file rounds its own: an unchanged histogram is equal.
        let dec = hist_decimals(n);
        let q = proportions(h).map(|x| rounded(x, dec));
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
