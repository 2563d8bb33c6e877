//! What a check reports: findings (the regressions, with their numbers), notes, and the
//! text and JSON forms of the verdict.

use std::io::{self, Write};

use serde::Serialize;

use crate::file::human_bytes;

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
    /// The share of Q2C spent behind other requests grew beyond the tolerance.
    BehindShare,
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
    /// The application's frames of the group's key, innermost first (empty for a role
    /// aggregate, and without user frames: then left out of the JSON).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub user: Vec<String>,
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

/// The result of [`check`](crate::check()): the verdict of one comparison.
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
    /// The scope of the trace's IO compared and what fell outside it, when the caller
    /// says (`ioblame check` does whenever the scope is not all of the trace or the trace
    /// has a workload).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<ScopeNote>,
}

/// The scope of a check: which of the trace's IO was compared.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ScopeNote {
    /// The scope (`workload`, `all`, `pid:N`, `cgroup:PATH`).
    pub name: String,
    /// What it is, for people (`pid 1234 `./run-tests` and its descendants`).
    pub description: String,
    /// Bytes of the trace's IO outside the scope, not compared.
    pub outside_bytes: u64,
}

/// The JSON form of a [`CheckReport`]: the verdict first, then the report's fields.
#[derive(Serialize)]
struct JsonReport<'a> {
    /// Whether the trace regressed.
    regressed: bool,
    /// The report.
    #[serde(flatten)]
    report: &'a CheckReport,
}

impl CheckReport {
    /// Whether the trace regressed (at least one finding).
    pub fn regressed(&self) -> bool {
        !self.regressions.is_empty()
    }

    /// The report as one JSON document.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&JsonReport {
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
                if !f.user.is_empty() {
                    writeln!(out, "      user: {}", f.user.join(" <- "))?;
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
        if let Some(s) = &self.scope {
            writeln!(
                out,
                "scope {}{}: {} of the trace's IO outside it, not compared",
                s.name,
                if s.description.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", s.description)
                },
                human_bytes(s.outside_bytes as f64),
            )?;
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
