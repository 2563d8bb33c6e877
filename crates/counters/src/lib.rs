//! ioblame's eight-slot histogram counters.
//!
//! ```
//! use ioblame_counters::{CounterSet, IoContext};
//!
//! let set = CounterSet::parse_args(&[
//!     "RA offset 0 8192 16384 24576 32768 40960 49152 57344 0",
//!     "W size 0 4096 8192 16384 32768 65536 131072 524288 0 if comm ~ \"dd*\" && via == direct",
//! ])
//! .unwrap();
//! assert_eq!(set.len(), 2);
//! assert_eq!(set.specs()[0].slot(8192), Some(1));
//!
//! let err = CounterSet::parse_args(&["R size 0 1 2 3 4 5 6 7 0", "W size 0 1 2 3 4 5 6 7 0 if size < x"])
//!     .unwrap_err();
//! assert_eq!(err.to_string(), "counter 2, column 36: expected a number after 'size <'");
//! # let _ = IoContext::new(1, "dd");
//! ```
//!
//! # Counter specs
//!
//! `DIR FIELD B0 B1 B2 B3 B4 B5 B6 B7 B8 [if FILTER]`, as ioblame's `counters/NR` (with the
//! filter of `counters/NR_filter` after the keyword `if`):
//!
//! * `DIR`: any combination of `R` (reads, readahead excluded), `A` (readahead) and `W`
//!   (writes), each letter at most once.
//! * `FIELD`: `offset` (start of the IO scaled to 0..=65535 over the device), `size`
//!   (bytes), `wait_time` (µs queued before issue), `io_time` (µs on the device) or
//!   `seek_dist` (distance from the previous IO completed on the device, scaled like
//!   `offset`).
//! * `B0..B8`: numbers (decimal or `0x` hex). A value `v` is counted in slot `i` when
//!   `B[i] <= v < B[i+1]`; it is not counted when `v < B0` or (`B8 != 0` and `v >= B8`).
//!   `B8 = 0` means no upper limit (slot 7 is `v >= B7`). Boundaries must not decrease
//!   (`B8 = 0` excepted).
//! * `FILTER`: see [`filter`]: `&&`, `||`, `!`, parentheses and
//!   `== != < <= > >= ~` over the five fields and `pid` (the task's own pid, i.e. its thread
//!   id, as ioblame's filters), `tgid`, `comm`, `dev`, `ino`, `via`, `reason`.
//!
//! Counters come from the command line ([`CounterSet::parse_args`], one spec per argument,
//! errors located as `counter N, column C`) or from a file ([`CounterSet::parse_file`], one
//! spec per line, blank lines and `#` comments ignored, errors located as
//! `FILE:LINE, column C`). A malformed spec is a [`SpecError`] naming the offending token.
//!
//! # The default counters
//!
//! Without any counter given, [`CounterSet::default_set`] uses [`DEFAULT_COUNTERS`] (also
//! documented, with the spec and filter syntax and the outputs, in `docs/counters.md`):
//!
//! | # | spec | answers |
//! | --- | --- | --- |
//! | 0 | `R size 0 4096 8192 16384 32768 65536 131072 524288 0` | read sizes |
//! | 1 | `A size 0 4096 8192 16384 32768 65536 131072 524288 0` | readahead sizes |
//! | 2 | `W size 0 4096 8192 16384 32768 65536 131072 524288 0` | write sizes |
//! | 3 | `R wait_time 0 100 250 500 1000 2500 10000 50000 0` | time reads wait in the queue (µs) |
//! | 4 | `A wait_time 0 100 250 500 1000 2500 10000 50000 0` | same for readahead |
//! | 5 | `W wait_time 0 100 250 500 1000 2500 10000 50000 0` | same for writes |
//! | 6 | `R io_time 0 100 250 500 1000 2500 10000 50000 0` | time reads spend on the device (µs) |
//! | 7 | `A io_time 0 100 250 500 1000 2500 10000 50000 0` | same for readahead |
//! | 8 | `W io_time 0 100 250 500 1000 2500 10000 50000 0` | same for writes |
//! | 9 | `RA offset 0 8192 16384 24576 32768 40960 49152 57344 0` | where on the device reads go (eighths) |
//! | 10 | `W offset 0 8192 16384 24576 32768 40960 49152 57344 0` | where on the device writes go (eighths) |
//!
//! Size slots: <4K, 4-8K, 8-16K, 16-32K, 32-64K, 64-128K, 128-512K, >=512K. Time slots:
//! <100µs, 100-250µs, 250-500µs, 0.5-1ms, 1-2.5ms, 2.5-10ms, 10-50ms, >=50ms.
//!
//! # Aggregation
//!
//! [`CounterSet::record`] counts one [`Io`](ioblame_attrib::Io) in the histograms of the act
//! it is charged to, for every counter whose direction, range and filter accept it. The
//! [`IoContext`] carries the task ids and comm of the act's role for filters; the filter's `dev`,
//! `ino`, `via` and `reason` come from the `Io` itself. Counts are `u64` (ioblame used
//! `u32`). Recording allocates nothing once an act's histograms exist.
//!
//! # Device selection
//!
//! [`DevSelection`] implements ioblame's `devs` semantics (`sda sdb !8:0`) against the
//! trace's own device table; [`CounterSet::with_devs`] makes a set ignore IO of disabled
//! devices.
//!
//! # Outputs
//!
//! [`output::counters_pipe`] (ioblame's text format), [`output::pretty`] and
//! [`output::json`] (JSON lines).
#![deny(missing_docs)]

mod context;
mod device;
mod devs;
mod error;
pub mod filter;
pub mod output;
mod parse;
mod set;
mod spec;

pub use context::IoContext;
pub use devs::DevSelection;
pub use error::{CountersError, DevError, DevSyntax, Location, SpecError};
pub use filter::Filter;
pub use set::{CounterSet, Histogram, DEFAULT_COUNTERS, MAX_COUNTERS};
pub use spec::{CounterSpec, DirMask, Field, SLOTS};
