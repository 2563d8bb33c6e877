//! `PERF_RECORD_SAMPLE`: the sample layout computed from the sample type, the full walk
//! over every field, and the callchain.

use crate::consts::{
    CONTEXT_KERNEL, CONTEXT_MAX, CONTEXT_USER, MAX_CALLCHAIN, MAX_STACK_USER, REGS_ABI_NONE,
    SAMPLE_ADDR, SAMPLE_CALLCHAIN, SAMPLE_CGROUP, SAMPLE_CPU, SAMPLE_DATA_SRC, SAMPLE_ID,
    SAMPLE_IDENTIFIER, SAMPLE_IP, SAMPLE_PERIOD, SAMPLE_RAW, SAMPLE_REGS_USER, SAMPLE_STACK_USER,
    SAMPLE_STREAM_ID, SAMPLE_TID, SAMPLE_TIME, SAMPLE_WEIGHT, SUPPORTED_SAMPLE_TYPE,
};
use crate::cursor::Cur;
use crate::error::{check_sample_type, RecordError};
use crate::order::ByteOrder;

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
    /// frames, [`CONTEXT_USER`] (which `ioblame-events` names `USER_MARK`) and the user addresses, innermost first (the
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

    /// The user frames as recorded: the entries after the first `PERF_CONTEXT_USER` up to
    /// the next context marker (empty when the chain has none).
    pub fn user(&self) -> &'a [u8] {
        let mut from = None;
        for (i, ip) in self.raw().enumerate() {
            match from {
                None if ip == CONTEXT_USER => from = Some(i + 1),
                Some(f) if ip >= CONTEXT_MAX => return &self.bytes[f * 8..i * 8],
                _ => {}
            }
        }
        from.map_or(&[], |f| &self.bytes[f * 8..])
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

/// The user registers of a sample (`REGS_USER`), as they sit in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserRegs<'a> {
    /// `PERF_SAMPLE_REGS_ABI_*` ([`crate::REGS_ABI_64`] on a 64-bit task).
    pub abi: u64,
    /// The registers of the mask, one u64 each in the order of their bits.
    bytes: &'a [u8],
    mask: u64,
    order: ByteOrder,
}

impl UserRegs<'_> {
    /// Register `reg` (its bit number in the architecture's `perf_event_x86_regs` or
    /// `perf_event_arm64_regs`), if the mask has it.
    pub fn get(&self, reg: u32) -> Option<u64> {
        if reg >= 64 || self.mask & (1 << reg) == 0 {
            return None;
        }
        let i = (self.mask & ((1u64 << reg) - 1)).count_ones() as usize;
        let w: [u8; 8] = self.bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?;
        Some(self.order.u64(w))
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
    /// `REGS_USER`: `None` also when the task had none (a kernel thread).
    pub regs_user: Option<UserRegs<'a>>,
    /// `STACK_USER`: the bytes the kernel could copy (`dyn_size` of them), from the user
    /// stack pointer up; `None` also when it copied none.
    pub stack_user: Option<&'a [u8]>,
    /// The kernel copied all the stack it was asked for (`dyn_size` = `size`): the stack
    /// may go on above the copy.
    pub stack_user_full: bool,
    /// `CGROUP`: the task's cgroup id in the cgroup2 hierarchy.
    pub cgroup: Option<u64>,
}

/// Parses a sample body (after the perf header) laid out for `sample_type`, which must have
/// passed [`check_sample_type`] and have no `REGS_USER` ([`parse_sample_regs`] reads those).
pub fn parse_sample(
    body: &[u8],
    sample_type: u64,
    order: ByteOrder,
) -> Result<Sample<'_>, RecordError> {
    parse_sample_regs(body, sample_type, 0, order)
}

/// [`parse_sample`] of samples whose user registers are those of `regs_mask`
/// (`perf_event_attr.sample_regs_user`).
pub fn parse_sample_regs(
    body: &[u8],
    sample_type: u64,
    regs_mask: u64,
    order: ByteOrder,
) -> Result<Sample<'_>, RecordError> {
    check_sample_type(sample_type)?;
    if sample_type & SAMPLE_REGS_USER != 0 && regs_mask == 0 {
        return Err(RecordError::NoRegsMask);
    }
    let mut c = Cur::new(body, order);
    let mut s = Sample::default();
    let has = |bit: u64| sample_type & bit != 0;
    s.identifier = c.u64_if(has(SAMPLE_IDENTIFIER), "identifier")?;
    s.ip = c.u64_if(has(SAMPLE_IP), "ip")?;
    s.pid_tid = c.u32x2_if(has(SAMPLE_TID), "pid/tid")?;
    s.time = c.u64_if(has(SAMPLE_TIME), "time")?;
    s.addr = c.u64_if(has(SAMPLE_ADDR), "addr")?;
    s.id = c.u64_if(has(SAMPLE_ID), "id")?;
    s.stream_id = c.u64_if(has(SAMPLE_STREAM_ID), "stream id")?;
    s.cpu = c.u32x2_if(has(SAMPLE_CPU), "cpu")?.map(|(cpu, _)| cpu);
    s.period = c.u64_if(has(SAMPLE_PERIOD), "period")?;
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
    if has(SAMPLE_REGS_USER) {
        let abi = c.u64("user regs abi")?;
        if abi != REGS_ABI_NONE {
            let n = regs_mask.count_ones() as usize * 8;
            s.regs_user = Some(UserRegs {
                abi,
                bytes: c.take(n, "user regs")?,
                mask: regs_mask,
                order,
            });
        }
    }
    if has(SAMPLE_STACK_USER) {
        let size = c.u64("user stack size")?;
        if size > MAX_STACK_USER {
            return Err(RecordError::StackTooLarge(size));
        }
        if size > 0 {
            let data = c.take(size as usize, "user stack")?;
            let dyn_size = c.u64("user stack dyn size")?.min(size) as usize;
            s.stack_user = (dyn_size > 0).then(|| &data[..dyn_size]);
            s.stack_user_full = dyn_size as u64 == size;
        }
    }
    c.u64_if(has(SAMPLE_WEIGHT), "weight")?;
    c.u64_if(has(SAMPLE_DATA_SRC), "data source")?;
    s.cgroup = c.u64_if(has(SAMPLE_CGROUP), "cgroup")?;
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
    /// `REGS_USER`'s mask (0: the sample type has no `REGS_USER`).
    regs_mask: u64,
    stack_user: bool,
    /// u64 fields after `STACK_USER` read past (`WEIGHT`, `DATA_SRC`).
    skipped: usize,
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
    /// `REGS_USER`, when the task had user registers.
    pub regs_user: Option<UserRegs<'a>>,
    /// `STACK_USER`, when the kernel copied some.
    pub stack_user: Option<&'a [u8]>,
    /// The kernel copied all the stack it was asked for.
    pub stack_user_full: bool,
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
            regs_user: s.regs_user,
            stack_user: s.stack_user,
            stack_user_full: s.stack_user_full,
            cgroup: s.cgroup,
        }
    }
}

/// The fixed-size fields of a sample, in the order they are recorded (and [`parse_sample`]
/// reads them); the callchain and the raw data follow. `SAMPLE_TID` and `SAMPLE_CPU` are two
/// `u32` each, the others one `u64`.
pub const FIXED_SAMPLE_FIELDS: [u64; 9] = [
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
    /// The layout of `sample_type`; `None` when [`parse_sample`] does not support it (a
    /// sample type with `REGS_USER` needs [`SampleLayout::with_regs`]).
    /// A `const fn`, so that a recorder's fixed sample type gives constant offsets.
    pub const fn new(sample_type: u64) -> Option<SampleLayout> {
        SampleLayout::with_regs(sample_type, 0)
    }

    /// The layout of `sample_type` whose user registers are those of `regs_mask`; `None`
    /// when [`parse_sample_regs`] does not support it.
    pub const fn with_regs(sample_type: u64, regs_mask: u64) -> Option<SampleLayout> {
        if sample_type & !SUPPORTED_SAMPLE_TYPE != 0 {
            return None;
        }
        let regs = sample_type & SAMPLE_REGS_USER != 0;
        if regs && regs_mask == 0 {
            return None;
        }
        let mut l = SampleLayout {
            fixed: 0,
            tid: None,
            time: None,
            callchain: sample_type & SAMPLE_CALLCHAIN != 0,
            raw: sample_type & SAMPLE_RAW != 0,
            regs_mask: if regs { regs_mask } else { 0 },
            stack_user: sample_type & SAMPLE_STACK_USER != 0,
            skipped: (sample_type & SAMPLE_WEIGHT != 0) as usize
                + (sample_type & SAMPLE_DATA_SRC != 0) as usize,
            cgroup: sample_type & SAMPLE_CGROUP != 0,
        };
        let mut i = 0;
        while i < FIXED_SAMPLE_FIELDS.len() {
            let bit = FIXED_SAMPLE_FIELDS[i];
            if sample_type & bit != 0 {
                if bit == SAMPLE_TID {
                    l.tid = Some(l.fixed);
                } else if bit == SAMPLE_TIME {
                    l.time = Some(l.fixed);
                }
                l.fixed += 8;
            }
            i += 1;
        }
        Some(l)
    }

    /// Bytes of the fixed-size fields (`IDENTIFIER` to `PERIOD`): where the callchain, or
    /// without one the raw data's size, starts in the body.
    pub const fn fixed_len(&self) -> usize {
        self.fixed
    }

    /// Where the `TID` field lies in the body, if the sample type has it.
    pub const fn tid_at(&self) -> Option<usize> {
        self.tid
    }

    /// Where the `TIME` field lies in the body, if the sample type has it.
    pub const fn time_at(&self) -> Option<usize> {
        self.time
    }

    /// Where the callchain (its length, then its entries) starts in the body, if the sample
    /// type has one.
    pub const fn callchain_at(&self) -> Option<usize> {
        if self.callchain {
            Some(self.fixed)
        } else {
            None
        }
    }

    /// The pid/tid, time, callchain, raw data, user registers and stack of a sample body;
    /// `None` where [`parse_sample_regs`] fails (it says why).
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
        let mut regs_user = None;
        if self.regs_mask != 0 {
            let abi = order.u64(word(pos)?);
            pos += 8;
            if abi != REGS_ABI_NONE {
                let end = pos + self.regs_mask.count_ones() as usize * 8;
                regs_user = Some(UserRegs {
                    abi,
                    bytes: body.get(pos..end)?,
                    mask: self.regs_mask,
                    order,
                });
                pos = end;
            }
        }
        let mut stack_user = None;
        let mut stack_user_full = false;
        if self.stack_user {
            let size = order.u64(word(pos)?);
            pos += 8;
            if size > MAX_STACK_USER {
                return None;
            }
            if size > 0 {
                let data = body.get(pos..pos + size as usize)?;
                pos += size as usize;
                let dyn_size = order.u64(word(pos)?).min(size) as usize;
                pos += 8;
                stack_user = (dyn_size > 0).then(|| &data[..dyn_size]);
                stack_user_full = dyn_size as u64 == size;
            }
        }
        if self.skipped > 0 {
            body.get(pos..pos + 8 * self.skipped)?;
            pos += 8 * self.skipped;
        }
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
            regs_user,
            stack_user,
            stack_user_full,
            cgroup,
        })
    }
}
