//! The recording host's tables: block devices (BLOCK_DEVICES), mounts (MOUNTS), the tasks
//! alive at the start (TASKS) and the cgroup2 hierarchy (CGROUPS), with the dev_t encodings.

use crate::codec::{Dec, Enc, INITIAL_CAPACITY};
use crate::error::DecodeError;

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

#[cfg(all(test, feature = "reader"))]
mod tests {
    use super::*;

    #[test]
    fn dev_t_encodings() {
        assert_eq!(kernel_dev(8, 1), (8 << 20) | 1);
        assert_eq!(user_dev(8, 1), 0x801);
        assert_eq!(user_dev(259, 0x12345), 0x1231_0345);
        let d = BlockDevice {
            major: 259,
            minor: 0x12345,
            ..Default::default()
        };
        assert_eq!(
            (d.kernel_dev(), d.user_dev()),
            ((259 << 20) | 0x12345, 0x1231_0345)
        );
    }

    #[test]
    fn host_tables_round_trip() {
        let devs = vec![
            BlockDevice {
                name: "nvme0n1p2".into(),
                major: 259,
                minor: 2,
                size_sectors: 1 << 30,
                part_start: 2048,
                parent: "nvme0n1".into(),
                loop_backing_file: String::new(),
                logical_block_size: 512,
            },
            BlockDevice::default(),
        ];
        assert_eq!(
            decode_block_devices(&encode_block_devices(&devs)).unwrap(),
            devs
        );
        let mounts = vec![
            Mount {
                mount_id: 30,
                major: 259,
                minor: 2,
                root: "/".into(),
                mount_point: "/data".into(),
                fs_type: "xfs".into(),
                source: "/dev/nvme0n1p2".into(),
                block_size: 4096,
                xfs_agblocks: 1 << 20,
                xfs_agblklog: 20,
            },
            Mount::default(),
        ];
        assert_eq!(decode_mounts(&encode_mounts(&mounts)).unwrap(), mounts);
        let tasks = vec![Task {
            pid: 1,
            tid: 2,
            comm: "kworker/0:1".into(),
        }];
        assert_eq!(decode_tasks(&encode_tasks(&tasks)).unwrap(), tasks);
        let cgroups = vec![Cgroup {
            id: 1,
            path: "/".into(),
        }];
        assert_eq!(decode_cgroups(&encode_cgroups(&cgroups)).unwrap(), cgroups);
    }

    #[test]
    fn an_impossible_xfs_geometry_is_dropped_and_a_count_mismatch_is_an_error() {
        let m = Mount {
            xfs_agblocks: 100,
            xfs_agblklog: 40,
            ..Default::default()
        };
        let d = decode_mounts(&encode_mounts(&[m])).unwrap();
        assert_eq!((d[0].xfs_agblocks, d[0].xfs_agblklog), (0, 0));
        // The block sizes of format 1.1 counting two mounts where there is one.
        let mut b = encode_mounts(&[Mount::default()]);
        b.truncate(b.len() - 20);
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&[0; 8]);
        assert!(decode_mounts(&b).unwrap_err().what.contains("block sizes"));
    }
}
