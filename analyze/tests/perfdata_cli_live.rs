//! `report`, `baseline` and `check` on a perf.data recording (issue 8: every analyzer command
//! reads perf.data), recorded here with the system's `perf` and the exact line `ioblame
//! perf-command` prints, on a fresh ext4 loop device. Also: what happens without kernel
//! symbols (`--kallsyms` of an empty file stands for a recording analysed on another host
//! without its kallsyms).
//!
//! Needs root, loop devices, tracefs, mkfs.ext4 and `perf`; skips otherwise, except in CI.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use support::{tools, LoopFs};

const MIB: u64 = 1 << 20;

/// One recording for all tests of this file (kept in a directory that outlives the loop
/// device), and the baseline made from it.
struct Recording {
    _keep: tempfile::TempDir,
    data: PathBuf,
    baseline: PathBuf,
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn run(args: &[&str]) -> Output {
    let a: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    support::ioblame(&a)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn recording() -> Option<&'static Recording> {
    static R: OnceLock<Recording> = OnceLock::new();
    if !support::ready(&["mkfs.ext4", "dd", "sync", "perf"]) {
        return None;
    }
    Some(R.get_or_init(|| {
        let _g = support::lock();
        let keep = tempfile::tempdir_in("/var/tmp").unwrap();
        let fs = LoopFs::new("ext4", 128);
        let bin = tools(&fs, &[("writerA", "/bin/dd"), ("writerB", "/bin/dd")]);
        let o = run(&["perf-command", "--devices", &fs.name]);
        assert!(o.status.success(), "{}", text(&o));
        let line = String::from_utf8(o.stdout).unwrap();
        let line = line.trim();
        let tail = " -o perf.data -- COMMAND";
        assert!(line.ends_with(tail), "{line}");
        let data = keep.path().join("perf.data");
        let script = "writerA if=/dev/zero of=$M/a.bin bs=1M count=8 conv=fsync 2>/dev/null; \
                      writerB if=/dev/zero of=$M/b.bin bs=1M count=4 2>/dev/null; sync";
        let cmd = format!(
            "{} -o {} -- sh -c '{script}' 2>&1",
            &line[..line.len() - tail.len()],
            data.display()
        );
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let o = Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .env("PATH", path)
            .env("M", &fs.mnt)
            .output()
            .unwrap();
        assert!(o.status.success(), "{cmd}: {}", text(&o));
        let baseline = keep.path().join("baseline.toml");
        let o = run(&["baseline", s(&data), "-o", s(&baseline)]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            text(&o).contains("the trace names no files"),
            "perf.data has no paths: {}",
            text(&o)
        );
        Recording {
            _keep: keep,
            data,
            baseline,
        }
    }))
}

#[test]
fn report_on_perf_data() {
    let Some(r) = recording() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rep");
    let o = run(&["report", s(&r.data), "-o", s(&out)]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("writerA"), "the summary names the writer: {t}");
    for f in [
        "report.html",
        "ios.parquet",
        "acts.parquet",
        "flame-bytes.svg",
    ] {
        let p = out.join(f);
        assert!(p.metadata().is_ok_and(|m| m.len() > 0), "{f} written: {t}");
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("writerA") && html.contains("writerB"));
    // perf-command records cgroups: the page has the Cgroups section.
    assert!(html.contains("<section id=\"cgroups\">"), "{t}");
}

/// This process's cgroup in the cgroup2 hierarchy (`0::PATH` of /proc/self/cgroup), which
/// the writers it starts inherit.
fn own_cgroup2() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
}

#[test]
fn acts_by_cgroup_on_perf_data() {
    let Some(r) = recording() else { return };
    let Some(own) = ioblame_testkit::need::some(own_cgroup2(), "a cgroup2 hierarchy") else {
        return;
    };
    let o = run(&["acts", "--json", s(&r.data)]);
    assert!(o.status.success(), "{}", text(&o));
    let acts: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The writers' acts are in the test's own cgroup, as perf's CGROUP records name it.
    let writers: Vec<&serde_json::Value> = acts
        .iter()
        .filter(|v| matches!(v["comm"].as_str(), Some("writerA" | "writerB")))
        .collect();
    assert!(!writers.is_empty());
    for v in &writers {
        assert_eq!(v["cgroup"], own.as_str(), "{v}");
    }
    let o = run(&["acts", "--by", "cgroup", "--json", s(&r.data)]);
    assert!(o.status.success(), "{}", text(&o));
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let row = rows
        .iter()
        .find(|r| r["cgroup"] == own.as_str())
        .unwrap_or_else(|| panic!("no row {own}: {rows:?}"));
    let in_own: u64 = acts
        .iter()
        .filter(|v| v["cgroup"] == own.as_str())
        .map(|v| v["write_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(row["write_bytes"].as_u64(), Some(in_own));
    // writerA's 8 MiB and writerB's 4 MiB, plus their metadata.
    assert!(in_own >= 12 * MIB, "{rows:?}");
}

/// The `[[group]]` tables of a baseline file as `key -> raw value` (comments cut).
fn groups(text: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    text.split("\n[[group]]\n")
        .skip(1)
        .map(|g| {
            g.lines()
                .filter_map(|l| l.split_once(" = "))
                .map(|(k, v)| {
                    let v = v.split("  #").next().unwrap_or(v).trim();
                    (k.to_string(), v.trim_matches('"').to_string())
                })
                .collect()
        })
        .collect()
}

#[test]
fn baseline_of_perf_data_has_symbolized_intents() {
    let Some(r) = recording() else { return };
    let b = ioblame_baseline_text(&r.baseline);
    let gs = groups(&b);
    let writer = |role: &str| {
        gs.iter()
            .filter(|g| g["role"] == role && g["via"] == "page")
            .map(|g| {
                g.get("write_bytes")
                    .map_or(0, |v| v.parse::<u64>().unwrap())
            })
            .sum::<u64>()
    };
    assert_eq!(writer("writerA"), 8 * MIB, "{b}");
    assert_eq!(writer("writerB"), 4 * MIB, "{b}");
    // Function names from this host's kallsyms (the recording host), no `?` frames.
    let a = gs.iter().find(|g| g["role"] == "writerA").unwrap();
    let frames = &a["frames"];
    assert!(
        frames.starts_with("[\"") && !frames.contains("\"?\""),
        "{b}"
    );
    assert!(!b.contains("symbols = false"), "{b}");
}

fn ioblame_baseline_text(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn check_of_perf_data_passes_and_fails() {
    let Some(r) = recording() else { return };
    // Against its own baseline, default and strict.
    for extra in [&[][..], &["--strict"][..], &["--json"][..]] {
        let mut args = vec!["check", s(&r.data), "--baseline", s(&r.baseline)];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{extra:?}: {}", text(&o));
    }
    // A baseline where writerA wrote half as much: the recording regressed.
    let dir = tempfile::tempdir().unwrap();
    let b = dir.path().join("half.toml");
    let t = ioblame_baseline_text(&r.baseline);
    let half = t.replacen(
        "write_bytes = 8388608  # 8.0 MiB",
        "write_bytes = 4194304  # 4.0 MiB",
        1,
    );
    assert_ne!(half, t, "{t}");
    std::fs::write(&b, half).unwrap();
    let o = run(&["check", s(&r.data), "--baseline", s(&b)]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("writerA") && l.contains("write bytes 8.0 MiB vs 4.0 MiB")),
        "{out}"
    );
}

#[test]
fn perf_data_without_kernel_symbols() {
    let Some(r) = recording() else { return };
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("kallsyms");
    std::fs::write(&empty, "").unwrap();
    let u = dir.path().join("unsymbolized.toml");
    // No baseline without symbols unless asked for.
    let o = run(&["baseline", "--kallsyms", s(&empty), s(&r.data), "-o", s(&u)]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("no kernel symbols"), "{out}");
    assert!(out.contains("--kallsyms FILE"), "{out}");
    assert!(out.contains("--allow-unsymbolized"), "{out}");
    assert!(!u.exists());
    let o = run(&[
        "baseline",
        "--kallsyms",
        s(&empty),
        "--allow-unsymbolized",
        s(&r.data),
        "-o",
        s(&u),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let ut = std::fs::read_to_string(&u).unwrap();
    assert!(ut.contains("\nsymbols = false"), "{ut}");
    // A trace without symbols against the symbolized baseline: not comparable (exit 2, not
    // a regression), and the message says how to fix it.
    let o = run(&[
        "check",
        "--kallsyms",
        s(&empty),
        s(&r.data),
        "--baseline",
        s(&r.baseline),
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("the trace has no kernel symbols"), "{out}");
    assert!(out.contains("--kallsyms FILE"), "{out}");
    assert!(!out.contains("REGRESSION"), "{out}");
    // And the other way round.
    let o = run(&["check", s(&r.data), "--baseline", s(&u)]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("the baseline was made without kernel symbols"),
        "{out}"
    );
    // Both without: comparable.
    let o = run(&[
        "check",
        "--kallsyms",
        s(&empty),
        s(&r.data),
        "--baseline",
        s(&u),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}
