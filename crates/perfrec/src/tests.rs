//! Unit tests: the layout against the recorder's old hard-coded offsets, each record type
//! in both byte orders, and every truncation refused without a panic.

use super::*;

/// The recorder's sample type (`capture/src/perf.rs`).
const RECORDER: u64 = SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_RAW;

/// A record being encoded: header, then words in `order`.
struct Enc {
    b: Vec<u8>,
    order: ByteOrder,
}

impl Enc {
    fn new(order: ByteOrder, kind: u32, misc: u16) -> Enc {
        let mut b = order.put32(kind).to_vec();
        b.extend(order.put16(misc));
        b.extend([0, 0]);
        Enc { b, order }
    }
    fn u64(&mut self, v: u64) -> &mut Enc {
        self.b.extend(self.order.put64(v));
        self
    }
    fn u32s(&mut self, a: u32, c: u32) -> &mut Enc {
        self.b.extend(self.order.put32(a));
        self.b.extend(self.order.put32(c));
        self
    }
    fn bytes(&mut self, v: &[u8]) -> &mut Enc {
        self.b.extend(v);
        self
    }
    fn done(&mut self) -> Vec<u8> {
        self.b.resize(self.b.len().next_multiple_of(8), 0);
        let n = self.order.put16(self.b.len() as u16);
        self.b[6..8].copy_from_slice(&n);
        self.b.clone()
    }
}

/// The recorder's trailer: pid/tid, time, cpu, identifier.
fn trailer(e: &mut Enc) -> Vec<u8> {
    e.u32s(5, 6).u64(77).u32s(1, 0).u64(42).done()
}

#[test]
fn the_layout_gives_the_offsets_the_recorder_had_hard_coded() {
    // `touched::AFTER_FIXED`: the raw size of a sample without callchain, in the record.
    let l = SampleLayout::new(RECORDER).unwrap();
    assert_eq!(HEADER_LEN + l.fixed_len(), 40);
    assert_eq!(l.callchain_at(), None);
    // `ustack::CALLCHAIN_AT`, and the pid read at 16 of the record.
    for extra in [0, SAMPLE_CGROUP] {
        let l = SampleLayout::new(RECORDER | SAMPLE_CALLCHAIN | extra).unwrap();
        assert_eq!(l.callchain_at().map(|a| a + HEADER_LEN), Some(40));
        assert_eq!(l.tid_at().map(|a| a + HEADER_LEN), Some(16));
        assert_eq!(l.time_at().map(|a| a + HEADER_LEN), Some(24));
    }
    // The trailer's time, 24 bytes before the end of a record.
    assert_eq!(sample_id_len(RECORDER), 32);
    // A field added before the callchain moves it.
    let l = SampleLayout::new(RECORDER | SAMPLE_CALLCHAIN | SAMPLE_IP).unwrap();
    assert_eq!(l.callchain_at(), Some(40));
    assert!(SampleLayout::new(RECORDER | SAMPLE_READ).is_none());
}

fn sample(order: ByteOrder, chain: &[u64]) -> Vec<u8> {
    let mut e = Enc::new(order, RECORD_SAMPLE, MISC_KERNEL);
    e.u64(11)
        .u32s(100, 101)
        .u64(123)
        .u32s(3, 0)
        .u64(chain.len() as u64);
    for &ip in chain {
        e.u64(ip);
    }
    e.bytes(&order.put32(4)).bytes(&[9, 8, 7, 6]).u64(4242);
    e.done()
}

#[test]
fn samples_parse_in_both_orders_and_cuts_are_errors() {
    let st = RECORDER | SAMPLE_CALLCHAIN | SAMPLE_CGROUP;
    let chain = [
        CONTEXT_KERNEL,
        0xffff_ffff_8100_0010,
        CONTEXT_USER,
        0x40_1000,
        0x40_2000,
    ];
    for order in [ByteOrder::Little, ByteOrder::Big] {
        let rec = sample(order, &chain);
        let body = &rec[HEADER_LEN..];
        let s = parse_sample(body, st, order).unwrap();
        assert_eq!(s.identifier, Some(11));
        assert_eq!(s.pid_tid, Some((100, 101)));
        assert_eq!((s.time, s.cpu, s.cgroup), (Some(123), Some(3), Some(4242)));
        assert_eq!(&s.raw.unwrap()[..4], &[9, 8, 7, 6]);
        let c = s.callchain.unwrap();
        assert_eq!(&*c.kernel(), &[0xffff_ffff_8100_0010]);
        let user: Vec<u64> = c
            .user()
            .chunks_exact(8)
            .map(|w| order.u64(w.try_into().unwrap()))
            .collect();
        assert_eq!(user, [0x40_1000, 0x40_2000]);
        let l = SampleLayout::new(st).unwrap();
        assert_eq!(l.parse(body, order), Some(SampleParts::from(s)));
        for cut in 0..body.len() {
            assert!(parse_sample(&body[..cut], st, order).is_err(), "cut {cut}");
            assert!(l.parse(&body[..cut], order).is_none(), "cut {cut}");
        }
    }
}

#[test]
fn the_user_part_of_a_callchain_ends_at_the_next_marker() {
    let order = ByteOrder::native();
    let st = RECORDER | SAMPLE_CALLCHAIN;
    let words = |b: &[u8]| -> Vec<u64> {
        b.chunks_exact(8)
            .map(|w| order.u64(w.try_into().unwrap()))
            .collect()
    };
    for (chain, want) in [
        (
            &[CONTEXT_KERNEL, 1, CONTEXT_USER, 2, 3, CONTEXT_KERNEL, 4][..],
            &[2, 3][..],
        ),
        (&[CONTEXT_KERNEL, 1][..], &[][..]),
        (&[CONTEXT_USER][..], &[][..]),
        (&[CONTEXT_USER, 5][..], &[5][..]),
    ] {
        let rec = sample(order, chain);
        let s = parse_sample(&rec[HEADER_LEN..], st | SAMPLE_CGROUP, order).unwrap();
        assert_eq!(words(s.callchain.unwrap().user()), want, "{chain:x?}");
    }
}

fn mmap2(order: ByteOrder, build_id: Option<&[u8]>, name: &str) -> Vec<u8> {
    let misc = if build_id.is_some() {
        MISC_MMAP_BUILD_ID
    } else {
        0
    };
    let mut e = Enc::new(order, RECORD_MMAP2, misc | MISC_USER);
    e.u32s(9, 10).u64(0x5555_0000_1000).u64(0x3000).u64(0x1000);
    match build_id {
        Some(id) => {
            let mut slot = [0u8; 24];
            slot[0] = id.len() as u8;
            slot[4..4 + id.len()].copy_from_slice(id);
            e.bytes(&slot);
        }
        None => {
            e.u32s(8, 1).u64(42).u64(0);
        }
    }
    e.u32s(5, 2).bytes(name.as_bytes()).bytes(&[0]);
    let mut t = Enc { b: e.done(), order };
    trailer(&mut t)
}

#[test]
fn mmap2_records_with_device_or_build_id() {
    for order in [ByteOrder::Little, ByteOrder::Big] {
        let rec = mmap2(order, None, "/usr/bin/app");
        let misc = order.u16([rec[4], rec[5]]);
        let (r, sid) = parse_task_record(RECORD_MMAP2, misc, &rec[8..], RECORDER, order)
            .unwrap()
            .unwrap();
        assert_eq!(sid.time, Some(77));
        assert_eq!(sid.identifier, Some(42));
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
        assert_eq!(mmap2_name(&rec[8..]), Some(&b"/usr/bin/app"[..]));
        // The build id written over the device: the kernel's other form.
        let id: Vec<u8> = (1..=20).collect();
        let mut with = rec.clone();
        assert!(put_mmap2_build_id(&mut with[8..], &id));
        // The caller sets the misc bit; the bodies agree.
        assert_eq!(with[8..], mmap2(order, Some(&id), "/usr/bin/app")[8..]);
        let (r, _) = parse_task_record(
            RECORD_MMAP2,
            MISC_MMAP_BUILD_ID,
            &with[8..],
            RECORDER,
            order,
        )
        .unwrap()
        .unwrap();
        assert!(
            matches!(r, TaskRecord::Mmap { build_id, dev: (0, 0), ino: 0, .. } if build_id == &id[..])
        );
        // A mapping of data is not ours.
        let r = parse_task_record(RECORD_MMAP2, MISC_MMAP_DATA, &rec[8..], RECORDER, order);
        assert_eq!(r, Ok(None));
        for cut in 0..rec.len() - 8 {
            for misc in [0, MISC_MMAP_BUILD_ID] {
                let _ = parse_task_record(RECORD_MMAP2, misc, &rec[8..8 + cut], RECORDER, order);
            }
            let _ = mmap2_name(&rec[8..8 + cut]);
            assert!(!put_mmap2_build_id(&mut with[8..8 + cut.min(55)], &id));
        }
    }
}

#[test]
fn comm_fork_exit_and_lost_records() {
    for order in [ByteOrder::Little, ByteOrder::Big] {
        let mut e = Enc::new(order, RECORD_COMM, MISC_COMM_EXEC);
        e.u32s(5, 6).bytes(b"kworker/u8:1\0");
        let mut e = Enc { b: e.done(), order };
        let rec = trailer(&mut e);
        let (r, s) = parse_task_record(RECORD_COMM, MISC_COMM_EXEC, &rec[8..], RECORDER, order)
            .unwrap()
            .unwrap();
        let want = TaskRecord::Comm {
            pid: 5,
            tid: 6,
            comm: b"kworker/u8:1",
            exec: true,
        };
        assert_eq!(r, want);
        assert_eq!((s.pid_tid, s.cpu), (Some((5, 6)), Some(1)));

        for kind in [RECORD_FORK, RECORD_EXIT] {
            let mut e = Enc::new(order, kind, 0);
            e.u32s(9, 5).u32s(10, 6).u64(70);
            let rec = trailer(&mut e);
            let (r, _) = parse_task_record(kind, 0, &rec[8..], RECORDER, order)
                .unwrap()
                .unwrap();
            let (pid, ppid, tid, ptid, time) = (9, 5, 10, 6, 70);
            let want = if kind == RECORD_FORK {
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
            };
            assert_eq!(r, want);
        }
        let mut e = Enc::new(order, RECORD_LOST, 0);
        e.u64(42).u64(1000);
        let rec = trailer(&mut e);
        let (r, _) = parse_task_record(RECORD_LOST, 0, &rec[8..], RECORDER, order)
            .unwrap()
            .unwrap();
        assert_eq!(r, TaskRecord::Lost { id: 42, lost: 1000 });
        for cut in 0..rec.len() - 8 {
            assert!(parse_task_record(RECORD_LOST, 0, &rec[8..8 + cut], RECORDER, order).is_err());
        }
        // Not a task record.
        assert_eq!(
            parse_task_record(RECORD_SAMPLE, 0, &rec[8..], RECORDER, order),
            Ok(None)
        );
    }
}

#[test]
fn errors_say_what() {
    let e = check_sample_type(RECORDER | SAMPLE_READ).unwrap_err();
    assert!(e.to_string().contains("0x10"), "{e}");
    let e = parse_sample(&[0; 4], RECORDER, ByteOrder::Little).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("record truncated reading identifier"),
        "{e}"
    );
    let mut bad = vec![0u8; 16];
    bad[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(
        parse_sample(&bad, SAMPLE_CALLCHAIN, ByteOrder::Little),
        Err(RecordError::CallchainTooLong(u64::MAX))
    );
}

#[test]
fn cgroup_lost_and_mapping_names() {
    for order in [ByteOrder::Little, ByteOrder::Big] {
        let mut e = Enc::new(order, RECORD_CGROUP, 0);
        e.u64(4242).bytes(b"/ioblame/t1\0");
        let rec = trailer(&mut Enc { b: e.done(), order });
        assert_eq!(
            parse_cgroup(&rec[8..], order),
            Some((4242, &b"/ioblame/t1"[..]))
        );
        // No NUL: damaged.
        assert_eq!(parse_cgroup(&order.put64(4242), order), None);
        assert_eq!(parse_cgroup(&[0; 7], order), None);

        let body = [order.put64(42), order.put64(1000)].concat();
        assert_eq!(lost_count(RECORD_LOST, &body, order), Some(1000));
        assert_eq!(lost_count(RECORD_LOST_SAMPLES, &body, order), Some(42));
        assert_eq!(lost_count(RECORD_LOST, &body[..12], order), None);
        assert_eq!(lost_count(RECORD_COMM, &body, order), None);

        let rec = mmap2(order, None, "[vdso]");
        assert_eq!(mapping_name(RECORD_MMAP2, &rec[8..]), b"[vdso]");
        assert_eq!(mapping_name(RECORD_MMAP, &rec[8..40]), b"");
        assert_eq!(mapping_name(RECORD_MMAP2, &rec[8..8 + 66]), b"[v");
    }
}

/// The layout is a `const fn`: a fixed sample type gives constant offsets.
const RECORDER_TIME_AT: Option<usize> = match SampleLayout::new(RECORDER) {
    Some(l) => l.time_at(),
    None => None,
};

#[test]
fn the_layout_is_computed_at_compile_time() {
    assert_eq!(RECORDER_TIME_AT, Some(16));
}

#[test]
fn numbers_in_either_order() {
    let b = [1, 2, 3, 4, 5, 6, 7, 8];
    assert_eq!(ByteOrder::Little.u32_at(&b, 4), Some(0x08070605));
    assert_eq!(ByteOrder::Big.u32_at(&b, 4), Some(0x05060708));
    assert_eq!(ByteOrder::Big.u32_at(&b, 5), None);
    assert_eq!(ByteOrder::Big.u32_at(&b, usize::MAX), None);
    assert_eq!(ByteOrder::Big.u16_at(&b, usize::MAX - 1), None);
    assert_eq!(ByteOrder::Big.u64_at(&b, 0), Some(0x0102030405060708));
    assert_eq!(ByteOrder::Little.u64_at(&b, 1), None);
    assert_eq!(ByteOrder::Big.put16(0x0102), [1, 2]);
    assert_eq!(ByteOrder::Little.put32(0x01020304), [4, 3, 2, 1]);
    let big = ByteOrder::Big.put64(0xdead_beef);
    assert_eq!(ByteOrder::Big.u64_at(&big, 0), Some(0xdead_beef));
}

#[test]
fn build_ids_written_over_device_and_inode() {
    let o = ByteOrder::Little;
    let mut body = Vec::new();
    body.extend(o.put32(7));
    body.extend(o.put32(7));
    for v in [0x1000u64, 0x2000, 0, 0x0000_0008_0000_0001, 42, 1] {
        body.extend(o.put64(v));
    }
    body.extend(o.put32(5));
    body.extend(o.put32(2));
    body.extend(b"/bin/app\0\0\0\0\0\0\0\0");
    assert_eq!(mmap2_name(&body), Some(&b"/bin/app"[..]));
    assert!(put_mmap2_build_id(&mut body, &[0xab; 20]));
    assert_eq!(body[32], 20);
    assert_eq!(&body[33..36], &[0, 0, 0]);
    assert_eq!(&body[36..56], &[0xab; 20]);
    assert_eq!(mmap2_name(&body), Some(&b"/bin/app"[..]));
    assert!(!put_mmap2_build_id(&mut body[..40], &[1; 20]));
    assert_eq!(mmap2_name(&body[..60]), None);
}

/// x86's BP, SP and IP (`perf_event_x86_regs`): the registers a CFI unwinder needs.
const X86_UNWIND_REGS: u64 = 1 << 6 | 1 << 7 | 1 << 8;

/// A sample with user registers and a stack copy of `size` bytes of which `dyn_size` were
/// copied (`abi` 0: a kernel thread, no registers).
fn sample_with_stack(order: ByteOrder, abi: u64, size: u64, dyn_size: u64) -> Vec<u8> {
    let mut e = Enc::new(order, RECORD_SAMPLE, MISC_KERNEL);
    e.u64(11).u32s(100, 101).u64(123).u32s(3, 0).u64(2);
    e.u64(CONTEXT_KERNEL).u64(0xffff_ffff_8100_0000);
    e.bytes(&order.put32(4)).bytes(&[9, 8, 7, 6]);
    e.u64(abi);
    if abi != REGS_ABI_NONE {
        e.u64(0x7ffd_0000_0100)
            .u64(0x7ffd_0000_0000)
            .u64(0x5555_0000_1234);
    }
    e.u64(size);
    if size > 0 {
        let data: Vec<u8> = (0..size).map(|i| i as u8).collect();
        e.bytes(&data).u64(dyn_size);
    }
    // DATA_SRC (perf's --call-graph dwarf has it), then CGROUP.
    e.u64(0x1234);
    e.u64(4242);
    e.done()
}

#[test]
fn user_registers_and_stack_copies_are_read_by_both_walks() {
    let st = RECORDER
        | SAMPLE_CALLCHAIN
        | SAMPLE_REGS_USER
        | SAMPLE_STACK_USER
        | SAMPLE_DATA_SRC
        | SAMPLE_CGROUP;
    assert!(SampleLayout::new(st).is_none(), "REGS_USER needs its mask");
    let l = SampleLayout::with_regs(st, X86_UNWIND_REGS).unwrap();
    for order in [ByteOrder::Little, ByteOrder::Big] {
        for (abi, size, dyn_size) in [
            (REGS_ABI_64, 64, 40),
            (REGS_ABI_64, 64, 64),
            (REGS_ABI_64, 64, 0),
            (REGS_ABI_NONE, 0, 0),
            (REGS_ABI_64, 16, 99),
        ] {
            let rec = sample_with_stack(order, abi, size, dyn_size);
            let body = &rec[HEADER_LEN..];
            let s = parse_sample_regs(body, st, X86_UNWIND_REGS, order).unwrap();
            assert_eq!(s.cgroup, Some(4242), "the field after both is found");
            let regs = s.regs_user;
            assert_eq!(regs.is_some(), abi != REGS_ABI_NONE);
            if let Some(r) = regs {
                assert_eq!(r.abi, REGS_ABI_64);
                assert_eq!(r.get(6), Some(0x7ffd_0000_0100), "bp");
                assert_eq!(r.get(7), Some(0x7ffd_0000_0000), "sp");
                assert_eq!(r.get(8), Some(0x5555_0000_1234), "ip");
                assert_eq!(r.get(0), None, "ax is not in the mask");
                assert_eq!(r.get(64), None);
            }
            let copied = dyn_size.min(size) as usize;
            let want: Vec<u8> = (0..copied).map(|i| i as u8).collect();
            assert_eq!(s.stack_user.unwrap_or_default(), &want[..]);
            assert_eq!(SampleParts::from(s), l.parse(body, order).unwrap());
            // Every cut is refused by both, without a panic.
            for cut in 0..body.len() - 8 {
                let short = &body[..cut];
                assert!(parse_sample_regs(short, st, X86_UNWIND_REGS, order).is_err());
                assert!(l.parse(short, order).is_none(), "cut at {cut}");
            }
        }
    }
    assert_eq!(
        parse_sample(&[0; 64], st, ByteOrder::Little),
        Err(RecordError::NoRegsMask)
    );
    let huge = sample_with_stack(ByteOrder::Little, REGS_ABI_64, MAX_STACK_USER + 8, 0);
    assert!(
        parse_sample_regs(&huge[HEADER_LEN..], st, X86_UNWIND_REGS, ByteOrder::Little).is_err()
    );
}
