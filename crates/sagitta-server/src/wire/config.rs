//! Collection requests: create (`PUT /collections/{c}`), update (`PATCH`) and payload
//! index creation, with the hand-written dispatch their alternatives need so that an
//! error names the field (`vectors.distance`), never "did not match any variant".
//!
//! `hnsw_config`'s `m` and `ef_construct` are honoured ([`super::graph`]). The other
//! storage and tuning settings (the rest of `hnsw_config`, `quantization_config`,
//! `wal_config`, most of `optimizers_config`, `on_disk_payload`, index `is_tenant` /
//! `on_disk`) are checked for shape and accepted as the hints they are: SagittaDB keeps
//! its own SQ8 rescoring and storage layout, and answers the same points either way.
//! Everything that would change what a request does is honoured or refused.

use std::collections::BTreeMap;
use std::fmt;

use sagitta_engine::collection::{MAX_PAGE_CACHE_MB, MAX_PARTITION_SIZE, MIN_PARTITION_SIZE};
use sagitta_engine::machine::{Placement, MAX_NODE_ID};
use sagitta_engine::{
    Datatype, Distance, GraphConfig, MultiSpace, SegmentKindName, SideSpace, SparseSpace,
    StorageConfig, VectorSpace, VectorSpaces,
};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::fields::{refuse_value, unknown_field};
use super::graph::{resolve, GraphDiff};
use super::DEFAULT_VECTOR_NAME;
use crate::error::{ApiError, ApiResult};

/// The fields of Qdrant's `VectorParams`.
const VECTOR_PARAMS: &[&str] = &[
    "size",
    "distance",
    "hnsw_config",
    "quantization_config",
    "on_disk",
    "datatype",
    "multivector_config",
];

/// `vectors` of a create request: `{size, distance, ..}`, or a map of vector name to that
/// (only `""` exists). A map whose first key is a `VectorParams` field is the first form.
pub enum VectorsConfigInput {
    Single(VectorParamsInput),
    Named(Vec<(String, VectorParamsInput)>),
}

/// The parts of `VectorParams` SagittaDB keeps; the hints are checked and dropped.
pub struct VectorParamsInput {
    pub size: usize,
    pub distance: Distance,
    pub datatype: Datatype,
    /// `on_disk`: HNSW segments keep their full vectors in records files.
    pub on_disk: bool,
    /// `multivector_config` given: each value is a multivector of rows of `size`.
    pub multi: bool,
    /// `hnsw_config`'s `m` and `ef_construct` (over the collection's).
    pub graph: GraphDiff,
}

/// `multivector_config`: max_sim, Qdrant's only comparator.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MultivectorInput {
    comparator: Comparator,
}

#[derive(Deserialize)]
enum Comparator {
    #[serde(rename = "max_sim")]
    MaxSim,
}

#[derive(Default)]
struct ParamsBuilder {
    size: Option<usize>,
    distance: Option<Distance>,
    datatype: Option<Datatype>,
    on_disk: Option<bool>,
    multi: bool,
    graph: GraphDiff,
}

impl ParamsBuilder {
    /// Reads the value of `key`, a field of `VectorParams`.
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "size" => self.size = Some(map.next_value()?),
            "distance" => self.distance = Some(map.next_value::<DistanceInput>()?.0),
            "hnsw_config" => {
                let given = map.next_value::<Option<HnswConfigInput>>()?;
                self.graph = GraphDiff::of(given.as_ref());
            }
            "quantization_config" => {
                map.next_value::<Option<QuantizationInput>>()?;
            }
            "on_disk" => self.on_disk = map.next_value::<Option<bool>>()?,
            "datatype" => {
                self.datatype = map
                    .next_value::<Option<DatatypeInput>>()?
                    .map(|kept| kept.0);
            }
            "multivector_config" => {
                let config = map.next_value::<Option<MultivectorInput>>()?;
                self.multi = config.is_some_and(|c| matches!(c.comparator, Comparator::MaxSim));
            }
            _ => return Err(refuse_value(map, unknown_field(key, VECTOR_PARAMS))),
        }
        Ok(())
    }

    fn finish<E: de::Error>(self) -> Result<VectorParamsInput, E> {
        Ok(VectorParamsInput {
            size: self.size.ok_or_else(|| E::missing_field("size"))?,
            distance: self.distance.ok_or_else(|| E::missing_field("distance"))?,
            datatype: self.datatype.unwrap_or_default(),
            on_disk: self.on_disk.unwrap_or(false),
            multi: self.multi,
            graph: self.graph,
        })
    }
}

impl<'de> Deserialize<'de> for VectorParamsInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<VectorParamsInput, D::Error> {
        struct ParamsVisitor;
        impl<'de> Visitor<'de> for ParamsVisitor {
            type Value = VectorParamsInput;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("vector parameters {\"size\", \"distance\", ..}")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<VectorParamsInput, A::Error> {
                let mut builder = ParamsBuilder::default();
                while let Some(key) = map.next_key::<String>()? {
                    builder.read(&key, &mut map)?;
                }
                builder.finish()
            }
        }
        deserializer.deserialize_map(ParamsVisitor)
    }
}

impl<'de> Deserialize<'de> for VectorsConfigInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<VectorsConfigInput, D::Error> {
        struct VectorsVisitor;
        impl<'de> Visitor<'de> for VectorsVisitor {
            type Value = VectorsConfigInput;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "vector parameters {\"size\", \"distance\", ..}, or a map of vector name \
                     to them",
                )
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<VectorsConfigInput, A::Error> {
                let Some(first) = map.next_key::<String>()? else {
                    return Ok(VectorsConfigInput::Named(Vec::new()));
                };
                if VECTOR_PARAMS.contains(&first.as_str()) {
                    let mut builder = ParamsBuilder::default();
                    builder.read(&first, &mut map)?;
                    while let Some(key) = map.next_key::<String>()? {
                        builder.read(&key, &mut map)?;
                    }
                    return builder.finish().map(VectorsConfigInput::Single);
                }
                let mut named = vec![(first, map.next_value::<VectorParamsInput>()?)];
                while let Some(name) = map.next_key::<String>()? {
                    let params = map.next_value::<VectorParamsInput>()?;
                    named.push((name, params));
                }
                Ok(VectorsConfigInput::Named(named))
            }
        }
        deserializer.deserialize_map(VectorsVisitor)
    }
}

/// `distance`: Cosine, Dot or Euclid (Qdrant's Manhattan is refused).
struct DistanceInput(Distance);

impl<'de> Deserialize<'de> for DistanceInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<DistanceInput, D::Error> {
        let name = String::deserialize(deserializer)?;
        Distance::from_name(&name)
            .map(DistanceInput)
            .map_err(de::Error::custom)
    }
}

/// `datatype`: "float32", or "float16" (every stored value rounded to half precision, as
/// Qdrant does; disk segments keep 2-byte records). "uint8" is refused.
struct DatatypeInput(Datatype);

impl<'de> Deserialize<'de> for DatatypeInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<DatatypeInput, D::Error> {
        let name = String::deserialize(deserializer)?;
        if let Some(datatype) = Datatype::parse(&name) {
            return Ok(DatatypeInput(datatype));
        }
        match name.as_str() {
            "uint8" => Err(de::Error::custom(
                "datatype \"uint8\" is not supported; vectors are stored as float32 or float16",
            )),
            other => Err(de::Error::custom(format!(
                "unknown variant `{other}`, expected one of `float32`, `float16`, `uint8`"
            ))),
        }
    }
}

/// `hnsw_config`: `m` and `ef_construct` are honoured ([`super::graph`]); the rest are
/// hints.
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct HnswConfigInput {
    pub m: Option<u64>,
    pub ef_construct: Option<u64>,
    pub full_scan_threshold: Option<u64>,
    pub max_indexing_threads: Option<u64>,
    pub on_disk: Option<bool>,
    pub payload_m: Option<u64>,
    pub inline_storage: Option<bool>,
}

/// `wal_config` (a hint: each shard keeps its own log).
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct WalConfigInput {
    pub wal_capacity_mb: Option<u64>,
    pub wal_segments_ahead: Option<u64>,
    pub wal_retain_closed: Option<u64>,
}

/// `quantization_config`: `{"scalar": ..}`, `{"product": ..}`, `{"binary": ..}`, or (on
/// update) `"Disabled"` — a hint: searches walk an SQ8 graph and re-score on float32.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuantizationInput {
    Scalar(ScalarQuantizationInput),
    Product(ProductQuantizationInput),
    Binary(BinaryQuantizationInput),
    #[serde(rename = "Disabled")]
    Disabled,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalarQuantizationInput {
    #[serde(rename = "type")]
    pub kind: ScalarType,
    #[serde(default)]
    pub quantile: Option<f64>,
    #[serde(default)]
    pub always_ram: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScalarType {
    Int8,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProductQuantizationInput {
    pub compression: Compression,
    #[serde(default)]
    pub always_ram: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    X4,
    X8,
    X16,
    X32,
    X64,
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct BinaryQuantizationInput {
    pub always_ram: Option<bool>,
    pub encoding: Option<BinaryEncoding>,
    pub query_encoding: Option<BinaryQueryEncoding>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryEncoding {
    OneBit,
    TwoBits,
    OneAndHalfBits,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BinaryQueryEncoding {
    Default,
    Binary,
    Scalar4bits,
    Scalar8bits,
}

/// `optimizers_config`. `indexing_threshold` and `max_optimization_threads` are echoed
/// by `GET /collections/{c}`; the rest are hints (the engine's optimizer has its own
/// policy).
#[derive(Deserialize, Default, Clone)]
#[serde(default, deny_unknown_fields)]
pub struct OptimizersInput {
    pub deleted_threshold: Option<f64>,
    pub vacuum_min_vector_number: Option<u64>,
    pub default_segment_number: Option<u64>,
    #[serde(alias = "max_segment_size_kb")]
    pub max_segment_size: Option<u64>,
    #[serde(alias = "memmap_threshold_kb")]
    pub memmap_threshold: Option<u64>,
    pub indexing_threshold: Option<u64>,
    pub flush_interval_sec: Option<u64>,
    pub max_optimization_threads: Option<OptimizationThreads>,
    pub prevent_unoptimized: Option<bool>,
}

/// `max_optimization_threads`: a count, or `"auto"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptimizationThreads {
    Count(u64),
    Auto,
}

impl OptimizationThreads {
    /// As `GET` reports it: a count, or null for automatic.
    pub fn echoed(self) -> Option<u64> {
        match self {
            OptimizationThreads::Count(count) => Some(count),
            OptimizationThreads::Auto => None,
        }
    }
}

impl<'de> Deserialize<'de> for OptimizationThreads {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<OptimizationThreads, D::Error> {
        struct ThreadsVisitor;
        impl Visitor<'_> for ThreadsVisitor {
            type Value = OptimizationThreads;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of threads or \"auto\"")
            }
            fn visit_u64<E: de::Error>(self, count: u64) -> Result<OptimizationThreads, E> {
                Ok(OptimizationThreads::Count(count))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<OptimizationThreads, E> {
                match text {
                    "auto" => Ok(OptimizationThreads::Auto),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
        }
        deserializer.deserialize_any(ThreadsVisitor)
    }
}

/// `PUT /collections/{c}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateCollectionRequest {
    #[serde(default)]
    pub vectors: Option<VectorsConfigInput>,
    #[serde(default)]
    pub shard_number: Option<usize>,
    #[serde(default)]
    pub sharding_method: Option<String>,
    #[serde(default)]
    pub replication_factor: Option<u64>,
    #[serde(default)]
    pub write_consistency_factor: Option<u64>,
    #[serde(default)]
    pub on_disk_payload: Option<bool>,
    #[serde(default)]
    pub hnsw_config: Option<HnswConfigInput>,
    #[serde(default)]
    pub wal_config: Option<WalConfigInput>,
    #[serde(default)]
    pub optimizers_config: Option<OptimizersInput>,
    #[serde(default)]
    pub quantization_config: Option<QuantizationInput>,
    #[serde(default)]
    pub sparse_vectors: Option<Map<String, Value>>,
    #[serde(default)]
    pub strict_mode_config: Option<crate::settings::StrictMode>,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    /// SagittaDB's extension: how sealed segments store their vectors.
    #[serde(default)]
    pub sagitta: Option<SagittaStorageInput>,
}

/// `sagitta` in a collection's config (a SagittaDB extension; Qdrant clients never send
/// it): `segment_kind` "hnsw" (graph and vectors in RAM, the default) or "disk" (RaBitQ
/// codes in RAM, vectors read from disk), `page_cache_mb`, the RAM for hot pages of
/// disk segments, `partition_size`, the vectors a disk segment's partition aims at,
/// `placement`, how shards spread over NUMA nodes ("spread" or "node:K"), and
/// `vectors_tier`, where HNSW segments keep their full vectors ("local-dram", the
/// default, or "far": each shard's nearest memory-only node; disk is `vectors.on_disk`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SagittaStorageInput {
    #[serde(default)]
    pub segment_kind: Option<String>,
    #[serde(default)]
    pub page_cache_mb: Option<usize>,
    #[serde(default)]
    pub partition_size: Option<usize>,
    #[serde(default)]
    pub placement: Option<String>,
    #[serde(default)]
    pub vectors_tier: Option<String>,
}

impl SagittaStorageInput {
    fn checked(self) -> ApiResult<StorageConfig> {
        let mut storage = StorageConfig::default();
        if let Some(name) = self.segment_kind {
            storage.segment_kind = SegmentKindName::parse(&name).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Wrong input: `sagitta.segment_kind` = {name:?}: expected \"hnsw\" or \"disk\""
                ))
            })?;
        }
        if let Some(megabytes) = self.page_cache_mb {
            if megabytes > MAX_PAGE_CACHE_MB {
                return Err(ApiError::bad_request(format!(
                    "Wrong input: `sagitta.page_cache_mb` = {megabytes}: must be at most \
                     {MAX_PAGE_CACHE_MB}"
                )));
            }
            storage.page_cache_mb = megabytes;
        }
        if let Some(size) = self.partition_size {
            if !(MIN_PARTITION_SIZE..=MAX_PARTITION_SIZE).contains(&size) {
                return Err(ApiError::bad_request(format!(
                    "Wrong input: `sagitta.partition_size` = {size}: must be between \
                     {MIN_PARTITION_SIZE} and {MAX_PARTITION_SIZE}"
                )));
            }
            storage.partition_size = size;
        }
        if let Some(name) = self.placement {
            storage.placement = Placement::parse(&name).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Wrong input: `sagitta.placement` = {name:?}: expected \"spread\" or \
                     \"node:K\" with K at most {MAX_NODE_ID}"
                ))
            })?;
        }
        if let Some(tier) = self.vectors_tier {
            storage.vectors_far = match tier.as_str() {
                "local-dram" => false,
                "far" => true,
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "Wrong input: `sagitta.vectors_tier` = {tier:?}: expected \
                         \"local-dram\" or \"far\" (disk is `vectors.on_disk`)"
                    )))
                }
            };
        }
        Ok(storage)
    }
}

/// The collection's vector (dimension and distance), shard count and storage, checked;
/// with named vectors, `spaces` lists them and `dim`/`distance` are the first one's
/// (the engine's configuration comes from [`sagitta_engine::CollectionConfig::named`]).
pub struct CreateCollectionConfig {
    pub dim: usize,
    pub distance: Distance,
    pub shard_count: usize,
    pub storage: StorageConfig,
    pub spaces: VectorSpaces,
}

/// `sparse_vectors.{name}`: `modifier` ("idf" or "none") is kept; `index` holds hints
/// (the inverted index is in RAM, exact and built with each segment) that are checked
/// and dropped.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SparseParamsInput {
    #[serde(default)]
    modifier: Option<String>,
    /// Checked as it is read.
    #[serde(default)]
    #[allow(dead_code)]
    index: Option<SparseIndexInput>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SparseIndexInput {
    #[serde(default)]
    full_scan_threshold: Option<usize>,
    #[serde(default)]
    on_disk: Option<bool>,
    #[serde(default)]
    datatype: Option<String>,
}

/// The sparse vectors of `sparse_vectors`, checked, in the order given.
fn sparse_spaces(sparse: Option<Map<String, Value>>) -> ApiResult<Vec<SparseSpace>> {
    let Some(sparse) = sparse else {
        return Ok(Vec::new());
    };
    sparse
        .into_iter()
        .map(|(name, params)| {
            let field = format!("sparse_vectors.{name}");
            let params: SparseParamsInput = serde_json::from_value(params).map_err(|error| {
                ApiError::bad_request(format!("Format error in JSON body: `{field}`: {error}"))
            })?;
            let modifier = params.modifier.as_deref();
            let idf = SparseSpace::idf_of_modifier(modifier).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Wrong input: `{field}.modifier` = {:?}: expected \"idf\" or \"none\"",
                    modifier.unwrap_or_default()
                ))
            })?;
            Ok(SparseSpace { name, idf })
        })
        .collect()
}

/// Named vectors from `vectors: {name: {size, distance, ..}}` and the sparse vectors
/// `sparse`; the map holding only the unnamed vector `""` is the single-vector form
/// (beside sparse vectors, or as a multivector, it is a space named `""`). Vectors with
/// `multivector_config` are multivector spaces. Per-vector storage must agree: one
/// datatype for all, and no `on_disk` (named vectors are kept in RAM segments). The
/// parameters returned are the first dense vector's (none for a collection of sparse
/// vectors or multivectors alone, or of payloads alone: `vectors: {}`).
fn named_spaces(
    named: Vec<(String, VectorParamsInput)>,
    sparse: Vec<SparseSpace>,
) -> ApiResult<(Option<VectorParamsInput>, VectorSpaces)> {
    let datatype = named
        .first()
        .map_or(Datatype::Float32, |(_, params)| params.datatype);
    let mut spaces = Vec::with_capacity(named.len());
    let mut side: Vec<SideSpace> = Vec::new();
    for (name, params) in &named {
        if params.on_disk {
            return Err(ApiError::bad_request(format!(
                "Wrong input: `vectors.{name}.on_disk`: named vectors are kept in RAM; \
             on_disk is supported for a collection with one unnamed vector"
            )));
        }
        if params.datatype != datatype {
            return Err(ApiError::bad_request(format!(
                "Wrong input: `vectors.{name}.datatype`: every named vector of a collection \
             must have the same datatype"
            )));
        }
        if params.multi {
            side.push(SideSpace::Multi(MultiSpace {
                name: name.clone(),
                dim: params.size,
                distance: params.distance,
            }));
            continue;
        }
        spaces.push(VectorSpace {
            name: name.clone(),
            dim: params.size,
            distance: params.distance,
        });
    }
    side.extend(sparse.into_iter().map(SideSpace::Sparse));
    let spaces =
        VectorSpaces::with_side(spaces, side, sagitta_engine::collection::MAX_DIMENSION)
            .map_err(|error| ApiError::bad_request(format!("Wrong input: `vectors`: {error}")))?;
    let first_dense = named.into_iter().find(|(_, params)| !params.multi);
    Ok((first_dense.map(|(_, params)| params), spaces))
}

/// Each dense vector's `hnsw_config` diff, named by its field.
fn dense_vector_graphs(vectors: Option<&VectorsConfigInput>) -> Vec<(String, GraphDiff)> {
    match vectors {
        None => Vec::new(),
        Some(VectorsConfigInput::Single(params)) if !params.multi => {
            vec![("vectors.hnsw_config".to_string(), params.graph)]
        }
        Some(VectorsConfigInput::Single(_)) => Vec::new(),
        Some(VectorsConfigInput::Named(named)) => named
            .iter()
            .filter(|(_, params)| !params.multi)
            .map(|(name, params)| (format!("vectors.{name}.hnsw_config"), params.graph))
            .collect(),
    }
}

impl CreateCollectionRequest {
    /// The settings the engine keeps; refuses those it cannot honour, naming the field.
    pub fn checked(self, max_shards: usize) -> ApiResult<CreateCollectionConfig> {
        let vector_graphs = dense_vector_graphs(self.vectors.as_ref());
        let graph = resolve(
            sagitta_engine::DEFAULT_GRAPH,
            GraphDiff::of(self.hnsw_config.as_ref()),
            &vector_graphs,
        )?;
        let sparse = sparse_spaces(self.sparse_vectors)?;
        let (vectors, spaces) = match self.vectors {
            None if sparse.is_empty() => {
                return Err(ApiError::bad_request(
                    "Wrong input: `vectors` is required ({\"size\", \"distance\"}) unless \
                     the collection has `sparse_vectors`",
                ))
            }
            None => named_spaces(Vec::new(), sparse)?,
            Some(VectorsConfigInput::Single(params)) if sparse.is_empty() && !params.multi => {
                (Some(params), VectorSpaces::default())
            }
            Some(VectorsConfigInput::Single(params)) => {
                named_spaces(vec![(DEFAULT_VECTOR_NAME.to_string(), params)], sparse)?
            }
            Some(VectorsConfigInput::Named(mut named))
                if named.len() == 1
                    && named[0].0 == DEFAULT_VECTOR_NAME
                    && !named[0].1.multi
                    && sparse.is_empty() =>
            {
                (Some(named.remove(0).1), VectorSpaces::default())
            }
            Some(VectorsConfigInput::Named(named)) => named_spaces(named, sparse)?,
        };
        if vectors.as_ref().is_some_and(|params| params.size == 0) {
            return Err(ApiError::bad_request(
                "Wrong input: `vectors.size` must be at least 1",
            ));
        }
        let shard_count = checked_shards(
            self.sharding_method.as_deref(),
            self.shard_number,
            max_shards,
            (self.replication_factor, self.write_consistency_factor),
        )?;
        let mut storage = match self.sagitta {
            Some(input) => input.checked()?,
            None => StorageConfig::default(),
        };
        // a sparse-only collection stores no dense values: its width is 0
        let vectors = vectors.unwrap_or(VectorParamsInput {
            size: 0,
            distance: Distance::Dot,
            datatype: Datatype::Float32,
            on_disk: false,
            multi: false,
            graph: GraphDiff::default(),
        });
        storage.datatype = vectors.datatype;
        storage.vectors_on_disk = vectors.on_disk;
        storage.graph = graph;
        Ok(CreateCollectionConfig {
            dim: vectors.size,
            distance: vectors.distance,
            shard_count,
            storage,
            spaces,
        })
    }
}

/// The shard count of a new collection: `shard_number` (1 by default, at most
/// `max_shards`), sharded by id hash, one copy of each shard.
fn checked_shards(
    sharding_method: Option<&str>,
    shard_number: Option<usize>,
    max_shards: usize,
    (replication_factor, write_consistency_factor): (Option<u64>, Option<u64>),
) -> ApiResult<usize> {
    if let Some(method) = sharding_method {
        if method != "auto" {
            return Err(ApiError::bad_request(format!(
                "Wrong input: `sharding_method` = {method:?}: only \"auto\" is supported \
                 (points are sharded by id hash)"
            )));
        }
    }
    single_copy("replication_factor", replication_factor)?;
    single_copy("write_consistency_factor", write_consistency_factor)?;
    let shard_count = shard_number.unwrap_or(1);
    if shard_count == 0 || shard_count > max_shards {
        return Err(ApiError::bad_request(format!(
            "Wrong input: `shard_number` = {shard_count}: must be 1..={max_shards}"
        )));
    }
    Ok(shard_count)
}

/// Replication settings: a single node keeps one copy, so only 1 can be honoured.
fn single_copy(field: &str, value: Option<u64>) -> ApiResult<()> {
    match value {
        None | Some(1) => Ok(()),
        Some(other) => Err(ApiError::bad_request(format!(
            "Wrong input: `{field}` = {other}: SagittaDB runs on one node and keeps one copy \
             of each shard; only 1 is supported"
        ))),
    }
}

/// `PATCH /collections/{c}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateCollectionRequest {
    #[serde(default)]
    pub vectors: Option<BTreeMap<String, VectorParamsDiffInput>>,
    #[serde(default)]
    pub optimizers_config: Option<OptimizersInput>,
    #[serde(default)]
    pub params: Option<CollectionParamsDiffInput>,
    #[serde(default)]
    pub hnsw_config: Option<HnswConfigInput>,
    #[serde(default)]
    pub quantization_config: Option<QuantizationInput>,
    #[serde(default)]
    pub sparse_vectors: Option<Map<String, Value>>,
    #[serde(default)]
    pub strict_mode_config: Option<crate::settings::StrictMode>,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
}

/// A vector's updatable settings (all hints).
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct VectorParamsDiffInput {
    pub hnsw_config: Option<HnswConfigInput>,
    pub quantization_config: Option<QuantizationInput>,
    pub on_disk: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct CollectionParamsDiffInput {
    pub replication_factor: Option<u64>,
    pub write_consistency_factor: Option<u64>,
    pub read_fan_out_factor: Option<u64>,
    pub read_fan_out_delay_ms: Option<u64>,
    pub on_disk_payload: Option<bool>,
}

/// What a `PATCH /collections/{c}` changes: the optimizer settings to echo, and the graph
/// config when it differs from the collection's.
pub struct CollectionUpdate {
    pub optimizers: Option<OptimizersInput>,
    pub graph: Option<GraphConfig>,
}

impl UpdateCollectionRequest {
    /// Refuses what cannot be honoured (vector names the collection, with named vectors
    /// `spaces` and graph config `current`, does not have among them; graph configs out
    /// of range or differing between vectors).
    pub fn checked(
        self,
        spaces: &VectorSpaces,
        current: GraphConfig,
    ) -> ApiResult<CollectionUpdate> {
        if let Some(vectors) = &self.vectors {
            let known = |name: &String| {
                if spaces.is_named() {
                    spaces.index_of(name).is_some() || spaces.multi_index_of(name).is_some()
                } else {
                    name == DEFAULT_VECTOR_NAME
                }
            };
            if let Some(name) = vectors.keys().find(|name| !known(name)) {
                return Err(super::unknown_vector_name("vectors", name));
            }
        }
        for given in sparse_spaces(self.sparse_vectors)? {
            let field = format!("sparse_vectors.{}", given.name);
            let Some(index) = spaces.sparse_index_of(&given.name) else {
                return Err(super::unknown_vector_name("sparse_vectors", &given.name));
            };
            if spaces.side()[index].as_sparse().map(|space| space.idf) != Some(given.idf) {
                return Err(ApiError::bad_request(format!(
                    "Wrong input: `{field}.modifier`: a sparse vector's modifier is set when \
                     the collection is created and cannot be changed"
                )));
            }
        }
        if let Some(params) = &self.params {
            single_copy("params.replication_factor", params.replication_factor)?;
            single_copy(
                "params.write_consistency_factor",
                params.write_consistency_factor,
            )?;
        }
        let vector_graphs: Vec<(String, GraphDiff)> = self
            .vectors
            .iter()
            .flatten()
            .map(|(name, diff)| {
                let field = if name.is_empty() {
                    "vectors.\"\".hnsw_config".to_string()
                } else {
                    format!("vectors.{name}.hnsw_config")
                };
                (field, GraphDiff::of(diff.hnsw_config.as_ref()))
            })
            .collect();
        let graph = resolve(
            current,
            GraphDiff::of(self.hnsw_config.as_ref()),
            &vector_graphs,
        )?;
        Ok(CollectionUpdate {
            optimizers: self.optimizers_config,
            graph: (graph != current).then_some(graph),
        })
    }
}

/// `PUT /collections/{c}/index`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateIndexRequest {
    pub field_name: String,
    #[serde(default)]
    pub field_schema: Option<serde_json::Value>,
}
