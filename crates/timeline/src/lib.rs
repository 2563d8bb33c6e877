//! ioblame's timeline (`ioblame timeline`, `docs/timeline.md`): a Perfetto protobuf trace
//! of TrackEvents on one trusted packet sequence. Each role (a task) has a thread track in
//! its process with its dirtying runs (consecutive dirtying of one file folded into one
//! slice), and child tracks of its reads and direct IO and of its time blocked in fsync;
//! each device has a track with lanes of its requests (queue to completion, with their
//! queued and on-device parts) and counters of its queue depth, requests in flight and
//! bytes per second; flows lead from each dirtying run to the requests that wrote what it
//! dirtied, whoever issued them, and from each read to its request.
//!
//! [`Builder`] collects from an analysis as it runs ([`Feed`] feeds it from the analysis's
//! observers); [`write`] writes what was collected,
//! named, in time order, streaming the packets. Perfetto's messages are derived with prost
//! from the vendored subset of its protos ([`proto`]).

mod build;
mod emit;
mod feed;
pub mod proto;
mod select;
mod tracks;
mod writer;

use std::io::{self, Write};

use ioblame_attrib::{Tables, Via};
use ioblame_decode::Dev;

pub use build::{Blocked, Builder, Collected, Part, Request, Run};
pub use feed::Feed;
pub use writer::{Arg, PacketWriter};

/// The bins of the bytes-per-second counter (ns).
pub const RATE_BIN_NS: u64 = 100_000_000;

/// A dirtying run ends after this long without dirtying (ns).
pub const RUN_GAP_NS: u64 = 100_000_000;

/// What to write.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only what happened in `[from, to)` (ns, the trace's clock): requests queued in it,
    /// runs and fsyncs that overlap it.
    pub window: (u64, u64),
    /// At most this many slices (runs, requests, reads and direct IOs on a role's track,
    /// fsyncs): the earliest kept.
    pub max_slices: u64,
    /// At most this many flows: those of the earliest runs and reads kept.
    pub max_flows: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            window: (0, u64::MAX),
            max_slices: 2_000_000,
            max_flows: 2_000_000,
        }
    }
}

/// The names a timeline shows, from the analysis.
pub struct Names<'a> {
    /// The tables (roles, intents, acts).
    pub tables: &'a Tables,
    /// Each intent's name, by intent id.
    pub intents: &'a [String],
    /// Each intent's stack, its frames one per line (empty where it has none), by intent id.
    pub stacks: &'a [String],
    /// A file's path, by its device as the act keys it and its inode.
    pub path: &'a dyn Fn(Dev, u64) -> Option<String>,
    /// A device's name, as the outputs print it.
    pub device: &'a dyn Fn(Dev) -> String,
}

impl Names<'_> {
    /// The pid, tid and command name of act `act`'s role.
    pub fn act_role(&self, act: ioblame_attrib::ActId) -> Option<(u32, u32, &str)> {
        self.tables
            .act(act)
            .and_then(|a| self.tables.role(a.role))
            .map(|r| (r.pid, r.tid, r.comm.as_str()))
    }
}

/// What was written, and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Slices written (each request's queued and on-device parts not counted).
    pub slices: u64,
    /// Flows written.
    pub flows: u64,
    /// Tracks described.
    pub tracks: u64,
    /// Packets and bytes written.
    pub packets: u64,
    /// See [`Stats::packets`].
    pub bytes: u64,
    /// Slices left out by [`Options::max_slices`], the bytes of the requests among them,
    /// and the time from which they were (ns).
    pub slices_left_out: (u64, u64, u64),
    /// Flows left out by [`Options::max_flows`].
    pub flows_left_out: u64,
    /// Written-back parts no dirtying run was found for, and their bytes
    /// ([`Collected::unlinked`]).
    pub unlinked: (u64, u64),
}

/// Whether a part is drawn on its role's track too (reads, readahead, direct IO).
fn on_role_track(p: &Part) -> bool {
    matches!(p.via, Via::Read | Via::Readahead | Via::Direct) && !p.lower
}

/// Writes `c` to `out` as a Perfetto trace, named by `names`, within `opts`.
pub fn write(
    c: &Collected,
    names: &Names<'_>,
    opts: &Options,
    out: impl Write,
) -> io::Result<Stats> {
    let mut stats = Stats {
        unlinked: c.unlinked,
        ..Stats::default()
    };
    let sel = select::select(c, opts, &mut stats);
    let mut w = PacketWriter::new(out)?;
    let tracks = tracks::describe(c, &sel, names, &mut w, &mut stats)?;
    emit::events(c, &sel, &tracks, names, opts.window, &mut w, &mut stats)?;
    stats.packets = w.packets;
    stats.bytes = w.bytes;
    w.finish()?;
    Ok(stats)
}
