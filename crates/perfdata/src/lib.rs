//! Reads `perf.data` files recorded with stock `perf record` as ioblame traces.
//!
//! [`open_perf_data`] converts a perf.data file into an in-memory [`ioblame_format::Trace`], so
//! that the decoder and the attribution work on it unchanged. [`perf_command`] prints the
//! `perf record` command line that records what the attribution needs on the running kernel.
//!
//! The perf.data file is parsed with the `linux-perf-data` crate (which also undoes
//! `perf record -z` zstd compression and handles both byte orders, except for the attrs'
//! bitfield flags in big-endian files, which ioblame reads itself). The conversion:
//!
//! * **Header**: the file's byte order, word size 8 (4 when the tracing data says `long` is 4 bytes), page size from the tracing data (else
//!   4096), host name, kernel release, machine and CPU count from the feature sections, the
//!   attr's clock id (or -1), start times from `HEADER_CLOCK_DATA` (else 0), recorder pid 0,
//!   recorder version `perf <version>`.
//! * **Events**: one [`EventDesc`] per perf attr, in attr order, named from `EVENT_DESC`, with
//!   the tracefs `format` text from `HEADER_TRACING_DATA` matched by tracefs id, the attr's
//!   sample type, read format, `sample_max_stack` and ids, and the `--filter` found in the
//!   recorded command line. Non-tracepoint attrs (perf's `dummy:HG` tracking event) are kept
//!   with tracefs id 0 and an empty format so that their ids stay known.
//! * **Records**: SAMPLE, COMM, FORK, EXIT, LOST and LOST_SAMPLES records are re-emitted in the
//!   file's byte order into chunks of one CPU each (~1 MiB), CPU from the sample's `CPU` field
//!   or the `sample_id_all` trailer (records without one go to CPU 0). Records come in the order
//!   `linux-perf-data` yields them: file order sorted by time within each `FINISHED_ROUND`,
//!   which per CPU is the ring-buffer order (for big-endian files each CPU's records are put
//!   back in time order by the converter, see `RawAttr`). The time and CPU of non-sample
//!   records are read from their trailer as the attr's own flags describe it. Other record
//!   types are dropped and counted in the notes.
//! * **Callchains**: per event, from the attr's sample type (`perf-command` gives only the
//!   stack events a callchain); the notes name the stack events recorded without one.
//! * **IDENTIFIER**: ioblame identifies samples by `PERF_SAMPLE_IDENTIFIER`. For an attr whose
//!   sample type lacks it (perf leaves it out when there is a single event), the converter
//!   sets the bit in the event's sample type, prepends the attr's first id to each SAMPLE body,
//!   and, when the attr has `sample_id_all`, appends the same id to the trailer of its
//!   non-sample records (the kernel ABI puts IDENTIFIER last in that trailer). An attr without
//!   ids gets a synthetic one (`u64::MAX - attr index`).
#![deny(missing_docs)]

mod command;
mod tracing;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use ioblame_format::{
    ByteOrder, ChunkBuilder, EncodedChunk, EventDesc, FileWriter, Header, Kallsyms, Metadata,
    Trace, TraceFile, EVENT_CALLCHAIN, EVENT_TASK_RECORDS,
};
use linux_perf_data::linux_perf_event_reader::{
    AttrFlags, Endianness, PerfClock, PerfEventType, RecordType, SampleFormat,
};
use linux_perf_data::{PerfFileReader, PerfFileRecord};

pub use command::{perf_command, perf_command_with_notes};

/// Target size of the uncompressed records of one chunk.
const CHUNK_TARGET: usize = 1 << 20;
/// zstd level of the converted chunks.
const ZSTD_LEVEL: i32 = 3;
/// Size of `struct perf_file_header`.
const PERF_FILE_HEADER_LEN: u64 = 104;

const PERF_RECORD_MMAP: u32 = 1;
const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_COMM: u32 = 3;
const PERF_RECORD_EXIT: u32 = 4;
const PERF_RECORD_FORK: u32 = 7;
const PERF_RECORD_SAMPLE: u32 = 9;
const PERF_RECORD_LOST_SAMPLES: u32 = 13;
const PERF_RECORD_MMAP2: u32 = 10;

/// Options of the conversion.
#[derive(Debug, Clone, Default)]
pub struct PerfDataOptions {
    /// A copy of `/proc/kallsyms` of the recording host. When given it is always used;
    /// otherwise this host's `/proc/kallsyms` is used if the file's host name and kernel
    /// release match this host, else the kallsyms copy in the tracing data if perf stored one
    /// (modern perf stores none), else the trace has no symbols (and a note says so).
    pub kallsyms: Option<PathBuf>,
}

/// A converted perf.data file.
#[derive(Debug)]
pub struct Converted {
    /// The trace, as if `ioblame-capture` had recorded it.
    pub trace: Trace,
    /// What the user should know: missing events and what they cost, missing callchains,
    /// where kernel symbols came from, records dropped.
    pub notes: Vec<String>,
}

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
        what: String,
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
    /// The recording could not be planned (tracefs, devices).
    #[error(transparent)]
    Plan(#[from] ioblame_tracepoints::Error),
}

/// Whether `path` starts with the perf.data magic (`PERFILE2`, or `2ELIFREP` for a file of the
/// other byte order).
pub fn is_perf_data(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && (&magic == b"PERFILE2" || &magic == b"2ELIFREP")
}

/// Events the attribution needs, with what is lost without them.
const NEEDED: &[(&str, &str)] = &[
    (
        "writeback:writeback_dirty_folio",
        "buffered writes cannot be charged to the task that dirtied the pages",
    ),
    (
        "block:block_dirty_buffer",
        "metadata and buffer-head writes cannot be charged to their dirtier",
    ),
    (
        "block:block_bio_queue",
        "IOs are never seen entering the block layer: nothing can be attributed",
    ),
    (
        "block:block_rq_issue",
        "IOs are never issued: no device time, nothing can be charged",
    ),
    (
        "block:block_rq_complete",
        "IOs never complete, nothing can be charged",
    ),
    (
        "filemap:mm_filemap_add_to_page_cache",
        "folio sizes are unknown: large folios are charged as their first page only",
    ),
    (
        "ext4:ext4_ext_map_blocks_exit",
        "ext4 sectors cannot be mapped back to file pages: ext4 writeback is charged by bracket heuristics or to UNKNOWN",
    ),
    (
        "iomap:iomap_add_to_ioend",
        "xfs/iomap sectors cannot be mapped back to file pages: their writeback is charged by bracket heuristics or to UNKNOWN",
    ),
    (
        "writeback:writeback_single_inode_start",
        "writeback cannot be tied to the inode being written",
    ),
    (
        "writeback:writeback_start",
        "writeback reasons (periodic, background, sync...) are unknown",
    ),
];

/// Whether the recorded event `recorded` is `wanted` or one of its other names (an event
/// renamed between kernels, [`ioblame_tracepoints::RENAMES`]: `perf-command` records the old
/// name on kernels that have only that).
fn same_event(wanted: &str, recorded: &str) -> bool {
    wanted == recorded
        || ioblame_tracepoints::RENAMES
            .iter()
            .any(|&(new, old)| (wanted, recorded) == (new, old) || (wanted, recorded) == (old, new))
}

/// The other names of an event (see [`same_event`]).
fn other_names(ev: &str) -> Vec<&'static str> {
    ioblame_tracepoints::RENAMES
        .iter()
        .filter_map(|&(new, old)| {
            if new == ev {
                Some(old)
            } else if old == ev {
                Some(new)
            } else {
                None
            }
        })
        .collect()
}

/// What the user should know about the recorded events: the events the attribution needs
/// that are missing, with what is lost and what to add, and the stack events recorded
/// without a callchain. `events` are (name, has a callchain).
fn event_notes(events: &[(&str, bool)]) -> Vec<String> {
    let mut notes = Vec::new();
    for (ev, why) in NEEDED {
        if events.iter().any(|(e, _)| same_event(ev, e)) {
            continue;
        }
        let add = match other_names(ev).as_slice() {
            [] => format!("add -e {ev}"),
            others => format!(
                "add -e {ev} (or {}, its name on older kernels: `ioblame perf-command` prints the one the kernel has)",
                others.join(" or ")
            ),
        };
        notes.push(format!("no {ev}: {why}; {add}"));
    }
    let bare: Vec<&str> = events
        .iter()
        .filter(|(e, callchain)| {
            !callchain
                && ioblame_tracepoints::CALLCHAIN_EVENTS
                    .iter()
                    .any(|s| same_event(s, e))
        })
        .map(|(e, _)| *e)
        .collect();
    if !bare.is_empty() {
        let all = events
            .iter()
            .filter(|(e, _)| {
                ioblame_tracepoints::CALLCHAIN_EVENTS
                    .iter()
                    .any(|s| same_event(s, e))
            })
            .count();
        let what = if bare.len() == all {
            "intents have no stacks".to_string()
        } else {
            "the intents of their IO have no stacks".to_string()
        };
        notes.push(format!(
            "recorded without callchains on {}: {what}; record them with kernel callchains \
             (-e EVENT/call-graph=fp/ and --kernel-callchains, as `ioblame perf-command` prints, or -g)",
            bare.join(", ")
        ));
    }
    notes
}

/// Checks the perf file header and the feature section table against the file size, so that
/// the parser never allocates for a section that is not there.
fn check_layout(path: &Path, f: &mut std::fs::File) -> Result<Vec<RawAttr>, PerfDataError> {
    let io = |source| PerfDataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let corrupt = |what: String| PerfDataError::Corrupt {
        path: path.to_path_buf(),
        what,
    };
    let len = f.metadata().map_err(io)?.len();
    let mut h = [0u8; PERF_FILE_HEADER_LEN as usize];
    if len < PERF_FILE_HEADER_LEN {
        let mut m = [0u8; 8];
        if f.read_exact(&mut m).is_ok() && (&m == b"PERFILE2" || &m == b"2ELIFREP") {
            return Err(corrupt(format!(
                "{len} bytes, shorter than the 104-byte header"
            )));
        }
        return Err(PerfDataError::NotPerfData {
            path: path.to_path_buf(),
        });
    }
    f.read_exact(&mut h).map_err(io)?;
    let order = match &h[..8] {
        b"PERFILE2" => ByteOrder::Little,
        b"2ELIFREP" => ByteOrder::Big,
        _ => {
            return Err(PerfDataError::NotPerfData {
                path: path.to_path_buf(),
            })
        }
    };
    let u64at = |o: usize| order.u64(h[o..o + 8].try_into().unwrap_or([0; 8]));
    let section = |name: &str, o: usize| -> Result<(u64, u64), PerfDataError> {
        let (off, size) = (u64at(o), u64at(o + 8));
        match off.checked_add(size) {
            Some(end) if end <= len => Ok((off, size)),
            _ => Err(corrupt(format!(
                "the {name} section ({size} bytes at offset {off}) runs past the end of the file ({len} bytes)"
            ))),
        }
    };
    let header_size = u64at(8);
    if header_size != PERF_FILE_HEADER_LEN {
        return Err(corrupt(format!("header size {header_size}, expected 104")));
    }
    let (attrs_off, attrs_size) = section("attrs", 24)?;
    let attr_entry = u64at(16);
    let (data_off, data_size) = section("data", 40)?;
    section("event types", 56)?;
    if data_size == 0 && data_off == 0 {
        return Err(corrupt(
            "the header was never completed (perf record did not exit cleanly)".into(),
        ));
    }
    let mut features = 0u64;
    for i in 0..4 {
        features += u64::from(u64at(72 + 8 * i).count_ones());
    }
    let table = data_off + data_size;
    if table + 16 * features > len {
        return Err(corrupt(format!(
            "the table of {features} feature sections at offset {table} runs past the end of the file ({len} bytes)"
        )));
    }
    f.seek(SeekFrom::Start(table)).map_err(io)?;
    let mut t = vec![0u8; 16 * features as usize];
    f.read_exact(&mut t).map_err(io)?;
    // The table lists the sections of the feature bits set, in bit order.
    let bits = (0..256u32).filter(|b| u64at(72 + 8 * (*b as usize / 64)) >> (b % 64) & 1 != 0);
    for ((i, e), bit) in t.chunks_exact(16).enumerate().zip(bits) {
        let rd = |b: &[u8]| order.u64(b.try_into().unwrap_or([0; 8]));
        let (off, size) = (rd(&e[..8]), rd(&e[8..]));
        if off.checked_add(size).is_none_or(|end| end > len) {
            return Err(corrupt(format!(
                "feature section {i} ({size} bytes at offset {off}) runs past the end of the file ({len} bytes)"
            )));
        }
        if bit == HEADER_EVENT_DESC {
            f.seek(SeekFrom::Start(off)).map_err(io)?;
            let mut s = vec![0u8; size as usize];
            f.read_exact(&mut s).map_err(io)?;
            check_event_desc(&s, order).map_err(|what| {
                corrupt(format!(
                    "the event descriptions ({size} bytes at offset {off}): {what}"
                ))
            })?;
        }
    }
    // The attrs as written, for what the parser reads wrong in big-endian files.
    let mut raw = Vec::new();
    if attr_entry >= 16 + 48 && attrs_size / attr_entry <= 1 << 16 {
        f.seek(SeekFrom::Start(attrs_off)).map_err(io)?;
        let mut b = vec![0u8; (attrs_size / attr_entry * attr_entry) as usize];
        f.read_exact(&mut b).map_err(io)?;
        for a in b.chunks_exact(attr_entry as usize) {
            raw.push(RawAttr::parse(&a[..a.len() - 16], order));
        }
    }
    f.seek(SeekFrom::Start(0)).map_err(io)?;
    Ok(raw)
}

/// Feature bit of `HEADER_EVENT_DESC`.
const HEADER_EVENT_DESC: u32 = 12;

/// Checks the counts inside a `HEADER_EVENT_DESC` section against its size: the parser
/// reserves memory for the declared number of events and of ids of each before reading
/// them, so a damaged count would make it ask for gigabytes and abort the process.
fn check_event_desc(s: &[u8], order: ByteOrder) -> Result<(), String> {
    let u32at = |o: usize| {
        s.get(o..o + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(|b| order.u32(b))
            .ok_or_else(|| format!("cut short at byte {o}"))
    };
    let nr = u32at(0)? as usize;
    let attr_size = u32at(4)? as usize;
    // Each event takes at least its attr, an id count and a string length.
    if attr_size == 0 || nr.saturating_mul(attr_size + 8) > s.len() {
        return Err(format!(
            "{nr} events of {attr_size}-byte attrs do not fit in {} bytes",
            s.len()
        ));
    }
    let mut o = 8;
    for i in 0..nr {
        o += attr_size;
        let ids = u32at(o)? as usize;
        let name = u32at(o + 4)? as usize;
        o += 8;
        let need = name.saturating_add(ids.saturating_mul(8));
        if need > s.len() - o.min(s.len()) {
            return Err(format!(
                "event {i} declares a {name}-byte name and {ids} ids, more than the section holds"
            ));
        }
        o += need;
    }
    Ok(())
}

/// What ioblame reads of a `perf_event_attr` itself.
///
/// `linux-perf-data` reads the attr's bitfield word (`disabled`, `comm`, `task`,
/// `sample_id_all`, `use_clockid`, ...) as a plain u64 in the file's byte order. A
/// big-endian host's compiler lays bitfields out from the most significant bit of each
/// byte, so in a big-endian file that reads as the bit-reversed word (perf itself reverses
/// the bits of each byte when it reads a file of the other byte order): the flags are
/// taken from the raw bytes here.
#[derive(Debug, Clone, Copy, Default)]
struct RawAttr {
    /// The bitfield flags, bit n = the n-th bitfield of `perf_event_attr`.
    flags: u64,
    /// `clockid`, when the attr is large enough to hold it.
    clockid: Option<i32>,
}

impl RawAttr {
    fn parse(a: &[u8], order: ByteOrder) -> RawAttr {
        let u64at = |o: usize| {
            a.get(o..o + 8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(|b| order.u64(b))
        };
        let i32at = |o: usize| {
            a.get(o..o + 4)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(|b| order.u32(b) as i32)
        };
        let word = u64at(40).unwrap_or(0);
        RawAttr {
            flags: if order == ByteOrder::Big {
                word.reverse_bits()
            } else {
                word
            },
            clockid: i32at(92),
        }
    }
}

/// The sample_id trailer of a non-sample record of an attr with `sample_id_all`: (time,
/// cpu), read from the end of the body by the attr's sample type.
fn sample_id_trailer(
    order: ByteOrder,
    sample_type: u64,
    body: &[u8],
) -> (Option<u64>, Option<u32>) {
    let has = |f: SampleFormat| sample_type & f.bits() != 0;
    let fields = [
        SampleFormat::TID,
        SampleFormat::TIME,
        SampleFormat::ID,
        SampleFormat::STREAM_ID,
        SampleFormat::CPU,
        SampleFormat::IDENTIFIER,
    ];
    let len = 8 * fields.iter().filter(|f| has(**f)).count();
    let Some(mut at) = body.len().checked_sub(len) else {
        return (None, None);
    };
    let (mut time, mut cpu) = (None, None);
    for f in fields {
        if !has(f) {
            continue;
        }
        let w = body.get(at..at + 8);
        if f == SampleFormat::TIME {
            time = w
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(|b| order.u64(b));
        } else if f == SampleFormat::CPU {
            cpu = w
                .and_then(|b| <[u8; 4]>::try_from(&b[..4]).ok())
                .map(|b| order.u32(b));
        }
        at += 8;
    }
    (time, cpu)
}

fn read_trim(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The events of one `-e` argument, without their `/term=value,.../` config terms
/// (`block:block_bio_queue/call-graph=fp/` is the event `block:block_bio_queue`): commas
/// inside the terms do not separate events.
fn events_of_arg(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_terms = false;
    for c in v.chars() {
        match c {
            '/' => in_terms = !in_terms,
            ',' if !in_terms => out.push(std::mem::take(&mut cur)),
            c if !in_terms => cur.push(c),
            _ => {}
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect()
}

/// Extracts `-e EVENT ... --filter F` pairs from perf's recorded command line.
fn filters_from_cmdline(args: &[&str]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut last: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, val) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (*a, None),
        };
        match flag {
            "-e" | "--event" => {
                let v = val.or_else(|| it.next().map(|s| s.to_string()));
                last = v.map(|v| events_of_arg(&v)).unwrap_or_default();
            }
            "--filter" => {
                if let Some(v) = val.or_else(|| it.next().map(|s| s.to_string())) {
                    for e in &last {
                        out.insert(e.clone(), v.clone());
                    }
                }
            }
            "--" => break,
            _ => {}
        }
    }
    out
}

fn clock_number(c: &PerfClock) -> i32 {
    use linux_perf_data::linux_perf_event_reader::ClockId;
    match c {
        PerfClock::Default => -1,
        PerfClock::ClockId(id) => match id {
            ClockId::Realtime => 0,
            ClockId::Monotonic => 1,
            ClockId::ProcessCputimeId => 2,
            ClockId::ThreadCputimeId => 3,
            ClockId::MonotonicRaw => 4,
            ClockId::RealtimeCoarse => 5,
            ClockId::MonotonicCoarse => 6,
            ClockId::Boottime => 7,
            ClockId::RealtimeAlarm => 8,
            ClockId::BoottimeAlarm => 9,
            _ => -1,
        },
    }
}

fn record_name(t: u32) -> String {
    format!("{:?}", RecordType(t))
}

/// Converts the perf.data file at `path` into an in-memory ioblame trace.
pub fn open_perf_data(path: &Path, opts: &PerfDataOptions) -> Result<Converted, PerfDataError> {
    let io = |source| PerfDataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let raw = check_layout(path, &mut file)?;
    // The parser is third-party code fed with untrusted bytes: a panic in it is reported as
    // a corrupt file instead of taking the analyzer down.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        convert(path, file, opts, &raw)
    })) {
        Ok(r) => r,
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the parser panicked".into());
            Err(PerfDataError::ParserPanicked {
                path: path.to_path_buf(),
                what,
            })
        }
    }
}

/// Per-attr conversion state.
struct AttrInfo {
    /// The id to prepend/append when the attr lacks IDENTIFIER.
    add_id: Option<u64>,
    sample_id_all: bool,
    /// The sample type as recorded (before IDENTIFIER is added).
    sample_type: u64,
}

fn convert(
    path: &Path,
    file: std::fs::File,
    opts: &PerfDataOptions,
    raw: &[RawAttr],
) -> Result<Converted, PerfDataError> {
    let parse_err = |source| PerfDataError::Parse {
        path: path.to_path_buf(),
        source,
    };
    let corrupt = |what: String| PerfDataError::Corrupt {
        path: path.to_path_buf(),
        what,
    };
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(BufReader::new(file)).map_err(parse_err)?;
    let mut notes = Vec::new();
    let order = match perf_file.endian() {
        Endianness::LittleEndian => ByteOrder::Little,
        Endianness::BigEndian => ByteOrder::Big,
    };

    let tracing = match perf_file.feature_section_data(linux_perf_data::Feature::TRACING_DATA) {
        Some(b) => tracing::parse(b).map_err(corrupt)?,
        None => {
            notes.push(
                "the file has no tracing data section: tracepoint payloads cannot be decoded"
                    .into(),
            );
            tracing::TracingData::default()
        }
    };
    let hostname = perf_file
        .hostname()
        .map_err(parse_err)?
        .unwrap_or("")
        .to_string();
    let osrelease = perf_file
        .os_release()
        .map_err(parse_err)?
        .unwrap_or("")
        .to_string();
    let arch = perf_file
        .arch()
        .map_err(parse_err)?
        .unwrap_or("")
        .to_string();
    let version = perf_file
        .perf_version()
        .map_err(parse_err)?
        .unwrap_or("unknown")
        .to_string();
    let nr_cpus = perf_file.nr_cpus().map_err(parse_err)?;
    let clock_data = perf_file.clock_data().unwrap_or(None);
    let cmdline: Vec<String> = perf_file
        .cmdline()
        .ok()
        .flatten()
        .unwrap_or_default()
        .into_iter()
        .map(|s| s.to_string())
        .collect();
    let filters = filters_from_cmdline(&cmdline.iter().map(|s| s.as_str()).collect::<Vec<_>>());

    // Events.
    let mut events = Vec::new();
    let mut infos = Vec::new();
    let mut clock_id = -1;
    let n_attrs = perf_file.event_attributes().len();
    for (i, a) in perf_file.event_attributes().iter().enumerate() {
        let attr = a.attributes();
        let tracefs_id = match attr.type_ {
            PerfEventType::Tracepoint(c) => c,
            _ => 0,
        };
        let traced = tracing.formats.get(&tracefs_id).filter(|_| tracefs_id != 0);
        let name = a
            .name()
            .map(str::to_string)
            .or_else(|| traced.map(|t| t.0.clone()))
            .unwrap_or_else(|| format!("attr{i}"));
        let format = traced.map(|t| t.1.clone()).unwrap_or_default();
        if tracefs_id != 0 && format.is_empty() {
            notes.push(format!(
                "{name}: no tracefs format for id {tracefs_id} in the file: its payloads cannot be decoded"
            ));
        }
        let sf = attr.sample_format;
        let mut sample_type = sf.bits();
        let mut ids = a.ids().to_vec();
        let add_id = if sf.contains(SampleFormat::IDENTIFIER) {
            None
        } else {
            if ids.is_empty() {
                ids.push(u64::MAX - i as u64);
            }
            sample_type |= SampleFormat::IDENTIFIER.bits();
            Some(ids[0])
        };
        let mut flags = 0;
        if sf.contains(SampleFormat::CALLCHAIN) {
            flags |= EVENT_CALLCHAIN;
        }
        // The bitfield flags as the recording host wrote them (see [`RawAttr`]).
        let own = raw.get(i).filter(|_| raw.len() == n_attrs);
        let aflags = own.map_or(attr.flags, |r| AttrFlags::from_bits_truncate(r.flags));
        if aflags.intersects(AttrFlags::COMM | AttrFlags::TASK) {
            flags |= EVENT_TASK_RECORDS;
        }
        if aflags.contains(AttrFlags::USE_CLOCKID) && clock_id == -1 {
            clock_id = match own.and_then(|r| r.clockid) {
                Some(c) => c,
                None => clock_number(&attr.clock),
            };
        }
        infos.push(AttrInfo {
            add_id,
            sample_id_all: aflags.contains(AttrFlags::SAMPLE_ID_ALL),
            sample_type: sf.bits(),
        });
        events.push(EventDesc {
            filter: filters.get(&name).cloned().unwrap_or_default(),
            name,
            tracefs_id: u32::try_from(tracefs_id).unwrap_or(0),
            sample_type,
            read_format: attr.read_format.bits(),
            flags,
            max_stack: attr.sample_max_stack,
            format,
            ids,
        });
    }
    if infos.iter().any(|i| i.add_id.is_some()) {
        notes.push(
            "the file's samples lack PERF_SAMPLE_IDENTIFIER: the converter added it (the attr's id \
             prepended to samples, appended to sample_id_all trailers)"
                .into(),
        );
    }

    // Records.
    let mut builders: BTreeMap<u32, ChunkBuilder> = BTreeMap::new();
    let mut chunks: Vec<EncodedChunk> = Vec::new();
    let mut dropped: BTreeMap<String, u64> = BTreeMap::new();
    let mut max_cpu = 0u32;
    // perf's kernel map record names a reference symbol and its address at recording time.
    let mut kernel_ref: Option<(String, u64)> = None;
    let mut buf = Vec::with_capacity(256);
    // Big-endian files: the parser misreads `sample_id_all` (see [`RawAttr`]), so it sorts
    // non-sample records without their times. Their records are kept per CPU and put back
    // in time order at the end (the whole file's records in memory: such files are rare).
    let reorder = order == ByteOrder::Big;
    type Pending = Vec<(u64, Vec<u8>, Option<u64>, Option<u64>)>;
    let mut pending: BTreeMap<u32, Pending> = BTreeMap::new();
    loop {
        let rec = match record_iter.next_record(&mut perf_file) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => return Err(parse_err(e)),
        };
        let (attr_index, record) = match rec {
            PerfFileRecord::EventRecord { attr_index, record } => (attr_index, record),
            PerfFileRecord::UserRecord(u) => {
                let name = format!("{:?}", u.record_type).replace('"', "");
                *dropped.entry(name).or_default() += 1;
                continue;
            }
        };
        let t = record.record_type.0;
        if kernel_ref.is_none() && matches!(t, PERF_RECORD_MMAP | PERF_RECORD_MMAP2) {
            kernel_ref = kernel_ref_symbol(order, t, record.data.as_slice().as_ref());
        }
        if !matches!(
            t,
            PERF_RECORD_SAMPLE
                | PERF_RECORD_COMM
                | PERF_RECORD_FORK
                | PERF_RECORD_EXIT
                | PERF_RECORD_LOST
                | PERF_RECORD_LOST_SAMPLES
        ) {
            *dropped.entry(record_name(t)).or_default() += 1;
            continue;
        }
        let common = record
            .common_data()
            .map_err(|e| corrupt(format!("{} record: {e}", record_name(t))))?;
        let body = record.data.as_slice();
        let info = infos
            .get(attr_index)
            .ok_or_else(|| corrupt(format!("record of unknown attr {attr_index}")))?;
        // Time and CPU of non-sample records from their trailer as the attr's own flags
        // describe it (the parser may have misread them, see [`RawAttr`]).
        let (mut time, mut cpu) = (common.timestamp, common.cpu);
        if t != PERF_RECORD_SAMPLE && info.sample_id_all {
            let (tt, cc) = sample_id_trailer(order, info.sample_type, &body);
            time = tt.or(time);
            cpu = cc.or(cpu);
        }
        let cpu = cpu.unwrap_or(0);
        let (pre, post) = match info.add_id {
            Some(id) if t == PERF_RECORD_SAMPLE => (Some(id), None),
            Some(id) if info.sample_id_all => (None, Some(id)),
            _ => (None, None),
        };
        let size = 8 + body.len() + 8 * usize::from(pre.is_some() || post.is_some());
        let size = u16::try_from(size)
            .map_err(|_| corrupt(format!("a record of {size} bytes exceeds 65535")))?;
        buf.clear();
        buf.extend_from_slice(&put32(order, t));
        buf.extend_from_slice(&put16(order, record.misc));
        buf.extend_from_slice(&put16(order, size));
        if let Some(id) = pre {
            buf.extend_from_slice(&put64(order, id));
        }
        buf.extend_from_slice(&body);
        if let Some(id) = post {
            buf.extend_from_slice(&put64(order, id));
        }
        let lost = match t {
            // LOST: { u64 id; u64 lost; }, LOST_SAMPLES: { u64 lost; }.
            PERF_RECORD_LOST => body.get(8..16),
            PERF_RECORD_LOST_SAMPLES => body.get(..8),
            _ => None,
        }
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(|b| order.u64(b));
        max_cpu = max_cpu.max(cpu);
        if reorder {
            let q = pending.entry(cpu).or_default();
            let key = time.or_else(|| q.last().map(|r| r.0)).unwrap_or(0);
            q.push((key, buf.clone(), time, lost));
        } else {
            push_record(&mut builders, &mut chunks, cpu, &buf, time, lost);
        }
    }
    // Per CPU, the ring buffer's order is time order: restore it where the parser sorted
    // records by times it could not read.
    for (cpu, mut q) in pending {
        q.sort_by_key(|r| r.0);
        for (_, rec, time, lost) in q {
            push_record(&mut builders, &mut chunks, cpu, &rec, time, lost);
        }
    }
    for b in builders.values_mut() {
        chunks.extend(b.finish(ZSTD_LEVEL));
    }
    if !dropped.is_empty() {
        let list: Vec<String> = dropped.iter().map(|(k, n)| format!("{n} {k}")).collect();
        notes.push(format!(
            "records ioblame does not use were dropped: {}",
            list.join(", ")
        ));
    }

    // Missing events and callchains, per event.
    let recorded: Vec<(&str, bool)> = events
        .iter()
        .filter(|e| e.tracefs_id != 0)
        .map(|e| (e.name.as_str(), e.callchain()))
        .collect();
    notes.extend(event_notes(&recorded));

    // Kernel symbols.
    let this_host = read_trim("/proc/sys/kernel/hostname");
    let this_release = read_trim("/proc/sys/kernel/osrelease");
    let kallsyms = if let Some(p) = &opts.kallsyms {
        let text = std::fs::read_to_string(p).map_err(|source| PerfDataError::Kallsyms {
            path: p.clone(),
            source,
        })?;
        notes.push(format!("kernel symbols from {}", p.display()));
        Some(text)
    } else if this_host.as_deref() == Some(hostname.as_str())
        && this_release.as_deref() == Some(osrelease.as_str())
        && !hostname.is_empty()
    {
        match std::fs::read_to_string("/proc/kallsyms") {
            Ok(t) => {
                notes.push("using this host's /proc/kallsyms (the recording host)".into());
                Some(t)
            }
            Err(_) => None,
        }
    } else if !tracing.kallsyms.is_empty() {
        notes.push("kernel symbols from the kallsyms copy in the file's tracing data".into());
        Some(tracing.kallsyms.clone())
    } else {
        None
    };
    // Check the symbols against the recording's own kernel map: a copy from another boot
    // (KASLR) or another kernel build would name the wrong functions.
    let kallsyms = match (kallsyms, &kernel_ref) {
        (Some(text), Some((sym, addr))) => match kallsyms_address(&text, sym) {
            Some(a) if a == *addr || a == 0 => Some(text),
            Some(a) => {
                let delta = addr.wrapping_sub(a);
                notes.push(format!(
                    "the kernel symbols are from another boot: {sym} is at {a:#x} there and at \
                     {addr:#x} in the recording; core kernel symbols were shifted by {:#x}, \
                     module symbols are left as they are and may be wrong",
                    delta as i64
                ));
                Some(relocate_kallsyms(&text, delta))
            }
            None => {
                notes.push(format!(
                    "the kernel symbols lack {sym}, the recording's reference symbol: they may \
                     be from another kernel"
                ));
                Some(text)
            }
        },
        (k, _) => k,
    };
    let kallsyms = kallsyms.map(|text| {
        let restricted = text
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .all(|a| a.bytes().all(|c| c == b'0'));
        Kallsyms { text, restricted }
    });
    if kallsyms.as_ref().is_none_or(|k| k.restricted) {
        notes.push(
            "no kernel symbols: pass --kallsyms FILE (a copy of /proc/kallsyms from the recording \
             host); stacks are printed as addresses"
                .into(),
        );
    }

    let cpu_count = nr_cpus
        .map_or(0, |n| n.nr_cpus_available.max(n.nr_cpus_online))
        .max(max_cpu + 1);
    let (start_time_ns, start_clock_ns) = clock_data
        .as_ref()
        .map_or((0, 0), |c| (c.wall_clock_ns, c.clockid_time_ns));
    let trace_id = {
        let mut h = fnv1a(path.to_string_lossy().as_bytes());
        h ^= start_clock_ns.rotate_left(17) ^ chunks.len() as u64;
        h
    };
    let header = Header {
        byte_order: order,
        word_size: if tracing.long_size == 4 { 4 } else { 8 },
        page_size: if tracing.page_size.is_power_of_two() && tracing.page_size >= 1024 {
            tracing.page_size
        } else {
            4096
        },
        cpu_count,
        clock_id,
        recorder_pid: 0,
        file_index: 0,
        start_time_ns,
        start_clock_ns,
        trace_id,
        hostname,
        kernel_release: osrelease,
        machine: arch,
        recorder_version: format!("perf {version}"),
    };
    let mut capture_info = vec![("source".to_string(), "perf.data".to_string())];
    if !cmdline.is_empty() {
        capture_info.push(("command".into(), cmdline.join(" ")));
    }
    let meta = Metadata {
        events,
        kallsyms,
        capture_info,
        ..Default::default()
    };

    // The format crate writes traces to files only: write a temporary file and read it back.
    let trace_err = |source| PerfDataError::Trace {
        path: path.to_path_buf(),
        source,
    };
    let dir = tempfile::tempdir().map_err(|source| PerfDataError::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    let tmp = dir.path().join("converted.iob");
    let mut w = FileWriter::create(&tmp, &header, &meta).map_err(trace_err)?;
    for c in &chunks {
        w.write_chunk(c).map_err(trace_err)?;
    }
    w.finish().map_err(trace_err)?;
    drop(chunks);
    let bytes = std::fs::read(&tmp).map_err(|source| PerfDataError::Io {
        path: tmp.clone(),
        source,
    })?;
    let tf = TraceFile::from_bytes(path, bytes).map_err(trace_err)?;
    let trace = Trace::from_files(vec![tf], Vec::new());
    Ok(Converted { trace, notes })
}

/// Appends one record to its CPU's chunk, finishing the chunk when it is full.
fn push_record(
    builders: &mut BTreeMap<u32, ChunkBuilder>,
    chunks: &mut Vec<EncodedChunk>,
    cpu: u32,
    rec: &[u8],
    time: Option<u64>,
    lost: Option<u64>,
) {
    let b = builders
        .entry(cpu)
        .or_insert_with(|| ChunkBuilder::new(cpu));
    // perf's synthesized records (tasks alive at start) carry a zero time: not a time.
    b.push(rec, time.filter(|&t| t != 0));
    if let Some(n) = lost {
        b.add_lost(n);
    }
    if b.len() >= CHUNK_TARGET {
        chunks.extend(b.finish(ZSTD_LEVEL));
    }
}

/// The kernel reference symbol of a `PERF_RECORD_MMAP`/`MMAP2` body, if it is perf's kernel
/// map (`[kernel.kallsyms]_text`, pid -1): perf stores the symbol's address in `pgoff`.
fn kernel_ref_symbol(order: ByteOrder, t: u32, body: &[u8]) -> Option<(String, u64)> {
    let u32_at = |o: usize| Some(order.u32(body.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(order.u64(body.get(o..o + 8)?.try_into().ok()?));
    if u32_at(0)? != u32::MAX {
        return None;
    }
    let pgoff = u64_at(24)?;
    // MMAP: pid, tid, addr, len, pgoff, filename. MMAP2 adds 24 bytes of device/inode or
    // build id and 8 of prot/flags before the filename.
    let name_at = if t == PERF_RECORD_MMAP { 32 } else { 64 };
    let name = body.get(name_at..)?;
    let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
    let sym = std::str::from_utf8(name)
        .ok()?
        .strip_prefix("[kernel.kallsyms]")?;
    (!sym.is_empty() && pgoff != 0).then(|| (sym.to_string(), pgoff))
}

/// The address of `sym` among the core kernel symbols of a kallsyms text.
fn kallsyms_address(text: &str, sym: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (addr, _kind, name) = (f.next()?, f.next()?, f.next()?);
        (name == sym && f.next().is_none())
            .then(|| u64::from_str_radix(addr, 16).ok())
            .flatten()
    })
}

/// Shifts the core kernel symbols of a kallsyms text by `delta` (a KASLR offset); module
/// symbols (`[module]` suffix) load elsewhere on every boot and are kept.
fn relocate_kallsyms(text: &str, delta: u64) -> String {
    let mut out = String::with_capacity(text.len());
    for l in text.lines() {
        let shifted = (!l.trim_end().ends_with(']'))
            .then(|| l.split_once(' '))
            .flatten()
            .and_then(|(a, rest)| {
                let a = u64::from_str_radix(a, 16).ok()?;
                Some(format!("{:016x} {rest}", a.wrapping_add(delta)))
            });
        out.push_str(shifted.as_deref().unwrap_or(l));
        out.push('\n');
    }
    out
}

fn put16(o: ByteOrder, v: u16) -> [u8; 2] {
    match o {
        ByteOrder::Little => v.to_le_bytes(),
        ByteOrder::Big => v.to_be_bytes(),
    }
}

fn put32(o: ByteOrder, v: u32) -> [u8; 4] {
    match o {
        ByteOrder::Little => v.to_le_bytes(),
        ByteOrder::Big => v.to_be_bytes(),
    }
}

fn put64(o: ByteOrder, v: u64) -> [u8; 8] {
    match o {
        ByteOrder::Little => v.to_le_bytes(),
        ByteOrder::Big => v.to_be_bytes(),
    }
}

/// FNV-1a, to derive a stable trace id from the file name.
fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, &c| {
        (h ^ u64::from(c)).wrapping_mul(0x100000001b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdline_filters() {
        let args = [
            "perf",
            "record",
            "-e",
            "block:block_dirty_buffer",
            "--filter",
            "sector < 4",
            "-e",
            "block:a,block:b",
            "--filter=dev == 1",
            "-e",
            "x:y",
            "--",
            "--filter",
            "z",
        ];
        let f = filters_from_cmdline(&args);
        assert_eq!(f["block:block_dirty_buffer"], "sector < 4");
        assert_eq!(f["block:a"], "dev == 1");
        assert_eq!(f["block:b"], "dev == 1");
        assert!(!f.contains_key("x:y"));
        // Per-event callchains, as perf-command prints them: the terms are not the name.
        let args = [
            "perf",
            "record",
            "-e",
            "block:block_dirty_buffer/call-graph=fp/",
            "--filter",
            "sector < 4",
            "-e",
            "block:a/call-graph=fp,max-stack=32/,block:b",
            "--filter",
            "dev == 1",
        ];
        let f = filters_from_cmdline(&args);
        assert_eq!(f.len(), 3, "{f:?}");
        assert_eq!(f["block:block_dirty_buffer"], "sector < 4");
        assert_eq!(f["block:a"], "dev == 1");
        assert_eq!(f["block:b"], "dev == 1");
    }

    #[test]
    fn renamed_events_count_as_recorded() {
        let all: Vec<(&str, bool)> = NEEDED
            .iter()
            .map(|(e, _)| (*e, ioblame_tracepoints::CALLCHAIN_EVENTS.contains(e)))
            .collect();
        assert!(event_notes(&all).is_empty(), "{:?}", event_notes(&all));
        // A kernel with writeback_dirty_page: perf-command records the old name, and nothing
        // is missing.
        let old: Vec<(&str, bool)> = all
            .iter()
            .map(|&(e, c)| {
                if e == "writeback:writeback_dirty_folio" {
                    ("writeback:writeback_dirty_page", c)
                } else {
                    (e, c)
                }
            })
            .collect();
        assert!(event_notes(&old).is_empty(), "{:?}", event_notes(&old));
        // Its callchain is checked under the old name too.
        let bare: Vec<(&str, bool)> = old
            .iter()
            .map(|&(e, c)| (e, c && e != "writeback:writeback_dirty_page"))
            .collect();
        assert_eq!(
            event_notes(&bare),
            [
                "recorded without callchains on writeback:writeback_dirty_page: the intents of \
              their IO have no stacks; record them with kernel callchains (-e \
              EVENT/call-graph=fp/ and --kernel-callchains, as `ioblame perf-command` prints, \
              or -g)"
            ]
        );
        // Neither name: the advice names both.
        let none: Vec<(&str, bool)> = all
            .iter()
            .copied()
            .filter(|(e, _)| *e != "writeback:writeback_dirty_folio")
            .collect();
        let n = event_notes(&none);
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].starts_with(
                "no writeback:writeback_dirty_folio: buffered writes cannot be charged"
            ),
            "{n:?}"
        );
        assert!(
            n[0].contains("add -e writeback:writeback_dirty_folio (or writeback:writeback_dirty_page, its name on older kernels"),
            "{n:?}"
        );
        // Without any callchain: the plain note.
        let flat: Vec<(&str, bool)> = all.iter().map(|&(e, _)| (e, false)).collect();
        let n = event_notes(&flat);
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(n[0].contains(": intents have no stacks;"), "{n:?}");
    }

    #[test]
    fn kernel_reference_symbol_and_relocation() {
        let mut mmap = Vec::new();
        mmap.extend_from_slice(&u32::MAX.to_le_bytes());
        mmap.extend_from_slice(&u32::MAX.to_le_bytes());
        for v in [0xffffffff81000000u64, 0x1000000, 0xffffffff81000000] {
            mmap.extend_from_slice(&v.to_le_bytes());
        }
        mmap.extend_from_slice(b"[kernel.kallsyms]_text\0\0");
        assert_eq!(
            kernel_ref_symbol(ByteOrder::Little, PERF_RECORD_MMAP, &mmap),
            Some(("_text".to_string(), 0xffffffff81000000))
        );
        // A user mapping, or a body cut short, is not the kernel map.
        assert_eq!(
            kernel_ref_symbol(ByteOrder::Little, PERF_RECORD_MMAP, &mmap[..30]),
            None
        );
        let mut user = mmap.clone();
        user[..4].copy_from_slice(&7u32.to_le_bytes());
        assert_eq!(
            kernel_ref_symbol(ByteOrder::Little, PERF_RECORD_MMAP, &user),
            None
        );

        let text =
            "ffffffff8a000000 T _text\nffffffff8a001000 T foo\nffffffffc0001000 t m [ext4]\n";
        assert_eq!(kallsyms_address(text, "_text"), Some(0xffffffff8a000000));
        assert_eq!(kallsyms_address(text, "m"), None);
        let moved = relocate_kallsyms(text, 0xffffffff81000000u64.wrapping_sub(0xffffffff8a000000));
        assert_eq!(
            moved,
            "ffffffff81000000 T _text\nffffffff81001000 T foo\nffffffffc0001000 t m [ext4]\n"
        );
    }

    #[test]
    fn not_perf_data() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x");
        std::fs::write(&p, b"hello world, this is not perf data").unwrap();
        assert!(!is_perf_data(&p));
        assert!(matches!(
            open_perf_data(&p, &PerfDataOptions::default()),
            Err(PerfDataError::NotPerfData { .. })
        ));
        std::fs::write(&p, b"PERFILE2").unwrap();
        assert!(is_perf_data(&p));
        assert!(matches!(
            open_perf_data(&p, &PerfDataOptions::default()),
            Err(PerfDataError::Corrupt { .. })
        ));
    }
}
