//! Issue 8: a perf.data recording and an ioblame capture of the same workload give the same
//! attribution.
//!
//! `ioblame-capture record` and `perf record` (the exact line [`perf_command`] prints) record
//! system-wide at the same time, the capture running perf which runs the workload, so both
//! see every event of the workload. Both traces go through the same decode + attribution
//! (as `ioblame analyze` does it), and the acts of the workload's processes must agree
//! exactly: role comm, via and inode, with the same bytes and IO count per direction, and the
//! same intents (writeback modifier and kernel stack).
//!
//! The workload is the ground truth of the attribution issue, in one script under one
//! recording per filesystem (ext4 and xfs): two writers and a `sync` by a third task, an
//! fsync by another task, an overwrite of allocated blocks (fsync by the writer), an
//! O_DIRECT write and read, and a buffered read of a cold file (readahead). Its known
//! answer is checked too.
//!
//! Needs root, loop devices, mkfs.ext4, mkfs.xfs and `/usr/bin/perf`; skips otherwise, except
//! in CI (`CI` set) where that is a failure. The `ioblame-capture` binary is taken from the
//! target directory this test runs from, and built there with cargo when missing.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use std::process::Command;
use std::time::Instant;

use ioblame_attrib::{attribute_trace, Attribution, Context, Io, Via};
use ioblame_decode::{Decoder, Symbolizer};
use ioblame_format::Trace;
use ioblame_perfdata::{open_perf_data, perf_command, PerfDataOptions};

const MIB: u64 = 1 << 20;

/// An act as compared: role comm, via and inode.
type Key = (String, Via, u64);

#[path = "../../../capture/tests/common/mod.rs"]
mod common;

use common::LoopFs;

/// Decode + attribution of a whole trace, as `ioblame analyze` runs it.
fn attribute(trace: &Trace) -> (Vec<Io>, Attribution) {
    let decoder = Decoder::new(trace.header(), trace.metadata());
    assert!(decoder.problems().is_empty(), "{:?}", decoder.problems());
    let mut ctx = Context::from_trace(trace.header(), trace.metadata());
    let k = trace.metadata().kallsyms.as_ref().expect("kernel symbols");
    ctx.symbols = Some(Box::new(Symbolizer::from_kallsyms(&k.text)));
    attribute_trace(trace, &decoder, ctx)
}

/// Per direction (R, A, W): bytes and IO count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Tot {
    bytes: [u64; 3],
    ios: [u64; 3],
}

/// The workload's acts, keyed by (role comm, via, inode), with their totals summed over the
/// IOs charged to them.
fn workload_acts(ios: &[Io], out: &Attribution, comms: &[&str]) -> BTreeMap<Key, Tot> {
    acts_where(ios, out, |c| comms.contains(&c))
}

fn acts_where(ios: &[Io], out: &Attribution, keep: impl Fn(&str) -> bool) -> BTreeMap<Key, Tot> {
    let t = &out.tables;
    let mut m: BTreeMap<Key, Tot> = BTreeMap::new();
    for io in ios {
        let act = &t.acts[io.act.index()];
        let comm = &t.roles[act.role.index()].comm;
        if !keep(comm) {
            continue;
        }
        let e = m.entry((comm.clone(), act.via, act.file.ino)).or_default();
        e.bytes[io.dir.index()] += io.size;
        e.ios[io.dir.index()] += 1;
    }
    m
}

fn show(m: &BTreeMap<Key, Tot>) -> String {
    m.iter()
        .map(|((c, v, i), t)| {
            format!(
                "  {c} {} ino {i}: R {} B/{} A {} B/{} W {} B/{}\n",
                v.name(),
                t.bytes[0],
                t.ios[0],
                t.bytes[1],
                t.ios[1],
                t.bytes[2],
                t.ios[2]
            )
        })
        .collect()
}

/// The workload's tools: renamed copies of dd and sync, one comm per role. The names are
/// this test's own: sync(2) reaches every filesystem, so a `sync` run by anything else on the
/// host between the start of the capture and the start of perf (or between their ends)
/// writes this filesystem's journal too, and must not be taken for the workload's.
const TOOLS: &[(&str, &str)] = &[
    ("pdWriterA", "dd"),
    ("pdWriterB", "dd"),
    ("pdSyncer", "sync"),
    ("pdWriterW", "dd"),
    ("pdFsyncer", "sync"),
    ("pdWriterO", "dd"),
    ("pdWriterD", "dd"),
    ("pdReaderR", "dd"),
    ("pdReaderA", "dd"),
];

/// Records the ground-truth workload on a fresh `fstype` loop device with the capture and
/// perf at once, and compares the two attributions with each other (always strictly) and
/// with the answer: strictly when `strict`, else returning whether the answer held.
///
/// The retry: one run in about fifteen of the whole suite on xfs saw 3 MiB of the 4 MiB of
/// O_DIRECT reads reach the block layer, in both recordings alike (so not a recording
/// fault); unexplained, and not reproduced in isolation. The same answers are asserted
/// without retry in `analyze/tests/ground_truth_live.rs`.
fn compare(fstype: &str, strict: bool) -> bool {
    if !common::ready(&["mkfs.ext4", "mkfs.xfs", "mount", "dd", "sync", "perf"]) {
        return true;
    }
    let _g = common::lock();
    let t0 = Instant::now();
    let cap = common::bin();
    let fs = LoopFs::new(fstype, 320);
    let d = fs.dir.path();
    let comms: Vec<&str> = TOOLS.iter().map(|t| t.0).collect();
    for (n, tool) in TOOLS {
        let p = d.join(n);
        std::fs::copy(format!("/bin/{tool}"), &p)
            .or_else(|_| std::fs::copy(format!("/usr/bin/{tool}"), &p))
            .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (m, e) = (fs.mnt.display(), d.display());
    // Before the recording: o allocated and on disk (overwritten later), r on disk and
    // dropped from the page cache (read cold later).
    let setup = format!(
        "dd if=/dev/urandom of={m}/o bs=1M count=4 conv=fsync status=none && \
         dd if=/dev/urandom of={m}/r bs=1M count=4 conv=fsync status=none && \
         dd if={m}/r iflag=nocache count=0 status=none"
    );
    let o = Command::new("sh").arg("-c").arg(&setup).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let workload = format!(
        "set -e; \
         {e}/pdWriterA if=/dev/urandom of={m}/a bs=1M count=4 status=none & \
         {e}/pdWriterB if=/dev/urandom of={m}/b bs=1M count=4 status=none & wait; \
         {e}/pdSyncer; \
         {e}/pdWriterW if=/dev/urandom of={m}/w bs=1M count=4 status=none; \
         {e}/pdFsyncer {m}/w; \
         {e}/pdWriterO if=/dev/urandom of={m}/o bs=1M count=4 conv=notrunc,fsync status=none; \
         {e}/pdWriterD if=/dev/urandom of={m}/d bs=1M count=4 oflag=direct status=none; \
         {e}/pdReaderR if={m}/d of=/dev/null bs=256k iflag=direct status=none; \
         {e}/pdReaderA if={m}/r of=/dev/null bs=128k status=none; \
         sleep 0.2"
    );
    let line = perf_command(
        std::slice::from_ref(&fs.name),
        ioblame_perfdata::Stacks::Exact,
    )
    .expect("perf_command");
    let tail = " -o perf.data -- COMMAND";
    assert!(line.ends_with(tail), "{line}");
    assert!(
        !line.contains(" -g "),
        "callchains per event, not -g: {line}"
    );
    let perf_data = d.join("perf.data");
    let perf_line = format!(
        "{} -o {} -- sh -c '{workload}' 2>{}",
        &line[..line.len() - tail.len()],
        perf_data.display(),
        d.join("perf.log").display()
    );
    let cap_dir = d.join("capture");
    let o = Command::new(&cap)
        .args(["record", "-o"])
        .arg(&cap_dir)
        .args(["--devices", &fs.name, "--", "sh", "-c", &perf_line])
        .output()
        .unwrap();
    let perf_log = std::fs::read_to_string(d.join("perf.log")).unwrap_or_default();
    assert!(
        o.status.success(),
        "{fstype}: capture (running perf) failed: {}\nperf: {perf_log}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ino = |n: &str| std::fs::metadata(fs.mnt.join(n)).unwrap().ino();
    let t_rec = t0.elapsed();

    let ours = Trace::open(&cap_dir).unwrap();
    assert!(ours.problems().is_empty(), "{:?}", ours.problems());
    let conv = open_perf_data(&perf_data, &PerfDataOptions::default()).unwrap();
    assert!(
        conv.trace.problems().is_empty(),
        "{:?}",
        conv.trace.problems()
    );
    let (ios_c, out_c) = attribute(&ours);
    let (ios_p, out_p) = attribute(&conv.trace);
    for (what, out) in [("capture", &out_c), ("perf.data", &out_p)] {
        assert_eq!(
            out.summary.lost_records, 0,
            "{fstype} {what}: {:?}",
            out.summary
        );
    }
    let acts_c = workload_acts(&ios_c, &out_c, &comms);
    let acts_p = workload_acts(&ios_p, &out_p, &comms);
    let others = acts_where(&ios_c, &out_c, |c| !comms.contains(&c));
    let report = format!(
        "{fstype}: capture acts:\n{}perf.data acts:\n{}other acts of the capture:\n{}perf notes: {:?}",
        show(&acts_c),
        show(&acts_p),
        show(&others),
        conv.notes
    );
    eprintln!("{report}");

    // Diagnostics only (not compared): the whole traces, whose first and last moments differ
    // (the capture starts before perf and stops after it, so e.g. a jbd2 commit may fall in
    // one only).
    for (what, ios, out) in [("capture", &ios_c, &out_c), ("perf.data", &ios_p, &out_p)] {
        eprintln!(
            "{fstype} {what}: all IO {} B in {} IOs, {} acts",
            out.summary.total_bytes(),
            ios.len(),
            out.tables.acts.len()
        );
    }

    // Both give the same acts with the same bytes and IO counts; the shares of the journal
    // (docs/attribution.md, "Journal IO") aside: they divide each commit among the handles
    // the recording saw, and the capture, started before perf and stopped after it, sees
    // more of them (a flusher's, ext4lazyinit's), so the workload's shares of one commit
    // differ by a few KiB (and a commit after perf stopped is the capture's alone).
    let data = |m: &BTreeMap<Key, Tot>| -> BTreeMap<Key, Tot> {
        m.iter()
            .filter(|(k, _)| k.1 != Via::Journal)
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    assert_eq!(data(&acts_c), data(&acts_p), "{report}");

    // The same intents too: per act key, the writeback modifiers and kernel stacks, cut to
    // the capture's 32 frames (perf records deeper stacks).
    let intents = |ios: &[Io], out: &Attribution| {
        let t = &out.tables;
        let mut m: BTreeMap<Key, BTreeSet<(u32, Vec<u64>)>> = BTreeMap::new();
        for io in ios {
            let a = &t.acts[io.act.index()];
            let comm = &t.roles[a.role.index()].comm;
            // Journal acts aside, as above.
            if comms.contains(&comm.as_str()) && a.via != Via::Journal {
                let i = &t.intents[a.intent.index()];
                let stack = i.stack[..i.stack.len().min(32)].to_vec();
                m.entry((comm.clone(), a.via, a.file.ino))
                    .or_default()
                    .insert((i.modifier, stack));
            }
        }
        m
    };
    let (ic, ip) = (intents(&ios_c, &out_c), intents(&ios_p, &out_p));
    assert_eq!(ic, ip, "{fstype}: intents of the workload's acts");
    assert!(
        ic.values().flatten().any(|(_, stack)| !stack.is_empty()),
        "{fstype}: the intents have stacks"
    );

    // And the ground truth. A miss is retried once with a new recording (see below); the
    // comparison above is never retried.
    let mut missed: Vec<String> = Vec::new();
    macro_rules! truth_eq {
        ($a:expr, $b:expr, $($m:tt)*) => {{
            let (a, b) = ($a, $b);
            if a != b {
                missed.push(format!("{a:?} != {b:?}: {}", format!($($m)*)));
            }
        }};
    }
    macro_rules! truth {
        ($c:expr, $($m:tt)*) => {{
            if !$c {
                missed.push(format!($($m)*));
            }
        }};
    }
    let bytes = |comm: &str, vias: &[Via], ino: u64, dir: usize| -> u64 {
        acts_c
            .iter()
            .filter(|((c, v, i), _)| c == comm && vias.contains(v) && *i == ino)
            .map(|(_, t)| t.bytes[dir])
            .sum()
    };
    let data = [Via::Page, Via::Buffer];
    let (r, a, w) = (0, 1, 2);
    for (comm, file) in [
        ("pdWriterA", "a"),
        ("pdWriterB", "b"),
        ("pdWriterW", "w"),
        ("pdWriterO", "o"),
    ] {
        truth_eq!(
            bytes(comm, &data, ino(file), w),
            4 * MIB,
            "{comm} on {file}: {report}"
        );
    }
    truth_eq!(
        bytes("pdWriterD", &[Via::Direct], ino("d"), w),
        4 * MIB,
        "{report}"
    );
    truth_eq!(
        bytes("pdReaderR", &[Via::Direct], ino("d"), r),
        4 * MIB,
        "{report}"
    );
    let cold = bytes("pdReaderA", &[Via::Read, Via::Readahead], ino("r"), r)
        + bytes("pdReaderA", &[Via::Read, Via::Readahead], ino("r"), a);
    truth_eq!(cold, 4 * MIB, "cold read: {report}");
    truth!(
        bytes("pdReaderA", &[Via::Read, Via::Readahead], ino("r"), a) > 0,
        "readahead: {report}"
    );
    // The tasks that only synced are charged no data.
    let sum = |f: &dyn Fn(&Key) -> bool, dir: usize| -> u64 {
        acts_c
            .iter()
            .filter(|(k, _)| f(k))
            .map(|(_, t)| t.bytes[dir])
            .sum()
    };
    for who in ["pdSyncer", "pdFsyncer"] {
        truth_eq!(sum(&|k| k.0 == who && k.2 != 0, w), 0, "{who}: {report}");
    }
    // Nothing else of the files' data: 20 MiB written, 8 MiB read. Metadata (ino 0: bitmaps,
    // inode tables, directory blocks) is small.
    truth_eq!(sum(&|k| k.2 != 0, w), 20 * MIB, "all data writes: {report}");
    truth_eq!(
        sum(&|k| k.2 != 0, r) + sum(&|k| k.2 != 0, a),
        8 * MIB,
        "all data reads: {report}"
    );
    let meta: u64 = (0..3).map(|dir| sum(&|k| k.2 == 0, dir)).sum();
    truth!(meta < 512 * 1024, "metadata {meta} B: {report}");
    eprintln!(
        "compare_capture {fstype}: recording {t_rec:?}, total {:?}",
        t0.elapsed()
    );
    if strict && !missed.is_empty() {
        panic!(
            "{fstype}: ground truth missed twice:\n{}",
            missed.join("\n")
        );
    }
    for m in &missed {
        eprintln!("{fstype}: ground truth missed (retrying with a new recording): {m}");
    }
    missed.is_empty()
}

#[test]
fn ext4_perf_data_and_capture_give_the_same_acts() {
    if !compare("ext4", false) {
        compare("ext4", true);
    }
}

#[test]
fn xfs_perf_data_and_capture_give_the_same_acts() {
    if !compare("xfs", false) {
        compare("xfs", true);
    }
}
