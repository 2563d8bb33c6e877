//! The report's errors.

use std::path::PathBuf;

/// What can go wrong while writing a report. Every variant names the file concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// Creating the output directory or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Building, writing or reading back a Parquet table failed.
    #[error("{}: Parquet: {source}", path.display())]
    Parquet {
        /// The table file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: polars::error::PolarsError,
    },
    /// Building a table in memory failed.
    #[error("building a table: {source}")]
    Frame {
        /// The underlying error.
        #[source]
        source: polars::error::PolarsError,
    },
    /// Drawing a chart failed.
    #[error("{}: drawing chart: {error}", path.display())]
    Chart {
        /// The chart file.
        path: PathBuf,
        /// What the drawing backend reported.
        error: ChartError,
    },
    /// The bundled font could not be registered.
    #[error("the bundled font could not be loaded")]
    Font,
}

impl ReportError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> ReportError {
        ReportError::Io {
            path: path.into(),
            source,
        }
    }
    pub(crate) fn chart(path: impl Into<PathBuf>, error: ChartError) -> ReportError {
        ReportError::Chart {
            path: path.into(),
            error,
        }
    }
}

/// An error of the chart drawing library (plotters), whose type depends on the backend
/// (SVG or bitmap). Shown as the library shows it.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ChartError(Box<dyn std::error::Error + Send + Sync>);

impl<E: std::error::Error + Send + Sync + 'static> From<plotters::drawing::DrawingAreaErrorKind<E>>
    for ChartError
{
    fn from(e: plotters::drawing::DrawingAreaErrorKind<E>) -> ChartError {
        ChartError(Box::new(e))
    }
}
