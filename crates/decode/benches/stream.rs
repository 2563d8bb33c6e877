//! Throughput of the decode pipeline on a synthetic trace shaped like a buffered-write
//! workload (dirty folios, bio queue/issue/complete with 12-frame kernel stacks).
//!
//! `cargo bench -p ioblame-decode --bench stream [-- EVENTS]`

use std::time::Instant;

use ioblame_decode::stream::{for_each_event, StreamOptions};
use ioblame_decode::synth::{builtin_format, TraceBuilder, Val};
use ioblame_decode::Decoder;
use ioblame_format::{ByteOrder, Trace};

fn main() {
    let n: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let cpus = 4u32;
    let mut t = TraceBuilder::new(ByteOrder::native(), cpus);
    let names = [
        "writeback:writeback_dirty_folio",
        "block:block_bio_queue",
        "block:block_rq_issue",
        "block:block_rq_complete",
    ];
    let ids: Vec<u16> = names
        .iter()
        .map(|n| {
            t.add_event(
                n,
                builtin_format(n).unwrap(),
                *n != "block:block_rq_complete",
            )
            .unwrap()
        })
        .collect();
    let stack: Vec<u64> = (0..12).map(|i| 0xffffffff81000000 + i * 0x1234).collect();
    let t0 = Instant::now();
    let mut time = 1_000_000u64;
    for i in 0..n {
        let cpu = (i % cpus as u64) as u32;
        time += 37;
        let k = (i / cpus as u64 % 4) as usize;
        let fields: &[(&str, Val<'_>)] = match k {
            0 => &[
                ("name", Val::Str("7:0")),
                ("ino", Val::U(12)),
                ("index", Val::U(i)),
            ],
            _ => &[
                ("dev", Val::U(7 << 20)),
                ("sector", Val::U(i * 8)),
                ("nr_sector", Val::U(8)),
                ("rwbs", Val::Str("WS")),
            ],
        };
        t.sample(cpu, ids[k], time, 100, 100, &stack, fields)
            .unwrap();
        if i % 20_000 == cpus as u64 - 1 {
            t.flush_all();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    t.write(dir.path()).unwrap();
    eprintln!("generated {n} events in {:.2?}", t0.elapsed());

    let trace = Trace::open(dir.path()).unwrap();
    let dec = Decoder::new(trace.header(), trace.metadata());
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let mut sum = 0u64;
        let s = pool.install(|| {
            for_each_event(&trace, &dec, &StreamOptions::default(), |e| {
                sum = sum.wrapping_add(e.time)
            })
        });
        let rate = |d: std::time::Duration| s.events as f64 / d.as_secs_f64() / 1e6;
        println!(
            "{threads} thread(s): {} events, {} chunks, {:.1} MiB: wall {:.2?} ({:.2} M events/s); \
             decompress {:.2?} ({:.2} M/s), decode {:.2?} ({:.2} M/s), merge {:.2?} ({:.2} M/s) [{sum}]",
            s.events,
            s.chunks,
            s.bytes as f64 / (1 << 20) as f64,
            s.wall_time,
            rate(s.wall_time),
            s.decompress_time,
            rate(s.decompress_time),
            s.decode_time,
            rate(s.decode_time),
            s.merge_time,
            rate(s.merge_time),
        );
    }
}
