//! ioblame's fleet dataset (`docs/dataset.md`): traces exported into one Hive-partitioned
//! Parquet dataset, `DIR/<table>/host=<host>/date=<YYYY-MM-DD>/<trace id>.parquet`, with a
//! stable, versioned schema every engine reads natively (signed 64-bit integers, UTC
//! timestamps in µs), and the fleet query over it (polars' lazy scan with partition pruning).
//!
//! * [`TraceWriter`]: export one analysed trace (atomic per file, idempotent per trace).
//! * [`fleet::query`]: the top intents, acts, files and roles across hosts, per-host totals.
//! * [`latency::latency_frame`]: the `latency` table of a trace's breakdown.
//! * [`page::write`]: the fleet's HTML page with a merged flame graph.
#![deny(missing_docs)]

mod atomic;
mod error;
mod export;
pub mod fleet;
pub mod latency;
pub mod page;
pub mod schema;

pub use atomic::{clean_stale, temp_path};
pub use error::DatasetError;
pub use export::{Exported, TraceInfo, TraceWriter};
pub use glob::Pattern;
pub use schema::{intent_key, TraceKeys, SCHEMA_VERSION, TABLES};
