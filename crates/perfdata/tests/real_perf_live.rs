//! Records real workloads with the installed `perf` and checks the conversion against what
//! perf itself reports about the same files.
//!
//! Needs root and `/usr/bin/perf`; without them the tests say so and return.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use ioblame_testkit::need;

use ioblame_perfdata::{
    open_perf_data, perf_command, Converted, PerfDataError, PerfDataOptions, Stacks,
};

/// Recordings are system-wide: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn can_record() -> bool {
    need::live()
        && need::met(
            need::root() && Path::new("/usr/bin/perf").exists(),
            "root and /usr/bin/perf",
        )
}

fn sh(cmd: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("run sh");
    assert!(
        out.status.success(),
        "`{cmd}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An ext4 file system on a loop device, removed on drop.
struct LoopFs {
    dev: String,
    mnt: tempfile::TempDir,
    _img_dir: tempfile::TempDir,
}

impl LoopFs {
    fn new() -> LoopFs {
        let img_dir = tempfile::tempdir().unwrap();
        let img = img_dir.path().join("fs.img");
        sh(&format!("truncate -s 64M {}", img.display()));
        let dev = sh(&format!("losetup -f --show {}", img.display()))
            .trim()
            .to_string();
        let mnt = tempfile::tempdir().unwrap();
        let fs = LoopFs {
            dev,
            mnt,
            _img_dir: img_dir,
        };
        sh(&format!("mkfs.ext4 -q -F {}", fs.dev));
        sh(&format!("mount {} {}", fs.dev, fs.mnt.path().display()));
        fs
    }
    fn name(&self) -> String {
        self.dev.trim_start_matches("/dev/").to_string()
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.mnt.path()).status();
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// Runs `perf_command` for the loop device, adapted by `edit`, on `workload`.
fn record(fs: &LoopFs, out: &Path, edit: impl Fn(String) -> String, workload: &str) {
    let line = perf_command(&[fs.name()], Stacks::Exact).expect("perf_command");
    let line = edit(line);
    let tail = " -o perf.data -- COMMAND";
    assert!(line.ends_with(tail), "{line}");
    let line = format!(
        "{} -o {} -- sh -c '{workload}' 2>&1",
        &line[..line.len() - tail.len()],
        out.display()
    );
    sh(&line);
}

fn workload(fs: &LoopFs) -> String {
    format!(
        "dd if=/dev/zero of={}/x bs=1M count=4 conv=fsync 2>/dev/null; sync",
        fs.mnt.path().display()
    )
}

/// Record counts by type, as perf's raw dump shows them (compressed records included).
fn perf_counts(file: &Path) -> BTreeMap<String, u64> {
    let dump = sh(&format!("perf report -D -i {} 2>/dev/null", file.display()));
    let mut m = BTreeMap::new();
    for line in dump.lines() {
        for name in ["SAMPLE", "COMM", "FORK", "EXIT", "LOST", "LOST_SAMPLES"] {
            let tok = format!("PERF_RECORD_{name}");
            if let Some(i) = line.find(&tok) {
                let next = line.as_bytes().get(i + tok.len()).copied();
                if !matches!(next, Some(b'_' | b'A'..=b'Z')) {
                    *m.entry(name.to_string()).or_insert(0) += 1;
                }
            }
        }
    }
    m
}

fn script_samples(file: &Path) -> u64 {
    sh(&format!(
        "perf script -i {} -F event 2>/dev/null",
        file.display()
    ))
    .lines()
    .filter(|l| !l.trim().is_empty())
    .count() as u64
}

/// Record counts by type in the converted trace.
fn converted_counts(c: &Converted) -> BTreeMap<String, u64> {
    let t = &c.trace;
    let mut m = BTreeMap::new();
    for ch in t.chunks() {
        let chunk = t.decompress(ch).expect("chunk decompresses");
        for r in chunk.records(t.header().byte_order) {
            let r = r.expect("record walks");
            let name = match r.kind {
                9 => "SAMPLE",
                3 => "COMM",
                7 => "FORK",
                4 => "EXIT",
                2 => "LOST",
                13 => "LOST_SAMPLES",
                k => panic!("unexpected record type {k} in the converted trace"),
            };
            *m.entry(name.to_string()).or_insert(0) += 1;
        }
    }
    m
}

/// Decodes every chunk with the decode crate: every record must decode.
fn decode_all(c: &Converted) -> ioblame_decode::DecodeStats {
    let t = &c.trace;
    let d = ioblame_decode::Decoder::new(t.header(), t.metadata());
    assert!(
        d.problems().is_empty(),
        "decoder problems: {:?}",
        d.problems()
    );
    let mut stats = ioblame_decode::DecodeStats::default();
    let lo = t
        .chunks()
        .iter()
        .map(|c| c.header.first_ts)
        .filter(|&x| x > 0)
        .min()
        .unwrap();
    let hi = t.chunks().iter().map(|c| c.header.last_ts).max().unwrap();
    for ch in t.chunks() {
        let chunk = t.decompress(ch).unwrap();
        let dc = d.decode_chunk(&chunk);
        for e in &dc.events {
            assert!(e.time == 0 || (lo..=hi).contains(&e.time), "{e:?}");
            assert_eq!(e.cpu, ch.header.cpu, "{e:?}");
        }
        stats.merge(&dc.stats);
    }
    assert_eq!(stats.error_count(), 0, "{stats:?}");
    stats
}

/// The IOs and tables of the attribution of a converted recording.
fn attribute(c: &Converted) -> (Vec<ioblame_attrib::Io>, ioblame_attrib::Attribution) {
    let t = &c.trace;
    let decoder = ioblame_decode::Decoder::new(t.header(), t.metadata());
    let ctx = ioblame_attrib::Context::from_trace(t.header(), t.metadata());
    ioblame_attrib::attribute_trace(t, &decoder, ctx)
}

/// Decode + attribution of a converted recording: the write bytes charged to `dd` by page
/// (the workload's buffered writer), and how many of those acts' intents have a stack.
fn dd_writes(c: &Converted) -> (u64, usize) {
    use ioblame_attrib::{Dir, Via};
    let (ios, out) = attribute(c);
    let tables = &out.tables;
    let mut bytes = 0;
    let mut with_stack = std::collections::BTreeSet::new();
    for io in &ios {
        let act = &tables.acts[io.act.index()];
        if tables.roles[act.role.index()].comm == "dd" && act.via == Via::Page && io.dir == Dir::W {
            bytes += io.size;
            if !tables.intents[act.intent.index()].stack.is_empty() {
                with_stack.insert(io.act);
            }
        }
    }
    (bytes, with_stack.len())
}

#[test]
fn full_event_set_converts_like_perf_sees_it() {
    if !can_record() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fs = LoopFs::new();
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.data");
    let zst = dir.path().join("z.data");
    record(&fs, &plain, |l| l, &workload(&fs));
    record(
        &fs,
        &zst,
        |l| l.replacen("perf record", "perf record -z", 1),
        &workload(&fs),
    );

    let c = open_perf_data(&plain, &PerfDataOptions::default()).unwrap();
    assert!(c.trace.problems().is_empty(), "{:?}", c.trace.problems());
    let meta = c.trace.metadata();
    // Every tracepoint has its name and its tracefs format, matched by id.
    for e in meta.events.iter().filter(|e| e.tracefs_id != 0) {
        let (sys, name) = e.name.split_once(':').expect("sys:name");
        assert!(
            e.format
                .starts_with(&format!("name: {name}\nID: {}\n", e.tracefs_id)),
            "{}: {:?}",
            e.name,
            &e.format[..e.format.len().min(60)]
        );
        let live =
            std::fs::read_to_string(format!("/sys/kernel/tracing/events/{sys}/{name}/format"))
                .unwrap();
        assert_eq!(e.format.trim_end(), live.trim_end(), "{}", e.name);
        // Kernel-only callchains on the events whose stack is an intent, and only there.
        assert_eq!(
            e.callchain(),
            Stacks::Exact.callchain(&e.name),
            "{}",
            e.name
        );
        assert_ne!(e.sample_type & (1 << 16), 0, "IDENTIFIER");
    }
    for needed in [
        "block:block_bio_queue",
        "block:block_rq_complete",
        "writeback:writeback_dirty_folio",
    ] {
        assert!(meta.events.iter().any(|e| e.name == needed), "{needed}");
    }
    let dirty = meta
        .events
        .iter()
        .find(|e| e.name == "block:block_dirty_buffer")
        .unwrap();
    assert!(
        dirty.filter.contains("sector < 4611686018427387904"),
        "{}",
        dirty.filter
    );
    assert!(
        !c.notes.iter().any(|n| n.contains("without callchains")),
        "{:?}",
        c.notes
    );
    // perf itself sees callchains on exactly those events, user stacks excluded.
    let evlist = sh(&format!(
        "perf evlist -v -i {} 2>/dev/null",
        plain.display()
    ));
    for line in evlist.lines().filter(|l| l.contains("type: 2,")) {
        let name = line.split(':').take(2).collect::<Vec<_>>().join(":");
        let stack = Stacks::Exact.callchain(&name);
        assert_eq!(line.contains("CALLCHAIN"), stack, "{line}");
        assert_eq!(line.contains("exclude_callchain_user: 1"), stack, "{line}");
    }
    assert!(
        !c.notes.iter().any(|n| n.starts_with("no ")),
        "{:?}",
        c.notes
    );
    assert!(
        c.notes.iter().any(|n| n.contains("/proc/kallsyms")),
        "{:?}",
        c.notes
    );
    assert!(c.trace.metadata().kallsyms.is_some());
    let h = c.trace.header();
    assert_eq!(
        h.hostname,
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap()
            .trim()
    );
    assert!(h.recorder_version.starts_with("perf "));
    assert!(h.cpu_count >= 1);

    // Same records as perf sees, sample count as perf script prints.
    let perf = perf_counts(&plain);
    eprintln!("perf sees {perf:?}");
    let ours = converted_counts(&c);
    assert_eq!(ours, perf);
    assert!(ours["SAMPLE"] > 10, "{ours:?}");
    assert_eq!(ours["SAMPLE"], script_samples(&plain));
    let stats = decode_all(&c);
    assert_eq!(stats.per_event.iter().sum::<u64>(), ours["SAMPLE"]);
    assert_eq!(stats.comm, ours["COMM"]);

    // The compressed recording converts the same way.
    let cz = open_perf_data(&zst, &PerfDataOptions::default()).unwrap();
    let perf_z = perf_counts(&zst);
    let ours_z = converted_counts(&cz);
    assert_eq!(ours_z, perf_z);
    assert_eq!(ours_z["SAMPLE"], script_samples(&zst));
    assert!(ours_z["SAMPLE"] > 10);
    decode_all(&cz);
    let zinfo = sh(&format!(
        "perf report --header-only -i {} 2>/dev/null",
        zst.display()
    ));
    assert!(zinfo.contains("compressed"), "recorded with -z: {zinfo}");

    // Truncated or damaged copies give errors, never panics.
    let bytes = std::fs::read(&plain).unwrap();
    let cut_dir = tempfile::tempdir().unwrap();
    let cut_path = cut_dir.path().join("cut.data");
    let n = bytes.len();
    for cut in [
        0,
        4,
        8,
        50,
        103,
        104,
        200,
        1000,
        n / 3,
        n / 2,
        n - 4096,
        n - 100,
        n - 1,
    ] {
        std::fs::write(&cut_path, &bytes[..cut.min(n)]).unwrap();
        match open_perf_data(&cut_path, &PerfDataOptions::default()) {
            Ok(_) => panic!("a file cut at {cut} of {n} converted"),
            Err(PerfDataError::ParserPanicked { what, .. }) => {
                panic!("cut at {cut}: the parser panicked: {what}")
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("cut.data"), "{msg}");
            }
        }
    }
    // Damage inside the data section: errors or a conversion, never a panic.
    for pos in (104..n).step_by(n / 40 + 1) {
        let mut b = bytes.clone();
        b[pos] ^= 0xff;
        b[pos.saturating_sub(1)] ^= 0x5a;
        std::fs::write(&cut_path, &b).unwrap();
        if let Err(PerfDataError::ParserPanicked { what, .. }) =
            open_perf_data(&cut_path, &PerfDataOptions::default())
        {
            panic!("damage at {pos}: the parser panicked: {what}");
        }
    }
}

#[test]
fn without_callchains_or_identifier() {
    if !can_record() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fs = LoopFs::new();
    let dir = tempfile::tempdir().unwrap();
    let nog = dir.path().join("nog.data");
    record(
        &fs,
        &nog,
        |l| {
            let l = l.replace("/call-graph=fp/", "");
            assert!(!l.contains("-g "), "{l}");
            l.replacen(" --kernel-callchains", "", 1)
        },
        &workload(&fs),
    );
    let c = open_perf_data(&nog, &PerfDataOptions::default()).unwrap();
    assert!(
        c.notes
            .iter()
            .any(|n| n.starts_with("recorded without callchains on ")
                && n.contains("block:block_bio_queue")
                && n.contains(": intents have no stacks;")),
        "{:?}",
        c.notes
    );
    assert_eq!(converted_counts(&c), perf_counts(&nog));
    decode_all(&c);
    // It degrades, it does not fail: the writer's 4 MiB are still charged to it, by page,
    // with an intent that has no stack.
    let (written, stacks) = dd_writes(&c);
    assert_eq!(written, 4 << 20, "{:?}", c.notes);
    assert_eq!(stacks, 0);
    // With callchains, the same bytes and stacks on the intents.
    let g = dir.path().join("g.data");
    record(&fs, &g, |l| l, &workload(&fs));
    let cg = open_perf_data(&g, &PerfDataOptions::default()).unwrap();
    let (written, stacks) = dd_writes(&cg);
    assert_eq!(written, 4 << 20, "{:?}", cg.notes);
    assert!(stacks > 0);

    // A single event, not system-wide: perf leaves PERF_SAMPLE_IDENTIFIER out; the converter
    // adds it, and the decoder still attributes every sample and task record.
    let single = dir.path().join("single.data");
    sh(&format!(
        "perf record -e block:block_rq_issue -o {} -- sh -c '{}' 2>&1",
        single.display(),
        workload(&fs)
    ));
    let ev = sh(&format!("perf evlist -v -i {}", single.display()));
    assert!(!ev.contains("IDENTIFIER"), "{ev}");
    let c = open_perf_data(&single, &PerfDataOptions::default()).unwrap();
    assert_eq!(c.trace.metadata().events.len(), 1);
    let e = &c.trace.metadata().events[0];
    assert_ne!(e.sample_type & (1 << 16), 0);
    assert!(c
        .notes
        .iter()
        .any(|n| n.contains("lack PERF_SAMPLE_IDENTIFIER")));
    assert!(c
        .notes
        .iter()
        .any(|n| n.contains("no block:block_rq_complete: IOs never complete")));
    let ours = converted_counts(&c);
    assert_eq!(ours, perf_counts(&single));
    let stats = decode_all(&c);
    assert_eq!(stats.per_event[0], ours["SAMPLE"]);
    assert_eq!(stats.comm, ours.get("COMM").copied().unwrap_or(0));
}

/// Bytes written by page (buffered writes the flusher wrote back) charged to `dd`, per
/// cgroup path (`None`: unknown), as `acts --by cgroup` names them.
fn dd_page_writes_by_cgroup(c: &Converted) -> BTreeMap<Option<String>, u64> {
    use ioblame_attrib::{CgroupNames, Dir, Via};
    let (ios, out) = attribute(c);
    let names = CgroupNames::of(&c.trace);
    let t = &out.tables;
    let mut m = BTreeMap::new();
    for io in ios.iter().filter(|io| io.dir == Dir::W) {
        let act = &t.acts[io.act.index()];
        if t.roles[act.role.index()].comm == "dd" && act.via == Via::Page {
            let cg = names.as_ref().and_then(|n| n.of_act(act, t));
            *m.entry(cg.map(str::to_string)).or_insert(0) += io.size;
        }
    }
    m
}

#[test]
fn all_cgroups_names_each_writers_cgroup() {
    use ioblame_testkit::cgroups::{cgroup2_mount, TestCgroup};
    if !can_record() {
        return;
    }
    let Some(mount) = need::some(cgroup2_mount(), "a cgroup2 hierarchy") else {
        return;
    };
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fs = LoopFs::new();
    let dir = tempfile::tempdir().unwrap();
    // `a` exists before perf starts (perf names it from its walk of the hierarchy); `b` is
    // made by the workload while perf records (the kernel's CGROUP record names it).
    let a = TestCgroup::new(&mount, "perf-a");
    let b = TestCgroup::new(&mount, "perf-b");
    std::fs::remove_dir(&b.dir).unwrap();
    // Two writers, each in its cgroup; the `sync` of a third task writes their pages back.
    let m = fs.mnt.path().display();
    let work = format!(
        "sh -c \"echo \\$\\$ > {a}/cgroup.procs; exec dd if=/dev/zero of={m}/a bs=1M count=8 2>/dev/null\"; \
         mkdir {b}; \
         sh -c \"echo \\$\\$ > {b}/cgroup.procs; exec dd if=/dev/zero of={m}/b bs=64k count=48 2>/dev/null\"; \
         sync",
        a = a.dir.display(),
        b = b.dir.display(),
    );
    let with = dir.path().join("cg.data");
    record(&fs, &with, |l| l, &work);
    let c = open_perf_data(&with, &PerfDataOptions::default()).unwrap();
    assert!(
        !c.notes.iter().any(|n| n.contains("cgroup")),
        "{:?}",
        c.notes
    );
    let table = c.trace.cgroups();
    for cg in [&a, &b] {
        let id = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&cg.dir).unwrap());
        assert!(
            table.iter().any(|t| t.id == id && t.path == cg.path),
            "{} ({id}) in {table:?}",
            cg.path
        );
    }
    // The converted trace keeps no CGROUP record in its chunks (the table holds them) and
    // every other record perf sees.
    assert_eq!(converted_counts(&c), perf_counts(&with));
    decode_all(&c);
    let by = dd_page_writes_by_cgroup(&c);
    assert_eq!(by.get(&Some(a.path.clone())), Some(&(8 << 20)), "{by:?}");
    assert_eq!(by.get(&Some(b.path.clone())), Some(&(3 << 20)), "{by:?}");
    assert_eq!(by.values().sum::<u64>(), 11 << 20, "{by:?}");

    // Recorded without `--all-cgroups`: one note, no cgroups, the same bytes charged.
    let without = dir.path().join("nocg.data");
    record(
        &fs,
        &without,
        |l| {
            assert!(l.contains(" --all-cgroups"), "{l}");
            l.replacen(" --all-cgroups", "", 1)
        },
        &work.replace(&format!("mkdir {}; ", b.dir.display()), ""),
    );
    let c = open_perf_data(&without, &PerfDataOptions::default()).unwrap();
    let notes: Vec<&String> = c.notes.iter().filter(|n| n.contains("cgroup")).collect();
    assert_eq!(notes.len(), 1, "{:?}", c.notes);
    assert!(notes[0].contains("--all-cgroups"), "{notes:?}");
    assert!(c.trace.cgroups().is_empty());
    let by = dd_page_writes_by_cgroup(&c);
    assert_eq!(by, BTreeMap::from([(None, 11 << 20)]));
    drop(fs);
}

#[test]
fn clockid_gives_clock_and_start_times() {
    if !can_record() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let p: PathBuf = dir.path().join("mono.data");
    sh(&format!(
        "perf record -a -k mono -e sched:sched_process_exec -o {} -- sh -c 'ls >/dev/null' 2>&1",
        p.display()
    ));
    let c = open_perf_data(&p, &PerfDataOptions::default()).unwrap();
    let h = c.trace.header();
    assert_eq!(h.clock_id, 1);
    assert!(h.start_time_ns > 1_600_000_000_000_000_000, "{h:?}");
    assert!(h.start_clock_ns > 0);
}

#[test]
fn kallsyms_option_is_used() {
    if !can_record() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("k.data");
    sh(&format!(
        "perf record -a -e sched:sched_process_exec -o {} -- true 2>&1",
        p.display()
    ));
    let k = dir.path().join("kallsyms");
    std::fs::write(&k, "ffffffff81000000 T _stext\n").unwrap();
    let c = open_perf_data(
        &p,
        &PerfDataOptions {
            kallsyms: Some(k.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        c.trace.metadata().kallsyms.as_ref().unwrap().text,
        "ffffffff81000000 T _stext\n"
    );
    // The recording's kernel map says where `_text` was: a copy from another boot is shifted.
    let here = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let text_at = here
        .lines()
        .find_map(|l| l.strip_suffix(" T _text"))
        .map(|a| u64::from_str_radix(a, 16).unwrap())
        .unwrap();
    if text_at != 0 {
        let other_boot = format!(
            "{:016x} T _text\n{:016x} T some_function\n",
            text_at + 0x200000,
            text_at + 0x201000
        );
        std::fs::write(&k, other_boot).unwrap();
        let c = open_perf_data(
            &p,
            &PerfDataOptions {
                kallsyms: Some(k.clone()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            c.trace.metadata().kallsyms.as_ref().unwrap().text,
            format!(
                "{text_at:016x} T _text\n{:016x} T some_function\n",
                text_at + 0x1000
            )
        );
        assert!(
            c.notes.iter().any(|n| n.contains("another boot")),
            "{:?}",
            c.notes
        );
    }
    let missing = dir.path().join("nope");
    assert!(matches!(
        open_perf_data(
            &p,
            &PerfDataOptions {
                kallsyms: Some(missing),
                ..Default::default()
            }
        ),
        Err(PerfDataError::Kallsyms { .. })
    ));
}

/// Records `workload` with the `perf-command` line in pipe mode (`-o -`, stdout into `out`),
/// adapted by `edit`.
fn record_pipe(fs: &LoopFs, out: &Path, edit: impl Fn(String) -> String, workload: &str) {
    let line = edit(perf_command(&[fs.name()], Stacks::Exact).expect("perf_command"));
    let tail = " -o perf.data -- COMMAND";
    assert!(line.ends_with(tail), "{line}");
    sh(&format!(
        "{} -o - -- sh -c '{workload}' 2>/dev/null > {}",
        &line[..line.len() - tail.len()],
        out.display()
    ));
}

/// Every decoded event of a converted recording, as text.
fn event_texts(c: &Converted) -> Vec<String> {
    let t = &c.trace;
    let d = ioblame_decode::Decoder::new(t.header(), t.metadata());
    let mut out = Vec::new();
    for ch in t.chunks() {
        let dc = d.decode_chunk(&t.decompress(ch).unwrap());
        out.extend(dc.events.iter().map(|e| format!("{e:?}")));
    }
    out
}

#[test]
fn pipe_mode_converts_every_record_perf_sees() {
    if !can_record() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fs = LoopFs::new();
    let dir = tempfile::tempdir().unwrap();
    for z in [false, true] {
        let pipe = dir.path().join(format!("pipe-{z}.data"));
        let edit = |l: String| {
            if z {
                l.replacen("perf record", "perf record -z", 1)
            } else {
                l
            }
        };
        record_pipe(&fs, &pipe, edit, &workload(&fs));
        assert_eq!(&std::fs::read(&pipe).unwrap()[8..16], &16u64.to_le_bytes());
        let from_pipe = open_perf_data(&pipe, &PerfDataOptions::default()).unwrap();
        // Standard input: the same stream through a reader that cannot seek.
        let stdin = std::fs::File::open(&pipe).unwrap();
        let from_stdin = ioblame_perfdata::read_perf_data(
            Path::new("standard input"),
            std::io::BufReader::new(stdin),
            &PerfDataOptions::default(),
        )
        .unwrap();
        // Every record perf sees in the stream is converted (perf 6.1's `perf inject` cannot
        // turn such a stream into a file: it stops at the tracing data; `perf report` reads it).
        assert_eq!(converted_counts(&from_pipe), perf_counts(&pipe), "-z {z}");
        assert!(converted_counts(&from_pipe)["SAMPLE"] > 100, "-z {z}");
        decode_all(&from_pipe);
        // The same events from standard input; the workload's answer: dd's 4 MiB, by page,
        // with stacks.
        assert_eq!(event_texts(&from_pipe), event_texts(&from_stdin), "-z {z}");
        let (bytes, stacks) = dd_writes(&from_pipe);
        assert_eq!(bytes, 4 << 20, "-z {z}");
        assert!(stacks > 0, "-z {z}");
        let tracepoints = from_pipe
            .trace
            .metadata()
            .events
            .iter()
            .filter(|e| e.tracefs_id != 0)
            .count();
        let line = perf_command(&[fs.name()], Stacks::Exact).unwrap();
        assert_eq!(tracepoints, line.matches(" -e ").count(), "-z {z}");
    }
}

/// Record boundaries of a perf.data file's data section, or of a pipe-mode stream.
fn record_boundaries(b: &[u8]) -> Vec<usize> {
    let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
    let (mut o, end) = if u64at(8) == 16 {
        (16, b.len())
    } else {
        (u64at(40), u64at(40) + u64at(48))
    };
    let mut cuts = vec![o];
    while o + 8 <= end {
        let size = u16::from_le_bytes([b[o + 6], b[o + 7]]) as usize;
        let kind = u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        if size < 8 {
            break;
        }
        o += size;
        if kind == 66 {
            // HEADER_TRACING_DATA: its data follows the record.
            o += u32::from_le_bytes(b[o - size + 8..o - size + 12].try_into().unwrap()) as usize;
        }
        cuts.push(o.min(end));
    }
    cuts
}

/// Every variant of perf.data this host can make, in file and pipe mode: with and without
/// `-z`, with and without callchains, and a cpu-clock profile with no tracepoint at all.
/// Each, recorded with the `perf-command` line (the cpu-clock profile with its own), converts,
/// decodes and attributes without a panic. Then small recordings of the same variants (two
/// events, one task: a few hundred records), cut at every record boundary and inside the
/// header, each give a trace or a one-line error.
#[test]
fn every_variant_and_every_cut_answers() {
    if !can_record() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fs = LoopFs::new();
    let dir = tempfile::tempdir().unwrap();
    let small = format!(
        "dd if=/dev/zero of={}/v bs=64k count=4 oflag=direct 2>/dev/null",
        fs.mnt.path().display()
    );
    let variants = [
        ("file", ""),
        ("file -z", "-z"),
        ("file no callchains", "nocc"),
        ("pipe", "pipe"),
        ("pipe -z", "pipe -z"),
        ("pipe no callchains", "pipe nocc"),
    ];
    let attribute = |c: &Converted| {
        let d = ioblame_decode::Decoder::new(c.trace.header(), c.trace.metadata());
        ioblame_attrib::attribute_trace(
            &c.trace,
            &d,
            ioblame_attrib::Context::from_trace(c.trace.header(), c.trace.metadata()),
        )
    };
    for (name, how) in variants {
        let p = dir.path().join(name.replace(' ', "_"));
        let edit = |l: String| {
            let l = if how.contains("nocc") {
                l.replace("/call-graph=fp/", "")
                    .replace(" --kernel-callchains", "")
            } else {
                l
            };
            if how.contains("-z") {
                l.replacen("perf record", "perf record -z", 1)
            } else {
                l
            }
        };
        if how.contains("pipe") {
            record_pipe(&fs, &p, edit, &small);
        } else {
            record(&fs, &p, edit, &small);
        }
        let c = open_perf_data(&p, &PerfDataOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(converted_counts(&c)["SAMPLE"] > 0, "{name}");
        let (ios, _) = attribute(&c);
        assert!(!ios.is_empty(), "{name}");
    }

    // Small recordings for the cuts; symbols from a one-line file (this host's
    // /proc/kallsyms, read at every cut, would make the test slow).
    let ks = dir.path().join("kallsyms");
    std::fs::write(&ks, "ffffffff81000000 T _text\n").unwrap();
    let opts = PerfDataOptions {
        kallsyms: Some(ks),
        ..Default::default()
    };
    let events = "-e block:block_bio_queue/call-graph=fp/ -e block:block_rq_complete";
    let cuts_of = [
        ("file", format!("{events} --kernel-callchains -o {{}}")),
        ("file -z", format!("-z {events} -o {{}}")),
        ("pipe", format!("{events} --kernel-callchains -o - > {{}}")),
        ("pipe -z", format!("-z {events} -o - > {{}}")),
        (
            "cpu-clock file",
            "-e cpu-clock -c 100000 -g -o {}".to_string(),
        ),
        (
            "cpu-clock pipe",
            "-e cpu-clock -c 100000 -g -o - > {}".to_string(),
        ),
    ];
    for (name, args) in cuts_of {
        let p = dir.path().join(format!("small {name}").replace(' ', "_"));
        sh(&format!(
            "perf record -q {} -- {small} 2>/dev/null",
            args.replace("{}", &p.display().to_string())
        ));
        let c = open_perf_data(&p, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        attribute(&c);
        if name.starts_with("cpu-clock") {
            // No tracepoint: the notes say what is missing.
            assert!(
                c.notes
                    .iter()
                    .any(|n| n.contains("block:block_rq_complete")),
                "{name}: {:?}",
                c.notes
            );
        }
        let bytes = std::fs::read(&p).unwrap();
        let mut cuts = record_boundaries(&bytes);
        cuts.extend([0, 8, 15, 16, 17, 103, 104, 105]);
        let mut read = 0;
        for &cut in &cuts {
            let cut = cut.min(bytes.len());
            match ioblame_perfdata::perf_data_from_bytes(
                Path::new("cut.data"),
                bytes[..cut].to_vec(),
                &opts,
            ) {
                Ok(c) => {
                    read += 1;
                    attribute(&c);
                }
                Err(e) => {
                    let msg = e.to_string();
                    assert!(!msg.contains('\n'), "{name} cut at {cut}: {msg}");
                }
            }
        }
        // A stream cut after its header records still reads; a file cut short does not.
        if name.contains("pipe") {
            assert!(
                read * 2 > cuts.len(),
                "{name}: {read} of {} cuts read",
                cuts.len()
            );
        }
    }
}
