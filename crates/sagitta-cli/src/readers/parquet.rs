//! Parquet sources, read in record batches of [`BATCH_ROWS`] rows through Arrow.
//!
//! Columns: the id column (int64 / uint64 / int32 / ... or a UUID string or 16-byte
//! fixed-size binary; row numbers when absent), the vector column (list / large_list /
//! fixed_size_list of float32, float64 or float16) and every other column, which becomes a
//! payload key (see `payload.rs` for the types). pandas' index columns
//! (`__index_level_N__`) are skipped. The schema and the codecs (uncompressed, SNAPPY, LZ4,
//! LZ4_RAW; ZSTD with the `zstd` cargo feature) are checked before any row is read, so an
//! unsupported column or codec fails at once.

mod id;
mod payload;
mod vector;

use std::fs::File;
use std::path::Path;

use arrow_array::RecordBatch;
use arrow_schema::Schema;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use sagitta_engine::point::{Point, PointId};

use super::{check_dimension, row_number_id, ImportError, Location, ReadPoints};
use vector::VectorColumn;

/// Rows per record batch: 8,192 rows of 1,024 f32 are 32 MiB of Arrow memory.
const BATCH_ROWS: usize = 8192;
/// Most points reserved up front from the footer's row count, which is not trusted (a
/// corrupt footer could claim 2^60 rows); past this the vector grows as rows are decoded.
const MAX_RESERVED_POINTS: usize = 1 << 20;
const DEFAULT_ID_COLUMN: &str = "id";

/// Which columns hold what; `id: None` means "`id` if present, else row numbers".
pub(super) struct ColumnNames<'a> {
    pub id: Option<&'a str>,
    pub vector: &'a str,
    pub id_offset: Option<u64>,
}

/// Column indexes in the file's schema, checked against the expected types.
struct ColumnLayout {
    id: Option<usize>,
    vector: usize,
    /// Fixed dimension of a fixed_size_list vector column.
    fixed_dim: Option<usize>,
    payload: Vec<(usize, String)>,
}

pub(super) fn read_points(path: &Path, names: &ColumnNames) -> Result<ReadPoints, ImportError> {
    let file = File::open(path).map_err(|error| ImportError::io(path, error))?;
    let bytes_read = file
        .metadata()
        .map_err(|error| ImportError::io(path, error))?
        .len();
    let builder = without_panic(path, Location::File, || {
        ParquetRecordBatchReaderBuilder::try_new(file)
    })?
    .map_err(|error| {
        ImportError::invalid(
            path,
            Location::File,
            format!("not a readable Parquet file: {error}"),
        )
    })?;
    let layout = column_layout(path, builder.schema(), names)?;
    check_column_chunks(path, builder.metadata(), bytes_read)?;
    let row_count = builder.metadata().file_metadata().num_rows();
    let mut batches = without_panic(path, Location::File, || {
        builder.with_batch_size(BATCH_ROWS).build()
    })?
    .map_err(|error| ImportError::invalid(path, Location::File, error.to_string()))?;
    let reserved = usize::try_from(row_count).map_or(0, |count| count.min(MAX_RESERVED_POINTS));
    let mut points = Vec::with_capacity(reserved);
    let mut dim = layout.fixed_dim;
    loop {
        let first_row = points.len() as u64;
        let Some(batch) = without_panic(path, Location::Row(first_row), || batches.next())? else {
            break;
        };
        let batch = batch.map_err(|error| {
            ImportError::invalid(
                path,
                Location::Row(first_row),
                format!("cannot decode the batch of rows starting here: {error}"),
            )
        })?;
        let context = BatchContext {
            path,
            layout: &layout,
            names,
            first_row,
        };
        context.append_points(&batch, &mut dim, &mut points)?;
    }
    Ok(ReadPoints {
        points,
        dim: dim.unwrap_or(0),
        bytes_read,
    })
}

/// Runs a step of the Parquet decoder, turning a panic into an error. The decoder asserts
/// on some corrupt inputs instead of returning an error (a seeded byte-flipping test finds
/// them); the reader is dropped right after, so no broken state is observed.
fn without_panic<T>(
    path: &Path,
    location: Location,
    step: impl FnOnce() -> T,
) -> Result<T, ImportError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(step)).map_err(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(ToString::to_string)
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        ImportError::invalid(
            path,
            location,
            format!("the Parquet decoder failed on corrupt data: {message}"),
        )
    })
}

fn column_error(path: &Path, column: &str, reason: impl Into<String>) -> ImportError {
    ImportError::invalid(path, Location::File, reason).with_field(format!("column `{column}`"))
}

fn column_layout(
    path: &Path,
    schema: &Schema,
    names: &ColumnNames,
) -> Result<ColumnLayout, ImportError> {
    let column_list = || {
        let all: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        all.join(", ")
    };
    let vector = schema.index_of(names.vector).map_err(|_| {
        column_error(
            path,
            names.vector,
            format!(
                "no such column (the columns are: {}); name it with --vector-column",
                column_list()
            ),
        )
    })?;
    let fixed_dim = vector::check_type(schema.field(vector).data_type())
        .map_err(|reason| column_error(path, names.vector, reason))?;
    if let Some(dim) = fixed_dim {
        check_dimension(path, Location::File, dim)
            .map_err(|error| error.with_field(format!("column `{}`", names.vector)))?;
    }
    let id = id_column(path, schema, names, &column_list)?;
    if let (Some(index), Some(_)) = (id, names.id_offset) {
        return Err(ImportError::Usage(format!(
            "{}: --id-offset applies to row-number ids, but column `{}` gives the ids",
            path.display(),
            schema.field(index).name()
        )));
    }
    let payload = schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(index, field)| {
            *index != vector && Some(*index) != id && !is_pandas_index(field.name())
        })
        .map(|(index, field)| {
            payload::check_type(field.data_type())
                .map(|()| (index, field.name().clone()))
                .map_err(|reason| column_error(path, field.name(), reason))
        })
        .collect::<Result<Vec<_>, ImportError>>()?;
    Ok(ColumnLayout {
        id,
        vector,
        fixed_dim,
        payload,
    })
}

fn id_column(
    path: &Path,
    schema: &Schema,
    names: &ColumnNames,
    column_list: &dyn Fn() -> String,
) -> Result<Option<usize>, ImportError> {
    let name = names.id.unwrap_or(DEFAULT_ID_COLUMN);
    let Ok(index) = schema.index_of(name) else {
        if names.id.is_none() {
            return Ok(None);
        }
        return Err(column_error(
            path,
            name,
            format!("no such column (the columns are: {})", column_list()),
        ));
    };
    id::check_type(schema.field(index).data_type())
        .map(|()| Some(index))
        .map_err(|reason| column_error(path, name, reason))
}

/// Checks every column chunk before any row is read: its byte range lies inside the file
/// (the decoder panics on a negative one) and its codec is one this build has (the
/// decoder's own error would only say "disabled feature").
fn check_column_chunks(
    path: &Path,
    metadata: &ParquetMetaData,
    file_bytes: u64,
) -> Result<(), ImportError> {
    let chunks = metadata
        .row_groups()
        .iter()
        .flat_map(RowGroupMetaData::columns);
    for chunk in chunks {
        let column = chunk
            .column_path()
            .parts()
            .first()
            .cloned()
            .unwrap_or_default();
        let start = chunk
            .dictionary_page_offset()
            .unwrap_or(chunk.data_page_offset());
        let length = chunk.compressed_size();
        let end = u64::try_from(start)
            .ok()
            .zip(u64::try_from(length).ok())
            .and_then(|(start, length)| start.checked_add(length));
        if end.is_none_or(|end| end > file_bytes) {
            let reason = format!(
                "column chunk at byte {start}, {length} bytes long, is not inside the file \
                 ({file_bytes} bytes); the file is corrupt"
            );
            return Err(column_error(path, &column, reason));
        }
        if let Some(codec) = unsupported_codec_name(chunk.compression()) {
            return Err(column_error(path, &column, unsupported_codec_reason(codec)));
        }
    }
    Ok(())
}

fn unsupported_codec_reason(codec: &str) -> String {
    let zstd = if cfg!(feature = "zstd") {
        ", ZSTD"
    } else {
        "; ZSTD with the `zstd` cargo feature"
    };
    format!(
        "compressed with {codec}, which this build cannot read (it reads uncompressed, \
         SNAPPY, LZ4, LZ4_RAW{zstd}); rewrite the file with compression='snappy'"
    )
}

fn unsupported_codec_name(codec: Compression) -> Option<&'static str> {
    match codec {
        Compression::UNCOMPRESSED
        | Compression::SNAPPY
        | Compression::LZ4
        | Compression::LZ4_RAW => None,
        Compression::ZSTD(_) if cfg!(feature = "zstd") => None,
        Compression::ZSTD(_) => Some("ZSTD"),
        Compression::GZIP(_) => Some("GZIP"),
        Compression::BROTLI(_) => Some("BROTLI"),
        Compression::LZO => Some("LZO"),
    }
}

/// pandas writes a non-default index as `__index_level_0__`, ...: not user data.
fn is_pandas_index(name: &str) -> bool {
    name.strip_prefix("__index_level_")
        .and_then(|rest| rest.strip_suffix("__"))
        .is_some_and(|number| !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()))
}

/// One record batch being turned into points.
struct BatchContext<'a> {
    path: &'a Path,
    layout: &'a ColumnLayout,
    names: &'a ColumnNames<'a>,
    first_row: u64,
}

impl BatchContext<'_> {
    fn error_at(&self, index: usize, column: &str, reason: String) -> ImportError {
        ImportError::invalid(
            self.path,
            Location::Row(self.first_row + index as u64),
            reason,
        )
        .with_field(format!("column `{column}`"))
    }

    fn append_points(
        &self,
        batch: &RecordBatch,
        dim: &mut Option<usize>,
        points: &mut Vec<Point>,
    ) -> Result<(), ImportError> {
        let vector_name = self.names.vector;
        let vectors = VectorColumn::new(batch.column(self.layout.vector).as_ref())
            .map_err(|reason| self.error_at(0, vector_name, reason))?;
        for index in 0..batch.num_rows() {
            let vector = vectors
                .vector(index)
                .map_err(|reason| self.error_at(index, vector_name, reason))?;
            let expected = *dim.get_or_insert(vector.len());
            if vector.len() != expected {
                let reason = format!("expected {expected} values, got {}", vector.len());
                return Err(self.error_at(index, vector_name, reason));
            }
            if points.is_empty() {
                check_dimension(self.path, Location::Row(0), expected)
                    .map_err(|error| error.with_field(format!("column `{vector_name}`")))?;
            }
            points.push(Point {
                id: self.id(batch, index)?,
                vector,
                payload: self.payload(batch, index)?,
                side: Vec::new(),
            });
        }
        Ok(())
    }

    fn id(&self, batch: &RecordBatch, index: usize) -> Result<PointId, ImportError> {
        let Some(column) = self.layout.id else {
            let row = self.first_row + index as u64;
            let id_offset = self.names.id_offset.unwrap_or(0);
            return row_number_id(self.path, row, id_offset).map(PointId::Number);
        };
        let name = self.names.id.unwrap_or(DEFAULT_ID_COLUMN);
        id::value(batch.column(column).as_ref(), index)
            .map_err(|reason| self.error_at(index, name, reason))
    }

    fn payload(&self, batch: &RecordBatch, index: usize) -> Result<Option<String>, ImportError> {
        if self.layout.payload.is_empty() {
            return Ok(None);
        }
        let mut object = serde_json::Map::with_capacity(self.layout.payload.len());
        for (column, name) in &self.layout.payload {
            let value = payload::json_value(batch.column(*column).as_ref(), index)
                .map_err(|reason| self.error_at(index, name, reason))?;
            object.insert(name.clone(), value);
        }
        Ok(Some(serde_json::Value::Object(object).to_string()))
    }
}
