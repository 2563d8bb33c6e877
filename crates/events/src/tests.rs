//! The registry against the lists it replaced, and against its format files.

use std::collections::BTreeSet;

use crate::registry::{find, typed_names, Set, CALLCHAIN_EVENTS, RENAMES};
use crate::table::{builtin_format, EVENTS};

// The lists the registry replaced, as they were (`ioblame-tracepoints`' sets, callchain
// events and renames; the typed events of `ioblame-decode`'s `SPECS` and the fields each
// read, `$` marking a string): the registry derives the same. The sets, callchains, renames
// and filters are what users record: a change to them is deliberate, and updates these
// lists with it.
const BLK: &[&str] = &[
    "block:block_bio_queue",
    "block:block_getrq",
    "block:block_rq_insert",
    "block:block_rq_issue",
    "block:block_rq_complete",
    "block:block_io_start",
    "block:block_io_done",
    "block:block_bio_complete",
    "block:block_bio_backmerge",
    "block:block_bio_frontmerge",
    "block:block_rq_merge",
    "block:block_split",
    "block:block_bio_remap",
    "block:block_dirty_buffer",
    "block:block_rq_requeue",
    "block:block_rq_error",
];
const WB: &[&str] = &[
    "writeback:writeback_dirty_folio",
    "writeback:writeback_mark_inode_dirty",
    "writeback:writeback_dirty_inode_start",
    "writeback:writeback_dirty_inode",
    "writeback:writeback_single_inode_start",
    "writeback:writeback_single_inode",
    "writeback:writeback_write_inode_start",
    "writeback:writeback_write_inode",
    "writeback:writeback_queue",
    "writeback:writeback_exec",
    "writeback:writeback_start",
    "writeback:writeback_written",
    "writeback:wbc_writepage",
    "writeback:sb_mark_inode_writeback",
    "writeback:sb_clear_inode_writeback",
    "writeback:writeback_pages_written",
];
const EXT4: &[&str] = &[
    "ext4:ext4_da_write_folios_start",
    "ext4:ext4_da_write_folios_end",
    "ext4:ext4_da_write_pages_extent",
    "ext4:ext4_ext_map_blocks_enter",
    "ext4:ext4_ext_map_blocks_exit",
    "ext4:ext4_writepages",
    "ext4:ext4_writepages_result",
    "ext4:ext4_sync_file_enter",
    "ext4:ext4_sync_file_exit",
];
const IOMAP: &[&str] = &[
    "iomap:iomap_add_to_ioend",
    "iomap:iomap_writeback_folio",
    "iomap:iomap_iter_dstmap",
    "iomap:iomap_apply_dstmap",
    "iomap:iomap_dio_rw_begin",
    "iomap:iomap_dio_complete",
    "iomap:iomap_readahead",
    "iomap:iomap_readpage",
    "xfs:xfs_map_blocks_found",
    "xfs:xfs_map_blocks_alloc",
    "xfs:xfs_bmap_post_update",
    "xfs:xfs_file_buffered_write",
    "xfs:xfs_file_direct_write",
    "xfs:xfs_file_direct_read",
    "xfs:xfs_file_buffered_read",
    "xfs:xfs_buf_submit",
    "btrfs:btrfs_ordered_extent_add",
    "btrfs:btrfs_ordered_extent_remove",
];
const MISC: &[&str] = &[
    "filemap:mm_filemap_add_to_page_cache",
    "filemap:mm_filemap_delete_from_page_cache",
    "readahead:page_cache_sync_ra",
    "readahead:page_cache_async_ra",
    "readahead:page_cache_ra_order",
    "readahead:page_cache_ra_unbounded",
    "jbd2:jbd2_start_commit",
    "jbd2:jbd2_commit_flushing",
    "jbd2:jbd2_commit_logging",
    "jbd2:jbd2_end_commit",
    "jbd2:jbd2_submit_inode_data",
    "jbd2:jbd2_write_superblock",
    "jbd2:jbd2_handle_start",
    "jbd2:jbd2_handle_stats",
    "sched:sched_process_exec",
    "sched:sched_process_fork",
    "sched:sched_process_exit",
];
const THROTTLE: &[&str] = &[
    "wbt:wbt_timer",
    "iocost:iocost_ioc_vrate_adj",
    "iocost:iocost_iocg_activate",
];
const FULL_EXTRA: &[&str] = &[
    "ext4:ext4_da_write_begin",
    "ext4:ext4_da_write_end",
    "iomap:iomap_iter",
    "filemap:mm_filemap_fault",
    "block:block_plug",
    "block:block_unplug",
];
const MINIMAL: &[&str] = &[
    "block:block_bio_queue",
    "block:block_getrq",
    "block:block_rq_insert",
    "block:block_rq_issue",
    "block:block_rq_complete",
    "block:block_rq_requeue",
    "block:block_rq_merge",
    "block:block_bio_backmerge",
    "block:block_bio_frontmerge",
    "block:block_split",
    "block:block_bio_remap",
    "block:block_bio_complete",
    "block:block_dirty_buffer",
    "writeback:writeback_dirty_folio",
    "writeback:writeback_start",
    "writeback:writeback_written",
    "writeback:writeback_single_inode_start",
    "writeback:writeback_single_inode",
    "filemap:mm_filemap_add_to_page_cache",
    "ext4:ext4_ext_map_blocks_exit",
    "iomap:iomap_add_to_ioend",
    "iomap:iomap_iter_dstmap",
    "iomap:iomap_apply_dstmap",
    "readahead:page_cache_ra_order",
];
const CALLCHAIN: &[&str] = &[
    "writeback:writeback_dirty_folio",
    "writeback:writeback_dirty_page",
    "block:block_dirty_buffer",
    "writeback:writeback_mark_inode_dirty",
    "jbd2:jbd2_handle_start",
    "block:block_bio_queue",
];
const RENAMES_TODAY: &[(&str, &str)] = &[
    (
        "writeback:writeback_dirty_folio",
        "writeback:writeback_dirty_page",
    ),
    (
        "ext4:ext4_da_write_folios_start",
        "ext4:ext4_da_write_pages",
    ),
    ("iomap:iomap_add_to_ioend", "iomap:iomap_writepage_map"),
    ("iomap:iomap_writeback_folio", "iomap:iomap_writepage"),
];
const SPEC_FIELDS: &[(&str, &[&str])] = &[
    ("wbt:wbt_timer", &["$name", "inflight"]),
    ("iocost:iocost_ioc_vrate_adj", &["$devname"]),
    ("iocost:iocost_iocg_activate", &["$devname"]),
    (
        "block:block_bio_queue",
        &["dev", "sector", "nr_sector", "$rwbs"],
    ),
    (
        "block:block_bio_backmerge",
        &["dev", "sector", "nr_sector", "$rwbs"],
    ),
    (
        "block:block_bio_frontmerge",
        &["dev", "sector", "nr_sector", "$rwbs"],
    ),
    (
        "block:block_getrq",
        &["dev", "sector", "nr_sector", "$rwbs"],
    ),
    (
        "block:block_split",
        &["dev", "sector", "new_sector", "$rwbs"],
    ),
    (
        "block:block_bio_remap",
        &[
            "dev",
            "sector",
            "nr_sector",
            "old_dev",
            "old_sector",
            "$rwbs",
        ],
    ),
    (
        "block:block_bio_complete",
        &["dev", "sector", "nr_sector", "error", "$rwbs"],
    ),
    (
        "block:block_rq_insert",
        &["dev", "sector", "nr_sector", "bytes", "$rwbs"],
    ),
    (
        "block:block_rq_issue",
        &["dev", "sector", "nr_sector", "bytes", "$rwbs"],
    ),
    (
        "block:block_rq_merge",
        &["dev", "sector", "nr_sector", "bytes", "$rwbs"],
    ),
    (
        "block:block_rq_requeue",
        &["dev", "sector", "nr_sector", "$rwbs"],
    ),
    (
        "block:block_rq_complete",
        &["dev", "sector", "nr_sector", "error", "$rwbs"],
    ),
    (
        "block:block_rq_error",
        &["dev", "sector", "nr_sector", "error", "$rwbs"],
    ),
    ("block:block_dirty_buffer", &["dev", "sector", "size"]),
    (
        "writeback:writeback_dirty_folio",
        &["$name", "ino", "index"],
    ),
    ("writeback:writeback_dirty_page", &["$name", "ino", "index"]),
    (
        "writeback:writeback_mark_inode_dirty",
        &["$name", "ino", "state", "flags"],
    ),
    (
        "writeback:writeback_dirty_inode_start",
        &["$name", "ino", "state", "flags"],
    ),
    (
        "writeback:writeback_dirty_inode",
        &["$name", "ino", "state", "flags"],
    ),
    (
        "writeback:writeback_single_inode_start",
        &["$name", "ino", "state", "nr_to_write"],
    ),
    (
        "writeback:writeback_single_inode",
        &["$name", "ino", "state", "nr_to_write", "wrote"],
    ),
    (
        "writeback:writeback_write_inode_start",
        &["$name", "ino", "sync_mode"],
    ),
    (
        "writeback:writeback_write_inode",
        &["$name", "ino", "sync_mode"],
    ),
    (
        "writeback:writeback_queue",
        &["$name", "sb_dev", "nr_pages", "sync_mode", "reason"],
    ),
    (
        "writeback:writeback_exec",
        &["$name", "sb_dev", "nr_pages", "sync_mode", "reason"],
    ),
    (
        "writeback:writeback_start",
        &["$name", "sb_dev", "nr_pages", "sync_mode", "reason"],
    ),
    (
        "writeback:writeback_written",
        &["$name", "sb_dev", "nr_pages", "sync_mode", "reason"],
    ),
    ("writeback:sb_mark_inode_writeback", &["dev", "ino"]),
    ("writeback:sb_clear_inode_writeback", &["dev", "ino"]),
    (
        "filemap:mm_filemap_add_to_page_cache",
        &["s_dev", "i_ino", "index", "order?", "pfn"],
    ),
    (
        "filemap:mm_filemap_delete_from_page_cache",
        &["s_dev", "i_ino", "index", "order?", "pfn"],
    ),
    ("filemap:mm_filemap_fault", &["s_dev", "i_ino", "index"]),
    (
        "readahead:page_cache_sync_ra",
        &["s_dev", "i_ino", "index", "order?", "size", "async_size"],
    ),
    (
        "readahead:page_cache_async_ra",
        &["s_dev", "i_ino", "index", "order?", "size", "async_size"],
    ),
    (
        "readahead:page_cache_ra_order",
        &["s_dev", "i_ino", "index", "order?", "size", "async_size"],
    ),
    (
        "readahead:page_cache_ra_unbounded",
        &[
            "s_dev",
            "i_ino",
            "index",
            "order?",
            "size|nr_to_read",
            "async_size|lookahead_size",
        ],
    ),
    ("ext4:ext4_da_write_begin", &["dev", "ino", "pos", "len"]),
    ("ext4:ext4_write_begin", &["dev", "ino", "pos", "len"]),
    (
        "ext4:ext4_ext_map_blocks_exit",
        &[
            "dev", "ino", "flags", "pblk", "lblk", "len", "mflags", "ret",
        ],
    ),
    (
        "ext4:ext4_ind_map_blocks_exit",
        &[
            "dev", "ino", "flags", "pblk", "lblk", "len", "mflags", "ret",
        ],
    ),
    (
        "ext4:ext4_da_write_pages_extent",
        &["dev", "ino", "lblk", "len", "flags"],
    ),
    ("ext4:ext4_writepages", &["dev", "ino", "sync_mode"]),
    (
        "ext4:ext4_writepages_result",
        &["dev", "ino", "pages_written"],
    ),
    ("ext4:ext4_sync_file_enter", &["dev", "ino"]),
    ("ext4:ext4_sync_file_exit", &["dev", "ino"]),
    (
        "iomap:iomap_add_to_ioend",
        &[
            "dev",
            "ino",
            "pos|offset",
            "dirty_len|length",
            "addr",
            "offset",
            "length",
            "type",
            "flags",
            "bdev",
        ],
    ),
    (
        "iomap:iomap_writeback_folio",
        &["dev", "ino", "offset", "length"],
    ),
    (
        "iomap:iomap_iter_dstmap",
        &[
            "dev", "ino", "addr", "offset", "length", "type", "flags", "bdev",
        ],
    ),
    ("iomap:iomap_dio_rw_begin", &["dev", "ino", "pos", "count"]),
    ("iomap:iomap_dio_complete", &["dev", "ino", "pos"]),
    ("iomap:iomap_readahead", &["dev", "ino", "nr_pages"]),
    (
        "xfs:xfs_file_buffered_write",
        &["dev", "ino", "offset", "count"],
    ),
    (
        "xfs:xfs_file_buffered_read",
        &["dev", "ino", "offset", "count"],
    ),
    (
        "xfs:xfs_file_direct_write",
        &["dev", "ino", "offset", "count"],
    ),
    (
        "xfs:xfs_file_direct_read",
        &["dev", "ino", "offset", "count"],
    ),
    ("xfs:xfs_buf_submit", &["dev", "bno", "nblks", "flags"]),
    (
        "btrfs:btrfs_ordered_extent_add",
        &[
            "$fsid",
            "root_objectid",
            "ino",
            "file_offset",
            "start",
            "len",
            "disk_len",
            "compress_type",
        ],
    ),
    (
        "btrfs:btrfs_ordered_extent_remove",
        &[
            "$fsid",
            "root_objectid",
            "ino",
            "file_offset",
            "start",
            "len",
            "disk_len",
            "compress_type",
        ],
    ),
    (
        "jbd2:jbd2_handle_start",
        &["dev", "tid", "requested_blocks"],
    ),
    (
        "jbd2:jbd2_handle_stats",
        &["dev", "tid", "requested_blocks", "dirtied_blocks"],
    ),
    ("jbd2:jbd2_start_commit", &["dev", "transaction"]),
    ("jbd2:jbd2_commit_flushing", &["dev", "transaction"]),
    ("jbd2:jbd2_commit_logging", &["dev", "transaction"]),
    ("jbd2:jbd2_end_commit", &["dev", "transaction"]),
    ("jbd2:jbd2_submit_inode_data", &["dev", "ino"]),
    ("sched:sched_process_exec", &["pid", "old_pid", "$filename"]),
    (
        "sched:sched_process_fork",
        &["parent_pid", "child_pid", "$child_comm"],
    ),
    ("sched:sched_process_exit", &["pid", "$comm"]),
];

/// The filters `filter_for` added by event name: (event, expression, field required, event
/// recorded too).
type FilterRow = (
    &'static str,
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
);
const FILTERS: &[FilterRow] = &[
    (
        "block:block_dirty_buffer",
        "sector < 4611686018427387904",
        None,
        None,
    ),
    (
        "filemap:mm_filemap_add_to_page_cache",
        "order > 0",
        Some("unsigned char order"),
        Some("readahead:page_cache_ra_order"),
    ),
    (
        "filemap:mm_filemap_delete_from_page_cache",
        "order > 0",
        Some("unsigned char order"),
        None,
    ),
    (
        "writeback:writeback_mark_inode_dirty",
        "flags & 59",
        Some("unsigned long flags"),
        None,
    ),
    (
        "xfs:xfs_bmap_post_update",
        "startblock < 4503599627239424",
        None,
        None,
    ),
];

fn sorted<'a>(v: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut v: Vec<&str> = v.into_iter().collect();
    v.sort_unstable();
    v
}

#[test]
fn sets_are_the_lists_they_replaced() {
    let default: Vec<&str> = [BLK, WB, EXT4, IOMAP, MISC, THROTTLE].concat();
    let full: Vec<&str> = [BLK, WB, EXT4, IOMAP, MISC, THROTTLE, FULL_EXTRA].concat();
    assert_eq!(Set::Default.names().collect::<Vec<_>>(), default);
    assert_eq!(Set::Full.names().collect::<Vec<_>>(), full);
    // The same events; in registry order, which is default's (the old list had its own).
    let minimal: Vec<&str> = Set::Minimal.names().collect();
    assert_eq!(
        sorted(minimal.iter().copied()),
        sorted(MINIMAL.iter().copied())
    );
    let in_default_order: Vec<&str> = default
        .iter()
        .copied()
        .filter(|n| MINIMAL.contains(n))
        .collect();
    assert_eq!(minimal, in_default_order);
    for s in Set::ALL {
        assert_eq!(Set::from_name(s.name()), Some(s));
    }
    assert_eq!(Set::from_name("bogus"), None);
}

#[test]
fn callchains_renames_and_filters_are_the_lists_they_replaced() {
    assert_eq!(
        sorted(CALLCHAIN_EVENTS.iter().copied()),
        sorted(CALLCHAIN.iter().copied())
    );
    assert_eq!(RENAMES, RENAMES_TODAY);
    let filters: Vec<FilterRow> = EVENTS
        .iter()
        .filter_map(|d| {
            d.filter
                .map(|f| (d.name, f.expr, f.requires, f.applies_with))
        })
        .collect();
    let mut want = FILTERS.to_vec();
    want.sort_unstable();
    let mut got = filters;
    got.sort_unstable();
    assert_eq!(got, want);
}

#[test]
fn typed_events_read_the_fields_they_read() {
    // Every event typed before is typed, reading the same fields (new ones may be added).
    assert_eq!(SPEC_FIELDS.len(), 71);
    for (name, fields) in SPEC_FIELDS {
        assert!(typed_names().any(|n| n == *name), "{name}");
        let d = find(name).unwrap();
        let decls: Vec<String> = d
            .fields
            .iter()
            .map(|f| format!("{}{}", if f.string { "$" } else { "" }, f.decl))
            .collect();
        assert_eq!(decls, *fields, "{name}");
    }
}

#[test]
fn names_are_unique_and_found() {
    let mut seen = BTreeSet::new();
    for d in EVENTS {
        for n in std::iter::once(d.name).chain(d.aliases.iter().copied()) {
            assert!(seen.insert(n), "{n} is named twice");
            let (sys, ev) = n.split_once(':').unwrap();
            assert!(
                !sys.is_empty() && !ev.is_empty() && !ev.contains(':'),
                "{n}"
            );
            assert!(std::ptr::eq(find(n).unwrap(), d), "{n}");
            assert!(d.is_named(n));
        }
    }
    assert!(find("block:block_nope").is_none());
    assert!(find("block").is_none());
}

/// A field line of a format text: (declared type, name, array, size).
fn field_lines(format: &str) -> Vec<(String, String, bool, usize)> {
    format
        .lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix("field:")?;
            let (decl, rest) = rest.split_once(';')?;
            let size = rest
                .split(';')
                .find_map(|a| a.trim().strip_prefix("size:"))?
                .parse()
                .ok()?;
            let array = decl.ends_with(']');
            let head = match decl.rfind('[') {
                Some(at) if array => decl[..at].trim_end(),
                _ => decl,
            };
            let name_at = head.rfind(' ')?;
            Some((
                head[..name_at].trim().to_string(),
                head[name_at + 1..].to_string(),
                array,
                size,
            ))
        })
        .collect()
}

#[test]
fn every_entry_reads_fields_its_format_declares() {
    for d in EVENTS {
        let text = builtin_format(d.name).unwrap_or_else(|| panic!("{}: no format", d.name));
        let ev = d.name.split_once(':').unwrap().1;
        assert!(text.starts_with(&format!("name: {ev}\n")), "{}", d.name);
        let fields = field_lines(text);
        assert!(fields.len() > 4, "{}: {fields:?}", d.name);
        for f in d.fields {
            let found = f
                .names()
                .find_map(|n| fields.iter().find(|(_, name, _, _)| name == n));
            let Some((ty, name, array, size)) = found else {
                assert!(f.optional(), "{}: no field {}", d.name, f.decl);
                continue;
            };
            let string = *array || ty.starts_with("__data_loc") || ty.starts_with("__rel_loc");
            assert_eq!(string, f.string, "{}: {name} is `{ty}`", d.name);
            if !string {
                assert!(matches!(size, 1 | 2 | 4 | 8), "{}: {name}", d.name);
            }
        }
        if let Some(req) = d.filter.and_then(|f| f.requires) {
            assert!(
                fields
                    .iter()
                    .any(|(ty, name, _, _)| format!("{ty} {name}") == req),
                "{}: no `{req}`",
                d.name
            );
        }
    }
}

#[test]
fn every_format_file_is_an_entry() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("formats");
    let mut files = BTreeSet::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "format") {
            let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
            let text = std::fs::read_to_string(&p).unwrap();
            files.insert((stem, text));
        }
    }
    let entries: BTreeSet<(String, String)> = EVENTS
        .iter()
        .map(|d| {
            (
                d.name.replacen(':', "_", 1),
                builtin_format(d.name).unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(files, entries);
    assert!(builtin_format("writeback:writeback_dirty_page").is_none());
}

#[test]
fn builders_read_each_field_at_its_position_and_set_constants() {
    use crate::event::{EventKind, Rwbs, WorkPhase};
    use crate::field::{Field, FieldLayout, Payload, Unreadable};
    use ioblame_format::ByteOrder;
    let int = |offset, size, signed| {
        Some(Field {
            offset,
            size,
            signed,
            array: false,
            layout: FieldLayout::Inline,
        })
    };
    let chars = |offset, size| {
        Some(Field {
            offset,
            size,
            signed: false,
            array: true,
            layout: FieldLayout::Inline,
        })
    };
    // writeback_start: name, sb_dev, nr_pages, sync_mode, reason (its 6.18 offsets).
    let fields = [
        chars(8, 32),
        int(48, 4, false),
        int(40, 8, true),
        int(52, 4, true),
        int(68, 4, true),
    ];
    let mut raw = vec![0u8; 80];
    raw[8..12].copy_from_slice(b"8:0\0");
    raw[40..48].copy_from_slice(&(-3i64).to_be_bytes());
    raw[48..52].copy_from_slice(&7u32.to_be_bytes());
    raw[52..56].copy_from_slice(&1i32.to_be_bytes());
    raw[68..72].copy_from_slice(&4i32.to_be_bytes());
    let d = find("writeback:writeback_start").unwrap();
    let build = d.build.unwrap();
    let mut kind = EventKind::Other { event: 0 };
    build(&Payload::new(&fields, &raw, ByteOrder::Big), &mut kind).unwrap();
    assert_eq!(
        kind,
        EventKind::WritebackWork {
            phase: WorkPhase::Start,
            bdi: 8 << 20,
            sb_dev: 7,
            nr_pages: -3,
            sync_mode: 1,
            reason: 4,
        }
    );
    // A payload too short: unreadable, the event left as it was.
    let mut kind = EventKind::Other { event: 3 };
    assert_eq!(
        build(
            &Payload::new(&fields, &raw[..60], ByteOrder::Big),
            &mut kind
        ),
        Err(Unreadable)
    );
    assert_eq!(kind, EventKind::Other { event: 3 });
    // block_bio_queue: dev, sector, nr_sector, rwbs.
    let fields = [
        int(8, 4, false),
        int(16, 8, false),
        int(24, 4, false),
        chars(28, 10),
    ];
    let mut raw = vec![0u8; 54];
    raw[8..12].copy_from_slice(&(7u32 << 20).to_le_bytes());
    raw[16..24].copy_from_slice(&2048u64.to_le_bytes());
    raw[24..28].copy_from_slice(&8u32.to_le_bytes());
    raw[28..30].copy_from_slice(b"WS");
    let mut kind = EventKind::Other { event: 0 };
    (find("block:block_bio_queue").unwrap().build.unwrap())(
        &Payload::new(&fields, &raw, ByteOrder::Little),
        &mut kind,
    )
    .unwrap();
    assert_eq!(
        kind,
        EventKind::BioQueue {
            dev: 7 << 20,
            sector: 2048,
            nr_sector: 8,
            rwbs: Rwbs::parse("WS"),
        }
    );
}
