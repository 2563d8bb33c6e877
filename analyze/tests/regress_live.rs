//! The CI regression check on real captures (issue 7): a baseline from one capture of a
//! workload, then `ioblame check` on other captures: the same workload again passes, while a
//! writer writing twice as much, a writer switching from buffered to O_DIRECT, or a new writer
//! fails with exit 1 and a message that names it. Fresh ext4 loop device per capture.
//!
//! Those tests need root, loop devices, tracefs and mkfs.ext4; they skip otherwise, except in
//! CI. The tests on the committed fixture traces (doctored baselines, damaged traces, exit
//! codes, `scripts/check-fixtures.sh`) are in `regress.rs` and need nothing.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use support::{capture, tools, LoopFs};

/// How a capture's workload differs from the baseline's.
#[derive(Clone, Copy, PartialEq)]
enum Variant {
    Same,
    DoubleA,
    DirectA,
    NewWriterC,
}

fn script(v: Variant) -> String {
    let a = match v {
        Variant::DoubleA => "writerA if=/dev/zero of=$M/a.bin bs=1M count=16 conv=fsync",
        Variant::DirectA => "writerA if=/dev/zero of=$M/a.bin bs=1M count=8 oflag=direct",
        _ => "writerA if=/dev/zero of=$M/a.bin bs=1M count=8 conv=fsync",
    };
    let c = if v == Variant::NewWriterC {
        "writerC if=/dev/zero of=$M/c.bin bs=1M count=4 conv=fsync 2>/dev/null"
    } else {
        "true"
    };
    format!(
        "set -e
        {a} 2>/dev/null
        writerB if=/dev/zero of=$M/b.bin bs=1M count=4 2>/dev/null
        {c}
        sync"
    )
}

/// Captures the workload variant into a directory that outlives the loop device.
fn record(v: Variant, keep: &Path, name: &str) -> PathBuf {
    let fs = LoopFs::new("ext4", 128);
    let bin = tools(
        &fs,
        &[
            ("writerA", "/bin/dd"),
            ("writerB", "/bin/dd"),
            ("writerC", "/bin/dd"),
        ],
    );
    let t = capture(&fs, &bin, name, &script(v));
    let dst = keep.join(name);
    // `keep` is in /var/tmp like the loop device's directory: a rename, not a copy.
    std::fs::rename(&t, &dst).unwrap();
    dst
}

/// The baseline of the plain workload, made once for all tests of this file.
fn baseline() -> Option<&'static Path> {
    static B: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    if !support::ready(&["mkfs.ext4", "dd", "sync"]) {
        return None;
    }
    let (_, p) = B.get_or_init(|| {
        let _g = support::lock();
        let keep = tempfile::tempdir_in("/var/tmp").unwrap();
        let trace = record(Variant::Same, keep.path(), "base");
        let b = keep.path().join("baseline.toml");
        let o = support::ioblame(&[
            "baseline".as_ref(),
            trace.as_os_str(),
            "-o".as_ref(),
            b.as_os_str(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // Files are keyed by path, and the loop device is mounted in a fresh temporary
        // directory per capture: a glob covers it, as a user would write for per-run paths.
        let text = std::fs::read_to_string(&b).unwrap();
        assert!(
            text.lines()
                .any(|l| l.starts_with("file = \"/") && l.ends_with("/mnt/a.bin\"")),
            "files keyed by path: {text}"
        );
        support::glob_mount_dirs(&b);
        (keep, b)
    });
    Some(p)
}

/// Captures `v` and checks it against the baseline.
fn check(v: Variant, extra: &[&str]) -> Option<Output> {
    let b = baseline()?;
    let _g = support::lock();
    let keep = tempfile::tempdir_in("/var/tmp").unwrap();
    let trace = record(v, keep.path(), "run");
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "check".as_ref(),
        trace.as_os_str(),
        "--baseline".as_ref(),
        b.as_os_str(),
    ];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    Some(support::ioblame(&args))
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn another_capture_of_the_same_workload_passes() {
    let Some(o) = check(Variant::Same, &[]) else {
        return;
    };
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("OK"), "{}", text(&o));
}

#[test]
fn a_writer_writing_twice_as_much_fails() {
    let Some(o) = check(Variant::DoubleA, &[]) else {
        return;
    };
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    let line = t
        .lines()
        .find(|l| l.contains("writerA") && l.contains("write bytes"))
        .unwrap_or_else(|| panic!("no write-bytes finding for writerA: {t}"));
    assert!(
        line.contains("16.0 MiB vs 8.0 MiB") && line.contains("+100%"),
        "{line}"
    );
    assert!(line.contains("/mnt/a.bin"), "named by its file: {line}");
    assert!(!t.contains("writerB via"), "writerB did not change: {t}");
}

#[test]
fn json_report_of_a_regression() {
    let Some(o) = check(Variant::DoubleA, &["--json"]) else {
        return;
    };
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
    assert_eq!(v["regressed"], true);
    let regs = v["regressions"].as_array().unwrap();
    assert!(
        regs.iter().any(
            |r| r["role"].as_str().is_some_and(|s| s.contains("writerA"))
                && r["metric"].as_str().is_some_and(|m| m.contains("write"))
        ),
        "{v:#}"
    );
}

#[test]
fn buffered_to_direct_fails() {
    let Some(o) = check(Variant::DirectA, &[]) else {
        return;
    };
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("new group writerA via direct"), "{t}");
    assert!(
        t.lines()
            .any(|l| l.contains("writerA via page") && l.contains("vanished")),
        "{t}"
    );
}

#[test]
fn a_new_writer_fails() {
    let Some(o) = check(Variant::NewWriterC, &[]) else {
        return;
    };
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("new group writerC via page"), "{t}");
}

#[test]
fn malformed_baseline_is_an_input_error() {
    let Some(b) = baseline() else { return };
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    let text_ok = std::fs::read_to_string(b).unwrap();
    std::fs::write(
        &bad,
        text_ok.replacen("\nwrite_bytes = ", "\nwrite_bytes = \"lots\" # ", 1),
    )
    .unwrap();
    let trace = b.parent().unwrap().join("base");
    let o = support::ioblame(&[
        "check".as_ref(),
        trace.as_os_str(),
        "--baseline".as_ref(),
        bad.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
