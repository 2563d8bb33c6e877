//! The loop devices over files of this host and where their sectors go (the LOOPS table,
//! format 1.7): read from sysfs at the start, and again at each flush so that a loop device
//! set up while recording is in the trace from when it was found.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use ioblame_format::LoopDevice;
use ioblame_tracepoints as events;

/// `LOOP_GET_STATUS64` (linux/loop.h).
const LOOP_GET_STATUS64: u32 = 0x4C05;
/// `LO_FLAGS_DIRECT_IO`.
const LO_FLAGS_DIRECT_IO: u32 = 16;

/// `struct loop_info64`.
#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

/// The loop devices seen so far.
#[derive(Debug, Default)]
pub struct LoopWatch {
    known: Vec<LoopDevice>,
}

impl LoopWatch {
    /// The loop devices of this host now (mapped before the recording: `since_ns` 0).
    pub fn start() -> LoopWatch {
        let mut w = LoopWatch::default();
        w.rescan(0);
        w
    }

    /// Every mapping seen so far.
    pub fn known(&self) -> &[LoopDevice] {
        &self.known
    }

    /// Looks again; `Some(every mapping seen so far)` when a new one appeared (found at
    /// `now_ns`, the trace clock).
    pub fn rescan(&mut self, now_ns: u64) -> Option<Vec<LoopDevice>> {
        let mut grew = false;
        for (name, l) in events::loop_devices_at(Path::new("/sys")) {
            let seen = self.known.iter().any(|k| {
                (k.major, k.minor, &k.backing_file, k.offset)
                    == (l.major, l.minor, &l.backing_file, l.offset)
            });
            if seen {
                continue;
            }
            let Some(l) = identify(&name, l) else {
                continue;
            };
            if self.known.iter().any(|k| same(k, &l)) {
                continue;
            }
            self.known.push(LoopDevice {
                since_ns: now_ns,
                ..l
            });
            grew = true;
        }
        grew.then(|| self.known.clone())
    }
}

fn same(a: &LoopDevice, b: &LoopDevice) -> bool {
    (
        a.major,
        a.minor,
        a.backing_major,
        a.backing_minor,
        a.backing_ino,
        a.offset,
    ) == (
        b.major,
        b.minor,
        b.backing_major,
        b.backing_minor,
        b.backing_ino,
        b.offset,
    )
}

/// The backing file's device and inode: from the loop device itself (`LOOP_GET_STATUS64`,
/// right in any mount namespace), else from its path as sysfs names it. `None` when
/// neither answers (detached meanwhile, or a path of another namespace without the device
/// node).
fn identify(name: &str, mut l: LoopDevice) -> Option<LoopDevice> {
    if let Some(info) = status64(&format!("/dev/{name}")) {
        let dev = info.lo_device as libc::dev_t;
        l.backing_major = libc::major(dev);
        l.backing_minor = libc::minor(dev);
        l.backing_ino = info.lo_inode;
        l.offset = info.lo_offset;
        l.size_limit = info.lo_sizelimit;
        l.direct_io = info.lo_flags & LO_FLAGS_DIRECT_IO != 0;
        return Some(l);
    }
    let m = std::fs::metadata(&l.backing_file).ok()?;
    let dev = m.dev() as libc::dev_t;
    l.backing_major = libc::major(dev);
    l.backing_minor = libc::minor(dev);
    l.backing_ino = m.ino();
    Some(l)
}

fn status64(path: &str) -> Option<LoopInfo64> {
    let f = std::fs::File::open(path).ok()?;
    // SAFETY: an all-zero loop_info64 is valid (plain integers and byte arrays).
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    use std::os::fd::AsRawFd;
    // SAFETY: the fd is open and `info` is a loop_info64 the kernel fills.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), LOOP_GET_STATUS64 as _, &mut info) };
    (rc == 0).then_some(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loop_info64_has_the_kernel_layout() {
        assert_eq!(std::mem::size_of::<LoopInfo64>(), 232);
    }
}
