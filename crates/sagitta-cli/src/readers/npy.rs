//! `.npy` arrays: a 2-D float array of vectors (float32, or float64 / float16 converted) and
//! a 1-D integer array of ids, read with the one `.npy` reader, `sagitta_storage::npy`
//! (header versions 1 to 3, every numeric dtype, Fortran order refused; header errors name
//! the field and the byte offset).

use std::io::Read;
use std::path::Path;

use sagitta_storage::npy::{self, decode_floats, decode_integer, LengthError, NpyError, NpyFile};

use super::{check_dimension, first_non_finite, non_finite_reason, DenseVectors};
use super::{ImportError, Location};

fn open(path: &Path) -> Result<NpyFile, ImportError> {
    npy::open(path).map_err(|error| match error {
        NpyError::Io(error) => ImportError::io(path, error),
        NpyError::Invalid(reason) => ImportError::invalid(path, Location::File, reason),
    })
}

/// Checks that the file holds exactly the elements its shape says after the header,
/// naming the first row (`row_elements` elements) that is cut short.
fn check_data_length(path: &Path, npy: &NpyFile, row_elements: u64) -> Result<(), ImportError> {
    let header = &npy.header;
    match header.check_data_length(npy.file_bytes) {
        Ok(_) => Ok(()),
        Err(error @ LengthError::Truncated { available, .. }) => {
            let row_bytes = row_elements * header.dtype.size_bytes() as u64;
            let row = available / row_bytes;
            Err(ImportError::invalid(
                path,
                Location::RowAtByte {
                    row,
                    byte: header.data_offset + row * row_bytes,
                },
                error.to_string(),
            ))
        }
        Err(error) => Err(ImportError::invalid(
            path,
            Location::File,
            error.to_string(),
        )),
    }
}

/// Reads a 2-D float array, one vector per row.
pub(super) fn read_vectors(path: &Path) -> Result<DenseVectors, ImportError> {
    let mut npy = open(path)?;
    let dtype = npy.header.dtype;
    if !dtype.is_float() {
        return Err(ImportError::invalid(
            path,
            Location::File,
            format!(
                "dtype is {} ({}); vectors must be float32, float64 or float16",
                dtype.name(),
                dtype.descr()
            ),
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
    check_data_length(path, &npy, dim as u64)?;
    let mut rows = Vec::with_capacity(usize::try_from(row_count).unwrap_or(0));
    let mut row_bytes = vec![0_u8; dim * dtype.size_bytes()];
    for row in 0..row_count {
        npy.reader
            .read_exact(&mut row_bytes)
            .map_err(|error| ImportError::io(path, error))?;
        let mut vector = Vec::with_capacity(dim);
        decode_floats(&row_bytes, dtype, &mut vector);
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

/// Reads a 1-D (or `(n, 1)`) integer array of `row_count` ids; returns them and the file size.
pub(super) fn read_ids(path: &Path, row_count: usize) -> Result<(Vec<u64>, u64), ImportError> {
    let mut npy = open(path)?;
    let dtype = npy.header.dtype;
    if dtype.is_float() {
        return Err(ImportError::invalid(
            path,
            Location::File,
            format!(
                "dtype is {} ({}); ids must be integers (int64, uint64, int32, ...)",
                dtype.name(),
                dtype.descr()
            ),
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
    check_data_length(path, &npy, 1)?;
    let mut bytes = vec![0_u8; row_count * dtype.size_bytes()];
    npy.reader
        .read_exact(&mut bytes)
        .map_err(|error| ImportError::io(path, error))?;
    let ids = bytes
        .chunks_exact(dtype.size_bytes())
        .zip(0_u64..)
        .map(|(chunk, row)| {
            let value = decode_integer(chunk, dtype).expect("an integer type");
            u64::try_from(value).map_err(|_| {
                ImportError::invalid(path, Location::Row(row), format!("id {value} is negative"))
            })
        })
        .collect::<Result<Vec<u64>, ImportError>>()?;
    Ok((ids, npy.file_bytes))
}
