//! The report's Parquet tables without the rest of the report, for writers that store them
//! elsewhere (the fleet dataset, `crates/dataset`): `ios` streamed to a file through an
//! optional [`FrameMap`], the other tables returned as frames.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ioblame_attrib::{CgroupNames, FileKey, Io, Symbolizer, Tables};
use ioblame_counters::CounterSet;
use polars::prelude::{DataFrame, PolarsError};

use crate::agg::Aggregates;
use crate::tables::{self, FrameMap, IosWriter};
use crate::ReportError;

/// The tables besides `ios` of one analysis, as `docs/report.md` specifies them, counting
/// the IOs given to [`TableWriter::push_io`].
#[derive(Debug, Clone)]
pub struct TableFrames {
    /// Rows written to the `ios` file.
    pub ios_rows: u64,
    /// `acts`.
    pub acts: DataFrame,
    /// `intents`.
    pub intents: DataFrame,
    /// `roles`.
    pub roles: DataFrame,
    /// `files`.
    pub files: DataFrame,
    /// `histograms`.
    pub histograms: DataFrame,
}

/// Streams `ios` into a Parquet file and keeps the per-act sums the other tables need.
pub struct TableWriter {
    ios: IosWriter,
    agg: Aggregates,
}

impl std::fmt::Debug for TableWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableWriter")
            .field("ios", &self.n_ios())
            .finish()
    }
}

impl TableWriter {
    /// Creates the `ios` file at `ios_path`; `map`, if any, rewrites each batch of rows (at
    /// most [`crate::IOS_ROW_GROUP`]) before it is written, and the empty frame the file's
    /// schema is taken from.
    pub fn create(ios_path: PathBuf, map: Option<FrameMap>) -> Result<TableWriter, ReportError> {
        TableWriter::create_based(ios_path, map, None)
    }

    /// [`TableWriter::create`], the charts' time axis based at `base` (ns, trace clock).
    pub(crate) fn create_based(
        ios_path: PathBuf,
        map: Option<FrameMap>,
        base: Option<u64>,
    ) -> Result<TableWriter, ReportError> {
        Ok(TableWriter {
            ios: IosWriter::create(ios_path, map)?,
            agg: Aggregates::new(base),
        })
    }

    /// The IOs given to [`TableWriter::push_io`] so far.
    pub(crate) fn n_ios(&self) -> u64 {
        self.agg.n_ios
    }

    /// Records one IO as the attribution charged it; `tables` must already hold its act.
    pub fn push_io(&mut self, io: &Io, tables: &Tables) -> Result<(), ReportError> {
        self.ios.push(io, tables)?;
        self.agg.push(io, tables);
        Ok(())
    }

    /// Finishes the `ios` file and builds the other tables; `sym` names kernel frames,
    /// `paths` names files by (dev, ino), `cgroups` the roles' cgroups (`None`: the trace
    /// recorded none, the `cgroup` columns are all null).
    pub fn finish(
        self,
        t: &Tables,
        counters: &CounterSet,
        sym: &dyn Symbolizer,
        paths: &BTreeMap<FileKey, String>,
        cgroups: Option<&CgroupNames>,
    ) -> Result<TableFrames, ReportError> {
        let (ios_rows, shown, agg) = self.finish_ios(t)?;
        let err = |source: PolarsError| ReportError::Frame { source };
        let names = ioblame_attrib::intent_names(&shown, sym);
        Ok(TableFrames {
            ios_rows,
            acts: tables::acts_frame(&shown, &agg, &names, cgroups).map_err(err)?,
            intents: tables::intents_frame(&shown, sym, &names).map_err(err)?,
            roles: tables::roles_frame(&shown, cgroups).map_err(err)?,
            files: tables::files_frame(&shown, paths).map_err(err)?,
            histograms: tables::histograms_frame(&shown, counters).map_err(err)?,
        })
    }

    /// Finishes the `ios` file: its rows, the attribution's tables `t` as every output shows
    /// them, and the sums kept. Every output counts the IOs given to `push_io`, exactly those
    /// of `ios.parquet`: the attribution's totals may also hold IO the caller left out
    /// (other devices, the recorder).
    pub(crate) fn finish_ios(self, t: &Tables) -> Result<(u64, Tables, Aggregates), ReportError> {
        let ios_rows = self.ios.finish()?;
        let shown = Tables {
            roles: t.roles.clone(),
            intents: t.intents.clone(),
            acts: t.acts.clone(),
            totals: self.agg.totals_for(t),
        };
        Ok((ios_rows, shown, self.agg))
    }
}
