//! The disk segment kind (issue 15): a [`DiskIndex`] — balanced partitions with RaBitQ
//! codes in RAM — over full vectors kept on disk and read a page at a time through the
//! file system's page reader (io_uring with O_DIRECT on a real disk) and the collection's
//! page cache. RAM holds the codes, ids, payloads and tombstones; a query reads only the
//! records whose error bound lets them still win.
//!
//! Files: `segment-<id>.ivf` (the index's RAM part, framed), `segment-<id>.records`
//! (checksummed 4 KiB pages, [`sagitta_index::disk::records`]), and the `.points` and
//! `.tomb-*` files every kind has (docs/format.md, "Disk segment").
//!
//! Positions follow the index's partition order; a build lists the points in that order.
//! Deletes are marked in a [`DeletedSet`]; no write buffer joins a disk segment (it has
//! no graph), so a seal of a buffer builds a new one.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sagitta_index::disk::{DiskHit, DiskIndex, DiskParams, PageReader, RecordsHeader, SearchStats};
use sagitta_index::hnsw::AddProgress;
use sagitta_index::IndexError;
use sagitta_storage::codec::{frame, unframe, Writer};
use sagitta_storage::fs::{FileSystem, PageSource, StreamedFile};
use sagitta_storage::pageio::{Page, PageCache, PageKey, PAGE_BYTES};

use super::hnsw::metric;
use super::listing::{
    corrupt, read_listed, read_points, read_tombstones, write_points, DeletedSet, Listing,
};
use super::SegmentKindName;
use super::{disk_index_path, records_path, SegmentKind, SegmentRead, SegmentShape, SegmentWrite};
use crate::error::{EngineError, Result};
use crate::filter::Filter;
use crate::point::{Distance, Point, PointId};
use crate::query::Strategy;

const INDEX_MAGIC: &[u8; 8] = b"SAGDISK1";
/// Partitions probed per unit of search beam: `hnsw_ef` 128 (the default beam) probes 32.
const BEAM_PER_PROBE: usize = 4;
/// Pages' worth of records reranked at most per unit of search beam: `hnsw_ef` 128 reranks
/// at most 256 pages' worth (256 records at 768-d, 256 × 31 at 32-d; fewer when the bound
/// rules the rest out).
const RERANK_PER_BEAM: usize = 2;
/// Positions whose vectors a merge reads at once.
const READ_CHUNK: usize = 1_024;

/// Numbers the records files of the process for their page-cache keys.
static NEXT_CACHE_FILE: AtomicU64 = AtomicU64::new(0);

pub(crate) struct DiskSegment {
    id: u64,
    index: DiskIndex,
    records: Box<dyn PageSource>,
    cache: Arc<PageCache>,
    cache_file: u64,
    listing: Listing,
    deleted: DeletedSet,
    file_bytes: u64,
}

/// The records file read through the page cache.
struct CachedReader<'a> {
    segment: &'a DiskSegment,
}

impl PageReader for CachedReader<'_> {
    fn read(&self, pages: &[u64]) -> sagitta_index::error::Result<Vec<Arc<Page>>> {
        let segment = self.segment;
        let key = |page: u64| PageKey {
            file: segment.cache_file,
            page,
        };
        let mut found: Vec<Option<Arc<Page>>> = pages
            .iter()
            .map(|page| segment.cache.get(key(*page)))
            .collect();
        let missing: Vec<u64> = pages
            .iter()
            .zip(&found)
            .filter(|(_, hit)| hit.is_none())
            .map(|(page, _)| *page)
            .collect();
        if !missing.is_empty() {
            let buffers = segment
                .records
                .read_each(&missing)
                .map_err(|error| IndexError::Io {
                    operation: "reading records pages",
                    message: error.to_string(),
                })?;
            let mut read = missing.iter().zip(buffers).map(|(page, bytes)| {
                let bytes = Arc::new(bytes);
                segment.cache.insert(key(*page), Arc::clone(&bytes));
                bytes
            });
            for slot in found.iter_mut().filter(|slot| slot.is_none()) {
                *slot = read.next();
            }
        }
        Ok(found
            .into_iter()
            .map(|page| page.expect("every page found or read"))
            .collect())
    }
}

impl DiskSegment {
    fn reader(&self) -> CachedReader<'_> {
        CachedReader { segment: self }
    }

    /// A failed or damaged read, as the engine reports it: damage names the records file.
    fn read_error(&self, error: IndexError) -> EngineError {
        match error {
            IndexError::Format { reason } => corrupt(self.records.path(), &reason),
            other => EngineError::Index(other),
        }
    }

    fn is_deleted(&self) -> impl Fn(u32) -> bool + '_ {
        |position| self.deleted.contains(position)
    }

    fn live_position(&self, id: &PointId) -> Option<u32> {
        self.listing
            .position(id)
            .filter(|position| !self.deleted.contains(*position))
    }

    fn read_point(&self, position: u32) -> Result<Point> {
        let mut vectors = self
            .index
            .vectors(&[position], &self.reader())
            .map_err(|error| self.read_error(error))?;
        Ok(self.listing.point(position, vectors.remove(0)))
    }

    /// The index's records file: its header page checked against the index.
    fn open_records(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        index: &DiskIndex,
    ) -> Result<Box<dyn PageSource>> {
        let path = records_path(directory, id);
        let records = fs.open_pages(&path)?;
        if records.page_count() != index.record_pages() {
            return Err(corrupt(
                &path,
                &format!(
                    "{} whole pages, the index expects {}",
                    records.page_count(),
                    index.record_pages()
                ),
            ));
        }
        let header = records.read_each(&[0])?;
        RecordsHeader::decode(&header[0])
            .and_then(|header| index.check_records_header(0, &header))
            .map_err(|error| corrupt(&path, &error.to_string()))?;
        Ok(records)
    }

    fn assemble(
        id: u64,
        index: DiskIndex,
        records: Box<dyn PageSource>,
        points: Vec<Point>,
        shape: &SegmentShape<'_>,
        file_bytes: u64,
    ) -> DiskSegment {
        let len = points.len();
        DiskSegment {
            id,
            index,
            records,
            cache: Arc::clone(shape.page_cache),
            cache_file: NEXT_CACHE_FILE.fetch_add(1, Ordering::Relaxed),
            listing: Listing::new(points, shape.schema),
            deleted: DeletedSet::new(len),
            file_bytes,
        }
    }

    /// [`SegmentKind::build`] from `points` without their vectors (moved out, or never
    /// there: a bulk import's) and the vectors row-major in `vectors`, borrowed — a
    /// memory-mapped file larger than RAM builds without a copy.
    pub(crate) fn build_rows(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        points: Vec<Point>,
        vectors: &[f32],
        shape: &SegmentShape<'_>,
        progress: Option<&AddProgress>,
    ) -> Result<DiskSegment> {
        debug_assert_eq!(vectors.len(), points.len() * shape.dim);
        if progress.is_some_and(AddProgress::is_cancelled) {
            return Err(IndexError::Cancelled.into());
        }
        let params = DiskParams {
            element: shape.element,
            ..DiskParams::default()
        };
        let mut file = StreamedFile::create(fs, &records_path(directory, id))?;
        let built = DiskIndex::build(
            vectors,
            shape.dim,
            metric(shape.distance),
            params,
            &mut file,
        );
        if let Some(failure) = file.take_failure() {
            return Err(failure.into());
        }
        let (index, order) = built?;
        let records_bytes = file.finish()?;
        let mut encoded = Writer::new();
        index.encode(&mut encoded);
        let encoded = frame(INDEX_MAGIC, encoded.as_bytes());
        fs.write_synced(&disk_index_path(directory, id), &encoded)?;
        let mut slots: Vec<Option<Point>> = points.into_iter().map(Some).collect();
        let listing = order
            .iter()
            .map(|row| slots[*row as usize].take().expect("a permutation"))
            .collect();
        let (listing, points_bytes) = write_points(fs, directory, id, listing)?;
        if let Some(progress) = progress {
            progress.advance(listing.len());
        }
        let records = DiskSegment::open_records(fs, directory, id, &index)?;
        let file_bytes = records_bytes + encoded.len() as u64 + points_bytes;
        Ok(DiskSegment::assemble(
            id, index, records, listing, shape, file_bytes,
        ))
    }

    /// Results as the shard takes them: distance and point, the vector read by the search.
    fn points(&self, hits: Vec<DiskHit>) -> Vec<(f32, Point)> {
        hits.into_iter()
            .map(|hit| (hit.distance, self.listing.point(hit.position, hit.vector)))
            .collect()
    }
}

impl SegmentKind for DiskSegment {
    fn build(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        mut points: Vec<Point>,
        shape: &SegmentShape<'_>,
        progress: Option<&AddProgress>,
    ) -> Result<DiskSegment> {
        let mut vectors = Vec::with_capacity(points.len() * shape.dim);
        for point in &mut points {
            vectors.extend_from_slice(&std::mem::take(&mut point.vector));
        }
        DiskSegment::build_rows(fs, directory, id, points, &vectors, shape, progress)
    }

    fn load(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        tombstone_generation: Option<u64>,
        shape: &SegmentShape<'_>,
    ) -> Result<DiskSegment> {
        let path = disk_index_path(directory, id);
        let bytes = read_listed(fs, &path)?;
        let body =
            unframe(INDEX_MAGIC, &bytes).map_err(|error| corrupt(&path, &error.to_string()))?;
        let index = DiskIndex::decode(body).map_err(|error| corrupt(&path, &error.to_string()))?;
        if index.dim() != shape.dim || index.metric() != metric(shape.distance) {
            return Err(corrupt(
                &path,
                "dimension or metric differs from the collection's",
            ));
        }
        let (points, points_bytes) = read_points(fs, directory, id)?;
        if points.len() != index.len() {
            let path = super::points_path(directory, id);
            return Err(corrupt(&path, "point count differs from the index"));
        }
        let records = DiskSegment::open_records(fs, directory, id, &index)?;
        let file_bytes =
            bytes.len() as u64 + points_bytes + index.record_pages() * PAGE_BYTES as u64;
        let segment = DiskSegment::assemble(id, index, records, points, shape, file_bytes);
        if let Some(generation) = tombstone_generation {
            for position in read_tombstones(fs, directory, id, generation, segment.len())? {
                segment.deleted.insert(position);
            }
        }
        Ok(segment)
    }
}

impl SegmentRead for DiskSegment {
    fn id(&self) -> u64 {
        self.id
    }

    fn kind(&self) -> SegmentKindName {
        SegmentKindName::Disk
    }

    fn positions(&self) -> &Listing {
        &self.listing
    }

    fn deleted_count(&self) -> usize {
        self.deleted.count()
    }

    fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    fn ram_bytes(&self) -> u64 {
        (self.index.ram_bytes() + self.len().div_ceil(8)) as u64
    }

    fn get(&self, id: &PointId) -> Result<Option<Point>> {
        self.live_position(id)
            .map(|position| self.read_point(position))
            .transpose()
    }

    fn live_points(&self) -> Box<dyn Iterator<Item = Result<(u32, Point)>> + '_> {
        let len = u32::try_from(self.len()).expect("segment size");
        Box::new((0..len).step_by(READ_CHUNK).flat_map(move |start| {
            let end = start.saturating_add(READ_CHUNK as u32).min(len);
            let positions: Vec<u32> = (start..end)
                .filter(|position| !self.deleted.contains(*position))
                .collect();
            match self.index.vectors(&positions, &self.reader()) {
                Ok(vectors) => positions
                    .into_iter()
                    .zip(vectors)
                    .map(|(position, vector)| Ok((position, self.listing.point(position, vector))))
                    .collect::<Vec<_>>(),
                Err(error) => vec![Err(self.read_error(error))],
            }
        }))
    }

    fn is_deleted_at(&self, position: u32) -> bool {
        self.deleted.contains(position)
    }

    /// Top-`k` among live points passing `filter`, "lower is closer". A filter passing few
    /// points (see [`Listing::is_selective`]) or an exact strategy reads every passing
    /// record; otherwise the bound-driven search probes `⌈beam / 4⌉` partitions and reads
    /// at most `2 · beam` pages' worth of records.
    fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&Filter>,
        _distance: Distance,
        strategy: Strategy,
    ) -> Result<Vec<(f32, Point)>> {
        let candidates = filter.and_then(|f| self.listing.candidates(f));
        let deleted = self.is_deleted();
        let selective = self
            .listing
            .is_selective(filter, candidates.as_ref(), &deleted);
        let passes = |position: u32| self.listing.passes(position, filter, &deleted);
        let mut stats = SearchStats::default();
        let reader = self.reader();
        let hits = match strategy.beam(k).filter(|_| !selective) {
            Some(beam) => {
                let probes = beam.div_ceil(BEAM_PER_PROBE).max(1);
                let limit = beam
                    .saturating_mul(RERANK_PER_BEAM)
                    .saturating_mul(self.index.layout().per_page);
                self.index
                    .search_within(query, k, probes, limit, &passes, &reader, &mut stats)
            }
            None => {
                let positions: Vec<u32> = self
                    .listing
                    .positions_to_check(candidates)
                    .filter(|position| passes(*position))
                    .collect();
                self.index.exact(query, k, &positions, &reader, &mut stats)
            }
        };
        let hits = hits.map_err(|error| self.read_error(error))?;
        Ok(self.points(hits))
    }
}

impl SegmentWrite for DiskSegment {
    fn remove(&self, id: &PointId) {
        if let Some(position) = self.live_position(id) {
            self.deleted.insert(position);
        }
    }

    fn take(&self, id: &PointId) -> Result<Option<Point>> {
        let Some(position) = self.live_position(id) else {
            return Ok(None);
        };
        let point = self.read_point(position)?;
        self.deleted.insert(position);
        Ok(Some(point))
    }

    /// Deletes are marked only here (no shared graph): the count is always exact.
    fn recount_deleted(&self) {}
}
