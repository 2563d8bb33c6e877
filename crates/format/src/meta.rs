//! The trace header and the metadata sections.
//!
//! All of these are ioblame's own structures and are always encoded little-endian; see
//! `docs/format.md` for the byte layout.
// The decoding half serves the reader (feature `reader`); the recorder builds the format
// without it and only encodes.
#![cfg_attr(not(feature = "reader"), allow(dead_code))]

use crate::codec::{
    check_frame, decompress_exact, zstd_frame, Dec, Enc, INITIAL_CAPACITY, MAX_METADATA_RATIO,
};
use crate::error::DecodeError;

/// Byte order of the recording host, which is the byte order of every raw perf record
/// (defined with the perf record format, in `ioblame-perfrec`).
pub use ioblame_perfrec::ByteOrder;

/// The header's code of a byte order.
fn byte_order_code(o: ByteOrder) -> u8 {
    match o {
        ByteOrder::Little => 1,
        ByteOrder::Big => 2,
    }
}

/// The byte order of a header's code.
fn byte_order_from_code(c: u8) -> Option<ByteOrder> {
    match c {
        1 => Some(ByteOrder::Little),
        2 => Some(ByteOrder::Big),
        _ => None,
    }
}

/// The trace header: who recorded the trace, where and when. Repeated in every ring file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Byte order of the recording host (and of every raw perf record).
    pub byte_order: ByteOrder,
    /// Word size of the recording host in bytes (8 on 64-bit kernels).
    pub word_size: u8,
    /// Page size of the recording host in bytes.
    pub page_size: u32,
    /// Number of CPUs (possible CPUs; per-CPU chunk numbers are below this).
    pub cpu_count: u32,
    /// Clock of the perf timestamps (a `clockid_t`, e.g. 1 = CLOCK_MONOTONIC), or -1 for perf's
    /// default local clock.
    pub clock_id: i32,
    /// Process id of the recorder, so its own IO can be told apart.
    pub recorder_pid: u32,
    /// Index of this file within the ring (0 for the first file of a capture).
    pub file_index: u32,
    /// Wall-clock time the capture started, nanoseconds since the Unix epoch.
    pub start_time_ns: u64,
    /// Reading of the perf clock (`clock_id`) at the same instant as `start_time_ns`.
    pub start_clock_ns: u64,
    /// Random identifier shared by all ring files of one capture.
    pub trace_id: u64,
    /// Host name of the recording host.
    pub hostname: String,
    /// Kernel release of the recording host (`uname -r`).
    pub kernel_release: String,
    /// Machine architecture of the recording host (`uname -m`).
    pub machine: String,
    /// Name and version of the recorder, e.g. `ioblame-capture 0.1.0`.
    pub recorder_version: String,
}

impl Header {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.u8(byte_order_code(self.byte_order))
            .u8(self.word_size)
            .u16(0)
            .u32(self.page_size)
            .u32(self.cpu_count)
            .i32(self.clock_id)
            .u32(self.recorder_pid)
            .u32(self.file_index)
            .u64(self.start_time_ns)
            .u64(self.start_clock_ns)
            .u64(self.trace_id)
            .str(&self.hostname)
            .str(&self.kernel_release)
            .str(&self.machine)
            .str(&self.recorder_version);
        e.buf
    }

    pub(crate) fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut d = Dec::new(b);
        let bo = d.u8("byte order")?;
        let byte_order = byte_order_from_code(bo)
            .ok_or_else(|| DecodeError::new(0, format!("unknown byte order code {bo}")))?;
        let word_size = d.u8("word size")?;
        if word_size != 4 && word_size != 8 {
            return Err(DecodeError::new(
                1,
                format!("word size {word_size} is neither 4 nor 8"),
            ));
        }
        d.u16("reserved")?;
        Ok(Header {
            byte_order,
            word_size,
            page_size: d.u32("page size")?,
            cpu_count: d.u32("cpu count")?,
            clock_id: d.i32("clock id")?,
            recorder_pid: d.u32("recorder pid")?,
            file_index: d.u32("file index")?,
            start_time_ns: d.u64("start time")?,
            start_clock_ns: d.u64("start clock")?,
            trace_id: d.u64("trace id")?,
            hostname: d.str("host name")?,
            kernel_release: d.str("kernel release")?,
            machine: d.str("machine")?,
            recorder_version: d.str("recorder version")?,
            // Bytes after the known fields belong to newer minor versions: ignored.
        })
    }
}

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
}

impl EventDesc {
    /// Whether samples of this event carry callchains.
    pub fn callchain(&self) -> bool {
        self.flags & EVENT_CALLCHAIN != 0
    }
}

/// A block device of the recording host.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BlockDevice {
    /// Kernel name, e.g. `sda`, `sda1`, `loop0`.
    pub name: String,
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
    /// Size in 512-byte sectors.
    pub size_sectors: u64,
    /// For a partition, its start sector on the whole disk; 0 otherwise.
    pub part_start: u64,
    /// For a partition, the name of the whole disk; empty otherwise.
    pub parent: String,
    /// For a loop device, its backing file; empty otherwise.
    pub loop_backing_file: String,
    /// Logical block size in bytes.
    pub logical_block_size: u32,
}

impl BlockDevice {
    /// The kernel's internal dev_t encoding used in tracepoint payloads: `major << 20 | minor`.
    pub fn kernel_dev(&self) -> u32 {
        kernel_dev(self.major, self.minor)
    }
    /// The userspace (glibc `makedev`) encoding of the device number.
    pub fn user_dev(&self) -> u64 {
        user_dev(self.major, self.minor)
    }
}

/// The kernel's internal dev_t: `major << 20 | minor`.
pub fn kernel_dev(major: u32, minor: u32) -> u32 {
    (major << 20) | (minor & 0xfffff)
}

/// The userspace dev_t (glibc `makedev` encoding).
pub fn user_dev(major: u32, minor: u32) -> u64 {
    let (ma, mi) = (major as u64, minor as u64);
    ((ma & 0xfffff000) << 32) | ((ma & 0xfff) << 8) | ((mi & 0xffffff00) << 12) | (mi & 0xff)
}

/// One mount of the recording host (from `/proc/self/mountinfo`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mount {
    /// Mount id.
    pub mount_id: u32,
    /// Major number of the mounted device (`st_dev`).
    pub major: u32,
    /// Minor number of the mounted device.
    pub minor: u32,
    /// Root of the mount within the filesystem.
    pub root: String,
    /// Mount point.
    pub mount_point: String,
    /// Filesystem type, e.g. `ext4`.
    pub fs_type: String,
    /// Mount source, e.g. `/dev/loop0`.
    pub source: String,
    /// Block size of the mounted filesystem in bytes (`statfs` `f_bsize`), 0 when unknown
    /// (not recorded, or files of format 1.0).
    pub block_size: u32,
    /// Of an xfs filesystem: blocks per allocation group (`sb_agblocks`), 0 when unknown (not
    /// xfs, not read, or files before format 1.4). An xfs block number (`xfs_fsblock_t`) is
    /// the group number shifted left by [`Mount::xfs_agblklog`] plus the block in the group.
    pub xfs_agblocks: u32,
    /// Of an xfs filesystem: log2 of the group size rounded up (`sb_agblklog`).
    pub xfs_agblklog: u8,
}

/// A task alive when the capture (or this ring file) started.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Task {
    /// Process id (thread group id).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Command name (`/proc/PID/task/TID/comm`).
    pub comm: String,
}

/// A snapshot of `/proc/kallsyms` of the recording host.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Kallsyms {
    /// The text of `/proc/kallsyms`.
    pub text: String,
    /// Whether the addresses were hidden (all zero, `kptr_restrict` or missing privilege).
    pub restricted: bool,
}

/// Everything a trace says about its recording besides the records themselves.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Metadata {
    /// The recorded events.
    pub events: Vec<EventDesc>,
    /// Kernel symbols, if the recorder could read them.
    pub kallsyms: Option<Kallsyms>,
    /// Block devices.
    pub block_devices: Vec<BlockDevice>,
    /// Mounts.
    pub mounts: Vec<Mount>,
    /// Tasks alive at start.
    pub tasks: Vec<Task>,
    /// Free-form facts about the capture (`key`, `value`): command line, device filter, ...
    pub capture_info: Vec<(String, String)>,
    /// The cgroup2 hierarchy's cgroups (id -> path), format 1.3; empty when not recorded.
    pub cgroups: Vec<Cgroup>,
    /// The loop devices over files and where their sectors go (LOOPS block, format 1.7):
    /// every mapping the recorder saw, those set up while recording with the time they were
    /// found; empty when there was none (or before 1.7).
    pub loops: Vec<LoopDevice>,
    /// The device-mapper targets that map their sectors one to one onto a lower device
    /// (`linear`, `crypt`; DM_TARGETS block, format 1.7): empty when there was none.
    pub dm_targets: Vec<DmTarget>,
    /// The executable mappings of the processes whose user stacks were recorded, read by the
    /// recorder (USER_MAPS block, format 1.8; `record --user-stacks`): empty otherwise.
    /// Mappings made while recording are in the records (`PERF_RECORD_MMAP2`).
    pub user_maps: Vec<UserMap>,
}

/// A device-mapper target mapping sectors `[start, start + length)` of a dm device one to
/// one onto a lower device from `lower_offset` on (DM_TARGETS block, format 1.7): sector `S`
/// of the dm device is sector `S - start + lower_offset` of the lower device.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DmTarget {
    /// The dm device's major number.
    pub major: u32,
    /// The dm device's minor number.
    pub minor: u32,
    /// First sector of the dm device the target covers.
    pub start: u64,
    /// Sectors it covers.
    pub length: u64,
    /// The target type, `linear` or `crypt`.
    pub target: String,
    /// The lower device's major number.
    pub lower_major: u32,
    /// The lower device's minor number.
    pub lower_minor: u32,
    /// The lower device's sector of the target's first sector.
    pub lower_offset: u64,
    /// From when the mapping holds (trace clock, ns); 0: before the recording began.
    pub since_ns: u64,
}

impl DmTarget {
    /// The dm device in the kernel encoding.
    pub fn kernel_dev(&self) -> u32 {
        kernel_dev(self.major, self.minor)
    }
    /// The lower device in the kernel encoding.
    pub fn lower_kernel_dev(&self) -> u32 {
        kernel_dev(self.lower_major, self.lower_minor)
    }
    /// Whether `other` is the same target, whenever it was found.
    pub fn same_target(&self, other: &DmTarget) -> bool {
        DmTarget {
            since_ns: 0,
            ..self.clone()
        } == DmTarget {
            since_ns: 0,
            ..other.clone()
        }
    }
}

/// A loop device backed by a file (LOOPS block, format 1.7): sector `S` of the loop device
/// is byte `S * 512 + offset` of the backing file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoopDevice {
    /// The loop device's major number.
    pub major: u32,
    /// The loop device's minor number.
    pub minor: u32,
    /// The device of the filesystem holding the backing file (its `st_dev`): major.
    pub backing_major: u32,
    /// The same device's minor.
    pub backing_minor: u32,
    /// The backing file's inode number.
    pub backing_ino: u64,
    /// Byte offset in the backing file of the loop device's sector 0 (`lo_offset`).
    pub offset: u64,
    /// The loop device's size limit in bytes, 0 for none (`lo_sizelimit`).
    pub size_limit: u64,
    /// Whether the loop device reads and writes its backing file with direct IO.
    pub direct_io: bool,
    /// From when the mapping holds (trace clock, ns): 0 when it was set up before the
    /// recording began.
    pub since_ns: u64,
    /// The backing file's path as the recording host's sysfs names it.
    pub backing_file: String,
}

impl LoopDevice {
    /// The loop device in the kernel encoding (`major << 20 | minor`).
    pub fn kernel_dev(&self) -> u32 {
        kernel_dev(self.major, self.minor)
    }
    /// The backing file's filesystem device in the kernel encoding.
    pub fn backing_kernel_dev(&self) -> u32 {
        kernel_dev(self.backing_major, self.backing_minor)
    }
    /// Whether `other` is the same mapping (the same loop device over the same file at the
    /// same offset), whenever it was found.
    pub fn same_mapping(&self, other: &LoopDevice) -> bool {
        let key = |l: &LoopDevice| {
            let (a, b, c) = (l.major, l.minor, l.backing_major);
            (a, b, c, l.backing_minor, l.backing_ino, l.offset)
        };
        key(self) == key(other)
    }
}

/// One cgroup of the recording host's cgroup2 hierarchy (CGROUPS block, format 1.3).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cgroup {
    /// The cgroup id the kernel reports (`PERF_SAMPLE_CGROUP`, the `cgroup_ino` of the
    /// writeback events): the inode number of its directory in the cgroup2 filesystem.
    pub id: u64,
    /// Its path under the cgroup2 mount, from `/` (the root cgroup) on, e.g.
    /// `/system.slice/nginx.service`.
    pub path: String,
}

impl Metadata {
    /// Looks up a capture-info value by key.
    pub fn info(&self, key: &str) -> Option<&str> {
        self.capture_info
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Cap on the uncompressed size of the kallsyms section.
pub const MAX_KALLSYMS: usize = 256 << 20;

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
        });
    }
    Ok(v)
}

/// The kallsyms text compressed as one frame (KALLSYMS, format 1.1): written by the
/// tests only, as older recorders did.
#[cfg(test)]
pub(crate) fn encode_kallsyms(k: &Kallsyms) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(k.restricted as u32).u32(k.text.len() as u32);
    let z = zstd::bulk::compress(k.text.as_bytes(), 1).unwrap_or_default();
    e.bytes(&z);
    e.buf
}

pub(crate) fn decode_kallsyms(b: &[u8]) -> Result<Kallsyms, DecodeError> {
    let mut d = Dec::new(b);
    let flags = d.u32("kallsyms flags")?;
    let len = d.u32("kallsyms length")? as usize;
    let z = d.take(d.remaining(), "kallsyms")?;
    let raw = zstd_frame(z, len, MAX_KALLSYMS, Some(MAX_METADATA_RATIO))
        .map_err(|e| DecodeError::new(4, format!("kallsyms: {e}")))?;
    let text = String::from_utf8(raw).map_err(|_| DecodeError::new(8, "kallsyms: not UTF-8"))?;
    Ok(Kallsyms {
        text,
        restricted: flags & 1 != 0,
    })
}

/// Text per part of a KALLSYMS_PARTS block (a part ends at the end of a line, so it may be
/// a line longer).
const KALLSYMS_PART: usize = 1 << 20;

/// Most parts a KALLSYMS_PARTS block may have.
const MAX_KALLSYMS_PARTS: usize = 1024;

/// The kallsyms text in parts of whole lines, each its own zstd frame (KALLSYMS_PARTS,
/// format 1.2): a reader decompresses them at once on several cores. One frame took the
/// analyzer 5 ms on a 5.4 MB snapshot while its other cores had nothing to do yet.
pub(crate) fn encode_kallsyms_parts(k: &Kallsyms) -> Vec<u8> {
    let text = k.text.as_bytes();
    let mut parts = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = start.saturating_add(KALLSYMS_PART).min(text.len());
        if let Some(nl) = text[end..].iter().position(|&c| c == b'\n') {
            end += nl + 1;
        } else {
            end = text.len();
        }
        parts.push(&text[start..end]);
        start = end;
    }
    // Level 1: on a 5.4 MB /proc/kallsyms (kernel 6.18) it gives about 1.0 MB in 0.02 s
    // where level 6 gave 0.84 MB in 0.09 s, a third of the recorder's start-up CPU.
    let mut c = zstd::bulk::Compressor::new(1).ok();
    let frames: Vec<Vec<u8>> = parts
        .iter()
        .map(|p| {
            c.as_mut()
                .and_then(|c| c.compress(p).ok())
                .unwrap_or_default()
        })
        .collect();
    let mut e = Enc::default();
    e.u32(k.restricted as u32)
        .u32(text.len() as u32)
        .u32(parts.len() as u32);
    for (p, z) in parts.iter().zip(&frames) {
        e.u32(z.len() as u32).u32(p.len() as u32);
    }
    for z in &frames {
        e.bytes(z);
    }
    e.buf
}

pub(crate) fn decode_kallsyms_parts(b: &[u8]) -> Result<Kallsyms, DecodeError> {
    let mut d = Dec::new(b);
    let flags = d.u32("kallsyms flags")?;
    let len = d.u32("kallsyms length")? as usize;
    if len > MAX_KALLSYMS {
        return Err(DecodeError::new(
            4,
            format!("kallsyms: declares {len} bytes, over the cap of {MAX_KALLSYMS}"),
        ));
    }
    let n = d.count(8, "kallsyms parts")?;
    if n > MAX_KALLSYMS_PARTS {
        return Err(DecodeError::new(
            8,
            format!("kallsyms: {n} parts, more than {MAX_KALLSYMS_PARTS}"),
        ));
    }
    let mut sizes = Vec::with_capacity(n);
    let mut total = 0usize;
    for _ in 0..n {
        let z = d.u32("kallsyms part length")? as usize;
        let u = d.u32("kallsyms part text length")? as usize;
        total = total.saturating_add(u);
        sizes.push((z, u));
    }
    if total != len {
        return Err(DecodeError::new(
            4,
            format!("kallsyms: the parts hold {total} bytes, the block declares {len}"),
        ));
    }
    // The whole against the frames' total size, as one frame's would be (tiny frames of
    // 64 KiB each could otherwise declare 64 MiB from a few kilobytes).
    let packed = sizes.iter().fold(0usize, |a, &(z, _)| a.saturating_add(z));
    let most = packed.saturating_mul(MAX_METADATA_RATIO).max(1 << 16);
    if len > most {
        return Err(DecodeError::new(
            4,
            format!(
                "kallsyms: declares {len} bytes from {packed} bytes of frames, more than \
                 {MAX_METADATA_RATIO} times their size"
            ),
        ));
    }
    let mut frames = Vec::with_capacity(n);
    for &(z, u) in &sizes {
        let at = d.pos();
        let f = d.take(z, "kallsyms part")?;
        // Each part's size against its frame's before anything is allocated.
        check_frame(f, u, MAX_KALLSYMS, Some(MAX_METADATA_RATIO))
            .map_err(|e| DecodeError::new(at, format!("kallsyms part: {e}")))?;
        frames.push((at, f));
    }
    if d.remaining() != 0 {
        return Err(DecodeError::new(
            d.pos(),
            format!("kallsyms: {} bytes after the last part", d.remaining()),
        ));
    }
    let mut text = vec![0u8; len];
    let mut outs = Vec::with_capacity(n);
    let mut rest: &mut [u8] = &mut text;
    for &(_, u) in &sizes {
        let (part, tail) = rest.split_at_mut(u);
        outs.push(part);
        rest = tail;
    }
    // Per part: where its frame is in the payload, the frame (checked above), and its
    // place in the text.
    type Job<'a, 'b> = ((usize, &'a [u8]), &'b mut [u8]);
    let jobs: Vec<Job> = frames.into_iter().zip(outs).collect();
    let run = |((at, f), out): Job| {
        let declared = out.len();
        decompress_exact(f, out, declared)
            .map_err(|e| DecodeError::new(at, format!("kallsyms part: {e}")))
    };
    #[cfg(feature = "parallel")]
    let done: Result<Vec<()>, DecodeError> = {
        use rayon::prelude::*;
        jobs.into_par_iter().map(run).collect()
    };
    #[cfg(not(feature = "parallel"))]
    let done: Result<Vec<()>, DecodeError> = jobs.into_iter().map(run).collect();
    done?;
    let text = String::from_utf8(text).map_err(|_| DecodeError::new(8, "kallsyms: not UTF-8"))?;
    Ok(Kallsyms {
        text,
        restricted: flags & 1 != 0,
    })
}

pub(crate) fn encode_block_devices(v: &[BlockDevice]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(v.len() as u32);
    for b in v {
        e.str(&b.name)
            .u32(b.major)
            .u32(b.minor)
            .u32(b.kernel_dev())
            .u32(b.logical_block_size)
            .u64(b.user_dev())
            .u64(b.size_sectors)
            .u64(b.part_start)
            .str(&b.parent)
            .str(&b.loop_backing_file);
    }
    e.buf
}

pub(crate) fn decode_block_devices(b: &[u8]) -> Result<Vec<BlockDevice>, DecodeError> {
    let mut d = Dec::new(b);
    let n = d.count(52, "device count")?;
    let mut v = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    for _ in 0..n {
        let name = d.str("device name")?;
        let major = d.u32("major")?;
        let minor = d.u32("minor")?;
        let _kdev = d.u32("kernel dev")?;
        let logical_block_size = d.u32("logical block size")?;
        let _udev = d.u64("user dev")?;
        v.push(BlockDevice {
            name,
            major,
            minor,
            logical_block_size,
            size_sectors: d.u64("size")?,
            part_start: d.u64("partition start")?,
            parent: d.str("parent")?,
            loop_backing_file: d.str("loop backing file")?,
        });
    }
    Ok(v)
}

pub(crate) fn encode_mounts(v: &[Mount]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(v.len() as u32);
    for m in v {
        e.u32(m.mount_id)
            .u32(m.major)
            .u32(m.minor)
            .str(&m.root)
            .str(&m.mount_point)
            .str(&m.fs_type)
            .str(&m.source);
    }
    // Format 1.1: the block sizes follow the entries, so 1.0 readers (which ignore trailing
    // bytes) still read the entries.
    e.u32(v.len() as u32);
    for m in v {
        e.u32(m.block_size);
    }
    // Format 1.4: the xfs geometry, after the block sizes (1.1 to 1.3 readers ignore it).
    e.u32(v.len() as u32);
    for m in v {
        e.u32(m.xfs_agblocks).u32(m.xfs_agblklog as u32);
    }
    e.buf
}

pub(crate) fn decode_mounts(b: &[u8]) -> Result<Vec<Mount>, DecodeError> {
    let mut d = Dec::new(b);
    let n = d.count(28, "mount count")?;
    let mut v = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    for _ in 0..n {
        v.push(Mount {
            mount_id: d.u32("mount id")?,
            major: d.u32("major")?,
            minor: d.u32("minor")?,
            root: d.str("root")?,
            mount_point: d.str("mount point")?,
            fs_type: d.str("fs type")?,
            source: d.str("source")?,
            ..Mount::default()
        });
    }
    if d.remaining() > 0 {
        let at = b.len() - d.remaining();
        let nb = d.count(4, "mount block size count")?;
        if nb != n {
            return Err(DecodeError::new(
                at,
                format!("{nb} mount block sizes for {n} mounts"),
            ));
        }
        for m in &mut v {
            m.block_size = d.u32("mount block size")?;
        }
    }
    if d.remaining() > 0 {
        let at = b.len() - d.remaining();
        let nx = d.count(8, "mount xfs geometry count")?;
        if nx != n {
            return Err(DecodeError::new(
                at,
                format!("{nx} mount xfs geometries for {n} mounts"),
            ));
        }
        for m in &mut v {
            m.xfs_agblocks = d.u32("mount xfs agblocks")?;
            let log = d.u32("mount xfs agblklog")?;
            m.xfs_agblklog = u8::try_from(log).ok().filter(|l| *l <= 32).unwrap_or(0);
            if m.xfs_agblklog == 0 {
                m.xfs_agblocks = 0;
            }
        }
    }
    Ok(v)
}

pub(crate) fn encode_tasks(v: &[Task]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(v.len() as u32);
    for t in v {
        e.u32(t.pid).u32(t.tid).str(&t.comm);
    }
    e.buf
}

pub(crate) fn decode_tasks(b: &[u8]) -> Result<Vec<Task>, DecodeError> {
    let mut d = Dec::new(b);
    let n = d.count(12, "task count")?;
    let mut v = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    for _ in 0..n {
        v.push(Task {
            pid: d.u32("pid")?,
            tid: d.u32("tid")?,
            comm: d.str("comm")?,
        });
    }
    Ok(v)
}

pub(crate) fn encode_info(v: &[(String, String)]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(v.len() as u32);
    for (k, val) in v {
        e.str(k).str(val);
    }
    e.buf
}

pub(crate) fn decode_info(b: &[u8]) -> Result<Vec<(String, String)>, DecodeError> {
    let mut d = Dec::new(b);
    let n = d.count(8, "info count")?;
    let mut v = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    for _ in 0..n {
        v.push((d.str("key")?, d.str("value")?));
    }
    Ok(v)
}

pub(crate) fn encode_cgroups(v: &[Cgroup]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(v.len() as u32);
    for c in v {
        e.u64(c.id).str(&c.path);
    }
    e.buf
}

pub(crate) fn decode_cgroups(b: &[u8]) -> Result<Vec<Cgroup>, DecodeError> {
    let mut d = Dec::new(b);
    let n = d.count(12, "cgroup count")?;
    let mut v = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    for _ in 0..n {
        let id = d.u64("cgroup id")?;
        let path = d.str("cgroup path")?;
        v.push(Cgroup { id, path });
    }
    Ok(v)
}

/// Most entries a LOOPS or DM_TARGETS block may hold (a host has a few hundred at most).
pub const MAX_LAYER_ENTRIES: usize = 1 << 16;

/// `LoopDevice::direct_io` in a LOOPS entry's flags.
const LOOP_DIRECT_IO: u32 = 1;

/// A LOOPS payload (format 1.7): a count, then each mapping as a length-prefixed entry (so
/// that newer minor versions can add trailing fields to an entry).
pub(crate) fn encode_loops(v: &[LoopDevice]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(v.len() as u32);
    for l in v {
        let mut x = Enc::default();
        x.u32(l.major)
            .u32(l.minor)
            .u32(l.backing_major)
            .u32(l.backing_minor)
            .u64(l.backing_ino)
            .u64(l.offset)
            .u64(l.size_limit)
            .u64(l.since_ns)
            .u32(if l.direct_io { LOOP_DIRECT_IO } else { 0 })
            .str(&l.backing_file);
        e.u32(x.buf.len() as u32).bytes(&x.buf);
    }
    e.buf
}

/// Decodes a LOOPS payload; bytes after the known fields of an entry are skipped.
pub(crate) fn decode_loops(b: &[u8]) -> Result<Vec<LoopDevice>, DecodeError> {
    let mut d = Dec::new(b);
    let n = d.count(4 + 48, "loop device count")?;
    if n > MAX_LAYER_ENTRIES {
        return Err(DecodeError::new(
            0,
            format!("{n} loop devices: more than {MAX_LAYER_ENTRIES}"),
        ));
    }
    let mut v = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    for _ in 0..n {
        let len = d.u32("loop entry length")? as usize;
        let at = d.pos();
        let entry = d.take(len, "loop entry")?;
        let mut x = Dec::new(entry);
        let rel = |e: DecodeError| DecodeError::new(at + e.at, e.what);
        let mut one = || -> Result<LoopDevice, DecodeError> {
            Ok(LoopDevice {
                major: x.u32("loop major")?,
                minor: x.u32("loop minor")?,
                backing_major: x.u32("backing major")?,
                backing_minor: x.u32("backing minor")?,
                backing_ino: x.u64("backing inode")?,
                offset: x.u64("loop offset")?,
                size_limit: x.u64("loop size limit")?,
                since_ns: x.u64("loop since")?,
                direct_io: x.u32("loop flags")? & LOOP_DIRECT_IO != 0,
                backing_file: x.str("backing file")?,
            })
        };
        v.push(one().map_err(rel)?);
    }
    Ok(v)
}

/// A DM_TARGETS payload (format 1.7): a count, then each target as a length-prefixed entry.
pub(crate) fn encode_dm_targets(v: &[DmTarget]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(v.len() as u32);
    for t in v {
        let mut x = Enc::default();
        x.u32(t.major)
            .u32(t.minor)
            .u64(t.start)
            .u64(t.length)
            .u32(t.lower_major)
            .u32(t.lower_minor)
            .u64(t.lower_offset)
            .u64(t.since_ns)
            .str(&t.target);
        e.u32(x.buf.len() as u32).bytes(&x.buf);
    }
    e.buf
}

/// Decodes a DM_TARGETS payload; bytes after the known fields of an entry are skipped.
pub(crate) fn decode_dm_targets(b: &[u8]) -> Result<Vec<DmTarget>, DecodeError> {
    let mut d = Dec::new(b);
    let n = d.count(4 + 52, "dm target count")?;
    if n > MAX_LAYER_ENTRIES {
        return Err(DecodeError::new(
            0,
            format!("{n} dm targets: more than {MAX_LAYER_ENTRIES}"),
        ));
    }
    let mut v = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    for _ in 0..n {
        let len = d.u32("dm target entry length")? as usize;
        let at = d.pos();
        let entry = d.take(len, "dm target entry")?;
        let mut x = Dec::new(entry);
        let rel = |e: DecodeError| DecodeError::new(at + e.at, e.what);
        let mut one = || -> Result<DmTarget, DecodeError> {
            Ok(DmTarget {
                major: x.u32("dm major")?,
                minor: x.u32("dm minor")?,
                start: x.u64("dm target start")?,
                length: x.u64("dm target length")?,
                lower_major: x.u32("lower major")?,
                lower_minor: x.u32("lower minor")?,
                lower_offset: x.u64("lower offset")?,
                since_ns: x.u64("dm since")?,
                target: x.str("dm target type")?,
            })
        };
        v.push(one().map_err(rel)?);
    }
    Ok(v)
}

/// A FLUSHED payload (format 1.6): the time below which every record is written.
pub(crate) fn encode_flushed(time_ns: u64) -> Vec<u8> {
    let mut e = Enc::default();
    e.u64(time_ns);
    e.buf
}

/// Decodes a FLUSHED payload. Bytes after the time belong to newer minor versions: ignored.
pub(crate) fn decode_flushed(b: &[u8]) -> Result<u64, DecodeError> {
    Dec::new(b).u64("flushed time")
}

/// One file of the recording host: which inode of which filesystem had which path.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileEntry {
    /// The filesystem's device in the kernel encoding (`major << 20 | minor`), as in the
    /// `dev`/`s_dev` fields of tracepoint payloads.
    pub dev: u32,
    /// Inode number.
    pub ino: u64,
    /// Absolute path on the recording host (non-UTF-8 bytes replaced by U+FFFD).
    pub path: String,
}

/// `FileTable::flags` bit: the walk stopped at its entry cap; other files exist.
pub const FILES_CAPPED: u32 = 1;
/// `FileTable::flags` bit: the walk stopped at its time budget; other files exist.
pub const FILES_TIMED_OUT: u32 = 2;
/// `FileTable::flags` bit: the table was taken when the capture ended (else when it started).
pub const FILES_AT_END: u32 = 4;

/// Cap on the uncompressed size of a FILES table.
pub const MAX_FILES_TABLE: usize = 256 << 20;

/// `FileTable::flags` bit: the table names the inodes the trace's events refer to (found by
/// file handle, or by a walk that stopped once it had found them), not every file of the
/// recorded filesystems (format 1.5).
pub const FILES_TOUCHED: u32 = 8;

/// Why a file the trace refers to has no path in a FILE_INDEX table (format 1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Unnamed {
    /// The inode no longer existed when the recorder looked it up: the file was deleted
    /// before it could be named.
    Deleted = 1,
    /// The recorder could not look it up by file handle (the filesystem takes none, or the
    /// recorder lacked the capability) and its walk did not find it within its budget.
    NotFound = 2,
    /// The inode exists but has no path the recorder could see (a filesystem's own inode,
    /// such as ext4's journal; or outside the mounts visible to the recorder).
    NoPath = 3,
}

impl Unnamed {
    /// The value stored in a table entry's state byte.
    pub fn code(self) -> u8 {
        self as u8
    }
    /// The reason of a state byte; `None` for 0 (named) and unknown values.
    pub fn from_code(c: u8) -> Option<Unnamed> {
        match c {
            1 => Some(Unnamed::Deleted),
            2 => Some(Unnamed::NotFound),
            3 => Some(Unnamed::NoPath),
            _ => None,
        }
    }
    /// What it means, for the outputs.
    pub fn describe(self) -> &'static str {
        match self {
            Unnamed::Deleted => "deleted before the recorder could name it",
            Unnamed::NotFound => "not found by the recorder (no file handles, walk cut short)",
            Unnamed::NoPath => {
                "no path (a filesystem's own inode, such as ext4's journal, or outside the recorder's mounts)"
            }
        }
    }
}

/// A file the trace refers to that the recorder could not name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnnamedFile {
    /// The filesystem's device (kernel encoding).
    pub dev: u32,
    /// Inode number.
    pub ino: u64,
    /// Why it has no path.
    pub why: Unnamed,
}

/// A FILES section: paths of the inodes of the recorded filesystems (format 1.1), written as a
/// FILE_INDEX block since format 1.5.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileTable {
    /// `FILES_*` flags.
    pub flags: u32,
    /// The files, in any order.
    pub entries: Vec<FileEntry>,
    /// Files the trace refers to that have no path, with the reason (format 1.5).
    pub unnamed: Vec<UnnamedFile>,
}

/// Smallest encoded entry: dev, ino and an empty path.
const FILE_ENTRY_MIN: usize = 16;

/// Entries per group of a FILE_INDEX table: a lookup decompresses one group, a few tens of
/// kilobytes of paths.
const GROUP_ENTRIES: usize = 512;
/// Bytes of a group's index entry: first dev u32, first inode u64, entries u32, raw length
/// u32, compressed length u32.
const GROUP_INDEX_LEN: usize = 24;
/// Smallest encoded FILE_INDEX entry: dev, inode, state and an empty path.
const INDEX_ENTRY_MIN: usize = 17;

/// Encodes a FILE_INDEX payload (format 1.5): the entries and the unnamed files sorted by
/// (dev, inode), one per inode (a named entry wins over an unnamed one, the first of equals
/// over the others), in groups of [`GROUP_ENTRIES`] compressed apart, behind an index of the
/// groups' first keys. See docs/format.md.
pub(crate) fn encode_file_index(t: &FileTable) -> Vec<u8> {
    let mut all: Vec<(u32, u64, u8, &str)> = t
        .entries
        .iter()
        .map(|e| (e.dev, e.ino, 0u8, e.path.as_str()))
        .chain(t.unnamed.iter().map(|u| (u.dev, u.ino, u.why.code(), "")))
        .collect();
    // Stable: among entries of one inode the named ones (listed first) and then the first
    // listed come first, and only the first is kept.
    all.sort_by_key(|&(d, i, _, _)| (d, i));
    all.dedup_by_key(|&mut (d, i, _, _)| (d, i));
    let named = all.iter().filter(|e| e.2 == 0).count();
    let mut index = Enc::default();
    let mut frames = Enc::default();
    let groups = all.chunks(GROUP_ENTRIES);
    let ngroups = groups.len();
    for g in groups {
        let mut raw = Enc::default();
        for &(dev, ino, state, path) in g {
            raw.u32(dev).u64(ino).u8(state).str(path);
        }
        let z = zstd::bulk::compress(&raw.buf, 3).unwrap_or_default();
        index
            .u32(g[0].0)
            .u64(g[0].1)
            .u32(g.len() as u32)
            .u32(raw.buf.len() as u32)
            .u32(z.len() as u32);
        frames.bytes(&z);
    }
    let mut e = Enc::default();
    e.u32(t.flags)
        .u32(named as u32)
        .u32((all.len() - named) as u32)
        .u32(ngroups as u32)
        .bytes(&index.buf)
        .bytes(&frames.buf);
    e.buf
}

/// A decoded FILE_INDEX entry: dev, inode, state (0: named, else an [`Unnamed`] code), path.
pub(crate) type FileIndexEntry = (u32, u64, u8, Box<str>);

/// One group of a FILE_INDEX table, as its index describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileGroup {
    /// The (dev, inode) of its first entry.
    pub first: (u32, u64),
    /// Entries in it.
    pub entries: u32,
    /// Uncompressed length.
    pub raw_len: u32,
    /// Where its zstd frame starts in the payload, and its length.
    pub at: usize,
    pub len: usize,
}

/// A FILE_INDEX payload's header and group index, decoded without decompressing a group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FileIndex {
    pub flags: u32,
    pub named: u32,
    pub unnamed: u32,
    pub groups: Vec<FileGroup>,
}

impl FileIndex {
    /// The group that would hold `key`: the last whose first key is at most `key`.
    pub fn group_of(&self, key: (u32, u64)) -> Option<usize> {
        let n = self.groups.partition_point(|g| g.first <= key);
        n.checked_sub(1)
    }
}

/// Decodes a FILE_INDEX payload's header and group index; checks that the groups are sorted,
/// that their frames lie in the payload and that their counts add up.
pub(crate) fn decode_file_index(b: &[u8]) -> Result<FileIndex, DecodeError> {
    let mut d = Dec::new(b);
    let flags = d.u32("files flags")?;
    let named = d.u32("named files")?;
    let unnamed = d.u32("unnamed files")?;
    let n = d.count(GROUP_INDEX_LEN, "file group count")?;
    let mut groups: Vec<FileGroup> = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    let mut total = 0u64;
    for _ in 0..n {
        let first = (d.u32("group dev")?, d.u64("group inode")?);
        let entries = d.u32("group entries")?;
        let raw_len = d.u32("group length")?;
        let len = d.u32("group compressed length")? as usize;
        if entries == 0 || (entries as usize).saturating_mul(INDEX_ENTRY_MIN) > raw_len as usize {
            return Err(DecodeError::new(
                d.pos(),
                format!("a group of {entries} files cannot hold {raw_len} bytes"),
            ));
        }
        if groups.last().is_some_and(|g| g.first >= first) {
            return Err(DecodeError::new(
                d.pos(),
                "file groups out of order".to_string(),
            ));
        }
        total += entries as u64;
        groups.push(FileGroup {
            first,
            entries,
            raw_len,
            at: 0,
            len,
        });
    }
    if total != named as u64 + unnamed as u64 {
        return Err(DecodeError::new(
            d.pos(),
            format!(
                "the groups hold {total} files, the table says {}",
                named as u64 + unnamed as u64
            ),
        ));
    }
    let mut at = d.pos();
    for g in &mut groups {
        g.at = at;
        at = at
            .checked_add(g.len)
            .filter(|&e| e <= b.len())
            .ok_or_else(|| DecodeError::new(at, "a file group runs past the block".to_string()))?;
    }
    Ok(FileIndex {
        flags,
        named,
        unnamed,
        groups,
    })
}

/// Decompresses and decodes one group of a FILE_INDEX payload `b`: its entries as (dev,
/// inode, state, path), sorted; an error if they are not, or do not fill the group.
pub(crate) fn decode_file_group(
    b: &[u8],
    g: &FileGroup,
) -> Result<Vec<FileIndexEntry>, DecodeError> {
    let z = b
        .get(g.at..g.at + g.len)
        .ok_or_else(|| DecodeError::new(g.at, "file group out of the block".to_string()))?;
    let raw = zstd_frame(
        z,
        g.raw_len as usize,
        MAX_FILES_TABLE,
        Some(MAX_METADATA_RATIO),
    )
    .map_err(|e| DecodeError::new(g.at, format!("file group: {e}")))?;
    let mut d = Dec::new(&raw);
    let inner = |e: DecodeError| {
        DecodeError::new(
            g.at,
            format!("file group, at byte {} of the group: {}", e.at, e.what),
        )
    };
    let mut v: Vec<FileIndexEntry> = Vec::with_capacity((g.entries as usize).min(GROUP_ENTRIES));
    for _ in 0..g.entries {
        let dev = d.u32("file dev").map_err(inner)?;
        let ino = d.u64("file inode").map_err(inner)?;
        let state = d.u8("file state").map_err(inner)?;
        let path = d.str("file path").map_err(inner)?;
        if v.last().is_some_and(|l| (l.0, l.1) >= (dev, ino))
            || (v.is_empty() && (dev, ino) != g.first)
        {
            return Err(DecodeError::new(
                g.at,
                "file group out of order".to_string(),
            ));
        }
        v.push((dev, ino, state, path.into()));
    }
    if d.remaining() != 0 {
        return Err(DecodeError::new(
            g.at,
            format!("{} bytes after the file group's entries", d.remaining()),
        ));
    }
    Ok(v)
}

/// Decodes a FILES payload, calling `f(dev, ino, path)` for each entry; returns the flags.
pub(crate) fn decode_files(
    b: &[u8],
    mut f: impl FnMut(u32, u64, &str),
) -> Result<u32, DecodeError> {
    let mut d = Dec::new(b);
    let flags = d.u32("files flags")?;
    let n = d.u32("file count")? as usize;
    let len = d.u32("file table length")? as usize;
    if n.saturating_mul(FILE_ENTRY_MIN) > len {
        return Err(DecodeError::new(
            4,
            format!("{n} files cannot fit in a table of {len} bytes"),
        ));
    }
    let z = d.take(d.remaining(), "file table")?;
    let raw = zstd_frame(z, len, MAX_FILES_TABLE, Some(MAX_METADATA_RATIO))
        .map_err(|e| DecodeError::new(8, format!("file table: {e}")))?;
    let mut d = Dec::new(&raw);
    let inner = |e: DecodeError| {
        DecodeError::new(
            12,
            format!("file table, at byte {} of the table: {}", e.at, e.what),
        )
    };
    for _ in 0..n {
        let dev = d.u32("file dev").map_err(inner)?;
        let ino = d.u64("file inode").map_err(inner)?;
        let path = d.str("file path").map_err(inner)?;
        f(dev, ino, &path);
    }
    Ok(flags)
}

#[cfg(all(test, feature = "reader"))]
mod tests {
    use super::*;

    fn table(n: u64) -> FileTable {
        FileTable {
            flags: FILES_TOUCHED,
            // Listed in reverse: the encoder sorts.
            entries: (0..n)
                .rev()
                .map(|i| FileEntry {
                    dev: (7 << 20) | (i % 2) as u32,
                    ino: 100 + i,
                    path: format!("/mnt/f{i}"),
                })
                .collect(),
            unnamed: vec![
                UnnamedFile {
                    dev: 7 << 20,
                    ino: 5,
                    why: Unnamed::Deleted,
                },
                // Named too: the name wins.
                UnnamedFile {
                    dev: 7 << 20,
                    ino: 100,
                    why: Unnamed::NotFound,
                },
            ],
        }
    }

    #[test]
    fn file_index_groups_sorted_entries() {
        let b = encode_file_index(&table(3000));
        let ix = decode_file_index(&b).unwrap();
        assert_eq!((ix.flags, ix.named, ix.unnamed), (FILES_TOUCHED, 3000, 1));
        assert_eq!(ix.groups.len(), 3001usize.div_ceil(GROUP_ENTRIES));
        let mut all = Vec::new();
        for g in &ix.groups {
            let v = decode_file_group(&b, g).unwrap();
            assert_eq!((v[0].0, v[0].1), g.first);
            all.extend(v);
        }
        assert_eq!(all.len(), 3001);
        assert!(all.windows(2).all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)));
        assert_eq!(all[0], (7 << 20, 5, Unnamed::Deleted.code(), "".into()));
        let named_100 = all.iter().find(|e| (e.0, e.1) == (7 << 20, 100)).unwrap();
        assert_eq!((named_100.2, &*named_100.3), (0, "/mnt/f0"));
        // The group a key falls in holds it.
        for key in [
            (7 << 20, 5),
            (7 << 20, 2998 + 100),
            ((7 << 20) | 1, 2999 + 100),
        ] {
            let g = ix.group_of(key).unwrap();
            let v = decode_file_group(&b, &ix.groups[g]).unwrap();
            assert!(v.iter().any(|e| (e.0, e.1) == key), "{key:?}");
        }
        assert_eq!(ix.group_of((0, 0)), None);
    }

    #[test]
    fn file_index_damage_is_an_error() {
        let b = encode_file_index(&table(1200));
        // Every cut of the payload fails cleanly (no panic) at the index or at a group.
        for cut in [0, 7, 16, 30, 40, b.len() - 1] {
            let short = &b[..cut];
            if let Ok(ix) = decode_file_index(short) {
                assert!(ix
                    .groups
                    .iter()
                    .any(|g| decode_file_group(short, g).is_err()));
            }
        }
        // Groups listed out of order.
        let mut bad = b.clone();
        let first = 16;
        bad[first + 4..first + 12].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_file_index(&bad).is_err());
        // An empty table.
        let e = encode_file_index(&FileTable::default());
        let ix = decode_file_index(&e).unwrap();
        assert!(ix.groups.is_empty() && ix.group_of((1, 1)).is_none());
    }

    /// Kallsyms-like text of `lines` lines.
    fn text(lines: usize) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        for i in 0..lines {
            let _ = writeln!(s, "ffffffff{:08x} T symbol_number_{i}", i * 48);
        }
        s
    }

    /// The parts' text lengths and their texts, decompressed one by one.
    fn parts_of(b: &[u8]) -> Vec<Vec<u8>> {
        let n = u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize;
        let mut at = 12 + 8 * n;
        (0..n)
            .map(|i| {
                let o = 12 + 8 * i;
                let z = u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize;
                let u = u32::from_le_bytes(b[o + 4..o + 8].try_into().unwrap()) as usize;
                let part = zstd::bulk::decompress(&b[at..at + z], u).unwrap();
                at += z;
                part
            })
            .collect()
    }

    #[test]
    fn kallsyms_parts_round_trip_in_whole_lines() {
        // A line of `text` is 41-45 bytes: 30,000 lines are one part and a bit. The 1 MiB
        // mark right before a newline, and right after one.
        let mut before = text(30_000);
        let cut = before[..KALLSYMS_PART].rfind('\n').unwrap() + 1;
        before.insert_str(cut, &"x".repeat(KALLSYMS_PART - cut));
        before.insert(KALLSYMS_PART, '\n');
        assert_eq!(before.as_bytes()[KALLSYMS_PART], b'\n');
        let mut after = text(30_000);
        let cut = after[..KALLSYMS_PART - 1].rfind('\n').unwrap() + 1;
        after.insert_str(cut, &"y".repeat(KALLSYMS_PART - 1 - cut));
        after.insert(KALLSYMS_PART - 1, '\n');
        assert_eq!(after.as_bytes()[KALLSYMS_PART - 1], b'\n');
        let cases = [
            String::new(),
            text(10),
            text(30_000),
            before,
            after,
            text(90_000),
            "no newline at the end".to_string(),
        ];
        for (i, t) in cases.into_iter().enumerate() {
            let k = Kallsyms {
                text: t,
                restricted: i == 1,
            };
            let b = encode_kallsyms_parts(&k);
            let parts = parts_of(&b);
            assert!(parts.len() >= k.text.len() / KALLSYMS_PART, "case {i}");
            assert_eq!(parts.concat(), k.text.as_bytes(), "case {i}");
            for (j, p) in parts.iter().enumerate() {
                if j + 1 < parts.len() {
                    // Cut at the first line end at or past the mark.
                    assert!(p.len() > KALLSYMS_PART, "case {i} part {j}");
                    assert!(p.ends_with(b"\n"), "case {i} part {j}");
                    assert!(
                        !p[KALLSYMS_PART..p.len() - 1].contains(&b'\n'),
                        "case {i} part {j}"
                    );
                }
            }
            assert_eq!(decode_kallsyms_parts(&b).unwrap(), k, "case {i}");
        }
    }

    #[test]
    fn kallsyms_in_one_frame_still_reads() {
        let k = Kallsyms {
            text: text(30_000),
            restricted: false,
        };
        assert_eq!(decode_kallsyms(&encode_kallsyms(&k)).unwrap(), k);
    }

    #[test]
    fn damaged_kallsyms_parts_are_errors() {
        let k = Kallsyms {
            text: text(60_000),
            restricted: false,
        };
        let good = encode_kallsyms_parts(&k);
        let n = u32::from_le_bytes(good[8..12].try_into().unwrap()) as usize;
        assert!(n >= 2);
        let set =
            |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        // The declared length disagrees with the parts'.
        let mut b = good.clone();
        set(&mut b, 4, k.text.len() as u32 + 1);
        assert!(decode_kallsyms_parts(&b)
            .unwrap_err()
            .what
            .contains("the parts hold"));
        // A part's text length disagrees with its frame (and the total is kept equal).
        let mut b = good.clone();
        let u0 = u32::from_le_bytes(b[16..20].try_into().unwrap());
        let u1 = u32::from_le_bytes(b[24..28].try_into().unwrap());
        set(&mut b, 16, u0 - 1);
        set(&mut b, 24, u1 + 1);
        assert!(decode_kallsyms_parts(&b)
            .unwrap_err()
            .what
            .contains("frame holds"));
        // Bytes after the last part.
        let mut b = good.clone();
        b.push(0);
        assert!(decode_kallsyms_parts(&b)
            .unwrap_err()
            .what
            .contains("after the last part"));
        // Truncated, a part count beyond the block, a flipped byte inside a frame.
        assert!(decode_kallsyms_parts(&good[..good.len() - 1]).is_err());
        let mut b = good.clone();
        set(&mut b, 8, u32::MAX);
        assert!(decode_kallsyms_parts(&b).is_err());
        let mut b = good.clone();
        let last = b.len() - 100;
        b[last] ^= 0xff;
        assert!(decode_kallsyms_parts(&b).is_err());
    }
}

/// An executable mapping of a process the recorder read from `/proc/PID/maps` (USER_MAPS
/// block, format 1.8), for a process that mapped it before the recording's own MMAP2
/// records could tell: `[start, end)` of process `pid` maps the file from byte `pgoff` on.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct UserMap {
    /// The process (thread group) id.
    pub pid: u32,
    /// First address of the mapping.
    pub start: u64,
    /// First address after it.
    pub end: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// The file's device (`st_dev`): major.
    pub dev_major: u32,
    /// Its minor.
    pub dev_minor: u32,
    /// The file's inode number.
    pub ino: u64,
    /// The ELF build id of the file (its `NT_GNU_BUILD_ID` note), empty when unknown.
    pub build_id: Vec<u8>,
    /// When the recorder read it (trace clock, ns): the mapping held then, and from before.
    pub seen_ns: u64,
    /// The file's path as the process saw it (`[vdso]` and the like for special mappings).
    pub path: String,
}

/// Most entries a USER_MAPS block may hold.
pub const MAX_USER_MAPS: usize = 1 << 20;

/// A USER_MAPS payload (format 1.8): a count, then each mapping as a length-prefixed entry.
pub(crate) fn encode_user_maps(v: &[UserMap]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(v.len() as u32);
    for m in v {
        let mut x = Enc::default();
        x.u32(m.pid)
            .u64(m.start)
            .u64(m.end)
            .u64(m.pgoff)
            .u32(m.dev_major)
            .u32(m.dev_minor)
            .u64(m.ino)
            .u64(m.seen_ns)
            .u32(m.build_id.len() as u32)
            .bytes(&m.build_id)
            .str(&m.path);
        e.u32(x.buf.len() as u32).bytes(&x.buf);
    }
    e.buf
}

/// Decodes a USER_MAPS payload; bytes after the known fields of an entry are skipped.
pub(crate) fn decode_user_maps(b: &[u8]) -> Result<Vec<UserMap>, DecodeError> {
    let mut d = Dec::new(b);
    let n = d.count(4 + 56, "user map count")?;
    if n > MAX_USER_MAPS {
        return Err(DecodeError::new(
            0,
            format!("{n} user mappings: more than {MAX_USER_MAPS}"),
        ));
    }
    let mut v = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    for _ in 0..n {
        let len = d.u32("user map entry length")? as usize;
        let at = d.pos();
        let entry = d.take(len, "user map entry")?;
        let mut x = Dec::new(entry);
        let rel = |e: DecodeError| DecodeError::new(at + e.at, e.what);
        let mut one = || -> Result<UserMap, DecodeError> {
            let pid = x.u32("map pid")?;
            let start = x.u64("map start")?;
            let end = x.u64("map end")?;
            let pgoff = x.u64("map offset")?;
            let dev_major = x.u32("map device major")?;
            let dev_minor = x.u32("map device minor")?;
            let ino = x.u64("map inode")?;
            let seen_ns = x.u64("map time")?;
            let n = x.u32("build id length")? as usize;
            if n > MAX_BUILD_ID {
                return Err(DecodeError::new(x.pos(), format!("build id of {n} bytes")));
            }
            let build_id = x.take(n, "build id")?.to_vec();
            Ok(UserMap {
                pid,
                start,
                end,
                pgoff,
                dev_major,
                dev_minor,
                ino,
                build_id,
                seen_ns,
                path: x.str("map path")?,
            })
        };
        v.push(one().map_err(rel)?);
    }
    Ok(v)
}

/// Longest build id accepted (GNU ld writes 20 bytes, some linkers 16 or 8; 64 is a bound).
pub const MAX_BUILD_ID: usize = 64;

/// A loadable segment of an ELF file (`PT_LOAD`): how file offsets become the addresses its
/// symbols are given in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct ElfLoad {
    /// `p_offset`.
    pub offset: u64,
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_filesz`.
    pub filesz: u64,
    /// `p_flags` (`PF_X` = 1).
    pub flags: u32,
}

/// One section copied from an ELF file, as its bytes are on disk.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct ElfSection {
    /// Its name: `.symtab`, `.strtab`, `.dynsym`, `.dynstr` or `.gnu_debugdata`.
    pub name: String,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// The symbol tables of one ELF file a recorded user stack went through (USER_SYMBOLS block,
/// format 1.8, one per file, written when the recording stops): what a symbolizer on
/// another machine needs of the file, named by build id.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct UserSymbols {
    /// The file's build id.
    pub build_id: Vec<u8>,
    /// Its path on the recording host.
    pub path: String,
    /// ELFCLASS64 (otherwise 32-bit).
    pub class64: bool,
    /// Big-endian (ELFDATA2MSB).
    pub big_endian: bool,
    /// `e_machine`.
    pub machine: u16,
    /// The file's `PT_LOAD` segments.
    pub loads: Vec<ElfLoad>,
    /// The sections copied: the symbol tables with their string tables, and
    /// `.gnu_debugdata` (an xz-compressed ELF file with more symbols) when the file has one.
    pub sections: Vec<ElfSection>,
}

/// Most uncompressed bytes the USER_SYMBOLS blocks of a trace may hold together (the
/// reader skips the blocks beyond, as damage): what an untrusted trace can make an analysis
/// hold. The recorder writes 256 MiB by default (`--user-symbols-max`).
pub const MAX_USER_SYMBOLS_TOTAL: u64 = 2 << 30;

/// Most uncompressed bytes the PERF_MAPS blocks of a trace may hold together.
pub const MAX_PERF_MAPS_TOTAL: u64 = 512 << 20;

/// Most uncompressed bytes one USER_SYMBOLS block may hold.
pub const MAX_USER_SYMBOLS: usize = 1 << 30;

/// Most sections and segments a USER_SYMBOLS block may list.
const MAX_ELF_PARTS: usize = 256;

/// A USER_SYMBOLS payload (format 1.8): flags, the uncompressed length, then one zstd frame
/// of the build id, path, machine, segments and sections.
pub(crate) fn encode_user_symbols(s: &UserSymbols) -> Vec<u8> {
    let mut raw = Enc::default();
    raw.u32(s.build_id.len() as u32)
        .bytes(&s.build_id)
        .str(&s.path)
        .u16(s.machine)
        .u32(s.loads.len() as u32);
    for l in &s.loads {
        raw.u64(l.offset).u64(l.vaddr).u64(l.filesz).u32(l.flags);
    }
    raw.u32(s.sections.len() as u32);
    for x in &s.sections {
        raw.str(&x.name).u32(x.data.len() as u32).bytes(&x.data);
    }
    let z = zstd::bulk::compress(&raw.buf, 3).unwrap_or_default();
    let mut e = Enc::default();
    e.u32(u32::from(s.class64) | u32::from(s.big_endian) << 1)
        .u32(raw.buf.len() as u32)
        .bytes(&z);
    e.buf
}

/// Decodes a USER_SYMBOLS payload.
pub(crate) fn decode_user_symbols(b: &[u8]) -> Result<UserSymbols, DecodeError> {
    let mut d = Dec::new(b);
    let flags = d.u32("symbols flags")?;
    let len = d.u32("symbols length")? as usize;
    let z = d.take(d.remaining(), "symbols")?;
    let raw = zstd_frame(z, len, MAX_USER_SYMBOLS, Some(MAX_METADATA_RATIO))
        .map_err(|e| DecodeError::new(8, format!("symbols: {e}")))?;
    let rel = |e: DecodeError| DecodeError::new(8, format!("symbols at {}: {}", e.at, e.what));
    let mut x = Dec::new(&raw);
    let mut one = || -> Result<UserSymbols, DecodeError> {
        let n = x.u32("build id length")? as usize;
        if n > MAX_BUILD_ID {
            return Err(DecodeError::new(x.pos(), format!("build id of {n} bytes")));
        }
        let build_id = x.take(n, "build id")?.to_vec();
        let path = x.str("module path")?;
        let machine = x.u16("machine")?;
        let nl = x.count(28, "segment count")?;
        if nl > MAX_ELF_PARTS {
            return Err(DecodeError::new(x.pos(), format!("{nl} segments")));
        }
        let mut loads = Vec::with_capacity(nl);
        for _ in 0..nl {
            loads.push(ElfLoad {
                offset: x.u64("segment offset")?,
                vaddr: x.u64("segment address")?,
                filesz: x.u64("segment size")?,
                flags: x.u32("segment flags")?,
            });
        }
        let ns = x.count(8, "section count")?;
        if ns > MAX_ELF_PARTS {
            return Err(DecodeError::new(x.pos(), format!("{ns} sections")));
        }
        let mut sections = Vec::with_capacity(ns);
        for _ in 0..ns {
            let name = x.str("section name")?;
            let n = x.u32("section length")? as usize;
            let data = x.take(n, "section")?.to_vec();
            sections.push(ElfSection { name, data });
        }
        Ok(UserSymbols {
            build_id,
            path,
            class64: flags & 1 != 0,
            big_endian: flags & 2 != 0,
            machine,
            loads,
            sections,
        })
    };
    one().map_err(rel)
}

/// A build id as lowercase hex.
pub fn build_id_hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// A JIT's symbol map of one process (`/tmp/perf-PID.map`, the perf convention: one
/// `START SIZE NAME` line per function, addresses in hex), copied by the recorder for a
/// process whose user frames fell in anonymous executable memory (PERF_MAPS block, format
/// 1.8).
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct PerfMap {
    /// The process (its pid as the recording host's root namespace sees it).
    pub pid: u32,
    /// The map's text.
    pub text: String,
}

/// Longest perf map text a PERF_MAPS block may hold.
pub const MAX_PERF_MAP: usize = 256 << 20;

/// A PERF_MAPS payload (format 1.8): the pid, the text's length, then the text as one zstd
/// frame.
pub(crate) fn encode_perf_map(m: &PerfMap) -> Vec<u8> {
    let z = zstd::bulk::compress(m.text.as_bytes(), 3).unwrap_or_default();
    let mut e = Enc::default();
    e.u32(m.pid).u32(m.text.len() as u32).bytes(&z);
    e.buf
}

/// Decodes a PERF_MAPS payload.
pub(crate) fn decode_perf_map(b: &[u8]) -> Result<PerfMap, DecodeError> {
    let mut d = Dec::new(b);
    let pid = d.u32("perf map pid")?;
    let len = d.u32("perf map length")? as usize;
    let z = d.take(d.remaining(), "perf map")?;
    let raw = zstd_frame(z, len, MAX_PERF_MAP, Some(MAX_METADATA_RATIO))
        .map_err(|e| DecodeError::new(8, format!("perf map: {e}")))?;
    let text = String::from_utf8(raw).map_err(|_| DecodeError::new(8, "perf map: not UTF-8"))?;
    Ok(PerfMap { pid, text })
}
