//! `.npy` arrays: a 2-D float array of vectors (float32, or float64 / float16 converted) and
//! a 1-D integer array of ids. Header layout in `npy_header.rs`.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use half::f16;

use super::npy_header::{self, Dtype, Header, HeaderError};
use super::{check_dimension, first_non_finite, non_finite_reason, DenseVectors};
use super::{ImportError, Location};

const READ_BUFFER_BYTES: usize = 1 << 20;

/// An opened `.npy` file, positioned at its first data byte.
struct NpyFile {
    reader: BufReader<File>,
    header: Header,
    file_bytes: u64,
}

fn open(path: &Path) -> Result<NpyFile, ImportError> {
    let file = File::open(path).map_err(|error| ImportError::io(path, error))?;
    let file_bytes = file
        .metadata()
        .map_err(|error| ImportError::io(path, error))?
        .len();
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, file);
    let header = npy_header::read_header(&mut reader).map_err(|error| match error {
        HeaderError::Io(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => {
            ImportError::invalid(path, Location::File, "file ends inside the .npy header")
        }
        HeaderError::Io(error) => ImportError::io(path, error),
        HeaderError::Invalid(reason) => ImportError::invalid(path, Location::File, reason),
    })?;
    if header.fortran_order {
        return Err(ImportError::invalid(
            path,
            Location::File,
            "array is in Fortran (column-major) order; save it with np.ascontiguousarray(arr)",
        ));
    }
    Ok(NpyFile {
        reader,
        header,
        file_bytes,
    })
}

/// Checks that the file holds exactly `element_count` elements after the header, naming
/// the first row that is cut short.
fn check_data_length(
    path: &Path,
    npy: &NpyFile,
    element_count: u64,
    row_elements: u64,
) -> Result<(), ImportError> {
    let element_bytes = npy.header.dtype.size_bytes() as u64;
    let shape = &npy.header.shape;
    let needed_bytes = element_count.checked_mul(element_bytes).ok_or_else(|| {
        ImportError::invalid(
            path,
            Location::File,
            format!("shape {shape:?} is too large"),
        )
    })?;
    let data_bytes = npy.file_bytes.saturating_sub(npy.header.data_offset_bytes);
    if data_bytes < needed_bytes {
        let row_bytes = row_elements * element_bytes;
        let row = data_bytes / row_bytes;
        return Err(ImportError::invalid(
            path,
            Location::RowAtByte {
                row,
                byte: npy.header.data_offset_bytes + row * row_bytes,
            },
            format!(
                "file is truncated: shape {shape:?} needs {needed_bytes} data bytes, the file has {data_bytes}"
            ),
        ));
    }
    if data_bytes > needed_bytes {
        return Err(ImportError::invalid(
            path,
            Location::File,
            format!(
                "{} bytes follow the data of shape {shape:?}",
                data_bytes - needed_bytes
            ),
        ));
    }
    Ok(())
}

/// Reads a 2-D float array, one vector per row.
pub(super) fn read_vectors(path: &Path) -> Result<DenseVectors, ImportError> {
    let mut npy = open(path)?;
    let dtype = npy.header.dtype;
    if !matches!(dtype, Dtype::Float16 | Dtype::Float32 | Dtype::Float64) {
        return Err(ImportError::invalid(
            path,
            Location::File,
            format!("dtype is {dtype:?}; vectors must be float32, float64 or float16"),
        ));
    }
    let &[row_count, dim] = npy.header.shape.as_slice() else {
        return Err(ImportError::invalid(
            path,
            Location::File,
            format!("shape {:?} is not 2-D (rows, dimension)", npy.header.shape),
        ));
    };
    let dim = usize::try_from(dim).unwrap_or(usize::MAX);
    check_dimension(path, Location::File, dim)?;
    check_data_length(path, &npy, row_count.saturating_mul(dim as u64), dim as u64)?;
    let mut rows = Vec::with_capacity(usize::try_from(row_count).unwrap_or(0));
    let mut row_bytes = vec![0_u8; dim * dtype.size_bytes()];
    for row in 0..row_count {
        npy.reader
            .read_exact(&mut row_bytes)
            .map_err(|error| ImportError::io(path, error))?;
        let vector = decode_floats(&row_bytes, dtype);
        if let Some((position, value)) = first_non_finite(&vector) {
            return Err(ImportError::invalid(
                path,
                Location::Row(row),
                non_finite_reason(position, value),
            ));
        }
        rows.push(vector);
    }
    Ok(DenseVectors {
        rows,
        dim,
        bytes_read: npy.file_bytes,
    })
}

/// Little-endian floats to f32 (float64 beyond the f32 range becomes ±inf, which the
/// finiteness check then rejects).
#[allow(clippy::cast_possible_truncation)]
fn decode_floats(bytes: &[u8], dtype: Dtype) -> Vec<f32> {
    match dtype {
        Dtype::Float16 => bytes
            .chunks_exact(2)
            .map(|chunk| f16::from_le_bytes([chunk[0], chunk[1]]).to_f32())
            .collect(),
        Dtype::Float64 => bytes
            .chunks_exact(8)
            .map(|chunk| f64::from_le_bytes(chunk.try_into().expect("8-byte chunk")) as f32)
            .collect(),
        _ => bytes
            .chunks_exact(4)
            .map(|chunk| f32::from_le_bytes(chunk.try_into().expect("4-byte chunk")))
            .collect(),
    }
}

/// Reads a 1-D (or `(n, 1)`) integer array of `row_count` ids; returns them and the file size.
pub(super) fn read_ids(path: &Path, row_count: usize) -> Result<(Vec<u64>, u64), ImportError> {
    let mut npy = open(path)?;
    let dtype = npy.header.dtype;
    if matches!(dtype, Dtype::Float16 | Dtype::Float32 | Dtype::Float64) {
        return Err(ImportError::invalid(
            path,
            Location::File,
            format!("dtype is {dtype:?}; ids must be integers (int64, uint64, int32, ...)"),
        ));
    }
    let id_count = match npy.header.shape.as_slice() {
        [count] | [count, 1] => *count,
        shape => {
            return Err(ImportError::invalid(
                path,
                Location::File,
                format!("shape {shape:?} is not 1-D; ids must be one per row"),
            ))
        }
    };
    if id_count != row_count as u64 {
        return Err(ImportError::invalid(
            path,
            Location::File,
            format!("holds {id_count} ids for {row_count} rows of vectors"),
        ));
    }
    check_data_length(path, &npy, id_count, 1)?;
    let mut bytes = vec![0_u8; row_count * dtype.size_bytes()];
    npy.reader
        .read_exact(&mut bytes)
        .map_err(|error| ImportError::io(path, error))?;
    let ids = bytes
        .chunks_exact(dtype.size_bytes())
        .zip(0_u64..)
        .map(|(chunk, row)| {
            decode_id(chunk, dtype).ok_or_else(|| {
                ImportError::invalid(
                    path,
                    Location::Row(row),
                    format!("id {} is negative", signed_value(chunk)),
                )
            })
        })
        .collect::<Result<Vec<u64>, ImportError>>()?;
    Ok((ids, npy.file_bytes))
}

/// A little-endian integer as an id; `None` when it is negative.
fn decode_id(chunk: &[u8], dtype: Dtype) -> Option<u64> {
    let mut unsigned = [0_u8; 8];
    unsigned[..chunk.len()].copy_from_slice(chunk);
    match dtype {
        Dtype::UInt8 | Dtype::UInt16 | Dtype::UInt32 | Dtype::UInt64 => {
            Some(u64::from_le_bytes(unsigned))
        }
        _ => u64::try_from(signed_value(chunk)).ok(),
    }
}

/// A little-endian two's-complement integer of 1 to 8 bytes, sign-extended.
fn signed_value(chunk: &[u8]) -> i64 {
    let negative = chunk.last().is_some_and(|byte| byte & 0x80 != 0);
    let mut extended = [if negative { 0xFF } else { 0 }; 8];
    extended[..chunk.len()].copy_from_slice(chunk);
    i64::from_le_bytes(extended)
}
