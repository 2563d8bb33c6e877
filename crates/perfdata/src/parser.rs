//! The boundary with `linux-perf-data`, the third-party perf.data parser.
//!
//! Every call into the parser is made here and runs under [`guarded`]: the parser is fed
//! untrusted bytes, so a panic in it is reported as a corrupt file
//! ([`PerfDataError::ParserPanicked`]) instead of taking the analyzer down. ioblame's own code
//! never runs under it: a panic there is a bug, and stays a panic. What the parser returns is
//! copied into the plain types below before the rest of the conversion sees it.

use std::borrow::Cow;
use std::io::{BufReader, Read, Seek};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use linux_perf_data::linux_perf_event_reader::{PerfEventAttr, RawEventRecord, RecordType};
use linux_perf_data::{
    Feature, PerfFile, PerfFileReader, PerfFileRecord, PerfRecordIter, UserRecordType,
};

use crate::errors::{Corruption, PerfDataError};

/// Runs `f`, a call into the parser about the file `path`; a panic in it becomes
/// [`PerfDataError::ParserPanicked`] with the panic's message.
pub(crate) fn guarded<T>(path: &Path, f: impl FnOnce() -> T) -> Result<T, PerfDataError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let what = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "the parser panicked".into());
        PerfDataError::ParserPanicked {
            path: path.to_path_buf(),
            what,
        }
    })
}

/// What the parser reads from: a file, or bytes in memory.
pub(crate) trait Input: Read + Seek {}

impl<T: Read + Seek> Input for T {}

/// One `perf_event_attr` of the file, with what `HEADER_EVENT_DESC` says of it.
#[derive(Debug, Clone)]
pub(crate) struct Attr {
    /// The attr as the parser read it (see `attrs::RawAttr` for what it misreads).
    pub attr: PerfEventAttr,
    /// The event's name, if the file names it.
    pub name: Option<String>,
    /// The sample ids of the event.
    pub ids: Vec<u64>,
}

/// What the feature sections say about the recording.
#[derive(Debug, Clone, Default)]
pub(crate) struct Host {
    /// `HEADER_HOSTNAME`, or empty.
    pub hostname: String,
    /// `HEADER_OSRELEASE` (the kernel release), or empty.
    pub os_release: String,
    /// `HEADER_ARCH` (the machine), or empty.
    pub arch: String,
    /// `HEADER_VERSION` (perf's version), or `unknown`.
    pub perf_version: String,
    /// `HEADER_NRCPUS`: the larger of the CPUs available and online.
    pub cpus: Option<u32>,
    /// `HEADER_CLOCK_DATA`: (wall-clock time, clock time) at one instant, in ns.
    pub clock: Option<(u64, u64)>,
    /// `HEADER_CMDLINE`: perf's command line, or empty.
    pub cmdline: Vec<String>,
}

/// One record of the data section.
pub(crate) enum Record<'a> {
    /// A record the kernel wrote.
    Event(EventRecord<'a>),
    /// A record perf itself wrote (`FINISHED_ROUND`, ...), of this type.
    User(UserRecordType),
}

/// A record the kernel wrote for one of the file's attrs.
pub(crate) struct EventRecord<'a> {
    /// The attr's index in [`Parser::attrs`].
    pub attr_index: usize,
    /// The record type (`PERF_RECORD_*`).
    pub kind: u32,
    /// The header's `misc`.
    pub misc: u16,
    /// The body, after the 8-byte header.
    pub body: Cow<'a, [u8]>,
    raw: RawEventRecord<'a>,
    path: &'a Path,
}

impl EventRecord<'_> {
    /// The time and CPU the parser reads from the record's sample fields (SAMPLE) or
    /// `sample_id` trailer (other types); the parser's error about them is a
    /// [`Corruption::Record`].
    pub fn time_and_cpu(&self) -> Result<(Option<u64>, Option<u32>), PerfDataError> {
        guarded(self.path, || self.raw.common_data())?
            .map(|c| (c.timestamp, c.cpu))
            .map_err(|source| {
                let kind = record_name(self.kind);
                PerfDataError::corrupt(self.path, Corruption::Record { kind, source })
            })
    }
}

/// The name of record type `t` (`MMAP`, `SAMPLE`, ...).
pub(crate) fn record_name(t: u32) -> String {
    format!("{:?}", RecordType(t))
}

/// A perf.data file opened by the parser: its header and feature sections, and its records
/// in the order the parser yields them (file order sorted by time within each
/// `FINISHED_ROUND`).
pub(crate) struct Parser {
    path: PathBuf,
    file: PerfFile,
    records: PerfRecordIter<BufReader<Box<dyn Input>>>,
}

impl Parser {
    /// Parses the header and the feature sections of `file`, named `path` in errors.
    pub fn open(path: &Path, file: Box<dyn Input>) -> Result<Parser, PerfDataError> {
        let PerfFileReader {
            perf_file,
            record_iter,
        } = guarded(path, || PerfFileReader::parse_file(BufReader::new(file)))?
            .map_err(|source| parse_error(path, source))?;
        Ok(Parser {
            path: path.to_path_buf(),
            file: perf_file,
            records: record_iter,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `HEADER_TRACING_DATA` section, if the file has one.
    pub fn tracing_data(&self) -> Result<Option<&[u8]>, PerfDataError> {
        let file = &self.file;
        guarded(&self.path, || {
            file.feature_section_data(Feature::TRACING_DATA)
        })
    }

    /// The `HEADER_BUILD_ID` section (perf's build-id table), if the file has one.
    pub fn build_id_table(&self) -> Result<Option<&[u8]>, PerfDataError> {
        let file = &self.file;
        guarded(&self.path, || file.feature_section_data(Feature::BUILD_ID))
    }

    /// What the feature sections say about the recording. A damaged clock data or command
    /// line section is taken as missing, and the command line is not read at all unless
    /// `cmdline_ok` (the layout check found its count plausible); the other sections must
    /// parse.
    pub fn host(&self, cmdline_ok: bool) -> Result<Host, PerfDataError> {
        let f = &self.file;
        let (hostname, os_release, arch, perf_version, nr_cpus, clock, cmdline) =
            guarded(&self.path, || -> Result<_, linux_perf_data::Error> {
                Ok((
                    f.hostname()?,
                    f.os_release()?,
                    f.arch()?,
                    f.perf_version()?,
                    f.nr_cpus()?,
                    f.clock_data().unwrap_or(None),
                    if cmdline_ok {
                        f.cmdline().ok().flatten().unwrap_or_default()
                    } else {
                        Vec::new()
                    },
                ))
            })?
            .map_err(|source| parse_error(&self.path, source))?;
        Ok(Host {
            hostname: hostname.unwrap_or("").to_string(),
            os_release: os_release.unwrap_or("").to_string(),
            arch: arch.unwrap_or("").to_string(),
            perf_version: perf_version.unwrap_or("unknown").to_string(),
            cpus: nr_cpus.map(|n| n.nr_cpus_available.max(n.nr_cpus_online)),
            clock: clock.map(|c| (c.wall_clock_ns, c.clockid_time_ns)),
            cmdline: cmdline.into_iter().map(str::to_string).collect(),
        })
    }

    /// The file's attrs, in file order.
    pub fn attrs(&self) -> Result<Vec<Attr>, PerfDataError> {
        let file = &self.file;
        let described = guarded(&self.path, || {
            file.event_attributes()
                .iter()
                .map(|a| (*a.attributes(), a.name(), a.ids()))
                .collect::<Vec<_>>()
        })?;
        Ok(described
            .into_iter()
            .map(|(attr, name, ids)| Attr {
                attr,
                name: name.map(str::to_string),
                ids: ids.to_vec(),
            })
            .collect())
    }

    /// The next record, or `None` at the end of the data.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, PerfDataError> {
        let Parser {
            path,
            file,
            records,
        } = self;
        let path: &Path = path;
        guarded(path, move || {
            records.next_record(file).map(|r| {
                r.map(|r| match r {
                    PerfFileRecord::EventRecord { attr_index, record } => {
                        Record::Event(EventRecord {
                            attr_index,
                            kind: record.record_type.0,
                            misc: record.misc,
                            body: record.data.as_slice(),
                            raw: record,
                            path,
                        })
                    }
                    PerfFileRecord::UserRecord(u) => Record::User(u.record_type),
                })
            })
        })?
        .map_err(|source| parse_error(path, source))
    }
}

/// The parser's error about the file `path`.
fn parse_error(path: &Path, source: linux_perf_data::Error) -> PerfDataError {
    PerfDataError::Parse {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_the_parser_is_an_error() {
        let p = Path::new("x.data");
        assert_eq!(guarded(p, || 7).unwrap(), 7);
        let e = guarded(p, || -> u8 { panic!("index out of bounds") }).unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.data: corrupt perf.data: the parser failed: index out of bounds"
        );
        let n = 3;
        let e = guarded(p, || -> u8 { panic!("len {n}") }).unwrap_err();
        assert!(matches!(
            e,
            PerfDataError::ParserPanicked { ref what, .. } if what == "len 3"
        ));
        let e = guarded(p, || std::panic::panic_any(5u8)).unwrap_err();
        assert!(e.to_string().ends_with(": the parser panicked"), "{e}");
    }

    #[test]
    fn a_file_the_parser_rejects() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("bad.data");
        // The layout check would refuse this magic: the parser does too.
        let mut b = b"PERFILE3".to_vec();
        b.extend(104u64.to_le_bytes());
        b.resize(200, 0);
        std::fs::write(&p, &b).unwrap();
        match Parser::open(&p, Box::new(std::fs::File::open(&p).unwrap())) {
            Err(PerfDataError::Parse { .. }) => {}
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("parsed"),
        }
    }
}
