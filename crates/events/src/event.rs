//! Typed events: what the attribution consumes.
//!
//! Every field comes from the trace's own tracefs `format` text (looked up by name, as the
//! registry's entry for the tracepoint declares in [`crate::table`]), so a trace from another
//! kernel whose fields moved still decodes to the same types.

use std::sync::Arc;

/// A kernel device number in the kernel's internal encoding, `major << 20 | minor`, as
/// tracepoint payloads carry it.
pub type Dev = u32;

/// Major number of a kernel-encoded device.
pub fn dev_major(d: Dev) -> u32 {
    d >> 20
}

/// Minor number of a kernel-encoded device.
pub fn dev_minor(d: Dev) -> u32 {
    d & 0xfffff
}

/// Parses a bdi name `"MAJ:MIN"` into a kernel dev (`major << 20 | minor`); a name
/// `"TYPE-N"` (btrfs's `btrfs-1`) into [`BDI_SEQ_MAJOR`]` << 20 | N` ([`parse_bdi_seq`]); 0
/// for anything else.
pub fn parse_bdi(name: &[u8]) -> Dev {
    fn num(b: &[u8]) -> Option<u32> {
        if b.is_empty() || b.len() > 7 || !b.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(b.iter().fold(0u32, |a, &c| a * 10 + (c - b'0') as u32))
    }
    let Some(colon) = name.iter().position(|&c| c == b':') else {
        return parse_bdi_seq(name);
    };
    match (num(&name[..colon]), num(&name[colon + 1..])) {
        (Some(ma), Some(mi)) if ma < (1 << 12) && mi < (1 << 20) => (ma << 20) | mi,
        _ => 0,
    }
}

/// The `rwbs` string of block events, as flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Rwbs(pub u16);

impl Rwbs {
    /// `W`: a write.
    pub const WRITE: u16 = 1 << 0;
    /// `R`: a read.
    pub const READ: u16 = 1 << 1;
    /// `D`: a discard.
    pub const DISCARD: u16 = 1 << 2;
    /// `E` after `D`: secure erase.
    pub const SECURE: u16 = 1 << 3;
    /// `F` as the op: a flush request.
    pub const FLUSH: u16 = 1 << 4;
    /// `N`: another op.
    pub const OTHER: u16 = 1 << 5;
    /// Leading `F`: preflush.
    pub const PREFLUSH: u16 = 1 << 6;
    /// `F` after the op: FUA.
    pub const FUA: u16 = 1 << 7;
    /// `A`: readahead.
    pub const AHEAD: u16 = 1 << 8;
    /// `S`: synchronous.
    pub const SYNC: u16 = 1 << 9;
    /// `M`: metadata.
    pub const META: u16 = 1 << 10;
    /// `U`: atomic.
    pub const ATOMIC: u16 = 1 << 11;

    /// Parses the text form (`"WS"`, `"FWFSM"`, `"RA"`, ...).
    pub fn parse(s: &str) -> Rwbs {
        Self::parse_bytes(s.as_bytes())
    }

    /// Parses the text form as a tracepoint's `char rwbs[8]` holds it: up to the first NUL.
    /// Bytes that are no flag letter are ignored.
    pub fn parse_bytes(b: &[u8]) -> Rwbs {
        let b = b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n]);
        let mut bits = 0u16;
        let mut i = 0;
        // A leading F followed by an op letter is a preflush.
        if b.len() >= 2 && b[0] == b'F' && matches!(b[1], b'W' | b'R' | b'D' | b'F' | b'N') {
            bits |= Self::PREFLUSH;
            i = 1;
        }
        if let Some(&op) = b.get(i) {
            i += 1;
            match op {
                b'W' => bits |= Self::WRITE,
                b'R' => bits |= Self::READ,
                b'D' => {
                    bits |= Self::DISCARD;
                    if b.get(i) == Some(&b'E') {
                        bits |= Self::SECURE;
                        i += 1;
                    }
                }
                b'F' => bits |= Self::FLUSH,
                b'N' => bits |= Self::OTHER,
                _ => i -= 1,
            }
        }
        for &c in &b[i.min(b.len())..] {
            bits |= match c {
                b'F' => Self::FUA,
                b'A' => Self::AHEAD,
                b'S' => Self::SYNC,
                b'M' => Self::META,
                b'U' => Self::ATOMIC,
                _ => 0,
            };
        }
        Rwbs(bits)
    }
    /// Whether a flag is set.
    pub fn has(self, flag: u16) -> bool {
        self.0 & flag != 0
    }
    /// A write.
    pub fn is_write(self) -> bool {
        self.has(Self::WRITE)
    }
    /// A read.
    pub fn is_read(self) -> bool {
        self.has(Self::READ)
    }
}

impl std::fmt::Display for Rwbs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = String::new();
        if self.has(Self::PREFLUSH) {
            s.push('F');
        }
        if self.has(Self::WRITE) {
            s.push('W');
        } else if self.has(Self::READ) {
            s.push('R');
        } else if self.has(Self::DISCARD) {
            s.push('D');
            if self.has(Self::SECURE) {
                s.push('E');
            }
        } else if self.has(Self::FLUSH) {
            s.push('F');
        } else if self.has(Self::OTHER) {
            s.push('N');
        }
        for (flag, c) in [
            (Self::FUA, 'F'),
            (Self::AHEAD, 'A'),
            (Self::SYNC, 'S'),
            (Self::META, 'M'),
            (Self::ATOMIC, 'U'),
        ] {
            if self.has(flag) {
                s.push(c);
            }
        }
        f.write_str(&s)
    }
}

/// Phase of a writeback work item (`writeback_queue`, `_exec`, `_start`, `_written`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkPhase {
    /// `writeback:writeback_queue` (requester's context).
    Queue,
    /// `writeback:writeback_exec`.
    Exec,
    /// `writeback:writeback_start` (flusher).
    Start,
    /// `writeback:writeback_written` (flusher).
    Written,
}

/// Which readahead tracepoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RaKind {
    /// `readahead:page_cache_sync_ra`.
    Sync,
    /// `readahead:page_cache_async_ra`.
    Async,
    /// `readahead:page_cache_ra_order`.
    Order,
    /// `readahead:page_cache_ra_unbounded`.
    Unbounded,
}

/// Which jbd2 commit tracepoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommitPhase {
    /// `jbd2:jbd2_start_commit`.
    Start,
    /// `jbd2:jbd2_commit_flushing`.
    Flushing,
    /// `jbd2:jbd2_commit_logging`.
    Logging,
    /// `jbd2:jbd2_end_commit`.
    End,
}

/// Which xfs file operation tracepoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum XfsFileOp {
    /// `xfs:xfs_file_buffered_write`.
    BufferedWrite,
    /// `xfs:xfs_file_buffered_read`.
    BufferedRead,
    /// `xfs:xfs_file_direct_write`.
    DirectWrite,
    /// `xfs:xfs_file_direct_read`.
    DirectRead,
}

/// Which btrfs ordered extent tracepoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BtrfsOrderedOp {
    /// `btrfs:btrfs_ordered_extent_add`: the extent is about to be written.
    Add,
    /// `btrfs:btrfs_ordered_extent_remove`: its IO is done.
    Remove,
}

/// Parses a bdi name `"TYPE-N"` (`super_setup_bdi()`'s name for filesystems without a block
/// device of their own: btrfs's `btrfs-1`) into [`BDI_SEQ_MAJOR`]` << 20 | N`; 0 otherwise.
pub fn parse_bdi_seq(name: &[u8]) -> Dev {
    let Some(dash) = name.iter().rposition(|&c| c == b'-') else {
        return 0;
    };
    let (ty, n) = (&name[..dash], &name[dash + 1..]);
    if ty.is_empty() || n.is_empty() || n.len() > 6 || !n.iter().all(u8::is_ascii_digit) {
        return 0;
    }
    let n = n.iter().fold(0u32, |a, &c| a * 10 + (c - b'0') as u32);
    if n >= 1 << 20 {
        return 0;
    }
    (BDI_SEQ_MAJOR << 20) | n
}

/// The major number [`parse_bdi`] gives a bdi named `"TYPE-N"` (btrfs's): no block device has
/// it (majors stop at 4095 and the kernel hands out dynamic ones from 254 and 511 down), so
/// the attribution can tell it from a disk and look the filesystem up by `N`.
pub const BDI_SEQ_MAJOR: u32 = 0xfff;

/// The typed content of one decoded record.
///
/// Units are those of the kernel: block `sector`s are 512-byte units; `DirtyBuffer::blocknr`
/// is in units of `size`; ext4 `pblk` and `lblk` are filesystem blocks; iomap `addr`, `pos`,
/// `offset`, `length` are bytes; page `index`es are pages. `bdi` is the whole-disk device
/// parsed from the bdi name `"MAJ:MIN"`, or `BDI_SEQ_MAJOR << 20 | N` for a name `TYPE-N` (btrfs's
/// `btrfs-1`), 0 for another name.
///
/// A tracepoint's variant is built by its registry entry ([`crate::table`]), which names
/// the format field each member is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[allow(missing_docs)] // fields are the tracepoint's own, named as in its format file
pub enum EventKind {
    // ---- block layer ----
    /// `block:block_bio_queue` (Q), in the issuer's context.
    BioQueue {
        dev: Dev,
        sector: u64,
        nr_sector: u32,
        rwbs: Rwbs,
    },
    /// `block:block_bio_backmerge` (M).
    BioBackmerge {
        dev: Dev,
        sector: u64,
        nr_sector: u32,
        rwbs: Rwbs,
    },
    /// `block:block_bio_frontmerge` (F).
    BioFrontmerge {
        dev: Dev,
        sector: u64,
        nr_sector: u32,
        rwbs: Rwbs,
    },
    /// `block:block_split` (X): the bio at `sector` is cut at `new_sector`.
    BioSplit {
        dev: Dev,
        sector: u64,
        new_sector: u64,
        rwbs: Rwbs,
    },
    /// `block:block_bio_remap` (A).
    BioRemap {
        dev: Dev,
        sector: u64,
        nr_sector: u32,
        old_dev: Dev,
        old_sector: u64,
        rwbs: Rwbs,
    },
    /// `block:block_bio_complete` (bio-based drivers only).
    BioComplete {
        dev: Dev,
        sector: u64,
        nr_sector: u32,
        error: i32,
        rwbs: Rwbs,
    },
    /// `block:block_getrq` (G).
    GetRq {
        dev: Dev,
        sector: u64,
        nr_sector: u32,
        rwbs: Rwbs,
    },
    /// `block:block_rq_insert` (I).
    RqInsert {
        dev: Dev,
        sector: u64,
        nr_sector: u32,
        bytes: u32,
        rwbs: Rwbs,
    },
    /// `block:block_rq_issue` (D).
    RqIssue {
        dev: Dev,
        sector: u64,
        nr_sector: u32,
        bytes: u32,
        rwbs: Rwbs,
    },
    /// `block:block_rq_merge`.
    RqMerge {
        dev: Dev,
        sector: u64,
        nr_sector: u32,
        bytes: u32,
        rwbs: Rwbs,
    },
    /// `block:block_rq_requeue` (R).
    RqRequeue {
        dev: Dev,
        sector: u64,
        nr_sector: u32,
        rwbs: Rwbs,
    },
    /// `block:block_rq_complete` (C); irq context, the task is meaningless.
    RqComplete {
        dev: Dev,
        sector: u64,
        nr_sector: u32,
        error: i32,
        rwbs: Rwbs,
    },
    /// `block:block_rq_error`.
    RqError {
        dev: Dev,
        sector: u64,
        nr_sector: u32,
        error: i32,
        rwbs: Rwbs,
    },
    /// `wbt:wbt_timer`: writeback throttling's window timer on the disk `bdi` ("MAJ:MIN"),
    /// which runs while wbt tracks writes there (`inflight`: the writes it counts).
    Wbt { bdi: Dev, inflight: u32 },
    /// `iocost:iocost_ioc_vrate_adj` (iocost's period on `disk`, while a cgroup is active
    /// there) or `iocost:iocost_iocg_activate` (a cgroup became active on `disk`): iocost
    /// acts on the disk named `disk` (its kernel name, `nvme0n1`).
    Iocost { disk: String },
    /// `block:block_dirty_buffer`: a buffer_head dirtied, in the dirtier's context.
    /// `blocknr` is in units of `size` (not sectors); delalloc sentinels (>= 2^62) are kept
    /// as they are for the attribution to skip.
    DirtyBuffer { dev: Dev, blocknr: u64, size: u64 },

    // ---- writeback ----
    /// `writeback:writeback_dirty_folio` (or `writeback_dirty_page` on older kernels): a
    /// folio went clean->dirty, in the dirtier's context.
    DirtyFolio { bdi: Dev, ino: u64, index: u64 },
    /// `writeback:writeback_mark_inode_dirty` (`flags` are the I_DIRTY_* being set).
    MarkInodeDirty {
        bdi: Dev,
        ino: u64,
        state: u64,
        flags: u64,
    },
    /// `writeback:writeback_dirty_inode_start` / `writeback_dirty_inode`.
    DirtyInode {
        bdi: Dev,
        ino: u64,
        state: u64,
        flags: u64,
        start: bool,
    },
    /// `writeback:writeback_single_inode_start`: the flusher starts writing `ino`.
    SingleInodeStart {
        bdi: Dev,
        ino: u64,
        state: u64,
        nr_to_write: i64,
    },
    /// `writeback:writeback_single_inode`: the flusher is done with `ino`.
    SingleInode {
        bdi: Dev,
        ino: u64,
        state: u64,
        nr_to_write: i64,
        wrote: u64,
    },
    /// `writeback:writeback_write_inode_start`: the inode itself is about to be written.
    WriteInodeStart { bdi: Dev, ino: u64, sync_mode: i32 },
    /// `writeback:writeback_write_inode`.
    WriteInode { bdi: Dev, ino: u64, sync_mode: i32 },
    /// `writeback:writeback_queue/_exec/_start/_written`. `reason` is the kernel's
    /// `enum wb_reason` (0 background, 1 vmscan, 2 sync, 3 periodic, 4 laptop_timer,
    /// 5 fs_free_space, 6 forker_thread, 7 foreign_flush).
    WritebackWork {
        phase: WorkPhase,
        bdi: Dev,
        sb_dev: Dev,
        nr_pages: i64,
        sync_mode: i32,
        reason: u32,
    },
    /// `writeback:sb_mark_inode_writeback` (`clear == false`) / `sb_clear_inode_writeback`.
    SbInodeWriteback { dev: Dev, ino: u64, clear: bool },

    // ---- page cache ----
    /// `filemap:mm_filemap_add_to_page_cache`: a folio of `1 << order` pages entered the cache.
    AddToPageCache {
        s_dev: Dev,
        ino: u64,
        index: u64,
        order: u8,
        pfn: u64,
    },
    /// `filemap:mm_filemap_delete_from_page_cache`.
    DeleteFromPageCache {
        s_dev: Dev,
        ino: u64,
        index: u64,
        order: u8,
        pfn: u64,
    },
    /// `filemap:mm_filemap_fault`.
    FilemapFault { s_dev: Dev, ino: u64, index: u64 },
    /// `readahead:page_cache_*`: readahead of `size` pages from `index`.
    Readahead {
        kind: RaKind,
        s_dev: Dev,
        ino: u64,
        index: u64,
        order: u32,
        size: u32,
        async_size: u32,
    },

    // ---- ext4 ----
    /// `ext4:ext4_da_write_begin` / `ext4_write_begin` (`pos` and `len` in bytes).
    Ext4WriteBegin {
        dev: Dev,
        ino: u64,
        pos: u64,
        len: u32,
    },
    /// `ext4:ext4_ext_map_blocks_exit` (also `ext4_ind_map_blocks_exit`): `lblk -> pblk` for
    /// `len` blocks; `ret > 0` when mapped.
    Ext4MapBlocks {
        dev: Dev,
        ino: u64,
        flags: u32,
        pblk: u64,
        lblk: u64,
        len: u32,
        mflags: u32,
        ret: i32,
    },
    /// `ext4:ext4_da_write_pages_extent`.
    Ext4DaWritePagesExtent {
        dev: Dev,
        ino: u64,
        lblk: u64,
        len: u32,
        flags: u32,
    },
    /// `ext4:ext4_writepages`.
    Ext4Writepages { dev: Dev, ino: u64, sync_mode: i32 },
    /// `ext4:ext4_writepages_result`.
    Ext4WritepagesResult {
        dev: Dev,
        ino: u64,
        pages_written: i32,
    },
    /// `ext4:ext4_sync_file_enter` (`exit == false`) / `ext4_sync_file_exit`.
    Ext4SyncFile { dev: Dev, ino: u64, exit: bool },

    // ---- iomap / xfs ----
    /// `iomap:iomap_add_to_ioend`: file bytes `[pos, pos+dirty_len)` go to disk byte
    /// `addr + (pos - offset)` of `bdev`.
    IomapAddToIoend {
        dev: Dev,
        ino: u64,
        pos: u64,
        dirty_len: u64,
        addr: u64,
        offset: u64,
        length: u64,
        typ: u16,
        flags: u16,
        bdev: Dev,
    },
    /// `iomap:iomap_writeback_folio`.
    IomapWritebackFolio {
        dev: Dev,
        ino: u64,
        offset: u64,
        length: u64,
    },
    /// `iomap:iomap_iter_dstmap`: mapping of file bytes `[offset, offset+length)` to disk byte
    /// `addr` of `bdev` (direct IO and others).
    IomapIterDstmap {
        dev: Dev,
        ino: u64,
        addr: u64,
        offset: u64,
        length: u64,
        typ: u16,
        flags: u16,
        bdev: Dev,
    },
    /// `iomap:iomap_dio_rw_begin`: a direct IO of `count` bytes at `pos` starts.
    IomapDioBegin {
        dev: Dev,
        ino: u64,
        pos: u64,
        count: u64,
    },
    /// `iomap:iomap_dio_complete`.
    IomapDioComplete { dev: Dev, ino: u64, pos: u64 },
    /// `iomap:iomap_readahead`.
    IomapReadahead { dev: Dev, ino: u64, nr_pages: u32 },
    /// `xfs:xfs_file_*` read/write entry points.
    XfsFile {
        op: XfsFileOp,
        dev: Dev,
        ino: u64,
        offset: u64,
        count: u64,
    },
    /// `xfs:xfs_map_blocks_found` / `_alloc`, `xfs_bmap_post_update`: xfs maps file blocks
    /// `startoff..` (filesystem blocks) to xfs block `startblock` (`xfs_fsblock_t`:
    /// allocation group in the high bits), `blockcount` of them, on the issuing thread just
    /// before its bios (writeback's lookup, or the extent an allocation just made real).
    XfsMapBlocks {
        dev: Dev,
        ino: u64,
        startoff: u64,
        startblock: u64,
        blockcount: u64,
        /// `xfs_bmap_post_update`'s `bmap_state` (`BMAP_ATTRFORK` 0x100: an extended
        /// attribute's extent, not file data); 0 for the others.
        bmap_state: u32,
    },
    /// `btrfs:btrfs_ordered_extent_add` / `_remove`: file bytes `[file_offset, + len)` of
    /// inode `ino` of subvolume `root` of the btrfs filesystem `fsid` are written to logical
    /// bytes `[start, + disk_len)` (fewer than `len` when compressed: `compress_type` not 0),
    /// on the issuing thread just before its bios (add), or their IO is done (remove).
    BtrfsOrdered {
        op: BtrfsOrderedOp,
        fsid: u128,
        root: u64,
        ino: u64,
        file_offset: u64,
        start: u64,
        len: u64,
        disk_len: u64,
        compress_type: i32,
    },
    /// `xfs:xfs_buf_submit`: metadata buffer IO of `nblks` sectors at sector `bno`.
    XfsBufSubmit {
        dev: Dev,
        bno: u64,
        nblks: u32,
        flags: u32,
    },

    // ---- jbd2 ----
    /// `jbd2:jbd2_handle_start`: a handle joins transaction `tid`.
    Jbd2HandleStart {
        dev: Dev,
        tid: u32,
        requested_blocks: i32,
    },
    /// `jbd2:jbd2_handle_stats`: a handle of transaction `tid` stops (`jbd2_journal_stop`,
    /// in the task that started it (for a reserved handle, the one that used it), having
    /// added `dirtied_blocks` blocks to the transaction (those it dirtied first there).
    Jbd2HandleStats {
        dev: Dev,
        tid: u32,
        requested_blocks: i32,
        dirtied_blocks: i32,
    },
    /// `jbd2:jbd2_start_commit` ... `jbd2_end_commit`.
    Jbd2Commit {
        phase: CommitPhase,
        dev: Dev,
        transaction: u32,
    },
    /// `jbd2:jbd2_submit_inode_data`.
    Jbd2SubmitInodeData { dev: Dev, ino: u64 },

    // ---- tasks ----
    /// `sched:sched_process_exec` tracepoint.
    SchedExec {
        pid: u32,
        old_pid: u32,
        filename: String,
    },
    /// `sched:sched_process_fork` tracepoint.
    SchedFork {
        parent_pid: u32,
        child_pid: u32,
        child_comm: String,
    },
    /// `sched:sched_process_exit` tracepoint.
    SchedExit { pid: u32, comm: String },
    /// PERF_RECORD_COMM: task `tid` of process `pid` is now called `comm` (`exec`: by exec).
    Comm {
        pid: u32,
        tid: u32,
        comm: String,
        exec: bool,
    },
    /// PERF_RECORD_FORK.
    Fork {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
    },
    /// PERF_RECORD_EXIT.
    Exit {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
    },

    /// PERF_RECORD_MMAP2 (or MMAP): process `pid` mapped `[start, start + len)` of a file
    /// from byte `pgoff` on, executable (recorded with `--user-stacks`: the mappings that
    /// name its user frames). `build_id` is the file's when the kernel gave it (5.12+,
    /// `PERF_RECORD_MISC_MMAP_BUILD_ID`; then `dev` and `ino` are 0), otherwise empty.
    Mmap {
        pid: u32,
        start: u64,
        len: u64,
        pgoff: u64,
        dev: Dev,
        ino: u64,
        build_id: Vec<u8>,
        path: String,
    },

    // ---- accounting ----
    /// PERF_RECORD_LOST / PERF_RECORD_LOST_SAMPLES: the kernel dropped `lost` records here.
    Lost { lost: u64 },
    /// A sample of a recorded tracepoint that has no typed form (index into the trace's
    /// event table).
    Other { event: u16 },
}

/// One decoded record: when, where, who, what, and the kernel stack if recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Perf timestamp (ns, the trace's clock).
    pub time: u64,
    /// CPU whose ring held the record.
    pub cpu: u32,
    /// Process id of the task the record was taken in (for samples: the task running).
    pub pid: u32,
    /// Thread id of that task.
    pub tid: u32,
    /// What happened.
    pub kind: EventKind,
    /// Kernel callchain, innermost first, with perf context markers removed; then, when the
    /// event was recorded with user stacks (`--user-stacks`) and had user frames,
    /// [`USER_MARK`] and the user return addresses, innermost first ([`kernel_frames`],
    /// [`user_frames`]). `None` when the event was recorded without callchains. Shared: the events one decoding thread finds
    /// with the same stack hold the same allocation (compare with [`Arc::ptr_eq`] first).
    pub stack: Option<Arc<[u64]>>,
    /// The id of the task's cgroup in the cgroup2 hierarchy (`PERF_SAMPLE_CGROUP`, recorded
    /// on the stack events since format 1.3); 0 when not recorded.
    pub cgroup: u64,
    /// A copy of the top of the task's user stack with the registers that unwind it
    /// (`--user-stacks dwarf`, `perf record --call-graph dwarf`), until the attribution
    /// unwinds it into user frames of [`Event::stack`]; `None` without.
    pub stack_copy: Option<Arc<StackCopy>>,
}

/// A copy of the top of a user stack, taken with a sample (`PERF_SAMPLE_STACK_USER`), and
/// the user registers a CFI unwinder starts from (`PERF_SAMPLE_REGS_USER`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StackCopy {
    /// The user instruction pointer.
    pub ip: u64,
    /// The user stack pointer: the address of the copy's first byte.
    pub sp: u64,
    /// The frame pointer (x86's `rbp`, arm64's `x29`).
    pub fp: u64,
    /// arm64's link register (0 on x86).
    pub lr: u64,
    /// The stack's bytes from `sp` up.
    pub bytes: Box<[u8]>,
    /// The kernel copied all it was asked for (`dyn_size` = `size`): the stack may go on
    /// above the copy. Otherwise the copy ends where the stack's mapping does.
    pub full: bool,
}

impl Event {
    /// An event of task `tid` (its own process, on CPU 0) at `time`, with no stack and no
    /// cgroup: what synthetic event sequences (the tests of the engines that read events)
    /// are made of.
    pub fn of_task(time: u64, tid: u32, kind: EventKind) -> Event {
        Event {
            time,
            cpu: 0,
            pid: tid,
            tid,
            kind,
            stack: None,
            cgroup: 0,
            stack_copy: None,
        }
    }
}

/// Separates the kernel frames of [`Event::stack`] from the user frames after them: perf's
/// `PERF_CONTEXT_USER`, never a return address.
pub const USER_MARK: u64 = ioblame_perfrec::CONTEXT_USER;

/// The kernel frames of a stack: those before [`USER_MARK`].
pub fn kernel_frames(stack: &[u64]) -> &[u64] {
    match stack.iter().position(|&a| a == USER_MARK) {
        Some(i) => &stack[..i],
        None => stack,
    }
}

/// The user frames of a stack: those after [`USER_MARK`] (none without it).
pub fn user_frames(stack: &[u64]) -> &[u64] {
    match stack.iter().position(|&a| a == USER_MARK) {
        Some(i) => &stack[i + 1..],
        None => &[],
    }
}

/// ioblame's numbering of the writeback reasons (`WritebackWork::reason`): the index of the
/// kernel's name in this list. It is the kernel's own `enum wb_reason` from 4.20 on; older
/// kernels (RHEL 8's 4.18) number them differently, with `free_more_mem` at 5, and a trace's
/// raw numbers are translated by name through its own print fmt (`ioblame_decode`). A
/// reason of another name is [`WB_REASON_OTHER`].
pub const WB_REASON_NAMES: [&str; 9] = [
    "background",
    "vmscan",
    "sync",
    "periodic",
    "laptop_timer",
    "fs_free_space",
    "forker_thread",
    "foreign_flush",
    "free_more_mem",
];

/// A writeback reason not in [`WB_REASON_NAMES`].
pub const WB_REASON_OTHER: u32 = WB_REASON_NAMES.len() as u32;
