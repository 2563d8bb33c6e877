//! The dataset's layout and schema (`docs/dataset.md`): where each file goes, the columns
//! every row carries, the version file, the intent key.

use std::path::{Path, PathBuf};

use ioblame_attrib::{INTENT_LOST, INTENT_NOMEM};
use polars::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

use crate::error::DatasetError;

/// Version of the dataset's schema. Readers refuse a dataset of a newer version; a change
/// that removes or retypes a column, or changes its meaning, takes a new version.
pub const SCHEMA_VERSION: i64 = 1;

/// Revision of the schema within its version: what has been added (columns at the end of a
/// table, tables), which a reader of the version reads as before. The version file holds the
/// highest revision an export into the dataset wrote (its files have at most those columns;
/// an older file lacks the later ones, which the fleet reads as null):
///
/// * 0: the first schema of version 1;
/// * 1: the `latency` table; `acts.cgroup`, `roles.cgroup`;
/// * 2: `ios.journal_share`, `ios.lower`;
/// * 3: `intents.user_frames`, `intents.user_modules`, `intents.user_offsets`;
/// * 4: the `blame` table (who made the IO slow, `ioblame_report::blame_frame`).
pub const SCHEMA_REVISION: i64 = 4;

/// The version file at the dataset's root (ignored by Hive readers: its name starts with `_`).
pub const VERSION_FILE: &str = "_ioblame_dataset.json";

/// The tables of a trace, each a directory of the dataset (`latency`: btt's latency
/// breakdown, [`crate::latency::latency_frame`]; `blame`: who made the IO slow, the report's
/// `blame.parquet`).
pub const TABLES: [&str; 9] = [
    "traces",
    "ios",
    "acts",
    "intents",
    "roles",
    "files",
    "histograms",
    "latency",
    "blame",
];

/// What identifies a trace in the dataset: the partition it goes to and the columns every
/// row of it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceKeys {
    /// Host name (partition `host=`): letters, digits, `.`, `_`, `-`.
    pub host: String,
    /// The trace's id: 16 lowercase hex digits (the file name of each table).
    pub trace_id: String,
    /// Capture start, ns since the Unix epoch (UTC); its date is the partition `date=`.
    pub capture_start_ns: i64,
    /// Kernel release of the recording host.
    pub kernel_release: String,
    /// Labels `KEY=VALUE`, sorted by key.
    pub labels: Vec<String>,
}

impl TraceKeys {
    /// The capture start's UTC date, `YYYY-MM-DD`.
    pub fn date(&self) -> String {
        let secs = self.capture_start_ns.div_euclid(1_000_000_000);
        chrono::DateTime::from_timestamp(secs, 0)
            .map(|d| d.format("%Y-%m-%d").to_string())
            .unwrap_or_else(|| "1970-01-01".to_string())
    }

    /// The partition directory of `table` in `dataset`.
    pub fn dir(&self, dataset: &Path, table: &str) -> PathBuf {
        dataset
            .join(table)
            .join(format!("host={}", self.host))
            .join(format!("date={}", self.date()))
    }

    /// The file of `table` in `dataset`.
    pub fn file(&self, dataset: &Path, table: &str) -> PathBuf {
        self.dir(dataset, table)
            .join(format!("{}.parquet", self.trace_id))
    }

    /// The key columns, `rows` long, that start every table.
    pub fn columns(&self, rows: usize) -> PolarsResult<Vec<Column>> {
        let start_us = self.capture_start_ns.div_euclid(1000);
        let start = Int64Chunked::full("capture_start".into(), start_us, rows)
            .into_datetime(TimeUnit::Microseconds, Some(TimeZone::UTC))
            .into_series()
            .into_column();
        let labels = Series::new("labels".into(), &self.labels);
        Ok(vec![
            StringChunked::full("trace_id".into(), &self.trace_id, rows).into_column(),
            start,
            StringChunked::full("kernel_release".into(), &self.kernel_release, rows).into_column(),
            ListChunked::full("labels".into(), &labels, rows).into_column(),
        ])
    }
}

/// Checks a host name for a partition value: non-empty, letters, digits, `.`, `_`, `-`.
pub fn check_host(host: &str) -> Result<(), DatasetError> {
    if !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && !host.starts_with('.')
    {
        Ok(())
    } else {
        Err(DatasetError::Invalid(format!(
            "host name {host:?}: use letters, digits, '.', '_' and '-' only"
        )))
    }
}

/// A recorded host name made fit for a partition value (other characters become `_`).
pub fn sanitize_host(host: &str) -> String {
    let s: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    match s.trim_start_matches('.') {
        "" => "unknown".to_string(),
        t => t.chars().take(255).collect(),
    }
}

/// Checks a label `KEY=VALUE`: the key letters, digits, `.`, `_`, `-`; the value printable.
pub fn check_label(label: &str) -> Result<(), DatasetError> {
    let ok = label.split_once('=').is_some_and(|(k, v)| {
        !k.is_empty()
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            && !v.chars().any(char::is_control)
    });
    if ok {
        Ok(())
    } else {
        Err(DatasetError::Invalid(format!(
            "label {label:?}: give KEY=VALUE, the key in letters, digits, '.', '_' and '-'"
        )))
    }
}

/// What stands for the frames of an intent without a stack, as in the flame graphs.
pub fn empty_stack_name(intent: u32) -> &'static str {
    match intent {
        i if i == INTENT_LOST.0 => "[lost]",
        i if i == INTENT_NOMEM.0 => "[nomem]",
        _ => "[no stack]",
    }
}

/// The intent key: XXH3-64 (`XXH3_64bits`, no seed) of the UTF-8 text made of the frame
/// names innermost first (or [`empty_stack_name`] when there are none), then, when the
/// intent has user frames, `[user]` and their names innermost first, then `[wb:REASON]` for
/// a writeback intent, joined by `\n`; its 64 bits read as a signed
/// integer. The same symbolized stack has the same key on every host and kernel build; an
/// unsymbolized frame (`0x...`) is an address, which differs between boots.
pub fn intent_key(intent: u32, frames: &[&str], user: &[&str], reason: Option<&str>) -> i64 {
    let mut text = if frames.is_empty() {
        empty_stack_name(intent).to_string()
    } else {
        frames.join("\n")
    };
    // The application's frames (recorded with user stacks) after a line no kernel frame
    // is; an intent without them keeps the key it had before they were recorded.
    if !user.is_empty() {
        text.push_str("\n[user]\n");
        text.push_str(&user.join("\n"));
    }
    if let Some(r) = reason {
        text.push_str("\n[wb:");
        text.push_str(r);
        text.push(']');
    }
    xxh3_64(text.as_bytes()) as i64
}

/// Makes a table's columns fit the dataset: every unsigned integer (and list of them)
/// becomes a signed 64-bit integer, bit for bit (values from 2^63, kernel addresses, read
/// negative), then the key columns are put first.
pub fn conform(df: DataFrame, keys: &TraceKeys) -> PolarsResult<DataFrame> {
    let rows = df.height();
    let mut cols = keys.columns(rows)?;
    for c in df.columns() {
        cols.push(signed(c.as_materialized_series())?.into_column());
    }
    DataFrame::new(rows, cols)
}

/// A column with unsigned integers made signed 64-bit (bit for bit for `u64`).
fn signed(s: &Series) -> PolarsResult<Series> {
    Ok(match s.dtype() {
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 => s.cast(&DataType::Int64)?,
        DataType::UInt64 => s
            .u64()?
            .iter()
            .map(|v| v.map(|x| x as i64))
            .collect::<Int64Chunked>()
            .with_name(s.name().clone())
            .into_series(),
        DataType::List(inner) if inner.is_unsigned_integer() => {
            let lists = s.list()?;
            let mut out: Vec<Option<Series>> = Vec::with_capacity(lists.len());
            for i in 0..lists.len() {
                out.push(lists.get_as_series(i).map(|l| signed(&l)).transpose()?);
            }
            let mut ca: ListChunked = out.into_iter().collect();
            ca.rename(s.name().clone());
            ca.cast(&DataType::List(Box::new(DataType::Int64)))?
        }
        _ => s.clone(),
    })
}

/// A dataset's schema version and revision, from its version file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatasetVersion {
    /// `schema_version`: [`SCHEMA_VERSION`] or older.
    pub version: i64,
    /// `schema_revision`: the highest revision any export into it wrote (0 for a file
    /// without one, written before revisions were).
    pub revision: i64,
}

/// Reads the dataset's version file; `Ok(None)` when there is none. A file of a newer
/// version is refused; a newer revision of this version is read (it only adds).
pub fn read_version(dataset: &Path) -> Result<Option<DatasetVersion>, DatasetError> {
    let path = dataset.join(VERSION_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(DatasetError::io(path, e)),
    };
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| DatasetError::NotADataset {
            path: path.clone(),
            why: e.to_string(),
        })?;
    let version = v
        .get("schema_version")
        .and_then(|x| x.as_i64())
        .ok_or_else(|| DatasetError::NotADataset {
            path: path.clone(),
            why: "no schema_version".to_string(),
        })?;
    if version > SCHEMA_VERSION {
        return Err(DatasetError::NewerSchema {
            path,
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    let revision = v
        .get("schema_revision")
        .and_then(|x| x.as_i64())
        .unwrap_or(0);
    Ok(Some(DatasetVersion { version, revision }))
}

/// The text of a version file of this schema's version and revision.
fn version_text(revision: i64) -> String {
    format!(
        "{{\"format\": \"ioblame-dataset\", \"schema_version\": {SCHEMA_VERSION}, \
         \"schema_revision\": {revision}}}\n"
    )
}

/// Checks a dataset to read: its version file exists and is not newer than this ioblame.
pub fn check_readable(dataset: &Path) -> Result<(), DatasetError> {
    match read_version(dataset)? {
        Some(_) => Ok(()),
        None => Err(DatasetError::NotADataset {
            path: dataset.join(VERSION_FILE),
            why: "no version file; write one with `ioblame export`".to_string(),
        }),
    }
}

/// Creates the dataset's root and version file if needed; refuses a newer dataset. The
/// version file of an older revision of this version (files exported before some columns
/// were added) is raised to [`SCHEMA_REVISION`]: the files now written have those columns.
/// A dataset of an older version is exported into as it is (a version has yet to change).
pub fn prepare(dataset: &Path) -> Result<(), DatasetError> {
    std::fs::create_dir_all(dataset).map_err(|e| DatasetError::io(dataset, e))?;
    let raise = match read_version(dataset)? {
        None => true,
        Some(v) => v.version == SCHEMA_VERSION && v.revision < SCHEMA_REVISION,
    };
    if raise {
        let text = version_text(SCHEMA_REVISION);
        crate::atomic::write_file(&dataset.join(VERSION_FILE), text.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_files_of_older_revisions_are_read_and_raised() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join(VERSION_FILE);
        // A file written before revisions were: revision 0, readable, raised by an export.
        std::fs::write(
            &path,
            "{\"format\": \"ioblame-dataset\", \"schema_version\": 1}\n",
        )
        .unwrap();
        assert_eq!(
            read_version(d.path()).unwrap(),
            Some(DatasetVersion {
                version: 1,
                revision: 0
            })
        );
        prepare(d.path()).unwrap();
        assert_eq!(
            read_version(d.path()).unwrap(),
            Some(DatasetVersion {
                version: SCHEMA_VERSION,
                revision: SCHEMA_REVISION
            })
        );
        // A newer revision of this version (a later ioblame's export) is read and kept.
        std::fs::write(&path, version_text(SCHEMA_REVISION + 1)).unwrap();
        prepare(d.path()).unwrap();
        check_readable(d.path()).unwrap();
        assert_eq!(
            read_version(d.path()).unwrap().unwrap().revision,
            SCHEMA_REVISION + 1
        );
        // A newer version is refused.
        std::fs::write(
            &path,
            "{\"format\": \"ioblame-dataset\", \"schema_version\": 2, \"schema_revision\": 0}",
        )
        .unwrap();
        assert!(matches!(
            read_version(d.path()),
            Err(DatasetError::NewerSchema { found: 2, .. })
        ));
        // A new dataset's file says both.
        let n = tempfile::tempdir().unwrap();
        prepare(n.path()).unwrap();
        let text = std::fs::read_to_string(n.path().join(VERSION_FILE)).unwrap();
        assert_eq!(text, version_text(SCHEMA_REVISION));
    }

    #[test]
    fn intent_key_is_xxh3_of_the_names() {
        // The reference value of the XXH3 specification for the empty input.
        assert_eq!(xxh3_64(b""), 0x2D06_8005_38D3_94C2);
        let k = intent_key(5, &["a", "b"], &[], None);
        assert_eq!(k, xxh3_64(b"a\nb") as i64);
        assert_ne!(k, intent_key(5, &["b", "a"], &[], None));
        assert_eq!(
            intent_key(5, &["a"], &[], Some("sync")),
            xxh3_64(b"a\n[wb:sync]") as i64
        );
        assert_eq!(intent_key(1, &[], &[], None), xxh3_64(b"[lost]") as i64);
        assert_eq!(intent_key(0, &[], &[], None), xxh3_64(b"[nomem]") as i64);
        // The key does not depend on the intent's number when the stack has frames.
        assert_eq!(intent_key(7, &["a", "b"], &[], None), k);
        // User frames follow the kernel's.
        assert_eq!(
            intent_key(5, &["a"], &["wal_flush", "main"], Some("sync")),
            xxh3_64(b"a\n[user]\nwal_flush\nmain\n[wb:sync]") as i64
        );
    }

    #[test]
    fn hosts_and_labels() {
        assert!(check_host("db-1.example").is_ok());
        assert!(check_host("").is_err());
        assert!(check_host("a/b").is_err());
        assert!(check_host("..").is_err());
        assert_eq!(sanitize_host("a b/c"), "a_b_c");
        assert_eq!(sanitize_host(""), "unknown");
        assert!(check_label("env=prod").is_ok());
        assert!(check_label("env=").is_ok());
        assert!(check_label("=x").is_err());
        assert!(check_label("noequals").is_err());
        assert!(check_label("a b=c").is_err());
    }

    #[test]
    fn date_of_capture_start() {
        let k = TraceKeys {
            host: "h".into(),
            trace_id: "00".into(),
            capture_start_ns: 1_764_000_000_000_000_000,
            kernel_release: "6.1".into(),
            labels: vec![],
        };
        assert_eq!(k.date(), "2025-11-24");
    }

    #[test]
    fn conform_makes_integers_signed() {
        let df = df!(
            "a" => [1u32, 2],
            "b" => [u64::MAX, 3],
            "c" => ["x", "y"],
        )
        .unwrap();
        let keys = TraceKeys {
            host: "h".into(),
            trace_id: "0123456789abcdef".into(),
            capture_start_ns: 1_500_000_123_456_789,
            kernel_release: "6.1".into(),
            labels: vec!["env=prod".into()],
        };
        let out = conform(df, &keys).unwrap();
        let names: Vec<&str> = out.get_column_names().iter().map(|s| s.as_str()).collect();
        assert_eq!(
            names,
            [
                "trace_id",
                "capture_start",
                "kernel_release",
                "labels",
                "a",
                "b",
                "c"
            ]
        );
        assert_eq!(out.column("a").unwrap().dtype(), &DataType::Int64);
        let b = out.column("b").unwrap();
        assert_eq!(b.i64().unwrap().get(0), Some(-1));
        assert_eq!(
            out.column("capture_start").unwrap().dtype(),
            &DataType::Datetime(TimeUnit::Microseconds, Some(TimeZone::UTC))
        );
    }
}
