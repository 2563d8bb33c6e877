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
//! * **Events**: one [`ioblame_format::EventDesc`] per perf attr, in attr order, named from `EVENT_DESC`, with
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
//!   records are read from their trailer as the attr's own flags describe it. When a
//!   tracepoint's callchains go into user space (no `exclude_callchain_user`:
//!   `perf-command --user-stacks`), the executable user mappings (MMAP, MMAP2 of a
//!   process) are kept too, MMAP2 records without a build id given the one perf's
//!   `HEADER_BUILD_ID` table lists for their path. Other record types are dropped and
//!   counted in the notes.
//! * **Callchains**: per event, from the attr's sample type (`perf-command` gives only the
//!   stack events a callchain); the notes name the stack events recorded without one.
//! * **IDENTIFIER**: ioblame identifies samples by `PERF_SAMPLE_IDENTIFIER`. For an attr whose
//!   sample type lacks it (perf leaves it out when there is a single event), the converter
//!   sets the bit in the event's sample type, prepends the attr's first id to each SAMPLE body,
//!   and, when the attr has `sample_id_all`, appends the same id to the trailer of its
//!   non-sample records (the kernel ABI puts IDENTIFIER last in that trailer). An attr without
//!   ids gets a synthetic one (`u64::MAX - attr index`).
#![deny(missing_docs)]
//!
//! The modules follow the file: `layout` checks the file header and its sections before the
//! parser sees them; `parser` alone calls the `linux-perf-data` parser (a panic in it becomes
//! [`PerfDataError::ParserPanicked`], a panic in ioblame's own code stays a panic); `attrs`
//! turns the attrs and the tracing data into the trace's events; `records` re-emits the
//! records into chunks; `buildids` reads perf's build-id table and writes build ids into
//! MMAP2 records; `symbols` finds and checks the kernel symbols; `errors` holds the error
//! types.

mod attrs;
mod btrfs_map;
mod buildids;
mod command;
mod errors;
mod inflate;
mod layout;
mod parser;
mod pipe;
mod records;
mod symbols;
mod tracing;

use std::collections::BTreeMap;
use std::io::{BufWriter, Cursor, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use ioblame_format::{
    ByteOrder, Cgroup, EventDesc, FileWriter, Header, Metadata, Trace, TraceFile,
};
use ioblame_perfrec::SAMPLE_CGROUP;

pub use command::{perf_command, perf_command_for, perf_command_with_notes, CommandOptions};
pub use errors::{Corruption, EventDescError, PerfDataError, TracingDataError};
/// Which stack events get a callchain ([`perf_command`]'s choice, as the recorder's).
pub use ioblame_tracepoints::{Stacks, UserStacks};
pub use layout::is_perf_data;

use parser::{Host, Parser};
use tracing::TracingData;

/// Options of the conversion.
#[derive(Debug, Clone, Default)]
pub struct PerfDataOptions {
    /// A copy of `/proc/kallsyms` of the recording host. When given it is always used;
    /// otherwise this host's `/proc/kallsyms` is used if the file's host name and kernel
    /// release match this host, else the kallsyms copy in the tracing data if perf stored one
    /// (modern perf stores none), else the trace has no symbols (and a note says so).
    pub kallsyms: Option<PathBuf>,
    /// The btrfs chunk maps of the recording host (`ioblame-capture btrfs-map`'s file, or any
    /// ioblame trace of that host): perf.data has none, and without them btrfs's writes
    /// cannot be placed on the disk.
    pub btrfs_map: Option<PathBuf>,
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

/// Converts the perf.data file at `path` into an in-memory ioblame trace. The file may also
/// hold perf's pipe-mode output (`perf record -o - > FILE`), possibly cut short.
pub fn open_perf_data(path: &Path, opts: &PerfDataOptions) -> Result<Converted, PerfDataError> {
    let io = |source| PerfDataError::io(path, source);
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut head = [0u8; pipe::PIPE_HEADER_LEN];
    let n = read_up_to(&mut file, &mut head).map_err(io)?;
    if pipe::pipe_order(&head[..n]).is_some() {
        return convert_pipe(path, (&head[..n]).chain(file), opts);
    }
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    convert(path, Box::new(file), len, opts, Vec::new())
}

/// Converts a perf.data recording read from `input`, a stream that cannot seek (standard
/// input: `perf record -o - ... | ioblame acts -`), named `name` in errors: perf's pipe-mode
/// output, read up to where it ends (a recording cut short is read up to the cut, with a
/// note), or the bytes of a perf.data file. The stream is copied into a temporary file
/// as it is read, not held in memory.
pub fn read_perf_data(
    name: &Path,
    mut input: impl Read,
    opts: &PerfDataOptions,
) -> Result<Converted, PerfDataError> {
    let io = |source| PerfDataError::io(name, source);
    let mut head = [0u8; pipe::PIPE_HEADER_LEN];
    let n = read_up_to(&mut input, &mut head).map_err(io)?;
    let input = (&head[..n]).chain(input);
    if pipe::pipe_order(&head[..n]).is_some() {
        return convert_pipe(name, input, opts);
    }
    let mut tmp = tempfile::tempfile().map_err(|e| PerfDataError::io(&std::env::temp_dir(), e))?;
    let len = std::io::copy(&mut { input }, &mut tmp).map_err(io)?;
    tmp.seek(SeekFrom::Start(0)).map_err(io)?;
    convert(name, Box::new(tmp), len, opts, Vec::new())
}

/// Converts a perf.data recording held in memory (a file's bytes or pipe-mode output), named
/// `name` in errors. Nothing is read from disk but the symbols `opts` names or finds.
pub fn perf_data_from_bytes(
    name: &Path,
    bytes: Vec<u8>,
    opts: &PerfDataOptions,
) -> Result<Converted, PerfDataError> {
    if pipe::pipe_order(&bytes).is_some() {
        let mut out = Cursor::new(Vec::new());
        let u = pipe::unpipe(name, &bytes[..], &mut out)?;
        drop(bytes);
        out.set_position(0);
        return convert(name, Box::new(out), u.len, opts, u.notes);
    }
    let len = bytes.len() as u64;
    convert(name, Box::new(Cursor::new(bytes)), len, opts, Vec::new())
}

/// Reads into `buf` until it is full or `r` ends; the bytes read.
fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Converts the pipe-mode stream `input` (named `name`), rewritten as a perf.data file in a
/// temporary file.
fn convert_pipe(
    name: &Path,
    input: impl Read,
    opts: &PerfDataOptions,
) -> Result<Converted, PerfDataError> {
    let tmp = tempfile::tempfile().map_err(|e| PerfDataError::io(&std::env::temp_dir(), e))?;
    let mut out = BufWriter::new(tmp);
    let u = pipe::unpipe(name, input, &mut out)?;
    let mut tmp = out
        .into_inner()
        .map_err(|e| PerfDataError::io(name, e.into_error()))?;
    tmp.seek(SeekFrom::Start(0))
        .map_err(|e| PerfDataError::io(name, e))?;
    convert(name, Box::new(tmp), u.len, opts, u.notes)
}

/// Converts the perf.data file `file` (`len` bytes, named `path` in errors), with `notes`
/// already gathered.
fn convert(
    path: &Path,
    mut file: Box<dyn parser::Input>,
    len: u64,
    opts: &PerfDataOptions,
    mut notes: Vec<String>,
) -> Result<Converted, PerfDataError> {
    let corrupt = |what| PerfDataError::corrupt(path, what);
    let layout = layout::check(path, &mut file, len)?;
    let mut parser = Parser::open(path, file)?;
    let tracing = attrs::tracing_data(parser.tracing_data()?, &mut notes).map_err(corrupt)?;
    let host = parser.host(layout.cmdline_ok)?;
    let events = attrs::events(
        &parser.attrs()?,
        &layout.attrs,
        &tracing,
        &host.cmdline,
        &mut notes,
    );
    let user = records::UserMaps {
        keep: events.user_stacks,
        build_ids: match parser.build_id_table()? {
            Some(s) if events.user_stacks => buildids::user_build_ids(layout.order, s),
            _ => Default::default(),
        },
    };
    let records = records::convert(&mut parser, layout.order, &events.infos, &user)?;
    notes.extend(records.dropped_note());
    notes.extend(user_maps_note(&events, &records.maps, user.build_ids.len()));
    notes.extend(attrs::event_notes(&events.recorded()));
    notes.extend(cgroups_note(&events.events, &records.cgroups));
    let kallsyms = symbols::kernel_symbols(
        opts.kallsyms.as_deref(),
        &host,
        &tracing.kallsyms,
        records.kernel_ref.as_ref(),
        &mut notes,
    )?;
    let header = trace_header(
        path,
        layout.order,
        &tracing,
        &host,
        events.clock_id,
        records.max_cpu,
        records.chunks.len(),
    );
    let mut capture_info = vec![("source".to_string(), "perf.data".to_string())];
    if !host.cmdline.is_empty() {
        capture_info.push(("command".into(), host.cmdline.join(" ")));
    }
    if events.user_stacks {
        // As `ioblame-capture record --user-stacks` says it.
        let mode = match events.stack_copy {
            0 => "fp".to_string(),
            n => format!("dwarf:{n}"),
        };
        capture_info.push(("user_stacks".into(), mode));
        let yes = if events.mmap_build_id { "yes" } else { "no" };
        capture_info.push(("mmap_build_id".into(), yes.into()));
    }
    let mut meta = Metadata {
        events: events.events,
        kallsyms,
        capture_info,
        cgroups: records
            .cgroups
            .into_iter()
            .map(|(id, path)| Cgroup { id, path })
            .collect(),
        ..Default::default()
    };
    if let Some(map) = &opts.btrfs_map {
        btrfs_map::add_btrfs_map(map, path, &host, &mut meta, &mut notes)?;
    }
    let trace = write_trace(path, &header, &meta, records.chunks)?;
    Ok(Converted { trace, notes })
}

/// The note on the user mappings of a recording with user stacks: none recorded (user frames
/// cannot be placed), or recorded without `--buildid-mmap` and some of files the build-id
/// table (`table` files) does not list (their frames cannot be named). With
/// `--buildid-mmap`, the few files the kernel could not read a build id of are named by
/// the analysis only if frames hit them.
fn user_maps_note(
    events: &attrs::Events,
    maps: &records::MapCounts,
    table: usize,
) -> Option<String> {
    if !events.user_stacks {
        return None;
    }
    if maps.kept == 0 {
        return Some(
            "user stacks were recorded without mappings (no MMAP2 records): user frames \
             cannot be placed in their files"
                .into(),
        );
    }
    (!events.mmap_build_id && maps.without > 0).then(|| {
        format!(
            "user stacks recorded without `--buildid-mmap`: {} mappings have no build id \
             ({} took theirs from the file's build-id table of {table} files, which perf writes \
             for the files samples hit, for all with `--buildid-all`), and user frames in them \
             cannot be named; `perf record --buildid-mmap` (Linux and perf 5.12 or later) \
             records them, as `ioblame perf-command --user-stacks` prints it",
            maps.without, maps.from_table
        )
    })
}

/// The one note on cgroups, when the recording cannot name the cgroup of the acts: no
/// tracepoint recorded `PERF_SAMPLE_CGROUP` (perf without `--all-cgroups`, or a kernel or
/// perf before 5.7), or the samples carry ids but no CGROUP record names them.
fn cgroups_note(events: &[EventDesc], cgroups: &BTreeMap<u64, String>) -> Option<String> {
    let tracepoints = || events.iter().filter(|e| e.tracefs_id != 0);
    // No tracepoint at all (a cpu-clock profile): nothing to say about cgroups.
    tracepoints().next()?;
    if !tracepoints().any(|e| e.sample_type & SAMPLE_CGROUP != 0) {
        return Some(
            "recorded without cgroups: acts have no cgroup (`acts --by cgroup`, \
             `--scope cgroup:PATH`, the reports' cgroup columns); record with \
             `perf record --all-cgroups` (Linux and perf 5.7 or later), as \
             `ioblame perf-command` prints it"
                .to_string(),
        );
    }
    cgroups.is_empty().then(|| {
        "the samples carry cgroup ids but no CGROUP record names them: cgroups are unknown \
         in the outputs"
            .to_string()
    })
}

/// The trace's header: the file's byte order, word size 8 (4 when the tracing data says
/// `long` is 4 bytes), page size from the tracing data (else 4096), the host's names and CPU
/// count, the attrs' clock and the start times from the clock data; `chunks` and the file
/// name make the trace id.
fn trace_header(
    path: &Path,
    order: ByteOrder,
    tracing: &TracingData,
    host: &Host,
    clock_id: i32,
    max_cpu: u32,
    chunks: usize,
) -> Header {
    let cpu_count = host.cpus.unwrap_or(0).max(max_cpu.saturating_add(1));
    let (start_time_ns, start_clock_ns) = host.clock.unwrap_or((0, 0));
    let trace_id = {
        let mut h = fnv1a(path.to_string_lossy().as_bytes());
        h ^= start_clock_ns.rotate_left(17) ^ chunks as u64;
        h
    };
    Header {
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
        hostname: host.hostname.clone(),
        kernel_release: host.os_release.clone(),
        machine: host.arch.clone(),
        recorder_version: format!("perf {}", host.perf_version),
    }
}

/// The trace of `header`, `meta` and `chunks`, converted from the perf.data file `path`.
fn write_trace(
    path: &Path,
    header: &Header,
    meta: &Metadata,
    chunks: Vec<ioblame_format::EncodedChunk>,
) -> Result<Trace, PerfDataError> {
    // The format crate writes traces to files only: write a temporary file and read it back.
    let trace_err = |source| PerfDataError::Trace {
        path: path.to_path_buf(),
        source,
    };
    let dir = tempfile::tempdir().map_err(|e| PerfDataError::io(&std::env::temp_dir(), e))?;
    let tmp = dir.path().join("converted.iob");
    let mut w = FileWriter::create(&tmp, header, meta).map_err(trace_err)?;
    for c in &chunks {
        w.write_chunk(c).map_err(trace_err)?;
    }
    w.finish().map_err(trace_err)?;
    drop(chunks);
    let bytes = std::fs::read(&tmp).map_err(|e| PerfDataError::io(&tmp, e))?;
    let tf = TraceFile::from_bytes(path, bytes).map_err(trace_err)?;
    Ok(Trace::from_files(vec![tf], Vec::new()))
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

    #[test]
    fn header_from_the_recording() {
        let host = Host {
            hostname: "h".into(),
            os_release: "6.1".into(),
            arch: "x86_64".into(),
            perf_version: "6.1.2".into(),
            cpus: Some(4),
            clock: Some((1_700_000_000_000_000_000, 5_000)),
            cmdline: Vec::new(),
        };
        let tracing = TracingData {
            page_size: 16384,
            long_size: 8,
            ..Default::default()
        };
        let h = trace_header(Path::new("p"), ByteOrder::Big, &tracing, &host, 1, 7, 3);
        assert_eq!(h.byte_order, ByteOrder::Big);
        assert_eq!((h.word_size, h.page_size, h.cpu_count), (8, 16384, 8));
        assert_eq!(
            (h.clock_id, h.start_time_ns, h.start_clock_ns),
            (1, 1_700_000_000_000_000_000, 5_000)
        );
        assert_eq!(h.recorder_version, "perf 6.1.2");
        assert_eq!(h.trace_id, fnv1a(b"p") ^ 5_000u64.rotate_left(17) ^ 3);
        // Without tracing data or feature sections: the defaults.
        let h = trace_header(
            Path::new("p"),
            ByteOrder::Little,
            &TracingData::default(),
            &Host::default(),
            -1,
            0,
            0,
        );
        assert_eq!((h.word_size, h.page_size, h.cpu_count), (8, 4096, 1));
        assert_eq!((h.start_time_ns, h.start_clock_ns), (0, 0));
    }

    #[test]
    fn one_note_when_cgroups_cannot_be_named() {
        let ev = |tracefs_id, sample_type| EventDesc {
            name: "e".into(),
            tracefs_id,
            sample_type,
            ..EventDesc::default()
        };
        let named: BTreeMap<u64, String> = [(1, "/".to_string())].into();
        let none = BTreeMap::new();
        // perf's tracking event alone says nothing; the tracepoints decide.
        assert_eq!(cgroups_note(&[ev(0, SAMPLE_CGROUP)], &none), None);
        let without = cgroups_note(&[ev(0, SAMPLE_CGROUP), ev(5, 0)], &none).unwrap();
        assert!(without.contains("--all-cgroups"), "{without}");
        assert_eq!(cgroups_note(&[ev(5, SAMPLE_CGROUP)], &named), None);
        let unnamed = cgroups_note(&[ev(5, SAMPLE_CGROUP)], &none).unwrap();
        assert!(unnamed.contains("no CGROUP record"), "{unnamed}");
    }
}
