//! `ioblame timeline` on a real capture (issue 42): two writers dirty a file each on a fresh
//! ext4 loop device and a third task's `sync` writes them back; a fourth writes and fsyncs.
//! The output, decoded with Perfetto's own schema (`scripts/timeline-check.py`), has a flow
//! from each writer's thread to the device's track, every byte of each writer's act on its
//! dirtying slices (it dirtied everything while recording), each act's bytes on the device
//! slices equal to `ioblame acts`, and the fsync on the fsyncing writer's thread. Needs root,
//! loop devices, tracefs, mkfs.ext4 and the `perfetto` Python package; skips otherwise,
//! except in CI.

mod support;

use std::collections::BTreeMap;

use support::{capture_on, tools, LoopFs};

const TOOLS: &[&str] = &["mkfs.ext4", "dd", "sync"];

#[test]
fn two_writers_and_a_sync_flow_from_each_writer_to_the_device() {
    if !support::ready(TOOLS) || !support::perfetto_ready() {
        return;
    }
    let _g = support::lock();
    let fs = LoopFs::new("ext4", 256);
    let bin = tools(
        &fs,
        &[
            ("writerA", "/bin/dd"),
            ("writerB", "/bin/dd"),
            ("writerF", "/bin/dd"),
            ("syncer", "/bin/sync"),
        ],
    );
    let script = "writerA if=/dev/zero of=$M/a.dat bs=1M count=8 2>/dev/null &
         writerB if=/dev/zero of=$M/b.dat bs=1M count=4 2>/dev/null &
         wait
         syncer
         writerF if=/dev/zero of=$M/f.dat bs=1M count=2 conv=fsync 2>/dev/null";
    let trace = capture_on(fs.dir.path(), &bin, &fs.mnt, &fs.name, "t", script, &[]);
    let s = support::timeline_checked(&trace, fs.dir.path(), &[]);
    eprintln!("{s}");
    // Each act's bytes on the device slices are `ioblame acts`'.
    let acts = support::act_bytes(&trace);
    let io = support::by_act(&s["io_bytes"]);
    let acts: BTreeMap<u64, u64> = acts.into_iter().filter(|a| a.1 > 0).collect();
    assert_eq!(io, acts);
    // Each writer's page act: all its bytes flowed from its dirtying slices.
    let written = support::by_act(&s["written_bytes"]);
    let mut seen = BTreeMap::new();
    for a in support::acts_json(&trace) {
        let comm = a["comm"].as_str().unwrap().to_owned();
        if comm.starts_with("writer") && a["via"] == "page" {
            let act = a["act"].as_u64().unwrap();
            assert_eq!(written.get(&act), io.get(&act), "{a}");
            *seen.entry(comm).or_insert(0) += io[&act];
        }
    }
    assert_eq!(seen.get("writerA"), Some(&(8 << 20)), "{seen:?}");
    assert_eq!(seen.get("writerB"), Some(&(4 << 20)), "{seen:?}");
    assert_eq!(seen.get("writerF"), Some(&(2 << 20)), "{seen:?}");
    // A flow from each writer's thread to the device's track.
    let device = format!("device {} (", fs.name);
    for w in ["writerA", "writerB", "writerF"] {
        assert!(
            s["flow_pairs"].as_array().unwrap().iter().any(|p| p[0] == w
                && p[1].as_str().unwrap().starts_with(&device)
                && p[2].as_u64().unwrap() > 0),
            "no flow from {w} to {device}: {}",
            s["flow_pairs"]
        );
    }
    // The fsync, on the thread that called it.
    assert!(
        s["fsync_threads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "writerF"),
        "{}",
        s["fsync_threads"]
    );
}
