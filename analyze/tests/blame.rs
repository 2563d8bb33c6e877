//! `ioblame blame` on the bundled fixtures: the golden text, every victim IO's split adding
//! up to its Q2C, the victims being exactly the acts' IOs, the groups agreeing with the IOs,
//! the JSON keys, `--tail`, `--victim`, `--by`, `--from/--to` and the errors.

use std::collections::BTreeMap;

use serde_json::Value;

mod cmd;
use cmd::{fixture, ioblame, ok};

const FIXTURES: [&str; 9] = [
    "ext4-two-writers",
    "ext4-direct",
    "ext4-mmap",
    "ext4-readahead",
    "xfs-two-writers",
    "ext4-user-stacks",
    "blktrace-direct",
    "blktrace-buffered",
    "blktrace-6.1-dm",
];

fn json_lines(args: &[&str]) -> Vec<Value> {
    ok(args)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

#[test]
fn golden_text() {
    ioblame_testkit::assert_golden!(
        "ext4-two-writers.blame.txt",
        ok(&["blame", &fixture("ext4-two-writers")])
    );
}

/// Every victim IO: own + idle + culprits = Q2C = completion - queue; the victims are the
/// acts' IOs, act by act; each group's figures are the sums of its IOs'.
#[test]
fn every_io_adds_up_and_the_groups_are_their_sums() {
    for f in FIXTURES {
        let t = fixture(f);
        let ios = json_lines(&["blame", "--ios", &t]);
        assert!(!ios.is_empty(), "{f}");
        let mut per_act: BTreeMap<u64, u64> = BTreeMap::new();
        let mut per_pid: BTreeMap<u64, [u64; 5]> = BTreeMap::new();
        for io in &ios {
            let culprits: u64 = io["culprits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| u(c, "wait_ns"))
                .sum();
            let q2c = u(io, "latency_ns");
            assert_eq!(
                u(io, "own_ns") + u(io, "idle_ns") + culprits,
                q2c,
                "{f}: {io}"
            );
            assert_eq!(q2c, u(io, "complete_ns") - u(io, "queue_ns"), "{f}: {io}");
            *per_act.entry(u(io, "act")).or_default() += 1;
            let g = per_pid.entry(u(io, "victim_pid")).or_default();
            g[0] += 1;
            g[1] += q2c;
            g[2] += u(io, "own_ns");
            g[3] += u(io, "idle_ns");
            g[4] += culprits;
        }
        // The victims are the acts' IOs.
        let acts: BTreeMap<u64, u64> = json_lines(&["acts", "--json", &t])
            .iter()
            .map(|a| (u(a, "act"), u(a, "read_ios") + u(a, "write_ios")))
            .filter(|a| a.1 > 0)
            .collect();
        assert_eq!(per_act, acts, "{f}: victims per act vs acts' IOs");
        // The groups (one per process) are the sums of their IOs.
        let lines = json_lines(&["blame", "--json", &t]);
        let victims: Vec<&Value> = lines.iter().filter(|l| l["kind"] == "victim").collect();
        assert_eq!(victims.len(), per_pid.len(), "{f}");
        for v in victims {
            let g = per_pid[&u(v, "victim_pid")];
            let got = [
                u(v, "ios"),
                u(v, "latency_ns"),
                u(v, "own_ns"),
                u(v, "idle_ns"),
                u(v, "wait_ns"),
            ];
            assert_eq!(got, g, "{f}: {v}");
            let behind: u64 = lines
                .iter()
                .filter(|l| l["kind"] == "culprit" && l["victim_pid"] == v["victim_pid"])
                .map(|l| u(l, "wait_ns"))
                .sum();
            assert_eq!(behind, g[4], "{f}: {v}");
            assert!(u(v, "p50_ns") <= u(v, "p99_ns"), "{v}");
        }
    }
}

/// The keys of the JSON lines, as docs/latency.md lists them: a culprit act carries the
/// keys `ioblame acts --json` names it by, and the victim's.
#[test]
fn json_keys() {
    let lines = json_lines(&["blame", "--json", &fixture("ext4-two-writers")]);
    let victim = lines.iter().find(|l| l["kind"] == "victim").unwrap();
    for k in [
        "victim_comm",
        "victim_pid",
        "ios",
        "bytes",
        "latency_ns",
        "own_ns",
        "idle_ns",
        "wait_ns",
        "p50_ns",
        "p99_ns",
    ] {
        assert!(victim.get(k).is_some(), "{k} in {victim}");
    }
    let culprit = lines
        .iter()
        .find(|l| l["kind"] == "culprit" && l["via"] == "page")
        .unwrap();
    for k in [
        "victim_comm",
        "victim_pid",
        "act",
        "comm",
        "pid",
        "tid",
        "via",
        "dev",
        "ino",
        "path",
        "intent",
        "intent_name",
        "reason",
        "wait_ns",
        "share",
    ] {
        assert!(culprit.get(k).is_some(), "{k} in {culprit}");
    }
    assert!(culprit["path"].as_str().unwrap().starts_with("/mnt/"));
    let share = culprit["share"].as_f64().unwrap();
    assert!(share > 0.0 && share <= 1.0, "{culprit}");
}

/// `--tail P` keeps each group's slowest IOs: fewer, and slower on average; `--victim`
/// makes one group of what it selects; `--by process` sums culprit acts by process.
#[test]
fn tail_victim_and_by() {
    let t = fixture("ext4-two-writers");
    let all = json_lines(&["blame", "--json", "--victim", "comm:writerA", &t]);
    let tail = json_lines(&[
        "blame",
        "--json",
        "--victim",
        "comm:writerA",
        "--tail",
        "50",
        &t,
    ]);
    let (a, b) = (&all[0], &tail[0]);
    assert_eq!(a["victim"], "comm:writerA");
    assert!(u(b, "ios") < u(a, "ios"), "{a}\n{b}");
    assert!(u(b, "ios") * 2 >= u(a, "ios") - 1, "{a}\n{b}");
    assert!(
        u(b, "latency_ns") * u(a, "ios") >= u(a, "latency_ns") * u(b, "ios"),
        "the tail is slower on average: {a}\n{b}"
    );
    // p50 and p99 are of all the group's IOs, tail or not.
    assert_eq!(a["p99_ns"], b["p99_ns"]);
    // The same group by pid.
    let pid = json_lines(&["blame", "--json", &t])
        .into_iter()
        .find(|l| l["kind"] == "victim" && l["victim_comm"] == "writerA")
        .unwrap();
    let by_pid = json_lines(&[
        "blame",
        "--json",
        "--victim",
        &format!("pid:{}", pid["victim_pid"]),
        &t,
    ]);
    for k in ["ios", "latency_ns", "own_ns", "idle_ns", "wait_ns"] {
        assert_eq!(by_pid[0][k], pid[k], "{k}");
    }
    // By process: the culprit acts of one process are one line, with the same total.
    let by_process = json_lines(&["blame", "--json", "--by", "process", &t]);
    let procs: Vec<&Value> = by_process
        .iter()
        .filter(|l| l["kind"] == "culprit" && l["victim_pid"] == pid["victim_pid"])
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    for c in &procs {
        assert!(c.get("act").is_none(), "{c}");
        assert!(
            seen.insert(c["pid"].to_string()),
            "one line per process: {c}"
        );
    }
    let total: u64 = procs.iter().map(|c| u(c, "wait_ns")).sum();
    assert_eq!(total, u(&pid, "wait_ns"));
}

/// `--from/--to` select victims by queue time; a window past the end selects none.
#[test]
fn time_window() {
    let t = fixture("ext4-two-writers");
    let all = json_lines(&["blame", "--ios", &t]);
    let late = json_lines(&["blame", "--ios", "--from", "1000000", &t]);
    assert!(late.is_empty());
    let early = json_lines(&["blame", "--ios", "--to", "0", &t]);
    assert!(early.is_empty());
    let whole = json_lines(&["blame", "--ios", "--from", "0", "--to", "1000000", &t]);
    assert_eq!(whole.len(), all.len());
    let text = ok(&["blame", "--from", "1000000", &t]);
    assert!(text.contains("no IO of the victims selected"), "{text}");
}

/// Bad selections are errors (exit 2) with a reason, never a panic.
#[test]
fn errors() {
    let t = fixture("ext4-two-writers");
    for (args, want) in [
        (vec!["--victim", "act:999999"], "acts"),
        (vec!["--victim", "who:1"], "expected pid:N"),
        (vec!["--victim", "pid:x"], "no number"),
        (vec!["--tail", "100"], "percentile"),
        (
            vec!["--from", "2", "--to", "1"],
            "--from must come before --to",
        ),
        (vec!["--by", "cgroup"], "cgroup"),
    ] {
        let mut a = vec!["blame", t.as_str()];
        a.extend(args.iter().copied());
        let o = ioblame(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {err}");
        assert!(err.contains(want), "{a:?}: {err}");
    }
}

/// A blktrace recording knows no dirtier: the text says culprits are the issuers, once.
#[test]
fn blktrace_culprits_are_issuers() {
    let text = ok(&["blame", &fixture("blktrace-buffered")]);
    assert_eq!(text.matches("knows no dirtier").count(), 1, "{text}");
}

/// `ioblame report` writes the blame table, text and chart: `blame.parquet`'s rows of each
/// victim act add up to the Q2C of its IOs (`--ios`), own and idle included; its text is
/// `ioblame blame`'s; the page has the section.
#[test]
fn report_writes_the_blame_section() {
    use polars::prelude::*;
    let t = fixture("ext4-two-writers");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    ok(&["report", &t, "-o", out.to_str().unwrap()]);
    let f = std::fs::File::open(out.join("blame.parquet")).unwrap();
    let df = ParquetReader::new(f).finish().unwrap();
    let acts = df.column("victim_act").unwrap().u32().unwrap();
    let waits = df.column("wait_ns").unwrap().u64().unwrap();
    let tails = df.column("tail_wait_ns").unwrap().u64().unwrap();
    let kinds = df.column("culprit").unwrap().str().unwrap();
    let mut per_act: BTreeMap<u64, u64> = BTreeMap::new();
    for i in 0..df.height() {
        let (w, t) = (waits.get(i).unwrap(), tails.get(i).unwrap());
        assert!(t <= w, "row {i}");
        *per_act.entry(acts.get(i).unwrap() as u64).or_default() += w;
    }
    let mut want: BTreeMap<u64, u64> = BTreeMap::new();
    for io in json_lines(&["blame", "--ios", &t]) {
        *want.entry(u(&io, "act")).or_default() += u(&io, "latency_ns");
    }
    assert_eq!(per_act, want);
    let kinds: Vec<&str> = (0..df.height()).filter_map(|i| kinds.get(i)).collect();
    for k in ["own", "idle", "act"] {
        assert!(kinds.contains(&k), "{k} in {kinds:?}");
    }
    assert_eq!(
        std::fs::read_to_string(out.join("blame.txt")).unwrap(),
        ok(&["blame", &t])
    );
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("<section id=\"blame\">"));
    assert!(page.contains("Who made the IO slow"));
    assert!(out.join("charts/blame-tail.svg").is_file());
}
