//! Fuzzes chunk decoding and the attribution: any bytes, taken as the raw perf records of a
//! chunk of a real trace (the `ext4-two-writers` fixture's events, formats, devices and
//! tasks), must decode into events or skipped-and-counted records, and the events must go
//! through the attribution, and the events and charged IOs through the blame engine
//! (`ioblame blame`'s split) and the timeline (`ioblame timeline`, with what each role
//! dirtied), without a panic; every victim's split adds up to its Q2C, and the timeline's
//! packets decode.
//!
//! The first byte picks the chunk's CPU; the rest are the records, in the fixture's byte
//! order. Seeds (`fuzz/seeds/events`) are runs of that fixture's own records.
#![no_main]

use std::sync::OnceLock;

use ioblame_attrib::{Attributor, Context, Dirtied, Io};
use ioblame_decode::Decoder;
use ioblame_format::{Chunk, ChunkHeader, Header, Metadata, Trace, TraceFile};
use ioblame_latency::BlameEngine;
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
    a.log_dirtied();
    let mut blame = BlameEngine::new();
    let timeline = ioblame_timeline::Feed::new(4096, true);
    let mut ios: Vec<Io> = Vec::new();
    let mut dirtied: Vec<Dirtied> = Vec::new();
    let part = |io: &Io| ioblame_pipeline::blame::io_part(io, !io.lower);
    for ev in &decoded.events {
        a.prefetch(ev);
        blame.push_event(ev);
        timeline.event(ev);
        a.push(ev);
        a.drain_ios_into(&mut ios);
        a.drain_dirtied_into(&mut dirtied, false);
        for d in dirtied.drain(..) {
            timeline.dirtied(&d, a.tables());
        }
        for io in ios.drain(..) {
            blame.push_io(part(&io));
            timeline.io(&io, a.tables());
        }
    }
    a.drain_dirtied_into(&mut dirtied, true);
    for d in dirtied.drain(..) {
        timeline.dirtied(&d, a.tables());
    }
    let done = a.finish();
    for io in &done.ios {
        blame.push_io(part(io));
        timeline.io(io, &done.tables);
    }
    write_timeline(timeline.finish(), &done.tables);
    let b = blame.finish();
    for v in &b.victims {
        let waited: u64 = b.culprits_of(v).iter().map(|c| c.1).sum();
        assert_eq!(v.own + v.idle + waited, v.q2c, "{v:?}");
    }
});

/// Writes the timeline collected (names made up) and decodes its packets back.
fn write_timeline(c: ioblame_timeline::Collected, tables: &ioblame_attrib::Tables) {
    use prost::Message;
    let intents: Vec<String> = (0..tables.intents.len())
        .map(|i| format!("intent {i}"))
        .collect();
    let path = |_: u32, ino: u64| Some(format!("/f/{ino}"));
    let device = |dev: u32| format!("{dev}");
    let names = ioblame_timeline::Names {
        tables,
        intents: &intents,
        stacks: &[],
        path: &path,
        device: &device,
    };
    let mut out = Vec::new();
    ioblame_timeline::write(&c, &names, &ioblame_timeline::Options::default(), &mut out)
        .expect("writes into memory");
    let mut rest = &out[..];
    while !rest.is_empty() {
        assert_eq!(rest[0], 0x0a);
        rest = &rest[1..];
        ioblame_timeline::proto::TracePacket::decode_length_delimited(&mut rest)
            .expect("a packet decodes");
    }
}
