//! Unit tests with constructed workloads.

use ioblame_attrib::{ActTotals, Intent, Role, Via, WbReason};
use ioblame_counters::{DEFAULT_COUNTERS, SLOTS};

use crate::*;

const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;

/// One act of a constructed workload, owning what [`ActInput`] borrows.
#[derive(Clone)]
struct Act {
    role: Role,
    intent: Intent,
    frames: Vec<String>,
    /// The application's frames, as the analyzer labels them.
    user: Vec<String>,
    path: Option<String>,
    via: Via,
    reason: Option<WbReason>,
    bytes: [u64; 3],
    ios: [u64; 3],
    sync: u64,
    hist: Vec<[u64; SLOTS]>,
    /// Q2C of its IOs and the part behind other requests (ns).
    blame: (u64, u64),
}

impl Act {
    fn input(&self) -> ActInput<'_> {
        ActInput {
            role: &self.role,
            intent: &self.intent,
            frames: self.frames.clone(),
            user: self.user.clone(),
            file_path: self.path.clone(),
            via: self.via,
            reason: self.reason,
            recorder: false,
            totals: ActTotals {
                bytes: self.bytes,
                ios: self.ios,
                ..ActTotals::default()
            },
            sync_write_bytes: self.sync,
            histograms: self.hist.clone(),
            q2c_ns: self.blame.0,
            behind_ns: self.blame.1,
        }
    }
}

/// Symbolized frames as the analyzer prints them; `build` shifts addresses and offsets
/// like another kernel build would.
fn frames(names: &[&str], build: u64) -> Vec<String> {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let addr = 0xffff_ffff_8100_0000u64 + build * 0x10_0000 + i as u64 * 0x1234;
            format!(
                "[{addr:x}] {n}+{:#x}/{:#x}",
                0x20 + build * 8 + i as u64,
                0x300 + build * 16
            )
        })
        .collect()
}

const DIRTY_EXT4: &[&str] = &[
    "__folio_mark_dirty",
    "mark_buffer_dirty",
    "block_commit_write",
    "block_write_end",
    "ext4_da_write_end",
    "generic_perform_write",
    "ext4_buffered_write_iter",
    "vfs_write",
    "ksys_write",
    "do_syscall_64",
];
const DIO_EXT4: &[&str] = &[
    "submit_bio_noacct_nocheck",
    "iomap_dio_bio_iter",
    "__iomap_dio_rw",
    "iomap_dio_rw",
    "ext4_file_write_iter",
    "vfs_write",
];
const READ_XFS: &[&str] = &[
    "submit_bio_noacct_nocheck",
    "iomap_read_folio_iter",
    "iomap_readahead",
    "read_pages",
    "page_cache_ra_order",
    "filemap_get_pages",
    "filemap_read",
];
const JOURNAL: &[&str] = &[
    "submit_bio_noacct_nocheck",
    "jbd2_journal_commit_transaction",
    "kjournald2",
];

/// Histograms for the default counters: all IOs of direction `dir` of the given size slot,
/// with wait/io times and offsets spread over a few slots.
fn hists(dir: usize, ios: u64, size_slot: usize) -> Vec<[u64; SLOTS]> {
    let mut h = vec![[0u64; SLOTS]; DEFAULT_COUNTERS.len()];
    let spread = |slots: &[(usize, u64)]| {
        let mut x = [0u64; SLOTS];
        let total: u64 = slots.iter().map(|s| s.1).sum();
        let mut left = ios;
        for (k, &(s, w)) in slots.iter().enumerate() {
            let c = if k + 1 == slots.len() {
                left
            } else {
                ios * w / total
            };
            x[s] += c;
            left -= c;
        }
        x
    };
    h[dir] = spread(&[(size_slot, 1)]);
    h[3 + dir] = spread(&[(0, 3), (1, 2), (3, 1)]);
    h[6 + dir] = spread(&[(1, 1), (2, 4), (4, 1)]);
    h[if dir == 2 { 10 } else { 9 }] = spread(&[(2, 2), (3, 1)]);
    h
}

fn role(comm: &str, pid: u32) -> Role {
    Role {
        pid,
        tid: pid,
        comm: comm.to_string(),
        generation: 0,
        cgroup: 0,
        lineage: false,
    }
}

/// `build` varies what changes between runs and hosts: pids, per-CPU kworker names, loop
/// device numbers, kernel addresses and frame offsets.
struct World {
    build: u64,
}

impl World {
    #[allow(clippy::too_many_arguments)]
    fn act(
        &self,
        comm: &str,
        names: &[&str],
        path: Option<&str>,
        via: Via,
        reason: Option<u32>,
        dir: usize,
        bytes: u64,
        io_size: u64,
        sync: bool,
    ) -> Act {
        let ios = bytes.div_ceil(io_size);
        let size_slot = match io_size {
            s if s < 4096 => 0,
            s if s < 8192 => 1,
            s if s < 16384 => 2,
            s if s < 32768 => 3,
            s if s < 65536 => 4,
            s if s < 131072 => 5,
            s if s < 524288 => 6,
            _ => 7,
        };
        let mut b = [0; 3];
        let mut n = [0; 3];
        b[dir] = bytes;
        n[dir] = ios;
        Act {
            role: role(comm, 1000 + self.build as u32 * 7),
            intent: Intent {
                modifier: reason.map_or(0, |r| WbReason(r).modifier()),
                stack: vec![0xffff_ffff_8100_0000 + self.build],
                user: Vec::new(),
            },
            frames: frames(names, self.build),
            user: Vec::new(),
            path: path.map(str::to_string),
            via,
            reason: reason.map(WbReason),
            bytes: b,
            ios: n,
            sync: if sync && dir == 2 { bytes } else { 0 },
            hist: hists(dir, ios, size_slot),
            blame: (0, 0),
        }
    }

    /// The application's test workload.
    fn workload(&self) -> Vec<Act> {
        let kw = format!("kworker/u{}:{}", 8 + self.build * 8, self.build % 5);
        let jbd = format!("jbd2/loop{}-8", 3 + self.build);
        vec![
            // A buffered writer flushed by the flusher.
            self.act(
                "writerA",
                DIRTY_EXT4,
                Some("/data/a.bin"),
                Via::Page,
                Some(3),
                2,
                8 * MIB,
                128 * KIB,
                false,
            ),
            // A database file written with fsync.
            self.act(
                "dbwriter",
                DIRTY_EXT4,
                Some("/data/db/000042.log"),
                Via::Page,
                None,
                2,
                4 * MIB,
                16 * KIB,
                true,
            ),
            // A reader.
            self.act(
                "reader",
                READ_XFS,
                Some("/data/in.bin"),
                Via::Readahead,
                None,
                1,
                16 * MIB,
                128 * KIB,
                false,
            ),
            // Journal commits.
            self.act(
                &jbd,
                JOURNAL,
                None,
                Via::Journal,
                None,
                2,
                2 * MIB,
                16 * KIB,
                true,
            ),
            // Writeback the attribution could not link.
            self.act(
                &kw,
                &[],
                Some("/data/a.bin"),
                Via::Unknown,
                Some(3),
                2,
                512 * KIB,
                128 * KIB,
                false,
            ),
            // Small metadata writes.
            self.act(
                &kw,
                &["__mark_inode_dirty", "ext4_dirty_inode"],
                None,
                Via::Inode,
                Some(3),
                2,
                48 * KIB,
                4 * KIB,
                false,
            ),
        ]
    }
}

fn specs() -> Vec<&'static str> {
    DEFAULT_COUNTERS.to_vec()
}

fn inputs(acts: &[Act]) -> Vec<ActInput<'_>> {
    acts.iter().map(Act::input).collect()
}

fn baseline() -> Baseline {
    let acts = World { build: 0 }.workload();
    Baseline::build(&inputs(&acts), &specs(), &BuildOptions::default()).unwrap()
}

fn run_check(base: &Baseline, acts: &[Act]) -> CheckReport {
    check(base, &inputs(acts), &specs()).unwrap()
}

fn text(r: &CheckReport) -> String {
    let mut v = Vec::new();
    r.render_text(&mut v).unwrap();
    String::from_utf8(v).unwrap()
}

/// A small deterministic generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    /// Uniform in -1.0..1.0.
    fn unit(&mut self) -> f64 {
        (self.next() % 20001) as f64 / 10000.0 - 1.0
    }
}

/// The ordinary jitter of a real capture.
fn jitter(acts: &mut Vec<Act>, rng: &mut Rng) {
    let mut moved = Vec::new();
    for a in acts.iter_mut() {
        for d in 0..3 {
            if a.bytes[d] == 0 {
                continue;
            }
            // Bytes +-5%, IO counts +-40%.
            let nb = (a.bytes[d] as f64 * (1.0 + 0.05 * rng.unit())) as u64;
            if a.sync > 0 {
                a.sync = nb;
            }
            a.bytes[d] = nb;
            let ni = ((a.ios[d] as f64) * (1.0 + 0.4 * rng.unit())).max(1.0) as u64;
            a.ios[d] = ni;
        }
        // Histogram shapes: a fraction of each slot moves one slot up or down; the counts
        // follow the new IO count.
        for h in a.hist.iter_mut() {
            let n: u64 = h.iter().sum();
            if n == 0 {
                continue;
            }
            let frac = 0.5 * (rng.unit() + 1.0) / 2.0;
            let up = rng.next() % 2 == 0;
            let mut out = [0u64; SLOTS];
            for (s, &c) in h.iter().enumerate() {
                let m = (c as f64 * frac) as u64;
                let t = if up {
                    (s + 1).min(SLOTS - 1)
                } else {
                    s.saturating_sub(1)
                };
                out[t] += m;
                out[s] += c - m;
            }
            let total = a.ios.iter().sum::<u64>().max(1);
            for x in out.iter_mut() {
                *x = *x * total / n;
            }
            *h = out;
        }
        // Writeback links a varying share of the flusher's pages to their dirtier.
        if a.via == Via::Page && a.reason.is_some() {
            let share = 0.4 * (rng.unit() + 1.0) / 2.0;
            let m = (a.bytes[2] as f64 * share) as u64;
            let mi = (a.ios[2] as f64 * share) as u64;
            a.bytes[2] -= m;
            a.ios[2] -= mi;
            let mut lost = a.clone();
            lost.via = Via::Unknown;
            lost.frames.clear();
            lost.intent.stack.clear();
            if rng.next() % 2 == 0 {
                lost.role.comm = "kworker/u8:2-flush-7:0".into();
            }
            lost.bytes = [0, 0, m];
            lost.ios = [0, 0, mi.max(1)];
            moved.push(lost);
        }
        // The flusher's reason depends on timing.
        if a.reason == Some(WbReason(3)) && rng.next() % 2 == 0 {
            a.reason = Some(WbReason(0));
            a.intent.modifier = WbReason(0).modifier();
        }
        // Whether sync(2) or the flusher's own schedule writes a page back depends on timing
        // too: part or all of a writer's pages go out with reason `sync`.
        if a.via == Via::Page && a.reason.is_some() && rng.next() % 2 == 0 {
            let share = (rng.unit() + 1.0) / 2.0;
            let m = (a.bytes[2] as f64 * share) as u64;
            let mi = ((a.ios[2] as f64 * share) as u64).min(a.ios[2]);
            a.bytes[2] -= m;
            a.ios[2] -= mi;
            let mut synced = a.clone();
            synced.reason = Some(WbReason(2));
            synced.intent.modifier = WbReason(2).modifier();
            synced.bytes = [0, 0, m];
            synced.ios = [0, 0, mi.max(1)];
            moved.push(synced);
        }
    }
    acts.extend(moved);
}

#[test]
fn own_trace_passes() {
    let base = baseline();
    let r = run_check(&base, &World { build: 0 }.workload());
    assert!(!r.regressed(), "{}", text(&r));
    assert!(r.groups_compared >= 4, "{}", text(&r));
    assert_eq!(r.trace_groups, base.groups.len());
}

#[test]
fn keys_are_stable() {
    let base = baseline();
    let roles: Vec<&str> = base.groups.iter().map(|g| g.key.role.as_str()).collect();
    assert!(roles.contains(&"kworker/*"), "{roles:?}");
    assert!(roles.contains(&"jbd2/*"), "{roles:?}");
    assert!(roles.contains(&"writerA"), "{roles:?}");
    let a = base
        .groups
        .iter()
        .find(|g| g.key.role == "writerA")
        .unwrap();
    assert_eq!(
        a.key.frames,
        [
            "ext4_da_write_end",
            "generic_perform_write",
            "ext4_buffered_write_iter",
            "vfs_write"
        ]
    );
    assert_eq!(a.key.reason, ReasonClass::Flusher);
    assert_eq!(a.key.file, "/data/a.bin");
    let db = base
        .groups
        .iter()
        .find(|g| g.key.role == "dbwriter")
        .unwrap();
    assert_eq!(db.key.file, "/data/db/*.log");
    assert_eq!(db.sync_write_share, 1.0);
    let j = base.groups.iter().find(|g| g.key.role == "jbd2/*").unwrap();
    assert_eq!(j.key.file, "-");
    assert_eq!(
        j.key.frames,
        ["jbd2_journal_commit_transaction", "kjournald2"]
    );
    // Proportions sum to one.
    for g in &base.groups {
        for h in &g.hist {
            assert!((h.p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        }
    }
}

#[test]
fn other_kernel_build_matches() {
    let base = baseline();
    for build in 1..4 {
        let r = run_check(&base, &World { build }.workload());
        assert!(!r.regressed(), "build {build}: {}", text(&r));
        assert_eq!(r.trace_groups, base.groups.len());
        assert!(
            r.notes.iter().all(|n| !n.contains("new group")),
            "{:?}",
            r.notes
        );
    }
}

#[test]
fn jitter_passes() {
    let base = baseline();
    for seed in 0..40 {
        let mut rng = Rng(seed * 7919 + 1);
        let mut acts = World { build: seed % 3 }.workload();
        jitter(&mut acts, &mut rng);
        let r = run_check(&base, &acts);
        assert!(!r.regressed(), "seed {seed}: {}", text(&r));
    }
}

#[test]
fn jittered_baseline_passes_jittered_runs() {
    // The baseline itself comes from a noisy run.
    let mut acts = World { build: 2 }.workload();
    jitter(&mut acts, &mut Rng(99));
    let base = Baseline::build(&inputs(&acts), &specs(), &BuildOptions::default()).unwrap();
    let base = Baseline::from_toml(&base.to_toml()).unwrap();
    for seed in 0..40 {
        let mut acts = World { build: seed % 4 }.workload();
        jitter(&mut acts, &mut Rng(seed * 31 + 5));
        let r = run_check(&base, &acts);
        assert!(!r.regressed(), "seed {seed}: {}", text(&r));
    }
}

#[test]
fn doubled_writer_fails() {
    let base = baseline();
    let mut acts = World { build: 1 }.workload();
    acts[0].bytes[2] *= 2;
    acts[0].ios[2] *= 2;
    let r = run_check(&base, &acts);
    assert!(r.regressed());
    assert_eq!(r.regressions.len(), 1, "{}", text(&r));
    let f = &r.regressions[0];
    assert_eq!(f.kind, FindingKind::Bytes);
    assert_eq!(f.metric, "write_bytes");
    assert_eq!(
        f.message,
        "writerA via page (flusher writeback) on /data/a.bin: write bytes 16.0 MiB vs 8.0 MiB baseline (+100%, tolerance 15%)"
    );
    assert_eq!(f.baseline, (8 * MIB) as f64);
    assert_eq!(f.current, (16 * MIB) as f64);
    // Also under jitter.
    for seed in 0..20 {
        let mut acts = World { build: 0 }.workload();
        jitter(&mut acts, &mut Rng(seed + 1000));
        for a in acts.iter_mut().filter(|a| a.role.comm == "writerA") {
            a.bytes[2] *= 2;
        }
        let r = run_check(&base, &acts);
        assert!(r.regressed(), "seed {seed}: {}", text(&r));
        assert!(
            r.regressions.iter().all(|f| f.role == "writerA"),
            "seed {seed}: {}",
            text(&r)
        );
        assert!(
            r.regressions.iter().any(|f| f.kind == FindingKind::Bytes),
            "seed {seed}: {}",
            text(&r)
        );
    }
}

#[test]
fn halved_writer_fails() {
    let base = baseline();
    let mut acts = World { build: 0 }.workload();
    acts[1].bytes[2] /= 2;
    acts[1].sync /= 2;
    let r = run_check(&base, &acts);
    assert_eq!(r.regressions.len(), 1, "{}", text(&r));
    assert_eq!(
        r.regressions[0].message,
        "dbwriter via page on /data/db/*.log: write bytes 2.0 MiB vs 4.0 MiB baseline (-50%, tolerance 15%)"
    );
}

#[test]
fn buffered_to_direct_fails() {
    let base = baseline();
    let w = World { build: 1 };
    let mut acts = w.workload();
    // writerA opens its file with O_DIRECT: the IO is charged to it directly, WS.
    acts[0] = w.act(
        "writerA",
        DIO_EXT4,
        Some("/data/a.bin"),
        Via::Direct,
        None,
        2,
        8 * MIB,
        128 * KIB,
        true,
    );
    // No more flusher leftovers on that file.
    acts.retain(|a| a.via != Via::Unknown);
    let r = run_check(&base, &acts);
    let t = text(&r);
    assert!(r.regressed(), "{t}");
    let new = r
        .regressions
        .iter()
        .find(|f| f.kind == FindingKind::NewGroup)
        .expect(&t);
    assert_eq!(new.via.as_deref(), Some("direct"));
    assert_eq!(new.role, "writerA");
    assert_eq!(
        new.message,
        "new group writerA via direct on /data/a.bin: write 8.0 MiB in 64 IOs (27% of the trace), not in the baseline"
    );
    assert_eq!(
        new.frames,
        [
            "iomap_dio_bio_iter",
            "__iomap_dio_rw",
            "iomap_dio_rw",
            "ext4_file_write_iter"
        ]
    );
    let gone = r
        .regressions
        .iter()
        .find(|f| f.kind == FindingKind::VanishedGroup)
        .expect(&t);
    assert_eq!(gone.via.as_deref(), Some("page"));
    assert_eq!(
        gone.message,
        "writerA via page (flusher writeback) on /data/a.bin: vanished: write 8.0 MiB in the baseline (26% of it), none in this trace"
    );
    // The role's bytes on the file did not change: no aggregate finding.
    assert_eq!(r.regressions.len(), 2, "{t}");
    assert!(
        t.contains("intent: iomap_dio_bio_iter <- __iomap_dio_rw"),
        "{t}"
    );
}

#[test]
fn new_writer_fails() {
    let base = baseline();
    let w = World { build: 0 };
    let mut acts = w.workload();
    acts.push(w.act(
        "writerC",
        DIRTY_EXT4,
        Some("/data/c.bin"),
        Via::Page,
        Some(0),
        2,
        4 * MIB,
        128 * KIB,
        false,
    ));
    let r = run_check(&base, &acts);
    assert_eq!(r.regressions.len(), 1, "{}", text(&r));
    let f = &r.regressions[0];
    assert_eq!(f.kind, FindingKind::NewGroup);
    assert_eq!(f.role, "writerC");
    assert!(
        f.message.starts_with(
            "new group writerC via page (flusher writeback) on /data/c.bin: write 4.0 MiB"
        ),
        "{}",
        f.message
    );
    // A tiny new writer is only a note.
    let mut acts = w.workload();
    acts.push(w.act(
        "writerC",
        DIRTY_EXT4,
        Some("/data/c.bin"),
        Via::Page,
        Some(0),
        2,
        64 * KIB,
        4 * KIB,
        false,
    ));
    let r = run_check(&base, &acts);
    assert!(!r.regressed(), "{}", text(&r));
    assert!(r
        .notes
        .iter()
        .any(|n| n.contains("1 new group below the floor")));
}

#[test]
fn new_sync_path_fails() {
    // writerA now fsyncs: its bytes are issued by itself (reason none) with S. Its group
    // and the flusher's are siblings (bytes move between them with timing), so the change
    // shows as what it is: synchronous writes where there were none.
    let base = baseline();
    let w = World { build: 0 };
    let mut acts = w.workload();
    acts[0] = w.act(
        "writerA",
        DIRTY_EXT4,
        Some("/data/a.bin"),
        Via::Page,
        None,
        2,
        8 * MIB,
        128 * KIB,
        true,
    );
    let r = run_check(&base, &acts);
    assert_eq!(r.regressions.len(), 1, "{}", text(&r));
    let f = &r.regressions[0];
    assert_eq!(f.kind, FindingKind::SyncWriteShare, "{}", text(&r));
    assert_eq!(
        f.message,
        "writerA via page (own IO or flusher writeback) on /data/a.bin: sync writes 100% of write bytes vs 0% baseline (tolerance 15 points)"
    );
    assert_eq!(f.reason.as_deref(), Some("none+flusher"));
}

/// The wait behind others (`ioblame blame`): a group whose IOs spent 10% of their Q2C
/// behind other IO fails when that grows past the tolerance (10 points), not when it grows
/// less or shrinks; it round-trips through the file; a baseline without it (written before)
/// judges nothing of it.
#[test]
fn wait_behind_others_grown_fails() {
    let w = World { build: 0 };
    let mut acts = w.workload();
    acts[0].blame = (1_000_000_000, 100_000_000);
    let base = Baseline::build(&inputs(&acts), &specs(), &BuildOptions::default()).unwrap();
    let g = base
        .groups
        .iter()
        .find(|g| g.behind_share.is_some())
        .expect("a group with its wait behind others");
    assert_eq!(g.behind_share, Some(0.1));
    assert_eq!(
        base.groups
            .iter()
            .filter(|g| g.behind_share.is_some())
            .count(),
        1
    );
    let text_of = |b: &Baseline| b.to_toml();
    let back = Baseline::from_toml(&text_of(&base)).unwrap();
    let shares = |b: &Baseline| b.groups.iter().map(|g| g.behind_share).collect::<Vec<_>>();
    assert_eq!(shares(&back), shares(&base));
    assert!(text_of(&base).contains("behind_share = 0.1"));
    for (behind, fails) in [(400_000_000, true), (150_000_000, false), (0, false)] {
        let mut now = w.workload();
        now[0].blame = (1_000_000_000, behind);
        let r = run_check(&back, &now);
        let found: Vec<_> = r
            .regressions
            .iter()
            .filter(|f| f.kind == FindingKind::BehindShare)
            .collect();
        assert_eq!(found.len(), usize::from(fails), "{behind}: {}", text(&r));
        if fails {
            assert!(
                found[0]
                    .message
                    .contains("waited behind other IO 40% of their time vs 10% baseline"),
                "{}",
                found[0].message
            );
            assert!(r.regressed());
        }
    }
    // Written before the metric: nothing judged.
    let old = text_of(&base).replace(
        "behind_share = 0.1  # of its IOs' Q2C, behind other IO\n",
        "",
    );
    let old = Baseline::from_toml(&old).unwrap();
    assert!(old.groups.iter().all(|g| g.behind_share.is_none()));
    let mut now = w.workload();
    now[0].blame = (1_000_000_000, 900_000_000);
    assert!(run_check(&old, &now)
        .regressions
        .iter()
        .all(|f| f.kind != FindingKind::BehindShare));
    // A baseline group of too few IOs is not judged; exact tolerances judge both ways.
    let mut exact = base.clone();
    exact.defaults.tolerances.behind_share = Some(crate::tolerances::Tol::Value(0.001));
    let mut now = w.workload();
    now[0].blame = (1_000_000_000, 50_000_000);
    assert!(run_check(&exact, &now)
        .regressions
        .iter()
        .any(|f| f.kind == FindingKind::BehindShare));
    let mut few = exact.clone();
    for g in &mut few.groups {
        g.ios = [0, 0, 1];
    }
    assert!(run_check(&few, &now)
        .regressions
        .iter()
        .all(|f| f.kind != FindingKind::BehindShare));
    // A share outside 0..=1 is refused.
    let bad = text_of(&base).replace("behind_share = 0.1", "behind_share = 1.5");
    assert!(Baseline::from_toml(&bad).is_err());
}

#[test]
fn reads_turned_random_fail() {
    let base = baseline();
    let w = World { build: 0 };
    let mut acts = w.workload();
    acts[2] = w.act(
        "reader",
        READ_XFS,
        Some("/data/in.bin"),
        Via::Readahead,
        None,
        1,
        16 * MIB,
        4 * KIB,
        false,
    );
    let r = run_check(&base, &acts);
    let t = text(&r);
    let size = r
        .regressions
        .iter()
        .find(|f| f.kind == FindingKind::IoSize)
        .expect(&t);
    assert_eq!(
        size.message,
        "reader via readahead on /data/in.bin: average readahead size 4.0 KiB vs 128.0 KiB baseline (-97%, tolerance 150%; 4096 IOs vs 128)"
    );
    let hist = r
        .regressions
        .iter()
        .find(|f| f.kind == FindingKind::Histogram)
        .expect(&t);
    assert!(hist.metric.starts_with("A size"), "{t}");
    assert_eq!(hist.current, 5.0);
}

#[test]
fn shifts_to_unattributed_pass_but_not_without_them() {
    let base = baseline();
    let w = World { build: 0 };
    // 6 of writerA's 8 MiB were not linked: charged to the flusher as unknown.
    let mut acts = w.workload();
    acts[0].bytes[2] = 2 * MIB;
    acts[0].ios[2] /= 4;
    acts[4].bytes[2] += 6 * MIB;
    let r = run_check(&base, &acts);
    assert!(!r.regressed(), "{}", text(&r));
    // All of it.
    let mut acts = w.workload();
    acts[4].bytes[2] += acts[0].bytes[2];
    acts.remove(0);
    let r = run_check(&base, &acts);
    assert!(!r.regressed(), "{}", text(&r));
    assert!(r
        .notes
        .iter()
        .any(|n| n.contains("unattributed in this trace")));
    // The same loss without the unknown bytes is a regression.
    let mut acts = w.workload();
    acts[0].bytes[2] = 2 * MIB;
    acts[0].ios[2] /= 4;
    let r = run_check(&base, &acts);
    assert_eq!(r.regressions.len(), 1, "{}", text(&r));
    assert_eq!(r.regressions[0].kind, FindingKind::Bytes);
}

#[test]
fn toml_round_trips() {
    let base = baseline();
    let text1 = base.to_toml();
    let back = Baseline::from_toml(&text1).unwrap();
    let text2 = back.to_toml();
    assert_eq!(text1, text2);
    assert_eq!(back.groups.len(), base.groups.len());
    assert_eq!(back.counters.len(), DEFAULT_COUNTERS.len());
    assert_eq!(back.total_bytes, base.total_bytes);
    assert_eq!(back.defaults.tolerances, base.defaults.tolerances);
    for (a, b) in base.groups.iter().zip(&back.groups) {
        assert_eq!(a.key, b.key);
        assert_eq!(a.bytes, b.bytes);
        assert_eq!(a.ios, b.ios);
        assert_eq!(a.name, b.name);
        for (x, y) in a.hist.iter().zip(&b.hist) {
            for (p, q) in x.p.iter().zip(&y.p) {
                assert!((p - q).abs() < 0.002);
            }
        }
    }
    // The read-back baseline judges like the original.
    let r = run_check(&back, &World { build: 2 }.workload());
    assert!(!r.regressed(), "{}", crate::tests::text(&r));
    assert!(text1.contains("[defaults]\nmin_bytes = 262144"));
    assert!(text1.contains("write_bytes = 0.15  #"));
    assert!(text1.contains("hist_offset = \"off\""));
    assert!(text1.contains("role = \"kworker/*\""));
}

/// The baseline text with `line` added after the first line starting with `after` in the
/// group whose role is `role`.
fn edit_group(text: &str, role: &str, after: &str, line: &str) -> String {
    let mut out = String::new();
    let mut in_group = false;
    let mut done = false;
    for l in text.lines() {
        out.push_str(l);
        out.push('\n');
        if l.starts_with("role = ") {
            in_group = l == format!("role = \"{role}\"");
        }
        if in_group && !done && l.starts_with(after) {
            out.push_str(line);
            out.push('\n');
            done = true;
        }
    }
    assert!(done, "no line {after} in group {role}");
    out
}

#[test]
fn hand_edited_tolerance_takes_effect() {
    let base = baseline();
    let mut acts = World { build: 0 }.workload();
    acts[0].bytes[2] *= 2;
    assert!(run_check(&base, &acts).regressed());
    // Loosened for this group: the doubling is accepted, at group and role level.
    let edited = edit_group(
        &base.to_toml(),
        "writerA",
        "frames = ",
        "tolerance.write_bytes = 1.5",
    );
    let loose = Baseline::from_toml(&edited).unwrap();
    let g = loose
        .groups
        .iter()
        .find(|g| g.key.role == "writerA")
        .unwrap();
    assert_eq!(g.tolerance.write_bytes, Some(Tol::Value(1.5)));
    assert!(loose.to_toml().contains("tolerance.write_bytes = 1.5\n"));
    let r = run_check(&loose, &acts);
    assert!(!r.regressed(), "{}", text(&r));
    // "off" disables it.
    let edited = edit_group(
        &base.to_toml(),
        "writerA",
        "frames = ",
        "tolerance.write_bytes = \"off\"",
    );
    let off = Baseline::from_toml(&edited).unwrap();
    assert!(!run_check(&off, &acts).regressed());
    // Tightened: +8% now fails.
    let edited = edit_group(
        &base.to_toml(),
        "writerA",
        "frames = ",
        "tolerance.write_bytes = 0.02",
    );
    let tight = Baseline::from_toml(&edited).unwrap();
    let mut acts = World { build: 0 }.workload();
    acts[0].bytes[2] = acts[0].bytes[2] * 108 / 100;
    assert!(!run_check(&base, &acts).regressed());
    let r = run_check(&tight, &acts);
    assert_eq!(r.regressions.len(), 1, "{}", text(&r));
    assert!(r.regressions[0].message.ends_with("(+8%, tolerance 2%)"));
    // A global default edited in [defaults].
    let edited = base
        .to_toml()
        .replace("\nwrite_bytes = 0.15", "\nwrite_bytes = 0.05");
    let strict = Baseline::from_toml(&edited).unwrap();
    assert_eq!(
        strict.defaults.tolerances.write_bytes,
        Some(Tol::Value(0.05))
    );
    assert!(run_check(&strict, &acts).regressed());
}

#[test]
fn hand_edited_globs_match() {
    let base = baseline();
    // Two writer processes instead of one, with numbered names: a glob covers them.
    let text = base
        .to_toml()
        .replace("role = \"writerA\"", "role = \"writer*\"");
    let globbed = Baseline::from_toml(&text).unwrap();
    let w = World { build: 0 };
    let mut acts = w.workload();
    let mut second = acts[0].clone();
    second.role.comm = "writerB".into();
    acts[0].bytes[2] /= 2;
    second.bytes[2] /= 2;
    acts.push(second);
    let r = run_check(&globbed, &acts);
    assert!(!r.regressed(), "{}", crate::tests::text(&r));
    // Without the glob writerB is a new group and writerA halved.
    assert!(run_check(&base, &acts).regressed());
}

/// The 1-based line of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| !l.starts_with('#') && l.contains(needle))
        .unwrap()
        + 1
}

#[test]
fn malformed_baselines_name_the_line() {
    let good = baseline().to_toml();
    let cases: Vec<(String, &str, &str)> = vec![
        (
            good.replacen("via = \"page\"", "via = \"pagee\"", 1),
            "via = \"pagee\"",
            "unknown via 'pagee'",
        ),
        (
            good.replacen("via = \"page\"", "via = \"page", 1),
            "via = \"page",
            "",
        ),
        (
            edit_group(&good, "writerA", "frames = ", "tolerance.write_byte = 0.1"),
            "tolerance.write_byte",
            "unknown tolerance 'write_byte'",
        ),
        (
            edit_group(&good, "writerA", "frames = ", "tolerance.write_bytes = -1"),
            "tolerance.write_bytes = -1",
            "must be a number >= 0",
        ),
        (
            good.replacen("reason = \"flusher\"", "reason = \"periodic\"", 1),
            "reason = \"periodic\"",
            "unknown writeback reason class 'periodic'",
        ),
        (
            good.replacen("spec = \"R size", "spec = \"Q size", 1),
            "spec = \"Q size",
            "counter spec",
        ),
        (
            good.replacen("role = \"writerA\"", "rol = \"writerA\"", 1),
            "rol = \"writerA\"",
            "unknown field `rol`",
        ),
        (
            good.replacen("min_share = 0.01", "min_share = \"x\"", 1),
            "min_share = \"x\"",
            "min_share",
        ),
        (
            good.replacen("{ counter = 2,", "{ counter = 99,", 1),
            "{ counter = 99,",
            "counter 99 does not exist",
        ),
        (
            good.replacen("version = 1", "version = 7", 1),
            "version = 7",
            "unsupported baseline version 7",
        ),
    ];
    for (text, needle, what) in cases {
        let err = Baseline::from_toml(&text).unwrap_err();
        let want = line_of(&text, needle);
        match &err {
            BaselineError::Parse { line, problem, .. } => {
                assert_eq!(*line, want, "{needle}: {err}");
                assert!(problem.to_string().contains(what), "{needle}: {err}");
            }
            other => panic!("{needle}: no line: {other}"),
        }
        assert!(err
            .to_string()
            .starts_with(&format!("baseline line {want}, column ")));
    }
    assert!(Baseline::from_toml("").is_err());
}

#[test]
fn json_is_one_document() {
    let base = baseline();
    let mut acts = World { build: 0 }.workload();
    acts[0].bytes[2] *= 2;
    let r = run_check(&base, &acts);
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["regressed"], true);
    assert_eq!(v["regressions"][0]["kind"], "bytes");
    assert_eq!(v["regressions"][0]["scope"], "group");
    assert_eq!(v["regressions"][0]["role"], "writerA");
    assert_eq!(v["regressions"][0]["via"], "page");
    assert_eq!(v["regressions"][0]["tolerance"], 0.15);
    assert_eq!(v["regressions"][0]["change"], 1.0);
    let ok = run_check(&base, &World { build: 0 }.workload());
    let v: serde_json::Value = serde_json::from_str(&ok.to_json()).unwrap();
    assert_eq!(v["regressed"], false);
    assert!(text(&ok).starts_with("ioblame check: OK"));
}

#[test]
fn counters_must_match_to_compare_histograms() {
    let base = baseline();
    let w = World { build: 0 };
    let mut acts = w.workload();
    // Reads turned random, but the trace was analysed with one counter only.
    acts[2] = w.act(
        "reader",
        READ_XFS,
        Some("/data/in.bin"),
        Via::Readahead,
        None,
        1,
        16 * MIB,
        4 * KIB,
        false,
    );
    for a in &mut acts {
        a.hist = vec![a.hist[0]];
    }
    let r = check(&base, &inputs(&acts), &[DEFAULT_COUNTERS[0]]).unwrap();
    assert!(r
        .regressions
        .iter()
        .all(|f| f.kind != FindingKind::Histogram));
    assert!(r.notes.iter().any(|n| n.contains("not compared")));
    // Mismatched histogram counts are an input error.
    let err = check(&base, &inputs(&acts), &specs()).unwrap_err();
    assert!(matches!(err, BaselineError::Input(_)), "{err}");
}

#[test]
fn sync_share_change_fails() {
    let base = baseline();
    let mut acts = World { build: 0 }.workload();
    // dbwriter stopped using fsync for half of its writes (same path, same group).
    acts[1].sync /= 2;
    let r = run_check(&base, &acts);
    assert_eq!(r.regressions.len(), 1, "{}", text(&r));
    assert_eq!(
        r.regressions[0].message,
        "dbwriter via page on /data/db/*.log: sync writes 50% of write bytes vs 100% baseline (tolerance 15 points)"
    );
}

#[test]
fn text_report() {
    let base = baseline();
    let w = World { build: 1 };
    let mut acts = w.workload();
    acts[0] = w.act(
        "writerA",
        DIO_EXT4,
        Some("/data/a.bin"),
        Via::Direct,
        None,
        2,
        8 * MIB,
        128 * KIB,
        true,
    );
    let r = run_check(&base, &acts);
    assert_eq!(
        text(&r),
        "\
ioblame check: REGRESSION: 2 findings
  - writerA via page (flusher writeback) on /data/a.bin: vanished: write 8.0 MiB in the baseline (26% of it), none in this trace
      intent: ext4_da_write_end <- generic_perform_write <- ext4_buffered_write_iter <- vfs_write
  - new group writerA via direct on /data/a.bin: write 8.0 MiB in 64 IOs (26% of the trace), not in the baseline
      intent: iomap_dio_bio_iter <- __iomap_dio_rw <- iomap_dio_rw <- ext4_file_write_iter
notes:
  - unattributed bytes (lost intent): 512.0 KiB vs 512.0 KiB baseline; shifts between them and writeback-linked bytes (via page, buffer, inode) are not regressions
compared 4 of 6 baseline groups with 6 groups of the trace; 30.5 MiB vs 30.5 MiB baseline in total; changes below 312.8 KiB ignored
"
    );
}

#[test]
fn absurd_hand_edits_do_not_panic() {
    let good = baseline().to_toml();
    let big = regex_free_replace_all(
        &good,
        "write_bytes = ",
        "write_bytes = 9223372036854775807 #",
    );
    let base = Baseline::from_toml(&big).unwrap();
    let r = run_check(&base, &World { build: 0 }.workload());
    assert!(r.regressed());
    let zero = regex_free_replace_all(&good, "_ios = ", "_ios = 0 #");
    let base = Baseline::from_toml(&zero).unwrap();
    let _ = run_check(&base, &World { build: 0 }.workload());
}

/// Replaces every line prefix `from` (after the `[totals]` section) by `to`.
fn regex_free_replace_all(text: &str, from: &str, to: &str) -> String {
    let mut out = String::new();
    let mut groups = false;
    for l in text.lines() {
        groups |= l.starts_with("[[group]]");
        if groups && l.starts_with(from) {
            out.push_str(to);
            out.push_str(&l[from.len()..]);
        } else {
            out.push_str(l);
        }
        out.push('\n');
    }
    out
}

/// `acts[0]` (writerA, flusher writeback) with `sync_mib` of its 8 MiB written back by
/// sync(2) instead, as a sibling act.
fn split_sync(w: &World, sync_mib: u64) -> Vec<Act> {
    let mut acts = w.workload();
    let mut synced = acts[0].clone();
    synced.reason = Some(WbReason(2));
    synced.intent.modifier = WbReason(2).modifier();
    synced.bytes[2] = sync_mib * MIB;
    synced.ios[2] = sync_mib * 8;
    acts[0].bytes[2] -= sync_mib * MIB;
    acts[0].ios[2] -= sync_mib * 8;
    acts.push(synced);
    acts.retain(|a| a.bytes.iter().any(|&b| b > 0));
    acts
}

#[test]
fn bytes_moving_between_writeback_reasons_pass() {
    let w = World { build: 0 };
    let build = |acts: &[Act]| {
        let b = Baseline::build(&inputs(acts), &specs(), &BuildOptions::default()).unwrap();
        Baseline::from_toml(&b.to_toml()).unwrap()
    };
    // writerA's 8 MiB: 6 by sync(2) and 2 by the flusher in one run, all 8 by the flusher
    // (or all by sync) in another. Either way round, and in strict mode too.
    for (b, c) in [(6, 0), (0, 6), (6, 8), (8, 0), (2, 7)] {
        let base = build(&split_sync(&w, b));
        let acts = split_sync(&World { build: 1 }, c);
        let r = run_check(&base, &acts);
        assert!(!r.regressed(), "{b} vs {c} MiB by sync: {}", text(&r));
        let r = check_with(
            &base,
            &inputs(&acts),
            &specs(),
            &CheckOptions { strict: true },
        )
        .unwrap();
        assert!(
            !r.regressed(),
            "strict, {b} vs {c} MiB by sync: {}",
            text(&r)
        );
    }
    // A real change still fails: twice the bytes, whatever the split.
    let base = build(&split_sync(&w, 6));
    let mut acts = split_sync(&w, 2);
    for a in acts.iter_mut().filter(|a| a.role.comm == "writerA") {
        a.bytes[2] *= 2;
        a.ios[2] *= 2;
    }
    let r = run_check(&base, &acts);
    assert_eq!(r.regressions.len(), 1, "{}", text(&r));
    assert_eq!(
        r.regressions[0].message,
        "writerA via page (flusher or sync writeback) on /data/a.bin: write bytes 16.0 MiB vs 8.0 MiB baseline (+100%, tolerance 15%)"
    );
    assert_eq!(r.regressions[0].reason.as_deref(), Some("flusher+sync"));
    // Buffered to direct: the siblings vanish together, the direct group is new.
    let mut acts = split_sync(&w, 0);
    acts[0] = w.act(
        "writerA",
        DIO_EXT4,
        Some("/data/a.bin"),
        Via::Direct,
        None,
        2,
        8 * MIB,
        128 * KIB,
        true,
    );
    acts.retain(|a| a.via != Via::Unknown);
    let r = run_check(&base, &acts);
    let kinds: Vec<FindingKind> = r.regressions.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [FindingKind::VanishedGroup, FindingKind::NewGroup],
        "{}",
        text(&r)
    );
    assert!(r.regressions[0].message.starts_with(
        "writerA via page (flusher or sync writeback) on /data/a.bin: vanished: write 8.0 MiB"
    ));
    // A new writer, with its own split, is one new group.
    let mut acts = split_sync(&w, 3);
    for r in [0, 2] {
        let mut c = w.act(
            "writerC",
            DIRTY_EXT4,
            Some("/data/c.bin"),
            Via::Page,
            Some(r),
            2,
            2 * MIB,
            128 * KIB,
            false,
        );
        c.role.pid = 77;
        acts.push(c);
    }
    let r = run_check(&base, &acts);
    assert_eq!(r.regressions.len(), 1, "{}", text(&r));
    assert!(
        r.regressions[0].message.starts_with(
            "new group writerC via page (flusher or sync writeback) on /data/c.bin: write 4.0 MiB in 32 IOs"
        ),
        "{}",
        text(&r)
    );
}

#[test]
fn strict_mode_catches_lost_and_gained_attribution() {
    let base = baseline();
    let w = World { build: 0 };
    // An analyzer that lost writerA's link: all its bytes are unattributed.
    let mut lost = w.workload();
    lost[4].bytes[2] += lost[0].bytes[2];
    lost[4].ios[2] += lost[0].ios[2];
    lost.remove(0);
    let pool = run_check(&base, &lost);
    assert!(!pool.regressed(), "{}", text(&pool));
    let strict = CheckOptions { strict: true };
    let r = check_with(&base, &inputs(&lost), &specs(), &strict).unwrap();
    let t = text(&r);
    assert!(
        r.regressions.iter().any(|f| f.kind == FindingKind::VanishedGroup
            && f.role == "writerA"
            && f.message
                == "writerA via page (flusher writeback) on /data/a.bin: vanished: write 8.0 MiB in the baseline (26% of it), none in this trace"),
        "{t}"
    );
    assert!(
        r.regressions.iter().any(|f| f.kind == FindingKind::Bytes
            && f.role == "kworker/*"
            && f.via.as_deref() == Some("unknown")
            && f.message
                .contains("write bytes 8.5 MiB vs 512.0 KiB baseline")),
        "{t}"
    );
    assert!(t.contains("strict: compared like any group"), "{t}");
    // The same from the file's setting.
    let text_pool = base.to_toml();
    assert!(
        text_pool.contains("\nunattributed = \"pool\"  #"),
        "{text_pool}"
    );
    let file_strict = Baseline::from_toml(
        &text_pool.replace("unattributed = \"pool\"", "unattributed = \"strict\""),
    )
    .unwrap();
    assert_eq!(file_strict.defaults.unattributed, Unattributed::Strict);
    assert!(file_strict.to_toml().contains("unattributed = \"strict\""));
    assert_eq!(run_check(&file_strict, &lost).regressions, r.regressions);
    // The own workload passes strictly.
    let ok = check_with(&base, &inputs(&w.workload()), &specs(), &strict).unwrap();
    assert!(!ok.regressed(), "{}", text(&ok));
    // The other way round: a baseline where writerA was unattributed, and an analyzer that
    // now links it, gains a writer.
    let doctored = Baseline::build(&inputs(&lost), &specs(), &BuildOptions::default()).unwrap();
    assert!(!run_check(&doctored, &w.workload()).regressed());
    let r = check_with(&doctored, &inputs(&w.workload()), &specs(), &strict).unwrap();
    assert!(
        r.regressions
            .iter()
            .any(|f| f.kind == FindingKind::NewGroup && f.role == "writerA"),
        "{}",
        text(&r)
    );
    // A bad mode names the line.
    let bad = text_pool.replace("unattributed = \"pool\"", "unattributed = \"lax\"");
    let e = Baseline::from_toml(&bad).unwrap_err().to_string();
    assert!(
        e.contains("unattributed must be \"pool\" or \"strict\""),
        "{e}"
    );
    assert!(
        e.contains(&format!("line {}", line_of(&bad, "unattributed ="))),
        "{e}"
    );
}

#[test]
fn unattributed_bytes_never_explain_direct_io() {
    let w = World { build: 0 };
    // A baseline with 8 MiB of unattributed writeback of unknown file.
    let mut acts = w.workload();
    acts[4].bytes[2] = 8 * MIB;
    acts[4].ios[2] = 64;
    acts[4].path = None;
    let base = Baseline::build(&inputs(&acts), &specs(), &BuildOptions::default()).unwrap();
    // The unattributed bytes are gone, and a new O_DIRECT writer appears: unattributed IO is
    // writeback and cannot stand for direct IO.
    acts.remove(4);
    acts.push(w.act(
        "writerD",
        DIO_EXT4,
        Some("/data/d.bin"),
        Via::Direct,
        None,
        2,
        8 * MIB,
        128 * KIB,
        true,
    ));
    let r = run_check(&base, &acts);
    assert_eq!(r.regressions.len(), 1, "{}", text(&r));
    assert_eq!(r.regressions[0].kind, FindingKind::NewGroup);
    assert_eq!(r.regressions[0].role, "writerD");
}

#[test]
fn role_aggregates_say_what_unattributed_bytes_explained() {
    let w = World { build: 0 };
    // writerA writes through four code paths, each too small to be compared alone.
    let paths: [&[&str]; 4] = [
        &["ext4_da_write_end", "generic_perform_write", "a_write"],
        &["ext4_da_write_end", "generic_perform_write", "b_write"],
        &["ext4_da_write_end", "generic_perform_write", "c_write"],
        &["ext4_da_write_end", "generic_perform_write", "d_write"],
    ];
    let make = |kib: u64, unknown_kib: u64| {
        let mut acts = w.workload();
        acts.remove(0);
        acts[3].bytes[2] = unknown_kib * KIB;
        for p in paths {
            acts.push(w.act(
                "writerA",
                p,
                Some("/data/a.bin"),
                Via::Page,
                Some(3),
                2,
                kib * KIB,
                16 * KIB,
                false,
            ));
        }
        acts
    };
    let base =
        Baseline::build(&inputs(&make(200, 512)), &specs(), &BuildOptions::default()).unwrap();
    // Each path writes 400 KiB instead of 200 (below the floor each), and the unattributed
    // bytes fell by 300 KiB: the role's +800 KiB is +500 KiB after the credit.
    let r = run_check(&base, &make(400, 212));
    assert_eq!(r.regressions.len(), 1, "{}", text(&r));
    let f = &r.regressions[0];
    assert_eq!(f.scope, Scope::Role);
    assert_eq!(
        f.message,
        "writerA on /data/a.bin (all intents): write bytes 1.6 MiB vs 800.0 KiB baseline (+62%, tolerance 15%; 300.0 KiB of the change matched by unattributed bytes)"
    );
    assert_eq!(f.current, (1600 * KIB) as f64);
    assert!((f.change.unwrap() - 0.625).abs() < 1e-9);
    // Strict: no credit, and the message says nothing of it.
    let r = check_with(
        &base,
        &inputs(&make(400, 512)),
        &specs(),
        &CheckOptions { strict: true },
    )
    .unwrap();
    assert_eq!(
        r.regressions[0].message,
        "writerA on /data/a.bin (all intents): write bytes 1.6 MiB vs 800.0 KiB baseline (+100%, tolerance 15%)"
    );
}

#[test]
fn exact_baselines_pin_every_number() {
    let opts = BuildOptions {
        defaults: Defaults::exact(),
        ..BuildOptions::default()
    };
    let w = World { build: 0 };
    let base = Baseline::build(&inputs(&w.workload()), &specs(), &opts).unwrap();
    let text0 = base.to_toml();
    assert!(text0.contains("min_bytes = 0 "), "{text0}");
    assert!(text0.contains("unattributed = \"strict\""), "{text0}");
    assert!(text0.contains("hist_wait_time = 0.0\n"), "{text0}");
    assert!(
        text0.contains("# exact (`ioblame baseline --exact`)"),
        "{text0}"
    );
    let base = Baseline::from_toml(&text0).unwrap();
    assert_eq!(base.defaults, Defaults::exact());
    // Every group is kept, the same input passes, on other kernel builds too.
    assert_eq!(base.groups.len(), w.workload().len());
    for build in 0..3 {
        let r = run_check(&base, &World { build }.workload());
        assert!(!r.regressed(), "build {build}: {}", text(&r));
        assert_eq!(r.groups_compared, base.groups.len());
    }
    // One IO more, 4 KiB more, one IO moved to another histogram slot: all fail.
    let mut acts = w.workload();
    acts[3].ios[2] += 1;
    let r = run_check(&base, &acts);
    assert_eq!(r.regressions.len(), 1, "{}", text(&r));
    assert_eq!(r.regressions[0].kind, FindingKind::IoSize);
    let mut acts = w.workload();
    acts[5].bytes[2] += 4 * KIB;
    let r = run_check(&base, &acts);
    assert!(
        r.regressions
            .iter()
            .any(|f| f.kind == FindingKind::Bytes && f.message.contains("52.0 KiB vs 48.0 KiB")),
        "{}",
        text(&r)
    );
    let mut acts = w.workload();
    let h = &mut acts[1].hist[3 + 2];
    let from = h.iter().position(|&c| c > 0).unwrap();
    h[from] -= 1;
    h[from + 1] += 1;
    let r = run_check(&base, &acts);
    assert_eq!(r.regressions.len(), 1, "{}", text(&r));
    assert_eq!(r.regressions[0].kind, FindingKind::Histogram);
}

/// The frames of `acts` as the analyzer prints them without kernel symbols.
fn unsymbolized(mut acts: Vec<Act>) -> Vec<Act> {
    for a in &mut acts {
        a.frames = (0..a.frames.len())
            .map(|i| format!("[{:016x}]", 0xffff_ffff_8100_0000u64 + i as u64 * 64))
            .collect();
    }
    acts
}

#[test]
fn unsymbolized_traces_and_baselines_are_not_compared() {
    let base = baseline();
    assert!(base.symbolized);
    assert!(!base.to_toml().contains("symbols ="));
    let bare = unsymbolized(World { build: 0 }.workload());
    assert_eq!(inputs_symbolized(&inputs(&bare)), Some(false));
    let e = check(&base, &inputs(&bare), &specs()).unwrap_err();
    assert!(matches!(e, BaselineError::Symbols(_)), "{e}");
    assert!(e.to_string().contains("--kallsyms FILE"), "{e}");
    // A baseline made without symbols says so, and compares with unsymbolized traces only.
    let ub = Baseline::build(&inputs(&bare), &specs(), &BuildOptions::default()).unwrap();
    assert!(!ub.symbolized);
    assert!(ub
        .groups
        .iter()
        .filter(|g| !g.key.frames.is_empty())
        .all(|g| g.key.frames.iter().all(|f| f == "?")));
    let t = ub.to_toml();
    assert!(t.contains("\nsymbols = false  #"), "{t}");
    let ub = Baseline::from_toml(&t).unwrap();
    assert!(!ub.symbolized);
    assert!(!check(&ub, &inputs(&bare), &specs()).unwrap().regressed());
    let e = check(&ub, &inputs(&World { build: 0 }.workload()), &specs()).unwrap_err();
    assert!(e.to_string().contains("Make the baseline again"), "{e}");
    // Files from before `symbols` existed: told apart by their frames.
    let old = Baseline::from_toml(&t.replace("symbols = false", "")).unwrap();
    assert!(!old.symbolized);
    // No frames at all (recorded without callchains): comparable either way.
    let mut flat = World { build: 0 }.workload();
    for a in &mut flat {
        a.frames.clear();
    }
    assert_eq!(inputs_symbolized(&inputs(&flat)), None);
    assert!(check(&base, &inputs(&flat), &specs()).is_ok());
}

#[test]
fn the_scope_is_written_and_read_back_and_old_files_have_none() {
    let mut b = baseline();
    assert_eq!(Baseline::from_toml(&b.to_toml()).unwrap().scope, None);
    b.scope = Some("workload".into());
    let text = b.to_toml();
    assert!(text.contains("scope = \"workload\""), "{text}");
    assert_eq!(
        Baseline::from_toml(&text).unwrap().scope.as_deref(),
        Some("workload")
    );
}

/// A baseline file is edited by hand and may come from anywhere: nesting deep enough to
/// overflow a recursive parser's stack is an error (the TOML parser's own depth limit), not
/// a crash (the test runs on a 2 MiB test thread's stack).
#[test]
fn deeply_nested_baseline_is_an_error_not_a_stack_overflow() {
    let n = 100_000;
    for text in [
        format!("a = {}{}", "[".repeat(n), "]".repeat(n)),
        format!("a = {}{}", "{ b = ".repeat(n), "}".repeat(n)),
        format!("{} = 1", vec!["k"; n].join(".")),
        format!("[{}]", vec!["t"; n].join(".")),
    ] {
        let e = Baseline::from_toml(&text).unwrap_err().to_string();
        assert!(!e.is_empty());
    }
}

// ---- User frames (recorded with --user-stacks) ----

/// A baseline file as `ioblame baseline` wrote it before user frames were keyed (by the
/// commit before they were, from the acts of [`wal_and_checkpoint`] without user frames):
/// one group for the program's two functions. Kept verbatim: it must load, write back and
/// judge exactly as it did.
const OLD_BASELINE: &str = r#"# ioblame baseline: the IO behaviour a trace showed, grouped by stable keys.
# Made by `ioblame baseline`; checked by `ioblame check TRACE --baseline FILE`.
# Edit freely: tolerances here or per group (`tolerance.write_bytes = 0.10`, or "off"),
# globs in role/file (`*` any text, `?` one character). See docs/ci-regression.md.
version = 1

[keys]
frames = 4  # distinctive innermost frames kept in intent keys

[defaults]
min_bytes = 262144  # groups and changes below max(min_bytes, min_share * total bytes) are ignored
min_share = 0.01
min_ios = 32  # IO sizes and histograms are compared with at least this many IOs on both sides
unattributed = "pool"  # "pool": unattributed bytes explain changes of writeback groups; "strict": compared like any group
read_bytes = 0.25  # factor: bytes may grow x(1+t) or shrink /(1+t); reads depend on the page cache
readahead_bytes = 0.5  # readahead windows adapt to timing: loose
write_bytes = 0.15  # what the application writes is the most stable metric
read_io_size = 1.5  # average bytes per IO, same factor; catches reads that turned small/random
readahead_io_size = 1.5
write_io_size = 1.5  # IO counts jitter with merging: fails only past 2.5x
sync_write_share = 0.15  # absolute change of the share of write bytes with S (0.15 = 15 points)
hist_size = 1.5  # histogram shapes: earth mover's distance in slots, or "off"
hist_offset = "off"  # where on the device: host and filesystem state, not the application
hist_seek_dist = 2.0
hist_wait_time = "off"  # timing: the CI host's load, not the application
hist_io_time = "off"

[totals]  # the whole trace, small groups included
read_bytes = 0
readahead_bytes = 0
write_bytes = 8388608

[[group]]
name = "db via page on /srv/db/wal.log"
role = "db"
via = "page"
reason = "none"
file = "/srv/db/wal.log"
frames = ["ext4_da_write_end", "generic_perform_write", "ext4_buffered_write_iter", "vfs_write"]
write_bytes = 8388608  # 8.0 MiB
write_ios = 64
sync_write_share = 1.0
"#;

/// One program (`db`) writing one file through one kernel path from two functions:
/// `wal_append` 6 MiB, `checkpoint` `ckpt_mib` MiB, each through the C library's `write`
/// (its wrapper, skipped in the key) and called by `main`. `build` moves kernel addresses
/// (and pids) as another boot would; user frames are labelled as the analyzer labels them.
fn wal_and_checkpoint(build: u64, ckpt_mib: u64) -> Vec<Act> {
    let w = World { build };
    let act = |mib: u64, function: &str| {
        let mut a = w.act(
            "db",
            DIRTY_EXT4,
            Some("/srv/db/wal.log"),
            Via::Page,
            None,
            2,
            mib * MIB,
            128 * KIB,
            true,
        );
        a.hist.clear();
        a.user = vec![function.to_string(), "main".to_string()];
        a
    };
    vec![act(6, "wal_append"), act(ckpt_mib, "checkpoint")]
}

/// The acts without their user frames (a recording without `--user-stacks`).
fn without_user(mut acts: Vec<Act>) -> Vec<Act> {
    for a in &mut acts {
        a.user.clear();
    }
    acts
}

fn check_no_counters(base: &Baseline, acts: &[Act]) -> CheckReport {
    let none: [&str; 0] = [];
    check(base, &inputs(acts), &none).unwrap()
}

fn build_no_counters(acts: &[Act]) -> Baseline {
    let none: [&str; 0] = [];
    let b = Baseline::build(&inputs(acts), &none, &BuildOptions::default()).unwrap();
    Baseline::from_toml(&b.to_toml()).unwrap()
}

#[test]
fn user_frames_split_a_programs_functions_into_groups() {
    let acts = wal_and_checkpoint(0, 2);
    let base = build_no_counters(&acts);
    assert_eq!(base.user_frames, 2);
    let text = base.to_toml();
    assert!(
        text.contains("\nuser_frames = 2  # the application's innermost frames kept"),
        "{text}"
    );
    let keys: Vec<(&str, Vec<&str>)> = base
        .groups
        .iter()
        .map(|g| {
            (
                g.name.as_str(),
                g.key.user.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            (
                "db in wal_append via page on /srv/db/wal.log",
                vec!["wal_append", "main"]
            ),
            (
                "db in checkpoint via page on /srv/db/wal.log",
                vec!["checkpoint", "main"]
            ),
        ]
    );
    assert!(
        text.contains("\nuser = [\"checkpoint\", \"main\"]\n"),
        "{text}"
    );
    // Both keep the kernel's intent frames.
    assert!(base.groups.iter().all(|g| g.key.frames.len() == 4));
    // The same run on another boot passes.
    let r = check_no_counters(&base, &wal_and_checkpoint(1, 2));
    assert!(!r.regressed(), "{}", crate::tests::text(&r));
    assert_eq!(r.groups_compared, 2);
    // checkpoint writing half as much again (+50%) is within 15% of the program's 8 MiB,
    // but not of checkpoint's own 2 MiB: the group names it.
    let r = check_no_counters(&base, &wal_and_checkpoint(1, 3));
    assert_eq!(r.regressions.len(), 1, "{}", crate::tests::text(&r));
    let f = &r.regressions[0];
    assert_eq!(
        f.message,
        "db in checkpoint via page on /srv/db/wal.log: write bytes 3.0 MiB vs 2.0 MiB baseline (+50%, tolerance 15%)"
    );
    assert_eq!(f.user, ["checkpoint", "main"]);
    let out = crate::tests::text(&r);
    assert!(out.contains("\n      user: checkpoint <- main\n"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["regressions"][0]["user"][0], "checkpoint");
    // Without user keys (the old file of the same run) the change hides in the program's
    // total.
    let old = Baseline::from_toml(OLD_BASELINE).unwrap();
    let r = check_no_counters(&old, &wal_and_checkpoint(1, 3));
    assert!(!r.regressed(), "{}", crate::tests::text(&r));
    // A new function writing is a new group, named.
    let mut acts = wal_and_checkpoint(1, 2);
    let mut compact = acts[1].clone();
    compact.user[0] = "compact".into();
    acts.push(compact);
    let r = check_no_counters(&base, &acts);
    assert!(
        r.regressions.iter().any(|f| f.kind == FindingKind::NewGroup
            && f.message
                .starts_with("new group db in compact via page on /srv/db/wal.log: write 2.0 MiB")),
        "{}",
        crate::tests::text(&r)
    );
}

#[test]
fn old_baselines_load_write_back_and_judge_as_before() {
    let old = Baseline::from_toml(OLD_BASELINE).unwrap();
    assert_eq!(old.user_frames, 0);
    assert_eq!(old.groups.len(), 1);
    assert!(old.groups[0].key.user.is_empty());
    // Written back byte for byte: no `user_frames`, no `user`.
    assert_eq!(old.to_toml(), OLD_BASELINE);
    // A trace with user frames is judged exactly as the same trace without them.
    for ckpt in [2, 3, 6] {
        let with = check_no_counters(&old, &wal_and_checkpoint(1, ckpt));
        let without = check_no_counters(&old, &without_user(wal_and_checkpoint(1, ckpt)));
        assert_eq!(with.to_json(), without.to_json(), "checkpoint {ckpt} MiB");
        assert_eq!(with.regressed(), ckpt == 6, "{}", crate::tests::text(&with));
    }
    let r = check_no_counters(&old, &wal_and_checkpoint(1, 6));
    assert_eq!(
        r.regressions[0].message,
        "db via page on /srv/db/wal.log: write bytes 12.0 MiB vs 8.0 MiB baseline (+50%, tolerance 15%)"
    );
    assert!(r.regressions[0].user.is_empty());
    assert!(!r.to_json().contains("\"user\""));
    // The baseline of a trace without user frames is the old one: no user keys, and
    // nothing in the file says otherwise.
    let plain = build_no_counters(&without_user(wal_and_checkpoint(0, 2)));
    assert_eq!(plain.user_frames, 0);
    assert_eq!(plain.to_toml(), OLD_BASELINE);
}

#[test]
fn user_keys_take_globs_and_are_checked_when_read() {
    let base = build_no_counters(&wal_and_checkpoint(0, 2));
    let text = base.to_toml();
    // Renamed functions, globbed by hand.
    let globbed = text
        .replace(
            "user = [\"wal_append\", \"main\"]",
            "user = [\"wal_*\", \"*\"]",
        )
        .replace(
            "user = [\"checkpoint\", \"main\"]",
            "user = [\"checkpoint*\", \"main\"]",
        );
    let globbed = Baseline::from_toml(&globbed).unwrap();
    let mut acts = wal_and_checkpoint(1, 2);
    acts[0].user = vec!["wal_write".into(), "run".into()];
    acts[1].user = vec!["checkpoint_v2".into(), "main".into()];
    let r = check_no_counters(&globbed, &acts);
    assert!(!r.regressed(), "{}", crate::tests::text(&r));
    assert_eq!(r.groups_compared, 2);
    // Without the globs both are new and both vanished.
    let r = check_no_counters(&base, &acts);
    assert_eq!(
        r.regressions
            .iter()
            .filter(|f| f.kind == FindingKind::NewGroup)
            .count(),
        2,
        "{}",
        crate::tests::text(&r)
    );
    // A glob matches one frame, not a list of them: `["*"]` does not match two frames.
    let short = text.replace("user = [\"wal_append\", \"main\"]", "user = [\"*\"]");
    let short = Baseline::from_toml(&short).unwrap();
    let r = check_no_counters(&short, &wal_and_checkpoint(1, 2));
    assert!(r.regressed(), "{}", crate::tests::text(&r));
    // More user frames than the file keeps, or any in a file that keeps none, could never
    // match: an error naming the line.
    let three = text.replace(
        "user = [\"checkpoint\", \"main\"]",
        "user = [\"checkpoint\", \"main\", \"_start\"]",
    );
    let e = Baseline::from_toml(&three).unwrap_err().to_string();
    let line = line_of(&three, "\"_start\"");
    assert_eq!(
        e,
        format!("baseline line {line}, column 8: 3 user frames, more than [keys] user_frames = 2: they could never match")
    );
    let none = text.replace("user_frames = 2", "user_frames = 0");
    let e = Baseline::from_toml(&none).unwrap_err().to_string();
    assert!(e.contains("more than [keys] user_frames = 0"), "{e}");
    let unset = OLD_BASELINE.replace(
        "frames = [\"ext4_da_write_end\"",
        "user = [\"wal_append\"]\nframes = [\"ext4_da_write_end\"",
    );
    let e = Baseline::from_toml(&unset).unwrap_err().to_string();
    assert!(
        e.contains("1 user frames, more than [keys] user_frames = 0"),
        "{e}"
    );
    let big = text.replace("user_frames = 2", "user_frames = 65");
    let e = Baseline::from_toml(&big).unwrap_err().to_string();
    let line = line_of(&big, "user_frames = 65");
    assert_eq!(
        e,
        format!("baseline line {line}, column 15: user_frames must be 0..=64")
    );
    // A file that keeps fewer user frames than it was made with groups by fewer.
    let one = text
        .replace("user_frames = 2", "user_frames = 1")
        .replace(", \"main\"]", "]");
    let one = Baseline::from_toml(&one).unwrap();
    let mut acts = wal_and_checkpoint(1, 2);
    acts[0].user[1] = "run".into();
    let r = check_no_counters(&one, &acts);
    assert!(!r.regressed(), "{}", crate::tests::text(&r));
}

#[test]
fn unsymbolized_user_frames_key_by_module_whatever_the_build() {
    let mut acts = wal_and_checkpoint(0, 2);
    acts[0].user = vec!["db+0x1293".into(), "main".into()];
    let base = build_no_counters(&acts);
    assert!(base.groups.iter().any(|g| g.key.user == ["db+?", "main"]));
    assert!(base
        .groups
        .iter()
        .any(|g| g.name == "db in db+? via page on /srv/db/wal.log"));
    // Another build of the program: its offsets moved.
    let mut acts = wal_and_checkpoint(1, 2);
    acts[0].user = vec!["db+0x12c4".into(), "main".into()];
    let r = check_no_counters(&base, &acts);
    assert!(!r.regressed(), "{}", crate::tests::text(&r));
    assert_eq!(r.groups_compared, 2);
}

#[test]
fn a_trace_without_user_frames_is_not_compared_with_user_keys() {
    let none: [&str; 0] = [];
    let base = build_no_counters(&wal_and_checkpoint(0, 2));
    let bare = without_user(wal_and_checkpoint(1, 2));
    let e = check(&base, &inputs(&bare), &none).unwrap_err();
    assert!(
        matches!(e, BaselineError::NoUserFrames { user_frames: 2 }),
        "{e}"
    );
    assert!(e.to_string().contains("--user-stacks"), "{e}");
    // One act with user frames is enough: the others are groups without them (kernel
    // threads, the lost intent).
    let mut some = bare.clone();
    some[1].user = vec!["checkpoint".into(), "main".into()];
    assert!(check(&base, &inputs(&some), &none).is_ok());
    // A baseline whose groups have no user keys left compares with anything.
    let mut plain = base.clone();
    for g in &mut plain.groups {
        g.key.user.clear();
    }
    assert!(check(&plain, &inputs(&bare), &none).is_ok());
}
