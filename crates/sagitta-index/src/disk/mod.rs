//! A storage-resident index (issue 15 §1): balanced partitions of about a thousand vectors,
//! 1-bit RaBitQ codes with their error bounds in RAM, and every vector at full precision
//! (f32, or f16 by choice: [`DiskParams::element`]) on SSD ([`records`]) in partition
//! order. With f16 records the codes and squared norms are taken of the rounded vectors,
//! so estimates, bounds and reranking all describe the vectors as stored.
//!
//! Positions: the index numbers its vectors `0..len` in partition order (partition 0's
//! members first); [`DiskIndex::build`] returns the input row of each position, so callers
//! keep ids and payloads in the same order.
//!
//! RAM per vector: the code (`padded_dim / 8` bytes), its two factors and the squared norm
//! (12 bytes), the scan terms (12 bytes), and with `extra_bits` > 0 the extended code
//! (`extra_bits · padded_dim / 8` bytes), its fit and terms (20 bytes). Partition centroids
//! (and their rotations) and the page each partition starts on are the rest.
//!
//! A query ([`DiskIndex::search`]):
//! 1. ranks the centroids and probes the nearest `probes` partitions;
//! 2. scans their codes: each accepted vector gets an estimated distance and an error
//!    bound; a vector whose lower bound cannot beat the `k`-th smallest upper bound is
//!    dropped at once;
//! 3. with extended codes, refines the estimate and bound of each vector left (an 8-bit
//!    query against `1 + extra_bits` bits a coordinate) and drops those that can no longer
//!    beat the `k`-th smallest refined upper bound;
//! 4. reads the records of the rest in waves, most promising (smallest estimate) first,
//!    the pages of a wave deduplicated and read together (many in flight), and ranks them
//!    exactly; a wave takes only candidates whose lower bound still beats the current
//!    `k`-th exact distance, and the search stops once none is left.
//!
//! Distances are "lower is closer" in the metric's own terms: squared L2 for
//! [`Metric::L2`], the negated inner product for [`Metric::Dot`] (RaBitQ estimates squared
//! L2; for Dot `−⟨x,q⟩ = (‖x−q‖² − ‖x‖² − ‖q‖²) / 2`, with the bound halved).
//! [`Metric::Cosine`] is not taken: callers store unit vectors and use Dot.
//!
//! The RAM part is written and read by [`DiskIndex::encode`] / [`DiskIndex::decode`]
//! (docs/format.md, "Disk segment index").

mod append;
mod build;
pub mod extents;
pub mod records;

use std::io::Write;
use std::sync::Arc;

use sagitta_storage::codec::{f32s, u64s, Reader, Writer};
use sagitta_storage::pageio::Page;

use crate::error::{IndexError, Result};
use crate::limits::{check_range, MAX_DIMENSION};
use crate::rabitq::{CodeFactors, ExtraTerms, Rabitq, ScanTerms, MAX_EXTRA_BITS};
use crate::threads::{effective_threads, for_each_chunk};
use crate::Metric;

pub use append::{AppendOutcome, AppendStats, Source};
pub use extents::{page_id, split_page_id, Extent};
pub use records::{check_page, Element, RecordLayout, RecordsHeader, RowRecords, PAGE_PAYLOAD};

use extents::Address;

/// Version 4 lets the records span several files (extents) and stores each position's
/// record address; version 3 recorded the element type of the records (f32 or f16);
/// version 2 added the extended codes and padded codes to a multiple of 64 bits. Versions
/// 1 to 3 (development builds, never released) are not read.
const INDEX_VERSION: u8 = 4;

/// How a disk index is built.
#[derive(Clone, Copy, Debug)]
pub struct DiskParams {
    /// Vectors a partition aims at.
    pub partition_size: usize,
    /// Seed of the partitioning and of the rotation.
    pub seed: u64,
    /// Build threads (0 = every core).
    pub threads: usize,
    /// Bits of extended code a coordinate beyond the sign bit (0 ..= 3; 0 = none), kept in
    /// RAM to refine the 1-bit estimates before any record is read.
    pub extra_bits: u32,
    /// The records' value type: f16 halves the records file and the bytes read a query.
    pub element: Element,
    /// Most bytes of input rows the build copies into RAM at once when the input is
    /// larger (a memory-mapped file): see the `build` module. The index is the same
    /// whatever the budget.
    pub batch_bytes: usize,
}

impl Default for DiskParams {
    fn default() -> DiskParams {
        DiskParams {
            partition_size: 1_000,
            seed: 0x5A61_7461,
            threads: 0,
            extra_bits: 2,
            element: Element::F32,
            batch_bytes: build::BATCH_BYTES,
        }
    }
}

/// Reads pages of the records file, in the order asked for. Implementations may cache; the
/// index checks every page it is given ([`check_page`]).
pub trait PageReader {
    fn read(&self, pages: &[u64]) -> Result<Vec<Arc<Page>>>;
}

/// What one search did, for telemetry and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SearchStats {
    pub partitions: usize,
    /// Codes estimated (accepted vectors of the probed partitions).
    pub scanned: usize,
    /// Vectors the 1-bit bound kept whose estimate the extended codes refined.
    pub refined: usize,
    /// Vectors whose bound let them be read.
    pub candidates: usize,
    /// Records ranked exactly.
    pub reranked: usize,
    /// Distinct pages asked of the reader.
    pub pages: usize,
    /// Waves of reads.
    pub waves: usize,
}

/// One result: distance (lower is closer), position and the full vector (read anyway).
#[derive(Clone, Debug, PartialEq)]
pub struct DiskHit {
    pub distance: f32,
    pub position: u32,
    pub vector: Vec<f32>,
}

/// The RAM part of a disk index.
#[derive(Debug)]
pub struct DiskIndex {
    metric: Metric,
    quantizer: Rabitq,
    layout: RecordLayout,
    /// Partitions × dim.
    centroids: Vec<f32>,
    /// Partitions × padded dim: each centroid rotated (not stored; computed at build and
    /// load), so a query is rotated once, not once per partition.
    rotated_centroids: Vec<f32>,
    /// Partition `p` holds positions `starts[p]..starts[p + 1]`.
    starts: Vec<u32>,
    /// The records files, in the order addresses number them.
    extents: Vec<Extent>,
    /// Where each position's record lies.
    addresses: Vec<Address>,
    /// `len × code_words`.
    codes: Vec<u64>,
    factors: Vec<CodeFactors>,
    /// Each code's query-independent estimate terms (not stored; computed at build and
    /// load from the codes and factors).
    terms: Vec<ScanTerms>,
    sq_norms: Vec<f32>,
    /// Extended codes: `extra_bits` planes of `code_words` a vector (0: none).
    extra_bits: u32,
    /// `len × extra_bits × code_words`.
    extra_codes: Vec<u64>,
    /// Each extended code's fit (stored).
    extra_fits: Vec<f32>,
    /// Each extended code's query-independent terms (derived, like `terms`).
    extra_terms: Vec<ExtraTerms>,
}

impl DiskIndex {
    /// Builds an index of the row-major `vectors` and writes its records file to `out`.
    /// Returns the index and, for each position, the input row it holds.
    pub fn build(
        vectors: &[f32],
        dim: usize,
        metric: Metric,
        params: DiskParams,
        out: &mut dyn Write,
    ) -> Result<(DiskIndex, Vec<u32>)> {
        DiskIndex::build_striped(vectors, dim, metric, params, &mut [out])
    }

    /// [`DiskIndex::build`] striped over several records files, one an extent (files on
    /// several devices, read in parallel): partition `p` is written to `outs[p % N]`, so
    /// the partitions a query probes spread over every file. The index is the one a build
    /// into one file makes (same partitions, codes and positions), its records elsewhere.
    pub fn build_striped(
        vectors: &[f32],
        dim: usize,
        metric: Metric,
        params: DiskParams,
        outs: &mut [&mut dyn Write],
    ) -> Result<(DiskIndex, Vec<u32>)> {
        let rows = check_build(vectors, dim, metric, params)?;
        check_range("stripes", outs.len(), 1, extents::MAX_EXTENTS)?;
        let quantizer = Rabitq::new(dim, params.seed)?;
        let (centroids, members) = build::partition_rows(vectors, dim, rows, params)?;
        // Encoded and written a batch of partitions at a time, within the budget too.
        let runs = build::batches(&members, dim, params.batch_bytes);
        let order: Vec<u32> = members.iter().flatten().copied().collect();
        let sizes: Vec<usize> = members.iter().map(Vec::len).collect();
        let layout = RecordLayout::new(dim, params.element);
        let mut writers = Striped::new(outs, layout, &sizes)?;
        let mut encoded = Encoded::empty(params.extra_bits);
        let mut sq_norms = Vec::with_capacity(rows);
        let whole = runs.len() <= 1;
        for run in runs {
            let batch = build::Gathered::new(vectors, dim, &members[run.clone()], whole);
            let local: Vec<Vec<u32>> = members[run.clone()]
                .iter()
                .map(|rows| batch.local(rows))
                .collect();
            let run_centroids = &centroids[run.start * dim..run.end * dim];
            let (part, norms) =
                encode_all(&quantizer, batch.data(), run_centroids, &local, params)?;
            encoded.append(part);
            sq_norms.extend(norms);
            for (partition, rows) in run.zip(&local) {
                let writer = writers.of(partition)?;
                for row in rows {
                    writer.push(&batch.data()[*row as usize * dim..(*row as usize + 1) * dim])?;
                }
            }
        }
        let (extents, addresses) = writers.finish(&sizes)?;
        let index = DiskIndex::assemble(
            metric,
            quantizer,
            params.element,
            Tables {
                centroids,
                starts: partition_starts(&sizes),
                extents,
                addresses,
            },
            encoded,
            sq_norms,
        );
        Ok((index, order))
    }

    /// The index from its stored parts, the derived ones (rotated centroids, scan terms)
    /// computed here: the one place both [`DiskIndex::build`] and [`DiskIndex::decode`] end.
    fn assemble(
        metric: Metric,
        quantizer: Rabitq,
        element: Element,
        tables: Tables,
        encoded: Encoded,
        sq_norms: Vec<f32>,
    ) -> DiskIndex {
        let dim = quantizer.dim();
        let words = quantizer.code_words();
        let extra_words = quantizer.extra_words(encoded.extra_bits);
        let extra_terms = if encoded.extra_bits == 0 {
            Vec::new()
        } else {
            encoded
                .codes
                .chunks_exact(words)
                .zip(encoded.extra_codes.chunks_exact(extra_words))
                .zip(&encoded.extra_fits)
                .map(|((code, planes), fit)| {
                    quantizer.extra_terms(code, planes, encoded.extra_bits, *fit)
                })
                .collect()
        };
        DiskIndex {
            metric,
            rotated_centroids: rotate_all(&quantizer, &tables.centroids),
            terms: scan_terms(&quantizer, &encoded.codes, &encoded.factors),
            extra_terms,
            quantizer,
            layout: RecordLayout::new(dim, element),
            centroids: tables.centroids,
            starts: tables.starts,
            extents: tables.extents,
            addresses: tables.addresses,
            codes: encoded.codes,
            factors: encoded.factors,
            sq_norms,
            extra_bits: encoded.extra_bits,
            extra_codes: encoded.extra_codes,
            extra_fits: encoded.extra_fits,
        }
    }

    pub fn dim(&self) -> usize {
        self.layout.dim
    }

    pub fn metric(&self) -> Metric {
        self.metric
    }

    pub fn len(&self) -> usize {
        self.factors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.factors.is_empty()
    }

    pub fn partitions(&self) -> usize {
        self.starts.len() - 1
    }

    /// The vectors of each partition.
    pub fn partition_sizes(&self) -> Vec<usize> {
        self.starts
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .collect()
    }

    pub fn layout(&self) -> RecordLayout {
        self.layout
    }

    /// Pages of the records files, their headers included.
    pub fn record_pages(&self) -> u64 {
        self.extents.iter().map(|extent| extent.pages).sum()
    }

    /// The records files, in the order page ids number them ([`page_id`]).
    pub fn extents(&self) -> &[Extent] {
        &self.extents
    }

    /// Records of the extents no position holds any more (deleted or superseded before an
    /// append): the space a rebuild would give back.
    pub fn dead_records(&self) -> u64 {
        self.extents
            .iter()
            .map(|extent| extent.records)
            .sum::<u64>()
            - self.len() as u64
    }

    /// Bits of extended code a coordinate (0: none).
    pub fn extra_bits(&self) -> u32 {
        self.extra_bits
    }

    /// Bytes of RAM the index holds (codes, extended codes, factors, scan terms, norms,
    /// centroids and their rotations, partition tables).
    pub fn ram_bytes(&self) -> usize {
        self.codes.len() * 8
            + self.extra_codes.len() * 8
            + self.extra_fits.len() * 4
            + self.extra_terms.len() * std::mem::size_of::<ExtraTerms>()
            + self.factors.len() * 8
            + self.terms.len() * std::mem::size_of::<ScanTerms>()
            + self.sq_norms.len() * 4
            + self.centroids.len() * 4
            + self.rotated_centroids.len() * 4
            + self.starts.len() * 4
            + self.addresses.len() * 8
    }

    fn code(&self, position: usize) -> &[u64] {
        let words = self.quantizer.code_words();
        &self.codes[position * words..(position + 1) * words]
    }

    /// The extended code's planes of `position` (empty without extended codes).
    fn extra_code(&self, position: usize) -> &[u64] {
        let words = self.quantizer.extra_words(self.extra_bits);
        &self.extra_codes[position * words..(position + 1) * words]
    }

    fn rotated_centroid(&self, partition: usize) -> &[f32] {
        let padded = self.quantizer.padded_dim();
        &self.rotated_centroids[partition * padded..(partition + 1) * padded]
    }

    fn centroid(&self, partition: usize) -> &[f32] {
        let dim = self.layout.dim;
        &self.centroids[partition * dim..(partition + 1) * dim]
    }

    /// The partition holding `position`.
    fn partition_of(&self, position: u32) -> usize {
        self.starts.partition_point(|start| *start <= position) - 1
    }

    /// The pages of the record at `position`: the first page's id ([`page_id`]), the page
    /// count, and the record's byte offset in the first page.
    pub fn record_location(&self, position: u32) -> (u64, usize, usize) {
        let address = self.addresses[position as usize];
        (
            page_id(address.extent(), address.page()),
            self.layout.pages_per_record,
            address.slot() * self.layout.record_bytes,
        )
    }

    /// Checks `header` (page 0 of extent `extent`'s records file) against this index.
    pub fn check_records_header(&self, extent: usize, header: &RecordsHeader) -> Result<()> {
        let expected = self.extents.get(extent).ok_or_else(|| {
            IndexError::format(format!(
                "records extent {extent}: the index has {}",
                self.extents.len()
            ))
        })?;
        if header.layout != self.layout
            || header.records != expected.records
            || header.pages != expected.pages
        {
            return Err(IndexError::format(format!(
                "records header ({} records of {} dims on {} pages) differs from the index's \
                 extent {extent} ({} of {} on {})",
                header.records,
                header.layout.dim,
                header.pages,
                expected.records,
                self.layout.dim,
                expected.pages
            )));
        }
        Ok(())
    }

    /// The exact distance of `vector` to `query`, in this index's terms.
    pub fn exact_distance(&self, query: &[f32], vector: &[f32]) -> f32 {
        let kernels = sagitta_kernels::kernels();
        match self.metric {
            Metric::L2 => (kernels.l2_squared_f32)(query, vector),
            Metric::Dot | Metric::Cosine => -(kernels.dot_f32)(query, vector),
        }
    }

    /// The full vectors at `positions`, read through `reader` (pages checked).
    pub fn vectors(&self, positions: &[u32], reader: &dyn PageReader) -> Result<Vec<Vec<f32>>> {
        let pages = Pages::read(self, positions, reader)?;
        Ok(positions
            .iter()
            .map(|position| pages.record(self, *position))
            .collect())
    }

    /// Writes the RAM part (docs/format.md, "Disk segment index").
    pub fn encode(&self, out: &mut Writer) {
        let dim = u32::try_from(self.layout.dim).expect("dimension checked");
        out.u8(INDEX_VERSION)
            .u8(metric_code(self.metric))
            .u32(dim)
            .u64(self.quantizer.seed())
            .u8(u8::try_from(self.extra_bits).expect("extra bits checked"))
            .u8(self.layout.element.code())
            .u64(self.len() as u64)
            .len_u32(self.partitions(), "partitions");
        out.u32s(self.starts.iter().copied())
            .f32s(&self.centroids)
            .len_u32(self.extents.len(), "extents");
        for extent in &self.extents {
            out.u64(extent.records).u64(extent.pages);
        }
        for ((factors, sq_norm), position) in self.factors.iter().zip(&self.sq_norms).zip(0..) {
            out.u64(self.addresses[position].0)
                .f32(factors.norm)
                .f32(factors.fit)
                .f32(*sq_norm);
            if self.extra_bits > 0 {
                out.f32(self.extra_fits[position]);
            }
            out.u64s(self.code(position).iter().copied());
            out.u64s(self.extra_code(position).iter().copied());
        }
    }

    /// Reads the RAM part written by [`DiskIndex::encode`]; every byte must be taken.
    pub fn decode(bytes: &[u8]) -> Result<DiskIndex> {
        let mut reader = Reader::new(bytes);
        reader
            .version_u8("version", "disk index", INDEX_VERSION)
            .map_err(bad_index)?;
        let metric = match reader.u8("metric").map_err(bad_index)? {
            0 => Metric::L2,
            1 => Metric::Dot,
            other => {
                return Err(IndexError::format(format!(
                    "disk index: metric code {other} is not 0 (l2) or 1 (dot)"
                )))
            }
        };
        let dim = reader.u32("dim").map_err(bad_index)? as usize;
        check_range("dim", dim, 1, MAX_DIMENSION)
            .map_err(|error| IndexError::format(format!("disk index: {error}")))?;
        let seed = reader.u64("seed").map_err(bad_index)?;
        let quantizer = Rabitq::new(dim, seed)?;
        let extra_bits = u32::from(reader.u8("extra bits").map_err(bad_index)?);
        check_range(
            "extra bits",
            extra_bits as usize,
            0,
            MAX_EXTRA_BITS as usize,
        )
        .map_err(|error| IndexError::format(format!("disk index: {error}")))?;
        let code = reader.u8("element").map_err(bad_index)?;
        let element = Element::from_code(code).ok_or_else(|| {
            IndexError::format(format!(
                "disk index: element type {code} is not 0 (f32) or 1 (f16)"
            ))
        })?;
        let count = reader.u64("vector count").map_err(bad_index)?;
        let mut tables = decode_tables(&mut reader, dim)?;
        let layout = VectorLayout::new(&quantizer, extra_bits);
        let body = reader
            .bytes_u64_len(count.saturating_mul(layout.bytes as u64), "codes")
            .map_err(bad_index)?;
        reader.expect_end("end of disk index").map_err(bad_index)?;
        let (encoded, sq_norms, addresses) = decode_vectors(body, layout);
        tables.addresses = addresses;
        let index = DiskIndex::assemble(metric, quantizer, element, tables, encoded, sq_norms);
        index.check_tables()?;
        Ok(index)
    }

    /// The partition table must cover the positions exactly, and every record address
    /// lie inside its extent, no two alike.
    fn check_tables(&self) -> Result<()> {
        if self.starts.first() != Some(&0) {
            return Err(IndexError::format(
                "disk index: partition 0 does not start at 0",
            ));
        }
        if let Some(partition) = self.starts.windows(2).position(|w| w[1] < w[0]) {
            return Err(IndexError::format(format!(
                "disk index: partition {partition}'s table entry is inconsistent"
            )));
        }
        if self.starts.last().map(|last| *last as usize) != Some(self.len()) {
            return Err(IndexError::format(
                "disk index: partition table does not cover the vectors",
            ));
        }
        extents::check_addresses(&self.addresses, &self.extents, self.layout)
    }
}

/// A build's records writers, one a stripe: partition `p` goes to stripe `p % N`.
struct Striped<'w> {
    writers: Vec<records::RecordWriter<'w>>,
    layout: RecordLayout,
}

impl<'w> Striped<'w> {
    fn new(
        outs: &'w mut [&mut dyn Write],
        layout: RecordLayout,
        sizes: &[usize],
    ) -> Result<Striped<'w>> {
        let stripes = outs.len();
        let writers = outs
            .iter_mut()
            .enumerate()
            .map(|(stripe, out)| {
                records::RecordWriter::new(&mut **out, layout, &of_stripe(sizes, stripe, stripes))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Striped { writers, layout })
    }

    /// The writer of `partition`, started on it (partitions come in order).
    fn of(&mut self, partition: usize) -> Result<&mut records::RecordWriter<'w>> {
        let stripes = self.writers.len();
        let writer = &mut self.writers[partition % stripes];
        writer.next_partition()?;
        Ok(writer)
    }

    /// Ends every file; returns the extents and each position's address.
    fn finish(self, sizes: &[usize]) -> Result<(Vec<Extent>, Vec<Address>)> {
        let stripes = self.writers.len();
        let mut laid: Vec<_> = (0..stripes)
            .map(|stripe| {
                extents::laid_out(self.layout, &of_stripe(sizes, stripe, stripes), stripe)
                    .into_iter()
            })
            .collect();
        let mut addresses = Vec::with_capacity(sizes.iter().sum());
        for (partition, size) in sizes.iter().enumerate() {
            addresses.extend(laid[partition % stripes].by_ref().take(*size));
        }
        let extents = self
            .writers
            .into_iter()
            .map(|writer| {
                let header = writer.finish()?;
                Ok(Extent {
                    records: header.records,
                    pages: header.pages,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((extents, addresses))
    }
}

/// The sizes of the partitions stripe `stripe` of `stripes` holds, in order.
fn of_stripe(sizes: &[usize], stripe: usize, stripes: usize) -> Vec<usize> {
    sizes
        .iter()
        .skip(stripe)
        .step_by(stripes)
        .copied()
        .collect()
}

/// Checks a build's arguments; returns the number of rows.
fn check_build(vectors: &[f32], dim: usize, metric: Metric, params: DiskParams) -> Result<usize> {
    check_range("dim", dim, 1, MAX_DIMENSION)?;
    let extra_bits = params.extra_bits as usize;
    check_range("extra_bits", extra_bits, 0, MAX_EXTRA_BITS as usize)?;
    if metric == Metric::Cosine {
        return Err(IndexError::UnknownMetric {
            name: "cosine (store unit vectors and use dot)".to_string(),
        });
    }
    if !vectors.len().is_multiple_of(dim) {
        return Err(IndexError::WrongVectorDimension {
            expected: dim,
            received: vectors.len() % dim,
        });
    }
    Ok(vectors.len() / dim)
}

/// Each partition's first position, plus the end, for partitions of `sizes` in order.
fn partition_starts(sizes: &[usize]) -> Vec<u32> {
    let mut starts = Vec::with_capacity(sizes.len() + 1);
    let mut start = 0u32;
    for size in sizes {
        starts.push(start);
        start += u32::try_from(*size).expect("rows checked by the partitioning");
    }
    starts.push(start);
    starts
}

#[allow(clippy::needless_pass_by_value)] // the shape map_err hands over
fn bad_index(error: sagitta_storage::codec::DecodeError) -> IndexError {
    IndexError::format(format!("disk index: {error}"))
}

/// The partition table (starts and centroids) and the extents; the addresses come with
/// the vectors.
fn decode_tables(reader: &mut Reader, dim: usize) -> Result<Tables> {
    let partitions = reader
        .count_u32("partition count", 4 + dim * 4)
        .map_err(bad_index)?;
    let starts: Vec<u32> = (0..=partitions)
        .map(|_| reader.u32("partition start"))
        .collect::<std::result::Result<_, _>>()
        .map_err(bad_index)?;
    let centroids: Vec<f32> = f32s(
        reader
            .bytes(partitions * dim * 4, "centroids")
            .map_err(bad_index)?,
    )
    .collect();
    let count = reader.count_u32("extent count", 16).map_err(bad_index)?;
    let extents = (0..count)
        .map(|_| {
            Ok(Extent {
                records: reader.u64("extent records")?,
                pages: reader.u64("extent pages")?,
            })
        })
        .collect::<std::result::Result<_, _>>()
        .map_err(bad_index)?;
    Ok(Tables {
        centroids,
        starts,
        extents,
        addresses: Vec::new(),
    })
}

/// The shape of one vector's entry in the RAM part.
#[derive(Clone, Copy)]
struct VectorLayout {
    words: usize,
    extra_bits: u32,
    extra_words: usize,
    /// Bytes before the code: norm, fit, squared norm and (with extended codes) their fit.
    floats: usize,
    bytes: usize,
}

impl VectorLayout {
    fn new(quantizer: &Rabitq, extra_bits: u32) -> VectorLayout {
        let words = quantizer.code_words();
        let extra_words = quantizer.extra_words(extra_bits);
        let floats = if extra_bits > 0 { 16 } else { 12 };
        VectorLayout {
            words,
            extra_bits,
            extra_words,
            floats,
            bytes: 8 + floats + (words + extra_words) * 8,
        }
    }
}

/// The per-vector entries of the RAM part: record addresses, factors, squared norms, codes
/// and extended codes.
fn decode_vectors(body: &[u8], layout: VectorLayout) -> (Encoded, Vec<f32>, Vec<Address>) {
    let count = body.len() / layout.bytes;
    let mut encoded = Encoded {
        codes: Vec::with_capacity(count * layout.words),
        factors: Vec::with_capacity(count),
        extra_bits: layout.extra_bits,
        extra_codes: Vec::with_capacity(count * layout.extra_words),
        extra_fits: Vec::with_capacity(if layout.extra_bits > 0 { count } else { 0 }),
    };
    let mut sq_norms = Vec::with_capacity(count);
    let mut addresses = Vec::with_capacity(count);
    for entry in body.chunks_exact(layout.bytes) {
        let (address, entry) = entry.split_at(8);
        addresses.push(Address(u64s(address).next().expect("8 bytes")));
        let mut values = f32s(&entry[..layout.floats]);
        let mut next = || values.next().expect("the floats of an entry");
        encoded.factors.push(CodeFactors {
            norm: next(),
            fit: next(),
        });
        sq_norms.push(next());
        if layout.extra_bits > 0 {
            encoded.extra_fits.push(next());
        }
        let (code, extra) = entry[layout.floats..].split_at(layout.words * 8);
        encoded.codes.extend(u64s(code));
        encoded.extra_codes.extend(u64s(extra));
    }
    (encoded, sq_norms, addresses)
}

/// The [`ScanTerms`] of every code.
fn scan_terms(quantizer: &Rabitq, codes: &[u64], factors: &[CodeFactors]) -> Vec<ScanTerms> {
    codes
        .chunks_exact(quantizer.code_words())
        .zip(factors)
        .map(|(code, factors)| quantizer.scan_terms(code, *factors))
        .collect()
}

/// Every centroid rotated, one after another.
fn rotate_all(quantizer: &Rabitq, centroids: &[f32]) -> Vec<f32> {
    centroids
        .chunks_exact(quantizer.dim())
        .flat_map(|centroid| quantizer.rotate(centroid))
        .collect()
}

fn metric_code(metric: Metric) -> u8 {
    match metric {
        Metric::L2 => 0,
        Metric::Dot | Metric::Cosine => 1,
    }
}

/// The partition table of an index and where its records lie.
struct Tables {
    centroids: Vec<f32>,
    starts: Vec<u32>,
    extents: Vec<Extent>,
    addresses: Vec<Address>,
}

/// The codes of every position (stored parts only).
struct Encoded {
    codes: Vec<u64>,
    factors: Vec<CodeFactors>,
    extra_bits: u32,
    extra_codes: Vec<u64>,
    extra_fits: Vec<f32>,
}

impl Encoded {
    fn empty(extra_bits: u32) -> Encoded {
        Encoded {
            codes: Vec::new(),
            factors: Vec::new(),
            extra_bits,
            extra_codes: Vec::new(),
            extra_fits: Vec::new(),
        }
    }

    /// `more` after these (positions that follow).
    fn append(&mut self, more: Encoded) {
        self.codes.extend(more.codes);
        self.factors.extend(more.factors);
        self.extra_codes.extend(more.extra_codes);
        self.extra_fits.extend(more.extra_fits);
    }
}

/// One partition's share of [`Encoded`]'s vectors, filled by whichever thread takes it.
struct EncodeSlot<'a> {
    codes: &'a mut [u64],
    factors: &'a mut [CodeFactors],
    extra_codes: &'a mut [u64],
    extra_fits: &'a mut [f32],
    sq_norms: &'a mut [f32],
}

/// Codes and squared norms of every position (of the vectors as the records store them),
/// partition by partition, on `params.threads` threads.
fn encode_all(
    quantizer: &Rabitq,
    vectors: &[f32],
    centroids: &[f32],
    members: &[Vec<u32>],
    params: DiskParams,
) -> Result<(Encoded, Vec<f32>)> {
    let (dim, words) = (quantizer.dim(), quantizer.code_words());
    let extra_words = quantizer.extra_words(params.extra_bits);
    let total: usize = members.iter().map(Vec::len).sum();
    let unit = CodeFactors {
        norm: 0.0,
        fit: 1.0,
    };
    let extra_total = if params.extra_bits > 0 { total } else { 0 };
    let mut encoded = Encoded {
        codes: vec![0u64; total * words],
        factors: vec![unit; total],
        extra_bits: params.extra_bits,
        extra_codes: vec![0u64; total * extra_words],
        extra_fits: vec![1.0; extra_total],
    };
    let mut sq_norms = vec![0.0f32; total];
    let slots = encode_slots(&mut encoded, &mut sq_norms, members, words, extra_words);
    let threads = effective_threads(params.threads, members.len());
    for_each_chunk(members.len(), 1, threads, |start, end| {
        let mut scratch = vec![0.0f32; quantizer.padded_dim()];
        let mut stored = Vec::with_capacity(dim);
        for partition in start..end {
            let centroid = &centroids[partition * dim..(partition + 1) * dim];
            let mut slot = slots[partition].lock();
            for (index, row) in members[partition].iter().enumerate() {
                let vector = &vectors[*row as usize * dim..(*row as usize + 1) * dim];
                let vector = params.element.stored(vector, &mut stored);
                slot.sq_norms[index] = vector.iter().map(|v| v * v).sum();
                let code = &mut slot.codes[index * words..(index + 1) * words];
                slot.factors[index] = quantizer.encode(vector, centroid, &mut scratch, code);
                if params.extra_bits > 0 {
                    let planes = &mut slot.extra_codes[index * extra_words..][..extra_words];
                    slot.extra_fits[index] =
                        quantizer.encode_extra(&scratch, params.extra_bits, planes);
                }
            }
        }
        Ok::<(), IndexError>(())
    })?;
    drop(slots);
    Ok((encoded, sq_norms))
}

/// [`Encoded`]'s vectors split into one slot a partition.
fn encode_slots<'a>(
    encoded: &'a mut Encoded,
    sq_norms: &'a mut [f32],
    members: &[Vec<u32>],
    words: usize,
    extra_words: usize,
) -> Vec<parking_lot::Mutex<EncodeSlot<'a>>> {
    let extra = usize::from(encoded.extra_bits > 0);
    let mut slots = Vec::with_capacity(members.len());
    let mut codes = encoded.codes.as_mut_slice();
    let mut factors = encoded.factors.as_mut_slice();
    let mut extra_codes = encoded.extra_codes.as_mut_slice();
    let mut extra_fits = encoded.extra_fits.as_mut_slice();
    let mut norms = sq_norms;
    for rows in members {
        let count = rows.len();
        let (code_part, code_rest) = codes.split_at_mut(count * words);
        let (factor_part, factor_rest) = factors.split_at_mut(count);
        let (extra_part, extra_rest) = extra_codes.split_at_mut(count * extra_words);
        let (fit_part, fit_rest) = extra_fits.split_at_mut(count * extra);
        let (norm_part, norm_rest) = norms.split_at_mut(count);
        slots.push(parking_lot::Mutex::new(EncodeSlot {
            codes: code_part,
            factors: factor_part,
            extra_codes: extra_part,
            extra_fits: fit_part,
            sq_norms: norm_part,
        }));
        (codes, factors, extra_codes, extra_fits) = (code_rest, factor_rest, extra_rest, fit_rest);
        norms = norm_rest;
    }
    slots
}

/// Records on pages, found by position: a disk index's, or a file of rows in row order
/// ([`RowRecords`]).
trait RecordSet {
    fn layout(&self) -> RecordLayout;
    /// The record's first page id, its page count and its byte offset in the first page.
    fn location(&self, position: u32) -> (u64, usize, usize);
}

impl RecordSet for DiskIndex {
    fn layout(&self) -> RecordLayout {
        self.layout
    }
    fn location(&self, position: u32) -> (u64, usize, usize) {
        self.record_location(position)
    }
}

impl RecordSet for RowRecords {
    fn layout(&self) -> RecordLayout {
        self.layout
    }
    fn location(&self, position: u32) -> (u64, usize, usize) {
        RowRecords::location(self, position)
    }
}

impl RowRecords {
    /// The rows `rows`, read through `reader` (each page read once, every page checked).
    pub fn read(&self, rows: &[u32], reader: &dyn PageReader) -> Result<Vec<Vec<f32>>> {
        if let Some(row) = rows.iter().find(|row| **row as usize >= self.rows) {
            return Err(IndexError::format(format!(
                "row {row} is beyond the {} rows of the records file",
                self.rows
            )));
        }
        let pages = Pages::read(self, rows, reader)?;
        Ok(rows.iter().map(|row| pages.record(self, *row)).collect())
    }
}

/// Pages read for a set of positions, checked, keyed by page number.
struct Pages {
    pages: std::collections::HashMap<u64, Arc<Page>>,
}

impl Pages {
    fn new() -> Pages {
        Pages {
            pages: std::collections::HashMap::new(),
        }
    }

    fn read(index: &dyn RecordSet, positions: &[u32], reader: &dyn PageReader) -> Result<Pages> {
        let mut pages = Pages::new();
        pages.add(index, positions, reader)?;
        Ok(pages)
    }

    /// Reads the pages of `positions` not read yet; returns how many were read.
    fn add(
        &mut self,
        index: &dyn RecordSet,
        positions: &[u32],
        reader: &dyn PageReader,
    ) -> Result<usize> {
        let mut wanted: Vec<u64> = Vec::new();
        for position in positions {
            let (first, count, _) = index.location(*position);
            wanted.extend((first..first + count as u64).filter(|p| !self.pages.contains_key(p)));
        }
        wanted.sort_unstable();
        wanted.dedup();
        if wanted.is_empty() {
            return Ok(0);
        }
        let read = reader.read(&wanted)?;
        if read.len() != wanted.len() {
            return Err(IndexError::format("the page reader returned too few pages"));
        }
        for (id, page) in wanted.iter().zip(read) {
            check_page(&page, split_page_id(*id).1)?;
            self.pages.insert(*id, page);
        }
        Ok(wanted.len())
    }

    fn record(&self, index: &dyn RecordSet, position: u32) -> Vec<f32> {
        let (first, count, offset) = index.location(position);
        let pages: Vec<&Page> = (first..first + count as u64)
            .map(|page| self.pages[&page].as_ref())
            .collect();
        let layout = index.layout();
        let mut out = Vec::with_capacity(layout.dim);
        layout.decode(&pages, offset, &mut out);
        out
    }
}

mod search;
