//! Errors of the baseline crate.

/// What can go wrong building, reading or checking a baseline.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// The baseline file is not valid: line and column (1-based) of the offending text.
    #[error("baseline line {line}, column {column}: {message}")]
    Parse {
        /// 1-based line.
        line: usize,
        /// 1-based column (in characters).
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// The baseline file is not valid and the parser gave no position.
    #[error("baseline: {0}")]
    Invalid(String),
    /// A counter spec given to build or check is invalid.
    #[error("invalid counter spec: {0}")]
    Counter(#[from] ioblame_counters::SpecError),
    /// The inputs are inconsistent (e.g. histograms not matching the counters).
    #[error("invalid input: {0}")]
    Input(String),
    /// The trace and the baseline cannot be compared: one has kernel symbols and the other
    /// not, so their intent keys (function names vs `?`) never match.
    #[error("{0}")]
    Symbols(String),
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
