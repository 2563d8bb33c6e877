//! Raw perf records: samples (for any supported `sample_type`) and the task and loss records,
//! read in the recording host's byte order.

use ioblame_format::{ByteOrder, RawRecord, PERF_HEADER_LEN};

/// `PERF_SAMPLE_IP`.
pub const SAMPLE_IP: u64 = 1 << 0;
/// `PERF_SAMPLE_TID`.
pub const SAMPLE_TID: u64 = 1 << 1;
/// `PERF_SAMPLE_TIME`.
pub const SAMPLE_TIME: u64 = 1 << 2;
/// `PERF_SAMPLE_ADDR`.
pub const SAMPLE_ADDR: u64 = 1 << 3;
/// `PERF_SAMPLE_READ` (not supported).
pub const SAMPLE_READ: u64 = 1 << 4;
/// `PERF_SAMPLE_CALLCHAIN`.
pub const SAMPLE_CALLCHAIN: u64 = 1 << 5;
/// `PERF_SAMPLE_ID`.
pub const SAMPLE_ID: u64 = 1 << 6;
/// `PERF_SAMPLE_CPU`.
pub const SAMPLE_CPU: u64 = 1 << 7;
/// `PERF_SAMPLE_PERIOD`.
pub const SAMPLE_PERIOD: u64 = 1 << 8;
/// `PERF_SAMPLE_STREAM_ID`.
pub const SAMPLE_STREAM_ID: u64 = 1 << 9;
/// `PERF_SAMPLE_RAW`.
pub const SAMPLE_RAW: u64 = 1 << 10;
/// `PERF_SAMPLE_IDENTIFIER`.
pub const SAMPLE_IDENTIFIER: u64 = 1 << 16;
/// `PERF_SAMPLE_CGROUP` (Linux 5.7): the id of the task's cgroup in the cgroup2 hierarchy,
/// a u64 after `RAW`.
pub const SAMPLE_CGROUP: u64 = 1 << 21;

/// The `sample_type` bits this crate can parse.
pub const SUPPORTED_SAMPLE_TYPE: u64 = SAMPLE_IDENTIFIER
    | SAMPLE_IP
    | SAMPLE_TID
    | SAMPLE_TIME
    | SAMPLE_ADDR
    | SAMPLE_ID
    | SAMPLE_STREAM_ID
    | SAMPLE_CPU
    | SAMPLE_PERIOD
    | SAMPLE_CALLCHAIN
    | SAMPLE_RAW
    | SAMPLE_CGROUP;

/// `PERF_RECORD_LOST`.
pub const RECORD_LOST: u32 = 2;
/// `PERF_RECORD_COMM`.
pub const RECORD_COMM: u32 = 3;
/// `PERF_RECORD_EXIT`.
pub const RECORD_EXIT: u32 = 4;
/// `PERF_RECORD_FORK`.
pub const RECORD_FORK: u32 = 7;
/// `PERF_RECORD_SAMPLE`.
pub const RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_MMAP`.
pub const RECORD_MMAP: u32 = 1;
/// `PERF_RECORD_MMAP2`.
pub const RECORD_MMAP2: u32 = 10;
/// `PERF_RECORD_MISC_MMAP_DATA`: a mapping that is not executable.
pub const MISC_MMAP_DATA: u16 = 1 << 13;
/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: an MMAP2 record carrying the build id in place of the
/// device and inode (Linux 5.12).
pub const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// `PERF_RECORD_LOST_SAMPLES`.
pub const RECORD_LOST_SAMPLES: u32 = 13;
/// `PERF_RECORD_MISC_COMM_EXEC`: a COMM record caused by exec.
pub const MISC_COMM_EXEC: u16 = 1 << 13;
/// Callchain entries at or above this value are context markers (`PERF_CONTEXT_MAX`).
pub const CONTEXT_MAX: u64 = -4095i64 as u64;
/// `PERF_CONTEXT_USER`.
pub const CONTEXT_USER: u64 = -512i64 as u64;
/// `PERF_CONTEXT_KERNEL`.
pub const CONTEXT_KERNEL: u64 = -128i64 as u64;
/// Cap on callchain depth accepted (perf's own maximum is 127 + markers by default, and
/// `kernel.perf_event_max_stack` is at most 65535 on any kernel).
pub const MAX_CALLCHAIN: u64 = 65535;

/// Why a record could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The record ends before a part its type says it has.
    #[error("record truncated reading {what}: needs {need} bytes at {at}, record body has {len}")]
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
    #[error("sample_type {sample_type:#x} has unsupported bits {unsupported:#x} (supported: IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD, CALLCHAIN, RAW, CGROUP)")]
    UnsupportedSampleType {
        /// The sample type.
        sample_type: u64,
        /// The bits not understood.
        unsupported: u64,
    },
    /// A callchain longer than [`MAX_CALLCHAIN`].
    #[error("callchain of {0} entries exceeds the cap")]
    CallchainTooLong(u64),
}

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

/// Bounds-checked reader over a record body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
    order: ByteOrder,
}

impl<'a> Cur<'a> {
    pub(crate) fn new(b: &'a [u8], order: ByteOrder) -> Self {
        Cur { b, pos: 0, order }
    }
    #[inline]
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], RecordError> {
        let s = self
            .pos
            .checked_add(n)
            .and_then(|e| self.b.get(self.pos..e))
            .ok_or(RecordError::Truncated {
                what,
                at: self.pos,
                need: n,
                len: self.b.len(),
            })?;
        self.pos += n;
        Ok(s)
    }
    #[inline]
    fn u64(&mut self, what: &'static str) -> Result<u64, RecordError> {
        let s = self.take(8, what)?;
        Ok(self
            .order
            .u64([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]))
    }
    /// Two u32 in one u64 slot (`{ u32 pid, tid; }`, `{ u32 cpu, res; }`).
    #[inline]
    fn u32x2(&mut self, what: &'static str) -> Result<(u32, u32), RecordError> {
        let s = self.take(8, what)?;
        Ok((
            self.order.u32([s[0], s[1], s[2], s[3]]),
            self.order.u32([s[4], s[5], s[6], s[7]]),
        ))
    }
}

/// The callchain of a sample, as it sits in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Callchain<'a> {
    bytes: &'a [u8],
    order: ByteOrder,
}

impl<'a> Callchain<'a> {
    /// The entries as recorded (in the trace's byte order), context markers included.
    pub fn recorded(&self) -> &'a [u8] {
        self.bytes
    }

    /// The byte order of the entries.
    pub fn order(&self) -> ByteOrder {
        self.order
    }

    /// Number of entries, context markers included.
    pub fn len(&self) -> usize {
        self.bytes.len() / 8
    }
    /// Whether the chain is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    /// All entries as recorded, markers included.
    pub fn raw(&self) -> impl Iterator<Item = u64> + 'a {
        let order = self.order;
        self.bytes
            .chunks_exact(8)
            .map(move |s| order.u64([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]))
    }
    /// The kernel addresses, innermost first: context markers dropped, and entries after a
    /// non-kernel context marker (user, guest) dropped.
    pub fn kernel(&self) -> Box<[u64]> {
        let mut v = Vec::new();
        self.kernel_into(&mut v);
        v.into_boxed_slice()
    }

    /// The kernel addresses as [`Callchain::kernel`] gives them, then, if the chain has user
    /// frames, [`ioblame_events::USER_MARK`] and the user addresses, innermost first (the
    /// form of `Event::stack`).
    pub fn frames(&self) -> Box<[u64]> {
        let mut v = Vec::new();
        let mut ctx = CONTEXT_KERNEL;
        let mut marked = false;
        for ip in self.raw() {
            if ip >= CONTEXT_MAX {
                ctx = ip;
                continue;
            }
            if ctx == CONTEXT_KERNEL {
                if marked {
                    // Kernel frames after user ones: not a chain perf writes; kept apart.
                    continue;
                }
                v.push(ip);
            } else if ctx == CONTEXT_USER {
                if !marked {
                    v.push(CONTEXT_USER);
                    marked = true;
                }
                v.push(ip);
            }
        }
        v.into_boxed_slice()
    }

    /// [`Callchain::kernel`] into `out` (cleared first), to reuse one buffer.
    pub fn kernel_into(&self, out: &mut Vec<u64>) {
        out.clear();
        let mut kernel = true;
        for ip in self.raw() {
            if ip >= CONTEXT_MAX {
                kernel = ip == CONTEXT_KERNEL;
                continue;
            }
            if kernel {
                out.push(ip);
            }
        }
    }
}

/// A parsed `PERF_RECORD_SAMPLE`; fields absent from the `sample_type` are `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sample<'a> {
    /// `IDENTIFIER` (first u64).
    pub identifier: Option<u64>,
    /// `IP`.
    pub ip: Option<u64>,
    /// `TID`: (pid, tid).
    pub pid_tid: Option<(u32, u32)>,
    /// `TIME`.
    pub time: Option<u64>,
    /// `ADDR`.
    pub addr: Option<u64>,
    /// `ID`.
    pub id: Option<u64>,
    /// `STREAM_ID`.
    pub stream_id: Option<u64>,
    /// `CPU`.
    pub cpu: Option<u32>,
    /// `PERIOD`.
    pub period: Option<u64>,
    /// `CALLCHAIN`.
    pub callchain: Option<Callchain<'a>>,
    /// `RAW`: the tracepoint payload.
    pub raw: Option<&'a [u8]>,
    /// `CGROUP`: the task's cgroup id in the cgroup2 hierarchy.
    pub cgroup: Option<u64>,
}

/// Parses a sample body (after the perf header) laid out for `sample_type`, which must have
/// passed [`check_sample_type`].
pub fn parse_sample(
    body: &[u8],
    sample_type: u64,
    order: ByteOrder,
) -> Result<Sample<'_>, RecordError> {
    check_sample_type(sample_type)?;
    let mut c = Cur::new(body, order);
    let mut s = Sample::default();
    let has = |bit: u64| sample_type & bit != 0;
    if has(SAMPLE_IDENTIFIER) {
        s.identifier = Some(c.u64("identifier")?);
    }
    if has(SAMPLE_IP) {
        s.ip = Some(c.u64("ip")?);
    }
    if has(SAMPLE_TID) {
        s.pid_tid = Some(c.u32x2("pid/tid")?);
    }
    if has(SAMPLE_TIME) {
        s.time = Some(c.u64("time")?);
    }
    if has(SAMPLE_ADDR) {
        s.addr = Some(c.u64("addr")?);
    }
    if has(SAMPLE_ID) {
        s.id = Some(c.u64("id")?);
    }
    if has(SAMPLE_STREAM_ID) {
        s.stream_id = Some(c.u64("stream id")?);
    }
    if has(SAMPLE_CPU) {
        s.cpu = Some(c.u32x2("cpu")?.0);
    }
    if has(SAMPLE_PERIOD) {
        s.period = Some(c.u64("period")?);
    }
    if has(SAMPLE_CALLCHAIN) {
        let nr = c.u64("callchain length")?;
        if nr > MAX_CALLCHAIN {
            return Err(RecordError::CallchainTooLong(nr));
        }
        s.callchain = Some(Callchain {
            bytes: c.take(nr as usize * 8, "callchain")?,
            order,
        });
    }
    if has(SAMPLE_RAW) {
        let h = c.take(4, "raw size")?;
        let n = order.u32([h[0], h[1], h[2], h[3]]) as usize;
        s.raw = Some(c.take(n, "raw data")?);
    }
    if has(SAMPLE_CGROUP) {
        s.cgroup = Some(c.u64("cgroup")?);
    }
    Ok(s)
}

/// Where the fields of a sample of one `sample_type` lie: the fixed-size ones at known
/// offsets, then the callchain and the raw data. Reading the few fields a decoder needs
/// through it skips [`parse_sample`]'s walk over every field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleLayout {
    /// Bytes of the fixed-size fields before the callchain.
    fixed: usize,
    tid: Option<usize>,
    time: Option<usize>,
    callchain: bool,
    raw: bool,
    cgroup: bool,
}

/// The fields of a sample a decoder reads (see [`SampleLayout::parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleParts<'a> {
    /// `TID`: (pid, tid).
    pub pid_tid: Option<(u32, u32)>,
    /// `TIME`.
    pub time: Option<u64>,
    /// `CALLCHAIN`.
    pub callchain: Option<Callchain<'a>>,
    /// `RAW`.
    pub raw: Option<&'a [u8]>,
    /// `CGROUP`.
    pub cgroup: Option<u64>,
}

impl<'a> From<Sample<'a>> for SampleParts<'a> {
    fn from(s: Sample<'a>) -> Self {
        SampleParts {
            pid_tid: s.pid_tid,
            time: s.time,
            callchain: s.callchain,
            raw: s.raw,
            cgroup: s.cgroup,
        }
    }
}

/// The fixed-size fields of a sample, in the order they are recorded (and [`parse_sample`]
/// reads them); the callchain and the raw data follow.
const FIXED_SAMPLE_FIELDS: [u64; 9] = [
    SAMPLE_IDENTIFIER,
    SAMPLE_IP,
    SAMPLE_TID,
    SAMPLE_TIME,
    SAMPLE_ADDR,
    SAMPLE_ID,
    SAMPLE_STREAM_ID,
    SAMPLE_CPU,
    SAMPLE_PERIOD,
];

impl SampleLayout {
    /// The layout of `sample_type`; `None` when [`parse_sample`] does not support it.
    pub fn new(sample_type: u64) -> Option<SampleLayout> {
        check_sample_type(sample_type).ok()?;
        let mut l = SampleLayout {
            fixed: 0,
            tid: None,
            time: None,
            callchain: sample_type & SAMPLE_CALLCHAIN != 0,
            raw: sample_type & SAMPLE_RAW != 0,
            cgroup: sample_type & SAMPLE_CGROUP != 0,
        };
        for bit in FIXED_SAMPLE_FIELDS {
            if sample_type & bit != 0 {
                if bit == SAMPLE_TID {
                    l.tid = Some(l.fixed);
                } else if bit == SAMPLE_TIME {
                    l.time = Some(l.fixed);
                }
                l.fixed += 8;
            }
        }
        Some(l)
    }

    /// The pid/tid, time, callchain and raw data of a sample body; `None` where
    /// [`parse_sample`] fails (it says why).
    #[inline]
    pub fn parse<'a>(&self, body: &'a [u8], order: ByteOrder) -> Option<SampleParts<'a>> {
        if body.len() < self.fixed {
            return None;
        }
        let word = |at: usize| -> Option<[u8; 8]> { body.get(at..at + 8)?.try_into().ok() };
        let pid_tid = match self.tid {
            Some(at) => {
                let w = word(at)?;
                Some((
                    order.u32([w[0], w[1], w[2], w[3]]),
                    order.u32([w[4], w[5], w[6], w[7]]),
                ))
            }
            None => None,
        };
        let time = match self.time {
            Some(at) => Some(order.u64(word(at)?)),
            None => None,
        };
        let mut pos = self.fixed;
        let callchain = if self.callchain {
            let nr = order.u64(word(pos)?);
            if nr > MAX_CALLCHAIN {
                return None;
            }
            let end = pos + 8 + nr as usize * 8;
            let bytes = body.get(pos + 8..end)?;
            pos = end;
            Some(Callchain { bytes, order })
        } else {
            None
        };
        let raw = if self.raw {
            let n = order.u32(body.get(pos..pos + 4)?.try_into().ok()?) as usize;
            let end = (pos + 4).checked_add(n)?;
            let r = body.get(pos + 4..end)?;
            pos = end;
            Some(r)
        } else {
            None
        };
        let cgroup = if self.cgroup {
            Some(order.u64(word(pos)?))
        } else {
            None
        };
        Some(SampleParts {
            pid_tid,
            time,
            callchain,
            raw,
            cgroup,
        })
    }
}

/// The `sample_id_all` trailer of a non-sample record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SampleId {
    /// `TID`: (pid, tid).
    pub pid_tid: Option<(u32, u32)>,
    /// `TIME`.
    pub time: Option<u64>,
    /// `ID`.
    pub id: Option<u64>,
    /// `STREAM_ID`.
    pub stream_id: Option<u64>,
    /// `CPU`.
    pub cpu: Option<u32>,
    /// `IDENTIFIER`.
    pub identifier: Option<u64>,
}

/// Size in bytes of the `sample_id_all` trailer for `sample_type`.
pub fn sample_id_len(sample_type: u64) -> usize {
    [
        SAMPLE_TID,
        SAMPLE_TIME,
        SAMPLE_ID,
        SAMPLE_STREAM_ID,
        SAMPLE_CPU,
        SAMPLE_IDENTIFIER,
    ]
    .iter()
    .filter(|&&b| sample_type & b != 0)
    .count()
        * 8
}

/// Parses the trailer at the end of `body`. Returns the trailer and the body before it.
pub fn parse_sample_id(
    body: &[u8],
    sample_type: u64,
    order: ByteOrder,
) -> Result<(SampleId, &[u8]), RecordError> {
    let n = sample_id_len(sample_type);
    let start = body.len().checked_sub(n).ok_or(RecordError::Truncated {
        what: "sample_id trailer",
        at: 0,
        need: n,
        len: body.len(),
    })?;
    let mut c = Cur::new(&body[start..], order);
    let has = |bit: u64| sample_type & bit != 0;
    let mut s = SampleId::default();
    if has(SAMPLE_TID) {
        s.pid_tid = Some(c.u32x2("pid/tid")?);
    }
    if has(SAMPLE_TIME) {
        s.time = Some(c.u64("time")?);
    }
    if has(SAMPLE_ID) {
        s.id = Some(c.u64("id")?);
    }
    if has(SAMPLE_STREAM_ID) {
        s.stream_id = Some(c.u64("stream id")?);
    }
    if has(SAMPLE_CPU) {
        s.cpu = Some(c.u32x2("cpu")?.0);
    }
    if has(SAMPLE_IDENTIFIER) {
        s.identifier = Some(c.u64("identifier")?);
    }
    Ok((s, &body[..start]))
}

/// A parsed non-sample record this crate understands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskRecord<'a> {
    /// `PERF_RECORD_COMM`.
    Comm {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// New name (bytes up to the NUL).
        comm: &'a [u8],
        /// Set by exec.
        exec: bool,
    },
    /// `PERF_RECORD_FORK`.
    Fork {
        /// Child pid.
        pid: u32,
        /// Parent pid.
        ppid: u32,
        /// Child tid.
        tid: u32,
        /// Parent tid.
        ptid: u32,
        /// Kernel time of the fork.
        time: u64,
    },
    /// `PERF_RECORD_EXIT`.
    Exit {
        /// Pid.
        pid: u32,
        /// Parent pid.
        ppid: u32,
        /// Tid.
        tid: u32,
        /// Parent tid.
        ptid: u32,
        /// Kernel time of the exit.
        time: u64,
    },
    /// `PERF_RECORD_MMAP2` or `PERF_RECORD_MMAP` of an executable mapping.
    Mmap {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// First address.
        addr: u64,
        /// Length.
        len: u64,
        /// File offset of `addr`.
        pgoff: u64,
        /// The file's device major and minor (0 when the record has the build id instead).
        dev: (u32, u32),
        /// The file's inode (0 likewise).
        ino: u64,
        /// The build id, when the record carries it.
        build_id: &'a [u8],
        /// The path (bytes up to the NUL).
        filename: &'a [u8],
    },
    /// `PERF_RECORD_LOST`.
    Lost {
        /// Id of the event whose records were lost.
        id: u64,
        /// How many.
        lost: u64,
    },
    /// `PERF_RECORD_LOST_SAMPLES`.
    LostSamples {
        /// How many.
        lost: u64,
    },
}

/// Parses a COMM, FORK, EXIT, MMAP, MMAP2, LOST or LOST_SAMPLES record whose trailer is laid
/// out for `sample_type`. Returns `Ok(None)` for other record types, and for mappings of
/// data (`PERF_RECORD_MISC_MMAP_DATA`).
pub fn parse_task_record<'a>(
    rec: &RawRecord<'a>,
    sample_type: u64,
    order: ByteOrder,
) -> Result<Option<(TaskRecord<'a>, SampleId)>, RecordError> {
    if !matches!(
        rec.kind,
        RECORD_COMM
            | RECORD_EXIT
            | RECORD_FORK
            | RECORD_LOST
            | RECORD_LOST_SAMPLES
            | RECORD_MMAP
            | RECORD_MMAP2
    ) || (matches!(rec.kind, RECORD_MMAP | RECORD_MMAP2) && rec.misc & MISC_MMAP_DATA != 0)
    {
        return Ok(None);
    }
    let body = rec.bytes.get(PERF_HEADER_LEN..).unwrap_or_default();
    let (sid, body) = parse_sample_id(body, sample_type, order)?;
    let mut c = Cur::new(body, order);
    let r = match rec.kind {
        RECORD_COMM => {
            let (pid, tid) = c.u32x2("pid/tid")?;
            let rest = &body[8..];
            let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            TaskRecord::Comm {
                pid,
                tid,
                comm: &rest[..end],
                exec: rec.misc & MISC_COMM_EXEC != 0,
            }
        }
        RECORD_FORK | RECORD_EXIT => {
            let (pid, ppid) = c.u32x2("pid/ppid")?;
            let (tid, ptid) = c.u32x2("tid/ptid")?;
            let time = c.u64("time")?;
            if rec.kind == RECORD_FORK {
                TaskRecord::Fork {
                    pid,
                    ppid,
                    tid,
                    ptid,
                    time,
                }
            } else {
                TaskRecord::Exit {
                    pid,
                    ppid,
                    tid,
                    ptid,
                    time,
                }
            }
        }
        RECORD_MMAP | RECORD_MMAP2 => {
            let (pid, tid) = c.u32x2("pid/tid")?;
            let addr = c.u64("mmap address")?;
            let len = c.u64("mmap length")?;
            let pgoff = c.u64("mmap offset")?;
            let (mut dev, mut ino, mut build_id) = ((0, 0), 0, &[][..]);
            if rec.kind == RECORD_MMAP2 {
                if rec.misc & MISC_MMAP_BUILD_ID != 0 {
                    let u = c.take(24, "mmap2 build id")?;
                    build_id = &u[4..4 + (u[0] as usize).min(20)];
                } else {
                    dev = c.u32x2("mmap2 device")?;
                    ino = c.u64("mmap2 inode")?;
                    c.u64("mmap2 inode generation")?;
                }
                c.u32x2("mmap2 prot/flags")?;
            }
            let rest = c.take(body.len() - c.pos, "mmap file name")?;
            let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            TaskRecord::Mmap {
                pid,
                tid,
                addr,
                len,
                pgoff,
                dev,
                ino,
                build_id,
                filename: &rest[..end],
            }
        }
        RECORD_LOST => TaskRecord::Lost {
            id: c.u64("id")?,
            lost: c.u64("lost")?,
        },
        _ => TaskRecord::LostSamples {
            lost: c.u64("lost")?,
        },
    };
    Ok(Some((r, sid)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{self, SampleValues};

    const ST: u64 = SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_RAW;

    #[test]
    fn every_supported_field_round_trips_in_both_orders() {
        let st = SUPPORTED_SAMPLE_TYPE;
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let v = SampleValues {
                identifier: 11,
                ip: 0xffffffff81000000,
                pid: 100,
                tid: 101,
                time: 123456789,
                addr: 0xdead,
                id: 11,
                stream_id: 12,
                cpu: 3,
                period: 1,
                callchain: vec![CONTEXT_KERNEL, 0xffffffff81000010, 0xffffffff81000020],
                raw: vec![1, 2, 3, 4, 5],
                cgroup: 4242,
            };
            let rec = synth::sample_record(st, order, &v);
            assert_eq!(rec.len() % 8, 0);
            let raw = RawRecord {
                kind: RECORD_SAMPLE,
                misc: 0,
                bytes: &rec,
            };
            let s = parse_sample(raw.body(), st, order).unwrap();
            assert_eq!(s.identifier, Some(11));
            assert_eq!(s.ip, Some(0xffffffff81000000));
            assert_eq!(s.pid_tid, Some((100, 101)));
            assert_eq!(s.time, Some(123456789));
            assert_eq!(s.addr, Some(0xdead));
            assert_eq!(
                (s.id, s.stream_id, s.cpu, s.period),
                (Some(11), Some(12), Some(3), Some(1))
            );
            assert_eq!(
                &*s.callchain.unwrap().kernel(),
                &[0xffffffff81000010, 0xffffffff81000020]
            );
            // The kernel pads the raw data (u32 size included) to 8 bytes.
            assert_eq!(s.raw.unwrap().len(), 12);
            assert_eq!(&s.raw.unwrap()[..5], &[1u8, 2, 3, 4, 5][..]);
            assert_eq!(s.cgroup, Some(4242));
            // Every truncation is an error, never a panic.
            for cut in 0..raw.body().len() {
                assert!(
                    parse_sample(&raw.body()[..cut], st, order).is_err(),
                    "cut {cut}"
                );
            }
        }
    }

    /// The layout reads what parse_sample reads, for every subset of the supported fields,
    /// in both byte orders, and fails on every truncation where parse_sample fails.
    #[test]
    fn layout_agrees_with_the_full_walk() {
        let bits: Vec<u64> = FIXED_SAMPLE_FIELDS
            .into_iter()
            .chain([SAMPLE_CALLCHAIN, SAMPLE_RAW, SAMPLE_CGROUP])
            .collect();
        let v = SampleValues {
            identifier: 11,
            ip: 1,
            pid: 100,
            tid: 101,
            time: 123456789,
            addr: 2,
            id: 11,
            stream_id: 12,
            cpu: 3,
            period: 1,
            callchain: vec![CONTEXT_KERNEL, 0xffffffff81000010],
            raw: vec![1, 2, 3, 4, 5],
            cgroup: 4242,
        };
        for mask in 0..1u32 << bits.len() {
            let st = bits
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & 1 << i != 0)
                .fold(0, |a, (_, b)| a | b);
            let l = SampleLayout::new(st).unwrap();
            for order in [ByteOrder::Little, ByteOrder::Big] {
                let rec = synth::sample_record(st, order, &v);
                let body = &rec[8..];
                let full = SampleParts::from(parse_sample(body, st, order).unwrap());
                assert_eq!(l.parse(body, order), Some(full), "sample type {st:#x}");
                for cut in 0..body.len() {
                    let short = &body[..cut];
                    assert_eq!(
                        l.parse(short, order).is_some(),
                        parse_sample(short, st, order).is_ok(),
                        "sample type {st:#x} cut {cut}"
                    );
                }
            }
        }
        assert!(SampleLayout::new(ST | SAMPLE_READ).is_none());
    }

    #[test]
    fn unsupported_bits_are_rejected() {
        let e = check_sample_type(ST | SAMPLE_READ).unwrap_err();
        assert!(e.to_string().contains("0x10"), "{e}");
        assert!(parse_sample(&[0; 64], ST | (1 << 11), ByteOrder::Little).is_err());
    }

    /// A record's bytes as the chunk reader hands them on.
    fn raw_of(rec: &[u8], order: ByteOrder) -> RawRecord<'_> {
        RawRecord {
            kind: order.u32([rec[0], rec[1], rec[2], rec[3]]),
            misc: order.u16([rec[4], rec[5]]),
            bytes: rec,
        }
    }

    #[test]
    fn mmap2_records_with_device_or_build_id_parse_and_data_ones_are_not_ours() {
        let sid = synth::SampleIdValues {
            pid: 9,
            tid: 9,
            time: 77,
            ..Default::default()
        };
        let st = SAMPLE_TID | SAMPLE_TIME | SAMPLE_IDENTIFIER;
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let mut m = synth::MmapValues {
                pid: 9,
                tid: 10,
                addr: 0x5555_0000_1000,
                len: 0x3000,
                pgoff: 0x1000,
                dev: (8, 1),
                ino: 42,
                path: "/usr/bin/app",
                ..Default::default()
            };
            let rec = synth::mmap2_record(st, order, &m, &sid);
            let raw = raw_of(&rec, order);
            let (r, s) = parse_task_record(&raw, st, order).unwrap().unwrap();
            assert_eq!(s.time, Some(77));
            assert_eq!(
                r,
                TaskRecord::Mmap {
                    pid: 9,
                    tid: 10,
                    addr: 0x5555_0000_1000,
                    len: 0x3000,
                    pgoff: 0x1000,
                    dev: (8, 1),
                    ino: 42,
                    build_id: &[],
                    filename: b"/usr/bin/app",
                }
            );
            let id: Vec<u8> = (1..=20).collect();
            m.build_id = &id;
            let rec = synth::mmap2_record(st, order, &m, &sid);
            let raw = raw_of(&rec, order);
            let (r, _) = parse_task_record(&raw, st, order).unwrap().unwrap();
            assert!(
                matches!(r, TaskRecord::Mmap { build_id, dev: (0, 0), ino: 0, .. } if build_id == &id[..])
            );
            m.data = true;
            let rec = synth::mmap2_record(st, order, &m, &sid);
            let raw = raw_of(&rec, order);
            assert_eq!(parse_task_record(&raw, st, order).unwrap(), None);
            // Cut anywhere: an error, never a panic.
            m.data = false;
            let rec = synth::mmap2_record(st, order, &m, &sid);
            for cut in 8..rec.len() {
                let _ = parse_task_record(&raw_of(&rec[..cut], order), st, order);
            }
        }
    }

    #[test]
    fn user_part_of_a_callchain_is_kept_behind_the_mark() {
        let user = -512i64 as u64;
        let v = SampleValues {
            callchain: vec![CONTEXT_KERNEL, 1, 2, user, 3, 4],
            ..Default::default()
        };
        let rec = synth::sample_record(SAMPLE_CALLCHAIN, ByteOrder::Little, &v);
        let s = parse_sample(&rec[8..], SAMPLE_CALLCHAIN, ByteOrder::Little).unwrap();
        let c = s.callchain.unwrap();
        assert_eq!(&*c.kernel(), &[1, 2]);
        let frames = c.frames();
        assert_eq!(&*frames, &[1, 2, ioblame_events::USER_MARK, 3, 4]);
        assert_eq!(ioblame_events::kernel_frames(&frames), &[1, 2]);
        assert_eq!(ioblame_events::user_frames(&frames), &[3, 4]);
        // Only user frames (a stack sample taken in user space): the mark first.
        let v = SampleValues {
            callchain: vec![user, 3, 4],
            ..Default::default()
        };
        let rec = synth::sample_record(SAMPLE_CALLCHAIN, ByteOrder::Little, &v);
        let s = parse_sample(&rec[8..], SAMPLE_CALLCHAIN, ByteOrder::Little).unwrap();
        assert_eq!(
            &*s.callchain.unwrap().frames(),
            &[ioblame_events::USER_MARK, 3, 4]
        );
        // No user frames: no mark.
        let v = SampleValues {
            callchain: vec![CONTEXT_KERNEL, 1, user],
            ..Default::default()
        };
        let rec = synth::sample_record(SAMPLE_CALLCHAIN, ByteOrder::Little, &v);
        let s = parse_sample(&rec[8..], SAMPLE_CALLCHAIN, ByteOrder::Little).unwrap();
        assert_eq!(&*s.callchain.unwrap().frames(), &[1]);
        // A huge declared length is refused before anything is read or allocated.
        let mut bad = vec![0u8; 16];
        bad[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse_sample(&bad, SAMPLE_CALLCHAIN, ByteOrder::Little).is_err());
        bad[..8].copy_from_slice(&1000u64.to_le_bytes());
        assert!(matches!(
            parse_sample(&bad, SAMPLE_CALLCHAIN, ByteOrder::Little),
            Err(RecordError::Truncated { .. })
        ));
    }

    #[test]
    fn task_records_and_trailers() {
        assert_eq!(sample_id_len(ST), 32);
        assert_eq!(sample_id_len(SAMPLE_RAW | SAMPLE_CALLCHAIN), 0);
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let sid = synth::SampleIdValues {
                pid: 5,
                tid: 6,
                time: 77,
                cpu: 1,
                identifier: 42,
                ..Default::default()
            };
            let rec = synth::comm_record(ST, order, 5, 6, "kworker/u8:1", true, &sid);
            let raw = RawRecord {
                kind: RECORD_COMM,
                misc: MISC_COMM_EXEC,
                bytes: &rec,
            };
            let (r, s) = parse_task_record(&raw, ST, order).unwrap().unwrap();
            assert_eq!(
                r,
                TaskRecord::Comm {
                    pid: 5,
                    tid: 6,
                    comm: b"kworker/u8:1",
                    exec: true
                }
            );
            assert_eq!(s.time, Some(77));
            assert_eq!(s.pid_tid, Some((5, 6)));
            assert_eq!(s.cpu, Some(1));
            assert_eq!(s.identifier, Some(42));

            let rec = synth::fork_exit_record(RECORD_FORK, ST, order, (9, 5, 10, 6), 70, &sid);
            let raw = RawRecord {
                kind: RECORD_FORK,
                misc: 0,
                bytes: &rec,
            };
            let (r, _) = parse_task_record(&raw, ST, order).unwrap().unwrap();
            assert_eq!(
                r,
                TaskRecord::Fork {
                    pid: 9,
                    ppid: 5,
                    tid: 10,
                    ptid: 6,
                    time: 70
                }
            );
            let rec = synth::lost_record(ST, order, 42, 1000, &sid);
            let raw = RawRecord {
                kind: RECORD_LOST,
                misc: 0,
                bytes: &rec,
            };
            let (r, _) = parse_task_record(&raw, ST, order).unwrap().unwrap();
            assert_eq!(r, TaskRecord::Lost { id: 42, lost: 1000 });
            // Truncated: header only.
            let raw = RawRecord {
                kind: RECORD_LOST,
                misc: 0,
                bytes: &rec[..8],
            };
            assert!(parse_task_record(&raw, ST, order).is_err());
        }
    }
}
