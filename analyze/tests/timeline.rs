//! `ioblame timeline` on the committed fixtures (issue 42): each output decoded with
//! Perfetto's own schema (`scripts/timeline-check.py`, the `perfetto` Python package): every
//! event on a track described before it, slices nested on every track, every flow with
//! both ends; each act's bytes on the device slices equal to `ioblame acts`; the bytes the
//! dirtying slices wrote never more than their acts', and all of a writer's when it dirtied
//! everything while recording; a flow from each writer's thread to its device. The live
//! recording is in `timeline_live.rs`.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The fixtures' traces.
fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path().join("trace"))
        .filter(|p| p.exists())
        .collect();
    out.sort();
    assert!(out.len() >= 10, "{out:?}");
    out
}

/// The checks every timeline passes, against `ioblame acts` of the same trace.
pub fn check_against_acts(trace: &Path, summary: &Value) {
    let acts = support::act_bytes(trace);
    let io = support::by_act(&summary["io_bytes"]);
    let acts_with_io: BTreeMap<u64, u64> = acts.into_iter().filter(|a| a.1 > 0).collect();
    assert_eq!(io, acts_with_io, "{}: bytes by act", trace.display());
    for (act, w) in support::by_act(&summary["written_bytes"]) {
        assert!(
            w <= io[&act],
            "{}: act {act} wrote {w} through its dirtying slices, {} in all",
            trace.display(),
            io[&act]
        );
    }
    assert!(summary["slices"].as_u64().unwrap() > 0);
}

#[test]
fn every_fixture_is_a_timeline_perfetto_reads_with_the_acts_bytes() {
    if !support::perfetto_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for trace in fixtures() {
        let s = support::timeline_checked(&trace, dir.path(), &[]);
        check_against_acts(&trace, &s);
    }
}

/// The two writers' fixtures: every byte a writer's act wrote came from its own dirtying
/// slices, flows lead from each writer's thread to the device, and from requests to those
/// that waited behind them.
#[test]
fn each_writers_dirtying_flows_to_its_io() {
    if !support::perfetto_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for fixture in ["ext4-two-writers", "xfs-two-writers"] {
        let trace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures")
            .join(fixture)
            .join("trace");
        let s = support::timeline_checked(&trace, dir.path(), &[]);
        let written = support::by_act(&s["written_bytes"]);
        let io = support::by_act(&s["io_bytes"]);
        let mut writers = 0;
        for a in support::acts_json(&trace) {
            let comm = a["comm"].as_str().unwrap();
            if comm.starts_with("writer") && a["via"] == "page" {
                let act = a["act"].as_u64().unwrap();
                assert_eq!(written.get(&act), io.get(&act), "{fixture}: {a}");
                writers += 1;
            }
        }
        assert!(writers >= 2, "{fixture}");
        let pairs: Vec<&str> = s["flow_pairs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p[1].as_str().unwrap().starts_with("device "))
            .map(|p| p[0].as_str().unwrap())
            .collect();
        for w in ["writerA", "writerB"] {
            assert!(pairs.contains(&w), "{fixture}: no flow from {w}: {pairs:?}");
        }
        // Requests that waited behind others have an arrow from a request on their device.
        assert!(
            pairs.iter().any(|p| p.starts_with("device ")),
            "{fixture}: no arrow from a request to one that waited behind it: {pairs:?}"
        );
    }
}

/// `--from/--to` and the caps leave things out and say so; what is left still checks.
#[test]
fn the_window_and_the_caps_bound_it() {
    if !support::perfetto_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/ext4-two-writers/trace");
    let all = support::timeline_checked(&trace, dir.path(), &[]);
    let capped = support::timeline_checked(
        &trace,
        dir.path(),
        &["--max-slices", "10", "--max-flows", "3"],
    );
    assert!(capped["slices"].as_u64() < all["slices"].as_u64());
    assert_eq!(capped["flows"], 3);
    let o = support::ioblame(&[
        "timeline".as_ref(),
        trace.as_os_str(),
        "-o".as_ref(),
        dir.path().join("x").as_os_str(),
        "--max-slices".as_ref(),
        "10".as_ref(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("leaves out") && err.contains("--max-slices"),
        "{err}"
    );
    // --scope: one process's IO and dirtying (its requests still count in the devices'
    // queue depth).
    let one = support::timeline_checked(&trace, dir.path(), &["--scope", "pid:3463"]);
    let mut io: Vec<u64> = support::by_act(&one["io_bytes"]).into_values().collect();
    io.sort_unstable();
    assert_eq!(io, vec![4096, 8 << 20]);
    for p in one["flow_pairs"].as_array().unwrap() {
        assert!(
            p[0] == "writerA" || p[0].as_str().unwrap().starts_with("device "),
            "{p}"
        );
    }
    let none = support::timeline_checked(&trace, dir.path(), &["--from", "1000", "--to", "1001"]);
    assert_eq!(none["io_bytes"], serde_json::json!({}));
    let o = support::ioblame(&[
        "timeline".as_ref(),
        trace.as_os_str(),
        "--from".as_ref(),
        "2".as_ref(),
        "--to".as_ref(),
        "1".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(2));
}
