//! Flat index file: see docs/format.md ("Flat index file").

use std::io::{Read, Write};

use super::FlatIndex;
use crate::error::{IndexError, Result};
use crate::limits::{MAX_DIMENSION, MAX_POINTS};
use crate::metric::Metric;
use crate::serial::{
    bytes_to_f32s, bytes_to_u64s, check_finite, f32s_to_bytes, read_exact, read_section,
    u64s_to_bytes, write_all, write_section, HeaderCursor,
};

pub(crate) const MAGIC: &[u8; 8] = b"SAGFLAT\0";
pub(crate) const FORMAT_VERSION: u32 = 1;
const HEADER_BYTES: usize = 64;
const TAG_LABELS: u32 = u32::from_le_bytes(*b"LABL");
const TAG_VECTORS: u32 = u32::from_le_bytes(*b"VECT");

impl FlatIndex {
    /// Serializes the index (header, labels, vectors).
    pub fn save(&self, writer: &mut impl Write) -> Result<()> {
        let mut header = [0u8; HEADER_BYTES];
        header[0..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        header[12] = self.metric.code();
        header[16..20].copy_from_slice(&u32::try_from(self.dim).expect("dim <= MAX").to_le_bytes());
        header[20..28].copy_from_slice(&(self.len() as u64).to_le_bytes());
        let crc = crc32c::crc32c(&header[..60]);
        header[60..64].copy_from_slice(&crc.to_le_bytes());
        write_all(writer, &header)?;
        write_section(
            writer,
            TAG_LABELS,
            &u64s_to_bytes(self.labels.iter().copied()),
        )?;
        write_section(writer, TAG_VECTORS, &f32s_to_bytes(&self.vectors))
    }

    /// Loads an index written by [`FlatIndex::save`], verifying every checksum.
    pub fn load(reader: &mut impl Read) -> Result<FlatIndex> {
        let mut header = [0u8; HEADER_BYTES];
        read_exact(reader, &mut header)?;
        if &header[0..8] != MAGIC {
            return Err(IndexError::format("not a SagittaDB flat index (bad magic)"));
        }
        let stored_crc = u32::from_le_bytes(header[60..64].try_into().expect("4 bytes"));
        if crc32c::crc32c(&header[..60]) != stored_crc {
            return Err(IndexError::format("header checksum mismatch"));
        }
        let mut cursor = HeaderCursor {
            bytes: &header,
            offset: 8,
        };
        let version = cursor.u32();
        if version != FORMAT_VERSION {
            return Err(IndexError::format(format!(
                "flat format version {version} is not supported (expected {FORMAT_VERSION})"
            )));
        }
        let metric = Metric::from_code(cursor.u8())?;
        cursor.offset = 16;
        let dim = cursor.u32() as usize;
        let count = cursor.u64();
        if dim == 0 || dim > MAX_DIMENSION || count > MAX_POINTS as u64 {
            return Err(IndexError::format(format!(
                "header out of range: dim {dim}, count {count}"
            )));
        }
        let count = usize::try_from(count).map_err(|_| IndexError::format("count too large"))?;
        let labels = bytes_to_u64s(&read_section(
            reader,
            TAG_LABELS,
            count as u64 * 8,
            "labels",
        )?);
        let vectors = bytes_to_f32s(&read_section(
            reader,
            TAG_VECTORS,
            (count * dim * 4) as u64,
            "vectors",
        )?);
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
