//! The `cgroup` column of the dataset's `acts` and `roles` (added within schema version 1):
//! exported from the trace's cgroup table, read back, and a dataset that mixes exports with
//! and without the column still answers the fleet query.

use std::path::Path;

use ioblame_attrib::{
    Act, ActId, ActTotals, CgroupNames, Dir, FileKey, Intent, IntentId, Io, Role, RoleId, Tables,
    Via,
};
use ioblame_counters::CounterSet;
use ioblame_dataset::{fleet, TraceInfo, TraceKeys, TraceWriter};
use ioblame_format::Cgroup;
use polars::prelude::*;

/// Two writers, one in `/db.slice` (id 9), one whose cgroup is unknown (id 0), each with
/// one act of `bytes[i]` written in one IO.
fn tables(bytes: [u64; 2]) -> (Tables, Vec<Io>) {
    let role = |pid, cgroup| Role {
        pid,
        tid: pid,
        comm: format!("w{pid}"),
        generation: 0,
        cgroup,
        lineage: false,
    };
    let act = |r| Act {
        role: RoleId(r),
        intent: IntentId(2),
        file: FileKey { dev: 1, ino: 12 },
        via: Via::Direct,
        reason: None,
        issuer: None,
        recorder: false,
    };
    let mut t = Tables {
        roles: vec![role(100, 9), role(200, 0)],
        // #0 nomem and #1 lost without stacks, then the writers' intent.
        intents: [vec![], vec![], vec![0xa1]]
            .map(|stack| Intent {
                modifier: 0,
                stack,
                user: Vec::new(),
            })
            .into(),
        acts: vec![act(0), act(1)],
        totals: vec![ActTotals::default(); 2],
    };
    let ios: Vec<Io> = (0..2)
        .map(|i| Io {
            sector: 8 * i as u64,
            queue_time: 1000,
            issue_time: 2000,
            complete_time: 3000,
            wait_time: 1,
            io_time: 1,
            issuer: RoleId(i as u32),
            via: Via::Direct,
            ino: Some(12),
            ..Io::new(1, Dir::W, bytes[i], ActId(i as u32))
        })
        .collect();
    for io in &ios {
        t.totals[io.act.index()].add(io.dir, io.size);
    }
    (t, ios)
}

fn keys(id: &str) -> TraceKeys {
    TraceKeys {
        host: "h1".into(),
        trace_id: id.into(),
        capture_start_ns: 1_764_000_000_000_000_000,
        kernel_release: "6.1".into(),
        labels: vec![],
    }
}

fn export(dataset: &Path, id: &str, bytes: [u64; 2], names: Option<&CgroupNames>) {
    let (t, ios) = tables(bytes);
    let mut w = TraceWriter::create(dataset, keys(id)).unwrap();
    for io in &ios {
        w.push_io(io, &t).unwrap();
    }
    let sym = |_: u64| Some("submit_bio".to_string());
    let paths = Default::default();
    w.finish(
        &t,
        &CounterSet::default_set(),
        &sym,
        &paths,
        names,
        &TraceInfo::default(),
    )
    .unwrap();
}

fn read(path: &Path) -> DataFrame {
    ParquetReader::new(std::fs::File::open(path).unwrap())
        .finish()
        .unwrap()
}

fn cgroups(df: &DataFrame) -> Vec<Option<String>> {
    let c = df.column("cgroup").unwrap().str().unwrap().clone();
    c.iter().map(|v| v.map(str::to_string)).collect()
}

/// The cgroup table of the exports that have one: `/db.slice` is id 9.
fn db_slice() -> Option<CgroupNames> {
    CgroupNames::new([Cgroup {
        id: 9,
        path: "/db.slice".into(),
    }])
}

#[test]
fn cgroup_column_round_trip() {
    let d = tempfile::tempdir().unwrap();
    export(
        d.path(),
        "00000000000000aa",
        [4096, 8192],
        db_slice().as_ref(),
    );
    for table in ["acts", "roles"] {
        let df = read(&keys("00000000000000aa").file(d.path(), table));
        assert_eq!(
            cgroups(&df),
            [Some("/db.slice".to_string()), None],
            "{table}"
        );
        // Added at the end of the table, as the schema's rule for a new column says.
        let last = df.get_column_names().last().map(|c| c.to_string());
        assert_eq!(last.as_deref(), Some("cgroup"), "{table}");
    }
    // A trace without a cgroup table: the column, all null.
    export(d.path(), "00000000000000bb", [4096, 8192], None);
    let df = read(&keys("00000000000000bb").file(d.path(), "acts"));
    assert_eq!(cgroups(&df), [None, None]);
}

/// Rewrites the table file `p` without the columns `cols`: an export from before them.
fn drop_columns(p: &Path, cols: &[&str]) {
    let mut df = read(p);
    for c in cols {
        df = df.drop(c).unwrap();
    }
    ParquetWriter::new(std::fs::File::create(p).unwrap())
        .finish(&mut df)
        .unwrap();
}

#[test]
fn exports_without_the_column_still_read() {
    // The export from before the columns second (aa's files come first), then first: polars
    // takes a scan's schema from its first file, so the fleet merges the files' schemas.
    for older in ["00000000000000bb", "00000000000000aa"] {
        let d = tempfile::tempdir().unwrap();
        export(
            d.path(),
            "00000000000000aa",
            [4096, 8192],
            db_slice().as_ref(),
        );
        export(
            d.path(),
            "00000000000000bb",
            [1 << 20, 0],
            db_slice().as_ref(),
        );
        for table in ["acts", "roles"] {
            drop_columns(&keys(older).file(d.path(), table), &["cgroup"]);
        }
        drop_columns(
            &keys(older).file(d.path(), "intents"),
            &["user_frames", "user_modules", "user_offsets"],
        );
        let f = fleet::query(d.path(), &fleet::Filter::default(), 10).unwrap();
        assert_eq!(f.traces, 2, "{older} older");
        let acts: i64 = f.top_acts.iter().map(|r| r.totals.bytes).sum();
        assert_eq!(acts, 4096 + 8192 + (1 << 20), "{older} older");
    }
    let d = tempfile::tempdir().unwrap();
    export(
        d.path(),
        "00000000000000aa",
        [4096, 8192],
        db_slice().as_ref(),
    );
    export(d.path(), "00000000000000bb", [1 << 20, 0], None);
    // The second as an export from before the column: its acts and roles without it.
    for table in ["acts", "roles"] {
        drop_columns(&keys("00000000000000bb").file(d.path(), table), &["cgroup"]);
    }
    let f = fleet::query(d.path(), &fleet::Filter::default(), 10).unwrap();
    assert_eq!(f.traces, 2);
    let roles: i64 = f.top_roles.iter().map(|r| r.totals.bytes).sum();
    assert_eq!(roles, 4096 + 8192 + (1 << 20));
    let acts: i64 = f.top_acts.iter().map(|r| r.totals.bytes).sum();
    assert_eq!(acts, 4096 + 8192 + (1 << 20));
}
