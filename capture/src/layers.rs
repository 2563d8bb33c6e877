//! The stacked devices of this host and where their sectors go: the loop devices over files
//! (the LOOPS table, format 1.7) and the device-mapper targets that map sectors one to one
//! onto a lower device (DM_TARGETS), read at the start and again at each flush, so that one
//! set up while recording is in the trace from when it was found.

use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use ioblame_format::{DmTarget, LoopDevice};
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

/// The stacked devices seen so far.
#[derive(Debug, Default)]
pub struct LayerWatch {
    known: Vec<LoopDevice>,
    dm: Vec<DmTarget>,
}

impl LayerWatch {
    /// The stacked devices of this host now (mapped before the recording: `since_ns` 0).
    pub fn start() -> LayerWatch {
        let mut w = LayerWatch::default();
        w.rescan_loops(0);
        w.rescan_dm(0);
        w
    }

    /// Every loop mapping seen so far.
    pub fn loops(&self) -> &[LoopDevice] {
        &self.known
    }

    /// Every device-mapper target seen so far.
    pub fn dm_targets(&self) -> &[DmTarget] {
        &self.dm
    }

    /// Looks again at the device-mapper targets; `Some(every one seen so far)` when a new
    /// one appeared (found at `now_ns`).
    pub fn rescan_dm(&mut self, now_ns: u64) -> Option<Vec<DmTarget>> {
        let mut grew = false;
        for t in dm_targets(Path::new("/sys")) {
            if self.dm.iter().any(|k| k.same_target(&t)) {
                continue;
            }
            self.dm.push(DmTarget {
                since_ns: now_ns,
                ..t
            });
            grew = true;
        }
        grew.then(|| self.dm.clone())
    }

    /// Looks again at the loop devices; `Some(every mapping seen so far)` when a new one
    /// appeared (found at `now_ns`, the trace clock).
    pub fn rescan_loops(&mut self, now_ns: u64) -> Option<Vec<LoopDevice>> {
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
            if self.known.iter().any(|k| k.same_mapping(&l)) {
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
    // SAFETY: the fd is open and `info` is a loop_info64 the kernel fills.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), LOOP_GET_STATUS64 as _, &mut info) };
    (rc == 0).then_some(info)
}

/// `DM_TABLE_STATUS`: `_IOWR(0xfd, 12, struct dm_ioctl)`.
const DM_TABLE_STATUS: u32 = 0xC000_0000 | ((DM_IOCTL_LEN as u32) << 16) | (0xfd << 8) | 12;
/// `sizeof(struct dm_ioctl)`.
const DM_IOCTL_LEN: usize = 312;
/// `DM_STATUS_TABLE_FLAG`: the table, not the status.
const DM_STATUS_TABLE_FLAG: u32 = 1 << 4;
/// `DM_SECURE_DATA_FLAG`: the kernel wipes its copies of the answer (a crypt table's key).
const DM_SECURE_DATA_FLAG: u32 = 1 << 15;
/// `DM_BUFFER_FULL_FLAG`: the answer did not fit.
const DM_BUFFER_FULL_FLAG: u32 = 1 << 8;
/// `sizeof(struct dm_target_spec)`.
const DM_SPEC_LEN: usize = 40;

/// The one-to-one targets (`linear`, `crypt`) of this host's device-mapper devices (listed
/// in `<sysfs>/block/dm-*`), from their tables (`DM_TABLE_STATUS` on /dev/mapper/control).
/// The parameters are read for the lower device and offset only (a `crypt` table holds its
/// key, which is not kept). Nothing when there is no device-mapper or no permission.
fn dm_targets(sysfs: &Path) -> Vec<DmTarget> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(sysfs.join("block")) else {
        return out;
    };
    let mut devs: Vec<(u32, u32)> = rd
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("dm-"))
        .filter_map(|e| {
            let s = std::fs::read_to_string(e.path().join("dev")).ok()?;
            events::parse_majmin(&s)
        })
        .collect();
    if devs.is_empty() {
        return out;
    }
    devs.sort_unstable();
    let Ok(control) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/mapper/control")
    else {
        return out;
    };
    for (major, minor) in devs {
        for (start, length, target, lower) in table(&control, major, minor) {
            if let Some((lower_major, lower_minor, lower_offset)) = lower {
                out.push(DmTarget {
                    major,
                    minor,
                    start,
                    length,
                    target,
                    lower_major,
                    lower_minor,
                    lower_offset,
                    since_ns: 0,
                });
            }
        }
    }
    out
}

/// The lower device and offset of a one-to-one target's parameters: `linear` is
/// `<dev> <offset>`, `crypt` `<cipher> <key> <iv_offset> <dev> <offset> [options]`, the
/// device as `MAJ:MIN`.
fn lower_of(target: &str, params: &str) -> Option<(u32, u32, u64)> {
    let t: Vec<&str> = params.split_ascii_whitespace().collect();
    let (dev, off) = match target {
        "linear" => (t.first()?, t.get(1)?),
        "crypt" => (t.get(3)?, t.get(4)?),
        _ => return None,
    };
    let (ma, mi) = events::parse_majmin(dev)?;
    Some((ma, mi, off.parse().ok()?))
}

/// A target of a dm table: its start, length, type and, for a one-to-one type, the lower
/// device and offset.
type Target = (u64, u64, String, Option<(u32, u32, u64)>);

/// The table of dm device `major:minor`, one [`Target`] each; empty when it cannot be read.
/// The answer holds a crypt target's key: it is read in place, never copied, and wiped
/// (here, and by the kernel: `DM_SECURE_DATA_FLAG`).
fn table(control: &std::fs::File, major: u32, minor: u32) -> Vec<Target> {
    let mut size = 16 << 10;
    loop {
        let mut buf = vec![0u8; size];
        let put32 =
            |b: &mut [u8], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        // version 4.0.0, data_size, data_start, flags
        put32(&mut buf, 0, 4);
        put32(&mut buf, 12, size as u32);
        put32(&mut buf, 16, DM_IOCTL_LEN as u32);
        put32(&mut buf, 28, DM_STATUS_TABLE_FLAG | DM_SECURE_DATA_FLAG);
        let dev = libc::makedev(major, minor) as u64;
        buf[40..48].copy_from_slice(&dev.to_ne_bytes());
        // SAFETY: buf is a dm_ioctl of `size` bytes (data_size says so) the kernel fills.
        let rc =
            unsafe { libc::ioctl(control.as_raw_fd(), DM_TABLE_STATUS as _, buf.as_mut_ptr()) };
        let get32 = |b: &[u8], at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap());
        let full = get32(&buf, 28) & DM_BUFFER_FULL_FLAG != 0;
        let out = if rc != 0 || full {
            Vec::new()
        } else {
            parse_specs(&buf, get32(&buf, 16) as usize, get32(&buf, 20) as usize)
        };
        wipe(&mut buf);
        if rc == 0 && full && size < 4 << 20 {
            size *= 4;
            continue;
        }
        return out;
    }
}

/// Overwrites `b` with zeros in a way the compiler keeps.
fn wipe(b: &mut [u8]) {
    for x in b.iter_mut() {
        // SAFETY: `x` is a valid, aligned `&mut u8`.
        unsafe { std::ptr::write_volatile(x, 0) };
    }
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}

/// The `count` target specs at `data_start` of a `DM_TABLE_STATUS` answer: each spec's
/// `next` is counted from the first spec (the kernel's convention for this ioctl). The
/// parameters are read in place for the lower device and offset only.
fn parse_specs(buf: &[u8], data_start: usize, count: usize) -> Vec<Target> {
    let mut out = Vec::new();
    let mut at = data_start;
    for _ in 0..count.min(1024) {
        let Some(spec) = at.checked_add(DM_SPEC_LEN).and_then(|e| buf.get(at..e)) else {
            break;
        };
        let u64_at = |o: usize| u64::from_ne_bytes(spec[o..o + 8].try_into().unwrap());
        let next = u32::from_ne_bytes(spec[20..24].try_into().unwrap()) as usize;
        let cstr = |b: &[u8]| {
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            std::str::from_utf8(&b[..end]).unwrap_or("").to_string()
        };
        let target = cstr(&spec[24..40]);
        let params = buf.get(at + DM_SPEC_LEN..).unwrap_or(&[]);
        let params = &params[..params.iter().position(|&c| c == 0).unwrap_or(params.len())];
        let lower = std::str::from_utf8(params)
            .ok()
            .and_then(|p| lower_of(&target, p));
        out.push((u64_at(0), u64_at(8), target, lower));
        match data_start.checked_add(next) {
            Some(n) if next != 0 => at = n,
            _ => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loop_info64_has_the_kernel_layout() {
        assert_eq!(std::mem::size_of::<LoopInfo64>(), 232);
    }

    #[test]
    fn dm_ioctl_numbers() {
        // _IOWR(0xfd, 12, struct dm_ioctl) as <linux/dm-ioctl.h> gives it.
        assert_eq!(DM_TABLE_STATUS, 0xc138_fd0c);
    }

    #[test]
    fn one_to_one_targets_name_their_lower_device() {
        assert_eq!(lower_of("linear", "7:0 8192"), Some((7, 0, 8192)));
        assert_eq!(
            lower_of(
                "crypt",
                "aes-xts-plain64 :64:logon:cryptsetup:0a1b 0 7:3 32768 1 allow_discards"
            ),
            Some((7, 3, 32768))
        );
        assert_eq!(lower_of("striped", "2 128 7:0 0 7:1 0"), None);
        assert_eq!(lower_of("crypt", "aes 00"), None);
    }

    #[test]
    fn specs_are_read_as_the_kernel_lays_them_out() {
        let mut buf = vec![0u8; DM_IOCTL_LEN];
        let spec = |start: u64, len: u64, next: u32, ty: &str, params: &str| {
            let mut s = Vec::new();
            s.extend(start.to_ne_bytes());
            s.extend(len.to_ne_bytes());
            s.extend(0i32.to_ne_bytes());
            s.extend(next.to_ne_bytes());
            let mut t = [0u8; 16];
            t[..ty.len()].copy_from_slice(ty.as_bytes());
            s.extend(t);
            s.extend(params.as_bytes());
            s.push(0);
            while s.len() % 8 != 0 {
                s.push(0);
            }
            s
        };
        let first = spec(0, 100, 48, "linear", "7:0 8");
        assert_eq!(first.len(), 48);
        buf.extend(first);
        buf.extend(spec(100, 50, 0, "crypt", "aes k 0 7:1 0"));
        let got = parse_specs(&buf, DM_IOCTL_LEN, 2);
        assert_eq!(
            got,
            vec![
                (0, 100, "linear".into(), Some((7, 0, 8))),
                (100, 50, "crypt".into(), Some((7, 1, 0)))
            ]
        );
        // A count beyond what is there stops at the end.
        assert_eq!(
            parse_specs(&buf[..DM_IOCTL_LEN + 20], DM_IOCTL_LEN, 5),
            vec![]
        );
    }
}
