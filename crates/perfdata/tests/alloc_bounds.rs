//! What a perf.data file or stream declares must not size the converter's allocations, and
//! `perf record -z`'s compressed records must not expand without bound: measured with a
//! counting global allocator (largest single allocation, peak of live heap bytes).

use std::path::Path;

use ioblame_perfdata::{perf_data_from_bytes, PerfDataError, PerfDataOptions};
use ioblame_testkit::alloc::{measure, one_test_at_a_time, Counting};

#[global_allocator]
static A: Counting = Counting;

const MIB: usize = 1 << 20;

/// A perf record of type `kind` with `body` (little-endian).
fn record(kind: u32, body: &[u8]) -> Vec<u8> {
    let mut r = kind.to_le_bytes().to_vec();
    r.extend(0u16.to_le_bytes());
    r.extend(((8 + body.len()) as u16).to_le_bytes());
    r.extend(body);
    r
}

/// A 112-byte tracepoint attr sampling IDENTIFIER | TID | TIME | CPU | RAW.
fn attr() -> Vec<u8> {
    let mut a = vec![0u8; 112];
    a[0..4].copy_from_slice(&2u32.to_le_bytes()); // PERF_TYPE_TRACEPOINT
    a[4..8].copy_from_slice(&112u32.to_le_bytes());
    a[24..32].copy_from_slice(&(0x10000u64 | 0x2 | 0x4 | 0x80 | 0x400).to_le_bytes());
    a
}

/// A pipe-mode stream: one attr with id 1, then `data`.
fn stream(data: &[u8]) -> Vec<u8> {
    let mut s = b"PERFILE2".to_vec();
    s.extend(16u64.to_le_bytes());
    let mut a = attr();
    a.extend(1u64.to_le_bytes());
    s.extend(record(64, &a));
    s.extend(data);
    s
}

/// A perf.data file: one attr with id 1, the data section `data`, no feature sections.
fn file(data: &[u8]) -> Vec<u8> {
    let a = attr();
    let entry = a.len() as u64 + 16;
    let ids_at = 104 + entry;
    let data_at = ids_at + 8;
    let mut f = b"PERFILE2".to_vec();
    for v in [
        104,
        entry,
        104,
        entry,
        data_at,
        data.len() as u64,
        0,
        0,
        0,
        0,
        0,
        0,
    ] {
        f.extend(u64::to_le_bytes(v));
    }
    f.extend(&a);
    f.extend(ids_at.to_le_bytes());
    f.extend(8u64.to_le_bytes());
    f.extend(1u64.to_le_bytes());
    f.extend(data);
    f
}

/// 1 GiB of zeros as a zstd stream cut into `PERF_RECORD_COMPRESSED` records of at most
/// 60 KiB, as perf writes them.
fn bomb() -> Vec<u8> {
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    let zeros = vec![0u8; MIB];
    for _ in 0..1024 {
        std::io::Write::write_all(&mut enc, &zeros).unwrap();
    }
    let z = enc.finish().unwrap();
    z.chunks(60 << 10).flat_map(|c| record(81, c)).collect()
}

fn convert(
    b: Vec<u8>,
) -> (
    Result<ioblame_perfdata::Converted, PerfDataError>,
    usize,
    usize,
) {
    measure(|| perf_data_from_bytes(Path::new("bomb.data"), b, &PerfDataOptions::default()))
}

#[test]
fn a_compressed_record_bomb_is_refused_before_it_is_expanded() {
    let _serial = one_test_at_a_time();
    let bomb = bomb();
    assert!(bomb.len() < 512 << 10, "{}", bomb.len());
    for (mode, bytes) in [("pipe", stream(&bomb)), ("file", file(&bomb))] {
        let len = bytes.len();
        let (r, largest, peak) = convert(bytes);
        let e = r.map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("expands to more than"), "{mode}: {e}");
        // The stream's own bytes (and their copy into the rewritten file) and a scratch
        // buffer: nothing near the 1 GiB declared.
        assert!(
            largest < 2 * len + MIB,
            "{mode}: largest allocation {largest} bytes"
        );
        assert!(peak < 4 * len + 2 * MIB, "{mode}: peak heap {peak} bytes");
    }
}

#[test]
fn a_stream_declaring_gigabytes_of_tracing_data_holds_what_it_has() {
    let _serial = one_test_at_a_time();
    // HEADER_TRACING_DATA declaring 200 MiB, followed by 1 KiB: the stream ends inside it.
    let mut td = (200u32 << 20).to_le_bytes().to_vec();
    td.extend([0u8; 4]);
    let mut data = record(66, &td);
    data.extend([7u8; 1024]);
    let (r, largest, _) = convert(stream(&data));
    let c = r.unwrap();
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains("ends inside its tracing data")),
        "{:?}",
        c.notes
    );
    assert!(largest < MIB, "largest allocation {largest} bytes");
    // 256 MiB and more is refused outright.
    let mut td = u32::MAX.to_le_bytes().to_vec();
    td.extend([0u8; 4]);
    let (r, largest, _) = convert(stream(&record(66, &td)));
    assert!(r.is_err());
    assert!(largest < MIB, "largest allocation {largest} bytes");
}

#[test]
fn many_tiny_records_cost_in_proportion() {
    let _serial = one_test_at_a_time();
    // 200,000 header-only records of an unknown type (no FINISHED_ROUND: the parser holds a
    // round whole): the heap stays within a small multiple of the input.
    let data: Vec<u8> = (0..200_000).flat_map(|_| record(1000, &[])).collect();
    let bytes = stream(&data);
    let len = bytes.len();
    let (r, _, peak) = convert(bytes);
    drop(r);
    assert!(
        peak < 40 * len,
        "peak heap {peak} bytes for {len} bytes of input"
    );
}

/// Found by fuzzing: a `HEADER_CMDLINE` section declaring billions of strings made the
/// parser reserve 27 GB and abort the process. The section is now taken as missing.
#[test]
fn a_command_line_declaring_billions_of_strings_is_taken_as_missing() {
    let _serial = one_test_at_a_time();
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/single-noidentifier.data"
    );
    let mut b = std::fs::read(path).unwrap();
    // The feature table follows the data section; HEADER_CMDLINE (bit 11) is the 11th
    // section listed (bits 1 to 11 are set).
    let u64at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let table = (u64at(&b, 40) + u64at(&b, 48)) as usize;
    let bits = u64at(&b, 72);
    assert_eq!(bits & 0xffe, 0xffe, "bits 1..=11 set");
    let listed = (bits & ((1 << 11) - 1)).count_ones() as usize;
    let at = u64at(&b, table + 16 * listed) as usize;
    let before =
        perf_data_from_bytes(Path::new("x"), b.clone(), &PerfDataOptions::default()).unwrap();
    assert!(before.trace.metadata().info("command").is_some());
    b[at..at + 4].copy_from_slice(&0xfff0_0000u32.to_le_bytes());
    let (r, largest, _) = convert(b);
    let c = r.unwrap();
    assert!(c.trace.metadata().info("command").is_none());
    assert!(largest < 4 * MIB, "largest allocation {largest} bytes");
}
