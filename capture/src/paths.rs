//! The FILES table: paths of the inodes of the recorded filesystems, found by walking their
//! mount points (see `docs/format.md`, FILES payload).

use std::collections::{HashSet, VecDeque};
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ioblame_format::{
    kernel_dev, BlockDevice, FileEntry, FileTable, Mount, FILES_CAPPED, FILES_TIMED_OUT,
};

/// How far a walk may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most entries recorded, over all filesystems.
    pub max_entries: usize,
    /// Longest time spent, over all filesystems.
    pub budget: Duration,
}

/// The mounts to walk: one per filesystem (device), of the devices `devs` (major, minor) when
/// given, else of every mounted filesystem on a block device of `block_devices`. A mount of
/// the filesystem's root is preferred to a bind mount of a subdirectory.
pub fn mounts_to_walk<'a>(
    mounts: &'a [Mount],
    devs: Option<&[(u32, u32)]>,
    block_devices: &[BlockDevice],
) -> Vec<&'a Mount> {
    let wanted = |m: &Mount| match devs {
        Some(d) => d.contains(&(m.major, m.minor)),
        None => {
            m.major != 0
                && block_devices
                    .iter()
                    .any(|b| b.major == m.major && b.minor == m.minor)
        }
    };
    let mut out: Vec<&Mount> = Vec::new();
    for m in mounts.iter().filter(|m| wanted(m)) {
        match out
            .iter_mut()
            .find(|o| (o.major, o.minor) == (m.major, m.minor))
        {
            Some(o) => {
                if o.root != "/" && m.root == "/" {
                    *o = m;
                }
            }
            None => out.push(m),
        }
    }
    out
}

/// The mounts to name the files the trace refers to in (`--paths touched`):
/// [`mounts_to_walk`]'s, and every mount of each btrfs filesystem on a wanted device (of
/// `devs` when given, else any of `block_devices`). A btrfs mount shows its superblock's
/// anonymous device (major 0), which is what the events carry, not its block device: it is
/// wanted by its mount source's device (for a filesystem over several devices, the one
/// mountinfo shows) or by that anonymous device given in `devs`; each of its mounts is kept,
/// since each mounted subvolume is looked in (`names::btrfs`).
pub fn mounts_to_name<'a>(
    mounts: &'a [Mount],
    devs: Option<&[(u32, u32)]>,
    block_devices: &[BlockDevice],
) -> Vec<&'a Mount> {
    let mut out = mounts_to_walk(mounts, devs, block_devices);
    let wanted = |m: &Mount| {
        if devs.is_some_and(|d| d.contains(&(m.major, m.minor))) {
            return true;
        }
        let Some(b) = source_device(&m.source) else {
            return false;
        };
        match devs {
            Some(d) => d.contains(&b),
            None => block_devices.iter().any(|x| (x.major, x.minor) == b),
        }
    };
    let btrfs: Vec<(u32, u32)> = mounts
        .iter()
        .filter(|m| m.fs_type == "btrfs" && wanted(m))
        .map(|m| (m.major, m.minor))
        .collect();
    for m in mounts {
        if m.fs_type == "btrfs"
            && btrfs.contains(&(m.major, m.minor))
            && !out.iter().any(|o| std::ptr::eq(*o, m))
        {
            out.push(m);
        }
    }
    out
}

/// The block device (major, minor) a mount source such as `/dev/sda2` names (a link, such
/// as `/dev/mapper/x`, followed); `None` for a source that is not one.
fn source_device(source: &str) -> Option<(u32, u32)> {
    use std::os::unix::fs::FileTypeExt;
    if !source.starts_with('/') {
        return None;
    }
    let md = std::fs::metadata(source).ok()?;
    md.file_type()
        .is_block_device()
        .then(|| (libc::major(md.rdev()), libc::minor(md.rdev())))
}

/// Walks `mounts` breadth first (shallow paths first, so a walk cut short keeps the most
/// useful ones), never leaving a mount's filesystem, recording each inode once under the
/// first path found. Unreadable directories are skipped. `flags` is added to the table's.
///
/// The limits are shared: filesystems are walked smallest first (by inodes in use), each
/// with an even share of the time and entries left, so a large filesystem (the root one,
/// recorded beside a small test device) cannot use up the budget before a small one is
/// named; what a small one leaves unused goes to the next.
pub fn walk(mounts: &[&Mount], limits: Limits, flags: u32) -> FileTable {
    let started = Instant::now();
    let mut order: Vec<&Mount> = mounts.to_vec();
    // Stable: filesystems of unknown size (no statvfs, or no inode count: btrfs says 0) keep
    // their order, after the others.
    order.sort_by_cached_key(|m| {
        inodes_in_use(Path::new(&m.mount_point))
            .filter(|&n| n > 0)
            .unwrap_or(u64::MAX)
    });
    let mut t = FileTable {
        flags,
        entries: Vec::new(),
        unnamed: Vec::new(),
    };
    let mut seen: HashSet<(u32, u64)> = HashSet::new();
    for (i, m) in order.iter().enumerate() {
        let left = order.len() - i;
        let share = Limits {
            max_entries: t.entries.len()
                + limits.max_entries.saturating_sub(t.entries.len()) / left,
            budget: limits.budget.saturating_sub(started.elapsed()) / left as u32,
        };
        walk_one(m, share, &mut t, &mut seen, None);
    }
    t
}

/// Walks one mount into `t` until its share of the limits is used: `share.max_entries` is
/// the most entries `t` may then hold, `share.budget` the time from now. With `wanted`, only
/// the inodes in it are recorded (and removed from it), and the walk stops once none of this
/// filesystem's is left.
fn walk_one(
    m: &Mount,
    share: Limits,
    t: &mut FileTable,
    seen: &mut HashSet<(u32, u64)>,
    mut wanted: Option<&mut HashSet<(u32, u64)>>,
) {
    let started = Instant::now();
    let root = Path::new(&m.mount_point);
    let Ok(rm) = std::fs::symlink_metadata(root) else {
        return;
    };
    let dev = kernel_dev(m.major, m.minor);
    let st_dev = rm.dev();
    let mut left = wanted
        .as_ref()
        .map(|w| w.iter().filter(|k| k.0 == dev).count());
    if left == Some(0) {
        return;
    }
    // Records `ino` under `p`; false when the walk must stop.
    let mut add = |t: &mut FileTable, ino: u64, p: &Path| -> bool {
        if let (Some(w), Some(n)) = (wanted.as_deref_mut(), left.as_mut()) {
            if !w.remove(&(dev, ino)) {
                return true;
            }
            *n -= 1;
        }
        if t.entries.len() >= share.max_entries {
            t.flags |= FILES_CAPPED;
            return false;
        }
        if seen.insert((dev, ino)) {
            t.entries.push(FileEntry {
                dev,
                ino,
                path: p.to_string_lossy().into_owned(),
            });
        }
        left != Some(0)
    };
    if !add(t, rm.ino(), root) {
        return;
    }
    let mut n = 0usize;
    let mut queue: VecDeque<PathBuf> = VecDeque::from([root.to_path_buf()]);
    while let Some(dir) = queue.pop_front() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            n += 1;
            if n % 256 == 0 && started.elapsed() >= share.budget {
                t.flags |= FILES_TIMED_OUT;
                return;
            }
            let p = e.path();
            // d_ino: the inode in this directory's filesystem (for a mount point, the
            // directory it covers), with no stat.
            if !add(t, e.ino(), &p) {
                return;
            }
            if e.file_type().is_ok_and(|ft| ft.is_dir()) {
                // Descend only within the filesystem (a mount point has another st_dev).
                if std::fs::symlink_metadata(&p).is_ok_and(|md| md.dev() == st_dev) {
                    queue.push_back(p);
                }
            }
        }
    }
}

/// Walks `mounts` for the inodes of `wanted` only (removing those it finds from it), each
/// filesystem until its wanted inodes are all found, within `budget` in all (shared as
/// [`walk`] shares it). The table's flags say whether the time ran out.
pub fn find(mounts: &[&Mount], wanted: &mut HashSet<(u32, u64)>, budget: Duration) -> FileTable {
    let started = Instant::now();
    let mut t = FileTable::default();
    let mut seen: HashSet<(u32, u64)> = HashSet::new();
    let order: Vec<&Mount> = mounts
        .iter()
        .copied()
        .filter(|m| wanted.iter().any(|k| k.0 == kernel_dev(m.major, m.minor)))
        .collect();
    for (i, m) in order.iter().enumerate() {
        let share = Limits {
            max_entries: usize::MAX,
            budget: budget.saturating_sub(started.elapsed()) / (order.len() - i) as u32,
        };
        walk_one(m, share, &mut t, &mut seen, Some(wanted));
    }
    t
}

/// Inodes in use on the filesystem mounted at `mount_point` (`statvfs`), if it tells.
fn inodes_in_use(mount_point: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(mount_point.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a NUL-terminated path and `st` points to writable memory of the size
    // statvfs(3) fills; it is read only when the call succeeded.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it initialised `st`.
    let st = unsafe { st.assume_init() };
    // fsfilcnt_t is 32 bits wide on some targets.
    #[allow(clippy::unnecessary_cast)]
    let (files, free) = (st.f_files as u64, st.f_ffree as u64);
    Some(files.saturating_sub(free))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(id: u32, major: u32, minor: u32, root: &str, mp: &str) -> Mount {
        Mount {
            mount_id: id,
            major,
            minor,
            root: root.into(),
            mount_point: mp.into(),
            fs_type: "ext4".into(),
            source: "/dev/x".into(),
            block_size: 4096,
            ..Mount::default()
        }
    }

    #[test]
    fn which_mounts() {
        let ms = [
            mount(1, 254, 0, "/", "/"),
            mount(2, 0, 22, "/", "/proc"),
            mount(3, 7, 0, "/sub", "/srv/bind"),
            mount(4, 7, 0, "/", "/mnt/a"),
            mount(5, 7, 1, "/", "/mnt/b"),
            mount(6, 7, 0, "/", "/mnt/a-again"),
        ];
        let bd = |major, minor| BlockDevice {
            major,
            minor,
            ..Default::default()
        };
        let devs = [bd(254, 0), bd(7, 0), bd(7, 1)];
        let ids = |v: Vec<&Mount>| v.iter().map(|m| m.mount_id).collect::<Vec<_>>();
        assert_eq!(ids(mounts_to_walk(&ms, None, &devs)), [1, 4, 5]);
        assert_eq!(ids(mounts_to_walk(&ms, Some(&[(7, 0)]), &devs)), [4]);
        assert_eq!(
            ids(mounts_to_walk(&ms, Some(&[(9, 9)]), &devs)),
            [] as [u32; 0]
        );
    }

    /// btrfs mounts (major 0) are named by their source's block device, every mount of the
    /// filesystem kept; none is walked.
    #[test]
    fn which_mounts_to_name() {
        // A block device node of this host, if any, to stand for a btrfs's source.
        let Some((src, ma, mi)) = std::fs::read_dir("/dev").ok().and_then(|rd| {
            use std::os::unix::fs::FileTypeExt;
            rd.flatten().find_map(|e| {
                let md = std::fs::metadata(e.path()).ok()?;
                md.file_type().is_block_device().then(|| {
                    (
                        e.path().display().to_string(),
                        libc::major(md.rdev()),
                        libc::minor(md.rdev()),
                    )
                })
            })
        }) else {
            return;
        };
        let btrfs = |id, minor, root: &str, mp: &str, source: &str| Mount {
            fs_type: "btrfs".into(),
            source: source.into(),
            ..mount(id, 0, minor, root, mp)
        };
        let ms = [
            mount(1, 4000, 0, "/", "/"),
            btrfs(2, 40, "/", "/mnt/top", &src),
            btrfs(3, 40, "/sub", "/mnt/sub", &src),
            btrfs(4, 41, "/", "/mnt/other", "/dev/null"),
            btrfs(5, 42, "/", "/mnt/gone", "/nonexistent/dev"),
        ];
        let bd = |major, minor| BlockDevice {
            major,
            minor,
            ..Default::default()
        };
        let devs = [bd(4000, 0), bd(ma, mi)];
        let ids = |v: Vec<&Mount>| v.iter().map(|m| m.mount_id).collect::<Vec<_>>();
        assert_eq!(ids(mounts_to_name(&ms, None, &devs)), [1, 2, 3]);
        assert_eq!(ids(mounts_to_walk(&ms, None, &devs)), [1]);
        assert_eq!(ids(mounts_to_name(&ms, Some(&[(ma, mi)]), &devs)), [2, 3]);
        assert_eq!(ids(mounts_to_name(&ms, Some(&[(4000, 0)]), &devs)), [1]);
        // The superblock's device itself.
        assert_eq!(ids(mounts_to_name(&ms, Some(&[(0, 41)]), &devs)), [4]);
    }

    #[test]
    fn walks_one_filesystem_with_limits() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f1"), "x").unwrap();
        std::fs::write(root.join("top"), "x").unwrap();
        std::fs::hard_link(root.join("top"), root.join("a/link")).unwrap();
        let md = std::fs::metadata(root).unwrap();
        // SAFETY: pure arithmetic functions of libc.
        let (ma, mi) = (libc::major(md.dev()), libc::minor(md.dev()));
        let m = mount(1, ma, mi, "/", root.to_str().unwrap());
        let lim = Limits {
            max_entries: 1000,
            budget: Duration::from_secs(10),
        };
        let t = walk(&[&m], lim, 0);
        assert_eq!(t.flags, 0);
        let path_of = |p: &Path| {
            let ino = std::fs::metadata(p).unwrap().ino();
            t.entries
                .iter()
                .filter(|e| e.ino == ino)
                .map(|e| e.path.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            path_of(&root.join("a/b/f1")),
            [root.join("a/b/f1").display().to_string()]
        );
        assert_eq!(path_of(root), [root.display().to_string()]);
        // A hard link is one inode: the shallower name, found first, is kept.
        assert_eq!(
            path_of(&root.join("top")),
            [root.join("top").display().to_string()]
        );
        assert_eq!(t.entries.len(), 5, "{:?}", t.entries);
        assert!(t.entries.iter().all(|e| e.dev == kernel_dev(ma, mi)));

        let capped = walk(
            &[&m],
            Limits {
                max_entries: 3,
                ..lim
            },
            0,
        );
        assert_eq!(capped.entries.len(), 3);
        assert_eq!(capped.flags, FILES_CAPPED);
        // Breadth first: the root and its direct entries come first.
        assert_eq!(capped.entries[0].path, root.display().to_string());
    }

    /// A filesystem that uses up its share of the time does not keep the next one from
    /// being named (a timed-out walk of the root filesystem once left a test device's files
    /// unnamed).
    #[test]
    fn a_large_filesystem_does_not_starve_the_next() {
        let big = tempfile::tempdir().unwrap();
        for i in 0..2000 {
            std::fs::write(big.path().join(format!("f{i}")), "").unwrap();
        }
        let small = tempfile::tempdir().unwrap();
        std::fs::write(small.path().join("wanted"), "x").unwrap();
        // Two "filesystems" (distinct devices for the table), the large one listed first.
        let a = mount(1, 7, 0, "/", big.path().to_str().unwrap());
        let b = mount(2, 7, 1, "/", small.path().to_str().unwrap());
        let t = walk(
            &[&a, &b],
            Limits {
                max_entries: 1_000_000,
                budget: Duration::ZERO,
            },
            0,
        );
        assert_eq!(t.flags, FILES_TIMED_OUT);
        let wanted = small.path().join("wanted").display().to_string();
        assert!(
            t.entries.iter().any(|e| e.path == wanted),
            "{}",
            t.entries.len()
        );
        assert!(t.entries.len() < 2000, "the large one was cut short");

        // The entries are shared too: the small one is named within its half.
        let t = walk(
            &[&a, &b],
            Limits {
                max_entries: 100,
                budget: Duration::from_secs(60),
            },
            0,
        );
        assert_eq!(t.flags, FILES_CAPPED);
        assert!(t.entries.iter().any(|e| e.path == wanted));
        assert!(t.entries.len() <= 100, "{}", t.entries.len());
    }

    #[test]
    fn find_stops_once_the_wanted_are_found() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/deep"), "x").unwrap();
        std::fs::write(root.join("top"), "x").unwrap();
        for i in 0..50 {
            std::fs::write(root.join(format!("other{i}")), "").unwrap();
        }
        let md = std::fs::metadata(root).unwrap();
        let (ma, mi) = (libc::major(md.dev()), libc::minor(md.dev()));
        let dev = kernel_dev(ma, mi);
        let m = mount(1, ma, mi, "/", root.to_str().unwrap());
        let ino = |p: &str| std::fs::metadata(root.join(p)).unwrap().ino();
        let mut wanted: HashSet<(u32, u64)> = [
            (dev, ino("a/b/deep")),
            (dev, ino("top")),
            (dev, u64::MAX - 1),
        ]
        .into();
        let t = find(&[&m], &mut wanted, Duration::from_secs(10));
        let mut got: Vec<_> = t.entries.iter().map(|e| e.path.clone()).collect();
        got.sort();
        assert_eq!(
            got,
            [
                root.join("a/b/deep").display().to_string(),
                root.join("top").display().to_string()
            ]
        );
        // What was not found stays wanted; nothing else was recorded.
        assert_eq!(wanted, [(dev, u64::MAX - 1)].into());
        assert_eq!(t.flags, 0);
        // Once all are found the walk stops: a single shallow file needs no descent.
        let mut one: HashSet<(u32, u64)> = [(dev, ino("top"))].into();
        let t = find(&[&m], &mut one, Duration::from_secs(10));
        assert_eq!(t.entries.len(), 1);
        assert!(one.is_empty());
    }
}
