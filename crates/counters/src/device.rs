//! Naming a block device: `MAJ:MIN` numbers and device names looked up in the trace's own
//! device table. Shared by the device selection ([`crate::DevSelection`]) and the filters'
//! `dev` field ([`crate::Filter`]), which both depend on this module and on nothing of each
//! other.

use ioblame_format::{kernel_dev, BlockDevice};

use crate::error::DevError;

/// Majors are below this (12 bits in the kernel encoding).
const MAJOR_LIMIT: u32 = 1 << 12;
/// Minors are below this (20 bits in the kernel encoding).
const MINOR_LIMIT: u32 = 1 << 20;

/// The kernel encoding (`major << 20 | minor`) of the two halves of a `MAJ:MIN`: `None`
/// unless both are decimal numbers, the major below 4096 and the minor below 1048576.
pub(crate) fn maj_min(major: &str, minor: &str) -> Option<u32> {
    match (parse_dec_u32(major), parse_dec_u32(minor)) {
        (Some(ma), Some(mi)) if ma < MAJOR_LIMIT && mi < MINOR_LIMIT => Some(kernel_dev(ma, mi)),
        _ => None,
    }
}

/// A decimal u32 (the whole string: ASCII digits only, no sign).
fn parse_dec_u32(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A device name (`sda` or `/dev/sda`) looked up in the trace's device table: its kernel
/// encoding, or [`DevError::Unknown`] listing the devices the table holds.
pub(crate) fn resolve_name(name: &str, devices: &[BlockDevice]) -> Result<u32, DevError> {
    let bare = name.strip_prefix("/dev/").unwrap_or(name);
    match devices.iter().find(|d| d.name == bare) {
        Some(d) => Ok(d.kernel_dev()),
        None => {
            let known = if devices.is_empty() {
                "none".to_string()
            } else {
                devices
                    .iter()
                    .map(|d| format!("{} ({}:{})", d.name, d.major, d.minor))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            Err(DevError::Unknown {
                name: name.to_string(),
                known,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(name: &str, major: u32, minor: u32) -> BlockDevice {
        BlockDevice {
            name: name.into(),
            major,
            minor,
            ..Default::default()
        }
    }

    #[test]
    fn maj_min_bounds() {
        assert_eq!(maj_min("8", "0"), Some(kernel_dev(8, 0)));
        assert_eq!(
            maj_min("4095", "1048575"),
            Some(kernel_dev(4095, 1_048_575))
        );
        assert_eq!(maj_min("4096", "0"), None);
        assert_eq!(maj_min("8", "1048576"), None);
        assert_eq!(maj_min("8", "x"), None);
        assert_eq!(maj_min("", "0"), None);
        assert_eq!(maj_min("-1", "0"), None);
        assert_eq!(maj_min("+8", "0"), None);
        assert_eq!(maj_min("99999999999", "0"), None);
    }

    #[test]
    fn names_resolve_against_the_table() {
        let t = [dev("sda", 8, 0), dev("nvme0n1", 259, 0)];
        assert_eq!(resolve_name("sda", &t), Ok(kernel_dev(8, 0)));
        assert_eq!(resolve_name("/dev/nvme0n1", &t), Ok(kernel_dev(259, 0)));
        assert_eq!(
            resolve_name("sdb", &t),
            Err(DevError::Unknown {
                name: "sdb".into(),
                known: "sda (8:0), nvme0n1 (259:0)".into()
            })
        );
        assert_eq!(
            resolve_name("/dev/sdb", &[]),
            Err(DevError::Unknown {
                name: "/dev/sdb".into(),
                known: "none".into()
            })
        );
    }
}
