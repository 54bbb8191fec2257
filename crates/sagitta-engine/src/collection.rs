//! A collection: a directory holding a manifest (the configuration) and one write-ahead log
//! per shard (`shard-<i>.wal`). Points go to shard `routing_hash(id) % shard_count`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use sagitta_index::hnsw::AddProgress;
use sagitta_index::IndexError;
use sagitta_storage::fs::{remove_if_exists, FileSystem};
use sagitta_storage::manifest;

use crate::codec::Operation;
use crate::error::{EngineError, Result};
use crate::filter::Filter;
use crate::payload_index::{check_field_name, FieldType, PayloadSchema, MAX_INDEXED_FIELDS};
use crate::point::{Distance, Point, PointId};
use crate::policy::{OptimizerPolicy, Work};
use crate::query::{user_score, within_threshold, ScoredPoint, SearchRequest, Strategy};
use crate::shard::Shard;

/// Largest vector dimension.
pub const MAX_DIMENSION: usize = 65_536;
/// The largest vector norm stored or queried: for norms up to B, |x·y| ≤ B² and
/// ‖x − y‖² ≤ 4B², so with B = 4e18 every score (and every partial sum of one, which the
/// bound covers too) stays below 6.4e37, under f32::MAX (3.4e38) with room for rounding.
/// Larger vectors would return infinite scores, which JSON writes as null.
pub const MAX_VECTOR_NORM: f64 = 4e18;
/// Most shards per collection.
pub const MAX_SHARDS: usize = 256;
/// Largest payload per point (JSON text), 1 MiB.
pub const MAX_PAYLOAD_BYTES: usize = 1 << 20;
/// Largest `limit` (k) of a search.
pub const MAX_LIMIT: usize = 10_000;

const CONFIG_VERSION: u8 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectionConfig {
    pub dim: usize,
    pub distance: Distance,
    pub shard_count: usize,
}

impl CollectionConfig {
    fn validate(&self) -> Result<()> {
        check_range("dim", self.dim, 1, MAX_DIMENSION)?;
        check_range("shard_number", self.shard_count, 1, MAX_SHARDS)
    }

    /// A vector must have the collection's dimension, finite values and a norm of at most
    /// [`MAX_VECTOR_NORM`]; errors name `name()` (a point id, or "query").
    pub(crate) fn check_vector(&self, vector: &[f32], name: impl Fn() -> String) -> Result<()> {
        if vector.len() != self.dim {
            return Err(EngineError::WrongVectorDimension {
                point: name(),
                expected: self.dim,
                received: vector.len(),
            });
        }
        if let Some(position) = vector.iter().position(|v| !v.is_finite()) {
            return Err(EngineError::NonFiniteValue {
                point: name(),
                position,
            });
        }
        let norm = vector
            .iter()
            .map(|v| f64::from(*v) * f64::from(*v))
            .sum::<f64>()
            .sqrt();
        if norm > MAX_VECTOR_NORM {
            return Err(EngineError::VectorNormTooLarge {
                point: name(),
                norm,
                limit: MAX_VECTOR_NORM,
            });
        }
        Ok(())
    }

    /// Validates and normalizes one point (Cosine vectors are stored unit-length).
    pub(crate) fn prepare(&self, point: Point) -> Result<Point> {
        self.check_vector(&point.vector, || EngineError::point(&point.id))?;
        if let Some(payload) = &point.payload {
            check_payload(&point.id.to_string(), payload)?;
        }
        let mut point = point;
        if self.distance == Distance::Cosine {
            normalize(&mut point.vector);
        }
        Ok(point)
    }

    /// The collection manifest: configuration and payload schema (docs/format.md).
    fn encode(&self, schema: &PayloadSchema) -> Vec<u8> {
        let mut out = vec![CONFIG_VERSION, self.distance.code()];
        out.extend_from_slice(&u32::try_from(self.dim).expect("validated").to_le_bytes());
        out.extend_from_slice(
            &u32::try_from(self.shard_count)
                .expect("validated")
                .to_le_bytes(),
        );
        out.extend_from_slice(&u32::try_from(schema.len()).expect("bounded").to_le_bytes());
        for (field, kind) in schema {
            out.push(kind.code());
            out.extend_from_slice(&u16::try_from(field.len()).expect("bounded").to_le_bytes());
            out.extend_from_slice(field.as_bytes());
        }
        out
    }

    fn decode(bytes: &[u8]) -> Option<(CollectionConfig, PayloadSchema)> {
        if bytes.len() < 14 || bytes[0] != CONFIG_VERSION {
            return None;
        }
        let config = CollectionConfig {
            distance: Distance::from_code(bytes[1])?,
            dim: u32::from_le_bytes(bytes[2..6].try_into().ok()?) as usize,
            shard_count: u32::from_le_bytes(bytes[6..10].try_into().ok()?) as usize,
        };
        config.validate().ok()?;
        let count = u32::from_le_bytes(bytes[10..14].try_into().ok()?) as usize;
        let mut rest = &bytes[14..];
        let mut schema = PayloadSchema::new();
        for _ in 0..count {
            let kind = FieldType::from_code(*rest.first()?)?;
            let length = u16::from_le_bytes(rest.get(1..3)?.try_into().ok()?) as usize;
            let field = std::str::from_utf8(rest.get(3..3 + length)?).ok()?;
            check_field_name(field).ok()?;
            schema.insert(field.to_string(), kind);
            rest = &rest[3 + length..];
        }
        rest.is_empty().then_some((config, schema))
    }
}

/// The shard a point belongs to.
fn shard_index(id: &PointId, shard_count: usize) -> usize {
    #[allow(clippy::cast_possible_truncation)]
    let index = (id.routing_hash() % shard_count as u64) as usize;
    index
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

/// A cancelled segment build is a cancelled import, not an index failure.
fn import_error(error: EngineError) -> EngineError {
    match error {
        EngineError::Index(IndexError::Cancelled) => EngineError::Cancelled {
            operation: "import",
        },
        other => other,
    }
}

fn check_range(name: &'static str, value: usize, min: usize, max: usize) -> Result<()> {
    if value < min || value > max {
        return Err(EngineError::ParameterOutOfRange {
            name,
            value,
            min,
            max,
        });
    }
    Ok(())
}

pub struct Collection {
    config: CollectionConfig,
    /// Indexed payload fields; the lock also serializes their changes.
    schema: Mutex<PayloadSchema>,
    shards: Vec<Shard>,
    directory: PathBuf,
    policy: RwLock<OptimizerPolicy>,
    maintenance: Mutex<MaintenanceState>,
}

/// The optimizer's last failure and when it may try again.
#[derive(Default)]
struct MaintenanceState {
    last_error: Option<String>,
    retry_after: Option<Instant>,
}

/// Green: nothing to do. Yellow: points wait in a write buffer or a seal/merge runs or is
/// planned. Red: a shard is poisoned by an I/O error and refuses writes until reopened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    Green,
    Yellow,
    Red,
}

impl Health {
    /// The name Qdrant's collection info uses.
    pub fn name(self) -> &'static str {
        match self {
            Health::Green => "green",
            Health::Yellow => "yellow",
            Health::Red => "red",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct CollectionStatus {
    pub health: Health,
    /// Live points.
    pub points: usize,
    /// Live points in sealed (HNSW-indexed) segments.
    pub indexed: usize,
    pub segments: usize,
    /// The optimizer's last error, until a later unit of work succeeds.
    pub optimizer_error: Option<String>,
    /// Why a shard refuses writes (health is red), until the collection is reopened
    /// ([`crate::Database::reopen_collection`]) after the cause is fixed.
    pub write_error: Option<String>,
}

fn shard_path(directory: &Path, index: usize) -> PathBuf {
    directory.join(format!("shard-{index}"))
}

/// Opens (creating if missing) and replays every shard log of a collection.
fn open_shards(
    fs: &dyn FileSystem,
    directory: &Path,
    config: &CollectionConfig,
    schema: &PayloadSchema,
) -> Result<Vec<Shard>> {
    (0..config.shard_count)
        .map(|index| {
            Shard::open(
                fs,
                &shard_path(directory, index),
                config.dim,
                config.distance,
                schema,
            )
        })
        .collect()
}

impl Collection {
    fn assemble(
        config: CollectionConfig,
        schema: PayloadSchema,
        shards: Vec<Shard>,
        directory: &Path,
    ) -> Collection {
        Collection {
            config,
            schema: Mutex::new(schema),
            shards,
            directory: directory.to_path_buf(),
            policy: RwLock::new(OptimizerPolicy::default()),
            maintenance: Mutex::new(MaintenanceState::default()),
        }
    }

    /// Creates a collection in `directory` (which must not hold one).
    pub fn create(
        fs: &dyn FileSystem,
        directory: &Path,
        config: CollectionConfig,
    ) -> Result<Collection> {
        config.validate()?;
        if manifest::load(fs, directory)?.is_some() {
            return Err(EngineError::CollectionExists {
                path: directory.display().to_string(),
            });
        }
        fs.create_dir_all(directory)?;
        // Shard logs first, manifest last: a crash in between leaves no manifest, so the
        // half-made collection does not exist and can be created again.
        let schema = PayloadSchema::new();
        let shards = open_shards(fs, directory, &config, &schema)?;
        manifest::publish(fs, directory, &config.encode(&schema))?;
        Ok(Collection::assemble(config, schema, shards, directory))
    }

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
    pub fn import_with_progress(
        fs: &dyn FileSystem,
        directory: &Path,
        config: CollectionConfig,
        points: Vec<Point>,
        progress: &ImportProgress,
    ) -> Result<(Collection, ImportReport)> {
        config.validate()?;
        if manifest::load(fs, directory)?.is_some() {
            return Err(EngineError::CollectionExists {
                path: directory.display().to_string(),
            });
        }
        let mut last_of: HashMap<PointId, usize> = HashMap::with_capacity(points.len());
        for (position, point) in points.iter().enumerate() {
            last_of.insert(point.id, position);
        }
        progress.total.store(last_of.len(), Ordering::Relaxed);
        let mut per_shard: Vec<Vec<Point>> = vec![Vec::new(); config.shard_count];
        for (position, point) in points.into_iter().enumerate() {
            if last_of[&point.id] == position {
                let point = config.prepare(point)?;
                per_shard[shard_index(&point.id, config.shard_count)].push(point);
            }
        }
        fs.create_dir_all(directory)?;
        let mut report = ImportReport {
            points: last_of.len(),
            segments: per_shard.iter().filter(|points| !points.is_empty()).count(),
            bytes_written: 0,
        };
        // One shard at a time: each segment build already uses every core.
        let mut shards = Vec::with_capacity(config.shard_count);
        for (index, points) in per_shard.into_iter().enumerate() {
            progress.check()?;
            let (shard, written) = Shard::write_imported(
                fs,
                &shard_path(directory, index),
                points,
                config.dim,
                config.distance,
                &progress.rows,
            )
            .map_err(import_error)?;
            shards.push(shard);
            report.bytes_written += written;
        }
        fs.sync_dir(directory)?;
        let schema = PayloadSchema::new();
        let encoded = config.encode(&schema);
        progress.check()?;
        manifest::publish(fs, directory, &encoded)?;
        report.bytes_written += encoded.len() as u64;
        Ok((
            Collection::assemble(config, schema, shards, directory),
            report,
        ))
    }

    /// Opens the collection in `directory`, replaying every shard's log.
    pub fn open(fs: &dyn FileSystem, directory: &Path) -> Result<Collection> {
        let bytes =
            manifest::load(fs, directory)?.ok_or_else(|| EngineError::CollectionNotFound {
                path: directory.display().to_string(),
            })?;
        let (config, schema) =
            CollectionConfig::decode(&bytes).ok_or_else(|| EngineError::Corrupt {
                reason: format!(
                    "{}: collection configuration does not decode",
                    directory.display()
                ),
            })?;
        let shards = open_shards(fs, directory, &config, &schema)?;
        Ok(Collection::assemble(config, schema, shards, directory))
    }

    /// Removes the files of the collection in `directory`: the manifest first (so a crash
    /// midway leaves nothing that opens), then every file of every possible shard
    /// directory, so no stale log or segment can be picked up by a later collection of the
    /// same name. Missing files are fine.
    pub fn remove_files(fs: &dyn FileSystem, directory: &Path) -> Result<()> {
        fs.create_dir_all(directory)?;
        remove_if_exists(fs, &directory.join(manifest::MANIFEST_FILE))?;
        fs.sync_dir(directory)?;
        for index in 0..MAX_SHARDS {
            let shard = shard_path(directory, index);
            let files = fs.list(&shard)?;
            for file in &files {
                remove_if_exists(fs, file)?;
            }
            if !files.is_empty() {
                fs.sync_dir(&shard)?;
            }
        }
        Ok(())
    }

    /// Seals every shard's write buffer into an HNSW segment (see `Shard::seal`); returns
    /// the number of points sealed. Searches keep running meanwhile; writes to a shard
    /// wait while it seals.
    pub fn optimize(&self, fs: &dyn FileSystem) -> Result<usize> {
        self.shards.iter().map(|shard| shard.seal(fs)).sum()
    }

    /// Makes every write acknowledged so far durable (writes made with `wait = false`
    /// included): syncs every shard's log, all of them even if one fails (the first
    /// error is returned).
    pub fn flush(&self) -> Result<()> {
        let mut first_error = None;
        for shard in &self.shards {
            if let Err(error) = shard.flush() {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Waits for running optimizer work, then makes every shard refuse writes and new
    /// work: the collection is being dropped and its files are about to go.
    pub fn close(&self) {
        self.shards.iter().for_each(Shard::close);
    }

    /// Indexes payload field `field` (a dotted key) as `kind` in every segment, now and
    /// from now on, and records it in the collection manifest (durably, before returning).
    /// Re-creating an index with another type replaces it.
    pub fn create_payload_index(
        &self,
        fs: &dyn FileSystem,
        field: &str,
        kind: FieldType,
    ) -> Result<()> {
        check_field_name(field)?;
        let mut schema = self.schema.lock();
        if !schema.contains_key(field) && schema.len() >= MAX_INDEXED_FIELDS {
            return Err(EngineError::InvalidPayloadIndex {
                field: field.to_string(),
                reason: format!("a collection indexes at most {MAX_INDEXED_FIELDS} fields"),
            });
        }
        let mut next = schema.clone();
        next.insert(field.to_string(), kind);
        manifest::publish(fs, &self.directory, &self.config.encode(&next))?;
        *schema = next;
        self.shards
            .iter()
            .for_each(|shard| shard.set_payload_index(field, Some(kind)));
        Ok(())
    }

    /// Drops the payload index of `field` (a no-op if there is none).
    pub fn delete_payload_index(&self, fs: &dyn FileSystem, field: &str) -> Result<()> {
        let mut schema = self.schema.lock();
        if !schema.contains_key(field) {
            return Ok(());
        }
        let mut next = schema.clone();
        next.remove(field);
        manifest::publish(fs, &self.directory, &self.config.encode(&next))?;
        *schema = next;
        self.shards
            .iter()
            .for_each(|shard| shard.set_payload_index(field, None));
        Ok(())
    }

    /// The indexed payload fields.
    pub fn payload_schema(&self) -> PayloadSchema {
        self.schema.lock().clone()
    }

    pub fn policy(&self) -> OptimizerPolicy {
        self.policy.read().clone()
    }

    pub fn set_policy(&self, policy: OptimizerPolicy) {
        *self.policy.write() = policy;
    }

    /// Runs the first unit of optimizer work any shard has (see [`crate::optimizer`]);
    /// returns whether there was one. After a failure the collection is left alone for
    /// the policy's `retry_after_error`, and its status reports the error.
    pub fn maintain(&self, fs: &dyn FileSystem) -> Result<bool> {
        if self
            .maintenance
            .lock()
            .retry_after
            .is_some_and(|after| Instant::now() < after)
        {
            return Ok(false);
        }
        let policy = self.policy();
        let Some((shard, work)) = self
            .shards
            .iter()
            .find_map(|shard| shard.planned_work(&policy).map(|work| (shard, work)))
        else {
            return Ok(false);
        };
        let result = match work {
            Work::Seal => shard.seal(fs),
            Work::Merge(ids) => shard.merge(fs, &ids),
        };
        let mut state = self.maintenance.lock();
        match result {
            Ok(_) => {
                *state = MaintenanceState::default();
                Ok(true)
            }
            Err(error) => {
                state.last_error = Some(error.to_string());
                state.retry_after = Some(Instant::now() + policy.retry_after_error);
                Err(error)
            }
        }
    }

    /// One step of the write-buffer indexer in every shard (up to `max_rows` slots each);
    /// returns whether any shard indexed something. An error is recorded in the status.
    pub fn index_buffers(&self, max_rows: usize) -> bool {
        let policy = self.policy();
        let mut worked = false;
        for shard in &self.shards {
            match shard.index_buffer(&policy, max_rows) {
                Ok(added) => worked |= added,
                Err(error) => self.maintenance.lock().last_error = Some(error.to_string()),
            }
        }
        worked
    }

    pub fn status(&self) -> CollectionStatus {
        let policy = self.policy();
        // The reason names files relative to the collection: messages reach clients, and
        // the server's absolute paths are not theirs to see.
        let prefix = format!("{}/", self.directory.display());
        let write_error = self.shards.iter().enumerate().find_map(|(index, shard)| {
            shard.write_failure().map(|cause| {
                format!(
                    "shard {index} refuses writes: {}",
                    cause.replace(&prefix, "")
                )
            })
        });
        let health = if write_error.is_some() {
            Health::Red
        } else if self
            .shards
            .iter()
            .any(|shard| shard.is_busy() || shard.has_pending_work(&policy))
        {
            Health::Yellow
        } else {
            Health::Green
        };
        let (indexed, buffered) = self.point_counts();
        CollectionStatus {
            health,
            points: indexed + buffered,
            indexed,
            segments: self.shards.iter().map(Shard::segment_count).sum(),
            optimizer_error: self.maintenance.lock().last_error.clone(),
            write_error,
        }
    }

    /// Points in sealed (indexed) segments and in write buffers.
    pub fn point_counts(&self) -> (usize, usize) {
        self.shards
            .iter()
            .map(Shard::point_counts)
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
    }

    pub fn config(&self) -> &CollectionConfig {
        &self.config
    }

    pub fn directory(&self) -> &Path {
        &self.directory
    }

    fn shard_of(&self, id: &PointId) -> usize {
        shard_index(id, self.config.shard_count)
    }

    /// Inserts or replaces points. Every point is validated before anything is written;
    /// with `wait`, returns after the shard logs are fsynced (durable and visible), else
    /// after the append (visible). Each shard's part is one log record: all or nothing.
    pub fn upsert(&self, points: Vec<Point>, wait: bool) -> Result<()> {
        let mut per_shard: Vec<Vec<Point>> = vec![Vec::new(); self.shards.len()];
        for point in points {
            let point = self.config.prepare(point)?;
            per_shard[self.shard_of(&point.id)].push(point);
        }
        self.write_shards(
            per_shard
                .into_iter()
                .map(|points| (!points.is_empty()).then_some(Operation::Upsert(points)))
                .collect(),
            wait,
        )
    }

    /// Logs and applies `operations[i]` in shard `i`, in parallel when several shards have
    /// work: each shard has its own log and fsync, so a batch spanning shards pays for one
    /// fsync in wall time, not one per shard. Returns the first error.
    fn write_shards(&self, operations: Vec<Option<Operation>>, wait: bool) -> Result<()> {
        let work: Vec<(&Shard, Operation)> = self
            .shards
            .iter()
            .zip(operations)
            .filter_map(|(shard, operation)| operation.map(|operation| (shard, operation)))
            .collect();
        if work.len() <= 1 {
            return work
                .into_iter()
                .try_for_each(|(shard, operation)| shard.write(operation, wait));
        }
        std::thread::scope(|scope| {
            let handles: Vec<_> = work
                .into_iter()
                .map(|(shard, operation)| scope.spawn(move || shard.write(operation, wait)))
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().expect("shard writers do not panic"))
                .collect::<Result<Vec<()>>>()
                .map(|_| ())
        })
    }

    /// Splits `ids` by shard and logs `operation(ids of that shard)` in each shard that
    /// has any.
    fn write_by_id(
        &self,
        ids: &[PointId],
        wait: bool,
        operation: impl Fn(Vec<PointId>) -> Operation,
    ) -> Result<()> {
        let mut per_shard: Vec<Vec<PointId>> = vec![Vec::new(); self.shards.len()];
        for id in ids {
            per_shard[self.shard_of(id)].push(*id);
        }
        self.write_shards(
            per_shard
                .into_iter()
                .map(|ids| (!ids.is_empty()).then(|| operation(ids)))
                .collect(),
            wait,
        )
    }

    /// Deletes points by id (unknown ids are ignored).
    pub fn delete(&self, ids: &[PointId], wait: bool) -> Result<()> {
        self.write_by_id(ids, wait, Operation::Delete)
    }

    /// Merges the keys of `payload` (a JSON object) into the payload of each point in `ids`
    /// (unknown ids are ignored).
    pub fn set_payload(&self, ids: &[PointId], payload: &str, wait: bool) -> Result<()> {
        check_payload("(set_payload)", payload)?;
        self.write_by_id(ids, wait, |ids| Operation::SetPayload {
            ids,
            payload: payload.to_string(),
        })
    }

    /// Replaces the payload of each point in `ids` with `payload` (a JSON object).
    pub fn overwrite_payload(&self, ids: &[PointId], payload: &str, wait: bool) -> Result<()> {
        check_payload("(overwrite_payload)", payload)?;
        self.write_by_id(ids, wait, |ids| Operation::OverwritePayload {
            ids,
            payload: payload.to_string(),
        })
    }

    /// Removes top-level `keys` from the payload of each point in `ids`.
    pub fn delete_payload_keys(&self, ids: &[PointId], keys: &[String], wait: bool) -> Result<()> {
        self.write_by_id(ids, wait, |ids| Operation::DeletePayloadKeys {
            ids,
            keys: keys.to_vec(),
        })
    }

    /// Ids of every point passing `filter` (for payload updates addressed by filter).
    pub fn matching_ids(&self, filter: &Filter) -> Vec<PointId> {
        self.shards
            .iter()
            .flat_map(|shard| shard.matching_ids(Some(filter)))
            .collect()
    }

    pub fn get(&self, id: &PointId) -> Option<Point> {
        self.shards[self.shard_of(id)].get(id)
    }

    /// Checks every shard's ownership invariants (see `Shard::check_invariants`: each
    /// live point in exactly one place, counts that match). O(points): for tests, which
    /// call it after every step of the crash simulation.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        for (index, shard) in self.shards.iter().enumerate() {
            shard
                .check_invariants()
                .map_err(|error| format!("shard {index}: {error}"))?;
        }
        Ok(())
    }

    /// Exact count of live points (passing `filter` when given).
    pub fn count(&self, filter: Option<&Filter>) -> usize {
        self.shards.iter().map(|shard| shard.count(filter)).sum()
    }

    /// One page of points passing `filter`, in id order, starting at `offset` (inclusive);
    /// returns the page and the id to continue from (`None` at the end).
    pub fn scroll(
        &self,
        offset: Option<PointId>,
        limit: usize,
        filter: Option<&Filter>,
    ) -> Result<(Vec<Point>, Option<PointId>)> {
        check_range("limit", limit, 1, MAX_LIMIT)?;
        // Each shard stops at its (limit + 1)-th match from `offset`: a page costs the
        // points up to its end, so paging through a collection is linear, not quadratic.
        let mut ids: Vec<PointId> = self
            .shards
            .iter()
            .flat_map(|shard| shard.scroll_ids(offset, filter, limit + 1))
            .collect();
        ids.sort_unstable();
        let next = ids.get(limit).copied();
        let page = ids
            .into_iter()
            .take(limit)
            .filter_map(|id| self.get(&id))
            .collect();
        Ok((page, next))
    }

    /// Deletes every point passing `filter`; returns how many were matched. The matched ids
    /// are logged (not the filter), so replay is deterministic.
    pub fn delete_by_filter(&self, filter: &Filter, wait: bool) -> Result<usize> {
        let ids = self.matching_ids(filter);
        self.delete(&ids, wait)?;
        Ok(ids.len())
    }

    /// Every live point (shard by shard).
    pub fn points(&self) -> Vec<Point> {
        self.shards.iter().flat_map(Shard::points).collect()
    }

    /// Exact top-`limit` over every shard, among points passing `filter`.
    pub fn search(
        &self,
        query: &[f32],
        limit: usize,
        filter: Option<&Filter>,
    ) -> Result<Vec<ScoredPoint>> {
        self.query(&SearchRequest {
            filter,
            ..SearchRequest::new(query, limit)
        })
    }

    /// Runs several searches, spread over the available cores; results in request order.
    pub fn query_batch(&self, requests: &[SearchRequest<'_>]) -> Result<Vec<Vec<ScoredPoint>>> {
        let threads = std::thread::available_parallelism()
            .map_or(1, std::num::NonZero::get)
            .min(requests.len().max(1));
        if threads <= 1 {
            return requests.iter().map(|request| self.query(request)).collect();
        }
        let chunk = requests.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = requests
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .map(|request| self.query(request))
                            .collect::<Result<Vec<_>>>()
                    })
                })
                .collect();
            let mut results = Vec::with_capacity(requests.len());
            for handle in handles {
                results.extend(handle.join().expect("search threads do not panic")?);
            }
            Ok(results)
        })
    }

    /// One search: exact top `offset + limit` among points passing `filter`, the first
    /// `offset` skipped, and (with `score_threshold`) only scores at least as good as it —
    /// similarity ≥ threshold for Cosine/Dot, distance ≤ threshold for Euclid.
    pub fn query(&self, request: &SearchRequest<'_>) -> Result<Vec<ScoredPoint>> {
        let query = request.vector;
        check_range("limit", request.limit, 1, MAX_LIMIT)?;
        check_range("offset", request.offset, 0, MAX_LIMIT)?;
        if let Strategy::Beam(ef) = request.strategy {
            check_range("hnsw_ef", ef, 1, sagitta_index::limits::MAX_EF)?;
        }
        self.config.check_vector(query, || "query".to_string())?;
        let mut query = query.to_vec();
        if self.config.distance == Distance::Cosine {
            normalize(&mut query);
        }
        let wanted = request.offset + request.limit;
        let mut hits = Vec::new();
        for shard in &self.shards {
            hits.extend(shard.search(&query, wanted, request.filter, request.strategy)?);
        }
        hits.sort_by(|a, b| {
            a.distance
                .total_cmp(&b.distance)
                .then(a.point.id.cmp(&b.point.id))
        });
        hits.truncate(wanted);
        let distance = self.config.distance;
        Ok(hits
            .into_iter()
            .skip(request.offset)
            .map(|hit| ScoredPoint {
                id: hit.point.id,
                score: user_score(hit.distance, distance),
                payload: hit.point.payload,
                vector: hit.point.vector,
            })
            .filter(|hit| {
                request
                    .score_threshold
                    .is_none_or(|threshold| within_threshold(hit.score, threshold, distance))
            })
            .collect())
    }
}

/// A payload must be a JSON object of at most [`MAX_PAYLOAD_BYTES`].
fn check_payload(point: &str, payload: &str) -> Result<()> {
    if payload.len() > MAX_PAYLOAD_BYTES {
        return Err(EngineError::PayloadTooLarge {
            point: point.to_string(),
            size: payload.len(),
            limit: MAX_PAYLOAD_BYTES,
        });
    }
    match serde_json::from_str::<serde_json::Value>(payload) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err(EngineError::InvalidPayload {
            point: point.to_string(),
            reason: "the top level must be an object".to_string(),
        }),
        Err(error) => Err(EngineError::InvalidPayload {
            point: point.to_string(),
            reason: error.to_string(),
        }),
    }
}

fn normalize(vector: &mut [f32]) {
    let norm = f64::from((sagitta_kernels::kernels().norm_squared_f32)(vector)).sqrt();
    let norm = if norm.is_finite() {
        norm
    } else {
        vector
            .iter()
            .map(|v| f64::from(*v).powi(2))
            .sum::<f64>()
            .sqrt()
    };
    if norm > 0.0 {
        for value in vector.iter_mut() {
            #[allow(clippy::cast_possible_truncation)]
            let scaled = (f64::from(*value) / norm) as f32;
            *value = scaled;
        }
    }
}
