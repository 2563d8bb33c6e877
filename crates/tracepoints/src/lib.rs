//! ioblame's recording plan, shared by the recorder (`ioblame-capture`) and the `perf record`
//! command line of `ioblame perf-command`: the tracepoint sets the attribution needs
//! ([`set_names`]), the events that carry a kernel callchain, older names of renamed events,
//! their resolution against a kernel's tracefs ([`resolve`]), the in-kernel filters
//! ([`filter_for`]) and the devices to filter on ([`resolve_devices`]).
//!
//! Planning is pure: it works on what the caller read (the text of `/proc/self/mountinfo`,
//! tracefs files, the block devices). The readers of a tracefs or sysfs directory the caller
//! names ([`find_tracefs`], [`lookup`], [`block_devices_at`]) only read; nothing here mounts
//! tracefs or reads a fixed system path: the recorder does that.
#![deny(missing_docs)]

macro_rules! bail {
    ($($t:tt)*) => { return Err(Error::Usage(format!($($t)*))) };
}

mod devices;
mod tracefs;

pub use devices::{block_devices_at, parse_majmin, resolve_devices};
pub use tracefs::{find_tracefs, lookup, resolve, resolve_with, tracefs_mounts, TRACEFS_PATHS};

/// What went wrong while planning a recording.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad `--events` or `--devices` argument, or an event this kernel lacks.
    #[error("{0}")]
    Usage(String),
    /// tracefs or sysfs could not be read.
    #[error("{0}")]
    System(String),
}

/// Results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

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
    "iomap:iomap_dio_rw_begin",
    "iomap:iomap_dio_complete",
    "iomap:iomap_readahead",
    "iomap:iomap_readpage",
    "xfs:xfs_map_blocks_found",
    "xfs:xfs_map_blocks_alloc",
    "xfs:xfs_file_buffered_write",
    "xfs:xfs_file_direct_write",
    "xfs:xfs_file_direct_read",
    "xfs:xfs_file_buffered_read",
    "xfs:xfs_buf_submit",
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
    "sched:sched_process_exec",
    "sched:sched_process_fork",
    "sched:sched_process_exit",
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
    "readahead:page_cache_ra_order",
];

/// Events whose kernel stack is the intent: they get a callchain.
pub const CALLCHAIN_EVENTS: &[&str] = &[
    "writeback:writeback_dirty_folio",
    "writeback:writeback_dirty_page",
    "block:block_dirty_buffer",
    "writeback:writeback_mark_inode_dirty",
    "jbd2:jbd2_handle_start",
    "block:block_bio_queue",
];

/// Older names to fall back on when the new one is absent: (new, old).
pub const RENAMES: &[(&str, &str)] = &[
    (
        "writeback:writeback_dirty_folio",
        "writeback:writeback_dirty_page",
    ),
    (
        "ext4:ext4_da_write_folios_start",
        "ext4:ext4_da_write_pages",
    ),
];

/// The names of the predefined event sets, with a one-line description.
pub const SETS: &[(&str, &str)] = &[
    (
        "default",
        "everything the attribution needs on ext4, xfs and generic paths",
    ),
    (
        "minimal",
        "block layer core, dirtiers and the map events only",
    ),
    (
        "full",
        "default + per-write-call events, page faults and plugging",
    ),
];

/// The event names of a set (`default`, `minimal`, `full`) or of a comma-separated list of
/// `sys:name`.
pub fn set_names(spec: &str) -> Result<Vec<String>> {
    let v: Vec<&str> = match spec {
        "default" => [BLK, WB, EXT4, IOMAP, MISC].concat(),
        "minimal" => MINIMAL.to_vec(),
        "full" => [BLK, WB, EXT4, IOMAP, MISC, FULL_EXTRA].concat(),
        list => {
            let mut v = Vec::new();
            for n in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                match n.split_once(':') {
                    Some((s, e))
                        if !s.is_empty()
                            && !e.is_empty()
                            && !n.contains('/')
                            && !n.contains("..") => {}
                    _ => bail!(
                        "--events: '{n}' is neither a set (default, minimal, full) nor sys:name"
                    ),
                }
                v.push(n);
            }
            if v.is_empty() {
                bail!("--events: empty event list");
            }
            v
        }
    };
    let mut out: Vec<String> = Vec::new();
    for n in v {
        if !out.iter().any(|x| x == n) {
            out.push(n.to_string());
        }
    }
    Ok(out)
}

/// The advice given when this process may not use tracefs or perf.
pub const PRIVILEGE_HINT: &str = "run as root (or with CAP_PERFMON and read access to tracefs)";

/// A tracepoint found in tracefs.
#[derive(Debug, Clone)]
pub struct Tracepoint {
    /// `sys:name` as found on this kernel.
    pub name: String,
    /// tracefs id (the perf config).
    pub id: u64,
    /// The full `format` text.
    pub format: String,
    /// Whether its samples carry a callchain.
    pub callchain: bool,
}

/// Filter that drops `block_dirty_buffer`'s delalloc sentinel events (blocks not mapped yet,
/// `sector` = 2^62 and above).
pub const DIRTY_BUFFER_FILTER: &str = "sector < 4611686018427387904";

/// Filter that keeps only the `writeback_mark_inode_dirty` events that dirty the inode itself
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
pub const MARK_INODE_DIRTY_FILTER: &str = "flags & 59";

/// Filter on `mm_filemap_add_to_page_cache` and `mm_filemap_delete_from_page_cache` that keeps
/// only folios larger than one page. The attribution needs these events for the size of a
/// folio, and a folio it has seen no event for is taken as one page, which is what the
/// filter drops: nothing is lost. Small random IO adds and evicts a page per operation: on
/// 4 KiB random buffered writes these two events were 40% of everything recorded. (A
/// one-page folio of a file unlinked while dirty then leaves unseen; the analyzer forgets
/// dirty folios nobody wrote for ten minutes.)
pub const FOLIO_ORDER_FILTER: &str = "order > 0";

fn has_field(format: &str, decl: &str) -> bool {
    format
        .lines()
        .any(|l| l.trim_start().starts_with(&format!("field:{decl};")))
}

/// Which device field an event can be filtered on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DevField {
    Dev,
    SDev,
    BdiName,
}

fn dev_field(format: &str) -> Option<DevField> {
    let has = |decl: &str| has_field(format, decl);
    if has("dev_t dev") {
        Some(DevField::Dev)
    } else if has("dev_t s_dev") {
        Some(DevField::SDev)
    } else if has("char name[32]") {
        Some(DevField::BdiName)
    } else {
        None
    }
}

/// A device to filter on: its numbers and its whole disk's numbers (for request-level events
/// and the bdi name). For a whole disk both are the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterDev {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
    /// Whole disk major.
    pub disk_major: u32,
    /// Whole disk minor.
    pub disk_minor: u32,
}

/// Whether an event is traced on a request, whose `dev` is always the whole disk
/// (`disk_devt`), rather than on a bio or a filesystem object, whose `dev` is the partition
/// the IO was submitted to (`docs/kernel-events.md` §2, §7.6).
pub fn request_level(name: &str) -> bool {
    name.starts_with("block:block_rq_") || name.starts_with("block:block_io_")
}

/// The in-kernel filter of one event (empty: none).
///
/// Devices are matched by the number the event carries: request-level events
/// ([`request_level`]) and the writeback bdi name by the whole disk of each device, bio-level
/// and filesystem events (`dev`, `s_dev`) by the device itself. [`resolve_devices`] lists a
/// whole disk's partitions with it, so `--devices sda` keeps the IO of filesystems on `sda1`,
/// and `--devices sda1` keeps the requests of `sda` (those of other partitions included:
/// requests carry no partition).
pub fn filter_for(tp: &Tracepoint, devs: &[FilterDev]) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !devs.is_empty() {
        let or = |f: &dyn Fn(&FilterDev) -> String| {
            let mut v: Vec<String> = Vec::new();
            for s in devs.iter().map(f) {
                if !v.contains(&s) {
                    v.push(s);
                }
            }
            v.join(" || ")
        };
        let disk = request_level(&tp.name);
        let num = |d: &FilterDev| {
            if disk {
                ioblame_format::kernel_dev(d.disk_major, d.disk_minor)
            } else {
                ioblame_format::kernel_dev(d.major, d.minor)
            }
        };
        match dev_field(&tp.format) {
            Some(DevField::Dev) => parts.push(or(&|d| format!("dev == {}", num(d)))),
            Some(DevField::SDev) => parts.push(or(&|d| format!("s_dev == {}", num(d)))),
            Some(DevField::BdiName) => parts.push(or(&|d| {
                format!("name == \"{}:{}\"", d.disk_major, d.disk_minor)
            })),
            None => {}
        }
    }
    if tp.name == "block:block_dirty_buffer" {
        parts.push(DIRTY_BUFFER_FILTER.to_string());
    }
    if matches!(
        tp.name.as_str(),
        "filemap:mm_filemap_add_to_page_cache" | "filemap:mm_filemap_delete_from_page_cache"
    ) && has_field(&tp.format, "unsigned char order")
    {
        parts.push(FOLIO_ORDER_FILTER.to_string());
    }
    if tp.name == "writeback:writeback_mark_inode_dirty"
        && has_field(&tp.format, "unsigned long flags")
    {
        parts.push(MARK_INODE_DIRTY_FILTER.to_string());
    }
    match parts.len() {
        0 => String::new(),
        1 => parts.remove(0),
        _ => parts
            .iter()
            .map(|p| format!("({p})"))
            .collect::<Vec<_>>()
            .join(" && "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(name: &str, fields: &str) -> Tracepoint {
        Tracepoint {
            name: name.into(),
            id: 1,
            format: format!("name: x\nID: 1\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n{fields}"),
            callchain: false,
        }
    }

    #[test]
    fn sets_expand() {
        let d = set_names("default").unwrap();
        assert!(d.contains(&"block:block_bio_queue".to_string()));
        assert!(d.contains(&"jbd2:jbd2_handle_start".to_string()));
        assert!(!d.iter().any(|n| n.ends_with("block_plug")));
        assert!(!d.iter().any(|n| n == "iomap:iomap_iter"));
        assert!(!d.iter().any(|n| n == "ext4:ext4_da_write_begin"));
        let f = set_names("full").unwrap();
        assert!(f.contains(&"iomap:iomap_iter".to_string()));
        assert!(f.len() > d.len());
        let m = set_names("minimal").unwrap();
        assert!(m.len() < d.len());
        assert_eq!(
            set_names("block:block_rq_issue, sched:sched_process_exec,block:block_rq_issue")
                .unwrap(),
            vec!["block:block_rq_issue", "sched:sched_process_exec"]
        );
        assert!(set_names("bogus").is_err());
        assert!(set_names("a:../b").is_err());
        assert!(set_names(",").is_err());
    }

    #[test]
    fn filters() {
        let devs = [
            FilterDev {
                major: 7,
                minor: 0,
                disk_major: 7,
                disk_minor: 0,
            },
            FilterDev {
                major: 8,
                minor: 1,
                disk_major: 8,
                disk_minor: 0,
            },
        ];
        let b = tp(
            "block:block_bio_queue",
            "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n",
        );
        assert_eq!(filter_for(&b, &devs), "dev == 7340032 || dev == 8388609");
        let s = tp(
            "filemap:x",
            "\tfield:dev_t s_dev;\toffset:8;\tsize:4;\tsigned:0;\n",
        );
        assert_eq!(filter_for(&s, &devs[..1]), "s_dev == 7340032");
        let n = tp(
            "writeback:x",
            "\tfield:char name[32];\toffset:8;\tsize:32;\tsigned:0;\n",
        );
        assert_eq!(filter_for(&n, &devs), "name == \"7:0\" || name == \"8:0\"");
        let d = tp(
            "block:block_dirty_buffer",
            "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n",
        );
        assert_eq!(
            filter_for(&d, &devs[..1]),
            "(dev == 7340032) && (sector < 4611686018427387904)"
        );
        assert_eq!(filter_for(&d, &[]), "sector < 4611686018427387904");
        let none = tp(
            "sched:x",
            "\tfield:pid_t pid;\toffset:8;\tsize:4;\tsigned:1;\n",
        );
        assert_eq!(filter_for(&none, &devs), "");
        let mid = tp(
            "writeback:writeback_mark_inode_dirty",
            "\tfield:char name[32];\toffset:8;\tsize:32;\tsigned:0;\n\tfield:unsigned long flags;\toffset:56;\tsize:8;\tsigned:0;\n",
        );
        assert_eq!(filter_for(&mid, &[]), "flags & 59");
        for name in [
            "filemap:mm_filemap_add_to_page_cache",
            "filemap:mm_filemap_delete_from_page_cache",
        ] {
            let add = tp(
                name,
                "\tfield:dev_t s_dev;\toffset:32;\tsize:4;\tsigned:0;\n\tfield:unsigned char order;\toffset:36;\tsize:1;\tsigned:0;\n",
            );
            assert_eq!(filter_for(&add, &[]), "order > 0");
            assert_eq!(
                filter_for(&add, &devs[..1]),
                "(s_dev == 7340032) && (order > 0)"
            );
            // Kernels before large folios have no order field: every folio is one page.
            let old = tp(
                name,
                "\tfield:dev_t s_dev;\toffset:32;\tsize:4;\tsigned:0;\n",
            );
            assert_eq!(filter_for(&old, &[]), "");
        }
        assert_eq!(
            filter_for(&mid, &devs[..1]),
            "(name == \"7:0\") && (flags & 59)"
        );
    }
}
