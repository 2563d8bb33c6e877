//! Ground truth of user stacks unwound by call frame information (issue 43,
//! docs/attribution.md, "User frames"): `ioblame-capture record --user-stacks dwarf` copies
//! the top of each stack event's user stack, and the analysis unwinds it by the unwind tables
//! the trace keeps, so that
//!
//! - a program built `-O2 -fno-omit-frame-pointer` whose functions call `write`, `pwrite` and
//!   `fsync` directly (`tests/data/ustack/cfi.c`) has each function named with its exact
//!   bytes: a frame-pointer walk loses them, the C library's wrapper setting up no frame;
//! - the same program built `-O2 -fomit-frame-pointer`, with the two-level chain
//!   `store_page › flush_page › write`, has both levels named;
//! - Debian's `sqlite3` (its library built without frame pointers) writing a database has
//!   stacks that go through the library's `sqlite3_step` to the C runtime's entry;
//! - a JIT's code (anonymous memory, no unwind tables, its own frame pointer) that makes the
//!   system call is named from its perf map, and its caller after it.
//!
//! The programs are deleted before the analysis, which reads no local file
//! (`--no-local-symbols`): the trace alone. The same C program recorded with
//! `--user-stacks fp` is the contrast: its writers are not named. Needs root, loop devices,
//! tracefs, mkfs.ext4 and gcc (and sqlite3 for its part); skips otherwise, except in CI.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::checks::Checks;
use support::{LoopFs, Recorder};

const MIB: u64 = 1 << 20;

/// The acts of `trace` as `ioblame --no-local-symbols acts --json` gives them.
fn acts(trace: &Path) -> Vec<Value> {
    acts_with(trace, None)
}

/// [`acts`], with `--symbols DIR` when given.
fn acts_with(trace: &Path, symbols: Option<&Path>) -> Vec<Value> {
    let mut args: Vec<&std::ffi::OsStr> = vec!["--no-local-symbols".as_ref()];
    if let Some(d) = symbols {
        args.extend(["--symbols".as_ref(), d.as_os_str()]);
    }
    args.extend(["acts".as_ref(), "--json".as_ref(), trace.as_os_str()]);
    let o = support::ioblame(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The functions of an act's user frames, innermost first (`?` where none is named).
fn functions(a: &Value) -> Vec<String> {
    a["user_frames"]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|f| f["function"].as_str().unwrap_or("?").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Bytes written by the acts on files whose path ends with `file`, by their functions.
fn writes_of(acts: &[Value], file: &str) -> Vec<(Vec<String>, u64)> {
    acts.iter()
        .filter(|a| a["path"].as_str().is_some_and(|p| p.ends_with(file)))
        .map(|a| (functions(a), a["write_bytes"].as_u64().unwrap_or(0)))
        .filter(|(_, b)| *b > 0)
        .collect()
}

/// Whether `fns` has `a` then, further out, `b`, with nothing of the program between
/// (`a` calls `b`... innermost first: `b` called `a`).
fn called_from(fns: &[String], inner: &str, outer: &str) -> bool {
    let i = fns.iter().position(|f| f == inner);
    let o = fns.iter().position(|f| f == outer);
    matches!((i, o), (Some(i), Some(o)) if o == i + 1)
}

/// A recording of the C program, `build` being its name in `bin`.
fn record_c(fs: &LoopFs, bin: &Path, build: &str, name: &str, mode: &str) -> PathBuf {
    let script = format!("{build} wal $M && {build} ckpt $M && {build} page $M && sync");
    support::capture_with(fs, bin, name, &script, &["--user-stacks", mode])
}

/// What a CFI recording of the C program `build` must show; `acts` as the analysis gave
/// them (a perf.data recording has no paths: its acts are told apart by their frames).
fn check_c(recorder: Recorder, acts: &[Value], build: &str, ctx: &str) -> Checks {
    let mut check = Checks::new(recorder, "ext4", &format!("dwarf stacks {build}"));
    let paths = recorder == Recorder::Capture;
    let all: Vec<(Vec<String>, u64)> = acts
        .iter()
        .map(|a| (functions(a), a["write_bytes"].as_u64().unwrap_or(0)))
        .filter(|(_, b)| *b > 0)
        .collect();
    for (file, func, libc, bytes) in [
        ("wal.dat", "append_wal", "write", 4 * MIB),
        ("ckpt.dat", "write_checkpoint", "pwrite", 2 * MIB),
        ("page.dat", "flush_page", "write", MIB),
    ] {
        let w = if paths {
            writes_of(acts, file)
        } else {
            all.clone()
        };
        if paths {
            let total: u64 = w.iter().map(|(_, b)| b).sum();
            check.eq(&format!("bytes of {file}"), total, bytes, ctx);
        }
        let named: u64 = w
            .iter()
            .filter(|(f, _)| {
                f.first().is_some_and(|l| l.contains(libc))
                    && f.get(1).is_some_and(|c| c == func)
                    && f.iter().any(|x| x == "main")
            })
            .map(|(_, b)| b)
            .sum();
        check.eq(
            &format!("{file}'s bytes charged to {libc} called by {func}, from main"),
            named,
            bytes,
            &format!("{w:?}"),
        );
    }
    // Both levels of the chain without frame pointers.
    let page: Vec<(Vec<String>, u64)> = if paths {
        writes_of(acts, "page.dat")
    } else {
        all.iter()
            .filter(|(f, _)| f.iter().any(|x| x == "flush_page"))
            .cloned()
            .collect()
    };
    let both = page
        .iter()
        .all(|(f, _)| called_from(f, "flush_page", "store_page"));
    check.truth(
        "page.dat: flush_page called from store_page",
        both && !page.is_empty(),
        &format!("{page:?}"),
        "store_page › flush_page",
        ctx,
    );
    // fsync: its acts (what it dirtied and mapped, its share of the journal, which varies
    // with the transactions it joins) are the call in write_checkpoint.
    let fsync: Vec<Vec<String>> = acts
        .iter()
        .map(functions)
        .filter(|f| f.first().is_some_and(|l| l.contains("fsync")))
        .collect();
    check.truth(
        "fsync called from write_checkpoint",
        !fsync.is_empty()
            && fsync
                .iter()
                .all(|f| f.get(1).is_some_and(|c| c == "write_checkpoint")),
        &format!("{fsync:?}"),
        "fsync › write_checkpoint",
        ctx,
    );
    check
}

/// The C library `program` is linked with, as `ldd` finds it.
fn libc_of(program: &Path) -> PathBuf {
    let o = std::process::Command::new("ldd")
        .arg(program)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| {
            let (name, rest) = l.trim().split_once(" => ")?;
            name.starts_with("libc.so")
                .then(|| PathBuf::from(rest.split_whitespace().next().unwrap_or_default()))
        })
        .unwrap_or_else(|| panic!("no libc in ldd {}", program.display()))
}

#[test]
fn stacks_unwound_by_cfi_name_the_callers_of_the_c_library() {
    if !support::ready(&["mkfs.ext4", "sync", "gcc"]) {
        return;
    }
    let _g = support::lock();
    let bin = tempfile::tempdir().unwrap();
    support::build_workload(
        "cfi",
        &["-O2", "-fno-omit-frame-pointer"],
        &bin.path().join("cfi-fp"),
    );
    support::build_workload(
        "cfi",
        &["-O2", "-fomit-frame-pointer"],
        &bin.path().join("cfi-nofp"),
    );
    support::build_workload(
        "jit",
        &["-O1", "-fno-omit-frame-pointer"],
        &bin.path().join("jit"),
    );
    // A fresh filesystem each: fsync's own stack events (the block allocation it starts,
    // its journal handle) are those of a first write of its file.
    let fs: Vec<LoopFs> = (0..5).map(|_| LoopFs::new("ext4", 128)).collect();
    let fp_dwarf = record_c(&fs[0], bin.path(), "cfi-fp", "fp-dwarf", "dwarf");
    let nofp_dwarf = record_c(&fs[1], bin.path(), "cfi-nofp", "nofp-dwarf", "dwarf");
    let fp_walk = record_c(&fs[2], bin.path(), "cfi-fp", "fp-walk", "fp");
    let sqlite = support::ready(&["sqlite3"]).then(|| {
        let script = "sqlite3 $M/t.db 'create table t(x); with recursive c(i) as \
                      (select 1 union all select i+1 from c where i < 4000) \
                      insert into t select randomblob(1000) from c;' && sync";
        support::capture_with(
            &fs[3],
            bin.path(),
            "sqlite",
            script,
            &["--user-stacks", "dwarf"],
        )
    });
    let jit = support::capture_with(
        &fs[2],
        bin.path(),
        "jit",
        "jit $M/jit.dat 1024 && sync",
        &["--user-stacks", "dwarf"],
    );
    // Stock perf's DWARF mode (perf.data keeps no tables: a symbol store of the program and
    // the C library stands for the files, as --symbols DIR).
    let perf = support::ready(&["perf"]).then(|| {
        let script = "cfi-nofp wal $M && cfi-nofp ckpt $M && cfi-nofp page $M && sync";
        let opts = ["--user-stacks", "dwarf"];
        support::perf_record(&fs[4], bin.path(), "perf.data", script, &opts)
    });
    let store = tempfile::tempdir().unwrap();
    std::fs::copy(bin.path().join("cfi-nofp"), store.path().join("cfi-nofp")).unwrap();
    std::fs::copy(
        libc_of(&bin.path().join("cfi-nofp")),
        store.path().join("libc.so.6"),
    )
    .unwrap();
    // The trace alone: the programs are gone.
    let gone = bin.path().to_path_buf();
    drop(bin);
    assert!(!gone.exists());

    let mut checks = Vec::new();
    for (trace, build) in [(&fp_dwarf, "cfi-fp"), (&nofp_dwarf, "cfi-nofp")] {
        let ctx = trace.display().to_string();
        checks.push(check_c(Recorder::Capture, &acts(trace), build, &ctx));
    }
    if let Some(data) = &perf {
        let ctx = data.display().to_string();
        let acts = acts_with(data, Some(store.path()));
        checks.push(check_c(Recorder::Perf, &acts, "cfi-nofp", &ctx));
    }
    // The contrast: walked by frame pointers, the wrapper hides append_wal.
    let mut check = Checks::new(Recorder::Capture, "ext4", "fp stacks cfi-fp");
    let walk = acts(&fp_walk);
    let wal = writes_of(&walk, "wal.dat");
    check.truth(
        "wal.dat: append_wal not next to write",
        !wal.is_empty()
            && !wal
                .iter()
                .any(|(f, _)| f.get(1).is_some_and(|c| c == "append_wal")),
        &format!("{wal:?}"),
        "the caller hidden by the wrapper",
        "",
    );
    checks.push(check);
    // JIT code: no tables, its frame pointer kept; named by the perf map the trace copied.
    let mut check = Checks::new(Recorder::Capture, "ext4", "dwarf stacks jit");
    let jit_acts = acts(&jit);
    let w = writes_of(&jit_acts, "jit.dat");
    let named: u64 = w
        .iter()
        .filter(|(f, _)| {
            f.first().is_some_and(|l| l == "jit_wal_append [jit]")
                && f.get(1).is_some_and(|c| c == "run")
        })
        .map(|(_, b)| b)
        .sum();
    check.eq(
        "jit.dat's bytes charged to jit_wal_append [jit] called by run",
        named,
        MIB,
        &format!("{w:?}"),
    );
    checks.push(check);
    if let Some(trace) = &sqlite {
        let mut check = Checks::new(Recorder::Capture, "ext4", "dwarf stacks sqlite3");
        let acts = acts(trace);
        let db = writes_of(&acts, "t.db");
        let total: u64 = db.iter().map(|(_, b)| b).sum();
        // 4000 rows of 1000 bytes, with the b-tree's pages: nearly 4 MiB.
        check.truth(
            "t.db written",
            total >= 3 * MIB,
            &format!("{total} bytes"),
            "at least 3 MiB",
            "",
        );
        // Every stack of the writer (the metadata written back for the inode carries none)
        // goes from pwrite through the library's sqlite3_step; nearly all reach the C
        // runtime's entry (a stack deeper than the 8 KiB copy ends where the copy does).
        let stacked: Vec<&(Vec<String>, u64)> = db.iter().filter(|(f, _)| !f.is_empty()).collect();
        let bytes = |p: &dyn Fn(&[String]) -> bool| -> u64 {
            stacked.iter().filter(|(f, _)| p(f)).map(|(_, b)| b).sum()
        };
        let all = bytes(&|_| true);
        let step = bytes(&|f| {
            f.first().is_some_and(|l| l.contains("pwrite")) && f.iter().any(|x| x == "sqlite3_step")
        });
        let whole = bytes(&|f| {
            f.iter().any(|x| x == "sqlite3_step")
                && f.iter().any(|x| x.starts_with("__libc_start_main"))
        });
        check.truth(
            "t.db's bytes from pwrite through sqlite3_step",
            step == all,
            &format!("{step} of {all} bytes"),
            "all of those with user frames",
            &format!("{db:?}"),
        );
        check.truth(
            "t.db's bytes through sqlite3_step to the C runtime",
            whole >= 3 * MIB,
            &format!("{whole} of {all} bytes"),
            "at least 3 MiB",
            &format!("{db:?}"),
        );
        checks.push(check);
    }
    let failed = checks
        .into_iter()
        .filter_map(|c| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.finish())).err())
        .count();
    assert_eq!(
        failed, 0,
        "{failed} scenarios failed: see their messages above"
    );
}
