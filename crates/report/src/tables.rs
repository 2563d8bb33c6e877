//! The Parquet tables (zstd-compressed, written with polars). Schemas: `docs/report.md`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use ioblame_attrib::{ActId, CgroupNames, Dir, FileKey, Io, RoleId, Symbolizer, Tables};
use ioblame_counters::{CounterSet, SLOTS};
use polars::prelude::*;

use crate::agg::Aggregates;
use crate::error::ReportError;
use crate::util::{dev_str, frame_name, modifier_reason};

/// IOs buffered before they are written as one row group.
pub const IOS_ROW_GROUP: usize = 65_536;

fn pq_err(path: &Path) -> impl FnOnce(PolarsError) -> ReportError + '_ {
    move |source| ReportError::Parquet {
        path: path.to_path_buf(),
        source,
    }
}

fn writer(path: &Path) -> Result<ParquetWriter<BufWriter<File>>, ReportError> {
    let f = File::create(path).map_err(|e| ReportError::io(path, e))?;
    Ok(ParquetWriter::new(BufWriter::new(f)).with_compression(ParquetCompression::Zstd(None)))
}

/// A frame of equally long columns.
pub(crate) fn frame(columns: Vec<Column>) -> PolarsResult<DataFrame> {
    let height = columns.first().map_or(0, |c| c.len());
    DataFrame::new(height, columns)
}

/// Writes a whole frame to `path`.
pub(crate) fn write_df(path: &Path, df: PolarsResult<DataFrame>) -> Result<(), ReportError> {
    let mut df = df.map_err(pq_err(path))?;
    writer(path)?.finish(&mut df).map_err(pq_err(path))?;
    Ok(())
}

/// Rewrites each batch of rows before it is written (and the empty frame whose schema the
/// file gets): another writer's columns and types over the same rows.
pub type FrameMap = Box<dyn Fn(DataFrame) -> PolarsResult<DataFrame> + Send>;

pub(crate) fn col<T, S>(name: &str, v: T) -> Column
where
    Series: NamedFrom<T, S>,
    S: ?Sized,
{
    Series::new(name.into(), v).into_column()
}

/// The buffered columns of `ios.parquet`.
#[derive(Default)]
struct IoColumns {
    dev: Vec<String>,
    sector: Vec<u64>,
    size: Vec<u64>,
    dir: Vec<&'static str>,
    rwbs: Vec<String>,
    queue_ns: Vec<u64>,
    issue_ns: Vec<u64>,
    complete_ns: Vec<u64>,
    wait_us: Vec<u64>,
    io_us: Vec<u64>,
    offset: Vec<u32>,
    seek_dist: Vec<u32>,
    issuer_pid: Vec<u32>,
    issuer_comm: Vec<String>,
    act: Vec<u32>,
    via: Vec<&'static str>,
    reason: Vec<Option<&'static str>>,
    ino: Vec<Option<u64>>,
    file_offset: Vec<Option<u64>>,
    split: Vec<bool>,
    journal_txn: Vec<Option<u32>>,
    in_lost_window: Vec<bool>,
    journal_share: Vec<Option<f64>>,
    lower: Vec<bool>,
}

impl IoColumns {
    fn len(&self) -> usize {
        self.size.len()
    }

    fn push(&mut self, io: &Io, tables: &Tables) {
        let issuer = tables.role(io.issuer);
        self.dev.push(dev_str(io.dev));
        self.sector.push(io.sector);
        self.size.push(io.size);
        self.dir.push(dir_name(io.dir));
        self.rwbs.push(io.rwbs.to_string());
        self.queue_ns.push(io.queue_time);
        self.issue_ns.push(io.issue_time);
        self.complete_ns.push(io.complete_time);
        self.wait_us.push(io.wait_time);
        self.io_us.push(io.io_time);
        self.offset.push(io.offset);
        self.seek_dist.push(io.seek_dist);
        self.issuer_pid.push(issuer.map_or(0, |r| r.pid));
        self.issuer_comm
            .push(issuer.map_or_else(String::new, |r| r.comm.clone()));
        self.act.push(io.act.0);
        self.via.push(io.via.name());
        self.reason.push(io.reason.map(|r| r.name()));
        self.ino.push(io.ino);
        self.file_offset.push(io.file_offset);
        self.split.push(io.split);
        self.journal_txn.push(io.journal_txn);
        self.in_lost_window.push(io.in_lost_window);
        self.journal_share.push(io.journal_share);
        self.lower.push(io.lower);
    }

    fn take_columns(&mut self) -> Vec<Column> {
        let c = std::mem::take(self);
        vec![
            col("dev", c.dev),
            col("sector", c.sector),
            col("size", c.size),
            col("dir", c.dir),
            col("rwbs", c.rwbs),
            col("queue_ns", c.queue_ns),
            col("issue_ns", c.issue_ns),
            col("complete_ns", c.complete_ns),
            col("wait_us", c.wait_us),
            col("io_us", c.io_us),
            col("offset", c.offset),
            col("seek_dist", c.seek_dist),
            col("issuer_pid", c.issuer_pid),
            col("issuer_comm", c.issuer_comm),
            col("act", c.act),
            col("via", c.via),
            col("reason", c.reason),
            col("ino", c.ino),
            col("file_offset", c.file_offset),
            col("split", c.split),
            col("journal_txn", c.journal_txn),
            col("in_lost_window", c.in_lost_window),
            col("journal_share", c.journal_share),
            col("lower", c.lower),
        ]
    }
}

/// The direction class name used in the tables: `R`, `A` or `W`.
pub(crate) fn dir_name(d: Dir) -> &'static str {
    match d {
        Dir::R => "R",
        Dir::A => "A",
        Dir::W => "W",
    }
}

/// Streams `ios.parquet`: rows are buffered and written as row groups of
/// [`IOS_ROW_GROUP`] rows.
pub(crate) struct IosWriter {
    path: PathBuf,
    buf: IoColumns,
    writer: Option<polars::io::parquet::write::BatchedWriter<BufWriter<File>>>,
    rows: u64,
    map: Option<FrameMap>,
}

impl IosWriter {
    /// Creates `path`; `map`, if any, rewrites each batch of rows before it is written.
    pub(crate) fn create(path: PathBuf, map: Option<FrameMap>) -> Result<IosWriter, ReportError> {
        // Create the file now so an unwritable directory fails early.
        let mut w = IosWriter {
            path,
            buf: IoColumns::default(),
            writer: None,
            rows: 0,
            map,
        };
        let schema = w
            .mapped(IoColumns::default().take_columns(), 0)?
            .schema()
            .as_ref()
            .clone();
        w.writer = Some(writer(&w.path)?.batched(&schema).map_err(pq_err(&w.path))?);
        Ok(w)
    }

    /// The frame of `n` buffered rows, through `map`.
    fn mapped(&self, cols: Vec<Column>, n: usize) -> Result<DataFrame, ReportError> {
        let df = DataFrame::new(n, cols).map_err(pq_err(&self.path))?;
        match &self.map {
            Some(map) => map(df).map_err(pq_err(&self.path)),
            None => Ok(df),
        }
    }

    pub(crate) fn push(&mut self, io: &Io, tables: &Tables) -> Result<(), ReportError> {
        self.buf.push(io, tables);
        if self.buf.len() >= IOS_ROW_GROUP {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ReportError> {
        let n = self.buf.len();
        if n == 0 {
            return Ok(());
        }
        let cols = self.buf.take_columns();
        let df = self.mapped(cols, n)?;
        if let Some(w) = self.writer.as_mut() {
            w.write_batch(&df).map_err(pq_err(&self.path))?;
        }
        self.rows += n as u64;
        Ok(())
    }

    /// Writes the last row group and the footer; returns the rows written.
    pub(crate) fn finish(mut self) -> Result<u64, ReportError> {
        self.flush()?;
        if let Some(w) = self.writer.take() {
            w.finish().map_err(pq_err(&self.path))?;
        }
        Ok(self.rows)
    }
}

/// Bytes of the rows of `ios.parquet` (`rows` of them) whose `queue_ns..=complete_ns` span
/// touches one of `windows` (`(start, end)` in ns, any order), and the bytes touching each
/// window: read back one row group at a time, three columns only.
pub(crate) fn bytes_in_windows(
    path: &Path,
    rows: u64,
    windows: &[(u64, u64)],
) -> Result<(u64, Vec<u64>), ReportError> {
    let each: Vec<(u64, u64)> = windows.iter().map(|&(a, b)| (a.min(b), a.max(b))).collect();
    let mut per_window = vec![0u64; each.len()];
    let mut merged: Vec<(u64, u64)> = windows.iter().map(|&(a, b)| (a.min(b), a.max(b))).collect();
    merged.sort_unstable();
    let mut w: Vec<(u64, u64)> = Vec::with_capacity(merged.len());
    for (a, b) in merged {
        match w.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => w.push((a, b)),
        }
    }
    if w.is_empty() {
        return Ok((0, per_window));
    }
    let mut total = 0u64;
    let mut off = 0u64;
    while off < rows {
        let n = (rows - off).min(IOS_ROW_GROUP as u64);
        let f = File::open(path).map_err(|e| ReportError::io(path, e))?;
        let df = ParquetReader::new(f)
            .with_columns(Some(vec![
                "queue_ns".into(),
                "complete_ns".into(),
                "size".into(),
            ]))
            .with_slice(Some((off as usize, n as usize)))
            .finish()
            .map_err(pq_err(path))?;
        let get = |name: &str| -> Result<UInt64Chunked, ReportError> {
            Ok(df
                .column(name)
                .map_err(pq_err(path))?
                .as_materialized_series()
                .u64()
                .map_err(pq_err(path))?
                .clone())
        };
        let (q, c, size) = (get("queue_ns")?, get("complete_ns")?, get("size")?);
        for ((q, c), size) in q.iter().zip(c.iter()).zip(size.iter()) {
            let (Some(q), Some(c), Some(size)) = (q, c, size) else {
                continue;
            };
            let (start, end) = (q.min(c), q.max(c));
            // The first window not ending before the IO starts: does it start before it ends?
            let i = w.partition_point(|x| x.1 < start);
            if w.get(i).is_some_and(|x| x.0 <= end) {
                total = total.saturating_add(size);
                for (b, x) in per_window.iter_mut().zip(&each) {
                    if x.0 <= end && start <= x.1 {
                        *b = b.saturating_add(size);
                    }
                }
            }
        }
        off += n.max(1);
    }
    Ok((total, per_window))
}

/// `lost_windows.parquet`: one row per window of trace time in which the kernel lost
/// records: `cpu`, `start_ns`, `end_ns`, `records` lost, and `bytes` of the IOs of
/// `ios.parquet` whose span touches it (their attribution may have changed).
pub(crate) fn write_lost_windows(
    path: &Path,
    windows: &[ioblame_attrib::LostWindow],
    bytes: &[u64],
) -> Result<(), ReportError> {
    write_df(
        path,
        frame(vec![
            col("cpu", windows.iter().map(|w| w.cpu).collect::<Vec<_>>()),
            col(
                "start_ns",
                windows.iter().map(|w| w.start).collect::<Vec<_>>(),
            ),
            col("end_ns", windows.iter().map(|w| w.end).collect::<Vec<_>>()),
            col(
                "records",
                windows.iter().map(|w| w.count).collect::<Vec<_>>(),
            ),
            col("bytes", bytes.to_vec()),
        ]),
    )
}

/// The `cgroup` column of `acts.parquet` and `roles.parquet`: each role's cgroup path, null
/// where unknown (and everywhere for a trace without cgroups).
fn cgroup_column<'a>(
    cgroups: Option<&'a CgroupNames>,
    roles: impl Iterator<Item = Option<&'a ioblame_attrib::Role>>,
) -> Column {
    let v: Vec<Option<&str>> = roles
        .map(|r| cgroups.zip(r).and_then(|(n, r)| n.of_role(r)))
        .collect();
    col("cgroup", v)
}

/// `acts.parquet`; `cgroups` names the roles' cgroups.
pub(crate) fn acts_frame(
    t: &Tables,
    agg: &Aggregates,
    names: &[String],
    cgroups: Option<&CgroupNames>,
) -> PolarsResult<DataFrame> {
    let n = t.acts.len();
    let mut c = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut intent, mut modifier, mut reason, mut dev, mut ino, mut via) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let mut recorder = vec![];
    let mut intent_name = vec![];
    let mut b = [vec![], vec![], vec![]];
    let mut ios = [vec![], vec![], vec![]];
    let (mut io_us, mut wait_us) = (vec![], vec![]);
    for (id, a, tot) in t.acts_with_totals() {
        let role = t.role(a.role);
        c.0.push(id.0);
        c.1.push(a.role.0);
        c.2.push(role.map_or(0, |r| r.pid));
        c.3.push(role.map_or(0, |r| r.tid));
        c.4.push(role.map_or_else(String::new, |r| r.comm.clone()));
        c.5.push(tot.total_bytes());
        let m = t.intent(a.intent).map_or(0, |i| i.modifier);
        intent.push(a.intent.0);
        intent_name.push(names.get(a.intent.index()).cloned().unwrap_or_default());
        modifier.push(m);
        reason.push(modifier_reason(m).map(|r| r.name()));
        dev.push(dev_str(a.file.dev));
        ino.push(a.file.ino);
        via.push(a.via.name());
        recorder.push(a.recorder);
        for d in 0..3 {
            b[d].push(tot.bytes[d]);
            ios[d].push(tot.ios[d]);
        }
        io_us.push(agg.io_us(id));
        wait_us.push(agg.wait_us(id));
    }
    let [br, ba, bw] = b;
    let [ir, ia, iw] = ios;
    frame(vec![
        col("act", c.0),
        col("role", c.1),
        col("pid", c.2),
        col("tid", c.3),
        col("comm", c.4),
        col("intent", intent),
        col("intent_name", intent_name),
        col("modifier", modifier),
        col("reason", reason),
        col("dev", dev),
        col("ino", ino),
        col("via", via),
        col("bytes", c.5),
        col("read_bytes", br),
        col("readahead_bytes", ba),
        col("write_bytes", bw),
        col("read_ios", ir),
        col("readahead_ios", ia),
        col("write_ios", iw),
        col("io_us", io_us),
        col("wait_us", wait_us),
        col("recorder", recorder),
        cgroup_column(cgroups, t.acts.iter().map(|a| t.role(a.role))),
    ])
}

/// Per-direction totals keyed by something, from the act totals.
fn totals_by<K: Ord>(t: &Tables, key: impl Fn(&ioblame_attrib::Act) -> K) -> BTreeMap<K, [u64; 6]> {
    let mut m: BTreeMap<K, [u64; 6]> = BTreeMap::new();
    for (_, a, tot) in t.acts_with_totals() {
        let e = m.entry(key(a)).or_default();
        for d in 0..3 {
            e[d] += tot.bytes[d];
            e[3 + d] += tot.ios[d];
        }
    }
    m
}

/// Per-direction columns from per-key totals, in the order of `keys`.
fn dir_columns(rows: &[[u64; 6]]) -> Vec<Column> {
    let names = [
        "read_bytes",
        "readahead_bytes",
        "write_bytes",
        "read_ios",
        "readahead_ios",
        "write_ios",
    ];
    names
        .iter()
        .enumerate()
        .map(|(i, n)| col(n, rows.iter().map(|r| r[i]).collect::<Vec<u64>>()))
        .collect()
}

/// `intents.parquet`.
pub(crate) fn intents_frame(
    t: &Tables,
    sym: &dyn Symbolizer,
    intent_names: &[String],
) -> PolarsResult<DataFrame> {
    let totals = totals_by(t, |a| a.intent);
    let n = t.intents.len();
    let mut frames = ListStringChunkedBuilder::new("frames".into(), n, n * 8);
    let mut addrs =
        ListPrimitiveChunkedBuilder::<UInt64Type>::new("addrs".into(), n, n * 8, DataType::UInt64);
    let mut user_frames = ListStringChunkedBuilder::new("user_frames".into(), n, n * 8);
    let mut user_modules = ListStringChunkedBuilder::new("user_modules".into(), n, n * 8);
    let mut user_offsets = ListPrimitiveChunkedBuilder::<UInt64Type>::new(
        "user_offsets".into(),
        n,
        n * 8,
        DataType::UInt64,
    );
    let (mut id, mut modifier, mut reason, mut depth, mut rows) =
        (vec![], vec![], vec![], vec![], vec![]);
    for (i, it) in t.intents_with_ids() {
        id.push(i.0);
        modifier.push(it.modifier);
        reason.push(modifier_reason(it.modifier).map(|r| r.name()));
        depth.push(it.stack.len() as u32);
        let names: Vec<String> = it.stack.iter().map(|&a| frame_name(sym, a)).collect();
        frames.append_values_iter(names.iter().map(|s| s.as_str()));
        addrs.append_slice(&it.stack);
        let labels: Vec<String> = it
            .user
            .iter()
            .map(ioblame_attrib::names::user_frame_label)
            .collect();
        user_frames.append_values_iter(labels.iter().map(|s| s.as_str()));
        user_modules.append_values_iter(
            it.user
                .iter()
                .map(|f| f.module.as_ref().map_or("", |m| m.path.as_str())),
        );
        let offsets: Vec<u64> = it.user.iter().map(|f| f.offset).collect();
        user_offsets.append_slice(&offsets);
        rows.push(totals.get(&i).copied().unwrap_or_default());
    }
    let intent_name: Vec<String> = (0..id.len())
        .map(|i| intent_names.get(i).cloned().unwrap_or_default())
        .collect();
    let mut cols = vec![
        col("intent", id),
        col("intent_name", intent_name),
        col("modifier", modifier),
        col("reason", reason),
        col("depth", depth),
        frames.finish().into_series().into_column(),
        addrs.finish().into_series().into_column(),
    ];
    cols.extend(dir_columns(&rows));
    // Added last (docs/report.md): the application's frames, innermost first, each named
    // as in the intent names, with its module and file offset; empty lists without.
    cols.extend([
        user_frames.finish().into_series().into_column(),
        user_modules.finish().into_series().into_column(),
        user_offsets.finish().into_series().into_column(),
    ]);
    frame(cols)
}

/// `roles.parquet`; `cgroups` names the roles' cgroups.
pub(crate) fn roles_frame(t: &Tables, cgroups: Option<&CgroupNames>) -> PolarsResult<DataFrame> {
    let totals = totals_by(t, |a| a.role);
    let (mut id, mut pid, mut tid, mut comm, mut gen, mut rows) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for (i, r) in t.roles.iter().enumerate() {
        let i = RoleId(i as u32);
        id.push(i.0);
        pid.push(r.pid);
        tid.push(r.tid);
        comm.push(r.comm.as_str());
        gen.push(r.generation);
        rows.push(totals.get(&i).copied().unwrap_or_default());
    }
    let mut cols = vec![
        col("role", id),
        col("pid", pid),
        col("tid", tid),
        col("comm", comm),
        col("generation", gen),
    ];
    cols.extend(dir_columns(&rows));
    cols.push(cgroup_column(cgroups, t.roles.iter().map(Some)));
    frame(cols)
}

/// `files.parquet`: one row per (dev, ino) charged.
pub(crate) fn files_frame(
    t: &Tables,
    paths: &BTreeMap<FileKey, String>,
) -> PolarsResult<DataFrame> {
    let totals = totals_by(t, |a| a.file.clone());
    let (mut dev, mut ino, mut p, mut rows) = (vec![], vec![], vec![], vec![]);
    for (k, r) in &totals {
        dev.push(dev_str(k.dev));
        ino.push(k.ino);
        p.push(paths.get(k).map(|s| s.as_str()));
        rows.push(*r);
    }
    let mut cols = vec![col("dev", dev), col("ino", ino), col("path", p)];
    cols.extend(dir_columns(&rows));
    frame(cols)
}

/// `histograms.parquet`: for each act used (an IO recorded, as the counters outputs list),
/// every counter and slot.
pub(crate) fn histograms_frame(t: &Tables, set: &CounterSet) -> PolarsResult<DataFrame> {
    let specs: Vec<String> = set.specs().iter().map(|s| s.to_string()).collect();
    let (mut act, mut counter, mut spec, mut slot, mut lo, mut hi, mut count) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let n_acts = t.acts.len().max(set.act_capacity());
    for a in (0..n_acts as u32).map(ActId) {
        if !set.is_used(a) {
            continue;
        }
        for (c, h) in set.act_histograms(a).iter().enumerate() {
            let b = &set.specs()[c].bounds;
            for s in 0..SLOTS {
                act.push(a.0);
                counter.push(c as u32);
                spec.push(specs[c].as_str());
                slot.push(s as u32);
                lo.push(b[s]);
                hi.push(if s + 1 == SLOTS && b[SLOTS] == 0 {
                    None
                } else {
                    Some(b[s + 1])
                });
                count.push(h[s]);
            }
        }
    }
    frame(vec![
        col("act", act),
        col("counter", counter),
        col("spec", spec),
        col("slot", slot),
        col("lower", lo),
        col("upper", hi),
        col("count", count),
    ])
}
