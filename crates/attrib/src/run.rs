//! The decode-then-attribute loop over a whole trace: the one place where decoded events
//! meet the [`Attributor`]. The analyzer (through `ioblame-pipeline`), the benchmark and the
//! tests all run it; see `docs/architecture.md` for the flow.

use ioblame_decode::{for_each_event_ahead, Decoder, Event, StreamOptions, StreamStats};
use ioblame_format::Trace;

use crate::attributor::{Attribution, Attributor};
use crate::context::Context;
use crate::dirtied::Dirtied;
use crate::model::{Io, Tables};

/// How many events pass between two calls of [`attribute_stream`]'s progress observer.
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// How far a run has got, shown to its progress observer every [`PROGRESS_EVERY`] events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Events pushed so far, this one included.
    pub events: u64,
    /// The time of the latest event (ns, the trace's clock).
    pub time: u64,
}

/// What [`attribute_stream`] produced, besides the IOs it handed out.
#[derive(Debug)]
pub struct Run {
    /// The attribution's tables and summary; its `ios` are the ones the end of the trace
    /// left pending (handed out already, last).
    pub attribution: Attribution,
    /// What reading the trace met: damaged chunks, records skipped, event counts.
    pub stream: StreamStats,
}

/// Decodes `trace` with `decoder` and attributes its events with `ctx`, in time order, each
/// prefetched a few events ahead ([`Attributor::prefetch`]). Every charged IO goes to `on_io`
/// as it is charged, with the tables as they are at that point; then, with the final tables,
/// those the end of the trace left pending. `progress` is called every [`PROGRESS_EVERY`]
/// events.
///
/// The loop runs on the stream's merging thread, which sets the analyzer's pace: both
/// callbacks are generic (no dynamic dispatch per event), and `on_io` runs only when the
/// event charged some IO.
pub fn attribute_stream(
    trace: &Trace,
    decoder: &Decoder,
    ctx: Context,
    on_io: impl FnMut(&Io, &Tables),
    progress: impl FnMut(Progress),
) -> Run {
    let mut l = Loop::new(ctx, on_io, progress, None::<NoDirtied>);
    let stream = for_each_event_ahead(trace, decoder, &StreamOptions::default(), |ev, ahead| {
        l.event(ev, ahead)
    });
    Run {
        attribution: l.finish(),
        stream,
    }
}

/// [`attribute_stream`], also showing `on_event` every event, in time order, before the
/// attribution takes it (`ioblame latency` computes btt's intervals from them while the
/// attribution charges the IOs).
pub fn attribute_stream_observed(
    trace: &Trace,
    decoder: &Decoder,
    ctx: Context,
    on_event: impl FnMut(&Event),
    on_io: impl FnMut(&Io, &Tables),
    progress: impl FnMut(Progress),
) -> Run {
    attribute_stream_logged(
        trace,
        decoder,
        ctx,
        on_event,
        on_io,
        None::<NoDirtied>,
        progress,
    )
}

/// Events between two hand-outs of what was dirtied when no IO was charged meanwhile.
const DIRTIED_EVERY: u64 = 4096;

/// The type of an absent dirtied observer.
type NoDirtied = fn(&Dirtied, &Tables);

/// [`attribute_stream_observed`], also showing `on_dirtied`, when given, what each role
/// dirtied ([`Attributor::log_dirtied`]), in time order but for a folio's record, which waits
/// [`ioblame_decode::BUFFER_FOLIO_MAX_GAP_NS`] for the buffers that may replace it, with the
/// tables as they are then (`ioblame timeline` draws the dirtying from them).
pub fn attribute_stream_logged<D: FnMut(&Dirtied, &Tables)>(
    trace: &Trace,
    decoder: &Decoder,
    ctx: Context,
    mut on_event: impl FnMut(&Event),
    on_io: impl FnMut(&Io, &Tables),
    on_dirtied: Option<D>,
    progress: impl FnMut(Progress),
) -> Run {
    let mut l = Loop::new(ctx, on_io, progress, on_dirtied);
    let stream = for_each_event_ahead(trace, decoder, &StreamOptions::default(), |ev, ahead| {
        on_event(ev);
        l.event(ev, ahead)
    });
    Run {
        attribution: l.finish(),
        stream,
    }
}

/// A source of typed events other than a trace (a blktrace recording).
pub trait EventFeed {
    /// Calls `f` with every event in time order and the event after it, as
    /// [`for_each_event_ahead`] does.
    fn feed(self, f: impl FnMut(&Event, Option<&Event>));
}

/// [`attribute_stream`]'s loop over the events of `feed`. Returns the attribution (its
/// `ios`: those the end left pending, handed out already, last).
pub fn attribute_events(
    ctx: Context,
    feed: impl EventFeed,
    on_io: impl FnMut(&Io, &Tables),
    progress: impl FnMut(Progress),
) -> Attribution {
    let mut l = Loop::new(ctx, on_io, progress, None::<NoDirtied>);
    feed.feed(|ev, ahead| l.event(ev, ahead));
    l.finish()
}

/// The body of the decode-then-attribute loop, whatever feeds it.
struct Loop<O, P, D> {
    attr: Attributor,
    buf: Vec<Io>,
    events: u64,
    on_io: O,
    progress: P,
    /// The dirtied observer, when logging, and its buffer.
    on_dirtied: Option<(D, Vec<Dirtied>)>,
}

impl<O: FnMut(&Io, &Tables), P: FnMut(Progress), D: FnMut(&Dirtied, &Tables)> Loop<O, P, D> {
    fn new(ctx: Context, on_io: O, progress: P, on_dirtied: Option<D>) -> Self {
        let mut attr = Attributor::new(ctx);
        if on_dirtied.is_some() {
            attr.log_dirtied();
        }
        Loop {
            attr,
            buf: Vec::new(),
            events: 0,
            on_io,
            progress,
            on_dirtied: on_dirtied.map(|d| (d, Vec::new())),
        }
    }

    /// Hands the dirtied records out (`all`: the last ones too, at the end).
    fn drain_dirtied(&mut self, all: bool) {
        if let Some((f, buf)) = &mut self.on_dirtied {
            self.attr.drain_dirtied_into(buf, all);
            let tables = self.attr.tables();
            for d in buf.drain(..) {
                f(&d, tables);
            }
        }
    }

    #[inline]
    fn event(&mut self, ev: &Event, ahead: Option<&Event>) {
        self.events += 1;
        if self.events % PROGRESS_EVERY == 0 {
            (self.progress)(Progress {
                events: self.events,
                time: ev.time,
            });
        }
        if let Some(a) = ahead {
            self.attr.prefetch(a);
        }
        self.attr.push(ev);
        // What was dirtied goes out at least every so many events, IO or not (a trace that
        // dirties long before any writeback keeps no long list).
        if self.events % DIRTIED_EVERY == 0 {
            self.drain_dirtied(false);
        }
        self.attr.drain_ios_into(&mut self.buf);
        if !self.buf.is_empty() {
            // What was dirtied before goes out first.
            self.drain_dirtied(false);
            let tables = self.attr.tables();
            for io in self.buf.drain(..) {
                (self.on_io)(&io, tables);
            }
        }
    }

    fn finish(mut self) -> Attribution {
        self.drain_dirtied(true);
        let attribution = self.attr.finish();
        for io in &attribution.ios {
            (self.on_io)(io, &attribution.tables);
        }
        attribution
    }
}

/// Decodes and attributes a whole trace with `ctx` ([`attribute_stream`]), collecting every
/// charged IO (those the end of the trace left pending included, last): for tests and small
/// traces.
pub fn attribute_trace(trace: &Trace, decoder: &Decoder, ctx: Context) -> (Vec<Io>, Attribution) {
    let mut ios = Vec::new();
    let run = attribute_stream(trace, decoder, ctx, |io, _| ios.push(io.clone()), |_| {});
    (ios, run.attribution)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioblame_decode::synth::{builtin_format, TraceBuilder, Val};

    /// A one-CPU trace: `comms` task-name records 1 µs apart, with one 8-sector read
    /// (`block_bio_queue`, `block_rq_issue`, `block_rq_complete`) after the first of them.
    fn trace(comms: u64) -> (tempfile::TempDir, Trace) {
        let mut t = TraceBuilder::new(ioblame_format::ByteOrder::native(), 1);
        let [q, d, c] = [
            "block:block_bio_queue",
            "block:block_rq_issue",
            "block:block_rq_complete",
        ]
        .map(|name| {
            t.add_event(name, builtin_format(name).unwrap(), false)
                .unwrap()
        });
        let base = t.header().start_clock_ns + 1_000_000;
        let dev = Val::U(7 << 20);
        let bio = [
            ("dev", dev),
            ("sector", Val::U(2048)),
            ("nr_sector", Val::U(8)),
            ("rwbs", Val::Str("R")),
            ("comm", Val::Str("reader")),
        ];
        for i in 0..comms {
            let at = base + 1000 * i;
            t.comm(0, at, 42, 42, "reader", false);
            if i == 0 {
                t.sample(0, q, at + 1, 42, 42, &[], &bio).unwrap();
                let mut issue = bio.to_vec();
                issue.push(("bytes", Val::U(4096)));
                t.sample(0, d, at + 2, 0, 0, &[], &issue).unwrap();
                let done = [
                    ("dev", dev),
                    ("sector", Val::U(2048)),
                    ("nr_sector", Val::U(8)),
                    ("error", Val::I(0)),
                    ("rwbs", Val::Str("R")),
                ];
                t.sample(0, c, at + 3, 0, 0, &[], &done).unwrap();
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        t.write(&path).unwrap();
        let trace = Trace::open(&path).unwrap();
        (dir, trace)
    }

    /// Each IO is handed out once, as charged, with tables that hold its act; the result
    /// is the one [`attribute_trace`] collects.
    #[test]
    fn ios_are_handed_out_once_with_their_tables() {
        let (_dir, t) = trace(3);
        let decoder = Decoder::new(t.header(), t.metadata());
        let mut seen = Vec::new();
        let run = attribute_stream(
            &t,
            &decoder,
            Context::from_trace(t.header(), t.metadata()),
            |io, tables| {
                let act = &tables.acts[io.act.index()];
                seen.push((io.clone(), tables.roles[act.role.index()].comm.clone()));
            },
            |_| {},
        );
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!((seen[0].0.size, seen[0].1.as_str()), (4096, "reader"));
        assert_eq!(run.stream.events, 6);
        assert!(run.stream.damaged.is_empty());
        let (ios, out) =
            attribute_trace(&t, &decoder, Context::from_trace(t.header(), t.metadata()));
        assert_eq!(ios, vec![seen[0].0.clone()]);
        assert_eq!(out, run.attribution);
        assert_eq!(out.summary.total_bytes(), 4096);
    }

    /// The observer sees every [`PROGRESS_EVERY`]th event, with its time.
    #[test]
    fn progress_is_shown_every_so_many_events() {
        let (_dir, t) = trace(2 * PROGRESS_EVERY + 10);
        let decoder = Decoder::new(t.header(), t.metadata());
        let mut shown = Vec::new();
        let run = attribute_stream(
            &t,
            &decoder,
            Context::default(),
            |_, _| {},
            |p| shown.push(p),
        );
        assert_eq!(run.stream.events, 2 * PROGRESS_EVERY + 13);
        let base = t.header().start_clock_ns + 1_000_000;
        // The first comm is followed by the request's three events.
        let time = |n: u64| base + 1000 * (n - 4);
        assert_eq!(
            shown,
            [1, 2].map(|k| Progress {
                events: k * PROGRESS_EVERY,
                time: time(k * PROGRESS_EVERY),
            })
        );
    }
}
