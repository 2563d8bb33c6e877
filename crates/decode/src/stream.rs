//! Streaming decode of a whole trace: chunks are decompressed and decoded in parallel
//! (rayon tasks), at most a window ahead of the merge, and the per-CPU streams are merged
//! into one time order on the calling thread.
//!
//! The chunks are decoded in the order the merge needs them, and the merge takes each one
//! as soon as it is decoded (see `pipe.rs`): no batch boundary makes either side wait for
//! the other's slowest chunk. A chunk no decoder has started when the merge needs it is
//! decoded by the merging thread itself, so a pool of one thread works the same way.
//!
//! The merge is a k-way merge of the per-CPU record streams keyed by `(time, cpu)` (ties on
//! one CPU keep record order). A CPU whose next events are not decoded yet stands in the
//! merge with a lower bound of its next chunk's first event time (from the chunk headers),
//! so the merge never emits past data it has not seen. The output is the same whatever the
//! number of threads or the window size, and equals a full k-way merge of the streams.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ioblame_format::Trace;

use crate::decoder::{DecodeStats, DecodedChunk, Decoder};
use crate::event::Event;
use crate::pipe::Pipe;

/// How far the decoders may work ahead of the merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamOptions {
    /// Most chunks decoded (or being decoded) and not yet taken by the merge (at least 1).
    pub window_chunks: usize,
    /// Most uncompressed bytes of those chunks (the chunk the merge needs next is decoded
    /// whatever its size).
    pub window_bytes: u64,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            // Measured with the analyzer benchmark (2 cores): with the merging thread
            // decoding ahead when it would wait, 8 to 64 chunks ran alike on real and
            // generated traces; each 8 chunks more held about 6 MB more (a real trace's
            // chunk decodes to about 600 KB of events).
            window_chunks: 16,
            window_bytes: 64 << 20,
        }
    }
}

/// A chunk that could not be read, reported and skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedChunk {
    /// CPU of the chunk.
    pub cpu: u32,
    /// Its sequence number.
    pub seq: u64,
    /// The reader's error.
    pub error: String,
}

/// What a streaming decode did.
#[derive(Debug, Clone, Default)]
pub struct StreamStats {
    /// Chunks in the trace.
    pub chunks: u64,
    /// Uncompressed bytes of the chunks read.
    pub bytes: u64,
    /// Chunks that could not be read (skipped).
    pub damaged: Vec<DamagedChunk>,
    /// Record and event counts, errors by reason (summed over chunks).
    pub decode: DecodeStats,
    /// Events emitted.
    pub events: u64,
    /// Events emitted with a time earlier than the one before (a CPU's own records out of
    /// order; the merge keeps each CPU's record order).
    pub out_of_order: u64,
    /// Time spent decompressing, summed over threads.
    pub decompress_time: Duration,
    /// Time spent decoding records to events, summed over threads.
    pub decode_time: Duration,
    /// Time spent merging on the calling thread (the callback included).
    pub merge_time: Duration,
    /// Wall-clock time of the whole stream.
    pub wall_time: Duration,
}

impl StreamStats {
    /// Event counts by kind name: trace events by `subsystem:name`, then the task and loss
    /// records. Zero counts omitted.
    pub fn counts_by_kind(&self, decoder: &Decoder) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self
            .decode
            .per_event
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| (decoder.event_name(i as u16).unwrap_or("?").to_string(), n))
            .collect();
        for (name, n) in [
            ("COMM", self.decode.comm),
            ("FORK", self.decode.fork),
            ("EXIT", self.decode.exit),
            ("LOST", self.decode.lost_records),
        ] {
            if n > 0 {
                v.push((name.to_string(), n));
            }
        }
        v
    }
}

struct Decoded {
    chunk: usize,
    result: Result<DecodedChunk, String>,
    bytes: u64,
    decompress: Duration,
    decode: Duration,
}

struct CpuStream {
    cpu: u32,
    /// Indices into `trace.chunks()`, in sequence order.
    chunks: Vec<usize>,
    /// Next chunk whose events are not yet in `pending`.
    integrated: usize,
    /// Decoded events not yet emitted, one run per decoded chunk (never an empty one): the
    /// merge reads them in place and hands the vectors it is done with back for the next
    /// chunks.
    pending: VecDeque<Run>,
}

/// A decoded chunk's events and the next one to emit.
struct Run {
    events: Vec<Event>,
    next: usize,
}

impl CpuStream {
    /// The next event to emit.
    fn front(&self) -> Option<&Event> {
        let r = self.pending.front()?;
        r.events.get(r.next)
    }

    /// Queues a decoded chunk's events (an empty vector goes to `emptied`).
    fn push(&mut self, events: Vec<Event>, emptied: &mut Vec<Vec<Event>>) {
        if events.is_empty() {
            emptied.push(events);
        } else {
            self.pending.push_back(Run { events, next: 0 });
        }
    }
}

/// Keeps a vector the merge is done with for a later chunk, up to `most` of them: decoding
/// into memory already mapped and warm in cache is much cheaper than into a fresh
/// allocation. Its events are dropped by the decoder that reuses it
/// ([`Decoder::decode_chunk_into`] clears it), not here: the merging thread sets the pace,
/// and releasing each event's stack there (its count last written by the decoder's core)
/// was 4% of its samples. (A vector beyond `most`, and those left at the end, are dropped
/// here, events and all.)
fn recycle(events: Vec<Event>, spare: &mut Vec<Vec<Event>>, most: usize) {
    if spare.len() < most && events.capacity() > 0 {
        spare.push(events);
    }
}

/// Head of a CPU in the merge: `(time, cpu index, virtual)`. A virtual head stands for the
/// first record of a chunk not decoded yet.
type Head = Reverse<(u64, u32, bool)>;

/// How many threads [`for_each_event_ahead`] decodes on besides the calling one: one less
/// than the current rayon pool has, so that the decoders and the calling thread, which
/// merges, together use as many cores as the pool (called from outside the pool, the
/// calling thread is one more: with decoders on every worker, the merging thread, which
/// sets the pace, lost 9% of its time to them on 2 cores). With none, the calling thread
/// decodes every chunk itself, between the events it hands on.
fn decoding_helpers() -> usize {
    rayon::current_num_threads().saturating_sub(1)
}

/// Decodes every chunk of `trace` and calls `f` with each event in time order.
///
/// Events are lent to `f`, not given: the decoded chunks' vectors are reused for the chunks
/// decoded after them.
pub fn for_each_event<F: FnMut(&Event)>(
    trace: &Trace,
    decoder: &Decoder,
    opts: &StreamOptions,
    mut f: F,
) -> StreamStats {
    for_each_event_ahead(trace, decoder, opts, |ev, _| f(ev))
}

/// How far ahead [`for_each_event_ahead`] shows an event.
pub const LOOKAHEAD: usize = 8;

/// [`for_each_event`], also showing `f` an event that comes [`LOOKAHEAD`] records later on
/// the same CPU when it is decoded already: a consumer can start fetching the state that
/// event will need (see `Attributor::prefetch` in ioblame-attrib). The events `f` is
/// called with, and their order, are the same.
///
/// Whatever the number of threads: the consumer's state outgrows the merging core's cache
/// on real traces (a random writer's dirty pages), and fetching it early paid 3-12% with
/// 2 threads on eight real 1 M-event recordings (interleaved runs of the analyzer
/// benchmark), and 7% with 1 thread on 50 M generated events.
pub fn for_each_event_ahead<F: FnMut(&Event, Option<&Event>)>(
    trace: &Trace,
    decoder: &Decoder,
    opts: &StreamOptions,
    mut f: F,
) -> StreamStats {
    let start = Instant::now();
    let all = trace.chunks();
    let mut stats = StreamStats {
        chunks: all.len() as u64,
        decode: DecodeStats {
            per_event: vec![0; decoder.event_count()],
            ..Default::default()
        },
        ..Default::default()
    };

    // Per-CPU chunk lists in sequence order (then file order for duplicates).
    let mut cpus: Vec<CpuStream> = Vec::new();
    {
        let mut order: Vec<usize> = (0..all.len()).collect();
        order.sort_by_key(|&i| {
            (
                all[i].header.cpu,
                all[i].header.seq,
                all[i].file,
                all[i].offset,
            )
        });
        for i in order {
            let cpu = all[i].header.cpu;
            match cpus.last_mut() {
                Some(s) if s.cpu == cpu => s.chunks.push(i),
                _ => cpus.push(CpuStream {
                    cpu,
                    chunks: vec![i],
                    integrated: 0,
                    pending: VecDeque::new(),
                }),
            }
        }
    }
    let chunk_cpu: Vec<u32> = {
        let mut v = vec![0u32; all.len()];
        for (k, s) in cpus.iter().enumerate() {
            for &c in &s.chunks {
                v[c] = k as u32;
            }
        }
        v
    };

    // Event vectors the merge is done with, cleared and refilled by the decoders. At most
    // `window_chunks` chunks are decoded ahead of the merge, so twice that many vectors keep
    // the decoders supplied without holding on to more memory than the merge itself needed
    // (besides what their old events still hold until then: stacks, shared with newer
    // events, and the odd command name).
    let spare: Mutex<Vec<Vec<Event>>> = Mutex::new(Vec::new());
    let spare_max = 2 * opts.window_chunks.max(1);
    // Decompression buffers, one per chunk being decoded at once.
    let spare_raw: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
    let decode_one = |ci: usize| -> Decoded {
        let t0 = Instant::now();
        let raw = spare_raw
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default();
        let c = trace.decompress_into(&all[ci], raw);
        let t1 = Instant::now();
        let (result, bytes) = match c {
            Ok(chunk) => {
                let n = chunk.data.len() as u64;
                let events = spare
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .pop()
                    .unwrap_or_default();
                let decoded = decoder.decode_chunk_into(&chunk, events);
                let mut raw = spare_raw.lock().unwrap_or_else(|e| e.into_inner());
                if raw.len() < spare_max {
                    raw.push(chunk.data);
                }
                (Ok(decoded), n)
            }
            Err(e) => (Err(e.to_string()), 0),
        };
        Decoded {
            chunk: ci,
            result,
            bytes,
            decompress: t1 - t0,
            decode: t1.elapsed(),
        }
    };

    // The order in which the merge needs the chunks: by the lower bound of each CPU's next
    // chunk (then CPU), each CPU in sequence order. Decoders take chunks in this order, at
    // most a window ahead of the merge, and the merge integrates them in this order: it
    // never waits for a chunk it does not need next.
    let order = need_order(&cpus, trace);
    let workers = decoding_helpers();
    let pipe: Pipe<Decoded> = Pipe::new(
        order
            .iter()
            .map(|&c| all[c].header.uncompressed_len as u64)
            .collect(),
        opts.window_chunks,
        opts.window_bytes,
    );
    let decode_at = |i: usize| decode_one(order[i]);

    let mut last_time = 0u64;
    // Vectors the merge emptied, handed to the decoders after each chunk.
    let mut emptied: Vec<Vec<Event>> = Vec::new();
    rayon::in_place_scope(|scope| {
        // One round per chunk, and one more: after the last chunk, what is left is emitted
        // (an empty trace included).
        for j in 0..=pipe.len() {
            if j < pipe.len() {
                // Keep the decoders busy up to a window ahead.
                while pipe.wants_helper(workers) {
                    let (p, d) = (&pipe, &decode_at);
                    scope.spawn(move |_| p.help(d));
                }
                let d = pipe.take(j, decode_at);
                if !emptied.is_empty() {
                    let mut v = spare.lock().unwrap_or_else(|e| e.into_inner());
                    for e in emptied.drain(..) {
                        recycle(e, &mut v, spare_max);
                    }
                }
                // Per CPU, chunks arrive in sequence order.
                let k = chunk_cpu[d.chunk] as usize;
                let s = &mut cpus[k];
                debug_assert_eq!(s.chunks.get(s.integrated), Some(&d.chunk));
                s.integrated += 1;
                stats.bytes += d.bytes;
                stats.decompress_time += d.decompress;
                stats.decode_time += d.decode;
                match d.result {
                    Ok(dc) => {
                        stats.decode.merge(&dc.stats);
                        s.push(dc.events, &mut emptied);
                    }
                    Err(error) => stats.damaged.push(DamagedChunk {
                        cpu: all[d.chunk].header.cpu,
                        seq: all[d.chunk].header.seq,
                        error,
                    }),
                }
            }
            let t = Instant::now();
            merge(
                &mut cpus,
                trace,
                &mut f,
                &mut emptied,
                &mut stats.events,
                &mut stats.out_of_order,
                &mut last_time,
            );
            stats.merge_time += t.elapsed();
        }
    });
    stats.wall_time = start.elapsed();
    stats
}

/// Every chunk of `cpus`, in the order the merge needs them: by the lower bound of each
/// CPU's next chunk's first event (then CPU), each CPU in sequence order.
fn need_order(cpus: &[CpuStream], trace: &Trace) -> Vec<usize> {
    let mut heap: BinaryHeap<Reverse<(u64, u32, usize, usize)>> = cpus
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.chunks.is_empty())
        .map(|(k, s)| Reverse((chunk_key(s, 0, trace), s.cpu, k, 0)))
        .collect();
    let mut order = Vec::with_capacity(trace.chunks().len());
    while let Some(Reverse((_, cpu, k, i))) = heap.pop() {
        let s = &cpus[k];
        order.push(s.chunks[i]);
        if i + 1 < s.chunks.len() {
            heap.push(Reverse((chunk_key(s, i + 1, trace), cpu, k, i + 1)));
        }
    }
    order
}

fn head(s: &CpuStream, k: usize, trace: &Trace) -> Option<Head> {
    if let Some(e) = s.front() {
        return Some(Reverse((e.time, k as u32, false)));
    }
    s.chunks.get(s.integrated)?;
    Some(Reverse((chunk_key(s, s.integrated, trace), k as u32, true)))
}

/// A lower bound of the time of the first event of chunk `i` of a CPU stream, known before
/// decoding it: its `first_ts` (the time of its first record), but no more than the previous
/// chunk's `last_ts` (a record at time 0 does not set `first_ts`), and 0 for a CPU's first
/// chunk. The merge treats it as the CPU's head, so it must not exceed the real one.
fn chunk_key(s: &CpuStream, i: usize, trace: &Trace) -> u64 {
    let all = trace.chunks();
    match i.checked_sub(1) {
        Some(p) => all[s.chunks[i]]
            .header
            .first_ts
            .min(all[s.chunks[p]].header.last_ts),
        None => 0,
    }
}

/// Emits events while the smallest head is a decoded one. CPU streams are indexed by their
/// position in `cpus`, which is sorted by CPU number, so `(time, index)` orders like
/// `(time, cpu)`.
fn merge<F: FnMut(&Event, Option<&Event>)>(
    cpus: &mut [CpuStream],
    trace: &Trace,
    f: &mut F,
    emptied: &mut Vec<Vec<Event>>,
    emitted: &mut u64,
    out_of_order: &mut u64,
    last_time: &mut u64,
) {
    let mut heap: BinaryHeap<Head> = cpus
        .iter()
        .enumerate()
        .filter_map(|(k, s)| head(s, k, trace))
        .collect();
    while let Some(Reverse((_, k, virt))) = heap.pop() {
        if virt {
            // The next events of this CPU are not decoded yet.
            return;
        }
        let limit = heap.peek().map(|Reverse((t, k, _))| (*t, *k));
        let s = &mut cpus[k as usize];
        while let Some(run) = s.pending.front_mut() {
            let ev = &run.events[run.next];
            if ev.time < *last_time {
                *out_of_order += 1;
            }
            *last_time = ev.time;
            *emitted += 1;
            f(ev, run.events.get(run.next + LOOKAHEAD));
            run.next += 1;
            if run.next == run.events.len() {
                if let Some(done) = s.pending.pop_front() {
                    emptied.push(done.events);
                }
            }
            match (s.front(), limit) {
                (Some(next), Some(l)) if (next.time, k) < l => continue,
                (Some(_), None) => continue,
                _ => break,
            }
        }
        if let Some(h) = head(s, k as usize, trace) {
            heap.push(h);
        }
    }
}

/// Decodes a whole trace into a vector of time-ordered events (for tests and small traces).
pub fn decode_all(
    trace: &Trace,
    decoder: &Decoder,
    opts: &StreamOptions,
) -> (Vec<Event>, StreamStats) {
    let mut v = Vec::new();
    let stats = for_each_event(trace, decoder, opts, |e| v.push(e.clone()));
    (v, stats)
}
