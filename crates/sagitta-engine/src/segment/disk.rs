//! The disk segment kind (issue 15): a [`DiskIndex`] — balanced partitions with RaBitQ
//! codes in RAM — over full vectors kept on disk and read a page at a time through the
//! file system's page reader (io_uring with O_DIRECT on a real disk) and the collection's
//! page cache. RAM holds the codes, ids, payloads and tombstones; a query reads only the
//! records whose error bound lets them still win.
//!
//! Files: `segment-<id>.ivf` (the index's RAM part, framed), its records files
//! (checksummed 4 KiB pages, [`sagitta_index::disk::records`]) and the `.points` and
//! `.tomb-*` files every kind has (docs/format.md, "Disk segment"). A build writes one
//! records file, `segment-<id>.records`; a seal *appends* a frozen buffer to the largest
//! disk segment ([`AppendHost`], issue 15 §5): the new segment `n` reads the host's
//! records files and its own `segment-<n>.records`, holding only the appended vectors, and
//! replaces the host when the seal commits. The shard manifest lists each segment's
//! records files, so files still read are never removed with the segment that wrote them.
//!
//! Positions follow the index's partition order; a build lists the points in that order.
//! Deletes are marked in a [`DeletedSet`]; no write buffer joins a disk segment (it has
//! no graph).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sagitta_index::disk::{DiskHit, DiskIndex, DiskParams, SearchStats, Source};
use sagitta_index::hnsw::AddProgress;
use sagitta_index::IndexError;
use sagitta_storage::codec::{frame, unframe, Writer};
use sagitta_storage::fs::{FileSystem, StreamedFile};
use sagitta_storage::pageio::{PageCache, PAGE_BYTES};

use super::hnsw::metric;
use super::listing::{
    corrupt, read_listed, read_points, read_tombstones, write_points, DeletedSet, Listing,
};
use super::records::{read_error, CachedReader, RecordsFile};
use super::{
    disk_index_path, records_path, AppendHost, Appended, SegmentKind, SegmentKindName, SegmentRead,
    SegmentShape, SegmentWrite,
};
use crate::error::{EngineError, Result};
use crate::filter::Filter;
use crate::point::{Point, PointId};
use crate::query::Strategy;
use crate::spaces::SpaceSlice;

const INDEX_MAGIC: &[u8; 8] = b"SAGDISK1";
/// Partitions probed per unit of search beam: `hnsw_ef` 128 (the default beam) probes 32.
const BEAM_PER_PROBE: usize = 4;
/// Pages' worth of records reranked at most per unit of search beam: `hnsw_ef` 128 reranks
/// at most 256 pages' worth (256 records at 768-d, 256 × 31 at 32-d; fewer when the bound
/// rules the rest out).
const RERANK_PER_BEAM: usize = 2;
/// Positions whose vectors a merge reads at once.
const READ_CHUNK: usize = 1_024;
/// Most records files a segment reads before a seal stops appending to it (each append
/// adds one): the next seal builds a segment of its own, and the optimizer's merges bring
/// the count back to one.
const MAX_RECORD_FILES: usize = 64;
/// An append rewrites the host's `.ivf` and `.points` whole, so it waits until the new
/// points are at least this fraction (1/8) of the host: at most ~9 bytes of index and
/// listing rewritten per new byte, as the HNSW host join's half-size rule bounds its
/// graph rewrites. Smaller seals build segments of their own, and the optimizer appends
/// those to the host once they add up ([`APPEND_AMORTIZATION`] in the shard's policy).
pub(crate) const APPEND_AMORTIZATION: usize = 8;

pub(crate) struct DiskSegment {
    id: u64,
    index: DiskIndex,
    /// The index's extents, in its order.
    extents: Vec<Arc<RecordsFile>>,
    cache: Arc<PageCache>,
    listing: Listing,
    deleted: DeletedSet,
    file_bytes: u64,
}

impl DiskSegment {
    fn reader(&self) -> CachedReader<'_> {
        CachedReader {
            files: &self.extents,
            cache: &self.cache,
        }
    }

    fn read_error(&self, error: IndexError) -> EngineError {
        read_error(&self.extents, error)
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

    /// The index's records files `files` (one an extent, in order), each checked against
    /// the index: its length and header page. `open` are files already open (a host's),
    /// shared instead of opened again.
    fn open_records(
        fs: &dyn FileSystem,
        stripes: &[PathBuf],
        files: &[u64],
        index: &DiskIndex,
        open: &[Arc<RecordsFile>],
    ) -> Result<Vec<Arc<RecordsFile>>> {
        if files.len() != index.extents().len() {
            return Err(corrupt(
                &stripes[0],
                &format!(
                    "the shard manifest lists {} records files, the index has {} extents",
                    files.len(),
                    index.extents().len()
                ),
            ));
        }
        let mut extents = Vec::with_capacity(files.len());
        for (extent, file) in files.iter().enumerate() {
            if let Some(shared) = open.iter().find(|shared| shared.file == *file) {
                extents.push(Arc::clone(shared));
                continue;
            }
            let pages = index.extents()[extent].pages;
            extents.push(RecordsFile::open(fs, stripes, *file, pages, |header| {
                index.check_records_header(extent, header)
            })?);
        }
        Ok(extents)
    }

    fn assemble(
        id: u64,
        index: DiskIndex,
        extents: Vec<Arc<RecordsFile>>,
        points: Vec<Point>,
        shape: &SegmentShape<'_>,
        file_bytes: u64,
    ) -> DiskSegment {
        let len = points.len();
        DiskSegment {
            id,
            index,
            extents,
            cache: Arc::clone(shape.page_cache),
            listing: Listing::new(points, shape.schema),
            deleted: DeletedSet::new(len),
            file_bytes,
        }
    }

    /// Writes the index's RAM part (`segment-<id>.ivf`, fsynced); returns its bytes.
    fn write_index(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        index: &DiskIndex,
    ) -> Result<u64> {
        let mut encoded = Writer::new();
        index.encode(&mut encoded);
        let encoded = frame(INDEX_MAGIC, encoded.as_bytes());
        fs.write_synced(&disk_index_path(directory, id), &encoded)?;
        Ok(encoded.len() as u64)
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
            partition_size: shape.partition_size,
            ..DiskParams::default()
        };
        // one records file a stripe, partition p on stripe p mod N
        let files: Vec<u64> = (0..shape.stripes.len())
            .map(|stripe| super::striped_file(id, stripe))
            .collect();
        let mut outs = files
            .iter()
            .map(|file| {
                Ok(StreamedFile::create(
                    fs,
                    &records_path(shape.stripes, *file)?,
                )?)
            })
            .collect::<Result<Vec<StreamedFile>>>()?;
        let mut writers: Vec<&mut dyn std::io::Write> = outs
            .iter_mut()
            .map(|out| out as &mut dyn std::io::Write)
            .collect();
        let built = DiskIndex::build_striped(
            vectors,
            shape.dim,
            metric(shape.distance),
            params,
            &mut writers,
        );
        drop(writers);
        if let Some(failure) = outs.iter_mut().find_map(StreamedFile::take_failure) {
            return Err(failure.into());
        }
        let (index, order) = built?;
        let mut records_bytes = 0;
        for out in outs {
            records_bytes += out.finish()?;
        }
        let index_bytes = DiskSegment::write_index(fs, directory, id, &index)?;
        let mut slots: Vec<Option<Point>> = points.into_iter().map(Some).collect();
        let listing = order
            .iter()
            .map(|row| slots[*row as usize].take().expect("a permutation"))
            .collect();
        let (listing, points_bytes) = write_points(fs, directory, id, listing)?;
        if let Some(progress) = progress {
            progress.advance(listing.len());
        }
        let extents = DiskSegment::open_records(fs, shape.stripes, &files, &index, &[])?;
        let file_bytes = records_bytes + index_bytes + points_bytes;
        Ok(DiskSegment::assemble(
            id, index, extents, listing, shape, file_bytes,
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
        let vectors = super::take_vectors(&mut points, shape.dim);
        DiskSegment::build_rows(fs, directory, id, points, &vectors, shape, progress)
    }

    fn load(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        record_files: &[u64],
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
        let extents = DiskSegment::open_records(fs, shape.stripes, record_files, &index, &[])?;
        let file_bytes =
            bytes.len() as u64 + points_bytes + index.record_pages() * PAGE_BYTES as u64;
        let segment = DiskSegment::assemble(id, index, extents, points, shape, file_bytes);
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

    fn record_files(&self) -> Vec<u64> {
        self.extents.iter().map(|extent| extent.file).collect()
    }

    fn reclaimable(&self) -> (usize, usize) {
        let dead = usize::try_from(self.index.dead_records()).unwrap_or(usize::MAX);
        (self.deleted_count() + dead, self.len() + dead)
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
        _space: SpaceSlice,
        strategy: Strategy,
    ) -> Result<Vec<(f32, Point)>> {
        let candidates = filter.and_then(|f| self.listing.candidates(f));
        let deleted = self.is_deleted();
        let selective = self
            .listing
            .is_selective(filter, candidates.as_ref(), &deleted, 0);
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

    fn append_host(&self) -> Option<&dyn AppendHost> {
        Some(self)
    }
}

impl AppendHost for DiskSegment {
    /// A host at least half the size of what it takes (against a much smaller host, a
    /// build of their own partitions the points better) and at most
    /// [`APPEND_AMORTIZATION`] times it (the rewrite of the host's files is then paid
    /// for by enough new points).
    fn can_append(&self, points: usize) -> bool {
        let live = self.live_count();
        live.saturating_mul(2) >= points
            && points.saturating_mul(APPEND_AMORTIZATION) >= live
            && self.extents.len() < MAX_RECORD_FILES
    }

    /// [`DiskIndex::append`] of `points` to this segment's live points: the new vectors'
    /// records in `segment-<id>.records`, the index and listing rewritten.
    fn append(
        &self,
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        mut points: Vec<Point>,
        shape: &SegmentShape<'_>,
    ) -> Result<Appended> {
        let vectors = super::take_vectors(&mut points, shape.dim);
        let keep = |position: u32| !self.deleted.contains(position);
        // the new records on stripe id mod N: successive appends spread over the stripes
        let own = super::striped_file(id, (id % shape.stripes.len() as u64) as usize);
        let mut file = StreamedFile::create(fs, &records_path(shape.stripes, own)?)?;
        let appended = self.index.append(
            &keep,
            &vectors,
            &self.reader(),
            DiskParams {
                partition_size: shape.partition_size,
                ..DiskParams::default()
            },
            &mut file,
        );
        if let Some(failure) = file.take_failure() {
            return Err(failure.into());
        }
        let outcome = appended.map_err(|error| self.read_error(error))?;
        file.finish()?;
        let index_bytes = DiskSegment::write_index(fs, directory, id, &outcome.index)?;
        let mut added: Vec<Option<Point>> = points.into_iter().map(Some).collect();
        let mut carried = Vec::new();
        let listing = outcome
            .sources
            .iter()
            .map(|source| match source {
                Source::Kept(position) => {
                    let point = self.listing.point(*position, Vec::new());
                    carried.push((*position, point.id));
                    point
                }
                Source::Added(row) => added[*row as usize].take().expect("each row once"),
            })
            .collect();
        let (listing, points_bytes) = write_points(fs, directory, id, listing)?;
        // the host's files the new index still reads, then its own
        let files: Vec<u64> = outcome
            .kept_extents
            .iter()
            .map(|extent| self.extents[*extent].file)
            .chain([own])
            .collect();
        let index = outcome.index;
        let extents = DiskSegment::open_records(fs, shape.stripes, &files, &index, &self.extents)?;
        let file_bytes = index.record_pages() * PAGE_BYTES as u64 + index_bytes + points_bytes;
        let segment = DiskSegment::assemble(id, index, extents, listing, shape, file_bytes);
        Ok(Appended {
            segment: Arc::new(segment),
            carried,
        })
    }
}
