//! ioblame's analysis as a library: what the `ioblame` analyzer does with a trace before it
//! writes any output.
//!
//! 1. [`open_trace`] opens what the user named (an ioblame trace directory, ring files of one
//!    capture, or a `perf.data` recording, converted in memory);
//! 2. [`symbols_of`] takes the kernel symbols the trace carries;
//! 3. [`analyze`] decodes and attributes every event (the loop itself is
//!    [`ioblame_attrib::attribute_stream`]), hands each charged IO on the selected devices to
//!    the caller as it is charged, and returns the tables, the attribution's summary and the
//!    stream's statistics;
//! 4. or, on a recording still being written, [`Follow`] reads what the recorder appends and
//!    [`Live`] attributes it as it comes, with the same rules (`ioblame top`).
//!
//! Nothing here prints: what each step found to say comes back as [`Diagnostic`]s, whose
//! `Display` is the line the analyzer prints after `ioblame: `, and progress goes to a
//! callback. See `docs/architecture.md` for the whole flow.
#![deny(missing_docs)]

mod analyze;
pub mod blame;
mod blktrace;
mod diag;
mod live;
mod open;
mod scope;
#[cfg(test)]
mod tests;
mod ustack;

pub use analyze::{
    analyze, analyze_logged, analyze_observed, analyze_observed_all, charged_file_paths,
    charged_paths, events, file_paths, unnamed_files, Analysis, EventsRun, Options,
};
pub use blktrace::{is_flusher, unnamed_task};
pub use diag::{
    cgroups_flat, Diagnostic, Severity, UnknownContextNote, LOST_WINDOWS_SHOWN,
    UNKNOWN_CONTEXTS_SHOWN,
};
pub use ioblame_attrib::{Progress, PROGRESS_EVERY};
pub use live::{Follow, Live, ReadStep, UNMARKED_LAG};
pub use open::{
    btrfs_map_beside, open_trace, open_trace_with, symbols_of, Input, OpenError, SideFiles,
};
pub use scope::{ResolvedScope, Scope, ScopeError, ScopeSummary};
pub use ustack::{symbolize_user_frames, UserSymbolOptions};
