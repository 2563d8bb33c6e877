//! ioblame's CI regression check: a baseline of an application's IO behaviour and the
//! comparison of a new trace against it.
//!
//! `ioblame baseline TRACE -o baseline.toml` writes [`Baseline::build`]'s result with
//! [`Baseline::to_toml`]; `ioblame check TRACE --baseline baseline.toml` reads it back with
//! [`Baseline::from_toml`] and calls [`check`], whose [`CheckReport`] says whether the trace
//! [regressed](CheckReport::regressed) and why, as text ([`CheckReport::render_text`]) or
//! one JSON document ([`CheckReport::to_json`]). See `docs/ci-regression.md` for the CI
//! side and the reasoning behind the default tolerances.
//!
//! # Groups
//!
//! Acts are grouped by keys that stay the same between runs and hosts ([`keys`]):
//!
//! * role: the command name, with varying numbers as `*` (`kworker/*`, `jbd2/*`,
//!   `worker-*`; `writerA` as is);
//! * via (page, buffer, inode, journal, direct, read, readahead, unknown);
//! * the writeback reason, as a [`ReasonClass`] (`flusher` for the flusher's own timing,
//!   `sync`, `vmscan`, `none`);
//! * the file's path pattern (`-` when unknown; never the inode number);
//! * the intent: the bare function names of the stack, innermost first, generic innermost
//!   frames (`submit_bio*`, `*mark*dirty`, ...) dropped, at most `frames` kept;
//! * the application's frames, when the trace has user stacks: the function names of the
//!   intent's user frames that name the application, innermost first (the C library's
//!   system call wrapper skipped; an unsymbolized frame as its module, `iowork+?`), at most
//!   `user_frames` kept ([`keys::user_key`]). Two functions of one program writing through
//!   the same kernel path are two groups. Baselines without `user_frames` (those of traces
//!   without user stacks, and files written before user frames were keyed) keep none, and
//!   group as they did.
//!
//! Per group the baseline holds bytes and IO counts per direction, the share of write bytes
//! whose requests had `S`, and each counter's histogram as proportions.
//!
//! # What is compared
//!
//! * Per role and file, over all vias and intents: bytes per direction (the stable measure
//!   of how much a role does) and the sync-write share.
//! * Per family of sibling groups (groups that differ only in their writeback reason: the
//!   same role, via, file and code path, written back by the task's fsync, by sync(2) or by
//!   the flusher on its own schedule, which depends on timing): bytes per direction, the
//!   sync-write share, and whether the family is new or vanished. Bytes moving between
//!   siblings are not a change.
//! * Per group: the average IO size (bytes per IO: robust to bytes moving between groups,
//!   sensitive to IO turning small or random) and histogram shapes (earth mover's distance
//!   in slots).
//! * Unattributed IO (via `unknown`, the lost intent) depends on [`Unattributed`]: with
//!   `"pool"` (the default) it is never a regression by itself, and a change of the bytes
//!   of a writeback-linked group (via page, buffer, inode) matched by an opposite change of
//!   unattributed bytes on the same file (or of unknown file) is not counted, because
//!   writeback links a varying share of pages to their dirtiers from run to run. With
//!   `"strict"` (or [`CheckOptions::strict`]) it is compared like any other group and
//!   explains nothing. [`Defaults::exact`] is for deterministic inputs.
//! * Groups and changes smaller than `max(min_bytes, min_share * total)` are ignored; IO
//!   sizes and histograms need `min_ios` IOs on both sides.
//! * A trace without kernel symbols is not compared with a baseline made with them, nor the
//!   other way round ([`BaselineError::Symbols`]).
//!
//! ```
//! use ioblame_attrib::{ActTotals, Intent, Role, Via};
//! use ioblame_baseline::{check, ActInput, Baseline, BuildOptions};
//!
//! let role = Role { pid: 42, tid: 42, comm: "writer".into(), generation: 0, cgroup: 0, lineage: false };
//! let intent = Intent {
//!     modifier: 0x1000_0003,
//!     stack: vec![0xffff_ffff_8100_0000],
//!     user: Vec::new(),
//! };
//! let act = |mib: u64| ActInput {
//!     role: &role,
//!     intent: &intent,
//!     frames: vec!["ext4_da_write_end+0x50/0x300".into(), "vfs_write+0x1/0x2".into()],
//!     user: Vec::new(),
//!     file_path: Some("/data/out.bin".into()),
//!     via: Via::Page,
//!     reason: None,
//!     recorder: false,
//!     totals: ActTotals { bytes: [0, 0, mib << 20], ios: [0, 0, mib * 8], ..ActTotals::default() },
//!     sync_write_bytes: 0,
//!     histograms: vec![],
//!     q2c_ns: 0,
//!     behind_ns: 0,
//! };
//! let specs: [&str; 0] = [];
//! let base = Baseline::build(&[act(8)], &specs, &BuildOptions::default()).unwrap();
//! let base = Baseline::from_toml(&base.to_toml()).unwrap();
//! assert!(!check(&base, &[act(8)], &specs).unwrap().regressed());
//! let report = check(&base, &[act(16)], &specs).unwrap();
//! assert!(report.regressed());
//! assert_eq!(
//!     report.regressions[0].message,
//!     "writer via page (flusher writeback) on /data/out.bin: write bytes 16.0 MiB vs 8.0 MiB baseline (+100%, tolerance 15%)"
//! );
//! ```
#![deny(missing_docs)]

mod check;
mod error;
mod file;
pub mod keys;
mod model;
#[cfg(test)]
mod tests;
mod tolerances;

pub use check::{
    check, check_with, CheckOptions, CheckReport, Finding, FindingKind, Scope, ScopeNote,
};
pub use error::{BaselineError, FileProblem, InputError, SymbolsMismatch};
pub use keys::{ReasonClass, UnknownReasonClass};
pub use model::{
    inputs_symbolized, ActInput, Baseline, BuildOptions, Counter, Defaults, Group, GroupHist,
    GroupKey, Unattributed, ViaKey, FORMAT_VERSION,
};
pub use tolerances::{Tol, Tolerances, TOLERANCE_KEYS};
