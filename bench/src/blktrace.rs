//! The blktrace part of the benchmark: a generated blktrace recording (per-CPU files as
//! `blktrace -d sda` writes them) and `ioblame acts` timed against `blkparse` on it.
//!
//! * `ioblame-bench blktrace-gen -o DIR [--records N] [--seed S]` writes `sda.blktrace.0..3`:
//!   200 tasks (a process notify each, a timestamp notify first) doing buffered writes
//!   (issued by flusher kworkers), sync writes, reads and readahead of 4 KiB to 512 KiB,
//!   each IO as blktrace shows it on a blk-mq disk with a scheduler: Q, G (one in six with a
//!   second bio, Q and M, merged at its back), P, U, I, D; up to 32 requests in flight,
//!   completing (C) out of order on any CPU. Records stream to the files in time order:
//!   memory stays flat.
//! * `ioblame-bench blktrace-vs DIR [--repeat 3]` times, in interleaved rounds, `blkparse -i
//!   sda -D DIR -o /dev/null` and ioblame's analysis as `ioblame acts DIR` runs it (opened
//!   and attributed through `ioblame_pipeline`, in a child `ioblame-bench blktrace-analyze
//!   DIR`), each a whole child process, and prints records/s, the ratio, and each one's
//!   peak resident memory.

use std::collections::BinaryHeap;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use ioblame_blktrace::record::{cat, encode, Order};
use ioblame_blktrace::{Action, Payload, Record};

use crate::measure::group;

/// CPUs of the simulated host (one file each).
const CPUS: u32 = 4;
/// The disk: sda, 8:0.
const SDA: u32 = 8 << 20;
/// Sectors of the disk (1 TiB).
const DISK_SECTORS: u64 = 1 << 31;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The per-CPU files, with their sequence numbers.
struct Out {
    files: Vec<BufWriter<std::fs::File>>,
    seq: Vec<u32>,
    buf: Vec<u8>,
    records: u64,
}

impl Out {
    fn put(&mut self, mut r: Record) -> Result<()> {
        let c = r.cpu as usize;
        if r.categories & cat::NOTIFY == 0 {
            self.seq[c] += 1;
            r.sequence = self.seq[c];
        }
        self.buf.clear();
        encode(&r, Order::Little, &mut self.buf);
        self.files[c].write_all(&self.buf)?;
        self.records += 1;
        Ok(())
    }
}

fn rec(time: u64, cpu: u32, pid: u32, action: Action, cats: u32) -> Record {
    Record::new(time, cpu, pid, action, cats, SDA)
}

/// Writes a recording of at least `records` records into `out`; returns the count.
pub fn generate(out: &Path, records: u64, seed: u64) -> Result<u64> {
    std::fs::create_dir_all(out)?;
    let mut o = Out {
        files: (0..CPUS)
            .map(|c| {
                let f = std::fs::File::create(out.join(format!("sda.blktrace.{c}")))?;
                Ok(BufWriter::with_capacity(1 << 20, f))
            })
            .collect::<Result<_>>()?,
        seq: vec![0; CPUS as usize],
        buf: Vec::new(),
        records: 0,
    };
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut t: u64 = 1_000_000_000;
    let mut ts = rec(t, 0, 0, Action::Timestamp, cat::NOTIFY);
    ts.payload = Payload::Timestamp {
        sec: 1_700_000_000,
        nsec: 0,
    };
    o.put(ts)?;
    // Tasks: 200 workers (pids 1000..), 4 flushers (kworkers), each named once.
    let workers: Vec<u32> = (1000..1200).collect();
    let flushers: Vec<u32> = (50..54).collect();
    for (i, &pid) in workers.iter().chain(&flushers).enumerate() {
        let comm = if pid < 1000 {
            format!("kworker/u8:{}", pid - 50)
        } else {
            format!(
                "{}-{}",
                ["postgres", "java", "cp", "rsync", "nginx"][i % 5],
                i
            )
        };
        let mut n = rec(t, (i as u32) % CPUS, pid, Action::Process, cat::NOTIFY);
        n.payload = Payload::Process { comm };
        o.put(n)?;
    }
    // Per task, where its next IO goes (sequential runs).
    let mut next_sector: Vec<u64> = workers
        .iter()
        .map(|_| rng.below(DISK_SECTORS / 8) * 8)
        .collect();
    // Requests in flight: (completion time, sector, bytes, categories), earliest first.
    let mut inflight: BinaryHeap<std::cmp::Reverse<(u64, u64, u32, u32)>> = BinaryHeap::new();
    while o.records < records {
        t += 2_000 + rng.below(8_000);
        // Completions due by now.
        while let Some(std::cmp::Reverse((ct, s, b, c))) = inflight.peek().copied() {
            if ct > t && inflight.len() < 32 {
                break;
            }
            inflight.pop();
            let mut r = rec(
                ct.max(t - 1_000),
                rng.below(CPUS as u64) as u32,
                0,
                Action::Complete,
                c | cat::COMPLETE,
            );
            r.time = r.time.min(t);
            r.sector = s;
            r.bytes = b;
            o.put(r)?;
        }
        let w = rng.below(workers.len() as u64) as usize;
        let kind = rng.below(100);
        let (pid, cats) = match kind {
            0..=44 => (flushers[w % flushers.len()], cat::WRITE),
            45..=59 => (workers[w], cat::WRITE | cat::SYNC),
            60..=84 => (workers[w], cat::READ | cat::SYNC),
            _ => (workers[w], cat::READ | cat::AHEAD),
        };
        let bytes = 4096u32 << rng.below(8);
        let sector = next_sector[w];
        next_sector[w] = if rng.below(4) == 0 {
            rng.below(DISK_SECTORS / 8) * 8
        } else {
            (sector + (bytes as u64 >> 9)) % DISK_SECTORS
        };
        let cpu = rng.below(CPUS as u64) as u32;
        let mut at = t;
        let mut put = |o: &mut Out, action: Action, extra: u32, sector: u64, bytes: u32| {
            let mut r = rec(at, cpu, pid, action, cats | extra);
            r.sector = sector;
            r.bytes = bytes;
            if action == Action::UnplugIo {
                r.payload = Payload::Unplug { depth: 1 };
            }
            at += 300;
            o.put(r)
        };
        put(&mut o, Action::Queue, cat::QUEUE, sector, bytes)?;
        put(&mut o, Action::GetRq, cat::QUEUE, sector, bytes)?;
        let mut total = bytes;
        if rng.below(6) == 0 {
            // A second bio of the same task, contiguous, merged at the back of the request.
            let more = 4096u32 << rng.below(5);
            let s2 = sector + (bytes as u64 >> 9);
            put(&mut o, Action::Queue, cat::QUEUE, s2, more)?;
            put(&mut o, Action::BackMerge, cat::QUEUE, s2, more)?;
            total += more;
            next_sector[w] = (s2 + (more as u64 >> 9)) % DISK_SECTORS;
        }
        put(&mut o, Action::Plug, cat::QUEUE, 0, 0)?;
        put(&mut o, Action::UnplugIo, cat::QUEUE, 0, 0)?;
        put(&mut o, Action::Insert, cat::QUEUE, sector, total)?;
        put(&mut o, Action::Issue, cat::ISSUE, sector, total)?;
        let done = at + 50_000 + rng.below(400_000);
        inflight.push(std::cmp::Reverse((done, sector, total, cats)));
        t = at;
    }
    while let Some(std::cmp::Reverse((ct, s, b, c))) = inflight.pop() {
        let mut r = rec(ct.max(t), 0, 0, Action::Complete, c | cat::COMPLETE);
        r.sector = s;
        r.bytes = b;
        t = r.time;
        o.put(r)?;
    }
    for f in &mut o.files {
        f.flush()?;
    }
    Ok(o.records)
}

/// Time and peak memory of one child process.
pub(crate) struct Run {
    pub(crate) secs: f64,
    pub(crate) max_rss_kib: u64,
    /// User plus system CPU seconds of the child (and its waited-for children).
    pub(crate) cpu_secs: f64,
}

/// Runs `cmd` to the end with its output discarded; its wall time and peak RSS.
pub(crate) fn run(cmd: &mut Command) -> Result<Run> {
    let t0 = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("{cmd:?}"))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct, filled by wait4.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for; the pointers are to live locals.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let secs = t0.elapsed().as_secs_f64();
    if r != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("{cmd:?} failed (status {status})");
    }
    std::mem::forget(child);
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Run {
        secs,
        max_rss_kib: ru.ru_maxrss as u64,
        cpu_secs: tv(ru.ru_utime) + tv(ru.ru_stime),
    })
}

/// Prints a table of the named runs of a tool over `records` records: the best time,
/// records/s and peak RSS of each.
pub(crate) fn print_runs(records: u64, runs: &[(&str, &Run)]) {
    println!(
        "{:<40} {:>9} {:>14} {:>12}",
        "", "secs", "records/s", "peak RSS"
    );
    for (name, r) in runs {
        println!(
            "{:<40} {:>9.3} {:>14} {:>9} MiB",
            name,
            r.secs,
            group(records as f64 / r.secs),
            r.max_rss_kib / 1024
        );
    }
}

/// What `ioblame acts DIR` runs before printing its table, in this process: the recording
/// opened and attributed through `ioblame_pipeline` (default devices, every IO counted).
/// Prints the records, IOs and bytes.
pub fn analyze(dir: &Path) -> Result<()> {
    let mut notes = Vec::new();
    let input = ioblame_pipeline::open_trace(&[dir.to_path_buf()], None, &mut notes)?;
    let (symbols, _) = ioblame_pipeline::symbols_of(&input);
    let devs = input.default_devs();
    let all = ioblame_pipeline::ResolvedScope::all();
    let opts = ioblame_pipeline::Options {
        symbols: &symbols,
        devs: &devs,
        show_recorder: true,
        scope: &all,
        user_symbols: &Default::default(),
    };
    let mut ios = 0u64;
    let a = ioblame_pipeline::analyze(&input, &opts, |_, _| ios += 1, |_| {});
    let bytes: u64 = a.tables.totals.iter().map(|t| t.total_bytes()).sum();
    println!("{} records, {ios} IOs, {bytes} bytes", a.stream.events);
    Ok(())
}

/// `blkparse` vs ioblame's analysis on the recording in `dir` (device `sda`).
pub fn vs(dir: &Path, repeat: usize) -> Result<()> {
    let me = std::env::current_exe()?;
    let rec = ioblame_blktrace::Recording::open(&[dir.to_path_buf()])?;
    let records = rec.scan().records;
    let bytes: u64 = rec
        .files()
        .filter_map(|(p, _)| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    drop(rec);
    println!(
        "blktrace recording: {records} records, {:.1} MiB; best of {repeat} interleaved rounds",
        bytes as f64 / 1048576.0
    );
    let (mut bp, mut ib): (Option<Run>, Option<Run>) = (None, None);
    let keep = |best: &mut Option<Run>, r: Run| {
        let peak = best
            .as_ref()
            .map_or(0, |b| b.max_rss_kib)
            .max(r.max_rss_kib);
        if best.as_ref().is_none_or(|b| r.secs < b.secs) {
            *best = Some(Run {
                max_rss_kib: peak,
                ..r
            });
        } else if let Some(b) = best {
            b.max_rss_kib = peak;
        }
    };
    for _ in 0..repeat {
        keep(
            &mut bp,
            run(Command::new("blkparse")
                .args(["-i", "sda", "-D"])
                .arg(dir)
                .args(["-o", "/dev/null"]))?,
        );
        keep(
            &mut ib,
            run(Command::new(&me).arg("blktrace-analyze").arg(dir))?,
        );
    }
    let (Some(bp), Some(ib)) = (bp, ib) else {
        bail!("nothing timed");
    };
    print_runs(
        records,
        &[
            ("blkparse -i sda -D DIR -o /dev/null", &bp),
            ("ioblame acts's analysis (2 threads)", &ib),
        ],
    );
    println!("ioblame vs blkparse: x{:.2} records/s", bp.secs / ib.secs);
    Ok(())
}
