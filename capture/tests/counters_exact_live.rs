//! Issue 5, "counts are exact": a real recording of O_DIRECT writes and reads of chosen sizes
//! at chosen offsets of a raw loop device, decoded and attributed with the library APIs, gives
//! exactly the expected count in every slot of size, offset and filtered counters (needs
//! root; skips otherwise, fails in CI).
//!
//! The device is used raw (no filesystem, so no metadata or journal IO), each IO is one
//! `dd` process doing a single O_DIRECT read or write, and the IOs are sequential and apart
//! from each other, so none merges with another. No IO is above 512 KiB: a direct IO bio holds
//! one segment per (non-contiguous) 4 KiB page and the loop device allows 128 segments, so a
//! larger IO may be split in two requests depending on where its buffer's pages are.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use common::*;
use ioblame_attrib::{attribute_trace, Attribution, Context, Dir, Io, Via};
use ioblame_counters::{CounterSet, IoContext};
use ioblame_decode::{Decoder, Symbolizer};
use ioblame_format::Trace;

const KIB: u64 = 1024;
/// Device size: 64 MiB = 131072 sectors, so `offset` (sector * 65536 / size) is the byte
/// offset in KiB, and each eighth of the device (8192) is 8 MiB.
const DEV_MIB: u64 = 64;

/// The writes, `(byte offset in KiB, size in KiB)`: offsets are 4 KiB aligned and chosen at
/// and just below eighth boundaries (8188 | 8192, 16384, 40960) and at the last 4 KiB.
const WRITES: &[(u64, u64)] = &[
    (1024, 4),
    (8188, 4),
    (9216, 12),
    (10240, 64),
    (16384, 32),
    (20480, 256),
    (33792, 8),
    (40960, 512),
    (50000, 128),
    (65532, 4),
];

/// The reads, `(byte offset in KiB, size in KiB)`.
const READS: &[(u64, u64)] = &[
    (4096, 4),
    (12288, 16),
    (30000, 64),
    (45056, 256),
    (57344, 4),
    (60000, 8),
];

/// Seek distance of each IO of the script (writes then reads) in KiB: the distance from the
/// end of the previous IO (none before the first), which is the counters' `seek_dist` scaled
/// to 0..65535 over the 64 MiB (65536 KiB) device.
fn seek_dists_kib() -> Vec<u64> {
    let mut prev_end: Option<u64> = None;
    WRITES
        .iter()
        .chain(READS)
        .map(|&(off, size)| {
            let d = prev_end.map_or(0, |e| off.abs_diff(e));
            prev_end = Some(off + size);
            d
        })
        .collect()
}

/// A loop device without a filesystem, detached on drop.
struct RawLoop {
    dir: tempfile::TempDir,
    dev: String,
    name: String,
}

impl RawLoop {
    fn new(size_mb: u64) -> RawLoop {
        let dir = tempfile::Builder::new()
            .prefix("iobcnt-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let img = dir.path().join("raw.img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(size_mb << 20)
            .unwrap();
        let o = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&img)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let name = dev.trim_start_matches("/dev/").to_string();
        RawLoop { dir, dev, name }
    }
}

impl Drop for RawLoop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// Decodes and attributes a whole trace (as crates/attrib/tests/fixtures.rs does).
fn attribute(dir: &Path) -> (Vec<Io>, Attribution) {
    let trace = Trace::open(dir).unwrap();
    assert!(trace.problems().is_empty(), "{:?}", trace.problems());
    let decoder = Decoder::new(trace.header(), trace.metadata());
    let mut ctx = Context::from_trace(trace.header(), trace.metadata());
    let k = trace
        .metadata()
        .kallsyms
        .as_ref()
        .expect("kallsyms recorded");
    ctx.symbols = Some(Box::new(Symbolizer::from_kallsyms(&k.text)));
    attribute_trace(&trace, &decoder, ctx)
}

/// Histograms of counter `c` summed over the acts of `comm`.
fn sum_for(set: &CounterSet, out: &Attribution, comm: &str, c: usize) -> [u64; 8] {
    let t = &out.tables;
    let mut h = [0u64; 8];
    for (id, act, _) in t.acts_with_totals() {
        if t.roles[act.role.index()].comm == comm {
            for (s, v) in set.histogram(id, c).unwrap().iter().enumerate() {
                h[s] += v;
            }
        }
    }
    h
}

#[test]
fn counters_count_every_direct_io_exactly() {
    if !ready(&["dd", "sh"]) {
        return;
    }
    let _g = lock();
    let t0 = Instant::now();
    let lo = RawLoop::new(DEV_MIB);
    // Renamed copies of dd, so the writer's and the reader's IOs are told apart by comm.
    for n in ["iobwriter", "iobreader"] {
        let p = lo.dir.path().join(n);
        std::fs::copy("/bin/dd", &p)
            .or_else(|_| std::fs::copy("/usr/bin/dd", &p))
            .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let bin_dir = lo.dir.path().display().to_string();
    let mut script = String::from("set -e\n");
    for (off, size) in WRITES {
        script.push_str(&format!(
            "{bin_dir}/iobwriter if=/dev/zero of={} bs={} count=1 seek={} \
             oflag=direct,seek_bytes conv=notrunc status=none\n",
            lo.dev,
            size * KIB,
            off * KIB
        ));
    }
    for (off, size) in READS {
        script.push_str(&format!(
            "{bin_dir}/iobreader if={} of=/dev/null bs={} count=1 skip={} \
             iflag=direct,skip_bytes status=none\n",
            lo.dev,
            size * KIB,
            off * KIB
        ));
    }
    let out_dir = lo.dir.path().join("trace");
    let o = record(&[
        "-o",
        out_dir.to_str().unwrap(),
        "--devices",
        &lo.name,
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "record failed: {stderr}");

    let (ios, out) = attribute(&out_dir);
    assert_eq!(out.summary.lost_records, 0, "{:?}", out.summary);
    let t = &out.tables;
    let comm_of = |io: &Io| t.roles[t.acts[io.act.index()].role.index()].comm.as_str();

    // The IOs themselves: exactly the ones issued, direct, none split or merged.
    let mut w: Vec<(u64, u64)> = Vec::new();
    let mut r: Vec<(u64, u64)> = Vec::new();
    for io in &ios {
        let who = comm_of(io);
        if who != "iobwriter" && who != "iobreader" {
            continue;
        }
        assert_eq!(io.via, Via::Direct, "{who}: {io:?}");
        assert!(!io.split, "{io:?}");
        assert_eq!(io.offset as u64, io.sector / 2, "offset scaling: {io:?}");
        let v = (io.sector / 2, io.size / KIB);
        match (who, io.dir) {
            ("iobwriter", Dir::W) => w.push(v),
            ("iobreader", Dir::R) => r.push(v),
            _ => panic!("{who} did {:?} IO: {io:?}", io.dir),
        }
    }
    w.sort_unstable();
    r.sort_unstable();
    let mut want_w = WRITES.to_vec();
    let mut want_r = READS.to_vec();
    want_w.sort_unstable();
    want_r.sort_unstable();
    assert_eq!(w, want_w, "writer IOs (KiB offset, KiB size)");
    assert_eq!(r, want_r, "reader IOs (KiB offset, KiB size)");

    let specs = [
        // 0: size slots <4K, 4-8K, 8-16K, 16-64K, 64-128K, 128-256K, 256K-1M, >=1M.
        "W size 0 4096 8192 16384 65536 131072 262144 1048576 0",
        // 1: eighths of the device.
        "W offset 0 8192 16384 24576 32768 40960 49152 57344 0",
        // 2: a filter.
        "W size 0 4096 8192 16384 65536 131072 262144 1048576 0 if size >= 65536",
        // 3: bounded on both ends: 512K (>= B8) is not counted.
        "W size 4096 8192 12288 16384 32768 65536 131072 262144 524288",
        // 4..5: reads.
        "R size 0 4096 8192 16384 65536 131072 262144 1048576 0",
        "RA offset 0 8192 16384 24576 32768 40960 49152 57344 0",
        // 6..8: times are not known, but every IO falls in one slot.
        "W wait_time 0 1 10 100 1000 10000 100000 1000000 0",
        "W io_time 0 1 10 100 1000 10000 100000 1000000 0",
        "R io_time 0 1 10 100 1000 10000 100000 1000000 0",
        // 9: a filter on comm and via: the reader's IOs in no W counter.
        "RW size 0 1 2 3 4 5 6 7 0 if comm == \"iobwriter\" && via == direct",
        // 10: the direction filter: the writer has no R IO.
        "R size 0 0 0 0 0 0 0 0 0",
        // 11: seek distances, in KiB on this 64 MiB device (see `seek_dists_kib`).
        "W seek_dist 0 1 1024 2048 4096 8192 16384 32768 0",
        // 12: the reads' distances.
        "R seek_dist 0 1 1024 2048 4096 8192 16384 32768 0",
    ];
    let mut set = CounterSet::parse_args(&specs).unwrap();
    for io in &ios {
        set.record(io, &IoContext::for_io(t, io));
    }
    let wr = |c| sum_for(&set, &out, "iobwriter", c);
    let rd = |c| sum_for(&set, &out, "iobreader", c);
    assert_eq!(wr(0), [0, 3, 2, 1, 1, 1, 2, 0], "{}", specs[0]);
    assert_eq!(wr(1), [2, 2, 2, 0, 1, 1, 1, 1], "{}", specs[1]);
    assert_eq!(wr(2), [0, 0, 0, 0, 1, 1, 2, 0], "{}", specs[2]);
    assert_eq!(wr(3), [3, 1, 1, 0, 1, 1, 1, 1], "{}", specs[3]);
    assert_eq!(wr(4), [0; 8], "{}", specs[4]);
    assert_eq!(wr(5), [0; 8], "{}", specs[5]);
    assert_eq!(rd(4), [0, 2, 1, 1, 1, 0, 1, 0], "{}", specs[4]);
    assert_eq!(rd(5), [1, 1, 0, 1, 0, 1, 0, 2], "{}", specs[5]);
    for c in [0, 1, 2, 3, 6, 7] {
        assert_eq!(rd(c), [0; 8], "reader in {}", specs[c]);
    }
    let total = |h: [u64; 8]| h.iter().sum::<u64>();
    assert_eq!(total(wr(6)), WRITES.len() as u64, "{}", specs[6]);
    assert_eq!(total(wr(7)), WRITES.len() as u64, "{}", specs[7]);
    assert_eq!(total(rd(8)), READS.len() as u64, "{}", specs[8]);
    assert_eq!(total(wr(8)), 0);
    assert_eq!(wr(9), [0, 0, 0, 0, 0, 0, 0, WRITES.len() as u64]);
    assert_eq!(rd(9), [0; 8]);
    // Seek distances: from the end of the IO completed just before on the device, the IOs
    // running one after the other in the order of the script.
    let dists = seek_dists_kib();
    let slots = |range: std::ops::Range<usize>| {
        let b = [0u64, 1, 1024, 2048, 4096, 8192, 16384, 32768];
        let mut h = [0u64; 8];
        for d in &dists[range] {
            h[b.iter().rposition(|x| d >= x).unwrap()] += 1;
        }
        h
    };
    assert_eq!(
        &dists[..WRITES.len()],
        [0, 7160, 1024, 1012, 6080, 4064, 13056, 7160, 8528, 15404]
    );
    assert_eq!(wr(11), [1, 1, 1, 1, 3, 3, 0, 0], "{}", specs[11]);
    assert_eq!(wr(11), slots(0..WRITES.len()));
    assert_eq!(rd(12), slots(WRITES.len()..dists.len()), "{}", specs[12]);
    assert_eq!(rd(11), [0; 8]);
    assert_eq!(wr(12), [0; 8]);
    // Every boundary 0 with B8 = 0: everything in slot 7.
    assert_eq!(rd(10), [0, 0, 0, 0, 0, 0, 0, READS.len() as u64]);
    assert_eq!(wr(10), [0; 8]);
    eprintln!("counters_exact: {:?}", t0.elapsed());
}
