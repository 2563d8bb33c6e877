//! The btrfs filesystems mounted in this mount namespace (the BTRFS table, format 1.9): each
//! one's fsid, bdi name, block devices and chunk map (what turns btrfs's logical addresses
//! into device bytes), read at the start and again at each flush, so that a filesystem
//! mounted or a chunk allocated while recording is in the trace from when it was found.
//!
//! Everything is asked of btrfs itself through a directory of the mount: `BTRFS_IOC_FS_INFO`,
//! `BTRFS_IOC_DEV_INFO` per device, and the chunk tree's `CHUNK_ITEM`s through
//! `BTRFS_IOC_TREE_SEARCH_V2` (which needs `CAP_SYS_ADMIN`); sysfs only names the bdi and
//! checks the devices. No file descriptor is kept between two looks: the recorder must not
//! keep a filesystem from being unmounted.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use ioblame_format::{BtrfsChunk, BtrfsDevice, BtrfsFs, BtrfsStripe, MAX_BTRFS_CHUNKS};
use ioblame_tracepoints::mountinfo::{self, MountLine};
use ioblame_tracepoints::FilterDev;

/// `BTRFS_IOCTL_MAGIC` (linux/btrfs.h).
const BTRFS_IOCTL_MAGIC: u32 = 0x94;

/// `_IOC(dir, BTRFS_IOCTL_MAGIC, nr, size)` in the generic encoding (x86, arm, riscv), as
/// `layers.rs` encodes `DM_TABLE_STATUS`.
const fn btrfs_ioc(dir: u32, nr: u32, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | (BTRFS_IOCTL_MAGIC << 8) | nr
}
/// `_IOC_READ`.
const IOC_READ: u32 = 2;
/// `_IOC_READ | _IOC_WRITE`.
const IOC_READ_WRITE: u32 = 3;

/// `BTRFS_IOC_TREE_SEARCH`: `_IOWR(0x94, 17, struct btrfs_ioctl_search_args)` (4096 bytes).
const BTRFS_IOC_TREE_SEARCH: u32 = btrfs_ioc(IOC_READ_WRITE, 17, SEARCH_V1_LEN);
/// `BTRFS_IOC_TREE_SEARCH_V2`: `_IOWR(0x94, 17, struct btrfs_ioctl_search_args_v2)` (Linux
/// 3.16: the search key, the buffer's size, then the buffer).
const BTRFS_IOC_TREE_SEARCH_V2: u32 = btrfs_ioc(IOC_READ_WRITE, 17, SEARCH_V2_HEAD);
/// `BTRFS_IOC_DEV_INFO`: `_IOWR(0x94, 30, struct btrfs_ioctl_dev_info_args)`.
const BTRFS_IOC_DEV_INFO: u32 = btrfs_ioc(IOC_READ_WRITE, 30, size_of::<DevInfoArgs>());
/// `BTRFS_IOC_FS_INFO`: `_IOR(0x94, 31, struct btrfs_ioctl_fs_info_args)`.
const BTRFS_IOC_FS_INFO: u32 = btrfs_ioc(IOC_READ, 31, size_of::<FsInfoArgs>());

/// `BTRFS_FS_INFO_FLAG_GENERATION`: asks `BTRFS_IOC_FS_INFO` for the generation (a kernel
/// that does not know the flag leaves it clear in its answer).
const FS_INFO_FLAG_GENERATION: u64 = 1 << 1;

/// `BTRFS_CHUNK_TREE_OBJECTID`: the chunk tree's id.
const CHUNK_TREE_OBJECTID: u64 = 3;
/// `BTRFS_FIRST_CHUNK_TREE_OBJECTID`: the objectid of every chunk item.
const FIRST_CHUNK_TREE_OBJECTID: u64 = 256;
/// `BTRFS_CHUNK_ITEM_KEY`.
const CHUNK_ITEM_KEY: u32 = 228;

/// `sizeof(struct btrfs_ioctl_search_key)`.
const SEARCH_KEY_LEN: usize = 104;
/// `sizeof(struct btrfs_ioctl_search_args)`: the key and a buffer filling 4 KiB.
const SEARCH_V1_LEN: usize = 4096;
/// `sizeof(struct btrfs_ioctl_search_args_v2)`: the key and `buf_size`, before the buffer.
const SEARCH_V2_HEAD: usize = SEARCH_KEY_LEN + 8;
/// The v2 search's buffer: a leaf (64 KiB at most) holds no larger item.
const SEARCH_V2_BUF: usize = 64 << 10;
/// `sizeof(struct btrfs_ioctl_search_header)`: transid, objectid, offset, type, len.
const SEARCH_HEADER_LEN: usize = 32;
/// `sizeof(struct btrfs_chunk)` without its stripes.
const CHUNK_LEN: usize = 48;
/// `sizeof(struct btrfs_stripe)`: devid, offset, dev_uuid.
const STRIPE_LEN: usize = 32;
/// Most devids asked of `BTRFS_IOC_DEV_INFO` (`max_id` is the highest devid ever given).
const MAX_DEVID: u64 = 1 << 16;

/// `struct btrfs_ioctl_fs_info_args` (1 KiB).
#[repr(C)]
struct FsInfoArgs {
    max_id: u64,
    num_devices: u64,
    fsid: [u8; 16],
    nodesize: u32,
    sectorsize: u32,
    clone_alignment: u32,
    csum_type: u16,
    csum_size: u16,
    flags: u64,
    generation: u64,
    metadata_uuid: [u8; 16],
    reserved: [u8; 944],
}

/// `struct btrfs_ioctl_dev_info_args` (4 KiB).
#[repr(C)]
struct DevInfoArgs {
    devid: u64,
    uuid: [u8; 16],
    bytes_used: u64,
    total_bytes: u64,
    fsid: [u8; 16],
    unused: [u64; 377],
    path: [u8; 1024],
}

/// What `BTRFS_IOC_FS_INFO` said of a filesystem.
#[derive(Debug, Clone, Copy)]
struct FsInfo {
    fsid: [u8; 16],
    max_id: u64,
    num_devices: u64,
    node_size: u32,
    sector_size: u32,
    /// The filesystem's generation, when the kernel gives it.
    generation: Option<u64>,
}

/// The btrfs filesystems on the devices `--devices` filters on, as devices to filter on too
/// ([`FilterDev::btrfs`]): their writeback events name their bdi `btrfs-N`, their page-cache
/// events their superblock's anonymous device, neither of which is a device of the list.
pub fn filter_devs(fs: &[BtrfsFs], fdevs: &[FilterDev]) -> Vec<FilterDev> {
    let listed = |major: u32, minor: u32| {
        fdevs.iter().any(|f| {
            (f.major, f.minor) == (major, minor) || (f.disk_major, f.disk_minor) == (major, minor)
        })
    };
    fs.iter()
        .filter(|f| f.devices.iter().any(|d| listed(d.major, d.minor)))
        .map(|f| {
            let seq = f.bdi.strip_prefix("btrfs-").and_then(|n| n.parse().ok());
            FilterDev::btrfs(f.major, f.minor, seq)
        })
        .collect()
}

/// What the watch remembers of a filesystem besides its [`BtrfsFs`].
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    /// The generation read before the last complete search of the chunk tree: the next
    /// search skips the tree blocks older than it (`None`: the next one reads them all).
    generation: Option<u64>,
    /// The device count and highest devid when the devices were read.
    devices_at: (u64, u64),
}

/// The btrfs filesystems seen so far, every chunk each one had.
#[derive(Debug, Default)]
pub struct BtrfsWatch {
    fs: Vec<BtrfsFs>,
    seen: Vec<Seen>,
}

impl BtrfsWatch {
    /// The btrfs filesystems mounted now, with their chunks (`since_ns` 0), and what could
    /// not be read of them (a filesystem whose chunk tree is unreadable is kept without
    /// chunks; one that cannot be asked at all is left out), for the caller to print.
    pub fn start() -> (BtrfsWatch, Vec<String>) {
        let mut w = BtrfsWatch::default();
        let mut problems = Vec::new();
        w.scan(0, &mut problems);
        (w, problems)
    }

    /// Every filesystem seen so far.
    pub fn filesystems(&self) -> &[BtrfsFs] {
        &self.fs
    }

    /// Looks again at the btrfs mounts and their chunk trees; `Some(every filesystem seen
    /// so far)` when a filesystem, a chunk or a device was new (a chunk found now has
    /// `since_ns` `now_ns`, the trace clock). Chunks since removed stay in the list.
    pub fn rescan(&mut self, now_ns: u64) -> Option<Vec<BtrfsFs>> {
        let mut problems = Vec::new();
        self.scan(now_ns, &mut problems).then(|| self.fs.clone())
    }

    /// One look at every btrfs mount; whether anything was new. What could not be read is
    /// added to `problems`.
    fn scan(&mut self, now_ns: u64, problems: &mut Vec<String>) -> bool {
        let text = match std::fs::read_to_string("/proc/self/mountinfo") {
            Ok(t) => t,
            Err(e) => {
                problems.push(format!("reading /proc/self/mountinfo: {e}"));
                return false;
            }
        };
        let mut grew = false;
        for ((major, minor), mounts) in btrfs_mounts(&text) {
            grew |= self.scan_fs(major, minor, &mounts, now_ns, problems);
        }
        grew
    }

    /// Looks at the filesystem of superblock device `major:minor`, mounted at `mounts`;
    /// whether anything was new. A new filesystem whose chunk tree cannot be read is kept
    /// without chunks (read again at the next look); one that cannot be asked at all is
    /// left for the next look.
    fn scan_fs(
        &mut self,
        major: u32,
        minor: u32,
        mounts: &[MountLine],
        now_ns: u64,
        problems: &mut Vec<String>,
    ) -> bool {
        let opened = open_mount(mounts).and_then(|(dir, at)| {
            let info = fs_info(&dir)
                .with_context(|| format!("btrfs at {}: BTRFS_IOC_FS_INFO", at.display()))?;
            Ok((dir, at, info))
        });
        let (dir, at, info) = match opened {
            Ok(o) => o,
            Err(e) => {
                problems.push(format!("{e:#}"));
                return false;
            }
        };
        let mut grew = false;
        let known = self
            .fs
            .iter()
            .position(|f| (f.major, f.minor, f.fsid) == (major, minor, info.fsid));
        let i = match known {
            Some(i) => i,
            None => {
                let sysfs = sysfs_dir(&info.fsid);
                self.fs.push(BtrfsFs {
                    fsid: info.fsid,
                    major,
                    minor,
                    bdi: bdi_name(&sysfs),
                    sector_size: info.sector_size,
                    node_size: info.node_size,
                    devices: devices(&dir, &sysfs, &info),
                    chunks: Vec::new(),
                });
                self.seen.push(Seen {
                    generation: None,
                    devices_at: (info.num_devices, info.max_id),
                });
                grew = true;
                self.fs.len() - 1
            }
        };
        // Only the tree blocks written since the last complete search, when the kernel
        // gives the generation: every chunk allocated since is in one of them.
        let fs = &mut self.fs[i];
        let had = fs.chunks.len();
        match chunk_map(&dir, self.seen[i].generation.unwrap_or(0)) {
            Ok(chunks) => {
                grew |= add_chunks(fs, chunks, now_ns);
                self.seen[i].generation = info.generation;
            }
            Err(e) => problems.push(format!(
                "btrfs at {}: reading its chunk map (BTRFS_IOC_TREE_SEARCH of the chunk tree, \
                 which needs CAP_SYS_ADMIN): {e}",
                at.display()
            )),
        }
        // A device added, or a new chunk on a device not known: the devices again.
        let unknown_devid = fs.chunks[had..].iter().any(|c| {
            c.stripes
                .iter()
                .any(|s| !fs.devices.iter().any(|d| d.devid == s.devid))
        });
        let devices_at = (info.num_devices, info.max_id);
        if known.is_some() && (unknown_devid || self.seen[i].devices_at != devices_at) {
            self.seen[i].devices_at = devices_at;
            for d in devices(&dir, &sysfs_dir(&info.fsid), &info) {
                if !fs.devices.contains(&d) {
                    fs.devices.push(d);
                    grew = true;
                }
            }
        }
        grew
    }
}

/// Adds to `fs` the chunks of `chunks` it does not have yet, found at `now_ns`; whether any
/// was new. At most [`MAX_BTRFS_CHUNKS`] chunks are kept (a reader refuses more).
fn add_chunks(fs: &mut BtrfsFs, chunks: Vec<BtrfsChunk>, now_ns: u64) -> bool {
    let mut grew = false;
    for c in chunks {
        if fs.chunks.len() >= MAX_BTRFS_CHUNKS {
            break;
        }
        if fs.chunks.iter().any(|k| k.same_chunk(&c)) {
            continue;
        }
        fs.chunks.push(BtrfsChunk {
            since_ns: now_ns,
            ..c
        });
        grew = true;
    }
    grew
}

/// The btrfs mounts of a mountinfo text grouped by filesystem, in the order of their first
/// mount: every mount (a subvolume, a bind mount) of one filesystem shows its superblock's
/// device (`s_dev`, the device the generic inode events carry).
fn btrfs_mounts(text: &str) -> Vec<((u32, u32), Vec<MountLine>)> {
    let mut out: Vec<((u32, u32), Vec<MountLine>)> = Vec::new();
    for m in mountinfo::parse(text).filter(|m| m.fs_type == "btrfs") {
        let dev = (m.major, m.minor);
        match out.iter_mut().find(|(d, _)| *d == dev) {
            Some((_, v)) => v.push(m),
            None => out.push((dev, vec![m])),
        }
    }
    out
}

/// A directory of the filesystem: the first of its mount points that opens and is that
/// mount (not hidden by another filesystem mounted over it, when the kernel gives mount ids
/// (`STATX_MNT_ID`, Linux 5.8)), with its path.
fn open_mount(mounts: &[MountLine]) -> Result<(File, PathBuf)> {
    let mut why = anyhow::anyhow!("no btrfs mount");
    for m in mounts {
        let path = PathBuf::from(&m.mount_point);
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(&path);
        match opened {
            Ok(f) if mount_id(&f).is_some_and(|id| id != u64::from(m.mount_id)) => {
                why = anyhow::anyhow!(
                    "btrfs at {}: another filesystem is mounted over it",
                    path.display()
                );
            }
            Ok(f) => return Ok((f, path)),
            Err(e) => {
                why = anyhow::Error::new(e)
                    .context(format!("btrfs at {}: opening it", path.display()));
            }
        }
    }
    Err(why)
}

/// The id of the mount `f` is on, when the kernel says (`STATX_MNT_ID`).
fn mount_id(f: &File) -> Option<u64> {
    // SAFETY: an all-zero statx is valid (plain integers).
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: the fd is open, the path an empty C string (with AT_EMPTY_PATH: the fd's own
    // file) and `st` a statx the call fills.
    let rc = unsafe {
        libc::statx(
            f.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_MNT_ID,
            &mut st,
        )
    };
    (rc == 0 && st.stx_mask & libc::STATX_MNT_ID != 0).then_some(st.stx_mnt_id)
}

/// The fsid of the btrfs of `dir` (`BTRFS_IOC_FS_INFO`); `None` when it is no btrfs.
pub fn fsid(dir: &impl AsRawFd) -> Option<[u8; 16]> {
    fs_info(dir).ok().map(|i| i.fsid)
}

/// The writeback device name (`btrfs-N`) of the btrfs of `dir`: its fsid, then the link
/// `/sys/fs/btrfs/FSID/bdi` (Linux 5.9); `None` without either.
pub fn bdi_of(dir: &impl AsRawFd) -> Option<String> {
    Some(bdi_name(&sysfs_dir(&fsid(dir)?))).filter(|n| !n.is_empty())
}

/// `BTRFS_IOC_FS_INFO` on a directory of the filesystem.
fn fs_info(dir: &impl AsRawFd) -> io::Result<FsInfo> {
    // SAFETY: an all-zero btrfs_ioctl_fs_info_args is valid (integers and byte arrays).
    let mut a: FsInfoArgs = unsafe { std::mem::zeroed() };
    a.flags = FS_INFO_FLAG_GENERATION;
    // SAFETY: the fd is open and `a` is a btrfs_ioctl_fs_info_args the kernel fills.
    let rc = unsafe { libc::ioctl(dir.as_raw_fd(), BTRFS_IOC_FS_INFO as _, &mut a) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(FsInfo {
        fsid: a.fsid,
        max_id: a.max_id,
        num_devices: a.num_devices,
        node_size: a.nodesize,
        sector_size: a.sectorsize,
        generation: (a.flags & FS_INFO_FLAG_GENERATION != 0).then_some(a.generation),
    })
}

/// The path btrfs knows device `devid` by (`BTRFS_IOC_DEV_INFO`); `None` when there is no
/// such device (`ENODEV`: removed, or a devid never given) or the call fails.
fn dev_path(dir: &File, devid: u64) -> Option<PathBuf> {
    // SAFETY: an all-zero btrfs_ioctl_dev_info_args is valid (integers and byte arrays).
    let mut a: DevInfoArgs = unsafe { std::mem::zeroed() };
    a.devid = devid;
    // SAFETY: the fd is open and `a` is a btrfs_ioctl_dev_info_args the kernel fills.
    let rc = unsafe { libc::ioctl(dir.as_raw_fd(), BTRFS_IOC_DEV_INFO as _, &mut a) };
    if rc != 0 {
        return None;
    }
    let end = a.path.iter().position(|&c| c == 0).unwrap_or(a.path.len());
    let path = &a.path[..end];
    (!path.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(path)))
}

/// The filesystem's block devices: each devid's path (`BTRFS_IOC_DEV_INFO`) made a device
/// number by [`pick_device`], checked against the devices sysfs lists for it.
fn devices(dir: &File, sysfs: &Path, info: &FsInfo) -> Vec<BtrfsDevice> {
    let listed = sysfs_devices(sysfs);
    let mut out = Vec::new();
    for devid in 1..=info.max_id.min(MAX_DEVID) {
        let Some(path) = dev_path(dir, devid) else {
            continue;
        };
        let rdev = std::fs::metadata(&path)
            .ok()
            .filter(|m| m.file_type().is_block_device())
            .map(|m| {
                let d = m.rdev() as libc::dev_t;
                (libc::major(d), libc::minor(d))
            });
        // The kernel's name of the device (`dm-0` for /dev/mapper/x): the path's target.
        let name = std::fs::canonicalize(&path)
            .unwrap_or(path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let single = info.num_devices == 1 && info.max_id == 1;
        if let Some((major, minor)) = pick_device(rdev, name.as_deref(), &listed, single) {
            out.push(BtrfsDevice {
                devid,
                major,
                minor,
            });
        }
    }
    out
}

/// A btrfs device's number, from what was found of it: `rdev`, its path's device number
/// here (a block device); `name`, the last part of that path (its target, for a link);
/// `listed`, the devices sysfs lists for the filesystem (name and number; empty when sysfs
/// was not readable); `single`, whether it is the filesystem's one device.
///
/// The path's number holds when sysfs agrees (in a container the path may be another
/// device node, or none); else the listed device of that name; else, on a one-device
/// filesystem, the one listed device; else none.
fn pick_device(
    rdev: Option<(u32, u32)>,
    name: Option<&str>,
    listed: &[(String, (u32, u32))],
    single: bool,
) -> Option<(u32, u32)> {
    if let Some(d) = rdev.filter(|d| listed.is_empty() || listed.iter().any(|(_, l)| l == d)) {
        return Some(d);
    }
    if let Some((_, d)) = name.and_then(|n| listed.iter().find(|(l, _)| l == n)) {
        return Some(*d);
    }
    match listed {
        [(_, d)] if single => Some(*d),
        _ => None,
    }
}

/// The block devices sysfs lists under a filesystem's directory (`devices/NAME`, links to
/// the block devices), by name, with their numbers; empty when it cannot be read.
fn sysfs_devices(sysfs: &Path) -> Vec<(String, (u32, u32))> {
    let Ok(rd) = std::fs::read_dir(sysfs.join("devices")) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let dev = std::fs::read_to_string(e.path().join("dev")).ok()?;
            let d = ioblame_tracepoints::parse_majmin(&dev)?;
            Some((e.file_name().to_string_lossy().into_owned(), d))
        })
        .collect()
}

/// The filesystem's sysfs directory, `/sys/fs/btrfs/FSID`.
fn sysfs_dir(fsid: &[u8; 16]) -> PathBuf {
    Path::new("/sys/fs/btrfs").join(uuid(fsid))
}

/// A UUID in its usual text form, lowercase (`de56ed07-0f16-4bdf-947c-3f51528774e5`).
fn uuid(b: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{x:02x}"));
    }
    s
}

/// The filesystem's bdi name (`btrfs-1`): where its sysfs directory's `bdi` link points
/// (Linux 5.9); empty without the link.
fn bdi_name(sysfs: &Path) -> String {
    std::fs::read_link(sysfs.join("bdi"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

/// The fields of `struct btrfs_ioctl_search_key` a search sets (the rest are zero).
#[derive(Debug, Clone, Copy)]
struct SearchKey {
    tree_id: u64,
    min_objectid: u64,
    max_objectid: u64,
    min_offset: u64,
    max_offset: u64,
    min_transid: u64,
    max_transid: u64,
    min_type: u32,
    max_type: u32,
    nr_items: u32,
}

impl SearchKey {
    /// The key as the kernel reads it (native byte order): [`SEARCH_KEY_LEN`] bytes.
    fn to_bytes(self) -> [u8; SEARCH_KEY_LEN] {
        let mut b = [0u8; SEARCH_KEY_LEN];
        let words = [
            self.tree_id,
            self.min_objectid,
            self.max_objectid,
            self.min_offset,
            self.max_offset,
            self.min_transid,
            self.max_transid,
        ];
        for (i, w) in words.iter().enumerate() {
            b[8 * i..8 * i + 8].copy_from_slice(&w.to_ne_bytes());
        }
        for (i, w) in [self.min_type, self.max_type, self.nr_items]
            .iter()
            .enumerate()
        {
            b[56 + 4 * i..60 + 4 * i].copy_from_slice(&w.to_ne_bytes());
        }
        b
    }
}

/// The chunks of the filesystem's chunk tree (`since_ns` 0), read from a directory of it;
/// only those in tree blocks of generation `min_transid` or later (0: all).
fn chunk_map(dir: &File, min_transid: u64) -> io::Result<Vec<BtrfsChunk>> {
    let mut key = SearchKey {
        tree_id: CHUNK_TREE_OBJECTID,
        min_objectid: FIRST_CHUNK_TREE_OBJECTID,
        max_objectid: FIRST_CHUNK_TREE_OBJECTID,
        min_offset: 0,
        max_offset: u64::MAX,
        min_transid,
        max_transid: u64::MAX,
        min_type: CHUNK_ITEM_KEY,
        max_type: CHUNK_ITEM_KEY,
        nr_items: u32::MAX,
    };
    let mut buf = vec![0u8; SEARCH_V2_HEAD + SEARCH_V2_BUF];
    let mut v2 = true;
    let mut out = Vec::new();
    while out.len() < MAX_BTRFS_CHUNKS {
        let (items, n) = match search(dir, key, v2, &mut buf) {
            // Before Linux 3.16, which has no v2: v1 from here on.
            Err(e) if v2 && e.raw_os_error() == Some(libc::ENOTTY) => {
                v2 = false;
                continue;
            }
            r => r?,
        };
        if n == 0 {
            break;
        }
        let (chunks, last) = parse_chunk_items(items, n);
        out.extend(chunks);
        // The next search starts after the last key (objectid and type are fixed, so the
        // keys go by offset); a garbled answer that would not move on ends it.
        match last {
            Some(o) if o >= key.min_offset && o < u64::MAX => key.min_offset = o + 1,
            _ => break,
        }
    }
    Ok(out)
}

/// One tree search (`BTRFS_IOC_TREE_SEARCH_V2` with a 64 KiB buffer, or the 4 KiB v1):
/// the answer's items and how many there are.
fn search<'b>(
    dir: &File,
    key: SearchKey,
    v2: bool,
    buf: &'b mut [u8],
) -> io::Result<(&'b [u8], u32)> {
    let (request, head, len) = if v2 {
        (
            BTRFS_IOC_TREE_SEARCH_V2,
            SEARCH_V2_HEAD,
            SEARCH_V2_HEAD + SEARCH_V2_BUF,
        )
    } else {
        (BTRFS_IOC_TREE_SEARCH, SEARCH_KEY_LEN, SEARCH_V1_LEN)
    };
    let Some(b) = buf.get_mut(..len) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    b[..SEARCH_KEY_LEN].copy_from_slice(&key.to_bytes());
    if v2 {
        b[SEARCH_KEY_LEN..head].copy_from_slice(&(SEARCH_V2_BUF as u64).to_ne_bytes());
    }
    // SAFETY: the fd is open and `b` holds `len` bytes: the whole v1 argument, or the v2
    // argument with a buffer of the size its `buf_size` says; the kernel writes within it.
    let rc = unsafe { libc::ioctl(dir.as_raw_fd(), request as _, b.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // The key's nr_items (after 7 u64 and 2 u32): the items the answer holds.
    let n = word(b, 64, u32::from_ne_bytes);
    Ok((&b[head..], n))
}

/// The chunks of a tree search's answer: `n` items, each a `btrfs_ioctl_search_header`
/// (native byte order) and the item (btrfs's on-disk little-endian); items that are no
/// chunk or do not parse are skipped. Also the last whole item's key offset, where the next
/// search starts after (`None` when there is none). Never panics: a short or garbled
/// buffer ends the reading.
fn parse_chunk_items(buf: &[u8], n: u32) -> (Vec<BtrfsChunk>, Option<u64>) {
    let mut out = Vec::new();
    let mut last = None;
    let mut rest = buf;
    for _ in 0..n {
        let Some((h, after)) = rest.split_first_chunk::<SEARCH_HEADER_LEN>() else {
            break;
        };
        let (objectid, offset) = (
            word(h, 8, u64::from_ne_bytes),
            word(h, 16, u64::from_ne_bytes),
        );
        let (kind, len) = (
            word(h, 24, u32::from_ne_bytes),
            word(h, 28, u32::from_ne_bytes),
        );
        let len = len as usize;
        if after.len() < len {
            break;
        }
        let (item, next) = after.split_at(len);
        last = Some(offset);
        if objectid == FIRST_CHUNK_TREE_OBJECTID && kind == CHUNK_ITEM_KEY {
            out.extend(parse_chunk(offset, item));
        }
        rest = next;
    }
    (out, last)
}

/// A `struct btrfs_chunk` item (little-endian, packed) at logical address `logical`:
/// length, owner, stripe_len, type, io_align, io_width, sector_size (u64 ×4, u32 ×3),
/// num_stripes, sub_stripes (u16), then `num_stripes` × `struct btrfs_stripe` (devid,
/// offset, dev_uuid[16]). `None` when it is short or has no stripe.
fn parse_chunk(logical: u64, item: &[u8]) -> Option<BtrfsChunk> {
    let le64 = |b: &[u8], at: usize| word(b, at, u64::from_le_bytes);
    let head = item.get(..CHUNK_LEN)?;
    let num_stripes = word(head, 44, u16::from_le_bytes) as usize;
    let sub_stripes = word(head, 46, u16::from_le_bytes);
    if num_stripes == 0 {
        return None;
    }
    let stripes = item.get(CHUNK_LEN..CHUNK_LEN + num_stripes * STRIPE_LEN)?;
    Some(BtrfsChunk {
        logical,
        length: le64(head, 0),
        flags: le64(head, 24),
        stripe_len: le64(head, 16),
        sub_stripes,
        stripes: stripes
            .chunks_exact(STRIPE_LEN)
            .map(|s| BtrfsStripe {
                devid: le64(s, 0),
                physical: le64(s, 8),
            })
            .collect(),
        since_ns: 0,
    })
}

/// The `N`-byte integer at `at` of `b`, read by `from` (a `from_le_bytes` or
/// `from_ne_bytes`); zero when `b` is shorter.
fn word<const N: usize, T: Default>(b: &[u8], at: usize, from: fn([u8; N]) -> T) -> T {
    b.get(at..)
        .and_then(|b| b.first_chunk::<N>())
        .map_or_else(T::default, |c| from(*c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioblame_format::{BTRFS_CHUNK_DATA, BTRFS_CHUNK_DUP, BTRFS_CHUNK_METADATA};

    #[test]
    fn ioctl_numbers_and_layouts_are_the_kernels() {
        // As <linux/btrfs.h> gives them on x86-64.
        assert_eq!(BTRFS_IOC_FS_INFO, 0x8400_941f);
        assert_eq!(BTRFS_IOC_DEV_INFO, 0xd000_941e);
        assert_eq!(BTRFS_IOC_TREE_SEARCH, 0xd000_9411);
        assert_eq!(BTRFS_IOC_TREE_SEARCH_V2, 0xc070_9411);
        assert_eq!(size_of::<FsInfoArgs>(), 1024);
        assert_eq!(std::mem::offset_of!(FsInfoArgs, flags), 48);
        assert_eq!(std::mem::offset_of!(FsInfoArgs, generation), 56);
        assert_eq!(size_of::<DevInfoArgs>(), 4096);
        assert_eq!(std::mem::offset_of!(DevInfoArgs, path), 3072);
    }

    #[test]
    fn search_key_bytes() {
        let k = SearchKey {
            tree_id: 3,
            min_objectid: 256,
            max_objectid: 256,
            min_offset: 7,
            max_offset: u64::MAX,
            min_transid: 9,
            max_transid: u64::MAX,
            min_type: 228,
            max_type: 228,
            nr_items: 5,
        };
        let b = k.to_bytes();
        assert_eq!(word(&b, 0, u64::from_ne_bytes), 3);
        assert_eq!(word(&b, 24, u64::from_ne_bytes), 7);
        assert_eq!(word(&b, 40, u64::from_ne_bytes), 9);
        assert_eq!(word(&b, 56, u32::from_ne_bytes), 228);
        assert_eq!(word(&b, 60, u32::from_ne_bytes), 228);
        assert_eq!(word(&b, 64, u32::from_ne_bytes), 5);
        assert!(b[68..].iter().all(|&x| x == 0));
    }

    /// A search answer's item: its header (native byte order) and the item's bytes.
    fn item(objectid: u64, kind: u32, offset: u64, body: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend(42u64.to_ne_bytes());
        v.extend(objectid.to_ne_bytes());
        v.extend(offset.to_ne_bytes());
        v.extend(kind.to_ne_bytes());
        v.extend((body.len() as u32).to_ne_bytes());
        v.extend(body);
        v
    }

    /// A `struct btrfs_chunk` with its stripes (devid, physical), as btrfs stores it.
    fn chunk_item(length: u64, flags: u64, stripes: &[(u64, u64)]) -> Vec<u8> {
        let mut v = Vec::new();
        for x in [length, 2, 65536, flags] {
            v.extend(x.to_le_bytes());
        }
        for x in [65536u32, 65536, 4096] {
            v.extend(x.to_le_bytes());
        }
        v.extend((stripes.len() as u16).to_le_bytes());
        v.extend(1u16.to_le_bytes());
        for (devid, physical) in stripes {
            v.extend(devid.to_le_bytes());
            v.extend(physical.to_le_bytes());
            v.extend([0xab; 16]);
        }
        v
    }

    /// What `btrfs inspect-internal dump-tree -t chunk` showed of a fresh 1 GiB filesystem
    /// (a DEV_ITEM, then a single data chunk and a DUP metadata chunk).
    fn answer() -> Vec<u8> {
        let mut b = item(1, 216, 1, &[7; 98]);
        b.extend(item(
            FIRST_CHUNK_TREE_OBJECTID,
            CHUNK_ITEM_KEY,
            13631488,
            &chunk_item(8 << 20, BTRFS_CHUNK_DATA, &[(1, 13631488)]),
        ));
        b.extend(item(
            FIRST_CHUNK_TREE_OBJECTID,
            CHUNK_ITEM_KEY,
            30408704,
            &chunk_item(
                53673984,
                BTRFS_CHUNK_METADATA | BTRFS_CHUNK_DUP,
                &[(1, 38797312), (1, 92471296)],
            ),
        ));
        b
    }

    #[test]
    fn chunk_items_single_and_dup() {
        let b = answer();
        let (chunks, last) = parse_chunk_items(&b, 3);
        assert_eq!(last, Some(30408704));
        assert_eq!(
            chunks,
            vec![
                BtrfsChunk {
                    logical: 13631488,
                    length: 8 << 20,
                    flags: BTRFS_CHUNK_DATA,
                    stripe_len: 65536,
                    sub_stripes: 1,
                    stripes: vec![BtrfsStripe {
                        devid: 1,
                        physical: 13631488
                    }],
                    since_ns: 0,
                },
                BtrfsChunk {
                    logical: 30408704,
                    length: 53673984,
                    flags: BTRFS_CHUNK_METADATA | BTRFS_CHUNK_DUP,
                    stripe_len: 65536,
                    sub_stripes: 1,
                    stripes: vec![
                        BtrfsStripe {
                            devid: 1,
                            physical: 38797312
                        },
                        BtrfsStripe {
                            devid: 1,
                            physical: 92471296
                        }
                    ],
                    since_ns: 0,
                },
            ]
        );
        // Fewer items than the buffer holds: only those.
        let (chunks, last) = parse_chunk_items(&b, 2);
        assert_eq!((chunks.len(), last), (1, Some(13631488)));
    }

    #[test]
    fn short_and_garbled_answers_never_panic() {
        let b = answer();
        for cut in 0..b.len() {
            let (chunks, _) = parse_chunk_items(&b[..cut], 3);
            assert!(chunks.len() <= 2);
        }
        // A count larger than the answer stops at its end.
        assert_eq!(parse_chunk_items(&b, u32::MAX).0.len(), 2);
        // More stripes than the item holds, none at all, a header longer than the buffer.
        let mut bad = chunk_item(1 << 20, BTRFS_CHUNK_DATA, &[(1, 0)]);
        bad[44] = 9;
        let b2 = item(256, 228, 5, &bad);
        assert_eq!(parse_chunk_items(&b2, 1), (vec![], Some(5)));
        let none = chunk_item(1 << 20, BTRFS_CHUNK_DATA, &[]);
        assert_eq!(parse_chunk_items(&item(256, 228, 6, &none), 1).0, vec![]);
        let mut long = item(256, 228, 7, &[0; 8]);
        long[28..32].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(parse_chunk_items(&long, 1), (vec![], None));
        // Pseudo-random bytes.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in (0..2000).step_by(7) {
            let junk: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let _ = parse_chunk_items(&junk, 100);
            let _ = parse_chunk(0, &junk);
        }
    }

    #[test]
    fn new_chunks_carry_when_they_were_found() {
        let mut fs = BtrfsFs::default();
        let (chunks, _) = parse_chunk_items(&answer(), 3);
        assert!(add_chunks(&mut fs, chunks.clone(), 0));
        assert!(!add_chunks(&mut fs, chunks.clone(), 5));
        let mut late = chunks[0].clone();
        late.logical = 1 << 30;
        assert!(add_chunks(&mut fs, vec![chunks[1].clone(), late], 5));
        let since: Vec<u64> = fs.chunks.iter().map(|c| c.since_ns).collect();
        assert_eq!(since, vec![0, 0, 5]);
    }

    #[test]
    fn mounts_grouped_by_filesystem() {
        let t = "47 27 0:40 / /mnt/b rw - btrfs /dev/loop0 rw,subvolid=5,subvol=/\n\
                 48 27 8:1 / /data rw - ext4 /dev/sda1 rw\n\
                 49 27 0:41 / /mnt/c rw - btrfs /dev/loop1 rw\n\
                 50 27 0:40 /sv /mnt/sv rw - btrfs /dev/loop0 rw,subvolid=256,subvol=/sv\n";
        let g = btrfs_mounts(t);
        let got: Vec<((u32, u32), Vec<&str>)> = g
            .iter()
            .map(|(d, ms)| (*d, ms.iter().map(|m| m.mount_point.as_str()).collect()))
            .collect();
        assert_eq!(
            got,
            vec![
                ((0, 40), vec!["/mnt/b", "/mnt/sv"]),
                ((0, 41), vec!["/mnt/c"])
            ]
        );
    }

    #[test]
    fn devices_picked_by_number_then_name() {
        let listed = vec![
            ("loop0".to_string(), (7, 0)),
            ("dm-0".to_string(), (253, 0)),
        ];
        // The path's number, when sysfs lists it (or lists nothing).
        assert_eq!(
            pick_device(Some((7, 0)), Some("loop0"), &listed, false),
            Some((7, 0))
        );
        assert_eq!(pick_device(Some((8, 1)), None, &[], false), Some((8, 1)));
        // Another device node of that path (a container's): the listed one of its name.
        assert_eq!(
            pick_device(Some((7, 9)), Some("dm-0"), &listed, false),
            Some((253, 0))
        );
        assert_eq!(pick_device(None, Some("sdz"), &listed, false), None);
        // A one-device filesystem whose path is nothing here: its one listed device.
        let one = &listed[..1];
        assert_eq!(pick_device(None, Some("root"), one, true), Some((7, 0)));
        assert_eq!(pick_device(None, Some("root"), one, false), None);
    }

    #[test]
    fn uuids_as_sysfs_names_them() {
        let b = [
            0xde, 0x56, 0xed, 0x07, 0x0f, 0x16, 0x4b, 0xdf, 0x94, 0x7c, 0x3f, 0x51, 0x52, 0x87,
            0x74, 0xe5,
        ];
        assert_eq!(uuid(&b), "de56ed07-0f16-4bdf-947c-3f51528774e5");
    }
}
