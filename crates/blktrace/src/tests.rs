//! Unit tests of the reader: record versions and byte orders, damage, merging, the text
//! parser and the events.

use std::path::{Path, PathBuf};

use ioblame_events::{EventKind, Rwbs};

use crate::record::{self, cat, encode, Order};
use crate::*;

const LOOP0: u32 = 7 << 20;
const DM0: u32 = 253 << 20;

/// A record of `action` at `time` on `dev`.
pub(crate) fn rec(time: u64, cpu: u32, pid: u32, action: Action, cats: u32, dev: u32) -> Record {
    let c = match action {
        Action::Queue | Action::GetRq | Action::BackMerge | Action::Remap => cat::QUEUE,
        Action::Issue => cat::ISSUE,
        Action::Complete => cat::COMPLETE,
        Action::Process | Action::Timestamp | Action::Message => cat::NOTIFY,
        _ => 0,
    };
    Record::new(time, cpu, pid, action, cats | c, dev)
}

/// `r` at `sector` for `bytes`.
fn io(mut r: Record, sector: u64, bytes: u32) -> Record {
    r.sector = sector;
    r.bytes = bytes;
    r
}

fn bytes_of(rs: &[Record], o: Order) -> Vec<u8> {
    let mut b = Vec::new();
    for r in rs {
        encode(r, o, &mut b);
    }
    b
}

fn write(dir: &Path, name: &str, b: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, b).unwrap();
    p
}

fn read_all(paths: &[PathBuf]) -> (Vec<Record>, Vec<Problem>) {
    let r = Recording::open(paths).unwrap();
    let v: Vec<Record> = r.records().collect();
    (v, r.scan().problems.clone())
}

/// One direct write: Q, G, D by dd, C by a softirq; a process notify first.
fn sample() -> Vec<Record> {
    let w = cat::WRITE | cat::SYNC;
    let mut note = rec(5, 1, 100, Action::Process, 0, LOOP0);
    note.payload = Payload::Process { comm: "dd".into() };
    let mut split = io(rec(12, 1, 100, Action::Split, w, LOOP0), 0, 0);
    split.payload = Payload::Split { new_sector: 64 };
    let mut cg = io(rec(13, 1, 100, Action::GetRq, w, LOOP0), 0, 65536);
    cg.cgroup = Some(0xdead_beef);
    vec![
        note,
        io(rec(10, 1, 100, Action::Queue, w, LOOP0), 0, 65536),
        split,
        cg,
        io(rec(20, 1, 100, Action::Issue, w, LOOP0), 0, 65536),
        io(rec(30, 1, 22, Action::Complete, w, LOOP0), 0, 65536),
    ]
}

#[test]
fn versions_and_byte_orders_read_alike() {
    let d = tempfile::tempdir().unwrap();
    let want = sample();
    for (i, (o, v)) in [
        (Order::Little, 7),
        (Order::Big, 7),
        (Order::Little, 8),
        (Order::Big, 8),
    ]
    .into_iter()
    .enumerate()
    {
        let rs: Vec<Record> = want
            .iter()
            .map(|r| Record {
                version: v,
                ..r.clone()
            })
            .collect();
        let p = write(d.path(), &format!("f{i}"), &bytes_of(&rs, o));
        let (got, problems) = read_all(&[p]);
        assert_eq!(got, rs, "{o:?} v{v}");
        assert!(problems.is_empty(), "{problems:?}");
    }
    // The cgroup id and the split's payload survive, the rwbs is blkparse's.
    assert_eq!(want[3].cgroup, Some(0xdead_beef));
    assert_eq!(want[1].rwbs_text(), "WS");
    assert_eq!(want[1].rwbs(), Rwbs::parse("WS"));
}

#[test]
fn a_version_8_record_is_64_bytes_with_zone_categories() {
    let mut r = io(rec(1, 0, 1, Action::ZoneMgmt, cat::ZONE_RESET, LOOP0), 8, 0);
    r.version = 8;
    let mut b = Vec::new();
    encode(&r, Order::Little, &mut b);
    assert_eq!(b.len(), record::V8_LEN);
    let (back, n) = record::parse(&b).unwrap();
    assert_eq!((back, n), (r, 64));
}

#[test]
fn bad_magic_is_skipped_and_every_intact_record_read() {
    let d = tempfile::tempdir().unwrap();
    let rs = sample();
    let mut b = bytes_of(&rs[..3], Order::Little);
    let at = b.len();
    b.extend_from_slice(b"garbage that is no record at all!");
    b.extend(bytes_of(&rs[3..], Order::Little));
    let p = write(d.path(), "x", &b);
    let (got, problems) = read_all(std::slice::from_ref(&p));
    assert_eq!(got, rs);
    assert_eq!(
        problems,
        vec![Problem::BadMagic {
            path: p,
            offset: at as u64,
            skipped: 33,
            version: None
        }]
    );
    assert!(problems[0].is_damage());
}

#[test]
fn a_record_cut_short_ends_the_file_with_a_warning() {
    let d = tempfile::tempdir().unwrap();
    let rs = sample();
    let b = bytes_of(&rs, Order::Big);
    let cut = b.len() - 20;
    let p = write(d.path(), "x", &b[..cut]);
    let (got, problems) = read_all(std::slice::from_ref(&p));
    assert_eq!(got, rs[..rs.len() - 1]);
    assert_eq!(
        problems,
        vec![Problem::CutShort {
            path: p,
            offset: (b.len() - 48) as u64,
            have: 28
        }]
    );
    assert!(problems[0].to_string().contains("cut short"));
}

#[test]
fn a_payload_past_the_end_ends_the_file_with_a_warning() {
    let d = tempfile::tempdir().unwrap();
    let rs = sample();
    let mut b = bytes_of(&rs, Order::Little);
    let last = b.len() - 48;
    // The last record says 200 bytes of payload follow.
    b[last + 46..last + 48].copy_from_slice(&200u16.to_le_bytes());
    let p = write(d.path(), "x", &b);
    let (got, problems) = read_all(std::slice::from_ref(&p));
    assert_eq!(got, rs[..rs.len() - 1]);
    assert_eq!(
        problems,
        vec![Problem::PduPastEnd {
            path: p,
            offset: last as u64,
            pdu_len: 200,
            have: 48
        }]
    );
}

#[test]
fn empty_files_are_noted_and_all_empty_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let e = write(d.path(), "sda.blktrace.0", b"");
    let f = write(
        d.path(),
        "sda.blktrace.1",
        &bytes_of(&sample(), Order::Little),
    );
    let (got, problems) = read_all(&[e.clone(), f]);
    assert_eq!(got.len(), sample().len());
    assert_eq!(problems, vec![Problem::Empty { path: e.clone() }]);
    assert!(!problems[0].is_damage());
    assert!(matches!(Recording::open(&[e]), Err(Error::Empty)));
    // A directory: the same.
    let (got, problems) = read_all(&[d.path().to_path_buf()]);
    assert_eq!(got.len(), sample().len());
    assert!(matches!(problems[..], [Problem::Empty { .. }]));
}

#[test]
fn other_versions_and_other_files_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut b = bytes_of(&sample(), Order::Little);
    b[0] = 9;
    let p = write(d.path(), "v9", &b);
    match Recording::open(std::slice::from_ref(&p)) {
        Err(Error::UnsupportedVersion { version: 9, .. }) => {}
        other => panic!("{other:?}"),
    }
    let q = write(d.path(), "README", b"hello\nworld\n");
    assert!(matches!(
        Recording::open(std::slice::from_ref(&q)),
        Err(Error::NotBlktrace { .. })
    ));
    assert!(!is_blktrace(&q));
    assert!(matches!(Recording::open(&[]), Err(Error::NoInput)));
}

#[test]
fn per_cpu_files_merge_in_time_order_whatever_their_names() {
    let d = tempfile::tempdir().unwrap();
    let rs = sample();
    let (a, b): (Vec<Record>, Vec<Record>) = rs.iter().cloned().partition(|r| r.time % 20 == 0);
    // The kind is told by content: the names say nothing, and a record naming another CPU
    // than its file is read all the same.
    let pa = write(d.path(), "loop0.blktrace.0", &bytes_of(&a, Order::Little));
    let pb = write(d.path(), "whatever.bin", &bytes_of(&b, Order::Little));
    let (got, problems) = read_all(&[pb, pa.clone()]);
    let mut want = rs.clone();
    want.sort_by_key(|r| r.time);
    assert_eq!(got, want);
    assert_eq!(
        problems,
        vec![Problem::CpuMismatch {
            path: pa,
            records: 1
        }]
    );
}

#[test]
fn the_scan_names_tasks_devices_and_levels() {
    let d = tempfile::tempdir().unwrap();
    let mut rs = sample();
    let w = cat::WRITE;
    // dm-0 above loop0: Q on dm-0 by pid 7 (unnamed), remapped to loop0.
    let mut a = io(rec(40, 0, 7, Action::Remap, w, LOOP0), 1000, 4096);
    a.payload = Payload::Remap {
        from: DM0,
        to: LOOP0,
        sector_from: 8,
    };
    let mut ts = rec(1, 0, 0, Action::Timestamp, 0, LOOP0);
    ts.payload = Payload::Timestamp {
        sec: 1_700_000_000,
        nsec: 5,
    };
    let mut msg = rec(2, 0, 0, Action::Message, 0, LOOP0);
    msg.payload = Payload::Message {
        text: "hello".into(),
    };
    rs.extend([
        ts,
        msg,
        io(rec(39, 0, 7, Action::Queue, w, DM0), 8, 4096),
        a,
    ]);
    rs.sort_by_key(|r| r.time);
    let p = write(d.path(), "x", &bytes_of(&rs, Order::Little));
    let r = Recording::open(&[p]).unwrap();
    let s = r.scan();
    assert_eq!(s.tasks, vec![(100, "dd".to_string())]);
    assert_eq!(s.unnamed, vec![7]);
    assert_eq!(s.wall_clock, Some((1_700_000_000_000_000_005, 1)));
    assert_eq!(s.messages, vec![(2, LOOP0, "hello".to_string())]);
    assert!(s.device(DM0).unwrap().upper);
    assert!(!s.device(LOOP0).unwrap().upper);
    assert_eq!(s.cgroup_records, 1);
    assert_eq!(s.by_action[Action::Queue.index()], 2);
}

/// Partitions as the kernel traces them (5.10 and 6.1 recorded with blktrace): `A` from
/// the partition to its disk (`to` is the disk, `bio_dev()`), on the disk's trace, then `Q`
/// on the disk. A device remapped from that has no record of its own, a partition's number
/// and one offset is a partition; a dm volume (its own major) or a device with records of
/// its own is a stacked one.
#[test]
fn the_scan_tells_partitions_from_stacked_devices() {
    const P1: u32 = 259 << 20;
    const SDA: u32 = 8 << 20;
    const SDA2: u32 = (8 << 20) | 2;
    const DM1: u32 = (253 << 20) | 1;
    let d = tempfile::tempdir().unwrap();
    let w = cat::WRITE;
    let remap = |time, dev, sector, from, sector_from| {
        let mut a = io(rec(time, 0, 7, Action::Remap, w, dev), sector, 4096);
        a.payload = Payload::Remap {
            from,
            to: dev,
            sector_from,
        };
        a
    };
    let rs = vec![
        remap(10, LOOP0, 2048 + 80, P1, 80),
        io(rec(11, 0, 7, Action::Queue, w, LOOP0), 2048 + 80, 4096),
        remap(12, LOOP0, 2048 + 16, P1, 16),
        io(rec(13, 0, 7, Action::Queue, w, LOOP0), 2048 + 16, 4096),
        remap(14, SDA, 4096 + 8, SDA2, 8),
        io(rec(15, 0, 7, Action::Queue, w, SDA), 4096 + 8, 4096),
        // dm-1, not traced, over loop0 at 8192: its own major, a stacked device
        remap(16, LOOP0, 8192 + 8, DM1, 8),
        // dm-0, traced: records of its own
        io(rec(17, 0, 7, Action::Queue, w, DM0), 8, 4096),
        remap(18, LOOP0, 8, DM0, 8),
    ];
    let p = write(d.path(), "x", &bytes_of(&rs, Order::Little));
    let r = Recording::open(&[p]).unwrap();
    let s = r.scan();
    let dev = |x| s.device(x).unwrap();
    assert_eq!(dev(P1).partition_of, Some((LOOP0, 2048)));
    assert!(!dev(P1).upper);
    assert_eq!(dev(SDA2).partition_of, Some((SDA, 4096)));
    for x in [DM0, DM1] {
        assert!(dev(x).upper && dev(x).partition_of.is_none(), "{x:#x}");
    }
    // Two offsets: not a partition.
    let rs = vec![
        remap(10, LOOP0, 2048 + 80, P1, 80),
        remap(12, LOOP0, 4096 + 16, P1, 16),
    ];
    let p = write(d.path(), "y", &bytes_of(&rs, Order::Little));
    let r = Recording::open(&[p]).unwrap();
    assert!(r.scan().device(P1).unwrap().upper);
}

#[test]
fn records_become_the_block_events() {
    let d = tempfile::tempdir().unwrap();
    let w = cat::WRITE;
    let loop1 = LOOP0 | 1;
    let mut a = io(rec(40, 0, 7, Action::Remap, w, LOOP0), 1000, 4096);
    a.payload = Payload::Remap {
        from: DM0,
        to: LOOP0,
        sector_from: 8,
    };
    let rs = vec![
        io(rec(39, 0, 7, Action::Queue, w, DM0), 8, 4096),
        a,
        io(rec(41, 0, 8, Action::Queue, w, LOOP0), 1000, 4096),
        io(rec(42, 0, 8, Action::Issue, w, LOOP0), 1000, 4096),
        io(rec(43, 0, 0, Action::Complete, w, LOOP0), 1000, 4096),
        io(rec(44, 0, 0, Action::Complete, w, DM0), 8, 4096),
        // loop1 recorded with an issue/complete mask: the D's task is the issuer.
        io(rec(50, 1, 9, Action::Issue, w, loop1), 0, 512),
        io(rec(51, 1, 0, Action::Complete, w, loop1), 0, 512),
    ];
    let p = write(d.path(), "x", &bytes_of(&rs, Order::Little));
    let r = Recording::open(&[p]).unwrap();
    let kinds: Vec<(u64, u32, EventKind)> = to_events(&r)
        .into_iter()
        .map(|e| (e.time, e.pid, e.kind))
        .collect();
    let rwbs = Rwbs::parse("W");
    assert_eq!(
        kinds,
        vec![
            (
                39,
                7,
                EventKind::BioQueue {
                    dev: DM0,
                    sector: 8,
                    nr_sector: 8,
                    rwbs
                }
            ),
            (
                40,
                7,
                EventKind::BioRemap {
                    dev: LOOP0,
                    sector: 1000,
                    nr_sector: 8,
                    old_dev: DM0,
                    old_sector: 8,
                    rwbs
                }
            ),
            (
                41,
                8,
                EventKind::BioQueue {
                    dev: LOOP0,
                    sector: 1000,
                    nr_sector: 8,
                    rwbs
                }
            ),
            (
                42,
                8,
                EventKind::RqIssue {
                    dev: LOOP0,
                    sector: 1000,
                    nr_sector: 8,
                    bytes: 4096,
                    rwbs
                }
            ),
            (
                43,
                0,
                EventKind::RqComplete {
                    dev: LOOP0,
                    sector: 1000,
                    nr_sector: 8,
                    error: 0,
                    rwbs
                }
            ),
            (
                44,
                0,
                EventKind::BioComplete {
                    dev: DM0,
                    sector: 8,
                    nr_sector: 8,
                    error: 0,
                    rwbs
                }
            ),
            (
                50,
                9,
                EventKind::BioQueue {
                    dev: loop1,
                    sector: 0,
                    nr_sector: 1,
                    rwbs
                }
            ),
            (
                50,
                9,
                EventKind::RqIssue {
                    dev: loop1,
                    sector: 0,
                    nr_sector: 1,
                    bytes: 512,
                    rwbs
                }
            ),
            (
                51,
                0,
                EventKind::RqComplete {
                    dev: loop1,
                    sector: 0,
                    nr_sector: 1,
                    error: 0,
                    rwbs
                }
            ),
        ]
    );
    // The threaded reading gives the same events, each with the next one.
    let mut seen = Vec::new();
    let n = r.for_each_event(|e, next| seen.push((e.clone(), next.map(|n| n.time))));
    assert_eq!(n, 9);
    assert_eq!(seen.len(), 9);
    assert_eq!(seen[0].1, Some(40));
    assert_eq!(seen[8].1, None);
}

/// A flush with no data is the flush op; with data, a preflush.
#[test]
fn flush_categories_become_the_tracepoints_rwbs() {
    let f = io(rec(1, 0, 1, Action::Issue, cat::FLUSH, LOOP0), 0, 0);
    assert_eq!((f.rwbs_text(), f.rwbs()), ("FN".into(), Rwbs::parse("FF")));
    let pf = io(
        rec(
            1,
            0,
            1,
            Action::Queue,
            cat::FLUSH | cat::WRITE | cat::FUA | cat::SYNC | cat::META,
            LOOP0,
        ),
        8,
        4096,
    );
    assert_eq!(
        (pf.rwbs_text(), pf.rwbs()),
        ("FWFSM".into(), Rwbs::parse("FWFSM"))
    );
}

#[test]
fn blkparse_lines_of_every_kind_parse() {
    let cases: &[(&str, Action, u64, u32, &str)] = &[
        (
            "  7,0    1        1     0.000000000 19808  Q  WS 0 + 128 [dwriter]",
            Action::Queue,
            0,
            65536,
            "WS",
        ),
        (
            "  7,0    1        2     0.000008726 19808  G  WS 0 + 128 [dwriter]",
            Action::GetRq,
            0,
            65536,
            "WS",
        ),
        (
            "  8,0    0        3     0.000010000   120  M   W 2056 + 8 [kworker/0:1]",
            Action::BackMerge,
            2056,
            4096,
            "W",
        ),
        (
            "  8,0    0        4     0.000010000   120  F   W 2040 + 8 [kworker/0:1]",
            Action::FrontMerge,
            2040,
            4096,
            "W",
        ),
        (
            "  8,0    0        5     0.000010000   120  S   W 2040 + 8 [kworker/0:1]",
            Action::SleepRq,
            2040,
            4096,
            "W",
        ),
        (
            "  7,0    1        3     0.000010710 19808  P   N [dwriter]",
            Action::Plug,
            0,
            0,
            "N",
        ),
        (
            "  7,0    1        4     0.000012113 19808  U   N [dwriter] 1",
            Action::UnplugIo,
            0,
            0,
            "N",
        ),
        (
            "  7,0    1        4     0.000012113 19808 UT   N [dwriter] 3",
            Action::UnplugTimer,
            0,
            0,
            "N",
        ),
        (
            "  8,0    1       10     0.000013000   300  I  RA 4096 + 256 [cat]",
            Action::Insert,
            4096,
            131072,
            "RA",
        ),
        (
            "  7,0    1        5     0.000014778 19808  D  WS 0 + 128 [dwriter]",
            Action::Issue,
            0,
            65536,
            "WS",
        ),
        (
            "  7,0    0        1     0.000153268    14  C  WS 0 + 128 [0]",
            Action::Complete,
            0,
            65536,
            "WS",
        ),
        (
            "  8,0    0        9     0.000153268     0  C FWFSM 8 + 8 [0]",
            Action::Complete,
            8,
            4096,
            "FWFSM",
        ),
        (
            "  8,0    0        9     0.000153268     0  R   W 8 + 8 [0]",
            Action::Requeue,
            8,
            4096,
            "W",
        ),
        (
            "  8,0    1       11     0.000101345   120  X   W 4096 / 4352 [kworker/1:2]",
            Action::Split,
            4096,
            0,
            "W",
        ),
        (
            "  8,0    1       12     0.000101345   120  B   W 4096 + 8 [kworker/1:2]",
            Action::Bounce,
            4096,
            4096,
            "W",
        ),
        (
            "  8,0    1       14     0.000101345   120  A   W 4096 + 8 <- (253,0) 2048",
            Action::Remap,
            4096,
            4096,
            "W",
        ),
        (
            "  8,0    1       15     0.000101345   120  Q FWS [kworker/1:2]",
            Action::Queue,
            0,
            0,
            "FWS",
        ),
        (
            "  8,0    1       16     0.000101345   120  D  FN [kworker/1:2]",
            Action::Issue,
            0,
            0,
            "FN",
        ),
        (
            "  7,0    1        5     0.000014778 19808  D  WS 0 + 128 (   12345) [dwriter]",
            Action::Issue,
            0,
            65536,
            "WS",
        ),
        (
            "  7,2    1       34     0.138553859    22  C  FN 0 [0]",
            Action::Complete,
            0,
            0,
            "FN",
        ),
        (
            "  7,2    1       40     0.142366960    22  C WSM 32794 [0]",
            Action::Complete,
            32794,
            0,
            "WSM",
        ),
    ];
    for &(line, action, sector, bytes, rwbs) in cases {
        let (r, _) = text::parse_line(line).unwrap_or_else(|| panic!("{line}"));
        assert_eq!(
            (r.action, r.sector, r.bytes, r.rwbs_text().as_str()),
            (action, sector, bytes, rwbs),
            "{line}"
        );
    }
    let (a, _) = text::parse_line(cases[15].0).unwrap();
    assert_eq!(
        a.payload,
        Payload::Remap {
            from: DM0,
            to: 8 << 20,
            sector_from: 2048
        }
    );
    let (x, c) = text::parse_line(cases[13].0).unwrap();
    assert_eq!(
        (x.payload, c),
        (Payload::Split { new_sector: 4352 }, Some("kworker/1:2"))
    );
    let (u, _) = text::parse_line(cases[7].0).unwrap();
    assert_eq!(u.payload, Payload::Unplug { depth: 3 });
    let (q, c) = text::parse_line(cases[0].0).unwrap();
    assert_eq!(
        (q.time, q.pid, q.cpu, q.sequence, q.device, c),
        (0, 19808, 1, 1, LOOP0, Some("dwriter"))
    );
    let (m, _) =
        text::parse_line("  8,0    1        0     1.500000000     0  m   N cfq schedule dispatch")
            .unwrap();
    assert_eq!(
        (m.action, m.time, m.payload),
        (
            Action::Message,
            1_500_000_000,
            Payload::Message {
                text: "cfq schedule dispatch".into()
            }
        )
    );
    assert!(text::parse_line("CPU0 (loop0):").is_none());
    assert!(text::parse_line("  7,0 1 x").is_none());
}

#[test]
fn blkparse_summaries_are_skipped_and_unknown_lines_counted() {
    let d = tempfile::tempdir().unwrap();
    let t = "  7,0    1        1     0.000000000 19808  Q  WS 0 + 128 [dwriter]
  7,0    1        2     0.000014778 19808  D  WS 0 + 128 [dwriter]
this is not blkparse
  7,0    0        1     0.000153268    14  C  WS 0 + 128 [0]
CPU0 (loop0):
 Reads Queued:           0,        0KiB\t Writes Queued:           0,        0KiB
 Read depth:             1        \t Write depth:             1

Total (loop0):
 Writes Completed:        1,       64KiB

Throughput (R/W): 0KiB/s / 51200KiB/s
Events (loop0): 3 entries
Skips: 0 forward (0 -   0.0%)
neither is this
";
    let p = write(d.path(), "out.txt", t.as_bytes());
    assert_eq!(file_kind(&p), Some(Kind::Text));
    let (got, problems) = read_all(std::slice::from_ref(&p));
    // The process notify the first line's comm gives, then the three actions.
    let acts: Vec<Action> = got.iter().map(|r| r.action).collect();
    assert_eq!(
        acts,
        [
            Action::Process,
            Action::Queue,
            Action::Issue,
            Action::Complete
        ]
    );
    assert_eq!(
        got[0].payload,
        Payload::Process {
            comm: "dwriter".into()
        }
    );
    assert_eq!(
        problems,
        vec![Problem::UnknownLines {
            path: p,
            count: 2,
            lines: vec![3, 15]
        }]
    );
}
