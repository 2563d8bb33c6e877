//! The fleet dataset end to end (`docs/dataset.md`): `ioblame export` of the fixture traces
//! under several host names (two capture dates, two kernel builds), read back equal to
//! `ioblame report`'s tables; idempotence; a killed export; bad input; partition pruning;
//! and DuckDB and Spark reading the dataset natively and computing the same top intents as
//! `ioblame fleet --json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use polars::prelude::*;

mod cmd;
use cmd::{fixture, ioblame, ok, root};

/// The exports of the shared dataset: (fixture, host, label). ext4-mmap was captured the
/// day before the others and on another kernel build; ext4-two-writers is on two hosts.
const EXPORTS: [(&str, &str, &str); 6] = [
    ("ext4-two-writers", "db-1", "env=prod"),
    ("xfs-two-writers", "db-1", "env=prod"),
    ("ext4-direct", "db-2", "env=prod"),
    ("ext4-readahead", "db-2", "env=prod"),
    ("ext4-two-writers", "web-1", "env=test"),
    ("ext4-mmap", "web-1", "env=test"),
];

/// Exports `EXPORTS` into `dir`, one `export` per host (several traces at once).
fn export_all(dir: &Path) {
    let mut by_host: BTreeMap<(&str, &str), Vec<String>> = BTreeMap::new();
    for (f, h, l) in EXPORTS {
        by_host.entry((h, l)).or_default().push(fixture(f));
    }
    for ((host, label), traces) in by_host {
        let mut args = vec!["export", "--dataset", dir.to_str().unwrap()];
        args.extend(["--host", host, "--label", label, "--jobs", "2"]);
        args.extend(traces.iter().map(|s| s.as_str()));
        ok(&args);
    }
}

/// The dataset shared by the read-only tests.
fn shared() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        export_all(d.path());
        d
    })
    .path()
}

/// Every `*.parquet` file of the dataset, relative, sorted.
fn parquet_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Every file whose name ends in `.tmp`.
fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(".tmp") {
                out.push(p);
            }
        }
    }
    out
}

fn read(path: &Path) -> DataFrame {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    ParquetReader::new(f).finish().unwrap()
}

/// The trace id of a fixture, as `info` prints it.
fn trace_id(name: &str) -> String {
    let info = ok(&["info", &fixture(name)]);
    let line = info.lines().find(|l| l.contains("trace id")).unwrap();
    let hex = line.split("0x").nth(1).unwrap().trim();
    format!("{:0>16}", hex)
}

/// Values of a column as i128, unsigned ones bit for bit as the dataset stores them (i64).
fn ints(s: &Series) -> Vec<Option<i128>> {
    match s.dtype() {
        DataType::UInt64 => s
            .u64()
            .unwrap()
            .iter()
            .map(|v| v.map(|x| x as i64 as i128))
            .collect(),
        dt if dt.is_integer() => {
            let s = s.cast(&DataType::Int64).unwrap();
            s.i64().unwrap().iter().map(|v| v.map(i128::from)).collect()
        }
        dt => panic!("not an integer column: {dt:?}"),
    }
}

/// Asserts a dataset table equals the report's, column by column: same values, integers
/// made signed bit for bit; and every row carries the trace's keys.
fn assert_same_table(report: &DataFrame, ds: &DataFrame, table: &str, id: &str) {
    assert_eq!(report.height(), ds.height(), "{table}: rows");
    assert!(report.height() > 0, "{table}: no rows to compare");
    for c in report.columns() {
        let name = c.name().as_str();
        let r = c.as_materialized_series();
        let d = ds
            .column(name)
            .unwrap_or_else(|_| panic!("{table}.{name} missing"))
            .as_materialized_series();
        match r.dtype() {
            dt if dt.is_integer() => {
                assert_eq!(d.dtype(), &DataType::Int64, "{table}.{name} type");
                assert_eq!(ints(r), ints(d), "{table}.{name}");
            }
            DataType::List(inner) if inner.is_integer() => {
                assert_eq!(d.dtype(), &DataType::List(Box::new(DataType::Int64)));
                let (rl, dl) = (r.list().unwrap(), d.list().unwrap());
                for i in 0..rl.len() {
                    let (a, b) = (rl.get_as_series(i), dl.get_as_series(i));
                    assert_eq!(a.map(|s| ints(&s)), b.map(|s| ints(&s)), "{table}.{name}");
                }
            }
            _ => assert!(r.equals_missing(d), "{table}.{name} differs"),
        }
    }
    let ids = ds.column("trace_id").unwrap().str().unwrap().clone();
    assert!(ids.iter().all(|v| v == Some(id)), "{table}: trace_id");
    let kr = ds.column("kernel_release").unwrap().str().unwrap().clone();
    assert!(kr.iter().all(|v| v.is_some_and(|k| k.starts_with("6.18"))));
    assert_eq!(
        ds.column("capture_start").unwrap().dtype(),
        &DataType::Datetime(TimeUnit::Microseconds, Some(TimeZone::UTC)),
        "{table}.capture_start"
    );
}

/// Round trip: each table of an exported trace reads back equal to what `ioblame report`
/// writes for the same trace, with the keys on every row and no unsigned column.
#[test]
fn export_reads_back_equal_to_the_report_tables() {
    let ds = shared();
    let tmp = tempfile::tempdir().unwrap();
    let rep = tmp.path().join("rep");
    let name = "ext4-two-writers";
    ok(&["report", &fixture(name), "-o", rep.to_str().unwrap()]);
    let id = trace_id(name);
    let part = ds
        .join("{t}/host=db-1/date=2026-11-23")
        .display()
        .to_string();
    for t in [
        "ios",
        "acts",
        "intents",
        "roles",
        "files",
        "histograms",
        "blame",
    ] {
        let file = PathBuf::from(part.replace("{t}", t)).join(format!("{id}.parquet"));
        let d = read(&file);
        let r = read(&rep.join(format!("{t}.parquet")));
        assert_same_table(&r, &d, t, &id);
        for c in d.columns() {
            assert!(
                !c.dtype().is_unsigned_integer(),
                "{t}.{}: {:?}",
                c.name(),
                c.dtype()
            );
        }
        let labels = d.column("labels").unwrap().list().unwrap().clone();
        for i in 0..labels.len() {
            let l = labels.get_as_series(i).unwrap();
            let v: Vec<_> = l.str().unwrap().iter().collect();
            assert_eq!(v, [Some("env=prod")], "{t}.labels");
        }
    }
    // The additions: every act's intent key is its intent's, paths where named.
    let file = |t: &str| PathBuf::from(part.replace("{t}", t)).join(format!("{id}.parquet"));
    let acts = read(&file("acts"));
    let intents = read(&file("intents"));
    let key_of: BTreeMap<i64, i64> = intents
        .column("intent")
        .unwrap()
        .i64()
        .unwrap()
        .iter()
        .zip(intents.column("intent_key").unwrap().i64().unwrap().iter())
        .map(|(i, k)| (i.unwrap(), k.unwrap()))
        .collect();
    let ai = acts.column("intent").unwrap().i64().unwrap().clone();
    let ak = acts.column("intent_key").unwrap().i64().unwrap().clone();
    for (i, k) in ai.iter().zip(ak.iter()) {
        assert_eq!(key_of.get(&i.unwrap()).copied(), k, "act intent key");
    }
    let paths = acts.column("path").unwrap().str().unwrap().clone();
    assert!(
        paths.iter().flatten().any(|p| p.contains('/')),
        "paths named"
    );
    let traces = read(&file("traces"));
    assert_eq!(traces.height(), 1);
    let rows = traces.column("ios").unwrap().i64().unwrap().get(0).unwrap();
    assert_eq!(rows as usize, read(&file("ios")).height());
}

/// The `latency` table holds what `ioblame latency --json --scope all` prints (export
/// analyses all of a trace's IO): one row per group and interval with values, same figures.
#[test]
fn export_latency_table_equals_the_latency_command() {
    let ds = shared();
    for (name, host) in [("ext4-two-writers", "db-1"), ("ext4-direct", "db-2")] {
        let id = trace_id(name);
        let file = ds.join(format!("latency/host={host}/date=2026-11-23/{id}.parquet"));
        let d = read(&file);
        let col = |c: &str| d.column(c).unwrap().as_materialized_series().clone();
        let strs = |c: &str| -> Vec<String> {
            col(c)
                .str()
                .unwrap()
                .iter()
                .map(|v| v.unwrap().to_string())
                .collect()
        };
        let (group, dev, rname, interval) =
            (strs("group"), strs("dev"), strs("name"), strs("interval"));
        let n = ints(&col("n"));
        let stats: Vec<[Option<i128>; 5]> = (0..d.height())
            .map(|i| {
                let c = ["min_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns"];
                c.map(|c| ints(&col(c))[i])
            })
            .collect();
        type Key = (String, String, String, String);
        let mut rows: BTreeMap<Key, (i128, [Option<i128>; 5])> = BTreeMap::new();
        for i in 0..d.height() {
            let key = (
                group[i].clone(),
                dev[i].clone(),
                rname[i].clone(),
                interval[i].clone(),
            );
            assert!(
                rows.insert(key, (n[i].unwrap(), stats[i])).is_none(),
                "{name}: dup row {i}"
            );
        }
        let json: Vec<serde_json::Value> =
            ok(&["latency", "--json", "--scope", "all", &fixture(name)])
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        let mut expected = 0;
        let ns = |v: &serde_json::Value| v.as_f64().map(|us| (us * 1000.0).round() as i128);
        for j in &json {
            let s = |k: &str| j[k].as_str().unwrap().to_string();
            for (k, v) in j.as_object().unwrap() {
                let Some(cnt) = v.get("n").and_then(|x| x.as_u64()) else {
                    continue;
                };
                if cnt == 0 {
                    continue;
                }
                expected += 1;
                let iv = k.to_uppercase().replace("_DM", "dm");
                let key = (s("group"), s("dev"), s("name"), iv);
                let (rn, st) = rows
                    .get(&key)
                    .unwrap_or_else(|| panic!("{name}: no dataset row {key:?}"));
                assert_eq!(*rn, cnt as i128, "{name} {key:?} n");
                let want = ["min_us", "p50_us", "p95_us", "p99_us", "max_us"].map(|f| ns(&v[f]));
                assert_eq!(*st, want, "{name} {key:?}");
            }
        }
        assert!(expected > 4, "{name}: {expected} figures");
        assert_eq!(rows.len(), expected, "{name}: rows");
        assert!(group.iter().any(|g| g == "act"), "{name}: act rows");
    }
}

/// The same stack has the same intent key on every host and kernel build: the fixtures come
/// from two kernel builds, and intents shared by their traces have equal keys.
#[test]
fn intent_keys_are_comparable_across_hosts_and_kernels() {
    let f: serde_json::Value = serde_json::from_str(&ok(&[
        "fleet",
        shared().to_str().unwrap(),
        "--json",
        "--top",
        "1000",
    ]))
    .unwrap();
    let intents = f["top_intents"].as_array().unwrap();
    // ext4-two-writers exported under two hosts: its intents appear on both.
    assert!(
        intents.iter().any(|i| {
            let hosts: Vec<&str> = i["hosts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h[0].as_str().unwrap())
                .collect();
            hosts.contains(&"db-1") && hosts.contains(&"web-1")
        }),
        "no intent on two hosts"
    );
    // A code path shared by traces of both kernel builds (mmap's capture on the older build):
    // one key, counted on both of web-1's traces.
    let kernels: Vec<&serde_json::Value> = f["hosts"].as_array().unwrap().iter().collect();
    let web = kernels.iter().find(|h| h["host"] == "web-1").unwrap();
    assert_eq!(web["kernels"].as_array().unwrap().len(), 2, "{web}");
    assert!(
        intents.iter().any(|i| i["n_traces"].as_i64().unwrap() >= 2),
        "no intent shared by traces of different captures"
    );
    // Frames never repeat under two keys.
    let mut seen = BTreeMap::new();
    for i in intents {
        let k = (i["frames"].to_string(), i["reason"].to_string());
        if let Some(old) = seen.insert(k.clone(), i["intent_key"].clone()) {
            assert_eq!(old, i["intent_key"], "{k:?}");
        }
    }
}

/// `fleet`'s answer on the shared dataset: hosts, dates, totals equal to the sum of the
/// traces' totals, labels and host globs.
#[test]
fn fleet_lists_hosts_and_filters() {
    let ds = shared().to_str().unwrap();
    let all: serde_json::Value = serde_json::from_str(&ok(&["fleet", ds, "--json"])).unwrap();
    assert_eq!(all["traces"], 6);
    let hosts: Vec<&str> = all["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["db-1", "db-2", "web-1"]);
    let web = &all["hosts"][2];
    assert_eq!(web["first_date"], "2026-11-22");
    assert_eq!(web["last_date"], "2026-11-23");
    let sum_hosts: i64 = all["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["bytes"].as_i64().unwrap())
        .sum();
    let sum_roles: i64 = all["top_roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["bytes"].as_i64().unwrap())
        .sum();
    assert!(sum_hosts > 0);
    assert_eq!(sum_hosts, sum_roles, "roles and hosts count the same bytes");
    let q = |args: &[&str]| -> serde_json::Value {
        let mut a = vec!["fleet", ds, "--json"];
        a.extend(args);
        serde_json::from_str(&ok(&a)).unwrap()
    };
    assert_eq!(q(&["--host", "db-*"])["traces"], 4);
    assert_eq!(q(&["--label", "env=test"])["traces"], 2);
    assert_eq!(q(&["--label", "env=test", "--host", "db-*"])["traces"], 0);
    assert_eq!(q(&["--since", "2026-11-23"])["traces"], 5);
    assert_eq!(q(&["--until", "2026-11-22"])["traces"], 1);
    // The text output names the top intent's hosts.
    let text = ok(&["fleet", ds]);
    assert!(
        text.contains("top intents") && text.contains("web-1"),
        "{text}"
    );
    // Bad arguments are clear errors.
    let o = ioblame(&["fleet", ds, "--since", "yesterday"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("YYYY-MM-DD"));
}

/// `--report` writes the page and the merged flame graph: every top intent's code path is a
/// tower in the folded stacks, with its comms on top, and the bytes add up.
#[test]
fn fleet_page_has_the_merged_flame_graph() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("page");
    let ds = shared().to_str().unwrap();
    let j: serde_json::Value = serde_json::from_str(&ok(&[
        "fleet",
        ds,
        "--json",
        "--report",
        out.to_str().unwrap(),
    ]))
    .unwrap();
    let html = std::fs::read_to_string(out.join("fleet.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("Top intents"));
    let svg = std::fs::read_to_string(out.join("fleet-bytes.svg")).unwrap();
    assert!(svg.contains("<svg"));
    let folded = std::fs::read_to_string(out.join("fleet-bytes.folded")).unwrap();
    let total: i64 = folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<i64>().unwrap())
        .sum();
    let hosts: i64 = j["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["bytes"].as_i64().unwrap())
        .sum();
    assert_eq!(total, hosts, "the flame graph weighs every byte once");
    let top = &j["top_intents"][0];
    let outer = top["frames"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .as_str()
        .unwrap();
    assert!(
        folded.lines().any(|l| l.starts_with(outer)),
        "{outer} not at a root of {folded}"
    );
    // Intents are named over the fleet: in the JSON, the flame graph's level above the stack,
    // the page's tables and the acts.
    let name = top["name"].as_str().unwrap();
    assert!(name.contains(" › "), "{name}");
    let inner = top["frames"][0].as_str().unwrap();
    assert!(
        folded
            .lines()
            .any(|l| l.contains(&format!(";{inner};{name};"))),
        "{name} above {inner} in {folded}"
    );
    let esc = name
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(html.contains(&esc), "{name} in the page");
    let key = top["intent_key"].as_i64().unwrap();
    for a in j["top_acts"].as_array().unwrap() {
        if a["intent_key"].as_i64() == Some(key) {
            assert_eq!(a["intent_name"], top["name"], "{a}");
        }
    }
    let text = ok(&["fleet", ds, "--top", "3"]);
    assert!(text.contains(name), "{name} in:\n{text}");
}

/// Exporting the same traces again replaces their files: same files, same rows, same answer.
#[test]
fn export_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path();
    export_all(ds);
    let files = parquet_files(ds);
    let before = ok(&["fleet", ds.to_str().unwrap(), "--json"]);
    export_all(ds);
    assert_eq!(parquet_files(ds), files);
    assert_eq!(ok(&["fleet", ds.to_str().unwrap(), "--json"]), before);
    assert!(temp_files(ds).is_empty());
    // 9 tables (the latency breakdown and blame included) per export.
    assert_eq!(files.len(), 9 * EXPORTS.len(), "{files:#?}");
}

/// A killed export (SIGKILL while it writes a trace) leaves a temporary file that no reader
/// sees (fleet, DuckDB) and that the next export removes; the traces already exported stay.
#[test]
fn killed_export_leaves_the_dataset_readable() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let d = ds.to_str().unwrap();
    ok(&[
        "export",
        "--dataset",
        d,
        "--host",
        "a",
        &fixture("ext4-direct"),
    ]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_ioblame"))
        .args(["export", "--dataset", d, "--host", "b", "--jobs", "1"])
        .arg(fixture("ext4-two-writers"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Its `ios` file is open under a temporary name for the whole analysis.
    let t0 = std::time::Instant::now();
    let mut seen = false;
    while t0.elapsed() < std::time::Duration::from_secs(60) {
        if !temp_files(&ds).is_empty() {
            seen = true;
            break;
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(
        seen,
        "the export finished ({status}) before a temporary file was seen"
    );
    assert!(!status.success(), "killed: {status}");
    let left = temp_files(&ds);
    assert!(!left.is_empty(), "the kill left no temporary file");
    // Host b has no complete trace: nothing of it is read.
    let f: serde_json::Value = serde_json::from_str(&ok(&["fleet", d, "--json"])).unwrap();
    assert_eq!(f["traces"], 1);
    assert_eq!(f["hosts"][0]["host"], "a");
    assert!(parquet_files(&ds).iter().all(|p| !p.contains("host=b")));
    if has_python_module("duckdb") {
        let n = python(
            "import duckdb,sys; print(duckdb.sql(f\"select count(distinct trace_id) from read_parquet('{sys.argv[1]}/ios/*/*/*.parquet', hive_partitioning=true)\").fetchall()[0][0])",
            &[d],
        );
        assert_eq!(n.trim(), "1");
    }
    // The next export into that partition removes the dead process's file.
    ok(&[
        "export",
        "--dataset",
        d,
        "--host",
        "b",
        &fixture("ext4-two-writers"),
    ]);
    assert!(temp_files(&ds).is_empty(), "{:?}", temp_files(&ds));
    let f: serde_json::Value = serde_json::from_str(&ok(&["fleet", d, "--json"])).unwrap();
    assert_eq!(f["traces"], 2);
}

/// A trace that cannot be read is reported and skipped, the others exported, exit 1; a
/// dataset of a newer schema version is refused by export and fleet.
#[test]
fn bad_traces_and_newer_datasets() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let d = ds.to_str().unwrap();
    let bad = tmp.path().join("not-a-trace");
    std::fs::write(&bad, b"garbage").unwrap();
    let o = ioblame(&[
        "export",
        "--dataset",
        d,
        bad.to_str().unwrap(),
        &fixture("ext4-direct"),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.contains("not-a-trace")).count(),
        1,
        "{err}"
    );
    let f: serde_json::Value = serde_json::from_str(&ok(&["fleet", d, "--json"])).unwrap();
    assert_eq!(f["traces"], 1);
    // The host recorded in the trace is the default.
    assert_eq!(f["hosts"][0]["host"], "vm");
    // Bad host names and labels are usage errors before anything is read.
    let o = ioblame(&[
        "export",
        "--dataset",
        d,
        "--host",
        "a/b",
        &fixture("ext4-direct"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let o = ioblame(&[
        "export",
        "--dataset",
        d,
        "--label",
        "x",
        &fixture("ext4-direct"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    // A newer schema.
    std::fs::write(
        ds.join("_ioblame_dataset.json"),
        "{\"format\": \"ioblame-dataset\", \"schema_version\": 99}",
    )
    .unwrap();
    for args in [
        vec!["fleet", d],
        vec!["export", "--dataset", d, &fixture("ext4-direct")],
    ] {
        let args: Vec<&str> = args.iter().map(|s| s.as_ref()).collect();
        let o = ioblame(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("schema version 99"), "{err}");
    }
}

/// A query on one date reads only that date's partition: with every file of the other date
/// replaced by garbage, `fleet --since/--until` on the good date still answers (and without
/// the filter fails on the garbage); polars' optimized plan shows the partition filter.
#[test]
fn partition_pruning_reads_only_the_dates_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let d = ds.to_str().unwrap();
    ok(&[
        "export",
        "--dataset",
        d,
        "--host",
        "h",
        &fixture("ext4-mmap"),
        &fixture("ext4-direct"),
    ]);
    let good = |args: &[&str]| -> serde_json::Value {
        let mut a = vec!["fleet", d, "--json"];
        a.extend(args);
        serde_json::from_str(&ok(&a)).unwrap()
    };
    let before = good(&["--since", "2026-11-23", "--until", "2026-11-23"]);
    assert_eq!(before["traces"], 1);
    // The plan: the scan carries the date predicate on the hive column.
    let filter = ioblame_dataset::fleet::Filter {
        since: Some("2026-11-23".into()),
        until: Some("2026-11-23".into()),
        ..Default::default()
    };
    let pred = ioblame_dataset::fleet::partition_predicate(&ds, &filter).unwrap();
    let lf = ioblame_dataset::fleet::scan(&ds, "intents", &filter, pred.as_ref())
        .unwrap()
        .unwrap();
    let plan = lf.clone().explain(true).unwrap();
    eprintln!("{plan}");
    assert!(plan.contains("date"), "{plan}");
    assert!(!plan.contains("2026-11-22/"), "{plan}");
    // The files of the other date become garbage.
    let mut broken = 0;
    for f in parquet_files(&ds) {
        if f.contains("date=2026-11-22") {
            std::fs::write(ds.join(&f), b"not parquet").unwrap();
            broken += 1;
        }
    }
    assert_eq!(broken, ioblame_dataset::TABLES.len());
    assert_eq!(
        good(&["--since", "2026-11-23", "--until", "2026-11-23"]),
        before
    );
    let rows = lf.collect().unwrap();
    assert!(rows.height() > 0);
    // Reading that date does fail: the garbage would have been noticed.
    let o = ioblame(&["fleet", d, "--json", "--until", "2026-11-22"]);
    assert!(!o.status.success());
    let o = ioblame(&["fleet", d, "--json"]);
    assert!(!o.status.success());
}

fn has_python_module(m: &str) -> bool {
    ioblame_testkit::need::met(
        ioblame_testkit::need::python_module(m),
        format_args!("the Python module {m}"),
    )
}

fn python(script: &str, args: &[&str]) -> String {
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "python: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// The top intents as `fleet --json` gives them, in the examples' columns.
fn fleet_top_intents(ds: &str) -> Vec<serde_json::Value> {
    let f: serde_json::Value = serde_json::from_str(&ok(&["fleet", ds, "--json"])).unwrap();
    f["top_intents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let mut hosts: Vec<&str> = i["hosts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h[0].as_str().unwrap())
                .collect();
            hosts.sort();
            serde_json::json!([
                i["intent_key"],
                i["bytes"],
                i["read_bytes"],
                i["readahead_bytes"],
                i["write_bytes"],
                i["ios"],
                i["n_hosts"],
                i["n_traces"],
                hosts,
                i["frames"]
            ])
        })
        .collect()
}

/// The columns compared, in order.
const COMPARED: [&str; 10] = [
    "intent_key",
    "bytes",
    "read_bytes",
    "readahead_bytes",
    "write_bytes",
    "ios",
    "n_hosts",
    "n_traces",
    "hosts",
    "frames",
];

/// examples/duckdb/top_intents.sql on the dataset equals `fleet --json` row by row, and
/// DuckDB reads the types natively: BIGINT integers, a UTC timestamp, no unsigned column.
#[test]
fn duckdb_example_matches_fleet() {
    if !has_python_module("duckdb") {
        return;
    }
    let ds = shared().to_str().unwrap();
    let sql = root().join("examples/duckdb/top_intents.sql");
    let script = r#"
import duckdb, json, sys
ds, sql, cols = sys.argv[1], open(sys.argv[2]).read(), sys.argv[3].split(",")
con = duckdb.connect()
con.execute(f"SET VARIABLE dataset = '{ds}'")
rel = con.sql(sql)
names = rel.columns
for r in rel.fetchall():
    d = dict(zip(names, r))
    print(json.dumps({"row": [d[c] for c in cols]}))
for t in ["traces", "ios", "acts", "intents", "roles", "files", "histograms"]:
    desc = con.sql(f"DESCRIBE SELECT * FROM read_parquet('{ds}/{t}/*/*/*.parquet', hive_partitioning=true)").fetchall()
    print(json.dumps({"schema": t, "fields": {r[0]: r[1] for r in desc}}))
"#;
    let out = python(script, &[ds, sql.to_str().unwrap(), &COMPARED.join(",")]);
    let mut rows = Vec::new();
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(r) = v.get("row") {
            rows.push(r.clone());
        } else {
            check_types(&v["schema"], &v["fields"], "duckdb");
        }
    }
    let want = fleet_top_intents(ds);
    assert!(want.len() >= 5, "{want:?}");
    assert_eq!(rows.len(), want.len());
    for (i, (a, b)) in rows.iter().zip(&want).enumerate() {
        assert_eq!(a, b, "row {i}: duckdb vs fleet ({COMPARED:?})");
    }
}

/// Checks the types an engine read: integers as signed 64-bit, `capture_start` a timestamp
/// with time zone, no unsigned or decimal column.
fn check_types(table: &serde_json::Value, fields: &serde_json::Value, engine: &str) {
    let fields = fields.as_object().unwrap();
    assert!(fields.len() > 6, "{engine} {table}: {fields:?}");
    for (name, ty) in fields {
        let ty = ty.as_str().unwrap().to_lowercase();
        assert!(
            !ty.contains("decimal") && !ty.starts_with('u') && !ty.contains("int)"),
            "{engine} {table}.{name}: {ty}"
        );
        let want = match name.as_str() {
            "capture_start" => Some(if engine == "duckdb" {
                "timestamp with time zone"
            } else {
                "timestamp"
            }),
            "trace_id" | "kernel_release" | "host" => Some(if engine == "duckdb" {
                "varchar"
            } else {
                "string"
            }),
            "act" | "bytes" | "write_bytes" | "ios" | "read_ios" | "sector" | "intent_key"
            | "count" => Some("bigint"),
            "addrs" => Some(if engine == "duckdb" {
                "bigint[]"
            } else {
                "array<bigint>"
            }),
            _ => None,
        };
        if let Some(w) = want {
            assert_eq!(ty, w, "{engine} {table}.{name}");
        }
    }
}

/// examples/spark/top_intents.py on a local Spark (master local[2]) equals `fleet --json`
/// row by row; Spark reads every integer as bigint (no decimal(20,0)), `capture_start` as a
/// timestamp.
#[test]
fn spark_example_matches_fleet() {
    if !has_python_module("pyspark") {
        return;
    }
    let java = Command::new("java")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ioblame_testkit::need::met(java, "Java") {
        return;
    }
    let ds = shared().to_str().unwrap();
    let job = root().join("examples/spark/top_intents.py");
    let o = Command::new("python3")
        .arg(&job)
        .args([ds, "--master", "local[2]", "--check"])
        .env("PYSPARK_PYTHON", "python3")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "spark job failed: {err}");
    let mut rows = Vec::new();
    let mut schemas = 0;
    for line in String::from_utf8(o.stdout).unwrap().lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        if let Some(r) = v.get("top_intent") {
            rows.push(serde_json::Value::Array(
                COMPARED.iter().map(|c| r[*c].clone()).collect(),
            ));
        } else {
            check_types(&v["schema"], &v["fields"], "spark");
            schemas += 1;
        }
    }
    assert_eq!(schemas, 7);
    let want = fleet_top_intents(ds);
    assert_eq!(rows.len(), want.len(), "{rows:#?}");
    for (i, (a, b)) in rows.iter().zip(&want).enumerate() {
        assert_eq!(a, b, "row {i}: spark vs fleet ({COMPARED:?})");
    }
}
