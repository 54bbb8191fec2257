//! Where a disk index's records lie. The records may span several files, its *extents*: a
//! build writes one (partition by partition, each from a fresh page), and each append
//! ([`super::DiskIndex::append`]) adds one holding only the appended vectors, so an update
//! never rewrites a record already on disk. Every position carries the [`Address`] of its
//! record: extent, first page and slot in the page.
//!
//! The [`super::PageReader`] is asked for *page ids*: the extent in the bits from
//! [`EXTENT_SHIFT`] up, the page number within the extent below ([`page_id`]). An index of
//! one extent asks for plain page numbers.

use super::records::RecordLayout;
use crate::error::{IndexError, Result};

/// Bits of a page id below the extent number.
pub const EXTENT_SHIFT: u32 = 40;
/// Most extents an index may span (12 bits of an [`Address`]).
pub const MAX_EXTENTS: usize = 1 << 12;
const PAGE_BITS: u32 = 40;
const SLOT_BITS: u32 = 12;

/// One records file of an index: the records it holds (live or not) and its pages, the
/// header included. Checked against the file's header page when the file is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub records: u64,
    pub pages: u64,
}

/// A record's place: `extent (12 bits) | page (40 bits) | slot (12 bits)`, the slot being
/// the record's index in its page (0 for a record of several pages).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Address(pub(crate) u64);

impl Address {
    pub(crate) fn new(extent: usize, page: u64, slot: usize) -> Address {
        debug_assert!(extent < MAX_EXTENTS && page < 1 << PAGE_BITS && slot < 1 << SLOT_BITS);
        Address((extent as u64) << (PAGE_BITS + SLOT_BITS) | page << SLOT_BITS | slot as u64)
    }

    pub(crate) fn extent(self) -> usize {
        (self.0 >> (PAGE_BITS + SLOT_BITS)) as usize
    }

    pub(crate) fn page(self) -> u64 {
        (self.0 >> SLOT_BITS) & ((1 << PAGE_BITS) - 1)
    }

    pub(crate) fn slot(self) -> usize {
        (self.0 & ((1 << SLOT_BITS) - 1)) as usize
    }

    /// The same place in extent `extent` (extents renumbered when one is dropped).
    pub(crate) fn in_extent(self, extent: usize) -> Address {
        Address::new(extent, self.page(), self.slot())
    }
}

/// The page id of page `page` of extent `extent`, as the page reader is asked for it.
pub fn page_id(extent: usize, page: u64) -> u64 {
    (extent as u64) << EXTENT_SHIFT | page
}

/// Extent and page of a page id.
pub fn split_page_id(id: u64) -> (usize, u64) {
    #[allow(clippy::cast_possible_truncation)] // at most 24 bits
    let extent = (id >> EXTENT_SHIFT) as usize;
    (extent, id & ((1 << EXTENT_SHIFT) - 1))
}

/// The addresses of records written partition by partition into extent `extent`, each
/// partition from a fresh page after the header (what [`super::records::RecordWriter`]
/// writes for partitions of `sizes`).
pub(crate) fn laid_out(layout: RecordLayout, sizes: &[usize], extent: usize) -> Vec<Address> {
    let mut addresses = Vec::with_capacity(sizes.iter().sum());
    let mut first = 1u64;
    for size in sizes {
        for index in 0..*size {
            let (page, _, offset) = layout.locate(index);
            addresses.push(Address::new(
                extent,
                first + page,
                offset / layout.record_bytes,
            ));
        }
        first += layout.partition_pages(*size);
    }
    addresses
}

/// Checks every address against the extents and the layout, and that no two positions
/// share a record.
pub(crate) fn check_addresses(
    addresses: &[Address],
    extents: &[Extent],
    layout: RecordLayout,
) -> Result<()> {
    if extents.len() > MAX_EXTENTS {
        return Err(IndexError::format(format!(
            "disk index: {} extents, at most {MAX_EXTENTS}",
            extents.len()
        )));
    }
    let mut held = vec![0u64; extents.len()];
    for (position, address) in addresses.iter().enumerate() {
        let fits = extents.get(address.extent()).is_some_and(|extent| {
            address.page() >= 1
                && address.page() + layout.pages_per_record as u64 <= extent.pages
                && address.slot() < layout.per_page
        });
        if !fits {
            return Err(IndexError::format(format!(
                "disk index: position {position}'s record address (extent {}, page {}, \
                 slot {}) is outside its extent",
                address.extent(),
                address.page(),
                address.slot()
            )));
        }
        held[address.extent()] += 1;
    }
    if let Some(extent) = (0..extents.len()).find(|e| held[*e] > extents[*e].records) {
        return Err(IndexError::format(format!(
            "disk index: extent {extent} holds {} records, {} positions point into it",
            extents[extent].records, held[extent]
        )));
    }
    let mut sorted = addresses.to_vec();
    sorted.sort_unstable();
    if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(IndexError::format(format!(
            "disk index: two positions share the record at extent {}, page {}, slot {}",
            pair[0].extent(),
            pair[0].page(),
            pair[0].slot()
        )));
    }
    Ok(())
}
