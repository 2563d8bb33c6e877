//! Exporting one analysed trace into the dataset: the report's tables (`ios` streamed, the
//! others at the end), made signed and keyed ([`crate::schema::conform`]), each written under
//! a temporary name and renamed into its partition, the `traces` row last.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use ioblame_attrib::{CgroupNames, FileKey, Io, Symbolizer, Tables};
use ioblame_counters::CounterSet;
use ioblame_report::{TableFrames, TableWriter};
use polars::prelude::*;

use crate::atomic;
use crate::error::DatasetError;
use crate::schema::{self, TraceKeys, SCHEMA_VERSION, TABLES};

/// What the `traces` table says about a trace besides its keys.
#[derive(Debug, Clone, Default)]
pub struct TraceInfo {
    /// Where the trace was read from, as the user named it.
    pub source: String,
    /// The host name recorded in the trace (the partition's host may be another).
    pub recorded_host: String,
    /// Machine architecture of the recording host.
    pub machine: String,
    /// The recorder's name and version.
    pub recorder_version: String,
}

/// What an export wrote.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The files written, `traces` last.
    pub files: Vec<PathBuf>,
    /// Rows of `ios`.
    pub ios_rows: u64,
}

/// Writes one trace's tables into a dataset: [`create`](Self::create),
/// [`push_io`](Self::push_io) each IO, [`finish`](Self::finish). Nothing is visible in the
/// dataset before `finish` renames the files; dropping the writer (or a killed process)
/// leaves only temporary files, which readers skip and the next export removes.
pub struct TraceWriter {
    dataset: PathBuf,
    keys: TraceKeys,
    tables: TableWriter,
    extra: Vec<(&'static str, DataFrame)>,
}

impl std::fmt::Debug for TraceWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceWriter")
            .field("dataset", &self.dataset)
            .field("keys", &self.keys)
            .finish()
    }
}

impl TraceWriter {
    /// Prepares the dataset (version file, partition directories; temporary files of killed
    /// exports removed) and opens the trace's `ios` file under its temporary name.
    pub fn create(dataset: &Path, keys: TraceKeys) -> Result<TraceWriter, DatasetError> {
        schema::check_host(&keys.host)?;
        for l in &keys.labels {
            schema::check_label(l)?;
        }
        schema::prepare(dataset)?;
        for t in TABLES {
            let dir = keys.dir(dataset, t);
            std::fs::create_dir_all(&dir).map_err(|e| DatasetError::io(&dir, e))?;
            atomic::clean_stale(&dir)?;
        }
        let ios = atomic::temp_path(&keys.file(dataset, "ios"));
        let k = keys.clone();
        let map: ioblame_report::FrameMap = Box::new(move |df| schema::conform(df, &k));
        Ok(TraceWriter {
            dataset: dataset.to_path_buf(),
            tables: TableWriter::create(ios, Some(map))?,
            keys,
            extra: Vec::new(),
        })
    }

    /// Records one IO as the attribution charged it.
    pub fn push_io(&mut self, io: &Io, tables: &Tables) -> Result<(), DatasetError> {
        Ok(self.tables.push_io(io, tables)?)
    }

    /// Adds a table computed elsewhere (`latency`: the latency breakdown), written beside the
    /// others with the same key columns. `name` must be one of [`TABLES`].
    pub fn add_table(&mut self, name: &'static str, df: DataFrame) -> Result<(), DatasetError> {
        if !TABLES.contains(&name) || name == "traces" {
            return Err(DatasetError::Invalid(format!("no dataset table {name:?}")));
        }
        self.extra.push((name, df));
        Ok(())
    }

    /// Builds the other tables, writes them all under temporary names, then renames them
    /// into place (`traces` last, so a trace listed there is complete), replacing an earlier
    /// export of the same trace. `cgroups` names the roles' cgroups (the `cgroup` columns of
    /// `acts` and `roles`; `None` when the trace recorded none).
    pub fn finish(
        self,
        t: &Tables,
        counters: &CounterSet,
        sym: &dyn Symbolizer,
        paths: &BTreeMap<FileKey, String>,
        cgroups: Option<&CgroupNames>,
        info: &TraceInfo,
    ) -> Result<Exported, DatasetError> {
        let TraceWriter {
            dataset,
            keys,
            tables,
            extra,
        } = self;
        let frames = tables.finish(t, counters, sym, paths, cgroups)?;
        let ios_rows = frames.ios_rows;
        let err = DatasetError::pq(&dataset);
        let keyed = keyed_frames(frames, t, paths, &keys, info).map_err(err)?;
        let mut written = vec![keys.file(&dataset, "ios")];
        for (name, df) in keyed.into_iter().chain(extra) {
            let path = keys.file(&dataset, name);
            let df = schema::conform(df, &keys).map_err(DatasetError::pq(&path))?;
            write_parquet(&atomic::temp_path(&path), df)?;
            written.push(path);
        }
        // `traces` goes last: written above after the others, renamed after them here.
        let traces_at = written
            .iter()
            .position(|p| p.starts_with(dataset.join("traces")))
            .unwrap_or(0);
        let traces = written.remove(traces_at);
        written.push(traces);
        for p in &written {
            atomic::commit(p)?;
        }
        // A table this export did not write (no latency breakdown this time) must not keep
        // an earlier export's rows.
        for t in TABLES {
            let p = keys.file(&dataset, t);
            if !written.contains(&p) && p.exists() {
                std::fs::remove_file(&p).map_err(|e| DatasetError::io(&p, e))?;
            }
        }
        Ok(Exported {
            files: written,
            ios_rows,
        })
    }
}

/// Writes a frame (zstd) to `path`.
fn write_parquet(path: &Path, mut df: DataFrame) -> Result<(), DatasetError> {
    let f = File::create(path).map_err(|e| DatasetError::io(path, e))?;
    ParquetWriter::new(BufWriter::new(f))
        .with_compression(ParquetCompression::Zstd(None))
        .finish(&mut df)
        .map_err(DatasetError::pq(path))?;
    Ok(())
}

/// A column of a frame as a series.
fn series<'a>(df: &'a DataFrame, name: &str) -> PolarsResult<&'a Series> {
    Ok(df.column(name)?.as_materialized_series())
}

/// The tables besides `ios`, with the dataset's own columns: `intent_key` in `intents` and
/// `acts`, `path` in `acts`, and the `traces` row.
fn keyed_frames(
    f: TableFrames,
    t: &Tables,
    paths: &BTreeMap<FileKey, String>,
    keys: &TraceKeys,
    info: &TraceInfo,
) -> PolarsResult<Vec<(&'static str, DataFrame)>> {
    let TableFrames {
        ios_rows,
        acts,
        mut intents,
        roles,
        files,
        histograms,
    } = f;
    // intents: the key of each intent from its frame names and writeback reason.
    let ids = series(&intents, "intent")?.u32()?.clone();
    let reasons = series(&intents, "reason")?.str()?.clone();
    let frame_lists = series(&intents, "frames")?.list()?.clone();
    let user_lists = series(&intents, "user_frames")?.list()?.clone();
    let mut by_intent: HashMap<u32, i64> = HashMap::new();
    let mut intent_keys = Vec::with_capacity(ids.len());
    for (i, (id, reason)) in ids.iter().zip(reasons.iter()).enumerate() {
        let id = id.unwrap_or(0);
        let list = |l: &ListChunked| -> PolarsResult<Vec<String>> {
            Ok(match l.get_as_series(i) {
                Some(s) => s
                    .str()?
                    .iter()
                    .map(|n| n.unwrap_or("?").to_string())
                    .collect(),
                None => Vec::new(),
            })
        };
        let names = list(&frame_lists)?;
        let user = list(&user_lists)?;
        let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
        let user: Vec<&str> = user.iter().map(|s| s.as_str()).collect();
        let k = schema::intent_key(id, &refs, &user, reason);
        by_intent.insert(id, k);
        intent_keys.push(k);
    }
    intents.insert_column(1, Column::new("intent_key".into(), intent_keys))?;
    // acts: the intent key and the file's path.
    let mut acts = acts;
    let act_ids = series(&acts, "act")?.u32()?.clone();
    let mut act_keys = Vec::with_capacity(act_ids.len());
    let mut act_paths: Vec<Option<&str>> = Vec::with_capacity(act_ids.len());
    for id in act_ids.iter() {
        let a = id.and_then(|i| t.acts.get(i as usize));
        act_keys.push(a.and_then(|a| by_intent.get(&a.intent.0)).copied());
        act_paths.push(a.and_then(|a| paths.get(&a.file)).map(|s| s.as_str()));
    }
    let at = acts.get_column_index("intent").map_or(0, |i| i + 1);
    acts.insert_column(at, Column::new("intent_key".into(), act_keys))?;
    let at = acts.get_column_index("ino").map_or(0, |i| i + 1);
    acts.insert_column(at, Column::new("path".into(), act_paths))?;
    // traces: one row.
    let sum =
        |name: &str| -> PolarsResult<u64> { Ok(series(&acts, name)?.u64()?.sum().unwrap_or(0)) };
    let traces = df!(
        "recorded_host" => [info.recorded_host.as_str()],
        "machine" => [info.machine.as_str()],
        "recorder_version" => [info.recorder_version.as_str()],
        "exporter" => [concat!("ioblame ", env!("CARGO_PKG_VERSION"))],
        "schema_version" => [SCHEMA_VERSION],
        "source" => [info.source.as_str()],
        "ios" => [ios_rows],
        "read_bytes" => [sum("read_bytes")?],
        "readahead_bytes" => [sum("readahead_bytes")?],
        "write_bytes" => [sum("write_bytes")?],
        "acts" => [acts.height() as u64],
        "intents" => [intents.height() as u64],
    )?;
    let _ = keys;
    Ok(vec![
        ("acts", acts),
        ("intents", intents),
        ("roles", roles),
        ("files", files),
        ("histograms", histograms),
        ("traces", traces),
    ])
}
