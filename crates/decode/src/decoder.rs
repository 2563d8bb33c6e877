//! From raw perf records to typed [`Event`]s.
//!
//! [`Decoder::new`] parses every event's format text once and resolves, by name, the fields
//! its typed form needs (those its entry in the event registry, [`ioblame_events::table`],
//! declares); decoding a record is then a table lookup and the entry's builder: a few
//! bounds-checked loads.

use ioblame_format::{ByteOrder, Chunk, Header, Metadata, RawRecord, EVENT_TASK_RECORDS};
use std::cell::RefCell;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use ioblame_events::{Build, EventDef, Payload};

use crate::event::*;
use crate::format::{EventFormat, Field, FieldError, FormatError};
use crate::record::{
    check_sample_type, parse_sample_regs, parse_task_record, RecordError, SampleLayout, TaskRecord,
    MISC_MMAP_DATA, RECORD_COMM, RECORD_EXIT, RECORD_FORK, RECORD_LOST, RECORD_LOST_SAMPLES,
    RECORD_MMAP, RECORD_MMAP2, RECORD_SAMPLE, SAMPLE_CPU, SAMPLE_ID, SAMPLE_IDENTIFIER, SAMPLE_RAW,
    SAMPLE_STREAM_ID, SAMPLE_TID, SAMPLE_TIME,
};

/// Something in the trace's metadata that limits decoding (reported, not fatal).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecoderProblem {
    /// An event's format text does not parse: its samples decode as `EventKind::Other`.
    #[error("event `{event}`: {source}")]
    Format {
        /// The event.
        event: String,
        /// The parse error.
        source: FormatError,
    },
    /// A field the typed form needs is missing or unusable: samples decode as
    /// `EventKind::Other`.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// The event's sample type cannot be parsed: its samples are counted as errors.
    #[error("event `{event}`: {source}")]
    SampleType {
        /// The event.
        event: String,
        /// Why.
        source: RecordError,
    },
    /// Samples cannot be told apart (no `IDENTIFIER` and no other way).
    #[error("{0}")]
    Identification(String),
    /// The samples carry user stack copies the decoder cannot unwind: their user frames are
    /// left out.
    #[error("the user stack copies of a `{machine}` recording cannot be unwound (x86_64 and aarch64 only): their user frames are left out")]
    StackCopies {
        /// The recording host's machine (`uname -m`).
        machine: String,
    },
}

/// Which user registers of a sample ([`ioblame_perfrec::UserRegs::get`]) a stack copy is
/// unwound from, on the recording host's architecture.
#[derive(Debug, Clone, Copy)]
struct CopyRegs(ioblame_perfrec::UnwindRegs);

impl CopyRegs {
    /// The stack copy of a sample's user registers and stack bytes (`full`: all the kernel
    /// was asked to copy). `None` for a task of another ABI than the 64-bit one (a 32-bit
    /// task on x86_64: its tables and registers are not those unwound here).
    fn copy(
        &self,
        regs: &ioblame_perfrec::UserRegs<'_>,
        bytes: &[u8],
        full: bool,
    ) -> Option<StackCopy> {
        if regs.abi != ioblame_perfrec::REGS_ABI_64 {
            return None;
        }
        let r = &self.0;
        Some(StackCopy {
            ip: regs.get(r.ip)?,
            sp: regs.get(r.sp)?,
            fp: regs.get(r.fp).unwrap_or(0),
            lr: r.lr.and_then(|lr| regs.get(lr)).unwrap_or(0),
            bytes: bytes.into(),
            full,
        })
    }
}

/// Why a record was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum SkipReason {
    /// The record is shorter than its type requires.
    Truncated,
    /// The sample's event has an unsupported sample type.
    UnsupportedSampleType,
    /// The sample's identifier matches no event of the trace.
    UnknownIdentifier,
    /// A tracepoint field lies outside the payload.
    FieldOutOfBounds,
    /// A callchain longer than the cap.
    CallchainTooLong,
    /// The chunk's record framing broke (size field impossible); the rest of the chunk is lost.
    Framing,
    /// Samples cannot be identified in this trace.
    Unidentified,
}

impl SkipReason {
    /// Number of reasons.
    pub const COUNT: usize = 7;
    /// All reasons, in order.
    pub const ALL: [SkipReason; Self::COUNT] = [
        SkipReason::Truncated,
        SkipReason::UnsupportedSampleType,
        SkipReason::UnknownIdentifier,
        SkipReason::FieldOutOfBounds,
        SkipReason::CallchainTooLong,
        SkipReason::Framing,
        SkipReason::Unidentified,
    ];
    /// A short description.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Truncated => "truncated record",
            SkipReason::UnsupportedSampleType => "unsupported sample type",
            SkipReason::UnknownIdentifier => "unknown sample identifier",
            SkipReason::FieldOutOfBounds => "tracepoint field out of bounds",
            SkipReason::CallchainTooLong => "callchain too long",
            SkipReason::Framing => "broken record framing",
            SkipReason::Unidentified => "sample event unidentifiable",
        }
    }
    fn of_record(e: RecordError) -> Self {
        match e {
            RecordError::Truncated { .. } => SkipReason::Truncated,
            RecordError::UnsupportedSampleType { .. } | RecordError::NoRegsMask => {
                SkipReason::UnsupportedSampleType
            }
            RecordError::CallchainTooLong(_) => SkipReason::CallchainTooLong,
            // A size no kernel writes: the record is damaged.
            RecordError::StackTooLarge(_) => SkipReason::Truncated,
        }
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Counts of what decoding saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Perf records read.
    pub records: u64,
    /// Samples decoded, per event index of the trace (typed or `Other`).
    pub per_event: Vec<u64>,
    /// COMM records decoded.
    pub comm: u64,
    /// FORK records decoded.
    pub fork: u64,
    /// EXIT records decoded.
    pub exit: u64,
    /// LOST and LOST_SAMPLES records decoded.
    pub lost_records: u64,
    /// Sum of the records they say were lost.
    pub lost: u64,
    /// Records of other types, skipped.
    pub other_records: u64,
    /// Records that failed to decode, by reason ([`SkipReason`] as index).
    pub errors: [u64; SkipReason::COUNT],
}

impl DecodeStats {
    /// Events produced.
    pub fn events(&self) -> u64 {
        self.per_event.iter().sum::<u64>() + self.comm + self.fork + self.exit + self.lost_records
    }
    /// Records that failed to decode.
    pub fn error_count(&self) -> u64 {
        self.errors.iter().sum()
    }
    /// Non-zero error counts.
    pub fn error_reasons(&self) -> impl Iterator<Item = (SkipReason, u64)> + '_ {
        SkipReason::ALL
            .iter()
            .zip(self.errors.iter())
            .filter(|(_, &n)| n > 0)
            .map(|(&r, &n)| (r, n))
    }
    /// Adds `o` into `self`.
    pub fn merge(&mut self, o: &DecodeStats) {
        self.records += o.records;
        if self.per_event.len() < o.per_event.len() {
            self.per_event.resize(o.per_event.len(), 0);
        }
        for (a, b) in self.per_event.iter_mut().zip(&o.per_event) {
            *a += b;
        }
        self.comm += o.comm;
        self.fork += o.fork;
        self.exit += o.exit;
        self.lost_records = self.lost_records.saturating_add(o.lost_records);
        self.lost = self.lost.saturating_add(o.lost);
        self.other_records += o.other_records;
        for (a, b) in self.errors.iter_mut().zip(&o.errors) {
            *a += b;
        }
    }
    fn error(&mut self, r: SkipReason) {
        self.errors[r as usize] += 1;
    }
}

/// The events of one chunk, in record order, and what decoding them saw.
#[derive(Debug, Clone, Default)]
pub struct DecodedChunk {
    /// Events in record order.
    pub events: Vec<Event>,
    /// Counts.
    pub stats: DecodeStats,
}

/// The names of the tracepoints the decoder turns into typed events (`subsystem:name`,
/// current and older names): the registry's entries that build one.
pub fn typed_event_names() -> impl Iterator<Item = &'static str> {
    ioblame_events::typed_names()
}

/// The translation of an event's raw writeback reasons into ioblame's numbers
/// ([`WB_REASON_NAMES`]), from the `__print_symbolic(REC->reason, { N, "name" }, ...)` of its
/// print fmt: `None` when it has none, or when the kernel's numbers are ioblame's (every
/// kernel from 4.20 on; RHEL 8's 4.18 still has `free_more_mem` at 5).
pub(crate) fn wb_reasons(print_fmt: &str) -> Option<Box<[u32]>> {
    let at = print_fmt.find("__print_symbolic(REC->reason,")?;
    let mut rest = &print_fmt[at + "__print_symbolic(REC->reason,".len()..];
    let mut pairs: Vec<(usize, u32)> = Vec::new();
    loop {
        rest = rest.trim_start();
        let Some(r) = rest.strip_prefix('{') else {
            break;
        };
        let end = r.find('}')?;
        let (num, name) = r[..end].split_once(',')?;
        let num: usize = num.trim().parse().ok()?;
        let name = name.trim().trim_matches('"');
        let ours = WB_REASON_NAMES
            .iter()
            .position(|n| *n == name)
            .map_or(WB_REASON_OTHER, |i| i as u32);
        if num > 64 {
            return None;
        }
        pairs.push((num, ours));
        rest = r[end + 1..]
            .trim_start()
            .strip_prefix(',')
            .unwrap_or(&r[end + 1..]);
    }
    if pairs.iter().all(|&(n, o)| n as u32 == o) {
        return None;
    }
    let len = pairs.iter().map(|p| p.0 + 1).max()?;
    let mut t = vec![WB_REASON_OTHER; len];
    for (n, o) in pairs {
        t[n] = o;
    }
    Some(t.into_boxed_slice())
}

/// The address range of `mark_buffer_dirty` in the trace's kernel symbols, where a derived
/// buffer stack begins (`inherit`).
fn mark_buffer_dirty_range(meta: &Metadata) -> Option<(u64, u64)> {
    let k = meta.kallsyms.as_ref().filter(|k| !k.restricted)?;
    crate::inherit::text_symbol_range(&k.text, "mark_buffer_dirty")
}

/// Resolves the fields a registry entry reads against a format.
fn resolve(
    def: &EventDef,
    fmt: &EventFormat,
    event: &str,
) -> Result<Vec<Option<Field>>, FieldError> {
    let mut out = Vec::with_capacity(def.fields.len());
    for decl in def.fields {
        let string = decl.string;
        let found = decl.names().find_map(|n| fmt.spec(n).map(|s| (n, s)));
        let Some((name, s)) = found else {
            if decl.optional() {
                out.push(None);
                continue;
            }
            return Err(FieldError::MissingField {
                event: event.to_string(),
                field: decl.names().next().unwrap_or(decl.decl).to_string(),
            });
        };
        let f = Field::from_spec(s);
        let ok = if string {
            f.is_string()
        } else {
            f.is_integer()
        };
        if !ok {
            return Err(FieldError::BadField {
                event: event.to_string(),
                field: name.to_string(),
                what: format!(
                    "declared `{}` of {} bytes, expected {}",
                    s.type_name,
                    s.size,
                    if string {
                        "a char array or __data_loc string"
                    } else {
                        "an integer of 1, 2, 4 or 8 bytes"
                    }
                ),
            });
        }
        out.push(Some(f));
    }
    Ok(out)
}

#[derive(Debug)]
struct Entry {
    name: String,
    sample_type: u64,
    sample_type_ok: bool,
    /// Where a sample's fields lie (when the sample type is supported).
    layout: Option<SampleLayout>,
    /// `sample_regs_user`: the user registers of its samples.
    regs_mask: u64,
    build: Option<Build>,
    fields: Vec<Option<Field>>,
    common_pid: Option<Field>,
    /// A stack sample (`EVENT_STACK_SAMPLE`): its samples only add their stack to the same
    /// hit's sample of the event of the same name.
    stack_sample: bool,
    /// Of a writeback work event whose kernel numbers the reasons otherwise than ioblame
    /// ([`WB_REASON_NAMES`]): ioblame's number of each raw one, from its print fmt.
    reasons: Option<Box<[u32]>>,
}

/// How samples are attributed to their event.
#[derive(Debug, Clone, Copy)]
enum IdMode {
    /// First u64 of the body is the `IDENTIFIER`.
    Identifier,
    /// Only one event.
    Single,
    /// All events share this sample type (with RAW): the payload's `common_type` tells.
    CommonType(u64, u64),
    /// No way.
    None,
}

const TRAILER_BITS: u64 =
    SAMPLE_TID | SAMPLE_TIME | SAMPLE_ID | SAMPLE_STREAM_ID | SAMPLE_CPU | SAMPLE_IDENTIFIER;

/// Decodes the chunks of one trace into typed events.
#[derive(Debug)]
pub struct Decoder {
    order: ByteOrder,
    entries: Vec<Entry>,
    by_id: FxHashMap<u64, u16>,
    by_common_type: FxHashMap<u32, u16>,
    id_mode: IdMode,
    /// Trailer layout of non-sample records when it is the same for every event.
    trailer_type: Option<u64>,
    fallback_trailer_type: u64,
    problems: Vec<DecoderProblem>,
    /// Some dirty-buffer event was recorded without its callchain (`--stacks exact`): the
    /// buffers take the stacks of their folios' dirty events (`inherit`).
    buffer_stacks_derived: bool,
    /// The registers stack copies are unwound from (`None`: an architecture not known).
    copy_regs: Option<CopyRegs>,
    /// Leave the dirty buffers' own stacks out ([`Decoder::drop_buffer_stacks`]).
    drop_buffer_stacks: bool,
    /// The addresses of `mark_buffer_dirty` in the trace's kernel symbols, where a derived
    /// buffer stack begins.
    mark_buffer_dirty: Option<(u64, u64)>,
}

impl Decoder {
    /// Prepares the decoding of a trace: parses every event's format and resolves the fields
    /// of its typed form. Whatever limits decoding is kept in [`Decoder::problems`].
    pub fn new(header: &Header, meta: &Metadata) -> Decoder {
        let mut problems = Vec::new();
        let mut entries = Vec::with_capacity(meta.events.len());
        let mut by_id = FxHashMap::default();
        let mut by_common_type = FxHashMap::default();
        for (i, ev) in meta.events.iter().enumerate().take(u16::MAX as usize) {
            let i = i as u16;
            for &id in &ev.ids {
                if let Some(prev) = by_id.insert(id, i) {
                    if prev != i {
                        problems.push(DecoderProblem::Identification(format!(
                            "sample id {id} belongs to both `{}` and `{}`",
                            meta.events[prev as usize].name, ev.name
                        )));
                    }
                }
            }
            by_common_type.insert(ev.tracefs_id, i);
            let regs_unknown =
                ev.sample_type & ioblame_perfrec::SAMPLE_REGS_USER != 0 && ev.regs_user == 0;
            let regs = if regs_unknown {
                Err(RecordError::NoRegsMask)
            } else {
                Ok(())
            };
            let checked = check_sample_type(ev.sample_type).and(regs);
            let sample_type_ok = match checked {
                Ok(()) => true,
                Err(source) => {
                    problems.push(DecoderProblem::SampleType {
                        event: ev.name.clone(),
                        source,
                    });
                    false
                }
            };
            let mut entry = Entry {
                name: ev.name.clone(),
                sample_type: ev.sample_type,
                sample_type_ok,
                layout: SampleLayout::with_regs(ev.sample_type, ev.regs_user),
                regs_mask: ev.regs_user,
                build: None,
                fields: Vec::new(),
                common_pid: None,
                stack_sample: ev.flags & ioblame_format::EVENT_STACK_SAMPLE != 0,
                reasons: None,
            };
            let def = ioblame_events::find(&ev.name);
            match EventFormat::parse(&ev.format) {
                Ok(fmt) => {
                    entry.common_pid = fmt.field("common_pid").ok().filter(|f| f.is_integer());
                    entry.reasons = wb_reasons(&fmt.print_fmt);
                    if let Some((def, build)) = def.and_then(|d| Some((d, d.build?))) {
                        match resolve(def, &fmt, &ev.name) {
                            Ok(fields) => {
                                entry.build = Some(build);
                                entry.fields = fields;
                            }
                            Err(e) => problems.push(e.into()),
                        }
                    }
                }
                Err(source) => {
                    // Formats of events we do not type are only needed for common_pid.
                    if def.is_some_and(|d| d.build.is_some()) || !ev.format.is_empty() {
                        problems.push(DecoderProblem::Format {
                            event: ev.name.clone(),
                            source,
                        });
                    }
                }
            }
            entries.push(entry);
        }
        let all_identifier = !entries.is_empty()
            && entries
                .iter()
                .all(|e| e.sample_type & SAMPLE_IDENTIFIER != 0);
        let id_mode = if all_identifier {
            IdMode::Identifier
        } else if entries.len() == 1 {
            IdMode::Single
        } else if let Some(first) = entries.first() {
            let st = first.sample_type;
            if st & SAMPLE_RAW != 0
                && entries
                    .iter()
                    .all(|e| e.sample_type == st && e.regs_mask == first.regs_mask)
                && by_common_type.len() == entries.len()
            {
                IdMode::CommonType(st, first.regs_mask)
            } else {
                problems.push(DecoderProblem::Identification(
                    "events lack PERF_SAMPLE_IDENTIFIER and differ in sample type: samples cannot be attributed to their event".into(),
                ));
                IdMode::None
            }
        } else {
            IdMode::None
        };
        let trailer_types: Vec<u64> = entries
            .iter()
            .map(|e| e.sample_type & TRAILER_BITS)
            .collect();
        let trailer_type = match trailer_types.first() {
            Some(&t) if trailer_types.iter().all(|&x| x == t) => Some(t),
            None => Some(0),
            _ => None,
        };
        let fallback_trailer_type = meta
            .events
            .iter()
            .find(|e| e.flags & EVENT_TASK_RECORDS != 0)
            .or(meta.events.first())
            .map_or(0, |e| e.sample_type);
        let buffer_stacks_derived = buffer_stacks_derived(meta);
        let copy_regs = ioblame_perfrec::UnwindRegs::of_machine(&header.machine).map(CopyRegs);
        if copy_regs.is_none() && meta.events.iter().any(|e| e.stack_user > 0) {
            problems.push(DecoderProblem::StackCopies {
                machine: header.machine.clone(),
            });
        }
        // Looked up only where buffer stacks are derived (a scan of the symbols' text).
        let mark_buffer_dirty = buffer_stacks_derived
            .then(|| mark_buffer_dirty_range(meta))
            .flatten();
        Decoder {
            order: header.byte_order,
            entries,
            by_id,
            by_common_type,
            id_mode,
            trailer_type,
            fallback_trailer_type,
            problems,
            buffer_stacks_derived,
            copy_regs,
            drop_buffer_stacks: false,
            mark_buffer_dirty,
        }
    }

    /// Whether the dirty buffers were recorded without their callchains (`--stacks exact`),
    /// or are analysed so ([`Decoder::drop_buffer_stacks`]): each takes the stack of the
    /// folio dirty event that follows it on its thread, and the attribution gives the others
    /// the stack last given on their thread.
    pub fn buffer_stacks_derived(&self) -> bool {
        self.buffer_stacks_derived
    }

    /// Decodes the dirty buffers as if they had been recorded without their callchains: the
    /// check, on a trace recorded with every stack (`--stacks all`), that the stacks
    /// [`Decoder::buffer_stacks_derived`] gives them are the ones they had.
    pub fn drop_buffer_stacks(&mut self, meta: &Metadata) {
        self.drop_buffer_stacks = true;
        if !self.buffer_stacks_derived {
            self.mark_buffer_dirty = mark_buffer_dirty_range(meta);
        }
        self.buffer_stacks_derived = true;
    }

    /// What limits decoding: formats that do not parse, fields missing from typed events
    /// (those decode as `EventKind::Other`), unsupported sample types.
    pub fn problems(&self) -> &[DecoderProblem] {
        &self.problems
    }

    /// The name (`subsystem:name`) of event `idx` of the trace.
    pub fn event_name(&self, idx: u16) -> Option<&str> {
        self.entries.get(idx as usize).map(|e| e.name.as_str())
    }

    /// Number of events of the trace.
    pub fn event_count(&self) -> usize {
        self.entries.len()
    }

    /// Whether event `idx` decodes to a typed kind (not `Other`).
    pub fn is_typed(&self, idx: u16) -> bool {
        self.entries
            .get(idx as usize)
            .is_some_and(|e| e.build.is_some())
    }

    /// The trace's byte order.
    pub fn byte_order(&self) -> ByteOrder {
        self.order
    }

    /// Decodes every record of a chunk. Never panics; a record that cannot be decoded is
    /// counted in the stats by reason and skipped.
    pub fn decode_chunk(&self, chunk: &Chunk) -> DecodedChunk {
        self.decode_chunk_into(chunk, Vec::new())
    }

    /// [`Decoder::decode_chunk`] into `events` (cleared first), so a caller decoding many
    /// chunks can reuse its vectors.
    pub fn decode_chunk_into(&self, chunk: &Chunk, mut events: Vec<Event>) -> DecodedChunk {
        let mut stats = DecodeStats {
            per_event: vec![0; self.entries.len()],
            ..Default::default()
        };
        // The header's record count is the chunk's word: no more records than 8-byte headers
        // fit in its data (a hostile count must not reserve 100 MiB for two records).
        let need = (chunk.header.records as usize)
            .min(chunk.data.len() / 8)
            .min(1 << 20);
        if events.capacity() < need {
            // A fresh vector: growing this one would copy its stale contents.
            events = Vec::with_capacity(need);
        } else {
            events.clear();
        }
        let cpu = chunk.header.cpu;
        let mut last_time = chunk.header.first_ts;
        let mut recent = RecentStacks {
            last: vec![None; self.entries.len()],
            pending: None,
        };
        for r in chunk.records(self.order) {
            let rec = match r {
                Ok(rec) => rec,
                Err(_) => {
                    stats.error(SkipReason::Framing);
                    break;
                }
            };
            stats.records += 1;
            let res = match rec.kind {
                RECORD_SAMPLE => self.sample(
                    &rec,
                    cpu,
                    &mut last_time,
                    &mut stats,
                    &mut recent,
                    &mut events,
                ),
                // Mappings of data name no frame.
                RECORD_MMAP | RECORD_MMAP2 if rec.misc & MISC_MMAP_DATA != 0 => {
                    stats.other_records += 1;
                    continue;
                }
                RECORD_COMM | RECORD_EXIT | RECORD_FORK | RECORD_LOST | RECORD_LOST_SAMPLES
                | RECORD_MMAP | RECORD_MMAP2 => self
                    .task(&rec, cpu, &mut last_time, &mut stats)
                    .map(|ev| events.push(ev)),
                _ => {
                    stats.other_records += 1;
                    continue;
                }
            };
            if let Err(reason) = res {
                stats.error(reason);
            }
        }
        if self.buffer_stacks_derived {
            crate::inherit::derive_buffer_stacks(
                &mut events,
                self.drop_buffer_stacks,
                self.mark_buffer_dirty,
            );
        }
        DecodedChunk { events, stats }
    }

    #[inline]
    fn identify(&self, body: &[u8]) -> Result<u16, SkipReason> {
        match self.id_mode {
            IdMode::Identifier => {
                let b: [u8; 8] = body
                    .get(..8)
                    .and_then(|s| s.try_into().ok())
                    .ok_or(SkipReason::Truncated)?;
                let id = self.order.u64(b);
                self.by_id
                    .get(&id)
                    .copied()
                    .ok_or(SkipReason::UnknownIdentifier)
            }
            IdMode::Single => Ok(0),
            IdMode::CommonType(st, regs) => {
                let s =
                    parse_sample_regs(body, st, regs, self.order).map_err(SkipReason::of_record)?;
                let raw = s.raw.unwrap_or_default();
                let t = raw.get(..2).ok_or(SkipReason::FieldOutOfBounds)?;
                let ty = self.order.u16([t[0], t[1]]) as u32;
                self.by_common_type
                    .get(&ty)
                    .copied()
                    .ok_or(SkipReason::UnknownIdentifier)
            }
            IdMode::None => Err(SkipReason::Unidentified),
        }
    }

    /// Decodes a SAMPLE record and appends its event to `events` (nothing on error).
    #[inline]
    fn sample<'a>(
        &self,
        rec: &RawRecord<'a>,
        cpu: u32,
        last_time: &mut u64,
        stats: &mut DecodeStats,
        recent: &mut RecentStacks<'a>,
        events: &mut Vec<Event>,
    ) -> Result<(), SkipReason> {
        let body = rec.body();
        let idx = self.identify(body)?;
        let e = &self.entries[idx as usize];
        if !e.sample_type_ok {
            return Err(SkipReason::UnsupportedSampleType);
        }
        let s = match e.layout.and_then(|l| l.parse(body, self.order)) {
            Some(s) => s,
            // The whole walk, which says why (a truncated or damaged record).
            None => parse_sample_regs(body, e.sample_type, e.regs_mask, self.order)
                .map_err(SkipReason::of_record)?
                .into(),
        };
        let (pid, tid) = match s.pid_tid {
            Some(p) => p,
            None => {
                let p = match (e.common_pid, s.raw) {
                    (Some(f), Some(raw)) => f.u64(raw, self.order).unwrap_or(0) as u32,
                    _ => 0,
                };
                (p, p)
            }
        };
        let time = s.time.unwrap_or(*last_time);
        events.push(Event {
            time,
            cpu,
            pid,
            tid,
            kind: EventKind::Other { event: idx },
            stack: None,
            cgroup: s.cgroup.unwrap_or(0),
            stack_copy: None,
        });
        let Some(ev) = events.last_mut() else {
            return Ok(()); // Unreachable: the event was just pushed.
        };
        if let (Some(build), Some(raw)) = (e.build, s.raw) {
            let p = Payload::new(&e.fields, raw, self.order);
            if build(&p, &mut ev.kind).is_err() {
                events.pop();
                return Err(SkipReason::FieldOutOfBounds);
            }
            if let (Some(t), EventKind::WritebackWork { reason, .. }) = (&e.reasons, &mut ev.kind) {
                *reason = t.get(*reason as usize).copied().unwrap_or(WB_REASON_OTHER);
            }
        }
        *last_time = time;
        stats.per_event[idx as usize] += 1;
        ev.stack = s.callchain.map(|c| recent.stack(idx, c));
        if let (Some(regs), Some(cr)) = (&s.regs_user, &self.copy_regs) {
            let bytes = s.stack_user.unwrap_or_default();
            ev.stack_copy = cr.copy(regs, bytes, s.stack_user_full).map(Arc::new);
        }
        if e.stack_sample {
            // Both events fire on the same hit, one record after the other: the stack goes
            // to the other's sample, before or after this one.
            let Some(mut sample) = events.pop() else {
                return Ok(());
            };
            let Some(stack) = sample.stack.take() else {
                return Ok(());
            };
            match events.last_mut() {
                Some(p) if p.stack.is_none() && same_hit(p, &sample) => {
                    p.stack = Some(stack);
                    p.stack_copy = sample.stack_copy;
                }
                _ => recent.pending = Some((sample, stack)),
            }
        } else if let Some((sample, stack)) = recent.pending.take() {
            // The next record of this CPU after the stack sample: its event, or none.
            if let Some(ev) = events.last_mut().filter(|ev| same_hit(ev, &sample)) {
                ev.stack = Some(stack);
                ev.stack_copy = sample.stack_copy;
            }
        }
        Ok(())
    }

    fn trailer_type_of(&self, rec: &RawRecord<'_>) -> u64 {
        if let Some(t) = self.trailer_type {
            return t;
        }
        // Trailers differ between events: the IDENTIFIER (always last) tells whose it is.
        let b = rec.bytes;
        if let IdMode::Identifier = self.id_mode {
            if let Some(s) = b.len().checked_sub(8).and_then(|o| b.get(o..)) {
                let id = self
                    .order
                    .u64([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]);
                if let Some(&i) = self.by_id.get(&id) {
                    return self.entries[i as usize].sample_type;
                }
            }
        }
        self.fallback_trailer_type
    }

    fn task(
        &self,
        rec: &RawRecord<'_>,
        cpu: u32,
        last_time: &mut u64,
        stats: &mut DecodeStats,
    ) -> Result<Event, SkipReason> {
        let st = self.trailer_type_of(rec);
        let Some((r, sid)) =
            parse_task_record(rec, st, self.order).map_err(SkipReason::of_record)?
        else {
            return Err(SkipReason::Truncated);
        };
        let (mut pid, mut tid) = sid.pid_tid.unwrap_or((0, 0));
        let mut time = sid.time;
        let kind = match r {
            TaskRecord::Comm {
                pid: p,
                tid: t,
                comm,
                exec,
            } => {
                stats.comm += 1;
                (pid, tid) = (p, t);
                EventKind::Comm {
                    pid: p,
                    tid: t,
                    comm: String::from_utf8_lossy(comm).into_owned(),
                    exec,
                }
            }
            TaskRecord::Fork {
                pid: p,
                ppid,
                tid: t,
                ptid,
                time: tm,
            }
            | TaskRecord::Exit {
                pid: p,
                ppid,
                tid: t,
                ptid,
                time: tm,
            } => {
                (pid, tid) = (p, t);
                time = time.or(Some(tm));
                if matches!(r, TaskRecord::Fork { .. }) {
                    stats.fork += 1;
                    EventKind::Fork {
                        pid: p,
                        ppid,
                        tid: t,
                        ptid,
                    }
                } else {
                    stats.exit += 1;
                    EventKind::Exit {
                        pid: p,
                        ppid,
                        tid: t,
                        ptid,
                    }
                }
            }
            TaskRecord::Mmap {
                pid: p,
                tid: t,
                addr,
                len,
                pgoff,
                dev,
                ino,
                build_id,
                filename,
            } => {
                (pid, tid) = (p, t);
                EventKind::Mmap {
                    pid: p,
                    start: addr,
                    len,
                    pgoff,
                    dev: ioblame_format::kernel_dev(dev.0, dev.1),
                    ino,
                    build_id: build_id.to_vec(),
                    path: String::from_utf8_lossy(filename).into_owned(),
                }
            }
            TaskRecord::Lost { lost, .. } | TaskRecord::LostSamples { lost } => {
                stats.lost_records += 1;
                stats.lost = stats.lost.saturating_add(lost);
                EventKind::Lost { lost }
            }
        };
        let time = match time {
            Some(t) => {
                *last_time = t;
                t
            }
            None => *last_time,
        };
        Ok(Event {
            time,
            cpu,
            pid,
            tid,
            kind,
            stack: None,
            cgroup: 0,
            stack_copy: None,
        })
    }
}

/// A callchain as recorded, and its stack.
type Recorded<'a> = (&'a [u8], Arc<[u64]>);

/// The stack of the last sample of each event in a chunk, with its callchain as recorded.
struct RecentStacks<'a> {
    last: Vec<Option<Recorded<'a>>>,
    /// A stack sample (its event, and the stack) that came before the sample it belongs to.
    pending: Option<(Event, Arc<[u64]>)>,
}

impl<'a> RecentStacks<'a> {
    /// The stack of `c`, a callchain of event `idx`: the last one of that event when the
    /// recorded entries are the same (a task repeating an action repeats its stack, and
    /// comparing them costs less than the hash lookup of [`shared_stack`]).
    fn stack(&mut self, idx: u16, c: crate::record::Callchain<'a>) -> Arc<[u64]> {
        let Some(slot) = self.last.get_mut(idx as usize) else {
            return shared_stack(c);
        };
        if let Some((b, a)) = slot {
            if *b == c.recorded() {
                return a.clone();
            }
        }
        let a = shared_stack(c);
        *slot = Some((c.recorded(), a.clone()));
        a
    }
}

/// Whether the trace's dirty buffers were recorded without their callchains while other
/// stack events have theirs (`--stacks exact` or `sampled:N`, not `none`): the rules of
/// docs/attribution.md, "Stacks of dirty buffers", give them stacks.
pub fn buffer_stacks_derived(meta: &Metadata) -> bool {
    let stackless_buffers = meta.events.iter().any(|e| {
        ioblame_events::STACK_FROM_FOLIO_EVENTS.contains(&e.name.as_str())
            && e.flags & ioblame_format::EVENT_CALLCHAIN == 0
    });
    let some_stacks = meta.events.iter().any(|e| {
        ioblame_events::CALLCHAIN_EVENTS.contains(&e.name.as_str())
            && e.flags & ioblame_format::EVENT_CALLCHAIN != 0
    });
    stackless_buffers && some_stacks
}

/// Whether the trace samples the dirtying events' stacks (`--stacks sampled:N`: some event
/// is a stack sample, `EVENT_STACK_SAMPLE`).
pub fn stacks_sampled(meta: &Metadata) -> bool {
    meta.events
        .iter()
        .any(|e| e.flags & ioblame_format::EVENT_STACK_SAMPLE != 0)
}

/// Longest time between a stack sample and the sample of the same tracepoint hit (both are
/// written by one tracepoint call, each with its own clock read).
const SAME_HIT_NS: u64 = 100_000;

/// Whether `ev` and the stack sample `sample` are the same tracepoint hit: the same thread
/// and payload, their times (each record reads the clock) a few hundred ns apart.
fn same_hit(ev: &Event, sample: &Event) -> bool {
    ev.tid == sample.tid && ev.time.abs_diff(sample.time) <= SAME_HIT_NS && ev.kind == sample.kind
}

/// Most distinct stacks a decoding thread keeps to share (then it starts over).
const SHARED_STACKS_MAX: usize = 1 << 14;

/// The stacks a thread decoded lately, by their callchain as recorded (in one byte order).
type StackCache = (Option<ByteOrder>, FxHashMap<Box<[u8]>, Arc<[u64]>>);

thread_local! {
    static STACKS: RefCell<StackCache> = RefCell::new((None, FxHashMap::default()));
}

/// The kernel stack of `c`, shared with the earlier events of this thread that had the same
/// one: most events of a trace carry one of a few thousand stacks, and one allocation per
/// stack instead of per event spares the decoder an allocation and the consumer a free and
/// a comparison ([`Arc::ptr_eq`]) per event.
fn shared_stack(c: crate::record::Callchain<'_>) -> Arc<[u64]> {
    STACKS.with(|cell| {
        let Ok(mut st) = cell.try_borrow_mut() else {
            return Arc::from(c.frames());
        };
        let (order, map) = &mut *st;
        // Equal records are equal stacks: found without converting the entries.
        if *order != Some(c.order()) {
            map.clear();
            *order = Some(c.order());
        }
        if let Some(a) = map.get(c.recorded()) {
            return a.clone();
        }
        if map.len() >= SHARED_STACKS_MAX {
            map.clear();
        }
        let a: Arc<[u64]> = Arc::from(c.frames());
        map.insert(c.recorded().into(), a.clone());
        a
    })
}
