//! Loading an HNSW index file (docs/format.md, "HNSW index file") section by section from
//! a stream. The large sections (links, vectors, codes) are read a chunk at a time straight
//! into the index's own slots, so opening needs the index's memory and about a MiB more,
//! not the file's bytes besides (a 1M × 768 graph with codes is ~1 GB either way).

use std::io::Read;
use std::sync::atomic::Ordering;

use sagitta_kernels::AppendSlab;
use sagitta_storage::codec;

use super::format::{
    check_block, read_header, FileHeader, HEADER_BYTES, NO_ENTRY, TAG_CODES, TAG_DELETED,
    TAG_LABELS, TAG_LEVELS, TAG_LINKS_LAYER0, TAG_LINKS_UPPER, TAG_VECTORS,
};
use super::labels::LabelMap;
use super::storage::Sq8Store;
use super::HnswIndex;
use crate::error::{IndexError, Result};
use crate::limits::MAX_POINTS;
use crate::quantizer::Sq8Quantizer;
use crate::serial::{read_exact, read_to_end, SectionStream, SECTION_HEADER_BYTES};

impl HnswIndex {
    /// Loads an index written by [`HnswIndex::save`], verifying header and section checksums
    /// and every structural invariant (link targets in range, levels bounded).
    pub fn load(reader: &mut impl Read) -> Result<HnswIndex> {
        HnswIndex::load_with_capacity(reader, |count| count)
    }

    /// [`HnswIndex::load`] into an index with room for `capacity(count)` points (at least
    /// the `count` the file holds), so points can be added without a [`HnswIndex::reserve`]
    /// that would copy every row.
    pub fn load_with_capacity(
        reader: &mut impl Read,
        capacity: impl FnOnce(usize) -> usize,
    ) -> Result<HnswIndex> {
        HnswIndex::load_from_bytes(&read_to_end(reader)?, capacity)
    }

    /// [`HnswIndex::load_with_capacity`] from the whole file in memory.
    pub fn load_from_bytes(
        bytes: &[u8],
        capacity: impl FnOnce(usize) -> usize,
    ) -> Result<HnswIndex> {
        HnswIndex::load_stream(&mut &bytes[..], bytes.len() as u64, capacity)
    }

    /// [`HnswIndex::load_with_capacity`] from a stream of `file_bytes` bytes (an open file
    /// and its length), a section at a time. The header's counts are checked against
    /// `file_bytes` before anything is allocated, so memory is bounded by what the file
    /// can hold; a section's checksum is verified once its last row has arrived, and any
    /// failure drops the partly built index.
    pub fn load_stream(
        reader: &mut impl Read,
        file_bytes: u64,
        capacity: impl FnOnce(usize) -> usize,
    ) -> Result<HnswIndex> {
        let mut header = [0u8; HEADER_BYTES];
        read_exact(reader, &mut header).map_err(|error| match error {
            IndexError::Format { .. } => IndexError::format(format!(
                "file is truncated: {file_bytes} bytes, shorter than the {HEADER_BYTES}-byte \
                 header"
            )),
            other => other,
        })?;
        let header = read_header(&header)?;
        let quantizer = check_length(&header, file_bytes)?;
        let count = header.count;
        let mut sections = SectionStream {
            reader,
            offset: HEADER_BYTES as u64,
        };
        let labels = sections.next(TAG_LABELS, count as u64 * 8, "labels")?;
        let levels = sections.next(TAG_LEVELS, count as u64, "levels")?;
        let mut index = HnswIndex::new(
            header.params,
            capacity(count).clamp(count, MAX_POINTS.max(count)),
        )?;
        if header.vectors_outside {
            index.vectors = AppendSlab::new(0, index.vectors.stride());
            index.rows_outside = true;
        }
        *index.label_to_node.get_mut() = index.restore_labels(&header, &labels, &levels)?;
        drop(labels);
        index.restore_links(&header, &levels, &mut sections)?;
        // room for every row the index may hold, as the vectors have: rows past `count`
        // are written by later adds
        let store = quantizer.map(|quantizer| Sq8Store {
            codes: AppendSlab::new(index.capacity(), quantizer.stride()),
            quantizer,
        });
        index.restore_rows(&header, &mut sections, store.as_ref())?;
        if let Some(store) = store {
            let _ = index.sq8.set(store);
        }
        let deleted_bytes = (count.div_ceil(64) * 8) as u64;
        let deleted = sections.next(TAG_DELETED, deleted_bytes, "deleted")?;
        sections.finish(file_bytes)?;
        index.restore_deleted(&deleted, count)?;
        index.allocated.store(count, Ordering::Release);
        if header.entry != NO_ENTRY {
            if index.graph.level(header.entry) != header.max_level {
                return Err(IndexError::format("entry point is not on the top layer"));
            }
            index.publish_entry(header.entry, header.max_level);
        }
        Ok(index)
    }

    /// Restores every node's label and level (its link blocks allocated, empty); returns
    /// the label to node map.
    fn restore_labels(
        &self,
        header: &FileHeader,
        labels: &[u8],
        levels: &[u8],
    ) -> Result<LabelMap> {
        let mut map = LabelMap::default();
        for (node, (label, level)) in codec::u64s(labels).zip(levels).enumerate() {
            let level = *level as usize;
            if level > header.max_level {
                return Err(IndexError::format(format!(
                    "node {node} has level {level} above max level {}",
                    header.max_level
                )));
            }
            let node_id = u32::try_from(node).expect("< MAX_POINTS");
            if !map.insert(label, node_id) {
                return Err(IndexError::format(format!("label {label} appears twice")));
            }
            self.labels[node].store(label, Ordering::Relaxed);
            self.graph.init_node(node_id, level);
        }
        Ok(map)
    }

    /// Reads the link blocks of layer 0 (one a node) and of the upper layers (one a node
    /// and layer above 0, in node order), checking each block's targets.
    fn restore_links<R: Read>(
        &self,
        header: &FileHeader,
        levels: &[u8],
        sections: &mut SectionStream<'_, R>,
    ) -> Result<()> {
        let m = header.params.m;
        let mut words = Vec::with_capacity(1 + 2 * m);
        let mut restore = |node: usize, layer: usize, bytes: &[u8]| {
            words.clear();
            words.extend(codec::u32s(bytes));
            check_block(&words, levels, node, layer)?;
            let node = u32::try_from(node).expect("< MAX_POINTS");
            self.graph.restore_block(node, layer, &words);
            Ok(())
        };
        let layer0 = (TAG_LINKS_LAYER0, "links layer 0");
        sections.next_rows(layer0, header.count, (1 + 2 * m) * 4, |node, bytes| {
            restore(node, 0, bytes)
        })?;
        let mut blocks = levels
            .iter()
            .enumerate()
            .flat_map(|(node, level)| (1..=*level as usize).map(move |layer| (node, layer)));
        let upper_blocks = levels.iter().map(|level| *level as usize).sum();
        let upper = (TAG_LINKS_UPPER, "links upper layers");
        sections.next_rows(upper, upper_blocks, (1 + m) * 4, |_, bytes| {
            let (node, layer) = blocks.next().expect("one block a node's layer above 0");
            restore(node, layer, bytes)
        })
    }

    /// Reads the `VECT` rows (each must be finite; none when the rows are kept outside)
    /// and the SQ8 code rows into `store`: stored `CODE` rows, or encoded from the vectors
    /// when the file left them out.
    fn restore_rows<R: Read>(
        &self,
        header: &FileHeader,
        sections: &mut SectionStream<'_, R>,
        store: Option<&Sq8Store>,
    ) -> Result<()> {
        let dim = header.params.dim;
        let vector_rows = if header.vectors_outside {
            0
        } else {
            header.count
        };
        let mut row = vec![0f32; dim];
        let mut code_row = vec![0i8; store.map_or(0, |store| store.quantizer.stride())];
        let recompute = store.filter(|_| !header.has_codes);
        let vectors = (TAG_VECTORS, "vectors");
        sections.next_rows(vectors, vector_rows, dim * 4, |node, bytes| {
            for (value, stored) in row.iter_mut().zip(codec::f32s(bytes)) {
                *value = stored;
            }
            // an absent row (NaNs only: a point without this vector) is valid
            let absent = crate::metric::is_absent(&row) && row.iter().all(|v| v.is_nan());
            if !absent && row.iter().any(|value| !value.is_finite()) {
                return Err(IndexError::format(format!(
                    "vector of node {node} has a non-finite value"
                )));
            }
            self.vectors.write_row(node, &row).expect("fresh slab");
            if let Some(store) = recompute {
                store.quantizer.encode_row(&row, &mut code_row);
                store.codes.write_row(node, &code_row).expect("fresh slab");
            }
            Ok(())
        })?;
        let Some(store) = store.filter(|_| header.has_codes) else {
            return Ok(());
        };
        let codes = (TAG_CODES, "codes");
        sections.next_rows(codes, header.count, code_row.len(), |node, bytes| {
            for (target, byte) in code_row.iter_mut().zip(bytes) {
                *target = i8::from_le_bytes([*byte]);
            }
            store.codes.write_row(node, &code_row).expect("fresh slab");
            Ok(())
        })
    }

    /// Marks deleted the nodes set in the `DELE` bitmap, which must not name a node past
    /// `count`.
    fn restore_deleted(&self, deleted: &[u8], count: usize) -> Result<()> {
        for (index_word, word) in codec::u64s(deleted).enumerate() {
            for bit in 0..64 {
                if word & (1u64 << bit) != 0 {
                    let node = index_word * 64 + bit;
                    if node >= count {
                        return Err(IndexError::format(format!(
                            "deleted bit {node} beyond count"
                        )));
                    }
                    self.deleted
                        .insert(u32::try_from(node).expect("< MAX_POINTS"));
                }
            }
        }
        Ok(())
    }
}

/// Checks that a file of `file_bytes` can hold the sections the header describes (their
/// fixed parts: every section but the upper links, which depend on the levels), and that
/// a trained header's SQ8 scale is valid; returns the trained quantizer.
fn check_length(header: &FileHeader, file_bytes: u64) -> Result<Option<Sq8Quantizer>> {
    let (count, dim) = (header.count as u64, header.params.dim as u64);
    let m = header.params.m as u64;
    let vectors = if header.vectors_outside {
        0
    } else {
        count * dim * 4
    };
    let codes = if header.has_codes {
        count * Sq8Quantizer::stride_for(header.params.dim) as u64
    } else {
        0
    };
    let section_count = 6 + u64::from(header.has_codes);
    let least = HEADER_BYTES as u64
        + section_count * SECTION_HEADER_BYTES as u64
        + count * (8 + 1 + (1 + 2 * m) * 4)
        + vectors
        + codes
        + count.div_ceil(64) * 8;
    if least > file_bytes {
        return Err(IndexError::format(format!(
            "file is truncated: {file_bytes} bytes, where the header's {count} nodes need at \
             least {least}"
        )));
    }
    if !header.trained {
        return Ok(None);
    }
    Sq8Quantizer::check_scale(header.scale)?;
    Ok(Some(Sq8Quantizer::with_scale(
        header.params.dim,
        header.scale,
    )))
}
