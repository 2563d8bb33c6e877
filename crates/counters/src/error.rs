//! Typed errors: every parse error carries where it happened.

use std::fmt;
use std::path::PathBuf;

/// Where a counter spec (or a filter) came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The N-th counter given on the command line (1-based over all counters given).
    Counter(usize),
    /// A line of a counters file (1-based line number).
    File {
        /// The file as the user named it.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
    },
    /// A filter parsed on its own ([`crate::Filter::parse`]).
    Filter,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Counter(n) => write!(f, "counter {n}"),
            Location::File { path, line } => write!(f, "{}:{line}", path.display()),
            Location::Filter => f.write_str("filter"),
        }
    }
}

/// A malformed counter spec or filter: the message points at the offending token.
///
/// Displays as one line, e.g. `counter 2, column 14: expected a number after 'size <'`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}, column {column}: {message}")]
pub struct SpecError {
    /// Which counter (or file line).
    pub location: Location,
    /// 1-based column (in characters) of the offending token within the spec text; one past
    /// the last character when something is missing at the end.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// Any error of [`crate::CounterSet`] construction.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CountersError {
    /// A malformed counter spec or filter.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A counters file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A counters file (or argument list) holds no counter.
    #[error("{what}: no counter given")]
    Empty {
        /// The file name, or `counters` for the argument list.
        what: String,
    },
    /// A device name in a counter's filter is not in the trace's device table.
    #[error("counter {counter}: {source}")]
    Device {
        /// 1-based index of the counter in its set.
        counter: usize,
        /// What is wrong with the name.
        source: DevError,
    },
    /// A filter compares `cgroup` but the trace recorded no cgroups.
    #[error(
        "counter {counter}: its filter compares cgroup, but the trace recorded no cgroups \
         (before format 1.3, --no-cgroups, or a kernel before 5.7)"
    )]
    NoCgroups {
        /// 1-based index of the counter in its set.
        counter: usize,
    },
    /// More counters than [`crate::MAX_COUNTERS`].
    #[error("{count} counters given, at most {max} are allowed")]
    TooMany {
        /// How many were given.
        count: usize,
        /// The cap.
        max: usize,
    },
}

/// A malformed `--devs` selection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DevError {
    /// A name that is not in the trace's device table.
    #[error("unknown device '{name}' (the trace knows: {known})")]
    Unknown {
        /// The name as given.
        name: String,
        /// The devices the trace knows, as `name (MAJ:MIN)`, comma separated (or `none`).
        known: String,
    },
    /// An item that is neither a name nor `MAJ:MIN` (e.g. `8:x`, a lone `!`).
    #[error("bad device '{item}': {why}")]
    Syntax {
        /// The item as given.
        item: String,
        /// What is wrong with it.
        why: DevSyntax,
    },
}

/// What is wrong with a `--devs` item that is neither a device name nor `MAJ:MIN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DevSyntax {
    /// A `!` with nothing after it.
    #[error("expected a device name or MAJ:MIN after '!'")]
    MissingAfterBang,
    /// A `MAJ:MIN` whose halves are not decimal numbers in range.
    #[error("MAJ:MIN needs two decimal numbers (major below 4096, minor below 1048576)")]
    BadMajMin,
}
