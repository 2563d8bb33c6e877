//! Hostile declared lengths must be rejected before anything is allocated, and a trace of many
//! files must not hold every file's decoded metadata: measured with a counting global allocator
//! (largest single allocation, and peak of live heap bytes).
//!
//! Regression tests for the audit's "unbounded allocation on hostile input": a directory of 8
//! tiny files each with an 8 KB zstd frame declaring 256 MiB made `ioblame info` reach 2.1 GB.

use std::path::Path;

use ioblame_format::block::{encode_block, kind};
use ioblame_format::*;
use ioblame_testkit::alloc::{measure, one_test_at_a_time, Counting};

#[global_allocator]
static A: Counting = Counting;

const MIB: usize = 1 << 20;

fn header(file_index: u32) -> Header {
    Header {
        byte_order: ByteOrder::native(),
        word_size: 8,
        page_size: 4096,
        cpu_count: 2,
        clock_id: 1,
        recorder_pid: 1,
        file_index,
        start_time_ns: 1,
        start_clock_ns: 1,
        trace_id: 77,
        hostname: "h".into(),
        kernel_release: "6.18".into(),
        machine: "x86_64".into(),
        recorder_version: "test".into(),
    }
}

/// A file holding the header and empty metadata, then `blocks`, not closed.
fn file_with(blocks: &[Vec<u8>]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.iob");
    let w = FileWriter::create(&p, &header(0), &Metadata::default()).unwrap();
    w.finish().unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let idx = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().unwrap()) as usize;
    let mut out = bytes[..idx].to_vec();
    for b in blocks {
        out.extend_from_slice(b);
    }
    out
}

/// A KALLSYMS block declaring `declared` bytes of text, with the zstd frame `z`.
fn kallsyms_block(declared: u32, z: &[u8]) -> Vec<u8> {
    let mut p = 0u32.to_le_bytes().to_vec();
    p.extend(declared.to_le_bytes());
    p.extend_from_slice(z);
    encode_block(kind::KALLSYMS, 0, &p)
}

/// `n` bytes that do not compress.
fn noise(n: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A KALLSYMS block declaring `declared` bytes of text in frame `z` is refused with a problem
/// saying `why`, and reading it never allocates a MiB.
fn kallsyms_refused_before_allocating(declared: u32, z: &[u8], why: &str) {
    symbols_refused_before_allocating(kallsyms_block(declared, z), why);
}

/// A file whose symbols are the block `block` reads without them, with a problem saying
/// `why`, and never allocates a MiB.
fn symbols_refused_before_allocating(block: Vec<u8>, why: &str) {
    let bytes = file_with(&[block]);
    let (f, largest, _) = measure(|| {
        let f = TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap();
        f.metadata();
        f
    });
    assert!(f.metadata().kallsyms.is_none());
    assert!(
        f.metadata_problems().iter().any(|p| p.what.contains(why)),
        "{:?}",
        f.metadata_problems()
    );
    assert!(largest < MIB, "largest allocation {largest} bytes");
}

#[test]
fn kallsyms_declaring_more_than_its_frame_holds_is_rejected_before_allocating() {
    let _serial = one_test_at_a_time();
    // A 1 MiB frame may plausibly hold 200 MiB, but this one says it holds 1 MiB.
    let z = zstd::bulk::compress(&noise(MIB), 3).unwrap();
    kallsyms_refused_before_allocating(200 << 20, &z, "frame holds 1048576 bytes");
}

#[test]
fn kallsyms_bomb_is_rejected_before_allocating() {
    let _serial = one_test_at_a_time();
    // 64 MiB of zeros compress to a few KiB: a real frame, but no real kallsyms text.
    let zeros = vec![0u8; 64 * MIB];
    let z = zstd::bulk::compress(&zeros, 3).unwrap();
    drop(zeros);
    assert!(z.len() < 64 << 10, "{}", z.len());
    kallsyms_refused_before_allocating(64 << 20, &z, "times its size");
}

#[test]
fn kallsyms_parts_bomb_is_rejected_before_allocating() {
    let _serial = one_test_at_a_time();
    // 1,024 parts of 64 KiB of zeros: each alone within the ratio a tiny frame may claim,
    // together 64 MiB from about 20 KiB of frames.
    let z = zstd::bulk::compress(&vec![0u8; 64 << 10], 3).unwrap();
    let n = 1024u32;
    let mut p = 0u32.to_le_bytes().to_vec();
    p.extend((n << 16).to_le_bytes());
    p.extend(n.to_le_bytes());
    for _ in 0..n {
        p.extend((z.len() as u32).to_le_bytes());
        p.extend((64u32 << 10).to_le_bytes());
    }
    for _ in 0..n {
        p.extend_from_slice(&z);
    }
    symbols_refused_before_allocating(
        encode_block(kind::KALLSYMS_PARTS, 0, &p),
        "times their size",
    );
}

#[test]
fn files_table_declaring_more_than_its_frame_holds_is_rejected_before_allocating() {
    let _serial = one_test_at_a_time();
    let z = zstd::bulk::compress(&noise(MIB), 3).unwrap();
    let mut p = 0u32.to_le_bytes().to_vec();
    p.extend(1u32.to_le_bytes());
    p.extend(((200 << 20) as u32).to_le_bytes());
    p.extend_from_slice(&z);
    let bytes = file_with(&[encode_block(kind::FILES, 0, &p)]);
    let f = TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap();
    let t = Trace::from_files(vec![f], vec![]);
    let (n, largest, _) = measure(|| t.paths().len());
    assert_eq!(n, 0);
    assert!(
        t.paths()
            .problems()
            .iter()
            .any(|p| p.what.contains("frame holds 1048576 bytes")),
        "{:?}",
        t.paths().problems()
    );
    assert!(largest < MIB, "largest allocation {largest} bytes");
}

#[test]
fn chunk_declaring_more_than_its_frame_holds_is_rejected_before_allocating() {
    let _serial = one_test_at_a_time();
    let mut b = ChunkBuilder::new(0);
    let mut rec = vec![0u8; 16];
    rec[..4].copy_from_slice(&9u32.to_ne_bytes());
    rec[6..8].copy_from_slice(&16u16.to_ne_bytes());
    b.push(&rec, Some(1));
    let mut ch = b.finish(1).unwrap();
    // uncompressed_len (chunk header offset 48) = 64 MiB, the cap; re-seal the block.
    ch.block[24 + 48..24 + 52].copy_from_slice(&((64 << 20) as u32).to_le_bytes());
    let crc = crc32fast::hash(&ch.block[24..]);
    ch.block[12..16].copy_from_slice(&crc.to_le_bytes());
    let hcrc = crc32fast::hash(&ch.block[..20]);
    ch.block[20..24].copy_from_slice(&hcrc.to_le_bytes());
    let bytes = file_with(&[ch.block]);
    let t = Trace::from_files(
        vec![TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap()],
        vec![],
    );
    assert_eq!(t.chunks().len(), 1);
    let (r, largest, _) = measure(|| t.decompress(&t.chunks()[0]));
    let e = r.unwrap_err().to_string();
    assert!(e.contains("frame holds 16 bytes"), "{e}");
    assert!(largest < MIB, "largest allocation {largest} bytes");
}

#[test]
fn declared_counts_reserve_little() {
    let _serial = one_test_at_a_time();
    // 1 MiB sections whose counts claim as many entries as fit, but hold garbage after the
    // first: vectors must not be sized from the count.
    let mut tasks = ((MIB / 12) as u32).to_le_bytes().to_vec();
    tasks.resize(MIB, 0xff);
    let mut events = ((MIB / 40) as u32).to_le_bytes().to_vec();
    events.resize(MIB, 0xff);
    let mut mounts = ((MIB / 28) as u32).to_le_bytes().to_vec();
    mounts.resize(MIB, 0xff);
    let bytes = file_with(&[
        encode_block(kind::TASKS, 0, &tasks),
        encode_block(kind::EVENTS, 0, &events),
        encode_block(kind::MOUNTS, 0, &mounts),
    ]);
    let f = TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap();
    let (n, largest, _) = measure(|| f.metadata_problems().len());
    assert_eq!(n, 3, "{:?}", f.metadata_problems());
    assert!(largest < 256 << 10, "largest allocation {largest} bytes");
}

/// Kallsyms-like text of about `len` bytes, compressing roughly as real kallsyms does.
fn fake_kallsyms(len: usize, seed: u64) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(len + 64);
    let mut x = seed | 1;
    let mut addr = 0xffff_ffff_8100_0000u64;
    while s.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        addr += x % 4096;
        let _ = writeln!(s, "{addr:016x} T sym_{:x}_{}", x >> 40, x % 977);
    }
    s
}

#[test]
fn a_trace_of_many_files_decodes_only_the_metadata_it_needs() {
    let _serial = one_test_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let text = fake_kallsyms(4 * MIB, 5);
    for i in 0..8 {
        let meta = Metadata {
            kallsyms: Some(Kallsyms {
                text: text.clone(),
                restricted: false,
            }),
            ..Metadata::default()
        };
        let w = FileWriter::create(&dir.path().join(ring_file_name(i)), &header(i), &meta).unwrap();
        w.finish().unwrap();
    }
    drop(text);
    let (t, _, peak) = measure(|| {
        let t = Trace::open(dir.path()).unwrap();
        assert_eq!(t.files().len(), 8);
        assert!(t.metadata().kallsyms.as_ref().unwrap().text.len() >= 4 * MIB);
        t
    });
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    // One file's symbols (4 MiB) are decoded, not eight (32 MiB).
    assert!(peak < 10 * MIB, "peak heap {peak} bytes");
}

/// Naming a few inodes of a large FILE_INDEX table decompresses only the groups that hold
/// them: a lookup's heap is a group's, not the table's (the issue of a root filesystem's
/// 450,000 paths read by every analysis).
#[test]
fn a_lookup_in_a_large_file_table_decompresses_one_group() {
    let _serial = one_test_at_a_time();
    let n = 200_000u64;
    let table = FileTable {
        flags: FILES_TOUCHED,
        entries: (0..n)
            .map(|i| FileEntry {
                dev: 7 << 20,
                ino: i * 3,
                path: format!("/srv/data/dir{}/file-{i}.dat", i % 977),
            })
            .collect(),
        unnamed: Vec::new(),
    };
    let dir = tempfile::tempdir().unwrap();
    let mut w = RingWriter::create(
        dir.path(),
        header(0),
        Metadata::default(),
        RingOptions::default(),
    )
    .unwrap();
    w.write_files(&table).unwrap();
    w.finish().unwrap();
    let t = Trace::open(dir.path()).unwrap();
    let (found, _, peak) = measure(|| {
        let a = t.path_of(7 << 20, 3 * 123_456).map(str::to_string);
        let b = t.path_of(7 << 20, 3 * 7).map(str::to_string);
        let missing = t.path_of(7 << 20, 3 * 7 + 1);
        (a, b, missing)
    });
    assert_eq!(found.0.as_deref(), Some("/srv/data/dir354/file-123456.dat"));
    assert_eq!(found.1.as_deref(), Some("/srv/data/dir7/file-7.dat"));
    assert_eq!(found.2, None);
    // The table is about 7 MB of paths; two groups of 512 entries, about 50 KB each.
    assert!(peak < 2 * MIB, "peak {peak} bytes for three lookups");
    let (all, _, peak_all) = measure(|| t.paths().len());
    assert_eq!(all, n as usize);
    assert!(
        peak_all > 4 * peak,
        "the whole table ({peak_all}) against a lookup ({peak})"
    );
}
