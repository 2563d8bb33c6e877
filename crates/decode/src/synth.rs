//! Synthetic traces: encode perf records and tracepoint payloads from typed values, in
//! either byte order, and write them as an ioblame trace. For tests of this crate and of the
//! attribution, and for benchmark generators.
//!
//! ```
//! use ioblame_decode::synth::{TraceBuilder, Val, builtin_format};
//! use ioblame_format::ByteOrder;
//! let mut t = TraceBuilder::new(ByteOrder::Big, 2);
//! let q = t.add_event("block:block_bio_queue", builtin_format("block:block_bio_queue").unwrap(), true).unwrap();
//! t.sample(1, q, 1000, 42, 43, &[0xffffffff81000000], &[
//!     ("dev", Val::U(7 << 20)), ("sector", Val::U(2048)), ("nr_sector", Val::U(8)),
//!     ("rwbs", Val::Str("WS")), ("comm", Val::Str("dd")),
//! ]).unwrap();
//! let dir = tempfile::tempdir().unwrap();
//! t.write(dir.path()).unwrap();
//! ```

use std::path::Path;

use ioblame_format::{
    ByteOrder, ChunkBuilder, EncodedChunk, EventDesc, Header, Metadata, RingOptions, RingStats,
    RingWriter, EVENT_CALLCHAIN, EVENT_TASK_RECORDS,
};

use crate::format::{EventFormat, FieldError, FieldLayout, FormatError};
use crate::record::{
    CONTEXT_KERNEL, MISC_COMM_EXEC, RECORD_COMM, RECORD_LOST, RECORD_LOST_SAMPLES, RECORD_SAMPLE,
    SAMPLE_ADDR, SAMPLE_CALLCHAIN, SAMPLE_CGROUP, SAMPLE_CPU, SAMPLE_ID, SAMPLE_IDENTIFIER,
    SAMPLE_IP, SAMPLE_PERIOD, SAMPLE_RAW, SAMPLE_REGS_USER, SAMPLE_STACK_USER, SAMPLE_STREAM_ID,
    SAMPLE_TID, SAMPLE_TIME,
};

/// The sample type the ioblame capture uses (callchains added per event).
pub const CAPTURE_SAMPLE_TYPE: u64 =
    SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_RAW;

/// Values of a sample record; those absent from the sample type are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampleValues {
    /// `IDENTIFIER`.
    pub identifier: u64,
    /// `IP`.
    pub ip: u64,
    /// `TID` pid.
    pub pid: u32,
    /// `TID` tid.
    pub tid: u32,
    /// `TIME`.
    pub time: u64,
    /// `ADDR`.
    pub addr: u64,
    /// `ID`.
    pub id: u64,
    /// `STREAM_ID`.
    pub stream_id: u64,
    /// `CPU`.
    pub cpu: u32,
    /// `PERIOD`.
    pub period: u64,
    /// `CALLCHAIN` entries as the kernel writes them (markers included).
    pub callchain: Vec<u64>,
    /// `RAW` payload.
    pub raw: Vec<u8>,
    /// `CGROUP`.
    pub cgroup: u64,
    /// `REGS_USER`: the registers of the mask (none: a kernel thread's, ABI 0).
    pub regs_user: Vec<u64>,
    /// `STACK_USER`: the bytes copied (none: size 0), padded to 8 in the record.
    pub stack_user: Vec<u8>,
}

/// Values of a `sample_id_all` trailer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleIdValues {
    /// pid.
    pub pid: u32,
    /// tid.
    pub tid: u32,
    /// time.
    pub time: u64,
    /// `ID`.
    pub id: u64,
    /// `STREAM_ID`.
    pub stream_id: u64,
    /// cpu.
    pub cpu: u32,
    /// `IDENTIFIER`.
    pub identifier: u64,
}

struct W {
    b: Vec<u8>,
    o: ByteOrder,
}

impl W {
    fn new(o: ByteOrder, kind: u32, misc: u16) -> W {
        let mut w = W {
            b: Vec::with_capacity(64),
            o,
        };
        w.u32(kind);
        w.u16(misc);
        w.u16(0);
        w
    }
    fn u16(&mut self, v: u16) {
        self.b.extend_from_slice(&self.o.put16(v));
    }
    fn u32(&mut self, v: u32) {
        self.b.extend_from_slice(&self.o.put32(v));
    }
    fn u64(&mut self, v: u64) {
        self.b.extend_from_slice(&self.o.put64(v));
    }
    fn pad8(&mut self) {
        while self.b.len() % 8 != 0 {
            self.b.push(0);
        }
    }
    /// A NUL-terminated string, padded to 8 bytes (comm and mmap file names).
    fn cstr(&mut self, s: &str) {
        self.b.extend_from_slice(s.as_bytes());
        self.b.push(0);
        self.pad8();
    }
    fn sample_id(&mut self, st: u64, s: &SampleIdValues) {
        if st & SAMPLE_TID != 0 {
            self.u32(s.pid);
            self.u32(s.tid);
        }
        if st & SAMPLE_TIME != 0 {
            self.u64(s.time);
        }
        if st & SAMPLE_ID != 0 {
            self.u64(s.id);
        }
        if st & SAMPLE_STREAM_ID != 0 {
            self.u64(s.stream_id);
        }
        if st & SAMPLE_CPU != 0 {
            self.u32(s.cpu);
            self.u32(0);
        }
        if st & SAMPLE_IDENTIFIER != 0 {
            self.u64(s.identifier);
        }
    }
    fn finish(mut self) -> Vec<u8> {
        self.pad8();
        let n = self.b.len().min(u16::MAX as usize) as u16;
        self.b[6..8].copy_from_slice(&self.o.put16(n));
        self.b
    }
    /// Ends a non-sample record: its `sample_id` trailer for `st`, then [`W::finish`].
    fn finish_with_id(mut self, st: u64, s: &SampleIdValues) -> Vec<u8> {
        self.sample_id(st, s);
        self.finish()
    }
}

/// Encodes a whole `PERF_RECORD_SAMPLE` (header included) for `sample_type`.
pub fn sample_record(sample_type: u64, order: ByteOrder, v: &SampleValues) -> Vec<u8> {
    let mut w = W::new(order, RECORD_SAMPLE, 1);
    let has = |b: u64| sample_type & b != 0;
    // The fixed fields in the order the reader takes them.
    for bit in ioblame_perfrec::FIXED_SAMPLE_FIELDS {
        match bit {
            _ if !has(bit) => {}
            SAMPLE_TID => {
                w.u32(v.pid);
                w.u32(v.tid);
            }
            SAMPLE_CPU => {
                w.u32(v.cpu);
                w.u32(0);
            }
            SAMPLE_IDENTIFIER => w.u64(v.identifier),
            SAMPLE_IP => w.u64(v.ip),
            SAMPLE_TIME => w.u64(v.time),
            SAMPLE_ADDR => w.u64(v.addr),
            SAMPLE_ID => w.u64(v.id),
            SAMPLE_STREAM_ID => w.u64(v.stream_id),
            SAMPLE_PERIOD => w.u64(v.period),
            _ => {}
        }
    }
    if has(SAMPLE_CALLCHAIN) {
        w.u64(v.callchain.len() as u64);
        for &ip in &v.callchain {
            w.u64(ip);
        }
    }
    if has(SAMPLE_RAW) {
        // The kernel pads `u32 size` + data to a multiple of 8 and counts the padding in size.
        let padded = (v.raw.len() + 4).div_ceil(8) * 8 - 4;
        w.u32(padded as u32);
        w.b.extend_from_slice(&v.raw);
        w.b.resize(w.b.len() + padded - v.raw.len(), 0);
    }
    if has(SAMPLE_REGS_USER) {
        if v.regs_user.is_empty() {
            w.u64(ioblame_perfrec::REGS_ABI_NONE);
        } else {
            w.u64(ioblame_perfrec::REGS_ABI_64);
            for &r in &v.regs_user {
                w.u64(r);
            }
        }
    }
    if has(SAMPLE_STACK_USER) {
        let size = v.stack_user.len().next_multiple_of(8);
        w.u64(size as u64);
        if size > 0 {
            w.b.extend_from_slice(&v.stack_user);
            w.b.resize(w.b.len() + size - v.stack_user.len(), 0);
            w.u64(v.stack_user.len() as u64);
        }
    }
    // WEIGHT and DATA_SRC: read past by the reader.
    for bit in [
        ioblame_perfrec::SAMPLE_WEIGHT,
        ioblame_perfrec::SAMPLE_DATA_SRC,
    ] {
        if has(bit) {
            w.u64(0);
        }
    }
    if has(SAMPLE_CGROUP) {
        w.u64(v.cgroup);
    }
    w.finish()
}

/// Encodes a `PERF_RECORD_COMM` with its trailer for `sample_type`.
pub fn comm_record(
    sample_type: u64,
    order: ByteOrder,
    pid: u32,
    tid: u32,
    comm: &str,
    exec: bool,
    sid: &SampleIdValues,
) -> Vec<u8> {
    let mut w = W::new(order, RECORD_COMM, if exec { MISC_COMM_EXEC } else { 0 });
    w.u32(pid);
    w.u32(tid);
    w.cstr(comm);
    w.finish_with_id(sample_type, sid)
}

/// Encodes a `PERF_RECORD_FORK` or `PERF_RECORD_EXIT` (`kind` 7 or 4); `ids` is
/// `(pid, ppid, tid, ptid)`.
pub fn fork_exit_record(
    kind: u32,
    sample_type: u64,
    order: ByteOrder,
    ids: (u32, u32, u32, u32),
    time: u64,
    sid: &SampleIdValues,
) -> Vec<u8> {
    let mut w = W::new(order, kind, 0);
    w.u32(ids.0);
    w.u32(ids.1);
    w.u32(ids.2);
    w.u32(ids.3);
    w.u64(time);
    w.finish_with_id(sample_type, sid)
}

/// A mapping for [`mmap2_record`].
#[derive(Debug, Clone, Default)]
pub struct MmapValues<'a> {
    /// Process and thread.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// First address, length, file offset.
    pub addr: u64,
    /// Length.
    pub len: u64,
    /// File offset of `addr`.
    pub pgoff: u64,
    /// Device (major, minor) and inode, written when `build_id` is empty.
    pub dev: (u32, u32),
    /// Inode.
    pub ino: u64,
    /// Build id (at most 20 bytes): written in place of the device and inode.
    pub build_id: &'a [u8],
    /// Path.
    pub path: &'a str,
    /// `PERF_RECORD_MISC_MMAP_DATA`.
    pub data: bool,
}

/// Encodes a `PERF_RECORD_MMAP2`.
pub fn mmap2_record(
    sample_type: u64,
    order: ByteOrder,
    m: &MmapValues<'_>,
    sid: &SampleIdValues,
) -> Vec<u8> {
    let mut misc = if m.build_id.is_empty() {
        0
    } else {
        crate::record::MISC_MMAP_BUILD_ID
    };
    if m.data {
        misc |= crate::record::MISC_MMAP_DATA;
    }
    let mut w = W::new(order, crate::record::RECORD_MMAP2, misc);
    w.u32(m.pid);
    w.u32(m.tid);
    w.u64(m.addr);
    w.u64(m.len);
    w.u64(m.pgoff);
    if m.build_id.is_empty() {
        w.u32(m.dev.0);
        w.u32(m.dev.1);
        w.u64(m.ino);
        w.u64(0);
    } else {
        let n = m.build_id.len().min(20);
        w.b.push(n as u8);
        w.b.extend_from_slice(&[0, 0, 0]);
        w.b.extend_from_slice(&m.build_id[..n]);
        w.b.extend(std::iter::repeat_n(0, 20 - n));
    }
    w.u32(5); // PROT_READ | PROT_EXEC
    w.u32(2); // MAP_PRIVATE
    w.cstr(m.path);
    w.finish_with_id(sample_type, sid)
}

/// Encodes a `PERF_RECORD_LOST`.
pub fn lost_record(
    sample_type: u64,
    order: ByteOrder,
    id: u64,
    lost: u64,
    sid: &SampleIdValues,
) -> Vec<u8> {
    let mut w = W::new(order, RECORD_LOST, 0);
    w.u64(id);
    w.u64(lost);
    w.finish_with_id(sample_type, sid)
}

/// Encodes a `PERF_RECORD_LOST_SAMPLES`.
pub fn lost_samples_record(
    sample_type: u64,
    order: ByteOrder,
    lost: u64,
    sid: &SampleIdValues,
) -> Vec<u8> {
    let mut w = W::new(order, RECORD_LOST_SAMPLES, 0);
    w.u64(lost);
    w.finish_with_id(sample_type, sid)
}

/// A value for a payload field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Val<'a> {
    /// An unsigned integer (truncated to the field's size).
    U(u64),
    /// A signed integer (two's complement, truncated to the field's size).
    I(i64),
    /// A string for a `char[N]` (NUL-padded, cut to `N - 1`) or a `__data_loc` field.
    Str(&'a str),
}

/// Builds a tracepoint payload for a format: `common_type` is the format's id, every other
/// field starts at zero.
pub fn payload(
    fmt: &EventFormat,
    order: ByteOrder,
    common_pid: i32,
    values: &[(&str, Val<'_>)],
) -> Result<Vec<u8>, FieldError> {
    let fixed = fmt
        .fields
        .iter()
        .map(|f| f.offset + f.size)
        .max()
        .unwrap_or(0);
    let mut b = vec![0u8; fixed];
    let put = |b: &mut Vec<u8>, off: usize, size: usize, v: u64| {
        let bytes = order.put64(v);
        let src = match order {
            ByteOrder::Little => &bytes[..size],
            ByteOrder::Big => &bytes[8 - size..],
        };
        b[off..off + size].copy_from_slice(src);
    };
    let mut all: Vec<(&str, Val<'_>)> = vec![
        ("common_type", Val::U(fmt.id as u64)),
        ("common_pid", Val::I(common_pid as i64)),
    ];
    all.extend_from_slice(values);
    for (name, v) in all {
        let spec = fmt.spec(name).ok_or_else(|| FieldError::MissingField {
            event: fmt.name.clone(),
            field: name.to_string(),
        })?;
        let f = crate::format::Field::from_spec(spec);
        let bad = |what: &str| FieldError::BadField {
            event: fmt.name.clone(),
            field: name.to_string(),
            what: what.to_string(),
        };
        match v {
            Val::U(x) => {
                if !f.is_integer() {
                    return Err(bad("not an integer field"));
                }
                put(&mut b, spec.offset, spec.size, x);
            }
            Val::I(x) => {
                if !f.is_integer() {
                    return Err(bad("not an integer field"));
                }
                put(&mut b, spec.offset, spec.size, x as u64);
            }
            Val::Str(s) => match f.layout {
                FieldLayout::Inline if f.array => {
                    let n = s.len().min(spec.size.saturating_sub(1));
                    b[spec.offset..spec.offset + spec.size].fill(0);
                    b[spec.offset..spec.offset + n].copy_from_slice(&s.as_bytes()[..n]);
                }
                FieldLayout::Inline => return Err(bad("not a string field")),
                FieldLayout::DataLoc | FieldLayout::RelLoc => {
                    let at = b.len();
                    b.extend_from_slice(s.as_bytes());
                    b.push(0);
                    let len = s.len() + 1;
                    let off = if f.layout == FieldLayout::RelLoc {
                        at - (spec.offset + 4)
                    } else {
                        at
                    };
                    if off > 0xffff || len > 0xffff {
                        return Err(bad("string does not fit a __data_loc"));
                    }
                    put(&mut b, spec.offset, 4, ((len as u64) << 16) | off as u64);
                }
            },
        }
    }
    Ok(b)
}

/// The 6.18 format text of a tracepoint of the event registry (`subsystem:name`), from
/// `crates/events/formats` ([`ioblame_events::builtin_format`]).
pub fn builtin_format(name: &str) -> Option<&'static str> {
    ioblame_events::builtin_format(name)
}

/// Builds a synthetic trace: events, per-CPU chunks of hand-made records, then writes it.
#[derive(Debug)]
pub struct TraceBuilder {
    order: ByteOrder,
    header: Header,
    meta: Metadata,
    formats: Vec<EventFormat>,
    builders: Vec<ChunkBuilder>,
    chunks: Vec<EncodedChunk>,
    next_id: u64,
    task_sample_type: u64,
    cgroup: u64,
    /// The user registers and stack copy the next samples of events recorded with them
    /// carry ([`TraceBuilder::copy_user_stacks`]).
    user_copy: (Vec<u64>, Vec<u8>),
}

impl TraceBuilder {
    /// A builder for a trace of `cpus` CPUs recorded on a host of byte order `order`.
    pub fn new(order: ByteOrder, cpus: u32) -> Self {
        TraceBuilder {
            order,
            header: Header {
                byte_order: order,
                word_size: 8,
                page_size: 4096,
                cpu_count: cpus,
                clock_id: 1,
                recorder_pid: 1,
                file_index: 0,
                start_time_ns: 0,
                start_clock_ns: 0,
                trace_id: 0x5eed,
                hostname: "synth".into(),
                kernel_release: "6.18.0-synth".into(),
                machine: "x86_64".into(),
                recorder_version: "ioblame-decode synth".into(),
            },
            meta: Metadata::default(),
            formats: Vec::new(),
            builders: (0..cpus).map(ChunkBuilder::new).collect(),
            chunks: Vec::new(),
            next_id: 1,
            task_sample_type: CAPTURE_SAMPLE_TYPE,
            cgroup: 0,
            user_copy: (Vec::new(), Vec::new()),
        }
    }

    /// Records event `event`'s samples with the user registers of `regs_mask` and `size`
    /// bytes of user stack (`--user-stacks dwarf`), as the recorder opens them.
    pub fn copy_user_stacks(&mut self, event: u16, regs_mask: u64, size: u32) {
        if let Some(e) = self.meta.events.get_mut(event as usize) {
            e.sample_type |= SAMPLE_REGS_USER | SAMPLE_STACK_USER;
            e.regs_user = regs_mask;
            e.stack_user = size;
        }
    }

    /// The user registers (those of the mask, in bit order; none: a kernel thread) and the
    /// stack bytes the next samples of events recorded with them carry.
    pub fn set_user_copy(&mut self, regs: Vec<u64>, stack: Vec<u8>) {
        self.user_copy = (regs, stack);
    }

    /// The cgroup id the next samples of events recorded with `PERF_SAMPLE_CGROUP` carry.
    pub fn set_cgroup(&mut self, id: u64) {
        self.cgroup = id;
    }

    /// Adds an event (`subsystem:name`, its format text) sampled with
    /// [`CAPTURE_SAMPLE_TYPE`] (plus `CALLCHAIN` when `callchain`). Returns its index.
    pub fn add_event(
        &mut self,
        name: &str,
        format: &str,
        callchain: bool,
    ) -> Result<u16, FormatError> {
        let st = CAPTURE_SAMPLE_TYPE | if callchain { SAMPLE_CALLCHAIN } else { 0 };
        self.add_event_with(name, format, st)
    }

    /// Adds an event with an explicit `sample_type`. The first event added carries the task
    /// records (and its sample type lays out their trailers).
    pub fn add_event_with(
        &mut self,
        name: &str,
        format: &str,
        sample_type: u64,
    ) -> Result<u16, FormatError> {
        let fmt = EventFormat::parse(format)?;
        let ids: Vec<u64> = (0..self.header.cpu_count as u64)
            .map(|i| self.next_id + i)
            .collect();
        self.next_id += self.header.cpu_count as u64;
        let mut flags = 0;
        if sample_type & SAMPLE_CALLCHAIN != 0 {
            flags |= EVENT_CALLCHAIN;
        }
        if self.meta.events.is_empty() {
            flags |= EVENT_TASK_RECORDS;
            self.task_sample_type = sample_type;
        }
        self.meta.events.push(EventDesc {
            name: name.to_string(),
            tracefs_id: fmt.id,
            sample_type,
            read_format: 0,
            flags,
            max_stack: if sample_type & SAMPLE_CALLCHAIN != 0 {
                32
            } else {
                0
            },
            filter: String::new(),
            format: format.to_string(),
            ids,
            regs_user: 0,
            stack_user: 0,
        });
        self.formats.push(fmt);
        Ok((self.meta.events.len() - 1) as u16)
    }

    /// The header the trace will have.
    pub fn header(&self) -> &Header {
        &self.header
    }
    /// The metadata the trace will have (events added so far).
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }
    /// Mutable metadata (to add block devices, kallsyms, ...).
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.meta
    }

    fn sid(&self, cpu: u32, time: u64, pid: u32, tid: u32) -> SampleIdValues {
        let identifier = self
            .meta
            .events
            .first()
            .and_then(|e| e.ids.get(cpu as usize))
            .copied()
            .unwrap_or(0);
        SampleIdValues {
            pid,
            tid,
            time,
            id: identifier,
            stream_id: identifier,
            cpu,
            identifier,
        }
    }

    fn builder(&mut self, cpu: u32) -> &mut ChunkBuilder {
        let n = self.builders.len();
        &mut self.builders[(cpu as usize).min(n.saturating_sub(1))]
    }

    /// Encodes a sample of event `event` on `cpu`; `stack` is the kernel callchain, innermost
    /// first (the `PERF_CONTEXT_KERNEL` marker is added).
    #[allow(clippy::too_many_arguments)]
    pub fn sample_record(
        &self,
        cpu: u32,
        event: u16,
        time: u64,
        pid: u32,
        tid: u32,
        stack: &[u64],
        fields: &[(&str, Val<'_>)],
    ) -> Result<Vec<u8>, FieldError> {
        let ev = &self.meta.events[event as usize];
        let raw = payload(
            &self.formats[event as usize],
            self.order,
            tid as i32,
            fields,
        )?;
        let mut callchain = vec![CONTEXT_KERNEL];
        callchain.extend_from_slice(stack);
        let v = SampleValues {
            identifier: ev.ids.get(cpu as usize).copied().unwrap_or(0),
            ip: stack.first().copied().unwrap_or(0),
            pid,
            tid,
            time,
            addr: 0,
            id: ev.ids.get(cpu as usize).copied().unwrap_or(0),
            stream_id: 0,
            cpu,
            period: 1,
            callchain,
            raw,
            cgroup: self.cgroup,
            regs_user: self.user_copy.0.clone(),
            stack_user: self.user_copy.1.clone(),
        };
        Ok(sample_record(ev.sample_type, self.order, &v))
    }

    /// Appends a sample of event `event` to `cpu`'s current chunk.
    #[allow(clippy::too_many_arguments)]
    pub fn sample(
        &mut self,
        cpu: u32,
        event: u16,
        time: u64,
        pid: u32,
        tid: u32,
        stack: &[u64],
        fields: &[(&str, Val<'_>)],
    ) -> Result<(), FieldError> {
        let rec = self.sample_record(cpu, event, time, pid, tid, stack, fields)?;
        self.builder(cpu).push(&rec, Some(time));
        Ok(())
    }

    /// Appends a COMM record.
    pub fn comm(&mut self, cpu: u32, time: u64, pid: u32, tid: u32, comm: &str, exec: bool) {
        let sid = self.sid(cpu, time, pid, tid);
        let rec = comm_record(
            self.task_sample_type,
            self.order,
            pid,
            tid,
            comm,
            exec,
            &sid,
        );
        self.builder(cpu).push(&rec, Some(time));
    }

    /// Appends a FORK (`fork == true`) or EXIT record; `ids` is `(pid, ppid, tid, ptid)`.
    pub fn fork_exit(&mut self, cpu: u32, time: u64, fork: bool, ids: (u32, u32, u32, u32)) {
        let sid = self.sid(cpu, time, ids.0, ids.2);
        let kind = if fork { 7 } else { 4 };
        let rec = fork_exit_record(kind, self.task_sample_type, self.order, ids, time, &sid);
        self.builder(cpu).push(&rec, Some(time));
    }

    /// Appends a LOST record.
    pub fn lost(&mut self, cpu: u32, time: u64, lost: u64) {
        let sid = self.sid(cpu, time, 0, 0);
        let rec = lost_record(
            self.task_sample_type,
            self.order,
            sid.identifier,
            lost,
            &sid,
        );
        let b = self.builder(cpu);
        b.push(&rec, Some(time));
        b.add_lost(lost);
    }

    /// Appends raw bytes as a record (for damaged-input tests); `bytes` must be a whole
    /// record as far as the perf header's size goes.
    pub fn raw(&mut self, cpu: u32, bytes: &[u8], ts: Option<u64>) {
        self.builder(cpu).push(bytes, ts);
    }

    /// Ends `cpu`'s current chunk (it is written in this order).
    pub fn flush(&mut self, cpu: u32) {
        if let Some(c) = self.builder(cpu).finish(1) {
            self.chunks.push(c);
        }
    }

    /// Ends every CPU's current chunk.
    pub fn flush_all(&mut self) {
        for cpu in 0..self.builders.len() as u32 {
            self.flush(cpu);
        }
    }

    /// Flushes everything and writes the trace into directory `dir` (one ring file unless the
    /// trace is large).
    pub fn write(mut self, dir: &Path) -> Result<RingStats, ioblame_format::Error> {
        self.flush_all();
        let mut w = RingWriter::create(
            dir,
            self.header.clone(),
            self.meta.clone(),
            RingOptions {
                file_size: 0,
                max_size: 0,
            },
        )?;
        for c in &self.chunks {
            w.write_chunk(c)?;
        }
        w.finish()
    }

    /// Takes the chunks finished so far, in write order, so that a generator of large traces
    /// can write them out as it goes (with a `RingWriter` made from [`Self::header`] and
    /// [`Self::metadata`]) instead of holding the whole trace.
    pub fn take_chunks(&mut self) -> Vec<EncodedChunk> {
        std::mem::take(&mut self.chunks)
    }

    /// The chunks finished so far, in write order.
    pub fn chunks(&self) -> &[EncodedChunk] {
        &self.chunks
    }
}
