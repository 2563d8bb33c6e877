//! The `ioblame` command line on the bundled fixture traces: known answers of the
//! ground-truth workloads, golden text outputs, the report, baseline and check commands,
//! perf.data input and error handling. (`BLESS=1` rewrites the golden files.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod cmd;
use cmd::{fixture, ioblame, ok, root};

fn golden(name: &str, actual: &str) {
    ioblame_testkit::assert_golden!(name, actual);
}

/// Bytes per (comm, via, ino, direction) from `acts --json`.
fn charges(trace: &str) -> BTreeMap<(String, String, u64, &'static str), u64> {
    let mut m = BTreeMap::new();
    for line in ok(&["acts", "--json", trace]).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("one JSON object per line");
        // `read_bytes` includes readahead (docs/outputs.md).
        let ra = v["readahead_bytes"].as_u64().unwrap();
        for (key, dir) in [
            ("read_bytes", "R"),
            ("readahead_bytes", "A"),
            ("write_bytes", "W"),
        ] {
            let mut b = v[key].as_u64().unwrap();
            if dir == "R" {
                b -= ra;
            }
            if b > 0 {
                *m.entry((
                    v["comm"].as_str().unwrap().to_string(),
                    v["via"].as_str().unwrap().to_string(),
                    v["ino"].as_u64().unwrap(),
                    dir,
                ))
                .or_insert(0) += b;
            }
        }
    }
    m
}

fn charged(
    m: &BTreeMap<(String, String, u64, &'static str), u64>,
    comm: &str,
    via: &str,
    ino: u64,
    dir: &'static str,
) -> u64 {
    m.get(&(comm.to_string(), via.to_string(), ino, dir))
        .copied()
        .unwrap_or(0)
}

const MIB: u64 = 1 << 20;

/// Inode numbers of the fixture's files, from the paths the trace names (fixtures/make.sh
/// mounts the filesystem at /mnt/ioblame-fixture).
fn inodes(trace: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for line in ok(&["acts", "--json", trace]).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(p) = v["path"].as_str() {
            let name = p.strip_prefix("/mnt/ioblame-fixture/").unwrap_or(p);
            m.insert(name.to_string(), v["ino"].as_u64().unwrap());
        }
    }
    m
}

#[test]
fn ext4_two_writers_known_answer() {
    let t = fixture("ext4-two-writers");
    let m = charges(&t);
    let ino = inodes(&t);
    assert_eq!(charged(&m, "writerA", "page", ino["g_A.dat"], "W"), 8 * MIB);
    assert_eq!(charged(&m, "writerB", "page", ino["g_B.dat"], "W"), 4 * MIB);
    assert_eq!(charged(&m, "writerH1", "page", ino["h.dat"], "W"), 4 * MIB);
    assert_eq!(charged(&m, "writerH2", "page", ino["h.dat"], "W"), 4 * MIB);
    assert_eq!(charged(&m, "writerO", "buffer", ino["h.dat"], "W"), 4 * MIB);
    // `sync` only started writeback: no data charged to it.
    assert!(m.keys().all(|k| k.0 != "sync" || k.1 == "journal"), "{m:?}");
    // Nothing unknown.
    assert!(m.keys().all(|k| k.1 != "unknown"), "{m:?}");
}

#[test]
fn xfs_two_writers_known_answer() {
    let t = fixture("xfs-two-writers");
    let m = charges(&t);
    let ino = inodes(&t);
    assert_eq!(charged(&m, "writerA", "page", ino["g_A.dat"], "W"), 8 * MIB);
    assert_eq!(charged(&m, "writerB", "page", ino["g_B.dat"], "W"), 4 * MIB);
    for w in ["writerH1", "writerH2", "writerO"] {
        assert_eq!(charged(&m, w, "page", ino["h.dat"], "W"), 4 * MIB, "{w}");
    }
    // `sync` only started writeback (and wrote the log): no data charged to it.
    assert!(m.keys().all(|k| k.0 != "sync" || k.1 == "journal"), "{m:?}");
    assert!(m.keys().all(|k| k.1 != "unknown"), "{m:?}");
}

#[test]
fn direct_readahead_mmap_known_answers() {
    let m = charges(&fixture("ext4-direct"));
    assert_eq!(charged(&m, "writerD", "direct", 12, "W"), 4 * MIB);
    assert_eq!(charged(&m, "readerR", "direct", 12, "R"), 4 * MIB);

    let m = charges(&fixture("ext4-readahead"));
    assert_eq!(charged(&m, "readerR", "readahead", 12, "A"), 16 * MIB);
    assert_eq!(charged(&m, "readerR", "readahead", 12, "R"), 0);
    assert!(m.keys().all(|k| k.3 != "W"), "no writes: {m:?}");

    let m = charges(&fixture("ext4-mmap"));
    assert_eq!(charged(&m, "python3", "page", 12, "W"), 4 * MIB);
}

#[test]
fn golden_text_outputs() {
    let t = fixture("ext4-two-writers");
    golden("ext4-two-writers.acts.txt", &ok(&["acts", &t]));
    golden("ext4-two-writers.intents.txt", &ok(&["intents", &t]));
    golden("ext4-two-writers.counters.txt", &ok(&["counters", &t]));
    golden(
        "ext4-two-writers.counters-pretty.txt",
        &ok(&["counters", "--pretty", &t]),
    );
    golden(
        "ext4-direct.iolog.txt",
        &ok(&["iolog", &fixture("ext4-direct")]),
    );
}

#[test]
fn counters_json_matches_acts() {
    // The write-size counter (default set) counts every write IO of each act exactly once.
    let t = fixture("ext4-two-writers");
    let spec = "W size 0 4096 16384 65536 262144 1048576 4194304 16777216 0";
    let out = ok(&["counters", "--json", "--counter", spec, &t]);
    let mut ios_by_pid = BTreeMap::<u64, u64>::new();
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v.get("act").is_none() {
            // The first line describes the counters.
            assert_eq!(v["counters"][0]["spec"], spec);
            continue;
        }
        let n: u64 = v["counters"][0]
            .as_array()
            .expect("slots")
            .iter()
            .map(|x| x.as_u64().unwrap())
            .sum();
        *ios_by_pid.entry(v["pid"].as_u64().unwrap()).or_insert(0) += n;
    }
    let mut expected = BTreeMap::<u64, u64>::new();
    for line in ok(&["acts", "--json", &t]).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let w = v["write_ios"].as_u64().unwrap();
        if w > 0 {
            *expected.entry(v["pid"].as_u64().unwrap()).or_insert(0) += w;
        }
    }
    assert_eq!(
        ios_by_pid
            .into_iter()
            .filter(|e| e.1 > 0)
            .collect::<BTreeMap<_, _>>(),
        expected
    );
}

#[test]
fn bad_counter_spec_is_rejected_before_reading() {
    let o = ioblame(&[
        "counters",
        "--counter",
        "W size 0 4096 8192 16384 32768 65536 131072 262144 0 if size <",
        "/nonexistent/trace",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("counter 1, column"), "{err}");
    assert!(
        !err.contains("nonexistent"),
        "the spec is checked first: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn device_selection() {
    let t = fixture("ext4-direct");
    assert_eq!(ok(&["acts", "--devs", "loop0", &t]), ok(&["acts", &t]));
    let none = ok(&["acts", "--json", "--devs", "!7:0", &t]);
    for line in none.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            v["read_bytes"].as_u64().unwrap() + v["write_bytes"].as_u64().unwrap(),
            0,
            "{line}"
        );
    }
    let o = ioblame(&["acts", "--devs", "nosuchdisk", &t]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nosuchdisk"));
}

#[test]
fn unreadable_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.iob");
    std::fs::write(&junk, b"this is not a trace").unwrap();
    for args in [
        vec!["acts", "/nonexistent/trace"],
        vec!["acts", junk.to_str().unwrap()],
    ] {
        let o = ioblame(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.starts_with("ioblame: error:"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn ring_files_given_one_by_one() {
    let dir = root().join("fixtures/ext4-direct/trace");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".iob"))
        .collect();
    files.sort();
    let mut args = vec!["acts"];
    args.extend(files.iter().map(String::as_str));
    assert_eq!(ok(&args), ok(&["acts", dir.to_str().unwrap()]));
    // The same file twice would count its IO twice: refused.
    let twice = ioblame(&["acts", &files[0], &files[0]]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&twice.stderr).contains("give each once"));
}

#[test]
fn report_writes_everything() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("rep");
    let text = ok(&[
        "report",
        &fixture("ext4-two-writers"),
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert!(text.contains("writerA"), "{text}");
    assert!(text.contains("report.html"), "{text}");
    for f in [
        "report.html",
        "ios.parquet",
        "acts.parquet",
        "intents.parquet",
        "roles.parquet",
        "files.parquet",
        "histograms.parquet",
        "lost_windows.parquet",
        "flame-bytes.svg",
        "flame-iotime.svg",
        "charts/offset-0.svg",
        "charts/offset-0.png",
        "charts/throughput.svg",
        "timeline.perfetto-trace",
    ] {
        let p = dir.join(f);
        assert!(
            p.metadata().map(|m| m.len() > 0).unwrap_or(false),
            "{f} missing or empty"
        );
    }
    // The timeline is the one `ioblame timeline` writes, linked from the page with how to
    // open it.
    let alone = out.path().join("alone.perfetto-trace");
    ok(&[
        "timeline",
        &fixture("ext4-two-writers"),
        "-o",
        alone.to_str().unwrap(),
    ]);
    assert_eq!(
        std::fs::read(dir.join("timeline.perfetto-trace")).unwrap(),
        std::fs::read(&alone).unwrap()
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        html.contains("<a href=\"timeline.perfetto-trace\">") && html.contains("ui.perfetto.dev"),
        "no link to the timeline"
    );
}

#[test]
fn baseline_and_check() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("b.toml");
    let ext4 = fixture("ext4-two-writers");
    ok(&["baseline", &ext4, "-o", base.to_str().unwrap()]);
    let text = std::fs::read_to_string(&base).unwrap();
    assert!(text.contains("writerA"), "{text}");
    // Its own trace passes.
    let o = ioblame(&["check", &ext4, "--baseline", base.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // The same workload on xfs goes through other code paths: new and vanished intents.
    let o = ioblame(&[
        "check",
        &fixture("xfs-two-writers"),
        "--baseline",
        base.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("new group writerA via page"), "{out}");
    assert!(out.contains("vanished"), "{out}");
    // A direct-IO trace: the writers vanished.
    let o = ioblame(&[
        "check",
        &fixture("ext4-direct"),
        "--baseline",
        base.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
    assert_eq!(v["regressed"], serde_json::Value::Bool(true));
    // A missing baseline is an input error.
    let o = ioblame(&["check", &ext4, "--baseline", "/nonexistent.toml"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn perf_data_input() {
    let data = root().join("crates/perfdata/tests/data/loop0-full-z.data");
    let o = ioblame(&["acts", "--json", data.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.lines().count() > 0, "acts from a perf.data file");
    // Every command accepts it.
    for cmd in ["intents", "counters", "iolog"] {
        let o = ioblame(&[cmd, data.to_str().unwrap()]);
        assert!(
            o.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn info_describes_the_fixture() {
    let out = ok(&["info", &fixture("ext4-direct")]);
    assert!(out.contains("6.18"), "{out}");
    assert!(out.contains("loop0"), "{out}");
}

/// The report's Parquet tables, read by DuckDB as users would, agree with `acts --json` and
/// `counters --json` on a real trace (skipped without the Python package, except in CI).
#[test]
fn report_tables_in_duckdb_match_text_outputs() {
    if !has_duckdb() {
        return;
    }
    let t = fixture("ext4-two-writers");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rep");
    ok(&["report", &t, "-o", dir.to_str().unwrap()]);
    let script = r#"
import duckdb, json, sys
d = sys.argv[1]
q = lambda s: duckdb.sql(s.replace("$D", d)).fetchall()
acts = {r[0]: r[1:] for r in q("select act, pid, comm, ino, via, read_bytes, readahead_bytes, write_bytes, write_ios from '$D/acts.parquet'")}
# ios joined to acts: per-act bytes recomputed from the IO rows
ios = {r[0]: r[1] for r in q("select i.act, sum(i.size) from '$D/ios.parquet' i join '$D/acts.parquet' a on i.act = a.act where i.dir = 'W' group by i.act")}
hist = {(r[0], r[1], r[2]): r[3] for r in q("select act, counter, slot, count from '$D/histograms.parquet'")}
print(json.dumps({"acts": {str(k): list(v) for k, v in acts.items()}, "ios_w": {str(k): int(v) for k, v in ios.items()}, "hist": {f"{a}/{c}/{s}": int(n) for (a, c, s), n in hist.items()}}))
"#;
    let o = Command::new("python3")
        .args(["-c", script, dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let db: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut compared = 0;
    for line in ok(&["acts", "--json", &t]).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let id = v["act"].as_u64().unwrap().to_string();
        let row = &db["acts"][&id];
        assert!(row.is_array(), "act {id} missing from acts.parquet");
        assert_eq!(row[0], v["pid"], "act {id} pid");
        assert_eq!(row[1], v["comm"], "act {id} comm");
        assert_eq!(row[2], v["ino"], "act {id} ino");
        assert_eq!(row[3], v["via"], "act {id} via");
        // acts.parquet splits reads from readahead; `acts --json` counts readahead in reads.
        assert_eq!(
            row[4].as_u64().unwrap() + row[5].as_u64().unwrap(),
            v["read_bytes"].as_u64().unwrap(),
            "act {id} read bytes"
        );
        assert_eq!(row[5], v["readahead_bytes"], "act {id} readahead bytes");
        assert_eq!(row[6], v["write_bytes"], "act {id} write bytes");
        let w = v["write_bytes"].as_u64().unwrap();
        if w > 0 {
            assert_eq!(
                db["ios_w"][&id].as_u64(),
                Some(w),
                "act {id}: ios.parquet sums"
            );
        }
        compared += 1;
    }
    assert!(compared >= 10, "{compared} acts compared");
    // histograms.parquet holds exactly the counts `counters --json` prints: every slot of
    // every counter of every act, and no other row.
    let mut hist_compared = 0;
    for line in ok(&["counters", "--json", &t]).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let Some(act) = v.get("act") else { continue };
        for (c, slots) in v["counters"].as_array().unwrap().iter().enumerate() {
            let slots = slots.as_array().unwrap();
            assert_eq!(slots.len(), 8, "act {act} counter {c}");
            for (s, n) in slots.iter().enumerate() {
                let key = format!("{act}/{c}/{s}");
                assert_eq!(
                    db["hist"][&key].as_u64(),
                    Some(n.as_u64().unwrap()),
                    "histogram {key}"
                );
                hist_compared += 1;
            }
        }
    }
    assert!(hist_compared > 0);
    assert_eq!(
        db["hist"].as_object().unwrap().len(),
        hist_compared,
        "histograms.parquet rows"
    );
}

/// A trace whose kernel lost records says so on stderr, with how many and when, and the
/// analysis still runs.
#[test]
fn lost_records_are_reported() {
    use ioblame_decode::synth::{builtin_format, TraceBuilder, Val};
    let mut t = TraceBuilder::new(ioblame_format::ByteOrder::native(), 2);
    let q = t
        .add_event(
            "block:block_bio_queue",
            builtin_format("block:block_bio_queue").unwrap(),
            true,
        )
        .unwrap();
    let start = t.header().start_clock_ns;
    let base = start + 1_000_000_000;
    t.comm(0, base, 42, 42, "writer", true);
    t.sample(
        0,
        q,
        base + 10,
        42,
        42,
        &[0xffff_ffff_8100_0000],
        &[
            ("dev", Val::U(7 << 20)),
            ("sector", Val::U(2048)),
            ("nr_sector", Val::U(8)),
            ("rwbs", Val::Str("W")),
            ("comm", Val::Str("writer")),
        ],
    )
    .unwrap();
    t.lost(1, base + 2_500_000_000, 1234);
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t");
    t.write(&trace).unwrap();
    let o = ioblame(&["acts", trace.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("lost"))
        .unwrap_or_else(|| panic!("no lost-records warning: {err}"));
    assert!(line.contains("1234 records"), "how many: {line}");
    assert!(line.contains("1234 on cpu 1 at 3.500s"), "when: {line}");
}

/// A trace file cut in the middle of a chunk is read up to the damage, with a warning, and
/// gives the answer of the complete chunks.
#[test]
fn truncated_trace_is_read_up_to_the_damage() {
    let src = root().join("fixtures/ext4-two-writers/trace");
    let file = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "iob"))
        .unwrap();
    let bytes = std::fs::read(&file).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.iob");
    // The metadata (kallsyms mostly) comes first: cut in the middle of the last chunk.
    let t = ioblame_format::Trace::open(&src).unwrap();
    let last = t.chunks().iter().map(|c| c.offset).max().unwrap() as usize;
    assert!(t.chunks().len() >= 2);
    std::fs::write(&cut, &bytes[..last + 40]).unwrap();
    let o = ioblame(&["acts", "--json", cut.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("warning"), "the damage is reported: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("truncated"), "{err}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("\"comm\":\"writerA\""),
        "acts from the chunks before the cut: {out}"
    );
}

/// A synthetic trace of reads on loop0 (7:0, with a partition loop0p1 7:1 in the device
/// table): `reader` (pid 42) reads `reader_ios` times 4 KiB, the recorder itself (pid 1, the
/// header's recorder pid) `recorder_ios` times 8 KiB. Returns the trace directory.
fn reads_trace(dir: &Path, reader_ios: u64, recorder_ios: u64) -> PathBuf {
    use ioblame_decode::synth::{builtin_format, TraceBuilder, Val};
    let mut t = TraceBuilder::new(ioblame_format::ByteOrder::native(), 1);
    let mut ev = |name: &str, stack: bool| {
        t.add_event(name, builtin_format(name).unwrap(), stack)
            .unwrap()
    };
    let (q, getrq, issue, complete) = (
        ev("block:block_bio_queue", true),
        ev("block:block_getrq", false),
        ev("block:block_rq_issue", false),
        ev("block:block_rq_complete", false),
    );
    for (name, minor, size, start, parent) in [
        ("loop0", 0, 1 << 21, 0, ""),
        ("loop0p1", 1, 1 << 20, 2048, "loop0"),
    ] {
        t.metadata_mut()
            .block_devices
            .push(ioblame_format::BlockDevice {
                name: name.into(),
                major: 7,
                minor,
                size_sectors: size,
                part_start: start,
                parent: parent.into(),
                logical_block_size: 512,
                ..Default::default()
            });
    }
    let dev = Val::U(7 << 20);
    let mut now = t.header().start_clock_ns + 1_000_000_000;
    t.comm(0, now, 1, 1, "ioblame-capture", true);
    t.comm(0, now, 42, 42, "reader", true);
    let mut sector = 4096u64;
    let mut plan: Vec<(u32, &str, u64)> = Vec::new();
    for i in 0..reader_ios.max(recorder_ios) {
        if i < reader_ios {
            plan.push((42, "reader", 8));
        }
        if i < recorder_ios {
            plan.push((1, "ioblame-capture", 16));
        }
    }
    for (pid, comm, n) in plan {
        now += 1_000_000;
        let common = [
            ("dev", dev),
            ("sector", Val::U(sector)),
            ("nr_sector", Val::U(n)),
            ("rwbs", Val::Str("R")),
        ];
        let mut f = common.to_vec();
        f.push(("comm", Val::Str(comm)));
        t.sample(0, q, now, pid, pid, &[0xffff_ffff_8100_0000], &f)
            .unwrap();
        t.sample(0, getrq, now + 10, pid, pid, &[], &f).unwrap();
        let mut f = f.clone();
        f.push(("bytes", Val::U(n * 512)));
        t.sample(0, issue, now + 20_000, pid, pid, &[], &f).unwrap();
        t.sample(0, complete, now + 300_000, 0, 0, &[], &common)
            .unwrap();
        sector += 4096;
    }
    let trace = dir.join("t");
    t.write(&trace).unwrap();
    trace
}

/// DuckDB is required in CI; elsewhere a test without it says it skips.
fn has_duckdb() -> bool {
    ioblame_testkit::need::met(
        ioblame_testkit::need::python_module("duckdb"),
        "the Python module duckdb",
    )
}

/// Facts of a report's tables read by DuckDB: acts whose bytes or IOs differ from the sum of
/// their ios.parquet rows (per direction), IO rows, bytes in ios, acts, roles, files and
/// intents, and the bytes of recorder acts.
fn report_join_facts(dir: &Path) -> serde_json::Value {
    let script = r#"
import duckdb, json, sys
d = sys.argv[1]
q = lambda s: duckdb.sql(s.replace("$D", d)).fetchall()
f = {}
f["mismatches"] = q("""
  with i as (select act,
      sum(case when dir = 'R' then size else 0 end) r,
      sum(case when dir = 'A' then size else 0 end) a,
      sum(case when dir = 'W' then size else 0 end) w, count(*) n
    from '$D/ios.parquet' group by act)
  select count(*) from '$D/acts.parquet' a left join i on a.act = i.act
  where coalesce(i.r, 0) != a.read_bytes or coalesce(i.a, 0) != a.readahead_bytes
     or coalesce(i.w, 0) != a.write_bytes or coalesce(i.r + i.a + i.w, 0) != a.bytes
     or coalesce(i.n, 0) != a.read_ios + a.readahead_ios + a.write_ios""")[0][0]
f["orphans"] = q("select count(*) from '$D/ios.parquet' i anti join '$D/acts.parquet' a on i.act = a.act")[0][0]
f["ios_rows"] = q("select count(*) from '$D/ios.parquet'")[0][0]
f["ios_bytes"] = int(q("select coalesce(sum(size), 0) from '$D/ios.parquet'")[0][0])
for t in ["acts", "roles", "files", "intents"]:
    f[t + "_bytes"] = int(q(f"select coalesce(sum(read_bytes + readahead_bytes + write_bytes), 0) from '$D/{t}.parquet'")[0][0])
f["recorder_bytes"] = int(q("select coalesce(sum(bytes), 0) from '$D/acts.parquet' where recorder")[0][0])
f["hist_acts"] = q("select count(distinct act) from '$D/histograms.parquet'")[0][0]
print(json.dumps(f))
"#;
    let o = Command::new("python3")
        .args(["-c", script, dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The recorder's own IO on a traced device: hidden by default, shown with
/// `--show-recorder`, and either way every table counts the IOs of ios.parquet
/// (`sum(ios.size) group by act == acts.bytes`, docs/report.md).
#[test]
fn report_tables_are_consistent_with_recorder_io() {
    if !has_duckdb() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trace = reads_trace(tmp.path(), 3, 2);
    let trace = trace.to_str().unwrap();
    for (args, rows, bytes, recorder) in [
        (vec![], 3, 3 * 4096, 0),
        (vec!["--show-recorder"], 5, 3 * 4096 + 2 * 8192, 2 * 8192),
    ] {
        let dir = tmp.path().join(format!("rep{}", args.len()));
        let mut a = vec!["report", trace, "-o", dir.to_str().unwrap()];
        a.extend(args.iter().copied());
        let text = ok(&a);
        let f = report_join_facts(&dir);
        assert_eq!(f["mismatches"], 0, "{args:?}: {f}");
        assert_eq!(f["orphans"], 0, "{args:?}: {f}");
        assert_eq!(f["ios_rows"], rows, "{args:?}: {f}");
        for t in ["ios", "acts", "roles", "files", "intents"] {
            assert_eq!(f[format!("{t}_bytes")], bytes, "{args:?} {t}: {f}");
        }
        assert_eq!(f["recorder_bytes"], recorder, "{args:?}: {f}");
        assert_eq!(
            text.contains("ioblame-capture"),
            recorder > 0,
            "{args:?}: {text}"
        );
        let folded = std::fs::read_to_string(dir.join("flame-bytes.folded")).unwrap();
        let flame: u64 = folded
            .lines()
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(flame, bytes, "{args:?}: {folded}");
    }
}

/// The terminal summary counts the IO of the selected devices only (as ios.parquet).
#[test]
fn report_summary_honours_devs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rep");
    let text = ok(&[
        "report",
        &fixture("ext4-two-writers"),
        "--devs",
        "!7:0",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert!(
        text.starts_with("ioblame report: 0 B in 0 IOs charged to 0 acts\n"),
        "{text}"
    );
    assert!(text.contains("\n0 IO rows;"), "{text}");
    assert!(!text.contains("writerA"), "{text}");
}

/// Counter filters name devices as `--devs` does, resolved against the trace's device table.
#[test]
fn report_counter_filters_take_device_names() {
    let t = fixture("ext4-two-writers");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rep");
    let o = ioblame(&[
        "report",
        &t,
        "-o",
        dir.to_str().unwrap(),
        "--counter",
        "W size 0 1 2 3 4 5 6 7 0 if dev == nosuchdisk",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("counter 1: unknown device 'nosuchdisk' (the trace knows: loop0 (7:0)"),
        "{err}"
    );
    if !has_duckdb() {
        return;
    }
    ok(&[
        "report",
        &t,
        "-o",
        dir.to_str().unwrap(),
        "--counter",
        "W size 0 1 2 3 4 5 6 7 0 if dev == /dev/loop0",
        "--counter",
        "W size 0 1 2 3 4 5 6 7 0 if dev != loop0",
    ]);
    let script = r#"
import duckdb, sys
d = sys.argv[1]
print(duckdb.sql(f"select counter, sum(count) from '{d}/histograms.parquet' group by counter order by counter").fetchall())
print(duckdb.sql(f"select sum(write_ios) from '{d}/acts.parquet'").fetchall()[0][0])
"#;
    let o = Command::new("python3")
        .args(["-c", script, dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let writes = out.lines().nth(1).unwrap();
    assert_eq!(
        out.lines().next().unwrap(),
        format!("[(0, {writes}), (1, 0)]"),
        "{out}"
    );
}

/// Selecting a partition gives nothing, since requests are counted on the whole disk: the
/// report says so on stderr; a disk without IO is named too.
#[test]
fn report_warns_about_selected_devices_without_io() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = reads_trace(tmp.path(), 2, 1);
    let dir = tmp.path().join("rep");
    let o = ioblame(&[
        "report",
        trace.to_str().unwrap(),
        "--devs",
        "loop0p1",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("ioblame: warning: --devs selects loop0p1 (7:1), which has no IO in the trace: it is a partition, and the block layer counts its requests on the whole disk loop0 (7:0); select loop0 instead"),
        "{err}"
    );
    let o = ioblame(&[
        "report",
        trace.to_str().unwrap(),
        "--devs",
        "loop0",
        "-o",
        dir.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("--devs selects"), "{err}");
    assert_eq!(
        err.matches("the recorder's own IO").count(),
        1,
        "one note on the hidden recorder IO: {err}"
    );
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("ioblame report: 8.00 KiB in 2 IOs"));
}

/// `counters`, `baseline` and `check` resolve device names in filters against the trace's
/// device table as `report` does, and `counters` warns about a selected device without IO.
#[test]
fn counter_filters_take_device_names_in_every_command() {
    let t = fixture("ext4-two-writers");
    let by_name = "W size 0 1 2 3 4 5 6 7 0 if dev == loop0";
    let by_number = "W size 0 1 2 3 4 5 6 7 0 if dev == 7340032";
    let named = ok(&["counters", &t, "--json", "--counter", by_name]);
    let numbered = ok(&["counters", &t, "--json", "--counter", by_number]);
    // The same counts; only the header line repeats the filter as written.
    assert_eq!(
        named.lines().skip(1).collect::<Vec<_>>(),
        numbered.lines().skip(1).collect::<Vec<_>>()
    );
    let writes: u64 = named
        .lines()
        .skip(1)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["counters"][0][7].as_u64().unwrap()
        })
        .sum();
    assert!(writes > 0, "{named}");
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("b.toml");
    let base = base.to_str().unwrap();
    ok(&["baseline", &t, "-o", base]);
    for args in [
        vec!["counters", &t, "--counter"],
        vec!["baseline", &t, "-o", base, "--counter"],
        vec!["check", &t, "--baseline", base, "--counter"],
    ] {
        let mut args = args.clone();
        args.push("W size 0 1 2 3 4 5 6 7 0 if dev == nosuchdisk");
        let o = ioblame(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("unknown device 'nosuchdisk'"),
            "{args:?}: {err}"
        );
    }
    let o = ioblame(&["counters", &t, "--devs", "loop1"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--devs selects loop1 (7:1), which has no IO in the trace"),
        "{err}"
    );
}

/// The user-stack fixture (recorded with `--user-stacks`; its program is not kept): from the
/// trace alone, each phase's bytes are charged to intents named after the function that did
/// them, the intents dump lists the user frames, and the flame graph stacks them below the
/// kernel's.
#[test]
fn user_stacks_name_the_functions_from_the_trace_alone() {
    let t = fixture("ext4-user-stacks");
    let mut by_lead: BTreeMap<(u64, String, &str), u64> = BTreeMap::new();
    for line in ok(&["--no-local-symbols", "acts", "--json", &t]).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        // The files' data (not the metadata the fsync reads ahead, on inode 0).
        let data = ["page", "readahead"].contains(&v["via"].as_str().unwrap());
        if v["comm"] != "iowork" || !data || v["ino"] == 0 {
            continue;
        }
        let lead = v["intent_name"].as_str().unwrap();
        let lead = lead.split(" › ").next().unwrap().to_string();
        let ino = v["ino"].as_u64().unwrap();
        for (key, dir) in [("write_bytes", "W"), ("read_bytes", "R")] {
            let b = v[key].as_u64().unwrap();
            if b > 0 {
                *by_lead.entry((ino, lead.clone(), dir)).or_default() += b;
            }
        }
        // The function is in the frames too, with its module and build id.
        let frames = v["user_frames"].as_array().expect("user_frames");
        let f = frames.iter().find(|f| f["function"] == lead).expect(&lead);
        assert!(f["module"].as_str().unwrap().ends_with("/iowork"), "{f}");
        assert_eq!(f["build_id"].as_str().unwrap().len(), 40, "{f}");
    }
    let want: BTreeMap<(u64, String, &str), u64> = [
        ((12, "wal_append".to_string(), "W"), 4 * MIB),
        ((13, "checkpoint".to_string(), "W"), 2 * MIB),
        ((13, "scan_table".to_string(), "R"), 2 * MIB),
    ]
    .into_iter()
    .collect();
    assert_eq!(by_lead, want);
    golden(
        "ext4-user-stacks.intents.txt",
        &ok(&["--no-local-symbols", "intents", &t]),
    );
    // Flame graphs: the application's frames at the root, below the kernel's.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    ok(&[
        "--no-local-symbols",
        "report",
        &t,
        "-o",
        out.to_str().unwrap(),
    ]);
    let folded = std::fs::read_to_string(out.join("flame-bytes.folded")).unwrap();
    let wal = folded
        .lines()
        .find(|l| l.contains(";wal_append;write;entry_SYSCALL"))
        .unwrap_or_else(|| panic!("no wal_append stack in\n{folded}"));
    assert!(wal.ends_with(";iowork 4194304"), "{wal}");
}
