//! Snapshots of the host taken at start: block devices, mounts, tasks, kallsyms, header facts.

use std::path::Path;

use anyhow::{bail, Context, Result};
use ioblame_format::{Header, Kallsyms, Mount, Task};

use ioblame_tracepoints::mountinfo;

/// Parses /proc/self/mountinfo text ([`ioblame_tracepoints::mountinfo`]).
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    mountinfo::parse(text)
        .map(|m| Mount {
            mount_id: m.mount_id,
            major: m.major,
            minor: m.minor,
            root: m.root,
            mount_point: m.mount_point,
            fs_type: m.fs_type,
            source: m.source,
            ..Mount::default()
        })
        .collect()
}

/// Mounts of this mount namespace, with the block size of the filesystems on block devices.
pub fn mounts() -> Vec<Mount> {
    let mut v = std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse_mountinfo(&t))
        .unwrap_or_default();
    for m in &mut v {
        // Only block-device filesystems: statfs of a network or FUSE mount can hang.
        if m.major != 0 {
            m.block_size = block_size(Path::new(&m.mount_point)).unwrap_or(0);
            if m.fs_type == "xfs" {
                if let Some((agblocks, agblklog)) = xfs_geometry(m.major, m.minor, &m.source) {
                    m.xfs_agblocks = agblocks;
                    m.xfs_agblklog = agblklog;
                }
            }
        }
    }
    v
}

/// The allocation group geometry of the xfs filesystem on device `major:minor`
/// (`sb_agblocks`, `sb_agblklog`), from its primary superblock: what turns the xfs block
/// numbers of `xfs_map_blocks_*` into sectors (docs/attribution.md, "Dirty folios and the
/// sector maps"). The device is opened as `/dev/block/MAJ:MIN` (udev's link), else as the
/// mount's source; `None` when neither opens or it is no xfs superblock.
pub fn xfs_geometry(major: u32, minor: u32, source: &str) -> Option<(u32, u8)> {
    use std::io::Read;
    let mut paths = vec![format!("/dev/block/{major}:{minor}")];
    if source.starts_with("/dev/") {
        paths.push(source.to_string());
    }
    let mut sb = [0u8; 128];
    let ok = paths.iter().any(|p| {
        std::fs::File::open(p)
            .and_then(|mut f| f.read_exact(&mut sb))
            .is_ok()
    });
    if !ok {
        return None;
    }
    parse_xfs_superblock(&sb)
}

/// `sb_agblocks` (big-endian u32 at byte 84) and `sb_agblklog` (byte 124) of an xfs
/// superblock (magic `XFSB`), checked for sense: `agblocks` fits in `2^agblklog` blocks.
pub fn parse_xfs_superblock(sb: &[u8]) -> Option<(u32, u8)> {
    if sb.len() < 125 || &sb[..4] != b"XFSB" {
        return None;
    }
    let agblocks = u32::from_be_bytes(sb[84..88].try_into().ok()?);
    let agblklog = sb[124];
    let fits = agblklog > 0 && agblklog <= 32 && (agblocks as u64) <= 1u64 << agblklog;
    (agblocks > 0 && fits).then_some((agblocks, agblklog))
}

/// `statfs` `f_bsize` of the filesystem holding `p`.
pub fn block_size(p: &Path) -> Option<u32> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs is plain old data; all-zero is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a NUL-terminated path and st a valid statfs to fill.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    u32::try_from(st.f_bsize).ok().filter(|b| *b > 0)
}

/// Tasks alive now.
pub fn tasks() -> Vec<Task> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(tr) = std::fs::read_dir(e.path().join("task")) else {
            continue;
        };
        for t in tr.flatten() {
            let Ok(tid) = t.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Ok(c) = std::fs::read_to_string(t.path().join("comm")) {
                out.push(Task {
                    pid,
                    tid,
                    comm: c.trim_end_matches('\n').to_string(),
                });
            }
        }
    }
    out.sort_by_key(|t| (t.pid, t.tid));
    out
}

/// Merges two task lists (sorted by pid, tid): every task of either, with the newer comm.
pub fn merge_tasks(before: Vec<Task>, after: Vec<Task>) -> Vec<Task> {
    let mut by_id: std::collections::BTreeMap<(u32, u32), Task> = std::collections::BTreeMap::new();
    for t in before.into_iter().chain(after) {
        by_id.insert((t.pid, t.tid), t);
    }
    by_id.into_values().collect()
}

/// The word size of the running kernel in bytes: the width of the addresses in
/// /proc/kallsyms (hidden addresses keep their width), else from `uname -m`, else this
/// program's own. A 32-bit recorder on a 64-bit kernel thus writes 8.
pub fn kernel_word_size(kallsyms: Option<&Kallsyms>, machine: &str) -> u8 {
    if let Some(a) = kallsyms.and_then(|k| k.text.lines().next()?.split(' ').next()) {
        if a.len() == 16 && a.bytes().all(|c| c.is_ascii_hexdigit()) {
            return 8;
        }
        if a.len() == 8 && a.bytes().all(|c| c.is_ascii_hexdigit()) {
            return 4;
        }
    }
    const WIDE: &[&str] = &[
        "x86_64",
        "aarch64",
        "arm64",
        "ppc64",
        "ppc64le",
        "s390x",
        "riscv64",
        "mips64",
        "loongarch64",
        "sparc64",
        "alpha",
        "ia64",
        "parisc64",
    ];
    if WIDE.contains(&machine) {
        8
    } else if !machine.is_empty() {
        4
    } else {
        std::mem::size_of::<usize>() as u8
    }
}

/// /proc/kallsyms, with whether its addresses are hidden.
pub fn kallsyms() -> (Option<Kallsyms>, Option<String>) {
    match std::fs::read_to_string("/proc/kallsyms") {
        Ok(text) => {
            let restricted = text.lines().take(1000).all(|l| {
                l.split(' ')
                    .next()
                    .is_none_or(|a| a.bytes().all(|c| c == b'0'))
            });
            let warn = restricted.then(|| {
                "/proc/kallsyms addresses are all zero (kptr_restrict or missing privilege); \
                 stacks will not symbolize"
                    .to_string()
            });
            (Some(Kallsyms { text, restricted }), warn)
        }
        Err(e) => (
            None,
            Some(format!(
                "cannot read /proc/kallsyms ({e}); stacks will not symbolize"
            )),
        ),
    }
}

/// MAJ:MIN of the filesystem holding `dir`.
pub fn dev_of(dir: &Path) -> Result<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir).with_context(|| format!("stat {}", dir.display()))?;
    let d = m.dev();
    // SAFETY: pure arithmetic functions of libc.
    let (ma, mi) = (libc::major(d), libc::minor(d));
    Ok(format!("{ma}:{mi}"))
}

/// Parses a CPU list like `0-3,5`.
pub fn parse_cpulist(s: &str) -> Result<Vec<u32>> {
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse()?, b.parse()?);
                if b < a || b - a > 65536 {
                    bail!("bad cpu range {part}");
                }
                v.extend(a..=b);
            }
            None => v.push(part.parse()?),
        }
    }
    Ok(v)
}

/// The header of a trace file taken on this host now: its name, kernel release and machine,
/// the kernel's word size (from `kallsyms` when there are some), the clocks and a new trace
/// id, with this recorder's pid and version; `page_size` and `cpu_count` are the caller's.
pub fn header(kallsyms: Option<&Kallsyms>, page_size: u32, cpu_count: u32) -> Header {
    let (hostname, kernel_release, machine) = uname();
    Header {
        byte_order: ioblame_format::ByteOrder::native(),
        word_size: kernel_word_size(kallsyms, &machine),
        page_size,
        cpu_count,
        clock_id: libc::CLOCK_MONOTONIC,
        recorder_pid: std::process::id(),
        file_index: 0,
        start_time_ns: clock_ns(libc::CLOCK_REALTIME),
        start_clock_ns: clock_ns(libc::CLOCK_MONOTONIC),
        trace_id: random_u64(),
        hostname,
        kernel_release,
        machine,
        recorder_version: format!("ioblame-capture {}", env!("CARGO_PKG_VERSION")),
    }
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`), when readable.
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|id| id.trim().to_string())
}

/// The page size (4096 when sysconf does not say).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// uname fields: (hostname, release, machine).
pub fn uname() -> (String, String, String) {
    // SAFETY: utsname is plain old data; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Default::default();
    }
    let s = |f: &[libc::c_char]| {
        let b: Vec<u8> = f
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    (s(&u.nodename), s(&u.release), s(&u.machine))
}

/// Reads a clock in ns.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A random 64-bit id.
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most 8 bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr() as *mut _, 8, 0) };
    if n == 8 {
        u64::from_ne_bytes(b)
    } else {
        clock_ns(libc::CLOCK_REALTIME) ^ ((std::process::id() as u64) << 32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The geometry read from a superblock mkfs.xfs made (an image file: no root needed)
    /// is what xfs_db prints for it; anything that is not an xfs superblock gives none.
    #[test]
    fn xfs_superblock_geometry() {
        let have = |t: &str| {
            std::process::Command::new(t)
                .arg("-V")
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !ioblame_testkit::need::met(have("mkfs.xfs") && have("xfs_db"), "mkfs.xfs and xfs_db") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("xfs.img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(320 << 20)
            .unwrap();
        let st = std::process::Command::new("mkfs.xfs")
            .args(["-q", "-f"])
            .arg(&img)
            .status()
            .unwrap();
        assert!(st.success());
        let o = std::process::Command::new("xfs_db")
            .args(["-r", "-c", "sb 0", "-c", "p agblocks agblklog"])
            .arg(&img)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        let val = |k: &str| -> u32 {
            text.lines()
                .find_map(|l| {
                    l.strip_prefix(k)?
                        .trim()
                        .strip_prefix('=')?
                        .trim()
                        .parse()
                        .ok()
                })
                .unwrap_or_else(|| panic!("{k} in {text}"))
        };
        let sb = std::fs::read(&img).unwrap();
        let got = parse_xfs_superblock(&sb[..512]).unwrap();
        assert_eq!((got.0, got.1 as u32), (val("agblocks"), val("agblklog")));
        assert_eq!(parse_xfs_superblock(&[0u8; 512]), None);
        assert_eq!(parse_xfs_superblock(&sb[..100]), None);
        let mut bad = sb[..512].to_vec();
        bad[124] = 3; // agblocks no longer fits in 2^agblklog blocks
        assert_eq!(parse_xfs_superblock(&bad), None);
    }

    #[test]
    fn mountinfo() {
        let t =
            "36 35 98:0 /mnt1 /mnt\\040x rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n\
                 37 35 7:0 / /tmp/m rw shared:2 - ext4 /dev/loop0 rw\nbad line\n";
        let m = parse_mountinfo(t);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].mount_point, "/mnt x");
        assert_eq!(
            (m[0].major, m[0].minor, m[0].fs_type.as_str()),
            (98, 0, "ext3")
        );
        assert_eq!(m[1].source, "/dev/loop0");
        assert_eq!(m[1].block_size, 0);
    }

    #[test]
    fn block_sizes() {
        assert!(block_size(Path::new("/")).is_some_and(|b| b >= 512 && b.is_power_of_two()));
        assert_eq!(block_size(Path::new("/nonexistent/x")), None);
        // Every mounted block-device filesystem reports one.
        for m in mounts()
            .iter()
            .filter(|m| m.major != 0 && m.fs_type == "ext4")
        {
            assert!(m.block_size >= 1024, "{m:?}");
        }
    }

    #[test]
    fn word_size() {
        let k = |t: &str| Kallsyms {
            text: t.into(),
            restricted: false,
        };
        let k64 = k("ffffffff81000000 T _stext\n");
        let k32 = k("c1000000 T _stext\n");
        let hidden = k("0000000000000000 T _stext\n");
        assert_eq!(kernel_word_size(Some(&k64), "i686"), 8);
        assert_eq!(kernel_word_size(Some(&k32), "x86_64"), 4);
        assert_eq!(kernel_word_size(Some(&hidden), ""), 8);
        assert_eq!(kernel_word_size(None, "aarch64"), 8);
        assert_eq!(kernel_word_size(None, "armv7l"), 4);
        assert_eq!(kernel_word_size(Some(&k("")), "s390x"), 8);
        // This host.
        let (_, _, m) = uname();
        assert_eq!(kernel_word_size(kallsyms().0.as_ref(), &m), 8);
    }

    #[test]
    fn tasks_merge() {
        let t = |pid, tid, comm: &str| Task {
            pid,
            tid,
            comm: comm.into(),
        };
        assert_eq!(
            merge_tasks(
                vec![t(1, 1, "init"), t(5, 5, "gone"), t(7, 7, "old")],
                vec![t(1, 1, "init"), t(6, 6, "new"), t(7, 7, "renamed")]
            ),
            vec![
                t(1, 1, "init"),
                t(5, 5, "gone"),
                t(6, 6, "new"),
                t(7, 7, "renamed")
            ]
        );
    }

    #[test]
    fn cpulist() {
        assert_eq!(parse_cpulist("0-2,5\n").unwrap(), vec![0, 1, 2, 5]);
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("x").is_err());
    }
}
