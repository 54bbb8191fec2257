//! Flat index file: see docs/format.md ("Flat index file").

use std::io::{Read, Write};

use sagitta_storage::codec::{self, DecodeError, Reader, Writer};

use super::FlatIndex;
use crate::error::{IndexError, Result};
use crate::limits::{MAX_DIMENSION, MAX_POINTS};
use crate::metric::Metric;
use crate::serial::{
    check_finite, decode_error, read_exact, write_all, write_section, SectionStream,
};

pub(crate) const MAGIC: &[u8; 8] = b"SAGFLAT\0";
pub(crate) const FORMAT_VERSION: u32 = 1;
const HEADER_BYTES: usize = 64;
// docs/format.md's header table: magic 8, version 4, metric 1, reserved 3, dim 4, count 8,
// reserved 32, crc32c 4.
const _: () = assert!(HEADER_BYTES == 8 + 4 + 1 + 3 + 4 + 8 + 32 + 4);
const TAG_LABELS: u32 = u32::from_le_bytes(*b"LABL");
const TAG_VECTORS: u32 = u32::from_le_bytes(*b"VECT");

/// What the file header holds.
struct Header {
    metric: Metric,
    dim: usize,
    count: usize,
}

impl FlatIndex {
    /// Serializes the index (header, labels, vectors).
    pub fn save(&self, writer: &mut impl Write) -> Result<()> {
        let mut header = Writer::with_capacity(HEADER_BYTES);
        header
            .bytes(MAGIC)
            .u32(FORMAT_VERSION)
            .u8(self.metric.code())
            .zeros::<3>()
            .u32(u32::try_from(self.dim).expect("dim <= MAX"))
            .u64(self.len() as u64)
            .zeros::<32>();
        let crc = crc32c::crc32c(header.as_bytes());
        header.u32(crc);
        debug_assert_eq!(header.len(), HEADER_BYTES);
        write_all(writer, header.as_bytes())?;
        let mut labels = Writer::with_capacity(self.labels.len() * 8);
        labels.u64s(self.labels.iter().copied());
        write_section(writer, TAG_LABELS, labels.as_bytes())?;
        let mut vectors = Writer::with_capacity(self.vectors.len() * 4);
        vectors.f32s(&self.vectors);
        write_section(writer, TAG_VECTORS, vectors.as_bytes())
    }

    /// Loads an index written by [`FlatIndex::save`], verifying every checksum.
    pub fn load(reader: &mut impl Read) -> Result<FlatIndex> {
        let mut header = [0u8; HEADER_BYTES];
        read_exact(reader, &mut header)?;
        let Header { metric, dim, count } = read_header(&header)?;
        let mut sections = SectionStream {
            reader,
            offset: HEADER_BYTES as u64,
        };
        let labels: Vec<u64> =
            codec::u64s(&sections.next(TAG_LABELS, count as u64 * 8, "labels")?).collect();
        let vectors: Vec<f32> =
            codec::f32s(&sections.next(TAG_VECTORS, (count * dim * 4) as u64, "vectors")?)
                .collect();
        check_finite(&vectors, dim, "row")?;
        let mut index = FlatIndex::new(dim, metric)?;
        index
            .check_labels(&labels)
            .map_err(|error| IndexError::format(error.to_string()))?;
        index.label_set.extend(labels.iter().copied());
        index.labels = labels;
        index.vectors = vectors;
        Ok(index)
    }
}

/// Checks magic, checksum and version of the 64-byte header and reads its fields.
fn read_header(header: &[u8; HEADER_BYTES]) -> Result<Header> {
    let header_error = |error: DecodeError| decode_error("header", &error);
    let mut fields = Reader::new(header);
    if &fields.array::<8>("magic").map_err(header_error)? != MAGIC {
        return Err(IndexError::format("not a SagittaDB flat index (bad magic)"));
    }
    let stored_crc = u32::from_le_bytes(header[60..].try_into().expect("4 bytes"));
    if crc32c::crc32c(&header[..60]) != stored_crc {
        return Err(IndexError::format("header checksum mismatch"));
    }
    let version = fields.u32("version").map_err(header_error)?;
    if version != FORMAT_VERSION {
        return Err(IndexError::format(format!(
            "flat format version {version} is not supported (expected {FORMAT_VERSION})"
        )));
    }
    let metric = Metric::from_code(fields.u8("metric").map_err(header_error)?)?;
    // The reserved bytes (13..16, 28..60) are written as zero but, unlike the HNSW header's,
    // never checked: flat readers have always accepted any value there.
    fields.bytes(3, "reserved").map_err(header_error)?;
    let dim = fields.u32("dim").map_err(header_error)? as usize;
    let count = fields.u64("count").map_err(header_error)?;
    if dim == 0 || dim > MAX_DIMENSION || count > MAX_POINTS as u64 {
        return Err(IndexError::format(format!(
            "header out of range: dim {dim}, count {count}"
        )));
    }
    let count = usize::try_from(count).map_err(|_| IndexError::format("count too large"))?;
    Ok(Header { metric, dim, count })
}
