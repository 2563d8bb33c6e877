//! Why a conversion fails: [`PerfDataError`], and what is wrong inside a damaged file
//! ([`Corruption`], with the details of damaged event descriptions and tracing data).

use std::path::{Path, PathBuf};

/// Why a perf.data file could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum PerfDataError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the perf.data magic.
    #[error("{}: not a perf.data file (no PERFILE2 magic)", path.display())]
    NotPerfData {
        /// The file.
        path: PathBuf,
    },
    /// The file is truncated or damaged.
    #[error("{}: corrupt or truncated perf.data: {what}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: Corruption,
    },
    /// The perf.data parser panicked on this input (a bug in it, caught; the file is damaged
    /// in a way it does not check).
    #[error("{}: corrupt perf.data: the parser failed: {what}", path.display())]
    ParserPanicked {
        /// The file.
        path: PathBuf,
        /// The panic message.
        what: String,
    },
    /// `linux-perf-data` rejected the file.
    #[error("{}: cannot parse perf.data: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: linux_perf_data::Error,
    },
    /// Writing or reading the converted trace failed.
    #[error("{}: converting to an ioblame trace: {source}", path.display())]
    Trace {
        /// The perf.data file.
        path: PathBuf,
        /// The format crate's error.
        #[source]
        source: ioblame_format::Error,
    },
    /// The kallsyms file given could not be read.
    #[error("kallsyms file {}: {source}", path.display())]
    Kallsyms {
        /// The kallsyms file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The btrfs map given could not be read.
    #[error("btrfs map {}: {source}", path.display())]
    BtrfsMap {
        /// The map file.
        path: PathBuf,
        /// The reader's error.
        #[source]
        source: ioblame_format::Error,
    },
    /// The btrfs map was taken on another host or kernel than the recording.
    #[error(
        "btrfs map {}: taken on {map}, the recording on {recording}: its chunk maps and \
         devices are another machine's (take it with ioblame-capture btrfs-map on the \
         recording host)",
        path.display()
    )]
    BtrfsMapOtherHost {
        /// The map file.
        path: PathBuf,
        /// The map's host name and kernel release.
        map: String,
        /// The recording's host name and kernel release.
        recording: String,
    },
    /// The recording could not be planned (tracefs, devices).
    #[error(transparent)]
    Plan(#[from] ioblame_tracepoints::Error),
}

impl PerfDataError {
    /// [`PerfDataError::Io`] about `path`.
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        PerfDataError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// [`PerfDataError::Corrupt`] about `path`.
    pub(crate) fn corrupt(path: &Path, what: Corruption) -> Self {
        PerfDataError::Corrupt {
            path: path.to_path_buf(),
            what,
        }
    }
}

/// What is wrong in a truncated or damaged perf.data file ([`PerfDataError::Corrupt`]).
#[derive(Debug, thiserror::Error)]
pub enum Corruption {
    /// The file is shorter than `struct perf_file_header`.
    #[error("{len} bytes, shorter than the 104-byte header")]
    ShortHeader {
        /// The file's size.
        len: u64,
    },
    /// The header declares a size other than 104.
    #[error("header size {size}, expected 104")]
    HeaderSize {
        /// The size declared.
        size: u64,
    },
    /// A section of the file header runs past the end of the file.
    #[error(
        "the {name} section ({size} bytes at offset {offset}) runs past the end of the file ({len} bytes)"
    )]
    SectionPastEnd {
        /// Which section: `attrs`, `data` or `event types`.
        name: &'static str,
        /// Its offset.
        offset: u64,
        /// Its size.
        size: u64,
        /// The file's size.
        len: u64,
    },
    /// The data section is empty and at offset 0: perf never wrote the final header.
    #[error("the header was never completed (perf record did not exit cleanly)")]
    Unfinished,
    /// The table of feature sections runs past the end of the file.
    #[error(
        "the table of {features} feature sections at offset {offset} runs past the end of the file ({len} bytes)"
    )]
    FeatureTablePastEnd {
        /// The number of feature bits set.
        features: u64,
        /// The table's offset.
        offset: u64,
        /// The file's size.
        len: u64,
    },
    /// A feature section runs past the end of the file.
    #[error(
        "feature section {index} ({size} bytes at offset {offset}) runs past the end of the file ({len} bytes)"
    )]
    FeaturePastEnd {
        /// Its position in the feature table.
        index: usize,
        /// Its offset.
        offset: u64,
        /// Its size.
        size: u64,
        /// The file's size.
        len: u64,
    },
    /// The `HEADER_EVENT_DESC` section declares more than it holds.
    #[error("the event descriptions ({size} bytes at offset {offset}): {what}")]
    EventDesc {
        /// The section's offset.
        offset: u64,
        /// The section's size.
        size: u64,
        /// What it declares.
        what: EventDescError,
    },
    /// The `HEADER_TRACING_DATA` section is damaged.
    #[error(transparent)]
    TracingData(#[from] TracingDataError),
    /// The parser could not read a record's sample fields.
    #[error("{kind} record: {source}")]
    Record {
        /// The record's type.
        kind: String,
        /// The parser's error.
        #[source]
        source: std::io::Error,
    },
    /// A record names an attr the file does not have.
    #[error("record of unknown attr {0}")]
    UnknownAttr(usize),
    /// A record grown by the converter's IDENTIFIER no longer fits a record's u16 size.
    #[error("a record of {0} bytes exceeds 65535")]
    RecordTooLong(usize),
    /// A `perf record -z` record expands past what perf's records ever do: a zstd bomb.
    #[error(
        "the compressed record at byte {offset} ({len} bytes) expands to more than {limit} bytes"
    )]
    CompressedTooLarge {
        /// Where the record starts (in the file, or in the stream for pipe mode).
        offset: u64,
        /// Its size.
        len: u64,
        /// What it may expand to (128 times its size, plus 1 MiB).
        limit: u64,
    },
    /// A pipe-mode stream declares an attr after its first data record.
    #[error("an attr record at byte {offset} of the stream comes after the data began")]
    PipeAttrAfterData {
        /// Where the record ends in the stream.
        offset: u64,
    },
    /// A pipe-mode stream declares more than 65536 attrs.
    #[error("the stream declares more than 65536 attrs")]
    PipeTooManyAttrs,
    /// A pipe-mode attr record holds an attr of an impossible size.
    #[error("an attr of {size} bytes in the attr record ending at byte {offset} of the stream")]
    PipeAttrSize {
        /// Where the record ends in the stream.
        offset: u64,
        /// The attr size it declares.
        size: usize,
    },
    /// A pipe-mode stream declares more tracing data than any kernel has.
    #[error("{len} bytes of tracing data (at most 256 MiB)")]
    PipeTracingDataTooLong {
        /// The length declared.
        len: u64,
    },
}

/// A count inside the `HEADER_EVENT_DESC` section that the section cannot hold
/// ([`Corruption::EventDesc`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventDescError {
    /// A count lies past the end of the section.
    #[error("cut short at byte {0}")]
    CutShort(usize),
    /// The event count times the smallest event does not fit.
    #[error("{events} events of {attr_size}-byte attrs do not fit in {len} bytes")]
    TooManyEvents {
        /// The events declared.
        events: usize,
        /// The attr size declared.
        attr_size: usize,
        /// The section's size.
        len: usize,
    },
    /// One event's name and ids run past the end of the section.
    #[error(
        "event {index} declares a {name}-byte name and {ids} ids, more than the section holds"
    )]
    EventTooLong {
        /// The event's position.
        index: usize,
        /// The name's length declared.
        name: usize,
        /// The ids declared.
        ids: usize,
    },
}

/// A damaged `HEADER_TRACING_DATA` section ([`Corruption::TracingData`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TracingDataError {
    /// A part is longer than what remains of the section.
    #[error("tracing data: {what} needs {need} bytes at offset {offset} but only {remain} remain")]
    CutShort {
        /// The part.
        what: &'static str,
        /// Its length.
        need: u64,
        /// Where it starts.
        offset: usize,
        /// The bytes that remain.
        remain: usize,
    },
    /// A string runs to the end of the section.
    #[error("tracing data: {what} is not NUL-terminated")]
    Unterminated {
        /// The string.
        what: &'static str,
    },
    /// A fixed string (magic or part name) is not there.
    #[error("tracing data: expected {what}, found {found:?}")]
    Unexpected {
        /// The string expected.
        what: &'static str,
        /// The bytes found in its place.
        found: Vec<u8>,
    },
}
