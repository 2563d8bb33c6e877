//! The paths of inodes: a trace's FILES and FILE_INDEX tables (newest first, each ring file's
//! repeat of the start table once) opened for lookups that decompress only the FILE_INDEX
//! group that may hold the inode asked for (`PathIndex`), and the merged tables and answers
//! handed out (`PathTable`, `FileName`, `PathsSummary`). The tables' encoding is in
//! `meta/files.rs`.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use super::file::{payload_of, Problem, TraceFile};
use crate::block::{kind, BlockHeader, BLOCK_HEADER_LEN};
use crate::codec::Dec;
use crate::error::DecodeError;
use crate::meta;

/// What a trace says of one inode's name ([`Trace::file_name`](crate::Trace::file_name)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileName<'a> {
    /// Its path on the recording host.
    Path(&'a str),
    /// The recorder knew the trace refers to it but could not name it, and why.
    Unnamed(meta::Unnamed),
    /// No table mentions it (no table at all, a walk cut short, or an older recorder that
    /// named what it walked and not what the trace touched).
    Unknown,
}

/// Paths of inodes, merged from the FILES sections of a trace (see
/// [`Trace::paths`](crate::Trace::paths)).
#[derive(Debug, Default)]
pub struct PathTable {
    map: HashMap<(u32, u64), Box<str>>,
    unnamed: HashMap<(u32, u64), meta::Unnamed>,
    flags: u32,
    tables: usize,
    problems: Vec<Problem>,
}

impl PathTable {
    /// The path of inode `ino` on the filesystem whose kernel dev_t (`major << 20 | minor`, as
    /// in tracepoint payloads) is `dev`.
    pub fn get(&self, dev: u32, ino: u64) -> Option<&str> {
        self.map.get(&(dev, ino)).map(|p| &**p)
    }
    /// Why the recorder could not name an inode the trace refers to, when it said so.
    pub fn unnamed(&self, dev: u32, ino: u64) -> Option<meta::Unnamed> {
        self.unnamed.get(&(dev, ino)).copied()
    }
    /// Number of (dev, inode) pairs with a path.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    /// Whether no path is known (the trace has no FILES section, or they were empty).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    /// Every known `(dev, ino, path)`, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u64, &str)> {
        self.map.iter().map(|(&(d, i), p)| (d, i, &**p))
    }
    /// Every inode the recorder could not name, with why, in no particular order.
    pub fn iter_unnamed(&self) -> impl Iterator<Item = (u32, u64, meta::Unnamed)> + '_ {
        self.unnamed.iter().map(|(&(d, i), &w)| (d, i, w))
    }
    /// The union of the `FILES_*` flags of the tables read: [`crate::FILES_CAPPED`] or
    /// [`crate::FILES_TIMED_OUT`] mean a walk stopped early and some paths are unknown.
    pub fn flags(&self) -> u32 {
        self.flags
    }
    /// Number of distinct FILES tables read.
    pub fn tables(&self) -> usize {
        self.tables
    }
    /// Damaged FILES sections (skipped).
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }
}

/// What the FILES tables of a trace hold, from their headers alone
/// ([`Trace::paths_summary`](crate::Trace::paths_summary)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathsSummary {
    /// Distinct tables (FILES and FILE_INDEX blocks; the start table repeated in each ring
    /// file counts once).
    pub tables: usize,
    /// The union of their `FILES_*` flags.
    pub flags: u32,
    /// Entries with a path in the largest table (tables overlap: the table at the end of a
    /// capture repeats the start's, so they are not added up).
    pub largest: usize,
}

/// A decoded group of a FILE_INDEX table: (dev, inode, state, path), sorted.
type Group = Vec<meta::FileIndexEntry>;

/// One FILES or FILE_INDEX block, ready for lookups: nothing is decompressed until a lookup
/// needs it, and then only the group that may hold the inode (or, for a FILES block of
/// format 1.1 to 1.4, the whole table).
#[derive(Debug)]
struct PathSource {
    file: usize,
    at: u64,
    header: BlockHeader,
    flags: u32,
    kind: SourceKind,
}

#[derive(Debug)]
enum SourceKind {
    Index {
        index: meta::FileIndex,
        groups: Vec<OnceLock<Group>>,
    },
    Legacy {
        entries: usize,
        table: OnceLock<HashMap<(u32, u64), Box<str>>>,
    },
}

/// The FILES tables of a trace, newest first, each opened for lookups.
#[derive(Debug, Default)]
pub(super) struct PathIndex {
    sources: Vec<PathSource>,
    /// Damage found in block headers, group indexes and (as lookups decode them) groups.
    problems: std::sync::Mutex<Vec<Problem>>,
}

impl PathIndex {
    /// Reads the headers and group indexes of the FILES blocks of `files` (oldest file
    /// first), newest first; identical blocks (the ring files repeat the start table) once.
    pub(super) fn open(files: &[TraceFile]) -> PathIndex {
        let mut sources = Vec::new();
        let mut problems = Vec::new();
        let mut seen: HashSet<(u16, u32, u32)> = HashSet::new();
        for (fi, f) in files.iter().enumerate().rev() {
            for (at, h) in f.files_blocks() {
                if !seen.insert((h.kind, h.len, h.payload_crc)) {
                    continue;
                }
                let Some(p) = payload_of(&f.data, at, h) else {
                    continue;
                };
                let damaged = |e: DecodeError| Problem {
                    path: f.path.clone(),
                    offset: at + BLOCK_HEADER_LEN as u64 + e.at as u64,
                    what: format!("FILES block: {}; skipped", e.what),
                };
                let kind = if h.kind == kind::FILE_INDEX {
                    match meta::decode_file_index(p) {
                        Ok(index) => {
                            let groups = (0..index.groups.len()).map(|_| OnceLock::new()).collect();
                            SourceKind::Index { index, groups }
                        }
                        Err(e) => {
                            problems.push(damaged(e));
                            continue;
                        }
                    }
                } else {
                    let mut d = Dec::new(p);
                    match (d.u32("files flags"), d.u32("file count")) {
                        (Ok(_), Ok(n)) => SourceKind::Legacy {
                            entries: n as usize,
                            table: OnceLock::new(),
                        },
                        (Err(e), _) | (_, Err(e)) => {
                            problems.push(damaged(e));
                            continue;
                        }
                    }
                };
                let flags = p
                    .get(..4)
                    .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                sources.push(PathSource {
                    file: fi,
                    at,
                    header: h,
                    flags,
                    kind,
                });
            }
        }
        PathIndex {
            sources,
            problems: std::sync::Mutex::new(problems),
        }
    }

    fn problem(&self, files: &[TraceFile], s: &PathSource, e: DecodeError) {
        let p = Problem {
            path: files[s.file].path.clone(),
            offset: s.at + BLOCK_HEADER_LEN as u64 + e.at as u64,
            what: format!("FILES block: {}; skipped", e.what),
        };
        self.problems
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(p);
    }

    fn payload<'a>(files: &'a [TraceFile], s: &PathSource) -> &'a [u8] {
        payload_of(&files[s.file].data, s.at, s.header).unwrap_or_default()
    }

    /// Group `g` of source `s`, decoded on first use (empty, and a problem noted, if damaged).
    fn group<'a>(&'a self, files: &[TraceFile], s: &'a PathSource, g: usize) -> &'a Group {
        let SourceKind::Index { index, groups } = &s.kind else {
            unreachable!("groups of a FILE_INDEX source only")
        };
        groups[g].get_or_init(|| {
            meta::decode_file_group(Self::payload(files, s), &index.groups[g]).unwrap_or_else(|e| {
                self.problem(files, s, e);
                Vec::new()
            })
        })
    }

    /// The table of a FILES source of format 1.1 to 1.4, decoded whole on first use.
    fn legacy<'a>(
        &'a self,
        files: &[TraceFile],
        s: &'a PathSource,
    ) -> &'a HashMap<(u32, u64), Box<str>> {
        let SourceKind::Legacy { table, .. } = &s.kind else {
            unreachable!("a FILES source only")
        };
        table.get_or_init(|| {
            // Entries go to a scratch map first, so that a table damaged half way adds
            // nothing.
            let mut one = HashMap::new();
            match meta::decode_files(Self::payload(files, s), |dev, ino, path| {
                one.entry((dev, ino)).or_insert_with(|| path.into());
            }) {
                Ok(_) => one,
                Err(e) => {
                    self.problem(files, s, e);
                    HashMap::new()
                }
            }
        })
    }

    /// What the newest table that names the inode says; else the newest reason it has none.
    pub(super) fn lookup<'a>(&'a self, files: &[TraceFile], dev: u32, ino: u64) -> FileName<'a> {
        let mut unnamed = None;
        for s in &self.sources {
            match &s.kind {
                SourceKind::Index { index, .. } => {
                    let Some(g) = index.group_of((dev, ino)) else {
                        continue;
                    };
                    let group = self.group(files, s, g);
                    if let Ok(i) = group.binary_search_by_key(&(dev, ino), |e| (e.0, e.1)) {
                        let (_, _, state, path) = &group[i];
                        match meta::Unnamed::from_code(*state) {
                            None if *state == 0 => return FileName::Path(path),
                            None => {}
                            Some(w) => {
                                unnamed.get_or_insert(w);
                            }
                        }
                    }
                }
                SourceKind::Legacy { .. } => {
                    if let Some(p) = self.legacy(files, s).get(&(dev, ino)) {
                        return FileName::Path(p);
                    }
                }
            }
            // The whole table of a recorder that named what the trace touched, written at the
            // end: the older blocks (the parts written while recording) hold nothing more.
            let whole = meta::FILES_TOUCHED | meta::FILES_AT_END;
            if s.flags & whole == whole {
                break;
            }
        }
        unnamed.map_or(FileName::Unknown, FileName::Unnamed)
    }

    pub(super) fn summary(&self) -> PathsSummary {
        let mut out = PathsSummary {
            tables: self.sources.len(),
            ..Default::default()
        };
        for s in &self.sources {
            out.flags |= s.flags;
            let n = match &s.kind {
                SourceKind::Index { index, .. } => index.named as usize,
                SourceKind::Legacy { entries, .. } => *entries,
            };
            out.largest = out.largest.max(n);
        }
        out
    }

    /// Every table decoded whole, merged (newest wins).
    pub(super) fn table(
        &self,
        files: &[TraceFile],
        wanted: Option<&HashSet<(u32, u64)>>,
    ) -> PathTable {
        let mut t = PathTable {
            tables: self.sources.len(),
            ..Default::default()
        };
        let add = |t: &mut PathTable, dev: u32, ino: u64, state: u8, path: &str| {
            if wanted.is_some_and(|w| !w.contains(&(dev, ino))) {
                return;
            }
            match meta::Unnamed::from_code(state) {
                None if state == 0 => {
                    t.map.entry((dev, ino)).or_insert_with(|| path.into());
                }
                None => {}
                Some(w) => {
                    t.unnamed.entry((dev, ino)).or_insert(w);
                }
            }
        };
        for s in &self.sources {
            t.flags |= s.flags;
            match &s.kind {
                SourceKind::Index { index, .. } => {
                    for g in 0..index.groups.len() {
                        for (dev, ino, state, path) in self.group(files, s, g) {
                            add(&mut t, *dev, *ino, *state, path);
                        }
                    }
                }
                SourceKind::Legacy { .. } => {
                    for (&(dev, ino), path) in self.legacy(files, s) {
                        add(&mut t, dev, ino, 0, path);
                    }
                }
            }
        }
        let named = &t.map;
        t.unnamed.retain(|k, _| !named.contains_key(k));
        t.problems = self.problems();
        t
    }

    /// The names of the inodes in `wanted` only, through [`PathIndex::lookup`], with the
    /// problems met so far.
    pub(super) fn paths_of(&self, files: &[TraceFile], wanted: &HashSet<(u32, u64)>) -> PathTable {
        let mut t = PathTable {
            tables: self.sources.len(),
            flags: self.summary().flags,
            ..Default::default()
        };
        for &(dev, ino) in wanted {
            match self.lookup(files, dev, ino) {
                FileName::Path(p) => {
                    t.map.insert((dev, ino), p.into());
                }
                FileName::Unnamed(w) => {
                    t.unnamed.insert((dev, ino), w);
                }
                FileName::Unknown => {}
            }
        }
        t.problems = self.problems();
        t
    }

    /// Damaged FILES sections met so far (at open, and by the lookups made).
    pub(super) fn problems(&self) -> Vec<Problem> {
        self.problems
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
