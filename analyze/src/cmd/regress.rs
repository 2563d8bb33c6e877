//! `ioblame baseline` and `ioblame check`: the attribution reduced to per-act inputs of the
//! regression check.

use std::path::Path;

use anyhow::{Context as _, Result};
use ioblame_attrib::{names, Dir, Tables, WbReason};
use ioblame_baseline::{ActInput, Baseline, BuildOptions, CheckOptions, CheckReport, Defaults};
use ioblame_counters::{CounterSet, IoContext};
use ioblame_decode::stream::{DamagedChunk, StreamStats};
use ioblame_decode::{Rwbs, SkipReason, Symbolizer};
use ioblame_format::PathTable;
use ioblame_pipeline::Input;

use ioblame_pipeline::{ResolvedScope, Scope, ScopeSummary};

use crate::diagnostics;
use crate::session::{self, Opened, Ready};

/// What the check needs from one analysis run.
struct Collected {
    tables: Tables,
    set: CounterSet,
    /// Bytes of synchronous (`S`) write requests per act.
    sync_write: Vec<u64>,
    /// Per act: the Q2C of its IOs and the part behind other requests (ns).
    blame: Vec<(u64, u64)>,
    /// The scope compared and what fell outside it.
    scope: ScopeSummary,
}

/// Why a trace cannot be compared (or baselined): the check fails with exit 2 rather than
/// give a verdict.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The trace is damaged or truncated: the IO it lost would be compared as if the
    /// workload had not done it.
    #[error("the trace is damaged or truncated ({}): the IO it lost cannot be compared; record it again", damage_list(.0))]
    Damaged(Vec<Damage>),
    /// The trace holds no block IO (on the selected devices).
    #[error(
        "the trace holds no block IO{}: nothing to compare (did the capture run around the workload, on its devices?)",
        if *.devs_given { " on the selected devices (--devs)" } else { "" }
    )]
    NoIo {
        /// Whether `--devs` selected the devices.
        devs_given: bool,
    },
    /// The trace has no kernel symbols, and the baseline was not allowed without them.
    #[error("the trace has no kernel symbols: every intent would be [\"?\", ...] and the baseline could not tell code paths apart. For a perf.data recording pass --kallsyms FILE (a copy of the recording host's /proc/kallsyms); to write it anyway, pass --allow-unsymbolized")]
    Unsymbolized,
}

/// One problem of a damaged trace.
#[derive(Debug)]
pub enum Damage {
    /// What the reader found.
    Reader(ioblame_format::Problem),
    /// A chunk the analysis could not decompress.
    Chunk(DamagedChunk),
    /// Records the analysis could not decode, by reason.
    Skipped(SkipReason, u64),
    /// Damage the blktrace reader read past (bad magic, a record cut short, a payload past
    /// the end, blkparse lines it could not read).
    Blktrace(ioblame_blktrace::Problem),
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Reader(p) => write!(f, "{p}"),
            Damage::Chunk(d) => write!(f, "cpu {} chunk {} unreadable: {}", d.cpu, d.seq, d.error),
            Damage::Skipped(r, n) => write!(f, "{n} records skipped: {}", r.as_str()),
            Damage::Blktrace(p) => write!(f, "{p}"),
        }
    }
}

/// Problems shown in [`Refusal::Damaged`].
const DAMAGE_SHOWN: usize = 5;

/// `N problem(s): the first few; ...`.
fn damage_list(d: &[Damage]) -> String {
    let n = d.len();
    let shown: Vec<String> = d.iter().take(DAMAGE_SHOWN).map(|p| p.to_string()).collect();
    format!(
        "{n} problem{}: {}{}",
        if n == 1 { "" } else { "s" },
        shown.join("; "),
        if n > DAMAGE_SHOWN { "; ..." } else { "" }
    )
}

/// Refuses a trace that is damaged or truncated: the IO it lost would be compared as if the
/// workload had not done it, and a regression verdict (exit 1) on it would be wrong. The
/// reader's problems, the chunks the analysis could not decompress and the records it could
/// not decode are listed.
fn require_intact(trace: &Input, stream: &StreamStats) -> Result<(), Refusal> {
    let mut damage: Vec<Damage> = trace
        .problems()
        .iter()
        .cloned()
        .map(Damage::Reader)
        .collect();
    if let Some(rec) = trace.blktrace() {
        damage.extend(
            rec.scan()
                .problems
                .iter()
                .filter(|p| p.is_damage())
                .cloned()
                .map(Damage::Blktrace),
        );
    }
    damage.extend(stream.damaged.iter().cloned().map(Damage::Chunk));
    damage.extend(
        stream
            .decode
            .error_reasons()
            .map(|(r, n)| Damage::Skipped(r, n)),
    );
    if damage.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Damaged(damage))
    }
}

/// Refuses a trace without block IO (on the selected devices): there is nothing to compare,
/// and an empty run is not "within tolerance".
fn require_io(c: &Collected, show_recorder: bool, devs_given: bool) -> Result<(), Refusal> {
    let t = &c.tables;
    let any = t
        .acts_with_totals()
        .any(|(_, act, tot)| (show_recorder || !act.recorder) && tot.ios.iter().any(|&n| n > 0));
    if any {
        Ok(())
    } else {
        Err(Refusal::NoIo { devs_given })
    }
}

/// Analyses the trace `o` opened in `scope`, after refusing a damaged one: the session's
/// parts (the trace, its symbols) and what the check needs of the analysis.
fn collect(
    o: Opened<'_>,
    mut set: CounterSet,
    scope: ResolvedScope,
) -> Result<(Ready<'_>, Collected)> {
    // What the reader found wrong before a single chunk is read fails at once.
    require_intact(&o.trace, &StreamStats::default())?;
    let r = o.ready(scope);
    let show_recorder = r.show_recorder;
    let mut sync_write: Vec<u64> = Vec::new();
    // The wait behind others of each act's IOs (`ioblame blame`): the IO outside the scope
    // stands ahead of the scope's too.
    let blamer = std::cell::RefCell::new(super::blame::Blamer::new(
        &r.trace,
        &r.devs,
        show_recorder,
        &r.scope,
        (0, u64::MAX),
    ));
    let a = r.analyze_observed_all(
        |ev| blamer.borrow_mut().event(ev),
        |io, tables| {
            blamer.borrow_mut().io(io, tables);
            if tables.acts[io.act.index()].recorder && !show_recorder {
                return;
            }
            set.record(io, &IoContext::for_io(tables, io));
            // A lower copy (a loop device's backing file) is the act's IO again: counted
            // once.
            if io.dir == Dir::W && io.rwbs.0 & Rwbs::SYNC != 0 && !io.lower {
                let i = io.act.index();
                if sync_write.len() <= i {
                    sync_write.resize(i + 1, 0);
                }
                sync_write[i] += io.size;
            }
        },
        |io, tables| blamer.borrow_mut().culprit(io, tables),
    );
    require_intact(&r.trace, &a.stream)?;
    sync_write.resize(a.tables.acts.len(), 0);
    let mut blame = vec![(0u64, 0u64); a.tables.acts.len()];
    let b = blamer.into_inner().finish();
    for v in &b.victims {
        if let Some(x) = blame.get_mut(v.key as usize) {
            x.0 += v.q2c;
            x.1 += v.q2c - v.own - v.idle;
        }
    }
    let c = Collected {
        tables: a.tables,
        set,
        sync_write,
        blame,
        scope: a.scope,
    };
    Ok((r, c))
}

/// The scope note of a check report: given whenever the analysis said its scope (the
/// scope is not `all`, or the trace has a workload).
fn scope_note(s: &ScopeSummary) -> Option<ioblame_baseline::ScopeNote> {
    if s.scope == "all" && s.outside_workload.is_none() {
        return None;
    }
    let description = match (s.root, &s.command) {
        (Some(pid), Some(c)) if s.scope == "workload" => {
            format!("pid {pid} `{c}` and its descendants")
        }
        (Some(pid), _) => format!("pid {pid} and its descendants"),
        _ => String::new(),
    };
    Some(ioblame_baseline::ScopeNote {
        name: s.scope.clone(),
        description,
        outside_bytes: s.outside.total_bytes(),
    })
}

/// One [`ActInput`] per act that did IO (the recorder's own acts left out unless asked):
/// its intent's kernel frames symbolized, and its user frames (named by the analysis,
/// [`Ready::analyze`]) that name the application, labelled as `acts --json` labels them.
fn act_inputs<'a>(
    c: &'a Collected,
    sym: &Symbolizer,
    paths: &PathTable,
    show_recorder: bool,
) -> Vec<ActInput<'a>> {
    let t = &c.tables;
    t.acts_with_totals()
        .filter(|(_, act, tot)| (show_recorder || !act.recorder) && tot.ios.iter().any(|&n| n > 0))
        .map(|(id, act, tot)| {
            let intent = &t.intents[act.intent.index()];
            let reason = (intent.modifier & 0x1000_0000 != 0)
                .then_some(WbReason(intent.modifier & 0x0fff_ffff));
            ActInput {
                role: &t.roles[act.role.index()],
                intent,
                frames: intent.stack.iter().map(|&a| sym.format_frame(a)).collect(),
                user: names::application_frames(&intent.user)
                    .iter()
                    .map(names::user_frame_label)
                    .collect(),
                file_path: (act.file.ino != 0)
                    .then(|| paths.get(act.file.dev, act.file.ino))
                    .flatten()
                    .map(|p| p.to_string()),
                via: act.via,
                reason,
                recorder: act.recorder,
                totals: *tot,
                sync_write_bytes: c.sync_write[id.index()],
                histograms: c.set.act_histograms(id).to_vec(),
                q2c_ns: c.blame[id.index()].0,
                behind_ns: c.blame[id.index()].1,
            }
        })
        .collect()
}

fn spec_texts(set: &CounterSet) -> Vec<String> {
    set.specs().iter().map(|s| s.to_string()).collect()
}

/// How `ioblame baseline` writes its file.
#[derive(Debug, Clone, Copy, Default)]
pub struct BaselineMode {
    /// Exact settings for a deterministic input ([`Defaults::exact`]).
    pub exact: bool,
    /// `unattributed = "strict"`.
    pub strict: bool,
    /// Write the baseline even when the trace has no kernel symbols.
    pub allow_unsymbolized: bool,
}

/// `ioblame baseline`: writes the baseline of the trace `o` opened to `output`, in `scope`
/// (`--scope`; else `workload` when the trace names its command).
pub fn baseline(
    o: Opened<'_>,
    set: CounterSet,
    output: &Path,
    mode: BaselineMode,
    scope: Option<&Scope>,
) -> Result<()> {
    let scope = session::resolve_scope(&o.trace, scope, true)?;
    let (r, c) = collect(o, set, scope)?;
    let show_recorder = r.show_recorder;
    require_io(&c, show_recorder, r.devs_given)?;
    let paths = diagnostics::charged_paths(&r.trace, &c.tables, show_recorder);
    let inputs = act_inputs(&c, &r.symbols, &paths, show_recorder);
    let mut opts = BuildOptions::default();
    if mode.exact {
        opts.defaults = Defaults::exact();
    }
    if mode.strict {
        opts.defaults.unattributed = ioblame_baseline::Unattributed::Strict;
    }
    let mut base = Baseline::build(&inputs, &spec_texts(&c.set), &opts)?;
    if scope_note(&c.scope).is_some() {
        base.scope = Some(c.scope.scope.clone());
    }
    if !base.symbolized {
        if !mode.allow_unsymbolized {
            return Err(Refusal::Unsymbolized.into());
        }
        eprintln!(
            "ioblame: warning: the trace has no kernel symbols: the baseline's intents are all \"?\" (symbols = false); only traces without symbols can be checked against it"
        );
    }
    std::fs::write(output, base.to_toml())
        .with_context(|| format!("cannot write {}", output.display()))?;
    let named = base.groups.iter().filter(|g| g.key.file != "-").count();
    // With user stacks: how many groups name the application's functions.
    let by_user = match base.user_frames {
        0 => String::new(),
        n => format!(
            ", {} keyed by the application's functions (user_frames = {n})",
            base.groups
                .iter()
                .filter(|g| !g.key.user.is_empty())
                .count()
        ),
    };
    eprintln!(
        "ioblame: wrote {} ({} groups, {named} of them on a named file{by_user}; {} counters)",
        output.display(),
        base.groups.len(),
        base.counters.len()
    );
    if paths.is_empty() {
        eprintln!(
            "ioblame: note: the trace names no files (a perf.data recording, or a capture without FILES sections): every file key is \"-\""
        );
    }
    Ok(())
}

/// `ioblame check`: compares the trace `o` opened with `base`, in `scope` (`--scope`; else
/// the baseline's). Errors (exit 2) when the trace is damaged, holds no IO, or cannot be
/// compared (kernel symbols on one side only).
pub fn check(
    o: Opened<'_>,
    set: CounterSet,
    base: &Baseline,
    opts: &CheckOptions,
    scope: Option<&Scope>,
) -> Result<CheckReport> {
    // The scope given, else the baseline's, else workload when the trace has one.
    let recorded = match (&scope, &base.scope) {
        (None, Some(s)) => Some(
            s.parse::<Scope>()
                .with_context(|| format!("the baseline's scope {s:?}"))?,
        ),
        _ => None,
    };
    let scope = session::resolve_scope(&o.trace, scope.or(recorded.as_ref()), true)?;
    let (r, c) = collect(o, set, scope)?;
    let show_recorder = r.show_recorder;
    require_io(&c, show_recorder, r.devs_given)?;
    let paths = diagnostics::charged_paths(&r.trace, &c.tables, show_recorder);
    let inputs = act_inputs(&c, &r.symbols, &paths, show_recorder);
    let mut report = ioblame_baseline::check_with(base, &inputs, &spec_texts(&c.set), opts)?;
    report.scope = scope_note(&c.scope);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The refusal of a damaged trace counts its problems and names the first five.
    #[test]
    fn damage_is_counted_and_the_first_problems_named() {
        let chunk = |seq| {
            Damage::Chunk(DamagedChunk {
                cpu: 0,
                seq,
                error: "bad".into(),
            })
        };
        let one = Refusal::Damaged(vec![Damage::Skipped(SkipReason::ALL[0], 3)]);
        assert_eq!(
            one.to_string(),
            format!(
                "the trace is damaged or truncated (1 problem: 3 records skipped: {}): the IO it lost cannot be compared; record it again",
                SkipReason::ALL[0].as_str()
            )
        );
        let six = Refusal::Damaged((1..=6).map(chunk).collect());
        assert_eq!(
            six.to_string(),
            "the trace is damaged or truncated (6 problems: cpu 0 chunk 1 unreadable: bad; \
             cpu 0 chunk 2 unreadable: bad; cpu 0 chunk 3 unreadable: bad; \
             cpu 0 chunk 4 unreadable: bad; cpu 0 chunk 5 unreadable: bad; ...): \
             the IO it lost cannot be compared; record it again"
        );
        assert!(Refusal::NoIo { devs_given: true }
            .to_string()
            .starts_with("the trace holds no block IO on the selected devices (--devs): "));
        assert!(Refusal::NoIo { devs_given: false }
            .to_string()
            .starts_with("the trace holds no block IO: nothing to compare"));
    }
}
