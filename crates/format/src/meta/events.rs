//! The recorded events (EVENTS block): each tracepoint's perf attributes, in-kernel filter,
//! tracefs `format` text and sample ids, everything needed to decode its samples.

use crate::codec::{Dec, Enc, INITIAL_CAPACITY};
use crate::error::DecodeError;

/// `EventDesc::flags` bit: samples of this event carry a kernel callchain.
pub const EVENT_CALLCHAIN: u32 = 1;
/// `EventDesc::flags` bit: this event also emits COMM/FORK/EXIT/EXEC task records.
pub const EVENT_TASK_RECORDS: u32 = 2;
/// `EventDesc::flags` bit: a second perf event on the tracepoint of the event of the same
/// name without this bit, sampling one hit in N per CPU with a callchain (the recorder's
/// `--stacks sampled:N`): each of its samples repeats one of that event's (same thread, same
/// time), adding the stack.
pub const EVENT_STACK_SAMPLE: u32 = 4;

/// One recorded event (a tracepoint), with everything needed to decode its samples.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventDesc {
    /// `subsystem:name`, e.g. `block:block_bio_queue`.
    pub name: String,
    /// The tracefs event id (`events/<sys>/<name>/id`), which is `common_type` in the payload.
    pub tracefs_id: u32,
    /// `perf_event_attr.sample_type` used for this event.
    pub sample_type: u64,
    /// `perf_event_attr.read_format`.
    pub read_format: u64,
    /// `EVENT_*` flags.
    pub flags: u32,
    /// `perf_event_attr.sample_max_stack` (0 when callchains are off or unlimited).
    pub max_stack: u16,
    /// The in-kernel filter applied (`PERF_EVENT_IOC_SET_FILTER`), empty when none.
    pub filter: String,
    /// The full tracefs `format` text of the event on the recording kernel.
    pub format: String,
    /// The perf sample ids (`PERF_EVENT_IOC_ID`) of this event, one per CPU; the
    /// `IDENTIFIER` of each sample is one of these.
    pub ids: Vec<u64>,
    /// `perf_event_attr.sample_regs_user`: the user registers of its samples (`REGS_USER`),
    /// 0 without (format 1.10, a trailing field of the block).
    pub regs_user: u64,
    /// `perf_event_attr.sample_stack_user`: the bytes of user stack copied with its samples
    /// (`STACK_USER`), 0 without (format 1.10).
    pub stack_user: u32,
}

impl EventDesc {
    /// Whether samples of this event carry callchains.
    pub fn callchain(&self) -> bool {
        self.flags & EVENT_CALLCHAIN != 0
    }
}

pub(crate) fn encode_events(events: &[EventDesc]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(events.len() as u32);
    for ev in events {
        e.str(&ev.name)
            .u32(ev.tracefs_id)
            .u64(ev.sample_type)
            .u64(ev.read_format)
            .u32(ev.flags)
            .u16(ev.max_stack)
            .u16(0)
            .str(&ev.filter)
            .str(&ev.format)
            .u32(ev.ids.len() as u32);
        for id in &ev.ids {
            e.u64(*id);
        }
    }
    // Format 1.10: each event's user registers and stack size, after the events.
    for ev in events {
        e.u64(ev.regs_user).u32(ev.stack_user);
    }
    e.buf
}

pub(crate) fn decode_events(b: &[u8]) -> Result<Vec<EventDesc>, DecodeError> {
    let mut d = Dec::new(b);
    let n = d.count(40, "event count")?;
    let mut v = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    for _ in 0..n {
        let name = d.str("event name")?;
        let tracefs_id = d.u32("tracefs id")?;
        let sample_type = d.u64("sample type")?;
        let read_format = d.u64("read format")?;
        let flags = d.u32("event flags")?;
        let max_stack = d.u16("max stack")?;
        d.u16("reserved")?;
        let filter = d.str("filter")?;
        let format = d.str("format")?;
        let nids = d.count(8, "id count")?;
        let mut ids = Vec::with_capacity(nids.min(INITIAL_CAPACITY));
        for _ in 0..nids {
            ids.push(d.u64("sample id")?);
        }
        v.push(EventDesc {
            name,
            tracefs_id,
            sample_type,
            read_format,
            flags,
            max_stack,
            filter,
            format,
            ids,
            regs_user: 0,
            stack_user: 0,
        });
    }
    // Before 1.10 the block ends here.
    if d.remaining() >= v.len() * 12 {
        for ev in &mut v {
            ev.regs_user = d.u64("user regs mask")?;
            ev.stack_user = d.u32("user stack size")?;
        }
    }
    Ok(v)
}

#[cfg(all(test, feature = "reader"))]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip() {
        let v = vec![
            EventDesc {
                name: "block:block_rq_issue".into(),
                tracefs_id: 1201,
                sample_type: 0x1234,
                read_format: 4,
                flags: EVENT_CALLCHAIN | EVENT_TASK_RECORDS,
                max_stack: 64,
                filter: "dev == 8388608".into(),
                format: "name: block_rq_issue\n".into(),
                ids: vec![10, 11, 12],
                regs_user: 0x1c0,
                stack_user: 4096,
            },
            EventDesc::default(),
        ];
        let b = encode_events(&v);
        let d = decode_events(&b).unwrap();
        assert_eq!(d, v);
        assert!(d[0].callchain() && !d[1].callchain());
        // A block of 1.9 or before ends before the registers and stack sizes.
        let old = decode_events(&b[..b.len() - 24]).unwrap();
        assert_eq!((old[0].regs_user, old[0].stack_user), (0, 0));
        assert_eq!(old[0].ids, v[0].ids);
    }

    #[test]
    fn truncated_events_and_impossible_counts_are_errors() {
        let b = encode_events(&[EventDesc::default()]);
        assert!(decode_events(&b[..b.len() - 13]).is_err());
        let mut x = b.clone();
        x[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_events(&x).unwrap_err().what.contains("cannot fit"));
    }
}
