//! Bulk import: a new collection built straight into one segment per shard (no log).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sagitta_index::hnsw::AddProgress;
use sagitta_index::IndexError;
use sagitta_storage::fs::FileSystem;
use sagitta_storage::manifest;

use crate::error::{EngineError, Result};
use crate::payload_index::PayloadSchema;
use crate::point::{Distance, Point, PointId};
use crate::shard::Shard;
use crate::spaces::VectorSpaces;

use super::config::{CollectionConfig, SegmentKindName};
use super::{shard_index, shard_path, Collection};

/// What a bulk import reads: whole points, or ids whose vectors lie row-major in a slice
/// the caller lends (no payloads). A disk collection of one shard and no Cosine
/// normalization builds its records straight from that slice, so a memory-mapped file
/// larger than RAM imports without being copied; every other import makes points of it.
#[derive(Debug)]
pub enum ImportSource<'a> {
    Points(Vec<Point>),
    Rows {
        ids: Vec<PointId>,
        /// `ids.len() × dim` values.
        vectors: &'a [f32],
    },
}

impl From<Vec<Point>> for ImportSource<'_> {
    fn from(points: Vec<Point>) -> Self {
        ImportSource::Points(points)
    }
}

impl ImportSource<'_> {
    /// The rows as points (their vectors copied).
    fn into_points(self, dim: usize) -> Result<Vec<Point>> {
        match self {
            ImportSource::Points(points) => Ok(points),
            ImportSource::Rows { ids, vectors } => {
                check_rows(&ids, vectors, dim)?;
                Ok(ids
                    .into_iter()
                    .zip(vectors.chunks_exact(dim))
                    .map(|(id, vector)| Point {
                        id,
                        vector: vector.to_vec(),
                        payload: None,
                        side: Vec::new(),
                    })
                    .collect())
            }
        }
    }
}

/// `vectors` must hold `dim` values for each id.
fn check_rows(ids: &[PointId], vectors: &[f32], dim: usize) -> Result<()> {
    if vectors.len() != ids.len() * dim {
        return Err(EngineError::RowsMismatch {
            ids: ids.len(),
            values: vectors.len(),
            dim,
        });
    }
    Ok(())
}

/// What a bulk import wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImportReport {
    /// Distinct points imported.
    pub points: usize,
    pub segments: usize,
    /// Bytes of every file written (segments and manifests).
    pub bytes_written: u64,
}

/// Follows a bulk import from other threads, and stops it: share one with
/// [`Collection::import_with_progress`] (or `Database::import_collection_with_progress`)
/// and poll [`ImportProgress::get`]. Reading costs the import nothing; the build pays one
/// relaxed atomic add and load per row.
#[derive(Debug, Default)]
pub struct ImportProgress {
    rows: AddProgress,
    total: AtomicUsize,
}

impl ImportProgress {
    /// Nothing done yet, not cancelled.
    pub fn new() -> ImportProgress {
        ImportProgress::default()
    }

    /// `(rows linked into HNSW graphs so far, rows to import)`, summed over every shard.
    /// `total` is 0 until the points are read (repeated ids counted once), then the number
    /// of distinct points; `done` grows to it as the graphs are built, the long phase.
    /// The files are written after `done` reaches `total`: the import has finished only
    /// when its call returns.
    pub fn get(&self) -> (usize, usize) {
        (self.rows.linked(), self.total.load(Ordering::Relaxed))
    }

    /// Stops the import: it returns [`EngineError::Cancelled`] as soon as the rows being
    /// linked are done (or, later, before it publishes anything) and leaves no collection.
    /// An import already published is not undone. Cannot be undone.
    pub fn cancel(&self) {
        self.rows.cancel();
    }

    /// Whether [`ImportProgress::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.rows.is_cancelled()
    }

    /// [`EngineError::Cancelled`] once cancelled.
    pub(crate) fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            return Err(EngineError::Cancelled {
                operation: "import",
            });
        }
        Ok(())
    }
}

/// Whether rows can be built from where they lie: a disk collection of one shard whose
/// vectors need no normalization (f16 rounding is the records' own).
fn imports_in_place(config: &CollectionConfig) -> bool {
    config.storage.segment_kind == SegmentKindName::Disk
        && config.shard_count == 1
        && config.distance != Distance::Cosine
}

/// A cancelled segment build is a cancelled import, not an index failure.
pub(super) fn import_error(error: EngineError) -> EngineError {
    match error {
        EngineError::Index(IndexError::Cancelled) => EngineError::Cancelled {
            operation: "import",
        },
        other => other,
    }
}

impl Collection {
    /// Bulk import: writes a new collection in `directory` (which must hold none) whose
    /// shards each hold their share of `points` as one sealed HNSW segment, bypassing the
    /// write-ahead log — segment files first, shard manifests next, the collection manifest
    /// last, so a crash at any point leaves no collection (all or nothing). Every point is
    /// validated first; of points sharing an id the last wins.
    pub fn import(
        fs: &dyn FileSystem,
        directory: &Path,
        config: CollectionConfig,
        points: Vec<Point>,
    ) -> Result<(Collection, ImportReport)> {
        Collection::import_with_progress(fs, directory, config, points, &ImportProgress::new())
    }

    /// [`Collection::import`], followed (and cancellable) through `progress`. A cancelled
    /// import returns [`EngineError::Cancelled`] before the collection manifest is
    /// published, so there is no collection; files it wrote stay until removed
    /// ([`Collection::remove_files`]).
    pub fn import_with_progress<'a>(
        fs: &dyn FileSystem,
        directory: &Path,
        config: CollectionConfig,
        source: impl Into<ImportSource<'a>>,
        progress: &ImportProgress,
    ) -> Result<(Collection, ImportReport)> {
        let spaces = VectorSpaces::default();
        Collection::import_with_spaces(fs, directory, config, spaces, source, progress)
    }

    /// [`Collection::import_with_progress`] of a collection with named vectors `spaces`
    /// (as [`Collection::create_with_spaces`]): the points carry their side vectors
    /// (sparse vectors, multivectors), built into each segment's own indexes.
    pub fn import_with_spaces<'a>(
        fs: &dyn FileSystem,
        directory: &Path,
        config: CollectionConfig,
        spaces: VectorSpaces,
        source: impl Into<ImportSource<'a>>,
        progress: &ImportProgress,
    ) -> Result<(Collection, ImportReport)> {
        config.validate()?;
        config.check_spaces(&spaces)?;
        if manifest::load(fs, directory)?.is_some() {
            return Err(EngineError::CollectionExists {
                path: directory.display().to_string(),
            });
        }
        let spaces = Arc::new(spaces);
        match source.into() {
            ImportSource::Rows { ids, vectors } if imports_in_place(&config) => {
                Collection::import_in_place(fs, directory, config, ids, vectors, progress)
            }
            source => {
                let points = source.into_points(config.dim)?;
                Collection::import_points(fs, directory, (config, spaces), points, progress)
            }
        }
    }

    fn import_points(
        fs: &dyn FileSystem,
        directory: &Path,
        (config, spaces): (CollectionConfig, Arc<VectorSpaces>),
        points: Vec<Point>,
        progress: &ImportProgress,
    ) -> Result<(Collection, ImportReport)> {
        let mut last_of: HashMap<PointId, usize> = HashMap::with_capacity(points.len());
        for (position, point) in points.iter().enumerate() {
            last_of.insert(point.id, position);
        }
        progress.total.store(last_of.len(), Ordering::Relaxed);
        let mut per_shard: Vec<Vec<Point>> = vec![Vec::new(); config.shard_count];
        for (position, point) in points.into_iter().enumerate() {
            if last_of[&point.id] == position {
                let point = config.prepare(&spaces, point)?;
                per_shard[shard_index(&point.id, config.shard_count)].push(point);
            }
        }
        fs.create_dir_all(directory)?;
        let mut report = ImportReport {
            points: last_of.len(),
            segments: per_shard.iter().filter(|points| !points.is_empty()).count(),
            bytes_written: 0,
        };
        // One shard at a time, each built by its node's cores (a build uses every core
        // its thread may run on) into memory first touched there.
        let mut shards = Vec::with_capacity(config.shard_count);
        let storage = super::shard_storage(&config, &spaces, &[]);
        let machine = crate::machine::Machine::detected();
        let placement = machine.place(config.storage.placement, config.shard_count);
        for (index, points) in per_shard.into_iter().enumerate() {
            progress.check()?;
            let storage = storage.for_shard(&placement, index, config.storage.vectors_far);
            let (shard, written) = machine
                .on_pool_cpus(placement.pools[index], || {
                    Shard::write_imported(
                        fs,
                        &shard_path(directory, index),
                        points,
                        config.dim,
                        config.distance,
                        &storage,
                        &progress.rows,
                    )
                })
                .map_err(import_error)?;
            shards.push(shard);
            report.bytes_written += written;
        }
        Collection::publish_import(fs, directory, (config, spaces), shards, report, progress)
    }

    /// The import of rows a disk collection builds from where they lie (see
    /// [`ImportSource`]): each row validated, no copy made. Repeated ids (the last must
    /// win) go the way of points.
    fn import_in_place(
        fs: &dyn FileSystem,
        directory: &Path,
        config: CollectionConfig,
        ids: Vec<PointId>,
        vectors: &[f32],
        progress: &ImportProgress,
    ) -> Result<(Collection, ImportReport)> {
        check_rows(&ids, vectors, config.dim)?;
        let mut seen = HashSet::with_capacity(ids.len());
        if !ids.iter().all(|id| seen.insert(*id)) {
            let points = ImportSource::Rows { ids, vectors }.into_points(config.dim)?;
            let spaces = Arc::new(VectorSpaces::default());
            return Collection::import_points(fs, directory, (config, spaces), points, progress);
        }
        drop(seen);
        for (id, vector) in ids.iter().zip(vectors.chunks_exact(config.dim)) {
            config.check_vector(vector, || EngineError::point(id))?;
        }
        progress.total.store(ids.len(), Ordering::Relaxed);
        let points: Vec<Point> = ids
            .into_iter()
            .map(|id| Point {
                id,
                vector: Vec::new(),
                payload: None,
                side: Vec::new(),
            })
            .collect();
        fs.create_dir_all(directory)?;
        let mut report = ImportReport {
            points: points.len(),
            segments: usize::from(!points.is_empty()),
            bytes_written: 0,
        };
        progress.check()?;
        let (shard, written) = Shard::write_imported_rows(
            fs,
            &shard_path(directory, 0),
            points,
            vectors,
            config.dim,
            config.distance,
            &super::shard_storage(&config, &Arc::new(VectorSpaces::default()), &[]),
            &progress.rows,
        )
        .map_err(import_error)?;
        report.bytes_written += written;
        let spaces = Arc::new(VectorSpaces::default());
        Collection::publish_import(
            fs,
            directory,
            (config, spaces),
            vec![shard],
            report,
            progress,
        )
    }

    /// The last step of every import: the collection manifest, published once every
    /// shard is written.
    fn publish_import(
        fs: &dyn FileSystem,
        directory: &Path,
        (config, spaces): (CollectionConfig, Arc<VectorSpaces>),
        shards: Vec<Shard>,
        mut report: ImportReport,
        progress: &ImportProgress,
    ) -> Result<(Collection, ImportReport)> {
        fs.sync_dir(directory)?;
        let schema = PayloadSchema::new();
        let encoded = config.encode_with(&schema, &spaces);
        progress.check()?;
        manifest::publish(fs, directory, &encoded)?;
        report.bytes_written += encoded.len() as u64;
        Ok((
            Collection::assemble(config, spaces, (schema, String::new()), shards, directory),
            report,
        ))
    }
}
