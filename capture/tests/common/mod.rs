//! Test-only helpers: a small perf sample parser over ioblame traces, loop-device filesystems
//! with cleanup guards, and a lock serializing the tests that use them.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

use ioblame_format::{EventDesc, Trace, EVENT_CALLCHAIN};

/// Serializes the tests that use loop devices and system-wide recording.
pub fn lock() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(|e| e.into_inner())
}

/// The recorder binary. In capture's own tests cargo names it; tests of other packages that
/// include this module (`#[path]`) take the one built beside their own binaries (cargo test
/// --workspace builds it: no nested cargo build here), unless `IOBLAME_CAPTURE_BIN` names one
/// (the kernel lab's guests have no cargo: its harness builds the recorder first and names it).
pub fn bin() -> PathBuf {
    if let Some(b) = std::env::var_os("IOBLAME_CAPTURE_BIN") {
        return PathBuf::from(b);
    }
    if let Some(b) = option_env!("CARGO_BIN_EXE_ioblame-capture") {
        return PathBuf::from(b);
    }
    // target/<profile>/deps/<test> -> target/<profile>/ioblame-capture
    let exe = std::env::current_exe().expect("test executable path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("ioblame-capture");
    assert!(
        bin.is_file(),
        "{} is not built: run `cargo build -p ioblame-capture` first (`cargo test --workspace` \
         builds it), or name a recorder in IOBLAME_CAPTURE_BIN",
        bin.display()
    );
    bin
}

fn sh(cmd: &str) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("run sh")
}

fn must(cmd: &str) -> String {
    let o = sh(cmd);
    assert!(
        o.status.success(),
        "`{cmd}` failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A filesystem on a loop device, torn down on drop (even when the test fails).
pub struct LoopFs {
    pub dir: tempfile::TempDir,
    pub dev: String,
    pub name: String,
    pub major: u32,
    pub minor: u32,
    pub mnt: PathBuf,
    pub img: PathBuf,
}

impl LoopFs {
    /// `fs` is "ext4", "xfs" or "btrfs" (`mkfs.btrfs` defaults: DUP metadata).
    pub fn new(fs: &str, size_mb: u32) -> LoopFs {
        let dir = tempfile::Builder::new()
            .prefix("iobcap-")
            .tempdir_in("/var/tmp")
            .expect("tempdir");
        let img = dir.path().join(format!("{fs}.img"));
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        must(&format!("truncate -s {size_mb}M {}", img.display()));
        let dev = must(&format!("losetup -f --show {}", img.display()));
        let name = dev.trim_start_matches("/dev/").to_string();
        let mut g = LoopFs {
            dir,
            dev: dev.clone(),
            name: name.clone(),
            major: 0,
            minor: 0,
            mnt: mnt.clone(),
            img,
        };
        let mm = std::fs::read_to_string(format!("/sys/class/block/{name}/dev")).unwrap();
        let (a, b) = mm.trim().split_once(':').unwrap();
        g.major = a.parse().unwrap();
        g.minor = b.parse().unwrap();
        let mk = if fs == "xfs" {
            format!("mkfs.xfs -q -f {dev}")
        } else if fs == "btrfs" {
            format!("mkfs.btrfs -q -f {dev}")
        } else {
            format!("mkfs.ext4 -q -F {dev}")
        };
        must(&mk);
        must(&format!("mount {dev} {}", mnt.display()));
        g
    }

    /// Kernel dev_t.
    pub fn kdev(&self) -> u32 {
        (self.major << 20) | self.minor
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = sh(&format!(
            "umount {} 2>/dev/null || umount -l {}",
            self.mnt.display(),
            self.mnt.display()
        ));
        let _ = sh(&format!("losetup -d {}", self.dev));
    }
}

/// A tmpfs mount, unmounted on drop.
pub struct Tmpfs {
    pub dir: tempfile::TempDir,
}

impl Tmpfs {
    pub fn new(size: &str) -> Tmpfs {
        let dir = tempfile::Builder::new()
            .prefix("iobcap-tmpfs-")
            .tempdir_in("/var/tmp")
            .unwrap();
        must(&format!(
            "mount -t tmpfs -o size={size} tmpfs {}",
            dir.path().display()
        ));
        Tmpfs { dir }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = sh(&format!("umount {}", self.dir.path().display()));
    }
}

/// Runs the recorder with `args`, returning its output.
pub fn record(args: &[&str]) -> Output {
    Command::new(bin())
        .arg("record")
        .args(args)
        .output()
        .expect("run ioblame-capture")
}

/// Runs `ioblame-capture record -o OUT --devices DEV EXTRA... -- sh -c SCRIPT`.
pub fn record_sh(out: &Path, dev: &str, extra: &[&str], script: &str) -> Output {
    let out = out.to_str().expect("UTF-8 path");
    let mut args = vec!["-o", out, "--devices", dev];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    record(&args)
}

/// One decoded sample.
#[derive(Debug, Clone)]
pub struct Sample {
    pub event: String,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    pub callchain: Option<Vec<u64>>,
    pub raw: Vec<u8>,
}

/// A field of a tracefs format: offset and size.
pub fn field(format: &str, name: &str) -> Option<(usize, usize)> {
    for l in format.lines() {
        let l = l.trim();
        let Some(rest) = l.strip_prefix("field:") else {
            continue;
        };
        let mut parts = rest.split(';').map(str::trim);
        let decl = parts.next()?;
        let fname = decl.rsplit(' ').next()?.split('[').next()?;
        if fname != name {
            continue;
        }
        let mut off = None;
        let mut size = None;
        for p in parts {
            if let Some(v) = p.strip_prefix("offset:") {
                off = v.parse().ok();
            }
            if let Some(v) = p.strip_prefix("size:") {
                size = v.parse().ok();
            }
        }
        return Some((off?, size?));
    }
    None
}

impl Sample {
    /// An unsigned field of the raw payload.
    pub fn u(&self, ev: &EventDesc, name: &str) -> u64 {
        let (o, s) =
            field(&ev.format, name).unwrap_or_else(|| panic!("{}: no field {name}", ev.name));
        let b = &self.raw[o..o + s];
        match s {
            1 => b[0] as u64,
            2 => u16::from_ne_bytes([b[0], b[1]]) as u64,
            4 => u32::from_ne_bytes(b.try_into().unwrap()) as u64,
            8 => u64::from_ne_bytes(b.try_into().unwrap()),
            _ => panic!("field {name} has size {s}"),
        }
    }
    /// A char[] field as text.
    pub fn s(&self, ev: &EventDesc, name: &str) -> String {
        let (o, s) = field(&ev.format, name).unwrap();
        let b = &self.raw[o..o + s];
        let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    }
}

/// Everything read back from a trace.
pub struct Parsed {
    pub trace: Trace,
    pub samples: Vec<Sample>,
    /// Non-sample record kinds and their counts.
    pub others: HashMap<u32, u64>,
    pub lost: u64,
}

impl Parsed {
    pub fn desc(&self, name: &str) -> &EventDesc {
        self.trace
            .metadata()
            .events
            .iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no event {name}"))
    }
    pub fn of(&self, name: &str) -> impl Iterator<Item = &Sample> {
        let n = name.to_string();
        self.samples.iter().filter(move |s| s.event == n)
    }
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(b[o..o + 8].try_into().unwrap())
}

/// Parses every record, checking each sample's layout strictly against its event's
/// sample_type (IDENTIFIER|TID|TIME|CPU|[CALLCHAIN]|RAW): the raw payload must end the record
/// (up to 8-byte padding) and start with the event's tracefs id as common_type.
pub fn parse(dir: &Path) -> Parsed {
    let trace = Trace::open(dir).expect("Trace::open");
    let meta = trace.metadata().clone();
    let mut by_id: HashMap<u64, &EventDesc> = HashMap::new();
    for e in &meta.events {
        for id in &e.ids {
            by_id.insert(*id, e);
        }
    }
    let order = trace.header().byte_order;
    let mut samples = Vec::new();
    let mut others: HashMap<u32, u64> = HashMap::new();
    let mut lost = 0;
    for c in trace.chunks() {
        let chunk = trace.decompress(c).expect("chunk decompresses");
        lost += chunk.header.lost;
        for r in chunk.records(order) {
            let r = r.expect("record");
            let b = r.bytes;
            if r.kind != 9 {
                *others.entry(r.kind).or_default() += 1;
                continue;
            }
            let id = u64_at(b, 8);
            let ev = by_id
                .get(&id)
                .unwrap_or_else(|| panic!("sample id {id} is no event's"));
            let (pid, tid, time) = (u32_at(b, 16), u32_at(b, 20), u64_at(b, 24));
            let cpu = u32_at(b, 32);
            let mut pos = 40;
            let callchain = if ev.sample_type & 32 != 0 {
                assert!(ev.flags & EVENT_CALLCHAIN != 0);
                let nr = u64_at(b, pos) as usize;
                pos += 8;
                let ips = (0..nr).map(|i| u64_at(b, pos + 8 * i)).collect();
                pos += 8 * nr;
                Some(ips)
            } else {
                None
            };
            let size = u32_at(b, pos) as usize;
            pos += 4;
            // PERF_SAMPLE_CGROUP (a u64) follows the raw data on the stack events.
            let tail = if ev.sample_type & (1 << 21) != 0 {
                8
            } else {
                0
            };
            assert!(
                pos + size + tail <= b.len() && b.len() - (pos + size + tail) < 8,
                "{}: raw size {size} does not end the record ({} bytes)",
                ev.name,
                b.len()
            );
            let raw = b[pos..pos + size].to_vec();
            assert_eq!(
                u16::from_ne_bytes([raw[0], raw[1]]) as u32,
                ev.tracefs_id,
                "{}: common_type",
                ev.name
            );
            samples.push(Sample {
                event: ev.name.clone(),
                pid,
                tid,
                time,
                cpu,
                callchain,
                raw,
            });
        }
    }
    Parsed {
        trace,
        samples,
        others,
        lost,
    }
}

/// Whether the real-kernel tests can run here: root, loop devices, tracefs and the `tools`
/// on PATH. Otherwise prints `SKIPPED: why` and returns false, except in CI (`CI` set, where
/// scripts/install-test-deps.sh installs everything): there a missing piece is a failure.
pub fn ready(tools: &[&str]) -> bool {
    if !ioblame_testkit::need::live() {
        return false;
    }
    let mut missing = Vec::new();
    if !ioblame_testkit::need::root() {
        missing.push("root".to_string());
    }
    if !Path::new("/dev/loop-control").exists() {
        missing.push("loop devices (/dev/loop-control)".to_string());
    }
    if !Path::new("/sys/kernel/tracing/events").is_dir()
        && !Path::new("/sys/kernel/debug/tracing/events").is_dir()
    {
        missing.push("tracefs".to_string());
    }
    for t in tools.iter().chain(&["losetup"]) {
        if !ioblame_testkit::need::on_path(t) {
            missing.push(format!("`{t}`"));
        }
    }
    if missing.is_empty() {
        return true;
    }
    ioblame_testkit::need::skip(missing.join(", "));
    false
}

/// The build id `readelf -n` prints for `file` (lowercase hex).
pub fn readelf_build_id(file: &Path) -> String {
    let o = Command::new("readelf")
        .arg("-n")
        .arg(file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("no build id in {}: {text}", file.display()))
        .to_string()
}

/// Whether the btrfs tests can run: [`ready`] with `mkfs.btrfs` and `btrfs`, and btrfs in
/// the kernel (loaded with modprobe if it is a module); skips here, fails under CI.
pub fn btrfs_ready() -> bool {
    if !ready(&["mkfs.btrfs", "btrfs"]) {
        return false;
    }
    let known = || {
        std::fs::read_to_string("/proc/filesystems").is_ok_and(|t| {
            t.lines()
                .any(|l| l.split_whitespace().last() == Some("btrfs"))
        })
    };
    if !known() {
        let _ = Command::new("modprobe").arg("btrfs").status();
    }
    ioblame_testkit::need::met(known(), "btrfs in the kernel (/proc/filesystems)")
}
