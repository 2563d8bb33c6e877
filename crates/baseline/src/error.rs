//! Errors of the baseline crate.

use ioblame_counters::{SpecError, SLOTS};

use crate::tolerances::TOLERANCE_KEYS;

/// What can go wrong building, reading or checking a baseline.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// The baseline file is not valid: line and column (1-based) of the offending text.
    #[error("baseline line {line}, column {column}: {problem}")]
    Parse {
        /// 1-based line.
        line: usize,
        /// 1-based column (in characters).
        column: usize,
        /// What is wrong.
        problem: FileProblem,
    },
    /// The baseline file is not valid and the parser gave no position (the TOML parser's
    /// message).
    #[error("baseline: {0}")]
    Invalid(String),
    /// A counter spec given to build or check is invalid.
    #[error("invalid counter spec: {0}")]
    Counter(#[from] SpecError),
    /// The inputs are inconsistent.
    #[error("invalid input: {0}")]
    Input(InputError),
    /// The trace and the baseline cannot be compared: one has kernel symbols and the other
    /// not, so their intent keys (function names vs `?`) never match.
    #[error("{0}")]
    Symbols(SymbolsMismatch),
    /// The baseline keys its groups by the application's frames and the trace has no user
    /// frames at all (recorded without `--user-stacks`): every group would look new or
    /// vanished.
    #[error(
        "the trace has no user frames but the baseline keys its groups by the \
         application's functions ([keys] user_frames = {user_frames}): the groups cannot be \
         compared. Record the trace with --user-stacks (ioblame-capture record \
         --user-stacks, or ioblame perf-command --user-stacks), or make the baseline again \
         from a trace without them"
    )]
    NoUserFrames {
        /// `[keys] user_frames` of the baseline.
        user_frames: usize,
    },
}

/// What is wrong at a place of a baseline file ([`BaselineError::Parse`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FileProblem {
    /// The TOML parser's message (syntax, types, unknown or missing keys).
    #[error("{0}")]
    Toml(String),
    /// A `version` this crate does not read.
    #[error("unsupported baseline version {version} (this ioblame reads version {supported})")]
    UnsupportedVersion {
        /// The version of the file.
        version: u32,
        /// The version this crate reads ([`crate::FORMAT_VERSION`]).
        supported: u32,
    },
    /// `[keys] frames` out of range.
    #[error("frames must be 1..={max}")]
    FramesRange {
        /// The most frames an intent key may hold.
        max: usize,
    },
    /// `[keys] user_frames` out of range.
    #[error("user_frames must be 0..={max}")]
    UserFramesRange {
        /// The most frames a user key may hold.
        max: usize,
    },
    /// `min_bytes` or `min_ios` is not a whole number.
    #[error("{key} must be a whole number >= 0")]
    NotWholeNumber {
        /// The setting.
        key: String,
    },
    /// `unattributed` is neither `pool` nor `strict`.
    #[error("unattributed must be \"pool\" or \"strict\"")]
    UnattributedMode,
    /// `min_share` is not a number in 0..=1.
    #[error("min_share must be a number in 0..=1")]
    MinShare,
    /// A `[defaults]` key that is neither a setting nor a tolerance.
    #[error(
        "unknown setting '{key}' (expected min_bytes, min_share, min_ios, unattributed or a tolerance: {})",
        TOLERANCE_KEYS.join(", ")
    )]
    UnknownSetting {
        /// The key.
        key: String,
    },
    /// A group's `tolerance.KEY` that is not a tolerance.
    #[error("unknown tolerance '{key}' (expected one of: {})", TOLERANCE_KEYS.join(", "))]
    UnknownTolerance {
        /// The key.
        key: String,
    },
    /// A tolerance that is neither a number >= 0 nor `"off"`.
    #[error("tolerance {key} must be a number >= 0 or \"off\"")]
    BadTolerance {
        /// The tolerance's key.
        key: String,
    },
    /// A `[[counter]]` spec that does not parse (the column points into the string).
    #[error("counter spec: {}", .0.message)]
    CounterSpec(SpecError),
    /// A group's `via` is not a via.
    #[error("unknown via '{via}' (expected page, buffer, inode, journal, direct, read, readahead, unknown or issuer)")]
    UnknownVia {
        /// The via as written.
        via: String,
    },
    /// A group's intent holds more frames than `[keys] frames`.
    #[error("{got} frames, more than [keys] frames = {max}: they could never match")]
    TooManyFrames {
        /// Frames of the group.
        got: usize,
        /// `[keys] frames`.
        max: usize,
    },
    /// A group's `user` holds more frames than `[keys] user_frames` (0 when the file does
    /// not set it).
    #[error("{got} user frames, more than [keys] user_frames = {max}: they could never match")]
    TooManyUserFrames {
        /// User frames of the group.
        got: usize,
        /// `[keys] user_frames`.
        max: usize,
    },
    /// A group's `sync_write_share` is not in 0..=1.
    #[error("sync_write_share must be in 0..=1")]
    SyncShare,
    /// A group's `behind_share` is not in 0..=1.
    #[error("behind_share must be in 0..=1")]
    BehindShare,
    /// A histogram names a counter the file does not have.
    #[error("counter {counter} does not exist (the baseline has {counters} [[counter]] entries, numbered from 0)")]
    NoSuchCounter {
        /// The counter number given.
        counter: usize,
        /// How many counters the file has.
        counters: usize,
    },
    /// A histogram's proportions are not [`SLOTS`] numbers >= 0.
    #[error("p must hold {} numbers >= 0", SLOTS)]
    Proportions,
}

/// Inputs that do not fit together ([`BaselineError::Input`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// An act has histograms, but not one per counter.
    #[error("act {act} has {histograms} histograms for {counters} counters")]
    Histograms {
        /// Index of the act in the inputs.
        act: usize,
        /// Histograms it has.
        histograms: usize,
        /// Counters given.
        counters: usize,
    },
}

/// Which side lacks kernel symbols ([`BaselineError::Symbols`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SymbolsMismatch {
    /// The baseline has symbols, the trace has none.
    #[error(
        "the trace has no kernel symbols (every intent frame is \"?\") but the baseline \
         was made with them: the intents cannot be compared. For a perf.data recording \
         pass --kallsyms FILE (a copy of the recording host's /proc/kallsyms)"
    )]
    TraceUnsymbolized,
    /// The trace has symbols, the baseline has none.
    #[error(
        "the baseline was made without kernel symbols (every intent frame is \"?\", \
         `symbols = false`) but the trace has them: the intents cannot be compared. \
         Make the baseline again from a trace with symbols"
    )]
    BaselineUnsymbolized,
}

impl From<SymbolsMismatch> for BaselineError {
    fn from(e: SymbolsMismatch) -> Self {
        BaselineError::Symbols(e)
    }
}

/// 1-based line and column of byte offset `at` in `text`.
pub(crate) fn line_col(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let mut at = at;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}
