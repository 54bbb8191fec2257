//! The one little-endian byte codec behind every SagittaDB file format: a [`Reader`] that
//! takes typed fields front to back out of a byte slice, and a [`Writer`] that appends them.
//!
//! Nothing a reader is given is trusted: every read checks the bytes that remain, and a
//! failure is a [`DecodeError`] naming the byte offset, the field being read and what was
//! wrong, e.g. `at byte 13: point count: truncated (needs 4 bytes, 2 remain)`. Lengths and
//! counts read from the bytes are checked against what remains before anything is allocated
//! ([`Reader::count_u32`]), so a corrupt count cannot make a decoder allocate more than the
//! input could hold.
//!
//! Callers map a [`DecodeError`] into their own error type at their crate's boundary (the
//! index's `IndexError::Format`, the engine's `EngineError::Corrupt`), keeping its message.

use std::fmt;

/// What went wrong at a [`DecodeError`]'s offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The field needs more bytes than remain.
    Truncated { needed: u64, remaining: usize },
    /// Bytes remain after what should have been the last field.
    Trailing { remaining: usize },
    /// The field's bytes are not UTF-8.
    NotUtf8,
    /// The field was read but its value is not allowed; the reason is the caller's.
    Invalid(String),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Truncated { needed, remaining } => {
                write!(f, "truncated (needs {needed} bytes, {remaining} remain)")
            }
            Problem::Trailing { remaining } => write!(f, "{remaining} bytes follow the end"),
            Problem::NotUtf8 => f.write_str("not UTF-8"),
            Problem::Invalid(reason) => f.write_str(reason),
        }
    }
}

/// A malformed input: where (`offset`, in bytes from the start of what the [`Reader`] was
/// given, plus its base), what was being read, and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at byte {offset}: {expected}: {problem}")]
pub struct DecodeError {
    pub offset: u64,
    /// The field being read, e.g. "point count".
    pub expected: &'static str,
    pub problem: Problem,
}

impl DecodeError {
    /// Whether the input ended inside a field (a torn or cut-short file).
    pub fn is_truncated(&self) -> bool {
        matches!(self.problem, Problem::Truncated { .. })
    }
}

pub type DecodeResult<T> = std::result::Result<T, DecodeError>;

/// Typed little-endian reads front to back over a byte slice.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    rest: &'a [u8],
    /// Offset of `rest[0]`, counted from the start of the file the bytes came from.
    offset: u64,
}

impl<'a> Reader<'a> {
    /// A reader over `bytes`, offsets counted from its first byte.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader::at(bytes, 0)
    }

    /// A reader over `bytes` that lie at byte `base` of a larger file, so errors name the
    /// offset in that file (a section's payload, read apart from its header).
    pub fn at(bytes: &'a [u8], base: u64) -> Reader<'a> {
        Reader {
            rest: bytes,
            offset: base,
        }
    }

    /// The offset of the next byte to be read.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// How many bytes remain.
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// An error at the next byte to be read; for values a caller rejects after reading
    /// them, [`Reader::invalid_at`] names the field's own offset.
    pub fn error(&self, expected: &'static str, problem: Problem) -> DecodeError {
        DecodeError {
            offset: self.offset,
            expected,
            problem,
        }
    }

    /// An [`Problem::Invalid`] error at `offset` (as [`Reader::offset`] returned it before
    /// the field was read).
    pub fn invalid_at(
        offset: u64,
        expected: &'static str,
        reason: impl Into<String>,
    ) -> DecodeError {
        DecodeError {
            offset,
            expected,
            problem: Problem::Invalid(reason.into()),
        }
    }

    /// The next `length` bytes.
    pub fn bytes(&mut self, length: usize, expected: &'static str) -> DecodeResult<&'a [u8]> {
        let Some((head, tail)) = self.rest.split_at_checked(length) else {
            return Err(self.error(
                expected,
                Problem::Truncated {
                    needed: length as u64,
                    remaining: self.rest.len(),
                },
            ));
        };
        self.rest = tail;
        self.offset += length as u64;
        Ok(head)
    }

    /// The next `length` bytes, `length` being a u64 read from the input.
    pub fn bytes_u64_len(&mut self, length: u64, expected: &'static str) -> DecodeResult<&'a [u8]> {
        match usize::try_from(length) {
            Ok(length) => self.bytes(length, expected),
            Err(_) => Err(self.error(
                expected,
                Problem::Truncated {
                    needed: length,
                    remaining: self.rest.len(),
                },
            )),
        }
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self, expected: &'static str) -> DecodeResult<[u8; N]> {
        let bytes = self.bytes(N, expected)?;
        Ok(bytes.try_into().expect("N bytes"))
    }

    pub fn u8(&mut self, expected: &'static str) -> DecodeResult<u8> {
        self.array::<1>(expected).map(|[byte]| byte)
    }

    pub fn u16(&mut self, expected: &'static str) -> DecodeResult<u16> {
        self.array(expected).map(u16::from_le_bytes)
    }

    pub fn u32(&mut self, expected: &'static str) -> DecodeResult<u32> {
        self.array(expected).map(u32::from_le_bytes)
    }

    pub fn u64(&mut self, expected: &'static str) -> DecodeResult<u64> {
        self.array(expected).map(u64::from_le_bytes)
    }

    pub fn u128(&mut self, expected: &'static str) -> DecodeResult<u128> {
        self.array(expected).map(u128::from_le_bytes)
    }

    pub fn f32(&mut self, expected: &'static str) -> DecodeResult<f32> {
        self.array(expected).map(f32::from_le_bytes)
    }

    /// A u8 code that `decode` maps to a value (an enum's tag); `None` from `decode` is an
    /// "unknown code" error at the code's offset.
    pub fn code<T>(
        &mut self,
        expected: &'static str,
        decode: impl FnOnce(u8) -> Option<T>,
    ) -> DecodeResult<T> {
        let offset = self.offset;
        let code = self.u8(expected)?;
        decode(code)
            .ok_or_else(|| Reader::invalid_at(offset, expected, format!("unknown code {code}")))
    }

    /// `N` bytes that must all be zero (reserved fields).
    pub fn zeros<const N: usize>(&mut self, expected: &'static str) -> DecodeResult<()> {
        let offset = self.offset;
        if self.array::<N>(expected)? == [0; N] {
            Ok(())
        } else {
            Err(Reader::invalid_at(
                offset,
                expected,
                "reserved bytes are not zero",
            ))
        }
    }

    /// A u32 count of items that take at least `min_item_bytes` each: refused, before the
    /// caller allocates anything, when the remaining bytes could not hold that many.
    pub fn count_u32(
        &mut self,
        expected: &'static str,
        min_item_bytes: usize,
    ) -> DecodeResult<usize> {
        let offset = self.offset;
        let count = self.u32(expected)? as usize;
        let needed = (count as u64).saturating_mul(min_item_bytes as u64);
        if needed > self.rest.len() as u64 {
            return Err(DecodeError {
                offset,
                expected,
                problem: Problem::Invalid(format!(
                    "{count} items need at least {needed} bytes, {} remain",
                    self.rest.len()
                )),
            });
        }
        Ok(count)
    }

    /// Bytes preceded by their u32 length.
    pub fn bytes_u32(&mut self, expected: &'static str) -> DecodeResult<&'a [u8]> {
        let length = self.u32(expected)? as usize;
        self.bytes(length, expected)
    }

    /// UTF-8 text preceded by its u32 length.
    pub fn str_u32(&mut self, expected: &'static str) -> DecodeResult<&'a str> {
        let length = self.u32(expected)? as usize;
        self.str(length, expected)
    }

    /// UTF-8 text preceded by its u16 length.
    pub fn str_u16(&mut self, expected: &'static str) -> DecodeResult<&'a str> {
        let length = usize::from(self.u16(expected)?);
        self.str(length, expected)
    }

    /// The next `length` bytes as UTF-8 text.
    pub fn str(&mut self, length: usize, expected: &'static str) -> DecodeResult<&'a str> {
        let offset = self.offset;
        std::str::from_utf8(self.bytes(length, expected)?).map_err(|_| DecodeError {
            offset,
            expected,
            problem: Problem::NotUtf8,
        })
    }

    /// A u8 format version that must be `expected`; otherwise an error naming the format
    /// (`what`, e.g. "shard manifest") and both versions.
    pub fn version_u8(
        &mut self,
        field: &'static str,
        what: &str,
        expected: u8,
    ) -> DecodeResult<u8> {
        let offset = self.offset;
        let version = self.u8(field)?;
        if version != expected {
            return Err(Reader::invalid_at(
                offset,
                field,
                format!("{what} version {version} is not supported (expected {expected})"),
            ));
        }
        Ok(version)
    }

    /// A u8 format version that must be one of `readable` (the older ones a format still
    /// reads, then the current one); otherwise an error naming the format and them all.
    pub fn version_u8_of(
        &mut self,
        field: &'static str,
        what: &str,
        readable: &[u8],
    ) -> DecodeResult<u8> {
        let offset = self.offset;
        let version = self.u8(field)?;
        if !readable.contains(&version) {
            let listed: Vec<String> = readable.iter().map(u8::to_string).collect();
            return Err(Reader::invalid_at(
                offset,
                field,
                format!(
                    "{what} version {version}; this build reads {}",
                    listed.join(" and ")
                ),
            ));
        }
        Ok(version)
    }

    /// Succeeds only when every byte has been read.
    pub fn expect_end(&self, expected: &'static str) -> DecodeResult<()> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(self.error(
                expected,
                Problem::Trailing {
                    remaining: self.rest.len(),
                },
            ))
        }
    }
}

/// The little-endian u32s of `bytes` (whose length is a multiple of 4).
pub fn u32s(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|chunk| u32::from_le_bytes(chunk.try_into().expect("4 bytes")))
}

/// The little-endian u64s of `bytes` (whose length is a multiple of 8).
pub fn u64s(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes
        .chunks_exact(8)
        .map(|chunk| u64::from_le_bytes(chunk.try_into().expect("8 bytes")))
}

/// The little-endian f32s of `bytes` (whose length is a multiple of 4).
pub fn f32s(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|chunk| f32::from_le_bytes(chunk.try_into().expect("4 bytes")))
}

/// Appends little-endian fields to a byte vector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    pub fn with_capacity(capacity: usize) -> Writer {
        Writer {
            bytes: Vec::with_capacity(capacity),
        }
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Empties the writer, keeping its allocation (a buffer reused row after row).
    pub fn clear(&mut self) {
        self.bytes.clear();
    }

    pub fn bytes(&mut self, bytes: &[u8]) -> &mut Writer {
        self.bytes.extend_from_slice(bytes);
        self
    }

    pub fn u8(&mut self, value: u8) -> &mut Writer {
        self.bytes.push(value);
        self
    }

    pub fn u16(&mut self, value: u16) -> &mut Writer {
        self.bytes(&value.to_le_bytes())
    }

    pub fn u32(&mut self, value: u32) -> &mut Writer {
        self.bytes(&value.to_le_bytes())
    }

    pub fn u64(&mut self, value: u64) -> &mut Writer {
        self.bytes(&value.to_le_bytes())
    }

    pub fn u128(&mut self, value: u128) -> &mut Writer {
        self.bytes(&value.to_le_bytes())
    }

    pub fn f32(&mut self, value: f32) -> &mut Writer {
        self.bytes(&value.to_le_bytes())
    }

    /// `N` zero bytes (reserved fields).
    pub fn zeros<const N: usize>(&mut self) -> &mut Writer {
        self.bytes(&[0; N])
    }

    /// `length` as a u32 field. Panics when it does not fit: callers bound every length
    /// before encoding (`what` names the bound in the panic).
    pub fn len_u32(&mut self, length: usize, what: &str) -> &mut Writer {
        let length = u32::try_from(length).unwrap_or_else(|_| panic!("{what}: {length} > u32"));
        self.u32(length)
    }

    /// `bytes` preceded by their u32 length.
    pub fn bytes_u32(&mut self, bytes: &[u8], what: &str) -> &mut Writer {
        self.len_u32(bytes.len(), what).bytes(bytes)
    }

    /// `text` preceded by its u32 length.
    pub fn str_u32(&mut self, text: &str, what: &str) -> &mut Writer {
        self.bytes_u32(text.as_bytes(), what)
    }

    /// `text` preceded by its u16 length (panics past u16, as [`Writer::len_u32`]).
    pub fn str_u16(&mut self, text: &str, what: &str) -> &mut Writer {
        let length =
            u16::try_from(text.len()).unwrap_or_else(|_| panic!("{what}: {} > u16", text.len()));
        self.u16(length).bytes(text.as_bytes())
    }

    pub fn u32s(&mut self, values: impl IntoIterator<Item = u32>) -> &mut Writer {
        for value in values {
            self.u32(value);
        }
        self
    }

    pub fn u64s(&mut self, values: impl IntoIterator<Item = u64>) -> &mut Writer {
        for value in values {
            self.u64(value);
        }
        self
    }

    pub fn f32s(&mut self, values: &[f32]) -> &mut Writer {
        self.bytes.reserve(values.len() * 4);
        for value in values {
            self.f32(*value);
        }
        self
    }
}

/// Bytes of a [`frame`] header: `magic [8] | length u64 | crc32c u32 | reserved u32`.
pub const FRAME_HEADER_BYTES: usize = 24;

/// `body` behind a checksummed header, `magic [8] | length u64 | crc32c u32 | reserved u32
/// (zero) | body` (docs/format.md, "Framed files": a segment's points and tombstones).
pub fn frame(magic: &[u8; 8], body: &[u8]) -> Vec<u8> {
    let mut writer = Writer::with_capacity(FRAME_HEADER_BYTES + body.len());
    writer
        .bytes(magic)
        .u64(body.len() as u64)
        .u32(crc32c::crc32c(body))
        .zeros::<4>()
        .bytes(body);
    writer.into_bytes()
}

/// The body of a [`frame`] with this `magic`, checked whole: magic, reserved bytes, length
/// (the body runs to the end of `bytes`) and checksum.
pub fn unframe<'a>(magic: &[u8; 8], bytes: &'a [u8]) -> DecodeResult<&'a [u8]> {
    let mut reader = Reader::new(bytes);
    if reader.array::<8>("frame magic")? != *magic {
        return Err(Reader::invalid_at(
            0,
            "frame magic",
            format!("not {}", String::from_utf8_lossy(magic)),
        ));
    }
    let length = reader.u64("frame length")?;
    let crc = reader.u32("frame checksum")?;
    reader.zeros::<4>("frame reserved bytes")?;
    let start = reader.offset();
    let body = reader.bytes_u64_len(length, "frame body")?;
    reader.expect_end("frame body")?;
    if crc32c::crc32c(body) != crc {
        return Err(Reader::invalid_at(start, "frame body", "checksum mismatch"));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let mut writer = Writer::new();
        writer
            .u8(7)
            .u16(0x1234)
            .u32(0xdead_beef)
            .u64(u64::MAX - 1)
            .u128(1 << 100)
            .f32(-2.5)
            .zeros::<3>()
            .str_u32("héllo", "text")
            .str_u16("key", "key")
            .bytes_u32(&[1, 2, 3], "blob");
        let bytes = writer.into_bytes();
        let mut reader = Reader::new(&bytes);
        assert_eq!(reader.u8("a").unwrap(), 7);
        assert_eq!(reader.u16("b").unwrap(), 0x1234);
        assert_eq!(reader.u32("c").unwrap(), 0xdead_beef);
        assert_eq!(reader.u64("d").unwrap(), u64::MAX - 1);
        assert_eq!(reader.u128("e").unwrap(), 1 << 100);
        assert_eq!(reader.f32("f").unwrap(), -2.5);
        reader.zeros::<3>("reserved").unwrap();
        assert_eq!(reader.str_u32("text").unwrap(), "héllo");
        assert_eq!(reader.str_u16("key").unwrap(), "key");
        assert_eq!(reader.bytes_u32("blob").unwrap(), [1, 2, 3]);
        reader.expect_end("end").unwrap();
        assert_eq!(reader.offset(), bytes.len() as u64);
    }

    #[test]
    fn errors_name_offset_field_and_problem() {
        let bytes = [1u8, 0, 0, 0, 9, 9];
        let mut reader = Reader::at(&bytes, 100);
        assert_eq!(reader.u32("count").unwrap(), 1);
        let error = reader.u32("dim").unwrap_err();
        assert_eq!(
            error,
            DecodeError {
                offset: 104,
                expected: "dim",
                problem: Problem::Truncated {
                    needed: 4,
                    remaining: 2
                },
            }
        );
        assert_eq!(
            error.to_string(),
            "at byte 104: dim: truncated (needs 4 bytes, 2 remain)"
        );
        assert!(error.is_truncated());
        // a failed read consumes nothing
        assert_eq!(reader.remaining(), 2);
        assert_eq!(
            reader.expect_end("end").unwrap_err().to_string(),
            "at byte 104: end: 2 bytes follow the end"
        );
        assert!(reader
            .zeros::<2>("reserved")
            .unwrap_err()
            .to_string()
            .contains("at byte 104: reserved: reserved bytes are not zero"));
    }

    #[test]
    fn codes_map_to_values_or_name_the_unknown_one() {
        let bytes = [1u8, 7];
        let mut reader = Reader::new(&bytes);
        let decode = |code| (code < 2).then_some(code == 1);
        assert_eq!(reader.code("kind", decode), Ok(true));
        assert_eq!(
            reader.code("kind", decode).unwrap_err().to_string(),
            "at byte 1: kind: unknown code 7"
        );
    }

    #[test]
    fn counts_are_bounded_by_the_remaining_bytes() {
        let mut bytes = u32::MAX.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0; 16]);
        let error = Reader::new(&bytes).count_u32("ids", 9).unwrap_err();
        assert_eq!(error.offset, 0);
        assert!(error.to_string().contains("ids"), "{error}");
        let mut bytes = 2u32.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0; 18]);
        assert_eq!(Reader::new(&bytes).count_u32("ids", 9).unwrap(), 2);
        assert!(Reader::new(&bytes[..21]).count_u32("ids", 9).is_err());
    }

    #[test]
    fn text_must_be_utf8_and_lengths_fit() {
        let mut writer = Writer::new();
        writer.u32(2).bytes(&[0xff, 0xfe]);
        let bytes = writer.into_bytes();
        let error = Reader::new(&bytes).str_u32("payload").unwrap_err();
        assert_eq!((error.offset, &error.problem), (4, &Problem::NotUtf8));
        let error = Reader::new(&[9, 0, 0, 0, b'a'])
            .str_u32("payload")
            .unwrap_err();
        assert!(error.is_truncated());
        assert_eq!(error.offset, 4);
        let error = Reader::new(&[])
            .bytes_u64_len(u64::MAX, "section")
            .unwrap_err();
        assert!(error.is_truncated());
    }

    #[test]
    fn slices_decode_as_little_endian_words() {
        let mut writer = Writer::new();
        writer.u32s([1, 2]).u64s([3]).f32s(&[0.5]);
        let bytes = writer.into_bytes();
        assert_eq!(u32s(&bytes[..8]).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(u64s(&bytes[8..16]).collect::<Vec<_>>(), [3]);
        assert_eq!(f32s(&bytes[16..]).collect::<Vec<_>>(), [0.5]);
    }
    #[test]
    fn frames_round_trip_and_name_what_is_wrong() {
        let framed = frame(b"SAGTEST1", b"body bytes");
        assert_eq!(framed.len(), FRAME_HEADER_BYTES + 10);
        assert_eq!(unframe(b"SAGTEST1", &framed).unwrap(), b"body bytes");
        let error = unframe(b"SAGOTHER", &framed).unwrap_err();
        assert_eq!((error.offset, error.expected), (0, "frame magic"));
        let mut flipped = framed.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let error = unframe(b"SAGTEST1", &flipped).unwrap_err();
        assert_eq!(
            error.to_string(),
            "at byte 24: frame body: checksum mismatch"
        );
        let mut reserved = framed.clone();
        reserved[21] = 1;
        let error = unframe(b"SAGTEST1", &reserved).unwrap_err();
        assert_eq!(error.expected, "frame reserved bytes");
        assert!(unframe(b"SAGTEST1", &framed[..framed.len() - 1])
            .unwrap_err()
            .is_truncated());
        let mut longer = framed.clone();
        longer.push(0);
        let error = unframe(b"SAGTEST1", &longer).unwrap_err();
        assert_eq!(error.problem, Problem::Trailing { remaining: 1 });
    }

    #[test]
    fn a_version_is_checked_and_named() {
        assert_eq!(
            Reader::new(&[3, 7]).version_u8("version", "x file", 3),
            Ok(3)
        );
        let error = Reader::new(&[4])
            .version_u8("version", "x file", 3)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "at byte 0: version: x file version 4 is not supported (expected 3)"
        );
        assert!(Reader::new(&[])
            .version_u8("version", "x file", 3)
            .unwrap_err()
            .is_truncated());
    }
}
