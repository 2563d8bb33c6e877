//! The event registry: every tracepoint ioblame knows, one entry each.
//!
//! An entry says what the recorder does with the tracepoint (the smallest `set` that records
//! it, whether its samples carry a kernel `callchain`, its own in-kernel `filter`, the older
//! names it had, `aliases`) and how the decoder builds its typed event (`kind`: the
//! [`EventKind`](crate::event::EventKind) variant, each member with the reader and the format
//! field it comes from). Its format file, `formats/<subsystem>_<name>.format`, must declare
//! those fields (the tests check it). The recorder's sets and callchains, the `perf record`
//! command line, the decoder, the synthetic traces of the tests and the benchmark generator
//! all read this table; the attribution handles the typed events.
//!
//! Readers ([`Payload`](crate::field::Payload)'s): `u64`, `i64`, `u32`, `i32`, `u16`, `u8`
//! (integers, cut to the member's type), `rwbs` (the `char rwbs[]` flags), `bdi` (a bdi name
//! `"MAJ:MIN"` as a device), `string`. A field `"a|b"` is `a`, or `b` on kernels that call it
//! so; `"a?"` may be absent (read as 0).

use crate::entry::{builder, flag, option, reads_string, registry, Filter};
use crate::event::{BtrfsOrderedOp, CommitPhase, RaKind, WorkPhase, XfsFileOp};

/// Drops `block_dirty_buffer`'s delalloc sentinel events (blocks not mapped yet, `sector` =
/// 2^62 and above).
pub const DIRTY_BUFFER_FILTER: Filter = Filter {
    expr: "sector < 4611686018427387904",
    requires: None,
    applies_with: None,
};

/// Keeps, of `xfs_bmap_post_update`, the extents with real blocks: a delayed allocation's
/// reservation (`isnullstartblock()`: bits 17 to 51 of `startblock` set, so 2^52 - 2^17 and
/// above) maps nowhere, and buffered writes make one per write into a hole.
pub const XFS_REAL_EXTENT_FILTER: Filter = Filter {
    expr: "startblock < 4503599627239424",
    requires: None,
    applies_with: None,
};

/// Keeps only the `writeback_mark_inode_dirty` events that dirty the inode itself
/// (`I_DIRTY_SYNC`/`I_DIRTY_DATASYNC`), the only ones the attribution uses (inode writeback
/// charged to its dirtier). It drops the `I_DIRTY_PAGES` calls that come with every dirtied
/// folio, each of which would otherwise cost a kernel callchain: a third of the events of
/// small buffered writes.
///
/// The bits moved when 6.x reordered `i_state`: 0-1 before 6.12, 4-5 on 6.18 (observed), and
/// the kernels in between may number them 3-4. The filter keeps the union (bits 0, 1, 3, 4,
/// 5) so that no layout loses an inode dirtier; where `I_DIRTY_PAGES` falls inside it the
/// cost is volume, not information. (This kernel's format names the bits without values, so
/// the recorder cannot read them from tracefs.)
pub const MARK_INODE_DIRTY_FILTER: Filter = Filter {
    expr: "flags & 59",
    requires: Some("unsigned long flags"),
    applies_with: None,
};

/// Keeps, of `mm_filemap_add_to_page_cache` and `mm_filemap_delete_from_page_cache`, only
/// folios larger than one page. The attribution needs these events for the size of a folio,
/// and a folio it has seen no event for is taken as one page, which is what the filter
/// drops: nothing is lost. Small random IO adds and evicts a page per operation: on 4 KiB
/// random buffered writes these two events were 40% of everything recorded. (A one-page
/// folio of a file unlinked while dirty then leaves unseen; the analyzer forgets dirty folios
/// nobody wrote for ten minutes.) Kernels before large folios have no `order`: every folio
/// is one page, and the filter does not apply.
pub const FOLIO_ORDER_FILTER: Filter = Filter {
    expr: "order > 0",
    requires: Some("unsigned char order"),
    applies_with: None,
};

/// [`FOLIO_ORDER_FILTER`] for `mm_filemap_add_to_page_cache`, where the kernel has the
/// `readahead` group. The page-cache add fires in the reader's context just before its read
/// bios, which makes it the event that names a buffered read's file on kernels without
/// that group (5.10, 6.1 and 6.12 of Debian's builds checked). There every add is recorded:
/// the filter would drop the only file of most reads. (A one-page folio needs no size, so
/// the deletes keep their filter everywhere.)
pub const PAGE_CACHE_ADD_FILTER: Filter = Filter {
    applies_with: Some("readahead:page_cache_ra_order"),
    ..FOLIO_ORDER_FILTER
};

registry! {
    // ---- block layer ----
    "block":"block_bio_queue" {
        set: Minimal,
        callchain: true,
        kind: BioQueue {
            dev: u32 = "dev", sector: u64 = "sector", nr_sector: u32 = "nr_sector",
            rwbs: rwbs = "rwbs",
        },
    }
    "block":"block_getrq" {
        set: Minimal,
        kind: GetRq {
            dev: u32 = "dev", sector: u64 = "sector", nr_sector: u32 = "nr_sector",
            rwbs: rwbs = "rwbs",
        },
    }
    "block":"block_rq_insert" {
        set: Minimal,
        kind: RqInsert {
            dev: u32 = "dev", sector: u64 = "sector", nr_sector: u32 = "nr_sector",
            bytes: u32 = "bytes", rwbs: rwbs = "rwbs",
        },
    }
    "block":"block_rq_issue" {
        set: Minimal,
        kind: RqIssue {
            dev: u32 = "dev", sector: u64 = "sector", nr_sector: u32 = "nr_sector",
            bytes: u32 = "bytes", rwbs: rwbs = "rwbs",
        },
    }
    "block":"block_rq_complete" {
        set: Minimal,
        kind: RqComplete {
            dev: u32 = "dev", sector: u64 = "sector", nr_sector: u32 = "nr_sector",
            error: i32 = "error", rwbs: rwbs = "rwbs",
        },
    }
    "block":"block_io_start" { set: Default, }
    "block":"block_io_done" { set: Default, }
    "block":"block_bio_complete" {
        set: Minimal,
        kind: BioComplete {
            dev: u32 = "dev", sector: u64 = "sector", nr_sector: u32 = "nr_sector",
            error: i32 = "error", rwbs: rwbs = "rwbs",
        },
    }
    "block":"block_bio_backmerge" {
        set: Minimal,
        kind: BioBackmerge {
            dev: u32 = "dev", sector: u64 = "sector", nr_sector: u32 = "nr_sector",
            rwbs: rwbs = "rwbs",
        },
    }
    "block":"block_bio_frontmerge" {
        set: Minimal,
        kind: BioFrontmerge {
            dev: u32 = "dev", sector: u64 = "sector", nr_sector: u32 = "nr_sector",
            rwbs: rwbs = "rwbs",
        },
    }
    "block":"block_rq_merge" {
        set: Minimal,
        kind: RqMerge {
            dev: u32 = "dev", sector: u64 = "sector", nr_sector: u32 = "nr_sector",
            bytes: u32 = "bytes", rwbs: rwbs = "rwbs",
        },
    }
    "block":"block_split" {
        set: Minimal,
        kind: BioSplit {
            dev: u32 = "dev", sector: u64 = "sector", new_sector: u64 = "new_sector",
            rwbs: rwbs = "rwbs",
        },
    }
    "block":"block_bio_remap" {
        set: Minimal,
        kind: BioRemap {
            dev: u32 = "dev", sector: u64 = "sector", nr_sector: u32 = "nr_sector",
            old_dev: u32 = "old_dev", old_sector: u64 = "old_sector", rwbs: rwbs = "rwbs",
        },
    }
    "block":"block_dirty_buffer" {
        set: Minimal,
        callchain: true,
        stack_from_folio: true,
        filter: DIRTY_BUFFER_FILTER,
        kind: DirtyBuffer { dev: u32 = "dev", blocknr: u64 = "sector", size: u64 = "size" },
    }
    "block":"block_rq_requeue" {
        set: Minimal,
        kind: RqRequeue {
            dev: u32 = "dev", sector: u64 = "sector", nr_sector: u32 = "nr_sector",
            rwbs: rwbs = "rwbs",
        },
    }
    "block":"block_rq_error" {
        set: Default,
        kind: RqError {
            dev: u32 = "dev", sector: u64 = "sector", nr_sector: u32 = "nr_sector",
            error: i32 = "error", rwbs: rwbs = "rwbs",
        },
    }

    // ---- writeback ----
    "writeback":"writeback_dirty_folio" {
        aliases: ["writeback:writeback_dirty_page"],
        set: Minimal,
        callchain: true,
        kind: DirtyFolio { bdi: bdi = "name", ino: u64 = "ino", index: u64 = "index" },
    }
    "writeback":"writeback_mark_inode_dirty" {
        set: Default,
        callchain: true,
        filter: MARK_INODE_DIRTY_FILTER,
        kind: MarkInodeDirty {
            bdi: bdi = "name", ino: u64 = "ino", state: u64 = "state", flags: u64 = "flags",
        },
    }
    "writeback":"writeback_dirty_inode_start" {
        set: Default,
        kind: DirtyInode {
            bdi: bdi = "name", ino: u64 = "ino", state: u64 = "state", flags: u64 = "flags";
            start: true,
        },
    }
    "writeback":"writeback_dirty_inode" {
        set: Default,
        kind: DirtyInode {
            bdi: bdi = "name", ino: u64 = "ino", state: u64 = "state", flags: u64 = "flags";
            start: false,
        },
    }
    "writeback":"writeback_single_inode_start" {
        set: Minimal,
        kind: SingleInodeStart {
            bdi: bdi = "name", ino: u64 = "ino", state: u64 = "state",
            nr_to_write: i64 = "nr_to_write",
        },
    }
    "writeback":"writeback_single_inode" {
        set: Minimal,
        kind: SingleInode {
            bdi: bdi = "name", ino: u64 = "ino", state: u64 = "state",
            nr_to_write: i64 = "nr_to_write", wrote: u64 = "wrote",
        },
    }
    "writeback":"writeback_write_inode_start" {
        set: Default,
        kind: WriteInodeStart { bdi: bdi = "name", ino: u64 = "ino", sync_mode: i32 = "sync_mode" },
    }
    "writeback":"writeback_write_inode" {
        set: Default,
        kind: WriteInode { bdi: bdi = "name", ino: u64 = "ino", sync_mode: i32 = "sync_mode" },
    }
    "writeback":"writeback_queue" {
        set: Default,
        kind: WritebackWork {
            bdi: bdi = "name", sb_dev: u32 = "sb_dev", nr_pages: i64 = "nr_pages",
            sync_mode: i32 = "sync_mode", reason: u32 = "reason";
            phase: WorkPhase::Queue,
        },
    }
    "writeback":"writeback_exec" {
        set: Default,
        kind: WritebackWork {
            bdi: bdi = "name", sb_dev: u32 = "sb_dev", nr_pages: i64 = "nr_pages",
            sync_mode: i32 = "sync_mode", reason: u32 = "reason";
            phase: WorkPhase::Exec,
        },
    }
    "writeback":"writeback_start" {
        set: Minimal,
        kind: WritebackWork {
            bdi: bdi = "name", sb_dev: u32 = "sb_dev", nr_pages: i64 = "nr_pages",
            sync_mode: i32 = "sync_mode", reason: u32 = "reason";
            phase: WorkPhase::Start,
        },
    }
    "writeback":"writeback_written" {
        set: Minimal,
        kind: WritebackWork {
            bdi: bdi = "name", sb_dev: u32 = "sb_dev", nr_pages: i64 = "nr_pages",
            sync_mode: i32 = "sync_mode", reason: u32 = "reason";
            phase: WorkPhase::Written,
        },
    }
    "writeback":"wbc_writepage" { set: Default, }
    "writeback":"sb_mark_inode_writeback" {
        set: Default,
        kind: SbInodeWriteback { dev: u32 = "dev", ino: u64 = "ino"; clear: false },
    }
    "writeback":"sb_clear_inode_writeback" {
        set: Default,
        kind: SbInodeWriteback { dev: u32 = "dev", ino: u64 = "ino"; clear: true },
    }
    "writeback":"writeback_pages_written" { set: Default, }

    // ---- ext4 ----
    "ext4":"ext4_da_write_folios_start" {
        aliases: ["ext4:ext4_da_write_pages"],
        set: Default,
    }
    "ext4":"ext4_da_write_folios_end" { set: Default, }
    "ext4":"ext4_da_write_pages_extent" {
        set: Default,
        kind: Ext4DaWritePagesExtent {
            dev: u32 = "dev", ino: u64 = "ino", lblk: u64 = "lblk", len: u32 = "len",
            flags: u32 = "flags",
        },
    }
    "ext4":"ext4_ext_map_blocks_enter" { set: Default, }
    "ext4":"ext4_ext_map_blocks_exit" {
        set: Minimal,
        kind: Ext4MapBlocks {
            dev: u32 = "dev", ino: u64 = "ino", flags: u32 = "flags", pblk: u64 = "pblk",
            lblk: u64 = "lblk", len: u32 = "len", mflags: u32 = "mflags", ret: i32 = "ret",
        },
    }
    "ext4":"ext4_writepages" {
        set: Default,
        kind: Ext4Writepages { dev: u32 = "dev", ino: u64 = "ino", sync_mode: i32 = "sync_mode" },
    }
    "ext4":"ext4_writepages_result" {
        set: Default,
        kind: Ext4WritepagesResult {
            dev: u32 = "dev", ino: u64 = "ino", pages_written: i32 = "pages_written",
        },
    }
    "ext4":"ext4_sync_file_enter" {
        set: Default,
        kind: Ext4SyncFile { dev: u32 = "dev", ino: u64 = "ino"; exit: false },
    }
    "ext4":"ext4_sync_file_exit" {
        set: Default,
        kind: Ext4SyncFile { dev: u32 = "dev", ino: u64 = "ino"; exit: true },
    }

    // ---- iomap, xfs ----
    // `iomap_writepage_map` before 6.17; before 6.9 without `pos` and `dirty_len`: the
    // whole mapping (`offset`, `length`) is then the map of the folio's bytes.
    "iomap":"iomap_add_to_ioend" {
        aliases: ["iomap:iomap_writepage_map"],
        set: Minimal,
        kind: IomapAddToIoend {
            dev: u32 = "dev", ino: u64 = "ino", pos: u64 = "pos|offset",
            dirty_len: u64 = "dirty_len|length",
            addr: u64 = "addr", offset: u64 = "offset", length: u64 = "length",
            typ: u16 = "type", flags: u16 = "flags", bdev: u32 = "bdev",
        },
    }
    "iomap":"iomap_writeback_folio" {
        aliases: ["iomap:iomap_writepage"],
        set: Default,
        kind: IomapWritebackFolio {
            dev: u32 = "dev", ino: u64 = "ino", offset: u64 = "offset", length: u64 = "length",
        },
    }
    "iomap":"iomap_iter_dstmap" {
        set: Minimal,
        kind: IomapIterDstmap {
            dev: u32 = "dev", ino: u64 = "ino", addr: u64 = "addr", offset: u64 = "offset",
            length: u64 = "length", typ: u16 = "type", flags: u16 = "flags", bdev: u32 = "bdev",
        },
    }
    // Before iomap_iter (5.15; RHEL 8's backport, and Debian's 5.10, which defines
    // iomap_iter_dstmap but still maps through iomap_apply): the same map, its own entry
    // because a kernel may define both names and fire only this one.
    "iomap":"iomap_apply_dstmap" {
        set: Minimal,
        kind: IomapIterDstmap {
            dev: u32 = "dev", ino: u64 = "ino", addr: u64 = "addr", offset: u64 = "offset",
            length: u64 = "length", typ: u16 = "type", flags: u16 = "flags", bdev: u32 = "bdev",
        },
    }
    "iomap":"iomap_dio_rw_begin" {
        set: Default,
        kind: IomapDioBegin {
            dev: u32 = "dev", ino: u64 = "ino", pos: u64 = "pos", count: u64 = "count",
        },
    }
    "iomap":"iomap_dio_complete" {
        set: Default,
        kind: IomapDioComplete { dev: u32 = "dev", ino: u64 = "ino", pos: u64 = "pos" },
    }
    "iomap":"iomap_readahead" {
        set: Default,
        kind: IomapReadahead { dev: u32 = "dev", ino: u64 = "ino", nr_pages: u32 = "nr_pages" },
    }
    "iomap":"iomap_readpage" { set: Default, }
    // xfs writeback's extent lookups: maps wherever the trace has the xfs geometry (5.10
    // emits no iomap map at writeback).
    "xfs":"xfs_map_blocks_found" {
        set: Default,
        kind: XfsMapBlocks {
            dev: u32 = "dev", ino: u64 = "ino", startoff: u64 = "startoff",
            startblock: u64 = "startblock", blockcount: u64 = "blockcount",
            bmap_state: u32 = "bmap_state?",
        },
    }
    "xfs":"xfs_map_blocks_alloc" {
        set: Default,
        kind: XfsMapBlocks {
            dev: u32 = "dev", ino: u64 = "ino", startoff: u64 = "startoff",
            startblock: u64 = "startblock", blockcount: u64 = "blockcount",
            bmap_state: u32 = "bmap_state?",
        },
    }
    // An in-core extent changed: where writeback converts a delayed allocation, the real
    // extent, on the flusher just before its bios (5.10's xfs_map_blocks_alloc reports the
    // delayed one); also a direct write's allocation on its issuer. Real extents only.
    "xfs":"xfs_bmap_post_update" {
        set: Default,
        filter: XFS_REAL_EXTENT_FILTER,
        kind: XfsMapBlocks {
            dev: u32 = "dev", ino: u64 = "ino", startoff: u64 = "startoff",
            startblock: u64 = "startblock", blockcount: u64 = "blockcount",
            bmap_state: u32 = "bmap_state",
        },
    }
    "xfs":"xfs_file_buffered_write" {
        set: Default,
        kind: XfsFile {
            dev: u32 = "dev", ino: u64 = "ino", offset: u64 = "offset", count: u64 = "count";
            op: XfsFileOp::BufferedWrite,
        },
    }
    "xfs":"xfs_file_direct_write" {
        set: Default,
        kind: XfsFile {
            dev: u32 = "dev", ino: u64 = "ino", offset: u64 = "offset", count: u64 = "count";
            op: XfsFileOp::DirectWrite,
        },
    }
    "xfs":"xfs_file_direct_read" {
        set: Default,
        kind: XfsFile {
            dev: u32 = "dev", ino: u64 = "ino", offset: u64 = "offset", count: u64 = "count";
            op: XfsFileOp::DirectRead,
        },
    }
    "xfs":"xfs_file_buffered_read" {
        set: Default,
        kind: XfsFile {
            dev: u32 = "dev", ino: u64 = "ino", offset: u64 = "offset", count: u64 = "count";
            op: XfsFileOp::BufferedRead,
        },
    }
    "xfs":"xfs_buf_submit" {
        set: Default,
        kind: XfsBufSubmit {
            dev: u32 = "dev", bno: u64 = "bno", nblks: u32 = "nblks", flags: u32 = "flags",
        },
    }

    // ---- btrfs ----
    // An ordered extent: file bytes of an inode written to a logical extent (compressed or
    // not), on the thread that writes it, just before its bios; removed when its IO is done.
    // With the chunk map (the trace's BTRFS table), what links a data bio to the dirty folios.
    "btrfs":"btrfs_ordered_extent_add" {
        set: Default,
        kind: BtrfsOrdered {
            fsid: uuid = "fsid", root: u64 = "root_objectid", ino: u64 = "ino",
            file_offset: u64 = "file_offset", start: u64 = "start", len: u64 = "len",
            disk_len: u64 = "disk_len", compress_type: i32 = "compress_type";
            op: BtrfsOrderedOp::Add,
        },
    }
    "btrfs":"btrfs_ordered_extent_remove" {
        set: Default,
        kind: BtrfsOrdered {
            fsid: uuid = "fsid", root: u64 = "root_objectid", ino: u64 = "ino",
            file_offset: u64 = "file_offset", start: u64 = "start", len: u64 = "len",
            disk_len: u64 = "disk_len", compress_type: i32 = "compress_type";
            op: BtrfsOrderedOp::Remove,
        },
    }

    // ---- page cache, readahead ----
    "filemap":"mm_filemap_add_to_page_cache" {
        set: Minimal,
        filter: PAGE_CACHE_ADD_FILTER,
        kind: AddToPageCache {
            s_dev: u32 = "s_dev", ino: u64 = "i_ino", index: u64 = "index", order: u8 = "order?",
            pfn: u64 = "pfn",
        },
    }
    "filemap":"mm_filemap_delete_from_page_cache" {
        set: Default,
        filter: FOLIO_ORDER_FILTER,
        kind: DeleteFromPageCache {
            s_dev: u32 = "s_dev", ino: u64 = "i_ino", index: u64 = "index", order: u8 = "order?",
            pfn: u64 = "pfn",
        },
    }
    "readahead":"page_cache_sync_ra" {
        set: Default,
        kind: Readahead {
            s_dev: u32 = "s_dev", ino: u64 = "i_ino", index: u64 = "index", order: u32 = "order?",
            size: u32 = "size", async_size: u32 = "async_size";
            kind: RaKind::Sync,
        },
    }
    "readahead":"page_cache_async_ra" {
        set: Default,
        kind: Readahead {
            s_dev: u32 = "s_dev", ino: u64 = "i_ino", index: u64 = "index", order: u32 = "order?",
            size: u32 = "size", async_size: u32 = "async_size";
            kind: RaKind::Async,
        },
    }
    "readahead":"page_cache_ra_order" {
        set: Minimal,
        kind: Readahead {
            s_dev: u32 = "s_dev", ino: u64 = "i_ino", index: u64 = "index", order: u32 = "order?",
            size: u32 = "size", async_size: u32 = "async_size";
            kind: RaKind::Order,
        },
    }
    "readahead":"page_cache_ra_unbounded" {
        set: Default,
        kind: Readahead {
            s_dev: u32 = "s_dev", ino: u64 = "i_ino", index: u64 = "index", order: u32 = "order?",
            size: u32 = "size|nr_to_read", async_size: u32 = "async_size|lookahead_size";
            kind: RaKind::Unbounded,
        },
    }

    // ---- jbd2 ----
    "jbd2":"jbd2_start_commit" {
        set: Default,
        kind: Jbd2Commit {
            dev: u32 = "dev", transaction: u32 = "transaction";
            phase: CommitPhase::Start,
        },
    }
    "jbd2":"jbd2_commit_flushing" {
        set: Default,
        kind: Jbd2Commit {
            dev: u32 = "dev", transaction: u32 = "transaction";
            phase: CommitPhase::Flushing,
        },
    }
    "jbd2":"jbd2_commit_logging" {
        set: Default,
        kind: Jbd2Commit {
            dev: u32 = "dev", transaction: u32 = "transaction";
            phase: CommitPhase::Logging,
        },
    }
    "jbd2":"jbd2_end_commit" {
        set: Default,
        kind: Jbd2Commit {
            dev: u32 = "dev", transaction: u32 = "transaction";
            phase: CommitPhase::End,
        },
    }
    "jbd2":"jbd2_submit_inode_data" {
        set: Default,
        kind: Jbd2SubmitInodeData { dev: u32 = "dev", ino: u64 = "ino" },
    }
    "jbd2":"jbd2_write_superblock" { set: Default, }
    "jbd2":"jbd2_handle_start" {
        set: Default,
        callchain: true,
        kind: Jbd2HandleStart {
            dev: u32 = "dev", tid: u32 = "tid", requested_blocks: i32 = "requested_blocks",
        },
    }
    "jbd2":"jbd2_handle_stats" {
        set: Default,
        kind: Jbd2HandleStats {
            dev: u32 = "dev", tid: u32 = "tid", requested_blocks: i32 = "requested_blocks",
            dirtied_blocks: i32 = "dirtied_blocks",
        },
    }

    // ---- tasks ----
    "sched":"sched_process_exec" {
        set: Default,
        kind: SchedExec {
            pid: u32 = "pid", old_pid: u32 = "old_pid", filename: string = "filename",
        },
    }
    "sched":"sched_process_fork" {
        set: Default,
        kind: SchedFork {
            parent_pid: u32 = "parent_pid", child_pid: u32 = "child_pid",
            child_comm: string = "child_comm",
        },
    }
    "sched":"sched_process_exit" {
        set: Default,
        kind: SchedExit { pid: u32 = "pid", comm: string = "comm" },
    }

    // ---- throttlers: name a waiting IO's idle time (docs/latency.md, "Blame") ----
    // Per device, a few a second while they act: writeback throttling's window timer (it
    // runs while wbt tracks writes on the device) and iocost's period (while any cgroup is
    // active on a device where iocost is enabled), with its cgroups' activations.
    "wbt":"wbt_timer" {
        set: Default,
        kind: Wbt { bdi: bdi = "name", inflight: u32 = "inflight" },
    }
    "iocost":"iocost_ioc_vrate_adj" {
        set: Default,
        kind: Iocost { disk: string = "devname" },
    }
    "iocost":"iocost_iocg_activate" {
        set: Default,
        kind: Iocost { disk: string = "devname" },
    }

    // ---- recorded by the full set only: per write call, page faults, plugging ----
    "ext4":"ext4_da_write_begin" {
        set: Full,
        kind: Ext4WriteBegin {
            dev: u32 = "dev", ino: u64 = "ino", pos: u64 = "pos", len: u32 = "len",
        },
    }
    "ext4":"ext4_da_write_end" { set: Full, }
    "iomap":"iomap_iter" { set: Full, }
    "filemap":"mm_filemap_fault" {
        set: Full,
        kind: FilemapFault { s_dev: u32 = "s_dev", ino: u64 = "i_ino", index: u64 = "index" },
    }
    "block":"block_plug" { set: Full, }
    "block":"block_unplug" { set: Full, }

    // ---- in no set: decoded when recorded by name ----
    "ext4":"ext4_write_begin" {
        kind: Ext4WriteBegin {
            dev: u32 = "dev", ino: u64 = "ino", pos: u64 = "pos", len: u32 = "len",
        },
    }
    "ext4":"ext4_ind_map_blocks_exit" {
        kind: Ext4MapBlocks {
            dev: u32 = "dev", ino: u64 = "ino", flags: u32 = "flags", pblk: u64 = "pblk",
            lblk: u64 = "lblk", len: u32 = "len", mflags: u32 = "mflags", ret: i32 = "ret",
        },
    }
}
