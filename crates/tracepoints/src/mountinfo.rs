//! `/proc/PID/mountinfo`: its lines parsed once, for the recorder's MOUNTS table, the cgroup2
//! and tracefs mounts and the live tests' cgroups. Pure: the caller reads the file.
//!
//! A line is `ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE
//! SUPER_OPTIONS` (proc(5)); the kernel writes a space, tab, newline or backslash inside a
//! field as an octal escape (`\040` for a space), which [`unescape`] undoes, once.

use crate::devices::parse_majmin;

/// One line of mountinfo, its fields unescaped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MountLine {
    /// The mount's id.
    pub mount_id: u32,
    /// The id of the parent mount.
    pub parent_id: u32,
    /// The device's major number (`st_dev`; 0 for filesystems on no block device).
    pub major: u32,
    /// The device's minor number.
    pub minor: u32,
    /// The directory of the filesystem mounted here (`/` for all of it; a cgroup
    /// namespace's root for cgroup2).
    pub root: String,
    /// Where it is mounted, relative to the process's root.
    pub mount_point: String,
    /// The per-mount options (`rw,relatime`).
    pub options: String,
    /// The optional fields (`shared:2`, `master:1`), in order.
    pub optional: Vec<String>,
    /// The filesystem type (`ext4`, `cgroup2`, `tracefs`).
    pub fs_type: String,
    /// The source (`/dev/sda1`, or what the filesystem names it).
    pub source: String,
    /// The per-superblock options (empty when the line has none).
    pub super_options: String,
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\134` for a backslash); bytes
/// that are no UTF-8 become U+FFFD.
pub fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = u32::from(b[i + 1] - b'0') * 64
                + u32::from(b[i + 2] - b'0') * 8
                + u32::from(b[i + 3] - b'0');
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses one line; `None` when it lacks a field before the separator, the separator, the
/// filesystem type or the source, or its ids or device are no numbers.
pub fn parse_line(line: &str) -> Option<MountLine> {
    let f: Vec<&str> = line.split(' ').collect();
    let fixed = f.get(..6)?;
    let sep = 6 + f[6..].iter().position(|x| *x == "-")?;
    let (major, minor) = parse_majmin(fixed[2])?;
    Some(MountLine {
        mount_id: fixed[0].parse().ok()?,
        parent_id: fixed[1].parse().ok()?,
        major,
        minor,
        root: unescape(fixed[3]),
        mount_point: unescape(fixed[4]),
        options: unescape(fixed[5]),
        optional: f[6..sep].iter().map(|o| unescape(o)).collect(),
        fs_type: unescape(f.get(sep + 1)?),
        source: unescape(f.get(sep + 2)?),
        super_options: f.get(sep + 3).map(|s| unescape(s)).unwrap_or_default(),
    })
}

/// The lines of a mountinfo text that parse, in order (the others are skipped).
pub fn parse(text: &str) -> impl Iterator<Item = MountLine> + '_ {
    text.lines().filter_map(parse_line)
}

/// The first cgroup2 mount of a mountinfo text: its mount point, and in `root` the
/// hierarchy path of its root (not `/` inside a cgroup namespace).
pub fn cgroup2(text: &str) -> Option<MountLine> {
    parse(text).find(|m| m.fs_type == "cgroup2")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_with_escapes_and_optional_fields() {
        let t = "36 35 98:0 /mnt1 /mnt\\040x rw,noatime master:1 shared:7 - ext3 /dev/root rw,errors=continue\n\
                 37 35 7:0 / /tmp/m rw - ext4 /dev/loop0 rw\nbad line\n";
        let m: Vec<MountLine> = parse(t).collect();
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[0],
            MountLine {
                mount_id: 36,
                parent_id: 35,
                major: 98,
                minor: 0,
                root: "/mnt1".into(),
                mount_point: "/mnt x".into(),
                options: "rw,noatime".into(),
                optional: vec!["master:1".into(), "shared:7".into()],
                fs_type: "ext3".into(),
                source: "/dev/root".into(),
                super_options: "rw,errors=continue".into(),
            }
        );
        assert_eq!(
            (m[1].mount_point.as_str(), m[1].source.as_str()),
            ("/tmp/m", "/dev/loop0")
        );
        assert!(m[1].optional.is_empty());
    }

    #[test]
    fn damaged_lines_are_skipped() {
        for bad in [
            "",
            "bad line",
            // No separator, no type, no source.
            "36 35 98:0 / /m rw ext4 /dev/x rw",
            "36 35 98:0 / /m rw -",
            "36 35 98:0 / /m rw - ext4",
            // No options before the separator.
            "36 35 98:0 / /m - ext4 /dev/x rw",
            // Numbers that are none.
            "x 35 98:0 / /m rw - ext4 /dev/x rw",
            "36 35 98 / /m rw - ext4 /dev/x rw",
        ] {
            assert_eq!(parse_line(bad), None, "{bad}");
        }
        // Super options missing: empty.
        let m = parse_line("36 35 98:0 / /m rw - ext4 /dev/x").unwrap();
        assert_eq!(m.super_options, "");
    }

    #[test]
    fn escapes_are_undone_once() {
        assert_eq!(unescape("/a\\040b\\011c\\012d\\134e"), "/a b\tc\nd\\e");
        // An escaped backslash followed by digits stays a backslash and digits.
        assert_eq!(unescape("\\134040"), "\\040");
        // Not an escape: too short, or no octal digits.
        assert_eq!(unescape("\\04"), "\\04");
        assert_eq!(unescape("\\089x"), "\\089x");
        assert_eq!(unescape("x\\"), "x\\");
    }

    #[test]
    fn the_first_cgroup2_mount() {
        let hybrid = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
            35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
            41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let m = cgroup2(hybrid).unwrap();
        assert_eq!(
            (m.mount_point.as_str(), m.root.as_str()),
            ("/sys/fs/cgroup/unified", "/")
        );
        assert_eq!(
            cgroup2("35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw\n"),
            None
        );
    }
}
