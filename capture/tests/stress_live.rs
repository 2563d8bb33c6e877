//! The recorder under stress, on a real kernel (root, loop devices; skipped elsewhere unless
//! `CI` is set): killed at several moments of a heavy workload, its rings overflowing, its
//! ring of files capped under sustained load, and its trace read while it is still being
//! written (every complete chunk, and how far it is complete by its FLUSHED marks). Each test records a few seconds. (The output filesystem filling up is
//! `record_live.rs`'s `full_disk_fails_cleanly`.)

mod common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use ioblame_format::{block, ring_file_name, RawRecord, Trace, TraceFile, EVENT_TASK_RECORDS};

/// A heavy workload on `lfs`: writers that fsync 8 MiB files in a loop, and a reader, until
/// dropped.
struct Workload(Vec<Child>);

impl Workload {
    fn start(lfs: &LoopFs) -> Workload {
        let m = lfs.mnt.display();
        let w = |i: u32| {
            format!(
                "while :; do dd if=/dev/zero of={m}/w{i} bs=1M count=8 conv=fsync 2>/dev/null; \
                 dd if={m}/w{i} of=/dev/null bs=64k iflag=direct 2>/dev/null; done"
            )
        };
        Workload(
            (0..2)
                .map(|i| {
                    Command::new("sh")
                        .args(["-c", &w(i)])
                        .spawn()
                        .expect("start the workload")
                })
                .collect(),
        )
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

/// What each test records on: the lock held, an ext4 loop device under the heavy workload,
/// and the path of the trace to write there; `None` (skipped) without root and loop devices.
fn under_load(
    trace: &str,
) -> Option<(
    std::sync::MutexGuard<'static, ()>,
    LoopFs,
    Workload,
    std::path::PathBuf,
)> {
    if !ready(&["dd"]) {
        return None;
    }
    let g = lock();
    let lfs = LoopFs::new("ext4", 400);
    let work = Workload::start(&lfs);
    let out = lfs.dir.path().join(trace);
    Some((g, lfs, work, out))
}

/// CLOCK_MONOTONIC now, in ns: the recorder's perf clock.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The recorder's command on `lfs`'s device, writing to `out`, with `extra` arguments.
fn recorder(lfs: &LoopFs, out: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(["record", "-o"])
        .arg(out)
        .args(["--devices", &lfs.name, "--no-paths"])
        .args(extra);
    c
}

/// Starts the recorder on `lfs`'s device, writing to `out`, with `extra` arguments.
fn start_recorder(lfs: &LoopFs, out: &Path, extra: &[&str]) -> Child {
    recorder(lfs, out, extra)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the recorder")
}

/// Waits until the recorder has created its first ring file in `out` (it writes the header
/// and the metadata before it enables the events): recording starts about then. A debug build
/// on a loaded machine takes seconds to get there.
fn wait_for_start(out: &Path, rec: &mut Child) {
    let first = out.join("ioblame-000000.iob");
    let t0 = Instant::now();
    while !first.metadata().is_ok_and(|m| m.len() > 0) {
        assert!(
            rec.try_wait().unwrap().is_none(),
            "the recorder exited before it started"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the recorder did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The latest record time of the trace's chunks (perf clock, ns).
fn last_time(t: &Trace) -> u64 {
    t.chunks()
        .iter()
        .map(|c| c.header.last_ts)
        .max()
        .unwrap_or(0)
}

#[test]
fn sigkill_at_several_moments_loses_at_most_the_last_second() {
    let Some((_g, lfs, _work, base)) = under_load("killed") else {
        return;
    };
    for (i, after) in [1300u64, 2700, 4100].into_iter().enumerate() {
        let out = base.with_file_name(format!("killed-{i}"));
        let mut rec = start_recorder(&lfs, &out, &[]);
        wait_for_start(&out, &mut rec);
        std::thread::sleep(Duration::from_millis(after));
        let killed_at = monotonic_ns();
        rec.kill().unwrap();
        rec.wait().unwrap();
        // The trace reads: every complete chunk, its last file unclosed.
        let p = parse(&out);
        let t = &p.trace;
        assert!(
            !t.files().last().unwrap().indexed(),
            "killed after {after} ms"
        );
        assert!(
            p.of("block:block_rq_complete").count() > 0,
            "killed after {after} ms: no completions read back"
        );
        // At most about the last second is missing: the recorder hands each CPU's records
        // to its writer at least once a second, and the writer writes them at once (2 s:
        // a debug build on a loaded machine may lag).
        let end = last_time(t);
        let gap_ms = killed_at.saturating_sub(end) / 1_000_000;
        eprintln!("killed {after} ms into the recording: the trace ends {gap_ms} ms before");
        assert!(
            gap_ms <= 2000,
            "killed after {after} ms: the trace ends {gap_ms} ms before the kill"
        );
    }
}

#[test]
fn ring_overflow_counts_every_lost_record() {
    let Some((_g, lfs, _work, out)) = under_load("overflow") else {
        return;
    };
    // Two pages per CPU under two fsyncing writers: the kernel drops records.
    let rec = start_recorder(&lfs, &out, &["--buffer-size", "8k", "--duration", "3s"]);
    let o = rec.wait_with_output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{e}");
    let said: u64 = e
        .lines()
        .find_map(|l| l.split("the kernel dropped ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no lost records reported: {e}"));
    assert!(said > 0);
    // The chunks' headers and the LOST records they hold count the same records as the
    // recorder said, exactly.
    let p = parse(&out);
    assert_eq!(p.lost, said, "{e}");
    let t = &p.trace;
    let mut in_records = 0u64;
    for c in t.chunks() {
        let chunk = t.decompress(c).unwrap();
        for r in chunk.records(t.header().byte_order) {
            let r = r.unwrap();
            if r.kind == 2 {
                // PERF_RECORD_LOST: id, lost.
                in_records += u64::from_ne_bytes(r.bytes[16..24].try_into().unwrap());
            } else if r.kind == 13 {
                // PERF_RECORD_LOST_SAMPLES: lost.
                in_records += u64::from_ne_bytes(r.bytes[8..16].try_into().unwrap());
            }
        }
    }
    assert_eq!(in_records, said);
    // The analysis marks the windows and the bytes they touch.
    let decoder = ioblame_decode::Decoder::new(t.header(), t.metadata());
    let (ios, a) = ioblame_attrib::attribute_trace(
        t,
        &decoder,
        ioblame_attrib::Context::from_trace(t.header(), t.metadata()),
    );
    assert_eq!(a.summary.lost_records, said);
    assert!(!a.summary.lost_windows.is_empty());
    assert_eq!(
        a.summary.lost_windows.iter().map(|w| w.count).sum::<u64>(),
        said
    );
    // The IOs marked, the acts' bytes in lost windows (`acts --json`'s
    // `lost_window_bytes`) and the summary agree.
    let marked: u64 = ios
        .iter()
        .filter(|io| io.in_lost_window)
        .map(|io| io.size)
        .sum();
    let per_act: u64 = a.tables.totals.iter().map(|t| t.lost_window_bytes).sum();
    assert_eq!(marked, a.summary.bytes_in_lost_windows);
    assert_eq!(per_act, a.summary.bytes_in_lost_windows);
}

#[test]
fn max_size_keeps_disk_use_bounded_under_sustained_load() {
    let Some((_g, lfs, _work, out)) = under_load("ring") else {
        return;
    };
    // A file size of 1 KiB is raised to twice the metadata every file begins with (about
    // 1 MiB here: the kernel's symbols), F, learnt from a first short run; the cap, 3F, holds
    // two files, their last blocks and some more.
    let probe = recorder(
        &lfs,
        &out.with_file_name("probe"),
        &[
            "--file-size",
            "1k",
            "--max-size",
            "0",
            "--duration",
            "200ms",
        ],
    )
    .output()
    .unwrap();
    let e = String::from_utf8_lossy(&probe.stderr);
    assert!(probe.status.success(), "{e}");
    let fitted: u64 = e
        .split("files roll at ")
        .nth(1)
        .and_then(|r| r.split(['(', ' ']).find_map(|w| w.parse().ok()))
        .unwrap_or_else(|| panic!("no fitted file size: {e}"));
    let max_size = 3 * fitted;
    let cap = max_size.to_string();
    let mut rec = start_recorder(
        &lfs,
        &out,
        &[
            "--events",
            "full",
            "--stacks",
            "all",
            "--file-size",
            "1k",
            "--max-size",
            &cap,
        ],
    );
    wait_for_start(&out, &mut rec);
    // Disk use sampled while recording: the files before the newest (the one being written)
    // never pass the cap. Sampled until the first files have gone and a second more (a few
    // seconds of this load), at most a minute.
    let t0 = Instant::now();
    let (mut most, mut samples) = (0u64, 0u32);
    let mut deleted_at = None;
    while deleted_at.is_none_or(|t: Instant| t.elapsed() < Duration::from_secs(1)) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no ring file was deleted in a minute"
        );
        let mut files: Vec<(std::path::PathBuf, u64)> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .filter_map(|e| Some((e.path(), e.metadata().ok()?.len())))
            .filter(|(p, _)| p.extension().is_some_and(|x| x == "iob"))
            .collect();
        files.sort();
        if files.len() > 1 {
            let closed: u64 = files[..files.len() - 1].iter().map(|f| f.1).sum();
            most = most.max(closed);
            samples += 1;
        }
        if deleted_at.is_none() && !files.iter().any(|f| f.0.ends_with(ring_file_name(0))) {
            deleted_at = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let o = rec.wait_with_output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{e}");
    assert!(e.contains("files roll at"), "{e}");
    assert!(
        samples > 0 && most <= max_size,
        "{most} bytes in closed files"
    );
    // The oldest files went; what remains reads and decodes, and holds at least a closed
    // file of events (about a second of this load) besides the last.
    let t = Trace::open(&out).unwrap();
    assert!(t.files().len() >= 2, "{} files", t.files().len());
    assert!(t.files().iter().all(|f| f.header().file_index > 0));
    // The only problems: the chunks of the deleted files are missing.
    assert!(
        t.problems()
            .iter()
            .all(|p| p.what.contains("deleted by the size cap")),
        "{:?}",
        t.problems()
    );
    let p = parse(&out);
    assert!(p.of("block:block_rq_complete").count() > 0);
}

#[test]
fn the_recorder_refuses_a_cap_that_cannot_hold_two_ring_files() {
    if !ready(&[]) {
        return;
    }
    let _g = lock();
    let lfs = LoopFs::new("ext4", 64);
    let out = lfs.dir.path().join("refused");
    for (args, says) in [
        (
            &["--file-size", "1k", "--max-size", "1k"][..],
            "cannot hold two ring files",
        ),
        (
            &["--file-size", "0", "--max-size", "1G"][..],
            "needs ring files that roll",
        ),
    ] {
        let o = recorder(&lfs, &out, args)
            .args(["--duration", "1s"])
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}: {e}");
        assert!(e.contains(says), "{args:?}: {e}");
        assert!(!out.exists(), "{args:?}: the trace directory was created");
    }
}

#[test]
fn a_trace_being_written_reads_every_complete_chunk() {
    let Some((_g, lfs, _work, out)) = under_load("live") else {
        return;
    };
    let mut rec = start_recorder(&lfs, &out, &["--file-size", "1M"]);
    wait_for_start(&out, &mut rec);
    std::thread::sleep(Duration::from_millis(3000));
    // Read while the recorder writes: the last file has no index yet. (Opened again if the
    // open fell between the recorder closing a full file and creating the next one, when
    // the last file found is a closed one.)
    let mut live = Trace::open(&out).unwrap();
    for _ in 0..20 {
        if !live.files().last().unwrap().indexed() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        live = Trace::open(&out).unwrap();
    }
    assert!(!live.files().last().unwrap().indexed());
    assert!(!live.chunks().is_empty());
    for c in live.chunks() {
        live.decompress(c).expect("every chunk found is complete");
    }
    let seen = live.chunks().len();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    assert!(rec.wait().unwrap().success());
    // Closed, the trace holds at least what was read while it was written.
    let done = Trace::open(&out).unwrap();
    assert!(done.files().iter().all(|f| f.indexed()));
    assert!(done.chunks().len() >= seen);
}

/// The perf-clock time of a record: a sample's `TIME` (laid out by its event's
/// `sample_type`, found by its `IDENTIFIER`), else its `sample_id_all` trailer's (laid out
/// by `trailer_type`, the `sample_type` of the event that asks for the task records).
fn record_time(
    r: &RawRecord<'_>,
    order: ioblame_format::ByteOrder,
    types: &HashMap<u64, u64>,
    trailer_type: u64,
) -> Option<u64> {
    use ioblame_decode::record::{parse_sample, parse_sample_id};
    let body = r.body();
    if r.kind == 9 {
        let id = order.u64(body.get(..8)?.try_into().ok()?);
        parse_sample(body, *types.get(&id)?, order).ok()?.time
    } else {
        parse_sample_id(body, trailer_type, order).ok()?.0.time
    }
}

/// The times of the FLUSHED blocks of a trace file, in file order (its blocks walked from the
/// header on; the file must be whole).
fn flushed_marks(path: &Path) -> Vec<u64> {
    let b = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut pos = block::PREAMBLE_LEN;
    while pos + block::BLOCK_HEADER_LEN <= b.len() && b[pos..pos + 4] == block::BLOCK_MAGIC {
        let kind = u16::from_le_bytes([b[pos + 4], b[pos + 5]]);
        let len = u32::from_le_bytes(b[pos + 8..pos + 12].try_into().unwrap()) as usize;
        if kind == block::kind::FLUSHED {
            let p = pos + block::BLOCK_HEADER_LEN;
            out.push(u64::from_le_bytes(b[p..p + 8].try_into().unwrap()));
        }
        pos += block::BLOCK_HEADER_LEN + len;
    }
    out
}

/// What a live reader noted of the newest ring file: when, its index, its last FLUSHED mark
/// and the (cpu, seq) of the chunks it held.
struct Reading {
    at: u64,
    file_index: u32,
    mark: u64,
    chunks: HashSet<(u32, u64)>,
}

#[test]
fn a_live_reader_finds_every_record_below_the_flushed_mark() {
    let Some((_g, lfs, _work, out)) = under_load("flushed") else {
        return;
    };
    // Small files (raised to twice the metadata each begins with, about 2 MiB): the ring
    // rolls while it is read.
    let mut rec = start_recorder(
        &lfs,
        &out,
        &["--flush-interval", "100ms", "--file-size", "1k"],
    );
    wait_for_start(&out, &mut rec);
    // Read the newest file as a follower does, for 3 s and until the ring has rolled (at most
    // 30 s): its mark, and the chunks it holds (the files before it are closed: they hold all
    // they will).
    let mut readings: Vec<Reading> = Vec::new();
    let mut opened = 0;
    let mut rolled = false;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3)
        || (!rolled && t0.elapsed() < Duration::from_secs(30))
    {
        std::thread::sleep(Duration::from_millis(30));
        let newest = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "iob"))
            .max()
            .unwrap();
        // A file just created may not hold its header yet.
        let Ok(f) = TraceFile::open(&newest) else {
            continue;
        };
        let at = monotonic_ns();
        opened += 1;
        rolled |= f.header().file_index > 0;
        // Just rolled: no mark in this file yet (the previous file's holds).
        let Some(mark) = f.flushed() else {
            continue;
        };
        readings.push(Reading {
            at,
            file_index: f.header().file_index,
            mark,
            chunks: f.chunks().iter().map(|(_, h)| (h.cpu, h.seq)).collect(),
        });
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let o = rec.wait_with_output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{e}");
    assert!(
        readings.len() >= 20,
        "{} readings with a mark of {opened}: {e}",
        readings.len()
    );

    // The marks a reader saw increase, and arrive about every 100 ms: when read, the last
    // one is never a second old.
    for w in readings.windows(2) {
        assert!(w[0].mark <= w[1].mark, "marks went back");
    }
    let lag = readings
        .iter()
        .map(|r| r.at.saturating_sub(r.mark))
        .max()
        .unwrap();
    eprintln!(
        "{} readings, {} distinct marks, most lag {} ms",
        readings.len(),
        readings
            .iter()
            .map(|r| r.mark)
            .collect::<HashSet<_>>()
            .len(),
        lag / 1_000_000
    );
    assert!(lag < 1_000_000_000, "a mark lagged {} ms", lag / 1_000_000);

    // The finished trace: every file closed, with its marks increasing across the ring,
    // about every 100 ms (never 1 s apart), the last one taken when recording stopped.
    let t = Trace::open(&out).unwrap();
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    assert!(t.files().len() >= 2, "the ring did not roll");
    assert!(t.files().iter().all(|f| f.indexed()));
    let marks: Vec<u64> = t
        .files()
        .iter()
        .flat_map(|f| flushed_marks(f.path()))
        .collect();
    assert!(marks.len() >= 25, "{} marks", marks.len());
    for w in marks.windows(2) {
        assert!(w[0] < w[1], "marks do not increase: {w:?}");
        assert!(
            w[1] - w[0] < 1_000_000_000,
            "marks {} ms apart",
            (w[1] - w[0]) / 1_000_000
        );
    }
    let spacing = (marks[marks.len() - 1] - marks[0]) / (marks.len() as u64 - 1);
    eprintln!(
        "{} marks, {} ms apart on average",
        marks.len(),
        spacing / 1_000_000
    );
    assert_eq!(t.files().last().unwrap().flushed(), marks.last().copied());
    assert!(*marks.last().unwrap() >= readings.last().unwrap().mark);

    // The promise: every record below a mark read live is in a chunk that was there, in the
    // file read or an earlier one.
    let m = t.metadata();
    let types: HashMap<u64, u64> = m
        .events
        .iter()
        .flat_map(|ev| ev.ids.iter().map(move |id| (*id, ev.sample_type)))
        .collect();
    let trailer_type = m
        .events
        .iter()
        .find(|ev| ev.flags & EVENT_TASK_RECORDS != 0)
        .unwrap()
        .sample_type;
    let order = t.header().byte_order;
    let (mut timed, mut checked) = (0u64, 0u64);
    for c in t.chunks() {
        let file_index = t.files()[c.file].header().file_index;
        let key = (c.header.cpu, c.header.seq);
        let chunk = t.decompress(c).unwrap();
        for r in chunk.records(order) {
            let r = r.unwrap();
            let Some(time) = record_time(&r, order, &types, trailer_type) else {
                continue;
            };
            timed += 1;
            for rd in &readings {
                if time >= rd.mark {
                    continue;
                }
                checked += 1;
                assert!(
                    file_index < rd.file_index
                        || (file_index == rd.file_index && rd.chunks.contains(&key)),
                    "a record at {time} (kind {}) is in chunk {} of cpu {} of file {file_index}, \
                     absent when the mark {} was read in file {}",
                    r.kind,
                    c.header.seq,
                    c.header.cpu,
                    rd.mark,
                    rd.file_index
                );
            }
        }
    }
    eprintln!("{timed} records with a time, {checked} (record, reading) pairs below a mark");
    assert!(timed > 1000, "{timed} records");
    assert!(checked > 1000, "{checked} pairs checked");
}
