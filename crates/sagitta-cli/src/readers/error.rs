//! Import errors. Every data error names the file, where in it (row, line or byte offset)
//! and the field at fault, e.g.
//! `data.parquet: row 1234: column `vector`: expected 768 values, got 767`.
//! Rows count from 0 (the row number is the default id); JSON Lines lines count from 1.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Where in a file an error is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// The file as a whole (its header, schema or length).
    File,
    Row(u64),
    /// A row and the byte offset at which it starts (formats without a row index).
    RowAtByte {
        row: u64,
        byte: u64,
    },
    /// A line of a JSON Lines file, counted from 1.
    Line(u64),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File => Ok(()),
            Location::Row(row) => write!(f, "row {row}: "),
            Location::RowAtByte { row, byte } => write!(f, "row {row} (byte {byte}): "),
            Location::Line(line) => write!(f, "line {line}: "),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The command line asks for something the source cannot give (exit status 2).
    #[error("{0}")]
    Usage(String),
    #[error("{}: {source}", file.display())]
    Io { file: PathBuf, source: io::Error },
    /// The file's content is wrong.
    #[error("{}: {location}{}{reason}", file.display(), field_prefix(field.as_deref()))]
    Invalid {
        file: PathBuf,
        location: Location,
        /// The column, value or key at fault, e.g. "column `vector`".
        field: Option<String>,
        reason: String,
    },
}

fn field_prefix(field: Option<&str>) -> String {
    field.map(|field| format!("{field}: ")).unwrap_or_default()
}

impl ImportError {
    pub fn io(file: &Path, source: io::Error) -> ImportError {
        ImportError::Io {
            file: file.to_path_buf(),
            source,
        }
    }

    pub fn invalid(file: &Path, location: Location, reason: impl Into<String>) -> ImportError {
        ImportError::Invalid {
            file: file.to_path_buf(),
            location,
            field: None,
            reason: reason.into(),
        }
    }

    /// The same error, naming the field at fault (a no-op for other variants).
    #[must_use]
    pub fn with_field(self, name: impl Into<String>) -> ImportError {
        match self {
            ImportError::Invalid {
                file,
                location,
                reason,
                ..
            } => ImportError::Invalid {
                file,
                location,
                field: Some(name.into()),
                reason,
            },
            other => other,
        }
    }

    /// Whether the command line is at fault (exit status 2) rather than the data (1).
    pub fn is_usage(&self) -> bool {
        matches!(self, ImportError::Usage(_))
    }
}
