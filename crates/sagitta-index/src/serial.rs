//! Section framing shared by the index file formats (docs/format.md): a section is
//! `tag: u32, reserved: u32 = 0, length: u64, crc32c: u32, reserved: u32 = 0` followed by
//! `length` payload bytes. Readers verify tag, length and CRC before use. Every field is read
//! and written with `sagitta_storage::codec`, so a malformed file's error names the byte
//! offset at fault.

use std::io::{Read, Write};

use sagitta_storage::codec::{DecodeError, Reader, Writer};

use crate::error::{IndexError, Result};

/// Largest section payload accepted on load (guards allocations against corrupt lengths).
const SECTION_BYTES_MAX: u64 = 1 << 40;
/// Bytes of a section header.
pub(crate) const SECTION_HEADER_BYTES: usize = 24;
const _: () = assert!(SECTION_HEADER_BYTES == 4 + 4 + 8 + 4 + 4);

fn io_error(operation: &'static str) -> impl FnOnce(std::io::Error) -> IndexError {
    move |error| IndexError::Io {
        operation,
        message: error.to_string(),
    }
}

/// A malformed field as an [`IndexError::Format`]; `context` (e.g. "header") comes first.
pub(crate) fn decode_error(context: &str, error: &DecodeError) -> IndexError {
    IndexError::format(format!("{context}: {error}"))
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
    let mut header = Writer::with_capacity(SECTION_HEADER_BYTES);
    header
        .u32(tag)
        .zeros::<4>()
        .u64(length)
        .u32(crc)
        .zeros::<4>();
    debug_assert_eq!(header.len(), SECTION_HEADER_BYTES);
    write_all(writer, header.as_bytes())
}

/// Writes a section whose payload is `row_count` rows that `encode_row(row, buffer)` puts
/// into `buffer` (cleared first): one pass for the CRC, one to write, so a large payload
/// (the vectors: 600 MB at 200k × 768) is never held in memory a second time.
pub(crate) fn write_section_rows(
    writer: &mut impl Write,
    tag: u32,
    row_count: usize,
    mut encode_row: impl FnMut(usize, &mut Writer) -> Result<()>,
) -> Result<()> {
    let mut buffer = Writer::new();
    let mut crc = 0u32;
    let mut length = 0u64;
    for row in 0..row_count {
        buffer.clear();
        encode_row(row, &mut buffer)?;
        crc = crc32c::crc32c_append(crc, buffer.as_bytes());
        length += buffer.len() as u64;
    }
    write_section_header(writer, tag, length, crc)?;
    let mut written = 0u64;
    for row in 0..row_count {
        buffer.clear();
        encode_row(row, &mut buffer)?;
        written += buffer.len() as u64;
        write_all(writer, buffer.as_bytes())?;
    }
    assert_eq!(written, length, "rows encode the same bytes twice");
    Ok(())
}

/// Checks a section header (at `offset` in the file) against `tag` and `expected_length`;
/// returns the stored CRC.
fn check_section_header(
    header: &[u8; SECTION_HEADER_BYTES],
    offset: u64,
    tag: u32,
    expected_length: u64,
    name: &str,
) -> Result<u32> {
    let section_error = |error: DecodeError| decode_error(&format!("section `{name}`"), &error);
    let mut fields = Reader::at(header, offset);
    let tag_at = fields.offset();
    let found_tag = fields.u32("tag").map_err(section_error)?;
    fields.zeros::<4>("reserved").map_err(section_error)?;
    let length_at = fields.offset();
    let length = fields.u64("length").map_err(section_error)?;
    let crc = fields.u32("crc32c").map_err(section_error)?;
    fields.zeros::<4>("reserved").map_err(section_error)?;
    if found_tag != tag {
        return Err(section_error(Reader::invalid_at(
            tag_at,
            "tag",
            format!("expected {tag:#010x}, found {found_tag:#010x}"),
        )));
    }
    if length != expected_length || length > SECTION_BYTES_MAX {
        return Err(section_error(Reader::invalid_at(
            length_at,
            "length",
            format!("expected {expected_length} bytes, header says {length}"),
        )));
    }
    Ok(crc)
}

fn check_section_crc(payload: &[u8], offset: u64, crc: u32, name: &str) -> Result<()> {
    compare_crc(crc32c::crc32c(payload), crc, offset, name)
}

fn compare_crc(actual: u32, crc: u32, offset: u64, name: &str) -> Result<()> {
    if actual != crc {
        return Err(IndexError::format(format!(
            "section `{name}` (payload at byte {offset}): checksum mismatch (stored \
             {crc:#010x}, computed {actual:#010x})"
        )));
    }
    Ok(())
}

/// Sections read one by one from a stream; `offset` is the stream's position in the file.
pub(crate) struct SectionStream<'r, R> {
    pub reader: &'r mut R,
    pub offset: u64,
}

impl<R: Read> SectionStream<'_, R> {
    /// Reads and checks the next section's header; returns its stored CRC.
    fn header(&mut self, tag: u32, expected_length: u64, name: &str) -> Result<u32> {
        let mut header = [0u8; SECTION_HEADER_BYTES];
        read_exact(self.reader, &mut header).map_err(|error| match error {
            IndexError::Format { .. } => IndexError::format(format!(
                "file is truncated: section `{name}`: its header at byte {} is cut short",
                self.offset
            )),
            other => other,
        })?;
        check_section_header(&header, self.offset, tag, expected_length, name)
    }

    /// Reads the next section, which must carry `tag` and exactly `expected_length` bytes.
    pub fn next(&mut self, tag: u32, expected_length: u64, name: &str) -> Result<Vec<u8>> {
        let crc = self.header(tag, expected_length, name)?;
        let payload_at = self.offset + SECTION_HEADER_BYTES as u64;
        // Read through `take` with a capped initial capacity: a corrupt length cannot make
        // us allocate more than the bytes that actually arrive.
        let length = expected_length;
        let mut payload = Vec::with_capacity(usize::try_from(length.min(1 << 26)).unwrap_or(0));
        self.reader
            .take(length)
            .read_to_end(&mut payload)
            .map_err(io_error("reading index"))?;
        if payload.len() as u64 != length {
            return Err(IndexError::format(format!(
                "section `{name}` (payload at byte {payload_at}) is truncated ({} of {length} \
                 bytes)",
                payload.len()
            )));
        }
        check_section_crc(&payload, payload_at, crc, name)?;
        self.offset = payload_at + length;
        Ok(payload)
    }

    /// Reads the next section as `rows` rows of `row_bytes` each (tag `tag`), a chunk of
    /// at most [`ROW_CHUNK_BYTES`] at a time, handing each row to `on_row(row, bytes)`:
    /// a large section (an index's codes) is never held whole. The checksum covers the
    /// whole payload, so it is verified after the last row; when it fails, the error is
    /// the checksum's even if `on_row` refused a row first (damage is named as damage),
    /// and the caller must discard whatever the rows built.
    pub fn next_rows(
        &mut self,
        (tag, name): (u32, &str),
        rows: usize,
        row_bytes: usize,
        mut on_row: impl FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let length = rows as u64 * row_bytes as u64;
        let stored_crc = self.header(tag, length, name)?;
        let payload_at = self.offset + SECTION_HEADER_BYTES as u64;
        let per_chunk = (ROW_CHUNK_BYTES / row_bytes.max(1)).max(1);
        let mut chunk = vec![0u8; per_chunk.min(rows) * row_bytes];
        let (mut crc, mut refused, mut row) = (0u32, None, 0);
        while row < rows {
            let taken = per_chunk.min(rows - row);
            let bytes = &mut chunk[..taken * row_bytes];
            read_exact(self.reader, bytes).map_err(|error| match error {
                IndexError::Format { .. } => IndexError::format(format!(
                    "section `{name}` (payload at byte {payload_at}) is truncated (rows from \
                     {row} of {rows} missing)"
                )),
                other => other,
            })?;
            crc = crc32c::crc32c_append(crc, bytes);
            for (offset, row_bytes) in bytes.chunks_exact(row_bytes.max(1)).enumerate() {
                if refused.is_none() {
                    refused = on_row(row + offset, row_bytes).err();
                }
            }
            row += taken;
        }
        compare_crc(crc, stored_crc, payload_at, name)?;
        self.offset = payload_at + length;
        refused.map_or(Ok(()), Err)
    }

    /// Succeeds when the stream ends here, at byte `file_bytes` of the file.
    pub fn finish(&mut self, file_bytes: u64) -> Result<()> {
        let mut byte = [0u8; 1];
        let more = self
            .reader
            .read(&mut byte)
            .map_err(io_error("reading index"))?;
        if more > 0 || self.offset != file_bytes {
            return Err(IndexError::format(format!(
                "the last section: expected end of file at byte {}, the file has {} bytes",
                self.offset,
                file_bytes.max(self.offset + more as u64)
            )));
        }
        Ok(())
    }
}

/// The most payload bytes [`SectionStream::next_rows`] holds at once.
const ROW_CHUNK_BYTES: usize = 1 << 20;

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
