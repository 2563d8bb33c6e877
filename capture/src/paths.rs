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

/// Walks `mounts` breadth first (shallow paths first, so a walk cut short keeps the most
/// useful ones), never leaving a mount's filesystem, recording each inode once under the
/// first path found. Unreadable directories are skipped. `flags` is added to the table's.
pub fn walk(mounts: &[&Mount], limits: Limits, flags: u32) -> FileTable {
    let started = Instant::now();
    let mut t = FileTable {
        flags,
        entries: Vec::new(),
    };
    let mut seen: HashSet<(u32, u64)> = HashSet::new();
    let mut n = 0usize;
    'mounts: for m in mounts {
        let root = Path::new(&m.mount_point);
        let Ok(rm) = std::fs::symlink_metadata(root) else {
            continue;
        };
        let dev = kernel_dev(m.major, m.minor);
        let st_dev = rm.dev();
        let mut add = |t: &mut FileTable, ino: u64, p: &Path| -> bool {
            if t.entries.len() >= limits.max_entries {
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
            true
        };
        if !add(&mut t, rm.ino(), root) {
            break;
        }
        let mut queue: VecDeque<PathBuf> = VecDeque::from([root.to_path_buf()]);
        while let Some(dir) = queue.pop_front() {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                n += 1;
                if n % 256 == 0 && started.elapsed() >= limits.budget {
                    t.flags |= FILES_TIMED_OUT;
                    break 'mounts;
                }
                let p = e.path();
                // d_ino: the inode in this directory's filesystem (for a mount point, the
                // directory it covers), with no stat.
                if !add(&mut t, e.ino(), &p) {
                    break 'mounts;
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
    t
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
}
