//! Reading a recording: the inputs named (files, directories), each told binary or text by
//! its content, read record by record from a memory map, and the files merged into one
//! time order without holding more than one record per file.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::record::{self, Bad, Record};
use crate::text;
use crate::{Error, Problem};

/// What an input file holds, told by its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// blktrace records (`sdX.blktrace.N` per-CPU files, or a `blkparse -d` dump).
    Binary,
    /// `blkparse` text in its default format.
    Text,
}

/// One input file, mapped (or given as bytes).
pub(crate) struct Source {
    pub path: PathBuf,
    pub kind: Kind,
    map: Option<Mmap>,
    owned: Vec<u8>,
}

impl Source {
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&self.owned)
    }

    /// A source of `bytes` already in memory, named `path`.
    pub fn from_bytes(path: PathBuf, bytes: Vec<u8>) -> Option<Source> {
        let kind = kind_of(&bytes)?;
        Some(Source {
            path,
            kind,
            map: None,
            owned: bytes,
        })
    }
}

/// The kind of the bytes `b` (the start of a file), if blktrace data.
pub fn kind_of(b: &[u8]) -> Option<Kind> {
    if record::magic(b).is_some() {
        return Some(Kind::Binary);
    }
    text::looks_like_blkparse(b).then_some(Kind::Text)
}

/// The kind of the file at `path`, if blktrace data (a directory: `None`).
pub fn file_kind(path: &Path) -> Option<Kind> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut buf = vec![0u8; 4096];
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(_) => return None,
        }
    }
    kind_of(&buf[..n])
}

fn map(path: &Path) -> Result<Option<Mmap>, Error> {
    let f = std::fs::File::open(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let len = f
        .metadata()
        .map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?
        .len();
    if len == 0 {
        return Ok(None);
    }
    // SAFETY: the file is only read; a recording changed while it is read gives wrong
    // records (checked like any damage), not undefined behaviour in safe code that copies
    // every field out through bounds-checked slices.
    let m = unsafe { Mmap::map(&f) }.map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Some(m))
}

/// Opens the inputs named: files (any name) and directories (their blktrace files; the
/// binary ones if any, else the blkparse text ones). Problems found (empty files, files in
/// a directory that are not blktrace data) are pushed onto `problems`.
pub(crate) fn open_sources(
    paths: &[PathBuf],
    problems: &mut Vec<Problem>,
) -> Result<Vec<Source>, Error> {
    if paths.is_empty() {
        return Err(Error::NoInput);
    }
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let rd = std::fs::read_dir(p).map_err(|source| Error::Io {
                path: p.clone(),
                source,
            })?;
            let mut files: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect();
            files.sort();
            let mut found: Vec<(PathBuf, Kind)> = Vec::new();
            let mut others = 0;
            for f in files {
                match file_kind(&f) {
                    Some(k) => found.push((f, k)),
                    None if f.metadata().map(|m| m.len() == 0).unwrap_or(false) => {
                        problems.push(Problem::Empty { path: f })
                    }
                    None => others += 1,
                }
            }
            let binary = found.iter().any(|f| f.1 == Kind::Binary);
            let (take, skip): (Vec<_>, Vec<_>) = found
                .into_iter()
                .partition(|f| (f.1 == Kind::Binary) == binary);
            if !skip.is_empty() {
                problems.push(Problem::TextBesideBinary {
                    dir: p.clone(),
                    files: skip.len(),
                });
            }
            if others > 0 {
                problems.push(Problem::OtherFiles {
                    dir: p.clone(),
                    files: others,
                });
            }
            if take.is_empty() {
                return Err(Error::NoBlktraceIn { path: p.clone() });
            }
            for (f, kind) in take {
                let m = map(&f)?;
                out.push(Source {
                    path: f,
                    kind,
                    map: m,
                    owned: Vec::new(),
                });
            }
        } else {
            let m = map(p)?;
            let kind = match m.as_deref() {
                None => {
                    problems.push(Problem::Empty { path: p.clone() });
                    continue;
                }
                Some(b) => kind_of(b).ok_or_else(|| Error::NotBlktrace { path: p.clone() })?,
            };
            out.push(Source {
                path: p.clone(),
                kind,
                map: m,
                owned: Vec::new(),
            });
        }
    }
    if out.is_empty() {
        return Err(Error::Empty);
    }
    Ok(out)
}

/// Bytes read behind which a file's mapped pages are released.
const RELEASE_EVERY: usize = 16 << 20;

/// Reads one binary file record by record, stepping over damage.
pub(crate) struct BinCursor<'a> {
    data: &'a [u8],
    pos: usize,
    path: &'a Path,
    /// The file's map, whose pages behind `pos` are given back as reading goes, so the
    /// resident memory stays flat however long the file.
    map: Option<&'a Mmap>,
    released: usize,
}

impl<'a> BinCursor<'a> {
    pub fn new(data: &'a [u8], path: &'a Path, map: Option<&'a Mmap>) -> BinCursor<'a> {
        if let Some(m) = map {
            // Best effort: read-ahead in bigger steps.
            let _ = m.advise(memmap2::Advice::Sequential);
        }
        BinCursor {
            data,
            pos: 0,
            path,
            map,
            released: 0,
        }
    }

    /// Gives back the pages of the file read so far.
    fn release(&mut self) {
        let Some(m) = self.map else { return };
        let end = self.pos & !(4095);
        if end > self.released {
            // SAFETY: the map is a read-only file mapping; MADV_DONTNEED only drops its
            // pages, which a later access reads again from the file with the same bytes.
            // No record borrows from it (records are copied out).
            let _ = unsafe {
                m.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    self.released,
                    end - self.released,
                )
            };
            self.released = end;
        }
    }

    /// The next record; damage is pushed onto `problems` (bytes that are no record are
    /// skipped up to the next record; a record cut short ends the file).
    pub fn next(&mut self, problems: &mut Vec<Problem>) -> Option<Record> {
        loop {
            let rest = self.data.get(self.pos..)?;
            if rest.is_empty() {
                return None;
            }
            match record::parse(rest) {
                Ok((r, n)) => {
                    self.pos += n;
                    if self.pos - self.released >= RELEASE_EVERY {
                        self.release();
                    }
                    return Some(r);
                }
                Err(Bad::ShortHeader) => {
                    problems.push(Problem::CutShort {
                        path: self.path.to_path_buf(),
                        offset: self.pos as u64,
                        have: rest.len() as u64,
                    });
                    self.pos = self.data.len();
                    return None;
                }
                Err(Bad::PduPastEnd { pdu_len }) => {
                    problems.push(Problem::PduPastEnd {
                        path: self.path.to_path_buf(),
                        offset: self.pos as u64,
                        pdu_len,
                        have: rest.len() as u64,
                    });
                    self.pos = self.data.len();
                    return None;
                }
                Err(bad) => {
                    // Resynchronise on the next record that parses.
                    let from = self.pos;
                    let skip = (1..rest.len())
                        .find(|&i| {
                            matches!(record::magic(&rest[i..]), Some((_, 7 | 8)))
                                && record::parse(&rest[i..]).is_ok()
                        })
                        .unwrap_or(rest.len());
                    problems.push(Problem::BadMagic {
                        path: self.path.to_path_buf(),
                        offset: from as u64,
                        skipped: skip as u64,
                        version: match bad {
                            Bad::Version(v) => Some(v),
                            _ => None,
                        },
                    });
                    self.pos += skip;
                }
            }
        }
    }
}

/// Reads one input file (binary or text) record by record.
pub(crate) enum Cursor<'a> {
    Bin(BinCursor<'a>),
    Text(text::TextCursor<'a>),
}

impl<'a> Cursor<'a> {
    pub fn new(s: &'a Source) -> Cursor<'a> {
        match s.kind {
            Kind::Binary => Cursor::Bin(BinCursor::new(s.bytes(), &s.path, s.map.as_ref())),
            Kind::Text => Cursor::Text(text::TextCursor::new(s.bytes(), &s.path)),
        }
    }
    pub fn next(&mut self, problems: &mut Vec<Problem>) -> Option<Record> {
        match self {
            Cursor::Bin(c) => c.next(problems),
            Cursor::Text(c) => c.next(problems),
        }
    }
    /// Unknown text lines met (text files only).
    pub fn finish(&mut self, problems: &mut Vec<Problem>) {
        if let Cursor::Text(c) = self {
            c.finish(problems)
        }
    }
}

/// The records of every input file, merged into one time order (ties: the file named
/// first), holding one record per file.
pub struct Records<'a> {
    cursors: Vec<Cursor<'a>>,
    heads: Vec<Option<Record>>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    problems: Vec<Problem>,
    done: bool,
}

impl<'a> Records<'a> {
    pub(crate) fn new(sources: &'a [Source]) -> Records<'a> {
        let mut r = Records {
            cursors: sources.iter().map(Cursor::new).collect(),
            heads: Vec::new(),
            heap: BinaryHeap::new(),
            problems: Vec::new(),
            done: false,
        };
        for i in 0..r.cursors.len() {
            let h = r.cursors[i].next(&mut r.problems);
            if let Some(rec) = &h {
                r.heap.push(Reverse((rec.time, i)));
            }
            r.heads.push(h);
        }
        r
    }

    /// The damage met so far (each file's, in the order found).
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }
}

impl Iterator for Records<'_> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        let Some(Reverse((_, i))) = self.heap.pop() else {
            if !self.done {
                self.done = true;
                for c in &mut self.cursors {
                    c.finish(&mut self.problems);
                }
            }
            return None;
        };
        let next = self.cursors[i].next(&mut self.problems);
        if let Some(rec) = &next {
            self.heap.push(Reverse((rec.time, i)));
        }
        std::mem::replace(&mut self.heads[i], next)
    }
}
