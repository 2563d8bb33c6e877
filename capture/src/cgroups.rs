//! The cgroup2 hierarchy of this host: where it is mounted (from `/proc/self/mountinfo`,
//! never a fixed path: `/sys/fs/cgroup` on a pure v2 host, `/sys/fs/cgroup/unified` on a
//! v1/v2 hybrid) and its cgroups' ids and paths, for the trace's CGROUPS table
//! (docs/format.md). A cgroup's id, as `PERF_SAMPLE_CGROUP` and the writeback events report
//! it, is the inode number of its directory in the cgroup2 filesystem.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ioblame_format::Cgroup;

/// Most cgroups listed in one table.
const MAX_CGROUPS: usize = 100_000;
/// Longest time one walk may take.
const BUDGET: Duration = Duration::from_secs(2);

/// The cgroup2 mount of this host: its mount point and the hierarchy path of its root (not
/// `/` inside a cgroup namespace). `None` when no cgroup2 filesystem is mounted.
pub fn cgroup2_mount() -> Option<(PathBuf, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    cgroup2_mount_in(&text)
}

/// [`cgroup2_mount`] on the text of a mountinfo file.
fn cgroup2_mount_in(text: &str) -> Option<(PathBuf, String)> {
    let m = ioblame_tracepoints::mountinfo::cgroup2(text)?;
    Some((PathBuf::from(m.mount_point), m.root))
}

/// Every cgroup of the hierarchy mounted at `mount` (whose root is `root` in the
/// hierarchy), as (id, path), up to [`MAX_CGROUPS`] and [`BUDGET`]; directories that cannot
/// be read are skipped. Empty when `mount` cannot be read.
pub fn walk(mount: &Path, root: &str) -> Vec<Cgroup> {
    let started = Instant::now();
    let mut out = Vec::new();
    let mut stack = vec![(mount.to_path_buf(), root.trim_end_matches('/').to_string())];
    while let Some((dir, path)) = stack.pop() {
        let Ok(md) = std::fs::metadata(&dir) else {
            continue;
        };
        out.push(Cgroup {
            id: md.ino(),
            path: if path.is_empty() {
                "/".into()
            } else {
                path.clone()
            },
        });
        if out.len() >= MAX_CGROUPS || started.elapsed() > BUDGET {
            break;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let name = e.file_name().to_string_lossy().into_owned();
                stack.push((e.path(), format!("{path}/{name}")));
            }
        }
    }
    out.sort_by_key(|c| c.id);
    out
}

/// The cgroup2 mount when its root enables no controller (its `cgroup.subtree_control` is
/// empty): the kernel then sets up no `perf_event` state in the cgroups below it (the
/// controller is implicit on cgroup2, but a cgroup gets its state only once a controller is
/// enabled above it, as systemd does at boot), and `PERF_SAMPLE_CGROUP` reports every task in
/// the root. Seen in a kernel-lab guest (Debian's 6.1, no systemd), docs/kernel-lab.md.
pub fn root_without_controllers() -> Option<PathBuf> {
    let (mount, _) = cgroup2_mount()?;
    enables_no_controller(&mount).then_some(mount)
}

/// Whether the cgroup at `dir` has an empty `cgroup.subtree_control` (false when it cannot
/// be read: nothing to say).
fn enables_no_controller(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.subtree_control")).is_ok_and(|c| c.trim().is_empty())
}

/// The cgroups of this host's cgroup2 hierarchy (empty without one).
pub fn snapshot() -> Vec<Cgroup> {
    match cgroup2_mount() {
        Some((mount, root)) => walk(&mount, &root),
        None => Vec::new(),
    }
}

/// `later` over `earlier`: every id of both, `later`'s path winning, sorted by id.
pub fn merge(earlier: &[Cgroup], later: Vec<Cgroup>) -> Vec<Cgroup> {
    let mut by_id: std::collections::BTreeMap<u64, String> =
        earlier.iter().map(|c| (c.id, c.path.clone())).collect();
    for c in later {
        by_id.insert(c.id, c.path);
    }
    by_id
        .into_iter()
        .map(|(id, path)| Cgroup { id, path })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_is_found_wherever_it_is() {
        let hybrid = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
            35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
            41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_mount_in(hybrid),
            Some((PathBuf::from("/sys/fs/cgroup/unified"), "/".into()))
        );
        let v2 =
            "29 23 0:26 /ns\\040x /sys/fs/cgroup rw shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            cgroup2_mount_in(v2),
            Some((PathBuf::from("/sys/fs/cgroup"), "/ns x".into()))
        );
        assert_eq!(
            cgroup2_mount_in("35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw\n"),
            None
        );
    }

    #[test]
    fn a_walk_names_each_directory_by_its_inode() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        std::fs::write(d.path().join("a/cgroup.procs"), "").unwrap();
        let t = walk(d.path(), "/");
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        let mut want = vec![
            Cgroup {
                id: ino(d.path()),
                path: "/".into(),
            },
            Cgroup {
                id: ino(&d.path().join("a")),
                path: "/a".into(),
            },
            Cgroup {
                id: ino(&d.path().join("a/b")),
                path: "/a/b".into(),
            },
        ];
        want.sort_by_key(|c| c.id);
        assert_eq!(t, want);
        let merged = merge(
            &[Cgroup {
                id: 1,
                path: "/gone".into(),
            }],
            t.clone(),
        );
        assert_eq!(merged.len(), 4);
    }

    /// An empty `cgroup.subtree_control` is a root that enables no controller; one naming a
    /// controller, or none to read, is not.
    #[test]
    fn a_root_enabling_no_controller_is_told() {
        let d = tempfile::tempdir().unwrap();
        assert!(!enables_no_controller(d.path()));
        std::fs::write(d.path().join("cgroup.subtree_control"), "\n").unwrap();
        assert!(enables_no_controller(d.path()));
        std::fs::write(d.path().join("cgroup.subtree_control"), "cpu io pids\n").unwrap();
        assert!(!enables_no_controller(d.path()));
    }
}
