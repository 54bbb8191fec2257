//! The data set's `.npy` files as row-major matrices: 2-d arrays (a 1-d array reads as one
//! column) of floats (float32, float16, float64; converted to f32) or integers (as i64),
//! read with the one `.npy` reader, `sagitta_storage::npy` (format versions 1 to 3, C order;
//! its header errors name the field and the byte offset). Every error names the file.

use std::io::Read;
use std::path::{Path, PathBuf};

use sagitta_storage::npy::{self, decode_floats, decode_integer, NpyFile};
pub use sagitta_storage::npy::{encode, Dtype};

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct NpyError {
    pub path: PathBuf,
    pub reason: String,
}

/// The parsed header: element type and shape (rows, columns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub dtype: Dtype,
    pub rows: usize,
    pub cols: usize,
}

/// A row-major matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix<T> {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<T>,
    /// The element type in the file.
    pub source_dtype: Dtype,
}

impl<T> Matrix<T> {
    pub fn row(&self, index: usize) -> &[T] {
        &self.data[index * self.cols..(index + 1) * self.cols]
    }
}

fn error(path: &Path, reason: impl Into<String>) -> NpyError {
    NpyError {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Opens `path` as a matrix: its header read, its shape 1-d or 2-d, its data exactly the
/// shape's bytes.
fn open(path: &Path) -> Result<(NpyFile, Header), NpyError> {
    let file = npy::open(path).map_err(|e| error(path, e.to_string()))?;
    let header = &file.header;
    let shape = &header.shape;
    let (rows, cols) = match shape.as_slice() {
        [rows] => (*rows, 1),
        [rows, cols] => (*rows, *cols),
        _ => {
            return Err(error(
                path,
                format!("`shape` {shape:?}: expected a 1-d or 2-d array"),
            ))
        }
    };
    header
        .check_data_length(file.file_bytes)
        .map_err(|e| error(path, e.to_string()))?;
    let too_large = || error(path, format!("shape {shape:?} is too large"));
    let header = Header {
        dtype: header.dtype,
        rows: usize::try_from(rows).map_err(|_| too_large())?,
        cols: usize::try_from(cols).map_err(|_| too_large())?,
    };
    Ok((file, header))
}

/// The header alone (shape and dtype), without reading the data.
pub fn read_header(path: &Path) -> Result<Header, NpyError> {
    open(path).map(|(_, header)| header)
}

/// The data bytes of an opened file (their length checked against the file's size).
fn read_data(path: &Path, file: &mut NpyFile, header: &Header) -> Result<Vec<u8>, NpyError> {
    let mut data = vec![0u8; header.rows * header.cols * header.dtype.size_bytes()];
    file.reader
        .read_exact(&mut data)
        .map_err(|e| error(path, e.to_string()))?;
    Ok(data)
}

/// Reads a float matrix as float32 (float16 converted exactly, float64 rounded); every
/// value must be finite.
pub fn read_f32(path: &Path) -> Result<Matrix<f32>, NpyError> {
    let (mut file, header) = open(path)?;
    if !header.dtype.is_float() {
        return Err(error(
            path,
            format!(
                "expected float32 ('<f4'), float16 ('<f2') or float64 ('<f8') vectors, found \
                 {} ({})",
                header.dtype.name(),
                header.dtype.descr()
            ),
        ));
    }
    let data = read_data(path, &mut file, &header)?;
    let mut values = Vec::with_capacity(header.rows * header.cols);
    decode_floats(&data, header.dtype, &mut values);
    if let Some(position) = values.iter().position(|v| !v.is_finite()) {
        return Err(error(
            path,
            format!(
                "non-finite value at row {}, column {}",
                position / header.cols.max(1),
                position % header.cols.max(1)
            ),
        ));
    }
    Ok(Matrix {
        rows: header.rows,
        cols: header.cols,
        data: values,
        source_dtype: header.dtype,
    })
}

/// Reads an integer matrix (any of int8..int64, uint8..uint64) as i64.
pub fn read_i64(path: &Path) -> Result<Matrix<i64>, NpyError> {
    let (mut file, header) = open(path)?;
    let dtype = header.dtype;
    if dtype.is_float() {
        return Err(error(
            path,
            format!(
                "expected integer ids ('<i8', '<i4' or another integer type), found {} ({})",
                dtype.name(),
                dtype.descr()
            ),
        ));
    }
    let data = read_data(path, &mut file, &header)?;
    let values = data
        .chunks_exact(dtype.size_bytes())
        .enumerate()
        .map(|(position, chunk)| {
            let value = decode_integer(chunk, dtype).expect("an integer type");
            i64::try_from(value).map_err(|_| {
                error(
                    path,
                    format!(
                        "value {value} at row {}, column {} exceeds int64",
                        position / header.cols.max(1),
                        position % header.cols.max(1)
                    ),
                )
            })
        })
        .collect::<Result<Vec<i64>, NpyError>>()?;
    Ok(Matrix {
        rows: header.rows,
        cols: header.cols,
        data: values,
        source_dtype: dtype,
    })
}

#[cfg(test)]
mod tests {
    use half::f16;

    use super::*;

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn reads_f32_in_every_version() {
        let dir = tempfile::tempdir().unwrap();
        let values = [1.0f32, -2.5, 3.25, 0.0, 5.0, 6.5];
        for version in [1u8, 2, 3] {
            let bytes = encode(Dtype::F32, &[2, 3], &f32_bytes(&values), version);
            let path = write(dir.path(), &format!("v{version}.npy"), &bytes);
            let matrix = read_f32(&path).unwrap();
            assert_eq!((matrix.rows, matrix.cols), (2, 3));
            assert_eq!(matrix.data, values);
            assert_eq!(matrix.row(1), &values[3..]);
            assert_eq!(matrix.source_dtype, Dtype::F32);
        }
    }

    #[test]
    fn converts_f16() {
        let dir = tempfile::tempdir().unwrap();
        let values = [0.5f32, -1.0, 65504.0, 0.099_975_586];
        let data: Vec<u8> = values
            .iter()
            .flat_map(|v| f16::from_f32(*v).to_le_bytes())
            .collect();
        let path = write(dir.path(), "h.npy", &encode(Dtype::F16, &[2, 2], &data, 1));
        let matrix = read_f32(&path).unwrap();
        assert_eq!(matrix.data, values);
        assert_eq!(matrix.source_dtype, Dtype::F16);
    }

    #[test]
    fn reads_integer_ids() {
        let dir = tempfile::tempdir().unwrap();
        let i64s: Vec<u8> = [3i64, 1, 4, 1_000_000_000_000]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let path = write(dir.path(), "a.npy", &encode(Dtype::I64, &[2, 2], &i64s, 1));
        assert_eq!(read_i64(&path).unwrap().data, [3, 1, 4, 1_000_000_000_000]);
        let i32s: Vec<u8> = [7i32, -1, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
        let path = write(dir.path(), "b.npy", &encode(Dtype::I32, &[3], &i32s, 2));
        let matrix = read_i64(&path).unwrap();
        assert_eq!((matrix.rows, matrix.cols), (3, 1));
        assert_eq!(matrix.data, [7, -1, 9]);
    }

    #[test]
    fn errors_name_the_file_and_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = encode(Dtype::F32, &[1, 1], &f32_bytes(&[1.0]), 1);
        let mut fixed = bytes.clone();
        let at = fixed.windows(3).position(|w| w == b"<f4").unwrap();
        fixed[at] = b'>';
        let path = write(dir.path(), "be.npy", &fixed);
        let message = read_f32(&path).unwrap_err().to_string();
        assert!(message.contains("be.npy"), "{message}");
        assert!(message.contains(">f4"), "{message}");

        let path = write(dir.path(), "junk.npy", b"not numpy at all");
        let message = read_f32(&path).unwrap_err().to_string();
        assert!(message.contains("junk.npy") && message.contains("magic"));

        let mut fortran = encode(Dtype::F32, &[1, 1], &f32_bytes(&[1.0]), 1);
        let at = fortran.windows(5).position(|w| w == b"False").unwrap();
        fortran[at..at + 5].copy_from_slice(b"True ");
        let path = write(dir.path(), "f.npy", &fortran);
        let message = read_f32(&path).unwrap_err().to_string();
        assert!(message.contains("Fortran"), "{message}");

        let truncated = encode(Dtype::F32, &[4, 4], &f32_bytes(&[1.0]), 1);
        let path = write(dir.path(), "t.npy", &truncated);
        assert!(read_f32(&path)
            .unwrap_err()
            .to_string()
            .contains("truncated"));

        let path = write(
            dir.path(),
            "ids.npy",
            &encode(Dtype::F32, &[1, 1], &f32_bytes(&[1.0]), 1),
        );
        assert!(read_i64(&path).unwrap_err().to_string().contains("<f4"));

        let path = write(
            dir.path(),
            "nan.npy",
            &encode(Dtype::F32, &[1, 2], &f32_bytes(&[1.0, f32::NAN]), 1),
        );
        assert!(read_f32(&path)
            .unwrap_err()
            .to_string()
            .contains("non-finite"));

        let missing = dir.path().join("missing.npy");
        assert!(read_f32(&missing)
            .unwrap_err()
            .to_string()
            .contains("missing.npy"));
    }

    #[test]
    fn reads_the_header_alone() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = encode(Dtype::F16, &[3, 2], &[0u8; 12], 3);
        let path = write(dir.path(), "h.npy", &bytes);
        let header = read_header(&path).unwrap();
        assert_eq!((header.rows, header.cols, header.dtype), (3, 2, Dtype::F16));
        let path = write(dir.path(), "short.npy", &bytes[..bytes.len() - 1]);
        assert!(read_header(&path)
            .unwrap_err()
            .to_string()
            .contains("truncated"));
    }

    #[test]
    fn reads_float64_and_every_integer_type() {
        let dir = tempfile::tempdir().unwrap();
        let f64s: Vec<u8> = [0.5f64, -1.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let path = write(dir.path(), "d.npy", &encode(Dtype::F64, &[1, 2], &f64s, 1));
        assert_eq!(read_f32(&path).unwrap().data, [0.5, -1.0]);
        let path = write(dir.path(), "u.npy", &encode(Dtype::U8, &[2], &[7, 255], 1));
        assert_eq!(read_i64(&path).unwrap().data, [7, 255]);
        let path = write(
            dir.path(),
            "big.npy",
            &encode(Dtype::U64, &[1], &u64::MAX.to_le_bytes(), 1),
        );
        let message = read_i64(&path).unwrap_err().to_string();
        assert!(message.contains("exceeds int64"), "{message}");
        let path = write(dir.path(), "extra.npy", &{
            let mut bytes = encode(Dtype::F32, &[1, 1], &f32_bytes(&[1.0]), 1);
            bytes.push(0);
            bytes
        });
        let message = read_f32(&path).unwrap_err().to_string();
        assert!(message.contains("1 bytes follow the data"), "{message}");
        let path = write(
            dir.path(),
            "3d.npy",
            &encode(Dtype::F32, &[1, 1, 1], &[0; 4], 1),
        );
        let message = read_f32(&path).unwrap_err().to_string();
        assert!(message.contains("`shape` [1, 1, 1]"), "{message}");
    }
}
