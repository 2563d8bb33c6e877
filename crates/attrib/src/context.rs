//! What the attribution needs to know about the recording host: devices, page size, the
//! recorder, the tasks alive at start and, optionally, kernel symbols.

use std::borrow::Cow;

use ioblame_decode::Dev;
use ioblame_format::{BlockDevice, Header, Metadata, Task};

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
        }
    }
}

/// What the attribution knows about one device, resolved once.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DevInfo {
    /// Whole disk holding this device (itself for a disk).
    pub disk: Dev,
    /// Partition start on the disk, in sectors.
    pub part_start: u64,
    /// Size in sectors (0 when unknown).
    pub size: u64,
}

/// Stack classes found by symbol names.
pub(crate) const STACK_DIO: u8 = 1;
/// A journal commit stack (jbd2 commit or xfs log).
pub(crate) const STACK_JOURNAL: u8 = 2;

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
            b if b.starts_with("xlog_") => flags |= STACK_JOURNAL,
            _ => {}
        }
    }
    flags
}
