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
//!   frames (`submit_bio*`, `*mark*dirty`, ...) dropped, at most `frames` kept.
//!
//! Per group the baseline holds bytes and IO counts per direction, the share of write bytes
//! whose requests had `S`, and each counter's histogram as proportions.
//!
//! # What is compared
//!
//! * Per role and file, over all vias and intents: bytes per direction (the stable measure
//!   of how much a role does) and the sync-write share.
//! * Per group: bytes per direction, the average IO size (bytes per IO: robust to bytes
//!   moving between groups, sensitive to IO turning small or random), the sync-write share,
//!   histogram shapes (earth mover's distance in slots), and whether the group is new or
//!   vanished.
//! * Unattributed IO (via `unknown`, the lost intent) is never a regression by itself: a
//!   change of a group's bytes matched by an opposite change of unattributed bytes on the
//!   same file (or of unattributed bytes of unknown file) is not counted, because writeback
//!   links a varying share of pages to their dirtiers from run to run.
//! * Groups and changes smaller than `max(min_bytes, min_share * total)` are ignored; IO
//!   sizes and histograms need `min_ios` IOs on both sides.
//!
//! ```
//! use ioblame_attrib::{ActTotals, Intent, Role, Via};
//! use ioblame_baseline::{check, ActInput, Baseline, BuildOptions};
//!
//! let role = Role { pid: 42, tid: 42, comm: "writer".into(), generation: 0 };
//! let intent = Intent { modifier: 0x1000_0003, stack: vec![0xffff_ffff_8100_0000] };
//! let act = |mib: u64| ActInput {
//!     role: &role,
//!     intent: &intent,
//!     frames: vec!["ext4_da_write_end+0x50/0x300".into(), "vfs_write+0x1/0x2".into()],
//!     file_path: Some("/data/out.bin".into()),
//!     via: Via::Page,
//!     reason: None,
//!     recorder: false,
//!     totals: ActTotals { bytes: [0, 0, mib << 20], ios: [0, 0, mib * 8] },
//!     sync_write_bytes: 0,
//!     histograms: vec![],
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

pub use check::{check, CheckReport, Finding, FindingKind, Scope};
pub use error::BaselineError;
pub use keys::ReasonClass;
pub use model::{
    ActInput, Baseline, BuildOptions, Counter, Defaults, Group, GroupHist, GroupKey, Tol,
    Tolerances, ViaKey, FORMAT_VERSION, TOLERANCE_KEYS,
};
