//! btrfs: the inodes of a filesystem named by `BTRFS_IOC_INO_PATHS` (Linux 3.2; root, or
//! `CAP_DAC_READ_SEARCH`), which gives the paths of an inode number in the subvolume of the
//! descriptor it is called on, relative to the subvolume's root.
//!
//! The events name a btrfs inode by the superblock's anonymous device (what mountinfo
//! shows) and its number, and every subvolume numbers its inodes on its own (the first file
//! of each is 257): the subvolume is not known. So each subvolume is asked (one ioctl per
//! subvolume and inode, one `lstat` for the path found): the mounted ones, and those nested
//! in them (snapshots too), opened through their parent's directory ([`Fs::finish`], up to
//! [`MAX_SUBVOLS`]; through a mount of one of its directories, those under it) while there
//! are inodes to name, two seconds at most at a time ([`Fs::close_nested`]). When exactly one holds the number, the path is
//! the mount point (or the nested subvolume's path under it) and the path it gives (checked
//! with a stat: inode and the subvolume's own `st_dev`); when several do, the inode is left
//! unnamed ([`Unnamed::Ambiguous`]) rather than guessed. Subvolumes that did not open are
//! not asked: their files may be unnamed or named after another subvolume's file of the
//! same number (the namer says once when a filesystem has such subvolumes).

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use ioblame_format::{Mount, Unnamed};

use super::{open_dir, Found};

/// `_IOWR(0x94, 35, struct btrfs_ioctl_ino_path_args)`: 56 bytes, `inum`, `size`,
/// `reserved[4]`, `fspath` (a pointer to a `struct btrfs_data_container`).
const IOC_INO_PATHS: u32 = 0xc038_9423;
/// `_IOWR(0x94, 18, struct btrfs_ioctl_ino_lookup_args)`: 4096 bytes, `treeid`,
/// `objectid`, `name[4080]`.
const IOC_INO_LOOKUP: u32 = 0xd000_9412;
/// `_IOWR(0x94, 61, struct btrfs_ioctl_get_subvol_rootref_args)` (Linux 4.18): 4096
/// bytes, `min_treeid`, 255 × (`treeid`, `dirid`), `num_items` (u8 at 4088).
const IOC_GET_SUBVOL_ROOTREF: u32 = 0xd000_943d;
/// `_IOWR(0x94, 62, struct btrfs_ioctl_ino_lookup_user_args)` (Linux 4.18): 4096
/// bytes, `dirid`, `treeid`, `name[256]` (the subvolume's), `path[3824]` (of `dirid`,
/// from the descriptor's directory).
const IOC_INO_LOOKUP_USER: u32 = 0xd000_943e;
/// `_IOR(0x94, 25, __u64)`: a subvolume's flags.
const IOC_SUBVOL_GETFLAGS: u32 = 0x8008_9419;
/// `BTRFS_SUBVOL_RDONLY`.
const SUBVOL_RDONLY: u64 = 1 << 1;
/// At most this many subvolumes of one filesystem are opened to be asked (snapshots
/// can number thousands; every inode named asks each).
const MAX_SUBVOLS: usize = 256;
/// A subvolume's root directory (`BTRFS_FIRST_FREE_OBJECTID`); lower numbers are btrfs's
/// own inodes (the btree inode, 1, holds the metadata pages).
const ROOT_DIR: u64 = 256;
/// The room for INO_PATHS's answer: the kernel fills at most 4096 bytes.
const PATHS_LEN: usize = 4096;
/// `struct btrfs_data_container`'s header: `bytes_left`, `bytes_missing`, `elem_cnt`,
/// `elem_missed` (u32 each), then `val[]`.
const CONTAINER_HEADER: usize = 16;

/// One mount of a subvolume.
struct Mounted {
    /// Its mount point, open.
    dir: OwnedFd,
    mount_point: PathBuf,
    /// The path in the subvolume of the directory mounted (empty: its root).
    prefix: Vec<u8>,
}

/// A mounted subvolume.
struct Subvol {
    /// Its anonymous device: its files' `st_dev`.
    st_dev: u64,
    /// Its tree id (`BTRFS_IOC_INO_LOOKUP`), if known.
    tree: Option<u64>,
    /// Its mounts, those of its root first.
    mounts: Vec<Mounted>,
}

/// One btrfs filesystem: its mounted subvolumes.
#[derive(Default)]
pub struct Fs {
    /// The mounted subvolumes (the first `mounted`), then the nested ones opened by
    /// [`Fs::finish`].
    subvols: Vec<Subvol>,
    /// How many of `subvols` are mounted (`None` before the first [`Fs::finish`]).
    mounted: Option<usize>,
    /// Subvolumes nested in the mounted ones and not mounted themselves (at the start),
    /// `None` when unknown.
    unmounted: Option<usize>,
    /// Where the first mount is, for the note.
    shown_at: Option<String>,
    /// The buffer INO_PATHS fills.
    buf: Vec<u8>,
}

/// What the subvolumes say of an inode number.
#[derive(Debug, PartialEq, Eq)]
enum Lookup {
    /// Held by one subvolume, at this path.
    Named(String),
    /// Held by several.
    Ambiguous,
    /// Held by none.
    NotHeld,
    /// Held by one, but at no path under its mounts that checked out.
    Unreachable,
    /// The kernel refused (no `CAP_DAC_READ_SEARCH`).
    Refused,
    /// A subvolume could not be asked: whether another holds it is not known.
    Failed,
}

impl Fs {
    /// Whether no mount of it could be opened.
    pub fn is_empty(&self) -> bool {
        self.subvols.is_empty()
    }

    /// Adds mount `m` (skipped if its mount point does not open as a directory).
    pub fn add(&mut self, m: &Mount) {
        let mount_point = PathBuf::from(&m.mount_point);
        let Some(dir) = open_dir(&mount_point) else {
            return;
        };
        let Some((st_dev, ino)) = fstat(&dir) else {
            return;
        };
        // The mount of a directory of the subvolume: the paths under it begin with its.
        let prefix = if ino == ROOT_DIR {
            Vec::new()
        } else {
            match ino_paths(&dir, ino, &mut self.buf).map(|p| p.into_iter().next()) {
                Ok(Some(p)) => p,
                _ => return,
            }
        };
        self.shown_at.get_or_insert_with(|| m.mount_point.clone());
        let mounted = Mounted {
            dir,
            mount_point,
            prefix,
        };
        match self.subvols.iter_mut().find(|s| s.st_dev == st_dev) {
            Some(s) => {
                s.mounts.push(mounted);
                s.mounts.sort_by_key(|m| !m.prefix.is_empty());
            }
            None => {
                let tree = tree_of(&mounted.dir);
                self.subvols.push(Subvol {
                    st_dev,
                    tree,
                    mounts: vec![mounted],
                });
            }
        }
    }

    /// Once every mount is added: opens the subvolumes nested in the mounted ones (and
    /// in those, to [`MAX_SUBVOLS`]) through their parents' directories, so that their
    /// files are asked for too; counts those it could not open, and returns the note to
    /// give if there are some.
    pub fn finish(&mut self) -> Option<String> {
        self.mounted.get_or_insert(self.subvols.len());
        let Some(mut known) = self
            .subvols
            .iter()
            .map(|s| s.tree)
            .collect::<Option<Vec<u64>>>()
        else {
            self.unmounted = None;
            return None;
        };
        let mut unmounted = 0;
        let mut i = 0;
        while i < self.subvols.len() {
            // The children of a subvolume, looked up from each of its mounts (its root's
            // first): a mount of one of its directories reaches the children under it.
            let mounts = &self.subvols[i].mounts;
            i += 1;
            let Some(children) = subvol_children(&mounts[0].dir) else {
                if !mounts[0].prefix.is_empty() {
                    // Mounted by a directory only: its children are not known.
                    continue;
                }
                self.unmounted = None;
                return None;
            };
            let mut found = Vec::new();
            for (tree, dirid) in children {
                if known.contains(&tree) {
                    continue;
                }
                known.push(tree);
                let opened = (self.subvols.len() + found.len() < MAX_SUBVOLS)
                    .then(|| mounts.iter().find_map(|m| open_child(m, tree, dirid)))
                    .flatten();
                match opened {
                    Some(sv) => found.push(sv),
                    None => unmounted += 1,
                }
            }
            self.subvols.extend(found);
        }
        self.unmounted = Some(unmounted);
        (unmounted > 0).then(|| {
            let one = unmounted == 1;
            format!(
                "ioblame-capture: note: the btrfs at {}: {unmounted} subvolume{} nested in \
                 the mounted ones (read-only snapshots, ones that did not open, or past the \
                 first {MAX_SUBVOLS}) {} not looked in: the events do not say which subvolume \
                 a file is in, so a file there is unnamed, or named after the file of the same \
                 inode number in another subvolume (a snapshot's after its source's)",
                self.shown_at.as_deref().unwrap_or("?"),
                if one { "" } else { "s" },
                if one { "is" } else { "are" },
            )
        })
    }

    /// Closes the nested subvolumes [`Fs::finish`] opened (it opens them again): an open
    /// directory of a deleted subvolume keeps its tree from being dropped, and `btrfs
    /// subvolume sync` (snapshot rotation) waits until it is closed.
    pub fn close_nested(&mut self) {
        if let Some(n) = self.mounted {
            self.subvols.truncate(n);
        }
    }

    /// Names inode `ino`: its path when one mounted subvolume holds the number and a
    /// path under one of its mounts checks out; [`Unnamed::Ambiguous`] when several hold
    /// it; [`Unnamed::Deleted`] when none does and every subvolume nested in the mounted
    /// ones is mounted (else [`Unnamed::NoPath`]: it may be in one not asked); `NoPath`
    /// too for btrfs's own inodes (below 256) and a path outside the mounted directories.
    pub fn name(&mut self, ino: u64) -> Found {
        if ino < ROOT_DIR {
            return Found::Unnamed(Unnamed::NoPath);
        }
        match self.lookup(ino) {
            Lookup::Named(p) => Found::Named(p),
            Lookup::Ambiguous => Found::Unnamed(Unnamed::Ambiguous),
            // Deleted, unless it may be in a subvolume not asked.
            Lookup::NotHeld if self.unmounted == Some(0) => Found::Unnamed(Unnamed::Deleted),
            Lookup::NotHeld | Lookup::Unreachable => Found::Unnamed(Unnamed::NoPath),
            // The walk is right only where the number can be of one subvolume.
            Lookup::Refused if self.subvols.len() == 1 && self.unmounted == Some(0) => Found::Walk,
            Lookup::Refused | Lookup::Failed => Found::Unnamed(Unnamed::NotFound),
        }
    }

    fn lookup(&mut self, ino: u64) -> Lookup {
        let mut held: Option<(usize, Vec<Vec<u8>>)> = None;
        let mut failed = false;
        for (i, s) in self.subvols.iter().enumerate() {
            match ino_paths(&s.mounts[0].dir, ino, &mut self.buf) {
                Ok(_) if held.is_some() => return Lookup::Ambiguous,
                Ok(paths) => held = Some((i, paths)),
                Err(libc::ENOENT) => {}
                Err(libc::EPERM) => return Lookup::Refused,
                Err(_) => failed = true,
            }
        }
        match held {
            _ if failed => Lookup::Failed,
            None => Lookup::NotHeld,
            Some((i, paths)) => self.subvols[i]
                .resolve(ino, &paths)
                .map_or(Lookup::Unreachable, Lookup::Named),
        }
    }
}

impl Subvol {
    /// The first of `paths` (relative to the subvolume's root) under one of its mounts
    /// that names inode `ino` of this subvolume.
    fn resolve(&self, ino: u64, paths: &[Vec<u8>]) -> Option<String> {
        for p in paths {
            // The root directory's only reference is "..", to itself.
            let rel: &[u8] = if ino == ROOT_DIR { b"" } else { p };
            if rel.first() == Some(&b'/') {
                continue;
            }
            for m in &self.mounts {
                let rest = if m.prefix.is_empty() {
                    Some(rel)
                } else if rel == m.prefix.as_slice() {
                    Some(&b""[..])
                } else {
                    rel.strip_prefix(m.prefix.as_slice())
                        .and_then(|r| r.strip_prefix(b"/"))
                };
                let Some(rest) = rest else {
                    continue;
                };
                let full = if rest.is_empty() {
                    m.mount_point.clone()
                } else {
                    m.mount_point.join(std::ffi::OsStr::from_bytes(rest))
                };
                match std::fs::symlink_metadata(&full) {
                    Ok(md) if md.ino() == ino && md.dev() == self.st_dev => {
                        return Some(full.to_string_lossy().into_owned());
                    }
                    _ => {}
                }
            }
        }
        None
    }
}

/// The `st_dev` and inode of an open file.
fn fstat(fd: &OwnedFd) -> Option<(u64, u64)> {
    // SAFETY: `st` is written by fstat on success only, and read only then.
    let mut st = unsafe { std::mem::zeroed::<libc::stat>() };
    // SAFETY: a valid descriptor and a writable stat buffer.
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    // dev_t and ino_t are 32 bits wide on some targets.
    #[allow(clippy::unnecessary_cast)]
    (rc == 0).then_some((st.st_dev as u64, st.st_ino as u64))
}

/// The paths of inode `ino` in the subvolume of `dir`, relative to its root; `Err(errno)`
/// when the ioctl fails (ENOENT: no such inode in this subvolume). `buf` is the room for
/// the answer (grown to [`PATHS_LEN`]).
fn ino_paths(dir: &OwnedFd, ino: u64, buf: &mut Vec<u8>) -> Result<Vec<Vec<u8>>, i32> {
    buf.resize(PATHS_LEN, 0);
    let mut args = [0u64; 7];
    args[0] = ino;
    args[1] = PATHS_LEN as u64;
    args[6] = buf.as_mut_ptr() as u64;
    // SAFETY: `args` is a struct btrfs_ioctl_ino_path_args whose `fspath` points to
    // PATHS_LEN writable bytes, the most the kernel writes there.
    let rc = unsafe { libc::ioctl(dir.as_raw_fd(), IOC_INO_PATHS as _, args.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    Ok(parse_ino_paths(buf)
        .into_iter()
        .map(<[u8]>::to_vec)
        .collect())
}

/// The paths in INO_PATHS's answer (a `struct btrfs_data_container`: `elem_cnt` offsets,
/// each from the start of `val[]` to a NUL-terminated path). Whatever does not fit in
/// `buf` is left out: it never panics, whatever `buf` holds.
fn parse_ino_paths(buf: &[u8]) -> Vec<&[u8]> {
    let Some(count) = buf
        .get(8..12)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_ne_bytes)
    else {
        return Vec::new();
    };
    let val = buf.get(CONTAINER_HEADER..).unwrap_or_default();
    let mut out = Vec::new();
    for i in 0..(count as usize).min(val.len() / 8) {
        let Some(off) = val
            .get(i * 8..i * 8 + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_ne_bytes)
        else {
            break;
        };
        // A path lies after the offsets (the kernel writes them from the end).
        let Some(s) = usize::try_from(off)
            .ok()
            .filter(|&o| o >= (i + 1) * 8)
            .and_then(|o| val.get(o..))
        else {
            continue;
        };
        if let Some(end) = s.iter().position(|&c| c == 0).filter(|&e| e > 0) {
            out.push(&s[..end]);
        }
    }
    out
}

/// The tree id of the subvolume of `dir` (`BTRFS_IOC_INO_LOOKUP` of its root directory,
/// unprivileged since Linux 4.18).
fn tree_of(dir: &OwnedFd) -> Option<u64> {
    let mut args = [0u64; 512];
    args[1] = ROOT_DIR;
    // SAFETY: `args` is a writable struct btrfs_ioctl_ino_lookup_args (4096 bytes).
    let rc = unsafe { libc::ioctl(dir.as_raw_fd(), IOC_INO_LOOKUP as _, args.as_mut_ptr()) };
    (rc == 0 && args[0] != 0).then_some(args[0])
}

/// Subvolume `tree`, whose directory entry is in directory `dirid` of the subvolume
/// mounted at `parent` (its root, or one of its directories): its path
/// (`BTRFS_IOC_INO_LOOKUP_USER`, which gives it from the directory the ioctl is called on,
/// and fails for a `dirid` outside it) opened under the mount, checked to be that
/// subvolume's root. `None` when any step fails.
fn open_child(parent: &Mounted, tree: u64, dirid: u64) -> Option<Subvol> {
    let mut args = [0u8; 4096];
    args[0..8].copy_from_slice(&dirid.to_ne_bytes());
    args[8..16].copy_from_slice(&tree.to_ne_bytes());
    // SAFETY: `args` is a writable struct btrfs_ioctl_ino_lookup_user_args (4096 bytes).
    let rc = unsafe {
        libc::ioctl(
            parent.dir.as_raw_fd(),
            IOC_INO_LOOKUP_USER as _,
            args.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return None;
    }
    let cstr = |b: &[u8]| -> Vec<u8> { b.iter().take_while(|&&c| c != 0).copied().collect() };
    let name = cstr(&args[16..272]);
    let dir_path = cstr(&args[272..]);
    if name.is_empty() || name.contains(&b'/') {
        return None;
    }
    let mut at = parent.mount_point.clone();
    let rel = dir_path.strip_suffix(b"/").unwrap_or(&dir_path);
    if !rel.is_empty() {
        at.push(std::ffi::OsStr::from_bytes(rel));
    }
    at.push(std::ffi::OsStr::from_bytes(&name));
    let dir = open_dir(&at)?;
    let (st_dev, ino) = fstat(&dir)?;
    // That subvolume's root, of this filesystem (not another mounted or linked there).
    if ino != ROOT_DIR
        || tree_of(&dir) != Some(tree)
        || crate::btrfs::fsid(&dir)? != crate::btrfs::fsid(&parent.dir)?
    {
        return None;
    }
    // A read-only snapshot holds its source's numbers for the files it shares: asking it
    // would make them all ambiguous, and nothing writes there.
    if read_only(&dir) != Some(false) {
        return None;
    }
    Some(Subvol {
        st_dev,
        tree: Some(tree),
        mounts: vec![Mounted {
            dir,
            mount_point: at,
            prefix: Vec::new(),
        }],
    })
}

/// Whether the subvolume of `dir` is read-only (`BTRFS_IOC_SUBVOL_GETFLAGS`:
/// `BTRFS_SUBVOL_RDONLY`), `None` if the ioctl fails.
fn read_only(dir: &OwnedFd) -> Option<bool> {
    let mut flags = 0u64;
    // SAFETY: `flags` is the writable u64 the ioctl fills.
    let rc = unsafe { libc::ioctl(dir.as_raw_fd(), IOC_SUBVOL_GETFLAGS as _, &mut flags) };
    (rc == 0).then_some(flags & SUBVOL_RDONLY != 0)
}

/// The tree ids of the subvolumes whose parent is the subvolume of `dir`, each with the
/// directory (inode number) that holds its entry (`BTRFS_IOC_GET_SUBVOL_ROOTREF`, Linux
/// 4.18), `None` if it fails.
fn subvol_children(dir: &OwnedFd) -> Option<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    let mut args = [0u64; 512];
    // 255 per call: the first thousands say enough.
    for _ in 0..16 {
        // SAFETY: `args` is a writable struct btrfs_ioctl_get_subvol_rootref_args (4096
        // bytes); `min_treeid` (its first word) is where the kernel left it.
        let rc = unsafe {
            libc::ioctl(
                dir.as_raw_fd(),
                IOC_GET_SUBVOL_ROOTREF as _,
                args.as_mut_ptr(),
            )
        };
        let overflow =
            rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EOVERFLOW);
        if rc != 0 && !overflow {
            return None;
        }
        // `num_items`: the byte at 4088, the first of the last word.
        let n = (args[511].to_ne_bytes()[0] as usize).min(255);
        out.extend((0..n).map(|i| (args[1 + 2 * i], args[2 + 2 * i])));
        if !overflow {
            break;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A data container as the kernel fills it: offsets, then the paths from the end.
    fn container(paths: &[&str]) -> Vec<u8> {
        let mut b = vec![0u8; 256];
        let mut end = b.len();
        let val = CONTAINER_HEADER;
        for (i, p) in paths.iter().enumerate() {
            end -= p.len() + 1;
            b[end..end + p.len()].copy_from_slice(p.as_bytes());
            let off = (end - val) as u64;
            b[val + i * 8..val + i * 8 + 8].copy_from_slice(&off.to_ne_bytes());
        }
        b[8..12].copy_from_slice(&(paths.len() as u32).to_ne_bytes());
        b
    }

    #[test]
    fn parses_ino_paths() {
        let b = container(&["hl", "d1/d2/h"]);
        assert_eq!(
            parse_ino_paths(&b),
            [b"hl".as_slice(), b"d1/d2/h".as_slice()]
        );
        assert!(parse_ino_paths(&container(&[])).is_empty());
        // Cut short: what no longer fits is left out.
        assert!(parse_ino_paths(&b[..20]).is_empty());
        assert!(parse_ino_paths(&b[..8]).is_empty());
        assert!(parse_ino_paths(&[]).is_empty());
        // An offset pointing into the offsets, out of the buffer, or to a path without
        // its NUL: skipped.
        let mut bad = container(&["a", "b", "c"]);
        let n = bad.len();
        bad[n - 1] = b'x';
        bad[24..32].copy_from_slice(&0u64.to_ne_bytes());
        bad[32..40].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert!(
            parse_ino_paths(&bad).is_empty(),
            "{:?}",
            parse_ino_paths(&bad)
        );
        // A count beyond the buffer.
        let mut big = container(&["a"]);
        big[8..12].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(parse_ino_paths(&big), [b"a".as_slice()]);
    }

    /// Garbage of every length never panics, and what it gives lies in the buffer.
    #[test]
    fn ino_paths_garbage_never_panics() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for len in 0..600 {
            let mut b = vec![0u8; len];
            for c in b.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *c = x as u8;
            }
            // Small counts and offsets too, so that some land.
            if len >= 24 {
                b[8..12].copy_from_slice(&((x % 8) as u32).to_ne_bytes());
                b[16..24].copy_from_slice(&(x % len as u64).to_ne_bytes());
            }
            for p in parse_ino_paths(&b) {
                assert!(!p.is_empty() && !p.contains(&0));
            }
        }
    }
}
