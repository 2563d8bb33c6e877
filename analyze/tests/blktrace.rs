//! blktrace input end to end: the committed fixtures (real recordings made with the kernel's
//! `blk` tracer, `fixtures/blktrace-make.sh`), their blkparse text and `blkparse -d` dumps,
//! a stacked device made of records, and a fresh recording (root, loop devices, tracefs,
//! blkparse: skipped without them, except in CI).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod support;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixture(name: &str) -> PathBuf {
    root().join("fixtures").join(name)
}

fn ioblame(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ioblame"))
        .args(args)
        .output()
        .unwrap()
}

/// `acts --json` of `input` (with `extra` arguments): one object per act, and stderr.
fn acts(input: &Path, extra: &[&str]) -> (Vec<Value>, String) {
    let mut args = vec!["acts", "--json"];
    args.extend_from_slice(extra);
    let p = input.to_str().unwrap();
    args.push(p);
    let o = ioblame(&args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{args:?}: {err}");
    let v = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (v, err)
}

/// (comm, via) -> [read, readahead, write] bytes.
fn bytes_by_issuer(acts: &[Value]) -> std::collections::BTreeMap<(String, String), [u64; 3]> {
    let mut m = std::collections::BTreeMap::new();
    for a in acts {
        let e: &mut [u64; 3] = m
            .entry((
                a["comm"].as_str().unwrap().to_string(),
                a["via"].as_str().unwrap().to_string(),
            ))
            .or_default();
        e[0] += a["read_bytes"].as_u64().unwrap();
        e[1] += a["readahead_bytes"].as_u64().unwrap();
        e[2] += a["write_bytes"].as_u64().unwrap();
    }
    m
}

/// The same acts, told apart by what they are (not by their numbers, which follow the
/// order of first use).
fn act_keys(acts: &[Value]) -> Vec<String> {
    let mut v: Vec<String> = acts
        .iter()
        .map(|a| {
            format!(
                "{} {} {} {:#x} {} {} {} {} {} {}",
                a["pid"],
                a["comm"],
                a["dev"],
                a["modifier"].as_u64().unwrap(),
                a["via"],
                a["read_bytes"],
                a["readahead_bytes"],
                a["write_bytes"],
                a["read_ios"],
                a["write_ios"]
            )
        })
        .collect();
    v.sort();
    v
}

/// O_DIRECT: 1 MiB written by `dwriter`, 512 KiB read by `dreader`, charged to them.
#[test]
fn direct_io_is_charged_to_its_issuers() {
    let (a, err) = acts(&fixture("blktrace-direct/trace"), &[]);
    let m = bytes_by_issuer(&a);
    assert_eq!(
        m.into_iter().collect::<Vec<_>>(),
        vec![
            (("dreader".into(), "read".into()), [512 << 10, 0, 0]),
            (("dwriter".into(), "issuer".into()), [0, 0, 1 << 20]),
        ]
    );
    assert_eq!(
        a[0]["modifier"].as_u64(),
        Some(0x2000_0000 | 0x201),
        "no stack (blktrace) with the flags WS"
    );
    // Said once: blktrace cannot see who dirtied pages.
    assert_eq!(err.matches("cannot see who dirtied").count(), 1, "{err}");
    assert!(
        err.contains("here 0 of 1048576 bytes written (0.0%)"),
        "{err}"
    );
    assert!(err.contains("ioblame-capture record"), "{err}");
}

/// Buffered writes then sync: the writer queues nothing, the flusher writes its 4 MiB, and
/// the note gives the flusher's share.
#[test]
fn buffered_writes_are_charged_to_the_flusher_and_said_so() {
    let (a, err) = acts(&fixture("blktrace-buffered/trace"), &[]);
    let m = bytes_by_issuer(&a);
    let written: u64 = m.values().map(|b| b[2]).sum();
    let by = |f: &dyn Fn(&str) -> bool| -> u64 {
        m.iter().filter(|((c, _), _)| f(c)).map(|(_, b)| b[2]).sum()
    };
    assert_eq!(by(&|c| c == "bwriter"), 0, "{m:?}");
    let flushers = by(&|c| ioblame_pipeline::is_flusher(c));
    assert!(flushers >= 4 << 20, "{m:?}");
    assert!(
        err.contains(&format!("here {flushers} of {written} bytes written")),
        "{err}"
    );
    // The report's page says it too, once, in its notes.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("rep");
    let trace = fixture("blktrace-buffered/trace");
    let o = ioblame(&[
        "report",
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let said = format!("here {flushers} of {written} bytes written");
    assert_eq!(html.matches(&said).count(), 1, "the page's notes");
    assert!(html.contains("id=notes") || html.contains("id=\"notes\""));
}

/// The blkparse text printed from the same files gives the same acts.
#[test]
fn blkparse_text_gives_the_same_acts_as_the_binary() {
    for (name, dev) in [("blktrace-direct", "loop0"), ("blktrace-buffered", "loop2")] {
        let (bin, _) = acts(&fixture(name).join("trace"), &[]);
        let (txt, err) = acts(&fixture(name).join(format!("{dev}.blkparse.txt")), &[]);
        assert_eq!(act_keys(&bin), act_keys(&txt), "{name}");
        assert!(!err.contains("not blkparse actions"), "{err}");
    }
}

/// blkparse and btt are required in CI; elsewhere a test without them says it skips.
fn has_blkparse() -> bool {
    let ok = ["blkparse", "btt"].iter().all(|t| {
        Command::new(t)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success() || !o.stdout.is_empty() || !o.stderr.is_empty())
    });
    ioblame_testkit::need::met(ok, "blkparse and btt (the blktrace package)")
}

/// A `blkparse -d` dump of the per-CPU files gives the same acts, and the reference tools
/// read the fixtures.
#[test]
fn blkparse_dumps_give_the_same_acts_and_the_reference_tools_read_the_fixtures() {
    if !has_blkparse() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    for (name, dev) in [("blktrace-direct", "loop0"), ("blktrace-buffered", "loop2")] {
        let dump = d.path().join(format!("{name}.dump"));
        let o = Command::new("blkparse")
            .args(["-i", dev, "-D"])
            .arg(fixture(name).join("trace"))
            .arg("-d")
            .arg(&dump)
            .args(["-o", "/dev/null"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let (bin, _) = acts(&fixture(name).join("trace"), &[]);
        let (dumped, _) = acts(&dump, &[]);
        assert_eq!(act_keys(&bin), act_keys(&dumped), "{name}");
        // In the temporary directory: btt writes its per-device IOPS/MB/s files into the
        // current directory.
        let o = Command::new("btt")
            .current_dir(d.path())
            .arg("-i")
            .arg(&dump)
            .args(["-o", d.path().join("btt").to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "btt: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// A stacked device: an IO queued on dm-0 by `dd`, remapped to loop0 and queued there by a
/// kworker, is one IO charged once to `dd`, on the level `--devs` selects (the lowest by
/// default).
#[test]
fn a_remapped_io_is_counted_once() {
    use ioblame_blktrace::record::{cat, encode, Order};
    use ioblame_blktrace::{Action, Payload, Record};
    const LOOP0: u32 = 7 << 20;
    const DM0: u32 = 253 << 20;
    let r = |time, pid, action, dev, sector, payload| Record {
        time,
        sequence: 0,
        cpu: 0,
        pid,
        action,
        categories: cat::WRITE | cat::SYNC,
        device: dev,
        sector,
        bytes: 65536,
        error: 0,
        cgroup: None,
        payload,
        version: 7,
    };
    let note = |pid, comm: &str| Record {
        categories: cat::NOTIFY,
        payload: Payload::Process { comm: comm.into() },
        ..r(1, pid, Action::Process, LOOP0, 0, Payload::None)
    };
    let remap = Payload::Remap {
        from: DM0,
        to: LOOP0,
        sector_from: 2048,
    };
    let dm = [
        note(100, "dd"),
        r(10, 100, Action::Queue, DM0, 2048, Payload::None),
        r(90, 0, Action::Complete, DM0, 2048, Payload::None),
    ];
    let lower = [
        note(50, "kworker/1:1"),
        r(11, 100, Action::Remap, LOOP0, 4096, remap),
        r(12, 50, Action::Queue, LOOP0, 4096, Payload::None),
        r(13, 50, Action::GetRq, LOOP0, 4096, Payload::None),
        r(14, 50, Action::Issue, LOOP0, 4096, Payload::None),
        r(80, 0, Action::Complete, LOOP0, 4096, Payload::None),
    ];
    let d = tempfile::tempdir().unwrap();
    for (name, rs) in [
        ("dm-0.blktrace.0", &dm[..]),
        ("loop0.blktrace.0", &lower[..]),
    ] {
        let mut b = Vec::new();
        for x in rs {
            encode(x, Order::Little, &mut b);
        }
        std::fs::write(d.path().join(name), b).unwrap();
    }
    // (comm, bytes written) of the acts with writes.
    let sum = |a: &[Value]| -> Vec<(String, u64)> {
        a.iter()
            .map(|a| {
                (
                    a["comm"].as_str().unwrap().to_string(),
                    a["write_bytes"].as_u64().unwrap(),
                )
            })
            .filter(|x| x.1 > 0)
            .collect()
    };
    // By default the lowest level: loop0's request, charged to dd (whose bio it was).
    let (a, _) = acts(d.path(), &[]);
    assert_eq!(sum(&a), vec![("dd".into(), 65536)]);
    let (a, _) = acts(d.path(), &["--devs", "loop0"]);
    assert_eq!(sum(&a), vec![("dd".into(), 65536)]);
    // The dm level alone: the bio's completion on dm-0.
    let (a, _) = acts(d.path(), &["--devs", "dm-0"]);
    assert_eq!(sum(&a), vec![("dd".into(), 65536)]);
    // Both levels selected: the same bytes twice, as asked.
    let (a, _) = acts(d.path(), &["--devs", "dm-0 loop0"]);
    assert_eq!(sum(&a), vec![("dd".into(), 131072)]);
}

/// The live test: a recording made here with the kernel's blk tracer (root, loop devices).
mod live {
    use super::*;

    /// A fresh recording with the kernel's blk tracer, made as the fixtures are: the bytes each
    /// task wrote and read come back charged to it.
    #[test]
    fn a_fresh_recording_charges_what_each_task_did() {
        if !support::ready(&["python3", "blkparse"]) {
            return;
        }
        let _g = support::lock();
        let d = tempfile::tempdir().unwrap();
        let o = Command::new(root().join("fixtures/blktrace-make.sh"))
            .arg("direct")
            .env("BLKTRACE_FIXTURES_OUT", d.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let dir = d.path().join("blktrace-direct");
        let (a, _) = acts(&dir.join("trace"), &[]);
        let m = bytes_by_issuer(&a);
        assert_eq!(
            m[&("dwriter".to_string(), "issuer".to_string())],
            [0, 0, 1 << 20]
        );
        assert_eq!(
            m[&("dreader".to_string(), "read".to_string())],
            [512 << 10, 0, 0]
        );
        // Its blkparse text agrees.
        let txt = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".blkparse.txt"))
            .unwrap();
        let (t, _) = acts(&txt, &[]);
        assert_eq!(act_keys(&a), act_keys(&t));
    }
}

/// `check` refuses a damaged recording (exit 2, the damage named) instead of comparing the IO
/// it lost as if the workload had not done it; the intact one passes its baseline.
#[test]
fn check_refuses_a_damaged_recording() {
    let base = fixture("blktrace-direct/baseline.toml");
    let good = fixture("blktrace-direct/trace");
    let o = ioblame(&[
        "check",
        good.to_str().unwrap(),
        "--baseline",
        base.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The same files, the last one cut inside a record.
    let tmp = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&good)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".blktrace."))
        .collect();
    files.sort();
    for f in &files {
        std::fs::copy(f, tmp.path().join(f.file_name().unwrap())).unwrap();
    }
    let last = tmp.path().join(files.last().unwrap().file_name().unwrap());
    let len = std::fs::metadata(&last).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(len - 20)
        .unwrap();
    let o = ioblame(&[
        "check",
        tmp.path().to_str().unwrap(),
        "--baseline",
        base.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("damaged or truncated"), "{err}");
}

/// Real blktrace recordings of a partition and of a dm-linear volume, made with `blktrace`
/// in kernel-lab guests of Linux 5.10 and 6.1 (`scripts/kernel-lab/scenarios/
/// blktrace-layers.sh`; each fixture's README gives the workload and the answers): the
/// fixture and the devices traced.
const LAYERS: [(&str, &[&str]); 4] = [
    ("blktrace-5.10-part", &["loop0"]),
    ("blktrace-5.10-dm", &["dm-0", "loop1"]),
    ("blktrace-6.1-part", &["loop0"]),
    ("blktrace-6.1-dm", &["dm-0", "loop1"]),
];

/// The bytes and IOs completed on device `dev` of `trace`, as `acts --devs DEV` counts them:
/// `[read bytes, read IOs, write bytes, write IOs]`.
fn device_totals(trace: &Path, dev: &str) -> [u64; 4] {
    let (a, _) = acts(trace, &["--devs", dev]);
    let sum = |k: &str| a.iter().map(|x| x[k].as_u64().unwrap()).sum::<u64>();
    [
        sum("read_bytes"),
        sum("read_ios"),
        sum("write_bytes"),
        sum("write_ios"),
    ]
}

/// blkparse's `Total (DEV)` summary: `[read bytes, reads, write bytes, writes]` completed.
fn blkparse_totals(text: &str, dev: &str) -> [u64; 4] {
    let total = text
        .split(&format!("Total ({dev}):"))
        .nth(1)
        .unwrap_or_else(|| panic!("no Total ({dev}) in the blkparse text"));
    let field = |name: &str| -> (u64, u64) {
        let rest = &total[total.find(name).unwrap() + name.len()..];
        let mut it = rest.split_whitespace();
        let n = it.next().unwrap().trim_end_matches(',').parse().unwrap();
        let kib: u64 = it.next().unwrap().trim_end_matches("KiB").parse().unwrap();
        (n, kib << 10)
    };
    let (r, rb) = field("Reads Completed:");
    let (w, wb) = field("Writes Completed:");
    [rb, r, wb, w]
}

/// Each recording holds the workload once per level: bwA (1 MiB) and bwB (512 KiB) of
/// buffered writes then sync, dwriter's 256 KiB of O_DIRECT writes and dreader's 256 KiB of
/// O_DIRECT reads. blktrace has no dirtier: the direct IO is its issuers', the buffered
/// writes are whoever issued them (the writers themselves at close on the partition, sync
/// and the flusher on dm), and every byte is counted once on the level `--devs` selects (by
/// default the lowest). A partition is known from its remaps: the acts name it, `info`
/// gives its start, and its IO is counted on its disk.
#[test]
fn partitions_and_dm_recorded_by_blktrace_count_each_io_once() {
    for (name, devs) in LAYERS {
        let trace = fixture(name).join("trace");
        let (a, _) = acts(&trace, &[]);
        let m = bytes_by_issuer(&a);
        let get = |comm: &str, via: &str| m.get(&(comm.to_string(), via.to_string())).copied();
        assert_eq!(
            get("dwriter", "issuer"),
            Some([0, 0, 256 << 10]),
            "{name}: {m:?}"
        );
        assert_eq!(
            get("dreader", "read"),
            Some([256 << 10, 0, 0]),
            "{name}: {m:?}"
        );
        let written: u64 = m.values().map(|b| b[2]).sum();
        let read: u64 = m.values().map(|b| b[0] + b[1]).sum();
        assert_eq!((written, read), (1792 << 10, 256 << 10), "{name}: {m:?}");
        let buffered: u64 = ["bwA", "bwB", "bsync"]
            .iter()
            .filter_map(|c| get(c, "issuer"))
            .map(|b| b[2])
            .sum::<u64>()
            + m.iter()
                .filter(|((c, _), _)| ioblame_pipeline::is_flusher(c))
                .map(|(_, b)| b[2])
                .sum::<u64>();
        assert_eq!(buffered, 1536 << 10, "{name}: {m:?}");
        // Each level alone holds every byte; the default is the lowest.
        for dev in devs {
            let t = device_totals(&trace, dev);
            assert_eq!((t[0], t[2]), (256 << 10, 1792 << 10), "{name} {dev}");
        }
        let lowest = devs.last().unwrap();
        assert_eq!(
            act_keys(&a),
            act_keys(&acts(&trace, &["--devs", lowest]).0),
            "{name}"
        );
        if name.ends_with("-part") {
            // The acts are the partition's (259:0, loop0p1), the IO its disk's.
            assert!(a.iter().all(|x| x["dev"] == "259:0"), "{name}: {a:?}");
            let (none, _) = acts(&trace, &["--devs", "259:0"]);
            assert!(none.is_empty(), "{name}");
            let o = ioblame(&["info", trace.to_str().unwrap()]);
            let info = String::from_utf8_lossy(&o.stdout);
            assert!(
                info.contains("partition of 7:0 at sector 2048"),
                "{name}: {info}"
            );
        } else {
            assert!(a.iter().all(|x| x["dev"] == "254:0"), "{name}: {a:?}");
        }
    }
}

/// blkparse as the oracle: the reads and writes completed on each device, in IOs and bytes,
/// are those of blkparse's summary (the committed text, and a fresh `blkparse` of the files
/// where it is installed); a partition's recording read from its blkparse text gives the
/// acts its binary files give.
#[test]
fn partitions_and_dm_recorded_by_blktrace_agree_with_blkparse() {
    let fresh = has_blkparse();
    for (name, devs) in LAYERS {
        let trace = fixture(name).join("trace");
        for dev in devs {
            let text =
                std::fs::read_to_string(fixture(name).join(format!("{dev}.blkparse.txt"))).unwrap();
            let ours = device_totals(&trace, dev);
            assert_eq!(ours, blkparse_totals(&text, dev), "{name} {dev}");
            if fresh {
                let o = Command::new("blkparse")
                    .args(["-i", dev, "-D"])
                    .arg(&trace)
                    .args(["-o", "/dev/stdout"])
                    .output()
                    .unwrap();
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                let now = String::from_utf8_lossy(&o.stdout);
                assert_eq!(
                    ours,
                    blkparse_totals(&now, dev),
                    "{name} {dev}: fresh blkparse"
                );
            }
        }
        if devs.len() == 1 {
            let txt = fixture(name).join(format!("{}.blkparse.txt", devs[0]));
            assert_eq!(
                act_keys(&acts(&trace, &[]).0),
                act_keys(&acts(&txt, &[]).0),
                "{name}"
            );
        }
    }
}
