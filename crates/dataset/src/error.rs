//! The dataset's errors.

use std::path::PathBuf;

/// What can go wrong exporting into a dataset or querying one. Every variant names the file
/// or directory concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// Reading or writing a file or directory failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Building, writing or scanning a Parquet table failed.
    #[error("{}: Parquet: {source}", path.display())]
    Parquet {
        /// The table file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: polars::error::PolarsError,
    },
    /// Writing the report's tables failed.
    #[error(transparent)]
    Report(#[from] ioblame_report::ReportError),
    /// The dataset was written by a newer ioblame, with a schema this one does not know.
    #[error(
        "{}: the dataset has schema version {found}; this ioblame reads version {supported} \
         and older: use a newer ioblame",
        path.display()
    )]
    NewerSchema {
        /// The dataset's version file.
        path: PathBuf,
        /// The version found.
        found: i64,
        /// [`crate::SCHEMA_VERSION`].
        supported: i64,
    },
    /// The directory is not an ioblame dataset (no readable version file).
    #[error("{}: not an ioblame dataset ({why})", path.display())]
    NotADataset {
        /// The version file looked for.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A host name, label or date given is not usable.
    #[error("{0}")]
    Invalid(String),
}

impl DatasetError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> DatasetError {
        DatasetError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn pq(
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(polars::error::PolarsError) -> DatasetError {
        let path = path.into();
        move |source| DatasetError::Parquet { path, source }
    }
}
