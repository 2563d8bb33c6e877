//! `ioblame latency` on the bundled fixtures: the golden text table, the JSON lines'
//! consistency with `acts`, device selection, perf.data input, and **btt as the oracle**:
//! the block events of each real fixture are written as a blktrace dump (`blk_io_trace`
//! records, as `blkparse -d` writes them) and every n, min, avg and max of btt's "All
//! Devices", "Per Device" and "Per Process" tables must equal ioblame's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use ioblame_decode::{Event, EventKind};
use serde_json::Value;

mod support;

mod cmd;
use cmd::{fixture, ok, root};

fn json_lines(args: &[&str]) -> Vec<Value> {
    ok(args)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

const FIXTURES: [&str; 5] = [
    "ext4-two-writers",
    "ext4-direct",
    "ext4-mmap",
    "ext4-readahead",
    "xfs-two-writers",
];

#[test]
fn golden_text_table() {
    ioblame_testkit::assert_golden!(
        "ext4-two-writers.latency.txt",
        ok(&["latency", &fixture("ext4-two-writers")])
    );
}

fn n(row: &Value, key: &str) -> u64 {
    row[key]["n"].as_u64().unwrap_or(0)
}

/// The groups agree with each other and with `acts`: every bio's Q2C is in the overall
/// row, in its device's and in its process's; the acts' IOs are the attribution's.
#[test]
fn json_groups_agree_with_each_other_and_with_acts() {
    for f in FIXTURES {
        let t = fixture(f);
        let rows = json_lines(&["latency", "--json", &t]);
        let all = &rows[0];
        assert_eq!(all["dev"], "all", "{f}");
        let group = |g: &'static str| rows.iter().filter(move |r| r["group"] == g);
        for key in ["q2c", "d2c", "q2g", "i2d", "q2m"] {
            let devs: u64 = group("device").map(|r| n(r, key)).sum();
            let procs: u64 = group("process").map(|r| n(r, key)).sum();
            assert_eq!(devs, n(all, key), "{f} {key} per device");
            assert_eq!(procs, n(all, key), "{f} {key} per process");
        }
        assert!(n(all, "q2c") > 0, "{f}: no Q2C");
        // Percentiles lie between min and max.
        for r in &rows {
            for (k, v) in r.as_object().unwrap() {
                if v.get("n").and_then(Value::as_u64).unwrap_or(0) == 0 {
                    continue;
                }
                let g = |x: &str| v[x].as_f64().unwrap();
                for p in ["p50_us", "p95_us", "p99_us", "avg_us"] {
                    assert!(
                        g("min_us") <= g(p) && g(p) <= g("max_us"),
                        "{f} {k} {p}: {v}"
                    );
                }
                assert!(g("p50_us") <= g("p95_us") && g("p95_us") <= g("p99_us"));
            }
        }
        // Per act: one Q2C per IO `acts` counts.
        let acts = json_lines(&["acts", "--json", &t]);
        let ios: u64 = acts
            .iter()
            .map(|a| {
                // read_ios counts readahead too.
                ["read_ios", "write_ios"]
                    .iter()
                    .map(|k| a[k].as_u64().unwrap())
                    .sum::<u64>()
            })
            .sum();
        let act_q2c: u64 = group("act").map(|r| n(r, "q2c")).sum();
        assert_eq!(act_q2c, ios, "{f}: per-act IOs");
        assert_eq!(group("act").map(|r| n(r, "d2c")).sum::<u64>(), ios);
    }
}

#[test]
fn device_selection_and_perf_data() {
    let t = fixture("ext4-direct");
    let rows = json_lines(&["latency", "--json", "--devs", "!loop0", &t]);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(n(&rows[0], "q2c"), 0);
    let data = root().join("crates/perfdata/tests/data/loop0-full-z.data");
    let rows = json_lines(&["latency", "--json", data.to_str().unwrap()]);
    assert!(n(&rows[0], "q2c") > 0, "{:?}", rows[0]);
    assert!(rows.iter().any(|r| r["dev"] == "7:0"));
}

// ---- btt as the oracle ----

/// The trace's events, decoded in the analyzer's order.
fn events(trace: &str) -> Vec<Event> {
    let mut notes = Vec::new();
    let t = ioblame_pipeline::open_trace(&[PathBuf::from(trace)], None, &mut notes).unwrap();
    let mut v = Vec::new();
    ioblame_pipeline::events(&t, |e| v.push(e.clone()), |_| {});
    v
}

/// A `blk_io_trace` record's fields (version 7, native byte order).
struct Rec {
    time: u64,
    sector: u64,
    bytes: u32,
    action: u32,
    pid: u32,
    dev: u32,
}

/// Appends a record and its payload.
fn record(out: &mut Vec<u8>, r: Rec, pdu: &[u8]) {
    out.extend_from_slice(&0x6561_7407u32.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&r.time.to_ne_bytes());
    out.extend_from_slice(&r.sector.to_ne_bytes());
    out.extend_from_slice(&r.bytes.to_ne_bytes());
    out.extend_from_slice(&r.action.to_ne_bytes());
    out.extend_from_slice(&r.pid.to_ne_bytes());
    out.extend_from_slice(&r.dev.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&0u16.to_ne_bytes());
    out.extend_from_slice(&(pdu.len() as u16).to_ne_bytes());
    out.extend_from_slice(pdu);
}

/// The block events as the blk tracer records them (each tracepoint's blktrace action),
/// with a process notify naming each task before its first event, as blktrace does.
fn blktrace_dump(events: &[Event], comms: &BTreeMap<u32, String>) -> Vec<u8> {
    let cat = |rwbs: ioblame_decode::Rwbs| -> u32 {
        let mut c = 0;
        if rwbs.is_read() {
            c |= 1;
        }
        if rwbs.is_write() {
            c |= 2;
        }
        c << 16
    };
    let mut out = Vec::new();
    let mut named = BTreeSet::new();
    let mut comms = comms.clone();
    for e in events {
        let (dev, sector, bytes, code, rwbs, pdu) = match &e.kind {
            EventKind::Comm { tid, comm, .. } => {
                comms.insert(*tid, comm.clone());
                continue;
            }
            EventKind::BioQueue {
                dev,
                sector,
                nr_sector,
                rwbs,
            } => (*dev, *sector, nr_sector * 512, 1, *rwbs, vec![]),
            EventKind::BioBackmerge {
                dev,
                sector,
                nr_sector,
                rwbs,
            } => (*dev, *sector, nr_sector * 512, 2, *rwbs, vec![]),
            EventKind::BioFrontmerge {
                dev,
                sector,
                nr_sector,
                rwbs,
            } => (*dev, *sector, nr_sector * 512, 3, *rwbs, vec![]),
            EventKind::RqMerge {
                dev,
                sector,
                bytes,
                rwbs,
                ..
            } => (*dev, *sector, *bytes, 2, *rwbs, vec![]),
            EventKind::GetRq {
                dev,
                sector,
                nr_sector,
                rwbs,
            } => (*dev, *sector, nr_sector * 512, 4, *rwbs, vec![]),
            EventKind::RqRequeue {
                dev,
                sector,
                nr_sector,
                rwbs,
            } => (*dev, *sector, nr_sector * 512, 6, *rwbs, vec![]),
            EventKind::RqIssue {
                dev,
                sector,
                nr_sector,
                rwbs,
                ..
            } => (*dev, *sector, nr_sector * 512, 7, *rwbs, vec![]),
            EventKind::RqComplete {
                dev,
                sector,
                nr_sector,
                rwbs,
                ..
            }
            | EventKind::BioComplete {
                dev,
                sector,
                nr_sector,
                rwbs,
                ..
            } => (*dev, *sector, nr_sector * 512, 8, *rwbs, vec![]),
            EventKind::RqInsert {
                dev,
                sector,
                nr_sector,
                rwbs,
                ..
            } => (*dev, *sector, nr_sector * 512, 12, *rwbs, vec![]),
            EventKind::BioSplit {
                dev, sector, rwbs, ..
            } => (*dev, *sector, 0, 13, *rwbs, vec![]),
            EventKind::BioRemap {
                dev,
                sector,
                nr_sector,
                old_dev,
                old_sector,
                rwbs,
            } => {
                let mut p = Vec::new();
                p.extend_from_slice(&old_dev.to_be_bytes());
                p.extend_from_slice(&dev.to_be_bytes());
                p.extend_from_slice(&old_sector.to_be_bytes());
                (*dev, *sector, nr_sector * 512, 15, *rwbs, p)
            }
            _ => continue,
        };
        if named.insert(e.tid) {
            // The kernel writes the task's comm; btt keeps it up to the first '/', and
            // names pid 0 `kernel` itself.
            let name = comms
                .get(&e.tid)
                .cloned()
                .unwrap_or_else(|| format!("pid{:09}", e.tid));
            let mut pdu = name.into_bytes();
            pdu.push(0);
            // BLK_TN_PROCESS: category notify (1 << 10), action 0.
            let notify = Rec {
                time: e.time,
                sector: 0,
                bytes: 0,
                action: (1 << 10) << 16,
                pid: e.tid,
                dev,
            };
            record(&mut out, notify, &pdu);
        }
        let rec = Rec {
            time: e.time,
            sector,
            bytes,
            action: code | cat(rwbs),
            pid: e.tid,
            dev,
        };
        record(&mut out, rec, &pdu);
    }
    out
}

/// `(section, row name, interval) -> (n, min ns, avg s, max ns)` from btt's `-A` output.
type BttTable = BTreeMap<(String, String, String), (u64, u64, f64, u64)>;

fn parse_btt(text: &str) -> BttTable {
    let mut m = BTreeMap::new();
    let (mut section, mut interval) = (String::new(), String::new());
    let ns = |s: &str| -> u64 {
        let (a, b) = s.split_once('.').unwrap();
        a.parse::<u64>().unwrap() * 1_000_000_000 + b.parse::<u64>().unwrap()
    };
    for line in text.lines() {
        if let Some(s) = line.strip_prefix("==================== ") {
            section = s.trim_end_matches(" ====================").to_owned();
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() == 5 && f[1] == "MIN" {
            interval = f[0].to_owned();
            continue;
        }
        if !matches!(
            section.as_str(),
            "All Devices" | "Per Device" | "Per Process"
        ) {
            continue;
        }
        // A row: NAME MIN AVG MAX N, NAME possibly "(  7,  0)" with spaces.
        let Some(nf) = f.last().and_then(|s| s.parse::<u64>().ok()) else {
            continue;
        };
        if f.len() < 5 || !f[f.len() - 2].contains('.') {
            continue;
        }
        let k = f.len();
        let name = f[..k - 4].join(" ");
        let (row, iv) = if section == "All Devices" {
            ("all".to_owned(), name)
        } else {
            (name, interval.clone())
        };
        m.insert(
            (section.clone(), row, iv),
            (nf, ns(f[k - 4]), f[k - 3].parse().unwrap(), ns(f[k - 2])),
        );
    }
    m
}

fn btt_available() -> bool {
    ioblame_testkit::need::met(
        Command::new("btt").arg("-V").output().is_ok(),
        "btt (the blktrace package)",
    )
}

/// ioblame's figures as btt prints them: `(section, row, interval) -> (n, min, avg, max)`.
fn ours(rows: &[Value]) -> BttTable {
    let mut m = BTreeMap::new();
    let ns = |v: &Value| (v.as_f64().unwrap() * 1000.0).round() as u64;
    for r in rows {
        let (section, row) = match r["group"].as_str().unwrap() {
            "all" => ("All Devices", "all".to_owned()),
            "device" => {
                let (ma, mi) = r["dev"].as_str().unwrap().split_once(':').unwrap();
                (
                    "Per Device",
                    // btt's "(%3d,%3d)", with its blanks squeezed as the parser reads it.
                    format!("({ma:>3},{mi:>3})")
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "),
                )
            }
            // btt prints 14 characters of the name.
            "process" => (
                "Per Process",
                r["name"].as_str().unwrap().chars().take(14).collect(),
            ),
            _ => continue,
        };
        for (k, v) in r.as_object().unwrap() {
            let Some(cnt) = v.get("n").and_then(Value::as_u64) else {
                continue;
            };
            if cnt == 0 {
                continue;
            }
            let iv = ioblame_latency::Interval::ALL
                .into_iter()
                .find(|i| i.key() == k)
                .unwrap();
            let avg = v["avg_us"].as_f64().unwrap() / 1e6;
            m.insert(
                (section.to_owned(), row.clone(), iv.name().to_owned()),
                (cnt, ns(&v["min_us"]), avg, ns(&v["max_us"])),
            );
        }
    }
    m
}

#[test]
fn every_figure_equals_btts_on_the_fixtures() {
    if !btt_available() {
        return;
    }
    for f in FIXTURES {
        let t = fixture(f);
        let dir = tempfile::tempdir().unwrap();
        let mut notes = Vec::new();
        let trace = ioblame_pipeline::open_trace(&[PathBuf::from(&t)], None, &mut notes).unwrap();
        let comms: BTreeMap<u32, String> = trace
            .metadata()
            .tasks
            .iter()
            .map(|t| (t.tid, t.comm.clone()))
            .collect();
        let dump = dir.path().join("dump.bin");
        // (btt is run on it below, in the same directory.)
        std::fs::write(&dump, blktrace_dump(&events(&t), &comms)).unwrap();
        // btt writes some files into its working directory, and with -q/-l each bio's
        // Q2C and D2C per device (`q2c_MAJ,MIN_q2c.dat`: time and latency in seconds).
        let text = btt_avg(dir.path());
        let theirs = parse_btt(&text);
        assert!(!theirs.is_empty(), "{f}: nothing parsed from btt:\n{text}");
        let rows = json_lines(&["latency", "--json", &t]);
        compare(f, &text, theirs, ours(&rows));
        percentiles_match_btts_per_io_files(f, dir.path(), &rows);
    }
}

/// Each device's p50/p95/p99 of Q2C and D2C are within the documented error of the exact
/// nearest-rank values of btt's per-bio files (which btt rounds to the microsecond).
fn percentiles_match_btts_per_io_files(f: &str, dir: &Path, rows: &[Value]) {
    for r in rows.iter().filter(|r| r["group"] == "device") {
        let dev = r["dev"].as_str().unwrap().replace(':', ",");
        for file_key in ["q2c", "d2c"] {
            let file = dir.join(format!("{file_key}_{dev}_{file_key}.dat"));
            // btt's q2c file also holds a remapper's Q2Cdm.
            let key = if file_key == "q2c" && n(r, "q2c_dm") > 0 {
                "q2c_dm"
            } else {
                file_key
            };
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let mut us: Vec<f64> = text
                .lines()
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
                .map(|s| s * 1e6)
                .collect();
            assert_eq!(
                us.len() as u64,
                n(r, key),
                "{f} {dev} {key}: {}",
                file.display()
            );
            if us.is_empty() {
                continue;
            }
            us.sort_by(f64::total_cmp);
            for (p, name) in [(50.0, "p50_us"), (95.0, "p95_us"), (99.0, "p99_us")] {
                let rank = ((p / 100.0 * us.len() as f64).ceil() as usize).max(1);
                let exact = us[rank - 1];
                let got = r[key][name].as_f64().unwrap();
                let bound = exact * ioblame_latency::MAX_RELATIVE_ERROR + 0.5 + 1e-6;
                assert!(
                    (got - exact).abs() <= bound,
                    "{f} {dev} {key} {name}: {got} vs btt's {exact}"
                );
            }
        }
    }
}

/// The blktrace fixtures (real recordings of the kernel's blk tracer): btt reads the
/// `blkparse -d` dump of their per-CPU files, ioblame the files themselves.
/// btt on the `blkparse -d` dump of the per-CPU files in `t` (every device there), ioblame
/// on the files themselves: every figure equal.
fn check_blktrace_recording(f: &str, t: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let devs: BTreeSet<String> = std::fs::read_dir(t)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.split_once(".blktrace.").map(|(d, _)| d.to_owned()))
        .collect();
    let mut bp = Command::new("blkparse");
    bp.current_dir(dir.path()).args(["-q", "-O"]);
    for d in &devs {
        bp.args(["-i", d]);
    }
    let o = bp
        .arg("-D")
        .arg(t)
        .args(["-d", "dump.bin"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "blkparse: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = btt_avg(dir.path());
    let theirs = parse_btt(&text);
    let rows = json_lines(&["latency", "--json", t.to_str().unwrap()]);
    compare(f, &text, theirs, ours(&rows));
    percentiles_match_btts_per_io_files(f, dir.path(), &rows);
}

/// The blktrace fixtures (real recordings of the kernel's blk tracer).
#[test]
fn every_figure_equals_btts_on_blktrace_recordings() {
    if !btt_available() {
        return;
    }
    for f in [
        "blktrace-buffered",
        "blktrace-direct",
        "blktrace-5.10-part",
        "blktrace-5.10-dm",
        "blktrace-6.1-part",
        "blktrace-6.1-dm",
    ] {
        check_blktrace_recording(f, Path::new(&fixture(f)));
    }
}

/// Every n, min, max (exact) and avg (to btt's nanosecond) btt prints is ioblame's, and
/// ioblame has no row btt lacks.
fn compare(f: &str, text: &str, theirs: BttTable, mine: BttTable) {
    assert!(!theirs.is_empty(), "{f}: nothing parsed from btt:\n{text}");
    // Every btt figure, and only those (M2D: btt prints it overall only; S2G: the
    // tracepoints have no sleeprq).
    let mine: BttTable = mine
        .into_iter()
        .filter(|((s, _, i), _)| s == "All Devices" || i != "M2D")
        .collect();
    let only = |a: &BttTable, b: &BttTable| {
        a.iter()
            .filter(|(k, _)| !b.contains_key(*k))
            .map(|(k, v)| format!("{k:?} {v:?}"))
            .collect::<Vec<_>>()
    };
    assert!(
        only(&mine, &theirs).is_empty() && only(&theirs, &mine).is_empty(),
        "{f}: rows only ioblame has: {:#?}\nrows only btt has: {:#?}",
        only(&mine, &theirs),
        only(&theirs, &mine)
    );
    for (k, (n, min, avg, max)) in &theirs {
        let (n2, min2, avg2, max2) = mine[k];
        assert_eq!((n2, min2, max2), (*n, *min, *max), "{f} {k:?}");
        assert!(
            (avg2 - avg).abs() <= 1.5e-9,
            "{f} {k:?}: avg {avg2} vs btt {avg}"
        );
    }
}

/// The live test: fresh recordings made here (root, loop devices, blktrace).
mod live {
    use super::*;

    /// Fresh recordings of real workloads on loop devices with the kernel's blk tracer
    /// (`fixtures/blktrace-make.sh`, which holds the machine's ftrace lock while recording):
    /// buffered writes and sync on ext4, O_DIRECT writes and reads, a partition of a loop device
    /// (remapped to its disk) and a device-mapper volume over one (both levels traced): every
    /// figure equals btt's.
    #[test]
    fn every_figure_equals_btts_on_fresh_recordings() {
        if !support::ready(&["python3", "blkparse", "btt", "mkfs.ext4"]) || !btt_available() {
            return;
        }
        let _g = support::lock();
        let d = tempfile::tempdir().unwrap();
        let o = Command::new(root().join("fixtures/blktrace-make.sh"))
            .args(["buffered", "direct", "part", "dm"])
            .env("BLKTRACE_FIXTURES_OUT", d.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut seen = Vec::new();
        for name in ["buffered", "direct", "part", "dm"] {
            let t = d.path().join(format!("blktrace-{name}/trace"));
            if !t.is_dir() {
                // blktrace-make.sh says why (no partitions or no device-mapper here).
                continue;
            }
            check_blktrace_recording(name, &t);
            seen.push(name);
        }
        // Partitions and device-mapper are skipped only where the kernel lacks them, saying so.
        let err = String::from_utf8_lossy(&o.stderr);
        eprintln!("checked against btt: {seen:?}");
        for name in ["buffered", "direct", "part", "dm"] {
            assert!(
                seen.contains(&name)
                    || (!name.starts_with('b') && name != "direct" && err.contains("skipped")),
                "{name} not recorded: {err}"
            );
        }
        if seen.contains(&"dm") {
            // The dm volume is a remapper: its bios' Q2C is Q2Cdm, with Q2Adm to the loop device.
            let rows = json_lines(&[
                "latency",
                "--json",
                d.path().join("blktrace-dm/trace").to_str().unwrap(),
            ]);
            assert!(
                n(&rows[0], "q2c_dm") > 0 && n(&rows[0], "q2a_dm") > 0,
                "{:?}",
                rows[0]
            );
        }
    }
}

/// A synthetic workload on a device-mapper volume (253:0) over a disk (8:16), with merges,
/// requeues, remaps and two processes, written as a blktrace dump: btt and ioblame read the
/// same file (this kernel may have no device mapper to record one on).
#[test]
fn every_figure_equals_btts_on_a_remapped_dm_volume() {
    if !btt_available() {
        return;
    }
    const DM: u32 = 253 << 20;
    const DISK: u32 = (8 << 20) | 16;
    let rwbs = ioblame_decode::Rwbs::parse("W");
    let mut evs = Vec::new();
    let mut push = |time: u64, tid: u32, kind: EventKind| evs.push(Event::of_task(time, tid, kind));
    let mut t = 1_000_000u64;
    let mut seed = 42u64;
    let mut next = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    for i in 0..200u64 {
        let tid = 100 + (i % 2) as u32;
        let s = i * 64;
        let n = 8 + 8 * next(4) as u32;
        let ds = s + 2048;
        let q = |dev, sector| EventKind::BioQueue {
            dev,
            sector,
            nr_sector: n,
            rwbs,
        };
        push(t, tid, q(DM, s));
        t += 1 + next(500);
        push(
            t,
            tid,
            EventKind::BioRemap {
                dev: DISK,
                sector: ds,
                nr_sector: n,
                old_dev: DM,
                old_sector: s,
                rwbs,
            },
        );
        t += 1 + next(500);
        push(t, tid, q(DISK, ds));
        t += 1 + next(500);
        let merged = i % 5 == 1;
        if merged {
            // Merged into the request of the previous bio, which is issued with it.
            push(
                t,
                tid,
                EventKind::BioBackmerge {
                    dev: DISK,
                    sector: ds,
                    nr_sector: n,
                    rwbs,
                },
            );
            continue;
        }
        push(
            t,
            tid,
            EventKind::GetRq {
                dev: DISK,
                sector: ds,
                nr_sector: n,
                rwbs,
            },
        );
        t += 1 + next(500);
        push(
            t,
            tid,
            EventKind::RqInsert {
                dev: DISK,
                sector: ds,
                nr_sector: n,
                bytes: n * 512,
                rwbs,
            },
        );
        t += 1 + next(500);
        // The request holds this bio and, if the next one merges, that one too.
        let len = if i % 5 == 0 { 64 + 64 } else { 64 };
        let issue = |t| {
            (
                t,
                EventKind::RqIssue {
                    dev: DISK,
                    sector: ds,
                    nr_sector: len as u32,
                    bytes: len as u32 * 512,
                    rwbs,
                },
            )
        };
        if i % 5 == 0 {
            // Issued after the next bio merges: done below, at the next bio.
            let _ = issue;
        }
        if i % 7 == 3 {
            let (it, k) = issue(t);
            push(it, 0, k);
            t += 1 + next(500);
            push(
                t,
                0,
                EventKind::RqRequeue {
                    dev: DISK,
                    sector: ds,
                    nr_sector: len as u32,
                    rwbs,
                },
            );
            t += 1 + next(500);
        }
        if i % 5 != 0 {
            let (it, k) = issue(t);
            push(it, 0, k);
            t += 100 + next(5000);
            push(
                t,
                0,
                EventKind::RqComplete {
                    dev: DISK,
                    sector: ds,
                    nr_sector: len as u32,
                    error: 0,
                    rwbs,
                },
            );
            t += 1 + next(500);
        }
    }
    // The requests of bios 0, 5, 10, ... (each with its merged successor): issued and
    // completed at the end, then every dm bio completes.
    for i in (0..200u64).step_by(5) {
        let ds = i * 64 + 2048;
        push(
            t,
            0,
            EventKind::RqIssue {
                dev: DISK,
                sector: ds,
                nr_sector: 128,
                bytes: 128 * 512,
                rwbs,
            },
        );
        t += 100 + next(5000);
        push(
            t,
            0,
            EventKind::RqComplete {
                dev: DISK,
                sector: ds,
                nr_sector: 128,
                error: 0,
                rwbs,
            },
        );
    }
    for i in 0..200u64 {
        t += 1 + next(300);
        push(
            t,
            0,
            EventKind::BioComplete {
                dev: DM,
                sector: i * 64,
                nr_sector: 64,
                error: 0,
                rwbs,
            },
        );
    }
    let comms: BTreeMap<u32, String> =
        [(100, "writer".to_string()), (101, "other".to_string())].into();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dump.bin"), blktrace_dump(&evs, &comms)).unwrap();
    let text = btt_avg(dir.path());
    let rows = json_lines(&[
        "latency",
        "--json",
        dir.path().join("dump.bin").to_str().unwrap(),
    ]);
    let mine = ours(&rows);
    for k in ["Q2Adm", "Q2Cdm", "Q2M", "M2D", "I2D", "Q2C", "D2C"] {
        assert!(
            mine.contains_key(&("All Devices".into(), "all".into(), k.into())),
            "no {k} in {rows:?}"
        );
    }
    compare("dm", &text, parse_btt(&text), mine);
    percentiles_match_btts_per_io_files("dm", dir.path(), &rows);
}

/// Runs `btt -A` on `DIR/dump.bin` in `dir`, with each bio's Q2C and D2C per device in
/// `q2c_*`/`d2c_*` files (`-q`, `-l`); returns its averages file, `btt.avg`.
fn btt_avg(dir: &Path) -> String {
    let o = Command::new("btt")
        .current_dir(dir)
        .args([
            "-A", "-i", "dump.bin", "-o", "btt", "-q", "q2c", "-l", "d2c",
        ])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "btt: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read_to_string(dir.join("btt.avg")).unwrap()
}

/// Process names come from the recording (blktrace's process notifies): the text output
/// escapes them as every text output does, so a hostile comm cannot move the terminal.
#[test]
fn process_names_are_escaped_in_the_text() {
    let t = fixture(FIXTURES[0]);
    let evs = events(&t);
    let comms: BTreeMap<u32, String> = evs
        .iter()
        .map(|e| (e.tid, format!("kw\x1b[31mRED{}\n", e.tid)))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("dump.bin");
    std::fs::write(&dump, blktrace_dump(&evs, &comms)).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_ioblame"))
        .args(["latency", dump.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("== process kw\\x1b[31mRED"), "{text}");
    assert!(
        !text.contains('\x1b') && !text.contains("RED\n"),
        "{text:?}"
    );
}
