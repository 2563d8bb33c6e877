//! What a chunk declares must not size the decoder's allocations: measured with a counting
//! global allocator (largest single allocation, peak of live heap bytes).

use ioblame_decode::synth::{builtin_format, TraceBuilder, Val};
use ioblame_decode::Decoder;
use ioblame_format::{ByteOrder, Chunk, ChunkHeader};
use ioblame_testkit::alloc::{measure, one_test_at_a_time, Counting};

#[global_allocator]
static A: Counting = Counting;

const MIB: usize = 1 << 20;

/// A trace of one event (`block:block_rq_issue`, with callchains) and one of its samples.
fn one_event() -> (TraceBuilder, Vec<u8>) {
    let mut t = TraceBuilder::new(ByteOrder::Little, 1);
    let name = "block:block_rq_issue";
    let ev = t
        .add_event(name, builtin_format(name).unwrap(), true)
        .unwrap();
    let rec = t
        .sample_record(
            0,
            ev,
            1_000,
            7,
            7,
            &[0xffff_ffff_8100_0000],
            &[("dev", Val::U(8 << 20)), ("rwbs", Val::Str("W"))],
        )
        .unwrap();
    (t, rec)
}

#[test]
fn a_chunk_declaring_a_million_records_reserves_for_what_it_holds() {
    let _serial = one_test_at_a_time();
    let (t, rec) = one_event();
    let d = Decoder::new(t.header(), t.metadata());
    // Two records' bytes; the header claims 1,048,576 records (the cap on what is reserved).
    let mut data = rec.clone();
    data.extend(&rec);
    let chunk = Chunk {
        header: ChunkHeader {
            records: 1 << 20,
            uncompressed_len: data.len() as u32,
            ..ChunkHeader::default()
        },
        data,
    };
    let (dc, largest, peak) = measure(|| d.decode_chunk(&chunk));
    assert_eq!(dc.events.len(), 2);
    assert!(largest < 64 << 10, "largest allocation {largest} bytes");
    assert!(peak < MIB, "peak heap {peak} bytes");
}

#[test]
fn a_callchain_declaring_more_than_its_record_holds_allocates_nothing_for_it() {
    let _serial = one_test_at_a_time();
    let (t, rec) = one_event();
    let d = Decoder::new(t.header(), t.metadata());
    // The callchain's length (after IDENTIFIER, TID, TIME, CPU: 8 + 8 + 8 + 8 bytes of body)
    // set to 2^60 entries.
    let mut bad = rec.clone();
    bad[8 + 32..8 + 40].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let chunk = Chunk {
        header: ChunkHeader {
            records: 1,
            uncompressed_len: bad.len() as u32,
            ..ChunkHeader::default()
        },
        data: bad,
    };
    let (dc, largest, _) = measure(|| d.decode_chunk(&chunk));
    assert_eq!(dc.events.len(), 0);
    assert_eq!(dc.stats.error_count(), 1);
    assert!(largest < 64 << 10, "largest allocation {largest} bytes");
}
