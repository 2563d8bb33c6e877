//! Tests over synthetic traces: typed decoding, byte orders, merge order, damage.

use ioblame_format::{ByteOrder, Chunk, ChunkHeader, Trace};

use crate::decoder::{Decoder, DecoderProblem, SkipReason};
use crate::event::*;
use crate::format::FieldError;
use crate::stream::{decode_all, StreamOptions, StreamStats};
use crate::synth::{builtin_format, sample_record, SampleValues, TraceBuilder, Val};

fn fmt(name: &str) -> &'static str {
    builtin_format(name).unwrap_or_else(|| panic!("no builtin format {name}"))
}

const STACK: [u64; 3] = [0xffffffff811c55b0, 0xffffffff811c6000, 0xffffffff81000100];

fn open(t: TraceBuilder) -> (tempfile::TempDir, Trace) {
    let dir = tempfile::tempdir().unwrap();
    t.write(dir.path()).unwrap();
    let trace = Trace::open(dir.path()).unwrap();
    (dir, trace)
}

/// Writes `t`, opens it and decodes every event, in time order, with the stream's stats.
fn decode_built(t: TraceBuilder) -> (Vec<Event>, StreamStats) {
    let (_d, trace) = open(t);
    let dec = Decoder::new(trace.header(), trace.metadata());
    decode_all(&trace, &dec, &StreamOptions::default())
}

/// One sample of every typed event, with distinctive values, on 2 CPUs.
fn every_kind(order: ByteOrder) -> TraceBuilder {
    let mut t = TraceBuilder::new(order, 2);
    let names: Vec<&str> = crate::decoder::typed_event_names()
        .filter(|n| builtin_format(n).is_some())
        .collect();
    let mut ids = Vec::new();
    for n in &names {
        ids.push((*n, t.add_event(n, fmt(n), true).unwrap()));
    }
    t.comm(0, 10, 100, 101, "dd", true);
    for (i, (name, ev)) in ids.iter().enumerate() {
        let f = builtin_format(name).unwrap();
        let fm = crate::format::EventFormat::parse(f).unwrap();
        // Fill every integer field with a value derived from its offset, strings by name.
        let mut vals: Vec<(&str, Val<'_>)> = Vec::new();
        for s in &fm.fields {
            if s.name.starts_with("common_") {
                continue;
            }
            let v = match (s.name.as_str(), s.array_len.is_some() || s.data_loc) {
                ("rwbs", _) => Val::Str("FWFSM"),
                ("name", true) => Val::Str("7:0"),
                (_, true) => Val::Str("some-text"),
                ("error" | "ret" | "nr_to_write", _) => Val::I(-5),
                _ => Val::U(1000 + s.offset as u64),
            };
            vals.push((s.name.as_str(), v));
        }
        let cpu = (i % 2) as u32;
        t.sample(cpu, *ev, 100 + i as u64 * 10, 100, 101, &STACK, &vals)
            .unwrap();
    }
    t.fork_exit(1, 5000, true, (200, 100, 200, 101));
    t.fork_exit(1, 5001, false, (200, 100, 200, 101));
    t.lost(0, 5002, 17);
    t
}

#[test]
fn every_typed_event_decodes_with_its_fields() {
    let (_d, trace) = open(every_kind(ByteOrder::Little));
    let dec = Decoder::new(trace.header(), trace.metadata());
    assert!(dec.problems().is_empty(), "{:?}", dec.problems());
    let (events, stats) = decode_all(&trace, &dec, &StreamOptions::default());
    assert_eq!(stats.decode.error_count(), 0);
    assert!(stats.damaged.is_empty());
    let n = dec.event_count();
    assert!(n >= 60, "{n} typed events have builtin formats");
    assert_eq!(events.len(), n + 4);
    for w in events.windows(2) {
        assert!(w[0].time <= w[1].time);
    }
    for e in &events {
        assert!(!matches!(e.kind, EventKind::Other { .. }), "{e:?}");
    }
    let samples: Vec<&Event> = events.iter().filter(|e| e.stack.is_some()).collect();
    assert_eq!(samples.len(), n);
    for s in &samples {
        assert_eq!(s.stack.as_deref().unwrap(), &STACK);
        assert_eq!((s.pid, s.tid), (100, 101));
    }
    let find =
        |p: &dyn Fn(&EventKind) -> bool| events.iter().find(|e| p(&e.kind)).unwrap().kind.clone();
    let rwbs = Rwbs::parse("FWFSM");
    assert_eq!(
        find(&|k| matches!(k, EventKind::RqIssue { .. })),
        EventKind::RqIssue {
            dev: 1008,
            sector: 1016,
            nr_sector: 1024,
            bytes: 1028,
            rwbs
        }
    );
    assert_eq!(
        find(&|k| matches!(k, EventKind::RqComplete { .. })),
        EventKind::RqComplete {
            dev: 1008,
            sector: 1016,
            nr_sector: 1024,
            error: -5,
            rwbs
        }
    );
    assert_eq!(
        find(&|k| matches!(k, EventKind::DirtyFolio { .. })),
        EventKind::DirtyFolio {
            bdi: 7 << 20,
            ino: 1040,
            index: 1048
        }
    );
    assert_eq!(
        find(&|k| matches!(k, EventKind::SingleInode { .. })),
        EventKind::SingleInode {
            bdi: 7 << 20,
            ino: 1040,
            state: 1048,
            nr_to_write: -5,
            wrote: 1080
        }
    );
    assert_eq!(
        find(&|k| matches!(
            k,
            EventKind::WritebackWork {
                phase: WorkPhase::Written,
                ..
            }
        )),
        EventKind::WritebackWork {
            phase: WorkPhase::Written,
            bdi: 7 << 20,
            sb_dev: 1048,
            nr_pages: 1040,
            sync_mode: 1052,
            reason: 1068
        }
    );
    assert_eq!(
        find(&|k| matches!(k, EventKind::IomapAddToIoend { .. })),
        EventKind::IomapAddToIoend {
            dev: 1008,
            ino: 1016,
            pos: 1024,
            dirty_len: 1032,
            addr: 1040,
            offset: 1048,
            length: 1056,
            typ: 1064,
            flags: 1066,
            bdev: 1068
        }
    );
    // order is a u8 field: 1000 + 36 truncated to a byte.
    assert_eq!(
        find(&|k| matches!(k, EventKind::AddToPageCache { .. })),
        EventKind::AddToPageCache {
            s_dev: 1032,
            ino: 1016,
            index: 1024,
            order: (1036u32 & 0xff) as u8,
            pfn: 1008
        }
    );
    assert_eq!(
        find(&|k| matches!(
            k,
            EventKind::Readahead {
                kind: RaKind::Unbounded,
                ..
            }
        )),
        EventKind::Readahead {
            kind: RaKind::Unbounded,
            s_dev: 1016,
            ino: 1008,
            index: 1024,
            order: 0,
            size: 1032,
            async_size: 1040
        }
    );
    assert_eq!(
        find(&|k| matches!(k, EventKind::SchedExec { .. })),
        EventKind::SchedExec {
            pid: 1012,
            old_pid: 1016,
            filename: "some-text".into()
        }
    );
    assert_eq!(
        find(&|k| matches!(
            k,
            EventKind::Jbd2Commit {
                phase: CommitPhase::End,
                ..
            }
        )),
        EventKind::Jbd2Commit {
            phase: CommitPhase::End,
            dev: 1008,
            transaction: 1016
        }
    );
    assert_eq!(
        find(&|k| matches!(
            k,
            EventKind::XfsFile {
                op: XfsFileOp::DirectRead,
                ..
            }
        )),
        EventKind::XfsFile {
            op: XfsFileOp::DirectRead,
            dev: 1008,
            ino: 1016,
            offset: 1032,
            count: 1040
        }
    );
    let comm = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Comm { .. }))
        .unwrap();
    assert_eq!(
        (comm.time, comm.cpu, comm.pid, comm.tid, &comm.kind),
        (
            10,
            0,
            100,
            101,
            &EventKind::Comm {
                pid: 100,
                tid: 101,
                comm: "dd".into(),
                exec: true
            }
        )
    );
    assert!(events.iter().any(|e| e.time == 5000
        && e.kind
            == EventKind::Fork {
                pid: 200,
                ppid: 100,
                tid: 200,
                ptid: 101
            }));
    assert!(events
        .iter()
        .any(|e| e.time == 5001 && matches!(e.kind, EventKind::Exit { .. })));
    assert!(events
        .iter()
        .any(|e| e.time == 5002 && e.kind == EventKind::Lost { lost: 17 }));
    assert_eq!(stats.decode.lost, 17);
    assert_eq!(
        (stats.decode.comm, stats.decode.fork, stats.decode.exit),
        (1, 1, 1)
    );
    let by_kind = stats.counts_by_kind(&dec);
    assert!(by_kind.contains(&("block:block_rq_issue".to_string(), 1)));
    assert!(by_kind.contains(&("LOST".to_string(), 1)));
}

#[test]
fn big_endian_trace_decodes_to_the_same_events() {
    let (_a, le) = open(every_kind(ByteOrder::Little));
    let (_b, be) = open(every_kind(ByteOrder::Big));
    assert_eq!(be.header().byte_order, ByteOrder::Big);
    let dl = Decoder::new(le.header(), le.metadata());
    let db = Decoder::new(be.header(), be.metadata());
    let (el, _) = decode_all(&le, &dl, &StreamOptions::default());
    let (eb, sb) = decode_all(&be, &db, &StreamOptions::default());
    assert_eq!(sb.decode.error_count(), 0);
    assert!(el.len() > 60);
    assert_eq!(el, eb);
}

/// Three CPUs whose chunks interleave in time; some timestamps tie across CPUs.
fn interleaved(order: ByteOrder) -> (TraceBuilder, usize) {
    interleaved_chunks(order, 7)
}

/// Three CPUs' interleaved requests in chunks of 1 to `most` records.
fn interleaved_chunks(order: ByteOrder, most: u64) -> (TraceBuilder, usize) {
    let mut t = TraceBuilder::new(order, 3);
    let q = t
        .add_event("block:block_bio_queue", fmt("block:block_bio_queue"), true)
        .unwrap();
    let c = t
        .add_event(
            "block:block_rq_complete",
            fmt("block:block_rq_complete"),
            false,
        )
        .unwrap();
    let mut n = 0;
    let mut x: u64 = 12345;
    for round in 0..40u64 {
        for cpu in 0..3u32 {
            // Chunks of 1..=most records; times advance per CPU with pseudo-random steps.
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = 1 + (x >> 33) % most;
            for i in 0..len {
                let time = round * 100 + i * (1 + cpu as u64) * 3 + (x >> 62);
                let ev = if i % 2 == 0 { q } else { c };
                let sector = (cpu as u64) << 32 | round << 8 | i;
                t.sample(
                    cpu,
                    ev,
                    time,
                    cpu + 1,
                    cpu + 1,
                    &[0xffffffff81000000 + i],
                    &[
                        ("dev", Val::U(7 << 20)),
                        ("sector", Val::U(sector)),
                        ("nr_sector", Val::U(8)),
                        ("rwbs", Val::Str("W")),
                    ],
                )
                .unwrap();
                n += 1;
            }
            t.flush(cpu);
        }
    }
    (t, n)
}

fn sector_of(e: &Event) -> u64 {
    match e.kind {
        EventKind::BioQueue { sector, .. } | EventKind::RqComplete { sector, .. } => sector,
        _ => panic!("{e:?}"),
    }
}

#[test]
fn merge_is_time_ordered_and_independent_of_threads_and_windows() {
    let (t, n) = interleaved(ByteOrder::Little);
    let (_d, trace) = open(t);
    assert!(trace.chunks().len() >= 120);
    let dec = Decoder::new(trace.header(), trace.metadata());
    let (reference, stats) = decode_all(&trace, &dec, &StreamOptions::default());
    assert_eq!(reference.len(), n);
    assert_eq!(stats.events, n as u64);
    assert_eq!(stats.out_of_order, 0);
    // Sorted by (time, cpu), and each CPU's events keep their record order.
    for w in reference.windows(2) {
        assert!(
            (w[0].time, w[0].cpu) <= (w[1].time, w[1].cpu),
            "{:?} then {:?}",
            w[0],
            w[1]
        );
        if w[0].cpu == w[1].cpu && w[0].time == w[1].time {
            assert!(sector_of(&w[0]) < sector_of(&w[1]));
        }
    }
    for cpu in 0..3 {
        let s: Vec<u64> = reference
            .iter()
            .filter(|e| e.cpu == cpu)
            .map(sector_of)
            .collect();
        assert!(s.windows(2).all(|w| w[0] < w[1]), "cpu {cpu} reordered");
    }
    for threads in [1, 2, 3] {
        for window_chunks in [1, 2, 5, 1000] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let opts = StreamOptions {
                window_chunks,
                window_bytes: 64 << 20,
            };
            let (got, _) = pool.install(|| decode_all(&trace, &dec, &opts));
            if got != reference {
                let i = got
                    .iter()
                    .zip(&reference)
                    .position(|(a, b)| a != b)
                    .unwrap_or(got.len().min(reference.len()));
                panic!(
                    "{threads} threads, window {window_chunks}: {} vs {} events, first difference at {i}: {:?} vs {:?}",
                    got.len(),
                    reference.len(),
                    got.get(i).map(|e| (e.time, e.cpu)),
                    reference.get(i).map(|e| (e.time, e.cpu))
                );
            }
        }
    }
    // A tiny byte cap still makes progress (one chunk per window).
    let opts = StreamOptions {
        window_chunks: 100,
        window_bytes: 1,
    };
    assert!(decode_all(&trace, &dec, &opts).0 == reference);
}

/// The stream with lookahead emits the same events, and each event it shows ahead is the
/// one its CPU emits `LOOKAHEAD` events later (when shown at all), whether the calling
/// thread decodes every chunk (a pool of one thread) or decoders run on other threads.
#[test]
fn lookahead_shows_a_later_event_of_the_same_cpu() {
    let (t, n) = interleaved_chunks(ByteOrder::Little, 60);
    let (_d, trace) = open(t);
    let dec = Decoder::new(trace.header(), trace.metadata());
    let (reference, _) = decode_all(&trace, &dec, &StreamOptions::default());
    let with_pool = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let mut got: Vec<(Event, Option<Event>)> = Vec::new();
        pool.install(|| {
            crate::stream::for_each_event_ahead(&trace, &dec, &StreamOptions::default(), |e, a| {
                got.push((e.clone(), a.cloned()))
            })
        });
        got
    };
    for threads in [1, 2] {
        let got = with_pool(threads);
        assert_eq!(got.len(), n);
        assert!(got.iter().map(|g| &g.0).eq(reference.iter()));
        let mut shown = 0;
        for (i, (e, ahead)) in got.iter().enumerate() {
            let later = got[i + 1..]
                .iter()
                .filter(|g| g.0.cpu == e.cpu)
                .nth(crate::stream::LOOKAHEAD - 1)
                .map(|g| &g.0);
            if let Some(a) = ahead {
                shown += 1;
                assert_eq!(Some(a), later, "event {i}, {threads} thread(s)");
            }
        }
        // Shown for most events (not across the end of a decoded chunk).
        assert!(shown * 2 > n, "{shown} of {n}, {threads} thread(s)");
    }
}

#[test]
fn missing_field_degrades_to_other_and_is_reported() {
    let mut t = TraceBuilder::new(ByteOrder::Little, 1);
    let no_rwbs: String = fmt("block:block_bio_queue")
        .lines()
        .filter(|l| !l.contains("rwbs"))
        .map(|l| format!("{l}\n"))
        .collect();
    let q = t
        .add_event("block:block_bio_queue", &no_rwbs, false)
        .unwrap();
    t.sample(0, q, 1, 1, 1, &[], &[("dev", Val::U(1))]).unwrap();
    let (_d, trace) = open(t);
    let dec = Decoder::new(trace.header(), trace.metadata());
    assert_eq!(dec.problems().len(), 1);
    match &dec.problems()[0] {
        DecoderProblem::Field(FieldError::MissingField { event, field }) => {
            assert_eq!(
                (event.as_str(), field.as_str()),
                ("block:block_bio_queue", "rwbs")
            )
        }
        p => panic!("{p:?}"),
    }
    let msg = dec.problems()[0].to_string();
    assert!(
        msg.contains("block:block_bio_queue") && msg.contains("rwbs"),
        "{msg}"
    );
    assert!(!dec.is_typed(q));
    let (events, _) = decode_all(&trace, &dec, &StreamOptions::default());
    assert_eq!(events[0].kind, EventKind::Other { event: q });
    assert_eq!(dec.event_name(q), Some("block:block_bio_queue"));
}

#[test]
fn fields_are_found_by_name_when_they_move() {
    // Another kernel: fields reordered and resized, an extra field in front.
    let text = "name: block_rq_issue\nID: 77\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:u64 newthing;\toffset:8;\tsize:8;\tsigned:0;\n\
        \tfield:char rwbs[8];\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:sector_t sector;\toffset:24;\tsize:8;\tsigned:0;\n\
        \tfield:unsigned int bytes;\toffset:32;\tsize:4;\tsigned:0;\n\
        \tfield:dev_t dev;\toffset:36;\tsize:4;\tsigned:0;\n\
        \tfield:unsigned short nr_sector;\toffset:40;\tsize:2;\tsigned:0;\n\n\
        print fmt: \"whatever\"\n";
    for order in [ByteOrder::Little, ByteOrder::Big] {
        let mut t = TraceBuilder::new(order, 1);
        let e = t.add_event("block:block_rq_issue", text, false).unwrap();
        t.sample(
            0,
            e,
            9,
            3,
            4,
            &[],
            &[
                ("dev", Val::U(266338304)),
                ("sector", Val::U(33928)),
                ("nr_sector", Val::U(8)),
                ("bytes", Val::U(4096)),
                ("rwbs", Val::Str("WS")),
                ("newthing", Val::U(u64::MAX)),
            ],
        )
        .unwrap();
        let (_d, trace) = open(t);
        let dec = Decoder::new(trace.header(), trace.metadata());
        assert!(dec.problems().is_empty());
        let (ev, _) = decode_all(&trace, &dec, &StreamOptions::default());
        assert_eq!(
            ev[0].kind,
            EventKind::RqIssue {
                dev: 266338304,
                sector: 33928,
                nr_sector: 8,
                bytes: 4096,
                rwbs: Rwbs::parse("WS")
            }
        );
        assert_eq!((ev[0].pid, ev[0].tid, ev[0].stack.is_none()), (3, 4, true));
    }
}

#[test]
fn a_field_of_the_wrong_type_is_reported() {
    let text = fmt("block:block_dirty_buffer").replace(
        "field:size_t size;\toffset:24;\tsize:8;",
        "field:char size[8];\toffset:24;\tsize:8;",
    );
    let mut t = TraceBuilder::new(ByteOrder::Little, 1);
    t.add_event("block:block_dirty_buffer", &text, false)
        .unwrap();
    let (_d, trace) = open(t);
    let dec = Decoder::new(trace.header(), trace.metadata());
    let msg = dec.problems()[0].to_string();
    assert!(msg.contains("size") && msg.contains("integer"), "{msg}");
}

#[test]
fn unsupported_sample_type_is_reported_and_counted() {
    let mut t = TraceBuilder::new(ByteOrder::Little, 1);
    let st = crate::synth::CAPTURE_SAMPLE_TYPE | crate::record::SAMPLE_READ;
    let e = t
        .add_event_with("block:block_bio_queue", fmt("block:block_bio_queue"), st)
        .unwrap();
    // The encoder ignores READ; what matters is that the decoder refuses the layout.
    t.sample(0, e, 1, 1, 1, &[], &[]).unwrap();
    let (_d, trace) = open(t);
    let dec = Decoder::new(trace.header(), trace.metadata());
    assert!(
        dec.problems()[0]
            .to_string()
            .contains("unsupported bits 0x10"),
        "{}",
        dec.problems()[0]
    );
    let (ev, stats) = decode_all(&trace, &dec, &StreamOptions::default());
    assert!(ev.is_empty());
    assert_eq!(
        stats.decode.errors[SkipReason::UnsupportedSampleType as usize],
        1
    );
}

#[test]
fn garbage_records_are_counted_not_fatal() {
    let order = ByteOrder::Little;
    let mut t = TraceBuilder::new(order, 2);
    let q = t
        .add_event("block:block_bio_queue", fmt("block:block_bio_queue"), true)
        .unwrap();
    let x = t
        .add_event(
            "sched:sched_process_exec",
            fmt("sched:sched_process_exec"),
            false,
        )
        .unwrap();
    let good = |t: &mut TraceBuilder, time| {
        t.sample(0, q, time, 1, 1, &STACK, &[("rwbs", Val::Str("R"))])
            .unwrap();
    };
    good(&mut t, 1);
    // A sample whose identifier matches no event.
    let mut v = SampleValues {
        identifier: 999_999,
        time: 2,
        ..Default::default()
    };
    t.raw(
        0,
        &sample_record(crate::synth::CAPTURE_SAMPLE_TYPE, order, &v),
        Some(2),
    );
    // A sample cut short: header size says 16 bytes, body has the identifier only.
    let rec = t.sample_record(0, q, 3, 1, 1, &STACK, &[]).unwrap();
    let mut short = rec[..16].to_vec();
    short[6..8].copy_from_slice(&16u16.to_le_bytes());
    t.raw(0, &short, Some(3));
    // A callchain claiming 2^40 entries.
    let mut huge = rec.clone();
    huge[40..48].copy_from_slice(&(1u64 << 40).to_le_bytes());
    t.raw(0, &huge, Some(4));
    // An exec whose __data_loc points past the payload.
    let mut bad = t
        .sample_record(0, x, 5, 1, 1, &[], &[("filename", Val::Str("/bin/sh"))])
        .unwrap();
    let loc_at = 8 + 32 + 4 + 8; // header, identifier..cpu, raw size, then payload offset 8
    bad[loc_at..loc_at + 2].copy_from_slice(&0xfff0u16.to_le_bytes());
    t.raw(0, &bad, Some(5));
    // An unknown record type (PERF_RECORD_AUX = 11) is skipped, not an error.
    let mut other = vec![0u8; 24];
    other[..4].copy_from_slice(&11u32.to_le_bytes());
    other[6..8].copy_from_slice(&24u16.to_le_bytes());
    t.raw(0, &other, None);
    // A truncated COMM (header only).
    let mut comm = vec![0u8; 8];
    comm[..4].copy_from_slice(&3u32.to_le_bytes());
    comm[6..8].copy_from_slice(&8u16.to_le_bytes());
    t.raw(0, &comm, None);
    good(&mut t, 6);
    t.flush(0);
    t.sample(1, q, 7, 1, 1, &STACK, &[]).unwrap();
    v.identifier = t.metadata().events[0].ids[1];
    t.flush(1);
    let (ev, stats) = decode_built(t);
    assert_eq!(ev.iter().map(|e| e.time).collect::<Vec<_>>(), vec![1, 6, 7]);
    let e = &stats.decode.errors;
    assert_eq!(e[SkipReason::UnknownIdentifier as usize], 1);
    assert_eq!(e[SkipReason::Truncated as usize], 2);
    assert_eq!(e[SkipReason::CallchainTooLong as usize], 1);
    assert_eq!(e[SkipReason::FieldOutOfBounds as usize], 1);
    assert_eq!(stats.decode.other_records, 1);
    assert_eq!(stats.decode.records, 9);
    let reasons: Vec<_> = stats
        .decode
        .error_reasons()
        .map(|(r, _)| r.to_string())
        .collect();
    assert!(reasons.contains(&"unknown sample identifier".to_string()));
}

#[test]
fn random_bytes_never_panic() {
    let t = every_kind(ByteOrder::Little);
    let (_d, trace) = open(t);
    let dec = Decoder::new(trace.header(), trace.metadata());
    let good = trace.decompress(&trace.chunks()[0]).unwrap();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..400 {
        let mut data = good.data.clone();
        // Flip a few bytes, sometimes cut the end.
        for _ in 0..1 + round % 8 {
            let i = (rnd() as usize) % data.len();
            data[i] = rnd() as u8;
        }
        if round % 3 == 0 {
            let n = (rnd() as usize) % data.len();
            data.truncate(n);
        }
        let chunk = Chunk {
            header: ChunkHeader {
                records: 0,
                ..good.header
            },
            data,
        };
        let out = dec.decode_chunk(&chunk);
        assert!(out.stats.events() as usize == out.events.len());
    }
    // Pure noise.
    for _ in 0..200 {
        let n = (rnd() % 300) as usize;
        let data: Vec<u8> = (0..n).map(|_| rnd() as u8).collect();
        let chunk = Chunk {
            header: ChunkHeader::default(),
            data,
        };
        let _ = dec.decode_chunk(&chunk);
    }
}

#[test]
fn a_damaged_chunk_is_reported_and_skipped() {
    let (t, n) = interleaved(ByteOrder::Little);
    let dir = tempfile::tempdir().unwrap();
    let target_chunk = t.chunks()[5].header;
    let target_records = target_chunk.records as usize;
    t.write(dir.path()).unwrap();
    let path = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let trace = Trace::open(&path).unwrap();
    let off = trace.chunks()[5].offset as usize;
    drop(trace);
    // Corrupt the zstd frame of chunk 5 but keep its block checksum valid: rewrite the
    // payload's compressed bytes and fix the block CRC so only decompression fails.
    let mut bytes = std::fs::read(&path).unwrap();
    let payload_start = off + 24;
    let len = u32::from_le_bytes(bytes[off + 8..off + 12].try_into().unwrap()) as usize;
    for b in &mut bytes[payload_start + 64..payload_start + len] {
        *b ^= 0x5a;
    }
    let crc = crc32fast::hash(&bytes[payload_start..payload_start + len]);
    bytes[off + 12..off + 16].copy_from_slice(&crc.to_le_bytes());
    let mut hdr = bytes[off..off + 20].to_vec();
    let hcrc = crc32fast::hash(&hdr);
    hdr.extend_from_slice(&hcrc.to_le_bytes());
    bytes[off..off + 24].copy_from_slice(&hdr);
    std::fs::write(&path, &bytes).unwrap();
    let trace = Trace::open(&path).unwrap();
    let dec = Decoder::new(trace.header(), trace.metadata());
    let (ev, stats) = decode_all(
        &trace,
        &dec,
        &StreamOptions {
            window_chunks: 4,
            window_bytes: 1 << 20,
        },
    );
    assert_eq!(stats.damaged.len(), 1, "{:?}", stats.damaged);
    assert_eq!(
        (stats.damaged[0].cpu, stats.damaged[0].seq),
        (target_chunk.cpu, target_chunk.seq)
    );
    assert!(!stats.damaged[0].error.is_empty());
    assert_eq!(ev.len(), n - target_records);
    for w in ev.windows(2) {
        assert!((w[0].time, w[0].cpu) <= (w[1].time, w[1].cpu));
    }
}

#[test]
fn bdi_names() {
    use crate::event::parse_bdi;
    assert_eq!(parse_bdi(b"7:0"), 7 << 20);
    assert_eq!(parse_bdi(b"254:0"), 266338304);
    assert_eq!(parse_bdi(b"253:1"), 265289729);
    assert_eq!(parse_bdi(b"btrfs-1"), (0xfff << 20) | 1);
    assert_eq!(parse_bdi(b"btrfs-"), 0);
    assert_eq!(parse_bdi(b"-3"), 0);
    assert_eq!(parse_bdi(b"btrfs-x1"), 0);
    assert_eq!(parse_bdi(b"8:"), 0);
    assert_eq!(parse_bdi(b":1"), 0);
    assert_eq!(parse_bdi(b"99999999:1"), 0);
}

/// Real captures, when the capture helper has committed some under `fixtures/`: every
/// sample of a typed event decodes to its typed form.
#[test]
fn real_captured_traces_decode() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut found = Vec::new();
    let mut stack = vec![root];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "iob") {
                found.push(p);
            }
        }
    }
    for p in found {
        let trace = Trace::open(&p).unwrap();
        let dec = Decoder::new(trace.header(), trace.metadata());
        let (ev, stats) = decode_all(&trace, &dec, &StreamOptions::default());
        assert_eq!(
            stats.decode.error_count(),
            0,
            "{}: {:?}",
            p.display(),
            stats.decode
        );
        assert!(stats.damaged.is_empty(), "{}", p.display());
        for e in &ev {
            if let EventKind::Other { event } = e.kind {
                assert!(!dec.is_typed(event), "{}", p.display());
            }
        }
        for (i, &n) in stats.decode.per_event.iter().enumerate() {
            let name = dec.event_name(i as u16).unwrap();
            if n > 0 && crate::decoder::typed_event_names().any(|t| t == name) {
                assert!(
                    dec.is_typed(i as u16),
                    "{}: {name}: {:?}",
                    p.display(),
                    dec.problems()
                );
            }
        }
    }
}

/// A sample with user registers and a stack copy (`--user-stacks dwarf`) becomes an event
/// with its [`StackCopy`]: the registers the trace's architecture unwinds from, the bytes
/// the kernel copied; a kernel thread's sample (no registers) has none; the kernel stack is
/// kept as it is.
#[test]
fn stack_copies_come_with_their_registers() {
    for order in [ByteOrder::Little, ByteOrder::Big] {
        let mut t = TraceBuilder::new(order, 1);
        let q = t
            .add_event("block:block_bio_queue", fmt("block:block_bio_queue"), true)
            .unwrap();
        // x86's BP, SP and IP, in bit order.
        t.copy_user_stacks(q, 1 << 6 | 1 << 7 | 1 << 8, 64);
        let bytes: Vec<u8> = (0..40).collect();
        t.set_user_copy(vec![0x7ffd_0010, 0x7ffd_0000, 0x5555_1234], bytes.clone());
        t.sample(0, q, 1, 7, 7, &STACK, &[]).unwrap();
        t.set_user_copy(Vec::new(), Vec::new());
        t.sample(0, q, 2, 8, 8, &STACK, &[]).unwrap();
        let (ev, stats) = decode_built(t);
        assert_eq!(ev.len(), 2, "{:?}", stats.decode.errors);
        let c = ev[0].stack_copy.as_deref().unwrap();
        assert_eq!(
            (c.ip, c.sp, c.fp, c.lr),
            (0x5555_1234, 0x7ffd_0000, 0x7ffd_0010, 0)
        );
        assert_eq!(&c.bytes[..], &bytes[..]);
        assert_eq!(ev[0].stack.as_deref(), Some(&STACK[..]));
        assert!(ev[1].stack_copy.is_none(), "a kernel thread's sample");
    }
}

#[test]
fn long_callchains_and_user_frames() {
    let mut t = TraceBuilder::new(ByteOrder::Big, 1);
    let q = t
        .add_event("block:block_bio_queue", fmt("block:block_bio_queue"), true)
        .unwrap();
    let deep: Vec<u64> = (0..300).map(|i| 0xffffffff81000000 + i).collect();
    t.sample(0, q, 1, 1, 1, &deep, &[]).unwrap();
    t.sample(0, q, 2, 1, 1, &[], &[]).unwrap();
    let (ev, _) = decode_built(t);
    assert_eq!(ev[0].stack.as_deref(), Some(&deep[..]));
    assert_eq!(ev[1].stack.as_deref(), Some(&[][..]));
}

#[test]
fn events_with_the_same_stack_share_it() {
    let mut t = TraceBuilder::new(ByteOrder::Little, 1);
    let q = t
        .add_event("block:block_bio_queue", fmt("block:block_bio_queue"), true)
        .unwrap();
    let a: Vec<u64> = (0..20).map(|i| 0xffffffff81000000 + i).collect();
    let mut b = a.clone();
    b[19] += 1;
    for (i, st) in [&a, &b, &a, &b].into_iter().enumerate() {
        t.sample(0, q, 1 + i as u64, 1, 1, st, &[]).unwrap();
    }
    let (ev, _) = decode_built(t);
    let st: Vec<&std::sync::Arc<[u64]>> = ev.iter().map(|e| e.stack.as_ref().unwrap()).collect();
    assert_eq!((&st[0][..], &st[1][..]), (&a[..], &b[..]));
    assert!(std::sync::Arc::ptr_eq(st[0], st[2]));
    assert!(std::sync::Arc::ptr_eq(st[1], st[3]));
    assert!(!std::sync::Arc::ptr_eq(st[0], st[1]));
}

/// Two events interleaved, each repeating or changing its stack: every event gets its own
/// stack (the last stack of each event is reused only when the same), shared by all the
/// events that have it.
#[test]
fn interleaved_events_keep_their_own_stacks() {
    let mut t = TraceBuilder::new(ByteOrder::Little, 1);
    let q = t
        .add_event("block:block_bio_queue", fmt("block:block_bio_queue"), true)
        .unwrap();
    let w = t
        .add_event("block:block_rq_issue", fmt("block:block_rq_issue"), true)
        .unwrap();
    let a: Vec<u64> = (0..12).map(|i| 0xffffffff81000000 + i).collect();
    let mut b = a.clone();
    b[0] += 1;
    let c: Vec<u64> = a[..11].to_vec();
    let seq = [
        (q, &a),
        (q, &a),
        (w, &a),
        (q, &b),
        (w, &c),
        (q, &b),
        (w, &a),
        (q, &a),
    ];
    for (i, (e, st)) in seq.iter().enumerate() {
        t.sample(0, *e, 1 + i as u64, 1, 1, st, &[]).unwrap();
    }
    let (ev, _) = decode_built(t);
    assert_eq!(ev.len(), seq.len());
    for (i, (e, (_, st))) in ev.iter().zip(seq.iter()).enumerate() {
        assert_eq!(e.stack.as_deref(), Some(&st[..]), "event {i}");
    }
    for (i, x) in ev.iter().enumerate() {
        for (j, y) in ev.iter().enumerate() {
            let same = seq[i].1 == seq[j].1;
            let shared =
                std::sync::Arc::ptr_eq(x.stack.as_ref().unwrap(), y.stack.as_ref().unwrap());
            assert_eq!(same, shared, "events {i} and {j}");
        }
    }
}

#[test]
fn samples_without_identifier_are_told_apart_by_common_type() {
    use crate::record::{SAMPLE_CPU, SAMPLE_RAW, SAMPLE_TID, SAMPLE_TIME};
    let st = SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_RAW;
    for order in [ByteOrder::Little, ByteOrder::Big] {
        let mut t = TraceBuilder::new(order, 1);
        let a = t
            .add_event_with(
                "block:block_dirty_buffer",
                fmt("block:block_dirty_buffer"),
                st,
            )
            .unwrap();
        let b = t
            .add_event_with(
                "jbd2:jbd2_submit_inode_data",
                fmt("jbd2:jbd2_submit_inode_data"),
                st,
            )
            .unwrap();
        t.sample(0, a, 1, 5, 6, &[], &[("size", Val::U(4096))])
            .unwrap();
        t.sample(0, b, 2, 5, 6, &[], &[("ino", Val::U(12))])
            .unwrap();
        t.comm(0, 3, 5, 6, "x", false);
        let (_d, trace) = open(t);
        let dec = Decoder::new(trace.header(), trace.metadata());
        assert!(dec.problems().is_empty(), "{:?}", dec.problems());
        let (ev, stats) = decode_all(&trace, &dec, &StreamOptions::default());
        assert_eq!(stats.decode.error_count(), 0);
        assert_eq!(
            ev[0].kind,
            EventKind::DirtyBuffer {
                dev: 0,
                blocknr: 0,
                size: 4096
            }
        );
        assert_eq!(
            ev[1].kind,
            EventKind::Jbd2SubmitInodeData { dev: 0, ino: 12 }
        );
        assert_eq!((ev[2].time, ev[2].pid, ev[2].tid), (3, 5, 6));
    }
}

#[test]
fn task_record_trailers_follow_their_event_when_sample_types_differ() {
    use crate::record::{
        SAMPLE_CPU, SAMPLE_ID, SAMPLE_IDENTIFIER, SAMPLE_RAW, SAMPLE_TID, SAMPLE_TIME,
    };
    let mut t = TraceBuilder::new(ByteOrder::Little, 1);
    // The task-record event has a longer trailer (ID) than the other event.
    let st_task =
        SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_TIME | SAMPLE_ID | SAMPLE_CPU | SAMPLE_RAW;
    let st_other = SAMPLE_IDENTIFIER | SAMPLE_TIME | SAMPLE_RAW;
    t.add_event_with(
        "sched:sched_process_exec",
        fmt("sched:sched_process_exec"),
        st_task,
    )
    .unwrap();
    let o = t
        .add_event_with("block:block_getrq", fmt("block:block_getrq"), st_other)
        .unwrap();
    t.comm(0, 40, 7, 8, "bash", false);
    t.sample(0, o, 41, 0, 9, &[], &[("nr_sector", Val::U(8))])
        .unwrap();
    let (ev, stats) = decode_built(t);
    assert_eq!(stats.decode.error_count(), 0);
    assert_eq!(
        ev[0].kind,
        EventKind::Comm {
            pid: 7,
            tid: 8,
            comm: "bash".into(),
            exec: false
        }
    );
    assert_eq!(ev[0].time, 40);
    // No TID in the sample: pid and tid come from the payload's common_pid.
    assert_eq!((ev[1].time, ev[1].pid, ev[1].tid), (41, 9, 9));
    assert!(matches!(ev[1].kind, EventKind::GetRq { nr_sector: 8, .. }));
}

#[test]
fn events_without_a_bundled_format_decode_too() {
    let renamed = |from: &str, old: &str, new: &str| fmt(from).replacen(old, new, 1);
    let fault = "name: mm_filemap_fault\nID: 500\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:unsigned long i_ino;\toffset:8;\tsize:8;\tsigned:0;\n\
        \tfield:dev_t s_dev;\toffset:16;\tsize:4;\tsigned:0;\n\
        \tfield:unsigned long index;\toffset:24;\tsize:8;\tsigned:0;\n\n\
        print fmt: \"x\"\n";
    let mut t = TraceBuilder::new(ByteOrder::Little, 1);
    let a = t
        .add_event(
            "writeback:writeback_dirty_page",
            &renamed(
                "writeback:writeback_dirty_folio",
                "writeback_dirty_folio",
                "writeback_dirty_page",
            ),
            false,
        )
        .unwrap();
    let b = t
        .add_event(
            "ext4:ext4_ind_map_blocks_exit",
            &renamed(
                "ext4:ext4_ext_map_blocks_exit",
                "ext4_ext_map_blocks_exit",
                "ext4_ind_map_blocks_exit",
            ),
            false,
        )
        .unwrap();
    let c = t
        .add_event("filemap:mm_filemap_fault", fault, false)
        .unwrap();
    t.sample(
        0,
        a,
        1,
        1,
        1,
        &[],
        &[
            ("name", Val::Str("254:0")),
            ("ino", Val::U(5)),
            ("index", Val::U(6)),
        ],
    )
    .unwrap();
    t.sample(
        0,
        b,
        2,
        1,
        1,
        &[],
        &[
            ("pblk", Val::U(9)),
            ("lblk", Val::U(3)),
            ("len", Val::U(2)),
            ("ret", Val::I(2)),
        ],
    )
    .unwrap();
    t.sample(
        0,
        c,
        3,
        1,
        1,
        &[],
        &[
            ("i_ino", Val::U(5)),
            ("s_dev", Val::U(7 << 20)),
            ("index", Val::U(4)),
        ],
    )
    .unwrap();
    let (_d, trace) = open(t);
    let dec = Decoder::new(trace.header(), trace.metadata());
    assert!(dec.problems().is_empty(), "{:?}", dec.problems());
    let (ev, _) = decode_all(&trace, &dec, &StreamOptions::default());
    assert_eq!(
        ev[0].kind,
        EventKind::DirtyFolio {
            bdi: 266338304,
            ino: 5,
            index: 6
        }
    );
    assert_eq!(
        ev[1].kind,
        EventKind::Ext4MapBlocks {
            dev: 0,
            ino: 0,
            flags: 0,
            pblk: 9,
            lblk: 3,
            len: 2,
            mflags: 0,
            ret: 2
        }
    );
    assert_eq!(
        ev[2].kind,
        EventKind::FilemapFault {
            s_dev: 7 << 20,
            ino: 5,
            index: 4
        }
    );
}

/// The values of `__print_flags` symbols, where the kernel wrote numbers (before the inode
/// state bits became enum constants) and not where it left names (6.18).
#[test]
fn print_flag_values_from_the_format() {
    use crate::format::{print_symbol_value, EventFormat};
    let f = EventFormat::parse(fmt("writeback:writeback_mark_inode_dirty")).unwrap();
    assert_eq!(
        f.print_symbol_value("I_DIRTY_SYNC"),
        None,
        "6.18: names only"
    );
    assert_eq!(f.print_symbol_value("NO_SUCH_FLAG"), None);
    // As a 5.x kernel writes them (`#define I_DIRTY_SYNC (1 << 0)`).
    let old = f
        .print_fmt
        .replace("{I_DIRTY_SYNC,", "{(1 << 0),")
        .replace("{I_DIRTY_DATASYNC,", "{((1UL << 1)),");
    let old = old.replace("{I_DIRTY_PAGES,", "{ (unsigned long)(1 << 2) ,");
    assert_eq!(print_symbol_value(&old, "I_DIRTY_SYNC"), Some(1));
    assert_eq!(print_symbol_value(&old, "I_DIRTY_DATASYNC"), Some(2));
    assert_eq!(print_symbol_value(&old, "I_DIRTY_PAGES"), Some(4));
    for (fmt, v) in [
        ("{0x20, \"A\"}", Some(0x20)),
        ("{16, \"A\"}", Some(16)),
        ("{(1 << 4) | (1 << 5), \"A\"}", Some(0x30)),
        ("{I_X | (1 << 5), \"A\"}", None),
        ("{(1 << 99), \"A\"}", None),
        ("{1 <<, \"A\"}", None),
        ("{(1, \"A\"}", None),
        ("\"A\"", None),
        ("{1, \"AB\"}", None),
        ("x, \"A\"}", None),
    ] {
        assert_eq!(print_symbol_value(fmt, "A"), v, "{fmt}");
    }
}

/// A tracepoint's `char rwbs[8]` ends at its NUL: the ring buffer does not clear the bytes
/// after it, so what follows (here an older record's `M`) is no flag.
#[test]
fn rwbs_stops_at_its_nul() {
    assert_eq!(Rwbs::parse_bytes(b"WS\0M\0\0\0\0"), Rwbs::parse("WS"));
    assert_eq!(Rwbs::parse_bytes(b"FWFSM\0\0\0"), Rwbs::parse("FWFSM"));
    assert_eq!(Rwbs::parse_bytes(b"RA"), Rwbs(Rwbs::READ | Rwbs::AHEAD));
    assert_eq!(Rwbs::parse_bytes(b"\0WS"), Rwbs(0));
}

/// `--stacks sampled:N`: a stack sample's callchain goes to the sample of the same hit
/// (before or after it, its time a little apart) and the stack sample itself is no event.
#[test]
fn stack_samples_give_their_stack_to_the_same_hit() {
    let mut t = TraceBuilder::new(ByteOrder::native(), 1);
    let name = "writeback:writeback_dirty_folio";
    let plain = t.add_event(name, fmt(name), false).unwrap();
    let sampled = t.add_event(name, fmt(name), true).unwrap();
    t.metadata_mut().events[sampled as usize].flags |= ioblame_format::EVENT_STACK_SAMPLE;
    let folio = |index: u64| {
        vec![
            ("name", Val::Str("7:0")),
            ("ino", Val::U(12)),
            ("index", Val::U(index)),
        ]
    };
    let base = t.header().start_clock_ns + 1000;
    // Hit 1: the plain sample, then its stack sample 300 ns later.
    t.sample(0, plain, base, 5, 5, &[], &folio(0)).unwrap();
    t.sample(0, sampled, base + 300, 5, 5, &[0xa1, 0xa2], &folio(0))
        .unwrap();
    // Hit 2: no stack sample.
    t.sample(0, plain, base + 1000, 5, 5, &[], &folio(1))
        .unwrap();
    // Hit 3: the stack sample first.
    t.sample(0, sampled, base + 2000, 5, 5, &[0xb1, 0xb2], &folio(2))
        .unwrap();
    t.sample(0, plain, base + 2200, 5, 5, &[], &folio(2))
        .unwrap();
    assert!(crate::stacks_sampled(t.metadata()));
    let (evs, _) = decode_built(t);
    let stacks: Vec<_> = evs
        .iter()
        .filter(|e| matches!(e.kind, EventKind::DirtyFolio { .. }))
        .map(|e| e.stack.as_deref().map(<[u64]>::to_vec))
        .collect();
    assert_eq!(
        stacks,
        [Some(vec![0xa1, 0xa2]), None, Some(vec![0xb1, 0xb2])],
        "{evs:?}"
    );
}

/// The buffers' stacks are derived when they have none while other stack events have theirs
/// (`--stacks exact`), not when nothing has a stack (`--stacks none`) or everything has
/// (`--stacks all`).
#[test]
fn buffer_stacks_are_derived_in_the_exact_mode_only() {
    let meta = |buffer: bool, folio: bool| {
        let mut t = TraceBuilder::new(ByteOrder::native(), 1);
        for (name, cc) in [
            ("block:block_dirty_buffer", buffer),
            ("writeback:writeback_dirty_folio", folio),
        ] {
            t.add_event(name, fmt(name), cc).unwrap();
        }
        t.metadata().clone()
    };
    assert!(crate::buffer_stacks_derived(&meta(false, true)));
    assert!(!crate::buffer_stacks_derived(&meta(false, false)));
    assert!(!crate::buffer_stacks_derived(&meta(true, true)));
    assert!(!crate::stacks_sampled(&meta(false, true)));
}

/// Writeback reasons are ioblame's numbers, translated by name from the trace's own print
/// fmt where the kernel numbers them otherwise (RHEL 8's 4.18: `free_more_mem` at 5).
#[test]
fn writeback_reasons_follow_the_print_fmt() {
    use crate::decoder::wb_reasons;
    // 5.10 (no foreign_flush yet) and 6.18: the same numbers, nothing to translate.
    let v5_10 = r#""bdi %s: reason=%s", REC->name, __print_symbolic(REC->reason, { 0, "background" }, { 1, "vmscan" }, { 2, "sync" }, { 3, "periodic" }, { 4, "laptop_timer" }, { 5, "fs_free_space" }, { 6, "forker_thread" }), (unsigned long)REC->cgroup_ino"#;
    assert_eq!(wb_reasons(v5_10), None);
    let v6_18 = r#""reason=%s", __print_symbolic(REC->reason, { 0, "background" }, { 1, "vmscan" }, { 2, "sync" }, { 3, "periodic" }, { 4, "laptop_timer" }, { 5, "fs_free_space" }, { 6, "forker_thread" }, { 7, "foreign_flush" })"#;
    assert_eq!(wb_reasons(v6_18), None);
    // 4.18 (include/trace/events/writeback.h of RHEL 8's kernel: WB_WORK_REASON).
    let v4_18 = r#""bdi %s: sb_dev %d:%d reason=%s", REC->name, ((unsigned int) ((REC->sb_dev) >> 20)), ((unsigned int) ((REC->sb_dev) & ((1U << 20) - 1))), __print_symbolic(REC->reason, { 0, "background" }, { 1, "vmscan" }, { 2, "sync" }, { 3, "periodic" }, { 4, "laptop_timer" }, { 5, "free_more_mem" }, { 6, "fs_free_space" }, { 7, "forker_thread" })"#;
    let t = wb_reasons(v4_18).expect("4.18 numbers differ");
    let names: Vec<&str> = t
        .iter()
        .map(|&i| WB_REASON_NAMES.get(i as usize).copied().unwrap_or("other"))
        .collect();
    assert_eq!(
        names,
        [
            "background",
            "vmscan",
            "sync",
            "periodic",
            "laptop_timer",
            "free_more_mem",
            "fs_free_space",
            "forker_thread"
        ]
    );
    // A name ioblame does not know is "other"; no symbolic table: nothing.
    let t = wb_reasons(r#"__print_symbolic(REC->reason, { 0, "background" }, { 1, "shiny_new" })"#)
        .unwrap();
    assert_eq!(&t[..], &[0, WB_REASON_OTHER]);
    assert_eq!(wb_reasons(r#""reason=%d", REC->reason"#), None);
}
