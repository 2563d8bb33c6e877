//! The engine on synthetic event sequences, one per rule of btt's it follows.

use ioblame_events::event::{Dev, Event, EventKind, Rwbs};

use crate::{Breakdown, Engine, Interval, Latency};

const DISK: Dev = 7 << 20; // 7:0
const DISK2: Dev = (8 << 20) | 16; // 8:16
const DM: Dev = 253 << 20; // 253:0

fn ev(time: u64, tid: u32, kind: EventKind) -> Event {
    Event::of_task(time, tid, kind)
}

fn w() -> Rwbs {
    Rwbs::parse("W")
}

fn q(t: u64, tid: u32, dev: Dev, sector: u64, n: u32) -> Event {
    ev(
        t,
        tid,
        EventKind::BioQueue {
            dev,
            sector,
            nr_sector: n,
            rwbs: w(),
        },
    )
}
fn g(t: u64, dev: Dev, sector: u64, n: u32) -> Event {
    ev(
        t,
        1,
        EventKind::GetRq {
            dev,
            sector,
            nr_sector: n,
            rwbs: w(),
        },
    )
}
fn i(t: u64, dev: Dev, sector: u64, n: u32) -> Event {
    ev(
        t,
        1,
        EventKind::RqInsert {
            dev,
            sector,
            nr_sector: n,
            bytes: n * 512,
            rwbs: w(),
        },
    )
}
fn m(t: u64, dev: Dev, sector: u64, n: u32) -> Event {
    ev(
        t,
        1,
        EventKind::BioBackmerge {
            dev,
            sector,
            nr_sector: n,
            rwbs: w(),
        },
    )
}
fn d(t: u64, dev: Dev, sector: u64, n: u32) -> Event {
    ev(
        t,
        1,
        EventKind::RqIssue {
            dev,
            sector,
            nr_sector: n,
            bytes: n * 512,
            rwbs: w(),
        },
    )
}
fn c(t: u64, dev: Dev, sector: u64, n: u32) -> Event {
    ev(
        t,
        0,
        EventKind::RqComplete {
            dev,
            sector,
            nr_sector: n,
            error: 0,
            rwbs: w(),
        },
    )
}
fn r(t: u64, dev: Dev, sector: u64, n: u32) -> Event {
    ev(
        t,
        0,
        EventKind::RqRequeue {
            dev,
            sector,
            nr_sector: n,
            rwbs: w(),
        },
    )
}
fn comm(t: u64, tid: u32, name: &str) -> Event {
    ev(
        t,
        tid,
        EventKind::Comm {
            pid: tid,
            tid,
            comm: name.into(),
            exec: false,
        },
    )
}

fn run(events: &[Event]) -> Latency {
    let mut e = Engine::default();
    events.iter().for_each(|x| e.push(x));
    e.finish()
}

/// (n, min, max, sum) of an interval.
fn nmms(b: &Breakdown, iv: Interval) -> (u64, u64, u64, u128) {
    let s = b.get(iv);
    (s.n, s.min, s.max, s.sum)
}

fn dev_of(l: &Latency, dev: Dev) -> &Breakdown {
    &l.devices.iter().find(|(d, _)| *d == dev).unwrap().1
}

#[test]
fn one_bio_through_every_step() {
    let l = run(&[
        q(1000, 10, DISK, 100, 8),
        g(1100, DISK, 100, 8),
        i(1300, DISK, 100, 8),
        d(1700, DISK, 100, 8),
        c(2700, DISK, 100, 8),
    ]);
    for b in [&l.all, dev_of(&l, DISK), &l.processes[0].1] {
        assert_eq!(nmms(b, Interval::Q2G), (1, 100, 100, 100));
        assert_eq!(nmms(b, Interval::G2I), (1, 200, 200, 200));
        assert_eq!(nmms(b, Interval::I2D), (1, 400, 400, 400));
        assert_eq!(nmms(b, Interval::D2C), (1, 1000, 1000, 1000));
        assert_eq!(nmms(b, Interval::Q2C), (1, 1700, 1700, 1700));
        assert_eq!(b.get(Interval::Q2M).n, 0);
        assert_eq!(b.get(Interval::Q2Q).n, 0, "one Q: no Q2Q");
    }
    assert_eq!(l.processes[0].0, "pid000000010");
    assert_eq!(l.stats.pending_at_end, 0);
}

/// A bio merged into a request completes with it: Q2C and D2C per bio, Q2M and M2D for
/// the merged one, I2D for the request's first.
#[test]
fn merged_bio_completes_with_its_request() {
    let l = run(&[
        q(1000, 10, DISK, 0, 8),
        g(1010, DISK, 0, 8),
        i(1020, DISK, 0, 8),
        q(1100, 11, DISK, 8, 8),
        m(1130, DISK, 8, 8),
        d(1500, DISK, 0, 16),
        c(3000, DISK, 0, 16),
    ]);
    let a = &l.all;
    assert_eq!(nmms(a, Interval::Q2Q), (1, 100, 100, 100));
    assert_eq!(nmms(a, Interval::Q2M), (1, 30, 30, 30));
    assert_eq!(nmms(a, Interval::M2D), (1, 370, 370, 370));
    assert_eq!(nmms(a, Interval::I2D), (1, 480, 480, 480));
    assert_eq!(nmms(a, Interval::Q2C), (2, 1900, 2000, 3900));
    assert_eq!(nmms(a, Interval::D2C), (2, 1500, 1500, 3000));
    // Each process has its own bio.
    assert_eq!(l.processes.len(), 2);
    assert_eq!(l.processes[1].1.get(Interval::Q2M).n, 1);
}

/// A requeued request issued again: btt counts I2D at each issue, and D2C from the last.
#[test]
fn requeue_counts_the_reissue() {
    let l = run(&[
        q(1000, 10, DISK, 0, 8),
        g(1010, DISK, 0, 8),
        i(1020, DISK, 0, 8),
        d(1100, DISK, 0, 8),
        r(1200, DISK, 0, 8),
        d(1500, DISK, 0, 8),
        c(1600, DISK, 0, 8),
    ]);
    assert_eq!(nmms(&l.all, Interval::I2D), (2, 80, 480, 560));
    assert_eq!(nmms(&l.all, Interval::D2C), (1, 100, 100, 100));
    assert_eq!(nmms(&l.all, Interval::Q2C), (1, 600, 600, 600));
    assert_eq!(l.stats.requeues, 1);
}

/// A bio queued on a device-mapper device and remapped to a disk: Q2Adm on the dm device,
/// its own Q2Cdm when the dm bio completes, and the disk's bio on its own.
#[test]
fn remap_from_a_dm_device() {
    let remap = ev(
        1050,
        10,
        EventKind::BioRemap {
            dev: DISK,
            sector: 2048,
            nr_sector: 8,
            old_dev: DM,
            old_sector: 0,
            rwbs: w(),
        },
    );
    let bio_done = ev(
        2000,
        0,
        EventKind::BioComplete {
            dev: DM,
            sector: 0,
            nr_sector: 8,
            error: 0,
            rwbs: w(),
        },
    );
    let l = run(&[
        q(1000, 10, DM, 0, 8),
        remap,
        q(1060, 10, DISK, 2048, 8),
        g(1070, DISK, 2048, 8),
        d(1100, DISK, 2048, 8),
        c(1900, DISK, 2048, 8),
        bio_done,
    ]);
    let dm = dev_of(&l, DM);
    assert_eq!(nmms(dm, Interval::Q2Adm), (1, 50, 50, 50));
    assert_eq!(nmms(dm, Interval::Q2Cdm), (1, 1000, 1000, 1000));
    assert_eq!(dm.get(Interval::Q2C).n, 0);
    let disk = dev_of(&l, DISK);
    assert_eq!(nmms(disk, Interval::Q2C), (1, 840, 840, 840));
    assert_eq!(nmms(disk, Interval::D2C), (1, 800, 800, 800));
    // Overall: Q2C only of non-remapper devices, Q2Cdm apart; Q2Q over every Q.
    assert_eq!(nmms(&l.all, Interval::Q2C), (1, 840, 840, 840));
    assert_eq!(nmms(&l.all, Interval::Q2Cdm), (1, 1000, 1000, 1000));
    assert_eq!(nmms(&l.all, Interval::Q2Q), (1, 60, 60, 60));
}

/// Events before a device's first Q are ignored (btt's pre-culling); D and C without Q
/// count nothing.
#[test]
fn missing_q_and_pre_culling() {
    let l = run(&[
        d(900, DISK, 0, 8),
        c(950, DISK, 0, 8),
        q(1000, 10, DISK, 64, 8),
        d(1100, DISK, 500, 8),
        c(1200, DISK, 500, 8),
        d(1300, DISK, 64, 8),
        c(1400, DISK, 64, 8),
    ]);
    assert_eq!(l.stats.culled, 2);
    assert_eq!(l.stats.unmatched_dc, 2);
    assert_eq!(nmms(&l.all, Interval::Q2C), (1, 400, 400, 400));
    assert_eq!(l.all.get(Interval::I2D).n + l.all.get(Interval::M2D).n, 0);
}

/// A bio split into two requests: neither request holds the whole bio, so btt never
/// completes its Q (left pending, as btt leaves it).
#[test]
fn split_bio_is_never_completed() {
    let split = ev(
        1010,
        10,
        EventKind::BioSplit {
            dev: DISK,
            sector: 0,
            new_sector: 8,
            rwbs: w(),
        },
    );
    let l = run(&[
        q(1000, 10, DISK, 0, 16),
        split,
        d(1100, DISK, 0, 8),
        c(1200, DISK, 0, 8),
        d(1300, DISK, 8, 8),
        c(1400, DISK, 8, 8),
    ]);
    assert_eq!(l.all.get(Interval::Q2C).n, 0);
    assert_eq!(l.stats.pending_at_end, 1);
}

/// Flushes (zero bytes) are no Q, D or C to btt; a Q at the first sector of a pending one
/// replaces it.
#[test]
fn zero_byte_events_and_replaced_q() {
    let l = run(&[
        q(1000, 10, DISK, 0, 0),
        d(1100, DISK, 0, 0),
        c(1200, DISK, 0, 0),
        q(2000, 10, DISK, 0, 8),
        q(2200, 10, DISK, 0, 16),
        d(2300, DISK, 0, 16),
        c(2500, DISK, 0, 16),
        c(2600, DISK, 0, 16),
    ]);
    assert_eq!(nmms(&l.all, Interval::Q2Q), (1, 200, 200, 200));
    assert_eq!(nmms(&l.all, Interval::Q2C), (1, 300, 300, 300));
    assert_eq!(nmms(&l.all, Interval::D2C), (1, 200, 200, 200));
    assert_eq!(l.stats.replaced_q, 1);
    assert_eq!(l.stats.pending_at_end, 0);
}

/// Processes are named from the trace (tasks of one name together); a task keeps the
/// group it first had; equal times count 1 ns.
#[test]
fn process_names_and_tdelta() {
    let l = run(&[
        comm(10, 20, "dd"),
        comm(11, 21, "dd"),
        q(1000, 20, DISK, 0, 8),
        q(1000, 21, DISK, 8, 8),
        q(1000, 22, DISK, 16, 8),
        comm(1001, 22, "late"),
        d(1000, DISK, 0, 24),
        c(1000, DISK, 0, 24),
    ]);
    let names: Vec<&str> = l.processes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["dd", "pid000000022"]);
    assert_eq!(nmms(&l.processes[0].1, Interval::Q2Q), (1, 1, 1, 1));
    assert_eq!(nmms(&l.processes[0].1, Interval::Q2C), (2, 1, 1, 2));
    assert_eq!(nmms(&l.all, Interval::Q2Q), (2, 1, 1, 2));
}

/// Per-device Q2Q is per device; the overall one runs over every device's Q's.
#[test]
fn q2q_per_device_and_overall() {
    let l = run(&[
        q(1000, 1, DISK, 0, 8),
        q(1100, 1, DISK2, 0, 8),
        q(1300, 1, DISK, 8, 8),
    ]);
    assert_eq!(nmms(&l.all, Interval::Q2Q), (2, 100, 200, 300));
    assert_eq!(nmms(dev_of(&l, DISK), Interval::Q2Q), (1, 300, 300, 300));
    assert!(l.devices.iter().all(|(d, _)| *d != DISK2));
    assert_eq!(l.stats.pending_at_end, 3);
}

/// Only the selected devices count, in every group.
#[test]
fn device_selection() {
    let mut e = Engine::new(|d| d == DISK2);
    for x in [
        q(1000, 1, DISK, 0, 8),
        d(1100, DISK, 0, 8),
        c(1200, DISK, 0, 8),
        q(2000, 1, DISK2, 0, 8),
        d(2100, DISK2, 0, 8),
        c(2300, DISK2, 0, 8),
    ] {
        e.push(&x);
    }
    let l = e.finish();
    assert_eq!(l.devices.len(), 1);
    assert_eq!(l.devices[0].0, DISK2);
    assert_eq!(nmms(&l.all, Interval::Q2C), (1, 300, 300, 300));
}

/// Per act: Q2C and D2C of each IO the attribution charged.
#[test]
fn per_act_from_ios() {
    let mut e = Engine::default();
    e.push_act_io(3, 1000, 1500, 2000);
    e.push_act_io(3, 1000, 1000, 1000);
    let l = e.finish();
    assert_eq!(l.acts.len(), 1);
    assert_eq!(l.acts[0].0, 3);
    assert_eq!(nmms(&l.acts[0].1, Interval::Q2C), (2, 1, 1000, 1001));
    assert_eq!(nmms(&l.acts[0].1, Interval::D2C), (2, 1, 500, 501));
}

/// The text and JSON renderings of one small breakdown.
#[test]
fn outputs() {
    let l = run(&[
        q(1000, 10, DISK, 0, 8),
        g(1100, DISK, 0, 8),
        i(1300, DISK, 0, 8),
        d(1700, DISK, 0, 8),
        c(2700, DISK, 0, 8),
    ]);
    let labels = crate::output::Labels {
        dev_name: &|d| (d == DISK).then(|| "loop0".to_owned()),
        act: &|_| None,
        process: &|p| p.to_owned(),
    };
    let mut t = Vec::new();
    crate::output::text(&mut t, &l, &labels).unwrap();
    ioblame_testkit::assert_golden!("one-bio.txt", String::from_utf8(t).unwrap());
    let mut j = Vec::new();
    crate::output::json_lines(&mut j, &l, &labels).unwrap();
    let j = String::from_utf8(j).unwrap();
    let lines: Vec<serde_json::Value> = j
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["dev"], "all");
    assert_eq!(lines[1]["dev"], "7:0");
    assert_eq!(lines[1]["name"], "loop0");
    assert_eq!(lines[1]["q2c"]["n"], 1);
    assert_eq!(lines[1]["q2c"]["min_us"], 1.7);
    assert_eq!(lines[1]["q2c"]["p99_us"], 1.7);
    assert_eq!(lines[1]["q2m"]["n"], 0);
    assert!(lines[1]["q2m"]["avg_us"].is_null());
    assert!(lines[1].get("q2c_dm").is_none());
    assert_eq!(lines[2]["group"], "process");
}

#[test]
fn thousands_groups_digits_by_three() {
    use crate::output::thousands;
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1000), "1,000");
    assert_eq!(thousands(10_273), "10,273");
    assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
}
