//! Errors of the dataset crate. Each names the file (and where it can, the column and row) so a user
//! can find the problem without a debugger.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{path}: parquet: {source}")]
    Parquet {
        path: PathBuf,
        #[source]
        source: parquet::errors::ParquetError,
    },
    #[error("{path}: arrow: {source}")]
    Arrow {
        path: PathBuf,
        #[source]
        source: arrow_schema::ArrowError,
    },
    #[cfg(feature = "polars")]
    #[error("{path}: polars: {message}")]
    Polars { path: PathBuf, message: String },
}

pub type Result<T, E = DatasetError> = std::result::Result<T, E>;

impl DatasetError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DatasetError::Io {
            path: path.into(),
            source,
        }
    }
    pub fn invalid(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        DatasetError::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }
    pub fn parquet(path: impl Into<PathBuf>, source: parquet::errors::ParquetError) -> Self {
        DatasetError::Parquet {
            path: path.into(),
            source,
        }
    }
    pub fn arrow(path: impl Into<PathBuf>, source: arrow_schema::ArrowError) -> Self {
        DatasetError::Arrow {
            path: path.into(),
            source,
        }
    }
}
