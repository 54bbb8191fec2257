//! HNSW index file: see docs/format.md ("HNSW index file").

use std::io::Write;

use sagitta_storage::codec::{DecodeError, Reader, Writer};

use super::storage::Sq8Store;
use super::{HnswIndex, HnswParams, Quantization};
use crate::error::{IndexError, Result};
use crate::limits::{
    check_range, MAX_DIMENSION, MAX_EF_CONSTRUCTION, MAX_LEVEL, MAX_M, MAX_POINTS, MIN_M,
};
use crate::metric::Metric;
use crate::serial::{decode_error, write_all, write_section, write_section_rows};

pub(crate) const MAGIC: &[u8; 8] = b"SAGHNSW\0";
pub(crate) const FORMAT_VERSION: u32 = 1;
pub(super) const HEADER_BYTES: usize = 64;
// docs/format.md's header table: magic 8, version 4, metric 1, quantization 1, has_codes 1,
// reserved 1, dim 4, m 4, ef_construction 4, entry 4, count 8, max_level 4, sq8_scale 4,
// seed 8, reserved 4, crc32c 4.
const _: () =
    assert!(HEADER_BYTES == 8 + 4 + 1 + 1 + 1 + 1 + 4 + 4 + 4 + 4 + 8 + 4 + 4 + 8 + 4 + 4);
pub(super) const NO_ENTRY: u32 = u32::MAX;
pub(super) const TAG_LABELS: u32 = u32::from_le_bytes(*b"LABL");
pub(super) const TAG_LEVELS: u32 = u32::from_le_bytes(*b"LEVL");
pub(super) const TAG_LINKS_LAYER0: u32 = u32::from_le_bytes(*b"LNK0");
pub(super) const TAG_LINKS_UPPER: u32 = u32::from_le_bytes(*b"LNKU");
pub(super) const TAG_VECTORS: u32 = u32::from_le_bytes(*b"VECT");
pub(super) const TAG_CODES: u32 = u32::from_le_bytes(*b"CODE");
pub(super) const TAG_DELETED: u32 = u32::from_le_bytes(*b"DELE");

/// Whether a trained SQ8 index file stores its codes; see [`HnswIndex::save_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codes {
    Stored,
    Recomputed,
}

impl HnswIndex {
    /// Serializes the index. Writers must be stopped first (the Python binding holds the
    /// write lock): links written during a save could point past the saved count, and such
    /// a file is rejected on load.
    pub fn save(&self, writer: &mut impl Write) -> Result<()> {
        self.save_with(writer, Codes::Stored)
    }

    /// [`HnswIndex::save`], choosing whether a trained SQ8 index stores its codes
    /// ([`Codes::Stored`]) or only its scale, the codes being recomputed from the vectors on
    /// load ([`Codes::Recomputed`]: a quarter fewer bytes at any dimension, for a load-time
    /// cost of one quantization pass).
    pub fn save_with(&self, writer: &mut impl Write, codes: Codes) -> Result<()> {
        if self.rows_outside {
            return Err(IndexError::VectorsElsewhere {
                operation: "saving the vectors",
            });
        }
        let count = self.len();
        self.check_all_published(count)?;
        let stored_codes = self.sq8.get().filter(|_| codes == Codes::Stored);
        let header = HeaderFlags {
            has_codes: match (self.sq8.get().is_some(), codes) {
                (false, _) => 0,
                (true, Codes::Stored) => 1,
                (true, Codes::Recomputed) => 2,
            },
            scale: self.sq8_scale().unwrap_or(0.0),
            vectors_outside: false,
        };
        self.write_header(writer, count, header)?;
        self.write_graph_sections(writer, count)?;
        self.write_row_sections(writer, count, stored_codes, true)
    }

    /// The index without its f32 rows: graph, stored SQ8 codes and tombstones, the header
    /// saying the vectors are kept elsewhere (the caller keeps them, row `i` for node `i`).
    /// Loaded back, the index walks on its codes and hands the best candidates to the
    /// caller to re-score ([`HnswIndex::search_codes`]). An SQ8 index not yet trained (a
    /// first batch under [`super::SQ8_TRAINING_ROWS_MIN`] rows) is trained on its rows for
    /// the file; an index without quantization cannot be saved this way.
    pub fn save_without_vectors(&self, writer: &mut impl Write) -> Result<()> {
        if self.params.quantization != Quantization::Sq8 {
            return Err(IndexError::NoCodes);
        }
        let count = self.len();
        self.check_all_published(count)?;
        let trained;
        let store = match self.sq8.get() {
            Some(store) => store,
            None => {
                trained = self.trained_store(count, count)?;
                &trained
            }
        };
        let header = HeaderFlags {
            has_codes: 1,
            scale: store.quantizer.scale(),
            vectors_outside: true,
        };
        self.write_header(writer, count, header)?;
        self.write_graph_sections(writer, count)?;
        self.write_row_sections(writer, count, Some(store), false)
    }

    /// Fails when any of the first `count` nodes has no vector (or, with the rows kept
    /// outside, no code row) yet: an insert in flight.
    fn check_all_published(&self, count: usize) -> Result<()> {
        for node in 0..count {
            let published = if self.rows_outside {
                self.sq8
                    .get()
                    .is_some_and(|store| store.codes.row(node).is_some())
            } else {
                self.vector(u32::try_from(node).expect("< MAX_POINTS"))
                    .is_some()
            };
            if !published {
                return Err(IndexError::format(format!(
                    "node {node} is still being inserted; save after inserts finish"
                )));
            }
        }
        Ok(())
    }

    /// Writes the 64-byte file header of `count` nodes (parameters, entry point, SQ8 scale,
    /// whether codes are stored and where the vectors are), closed by its CRC32C.
    fn write_header(
        &self,
        writer: &mut impl Write,
        count: usize,
        flags: HeaderFlags,
    ) -> Result<()> {
        let params = self.params;
        let (entry, max_level) = self
            .entry_snapshot()
            .map_or((NO_ENTRY, 0), |(node, level)| (node, level));
        let words = |value: usize| u32::try_from(value).expect("checked against limits");
        let mut header = Writer::with_capacity(HEADER_BYTES);
        header
            .bytes(MAGIC)
            .u32(FORMAT_VERSION)
            .u8(params.metric.code())
            .u8(match params.quantization {
                Quantization::None => 0,
                Quantization::Sq8 => 1,
            })
            .u8(flags.has_codes)
            .u8(u8::from(flags.vectors_outside))
            .u32(words(params.dim))
            .u32(words(params.m))
            .u32(words(params.ef_construction))
            .u32(entry)
            .u64(count as u64)
            .u32(words(max_level))
            .f32(flags.scale)
            .u64(params.seed)
            .zeros::<4>();
        let crc = crc32c::crc32c(header.as_bytes());
        header.u32(crc);
        debug_assert_eq!(header.len(), HEADER_BYTES);
        write_all(writer, header.as_bytes())
    }

    /// Writes the graph sections of the first `count` nodes: labels, levels, and the link
    /// blocks of layer 0 and of the upper layers.
    fn write_graph_sections(&self, writer: &mut impl Write, count: usize) -> Result<()> {
        let nodes = (0..count).map(|node| u32::try_from(node).expect("< MAX_POINTS"));
        let mut labels = Writer::with_capacity(count * 8);
        labels.u64s(nodes.clone().map(|n| self.label(n)));
        write_section(writer, TAG_LABELS, labels.as_bytes())?;
        let levels: Vec<u8> = nodes
            .clone()
            .map(|n| u8::try_from(self.graph.level(n)).expect("<= MAX_LEVEL"))
            .collect();
        write_section(writer, TAG_LEVELS, &levels)?;
        let mut links = Writer::new();
        links.u32s(nodes.clone().flat_map(|n| self.graph.block_words(n, 0)));
        write_section(writer, TAG_LINKS_LAYER0, links.as_bytes())?;
        links.clear();
        links.u32s(nodes.clone().flat_map(|n| {
            (1..=levels[n as usize] as usize)
                .flat_map(move |layer| self.graph.block_words(n, layer))
        }));
        write_section(writer, TAG_LINKS_UPPER, links.as_bytes())
    }

    /// Writes the row sections of the first `count` nodes: vectors (an empty section
    /// without `vectors`), the code rows of `stored_codes` when given, and the deleted
    /// bitmap.
    fn write_row_sections(
        &self,
        writer: &mut impl Write,
        count: usize,
        stored_codes: Option<&Sq8Store>,
        vectors: bool,
    ) -> Result<()> {
        let rows = if vectors { count } else { 0 };
        write_section_rows(writer, TAG_VECTORS, rows, |node, buffer| {
            let node = u32::try_from(node).expect("< MAX_POINTS");
            buffer.f32s(self.vector(node).expect("checked above"));
            Ok(())
        })?;
        if let Some(store) = stored_codes {
            write_section_rows(writer, TAG_CODES, count, |node, buffer| {
                let row = store.codes.row(node).ok_or_else(|| {
                    IndexError::format(format!("code row {node} is not published"))
                })?;
                for code in row.iter() {
                    buffer.bytes(&code.to_le_bytes());
                }
                Ok(())
            })?;
        }
        let mut deleted = Writer::with_capacity(count.div_ceil(64) * 8);
        deleted.u64s(self.deleted.words().take(count.div_ceil(64)));
        write_section(writer, TAG_DELETED, deleted.as_bytes())
    }
}

/// The header bytes that say what the row sections hold.
#[derive(Clone, Copy)]
struct HeaderFlags {
    /// 0 untrained, 1 codes stored, 2 codes recomputed on load.
    has_codes: u8,
    scale: f32,
    /// The `VECT` section is empty; the caller keeps the rows.
    vectors_outside: bool,
}

/// What the 64-byte file header holds, checked.
pub(super) struct FileHeader {
    pub params: HnswParams,
    /// The SQ8 quantizer is trained (`has_codes` 1 or 2).
    pub trained: bool,
    /// The `CODE` section is present (`has_codes` 1).
    pub has_codes: bool,
    /// The `VECT` section is empty: the rows are kept outside the file.
    pub vectors_outside: bool,
    pub entry: u32,
    pub count: usize,
    pub max_level: usize,
    pub scale: f32,
}

/// Reads and checks the header: magic, checksum, version, codes, reserved bytes, every
/// parameter's range and the entry point against the count.
pub(super) fn read_header(header: &[u8; HEADER_BYTES]) -> Result<FileHeader> {
    let header_error = |error: DecodeError| decode_error("header", &error);
    if &header[0..8] != MAGIC {
        return Err(IndexError::format("not a SagittaDB HNSW index (bad magic)"));
    }
    let stored_crc = u32::from_le_bytes(header[60..].try_into().expect("4 bytes"));
    if crc32c::crc32c(&header[..60]) != stored_crc {
        return Err(IndexError::format("header checksum mismatch"));
    }
    let mut fields = Reader::at(&header[8..60], 8);
    let version = fields.u32("format_version").map_err(header_error)?;
    if version != FORMAT_VERSION {
        return Err(IndexError::format(format!(
            "HNSW format version {version} is not supported (expected {FORMAT_VERSION})"
        )));
    }
    let metric = Metric::from_code(fields.u8("metric").map_err(header_error)?)?;
    let (quantization, trained, has_codes, vectors_outside) =
        read_flags(&mut fields).map_err(header_error)?;
    let dim = fields.u32("dim").map_err(header_error)? as usize;
    let m = fields.u32("m").map_err(header_error)? as usize;
    let ef_construction = fields.u32("ef_construction").map_err(header_error)? as usize;
    let entry = fields.u32("entry_point").map_err(header_error)?;
    let count = fields.u64("count").map_err(header_error)?;
    let max_level = fields.u32("max_level").map_err(header_error)? as usize;
    let scale = fields.f32("sq8_scale").map_err(header_error)?;
    let seed = fields.u64("seed").map_err(header_error)?;
    fields.zeros::<4>("reserved").map_err(header_error)?;
    fields.expect_end("header_crc32c").map_err(header_error)?;
    let count = check_ranges(dim, m, ef_construction, max_level, count)?;
    // nodes and no entry point: every row is absent (never linked)
    if entry != NO_ENTRY && entry as usize >= count {
        return Err(IndexError::format(format!(
            "header: entry point {entry} inconsistent with count {count}"
        )));
    }
    if trained && quantization != Quantization::Sq8 {
        return Err(IndexError::format("codes present without sq8 quantization"));
    }
    if vectors_outside && !has_codes {
        return Err(IndexError::format(
            "vectors kept outside the file without stored codes to walk on",
        ));
    }
    Ok(FileHeader {
        params: HnswParams {
            dim,
            metric,
            m,
            ef_construction,
            quantization,
            seed,
        },
        trained,
        has_codes,
        vectors_outside,
        entry,
        count,
        max_level,
        scale,
    })
}

/// The header's quantization, `has_codes` (trained, stored) and `vectors` bytes.
fn read_flags(
    fields: &mut Reader<'_>,
) -> std::result::Result<(Quantization, bool, bool, bool), DecodeError> {
    let quantization = fields.code("quantization", |code| match code {
        0 => Some(Quantization::None),
        1 => Some(Quantization::Sq8),
        _ => None,
    })?;
    let (trained, has_codes) = fields.code("has_codes", |code| match code {
        0 => Some((false, false)),
        1 => Some((true, true)),
        2 => Some((true, false)),
        _ => None,
    })?;
    let vectors_outside = fields.code("vectors", |code| match code {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    })?;
    Ok((quantization, trained, has_codes, vectors_outside))
}

/// Checks the header's parameters against the limits; returns `count` as a usize.
fn check_ranges(
    dim: usize,
    m: usize,
    ef_construction: usize,
    max_level: usize,
    count: u64,
) -> Result<usize> {
    let range_error = |error: IndexError| IndexError::format(format!("header: {error}"));
    check_range("dim", dim, 1, MAX_DIMENSION).map_err(range_error)?;
    check_range("m", m, MIN_M, MAX_M).map_err(range_error)?;
    check_range("ef_construction", ef_construction, 1, MAX_EF_CONSTRUCTION).map_err(range_error)?;
    check_range("max_level", max_level, 0, MAX_LEVEL).map_err(range_error)?;
    if count > MAX_POINTS as u64 {
        return Err(IndexError::format(format!(
            "header: count {count} exceeds {MAX_POINTS}"
        )));
    }
    usize::try_from(count).map_err(|_| IndexError::format("count too large"))
}

/// A link block is valid when its length fits and every target exists on that layer.
pub(super) fn check_block(block: &[u32], levels: &[u8], node: usize, layer: usize) -> Result<()> {
    let length = block[0] as usize;
    if length > block.len() - 1 {
        return Err(IndexError::format(format!(
            "node {node} layer {layer}: {length} links exceed the block size"
        )));
    }
    for target in &block[1..=length] {
        match levels.get(*target as usize) {
            None => {
                return Err(IndexError::format(format!(
                    "node {node} layer {layer}: link to {target} beyond count {}",
                    levels.len()
                )))
            }
            Some(level) if (*level as usize) < layer => {
                return Err(IndexError::format(format!(
                    "node {node} layer {layer}: link to {target}, which has level {level}"
                )))
            }
            Some(_) => {}
        }
    }
    Ok(())
}
