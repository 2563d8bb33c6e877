//! The BTRFS table (format 1.9) of real recordings on a btrfs loop-device filesystem (needs
//! root, btrfs and btrfs-progs): the recorder's chunk map against what `btrfs
//! inspect-internal dump-tree -t chunk` reads of the device, its devices, bdi and superblock
//! device, and a chunk allocated while recording, found at the flush after.

mod common;

use std::process::Command;

use common::*;
use ioblame_format::{BtrfsChunk, BtrfsDevice, BtrfsFs, BtrfsStripe, Trace};

fn out_of(args: &[&str]) -> String {
    let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A chunk type as dump-tree prints it (`METADATA|DUP`, `DATA|single`): the block group
/// flags.
fn type_flags(t: &str) -> u64 {
    t.split('|')
        .map(|n| match n {
            "DATA" => 1,
            "SYSTEM" => 2,
            "METADATA" => 4,
            "RAID0" => 8,
            "RAID1" => 16,
            "DUP" => 32,
            "RAID10" => 64,
            "RAID5" => 128,
            "RAID6" => 256,
            "RAID1C3" => 512,
            "RAID1C4" => 1024,
            "single" => 0,
            other => panic!("chunk type {other} in {t}"),
        })
        .fold(0, |a, b| a | b)
}

/// The word after `name` in a line of `key value key value` pairs.
fn after<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let mut w = line.split_whitespace();
    while let Some(x) = w.next() {
        if x == name {
            return w.next();
        }
    }
    None
}

/// The chunks of `btrfs inspect-internal dump-tree -t chunk DEV` (`since_ns` 0): its
/// `item N key (FIRST_CHUNK_TREE CHUNK_ITEM LOGICAL)` items with their `length ... owner
/// ... stripe_len ... type ...`, `num_stripes ... sub_stripes ...` and `stripe K devid D
/// offset O` lines.
fn dump_chunks(dev: &str) -> Vec<BtrfsChunk> {
    let text = out_of(&["btrfs", "inspect-internal", "dump-tree", "-t", "chunk", dev]);
    let mut out: Vec<BtrfsChunk> = Vec::new();
    let mut in_chunk = false;
    for l in text.lines().map(str::trim) {
        if l.starts_with("item ") {
            in_chunk = l.contains("(FIRST_CHUNK_TREE CHUNK_ITEM ");
            if in_chunk {
                let logical = l
                    .split("CHUNK_ITEM ")
                    .nth(1)
                    .and_then(|r| r.split(')').next())
                    .unwrap();
                out.push(BtrfsChunk {
                    logical: logical.parse().unwrap(),
                    ..BtrfsChunk::default()
                });
            }
            continue;
        }
        let Some(c) = out.last_mut().filter(|_| in_chunk) else {
            continue;
        };
        if l.starts_with("length ") {
            c.length = after(l, "length").unwrap().parse().unwrap();
            c.stripe_len = after(l, "stripe_len").unwrap().parse().unwrap();
            c.flags = type_flags(after(l, "type").unwrap());
        } else if l.starts_with("num_stripes ") {
            c.sub_stripes = after(l, "sub_stripes").unwrap().parse().unwrap();
        } else if l.starts_with("stripe ") {
            c.stripes.push(BtrfsStripe {
                devid: after(l, "devid").unwrap().parse().unwrap(),
                physical: after(l, "offset").unwrap().parse().unwrap(),
            });
        }
    }
    assert!(!out.is_empty(), "no chunk in dump-tree's output:\n{text}");
    out
}

/// The value of `name` in `btrfs inspect-internal dump-super DEV`.
fn super_field(dev: &str, name: &str) -> String {
    let text = out_of(&["btrfs", "inspect-internal", "dump-super", dev]);
    text.lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(name)).then(|| w.next().unwrap_or("").to_string())
        })
        .unwrap_or_else(|| panic!("no {name} in dump-super:\n{text}"))
}

/// The filesystem's 16 fsid bytes from its text form.
fn fsid_bytes(uuid: &str) -> [u8; 16] {
    let hex: String = uuid.chars().filter(|c| *c != '-').collect();
    let mut b = [0u8; 16];
    for (i, x) in b.iter_mut().enumerate() {
        *x = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    b
}

/// The superblock device mountinfo shows for `lfs`'s mount.
fn mount_dev(lfs: &LoopFs) -> (u32, u32) {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mnt = lfs.mnt.to_str().unwrap();
    let dev = ioblame_tracepoints::mountinfo::parse(&text)
        .find(|m| m.mount_point == mnt)
        .map(|m| (m.major, m.minor));
    dev.expect("the test mount in mountinfo")
}

/// Records `script` (flushing every 100 ms) and returns the trace and the test
/// filesystem's entry in its BTRFS table, checked against the device: fsid, superblock
/// device, bdi, sizes, the one loop device.
fn record_btrfs(lfs: &LoopFs, script: &str) -> (Trace, BtrfsFs) {
    let out = lfs.dir.path().join("trace");
    let o = record(&[
        "-o",
        out.to_str().unwrap(),
        "--events",
        "minimal",
        "--no-paths",
        "--flush-interval",
        "100ms",
        "--",
        "sh",
        "-c",
        script,
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "record failed: {stderr}");
    assert!(
        !stderr.contains(&format!("btrfs at {}", lfs.mnt.display())),
        "{stderr}"
    );
    let t = Trace::open(&out).unwrap();
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    let uuid = super_field(&lfs.dev, "fsid");
    let all = t.btrfs();
    let fs = all
        .iter()
        .find(|f| f.fsid == fsid_bytes(&uuid))
        .unwrap_or_else(|| panic!("no filesystem {uuid} in {all:?}"))
        .clone();
    assert_eq!((fs.major, fs.minor), mount_dev(lfs), "superblock device");
    let link = std::fs::read_link(format!("/sys/fs/btrfs/{uuid}/bdi"))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .unwrap_or_default();
    assert_eq!(fs.bdi, link, "bdi name");
    assert!(
        fs.bdi.starts_with("btrfs-") || fs.bdi.is_empty(),
        "{}",
        fs.bdi
    );
    assert_eq!(
        fs.sector_size.to_string(),
        super_field(&lfs.dev, "sectorsize")
    );
    assert_eq!(fs.node_size.to_string(), super_field(&lfs.dev, "nodesize"));
    assert_eq!(
        fs.devices,
        vec![BtrfsDevice {
            devid: 1,
            major: lfs.major,
            minor: lfs.minor,
        }]
    );
    (t, fs)
}

/// Whether `c` is among `v` (whenever found).
fn has(v: &[BtrfsChunk], c: &BtrfsChunk) -> bool {
    v.iter().any(|x| x.same_chunk(c))
}

/// A fresh filesystem (`mkfs.btrfs` defaults: single data, DUP metadata and system): the
/// trace's chunk map is dump-tree's, every chunk from before the recording.
#[test]
fn chunk_map_is_the_chunk_trees() {
    if !btrfs_ready() {
        return;
    }
    let _g = lock();
    let lfs = LoopFs::new("btrfs", 1024);
    let before = dump_chunks(&lfs.dev);
    assert!(
        before.iter().any(|c| c.stripes.len() == 2),
        "a DUP chunk: {before:?}"
    );
    let script = format!(
        "dd if=/dev/zero of={}/a bs=1M count=2 conv=fsync 2>/dev/null; sync",
        lfs.mnt.display()
    );
    let (_, fs) = record_btrfs(&lfs, &script);
    let after = dump_chunks(&lfs.dev);
    let at_start: Vec<BtrfsChunk> = fs
        .chunks
        .iter()
        .filter(|c| c.since_ns == 0)
        .cloned()
        .collect();
    assert_eq!(at_start, before, "the chunks at the start");
    for c in &after {
        assert!(has(&fs.chunks, c), "{c:?} is not in the trace: {fs:?}");
    }
}

/// Data written beyond the first data chunk: the chunk allocated for it is in the trace
/// from the flush after it (`since_ns` between the start and the end), the others from
/// the start.
#[test]
fn chunk_allocated_while_recording() {
    if !btrfs_ready() {
        return;
    }
    let _g = lock();
    let lfs = LoopFs::new("btrfs", 1024);
    let before = dump_chunks(&lfs.dev);
    let data: u64 = before
        .iter()
        .filter(|c| c.flags & 1 != 0)
        .map(|c| c.length)
        .sum();
    // Twice what the data chunks hold, then long enough for a few flushes.
    let mib = 2 * data.div_ceil(1 << 20) + 16;
    let script = format!(
        "sleep 0.3; dd if=/dev/zero of={}/big bs=1M count={mib} 2>/dev/null; sync; sleep 0.5",
        lfs.mnt.display()
    );
    let (t, fs) = record_btrfs(&lfs, &script);
    let after = dump_chunks(&lfs.dev);
    let new: Vec<&BtrfsChunk> = after.iter().filter(|c| !has(&before, c)).collect();
    assert!(
        new.iter().any(|c| c.flags & 1 != 0),
        "no data chunk allocated by {mib} MiB: {before:?} then {after:?}"
    );
    let start = t.header().start_clock_ns;
    let end = start + 60_000_000_000;
    for c in &fs.chunks {
        if has(&before, c) {
            assert_eq!(c.since_ns, 0, "{c:?} was there before");
        } else {
            assert!(
                c.since_ns > start + 200_000_000 && c.since_ns < end,
                "{c:?} found {} ms after the start",
                (c.since_ns as i64 - start as i64) / 1_000_000
            );
        }
    }
    for c in &after {
        assert!(has(&fs.chunks, c), "{c:?} is not in the trace: {fs:?}");
    }
}
