//! Typed storage errors; each names the file and the operation.

use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    #[error("I/O error while {operation} `{}`: {message}", path.display())]
    Io {
        operation: &'static str,
        path: PathBuf,
        kind: std::io::ErrorKind,
        message: String,
    },
    #[error("no space left on device while {operation} `{}`", path.display())]
    NoSpace {
        operation: &'static str,
        path: PathBuf,
    },
    #[error("`{}` refuses writes after an earlier I/O error ({cause}); reopen it", path.display())]
    Poisoned { path: PathBuf, cause: String },
    #[error("`{}` is corrupt at byte {offset}: {reason}", path.display())]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("`{}` is locked by another open database (another process or handle)", path.display())]
    Locked { path: PathBuf },
    #[error("record of {size} bytes exceeds the limit of {limit} bytes")]
    RecordTooLarge { size: usize, limit: usize },
}

impl StorageError {
    pub(crate) fn io(
        operation: &'static str,
        path: &std::path::Path,
        error: &std::io::Error,
    ) -> Self {
        if error.kind() == std::io::ErrorKind::StorageFull {
            return StorageError::NoSpace {
                operation,
                path: path.to_path_buf(),
            };
        }
        StorageError::Io {
            operation,
            path: path.to_path_buf(),
            kind: error.kind(),
            message: error.to_string(),
        }
    }
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;
