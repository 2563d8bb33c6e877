//! Unit tests of the comparison's stages, on hand-made baselines and trace groups.

use std::collections::BTreeSet;

use ioblame_attrib::{ActTotals, Dir, Intent, Role, Via};
use ioblame_counters::SLOTS;

use super::aggregates::{aggregate_of, role_aggregates};
use super::families::{family_label, Families, Item};
use super::groups::{counter_map, match_groups, trace_groups, uncompared_note, TraceGroup};
use super::judge::{dominant_dir, emd, ratio_within, Subject};
use super::pool::{pool_eligible, LostIntent};
use super::*;
use crate::keys::ReasonClass;
use crate::model::{key_label, Counter, Defaults, Group, GroupHist, GroupKey};
use crate::tolerances::{Tol, Tolerances};

const KIB: u64 = 1 << 10;

fn key(role: &str, via: Via, reason: ReasonClass, file: &str) -> GroupKey {
    GroupKey {
        role: role.into(),
        via: ViaKey::of(via),
        reason,
        file: file.into(),
        frames: vec!["ext4_da_write_end".into(), "vfs_write".into()],
        user: Vec::new(),
    }
}

/// A write group of `kib` KiB in 4 KiB IOs, none of them sync.
fn group(key: GroupKey, kib: u64) -> Group {
    Group {
        name: key_label(&key),
        key,
        bytes: [0, 0, kib * KIB],
        ios: [0, 0, kib / 4],
        sync_write_share: 0.0,
        behind_share: None,
        hist: Vec::new(),
        tolerance: Tolerances::default(),
    }
}

/// A baseline of `groups` with the default settings but no significance floor.
fn baseline(groups: Vec<Group>) -> Baseline {
    let mut total_bytes = [0; 3];
    for g in &groups {
        crate::model::add_bytes(&mut total_bytes, &g.bytes);
    }
    Baseline {
        frames: 4,
        user_frames: 0,
        defaults: Defaults {
            min_bytes: 0,
            min_share: 0.0,
            ..Defaults::default()
        },
        counters: Vec::new(),
        total_bytes,
        groups,
        symbolized: true,
        scope: None,
    }
}

/// Writes of `kib` KiB in 4 KiB IOs.
fn writes(kib: u64) -> Sum {
    Sum {
        bytes: [0, 0, kib * KIB],
        ios: [0, 0, kib / 4],
        sync_write_bytes: 0,
        hist: Vec::new(),
        ..Sum::default()
    }
}

fn trace(key: GroupKey, kib: u64, base: Option<usize>) -> TraceGroup {
    TraceGroup {
        key,
        sum: writes(kib),
        base,
    }
}

/// A comparison of `trace` (already matched) with `base`, before any judgement.
fn comparison(base: &Baseline, trace: Vec<TraceGroup>, strict: bool) -> Comparison<'_> {
    let trace_total = sat_sum(trace.iter().map(|t| t.sum.total()));
    let base_total = base.total();
    let lost = LostIntent::measure(base, &trace);
    Comparison {
        baseline: base,
        strict,
        floor: base.defaults.floor(&[base_total, trace_total]),
        trace,
        lost,
        base_total,
        trace_total,
        regressions: Vec::new(),
        notes: Vec::new(),
        flagged_bytes: BTreeSet::new(),
        flagged_sync: BTreeSet::new(),
        groups_compared: 0,
        small_new: 0,
        small_new_bytes: 0,
    }
}

fn counter(spec: &str) -> Counter {
    Counter::parse(spec, 1).unwrap()
}

// --- The groups of the trace, matched ---

#[test]
fn counters_map_by_spec() {
    let base = [
        counter("R size 0 1 2 3 4 5 6 7 0"),
        counter("W size 0 1 2 3 4 5 6 7 0"),
    ];
    let trace = [
        counter("W size 0 1 2 3 4 5 6 7 0"),
        counter("W io_time 0 1 2 3 4 5 6 7 0"),
    ];
    let cmap = counter_map(&base, &trace);
    assert_eq!(cmap, [Some(1), None]);
    assert_eq!(
        uncompared_note(&base, &cmap).unwrap(),
        format!(
            "histograms of counters the trace was not analysed with are not compared: {}",
            base[0].spec
        )
    );
    assert_eq!(uncompared_note(&base[1..], &[Some(0)]), None);
}

#[test]
fn trace_groups_take_the_baselines_keys_and_counters() {
    let mut base = baseline(Vec::new());
    base.frames = 1;
    base.counters = vec![
        counter("R size 0 1 2 3 4 5 6 7 0"),
        counter("W size 0 1 2 3 4 5 6 7 0"),
    ];
    let role = Role {
        pid: 7,
        tid: 7,
        comm: "worker-3".into(),
        generation: 0,
        cgroup: 0,
        lineage: false,
    };
    let intent = Intent {
        modifier: 0,
        stack: vec![],
        user: Vec::new(),
    };
    let act = |kib: u64, recorder: bool| ActInput {
        role: &role,
        intent: &intent,
        frames: vec!["submit_bio+0x1/0x2".into(), "my_write+0x10/0x20".into()],
        user: Vec::new(),
        file_path: Some("/db/000123.sst".into()),
        via: Via::Direct,
        reason: None,
        recorder,
        totals: ActTotals {
            bytes: [0, 0, kib * KIB],
            ios: [0, 0, 1],
            ..ActTotals::default()
        },
        sync_write_bytes: 0,
        // Trace counter 0 is not in the baseline; trace counter 1 is its counter 1.
        histograms: vec![[1; SLOTS], [0, 0, 0, 0, 0, 1, 0, 0]],
        q2c_ns: 0,
        behind_ns: 0,
    };
    let inputs = [act(4, false), act(8, false), act(64, true)];
    let groups = trace_groups(&base, &inputs, 2, &[None, Some(1)]).unwrap();
    assert_eq!(groups.len(), 1);
    let (k, s) = &groups[0];
    assert_eq!(k.role, "worker-*");
    assert_eq!(k.file, "/db/*.sst");
    assert_eq!(k.frames, ["my_write"]);
    assert_eq!(s.bytes, [0, 0, 12 * KIB], "the recorder's act is left out");
    assert_eq!(s.hist, [[0; SLOTS], [0, 0, 0, 0, 0, 2, 0, 0]]);
    // Histograms that do not follow the counters are an input error.
    let e = trace_groups(&base, &inputs, 3, &[None, Some(1), None]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid input: act 0 has 2 histograms for 3 counters"
    );
}

#[test]
fn trace_groups_match_the_most_specific_baseline_group() {
    let glob = key("w*", Via::Page, ReasonClass::Flusher, "/data/*");
    let exact = key("writer", Via::Page, ReasonClass::Flusher, "/data/a");
    let base = baseline(vec![group(glob, 64), group(exact.clone(), 64)]);
    let other = key("worker", Via::Page, ReasonClass::Flusher, "/data/b");
    let sync = key("writer", Via::Page, ReasonClass::Sync, "/data/a");
    let direct = key("writer", Via::Direct, ReasonClass::Flusher, "/data/a");
    let matched = match_groups(
        &base,
        vec![
            (exact, writes(4)),
            (other, writes(4)),
            (sync, writes(4)),
            (direct, writes(4)),
        ],
    );
    let at: Vec<Option<usize>> = matched.iter().map(|t| t.base).collect();
    assert_eq!(at, [Some(1), Some(0), None, None]);
}

// --- Families ---

#[test]
fn siblings_form_one_family_and_the_trace_is_sorted_into_them() {
    let flusher = key("writer", Via::Page, ReasonClass::Flusher, "/d/a");
    let sync = key("writer", Via::Page, ReasonClass::Sync, "/d/a");
    let lost = key("kworker/*", Via::Unknown, ReasonClass::Flusher, "-");
    let mut loose = group(sync.clone(), 32);
    loose.tolerance.set("write_bytes", Tol::Value(0.5));
    let base = baseline(vec![
        group(flusher.clone(), 64),
        group(lost.clone(), 16),
        loose,
    ]);
    let own = key("writer", Via::Page, ReasonClass::None, "/d/a");
    let newcomer = key("reader", Via::Read, ReasonClass::None, "/d/a");
    let newcomer_sync = key("reader", Via::Read, ReasonClass::Sync, "/d/a");
    let trace = vec![
        trace(flusher, 40, Some(0)),
        trace(own.clone(), 8, None),
        trace(lost.clone(), 16, Some(1)),
        trace(newcomer.clone(), 4, None),
        trace(newcomer_sync, 12, None),
    ];
    let f = Families::build(&base, &trace, false);
    assert_eq!(
        f.base.len(),
        1,
        "unattributed IO is no family unless strict"
    );
    let fam = &f.base[0];
    assert_eq!(fam.members, [0, 2]);
    assert_eq!(fam.base.bytes[2], 96 * KIB);
    assert_eq!(fam.trace.bytes[2], 48 * KIB, "matched and sibling IO");
    assert_eq!(
        fam.reasons,
        BTreeSet::from([ReasonClass::None, ReasonClass::Flusher, ReasonClass::Sync])
    );
    assert_eq!(fam.tol.write_bytes, Some(Tol::Value(0.5)), "the loosest");
    assert_eq!(f.matched[0].as_ref().unwrap().bytes[2], 40 * KIB);
    assert!(f.matched[2].is_none(), "own IO is a sibling, not a match");
    assert_eq!(f.new.len(), 1, "new siblings are one family");
    assert_eq!(f.new[0].key, newcomer);
    assert_eq!(f.new[0].sum.bytes[2], 16 * KIB);
    // Strict: unattributed IO is a family like any other.
    let f = Families::build(&base, &trace, true);
    assert_eq!(f.base.len(), 2);
    assert_eq!(f.base[1].key, lost);
    assert_eq!(f.base[1].trace.bytes[2], 16 * KIB);
}

#[test]
fn families_are_judged_largest_change_first() {
    let a = key("a", Via::Page, ReasonClass::None, "-");
    let b = key("b", Via::Page, ReasonClass::None, "-");
    let c = key("c", Via::Page, ReasonClass::None, "-");
    let base = baseline(vec![group(a.clone(), 64), group(b.clone(), 64)]);
    let trace = vec![
        trace(a, 60, Some(0)),
        trace(b, 32, Some(1)),
        trace(c, 32, None),
    ];
    let f = Families::build(&base, &trace, false);
    // Changes: a 4 KiB, b 32 KiB, new c 32 KiB (a tie: the baseline's family first).
    assert_eq!(f.order(), [Item::Base(1), Item::New(0), Item::Base(0)]);
}

#[test]
fn family_labels_name_the_reasons() {
    let k = key("writer", Via::Page, ReasonClass::Flusher, "/d/a");
    assert_eq!(
        family_label(&k, &BTreeSet::from([ReasonClass::Sync])),
        "writer via page (sync writeback) on /d/a"
    );
    assert_eq!(
        family_label(
            &k,
            &BTreeSet::from([ReasonClass::Flusher, ReasonClass::Sync])
        ),
        "writer via page (flusher or sync writeback) on /d/a"
    );
    let mut k = k;
    k.file = "-".into();
    assert_eq!(
        family_label(&k, &BTreeSet::from([ReasonClass::None, ReasonClass::Sync])),
        "writer via page (own IO or sync writeback)"
    );
}

// --- Unattributed IO ---

#[test]
fn lost_intent_is_measured_per_file_of_the_baseline() {
    let lost_base = key("kworker/*", Via::Unknown, ReasonClass::Flusher, "/d/*");
    let base = baseline(vec![group(lost_base, 16)]);
    let lost_trace = key("kworker/*", Via::Unknown, ReasonClass::Flusher, "/d/x");
    let lost_anon = key("kworker/*", Via::Unknown, ReasonClass::Flusher, "-");
    let trace = vec![
        trace(lost_trace, 40, Some(0)),
        trace(lost_anon, 8, None),
        trace(key("w", Via::Page, ReasonClass::None, "-"), 64, None),
    ];
    let lost = LostIntent::measure(&base, &trace);
    assert_eq!(
        lost.note(false).unwrap(),
        "unattributed bytes (lost intent): 48.0 KiB vs 16.0 KiB baseline; shifts between them and writeback-linked bytes (via page, buffer, inode) are not regressions"
    );
    assert_eq!(
        lost.note(true).unwrap(),
        "unattributed bytes (lost intent): 48.0 KiB vs 16.0 KiB baseline; strict: compared like any group, they explain no other change"
    );
    assert_eq!(LostIntent::default().note(false), None);
    // The matched trace group counts under the baseline's pattern.
    let mut pool = lost.pool(false);
    assert_eq!(pool.take("/d/*", 2, -10 * KIB as i64), 10 * KIB as i64);
    // The rest of the file's 24 KiB, then unknown files' 8 KiB.
    assert_eq!(pool.take("/d/*", 2, -100 * KIB as i64), 22 * KIB as i64);
    assert_eq!(pool.take("-", 2, -(KIB as i64)), 0, "used up");
    assert_eq!(lost.pool(true).take("/d/*", 2, -(KIB as i64)), 0, "strict");
}

#[test]
fn the_pool_explains_opposite_changes_file_first() {
    let base = baseline(vec![group(
        key("kworker/*", Via::Unknown, ReasonClass::Flusher, "/f"),
        32,
    )]);
    // Unattributed IO: 32 KiB less on /f, 16 KiB more on unknown files.
    let trace = vec![trace(
        key("kworker/*", Via::Unknown, ReasonClass::Flusher, "-"),
        16,
        None,
    )];
    let lost = LostIntent::measure(&base, &trace);
    let mut pool = lost.pool(false);
    // A group losing bytes is explained by unattributed bytes gained, not lost.
    assert_eq!(pool.take("/f", 2, -8 * KIB as i64), 8 * KIB as i64);
    // A group gaining bytes is explained by unattributed bytes lost: /f first.
    assert_eq!(pool.take("/f", 2, 40 * KIB as i64), -32 * KIB as i64);
    assert_eq!(pool.take("/f", 2, -20 * KIB as i64), 8 * KIB as i64);
    // Other directions are separate.
    assert_eq!(pool.take("-", 0, -(KIB as i64)), 0);
    assert!(pool_eligible(ViaKey::of(Via::Buffer)));
    assert!(!pool_eligible(ViaKey::of(Via::Direct)));
    assert!(!pool_eligible(ViaKey::of(Via::Journal)));
}

// --- Judging a metric ---

#[test]
fn ratios_and_distances() {
    assert!(ratio_within(100.0, 115.0, 0.15));
    assert!(!ratio_within(100.0, 116.0, 0.15));
    assert!(ratio_within(115.0, 100.0, 0.15));
    assert!(!ratio_within(116.0, 100.0, 0.15));
    assert!(ratio_within(0.0, 0.0, 0.0));
    assert!(!ratio_within(0.0, 1.0, 10.0));
    let one = |i: usize| {
        let mut p = [0.0; SLOTS];
        p[i] = 1.0;
        p
    };
    assert_eq!(emd(&one(2), &one(2)), 0.0);
    assert_eq!(emd(&one(1), &one(4)), 3.0);
    assert_eq!(emd(&[0.0; SLOTS], &one(4)), 0.0, "an empty side");
    assert_eq!(dominant_dir(&[5, 5, 1]), Dir::A, "the last of equals");
    assert_eq!(dominant_dir(&[0, 0, 0]), Dir::W);
}

fn subject() -> Subject {
    let k = key("writer", Via::Page, ReasonClass::Flusher, "/d/a");
    Subject::group(key_label(&k), &k, &BTreeSet::new())
}

#[test]
fn bytes_and_sync_share_findings() {
    let s = subject();
    let tol = Tolerances::recommended();
    assert!(s.bytes_finding(Dir::W, 100, 110, 0, &tol, 0).is_none());
    let f = s
        .bytes_finding(Dir::W, 100 * KIB, 200 * KIB, 0, &tol, 0)
        .unwrap();
    assert_eq!(f.kind, FindingKind::Bytes);
    assert_eq!(f.metric, "write_bytes");
    assert_eq!(f.reason.as_deref(), Some("flusher"));
    assert_eq!(
        f.message,
        "writer via page (flusher writeback) on /d/a: write bytes 200.0 KiB vs 100.0 KiB baseline (+100%, tolerance 15%)"
    );
    // Below the floor, or explained by unattributed bytes.
    assert!(s
        .bytes_finding(Dir::W, 100 * KIB, 200 * KIB, 0, &tol, 101 * KIB)
        .is_none());
    assert!(s
        .bytes_finding(Dir::W, 100 * KIB, 200 * KIB, -100 * KIB as i64, &tol, 0)
        .is_none());
    let f = s
        .bytes_finding(Dir::W, 100 * KIB, 200 * KIB, -50 * KIB as i64, &tol, 0)
        .unwrap();
    assert!(f
        .message
        .ends_with("(+50%, tolerance 15%; 50.0 KiB of the change matched by unattributed bytes)"));
    let mut synced = writes(100);
    synced.sync_write_bytes = 50 * KIB;
    let f = s.sync_finding(&writes(100), &synced, &tol, 0).unwrap();
    assert_eq!(
        f.message,
        "writer via page (flusher writeback) on /d/a: sync writes 50% of write bytes vs 0% baseline (tolerance 15 points)"
    );
    assert!(s.sync_finding(&synced, &synced, &tol, 0).is_none());
}

#[test]
fn io_size_findings() {
    let s = subject();
    let tol = Tolerances::recommended();
    let small = Sum {
        ios: [0, 0, 100],
        ..writes(100)
    };
    assert!(s
        .io_size_finding(Dir::W, &writes(100), &small, &tol, 32)
        .is_none());
    let f = s
        .io_size_finding(Dir::W, &writes(400), &small, &tol, 1)
        .unwrap();
    assert_eq!(f.kind, FindingKind::IoSize);
    assert_eq!(
        f.message,
        "writer via page (flusher writeback) on /d/a: average write size 1.0 KiB vs 4.0 KiB baseline (-75%, tolerance 150%; 100 IOs vs 100)"
    );
    assert!(s
        .io_size_finding(Dir::W, &writes(400), &small, &tol, 101)
        .is_none());
    assert!(s
        .io_size_finding(Dir::R, &writes(400), &small, &tol, 1)
        .is_none());
}

#[test]
fn histogram_findings_compare_rounded_shapes() {
    let s = subject();
    let c = counter("W size 0 4096 8192 16384 32768 65536 131072 524288 0");
    let tol = Tolerances::exact();
    let b = GroupHist {
        counter: 0,
        n: 3,
        p: [1.0 / 3.0, 2.0 / 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
            .map(|x| (x * 1e3_f64).round() / 1e3),
    };
    assert!(s
        .histogram_finding(&c, &b, &[1, 2, 0, 0, 0, 0, 0, 0], &tol, 1)
        .is_none());
    let f = s
        .histogram_finding(&c, &b, &[0, 0, 0, 3, 0, 0, 0, 0], &tol, 1)
        .unwrap();
    assert_eq!(f.kind, FindingKind::Histogram);
    assert_eq!(f.metric, c.spec);
    assert!(
        f.message.ends_with(
            "moved 2.33 slots (tolerance 0): [0 0 0 100 0 0 0 0]% vs [33 67 0 0 0 0 0 0]% baseline"
        ),
        "{}",
        f.message
    );
    assert!(s
        .histogram_finding(&c, &b, &[0, 0, 0, 3, 0, 0, 0, 0], &tol, 4)
        .is_none());
}

#[test]
fn new_and_vanished_findings() {
    let s = subject();
    let f = s.new_group_finding(&writes(64), 256 * KIB);
    assert_eq!(f.kind, FindingKind::NewGroup);
    assert_eq!(
        f.message,
        "new group writer via page (flusher writeback) on /d/a: write 64.0 KiB in 16 IOs (25% of the trace), not in the baseline"
    );
    let f = s.vanished_finding(&writes(64), 128 * KIB, 0);
    assert_eq!(f.change, Some(-1.0));
    assert_eq!(
        f.message,
        "writer via page (flusher writeback) on /d/a: vanished: write 64.0 KiB in the baseline (50% of it), none in this trace"
    );
    let f = s.vanished_finding(&writes(64), 128 * KIB, 16 * KIB as i64);
    assert!(f
        .message
        .ends_with("none in this trace; 16.0 KiB of it matched by unattributed bytes"));
}

// --- Role aggregates ---

#[test]
fn role_aggregates_sum_a_role_on_a_file() {
    let page = key("writer", Via::Page, ReasonClass::None, "/d/*");
    let direct = key("writer", Via::Direct, ReasonClass::None, "/d/*");
    let lost = key("kworker/*", Via::Unknown, ReasonClass::Flusher, "/d/*");
    let mut tight = group(direct.clone(), 32);
    tight.tolerance.set("write_bytes", Tol::Off);
    let base = baseline(vec![group(page, 64), tight, group(lost.clone(), 8)]);
    let trace = vec![
        trace(
            key("writer", Via::Page, ReasonClass::Sync, "/d/x"),
            16,
            None,
        ),
        trace(
            key("writer", Via::Direct, ReasonClass::None, "/d/y"),
            8,
            None,
        ),
        trace(key("writer", Via::Page, ReasonClass::None, "/e/x"), 4, None),
        trace(lost, 8, Some(2)),
    ];
    let aggs = role_aggregates(&base, &trace, false);
    assert_eq!(aggs.len(), 1);
    let a = &aggs[0];
    assert_eq!(a.key(), ("writer".to_string(), "/d/*".to_string()));
    assert_eq!(a.base.bytes[2], 96 * KIB);
    assert_eq!(a.base_eligible[2], 64 * KIB);
    assert_eq!(a.trace.bytes[2], 24 * KIB);
    assert_eq!(a.trace_eligible[2], 16 * KIB);
    assert_eq!(a.tol.write_bytes, Some(Tol::Off));
    assert!(a.trace.hist.is_empty());
    assert_eq!(role_aggregates(&base, &trace, true).len(), 2);
    // The aggregate a trace key belongs to.
    let k = key("writer", Via::Read, ReasonClass::None, "/d/z");
    assert_eq!(
        aggregate_of(&base, &k),
        ("writer".to_string(), "/d/*".to_string())
    );
    let k = key("kworker/3", Via::Page, ReasonClass::None, "/d/z");
    assert_eq!(
        aggregate_of(&base, &k),
        ("kworker/3".to_string(), "/d/z".to_string()),
        "unattributed groups have no aggregate"
    );
}

// --- The comparison ---

#[test]
fn symbols_must_be_on_both_sides_or_neither() {
    assert!(symbols_comparable(true, Some(true)).is_ok());
    assert!(symbols_comparable(false, Some(false)).is_ok());
    assert!(symbols_comparable(true, None).is_ok());
    assert!(matches!(
        symbols_comparable(true, Some(false)),
        Err(BaselineError::Symbols(SymbolsMismatch::TraceUnsymbolized))
    ));
    assert!(matches!(
        symbols_comparable(false, Some(true)),
        Err(BaselineError::Symbols(
            SymbolsMismatch::BaselineUnsymbolized
        ))
    ));
}

#[test]
fn new_families_are_ignored_below_the_floor_explained_or_reported() {
    let w = key("writer", Via::Page, ReasonClass::None, "/d/a");
    let mut base = baseline(vec![group(w, 64)]);
    base.defaults.min_bytes = 16 * KIB;
    let small = key("small", Via::Direct, ReasonClass::None, "/d/a");
    let big = key("big", Via::Direct, ReasonClass::None, "/d/a");
    let mut c = comparison(
        &base,
        vec![trace(small, 8, None), trace(big.clone(), 64, None)],
        false,
    );
    let f = Families::build(c.baseline, &c.trace, c.strict);
    let mut pool = c.lost.pool(false);
    c.judge_new(&f.new[0], &mut pool);
    c.judge_new(&f.new[1], &mut pool);
    assert_eq!((c.small_new, c.small_new_bytes), (1, 8 * KIB));
    assert_eq!(c.regressions.len(), 1);
    assert_eq!(c.regressions[0].kind, FindingKind::NewGroup);
    assert!(c
        .flagged_bytes
        .contains(&("big".to_string(), "/d/a".to_string())));
    // All of it: the baseline's writer vanished (a tie with `big`: the baseline first).
    let mut c = comparison(&base, c.trace.clone(), false);
    c.judge_groups();
    let r = c.verdict();
    let kinds: Vec<FindingKind> = r.regressions.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::VanishedGroup, FindingKind::NewGroup]);
    assert_eq!(
        r.notes,
        ["1 new group below the floor (8.0 KiB together): ignored"]
    );

    // A new writeback group that took bytes unattributed IO lost.
    let lost = key("kworker/*", Via::Unknown, ReasonClass::Flusher, "/d/a");
    let mut base = baseline(vec![group(lost, 64)]);
    base.defaults.min_bytes = 4 * KIB;
    let page = key("writer", Via::Page, ReasonClass::None, "/d/a");
    let mut c = comparison(&base, vec![trace(page, 64, None)], false);
    c.judge_groups();
    assert!(c.regressions.is_empty());
    assert_eq!(
        c.notes,
        ["writer via page on /d/a: new group of 64.0 KiB matched by fewer unattributed bytes: not a regression"]
    );
}

#[test]
fn vanished_families_may_have_become_unattributed() {
    let w = key("writer", Via::Page, ReasonClass::None, "/d/a");
    let lost = key("kworker/*", Via::Unknown, ReasonClass::Flusher, "/d/a");
    let base = baseline(vec![group(w.clone(), 64)]);
    let mut c = comparison(&base, vec![trace(lost.clone(), 64, None)], false);
    c.judge_groups();
    assert!(c.regressions.is_empty());
    assert_eq!(
        c.notes,
        ["writer via page on /d/a: all its 64.0 KiB are unattributed in this trace: not a regression"]
    );
    assert_eq!(c.groups_compared, 1);
    // Strict: they explain nothing.
    let mut c = comparison(&base, vec![trace(lost, 64, None)], true);
    c.judge_groups();
    assert_eq!(c.regressions.len(), 2, "{:?}", c.regressions);
    assert_eq!(c.regressions[0].kind, FindingKind::VanishedGroup);
    assert_eq!(c.regressions[1].kind, FindingKind::NewGroup);
    assert!(c.flagged_bytes.contains(&(w.role.clone(), w.file.clone())));
}

#[test]
fn families_are_judged_metric_by_metric() {
    let w = key("writer", Via::Direct, ReasonClass::None, "/d/a");
    let base = baseline(vec![group(w.clone(), 64)]);
    // Twice the bytes in a quarter of the IOs each.
    let mut t = trace(w.clone(), 128, Some(0));
    t.sum.ios = [0, 0, 128];
    let mut c = comparison(&base, vec![t], false);
    c.judge_groups();
    let kinds: Vec<FindingKind> = c.regressions.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::Bytes]);
    assert!(c.flagged_bytes.contains(&(w.role.clone(), w.file.clone())));
    assert!(c.flagged_sync.is_empty());
    // The aggregate would say the same: left out.
    c.judge_aggregates();
    assert_eq!(c.regressions.len(), 1);
    let r = c.verdict();
    assert!(r.regressed());
    assert_eq!(
        (r.groups_compared, r.baseline_groups, r.trace_groups),
        (1, 1, 1)
    );
    assert_eq!((r.baseline_bytes, r.trace_bytes), (64 * KIB, 128 * KIB));

    // Exact tolerances: the IO size change is a finding of its own.
    let mut base = base;
    base.defaults.tolerances = Tolerances::exact();
    base.defaults.min_ios = 1;
    let mut t = trace(w, 64, Some(0));
    t.sum.ios = [0, 0, 32];
    let mut c = comparison(&base, vec![t], false);
    c.judge_groups();
    let kinds: Vec<FindingKind> = c.regressions.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::IoSize]);
}

#[test]
fn aggregates_catch_what_no_group_shows() {
    // A role's IO spread over new groups, each below the floor, together beyond it.
    let a = key("writer", Via::Direct, ReasonClass::None, "/d/a");
    let mut base = baseline(vec![group(a.clone(), 100)]);
    base.defaults.min_bytes = 60 * KIB;
    let mut one = a.clone();
    one.frames = vec!["path_one".into()];
    let mut two = a.clone();
    two.frames = vec!["path_two".into()];
    let mut c = comparison(
        &base,
        vec![
            trace(a, 100, Some(0)),
            trace(one, 40, None),
            trace(two, 40, None),
        ],
        false,
    );
    c.judge_groups();
    assert!(c.regressions.is_empty());
    assert_eq!(c.small_new, 2);
    c.judge_aggregates();
    assert_eq!(c.regressions.len(), 1);
    let f = &c.regressions[0];
    assert_eq!(f.scope, Scope::Role);
    assert_eq!(
        f.message,
        "writer on /d/a (all intents): write bytes 180.0 KiB vs 100.0 KiB baseline (+80%, tolerance 15%)"
    );
}
