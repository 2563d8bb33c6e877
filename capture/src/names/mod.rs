//! Naming the inodes the trace refers to (`--paths touched`): by file handle where the
//! filesystem takes one (`open_by_handle_at`: ext2/3/4 accept a zero generation, xfs needs
//! the inode's, which bulkstat gives), the path read back from the descriptor and checked
//! with a stat; on btrfs by its own lookup of an inode's paths (`BTRFS_IOC_INO_PATHS`) in
//! each mounted subvolume ([`btrfs`]); what neither names is left to a walk that stops once
//! it found them (`paths::find`).

use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ioblame_format::{kernel_dev, FileEntry, FileTable, Mount, Unnamed, UnnamedFile};

/// What the handle lookup found for one inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Its path.
    Named(String),
    /// It has no path, and why.
    Unnamed(Unnamed),
    /// No handle could name it (the filesystem takes none, or the path read back did not
    /// check out): the walk may.
    Walk,
}

/// What the recording knows of one inode's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Name {
    /// Its path (the latest found).
    Path(String),
    /// None, and why.
    Unnamed(Unnamed),
}

/// The names found so far, by (dev, inode).
#[derive(Debug, Default)]
pub struct Table {
    map: BTreeMap<(u32, u64), Name>,
}

impl Table {
    /// Whether it names nothing.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    /// The name of an inode, if known.
    pub fn get(&self, key: (u32, u64)) -> Option<&Name> {
        self.map.get(&key)
    }
    /// Records a name: a path replaces anything; a reason only what has no path, but for
    /// [`Unnamed::Ambiguous`], which replaces a path too (a btrfs inode number that one
    /// mounted subvolume held when it was named, several when looked up again: the events
    /// may be of either file).
    pub fn set(&mut self, key: (u32, u64), name: Name) {
        match (self.map.get_mut(&key), name) {
            (Some(Name::Path(_)), Name::Unnamed(w)) if w != Unnamed::Ambiguous => {}
            (Some(old), new) => *old = new,
            (None, new) => {
                self.map.insert(key, new);
            }
        }
    }
    /// Adds the entries of a table (a part the writer received).
    pub fn merge(&mut self, t: &FileTable) {
        for e in &t.entries {
            self.set((e.dev, e.ino), Name::Path(e.path.clone()));
        }
        for u in &t.unnamed {
            self.set((u.dev, u.ino), Name::Unnamed(u.why));
        }
    }
    /// All of it as a FILES table with `flags`.
    pub fn table(&self, flags: u32) -> FileTable {
        let mut t = FileTable {
            flags,
            ..Default::default()
        };
        for (&(dev, ino), n) in &self.map {
            match n {
                Name::Path(p) => t.entries.push(FileEntry {
                    dev,
                    ino,
                    path: p.clone(),
                }),
                Name::Unnamed(why) => t.unnamed.push(UnnamedFile {
                    dev,
                    ino,
                    why: *why,
                }),
            }
        }
        t
    }
    /// Every (dev, inode) and its name.
    pub fn iter(&self) -> impl Iterator<Item = (&(u32, u64), &Name)> {
        self.map.iter()
    }
    /// Inodes with a path, and without one by reason.
    pub fn counts(&self) -> (usize, BTreeMap<u8, usize>) {
        let mut named = 0;
        let mut unnamed: BTreeMap<u8, usize> = BTreeMap::new();
        for n in self.map.values() {
            match n {
                Name::Path(_) => named += 1,
                Name::Unnamed(w) => *unnamed.entry(w.code()).or_default() += 1,
            }
        }
        (named, unnamed)
    }
}

/// Which file handles a filesystem takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// ext2/3/4: `FILEID_INO32_GEN` with generation 0 (ext4_nfs_get_inode skips the check).
    Ext,
    /// xfs: `FILEID_INO32_GEN` (or its 64-bit form) with the inode's generation.
    Xfs,
    /// btrfs: no handle (its handles need the generation, which nothing cheap gives), but
    /// `BTRFS_IOC_INO_PATHS` in each mounted subvolume ([`btrfs`]).
    Btrfs,
    /// Others: only the walk.
    Other,
}

/// One recorded filesystem, by its device.
struct Fs {
    kind: Kind,
    /// The mount point, open (for `open_by_handle_at` and xfs ioctls).
    dir: Option<OwnedFd>,
    /// Its `st_dev`, to check a path read back.
    st_dev: u64,
    /// Of btrfs: its mounted subvolumes.
    btrfs: Option<btrfs::Fs>,
}

/// How the inodes were named.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Named through a file handle.
    pub by_handle: u64,
    /// Named by btrfs's lookup of an inode's paths.
    pub by_ino_paths: u64,
    /// Left unnamed: an inode number several mounted btrfs subvolumes hold.
    pub ambiguous: u64,
    /// Gone when looked up.
    pub deleted: u64,
    /// Left to the walk.
    pub to_walk: u64,
    /// Time spent in the lookups.
    pub time: std::time::Duration,
}

/// Names inodes of the filesystems of `mounts` by file handle.
pub struct Namer {
    fss: HashMap<u32, Fs>,
    /// Set when the kernel refused handles (no CAP_DAC_READ_SEARCH): every lookup then goes
    /// to the walk.
    refused: bool,
    /// The exact handle (generation included) of each inode named: a later lookup of a file
    /// deleted meanwhile fails instead of naming a new file that reused its number.
    exact: HashMap<(u32, u64), FileHandle>,
    /// What it did.
    pub stats: Stats,
    /// What the caller should say once (btrfs subvolumes not looked in).
    pub notes: Vec<String>,
}

const FILEID_INO32_GEN: i32 = 1;
/// xfs's flag for a 64-bit inode number in the handle (`XFS_FILEID_TYPE_64FLAG`).
const XFS_FILEID_TYPE_64FLAG: i32 = 0x80;
/// `_IOR('X', 127, struct xfs_bulkstat_req)`: the request header is 64 bytes.
const XFS_IOC_BULKSTAT: libc::c_ulong = 0x8040_587f;
/// `struct xfs_bulkstat` is 192 bytes; `bs_ino` at 0, `bs_gen` at 64.
const XFS_BULKSTAT_LEN: usize = 192;

impl Namer {
    /// A namer for the filesystems of `mounts` (one mount per device, as
    /// `paths::mounts_to_walk` picks them; for btrfs every mount of the filesystem, as
    /// `paths::mounts_to_name` adds them: each mounted subvolume is looked in).
    pub fn new(mounts: &[&Mount]) -> Namer {
        let mut fss: HashMap<u32, Fs> = HashMap::new();
        for m in mounts {
            let kind = match m.fs_type.as_str() {
                "ext2" | "ext3" | "ext4" => Kind::Ext,
                "xfs" => Kind::Xfs,
                "btrfs" => Kind::Btrfs,
                _ => Kind::Other,
            };
            if kind == Kind::Btrfs {
                let fs = fss
                    .entry(kernel_dev(m.major, m.minor))
                    .or_insert_with(|| Fs {
                        kind,
                        dir: None,
                        st_dev: 0,
                        btrfs: Some(btrfs::Fs::default()),
                    });
                if let Some(b) = &mut fs.btrfs {
                    b.add(m);
                }
                continue;
            }
            let mount_point = PathBuf::from(&m.mount_point);
            let Ok(md) = std::fs::metadata(&mount_point) else {
                continue;
            };
            let dir = open_dir(&mount_point);
            fss.insert(
                kernel_dev(m.major, m.minor),
                Fs {
                    kind,
                    dir,
                    st_dev: md.dev(),
                    btrfs: None,
                },
            );
        }
        // A btrfs none of whose mount points opened is not known (as another filesystem's).
        fss.retain(|_, fs| fs.btrfs.as_ref().is_none_or(|b| !b.is_empty()));
        let mut notes = Vec::new();
        for fs in fss.values_mut() {
            if let Some(b) = &mut fs.btrfs {
                if let Some(n) = b.finish() {
                    notes.push(n);
                }
            }
        }
        notes.sort();
        Namer {
            fss,
            refused: false,
            exact: HashMap::new(),
            stats: Stats::default(),
            notes,
        }
    }

    /// Names inode `ino` of the filesystem of kernel dev_t `dev`.
    pub fn name(&mut self, dev: u32, ino: u64) -> Found {
        let t0 = std::time::Instant::now();
        let found = match self.fss.get_mut(&dev) {
            None => Found::Unnamed(Unnamed::NotFound),
            Some(Fs { btrfs: Some(b), .. }) => {
                let found = b.name(ino);
                match &found {
                    Found::Named(_) => self.stats.by_ino_paths += 1,
                    Found::Unnamed(Unnamed::Ambiguous) => self.stats.ambiguous += 1,
                    Found::Unnamed(Unnamed::Deleted) => self.stats.deleted += 1,
                    Found::Walk => self.stats.to_walk += 1,
                    Found::Unnamed(_) => {}
                }
                self.stats.time += t0.elapsed();
                return found;
            }
            Some(_) if self.refused => Found::Walk,
            Some(fs) => match by_handle(fs, ino, self.exact.get(&(dev, ino))) {
                Err(HandleError::Refused) => {
                    self.refused = true;
                    Found::Walk
                }
                Err(HandleError::Gone) => Found::Unnamed(Unnamed::Deleted),
                Err(HandleError::Internal) => Found::Unnamed(Unnamed::NoPath),
                Err(HandleError::Other) => Found::Walk,
                Ok((p, exact)) => {
                    if let Some(h) = exact {
                        self.exact.insert((dev, ino), h);
                    }
                    Found::Named(p)
                }
            },
        };
        match &found {
            Found::Named(_) => self.stats.by_handle += 1,
            Found::Unnamed(Unnamed::Deleted) => self.stats.deleted += 1,
            Found::Walk => self.stats.to_walk += 1,
            Found::Unnamed(_) => {}
        }
        self.stats.time += t0.elapsed();
        found
    }

    /// Whether `dev` is a filesystem this namer knows (else the walk cannot find it either).
    pub fn knows(&self, dev: u32) -> bool {
        self.fss.contains_key(&dev)
    }

    /// Looks for btrfs subvolumes again (those created while recording, and the nested ones
    /// [`Namer::close_nested`] closed), as at the start; what it would note was noted then.
    pub fn rediscover(&mut self) {
        for fs in self.fss.values_mut() {
            if let Some(b) = &mut fs.btrfs {
                let _ = b.finish();
            }
        }
    }

    /// Closes the directories of the btrfs subvolumes nested in the mounted ones, between
    /// batches of names ([`Namer::rediscover`] opens them again): held open, a deleted
    /// one's tree is not dropped while recording (`btrfs subvolume sync` waited for the
    /// recorder to stop).
    pub fn close_nested(&mut self) {
        for fs in self.fss.values_mut() {
            if let Some(b) = &mut fs.btrfs {
                b.close_nested();
            }
        }
    }

    /// Whether `dev` is a btrfs this namer knows.
    pub fn is_btrfs(&self, dev: u32) -> bool {
        self.fss.get(&dev).is_some_and(|fs| fs.kind == Kind::Btrfs)
    }
}

fn open_dir(p: &Path) -> Option<OwnedFd> {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).ok()?;
    // SAFETY: `c` is a NUL-terminated path; the descriptor returned is owned below.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    // SAFETY: a descriptor just returned by open, owned by nobody else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

enum HandleError {
    /// The kernel refuses handles to this process (EPERM).
    Refused,
    /// The inode no longer exists (ESTALE, or bulkstat found no such inode).
    Gone,
    /// A filesystem's own inode (ext4's journal): no path.
    Internal,
    /// Anything else: not supported, or a path that did not check out.
    Other,
}

/// The generation of xfs inode `ino`, from bulkstat (v5, Linux 5.2): `Err(Gone)` when the
/// inode is not allocated.
fn xfs_generation(dir: &OwnedFd, ino: u64) -> Result<u32, HandleError> {
    let mut req = [0u64; (64 + XFS_BULKSTAT_LEN) / 8];
    req[0] = ino; // hdr.ino: start with this inode
    req[1] = 1u64 << 32; // hdr.flags = 0, hdr.icount = 1 (little-endian halves)
    if cfg!(target_endian = "big") {
        req[1] = 1;
    }
    // SAFETY: `req` is a writable xfs_bulkstat_req with room for one xfs_bulkstat.
    let rc = unsafe { libc::ioctl(dir.as_raw_fd(), XFS_IOC_BULKSTAT as _, req.as_mut_ptr()) };
    if rc != 0 {
        return Err(HandleError::Other);
    }
    let words: &[u64] = &req;
    let ocount = if cfg!(target_endian = "big") {
        (words[2] >> 32) as u32
    } else {
        words[2] as u32
    };
    let found_ino = words[8];
    if ocount == 0 || found_ino != ino {
        return Err(HandleError::Gone);
    }
    // bs_gen: the u32 at byte 64 of the record, i.e. the low half of word 8 + 8.
    let w = words[8 + 8];
    Ok(if cfg!(target_endian = "big") {
        (w >> 32) as u32
    } else {
        w as u32
    })
}

/// `struct file_handle`: u32 handle_bytes, i32 handle_type, then the bytes (room for the
/// handles of ext2/3/4 and xfs: 8 or 12 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct FileHandle {
    handle_bytes: u32,
    handle_type: i32,
    f_handle: [u8; 16],
}

/// The first handle of inode `ino` of `fs`: for ext2/3/4 with generation 0 (which they do
/// not check), for xfs with the generation bulkstat gives.
fn first_handle(fs: &Fs, dir: &OwnedFd, ino: u64) -> Result<FileHandle, HandleError> {
    let mut f_handle = [0u8; 16];
    let (ty, len) = match fs.kind {
        Kind::Ext => {
            // The reserved inodes below the first ordinary one (11) but the root (2): the
            // journal, the resize inode and the like, which ext4 refuses to open by handle
            // (ESTALE) although they exist. They have no path.
            if ino < 11 && ino != 2 {
                return Err(HandleError::Internal);
            }
            let ino32 = u32::try_from(ino).map_err(|_| HandleError::Other)?;
            f_handle[..4].copy_from_slice(&ino32.to_ne_bytes());
            (FILEID_INO32_GEN, 8)
        }
        Kind::Xfs => {
            let gen = xfs_generation(dir, ino)?;
            match u32::try_from(ino) {
                Ok(ino32) => {
                    f_handle[..4].copy_from_slice(&ino32.to_ne_bytes());
                    f_handle[4..8].copy_from_slice(&gen.to_ne_bytes());
                    (FILEID_INO32_GEN, 8)
                }
                Err(_) => {
                    // struct xfs_fid64, packed: u64 ino, u32 gen.
                    f_handle[..8].copy_from_slice(&ino.to_ne_bytes());
                    f_handle[8..12].copy_from_slice(&gen.to_ne_bytes());
                    (FILEID_INO32_GEN | XFS_FILEID_TYPE_64FLAG, 12)
                }
            }
        }
        Kind::Btrfs | Kind::Other => return Err(HandleError::Other),
    };
    Ok(FileHandle {
        handle_bytes: len,
        handle_type: ty,
        f_handle,
    })
}

/// The exact handle of the file open at `fd` (its generation included): later lookups with
/// it fail (ESTALE) once the inode is freed, even if a new file reuses its number. Taken from
/// the descriptor itself (`AT_EMPTY_PATH`), so a rename cannot slip another inode in.
fn handle_of(fd: &OwnedFd) -> Option<FileHandle> {
    let mut h = FileHandle {
        handle_bytes: 16,
        handle_type: 0,
        f_handle: [0; 16],
    };
    let mut mount_id: libc::c_int = 0;
    // SAFETY: a valid descriptor, an empty NUL-terminated path, a file_handle with room for
    // 16 bytes, an int.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_name_to_handle_at,
            fd.as_raw_fd(),
            c"".as_ptr(),
            &mut h as *mut FileHandle,
            &mut mount_id as *mut libc::c_int,
            libc::AT_EMPTY_PATH,
        )
    };
    (rc == 0).then_some(h)
}

/// Opens inode `ino` of `fs` by `known` (its exact handle, found earlier) or by its first
/// handle, reads its path back and checks it; returns the path and the exact handle.
fn by_handle(
    fs: &Fs,
    ino: u64,
    known: Option<&FileHandle>,
) -> Result<(String, Option<FileHandle>), HandleError> {
    let dir = fs.dir.as_ref().ok_or(HandleError::Other)?;
    let h = match known {
        Some(h) => *h,
        None => first_handle(fs, dir, ino)?,
    };
    // SAFETY: `h` is a valid struct file_handle; the descriptor returned is owned below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_by_handle_at,
            dir.as_raw_fd(),
            &h as *const FileHandle,
            libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        )
    };
    if fd < 0 {
        return Err(match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ESTALE) => HandleError::Gone,
            Some(libc::EPERM) => HandleError::Refused,
            _ => HandleError::Other,
        });
    }
    // SAFETY: a descriptor just returned by the kernel, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|_| HandleError::Other)?;
    let path = link.to_string_lossy().into_owned();
    if path.ends_with(" (deleted)") {
        // Still in the kernel's caches but unlinked: gone if no name is left, else another
        // name may be found by the walk.
        // SAFETY: `st` is written by fstat on success only, and read only then.
        let mut st = unsafe { std::mem::zeroed::<libc::stat>() };
        // SAFETY: a valid descriptor and a writable stat buffer.
        let rc = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
        return Err(if rc == 0 && st.st_nlink == 0 {
            HandleError::Gone
        } else {
            HandleError::Other
        });
    }
    // A dentry the kernel had to make up (not in the cache) reads back as a bare name: only
    // a path that names this very inode counts.
    match std::fs::symlink_metadata(&link) {
        Ok(md) if link.is_absolute() && md.dev() == fs.st_dev && md.ino() == ino => {
            let exact = known.copied().or_else(|| handle_of(&fd));
            Ok((path, exact))
        }
        _ => Err(HandleError::Other),
    }
}

/// The btrfs filesystems whose writeback device (bdi) names, as the writeback events carry
/// them (`btrfs-N`, not `MAJ:MIN`), map to one of `devs` (the superblocks' kernel dev_t):
/// `(bdi name, dev)`. Empty when `devs` has no anonymous device (major 0).
pub fn btrfs_bdis(devs: &std::collections::HashSet<u32>) -> Vec<(Vec<u8>, u32)> {
    if !devs.iter().any(|d| d >> 20 == 0) {
        return Vec::new();
    }
    let mut out: Vec<(Vec<u8>, u32)> = Vec::new();
    for m in crate::snapshot::mounts() {
        let dev = kernel_dev(m.major, m.minor);
        if m.fs_type != "btrfs" || !devs.contains(&dev) || out.iter().any(|(_, d)| *d == dev) {
            continue;
        }
        if let Some(name) = open_dir(Path::new(&m.mount_point))
            .and_then(|d| crate::btrfs::bdi_of(&d))
            .map(String::into_bytes)
        {
            out.push((name, dev));
        }
    }
    out
}

mod btrfs;

#[cfg(test)]
mod tests {
    use super::*;

    /// A reason does not replace a path, but ambiguity does (a btrfs number held by a
    /// second subvolume since the file was named).
    #[test]
    fn ambiguity_replaces_a_path() {
        let mut t = Table::default();
        t.set((1, 2), Name::Path("/a".into()));
        t.set((1, 2), Name::Unnamed(Unnamed::Deleted));
        assert_eq!(t.get((1, 2)), Some(&Name::Path("/a".into())));
        t.set((1, 2), Name::Unnamed(Unnamed::Ambiguous));
        assert_eq!(t.get((1, 2)), Some(&Name::Unnamed(Unnamed::Ambiguous)));
        t.set((1, 2), Name::Path("/b".into()));
        assert_eq!(t.get((1, 2)), Some(&Name::Path("/b".into())));
    }

    /// On whatever filesystem holds the temporary directory: a file is named by handle when
    /// the filesystem takes them (ext4, xfs), its deletion is seen, and a rename too.
    #[test]
    fn names_by_handle_where_it_can() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("named.dat");
        std::fs::write(&f, "x").unwrap();
        let md = std::fs::metadata(&f).unwrap();
        let mounts = crate::snapshot::mounts();
        // The mount holding the file: the longest mount point that is a prefix of it.
        let Some(m) = mounts
            .iter()
            .filter(|m| {
                f.starts_with(&m.mount_point)
                    && std::fs::metadata(&m.mount_point).is_ok_and(|x| x.dev() == md.dev())
            })
            .max_by_key(|m| m.mount_point.len())
        else {
            return;
        };
        let dev = kernel_dev(m.major, m.minor);
        let mut n = Namer::new(&[m]);
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let handles = root && matches!(m.fs_type.as_str(), "ext4" | "xfs") && m.root == "/";
        let want = f.canonicalize().unwrap().display().to_string();
        match n.name(dev, md.ino()) {
            Found::Named(p) => assert_eq!(p, want),
            other => assert!(!handles, "{} on {}: {other:?}", want, m.fs_type),
        }
        if handles {
            let g = d.path().join("renamed.dat");
            std::fs::rename(&f, &g).unwrap();
            assert_eq!(
                n.name(dev, md.ino()),
                Found::Named(g.canonicalize().unwrap().display().to_string())
            );
            std::fs::remove_file(&g).unwrap();
            // Dropped from the cache or not, an unlinked inode is not named, even once new
            // files (which may reuse its number) exist: the exact handle found at the first
            // lookup carries the generation.
            for i in 0..8 {
                std::fs::write(d.path().join(format!("new{i}")), "y").unwrap();
            }
            assert!(matches!(n.name(dev, md.ino()), Found::Unnamed(_)));
            assert_eq!(n.stats.by_handle, 2);
        }
    }
}
