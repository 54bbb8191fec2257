//! The `sagittadb._native` extension: PyO3 bindings over `sagitta-index`.
//!
//! Architecture invariant: this is the only crate that knows PyO3. Work on numpy arrays runs
//! with the GIL released. Index files are written to `<path>.tmp`, fsynced, renamed over
//! `<path>`, and the directory is fsynced, so a crash never leaves a half-written index.
#![deny(unsafe_code)]
// PyO3 extracts arguments as owned values and `map_err` passes errors by value.
#![allow(clippy::needless_pass_by_value)]

mod convert;
mod engine;
mod progress;

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use numpy::{IntoPyArray, PyArray2, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use parking_lot::RwLock;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict};

use crate::progress::Reporter;
use sagitta_index::flat::{FlatIndex as CoreFlat, SearchResults};
use sagitta_index::hnsw::{
    locality_order, permute_rows, AddProgress, HnswIndex as CoreHnsw, HnswParams, HnswSearchParams,
    LinkOrder, Quantization,
};
use sagitta_index::{IndexError, Metric};

create_exception!(
    _native,
    SagittaError,
    PyException,
    "Base class of SagittaDB errors."
);
create_exception!(
    _native,
    DimensionError,
    SagittaError,
    "A vector has the wrong dimension."
);
create_exception!(
    _native,
    InvalidParameterError,
    SagittaError,
    "A parameter or value is out of range or malformed."
);
create_exception!(
    _native,
    DuplicateIdError,
    SagittaError,
    "An id is already in the index."
);
create_exception!(
    _native,
    CapacityError,
    SagittaError,
    "The index cannot hold more points."
);
create_exception!(
    _native,
    FormatError,
    SagittaError,
    "An index file is corrupt or of an unknown version."
);

/// The one table from engine errors to Python exceptions.
fn to_python_error(error: IndexError) -> PyErr {
    let message = error.to_string();
    match error {
        IndexError::WrongVectorDimension { .. } | IndexError::WrongIdCount { .. } => {
            DimensionError::new_err(message)
        }
        IndexError::ParameterOutOfRange { .. }
        | IndexError::NonFiniteValue { .. }
        | IndexError::UnknownMetric { .. }
        | IndexError::UnknownQuantization { .. } => InvalidParameterError::new_err(message),
        IndexError::DuplicateId { .. } => DuplicateIdError::new_err(message),
        IndexError::ReservedId { .. } => InvalidParameterError::new_err(message),
        IndexError::CapacityExceeded { .. } => CapacityError::new_err(message),
        IndexError::Format { .. } => FormatError::new_err(message),
        IndexError::Io { .. } => PyOSError::new_err(message),
        IndexError::Cancelled | IndexError::VectorsElsewhere { .. } | IndexError::NoCodes => {
            SagittaError::new_err(message)
        }
    }
}

/// A borrowed batch of f32 rows from a 1-d (one vector) or 2-d numpy array.
struct Batch<'py> {
    array: PyReadonlyArrayDyn<'py, f32>,
    rows: usize,
}

impl Batch<'_> {
    /// A private copy: once the GIL is released another Python thread could write to the
    /// caller's array, so the engine never reads it directly.
    fn values(&self) -> PyResult<Vec<f32>> {
        self.array
            .as_slice()
            .map(<[f32]>::to_vec)
            .map_err(|_| PyValueError::new_err("vectors must be a C-contiguous float32 array"))
    }
}

fn batch<'py>(vectors: &Bound<'py, PyAny>, dim: usize, name: &str) -> PyResult<Batch<'py>> {
    // Fast path: already a C-contiguous float32 array; otherwise let numpy convert it.
    let array: PyReadonlyArrayDyn<'py, f32> =
        match vectors.extract::<PyReadonlyArrayDyn<'py, f32>>() {
            Ok(array) if array.is_c_contiguous() => array,
            _ => {
                let numpy = vectors.py().import("numpy")?;
                numpy
                    .call_method1("ascontiguousarray", (vectors, "float32"))?
                    .extract()?
            }
        };
    let shape = array.shape().to_vec();
    let (rows, columns) = match shape.as_slice() {
        [columns] => (1, *columns),
        [rows, columns] => (*rows, *columns),
        _ => {
            return Err(DimensionError::new_err(format!(
                "`{name}` must be a 1-d or 2-d array, got {} dimensions",
                shape.len()
            )))
        }
    };
    if columns != dim {
        return Err(DimensionError::new_err(format!(
            "vector dimension error: `{name}` has {columns} columns, the index has dim {dim}"
        )));
    }
    // The HNSW index takes a row of NaNs as an absent row (a database point without its
    // vector); for this API a NaN anywhere is an error, as it always was.
    if let Ok(values) = array.as_slice() {
        if let Some(at) = values.iter().position(|value| !value.is_finite()) {
            return Err(to_python_error(IndexError::NonFiniteValue {
                row: at / dim.max(1),
                position: at % dim.max(1),
            }));
        }
    }
    Ok(Batch { array, rows })
}

fn default_labels(start: usize, rows: usize) -> Vec<u64> {
    (start as u64..(start + rows) as u64).collect()
}

fn explicit_labels(ids: &Bound<'_, PyAny>, rows: usize) -> PyResult<Vec<u64>> {
    let numpy = ids.py().import("numpy")?;
    let converted = numpy.call_method1("ascontiguousarray", (ids, "uint64"))?;
    let labels: Vec<u64> = converted
        .call_method0("ravel")?
        .call_method0("tolist")?
        .extract()?;
    if labels.len() != rows {
        return Err(DimensionError::new_err(format!(
            "`ids` has {} entries but {rows} vectors were given",
            labels.len()
        )));
    }
    Ok(labels)
}

type ResultArrays<'py> = (Bound<'py, PyArray2<u64>>, Bound<'py, PyArray2<f32>>);

fn result_arrays(
    py: Python<'_>,
    results: SearchResults,
    rows: usize,
) -> PyResult<ResultArrays<'_>> {
    let k = results.k;
    let shape_error = |error: numpy::ndarray::ShapeError| SagittaError::new_err(error.to_string());
    let ids =
        numpy::ndarray::Array2::from_shape_vec((rows, k), results.ids).map_err(shape_error)?;
    let scores =
        numpy::ndarray::Array2::from_shape_vec((rows, k), results.scores).map_err(shape_error)?;
    Ok((ids.into_pyarray(py), scores.into_pyarray(py)))
}

/// Writes through a unique temporary file beside `path`, fsync, rename, then (Unix) fsync of
/// the directory. On any error the temporary file is removed and `path` is untouched.
fn write_atomically(
    path: &Path,
    body: impl FnOnce(&mut BufWriter<File>) -> Result<(), IndexError>,
) -> PyResult<()> {
    static SAVE_SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let sequence = SAVE_SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut temporary = PathBuf::from(path);
    temporary
        .as_mut_os_string()
        .push(format!(".{}.{sequence}.tmp", std::process::id()));
    let written = (|| -> PyResult<()> {
        let file = File::create(&temporary)?;
        let mut writer = BufWriter::with_capacity(1 << 20, file);
        body(&mut writer).map_err(to_python_error)?;
        writer.flush()?;
        let file = writer
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temporary, path)?;
        Ok(())
    })();
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(error);
    }
    #[cfg(unix)]
    {
        let directory = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        File::open(directory)?.sync_all()?;
    }
    Ok(())
}

fn open_reader(path: &Path) -> PyResult<BufReader<File>> {
    Ok(BufReader::with_capacity(1 << 20, File::open(path)?))
}

/// Exact index: every query scans every vector (SIMD, batched, multi-threaded).
#[pyclass(module = "sagittadb")]
struct FlatIndex {
    inner: RwLock<CoreFlat>,
}

#[pymethods]
impl FlatIndex {
    #[new]
    #[pyo3(signature = (dim, metric = "cosine"))]
    fn new(dim: usize, metric: &str) -> PyResult<Self> {
        let metric = Metric::parse(metric).map_err(to_python_error)?;
        let inner = CoreFlat::new(dim, metric).map_err(to_python_error)?;
        Ok(FlatIndex {
            inner: RwLock::new(inner),
        })
    }

    #[getter]
    fn dim(&self) -> usize {
        self.inner.read().dim()
    }

    #[getter]
    fn metric(&self) -> &'static str {
        self.inner.read().metric().name()
    }

    fn __len__(&self) -> usize {
        self.inner.read().len()
    }

    /// Adds vectors (n × dim float32) with optional uint64 ids (default: continuing 0, 1, …).
    /// Ids must be new and distinct.
    #[pyo3(signature = (vectors, ids = None))]
    fn add(
        &self,
        py: Python<'_>,
        vectors: &Bound<'_, PyAny>,
        ids: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let dim = self.dim();
        let batch = batch(vectors, dim, "vectors")?;
        let given = ids
            .map(|ids| explicit_labels(ids, batch.rows))
            .transpose()?;
        let values = batch.values()?;
        py.allow_threads(|| {
            let mut inner = self.inner.write();
            // Default ids continue from the length read under the same lock as the add.
            let labels = given.unwrap_or_else(|| default_labels(inner.len(), batch.rows));
            inner.add(&values, &labels)
        })
        .map_err(to_python_error)
    }

    /// Exact top-k: returns (ids uint64 nq×k, scores float32 nq×k), closest first.
    #[pyo3(signature = (queries, k = 10, threads = 0))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        k: usize,
        threads: usize,
    ) -> PyResult<ResultArrays<'py>> {
        let batch = batch(queries, self.dim(), "queries")?;
        let values = batch.values()?;
        let results = py
            .allow_threads(|| self.inner.read().search(&values, k, threads))
            .map_err(to_python_error)?;
        result_arrays(py, results, batch.rows)
    }

    /// Bytes held by vectors and ids.
    fn memory_bytes(&self) -> usize {
        self.inner.read().memory_bytes()
    }

    /// Saves to `path` atomically (temporary file, fsync, rename).
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.allow_threads(|| write_atomically(&path, |writer| self.inner.read().save(writer)))
    }

    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<FlatIndex> {
        let inner = py.allow_threads(|| {
            let mut reader = open_reader(&path)?;
            CoreFlat::load(&mut reader).map_err(to_python_error)
        })?;
        Ok(FlatIndex {
            inner: RwLock::new(inner),
        })
    }

    fn __repr__(&self) -> String {
        let inner = self.inner.read();
        format!(
            "FlatIndex(dim={}, metric='{}', len={})",
            inner.dim(),
            inner.metric().name(),
            inner.len()
        )
    }
}

/// HNSW index with optional SQ8 traversal and exact re-scoring.
///
/// `add` and `search` may run concurrently from several Python threads; a search never waits
/// for an insert except while the capacity grows (amortized doubling).
#[pyclass(module = "sagittadb")]
struct HnswIndex {
    inner: RwLock<CoreHnsw>,
    default_id_lock: parking_lot::Mutex<()>,
}

/// Batches smaller than this get no progress bar by default.
const PROGRESS_BAR_ROWS_MIN: usize = 50_000;

impl HnswIndex {
    /// The add itself (without the GIL): default ids numbered under a lock, capacity grown
    /// as needed, SQ8 trained once the index holds enough rows; `counter` follows linking.
    fn add_rows(
        &self,
        mut values: Vec<f32>,
        given: Option<Vec<u64>>,
        (rows, link): (usize, LinkOrder),
        threads: usize,
        counter: &AddProgress,
    ) -> Result<(), IndexError> {
        // Adds with default ids are serialized so two never number from the same length.
        let numbering = given.is_none().then(|| self.default_id_lock.lock());
        let mut labels = match given {
            Some(labels) => labels,
            None => default_labels(self.inner.read().len(), rows),
        };
        // Node ids are internal here, so a large batch is placed cluster by cluster: each
        // cluster's rows together in memory and linked one after another (faster linking;
        // see sagitta_index::hnsw::locality_order). The values are this call's own copy.
        // Only a batch that will pass validation is reordered, so that an error names the
        // row as the caller numbered it.
        let dim = self.dim();
        if labels.len() == rows
            && values.len() == rows * dim
            && values.iter().all(|value| value.is_finite())
        {
            if let Some(order) = locality_order(&values, dim, threads) {
                permute_rows(&mut values, dim, &order);
                permute_rows(&mut labels, 1, &order);
            }
        }
        loop {
            // A batch refused for capacity changed nothing (the counter included).
            match self
                .inner
                .read()
                .add_in_order(&values, &labels, threads, Some(counter), link)
            {
                Err(IndexError::CapacityExceeded { .. }) => {}
                other => break other,
            }
            // Grow under the write lock, re-checked there: another thread may have grown.
            let mut inner = self.inner.write();
            let needed = inner.len() + rows;
            if needed > sagitta_index::limits::MAX_POINTS {
                break Err(IndexError::CapacityExceeded {
                    capacity: sagitta_index::limits::MAX_POINTS,
                });
            }
            if needed > inner.capacity() {
                let grown = needed.max(inner.capacity().saturating_mul(2));
                inner.reserve(grown.min(sagitta_index::limits::MAX_POINTS))?;
            }
        }?;
        drop(numbering);
        let untrained = {
            let inner = self.inner.read();
            inner.params().quantization == Quantization::Sq8
                && inner.sq8_scale().is_none()
                && inner.len() >= sagitta_index::hnsw::SQ8_TRAINING_ROWS_MIN
        };
        if untrained {
            self.inner.write().train_quantizer()?;
        }
        Ok(())
    }
}

#[pymethods]
impl HnswIndex {
    #[new]
    #[pyo3(signature = (dim, metric = "cosine", m = 16, ef_construction = 100, quantization = "sq8", capacity = 0, seed = 42))]
    fn new(
        dim: usize,
        metric: &str,
        m: usize,
        ef_construction: usize,
        quantization: &str,
        capacity: usize,
        seed: u64,
    ) -> PyResult<Self> {
        let mut params = HnswParams::new(dim, Metric::parse(metric).map_err(to_python_error)?);
        params.m = m;
        params.ef_construction = ef_construction;
        params.quantization = Quantization::parse(quantization).map_err(to_python_error)?;
        params.seed = seed;
        let inner = CoreHnsw::new(params, capacity).map_err(to_python_error)?;
        Ok(HnswIndex {
            inner: RwLock::new(inner),
            default_id_lock: parking_lot::Mutex::new(()),
        })
    }

    #[getter]
    fn dim(&self) -> usize {
        self.inner.read().dim()
    }

    #[getter]
    fn metric(&self) -> &'static str {
        self.inner.read().metric().name()
    }

    #[getter]
    fn quantization(&self) -> &'static str {
        self.inner.read().params().quantization.name()
    }

    #[getter]
    fn capacity(&self) -> usize {
        self.inner.read().capacity()
    }

    fn __len__(&self) -> usize {
        self.inner.read().len()
    }

    /// Adds vectors with optional uint64 ids, linking them on `threads` threads (0 = all).
    /// Capacity grows as needed. With sq8 the quantizer trains on the first batch of at
    /// least 1,000 vectors; smaller first batches are searched on f32 until the index holds
    /// 1,000, when it trains once and encodes everything.
    ///
    /// `progress` (see `sagittadb.progress`) is called on this thread with `(rows linked,
    /// rows)` about every 0.1 s while the build runs, ending with `(rows, rows)`; by default
    /// a tqdm bar when run interactively and the batch has at least 50,000 rows. An
    /// exception it raises, or `KeyboardInterrupt`, is raised once the add has finished:
    /// a half-linked batch would leave rows no search reaches, so the add is never cut
    /// short.
    #[pyo3(signature = (vectors, ids = None, threads = 0, progress = None, link_order = "clustered"))]
    #[allow(clippy::too_many_arguments)]
    fn add(
        &self,
        py: Python<'_>,
        vectors: &Bound<'_, PyAny>,
        ids: Option<&Bound<'_, PyAny>>,
        threads: usize,
        progress: Option<PyObject>,
        link_order: &str,
    ) -> PyResult<()> {
        let link = match link_order {
            "clustered" => LinkOrder::AsGiven,
            "shuffled" => LinkOrder::Shuffled,
            other => {
                return Err(InvalidParameterError::new_err(format!(
                    "link_order: unknown order `{other}`, expected `clustered` or `shuffled`"
                )))
            }
        };
        let dim = self.dim();
        let batch = batch(vectors, dim, "vectors")?;
        let given = ids
            .map(|ids| explicit_labels(ids, batch.rows))
            .transpose()?;
        let values = batch.values()?;
        let rows = batch.rows;
        let reporting = py.import("sagittadb.progress")?;
        // No bar by default for a batch too small to need one (adds in a loop would print
        // one bar each).
        let progress = match progress {
            None if rows < PROGRESS_BAR_ROWS_MIN => {
                Some(PyBool::new(py, false).to_owned().into_any().unbind())
            }
            other => other,
        };
        let callback = reporting.call_method1("resolve", (progress, "linking"))?;
        let counter = AddProgress::new();
        let mut reporter = Reporter::new(callback.clone());
        let (added, failure) = reporter.run(
            || self.add_rows(values, given, (rows, link), threads, &counter),
            || (counter.linked(), rows),
            || {}, // never cut short: see the docstring
        );
        let reported = match (&added, failure) {
            (_, Some(failure)) => Err(failure),
            (Ok(()), None) => reporter.report(rows, rows),
            (Err(_), None) => Ok(()),
        };
        reporting.call_method1("finish", (callback,))?;
        added.map_err(to_python_error)?;
        reported
    }

    /// Approximate top-k: (ids uint64 nq×k, scores float32 nq×k), closest first.
    /// `rescore`: how many SQ8 candidates are re-scored exactly (default: max(4·k, 32)).
    #[pyo3(signature = (queries, k = 10, ef = 64, threads = 0, rescore = None, exact_traversal = false, first_pass = false, interleave = false, bit_walk = false))]
    #[allow(clippy::too_many_arguments)]
    fn search<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        k: usize,
        ef: usize,
        threads: usize,
        rescore: Option<usize>,
        exact_traversal: bool,
        first_pass: bool,
        interleave: bool,
        bit_walk: bool,
    ) -> PyResult<ResultArrays<'py>> {
        let batch = batch(queries, self.dim(), "queries")?;
        let values = batch.values()?;
        let params = HnswSearchParams {
            k,
            ef,
            rescore,
            exact_traversal,
            first_pass,
            bit_walk,
            interleave,
        };
        let results = py
            .allow_threads(|| self.inner.read().search_batch(&values, params, threads))
            .map_err(to_python_error)?;
        result_arrays(py, results, batch.rows)
    }

    /// Mean work per query over `queries` (single-threaded): distance evaluations during
    /// traversal and exact re-scores, and the bytes of rows they read.
    #[pyo3(signature = (queries, k = 10, ef = 64, rescore = None, first_pass = false, bit_walk = false))]
    #[allow(clippy::too_many_arguments)]
    fn search_stats<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        k: usize,
        ef: usize,
        rescore: Option<usize>,
        first_pass: bool,
        bit_walk: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let dim = self.dim();
        let batch = batch(queries, dim, "queries")?;
        let values = batch.values()?;
        let params = HnswSearchParams {
            k,
            ef,
            rescore,
            exact_traversal: false,
            first_pass,
            bit_walk,
            interleave: false,
        };
        let (traversal, rescored, screened) = py
            .allow_threads(|| {
                let inner = self.inner.read();
                let mut totals = (0usize, 0usize, 0usize);
                for query in values.chunks_exact(dim) {
                    let (_, stats) = inner.search_with_stats(query, params)?;
                    totals.0 += stats.traversal_distance_count;
                    totals.1 += stats.rescore_distance_count;
                    totals.2 += stats.screened_count;
                }
                Ok(totals)
            })
            .map_err(to_python_error)?;
        let inner = self.inner.read();
        let screen_row_bytes = inner.screen_row_bytes();
        let traversal_row_bytes = match inner.sq8_scale() {
            Some(_) => sagitta_index::quantizer::Sq8Quantizer::stride_for(dim),
            None => dim * 4,
        };
        #[allow(clippy::cast_precision_loss)]
        let rows = batch.rows.max(1) as f64;
        let dict = PyDict::new(py);
        #[allow(clippy::cast_precision_loss)]
        {
            dict.set_item("traversal_distances", traversal as f64 / rows)?;
            dict.set_item("rescore_distances", rescored as f64 / rows)?;
            dict.set_item("screened", screened as f64 / rows)?;
            dict.set_item(
                "bytes_read",
                (traversal * traversal_row_bytes + screened * screen_row_bytes + rescored * dim * 4)
                    as f64
                    / rows,
            )?;
        }
        dict.set_item("traversal_row_bytes", traversal_row_bytes)?;
        dict.set_item("screen_row_bytes", screen_row_bytes)?;
        Ok(dict)
    }

    /// Codes every row for the 1-bit first pass (`search(..., first_pass=True)`); rows
    /// added later are coded as they come. False without trained SQ8 codes or when done
    /// already. Not saved: a loaded index needs this call again.
    #[pyo3(signature = (threads = 0))]
    fn enable_first_pass(&self, py: Python<'_>, threads: usize) -> PyResult<bool> {
        py.allow_threads(|| self.inner.write().enable_first_pass(threads))
            .map_err(to_python_error)
    }

    /// Marks an id deleted (never returned again). Returns False if unknown or already deleted.
    fn mark_deleted(&self, id: u64) -> bool {
        self.inner.read().mark_deleted(id)
    }

    /// Memory by part: graph, codes, screen (1-bit first-pass rows), vectors, index (what traversal touches) and total.
    fn memory_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let usage = self.inner.read().memory_usage();
        let dict = PyDict::new(py);
        dict.set_item("graph", usage.graph_bytes)?;
        dict.set_item("codes", usage.codes_bytes)?;
        dict.set_item("screen", usage.screen_bytes)?;
        dict.set_item("vectors", usage.vectors_bytes)?;
        dict.set_item("index", usage.index_bytes())?;
        dict.set_item("total", usage.total_bytes())?;
        Ok(dict)
    }

    /// Saves to `path` atomically (temporary file, fsync, rename). Inserts wait meanwhile.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.allow_threads(|| {
            let guard = self.inner.write();
            write_atomically(&path, |writer| guard.save(writer))
        })
    }

    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<HnswIndex> {
        let inner = py.allow_threads(|| {
            let mut reader = open_reader(&path)?;
            CoreHnsw::load(&mut reader).map_err(to_python_error)
        })?;
        Ok(HnswIndex {
            inner: RwLock::new(inner),
            default_id_lock: parking_lot::Mutex::new(()),
        })
    }

    fn __repr__(&self) -> String {
        let inner = self.inner.read();
        format!(
            "HnswIndex(dim={}, metric='{}', m={}, ef_construction={}, quantization='{}', len={})",
            inner.dim(),
            inner.metric().name(),
            inner.params().m,
            inner.params().ef_construction,
            inner.params().quantization.name(),
            inner.len()
        )
    }
}

/// The instruction set the distance kernels use on this CPU, e.g. "avx512-vnni".
#[pyfunction]
fn simd_level() -> &'static str {
    sagitta_kernels::detected_simd_level().name()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<FlatIndex>()?;
    m.add_class::<HnswIndex>()?;
    m.add_function(wrap_pyfunction!(simd_level, m)?)?;
    let py = m.py();
    m.add("SagittaError", py.get_type::<SagittaError>())?;
    m.add("DimensionError", py.get_type::<DimensionError>())?;
    m.add(
        "InvalidParameterError",
        py.get_type::<InvalidParameterError>(),
    )?;
    m.add("DuplicateIdError", py.get_type::<DuplicateIdError>())?;
    m.add("CapacityError", py.get_type::<CapacityError>())?;
    m.add("FormatError", py.get_type::<FormatError>())?;
    engine::register(m)?;
    Ok(())
}
