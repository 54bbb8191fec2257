//! `.fvecs` and `.bvecs` (the TEXMEX / ANN-benchmark formats): rows one after another, each
//! a little-endian i32 dimension followed by that many little-endian f32 (`.fvecs`) or u8
//! (`.bvecs`) values. There is no file header and no row count; every row must have the
//! dimension of the first.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::{check_dimension, first_non_finite, non_finite_reason, DenseVectors};
use super::{ImportError, Location};

const READ_BUFFER_BYTES: usize = 1 << 20;
const DIMENSION_FIELD_BYTES: u64 = 4;

/// The element type of a `*vecs` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Element {
    Float32,
    UInt8,
}

impl Element {
    fn size_bytes(self) -> u64 {
        match self {
            Element::Float32 => 4,
            Element::UInt8 => 1,
        }
    }
}

/// Reads every row; the file length decides where rows end, so a cut-off row is named.
pub(super) fn read_vectors(path: &Path, element: Element) -> Result<DenseVectors, ImportError> {
    let file = File::open(path).map_err(|error| ImportError::io(path, error))?;
    let file_bytes = file
        .metadata()
        .map_err(|error| ImportError::io(path, error))?
        .len();
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, file);
    let mut rows: Vec<Vec<f32>> = Vec::new();
    let mut dim = 0;
    let mut offset_bytes = 0_u64;
    let mut row_bytes = Vec::new();
    while offset_bytes < file_bytes {
        let row = rows.len() as u64;
        let location = Location::RowAtByte {
            row,
            byte: offset_bytes,
        };
        let row_dim = read_row_dimension(path, &mut reader, location, file_bytes - offset_bytes)?;
        if rows.is_empty() {
            dim = row_dim;
            let row_total_bytes = DIMENSION_FIELD_BYTES + dim as u64 * element.size_bytes();
            rows.reserve(usize::try_from(file_bytes / row_total_bytes).unwrap_or(0));
        } else if row_dim != dim {
            return Err(ImportError::invalid(
                path,
                location,
                format!("dimension {row_dim} differs from row 0's {dim}"),
            ));
        }
        let value_bytes = dim as u64 * element.size_bytes();
        if file_bytes - offset_bytes - DIMENSION_FIELD_BYTES < value_bytes {
            return Err(ImportError::invalid(
                path,
                location,
                format!(
                    "file is truncated: the row needs {value_bytes} bytes of values, {} remain",
                    file_bytes - offset_bytes - DIMENSION_FIELD_BYTES
                ),
            ));
        }
        row_bytes.resize(dim * element.size_bytes() as usize, 0);
        reader
            .read_exact(&mut row_bytes)
            .map_err(|error| ImportError::io(path, error))?;
        rows.push(decode_row(path, location, &row_bytes, element)?);
        offset_bytes += DIMENSION_FIELD_BYTES + value_bytes;
    }
    Ok(DenseVectors {
        rows,
        dim,
        bytes_read: file_bytes,
    })
}

/// Reads a row's i32 dimension (checking that the field is complete and the value sane).
fn read_row_dimension(
    path: &Path,
    reader: &mut impl Read,
    location: Location,
    remaining_bytes: u64,
) -> Result<usize, ImportError> {
    if remaining_bytes < DIMENSION_FIELD_BYTES {
        return Err(ImportError::invalid(
            path,
            location,
            format!("file is truncated: {remaining_bytes} bytes remain, less than a row's 4-byte dimension"),
        ));
    }
    let mut field = [0_u8; 4];
    reader
        .read_exact(&mut field)
        .map_err(|error| ImportError::io(path, error))?;
    let dim = i32::from_le_bytes(field);
    let dim = usize::try_from(dim).map_err(|_| {
        ImportError::invalid(path, location, format!("dimension {dim} is negative"))
    })?;
    check_dimension(path, location, dim)?;
    Ok(dim)
}

fn decode_row(
    path: &Path,
    location: Location,
    bytes: &[u8],
    element: Element,
) -> Result<Vec<f32>, ImportError> {
    let vector: Vec<f32> = match element {
        Element::UInt8 => bytes.iter().map(|byte| f32::from(*byte)).collect(),
        Element::Float32 => bytes
            .chunks_exact(4)
            .map(|chunk| f32::from_le_bytes(chunk.try_into().expect("4-byte chunk")))
            .collect(),
    };
    if let Some((position, value)) = first_non_finite(&vector) {
        return Err(ImportError::invalid(
            path,
            location,
            non_finite_reason(position, value),
        ));
    }
    Ok(vector)
}
