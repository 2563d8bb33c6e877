//! btrfs on a real capture (issue 41, docs/attribution.md "btrfs"): a fresh btrfs on a loop
//! device (`mkfs.btrfs` defaults: single data, DUP metadata), recorded by `ioblame-capture`,
//! with renamed tools so each task has its own comm. Known answers:
//! - two writers, then another task's `sync`: each writer's file bytes are its own, via page
//!   (the flusher and `sync` are charged no data);
//! - a writer that writes 64 KiB and fsyncs, 40 times: its 2.5 MiB are its own;
//! - with `compress=zstd`, a writer of compressible data: every byte written for its file
//!   (fewer than it wrote: compressed) is its own;
//! - tree blocks (the btree inode, inode 1) are charged, both DUP copies, and part of them
//!   to the writers whose transactions dirtied them; a `sync`'s commit is divided among
//!   them (the syncer keeps nothing);
//! - no data byte goes to the lost intent (the filesystem is new: nothing was dirty before);
//! - two nested subvolumes: files of distinct inode numbers charged exactly and named; one
//!   number written in both at once said, with its bytes.
//!
//! Needs root, loop devices, tracefs and mkfs.btrfs; skips otherwise, except in CI.

mod support;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use support::{capture, charges, real_python, record_with, sh, tools, Charges, LoopFs, Recorder};

const MIB: u64 = 1 << 20;

/// Bytes written per (comm, via) to inode `ino`.
fn written(c: &Charges, comm: &str, via: &str, ino: u64) -> u64 {
    c.get(&(comm.to_string(), via.to_string(), ino))
        .map(|v| v[2])
        .unwrap_or(0)
}

/// Bytes written to inode `ino` by anyone.
fn written_to(c: &Charges, ino: u64) -> u64 {
    c.iter()
        .filter(|((_, _, i), _)| *i == ino)
        .map(|(_, v)| v[2])
        .sum()
}

/// Bytes written via `unknown` (the lost intent) to inodes other than the btree inode (1):
/// data whose dirtier was not found.
fn data_lost(c: &Charges) -> u64 {
    c.iter()
        .filter(|((_, via, ino), _)| via == "unknown" && *ino != 1)
        .map(|(_, v)| v[2])
        .sum()
}

/// The tree-block acts whose intent is a worker finishing an ordered extent
/// (`btrfs_finish_one_ordered`, `btrfs_finish_ordered_io` before 6.5): (comm, bytes written).
fn finishing_blocks(trace: &Path) -> Vec<(String, u64)> {
    support::acts_json(trace)
        .iter()
        .filter(|v| v["ino"] == 1 && v["write_bytes"].as_u64().unwrap_or(0) > 0)
        .filter(|v| {
            v["frames"].as_array().is_some_and(|f| {
                f.iter()
                    .any(|x| x == "btrfs_finish_one_ordered" || x == "btrfs_finish_ordered_io")
            })
        })
        .map(|v| {
            (
                v["comm"].as_str().unwrap_or("").to_string(),
                v["write_bytes"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

fn ino(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().ino()
}

fn setup() -> Option<(std::sync::MutexGuard<'static, ()>, LoopFs)> {
    if !support::ready(&["mkfs.btrfs"]) {
        return None;
    }
    let g = support::lock();
    let fs = LoopFs::new("btrfs", 512);
    Some((g, fs))
}

#[test]
fn writers_then_sync_and_fsync_are_charged_to_their_writers() {
    writers_then_sync_and_fsync(Recorder::Capture);
}

/// Recorded by stock perf, with the chunk maps `ioblame-capture btrfs-map` saved beside the
/// recording (as perf-command's note says): the same bytes.
#[test]
fn writers_then_sync_and_fsync_are_charged_to_their_writers_perf() {
    writers_then_sync_and_fsync(Recorder::Perf);
}

fn writers_then_sync_and_fsync(recorder: Recorder) {
    if !support::ready(recorder.tools()) {
        return;
    }
    let Some((_g, fs)) = setup() else { return };
    let bin = tools(
        &fs,
        &[
            ("writerA", "/usr/bin/dd"),
            ("writerB", "/usr/bin/dd"),
            ("syncer", "/usr/bin/sync"),
        ],
    );
    // A symlink (a copy would not find its library): the comm is the name executed.
    std::os::unix::fs::symlink(real_python(), bin.join("fsyncer")).unwrap();
    let script = "writerA if=/dev/urandom of=$M/a.dat bs=1M count=4 status=none && \
                  writerB if=/dev/urandom of=$M/b.dat bs=1M count=2 status=none && \
                  fsyncer -c 'import os\n\
fd = os.open(\"'$M'/f.dat\", os.O_WRONLY | os.O_CREAT, 0o644)\n\
for i in range(40):\n    os.write(fd, os.urandom(65536)); os.fsync(fd)\n' && \
                  syncer";
    let trace = record_with(recorder, &fs, &bin, "wb.trace", script, &[]);
    let c = charges(&trace);
    let (a, b, f) = (
        ino(&fs.mnt.join("a.dat")),
        ino(&fs.mnt.join("b.dat")),
        ino(&fs.mnt.join("f.dat")),
    );
    assert_eq!(written(&c, "writerA", "page", a), 4 << 20, "{c:#?}");
    assert_eq!(written(&c, "writerB", "page", b), 2 << 20, "{c:#?}");
    assert_eq!(written(&c, "fsyncer", "page", f), 40 * 65536, "{c:#?}");
    assert_eq!(written_to(&c, a), 4 << 20);
    assert_eq!(written_to(&c, b), 2 << 20);
    assert_eq!(written_to(&c, f), 40 * 65536);
    assert_eq!(data_lost(&c), 0, "{c:#?}");
    // Tree blocks: charged, the fsyncer's log tree and transactions among them.
    let tree: u64 = c
        .iter()
        .filter(|((_, _, i), _)| *i == 1)
        .map(|(_, v)| v[2])
        .sum();
    assert!(tree > 0, "no tree block charged: {c:#?}");
    assert!(written(&c, "fsyncer", "page", 1) > 0, "{c:#?}");
    // DUP: every tree block written twice, so the btree inode's bytes come in pairs.
    assert_eq!(tree % (2 * 4096), 0, "{c:#?}");
    // The tree blocks a worker first dirtied finishing an ordered extent (file extent and
    // checksum items) are that extent's writer's, with the worker's stack; but a block a
    // commit writes between the worker's handle's end and the extent's removal stays the
    // worker's (docs/attribution.md, btrfs rule 3; seen once in about fifteen runs here).
    let finishing = finishing_blocks(&trace);
    let all: u64 = finishing.iter().map(|(_, b)| b).sum();
    let writers: u64 = finishing
        .iter()
        .filter(|(w, _)| ["writerA", "writerB", "fsyncer"].contains(&w.as_str()))
        .map(|(_, b)| b)
        .sum();
    assert!(all > 0, "no finishing tree block: {finishing:?}");
    assert!(2 * writers > all, "{finishing:?}");
    // The syncer's commit: its own tree blocks (the delayed references it runs, the root
    // items) and its superblock copies are divided among the transaction's dirtiers, via
    // journal; the syncer keeps nothing (docs/attribution.md, btrfs, "Transaction
    // commits"). The writers' shares of commits, on the btree inode, are there.
    let syncer: u64 = c
        .iter()
        .filter(|((comm, _, _), _)| comm == "syncer")
        .map(|(_, v)| v[2])
        .sum();
    assert_eq!(syncer, 0, "{c:#?}");
    let shares: u64 = ["writerA", "writerB", "fsyncer"]
        .iter()
        .map(|w| written(&c, w, "journal", 1))
        .sum();
    assert!(shares > 0, "no commit divided among the writers: {c:#?}");
}

/// Four tasks fsyncing at once (what a database's connections do; two CPUs here): btrfs
/// batches their fsyncs into shared log commits, where one task's log sync writes the
/// others' logs too (docs/attribution.md, btrfs, "Log syncs"). Each fsyncer's data and log
/// tree blocks are its own; every log sync's own writes (the log root tree's block, the
/// superblock copy) are divided among the fsyncs it logged, so no act keeps a log sync's
/// stack, and each fsyncer holds shares of log syncs batched with others' (here about half
/// of the 260 log syncs of 800 fsyncs were).
#[test]
fn batched_fsyncs_share_their_log_syncs() {
    batched_fsyncs(Recorder::Capture);
}

/// The same, recorded by stock perf with the chunk maps saved beside it.
#[test]
fn batched_fsyncs_share_their_log_syncs_perf() {
    batched_fsyncs(Recorder::Perf);
}

fn batched_fsyncs(recorder: Recorder) {
    if !support::ready(recorder.tools()) {
        return;
    }
    let Some((_g, fs)) = setup() else { return };
    let bin = tools(&fs, &[]);
    const N: usize = 200;
    let names = ["fsyncA", "fsyncB", "fsyncC", "fsyncD"];
    let mut script = String::new();
    for name in names {
        std::os::unix::fs::symlink(real_python(), bin.join(name)).unwrap();
        script += &format!(
            "{name} -c 'import os\n\
fd = os.open(\"'$M'/{name}.dat\", os.O_WRONLY | os.O_CREAT, 0o644)\n\
for i in range({N}):\n    os.write(fd, os.urandom(4096)); os.fsync(fd)\n' & "
        );
    }
    script += "wait";
    let trace = record_with(recorder, &fs, &bin, "fsyncs.trace", &script, &[]);
    let c = charges(&trace);
    for name in names {
        let f = ino(&fs.mnt.join(format!("{name}.dat")));
        assert_eq!(written_to(&c, f), N as u64 * 4096, "{name}: {c:#?}");
        assert_eq!(written(&c, name, "page", f), N as u64 * 4096, "{c:#?}");
    }
    assert_eq!(data_lost(&c), 0, "{c:#?}");
    // No act keeps a log sync's writes as its own.
    let syncs: Vec<String> = support::acts_json(&trace)
        .iter()
        .filter(|v| v["write_bytes"].as_u64().unwrap_or(0) > 0)
        .filter(|v| {
            v["frames"]
                .as_array()
                .is_some_and(|f| f.iter().any(|x| x == "btrfs_sync_log"))
        })
        .map(|v| v.to_string())
        .collect();
    assert!(syncs.is_empty(), "{syncs:#?}");
    // Each fsyncer holds shares of log syncs others' fsyncs were batched into.
    let o = support::ioblame(&["iolog".as_ref(), trace.as_os_str()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let log = String::from_utf8_lossy(&o.stdout);
    let shared = |comm: &str| -> u64 {
        // The role is the sixth field (`W 16384 @ 43072 pid-16143 (writerF) ...`), not an
        // issuer's further on.
        log.lines()
            .filter(|l| {
                l.split(' ').nth(5) == Some(&format!("({comm})")[..]) && l.contains(" via=journal ")
            })
            .filter(|l| {
                l.split(' ')
                    .find_map(|w| w.strip_prefix("share="))
                    .and_then(|x| x.parse::<f64>().ok())
                    .is_some_and(|x| x < 1.0)
            })
            .filter_map(|l| l.split(' ').nth(1)?.parse::<u64>().ok())
            .sum()
    };
    let shares: Vec<(&str, u64)> = names.iter().map(|n| (*n, shared(n))).collect();
    assert!(
        shares.iter().all(|s| s.1 > 0),
        "shared log syncs: {shares:?}"
    );
}

/// A direct IO writer on btrfs (`nodatasum`: since 2025 kernels write a checksummed file's
/// O_DIRECT writes buffered): its data goes to it as issuer, and so do the tree blocks the
/// endio worker dirties finishing its extents (file extent items), and its extents' weight
/// in the sync's commit (docs/attribution.md, btrfs, rule 3 and "Transaction commits"): no
/// kernel worker keeps a finishing block, and the syncer keeps nothing.
#[test]
fn a_direct_io_writers_extents_are_its_own() {
    direct_io_writer(Recorder::Capture);
}

/// The same, recorded by stock perf with the chunk maps saved beside it.
#[test]
fn a_direct_io_writers_extents_are_its_own_perf() {
    direct_io_writer(Recorder::Perf);
}

fn direct_io_writer(recorder: Recorder) {
    if !support::ready(recorder.tools()) {
        return;
    }
    let Some((_g, fs)) = setup() else { return };
    sh(&format!("mount -o remount,nodatasum {}", fs.mnt.display()));
    let bin = tools(
        &fs,
        &[("writerD", "/usr/bin/dd"), ("syncer", "/usr/bin/sync")],
    );
    // The file made and committed before: the leaf its extent items go in is clean, so the
    // worker finishing the first extent is the first to dirty it.
    sh(&format!("touch {0}/d.dat && sync", fs.mnt.display()));
    let script = "writerD if=/dev/zero of=$M/d.dat bs=256k count=16 oflag=direct \
                  conv=notrunc status=none && syncer";
    let trace = record_with(recorder, &fs, &bin, "dio.trace", script, &[]);
    let c = charges(&trace);
    let d = ino(&fs.mnt.join("d.dat"));
    assert_eq!(written(&c, "writerD", "direct", d), 4 * MIB, "{c:#?}");
    assert_eq!(written_to(&c, d), 4 * MIB, "{c:#?}");
    let finishing = finishing_blocks(&trace);
    assert!(!finishing.is_empty(), "no finishing tree block: {c:#?}");
    assert!(
        finishing.iter().all(|(w, _)| w == "writerD"),
        "{finishing:?}"
    );
    let syncer: u64 = c
        .iter()
        .filter(|((comm, _, _), _)| comm == "syncer")
        .map(|(_, v)| v[2])
        .sum();
    assert_eq!(syncer, 0, "{c:#?}");
    assert!(written(&c, "writerD", "journal", 1) > 0, "{c:#?}");
}

#[test]
fn compressed_extents_are_charged_to_their_dirtier() {
    let Some((_g, fs)) = setup() else { return };
    sh(&format!(
        "mount -o remount,compress=zstd {}",
        fs.mnt.display()
    ));
    let bin = tools(
        &fs,
        &[("writerZ", "/usr/bin/dd"), ("syncer", "/usr/bin/sync")],
    );
    // 8 MiB of zeros-and-text: compresses well, and is not all zeros (btrfs would still
    // write zeros, but text is what a log looks like).
    let script =
        "yes 'a line of a log file, written again and again' | head -c 8388608 > $M/src && \
                  writerZ if=$M/src of=$M/z.dat bs=1M status=none && syncer";
    let trace = capture(&fs, &bin, "z.trace", script);
    let c = charges(&trace);
    let z = ino(&fs.mnt.join("z.dat"));
    let mine = written(&c, "writerZ", "page", z);
    assert!(mine > 0, "{c:#?}");
    assert!(mine < 8 << 20, "compressed: {mine} bytes");
    assert_eq!(written_to(&c, z), mine, "{c:#?}");
    assert_eq!(data_lost(&c), 0, "{c:#?}");
    // btrfs's compression workers made the extents after the syncer's writeback pass over
    // the file queued them: the bytes have its reason, as an uncompressed extent's.
    let synced: u64 = support::acts_json(&trace)
        .iter()
        .filter(|v| v["ino"] == z && v["reason"] == "sync")
        .map(|v| v["write_bytes"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(synced, mine, "{c:#?}");
}

/// Two subvolumes nested in the mounted top level (docs/attribution.md, "btrfs"). Every
/// subvolume numbers its files from 257, and the kernel's page-cache events name a btrfs
/// file by its filesystem and number, not its subvolume:
/// - files of distinct numbers in the two subvolumes are charged exactly to their writers,
///   and the number a single subvolume holds is named (the recorder opens the nested
///   subvolumes through the top level);
/// - the number both subvolumes hold is left unnamed (ambiguous), not guessed;
/// - two writers of files of one number in the two subvolumes, dirty together: their bytes
///   are all charged to them or the lost intent (none elsewhere), and the outputs say how
///   many bytes of that number's writeback may be charged to the other file's writer.
#[test]
fn subvolumes_are_charged_and_named_or_said_shared() {
    subvolumes(Recorder::Capture);
}

/// Recorded by stock perf with the chunk maps beside it: the same bytes and note (perf.data
/// names no file).
#[test]
fn subvolumes_are_charged_and_said_shared_perf() {
    subvolumes(Recorder::Perf);
}

fn subvolumes(recorder: Recorder) {
    if !support::ready(recorder.tools()) {
        return;
    }
    let Some((_g, fs)) = setup() else { return };
    let bin = tools(
        &fs,
        &[
            ("writerA", "/usr/bin/dd"),
            ("writerB", "/usr/bin/dd"),
            ("writerC", "/usr/bin/dd"),
            ("writerP", "/usr/bin/dd"),
            ("syncer", "/usr/bin/sync"),
        ],
    );
    let m = fs.mnt.display();
    // s2's first file (pad) takes the number s1's first file (a.dat) will have.
    sh(&format!(
        "btrfs -q subvolume create {m}/s1 && btrfs -q subvolume create {m}/s2 && \
         dd if=/dev/urandom of={m}/s2/pad bs=1M count=1 status=none && sync"
    ));
    let script = "writerA if=/dev/urandom of=$M/s1/a.dat bs=1M count=4 status=none && \
                  writerB if=/dev/urandom of=$M/s2/b.dat bs=1M count=2 status=none && \
                  syncer && \
                  writerC if=/dev/urandom of=$M/s1/a.dat bs=1M count=1 conv=notrunc status=none && \
                  writerP if=/dev/urandom of=$M/s2/pad bs=1M count=1 conv=notrunc status=none && \
                  syncer";
    let trace = record_with(recorder, &fs, &bin, "subvol.trace", script, &[]);
    let c = charges(&trace);
    let (a, b, pad) = (
        ino(&fs.mnt.join("s1/a.dat")),
        ino(&fs.mnt.join("s2/b.dat")),
        ino(&fs.mnt.join("s2/pad")),
    );
    assert_eq!((a, pad), (257, 257), "each subvolume's first file is 257");
    assert_ne!(b, a);
    assert_eq!(written(&c, "writerA", "page", a), 4 * MIB, "{c:#?}");
    assert_eq!(written(&c, "writerB", "page", b), 2 * MIB, "{c:#?}");
    // Number 257, dirty in both subvolumes together: C's and P's 2 MiB, to them or lost.
    let after: u64 = ["writerC", "writerP"]
        .iter()
        .map(|w| written(&c, w, "page", a))
        .sum::<u64>()
        + written(&c, "<unknown>", "unknown", a);
    assert_eq!(after, 2 * MIB, "{c:#?}");
    assert_eq!(written_to(&c, a), 4 * MIB + 2 * MIB, "{c:#?}");
    // Said, with the bytes of number 257 written within 30 s by both: a.dat's 4 + 1 MiB
    // and pad's 1 MiB.
    let o = support::ioblame(&["acts".as_ref(), "--json".as_ref(), trace.as_os_str()]);
    let notes = String::from_utf8_lossy(&o.stderr);
    let want = format!("{} bytes of btrfs writes were of inode numbers", 6 * MIB);
    assert!(notes.contains(&want), "{notes}");
    if recorder == Recorder::Perf {
        return;
    }
    // Named: b.dat (no other subvolume holds its number); 257 not guessed.
    let acts: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let path_of = |comm: &str| -> Vec<String> {
        acts.iter()
            .filter(|v| v["comm"] == comm && v["via"] == "page" && v["ino"] != 1)
            .map(|v| v["path"].as_str().unwrap_or("(none)").to_string())
            .collect()
    };
    let b_path = fs.mnt.join("s2/b.dat").display().to_string();
    let (b_paths, a_paths) = (path_of("writerB"), path_of("writerA"));
    assert!(
        !b_paths.is_empty() && b_paths.iter().all(|p| *p == b_path),
        "{b_paths:?}"
    );
    assert!(
        !a_paths.is_empty() && a_paths.iter().all(|p| p == "(none)"),
        "{a_paths:?}"
    );
}

/// A balance (docs/attribution.md, "btrfs"): btrfs reads the data it moves into the page
/// cache of the data relocation tree's inode and writes it from there at its new place. All
/// of it, read and written, is the balancing task's, without a file: the relocation inode's
/// number is its own (257, as the first file of the top level, here x.dat), so naming it
/// after x.dat would be wrong. Nothing goes to the lost intent.
#[test]
fn a_balance_is_charged_to_itself_without_a_file() {
    let Some((_g, fs)) = setup() else { return };
    if !support::ready(&["btrfs"]) {
        return;
    }
    let bin = tools(&fs, &[("balancer", "/usr/bin/btrfs")]);
    let m = fs.mnt.display();
    sh(&format!(
        "dd if=/dev/urandom of={m}/x.dat bs=1M count=8 status=none && sync"
    ));
    let x = ino(&fs.mnt.join("x.dat"));
    let script = "balancer balance start -d $M >/dev/null && sync";
    let trace = capture(&fs, &bin, "balance.trace", script);
    let c = charges(&trace);
    let of = |comm: &str, ino: u64, col: usize| -> u64 {
        c.iter()
            .filter(|((w, _, i), _)| w == comm && *i == ino)
            .map(|(_, v)| v[col])
            .sum()
    };
    // The data moved: read and written by the balance, with no file.
    assert!(of("balancer", 0, 2) >= 8 * MIB, "{c:#?}");
    assert!(
        of("balancer", 0, 0) + of("balancer", 0, 1) >= 8 * MIB,
        "{c:#?}"
    );
    // Nothing on x.dat, whose number the relocation inode has.
    assert_eq!(x, 257);
    let on_x: u64 = c
        .iter()
        .filter(|((_, _, i), _)| *i == x)
        .map(|(_, v)| v.iter().sum::<u64>())
        .sum();
    assert_eq!(on_x, 0, "{c:#?}");
    assert_eq!(data_lost(&c), 0, "{c:#?}");
}

/// A scrub (docs/attribution.md, "btrfs"): btrfs reads every copy of every extent, data and
/// tree blocks, to check their checksums, from the scrubbing task (the ioctl's thread of
/// `btrfs scrub start -B`). All of those reads are the scrubber's; nothing is written for
/// a clean filesystem, and nothing goes to the lost intent.
#[test]
fn a_scrub_is_charged_to_itself() {
    let Some((_g, fs)) = setup() else { return };
    if !support::ready(&["btrfs"]) {
        return;
    }
    let bin = tools(&fs, &[("scrubber", "/usr/bin/btrfs")]);
    let m = fs.mnt.display();
    sh(&format!(
        "dd if=/dev/urandom of={m}/x.dat bs=1M count=8 status=none && sync"
    ));
    let trace = capture(
        &fs,
        &bin,
        "scrub.trace",
        "scrubber scrub start -B $M >/dev/null",
    );
    let c = charges(&trace);
    let read = |keep: &dyn Fn(&str) -> bool| -> u64 {
        c.iter()
            .filter(|((w, _, _), _)| keep(w))
            .map(|(_, v)| v[0] + v[1])
            .sum()
    };
    let (mine, all) = (read(&|w| w == "scrubber"), read(&|_| true));
    // The data, once (single), and the tree blocks, twice (DUP).
    assert!(mine >= 8 * MIB, "{c:#?}");
    assert_eq!(mine, all, "{c:#?}");
    let lost: u64 = c
        .iter()
        .filter(|((_, via, _), _)| via == "unknown")
        .map(|(_, v)| v.iter().sum::<u64>())
        .sum();
    assert_eq!(lost, 0, "{c:#?}");
}

/// The cleaner (docs/attribution.md, "btrfs"): a deleted subvolume's trees are dropped by
/// the `btrfs-cleaner` kernel thread, which frees their extents: the tree blocks it changes
/// (the extent and free-space trees) are its own, as any dirtier's, not the deleting task's
/// (which only unlinks the subvolume) and not the lost intent's. And the recording does not
/// keep the deleted subvolume alive.
#[test]
fn the_cleaner_is_charged_for_dropping_a_subvolume() {
    let Some((_g, fs)) = setup() else { return };
    if !support::ready(&["btrfs"]) {
        return;
    }
    let bin = tools(
        &fs,
        &[("deleter", "/usr/bin/btrfs"), ("syncer", "/usr/bin/sync")],
    );
    let m = fs.mnt.display();
    // Many small files: a subvolume of many tree blocks, whose drop the cleaner does.
    sh(&format!(
        "btrfs -q subvolume create {m}/s1 && for d in $(seq 1 40); do mkdir {m}/s1/$d; \
         for f in $(seq 1 50); do echo $d$f > {m}/s1/$d/$f; done; done && sync"
    ));
    // `subvolume sync` returns once the cleaner dropped the tree, which it cannot while
    // anyone holds a directory of it open: the recorder opened the nested subvolumes to name
    // their files and held them to the end (the sync then waited for the recording, which
    // waited for it). The timeout makes that a failure, not a hang.
    let script = "deleter -q subvolume delete -C $M/s1 && \
                  timeout 60 deleter -q subvolume sync $M && syncer";
    let trace = capture(&fs, &bin, "cleaner.trace", script);
    let c = charges(&trace);
    let tree = |comm: &str| -> u64 {
        c.iter()
            .filter(|((w, _, i), _)| w == comm && *i == 1)
            .map(|(_, v)| v[2])
            .sum()
    };
    assert!(tree("btrfs-cleaner") > 0, "{c:#?}");
    let lost: u64 = c
        .iter()
        .filter(|((_, via, _), _)| via == "unknown")
        .map(|(_, v)| v[2])
        .sum();
    assert_eq!(lost, 0, "{c:#?}");
}
