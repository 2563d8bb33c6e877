//! Raw perf records: samples (for any supported `sample_type`) and the task and loss records,
//! read in the recording host's byte order. The format itself is `ioblame-perfrec`'s (one
//! parser for the recorder, the decoder and perf.data); this module re-exports it and takes
//! the records as the chunk reader hands them on.

use ioblame_format::{RawRecord, PERF_HEADER_LEN};

pub use ioblame_perfrec::{
    check_sample_type, parse_sample, parse_sample_id, parse_sample_regs, sample_id_len, Callchain,
    RecordError, Sample, SampleId, SampleLayout, SampleParts, TaskRecord, CONTEXT_KERNEL,
    CONTEXT_MAX, CONTEXT_USER, MAX_CALLCHAIN, MISC_COMM_EXEC, MISC_MMAP_BUILD_ID, MISC_MMAP_DATA,
    RECORD_COMM, RECORD_EXIT, RECORD_FORK, RECORD_LOST, RECORD_LOST_SAMPLES, RECORD_MMAP,
    RECORD_MMAP2, RECORD_SAMPLE, SAMPLE_ADDR, SAMPLE_CALLCHAIN, SAMPLE_CGROUP, SAMPLE_CPU,
    SAMPLE_ID, SAMPLE_IDENTIFIER, SAMPLE_IP, SAMPLE_PERIOD, SAMPLE_RAW, SAMPLE_READ,
    SAMPLE_REGS_USER, SAMPLE_STACK_USER, SAMPLE_STREAM_ID, SAMPLE_TID, SAMPLE_TIME,
    SUPPORTED_SAMPLE_TYPE,
};

/// Parses a COMM, FORK, EXIT, MMAP, MMAP2, LOST or LOST_SAMPLES record whose trailer is laid
/// out for `sample_type` ([`ioblame_perfrec::parse_task_record`] on the record's header and
/// body). Returns `Ok(None)` for other record types, and for mappings of data
/// (`PERF_RECORD_MISC_MMAP_DATA`).
pub fn parse_task_record<'a>(
    rec: &RawRecord<'a>,
    sample_type: u64,
    order: ioblame_format::ByteOrder,
) -> Result<Option<(TaskRecord<'a>, SampleId)>, RecordError> {
    let body = rec.bytes.get(PERF_HEADER_LEN..).unwrap_or_default();
    ioblame_perfrec::parse_task_record(rec.kind, rec.misc, body, sample_type, order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{self, SampleValues};
    use ioblame_format::ByteOrder;

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
                regs_user: vec![0x7ffd_0000_0010, 0x7ffd_0000_0000, 0x5555_0000_1234],
                stack_user: vec![7; 20],
            };
            let rec = synth::sample_record(st, order, &v);
            assert_eq!(rec.len() % 8, 0);
            let raw = RawRecord {
                kind: RECORD_SAMPLE,
                misc: 0,
                bytes: &rec,
            };
            // x86's BP, SP and IP.
            let regs = 1 << 6 | 1 << 7 | 1 << 8;
            let s = parse_sample_regs(raw.body(), st, regs, order).unwrap();
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
            let r = s.regs_user.unwrap();
            assert_eq!(
                (r.get(6), r.get(8)),
                (Some(0x7ffd_0000_0010), Some(0x5555_0000_1234))
            );
            assert_eq!(s.stack_user, Some(&[7u8; 20][..]));
            // Every truncation is an error, never a panic.
            for cut in 0..raw.body().len() {
                assert!(
                    parse_sample_regs(&raw.body()[..cut], st, regs, order).is_err(),
                    "cut {cut}"
                );
            }
        }
    }

    /// The layout reads what parse_sample reads, for every subset of the supported fields,
    /// in both byte orders, and fails on every truncation where parse_sample fails.
    #[test]
    fn layout_agrees_with_the_full_walk() {
        let bits = [
            SAMPLE_IDENTIFIER,
            SAMPLE_IP,
            SAMPLE_TID,
            SAMPLE_TIME,
            SAMPLE_ADDR,
            SAMPLE_ID,
            SAMPLE_STREAM_ID,
            SAMPLE_CPU,
            SAMPLE_PERIOD,
            SAMPLE_CALLCHAIN,
            SAMPLE_RAW,
            SAMPLE_CGROUP,
        ];
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
            ..SampleValues::default()
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
        let user = CONTEXT_USER;
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
