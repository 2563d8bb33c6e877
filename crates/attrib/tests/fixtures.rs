//! Decode + attribution over the real captures in `fixtures/`, checked against the known
//! answers in their READMEs.

use std::path::PathBuf;

use ioblame_attrib::{attribute_trace, Attribution, Context, Dir, Io, Via};
use ioblame_decode::{Decoder, Symbolizer};
use ioblame_format::Trace;

const MIB: u64 = 1 << 20;

fn trace_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
        .join("trace")
}

/// The inode of `file` in a fixture, from the paths its trace names (fixtures/make.sh
/// mounts the filesystem at /mnt/ioblame-fixture).
fn ino(name: &str, file: &str) -> u64 {
    let trace = Trace::open(&trace_dir(name)).unwrap();
    let want = format!("/mnt/ioblame-fixture/{file}");
    let found = trace
        .paths()
        .iter()
        .find(|(_, _, p)| *p == want)
        .map(|(_, i, _)| i);
    found.unwrap_or_else(|| panic!("fixture {name} names no {want}"))
}

fn run(name: &str) -> (Vec<Io>, Attribution) {
    let dir = trace_dir(name);
    let trace = Trace::open(&dir).unwrap_or_else(|e| panic!("fixture {name}: {e}"));
    let decoder = Decoder::new(trace.header(), trace.metadata());
    let mut ctx = Context::from_trace(trace.header(), trace.metadata());
    if let Some(k) = &trace.metadata().kallsyms {
        ctx.symbols = Some(Box::new(Symbolizer::from_kallsyms(&k.text)));
    }
    attribute_trace(&trace, &decoder, ctx)
}

/// Bytes in `dir` charged to acts of `comm` via `via`.
fn bytes(ios: &[Io], out: &Attribution, comm: &str, via: Via, dir: Dir) -> u64 {
    let t = &out.tables;
    ios.iter()
        .filter(|i| {
            i.dir == dir && i.via == via && t.roles[t.acts[i.act.index()].role.index()].comm == comm
        })
        .map(|i| i.size)
        .sum()
}

/// The request mixing writerH1's last 256 KiB and writerH2's first 1 MiB of h.dat, at
/// `sector`: two IOs of one request, contiguous, charged to each writer by sector.
fn check_mixed_request(ios: &[Io], out: &Attribution, sector: u64) {
    let t = &out.tables;
    let split: Vec<(&str, u64, u64, Option<u64>)> = ios
        .iter()
        .filter(|i| i.split)
        .map(|i| {
            (
                t.roles[t.acts[i.act.index()].role.index()].comm.as_str(),
                i.sector,
                i.size,
                i.file_offset,
            )
        })
        .collect();
    assert_eq!(
        split,
        vec![
            ("writerH1", sector, 256 << 10, Some(4 * MIB - (256 << 10))),
            ("writerH2", sector + 512, MIB, Some(4 * MIB)),
        ]
    );
    let parts: Vec<&Io> = ios.iter().filter(|i| i.split).collect();
    assert_eq!(parts[0].issue_time, parts[1].issue_time, "one request");
    assert_eq!(
        parts[0].complete_time, parts[1].complete_time,
        "one request"
    );
}

fn check_conservation(ios: &[Io], out: &Attribution) {
    let sum: u64 = ios.iter().map(|i| i.size).sum();
    assert_eq!(sum, out.summary.total_bytes());
    assert_eq!(
        out.tables
            .totals
            .iter()
            .map(|t| t.total_bytes())
            .sum::<u64>(),
        sum
    );
}

#[test]
fn ext4_direct_write_and_read_are_charged_to_the_issuers() {
    let (ios, out) = run("ext4-direct");
    check_conservation(&ios, &out);
    assert_eq!(
        bytes(&ios, &out, "writerD", Via::Direct, Dir::W),
        4 * MIB,
        "summary: {:?}",
        out.summary
    );
    assert_eq!(bytes(&ios, &out, "readerR", Via::Direct, Dir::R), 4 * MIB);
    let t = &out.tables;
    let c = ino("ext4-direct", "c.dat");
    for i in ios.iter().filter(|i| i.via == Via::Direct) {
        assert_eq!(i.ino, Some(c), "c.dat is ino {c}");
        assert!(
            t.roles[t.acts[i.act.index()].role.index()]
                .comm
                .starts_with("writerD")
                || i.dir == Dir::R
        );
    }
    assert_eq!(out.summary.lost_records, 0);
}

#[test]
fn ext4_two_writers_halves_and_overwrite_ground_truth() {
    let (ios, out) = run("ext4-two-writers");
    check_conservation(&ios, &out);
    let t = &out.tables;
    let per = |comm: &str, ino: u64| -> u64 {
        ios.iter()
            .filter(|i| {
                i.dir == Dir::W
                    && i.ino == Some(ino)
                    && matches!(i.via, Via::Page | Via::Buffer)
                    && t.roles[t.acts[i.act.index()].role.index()].comm == comm
            })
            .map(|i| i.size)
            .sum()
    };
    let msg = format!("summary: {:?}", out.summary);
    for (id, a, tot) in t.acts_with_totals() {
        let r = &t.roles[a.role.index()];
        eprintln!(
            "act {id}: {} {:?} ino {} intent {} W {} B / {} IOs",
            r.comm, a.via, a.file.ino, a.intent, tot.bytes[2], tot.ios[2]
        );
    }
    // The one request holding pages of both halves' writers is split between them by
    // sector (fixtures/ext4-two-writers/README.md; docs/attribution.md, "Splitting a request
    // between acts": 256 KiB of H1, 1 MiB of H2).
    check_mixed_request(&ios, &out, 302592);
    let f = |file| ino("ext4-two-writers", file);
    assert_eq!(per("writerA", f("g_A.dat")), 8 * MIB, "{msg}");
    assert_eq!(per("writerB", f("g_B.dat")), 4 * MIB, "{msg}");
    assert_eq!(per("writerH1", f("h.dat")), 4 * MIB, "{msg}");
    assert_eq!(per("writerH2", f("h.dat")), 4 * MIB, "{msg}");
    assert_eq!(per("writerO", f("h.dat")), 4 * MIB, "{msg}");
    // sync itself writes ~no data
    let sync_data: u64 = ios
        .iter()
        .filter(|i| {
            matches!(i.via, Via::Page) && t.roles[t.acts[i.act.index()].role.index()].comm == "sync"
        })
        .map(|i| i.size)
        .sum();
    assert_eq!(sync_data, 0);
    // data writes carry reason sync
    assert!(ios
        .iter()
        .filter(|i| matches!(i.via, Via::Page) && i.ino == Some(f("h.dat")))
        .all(|i| i.reason.map(|r| r.0) == Some(2)));
    // the journal is charged to jbd2
    let jbd2: u64 = ios
        .iter()
        .filter(|i| {
            i.via == Via::Journal
                && t.roles[t.acts[i.act.index()].role.index()]
                    .comm
                    .starts_with("jbd2/")
        })
        .map(|i| i.size)
        .sum();
    assert!(jbd2 > 0, "{msg}");
}

#[test]
fn xfs_two_writers_halves_and_overwrite_ground_truth() {
    let (ios, out) = run("xfs-two-writers");
    check_conservation(&ios, &out);
    let t = &out.tables;
    let comm = |i: &Io| t.roles[t.acts[i.act.index()].role.index()].comm.as_str();
    let per = |who: &str, ino: u64| -> u64 {
        ios.iter()
            .filter(|i| {
                i.dir == Dir::W && i.ino == Some(ino) && i.via == Via::Page && comm(i) == who
            })
            .map(|i| i.size)
            .sum()
    };
    let msg = format!("summary: {:?}", out.summary);
    let f = |file| ino("xfs-two-writers", file);
    assert_eq!(per("writerA", f("g_A.dat")), 8 * MIB, "{msg}");
    assert_eq!(per("writerB", f("g_B.dat")), 4 * MIB, "{msg}");
    for w in ["writerH1", "writerH2", "writerO"] {
        assert_eq!(per(w, f("h.dat")), 4 * MIB, "{w}; {msg}");
    }
    // `sync` started writeback and wrote the log: no data bytes are charged to it.
    let sync_data: u64 = ios
        .iter()
        .filter(|i| comm(i) == "sync" && i.via != Via::Journal)
        .map(|i| i.size)
        .sum();
    assert_eq!(sync_data, 0, "{msg}");
    assert!(ios
        .iter()
        .any(|i| comm(i) == "sync" && i.via == Via::Journal));
    assert_eq!(out.summary.unknown_bytes, 0, "{msg}");
    check_mixed_request(&ios, &out, 32448);
}

/// btrfs (fixtures/btrfs-writers/README.md): linked through the trace's chunk map and the
/// ordered extents. Every data byte goes to its writer on its file, the O_DSYNC writer's
/// from its own thread; the compressed file's fewer bytes to its writer; the tree blocks
/// (btree inode, ino 1) in DUP pairs, part of them to the writers, those of the extents'
/// finishing to the extents' writers; the superblock copies as journal IO; nothing to the
/// lost intent.
#[test]
fn btrfs_writers_dsync_and_compressed_ground_truth() {
    let name = "btrfs-writers";
    let (ios, out) = run(name);
    check_conservation(&ios, &out);
    let t = &out.tables;
    let comm = |i: &Io| t.roles[t.acts[i.act.index()].role.index()].comm.as_str();
    let on = |ino: u64| -> Vec<&Io> {
        ios.iter()
            .filter(|i| i.dir == Dir::W && t.acts[i.act.index()].file.ino == ino)
            .collect()
    };
    let msg = format!("summary: {:?}", out.summary);
    for (who, file, want) in [
        ("writerA", "a.dat", 4 * MIB),
        ("writerB", "b.dat", 2 * MIB),
        ("writerF", "f.dat", MIB),
    ] {
        let ios = on(ino(name, file));
        let mine: u64 = ios
            .iter()
            .filter(|i| comm(i) == who && i.via == Via::Page)
            .map(|i| i.size)
            .sum();
        assert_eq!(mine, want, "{who} on {file}; {msg}");
        assert_eq!(ios.iter().map(|i| i.size).sum::<u64>(), want, "{file}");
    }
    // O_DSYNC: btrfs_sync_file writes the data from the writer's own thread.
    let f = on(ino(name, "f.dat"));
    assert!(f.iter().all(|i| i.reason.is_none()), "{msg}");
    // Compressed: every byte written for z.dat is writerZ's, far fewer than it wrote.
    let z = on(ino(name, "z/z.dat"));
    let zb: u64 = z.iter().map(|i| i.size).sum();
    assert!(zb > 0 && zb < MIB, "{zb}");
    assert!(z.iter().all(|i| comm(i) == "writerZ" && i.via == Via::Page));
    // Made by the compression workers after the sync's writeback pass over z.dat: its
    // reason (docs/attribution.md, "btrfs", "Compressed extents' reason").
    assert!(
        z.iter().all(|i| i.reason.map(|r| r.name()) == Some("sync")),
        "{:?}",
        z.iter().map(|i| i.reason).collect::<Vec<_>>()
    );
    // Tree blocks: DUP, so in pairs; some the writers'.
    let tree = on(1);
    let tb: u64 = tree.iter().map(|i| i.size).sum();
    assert!(tb > 0 && tb % (2 * 4096) == 0, "{tb}");
    assert!(tree.iter().any(|i| comm(i) == "writerF"));
    // The tree blocks the endio workers first dirtied finishing an ordered extent (file
    // extent and checksum items) are that extent's writer's: writerZ's compressed extents'
    // included; none stays with a kernel worker.
    assert!(tree.iter().any(|i| comm(i) == "writerZ"), "{msg}");
    assert!(
        tree.iter().all(|i| !comm(i).starts_with("kworker")),
        "{:?}",
        tree.iter().map(|i| comm(i)).collect::<Vec<_>>()
    );
    // The superblock copies (two on a 512 MiB device), journal IO of the committers.
    assert!(ios
        .iter()
        .any(|i| i.via == Via::Journal && i.sector == (64 * MIB) / 512));
    assert_eq!(out.summary.unknown_bytes, 0, "{msg}");
    assert_eq!(out.summary.btrfs_unmapped_bytes, 0);
    assert_eq!(out.summary.btrfs_shared_ino_bytes, 0);
}

/// The prefetch is a hint: attributing each fixture with events shown ahead (as the
/// analyzer does) and without gives the same IOs and tables.
#[test]
fn prefetching_changes_nothing() {
    for name in [
        "ext4-direct",
        "ext4-mmap",
        "ext4-readahead",
        "ext4-two-writers",
        "xfs-two-writers",
        "btrfs-writers",
    ] {
        let (ios, out) = run(name);
        let trace = Trace::open(&trace_dir(name)).unwrap();
        let decoder = Decoder::new(trace.header(), trace.metadata());
        let mut ctx = Context::from_trace(trace.header(), trace.metadata());
        if let Some(k) = &trace.metadata().kallsyms {
            ctx.symbols = Some(Box::new(Symbolizer::from_kallsyms(&k.text)));
        }
        let mut a = ioblame_attrib::Attributor::new(ctx);
        let mut plain = Vec::new();
        let mut shown = 0;
        ioblame_decode::for_each_event_ahead(
            &trace,
            &decoder,
            &ioblame_decode::StreamOptions::default(),
            |ev, ahead| {
                shown += usize::from(ahead.is_some());
                a.push(ev);
                a.drain_ios_into(&mut plain);
            },
        );
        let done = a.finish();
        plain.extend(done.ios.iter().cloned());
        assert!(shown > 0, "{name}: no event shown ahead");
        assert_eq!(ios, plain, "{name}");
        assert_eq!(out, done, "{name}");
    }
}
