//! User-space stacks from stock `perf record` (issue 29) without `--buildid-mmap`: the C
//! workload `tests/data/ustack/iowork.c`, built with frame pointers, writes a WAL
//! (`wal_append`, buffered, synced by `sync`), writes and fsyncs a checkpoint (`checkpoint`)
//! and reads it back cold (`scan_table`), recorded on a fresh ext4 loop device with the line
//! `ioblame perf-command --user-stacks` prints, its `--buildid-mmap` replaced by
//! `--buildid-all`: the MMAP2 records carry devices and inodes, and the build ids come from
//! perf's build-id table. Each act's intent name leads with the function that did it, named
//! from the local binary of that build id. (The printed line itself, C and Rust, ext4 and
//! xfs, is `ustack_live.rs`'s.)
//!
//! Needs root, loop devices, tracefs, mkfs.ext4, gcc and `perf`; skips otherwise, except in
//! CI. (Before Linux 5.12 the printed line has `--buildid-all` already.)

mod support;

use std::os::unix::fs::MetadataExt;

use serde_json::Value;
use support::LoopFs;

const MIB: u64 = 1 << 20;

fn functions(act: &Value) -> Vec<String> {
    act["user_frames"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter_map(|f| f["function"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Records the workload with the line `ioblame perf-command --user-stacks` prints, changed
/// by `edit`, and checks each act's intent and user frames.
fn check(edit: fn(&str) -> String) {
    if !support::ready(&["mkfs.ext4", "gcc", "perf", "sync"]) {
        return;
    }
    let _g = support::lock();
    let fs = LoopFs::new("ext4", 64);
    let bin = fs.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    support::build_workload(
        "iowork",
        &["-O1", "-g", "-fno-omit-frame-pointer"],
        &bin.join("iowork"),
    );
    let script = "iowork wal $M/wal.dat 4096; iowork ckpt $M/ckpt.dat 2048; sync; \
                  iowork scan $M/ckpt.dat";
    let t0 = std::time::Instant::now();
    let data =
        support::perf_record_edited(&fs, &bin, "perf.data", script, &["--user-stacks"], edit);
    eprintln!("recorded in {:?}", t0.elapsed());
    let ino = |f: &str| std::fs::metadata(fs.mnt.join(f)).unwrap().ino();
    let (wal, ckpt) = (ino("wal.dat"), ino("ckpt.dat"));

    let o = support::ioblame(&["acts".as_ref(), "--json".as_ref(), data.as_os_str()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let acts: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let dump = || {
        acts.iter()
            .map(|a| {
                format!(
                    "{} ino={} w={} r={} ra={} {:?}",
                    a["comm"],
                    a["ino"],
                    a["write_bytes"],
                    a["read_bytes"],
                    a["readahead_bytes"],
                    a["intent_name"]
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let on = |ino: u64, key: &str| -> Vec<&Value> {
        acts.iter()
            .filter(|a| a["ino"].as_u64() == Some(ino) && a[key].as_u64().unwrap_or(0) > 0)
            .collect()
    };
    let sum = |v: &[&Value], key: &str| v.iter().map(|a| a[key].as_u64().unwrap()).sum::<u64>();
    let name = |a: &Value| a["intent_name"].as_str().unwrap_or("").to_string();

    // The WAL: written back by `sync`, charged to the writer's intent.
    let w = on(wal, "write_bytes");
    assert_eq!(sum(&w, "write_bytes"), 4 * MIB, "{}\n{err}", dump());
    for a in &w {
        assert!(name(a).starts_with("wal_append"), "{}\n{err}", dump());
        let f = functions(a);
        assert!(f.iter().any(|f| f == "wal_append"), "{f:?}");
        assert!(f.iter().any(|f| f == "main"), "{f:?}");
    }
    // The checkpoint: written by its fsync.
    let c = on(ckpt, "write_bytes");
    assert_eq!(sum(&c, "write_bytes"), 2 * MIB, "{}\n{err}", dump());
    for a in &c {
        assert!(name(a).starts_with("checkpoint"), "{}\n{err}", dump());
        assert!(functions(a).iter().any(|f| f == "checkpoint"));
    }
    // The scan: read cold, by readahead.
    let r = on(ckpt, "readahead_bytes");
    assert_eq!(sum(&r, "readahead_bytes"), 2 * MIB, "{}\n{err}", dump());
    for a in &r {
        assert!(name(a).starts_with("scan_table"), "{}\n{err}", dump());
        assert!(functions(a).iter().any(|f| f == "scan_table"));
        // Named from the local binary, whose build id perf's build-id table gives.
        let frames = a["user_frames"].as_array().unwrap();
        assert!(frames.iter().any(|f| f["module"]
            .as_str()
            .is_some_and(|m| m.ends_with("/iowork"))
            && f["build_id"].as_str().is_some_and(|b| b.len() == 40)));
    }
    assert!(t0.elapsed().as_secs() < 60, "took {:?}", t0.elapsed());
}

/// Without `--buildid-mmap` but with `--buildid-all`: the MMAP2 records carry devices and
/// inodes, and the build ids come from perf's build-id table (`HEADER_BUILD_ID`).
#[test]
fn user_stacks_from_perf_data_with_the_build_id_table() {
    check(|line| line.replacen(" --buildid-mmap ", " --buildid-all ", 1));
}
