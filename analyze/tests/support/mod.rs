//! Real captures for the analyzer's tests: a loop-device filesystem (from the recorder's test
//! helpers), renamed workload tools, `ioblame-capture record` around a shell script, and the
//! `ioblame` binary's answers.
#![allow(dead_code)]

#[path = "../../../capture/tests/common/mod.rs"]
pub mod common;

pub mod checks;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[allow(unused_imports)] // not every test file records
pub use common::{lock, ready, LoopFs};

/// Whether the live tests can run here ([`ready`]) with a cgroup2 hierarchy: its mount
/// point (read from mountinfo), or `None` (skipped here, a failure under CI).
pub fn ready_with_cgroup2(tools: &[&str]) -> Option<std::path::PathBuf> {
    if !ready(tools) {
        return None;
    }
    ioblame_testkit::need::some(
        ioblame_testkit::cgroups::cgroup2_mount(),
        "a cgroup2 hierarchy",
    )
}

/// (comm, via, ino) -> [read (without readahead), readahead, write] bytes.
pub type Charges = BTreeMap<(String, String, u64), [u64; 3]>;

/// `/usr/bin/env`-free path of the real python3 (not a pyenv shim), for a symlink whose
/// name becomes the comm.
pub fn real_python() -> String {
    let o = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    assert!(o.status.success(), "python3 runs");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Runs `cmd` with sh and expects success.
pub fn sh(cmd: &str) {
    let o = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    assert!(
        o.status.success(),
        "`{cmd}`: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A directory of renamed copies of system tools (`(new name, path)`), so each workload
/// phase has its own comm.
pub fn tools(fs: &LoopFs, names: &[(&str, &str)]) -> PathBuf {
    let dir = fs.dir.path().join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, from) in names {
        std::fs::copy(from, dir.join(name)).unwrap();
    }
    dir
}

/// The recorder of a ground-truth scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorder {
    /// `ioblame-capture record`.
    Capture,
    /// Stock `perf record` with the line `ioblame perf-command` prints.
    Perf,
}

impl Recorder {
    /// As the lab's results name it.
    pub fn name(self) -> &'static str {
        match self {
            Recorder::Capture => "ioblame-capture",
            Recorder::Perf => "perf",
        }
    }

    /// The tools a scenario recorded this way needs besides its own.
    pub fn tools(self) -> &'static [&'static str] {
        match self {
            Recorder::Capture => &[],
            Recorder::Perf => &["perf"],
        }
    }
}

/// Records `script` on `fs` with `recorder` into `fs.dir/NAME` (an ioblame trace directory,
/// or for perf a perf.data file), as [`capture_with`] and [`perf_record`] do; `options` are
/// `ioblame-capture record`'s, or for perf `ioblame perf-command`'s (`--stacks MODE`).
pub fn record_with(
    recorder: Recorder,
    fs: &LoopFs,
    bindir: &Path,
    name: &str,
    script: &str,
    options: &[&str],
) -> PathBuf {
    match recorder {
        Recorder::Capture => capture_with(fs, bindir, name, script, options),
        Recorder::Perf => perf_record(fs, bindir, name, script, options),
    }
}

/// Builds `tests/data/ustack/NAME.c` (the user-stack workloads) into `out` with gcc and
/// `flags`, expecting success.
pub fn build_workload(name: &str, flags: &[&str], out: &Path) {
    build_c(&format!("ustack/{name}.c"), flags, out);
}

/// Builds the C program `tests/data/SOURCE` into `out` with gcc and `flags`, expecting
/// success.
pub fn build_c(source: &str, flags: &[&str], out: &Path) {
    let o = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(format!(
            "{}/tests/data/{source}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "gcc {source}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// PATH with `bindir` first.
pub fn path_with(bindir: &Path) -> String {
    format!(
        "{}:{}",
        bindir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Records `script` (as [`capture`] runs it) with stock `perf record`: the exact line `ioblame
/// perf-command --devices DEV [options]` prints, its `-o perf.data -- COMMAND` replaced by
/// `fs.dir/NAME` and the script, expecting perf to succeed without losing events. Returns
/// the perf.data file.
pub fn perf_record(
    fs: &LoopFs,
    bindir: &Path,
    name: &str,
    script: &str,
    options: &[&str],
) -> PathBuf {
    perf_record_edited(fs, bindir, name, script, options, str::to_string)
}

/// [`perf_record`] with the line `ioblame perf-command` prints changed by `edit` first.
pub fn perf_record_edited(
    fs: &LoopFs,
    bindir: &Path,
    name: &str,
    script: &str,
    options: &[&str],
    edit: impl Fn(&str) -> String,
) -> PathBuf {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "perf-command".as_ref(),
        "--devices".as_ref(),
        fs.name.as_ref(),
    ];
    args.extend(options.iter().map(std::ffi::OsStr::new));
    let o = ioblame(&args);
    assert!(
        o.status.success(),
        "ioblame perf-command: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let line = edit(String::from_utf8_lossy(&o.stdout).trim());
    // What the notes tell the user to run after perf on a host with btrfs mounted.
    let btrfs_map = String::from_utf8_lossy(&o.stderr).contains("ioblame-capture btrfs-map");
    let head = line
        .strip_suffix(" -o perf.data -- COMMAND")
        .unwrap_or_else(|| panic!("perf-command's line ends otherwise: {line}"));
    let data = fs.dir.path().join(name);
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("{head} -o \"$1\" -- sh -c \"$2\""))
        .arg("sh")
        .arg(&data)
        .arg(script)
        .env("PATH", path_with(bindir))
        .env("M", &fs.mnt)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "perf record failed: {err}\n{line}");
    // perf says "Processed N events and lost M chunks!" (and nothing of the kind otherwise).
    assert!(!err.contains(" lost "), "perf lost events: {err}");
    if btrfs_map {
        // The chunk maps, beside the recording, where the analysis finds them.
        let map = fs.dir.path().join(format!("{name}.btrfs"));
        let o = Command::new(common::bin())
            .args(["btrfs-map", "-o"])
            .arg(&map)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "ioblame-capture btrfs-map: {err}");
    }
    data
}

/// Records `script` (run by sh with `bindir` first on PATH and `$M` the mount point) on `fs`
/// into `fs.dir/NAME`, expecting a clean capture with no lost records.
pub fn capture(fs: &LoopFs, bindir: &Path, name: &str, script: &str) -> PathBuf {
    capture_with(fs, bindir, name, script, &[])
}

/// [`capture`] with more options of `ioblame-capture record`.
pub fn capture_with(
    fs: &LoopFs,
    bindir: &Path,
    name: &str,
    script: &str,
    options: &[&str],
) -> PathBuf {
    let mut args = vec!["--devices", fs.name.as_str()];
    args.extend_from_slice(options);
    record_script(fs.dir.path(), bindir, &fs.mnt, name, script, &args, &[])
}

/// Records `script` (sh, `bindir` first on PATH, `$M` the mount point, `env` added) on the
/// devices named into `dir/NAME`, expecting a clean capture with no lost records.
pub fn capture_on(
    dir: &Path,
    bindir: &Path,
    mnt: &Path,
    devices: &str,
    name: &str,
    script: &str,
    env: &[(&str, &str)],
) -> PathBuf {
    record_script(dir, bindir, mnt, name, script, &["--devices", devices], env)
}

/// `ioblame-capture record -o dir/NAME OPTIONS -- sh -c SCRIPT`, with `bindir` first on PATH,
/// `$M` the mount point and `env` added, expecting a clean capture with no lost records.
fn record_script(
    dir: &Path,
    bindir: &Path,
    mnt: &Path,
    name: &str,
    script: &str,
    options: &[&str],
    env: &[(&str, &str)],
) -> PathBuf {
    let trace = dir.join(name);
    let o = Command::new(common::bin())
        .args(["record", "-o"])
        .arg(&trace)
        .args(options)
        .args(["--", "sh", "-c", script])
        .env("PATH", path_with(bindir))
        .env("M", mnt)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "capture failed: {err}");
    assert!(err.contains(" 0 lost"), "records were lost: {err}");
    trace
}

/// The analyzer binary: cargo's, unless `IOBLAME_BIN` names one (the kernel lab runs copies
/// of the binaries, as others may rebuild the target directory while a guest runs).
pub fn ioblame_bin() -> PathBuf {
    std::env::var_os("IOBLAME_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ioblame")))
}

/// Runs the analyzer.
pub fn ioblame(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(ioblame_bin()).args(args).output().unwrap()
}

/// `ioblame acts --json TRACE`: one JSON object per act.
pub fn acts_json(trace: &Path) -> Vec<serde_json::Value> {
    let o = ioblame(&["acts".as_ref(), "--json".as_ref(), trace.as_os_str()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `ioblame acts --json TRACE` as charges.
pub fn charges(trace: &Path) -> Charges {
    let o = ioblame(&["acts".as_ref(), "--json".as_ref(), trace.as_os_str()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut m = Charges::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let ra = v["readahead_bytes"].as_u64().unwrap();
        let e = m
            .entry((
                v["comm"].as_str().unwrap().to_string(),
                v["via"].as_str().unwrap().to_string(),
                v["ino"].as_u64().unwrap(),
            ))
            .or_default();
        e[0] += v["read_bytes"].as_u64().unwrap() - ra;
        e[1] += ra;
        e[2] += v["write_bytes"].as_u64().unwrap();
    }
    m
}

/// Rewrites the file keys of the baseline at `path` to `*/mnt/...`: the loop device is
/// mounted in a fresh directory per capture.
pub fn glob_mount_dirs(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let globbed: String = text
        .lines()
        .map(|l| match (l.strip_prefix("file = \""), l.find("/mnt/")) {
            (Some(_), Some(i)) => format!("file = \"*{}\n", &l[i..]),
            _ => format!("{l}\n"),
        })
        .collect();
    std::fs::write(path, globbed).unwrap();
}

/// Whether Perfetto's Python schema (`perfetto_trace_pb2`, the `perfetto` package) is there
/// to decode timelines (skips here, fails under CI).
pub fn perfetto_ready() -> bool {
    ioblame_testkit::need::met(
        ioblame_testkit::need::python_module("perfetto.protos.perfetto.trace.perfetto_trace_pb2"),
        "Perfetto's Python package (pip install perfetto)",
    )
}

/// `ioblame timeline TRACE ARGS` into a file of `dir`, decoded and checked with Perfetto's
/// own schema by `scripts/timeline-check.py` (which fails on a track not described before
/// its events, slices that do not nest, a flow without both ends): its summary.
pub fn timeline_checked(trace: &Path, dir: &Path, args: &[&str]) -> serde_json::Value {
    let out = dir.join("t.perfetto-trace");
    let mut a: Vec<&std::ffi::OsStr> = vec![
        "timeline".as_ref(),
        trace.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ];
    a.extend(args.iter().map(std::ffi::OsStr::new));
    let o = ioblame(&a);
    assert!(
        o.status.success(),
        "ioblame timeline: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/timeline-check.py");
    let c = Command::new("python3")
        .arg(script)
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        c.status.success(),
        "timeline-check on {}: {}",
        trace.display(),
        String::from_utf8_lossy(&c.stderr)
    );
    serde_json::from_slice(&c.stdout).unwrap()
}

/// Each act's bytes (all directions: `read_bytes` counts readahead in) in `ioblame acts
/// --json TRACE`.
pub fn act_bytes(trace: &Path) -> std::collections::BTreeMap<u64, u64> {
    acts_json(trace)
        .iter()
        .map(|a| {
            let b = a["read_bytes"].as_u64().unwrap() + a["write_bytes"].as_u64().unwrap();
            (a["act"].as_u64().unwrap(), b)
        })
        .collect()
}

/// A `timeline-check.py` summary's map of act -> bytes (`io_bytes`, `written_bytes`).
pub fn by_act(v: &serde_json::Value) -> BTreeMap<u64, u64> {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, b)| (k.parse().unwrap(), b.as_u64().unwrap()))
        .collect()
}

/// An ext4 on a loop device over a file of `outer`, torn down on drop.
pub struct Inner {
    pub dev: String,
    pub mnt: std::path::PathBuf,
}

impl Inner {
    pub fn new(outer: &LoopFs, direct: bool) -> Inner {
        let img = outer.mnt.join("inner.img");
        sh(&format!("truncate -s 160M {}", img.display()));
        let o = Command::new("losetup")
            .args(["-f", "--show"])
            .args(direct.then_some("--direct-io=on"))
            .arg(&img)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let mnt = outer.dir.path().join("inner");
        std::fs::create_dir_all(&mnt).unwrap();
        let inner = Inner { dev, mnt };
        // 4 KiB blocks inside (what mkfs gives a filesystem over 512 MiB): the loop device's
        // IO then fills whole pages of the backing file, whose buffers (the outer ext4 has
        // 1 KiB blocks) follow their folio's dirty event (docs/attribution.md, "Loop
        // devices", "Limits"). No lazy initialisation: its background writes through the loop
        // device would dirty the backing file before the recording.
        sh(&format!(
            "mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 {d} && \
             mount {d} {m}",
            d = inner.dev,
            m = inner.mnt.display()
        ));
        if direct {
            let name = inner.dev.trim_start_matches("/dev/");
            let dio = std::fs::read_to_string(format!("/sys/block/{name}/loop/dio")).unwrap();
            assert_eq!(dio.trim(), "1", "{} takes direct IO", inner.dev);
        }
        inner
    }

    /// `MAJ:MIN`.
    pub fn majmin(&self) -> String {
        let name = self.dev.trim_start_matches("/dev/");
        std::fs::read_to_string(format!("/sys/class/block/{name}/dev"))
            .unwrap()
            .trim()
            .to_string()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "umount {m} 2>/dev/null || umount -l {m}; losetup -d {d}",
                m = self.mnt.display(),
                d = self.dev
            ))
            .output();
    }
}
