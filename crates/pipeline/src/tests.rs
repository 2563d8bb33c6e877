use std::path::{Path, PathBuf};

use ioblame_attrib::{
    ActTotals, Dir, FileKey, LostWindow, Role, RoleId, Summary, Tables, UnknownContext, WbReason,
};
use ioblame_counters::DevSelection;
use ioblame_decode::synth::{builtin_format, TraceBuilder, Val};
use ioblame_decode::{SkipReason, StreamStats, Symbolizer};
use ioblame_format::Trace;

use crate::diag::{of_stream, of_summary, recorder_left_out};
use crate::*;

/// A one-CPU synthetic trace with `block_bio_queue`, `block_rq_issue` and
/// `block_rq_complete` (their ids in that order), and a time 1 ms into it.
fn request_trace() -> (TraceBuilder, [u16; 3], u64) {
    let mut t = TraceBuilder::new(ioblame_format::ByteOrder::native(), 1);
    let ids = [
        "block:block_bio_queue",
        "block:block_rq_issue",
        "block:block_rq_complete",
    ]
    .map(|name| {
        t.add_event(name, builtin_format(name).unwrap(), false)
            .unwrap()
    });
    let base = t.header().start_clock_ns + 1_000_000;
    (t, ids, base)
}

/// The fields of a successful 8-sector `block_rq_complete`.
fn done(
    dev: Val<'static>,
    sector: Val<'static>,
    rwbs: &'static str,
) -> Vec<(&'static str, Val<'static>)> {
    vec![
        ("dev", dev),
        ("sector", sector),
        ("nr_sector", Val::U(8)),
        ("error", Val::I(0)),
        ("rwbs", Val::Str(rwbs)),
    ]
}

/// The fields of an 8-sector bio on device 7:0.
fn bio(sector: u64, rwbs: &'static str) -> Vec<(&'static str, Val<'static>)> {
    vec![
        ("dev", Val::U(7 << 20)),
        ("sector", Val::U(sector)),
        ("nr_sector", Val::U(8)),
        ("rwbs", Val::Str(rwbs)),
        ("comm", Val::Str("w")),
    ]
}

/// `t` written into a new directory.
fn written(t: TraceBuilder) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    t.write(&path).unwrap();
    (dir, path)
}

fn all_devices(show_recorder: bool) -> (Symbolizer, DevSelection, bool) {
    (Symbolizer::default(), DevSelection::all(), show_recorder)
}

fn run(
    trace: &Input,
    show_recorder: bool,
    on_io: impl FnMut(&ioblame_attrib::Io, &Tables),
) -> Analysis {
    let (symbols, devs, show_recorder) = all_devices(show_recorder);
    let all = ResolvedScope::all();
    let opts = Options {
        symbols: &symbols,
        devs: &devs,
        show_recorder,
        scope: &all,
        user_symbols: &Default::default(),
    };
    analyze(trace, &opts, on_io, |_| {})
}

/// A bio queued and never issued, and a discard: neither is charged to an act, and both
/// are accounted for.
#[test]
fn bytes_not_charged_are_accounted_for() {
    let (mut t, [q, d, c], base) = request_trace();
    t.sample(0, q, base, 42, 42, &[], &bio(2048, "W")).unwrap();
    let mut issue = bio(4096, "D");
    issue.push(("bytes", Val::U(4096)));
    t.sample(0, d, base + 10, 0, 0, &[], &issue).unwrap();
    t.sample(
        0,
        c,
        base + 20,
        0,
        0,
        &[],
        &done(Val::U(7 << 20), Val::U(4096), "D"),
    )
    .unwrap();
    let (_dir, path) = written(t);
    let trace = Input::from(Trace::open(&path).unwrap());
    let a = run(&trace, false, |_, _| {});
    assert_eq!(
        a.tables.totals.iter().map(|t| t.total_bytes()).sum::<u64>(),
        0
    );
    assert_eq!(
        a.diagnostics,
        [
            Diagnostic::LeftAtEnd {
                queued_bytes: 4096,
                inflight_bytes: 0,
                inflight_requests: 0
            },
            Diagnostic::NeitherReadNorWrite {
                requests: 1,
                bytes: 4096
            }
        ]
    );
    let lines: Vec<String> = a.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        lines,
        [
            "note: at the end of the trace 4096 bytes were queued but not issued and 0 bytes (0 requests) were in flight; they are not charged",
            "note: 1 requests (4096 bytes) were neither reads nor writes (discards, ...); they are not charged to acts",
        ]
    );
    let stale = Summary {
        stale_bytes: 8192,
        stale_requests: 1,
        ..Summary::default()
    };
    assert_eq!(
        of_summary(&stale, &Tables::default(), 0)[0].to_string(),
        "warning: 8192 bytes of IO (1 requests issued, the rest bios queued) saw no issue or completion for two minutes of trace time; they are charged to the lost intent (#1) with their file, issuer and reason"
    );
}

/// The recorder's own IO is left out of the per-act totals unless shown, as from the
/// per-IO outputs, and a note says so; the consumer still sees it, flagged.
#[test]
fn recorder_io_is_left_out_of_totals_unless_shown() {
    let (mut t, [q, d, c], base) = request_trace();
    let recorder = t.header().recorder_pid;
    let dev = Val::U(7 << 20);
    for (i, pid) in [(0u64, recorder), (1, recorder + 41)] {
        let sector = Val::U(2048 + 8 * i);
        let at = base + 100 * i;
        let bio = [
            ("dev", dev),
            ("sector", sector),
            ("nr_sector", Val::U(8)),
            ("rwbs", Val::Str("RA")),
            ("comm", Val::Str("x")),
        ];
        t.sample(0, q, at, pid, pid, &[], &bio).unwrap();
        let mut issue = bio.to_vec();
        issue.push(("bytes", Val::U(4096)));
        t.sample(0, d, at + 10, 0, 0, &[], &issue).unwrap();
        t.sample(0, c, at + 20, 0, 0, &[], &done(dev, sector, "RA"))
            .unwrap();
    }
    let (_dir, path) = written(t);
    for show in [false, true] {
        let trace = Input::from(Trace::open(&path).unwrap());
        let mut seen = 0;
        let a = run(&trace, show, |_, _| seen += 1);
        assert_eq!(seen, 2, "the consumer gets every IO");
        let total: u64 = a.tables.totals.iter().map(|t| t.total_bytes()).sum();
        assert_eq!(total, if show { 8192 } else { 4096 }, "show {show}");
        let recorder = a
            .tables
            .acts_with_totals()
            .filter(|(_, a, _)| a.recorder)
            .map(|(_, _, t)| t.total_bytes())
            .sum::<u64>();
        assert_eq!(recorder, if show { 4096 } else { 0 });
        let note = (!show).then_some(Diagnostic::RecorderLeftOut {
            bytes: 4096,
            ios: 1,
        });
        // The attribution's own warnings (the device's unknown size) come before it.
        let last = a
            .diagnostics
            .last()
            .filter(|d| !matches!(d, Diagnostic::Attribution(_)));
        assert_eq!(last, note.as_ref(), "{:?}", a.diagnostics);
    }
    let mut r = ActTotals::default();
    r.add(Dir::W, 4096);
    assert_eq!(
        recorder_left_out(&r, false).unwrap().to_string(),
        "note: the recorder's own IO (4096 bytes in 1 IOs) is left out; --show-recorder shows it"
    );
    assert!(recorder_left_out(&r, true).is_none());
    assert!(recorder_left_out(&ActTotals::default(), false).is_none());
}

/// Only the IO of the selected devices is handed out and counted.
#[test]
fn devices_not_selected_are_left_out() {
    let (mut t, [q, d, c], base) = request_trace();
    for (i, dev) in [(0u64, 7u64 << 20), (1, 8 << 20)] {
        let at = base + 100 * i;
        let mut b = bio(2048, "R");
        b[0].1 = Val::U(dev);
        t.sample(0, q, at, 42, 42, &[], &b).unwrap();
        b.push(("bytes", Val::U(4096)));
        t.sample(0, d, at + 10, 0, 0, &[], &b).unwrap();
        t.sample(
            0,
            c,
            at + 20,
            0,
            0,
            &[],
            &done(Val::U(dev), Val::U(2048), "R"),
        )
        .unwrap();
    }
    let (_dir, path) = written(t);
    let trace = Input::from(Trace::open(&path).unwrap());
    let devs = DevSelection::parse("8:0", &[]).unwrap();
    let symbols = Symbolizer::default();
    let all = ResolvedScope::all();
    let opts = Options {
        symbols: &symbols,
        devs: &devs,
        show_recorder: false,
        scope: &all,
        user_symbols: &Default::default(),
    };
    let mut seen = Vec::new();
    let a = analyze(&trace, &opts, |io, _| seen.push(io.dev), |_| {});
    assert_eq!(seen, [8 << 20]);
    let total: u64 = a.tables.totals.iter().map(|t| t.total_bytes()).sum();
    assert_eq!(total, 4096);
    assert_eq!(
        a.summary.total_bytes(),
        8192,
        "the attribution charged both"
    );
}

/// The lost intent's contexts are named: file, issuer, reason.
#[test]
fn unknown_contexts_are_noted() {
    let tables = Tables {
        roles: vec![Role {
            pid: 50,
            tid: 50,
            comm: "kworker/u8:0".into(),
            generation: 0,
            cgroup: 0,
            lineage: false,
        }],
        ..Tables::default()
    };
    let context = |ino, issuer, bytes| UnknownContext {
        file: FileKey { dev: 7 << 20, ino },
        issuer: RoleId(issuer),
        reason: (issuer == 0).then_some(WbReason(2)),
        bytes,
        ios: 1,
    };
    let s = Summary {
        unknown_bytes: 4096 * 7,
        unknown_ios: 7,
        unknown_contexts: (0..7).map(|i| context(219 + i, i as u32, 4096)).collect(),
        ..Summary::default()
    };
    let d = of_summary(&s, &tables, 0);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(
        d[0].to_string(),
        "note: 28672 bytes (7 IOs) have no known origin (dirtied before the capture, or records lost) and are charged to the lost intent (#1): \
         4096 B on 7:0 ino 219 queued by pid-50 (kworker/u8:0) for sync; \
         4096 B on 7:0 ino 220 queued by an unseen task; \
         4096 B on 7:0 ino 221 queued by an unseen task; \
         4096 B on 7:0 ino 222 queued by an unseen task; \
         4096 B on 7:0 ino 223 queued by an unseen task; and 2 more contexts"
    );
    assert!(of_summary(&Summary::default(), &tables, 0).is_empty());
}

/// Records lost, the attribution's warnings and those suppressed, in that order; at most
/// eight loss windows named, from the capture's start.
#[test]
fn losses_and_warnings_are_told_in_order() {
    let window = |i: u64| LostWindow {
        start: 0,
        end: 1_000_000_000 + i * 2_000_000,
        cpu: i as u32,
        count: 10 + i,
    };
    let mut s = Summary {
        lost_records: 100,
        lost_windows: (0..2).map(window).collect(),
        bytes_in_lost_windows: 8192,
        warnings: vec!["w1".into(), "w2".into()],
        warnings_suppressed: 3,
        ..Summary::default()
    };
    let lines: Vec<String> = of_summary(&s, &Tables::default(), 500_000_000)
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert_eq!(
        lines,
        [
            "warning: the kernel lost 100 records during the capture (10 on cpu 0 at 0.500s, 11 on cpu 1 at 0.502s); 8192 bytes of IO overlap those windows and may be misattributed",
            "warning: w1",
            "warning: w2",
            "warning: ... and 3 more warnings",
        ]
    );
    s.lost_windows = (0..9).map(window).collect();
    let d = of_summary(&s, &Tables::default(), 0)[0].to_string();
    assert!(d.contains("17 on cpu 7 at 1.014s, ...); 8192 bytes"), "{d}");
}

/// Damaged chunks, then the records skipped by reason.
#[test]
fn stream_damage_is_told() {
    let mut s = StreamStats::default();
    assert!(of_stream(&s).is_empty());
    s.damaged.push(ioblame_decode::stream::DamagedChunk {
        cpu: 1,
        seq: 7,
        error: "bad checksum".into(),
    });
    s.decode.errors[0] = 3;
    s.decode.errors[1] = 2;
    let lines: Vec<String> = of_stream(&s).iter().map(|d| d.to_string()).collect();
    assert_eq!(
        lines,
        [
            "warning: cpu 1 chunk 7 unreadable, skipped: bad checksum".to_string(),
            format!(
                "warning: records skipped: 3 {}, 2 {}",
                SkipReason::ALL[0].as_str(),
                SkipReason::ALL[1].as_str()
            ),
        ]
    );
}

/// Opening: the notes come back (also when opening then fails), and the errors say which
/// input is wrong.
#[test]
fn opening_returns_its_notes_and_typed_errors() {
    let (t, _, _) = request_trace();
    let (dir, path) = written(t);
    let mut notes = Vec::new();
    let trace = open_trace(std::slice::from_ref(&path), None, &mut notes).unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    let (_, note) = symbols_of(&trace);
    assert_eq!(
        note.unwrap().to_string(),
        "note: the trace has no kernel symbols; stacks are shown as addresses"
    );

    let missing = dir.path().join("missing");
    let e = open_trace(
        std::slice::from_ref(&missing),
        Some(Path::new("k")),
        &mut notes,
    )
    .unwrap_err();
    assert!(matches!(e, OpenError::Trace { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!("cannot read trace {}", missing.display())
    );
    assert_eq!(notes, [Diagnostic::KallsymsIgnored]);
    assert_eq!(
        notes[0].to_string(),
        "note: --kallsyms is ignored for ioblame traces (they carry the recording host's symbols)"
    );

    assert!(matches!(
        open_trace(&[], None, &mut notes),
        Err(OpenError::NoTrace)
    ));
    let e = open_trace(&[path.clone(), path.clone()], None, &mut notes).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: several inputs must all be ring files (.iob) of one capture; give a directory or a perf.data file alone",
            path.display()
        )
    );
    let ring: PathBuf = std::fs::read_dir(&path)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "iob"))
        .unwrap();
    let e = open_trace(&[ring.clone(), ring.clone()], None, &mut notes).unwrap_err();
    assert!(
        matches!(e, OpenError::SameRingFile { index: 0, .. }),
        "{e:?}"
    );
    let mut notes = Vec::new();
    let one = open_trace(std::slice::from_ref(&ring), None, &mut notes).unwrap();
    assert_eq!(one.chunks().len(), trace.chunks().len());
}

/// A workload (pid 100, recorded as the command) whose child 101 reads 8 sectors in cgroup
/// 5 (`/ci/job`), beside another process 200 reading 8 sectors in cgroup 6 (`/other`).
fn scoped_trace() -> (tempfile::TempDir, PathBuf) {
    use ioblame_decode::record::SAMPLE_CGROUP;
    let mut t = TraceBuilder::new(ioblame_format::ByteOrder::native(), 1);
    let st = ioblame_decode::synth::CAPTURE_SAMPLE_TYPE | SAMPLE_CGROUP;
    let [q, d, c] = [
        "block:block_bio_queue",
        "block:block_rq_issue",
        "block:block_rq_complete",
    ]
    .map(|name| {
        t.add_event_with(name, builtin_format(name).unwrap(), st)
            .unwrap()
    });
    let m = t.metadata_mut();
    m.capture_info = vec![
        ("command".into(), "./run-tests".into()),
        ("command_pid".into(), "100".into()),
    ];
    m.cgroups = vec![
        ioblame_format::Cgroup {
            id: 1,
            path: "/".into(),
        },
        ioblame_format::Cgroup {
            id: 5,
            path: "/ci/job".into(),
        },
        ioblame_format::Cgroup {
            id: 6,
            path: "/other".into(),
        },
    ];
    let base = t.header().start_clock_ns + 1_000_000;
    t.fork_exit(0, base, true, (100, 1, 100, 1));
    t.fork_exit(0, base + 1, true, (101, 100, 101, 100));
    for (i, (pid, cg, sector)) in [(101u32, 5u64, 2048u64), (200, 6, 4096)]
        .into_iter()
        .enumerate()
    {
        let at = base + 10 + i as u64 * 100;
        t.set_cgroup(cg);
        t.sample(0, q, at, pid, pid, &[], &bio(sector, "R"))
            .unwrap();
        let mut issue = bio(sector, "R");
        issue.push(("bytes", Val::U(4096)));
        t.sample(0, d, at + 10, 0, 0, &[], &issue).unwrap();
        t.sample(
            0,
            c,
            at + 20,
            0,
            0,
            &[],
            &done(Val::U(7 << 20), Val::U(sector), "R"),
        )
        .unwrap();
    }
    written(t)
}

fn scoped_run(trace: &Input, scope: &str) -> (Analysis, Vec<u32>) {
    let scope = ResolvedScope::resolve(&scope.parse().unwrap(), trace).unwrap();
    let (symbols, devs, _) = all_devices(false);
    let opts = Options {
        symbols: &symbols,
        devs: &devs,
        show_recorder: false,
        scope: &scope,
        user_symbols: &Default::default(),
    };
    let mut pids = Vec::new();
    let a = analyze(
        trace,
        &opts,
        |io, t| pids.push(t.roles[t.acts[io.act.index()].role.index()].pid),
        |_| {},
    );
    (a, pids)
}

#[test]
fn scopes_keep_the_workload_a_process_tree_or_a_cgroup_subtree() {
    let (_dir, path) = scoped_trace();
    let trace = Input::from(Trace::open(&path).unwrap());
    let (a, pids) = scoped_run(&trace, "workload");
    assert_eq!(pids, [101]);
    assert_eq!(a.scope.inside.total_bytes(), 4096);
    assert_eq!(a.scope.outside.total_bytes(), 4096);
    assert_eq!(
        a.tables.totals.iter().map(|t| t.total_bytes()).sum::<u64>(),
        4096
    );
    let note = a
        .diagnostics
        .iter()
        .find_map(|d| matches!(d, Diagnostic::Scope(_)).then(|| d.to_string()))
        .unwrap();
    assert_eq!(
        note,
        "note: scope workload (pid 100 `./run-tests` and its descendants): 4096 of 8192 bytes \
         (50.0%) of the trace's IO fell outside it"
    );
    // The roles carry their cgroups.
    let cg: Vec<u64> = a.tables.roles.iter().map(|r| r.cgroup).collect();
    assert_eq!(cg, [5, 6]);
    let (a, pids) = scoped_run(&trace, "all");
    assert_eq!(pids, [101, 200]);
    assert_eq!(a.scope.outside.total_bytes(), 0);
    assert_eq!(
        a.scope.outside_workload.map(|w| w.total_bytes()),
        Some(4096)
    );
    assert_eq!(scoped_run(&trace, "pid:200").1, [200]);
    assert_eq!(scoped_run(&trace, "cgroup:/ci").1, [101]);
    assert_eq!(scoped_run(&trace, "cgroup:/ci/job/").1, [101]);
    assert_eq!(scoped_run(&trace, "cgroup:/").1, [101, 200]);
    assert_eq!(
        ResolvedScope::resolve(&"cgroup:/c".parse().unwrap(), &trace).unwrap_err(),
        ScopeError::UnknownCgroup("/c".into())
    );
}

#[test]
fn scopes_a_trace_cannot_have_are_refused_and_all_says_nothing() {
    let (mut t, [q, d, c], base) = request_trace();
    t.sample(0, q, base, 42, 42, &[], &bio(2048, "R")).unwrap();
    let mut issue = bio(2048, "R");
    issue.push(("bytes", Val::U(4096)));
    t.sample(0, d, base + 10, 0, 0, &[], &issue).unwrap();
    t.sample(
        0,
        c,
        base + 20,
        0,
        0,
        &[],
        &done(Val::U(7 << 20), Val::U(2048), "R"),
    )
    .unwrap();
    let (_dir, path) = written(t);
    let trace = Input::from(Trace::open(&path).unwrap());
    for (s, e) in [
        ("workload", ScopeError::NoWorkload),
        ("cgroup:/a", ScopeError::NoCgroups),
    ] {
        assert_eq!(
            ResolvedScope::resolve(&s.parse().unwrap(), &trace).unwrap_err(),
            e
        );
    }
    assert!(matches!(
        "pid:x".parse::<Scope>(),
        Err(ScopeError::Syntax(_))
    ));
    assert!(matches!(
        "cgroup:a".parse::<Scope>(),
        Err(ScopeError::Syntax(_))
    ));
    assert_eq!(ResolvedScope::default_for_ci(&trace).scope, Scope::All);
    let a = run(&trace, false, |_, _| {});
    assert!(!a
        .diagnostics
        .iter()
        .any(|d| matches!(d, Diagnostic::Scope(_))));
    assert_eq!(scoped_run(&trace, "pid:42").1, [42]);
}

/// A trace whose last file was never closed (a killed recorder, or one still writing) reads,
/// and says where each CPU's records end; a closed one says nothing.
#[test]
fn an_unclosed_trace_is_noted_with_where_it_ends() {
    let (mut t, [q, ..], base) = request_trace();
    t.sample(0, q, base, 42, 42, &[], &bio(2048, "W")).unwrap();
    t.sample(0, q, base + 500_000_000, 42, 42, &[], &bio(4096, "W"))
        .unwrap();
    let (_d, path) = written(t);
    let mut diags = Vec::new();
    open_trace(std::slice::from_ref(&path), None, &mut diags).unwrap();
    assert!(
        !diags
            .iter()
            .any(|d| matches!(d, Diagnostic::NotClosed { .. })),
        "{diags:?}"
    );
    // Cut the file before its index, as a SIGKILL leaves it.
    let file = std::fs::read_dir(&path)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let bytes = std::fs::read(&file).unwrap();
    let index = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().unwrap()) as usize;
    std::fs::write(&file, &bytes[..index]).unwrap();
    let mut diags = Vec::new();
    let trace = open_trace(&[path], None, &mut diags).unwrap();
    assert_eq!(trace.chunks().len(), 1);
    let note = diags
        .iter()
        .find(|d| matches!(d, Diagnostic::NotClosed { .. }))
        .unwrap_or_else(|| panic!("{diags:?}"))
        .to_string();
    assert!(note.starts_with("warning: "), "{note}");
    assert!(note.contains("was not closed"), "{note}");
    assert!(note.contains("end between 0.501 s and 0.501 s"), "{note}");
}

/// A trace whose FILES walk was cut short says so; one whose walk finished says nothing.
#[test]
fn a_files_walk_cut_short_is_a_warning() {
    use ioblame_format::{FileEntry, FileTable, RingOptions, RingWriter};
    for (flags, warned) in [
        (0, false),
        (ioblame_format::FILES_TIMED_OUT, true),
        (
            ioblame_format::FILES_AT_END | ioblame_format::FILES_CAPPED,
            true,
        ),
    ] {
        let (mut t, [q, ..], base) = request_trace();
        t.sample(0, q, base, 42, 42, &[], &bio(2048, "W")).unwrap();
        t.flush_all();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let opts = RingOptions {
            file_size: 0,
            max_size: 0,
        };
        let mut w =
            RingWriter::create(&path, t.header().clone(), t.metadata().clone(), opts).unwrap();
        w.write_files(&FileTable {
            unnamed: Vec::new(),
            flags,
            entries: vec![FileEntry {
                dev: 1,
                ino: 2,
                path: "/mnt/a".into(),
            }],
        })
        .unwrap();
        for c in t.take_chunks() {
            w.write_chunk(&c).unwrap();
        }
        w.finish().unwrap();
        let mut diags = Vec::new();
        open_trace(&[path], None, &mut diags).unwrap();
        let cut: Vec<String> = diags
            .iter()
            .filter(|d| matches!(d, Diagnostic::PathsCutShort { .. }))
            .map(|d| d.to_string())
            .collect();
        assert_eq!(cut.len(), usize::from(warned), "{flags}: {diags:?}");
        if flags & ioblame_format::FILES_TIMED_OUT != 0 {
            assert!(cut[0].starts_with("warning: "), "{cut:?}");
            assert!(cut[0].contains("--paths-time"), "{cut:?}");
            assert!(cut[0].contains("after naming 1 files"), "{cut:?}");
        }
        if flags & ioblame_format::FILES_CAPPED != 0 {
            assert!(cut[0].contains("--paths-max-entries"), "{cut:?}");
        }
    }
}

/// A trace whose recorder found no controller at the cgroup2 root says so
/// (`cgroup_root_controllers=none`); others do not.
#[test]
fn cgroups_flat_is_said_only_when_the_recorder_saw_it() {
    let (_dir, path) = scoped_trace();
    let t = ioblame_format::Trace::open(&path).unwrap();
    assert_eq!(crate::cgroups_flat(&t), None);
    let dir = tempfile::tempdir().unwrap();
    let mut b = TraceBuilder::new(ioblame_format::ByteOrder::native(), 1);
    b.metadata_mut()
        .capture_info
        .push(("cgroup_root_controllers".into(), "none".into()));
    let p = dir.path().join("t");
    b.write(&p).unwrap();
    let t = ioblame_format::Trace::open(&p).unwrap();
    let d = crate::cgroups_flat(&t).expect("said");
    assert!(d.to_string().contains("cgroup.subtree_control"), "{d}");
}

/// Writes a btrfs map as `ioblame-capture btrfs-map` does (an ioblame trace file without
/// events) at `path`, taken on `host`/`kernel`, with one filesystem on loop5 (7:5).
fn btrfs_map_file(path: &Path, host: &str, kernel: &str) {
    use ioblame_format::*;
    let header = Header {
        byte_order: ByteOrder::native(),
        word_size: 8,
        page_size: 4096,
        cpu_count: 0,
        clock_id: 1,
        recorder_pid: 1,
        file_index: 0,
        start_time_ns: 0,
        start_clock_ns: 0,
        trace_id: 9,
        hostname: host.into(),
        kernel_release: kernel.into(),
        machine: "x86_64".into(),
        recorder_version: "test".into(),
    };
    let meta = Metadata {
        block_devices: vec![
            BlockDevice {
                name: "loop5".into(),
                major: 7,
                minor: 5,
                size_sectors: 1 << 20,
                ..Default::default()
            },
            BlockDevice {
                name: "sda".into(),
                major: 8,
                minor: 0,
                ..Default::default()
            },
        ],
        btrfs: vec![BtrfsFs {
            fsid: [7; 16],
            major: 0,
            minor: 44,
            bdi: "btrfs-12".into(),
            sector_size: 4096,
            node_size: 16384,
            devices: vec![BtrfsDevice {
                devid: 1,
                major: 7,
                minor: 5,
            }],
            chunks: vec![BtrfsChunk {
                logical: 1 << 30,
                length: 1 << 30,
                flags: BTRFS_CHUNK_DATA,
                stripe_len: 65536,
                sub_stripes: 1,
                stripes: vec![BtrfsStripe {
                    devid: 1,
                    physical: 1 << 22,
                }],
                since_ns: 0,
            }],
        }],
        ..Default::default()
    };
    FileWriter::create(path, &header, &meta)
        .unwrap()
        .finish()
        .unwrap();
}

/// A perf.data recording with the btrfs map `ioblame-capture btrfs-map` saved: found beside
/// it (PERF.DATA.btrfs) or given; its filesystems and their devices (not the host's other
/// devices) join the converted trace, with a note. A map of another host is refused; a map
/// given with an ioblame trace is said to be ignored.
#[test]
fn a_btrfs_map_joins_a_perf_recording() {
    let dir = tempfile::tempdir().unwrap();
    let perf = dir.path().join("perf.data");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../perfdata/tests/data/loop0-full-z.data"
        ),
        &perf,
    )
    .unwrap();
    let mut notes = Vec::new();
    let plain = open_trace(std::slice::from_ref(&perf), None, &mut notes).unwrap();
    assert!(plain.btrfs().is_empty());
    let (host, kernel) = (
        plain.header().hostname.clone(),
        plain.header().kernel_release.clone(),
    );
    drop(plain);

    // Beside it, taken after the recording (the copy's time is the recording's).
    std::thread::sleep(std::time::Duration::from_millis(20));
    btrfs_map_file(&dir.path().join("perf.data.btrfs"), &host, &kernel);
    assert_eq!(
        btrfs_map_beside(&perf),
        Some(dir.path().join("perf.data.btrfs"))
    );
    let mut notes = Vec::new();
    let t = open_trace(std::slice::from_ref(&perf), None, &mut notes).unwrap();
    let fs = t.btrfs();
    assert_eq!(fs.len(), 1);
    assert_eq!(
        (fs[0].major, fs[0].minor, fs[0].bdi.as_str()),
        (0, 44, "btrfs-12")
    );
    assert_eq!(fs[0].chunks.len(), 1);
    let devs: Vec<_> = t
        .metadata()
        .block_devices
        .iter()
        .map(|b| b.name.as_str())
        .collect();
    assert_eq!(devs, ["loop5"]);
    let said = notes.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    assert!(
        said.iter()
            .any(|n| n.contains("the chunk maps of 1 filesystem(s) (1 chunks)")),
        "{said:?}"
    );
    assert!(
        !said.iter().any(|n| n.contains("older than the recording")),
        "{said:?}"
    );
    // A recording newer than the map beside it: not used, said; named, used, said.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let newer = std::fs::read(&perf).unwrap();
    std::fs::write(&perf, newer).unwrap();
    let mut notes = Vec::new();
    let t = open_trace(std::slice::from_ref(&perf), None, &mut notes).unwrap();
    assert!(t.btrfs().is_empty());
    let beside = dir.path().join("perf.data.btrfs");
    assert!(notes.contains(&Diagnostic::BtrfsMapStale {
        path: beside.clone()
    }));
    let side = SideFiles {
        kallsyms: None,
        btrfs_map: Some(&beside),
    };
    let mut notes = Vec::new();
    let t = open_trace_with(std::slice::from_ref(&perf), &side, &mut notes).unwrap();
    assert_eq!(t.btrfs().len(), 1);
    let said = notes.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    assert!(
        said.iter().any(|n| n.contains("older than the recording")),
        "{said:?}"
    );

    // Given, of another host: refused.
    let other = dir.path().join("other.btrfs");
    btrfs_map_file(&other, "elsewhere", &kernel);
    let side = SideFiles {
        kallsyms: None,
        btrfs_map: Some(&other),
    };
    let e = open_trace_with(std::slice::from_ref(&perf), &side, &mut notes).unwrap_err();
    let why = std::error::Error::source(&e).map(|s| s.to_string());
    assert!(
        why.as_deref()
            .is_some_and(|w| w.contains("taken on elsewhere")),
        "{e}: {why:?}"
    );

    // Given with an ioblame trace: said to be ignored.
    let (_d, trace) = written(request_trace().0);
    let mut notes = Vec::new();
    open_trace_with(std::slice::from_ref(&trace), &side, &mut notes).unwrap();
    assert_eq!(notes, [Diagnostic::BtrfsMapIgnored]);
}
