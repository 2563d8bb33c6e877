//! End-to-end tests of `ioblame-capture record` on real loop-device filesystems (needs root).

mod common;

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use common::*;
use ioblame_format::{Trace, EVENT_CALLCHAIN, EVENT_TASK_RECORDS, FILES_AT_END, FILES_TOUCHED};

/// The events with a callchain in the default mode (`--stacks exact`): not
/// `block_dirty_buffer`, whose stack the analyzer takes from its thread's dirtying event.
const STACK_EVENTS: &[&str] = &[
    "writeback:writeback_dirty_folio",
    "writeback:writeback_mark_inode_dirty",
    "jbd2:jbd2_handle_start",
    "block:block_bio_queue",
];

/// Records `dd bs=1M count=8 conv=fsync` on a fresh `fs` and checks what came back.
fn eight_mib(fs: &str) {
    let _g = lock();
    let lfs = LoopFs::new(fs, 300);
    let out = lfs.dir.path().join("trace");
    let file = lfs.mnt.join("a.dat");
    let cmd = format!(
        "dd if=/dev/zero of={} bs=1M count=8 conv=fsync 2>/dev/null; sleep 0.2",
        file.display()
    );
    let o = record_sh(&out, &lfs.name, &[], &cmd);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "record failed: {stderr}");
    assert!(stderr.contains("stopped (command exited)"), "{stderr}");
    let ino = std::fs::metadata(&file).unwrap().ino();
    let p = parse(&out);
    assert!(p.trace.problems().is_empty(), "{:?}", p.trace.problems());
    assert_eq!(p.lost, 0, "lost records");
    assert_eq!(p.others.get(&2), None, "LOST records");
    assert_eq!(p.others.get(&13), None, "LOST_SAMPLES records");

    // Header.
    let h = p.trace.header();
    assert_eq!(h.clock_id, 1);
    assert!(h.recorder_pid > 0 && h.start_clock_ns > 0 && h.start_time_ns > 0);
    assert!(h.recorder_version.starts_with("ioblame-capture "));
    assert!(h.cpu_count >= 1);

    // Folios dirtied: page counts from mm_filemap_add_to_page_cache orders, keyed by index.
    let add = p.desc("filemap:mm_filemap_add_to_page_cache");
    let mut order: HashMap<u64, u64> = HashMap::new();
    for s in p.of("filemap:mm_filemap_add_to_page_cache") {
        if s.u(add, "i_ino") == ino {
            assert_eq!(s.u(add, "s_dev") as u32, lfs.kdev());
            order.insert(s.u(add, "index"), s.u(add, "order"));
        }
    }
    let dirty = p.desc("writeback:writeback_dirty_folio");
    let bdi = format!("{}:{}", lfs.major, lfs.minor);
    let mut pages = 0u64;
    for s in p.of("writeback:writeback_dirty_folio") {
        assert_eq!(s.s(dirty, "name"), bdi, "device filter on the bdi name");
        if s.u(dirty, "ino") == ino {
            let idx = s.u(dirty, "index");
            let o = order
                .get(&idx)
                .unwrap_or_else(|| panic!("folio {idx} dirtied but never added"));
            pages += 1 << o;
        }
    }
    // Each folio goes clean -> dirty once: exactly the file's 2048 pages.
    assert_eq!(pages, 2048, "dirty folios of the file");

    // Block layer: the write bios queued on the file's blocks cover them exactly once (the
    // journal and other metadata lie elsewhere).
    let extents = file_extents(&file);
    assert_eq!(
        extents.iter().map(|(a, b)| b - a).sum::<u64>(),
        16384,
        "{extents:?}"
    );
    let q = p.desc("block:block_bio_queue");
    let mut data_bytes = 0u64;
    let mut wbytes = 0u64;
    for s in p.of("block:block_bio_queue") {
        assert_eq!(s.u(q, "dev") as u32, lfs.kdev(), "device filter");
        if s.s(q, "rwbs").contains('W') {
            let (a, n) = (s.u(q, "sector"), s.u(q, "nr_sector"));
            wbytes += n * 512;
            for (x, y) in &extents {
                let overlap = (a + n).min(*y).saturating_sub(a.max(*x));
                data_bytes += overlap * 512;
            }
        }
    }
    assert_eq!(data_bytes, 8 << 20, "bio_queue bytes on the file's blocks");
    assert!(
        wbytes > 8 << 20,
        "bio_queue writes {wbytes} bytes (data + metadata)"
    );
    assert!(p.of("block:block_rq_complete").count() > 0);

    // Callchains exactly on the configured events, kernel-only.
    let mut with_chain = 0;
    for s in &p.samples {
        let configured = STACK_EVENTS.contains(&s.event.as_str());
        assert_eq!(s.callchain.is_some(), configured, "{}", s.event);
        if let Some(c) = &s.callchain {
            assert!(
                c.len() >= 2 && c.len() <= 33,
                "{}: {} frames",
                s.event,
                c.len()
            );
            assert_eq!(c[0], (-128i64) as u64, "PERF_CONTEXT_KERNEL first");
            assert!(
                c[1..].iter().all(|ip| *ip >= 0xffff_8000_0000_0000),
                "kernel ips only"
            );
            with_chain += 1;
        }
    }
    assert!(with_chain > 0);

    // Metadata.
    let m = p.trace.metadata();
    for e in &m.events {
        assert!(
            e.format.contains("format:") && e.format.contains("common_type"),
            "{}",
            e.name
        );
        assert_eq!(e.ids.len(), m.events[0].ids.len(), "one id per cpu");
        assert_eq!(
            e.flags & EVENT_CALLCHAIN != 0,
            STACK_EVENTS.contains(&e.name.as_str()),
            "{}",
            e.name
        );
        if STACK_EVENTS.contains(&e.name.as_str()) {
            assert_eq!(e.max_stack, 32);
        }
    }
    assert_eq!(
        m.events
            .iter()
            .filter(|e| e.flags & EVENT_TASK_RECORDS != 0)
            .count(),
        1
    );
    assert!(p
        .desc("block:block_dirty_buffer")
        .filter
        .contains("sector < 4611686018427387904"));
    let lo = m
        .block_devices
        .iter()
        .find(|d| d.name == lfs.name)
        .expect("loop device in metadata");
    assert_eq!(lo.loop_backing_file, lfs.img.to_str().unwrap());
    assert_eq!((lo.major, lo.minor), (lfs.major, lfs.minor));
    // LOOPS (format 1.7): where the loop device's sectors go, from before the recording.
    let img = std::fs::metadata(&lfs.img).unwrap();
    let mapping = p
        .trace
        .loops()
        .into_iter()
        .find(|l| (l.major, l.minor) == (lfs.major, lfs.minor))
        .expect("the loop device's mapping");
    assert_eq!(
        (
            mapping.backing_kernel_dev(),
            mapping.backing_ino,
            mapping.offset,
            mapping.since_ns,
            mapping.backing_file.as_str()
        ),
        (
            user_to_kernel(img.dev()),
            img.ino(),
            0,
            0,
            lfs.img.to_str().unwrap()
        )
    );
    assert!(lo.size_sectors >= 300 * 2048 - 1);
    let mnt = lfs.mnt.to_str().unwrap();
    let tm = m
        .mounts
        .iter()
        .find(|x| x.mount_point == mnt && x.fs_type == fs)
        .expect("test mount in metadata");
    let bsize = std::process::Command::new("stat")
        .args(["-f", "-c", "%s", mnt])
        .output()
        .unwrap();
    let bsize: u32 = String::from_utf8_lossy(&bsize.stdout)
        .trim()
        .parse()
        .unwrap();
    assert_eq!(tm.block_size, bsize, "statfs block size of the test mount");
    assert!(tm.block_size == 1024 || tm.block_size == 4096, "{tm:?}");
    // The file, created during the capture, is named (`--paths touched`: the inodes the
    // events refer to, by file handle); the table names nothing else than what the events
    // touched on the recorded device (the mount point only if the events name it).
    assert_eq!(
        p.trace.path_of(lfs.kdev(), ino),
        Some(file.to_str().unwrap())
    );
    let root_ino = std::fs::metadata(&lfs.mnt).unwrap().ino();
    assert!(p
        .trace
        .path_of(lfs.kdev(), root_ino)
        .is_none_or(|r| r == mnt));
    assert!(p.trace.paths().tables() >= 1);
    assert_eq!(
        p.trace.paths().flags() & (FILES_TOUCHED | FILES_AT_END),
        FILES_TOUCHED | FILES_AT_END
    );
    assert!(p.trace.paths().iter().all(|(d, _, _)| d == lfs.kdev()));
    assert!(p.trace.paths().len() <= 8, "{:?}", p.trace.paths());
    assert!(
        p.trace.files().iter().all(|f| f.indexed()),
        "closed cleanly"
    );
    assert!(m.tasks.iter().any(|t| t.pid == 1));
    assert!(m
        .kallsyms
        .as_ref()
        .is_some_and(|k| !k.restricted && k.text.len() > 1000));
    assert_eq!(m.info("devices"), Some(bdi.as_str()));
    assert_eq!(m.info("event_set"), Some("default"));
    assert!(m.info("output_dev").is_some_and(|d| d.contains(':')));
    assert_eq!(m.info("stack_depth"), Some("32"));
    // The workload's processes are known from COMM/FORK records.
    assert!(p.others.get(&3).copied().unwrap_or(0) > 0, "COMM records");
    assert!(p.others.get(&7).copied().unwrap_or(0) > 0, "FORK records");
    if fs == "xfs" {
        assert!(p.of("iomap:iomap_add_to_ioend").count() > 0);
    } else {
        assert!(p.of("ext4:ext4_ext_map_blocks_exit").count() > 0);
    }
}

/// The physical extents of `file` in 512-byte sectors, `[start, end)`, from `filefrag`.
fn file_extents(file: &std::path::Path) -> Vec<(u64, u64)> {
    let o = std::process::Command::new("filefrag")
        .args(["-b512", "-e"])
        .arg(file)
        .output()
        .expect("run filefrag");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let mut v = Vec::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split(':').map(str::trim).collect();
        if f.len() < 4 || f[0].parse::<u64>().is_err() {
            continue;
        }
        let (a, b) = f[2].split_once("..").expect("physical range");
        let (a, b): (u64, u64) = (a.trim().parse().unwrap(), b.trim().parse().unwrap());
        v.push((a, b + 1));
    }
    assert!(!v.is_empty(), "{text}");
    v
}

#[test]
fn ext4_eight_mib_fsync() {
    eight_mib("ext4");
}

#[test]
fn xfs_eight_mib_fsync() {
    eight_mib("xfs");
}

/// A `st_dev` (glibc's encoding) in the kernel's (`major << 20 | minor`).
fn user_to_kernel(d: u64) -> u32 {
    let major = ((d >> 8) & 0xfff) | ((d >> 32) & !0xfff);
    let minor = (d & 0xff) | ((d >> 12) & !0xff);
    ((major as u32) << 20) | (minor as u32 & 0xfffff)
}

/// A loop device set up while recording is in the trace's LOOPS table, with its offset and
/// direct IO, from about when it appeared (the recorder looks at each flush).
#[test]
fn loop_devices_set_up_while_recording() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("late.img");
    std::fs::write(&img, vec![0u8; 8 << 20]).unwrap();
    let out = dir.path().join("t");
    let script = format!(
        "sleep 0.5; d=$(losetup -f --show -o 1048576 --direct-io=on {img}); sleep 1.5; \
         losetup -d $d; echo $d",
        img = img.display()
    );
    let o = record(&[
        "-o",
        out.to_str().unwrap(),
        "--events",
        "minimal",
        "--no-paths",
        "--flush-interval",
        "100ms",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() && stderr.contains("losetup") {
        ioblame_testkit::need::skip(format_args!("a loop device ({stderr})"));
        return;
    }
    assert!(o.status.success(), "{stderr}");
    let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let name = dev.trim_start_matches("/dev/");
    let mm = std::fs::read_to_string(format!("/sys/class/block/{name}/dev"));
    let t = Trace::open(&out).unwrap();
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    let meta = std::fs::metadata(&img).unwrap();
    let late: Vec<_> = t
        .loops()
        .into_iter()
        .filter(|l| l.backing_file == img.to_str().unwrap())
        .collect();
    assert_eq!(late.len(), 1, "{late:?} (loop device {dev}, {mm:?})");
    let l = &late[0];
    assert_eq!(
        (l.backing_kernel_dev(), l.backing_ino, l.offset, l.direct_io),
        (user_to_kernel(meta.dev()), meta.ino(), 1 << 20, true)
    );
    let start = t.header().start_clock_ns;
    assert!(
        l.since_ns > start + 400_000_000 && l.since_ns < start + 2_000_000_000,
        "found {} ms after the start",
        (l.since_ns as i64 - start as i64) / 1_000_000
    );
}

#[test]
fn stops_as_promised() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let o = record(&[
        "-o",
        dir.path().join("d").to_str().unwrap(),
        "--events",
        "minimal",
        // Without --devices every block-device filesystem would be walked for file paths, up
        // to 2 s at start and at end: not what this test times.
        "--no-paths",
        "--duration",
        "1s",
    ]);
    let el = t.elapsed();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        el >= Duration::from_millis(1000) && el < Duration::from_secs(8),
        "{el:?}"
    );
    let t = Trace::open(&dir.path().join("d")).unwrap();
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    assert!(
        t.files().iter().all(|f| f.indexed()),
        "--duration closes the files cleanly"
    );

    let o = record(&[
        "-o",
        dir.path().join("f").to_str().unwrap(),
        "--events",
        "minimal",
        "--no-paths",
        "--",
        "false",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let o = record(&[
        "-o",
        dir.path().join("e").to_str().unwrap(),
        "--events",
        "minimal",
        "--no-paths",
        "--",
        "sh",
        "-c",
        "sleep 0.3; exit 3",
    ]);
    assert_eq!(o.status.code(), Some(3));
    let t = Trace::open(&dir.path().join("e")).unwrap();
    assert!(t.problems().is_empty());
    assert!(t.files().iter().all(|f| f.indexed()));
    assert_eq!(
        t.metadata().info("command"),
        Some("sh -c 'sleep 0.3; exit 3'")
    );

    // Bad input: one clear line, non-zero.
    let o = record(&[
        "-o",
        dir.path().join("g").to_str().unwrap(),
        "--events",
        "nosuch:event",
        "--",
        "true",
    ]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("nosuch:event") && e.lines().count() == 1, "{e}");
    let o = record(&[
        "-o",
        dir.path().join("h").to_str().unwrap(),
        "--devices",
        "nosuchdev",
        "--",
        "true",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("nosuchdev"));
}

#[test]
fn full_disk_fails_cleanly() {
    let _g = lock();
    let lfs = LoopFs::new("ext4", 300);
    let small = Tmpfs::new("1600k");
    let out = small.dir.path().join("trace");
    // A workload that ends: it must run to its end although the trace's disk fills.
    let done = lfs.mnt.join("workload-done");
    let cmd = format!(
        "for i in $(seq 60); do dd if=/dev/zero of={m}/f bs=512 count=20000 2>/dev/null; rm -f {m}/f; done; \
         dd if=/dev/zero of={m}/last bs=1M count=4 conv=fsync 2>/dev/null && touch {}",
        done.display(),
        m = lfs.mnt.display(),
    );
    let t = Instant::now();
    let o = record(&[
        "-o",
        out.to_str().unwrap(),
        "--devices",
        &lfs.name,
        "--events",
        "full",
        "--duration",
        "60s",
        "--",
        "sh",
        "-c",
        &cmd,
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        t.elapsed() < Duration::from_secs(50),
        "did not stop on the full disk: {e}"
    );
    assert!(!o.status.success(), "{e}");
    let errs: Vec<&str> = e.lines().filter(|l| l.contains("error:")).collect();
    assert_eq!(errs.len(), 1, "{e}");
    assert!(errs[0].contains("full"), "{e}");
    // The workload was not stopped: it ran to its end, and wrote its last file whole.
    assert!(e.contains("the command runs on to its end"), "{e}");
    assert!(done.exists(), "the workload did not finish: {e}");
    assert_eq!(
        std::fs::metadata(lfs.mnt.join("last")).unwrap().len(),
        4 << 20
    );
    let p = parse(&out);
    assert!(
        !p.trace.chunks().is_empty(),
        "chunks written before the disk filled read back"
    );
    assert!(p.samples.len() > 100);
}

/// Stops a recording with `sig` and checks that it closed its files cleanly.
fn stops_cleanly_on(sig: i32) {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t");
    let mut child = std::process::Command::new(bin())
        .args([
            "record",
            "-o",
            out.to_str().unwrap(),
            "--events",
            "minimal",
            "--paths-time",
            "300ms",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The signal goes once the recorder says it records (its start takes seconds on a busy
    // machine: a fixed sleep once sent it before the handlers were installed), then a
    // moment more so that some records are written.
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr).lines() {
            let line = line.unwrap_or_default();
            if line.starts_with("ioblame-capture: recording ") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let started = rx.recv_timeout(Duration::from_secs(60)).is_ok();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    let t0 = Instant::now();
    let status = child.wait().unwrap();
    let e = reader.join().unwrap();
    assert!(started, "the recorder never said it records: {e}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{e}");
    assert!(status.success(), "{status:?}: {e}");
    assert!(e.contains(&format!("stopped (signal {sig})")), "{e}");
    let t = Trace::open(&out).unwrap();
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    assert!(!t.files().is_empty());
    assert!(
        t.files().iter().all(|f| f.indexed()),
        "every file has its index"
    );
}

#[test]
fn sigint_closes_the_files_cleanly() {
    if !ready(&[]) {
        return;
    }
    stops_cleanly_on(libc::SIGINT);
}

#[test]
fn sigterm_closes_the_files_cleanly() {
    if !ready(&[]) {
        return;
    }
    stops_cleanly_on(libc::SIGTERM);
}

#[test]
fn non_root_gets_a_permission_message() {
    if !ready(&["setpriv"]) {
        return;
    }
    // The binary where an unprivileged user may run it.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let b = dir.path().join("ioblame-capture");
    std::fs::copy(bin(), &b).unwrap();
    let o = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&b)
        .args([
            "record",
            "-o",
            "/tmp/iob-nonroot-never-created",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    assert!(e.contains("permission denied"), "{e}");
    assert!(e.contains("run as root (or with CAP_PERFMON"), "{e}");
    assert!(!e.contains("not mounted"), "{e}");
}

/// Files written, renamed and deleted during a recording (`--paths touched`, the default):
/// a file renamed keeps the name it has at the end, a file deleted a moment after its
/// writeback the name it had, a file deleted before any lookup is listed as deleted; the table
/// holds the touched inodes of the recorded device and nothing else. With `--paths walk` the
/// old walk names the device's files, touched or not.
fn names_of_changing_files(fs: &str) {
    let _g = lock();
    let lfs = LoopFs::new(fs, 300);
    let out = lfs.dir.path().join("trace");
    let m = lfs.mnt.display().to_string();
    // Untouched files: named only by the walk.
    for i in 0..20 {
        std::fs::write(lfs.mnt.join(format!("untouched{i}")), "x").unwrap();
    }
    // Written back before the recording: its sync must not touch them.
    assert!(std::process::Command::new("sync")
        .status()
        .unwrap()
        .success());
    let cmd = format!(
        "dd if=/dev/zero of={m}/kept.dat bs=64k count=16 conv=fsync 2>/dev/null; \
         dd if=/dev/zero of={m}/before.dat bs=64k count=16 conv=fsync 2>/dev/null; \
         mv {m}/before.dat {m}/after.dat; \
         dd if=/dev/zero of={m}/gone.dat bs=64k count=16 conv=fsync 2>/dev/null; \
         sleep 0.6; rm {m}/gone.dat; sync; sleep 0.2"
    );
    let o = record_sh(&out, &lfs.name, &[], &cmd);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "record failed: {stderr}");
    let t = Trace::open(&out).unwrap();
    let ino = |name: &str| std::fs::metadata(lfs.mnt.join(name)).unwrap().ino();
    assert_eq!(
        t.path_of(lfs.kdev(), ino("kept.dat")),
        Some(format!("{m}/kept.dat").as_str())
    );
    // Renamed: the name it has at the end.
    assert_eq!(
        t.path_of(lfs.kdev(), ino("after.dat")),
        Some(format!("{m}/after.dat").as_str()),
        "{stderr}"
    );
    // Deleted 0.6 s after it was written: named while it existed, by file handle.
    let gone: Vec<_> = t
        .paths()
        .iter()
        .filter(|(_, _, p)| p.ends_with("/gone.dat"))
        .collect();
    assert_eq!(gone.len(), 1, "{:?} {stderr}", t.paths());
    assert!(stderr.contains("by file handle"), "{stderr}");
    assert!(
        t.paths()
            .iter()
            .all(|(d, _, p)| d == lfs.kdev() && !p.contains("untouched")),
        "{:?}",
        t.paths()
    );
    assert_eq!(t.paths().flags() & FILES_TOUCHED, FILES_TOUCHED);

    // The walk of old, on request: every file of the device, touched or not.
    let out2 = lfs.dir.path().join("walked");
    let o = record_sh(
        &out2,
        &lfs.name,
        &["--paths", "walk"],
        &format!("dd if=/dev/zero of={m}/w.dat bs=64k count=4 conv=fsync 2>/dev/null"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = Trace::open(&out2).unwrap();
    assert_eq!(t.paths().flags() & FILES_TOUCHED, 0);
    assert_eq!(
        t.path_of(lfs.kdev(), ino("untouched7")),
        Some(format!("{m}/untouched7").as_str())
    );
    assert!(t.path_of(lfs.kdev(), ino("w.dat")).is_some());
}

#[test]
fn ext4_names_of_changing_files() {
    names_of_changing_files("ext4");
}

#[test]
fn xfs_names_of_changing_files() {
    names_of_changing_files("xfs");
}
