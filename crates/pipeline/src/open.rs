//! Opening what the user named: an ioblame trace directory, ring files of one capture, or a
//! `perf.data` recording; and the kernel symbols of the trace.

use std::path::{Path, PathBuf};

use ioblame_counters::DevSelection;
use ioblame_decode::Symbolizer;
use ioblame_format::{Trace, TraceFile};
use ioblame_perfdata::{PerfDataError, PerfDataOptions};

use crate::diag::Diagnostic;

/// What the user named, opened: an ioblame trace (a capture, or a `perf.data` recording
/// converted in memory), or a blktrace recording, whose records the analysis reads from
/// its files and whose devices, tasks and clock are described by a trace without chunks.
/// It dereferences to that trace.
pub struct Input {
    trace: Trace,
    blktrace: Option<ioblame_blktrace::Recording>,
    drop_buffer_stacks: bool,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input")
            .field("chunks", &self.trace.chunks().len())
            .field("blktrace", &self.blktrace)
            .finish()
    }
}

impl std::ops::Deref for Input {
    type Target = Trace;
    fn deref(&self) -> &Trace {
        &self.trace
    }
}

impl From<Trace> for Input {
    fn from(trace: Trace) -> Input {
        Input {
            trace,
            blktrace: None,
            drop_buffer_stacks: false,
        }
    }
}

impl Input {
    /// The trace (for a blktrace recording: its description, without records).
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Analyses the dirty buffers as if they had been recorded without their callchains
    /// (`--stacks exact`), although the trace has them: the check of the rule that gives
    /// them their stacks ([`ioblame_decode::Decoder::drop_buffer_stacks`]).
    pub fn drop_buffer_stacks(&mut self) {
        self.drop_buffer_stacks = true;
    }

    /// Whether [`Input::drop_buffer_stacks`] was asked for.
    pub fn drops_buffer_stacks(&self) -> bool {
        self.drop_buffer_stacks
    }

    /// The blktrace recording, if that is what was opened.
    pub fn blktrace(&self) -> Option<&ioblame_blktrace::Recording> {
        self.blktrace.as_ref()
    }

    /// The devices shown when the user selects none: all of them; for a blktrace
    /// recording, the lowest level of stacked devices (an IO queued on `dm-0` and remapped
    /// to a disk shows once, on the disk), so no IO is counted twice.
    pub fn default_devs(&self) -> DevSelection {
        let Some(rec) = &self.blktrace else {
            return DevSelection::all();
        };
        let upper: Vec<String> = rec
            .scan()
            .devices
            .iter()
            .filter(|d| d.upper)
            .map(|d| format!("!{}:{}", d.dev >> 20, d.dev & 0xfffff))
            .collect();
        DevSelection::parse(&upper.join(" "), &self.trace.metadata().block_devices)
            .unwrap_or_else(|_| DevSelection::all())
    }
}

/// Why a trace could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// No path was given.
    #[error("no trace given")]
    NoTrace,
    /// A `perf.data` recording could not be read or converted.
    #[error("cannot read perf.data {}", path.display())]
    PerfData {
        /// The recording.
        path: PathBuf,
        /// Why.
        #[source]
        source: PerfDataError,
    },
    /// An ioblame trace (directory or ring file) could not be read.
    #[error("cannot read trace {}", path.display())]
    Trace {
        /// The trace.
        path: PathBuf,
        /// Why.
        #[source]
        source: ioblame_format::Error,
    },
    /// One of several ring files could not be read.
    #[error("cannot read trace file {}", path.display())]
    TraceFile {
        /// The ring file.
        path: PathBuf,
        /// Why.
        #[source]
        source: ioblame_format::Error,
    },
    /// Of several inputs, one is a directory or a `perf.data` recording.
    #[error("{}: several inputs must all be ring files (.iob) of one capture; give a directory or a perf.data file alone", path.display())]
    NotRingFile {
        /// The input.
        path: PathBuf,
    },
    /// A blktrace recording could not be read.
    #[error("cannot read blktrace recording {}", path.display())]
    Blktrace {
        /// The first input named.
        path: PathBuf,
        /// Why.
        #[source]
        source: ioblame_blktrace::Error,
    },
    /// The same ring file was given twice.
    #[error("{} and {} are the same ring file (index {index}) of one capture; give each once", first.display(), second.display())]
    SameRingFile {
        /// One path of it.
        first: PathBuf,
        /// The other.
        second: PathBuf,
        /// Its index in the capture.
        index: u32,
    },
    /// Ring files of different captures were given together.
    #[error("{} belongs to another capture than {} (trace ids differ)", path.display(), first.display())]
    OtherCapture {
        /// The ring file of another capture.
        path: PathBuf,
        /// The first ring file given.
        first: PathBuf,
    },
}

/// Opens what the user named: an ioblame trace directory, one or more ring files of one
/// capture, a `perf.data` recording (converted in memory, with `kallsyms` as the
/// recording host's symbols if given; `-` reads one from standard input), or blktrace data
/// (per-CPU files, `blkparse -d` dumps or blkparse text, and directories of them; told by
/// their content). Reading goes on up to any damage the reader found.
///
/// What opening has to say (the conversion's notes, the damage found) is pushed onto
/// `diagnostics` as it is found, also when opening then fails.
pub fn open_trace(
    paths: &[PathBuf],
    kallsyms: Option<&Path>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Input, OpenError> {
    let side = SideFiles {
        kallsyms,
        btrfs_map: None,
    };
    open_trace_with(paths, &side, diagnostics)
}

/// What a recording made without ioblame-capture lacks, given beside it: the recording
/// host's kernel symbols and btrfs chunk maps. Each is used for a perf.data recording only
/// (an ioblame trace carries its own; a note says one given is ignored).
#[derive(Debug, Clone, Copy, Default)]
pub struct SideFiles<'a> {
    /// A copy of the recording host's `/proc/kallsyms` (`--kallsyms`).
    pub kallsyms: Option<&'a Path>,
    /// `ioblame-capture btrfs-map`'s file (`--btrfs-map`). Without it, a perf.data file's
    /// `PERF.DATA.btrfs` beside it, when there is one.
    pub btrfs_map: Option<&'a Path>,
}

/// The btrfs map beside the perf.data file `perf_data`: `PERF.DATA.btrfs`, if it exists.
pub fn btrfs_map_beside(perf_data: &Path) -> Option<PathBuf> {
    let mut name = perf_data.as_os_str().to_os_string();
    name.push(".btrfs");
    let p = PathBuf::from(name);
    p.is_file().then_some(p)
}

/// Whether file `a` was last changed before file `b` (unknown: no).
fn older(a: &Path, b: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    matches!((modified(a), modified(b)), (Some(x), Some(y)) if x < y)
}

/// [`open_trace`] with the side files `side`.
pub fn open_trace_with(
    paths: &[PathBuf],
    side: &SideFiles<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Input, OpenError> {
    let kallsyms = side.kallsyms;
    let ignored = |diagnostics: &mut Vec<Diagnostic>| {
        if kallsyms.is_some() {
            diagnostics.push(Diagnostic::KallsymsIgnored);
        }
        if side.btrfs_map.is_some() {
            diagnostics.push(Diagnostic::BtrfsMapIgnored);
        }
    };
    if !paths.is_empty() && paths.iter().all(|p| ioblame_blktrace::is_blktrace(p)) {
        let rec =
            ioblame_blktrace::Recording::open(paths).map_err(|source| OpenError::Blktrace {
                path: paths[0].clone(),
                source,
            })?;
        ignored(diagnostics);
        diagnostics.extend(
            rec.scan()
                .problems
                .iter()
                .cloned()
                .map(Diagnostic::Blktrace),
        );
        let trace = crate::blktrace::trace_of(&rec, paths).map_err(|source| OpenError::Trace {
            path: paths[0].clone(),
            source,
        })?;
        return Ok(Input {
            trace,
            blktrace: Some(rec),
            drop_buffer_stacks: false,
        });
    }
    let t = match paths {
        [] => return Err(OpenError::NoTrace),
        [one] if one.as_os_str() == "-" || ioblame_perfdata::is_perf_data(one) => {
            let btrfs_map = match side.btrfs_map {
                Some(m) => Some(m.to_path_buf()),
                None if one.as_os_str() != "-" => match btrfs_map_beside(one) {
                    // Left from an earlier recording of that name (perf record renames an
                    // old perf.data, not its map): its devices may be another mount's.
                    Some(m) if older(&m, one) => {
                        diagnostics.push(Diagnostic::BtrfsMapStale { path: m });
                        None
                    }
                    m => m,
                },
                None => None,
            };
            let opts = PerfDataOptions {
                kallsyms: kallsyms.map(Path::to_path_buf),
                btrfs_map,
            };
            let c = if one.as_os_str() == "-" {
                // Standard input: a perf.data stream (`perf record -o - ... | ioblame acts -`).
                let name = Path::new("standard input");
                ioblame_perfdata::read_perf_data(name, std::io::stdin().lock(), &opts)
            } else {
                ioblame_perfdata::open_perf_data(one, &opts)
            }
            .map_err(|source| OpenError::PerfData {
                path: one.clone(),
                source,
            })?;
            diagnostics.extend(c.notes.into_iter().map(Diagnostic::PerfData));
            c.trace
        }
        [one] => {
            ignored(diagnostics);
            Trace::open(one).map_err(|source| OpenError::Trace {
                path: one.clone(),
                source,
            })?
        }
        many => {
            ignored(diagnostics);
            ring_files(many)?
        }
    };
    diagnostics.extend(t.problems().iter().cloned().map(Diagnostic::Trace));
    diagnostics.extend(not_closed(&t));
    // From the tables' headers: opening a trace decompresses no path.
    let files = t.paths_summary();
    let cut = files.flags & (ioblame_format::FILES_CAPPED | ioblame_format::FILES_TIMED_OUT);
    if cut != 0 {
        diagnostics.push(Diagnostic::PathsCutShort {
            flags: cut,
            paths: files.largest,
        });
    }
    Ok(t.into())
}

/// The note that the trace's last file was never closed, with where each CPU's records end.
fn not_closed(t: &Trace) -> Option<Diagnostic> {
    let last = t.files().iter().max_by_key(|f| f.header().file_index)?;
    if last.indexed() {
        return None;
    }
    let start = t.header().start_clock_ns;
    let mut per_cpu: std::collections::BTreeMap<u32, u64> = Default::default();
    for c in t.chunks() {
        let e = per_cpu.entry(c.header.cpu).or_default();
        *e = (*e).max(c.header.last_ts);
    }
    let secs = |ns: u64| ns.saturating_sub(start) as f64 / 1e9;
    let ends = match (per_cpu.values().min(), per_cpu.values().max()) {
        (Some(&a), Some(&b)) => Some((secs(a), secs(b))),
        _ => None,
    };
    Some(Diagnostic::NotClosed {
        file: last.path().to_path_buf(),
        ends,
    })
}

/// The trace made of the ring files `paths`, all of one capture, each given once.
fn ring_files(paths: &[PathBuf]) -> Result<Trace, OpenError> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() || ioblame_perfdata::is_perf_data(p) {
            return Err(OpenError::NotRingFile { path: p.clone() });
        }
        files.push(TraceFile::open(p).map_err(|source| OpenError::TraceFile {
            path: p.clone(),
            source,
        })?);
    }
    files.sort_by_key(|f| f.header().file_index);
    if let Some(w) = files
        .windows(2)
        .find(|w| w[0].header().file_index == w[1].header().file_index)
    {
        return Err(OpenError::SameRingFile {
            first: w[0].path().to_path_buf(),
            second: w[1].path().to_path_buf(),
            index: w[0].header().file_index,
        });
    }
    let id = files[0].header().trace_id;
    if let Some(f) = files.iter().find(|f| f.header().trace_id != id) {
        return Err(OpenError::OtherCapture {
            path: f.path().to_path_buf(),
            first: files[0].path().to_path_buf(),
        });
    }
    Ok(Trace::from_files(files, Vec::new()))
}

/// The kernel symbols of `trace`, with a note when it has none (stacks are then shown as
/// addresses).
pub fn symbols_of(trace: &Trace) -> (Symbolizer, Option<Diagnostic>) {
    match &trace.metadata().kallsyms {
        Some(k) if !k.restricted => (Symbolizer::from_kallsyms(&k.text), None),
        Some(_) => (Symbolizer::default(), Some(Diagnostic::SymbolsHidden)),
        // blktrace records no stacks: nothing to symbolize.
        None if trace.metadata().info("input") == Some("blktrace") => (Symbolizer::default(), None),
        None => (Symbolizer::default(), Some(Diagnostic::NoSymbols)),
    }
}
