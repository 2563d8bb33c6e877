//! Naming the files of a btrfs (`--paths touched`, the default), on a real recording (needs
//! root, loop devices, btrfs and btrfs-progs; skips otherwise, fails in CI): the events name
//! a btrfs inode by the superblock's anonymous device and its number, and every subvolume
//! numbers its inodes on its own. With the top-level subvolume and a subvolume `S` mounted
//! apart, and a subvolume `N` nested in the top level and not mounted on its own (the
//! recorder opens it through the top level's directory), the trace's file table names each
//! file whose number one subvolume holds with its full path (under the mount of its
//! subvolume, or of the subvolume it is reached through; a subvolume created while
//! recording is found at the end), and leaves a number two subvolumes hold unnamed as
//! ambiguous.
//! A file named while one subvolume held its number is ambiguous in the end once another
//! holds it too (the lookup again at the end).

mod common;

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use ioblame_format::{kernel_dev, FileName, Trace, Unnamed};

fn run(args: &[&str]) -> String {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A btrfs on a loop device with its mounts: unmounted (last first) and detached on drop,
/// even when the test fails.
struct Btrfs {
    dir: tempfile::TempDir,
    dev: String,
    mounts: Vec<PathBuf>,
}

impl Btrfs {
    fn new(size_mb: u32) -> Btrfs {
        let dir = tempfile::Builder::new()
            .prefix("iobcap-btrfs-names-")
            .tempdir_in("/var/tmp")
            .expect("tempdir");
        let img = dir.path().join("btrfs.img");
        run(&[
            "truncate",
            "-s",
            &format!("{size_mb}M"),
            img.to_str().unwrap(),
        ]);
        let dev = run(&["losetup", "-f", "--show", img.to_str().unwrap()]);
        let fs = Btrfs {
            dir,
            dev,
            mounts: Vec::new(),
        };
        run(&["mkfs.btrfs", "-q", "-f", &fs.dev]);
        fs
    }

    /// Mounts the filesystem (`opts`: mount options) at `name` in the test's directory.
    fn mount(&mut self, name: &str, opts: &[&str]) -> PathBuf {
        let mp = self.dir.path().join(name);
        std::fs::create_dir(&mp).unwrap();
        let mut args = vec!["mount"];
        args.extend_from_slice(opts);
        args.extend_from_slice(&[self.dev.as_str(), mp.to_str().unwrap()]);
        run(&args);
        self.mounts.push(mp.clone());
        mp.canonicalize().unwrap()
    }
}

impl Drop for Btrfs {
    fn drop(&mut self) {
        for m in self.mounts.iter().rev() {
            let ok = Command::new("umount")
                .arg(m)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                let _ = Command::new("umount").arg("-l").arg(m).status();
            }
        }
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// The superblock's device mountinfo shows for the mount at `mp`, as a kernel dev_t.
fn mount_dev(mp: &Path) -> u32 {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mp = mp.to_str().unwrap();
    let (major, minor) = ioblame_tracepoints::mountinfo::parse(&text)
        .find(|m| m.mount_point == mp)
        .map(|m| (m.major, m.minor))
        .expect("the test mount in mountinfo");
    assert_eq!(major, 0, "btrfs shows an anonymous device");
    kernel_dev(major, minor)
}

/// The inode numbers of the files directly in `dir` (its subvolume's only files here).
fn numbers(dir: &Path) -> HashSet<u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| std::fs::metadata(e.path()).unwrap().ino())
        .collect()
}

/// Creates empty files `names` in `dir`, after `skip` files created and deleted there (which
/// moves the subvolume's next inode number past them: btrfs does not reuse a number while
/// mounted).
fn files(dir: &Path, skip: usize, names: &[&str]) -> Vec<PathBuf> {
    for i in 0..skip {
        let f = dir.join(format!("filler{i}"));
        std::fs::write(&f, "").unwrap();
        std::fs::remove_file(&f).unwrap();
    }
    names
        .iter()
        .map(|n| {
            let f = dir.join(n);
            std::fs::write(&f, "").unwrap();
            f
        })
        .collect()
}

/// Creates a subvolume at `p`.
fn subvolume(p: &Path) {
    run(&["btrfs", "-q", "subvolume", "create", p.to_str().unwrap()]);
}

fn ino(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().ino()
}

#[test]
fn names_btrfs_files_by_subvolume() {
    if !btrfs_ready() {
        return;
    }
    let _g = lock();
    let mut fs = Btrfs::new(512);
    let top = fs.mount("top", &[]);
    subvolume(&top.join("S"));
    subvolume(&top.join("N"));
    let s = fs.mount("s", &["-o", "subvol=S"]);

    // The first file of each mounted subvolume shares the number (257); the next ones do
    // not: the top level's are past S's.
    let mut in_top = files(&top, 0, &["shared"]);
    in_top.extend(files(&top, 16, &["a5", "b5"]));
    let shared_s = files(&s, 0, &["shared"]).remove(0);
    let in_s = files(&s, 0, &["aS", "bS"]);
    // Past the top level's, until the script creates files there up to it.
    let late = files(&s, 30, &["late"]).remove(0);
    let late_ino = ino(&late);
    // N (reached through the top level only): past all of them, and the script's.
    let in_n = files(&top.join("N"), 128, &["nfile"]);
    let (top_nums, s_nums, n_nums) = (numbers(&top), numbers(&s), numbers(&top.join("N")));
    let shared = ino(&in_top[0]);
    assert_eq!(shared, ino(&shared_s), "the first files share a number");
    for f in &in_top[1..] {
        assert!(
            !s_nums.contains(&ino(f)) && !n_nums.contains(&ino(f)),
            "{f:?}"
        );
    }
    for f in &in_s {
        assert!(
            !top_nums.contains(&ino(f)) && !n_nums.contains(&ino(f)),
            "{f:?}"
        );
    }
    let nfile = ino(&in_n[0]);
    assert!(!top_nums.contains(&nfile) && !s_nums.contains(&nfile));
    assert!(
        top_nums.iter().all(|&n| n < late_ino),
        "{top_nums:?} {late_ino}"
    );
    run(&["sync"]);

    // Writers of every file, written back before the end.
    let all: Vec<&PathBuf> = in_top
        .iter()
        .chain([&shared_s])
        .chain(&in_s)
        .chain(&in_n)
        .collect();
    let script = all
        .iter()
        .map(|f| {
            format!(
                "dd if=/dev/urandom of='{}' bs=64k count=4 conv=notrunc status=none",
                f.display()
            )
        })
        .chain([
            // `late` is named while only S holds its number, and handed to the writer (every
            // 2 s): a block written while recording names it. Then the top level gets to its
            // number: the table at the end, whole, says ambiguous, and a lookup stops there.
            format!(
                "dd if=/dev/urandom of='{}' bs=64k count=4 conv=notrunc status=none; sleep 2.5",
                late.display()
            ),
            format!(
                "i=0; while [ $i -lt 100 ]; do f='{}'/new$i; : > $f; \
                 [ $(stat -c %i $f) -ge {late_ino} ] && break; i=$((i+1)); done",
                top.display()
            ),
            // A subvolume created while recording (its first 1,000 numbers used up, so that
            // its file's number is its alone): asked at the end.
            format!(
                "btrfs -q subvolume create '{l}' && i=0; while [ $i -lt 1000 ]; do \
                 : > '{l}'/x$i; i=$((i+1)); done; rm -f '{l}'/x*; \
                 dd if=/dev/urandom of='{l}/lfile' bs=64k count=4 status=none",
                l = top.join("L").display()
            ),
            "sync".to_string(),
        ])
        .collect::<Vec<_>>()
        .join("; ");
    let out = fs.dir.path().join("trace");
    let o = record(&[
        "-o",
        out.to_str().unwrap(),
        "--events",
        "minimal",
        "--flush-interval",
        "100ms",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "record failed: {stderr}");
    // N is not mounted on its own: opened through the top level, it is asked too (no note).
    assert!(!stderr.contains("nested in the mounted ones"), "{stderr}");
    assert!(stderr.contains("by btrfs's inode lookup"), "{stderr}");

    let t = Trace::open(&out).unwrap();
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    let dev = mount_dev(&top);
    assert_eq!(dev, mount_dev(&s), "one superblock");
    // Every file whose number one mounted subvolume holds: its path under that mount.
    for f in in_top[1..].iter().chain(&in_s) {
        assert_eq!(
            t.path_of(dev, ino(f)),
            Some(f.to_str().unwrap()),
            "{} (inode {}): {:?}",
            f.display(),
            ino(f),
            t.file_name(dev, ino(f))
        );
    }
    // The number both hold: unnamed, and why.
    assert_eq!(
        t.file_name(dev, shared),
        FileName::Unnamed(Unnamed::Ambiguous),
        "inode {shared}"
    );
    // Held by both in the end (and the others as before).
    let top_end = numbers(&top);
    assert!(top_end.contains(&late_ino), "the script reached {late_ino}");
    for f in in_s.iter().chain(&in_n) {
        assert!(!top_end.contains(&ino(f)), "{f:?}");
    }
    assert_eq!(
        t.file_name(dev, late_ino),
        FileName::Unnamed(Unnamed::Ambiguous),
        "inode {late_ino}"
    );
    // N's file: no other subvolume holds its number; named under the top level's mount.
    assert_eq!(
        t.path_of(dev, nfile),
        Some(in_n[0].to_str().unwrap()),
        "inode {nfile}: {:?}",
        t.file_name(dev, nfile)
    );
    // The subvolume created while recording: its file named.
    let lfile = top.join("L/lfile");
    let l_ino = ino(&lfile);
    for d in [&top, &s, &top.join("N")] {
        assert!(!numbers(d).contains(&l_ino), "{l_ino} in {d:?}");
    }
    assert_eq!(
        t.path_of(dev, l_ino),
        Some(lfile.to_str().unwrap()),
        "inode {l_ino}: {:?}",
        t.file_name(dev, l_ino)
    );
    // The whole table says the same.
    let paths = t.paths();
    assert_eq!(paths.unnamed(dev, shared), Some(Unnamed::Ambiguous));
    assert_eq!(paths.get(dev, shared), None);
    assert!(
        paths.iter().filter(|(d, _, _)| *d == dev).count() >= 4,
        "{paths:?}"
    );
}

/// A btrfs mounted only by a directory of its top level (a bind mount of `D`, the top level
/// unmounted): the subvolume nested under `D` is reached through that mount and its file
/// named under it; a subvolume outside `D` cannot be reached, and the recorder says so.
#[test]
fn names_the_nested_subvolumes_of_a_directory_mount() {
    if !btrfs_ready() {
        return;
    }
    let _g = lock();
    let mut fs = Btrfs::new(512);
    let top = fs.mount("top", &[]);
    std::fs::create_dir(top.join("D")).unwrap();
    for sv in ["D/N", "O"] {
        subvolume(&top.join(sv));
    }
    // N's file: past the numbers of the top level's (D) and O's.
    files(&top.join("D/N"), 64, &["nfile"]);
    let b = fs.dir.path().join("b");
    std::fs::create_dir(&b).unwrap();
    run(&[
        "mount",
        "--bind",
        top.join("D").to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    fs.mounts.push(b.clone());
    run(&["umount", top.to_str().unwrap()]);
    fs.mounts.remove(0);
    let b = b.canonicalize().unwrap();
    let in_b = b.join("N/nfile");
    let n = ino(&in_b);
    let out = fs.dir.path().join("trace");
    let script = format!(
        "dd if=/dev/urandom of='{}' bs=64k count=4 conv=notrunc status=none; sync",
        in_b.display()
    );
    let o = record(&[
        "-o",
        out.to_str().unwrap(),
        "--events",
        "minimal",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "record failed: {stderr}");
    // O, outside D: not looked in, said.
    assert!(
        stderr.contains("1 subvolume nested in the mounted ones"),
        "{stderr}"
    );
    let t = Trace::open(&out).unwrap();
    let dev = mount_dev(&b);
    assert_eq!(
        t.path_of(dev, n),
        Some(in_b.to_str().unwrap()),
        "inode {n}: {:?}",
        t.file_name(dev, n)
    );
}
