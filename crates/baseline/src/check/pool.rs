//! Unattributed IO (via `unknown`, the lost intent): how much of it each side holds, and
//! the pool of its change that explains shifts of writeback-linked bytes
//! (`unattributed = "pool"`, see [`crate::Unattributed`]).

use std::collections::BTreeMap;

use ioblame_attrib::Via;

use super::TraceGroup;
use crate::file::human_bytes;
use crate::model::{si, Baseline, ViaKey};

/// The unattributed IO of the baseline and of the trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct LostIntent {
    /// Unattributed bytes per file pattern and direction, trace minus baseline. Trace
    /// groups take the file pattern of the baseline group they matched.
    delta: BTreeMap<String, [i64; 3]>,
    /// Unattributed bytes of the baseline.
    base: u64,
    /// Unattributed bytes of the trace.
    trace: u64,
}

impl LostIntent {
    /// Measures the unattributed IO of both sides.
    pub(super) fn measure(baseline: &Baseline, trace: &[TraceGroup]) -> LostIntent {
        let mut delta: BTreeMap<String, [i64; 3]> = BTreeMap::new();
        let (mut base, mut traced) = (0u64, 0u64);
        for g in baseline.groups.iter().filter(|g| g.is_unknown()) {
            let e = delta.entry(g.key.file.clone()).or_default();
            for (x, b) in e.iter_mut().zip(g.bytes) {
                *x = x.saturating_sub(si(b));
                base = base.saturating_add(b);
            }
        }
        for t in trace {
            if t.key.via.via() != Via::Unknown {
                continue;
            }
            let file = t.base.map_or(&t.key.file, |i| &baseline.groups[i].key.file);
            let e = delta.entry(file.clone()).or_default();
            for (x, b) in e.iter_mut().zip(t.sum.bytes) {
                *x = x.saturating_add(si(b));
                traced = traced.saturating_add(b);
            }
        }
        LostIntent {
            delta,
            base,
            trace: traced,
        }
    }

    /// The note that says how much IO is unattributed on either side and how it is judged
    /// (`None` when neither side has any).
    pub(super) fn note(&self, strict: bool) -> Option<String> {
        if self.base == 0 && self.trace == 0 {
            return None;
        }
        let how = if strict {
            "strict: compared like any group, they explain no other change"
        } else {
            "shifts between them and writeback-linked bytes (via page, buffer, inode) are not regressions"
        };
        Some(format!(
            "unattributed bytes (lost intent): {} vs {} baseline; {how}",
            human_bytes(self.trace as f64),
            human_bytes(self.base as f64)
        ))
    }

    /// A full pool for one layer of checks (groups, then role aggregates: the same bytes may
    /// explain a group and its aggregate); empty when `strict`.
    pub(super) fn pool(&self, strict: bool) -> Pool {
        Pool {
            delta: if strict {
                BTreeMap::new()
            } else {
                self.delta.clone()
            },
        }
    }
}

/// Unattributed bytes (the lost intent) per file pattern and direction, trace minus
/// baseline, not yet used: what shifts of attributed bytes may be explained by
/// (`unattributed = "pool"`; empty when strict).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Pool {
    delta: BTreeMap<String, [i64; 3]>,
}

impl Pool {
    /// How much of `delta` (a change in direction `d` of bytes that writeback links to their
    /// dirtier) the pool explains, taken out of it: a positive return means "add this to the
    /// trace's bytes". The return has the opposite sign of `delta` and is at most as large.
    /// The file's own entry is drawn on first, then that of unknown files (`-`).
    pub(super) fn take(&mut self, file: &str, d: usize, delta: i64) -> i64 {
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
pub(super) fn pool_eligible(v: ViaKey) -> bool {
    matches!(v.via(), Via::Page | Via::Buffer | Via::Inode)
}
