//! The sources of a module's symbols: the trace's tables, ELF files on disk (found by build
//! id), `.gnu_debugdata`, DWARF.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ioblame_format::{build_id_hex, ElfLoad, ElfSection, UserSymbols};
use object::{Object, ObjectSection, ObjectSegment, ReadCache, SegmentFlags};

use crate::table::{exec_ranges, Layout, Origin, Symbols};
use crate::{Coverage, Error, MAX_DEBUGDATA};

/// The DWARF reader of a file.
pub(crate) type Dwarf = addr2line::Context<gimli::EndianArcSlice<gimli::RunTimeEndian>>;

/// Most files a `--symbols` directory scan reads.
const MAX_SCAN_FILES: usize = 100_000;
/// Deepest directory a scan enters.
const MAX_SCAN_DEPTH: usize = 8;

/// What one source gave for a module.
pub(crate) struct Loaded {
    /// The segments file offsets are mapped through.
    pub(crate) loads: Vec<ElfLoad>,
    pub(crate) symbols: Symbols,
    pub(crate) dwarf: Option<Dwarf>,
    pub(crate) coverage: Coverage,
}

impl Loaded {
    /// Nothing, over `loads` if known.
    pub(crate) fn empty(loads: Option<&[ElfLoad]>) -> Loaded {
        Loaded {
            loads: loads.map(<[_]>::to_vec).unwrap_or_default(),
            symbols: Symbols::default(),
            dwarf: None,
            coverage: Coverage::None,
        }
    }
}

/// The raw tables of one ELF file, borrowed.
struct Tables<'a> {
    layout: Layout,
    symtab: Option<(&'a [u8], &'a [u8])>,
    dynsym: Option<(&'a [u8], &'a [u8])>,
    debugdata: Option<&'a [u8]>,
}

/// Symbols of `t` (and of its `.gnu_debugdata`), code spanning `exec`; the coverage they
/// give.
fn symbols_of(
    t: &Tables<'_>,
    exec: Vec<(u64, u64)>,
    what: &str,
    problems: &mut Vec<Error>,
) -> (Symbols, Coverage) {
    let mut s = Symbols::new(exec);
    if let Some((sym, str)) = t.symtab {
        s.add_table(t.layout, sym, str, Origin::Symtab);
    }
    if let Some(dd) = t.debugdata {
        match debugdata(dd) {
            Ok(elf) => match object::File::parse(&*elf) {
                Ok(f) => {
                    let inner = tables(&f);
                    if let Some((sym, str)) = inner.symtab {
                        s.add_table(inner.layout, sym, str, Origin::DebugData);
                    }
                }
                Err(e) => problems.push(Error::Elf {
                    what: format!(".gnu_debugdata of {what}"),
                    message: e.to_string(),
                }),
            },
            Err(message) => problems.push(Error::DebugData {
                what: what.to_string(),
                message,
            }),
        }
    }
    if let Some((sym, str)) = t.dynsym {
        s.add_table(t.layout, sym, str, Origin::Dynsym);
    }
    s.finish();
    let coverage = if s.has(Origin::Symtab) || s.has(Origin::DebugData) {
        Coverage::Full
    } else if s.len() > 0 {
        Coverage::Dynamic
    } else {
        Coverage::None
    };
    (s, coverage)
}

/// Most memory the xz decoder may take for its dictionary, in KiB (xz -9 uses 64 MiB).
const XZ_MEM_LIMIT_KB: u32 = 128 << 10;

/// `.gnu_debugdata` decompressed (xz), at most [`MAX_DEBUGDATA`] bytes.
pub(crate) fn debugdata(xz: &[u8]) -> Result<Vec<u8>, String> {
    let r = lzma_rust2::XzReader::new_mem_limit(xz, false, XZ_MEM_LIMIT_KB);
    let mut out = Vec::new();
    r.take(MAX_DEBUGDATA as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() > MAX_DEBUGDATA {
        return Err(format!("more than {MAX_DEBUGDATA} bytes"));
    }
    Ok(out)
}

/// The module's symbols from the trace's copy of its tables.
pub(crate) fn from_trace(t: &UserSymbols, problems: &mut Vec<Error>) -> Loaded {
    let section = |name: &str| {
        t.sections
            .iter()
            .find(|s| s.name == name)
            .map(|s| &s.data[..])
    };
    let pair = |a, b| Some((section(a)?, section(b)?));
    let tables = Tables {
        layout: Layout {
            class64: t.class64,
            big_endian: t.big_endian,
            thumb_bit: t.machine == 40, // EM_ARM
        },
        symtab: pair(".symtab", ".strtab"),
        dynsym: pair(".dynsym", ".dynstr"),
        debugdata: section(".gnu_debugdata"),
    };
    let what = format!("the trace's tables of {}", t.path);
    let (symbols, coverage) = symbols_of(&tables, exec_ranges(&t.loads), &what, problems);
    Loaded {
        loads: t.loads.clone(),
        symbols,
        dwarf: None,
        coverage,
    }
}

/// The raw tables of a parsed file (sections found by name, as the recorder copies them).
fn tables<'a, R: object::ReadRef<'a>>(f: &object::File<'a, R>) -> Tables<'a> {
    let data = |name: &str| {
        f.section_by_name(name)
            .and_then(|s| s.data().ok())
            .filter(|d| !d.is_empty())
    };
    let pair = |a, b| Some((data(a)?, data(b)?));
    Tables {
        layout: Layout {
            class64: f.is_64(),
            big_endian: !f.is_little_endian(),
            thumb_bit: f.architecture() == object::Architecture::Arm,
        },
        symtab: pair(".symtab", ".strtab"),
        dynsym: pair(".dynsym", ".dynstr"),
        debugdata: data(".gnu_debugdata"),
    }
}

/// A file's `PT_LOAD` segments.
pub(crate) fn loads_of<'a, R: object::ReadRef<'a>>(f: &object::File<'a, R>) -> Vec<ElfLoad> {
    f.segments()
        .filter_map(|s| {
            let SegmentFlags::Elf { p_type, p_flags } = s.flags() else {
                return None;
            };
            if p_type.0 != 1 {
                return None; // not PT_LOAD
            }
            let (offset, filesz) = s.file_range();
            Some(ElfLoad {
                offset,
                vaddr: s.address(),
                filesz,
                flags: p_flags.0,
            })
        })
        .collect()
}

fn io_error(path: &Path, e: impl ToString) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Whether `loads` can map file offsets: a debug file (`objcopy --only-keep-debug`) has
/// its binary's segments with no bytes in the file.
pub(crate) fn maps_offsets(loads: &[ElfLoad]) -> bool {
    loads.iter().any(|l| l.flags & 1 != 0 && l.filesz > 0)
}

/// The segments of the ELF file at `path` if its build id is `build_id` and they map file
/// offsets (a binary, not a debug file).
pub(crate) fn file_loads(path: &Path, build_id: &[u8]) -> Option<Vec<ElfLoad>> {
    let cache = ReadCache::new(File::open(path).ok()?);
    let f = object::File::parse(&cache).ok()?;
    if f.build_id().ok()?? != build_id {
        return None;
    }
    Some(loads_of(&f)).filter(|l| maps_offsets(l))
}

/// The unwind tables and segments of the ELF file at `path`, if its build id is `build_id`,
/// its segments map offsets (a binary, not a debug file) and it has some.
pub(crate) fn unwind_of(path: &Path, build_id: &[u8]) -> Option<UserSymbols> {
    let cache = ReadCache::new(File::open(path).ok()?);
    let f = object::File::parse(&cache).ok()?;
    if f.build_id().ok()?? != build_id {
        return None;
    }
    let loads = Some(loads_of(&f)).filter(|l| maps_offsets(l))?;
    let sections: Vec<ElfSection> = ioblame_format::UNWIND_SECTIONS
        .iter()
        .filter_map(|n| {
            let s = f.section_by_name(n)?;
            let data = s.uncompressed_data().ok()?;
            (!data.is_empty()).then(|| ElfSection {
                name: n.to_string(),
                addr: s.address(),
                data: data.into_owned(),
            })
        })
        .collect();
    if sections.is_empty() {
        return None;
    }
    Some(UserSymbols {
        build_id: build_id.to_vec(),
        path: path.display().to_string(),
        class64: f.is_64(),
        big_endian: !f.is_little_endian(),
        machine: 0,
        loads,
        sections,
    })
}

/// The build id of the ELF file at `path`, if it is one (only its headers and notes read).
pub(crate) fn build_id_of(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    let mut file = File::open(path).map_err(|e| io_error(path, e))?;
    let mut magic = [0u8; 4];
    if file.read_exact(&mut magic).is_err() || &magic != b"\x7fELF" {
        return Ok(None);
    }
    let cache = ReadCache::new(file);
    let f = object::File::parse(&cache).map_err(|e| Error::Elf {
        what: path.display().to_string(),
        message: e.to_string(),
    })?;
    Ok(f.build_id().ok().flatten().map(<[u8]>::to_vec))
}

/// The module's symbols from an ELF file on disk, if its build id is `build_id`. Offsets are
/// mapped through `trace_loads` when the trace has the module's segments (a debug file's
/// own may be incomplete), through the file's otherwise.
pub(crate) fn from_file(
    path: &Path,
    build_id: &[u8],
    trace_loads: Option<&[ElfLoad]>,
    problems: &mut Vec<Error>,
) -> Option<Loaded> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            problems.push(io_error(path, e));
            return None;
        }
    };
    let cache = ReadCache::new(file);
    let f = match object::File::parse(&cache) {
        Ok(f) => f,
        Err(e) => {
            problems.push(Error::Elf {
                what: path.display().to_string(),
                message: e.to_string(),
            });
            return None;
        }
    };
    let found = f.build_id().ok().flatten().unwrap_or_default();
    if found != build_id {
        problems.push(Error::BuildIdMismatch {
            path: path.to_path_buf(),
            found: build_id_hex(found),
        });
        return None;
    }
    let loads = match trace_loads {
        Some(l) if maps_offsets(l) => l.to_vec(),
        _ => loads_of(&f),
    };
    // From the segments' memory sizes: a debug file's segments keep those, not their
    // file sizes.
    let exec = f
        .segments()
        .filter(|s| matches!(s.flags(), SegmentFlags::Elf { p_type, p_flags } if p_type.0 == 1 && p_flags.0 & 1 != 0))
        .map(|s| (s.address(), s.address().saturating_add(s.size())))
        .collect();
    let (symbols, mut coverage) =
        symbols_of(&tables(&f), exec, &path.display().to_string(), problems);
    let dwarf = match dwarf_of(&f) {
        Ok(d) => d,
        Err(message) => {
            problems.push(Error::Dwarf {
                path: path.to_path_buf(),
                message,
            });
            None
        }
    };
    if dwarf.is_some() {
        coverage = Coverage::Debug;
    }
    Some(Loaded {
        loads,
        symbols,
        dwarf,
        coverage,
    })
}

/// The DWARF reader of a file that has `.debug_info`.
fn dwarf_of<'a, R: object::ReadRef<'a>>(f: &object::File<'a, R>) -> Result<Option<Dwarf>, String> {
    let has_info = f
        .section_by_name(".debug_info")
        .is_some_and(|s| s.file_range().is_some_and(|(_, n)| n > 0));
    if !has_info {
        return Ok(None);
    }
    let endian = if f.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let load = |id: gimli::SectionId| -> Result<Arc<[u8]>, gimli::Error> {
        let data = f
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or(Cow::Borrowed(&[]));
        Ok(Arc::from(&*data))
    };
    let sections = gimli::DwarfSections::load(load).map_err(|e| e.to_string())?;
    let dwarf = sections.borrow(|s| gimli::EndianArcSlice::new(s.clone(), endian));
    addr2line::Context::from_dwarf(dwarf)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// The function names DWARF gives at `vaddr`, innermost first (empty strings where a frame
/// has no name).
pub(crate) fn dwarf_frames(ctx: &Dwarf, vaddr: u64) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(mut frames) = ctx.find_frames(vaddr).skip_all_loads() else {
        return out;
    };
    while let Ok(Some(f)) = frames.next() {
        let name = f
            .function
            .as_ref()
            .and_then(|n| n.raw_name().ok().map(|s| crate::demangle(s.as_ref())))
            .unwrap_or_default();
        out.push(name);
        if out.len() >= 64 {
            break;
        }
    }
    out
}

/// The system's debug files of a build id under each root: `ROOT/.build-id/xx/rest.debug`
/// and `ROOT/.build-id/xx/rest` (`/usr/lib/debug`: the debug file, and a link to the binary
/// whose segments map offsets), perf's `ROOT/.build-id/xx/rest/{elf,debug}` (`~/.debug`).
pub(crate) fn system_paths(roots: &[PathBuf], build_id: &[u8]) -> Vec<PathBuf> {
    let Some((head, rest)) = split(build_id) else {
        return Vec::new();
    };
    let mut v = Vec::new();
    for r in roots {
        let d = r.join(".build-id").join(&head);
        v.push(d.join(format!("{rest}.debug")));
        v.push(d.join(&rest));
        v.push(d.join(&rest).join("elf"));
        v.push(d.join(&rest).join("debug"));
    }
    v
}

/// A build id's `.build-id` directory and file name stem: `xx`, `rest`.
fn split(build_id: &[u8]) -> Option<(String, String)> {
    if build_id.len() < 2 {
        return None;
    }
    let hex = build_id_hex(build_id);
    Some((hex[..2].to_string(), hex[2..].to_string()))
}

/// Finds files by build id in the `--symbols` directories; each scanned at most once.
#[derive(Debug)]
pub(crate) struct Finder {
    scans: Vec<Option<HashMap<Vec<u8>, Vec<PathBuf>>>>,
}

impl Finder {
    pub(crate) fn new(dirs: &[PathBuf]) -> Finder {
        Finder {
            scans: dirs.iter().map(|_| None).collect(),
        }
    }

    /// Candidate files of `build_id` in the `n`th directory `dir`: the `.build-id` layouts
    /// that exist, else the files of its scan with that build id.
    pub(crate) fn in_dir(&mut self, n: usize, dir: &Path, build_id: &[u8]) -> Vec<PathBuf> {
        let Some((head, rest)) = split(build_id) else {
            return Vec::new();
        };
        let layout: Vec<PathBuf> = [dir.join(".build-id"), dir.to_path_buf()]
            .iter()
            .flat_map(|d| {
                let d = d.join(&head);
                [d.join(format!("{rest}.debug")), d.join(&rest)]
            })
            .filter(|p| p.is_file())
            .collect();
        if !layout.is_empty() {
            return layout;
        }
        let scan = self.scans[n].get_or_insert_with(|| scan(dir));
        scan.get(build_id).cloned().unwrap_or_default()
    }
}

/// The ELF files under `dir` by build id (symbolic links to files followed, to directories
/// not; bounded in depth and count).
fn scan(dir: &Path) -> HashMap<Vec<u8>, Vec<PathBuf>> {
    let mut found: HashMap<Vec<u8>, Vec<PathBuf>> = HashMap::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    let mut files = 0usize;
    while let Some((d, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
        entries.sort();
        for p in entries {
            let Ok(lmeta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if lmeta.is_dir() {
                if depth + 1 < MAX_SCAN_DEPTH {
                    stack.push((p, depth + 1));
                }
                continue;
            }
            if !p.is_file() {
                continue;
            }
            files += 1;
            if files > MAX_SCAN_FILES {
                return found;
            }
            if let Ok(Some(id)) = build_id_of(&p) {
                found.entry(id).or_default().push(p);
            }
        }
    }
    found
}
