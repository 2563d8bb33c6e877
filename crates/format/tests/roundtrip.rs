//! Round trips, ring behaviour, damage and hostile input for the trace format.

use std::path::Path;

use ioblame_format::block::{self, encode_block, kind, preamble};
use ioblame_format::*;

/// A fake perf record in the given byte order: `kind`, total `size` (multiple of 8), the
/// timestamp stored in the first body word.
fn record(order: ByteOrder, kind: u32, size: u16, ts: u64) -> Vec<u8> {
    let mut r = Vec::with_capacity(size as usize);
    match order {
        ByteOrder::Little => {
            r.extend(kind.to_le_bytes());
            r.extend(0u16.to_le_bytes());
            r.extend(size.to_le_bytes());
            r.extend(ts.to_le_bytes());
        }
        ByteOrder::Big => {
            r.extend(kind.to_be_bytes());
            r.extend(0u16.to_be_bytes());
            r.extend(size.to_be_bytes());
            r.extend(ts.to_be_bytes());
        }
    }
    // Incompressible filler, so that ring limits are reached with few records.
    let mut x = ts.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while r.len() < size as usize {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.push(x as u8);
    }
    r
}

fn header(order: ByteOrder) -> Header {
    Header {
        byte_order: order,
        word_size: 8,
        page_size: 4096,
        cpu_count: 4,
        clock_id: 1,
        recorder_pid: 4242,
        file_index: 0,
        start_time_ns: 1_700_000_000_000_000_000,
        start_clock_ns: 123_456_789,
        trace_id: 0x1234_5678_9abc_def0,
        hostname: "prod-db-7".into(),
        kernel_release: "6.18.44".into(),
        machine: "x86_64".into(),
        recorder_version: "ioblame-capture test".into(),
    }
}

fn metadata() -> Metadata {
    Metadata {
        events: vec![EventDesc {
            name: "block:block_rq_complete".into(),
            tracefs_id: 1234,
            sample_type: 0x10086,
            read_format: 0,
            flags: EVENT_TASK_RECORDS,
            max_stack: 0,
            filter: "dev == 7340032".into(),
            format: "name: block_rq_complete\nID: 1234\nformat:\n".into(),
            ids: vec![11, 12, 13, 14],
            regs_user: 0x1c0,
            stack_user: 1024,
        }],
        kallsyms: Some(Kallsyms {
            text: "ffffffff81000000 T _stext\nffffffff81000100 T submit_bio\n".into(),
            restricted: false,
        }),
        block_devices: vec![BlockDevice {
            name: "loop0".into(),
            major: 7,
            minor: 0,
            size_sectors: 2097152,
            part_start: 0,
            parent: String::new(),
            loop_backing_file: "/tmp/ext4.img".into(),
            logical_block_size: 512,
        }],
        mounts: vec![
            Mount {
                mount_id: 42,
                major: 7,
                minor: 0,
                root: "/".into(),
                mount_point: "/mnt/x".into(),
                fs_type: "ext4".into(),
                source: "/dev/loop0".into(),
                block_size: 4096,
                ..Mount::default()
            },
            Mount {
                mount_id: 43,
                major: 7,
                minor: 1,
                root: "/".into(),
                mount_point: "/mnt/y".into(),
                fs_type: "xfs".into(),
                source: "/dev/loop1".into(),
                block_size: 4096,
                // 1.4: the xfs allocation group geometry
                xfs_agblocks: 20480,
                xfs_agblklog: 15,
            },
        ],
        tasks: vec![Task {
            pid: 1,
            tid: 1,
            comm: "init".into(),
        }],
        capture_info: vec![("command".into(), "dd if=/dev/zero".into())],
        cgroups: vec![
            Cgroup {
                id: 1,
                path: "/".into(),
            },
            Cgroup {
                id: 4242,
                path: "/system.slice/nginx.service".into(),
            },
        ],
        loops: vec![loop_device(0, 12, 0)],
        dm_targets: vec![DmTarget {
            major: 254,
            minor: 0,
            start: 0,
            length: 204800,
            target: "crypt".into(),
            lower_major: 7,
            lower_minor: 0,
            lower_offset: 32768,
            since_ns: 0,
        }],
        user_maps: vec![user_map(4000, 0x5555_0000_0000)],
        btrfs: vec![btrfs_fs(&[btrfs_chunk(13631488, BTRFS_CHUNK_DATA, 0)])],
    }
}

/// A BTRFS entry (format 1.9): a filesystem on /dev/loop0 (devid 1) with `chunks`.
fn btrfs_fs(chunks: &[BtrfsChunk]) -> BtrfsFs {
    BtrfsFs {
        fsid: *b"fsid-of-a-btrfs!",
        major: 0,
        minor: 40,
        bdi: "btrfs-1".into(),
        sector_size: 4096,
        node_size: 16384,
        devices: vec![BtrfsDevice {
            devid: 1,
            major: 7,
            minor: 0,
        }],
        chunks: chunks.to_vec(),
    }
}

/// A chunk of 8 MiB at `logical`, at the same device byte, or DUP (a second copy 1 GiB on).
fn btrfs_chunk(logical: u64, flags: u64, since_ns: u64) -> BtrfsChunk {
    let mut stripes = vec![BtrfsStripe {
        devid: 1,
        physical: logical,
    }];
    if flags & BTRFS_CHUNK_DUP != 0 {
        stripes.push(BtrfsStripe {
            devid: 1,
            physical: logical + (1 << 30),
        });
    }
    BtrfsChunk {
        logical,
        length: 8 << 20,
        flags,
        stripe_len: 65536,
        sub_stripes: 1,
        stripes,
        since_ns,
    }
}

/// A USER_MAPS entry (format 1.8): `/usr/bin/app` of process `pid` mapped at `start`.
fn user_map(pid: u32, start: u64) -> UserMap {
    UserMap {
        pid,
        start,
        end: start + 0x3000,
        pgoff: 0x1000,
        dev_major: 8,
        dev_minor: 1,
        ino: 77,
        build_id: (1..=20).collect(),
        seen_ns: 5,
        path: "/usr/bin/app".into(),
    }
}

/// A PERF_MAPS block's content (format 1.8).
fn perf_map() -> PerfMap {
    PerfMap {
        pid: 4001,
        text: "7f0000001000 40 jit_wal_append\n".into(),
    }
}

/// A USER_SYMBOLS block's content (format 1.8).
fn user_symbols() -> UserSymbols {
    UserSymbols {
        build_id: (1..=20).collect(),
        path: "/usr/bin/app".into(),
        class64: true,
        big_endian: false,
        machine: 62,
        loads: vec![ElfLoad {
            offset: 0x1000,
            vaddr: 0x401000,
            filesz: 0x2000,
            flags: 5,
        }],
        sections: vec![
            ElfSection {
                name: ".symtab".into(),
                addr: 0,
                data: vec![0; 48],
            },
            ElfSection {
                name: ".strtab".into(),
                addr: 0,
                data: b"\0main\0".to_vec(),
            },
            ElfSection {
                name: ".eh_frame".into(),
                addr: 0x402000,
                data: vec![0x14, 0, 0, 0],
            },
        ],
    }
}

/// A LOOPS entry (format 1.7): loop device 7:`minor` over inode `ino` of 8:1.
fn loop_device(minor: u32, ino: u64, since_ns: u64) -> LoopDevice {
    LoopDevice {
        major: 7,
        minor,
        backing_major: 8,
        backing_minor: 1,
        backing_ino: ino,
        offset: 1 << 20,
        size_limit: 0,
        direct_io: minor % 2 == 1,
        since_ns,
        backing_file: format!("/var/lib/images/{ino}.img"),
    }
}

/// A ring writer with the default options into `dir`, for the test header and metadata.
fn ring_writer(dir: &Path, order: ByteOrder) -> RingWriter {
    RingWriter::create(dir, header(order), metadata(), RingOptions::default()).unwrap()
}

/// Writes `chunks_per_cpu` chunks on each of `cpus` CPUs (interleaved) into a ring in `dir`;
/// returns the record bytes of every chunk in write order.
fn write_trace(
    dir: &Path,
    order: ByteOrder,
    cpus: u32,
    chunks_per_cpu: u32,
    opts: RingOptions,
) -> Vec<(u32, Vec<u8>)> {
    let mut w = RingWriter::create(dir, header(order), metadata(), opts).unwrap();
    let mut builders: Vec<ChunkBuilder> = (0..cpus).map(ChunkBuilder::new).collect();
    let mut written = Vec::new();
    let mut ts = 1000u64;
    for c in 0..chunks_per_cpu {
        for (cpu, b) in builders.iter_mut().enumerate() {
            let mut bytes = Vec::new();
            for i in 0..(50 + c * 7 + cpu as u32) {
                ts += 1;
                let r = record(order, 9, 16 + 8 * (i % 5) as u16, ts);
                bytes.extend(&r);
                b.push(&r, Some(ts));
            }
            if c % 3 == 1 {
                b.add_lost(c as u64);
            }
            let ch = b.finish(3).unwrap();
            w.write_chunk(&ch).unwrap();
            written.push((cpu as u32, bytes));
        }
    }
    w.finish().unwrap();
    written
}

fn all_chunks(t: &Trace) -> Vec<(u32, Vec<u8>)> {
    t.chunks()
        .iter()
        .map(|c| {
            let ch = t.decompress(c).unwrap();
            (ch.header.cpu, ch.data)
        })
        .collect()
}

/// Decompressing into a used buffer gives the same chunk as a fresh decompression, reuses
/// a buffer large enough, and ignores what the buffer held.
#[test]
fn decompress_into_reuses_the_buffer() {
    let dir = tempfile::tempdir().unwrap();
    write_trace(
        dir.path(),
        ByteOrder::native(),
        2,
        3,
        RingOptions::default(),
    );
    let t = Trace::open(dir.path()).unwrap();
    let largest = t
        .chunks()
        .iter()
        .map(|c| c.header.uncompressed_len as usize)
        .max()
        .unwrap();
    let mut buf = vec![0xAAu8; largest + 100];
    for c in t.chunks() {
        let want = t.decompress(c).unwrap();
        let ptr = buf.as_ptr();
        let got = t.decompress_into(c, buf).unwrap();
        assert_eq!(got.header, want.header);
        assert_eq!(got.data, want.data);
        assert_eq!(got.data.as_ptr(), ptr, "a buffer large enough is reused");
        buf = got.data;
    }
    // Too small a buffer is replaced, not grown.
    let c = &t.chunks()[0];
    let got = t.decompress_into(c, vec![1, 2, 3]).unwrap();
    assert_eq!(got.data, t.decompress(c).unwrap().data);
}

#[test]
fn round_trip_metadata_and_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_trace(
        dir.path(),
        ByteOrder::native(),
        4,
        6,
        RingOptions::default(),
    );
    let t = Trace::open(dir.path()).unwrap();
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    assert_eq!(t.files().len(), 1);
    assert!(t.files()[0].indexed());
    assert_eq!(t.header(), &header(ByteOrder::native()));
    assert_eq!(t.metadata(), &metadata());
    assert_eq!(all_chunks(&t), written);
    // Headers carry the per-CPU sequence, record counts, timestamps and losses.
    for (i, c) in t.chunks().iter().enumerate() {
        let round = i as u64 / 4;
        assert_eq!(c.header.cpu, i as u32 % 4);
        assert_eq!(c.header.seq, round);
        assert!(c.header.first_ts <= c.header.last_ts);
        assert_eq!(c.header.lost, if round % 3 == 1 { round } else { 0 });
        let ch = t.decompress(c).unwrap();
        assert_eq!(
            ch.records(t.header().byte_order).count() as u32,
            c.header.records
        );
    }
}

#[test]
fn single_file_and_scan_without_index_agree() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_trace(
        dir.path(),
        ByteOrder::native(),
        2,
        5,
        RingOptions::default(),
    );
    let file = dir.path().join(ring_file_name(0));
    let t = Trace::open(&file).unwrap();
    assert_eq!(all_chunks(&t), written);
    // Remove the index and footer: the reader must find the same chunks by scanning.
    let bytes = std::fs::read(&file).unwrap();
    let idx_off = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().unwrap()) as usize;
    let f = TraceFile::from_bytes(&file, bytes[..idx_off].to_vec()).unwrap();
    assert!(!f.indexed());
    assert!(f.problems().is_empty(), "{:?}", f.problems());
    let t2 = Trace::from_files(vec![f], vec![]);
    assert_eq!(all_chunks(&t2), written);
}

#[cfg(feature = "parallel")]
#[test]
fn parallel_decompression_matches_with_1_and_n_threads() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_trace(
        dir.path(),
        ByteOrder::native(),
        3,
        8,
        RingOptions::default(),
    );
    let t = Trace::open(dir.path()).unwrap();
    for threads in [1, 4] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let got: Vec<(u32, Vec<u8>)> = pool.install(|| {
            t.decompress_all()
                .into_iter()
                .map(|c| {
                    let c = c.unwrap();
                    (c.header.cpu, c.data)
                })
                .collect()
        });
        assert_eq!(got, written, "{threads} threads");
    }
}

#[test]
fn ring_options_fit_the_metadata_every_file_repeats() {
    let o = |file_size, max_size| RingOptions {
        file_size,
        max_size,
    };
    // A file size under twice the start is raised to it; a larger one stays.
    assert_eq!(o(512, 0).fit(1000).unwrap(), o(2000, 0));
    assert_eq!(o(4096, 10_000).fit(1000).unwrap(), o(4096, 10_000));
    assert_eq!(o(0, 0).fit(1000).unwrap(), o(0, 0));
    // A cap that cannot hold two (fitted) files is refused, as is a cap on one file that
    // never rolls.
    // The least cap: two files and one more start (what a file gets after its last chunk).
    assert_eq!(RingOptions::least_max_size(4096, 1000), 9192);
    for (opts, file_size) in [
        (o(512, 4999), 2000),
        (o(4096, 9191), 4096),
        (o(0, 1 << 30), 0),
    ] {
        match opts.fit(1000) {
            Err(Error::RingTooSmall {
                file_start: 1000,
                file_size: f,
                max_size,
            }) => assert_eq!((f, max_size), (file_size, opts.max_size)),
            other => panic!("{opts:?}: {other:?}"),
        }
    }
    assert_eq!(o(512, 5000).fit(1000).unwrap(), o(2000, 5000));
}

#[test]
fn a_fitted_ring_measures_its_files_start_and_refuses_before_creating_anything() {
    let dir = tempfile::tempdir().unwrap();
    let ring = dir.path().join("ring");
    let opts = RingOptions {
        file_size: 1,
        max_size: 0,
    };
    let w = RingWriter::create_fitted(&ring, header(ByteOrder::native()), metadata(), None, opts)
        .unwrap();
    // The first file holds just its start: the fitted size is twice its length.
    let start = std::fs::metadata(w.current_path().unwrap()).unwrap().len();
    assert_eq!(w.options().file_size, 2 * start);
    w.finish().unwrap();
    // Too small a cap: an error, and no directory or file.
    let refused = dir.path().join("refused");
    let opts = RingOptions {
        file_size: 1,
        max_size: 3 * start,
    };
    let r = RingWriter::create_fitted(
        &refused,
        header(ByteOrder::native()),
        metadata(),
        None,
        opts,
    );
    assert!(matches!(r, Err(Error::RingTooSmall { file_start, .. }) if file_start == start));
    assert!(!refused.exists());
}

#[test]
fn a_ring_at_the_least_cap_always_keeps_a_closed_file() {
    // Files fitted to their start, the cap at its least, each chunk (one record) followed by
    // a FLUSHED mark, as a busy recorder writes them: once the ring has rolled, a closed file
    // is always there besides the one being written.
    let dir = tempfile::tempdir().unwrap();
    let fit = |d: &str, opts| {
        RingWriter::create_fitted(
            &dir.path().join(d),
            header(ByteOrder::native()),
            metadata(),
            None,
            opts,
        )
        .unwrap()
    };
    let probe = fit(
        "probe",
        RingOptions {
            file_size: 1,
            max_size: 0,
        },
    );
    let f = probe.options().file_size;
    probe.finish().unwrap();
    let mut w = fit(
        "ring",
        RingOptions {
            file_size: f,
            max_size: RingOptions::least_max_size(f, f / 2),
        },
    );
    let mut b = ChunkBuilder::new(0);
    let mut ts = 1000u64;
    for i in 0..4000u32 {
        ts += 1;
        b.push(
            &record(ByteOrder::native(), 9, 16 + 8 * (i % 5) as u16, ts),
            Some(ts),
        );
        w.write_chunk(&b.finish(3).unwrap()).unwrap();
        w.write_flushed(ts).unwrap();
        let files = std::fs::read_dir(dir.path().join("ring")).unwrap().count();
        assert!(
            w.stats().files_created < 2 || files >= 2,
            "write {i}: only the current file is left ({:?})",
            w.stats()
        );
    }
    assert!(w.stats().files_deleted > 0, "{:?}", w.stats());
    w.finish().unwrap();
}

#[test]
fn ring_rolls_and_deletes_oldest_and_each_file_stands_alone() {
    let dir = tempfile::tempdir().unwrap();
    let opts = RingOptions {
        file_size: 16 << 10,
        max_size: 48 << 10,
    };
    let written = write_trace(dir.path(), ByteOrder::native(), 2, 40, opts);
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert!(names.len() >= 2, "{names:?}");
    assert_ne!(
        names[0],
        ring_file_name(0),
        "the oldest file must have been deleted"
    );
    let total: u64 = names
        .iter()
        .map(|n| std::fs::metadata(dir.path().join(n)).unwrap().len())
        .sum();
    assert!(total <= 48 << 10, "ring holds {total} bytes");
    // Each surviving file opens alone with the full header and metadata.
    for n in &names {
        let t = Trace::open(&dir.path().join(n)).unwrap();
        assert_eq!(t.metadata(), &metadata());
        assert_eq!(t.header().trace_id, header(ByteOrder::native()).trace_id);
    }
    // The directory yields the newest chunks, a contiguous suffix of what was written, and
    // says that the older ones are missing.
    let t = Trace::open(dir.path()).unwrap();
    let got = all_chunks(&t);
    assert_eq!(&written[written.len() - got.len()..], &got[..]);
    assert!(
        t.problems()
            .iter()
            .any(|p| p.what.contains("deleted by the size cap")),
        "{:?}",
        t.problems()
    );
}

fn chunk_offsets(t: &Trace) -> Vec<u64> {
    t.chunks().iter().map(|c| c.offset).collect()
}

#[test]
fn truncation_at_every_chunk_boundary_and_random_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_trace(
        dir.path(),
        ByteOrder::native(),
        2,
        6,
        RingOptions::default(),
    );
    let file = dir.path().join(ring_file_name(0));
    let bytes = std::fs::read(&file).unwrap();
    let t = Trace::open(&file).unwrap();
    let offs = chunk_offsets(&t);
    let mut cuts: Vec<usize> = offs.iter().map(|&o| o as usize).collect();
    // Cuts inside chunks and inside metadata, from a fixed pseudo-random sequence.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..200 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        cuts.push((x % bytes.len() as u64) as usize);
    }
    for cut in cuts {
        let r = TraceFile::from_bytes(&file, bytes[..cut].to_vec());
        let Ok(f) = r else {
            // Only a cut before the end of the header block may fail to open.
            assert!(cut < offs[0] as usize, "cut at {cut} failed: {:?}", r.err());
            continue;
        };
        let complete = offs.iter().filter(|&&o| {
            let next = offs.iter().find(|&&n| n > o).copied().unwrap_or(u64::MAX);
            // A chunk is complete when its whole block lies before the cut.
            next <= cut as u64
                || (next == u64::MAX && o < cut as u64 && {
                    let t = Trace::open(&file).unwrap();
                    let last = t.chunks().last().unwrap();
                    let ch = t.decompress(last).unwrap();
                    o + 24 + 64 + ch.header.compressed_len as u64 <= cut as u64
                })
        });
        let expect = complete.count();
        let t = Trace::from_files(vec![f], vec![]);
        let got = all_chunks(&t);
        assert_eq!(got.len(), expect, "cut at {cut}");
        assert_eq!(&got[..], &written[..expect], "cut at {cut}");
        let at_boundary = offs.contains(&(cut as u64));
        if !at_boundary && cut > offs[0] as usize {
            assert!(
                t.problems().iter().any(|p| p.what.contains("truncated")),
                "cut at {cut}: {:?}",
                t.problems()
            );
        }
    }
}

#[test]
fn flipped_bytes_in_a_chunk_skip_only_that_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_trace(
        dir.path(),
        ByteOrder::native(),
        2,
        4,
        RingOptions::default(),
    );
    let file = dir.path().join(ring_file_name(0));
    let mut bytes = std::fs::read(&file).unwrap();
    let t = Trace::open(&file).unwrap();
    let offs = chunk_offsets(&t);
    // Damage the compressed payload of chunk 3 and drop the index so the reader scans.
    bytes[offs[3] as usize + 24 + 64 + 5] ^= 0x40;
    let idx_off = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().unwrap()) as usize;
    let f = TraceFile::from_bytes(&file, bytes[..idx_off].to_vec()).unwrap();
    let t = Trace::from_files(vec![f], vec![]);
    assert!(
        t.problems()[0].what.contains("checksum"),
        "{:?}",
        t.problems()
    );
    assert_eq!(t.problems()[0].offset, offs[3]);
    let mut expect = written.clone();
    expect.remove(3);
    assert_eq!(all_chunks(&t), expect);

    // The same damage found through the index is reported when that chunk is decompressed.
    let f = TraceFile::from_bytes(&file, bytes.clone()).unwrap();
    assert!(f.indexed());
    let t = Trace::from_files(vec![f], vec![]);
    let results: Vec<_> = t.chunks().iter().map(|c| t.decompress(c)).collect();
    assert!(results[3]
        .as_ref()
        .unwrap_err()
        .to_string()
        .contains("checksum"));
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        written.len() - 1
    );

    // A damaged block header: the reader resynchronises on the next block.
    let mut bytes2 = std::fs::read(&file).unwrap();
    bytes2[offs[2] as usize + 9] ^= 0xff; // inside the length field
    let f = TraceFile::from_bytes(&file, bytes2[..idx_off].to_vec()).unwrap();
    let t = Trace::from_files(vec![f], vec![]);
    let mut expect = written.clone();
    expect.remove(2);
    assert_eq!(all_chunks(&t), expect);
    assert!(t.problems()[0].what.contains("damaged block header"));
}

/// Builds a file by hand: preamble, header, metadata blocks, extra blocks, chunks.
fn hand_made(order: ByteOrder, extra: &[Vec<u8>], chunks: &[EncodedChunk]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    // Take the header and metadata blocks from a real writer's output.
    let mut w = ring_writer(dir.path(), order);
    let mut b = ChunkBuilder::new(0);
    b.push(&record(order, 9, 16, 1), Some(1));
    w.write_chunk(&b.finish(1).unwrap()).unwrap();
    w.finish().unwrap();
    let real = std::fs::read(dir.path().join(ring_file_name(0))).unwrap();
    let t = Trace::open(dir.path()).unwrap();
    let first_chunk = t.chunks()[0].offset as usize;
    let mut out = real[..first_chunk].to_vec();
    for e in extra {
        out.extend(e);
    }
    for c in chunks {
        out.extend(&c.block);
    }
    out
}

#[test]
fn unknown_block_kinds_are_skipped() {
    let mut b = ChunkBuilder::new(1);
    let r = record(ByteOrder::native(), 9, 24, 5);
    b.push(&r, Some(5));
    let ch = b.finish(3).unwrap();
    let future = encode_block(0x7777, 0, b"a section from a newer minor version");
    let bytes = hand_made(
        ByteOrder::native(),
        std::slice::from_ref(&future),
        std::slice::from_ref(&ch),
    );
    let f = TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap();
    assert!(f.problems().is_empty(), "{:?}", f.problems());
    assert_eq!(f.chunk_count(), 1);
    assert_eq!(f.metadata(), &metadata());
    // Also between chunks.
    let bytes = hand_made(ByteOrder::native(), &[], std::slice::from_ref(&ch));
    let mut with = bytes.clone();
    with.extend(&future);
    with.extend(&ch.block);
    let f = TraceFile::from_bytes(Path::new("x.iob"), with).unwrap();
    assert!(f.problems().is_empty(), "{:?}", f.problems());
    assert_eq!(f.chunk_count(), 2);
}

/// The symbol tables and perf maps a trace holds are bounded together: blocks whose
/// declared sizes would pass the reader's bound are skipped as damage, before any is
/// decompressed, and those within it still read.
#[test]
fn user_symbol_blocks_beyond_the_readers_bound_are_skipped() {
    let mut b = ChunkBuilder::new(1);
    b.push(&record(ByteOrder::native(), 9, 24, 5), Some(5));
    let ch = b.finish(3).unwrap();
    // A real block, then blocks declaring 1.5 GiB each (their frames are junk).
    let real = block::encode_block(kind::USER_SYMBOLS, 0, &{
        let mut w = Vec::new();
        let dir = tempfile::tempdir().unwrap();
        let mut rw = RingWriter::create(
            dir.path(),
            header(ByteOrder::native()),
            metadata(),
            RingOptions::default(),
        )
        .unwrap();
        rw.write_user_symbols(&user_symbols()).unwrap();
        rw.finish().unwrap();
        let f = std::fs::read(dir.path().join(ring_file_name(0))).unwrap();
        let at = f
            .windows(6)
            .position(|x| {
                x[..4] == block::BLOCK_MAGIC && x[4..] == kind::USER_SYMBOLS.to_le_bytes()
            })
            .unwrap();
        let len = u32::from_le_bytes(f[at + 8..at + 12].try_into().unwrap()) as usize;
        w.extend_from_slice(&f[at + block::BLOCK_HEADER_LEN..at + block::BLOCK_HEADER_LEN + len]);
        w
    });
    let mut huge = 1u32.to_le_bytes().to_vec();
    huge.extend((3u32 << 29).to_le_bytes());
    huge.extend([0u8; 16]);
    let huge = block::encode_block(kind::USER_SYMBOLS, 0, &huge);
    let bytes = hand_made(
        ByteOrder::native(),
        &[real, huge.clone(), huge],
        std::slice::from_ref(&ch),
    );
    let f = TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap();
    let (symbols, problems) = f.user_symbols();
    assert_eq!(symbols, vec![user_symbols()]);
    // The first huge block fits the bound (and is junk); the second passes it.
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[1].what.contains("over"), "{problems:?}");
}

#[test]
fn other_byte_order_is_honoured() {
    let other = match ByteOrder::native() {
        ByteOrder::Little => ByteOrder::Big,
        ByteOrder::Big => ByteOrder::Little,
    };
    let dir = tempfile::tempdir().unwrap();
    let written = write_trace(dir.path(), other, 2, 3, RingOptions::default());
    let t = Trace::open(dir.path()).unwrap();
    assert_eq!(t.header().byte_order, other);
    assert!(t.problems().is_empty());
    assert_eq!(all_chunks(&t), written);
    for c in t.chunks() {
        let ch = t.decompress(c).unwrap();
        let mut last = 0;
        for r in ch.records(other) {
            let r = r.unwrap();
            assert_eq!(r.kind, 9);
            assert!(r.bytes.len() >= 16 && r.bytes.len() % 8 == 0);
            let ts = other.u64(r.body()[..8].try_into().unwrap());
            assert!(ts > last);
            last = ts;
        }
        // Read in the wrong order the same bytes are nonsense: sizes do not fit.
        assert!(ch.records(ByteOrder::native()).any(|r| r.is_err()));
    }
}

#[test]
fn absurd_lengths_are_rejected_without_allocating() {
    // A block header declaring more than the cap.
    let mut huge = encode_block(kind::TASKS, 0, b"");
    huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    let crc = crc32(&huge[..20]);
    huge[20..24].copy_from_slice(&crc.to_le_bytes());
    let bytes = hand_made(ByteOrder::native(), &[huge], &[]);
    let f = TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap();
    assert!(
        f.problems().iter().any(|p| p.what.contains("over the cap")),
        "{:?}",
        f.problems()
    );

    // A task section declaring 2^31 tasks in 8 bytes.
    let mut payload = (1u32 << 31).to_le_bytes().to_vec();
    payload.extend([0u8; 4]);
    let tasks = encode_block(kind::TASKS, 0, &payload);
    let bytes = hand_made(ByteOrder::native(), &[tasks], &[]);
    let f = TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap();
    assert!(
        f.metadata_problems()
            .iter()
            .any(|p| p.what.contains("cannot fit")),
        "{:?}",
        f.metadata_problems()
    );
    assert_eq!(
        f.metadata().tasks,
        metadata().tasks,
        "earlier tasks section kept"
    );

    // A chunk declaring a 4 GiB uncompressed size.
    let mut b = ChunkBuilder::new(0);
    b.push(&record(ByteOrder::native(), 9, 16, 1), Some(1));
    let (mut h, recs) = b.take_raw().unwrap();
    h.records = 1;
    let mut ch = encode_chunk(h, &recs, 1);
    // Patch uncompressed_len (chunk header offset 48) and re-seal the block.
    let payload_start = 24;
    ch.block[payload_start + 48..payload_start + 52].copy_from_slice(&u32::MAX.to_le_bytes());
    let crc = crc32(&ch.block[payload_start..]);
    ch.block[12..16].copy_from_slice(&crc.to_le_bytes());
    let hcrc = crc32(&ch.block[..20]);
    ch.block[20..24].copy_from_slice(&hcrc.to_le_bytes());
    let bytes = hand_made(ByteOrder::native(), &[], &[ch]);
    let f = TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap();
    assert!(
        f.problems().iter().any(|p| p.what.contains("over the cap")),
        "{:?}",
        f.problems()
    );

    // A string length beyond the cap inside the header block: a clear error.
    let mut bytes = preamble().to_vec();
    let mut hp = vec![1u8, 8, 0, 0];
    hp.extend([0u8; 44]);
    hp.extend(u32::MAX.to_le_bytes());
    bytes.extend(encode_block(kind::HEADER, 0, &hp));
    let e = TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap_err();
    assert!(e.to_string().contains("exceeds the cap"), "{e}");
}

#[test]
fn not_a_trace_and_newer_versions_are_clear_errors() {
    let e = TraceFile::from_bytes(Path::new("a.txt"), b"hello, this is text".to_vec()).unwrap_err();
    assert!(matches!(e, Error::NotATrace { .. }), "{e}");
    let mut p = preamble().to_vec();
    p[8] = 9;
    let e = TraceFile::from_bytes(Path::new("b.iob"), p).unwrap_err();
    assert!(e.to_string().contains("version 9"), "{e}");
    let e = Trace::open(Path::new("/nonexistent/trace")).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/trace"), "{e}");
}

#[test]
fn ring_refuses_a_directory_holding_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    write_trace(
        dir.path(),
        ByteOrder::native(),
        1,
        1,
        RingOptions::default(),
    );
    let e = RingWriter::create(
        dir.path(),
        header(ByteOrder::native()),
        metadata(),
        RingOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("already holds a trace"), "{e}");
}

fn crc32(b: &[u8]) -> u32 {
    // CRC-32/IEEE, bitwise: an independent implementation of what the format specifies.
    let mut crc = !0u32;
    for &x in b {
        crc ^= x as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A chunk of CPU `cpu` with sequence number `seq` holding one record.
fn chunk_with_seq(cpu: u32, seq: u64) -> EncodedChunk {
    let mut b = ChunkBuilder::new(cpu);
    b.push(&record(ByteOrder::native(), 9, 16, seq | 1), Some(seq | 1));
    let (mut h, recs) = b.take_raw().unwrap();
    h.seq = seq;
    encode_chunk(h, &recs, 1)
}

#[test]
fn sequence_numbers_near_u64_max_and_duplicates_are_reported() {
    // Regression (audit item 2): `w[0] + 1` overflowed for a chunk numbered u64::MAX.
    let chunks = [
        chunk_with_seq(0, 0),
        chunk_with_seq(0, 1),
        chunk_with_seq(0, u64::MAX - 1),
        chunk_with_seq(0, u64::MAX),
        chunk_with_seq(0, u64::MAX),
        chunk_with_seq(1, 0),
        chunk_with_seq(1, 0),
        chunk_with_seq(1, 1),
    ];
    let bytes = hand_made(ByteOrder::native(), &[], &chunks);
    let f = TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap();
    let t = Trace::from_files(vec![f], vec![]);
    assert_eq!(t.chunks().len(), chunks.len());
    let what: Vec<&str> = t.problems().iter().map(|p| p.what.as_str()).collect();
    assert_eq!(
        what,
        [
            format!("cpu 0: chunks 2..{} are missing", u64::MAX - 1),
            format!("cpu 0: chunk {} appears 2 times", u64::MAX),
            "cpu 1: chunk 0 appears 2 times".to_string(),
        ],
        "{what:?}"
    );
}

/// Drops the index and footer of a cleanly closed file.
fn without_index(bytes: &[u8]) -> Vec<u8> {
    let idx_off = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().unwrap()) as usize;
    bytes[..idx_off].to_vec()
}

#[test]
fn chunks_of_a_cpu_beyond_the_cpu_count_are_rejected() {
    // header() declares 4 CPUs.
    let chunks = [
        chunk_with_seq(3, 0),
        chunk_with_seq(4, 0),
        chunk_with_seq(9, 0),
    ];
    let bytes = hand_made(ByteOrder::native(), &[], &chunks);
    let f = TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap();
    assert_eq!(f.chunk_count(), 1);
    let what: Vec<&str> = f.problems().iter().map(|p| p.what.as_str()).collect();
    assert_eq!(what.len(), 2, "{what:?}");
    assert!(what[0].contains("chunk of cpu 4, but the header counts 4 CPUs"));
    assert!(what[1].contains("chunk of cpu 9"));
}

#[test]
fn metadata_after_the_chunks_is_read_with_and_without_the_index() {
    // A ring writer's file with a FILES table written after the chunks, then a later TASKS
    // block by hand: the last valid block of a kind wins whether the file is opened through
    // its index or scanned.
    let dir = tempfile::tempdir().unwrap();
    let mut w = ring_writer(dir.path(), ByteOrder::native());
    w.write_chunk(&chunk_with_seq(0, 0)).unwrap();
    w.write_files(&FileTable {
        unnamed: Vec::new(),
        flags: FILES_AT_END,
        entries: vec![FileEntry {
            dev: 7 << 20,
            ino: 12,
            path: "/mnt/x/a.dat".into(),
        }],
    })
    .unwrap();
    w.finish().unwrap();
    let file = dir.path().join(ring_file_name(0));
    let closed = std::fs::read(&file).unwrap();
    // Rebuild it with a TASKS block between two chunks and a fresh index.
    let t = Trace::open(&file).unwrap();
    assert!(t.files()[0].indexed());
    assert_eq!(t.path_of(7 << 20, 12), Some("/mnt/x/a.dat"));
    let tasks = vec![Task {
        pid: 99,
        tid: 100,
        comm: "later".into(),
    }];
    let mut fw_meta = metadata();
    fw_meta.tasks = tasks.clone();
    let later = {
        // Take the TASKS block a writer makes for `tasks`.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.iob");
        FileWriter::create(&p, &header(ByteOrder::native()), &fw_meta)
            .unwrap()
            .finish()
            .unwrap();
        let f = TraceFile::open(&p).unwrap();
        assert_eq!(f.metadata().tasks, tasks);
        let b = std::fs::read(&p).unwrap();
        // Find the TASKS block: the 5th block after the header (EVENTS, KALLSYMS, DEVICES,
        // MOUNTS, TASKS).
        let mut pos = 16;
        let mut found = None;
        while pos + 24 <= b.len() {
            let k = u16::from_le_bytes([b[pos + 4], b[pos + 5]]);
            let len = u32::from_le_bytes(b[pos + 8..pos + 12].try_into().unwrap()) as usize;
            if k == kind::TASKS {
                found = Some(b[pos..pos + 24 + len].to_vec());
                break;
            }
            pos += 24 + len;
        }
        found.unwrap()
    };
    let mut w = FileWriter::create(
        &dir.path().join("y.iob"),
        &header(ByteOrder::native()),
        &metadata(),
    )
    .unwrap();
    w.write_chunk(&chunk_with_seq(0, 0)).unwrap();
    drop(w);
    let mut bytes = std::fs::read(dir.path().join("y.iob")).unwrap();
    bytes.extend(&later);
    // Close it by hand: append a chunk through a writer is not possible after raw bytes, so
    // build the index of the single chunk ourselves.
    let chunk_off = Trace::open(&dir.path().join("y.iob")).unwrap().chunks()[0].offset;
    let mut idx = 1u32.to_le_bytes().to_vec();
    idx.extend(chunk_off.to_le_bytes());
    idx.extend([0u8; 32]);
    let index_off = bytes.len() as u64;
    bytes.extend(encode_block(kind::INDEX, 0, &idx));
    bytes.extend(b"IOBINDX\n");
    bytes.extend(index_off.to_le_bytes());
    let indexed = TraceFile::from_bytes(Path::new("y.iob"), bytes.clone()).unwrap();
    assert!(indexed.indexed());
    let scanned = TraceFile::from_bytes(Path::new("y.iob"), without_index(&bytes)).unwrap();
    assert!(!scanned.indexed());
    for f in [&indexed, &scanned] {
        assert!(f.problems().is_empty(), "{:?}", f.problems());
        assert_eq!(f.metadata().tasks, tasks, "indexed: {}", f.indexed());
        assert_eq!(f.chunk_count(), 1);
    }
    // And the FILES table after the chunks of the ring writer's file, scanned.
    let f = TraceFile::from_bytes(&file, without_index(&closed)).unwrap();
    let t = Trace::from_files(vec![f], vec![]);
    assert_eq!(t.path_of(7 << 20, 12), Some("/mnt/x/a.dat"));
}

#[test]
fn a_damaged_header_then_a_cut_block_is_reported_as_truncated() {
    let chunks = [
        chunk_with_seq(0, 0),
        chunk_with_seq(0, 1),
        chunk_with_seq(0, 2),
    ];
    let bytes = hand_made(ByteOrder::native(), &[], &chunks);
    let f = TraceFile::from_bytes(Path::new("x.iob"), bytes.clone()).unwrap();
    let offs = chunk_offsets(&Trace::from_files(vec![f], vec![]));
    let mut b = bytes.clone();
    b[offs[1] as usize] ^= 0xff; // the magic of chunk 1
    b.truncate(b.len() - 5); // chunk 2 is cut
    let f = TraceFile::from_bytes(Path::new("x.iob"), b).unwrap();
    let what: Vec<&str> = f.problems().iter().map(|p| p.what.as_str()).collect();
    assert_eq!(what.len(), 2, "{what:?}");
    assert!(what[0].contains("damaged block header"), "{what:?}");
    assert!(what[1].starts_with("truncated"), "{what:?}");
    assert_eq!(f.problems()[1].offset, offs[2]);
    assert_eq!(f.chunk_count(), 1);
}

#[test]
fn discarded_ring_data_is_flagged_in_the_chunk_and_reported() {
    let mut b = ChunkBuilder::new(1);
    b.push(&record(ByteOrder::native(), 9, 16, 10), Some(10));
    b.add_discarded(4096);
    b.add_discarded(8);
    b.push(&record(ByteOrder::native(), 9, 16, 20), Some(20));
    let ch = b.finish(1).unwrap();
    assert!(ch.header.ring_discarded());
    assert_eq!(ch.header.flags, CHUNK_RING_DISCARDED);
    assert_eq!(ch.header.discarded, 4104);
    // A chunk holding nothing but the mark is still written.
    b.add_discarded(u64::MAX);
    let only = b.finish(1).unwrap();
    assert_eq!((only.header.records, only.header.discarded), (0, u32::MAX));
    let clean = chunk_with_seq(1, 2);
    assert!(!clean.header.ring_discarded());
    let bytes = hand_made(ByteOrder::native(), &[], &[ch, only, clean]);
    let f = TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap();
    let t = Trace::from_files(vec![f], vec![]);
    let got: Vec<(bool, u32)> = t
        .chunks()
        .iter()
        .map(|c| (c.header.ring_discarded(), c.header.discarded))
        .collect();
    assert_eq!(got, [(true, 4104), (true, u32::MAX), (false, 0)]);
    let what: Vec<&str> = t.problems().iter().map(|p| p.what.as_str()).collect();
    assert_eq!(
        what,
        [
            "cpu 1: chunk 0: the recorder discarded 4104 bytes of inconsistent perf ring data; \
             records between 10 and 20 are missing",
            "cpu 1: chunk 1: the recorder discarded 4294967295 bytes of inconsistent perf ring \
             data; records between 0 and 0 are missing",
        ]
    );
}

fn entry(dev: u32, ino: u64, path: &str) -> FileEntry {
    FileEntry {
        dev,
        ino,
        path: path.into(),
    }
}

#[test]
fn file_tables_repeat_in_every_ring_file_and_the_last_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let opts = RingOptions {
        file_size: 16 << 10,
        max_size: 0,
    };
    let mut w =
        RingWriter::create(dir.path(), header(ByteOrder::native()), metadata(), opts).unwrap();
    let start = FileTable {
        unnamed: Vec::new(),
        flags: FILES_CAPPED,
        entries: vec![
            entry(7 << 20, 2, "/mnt/x"),
            entry(7 << 20, 12, "/mnt/x/old-name"),
            entry(7 << 20, 13, "/mnt/x/deleted-during-capture"),
            entry(8 << 20 | 1, 12, "/srv/same-ino-other-fs"),
        ],
    };
    w.write_files(&start).unwrap();
    let mut b = ChunkBuilder::new(0);
    for i in 0..40u64 {
        for j in 0..60 {
            b.push(&record(ByteOrder::native(), 9, 64, i * 100 + j), Some(i));
        }
        w.write_chunk(&b.finish(1).unwrap()).unwrap();
    }
    let end = FileTable {
        unnamed: Vec::new(),
        flags: FILES_AT_END,
        entries: vec![
            entry(7 << 20, 12, "/mnt/x/new-name"),
            entry(7 << 20, 14, "/mnt/x/created"),
        ],
    };
    w.write_files(&end).unwrap();
    let stats = w.finish().unwrap();
    assert!(stats.files_created > 2, "{stats:?}");
    let t = Trace::open(dir.path()).unwrap();
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    // Two distinct tables, although the first is repeated in every file.
    assert_eq!(t.paths().tables(), 2);
    assert_eq!(t.paths().flags(), FILES_CAPPED | FILES_AT_END);
    assert_eq!(t.paths().len(), 5);
    assert_eq!(t.path_of(7 << 20, 12), Some("/mnt/x/new-name"));
    assert_eq!(
        t.path_of(7 << 20, 13),
        Some("/mnt/x/deleted-during-capture")
    );
    assert_eq!(t.path_of(7 << 20, 14), Some("/mnt/x/created"));
    assert_eq!(t.path_of(8 << 20 | 1, 12), Some("/srv/same-ino-other-fs"));
    assert_eq!(t.path_of(7 << 20, 99), None);
    // Only the inodes asked for, with the same answers (the end table still wins).
    let wanted: std::collections::HashSet<(u32, u64)> =
        [(7 << 20, 12), (7 << 20, 99), (8 << 20 | 1, 12)].into();
    let some = t.paths_of(&wanted);
    assert_eq!(some.len(), 2);
    assert_eq!(some.tables(), 2);
    assert_eq!(some.get(7 << 20, 12), Some("/mnt/x/new-name"));
    assert_eq!(some.get(8 << 20 | 1, 12), Some("/srv/same-ino-other-fs"));
    assert_eq!(some.get(7 << 20, 14), None);
    // Every file alone knows the start table; a middle file does not know the end one.
    for f in &t.files()[..t.files().len() - 1] {
        let one = Trace::open(f.path()).unwrap();
        assert_eq!(one.path_of(7 << 20, 12), Some("/mnt/x/old-name"));
        assert_eq!(one.path_of(7 << 20, 14), None);
        assert_eq!(one.metadata(), &metadata());
    }
}

#[test]
fn mounts_of_format_1_0_have_no_block_size() {
    // A 1.0 MOUNTS payload: the entries only.
    let mut p = 1u32.to_le_bytes().to_vec();
    for v in [42u32, 7, 0] {
        p.extend(v.to_le_bytes());
    }
    for s in ["/", "/mnt/x", "ext4", "/dev/loop0"] {
        p.extend((s.len() as u32).to_le_bytes());
        p.extend(s.as_bytes());
    }
    let bytes = hand_made(
        ByteOrder::native(),
        &[encode_block(kind::MOUNTS, 0, &p)],
        &[],
    );
    let f = TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap();
    assert!(
        f.metadata_problems().is_empty(),
        "{:?}",
        f.metadata_problems()
    );
    let mut want = metadata().mounts;
    want.truncate(1);
    want[0].block_size = 0;
    assert_eq!(f.metadata().mounts, want);
    // A block size list that does not match the mounts is a fault (the earlier block stands).
    p.extend(2u32.to_le_bytes());
    p.extend([0u8; 8]);
    let bytes = hand_made(
        ByteOrder::native(),
        &[encode_block(kind::MOUNTS, 0, &p)],
        &[],
    );
    let f = TraceFile::from_bytes(Path::new("x.iob"), bytes).unwrap();
    assert_eq!(f.metadata().mounts, metadata().mounts);
    assert!(f.metadata_problems()[0]
        .what
        .contains("2 mount block sizes for 1 mounts"));
}

#[test]
fn committed_fixtures_still_read() {
    // Traces recorded by earlier versions (format 1.0) must read with this reader.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut n = 0;
    for e in std::fs::read_dir(&root).unwrap() {
        let dir = e.unwrap().path().join("trace");
        // Only ioblame traces (the blktrace fixtures hold blktrace files).
        let is_ioblame = std::fs::read_dir(&dir).is_ok_and(|mut d| {
            d.any(|f| f.is_ok_and(|f| f.path().extension().is_some_and(|x| x == "iob")))
        });
        if !is_ioblame {
            continue;
        }
        let t = Trace::open(&dir).unwrap();
        assert!(
            t.problems().is_empty(),
            "{}: {:?}",
            dir.display(),
            t.problems()
        );
        assert!(!t.metadata().events.is_empty());
        assert!(t.metadata().kallsyms.is_some());
        for c in t.chunks() {
            let ch = t.decompress(c).unwrap();
            assert_eq!(
                ch.records(t.header().byte_order).count() as u32,
                c.header.records
            );
        }
        n += 1;
    }
    assert!(n >= 1, "no fixture under {}", root.display());
}

/// The sample of the current format version, as this writer writes it.
fn current_sample() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let mut w = ring_writer(dir.path(), ByteOrder::Little);
    w.write_files(&FileTable {
        unnamed: Vec::new(),
        flags: 0,
        entries: vec![
            entry(7 << 20, 2, "/mnt/x"),
            entry(7 << 20, 12, "/mnt/x/a.dat"),
        ],
    })
    .unwrap();
    let mut b0 = ChunkBuilder::new(0);
    b0.push(&record(ByteOrder::Little, 9, 24, 100), Some(100));
    b0.add_lost(2);
    w.write_chunk(&b0.finish(3).unwrap()).unwrap();
    // 1.6: how far the records are written, twice (the last one wins).
    w.write_flushed(100).unwrap();
    let mut b1 = ChunkBuilder::new(1);
    b1.push(&record(ByteOrder::Little, 9, 32, 101), Some(101));
    b1.add_discarded(512);
    w.write_chunk(&b1.finish(3).unwrap()).unwrap();
    w.write_flushed(102).unwrap();
    // 1.7: a loop device set up while recording: the list again, with it.
    w.write_loops(&[loop_device(0, 12, 0), loop_device(1, 13, 101)])
        .unwrap();
    // 1.8: the mappings of a process first seen while recording, and at the stop the symbol
    // tables its stacks went through.
    w.write_user_maps(&[
        user_map(4000, 0x5555_0000_0000),
        user_map(4001, 0x7000_0000),
    ])
    .unwrap();
    w.write_user_symbols(&user_symbols()).unwrap();
    w.write_perf_map(&perf_map()).unwrap();
    // 1.9: a btrfs chunk allocated while recording: the filesystems again, with it.
    w.write_btrfs(&[btrfs_fs(&[
        btrfs_chunk(13631488, BTRFS_CHUNK_DATA, 0),
        btrfs_chunk(30408704, BTRFS_CHUNK_METADATA | BTRFS_CHUNK_DUP, 101),
    ])])
    .unwrap();
    w.write_files(&FileTable {
        unnamed: vec![UnnamedFile {
            dev: 7 << 20,
            ino: 14,
            why: Unnamed::Deleted,
        }],
        flags: FILES_AT_END | FILES_TIMED_OUT,
        entries: vec![entry(7 << 20, 13, "/mnt/x/b.dat")],
    })
    .unwrap();
    w.finish().unwrap();
    std::fs::read(dir.path().join(ring_file_name(0))).unwrap()
}

#[test]
fn committed_format_samples_still_read() {
    // Every format version keeps a sample that later readers must read (docs/format.md):
    // 1.1 (one KALLSYMS frame) and 1.2 (KALLSYMS_PARTS), the same content; later versions
    // add what they brought (CGROUPS, the xfs geometry, FILE_INDEX, FLUSHED).
    // The current version's sample is what this writer writes (`BLESS=1` rewrites it); the
    // samples of earlier versions stay as their writers left them.
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    ioblame_testkit::assert_file(
        data.join(format!("format-1.{}.iob", block::FORMAT_MINOR)),
        current_sample(),
    );
    for minor in 1..=block::FORMAT_MINOR {
        let path = data.join(format!("format-1.{minor}.iob"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        sample_reads(&path, &bytes, minor);
    }
}

/// The checks of [`committed_format_samples_still_read`] on the sample of format 1.`minor`.
fn sample_reads(path: &Path, bytes: &[u8], minor: u16) {
    assert_eq!(
        &bytes[8..12],
        &[1, 0, minor as u8, 0],
        "major 1, minor {minor}"
    );
    let kallsyms_kind = if minor >= 2 {
        kind::KALLSYMS_PARTS
    } else {
        kind::KALLSYMS
    };
    assert!(
        bytes
            .windows(6)
            .any(|w| w[..4] == block::BLOCK_MAGIC && w[4..] == kallsyms_kind.to_le_bytes()),
        "1.{minor}: no block of kind {kallsyms_kind:#x}"
    );
    for (name, bytes) in [
        ("indexed", bytes.to_vec()),
        ("scanned", without_index(bytes)),
    ] {
        let f = TraceFile::from_bytes(path, bytes).unwrap();
        assert_eq!(f.indexed(), name == "indexed");
        // FLUSHED came with 1.6: the last one's time.
        let flushed = if minor >= 6 { Some(102) } else { None };
        assert_eq!(f.flushed(), flushed, "{name}");
        assert_eq!(f.chunks().len(), 2, "{name}");
        let t = Trace::from_files(vec![f], vec![]);
        assert_eq!(t.header(), &header(ByteOrder::Little), "{name}");
        let mut want = metadata();
        if minor < 3 {
            // CGROUPS came with 1.3.
            want.cgroups.clear();
        }
        if minor < 4 {
            // The xfs mount and its geometry came with 1.4.
            want.mounts.truncate(1);
        }
        if minor < 7 {
            // LOOPS and DM_TARGETS came with 1.7.
            want.loops.clear();
            want.dm_targets.clear();
        } else {
            // The file's last list wins: the loop device set up while recording is in it.
            want.loops.push(loop_device(1, 13, 101));
            assert_eq!(t.loops(), want.loops, "{name}");
            assert_eq!(t.dm_targets(), want.dm_targets, "{name}");
        }
        if minor < 10 {
            // The events' user registers and stack copies came with 1.10.
            for e in &mut want.events {
                (e.regs_user, e.stack_user) = (0, 0);
            }
        }
        let mut symbols = user_symbols();
        if minor < 10 {
            // So did the unwind tables and the sections' addresses.
            symbols.sections.retain(|s| s.name != ".eh_frame");
            for s in &mut symbols.sections {
                s.addr = 0;
            }
        }
        if minor < 8 {
            // USER_MAPS and USER_SYMBOLS came with 1.8.
            want.user_maps.clear();
            assert_eq!(t.user_symbols().0, vec![], "{name}");
        } else {
            want.user_maps.push(user_map(4001, 0x7000_0000));
            assert_eq!(t.user_maps(), want.user_maps, "{name}");
            assert_eq!(t.user_symbols(), (vec![symbols], vec![]), "{name}");
            assert_eq!(t.perf_maps(), (vec![perf_map()], vec![]), "{name}");
        }
        if minor < 9 {
            // BTRFS came with 1.9.
            want.btrfs.clear();
            assert_eq!(t.btrfs(), vec![], "{name}");
        } else {
            // The file's last list wins: the chunk allocated while recording is in it.
            want.btrfs[0].chunks.push(btrfs_chunk(
                30408704,
                BTRFS_CHUNK_METADATA | BTRFS_CHUNK_DUP,
                101,
            ));
            assert_eq!(t.btrfs(), want.btrfs, "{name}");
        }
        assert_eq!(t.metadata(), &want, "{name}");
        assert_eq!(t.metadata().mounts[0].block_size, 4096);
        assert_eq!(t.paths().tables(), 2);
        assert_eq!(t.paths().flags(), FILES_AT_END | FILES_TIMED_OUT);
        assert_eq!(t.path_of(7 << 20, 12), Some("/mnt/x/a.dat"));
        assert_eq!(t.path_of(7 << 20, 13), Some("/mnt/x/b.dat"));
        if minor >= 5 {
            // FILE_INDEX: the files the recorder could not name, with why.
            assert_eq!(
                t.file_name(7 << 20, 14),
                FileName::Unnamed(Unnamed::Deleted)
            );
            assert_eq!(t.paths().unnamed(7 << 20, 14), Some(Unnamed::Deleted));
        }
        assert_eq!(t.file_name(7 << 20, 15), FileName::Unknown);
        let hs: Vec<(u32, u64, u64, u32)> = t
            .chunks()
            .iter()
            .map(|c| {
                (
                    c.header.cpu,
                    c.header.lost,
                    c.header.records as u64,
                    c.header.discarded,
                )
            })
            .collect();
        assert_eq!(hs, [(0, 2, 1, 0), (1, 0, 1, 512)], "{name}");
        assert_eq!(t.problems().len(), 1, "{name}: {:?}", t.problems());
        for c in t.chunks() {
            assert_eq!(
                t.decompress(c).unwrap().records(ByteOrder::Little).count(),
                1
            );
        }
    }
}

#[test]
fn a_reused_encoder_writes_what_a_fresh_one_does_and_it_reads_back() {
    // The recorder keeps one compression context for every chunk; a context that carried
    // state from one chunk into the next would make chunks that only decode in order.
    let dir = tempfile::tempdir().unwrap();
    let mut w = ring_writer(dir.path(), ByteOrder::native());
    let mut enc = ChunkEncoder::new(-1);
    let mut b = ChunkBuilder::new(0);
    let mut written = Vec::new();
    let mut ts = 1u64;
    for c in 0..4u32 {
        let mut bytes = Vec::new();
        for i in 0..(200 + 31 * c) {
            ts += 1;
            let r = record(ByteOrder::native(), 9, 16 + 8 * (i % 7) as u16, ts);
            bytes.extend(&r);
            b.push(&r, Some(ts));
        }
        let (h, recs) = b.take_raw().unwrap();
        assert!(recs.capacity() > 0);
        let ch = enc.encode(h, &recs);
        assert_eq!(ch.block, encode_chunk(h, &recs, -1).block, "chunk {c}");
        w.write_chunk(&ch).unwrap();
        written.push((0u32, bytes));
    }
    w.finish().unwrap();
    let t = Trace::open(dir.path()).unwrap();
    assert_eq!(all_chunks(&t), written);
}

#[test]
fn cgroups_and_capture_info_written_later_are_read_and_merged() {
    let dir = tempfile::tempdir().unwrap();
    let mut meta = metadata();
    meta.cgroups.truncate(1);
    let mut w = RingWriter::create(
        dir.path(),
        header(ByteOrder::native()),
        meta,
        RingOptions::default(),
    )
    .unwrap();
    let info = vec![
        ("command".to_string(), "dd if=/dev/zero".to_string()),
        ("command_pid".to_string(), "4321".to_string()),
    ];
    w.write_capture_info(&info).unwrap();
    let end = vec![
        Cgroup {
            id: 1,
            path: "/".into(),
        },
        Cgroup {
            id: 77,
            path: "/made/while/recording".into(),
        },
    ];
    w.write_cgroups(&end).unwrap();
    w.write_cgroups(&[]).unwrap();
    w.finish().unwrap();
    let t = Trace::open(dir.path()).unwrap();
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    assert_eq!(t.metadata().info("command_pid"), Some("4321"));
    assert_eq!(t.cgroups(), end);
}

/// The (offset, length) of each whole block of kind `k` in a trace file's bytes, found by
/// walking the blocks from the header on (the file must be undamaged up to where it ends).
fn blocks_of_kind(b: &[u8], k: u16) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = block::PREAMBLE_LEN;
    while pos + block::BLOCK_HEADER_LEN <= b.len() && b[pos..pos + 4] == block::BLOCK_MAGIC {
        let kind = u16::from_le_bytes([b[pos + 4], b[pos + 5]]);
        let len = block::BLOCK_HEADER_LEN
            + u32::from_le_bytes(b[pos + 8..pos + 12].try_into().unwrap()) as usize;
        if kind == k {
            out.push((pos, len));
        }
        pos += len;
    }
    out
}

/// The timestamp `record` stores in the first body word (native byte order).
fn record_ts(r: &RawRecord<'_>) -> u64 {
    u64::from_ne_bytes(r.bytes[8..16].try_into().unwrap())
}

#[test]
fn flushed_marks_are_read_live_and_after_finish() {
    // A recorder's pattern: rounds of chunks of three CPUs (one idle in a round), a FLUSHED
    // mark after every other round, the file opened after each round as a live follower
    // does. The last mark wins, in the live file (no index) and in the closed one (indexed),
    // and every record below a mark read live is in a chunk the follower saw then.
    let dir = tempfile::tempdir().unwrap();
    let mut w = ring_writer(dir.path(), ByteOrder::native());
    let file = dir.path().join(ring_file_name(0));
    let fresh = TraceFile::open(&file).unwrap();
    assert_eq!(fresh.flushed(), None, "no mark yet");
    assert!(fresh.chunks().is_empty());
    let mut builders: Vec<ChunkBuilder> = (0..3).map(ChunkBuilder::new).collect();
    let mut ts = 1000u64;
    let mut marks = Vec::new();
    let mut chunks = 0;
    type Seen = (Option<u64>, std::collections::HashSet<(u32, u64)>);
    let mut seen: Vec<Seen> = Vec::new();
    for round in 0..7u32 {
        for (cpu, b) in builders.iter_mut().enumerate() {
            if cpu == 2 && round == 3 {
                continue;
            }
            for i in 0..(5 + cpu as u32) {
                ts += 1;
                b.push(
                    &record(ByteOrder::native(), 9, 16 + 8 * (i % 3) as u16, ts),
                    Some(ts),
                );
            }
            w.write_chunk(&b.finish(3).unwrap()).unwrap();
            chunks += 1;
        }
        if round % 2 == 1 {
            // Every record so far is older.
            let before = w.stats().bytes_written;
            w.write_flushed(ts + 1).unwrap();
            assert_eq!(
                w.stats().bytes_written - before,
                32,
                "a 24-byte header and a u64"
            );
            marks.push(ts + 1);
        }
        let live = TraceFile::open(&file).unwrap();
        assert!(!live.indexed());
        assert!(live.problems().is_empty(), "{:?}", live.problems());
        assert_eq!(live.flushed(), marks.last().copied(), "round {round}");
        assert_eq!(live.chunks().len(), chunks, "round {round}");
        seen.push((
            live.flushed(),
            live.chunks().iter().map(|(_, h)| (h.cpu, h.seq)).collect(),
        ));
    }
    // Chunks after the last mark: written, not covered by it.
    for b in &mut builders {
        ts += 1;
        b.push(&record(ByteOrder::native(), 9, 16, ts), Some(ts));
        w.write_chunk(&b.finish(3).unwrap()).unwrap();
    }
    let last = *marks.last().unwrap();
    assert_eq!(
        TraceFile::open(&file).unwrap().flushed(),
        Some(last),
        "chunks after a mark leave it standing"
    );
    w.finish().unwrap();
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(blocks_of_kind(&bytes, kind::FLUSHED).len(), marks.len());
    let done = TraceFile::open(&file).unwrap();
    let scanned = TraceFile::from_bytes(&file, without_index(&bytes)).unwrap();
    assert!(done.indexed() && !scanned.indexed());
    for f in [&done, &scanned] {
        assert!(f.problems().is_empty(), "{:?}", f.problems());
        assert_eq!(f.flushed(), Some(last));
        // The metadata decodes as it was written, the FLUSHED blocks no fault.
        assert_eq!(f.metadata(), &metadata());
        assert!(
            f.metadata_problems().is_empty(),
            "{:?}",
            f.metadata_problems()
        );
    }
    assert_eq!(done.chunks(), scanned.chunks());
    assert_eq!(done.chunks().len(), chunks + 3);
    // chunks(): in file order, each offset the chunk's block.
    assert!(done.chunks().windows(2).all(|w| w[0].0 < w[1].0));
    for &(off, h) in done.chunks() {
        assert_eq!(done.decompress_at(off).unwrap().header, h);
    }
    // The follower's promise.
    let mut checked = 0;
    for &(off, h) in done.chunks() {
        let c = done.decompress_at(off).unwrap();
        for r in c.records(ByteOrder::native()) {
            let t = record_ts(&r.unwrap());
            for (mark, present) in &seen {
                if mark.is_some_and(|m| t < m) {
                    assert!(
                        present.contains(&(h.cpu, h.seq)),
                        "record at {t} below the mark {mark:?} is in chunk {} of cpu {}, \
                         absent when the mark was read",
                        h.seq,
                        h.cpu
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 100, "{checked}");
}

#[test]
fn a_damaged_flushed_block_is_skipped_and_the_previous_one_stands() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = ring_writer(dir.path(), ByteOrder::native());
    w.write_chunk(&chunk_with_seq(0, 0)).unwrap();
    w.write_flushed(10).unwrap();
    w.write_chunk(&chunk_with_seq(0, 1)).unwrap();
    w.write_flushed(20).unwrap();
    w.finish().unwrap();
    let file = dir.path().join(ring_file_name(0));
    let bytes = std::fs::read(&file).unwrap();
    let fl = blocks_of_kind(&bytes, kind::FLUSHED);
    assert_eq!(fl.len(), 2);
    let (at, len) = fl[1];
    let open = |b: Vec<u8>| TraceFile::from_bytes(&file, b).unwrap();
    for b in [bytes.clone(), without_index(&bytes)] {
        assert_eq!(open(b).flushed(), Some(20));
    }

    // A flipped payload byte: the checksum fails, the block is skipped and reported, with
    // or without the index (which no longer describes the file: the file is scanned).
    let mut bad = bytes.clone();
    bad[at + block::BLOCK_HEADER_LEN + 3] ^= 0x40;
    for b in [bad.clone(), without_index(&bad)] {
        let f = open(b);
        assert!(!f.indexed());
        assert_eq!(f.flushed(), Some(10));
        assert_eq!(f.chunk_count(), 2);
        assert_eq!(f.problems().len(), 1, "{:?}", f.problems());
        assert!(f.problems()[0]
            .what
            .contains("checksum mismatch in a block of kind 0x1a"));
    }
    // A damaged block header: the reader resynchronises after it; the mark before stands.
    let mut bad = bytes.clone();
    bad[at + 9] ^= 0xff;
    let f = open(without_index(&bad));
    assert_eq!(f.flushed(), Some(10));
    assert!(f.problems()[0].what.contains("damaged block header"));
    // A file cut inside the block (a follower reading while the recorder appends it).
    for cut in [at + 1, at + block::BLOCK_HEADER_LEN, at + len - 1] {
        let f = open(bytes[..cut].to_vec());
        assert_eq!(f.flushed(), Some(10), "cut at {cut}");
        assert!(f.problems()[0].what.contains("truncated"), "cut at {cut}");
    }
    // Only one mark, damaged: none.
    let mut bad = bytes[..fl[0].0 + fl[0].1].to_vec();
    bad[fl[0].0 + block::BLOCK_HEADER_LEN] ^= 1;
    assert_eq!(open(bad).flushed(), None);

    // A block whose checksum holds but whose payload is short: skipped too, reported with the
    // metadata's faults.
    let mut short = without_index(&bytes);
    short.extend(encode_block(kind::FLUSHED, 0, &[1, 2, 3]));
    let f = open(short);
    assert_eq!(f.flushed(), Some(20));
    assert!(f.problems().is_empty(), "{:?}", f.problems());
    assert_eq!(f.metadata(), &metadata());
    assert_eq!(f.metadata_problems().len(), 1);
    assert!(f.metadata_problems()[0].what.contains("flushed time"));
    // A longer payload (fields a newer minor version may add): the time is its first u64.
    let mut longer = without_index(&bytes);
    let mut p = 30u64.to_le_bytes().to_vec();
    p.extend([0xee; 12]);
    longer.extend(encode_block(kind::FLUSHED, 0, &p));
    let f = open(longer);
    assert_eq!(f.flushed(), Some(30));
    assert!(f.metadata_problems().is_empty());
}

#[test]
fn flushed_marks_stay_in_their_ring_file() {
    // A file size of 1 byte: every chunk starts a new file. A new file does not repeat the
    // mark of the previous one; the previous file keeps it.
    let dir = tempfile::tempdir().unwrap();
    let opts = RingOptions {
        file_size: 1,
        max_size: 0,
    };
    let mut w =
        RingWriter::create(dir.path(), header(ByteOrder::native()), metadata(), opts).unwrap();
    w.write_chunk(&chunk_with_seq(0, 0)).unwrap();
    w.write_flushed(5).unwrap();
    w.write_chunk(&chunk_with_seq(0, 1)).unwrap();
    let (f0, f1) = (
        dir.path().join(ring_file_name(0)),
        dir.path().join(ring_file_name(1)),
    );
    assert_eq!(w.current_path(), Some(f1.as_path()));
    let closed = TraceFile::open(&f0).unwrap();
    assert!(closed.indexed());
    assert_eq!(closed.flushed(), Some(5));
    assert_eq!(TraceFile::open(&f1).unwrap().flushed(), None);
    w.write_flushed(7).unwrap();
    assert_eq!(TraceFile::open(&f1).unwrap().flushed(), Some(7));
    w.finish().unwrap();
    let t = Trace::open(dir.path()).unwrap();
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    let marks: Vec<_> = t.files().iter().map(|f| f.flushed()).collect();
    assert_eq!(marks, [Some(5), Some(7)]);
}
