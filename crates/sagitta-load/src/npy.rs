//! A small reader for NumPy `.npy` files: format versions 1, 2 and 3, C order, 2-d arrays of
//! little-endian `<f4`, `<f2`, `<i8` or `<i4` (a 1-d array reads as one column). Anything
//! else is an error that names the file.

use std::path::{Path, PathBuf};

use half::f16;

const MAGIC: &[u8] = b"\x93NUMPY";

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct NpyError {
    pub path: PathBuf,
    pub reason: String,
}

/// Element type of an `.npy` file this reader accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    F32,
    F16,
    I64,
    I32,
}

impl Dtype {
    fn parse(descr: &str) -> Option<Dtype> {
        match descr {
            "<f4" => Some(Dtype::F32),
            "<f2" => Some(Dtype::F16),
            "<i8" => Some(Dtype::I64),
            "<i4" => Some(Dtype::I32),
            _ => None,
        }
    }

    fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F16 => 2,
            Dtype::I64 => 8,
        }
    }

    pub fn descr(self) -> &'static str {
        match self {
            Dtype::F32 => "<f4",
            Dtype::F16 => "<f2",
            Dtype::I64 => "<i8",
            Dtype::I32 => "<i4",
        }
    }
}

/// The parsed header: element type and shape (rows, columns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub dtype: Dtype,
    pub rows: usize,
    pub cols: usize,
    /// Byte offset of the data.
    pub data_offset: usize,
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

/// Parses the magic string and header dictionary of `bytes` (the whole file).
/// Parses the header of a whole file (`bytes`) and checks the data is all there.
pub fn parse_header(path: &Path, bytes: &[u8]) -> Result<Header, NpyError> {
    parse_header_prefix(path, bytes, bytes.len() as u64)
}

/// Parses the header from the first bytes of a file `file_len` bytes long.
pub fn parse_header_prefix(path: &Path, bytes: &[u8], file_len: u64) -> Result<Header, NpyError> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(error(path, "not a .npy file (bad magic string)"));
    }
    let major = bytes[6];
    let (header_len, start) = match major {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(error(path, "truncated header"));
            }
            let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            (len as usize, 12)
        }
        other => return Err(error(path, format!("unsupported .npy version {other}"))),
    };
    let end = start + header_len;
    if bytes.len() < end {
        return Err(error(path, "truncated header"));
    }
    // Version 3 allows UTF-8 in the header; 1 and 2 are Latin-1. The keys and values we read
    // are ASCII either way, so a lossy decode is enough.
    let text = String::from_utf8_lossy(&bytes[start..end]);
    let descr = dict_value(&text, "descr")
        .and_then(|value| quoted(value))
        .ok_or_else(|| error(path, format!("header has no 'descr': {text}")))?;
    let dtype = Dtype::parse(descr).ok_or_else(|| {
        error(
            path,
            format!("unsupported dtype {descr:?} (supported: '<f4', '<f2', '<i8', '<i4')"),
        )
    })?;
    let fortran = dict_value(&text, "fortran_order")
        .ok_or_else(|| error(path, format!("header has no 'fortran_order': {text}")))?;
    if fortran.starts_with("True") {
        return Err(error(
            path,
            "Fortran-ordered arrays are not supported (need C order)",
        ));
    }
    if !fortran.starts_with("False") {
        return Err(error(
            path,
            format!("bad 'fortran_order' in header: {text}"),
        ));
    }
    let shape_text = dict_value(&text, "shape")
        .and_then(|value| value.strip_prefix('('))
        .and_then(|value| value.split_once(')'))
        .map(|(inside, _)| inside)
        .ok_or_else(|| error(path, format!("header has no 'shape': {text}")))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| part.trim_end_matches('L').parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| error(path, format!("bad shape ({shape_text})")))?;
    let (rows, cols) = match shape.as_slice() {
        [rows] => (*rows, 1),
        [rows, cols] => (*rows, *cols),
        _ => {
            return Err(error(
                path,
                format!("expected a 1-d or 2-d array, shape is ({shape_text})"),
            ))
        }
    };
    let expected = rows
        .checked_mul(cols)
        .and_then(|count| count.checked_mul(dtype.size()))
        .ok_or_else(|| error(path, "shape too large"))?;
    let available = file_len.saturating_sub(end as u64);
    if available < expected as u64 {
        return Err(error(
            path,
            format!(
                "truncated data: shape ({rows}, {cols}) of {} needs {expected} bytes, file has {}",
                dtype.descr(),
                available
            ),
        ));
    }
    Ok(Header {
        dtype,
        rows,
        cols,
        data_offset: end,
    })
}

/// The text after `'key':` in a header dictionary.
fn dict_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let pattern_single = format!("'{key}'");
    let pattern_double = format!("\"{key}\"");
    let at = text
        .find(&pattern_single)
        .map(|at| at + pattern_single.len())
        .or_else(|| {
            text.find(&pattern_double)
                .map(|at| at + pattern_double.len())
        })?;
    let rest = text[at..].trim_start().strip_prefix(':')?;
    Some(rest.trim_start())
}

/// The contents of a leading quoted string.
fn quoted(value: &str) -> Option<&str> {
    let quote = value.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let rest = &value[1..];
    rest.find(quote).map(|end| &rest[..end])
}

/// The header alone (shape and dtype), without reading the data.
pub fn read_header(path: &Path) -> Result<Header, NpyError> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(|e| error(path, e.to_string()))?;
    let file_len = file
        .metadata()
        .map_err(|e| error(path, e.to_string()))?
        .len();
    let mut prefix = Vec::new();
    file.by_ref()
        .take(1 << 20)
        .read_to_end(&mut prefix)
        .map_err(|e| error(path, e.to_string()))?;
    parse_header_prefix(path, &prefix, file_len)
}

fn read_file(path: &Path) -> Result<Vec<u8>, NpyError> {
    std::fs::read(path).map_err(|e| error(path, e.to_string()))
}

/// Reads a float32 or float16 matrix as float32 (float16 converted exactly); every value
/// must be finite.
pub fn read_f32(path: &Path) -> Result<Matrix<f32>, NpyError> {
    let bytes = read_file(path)?;
    let header = parse_header(path, &bytes)?;
    let count = header.rows * header.cols;
    let data = &bytes[header.data_offset..];
    let values: Vec<f32> = match header.dtype {
        Dtype::F32 => data[..count * 4]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Dtype::F16 => data[..count * 2]
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        other => {
            return Err(error(
                path,
                format!(
                    "expected float32 ('<f4') or float16 ('<f2') vectors, found {}",
                    other.descr()
                ),
            ))
        }
    };
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

/// Reads an int64 or int32 matrix as i64.
pub fn read_i64(path: &Path) -> Result<Matrix<i64>, NpyError> {
    let bytes = read_file(path)?;
    let header = parse_header(path, &bytes)?;
    let count = header.rows * header.cols;
    let data = &bytes[header.data_offset..];
    let values: Vec<i64> = match header.dtype {
        Dtype::I64 => data[..count * 8]
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
            .collect(),
        Dtype::I32 => data[..count * 4]
            .chunks_exact(4)
            .map(|b| i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            .collect(),
        other => {
            return Err(error(
                path,
                format!(
                    "expected integer ids ('<i8' or '<i4'), found {}",
                    other.descr()
                ),
            ))
        }
    };
    Ok(Matrix {
        rows: header.rows,
        cols: header.cols,
        data: values,
        source_dtype: header.dtype,
    })
}

/// Encodes a version-1 `.npy` file (used by the tests and handy for tools).
pub fn encode(dtype: Dtype, shape: &[usize], data_le: &[u8], version: u8) -> Vec<u8> {
    let shape_text = match shape {
        [single] => format!("({single},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}",
        dtype.descr()
    );
    let prefix = if version == 1 { 10 } else { 12 };
    while (prefix + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(prefix + header.len() + data_le.len());
    out.extend_from_slice(MAGIC);
    out.push(version);
    out.push(0);
    if version == 1 {
        let len = u16::try_from(header.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_le_bytes());
    } else {
        let len = u32::try_from(header.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data_le);
    out
}

#[cfg(test)]
mod tests {
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
    fn header_is_padded_like_numpy() {
        let bytes = encode(Dtype::F32, &[2, 3], &f32_bytes(&[0.0; 6]), 1);
        let header = parse_header(Path::new("x.npy"), &bytes).unwrap();
        assert_eq!(header.data_offset % 64, 0);
        assert_eq!((header.rows, header.cols, header.dtype), (2, 3, Dtype::F32));
    }
}
