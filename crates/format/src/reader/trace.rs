//! A whole trace: one file, or the surviving files of a ring directory, opened together; the
//! gaps and duplicates of each CPU's chunk sequence reported; the tables every file repeats or
//! adds to (cgroups, loop devices, dm targets, user-stack tables) merged; path lookups
//! handed to `paths`.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::file::{Chunk, Problem, TraceFile};
use super::paths::{FileName, PathIndex, PathTable, PathsSummary};
use crate::block::kind;
use crate::chunk::ChunkHeader;
use crate::error::{Error, Result};
use crate::meta::{self, Header, Metadata, MAX_PERF_MAPS_TOTAL, MAX_USER_SYMBOLS_TOTAL};

/// Where a chunk is, and what its header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRef {
    /// Index of the file in [`Trace::files`].
    pub file: usize,
    /// Offset of the chunk's block header in that file.
    pub offset: u64,
    /// The chunk header.
    pub header: ChunkHeader,
}

/// A whole trace: one file, or the surviving files of a ring directory.
#[derive(Debug)]
pub struct Trace {
    files: Vec<TraceFile>,
    chunks: Vec<ChunkRef>,
    problems: Vec<Problem>,
    paths: OnceLock<PathTable>,
    path_index: OnceLock<PathIndex>,
}

impl Trace {
    /// Opens a trace file, or a directory of ring files.
    ///
    /// Damage is not an error: the trace is read up to it (or past it, when the damage is
    /// local) and [`Trace::problems`] says what was skipped. Errors are for input that is not a
    /// trace at all.
    pub fn open(path: &Path) -> Result<Trace> {
        let meta = std::fs::metadata(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if !meta.is_dir() {
            return Ok(Self::from_files(vec![TraceFile::open(path)?], Vec::new()));
        }
        let mut names: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "iob"))
            .collect();
        names.sort();
        let mut files = Vec::new();
        let mut problems = Vec::new();
        let mut first_err = None;
        for n in names {
            match TraceFile::open(&n) {
                Ok(f) => files.push(f),
                Err(e) => {
                    problems.push(Problem {
                        path: n.clone(),
                        offset: 0,
                        what: format!("unreadable, skipped: {e}"),
                    });
                    first_err.get_or_insert(e);
                }
            }
        }
        if files.is_empty() {
            return Err(first_err.unwrap_or(Error::Empty {
                path: path.to_path_buf(),
            }));
        }
        files.sort_by_key(|f| f.header.file_index);
        let id = files[0].header.trace_id;
        files.retain(|f| {
            if f.header.trace_id != id {
                problems.push(Problem {
                    path: f.path.clone(),
                    offset: 0,
                    what: format!(
                        "belongs to another capture (trace id {:#x}, expected {id:#x}); skipped",
                        f.header.trace_id
                    ),
                });
                false
            } else {
                true
            }
        });
        Ok(Self::from_files(files, problems))
    }

    /// Builds a trace from files already opened (in ring order).
    ///
    /// The metadata of the first (oldest) file, which [`Trace::metadata`] returns, is decoded
    /// here and its faults join [`Trace::problems`]; the other files' metadata stays undecoded
    /// unless asked for through [`TraceFile::metadata`].
    pub fn from_files(files: Vec<TraceFile>, mut problems: Vec<Problem>) -> Trace {
        let mut chunks = Vec::new();
        for (i, f) in files.iter().enumerate() {
            problems.extend(f.problems.iter().cloned());
            if i == 0 {
                problems.extend(f.metadata_problems().iter().cloned());
            }
            chunks.extend(f.chunks.iter().map(|&(offset, header)| ChunkRef {
                file: i,
                offset,
                header,
            }));
        }
        // Ring data the recorder discarded is a loss of unknown size: say where.
        for c in &chunks {
            if c.header.ring_discarded() {
                problems.push(Problem {
                    path: files[c.file].path.clone(),
                    offset: c.offset,
                    what: format!(
                        "cpu {}: chunk {}: the recorder discarded {} bytes of inconsistent perf \
                         ring data; records between {} and {} are missing",
                        c.header.cpu,
                        c.header.seq,
                        c.header.discarded,
                        c.header.first_ts,
                        c.header.last_ts
                    ),
                });
            }
        }
        // Report gaps in each CPU's chunk sequence (deleted files, damaged chunks).
        let mut per_cpu: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for c in &chunks {
            per_cpu.entry(c.header.cpu).or_default().push(c.header.seq);
        }
        let first_index = files.first().map_or(0, |f| f.header.file_index);
        for (cpu, mut seqs) in per_cpu {
            seqs.sort_unstable();
            if seqs[0] > 0 {
                let why = if first_index > 0 {
                    "older ring files were deleted by the size cap"
                } else {
                    "missing"
                };
                problems.push(Problem {
                    path: files[0].path.clone(),
                    offset: 0,
                    what: format!(
                        "cpu {cpu}: chunks 0..{} are not in the trace ({why})",
                        seqs[0]
                    ),
                });
            }
            // Runs of equal numbers are duplicates; a step over 1 is a gap. No arithmetic can
            // overflow: `w[0] < w[1]` in the gap case, so `w[0] + 1` fits.
            let mut i = 0;
            while i < seqs.len() {
                let s = seqs[i];
                let run = seqs[i..].iter().take_while(|&&x| x == s).count();
                if run > 1 {
                    problems.push(Problem {
                        path: files[0].path.clone(),
                        offset: 0,
                        what: format!("cpu {cpu}: chunk {s} appears {run} times"),
                    });
                }
                i += run;
                if let Some(&next) = seqs.get(i) {
                    if next - s > 1 {
                        problems.push(Problem {
                            path: files[0].path.clone(),
                            offset: 0,
                            what: format!("cpu {cpu}: chunks {}..{next} are missing", s + 1),
                        });
                    }
                }
            }
        }
        Trace {
            files,
            chunks,
            problems,
            paths: OnceLock::new(),
            path_index: OnceLock::new(),
        }
    }

    /// The header of the oldest surviving file (the capture's header).
    pub fn header(&self) -> &Header {
        &self.files[0].header
    }
    /// The metadata of the oldest surviving file.
    pub fn metadata(&self) -> &Metadata {
        self.files[0].metadata()
    }
    /// The cgroups of the recording host's cgroup2 hierarchy (id -> path), sorted by id: the
    /// oldest file's table merged with the newest file's (the recorder appends a table taken
    /// at the end of the capture, which names the cgroups created while recording; for an
    /// id in both, the newest wins). Empty for traces before format 1.3.
    pub fn cgroups(&self) -> Vec<meta::Cgroup> {
        let mut by_id: BTreeMap<u64, String> = BTreeMap::new();
        for f in [self.files.first(), self.files.last()]
            .into_iter()
            .flatten()
        {
            for c in &f.metadata().cgroups {
                by_id.insert(c.id, c.path.clone());
            }
        }
        by_id
            .into_iter()
            .map(|(id, path)| meta::Cgroup { id, path })
            .collect()
    }
    /// The loop devices over files of the recording (format 1.7): every file's list merged,
    /// one entry per loop device and mapping (the same device set up again over another file
    /// is a second entry, from its `since_ns`), sorted by device then time. Empty for traces
    /// before 1.7 and recordings without loop devices.
    pub fn loops(&self) -> Vec<meta::LoopDevice> {
        let mut v: Vec<meta::LoopDevice> = Vec::new();
        for f in &self.files {
            meta::merge_loops(&mut v, &f.metadata().loops);
        }
        v
    }
    /// The btrfs filesystems of the recording (format 1.9): every file's lists merged, one
    /// entry per filesystem (by `fsid`) with every device and chunk any file names, chunks
    /// sorted by logical address then time. Empty before 1.9 and without btrfs.
    pub fn btrfs(&self) -> Vec<meta::BtrfsFs> {
        let mut v: Vec<meta::BtrfsFs> = Vec::new();
        for f in &self.files {
            meta::merge_btrfs(&mut v, &f.metadata().btrfs);
        }
        v
    }
    /// The executable mappings the recorder read of the processes whose user stacks it
    /// recorded (format 1.8): every file's list merged, sorted by process, address and time.
    pub fn user_maps(&self) -> Vec<meta::UserMap> {
        let mut set: std::collections::HashSet<&meta::UserMap> = Default::default();
        for f in &self.files {
            set.extend(f.metadata().user_maps.iter());
        }
        let mut v: Vec<meta::UserMap> = set.into_iter().cloned().collect();
        v.sort_by(|a, b| {
            (a.pid, a.start, a.seen_ns, &a.path).cmp(&(b.pid, b.start, b.seen_ns, &b.path))
        });
        v
    }
    /// The symbol tables of user-space ELF files copied into the trace (format 1.8), one per
    /// build id (the first file's copy), with the faults of blocks that could not be read.
    pub fn user_symbols(&self) -> (Vec<meta::UserSymbols>, Vec<Problem>) {
        let mut v: Vec<meta::UserSymbols> = Vec::new();
        let mut problems = Vec::new();
        let mut budget = MAX_USER_SYMBOLS_TOTAL;
        for f in &self.files {
            let (s, p) = f.on_demand(
                kind::USER_SYMBOLS,
                "user symbols",
                &mut budget,
                meta::decode_user_symbols,
            );
            problems.extend(p);
            for one in s {
                if !v.iter().any(|x| x.build_id == one.build_id) {
                    v.push(one);
                }
            }
        }
        (v, problems)
    }
    /// The JIT symbol maps copied into the trace (format 1.8), one per process (the last
    /// file's copy: the map grows as the JIT compiles), with the faults of blocks that could
    /// not be read.
    pub fn perf_maps(&self) -> (Vec<meta::PerfMap>, Vec<Problem>) {
        let mut v: Vec<meta::PerfMap> = Vec::new();
        let mut problems = Vec::new();
        let mut budget = MAX_PERF_MAPS_TOTAL;
        for f in &self.files {
            let (s, p) = f.on_demand(
                kind::PERF_MAPS,
                "perf map",
                &mut budget,
                meta::decode_perf_map,
            );
            problems.extend(p);
            for one in s {
                match v.iter_mut().find(|x| x.pid == one.pid) {
                    Some(x) => *x = one,
                    None => v.push(one),
                }
            }
        }
        (v, problems)
    }
    /// The device-mapper targets of the recording (format 1.7): every file's list merged,
    /// sorted by device, start and time. Empty before 1.7 and without device-mapper.
    pub fn dm_targets(&self) -> Vec<meta::DmTarget> {
        let mut v: Vec<meta::DmTarget> = Vec::new();
        for f in &self.files {
            meta::merge_dm_targets(&mut v, &f.metadata().dm_targets);
        }
        v
    }
    /// The files of the trace, oldest first.
    pub fn files(&self) -> &[TraceFile] {
        &self.files
    }
    /// All chunks, in file and write order.
    pub fn chunks(&self) -> &[ChunkRef] {
        &self.chunks
    }
    /// Damage found while opening, and chunks whose span lost ring data
    /// ([`ChunkHeader::ring_discarded`]).
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }
    fn path_index(&self) -> &PathIndex {
        self.path_index.get_or_init(|| PathIndex::open(&self.files))
    }
    /// Paths of inodes from the FILES sections of every file of the trace (a table taken at
    /// the end of the capture wins over the one taken at its start), every table decoded
    /// whole on the first call: for listings. Lookups of a few inodes cost less through
    /// [`Trace::file_name`] and [`Trace::paths_of`]. Empty for traces without FILES sections
    /// (format 1.0, or recorded with `--no-paths`).
    pub fn paths(&self) -> &PathTable {
        self.paths
            .get_or_init(|| self.path_index().table(&self.files, None))
    }
    /// The tables' count, flags and size, from their headers (nothing is decompressed).
    pub fn paths_summary(&self) -> PathsSummary {
        self.path_index().summary()
    }
    /// The name of inode `ino` on the filesystem of kernel dev_t `dev` (`major << 20 |
    /// minor`, as in tracepoint payloads): the newest table's path; else, when the recorder
    /// said why it could not name it, the reason. Decompresses only the group of each table
    /// that may hold it (once: later lookups in the group cost a binary search); tables of
    /// format 1.1 to 1.4 are decoded whole on the first lookup.
    pub fn file_name(&self, dev: u32, ino: u64) -> FileName<'_> {
        self.path_index().lookup(&self.files, dev, ino)
    }
    /// The paths of the inodes in `wanted` only (`(dev, ino)`, as in [`PathTable::get`]),
    /// and the reasons of those the recorder could not name: what [`Trace::paths`] holds for
    /// them, through [`Trace::file_name`]. Not cached.
    pub fn paths_of(&self, wanted: &HashSet<(u32, u64)>) -> PathTable {
        self.path_index().paths_of(&self.files, wanted)
    }
    /// Damaged FILES sections met so far (at open, and by the lookups made).
    pub fn path_problems(&self) -> Vec<Problem> {
        self.path_index().problems()
    }
    /// The path of inode `ino` on the filesystem of kernel dev_t `dev` (`major << 20 |
    /// minor`, as in tracepoint payloads), if the recorder found it. See [`Trace::file_name`].
    pub fn path_of(&self, dev: u32, ino: u64) -> Option<&str> {
        match self.file_name(dev, ino) {
            FileName::Path(p) => Some(p),
            _ => None,
        }
    }
    /// Decompresses and checks one chunk.
    pub fn decompress(&self, c: &ChunkRef) -> Result<Chunk> {
        self.files[c.file].decompress_at(c.offset)
    }

    /// [`Trace::decompress`] into `buf`, a [`Chunk::data`] done with (whatever it holds is
    /// dropped): a stream of chunks reuses a few buffers instead of allocating, and first
    /// touching, fresh memory for each.
    pub fn decompress_into(&self, c: &ChunkRef, buf: Vec<u8>) -> Result<Chunk> {
        self.files[c.file].decompress_at_into(c.offset, buf)
    }

    /// Decompresses every chunk, in order, on the current rayon pool. A damaged chunk gives an
    /// error in its place; the others are unaffected.
    #[cfg(feature = "parallel")]
    pub fn decompress_all(&self) -> Vec<Result<Chunk>> {
        use rayon::prelude::*;
        self.chunks.par_iter().map(|c| self.decompress(c)).collect()
    }

    /// Maps `f` over the decompressed chunks in parallel and returns the results in chunk order.
    #[cfg(feature = "parallel")]
    pub fn par_map_chunks<R: Send>(
        &self,
        f: impl Fn(&ChunkRef, Result<Chunk>) -> R + Sync + Send,
    ) -> Vec<R> {
        use rayon::prelude::*;
        self.chunks
            .par_iter()
            .map(|c| f(c, self.decompress(c)))
            .collect()
    }
}
