//! The embedded database: `sagittadb.open(path)` → collections of points with ids,
//! vectors and JSON payloads, durable through each shard's write-ahead log.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::create_exception;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use sagitta_engine::collection::MAX_DIMENSION;
use sagitta_engine::database::DatabaseOptions;
use sagitta_engine::fusion::{fuse, FusedPage, Fusion, DEFAULT_RRF_K};
use sagitta_engine::{
    Collection as CoreCollection, CollectionConfig, Database as CoreDatabase, Datatype, Distance,
    EngineError, FieldType, Filter, Health, ImportProgress, ImportSource, PointId, ScoredPoint,
    SearchRequest, SegmentKindName, StorageConfig, Strategy, VectorSpace, VectorSpaces,
};
use sagitta_storage::fs::{FileSystem, OsFileSystem};

use crate::convert::{
    add_sparse, attach_sparse, hits_to_list, id_to_python, parse_filter, payload_text, point_dict,
    point_id, points_from_python, query_rows, rows_from_python, sparse_vector,
};
use crate::progress::Reporter;
use crate::{DimensionError, FormatError, InvalidParameterError, SagittaError};

create_exception!(
    _native,
    CollectionNotFoundError,
    SagittaError,
    "No collection of that name."
);
create_exception!(
    _native,
    PointNotFoundError,
    SagittaError,
    "A payload change named a point that does not exist (nothing was changed)."
);
create_exception!(
    _native,
    CollectionExistsError,
    SagittaError,
    "A collection of that name already exists."
);
create_exception!(
    _native,
    StorageError,
    SagittaError,
    "Reading or writing the database files failed."
);

/// The one table from engine errors to Python exceptions.
fn to_python_error(error: EngineError) -> PyErr {
    let message = error.to_string();
    match error {
        EngineError::WrongVectorDimension { .. } | EngineError::RowsMismatch { .. } => {
            DimensionError::new_err(message)
        }
        EngineError::NonFiniteValue { .. }
        | EngineError::VectorNormTooLarge { .. }
        | EngineError::PayloadTooLarge { .. }
        | EngineError::InvalidPayload { .. }
        | EngineError::ParameterOutOfRange { .. }
        | EngineError::BatchTooLarge { .. }
        | EngineError::InvalidCollectionName { .. }
        | EngineError::InvalidFilter { .. }
        | EngineError::InvalidPayloadIndex { .. }
        | EngineError::NameInUse { .. }
        | EngineError::InvalidVectors { .. }
        | EngineError::InvalidSettings { .. } => InvalidParameterError::new_err(message),
        EngineError::CollectionExists { .. } => CollectionExistsError::new_err(message),
        EngineError::CollectionNotFound { .. } | EngineError::AliasNotFound { .. } => {
            CollectionNotFoundError::new_err(message)
        }
        EngineError::Corrupt { .. } | EngineError::InvalidSnapshot { .. } => {
            FormatError::new_err(message)
        }
        EngineError::Storage(_) => StorageError::new_err(message),
        EngineError::Index(_) | EngineError::Cancelled { .. } | EngineError::Unavailable { .. } => {
            SagittaError::new_err(message)
        }
    }
}

fn parse_distance(name: &str) -> PyResult<Distance> {
    Distance::from_name(name)
        .map_err(|reason| InvalidParameterError::new_err(format!("`distance`: {reason}")))
}

/// The storage settings of a new collection (range checks are the engine's).
fn parse_storage(
    segment_kind: &str,
    page_cache_mb: usize,
    datatype: &str,
    partition_size: usize,
    on_disk: bool,
) -> PyResult<StorageConfig> {
    let segment_kind = SegmentKindName::parse(segment_kind).ok_or_else(|| {
        InvalidParameterError::new_err(format!(
            "`segment_kind` = {segment_kind:?}: expected \"hnsw\" or \"disk\""
        ))
    })?;
    let datatype = Datatype::parse(datatype).ok_or_else(|| {
        InvalidParameterError::new_err(format!(
            "`datatype` = {datatype:?}: expected \"float32\" or \"float16\""
        ))
    })?;
    Ok(StorageConfig {
        segment_kind,
        page_cache_mb,
        datatype,
        partition_size,
        vectors_on_disk: on_disk,
        graph: sagitta_engine::DEFAULT_GRAPH,
        placement: sagitta_engine::Placement::Spread,
        vectors_far: false,
    })
}

/// A database directory of named collections.
#[pyclass(module = "sagittadb")]
pub struct Database {
    inner: Arc<CoreDatabase>,
}

#[pymethods]
impl Database {
    /// Creates a collection. `distance`: "Cosine", "Dot" or "Euclid". `segment_kind`:
    /// "hnsw" (graph and vectors in RAM) or "disk" (codes in RAM, vectors read from disk);
    /// `page_cache_mb`: RAM for hot pages of disk segments. `datatype`: "float32", or
    /// "float16" (Qdrant's: every vector kept rounded to half precision; disk segments
    /// then read half the bytes). `partition_size`: vectors a disk segment's partition
    /// aims at (8 to 100,000; appends split partitions past twice it). `on_disk`
    /// (Qdrant's `vectors.on_disk`): HNSW segments keep their full vectors on disk, RAM
    /// holding the graph and its codes (searches re-score ~40 rows a query from disk).
    ///
    /// `sparse_vectors` (`{name: {"modifier": "idf"}}`, Qdrant's): sparse vectors beside
    /// the dense one, searched through an inverted index (`search_sparse`,
    /// `hybrid_search`); such a collection keeps its vectors in RAM (HNSW segments).
    #[pyo3(signature = (name, dim, distance = "Cosine", shard_number = 1, segment_kind = "hnsw", page_cache_mb = 64, datatype = "float32", partition_size = 1000, on_disk = false, sparse_vectors = None))]
    #[allow(clippy::too_many_arguments)]
    fn create_collection(
        &self,
        py: Python<'_>,
        name: &str,
        dim: usize,
        distance: &str,
        shard_number: usize,
        segment_kind: &str,
        page_cache_mb: usize,
        datatype: &str,
        partition_size: usize,
        on_disk: bool,
        sparse_vectors: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Collection> {
        let config = CollectionConfig {
            dim,
            distance: parse_distance(distance)?,
            shard_count: shard_number,
            storage: parse_storage(
                segment_kind,
                page_cache_mb,
                datatype,
                partition_size,
                on_disk,
            )?,
        };
        let spaces = match sparse_vectors.filter(|given| !given.is_none()) {
            Some(sparse) => with_sparse(&config, sparse)?,
            None => VectorSpaces::default(),
        };
        let config = if spaces.is_named() {
            config.named(&spaces)
        } else {
            config
        };
        let inner = py
            .allow_threads(|| {
                self.inner
                    .create_collection_with_spaces(name, config, spaces)
            })
            .map_err(to_python_error)?;
        Ok(Collection {
            name: name.to_string(),
            inner,
            _database: Arc::clone(&self.inner),
        })
    }

    /// Bulk import into a new collection: every point is validated, then each shard's
    /// share is built straight into one HNSW segment (no write-ahead log) and the
    /// collection appears all at once, fully indexed — or not at all, on any error or
    /// crash. Of repeated ids the last wins. Returns the collection.
    ///
    /// `progress` (see `sagittadb.progress`) is called on this thread with `(done,
    /// total)`: points linked into the graphs of the distinct points, about every 0.1 s
    /// while it changes, held below `total` while the files are written and ending with
    /// `(total, total)` once the collection exists. By default a tqdm bar when run
    /// interactively. An exception the callback raises, or `KeyboardInterrupt`, stops
    /// the import (within a few rows) and is raised once it has stopped: no collection
    /// is left (one that finished meanwhile, or whose last report raised, is dropped).
    ///
    /// `segment_kind`, `page_cache_mb`, `datatype`, `partition_size` and `on_disk` as for
    /// `create_collection`. A disk
    /// collection of one shard, Dot or Euclid, imported without payloads builds from
    /// `vectors` where they lie: a float32 `numpy.memmap` larger than RAM is not copied
    /// (so the array must not be written to, e.g. from `progress`, while the import runs).
    ///
    /// `sparse_vectors` as for `create_collection`, and `sparse` as for `upsert` (`{name:
    /// one sparse vector or None per point}`): each segment gets its inverted indexes.
    #[pyo3(signature = (name, ids, vectors, payloads = None, distance = "Cosine", shard_number = 1, progress = None, segment_kind = "hnsw", page_cache_mb = 64, datatype = "float32", partition_size = 1000, on_disk = false, sparse_vectors = None, sparse = None))]
    #[allow(clippy::too_many_arguments)]
    fn import_collection(
        &self,
        py: Python<'_>,
        name: &str,
        ids: &Bound<'_, PyAny>,
        vectors: &Bound<'_, PyAny>,
        payloads: Option<&Bound<'_, PyAny>>,
        distance: &str,
        shard_number: usize,
        progress: Option<PyObject>,
        segment_kind: &str,
        page_cache_mb: usize,
        datatype: &str,
        partition_size: usize,
        on_disk: bool,
        sparse_vectors: Option<&Bound<'_, PyAny>>,
        sparse: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Collection> {
        let reporting = py.import("sagittadb.progress")?;
        let callback =
            reporting.call_method1("resolve", (progress, format!("importing {name}")))?;
        let imported = (|| {
            let dim = vectors
                .getattr("shape")
                .and_then(|shape| shape.get_item(-1))
                .and_then(|dim| dim.extract::<usize>())
                .map_err(|_| {
                    DimensionError::new_err("`vectors` must be a 2-D array (n × dim)".to_string())
                })?;
            let config = CollectionConfig {
                dim,
                distance: parse_distance(distance)?,
                shard_count: shard_number,
                storage: parse_storage(
                    segment_kind,
                    page_cache_mb,
                    datatype,
                    partition_size,
                    on_disk,
                )?,
            };
            let reporter = Reporter::new(callback.clone());
            let sparse = (sparse_vectors, sparse);
            self.import_rows(name, config, (ids, vectors, payloads), sparse, reporter)
        })();
        reporting.call_method1("finish", (callback,))?;
        Ok(Collection {
            name: name.to_string(),
            inner: imported?,
            _database: Arc::clone(&self.inner),
        })
    }

    /// An existing collection; raises `CollectionNotFoundError`.
    fn collection(&self, name: &str) -> PyResult<Collection> {
        let inner = self.inner.collection(name).map_err(to_python_error)?;
        Ok(Collection {
            name: name.to_string(),
            inner,
            _database: Arc::clone(&self.inner),
        })
    }

    fn list_collections(&self) -> Vec<String> {
        self.inner.list()
    }

    fn drop_collection(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        py.allow_threads(|| self.inner.drop_collection(name))
            .map_err(to_python_error)
    }
}

impl Database {
    /// `import_collection`'s rows as the engine imports them: points (with payloads or
    /// sparse vectors, the collection then one with spaces), or rows borrowed as they lie.
    fn import_rows(
        &self,
        name: &str,
        config: CollectionConfig,
        (ids, vectors, payloads): (
            &Bound<'_, PyAny>,
            &Bound<'_, PyAny>,
            Option<&Bound<'_, PyAny>>,
        ),
        (sparse_vectors, sparse): (Option<&Bound<'_, PyAny>>, Option<&Bound<'_, PyAny>>),
        reporter: Reporter<'_>,
    ) -> PyResult<Arc<CoreCollection>> {
        let py = ids.py();
        let dim = config.dim;
        let sparse_vectors = sparse_vectors.filter(|given| !given.is_none());
        let sparse = sparse.filter(|given| !given.is_none());
        if sparse_vectors.is_some() || sparse.is_some() {
            let spaces = with_sparse(
                &config,
                sparse_vectors.ok_or_else(|| {
                    InvalidParameterError::new_err(
                        "`sparse`: give the collection's `sparse_vectors` too",
                    )
                })?,
            )?;
            let mut points = points_from_python(py, ids, vectors, payloads, dim)?;
            if let Some(sparse) = sparse {
                attach_sparse(&mut points, sparse, &spaces)?;
            }
            let config = (config.named(&spaces), spaces);
            return self.import_reporting(name, config, points.into(), reporter);
        }
        let config = (config, VectorSpaces::default());
        if payloads.is_some() {
            let points = points_from_python(py, ids, vectors, payloads, dim)?;
            return self.import_reporting(name, config, points.into(), reporter);
        }
        let (ids, array) = rows_from_python(py, ids, vectors, dim)?;
        let source = ImportSource::Rows {
            ids,
            vectors: array.as_slice()?,
        };
        self.import_reporting(name, config, source, reporter)
    }

    /// The import of `import_collection` on a worker thread, reported to `reporter`. An
    /// exception out of the reporting (the callback's, or `KeyboardInterrupt`) cancels
    /// the import and wins over its result; a collection published regardless is dropped.
    fn import_reporting(
        &self,
        name: &str,
        config: (CollectionConfig, VectorSpaces),
        source: ImportSource<'_>,
        mut reporter: Reporter<'_>,
    ) -> PyResult<Arc<CoreCollection>> {
        let progress = ImportProgress::new();
        let database = &self.inner;
        let (imported, failure) = reporter.run(
            || database.import_collection_with_spaces(name, config, source, &progress),
            || {
                // `total` only once the collection exists: the files are still to write.
                let (linked, total) = progress.get();
                (linked.min(total.saturating_sub(1)), total)
            },
            || progress.cancel(),
        );
        let failure = match (imported, failure) {
            (Err(_), Some(failure)) => return Err(failure),
            (Err(error), None) => return Err(to_python_error(error)),
            (Ok((collection, _)), None) => {
                let total = progress.get().1;
                match reporter.report(total, total) {
                    Ok(()) => return Ok(collection),
                    Err(failure) => failure,
                }
            }
            (Ok(_), Some(failure)) => failure,
        };
        // Published before the cancel was seen: all or nothing, so it goes again. A drop
        // that fails leaves the collection; the exception raised is the callback's.
        let py = reporter.py();
        let _ = py.allow_threads(|| self.inner.drop_collection(name));
        Err(failure)
    }
}

/// A collection of points: ids (int or UUID), vectors, JSON-object payloads.
#[pyclass(module = "sagittadb")]
pub struct Collection {
    name: String,
    inner: Arc<CoreCollection>,
    /// Keeps the database (and its background optimizer) alive while a handle exists.
    _database: Arc<CoreDatabase>,
}

impl Collection {
    /// `filter` parsed and bound as this collection evaluates it (`Collection::bind_filter`:
    /// text matches on a text-indexed field as token matches, named `has_vector` resolved).
    fn bound_filter(&self, filter: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Filter>> {
        let Some(filter) = parse_filter(filter)? else {
            return Ok(None);
        };
        let bound = self.inner.bind_filter(&filter).map_err(to_python_error)?;
        Ok(Some(bound.unwrap_or(filter)))
    }

    /// One search, the GIL released meanwhile.
    fn answer(&self, py: Python<'_>, request: &SearchRequest<'_>) -> PyResult<Vec<ScoredPoint>> {
        py.allow_threads(|| self.inner.query(request))
            .map_err(to_python_error)
    }

    /// The polling loop of `wait_until_indexed`; `callback` is None or `(indexed, points)`.
    fn wait_reporting(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        callback: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let deadline = timeout.map(|seconds| Instant::now() + Duration::from_secs_f64(seconds));
        let mut reported = None;
        loop {
            let status = py.allow_threads(|| {
                std::thread::sleep(Duration::from_millis(5));
                self.inner.status()
            });
            if !callback.is_none() && reported != Some((status.indexed, status.points)) {
                callback.call1((status.indexed, status.points))?;
                reported = Some((status.indexed, status.points));
            }
            match status.health {
                Health::Green => return Ok(()),
                Health::Red => {
                    return Err(SagittaError::new_err(format!(
                        "collection {} is red: {}",
                        self.name,
                        status
                            .write_error
                            .or(status.optimizer_error)
                            .unwrap_or_default()
                    )))
                }
                Health::Yellow => {}
            }
            py.check_signals()?;
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return Err(pyo3::exceptions::PyTimeoutError::new_err(format!(
                    "collection {} not indexed after {} s: {} of {} points indexed",
                    self.name,
                    timeout.unwrap_or_default(),
                    status.indexed,
                    status.points
                )));
            }
        }
    }

    /// `set_payload` (merge) and `overwrite_payload` (replace) share everything else.
    fn change_payload(
        &self,
        py: Python<'_>,
        payload: &Bound<'_, PyAny>,
        ids: Option<&Bound<'_, PyAny>>,
        filter: Option<&Bound<'_, PyAny>>,
        wait: bool,
        overwrite: bool,
    ) -> PyResult<()> {
        let text = payload_text(payload)?;
        let named_only = filter.is_none();
        let ids = self.target_ids(ids, filter)?;
        self.require_existing(&ids, named_only)?;
        py.allow_threads(|| {
            if overwrite {
                self.inner.overwrite_payload(&ids, &text, wait)
            } else {
                self.inner.set_payload(&ids, &text, wait)
            }
        })
        .map_err(to_python_error)
    }

    /// Raises `PointNotFoundError` when a payload change names, by id alone (`named`), a
    /// point that does not exist, before anything changes, as Qdrant's server (and so the
    /// remote backend) refuses it; ids given beside a filter select, missing or not.
    fn require_existing(&self, ids: &[PointId], named: bool) -> PyResult<()> {
        if !named {
            return Ok(());
        }
        match self.inner.first_missing(ids).map_err(to_python_error)? {
            Some(id) => Err(PointNotFoundError::new_err(format!(
                "No point with id {id} found"
            ))),
            None => Ok(()),
        }
    }

    /// The points named by `ids` plus those matched by `filter` (resolved now).
    fn target_ids(
        &self,
        ids: Option<&Bound<'_, PyAny>>,
        filter: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<PointId>> {
        let mut targets: Vec<PointId> = match ids {
            Some(ids) => ids
                .try_iter()?
                .map(|id| point_id(&id?))
                .collect::<PyResult<_>>()?,
            None => Vec::new(),
        };
        if let Some(filter) = self.bound_filter(filter)? {
            targets.extend(self.inner.matching_ids(&filter).map_err(to_python_error)?);
        }
        Ok(targets)
    }
}

#[pymethods]
impl Collection {
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    #[getter]
    fn dim(&self) -> usize {
        self.inner.config().dim
    }

    #[getter]
    fn distance(&self) -> &'static str {
        self.inner.config().distance.name()
    }

    /// Inserts or replaces points. `vectors`: n × dim; `ids`: n ints or UUIDs; `payloads`:
    /// n dicts (or None); `sparse`: `{name: n sparse vectors (or None)}`, each a
    /// `{"indices", "values"}` dict or an `(indices, values)` pair. `wait=True` returns
    /// once the write is fsynced.
    #[pyo3(signature = (ids, vectors, payloads = None, wait = true, sparse = None))]
    fn upsert(
        &self,
        py: Python<'_>,
        ids: &Bound<'_, PyAny>,
        vectors: &Bound<'_, PyAny>,
        payloads: Option<&Bound<'_, PyAny>>,
        wait: bool,
        sparse: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let mut points = points_from_python(py, ids, vectors, payloads, self.dim())?;
        if let Some(sparse) = sparse.filter(|given| !given.is_none()) {
            attach_sparse(&mut points, sparse, self.inner.spaces())?;
        }
        py.allow_threads(|| self.inner.upsert(points, wait))
            .map_err(to_python_error)
    }

    /// Exact top-`limit` points passing `filter` (a dict in Qdrant's filter grammar), after
    /// skipping `offset`, keeping only scores at least as good as `score_threshold`: a list
    /// of dicts with id, score, payload (and vector).
    #[pyo3(signature = (query, limit = 10, filter = None, with_payload = true, with_vector = false, score_threshold = None, offset = 0, hnsw_ef = None, exact = false))]
    #[allow(clippy::too_many_arguments)]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: &Bound<'py, PyAny>,
        limit: usize,
        filter: Option<&Bound<'py, PyAny>>,
        with_payload: bool,
        with_vector: bool,
        score_threshold: Option<f32>,
        offset: usize,
        hnsw_ef: Option<usize>,
        exact: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let strategy = strategy(hnsw_ef, exact);
        let filter = self.bound_filter(filter)?;
        let queries = query_rows(query, self.dim(), false)?;
        let hits = self.answer(
            py,
            &SearchRequest {
                offset,
                filter: filter.as_ref(),
                score_threshold,
                strategy,
                ..SearchRequest::new(&queries[0], limit)
            },
        )?;
        hits_to_list(
            py,
            hits,
            with_payload,
            with_vector.then(|| self.inner.spaces()),
        )
    }

    /// Top-`limit` points by the sparse vector `using` (dot product over shared indices,
    /// each query weight times its index's IDF when the vector has `modifier: "idf"`);
    /// points sharing no index with `query` are no hits. Exact (an inverted index).
    #[pyo3(signature = (using, query, limit = 10, filter = None, with_payload = true, score_threshold = None, offset = 0))]
    #[allow(clippy::too_many_arguments)]
    fn search_sparse<'py>(
        &self,
        py: Python<'py>,
        using: &str,
        query: &Bound<'py, PyAny>,
        limit: usize,
        filter: Option<&Bound<'py, PyAny>>,
        with_payload: bool,
        score_threshold: Option<f32>,
        offset: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let query = sparse_vector(query, "query")?;
        let filter = self.bound_filter(filter)?;
        let hits = self.answer(
            py,
            &SearchRequest {
                offset,
                filter: filter.as_ref(),
                score_threshold,
                using: Some(using),
                sparse: Some(&query),
                ..SearchRequest::new(&[], limit)
            },
        )?;
        hits_to_list(py, hits, with_payload, None)
    }

    /// Hybrid search: the top `candidates` (default `max(2 * limit, 20)`) by the dense
    /// `query` and by the sparse `sparse` in the sparse vector `using`, fused — `fusion`
    /// "rrf" (Σ 1 / (2 + rank), ranks from 0: Qdrant's) or "dbsf" — into the top `limit`,
    /// the fused score as `score`. As Qdrant's Query API with two prefetches and
    /// `{"fusion": ..}`, and ranked alike (the same code as the server's).
    #[pyo3(signature = (query, sparse, using, limit = 10, filter = None, with_payload = true, candidates = None, fusion = "rrf", hnsw_ef = None, exact = false))]
    #[allow(clippy::too_many_arguments)]
    fn hybrid_search<'py>(
        &self,
        py: Python<'py>,
        query: &Bound<'py, PyAny>,
        sparse: &Bound<'py, PyAny>,
        using: &str,
        limit: usize,
        filter: Option<&Bound<'py, PyAny>>,
        with_payload: bool,
        candidates: Option<usize>,
        fusion: &str,
        hnsw_ef: Option<usize>,
        exact: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let fusion = parse_fusion(fusion)?;
        let dense = query_rows(query, self.dim(), false)?;
        let sparse = sparse_vector(sparse, "sparse")?;
        let filter = self.bound_filter(filter)?;
        let candidates = candidates.unwrap_or((2 * limit).max(20));
        let page = FusedPage {
            limit,
            offset: 0,
            score_threshold: None,
        };
        let requests = [
            SearchRequest {
                filter: filter.as_ref(),
                strategy: strategy(hnsw_ef, exact),
                ..SearchRequest::new(&dense[0], candidates)
            },
            SearchRequest {
                filter: filter.as_ref(),
                using: Some(using),
                sparse: Some(&sparse),
                ..SearchRequest::new(&[], candidates)
            },
        ];
        // both searches at once (the sparse one on this thread), then fused
        let hits = py
            .allow_threads(|| self.inner.query_batch(&requests))
            .map(|lists| fuse(lists, fusion, page))
            .map_err(to_python_error)?;
        hits_to_list(py, hits, with_payload, None)
    }

    /// Several searches in one call (spread over the cores): `queries` is n × dim; returns
    /// one list of hits per query.
    #[pyo3(signature = (queries, limit = 10, filter = None, with_payload = true, with_vector = false, score_threshold = None, hnsw_ef = None, exact = false))]
    #[allow(clippy::too_many_arguments)]
    fn search_batch<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        limit: usize,
        filter: Option<&Bound<'py, PyAny>>,
        with_payload: bool,
        with_vector: bool,
        score_threshold: Option<f32>,
        hnsw_ef: Option<usize>,
        exact: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let strategy = strategy(hnsw_ef, exact);
        let filter = self.bound_filter(filter)?;
        let queries = query_rows(queries, self.dim(), true)?;
        let results = py
            .allow_threads(|| {
                let requests: Vec<SearchRequest<'_>> = queries
                    .iter()
                    .map(|vector| SearchRequest {
                        filter: filter.as_ref(),
                        score_threshold,
                        strategy,
                        ..SearchRequest::new(vector, limit)
                    })
                    .collect();
                self.inner.query_batch(&requests)
            })
            .map_err(to_python_error)?;
        let list = PyList::empty(py);
        for hits in results {
            list.append(hits_to_list(
                py,
                hits,
                with_payload,
                with_vector.then(|| self.inner.spaces()),
            )?)?;
        }
        Ok(list)
    }

    /// Merges the keys of `payload` into the payload of the points named by `ids` and/or
    /// matched by `filter`. Ids given alone must all exist (else `PointNotFoundError`,
    /// nothing changed: Qdrant's rule); beside a filter they select. The same holds for
    /// `overwrite_payload` and `delete_payload`.
    #[pyo3(signature = (payload, ids = None, filter = None, wait = true))]
    fn set_payload(
        &self,
        py: Python<'_>,
        payload: &Bound<'_, PyAny>,
        ids: Option<&Bound<'_, PyAny>>,
        filter: Option<&Bound<'_, PyAny>>,
        wait: bool,
    ) -> PyResult<()> {
        self.change_payload(py, payload, ids, filter, wait, false)
    }

    /// Replaces the payload of the points named by `ids` and/or matched by `filter`.
    #[pyo3(signature = (payload, ids = None, filter = None, wait = true))]
    fn overwrite_payload(
        &self,
        py: Python<'_>,
        payload: &Bound<'_, PyAny>,
        ids: Option<&Bound<'_, PyAny>>,
        filter: Option<&Bound<'_, PyAny>>,
        wait: bool,
    ) -> PyResult<()> {
        self.change_payload(py, payload, ids, filter, wait, true)
    }

    /// Removes top-level `keys` from the payload of the points named by `ids` and/or
    /// matched by `filter`.
    #[pyo3(signature = (keys, ids = None, filter = None, wait = true))]
    fn delete_payload(
        &self,
        py: Python<'_>,
        keys: Vec<String>,
        ids: Option<&Bound<'_, PyAny>>,
        filter: Option<&Bound<'_, PyAny>>,
        wait: bool,
    ) -> PyResult<()> {
        let named_only = filter.is_none();
        let ids = self.target_ids(ids, filter)?;
        self.require_existing(&ids, named_only)?;
        py.allow_threads(|| self.inner.delete_payload_keys(&ids, &keys, wait))
            .map_err(to_python_error)
    }

    /// Points by id (missing ids are skipped), as dicts with id, payload and vector.
    fn get<'py>(&self, py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for id in ids.try_iter()? {
            let found = self.inner.get(&point_id(&id?)?).map_err(to_python_error)?;
            if let Some(point) = found {
                let dict = point_dict(py, point.id, None, point.payload, Some(point.vector))?;
                add_sparse(&dict, &point.side, self.inner.spaces())?;
                list.append(dict)?;
            }
        }
        Ok(list)
    }

    /// Deletes points by id (unknown ids are ignored) and/or every point passing `filter`;
    /// returns how many the filter matched.
    #[pyo3(signature = (ids = None, filter = None, wait = true))]
    fn delete(
        &self,
        py: Python<'_>,
        ids: Option<&Bound<'_, PyAny>>,
        filter: Option<&Bound<'_, PyAny>>,
        wait: bool,
    ) -> PyResult<usize> {
        let ids: Vec<PointId> = match ids {
            Some(ids) => ids
                .try_iter()?
                .map(|id| point_id(&id?))
                .collect::<PyResult<_>>()?,
            None => Vec::new(),
        };
        let filter = self.bound_filter(filter)?;
        py.allow_threads(|| {
            self.inner.delete(&ids, wait)?;
            match &filter {
                Some(filter) => self.inner.delete_by_filter(filter, wait),
                None => Ok(0),
            }
        })
        .map_err(to_python_error)
    }

    /// One page of points passing `filter`, in id order: `(points, next_offset)`; pass
    /// `next_offset` back as `offset` for the next page (`None` at the end).
    #[pyo3(signature = (limit = 10, offset = None, filter = None, with_vector = false))]
    fn scroll<'py>(
        &self,
        py: Python<'py>,
        limit: usize,
        offset: Option<&Bound<'py, PyAny>>,
        filter: Option<&Bound<'py, PyAny>>,
        with_vector: bool,
    ) -> PyResult<(Bound<'py, PyList>, PyObject)> {
        let offset = offset.filter(|o| !o.is_none()).map(point_id).transpose()?;
        let filter = self.bound_filter(filter)?;
        let (points, next) = py
            .allow_threads(|| self.inner.scroll(offset, limit, filter.as_ref()))
            .map_err(to_python_error)?;
        let list = PyList::empty(py);
        for point in points {
            let vector = with_vector.then_some(point.vector);
            let dict = point_dict(py, point.id, None, point.payload, vector)?;
            if with_vector {
                add_sparse(&dict, &point.side, self.inner.spaces())?;
            }
            list.append(dict)?;
        }
        let next = match next {
            Some(id) => id_to_python(py, id)?,
            None => py.None(),
        };
        Ok((list, next))
    }

    /// Exact number of points (passing `filter` when given).
    #[pyo3(signature = (filter = None))]
    fn count(&self, py: Python<'_>, filter: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
        let filter = self.bound_filter(filter)?;
        py.allow_threads(|| self.inner.count(filter.as_ref()))
            .map_err(to_python_error)
    }

    fn __len__(&self) -> PyResult<usize> {
        self.inner.count(None).map_err(to_python_error)
    }

    /// Seals the write buffers into HNSW segments (SQ8 traversal); returns the number of
    /// points sealed. Other threads keep searching and writing meanwhile; every write
    /// acknowledged before the call is durable afterwards.
    fn optimize(&self, py: Python<'_>) -> PyResult<usize> {
        py.allow_threads(|| self.inner.optimize(self._database.file_system()))
            .map_err(to_python_error)
    }

    /// The optimizer's view: `{"status": "green" | "yellow" | "red", "points_count",
    /// "indexed_vectors_count", "segments_count", "optimizer_error", "write_error",
    /// "index_ram_bytes", "disk_bytes"}` (the last two: RAM the segments' indexes hold and
    /// bytes of the collection's files).
    /// Green: every point is in an HNSW segment and no work is planned; yellow: points wait
    /// in a write buffer or a seal/merge runs; red: a shard refuses writes after an I/O
    /// error (`write_error` says why) until the database is reopened.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let status = self.inner.status();
        let dict = PyDict::new(py);
        dict.set_item("status", status.health.name())?;
        dict.set_item("points_count", status.points)?;
        dict.set_item("indexed_vectors_count", status.indexed)?;
        dict.set_item("segments_count", status.segments)?;
        dict.set_item("optimizer_error", status.optimizer_error)?;
        dict.set_item("write_error", status.write_error)?;
        dict.set_item("index_ram_bytes", status.index_ram_bytes)?;
        dict.set_item("disk_bytes", status.disk_bytes)?;
        Ok(dict)
    }

    /// Blocks until the status is green (everything indexed, nothing planned); raises
    /// `TimeoutError` after `timeout` seconds, or `SagittaError` if it turns red. Needs
    /// the background optimizer (the default of `sagittadb.open`). `progress` (see
    /// `sagittadb.progress`) is called with `(indexed, points)` as they change: by default
    /// a tqdm bar when run interactively.
    #[pyo3(signature = (timeout = None, progress = None))]
    fn wait_until_indexed(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        progress: Option<PyObject>,
    ) -> PyResult<()> {
        if !self._database.has_background_optimizer() {
            return Err(SagittaError::new_err(
                "wait_until_indexed: the database was opened with background_optimizer=False",
            ));
        }
        let reporting = py.import("sagittadb.progress")?;
        let callback =
            reporting.call_method1("resolve", (progress, format!("indexing {}", self.name)))?;
        let result = self.wait_reporting(py, timeout, &callback);
        reporting.call_method1("finish", (callback,))?;
        result
    }

    /// Tunes the optimizer of this collection (not persisted): seal a write buffer at
    /// `seal_points` points or after `seal_idle_seconds` without writes; vacuum a segment
    /// once `vacuum_fraction` (and at least `vacuum_min_deleted`) of it is deleted; merge
    /// the smallest segments past `max_segments` per shard.
    #[pyo3(signature = (seal_points = None, seal_idle_seconds = None, vacuum_min_deleted = None, vacuum_fraction = None, max_segments = None))]
    fn configure_optimizer(
        &self,
        seal_points: Option<usize>,
        seal_idle_seconds: Option<f64>,
        vacuum_min_deleted: Option<usize>,
        vacuum_fraction: Option<f64>,
        max_segments: Option<usize>,
    ) -> PyResult<()> {
        let mut policy = self.inner.policy();
        if let Some(points) = seal_points {
            policy.seal_points = points.max(1);
        }
        if let Some(seconds) = seal_idle_seconds {
            policy.seal_idle = Duration::try_from_secs_f64(seconds).map_err(|_| {
                InvalidParameterError::new_err(format!(
                    "`seal_idle_seconds` = {seconds}: must be a finite number >= 0"
                ))
            })?;
        }
        if let Some(deleted) = vacuum_min_deleted {
            policy.vacuum_min_deleted = deleted;
        }
        if let Some(fraction) = vacuum_fraction {
            if !(0.0..=1.0).contains(&fraction) {
                return Err(InvalidParameterError::new_err(format!(
                    "`vacuum_fraction` = {fraction}: must be between 0 and 1"
                )));
            }
            policy.vacuum_fraction = fraction;
        }
        if let Some(segments) = max_segments {
            policy.max_segments = segments.max(1);
        }
        self.inner.set_policy(policy);
        Ok(())
    }

    /// Indexes payload field `field` (a dotted key) as `field_schema`: "keyword",
    /// "integer", "float" or "bool". Filters on it (match value / any, range) then check
    /// only the points the index names, and the planner knows their number exactly.
    fn create_payload_index(
        &self,
        py: Python<'_>,
        field: &str,
        field_schema: &str,
    ) -> PyResult<()> {
        let kind = FieldType::parse(field_schema).map_err(to_python_error)?;
        py.allow_threads(|| {
            self.inner
                .create_payload_index(self._database.file_system(), field, kind)
        })
        .map_err(to_python_error)
    }

    /// Drops the payload index of `field` (nothing happens if there is none).
    fn delete_payload_index(&self, py: Python<'_>, field: &str) -> PyResult<()> {
        py.allow_threads(|| {
            self.inner
                .delete_payload_index(self._database.file_system(), field)
        })
        .map_err(to_python_error)
    }

    /// The indexed payload fields: `{field: "keyword" | "integer" | "float" | "bool"}`.
    fn payload_schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (field, kind) in self.inner.payload_schema() {
            dict.set_item(field, kind.name())?;
        }
        Ok(dict)
    }

    /// Points in sealed, indexed segments and in write buffers:
    /// `{"indexed": n, "buffered": m}`.
    fn point_counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (indexed, buffered) = self.inner.point_counts();
        let dict = PyDict::new(py);
        dict.set_item("indexed", indexed)?;
        dict.set_item("buffered", buffered)?;
        Ok(dict)
    }

    fn __repr__(&self) -> String {
        format!(
            "Collection(name='{}', dim={}, distance='{}', count={})",
            self.name,
            self.dim(),
            self.distance(),
            self.inner.count(None).map_or_else(
                |error| format!("unknown ({error})"),
                |count| count.to_string()
            )
        )
    }
}

/// `fusion` of `hybrid_search`: "rrf" (Qdrant's k of 2) or "dbsf".
fn parse_fusion(name: &str) -> PyResult<Fusion> {
    match name {
        "rrf" => Ok(Fusion::Rrf { k: DEFAULT_RRF_K }),
        "dbsf" => Ok(Fusion::Dbsf),
        other => Err(InvalidParameterError::new_err(format!(
            "`fusion` = {other:?}: expected \"rrf\" or \"dbsf\""
        ))),
    }
}

/// The spaces of a new collection with sparse vectors `sparse` (see `sparse_spaces`)
/// beside its dense vector, which keeps the name `""` (Qdrant's unnamed vector); its
/// storage must be RAM segments.
fn with_sparse(config: &CollectionConfig, sparse: &Bound<'_, PyAny>) -> PyResult<VectorSpaces> {
    let storage = &config.storage;
    if storage.segment_kind != SegmentKindName::Hnsw || storage.vectors_on_disk {
        return Err(InvalidParameterError::new_err(
            "`sparse_vectors`: a collection with sparse vectors keeps its vectors in RAM \
             (segment_kind \"hnsw\", on_disk False)",
        ));
    }
    let dense = VectorSpace {
        name: String::new(),
        dim: config.dim,
        distance: config.distance,
    };
    VectorSpaces::with_sparse(
        vec![dense],
        crate::convert::sparse_spaces(sparse)?,
        MAX_DIMENSION,
    )
    .map_err(to_python_error)
}

/// `exact` wins over `hnsw_ef`; neither gives the engine's default.
fn strategy(hnsw_ef: Option<usize>, exact: bool) -> Strategy {
    match (exact, hnsw_ef) {
        (true, _) => Strategy::Exact,
        (false, Some(ef)) => Strategy::Beam(ef),
        (false, None) => Strategy::Auto,
    }
}

/// Opens (or creates) the database directory at `path`. With `background_optimizer`
/// (the default) a background thread seals write buffers into HNSW segments and merges
/// them; without it only `Collection.optimize()` does. `stripe_dirs`: directories on other
/// devices that disk segments' records files spread over (the same ones, in order, every
/// time the database is opened).
#[pyfunction]
#[pyo3(signature = (path, background_optimizer = true, stripe_dirs = None))]
pub fn open(
    py: Python<'_>,
    path: PathBuf,
    background_optimizer: bool,
    stripe_dirs: Option<Vec<PathBuf>>,
) -> PyResult<Database> {
    let fs: Arc<dyn FileSystem> = Arc::new(OsFileSystem);
    let options = DatabaseOptions {
        background_optimizer,
        stripe_dirs: stripe_dirs.unwrap_or_default(),
        ..DatabaseOptions::default()
    };
    let inner = py
        .allow_threads(|| CoreDatabase::open_with(fs, &path, options))
        .map_err(to_python_error)?;
    Ok(Database {
        inner: Arc::new(inner),
    })
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add_class::<Database>()?;
    module.add_class::<Collection>()?;
    module.add_function(wrap_pyfunction!(open, module)?)?;
    module.add(
        "CollectionNotFoundError",
        py.get_type::<CollectionNotFoundError>(),
    )?;
    module.add(
        "CollectionExistsError",
        py.get_type::<CollectionExistsError>(),
    )?;
    module.add("StorageError", py.get_type::<StorageError>())?;
    module.add("PointNotFoundError", py.get_type::<PointNotFoundError>())?;
    Ok(())
}
