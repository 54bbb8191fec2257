//! NumPy `.npy` files (format versions 1.0, 2.0 and 3.0): the one reader behind
//! `sagitta import` (sagitta-cli) and the load generator (sagitta-load), and a writer.
//!
//! ```text
//! "\x93NUMPY" | major u8 | minor u8 | header length (u16 LE in 1.0, u32 LE in 2.0/3.0)
//! | header: a Python dict literal, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (1000, 128), }
//!   padded with spaces and ending in '\n' (Latin-1 text in 1.0/2.0, UTF-8 in 3.0)
//! | data: the array's elements, C order unless fortran_order
//! ```
//!
//! The preamble is read with [`crate::codec`]. The dict is parsed as the small
//! Python-literal grammar numpy writes (strings, booleans, None, integers, tuples, lists,
//! dicts), so a structured dtype (a list `descr`) is reported as such instead of misread.
//! Accepted: little-endian (or single-byte) floats f2/f4/f8 and integers i1..i8, u1..u8, in C
//! order; anything else is an error naming the field (`descr`, `fortran_order`, `shape`) and,
//! for a malformed header, the byte offset. Source files are read with `std::fs`, not
//! through [`crate::fs::FileSystem`]: they are inputs, never database files.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use half::f16;

use crate::codec::{DecodeError, Reader, Writer};

pub const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Longest header accepted. numpy itself refuses headers over 10,000 bytes by default.
pub const MAX_HEADER_BYTES: usize = 1 << 20;
/// Deepest nesting of tuples, lists and dicts in a header.
const MAX_LITERAL_DEPTH: usize = 16;
/// Read buffer of an opened file.
const READ_BUFFER_BYTES: usize = 1 << 20;

/// Why a `.npy` file's header could not be read. The message is the reason alone; callers
/// add the file's name.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Invalid(String),
}

/// An element type of a `.npy` array (little-endian or single-byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    F16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
}

impl Dtype {
    pub fn size_bytes(self) -> usize {
        match self {
            Dtype::I8 | Dtype::U8 => 1,
            Dtype::F16 | Dtype::I16 | Dtype::U16 => 2,
            Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
            Dtype::F64 | Dtype::I64 | Dtype::U64 => 8,
        }
    }

    /// numpy's dtype string, as this module writes it (`<f4`, `|u1`).
    pub fn descr(self) -> &'static str {
        match self {
            Dtype::F16 => "<f2",
            Dtype::F32 => "<f4",
            Dtype::F64 => "<f8",
            Dtype::I8 => "|i1",
            Dtype::I16 => "<i2",
            Dtype::I32 => "<i4",
            Dtype::I64 => "<i8",
            Dtype::U8 => "|u1",
            Dtype::U16 => "<u2",
            Dtype::U32 => "<u4",
            Dtype::U64 => "<u8",
        }
    }

    /// numpy's name for the type (`float32`).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "float16",
            Dtype::F32 => "float32",
            Dtype::F64 => "float64",
            Dtype::I8 => "int8",
            Dtype::I16 => "int16",
            Dtype::I32 => "int32",
            Dtype::I64 => "int64",
            Dtype::U8 => "uint8",
            Dtype::U16 => "uint16",
            Dtype::U32 => "uint32",
            Dtype::U64 => "uint64",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Dtype::F16 | Dtype::F32 | Dtype::F64)
    }

    fn is_unsigned(self) -> bool {
        matches!(self, Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64)
    }

    /// Parses a dtype string such as `<f4`, `|u1` or `=i8`; errors name `descr`.
    pub fn parse(descr: &str) -> Result<Dtype, String> {
        let mut chars = descr.chars();
        let order = chars.next().ok_or("`descr` is empty")?;
        let code = chars.as_str();
        let native_little = cfg!(target_endian = "little");
        match order {
            '<' | '|' => {}
            '=' if native_little => {}
            '>' => {
                return Err(format!(
                    "`descr` {descr:?} is big-endian; convert with arr.astype('<{code}')"
                ))
            }
            _ => return Err(format!("`descr` {descr:?} is not a supported dtype")),
        }
        let dtype = match code {
            "f2" => Dtype::F16,
            "f4" => Dtype::F32,
            "f8" => Dtype::F64,
            "i1" => Dtype::I8,
            "i2" => Dtype::I16,
            "i4" => Dtype::I32,
            "i8" => Dtype::I64,
            "u1" => Dtype::U8,
            "u2" => Dtype::U16,
            "u4" => Dtype::U32,
            "u8" => Dtype::U64,
            _ => return Err(format!("`descr` {descr:?} is not a supported dtype")),
        };
        if order == '|' && dtype.size_bytes() != 1 {
            return Err(format!(
                "`descr` {descr:?} has no byte order for a multi-byte type"
            ));
        }
        Ok(dtype)
    }
}

/// What the header says about the array (always C order: Fortran order is refused).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub dtype: Dtype,
    pub shape: Vec<u64>,
    /// Where the data starts (magic, version, length field and header).
    pub data_offset: u64,
}

/// The data after the header is not exactly what the shape needs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LengthError {
    #[error("shape {shape:?} is too large")]
    TooLarge { shape: Vec<u64> },
    #[error(
        "file is truncated: shape {shape:?} needs {needed} data bytes, the file has {available}"
    )]
    Truncated {
        shape: Vec<u64>,
        needed: u64,
        available: u64,
    },
    #[error("{extra} bytes follow the data of shape {shape:?}")]
    Trailing { shape: Vec<u64>, extra: u64 },
}

impl Header {
    /// Elements in the array (the product of the shape), `None` past u64.
    pub fn element_count(&self) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(1_u64, |count, dim| count.checked_mul(*dim))
    }

    /// Checks that a file of `file_bytes` holds exactly the data the shape needs; returns
    /// that many bytes.
    pub fn check_data_length(&self, file_bytes: u64) -> Result<u64, LengthError> {
        let shape = || self.shape.clone();
        let needed = self
            .element_count()
            .and_then(|count| count.checked_mul(self.dtype.size_bytes() as u64))
            .ok_or_else(|| LengthError::TooLarge { shape: shape() })?;
        let available = file_bytes.saturating_sub(self.data_offset);
        if available < needed {
            return Err(LengthError::Truncated {
                shape: shape(),
                needed,
                available,
            });
        }
        if available > needed {
            return Err(LengthError::Trailing {
                shape: shape(),
                extra: available - needed,
            });
        }
        Ok(needed)
    }
}

/// An opened `.npy` file, positioned at its first data byte.
pub struct NpyFile {
    pub reader: BufReader<File>,
    pub header: Header,
    pub file_bytes: u64,
}

/// Opens `path` and reads its header (the data is not read).
pub fn open(path: &Path) -> Result<NpyFile, NpyError> {
    let file = File::open(path)?;
    let file_bytes = file.metadata()?.len();
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, file);
    let header = read_header(&mut reader)?;
    Ok(NpyFile {
        reader,
        header,
        file_bytes,
    })
}

/// Up to `length` bytes of `reader` (fewer at its end).
fn read_up_to(reader: &mut impl Read, length: usize) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(length);
    reader.take(length as u64).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn ends_inside(error: &DecodeError) -> NpyError {
    NpyError::Invalid(format!("file ends inside the .npy header ({error})"))
}

/// Reads the magic, version and header dict; leaves `reader` at the first data byte.
pub fn read_header(reader: &mut impl Read) -> Result<Header, NpyError> {
    let preamble = read_up_to(reader, MAGIC.len() + 2)?;
    let magic_bytes = preamble.len().min(MAGIC.len());
    if preamble[..magic_bytes] != MAGIC[..magic_bytes] {
        return Err(NpyError::Invalid(
            "not a .npy file (no \\x93NUMPY magic)".into(),
        ));
    }
    let mut fields = Reader::new(&preamble);
    fields
        .bytes(MAGIC.len(), "magic")
        .map_err(|e| ends_inside(&e))?;
    let major = fields.u8("major version").map_err(|e| ends_inside(&e))?;
    let minor = fields.u8("minor version").map_err(|e| ends_inside(&e))?;
    let length_field_bytes = match major {
        1 => 2,
        2 | 3 => 4,
        _ => {
            return Err(NpyError::Invalid(format!(
                ".npy format version {major}.{minor} is not supported (1.0, 2.0, 3.0 are)"
            )))
        }
    };
    let field = read_up_to(reader, length_field_bytes)?;
    let mut fields = Reader::at(&field, fields.offset());
    let header_bytes = if length_field_bytes == 2 {
        fields.u16("header length").map(usize::from)
    } else {
        fields.u32("header length").map(|length| length as usize)
    }
    .map_err(|e| ends_inside(&e))?;
    if header_bytes > MAX_HEADER_BYTES {
        return Err(NpyError::Invalid(format!(
            "header is {header_bytes} bytes, over the limit of {MAX_HEADER_BYTES}"
        )));
    }
    let text_offset = fields.offset();
    let text = read_up_to(reader, header_bytes)?;
    Reader::at(&text, text_offset)
        .bytes(header_bytes, "header dict")
        .map_err(|e| ends_inside(&e))?;
    if major >= 3 && std::str::from_utf8(&text).is_err() {
        return Err(NpyError::Invalid("header is not UTF-8".into()));
    }
    let dict = parse_header_dict(&text, text_offset, major >= 3).map_err(NpyError::Invalid)?;
    if dict.fortran_order {
        return Err(NpyError::Invalid(
            "array is in Fortran (column-major) order; save it with np.ascontiguousarray(arr)"
                .into(),
        ));
    }
    Ok(Header {
        dtype: dict.dtype,
        shape: dict.shape,
        data_offset: text_offset + header_bytes as u64,
    })
}

/// Appends the values of `bytes`, little-endian elements of a float `dtype`, to `out` as
/// f32 (float16 exactly; float64 rounded, beyond the f32 range becoming ±inf, which a
/// finiteness check then rejects). An integer `dtype` appends nothing: check
/// [`Dtype::is_float`] first.
#[allow(clippy::cast_possible_truncation)]
pub fn decode_floats(bytes: &[u8], dtype: Dtype, out: &mut Vec<f32>) {
    debug_assert!(dtype.is_float(), "{dtype:?} is not a float type");
    match dtype {
        Dtype::F16 => out.extend(
            bytes
                .chunks_exact(2)
                .map(|chunk| f16::from_le_bytes([chunk[0], chunk[1]]).to_f32()),
        ),
        Dtype::F32 => out.extend(crate::codec::f32s(bytes)),
        Dtype::F64 => out.extend(
            bytes
                .chunks_exact(8)
                .map(|chunk| f64::from_le_bytes(chunk.try_into().expect("8 bytes")) as f32),
        ),
        _ => {}
    }
}

/// The value of `chunk`, one little-endian element of an integer `dtype` (1 to 8 bytes,
/// sign-extended when signed); `None` for a float `dtype`.
pub fn decode_integer(chunk: &[u8], dtype: Dtype) -> Option<i128> {
    if dtype.is_float() {
        return None;
    }
    debug_assert_eq!(chunk.len(), dtype.size_bytes());
    let negative = !dtype.is_unsigned() && chunk.last().is_some_and(|byte| byte & 0x80 != 0);
    let mut extended = [if negative { 0xFF } else { 0 }; 16];
    extended[..chunk.len()].copy_from_slice(chunk);
    Some(i128::from_le_bytes(extended))
}

/// Encodes a `.npy` file of format `version` (1, 2 or 3) with a header as numpy writes it
/// (padded so the data starts on a 64-byte boundary): for tests and tools.
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
    let mut out = Writer::with_capacity(prefix + header.len() + data_le.len());
    out.bytes(MAGIC).u8(version).u8(0);
    if version == 1 {
        out.u16(u16::try_from(header.len()).unwrap_or(u16::MAX));
    } else {
        out.u32(u32::try_from(header.len()).unwrap_or(u32::MAX));
    }
    out.bytes(header.as_bytes()).bytes(data_le);
    out.into_bytes()
}

/// The three keys of a header dict.
struct HeaderDict {
    dtype: Dtype,
    fortran_order: bool,
    shape: Vec<u64>,
}

/// Parses `{'descr': ..., 'fortran_order': ..., 'shape': (...), }`; `text` starts at byte
/// `offset` of the file (errors name file offsets); strings are UTF-8 when `utf8`, else
/// Latin-1.
fn parse_header_dict(text: &[u8], offset: u64, utf8: bool) -> Result<HeaderDict, String> {
    let mut parser = LiteralParser {
        text,
        position: 0,
        offset,
        utf8,
    };
    let value = parser.value(0)?;
    parser.skip_whitespace();
    if parser.position != parser.text.len() {
        return Err(format!("header has trailing text at byte {}", parser.at()));
    }
    let Literal::Dict(entries) = value else {
        return Err("header is not a dict".into());
    };
    let entry = |key: &str| {
        entries
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value)
            .ok_or_else(|| format!("header has no {key:?} key"))
    };
    let dtype = match entry("descr")? {
        Literal::Str(descr) => Dtype::parse(descr)?,
        _ => return Err("`descr` is a structured dtype, which is not supported".into()),
    };
    let Literal::Bool(fortran_order) = entry("fortran_order")? else {
        return Err("`fortran_order` is not True or False".into());
    };
    let Literal::Tuple(dims) = entry("shape")? else {
        return Err("`shape` is not a tuple".into());
    };
    let shape = dims
        .iter()
        .map(|dim| match dim {
            Literal::Int(value) => Ok(*value),
            _ => Err("`shape` holds a value that is not an integer".to_string()),
        })
        .collect::<Result<Vec<u64>, String>>()?;
    Ok(HeaderDict {
        dtype,
        fortran_order: *fortran_order,
        shape,
    })
}

/// A Python literal as numpy writes it in a header.
#[derive(Debug)]
enum Literal {
    Str(String),
    Bool(bool),
    None,
    Int(u64),
    Tuple(Vec<Literal>),
    /// A list (numpy's structured dtypes); its items are not needed.
    List,
    Dict(Vec<(String, Literal)>),
}

struct LiteralParser<'a> {
    text: &'a [u8],
    position: usize,
    /// File offset of `text[0]`.
    offset: u64,
    /// Strings are UTF-8 (format 3.0) rather than Latin-1.
    utf8: bool,
}

impl LiteralParser<'_> {
    /// The file offset of the current position.
    fn at(&self) -> u64 {
        self.offset + self.position as u64
    }

    fn skip_whitespace(&mut self) {
        while self
            .text
            .get(self.position)
            .is_some_and(u8::is_ascii_whitespace)
        {
            self.position += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.text.get(self.position).copied()
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.peek() == Some(byte) {
            self.position += 1;
            Ok(())
        } else {
            Err(format!(
                "header: expected '{}' at byte {}",
                char::from(byte),
                self.at()
            ))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Literal, String> {
        if depth > MAX_LITERAL_DEPTH {
            return Err("header nests too deeply".into());
        }
        match self.peek() {
            Some(b'\'' | b'"') => self.string().map(Literal::Str),
            Some(b'(') => self.sequence(b'(', b')', depth).map(Literal::Tuple),
            Some(b'[') => self.sequence(b'[', b']', depth).map(|_| Literal::List),
            Some(b'{') => self.dict(depth).map(Literal::Dict),
            Some(byte) if byte.is_ascii_digit() => self.integer().map(Literal::Int),
            Some(byte) if byte.is_ascii_alphabetic() => self.name(),
            _ => Err(format!("header: unexpected text at byte {}", self.at())),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        let quote = self.text[self.position];
        let start = self.position + 1;
        let length = self.text[start..]
            .iter()
            .position(|byte| *byte == quote)
            .ok_or_else(|| format!("header: unterminated string at byte {}", self.at()))?;
        self.position = start + length + 1;
        let bytes = &self.text[start..start + length];
        Ok(if self.utf8 {
            String::from_utf8_lossy(bytes).into_owned()
        } else {
            // Latin-1: every byte is the code point of the same value.
            bytes.iter().map(|byte| char::from(*byte)).collect()
        })
    }

    fn integer(&mut self) -> Result<u64, String> {
        let start = self.position;
        while self.text.get(self.position).is_some_and(u8::is_ascii_digit) {
            self.position += 1;
        }
        let digits = std::str::from_utf8(&self.text[start..self.position]).unwrap_or("");
        // Python 2 wrote long integers with an `L` suffix.
        if self.text.get(self.position) == Some(&b'L') {
            self.position += 1;
        }
        digits.parse().map_err(|_| {
            format!(
                "header: integer {digits} at byte {} is too large",
                self.offset + start as u64
            )
        })
    }

    fn name(&mut self) -> Result<Literal, String> {
        let start = self.position;
        while self
            .text
            .get(self.position)
            .is_some_and(u8::is_ascii_alphabetic)
        {
            self.position += 1;
        }
        match &self.text[start..self.position] {
            b"True" => Ok(Literal::Bool(true)),
            b"False" => Ok(Literal::Bool(false)),
            b"None" => Ok(Literal::None),
            other => Err(format!(
                "header: unexpected name {:?} at byte {}",
                String::from_utf8_lossy(other),
                self.offset + start as u64
            )),
        }
    }

    /// `open value, value, ... [,] close`.
    fn sequence(&mut self, open: u8, close: u8, depth: usize) -> Result<Vec<Literal>, String> {
        self.expect(open)?;
        let mut items = Vec::new();
        while self.peek() != Some(close) {
            items.push(self.value(depth + 1)?);
            if self.peek() != Some(close) {
                self.expect(b',')?;
            }
        }
        self.expect(close)?;
        Ok(items)
    }

    fn dict(&mut self, depth: usize) -> Result<Vec<(String, Literal)>, String> {
        self.expect(b'{')?;
        let mut entries = Vec::new();
        while self.peek() != Some(b'}') {
            let key_at = self.at();
            let Literal::Str(key) = self.value(depth + 1)? else {
                return Err(format!(
                    "header: the dict key at byte {key_at} is not a string"
                ));
            };
            self.expect(b':')?;
            entries.push((key, self.value(depth + 1)?));
            if self.peek() != Some(b'}') {
                self.expect(b',')?;
            }
        }
        self.expect(b'}')?;
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<HeaderDict, String> {
        parse_header_dict(text.as_bytes(), 10, false)
    }

    fn header_of(bytes: &[u8]) -> Result<Header, String> {
        read_header(&mut &bytes[..]).map_err(|error| error.to_string())
    }

    #[test]
    fn parses_the_header_numpy_writes() {
        let header =
            parse("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }    \n").unwrap();
        assert_eq!(header.dtype, Dtype::F32);
        assert!(!header.fortran_order);
        assert_eq!(header.shape, vec![3, 2]);
    }

    #[test]
    fn parses_one_dimensional_and_python2_shapes() {
        let header =
            parse("{\"shape\": (7L,), \"fortran_order\": True, \"descr\": \"|u1\"}").unwrap();
        assert_eq!(header.dtype, Dtype::U8);
        assert!(header.fortran_order);
        assert_eq!(header.shape, vec![7]);
    }

    #[test]
    fn names_a_structured_dtype() {
        let error = parse(
            "{'descr': [('a', '<f4'), ('b', '<i8')], 'fortran_order': False, 'shape': (2,), }",
        )
        .err()
        .unwrap();
        assert!(error.contains("structured"), "{error}");
    }

    #[test]
    fn rejects_big_endian_and_unknown_types() {
        assert!(Dtype::parse(">f4").unwrap_err().contains("big-endian"));
        assert!(Dtype::parse("<c8").unwrap_err().contains("not a supported"));
        assert!(Dtype::parse("|f4").is_err());
        for dtype in [Dtype::F16, Dtype::F64, Dtype::I8, Dtype::U8, Dtype::U64] {
            assert_eq!(Dtype::parse(dtype.descr()), Ok(dtype));
        }
    }

    #[test]
    fn rejects_malformed_headers_without_panicking() {
        for text in [
            "",
            "{",
            "{'descr': '<f4'",
            "{'descr': '<f4', 'fortran_order': False}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
            "((((((((((((((((((((((((((((((",
            "{1: 2}",
            "{'descr': '<f4', 'fortran_order': Maybe, 'shape': ()}",
            "{'descr: '<f4'}",
        ] {
            assert!(parse(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn header_errors_name_the_file_offset() {
        // the dict starts at byte 10 of a version-1 file
        let error = parse("{'descr' '<f4'}").err().unwrap();
        assert_eq!(error, "header: expected ':' at byte 19");
        let error = parse("{'descr': '<f4', 'fortran_order': Maybe}")
            .err()
            .unwrap();
        assert!(error.contains("\"Maybe\" at byte 44"), "{error}");
    }

    #[test]
    fn reads_every_version_and_refuses_fortran_order() {
        for version in [1, 2, 3] {
            let bytes = encode(Dtype::F16, &[3, 2], &[0; 12], version);
            let header = header_of(&bytes).unwrap();
            assert_eq!(header.shape, [3, 2]);
            assert_eq!(header.dtype, Dtype::F16);
            assert_eq!(header.data_offset % 64, 0);
            assert_eq!(header.check_data_length(bytes.len() as u64), Ok(12));
        }
        let mut bytes = encode(Dtype::F32, &[1, 1], &[0; 4], 1);
        let at = bytes.windows(5).position(|w| w == b"False").unwrap();
        bytes[at..at + 5].copy_from_slice(b"True ");
        assert!(header_of(&bytes).unwrap_err().contains("Fortran"));
    }

    #[test]
    fn short_and_foreign_files_are_named() {
        assert!(header_of(b"PK\x03\x04 not numpy")
            .unwrap_err()
            .contains("not a .npy file"));
        assert_eq!(
            header_of(b"\x93NUMPY\x01\x00\x10").unwrap_err(),
            "file ends inside the .npy header (at byte 8: header length: truncated (needs 2 \
             bytes, 1 remain))"
        );
        assert!(header_of(b"\x93NUM")
            .unwrap_err()
            .contains("file ends inside the .npy header"));
        let bytes = encode(Dtype::F32, &[1, 1], &[], 2);
        assert!(header_of(&bytes[..40])
            .unwrap_err()
            .contains("at byte 12: header dict: truncated"));
        assert!(header_of(b"\x93NUMPY\x04\x00")
            .unwrap_err()
            .contains("version 4.0"));
    }

    #[test]
    fn data_length_must_match_the_shape() {
        let bytes = encode(Dtype::I32, &[3], &[0; 12], 1);
        let header = header_of(&bytes).unwrap();
        let length = bytes.len() as u64;
        assert_eq!(header.check_data_length(length), Ok(12));
        assert!(matches!(
            header.check_data_length(length - 1),
            Err(LengthError::Truncated {
                needed: 12,
                available: 11,
                ..
            })
        ));
        assert_eq!(
            header
                .check_data_length(length + 4)
                .unwrap_err()
                .to_string(),
            "4 bytes follow the data of shape [3]"
        );
        let huge = Header {
            shape: vec![u64::MAX, 2],
            ..header
        };
        assert!(matches!(
            huge.check_data_length(length),
            Err(LengthError::TooLarge { .. })
        ));
    }

    #[test]
    fn elements_decode_by_type() {
        let mut out = Vec::new();
        decode_floats(&f16::from_f32(0.5).to_le_bytes(), Dtype::F16, &mut out);
        decode_floats(&(-2.0f32).to_le_bytes(), Dtype::F32, &mut out);
        decode_floats(&1e300f64.to_le_bytes(), Dtype::F64, &mut out);
        assert_eq!(out, [0.5, -2.0, f32::INFINITY]);
        assert_eq!(decode_integer(&[0xff], Dtype::I8), Some(-1));
        assert_eq!(decode_integer(&[0xff], Dtype::U8), Some(255));
        assert_eq!(
            decode_integer(&u64::MAX.to_le_bytes(), Dtype::U64),
            Some(i128::from(u64::MAX))
        );
        assert_eq!(decode_integer(&(-5i32).to_le_bytes(), Dtype::I32), Some(-5));
        assert_eq!(decode_integer(&[0; 4], Dtype::F32), None);
    }
}
