//! Real ELF files built here with gcc (and rustc), symbolized from each source. A test
//! whose compiler or tool is missing says so and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

use ioblame_format::{build_id_hex, ElfSection, UserSymbols};
use object::{Object, ObjectSection, ObjectSymbol};

use crate::source::loads_of;
use crate::*;

const PROGRAM: &str = r#"
#include <fcntl.h>
#include <unistd.h>

__attribute__((noinline)) void wal_flush(int fd) {
    write(fd, "w", 1);
    fsync(fd);
}

__attribute__((noinline)) void checkpoint(int fd) {
    pwrite(fd, "c", 1, 4096);
    fdatasync(fd);
}

static __attribute__((noinline)) void compact_local(int fd) {
    char b[16];
    pread(fd, b, sizeof b, 0);
    write(fd, b, 4);
}

static inline __attribute__((always_inline)) int journal_append(int fd, int x) {
    int y = x * 3 + VARIANT;
    write(fd, &y, sizeof y);
    return y;
}

__attribute__((noinline)) int commit_txn(int fd, int x) {
    return journal_append(fd, x) + 1;
}

int main(int argc, char **argv) {
    int fd = open(argc > 1 ? argv[1] : "/dev/null", O_WRONLY);
    wal_flush(fd);
    checkpoint(fd);
    compact_local(fd);
    return commit_txn(fd, argc);
}
"#;

fn have(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("{tool} not found: test skipped");
    }
    ok
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The test program built with gcc and `flags` into `dir/name`; `None` without gcc.
fn gcc(dir: &Path, name: &str, flags: &[&str]) -> Option<PathBuf> {
    if !have("gcc") {
        return None;
    }
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, PROGRAM).unwrap();
    let out = dir.join(name);
    run(Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src));
    Some(out)
}

/// A symbol's address and size in an ELF file.
fn symbol(bin: &Path, name: &str) -> (u64, u64) {
    let data = std::fs::read(bin).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let s = f
        .symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("{name} not in {}", bin.display()));
    (s.address(), s.size())
}

/// The file offset of a virtual address, through the file's segments.
fn offset_of(bin: &Path, vaddr: u64) -> u64 {
    let data = std::fs::read(bin).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let l = loads_of(&f)
        .into_iter()
        .find(|l| l.vaddr <= vaddr && vaddr < l.vaddr + l.filesz)
        .unwrap();
    vaddr - l.vaddr + l.offset
}

/// A function's file offset, a few bytes into it.
fn func_offset(bin: &Path, name: &str) -> u64 {
    let (a, size) = symbol(bin, name);
    offset_of(bin, a + (size / 2).min(4))
}

fn build_id(bin: &Path) -> Vec<u8> {
    let data = std::fs::read(bin).unwrap();
    let f = object::File::parse(&*data).unwrap();
    f.build_id().unwrap().unwrap().to_vec()
}

/// What the recorder copies of a file: its PT_LOAD segments and the raw bytes of its
/// symbol tables, string tables and `.gnu_debugdata`.
fn user_symbols_of(bin: &Path) -> UserSymbols {
    let data = std::fs::read(bin).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let sections = [".symtab", ".strtab", ".dynsym", ".dynstr", ".gnu_debugdata"]
        .iter()
        .filter_map(|n| {
            let s = f.section_by_name(n)?;
            Some(ElfSection {
                name: n.to_string(),
                addr: s.address(),
                data: s.data().ok()?.to_vec(),
            })
        })
        .collect();
    UserSymbols {
        build_id: f.build_id().unwrap().unwrap().to_vec(),
        path: bin.display().to_string(),
        class64: f.is_64(),
        big_endian: !f.is_little_endian(),
        machine: u16::from_le_bytes([data[18], data[19]]),
        loads: loads_of(&f),
        sections,
    }
}

fn strip(bin: &Path, out: &Path) {
    run(Command::new("strip").arg("-o").arg(out).arg(bin));
}

fn names(f: &Frame) -> Vec<&str> {
    f.functions.iter().map(String::as_str).collect()
}

const FLAGS: &[&str] = &["-O1", "-g", "-fno-omit-frame-pointer", "-DVARIANT=1"];

#[test]
fn from_the_traces_tables() {
    let dir = tempfile::tempdir().unwrap();
    // Not PIE: file offsets and addresses differ, so the segment mapping is exercised.
    let Some(bin) = gcc(dir.path(), "app", &[FLAGS, &["-no-pie"]].concat()) else {
        return;
    };
    let us = user_symbols_of(&bin);
    let id = us.build_id.clone();
    let path = us.path.clone();
    let mut s = Symbolizer::new(vec![us], Options::default());
    for name in ["wal_flush", "checkpoint", "compact_local", "commit_txn"] {
        let off = func_offset(&bin, name);
        assert_ne!(off, symbol(&bin, name).0);
        let f = s.symbolize(&id, &path, off);
        assert_eq!(names(&f), [name]);
        assert_eq!(f.source, Source::Trace);
    }
    // Past every segment, and an unknown module: nothing.
    assert_eq!(s.symbolize(&id, &path, 1 << 40), Frame::default());
    assert_eq!(s.symbolize(&[1, 2, 3], "/x", 0x1000), Frame::default());
    let m = s.modules();
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].source, Source::Trace);
    assert_eq!(m[0].coverage, Coverage::Full);
    assert!(m[0].symbols >= 5, "{:?}", m[0]);
    assert!(m[0].problems.is_empty(), "{:?}", m[0].problems);
    assert_eq!(m[1].source, Source::None);
    assert_eq!(m[1].symbols, 0);
}

#[test]
fn from_a_symbols_dir_by_build_id() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = gcc(dir.path(), "app", FLAGS) else {
        return;
    };
    let id = build_id(&bin);
    let hex = build_id_hex(&id);
    let off = func_offset(&bin, "compact_local");
    // A `.build-id` tree holding a debug file (objcopy --only-keep-debug).
    let tree = dir.path().join("tree");
    let sub = tree.join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&sub).unwrap();
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&bin)
        .arg(sub.join(format!("{}.debug", &hex[2..]))));
    // A flat directory of binaries with other names, one of another build.
    let flat = dir.path().join("flat");
    std::fs::create_dir_all(flat.join("deeper")).unwrap();
    gcc(&flat, "other", &["-O1", "-DVARIANT=2"]).unwrap();
    std::fs::copy(&bin, flat.join("deeper").join("renamed")).unwrap();
    std::fs::write(flat.join("not-elf"), b"hello").unwrap();
    // The trace has only the stripped file's tables: the dir's file tells more.
    let stripped = dir.path().join("app.stripped");
    strip(&bin, &stripped);
    let with_binary = dir.path().join("with-binary");
    let sub2 = with_binary.join(&hex[..2]);
    std::fs::create_dir_all(&sub2).unwrap();
    std::fs::copy(
        sub.join(format!("{}.debug", &hex[2..])),
        sub2.join(format!("{}.debug", &hex[2..])),
    )
    .unwrap();
    std::fs::copy(&bin, sub2.join(&hex[2..])).unwrap();
    for (d, trace) in [(&tree, true), (&with_binary, false), (&flat, false)] {
        let t = if trace {
            vec![user_symbols_of(&stripped)]
        } else {
            vec![]
        };
        let mut s = Symbolizer::new(
            t,
            Options {
                dirs: vec![dir.path().join("missing"), d.clone()],
                ..Options::default()
            },
        );
        let f = s.symbolize(&id, "/gone/app", off);
        assert_eq!(names(&f), ["compact_local"], "{}", d.display());
        assert_eq!(f.source, Source::Dir);
        let m = &s.modules()[0];
        assert_eq!(m.coverage, Coverage::Debug);
        assert!(m.file.as_ref().unwrap().starts_with(d));
        assert!(m.problems.is_empty(), "{:?}", m.problems);
    }
    // A debug file alone: its segments do not map file offsets, and nothing else has them.
    let mut s = Symbolizer::new(
        vec![],
        Options {
            dirs: vec![tree.clone()],
            ..Options::default()
        },
    );
    assert_eq!(s.symbolize(&id, "/gone/app", off), Frame::default());
    let m = &s.modules()[0];
    assert!(
        matches!(&m.problems[..], [Error::NoSegments { .. }]),
        "{:?}",
        m.problems
    );
}

#[test]
fn system_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = gcc(dir.path(), "app", FLAGS) else {
        return;
    };
    let id = build_id(&bin);
    let hex = build_id_hex(&id);
    // perf's cache: ~/.debug/.build-id/xx/rest/elf.
    let perf = dir
        .path()
        .join("home/.debug/.build-id")
        .join(&hex[..2])
        .join(&hex[2..]);
    std::fs::create_dir_all(&perf).unwrap();
    std::fs::copy(&bin, perf.join("elf")).unwrap();
    let roots = vec![
        dir.path().join("usr-lib-debug"),
        dir.path().join("home/.debug"),
    ];
    let off = func_offset(&bin, "checkpoint");
    let opts = Options {
        system: true,
        ..Options::default()
    };
    let mut s = Symbolizer::with_system_roots(vec![], opts, roots.clone());
    let f = s.symbolize(&id, "/gone/app", off);
    assert_eq!(names(&f), ["checkpoint"]);
    assert_eq!(f.source, Source::System);
    // Not asked for: not looked at.
    let mut s = Symbolizer::with_system_roots(vec![], Options::default(), roots);
    assert_eq!(s.symbolize(&id, "/gone/app", off), Frame::default());
}

#[test]
fn local_file_only_with_its_build_id() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = gcc(dir.path(), "app", FLAGS) else {
        return;
    };
    let id = build_id(&bin);
    let path = bin.display().to_string();
    let off = func_offset(&bin, "wal_flush");
    let local = Options {
        local_files: true,
        ..Options::default()
    };
    let mut s = Symbolizer::new(vec![], local.clone());
    let f = s.symbolize(&id, &path, off);
    assert_eq!(names(&f), ["wal_flush"]);
    assert_eq!(f.source, Source::Local);
    assert_eq!(s.modules()[0].file.as_deref(), Some(bin.as_path()));
    // Not asked for.
    let mut s = Symbolizer::new(vec![], Options::default());
    assert_eq!(s.symbolize(&id, &path, off), Frame::default());
    // Rebuilt in place: another build id, so no name, and the reason said.
    gcc(
        dir.path(),
        "app",
        &["-O1", "-g", "-DVARIANT=2", "-fno-inline"],
    )
    .unwrap();
    assert_ne!(build_id(&bin), id);
    let mut s = Symbolizer::new(vec![], local);
    let f = s.symbolize(&id, &path, off);
    assert_eq!(f, Frame::default());
    let m = &s.modules()[0];
    assert_eq!(
        (m.source, m.coverage, m.symbols),
        (Source::None, Coverage::None, 0)
    );
    assert!(
        matches!(&m.problems[..], [Error::BuildIdMismatch { found, .. }] if *found == build_id_hex(&build_id(&bin))),
        "{:?}",
        m.problems
    );
}

#[test]
fn stripped_files_name_only_what_dynsym_has() {
    let dir = tempfile::tempdir().unwrap();
    // -rdynamic: the global functions are exported, so .dynsym has them.
    let Some(bin) = gcc(dir.path(), "app", &[FLAGS, &["-rdynamic"]].concat()) else {
        return;
    };
    let stripped = dir.path().join("app.stripped");
    strip(&bin, &stripped);
    let id = build_id(&bin);
    assert_eq!(build_id(&stripped), id);
    let path = stripped.display().to_string();
    let mut s = Symbolizer::new(
        vec![user_symbols_of(&stripped)],
        Options {
            local_files: true,
            ..Options::default()
        },
    );
    let f = s.symbolize(&id, &path, func_offset(&bin, "wal_flush"));
    assert_eq!(names(&f), ["wal_flush"]);
    assert_eq!(f.source, Source::Trace);
    // A static function is not in .dynsym: no name, rather than its neighbour's.
    let f = s.symbolize(&id, &path, func_offset(&bin, "compact_local"));
    assert_eq!(f, Frame::default());
    let m = &s.modules()[0];
    assert_eq!((m.source, m.coverage), (Source::Trace, Coverage::Dynamic));

    // Without -rdynamic .dynsym has imports only: no symbols at all.
    let Some(bin) = gcc(dir.path(), "plain", FLAGS) else {
        return;
    };
    strip(&bin, &stripped);
    let id = build_id(&bin);
    let mut s = Symbolizer::new(vec![user_symbols_of(&stripped)], Options::default());
    let f = s.symbolize(&id, &path, func_offset(&bin, "wal_flush"));
    assert_eq!(f, Frame::default());
    let m = &s.modules()[0];
    assert_eq!(
        (m.source, m.coverage, m.symbols),
        (Source::None, Coverage::None, 0)
    );
}

#[test]
fn gnu_debugdata() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = gcc(dir.path(), "app", FLAGS) else {
        return;
    };
    if !have("xz") || !have("objcopy") {
        return;
    }
    // As distributions make MiniDebugInfo: the symbol table of a debug file, xz-compressed,
    // added to the stripped binary.
    let d = dir.path();
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&bin)
        .arg(d.join("mini")));
    run(Command::new("objcopy")
        .args(["--strip-debug", "--remove-section=.comment"])
        .arg(d.join("mini")));
    run(Command::new("xz").arg("-k").arg(d.join("mini")));
    let stripped = d.join("app.stripped");
    strip(&bin, &stripped);
    let mut arg = std::ffi::OsString::from(".gnu_debugdata=");
    arg.push(d.join("mini.xz"));
    run(Command::new("objcopy")
        .arg("--add-section")
        .arg(arg)
        .arg(&stripped));
    let us = user_symbols_of(&stripped);
    assert!(us.sections.iter().any(|s| s.name == ".gnu_debugdata"));
    assert!(!us.sections.iter().any(|s| s.name == ".symtab"));
    let id = build_id(&bin);
    let mut s = Symbolizer::new(vec![us.clone()], Options::default());
    let f = s.symbolize(&id, "/app", func_offset(&bin, "compact_local"));
    assert_eq!(names(&f), ["compact_local"]);
    assert_eq!(s.modules()[0].coverage, Coverage::Full);
    // Damaged: reported, the rest still read.
    let mut bad = us;
    for x in &mut bad.sections {
        if x.name == ".gnu_debugdata" {
            let n = x.data.len();
            x.data[n / 2] ^= 0xff;
            x.data.truncate(n - 20);
        }
    }
    let mut s = Symbolizer::new(vec![bad], Options::default());
    assert_eq!(
        s.symbolize(&id, "/app", func_offset(&bin, "compact_local")),
        Frame::default()
    );
    let m = &s.modules()[0];
    assert!(
        matches!(&m.problems[..], [Error::DebugData { .. }]),
        "{:?}",
        m.problems
    );
}

#[test]
fn inlined_frames_from_dwarf() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = gcc(
        dir.path(),
        "app",
        &["-O2", "-g", "-fno-omit-frame-pointer", "-DVARIANT=1"],
    ) else {
        return;
    };
    let id = build_id(&bin);
    let path = bin.display().to_string();
    let (addr, size) = symbol(&bin, "commit_txn");
    let mut s = Symbolizer::new(
        vec![user_symbols_of(&bin)],
        Options {
            local_files: true,
            ..Options::default()
        },
    );
    let mut inlined = 0;
    for a in addr..addr + size {
        let f = s.symbolize(&id, &path, offset_of(&bin, a));
        assert_eq!(f.functions.last().map(String::as_str), Some("commit_txn"));
        assert_eq!(
            f.source,
            Source::Local,
            "DWARF beats the trace's symbol table"
        );
        if names(&f) == ["journal_append", "commit_txn"] {
            inlined += 1;
        }
    }
    assert!(
        inlined > 0,
        "no address of commit_txn is in the inlined journal_append"
    );
    assert_eq!(s.modules()[0].coverage, Coverage::Debug);
    // The trace alone: the function, without its inlined callee.
    let mut s = Symbolizer::new(vec![user_symbols_of(&bin)], Options::default());
    for a in addr..addr + size {
        let f = s.symbolize(&id, &path, offset_of(&bin, a));
        assert_eq!(names(&f), ["commit_txn"]);
    }
}

#[test]
fn rust_programs_demangled() {
    let dir = tempfile::tempdir().unwrap();
    if !have("rustc") {
        return;
    }
    let src = dir.path().join("demo.rs");
    std::fs::write(
        &src,
        "pub mod wal { #[inline(never)] pub fn flush(x: u64) -> u64 { std::hint::black_box(x) * 3 } }\n\
         fn main() { println!(\"{}\", wal::flush(std::env::args().count() as u64)); }\n",
    )
    .unwrap();
    for mangling in ["legacy", "v0"] {
        let bin = dir.path().join(format!("demo-{mangling}"));
        run(Command::new("rustc")
            .args(["-O", "-C", "force-frame-pointers=yes"])
            .args(if mangling == "v0" {
                &["-Csymbol-mangling-version=v0"][..]
            } else {
                &[]
            })
            .arg("-o")
            .arg(&bin)
            .arg(&src));
        let data = std::fs::read(&bin).unwrap();
        let f = object::File::parse(&*data).unwrap();
        let sym = f
            .symbols()
            .find(|s| s.name().is_ok_and(|n| n.contains("3wal5flush")))
            .unwrap();
        let off = offset_of(&bin, sym.address());
        let id = build_id(&bin);
        let mut s = Symbolizer::new(vec![user_symbols_of(&bin)], Options::default());
        let fr = s.symbolize(&id, "/demo", off);
        assert_eq!(names(&fr), ["demo::wal::flush"], "{mangling}");
    }
}

#[test]
fn demangling() {
    assert_eq!(
        demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
        "core::fmt::write"
    );
    assert_eq!(
        demangle("_RNvNtCs4Jz2Mtfmu5I_1v3wal5flush"),
        "v::wal::flush"
    );
    assert_eq!(demangle("_ZN5myapp3wal5flushEv"), "myapp::wal::flush()");
    assert_eq!(
        demangle("_ZN5myapp3wal5flushEv.cold"),
        "myapp::wal::flush() [clone .cold]"
    );
    assert_eq!(demangle("wal_flush"), "wal_flush");
    assert_eq!(demangle("_Z"), "_Z");
}

#[test]
fn offsets_become_addresses_through_segments() {
    use ioblame_format::ElfLoad;
    let loads = [
        ElfLoad {
            offset: 0,
            vaddr: 0x400000,
            filesz: 0x1000,
            flags: 4,
        },
        ElfLoad {
            offset: 0x1000,
            vaddr: 0x401000,
            filesz: 0x2000,
            flags: 5,
        },
    ];
    assert_eq!(to_vaddr(&loads, 0x10), Some(0x400010));
    assert_eq!(to_vaddr(&loads, 0x1234), Some(0x401234));
    assert_eq!(to_vaddr(&loads, 0x3000), None);
    let wrap = [ElfLoad {
        offset: 0,
        vaddr: u64::MAX,
        filesz: 16,
        flags: 5,
    }];
    assert_eq!(to_vaddr(&wrap, 4), None);
}

#[test]
fn symbolizer_is_send() {
    fn send<T: Send>() {}
    send::<Symbolizer>();
}
