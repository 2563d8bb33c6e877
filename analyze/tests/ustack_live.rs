//! Ground truth of user-space stacks (issue 29, docs/attribution.md, "User frames"): a C
//! program and a Rust program built with frame pointers (`analyze/tests/data/ustack/`), whose
//! differently named functions write a file (buffered, then written back by `sync`, another
//! task), write and fsync another, and read that one back, are recorded with `ioblame-capture
//! record --user-stacks` on a fresh ext4 and a fresh xfs. Every binary is then deleted from
//! disk, and `ioblame --no-local-symbols acts --json` must name each act's intent after the
//! function that did it (`wal_append`, `checkpoint`, `scan_table`), from the trace alone.
//!
//! The same programs are also recorded by stock `perf record`, with the line `ioblame
//! perf-command --user-stacks` prints, on both filesystems: perf.data carries the build ids
//! but no symbol tables, so, the binaries deleted, `--symbols DIR` holding copies of them (as
//! a symbol store would, matched by build id) must give the same names and bytes.
//!
//! Two builds of the C program show the honest edges: one without frame pointers (its stacks
//! are cut short, and a note says so) and a stripped one (its frames show as
//! `iowork-stripped+0x...`, a note names it as without symbols, and `--symbols DIR` with the
//! unstripped file of the same build id names them again). Neither may name an act after
//! another phase's function.
//!
//! All programs are built once, every recording is made, the binaries are deleted, and then
//! the traces are analysed; each scenario's expectations are [`Checks`], all reported at the
//! end. Needs root, loop devices, tracefs, mkfs.ext4, mkfs.xfs, gcc, strip, readelf and rustc
//! (and perf for its recordings); skips otherwise, except in CI.

mod support;

use std::os::unix::fs::MetadataExt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::checks::Checks;
use support::common::readelf_build_id;
use support::{sh, LoopFs, Recorder};

const MIB: u64 = 1 << 20;

/// The separator of an intent name's parts.
const SEP: &str = " › ";

/// The workload's sources.
const SOURCES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ustack");

/// A phase of the workload: one process running `P wal|ckpt|scan`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// `wal_append`: a buffered write of wal.dat, written back by `sync`.
    Wal,
    /// `checkpoint`: a write of ckpt.dat and its fsync.
    Ckpt,
    /// `scan_table`: ckpt.dat dropped from the page cache and read.
    Scan,
}

const PHASES: [Phase; 3] = [Phase::Wal, Phase::Ckpt, Phase::Scan];

/// A language's functions of each phase.
struct Functions {
    /// The function of each phase, as the symbolizer names it (demangled, for Rust).
    own: [&'static str; 3],
    /// The program's helpers (C's static functions) and which phases call them.
    helpers: &'static [(&'static str, &'static [Phase])],
}

const C: Functions = Functions {
    own: ["wal_append", "checkpoint", "scan_table"],
    helpers: &[
        ("write_all", &[Phase::Wal, Phase::Ckpt]),
        ("sync_fd", &[Phase::Ckpt]),
        ("read_all", &[Phase::Scan]),
    ],
};

const RUST: Functions = Functions {
    own: [
        "iowork::wal_append",
        "iowork::checkpoint",
        "iowork::scan_table",
    ],
    helpers: &[],
};

impl Functions {
    fn of(&self, p: Phase) -> &'static str {
        self.own[p as usize]
    }

    /// The program's functions a stack of phase `p` cannot hold: the other phases' and the
    /// helpers only they call.
    fn foreign(&self, p: Phase) -> Vec<&'static str> {
        let mut v: Vec<&str> = PHASES
            .iter()
            .filter(|&&q| q != p)
            .map(|&q| self.of(q))
            .collect();
        v.extend(
            self.helpers
                .iter()
                .filter(|(_, by)| !by.contains(&p))
                .map(|(f, _)| *f),
        );
        v
    }

    /// Every function of the program.
    fn all(&self) -> Vec<&'static str> {
        let mut v = self.own.to_vec();
        v.extend(self.helpers.iter().map(|(f, _)| *f));
        v
    }
}

/// Whether a symbol is `f` (or a clone of it the compiler made: `f.constprop.0`, `f.isra.0`).
fn is_fn(name: &str, f: &str) -> bool {
    name == f || name.strip_prefix(f).is_some_and(|r| r.starts_with('.'))
}

/// The workload's builds, made once in a temporary directory.
struct Builds {
    dir: tempfile::TempDir,
}

impl Builds {
    /// `iowork-c` (C, frame pointers), `iowork-rs` (Rust, frame pointers), `iowork-nofp`
    /// (C, `-O2 -fomit-frame-pointer`) and `iowork-stripped` (`iowork-c`, stripped: the same
    /// build id, as `strip` keeps the note).
    fn new() -> Builds {
        let dir = tempfile::Builder::new()
            .prefix("iob-ustack-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let d = dir.path();
        let run = |cmd: &mut Command| {
            let o = cmd.output().unwrap();
            assert!(
                o.status.success(),
                "{cmd:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        support::build_workload(
            "iowork",
            &["-O1", "-g", "-fno-omit-frame-pointer"],
            &d.join("iowork-c"),
        );
        support::build_workload(
            "iowork",
            &["-O2", "-fomit-frame-pointer"],
            &d.join("iowork-nofp"),
        );
        std::fs::copy(d.join("iowork-c"), d.join("iowork-stripped")).unwrap();
        run(Command::new("strip").arg(d.join("iowork-stripped")));
        run(Command::new("rustc")
            .args([
                "-C",
                "force-frame-pointers=yes",
                "-C",
                "opt-level=1",
                "-g",
                "--edition",
                "2021",
                "-o",
            ])
            .arg(d.join("iowork-rs"))
            .arg(format!("{SOURCES}/iowork.rs")));
        Builds { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// One recording: a program's three phases in `$M/DIR`.
struct Recording {
    recorder: Recorder,
    fs: &'static str,
    /// The program's name (its comm, and its module's file name).
    prog: &'static str,
    trace: PathBuf,
    /// The inodes of the workload's files, wal.dat and ckpt.dat (perf.data names no paths).
    wal: u64,
    ckpt: u64,
    /// The program's build id, read before it was deleted.
    build_id: String,
}

/// Records, with `recorder`, `prog` (copied from `builds` into the filesystem's own bin
/// directory, so the module the trace names is that copy) running its three phases, whose
/// files are in `$M/{prog}/` (`$M/{prog}-perf/` with perf).
fn record(
    recorder: Recorder,
    fs: &LoopFs,
    fstype: &'static str,
    builds: &Builds,
    prog: &'static str,
) -> Recording {
    let bin = fs.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    if !bin.join(prog).exists() {
        std::fs::copy(builds.path(prog), bin.join(prog)).unwrap();
    }
    let build_id = readelf_build_id(&bin.join(prog));
    let dir = match recorder {
        Recorder::Capture => prog.to_string(),
        Recorder::Perf => format!("{prog}-perf"),
    };
    sh(&format!("mkdir {}/{dir}", fs.mnt.display()));
    // New files (no truncation of an existing one, so neither ext4's auto_da_alloc nor xfs
    // flushes wal.dat at close): wal.dat stays dirty until `sync` writes it back. `sync -f`
    // (syncfs) writes this filesystem only, with the same writeback reason as sync(2).
    let script = format!(
        "set -e
         {prog} wal $M/{dir}/wal.dat 4096
         {prog} ckpt $M/{dir}/ckpt.dat 2048
         sync -f $M
         {prog} scan $M/{dir}/ckpt.dat"
    );
    let trace = match recorder {
        Recorder::Capture => support::capture_with(
            fs,
            &bin,
            &format!("trace-{dir}"),
            &script,
            &["--user-stacks"],
        ),
        Recorder::Perf => support::perf_record_edited(
            fs,
            &bin,
            &format!("{dir}.data"),
            &script,
            &["--user-stacks"],
            str::to_string,
        ),
    };
    let ino = |f: &str| std::fs::metadata(fs.mnt.join(&dir).join(f)).unwrap().ino();
    Recording {
        recorder,
        fs: fstype,
        prog,
        trace,
        wal: ino("wal.dat"),
        ckpt: ino("ckpt.dat"),
        build_id,
    }
}

/// `ioblame [global...] acts --json TRACE`: its acts and its stderr.
fn analyze(trace: &Path, global: &[&std::ffi::OsStr]) -> (Vec<Value>, String) {
    let mut args: Vec<&std::ffi::OsStr> = global.to_vec();
    args.extend(["acts".as_ref(), "--json".as_ref(), trace.as_os_str()]);
    let o = support::ioblame(&args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "ioblame {args:?}: {err}");
    let acts = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (acts, err)
}

/// The line of `err` holding `what` (a note), or "".
fn note<'a>(err: &'a str, what: &str) -> &'a str {
    err.lines().find(|l| l.contains(what)).unwrap_or("")
}

const UNNAMED_NOTE: &str = "user frames nothing could name";
const SHORT_NOTE: &str = "user stacks were cut short";

fn bytes(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

fn frames(v: &Value) -> &[Value] {
    v["user_frames"].as_array().map_or(&[], Vec::as_slice)
}

/// A frame's function and the functions it is inlined into.
fn frame_functions(f: &Value) -> Vec<&str> {
    let mut v: Vec<&str> = f["function"].as_str().into_iter().collect();
    if let Some(outer) = f["inlined_into"].as_array() {
        v.extend(outer.iter().filter_map(Value::as_str));
    }
    v
}

/// The acts of one phase: the data acts (via page or buffer) writing wal.dat, the data acts
/// writing ckpt.dat, or the reads (readahead or read) of ckpt.dat.
fn phase_acts<'a>(acts: &'a [Value], r: &Recording, p: Phase) -> Vec<&'a Value> {
    let (ino, vias): (u64, &[&str]) = match p {
        Phase::Wal => (r.wal, &["page", "buffer"]),
        Phase::Ckpt => (r.ckpt, &["page", "buffer"]),
        Phase::Scan => (r.ckpt, &["readahead", "read"]),
    };
    acts.iter()
        .filter(|v| v["ino"] == ino && vias.contains(&v["via"].as_str().unwrap_or("")))
        .collect()
}

/// The bytes of a phase: written for wal and ckpt, read for scan.
fn phase_bytes(acts: &[&Value], p: Phase) -> u64 {
    let key = if p == Phase::Scan {
        "read_bytes"
    } else {
        "write_bytes"
    };
    acts.iter().map(|v| bytes(v, key)).sum()
}

/// What each act shows, for a failure's report.
fn context(acts: &[Value], err: &str) -> String {
    let lines: Vec<String> = acts
        .iter()
        .map(|v| {
            let labels: Vec<&str> = frames(v)
                .iter()
                .filter_map(|f| f["label"].as_str())
                .collect();
            format!(
                "{} {} {} {} r={} w={} reason={}: {} [{}]",
                v["pid"],
                v["comm"],
                v["path"],
                v["via"],
                bytes(v, "read_bytes"),
                bytes(v, "write_bytes"),
                v["reason"],
                v["intent_name"],
                labels.join(", ")
            )
        })
        .collect();
    format!("acts:\n{}\nstderr:\n{err}", lines.join("\n"))
}

/// The bytes of each phase, where the workload put them: wal.dat's 4 MiB written back by
/// `sync` (another task, writeback reason sync), ckpt.dat's 2 MiB written by the
/// checkpoint's own fsync (no writeback reason), and its 2 MiB read back by the scan.
fn check_bytes(check: &mut Checks, acts: &[Value], r: &Recording) {
    for (p, want) in [
        (Phase::Wal, 4 * MIB),
        (Phase::Ckpt, 2 * MIB),
        (Phase::Scan, 2 * MIB),
    ] {
        let these = phase_acts(acts, r, p);
        check.eq(
            &format!("{p:?}: the phase's bytes"),
            phase_bytes(&these, p),
            want,
            "",
        );
        let comms: Vec<&str> = these.iter().filter_map(|v| v["comm"].as_str()).collect();
        check.truth(
            &format!("{p:?}: charged to the program"),
            !comms.is_empty() && comms.iter().all(|c| *c == r.prog),
            &format!("{comms:?}"),
            r.prog,
            "",
        );
    }
    let reasons = |p: Phase| -> Vec<Value> {
        phase_acts(acts, r, p)
            .iter()
            .map(|v| v["reason"].clone())
            .collect()
    };
    let wal = reasons(Phase::Wal);
    check.truth(
        "Wal: written back by sync",
        !wal.is_empty() && wal.iter().all(|x| x == "sync"),
        &format!("{wal:?}"),
        "\"sync\"",
        "",
    );
    let ckpt = reasons(Phase::Ckpt);
    check.truth(
        "Ckpt: written by its own fsync",
        !ckpt.is_empty() && ckpt.iter().all(Value::is_null),
        &format!("{ckpt:?}"),
        "null",
        "",
    );
}

/// The phase each of the program's processes ran, known by the files its data acts touch.
fn phase_of_pids(acts: &[Value], r: &Recording) -> Vec<(u64, Phase)> {
    let mut v = Vec::new();
    for p in PHASES {
        for a in phase_acts(acts, r, p) {
            if let Some(pid) = a["pid"].as_u64() {
                if !v.contains(&(pid, p)) {
                    v.push((pid, p));
                }
            }
        }
    }
    v
}

/// Nothing mislabelled: no act of the program, data or metadata, names (in its intent's
/// lead or in any user frame) a function of another phase than the one its process ran.
fn check_no_foreign(check: &mut Checks, acts: &[Value], r: &Recording, fns: &Functions) {
    let pids = phase_of_pids(acts, r);
    let mut wrong = Vec::new();
    for a in acts.iter().filter(|v| v["comm"] == r.prog) {
        let pid = a["pid"].as_u64().unwrap_or(0);
        let phases: Vec<Phase> = pids
            .iter()
            .filter(|(q, _)| *q == pid)
            .map(|(_, p)| *p)
            .collect();
        let name = a["intent_name"].as_str().unwrap_or("");
        let [p] = phases[..] else {
            wrong.push(format!("pid {pid} ran phases {phases:?}: {name}"));
            continue;
        };
        let lead = name.split(SEP).next().unwrap_or("");
        let foreign = fns.foreign(p);
        let named: Vec<&str> = frames(a).iter().flat_map(frame_functions).collect();
        if let Some(f) = foreign
            .iter()
            .find(|f| is_fn(lead, f) || named.iter().any(|n| is_fn(n, f)))
        {
            wrong.push(format!("{p:?} (pid {pid}) names {f}: {name} {named:?}"));
        }
    }
    check.truth(
        "no act names another phase's function",
        wrong.is_empty(),
        &format!("{wrong:?}"),
        "[]",
        "",
    );
}

/// Each phase's acts are named after its function, which their user frames hold in the
/// program's module (the copy the trace names, deleted since, with the build id the file
/// had).
fn check_named(check: &mut Checks, acts: &[Value], r: &Recording, fns: &Functions) {
    let module_suffix = format!("/{}", r.prog);
    for p in PHASES {
        let f = fns.of(p);
        let these = phase_acts(acts, r, p);
        let names: Vec<&str> = these
            .iter()
            .filter_map(|v| v["intent_name"].as_str())
            .collect();
        check.truth(
            &format!("{p:?}: the intents lead with {f}"),
            !names.is_empty() && names.iter().all(|n| n.starts_with(&format!("{f}{SEP}"))),
            &format!("{names:?}"),
            &format!("{f}{SEP}..."),
            "",
        );
        let missing: Vec<String> = these
            .iter()
            .filter(|v| {
                !frames(v).iter().any(|fr| {
                    fr["function"].as_str() == Some(f)
                        && fr["module"]
                            .as_str()
                            .is_some_and(|m| m.ends_with(&module_suffix))
                        && fr["build_id"] == r.build_id.as_str()
                })
            })
            .map(|v| v["intent_name"].to_string())
            .collect();
        check.truth(
            &format!(
                "{p:?}: the user frames hold {f} in {} ({})",
                r.prog, r.build_id
            ),
            !these.is_empty() && missing.is_empty(),
            &format!("without it: {missing:?}"),
            "every act",
            "",
        );
    }
}

/// The notes of a build with frame pointers and symbols: none names the program as without
/// symbols, or its stacks as cut short.
fn check_whole(check: &mut Checks, err: &str, r: &Recording) {
    let unnamed = note(err, UNNAMED_NOTE);
    check.truth(
        "the program's frames are all named",
        !unnamed.contains(&format!("/{} (", r.prog)),
        unnamed,
        &format!("no note naming {}", r.prog),
        "",
    );
    let short = note(err, SHORT_NOTE);
    check.truth(
        "the program's stacks are whole",
        !short.contains(&format!("{} (", r.prog)),
        short,
        &format!("no note naming {}", r.prog),
        "",
    );
}

/// A build with frame pointers (C or Rust): from the trace alone, or from perf.data and
/// `symbols`, a directory holding copies of the deleted binaries.
fn check_fp(r: &Recording, fns: &Functions, lang: &str, symbols: &Path) -> Checks {
    let mut check = Checks::new(r.recorder, r.fs, &format!("user-stacks {lang}"));
    let store: Vec<&std::ffi::OsStr> = match r.recorder {
        Recorder::Capture => vec![],
        Recorder::Perf => vec!["--symbols".as_ref(), symbols.as_os_str()],
    };
    let mut only = store.clone();
    only.push("--no-local-symbols".as_ref());
    let (acts, err) = analyze(&r.trace, &only);
    check.context(context(&acts, &err));
    check_bytes(&mut check, &acts, r);
    check_named(&mut check, &acts, r, fns);
    check_no_foreign(&mut check, &acts, r, fns);
    check_whole(&mut check, &err, r);
    // The default lookup (the system's debug files, the recorded path, deleted) gives the
    // same names.
    let (local, _) = analyze(&r.trace, &store);
    let names = |acts: &[Value]| -> Vec<String> {
        PHASES
            .iter()
            .flat_map(|&p| phase_acts(acts, r, p))
            .map(|v| v["intent_name"].to_string())
            .collect()
    };
    check.eq(
        "the same names without --no-local-symbols",
        names(&local).join("\n"),
        names(&acts).join("\n"),
        "",
    );
    check
}

/// The build without frame pointers: the attribution's bytes are the same, a note says the
/// stacks were cut short, and nothing names another phase's function (an intent named after
/// none of the phases' functions, `write › write(2) › ...`, is honest).
fn check_nofp(r: &Recording) -> Checks {
    let mut check = Checks::new(
        Recorder::Capture,
        r.fs,
        "user-stacks without frame pointers",
    );
    let (acts, err) = analyze(&r.trace, &["--no-local-symbols".as_ref()]);
    check.context(context(&acts, &err));
    check_bytes(&mut check, &acts, r);
    check_no_foreign(&mut check, &acts, r, &C);
    let short = note(&err, SHORT_NOTE);
    check.truth(
        "a note says the stacks were cut short",
        !short.is_empty(),
        short,
        SHORT_NOTE,
        "",
    );
    check
}

/// The stripped build: without symbols, its frames show as `iowork-stripped+0x...`, the
/// note names it with its build id, and no frame or intent names any of its functions; with
/// `--symbols DIR` holding the unstripped file (same build id), the names come back.
fn check_stripped(r: &Recording, unstripped: &[u8]) -> Checks {
    let mut check = Checks::new(Recorder::Capture, r.fs, "user-stacks stripped");
    let (acts, err) = analyze(&r.trace, &["--no-local-symbols".as_ref()]);
    let without = context(&acts, &err);
    check.context(without.clone());
    check_bytes(&mut check, &acts, r);
    let unnamed = note(&err, UNNAMED_NOTE);
    check.truth(
        "a note names the stripped module as without symbols",
        unnamed.contains(&format!("/{} ({})", r.prog, r.build_id)),
        unnamed,
        &format!(".../{} ({})", r.prog, r.build_id),
        "",
    );
    let label = format!("{}+0x", r.prog);
    for p in PHASES {
        let names: Vec<&str> = phase_acts(&acts, r, p)
            .iter()
            .filter_map(|v| v["intent_name"].as_str())
            .collect();
        check.truth(
            &format!("{p:?}: the intents lead with the module and offset"),
            !names.is_empty() && names.iter().all(|n| n.starts_with(&label)),
            &format!("{names:?}"),
            &format!("{label}..."),
            "",
        );
    }
    // Every frame in the stripped module is unnamed, and nothing names the program's
    // functions.
    let module_suffix = format!("/{}", r.prog);
    let all_fns = C.all();
    let mut wrong = Vec::new();
    for a in acts.iter().filter(|v| v["comm"] == r.prog) {
        let name = a["intent_name"].as_str().unwrap_or("");
        for f in frames(a) {
            let ours = f["module"]
                .as_str()
                .is_some_and(|m| m.ends_with(&module_suffix));
            let fns = frame_functions(f);
            let named_ours = fns.iter().any(|n| all_fns.iter().any(|g| is_fn(n, g)));
            let labelled = f["label"].as_str().is_some_and(|l| l.starts_with(&label));
            if named_ours || (ours && (!fns.is_empty() || !labelled)) {
                wrong.push(format!("{name}: {f}"));
            }
        }
    }
    check.truth(
        "no frame of the stripped module is named",
        wrong.is_empty(),
        &format!("{wrong:?}"),
        "[]",
        "",
    );
    // --symbols: the unstripped file, found by its build id.
    let syms = tempfile::Builder::new()
        .prefix("iob-ustack-syms-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::write(syms.path().join("iowork-c"), unstripped).unwrap();
    let (acts, err) = analyze(
        &r.trace,
        &[
            "--no-local-symbols".as_ref(),
            "--symbols".as_ref(),
            syms.path().as_os_str(),
        ],
    );
    check.context(format!(
        "without --symbols: {without}\nwith --symbols: {}",
        context(&acts, &err)
    ));
    for p in PHASES {
        let f = C.of(p);
        let names: Vec<&str> = phase_acts(&acts, r, p)
            .iter()
            .filter_map(|v| v["intent_name"].as_str())
            .collect();
        check.truth(
            &format!("--symbols: {p:?}: the intents lead with {f}"),
            !names.is_empty() && names.iter().all(|n| n.starts_with(&format!("{f}{SEP}"))),
            &format!("{names:?}"),
            &format!("{f}{SEP}..."),
            "",
        );
    }
    let unnamed = note(&err, UNNAMED_NOTE);
    check.truth(
        "--symbols: no note names the stripped module",
        !unnamed.contains(&format!("/{} (", r.prog)),
        unnamed,
        &format!("no note naming {}", r.prog),
        "",
    );
    check_no_foreign(&mut check, &acts, r, &C);
    check
}

#[test]
fn user_frames_name_the_functions_from_the_trace_alone() {
    if !support::ready(&[
        "mkfs.ext4",
        "mkfs.xfs",
        "sync",
        "gcc",
        "strip",
        "readelf",
        "rustc",
    ]) {
        return;
    }
    let _g = support::lock();
    let builds = Builds::new();
    let unstripped = std::fs::read(builds.path("iowork-c")).unwrap();

    let ext4 = LoopFs::new("ext4", 320);
    let xfs = LoopFs::new("xfs", 320);
    let mut recs = Vec::new();
    // Stock perf's recordings when perf is here (always in CI).
    let recorders: &[Recorder] = if support::ready(&["perf"]) {
        &[Recorder::Capture, Recorder::Perf]
    } else {
        &[Recorder::Capture]
    };
    for &recorder in recorders {
        for (fs, name) in [(&ext4, "ext4"), (&xfs, "xfs")] {
            for prog in ["iowork-c", "iowork-rs"] {
                recs.push(record(recorder, fs, name, &builds, prog));
            }
        }
    }
    let nofp = record(Recorder::Capture, &ext4, "ext4", &builds, "iowork-nofp");
    let stripped = record(Recorder::Capture, &ext4, "ext4", &builds, "iowork-stripped");
    // What a symbol store would hold for perf.data: copies of the builds, kept aside.
    let store = tempfile::tempdir().unwrap();
    for prog in ["iowork-c", "iowork-rs"] {
        std::fs::copy(builds.path(prog), store.path().join(prog)).unwrap();
    }

    // The trace alone: every copy of every build deleted (the unstripped file's bytes are
    // kept in memory for the --symbols check only).
    let mut gone = vec![builds.dir.path().to_path_buf()];
    for fs in [&ext4, &xfs] {
        let bin = fs.dir.path().join("bin");
        gone.extend(std::fs::read_dir(&bin).unwrap().map(|e| e.unwrap().path()));
        std::fs::remove_dir_all(&bin).unwrap();
    }
    drop(builds);
    for p in &gone {
        assert!(!p.exists(), "{} still exists", p.display());
    }

    let mut checks = Vec::new();
    for r in &recs {
        let (fns, lang) = if r.prog == "iowork-rs" {
            (&RUST, "Rust")
        } else {
            (&C, "C")
        };
        checks.push(check_fp(r, fns, lang, store.path()));
    }
    checks.push(check_nofp(&nofp));
    checks.push(check_stripped(&stripped, &unstripped));

    // Every scenario's failures are listed (each Checks::finish panics with its own).
    let failed = checks
        .into_iter()
        .filter_map(|c| std::panic::catch_unwind(AssertUnwindSafe(|| c.finish())).err())
        .count();
    assert_eq!(
        failed, 0,
        "{failed} scenarios failed: see their messages above"
    );
}

/// A container's service: the C program and the JIT's code run in their own mount and pid
/// namespaces from a tmpfs mounted there only (the host's directory stays empty), with a
/// private `/tmp` for the JIT's perf map (named by its namespace pid), and live past a flush
/// of the recorder. The recorder reads their build ids and symbol tables through
/// `/proc/PID/map_files` and the perf map through `/proc/PID/root`; once the namespaces are
/// gone, the trace alone names `wal_append` and `jit_wal_append [jit]`.
#[test]
fn user_frames_of_a_service_in_its_own_mount_and_pid_namespaces() {
    if !support::ready(&["mkfs.ext4", "sync", "gcc", "unshare"]) {
        return;
    }
    let _g = support::lock();
    let fs = LoopFs::new("ext4", 64);
    let src = fs.dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    support::build_workload(
        "iowork",
        &["-O1", "-g", "-fno-omit-frame-pointer"],
        &src.join("iowork"),
    );
    support::build_workload("jit", &["-O1", "-fno-omit-frame-pointer"], &src.join("jit"));
    let m = fs.mnt.display();
    sh(&format!("mkdir {m}/ns {m}/nsbin"));
    let script = format!(
        "unshare --mount --pid --fork --propagation private sh -c '
           set -e
           mount -t tmpfs ns-bin {m}/nsbin
           mount -t tmpfs ns-tmp /tmp
           cp {src}/iowork {src}/jit {m}/nsbin/
           export USTACK_LINGER_MS=1500
           {m}/nsbin/iowork wal {m}/ns/wal.dat 2048
           {m}/nsbin/jit {m}/ns/jit.dat 1024
           sync -f {m}'",
        src = src.display()
    );
    let trace = support::capture_with(&fs, &src, "trace-ns", &script, &["--user-stacks"]);
    // The namespaces are gone: their tmpfs (the binaries) and /tmp (the perf map) with them.
    assert!(std::fs::read_dir(fs.mnt.join("nsbin"))
        .unwrap()
        .next()
        .is_none());
    std::fs::remove_dir_all(&src).unwrap();
    let (acts, err) = analyze(&trace, &["--no-local-symbols".as_ref()]);
    let mut check = Checks::new(Recorder::Capture, "ext4", "user-stacks in namespaces");
    check.context(context(&acts, &err));
    let ino = |f: &str| std::fs::metadata(fs.mnt.join("ns").join(f)).unwrap().ino();
    for (file, lead, want) in [
        ("wal.dat", "wal_append", 2 * MIB),
        ("jit.dat", "jit_wal_append [jit]", MIB),
    ] {
        let ino = ino(file);
        let data: Vec<&Value> = acts
            .iter()
            .filter(|v| {
                v["ino"] == ino && ["page", "buffer"].contains(&v["via"].as_str().unwrap_or(""))
            })
            .collect();
        let named: u64 = data
            .iter()
            .filter(|v| {
                v["intent_name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(&format!("{lead}{SEP}")))
            })
            .map(|v| bytes(v, "write_bytes"))
            .sum();
        check.eq(&format!("{file}: written by {lead}"), named, want, "");
    }
    let unnamed = note(&err, UNNAMED_NOTE);
    check.truth(
        "the programs' frames are all named",
        !unnamed.contains("/iowork (") && !unnamed.contains("//anon"),
        unnamed,
        "no note naming iowork or the JIT's code",
        "",
    );
    check.finish();
}
