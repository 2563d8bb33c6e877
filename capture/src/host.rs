//! What the recording plan needs of this host: its tracefs (mounted here when nothing is
//! mounted) and its block devices (`/sys`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use ioblame_format::BlockDevice;
use ioblame_tracepoints::{self as events, PRIVILEGE_HINT};

/// Where tracefs is mounted when nothing is.
const MOUNT_POINT: &std::ffi::CStr = c"/sys/kernel/tracing";

/// Finds the tracefs mount, mounting it at /sys/kernel/tracing when nothing is mounted.
///
/// A tracefs this process may not read (it is mounted mode 0700 for root, the default) is a
/// permission error, not a missing mount.
pub fn tracefs() -> Result<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    if let Some(p) = events::find_tracefs(&mountinfo)? {
        return Ok(p);
    }
    // SAFETY: all pointers are valid NUL-terminated strings; data is null.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            MOUNT_POINT.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EPERM) {
            bail!(
                "permission denied: tracefs is not mounted and only root may mount it; \
                 {PRIVILEGE_HINT}"
            );
        }
        bail!(
            "tracefs is not mounted and mounting it failed ({e}); \
             `mount -t tracefs nodev /sys/kernel/tracing`"
        );
    }
    Ok(PathBuf::from(MOUNT_POINT.to_str()?))
}

/// The block devices of this host, from `/sys/class/block`.
pub fn block_devices() -> Vec<BlockDevice> {
    events::block_devices_at(Path::new("/sys"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_where_the_plan_looks_first() {
        assert_eq!(
            MOUNT_POINT.to_str().unwrap(),
            events::TRACEFS_PATHS[0],
            "a tracefs mounted here is found again"
        );
    }
}
