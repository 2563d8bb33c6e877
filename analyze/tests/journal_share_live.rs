//! Journal apportioning on a real capture (issue 31, docs/attribution.md "Journal IO"): two
//! programs append to their own files on one fresh ext4, one fsyncing after every write, the
//! other after every fourth. The journal IO of the commits their fsyncs cause must go to
//! them (at least 95% of the journal bytes together, not to `jbd2/…`), split as the blocks
//! their handles dirtied.
//!
//! The expected split is measured independently of ioblame: a tracefs instance of its own
//! records `jbd2:jbd2_handle_stats` of the filesystem's device during the same run, and
//! the blocks the handles of each program's pid dirtied are summed from its text.
//!
//! Needs root, loop devices, tracefs, mkfs.ext4 and python3 (and perf for the `_perf` test);
//! skips otherwise, except in CI.

mod support;

use std::collections::HashMap;
use std::path::PathBuf;

use support::checks::Checks;
use support::{real_python, record_with, tools, LoopFs, Recorder};

/// `appender PATH EVERY N PIDFILE`: N appends of 4 KiB to PATH, an fsync after every
/// EVERY-th and at the end; its pid written to PIDFILE first.
const APPENDER: &str = "import os, sys, time
path, every, n, pidfile = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with open(pidfile, 'w') as f:
    f.write(str(os.getpid()))
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
buf = b'j' * 4096
for i in range(n):
    os.write(fd, buf)
    if (i + 1) % every == 0:
        os.fsync(fd)
    time.sleep(0.002)
os.fsync(fd)
os.close(fd)
";

/// Where tracefs is mounted (`/proc/self/mountinfo`'s first mount of type tracefs), else
/// `/sys/kernel/tracing`.
fn tracefs() -> PathBuf {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split(' ').next() == Some("tracefs"))
                .then(|| left.split(' ').nth(4).map(PathBuf::from))
                .flatten()
        })
        .unwrap_or_else(|| PathBuf::from("/sys/kernel/tracing"))
}

/// A tracefs instance recording `jbd2:jbd2_handle_stats` of one device, removed on drop.
struct HandleStats {
    dir: PathBuf,
}

impl HandleStats {
    fn start(kdev: u32) -> HandleStats {
        let dir = tracefs()
            .join("instances")
            .join(format!("ioblame-journal-share-{}", std::process::id()));
        std::fs::create_dir(&dir).expect("a tracefs instance");
        let g = HandleStats { dir };
        let ev = g.dir.join("events/jbd2/jbd2_handle_stats");
        std::fs::write(g.dir.join("buffer_size_kb"), "8192").unwrap();
        std::fs::write(ev.join("filter"), format!("dev == {kdev}")).unwrap();
        std::fs::write(ev.join("enable"), "1").unwrap();
        std::fs::write(g.dir.join("tracing_on"), "1").unwrap();
        g
    }

    /// Stops and returns the blocks dirtied per pid, and the handles counted.
    fn blocks_per_pid(&self) -> (HashMap<u32, u64>, usize) {
        std::fs::write(self.dir.join("tracing_on"), "0").unwrap();
        let text = std::fs::read_to_string(self.dir.join("trace")).unwrap();
        let mut m: HashMap<u32, u64> = HashMap::new();
        let mut n = 0;
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((head, rest)) = line.split_once(" [") else {
                continue;
            };
            let Some(pid) = head
                .trim()
                .rsplit_once('-')
                .and_then(|(_, p)| p.parse::<u32>().ok())
            else {
                continue;
            };
            let Some(blocks) = rest
                .split_once("dirtied_blocks ")
                .and_then(|(_, b)| b.trim().parse::<u64>().ok())
            else {
                continue;
            };
            *m.entry(pid).or_default() += blocks;
            n += 1;
        }
        (m, n)
    }
}

impl Drop for HandleStats {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("events/jbd2/jbd2_handle_stats/enable"), "0");
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn two_fsync_rates(recorder: Recorder) {
    if !support::ready(&[&["mkfs.ext4", "python3"], recorder.tools()].concat()) {
        return;
    }
    if !ioblame_testkit::need::met(
        tracefs().join("events/jbd2/jbd2_handle_stats").exists(),
        "tracefs with jbd2:jbd2_handle_stats",
    ) {
        return;
    }
    let _g = support::lock();
    let mut check = Checks::new(recorder, "ext4", "journal share");
    let fs = LoopFs::new("ext4", 320);
    let bin = tools(&fs, &[]);
    let py = real_python();
    for name in ["fsyncAll", "fsync4th"] {
        std::os::unix::fs::symlink(&py, bin.join(name)).unwrap();
    }
    let script_py = bin.join("appender.py");
    std::fs::write(&script_py, APPENDER).unwrap();
    let m = fs.mnt.display();
    let pids = fs.dir.path();
    // Their files in directories of their own (other block groups, other inode table
    // blocks), made and on disk before the recording.
    support::sh(&format!("mkdir {m}/a {m}/b && sync -f {m}"));
    let script = format!(
        "set -e
        fsyncAll {py} $M/a/all.dat 1 300 {pids}/all.pid &
        fsync4th {py} $M/b/4th.dat 4 300 {pids}/4th.pid &
        wait
        sleep 0.2",
        py = script_py.display(),
        pids = pids.display(),
    );
    let stats = HandleStats::start(fs.kdev());
    let trace = record_with(recorder, &fs, &bin, "trace", &script, &[]);
    let (blocks, handles) = stats.blocks_per_pid();
    drop(stats);
    let pid_of = |n: &str| -> u32 {
        std::fs::read_to_string(pids.join(n))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let (b_all, b_4th) = (
        blocks.get(&pid_of("all.pid")).copied().unwrap_or(0),
        blocks.get(&pid_of("4th.pid")).copied().unwrap_or(0),
    );
    let acts = support::acts_json(&trace);
    let journal: Vec<&serde_json::Value> = acts.iter().filter(|v| v["via"] == "journal").collect();
    let bytes = |comm: &str| -> u64 {
        journal
            .iter()
            .filter(|v| v["comm"] == comm)
            .map(|v| v["write_bytes"].as_u64().unwrap_or(0))
            .sum()
    };
    let total: u64 = journal
        .iter()
        .map(|v| v["write_bytes"].as_u64().unwrap_or(0))
        .sum();
    let (j_all, j_4th) = (bytes("fsyncAll"), bytes("fsync4th"));
    let per_comm: Vec<String> = journal
        .iter()
        .map(|v| {
            format!(
                "{} {} share {}",
                v["comm"], v["write_bytes"], v["journal_share"]
            )
        })
        .collect();
    let figures = format!(
        "journal bytes: fsyncAll {j_all}, fsync4th {j_4th}, all acts {total}; blocks dirtied \
         (tracefs, {handles} handles): fsyncAll {b_all}, fsync4th {b_4th}; journal acts: \
         {per_comm:#?}"
    );
    eprintln!("{figures}");
    check.context(figures);
    check.truth(
        "the programs' handles dirtied blocks",
        b_all > 0 && b_4th > 0,
        &format!("{b_all} {b_4th}"),
        "> 0",
        "",
    );
    let together = (j_all + j_4th) as f64 / total.max(1) as f64;
    check.truth(
        "the two programs receive at least 95% of the journal bytes",
        total > 0 && together >= 0.95,
        &format!("{together:.4}"),
        ">= 0.95",
        "",
    );
    let got = j_all as f64 / (j_all + j_4th).max(1) as f64;
    let want = b_all as f64 / (b_all + b_4th).max(1) as f64;
    check.truth(
        "their split is within 5 points of their handles' dirtied blocks",
        (got - want).abs() <= 0.05,
        &format!("fsyncAll {got:.4}"),
        &format!("fsyncAll {want:.4} ± 0.05"),
        "",
    );
    check.finish();
}

#[test]
fn journal_is_shared_by_two_fsync_rates() {
    two_fsync_rates(Recorder::Capture);
}

#[test]
fn journal_is_shared_by_two_fsync_rates_perf() {
    two_fsync_rates(Recorder::Perf);
}
