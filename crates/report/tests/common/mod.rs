//! A deterministic, hand-built attribution: three roles (one with a hostile comm), five
//! intents, six acts, IOs over two seconds, the default counters.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use ioblame_attrib::{
    Act, ActId, ActTotals, Dir, FileKey, Intent, IntentId, Io, Role, RoleId, Summary, Tables, Via,
    WbReason,
};
use ioblame_counters::{CounterSet, IoContext};

pub const DEV: u32 = (8 << 20) | 1;

/// Frame names of the fixture's addresses.
pub fn sym(addr: u64) -> Option<String> {
    let name = match addr {
        0xa1 => "folio_mark_dirty",
        0xa2 => "generic_perform_write",
        0xa3 => "vfs_write",
        0xa4 => "ksys_write",
        0xb1 => "submit_bio",
        0xb2 => "ext4_mpage_readpages",
        0xb3 => "filemap_read",
        0xc1 => "jbd2_journal_commit_transaction",
        0xd1 => "iomap_dio_rw",
        0xd2 => "ext4_file_write_iter",
        _ => return None,
    };
    Some(format!("{name}+0x10/0x80"))
}

pub struct Fixture {
    pub tables: Tables,
    pub ios: Vec<Io>,
    pub counters: CounterSet,
    pub summary: Summary,
    pub paths: BTreeMap<FileKey, String>,
}

fn role(pid: u32, comm: &str) -> Role {
    Role {
        pid,
        tid: pid,
        comm: comm.to_string(),
        generation: 0,
        cgroup: 0,
        lineage: false,
    }
}

fn act(role: u32, intent: u32, ino: u64, via: Via) -> Act {
    Act {
        role: RoleId(role),
        intent: IntentId(intent),
        file: FileKey { dev: DEV, ino },
        via,
        reason: None,
        issuer: None,
        recorder: false,
    }
}

/// (act, dir, size, via, issuer, reason, wait µs, io µs) of a fixture IO.
type Shape = (u32, Dir, u64, Via, u32, Option<WbReason>, u64, u64);

/// `n_extra` more writes of act 0 are appended (for the streaming test).
pub fn fixture(n_extra: usize) -> Fixture {
    let mut tables = Tables {
        roles: vec![
            role(100, "dd"),
            role(200, "<script>alert(1)</script>"),
            role(300, "jbd2/sda1-8"),
            role(10, "kworker/u8:2"),
        ],
        intents: vec![
            Intent {
                modifier: 0,
                stack: vec![],
                user: Vec::new(),
            },
            Intent {
                modifier: 0,
                stack: vec![],
                user: Vec::new(),
            },
            Intent {
                modifier: WbReason(0).modifier(),
                stack: vec![0xa1, 0xa2, 0xa3, 0xa4],
                user: Vec::new(),
            },
            Intent {
                modifier: 0,
                stack: vec![0xb1, 0xb2, 0xb3],
                user: Vec::new(),
            },
            Intent {
                modifier: 0,
                stack: vec![0xc1],
                user: Vec::new(),
            },
            Intent {
                modifier: 0,
                stack: vec![0xb1, 0xd1, 0xd2, 0xffff_ffff_8100_0000],
                user: Vec::new(),
            },
        ],
        acts: vec![
            act(0, 2, 12, Via::Page),
            act(1, 3, 13, Via::Read),
            act(2, 4, 0, Via::Journal),
            act(0, 5, 12, Via::Direct),
            act(3, 1, 14, Via::Unknown),
            act(1, 3, 15, Via::Readahead),
        ],
        totals: vec![ActTotals::default(); 6],
    };
    let mut ios = Vec::new();
    let mut t = 1_000_000_000u64;
    let mut sector = 2048u64;
    // (act, dir, size, via, issuer, reason, wait µs, io µs)
    let pattern: [Shape; 8] = [
        (0, Dir::W, 131072, Via::Page, 3, Some(WbReason(0)), 40, 900),
        (0, Dir::W, 65536, Via::Page, 3, Some(WbReason(0)), 120, 1500),
        (1, Dir::R, 4096, Via::Read, 1, None, 5, 180),
        (5, Dir::A, 131072, Via::Readahead, 1, None, 8, 2600),
        (2, Dir::W, 8192, Via::Journal, 2, None, 300, 700),
        (3, Dir::W, 524288, Via::Direct, 0, None, 2, 12000),
        (
            4,
            Dir::W,
            4096,
            Via::Unknown,
            3,
            Some(WbReason(3)),
            60000,
            400,
        ),
        (1, Dir::R, 16384, Via::Read, 1, None, 9, 350),
    ];
    let n = 40 + n_extra;
    for i in 0..n {
        let (a, dir, size, via, issuer, reason, wait, iot) = if i < 40 {
            pattern[i % pattern.len()]
        } else {
            pattern[0]
        };
        let wait = wait + (i as u64 % 3) * 7;
        let queue = t;
        let issue = queue + wait * 1000;
        let complete = issue + iot * 1000;
        ios.push(Io {
            sector,
            queue_time: queue,
            issue_time: issue,
            complete_time: complete,
            wait_time: wait,
            io_time: iot,
            offset: ((i as u64 * 7919 + sector) % 65536) as u32,
            seek_dist: (i as u32 * 97) % 65536,
            issuer: RoleId(issuer),
            via,
            reason,
            ino: Some(tables.acts[a as usize].file.ino).filter(|&x| x != 0),
            file_offset: (via == Via::Page).then_some(i as u64 * 4096),
            journal_txn: (via == Via::Journal).then_some(7),
            journal_share: (via == Via::Journal).then_some(0.5),
            ..Io::new(DEV, dir, size, ActId(a))
        });
        t += 50_000_000;
        sector = (sector + size / 512 + 4096 * (i as u64 % 5)) % (1 << 24);
    }
    let mut counters = CounterSet::default_set();
    let mut summary = Summary::default();
    for io in &ios {
        tables.totals[io.act.index()].add(io.dir, io.size);
        summary.bytes[io.dir.index()] += io.size;
        summary.ios[io.dir.index()] += 1;
        if io.via == Via::Unknown {
            summary.unknown_bytes += io.size;
            summary.unknown_ios += 1;
        }
        let ctx = IoContext::for_io(&tables, io);
        counters.record(io, &ctx);
    }
    summary.lost_records = 12;
    summary.lost_windows.push(ioblame_attrib::LostWindow {
        start: 1_500_000_000,
        end: 1_500_100_000,
        cpu: 1,
        count: 12,
    });
    summary.bytes_in_lost_windows = 4096;
    let mut paths = BTreeMap::new();
    paths.insert(
        FileKey { dev: DEV, ino: 12 },
        "/data/big&file.bin".to_string(),
    );
    paths.insert(FileKey { dev: DEV, ino: 13 }, "/etc/<odd>name".to_string());
    Fixture {
        tables,
        ios,
        counters,
        summary,
        paths,
    }
}

/// A fresh directory under the target dir's `report-test/` (kept for people to look at).
pub fn out_dir(name: &str) -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = base.join("report-test").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes a whole report of the fixture into `dir`.
pub fn write_report(f: &Fixture, dir: &std::path::Path) -> ioblame_report::Report {
    let input = ioblame_report::ReportInput {
        paths: f.paths.clone(),
        traces: vec!["test.iob".to_string()],
        ..Default::default()
    };
    let mut w = ioblame_report::ReportWriter::create(dir, input).unwrap();
    for io in &f.ios {
        w.push_io(io, &f.tables).unwrap();
    }
    w.finish(&f.tables, &f.counters, &f.summary, &sym).unwrap()
}
