//! Typed errors of the format crate.

use std::path::PathBuf;

/// Everything that can go wrong reading or writing a trace.
///
/// Errors found while reading carry the file and the byte offset of the fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system error on a file.
    #[error("{path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the ioblame magic.
    #[error("{path}: not an ioblame trace (bad magic)")]
    NotATrace {
        /// The file concerned.
        path: PathBuf,
    },
    /// The file was written by a newer, incompatible format version.
    #[error("{path}: format version {found} is newer than this reader (supports {supported})")]
    UnsupportedVersion {
        /// The file concerned.
        path: PathBuf,
        /// Major version found in the file.
        found: u16,
        /// Highest major version this reader understands.
        supported: u16,
    },
    /// A structure is malformed: a length runs past its container, a value is out of range.
    #[error("{path}: offset {offset}: {what}")]
    Corrupt {
        /// The file concerned.
        path: PathBuf,
        /// Byte offset in the file of the block or field at fault.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// A trace directory holds no trace file.
    #[error("{path}: no ioblame trace files (*.iob) found")]
    Empty {
        /// The directory.
        path: PathBuf,
    },
    /// A ring's size cap cannot hold two of its files ([`crate::RingOptions::fit`]).
    #[error(
        "a size cap of {max_size} bytes holds fewer than two ring files of {file_size} bytes \
         (each begins with {file_start} bytes of metadata) and their last blocks: the ring \
         would keep only the file being written"
    )]
    RingTooSmall {
        /// Bytes every ring file begins with: its header and metadata.
        file_start: u64,
        /// The file size the ring would roll at (0: never).
        file_size: u64,
        /// The size cap asked for.
        max_size: u64,
    },
}

/// A fault inside an in-memory structure, before the file and offset are known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} (at byte {at})")]
pub struct DecodeError {
    /// Byte position inside the structure being decoded.
    pub at: usize,
    /// What is wrong.
    pub what: String,
}

impl DecodeError {
    pub(crate) fn new(at: usize, what: impl Into<String>) -> Self {
        DecodeError {
            at,
            what: what.into(),
        }
    }
}

/// Why a zstd frame of a block was refused (before or while decompressing it); it becomes
/// the `what` of an [`Error::Corrupt`] or [`DecodeError`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// The declared size is over the cap of its kind of block.
    #[error("declares {declared} uncompressed bytes, over the cap of {cap}")]
    OverCap { declared: usize, cap: usize },
    /// The declared size is too many times the frame's.
    #[error(
        "declares {declared} uncompressed bytes from a {frame}-byte frame, more than \
         {ratio} times its size"
    )]
    OverRatio {
        declared: usize,
        frame: usize,
        ratio: usize,
    },
    /// The frame ends before the bytes given to it do.
    #[error("zstd frame of {frame} bytes does not fill its {given} bytes")]
    Trailing { frame: usize, given: usize },
    /// The bytes are not a zstd frame.
    #[error("not a valid zstd frame")]
    NotAFrame,
    /// The frame's header is not valid.
    #[error("not a valid zstd frame header")]
    BadFrameHeader,
    /// The frame does not say how much it holds.
    #[error("zstd frame does not declare its content size")]
    NoContentSize,
    /// The frame says it holds another size than the block's header.
    #[error("zstd frame holds {holds} bytes, the header declares {declared}")]
    ContentSize { holds: u64, declared: usize },
    /// Decompressing failed.
    #[error("zstd: {0}")]
    Zstd(std::io::Error),
    /// Decompressing gave another size than the block's header.
    #[error("decompressed to {got} bytes, the header declares {declared}")]
    Decompressed { got: usize, declared: usize },
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
