//! The records file of a disk index: every vector at full precision, in partition order,
//! on 4 KiB pages that each carry their page number and a checksum, so a page read from
//! the wrong place or damaged on the device is detected and reported, never ranked.
//!
//! Page layout (docs/format.md, "Disk segment records"): bytes `0..4088` are the payload,
//! `4088..4092` the page number (low 32 bits, little-endian), `4092..4096` the CRC-32C of
//! bytes `0..4092`. Page 0 is the header; each partition starts on a fresh page.
//!
//! A record is `dim` little-endian f32s, or f16s when the index keeps half precision
//! ([`Element::F16`]: half the bytes, so twice the records a page). Records of up to 4,088 bytes never straddle a page
//! (`per_page` of them a page, the rest of the page zero); a larger record takes
//! `pages_per_record` whole pages, its bytes split over their payloads in order.

use std::io::Write;

use half::f16;
use sagitta_storage::codec::{f32s, Reader, Writer};
use sagitta_storage::pageio::{Page, PAGE_BYTES};

use crate::error::{IndexError, Result};

/// Payload bytes of a page.
pub const PAGE_PAYLOAD: usize = PAGE_BYTES - 8;
const RECORDS_MAGIC: &[u8; 8] = b"SAGREC01";
const RECORDS_VERSION: u32 = 1;
/// The type of a record's values on the page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Element {
    /// Little-endian f32: the vectors exactly as given.
    #[default]
    F32,
    /// Little-endian IEEE half precision: each value rounded to the nearest f16 (about
    /// three significant digits; unit-vector coordinates keep ~5e-4 relative error).
    F16,
}

impl Element {
    pub fn bytes(self) -> usize {
        match self {
            Element::F32 => 4,
            Element::F16 => 2,
        }
    }

    /// The code stored in the records header and the disk index.
    pub fn code(self) -> u8 {
        match self {
            Element::F32 => 0,
            Element::F16 => 1,
        }
    }

    pub fn from_code(code: u8) -> Option<Element> {
        match code {
            0 => Some(Element::F32),
            1 => Some(Element::F16),
            _ => None,
        }
    }

    /// `vector` as a record of this type stores it: itself for f32, each value rounded
    /// through f16 into `scratch` for f16.
    pub fn stored<'a>(self, vector: &'a [f32], scratch: &'a mut Vec<f32>) -> &'a [f32] {
        match self {
            Element::F32 => vector,
            Element::F16 => {
                scratch.clear();
                scratch.extend(vector.iter().map(|value| f16::from_f32(*value).to_f32()));
                scratch
            }
        }
    }

    /// Appends `vector`'s record bytes to `out`.
    fn encode(self, vector: &[f32], out: &mut Vec<u8>) {
        match self {
            Element::F32 => out.extend(vector.iter().flat_map(|value| value.to_le_bytes())),
            Element::F16 => out.extend(
                vector
                    .iter()
                    .flat_map(|value| f16::from_f32(*value).to_le_bytes()),
            ),
        }
    }

    /// Appends the values of the record bytes `bytes` to `out`.
    fn decode(self, bytes: &[u8], out: &mut Vec<f32>) {
        match self {
            Element::F32 => out.extend(f32s(bytes)),
            Element::F16 => out.extend(
                bytes
                    .chunks_exact(2)
                    .map(|pair| f16::from_le_bytes([pair[0], pair[1]]).to_f32()),
            ),
        }
    }
}

/// Where records sit on pages: fixed by the dimension and the element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordLayout {
    pub dim: usize,
    pub element: Element,
    /// Bytes of one record.
    pub record_bytes: usize,
    /// Records per page (1 when a record takes several pages).
    pub per_page: usize,
    /// Pages per record (1 when records share pages).
    pub pages_per_record: usize,
}

impl RecordLayout {
    pub fn new(dim: usize, element: Element) -> RecordLayout {
        let record_bytes = dim * element.bytes();
        if record_bytes <= PAGE_PAYLOAD {
            RecordLayout {
                dim,
                element,
                record_bytes,
                per_page: PAGE_PAYLOAD / record_bytes,
                pages_per_record: 1,
            }
        } else {
            RecordLayout {
                dim,
                element,
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
            self.element.decode(bytes, out);
            return;
        }
        let mut left = self.record_bytes;
        for page in pages {
            // Whole values a page: PAGE_PAYLOAD is a multiple of 4 and so of 2.
            let take = left.min(PAGE_PAYLOAD);
            self.element.decode(&page.0[..take], out);
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
            .u8(self.layout.element.code())
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
        let code = reader.u8("element").map_err(bad)?;
        let element = Element::from_code(code).ok_or_else(|| {
            IndexError::format(format!(
                "records header: element type {code} is not 0 (f32) or 1 (f16)"
            ))
        })?;
        reader.zeros::<3>("reserved").map_err(bad)?;
        let dim = reader.u32("dim").map_err(bad)? as usize;
        let layout = RecordLayout {
            dim,
            element,
            record_bytes: reader.u32("record_bytes").map_err(bad)? as usize,
            per_page: reader.u32("per_page").map_err(bad)? as usize,
            pages_per_record: reader.u32("pages_per_record").map_err(bad)? as usize,
        };
        if dim == 0 || layout != RecordLayout::new(dim, element) {
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
    /// The record being written, encoded.
    bytes: Vec<u8>,
    /// Number of the page being filled.
    number: u64,
    /// Records of the current partition so far.
    in_partition: usize,
    written: u64,
}

impl<'w> RecordWriter<'w> {
    /// Starts a records file for partitions of these sizes and writes its header page.
    pub fn new(
        out: &'w mut dyn Write,
        layout: RecordLayout,
        partition_sizes: &[usize],
    ) -> Result<Self> {
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
            bytes: Vec::with_capacity(layout.record_bytes),
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
        let mut bytes = std::mem::take(&mut self.bytes);
        bytes.clear();
        layout.element.encode(vector, &mut bytes);
        if layout.pages_per_record == 1 {
            let offset = self.in_partition % layout.per_page * layout.record_bytes;
            self.page.0[offset..offset + layout.record_bytes].copy_from_slice(&bytes);
            self.in_partition += 1;
            if self.in_partition.is_multiple_of(layout.per_page) {
                self.flush_page()?;
            }
        } else {
            for chunk in bytes.chunks(PAGE_PAYLOAD) {
                self.page.0[..chunk.len()].copy_from_slice(chunk);
                self.flush_page()?;
            }
            self.in_partition += 1;
        }
        self.bytes = bytes;
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

/// A records file of rows in row order, one partition from page 1: how an HNSW segment
/// keeps its vectors on disk (the graph and its codes in RAM, issue 15 §3). Row `i` is
/// the `i`-th record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowRecords {
    pub layout: RecordLayout,
    pub rows: usize,
}

impl RowRecords {
    /// Writes `rows` (`dim` values each, `count` of them) as a records file; returns what
    /// its header says.
    pub fn write<'v>(
        out: &mut dyn Write,
        layout: RecordLayout,
        count: usize,
        rows: impl Iterator<Item = &'v [f32]>,
    ) -> Result<RowRecords> {
        let mut writer = RecordWriter::new(out, layout, &[count])?;
        for row in rows {
            writer.push(row)?;
        }
        // finish checks the rows written against the header it wrote for `count`
        writer.finish()?;
        Ok(RowRecords {
            layout,
            rows: count,
        })
    }

    /// Pages of the file, the header page included.
    pub fn pages(&self) -> u64 {
        1 + self.layout.partition_pages(self.rows)
    }

    /// The first page of row `row`, its page count and its byte offset in that page.
    pub fn location(&self, row: u32) -> (u64, usize, usize) {
        let (page, pages, offset) = self.layout.locate(row as usize);
        (1 + page, pages, offset)
    }

    /// Checks a file's header page against the rows expected of it.
    pub fn check_header(&self, header: &RecordsHeader) -> Result<()> {
        let pages = self.pages();
        if header.layout != self.layout
            || header.records != self.rows as u64
            || header.pages != pages
        {
            return Err(IndexError::format(format!(
                "records header ({} records of {} dims on {} pages) differs from the {} rows \
                 of {} dims on {pages} pages expected",
                header.records, header.layout.dim, header.pages, self.rows, self.layout.dim
            )));
        }
        Ok(())
    }
}
