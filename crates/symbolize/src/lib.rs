//! User-space frames named on the analysing machine, by build id (issue 29).
//!
//! A recorded user frame is a module (its build id and its path on the recording host) and
//! an offset in that file. [`Symbolizer::symbolize`] turns the offset into the ELF file's
//! virtual address through the `PT_LOAD` segment holding it (`offset - p_offset + p_vaddr`)
//! and names the function there, with its inlined callees when DWARF has them. The
//! module's symbols come from the first of these sources that has the best of them
//! (DWARF, then a full `.symtab`, then `.dynsym` only), tried in this order:
//!
//! 1. [`Source::Trace`]: the tables the recorder copied into the trace
//!    ([`ioblame_format::UserSymbols`]: `.symtab`, `.dynsym`, `.gnu_debugdata`);
//! 2. [`Source::Dir`]: each `--symbols DIR` ([`Options::dirs`]), as a `.build-id` tree or
//!    as a directory of debug files and binaries matched by their build id;
//! 3. [`Source::System`]: `/usr/lib/debug/.build-id` and perf's cache `~/.debug/.build-id`
//!    ([`Options::system`]);
//! 4. [`Source::Local`]: the module's recorded path on this machine ([`Options::local_files`]).
//!
//! A file is used only if its build id is the module's: never a guess. Each module is read
//! once, when first asked for, into a sorted vector searched by address.
//!
//! # Crates: measured, then chosen
//!
//! A tiny program symbolizing one address of an ELF file, `cargo build --release` from
//! clean on this 2-CPU machine (rustc 1.95), binary size after `strip` (an empty program:
//! 343 KB):
//!
//! | | build | stripped binary | crates |
//! |---|---|---|---|
//! | `object` + `addr2line` + `gimli` + `rustc-demangle` + `cpp_demangle` + `lzma-rs` (zlib and zstd DWARF too) | 23.8 s | 1.27 MB | 20 |
//! | `blazesym` 0.2.7, default features (no xz, no zstd) | 36.4 s | 1.43 MB | 22 |
//! | `blazesym` 0.2.7 with `xz` and `zstd` (C liblzma and libzstd built by `cc`) | 57.0 s* | 1.60 MB | 27 |
//!
//! (*: built while another build ran; the other two rows were measured alone.) Crates:
//! `cargo tree -e normal`, the program itself included.
//!
//! `object` + `addr2line` is chosen: faster to build and smaller even with the xz decoder
//! that blazesym lacks by default (its `xz` feature builds the C liblzma), and, above all,
//! blazesym names addresses of files and processes but cannot read the trace's tables,
//! which are raw section bytes without a file around them: this crate parses those itself
//! (module `table`), so blazesym would have been a second ELF reader beside it.
//! `lzma-rust2` decodes `.gnu_debugdata`: pure Rust (no C library in the analyzer's build),
//! released often, with a memory limit for the dictionary; its output is bounded by
//! [`MAX_DEBUGDATA`]. (`lzma-rs` 0.3, measured in the table, was dropped: its xz footer
//! check overflows on fuzzed bytes, a panic where overflow checks are on.)
#![deny(missing_docs)]

mod perfmap;
mod source;
mod table;

pub use perfmap::{PerfMap, MAX_PERF_MAP_ENTRIES};
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use ioblame_format::{ElfLoad, UserSymbols};

use source::Loaded;

/// Most bytes `.gnu_debugdata` may decompress to (its symbol tables are a few MB at most).
pub const MAX_DEBUGDATA: usize = 256 << 20;

/// Most frames remembered per module; past it the memory of answers starts again.
const MAX_MEMO: usize = 1 << 20;

/// Where to look for symbols beyond the trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `--symbols DIR`, in order: each either a `.build-id/xx/rest[.debug]` tree (looked up
    /// as `DIR/.build-id/xx/rest.debug`, `DIR/.build-id/xx/rest`, `DIR/xx/rest.debug`,
    /// `DIR/xx/rest`) or a directory of debug files and binaries, matched by build id
    /// (read once, when a module is first not found in a tree layout).
    pub dirs: Vec<PathBuf>,
    /// Also this machine's debug files: `/usr/lib/debug/.build-id/xx/rest.debug` and perf's
    /// cache `$HOME/.debug/.build-id/xx/rest/{elf,debug}` (`/root` without `$HOME`).
    pub system: bool,
    /// Also the module's recorded path on this machine, only when its build id matches.
    pub local_files: bool,
}

/// Where a module's symbols came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Source {
    /// The tables the recorder copied into the trace.
    Trace,
    /// A file under one of [`Options::dirs`].
    Dir,
    /// A file of the system's debug directories ([`Options::system`]).
    System,
    /// The module's own path on this machine ([`Options::local_files`]).
    Local,
    /// Nowhere: no source had symbols for the module (or the frame named nothing).
    #[default]
    None,
}

/// How much a module's source could tell, from least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Coverage {
    /// No symbols.
    #[default]
    None,
    /// `.dynsym` only (a stripped file): exported functions, not static ones.
    Dynamic,
    /// A full symbol table (`.symtab`, or the one in `.gnu_debugdata`).
    Full,
    /// DWARF debug information (with inlined frames), besides the symbol table if any.
    Debug,
}

/// One user frame, named.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Frame {
    /// The function names at the address, innermost first (the order of a callchain):
    /// the deepest inlined callee first when DWARF has inlined frames, and last the function
    /// the address is in. Demangled (Rust legacy and v0 without the hash, C++). Empty when
    /// nothing names the address.
    pub functions: Vec<String>,
    /// Where the names came from; [`Source::None`] when `functions` is empty.
    pub source: Source,
}

/// A problem met while looking for or reading a module's symbols: reported, never fatal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// Bytes that should be an ELF file are not one (or are damaged).
    #[error("{what}: not a readable ELF file: {message}")]
    Elf {
        /// The file, or `.gnu_debugdata` of one.
        what: String,
        /// What the parser said.
        message: String,
    },
    /// A candidate file is another build: not used.
    #[error("{path}: build id {found}, not the module's")]
    BuildIdMismatch {
        /// The file.
        path: PathBuf,
        /// Its build id (hex; empty when it has none).
        found: String,
    },
    /// `.gnu_debugdata` could not be decompressed, or is larger than [`MAX_DEBUGDATA`].
    #[error(".gnu_debugdata of {what}: {message}")]
    DebugData {
        /// The trace's tables or the file.
        what: String,
        /// What went wrong.
        message: String,
    },
    /// DWARF debug information could not be read (symbols are still used).
    #[error("{path}: DWARF: {message}")]
    Dwarf {
        /// The file.
        path: PathBuf,
        /// What gimli said.
        message: String,
    },
    /// The symbols found are in a debug file, whose segments do not map file offsets, and
    /// no binary of the same build id was found to map them (the trace's, a `--symbols`
    /// directory's, the local file).
    #[error("{path}: a debug file without the segments of its binary")]
    NoSegments {
        /// The debug file.
        path: PathBuf,
    },
    /// Symbol table entries that could not be read (a name out of its string table, a
    /// table cut short): skipped.
    #[error("{count} damaged symbol table entries skipped")]
    DamagedEntries {
        /// How many.
        count: usize,
    },
}

/// What the analyzer can say about one module asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleStatus {
    /// The module's build id.
    pub build_id: Vec<u8>,
    /// Its path on the recording host (the first path it was asked for with).
    pub path: String,
    /// Where its symbols came from ([`Source::None`]: nowhere).
    pub source: Source,
    /// What that source holds.
    pub coverage: Coverage,
    /// The file used, for [`Source::Dir`], [`Source::System`] and [`Source::Local`].
    pub file: Option<PathBuf>,
    /// How many code symbols it has.
    pub symbols: usize,
    /// What went wrong on the way, in the order met (files of another build, damage).
    pub problems: Vec<Error>,
}

/// A module asked for, read once.
struct Module {
    build_id: Vec<u8>,
    path: String,
    source: Source,
    loaded: Loaded,
    file: Option<PathBuf>,
    problems: Vec<Error>,
    memo: HashMap<u64, Frame>,
}

impl Module {
    fn status(&self) -> ModuleStatus {
        ModuleStatus {
            build_id: self.build_id.clone(),
            path: self.path.clone(),
            source: self.source,
            coverage: self.loaded.coverage,
            file: self.file.clone(),
            symbols: self.loaded.symbols.len(),
            problems: self.problems.clone(),
        }
    }

    fn frame(&self, file_offset: u64) -> Frame {
        let Some(vaddr) = to_vaddr(&self.loaded.loads, file_offset) else {
            return Frame::default();
        };
        let mut functions = Vec::new();
        if let Some(ctx) = &self.loaded.dwarf {
            functions = source::dwarf_frames(ctx, vaddr);
        }
        let symbol = self.loaded.symbols.lookup(vaddr).map(demangle);
        match (functions.last(), symbol) {
            (None, Some(s)) => functions.push(s),
            // DWARF knew the place but not the outer function's name.
            (Some(last), Some(s)) if last.is_empty() => *functions.last_mut().unwrap() = s,
            _ => {}
        }
        functions.retain(|f| !f.is_empty());
        if functions.is_empty() {
            return Frame::default();
        }
        Frame {
            functions,
            source: self.source,
        }
    }
}

/// The system's debug roots: `/usr/lib/debug` and perf's `$HOME/.debug` (`/root` without
/// `$HOME`).
fn system_roots() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    vec![PathBuf::from("/usr/lib/debug"), home.join(".debug")]
}

/// The files that may be the module (`build_id`, recorded `path`) where `opts` says to
/// look, in order: the `--symbols` directories, the system's debug files, the local file.
/// Those that exist; each is used only if its build id matches.
fn candidates(
    opts: &Options,
    finder: &mut source::Finder,
    system_roots: &[PathBuf],
    build_id: &[u8],
    path: &str,
) -> Vec<(Source, PathBuf)> {
    let mut v: Vec<(Source, PathBuf)> = Vec::new();
    for (n, dir) in opts.dirs.iter().enumerate() {
        for p in finder.in_dir(n, dir, build_id) {
            v.push((Source::Dir, p));
        }
    }
    if opts.system {
        for p in source::system_paths(system_roots, build_id) {
            v.push((Source::System, p));
        }
    }
    if opts.local_files && !path.is_empty() {
        v.push((Source::Local, PathBuf::from(path)));
    }
    v.retain(|(_, p)| p.is_file());
    v
}

/// Finds the unwind tables of modules a recording lacks (perf.data with `--call-graph
/// dwarf`) where symbols are looked for; the `--symbols` directories are scanned once.
#[derive(Debug)]
pub struct UnwindSource {
    opts: Options,
    finder: source::Finder,
    system_roots: Vec<PathBuf>,
}

impl UnwindSource {
    /// A source looking where `opts` says.
    pub fn new(opts: Options) -> UnwindSource {
        UnwindSource {
            finder: source::Finder::new(&opts.dirs),
            opts,
            system_roots: system_roots(),
        }
    }

    /// The unwind tables of the module (`build_id`, recorded `path`): the `.eh_frame`,
    /// `.eh_frame_hdr` and `.debug_frame` sections, with their addresses, and the `PT_LOAD`
    /// segments of the first file (as for symbols) whose build id matches and which has them.
    pub fn tables(&mut self, build_id: &[u8], path: &str) -> Option<UserSymbols> {
        if build_id.is_empty() {
            return None;
        }
        let roots = &self.system_roots;
        candidates(&self.opts, &mut self.finder, roots, build_id, path)
            .into_iter()
            .find_map(|(_, p)| source::unwind_of(&p, build_id))
    }
}

/// The virtual address of `file_offset`, through the `PT_LOAD` segment holding it (an
/// executable one when several do).
pub fn to_vaddr(loads: &[ElfLoad], file_offset: u64) -> Option<u64> {
    let holds = |l: &&ElfLoad| file_offset >= l.offset && file_offset - l.offset < l.filesz;
    let l = loads
        .iter()
        .filter(holds)
        .find(|l| l.flags & 1 != 0)
        .or_else(|| loads.iter().find(holds))?;
    (file_offset - l.offset).checked_add(l.vaddr)
}

/// A symbol name demangled: Rust (legacy, without its `::h0123…` hash, and v0), then C++
/// (Itanium); any other name as it is.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    // cpp_demangle is recursive: leave very long names as they are.
    if name.starts_with("_Z") && name.len() <= 4096 {
        if let Ok(s) = cpp_demangle::Symbol::new(name) {
            if let Ok(d) = s.demangle() {
                return d;
            }
        }
    }
    name.to_string()
}

/// The key of a module: its build id, or its path when it has none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Id(Vec<u8>),
    Path(String),
}

fn key(build_id: &[u8], path: &str) -> Key {
    if build_id.is_empty() {
        Key::Path(path.to_string())
    } else {
        Key::Id(build_id.to_vec())
    }
}

/// Names user frames; see the [crate] documentation.
pub struct Symbolizer {
    trace: HashMap<Key, Arc<UserSymbols>>,
    opts: Options,
    system_roots: Vec<PathBuf>,
    finder: source::Finder,
    modules: Vec<Module>,
    index: HashMap<Key, usize>,
}

impl Symbolizer {
    /// A symbolizer over the trace's symbol tables (`Trace::user_symbols`), looking also
    /// where `opts` says. Nothing is read until a module is first asked for.
    pub fn new(trace_symbols: Vec<UserSymbols>, opts: Options) -> Symbolizer {
        Symbolizer::with_system_roots(trace_symbols, opts, system_roots())
    }

    /// As [`Symbolizer::new`], with the system's debug roots named (tests).
    pub(crate) fn with_system_roots(
        trace_symbols: Vec<UserSymbols>,
        opts: Options,
        system_roots: Vec<PathBuf>,
    ) -> Symbolizer {
        let mut trace = HashMap::new();
        for s in trace_symbols {
            // The first table of a build id wins (a trace repeats them across files).
            trace
                .entry(key(&s.build_id, &s.path))
                .or_insert_with(|| Arc::new(s));
        }
        let finder = source::Finder::new(&opts.dirs);
        Symbolizer {
            trace,
            opts,
            system_roots,
            finder,
            modules: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// Names the frame at `file_offset` of the module (`build_id`, recorded `path`). For a
    /// return address (every frame but the innermost), pass its offset minus one, so that
    /// the call instruction is named rather than what follows it.
    pub fn symbolize(&mut self, build_id: &[u8], path: &str, file_offset: u64) -> Frame {
        let k = key(build_id, path);
        let i = match self.index.get(&k) {
            Some(&i) => i,
            None => {
                let m = self.load(build_id, path, &k);
                self.modules.push(m);
                self.index.insert(k, self.modules.len() - 1);
                self.modules.len() - 1
            }
        };
        let m = &mut self.modules[i];
        if let Some(f) = m.memo.get(&file_offset) {
            return f.clone();
        }
        let f = m.frame(file_offset);
        if m.memo.len() >= MAX_MEMO {
            m.memo.clear();
        }
        m.memo.insert(file_offset, f.clone());
        f
    }

    /// Every module asked for so far, in the order first asked: where its symbols came
    /// from and how many, so that an analysis can say once which modules had none.
    pub fn modules(&self) -> Vec<ModuleStatus> {
        self.modules.iter().map(Module::status).collect()
    }

    /// Reads a module from its best source.
    fn load(&mut self, build_id: &[u8], path: &str, k: &Key) -> Module {
        let mut problems = Vec::new();
        let mut best: Option<(Source, Option<PathBuf>, Loaded)> = None;
        // A later source replaces an earlier one only if it tells more.
        fn consider(
            best: &mut Option<(Source, Option<PathBuf>, Loaded)>,
            source: Source,
            file: Option<PathBuf>,
            l: Loaded,
        ) {
            if l.coverage > best.as_ref().map_or(Coverage::None, |b| b.2.coverage) {
                *best = Some((source, file, l));
            }
        }
        let trace_loads = self.trace.get(k).map(|t| t.loads.clone());
        if let Some(t) = self.trace.get(k) {
            consider(
                &mut best,
                Source::Trace,
                None,
                source::from_trace(t, &mut problems),
            );
        }
        let done = |b: &Option<(Source, Option<PathBuf>, Loaded)>| {
            b.as_ref().is_some_and(|b| b.2.coverage == Coverage::Debug)
        };
        if !build_id.is_empty() {
            let candidates = candidates(
                &self.opts,
                &mut self.finder,
                &self.system_roots,
                build_id,
                path,
            );
            for (source, p) in &candidates {
                if done(&best) {
                    break;
                }
                if let Some(l) =
                    source::from_file(p, build_id, trace_loads.as_deref(), &mut problems)
                {
                    consider(&mut best, *source, Some(p.clone()), l);
                }
            }
            // A debug file's segments do not map offsets: a binary of the build id does.
            if let Some((_, file, l)) = &mut best {
                if !source::maps_offsets(&l.loads) {
                    match candidates
                        .iter()
                        .find_map(|(_, p)| source::file_loads(p, build_id))
                    {
                        Some(loads) => l.loads = loads,
                        None => problems.push(Error::NoSegments {
                            path: file.clone().unwrap_or_default(),
                        }),
                    }
                }
            }
        }
        let (source, file, loaded) =
            best.unwrap_or((Source::None, None, Loaded::empty(trace_loads.as_deref())));
        if loaded.symbols.damaged > 0 {
            problems.push(Error::DamagedEntries {
                count: loaded.symbols.damaged,
            });
        }
        Module {
            build_id: build_id.to_vec(),
            path: path.to_string(),
            source,
            loaded,
            file,
            problems,
            memo: HashMap::new(),
        }
    }
}
