//! The fleet query: polars' lazy scan of the dataset, pruned by partition (`host=`, `date=`)
//! before any file is opened, then grouped across hosts: the top intents (with the hosts
//! where each appears), acts, files and roles, per-host totals, and the folded stacks of a
//! merged flame graph.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use polars::prelude::*;
use serde::Serialize;

use crate::error::DatasetError;
use crate::schema::{self, empty_stack_name};

/// Which traces of the dataset a query reads.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// First date (`YYYY-MM-DD`, the capture start's UTC date), inclusive.
    pub since: Option<String>,
    /// Last date, inclusive.
    pub until: Option<String>,
    /// Hosts whose name matches this glob.
    pub host: Option<glob::Pattern>,
    /// Labels `KEY=VALUE` every trace read must carry.
    pub labels: Vec<String>,
}

/// Checks a date given as `YYYY-MM-DD`.
pub fn check_date(d: &str) -> Result<(), DatasetError> {
    chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d")
        .map(|_| ())
        .map_err(|_| DatasetError::Invalid(format!("date {d:?}: give YYYY-MM-DD")))
}

/// Per-direction bytes and IOs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Bytes over all directions.
    pub bytes: i64,
    /// Bytes read (without readahead).
    pub read_bytes: i64,
    /// Bytes read ahead.
    pub readahead_bytes: i64,
    /// Bytes written.
    pub write_bytes: i64,
    /// IOs over all directions.
    pub ios: i64,
}

/// One host's totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostTotals {
    /// The host (partition value).
    pub host: String,
    /// Traces read.
    pub traces: i64,
    /// First and last capture dates.
    pub first_date: String,
    /// Last capture date.
    pub last_date: String,
    /// Kernel releases seen, sorted.
    pub kernels: Vec<String>,
    /// Totals of its traces.
    #[serde(flatten)]
    pub totals: Totals,
}

/// One intent (code path) across the fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopIntent {
    /// The intent key (`docs/dataset.md`): the same on every host for the same stack.
    pub intent_key: i64,
    /// Its short name over the fleet's intents (`ioblame_attrib::names`, docs/attribution.md
    /// "Intent names"), with ` [wb:REASON]` for writeback.
    pub name: String,
    /// Frame names, innermost first.
    pub frames: Vec<String>,
    /// Writeback reason, for writeback intents.
    pub reason: Option<String>,
    /// Hosts where it was charged IO.
    pub n_hosts: i64,
    /// Traces where it was charged IO.
    pub n_traces: i64,
    /// Its totals.
    #[serde(flatten)]
    pub totals: Totals,
    /// The hosts where it appears, with their bytes, most first.
    pub hosts: Vec<(String, i64)>,
}

/// One act across the fleet: a comm, an intent key and a file path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopAct {
    /// The role's comm.
    pub comm: String,
    /// The intent key.
    pub intent_key: i64,
    /// The intent's short name, as [`TopIntent::name`].
    pub intent_name: String,
    /// The file's path, where the traces name it.
    pub path: Option<String>,
    /// Hosts where it was charged IO.
    pub n_hosts: i64,
    /// Its totals.
    #[serde(flatten)]
    pub totals: Totals,
}

/// One file path (or a comm, for roles) across the fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopNamed {
    /// The path or comm (`None`: files the traces do not name).
    pub name: Option<String>,
    /// Hosts where it was charged IO.
    pub n_hosts: i64,
    /// Its totals.
    #[serde(flatten)]
    pub totals: Totals,
}

/// What [`query`] found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Fleet {
    /// Traces read.
    pub traces: i64,
    /// Per host, by name.
    pub hosts: Vec<HostTotals>,
    /// The top intents by bytes (ties: by key).
    pub top_intents: Vec<TopIntent>,
    /// The top acts by bytes.
    pub top_acts: Vec<TopAct>,
    /// The top files by bytes.
    pub top_files: Vec<TopNamed>,
    /// The top roles (by comm) by bytes.
    pub top_roles: Vec<TopNamed>,
    /// Folded stacks of the merged flame graph, weighted by bytes (`outer;...;comm bytes`).
    #[serde(skip)]
    pub folded: Vec<String>,
}

/// The hive partition columns, read as strings.
fn hive_schema() -> SchemaRef {
    Arc::new(Schema::from_iter([
        Field::new("host".into(), DataType::String),
        Field::new("date".into(), DataType::String),
    ]))
}

/// The hosts of the dataset: the `host=` directories of `traces`.
pub fn hosts(dataset: &Path) -> Result<Vec<String>, DatasetError> {
    let dir = dataset.join("traces");
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(DatasetError::io(dir, e)),
    };
    for e in entries.flatten() {
        if let Some(h) = e.file_name().to_string_lossy().strip_prefix("host=") {
            out.push(h.to_string());
        }
    }
    out.sort();
    Ok(out)
}

/// The partition predicate of `filter`, on `host` and `date` only (what polars prunes
/// files with); `None` when it selects every partition.
pub fn partition_predicate(dataset: &Path, filter: &Filter) -> Result<Option<Expr>, DatasetError> {
    let mut preds = Vec::new();
    if let Some(s) = &filter.since {
        check_date(s)?;
        preds.push(col("date").gt_eq(lit(s.as_str())));
    }
    if let Some(u) = &filter.until {
        check_date(u)?;
        preds.push(col("date").lt_eq(lit(u.as_str())));
    }
    if let Some(g) = &filter.host {
        let matched: Vec<String> = hosts(dataset)?
            .into_iter()
            .filter(|h| g.matches(h))
            .collect();
        let s = Series::new("hosts".into(), matched);
        preds.push(col("host").is_in(lit(s), false));
    }
    Ok(preds.into_iter().reduce(|a, b| a.and(b)))
}

/// Whether a partition `host=HOST/date=DATE` is one `filter` reads.
fn partition_wanted(filter: &Filter, host: &str, date: &str) -> bool {
    filter.since.as_deref().is_none_or(|s| date >= s)
        && filter.until.as_deref().is_none_or(|u| date <= u)
        && filter.host.as_ref().is_none_or(|g| g.matches(host))
}

/// The lazy scan of one table: the `host=*/date=*/*.parquet` files (temporary files do not
/// match) of the partitions `filter` reads, chosen by their directory names before polars
/// opens any file (it reads the schema from the first file it is given), with `host` and
/// `date` from the paths; `pred` (the same partition predicate, and more) is applied by
/// polars. `None` when no file matches.
pub fn scan(
    dataset: &Path,
    table: &str,
    filter: &Filter,
    pred: Option<&Expr>,
) -> Result<Option<LazyFrame>, DatasetError> {
    let dir = dataset.join(table);
    let pattern = format!("{}/host=*/date=*/*.parquet", dir.display());
    let mut files = Vec::new();
    for p in glob::glob(&pattern)
        .map_err(|e| DatasetError::Invalid(format!("{pattern}: {e}")))?
        .flatten()
    {
        let part = |n: usize, key: &str| -> Option<String> {
            let c = p.ancestors().nth(n)?.file_name()?.to_str()?;
            Some(c.strip_prefix(key)?.to_string())
        };
        let (Some(host), Some(date)) = (part(2, "host="), part(1, "date=")) else {
            continue;
        };
        if partition_wanted(filter, &host, &date) {
            files.push(PlRefPath::new(p.display().to_string()));
        }
    }
    let lf = scan_files(&dir, files)?;
    Ok(lf.map(|lf| match pred {
        Some(p) => lf.filter(p.clone()),
        None => lf,
    }))
}

/// A lazy scan of `files` (of the table directory `dir`) with the partition columns `host`
/// and `date` from their paths; `None` when there are none.
fn scan_files(dir: &Path, files: Vec<PlRefPath>) -> Result<Option<LazyFrame>, DatasetError> {
    // polars refuses a scan without files.
    if files.is_empty() {
        return Ok(None);
    }
    // polars takes a scan's schema from its first file and refuses a later one with a column
    // that file lacks; columns are added at the end of tables within a schema version, so an
    // export from before one may come first. The files' schemas merged (in the order their
    // columns first appear), a column a file lacks reads as null.
    let mut merged = Schema::default();
    for f in &files {
        let file = std::fs::File::open(f.as_str()).map_err(|e| DatasetError::io(dir, e))?;
        let a = ParquetReader::new(file)
            .schema()
            .map_err(DatasetError::pq(dir))?;
        for (name, field) in Schema::from_arrow_schema(&a).iter() {
            if merged.get(name).is_none() {
                merged.with_column(name.clone(), field.clone());
            }
        }
    }
    let args = ScanArgsParquet {
        schema: Some(Arc::new(merged)),
        allow_missing_columns: true,
        hive_options: HiveOptions {
            enabled: Some(true),
            hive_start_idx: 0,
            schema: Some(hive_schema()),
            try_parse_dates: false,
        },
        glob: false,
        ..Default::default()
    };
    let lf = LazyFrame::scan_parquet_files(files.into_iter().collect(), args)
        .map_err(DatasetError::pq(dir))?;
    Ok(Some(lf))
}

/// The selected traces: `(host, trace_id)` of the `traces` rows in the partitions, with
/// every label asked for; their per-host totals.
struct Selected {
    /// `(host, date, trace_id)` of each: where its files are.
    traces: Vec<(String, String, String)>,
    hosts: Vec<HostTotals>,
}

fn select_traces(
    dataset: &Path,
    filter: &Filter,
    pred: Option<&Expr>,
) -> Result<Selected, DatasetError> {
    let path = dataset.join("traces");
    let err = DatasetError::pq(&path);
    let Some(lf) = scan(dataset, "traces", filter, pred)? else {
        return Ok(Selected {
            traces: Vec::new(),
            hosts: Vec::new(),
        });
    };
    let df = lf
        .select([
            col("host"),
            col("date"),
            col("trace_id"),
            col("kernel_release"),
            col("labels"),
            col("ios"),
            col("read_bytes"),
            col("readahead_bytes"),
            col("write_bytes"),
        ])
        .collect()
        .map_err(err)?;
    let err = |e: PolarsError| DatasetError::pq(&path)(e);
    let host = strs(&df, "host").map_err(err)?;
    let date = strs(&df, "date").map_err(err)?;
    let id = strs(&df, "trace_id").map_err(err)?;
    let kernel = strs(&df, "kernel_release").map_err(err)?;
    let labels = df
        .column("labels")
        .and_then(|c| c.as_materialized_series().list().cloned())
        .map_err(err)?;
    let [ios, r, a, w] =
        ["ios", "read_bytes", "readahead_bytes", "write_bytes"].map(|n| ints(&df, n));
    let (ios, r, a, w) = (
        ios.map_err(err)?,
        r.map_err(err)?,
        a.map_err(err)?,
        w.map_err(err)?,
    );
    let mut ids = Vec::new();
    let mut per_host: BTreeMap<String, (HostTotals, BTreeSet<String>)> = BTreeMap::new();
    for i in 0..labels.len() {
        let have: BTreeSet<String> = match labels.get_as_series(i) {
            Some(s) => s
                .str()
                .map_err(err)?
                .iter()
                .flatten()
                .map(str::to_string)
                .collect(),
            None => BTreeSet::new(),
        };
        if !filter.labels.iter().all(|x| have.contains(x)) {
            continue;
        }
        ids.push((host[i].clone(), date[i].clone(), id[i].clone()));
        let (h, kernels) = per_host.entry(host[i].clone()).or_insert_with(|| {
            (
                HostTotals {
                    host: host[i].clone(),
                    traces: 0,
                    first_date: date[i].clone(),
                    last_date: date[i].clone(),
                    kernels: Vec::new(),
                    totals: Totals::default(),
                },
                BTreeSet::new(),
            )
        });
        h.traces += 1;
        h.first_date = h.first_date.clone().min(date[i].clone());
        h.last_date = h.last_date.clone().max(date[i].clone());
        kernels.insert(kernel[i].clone());
        h.totals.read_bytes += r[i];
        h.totals.readahead_bytes += a[i];
        h.totals.write_bytes += w[i];
        h.totals.bytes += r[i] + a[i] + w[i];
        h.totals.ios += ios[i];
    }
    ids.sort();
    ids.dedup();
    let hosts = per_host
        .into_values()
        .map(|(mut h, k)| {
            h.kernels = k.into_iter().collect();
            h
        })
        .collect();
    Ok(Selected { traces: ids, hosts })
}

/// A string column as owned strings (nulls as "").
fn strs(df: &DataFrame, name: &str) -> PolarsResult<Vec<String>> {
    let c = df.column(name)?.cast(&DataType::String)?;
    Ok(c.as_materialized_series()
        .str()?
        .iter()
        .map(|s| s.unwrap_or_default().to_string())
        .collect())
}

/// A string column with its nulls.
fn opt_strs(df: &DataFrame, name: &str) -> PolarsResult<Vec<Option<String>>> {
    Ok(df
        .column(name)?
        .as_materialized_series()
        .str()?
        .iter()
        .map(|s| s.map(str::to_string))
        .collect())
}

/// An integer column as `i64` (nulls as 0).
fn ints(df: &DataFrame, name: &str) -> PolarsResult<Vec<i64>> {
    let c = df.column(name)?.cast(&DataType::Int64)?;
    Ok(c.as_materialized_series()
        .i64()?
        .iter()
        .map(|v| v.unwrap_or(0))
        .collect())
}

/// The per-direction sums every grouping computes, and `bytes`, `ios` over them.
fn sums() -> Vec<Expr> {
    vec![
        col("read_bytes").sum(),
        col("readahead_bytes").sum(),
        col("write_bytes").sum(),
        (col("read_ios") + col("readahead_ios") + col("write_ios"))
            .sum()
            .alias("ios"),
        (col("read_bytes") + col("readahead_bytes") + col("write_bytes"))
            .sum()
            .alias("bytes"),
    ]
}

/// The rows that were charged bytes: every top list and count (hosts, traces) is over these.
fn charged(lf: LazyFrame) -> LazyFrame {
    lf.filter((col("read_bytes") + col("readahead_bytes") + col("write_bytes")).gt(lit(0)))
}

/// Collects two queries over the same scan in one plan: polars reads the scanned files once
/// for both (common subplan elimination) instead of once per query, which over a dataset of
/// a thousand traces is most of the time.
fn collect_together(lfs: [LazyFrame; 2]) -> PolarsResult<[DataFrame; 2]> {
    let opts = lfs[0].get_current_optimizations();
    let plans = lfs.into_iter().map(|lf| lf.logical_plan).collect();
    let mut out = LazyFrame::collect_all_with_engine(plans, Engine::Auto, opts)?.into_iter();
    match (out.next(), out.next()) {
        (Some(a), Some(b)) => Ok([a, b]),
        _ => Err(PolarsError::ComputeError(
            "collect_all: two results expected".into(),
        )),
    }
}

/// The totals of each row of a grouped frame.
fn totals(df: &DataFrame) -> PolarsResult<Vec<Totals>> {
    let [b, r, a, w, i] = [
        "bytes",
        "read_bytes",
        "readahead_bytes",
        "write_bytes",
        "ios",
    ]
    .map(|n| ints(df, n));
    let (b, r, a, w, i) = (b?, r?, a?, w?, i?);
    Ok((0..df.height())
        .map(|k| Totals {
            bytes: b[k],
            read_bytes: r[k],
            readahead_bytes: a[k],
            write_bytes: w[k],
            ios: i[k],
        })
        .collect())
}

/// Row indices with bytes, most bytes first, ties by `tie`, at most `top`.
fn top_rows<K: Ord>(t: &[Totals], top: usize, tie: impl Fn(usize) -> K) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..t.len()).filter(|&i| t[i].bytes > 0).collect();
    idx.sort_by(|&x, &y| {
        t[y].bytes
            .cmp(&t[x].bytes)
            .then_with(|| tie(x).cmp(&tie(y)))
    });
    idx.truncate(top);
    idx
}

/// Runs the fleet query over `dataset`: `top` rows in each top list.
pub fn query(dataset: &Path, filter: &Filter, top: usize) -> Result<Fleet, DatasetError> {
    schema::check_readable(dataset)?;
    for l in &filter.labels {
        schema::check_label(l)?;
    }
    let part = partition_predicate(dataset, filter)?;
    let sel = select_traces(dataset, filter, part.as_ref())?;
    let mut fleet = Fleet {
        traces: sel.hosts.iter().map(|h| h.traces).sum(),
        hosts: sel.hosts,
        ..Fleet::default()
    };
    if sel.traces.is_empty() {
        return Ok(fleet);
    }
    // Only the traces listed in `traces` (complete exports, with the labels asked for): their
    // files, by name (`<table>/host=H/date=D/<trace id>.parquet`), rather than every file of
    // the partitions filtered row by row.
    let table = |t: &str| -> Result<(LazyFrame, PathBuf), DatasetError> {
        let path = dataset.join(t);
        let files: Vec<PlRefPath> = sel
            .traces
            .iter()
            .map(|(h, d, id)| path.join(format!("host={h}/date={d}/{id}.parquet")))
            .filter(|p| p.is_file())
            .map(|p| PlRefPath::new(p.display().to_string()))
            .collect();
        match scan_files(&path, files)? {
            Some(lf) => Ok((lf, path)),
            None => Err(DatasetError::NotADataset {
                path,
                why: "the table has no file although `traces` lists traces".to_string(),
            }),
        }
    };

    // Intents: by key, then by key and host.
    let (intents, path) = table("intents")?;
    let intents = charged(intents);
    let err = |e: PolarsError| DatasetError::pq(&path)(e);
    let mut aggs = sums();
    aggs.extend([
        col("frames").first(),
        col("reason").first(),
        col("intent").first(),
        col("host").n_unique().alias("n_hosts"),
        col("trace_id").n_unique().alias("n_traces"),
    ]);
    let [by_key, by_key_host] = collect_together([
        intents.clone().group_by([col("intent_key")]).agg(aggs),
        intents
            .group_by([col("intent_key"), col("host")])
            .agg(sums()),
    ])
    .map_err(err)?;
    let keys = ints(&by_key, "intent_key").map_err(err)?;
    let tot = totals(&by_key).map_err(err)?;
    let reasons = opt_strs(&by_key, "reason").map_err(err)?;
    let intent_ids = ints(&by_key, "intent").map_err(err)?;
    let n_hosts = ints(&by_key, "n_hosts").map_err(err)?;
    let n_traces = ints(&by_key, "n_traces").map_err(err)?;
    let frame_lists = by_key
        .column("frames")
        .and_then(|c| c.as_materialized_series().list().cloned())
        .map_err(err)?;
    let mut frames: Vec<Vec<String>> = Vec::with_capacity(keys.len());
    for i in 0..frame_lists.len() {
        frames.push(match frame_lists.get_as_series(i) {
            Some(s) => s
                .str()
                .map_err(err)?
                .iter()
                .map(|n| n.unwrap_or("?").to_string())
                .collect(),
            None => Vec::new(),
        });
    }
    let names = fleet_names(&frames, &reasons, &intent_ids, &keys);
    let mut hosts_of: HashMap<i64, Vec<(String, i64)>> = HashMap::new();
    {
        let k = ints(&by_key_host, "intent_key").map_err(err)?;
        let h = strs(&by_key_host, "host").map_err(err)?;
        let t = totals(&by_key_host).map_err(err)?;
        for i in 0..k.len() {
            if t[i].bytes > 0 {
                hosts_of
                    .entry(k[i])
                    .or_default()
                    .push((h[i].clone(), t[i].bytes));
            }
        }
    }
    for i in top_rows(&tot, top, |i| keys[i]) {
        let mut hosts = hosts_of.remove(&keys[i]).unwrap_or_default();
        hosts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        fleet.top_intents.push(TopIntent {
            intent_key: keys[i],
            name: names[i].clone(),
            frames: frames[i].clone(),
            reason: reasons[i].clone(),
            n_hosts: n_hosts[i],
            n_traces: n_traces[i],
            totals: tot[i],
            hosts,
        });
    }
    // The stack of every key, for the flame graph.
    let stacks: HashMap<i64, (usize, i64)> = keys
        .iter()
        .enumerate()
        .map(|(i, &k)| (k, (i, intent_ids[i])))
        .collect();

    // Acts: by comm, intent key and path; by intent key and comm for the flame graph.
    let (acts, path) = table("acts")?;
    let acts = charged(acts);
    let err = |e: PolarsError| DatasetError::pq(&path)(e);
    let mut aggs = sums();
    aggs.push(col("host").n_unique().alias("n_hosts"));
    let [by_act, flame] = collect_together([
        acts.clone()
            .group_by([col("comm"), col("intent_key"), col("path")])
            .agg(aggs),
        acts.group_by([col("intent_key"), col("comm")])
            .agg([
                (col("read_bytes") + col("readahead_bytes") + col("write_bytes"))
                    .sum()
                    .alias("bytes"),
            ]),
    ])
    .map_err(err)?;
    let comm = strs(&by_act, "comm").map_err(err)?;
    let key = ints(&by_act, "intent_key").map_err(err)?;
    let p = opt_strs(&by_act, "path").map_err(err)?;
    let nh = ints(&by_act, "n_hosts").map_err(err)?;
    let tot = totals(&by_act).map_err(err)?;
    for i in top_rows(&tot, top, |i| (comm[i].clone(), key[i], p[i].clone())) {
        fleet.top_acts.push(TopAct {
            comm: comm[i].clone(),
            intent_key: key[i],
            intent_name: stacks
                .get(&key[i])
                .map_or_else(|| "[no stack]".to_string(), |&(j, _)| names[j].clone()),
            path: p[i].clone(),
            n_hosts: nh[i],
            totals: tot[i],
        });
    }
    let fk = ints(&flame, "intent_key").map_err(err)?;
    let fc = strs(&flame, "comm").map_err(err)?;
    let fb = ints(&flame, "bytes").map_err(err)?;
    let mut folded: BTreeMap<String, i64> = BTreeMap::new();
    for i in 0..fk.len() {
        if fb[i] <= 0 {
            continue;
        }
        let line = match stacks.get(&fk[i]) {
            Some(&(j, _)) => ioblame_report::folded_stack(&frames[j], &names[j], &fc[i]),
            None => ioblame_report::folded_stack(&[], "[no stack]", &fc[i]),
        };
        *folded.entry(line).or_default() += fb[i];
    }
    fleet.folded = folded
        .into_iter()
        .map(|(l, w)| format!("{l} {w}"))
        .collect();

    // Files by path, roles by comm.
    fleet.top_files = top_named(table("files")?, "path", top)?;
    fleet.top_roles = top_named(table("roles")?, "comm", top)?;
    Ok(fleet)
}

/// The short name of each intent key of the fleet (by row: `frames` innermost first, the
/// writeback reason, the intent id in one of its traces, the key): named over the fleet's
/// intents as one trace's intents are (`ioblame_attrib::names::name_stacks`, frames
/// normalized the same way: compiler suffixes dropped), then ` [wb:REASON]`; a key without
/// frames is `[lost]`, `[nomem]` or `[no stack]`. Two stacks that still get the same name are
/// told apart by their key (` (key HEX)`), not by an intent number, which the fleet has not.
fn fleet_names(
    frames: &[Vec<String>],
    reasons: &[Option<String>],
    ids: &[i64],
    keys: &[i64],
) -> Vec<String> {
    let normal: Vec<Vec<String>> = frames
        .iter()
        .map(|f| {
            f.iter()
                .map(|x| match ioblame_attrib::names::normalize(x) {
                    "" => x.clone(),
                    n => n.to_string(),
                })
                .collect()
        })
        .collect();
    // Each distinct stack once (keys of one stack differ by their writeback reason), after
    // two empty entries: name_stacks leaves #0 and #1 (ioblame's nomem and lost intents) aside.
    let mut index: HashMap<&[String], usize> = HashMap::new();
    let mut stacks: Vec<(u32, Vec<String>)> = vec![(0, vec![]), (0, vec![])];
    for f in &normal {
        index.entry(f.as_slice()).or_insert_with(|| {
            stacks.push((0, f.clone()));
            stacks.len() - 1
        });
    }
    let named = ioblame_attrib::names::name_stacks(&stacks);
    (0..frames.len())
        .map(|i| {
            let wb = reasons[i]
                .as_deref()
                .map(|r| format!(" [wb:{r}]"))
                .unwrap_or_default();
            if frames[i].is_empty() {
                return format!("{}{wb}", empty_stack_name(ids[i] as u32));
            }
            let k = index[normal[i].as_slice()];
            let name = &named[k];
            match name.strip_suffix(&format!(" (#{k})")) {
                Some(n) => format!("{n}{wb} (key {:016x})", keys[i] as u64),
                None => format!("{name}{wb}"),
            }
        })
        .collect()
}

/// The top rows of a table grouped by one string column.
fn top_named(
    (lf, path): (LazyFrame, PathBuf),
    by: &str,
    top: usize,
) -> Result<Vec<TopNamed>, DatasetError> {
    let err = |e: PolarsError| DatasetError::pq(&path)(e);
    let mut aggs = sums();
    aggs.push(col("host").n_unique().alias("n_hosts"));
    let df = charged(lf)
        .group_by([col(by)])
        .agg(aggs)
        .collect()
        .map_err(err)?;
    let name = opt_strs(&df, by).map_err(err)?;
    let nh = ints(&df, "n_hosts").map_err(err)?;
    let tot = totals(&df).map_err(err)?;
    Ok(top_rows(&tot, top, |i| name[i].clone())
        .into_iter()
        .map(|i| TopNamed {
            name: name[i].clone(),
            n_hosts: nh[i],
            totals: tot[i],
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(s: &str) -> Vec<String> {
        s.split_whitespace().rev().map(str::to_string).collect()
    }

    /// Fleet names normalize frames as a trace's do, and tell stacks with the same name
    /// apart by their key.
    #[test]
    fn fleet_names_normalize_and_use_keys() {
        let frames = vec![
            stack("__x64_sys_write vfs_write ext4_file_write_iter.constprop.0 submit_bio"),
            stack("__x64_sys_write vfs_write ext4_file_write_iter.constprop.0 submit_bio"),
            // The same path once the syscall's plumbing is left out.
            stack("__x64_sys_write vfs_writev ext4_file_write_iter submit_bio"),
            vec![],
        ];
        let reasons = vec![None, Some("sync".to_string()), None, None];
        let names = fleet_names(&frames, &reasons, &[5, 6, 7, 1], &[10, 11, 12, 13]);
        assert!(!names[0].contains("constprop"), "{names:?}");
        assert_eq!(
            names[..3],
            [
                "write(2) › ext4_file_write_iter (key 000000000000000a)",
                "write(2) › ext4_file_write_iter [wb:sync] (key 000000000000000b)",
                "write(2) › ext4_file_write_iter (key 000000000000000c)",
            ]
        );
        assert_eq!(names[3], "[lost]");
    }
}
