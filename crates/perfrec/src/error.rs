//! Why a record could not be parsed.

use std::fmt;

use crate::consts::SUPPORTED_SAMPLE_TYPE;

/// Why a record could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordError {
    /// The record ends before a part its type says it has.
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Where in the body.
        at: usize,
        /// Bytes needed.
        need: usize,
        /// Body length.
        len: usize,
    },
    /// The `sample_type` has bits this crate cannot parse.
    UnsupportedSampleType {
        /// The sample type.
        sample_type: u64,
        /// The bits not understood.
        unsupported: u64,
    },
    /// A callchain longer than [`MAX_CALLCHAIN`](crate::MAX_CALLCHAIN).
    CallchainTooLong(u64),
    /// The `sample_type` has `REGS_USER` and no register mask was given.
    NoRegsMask,
    /// A user stack copy larger than [`MAX_STACK_USER`](crate::MAX_STACK_USER).
    StackTooLarge(u64),
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::Truncated {
                what,
                at,
                need,
                len,
            } => write!(
                f,
                "record truncated reading {what}: needs {need} bytes at {at}, record body has {len}"
            ),
            RecordError::UnsupportedSampleType {
                sample_type,
                unsupported,
            } => write!(
                f,
                "sample_type {sample_type:#x} has unsupported bits {unsupported:#x} (supported: IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD, CALLCHAIN, RAW, REGS_USER, STACK_USER, WEIGHT, DATA_SRC, CGROUP)"
            ),
            RecordError::CallchainTooLong(n) => {
                write!(f, "callchain of {n} entries exceeds the cap")
            }
            RecordError::NoRegsMask => {
                write!(f, "the samples carry user registers, and their mask is unknown")
            }
            RecordError::StackTooLarge(n) => {
                write!(f, "user stack copy of {n} bytes exceeds the cap")
            }
        }
    }
}

impl std::error::Error for RecordError {}

/// Checks that a `sample_type` has only supported bits.
pub fn check_sample_type(sample_type: u64) -> Result<(), RecordError> {
    let unsupported = sample_type & !SUPPORTED_SAMPLE_TYPE;
    if unsupported != 0 {
        return Err(RecordError::UnsupportedSampleType {
            sample_type,
            unsupported,
        });
    }
    Ok(())
}
