//! Little-endian section framing shared by the index file formats (docs/format.md):
//! a section is `tag: u32, reserved: u32 = 0, length: u64, crc32c: u32, reserved: u32 = 0`
//! followed by `length` payload bytes. Readers verify tag, length bound and CRC before use.

use std::io::{Read, Write};

use crate::error::{IndexError, Result};

/// Largest section payload accepted on load (guards allocations against corrupt lengths).
const SECTION_BYTES_MAX: u64 = 1 << 40;

fn io_error(operation: &'static str) -> impl FnOnce(std::io::Error) -> IndexError {
    move |error| IndexError::Io {
        operation,
        message: error.to_string(),
    }
}

pub(crate) fn write_all(writer: &mut impl Write, bytes: &[u8]) -> Result<()> {
    writer.write_all(bytes).map_err(io_error("writing index"))
}

pub(crate) fn read_exact(reader: &mut impl Read, bytes: &mut [u8]) -> Result<()> {
    reader.read_exact(bytes).map_err(|error| {
        if error.kind() == std::io::ErrorKind::UnexpectedEof {
            IndexError::format("file is truncated")
        } else {
            io_error("reading index")(error)
        }
    })
}

/// The rest of `reader`, whole.
pub(crate) fn read_to_end(reader: &mut impl Read) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .map_err(io_error("reading index"))?;
    Ok(bytes)
}

pub(crate) fn write_section(writer: &mut impl Write, tag: u32, payload: &[u8]) -> Result<()> {
    write_section_header(writer, tag, payload.len() as u64, crc32c::crc32c(payload))?;
    write_all(writer, payload)
}

fn write_section_header(writer: &mut impl Write, tag: u32, length: u64, crc: u32) -> Result<()> {
    let mut header = [0u8; 24];
    header[0..4].copy_from_slice(&tag.to_le_bytes());
    header[8..16].copy_from_slice(&length.to_le_bytes());
    header[16..20].copy_from_slice(&crc.to_le_bytes());
    write_all(writer, &header)
}

/// Writes a section whose payload is `row_count` rows that `encode_row(row, buffer)` puts
/// into `buffer` (cleared first): one pass for the CRC, one to write, so a large payload
/// (the vectors: 600 MB at 200k × 768) is never held in memory a second time.
pub(crate) fn write_section_rows(
    writer: &mut impl Write,
    tag: u32,
    row_count: usize,
    mut encode_row: impl FnMut(usize, &mut Vec<u8>) -> Result<()>,
) -> Result<()> {
    let mut buffer = Vec::new();
    let mut crc = 0u32;
    let mut length = 0u64;
    for row in 0..row_count {
        buffer.clear();
        encode_row(row, &mut buffer)?;
        crc = crc32c::crc32c_append(crc, &buffer);
        length += buffer.len() as u64;
    }
    write_section_header(writer, tag, length, crc)?;
    let mut written = 0u64;
    for row in 0..row_count {
        buffer.clear();
        encode_row(row, &mut buffer)?;
        written += buffer.len() as u64;
        write_all(writer, &buffer)?;
    }
    assert_eq!(written, length, "rows encode the same bytes twice");
    Ok(())
}

/// Checks a section header against `tag` and `expected_length`; returns the stored CRC.
fn check_section_header(
    header: &[u8; 24],
    tag: u32,
    expected_length: u64,
    name: &str,
) -> Result<u32> {
    let found_tag = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
    let length = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(header[16..20].try_into().expect("4 bytes"));
    if header[4..8] != [0; 4] || header[20..24] != [0; 4] {
        return Err(IndexError::format(format!(
            "section `{name}`: reserved header bytes are not zero"
        )));
    }
    if found_tag != tag {
        return Err(IndexError::format(format!(
            "section `{name}`: expected tag {tag:#010x}, found {found_tag:#010x}"
        )));
    }
    if length != expected_length || length > SECTION_BYTES_MAX {
        return Err(IndexError::format(format!(
            "section `{name}`: expected {expected_length} bytes, header says {length}"
        )));
    }
    Ok(crc)
}

fn check_section_crc(payload: &[u8], crc: u32, name: &str) -> Result<()> {
    let actual = crc32c::crc32c(payload);
    if actual != crc {
        return Err(IndexError::format(format!(
            "section `{name}`: checksum mismatch (stored {crc:#010x}, computed {actual:#010x})"
        )));
    }
    Ok(())
}

/// Reads the next section, which must carry `tag` and exactly `expected_length` bytes.
pub(crate) fn read_section(
    reader: &mut impl Read,
    tag: u32,
    expected_length: u64,
    name: &str,
) -> Result<Vec<u8>> {
    let mut header = [0u8; 24];
    read_exact(reader, &mut header)?;
    let crc = check_section_header(&header, tag, expected_length, name)?;
    // Read through `take` with a capped initial capacity: a corrupt length cannot make us
    // allocate more than the bytes that actually arrive.
    let length = expected_length;
    let mut payload = Vec::with_capacity(usize::try_from(length.min(1 << 26)).unwrap_or(0));
    reader
        .take(length)
        .read_to_end(&mut payload)
        .map_err(io_error("reading index"))?;
    if payload.len() as u64 != length {
        return Err(IndexError::format(format!(
            "section `{name}` is truncated ({} of {length} bytes)",
            payload.len()
        )));
    }
    check_section_crc(&payload, crc, name)?;
    Ok(payload)
}

/// The sections of a file held whole in memory, read in place (no copy of the payloads).
pub(crate) struct Sections<'a> {
    pub rest: &'a [u8],
}

impl<'a> Sections<'a> {
    /// The next section's payload, which must carry `tag` and exactly `expected_length`
    /// bytes, its checksum verified.
    pub fn next(&mut self, tag: u32, expected_length: u64, name: &str) -> Result<&'a [u8]> {
        let Some((header, rest)) = self.rest.split_first_chunk::<24>() else {
            return Err(IndexError::format("file is truncated"));
        };
        let crc = check_section_header(header, tag, expected_length, name)?;
        let length = usize::try_from(expected_length)
            .ok()
            .filter(|length| *length <= rest.len())
            .ok_or_else(|| {
                IndexError::format(format!(
                    "section `{name}` is truncated ({} of {expected_length} bytes)",
                    rest.len()
                ))
            })?;
        let (payload, rest) = rest.split_at(length);
        check_section_crc(payload, crc, name)?;
        self.rest = rest;
        Ok(payload)
    }
}

/// Rejects a loaded vector section holding NaN or ±Inf, naming the row.
pub(crate) fn check_finite(values: &[f32], dim: usize, what: &str) -> Result<()> {
    match values.iter().position(|value| !value.is_finite()) {
        Some(position) => Err(IndexError::format(format!(
            "vector of {what} {} has a non-finite value",
            position / dim
        ))),
        None => Ok(()),
    }
}

pub(crate) fn f32s_to_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub(crate) fn bytes_to_f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

pub(crate) fn u32s_to_bytes(values: impl IntoIterator<Item = u32>) -> Vec<u8> {
    values.into_iter().flat_map(u32::to_le_bytes).collect()
}

pub(crate) fn u64s_to_bytes(values: impl IntoIterator<Item = u64>) -> Vec<u8> {
    values.into_iter().flat_map(u64::to_le_bytes).collect()
}

pub(crate) fn bytes_to_u64s(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// Fixed 64-byte file header fields shared by both index kinds.
pub(crate) struct HeaderCursor<'a> {
    pub bytes: &'a [u8],
    pub offset: usize,
}

impl HeaderCursor<'_> {
    pub fn u8(&mut self) -> u8 {
        let value = self.bytes[self.offset];
        self.offset += 1;
        value
    }
    pub fn u32(&mut self) -> u32 {
        let value = u32::from_le_bytes(
            self.bytes[self.offset..self.offset + 4]
                .try_into()
                .expect("4 bytes"),
        );
        self.offset += 4;
        value
    }
    pub fn u64(&mut self) -> u64 {
        let value = u64::from_le_bytes(
            self.bytes[self.offset..self.offset + 8]
                .try_into()
                .expect("8 bytes"),
        );
        self.offset += 8;
        value
    }
}
