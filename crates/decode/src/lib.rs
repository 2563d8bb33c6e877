//! Decoding of ioblame traces into typed, time-ordered events.
//!
//! * [`format`](mod@format): tracefs `format` texts and field access by name, in either byte order;
//! * [`record`]: raw perf records (samples of any supported `sample_type`, COMM, FORK, EXIT,
//!   LOST);
//! * [`decoder`]: [`Decoder`] turns a chunk's records into typed [`Event`]s, each built as
//!   its entry in the event registry ([`ioblame_events::table`]) says;
//! * [`stream`]: parallel, windowed, time-ordered decoding of a whole trace;
//! * [`symbols`]: kernel symbols from a kallsyms snapshot;
//! * [`synth`]: synthetic traces for tests and benchmarks.
//!
//! ```
//! use ioblame_decode::{synth::{builtin_format, TraceBuilder, Val}, Decoder, EventKind};
//! use ioblame_decode::stream::{decode_all, StreamOptions};
//! use ioblame_format::{ByteOrder, Trace};
//! let mut t = TraceBuilder::new(ByteOrder::Little, 1);
//! let ev = t.add_event("block:block_dirty_buffer", builtin_format("block:block_dirty_buffer").unwrap(), false).unwrap();
//! t.sample(0, ev, 5, 1, 1, &[], &[("dev", Val::U(7 << 20)), ("sector", Val::U(4241)), ("size", Val::U(4096))]).unwrap();
//! let dir = tempfile::tempdir().unwrap();
//! t.write(dir.path()).unwrap();
//! let trace = Trace::open(dir.path()).unwrap();
//! let dec = Decoder::new(trace.header(), trace.metadata());
//! let (events, _) = decode_all(&trace, &dec, &StreamOptions::default());
//! assert_eq!(events[0].kind, EventKind::DirtyBuffer { dev: 7 << 20, blocknr: 4241, size: 4096 });
//! ```
#![deny(missing_docs)]

pub mod decoder;
pub mod format;
mod inherit;
mod pipe;
pub mod record;
pub mod stream;
pub mod symbols;
pub mod synth;

/// The typed events, defined with the event registry (`ioblame-events`).
pub use ioblame_events::event;

pub use decoder::{
    buffer_stacks_derived, stacks_sampled, DecodeStats, DecodedChunk, Decoder, DecoderProblem,
    SkipReason,
};
pub use event::*;
pub use inherit::MAX_GAP_NS as BUFFER_FOLIO_MAX_GAP_NS;
pub use stream::{
    for_each_event, for_each_event_ahead, DamagedChunk, StreamOptions, StreamStats, LOOKAHEAD,
};
pub use symbols::{Sym, Symbolizer};

#[cfg(test)]
mod tests;
