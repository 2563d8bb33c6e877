//! Judging one metric: the findings of a group, a family of sibling groups or a role
//! aggregate ([`Subject`]) when its bytes, sync-write share, average IO size or histogram
//! shape moved beyond the tolerance.

use std::collections::BTreeSet;

use ioblame_attrib::Dir;
use ioblame_counters::SLOTS;

use super::report::{Finding, FindingKind, Scope};
use crate::file::{hist_decimals, human_bytes, rounded};
use crate::keys::ReasonClass;
use crate::model::{dir_word, proportions, sat_sum, si, Counter, GroupHist, GroupKey, Sum};
use crate::tolerances::{bytes_key, hist_key, io_size_key, Tolerances};

/// `c/b` bounded by a tolerance factor: within when `1/(1+t) <= c/b <= 1+t`.
pub(super) fn ratio_within(b: f64, c: f64, t: f64) -> bool {
    if b <= 0.0 {
        return c <= 0.0;
    }
    let r = c / b;
    r <= 1.0 + t + 1e-9 && r * (1.0 + t) >= 1.0 - 1e-9
}

/// Earth mover's distance between two distributions over ordered slots, in slots.
/// Both are normalised to sum 1 first.
pub(super) fn emd(p: &[f64; SLOTS], q: &[f64; SLOTS]) -> f64 {
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

/// A share as a whole percentage (`0.25` -> `25%`).
pub(super) fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// The change from `b` to `c` as a signed percentage, `new` when `b` is zero.
fn change_text(b: f64, c: f64) -> String {
    if b <= 0.0 {
        "new".to_string()
    } else {
        format!("{:+.0}%", (c / b - 1.0) * 100.0)
    }
}

/// A histogram's proportions as whole percentages (`[50 25 25 0 0 0 0 0]%`).
fn shape_text(p: &[f64; SLOTS]) -> String {
    let v: Vec<String> = p.iter().map(|x| format!("{:.0}", x * 100.0)).collect();
    format!("[{}]%", v.join(" "))
}

/// What a finding is about, with the fields it fills: a group, a family of sibling groups,
/// or a role's IO on a file.
pub(super) struct Subject {
    scope: Scope,
    /// The name used in messages.
    pub(super) name: String,
    role: String,
    via: Option<String>,
    reason: Option<String>,
    file: String,
    frames: Vec<String>,
    user: Vec<String>,
}

impl Subject {
    /// A group (or a family of sibling groups) with the reason classes it spans.
    pub(super) fn group(name: String, key: &GroupKey, reasons: &BTreeSet<ReasonClass>) -> Subject {
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
            user: key.user.clone(),
        }
    }

    /// A role's IO on a file over all its vias and intents.
    pub(super) fn role(role: &str, file: &str) -> Subject {
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
            user: Vec::new(),
        }
    }

    /// A finding about this subject.
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
            user: self.user.clone(),
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
    pub(super) fn bytes_finding(
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
    pub(super) fn sync_finding(
        &self,
        b: &Sum,
        c: &Sum,
        tol: &Tolerances,
        floor: u64,
    ) -> Option<Finding> {
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

    /// The wait-behind-others check of a group: the share of its IOs' Q2C spent behind
    /// other requests (`b` the baseline's, of `b_ios` IOs; `c` the trace's IO matched to it)
    /// may not grow by more than the tolerance; with an exact tolerance (0.001 or less, the
    /// exact baselines: nothing may move) it may not shrink either. Groups of fewer than
    /// `min_ios` IOs on either side are not judged.
    pub(super) fn behind_finding(
        &self,
        b: f64,
        b_ios: u64,
        c: &Sum,
        tol: &Tolerances,
        min_ios: u64,
    ) -> Option<Finding> {
        let t = tol.behind_share.and_then(|t| t.value())?;
        let sc = c.behind_share()?;
        let moved = if t <= 0.001 { (sc - b).abs() } else { sc - b };
        if sat_ios(c) < min_ios || b_ios < min_ios || moved <= t + 1e-9 {
            return None;
        }
        Some(self.finding(
            FindingKind::BehindShare,
            "behind_share",
            b,
            sc,
            None,
            Some(t),
            format!(
                "{}: its IOs waited behind other IO {} of their time vs {} baseline (tolerance +{:.0} points; `ioblame blame` names who)",
                self.name,
                pct(sc),
                pct(b),
                t * 100.0
            ),
        ))
    }

    /// A group of the trace that the baseline does not have (`s`: its IO; the subject's
    /// name is its label).
    pub(super) fn new_group_finding(&self, s: &Sum, trace_total: u64) -> Finding {
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
        self.finding(
            FindingKind::NewGroup,
            "bytes",
            0.0,
            s.total() as f64,
            None,
            None,
            format!(
                "new group {}: {} ({} of the trace), not in the baseline",
                self.name,
                what.join(", "),
                pct(s.total() as f64 / trace_total.max(1) as f64)
            ),
        )
    }

    /// A group of the baseline (`b`: its IO) that the trace does not have; `explained` is
    /// what unattributed bytes matched of it (0: nothing).
    pub(super) fn vanished_finding(&self, b: &Sum, base_total: u64, explained: i64) -> Finding {
        let bt = b.total();
        let explained = if explained > 0 {
            format!(
                "; {} of it matched by unattributed bytes",
                human_bytes(explained as f64)
            )
        } else {
            String::new()
        };
        self.finding(
            FindingKind::VanishedGroup,
            "bytes",
            bt as f64,
            0.0,
            Some(-1.0),
            None,
            format!(
                "{}: vanished: {} {} in the baseline ({} of it), none in this trace{explained}",
                self.name,
                dir_word(dominant_dir(&b.bytes)),
                human_bytes(bt as f64),
                pct(bt as f64 / base_total.max(1) as f64)
            ),
        )
    }

    /// The average IO size check of one direction: `None` within tolerance, or with fewer
    /// than `min_ios` IOs on either side.
    pub(super) fn io_size_finding(
        &self,
        dir: Dir,
        b: &Sum,
        c: &Sum,
        tol: &Tolerances,
        min_ios: u64,
    ) -> Option<Finding> {
        let dd = dir.index();
        if b.ios[dd] < min_ios || c.ios[dd] < min_ios || b.bytes[dd] == 0 || c.bytes[dd] == 0 {
            return None;
        }
        let t = tol.get(io_size_key(dir)).and_then(|t| t.value())?;
        let ab = b.bytes[dd] as f64 / b.ios[dd] as f64;
        let ac = c.bytes[dd] as f64 / c.ios[dd] as f64;
        if ratio_within(ab, ac, t) {
            return None;
        }
        Some(self.finding(
            FindingKind::IoSize,
            io_size_key(dir),
            ab,
            ac,
            Some(ac / ab - 1.0),
            Some(t),
            format!(
                "{}: average {} size {} vs {} baseline ({}, tolerance {}; {} IOs vs {})",
                self.name,
                dir_word(dir),
                human_bytes(ac),
                human_bytes(ab),
                change_text(ab, ac),
                pct(t),
                c.ios[dd],
                b.ios[dd]
            ),
        ))
    }

    /// The shape check of one counter's histogram: the baseline's proportions `b` against
    /// the trace's counts `c`. `None` within tolerance, or with fewer than `min_ios` IOs on
    /// either side.
    pub(super) fn histogram_finding(
        &self,
        counter: &Counter,
        b: &GroupHist,
        c: &[u64; SLOTS],
        tol: &Tolerances,
        min_ios: u64,
    ) -> Option<Finding> {
        let nc = sat_sum(c.iter().copied());
        if b.n < min_ios || nc < min_ios {
            return None;
        }
        let t = tol
            .get(hist_key(counter.parsed.field))
            .and_then(|t| t.value())?;
        // Rounded as the baseline file rounds its own: an unchanged histogram is equal.
        let dec = hist_decimals(b.n);
        let q = proportions(c).map(|x| rounded(x, dec));
        let dist = emd(&b.p, &q);
        if dist <= t + 1e-9 {
            return None;
        }
        Some(self.finding(
            FindingKind::Histogram,
            &counter.spec,
            0.0,
            dist,
            None,
            Some(t),
            format!(
                "{}: histogram `{}` moved {:.2} slots (tolerance {}): {} vs {} baseline",
                self.name,
                counter.spec,
                dist,
                t,
                shape_text(&q),
                shape_text(&b.p)
            ),
        ))
    }
}

/// The direction with the most bytes (the last of equals: writes before readahead before
/// reads).
pub(super) fn dominant_dir(bytes: &[u64; 3]) -> Dir {
    Dir::ALL
        .into_iter()
        .max_by_key(|d| bytes[d.index()])
        .unwrap_or(Dir::W)
}

/// The IOs of a sum, all directions.
fn sat_ios(s: &Sum) -> u64 {
    s.ios.iter().copied().fold(0, u64::saturating_add)
}
