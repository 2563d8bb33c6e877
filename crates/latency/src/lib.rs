//! btt's latency breakdown from the block events ioblame decodes: for every bio, the time
//! from queue (Q) to get-request (G), insert (I), merge (M), issue (D) and completion (C),
//! per device, overall, per issuing process and (when the attribution runs) per act.
//!
//! ```
//! use ioblame_latency::{Engine, Interval};
//! let mut engine = Engine::default();
//! // for each decoded event, in time order: engine.push(&event);
//! let lat = engine.finish();
//! assert_eq!(lat.all.get(Interval::Q2C).n, 0);
//! ```
//!
//! The intervals are btt's, computed as btt 1.2 computes them ([`engine`] lists the rules,
//! `docs/latency.md` the few differences); n, min, mean and max are exact, percentiles come
//! from a histogram within 0.39% of the exact nearest-rank value ([`hist`]), in memory that
//! does not grow with the trace. [`output`] renders the text table and JSON lines.
#![deny(missing_docs)]

pub mod blame;
pub mod breakdown;
pub mod engine;
pub mod hist;
pub mod output;
#[cfg(test)]
mod tests;

pub use blame::{Blame, BlameEngine, BlameStats, Idle, IoPart, Victim};
pub use breakdown::{Breakdown, Interval};
pub use engine::{is_remapper, Engine, EngineStats};
pub use hist::{Stat, MAX_RELATIVE_ERROR};
pub use ioblame_events::event::Dev;

/// The breakdowns of one trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Latency {
    /// Every selected device together (btt's "All Devices").
    pub all: Breakdown,
    /// Per device (kernel encoding), by device number.
    pub devices: Vec<(Dev, Breakdown)>,
    /// Per issuing process (the task that queued the bio), by name; tasks of one name
    /// together, an unnamed task as `pidNNNNNNNNN` (as btt).
    pub processes: Vec<(String, Breakdown)>,
    /// Per act (its index in the attribution's act table): Q2C and D2C of its IOs.
    pub acts: Vec<(usize, Breakdown)>,
    /// What the engine met besides the intervals.
    pub stats: EngineStats,
}
