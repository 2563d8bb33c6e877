//! cgroups for live tests: where the cgroup2 hierarchy is mounted on this host (read from
//! `/proc/self/mountinfo`, never assumed: `/sys/fs/cgroup` on a pure v2 host,
//! `/sys/fs/cgroup/unified` on a v1/v2 hybrid; parsed by `ioblame_tracepoints::mountinfo`, as
//! the recorder does) and test cgroups made in it.

use std::path::{Path, PathBuf};

/// The cgroup2 mount point, from `/proc/self/mountinfo`; `None` without one.
pub fn cgroup2_mount() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    ioblame_tracepoints::mountinfo::cgroup2(&text).map(|m| PathBuf::from(m.mount_point))
}

/// A cgroup made for a test directly below the cgroup2 root, removed on drop (once its
/// tasks have exited). A task joins it with `echo $$ > "$DIR/cgroup.procs"`.
#[derive(Debug)]
pub struct TestCgroup {
    /// Its directory in the cgroup2 filesystem.
    pub dir: PathBuf,
    /// Its path under the mount, as traces name it (`/ioblame-test-PID-NAME`).
    pub path: String,
}

impl TestCgroup {
    /// Makes `ioblame-test-<pid>-<name>` below `mount` (panics when it cannot).
    pub fn new(mount: &Path, name: &str) -> TestCgroup {
        let leaf = format!("ioblame-test-{}-{name}", std::process::id());
        let dir = mount.join(&leaf);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        TestCgroup {
            dir,
            path: format!("/{leaf}"),
        }
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}
