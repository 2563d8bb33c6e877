//! Unit tests: synthetic event sequences modelled on the observed ones (see
//! docs/attribution.md, "Kernel facts the code depends on").

use ioblame_decode::{CommitPhase, Dev, Event, EventKind, RaKind, Rwbs, WorkPhase, XfsFileOp};
use ioblame_format::{BlockDevice, Task};

use crate::*;

const LOOP0: Dev = 7 << 20;
const LOOP1: Dev = (7 << 20) | 1;
const ZRAM1: Dev = (253 << 20) | 1;
const SDA: Dev = 8 << 20;
const SDA1: Dev = (8 << 20) | 1;
const MIB: u64 = 1 << 20;
const FLUSHER: u32 = 50;
const JBD2: u32 = 60;
const DIRTY_STACK: &[u64] = &[0xffff_0001, 0xffff_0002, 0xffff_0003];
const BIO_STACK: &[u64] = &[0xffff_1001, 0xffff_1002];

fn dev(
    name: &str,
    major: u32,
    minor: u32,
    size_sectors: u64,
    part_start: u64,
    parent: &str,
) -> BlockDevice {
    BlockDevice {
        name: name.into(),
        major,
        minor,
        size_sectors,
        part_start,
        parent: parent.into(),
        ..BlockDevice::default()
    }
}

fn context() -> Context {
    Context {
        devices: vec![
            dev("loop0", 7, 0, 2 << 20, 0, ""),
            dev("loop1", 7, 1, 2 << 20, 0, ""),
            dev("zram1", 253, 1, 128 << 10, 0, ""),
            dev("sda", 8, 0, 4 << 20, 0, ""),
            dev("sda1", 8, 1, (4 << 20) - 2048, 2048, "sda"),
        ],
        page_size: 4096,
        recorder_pid: Some(999),
        tasks: vec![
            Task {
                pid: FLUSHER,
                tid: FLUSHER,
                comm: "kworker/u8:0-flush-7:0".into(),
            },
            Task {
                pid: JBD2,
                tid: JBD2,
                comm: "jbd2/loop0-8".into(),
            },
            Task {
                pid: 70,
                tid: 70,
                comm: "kworker/1:1H".into(),
            },
        ],
        inode_bits: InodeBits::V6_18,
        ..Context::default()
    }
}

/// A test bench: feeds events one microsecond apart and checks that every completed
/// byte is charged exactly once.
struct Bench {
    a: Attributor,
    t: u64,
    ios: Vec<Io>,
    completed_bytes: u64,
}

impl Bench {
    fn new() -> Bench {
        Bench::with(context())
    }
    fn with(ctx: Context) -> Bench {
        Bench {
            a: Attributor::new(ctx),
            t: 1_000_000,
            ios: Vec::new(),
            completed_bytes: 0,
        }
    }
    fn push(&mut self, pid: u32, tid: u32, kind: EventKind, stack: Option<&[u64]>) {
        self.push_copy(pid, tid, kind, stack, None);
    }
    /// A direct write of 1 MiB by process `pid` at `sector` of loop0, its bio queued with
    /// `stack` (and a user stack `copy`), issued and completed.
    fn direct_write(
        &mut self,
        pid: u32,
        sector: u64,
        stack: &[u64],
        copy: Option<ioblame_decode::StackCopy>,
    ) {
        let begin = EventKind::IomapDioBegin {
            dev: LOOP0,
            ino: 14,
            pos: 0,
            count: MIB,
        };
        self.push(pid, pid, begin, None);
        let kind = EventKind::BioQueue {
            dev: LOOP0,
            sector,
            nr_sector: 2048,
            rwbs: Rwbs::parse("WS"),
        };
        self.push_copy(pid, pid, kind, Some(stack), copy);
        self.requests(LOOP0, sector, 2048, 2560, "WS");
        let kind = EventKind::IomapDioComplete {
            dev: LOOP0,
            ino: 14,
            pos: 0,
        };
        self.push(pid, pid, kind, None);
    }
    /// [`Bench::push`] with a user stack copy (`--user-stacks dwarf`).
    fn push_copy(
        &mut self,
        pid: u32,
        tid: u32,
        kind: EventKind,
        stack: Option<&[u64]>,
        copy: Option<ioblame_decode::StackCopy>,
    ) {
        self.t += 1000;
        let ev = Event {
            time: self.t,
            cpu: 0,
            pid,
            tid,
            kind,
            stack: stack.map(std::sync::Arc::from),
            cgroup: 0,
            stack_copy: copy.map(std::sync::Arc::new),
        };
        self.a.push(&ev);
        self.a.drain_ios_into(&mut self.ios);
    }
    fn wait(&mut self, ns: u64) {
        self.t += ns;
    }
    fn comm(&mut self, pid: u32, comm: &str) {
        self.push(
            pid,
            pid,
            EventKind::Comm {
                pid,
                tid: pid,
                comm: comm.into(),
                exec: true,
            },
            None,
        );
    }
    /// A folio of `1 << order` pages enters the cache and is dirtied by `pid`.
    fn dirty(&mut self, pid: u32, bdi: Dev, ino: u64, index: u64, order: u8) {
        self.push(
            pid,
            pid,
            EventKind::AddToPageCache {
                s_dev: bdi,
                ino,
                index,
                order,
                pfn: 0,
            },
            None,
        );
        self.push(
            pid,
            pid,
            EventKind::DirtyFolio { bdi, ino, index },
            Some(DIRTY_STACK),
        );
    }
    /// `pid`'s buffered write of `count` bytes at `offset` of `(LOOP0, ino)` (its range:
    /// `xfs_file_buffered_write`).
    fn buffered_write(&mut self, pid: u32, ino: u64, offset: u64, count: u64) {
        let kind = EventKind::XfsFile {
            op: XfsFileOp::BufferedWrite,
            dev: LOOP0,
            ino,
            offset,
            count,
        };
        self.push(pid, pid, kind, None);
    }
    /// `pid` writes the first `count` bytes of a 64 KiB folio at the head of `(LOOP0, ino)`,
    /// added to the page cache just before, and dirties it.
    fn large_folio_head(&mut self, pid: u32, ino: u64, count: u64) {
        let add = EventKind::AddToPageCache {
            s_dev: LOOP0,
            ino,
            index: 0,
            order: 4,
            pfn: 0,
        };
        self.push(pid, pid, add, None);
        self.buffered_write(pid, ino, 0, count);
        let dirty = EventKind::DirtyFolio {
            bdi: LOOP0,
            ino,
            index: 0,
        };
        self.push(pid, pid, dirty, Some(DIRTY_STACK));
    }
    /// The flusher writes back the 64 KiB folio at the head of `(LOOP0, ino)`, mapped to
    /// block 3000 (4 KiB blocks): one 128-sector request.
    fn write_back_large_folio(&mut self, ino: u64) {
        self.map(FLUSHER, LOOP0, ino, 0, 3000, 16);
        self.q(FLUSHER, LOOP0, 24000, 128, "W");
        self.requests(LOOP0, 24000, 128, 128, "W");
    }
    /// `mib` MiB of 1 MiB folios from file offset `at_mib`.
    fn dirty_mib(&mut self, pid: u32, bdi: Dev, ino: u64, at_mib: u64, mib: u64) {
        for i in at_mib..at_mib + mib {
            self.dirty(pid, bdi, ino, i * 256, 8);
            // delalloc buffer_heads: skipped, but tell the block size
            self.push(
                pid,
                pid,
                EventKind::DirtyBuffer {
                    dev: bdi,
                    blocknr: 0xFFFF_FFFF_FFFF_0000,
                    size: 4096,
                },
                Some(DIRTY_STACK),
            );
        }
    }
    fn map(&mut self, tid: u32, dev: Dev, ino: u64, lblk: u64, pblk: u64, n: u32) {
        let kind = EventKind::Ext4MapBlocks {
            dev,
            ino,
            flags: 0x21,
            pblk,
            lblk,
            len: n,
            mflags: 0,
            ret: n as i32,
        };
        self.push(tid, tid, kind, None);
    }
    fn q(&mut self, tid: u32, dev: Dev, sector: u64, n: u32, rwbs: &str) {
        let kind = EventKind::BioQueue {
            dev,
            sector,
            nr_sector: n,
            rwbs: Rwbs::parse(rwbs),
        };
        self.push(tid, tid, kind, Some(BIO_STACK));
    }
    fn issue(&mut self, dev: Dev, sector: u64, n: u32, rwbs: &str) {
        let r = Rwbs::parse(rwbs);
        self.push(
            70,
            70,
            EventKind::RqIssue {
                dev,
                sector,
                nr_sector: n,
                bytes: n * 512,
                rwbs: r,
            },
            None,
        );
    }
    fn complete(&mut self, dev: Dev, sector: u64, n: u32, rwbs: &str) {
        let r = Rwbs::parse(rwbs);
        if n > 0 && (r.is_read() || r.is_write()) {
            self.completed_bytes += n as u64 * 512;
        }
        self.push(
            0,
            0,
            EventKind::RqComplete {
                dev,
                sector,
                nr_sector: n,
                error: 0,
                rwbs: r,
            },
            None,
        );
    }
    /// Splits `[s, s+n)` into requests of at most `max` sectors, issues and completes them.
    fn requests(&mut self, dev: Dev, s: u64, n: u64, max: u64, rwbs: &str) {
        let mut cur = s;
        let mut keys = Vec::new();
        while cur < s + n {
            let len = max.min(s + n - cur) as u32;
            self.push(
                70,
                70,
                EventKind::GetRq {
                    dev,
                    sector: cur,
                    nr_sector: len,
                    rwbs: Rwbs::parse(rwbs),
                },
                None,
            );
            self.issue(dev, cur, len, rwbs);
            keys.push((cur, len));
            cur += len as u64;
        }
        self.wait(100_000);
        for (k, len) in keys {
            self.complete(dev, k, len, rwbs);
        }
    }
    fn wb_start(&mut self, reason: u32) {
        let kind = EventKind::WritebackWork {
            phase: WorkPhase::Start,
            bdi: LOOP0,
            sb_dev: 0,
            nr_pages: 0,
            sync_mode: 0,
            reason,
        };
        self.push(FLUSHER, FLUSHER, kind, None);
    }
    fn wb_end(&mut self) {
        let kind = EventKind::WritebackWork {
            phase: WorkPhase::Written,
            bdi: LOOP0,
            sb_dev: 0,
            nr_pages: 0,
            sync_mode: 0,
            reason: 0,
        };
        self.push(FLUSHER, FLUSHER, kind, None);
    }
    fn inode_start(&mut self, tid: u32, bdi: Dev, ino: u64) {
        self.push(
            tid,
            tid,
            EventKind::SingleInodeStart {
                bdi,
                ino,
                state: 0,
                nr_to_write: 1024,
            },
            None,
        );
    }
    fn inode_end(&mut self, tid: u32, bdi: Dev, ino: u64) {
        self.push(
            tid,
            tid,
            EventKind::SingleInode {
                bdi,
                ino,
                state: 0,
                nr_to_write: 0,
                wrote: 0,
            },
            None,
        );
    }

    /// `jbd2_handle_start` of a handle of transaction `txn` in `tid`, with the dirtier's
    /// stack.
    fn handle_start(&mut self, tid: u32, dev: Dev, txn: u32) {
        let kind = EventKind::Jbd2HandleStart {
            dev,
            tid: txn,
            requested_blocks: 8,
        };
        self.push(tid, tid, kind, Some(DIRTY_STACK));
    }
    /// `jbd2_handle_stats` of `tid`'s handle: it dirtied `blocks` in transaction `txn`.
    fn handle_stats(&mut self, tid: u32, dev: Dev, txn: u32, blocks: i32) {
        let kind = EventKind::Jbd2HandleStats {
            dev,
            tid: txn,
            requested_blocks: 8,
            dirtied_blocks: blocks,
        };
        self.push(tid, tid, kind, None);
    }
    fn commit(&mut self, phase: CommitPhase, txn: u32) {
        let kind = EventKind::Jbd2Commit {
            phase,
            dev: LOOP0,
            transaction: txn,
        };
        self.push(JBD2, JBD2, kind, None);
    }

    /// Finishes and checks conservation: the IOs carry every completed byte exactly once.
    fn finish(mut self) -> (Vec<Io>, Attribution) {
        let out = std::mem::replace(&mut self.a, Attributor::new(Context::default())).finish();
        self.ios.extend(out.ios.iter().cloned());
        let charged: u64 = self.ios.iter().map(|i| i.size).sum();
        assert_eq!(
            charged, self.completed_bytes,
            "every completed byte is charged exactly once"
        );
        assert_eq!(out.summary.total_bytes(), charged);
        let per_act: u64 = out
            .tables
            .totals
            .iter()
            .map(|t| t.total_bytes() + t.lower_bytes.iter().sum::<u64>())
            .sum();
        assert_eq!(per_act, charged);
        (self.ios, out)
    }
}

/// Bytes charged per (comm, via), for IOs in `dir`.
fn charged(ios: &[Io], t: &Tables, comm: &str, via: Via) -> u64 {
    ios.iter()
        .filter(|i| {
            let act = &t.acts[i.act.index()];
            t.roles[act.role.index()].comm == comm && act.via == via
        })
        .map(|i| i.size)
        .sum()
}

fn comm_bytes(ios: &[Io], t: &Tables, comm: &str) -> u64 {
    ios.iter()
        .filter(|i| t.roles[t.acts[i.act.index()].role.index()].comm == comm)
        .map(|i| i.size)
        .sum()
}

#[test]
fn a_dd_fsync_ext4_charges_dd_via_page() {
    let mut b = Bench::new();
    b.comm(100, "dd");
    b.dirty_mib(100, LOOP0, 12, 0, 16);
    // fsync in dd's context: two 8 MiB extents, each one bio split into 2560-sector requests.
    b.push(
        100,
        100,
        EventKind::Ext4Writepages {
            dev: LOOP0,
            ino: 12,
            sync_mode: 1,
        },
        None,
    );
    for (lblk, pblk) in [(0u64, 34816u64), (2048, 36864)] {
        b.map(100, LOOP0, 12, lblk, pblk, 2048);
        b.q(100, LOOP0, pblk * 8, 16384, "WS");
        b.push(
            100,
            100,
            EventKind::BioSplit {
                dev: LOOP0,
                sector: pblk * 8,
                new_sector: pblk * 8 + 2560,
                rwbs: Rwbs::parse("WS"),
            },
            None,
        );
        b.requests(LOOP0, pblk * 8, 16384, 2560, "WS");
    }
    b.push(
        100,
        100,
        EventKind::Ext4WritepagesResult {
            dev: LOOP0,
            ino: 12,
            pages_written: 4096,
        },
        None,
    );
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "dd", Via::Page), 16 * MIB);
    assert_eq!(ios.len(), 14);
    assert!(ios
        .iter()
        .all(|i| i.ino == Some(12) && i.reason.is_none() && i.dir == Dir::W && !i.split));
    // file offsets follow the extents
    let first = ios.iter().find(|i| i.sector == 294912).unwrap();
    assert_eq!(first.file_offset, Some(8 * MIB));
    // one act: dd + its dirtying stack (modifier 0: fsync, not writeback work)
    assert_eq!(t.acts.len(), 1);
    let intent = &t.intents[t.acts[0].intent.index()];
    assert_eq!(intent.modifier, 0);
    assert_eq!(intent.stack, DIRTY_STACK);
    assert_eq!(
        t.acts[0].intent,
        IntentId(2),
        "first intent after the reserved #0 and #1"
    );
    assert_eq!(out.summary.dirty_folios_left, 0);
    assert_eq!(out.summary.unknown_bytes, 0);
    // wait and io times in µs from the Q/D/C times
    assert!(ios.iter().all(|i| i.io_time >= 100 && i.wait_time > 0));
}

#[test]
fn b_periodic_writeback_by_flusher_charges_dirtier_with_reason() {
    let mut b = Bench::new();
    b.comm(101, "dd");
    b.dirty_mib(101, LOOP0, 13, 0, 8);
    b.push(
        101,
        101,
        EventKind::Exit {
            pid: 101,
            ppid: 1,
            tid: 101,
            ptid: 1,
        },
        None,
    );
    b.wait(30_000_000_000);
    b.wb_start(3);
    b.inode_start(FLUSHER, LOOP0, 13);
    b.push(
        FLUSHER,
        FLUSHER,
        EventKind::Ext4Writepages {
            dev: LOOP0,
            ino: 13,
            sync_mode: 0,
        },
        None,
    );
    b.map(FLUSHER, LOOP0, 13, 0, 38912, 2048);
    b.q(FLUSHER, LOOP0, 311296, 16384, "W");
    // six requests issued inside the bracket, the last one after it closes
    let mut cur = 311296;
    for _ in 0..6 {
        b.issue(LOOP0, cur, 2560, "W");
        cur += 2560;
    }
    b.push(
        FLUSHER,
        FLUSHER,
        EventKind::Ext4WritepagesResult {
            dev: LOOP0,
            ino: 13,
            pages_written: 2048,
        },
        None,
    );
    b.inode_end(FLUSHER, LOOP0, 13);
    b.issue(LOOP0, cur, 1024, "W");
    b.wb_end();
    let mut cur = 311296;
    for _ in 0..6 {
        b.complete(LOOP0, cur, 2560, "W");
        cur += 2560;
    }
    b.complete(LOOP0, cur, 1024, "W");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "dd", Via::Page), 8 * MIB);
    assert!(ios.iter().all(|i| i.reason == Some(WbReason(3))));
    assert!(ios
        .iter()
        .all(|i| t.roles[i.issuer.index()].comm.starts_with("kworker")));
    let intent = &t.intents[t.acts[ios[0].act.index()].intent.index()];
    assert_eq!(intent.modifier, 0x1000_0003);
    assert_eq!(intent.stack, DIRTY_STACK);
}

/// (g): writerA 8 MiB and writerB 4 MiB, then sync through the flusher.
#[test]
fn g_two_writers_then_sync() {
    let mut b = Bench::new();
    b.comm(201, "writerA");
    b.comm(202, "writerB");
    b.comm(203, "sync");
    for i in 0..8 {
        b.dirty_mib(201, LOOP0, 216, i, 1);
        if i < 4 {
            b.dirty_mib(202, LOOP0, 217, i, 1);
        }
    }
    let kind = EventKind::WritebackWork {
        phase: WorkPhase::Queue,
        bdi: LOOP0,
        sb_dev: LOOP0,
        nr_pages: 0,
        sync_mode: 1,
        reason: 2,
    };
    b.push(203, 203, kind, None);
    b.wb_start(2);
    for (ino, pblk, blocks) in [(216u64, 40960u64, 2048u32), (217, 43008, 1024)] {
        b.inode_start(FLUSHER, LOOP0, ino);
        b.map(FLUSHER, LOOP0, ino, 0, pblk, blocks);
        b.q(FLUSHER, LOOP0, pblk * 8, blocks * 8, "W");
        b.inode_end(FLUSHER, LOOP0, ino);
        b.requests(LOOP0, pblk * 8, blocks as u64 * 8, 2560, "W");
    }
    b.wb_end();
    // sync's own empty preflush bio and the flush request
    b.q(203, LOOP0, 0, 0, "FWS");
    b.issue(LOOP0, 0, 0, "FF");
    b.complete(LOOP0, u64::MAX, 0, "FF");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "writerA", Via::Page), 8 * MIB);
    assert_eq!(charged(&ios, t, "writerB", Via::Page), 4 * MIB);
    assert_eq!(comm_bytes(&ios, t, "sync"), 0);
    assert!(ios.iter().all(|i| i.reason == Some(WbReason(2))));
    assert!(ios
        .iter()
        .filter(|i| t.roles[t.acts[i.act.index()].role.index()].comm == "writerA")
        .all(|i| i.ino == Some(216)));
    assert_eq!(out.summary.flushes_issued, 1);
    assert_eq!(out.summary.flushes_completed, 1);
    assert_eq!(out.summary.empty_flush_bios, 1);
}

/// A loop device (loop1) over file 900 of loop0's filesystem, `offset` bytes in.
fn loop_context(offset: u64) -> Context {
    Context {
        loops: vec![ioblame_format::LoopDevice {
            major: 7,
            minor: 1,
            backing_major: 7,
            backing_minor: 0,
            backing_ino: 900,
            offset,
            backing_file: "/images/inner.img".into(),
            ..Default::default()
        }],
        block_sizes: vec![(LOOP0, 4096), (LOOP1, 4096)],
        ..context()
    }
}

/// Loop devices (docs/attribution.md, "Loop devices"): a writer's 1 MiB written back on
/// loop1; the loop worker writes it into the backing file (buffered), whose flusher later
/// writes it on loop0. The loop1 IO is the writer's; the loop0 IO is the writer's too, as a
/// lower copy, counted once in the act's bytes; nothing is left to the worker or flusher.
#[test]
fn loop_backing_file_writeback_is_a_copy_of_the_writers_io() {
    for offset in [0u64, 1 << 20] {
        let mut b = Bench::with(loop_context(offset));
        b.comm(201, "writerA");
        b.comm(300, "kworker/u8:7-loop1");
        b.dirty_mib(201, LOOP1, 50, 0, 1);
        // loop1's flusher writes it: the request is in flight while the worker copies it.
        b.map(FLUSHER, LOOP1, 50, 0, 1000, 256);
        b.q(FLUSHER, LOOP1, 8000, 2048, "W");
        b.issue(LOOP1, 8000, 2048, "W");
        let first = (8000 * 512 + offset) / 4096;
        for k in 0..4 {
            b.dirty(300, LOOP0, 900, first + 64 * k, 6);
        }
        b.complete(LOOP1, 8000, 2048, "W");
        // Later, loop0's flusher writes the backing file.
        b.map(FLUSHER, LOOP0, 900, first, 5000, 256);
        b.q(FLUSHER, LOOP0, 40000, 2048, "W");
        b.requests(LOOP0, 40000, 2048, 2048, "W");
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(comm_bytes(&ios, t, "writerA"), 2 * MIB, "offset {offset}");
        assert_eq!(comm_bytes(&ios, t, "kworker/u8:7-loop1"), 0);
        let lower: Vec<&Io> = ios.iter().filter(|i| i.lower).collect();
        assert_eq!(lower.iter().map(|i| i.size).sum::<u64>(), MIB);
        assert!(lower.iter().all(|i| i.dev == LOOP0));
        // The same act as the loop1 IO, its bytes counted once.
        let upper = ios.iter().find(|i| !i.lower).unwrap();
        assert!(lower.iter().all(|i| i.act == upper.act));
        let tot = &t.totals[upper.act.index()];
        assert_eq!((tot.bytes[2], tot.lower_bytes[2]), (MIB, MIB));
        assert_eq!(out.summary.lower_bytes, MIB);
        assert_eq!(out.summary.lower_unlinked_bytes, 0);
    }
}

/// Loop devices: backing-file pages dirtied when no loop request was in flight there (before
/// the recording, say) keep their dirtier, and their bytes are said to be unlinked.
#[test]
fn backing_file_writes_without_a_loop_request_stay_and_are_counted() {
    let mut b = Bench::with(loop_context(0));
    b.comm(300, "kworker/u8:7-loop1");
    for k in 0..4 {
        b.dirty(300, LOOP0, 900, 1000 + 64 * k, 6);
    }
    b.map(FLUSHER, LOOP0, 900, 1000, 5000, 256);
    b.q(FLUSHER, LOOP0, 40000, 2048, "W");
    b.requests(LOOP0, 40000, 2048, 2048, "W");
    let (ios, out) = b.finish();
    assert_eq!(comm_bytes(&ios, &out.tables, "kworker/u8:7-loop1"), MIB);
    assert!(ios.iter().all(|i| !i.lower));
    assert_eq!(out.summary.lower_unlinked_bytes, MIB);
}

/// Large folios (docs/attribution.md, "Large folios"): a 64 KiB folio in the page cache;
/// writerA writes its first half (and dirties it), writerB its second half (the folio is
/// dirty already: no dirty event, only its write range). Each is charged its half; a third
/// task writing over writerA's half later takes nothing (first dirtier wins there).
#[test]
fn large_folio_halves_written_by_two_tasks_are_charged_apart() {
    let mut b = Bench::with(Context {
        block_sizes: vec![(LOOP0, 4096)],
        ..context()
    });
    b.comm(201, "writerA");
    b.comm(202, "writerB");
    b.comm(203, "writerC");
    b.large_folio_head(201, 70, 32768);
    b.buffered_write(202, 70, 32768, 32768);
    b.buffered_write(203, 70, 0, 4096);
    b.write_back_large_folio(70);
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "writerA", Via::Page), 32768);
    assert_eq!(charged(&ios, t, "writerB", Via::Page), 32768);
    assert_eq!(comm_bytes(&ios, t, "writerC"), 0);
    assert_eq!(out.summary.folio_pages_claimed, 8);
}

/// Loop devices: a buffer another task dirties on the backing file's disk while a loop write
/// is in flight (an inode table block of the lower filesystem, say) is that task's: only the
/// loop worker's buffers are copies.
#[test]
fn other_tasks_buffers_on_the_backing_disk_are_not_copies() {
    let mut b = Bench::with(loop_context(0));
    b.comm(201, "writerA");
    b.comm(202, "other");
    b.dirty_mib(201, LOOP1, 50, 0, 1);
    b.map(FLUSHER, LOOP1, 50, 0, 1000, 256);
    b.q(FLUSHER, LOOP1, 8000, 2048, "W");
    b.issue(LOOP1, 8000, 2048, "W");
    b.push(
        202,
        202,
        EventKind::DirtyBuffer {
            dev: LOOP0,
            blocknr: 77,
            size: 4096,
        },
        Some(DIRTY_STACK),
    );
    b.complete(LOOP1, 8000, 2048, "W");
    b.q(FLUSHER, LOOP0, 77 * 8, 8, "WM");
    b.requests(LOOP0, 77 * 8, 8, 8, "WM");
    let (ios, out) = b.finish();
    assert_eq!(comm_bytes(&ios, &out.tables, "other"), 4096);
    assert!(ios.iter().all(|i| !i.lower));
}

/// Large folios: the first dirtier writing the rest of its own folio later makes those
/// pages its own for good; another task's write over them then takes nothing.
#[test]
fn large_folio_pages_written_by_their_first_dirtier_stay_its_own() {
    let mut b = Bench::with(Context {
        block_sizes: vec![(LOOP0, 4096)],
        ..context()
    });
    b.comm(201, "writerA");
    b.comm(202, "writerB");
    b.large_folio_head(201, 71, 32768);
    // writerA writes the second half too, then writerB overwrites it.
    b.buffered_write(201, 71, 32768, 32768);
    b.buffered_write(202, 71, 32768, 32768);
    b.write_back_large_folio(71);
    let (ios, out) = b.finish();
    assert_eq!(charged(&ios, &out.tables, "writerA", Via::Page), 65536);
    assert_eq!(comm_bytes(&ios, &out.tables, "writerB"), 0);
}

/// (h): two writers of disjoint halves of one file; one request straddles the boundary.
#[test]
fn h_request_straddling_two_dirtiers_is_split_by_sector() {
    let mut b = Bench::new();
    b.comm(211, "writerH1");
    b.comm(212, "writerH2");
    for i in 0..4 {
        b.dirty_mib(211, LOOP0, 218, i, 1);
        b.dirty_mib(212, LOOP0, 218, 4 + i, 1);
    }
    b.wb_start(2);
    b.inode_start(FLUSHER, LOOP0, 218);
    let base = 45056 * 8;
    b.map(FLUSHER, LOOP0, 218, 0, 45056, 2048);
    b.q(FLUSHER, LOOP0, base, 16384, "W");
    b.inode_end(FLUSHER, LOOP0, 218);
    b.wb_end();
    b.requests(LOOP0, base, 16384, 2560, "W");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "writerH1", Via::Page), 4 * MIB);
    assert_eq!(charged(&ios, t, "writerH2", Via::Page), 4 * MIB);
    // The request [base+7680, base+10240) holds 256 KiB of H1 and 1 MiB of H2.
    let mixed: Vec<&Io> = ios.iter().filter(|i| i.split).collect();
    assert_eq!(mixed.len(), 2);
    let mut sizes: Vec<(String, u64)> = mixed
        .iter()
        .map(|i| {
            (
                t.roles[t.acts[i.act.index()].role.index()].comm.clone(),
                i.size,
            )
        })
        .collect();
    sizes.sort();
    assert_eq!(
        sizes,
        vec![
            ("writerH1".to_string(), 256 << 10),
            ("writerH2".to_string(), 1024 << 10)
        ]
    );
    assert_eq!(mixed.iter().map(|i| i.sector).min(), Some(base + 7680));
    assert!(mixed
        .iter()
        .any(|i| i.sector == base + 8192 && i.file_offset == Some(4 * MIB)));
}

/// ext4 overwrite: no map event at writeback; the buffer_heads are the only link.
#[test]
fn ext4_overwrite_is_linked_by_dirty_buffers() {
    let mut b = Bench::new();
    b.comm(220, "writerO");
    for i in 0..2u64 {
        b.dirty(220, LOOP0, 218, 512 + i * 256, 8);
        for blk in 0..256 {
            let kind = EventKind::DirtyBuffer {
                dev: LOOP0,
                blocknr: 45568 + i * 256 + blk,
                size: 4096,
            };
            b.push(220, 220, kind.clone(), Some(DIRTY_STACK));
            // re-dirtying the same buffer does not change its owner
            if blk == 0 {
                b.push(221, 221, kind, Some(BIO_STACK));
            }
        }
    }
    b.wb_start(2);
    b.inode_start(FLUSHER, LOOP0, 218);
    b.q(FLUSHER, LOOP0, 45568 * 8, 4096, "W");
    b.inode_end(FLUSHER, LOOP0, 218);
    b.wb_end();
    b.requests(LOOP0, 45568 * 8, 4096, 2560, "W");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "writerO", Via::Buffer), 2 * MIB);
    assert!(ios.iter().all(|i| i.ino == Some(218)));
    assert_eq!(out.summary.dirty_buffers_left, 0);
    assert_eq!(
        out.summary.dirty_folios_left, 0,
        "the pages were written too"
    );
}

/// fsync of an ext4 overwrite by the writer: no single_inode bracket, no map; the buffers
/// link the IO, and the folios they belong to are counted as written.
#[test]
fn buffer_linked_fsync_forgets_the_written_folios() {
    let mut b = Bench::new();
    b.comm(222, "writerO");
    b.dirty(222, LOOP0, 218, 0, 2);
    for blk in 0..4 {
        let kind = EventKind::DirtyBuffer {
            dev: LOOP0,
            blocknr: 5000 + blk,
            size: 4096,
        };
        b.push(222, 222, kind, Some(DIRTY_STACK));
    }
    // another writer's folio of the same file stays dirty
    b.comm(223, "other");
    b.dirty(223, LOOP0, 218, 64, 0);
    let wp = |start| {
        if start {
            EventKind::Ext4Writepages {
                dev: LOOP0,
                ino: 218,
                sync_mode: 1,
            }
        } else {
            EventKind::Ext4WritepagesResult {
                dev: LOOP0,
                ino: 218,
                pages_written: 4,
            }
        }
    };
    b.push(222, 222, wp(true), None);
    b.q(222, LOOP0, 40000, 32, "WS");
    b.push(222, 222, wp(false), None);
    b.requests(LOOP0, 40000, 32, 2560, "WS");
    let (ios, out) = b.finish();
    assert_eq!(charged(&ios, &out.tables, "writerO", Via::Buffer), 16384);
    assert_eq!(out.summary.dirty_buffers_left, 0);
    assert_eq!(
        (out.summary.dirty_folios_left, out.summary.dirty_pages_left),
        (1, 1),
        "only the other writer's page is left"
    );
}

/// The single-dirtier rule charges pages without offsets: they are counted as written.
#[test]
fn single_dirtier_rule_forgets_the_written_folios() {
    let mut b = Bench::new();
    b.comm(631, "db");
    b.dirty(631, LOOP0, 141, 0, 2);
    b.dirty(631, LOOP0, 141, 4, 2);
    b.push(
        631,
        631,
        EventKind::Ext4Writepages {
            dev: LOOP0,
            ino: 141,
            sync_mode: 1,
        },
        None,
    );
    b.q(631, LOOP0, 1_100_000, 32, "WS");
    b.push(
        631,
        631,
        EventKind::Ext4WritepagesResult {
            dev: LOOP0,
            ino: 141,
            pages_written: 4,
        },
        None,
    );
    b.requests(LOOP0, 1_100_000, 32, 2560, "WS");
    let (ios, out) = b.finish();
    assert_eq!(charged(&ios, &out.tables, "db", Via::Page), 16384);
    assert_eq!(
        (out.summary.dirty_folios_left, out.summary.dirty_pages_left),
        (1, 4),
        "the second folio was not written"
    );
}

/// The flusher leaves an inode with no dirty page: whatever was dirty before its bracket
/// was written, linked or not; pages dirtied during the bracket, or an inode still dirty,
/// keep their dirtiers.
#[test]
fn clean_inode_after_writeback_forgets_its_folios() {
    let mut b = Bench::new();
    b.comm(640, "w");
    b.dirty(640, LOOP0, 150, 0, 0);
    b.dirty(640, LOOP0, 151, 0, 0);
    b.dirty(640, LOOP0, 152, 0, 0);
    // 150: written with no link at all (say, the bio was lost), state clean at the end
    b.inode_start(FLUSHER, LOOP0, 150);
    b.dirty(640, LOOP0, 150, 9, 0); // dirtied during the bracket: kept
    b.inode_end(FLUSHER, LOOP0, 150);
    // 151: still has dirty pages at the end of its bracket (I_DIRTY_PAGES)
    b.inode_start(FLUSHER, LOOP0, 151);
    b.push(
        FLUSHER,
        FLUSHER,
        EventKind::SingleInode {
            bdi: LOOP0,
            ino: 151,
            state: 0x40,
            nr_to_write: 0,
            wrote: 0,
        },
        None,
    );
    let (_, out) = b.finish();
    assert_eq!(
        out.summary.dirty_folios_left, 3,
        "150's late page, 151 and 152 are left"
    );
}

/// A dirty folio truncated from the page cache is forgotten.
#[test]
fn truncated_dirty_folio_is_forgotten() {
    let mut b = Bench::new();
    b.comm(650, "t");
    b.dirty(650, LOOP0, 160, 0, 8);
    b.dirty(650, LOOP0, 160, 256, 0);
    for (index, order) in [(0, 8), (256, 0)] {
        b.push(
            650,
            650,
            EventKind::DeleteFromPageCache {
                s_dev: LOOP0,
                ino: 160,
                index,
                order,
                pfn: 0,
            },
            None,
        );
    }
    let (_, out) = b.finish();
    assert_eq!(out.summary.dirty_folios_left, 0);
}

/// xfs: iomap_add_to_ioend per folio, then a single bio.
#[test]
fn xfs_writeback_is_linked_by_add_to_ioend() {
    let mut b = Bench::new();
    b.comm(230, "ddx");
    b.dirty_mib(230, LOOP1, 131, 0, 8);
    b.wb_start(3);
    b.inode_start(FLUSHER, LOOP1, 131);
    for i in 0..8u64 {
        b.push(
            FLUSHER,
            FLUSHER,
            EventKind::IomapWritebackFolio {
                dev: LOOP1,
                ino: 131,
                offset: i * MIB,
                length: MIB,
            },
            None,
        );
        let kind = EventKind::IomapAddToIoend {
            dev: LOOP1,
            ino: 131,
            pos: i * MIB,
            dirty_len: MIB,
            addr: 0x18000,
            offset: 0,
            length: 8 * MIB,
            typ: 3,
            flags: 0,
            bdev: LOOP1,
        };
        b.push(FLUSHER, FLUSHER, kind, None);
    }
    b.q(FLUSHER, LOOP1, 192, 16384, "W");
    b.inode_end(FLUSHER, LOOP1, 131);
    b.wb_end();
    b.requests(LOOP1, 192, 16384, 2560, "W");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "ddx", Via::Page), 8 * MIB);
    assert!(ios
        .iter()
        .all(|i| i.ino == Some(131) && i.reason == Some(WbReason(3))));
    let second = ios.iter().find(|i| i.sector == 192 + 2560).unwrap();
    assert_eq!(second.file_offset, Some(2560 * 512));
    assert_eq!(out.summary.dirty_folios_left, 0);
}

/// 5.10's xfs writeback: no iomap map event, only `xfs_map_blocks_alloc`/`_found` with an
/// xfs block number; with the filesystem's geometry from the trace's mount table (format
/// 1.4) it maps the sectors, and two writers of one file's halves are each charged their
/// own (the single-dirtier rule cannot). Newly allocated blocks: 5.10's
/// `xfs_map_blocks_alloc` reports the delayed allocation (a null start block, no map), the
/// `xfs_bmap_post_update` just before it the real extent (the map); an extended attribute's
/// extent maps no file data. Without the geometry: no map, the lost intent.
#[test]
fn xfs_map_blocks_with_the_geometry_maps_writeback() {
    // 4 allocation groups of 20480 blocks (agblklog 15), 4 KiB blocks: xfs block
    // 1 << 15 | 100 is block 20480 + 100 of the device, sector (20580 * 8).
    const REAL: u64 = (1 << 15) | 100;
    // xfs's nullstartblock(5): a delayed allocation's reservation.
    const DELAYED: u64 = (((1u64 << 35) - 1) << 17) | 5;
    let found = [(REAL, 0)];
    let allocated = [(REAL, 0), (DELAYED, 0)];
    let attr_fork = [(REAL, 0x100), (DELAYED, 0)];
    let run = |geometry: Vec<(u32, u32, u8)>, maps: &[(u64, u32)]| {
        let mut ctx = context();
        ctx.xfs_geometry = geometry;
        let mut b = Bench::with(ctx);
        b.comm(650, "half1");
        b.comm(651, "half2");
        b.dirty(650, LOOP1, 160, 0, 0);
        b.dirty(651, LOOP1, 160, 1, 0);
        b.wb_start(2);
        b.inode_start(FLUSHER, LOOP1, 160);
        for i in 0..2u64 {
            b.push(
                FLUSHER,
                FLUSHER,
                EventKind::IomapWritebackFolio {
                    dev: LOOP1,
                    ino: 160,
                    offset: i * 4096,
                    length: 4096,
                },
                None,
            );
        }
        for &(startblock, bmap_state) in maps {
            b.push(
                FLUSHER,
                FLUSHER,
                EventKind::XfsMapBlocks {
                    dev: LOOP1,
                    ino: 160,
                    startoff: 0,
                    startblock,
                    blockcount: 2,
                    bmap_state,
                },
                None,
            );
        }
        let sector = 20580 * 8;
        b.q(FLUSHER, LOOP1, sector, 16, "W");
        b.inode_end(FLUSHER, LOOP1, 160);
        b.wb_end();
        b.requests(LOOP1, sector, 16, 2560, "W");
        b.finish()
    };
    for maps in [&found[..], &allocated[..]] {
        let (ios, out) = run(vec![(LOOP1, 20480, 15)], maps);
        assert_eq!(charged(&ios, &out.tables, "half1", Via::Page), 4096);
        assert_eq!(charged(&ios, &out.tables, "half2", Via::Page), 4096);
        assert_eq!(out.summary.unmapped_writeback_bytes, 0);
    }
    for (geometry, maps) in [
        (vec![], &found[..]),
        (vec![(LOOP1, 20480, 15)], &attr_fork[..]),
    ] {
        let (ios, out) = run(geometry, maps);
        assert_eq!(charged(&ios, &out.tables, "half1", Via::Page), 0);
        assert!(ios
            .iter()
            .all(|i| i.via == Via::Unknown && i.ino == Some(160)));
        assert_eq!(out.summary.unmapped_writeback_bytes, 8192);
    }
}

/// A perf.data recording has no mount table: an ext4 of 1 KiB blocks maps its writeback
/// before any buffer has told the block size. The map waits for the thread's next bio, whose
/// start sector tells the one block size that puts the map's first block there; the two
/// writers of the file's halves are each charged their own.
#[test]
fn ext4_map_waits_for_its_block_size() {
    let mut b = Bench::new();
    b.comm(660, "halfA");
    b.comm(661, "halfB");
    b.dirty(660, LOOP0, 170, 0, 1);
    b.dirty(661, LOOP0, 170, 2, 1);
    b.wb_start(2);
    b.inode_start(FLUSHER, LOOP0, 170);
    b.push(
        FLUSHER,
        FLUSHER,
        EventKind::Ext4MapBlocks {
            dev: LOOP0,
            ino: 170,
            flags: 0,
            pblk: 1000,
            lblk: 0,
            len: 16,
            mflags: 0,
            ret: 16,
        },
        None,
    );
    // 1 KiB blocks: block 1000 is sector 2000 (4 KiB blocks would put it at 8000).
    b.q(FLUSHER, LOOP0, 2000, 32, "W");
    b.inode_end(FLUSHER, LOOP0, 170);
    b.wb_end();
    b.requests(LOOP0, 2000, 32, 2560, "W");
    let (ios, out) = b.finish();
    assert_eq!(charged(&ios, &out.tables, "halfA", Via::Page), 8192);
    assert_eq!(charged(&ios, &out.tables, "halfB", Via::Page), 8192);
}

/// O_DIRECT write and read: charged to the issuer via direct, file from the dstmap.
#[test]
fn direct_io_is_charged_to_the_issuer() {
    let mut b = Bench::new();
    b.comm(300, "dd");
    for (rw, rwbs) in [(0, "WS"), (1, "RS")] {
        b.push(
            300,
            300,
            EventKind::IomapDioBegin {
                dev: LOOP0,
                ino: 14,
                pos: 0,
                count: MIB,
            },
            None,
        );
        let kind = EventKind::IomapIterDstmap {
            dev: LOOP0,
            ino: 14,
            addr: 0x810_0000,
            offset: 0,
            length: 4 * MIB,
            typ: 2,
            flags: 0,
            bdev: LOOP0,
        };
        b.push(300, 300, kind, None);
        b.q(300, LOOP0, 264192, 2048, rwbs);
        b.requests(LOOP0, 264192, 2048, 2560, rwbs);
        b.push(
            300,
            300,
            EventKind::IomapDioComplete {
                dev: LOOP0,
                ino: 14,
                pos: 0,
            },
            None,
        );
        let _ = rw;
    }
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "dd", Via::Direct), 2 * MIB);
    assert_eq!(ios.len(), 2);
    assert_eq!(ios[0].dir, Dir::W);
    assert_eq!(ios[1].dir, Dir::R);
    assert!(ios
        .iter()
        .all(|i| i.ino == Some(14) && i.file_offset == Some(0)));
    // intent = the bio_queue stack
    assert_eq!(
        t.intents[t.acts[ios[0].act.index()].intent.index()].stack,
        BIO_STACK
    );
}

/// Without the dio bracket, the symbol check on the stack recognises direct IO; without
/// either, an unlinked write goes to the lost intent.
#[test]
fn direct_io_by_symbol() {
    for with_symbols in [true, false] {
        let mut ctx = context();
        if with_symbols {
            let sym = |a: u64| -> Option<String> {
                (a == 0xffff_1002).then(|| "__iomap_dio_rw+0x1a0/0x800".to_string())
            };
            ctx.symbols = Some(Box::new(sym));
        }
        let mut b = Bench::with(ctx);
        b.comm(301, "fio");
        b.q(301, LOOP0, 1000, 8, "WS");
        b.requests(LOOP0, 1000, 8, 2560, "WS");
        let (ios, out) = b.finish();
        let t = &out.tables;
        if with_symbols {
            assert_eq!(charged(&ios, t, "fio", Via::Direct), 4096);
        } else {
            assert_eq!(ios[0].via, Via::Unknown);
            assert_eq!(t.acts[ios[0].act.index()].intent, INTENT_LOST);
            assert_eq!(out.summary.unknown_bytes, 4096);
        }
    }
}

/// Direct IO is data: metadata read inside a direct IO (even with a direct IO stack) is a
/// read; the direct IO state ends when its bytes are queued (aio completes elsewhere) or at
/// the thread's next page-cache read, so later IO is not labelled direct.
#[test]
fn direct_io_state_is_bounded_and_skips_metadata() {
    let mut ctx = context();
    let sym = |a: u64| -> Option<String> {
        (a == 0xffff_1002).then(|| "__iomap_dio_rw+0x1a0/0x800".to_string())
    };
    ctx.symbols = Some(Box::new(sym));
    let mut b = Bench::with(ctx);
    b.comm(310, "aio");
    let begin = |count| EventKind::IomapDioBegin {
        dev: LOOP0,
        ino: 14,
        pos: 0,
        count,
    };
    b.push(310, 310, begin(8192), None);
    // the bitmap read the allocation needed (a direct IO stack, but metadata)
    b.q(310, LOOP0, 5000, 2, "RM");
    b.requests(LOOP0, 5000, 2, 2560, "RM");
    b.q(310, LOOP0, 264192, 16, "WS");
    b.requests(LOOP0, 264192, 16, 2560, "WS");
    // aio: completes in another context
    b.push(
        0,
        0,
        EventKind::IomapDioComplete {
            dev: LOOP0,
            ino: 14,
            pos: 0,
        },
        None,
    );
    // a later read by the same thread, queued with a plain stack: not direct
    let plain: &[u64] = &[0xffff_2001];
    let read = |b: &mut Bench, sector, rwbs: &str| {
        let kind = EventKind::BioQueue {
            dev: LOOP0,
            sector,
            nr_sector: 8,
            rwbs: Rwbs::parse(rwbs),
        };
        b.push(310, 310, kind, Some(plain));
        b.requests(LOOP0, sector, 8, 2560, rwbs);
    };
    read(&mut b, 8000, "R");
    // a short direct read (at the end of the file), then a buffered read
    b.push(310, 310, begin(65536), None);
    b.q(310, LOOP0, 264192, 8, "RS");
    b.requests(LOOP0, 264192, 8, 2560, "RS");
    b.push(
        310,
        310,
        EventKind::Readahead {
            kind: RaKind::Order,
            s_dev: LOOP0,
            ino: 15,
            index: 0,
            order: 0,
            size: 1,
            async_size: 0,
        },
        None,
    );
    read(&mut b, 9000, "RA");
    let (ios, _) = b.finish();
    let vias: Vec<Via> = ios.iter().map(|i| i.via).collect();
    assert_eq!(
        vias,
        vec![
            Via::Read,
            Via::Direct,
            Via::Read,
            Via::Direct,
            Via::Readahead
        ]
    );
    assert_eq!(ios[0].ino, None, "metadata: no file");
    assert_eq!(ios[4].ino, Some(15));
}

#[test]
fn readahead_is_charged_to_the_reader() {
    let mut b = Bench::new();
    b.comm(400, "reader");
    let kind = EventKind::Readahead {
        kind: RaKind::Order,
        s_dev: LOOP0,
        ino: 12,
        index: 0,
        order: 0,
        size: 16,
        async_size: 0,
    };
    b.push(400, 400, kind, None);
    b.push(
        400,
        400,
        EventKind::AddToPageCache {
            s_dev: LOOP0,
            ino: 12,
            index: 0,
            order: 4,
            pfn: 0,
        },
        None,
    );
    b.q(400, LOOP0, 278528, 128, "RA");
    b.requests(LOOP0, 278528, 128, 2560, "RA");
    // a plain metadata read by the same task is a read, with no file
    b.q(400, LOOP0, 8, 8, "RM");
    b.requests(LOOP0, 8, 8, 2560, "RM");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "reader", Via::Readahead), 64 << 10);
    assert_eq!(charged(&ios, t, "reader", Via::Read), 4096);
    assert_eq!(ios[0].dir, Dir::A);
    assert_eq!(ios[0].ino, Some(12));
    assert_eq!(ios[1].dir, Dir::R);
    assert_eq!(ios[1].ino, None);
    assert_eq!(out.summary.bytes, [4096, 64 << 10, 0]);
}

/// Kernels without the readahead events (5.10 to 6.18): the page-cache adds of the
/// reader's context name the file of the read bios that follow. The block-device inode's
/// adds (`s_dev` 0) name none.
#[test]
fn page_cache_adds_name_the_file_read() {
    let mut b = Bench::new();
    b.comm(410, "reader");
    let add = |s_dev, ino, index| EventKind::AddToPageCache {
        s_dev,
        ino,
        index,
        order: 0,
        pfn: 0,
    };
    for i in 0..16 {
        b.push(410, 410, add(LOOP0, 21, i), None);
    }
    b.q(410, LOOP0, 300_000, 128, "RA");
    b.requests(LOOP0, 300_000, 128, 2560, "RA");
    // the next file, read without readahead (a single page)
    b.push(410, 410, add(LOOP0, 22, 0), None);
    b.q(410, LOOP0, 310_000, 8, "R");
    b.requests(LOOP0, 310_000, 8, 2560, "R");
    // a block-device page: not a file
    b.push(410, 410, add(0, LOOP0 as u64, 7), None);
    b.q(410, LOOP0, 56, 8, "RM");
    b.requests(LOOP0, 56, 8, 2560, "RM");
    let (ios, out) = b.finish();
    assert_eq!(
        ios.iter().map(|i| (i.via, i.ino)).collect::<Vec<_>>(),
        vec![
            (Via::Readahead, Some(21)),
            (Via::Read, Some(22)),
            (Via::Read, None)
        ]
    );
    assert_eq!(
        charged(&ios, &out.tables, "reader", Via::Readahead),
        64 << 10
    );
}

/// iomap writeback without maps (5.10's `iomap_writepage`, no `iomap_writepage_map`): an
/// fsync or msync by the writer itself writes the inode's folios on the writer's thread,
/// outside any flusher bracket; the inode's single dirtier is charged. Two dirtiers: no link.
#[test]
fn iomap_writeback_without_maps_single_dirtier() {
    let mut b = Bench::new();
    b.comm(640, "ddx");
    b.comm(641, "other");
    // (order 2: folios of 4 pages)
    b.dirty(640, LOOP1, 150, 0, 2);
    b.dirty(640, LOOP1, 151, 0, 0);
    b.dirty(641, LOOP1, 151, 1, 0);
    for ino in [150u64, 151] {
        b.push(
            640,
            640,
            EventKind::IomapWritebackFolio {
                dev: LOOP1,
                ino,
                offset: 0,
                length: 4096,
            },
            None,
        );
        let sector = 500_000 + ino * 1000;
        b.q(640, LOOP1, sector, 32, "WS");
        b.requests(LOOP1, sector, 32, 2560, "WS");
    }
    let (ios, out) = b.finish();
    assert_eq!(charged(&ios, &out.tables, "ddx", Via::Page), 16384);
    assert_eq!(ios[0].ino, Some(150));
    assert_eq!((ios[1].via, ios[1].ino), (Via::Unknown, Some(151)));
}

/// Sampled stacks (`--stacks sampled:N`) on a kernel whose iomap writeback has no map
/// (5.10): a thread's folios dirtied before its first stack sample take that sample's stack
/// when it comes, so the file keeps a single dirtier and the single-dirtier rule links its
/// writeback (they made a second, stackless dirtier, and the kernel lab's 5.10 lost every
/// xfs writeback of the sampled recording to the lost intent).
#[test]
fn sampled_stacks_before_the_first_sample_keep_a_single_dirtier() {
    for sample_first in [false, true] {
        let mut ctx = context();
        ctx.stacks_sampled = true;
        let mut b = Bench::with(ctx);
        b.comm(640, "ddx");
        for index in 0..4u64 {
            b.push(
                640,
                640,
                EventKind::AddToPageCache {
                    s_dev: LOOP1,
                    ino: 150,
                    index,
                    order: 0,
                    pfn: 0,
                },
                None,
            );
            // The first sample comes with the first folio, or with the third.
            let sampled = if sample_first { index == 0 } else { index == 2 };
            b.push(
                640,
                640,
                EventKind::DirtyFolio {
                    bdi: LOOP1,
                    ino: 150,
                    index,
                },
                sampled.then_some(DIRTY_STACK),
            );
        }
        b.push(
            640,
            640,
            EventKind::IomapWritebackFolio {
                dev: LOOP1,
                ino: 150,
                offset: 0,
                length: 16384,
            },
            None,
        );
        b.q(640, LOOP1, 500_000, 32, "WS");
        b.requests(LOOP1, 500_000, 32, 2560, "WS");
        let (ios, out) = b.finish();
        assert_eq!(charged(&ios, &out.tables, "ddx", Via::Page), 16384);
        assert_eq!(out.summary.dirtiers_without_sample, 0);
        assert_eq!(out.summary.unmapped_writeback_bytes, 0);
        // One intent, with the sampled stack.
        let acts: Vec<_> = ios.iter().map(|i| i.act).collect();
        assert!(acts.iter().all(|a| *a == acts[0]), "{acts:?}");
    }
}

/// jbd2 checkpoint dirties home-location metadata (bdev inode pages and buffers); the
/// flusher writes them later: charged to jbd2.
#[test]
fn bdev_inode_metadata_from_jbd2_checkpoint() {
    let mut b = Bench::new();
    let bdev_ino = LOOP0 as u64; // 7340032
    b.push(
        JBD2,
        JBD2,
        EventKind::Jbd2Commit {
            phase: CommitPhase::Start,
            dev: LOOP0,
            transaction: 16,
        },
        None,
    );
    // page-only link (bdev inode rule): block 4241
    b.push(
        JBD2,
        JBD2,
        EventKind::DirtyFolio {
            bdi: LOOP0,
            ino: bdev_ino,
            index: 4241,
        },
        Some(DIRTY_STACK),
    );
    // buffer link: block 145
    b.push(
        JBD2,
        JBD2,
        EventKind::DirtyBuffer {
            dev: LOOP0,
            blocknr: 145,
            size: 4096,
        },
        Some(DIRTY_STACK),
    );
    b.push(
        JBD2,
        JBD2,
        EventKind::Jbd2Commit {
            phase: CommitPhase::End,
            dev: LOOP0,
            transaction: 16,
        },
        None,
    );
    b.wb_start(3);
    b.inode_start(FLUSHER, LOOP0, bdev_ino);
    b.q(FLUSHER, LOOP0, 4241 * 8, 8, "WM");
    b.q(FLUSHER, LOOP0, 145 * 8, 8, "WM");
    b.inode_end(FLUSHER, LOOP0, bdev_ino);
    b.wb_end();
    b.requests(LOOP0, 4241 * 8, 8, 2560, "WM");
    b.requests(LOOP0, 145 * 8, 8, 2560, "WM");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "jbd2/loop0-8", Via::Page), 4096);
    assert_eq!(charged(&ios, t, "jbd2/loop0-8", Via::Buffer), 4096);
    assert!(ios.iter().all(|i| i.ino == Some(bdev_ino)));
    assert_eq!(ios[0].file_offset, Some(4241 * 4096));
    assert_eq!(out.summary.dirty_folios_left, 0);
}

/// Journal log writes and the commit record, with the flush sequence.
#[test]
fn journal_io_is_charged_to_jbd2_with_its_transaction() {
    let mut b = Bench::new();
    b.push(
        JBD2,
        JBD2,
        EventKind::Jbd2Commit {
            phase: CommitPhase::Start,
            dev: LOOP0,
            transaction: 17,
        },
        None,
    );
    b.q(JBD2, LOOP0, 2_000_000, 152, "WSM");
    b.requests(LOOP0, 2_000_000, 152, 2560, "WSM");
    // commit record: preflush + FUA
    b.q(JBD2, LOOP0, 2_000_152, 8, "FWFSM");
    b.issue(LOOP0, 0, 0, "FF");
    b.complete(LOOP0, u64::MAX, 0, "FF");
    b.issue(LOOP0, 2_000_152, 8, "WFSM");
    b.complete(LOOP0, 2_000_152, 8, "WFSM");
    b.complete(LOOP0, 2_000_152, 0, "WFSM"); // end of the flush sequence: ignored
    b.push(
        JBD2,
        JBD2,
        EventKind::Jbd2Commit {
            phase: CommitPhase::End,
            dev: LOOP0,
            transaction: 17,
        },
        None,
    );
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "jbd2/loop0-8", Via::Journal), 80 << 10);
    assert!(ios
        .iter()
        .all(|i| i.journal_txn == Some(17) && i.ino.is_none()));
    assert_eq!(
        t.acts[ios[0].act.index()].file,
        FileKey { dev: LOOP0, ino: 0 }
    );
    assert_eq!(out.summary.flushes_issued, 1);
    assert_eq!(out.summary.flushes_completed, 1);
    assert_eq!(out.summary.ignored_zero_completions, 1);
}

/// Journal bytes per comm (journal IO only).
fn journal_bytes(ios: &[Io], t: &Tables, comm: &str) -> u64 {
    charged(ios, t, comm, Via::Journal)
}

/// Two tasks' handles in one transaction, 3:1 in blocks dirtied: the commit's journal IO
/// (log blocks, merged into one request, and the commit record) is split 3:1 between their
/// acts, each with its handle's stack and its share; the requests' totals are exact.
#[test]
fn journal_io_is_divided_among_the_handles_of_its_transaction() {
    let mut b = Bench::new();
    b.comm(100, "often");
    b.comm(101, "seldom");
    b.handle_start(100, LOOP0, 17);
    b.handle_start(101, LOOP0, 17);
    b.handle_stats(101, LOOP0, 17, 1);
    b.handle_stats(100, LOOP0, 17, 2);
    b.handle_start(100, LOOP0, 17);
    b.handle_stats(100, LOOP0, 17, 1);
    // a handle of the next transaction, still open at the commit
    b.handle_start(101, LOOP0, 18);
    b.commit(CommitPhase::Start, 17);
    b.commit(CommitPhase::Logging, 17);
    for k in 0..4 {
        b.q(JBD2, LOOP0, 2_000_000 + k * 8, 8, "WSM");
    }
    b.requests(LOOP0, 2_000_000, 32, 2560, "WSM");
    b.q(JBD2, LOOP0, 2_000_032, 8, "FWFSM");
    b.requests(LOOP0, 2_000_032, 8, 2560, "WFSM");
    b.commit(CommitPhase::End, 17);
    assert_eq!(b.a.state_sizes().journal_txns, 0);
    assert_eq!(b.a.state_sizes().journal_handles, 1);
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(journal_bytes(&ios, t, "often"), 15 << 10);
    assert_eq!(journal_bytes(&ios, t, "seldom"), 5 << 10);
    assert_eq!(journal_bytes(&ios, t, "jbd2/loop0-8"), 0);
    // the log request split in two, each part with its transaction and share
    let log: Vec<&Io> = ios.iter().filter(|i| i.sector < 2_000_032).collect();
    assert_eq!(log.iter().map(|i| i.size).sum::<u64>(), 16 << 10);
    assert!(log.iter().all(|i| i.split && i.journal_txn == Some(17)));
    for io in &ios {
        let act = &t.acts[io.act.index()];
        let comm = &t.roles[act.role.index()].comm;
        let want = if comm == "often" { 0.75 } else { 0.25 };
        assert_eq!(io.journal_share, Some(want), "{comm}");
        assert_eq!(t.intents[act.intent.index()].stack, DIRTY_STACK);
        assert_eq!(io.issuer, ios[0].issuer);
        assert_eq!(act.file, FileKey { dev: LOOP0, ino: 0 });
    }
    let often = t
        .acts_with_totals()
        .find(|(_, a, _)| t.roles[a.role.index()].comm == "often")
        .map(|(_, _, tot)| *tot)
        .unwrap();
    assert_eq!(often.journal_share(), Some(0.75));
}

/// Delayed allocation at writeback: the flusher's handle, started inside ext4's writepages
/// of a file with one dirtier, is that dirtier's (with the handle's stack); a handle the
/// flusher starts for a file of two dirtiers, or outside writepages, stays the flusher's.
#[test]
fn a_handle_started_at_writeback_is_the_only_dirtiers() {
    let mut b = Bench::new();
    b.comm(100, "writer");
    b.comm(101, "other");
    b.comm(FLUSHER, "kworker/u8:1");
    b.dirty_mib(100, LOOP0, 12, 0, 1);
    b.dirty_mib(100, LOOP0, 13, 0, 1);
    b.dirty_mib(101, LOOP0, 13, 1, 1);
    let writepages = |b: &mut Bench, ino: u64, start: bool| {
        let kind = if start {
            EventKind::Ext4Writepages {
                dev: LOOP0,
                ino,
                sync_mode: 0,
            }
        } else {
            EventKind::Ext4WritepagesResult {
                dev: LOOP0,
                ino,
                pages_written: 256,
            }
        };
        b.push(FLUSHER, FLUSHER, kind, None);
    };
    // File 12 (writer's alone): the flusher's handle dirties 3 blocks.
    writepages(&mut b, 12, true);
    b.handle_start(FLUSHER, LOOP0, 40);
    b.handle_stats(FLUSHER, LOOP0, 40, 3);
    writepages(&mut b, 12, false);
    // File 13 (two dirtiers): 1 block, the flusher's.
    writepages(&mut b, 13, true);
    b.handle_start(FLUSHER, LOOP0, 40);
    b.handle_stats(FLUSHER, LOOP0, 40, 1);
    writepages(&mut b, 13, false);
    b.commit(CommitPhase::Start, 40);
    b.q(JBD2, LOOP0, 4_000_000, 32, "WSM");
    b.requests(LOOP0, 4_000_000, 32, 2560, "WSM");
    b.commit(CommitPhase::End, 40);
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(journal_bytes(&ios, t, "writer"), 12 << 10);
    assert_eq!(journal_bytes(&ios, t, "kworker/u8:1"), 4 << 10);
    assert_eq!(journal_bytes(&ios, t, "other"), 0);
}

/// A commit with no handle recorded for its transaction (its handles began before the
/// recording; its own revoke or superblock records), and a transaction whose commit IO
/// comes before any handle of it is seen: the journal thread keeps the bytes.
#[test]
fn journal_io_no_handle_explains_stays_with_jbd2() {
    let mut b = Bench::new();
    b.comm(100, "often");
    // a handle of another transaction and one whose start was not recorded
    b.handle_start(100, LOOP0, 30);
    b.handle_stats(100, LOOP0, 30, 2);
    b.commit(CommitPhase::Start, 29);
    b.q(JBD2, LOOP0, 3_000_000, 8, "WSM");
    b.requests(LOOP0, 3_000_000, 8, 2560, "WSM");
    b.commit(CommitPhase::End, 29);
    // transaction 31: its commit's first IO before its handles, then one handle not seen
    // starting (only the journal thread is left to charge)
    b.commit(CommitPhase::Start, 31);
    b.q(JBD2, LOOP0, 3_000_008, 8, "WSM");
    b.requests(LOOP0, 3_000_008, 8, 2560, "WSM");
    b.handle_stats(102, LOOP0, 31, 3);
    b.q(JBD2, LOOP0, 3_000_016, 8, "FWFSM");
    b.requests(LOOP0, 3_000_016, 8, 2560, "WFSM");
    b.commit(CommitPhase::End, 31);
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(journal_bytes(&ios, t, "jbd2/loop0-8"), 12 << 10);
    assert_eq!(journal_bytes(&ios, t, "often"), 0);
    let shares: Vec<Option<f64>> = ios.iter().map(|i| i.journal_share).collect();
    assert_eq!(shares, vec![None, None, Some(1.0)]);
}

/// An xfs log write (preflush + FUA metadata) from a kworker, with no bracket and no
/// symbols: journal IO of the issuer.
#[test]
fn xfs_log_write_is_journal_io() {
    let mut b = Bench::new();
    b.q(FLUSHER, LOOP1, 5_000_000, 16, "FWFSM");
    b.requests(LOOP1, 5_000_000, 16, 2560, "WFSM");
    // a plain metadata write with no owner stays unknown
    b.q(FLUSHER, LOOP1, 6_000_000, 8, "WM");
    b.requests(LOOP1, 6_000_000, 8, 2560, "WM");
    let (ios, out) = b.finish();
    assert_eq!(
        charged(&ios, &out.tables, "kworker/u8:0-flush-7:0", Via::Journal),
        8192
    );
    assert_eq!(ios[0].journal_txn, None);
    assert_eq!(ios[1].via, Via::Unknown);
}

/// Pages dirtied before the capture: lost intent, with the inode from the bracket, the
/// issuer and the reason.
#[test]
fn pages_dirtied_before_capture_go_to_lost_with_context() {
    let mut b = Bench::new();
    b.wb_start(2);
    b.inode_start(FLUSHER, LOOP0, 219);
    b.map(FLUSHER, LOOP0, 219, 0, 50000, 1024);
    b.q(FLUSHER, LOOP0, 400000, 8192, "W");
    b.inode_end(FLUSHER, LOOP0, 219);
    b.wb_end();
    b.requests(LOOP0, 400000, 8192, 2560, "W");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert!(ios
        .iter()
        .all(|i| i.via == Via::Unknown && t.acts[i.act.index()].intent == INTENT_LOST));
    assert!(ios.iter().all(|i| i.ino == Some(219)));
    assert_eq!(out.summary.unknown_bytes, 4 * MIB);
    let uc = &out.summary.unknown_contexts;
    assert_eq!(uc.len(), 1);
    assert_eq!(
        uc[0].file,
        FileKey {
            dev: LOOP0,
            ino: 219
        }
    );
    assert_eq!(uc[0].reason, Some(WbReason(2)));
    assert_eq!(t.roles[uc[0].issuer.index()].comm, "kworker/u8:0-flush-7:0");
    assert_eq!(uc[0].bytes, 4 * MIB);
    // The act itself carries that context: the <unknown> role, the reason, the issuer.
    let a = &t.acts[ios[0].act.index()];
    assert_eq!(t.roles[a.role.index()].comm, "<unknown>");
    assert_eq!(a.reason, Some(WbReason(2)));
    assert_eq!(
        a.issuer.map(|r| t.roles[r.index()].comm.as_str()),
        Some("kworker/u8:0-flush-7:0")
    );
}

/// Unknown IO of one file queued by two tasks for two reasons makes two acts, each with
/// its issuer and reason; requests with no bio seen have no issuer.
#[test]
fn lost_acts_are_told_apart_by_issuer_and_reason() {
    let mut b = Bench::new();
    b.comm(655, "fsyncer");
    b.wb_start(3);
    b.inode_start(FLUSHER, LOOP0, 219);
    b.map(FLUSHER, LOOP0, 219, 0, 50000, 1);
    b.q(FLUSHER, LOOP0, 400000, 8, "W");
    b.inode_end(FLUSHER, LOOP0, 219);
    b.wb_end();
    b.requests(LOOP0, 400000, 8, 2560, "W");
    b.push(
        655,
        655,
        EventKind::Ext4Writepages {
            dev: LOOP0,
            ino: 219,
            sync_mode: 1,
        },
        None,
    );
    b.map(655, LOOP0, 219, 1, 50001, 1);
    b.q(655, LOOP0, 400008, 8, "WS");
    b.requests(LOOP0, 400008, 8, 2560, "WS");
    b.issue(LOOP0, 900000, 8, "W");
    b.complete(LOOP0, 900000, 8, "W");
    let (ios, out) = b.finish();
    let t = &out.tables;
    let ctx: Vec<(u64, Option<&str>, Option<u32>)> = ios
        .iter()
        .map(|i| {
            let a = &t.acts[i.act.index()];
            assert_eq!(a.intent, INTENT_LOST);
            assert_eq!(t.roles[a.role.index()].comm, "<unknown>");
            (
                a.file.ino,
                a.issuer.map(|r| t.roles[r.index()].comm.as_str()),
                a.reason.map(|r| r.0),
            )
        })
        .collect();
    assert_eq!(
        ctx,
        vec![
            (219, Some("kworker/u8:0-flush-7:0"), Some(3)),
            (219, Some("fsyncer"), None),
            (0, None, None),
        ]
    );
    assert_eq!(t.acts.len(), 3);
}

/// The bracket heuristic: a single dirtier of the inode owns unmapped IO in its bracket.
#[test]
fn single_dirtier_of_the_bracketed_inode() {
    let mut b = Bench::new();
    b.comm(240, "solo");
    b.dirty_mib(240, LOOP0, 300, 0, 1);
    b.inode_start(FLUSHER, LOOP0, 300);
    b.q(FLUSHER, LOOP0, 600000, 2048, "W");
    b.inode_end(FLUSHER, LOOP0, 300);
    b.requests(LOOP0, 600000, 2048, 2560, "W");
    // a second file with two dirtiers: ambiguous, so lost (with the inode)
    b.comm(241, "other");
    b.dirty(240, LOOP0, 301, 0, 0);
    b.dirty(241, LOOP0, 301, 1, 0);
    b.inode_start(FLUSHER, LOOP0, 301);
    b.q(FLUSHER, LOOP0, 700000, 16, "W");
    b.inode_end(FLUSHER, LOOP0, 301);
    b.requests(LOOP0, 700000, 16, 2560, "W");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "solo", Via::Page), MIB);
    assert_eq!(out.summary.unknown_bytes, 8192);
    assert_eq!(ios.last().unwrap().ino, Some(301));
    assert_eq!(out.summary.reissues, 0);
}

/// fsync of an ext4 overwrite with no buffer_head events: the writepages bracket names
/// the inode, whose single dirtier is charged.
#[test]
fn fsync_writepages_bracket_single_dirtier() {
    let mut b = Bench::new();
    b.comm(630, "db");
    b.dirty(630, LOOP0, 140, 0, 2);
    b.push(
        630,
        630,
        EventKind::Ext4Writepages {
            dev: LOOP0,
            ino: 140,
            sync_mode: 1,
        },
        None,
    );
    b.q(630, LOOP0, 1_100_000, 32, "WS");
    b.push(
        630,
        630,
        EventKind::Ext4WritepagesResult {
            dev: LOOP0,
            ino: 140,
            pages_written: 4,
        },
        None,
    );
    // after the bracket: no owner
    b.q(630, LOOP0, 1_200_000, 8, "WS");
    b.requests(LOOP0, 1_100_000, 32, 2560, "WS");
    b.requests(LOOP0, 1_200_000, 8, 2560, "WS");
    let (ios, out) = b.finish();
    assert_eq!(charged(&ios, &out.tables, "db", Via::Page), 16384);
    assert_eq!(ios[1].via, Via::Unknown);
}

/// Inode writeback: the inode dirtier owns IO and buffers dirtied inside write_inode.
#[test]
fn inode_dirtier_owns_write_inode_io() {
    let mut b = Bench::new();
    b.comm(250, "toucher");
    let kind = EventKind::MarkInodeDirty {
        bdi: LOOP0,
        ino: 32769,
        state: 0,
        flags: 0x10,
    };
    b.push(250, 250, kind, Some(DIRTY_STACK));
    // a kworker dirtying the same inode later is not recorded (first dirtier, no kworkers)
    b.push(
        FLUSHER,
        FLUSHER,
        EventKind::MarkInodeDirty {
            bdi: LOOP0,
            ino: 32770,
            state: 0,
            flags: 0x10,
        },
        None,
    );
    b.inode_start(FLUSHER, LOOP0, 32769);
    b.push(
        FLUSHER,
        FLUSHER,
        EventKind::WriteInodeStart {
            bdi: LOOP0,
            ino: 32769,
            sync_mode: 1,
        },
        None,
    );
    // the fs dirties the inode table block while writing the inode: inode-bh propagation
    b.push(
        FLUSHER,
        FLUSHER,
        EventKind::DirtyBuffer {
            dev: LOOP0,
            blocknr: 1000,
            size: 4096,
        },
        None,
    );
    b.q(FLUSHER, LOOP0, 9000, 8, "WM"); // written inside the bracket, no other owner
    b.push(
        FLUSHER,
        FLUSHER,
        EventKind::WriteInode {
            bdi: LOOP0,
            ino: 32769,
            sync_mode: 1,
        },
        None,
    );
    b.inode_end(FLUSHER, LOOP0, 32769);
    b.q(FLUSHER, LOOP0, 8000, 8, "WM"); // the propagated buffer, written later
    b.requests(LOOP0, 9000, 8, 2560, "WM");
    b.requests(LOOP0, 8000, 8, 2560, "WM");
    // inside a write_inode bracket of the kworker-dirtied inode: no owner -> lost
    b.push(
        FLUSHER,
        FLUSHER,
        EventKind::WriteInodeStart {
            bdi: LOOP0,
            ino: 32770,
            sync_mode: 1,
        },
        None,
    );
    b.q(FLUSHER, LOOP0, 9100, 8, "WM");
    b.push(
        FLUSHER,
        FLUSHER,
        EventKind::WriteInode {
            bdi: LOOP0,
            ino: 32770,
            sync_mode: 1,
        },
        None,
    );
    b.requests(LOOP0, 9100, 8, 2560, "WM");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "toucher", Via::Inode), 8192);
    assert!(ios[..2].iter().all(|i| i.ino == Some(32769)));
    assert_eq!(ios[2].via, Via::Unknown);
    assert_eq!(out.summary.dirty_inodes_left, 0);
}

#[test]
fn reissue_without_requeue_keeps_the_last_issue() {
    let mut b = Bench::new();
    b.comm(310, "fio");
    b.push(
        310,
        310,
        EventKind::IomapDioBegin {
            dev: LOOP0,
            ino: 9,
            pos: 0,
            count: 4096,
        },
        None,
    );
    b.q(310, LOOP0, 5000, 8, "WS");
    b.issue(LOOP0, 5000, 8, "WS");
    b.wait(50_000);
    b.issue(LOOP0, 5000, 8, "WS"); // BLK_STS_RESOURCE retry, no requeue event
    let second_issue = b.t;
    b.wait(200_000);
    b.complete(LOOP0, 5000, 8, "WS");
    let done = b.t;
    let (ios, out) = b.finish();
    assert_eq!(ios.len(), 1);
    assert_eq!(ios[0].issue_time, second_issue);
    assert_eq!(ios[0].io_time, (done - second_issue) / 1000);
    assert_eq!(ios[0].wait_time, (second_issue - ios[0].queue_time) / 1000);
    assert_eq!(out.summary.reissues, 1);
}

#[test]
fn flushes_match_fifo_and_zero_completions_are_ignored() {
    let mut b = Bench::new();
    b.issue(LOOP0, 0, 0, "FF");
    b.issue(LOOP0, 0, 0, "FF");
    b.complete(LOOP0, u64::MAX, 0, "FF");
    b.complete(LOOP0, 100, 0, "WFS"); // end of a flush sequence
    b.complete(LOOP0, u64::MAX, 0, "FF");
    b.complete(LOOP0, u64::MAX, 0, "FF"); // no flush left
    let (ios, out) = b.finish();
    assert!(ios.is_empty());
    assert_eq!(out.summary.flushes_issued, 2);
    assert_eq!(out.summary.flushes_completed, 2);
    assert_eq!(out.summary.ignored_zero_completions, 2);
}

#[test]
fn partial_completion_is_tracked_by_position() {
    let mut b = Bench::new();
    b.comm(320, "dd");
    b.dirty_mib(320, LOOP0, 40, 0, 1);
    b.map(320, LOOP0, 40, 0, 70000, 256);
    b.q(320, LOOP0, 560000, 2048, "WS");
    b.issue(LOOP0, 560000, 2048, "WS");
    b.complete(LOOP0, 560000, 1024, "WS");
    b.complete(LOOP0, 561024, 1024, "WS");
    let (ios, out) = b.finish();
    assert_eq!(ios.len(), 2);
    assert_eq!(ios[1].sector, 561024);
    assert_eq!(ios[1].file_offset, Some(512 * 1024));
    assert_eq!(out.summary.partial_completions, 1);
    assert_eq!(out.summary.inflight_at_end, 0);
    assert_eq!(charged(&ios, &out.tables, "dd", Via::Page), MIB);
}

#[test]
fn pid_reuse_and_exec_make_new_roles() {
    let mut b = Bench::new();
    b.comm(500, "writer");
    b.dirty(500, LOOP0, 60, 0, 0);
    b.push(
        500,
        500,
        EventKind::Exit {
            pid: 500,
            ppid: 1,
            tid: 500,
            ptid: 1,
        },
        None,
    );
    // the pid is reused by a new process which execs
    b.push(
        1,
        1,
        EventKind::Fork {
            pid: 500,
            ppid: 1,
            tid: 500,
            ptid: 1,
        },
        None,
    );
    b.push(
        1,
        1,
        EventKind::SchedFork {
            parent_pid: 1,
            child_pid: 500,
            child_comm: "init".into(),
        },
        None,
    );
    b.comm(500, "other");
    b.push(
        500,
        500,
        EventKind::SchedExec {
            pid: 500,
            old_pid: 500,
            filename: "/usr/bin/other".into(),
        },
        None,
    );
    b.dirty(500, LOOP0, 60, 1, 0);
    // exec without exit: a third role
    b.comm(500, "third");
    b.dirty(500, LOOP0, 60, 2, 0);
    // a task only seen in samples: comm "<tid>"
    b.dirty(777, LOOP0, 60, 3, 0);
    b.map(FLUSHER, LOOP0, 60, 0, 80000, 4);
    b.q(FLUSHER, LOOP0, 640000, 32, "W");
    b.requests(LOOP0, 640000, 32, 2560, "W");
    let (ios, out) = b.finish();
    let t = &out.tables;
    let mut roles: Vec<(String, u32, u32)> = ios
        .iter()
        .map(|i| {
            let r = &t.roles[t.acts[i.act.index()].role.index()];
            (r.comm.clone(), r.tid, r.generation)
        })
        .collect();
    roles.sort();
    assert_eq!(
        roles,
        vec![
            ("<777>".to_string(), 777, 0),
            ("other".to_string(), 500, 1),
            ("third".to_string(), 500, 2),
            ("writer".to_string(), 500, 0)
        ]
    );
    assert!(ios.iter().all(|i| i.split && i.size == 4096));
}

/// A rename after the task acted (a kworker taking another work item) starts a new role:
/// what a role did keeps the name it had then; renames before acting just rename.
#[test]
fn rename_after_acting_starts_a_new_role() {
    let mut b = Bench::new();
    let rename = |b: &mut Bench, comm: &str| {
        b.push(
            FLUSHER,
            FLUSHER,
            EventKind::Comm {
                pid: FLUSHER,
                tid: FLUSHER,
                comm: comm.into(),
                exec: false,
            },
            None,
        )
    };
    b.comm(520, "writer");
    b.dirty(520, LOOP0, 61, 0, 0);
    b.dirty(520, LOOP0, 62, 0, 0);
    b.inode_start(FLUSHER, LOOP0, 61);
    b.map(FLUSHER, LOOP0, 61, 0, 81000, 1);
    b.q(FLUSHER, LOOP0, 648000, 8, "W");
    b.inode_end(FLUSHER, LOOP0, 61);
    rename(&mut b, "kworker/u8:0-ext4-rsv-conversion");
    rename(&mut b, "kworker/u8:0-flush-7:1");
    b.inode_start(FLUSHER, LOOP0, 62);
    b.map(FLUSHER, LOOP0, 62, 0, 81001, 1);
    b.q(FLUSHER, LOOP0, 648008, 8, "W");
    b.inode_end(FLUSHER, LOOP0, 62);
    b.requests(LOOP0, 648000, 16, 2560, "W");
    let (ios, out) = b.finish();
    let t = &out.tables;
    let issuers: Vec<(&str, u32)> = ios
        .iter()
        .map(|i| {
            let r = &t.roles[i.issuer.index()];
            (r.comm.as_str(), r.generation)
        })
        .collect();
    assert_eq!(
        issuers,
        vec![("kworker/u8:0-flush-7:0", 0), ("kworker/u8:0-flush-7:1", 0)]
    );
    assert_ne!(ios[0].issuer, ios[1].issuer);
    assert!(
        t.roles
            .iter()
            .all(|r| r.comm != "kworker/u8:0-ext4-rsv-conversion"),
        "a name the task never acted under makes no role"
    );

    // A kworker whose name at the capture's start described another work item is named
    // for the writeback work it does, as the kernel names it then.
    let mut ctx = context();
    ctx.tasks.push(Task {
        pid: 51,
        tid: 51,
        comm: "kworker/u8:1-ext4-rsv-conversion".into(),
    });
    let mut b = Bench::with(ctx);
    b.comm(521, "writer");
    b.dirty(521, LOOP1, 63, 0, 0);
    b.push(
        51,
        51,
        EventKind::WritebackWork {
            phase: WorkPhase::Start,
            bdi: LOOP1,
            sb_dev: 0,
            nr_pages: 0,
            sync_mode: 0,
            reason: 3,
        },
        None,
    );
    b.inode_start(51, LOOP1, 63);
    b.map(51, LOOP1, 63, 0, 82000, 1);
    b.q(51, LOOP1, 656000, 8, "W");
    b.requests(LOOP1, 656000, 8, 2560, "W");
    let (ios, out) = b.finish();
    assert_eq!(
        out.tables.roles[ios[0].issuer.index()].comm,
        "kworker/u8:1-flush-7:1"
    );
}

#[test]
fn recorder_acts_are_flagged_and_lost_windows_noted() {
    let mut b = Bench::new();
    b.comm(999, "ioblame-capture");
    b.dirty(999, LOOP0, 70, 0, 0);
    b.push(0, 0, EventKind::Lost { lost: 12 }, None);
    b.map(999, LOOP0, 70, 0, 90000, 1);
    b.q(999, LOOP0, 720000, 8, "WS");
    b.requests(LOOP0, 720000, 8, 2560, "WS");
    b.wait(1_000_000_000);
    b.q(999, LOOP0, 820000, 8, "RS");
    b.requests(LOOP0, 820000, 8, 2560, "RS");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert!(t.acts.iter().all(|a| a.recorder));
    assert_eq!(out.summary.lost_records, 12);
    assert_eq!(out.summary.lost_windows.len(), 1);
    assert!(out.summary.lost_windows[0].start < out.summary.lost_windows[0].end);
    // the write was queued after the loss: outside the window
    assert_eq!(out.summary.bytes_in_lost_windows, 0);
    assert_eq!(ios.len(), 2);
}

#[test]
fn io_spanning_a_loss_is_counted_in_the_lost_window() {
    let mut b = Bench::new();
    b.comm(330, "dd");
    b.push(
        330,
        330,
        EventKind::IomapDioBegin {
            dev: LOOP0,
            ino: 9,
            pos: 0,
            count: 4096,
        },
        None,
    );
    b.q(330, LOOP0, 5000, 8, "WS");
    b.issue(LOOP0, 5000, 8, "WS");
    b.push(0, 0, EventKind::Lost { lost: 3 }, None);
    b.complete(LOOP0, 5000, 8, "WS");
    // a completion whose issue was not seen, after the window
    b.complete(LOOP0, 6000, 8, "W");
    let (ios, out) = b.finish();
    assert_eq!(out.summary.bytes_in_lost_windows, 4096);
    // The IO and its act are marked; the later completion is not.
    let spanning = ios.iter().find(|io| io.via == Via::Direct).unwrap();
    assert!(spanning.in_lost_window);
    assert_eq!(
        out.tables.totals[spanning.act.index()].lost_window_bytes,
        4096
    );
    assert!(!ios[1].in_lost_window);
    assert_eq!(out.tables.totals[ios[1].act.index()].lost_window_bytes, 0);
    assert_eq!(out.summary.unmatched_completions, 1);
    assert_eq!(ios[1].via, Via::Unknown);
    assert_eq!(out.summary.unknown_bytes, 4096);
}

/// Offsets and seek distances are scaled to 0..65535 over the device size.
#[test]
fn offset_and_seek_scaling() {
    let mut b = Bench::new();
    b.comm(340, "fio");
    b.push(
        340,
        340,
        EventKind::IomapDioBegin {
            dev: LOOP0,
            ino: 9,
            pos: 0,
            count: 4096,
        },
        None,
    );
    let size = 2u64 << 20; // sectors
    for s in [size / 2, size / 4, size - 8] {
        b.q(340, LOOP0, s, 8, "RS");
        b.requests(LOOP0, s, 8, 2560, "RS");
    }
    let (ios, _) = b.finish();
    assert_eq!(
        ios.iter().map(|i| i.offset).collect::<Vec<_>>(),
        vec![32768, 16384, 65535]
    );
    assert_eq!(ios[0].seek_dist, 0);
    assert_eq!(
        ios[1].seek_dist,
        ((size / 2 + 8 - size / 4) * 65536 / size) as u32
    );
    assert_eq!(
        ios[2].seek_dist,
        ((size - 8 - (size / 4 + 8)) * 65536 / size) as u32
    );
}

/// A bio-based device (zram): no request layer, bio_complete ends the IO.
#[test]
fn bio_based_device_completes_bios() {
    let mut b = Bench::new();
    b.comm(350, "dd");
    b.push(
        350,
        350,
        EventKind::IomapDioBegin {
            dev: ZRAM1,
            ino: 0,
            pos: 0,
            count: 4096,
        },
        None,
    );
    b.q(350, ZRAM1, 64, 8, "WS");
    b.wait(5000);
    b.completed_bytes += 4096;
    b.push(
        350,
        350,
        EventKind::BioComplete {
            dev: ZRAM1,
            sector: 64,
            nr_sector: 8,
            error: 0,
            rwbs: Rwbs::parse("WS"),
        },
        None,
    );
    let (ios, out) = b.finish();
    assert_eq!(charged(&ios, &out.tables, "dd", Via::Direct), 4096);
    assert_eq!(ios[0].io_time, 6);
    assert_eq!(ios[0].wait_time, 0);
}

/// dm-crypt (docs/attribution.md, "Requests"): its worker resubmits the writes to the lower
/// device without a remap event; the target's table (lower device, offset) links the lower
/// bio to the dm bio queued above it. Each level's IO is the writer's, once per level, none
/// the worker's.
#[test]
fn dm_crypt_lower_bios_take_the_charges_of_the_bio_above() {
    const DM: Dev = 254 << 20;
    let mut b = Bench::with(Context {
        dm_targets: vec![ioblame_format::DmTarget {
            major: 254,
            minor: 0,
            start: 0,
            length: 1 << 20,
            target: "crypt".into(),
            lower_major: 7,
            lower_minor: 1,
            lower_offset: 32768,
            since_ns: 0,
        }],
        block_sizes: vec![(DM, 4096)],
        ..context()
    });
    b.comm(201, "writerA");
    b.comm(400, "kworker/u8:3-kcryptd/254:0");
    b.dirty_mib(201, DM, 60, 0, 1);
    b.map(FLUSHER, DM, 60, 0, 1000, 256);
    b.q(FLUSHER, DM, 8000, 2048, "W");
    // kcryptd writes the encrypted copy, in two bios, with no remap.
    b.q(400, LOOP1, 32768 + 8000, 1024, "W");
    b.q(400, LOOP1, 32768 + 9024, 1024, "W");
    b.requests(LOOP1, 32768 + 8000, 2048, 2048, "W");
    b.completed_bytes += MIB;
    b.push(
        0,
        0,
        EventKind::BioComplete {
            dev: DM,
            sector: 8000,
            nr_sector: 2048,
            error: 0,
            rwbs: Rwbs::parse("W"),
        },
        None,
    );
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(comm_bytes(&ios, t, "kworker/u8:3-kcryptd/254:0"), 0);
    for dev in [DM, LOOP1] {
        let mine: u64 = ios
            .iter()
            .filter(|i| {
                i.dev == dev && t.roles[t.acts[i.act.index()].role.index()].comm == "writerA"
            })
            .map(|i| i.size)
            .sum();
        assert_eq!(mine, MIB, "{dev:#x}");
    }
    assert!(ios.iter().all(|i| !i.lower));
}

/// A partition: bio events on the partition with absolute sectors, rq events on the disk,
/// fs block numbers relative to the partition.
#[test]
fn partition_sectors_are_translated() {
    let mut b = Bench::new();
    b.comm(360, "dd");
    b.dirty(360, SDA, 12, 0, 0); // bdi is the whole disk
    b.map(360, SDA1, 12, 0, 100, 1);
    let abs = 100 * 8 + 2048;
    let kind = EventKind::BioRemap {
        dev: SDA1,
        sector: abs,
        nr_sector: 8,
        old_dev: SDA1,
        old_sector: 800,
        rwbs: Rwbs::parse("WS"),
    };
    b.push(360, 360, kind, None);
    b.q(360, SDA1, abs, 8, "WS");
    b.requests(SDA, abs, 8, 2560, "WS");
    let (ios, out) = b.finish();
    assert_eq!(charged(&ios, &out.tables, "dd", Via::Page), 4096);
    assert_eq!(ios[0].dev, SDA);
    assert_eq!(out.tables.acts[0].file, FileKey { dev: SDA1, ino: 12 });
}

/// A partition as every kernel traces it (5.10, 6.1, 6.12 and 7.3 checked): the bio
/// events carry the disk (`bio_dev()`) with absolute sectors, and the partition shows only
/// as the `old_dev` of the remap just before the queue. The file's data and the partition's
/// block-device inode (ext4 metadata) are charged to their dirtiers.
#[test]
fn partition_bios_carry_the_disk() {
    let mut b = Bench::new();
    b.comm(361, "dd");
    b.dirty(361, SDA, 12, 0, 0);
    b.map(361, SDA1, 12, 0, 100, 1);
    // jbd2 dirties a page of sda1's block-device inode: block 10 of the partition
    let kind = EventKind::DirtyFolio {
        bdi: SDA,
        ino: SDA1 as u64,
        index: 10,
    };
    b.push(JBD2, JBD2, kind, Some(DIRTY_STACK));
    let remap = |sector, old_sector| EventKind::BioRemap {
        dev: SDA,
        sector,
        nr_sector: 8,
        old_dev: SDA1,
        old_sector,
        rwbs: Rwbs::parse("W"),
    };
    let abs = 100 * 8 + 2048;
    b.push(361, 361, remap(abs, 800), None);
    b.q(361, SDA, abs, 8, "WS");
    b.push(FLUSHER, FLUSHER, remap(2048 + 80, 80), None);
    b.q(FLUSHER, SDA, 2048 + 80, 8, "WM");
    b.requests(SDA, abs, 8, 2560, "WS");
    b.requests(SDA, 2048 + 80, 8, 2560, "WM");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "dd", Via::Page), 4096);
    assert_eq!(charged(&ios, t, "jbd2/loop0-8", Via::Page), 4096);
    assert!(ios.iter().all(|i| i.dev == SDA));
    assert_eq!(ios[1].ino, Some(SDA1 as u64));
    assert_eq!(ios[1].file_offset, Some(10 * 4096));
    assert_eq!(out.summary.unknown_bytes, 0);
}

/// Two readers of the same block queued at once: each request takes the sectors once.
#[test]
fn overlapping_pending_bios_are_taken_once_each() {
    let mut b = Bench::new();
    b.comm(370, "r1");
    b.comm(371, "r2");
    b.q(370, LOOP0, 9000, 8, "R");
    b.q(371, LOOP0, 9000, 8, "R");
    b.issue(LOOP0, 9000, 8, "R");
    b.complete(LOOP0, 9000, 8, "R");
    b.issue(LOOP0, 9000, 8, "R");
    b.complete(LOOP0, 9000, 8, "R");
    let (ios, out) = b.finish();
    assert_eq!(charged(&ios, &out.tables, "r1", Via::Read), 4096);
    assert_eq!(charged(&ios, &out.tables, "r2", Via::Read), 4096);
    assert_eq!(out.summary.pending_bytes_at_end, 0);
}

/// Two requests at one sector in flight at once (two readers of one block, the second
/// issued before the first completes): each is its own request, completed in issue order,
/// not a re-issue of the first.
#[test]
fn same_sector_requests_in_flight_at_once() {
    let mut b = Bench::new();
    b.comm(372, "r1");
    b.comm(373, "r2");
    b.q(372, LOOP0, 9000, 8, "R");
    b.issue(LOOP0, 9000, 8, "R");
    b.q(373, LOOP0, 9000, 8, "R");
    b.issue(LOOP0, 9000, 8, "R");
    b.issue(LOOP0, 9000, 8, "R"); // a re-dispatch of the second: no fresh bio
    b.complete(LOOP0, 9000, 8, "R");
    b.complete(LOOP0, 9000, 8, "R");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "r1", Via::Read), 4096);
    assert_eq!(charged(&ios, t, "r2", Via::Read), 4096);
    assert_eq!(
        ios.iter()
            .map(|i| t.roles[t.acts[i.act.index()].role.index()].comm.as_str())
            .collect::<Vec<_>>(),
        vec!["r1", "r2"],
        "first issued, first completed"
    );
    let s = &out.summary;
    assert_eq!(
        (
            s.unknown_bytes,
            s.pending_bytes_at_end,
            s.inflight_at_end,
            s.reissues
        ),
        (0, 0, 0, 1)
    );
}

/// Re-dirtying after writeback charges the new dirtier; the intents and acts are numbered
/// in order of first use.
#[test]
fn redirty_after_writeback_charges_the_new_dirtier() {
    let mut b = Bench::new();
    b.comm(380, "first");
    b.comm(381, "second");
    for who in [380, 381] {
        b.dirty(who, LOOP0, 80, 0, 0);
        b.map(FLUSHER, LOOP0, 80, 0, 95000, 1);
        b.q(FLUSHER, LOOP0, 760000, 8, "W");
        b.requests(LOOP0, 760000, 8, 2560, "W");
    }
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "first", Via::Page), 4096);
    assert_eq!(charged(&ios, t, "second", Via::Page), 4096);
    assert_eq!(t.acts.len(), 2);
    assert_eq!(
        t.intents.len(),
        3,
        "#0 nomem, #1 lost, #2 the shared dirtying stack"
    );
    let walked: Vec<(ActId, u64)> = t
        .acts_with_totals()
        .map(|(id, _, tot)| (id, tot.bytes[Dir::W.index()]))
        .collect();
    assert_eq!(walked, vec![(ActId(0), 4096), (ActId(1), 4096)]);
}

/// Bios whose issue is never recorded are forgotten after two minutes of trace time.
#[test]
fn stale_pending_bios_are_swept() {
    let mut b = Bench::new();
    b.comm(620, "fio");
    b.push(
        620,
        620,
        EventKind::IomapDioBegin {
            dev: LOOP0,
            ino: 9,
            pos: 0,
            count: 1 << 40,
        },
        None,
    );
    b.q(620, LOOP0, 100, 8, "WS");
    b.issue(LOOP0, 100, 8, "WS"); // never completes
    b.q(620, LOOP0, 200, 8, "WS"); // never issued
    b.wait(121_000_000_000);
    for i in 0..4096u64 {
        b.q(620, LOOP0, 1000 + i * 8, 8, "WS");
        b.requests(LOOP0, 1000 + i * 8, 8, 8, "WS");
    }
    // The forgotten bytes are charged to the lost intent, not dropped.
    b.completed_bytes += 8192;
    let (ios, out) = b.finish();
    assert_eq!(out.summary.stale_bytes, 8192);
    assert_eq!(out.summary.stale_requests, 1);
    assert_eq!(out.summary.inflight_at_end, 0);
    assert_eq!(out.summary.pending_bytes_at_end, 0);
    let t = &out.tables;
    let lost: Vec<&Io> = ios.iter().filter(|i| i.via == Via::Unknown).collect();
    assert_eq!(lost.len(), 2, "{lost:?}");
    for i in &lost {
        assert_eq!(i.size, 4096);
        assert_eq!(i.dir, Dir::W);
        assert_eq!(t.acts[i.act.index()].intent, INTENT_LOST);
        assert_eq!(i.ino, Some(9), "the file is kept");
        assert_eq!(t.roles[i.issuer.index()].comm, "fio", "the issuer is kept");
        assert_eq!(i.io_time, 0);
    }
    assert_eq!(
        lost.iter().map(|i| i.sector).collect::<Vec<_>>(),
        vec![100, 200]
    );
    assert_eq!(out.summary.unknown_bytes, 8192);
}

/// Requests whose bios were never seen are still charged (lost), and leftovers at the
/// end are reported.
#[test]
fn unseen_bios_and_leftovers() {
    let mut b = Bench::new();
    b.issue(LOOP0, 123456, 16, "W");
    b.complete(LOOP0, 123456, 16, "W");
    b.comm(390, "late");
    b.dirty(390, LOOP0, 90, 0, 2);
    b.push(
        390,
        390,
        EventKind::DirtyBuffer {
            dev: LOOP0,
            blocknr: 77,
            size: 4096,
        },
        None,
    );
    b.push(
        390,
        390,
        EventKind::IomapDioBegin {
            dev: LOOP0,
            ino: 9,
            pos: 0,
            count: 4096,
        },
        None,
    );
    b.q(390, LOOP0, 200000, 8, "WS");
    b.q(390, LOOP0, 300000, 8, "WS");
    b.issue(LOOP0, 300000, 8, "WS");
    let (ios, out) = b.finish();
    assert_eq!(ios.len(), 1);
    assert_eq!(ios[0].via, Via::Unknown);
    let s = &out.summary;
    assert_eq!(
        (s.unknown_bytes, s.inflight_at_end, s.inflight_bytes_at_end),
        (8192, 1, 4096)
    );
    assert_eq!(s.pending_bytes_at_end, 4096);
    assert_eq!(
        (
            s.dirty_folios_left,
            s.dirty_pages_left,
            s.dirty_buffers_left
        ),
        (1, 4, 1)
    );
}

/// fsync by C of a file dirtied by A: charged to A, issuer C, no writeback reason.
#[test]
fn fsync_by_another_task_charges_the_dirtier() {
    let mut b = Bench::new();
    b.comm(600, "A");
    b.comm(601, "C");
    b.dirty_mib(600, LOOP0, 120, 0, 2);
    b.push(
        601,
        601,
        EventKind::Ext4SyncFile {
            dev: LOOP0,
            ino: 120,
            exit: false,
        },
        None,
    );
    b.push(
        601,
        601,
        EventKind::Ext4Writepages {
            dev: LOOP0,
            ino: 120,
            sync_mode: 1,
        },
        None,
    );
    b.map(601, LOOP0, 120, 0, 120000, 512);
    b.q(601, LOOP0, 960000, 4096, "WS");
    b.push(
        601,
        601,
        EventKind::Ext4WritepagesResult {
            dev: LOOP0,
            ino: 120,
            pages_written: 512,
        },
        None,
    );
    b.requests(LOOP0, 960000, 4096, 2560, "WS");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "A", Via::Page), 2 * MIB);
    assert!(ios
        .iter()
        .all(|i| t.roles[i.issuer.index()].comm == "C" && i.reason.is_none()));
    assert_eq!(comm_bytes(&ios, t, "C"), 0);
}

/// A stacked device: the lower bio inherits the upper bio's charge through the remap.
#[test]
fn stacked_remap_passes_the_charge_down() {
    let mut b = Bench::new();
    b.comm(610, "dd");
    b.push(
        610,
        610,
        EventKind::IomapDioBegin {
            dev: ZRAM1,
            ino: 5,
            pos: 0,
            count: 4096,
        },
        None,
    );
    b.q(610, ZRAM1, 64, 8, "WS");
    let kind = EventKind::BioRemap {
        dev: LOOP1,
        sector: 1064,
        nr_sector: 8,
        old_dev: ZRAM1,
        old_sector: 64,
        rwbs: Rwbs::parse("WS"),
    };
    b.push(610, 610, kind, None);
    b.q(70, LOOP1, 1064, 8, "WS"); // resubmitted by a worker
    b.requests(LOOP1, 1064, 8, 2560, "WS");
    b.completed_bytes += 4096;
    b.push(
        0,
        0,
        EventKind::BioComplete {
            dev: ZRAM1,
            sector: 64,
            nr_sector: 8,
            error: 0,
            rwbs: Rwbs::parse("WS"),
        },
        None,
    );
    let (ios, out) = b.finish();
    assert_eq!(ios.len(), 2, "one IO per device");
    assert!(ios
        .iter()
        .all(|i| out.tables.roles[out.tables.acts[i.act.index()].role.index()].comm == "dd"));
    assert_eq!(ios[0].dev, LOOP1);
    assert_eq!(ios[1].dev, ZRAM1);
}

/// Random and extreme events never panic, and the totals stay consistent.
#[test]
fn hostile_event_soup_does_not_panic() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut b = Bench::new();
    let edge = [
        0u64,
        1,
        7,
        8,
        4095,
        1 << 20,
        (1 << 62) - 1,
        1 << 62,
        u64::MAX - 8,
        u64::MAX,
    ];
    let rws = ["W", "WS", "R", "RA", "FWFSM", "FF", "D", "N", "WM", ""];
    let mut completed = 0u64;
    for _ in 0..100_000 {
        let r = rnd();
        let big = if r & 1 == 0 {
            edge[(r >> 1) as usize % edge.len()]
        } else {
            (r >> 8) % 4096
        };
        let n = ((r >> 20) % 64) as u32 * if r & 0x100 != 0 { 8 } else { 1 };
        let dev = [LOOP0, LOOP1, ZRAM1, SDA, SDA1, 12345][(r >> 30) as usize % 6];
        let rwbs = Rwbs::parse(rws[(r >> 34) as usize % rws.len()]);
        let pid = 1000 + (r >> 40) as u32 % 5;
        let kind = match (r >> 44) % 18 {
            0 => EventKind::DirtyFolio {
                bdi: dev,
                ino: big % 5,
                index: big,
            },
            1 => EventKind::AddToPageCache {
                s_dev: dev,
                ino: big % 5,
                index: big,
                order: (r >> 50) as u8,
                pfn: 0,
            },
            2 => EventKind::DirtyBuffer {
                dev,
                blocknr: big,
                size: [0, 512, 1024, 4096, 3000, u64::MAX][(r >> 50) as usize % 6],
            },
            3 => EventKind::Ext4MapBlocks {
                dev,
                ino: 3,
                flags: 0,
                pblk: big,
                lblk: big,
                len: n,
                mflags: 0,
                ret: n as i32,
            },
            4 => EventKind::IomapAddToIoend {
                dev,
                ino: 4,
                pos: big,
                dirty_len: big,
                addr: big,
                offset: big / 2,
                length: big,
                typ: 3,
                flags: 0,
                bdev: dev,
            },
            5 | 6 => EventKind::BioQueue {
                dev,
                sector: big,
                nr_sector: n,
                rwbs,
            },
            7 | 8 => EventKind::RqIssue {
                dev,
                sector: big,
                nr_sector: n,
                bytes: 0,
                rwbs,
            },
            9 | 10 => {
                if n > 0 && (rwbs.is_read() || rwbs.is_write()) {
                    completed += 1;
                }
                EventKind::RqComplete {
                    dev,
                    sector: big,
                    nr_sector: n,
                    error: 0,
                    rwbs,
                }
            }
            11 => EventKind::BioComplete {
                dev,
                sector: big,
                nr_sector: n,
                error: -5,
                rwbs,
            },
            12 => EventKind::BioRemap {
                dev,
                sector: big,
                nr_sector: n,
                old_dev: LOOP0,
                old_sector: big / 3,
                rwbs,
            },
            13 => EventKind::SingleInodeStart {
                bdi: dev,
                ino: big % 5,
                state: 0,
                nr_to_write: 0,
            },
            14 => EventKind::WriteInodeStart {
                bdi: dev,
                ino: big % 5,
                sync_mode: 0,
            },
            15 => EventKind::MarkInodeDirty {
                bdi: dev,
                ino: big % 5,
                state: 0,
                flags: 0x30,
            },
            16 => EventKind::Fork {
                pid,
                ppid: 1,
                tid: pid,
                ptid: 1,
            },
            _ => EventKind::Lost { lost: 1 },
        };
        b.push(pid, pid, kind, Some(BIO_STACK));
        b.wait(r % 10_000_000);
        if r % 97 == 0 {
            b.t = b.t.saturating_sub(20_000_000); // time going backwards
        }
    }
    let out = std::mem::replace(&mut b.a, Attributor::new(Context::default())).finish();
    b.ios.extend(out.ios.iter().cloned());
    let charged: u64 = b.ios.iter().map(|i| i.size).sum();
    assert_eq!(charged, out.summary.total_bytes());
    assert_eq!(
        out.tables
            .totals
            .iter()
            .map(|t| t.total_bytes())
            .sum::<u64>(),
        charged
    );
    assert!(out.summary.out_of_order_events > 0);
    assert!(completed > 0);
    assert!(out.summary.stale_bytes > 0, "old pending bios were swept");
    assert!(out.summary.warnings.len() <= 64);
}

#[test]
fn context_from_trace_metadata() {
    use ioblame_format::{ByteOrder, Header, Metadata};
    let header = Header {
        byte_order: ByteOrder::Little,
        word_size: 8,
        page_size: 16384,
        cpu_count: 2,
        clock_id: 1,
        recorder_pid: 4242,
        file_index: 0,
        start_time_ns: 0,
        start_clock_ns: 0,
        trace_id: 1,
        hostname: "h".into(),
        kernel_release: "6.18".into(),
        machine: "x86_64".into(),
        recorder_version: "t".into(),
    };
    let meta = Metadata {
        block_devices: context().devices,
        tasks: vec![Task {
            pid: 1,
            tid: 1,
            comm: "init".into(),
        }],
        ..Metadata::default()
    };
    let ctx = Context::from_trace(&header, &meta);
    assert_eq!(
        (
            ctx.page_size,
            ctx.recorder_pid,
            ctx.devices.len(),
            ctx.tasks.len()
        ),
        (16384, Some(4242), 5, 1)
    );
    let bad = Header {
        page_size: 3000,
        recorder_pid: 0,
        ..header
    };
    let ctx = Context::from_trace(&bad, &meta);
    assert_eq!((ctx.page_size, ctx.recorder_pid), (4096, None));
    // 16 KiB pages: the block-device inode rule maps sector 64 to page 2
    let mut c = context();
    c.page_size = 16384;
    let mut b = Bench::with(c);
    b.push(
        JBD2,
        JBD2,
        EventKind::DirtyFolio {
            bdi: LOOP0,
            ino: LOOP0 as u64,
            index: 2,
        },
        Some(DIRTY_STACK),
    );
    b.q(FLUSHER, LOOP0, 64, 32, "WM");
    b.requests(LOOP0, 64, 32, 2560, "WM");
    let (ios, out) = b.finish();
    assert_eq!(charged(&ios, &out.tables, "jbd2/loop0-8", Via::Page), 16384);
}

/// The inode dirty bits come from the trace: the writeback events' print fmt where it
/// gives numbers, else the kernel release.
#[test]
fn inode_bits_from_the_trace() {
    let f618 =
        ioblame_decode::synth::builtin_format("writeback:writeback_mark_inode_dirty").unwrap();
    let old = f618
        .replace("{I_DIRTY_SYNC,", "{(1 << 0),")
        .replace("{I_DIRTY_DATASYNC,", "{(1 << 1),")
        .replace("{I_DIRTY_PAGES,", "{(1 << 2),");
    let mid = f618
        .replace("{I_DIRTY_SYNC,", "{(1 << 3),")
        .replace("{I_DIRTY_DATASYNC,", "{(1 << 4),")
        .replace("{I_DIRTY_PAGES,", "{(1 << 5),");
    let bits = |release: &str, fmt: &str| InodeBits::from_trace(release, [fmt]);
    assert_eq!(bits("6.18.44-fc-v769", f618), InodeBits::V6_18);
    assert_eq!(bits("5.15.0-91-generic", &old), InodeBits::BEFORE_6_12);
    // the format wins over the release
    assert_eq!(
        bits("6.12.1", &mid),
        InodeBits {
            dirty_inode: 0x18,
            dirty_pages: 0x20
        }
    );
    // names only (enum constants): the release decides
    assert_eq!(bits("5.10.0", f618), InodeBits::BEFORE_6_12);
    assert_eq!(bits("6.11.9", ""), InodeBits::BEFORE_6_12);
    assert_eq!(bits("garbage", ""), InodeBits::V6_18);
    // through the trace's metadata
    use ioblame_format::{ByteOrder, EventDesc, Header, Metadata};
    let header = Header {
        byte_order: ByteOrder::Little,
        word_size: 8,
        page_size: 4096,
        cpu_count: 1,
        clock_id: 1,
        recorder_pid: 0,
        file_index: 0,
        start_time_ns: 0,
        start_clock_ns: 0,
        trace_id: 1,
        hostname: "h".into(),
        kernel_release: "5.4.0".into(),
        machine: "x86_64".into(),
        recorder_version: "t".into(),
    };
    let meta = Metadata {
        events: vec![EventDesc {
            name: "writeback:writeback_mark_inode_dirty".into(),
            format: old.clone(),
            ..EventDesc::default()
        }],
        ..Metadata::default()
    };
    assert_eq!(
        Context::from_trace(&header, &meta).inode_bits,
        InodeBits::BEFORE_6_12
    );

    // A trace from a kernel before the reordering: I_DIRTY_SYNC is 0x1, and the inode's
    // dirtier owns the inode's write; 0x10 there is I_WILL_FREE, not a dirtier.
    let mut ctx = context();
    ctx.inode_bits = InodeBits::BEFORE_6_12;
    let mut b = Bench::with(ctx);
    b.comm(251, "toucher");
    for (ino, flags) in [(500, 0x1), (501, 0x10)] {
        let kind = EventKind::MarkInodeDirty {
            bdi: LOOP0,
            ino,
            state: 0,
            flags,
        };
        b.push(251, 251, kind, Some(DIRTY_STACK));
    }
    for (ino, sector) in [(500, 9100), (501, 9200)] {
        b.push(
            FLUSHER,
            FLUSHER,
            EventKind::WriteInodeStart {
                bdi: LOOP0,
                ino,
                sync_mode: 1,
            },
            None,
        );
        b.q(FLUSHER, LOOP0, sector, 8, "WM");
        b.push(
            FLUSHER,
            FLUSHER,
            EventKind::WriteInode {
                bdi: LOOP0,
                ino,
                sync_mode: 1,
            },
            None,
        );
        b.requests(LOOP0, sector, 8, 2560, "WM");
    }
    let (ios, out) = b.finish();
    assert_eq!(charged(&ios, &out.tables, "toucher", Via::Inode), 4096);
    assert_eq!(ios[1].via, Via::Unknown);
}

/// ext4 map events count in filesystem blocks: with no buffer_head seen yet, the block size
/// comes from the trace's mount table (1 KiB blocks here), so two writers of one file are
/// each charged their pages, not lost to a 4 KiB guess.
#[test]
fn block_size_from_the_mount_table() {
    use ioblame_format::{ByteOrder, Header, Metadata, Mount};
    let header = Header {
        byte_order: ByteOrder::Little,
        word_size: 8,
        page_size: 4096,
        cpu_count: 1,
        clock_id: 1,
        recorder_pid: 0,
        file_index: 0,
        start_time_ns: 0,
        start_clock_ns: 0,
        trace_id: 1,
        hostname: "h".into(),
        kernel_release: "6.18".into(),
        machine: "x86_64".into(),
        recorder_version: "t".into(),
    };
    let mount = |minor, block_size| Mount {
        major: 7,
        minor,
        fs_type: "ext4".into(),
        block_size,
        ..Mount::default()
    };
    let meta = Metadata {
        mounts: vec![mount(0, 1024), mount(1, 0), mount(2, 3000)],
        ..Metadata::default()
    };
    assert_eq!(
        Context::from_trace(&header, &meta).block_sizes,
        vec![(LOOP0, 1024)],
        "unknown and impossible sizes are left out"
    );
    let mut ctx = context();
    ctx.block_sizes = vec![(LOOP0, 1024)];
    let mut b = Bench::with(ctx);
    b.comm(660, "h1");
    b.comm(661, "h2");
    b.dirty(660, LOOP0, 170, 0, 0);
    b.dirty(661, LOOP0, 170, 1, 0);
    b.inode_start(FLUSHER, LOOP0, 170);
    b.map(FLUSHER, LOOP0, 170, 0, 30000, 8);
    b.q(FLUSHER, LOOP0, 60000, 16, "W");
    b.inode_end(FLUSHER, LOOP0, 170);
    b.requests(LOOP0, 60000, 16, 2560, "W");
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(charged(&ios, t, "h1", Via::Page), 4096);
    assert_eq!(charged(&ios, t, "h2", Via::Page), 4096);
    assert_eq!(ios[1].file_offset, Some(4096));
}

/// The decoder's kallsyms symbolizer classifies stacks: a jbd2 commit stack is journal IO.
#[test]
fn kallsyms_symbolizer_recognises_journal_stacks() {
    let text = "ffff00000000f000 T jbd2_journal_commit_transaction\nffff00000000ff00 T kjournald2\nffff000000001000 T __iomap_dio_rw\n";
    let mut ctx = context();
    ctx.symbols = Some(Box::new(ioblame_decode::Symbolizer::from_kallsyms(text)));
    let mut b = Bench::with(ctx);
    b.push(
        JBD2,
        JBD2,
        EventKind::BioQueue {
            dev: LOOP0,
            sector: 3000,
            nr_sector: 8,
            rwbs: Rwbs::parse("WS"),
        },
        Some(&[0xffff_0000_0000_f010, 0xffff_0000_0000_ff10]),
    );
    b.requests(LOOP0, 3000, 8, 2560, "WS");
    b.push(
        301,
        301,
        EventKind::BioQueue {
            dev: LOOP0,
            sector: 4000,
            nr_sector: 8,
            rwbs: Rwbs::parse("WS"),
        },
        Some(&[0xffff_0000_0000_1010]),
    );
    b.requests(LOOP0, 4000, 8, 2560, "WS");
    let (ios, _) = b.finish();
    assert_eq!(ios[0].via, Via::Journal);
    assert_eq!(ios[1].via, Via::Direct);
}

/// A long stream (2000 s of trace time, 2000 short-lived writers) where state is left
/// behind in every way the kernel allows: files truncated while dirty, inodes cleaned
/// without IO, buffers of freed blocks, inodes unlinked while dirty, a thread mapping
/// blocks it never writes, bursts of lost records, tids reused. The attributor's state
/// follows what is outstanding, not the length of the trace.
#[test]
fn state_stays_bounded_over_a_long_stream() {
    let mut b = Bench::new();
    let mut peak = StateSizes::default();
    let mut mid = StateSizes::default();
    let n = 2000u64;
    for i in 0..n {
        let tid = 20_000 + (i % 500) as u32;
        b.push(
            tid,
            tid,
            EventKind::Fork {
                pid: tid,
                ppid: 1,
                tid,
                ptid: 1,
            },
            None,
        );
        b.comm(tid, &format!("w{}", i % 7));
        let ino = 100_000 + i;
        b.dirty(tid, LOOP0, ino, 0, 0);
        match i % 3 {
            0 => b.push(
                tid,
                tid,
                EventKind::DeleteFromPageCache {
                    s_dev: LOOP0,
                    ino,
                    index: 0,
                    order: 0,
                    pfn: 0,
                },
                None,
            ),
            1 => {
                b.inode_start(FLUSHER, LOOP0, ino);
                b.map(FLUSHER, LOOP0, ino, 0, 200_000 + i, 1);
                b.q(FLUSHER, LOOP0, (200_000 + i) * 8, 8, "W");
                b.inode_end(FLUSHER, LOOP0, ino);
                b.requests(LOOP0, (200_000 + i) * 8, 8, 2560, "W");
            }
            _ => {
                // written while nobody watched: the inode comes out clean
                b.inode_start(FLUSHER, LOOP0, ino);
                b.inode_end(FLUSHER, LOOP0, ino);
            }
        }
        // a temporary file unlinked while dirty: its one-page folio leaves the page cache
        // unseen (the recorder filters order-0 page cache events in the kernel)
        b.dirty(tid, LOOP0, 900_000 + i, 0, 0);
        // a buffer of a block freed before writeback, an inode unlinked while dirty
        b.push(
            tid,
            tid,
            EventKind::DirtyBuffer {
                dev: LOOP0,
                blocknr: 1_000_000 + i,
                size: 4096,
            },
            Some(DIRTY_STACK),
        );
        b.push(
            tid,
            tid,
            EventKind::MarkInodeDirty {
                bdi: LOOP0,
                ino,
                state: 0,
                flags: 0x10,
            },
            Some(DIRTY_STACK),
        );
        // an overwriter looking up blocks it never writes itself
        b.map(77, LOOP0, 42, i, 3_000_000 + i, 1);
        // a jbd2 handle never stopped, and one of a transaction whose commit is not seen
        b.handle_start(tid, LOOP0, 1000 + i as u32);
        b.handle_start(77, LOOP0, 1000 + i as u32);
        b.handle_stats(77, LOOP0, 1000 + i as u32, 2);
        for _ in 0..3 {
            b.push(0, 0, EventKind::Lost { lost: 2 }, None);
        }
        b.push(
            tid,
            tid,
            EventKind::Exit {
                pid: tid,
                ppid: 1,
                tid,
                ptid: 1,
            },
            None,
        );
        b.wait(1_000_000_000);
        let s = b.a.state_sizes();
        peak = StateSizes {
            tasks: peak.tasks.max(s.tasks),
            pruned_tids: peak.pruned_tids.max(s.pruned_tids),
            thread_contexts: peak.thread_contexts.max(s.thread_contexts),
            thread_maps: peak.thread_maps.max(s.thread_maps),
            dirty_files: peak.dirty_files.max(s.dirty_files),
            dirty_folios: peak.dirty_folios.max(s.dirty_folios),
            dirty_buffers: peak.dirty_buffers.max(s.dirty_buffers),
            inode_dirtiers: peak.inode_dirtiers.max(s.inode_dirtiers),
            folio_orders: peak.folio_orders.max(s.folio_orders),
            pending_fragments: peak.pending_fragments.max(s.pending_fragments),
            inflight: peak.inflight.max(s.inflight),
            lost_windows: peak.lost_windows.max(s.lost_windows),
            journal_txns: peak.journal_txns.max(s.journal_txns),
            journal_handles: peak.journal_handles.max(s.journal_handles),
        };
        if i == n / 2 {
            mid = s;
        }
    }
    let end = b.a.state_sizes();
    let msg = format!("peak {peak:?}\nmid {mid:?}\nend {end:?}");
    eprintln!("{msg}");
    // Tasks: those exited in the last 30 s, plus the long-lived ones.
    assert!(peak.tasks <= 45, "{msg}");
    assert!(peak.pruned_tids <= 500, "{msg}");
    assert!(peak.thread_contexts <= 5, "{msg}");
    assert!(peak.thread_maps <= 256, "{msg}");
    // Ten minutes of unlinked temporary files, plus the two written or deleted ones.
    assert!(peak.dirty_folios <= 622 && peak.dirty_files <= 622, "{msg}");
    assert!(end.dirty_folios <= mid.dirty_folios + 10, "{msg}");
    // Ten minutes of dirtying (one a second), not 2000.
    assert!(peak.dirty_buffers <= 620, "{msg}");
    assert!(peak.inode_dirtiers <= 620, "{msg}");
    assert!(end.dirty_buffers <= mid.dirty_buffers + 10, "{msg}");
    assert!(peak.pending_fragments == 0 && peak.inflight == 0, "{msg}");
    assert!(peak.lost_windows <= 1024, "{msg}");
    // Ten minutes of transactions never committed (one a second); of the handles never
    // stopped, the exited writers' go with them.
    assert!(
        peak.journal_txns <= 611 && peak.journal_handles <= 2,
        "{msg}"
    );
    assert!(end.journal_txns <= mid.journal_txns + 10, "{msg}");
    let (_, out) = b.finish();
    // 2000 bursts of 3 losses: one window per burst, the rest merged.
    assert_eq!(out.summary.lost_records, 6 * n);
    assert_eq!(out.summary.lost_windows.len(), 1024);
    assert_eq!(
        out.summary
            .lost_windows
            .iter()
            .map(|w| w.count)
            .sum::<u64>(),
        6 * n
    );
    // Reused tids keep distinct generations after their tasks are forgotten.
    let gens: Vec<u32> = out
        .tables
        .roles
        .iter()
        .filter(|r| r.tid == 20_000)
        .map(|r| r.generation)
        .collect();
    assert_eq!(gens, vec![0, 1, 2, 3], "{:?}", out.tables.roles.len());
}

/// What a live view counts as dirtied ([`Attributor::log_dirtied`]): a folio of a known
/// order by its size; a folio dirtied through its buffers (ext4 over allocated blocks) by
/// its buffers, once, of the folio's file; a delayed-allocation folio (no buffer traced) by
/// itself. Nothing else changes.
#[test]
fn dirtied_bytes_are_counted_once_per_folio_or_by_its_buffers() {
    let mut b = Bench::new();
    b.a.log_dirtied();
    b.comm(220, "writerO");
    b.comm(230, "writerD");
    // An overwrite: a folio of 8 pages, then its 8 buffers.
    b.dirty(220, LOOP0, 218, 512, 3);
    for blk in 0..8 {
        let kind = EventKind::DirtyBuffer {
            dev: LOOP0,
            blocknr: 45568 + blk,
            size: 4096,
        };
        b.push(220, 220, kind, Some(DIRTY_STACK));
    }
    // Later, a delayed-allocation write: 2 folios of 4 pages, no buffer.
    b.wait(1_000_000);
    b.dirty(230, LOOP0, 219, 0, 2);
    b.dirty(230, LOOP0, 219, 4, 2);
    let mut got = Vec::new();
    b.a.drain_dirtied_into(&mut got, false);
    // The last 100 µs are kept back (a folio's buffers may yet replace it).
    assert_eq!(got.iter().map(|d| d.bytes).sum::<u64>(), 8 * 4096);
    b.a.drain_dirtied_into(&mut got, true);
    let sum = |comm: &str| -> (u64, Vec<u64>) {
        let t = b.a.tables();
        let mine: Vec<&Dirtied> = got
            .iter()
            .filter(|d| t.roles[d.role.index()].comm == comm)
            .collect();
        let mut inos: Vec<u64> = mine.iter().map(|d| d.ino).collect();
        inos.dedup();
        (mine.iter().map(|d| d.bytes).sum(), inos)
    };
    assert_eq!(sum("writerO"), (8 * 4096, vec![218]));
    assert_eq!(sum("writerD"), (2 * 4 * 4096, vec![219]));
    assert!(got.iter().all(|d| d.bytes > 0));
    let frames = b.a.stack_frames(got[0].stack);
    assert_eq!(frames, DIRTY_STACK);
}

/// The executable mapping of `/usr/bin/app` the recorder read for process `pid`, after its
/// exec: file offsets 0x1000 to 0x5000 at 0x5555_0000_0000.
fn app_mapped(pid: u32) -> ioblame_format::UserMap {
    ioblame_format::UserMap {
        pid,
        start: 0x5555_0000_0000,
        end: 0x5555_0000_4000,
        pgoff: 0x1000,
        dev_major: 8,
        dev_minor: 1,
        ino: 99,
        build_id: vec![0xab; 20],
        // Read by the recorder after the process's exec.
        seen_ns: 2_000_000,
        path: "/usr/bin/app".into(),
    }
}

/// A stack copy (`--user-stacks dwarf`) is unwound when its event comes, in its process's
/// mappings then, into the user frames of the event's stack: here by the frame pointers its
/// bytes hold (the file has no unwind tables in the trace), as module offsets like a walk's.
/// The copy itself goes no further; a trace without an unwinder keeps the kernel frames.
#[test]
fn stack_copies_are_unwound_into_user_frames() {
    let app = app_mapped(500);
    let run = |unwinder: bool| {
        let mut ctx = context();
        ctx.user_maps = vec![app.clone()];
        ctx.unwinder = unwinder.then(|| {
            ioblame_unwind::Unwinder::new(ioblame_unwind::Arch::X86_64, Default::default())
        });
        let mut b = Bench::with(ctx);
        b.comm(500, "app");
        // sp at 0x7ffd_0000_1000; the frame pointer at sp + 16 holds the caller's frame
        // pointer (0: the outermost) and, after it, the return address into the app at file
        // offset 0x1300.
        let sp = 0x7ffd_0000_1000u64;
        let mut bytes = vec![0u8; 64];
        bytes[24..32].copy_from_slice(&(0x5555_0000_0300u64).to_le_bytes());
        let copy = ioblame_decode::StackCopy {
            ip: 0x5555_0000_0100,
            sp,
            fp: sp + 16,
            lr: 0,
            bytes: bytes.into(),
            full: false,
        };
        b.direct_write(500, 264192, BIO_STACK, Some(copy));
        let (ios, out) = b.finish();
        assert_eq!(ios.len(), 1);
        let t = &out.tables;
        let intent = t.intents[t.acts[ios[0].act.index()].intent.index()].clone();
        (intent, out.summary.stack_copies)
    };
    let (intent, copies) = run(true);
    assert_eq!(intent.stack, BIO_STACK, "the kernel part is the kernel's");
    let frames: Vec<(Option<&str>, u64)> = intent
        .user
        .iter()
        .map(|f| (f.module.as_ref().map(|m| m.path.as_str()), f.offset))
        .collect();
    assert_eq!(
        frames,
        [
            (Some("/usr/bin/app"), 0x1100),
            (Some("/usr/bin/app"), 0x1300)
        ]
    );
    assert_eq!(copies, 1);
    let (intent, copies) = run(false);
    assert_eq!(
        (intent.stack.as_slice(), intent.user.len(), copies),
        (BIO_STACK, 0, 0)
    );
}

/// User frames (`--user-stacks`): an address becomes a module and a file offset through the
/// process's mappings, so the same function of one binary loaded at two addresses in two
/// processes is one intent, and two functions are two.
#[test]
fn user_frames_are_module_offsets_whatever_the_load_address() {
    let app = app_mapped(400);
    let mut ctx = context();
    ctx.user_maps = vec![app];
    let mut b = Bench::with(ctx);
    b.comm(400, "app");
    b.comm(401, "app");
    // The second process maps the same file elsewhere (no build id in its record: the one
    // read for the file is taken).
    b.push(
        401,
        401,
        EventKind::Mmap {
            pid: 401,
            start: 0x7000_0000_0000,
            len: 0x4000,
            pgoff: 0x1000,
            dev: SDA1,
            ino: 99,
            build_id: Vec::new(),
            path: "/usr/bin/app".into(),
        },
        None,
    );
    let user = |base: u64, f: u64| -> Vec<u64> {
        let mut s = BIO_STACK.to_vec();
        s.extend([ioblame_decode::USER_MARK, base + f, base + 0x3000]);
        s
    };
    // Both processes' `wal_flush` (file offset 0x1100), and 400's `checkpoint` (0x1200),
    // each direct IO of 1 MiB.
    let ios = [
        (400, 0x5555_0000_0000, 0x100, 0u64),
        (401, 0x7000_0000_0000, 0x100, 1),
        (400, 0x5555_0000_0000, 0x200, 2),
        // A frame no mapping holds.
        (402, 0x6000_0000_0000, 0x100, 3),
    ];
    for (pid, base, f, i) in ios {
        b.direct_write(pid, 264192 + i * 2048, &user(base, f), None);
    }
    let (ios, out) = b.finish();
    let t = &out.tables;
    assert_eq!(ios.len(), 4);
    let intent = |i: usize| &t.intents[t.acts[ios[i].act.index()].intent.index()];
    assert_eq!(
        intent(0).stack,
        BIO_STACK,
        "the kernel part is the kernel's"
    );
    let frame = |i: usize, n: usize| {
        let f = &intent(i).user[n];
        (
            f.module.as_ref().map(|m| (m.path.as_str(), m.build_id[0])),
            f.offset,
        )
    };
    assert_eq!(frame(0, 0), (Some(("/usr/bin/app", 0xab)), 0x1100));
    assert_eq!(frame(0, 1), (Some(("/usr/bin/app", 0xab)), 0x4000));
    assert_eq!(
        t.acts[ios[0].act.index()].intent,
        t.acts[ios[1].act.index()].intent
    );
    assert_eq!(frame(2, 0), (Some(("/usr/bin/app", 0xab)), 0x1200));
    assert_ne!(
        t.acts[ios[0].act.index()].intent,
        t.acts[ios[2].act.index()].intent
    );
    // Outside every mapping: the walk is not followed further, and the address (a value
    // found on the stack) is not kept.
    assert_eq!(frame(3, 0), (None, 0));
    assert_eq!(intent(3).user.len(), 1);
}

mod btrfs {
    //! btrfs through its chunk map: data by ordered extents, tree blocks by the btree inode,
    //! DUP copies, compression (docs/attribution.md, "btrfs").
    use super::*;
    use ioblame_decode::BtrfsOrderedOp;
    use ioblame_format::{
        BtrfsChunk, BtrfsDevice, BtrfsFs, BtrfsStripe, BTRFS_CHUNK_DATA, BTRFS_CHUNK_DUP,
        BTRFS_CHUNK_METADATA, BTRFS_CHUNK_RAID0,
    };

    /// The superblock's anonymous device, as the page-cache events name the filesystem.
    const SB: Dev = 40;
    /// `btrfs-1` as the decoder reads a writeback event's bdi name.
    const BDI: Dev = (0xfff << 20) | 1;
    const FSID: [u8; 16] = *b"fsid-of-a-btrfs!";
    /// A data chunk at logical 16 MiB, placed at device byte 1 GiB; DUP metadata at logical
    /// 64 MiB, on the device at 32 MiB and 96 MiB.
    const DATA_L: u64 = 16 * MIB;
    const DATA_P: u64 = 1 << 30;
    const META_L: u64 = 64 * MIB;
    const META_P: [u64; 2] = [32 * MIB, 96 * MIB];

    fn chunk(logical: u64, flags: u64, phys: &[(u64, u64)]) -> BtrfsChunk {
        BtrfsChunk {
            logical,
            length: 32 * MIB,
            flags,
            stripe_len: 65536,
            sub_stripes: 1,
            stripes: phys
                .iter()
                .map(|&(devid, physical)| BtrfsStripe { devid, physical })
                .collect(),
            since_ns: 0,
        }
    }

    fn bench(extra: Vec<BtrfsChunk>) -> Bench {
        let mut b = Bench::with(btrfs_context(extra));
        b.comm(100, "writerA");
        b.comm(101, "writerB");
        b.comm(FLUSHER, "kworker/u8:0-flush-btrfs-1");
        b
    }

    /// The test context with one btrfs on loop0 (devid 1) and loop1 (devid 2).
    fn btrfs_context(extra: Vec<BtrfsChunk>) -> Context {
        let mut ctx = context();
        let mut chunks = vec![
            chunk(DATA_L, BTRFS_CHUNK_DATA, &[(1, DATA_P)]),
            chunk(
                META_L,
                BTRFS_CHUNK_METADATA | BTRFS_CHUNK_DUP,
                &[(1, META_P[0]), (1, META_P[1])],
            ),
        ];
        chunks.extend(extra);
        ctx.btrfs = vec![BtrfsFs {
            fsid: FSID,
            major: 0,
            minor: SB,
            bdi: "btrfs-1".into(),
            sector_size: 4096,
            node_size: 16384,
            devices: vec![
                BtrfsDevice {
                    devid: 1,
                    major: 7,
                    minor: 0,
                },
                BtrfsDevice {
                    devid: 2,
                    major: 7,
                    minor: 1,
                },
            ],
            chunks,
        }];
        ctx
    }

    /// [`btrfs_context`] with devid 1 on the partition `sda1` (2048 sectors into `sda`).
    fn btrfs_on_sda1() -> Context {
        let mut ctx = btrfs_context(Vec::new());
        ctx.btrfs[0].devices[0] = BtrfsDevice {
            devid: 1,
            major: 8,
            minor: 1,
        };
        ctx
    }

    /// `pid` dirties pages `[first, first + n)` of `ino` (btrfs's writeback event names the
    /// bdi `btrfs-1`; the page-cache event the superblock's device).
    fn dirty_pages(b: &mut Bench, pid: u32, ino: u64, first: u64, n: u64) {
        for i in first..first + n {
            b.push(
                pid,
                pid,
                EventKind::DirtyFolio {
                    bdi: BDI,
                    ino,
                    index: i,
                },
                Some(DIRTY_STACK),
            );
        }
    }

    fn ordered(b: &mut Bench, tid: u32, op: BtrfsOrderedOp, o: (u64, u64, u64, u64, u64)) {
        ordered_with(b, tid, None, op, o)
    }

    /// [`ordered`] with the event's kernel stack.
    fn ordered_with(
        b: &mut Bench,
        tid: u32,
        stack: Option<&[u64]>,
        op: BtrfsOrderedOp,
        o: (u64, u64, u64, u64, u64),
    ) {
        let (ino, file_offset, start, len, disk_len) = o;
        let kind = EventKind::BtrfsOrdered {
            op,
            fsid: u128::from_be_bytes(FSID),
            root: 5,
            ino,
            file_offset,
            start,
            len,
            disk_len,
            compress_type: if disk_len < len { 3 } else { 0 },
        };
        b.push(tid, tid, kind, stack);
    }

    fn file_bytes(ios: &[Io], t: &Tables, comm: &str, ino: u64) -> u64 {
        ios.iter()
            .filter(|i| {
                let act = &t.acts[i.act.index()];
                t.roles[act.role.index()].comm == comm && act.file.ino == ino && act.file.dev == SB
            })
            .map(|i| i.size)
            .sum()
    }

    #[test]
    fn data_goes_to_the_dirtiers_of_the_ordered_extent_and_tree_blocks_to_theirs_twice() {
        let mut b = bench(Vec::new());
        // A and B each dirty 32 KiB of inode 257; A dirties a 16 KiB tree block.
        dirty_pages(&mut b, 100, 257, 0, 8);
        dirty_pages(&mut b, 101, 257, 8, 8);
        dirty_pages(&mut b, 100, 1, (META_L + 65536) / 4096, 4);
        // The flusher writes the 64 KiB as one extent at logical DATA_L + 1 MiB.
        let start = DATA_L + MIB;
        ordered(
            &mut b,
            FLUSHER,
            BtrfsOrderedOp::Add,
            (257, 0, start, 65536, 65536),
        );
        let s = (DATA_P + MIB) / 512;
        b.q(FLUSHER, LOOP0, s, 128, "W");
        b.requests(LOOP0, s, 128, 128, "W");
        ordered(
            &mut b,
            FLUSHER,
            BtrfsOrderedOp::Remove,
            (257, 0, start, 65536, 65536),
        );
        // The tree block, both copies.
        for p in META_P {
            let s = (p + 65536) / 512;
            b.q(FLUSHER, LOOP0, s, 32, "WM");
            b.requests(LOOP0, s, 32, 32, "WM");
        }
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(file_bytes(&ios, t, "writerA", 257), 32768);
        assert_eq!(file_bytes(&ios, t, "writerB", 257), 32768);
        // Both copies of the tree block: A's, via page, in the btree inode.
        assert_eq!(file_bytes(&ios, t, "writerA", 1), 2 * 16384);
        assert_eq!(charged(&ios, t, "writerA", Via::Page), 32768 + 2 * 16384);
        assert_eq!(out.summary.unknown_bytes, 0);
    }

    /// A btrfs on a partition (`sda1`, 2048 sectors into `sda`): its chunk map's device
    /// bytes are the partition's, its bios name the disk's sectors. Writes are linked
    /// through the map, and a read there is charged with the filesystem's device, the one
    /// its files are named by.
    #[test]
    fn a_btrfs_on_a_partition_maps_the_disks_sectors() {
        let ctx = btrfs_on_sda1();
        let mut b = Bench::with(ctx);
        b.comm(100, "writerA");
        b.comm(FLUSHER, "kworker/u8:0-flush-btrfs-1");
        dirty_pages(&mut b, 100, 257, 0, 16);
        let start = DATA_L + MIB;
        ordered(
            &mut b,
            FLUSHER,
            BtrfsOrderedOp::Add,
            (257, 0, start, 65536, 65536),
        );
        let s = 2048 + (DATA_P + MIB) / 512;
        b.q(FLUSHER, SDA, s, 128, "W");
        b.requests(SDA, s, 128, 128, "W");
        b.q(100, SDA, s + 1024, 8, "R");
        b.requests(SDA, s + 1024, 8, 8, "R");
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(file_bytes(&ios, t, "writerA", 257), 65536);
        let read: Vec<_> = ios.iter().filter(|i| i.dir == Dir::R).collect();
        assert_eq!(read.len(), 1);
        assert_eq!(t.acts[read[0].act.index()].file.dev, SB);
        assert_eq!(out.summary.unknown_bytes, 0);
    }

    /// Kernels before 6.4 have no `iomap_dio_rw_begin`: a direct read's file comes from
    /// iomap's map, whose address btrfs gives as logical; placed through the chunk map
    /// (on a partition here), it names the file, its offset and the filesystem's device
    /// (the map names a read's file whatever made it: a plain read here).
    #[test]
    fn a_reads_logical_iomap_is_placed_through_the_chunk_map() {
        let ctx = btrfs_on_sda1();
        let mut b = Bench::with(ctx);
        b.comm(100, "readerD");
        let kind = EventKind::IomapIterDstmap {
            dev: SB,
            ino: 258,
            addr: DATA_L + 2 * MIB,
            offset: 65536,
            length: 65536,
            typ: 2,
            flags: 0,
            bdev: SDA1,
        };
        b.push(100, 100, kind, None);
        let s = 2048 + (DATA_P + 2 * MIB) / 512;
        b.q(100, SDA, s, 128, "R");
        b.requests(SDA, s, 128, 128, "R");
        let (ios, out) = b.finish();
        assert_eq!(ios.len(), 1);
        assert_eq!(ios[0].ino, Some(258));
        assert_eq!(ios[0].file_offset, Some(65536));
        let act = &out.tables.acts[ios[0].act.index()];
        assert_eq!(act.file, FileKey { dev: SB, ino: 258 });
    }

    /// Two trees writing files of one inode number within 30 s (two subvolumes, or a
    /// subvolume and a balance's relocation inode): their bytes are said shared; another
    /// number, or a write of the same number a minute later, are not.
    #[test]
    fn inode_numbers_two_subvolumes_write_together_are_counted() {
        // (root, ino, seconds later) of each extent of 64 KiB; the shared bytes.
        let shared = |extents: &[(u64, u64, u64)]| {
            let mut b = bench(Vec::new());
            for (i, &(root, ino, later)) in extents.iter().enumerate() {
                b.t += later * 1_000_000_000;
                let kind = EventKind::BtrfsOrdered {
                    op: BtrfsOrderedOp::Add,
                    fsid: u128::from_be_bytes(FSID),
                    root,
                    ino,
                    file_offset: 0,
                    start: DATA_L + i as u64 * MIB,
                    len: 65536,
                    disk_len: 65536,
                    compress_type: 0,
                };
                b.push(FLUSHER, FLUSHER, kind, None);
            }
            b.finish().1.summary.btrfs_shared_ino_bytes / 65536
        };
        let reloc = (-9i64) as u64;
        // Other numbers, or one subvolume: nothing shared.
        assert_eq!(shared(&[(256, 257, 0), (257, 258, 0), (256, 257, 0)]), 0);
        // A balance's relocation inode has numbers of its own too.
        assert_eq!(shared(&[(5, 257, 0), (reloc, 257, 1)]), 2);
        // Subvolume 257 writes number 257 too: both of 256's extents and its own, then
        // every later one of either.
        assert_eq!(shared(&[(256, 257, 0), (256, 257, 1), (257, 257, 1)]), 3);
        assert_eq!(shared(&[(256, 257, 0), (257, 257, 1), (256, 257, 1)]), 3);
        // A minute apart: not written together.
        assert_eq!(shared(&[(256, 257, 0), (257, 257, 60)]), 0);
        // A subvolume writing the number every 10 s, then another: only its extents of the
        // last 30 s are shared with it (at 30 and 40 s, and the other's at 50; the one at
        // 20 s is a few microseconds older than 30 s).
        let steady = [
            (256, 257, 0),
            (256, 257, 10),
            (256, 257, 10),
            (256, 257, 10),
            (256, 257, 10),
            (257, 257, 10),
        ];
        assert_eq!(shared(&steady), 3);
    }

    /// A chunk's device range may cover a superblock copy (64 MiB here): the copy's write
    /// (at a transaction's end, without FUA) is its issuer's journal IO, not a tree block
    /// without a dirtier.
    #[test]
    fn a_superblock_copy_inside_a_chunk_is_journal_io() {
        let mut b = bench(vec![chunk(
            META_L + 32 * MIB,
            BTRFS_CHUNK_METADATA,
            &[(1, 64 * MIB)],
        )]);
        b.comm(300, "sync");
        let s = (64 * MIB) / 512;
        b.q(300, LOOP0, s, 8, "WSM");
        b.requests(LOOP0, s, 8, 8, "WSM");
        let (ios, out) = b.finish();
        assert_eq!(ios.len(), 1);
        assert_eq!(ios[0].via, Via::Journal);
        assert_eq!(charged(&ios, &out.tables, "sync", Via::Journal), 4096);
        assert_eq!(out.summary.unknown_bytes, 0);
    }

    /// A balance copies the data it moves into the relocation tree's inode (its own
    /// numbers, 257 here as a file's): charged to the balancing task, without a file.
    #[test]
    fn relocation_extents_are_charged_without_a_file() {
        let mut b = bench(Vec::new());
        dirty_pages(&mut b, 100, 257, 0, 16);
        let kind = EventKind::BtrfsOrdered {
            op: BtrfsOrderedOp::Add,
            fsid: u128::from_be_bytes(FSID),
            root: (-9i64) as u64,
            ino: 257,
            file_offset: 0,
            start: DATA_L,
            len: 65536,
            disk_len: 65536,
            compress_type: 0,
        };
        b.push(FLUSHER, FLUSHER, kind, None);
        b.q(FLUSHER, LOOP0, DATA_P / 512, 128, "W");
        b.requests(LOOP0, DATA_P / 512, 128, 128, "W");
        let (ios, out) = b.finish();
        assert_eq!(file_bytes(&ios, &out.tables, "writerA", 0), 65536);
        assert!(ios
            .iter()
            .all(|i| i.ino.is_none() && i.file_offset.is_none()));
    }

    #[test]
    fn extents_without_a_chunk_map_are_counted_not_lost_silently() {
        // A perf.data recording: btrfs's events, no BTRFS table.
        let mut b = Bench::new();
        b.comm(100, "writerA");
        dirty_pages(&mut b, 100, 257, 0, 16);
        ordered(
            &mut b,
            77,
            BtrfsOrderedOp::Add,
            (257, 0, DATA_L, 65536, 65536),
        );
        b.q(77, LOOP0, DATA_P / 512, 128, "W");
        b.requests(LOOP0, DATA_P / 512, 128, 128, "W");
        let (_, out) = b.finish();
        assert_eq!(out.summary.btrfs_unmapped_bytes, 65536);
        assert_eq!(out.summary.btrfs_parity_bytes, 0);
    }

    #[test]
    fn a_worker_submitting_the_flushers_extent_takes_its_reason() {
        // Before 6.5 btrfs's checksum workers queue the data bios of the flusher's extents.
        let mut b = bench(Vec::new());
        dirty_pages(&mut b, 100, 257, 0, 16);
        b.wb_start(2); // WB_REASON_SYNC
        let start = DATA_L + MIB;
        ordered(
            &mut b,
            FLUSHER,
            BtrfsOrderedOp::Add,
            (257, 0, start, 65536, 65536),
        );
        let s = (DATA_P + MIB) / 512;
        b.q(88, LOOP0, s, 128, "W");
        b.requests(LOOP0, s, 128, 128, "W");
        b.wb_end();
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(file_bytes(&ios, t, "writerA", 257), 65536);
        let act = &t.acts[ios[0].act.index()];
        assert_eq!(act.reason.map(|r| r.0), Some(2), "{act:?}");
    }

    #[test]
    fn large_folios_cached_before_the_capture_are_whole_inside_an_extent() {
        // 7.x btrfs caches a file in large folios; added before the capture, their size is
        // not known: 4 folios of 64 pages, one dirty event each, one 1 MiB extent.
        let mut b = bench(Vec::new());
        for f in 0..4 {
            dirty_pages(&mut b, 100, 257, f * 64, 1);
        }
        let start = DATA_L + MIB;
        ordered(
            &mut b,
            FLUSHER,
            BtrfsOrderedOp::Add,
            (257, 0, start, MIB, MIB),
        );
        let s = (DATA_P + MIB) / 512;
        b.q(FLUSHER, LOOP0, s, 2048, "W");
        b.requests(LOOP0, s, 2048, 2048, "W");
        let (ios, out) = b.finish();
        assert_eq!(file_bytes(&ios, &out.tables, "writerA", 257), MIB);
    }

    /// A kernel stack of `btrfs_commit_transaction` (`sync`, the `btrfs-transaction`
    /// thread), with the kallsyms that names it.
    const COMMIT_STACK: &[u64] = &[0xffff_0000_0000_c010];
    /// An fsync logging into the log tree (`btrfs_log_inode`), and its log sync
    /// (`btrfs_sync_log`).
    const LOG_STACK: &[u64] = &[0xffff_0000_0000_d010];
    const LOG_SYNC_STACK: &[u64] = &[0xffff_0000_0000_e010];
    /// A direct IO write (`__iomap_dio_rw`), and a worker finishing an ordered extent
    /// (`btrfs_finish_one_ordered`).
    const DIO_STACK: &[u64] = &[0xffff_0000_0000_f010];
    const FINISH_STACK: &[u64] = &[0xffff_0000_0000_b010];
    const COMMIT_SYMS: &str = "ffff00000000c000 T btrfs_commit_transaction\n\
                               ffff00000000d000 T btrfs_log_inode\n\
                               ffff00000000e000 T btrfs_sync_log\n\
                               ffff00000000f000 T __iomap_dio_rw\n\
                               ffff00000000b000 T btrfs_finish_one_ordered\n";
    const SYNC: u32 = 300;

    fn commit_bench() -> Bench {
        let mut ctx = btrfs_context(Vec::new());
        ctx.symbols = Some(Box::new(ioblame_decode::Symbolizer::from_kallsyms(
            COMMIT_SYMS,
        )));
        let mut b = Bench::with(ctx);
        b.comm(100, "writerA");
        b.comm(101, "writerB");
        b.comm(FLUSHER, "kworker/u8:0-flush-btrfs-1");
        b.comm(SYNC, "sync");
        b
    }

    /// The committer writes `n` sectors at `sector` of loop0.
    fn commit_write(b: &mut Bench, sector: u64, n: u32) {
        stack_write(b, SYNC, COMMIT_STACK, sector, n);
    }

    /// Thread `tid` writes `n` sectors at `sector` of loop0 with `stack`.
    fn stack_write(b: &mut Bench, tid: u32, stack: &[u64], sector: u64, n: u32) {
        let kind = EventKind::BioQueue {
            dev: LOOP0,
            sector,
            nr_sector: n,
            rwbs: Rwbs::parse("WM"),
        };
        b.push(tid, tid, kind, Some(stack));
        b.requests(LOOP0, sector, n as u64, n as u64, "WM");
    }

    /// The committer dirties the tree block at logical `META_L + off`.
    fn commit_dirty(b: &mut Bench, off: u64) {
        stack_dirty(b, SYNC, COMMIT_STACK, off);
    }

    /// Thread `tid` dirties the tree block at logical `META_L + off` with `stack`.
    fn stack_dirty(b: &mut Bench, tid: u32, stack: &[u64], off: u64) {
        for i in 0..4 {
            let kind = EventKind::DirtyFolio {
                bdi: BDI,
                ino: 1,
                index: (META_L + off) / 4096 + i,
            };
            b.push(tid, tid, kind, Some(stack));
        }
    }

    /// Writes the DUP copies of the tree block at logical `META_L + off` from `tid`.
    fn write_block(b: &mut Bench, tid: u32, stack: &[u64], off: u64) {
        for p in META_P {
            stack_write(b, tid, stack, (p + off) / 512, 32);
        }
    }

    /// Two fsyncs batched into one log commit: writerA and writerB each log into a log
    /// tree block of their own; writerA's log sync writes both (each its logger's, via
    /// page), then its own block (the log root tree's) and the superblock copy, which are
    /// divided between the two loggers, half each, via journal. writerB's next fsync logs
    /// after writerA's sync changed its block: its log transaction, and its log sync, are
    /// its own alone, while writerA's sync of the first still goes to both.
    #[test]
    fn a_log_sync_is_divided_among_the_fsyncs_it_logs() {
        let mut b = commit_bench();
        stack_dirty(&mut b, 100, LOG_STACK, 65536);
        stack_dirty(&mut b, 101, LOG_STACK, 131072);
        write_block(&mut b, 100, LOG_SYNC_STACK, 65536);
        write_block(&mut b, 100, LOG_SYNC_STACK, 131072);
        stack_dirty(&mut b, 100, LOG_SYNC_STACK, 196608);
        // writerB's next fsync logs meanwhile: the next log transaction.
        stack_dirty(&mut b, 101, LOG_STACK, 262144);
        write_block(&mut b, 100, LOG_SYNC_STACK, 196608);
        stack_write(&mut b, 100, LOG_SYNC_STACK, 128, 8);
        // writerB's log sync.
        write_block(&mut b, 101, LOG_SYNC_STACK, 262144);
        stack_dirty(&mut b, 101, LOG_SYNC_STACK, 327680);
        write_block(&mut b, 101, LOG_SYNC_STACK, 327680);
        stack_write(&mut b, 101, LOG_SYNC_STACK, 128, 8);
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(charged(&ios, t, "writerA", Via::Page), 2 * 16384);
        assert_eq!(charged(&ios, t, "writerB", Via::Page), 4 * 16384);
        // writerA's sync: 32 KiB and 4 KiB, half each.
        assert_eq!(journal_of(&ios, t, "writerA"), (16384 + 2048, Some(0.5)));
        let ios_b: Vec<Io> = ios
            .iter()
            .filter(|i| t.roles[t.acts[i.act.index()].role.index()].comm == "writerB")
            .filter(|i| t.acts[i.act.index()].via == Via::Journal)
            .cloned()
            .collect();
        let txns: std::collections::BTreeSet<u32> =
            ios_b.iter().filter_map(|i| i.journal_txn).collect();
        assert_eq!(txns.len(), 2, "{txns:?}");
        let alone: u64 = ios_b
            .iter()
            .filter(|i| i.journal_share == Some(1.0))
            .map(|i| i.size)
            .sum();
        assert_eq!(alone, 2 * 16384 + 4096);
        assert_eq!(journal_of(&ios, t, "writerB").0, 16384 + 2048 + alone);
        assert_eq!(out.summary.unknown_bytes, 0);
    }

    /// A direct IO write's extent (its data charged to the writer as issuer by its direct
    /// bio, no dirty folio found for it) is its writer's: the tree block the worker finishing it dirties
    /// goes to the writer, and the extent weighs for the writer in the commit, which is
    /// the writer's alone, in two acts of half each (the extent with the write's stack, the
    /// block with the worker's); the worker keeps nothing.
    #[test]
    fn a_direct_io_writers_extent_is_its_own_in_the_commit() {
        let mut b = commit_bench();
        b.comm(77, "kworker/u8:3-btrfs-endio-write");
        let start = DATA_L + MIB;
        let o = (257, 0, start, 32768, 32768);
        ordered_with(&mut b, 100, Some(DIO_STACK), BtrfsOrderedOp::Add, o);
        // Its direct bio, from its own thread.
        let s = (DATA_P + MIB) / 512;
        let kind = EventKind::BioQueue {
            dev: LOOP0,
            sector: s,
            nr_sector: 64,
            rwbs: Rwbs::parse("WS"),
        };
        b.push(100, 100, kind, Some(DIO_STACK));
        b.requests(LOOP0, s, 64, 64, "WS");
        stack_dirty(&mut b, 77, FINISH_STACK, 65536);
        ordered_with(&mut b, 77, Some(FINISH_STACK), BtrfsOrderedOp::Remove, o);
        commit_dirty(&mut b, 131072);
        write_block(&mut b, FLUSHER, COMMIT_STACK, 65536);
        write_block(&mut b, SYNC, COMMIT_STACK, 131072);
        commit_write(&mut b, 128, 8);
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(charged(&ios, t, "writerA", Via::Direct), 32768);
        assert_eq!(charged(&ios, t, "writerA", Via::Page), 2 * 16384);
        assert_eq!(
            journal_of(&ios, t, "writerA"),
            (2 * 16384 + 4096, Some(0.5))
        );
        assert_eq!(comm_bytes(&ios, t, "kworker/u8:3-btrfs-endio-write"), 0);
        assert_eq!(comm_bytes(&ios, t, "sync"), 0);
    }

    /// A log sync that changed no block of its own (the log root tree's block was dirty
    /// already) is told by its superblock copy: written again after log blocks were
    /// dirtied, it is the running log transaction's (writerB's), not the last sync's.
    #[test]
    fn a_log_sync_without_a_block_of_its_own_is_told_by_its_superblock_copy() {
        let mut b = commit_bench();
        stack_dirty(&mut b, 100, LOG_STACK, 65536);
        write_block(&mut b, 100, LOG_SYNC_STACK, 65536);
        stack_dirty(&mut b, 100, LOG_SYNC_STACK, 196608);
        write_block(&mut b, 100, LOG_SYNC_STACK, 196608);
        stack_write(&mut b, 100, LOG_SYNC_STACK, 128, 8);
        stack_dirty(&mut b, 101, LOG_STACK, 262144);
        write_block(&mut b, 101, LOG_SYNC_STACK, 262144);
        stack_write(&mut b, 101, LOG_SYNC_STACK, 128, 8);
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(
            journal_of(&ios, t, "writerA"),
            (2 * 16384 + 4096, Some(1.0))
        );
        assert_eq!(journal_of(&ios, t, "writerB"), (4096, Some(1.0)));
    }

    /// A commit writes one superblock copy per device, each its own bio: a tree block
    /// another task dirties between the two (the next transaction's) does not make the
    /// second copy another commit's. (loop1 holds no chunk: a device just added still has
    /// its copies written.)
    #[test]
    fn a_commits_copies_on_two_devices_are_one_commits() {
        let mut b = commit_bench();
        dirty_pages(&mut b, 100, 1, (META_L + 65536) / 4096, 4);
        commit_dirty(&mut b, 131072);
        write_block(&mut b, SYNC, COMMIT_STACK, 65536);
        write_block(&mut b, SYNC, COMMIT_STACK, 131072);
        commit_write(&mut b, 128, 8);
        dirty_pages(&mut b, 101, 1, (META_L + 262144) / 4096, 4);
        let kind = EventKind::BioQueue {
            dev: LOOP1,
            sector: 128,
            nr_sector: 8,
            rwbs: Rwbs::parse("WM"),
        };
        b.push(SYNC, SYNC, kind, Some(COMMIT_STACK));
        b.requests(LOOP1, 128, 8, 8, "WM");
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(
            journal_of(&ios, t, "writerA"),
            (2 * 16384 + 2 * 4096, Some(1.0))
        );
        assert_eq!(journal_of(&ios, t, "writerB").0, 0);
    }

    /// The log tree blocks an fsync dirties weigh in its log sync, not in the transaction's
    /// commit (which drops the log trees): writerA's one tree block and its log block, and
    /// writerB's tree block, divide the commit half each.
    #[test]
    fn log_blocks_do_not_weigh_in_the_commit() {
        let mut b = commit_bench();
        dirty_pages(&mut b, 100, 1, (META_L + 65536) / 4096, 4);
        stack_dirty(&mut b, 100, LOG_STACK, 131072);
        dirty_pages(&mut b, 101, 1, (META_L + 196608) / 4096, 4);
        commit_dirty(&mut b, 262144);
        write_block(&mut b, SYNC, COMMIT_STACK, 262144);
        commit_write(&mut b, 128, 8);
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(journal_of(&ios, t, "writerA"), (16384 + 2048, Some(0.5)));
        assert_eq!(journal_of(&ios, t, "writerB"), (16384 + 2048, Some(0.5)));
    }

    fn journal_of(ios: &[Io], t: &Tables, comm: &str) -> (u64, Option<f64>) {
        let mine: Vec<&Io> = ios
            .iter()
            .filter(|i| {
                let act = &t.acts[i.act.index()];
                t.roles[act.role.index()].comm == comm && act.via == Via::Journal
            })
            .collect();
        (
            mine.iter().map(|i| i.size).sum(),
            mine.first().and_then(|i| i.journal_share),
        )
    }

    /// A transaction commit's own tree blocks (dirtied by the committer, the delayed
    /// references it runs) and its superblock copy are divided among the acts of the
    /// transaction: writerA's tree block (4 pages) and writerB's data extent (one tree
    /// block's worth) weigh the same, so each gets half, via journal, with its share; the
    /// tree block A dirtied stays A's, via page (docs/attribution.md, "btrfs").
    #[test]
    fn a_commit_is_divided_among_the_transactions_dirtiers() {
        let mut b = commit_bench();
        dirty_pages(&mut b, 100, 1, (META_L + 65536) / 4096, 4);
        dirty_pages(&mut b, 101, 257, 0, 8);
        let start = DATA_L + MIB;
        ordered(
            &mut b,
            FLUSHER,
            BtrfsOrderedOp::Add,
            (257, 0, start, 32768, 32768),
        );
        let s = (DATA_P + MIB) / 512;
        b.q(FLUSHER, LOOP0, s, 64, "W");
        b.requests(LOOP0, s, 64, 64, "W");
        ordered(
            &mut b,
            FLUSHER,
            BtrfsOrderedOp::Remove,
            (257, 0, start, 32768, 32768),
        );
        commit_dirty(&mut b, 131072);
        for p in META_P {
            commit_write(&mut b, (p + 65536) / 512, 32);
            commit_write(&mut b, (p + 131072) / 512, 32);
        }
        // The superblock copy at 64 KiB.
        commit_write(&mut b, 128, 8);
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(file_bytes(&ios, t, "writerA", 1), 2 * 16384 + 2 * 8192);
        assert_eq!(charged(&ios, t, "writerA", Via::Page), 2 * 16384);
        assert_eq!(journal_of(&ios, t, "writerA"), (2 * 8192 + 2048, Some(0.5)));
        assert_eq!(journal_of(&ios, t, "writerB"), (2 * 8192 + 2048, Some(0.5)));
        assert_eq!(comm_bytes(&ios, t, "sync"), 0);
        assert_eq!(out.summary.unknown_bytes, 0);
    }

    /// A commit whose transaction no act dirtied a tree block or an extent of (all of it
    /// the committer's own work) keeps its writes; the tree blocks dirtied after a commit
    /// began writing are the next transaction's, whose commit is theirs alone.
    #[test]
    fn a_commit_of_no_ones_transaction_is_the_committers_and_the_next_is_apart() {
        let mut b = commit_bench();
        commit_dirty(&mut b, 131072);
        for p in META_P {
            commit_write(&mut b, (p + 131072) / 512, 32);
        }
        // The next transaction: writerA's tree block, then its commit.
        dirty_pages(&mut b, 100, 1, (META_L + 65536) / 4096, 4);
        commit_dirty(&mut b, 196608);
        for p in META_P {
            commit_write(&mut b, (p + 65536) / 512, 32);
            commit_write(&mut b, (p + 196608) / 512, 32);
        }
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(charged(&ios, t, "sync", Via::Page), 2 * 16384);
        assert_eq!(journal_of(&ios, t, "sync").0, 0);
        assert_eq!(charged(&ios, t, "writerA", Via::Page), 2 * 16384);
        assert_eq!(journal_of(&ios, t, "writerA"), (2 * 16384, Some(1.0)));
    }

    /// A commit that changes no block of its own (all it changes were dirty already) is
    /// told by its superblock copies: written again after tree blocks were dirtied, they
    /// are the running transaction's, not the previous commit's.
    #[test]
    fn a_commit_without_blocks_of_its_own_is_told_by_its_superblock_copies() {
        let mut b = commit_bench();
        dirty_pages(&mut b, 100, 1, (META_L + 65536) / 4096, 4);
        commit_dirty(&mut b, 131072);
        for p in META_P {
            commit_write(&mut b, (p + 65536) / 512, 32);
            commit_write(&mut b, (p + 131072) / 512, 32);
        }
        commit_write(&mut b, 128, 8);
        // The next transaction: writerB's block, committed with nothing of the commit's.
        dirty_pages(&mut b, 101, 1, (META_L + 262144) / 4096, 4);
        for p in META_P {
            commit_write(&mut b, (p + 262144) / 512, 32);
        }
        commit_write(&mut b, 128, 8);
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(
            journal_of(&ios, t, "writerA"),
            (2 * 16384 + 4096, Some(1.0))
        );
        assert_eq!(journal_of(&ios, t, "writerB"), (4096, Some(1.0)));
        assert_eq!(charged(&ios, t, "writerB", Via::Page), 2 * 16384);
        assert_eq!(comm_bytes(&ios, t, "sync"), 0);
    }

    /// Before 6.5 btrfs's checksum workers submitted tree block writes: a commit's own
    /// blocks are told by their dirtier's stack, whoever writes them, and stay with the
    /// transaction committed even when the next one began meanwhile.
    #[test]
    fn a_commit_written_by_a_worker_stays_with_its_transaction() {
        let mut b = commit_bench();
        dirty_pages(&mut b, 100, 1, (META_L + 65536) / 4096, 4);
        commit_dirty(&mut b, 131072);
        let at = |p: u64, off: u64| (p + off) / 512;
        b.q(FLUSHER, LOOP0, at(META_P[0], 131072), 32, "WM");
        b.requests(LOOP0, at(META_P[0], 131072), 32, 32, "WM");
        // writerB's tree block: the next transaction.
        dirty_pages(&mut b, 101, 1, (META_L + 262144) / 4096, 4);
        b.q(FLUSHER, LOOP0, at(META_P[1], 131072), 32, "WM");
        b.requests(LOOP0, at(META_P[1], 131072), 32, 32, "WM");
        // Its commit.
        commit_dirty(&mut b, 196608);
        for p in META_P {
            b.q(FLUSHER, LOOP0, at(p, 196608), 32, "WM");
            b.requests(LOOP0, at(p, 196608), 32, 32, "WM");
        }
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(journal_of(&ios, t, "writerA"), (2 * 16384, Some(1.0)));
        assert_eq!(journal_of(&ios, t, "writerB"), (2 * 16384, Some(1.0)));
        assert_eq!(comm_bytes(&ios, t, "sync"), 0);
    }

    #[test]
    fn a_tree_block_written_again_goes_to_its_new_dirtier() {
        // A tree block freed and allocated again within seconds: its second write is B's.
        let mut b = bench(Vec::new());
        let index = (META_L + 65536) / 4096;
        for pid in [100, 101] {
            dirty_pages(&mut b, pid, 1, index, 4);
            for p in META_P {
                let s = (p + 65536) / 512;
                b.q(FLUSHER, LOOP0, s, 32, "WM");
                b.requests(LOOP0, s, 32, 32, "WM");
            }
        }
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(file_bytes(&ios, t, "writerA", 1), 2 * 16384);
        assert_eq!(file_bytes(&ios, t, "writerB", 1), 2 * 16384);
    }

    #[test]
    fn a_damaged_chunk_map_charges_without_panicking() {
        // Values at the ends of their ranges, as a damaged or hostile trace may hold them.
        let top = u64::MAX - 511;
        let mut wild = chunk(
            top,
            BTRFS_CHUNK_DATA | BTRFS_CHUNK_RAID0,
            &[(1, top), (2, 0)],
        );
        wild.length = top;
        wild.stripe_len = u64::MAX;
        let mut b = bench(vec![wild]);
        dirty_pages(&mut b, 100, 257, u64::MAX / 4096 - 4, 4);
        ordered(
            &mut b,
            77,
            BtrfsOrderedOp::Add,
            (257, u64::MAX - 8192, top, u64::MAX, 8192),
        );
        let s = u64::MAX / 512 - 64;
        b.q(77, LOOP0, s, 32, "W");
        b.requests(LOOP0, s, 32, 32, "W");
        b.q(77, LOOP1, 0, 32, "W");
        b.requests(LOOP1, 0, 32, 32, "W");
        // iomap maps at the ends of the logical range, on this table and the good one.
        for addr in [top, DATA_L, u64::MAX - 1] {
            let kind = EventKind::IomapIterDstmap {
                dev: SB,
                ino: 257,
                addr,
                offset: u64::MAX - 4096,
                length: u64::MAX,
                typ: 2,
                flags: 0,
                bdev: LOOP0,
            };
            b.push(77, 77, kind, None);
        }
        b.q(77, LOOP0, DATA_P / 512, 8, "R");
        b.requests(LOOP0, DATA_P / 512, 8, 8, "R");
        let _ = b.finish();
    }

    /// An iomap map over RAID0 data is placed stripe by stripe, the inverse of the chunk
    /// map's way back (`Btrfs::places` against `Chunk::logical_of`): a read of the fourth
    /// 64 KiB stripe (on loop1, its second there) names file offset 64 KiB + 3 x 64 KiB.
    #[test]
    fn an_iomap_map_over_raid0_is_placed_stripe_by_stripe() {
        let r0 = chunk(
            128 * MIB,
            BTRFS_CHUNK_DATA | BTRFS_CHUNK_RAID0,
            &[(1, 200 * MIB), (2, 300 * MIB)],
        );
        let mut b = bench(vec![r0]);
        let kind = EventKind::IomapIterDstmap {
            dev: SB,
            ino: 402,
            addr: 128 * MIB,
            offset: 65536,
            length: 262144,
            typ: 2,
            flags: 0,
            bdev: LOOP0,
        };
        b.push(100, 100, kind, None);
        let s = (300 * MIB + 65536) / 512;
        b.q(100, LOOP1, s, 128, "R");
        b.requests(LOOP1, s, 128, 128, "R");
        let (ios, _) = b.finish();
        assert_eq!(ios.len(), 1);
        assert_eq!(ios[0].ino, Some(402));
        assert_eq!(ios[0].file_offset, Some(65536 + 3 * 65536));
    }

    #[test]
    fn a_compressed_extent_is_split_among_its_dirtiers_in_proportion() {
        let mut b = bench(Vec::new());
        // 128 KiB: A the first 96 KiB, B the last 32 KiB; compressed to 16 KiB.
        dirty_pages(&mut b, 100, 300, 0, 24);
        dirty_pages(&mut b, 101, 300, 24, 8);
        let start = DATA_L + 2 * MIB;
        ordered(
            &mut b,
            77,
            BtrfsOrderedOp::Add,
            (300, 0, start, 131072, 16384),
        );
        let s = (DATA_P + 2 * MIB) / 512;
        b.q(77, LOOP0, s, 32, "W");
        b.requests(LOOP0, s, 32, 32, "W");
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(file_bytes(&ios, t, "writerA", 300), 12288);
        assert_eq!(file_bytes(&ios, t, "writerB", 300), 4096);
    }

    /// Compressed extents are made by btrfs's compression workers after a writeback pass
    /// queued them: they take the reason of the last pass over their file (here `sync`, 3),
    /// when it was recent; one made 6 s after the pass has none (docs/attribution.md,
    /// "btrfs", "Compressed extents' reason").
    #[test]
    fn a_compressed_extent_takes_the_reason_of_the_pass_over_its_file() {
        let mut b = bench(Vec::new());
        dirty_pages(&mut b, 100, 300, 0, 32);
        dirty_pages(&mut b, 100, 301, 0, 32);
        b.wb_start(3);
        for ino in [300, 301] {
            b.inode_start(FLUSHER, BDI, ino);
            b.inode_end(FLUSHER, BDI, ino);
        }
        b.wb_end();
        // The worker compresses 300's range and writes it.
        b.wait(50_000_000);
        let start = DATA_L + 2 * MIB;
        ordered(
            &mut b,
            77,
            BtrfsOrderedOp::Add,
            (300, 0, start, 131072, 16384),
        );
        let s = (DATA_P + 2 * MIB) / 512;
        b.q(77, LOOP0, s, 32, "W");
        b.requests(LOOP0, s, 32, 32, "W");
        // 301's, long after the pass: not of it.
        b.wait(6_000_000_000);
        ordered(
            &mut b,
            77,
            BtrfsOrderedOp::Add,
            (301, 0, start + MIB, 131072, 16384),
        );
        b.q(77, LOOP0, s + 2048, 32, "W");
        b.requests(LOOP0, s + 2048, 32, 32, "W");
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(file_bytes(&ios, t, "writerA", 300), 16384);
        assert_eq!(file_bytes(&ios, t, "writerA", 301), 16384);
        let reasons: Vec<(Option<u64>, Option<WbReason>)> =
            ios.iter().map(|i| (i.ino, i.reason)).collect();
        assert!(ios
            .iter()
            .filter(|i| i.ino == Some(300))
            .all(|i| i.reason == Some(WbReason(3))));
        assert!(
            ios.iter()
                .filter(|i| i.ino == Some(301))
                .all(|i| i.reason.is_none()),
            "{reasons:?}"
        );
    }

    #[test]
    fn data_dirtied_before_is_lost_with_its_file_and_raid0_maps_by_stripe() {
        // RAID0 data over loop0 and loop1 at logical 128 MiB: 64 KiB stripes alternate.
        let r0 = chunk(
            128 * MIB,
            BTRFS_CHUNK_DATA | BTRFS_CHUNK_RAID0,
            &[(1, 200 * MIB), (2, 300 * MIB)],
        );
        let mut b = bench(vec![r0]);
        // 256 KiB of inode 400 from file offset 0, by A: logical 128 MiB + [0, 256 KiB):
        // stripes 0 and 2 on loop0 at 200 MiB + [0, 128 KiB), 1 and 3 on loop1.
        dirty_pages(&mut b, 100, 400, 0, 64);
        ordered(
            &mut b,
            77,
            BtrfsOrderedOp::Add,
            (400, 0, 128 * MIB, 262144, 262144),
        );
        // loop1 first: its 128 KiB are file bytes [64K, 128K) and [192K, 256K).
        b.q(77, LOOP1, 300 * MIB / 512, 256, "W");
        b.requests(LOOP1, 300 * MIB / 512, 256, 256, "W");
        b.q(77, LOOP0, 200 * MIB / 512, 256, "W");
        b.requests(LOOP0, 200 * MIB / 512, 256, 256, "W");
        // Inode 401 dirtied before the recording: lost, with its file.
        ordered(
            &mut b,
            77,
            BtrfsOrderedOp::Add,
            (401, 0, DATA_L, 8192, 8192),
        );
        b.q(77, LOOP0, DATA_P / 512, 16, "W");
        b.requests(LOOP0, DATA_P / 512, 16, 16, "W");
        let (ios, out) = b.finish();
        let t = &out.tables;
        assert_eq!(file_bytes(&ios, t, "writerA", 400), 262144);
        let lost: u64 = ios
            .iter()
            .filter(|i| {
                let a = &t.acts[i.act.index()];
                a.intent == INTENT_LOST && a.file.ino == 401 && a.file.dev == SB
            })
            .map(|i| i.size)
            .sum();
        assert_eq!(lost, 8192);
    }
}
