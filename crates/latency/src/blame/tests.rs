use super::*;

const D: Dev = 7 << 20;
const DM: Dev = 253 << 20;

fn part(dev: Dev, q: u64, d: u64, c: u64, culprit: u32, victim: Option<u32>) -> IoPart {
    IoPart {
        dev,
        sector: 0,
        queue: q,
        issue: d,
        complete: c,
        bytes: 4096,
        culprit,
        wbt_may_hold: false,
        victim,
    }
}

fn issue(dev: Dev, sector: u64, nr: u32, rwbs: &str) -> EventKind {
    EventKind::RqIssue {
        dev,
        sector,
        nr_sector: nr,
        bytes: nr * 512,
        rwbs: Rwbs::parse(rwbs),
    }
}

fn complete(dev: Dev, sector: u64, nr: u32, rwbs: &str) -> EventKind {
    EventKind::RqComplete {
        dev,
        sector,
        nr_sector: nr,
        error: 0,
        rwbs: Rwbs::parse(rwbs),
    }
}

/// A victim's own and idle time and its culprits' waits.
type Split = (u64, u64, Vec<(u32, u64)>);

/// `(own, idle, culprits largest first)` of the victims of key `key`, in completion
/// order.
fn split(b: &Blame, key: u32) -> Vec<Split> {
    b.victims
        .iter()
        .filter(|v| v.key == key)
        .map(|v| {
            let mut c = b.culprits_of(v).to_vec();
            c.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
            (v.own, v.idle, c)
        })
        .collect()
}

fn check_sums(b: &Blame) {
    for v in &b.victims {
        let c: u64 = b.culprits_of(v).iter().map(|c| c.1).sum();
        assert_eq!(v.own + v.idle + c, v.q2c, "{v:?}");
        assert_eq!(v.q2c, v.complete - v.queue);
        assert_eq!(v.idle_by.iter().sum::<u64>(), v.idle, "{v:?}");
    }
}

#[test]
fn overlapping_requests_share_each_instant_equally() {
    // A (culprit 1) in flight [0, 100); the victim queued at 10, issued at 50,
    // completed at 150; B (culprit 3) in flight [60, 120).
    //   [10, 50)  A alone:          A 40
    //   [50, 60)  A, V:             A 5,     own 5
    //   [60, 100) A, V, B:          A 40/3,  own 40/3, B 40/3
    //   [100,120) V, B:                      own 10,   B 10
    //   [120,150) V:                         own 30
    // A = 58.33, own = 58.33, B = 23.33: 140 cut by largest remainder, own first.
    let mut e = BlameEngine::new();
    e.push_io(part(D, 0, 0, 100, 1, None));
    e.push_io(part(D, 55, 60, 120, 3, None));
    e.push_io(part(D, 10, 50, 150, 2, Some(9)));
    let b = e.finish();
    check_sums(&b);
    assert_eq!(split(&b, 9), vec![(59, 0, vec![(1, 58), (3, 23)])]);
    assert_eq!(b.stats.requests, 3);
}

#[test]
fn time_with_nothing_in_flight_is_idle() {
    let mut e = BlameEngine::new();
    e.push_io(part(D, 0, 30, 40, 1, Some(1)));
    // Another device's request does not stand ahead of it.
    e.push_io(part(DM, 0, 0, 40, 2, None));
    let b = e.finish();
    check_sums(&b);
    assert_eq!(split(&b, 1), vec![(10, 30, vec![])]);
}

fn rq(kind: fn(Dev, u64, u32, Rwbs) -> EventKind, dev: Dev, sector: u64) -> EventKind {
    kind(dev, sector, 8, Rwbs::parse("W"))
}
fn getrq(dev: Dev, sector: u64, nr_sector: u32, rwbs: Rwbs) -> EventKind {
    EventKind::GetRq {
        dev,
        sector,
        nr_sector,
        rwbs,
    }
}
fn insert(dev: Dev, sector: u64, nr_sector: u32, rwbs: Rwbs) -> EventKind {
    EventKind::RqInsert {
        dev,
        sector,
        nr_sector,
        bytes: nr_sector * 512,
        rwbs,
    }
}

fn idle_of(v: &Victim) -> Vec<(&'static str, u64)> {
    Idle::ALL
        .iter()
        .filter(|&&c| v.idle_by[c as usize] > 0)
        .map(|&c| (c.name(), v.idle_by[c as usize]))
        .collect()
}

#[test]
fn idle_time_is_named_by_its_requests_phase() {
    // Victim 1 (a write at sector 0 on D, where wbt acts): queued at 0, getrq at 20,
    // insert at 35, issued at 50, requeued, issued again at 80, completed at 100.
    // Culprit 9 in flight [10, 30) and [60, 70) (two requests).
    //   [0, 10)  idle, before a request: wbt 10
    //   [10, 20) behind 9 (10); [20, 30) behind 9 (10), in the plug
    //   [30, 35) idle, plug 5; [35, 40) idle, scheduler 5; [40, 45) behind victim
    //   2's request (5); [45, 50) scheduler 5
    //   [50, 60) idle, requeue 10; [60, 70) behind 9 (10); [70, 80) requeue 10
    //   [80, 100) own 20
    // Victim 2 (a read at sector 64, same device): queued at 0, getrq at 5, issued at
    // 40 with no insert, completed at 45: [0, 5) submit (wbt holds no read);
    // [5, 10) dispatch 5; [10, 30) behind 9; [30, 40) dispatch 10; [40, 45) own.
    // Victim 3 on DM, no events: [0, 10) unexplained, then own.
    let mut e = BlameEngine::new();
    let w = |t, k| Event::of_task(t, 1, k);
    e.push_event(&w(
        1,
        EventKind::Wbt {
            bdi: D,
            inflight: 1,
        },
    ));
    e.push_event(&w(5, rq(getrq, D, 64)));
    e.push_event(&w(20, rq(getrq, D, 0)));
    e.push_event(&w(35, rq(insert, D, 0)));
    e.push_event(&w(40, issue(D, 64, 8, "R")));
    e.push_event(&w(50, issue(D, 0, 8, "W")));
    e.push_event(&w(
        50,
        EventKind::RqRequeue {
            dev: D,
            sector: 0,
            nr_sector: 8,
            rwbs: Rwbs::parse("W"),
        },
    ));
    e.push_event(&w(80, issue(D, 0, 8, "W")));
    e.push_io(part(D, 10, 10, 30, 9, None));
    let mut v2 = part(D, 0, 40, 45, 2, Some(2));
    v2.sector = 64;
    e.push_io(v2);
    e.push_io(part(D, 60, 60, 70, 9, None));
    let mut v1 = part(D, 0, 80, 100, 1, Some(1));
    v1.wbt_may_hold = true;
    e.push_io(v1);
    e.push_io(part(DM, 0, 10, 20, 3, Some(3)));
    // A discard's request has no phases kept (it is never a victim); the issues of the
    // requeued request left none behind.
    e.push_event(&w(90, getrq(D, 512, 8, Rwbs::parse("D"))));
    assert!(e.issued.is_empty(), "{:?}", e.issued);
    assert!(!e.pending.contains_key(&(D, 512)));
    let b = e.finish();
    check_sums(&b);
    for v in &b.victims {
        assert_eq!(v.idle_by.iter().sum::<u64>(), v.idle, "{v:?}");
    }
    assert_eq!(split(&b, 1), vec![(20, 45, vec![(9, 30), (2, 5)])]);
    let v = |k| b.victims.iter().find(|v| v.key == k).unwrap();
    assert_eq!(
        idle_of(v(1)),
        vec![("wbt", 10), ("plug", 5), ("scheduler", 10), ("requeue", 20)]
    );
    assert_eq!(idle_of(v(2)), vec![("submit", 5), ("dispatch", 15)]);
    assert_eq!(idle_of(v(3)), vec![("unexplained", 10)]);
}

#[test]
fn iocost_names_the_disks_it_acts_on() {
    // A read queued at 0, getrq at 30, issued at 30: on the disk iocost acts on, its
    // 30 ns before a request are iocost's; on another disk, the submit path's.
    for (disk, want) in [("nvme0n1", "iocost"), ("sda", "submit")] {
        let mut e = BlameEngine::new();
        e.name_disks([(D, "nvme0n1".to_string()), (DM, "dm-0".to_string())]);
        let w = |t, k| Event::of_task(t, 1, k);
        e.push_event(&w(
            1,
            EventKind::Iocost {
                disk: disk.to_string(),
            },
        ));
        e.push_event(&w(30, rq(getrq, D, 0)));
        e.push_event(&w(30, issue(D, 0, 8, "R")));
        e.push_io(part(D, 0, 30, 40, 1, Some(1)));
        let b = e.finish();
        assert_eq!(idle_of(&b.victims[0]), vec![(want, 30)]);
    }
}

#[test]
fn parts_of_one_request_are_one_request_split_by_bytes() {
    // A request split between culprits 1 (3 KiB) and 2 (1 KiB), in flight [0, 40);
    // the victim waits [0, 40) behind it alone, then is served [40, 50).
    let mut e = BlameEngine::new();
    let mut p = part(D, 0, 0, 40, 1, None);
    p.bytes = 3072;
    e.push_io(p);
    p.culprit = 2;
    p.bytes = 1024;
    e.push_io(p);
    e.push_io(part(D, 0, 40, 50, 5, Some(5)));
    let b = e.finish();
    check_sums(&b);
    assert_eq!(split(&b, 5), vec![(10, 0, vec![(1, 30), (2, 10)])]);
    assert_eq!(b.stats.requests, 2);
}

#[test]
fn merged_bios_ride_together_and_are_not_each_others_culprits() {
    // Two victims' bios (queued at 0 and 15) merged into one request issued at 20 and
    // completed at 30 (the attribution emits its two parts); C (culprit 5) in flight
    // [0, 25).
    //   victim 1: [0, 20) C 20; [20, 25) C 2.5, own 2.5; [25, 30) own 5: own 7.5, C 22.5
    //   victim 2: [15, 20) C 5; [20, 25) C 2.5, own 2.5; [25, 30) own 5: own 7.5, C 7.5
    let mut e = BlameEngine::new();
    e.push_io(part(D, 0, 0, 25, 5, None));
    e.push_io(part(D, 0, 20, 30, 1, Some(1)));
    e.push_io(part(D, 15, 20, 30, 2, Some(2)));
    let b = e.finish();
    check_sums(&b);
    assert_eq!(split(&b, 1), vec![(8, 0, vec![(5, 22)])]);
    assert_eq!(split(&b, 2), vec![(8, 0, vec![(5, 7)])]);
}

#[test]
fn flushes_and_discards_are_charged_to_who_asked_for_them() {
    let ev = Event::of_task;
    let queue = |dev, sector, nr, rwbs: &str| EventKind::BioQueue {
        dev,
        sector,
        nr_sector: nr,
        rwbs: Rwbs::parse(rwbs),
    };
    let mut e = BlameEngine::new();
    // Task 7's empty preflush (an fsync's blkdev_issue_flush): a flush in flight
    // [0, 30). Task 11's discard in flight [20, 40).
    e.push_event(&ev(0, 7, queue(D, 0, 0, "FWS")));
    e.push_event(&ev(0, 0, issue(D, 0, 0, "FF")));
    e.push_event(&ev(20, 11, queue(D, 800, 8, "D")));
    e.push_event(&ev(20, 0, issue(D, 800, 8, "D")));
    e.push_event(&ev(30, 0, complete(D, u64::MAX, 0, "FF")));
    e.push_event(&ev(40, 0, complete(D, 800, 8, "D")));
    // Task 9's commit block with a preflush at sector 500: its flush in flight
    // [40, 60), then the block itself [60, 70), charged to acts 3 (3 KiB) and 4 (1 KiB)
    // (a journal commit divided among its handles): the flush is theirs too.
    e.push_event(&ev(35, 9, queue(D, 500, 8, "FWFS")));
    e.push_event(&ev(40, 0, issue(D, 0, 0, "FF")));
    e.push_event(&ev(60, 0, complete(D, u64::MAX, 0, "FF")));
    let mut p = part(D, 35, 60, 70, 3, None);
    p.sector = 500;
    p.bytes = 3072;
    e.push_io(p);
    p.culprit = 4;
    p.bytes = 1024;
    e.push_io(p);
    // The victim waits [0, 90), served [90, 100):
    //   [0, 20) the first flush 20; [20, 30) it 5, the discard 5; [30, 40) the discard
    //   10; [40, 60) the second flush 20: act 3 15, act 4 5; [60, 70) the commit block:
    //   act 3 7.5, act 4 2.5; [70, 90) idle; [90, 100) own.
    e.push_io(part(D, 0, 90, 100, 1, Some(1)));
    let b = e.finish();
    check_sums(&b);
    let task7 = FLUSH_BY | 7;
    let task11 = OTHER_BY | 11;
    assert_eq!(
        split(&b, 1),
        vec![(10, 20, vec![(task7, 25), (3, 23), (task11, 15), (4, 7)])]
    );
    assert_eq!(Culprit::of(task7), Culprit::FlushBy(7));
    assert_eq!(Culprit::of(task11), Culprit::OtherBy(11));
    assert_eq!(Culprit::of(3), Culprit::Key(3));
    assert_eq!((b.stats.flushes, b.stats.other_ops), (2, 1));
    assert_eq!(b.stats.flushes_linked, 1);
}

#[test]
fn a_flush_nobody_is_seen_asking_for_is_said_so() {
    let mut e = BlameEngine::new();
    e.push_event(&Event::of_task(0, 1, issue(D, 0, 0, "FF")));
    e.push_event(&Event::of_task(30, 1, complete(D, u64::MAX, 0, "FF")));
    e.push_io(part(D, 10, 30, 40, 1, Some(1)));
    let b = e.finish();
    check_sums(&b);
    assert_eq!(split(&b, 1), vec![(10, 0, vec![(FLUSH, 20)])]);
}

/// A flush requeued (the driver was busy) and issued again is one flush, in flight from
/// the issue that completed it; the next flush is its own.
#[test]
fn a_requeued_flush_is_in_flight_from_its_last_issue() {
    let requeue = EventKind::RqRequeue {
        dev: D,
        sector: 0,
        nr_sector: 0,
        rwbs: Rwbs::parse("FF"),
    };
    let mut e = BlameEngine::new();
    e.push_event(&Event::of_task(
        0,
        7,
        EventKind::BioQueue {
            dev: D,
            sector: 0,
            nr_sector: 0,
            rwbs: Rwbs::parse("FWS"),
        },
    ));
    e.push_event(&Event::of_task(0, 1, issue(D, 0, 0, "FF")));
    e.push_event(&Event::of_task(1, 1, requeue));
    e.push_event(&Event::of_task(100, 1, issue(D, 0, 0, "FF")));
    e.push_event(&Event::of_task(110, 1, complete(D, u64::MAX, 0, "FF")));
    e.push_event(&Event::of_task(1000, 1, issue(D, 0, 0, "FF")));
    e.push_event(&Event::of_task(1010, 1, complete(D, u64::MAX, 0, "FF")));
    // A read alone on the device in between, and one waiting behind the first flush.
    e.push_io(part(D, 500, 500, 520, 1, Some(1)));
    e.push_io(part(D, 90, 120, 130, 2, Some(2)));
    let b = e.finish();
    check_sums(&b);
    assert_eq!(split(&b, 1), vec![(20, 0, vec![])]);
    // [90, 100) idle; [100, 110) behind the flush task 7 asked for; [110, 120) idle.
    assert_eq!(split(&b, 2), vec![(10, 20, vec![(FLUSH_BY | 7, 10)])]);
    assert_eq!(b.stats.flush_requeues, 1);
}

/// Events of the devices not selected are not followed.
#[test]
fn other_devices_events_are_not_followed() {
    let mut e = BlameEngine::with_devices(|d| d == D);
    e.push_event(&Event::of_task(0, 1, issue(DM, 0, 0, "FF")));
    e.push_event(&Event::of_task(10, 1, complete(DM, u64::MAX, 0, "FF")));
    let b = e.finish();
    assert_eq!(b.stats.flushes, 0);
}

#[test]
fn no_device_time_is_neither_victim_nor_culprit() {
    let mut e = BlameEngine::new();
    e.push_io(part(D, 0, 50, 50, 1, Some(1)));
    e.push_io(part(D, 0, 10, 60, 2, Some(2)));
    let b = e.finish();
    assert_eq!(b.victims.len(), 1);
    assert_eq!(split(&b, 2), vec![(50, 10, vec![])]);
    assert_eq!(b.stats.no_device_time, 1);
}

/// A xorshift generator from `seed`: `next(n)` is below `n`.
fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}

#[test]
fn victims_split_by_ranges_are_split_as_by_one_sweep() {
    // 400 requests on two devices, every one a victim: split by one sweep per device,
    // and by sweeps of a dozen victims each (each replaying the requests before).
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    let mut ios = Vec::new();
    for i in 0..400u32 {
        let q = next(20_000);
        let d = q + next(500);
        let c = d + 1 + next(800);
        let dev = if next(3) == 0 { DM } else { D };
        ios.push(part(dev, q, d, c, next(7) as u32, Some(i)));
    }
    ios.sort_by_key(|p| (p.complete, p.issue));
    ios.dedup_by_key(|p| (p.dev, p.issue, p.complete));
    let run = |min_chunk: usize| {
        let mut e = BlameEngine::new();
        for p in &ios {
            e.push_io(*p);
        }
        e.finish_in(min_chunk)
    };
    let (one, many) = (run(usize::MAX), run(1));
    check_sums(&many);
    assert_eq!(one.victims.len(), ios.len());
    assert_eq!(one.victims.len(), many.victims.len());
    // Nothing but the victims' ties would differ in order: make some.
    assert!(one
        .victims
        .windows(2)
        .any(|w| w[0].complete == w[1].complete));
    for (a, b) in one.victims.iter().zip(&many.victims) {
        assert_eq!(
            (a.key, a.q2c, a.own, a.idle, a.idle_by),
            (b.key, b.q2c, b.own, b.idle, b.idle_by)
        );
        assert_eq!(one.culprits_of(a), many.culprits_of(b), "{a:?}");
    }
}

/// The engine against a brute-force split, nanosecond by nanosecond, on random
/// requests: within a nanosecond per share, and exactly Q2C in all.
#[test]
fn agrees_with_a_brute_force_split() {
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    for _ in 0..200 {
        let mut e = BlameEngine::new();
        let mut reqs = Vec::new();
        for i in 0..(1 + next(12)) as u32 {
            let q = next(200);
            let d = q + next(60);
            let c = d + 1 + next(80);
            let culprit = next(4) as u32;
            // Two requests of the same issue and completion would be one to the engine.
            if !reqs
                .iter()
                .any(|r: &(u64, u64, u64, u32, u32)| (r.1, r.2) == (d, c))
            {
                reqs.push((q, d, c, culprit, i));
            }
        }
        // Emitted in completion order, as the attribution does.
        reqs.sort_by_key(|r| r.2);
        for &(q, d, c, culprit, i) in &reqs {
            e.push_io(part(D, q, d, c, culprit, Some(i)));
        }
        let b = e.finish();
        check_sums(&b);
        for v in &b.victims {
            let &(q, d, c, _, _) = reqs.iter().find(|r| r.4 == v.key).unwrap();
            let (mut own, mut idle) = (0.0f64, 0u64);
            let mut by: HashMap<u32, f64> = HashMap::new();
            for t in q..c {
                let live: Vec<_> = reqs.iter().filter(|r| r.1 <= t && t < r.2).collect();
                if live.is_empty() {
                    idle += 1;
                    continue;
                }
                let n = live.len() as f64;
                for r in live {
                    if r.4 == v.key {
                        own += 1.0 / n;
                    } else {
                        *by.entry(r.3).or_default() += 1.0 / n;
                    }
                }
            }
            let _ = d;
            assert_eq!(v.idle, idle, "{v:?}");
            assert!((v.own as f64 - own).abs() <= 1.0, "{v:?} own {own}");
            let got = b.culprits_of(v);
            for (k, x) in &by {
                let g = got.iter().find(|c| c.0 == *k).map_or(0, |c| c.1);
                assert!((g as f64 - x).abs() <= 1.0, "{v:?} key {k}: {g} vs {x}");
            }
        }
    }
}
