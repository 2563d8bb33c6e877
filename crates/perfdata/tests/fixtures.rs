//! Golden tests on committed perf.data files (no perf, no root needed).
//!
//! `single-noidentifier.data`: `perf record -e block:block_rq_issue -- dd ... conv=fsync`
//! (perf 6.1, not system-wide, one event: samples without PERF_SAMPLE_IDENTIFIER).
//! `loop0-full-z.data`: the `perf_command(["loop0"])` line with `-z` (zstd-compressed records),
//! `dd bs=1M count=1 conv=fsync` on an ext4 loop device.
//! The expected counts are what `perf report -D` and `perf script -F event` showed for these
//! files when they were recorded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ioblame_perfdata::{
    is_perf_data, open_perf_data, Converted, Corruption, PerfDataError, PerfDataOptions,
};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn counts(c: &Converted) -> BTreeMap<u32, u64> {
    let t = &c.trace;
    let mut m = BTreeMap::new();
    for ch in t.chunks() {
        let chunk = t.decompress(ch).unwrap();
        let mut n = 0;
        for r in chunk.records(t.header().byte_order) {
            *m.entry(r.unwrap().kind).or_insert(0) += 1;
            n += 1;
        }
        assert_eq!(n, ch.header.records);
    }
    m
}

fn decode(c: &Converted) -> ioblame_decode::DecodeStats {
    let t = &c.trace;
    let d = ioblame_decode::Decoder::new(t.header(), t.metadata());
    assert!(d.problems().is_empty(), "{:?}", d.problems());
    let mut stats = ioblame_decode::DecodeStats::default();
    let lo = t
        .chunks()
        .iter()
        .map(|c| c.header.first_ts)
        .filter(|&x| x > 0)
        .min()
        .unwrap();
    let hi = t.chunks().iter().map(|c| c.header.last_ts).max().unwrap();
    for ch in t.chunks() {
        let dc = d.decode_chunk(&t.decompress(ch).unwrap());
        // Trailers and sample bodies are read where the declared sample_type says: a
        // misplaced IDENTIFIER would show up as wild times or CPUs.
        for e in &dc.events {
            assert!(
                e.time == 0 || (lo..=hi).contains(&e.time),
                "{e:?} {lo} {hi} {:?}",
                t.chunks()
            );
            assert_eq!(e.cpu, ch.header.cpu, "{e:?}");
        }
        assert!(dc.events.iter().any(|e| e.time != 0));
        stats.merge(&dc.stats);
    }
    assert_eq!(stats.error_count(), 0, "{stats:?}");
    stats
}

#[test]
fn single_event_without_identifier() {
    let p = data("single-noidentifier.data");
    assert!(is_perf_data(&p));
    let c = open_perf_data(&p, &PerfDataOptions::default()).unwrap();
    assert!(c.trace.problems().is_empty());
    let h = c.trace.header();
    assert_eq!(h.recorder_version, "perf 6.1.187");
    assert_eq!(h.kernel_release, "6.18.44-fc-v470");
    assert_eq!(h.machine, "x86_64");
    assert_eq!(h.page_size, 4096);
    assert_eq!(h.clock_id, -1);
    let evs = &c.trace.metadata().events;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].name, "block:block_rq_issue");
    assert!(evs[0]
        .format
        .starts_with("name: block_rq_issue\nID: 2104\n"));
    assert_eq!(evs[0].tracefs_id, 2104);
    assert_ne!(evs[0].sample_type & (1 << 16), 0, "IDENTIFIER added");
    assert!(!evs[0].callchain());
    assert_ne!(evs[0].flags & ioblame_format::EVENT_TASK_RECORDS, 0);
    // 4 samples, 2 COMM, 1 EXIT.
    assert_eq!(counts(&c), BTreeMap::from([(3, 2), (4, 1), (9, 4)]));
    let s = decode(&c);
    assert_eq!(s.per_event, vec![4]);
    assert_eq!((s.comm, s.exit), (2, 1));
    for needed in ["block:block_rq_complete", "block:block_bio_queue"] {
        assert!(
            c.notes
                .iter()
                .any(|n| n.starts_with(&format!("no {needed}:"))
                    && n.ends_with(&format!("add -e {needed}"))),
            "{:?}",
            c.notes
        );
    }
}

#[test]
fn compressed_full_event_set() {
    let p = data("loop0-full-z.data");
    let c = open_perf_data(&p, &PerfDataOptions::default()).unwrap();
    assert!(c.trace.problems().is_empty());
    let evs = &c.trace.metadata().events;
    assert_eq!(evs.len(), 72, "71 tracepoints and perf's dummy:HG");
    for e in evs.iter().filter(|e| e.name != "dummy:HG") {
        assert!(e.tracefs_id != 0 && e.format.contains(&format!("ID: {}\n", e.tracefs_id)));
        assert!(e.callchain(), "{}", e.name);
    }
    let dirty = evs
        .iter()
        .find(|e| e.name == "block:block_dirty_buffer")
        .unwrap();
    assert_eq!(
        dirty.filter,
        "dev == 7340032 && sector < 4611686018427387904"
    );
    let wb = evs
        .iter()
        .find(|e| e.name == "writeback:writeback_dirty_folio")
        .unwrap();
    assert_eq!(wb.filter, "name == \"7:0\"");
    // perf report -D: 106 SAMPLE, 87 COMM, 86 FORK, 2 EXIT.
    assert_eq!(
        counts(&c),
        BTreeMap::from([(3, 87), (4, 2), (7, 86), (9, 106)])
    );
    let s = decode(&c);
    assert_eq!(s.per_event.iter().sum::<u64>(), 106);
    // Nothing the attribution needs is missing. (Whether kernel symbols are found depends on
    // the analysing host: this file was recorded on another boot.)
    assert!(
        !c.notes
            .iter()
            .any(|n| n.contains("add -e") || n.contains("-g")),
        "{:?}",
        c.notes
    );
}

#[test]
fn every_cut_of_a_compressed_file_is_an_error() {
    let p = data("loop0-full-z.data");
    let bytes = std::fs::read(&p).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut_path = dir.path().join("cut.data");
    let n = bytes.len();
    let mut cuts: Vec<usize> = (0..n).step_by(997).collect();
    cuts.extend([1, 7, 8, 103, 104, 105, n - 1, n - 16]);
    for cut in cuts {
        std::fs::write(&cut_path, &bytes[..cut]).unwrap();
        match open_perf_data(&cut_path, &PerfDataOptions::default()) {
            Ok(_) => panic!("cut at {cut} of {n} converted"),
            Err(PerfDataError::ParserPanicked { what, .. }) => panic!("cut at {cut}: {what}"),
            Err(e) => assert!(e.to_string().contains("cut.data"), "{e}"),
        }
    }
}

/// A damaged count inside the event descriptions must not make the parser reserve gigabytes
/// (an allocation failure aborts the process, which no `catch_unwind` stops).
#[test]
fn damaged_event_description_counts_are_an_error() {
    let p = data("loop0-full-z.data");
    let bytes = std::fs::read(&p).unwrap();
    let u64at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
    let table = (u64at(40) + u64at(48)) as usize;
    // Entry of feature bit 12 (HEADER_EVENT_DESC): one 16-byte entry per lower bit set.
    let features = u64at(72);
    assert_ne!(features & 1 << 12, 0, "the file has event descriptions");
    let entry = table + 16 * (features & ((1 << 12) - 1)).count_ones() as usize;
    let desc = u64at(entry) as usize;
    let attr_size = u32::from_le_bytes(bytes[desc + 4..desc + 8].try_into().unwrap()) as usize;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bad.data");
    for (at, what) in [
        (desc, "events"),
        (desc + 8 + attr_size, "ids"),
        (desc + 8 + attr_size + 4, "name"),
    ] {
        let mut b = bytes.clone();
        b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(&out, &b).unwrap();
        match open_perf_data(&out, &PerfDataOptions::default()) {
            Err(PerfDataError::Corrupt { what: w, .. }) => {
                assert!(matches!(w, Corruption::EventDesc { .. }), "{what}: {w}");
                assert!(w.to_string().contains("event descriptions"), "{what}: {w}")
            }
            Err(e) => panic!("{what}: {e}"),
            Ok(_) => panic!("{what}: converted"),
        }
    }
}
