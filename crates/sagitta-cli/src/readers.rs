//! Input readers for `sagitta import`: `.npy`, `.fvecs` / `.bvecs` and Parquet files become
//! points (`id`, `vector`, optional JSON-object `payload`) and their dimension.
//!
//! Dense formats (`.npy`, `.fvecs`, `.bvecs`) carry only vectors: ids are row numbers plus
//! `id_offset`, or come from a 1-D integer `.npy` file; payloads come from a JSON Lines file
//! with one object per row. Parquet carries all three as columns.
//!
//! Every value is checked before it is returned: one dimension for all rows (1 ..=
//! [`MAX_DIMENSION`]), finite values, ids unique, payloads JSON objects. Nothing in a file is
//! trusted: lengths are checked against the file size before anything is allocated, and a
//! bad file is an [`ImportError`] naming the file, the row and the field, never a panic.

mod error;
mod npy;
mod parquet;
mod sidecar;
mod vecs;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sagitta_engine::collection::MAX_DIMENSION;
use sagitta_engine::point::{Point, PointId};

pub use error::{ImportError, Location};

/// A source file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// NumPy `.npy`: a 2-D float32 / float64 / float16 array, C order.
    Npy,
    /// `.fvecs`: per row, an i32 dimension then that many f32 (little-endian).
    Fvecs,
    /// `.bvecs`: per row, an i32 dimension then that many u8.
    Bvecs,
    /// Apache Parquet with an id column, a vector column and payload columns.
    Parquet,
}

impl Format {
    /// The format a file name's extension names, if any.
    pub fn from_extension(path: &Path) -> Option<Format> {
        let extension = path.extension()?.to_str()?.to_ascii_lowercase();
        match extension.as_str() {
            "npy" => Some(Format::Npy),
            "fvecs" => Some(Format::Fvecs),
            "bvecs" => Some(Format::Bvecs),
            "parquet" | "pq" => Some(Format::Parquet),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Npy => "npy",
            Format::Fvecs => "fvecs",
            Format::Bvecs => "bvecs",
            Format::Parquet => "parquet",
        }
    }
}

/// How to read a source; `None` fields take the defaults below.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// The format; by default chosen by the source's extension.
    pub format: Option<Format>,
    /// Dense formats: a 1-D integer `.npy` file with one id per row.
    pub ids: Option<PathBuf>,
    /// Dense formats: a JSON Lines file with one payload object per row.
    pub payloads: Option<PathBuf>,
    /// Ids are row number + `id_offset` (default 0); refused with an id file or id column.
    pub id_offset: Option<u64>,
    /// Parquet: the id column (default `id`; row numbers when that column is absent).
    pub id_column: Option<String>,
    /// Parquet: the vector column (default `vector`).
    pub vector_column: Option<String>,
}

/// Points read from a source, all with the same dimension.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadPoints {
    pub points: Vec<Point>,
    pub dim: usize,
    /// Size of every file read (source, id file and payload file).
    pub bytes_read: u64,
}

/// Reads every point of `source`; see the module documentation for what is checked.
pub fn read_points(source: &Path, options: &ReadOptions) -> Result<ReadPoints, ImportError> {
    let format = choose_format(source, options.format)?;
    check_options_fit(format, options)?;
    let read = match format {
        Format::Parquet => parquet::read_points(
            source,
            &parquet::ColumnNames {
                id: options.id_column.as_deref(),
                vector: options.vector_column.as_deref().unwrap_or("vector"),
                id_offset: options.id_offset,
            },
        )?,
        Format::Npy | Format::Fvecs | Format::Bvecs => read_dense(source, format, options)?,
    };
    if read.points.is_empty() {
        return Err(ImportError::invalid(
            source,
            Location::File,
            "has no rows; nothing to import",
        ));
    }
    check_unique_ids(source, &read.points)?;
    Ok(read)
}

fn choose_format(source: &Path, format: Option<Format>) -> Result<Format, ImportError> {
    format
        .or_else(|| Format::from_extension(source))
        .ok_or_else(|| {
            ImportError::Usage(format!(
                "{}: cannot tell the format from the extension; pass --format npy|fvecs|bvecs|parquet",
                source.display()
            ))
        })
}

/// Refuses options that the format cannot use, rather than silently ignoring them.
fn check_options_fit(format: Format, options: &ReadOptions) -> Result<(), ImportError> {
    let misfit = |option: &str| {
        Err(ImportError::Usage(format!(
            "{option} does not apply to {} sources",
            format.name()
        )))
    };
    if format == Format::Parquet {
        if options.ids.is_some() {
            return misfit("--ids");
        }
        if options.payloads.is_some() {
            return misfit("--payloads");
        }
    } else {
        if options.id_column.is_some() {
            return misfit("--id-column");
        }
        if options.vector_column.is_some() {
            return misfit("--vector-column");
        }
    }
    if options.ids.is_some() && options.id_offset.is_some() {
        return Err(ImportError::Usage(
            "--id-offset and --ids cannot be combined".into(),
        ));
    }
    Ok(())
}

/// Vectors of a dense format with ids and payloads from the side files.
fn read_dense(
    source: &Path,
    format: Format,
    options: &ReadOptions,
) -> Result<ReadPoints, ImportError> {
    let vectors = match format {
        Format::Npy => npy::read_vectors(source)?,
        Format::Bvecs => vecs::read_vectors(source, vecs::Element::UInt8)?,
        _ => vecs::read_vectors(source, vecs::Element::Float32)?,
    };
    let row_count = vectors.rows.len();
    let mut bytes_read = vectors.bytes_read;
    let ids = match &options.ids {
        Some(path) => {
            let (ids, bytes) = npy::read_ids(path, row_count)?;
            bytes_read += bytes;
            ids
        }
        None => row_number_ids(source, row_count, options.id_offset.unwrap_or(0))?,
    };
    let payloads = match &options.payloads {
        Some(path) => {
            let (payloads, bytes) = sidecar::read_payloads(path, row_count)?;
            bytes_read += bytes;
            payloads.into_iter().map(Some).collect()
        }
        None => vec![None; row_count],
    };
    let points = vectors
        .rows
        .into_iter()
        .zip(ids)
        .zip(payloads)
        .map(|((vector, id), payload)| Point {
            id: PointId::Number(id),
            vector,
            payload,
            side: Vec::new(),
        })
        .collect();
    Ok(ReadPoints {
        points,
        dim: vectors.dim,
        bytes_read,
    })
}

/// Vectors of a dense file, one per row.
struct DenseVectors {
    rows: Vec<Vec<f32>>,
    dim: usize,
    bytes_read: u64,
}

/// Ids `id_offset`, `id_offset + 1`, ... for `row_count` rows.
fn row_number_ids(
    source: &Path,
    row_count: usize,
    id_offset: u64,
) -> Result<Vec<u64>, ImportError> {
    (0..row_count as u64)
        .map(|row| row_number_id(source, row, id_offset))
        .collect()
}

fn row_number_id(source: &Path, row: u64, id_offset: u64) -> Result<u64, ImportError> {
    row.checked_add(id_offset).ok_or_else(|| {
        ImportError::invalid(
            source,
            Location::Row(row),
            format!("id {row} + --id-offset {id_offset} overflows u64"),
        )
    })
}

/// The dimension every row must have: 1 ..= [`MAX_DIMENSION`].
fn check_dimension(source: &Path, location: Location, dim: usize) -> Result<(), ImportError> {
    if (1..=MAX_DIMENSION).contains(&dim) {
        Ok(())
    } else {
        Err(ImportError::invalid(
            source,
            location,
            format!("dimension {dim} is outside 1..={MAX_DIMENSION}"),
        ))
    }
}

/// The first value that is NaN or infinite, as (position, value).
fn first_non_finite(vector: &[f32]) -> Option<(usize, f32)> {
    vector
        .iter()
        .position(|value| !value.is_finite())
        .map(|position| (position, vector[position]))
}

fn non_finite_reason(position: usize, value: f32) -> String {
    format!("value {position} is {value}; vectors must be finite")
}

/// Every id appears once; a repeat names both rows.
fn check_unique_ids(source: &Path, points: &[Point]) -> Result<(), ImportError> {
    // Row-number ids (and any sorted ids) need no table.
    if points.windows(2).all(|pair| pair[0].id < pair[1].id) {
        return Ok(());
    }
    let mut first_row: HashMap<PointId, u64> = HashMap::with_capacity(points.len());
    for (row, point) in (0_u64..).zip(points) {
        if let Some(earlier) = first_row.insert(point.id, row) {
            return Err(ImportError::invalid(
                source,
                Location::Row(row),
                format!("id {} is also the id of row {earlier}", point.id),
            ));
        }
    }
    Ok(())
}
