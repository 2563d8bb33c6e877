//! Block devices: read from a sysfs tree ([`block_devices_at`]), and the resolution of
//! `--devices` lists against them ([`resolve_devices`], pure).

use std::path::Path;

use ioblame_format::{BlockDevice, LoopDevice};

use crate::{Error, FilterDev, Result};

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Parses `MAJ:MIN`.
pub fn parse_majmin(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Block devices from `<sysfs>/class/block`, read only (`sysfs` is `/sys` for this host's;
/// tests give a fake tree). A partition is an entry with a `partition` file; its whole disk is the directory its
/// `class/block` link resolves into, as in sysfs.
pub fn block_devices_at(sysfs: &Path) -> Vec<BlockDevice> {
    let class = sysfs.join("class/block");
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(&class) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let p = e.path();
        let Some((major, minor)) = read_trim(&p.join("dev")).as_deref().and_then(parse_majmin)
        else {
            continue;
        };
        let is_part = p.join("partition").exists();
        let (part_start, parent) = if is_part {
            let start = read_trim(&p.join("start"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let parent = std::fs::canonicalize(&p)
                .ok()
                .and_then(|c| {
                    c.parent()
                        .and_then(|x| x.file_name())
                        .map(|x| x.to_string_lossy().into_owned())
                })
                .unwrap_or_default();
            (start, parent)
        } else {
            (0, String::new())
        };
        let disk = if is_part {
            class.join(&parent)
        } else {
            p.clone()
        };
        out.push(BlockDevice {
            size_sectors: read_trim(&p.join("size"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
            part_start,
            loop_backing_file: read_trim(&p.join("loop/backing_file")).unwrap_or_default(),
            logical_block_size: read_trim(&disk.join("queue/logical_block_size"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(512),
            parent,
            name,
            major,
            minor,
        });
    }
    out.sort_by_key(|d| (d.major, d.minor));
    out
}

/// The loop devices over files in `<sysfs>/block`, read only: name, device number,
/// backing file, offset, size limit and direct IO, sorted by device number. The backing
/// file's device and inode are left 0 (the caller asks the loop device or the file), and
/// `since_ns` 0. A loop device without a backing file (detached) is not listed.
pub fn loop_devices_at(sysfs: &Path) -> Vec<(String, LoopDevice)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(sysfs.join("block")) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let p = e.path();
        let lo = p.join("loop");
        let Some(backing_file) = read_trim(&lo.join("backing_file")).filter(|s| !s.is_empty())
        else {
            continue;
        };
        let Some((major, minor)) = read_trim(&p.join("dev")).as_deref().and_then(parse_majmin)
        else {
            continue;
        };
        let num = |f: &str| {
            read_trim(&lo.join(f))
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0)
        };
        out.push((
            name,
            LoopDevice {
                major,
                minor,
                offset: num("offset"),
                size_limit: num("sizelimit"),
                direct_io: num("dio") == 1,
                backing_file,
                ..LoopDevice::default()
            },
        ));
    }
    out.sort_by_key(|(_, l)| (l.major, l.minor));
    out
}

/// Resolves `--devices` entries (names like `sda`/`loop0`/`/dev/loop0`, or MAJ:MIN) against
/// the host's block devices.
///
/// A whole disk brings its partitions along: the IO of a filesystem on `sda1` is IO of `sda`,
/// and filesystem, page-cache and buffer events name the partition (see
/// [`crate::filter_for`]). Each entry records its whole disk, whose number the block layer's
/// events (bios and requests) and the bdi name carry.
pub fn resolve_devices(spec: &str, devs: &[BlockDevice]) -> Result<Vec<FilterDev>> {
    let mut out: Vec<FilterDev> = Vec::new();
    let mut push = |f: FilterDev| {
        if !out.contains(&f) {
            out.push(f);
        }
    };
    let mut any = false;
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        any = true;
        let d = if let Some((ma, mi)) = parse_majmin(item) {
            devs.iter()
                .find(|d| d.major == ma && d.minor == mi)
                .cloned()
                .unwrap_or(BlockDevice {
                    major: ma,
                    minor: mi,
                    ..Default::default()
                })
        } else {
            let name = item.strip_prefix("/dev/").unwrap_or(item);
            match devs.iter().find(|d| d.name == name) {
                Some(d) => d.clone(),
                None => bail!(
                    "--devices: no block device named '{item}' in /sys/class/block (use a name \
                     such as sda or loop0, or MAJ:MIN)"
                ),
            }
        };
        let (dma, dmi) = if d.parent.is_empty() {
            (d.major, d.minor)
        } else {
            devs.iter()
                .find(|x| x.name == d.parent)
                .map(|x| (x.major, x.minor))
                .unwrap_or((d.major, d.minor))
        };
        push(FilterDev {
            major: d.major,
            minor: d.minor,
            disk_major: dma,
            disk_minor: dmi,
        });
        if d.parent.is_empty() && !d.name.is_empty() {
            for p in devs.iter().filter(|p| p.parent == d.name) {
                push(FilterDev {
                    major: p.major,
                    minor: p.minor,
                    disk_major: d.major,
                    disk_minor: d.minor,
                });
            }
        }
    }
    if !any {
        bail!("--devices: empty device list");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices() {
        let devs = vec![
            BlockDevice {
                name: "sda".into(),
                major: 8,
                minor: 0,
                ..Default::default()
            },
            BlockDevice {
                name: "sda1".into(),
                major: 8,
                minor: 1,
                parent: "sda".into(),
                ..Default::default()
            },
        ];
        let r = resolve_devices("sda1,/dev/sda,8:1,7:3", &devs).unwrap();
        assert_eq!(
            r,
            vec![
                FilterDev {
                    major: 8,
                    minor: 1,
                    disk_major: 8,
                    disk_minor: 0
                },
                FilterDev {
                    major: 8,
                    minor: 0,
                    disk_major: 8,
                    disk_minor: 0
                },
                FilterDev {
                    major: 7,
                    minor: 3,
                    disk_major: 7,
                    disk_minor: 3
                },
            ]
        );
        assert!(resolve_devices("nosuch", &devs).is_err());
        assert!(resolve_devices(",", &devs).is_err());
    }

    #[test]
    fn majmin() {
        assert_eq!(parse_majmin("8:1"), Some((8, 1)));
        assert_eq!(parse_majmin(" 259:0\n"), Some((259, 0)));
        assert_eq!(parse_majmin("8"), None);
        assert_eq!(parse_majmin("8:x"), None);
        assert_eq!(parse_majmin("-1:0"), None);
    }

    /// A whole disk brings its partitions, each recording the disk; a partition whose disk
    /// is not listed stands for its own disk.
    #[test]
    fn whole_disks_bring_their_partitions() {
        let dev = |name: &str, major, minor, parent: &str| BlockDevice {
            name: name.into(),
            major,
            minor,
            parent: parent.into(),
            ..Default::default()
        };
        let devs = [
            dev("nvme0n1", 259, 0, ""),
            dev("nvme0n1p1", 259, 1, "nvme0n1"),
            dev("nvme0n1p2", 259, 2, "nvme0n1"),
            dev("orphan1", 9, 1, "gone"),
        ];
        let fd = |major, minor, disk_major, disk_minor| FilterDev {
            major,
            minor,
            disk_major,
            disk_minor,
        };
        assert_eq!(
            resolve_devices("259:0", &devs).unwrap(),
            [fd(259, 0, 259, 0), fd(259, 1, 259, 0), fd(259, 2, 259, 0)]
        );
        // Listed again through its disk: once.
        assert_eq!(
            resolve_devices("nvme0n1p2, nvme0n1", &devs).unwrap(),
            [fd(259, 2, 259, 0), fd(259, 0, 259, 0), fd(259, 1, 259, 0)]
        );
        assert_eq!(
            resolve_devices("/dev/orphan1", &devs).unwrap(),
            [fd(9, 1, 9, 1)]
        );
        let e = resolve_devices("sdz", &devs).unwrap_err();
        assert!(matches!(e, Error::Usage(_)), "{e}");
    }
}

#[cfg(test)]
mod sysfs_tests {
    use super::*;
    use crate::{filter_for, Tracepoint};
    use std::path::PathBuf;

    /// A fake sysfs: `sda` (8:0) with partitions `sda1` (8:1) and `sda2` (8:2), and `sdb`
    /// (8:16) without partitions, laid out as the kernel does (class links into devices/).
    struct FakeSys(PathBuf);

    impl FakeSys {
        fn new() -> FakeSys {
            let root = std::env::temp_dir().join(format!(
                "iob-fake-sysfs-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&root);
            let w = |p: &str, v: &str| {
                let p = root.join(p);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, v).unwrap();
            };
            let blk = "devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block";
            w(&format!("{blk}/sda/dev"), "8:0\n");
            w(&format!("{blk}/sda/size"), "2097152\n");
            w(&format!("{blk}/sda/queue/logical_block_size"), "4096\n");
            for (n, start) in [(1, 2048), (2, 1050624)] {
                w(&format!("{blk}/sda/sda{n}/dev"), &format!("8:{n}\n"));
                w(&format!("{blk}/sda/sda{n}/partition"), &format!("{n}\n"));
                w(&format!("{blk}/sda/sda{n}/start"), &format!("{start}\n"));
                w(&format!("{blk}/sda/sda{n}/size"), "1048576\n");
            }
            w("devices/virtual/block/sdb/dev", "8:16\n");
            w("devices/virtual/block/sdb/size", "100\n");
            std::fs::create_dir_all(root.join("class/block")).unwrap();
            let link = |name: &str, target: String| {
                std::os::unix::fs::symlink(
                    format!("../../{target}"),
                    root.join("class/block").join(name),
                )
                .unwrap();
            };
            link("sda", format!("{blk}/sda"));
            link("sda1", format!("{blk}/sda/sda1"));
            link("sda2", format!("{blk}/sda/sda2"));
            link("sdb", "devices/virtual/block/sdb".into());
            // /sys/block: loop3 over a file (direct IO, at 1 MiB), loop4 detached.
            w("block/loop3/dev", "7:3\n");
            w("block/loop3/loop/backing_file", "/var/lib/a b.img\n");
            w("block/loop3/loop/offset", "1048576\n");
            w("block/loop3/loop/sizelimit", "0\n");
            w("block/loop3/loop/dio", "1\n");
            w("block/loop4/dev", "7:4\n");
            FakeSys(root)
        }
    }

    impl Drop for FakeSys {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn tp(name: &str, field: &str) -> Tracepoint {
        Tracepoint {
            name: name.into(),
            id: 1,
            format: format!("format:\n\tfield:{field};\toffset:8;\tsize:4;\tsigned:0;\n"),
            callchain: false,
        }
    }

    #[test]
    fn partitions_from_sysfs() {
        let sys = FakeSys::new();
        let devs = block_devices_at(&sys.0);
        let names: Vec<(&str, &str, u64, u32)> = devs
            .iter()
            .map(|d| {
                (
                    d.name.as_str(),
                    d.parent.as_str(),
                    d.part_start,
                    d.logical_block_size,
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("sda", "", 0, 4096),
                ("sda1", "sda", 2048, 4096),
                ("sda2", "sda", 1050624, 4096),
                ("sdb", "", 0, 512),
            ]
        );
    }

    #[test]
    fn loop_devices_from_sysfs() {
        let sys = FakeSys::new();
        let loops = loop_devices_at(&sys.0);
        assert_eq!(
            loops,
            [(
                "loop3".to_string(),
                LoopDevice {
                    major: 7,
                    minor: 3,
                    offset: 1 << 20,
                    direct_io: true,
                    backing_file: "/var/lib/a b.img".into(),
                    ..LoopDevice::default()
                }
            )]
        );
        // No sysfs: nothing, no error.
        assert!(loop_devices_at(&sys.0.join("nowhere")).is_empty());
    }

    #[test]
    fn partition_filters() {
        let sys = FakeSys::new();
        let devs = block_devices_at(&sys.0);
        let bio = tp("block:block_bio_queue", "dev_t dev");
        let remap = tp("block:block_bio_remap", "dev_t dev");
        let rq = tp("block:block_rq_complete", "dev_t dev");
        let io = tp("block:block_io_start", "dev_t dev");
        let buf = tp("block:block_dirty_buffer", "dev_t dev");
        let fs = tp("ext4:ext4_da_write_folios_start", "dev_t dev");
        let cache = tp("filemap:mm_filemap_add_to_page_cache", "dev_t s_dev");
        let bdi = tp("writeback:writeback_dirty_folio", "char name[32]");
        let (sda, sda1, sda2) = (8 << 20, (8 << 20) | 1, (8 << 20) | 2);

        // A partition: its own number on fs, page-cache and buffer events, its disk's on
        // the block layer's (bios and requests carry the disk: `bio_dev()`).
        let p = resolve_devices("sda1", &devs).unwrap();
        assert_eq!(filter_for(&fs, &p), format!("dev == {sda1}"));
        assert_eq!(filter_for(&cache, &p), format!("s_dev == {sda1}"));
        assert!(filter_for(&buf, &p).starts_with(&format!("(dev == {sda1}) && ")));
        for ev in [&bio, &remap, &rq, &io] {
            assert_eq!(filter_for(ev, &p), format!("dev == {sda}"), "{}", ev.name);
        }
        assert_eq!(filter_for(&bdi, &p), "name == \"8:0\"");

        // A whole disk: its partitions too on fs events, once on block events.
        let d = resolve_devices("sda", &devs).unwrap();
        assert_eq!(d.len(), 3);
        let all = format!("dev == {sda} || dev == {sda1} || dev == {sda2}");
        assert_eq!(filter_for(&fs, &d), all);
        assert_eq!(
            filter_for(&cache, &d),
            format!("s_dev == {sda} || s_dev == {sda1} || s_dev == {sda2}")
        );
        assert_eq!(filter_for(&bio, &d), format!("dev == {sda}"));
        assert_eq!(filter_for(&rq, &d), format!("dev == {sda}"));
        assert_eq!(filter_for(&bdi, &d), "name == \"8:0\"");
        // By number, the same.
        assert_eq!(resolve_devices("8:0", &devs).unwrap(), d);

        // Two partitions of one disk and another disk.
        let m = resolve_devices("sda2,/dev/sda1,sdb", &devs).unwrap();
        let sdb = 8 << 20 | 16;
        assert_eq!(filter_for(&rq, &m), format!("dev == {sda} || dev == {sdb}"));
        assert_eq!(
            filter_for(&bio, &m),
            format!("dev == {sda} || dev == {sdb}")
        );
        assert_eq!(
            filter_for(&fs, &m),
            format!("dev == {sda2} || dev == {sda1} || dev == {sdb}")
        );
        assert_eq!(filter_for(&bdi, &m), "name == \"8:0\" || name == \"8:16\"");
    }
}
