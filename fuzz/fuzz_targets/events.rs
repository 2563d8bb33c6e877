//! Fuzzes chunk decoding and the attribution: any bytes, taken as the raw perf records of a
//! chunk of a real trace (the `ext4-two-writers` fixture's events, formats, devices and
//! tasks), must decode into events or skipped-and-counted records, and the events must go
//! through the attribution, and the events and charged IOs through the blame engine
//! (`ioblame blame`'s split), without a panic; every victim's split adds up to its Q2C.
//!
//! The first byte picks the chunk's CPU; the rest are the records, in the fixture's byte
//! order. Seeds (`fuzz/seeds/events`) are runs of that fixture's own records.
#![no_main]

use std::sync::OnceLock;

use ioblame_attrib::{Attributor, Context, Io};
use ioblame_latency::BlameEngine;
use ioblame_decode::Decoder;
use ioblame_format::{Chunk, ChunkHeader, Header, Metadata, Trace, TraceFile};
use libfuzzer_sys::fuzz_target;

/// The fixture whose events the records refer to.
static FIXTURE: &[u8] = include_bytes!("../../fixtures/ext4-two-writers/trace/ioblame-000000.iob");

struct Setup {
    header: Header,
    meta: Metadata,
    decoder: Decoder,
}

fn setup() -> &'static Setup {
    static S: OnceLock<Setup> = OnceLock::new();
    S.get_or_init(|| {
        let f = TraceFile::from_bytes(std::path::Path::new("fixture.iob"), FIXTURE.to_vec())
            .expect("the fixture reads");
        let t = Trace::from_files(vec![f], vec![]);
        let header = t.header().clone();
        let meta = t.metadata().clone();
        let decoder = Decoder::new(&header, &meta);
        Setup {
            header,
            meta,
            decoder,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&cpu, records)) = data.split_first() else {
        return;
    };
    let s = setup();
    let chunk = Chunk {
        header: ChunkHeader {
            cpu: u32::from(cpu) % s.header.cpu_count.max(1),
            records: (records.len() / 8) as u32,
            uncompressed_len: records.len() as u32,
            ..ChunkHeader::default()
        },
        data: records.to_vec(),
    };
    let decoded = s.decoder.decode_chunk(&chunk);
    let mut a = Attributor::new(Context::from_trace(&s.header, &s.meta));
    let mut blame = BlameEngine::new();
    let mut ios: Vec<Io> = Vec::new();
    let part = |io: &Io| ioblame_pipeline::blame::io_part(io, !io.lower);
    for ev in &decoded.events {
        a.prefetch(ev);
        blame.push_event(ev);
        a.push(ev);
        a.drain_ios_into(&mut ios);
        for io in ios.drain(..) {
            blame.push_io(part(&io));
        }
    }
    for io in &a.finish().ios {
        blame.push_io(part(io));
    }
    let b = blame.finish();
    for v in &b.victims {
        let waited: u64 = b.culprits_of(v).iter().map(|c| c.1).sum();
        assert_eq!(v.own + v.idle + waited, v.q2c, "{v:?}");
    }
});
