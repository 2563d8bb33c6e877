//! The trace header (HEADER block): who recorded the trace, where and when, repeated first in
//! every ring file; and the recording host's byte order, which is every raw perf record's.

use crate::codec::{Dec, Enc};
use crate::error::DecodeError;

/// Byte order of the recording host, which is the byte order of every raw perf record
/// (defined with the perf record format, in `ioblame-perfrec`).
pub use ioblame_perfrec::ByteOrder;

/// The header's code of a byte order.
fn byte_order_code(o: ByteOrder) -> u8 {
    match o {
        ByteOrder::Little => 1,
        ByteOrder::Big => 2,
    }
}

/// The byte order of a header's code.
fn byte_order_from_code(c: u8) -> Option<ByteOrder> {
    match c {
        1 => Some(ByteOrder::Little),
        2 => Some(ByteOrder::Big),
        _ => None,
    }
}

/// The trace header: who recorded the trace, where and when. Repeated in every ring file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Byte order of the recording host (and of every raw perf record).
    pub byte_order: ByteOrder,
    /// Word size of the recording host in bytes (8 on 64-bit kernels).
    pub word_size: u8,
    /// Page size of the recording host in bytes.
    pub page_size: u32,
    /// Number of CPUs (possible CPUs; per-CPU chunk numbers are below this).
    pub cpu_count: u32,
    /// Clock of the perf timestamps (a `clockid_t`, e.g. 1 = CLOCK_MONOTONIC), or -1 for perf's
    /// default local clock.
    pub clock_id: i32,
    /// Process id of the recorder, so its own IO can be told apart.
    pub recorder_pid: u32,
    /// Index of this file within the ring (0 for the first file of a capture).
    pub file_index: u32,
    /// Wall-clock time the capture started, nanoseconds since the Unix epoch.
    pub start_time_ns: u64,
    /// Reading of the perf clock (`clock_id`) at the same instant as `start_time_ns`.
    pub start_clock_ns: u64,
    /// Random identifier shared by all ring files of one capture.
    pub trace_id: u64,
    /// Host name of the recording host.
    pub hostname: String,
    /// Kernel release of the recording host (`uname -r`).
    pub kernel_release: String,
    /// Machine architecture of the recording host (`uname -m`).
    pub machine: String,
    /// Name and version of the recorder, e.g. `ioblame-capture 0.1.0`.
    pub recorder_version: String,
}

impl Header {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.u8(byte_order_code(self.byte_order))
            .u8(self.word_size)
            .u16(0)
            .u32(self.page_size)
            .u32(self.cpu_count)
            .i32(self.clock_id)
            .u32(self.recorder_pid)
            .u32(self.file_index)
            .u64(self.start_time_ns)
            .u64(self.start_clock_ns)
            .u64(self.trace_id)
            .str(&self.hostname)
            .str(&self.kernel_release)
            .str(&self.machine)
            .str(&self.recorder_version);
        e.buf
    }

    pub(crate) fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut d = Dec::new(b);
        let bo = d.u8("byte order")?;
        let byte_order = byte_order_from_code(bo)
            .ok_or_else(|| DecodeError::new(0, format!("unknown byte order code {bo}")))?;
        let word_size = d.u8("word size")?;
        if word_size != 4 && word_size != 8 {
            return Err(DecodeError::new(
                1,
                format!("word size {word_size} is neither 4 nor 8"),
            ));
        }
        d.u16("reserved")?;
        Ok(Header {
            byte_order,
            word_size,
            page_size: d.u32("page size")?,
            cpu_count: d.u32("cpu count")?,
            clock_id: d.i32("clock id")?,
            recorder_pid: d.u32("recorder pid")?,
            file_index: d.u32("file index")?,
            start_time_ns: d.u64("start time")?,
            start_clock_ns: d.u64("start clock")?,
            trace_id: d.u64("trace id")?,
            hostname: d.str("host name")?,
            kernel_release: d.str("kernel release")?,
            machine: d.str("machine")?,
            recorder_version: d.str("recorder version")?,
            // Bytes after the known fields belong to newer minor versions: ignored.
        })
    }
}

#[cfg(all(test, feature = "reader"))]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            byte_order: ByteOrder::Big,
            word_size: 4,
            page_size: 65536,
            cpu_count: 3,
            clock_id: -1,
            recorder_pid: 42,
            file_index: 7,
            start_time_ns: 1,
            start_clock_ns: 2,
            trace_id: 0xfeed,
            hostname: "h".into(),
            kernel_release: "6.18".into(),
            machine: "s390x".into(),
            recorder_version: "test".into(),
        }
    }

    #[test]
    fn header_round_trips_and_ignores_trailing_bytes() {
        let h = header();
        let mut b = h.encode();
        assert_eq!(Header::decode(&b).unwrap(), h);
        b.extend_from_slice(&[9; 5]);
        assert_eq!(Header::decode(&b).unwrap(), h);
    }

    #[test]
    fn unknown_byte_order_bad_word_size_and_truncation_are_errors() {
        let b = header().encode();
        let mut x = b.clone();
        x[0] = 3;
        assert!(Header::decode(&x).unwrap_err().what.contains("byte order"));
        let mut x = b.clone();
        x[1] = 2;
        assert!(Header::decode(&x).unwrap_err().what.contains("word size"));
        assert!(Header::decode(&b[..b.len() - 1]).is_err());
    }

    #[test]
    fn byte_order_reads_each_way() {
        assert_eq!(ByteOrder::Little.u16([1, 0]), 1);
        assert_eq!(ByteOrder::Big.u16([1, 0]), 256);
        assert_eq!(ByteOrder::Big.u32([0, 0, 0, 1]), 1);
        assert_eq!(ByteOrder::Little.u64(7u64.to_le_bytes()), 7);
        assert_eq!(ByteOrder::Big.u64(7u64.to_be_bytes()), 7);
    }
}
