//! Who made the IO slow, on real captures (issue 39): a victim reads a file with O_DIRECT, 4
//! KiB at a time, on a fresh ext4 loop device while an aggressor dirties 64 MiB of another
//! file, written back by the aggressor's own fsync or by another task's `sync`. `ioblame
//! blame` must charge the victim's wait behind others to the aggressor's act (via page),
//! never to the flusher or the sync task; a bystander writing on another device costs the
//! victim nothing; alone, the victim's time is its own (service and idle); with the two in
//! two cgroups, `--by cgroup` names the aggressor's. Every victim IO's own, idle and
//! culprits' times add up to its Q2C, and its idle time by cause to its idle time (`--ios`);
//! alone, the idle time is named by its requests' phases, hardly any unexplained. The synced scenario is also recorded by
//! stock `perf record` with the line `ioblame perf-command` prints (`*_perf`).
//!
//! The workload tools are renamed copies of `dd` and `sync` and a small C reader
//! (`tests/data/blame/victim.c`), so each has its own comm. Needs root, loop devices,
//! tracefs, mkfs.ext4 and gcc (and a cgroup2 hierarchy for the cgroup test); skips
//! otherwise, except in CI.

mod support;

use std::path::{Path, PathBuf};

use ioblame_testkit::cgroups::{cgroup2_mount, TestCgroup};
use serde_json::Value;
use support::{capture_on, sh, tools, LoopFs};

const TOOLS: &[&str] = &["mkfs.ext4", "dd", "sync", "gcc"];

/// A fresh ext4 loop filesystem with the victim's file (32 MiB, on disk before the capture)
/// and a directory of the workload's tools: `victimR FILE STOP SECONDS`, `aggrW` and
/// `bystanderW` (dd), `syncer` (sync).
fn setup() -> (LoopFs, PathBuf) {
    let fs = LoopFs::new("ext4", 256);
    let bin = tools(
        &fs,
        &[
            ("aggrW", "/bin/dd"),
            ("bystanderW", "/bin/dd"),
            ("syncer", "/bin/sync"),
        ],
    );
    support::build_c("blame/victim.c", &["-O2"], &bin.join("victimR"));
    // No `ext4lazyinit` zeroing the new filesystem's inode tables meanwhile: a real
    // interference (`ioblame blame` names it: its write-zeroes, via other_op), but not
    // this test's.
    sh(&format!(
        "mount -o remount,noinit_itable {m} && \
         dd if=/dev/urandom of={m}/v.dat bs=1M count=32 conv=fsync 2>/dev/null",
        m = fs.mnt.display()
    ));
    (fs, bin)
}

/// `ioblame blame ARGS --json`'s lines (or `--ios`'), expecting success.
fn blame(trace: &Path, args: &[&str]) -> Vec<Value> {
    let mut a: Vec<&std::ffi::OsStr> = vec!["blame".as_ref(), trace.as_os_str()];
    a.extend(args.iter().map(std::ffi::OsStr::new));
    let o = support::ioblame(&a);
    assert!(
        o.status.success(),
        "ioblame blame {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every victim IO of the trace: own + idle + its culprits' waits = its Q2C, and at least
/// one IO was split. Returns how many.
fn every_io_adds_up(trace: &Path) -> usize {
    let ios = blame(trace, &["--ios"]);
    assert!(!ios.is_empty());
    for io in &ios {
        let culprits: u64 = io["culprits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["wait_ns"].as_u64().unwrap())
            .sum();
        let sum = io["own_ns"].as_u64().unwrap() + io["idle_ns"].as_u64().unwrap() + culprits;
        assert_eq!(sum, io["latency_ns"].as_u64().unwrap(), "{io}");
        let idle_by: u64 = io["idle_by"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(idle_by, io["idle_ns"].as_u64().unwrap(), "{io}");
        assert_eq!(
            io["latency_ns"].as_u64().unwrap(),
            io["complete_ns"].as_u64().unwrap() - io["queue_ns"].as_u64().unwrap(),
            "{io}"
        );
    }
    ios.len()
}

/// The victim group's line and its culprits' lines of `--victim comm:victimR`.
fn victim_lines(trace: &Path, extra: &[&str]) -> (Value, Vec<Value>) {
    let mut args = vec!["--json", "--victim", "comm:victimR"];
    args.extend_from_slice(extra);
    let lines = blame(trace, &args);
    let victim = lines
        .iter()
        .find(|l| l["kind"] == "victim")
        .unwrap_or_else(|| panic!("no victim line: {lines:?}"))
        .clone();
    let culprits = lines
        .into_iter()
        .filter(|l| l["kind"] == "culprit")
        .collect();
    (victim, culprits)
}

/// The victim's wait behind other tasks went to the aggressor (at least 80% of it; the
/// journal thread's own blocks, and IO nothing links to a task, aside), its largest part to
/// the aggressor's act via page or via its journal handles (the flushes of its commits are
/// its too), some of it via page; no written-back page's or
/// buffer's wait to the task that wrote it back (a flusher, the sync task), and nothing to
/// the bystander.
fn aggressor_is_blamed(trace: &Path, reason: &str) {
    let (victim, culprits) = victim_lines(trace, &[]);
    let latency = victim["latency_ns"].as_u64().unwrap();
    let mut behind_tasks = 0;
    let mut aggressor = 0;
    let mut pages = 0;
    let mut largest: Option<&Value> = None;
    for c in &culprits {
        let wait = c["wait_ns"].as_u64().unwrap();
        let Some(comm) = c["comm"].as_str() else {
            // Flushes whose requester is not in the trace.
            continue;
        };
        assert_ne!(
            comm, "bystanderW",
            "the bystander wrote on another device: {c}"
        );
        if comm == "victimR" || comm == "<unknown>" {
            // Its own other IO (a read spanning two extents of this small filesystem's
            // 1 KiB blocks is two bios, one behind the other); IO nothing links to a task
            // (metadata dirtied before the recording).
            continue;
        }
        behind_tasks += wait;
        if largest.is_none_or(|l| l["wait_ns"].as_u64() < Some(wait)) {
            largest = Some(c);
        }
        let via = c["via"].as_str().unwrap();
        if comm == "aggrW" {
            aggressor += wait;
            if via == "page" {
                pages += wait;
                assert_eq!(
                    c["reason"].as_str(),
                    Some(reason).filter(|r| !r.is_empty()),
                    "{c}"
                );
                // perf.data names no file.
                if let Some(path) = c["path"].as_str() {
                    assert!(path.ends_with("/a.dat"), "{c}");
                }
            }
        } else if (via == "page" || via == "buffer")
            && (comm.starts_with("kworker") || comm == "syncer")
        {
            panic!("written-back data charged to the task that wrote it back: {c}");
        }
    }
    eprintln!(
        "victim: {} IOs, {latency} ns; behind other tasks {behind_tasks} ns, the aggressor {aggressor} ns, its pages {pages} ns",
        victim["ios"]
    );
    assert!(
        pages > 0,
        "the victim never waited behind the aggressor's pages: {culprits:?}"
    );
    assert!(
        aggressor * 10 >= behind_tasks * 8,
        "the aggressor has {aggressor} of {behind_tasks} ns behind other tasks: {culprits:?}"
    );
    // The largest culprit is the aggressor's: its pages, or the journal blocks of the
    // handles its writeback took (block allocation for its delayed-allocation pages, on this
    // 1 KiB-block filesystem a sizeable part). Which of the two is larger depends on when the
    // journal commits fell among the victim's reads (CI once saw the journal's 11.5 ms against
    // the pages' 8.5 ms of a recording by perf): both are the aggressor's act.
    let largest = largest.unwrap();
    assert!(
        largest["comm"] == "aggrW" && (largest["via"] == "page" || largest["via"] == "journal"),
        "the largest culprit is not the aggressor's pages or journal handles: {largest}"
    );
    // Its tail (p99) waited more behind the aggressor, in share, than all its IO did.
    let (tail, tail_culprits) = victim_lines(trace, &["--tail", "99"]);
    let share = |v: &Value, cs: &[Value]| {
        let a: u64 = cs
            .iter()
            .filter(|c| c["comm"] == "aggrW" && c["via"] == "page")
            .map(|c| c["wait_ns"].as_u64().unwrap())
            .sum();
        a as f64 / v["latency_ns"].as_u64().unwrap() as f64
    };
    let (all_share, tail_share) = (share(&victim, &culprits), share(&tail, &tail_culprits));
    eprintln!("the aggressor's share: {all_share:.3} of all, {tail_share:.3} of the tail");
    assert!(tail["ios"].as_u64().unwrap() < victim["ios"].as_u64().unwrap());
    assert!(tail_share >= all_share, "{tail_share} < {all_share}");
}

/// The aggressor's dirty pages written back by its own fsync while the victim reads; a
/// bystander writes and fsyncs on another device meanwhile.
#[test]
fn victim_waits_behind_the_dirtier_of_fsynced_pages() {
    if !support::ready(TOOLS) {
        return;
    }
    let _g = support::lock();
    let (fs, bin) = setup();
    let other = LoopFs::new("ext4", 128);
    let stop = fs.dir.path().join("stop");
    let script = format!(
        "victimR $M/v.dat {stop} 30 &
         sleep 0.3
         bystanderW if=/dev/zero of={other}/b.dat bs=1M count=32 conv=fsync 2>/dev/null &
         aggrW if=/dev/zero of=$M/a.dat bs=1M count=64 conv=fsync 2>/dev/null
         wait $!
         touch {stop}
         wait",
        stop = stop.display(),
        other = other.mnt.display()
    );
    let devices = format!("{},{}", fs.name, other.name);
    let trace = capture_on(fs.dir.path(), &bin, &fs.mnt, &devices, "t", &script, &[]);
    every_io_adds_up(&trace);
    aggressor_is_blamed(&trace, "");
    // The bystander's own IOs waited behind nothing of the victim's device.
    let lines = blame(&trace, &["--json", "--victim", "comm:bystanderW"]);
    for l in lines.iter().filter(|l| l["kind"] == "culprit") {
        assert!(
            l["comm"] != "victimR" && l["comm"] != "aggrW",
            "a culprit of another device: {l}"
        );
    }
    assert!(lines.iter().any(|l| l["kind"] == "victim"), "{lines:?}");
}

/// The synced scenario: the victim reads while the aggressor dirties 64 MiB and another
/// task's `sync` writes them back.
fn synced_script(stop: &Path) -> String {
    format!(
        "victimR $M/v.dat {stop} 30 &
         sleep 0.3
         aggrW if=/dev/zero of=$M/a.dat bs=1M count=64 2>/dev/null
         syncer
         touch {stop}
         wait",
        stop = stop.display()
    )
}

/// The aggressor's dirty pages written back by another task's `sync`: still the aggressor's.
#[test]
fn victim_waits_behind_the_dirtier_of_synced_pages() {
    if !support::ready(TOOLS) {
        return;
    }
    let _g = support::lock();
    let (fs, bin) = setup();
    let script = synced_script(&fs.dir.path().join("stop"));
    let trace = capture_on(fs.dir.path(), &bin, &fs.mnt, &fs.name, "t", &script, &[]);
    every_io_adds_up(&trace);
    aggressor_is_blamed(&trace, "sync");
    // By process: the sync task is charged only what it asked for itself (the cache flush
    // of its sync), not the pages it wrote back (which would be about all the aggressor
    // has). What the flush costs the victim varies with timing: a CI run saw 1.7 ms against
    // the aggressor's 33.8 ms (1/20 was the bound then, and failed); an eighth leaves room
    // and still tells the two apart.
    let (_, culprits) = victim_lines(&trace, &["--by", "process"]);
    let of = |comm: &str| {
        culprits
            .iter()
            .filter(|c| c["comm"] == comm)
            .map(|c| c["wait_ns"].as_u64().unwrap())
            .sum::<u64>()
    };
    let (aggressor, syncer) = (of("aggrW"), of("syncer"));
    assert!(
        syncer * 8 <= aggressor,
        "the sync task has {syncer} ns, the aggressor {aggressor}: {culprits:?}"
    );
}

/// The synced scenario recorded by stock `perf record` with the line `ioblame perf-command`
/// prints: the same answer from a perf.data file (it carries no paths: the check of the
/// aggressor's file is the capture's).
#[test]
fn victim_waits_behind_the_dirtier_of_synced_pages_perf() {
    if !support::ready(&[TOOLS, &["perf"]].concat()) {
        return;
    }
    let _g = support::lock();
    let (fs, bin) = setup();
    let script = synced_script(&fs.dir.path().join("stop"));
    let data = support::perf_record(&fs, &bin, "perf.data", &script, &[]);
    every_io_adds_up(&data);
    aggressor_is_blamed(&data, "sync");
}

/// Alone, the victim waits behind nothing: its time is its own service and idle time.
#[test]
fn victim_alone_owns_its_time() {
    if !support::ready(TOOLS) {
        return;
    }
    let _g = support::lock();
    let (fs, bin) = setup();
    let stop = fs.dir.path().join("stop");
    let script = format!("victimR $M/v.dat {} 1", stop.display());
    let trace = capture_on(fs.dir.path(), &bin, &fs.mnt, &fs.name, "t", &script, &[]);
    let n = every_io_adds_up(&trace);
    assert!(n > 100, "{n} IOs");
    let (victim, culprits) = victim_lines(&trace, &[]);
    let latency = victim["latency_ns"].as_u64().unwrap();
    let own = victim["own_ns"].as_u64().unwrap() + victim["idle_ns"].as_u64().unwrap();
    eprintln!("alone: {latency} ns, own and idle {own} ns, culprits {culprits:?}");
    // One read at a time: nothing of its own stands ahead of it either. What else may run
    // on the device (a journal commit of its access times) is allowed 2%.
    assert!(
        own * 50 >= latency * 49,
        "{own} of {latency} ns: {culprits:?}"
    );
    // Its idle time is named by its requests' phases, found in the trace: what the trace
    // cannot place (a request queued before the recording) is a few IOs' at most.
    let idle_by = victim["idle_by"].as_object().unwrap();
    let unexplained = idle_by["unexplained"].as_u64().unwrap();
    let idle = victim["idle_ns"].as_u64().unwrap();
    eprintln!("alone: idle {idle} ns: {idle_by:?}");
    assert!(idle > 0 && unexplained * 20 <= idle, "{idle_by:?}");
}

/// The victim and the aggressor in two cgroups: `--by cgroup` sums victims and culprits by
/// cgroup, and names the aggressor's.
#[test]
fn cgroups_blame_the_aggressors_cgroup() {
    if !support::ready(TOOLS) {
        return;
    }
    let Some(mount) = ioblame_testkit::need::some(cgroup2_mount(), "a cgroup2 hierarchy") else {
        return;
    };
    let _g = support::lock();
    let (fs, bin) = setup();
    let cv = TestCgroup::new(&mount, "victim");
    let ca = TestCgroup::new(&mount, "aggressor");
    let stop = fs.dir.path().join("stop");
    let script = format!(
        "sh -c 'echo $$ > \"$CGV/cgroup.procs\"; exec victimR $M/v.dat {stop} 30' &
         sleep 0.3
         sh -c 'echo $$ > \"$CGA/cgroup.procs\"; exec aggrW if=/dev/zero of=$M/a.dat bs=1M count=64 conv=fsync 2>/dev/null'
         touch {stop}
         wait",
        stop = stop.display()
    );
    let env = [
        ("CGV", cv.dir.to_str().unwrap()),
        ("CGA", ca.dir.to_str().unwrap()),
    ];
    let trace = capture_on(fs.dir.path(), &bin, &fs.mnt, &fs.name, "t", &script, &env);
    let lines = blame(&trace, &["--json", "--by", "cgroup"]);
    let victim = lines
        .iter()
        .find(|l| l["kind"] == "victim" && l["victim_cgroup"] == cv.path.as_str())
        .unwrap_or_else(|| panic!("no victim line for {}: {lines:?}", cv.path));
    let top = lines
        .iter()
        .filter(|l| {
            l["kind"] == "culprit" && l["victim_cgroup"] == cv.path.as_str() && l["via"] != "flush"
        })
        .max_by_key(|l| l["wait_ns"].as_u64().unwrap())
        .unwrap_or_else(|| panic!("no culprit of {}: {lines:?}", cv.path));
    eprintln!("victim cgroup: {victim}\ntop culprit: {top}");
    assert_eq!(top["cgroup"], ca.path.as_str(), "{lines:?}");
}

/// CI: a baseline of the victim reading alone, checked against the victim reading while
/// the aggressor's pages are fsynced: `ioblame check` fails (exit 1) with the victim's
/// group's wait behind others grown (`behind_share`), and passes the alone recording again.
#[test]
fn check_fails_when_the_wait_behind_others_grows() {
    if !support::ready(TOOLS) {
        return;
    }
    let _g = support::lock();
    let (fs, bin) = setup();
    let stop = fs.dir.path().join("stop");
    let alone = format!("victimR $M/v.dat {} 1", stop.display());
    let busy = format!(
        "victimR $M/v.dat {stop} 30 &
         aggrW if=/dev/zero of=$M/a.dat bs=1M count=64 conv=fsync 2>/dev/null
         touch {stop}
         wait",
        stop = stop.display()
    );
    let t1 = capture_on(fs.dir.path(), &bin, &fs.mnt, &fs.name, "t1", &alone, &[]);
    let t2 = capture_on(fs.dir.path(), &bin, &fs.mnt, &fs.name, "t2", &busy, &[]);
    let again = capture_on(fs.dir.path(), &bin, &fs.mnt, &fs.name, "t3", &alone, &[]);
    let base = fs.dir.path().join("base.toml");
    let run = |args: &[&std::ffi::OsStr]| support::ioblame(args);
    let o = run(&[
        "baseline".as_ref(),
        t1.as_os_str(),
        "-o".as_ref(),
        base.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&base).unwrap();
    assert!(text.contains("behind_share = "), "{text}");
    let check = |t: &Path| {
        run(&[
            "check".as_ref(),
            t.as_os_str(),
            "--baseline".as_ref(),
            base.as_os_str(),
            "--json".as_ref(),
        ])
    };
    let o = check(&t2);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    eprintln!("{report:#}");
    assert_eq!(o.status.code(), Some(1), "{report}");
    let found = report["regressions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["metric"] == "behind_share")
        .unwrap_or_else(|| panic!("no behind_share finding: {report}"));
    assert!(
        found["message"].as_str().unwrap().starts_with("victimR"),
        "{found}"
    );
    // The victim alone again: its wait behind others as before.
    let o = check(&again);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        report["regressions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["metric"] != "behind_share"),
        "{report}"
    );
}
