//! The file's events: each `perf_event_attr` with its tracepoint format (matched by tracefs
//! id in the tracing data), its `--filter` from perf's command line, and the flags ioblame
//! reads itself; and what the user should know about the events recorded (missing ones,
//! stack events without a callchain).

use std::collections::HashMap;

use ioblame_format::{ByteOrder, EventDesc, EVENT_CALLCHAIN, EVENT_TASK_RECORDS};
use linux_perf_data::linux_perf_event_reader::{AttrFlags, PerfClock, PerfEventType, SampleFormat};

use crate::errors::Corruption;
use crate::parser::Attr;
use crate::tracing::{self, TracingData};

/// Events the attribution needs, with what is lost without them.
const NEEDED: &[(&str, &str)] = &[
    (
        "writeback:writeback_dirty_folio",
        "buffered writes cannot be charged to the task that dirtied the pages",
    ),
    (
        "block:block_dirty_buffer",
        "metadata and buffer-head writes cannot be charged to their dirtier",
    ),
    (
        "block:block_bio_queue",
        "IOs are never seen entering the block layer: nothing can be attributed",
    ),
    (
        "block:block_rq_issue",
        "IOs are never issued: no device time, nothing can be charged",
    ),
    (
        "block:block_rq_complete",
        "IOs never complete, nothing can be charged",
    ),
    (
        "filemap:mm_filemap_add_to_page_cache",
        "folio sizes are unknown: large folios are charged as their first page only",
    ),
    (
        "ext4:ext4_ext_map_blocks_exit",
        "ext4 sectors cannot be mapped back to file pages: ext4 writeback is charged by bracket heuristics or to UNKNOWN",
    ),
    (
        "iomap:iomap_add_to_ioend",
        "xfs/iomap sectors cannot be mapped back to file pages: their writeback is charged by bracket heuristics or to UNKNOWN",
    ),
    (
        "writeback:writeback_single_inode_start",
        "writeback cannot be tied to the inode being written",
    ),
    (
        "writeback:writeback_start",
        "writeback reasons (periodic, background, sync...) are unknown",
    ),
];

/// Whether the recorded event `recorded` is `wanted` or one of its other names (an event
/// renamed between kernels, [`ioblame_tracepoints::RENAMES`]: `perf-command` records the old
/// name on kernels that have only that).
fn same_event(wanted: &str, recorded: &str) -> bool {
    wanted == recorded
        || ioblame_tracepoints::RENAMES
            .iter()
            .any(|&(new, old)| (wanted, recorded) == (new, old) || (wanted, recorded) == (old, new))
}

/// The other names of an event (see [`same_event`]).
fn other_names(ev: &str) -> Vec<&'static str> {
    ioblame_tracepoints::RENAMES
        .iter()
        .filter_map(|&(new, old)| {
            if new == ev {
                Some(old)
            } else if old == ev {
                Some(new)
            } else {
                None
            }
        })
        .collect()
}

/// What the user should know about the recorded events: the events the attribution needs
/// that are missing, with what is lost and what to add, and the stack events recorded
/// without a callchain. `events` are (name, has a callchain).
pub(crate) fn event_notes(events: &[(&str, bool)]) -> Vec<String> {
    let mut notes = Vec::new();
    for (ev, why) in NEEDED {
        if events.iter().any(|(e, _)| same_event(ev, e)) {
            continue;
        }
        let add = match other_names(ev).as_slice() {
            [] => format!("add -e {ev}"),
            others => format!(
                "add -e {ev} (or {}, its name on older kernels: `ioblame perf-command` prints the one the kernel has)",
                others.join(" or ")
            ),
        };
        notes.push(format!("no {ev}: {why}; {add}"));
    }
    // The stack events that need their own callchain: those the analyzer gives their
    // thread's dirtying stack need none.
    let needs_stack = |e: &str| {
        let listed = |list: &[&str]| list.iter().any(|s| same_event(s, e));
        listed(ioblame_tracepoints::CALLCHAIN_EVENTS)
            && !listed(ioblame_tracepoints::STACK_FROM_FOLIO_EVENTS)
    };
    let bare: Vec<&str> = events
        .iter()
        .filter(|(e, callchain)| !callchain && needs_stack(e))
        .map(|(e, _)| *e)
        .collect();
    if !bare.is_empty() {
        let all = events.iter().filter(|(e, _)| needs_stack(e)).count();
        let what = if bare.len() == all {
            "intents have no stacks".to_string()
        } else {
            "the intents of their IO have no stacks".to_string()
        };
        notes.push(format!(
            "recorded without callchains on {}: {what}; record them with kernel callchains \
             (-e EVENT/call-graph=fp/ and --kernel-callchains, as `ioblame perf-command` prints, or -g)",
            bare.join(", ")
        ));
    }
    notes
}
/// The tracing data section parsed, or, without one, empty tracing data and a note.
pub(crate) fn tracing_data(
    section: Option<&[u8]>,
    notes: &mut Vec<String>,
) -> Result<TracingData, Corruption> {
    match section {
        Some(b) => Ok(tracing::parse(b)?),
        None => {
            notes.push(
                "the file has no tracing data section: tracepoint payloads cannot be decoded"
                    .into(),
            );
            Ok(TracingData::default())
        }
    }
}

/// What ioblame reads of a `perf_event_attr` itself.
///
/// `linux-perf-data` reads the attr's bitfield word (`disabled`, `comm`, `task`,
/// `sample_id_all`, `use_clockid`, ...) as a plain u64 in the file's byte order. A
/// big-endian host's compiler lays bitfields out from the most significant bit of each
/// byte, so in a big-endian file that reads as the bit-reversed word (perf itself reverses
/// the bits of each byte when it reads a file of the other byte order): the flags are
/// taken from the raw bytes here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RawAttr {
    /// The bitfield flags, bit n = the n-th bitfield of `perf_event_attr`.
    pub flags: u64,
    /// `clockid`, when the attr is large enough to hold it.
    pub clockid: Option<i32>,
}

impl RawAttr {
    /// Reads the flags and `clockid` of one attr of a file in byte order `order`.
    pub fn parse(a: &[u8], order: ByteOrder) -> RawAttr {
        let word = order.u64_at(a, 40).unwrap_or(0);
        RawAttr {
            flags: if order == ByteOrder::Big {
                word.reverse_bits()
            } else {
                word
            },
            clockid: order.u32_at(a, 92).map(|c| c as i32),
        }
    }
}

/// How the records of one attr are converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AttrInfo {
    /// The id to prepend/append when the attr lacks IDENTIFIER.
    pub add_id: Option<u64>,
    /// Whether its non-sample records carry a `sample_id` trailer.
    pub sample_id_all: bool,
    /// The sample type as recorded (before IDENTIFIER is added).
    pub sample_type: u64,
}

/// The file's events, in attr order.
#[derive(Debug)]
pub(crate) struct Events {
    /// The trace's event descriptions.
    pub events: Vec<EventDesc>,
    /// How each attr's records are converted.
    pub infos: Vec<AttrInfo>,
    /// The clock of the first attr that sets `use_clockid`, or -1 (perf's default clock).
    pub clock_id: i32,
    /// Whether a tracepoint's callchains go on into user space (`PERF_SAMPLE_CALLCHAIN`
    /// without `exclude_callchain_user`: `perf-command --user-stacks`), or its samples copy
    /// the user stack (`--call-graph dwarf`).
    pub user_stacks: bool,
    /// The largest user stack copy of a tracepoint's samples (`sample_stack_user`), 0 without.
    pub stack_copy: u32,
    /// Whether an attr asks for build ids in its MMAP2 records (`perf record --buildid-mmap`).
    pub mmap_build_id: bool,
}

impl Events {
    /// The tracepoint events recorded, with whether each has a callchain (for
    /// [`event_notes`]).
    pub fn recorded(&self) -> Vec<(&str, bool)> {
        self.events
            .iter()
            .filter(|e| e.tracefs_id != 0)
            .map(|e| (e.name.as_str(), e.callchain()))
            .collect()
    }
}

/// One [`EventDesc`] per attr: named from the file's event descriptions (else the tracing
/// data, else `attrN`), with the tracefs format of its id, its `--filter` in `cmdline`, and
/// IDENTIFIER added to its sample type if it lacks it. `raw` are the attrs as written (see
/// [`RawAttr`]; ignored unless there is one per attr). Notes say which formats are missing
/// and whether IDENTIFIER was added.
pub(crate) fn events(
    attrs: &[Attr],
    raw: &[RawAttr],
    tracing: &TracingData,
    cmdline: &[String],
    notes: &mut Vec<String>,
) -> Events {
    let filters = filters_from_cmdline(&cmdline.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    let mut events = Vec::new();
    let mut infos = Vec::new();
    let mut clock_id = -1;
    let (mut user_stacks, mut mmap_build_id) = (false, false);
    let mut stack_copy = 0u32;
    let n_attrs = attrs.len();
    for (i, a) in attrs.iter().enumerate() {
        let attr = &a.attr;
        let tracefs_id = match attr.type_ {
            PerfEventType::Tracepoint(c) => c,
            _ => 0,
        };
        let traced = tracing.formats.get(&tracefs_id).filter(|_| tracefs_id != 0);
        let name = a
            .name
            .clone()
            .or_else(|| traced.map(|t| t.0.clone()))
            .unwrap_or_else(|| format!("attr{i}"));
        let format = traced.map(|t| t.1.clone()).unwrap_or_default();
        if tracefs_id != 0 && format.is_empty() {
            notes.push(format!(
                "{name}: no tracefs format for id {tracefs_id} in the file: its payloads cannot be decoded"
            ));
        }
        let sf = attr.sample_format;
        let mut sample_type = sf.bits();
        let mut ids = a.ids.clone();
        let add_id = if sf.contains(SampleFormat::IDENTIFIER) {
            None
        } else {
            if ids.is_empty() {
                ids.push(u64::MAX - i as u64);
            }
            sample_type |= SampleFormat::IDENTIFIER.bits();
            Some(ids[0])
        };
        let mut flags = 0;
        if sf.contains(SampleFormat::CALLCHAIN) {
            flags |= EVENT_CALLCHAIN;
        }
        // The bitfield flags as the recording host wrote them (see [`RawAttr`]).
        let own = raw.get(i).filter(|_| raw.len() == n_attrs);
        let aflags = own.map_or(attr.flags, |r| AttrFlags::from_bits_truncate(r.flags));
        if aflags.intersects(AttrFlags::COMM | AttrFlags::TASK) {
            flags |= EVENT_TASK_RECORDS;
        }
        // perf's `--call-graph dwarf`: a stack copy, and no user frames in the callchain.
        let copies = tracefs_id != 0
            && sf.contains(SampleFormat::STACK_USER | SampleFormat::REGS_USER)
            && attr.sample_stack_user > 0;
        stack_copy = stack_copy.max(if copies { attr.sample_stack_user } else { 0 });
        user_stacks |= copies
            || tracefs_id != 0
                && sf.contains(SampleFormat::CALLCHAIN)
                && !aflags.contains(AttrFlags::EXCLUDE_CALLCHAIN_USER);
        mmap_build_id |= aflags.contains(AttrFlags::MMAP2 | AttrFlags::BUILD_ID);
        if aflags.contains(AttrFlags::USE_CLOCKID) && clock_id == -1 {
            clock_id = match own.and_then(|r| r.clockid) {
                Some(c) => c,
                None => clock_number(&attr.clock),
            };
        }
        infos.push(AttrInfo {
            add_id,
            sample_id_all: aflags.contains(AttrFlags::SAMPLE_ID_ALL),
            sample_type: sf.bits(),
        });
        events.push(EventDesc {
            filter: filters.get(&name).cloned().unwrap_or_default(),
            name,
            tracefs_id: u32::try_from(tracefs_id).unwrap_or(0),
            sample_type,
            read_format: attr.read_format.bits(),
            flags,
            max_stack: attr.sample_max_stack,
            format,
            ids,
            regs_user: attr.sample_regs_user,
            stack_user: attr.sample_stack_user,
        });
    }
    if infos.iter().any(|i| i.add_id.is_some()) {
        notes.push(
            "the file's samples lack PERF_SAMPLE_IDENTIFIER: the converter added it (the attr's id \
             prepended to samples, appended to sample_id_all trailers)"
                .into(),
        );
    }
    Events {
        events,
        infos,
        clock_id,
        user_stacks,
        stack_copy,
        mmap_build_id,
    }
}

/// The events of one `-e` argument, without their `/term=value,.../` config terms
/// (`block:block_bio_queue/call-graph=fp/` is the event `block:block_bio_queue`): commas
/// inside the terms do not separate events.
fn events_of_arg(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_terms = false;
    for c in v.chars() {
        match c {
            '/' => in_terms = !in_terms,
            ',' if !in_terms => out.push(std::mem::take(&mut cur)),
            c if !in_terms => cur.push(c),
            _ => {}
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect()
}

/// Extracts `-e EVENT ... --filter F` pairs from perf's recorded command line.
fn filters_from_cmdline(args: &[&str]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut last: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, val) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (*a, None),
        };
        match flag {
            "-e" | "--event" => {
                let v = val.or_else(|| it.next().map(|s| s.to_string()));
                last = v.map(|v| events_of_arg(&v)).unwrap_or_default();
            }
            "--filter" => {
                if let Some(v) = val.or_else(|| it.next().map(|s| s.to_string())) {
                    for e in &last {
                        out.insert(e.clone(), v.clone());
                    }
                }
            }
            "--" => break,
            _ => {}
        }
    }
    out
}

/// The `clockid_t` number of perf's clock (-1: perf's default clock).
fn clock_number(c: &PerfClock) -> i32 {
    use linux_perf_data::linux_perf_event_reader::ClockId;
    match c {
        PerfClock::Default => -1,
        PerfClock::ClockId(id) => match id {
            ClockId::Realtime => 0,
            ClockId::Monotonic => 1,
            ClockId::ProcessCputimeId => 2,
            ClockId::ThreadCputimeId => 3,
            ClockId::MonotonicRaw => 4,
            ClockId::RealtimeCoarse => 5,
            ClockId::MonotonicCoarse => 6,
            ClockId::Boottime => 7,
            ClockId::RealtimeAlarm => 8,
            ClockId::BoottimeAlarm => 9,
            _ => -1,
        },
    }
}

#[cfg(test)]
mod tests {
    use linux_perf_data::linux_perf_event_reader::{
        BranchSampleFormat, ClockId, PerfEventAttr, ReadFormat, SamplingPolicy, WakeupPolicy,
    };

    use super::*;

    fn attr(tracefs_id: u64, sample_type: SampleFormat, flags: AttrFlags) -> PerfEventAttr {
        PerfEventAttr {
            type_: PerfEventType::Tracepoint(tracefs_id),
            sampling_policy: SamplingPolicy::NoSampling,
            sample_format: sample_type,
            read_format: ReadFormat::empty(),
            flags,
            wakeup_policy: WakeupPolicy::EventCount(1),
            branch_sample_format: BranchSampleFormat::empty(),
            sample_regs_user: 0,
            sample_stack_user: 0,
            clock: PerfClock::ClockId(ClockId::Boottime),
            sample_regs_intr: 0,
            aux_watermark: 0,
            sample_max_stack: 127,
            aux_sample_size: 0,
            sig_data: 0,
        }
    }

    fn tracing() -> TracingData {
        let mut t = TracingData::default();
        t.formats.insert(
            2104,
            (
                "block:block_rq_issue".into(),
                "name: block_rq_issue\nID: 2104\n".into(),
            ),
        );
        t
    }

    #[test]
    fn events_from_attrs() {
        let st = SampleFormat::IDENTIFIER | SampleFormat::TIME | SampleFormat::CALLCHAIN;
        let attrs = [
            Attr {
                attr: attr(2104, st, AttrFlags::SAMPLE_ID_ALL | AttrFlags::USE_CLOCKID),
                name: None,
                ids: vec![11, 12],
            },
            Attr {
                attr: attr(77, SampleFormat::TIME, AttrFlags::COMM),
                name: Some("block:block_bio_queue".into()),
                ids: vec![],
            },
        ];
        let cmdline: Vec<String> = [
            "perf",
            "record",
            "-e",
            "block:block_rq_issue",
            "--filter",
            "dev == 1",
        ]
        .map(String::from)
        .to_vec();
        let mut notes = Vec::new();
        let e = events(&attrs, &[], &tracing(), &cmdline, &mut notes);
        assert_eq!(e.events.len(), 2);
        let (a, b) = (&e.events[0], &e.events[1]);
        assert_eq!(a.name, "block:block_rq_issue");
        assert_eq!(a.tracefs_id, 2104);
        assert_eq!(a.filter, "dev == 1");
        assert!(a.format.starts_with("name: block_rq_issue"));
        assert_eq!(a.flags, EVENT_CALLCHAIN);
        assert_eq!(a.sample_type, st.bits());
        assert_eq!(a.ids, [11, 12]);
        assert_eq!(a.max_stack, 127);
        // Without IDENTIFIER and ids: a synthetic id, prepended and appended.
        assert_eq!(b.name, "block:block_bio_queue");
        assert_eq!(b.flags, EVENT_TASK_RECORDS);
        assert_eq!(b.ids, [u64::MAX - 1]);
        assert_eq!(
            b.sample_type,
            (SampleFormat::TIME | SampleFormat::IDENTIFIER).bits()
        );
        assert_eq!(
            e.infos,
            [
                AttrInfo {
                    add_id: None,
                    sample_id_all: true,
                    sample_type: st.bits()
                },
                AttrInfo {
                    add_id: Some(u64::MAX - 1),
                    sample_id_all: false,
                    sample_type: SampleFormat::TIME.bits()
                }
            ]
        );
        assert_eq!(e.clock_id, 7);
        assert_eq!(
            e.recorded(),
            [
                ("block:block_rq_issue", true),
                ("block:block_bio_queue", false)
            ]
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert_eq!(
            notes[0],
            "block:block_bio_queue: no tracefs format for id 77 in the file: its payloads cannot be decoded"
        );
        assert!(notes[1].starts_with("the file's samples lack PERF_SAMPLE_IDENTIFIER"));
    }

    #[test]
    fn raw_flags_win_when_there_is_one_per_attr() {
        let attrs = [Attr {
            attr: attr(2104, SampleFormat::IDENTIFIER, AttrFlags::empty()),
            name: None,
            ids: vec![1],
        }];
        let raw = RawAttr {
            flags: (AttrFlags::SAMPLE_ID_ALL | AttrFlags::USE_CLOCKID | AttrFlags::TASK).bits(),
            clockid: Some(1),
        };
        let mut notes = Vec::new();
        let e = events(&attrs, &[raw], &tracing(), &[], &mut notes);
        assert!(e.infos[0].sample_id_all);
        assert_eq!(e.events[0].flags, EVENT_TASK_RECORDS);
        assert_eq!(e.clock_id, 1);
        assert!(notes.is_empty(), "{notes:?}");
        // A count that does not match the attrs': the parser's flags.
        let e = events(&attrs, &[raw, raw], &tracing(), &[], &mut notes);
        assert!(!e.infos[0].sample_id_all);
        assert_eq!(e.clock_id, -1);
        // Unnamed and unknown: attrN.
        let other = [Attr {
            attr: PerfEventAttr {
                type_: PerfEventType::Software(
                    linux_perf_data::linux_perf_event_reader::SoftwareCounterType::Dummy,
                ),
                ..attrs[0].attr
            },
            name: None,
            ids: vec![1],
        }];
        let e = events(&other, &[], &tracing(), &[], &mut notes);
        assert_eq!(e.events[0].name, "attr0");
        assert_eq!(e.events[0].tracefs_id, 0);
        assert!(e.recorded().is_empty());
    }

    #[test]
    fn raw_attr_of_either_order() {
        let mut a = vec![0u8; 96];
        let flags = 1u64 << 18 | 1;
        // Big-endian: the bitfields are laid out from each byte's top bit.
        for (order, word) in [
            (ByteOrder::Little, flags),
            (ByteOrder::Big, flags.reverse_bits()),
        ] {
            a[40..48].copy_from_slice(&order.put64(word));
            a[92..96].copy_from_slice(&order.put32(7));
            let want = RawAttr {
                flags,
                clockid: Some(7),
            };
            assert_eq!(RawAttr::parse(&a, order), want);
        }
        // An attr too small for clockid.
        assert_eq!(RawAttr::parse(&a[..64], ByteOrder::Big).clockid, None);
    }

    #[test]
    fn no_tracing_data_is_a_note() {
        let mut notes = Vec::new();
        let t = tracing_data(None, &mut notes).unwrap();
        assert!(t.formats.is_empty());
        assert_eq!(
            notes,
            ["the file has no tracing data section: tracepoint payloads cannot be decoded"]
        );
        let e = tracing_data(Some(b"junk"), &mut notes).unwrap_err();
        assert!(matches!(e, Corruption::TracingData(_)), "{e}");
        assert!(e.to_string().starts_with("tracing data: "), "{e}");
    }

    #[test]
    fn clock_numbers() {
        assert_eq!(clock_number(&PerfClock::Default), -1);
        assert_eq!(clock_number(&PerfClock::ClockId(ClockId::Monotonic)), 1);
        assert_eq!(clock_number(&PerfClock::ClockId(ClockId::MonotonicRaw)), 4);
        assert_eq!(clock_number(&PerfClock::ClockId(ClockId::Boottime)), 7);
    }

    #[test]
    fn cmdline_filters() {
        let args = [
            "perf",
            "record",
            "-e",
            "block:block_dirty_buffer",
            "--filter",
            "sector < 4",
            "-e",
            "block:a,block:b",
            "--filter=dev == 1",
            "-e",
            "x:y",
            "--",
            "--filter",
            "z",
        ];
        let f = filters_from_cmdline(&args);
        assert_eq!(f["block:block_dirty_buffer"], "sector < 4");
        assert_eq!(f["block:a"], "dev == 1");
        assert_eq!(f["block:b"], "dev == 1");
        assert!(!f.contains_key("x:y"));
        // Per-event callchains, as perf-command prints them: the terms are not the name.
        let args = [
            "perf",
            "record",
            "-e",
            "block:block_dirty_buffer/call-graph=fp/",
            "--filter",
            "sector < 4",
            "-e",
            "block:a/call-graph=fp,max-stack=32/,block:b",
            "--filter",
            "dev == 1",
        ];
        let f = filters_from_cmdline(&args);
        assert_eq!(f.len(), 3, "{f:?}");
        assert_eq!(f["block:block_dirty_buffer"], "sector < 4");
        assert_eq!(f["block:a"], "dev == 1");
        assert_eq!(f["block:b"], "dev == 1");
    }

    #[test]
    fn renamed_events_count_as_recorded() {
        let all: Vec<(&str, bool)> = NEEDED
            .iter()
            .map(|(e, _)| (*e, ioblame_tracepoints::CALLCHAIN_EVENTS.contains(e)))
            .collect();
        assert!(event_notes(&all).is_empty(), "{:?}", event_notes(&all));
        // A kernel with writeback_dirty_page: perf-command records the old name, and nothing
        // is missing.
        let old: Vec<(&str, bool)> = all
            .iter()
            .map(|&(e, c)| {
                if e == "writeback:writeback_dirty_folio" {
                    ("writeback:writeback_dirty_page", c)
                } else {
                    (e, c)
                }
            })
            .collect();
        assert!(event_notes(&old).is_empty(), "{:?}", event_notes(&old));
        // Its callchain is checked under the old name too.
        let bare: Vec<(&str, bool)> = old
            .iter()
            .map(|&(e, c)| (e, c && e != "writeback:writeback_dirty_page"))
            .collect();
        assert_eq!(
            event_notes(&bare),
            [
                "recorded without callchains on writeback:writeback_dirty_page: the intents of \
              their IO have no stacks; record them with kernel callchains (-e \
              EVENT/call-graph=fp/ and --kernel-callchains, as `ioblame perf-command` prints, \
              or -g)"
            ]
        );
        // Neither name: the advice names both.
        let none: Vec<(&str, bool)> = all
            .iter()
            .copied()
            .filter(|(e, _)| *e != "writeback:writeback_dirty_folio")
            .collect();
        let n = event_notes(&none);
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].starts_with(
                "no writeback:writeback_dirty_folio: buffered writes cannot be charged"
            ),
            "{n:?}"
        );
        assert!(
            n[0].contains("add -e writeback:writeback_dirty_folio (or writeback:writeback_dirty_page, its name on older kernels"),
            "{n:?}"
        );
        // Without any callchain: the plain note.
        let flat: Vec<(&str, bool)> = all.iter().map(|&(e, _)| (e, false)).collect();
        let n = event_notes(&flat);
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(n[0].contains(": intents have no stacks;"), "{n:?}");
    }
}
