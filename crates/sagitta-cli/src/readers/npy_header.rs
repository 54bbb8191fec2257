//! The header of a NumPy `.npy` file (format versions 1.0, 2.0 and 3.0):
//!
//! ```text
//! "\x93NUMPY" | major u8 | minor u8 | header length (u16 LE in 1.0, u32 LE in 2.0/3.0)
//! | header: a Python dict literal, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (1000, 128), }
//!   padded with spaces and ending in '\n' (Latin-1 text in 1.0/2.0, UTF-8 in 3.0)
//! | data: the array's elements, C order unless fortran_order
//! ```
//!
//! The dict is parsed as the small Python-literal grammar numpy writes (strings, booleans,
//! None, integers, tuples, lists, dicts), so a structured dtype (a list `descr`) is reported
//! as such instead of misread.

use std::io::Read;

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Longest header accepted. numpy itself refuses headers over 10,000 bytes by default.
pub const MAX_HEADER_BYTES: usize = 1 << 20;
/// Deepest nesting of tuples, lists and dicts in a header.
const MAX_LITERAL_DEPTH: usize = 16;

/// An element type of a `.npy` array (little-endian or single-byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    Float16,
    Float32,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
}

impl Dtype {
    pub fn size_bytes(self) -> usize {
        match self {
            Dtype::Int8 | Dtype::UInt8 => 1,
            Dtype::Float16 | Dtype::Int16 | Dtype::UInt16 => 2,
            Dtype::Float32 | Dtype::Int32 | Dtype::UInt32 => 4,
            Dtype::Float64 | Dtype::Int64 | Dtype::UInt64 => 8,
        }
    }

    /// Parses a dtype string such as `<f4`, `|u1` or `=i8`.
    fn parse(descr: &str) -> Result<Dtype, String> {
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
            "f2" => Dtype::Float16,
            "f4" => Dtype::Float32,
            "f8" => Dtype::Float64,
            "i1" => Dtype::Int8,
            "i2" => Dtype::Int16,
            "i4" => Dtype::Int32,
            "i8" => Dtype::Int64,
            "u1" => Dtype::UInt8,
            "u2" => Dtype::UInt16,
            "u4" => Dtype::UInt32,
            "u8" => Dtype::UInt64,
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

/// What the header says about the array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub dtype: Dtype,
    pub fortran_order: bool,
    pub shape: Vec<u64>,
    /// Where the data starts (magic, version, length field and header).
    pub data_offset_bytes: u64,
}

/// Reads the magic, version and header dict; leaves `reader` at the first data byte.
pub fn read_header(reader: &mut impl Read) -> Result<Header, HeaderError> {
    let mut preamble = [0_u8; 8];
    reader.read_exact(&mut preamble).map_err(HeaderError::Io)?;
    if &preamble[..6] != MAGIC {
        return Err(HeaderError::Invalid(
            "not a .npy file (no \\x93NUMPY magic)".into(),
        ));
    }
    let (major, minor) = (preamble[6], preamble[7]);
    let length_field_bytes = match major {
        1 => 2,
        2 | 3 => 4,
        _ => {
            return Err(HeaderError::Invalid(format!(
                ".npy format version {major}.{minor} is not supported (1.0, 2.0, 3.0 are)"
            )))
        }
    };
    let header_bytes = read_header_length(reader, length_field_bytes)?;
    let mut text = vec![0_u8; header_bytes];
    reader.read_exact(&mut text).map_err(HeaderError::Io)?;
    let text = decode_header_text(&text, major)?;
    let mut header = parse_header_dict(&text).map_err(HeaderError::Invalid)?;
    header.data_offset_bytes = (8 + length_field_bytes + header_bytes) as u64;
    Ok(header)
}

#[derive(Debug)]
pub enum HeaderError {
    Io(std::io::Error),
    Invalid(String),
}

fn read_header_length(
    reader: &mut impl Read,
    length_field_bytes: usize,
) -> Result<usize, HeaderError> {
    let mut field = [0_u8; 4];
    reader
        .read_exact(&mut field[..length_field_bytes])
        .map_err(HeaderError::Io)?;
    let length = u32::from_le_bytes(field) as usize;
    if length > MAX_HEADER_BYTES {
        return Err(HeaderError::Invalid(format!(
            "header is {length} bytes, over the limit of {MAX_HEADER_BYTES}"
        )));
    }
    Ok(length)
}

fn decode_header_text(bytes: &[u8], major: u8) -> Result<String, HeaderError> {
    if major >= 3 {
        return String::from_utf8(bytes.to_vec())
            .map_err(|_| HeaderError::Invalid("header is not UTF-8".into()));
    }
    // Latin-1: every byte is the code point of the same value.
    Ok(bytes.iter().map(|byte| char::from(*byte)).collect())
}

/// Parses `{'descr': ..., 'fortran_order': ..., 'shape': (...), }`.
fn parse_header_dict(text: &str) -> Result<Header, String> {
    let mut parser = LiteralParser {
        text: text.as_bytes(),
        position: 0,
    };
    let value = parser.value(0)?;
    parser.skip_whitespace();
    if parser.position != parser.text.len() {
        return Err(format!(
            "header has trailing text at byte {}",
            parser.position
        ));
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
    Ok(Header {
        dtype,
        fortran_order: *fortran_order,
        shape,
        data_offset_bytes: 0,
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
}

impl LiteralParser<'_> {
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
                self.position
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
            _ => Err(format!("header: unexpected text at byte {}", self.position)),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        let quote = self.text[self.position];
        let start = self.position + 1;
        let length = self.text[start..]
            .iter()
            .position(|byte| *byte == quote)
            .ok_or("header: unterminated string")?;
        self.position = start + length + 1;
        Ok(String::from_utf8_lossy(&self.text[start..start + length]).into_owned())
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
        digits
            .parse()
            .map_err(|_| format!("header: integer {digits} is too large"))
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
                "header: unexpected name {:?}",
                String::from_utf8_lossy(other)
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
            let Literal::Str(key) = self.value(depth + 1)? else {
                return Err("header: a dict key is not a string".into());
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

    #[test]
    fn parses_the_header_numpy_writes() {
        let header =
            parse_header_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }    \n")
                .unwrap();
        assert_eq!(header.dtype, Dtype::Float32);
        assert!(!header.fortran_order);
        assert_eq!(header.shape, vec![3, 2]);
    }

    #[test]
    fn parses_one_dimensional_and_python2_shapes() {
        let header =
            parse_header_dict("{\"shape\": (7L,), \"fortran_order\": True, \"descr\": \"|u1\"}")
                .unwrap();
        assert_eq!(header.dtype, Dtype::UInt8);
        assert!(header.fortran_order);
        assert_eq!(header.shape, vec![7]);
    }

    #[test]
    fn names_a_structured_dtype() {
        let error = parse_header_dict(
            "{'descr': [('a', '<f4'), ('b', '<i8')], 'fortran_order': False, 'shape': (2,), }",
        )
        .unwrap_err();
        assert!(error.contains("structured"), "{error}");
    }

    #[test]
    fn rejects_big_endian_and_unknown_types() {
        assert!(Dtype::parse(">f4").unwrap_err().contains("big-endian"));
        assert!(Dtype::parse("<c8").unwrap_err().contains("not a supported"));
        assert!(Dtype::parse("|f4").is_err());
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
        ] {
            assert!(parse_header_dict(text).is_err(), "{text:?}");
        }
    }
}
