//! Ground truth through a loop device (docs/attribution.md, "Loop devices"): two writers
//! write known bytes into files of an ext4 mounted from a loop device whose backing file sits
//! on another ext4 (itself on a loop device), then a third task syncs. The loop device's IO
//! is charged to the writers; the outer device's writes of the backing file, done by the loop
//! worker (buffered: dirtied by it and written back by a flusher; `--direct-io=on`: written
//! by it directly), must be charged to the same writers as lower copies, none left to the loop
//! worker, and `--scope workload` keeps them.
//!
//! Needs root, loop devices, tracefs and mkfs.ext4; skips otherwise, except in CI.

mod support;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use support::checks::Checks;
use support::{sh, tools, Inner, LoopFs, Recorder};

const MIB: u64 = 1 << 20;

/// The bytes of `key` (`write_bytes`, `lower_write_bytes`, ...) of the data acts (via
/// `page` or `buffer`: not the writer's share of the journal) of `comm` on `dev` (`MAJ:MIN`),
/// over the acts of `ioblame acts --json` (`scope`: its --scope).
fn bytes_of(trace: &Path, scope: &str, comm: &str, dev: &str, key: &str) -> u64 {
    acts(trace, scope)
        .iter()
        .filter(|v| v["comm"] == comm && v["dev"] == dev && is_data(v))
        .map(|v| v[key].as_u64().unwrap_or(0))
        .sum()
}

fn is_data(v: &serde_json::Value) -> bool {
    v["via"] == "page" || v["via"] == "buffer"
}

fn acts(trace: &Path, scope: &str) -> Vec<serde_json::Value> {
    let o = support::ioblame(&[
        "--scope".as_ref(),
        scope.as_ref(),
        "acts".as_ref(),
        "--json".as_ref(),
        trace.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn loop_scenario(direct: bool) {
    if !support::ready(&["mkfs.ext4", "dd", "sync", "losetup"]) {
        return;
    }
    let _g = support::lock();
    let scenario = if direct {
        "loop-direct"
    } else {
        "loop-buffered"
    };
    let mut check = Checks::new(Recorder::Capture, "ext4", scenario);
    let outer = LoopFs::new("ext4", 400);
    let inner = Inner::new(&outer, direct);
    let bin = tools(
        &outer,
        &[
            ("writerA", "/bin/dd"),
            ("writerB", "/bin/dd"),
            ("syncer", "/bin/sync"),
        ],
    );
    // Everything of the set-up on disk first: what the recording sees dirty is the writers'.
    sh("sync");
    let trace = outer.dir.path().join("trace");
    let m = inner.mnt.display();
    // Two syncs: the first writes the inner filesystem through the loop device (for a
    // buffered loop device, into the outer page cache), the second the outer one.
    let script = format!(
        "set -e
         writerA if=/dev/zero of={m}/a.dat bs=1M count=4 2>/dev/null
         writerB if=/dev/zero of={m}/b.dat bs=1M count=2 2>/dev/null
         syncer
         syncer
         sleep 0.2"
    );
    let o = Command::new(support::common::bin())
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--devices", &format!("{},{}", outer.name, inner.majmin())])
        .args(["--", "sh", "-c", &script])
        .env("PATH", support::path_with(&bin))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "capture failed: {err}");
    assert!(err.contains(" 0 lost"), "records were lost: {err}");

    let outer_dev = format!("{}:{}", outer.major, outer.minor);
    let inner_dev = inner.majmin();
    let img_ino = std::fs::metadata(outer.mnt.join("inner.img"))
        .unwrap()
        .ino();
    let all = acts(&trace, "all");
    let lines: Vec<String> = all.iter().map(|v| v.to_string()).collect();
    check.context(format!("acts:\n{}", lines.join("\n")));
    for (comm, want) in [("writerA", 4 * MIB), ("writerB", 2 * MIB)] {
        check.eq(
            &format!("{comm}'s bytes on the loop device"),
            bytes_of(&trace, "all", comm, &inner_dev, "write_bytes"),
            want,
            "",
        );
        check.eq(
            &format!("{comm}'s bytes on the outer device, as lower copies"),
            bytes_of(&trace, "all", comm, &inner_dev, "lower_write_bytes"),
            want,
            "",
        );
        check.eq(
            &format!("{comm}: --scope workload keeps the lower copies"),
            bytes_of(&trace, "workload", comm, &inner_dev, "lower_write_bytes"),
            want,
            "",
        );
    }
    // The backing file's bytes written on the outer device by anyone but as a copy: none
    // (the loop worker, a flusher).
    let own: u64 = all
        .iter()
        .filter(|v| v["dev"] == outer_dev.as_str() && v["ino"] == img_ino)
        .map(|v| v["write_bytes"].as_u64().unwrap_or(0))
        .sum();
    check.eq("the backing file's own charges", own, 0, "");
    // No act counts a copy in its write bytes: the writers' totals are their own IO once.
    let writers_total: u64 = all
        .iter()
        .filter(|v| (v["comm"] == "writerA" || v["comm"] == "writerB") && is_data(v))
        .map(|v| v["write_bytes"].as_u64().unwrap_or(0))
        .sum();
    check.eq(
        "the writers' write bytes count their IO once",
        writers_total,
        6 * MIB,
        "",
    );
    check.finish();
}

#[test]
fn loop_device_buffered_writes_charged_through() {
    loop_scenario(false);
}

#[test]
fn loop_device_direct_io_writes_charged_through() {
    loop_scenario(true);
}

/// Large folios (docs/attribution.md, "Large folios"), on xfs (large folios by default): a
/// 1 MiB file written and fsynced in large folios; then writerA writes its first 32 KiB and
/// writerB the next 32 KiB, in the same large folio, already in the page cache (the second
/// write dirties no folio: it only has its write range), and a third task syncs. Each is
/// charged its own half, not writerA both.
#[test]
fn xfs_large_folio_halves_are_charged_to_their_writers() {
    if !support::ready(&["mkfs.xfs", "dd", "sync"]) {
        return;
    }
    let _g = support::lock();
    let mut check = Checks::new(Recorder::Capture, "xfs", "large-folio");
    let fs = LoopFs::new("xfs", 320);
    let bin = tools(
        &fs,
        &[
            ("filler", "/bin/dd"),
            ("writerA", "/bin/dd"),
            ("writerB", "/bin/dd"),
            ("syncer", "/bin/sync"),
        ],
    );
    let script = "set -e
        filler if=/dev/zero of=$M/g.dat bs=1M count=1 conv=fsync 2>/dev/null
        writerA if=/dev/urandom of=$M/g.dat bs=32k count=1 conv=notrunc 2>/dev/null
        writerB if=/dev/urandom of=$M/g.dat bs=32k seek=1 count=1 conv=notrunc 2>/dev/null
        syncer
        sleep 0.2";
    let trace = support::capture(&fs, &bin, "trace", script);
    let all = acts(&trace, "all");
    let lines: Vec<String> = all.iter().map(|v| v.to_string()).collect();
    check.context(format!("acts:\n{}", lines.join("\n")));
    let g = std::fs::metadata(fs.mnt.join("g.dat")).unwrap().ino();
    let of = |comm: &str| -> u64 {
        all.iter()
            .filter(|v| v["comm"] == comm && v["ino"] == g && v["via"] == "page")
            .map(|v| v["write_bytes"].as_u64().unwrap_or(0))
            .sum()
    };
    check.eq("the filler's fsync", of("filler"), MIB, "");
    check.eq("writerA's half of the folio", of("writerA"), 32 << 10, "");
    check.eq("writerB's half of the folio", of("writerB"), 32 << 10, "");
    check.finish();
}
