//! What the attribution needs to know about the recording host: devices, page size, the
//! recorder, the tasks alive at start and, optionally, kernel symbols.

use std::borrow::Cow;

use ioblame_decode::Dev;
use ioblame_format::{BlockDevice, Header, Metadata, Task};
use rustc_hash::FxHashMap;

/// Resolves a kernel address to the name of the function containing it.
///
/// Used only to classify each distinct kernel stack once (direct IO, journal), never per
/// event. Closures `Fn(u64) -> Option<String>` implement it.
pub trait Symbolizer {
    /// Name of the function containing `addr` (a `+0x..` suffix and `.isra.0`-style
    /// suffixes are tolerated), or `None` if unknown.
    fn symbol(&self, addr: u64) -> Option<Cow<'_, str>>;
}

impl<F: Fn(u64) -> Option<String>> Symbolizer for F {
    fn symbol(&self, addr: u64) -> Option<Cow<'_, str>> {
        self(addr).map(Cow::Owned)
    }
}

/// The decoder's kallsyms symbolizer (a clone shares its table: clone it into
/// [`Context::symbols`]).
impl Symbolizer for ioblame_decode::Symbolizer {
    fn symbol(&self, addr: u64) -> Option<Cow<'_, str>> {
        self.resolve(addr).map(|s| Cow::Borrowed(s.name))
    }
}

/// The inode state bits the attribution reads, as the recording kernel numbers them: the
/// `I_DIRTY_*` bits moved when 6.x reordered `i_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InodeBits {
    /// `I_DIRTY_SYNC | I_DIRTY_DATASYNC`: `writeback_mark_inode_dirty` flags with one of
    /// these record an inode dirtier.
    pub dirty_inode: u64,
    /// `I_DIRTY_PAGES`: an inode leaving writeback without it has no dirty page left.
    pub dirty_pages: u64,
}

impl InodeBits {
    /// Before the `i_state` reordering (kernels before 6.12): bits 0, 1 and 2.
    pub const BEFORE_6_12: InodeBits = InodeBits {
        dirty_inode: 0x3,
        dirty_pages: 0x4,
    };
    /// As 6.18 numbers them (observed): `I_DIRTY_SYNC` 0x10, `I_DIRTY_DATASYNC` 0x20,
    /// `I_DIRTY_PAGES` 0x40.
    pub const V6_18: InodeBits = InodeBits {
        dirty_inode: 0x30,
        dirty_pages: 0x40,
    };

    /// The bits of a trace's kernel: from the `__print_flags` tables of the recorded
    /// writeback events' formats where they give numbers, else from the kernel release
    /// (before 6.12: [`InodeBits::BEFORE_6_12`]; otherwise, or when the release does not
    /// parse: [`InodeBits::V6_18`]).
    pub fn from_trace<'a>(
        kernel_release: &str,
        formats: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let by_release = match release(kernel_release) {
            Some(v) if v < (6, 12) => InodeBits::BEFORE_6_12,
            _ => InodeBits::V6_18,
        };
        let (mut sync, mut datasync, mut pages) = (None, None, None);
        for f in formats {
            let v = |name| ioblame_decode::format::print_symbol_value(f, name);
            sync = sync.or_else(|| v("I_DIRTY_SYNC"));
            datasync = datasync.or_else(|| v("I_DIRTY_DATASYNC"));
            pages = pages.or_else(|| v("I_DIRTY_PAGES"));
        }
        match (sync, datasync) {
            (Some(a), Some(b)) if a | b != 0 => InodeBits {
                dirty_inode: a | b,
                dirty_pages: pages.filter(|&p| p != 0).unwrap_or(by_release.dirty_pages),
            },
            _ => by_release,
        }
    }
}

impl Default for InodeBits {
    fn default() -> Self {
        InodeBits::V6_18
    }
}

/// `(major, minor)` of a kernel release such as `6.18.44-fc-v769`.
fn release(r: &str) -> Option<(u32, u32)> {
    let mut it = r.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// The trace's metadata as the attribution uses it.
pub struct Context {
    /// Block devices of the recording host (sizes for offset scaling, partitions).
    pub devices: Vec<BlockDevice>,
    /// Page size of the recording host in bytes.
    pub page_size: u32,
    /// Process id of the recorder: its acts are flagged [`crate::Act::recorder`].
    pub recorder_pid: Option<u32>,
    /// Tasks alive when the capture started (comm of tasks seen only in samples).
    pub tasks: Vec<Task>,
    /// Kernel symbol lookup, to recognise direct IO and journal stacks; without it only
    /// the event brackets (`iomap_dio_rw_begin`, `jbd2_start_commit`) are used.
    pub symbols: Option<Box<dyn Symbolizer + Send + Sync>>,
    /// The recording kernel's inode state bits.
    pub inode_bits: InodeBits,
    /// Block size of each mounted filesystem's device (kernel encoding -> bytes), from the
    /// trace's mount table: ext4 map events count in filesystem blocks, and no
    /// buffer_head may have told the size before the first one (delalloc buffers are
    /// filtered in the kernel).
    pub block_sizes: Vec<(Dev, u32)>,
    /// The allocation group geometry of each xfs filesystem's device (`sb_agblocks`,
    /// `sb_agblklog`), from the trace's mount table (format 1.4): what turns the xfs block
    /// numbers of `xfs_map_blocks_*` into sectors.
    pub xfs_geometry: Vec<(Dev, u32, u8)>,
    /// The recording has no dirtier, writeback, filesystem or stack events (blktrace): every
    /// bio is charged to the task that queued it (writes via [`crate::Via::Issuer`]), with
    /// the empty stack and the request flags as the intent's modifier
    /// ([`crate::blktrace_modifier`]).
    pub issuer_only: bool,
    /// The process whose tasks and descendants are marked [`crate::Role::lineage`] (the
    /// analyzer's `workload` and `pid:N` scopes); `None`: none is.
    pub scope_root: Option<u32>,
    /// The dirty buffers were recorded without their callchains (`--stacks exact`;
    /// `ioblame_decode::Decoder::buffer_stacks_derived`): one that has no stack takes the
    /// stack last given to a dirty buffer of its thread.
    pub buffer_stacks_from_thread: bool,
    /// The dirtying events' stacks were sampled (`--stacks sampled:N`;
    /// `ioblame_decode::stacks_sampled`): a folio or inode dirtied without a stack
    /// takes the stack last sampled on its thread for that event.
    pub stacks_sampled: bool,
    /// The loop devices over files (format 1.7, `ioblame_format::Trace::loops`): their
    /// backing files' IO is charged to the acts the loop devices served.
    pub loops: Vec<ioblame_format::LoopDevice>,
    /// The device-mapper targets mapping sectors one to one onto a lower device (format 1.7,
    /// `ioblame_format::Trace::dm_targets`): a lower bio queued without a remap (dm-crypt's)
    /// takes the charges of the bio above.
    pub dm_targets: Vec<ioblame_format::DmTarget>,
    /// The executable mappings the recorder read of the processes whose user stacks it
    /// recorded (format 1.8, `ioblame_format::Trace::user_maps`): with the trace's MMAP2
    /// records, what turns user addresses into module offsets.
    pub user_maps: Vec<ioblame_format::UserMap>,
    /// The btrfs filesystems with their devices and chunk maps (format 1.9,
    /// `ioblame_format::Trace::btrfs`): what turns btrfs's logical addresses into sectors.
    pub btrfs: Vec<ioblame_format::BtrfsFs>,
    /// What unwinds the user stack copies (`--user-stacks dwarf`, format 1.10) by the
    /// unwind tables of the trace; `None`: the copies are dropped, and their events have
    /// no user frames.
    pub unwinder: Option<ioblame_unwind::Unwinder>,
}

impl Default for Context {
    fn default() -> Self {
        Context {
            devices: Vec::new(),
            page_size: 4096,
            recorder_pid: None,
            tasks: Vec::new(),
            symbols: None,
            inode_bits: InodeBits::default(),
            block_sizes: Vec::new(),
            xfs_geometry: Vec::new(),
            issuer_only: false,
            scope_root: None,
            buffer_stacks_from_thread: false,
            stacks_sampled: false,
            loops: Vec::new(),
            dm_targets: Vec::new(),
            user_maps: Vec::new(),
            btrfs: Vec::new(),
            unwinder: None,
        }
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("devices", &self.devices)
            .field("page_size", &self.page_size)
            .field("recorder_pid", &self.recorder_pid)
            .field("tasks", &self.tasks.len())
            .field("symbols", &self.symbols.is_some())
            .field("inode_bits", &self.inode_bits)
            .field("block_sizes", &self.block_sizes)
            .field("xfs_geometry", &self.xfs_geometry)
            .field("loops", &self.loops)
            .field("dm_targets", &self.dm_targets)
            .field("unwinder", &self.unwinder)
            .finish()
    }
}

impl Context {
    /// The context a trace's header and metadata describe (no symbols: set
    /// [`Context::symbols`] from the trace's kallsyms if wanted).
    pub fn from_trace(header: &Header, meta: &Metadata) -> Context {
        Context {
            devices: meta.block_devices.clone(),
            page_size: if header.page_size.is_power_of_two() && header.page_size >= 512 {
                header.page_size
            } else {
                4096
            },
            recorder_pid: (header.recorder_pid != 0).then_some(header.recorder_pid),
            tasks: meta.tasks.clone(),
            symbols: None,
            inode_bits: InodeBits::from_trace(
                &header.kernel_release,
                meta.events
                    .iter()
                    .filter(|e| e.name.starts_with("writeback:"))
                    .map(|e| e.format.as_str()),
            ),
            block_sizes: meta
                .mounts
                .iter()
                .filter(|m| {
                    m.block_size >= 512 && m.block_size <= 1 << 16 && m.block_size.is_power_of_two()
                })
                .map(|m| (ioblame_format::kernel_dev(m.major, m.minor), m.block_size))
                .collect(),
            xfs_geometry: meta
                .mounts
                .iter()
                .filter(|m| m.fs_type == "xfs" && m.xfs_agblocks > 0)
                .map(|m| {
                    let dev = ioblame_format::kernel_dev(m.major, m.minor);
                    (dev, m.xfs_agblocks, m.xfs_agblklog)
                })
                .collect(),
            issuer_only: false,
            scope_root: None,
            buffer_stacks_from_thread: ioblame_decode::buffer_stacks_derived(meta),
            stacks_sampled: ioblame_decode::stacks_sampled(meta),
            loops: meta.loops.clone(),
            dm_targets: meta.dm_targets.clone(),
            user_maps: meta.user_maps.clone(),
            btrfs: meta.btrfs.clone(),
            // Frame pointers only until the trace's unwind tables are added (they are read
            // apart from the metadata: `ioblame_pipeline`).
            unwinder: ioblame_unwind::Arch::of_machine(&header.machine)
                .filter(|_| meta.events.iter().any(|e| e.stack_user > 0))
                .map(|arch| ioblame_unwind::Unwinder::new(arch, Default::default())),
        }
    }
}

/// What the attribution knows about one device, resolved once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DevInfo {
    /// Whole disk holding this device (itself for a disk).
    pub disk: Dev,
    /// Partition start on the disk, in sectors.
    pub part_start: u64,
    /// Size in sectors (0 when unknown).
    pub size: u64,
}

impl DevInfo {
    /// What is known of a device the metadata does not list: a disk of unknown size.
    fn unknown(dev: Dev) -> DevInfo {
        DevInfo {
            disk: dev,
            part_start: 0,
            size: 0,
        }
    }

    /// The disk sector where buffer `blocknr` of `size` bytes on this device starts.
    pub fn buffer_sector(self, blocknr: u64, size: u64) -> u64 {
        blocknr
            .saturating_mul(size / 512)
            .saturating_add(self.part_start)
    }
}

/// Whether `size` bytes can be a filesystem block (and a buffer_head's size).
pub(crate) fn is_block_size(size: u64) -> bool {
    (512..=1 << 16).contains(&size) && size.is_power_of_two()
}

/// The devices of the recording host as the attribution resolves them: each device's disk,
/// partition start and size, and each filesystem's block size.
#[derive(Debug, Default)]
pub(crate) struct Devices {
    devs: FxHashMap<Dev, DevInfo>,
    /// Filesystem block sizes: from the mount table, until a buffer_head says otherwise.
    block_sizes: FxHashMap<Dev, u64>,
    /// xfs allocation group geometry per filesystem device: (`agblocks`, `agblklog`).
    xfs_geometry: FxHashMap<Dev, (u64, u32)>,
}

impl Devices {
    /// The devices `devices` (partitions resolved to their disks) with the block sizes of
    /// the mount table.
    pub fn new(devices: &[BlockDevice], block_sizes: &[(Dev, u32)]) -> Devices {
        let mut devs = FxHashMap::default();
        for d in devices {
            let kd = d.kernel_dev();
            let disk = if d.parent.is_empty() {
                kd
            } else {
                devices
                    .iter()
                    .find(|p| p.name == d.parent)
                    .map(|p| p.kernel_dev())
                    .unwrap_or(kd)
            };
            devs.insert(
                kd,
                DevInfo {
                    disk,
                    part_start: if disk == kd { 0 } else { d.part_start },
                    size: d.size_sectors,
                },
            );
        }
        let block_sizes = block_sizes
            .iter()
            .filter(|&&(_, b)| is_block_size(b as u64))
            .map(|&(d, b)| (d, b as u64))
            .collect();
        Devices {
            devs,
            block_sizes,
            xfs_geometry: FxHashMap::default(),
        }
    }

    /// Adds the xfs geometry of the mount table: (device, `agblocks`, `agblklog`).
    pub fn with_xfs_geometry(mut self, geometry: &[(Dev, u32, u8)]) -> Devices {
        self.xfs_geometry = geometry
            .iter()
            .filter(|g| g.1 > 0 && (1..=32).contains(&g.2))
            .map(|&(d, b, l)| (d, (b as u64, l as u32)))
            .collect();
        self
    }

    /// The byte on its device of xfs block `fsb` (`xfs_fsblock_t`: allocation group
    /// `fsb >> agblklog`, block `fsb & (2^agblklog - 1)` in it) of the filesystem on `dev`;
    /// `None` without that filesystem's geometry, for the hole sentinels (2^63 and above),
    /// and for a delayed allocation's (bits 17 to 51 set: 5.10's `xfs_map_blocks_alloc`
    /// reports the extent before its conversion).
    pub fn xfs_block_byte(&self, dev: Dev, fsb: u64) -> Option<u64> {
        let &(agblocks, agblklog) = self.xfs_geometry.get(&dev)?;
        // xfs's isnullstartblock(): bits 17..52 all set (a delayed allocation's reservation).
        const NULL_START_MASK: u64 = ((1 << 35) - 1) << 17;
        if fsb >= 1 << 63 || fsb & NULL_START_MASK == NULL_START_MASK {
            return None;
        }
        let agno = fsb >> agblklog;
        let agbno = fsb & ((1u64 << agblklog) - 1);
        let block = agno.checked_mul(agblocks)?.checked_add(agbno)?;
        block.checked_mul(self.block_size(dev))
    }

    /// What is known about `dev` (a disk of unknown size if nothing).
    #[inline]
    pub fn info(&self, dev: Dev) -> DevInfo {
        self.devs
            .get(&dev)
            .copied()
            .unwrap_or(DevInfo::unknown(dev))
    }

    /// The disk a page-cache event's folio belongs to (the bdev inode has `s_dev` 0).
    pub fn folio_disk(&self, s_dev: Dev, ino: u64) -> Dev {
        if s_dev == 0 {
            self.info(ino as Dev).disk
        } else {
            self.info(s_dev).disk
        }
    }

    /// The filesystem block size on `dev` (4 KiB when not known).
    pub fn block_size(&self, dev: Dev) -> u64 {
        self.block_sizes.get(&dev).copied().unwrap_or(4096)
    }

    /// Whether the block size of `dev` is known (from the mount table or learnt), not
    /// assumed.
    pub fn knows_block_size(&self, dev: Dev) -> bool {
        self.block_sizes.contains_key(&dev)
    }

    /// Learns the block size of `dev` from a buffer_head of `size` bytes; false (nothing
    /// learnt) when `size` cannot be a block size.
    pub fn learn_block_size(&mut self, dev: Dev, size: u64) -> bool {
        if !is_block_size(size) {
            return false;
        }
        if self.block_sizes.get(&dev) != Some(&size) {
            self.block_sizes.insert(dev, size);
        }
        true
    }

    /// Learns the start of partition `dev` from a remap of its `old_sector` to the disk's
    /// `sector`, if the metadata lacked it. Returns the start the metadata gave when the
    /// remap contradicts it (the remap wins).
    pub fn learn_part_start(&mut self, dev: Dev, sector: u64, old_sector: u64) -> Option<u64> {
        if sector < old_sector {
            return None;
        }
        let start = sector - old_sector;
        let e = self.devs.entry(dev).or_insert(DevInfo::unknown(dev));
        if e.part_start == start || start == 0 {
            return None;
        }
        let old = e.part_start;
        e.part_start = start;
        (old != 0).then_some(old)
    }
}

/// Stack classes found by symbol names.
pub(crate) const STACK_DIO: u8 = 1;
/// A journal commit stack (jbd2 commit or xfs log).
pub(crate) const STACK_JOURNAL: u8 = 2;
/// A stack class: a loop device's worker (module `layers`).
pub(crate) const STACK_LOOP: u8 = 4;
/// A stack class: a btrfs balance reading the data it moves into the relocation tree's
/// inode (`relocate_file_extent_cluster`), whose inode number names no file of the
/// filesystem's (docs/attribution.md, "btrfs").
pub(crate) const STACK_RELOCATION: u8 = 8;
/// A stack class: a btrfs worker finishing an ordered extent (`btrfs_finish_ordered_io`;
/// `btrfs_finish_one_ordered` since 6.5), whose tree blocks are the extent's data's
/// (docs/attribution.md, "btrfs").
pub(crate) const STACK_BTRFS_FINISH: u8 = 16;
/// A stack class: a btrfs transaction commit (`btrfs_commit_transaction`: `sync`, the
/// `btrfs-transaction` thread, an fsync that commits), whose own tree blocks and superblock
/// writes are divided among the transaction's dirtiers (docs/attribution.md, "btrfs").
pub(crate) const STACK_BTRFS_COMMIT: u8 = 32;
/// A stack class: a btrfs fsync logging into the log tree (`btrfs_log_inode` and the rest of
/// tree-log.c's `btrfs_log_*`), whose log tree blocks weigh in the log sync that writes
/// them (docs/attribution.md, "btrfs").
pub(crate) const STACK_BTRFS_LOG: u8 = 64;
/// A stack class: a btrfs log sync (`btrfs_sync_log`: the log root tree's update, the
/// superblock copies), whose own writes are divided among the log transaction's loggers
/// (docs/attribution.md, "btrfs").
pub(crate) const STACK_BTRFS_LOG_SYNC: u8 = 128;

/// Classifies one kernel stack by its function names.
pub(crate) fn classify_stack(sym: &dyn Symbolizer, stack: &[u64]) -> u8 {
    let mut flags = 0;
    for &a in stack {
        let Some(name) = sym.symbol(a) else { continue };
        let base = name.split(['+', '.', ' ']).next().unwrap_or("");
        match base {
            "iomap_dio_rw"
            | "__iomap_dio_rw"
            | "__blockdev_direct_IO"
            | "blkdev_direct_IO"
            | "__blkdev_direct_IO"
            | "__blkdev_direct_IO_simple"
            | "__blkdev_direct_IO_async" => flags |= STACK_DIO,
            "jbd2_journal_commit_transaction" => flags |= STACK_JOURNAL,
            // A loop device's worker writing or reading its backing file (6.x:
            // loop_process_work › lo_rw_aio; 5.10: loop_handle_cmd › do_req_filebacked).
            "loop_process_work" | "lo_rw_aio" | "loop_handle_cmd" | "do_req_filebacked" => {
                flags |= STACK_LOOP
            }
            "relocate_file_extent_cluster" => flags |= STACK_RELOCATION,
            "btrfs_finish_ordered_io" | "btrfs_finish_one_ordered" => flags |= STACK_BTRFS_FINISH,
            "btrfs_commit_transaction" => flags |= STACK_BTRFS_COMMIT,
            "btrfs_sync_log" => flags |= STACK_BTRFS_LOG_SYNC,
            b if b.starts_with("btrfs_log_") => flags |= STACK_BTRFS_LOG,
            b if b.starts_with("xlog_") => flags |= STACK_JOURNAL,
            _ => {}
        }
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(name: &str, minor: u32, size: u64, part_start: u64, parent: &str) -> BlockDevice {
        BlockDevice {
            name: name.into(),
            major: 8,
            minor,
            size_sectors: size,
            part_start,
            parent: parent.into(),
            ..BlockDevice::default()
        }
    }

    const SDA: Dev = 8 << 20;
    const SDA1: Dev = (8 << 20) | 1;

    #[test]
    fn partitions_resolve_to_their_disk() {
        let devs = Devices::new(
            &[
                dev("sda", 0, 1 << 20, 0, ""),
                dev("sda1", 1, 1000, 2048, "sda"),
            ],
            &[(SDA1, 1024), (SDA, 3000)],
        );
        assert_eq!(
            devs.info(SDA1),
            DevInfo {
                disk: SDA,
                part_start: 2048,
                size: 1000
            }
        );
        assert_eq!(devs.info(SDA).part_start, 0);
        // unknown: a disk of its own, of unknown size
        let other = 7 << 20;
        assert_eq!(devs.info(other), DevInfo::unknown(other));
        assert_eq!(devs.info(SDA1).buffer_sector(10, 4096), 2048 + 80);
        // the bdev inode's page cache events name the device as the inode
        assert_eq!(devs.folio_disk(0, SDA1 as u64), SDA);
        assert_eq!(devs.folio_disk(SDA1, 12), SDA);
        // the mount table's block sizes, where they are block sizes
        assert_eq!(devs.block_size(SDA1), 1024);
        assert_eq!(devs.block_size(SDA), 4096);
    }

    #[test]
    fn buffers_and_remaps_teach_block_sizes_and_partition_starts() {
        let mut devs = Devices::new(&[dev("sda1", 1, 1000, 0, "")], &[]);
        assert!(!devs.learn_block_size(SDA1, 3000));
        assert!(devs.learn_block_size(SDA1, 2048));
        // xfs block numbers: group in the high bits; delalloc and hole sentinels map nowhere.
        let xfs = Devices::new(&[], &[(SDA1, 4096)]).with_xfs_geometry(&[(SDA1, 20480, 15)]);
        assert_eq!(xfs.xfs_block_byte(SDA1, 24), Some(24 * 4096));
        assert_eq!(
            xfs.xfs_block_byte(SDA1, (1 << 15) | 100),
            Some((20480 + 100) * 4096)
        );
        assert_eq!(
            xfs.xfs_block_byte(SDA1, 4503599627239435),
            None,
            "5.10's delalloc"
        );
        assert_eq!(xfs.xfs_block_byte(SDA1, u64::MAX - 1), None);
        assert_eq!(xfs.xfs_block_byte(0x700000, 24), None, "no geometry");
        assert_eq!(devs.block_size(SDA1), 2048);
        // a remap from the partition's sector 10 to the disk's 2058: it starts at 2048
        assert_eq!(devs.learn_part_start(SDA1, 2058, 10), None);
        assert_eq!(devs.info(SDA1).part_start, 2048);
        // a contradiction: the remap wins, and the old start is told
        assert_eq!(devs.learn_part_start(SDA1, 4106, 10), Some(2048));
        assert_eq!(devs.info(SDA1).part_start, 4096);
        // nothing to learn from a remap to a lower sector or to the same sector
        assert_eq!(devs.learn_part_start(SDA1, 5, 10), None);
        assert_eq!(devs.learn_part_start(SDA1, 10, 10), None);
        assert_eq!(devs.info(SDA1).part_start, 4096);
    }
}
