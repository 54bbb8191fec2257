//! The records file of a disk index: every vector at full precision, in partition order,
//! on 4 KiB pages that each carry their page number and a checksum, so a page read from
//! the wrong place or damaged on the device is detected and reported, never ranked.
//!
//! Page layout (docs/format.md, "Disk segment records"): bytes `0..4088` are the payload,
//! `4088..4092` the page number (low 32 bits, little-endian), `4092..4096` the CRC-32C of
//! bytes `0..4092`. Page 0 is the header; each partition starts on a fresh page.
//!
//! A record is `dim` little-endian f32s. Records of up to 4,088 bytes never straddle a page
//! (`per_page` of them a page, the rest of the page zero); a larger record takes
//! `pages_per_record` whole pages, its bytes split over their payloads in order.

use std::io::Write;

use sagitta_storage::codec::{f32s, Reader, Writer};
use sagitta_storage::pageio::{Page, PAGE_BYTES};

use crate::error::{IndexError, Result};

/// Payload bytes of a page.
pub const PAGE_PAYLOAD: usize = PAGE_BYTES - 8;
const RECORDS_MAGIC: &[u8; 8] = b"SAGREC01";
const RECORDS_VERSION: u32 = 1;
/// Element type of a record: little-endian f32.
const ELEMENT_F32: u8 = 0;

/// Where records sit on pages: fixed by the dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordLayout {
    pub dim: usize,
    /// Bytes of one record.
    pub record_bytes: usize,
    /// Records per page (1 when a record takes several pages).
    pub per_page: usize,
    /// Pages per record (1 when records share pages).
    pub pages_per_record: usize,
}

impl RecordLayout {
    pub fn new(dim: usize) -> RecordLayout {
        let record_bytes = dim * 4;
        if record_bytes <= PAGE_PAYLOAD {
            RecordLayout {
                dim,
                record_bytes,
                per_page: PAGE_PAYLOAD / record_bytes,
                pages_per_record: 1,
            }
        } else {
            RecordLayout {
                dim,
                record_bytes,
                per_page: 1,
                pages_per_record: record_bytes.div_ceil(PAGE_PAYLOAD),
            }
        }
    }

    /// Pages a partition of `records` records takes.
    pub fn partition_pages(&self, records: usize) -> u64 {
        (records.div_ceil(self.per_page) * self.pages_per_record) as u64
    }

    /// The first page of the `index`-th record of a partition (relative to the partition's
    /// first page), its page count, and its byte offset in that first page.
    pub fn locate(&self, index: usize) -> (u64, usize, usize) {
        let page = (index / self.per_page * self.pages_per_record) as u64;
        let offset = index % self.per_page * self.record_bytes;
        (page, self.pages_per_record, offset)
    }

    /// The record starting at `offset` of `pages` (as [`RecordLayout::locate`] gave them),
    /// decoded into `out`.
    pub fn decode(&self, pages: &[&Page], offset: usize, out: &mut Vec<f32>) {
        out.clear();
        if self.pages_per_record == 1 {
            let bytes = &pages[0].0[offset..offset + self.record_bytes];
            out.extend(f32s(bytes));
            return;
        }
        let mut left = self.record_bytes;
        for page in pages {
            let take = left.min(PAGE_PAYLOAD);
            out.extend(f32s(&page.0[..take]));
            left -= take;
        }
    }
}

/// Stamps page `number` with its number and checksum.
fn seal_page(page: &mut Page, number: u64) {
    #[allow(clippy::cast_possible_truncation)]
    let low = number as u32;
    page.0[PAGE_PAYLOAD..PAGE_PAYLOAD + 4].copy_from_slice(&low.to_le_bytes());
    let crc = crc32c::crc32c(&page.0[..PAGE_BYTES - 4]);
    page.0[PAGE_BYTES - 4..].copy_from_slice(&crc.to_le_bytes());
}

/// Checks that `page` is page `number` of a records file, undamaged.
pub fn check_page(page: &Page, number: u64) -> Result<()> {
    let stored = u32::from_le_bytes(page.0[PAGE_BYTES - 4..].try_into().expect("4 bytes"));
    if crc32c::crc32c(&page.0[..PAGE_BYTES - 4]) != stored {
        return Err(IndexError::format(format!(
            "records page {number}: checksum mismatch"
        )));
    }
    let label = u32::from_le_bytes(
        page.0[PAGE_PAYLOAD..PAGE_PAYLOAD + 4]
            .try_into()
            .expect("4 bytes"),
    );
    #[allow(clippy::cast_possible_truncation)]
    if label != number as u32 {
        return Err(IndexError::format(format!(
            "records page {number}: holds page {label} (read from the wrong place)"
        )));
    }
    Ok(())
}

/// What the header page records; checked against the index at load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordsHeader {
    pub layout: RecordLayout,
    pub records: u64,
    /// Pages of the file, the header included.
    pub pages: u64,
}

impl RecordsHeader {
    fn encode(&self) -> Page {
        let mut out = Writer::new();
        out.bytes(RECORDS_MAGIC)
            .u32(RECORDS_VERSION)
            .u8(ELEMENT_F32)
            .zeros::<3>()
            .u32(u32::try_from(self.layout.dim).expect("dimension checked"))
            .u32(u32::try_from(self.layout.record_bytes).expect("dimension checked"))
            .u32(u32::try_from(self.layout.per_page).expect("at most a page"))
            .u32(u32::try_from(self.layout.pages_per_record).expect("dimension checked"))
            .u64(self.records)
            .u64(self.pages);
        let mut page = Page::zeroed();
        page.0[..out.len()].copy_from_slice(out.as_bytes());
        seal_page(&mut page, 0);
        page
    }

    /// The header of a records file from its page 0.
    pub fn decode(page: &Page) -> Result<RecordsHeader> {
        check_page(page, 0)?;
        let bad = |error: sagitta_storage::codec::DecodeError| {
            IndexError::format(format!("records header: {error}"))
        };
        let mut reader = Reader::new(&page.0[..PAGE_PAYLOAD]);
        if reader.array::<8>("magic").map_err(bad)? != *RECORDS_MAGIC {
            return Err(IndexError::format("records header: not a records file"));
        }
        let version = reader.u32("version").map_err(bad)?;
        if version != RECORDS_VERSION {
            return Err(IndexError::format(format!(
                "records header: version {version}, this build reads {RECORDS_VERSION}"
            )));
        }
        if reader.u8("element").map_err(bad)? != ELEMENT_F32 {
            return Err(IndexError::format("records header: unknown element type"));
        }
        reader.zeros::<3>("reserved").map_err(bad)?;
        let dim = reader.u32("dim").map_err(bad)? as usize;
        let layout = RecordLayout {
            dim,
            record_bytes: reader.u32("record_bytes").map_err(bad)? as usize,
            per_page: reader.u32("per_page").map_err(bad)? as usize,
            pages_per_record: reader.u32("pages_per_record").map_err(bad)? as usize,
        };
        if dim == 0 || layout != RecordLayout::new(dim) {
            return Err(IndexError::format(
                "records header: layout does not follow from its dimension",
            ));
        }
        let records = reader.u64("records").map_err(bad)?;
        let pages = reader.u64("pages").map_err(bad)?;
        Ok(RecordsHeader {
            layout,
            records,
            pages,
        })
    }
}

/// Writes a records file page by page: the header first (the partition sizes are known
/// before any record), then each partition from a fresh page.
pub struct RecordWriter<'w> {
    out: &'w mut dyn Write,
    header: RecordsHeader,
    page: Page,
    /// Number of the page being filled.
    number: u64,
    /// Records of the current partition so far.
    in_partition: usize,
    written: u64,
}

impl<'w> RecordWriter<'w> {
    /// Starts a records file for partitions of these sizes and writes its header page.
    pub fn new(out: &'w mut dyn Write, dim: usize, partition_sizes: &[usize]) -> Result<Self> {
        let layout = RecordLayout::new(dim);
        let pages = 1 + partition_sizes
            .iter()
            .map(|size| layout.partition_pages(*size))
            .sum::<u64>();
        let records = partition_sizes.iter().sum::<usize>() as u64;
        let header = RecordsHeader {
            layout,
            records,
            pages,
        };
        out.write_all(&header.encode().0)
            .map_err(|error| write_error(&error))?;
        Ok(RecordWriter {
            out,
            header,
            page: Page::zeroed(),
            number: 1,
            in_partition: 0,
            written: 0,
        })
    }

    /// Ends the current partition (its last page written, zero-padded) and starts the next.
    pub fn next_partition(&mut self) -> Result<()> {
        if !self
            .in_partition
            .is_multiple_of(self.header.layout.per_page)
        {
            self.flush_page()?;
        }
        self.in_partition = 0;
        Ok(())
    }

    fn flush_page(&mut self) -> Result<()> {
        seal_page(&mut self.page, self.number);
        self.out
            .write_all(&self.page.0)
            .map_err(|error| write_error(&error))?;
        self.page.0.fill(0);
        self.number += 1;
        Ok(())
    }

    /// Appends one record (`dim` values) to the current partition.
    pub fn push(&mut self, vector: &[f32]) -> Result<()> {
        let layout = self.header.layout;
        debug_assert_eq!(vector.len(), layout.dim);
        let mut bytes = vector.iter().flat_map(|value| value.to_le_bytes());
        if layout.pages_per_record == 1 {
            let offset = self.in_partition % layout.per_page * layout.record_bytes;
            for (slot, byte) in self.page.0[offset..offset + layout.record_bytes]
                .iter_mut()
                .zip(bytes)
            {
                *slot = byte;
            }
            self.in_partition += 1;
            if self.in_partition.is_multiple_of(layout.per_page) {
                self.flush_page()?;
            }
        } else {
            let mut left = layout.record_bytes;
            while left > 0 {
                let take = left.min(PAGE_PAYLOAD);
                for (slot, byte) in self.page.0[..take].iter_mut().zip(bytes.by_ref()) {
                    *slot = byte;
                }
                left -= take;
                self.flush_page()?;
            }
            self.in_partition += 1;
        }
        self.written += 1;
        Ok(())
    }

    /// Ends the last partition; the counts must be those the header announced.
    pub fn finish(mut self) -> Result<RecordsHeader> {
        self.next_partition()?;
        if self.written != self.header.records || self.number != self.header.pages {
            return Err(IndexError::format(format!(
                "records file: wrote {} records on {} pages, the header says {} on {}",
                self.written, self.number, self.header.records, self.header.pages
            )));
        }
        Ok(self.header)
    }
}

/// Errors of the writer's sink.
fn write_error(error: &std::io::Error) -> IndexError {
    IndexError::Io {
        operation: "writing the records file",
        message: error.to_string(),
    }
}
