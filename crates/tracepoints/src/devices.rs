//! The block devices of this host (sysfs) and the resolution of `--devices` lists.

use std::path::Path;

use ioblame_format::BlockDevice;

use crate::{Error, FilterDev, Result};

macro_rules! bail {
    ($($t:tt)*) => { return Err(Error::Usage(format!($($t)*))) };
}

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

/// Block devices from /sys/class/block.
pub fn block_devices() -> Vec<BlockDevice> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/sys/class/block") else {
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
            Path::new("/sys/class/block").join(&parent)
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

/// Resolves `--devices` entries (names like `sda`/`loop0`/`/dev/loop0`, or MAJ:MIN).
pub fn resolve_devices(spec: &str, devs: &[BlockDevice]) -> Result<Vec<FilterDev>> {
    let mut out: Vec<FilterDev> = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
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
        let f = FilterDev {
            major: d.major,
            minor: d.minor,
            disk_major: dma,
            disk_minor: dmi,
        };
        if !out.contains(&f) {
            out.push(f);
        }
    }
    if out.is_empty() {
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
}
