//! blktrace recordings as ioblame input: the per-CPU binary files `blktrace` writes
//! (`sdX.blktrace.N`), `blkparse -d` merged dumps, and `blkparse` text in its default format.
//!
//! * [`Recording::open`] takes files (any name: the kind is told by the content, never by the
//!   name) and directories, of one or several devices, and reads them once to learn what
//!   the analysis needs first ([`Scan`]: devices, partitions and remaps, task names, the
//!   wall clock, messages, counts per action, damage);
//! * [`Recording::records`] gives every [`Record`] of every file in time order, merging the
//!   files as it goes (one record per file held: memory does not grow with the recording);
//! * [`Recording::for_each_event`] gives the typed block events the attribution takes
//!   (`ioblame_events::Event`), read on another thread.
//!
//! Record versions 7 (`struct blk_io_trace`) and 8 (`struct blk_io_trace2`) are read, in
//! either byte order (told by the magic of each record). Damage (bytes that are no record, a
//! record cut short, a payload running past the end of its file, an empty file) is reported
//! as a [`Problem`] and every intact record is still read. See `docs/blktrace.md`.
#![deny(missing_docs)]

mod events;
mod reader;
pub mod record;
mod scan;
#[cfg(test)]
mod tests;
pub mod text;

use std::path::{Path, PathBuf};

pub use events::{to_events, Converter};
pub use reader::{file_kind, kind_of, Kind, Records};
pub use record::{Action, Payload, Record};
pub use scan::{DeviceInfo, Scan};

/// Why a recording cannot be read at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No input was named.
    #[error("no blktrace input given")]
    NoInput,
    /// A file could not be opened or mapped.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file named is neither blktrace records nor blkparse text.
    #[error("{}: not blktrace data (no blk_io_trace magic, and not blkparse text)", path.display())]
    NotBlktrace {
        /// The file.
        path: PathBuf,
    },
    /// A file's first record has blktrace's magic with a version this reader does not know.
    #[error("{}: blktrace record version {version} is not supported (versions 7 and 8 are)", path.display())]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version its magic gives.
        version: u8,
    },
    /// A directory holds no blktrace file.
    #[error("{}: no blktrace file in this directory", path.display())]
    NoBlktraceIn {
        /// The directory.
        path: PathBuf,
    },
    /// Every file named is empty.
    #[error("every blktrace file given is empty")]
    Empty,
}

/// Something a reader met and read past.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// An empty file (ignored).
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// Bytes that are no record (bad magic or an unknown version), skipped up to the next
    /// record that reads.
    BadMagic {
        /// The file.
        path: PathBuf,
        /// Where the damage starts.
        offset: u64,
        /// Bytes skipped.
        skipped: u64,
        /// The version, when the magic was blktrace's with another version.
        version: Option<u8>,
    },
    /// The file ends inside a record header.
    CutShort {
        /// The file.
        path: PathBuf,
        /// Where the record starts.
        offset: u64,
        /// Bytes left there.
        have: u64,
    },
    /// A record's payload length runs past the end of the file.
    PduPastEnd {
        /// The file.
        path: PathBuf,
        /// Where the record starts.
        offset: u64,
        /// The payload length the header gives.
        pdu_len: u16,
        /// Bytes left there, header included.
        have: u64,
    },
    /// Lines of a blkparse text file that are neither actions nor its summaries.
    UnknownLines {
        /// The file.
        path: PathBuf,
        /// How many.
        count: u64,
        /// The first ones' line numbers (1-based).
        lines: Vec<u64>,
    },
    /// blkparse text files in a directory that also holds binary files (ignored).
    TextBesideBinary {
        /// The directory.
        dir: PathBuf,
        /// How many.
        files: usize,
    },
    /// Files in a directory that are not blktrace data (ignored).
    OtherFiles {
        /// The directory.
        dir: PathBuf,
        /// How many.
        files: usize,
    },
    /// Records whose cpu field disagrees with the CPU number of their file's name
    /// (`NAME.blktrace.CPU`); they are read all the same.
    CpuMismatch {
        /// The file.
        path: PathBuf,
        /// How many records.
        records: u64,
    },
}

impl Problem {
    /// Whether records may be missing (damage), as opposed to something merely noted (an
    /// empty per-CPU file, which blktrace writes for every idle CPU; files ignored; records
    /// naming another CPU).
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            Problem::BadMagic { .. }
                | Problem::CutShort { .. }
                | Problem::PduPastEnd { .. }
                | Problem::UnknownLines { .. }
        )
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Empty { path } => write!(f, "{}: empty file, ignored", path.display()),
            Problem::BadMagic {
                path,
                offset,
                skipped,
                version,
            } => {
                write!(f, "{}: at byte {offset}: ", path.display())?;
                match version {
                    Some(v) => write!(f, "record version {v} is not supported")?,
                    None => write!(f, "no blktrace record (bad magic)")?,
                }
                write!(f, "; {skipped} bytes skipped to the next record")
            }
            Problem::CutShort { path, offset, have } => write!(
                f,
                "{}: the last record (at byte {offset}) is cut short: {have} bytes of a header; the file was read up to it",
                path.display()
            ),
            Problem::PduPastEnd {
                path,
                offset,
                pdu_len,
                have,
            } => write!(
                f,
                "{}: the record at byte {offset} says {pdu_len} bytes of payload follow, but only {have} bytes are left; the file was read up to it",
                path.display()
            ),
            Problem::UnknownLines { path, count, lines } => {
                let l: Vec<String> = lines.iter().map(u64::to_string).collect();
                write!(
                    f,
                    "{}: {count} lines are not blkparse actions, skipped (lines {}{})",
                    path.display(),
                    l.join(", "),
                    if *count as usize > lines.len() { ", ..." } else { "" }
                )
            }
            Problem::TextBesideBinary { dir, files } => write!(
                f,
                "{}: {files} blkparse text files ignored: the binary files beside them are read",
                dir.display()
            ),
            Problem::OtherFiles { dir, files } => write!(
                f,
                "{}: {files} files that are not blktrace data ignored",
                dir.display()
            ),
            Problem::CpuMismatch { path, records } => write!(
                f,
                "{}: {records} records name another CPU than the file's name; read all the same",
                path.display()
            ),
        }
    }
}

/// An opened blktrace recording.
pub struct Recording {
    sources: Vec<reader::Source>,
    scan: Scan,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("files", &self.sources.len())
            .field("records", &self.scan.records)
            .finish()
    }
}

impl Recording {
    /// Opens the files and directories named and reads them once ([`Scan`]).
    pub fn open(paths: &[PathBuf]) -> Result<Recording, Error> {
        let mut problems = Vec::new();
        let sources = reader::open_sources(paths, &mut problems)?;
        for s in &sources {
            if s.kind == Kind::Binary {
                if let Some((_, v)) = record::magic(s.bytes()) {
                    if v != 7 && v != 8 {
                        return Err(Error::UnsupportedVersion {
                            path: s.path.clone(),
                            version: v,
                        });
                    }
                }
            }
        }
        let scan = scan::scan(&sources, problems);
        Ok(Recording { sources, scan })
    }

    /// A recording of one file's `bytes` already in memory, named `path` (in messages);
    /// `None` when they are neither blktrace records nor blkparse text. For tests and
    /// fuzzing.
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Option<Recording> {
        let s = reader::Source::from_bytes(path.to_path_buf(), bytes)?;
        let sources = vec![s];
        let scan = scan::scan(&sources, Vec::new());
        Some(Recording { sources, scan })
    }

    /// What the first reading found.
    pub fn scan(&self) -> &Scan {
        &self.scan
    }

    /// The files read, with their kind.
    pub fn files(&self) -> impl Iterator<Item = (&Path, Kind)> {
        self.sources.iter().map(|s| (s.path.as_path(), s.kind))
    }

    /// Every record of every file, in time order.
    pub fn records(&self) -> Records<'_> {
        Records::new(&self.sources)
    }
}

/// Whether `path` is blktrace input: a file of blktrace records or blkparse text, or a
/// directory holding at least one.
pub fn is_blktrace(path: &Path) -> bool {
    if path.is_dir() {
        std::fs::read_dir(path)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .any(|e| file_kind(&e.path()).is_some())
            })
            .unwrap_or(false)
    } else {
        file_kind(path).is_some()
    }
}
