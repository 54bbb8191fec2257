//! A collection: a directory holding a manifest (the configuration) and one write-ahead log
//! per shard (`shard-<i>.wal`). Points go to shard `routing_hash(id) % shard_count`.

mod config;
mod facet;
mod import;
pub mod peers;
mod read;
pub mod snapshot;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use sagitta_storage::fs::{remove_if_exists, FileSystem};
use sagitta_storage::manifest;
use sagitta_storage::pageio::PageCache;

use crate::codec::Operation;
use crate::error::{EngineError, Result};
use crate::filter::Filter;
use crate::graph::GraphConfig;
use crate::machine::{Machine, ShardPlacement};
use crate::payload_index::{check_field_name, FieldType, PayloadSchema, MAX_INDEXED_FIELDS};
use crate::point::{Point, PointId};
use crate::policy::{OptimizerPolicy, Work};
use crate::shard::{Shard, ShardStorage};
use crate::spaces::{SpaceSlice, VectorSpaces};

use config::check_payload;
pub use config::{
    CollectionConfig, Datatype, SegmentKindName, StorageConfig, DEFAULT_PARTITION_SIZE,
    MAX_DIMENSION, MAX_LIMIT, MAX_PAGE_CACHE_MB, MAX_PARTITION_SIZE, MAX_PAYLOAD_BYTES, MAX_SHARDS,
    MAX_STRIPE_DIRS, MAX_VECTOR_NORM, MIN_PARTITION_SIZE,
};
pub use facet::FacetValue;
pub use import::{ImportProgress, ImportReport, ImportSource};

/// The shard a point belongs to.
pub(super) fn shard_index(id: &PointId, shard_count: usize) -> usize {
    #[allow(clippy::cast_possible_truncation)]
    let index = (id.routing_hash() % shard_count as u64) as usize;
    index
}

pub struct Collection {
    config: CollectionConfig,
    /// Named vectors (none: one unnamed vector of the configured dimension).
    spaces: Arc<VectorSpaces>,
    /// Indexed payload fields; the lock also serializes every change of the manifest.
    schema: Mutex<PayloadSchema>,
    /// The settings document the manifest records for the application (the server keeps
    /// Qdrant's collection `metadata` and `strict_mode_config` there); empty: none.
    settings: RwLock<String>,
    shards: Vec<Shard>,
    directory: PathBuf,
    policy: RwLock<OptimizerPolicy>,
    maintenance: Mutex<MaintenanceState>,
    /// The worker pools its shards run on, and which shard runs where.
    machine: Arc<Machine>,
    placement: ShardPlacement,
    /// Set on rank 0 of a scale-out job: the other ranks, which hold the other points.
    link: Option<peers::PeerLink>,
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
    /// Segments whose graphs were built with another graph config than the collection's
    /// ([`Collection::set_graph`]): the optimizer rebuilds them.
    pub stale_segments: usize,
    /// RAM the sealed segments' indexes hold (graphs, codes, vectors kept in RAM; ids and
    /// payloads not counted).
    pub index_ram_bytes: u64,
    /// Bytes of the sealed segments' files.
    pub disk_bytes: u64,
    /// The optimizer's last error, until a later unit of work succeeds.
    pub optimizer_error: Option<String>,
    /// Why a shard refuses writes (health is red), until the collection is reopened
    /// ([`crate::Database::reopen_collection`]) after the cause is fixed.
    pub write_error: Option<String>,
    /// Where each shard runs ([`crate::machine`]).
    pub placement: ShardPlacement,
    /// Why the full vectors could not all be moved to the far tier (the kernel's last
    /// refusal), for a collection whose vectors tier is far.
    pub vectors_tier_error: Option<String>,
}

pub(super) fn shard_path(directory: &Path, index: usize) -> PathBuf {
    directory.join(format!("shard-{index}"))
}

/// Opens (creating if missing) and replays every shard log of a collection.
pub(super) fn open_shards(
    fs: &dyn FileSystem,
    directory: &Path,
    config: &CollectionConfig,
    spaces: &Arc<VectorSpaces>,
    schema: &PayloadSchema,
    stripe_roots: &[PathBuf],
) -> Result<Vec<Shard>> {
    let storage = shard_storage(config, spaces, stripe_roots);
    // each shard loads on its node's CPUs, so its segments' memory is first touched there
    let machine = Machine::detected();
    let placement = machine.place(config.storage.placement, config.shard_count);
    (0..config.shard_count)
        .map(|index| {
            let storage = storage.for_shard(&placement, index, config.storage.vectors_far);
            machine.on_pool_cpus(placement.pools[index], || {
                Shard::open(
                    fs,
                    &shard_path(directory, index),
                    config.dim,
                    config.distance,
                    schema,
                    &storage,
                )
            })
        })
        .collect()
}

/// The storage every shard of a collection shares: its segment kind, one page cache of
/// the configured size, and the collection's directories under the stripe roots.
pub(super) fn shard_storage(
    config: &CollectionConfig,
    spaces: &Arc<VectorSpaces>,
    stripe_roots: &[PathBuf],
) -> ShardStorage {
    ShardStorage {
        spaces: Arc::clone(spaces),
        kind: config.storage.segment_kind,
        element: config.storage.datatype.element(),
        partition_size: config.storage.partition_size,
        vectors_on_disk: config.storage.vectors_on_disk,
        page_cache: Arc::new(PageCache::new(config.storage.page_cache_mb << 20)),
        stripe_roots: stripe_roots.into(),
        graph: Arc::new(RwLock::new(config.storage.graph)),
        vectors_node: None,
        tier_error: Arc::default(),
    }
}

/// Stripe roots: at most [`config::MAX_STRIPE_DIRS`] of them (the collection's own
/// directory is the first stripe).
fn check_stripes(stripe_roots: &[PathBuf]) -> Result<()> {
    config::check_range(
        "stripe_dirs",
        stripe_roots.len(),
        0,
        config::MAX_STRIPE_DIRS,
    )
}

impl Collection {
    fn assemble(
        config: CollectionConfig,
        spaces: Arc<VectorSpaces>,
        (schema, settings): (PayloadSchema, String),
        shards: Vec<Shard>,
        directory: &Path,
    ) -> Collection {
        let machine = Machine::detected();
        let placement = machine.place(config.storage.placement, shards.len());
        Collection {
            config,
            spaces,
            schema: Mutex::new(schema),
            settings: RwLock::new(settings),
            shards,
            directory: directory.to_path_buf(),
            policy: RwLock::new(OptimizerPolicy::default()),
            maintenance: Mutex::new(MaintenanceState::default()),
            machine,
            placement,
            link: None,
        }
    }

    /// This collection with its shards placed on `machine`'s pools instead of the
    /// detected machine's (tests and benchmarks simulate several NUMA nodes this way;
    /// what the shards loaded at open stays where it was first touched, except full
    /// vectors kept on a far tier, which move to each shard's new far node).
    #[must_use]
    pub fn placed_on(mut self, machine: Arc<Machine>) -> Collection {
        self.placement = machine.place(self.config.storage.placement, self.shards.len());
        self.machine = machine;
        if self.config.storage.vectors_far {
            for (shard, &far) in self.shards.iter_mut().zip(&self.placement.far_nodes) {
                shard.move_vectors_to(far);
            }
        }
        self
    }

    /// How many resident pages of the sealed segments' full vectors lie on each NUMA
    /// node, as `(node, pages)` (where a far tier put them; the kernel's answer).
    pub fn vector_pages_by_node(&self) -> std::result::Result<Vec<(usize, usize)>, String> {
        let mut pages = std::collections::BTreeMap::new();
        for shard in &self.shards {
            shard.count_vector_pages(&mut pages)?;
        }
        Ok(pages.into_iter().collect())
    }

    /// Where each shard runs.
    pub fn placement(&self) -> &ShardPlacement {
        &self.placement
    }

    /// Runs `work` on every shard, each on its node's pool, at once (a single shard on the
    /// calling thread); the results in shard order, or the first shard's error.
    pub(crate) fn fan_out<T: Send>(
        &self,
        work: impl Fn(&Shard) -> Result<T> + Sync,
    ) -> Result<Vec<T>> {
        if let [shard] = self.shards.as_slice() {
            return Ok(vec![work(shard)?]);
        }
        let slots: Vec<Mutex<Option<Result<T>>>> =
            self.shards.iter().map(|_| Mutex::new(None)).collect();
        let work = &work;
        let jobs = self
            .shards
            .iter()
            .zip(&slots)
            .zip(&self.placement.pools)
            .map(|((shard, slot), &pool)| {
                let job: crate::machine::Job<'_> = Box::new(move || {
                    *slot.lock() = Some(work(shard));
                });
                (pool, job)
            })
            .collect();
        self.machine.run(jobs);
        slots
            .into_iter()
            .map(|slot| slot.into_inner().expect("every shard's job ran"))
            .collect()
    }

    /// Creates a collection in `directory` (which must not hold one).
    pub fn create(
        fs: &dyn FileSystem,
        directory: &Path,
        config: CollectionConfig,
    ) -> Result<Collection> {
        Collection::create_striped(fs, directory, config, &[])
    }

    /// [`Collection::create`] whose records files spread over `directory` and each of
    /// `stripe_roots` (the collection's directory on other devices; at most
    /// [`config::MAX_STRIPE_DIRS`]): a disk segment's partition `p` lies on stripe `p mod N`.
    pub fn create_striped(
        fs: &dyn FileSystem,
        directory: &Path,
        config: CollectionConfig,
        stripe_roots: &[PathBuf],
    ) -> Result<Collection> {
        Collection::create_with_spaces(fs, directory, config, VectorSpaces::default(), stripe_roots)
    }

    /// [`Collection::create_striped`] of a collection with named vectors `spaces` (none:
    /// one unnamed vector). With named vectors, `config.dim` must be their total size and
    /// the segment kind [`SegmentKindName::Spaces`] ([`CollectionConfig::named`] makes such
    /// a configuration).
    pub fn create_with_spaces(
        fs: &dyn FileSystem,
        directory: &Path,
        config: CollectionConfig,
        spaces: VectorSpaces,
        stripe_roots: &[PathBuf],
    ) -> Result<Collection> {
        config.validate()?;
        config.check_spaces(&spaces)?;
        let spaces = Arc::new(spaces);
        check_stripes(stripe_roots)?;
        if manifest::load(fs, directory)?.is_some() {
            return Err(EngineError::CollectionExists {
                path: directory.display().to_string(),
            });
        }
        fs.create_dir_all(directory)?;
        // Shard logs first, manifest last: a crash in between leaves no manifest, so the
        // half-made collection does not exist and can be created again.
        let schema = PayloadSchema::new();
        let shards = open_shards(fs, directory, &config, &spaces, &schema, stripe_roots)?;
        manifest::publish(fs, directory, &config.encode_with(&schema, &spaces))?;
        Ok(Collection::assemble(
            config,
            spaces,
            (schema, String::new()),
            shards,
            directory,
        ))
    }

    /// Opens the collection in `directory`, replaying every shard's log.
    pub fn open(fs: &dyn FileSystem, directory: &Path) -> Result<Collection> {
        Collection::open_striped(fs, directory, &[])
    }

    /// [`Collection::open`] of a collection made with [`Collection::create_striped`]:
    /// `stripe_roots` as given then (a records file on a stripe not given is an error
    /// naming it).
    pub fn open_striped(
        fs: &dyn FileSystem,
        directory: &Path,
        stripe_roots: &[PathBuf],
    ) -> Result<Collection> {
        check_stripes(stripe_roots)?;
        let bytes =
            manifest::load(fs, directory)?.ok_or_else(|| EngineError::CollectionNotFound {
                path: directory.display().to_string(),
            })?;
        let (config, schema, spaces, settings) = CollectionConfig::try_decode_with(&bytes)
            .map_err(|error| EngineError::Corrupt {
                reason: format!(
                    "{}: collection configuration does not decode: {error}",
                    directory.display()
                ),
            })?;
        let spaces = Arc::new(spaces);
        let shards = open_shards(fs, directory, &config, &spaces, &schema, stripe_roots)?;
        Ok(Collection::assemble(
            config,
            spaces,
            (schema, settings),
            shards,
            directory,
        ))
    }

    /// The settings document (a JSON object's text; empty when none was set).
    pub fn settings(&self) -> String {
        self.settings.read().clone()
    }

    /// Replaces the settings document with `text` (a JSON object, or empty for none),
    /// recorded in the collection manifest durably before returning.
    pub fn set_settings(&self, fs: &dyn FileSystem, text: &str) -> Result<()> {
        config::check_settings(text)?;
        let schema = self.schema.lock();
        let encoded = self.config().encode_all(&schema, &self.spaces, text);
        manifest::publish(fs, &self.directory, &encoded)?;
        *self.settings.write() = text.to_string();
        Ok(())
    }

    /// Removes the files of the collection in `directory`: the manifest first (so a crash
    /// midway leaves nothing that opens), then every file of every possible shard
    /// directory, so no stale log or segment can be picked up by a later collection of the
    /// same name. Missing files are fine.
    pub fn remove_files(fs: &dyn FileSystem, directory: &Path) -> Result<()> {
        Collection::remove_striped_files(fs, directory, &[])
    }

    /// [`Collection::remove_files`], and the collection's records files under each of
    /// `stripe_roots`.
    pub fn remove_striped_files(
        fs: &dyn FileSystem,
        directory: &Path,
        stripe_roots: &[PathBuf],
    ) -> Result<()> {
        fs.create_dir_all(directory)?;
        remove_if_exists(fs, &directory.join(manifest::MANIFEST_FILE))?;
        fs.sync_dir(directory)?;
        for root in std::iter::once(directory).chain(stripe_roots.iter().map(PathBuf::as_path)) {
            for index in 0..MAX_SHARDS {
                let shard = shard_path(root, index);
                let files = fs.list(&shard)?;
                for file in &files {
                    remove_if_exists(fs, file)?;
                }
                if !files.is_empty() {
                    fs.sync_dir(&shard)?;
                }
            }
        }
        Ok(())
    }

    /// Seals every shard's write buffer into a segment of the collection's kind (see
    /// `Shard::seal`); returns the number of points sealed. Searches keep running
    /// meanwhile; writes to a shard wait while it seals.
    pub fn optimize(&self, fs: &dyn FileSystem) -> Result<usize> {
        self.shards
            .iter()
            .zip(&self.placement.pools)
            .map(|(shard, &pool)| self.machine.on_pool_cpus(pool, || shard.seal(fs)))
            .sum()
    }

    /// Makes every write acknowledged so far durable (writes made with `wait = false`
    /// included): syncs every shard's log, all of them even if one fails (the first
    /// error is returned); of a linked collection, on every rank.
    pub fn flush(&self) -> Result<()> {
        let mut first_error = None;
        for shard in &self.shards {
            if let Err(error) = shard.flush() {
                first_error.get_or_insert(error);
            }
        }
        if let Some(link) = &self.link {
            // and on every rank: a recovery's writes go out unwaited, then this
            if let Err(error) = link.ask_all(|| peers::PeerCall::Flush {
                collection: link.name.clone(),
            }) {
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
        if let FieldType::Text(settings) = kind {
            settings
                .check()
                .map_err(|reason| EngineError::InvalidPayloadIndex {
                    field: field.to_string(),
                    reason,
                })?;
        }
        let mut schema = self.schema.lock();
        if !schema.contains_key(field) && schema.len() >= MAX_INDEXED_FIELDS {
            return Err(EngineError::InvalidPayloadIndex {
                field: field.to_string(),
                reason: format!("a collection indexes at most {MAX_INDEXED_FIELDS} fields"),
            });
        }
        let mut next = schema.clone();
        next.insert(field.to_string(), kind);
        let encoded = self
            .config()
            .encode_all(&next, &self.spaces, &self.settings.read());
        manifest::publish(fs, &self.directory, &encoded)?;
        *schema = next;
        self.shards
            .iter()
            .for_each(|shard| shard.set_payload_index(field, Some(kind)));
        drop(schema);
        self.index_everywhere(field, Some(kind))
    }

    /// Drops the payload index of `field` (a no-op if there is none).
    pub fn delete_payload_index(&self, fs: &dyn FileSystem, field: &str) -> Result<()> {
        let mut schema = self.schema.lock();
        if !schema.contains_key(field) {
            return Ok(());
        }
        let mut next = schema.clone();
        next.remove(field);
        let encoded = self
            .config()
            .encode_all(&next, &self.spaces, &self.settings.read());
        manifest::publish(fs, &self.directory, &encoded)?;
        *schema = next;
        self.shards
            .iter()
            .for_each(|shard| shard.set_payload_index(field, None));
        drop(schema);
        self.index_everywhere(field, None)
    }

    /// A payload index change made on the other ranks too, when linked.
    fn index_everywhere(&self, field: &str, kind: Option<FieldType>) -> Result<()> {
        let Some(link) = &self.link else {
            return Ok(());
        };
        link.ask_all(|| peers::PeerCall::Index {
            collection: link.name.clone(),
            field: field.to_string(),
            kind,
        })
        .map(|_| ())
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
        let Some((number, shard, work)) =
            self.shards.iter().enumerate().find_map(|(number, shard)| {
                shard
                    .planned_work(&policy)
                    .map(|work| (number, shard, work))
            })
        else {
            return Ok(false);
        };
        let started = Instant::now();
        // the build runs on the shard's node: its threads and the memory they fill
        let result = self
            .machine
            .on_pool_cpus(self.placement.pools[number], || match &work {
                Work::Seal => shard.seal(fs),
                Work::Merge(ids) => shard.merge(fs, ids),
                Work::Rebuild(id) => shard.merge(fs, &[*id]),
            });
        self.log_work(number, &work, &result, started);
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

    /// Logs a unit of optimizer work at info level (an error at warn): the collection (its
    /// directory's name), the shard, what was done, the points, the time it took.
    fn log_work(&self, shard: usize, work: &Work, result: &Result<usize>, started: Instant) {
        let name = self
            .directory
            .file_name()
            .unwrap_or_default()
            .to_string_lossy();
        let what = match work {
            Work::Seal => "sealed the write buffer into a segment".to_string(),
            Work::Merge(ids) if ids.len() == 1 => format!("vacuumed segment {}", ids[0]),
            Work::Merge(ids) => format!("merged segments {ids:?} into one"),
            Work::Rebuild(id) => {
                let graph = self.graph();
                format!(
                    "rebuilt segment {id} with graph m {} / ef_construct {}",
                    graph.m, graph.ef_construct
                )
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        match result {
            // 0 from a seal: another build held the shard, nothing was done
            Ok(0) if matches!(work, Work::Seal) => {}
            Ok(points) => log::info!(
                target: "sagitta::optimizer",
                "collection `{name}` shard {shard}: {what}: {points} points in {seconds:.3} s"
            ),
            Err(error) => log::warn!(
                target: "sagitta::optimizer",
                "collection `{name}` shard {shard}: {what} failed after {seconds:.3} s: {error}"
            ),
        }
    }

    /// One step of the write-buffer indexer in every shard (up to `max_rows` slots each);
    /// returns whether any shard indexed something. An error is recorded in the status.
    pub fn index_buffers(&self, max_rows: usize) -> bool {
        let policy = self.policy();
        let mut worked = false;
        for (shard, &pool) in self.shards.iter().zip(&self.placement.pools) {
            let indexed = self
                .machine
                .on_pool_cpus(pool, || shard.index_buffer(&policy, max_rows));
            match indexed {
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
        let mut write_error = self.shards.iter().enumerate().find_map(|(index, shard)| {
            shard.write_failure().map(|cause| {
                format!(
                    "shard {index} refuses writes: {}",
                    cause.replace(&prefix, "")
                )
            })
        });
        // the other ranks' points count too; ranks that cannot say make the status red
        let others = match self.link.as_ref().map(|link| self.count_others(link, None)) {
            None => 0,
            Some(Ok(others)) => others,
            Some(Err(error)) => {
                write_error.get_or_insert(error.to_string());
                0
            }
        };
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
            points: indexed + buffered + others,
            indexed,
            segments: self.shards.iter().map(Shard::segment_count).sum(),
            stale_segments: self.shards.iter().map(Shard::stale_segment_count).sum(),
            index_ram_bytes: self.shards.iter().map(Shard::index_ram_bytes).sum(),
            disk_bytes: self.shards.iter().map(Shard::segment_file_bytes).sum(),
            optimizer_error: self.maintenance.lock().last_error.clone(),
            write_error,
            placement: self.placement.clone(),
            vectors_tier_error: self.shards.first().and_then(Shard::tier_error),
        }
    }

    /// Points in sealed (indexed) segments and in write buffers.
    pub fn point_counts(&self) -> (usize, usize) {
        self.shards
            .iter()
            .map(Shard::point_counts)
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
    }

    /// The configuration, with the graph config in force now ([`Collection::set_graph`]).
    pub fn config(&self) -> CollectionConfig {
        let mut config = self.config;
        config.storage.graph = self.graph();
        config
    }

    /// The HNSW graph config new segments and write-buffer graphs are built with.
    pub fn graph(&self) -> GraphConfig {
        self.shards
            .first()
            .map_or(self.config.storage.graph, Shard::graph)
    }

    /// Sets the HNSW graph config (Qdrant's `hnsw_config` update), recorded in the
    /// manifest durably before returning. From then on new segments are built with it, and
    /// the optimizer rebuilds the segments built otherwise, one at a time in the background
    /// (the collection is yellow until it is done); searches go on meanwhile.
    pub fn set_graph(&self, fs: &dyn FileSystem, graph: GraphConfig) -> Result<()> {
        graph.validate()?;
        let schema = self.schema.lock();
        let mut config = self.config;
        config.storage.graph = graph;
        let encoded = config.encode_all(&schema, &self.spaces, &self.settings.read());
        manifest::publish(fs, &self.directory, &encoded)?;
        self.shards.iter().for_each(|shard| shard.set_graph(graph));
        drop(schema);
        let Some(link) = &self.link else {
            return Ok(());
        };
        link.ask_all(|| peers::PeerCall::Graph {
            collection: link.name.clone(),
            graph,
        })
        .map(drop)
    }

    /// Checks `point` as an upsert would (its vectors, named ones each apart, and its
    /// payload), storing nothing.
    pub fn check_point(&self, point: &Point) -> Result<()> {
        self.config.prepare(&self.spaces, point.clone()).map(|_| ())
    }

    /// The named vectors (empty for a collection with one unnamed vector).
    pub fn spaces(&self) -> &VectorSpaces {
        &self.spaces
    }

    /// The space a search `using` names: one of the named vectors, or the whole vector of
    /// a collection without them (which has only the unnamed one, `None` or `""`).
    pub(crate) fn space_for(&self, using: Option<&str>) -> Result<SpaceSlice> {
        let unknown = |name: &str| EngineError::InvalidVectors {
            reason: format!("Wrong input: Not existing vector name error: {name}"),
        };
        if !self.spaces.is_named() {
            return match using {
                None | Some("") => Ok(SpaceSlice::whole(self.config.dim, self.config.distance)),
                Some(name) => Err(unknown(name)),
            };
        }
        let name = using.unwrap_or("");
        self.spaces
            .index_of(name)
            .map(|index| self.spaces.slice(index))
            .ok_or_else(|| unknown(name))
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
        let prepared = points
            .into_iter()
            .map(|point| self.config.prepare(&self.spaces, point))
            .collect::<Result<Vec<Point>>>()?;
        match &self.link {
            Some(link) => self.write_linked(link, Operation::Upsert(prepared), wait),
            None => self.write_points(prepared, wait),
        }
    }

    /// [`Collection::upsert`] of points as this collection stores them (read back from it,
    /// or a snapshot of it): each is validated as an upsert is, but kept bit for bit (a
    /// stored Cosine vector normalized again could move in its last bits). Not waited on.
    pub(crate) fn upsert_stored(&self, points: Vec<Point>) -> Result<()> {
        for point in &points {
            self.config.prepare(&self.spaces, point.clone())?;
        }
        match &self.link {
            Some(link) => self.write_linked(link, Operation::Upsert(points), false),
            None => self.write_points(points, false),
        }
    }

    /// Logs and applies the upsert of `points` (validated), each shard's part as one record.
    fn write_points(&self, points: Vec<Point>, wait: bool) -> Result<()> {
        let mut per_shard: Vec<Vec<Point>> = vec![Vec::new(); self.shards.len()];
        for point in points {
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
        let work: Vec<(&Shard, usize, Operation)> = self
            .shards
            .iter()
            .zip(&self.placement.pools)
            .zip(operations)
            .filter_map(|((shard, &pool), operation)| {
                operation.map(|operation| (shard, pool, operation))
            })
            .collect();
        // each shard's append (and what it adds to the write buffer) on its node's CPUs
        let write = |shard: &Shard, pool: usize, operation| {
            self.machine
                .on_pool_cpus(pool, || shard.write(operation, wait))
        };
        if work.len() <= 1 {
            return work
                .into_iter()
                .try_for_each(|(shard, pool, operation)| write(shard, pool, operation));
        }
        std::thread::scope(|scope| {
            let handles: Vec<_> = work
                .into_iter()
                .map(|(shard, pool, operation)| scope.spawn(move || write(shard, pool, operation)))
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().expect("shard writers do not panic"))
                .collect::<Result<Vec<()>>>()
                .map(|_| ())
        })
    }

    /// Logs `operation(ids)` at the points' owners: in the shards of this rank's points
    /// (see [`Collection::write_by_id_here`]) and, when linked, the other ranks' for theirs.
    fn write_by_id(
        &self,
        ids: &[PointId],
        wait: bool,
        operation: impl Fn(Vec<PointId>) -> Operation,
    ) -> Result<()> {
        match &self.link {
            Some(link) => self.write_linked(link, operation(ids.to_vec()), wait),
            None => self.write_by_id_here(ids, wait, operation),
        }
    }

    /// Splits `ids` by shard and logs `operation(ids of that shard)` in each shard that
    /// has any.
    fn write_by_id_here(
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

    /// Deletes every point passing `filter`; returns how many were matched. The matched ids
    /// are logged (not the filter), so replay is deterministic.
    pub fn delete_by_filter(&self, filter: &Filter, wait: bool) -> Result<usize> {
        let ids = self.matching_ids(filter)?;
        self.delete(&ids, wait)?;
        Ok(ids.len())
    }
}
