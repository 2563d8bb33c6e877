//! The perf record format, parsed once for the recorder, the decoder and the perf.data
//! converter: the constants of `perf_event.h` ([`consts`]), the byte order of the recording
//! host ([`ByteOrder`]), samples for any supported `sample_type` with their layout computed
//! from it ([`SampleLayout`], [`parse_sample`]), and the task, mapping and loss records with
//! their `sample_id_all` trailer ([`parse_task_record`]).
//!
//! Everything is bounds-checked: a short or damaged record gives an error or `None`, never a
//! panic. The crate has no dependencies.
//!
//! ```
//! use ioblame_perfrec::{SampleLayout, SAMPLE_CALLCHAIN, SAMPLE_CPU, SAMPLE_IDENTIFIER,
//!     SAMPLE_RAW, SAMPLE_TID, SAMPLE_TIME};
//! let st = SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_RAW;
//! let l = SampleLayout::new(st | SAMPLE_CALLCHAIN).unwrap();
//! assert_eq!(l.callchain_at(), Some(32));
//! assert_eq!(l.tid_at(), Some(8));
//! ```
#![deny(missing_docs)]

pub mod consts;
mod cursor;
mod error;
mod order;
mod sample;
mod task;

pub use consts::*;
pub use error::{check_sample_type, RecordError};
pub use order::ByteOrder;
pub use sample::{
    parse_sample, parse_sample_regs, Callchain, Sample, SampleLayout, SampleParts, UserRegs,
    FIXED_SAMPLE_FIELDS,
};
pub use task::{
    lost_count, mapping_name, mmap2_name, parse_cgroup, parse_sample_id, parse_task_record,
    put_mmap2_build_id, sample_id_len, SampleId, TaskRecord, MMAP2_ID_AT, MMAP2_NAME_AT,
    MMAP_NAME_AT,
};

#[cfg(test)]
mod tests;
