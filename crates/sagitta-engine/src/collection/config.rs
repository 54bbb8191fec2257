//! A collection's configuration and its encoding in the collection manifest, and the
//! engine's limits on what a request may hold (one place; ranges checked with the index's
//! check).

use sagitta_storage::codec::{DecodeError, Reader, Writer};

pub(crate) use crate::error::check_range;
use crate::error::{EngineError, Result};
use crate::fulltext::{TextIndex, Tokenizer};
use crate::graph::{GraphConfig, DEFAULT_GRAPH};
use crate::machine::{Placement, MAX_NODE_ID};
use crate::payload_index::{check_field_name, FieldType, PayloadSchema, MAX_INDEXED_FIELDS};
use crate::point::{Distance, Point, SideVector};
pub use crate::segment::SegmentKindName;
use crate::spaces::{SideSpace, VectorSpaces};

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

const CONFIG_VERSION: u8 = 12;
/// The version before the vectors' far memory tier was recorded (read as local DRAM).
const CONFIG_VERSION_NO_TIER: u8 = 11;
/// The version before the shard placement was recorded (read as spread).
const CONFIG_VERSION_NO_PLACEMENT: u8 = 10;
/// The version before the graph config was recorded (read as m 16, ef_construct 100).
const CONFIG_VERSION_FIXED_GRAPH: u8 = 9;
/// The version before the collection's settings document was recorded (read as none).
const CONFIG_VERSION_NO_SETTINGS: u8 = 8;
/// The version before sparse vectors were recorded (read as none).
const CONFIG_VERSION_DENSE_ONLY: u8 = 7;
/// The version before named vectors were recorded (read as none: one unnamed vector).
const CONFIG_VERSION_UNNAMED: u8 = 6;
/// The version before `vectors.on_disk` was recorded (read as false: vectors in RAM).
const CONFIG_VERSION_VECTORS_IN_RAM: u8 = 5;
/// The version before the partition size was recorded (read as the default, 1,000).
const CONFIG_VERSION_FIXED_PARTITIONS: u8 = 4;
/// The version before the datatype was recorded (read as float32).
const CONFIG_VERSION_FLOAT32: u8 = 3;
/// The version before segment storage was recorded (read as HNSW segments, default cache).
const CONFIG_VERSION_HNSW_ONLY: u8 = 2;

/// Most stripe directories (besides a collection's own) its records files spread over.
pub const MAX_STRIPE_DIRS: usize = crate::segment::MAX_STRIPES - 1;

/// Largest page cache a collection may ask for, in MiB (1 TiB).
pub const MAX_PAGE_CACHE_MB: usize = 1 << 20;

/// Vectors a disk segment's partition aims at: the default, and the range a collection may
/// ask for (a partition is scanned whole, and its records read by need).
pub const DEFAULT_PARTITION_SIZE: usize = 1_000;
pub const MIN_PARTITION_SIZE: usize = 2;
pub const MAX_PARTITION_SIZE: usize = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectionConfig {
    pub dim: usize,
    pub distance: Distance,
    pub shard_count: usize,
    /// How sealed segments keep their vectors (a SagittaDB extension of Qdrant's config).
    pub storage: StorageConfig,
}

/// Where a collection's sealed vectors live and how much RAM their reads may cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StorageConfig {
    pub segment_kind: SegmentKindName,
    /// MiB of hot records pages the collection's disk segments keep in RAM (CLOCK).
    pub page_cache_mb: usize,
    /// The precision vectors are kept at (Qdrant's `vectors.datatype`).
    pub datatype: Datatype,
    /// Vectors a disk segment's partition aims at (builds; appends split a partition
    /// past twice this).
    pub partition_size: usize,
    /// Qdrant's `vectors.on_disk`: HNSW segments keep their full vectors in a records file
    /// read through the page cache (RAM: the graph and its SQ8 codes). Disk segments keep
    /// them on disk either way.
    pub vectors_on_disk: bool,
    /// The HNSW graph of HNSW segments and write-buffer graphs (Qdrant's `hnsw_config`). A
    /// collection's value may change after creation ([`crate::Collection::set_graph`]).
    pub graph: GraphConfig,
    /// How the shards are spread over the machine's NUMA nodes ([`crate::machine`]).
    pub placement: Placement,
    /// HNSW segments keep their full vectors on each shard's far memory tier (the nearest
    /// memory-only NUMA node, [`crate::machine::ShardPlacement::far_nodes`]) instead of
    /// its local DRAM; the graph, its codes and the write buffer stay local. A machine
    /// without a memory-only node keeps them local (collection info says so).
    pub vectors_far: bool,
}

impl Default for StorageConfig {
    fn default() -> StorageConfig {
        StorageConfig {
            segment_kind: SegmentKindName::Hnsw,
            page_cache_mb: 64,
            datatype: Datatype::Float32,
            partition_size: DEFAULT_PARTITION_SIZE,
            vectors_on_disk: false,
            graph: DEFAULT_GRAPH,
            placement: Placement::Spread,
            vectors_far: false,
        }
    }
}

/// The precision a collection keeps its vectors at (Qdrant's `vectors.datatype`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Datatype {
    #[default]
    Float32,
    /// Every stored value is rounded to the nearest IEEE half (as Qdrant's `float16`
    /// does), in every segment kind alike; disk segments keep 2-byte records, so their
    /// records file and the bytes a query reads are halved.
    Float16,
}

impl Datatype {
    pub fn name(self) -> &'static str {
        match self {
            Datatype::Float32 => "float32",
            Datatype::Float16 => "float16",
        }
    }

    /// `None` for names this build does not keep (Qdrant's `uint8` among them).
    pub fn parse(name: &str) -> Option<Datatype> {
        match name {
            "float32" => Some(Datatype::Float32),
            "float16" => Some(Datatype::Float16),
            _ => None,
        }
    }

    fn code(self) -> u8 {
        match self {
            Datatype::Float32 => 0,
            Datatype::Float16 => 1,
        }
    }

    fn from_code(code: u8) -> Option<Datatype> {
        match code {
            0 => Some(Datatype::Float32),
            1 => Some(Datatype::Float16),
            _ => None,
        }
    }

    /// The element type of a disk segment's records.
    pub(crate) fn element(self) -> sagitta_index::disk::Element {
        match self {
            Datatype::Float32 => sagitta_index::disk::Element::F32,
            Datatype::Float16 => sagitta_index::disk::Element::F16,
        }
    }
}

impl StorageConfig {
    /// The storage fields of a collection manifest of `version` (defaults for the fields
    /// older versions lack).
    fn decode(reader: &mut Reader, version: u8) -> Result<StorageConfig, DecodeError> {
        if version < CONFIG_VERSION_FLOAT32 {
            return Ok(StorageConfig::default());
        }
        Ok(StorageConfig {
            segment_kind: reader.code("segment_kind", SegmentKindName::from_code)?,
            page_cache_mb: reader.u32("page_cache_mb")? as usize,
            datatype: if version >= CONFIG_VERSION_FIXED_PARTITIONS {
                reader.code("datatype", Datatype::from_code)?
            } else {
                Datatype::Float32
            },
            partition_size: if version >= CONFIG_VERSION_VECTORS_IN_RAM {
                reader.u32("partition_size")? as usize
            } else {
                DEFAULT_PARTITION_SIZE
            },
            vectors_on_disk: version >= CONFIG_VERSION_UNNAMED
                && reader.code("vectors_on_disk", |code| match code {
                    0 => Some(false),
                    1 => Some(true),
                    _ => None,
                })?,
            graph: if version > CONFIG_VERSION_FIXED_GRAPH {
                GraphConfig {
                    m: reader.u32("hnsw_m")? as usize,
                    ef_construct: reader.u32("hnsw_ef_construct")? as usize,
                }
            } else {
                DEFAULT_GRAPH
            },
            placement: if version > CONFIG_VERSION_NO_PLACEMENT {
                decode_placement(reader)?
            } else {
                Placement::Spread
            },
            vectors_far: version > CONFIG_VERSION_NO_TIER
                && reader.code("vectors_tier", |code| match code {
                    0 => Some(false),
                    1 => Some(true),
                    _ => None,
                })?,
        })
    }
}

/// A placement: its kind (0 spread, 1 one node) and the node id (0 for spread).
fn decode_placement(reader: &mut Reader) -> Result<Placement, DecodeError> {
    let one_node = reader.code("placement", |code| match code {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    })?;
    let at = reader.offset();
    let node = reader.u32("placement_node")? as usize;
    if node > MAX_NODE_ID {
        return Err(Reader::invalid_at(
            at,
            "placement_node",
            format!("node {node} is over {MAX_NODE_ID}"),
        ));
    }
    Ok(if one_node {
        Placement::Node(node)
    } else {
        Placement::Spread
    })
}

fn encode_placement(placement: Placement, out: &mut Writer) {
    let (code, node) = match placement {
        Placement::Spread => (0, 0),
        Placement::Node(node) => (1, node),
    };
    out.u8(code).len_u32(node, "validated node id");
}

impl CollectionConfig {
    pub(crate) fn validate(&self) -> Result<()> {
        // a collection of sparse vectors alone stores no dense values
        let min_dim = usize::from(self.storage.segment_kind != SegmentKindName::Spaces);
        check_range("dim", self.dim, min_dim, MAX_DIMENSION)?;
        check_range("shard_number", self.shard_count, 1, MAX_SHARDS)?;
        check_range(
            "sagitta.page_cache_mb",
            self.storage.page_cache_mb,
            0,
            MAX_PAGE_CACHE_MB,
        )?;
        check_range(
            "sagitta.partition_size",
            self.storage.partition_size,
            MIN_PARTITION_SIZE,
            MAX_PARTITION_SIZE,
        )?;
        self.storage.graph.validate()?;
        let far_with = if self.storage.segment_kind == SegmentKindName::Disk {
            "disk segments, which read their vectors from disk"
        } else if self.storage.vectors_on_disk {
            "`vectors.on_disk`"
        } else if self.storage.segment_kind == SegmentKindName::Spaces {
            "named vectors (not supported yet)"
        } else {
            return Ok(());
        };
        if self.storage.vectors_far {
            return Err(EngineError::InvalidVectors {
                reason: format!("`sagitta.vectors_tier` far cannot be combined with {far_with}"),
            });
        }
        Ok(())
    }

    /// A vector must have the collection's dimension, finite values and a norm of at most
    /// [`MAX_VECTOR_NORM`]; errors name `name()` (a point id, or "query").
    pub fn check_vector(&self, vector: &[f32], name: impl Fn() -> String) -> Result<()> {
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

    /// A configuration for named vectors `spaces`: their total size, stored in
    /// [`SegmentKindName::Spaces`] segments, the rest as `self`.
    pub fn named(&self, spaces: &VectorSpaces) -> CollectionConfig {
        CollectionConfig {
            dim: spaces.total_dim(),
            distance: spaces.get(0).map_or(self.distance, |space| space.distance),
            storage: StorageConfig {
                segment_kind: SegmentKindName::Spaces,
                ..self.storage
            },
            ..*self
        }
    }

    /// Validates and normalizes one point (Cosine vectors are stored unit-length). With
    /// named vectors `spaces`, each space's part is checked and normalized apart; a part
    /// the point does not have is NaNs throughout ([`crate::spaces`]).
    pub(crate) fn prepare(&self, spaces: &VectorSpaces, point: Point) -> Result<Point> {
        if let Some(payload) = &point.payload {
            check_payload(&point.id.to_string(), payload)?;
        }
        let mut point = point;
        prepare_side(spaces, &mut point)?;
        if spaces.is_named() {
            prepare_named(self, spaces, &mut point)?;
        } else if self.prepare_absent(&mut point)? {
            return Ok(point);
        } else {
            self.check_vector(&point.vector, || EngineError::point(&point.id))?;
            if self.distance == Distance::Cosine {
                normalize(&mut point.vector);
            }
        }
        if self.storage.datatype == Datatype::Float16 {
            for value in &mut point.vector {
                *value = half::f16::from_f32(*value).to_f32();
            }
        }
        Ok(point)
    }

    /// Whether `point` (of a collection with one unnamed vector) is without its vector:
    /// given empty or as NaNs only, it is stored as `dim` NaNs ([`crate::spaces`]: a NaN
    /// first value means "absent"), a point no search finds until a vector is written for
    /// it. Disk segments partition every point by its vector, so their collections refuse
    /// such points.
    fn prepare_absent(&self, point: &mut Point) -> Result<bool> {
        let absent = point.vector.is_empty()
            || (point.vector.len() == self.dim && point.vector.iter().all(|v| v.is_nan()));
        if !absent {
            return Ok(false);
        }
        if self.storage.segment_kind == SegmentKindName::Disk {
            return Err(EngineError::InvalidVectors {
                reason: format!(
                    "point {} has no vector, which a collection of disk segments does not \
                     support (they partition points by their vectors)",
                    EngineError::point(&point.id)
                ),
            });
        }
        point.vector = vec![f32::NAN; self.dim];
        Ok(true)
    }

    /// Checks that `spaces` fit this configuration: named vectors are stored side by side
    /// (`dim` is their total) in segments of the kind that indexes each apart, kept in
    /// RAM; a collection without them cannot use that kind.
    pub(crate) fn check_spaces(&self, spaces: &VectorSpaces) -> Result<()> {
        let named = spaces.is_named();
        let invalid = |reason: &str| {
            Err(EngineError::InvalidVectors {
                reason: reason.to_string(),
            })
        };
        if named && self.dim != spaces.total_dim() {
            return invalid("the stored width differs from the named vectors' total size");
        }
        if named != (self.storage.segment_kind == SegmentKindName::Spaces) {
            return invalid(if named {
                "named vectors are kept in RAM segments: `sagitta.segment_kind` must be left unset"
            } else {
                "segment kind `spaces` is for collections with named vectors"
            });
        }
        if named && self.storage.vectors_on_disk {
            return invalid("`on_disk` vectors are not supported with named vectors yet");
        }
        Ok(())
    }

    /// The manifest of a collection without named vectors ([`CollectionConfig::encode_with`]).
    #[cfg(test)]
    pub(super) fn encode(&self, schema: &PayloadSchema) -> Vec<u8> {
        self.encode_with(schema, &VectorSpaces::default())
    }

    /// The collection manifest without a settings document ([`CollectionConfig::encode_all`]).
    pub(super) fn encode_with(&self, schema: &PayloadSchema, spaces: &VectorSpaces) -> Vec<u8> {
        self.encode_all(schema, spaces, "")
    }

    /// The collection manifest: configuration, payload schema, named vectors and the
    /// settings document (docs/format.md).
    pub(super) fn encode_all(
        &self,
        schema: &PayloadSchema,
        spaces: &VectorSpaces,
        settings: &str,
    ) -> Vec<u8> {
        let mut out = Writer::new();
        out.u8(CONFIG_VERSION)
            .u8(self.distance.code())
            .len_u32(self.dim, "validated dim")
            .len_u32(self.shard_count, "validated shard count")
            .u8(self.storage.segment_kind.code())
            .len_u32(self.storage.page_cache_mb, "validated page cache")
            .u8(self.storage.datatype.code())
            .len_u32(self.storage.partition_size, "validated partition size")
            .u8(u8::from(self.storage.vectors_on_disk))
            .len_u32(self.storage.graph.m, "validated m")
            .len_u32(self.storage.graph.ef_construct, "validated ef_construct");
        encode_placement(self.storage.placement, &mut out);
        out.u8(u8::from(self.storage.vectors_far));
        out.len_u32(schema.len(), "bounded field count");
        for (field, kind) in schema {
            out.u8(kind.code()).str_u16(field, "bounded field name");
            if let FieldType::Text(settings) = kind {
                encode_text_index(settings, &mut out);
            }
        }
        spaces.encode_into(&mut out);
        out.str_u32(settings, "bounded settings");
        out.into_bytes()
    }

    /// The configuration and named vectors as a collection manifest holds them (without
    /// payload schema or settings): how a scale-out job sends a new collection to every
    /// rank ([`CollectionConfig::from_bytes`] reads it back).
    pub fn to_bytes(&self, spaces: &VectorSpaces) -> Vec<u8> {
        self.encode_with(&PayloadSchema::new(), spaces)
    }

    /// Reads [`CollectionConfig::to_bytes`]'s bytes; errors name the byte and the field.
    pub fn from_bytes(bytes: &[u8]) -> Result<(CollectionConfig, VectorSpaces), DecodeError> {
        CollectionConfig::try_decode_with(bytes).map(|(config, _, spaces, _)| (config, spaces))
    }

    /// [`CollectionConfig::try_decode_with`] without the named vectors.
    #[cfg(test)]
    pub(super) fn try_decode(
        bytes: &[u8],
    ) -> Result<(CollectionConfig, PayloadSchema), DecodeError> {
        CollectionConfig::try_decode_with(bytes).map(|(config, schema, ..)| (config, schema))
    }

    /// Decodes a collection manifest, which must take every byte; a malformed one is an
    /// error naming the byte offset and the field.
    pub(super) fn try_decode_with(bytes: &[u8]) -> Result<Decoded, DecodeError> {
        let mut reader = Reader::new(bytes);
        let version = reader.version_u8_of(
            "config_version",
            "collection config",
            &[
                CONFIG_VERSION_HNSW_ONLY,
                CONFIG_VERSION_FLOAT32,
                CONFIG_VERSION_FIXED_PARTITIONS,
                CONFIG_VERSION_VECTORS_IN_RAM,
                CONFIG_VERSION_UNNAMED,
                CONFIG_VERSION_DENSE_ONLY,
                CONFIG_VERSION_NO_SETTINGS,
                CONFIG_VERSION_FIXED_GRAPH,
                CONFIG_VERSION_NO_PLACEMENT,
                CONFIG_VERSION_NO_TIER,
                CONFIG_VERSION,
            ],
        )?;
        let distance = reader.code("distance", Distance::from_code)?;
        let dim = reader.u32("dim")? as usize;
        let shard_count = reader.u32("shard_count")? as usize;
        let storage = StorageConfig::decode(&mut reader, version)?;
        let config = CollectionConfig {
            distance,
            dim,
            shard_count,
            storage,
        };
        config.validate().map_err(|error| {
            Reader::invalid_at(2, "dim, shard_count and storage", error.to_string())
        })?;
        let schema = read_schema(&mut reader)?;
        let spaces = if version >= CONFIG_VERSION_DENSE_ONLY {
            let at = reader.offset();
            let with_sparse = version >= CONFIG_VERSION_NO_SETTINGS;
            let spaces = VectorSpaces::decode(&mut reader, MAX_DIMENSION, with_sparse)?;
            config
                .check_spaces(&spaces)
                .map_err(|error| Reader::invalid_at(at, "named vectors", error.to_string()))?;
            spaces
        } else {
            VectorSpaces::default()
        };
        let settings = read_settings(&mut reader, version)?;
        reader.expect_end("end of collection config")?;
        Ok((config, schema, spaces, settings))
    }
}

/// A decoded collection manifest: configuration, payload schema, named vectors and the
/// settings document.
pub(super) type Decoded = (CollectionConfig, PayloadSchema, VectorSpaces, String);

/// The payload schema of a manifest: a count, then each field's type code and name (a
/// text index's settings after its name).
fn read_schema(reader: &mut Reader) -> Result<PayloadSchema, DecodeError> {
    let count_at = reader.offset();
    let count = reader.u32("field_count")?;
    if count as usize > MAX_INDEXED_FIELDS {
        // writes never index more (create_payload_index refuses the 65th field)
        return Err(Reader::invalid_at(
            count_at,
            "field_count",
            format!("{count} indexed fields, more than {MAX_INDEXED_FIELDS}"),
        ));
    }
    let mut schema = PayloadSchema::new();
    for _ in 0..count {
        let mut kind = reader.code("field type", FieldType::from_code)?;
        let at = reader.offset();
        let field = reader.str_u16("field name")?;
        check_field_name(field)
            .map_err(|error| Reader::invalid_at(at, "field name", error.to_string()))?;
        if let FieldType::Text(settings) = &mut kind {
            *settings = decode_text_index(reader)?;
        }
        if schema.insert(field.to_string(), kind).is_some() {
            return Err(Reader::invalid_at(
                at,
                "field name",
                format!("{field:?} twice"),
            ));
        }
    }
    Ok(schema)
}

/// A text index's settings after its field name: tokenizer code u8, flags u8 (bit 0
/// lowercase, bit 1 phrase_matching), min and max token length u16 each (0: no bound).
fn encode_text_index(settings: &TextIndex, out: &mut Writer) {
    let flags = u8::from(settings.lowercase) | (u8::from(settings.phrase_matching) << 1);
    out.u8(settings.tokenizer.code())
        .u8(flags)
        .u16(settings.min_token_len.unwrap_or(0))
        .u16(settings.max_token_len.unwrap_or(0));
}

fn decode_text_index(reader: &mut Reader) -> Result<TextIndex, DecodeError> {
    let tokenizer = reader.code("text tokenizer", Tokenizer::from_code)?;
    let at = reader.offset();
    let flags = reader.u8("text flags")?;
    if flags > 0b11 {
        return Err(Reader::invalid_at(
            at,
            "text flags",
            format!("unknown bits {flags:#b}"),
        ));
    }
    let bound = |length: u16| (length > 0).then_some(length);
    let at = reader.offset();
    let settings = TextIndex {
        tokenizer,
        lowercase: flags & 1 != 0,
        phrase_matching: flags & 2 != 0,
        min_token_len: bound(reader.u16("min token length")?),
        max_token_len: bound(reader.u16("max token length")?),
    };
    settings
        .check()
        .map_err(|reason| Reader::invalid_at(at, "token lengths", reason))?;
    Ok(settings)
}

/// The settings document at the end of a manifest of `version`, checked (none before
/// they were recorded).
fn read_settings(reader: &mut Reader, version: u8) -> Result<String, DecodeError> {
    if version <= CONFIG_VERSION_NO_SETTINGS {
        return Ok(String::new());
    }
    let at = reader.offset();
    let text = reader.str_u32("settings")?.to_string();
    check_settings(&text).map_err(|error| Reader::invalid_at(at, "settings", error.to_string()))?;
    Ok(text)
}

/// Largest settings document, in bytes.
pub const MAX_SETTINGS_BYTES: usize = 64 << 10;

/// A settings document is empty (none) or a JSON object of at most
/// [`MAX_SETTINGS_BYTES`].
pub(crate) fn check_settings(text: &str) -> Result<()> {
    let invalid = |reason: String| EngineError::InvalidSettings { reason };
    if text.len() > MAX_SETTINGS_BYTES {
        return Err(invalid(format!(
            "collection settings of {} bytes, over the limit of {MAX_SETTINGS_BYTES}",
            text.len()
        )));
    }
    if !text.is_empty() && !matches!(serde_json::from_str(text), Ok(serde_json::Value::Object(_))) {
        return Err(invalid(
            "collection settings must be a JSON object".to_string(),
        ));
    }
    Ok(())
}

/// Checks a point's side vectors against the collection's side spaces: at most one per
/// space, each of its space's kind, a multivector's rows of the space's width (Cosine
/// rows stored unit-length); the list is then padded with `None` to one per space.
fn prepare_side(spaces: &VectorSpaces, point: &mut Point) -> Result<()> {
    let count = spaces.side().len();
    let point_name = EngineError::point(&point.id);
    let invalid = |reason: String| EngineError::InvalidVectors { reason };
    if point.side.len() > count {
        return Err(invalid(format!(
            "{point_name} has {} sparse or multi vectors; the collection has {count}",
            point.side.len()
        )));
    }
    point.side.resize(count, None);
    for (space, vector) in spaces.side().iter().zip(&mut point.side) {
        let Some(given) = vector.take() else {
            continue;
        };
        *vector = Some(match (space, given) {
            (SideSpace::Sparse(_), given @ SideVector::Sparse(_)) => given,
            (SideSpace::Multi(multi), SideVector::Multi(given)) => {
                if given.dim() != multi.dim {
                    return Err(EngineError::WrongVectorDimension {
                        point: format!("{point_name}, vector {:?}", multi.name),
                        expected: multi.dim,
                        received: given.dim(),
                    });
                }
                SideVector::Multi(if multi.distance == Distance::Cosine {
                    given.normalized()
                } else {
                    given
                })
            }
            (space, _) => {
                let kind = if space.as_sparse().is_some() {
                    "a sparse vector"
                } else {
                    "a multivector"
                };
                return Err(invalid(format!(
                    "{point_name}: vector {:?} must be {kind}",
                    space.name()
                )));
            }
        });
    }
    Ok(())
}

/// [`CollectionConfig::prepare`] of a point with named vectors.
fn prepare_named(
    config: &CollectionConfig,
    spaces: &VectorSpaces,
    point: &mut Point,
) -> Result<()> {
    if point.vector.len() != config.dim {
        return Err(EngineError::WrongVectorDimension {
            point: EngineError::point(&point.id),
            expected: config.dim,
            received: point.vector.len(),
        });
    }
    for (index, space) in spaces.iter().enumerate() {
        let offset = spaces.offset(index);
        let part = &mut point.vector[offset..offset + space.dim];
        if part[0].is_nan() {
            if part.iter().all(|value| value.is_nan()) {
                continue;
            }
            return Err(EngineError::NonFiniteValue {
                point: format!("{} vector {:?}", EngineError::point(&point.id), space.name),
                position: 0,
            });
        }
        let check = CollectionConfig {
            dim: space.dim,
            ..*config
        };
        check.check_vector(part, || {
            format!("{} vector {:?}", EngineError::point(&point.id), space.name)
        })?;
        if space.distance == Distance::Cosine {
            normalize(part);
        }
    }
    Ok(())
}

/// A payload must be a JSON object of at most [`MAX_PAYLOAD_BYTES`].
pub(super) fn check_payload(point: &str, payload: &str) -> Result<()> {
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

pub(super) fn normalize(vector: &mut [f32]) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_bytes_are_the_documented_layout_and_round_trip() {
        let config = CollectionConfig {
            dim: 3,
            distance: Distance::Dot,
            shard_count: 2,
            storage: StorageConfig {
                segment_kind: SegmentKindName::Disk,
                page_cache_mb: 128,
                datatype: Datatype::Float16,
                partition_size: 300,
                vectors_on_disk: true,
                graph: GraphConfig {
                    m: 24,
                    ef_construct: 300,
                },
                placement: Placement::Node(3),
                vectors_far: false,
            },
        };
        let schema = PayloadSchema::from([("a.b".to_string(), FieldType::Integer)]);
        let bytes = config.encode(&schema);
        let mut expected = vec![CONFIG_VERSION, 1, 3, 0, 0, 0, 2, 0, 0, 0];
        expected.extend_from_slice(&[1, 128, 0, 0, 0, 1, 44, 1, 0, 0, 1]);
        expected.extend_from_slice(&[24, 0, 0, 0, 44, 1, 0, 0]); // m, ef_construct
        expected.extend_from_slice(&[1, 3, 0, 0, 0]); // placement: node 3
        expected.push(0); // vectors tier: local DRAM
        expected.extend_from_slice(&[1, 0, 0, 0, 1, 3, 0, b'a', b'.', b'b']);
        expected.extend_from_slice(&[0, 0, 0, 0]); // no named vectors
        expected.extend_from_slice(&[0, 0, 0, 0]); // no sparse vectors
        expected.push(0); // one unnamed vector, not a map
        expected.extend_from_slice(&[0, 0, 0, 0]); // no settings document
        assert_eq!(bytes, expected);
        assert_eq!(
            CollectionConfig::try_decode(&bytes).ok(),
            Some((config, schema.clone()))
        );
        // with a settings document, which must be a JSON object
        let settings = r#"{"metadata":{"owner":"x"}}"#;
        let with_settings = config.encode_all(&schema, &VectorSpaces::default(), settings);
        let decoded = CollectionConfig::try_decode_with(&with_settings).unwrap();
        assert_eq!(decoded.3, settings);
        let mut not_object = with_settings.clone();
        let at = not_object.len() - settings.len();
        not_object[at] = b'[';
        let error = CollectionConfig::try_decode_with(&not_object)
            .unwrap_err()
            .to_string();
        assert!(error.contains("settings"), "{error}");
        // the far tier (of an HNSW collection with vectors in RAM) is byte 34
        let far = CollectionConfig {
            storage: StorageConfig {
                vectors_far: true,
                ..StorageConfig::default()
            },
            ..config
        };
        let far_bytes = far.encode(&schema);
        assert_eq!(far_bytes[34], 1);
        assert_eq!(
            CollectionConfig::try_decode(&far_bytes).ok(),
            Some((far, schema.clone()))
        );
        // a version 11 manifest (before the vectors tier was recorded): local DRAM
        let mut eleven = expected.clone();
        eleven[0] = CONFIG_VERSION_NO_TIER;
        eleven.remove(34);
        assert_eq!(
            CollectionConfig::try_decode(&eleven).map_err(|e| e.to_string()),
            Ok((config, schema.clone()))
        );
        // a version 10 manifest (before the placement was recorded): spread
        let mut ten = eleven.clone();
        ten[0] = CONFIG_VERSION_NO_PLACEMENT;
        ten.drain(29..34);
        let config = CollectionConfig {
            storage: StorageConfig {
                placement: Placement::Spread,
                ..config.storage
            },
            ..config
        };
        assert_eq!(
            CollectionConfig::try_decode(&ten).map_err(|e| e.to_string()),
            Ok((config, schema.clone()))
        );
        // an unknown placement kind and a node id out of range are refused by name
        for (at, value, field) in [
            (29, 2, "placement"),
            (33, 9, "placement_node"),
            (34, 2, "vectors_tier"),
        ] {
            let mut bad = expected.clone();
            bad[at] = value;
            let error = CollectionConfig::try_decode(&bad).unwrap_err().to_string();
            assert!(error.contains(field), "{error}");
        }
        // a version 9 manifest (before the graph config was recorded): Qdrant's defaults
        let mut nine = ten.clone();
        nine[0] = CONFIG_VERSION_FIXED_GRAPH;
        nine.drain(21..29);
        let config = CollectionConfig {
            storage: StorageConfig {
                graph: DEFAULT_GRAPH,
                ..config.storage
            },
            ..config
        };
        assert_eq!(
            CollectionConfig::try_decode(&nine).map_err(|e| e.to_string()),
            Ok((config, schema.clone()))
        );
        // a version 8 manifest (before the settings document was recorded): none
        let mut eight = nine.clone();
        eight[0] = CONFIG_VERSION_NO_SETTINGS;
        eight.truncate(eight.len() - 4);
        assert_eq!(
            CollectionConfig::try_decode(&eight).ok(),
            Some((config, schema.clone()))
        );
        // a version 7 manifest (before sparse vectors were recorded): none
        let mut seven = eight.clone();
        seven[0] = CONFIG_VERSION_DENSE_ONLY;
        seven.truncate(seven.len() - 5);
        assert_eq!(
            CollectionConfig::try_decode(&seven).ok(),
            Some((config, schema.clone()))
        );
        // a version 6 manifest (before named vectors were recorded): none
        let mut six = seven.clone();
        six[0] = CONFIG_VERSION_UNNAMED;
        six.truncate(six.len() - 4);
        assert_eq!(
            CollectionConfig::try_decode(&six).ok(),
            Some((config, schema.clone()))
        );
        // a version 5 manifest (before vectors.on_disk was recorded): in RAM
        let mut five = six.clone();
        five[0] = CONFIG_VERSION_VECTORS_IN_RAM;
        five.remove(20);
        let in_ram = CollectionConfig {
            storage: StorageConfig {
                vectors_on_disk: false,
                ..config.storage
            },
            ..config
        };
        assert_eq!(
            CollectionConfig::try_decode(&five).ok(),
            Some((in_ram, schema.clone()))
        );
        // a version 4 manifest (before the partition size was recorded): 1,000
        let mut four = five.clone();
        four[0] = CONFIG_VERSION_FIXED_PARTITIONS;
        four.drain(16..20);
        let fixed = CollectionConfig {
            storage: StorageConfig {
                partition_size: DEFAULT_PARTITION_SIZE,
                ..in_ram.storage
            },
            ..config
        };
        assert_eq!(
            CollectionConfig::try_decode(&four).ok(),
            Some((fixed, schema.clone()))
        );
        // a version 3 manifest (before the datatype was recorded): float32
        let mut three = four.clone();
        three[0] = CONFIG_VERSION_FLOAT32;
        three.remove(15);
        let float32 = CollectionConfig {
            storage: StorageConfig {
                datatype: Datatype::Float32,
                ..fixed.storage
            },
            ..config
        };
        assert_eq!(
            CollectionConfig::try_decode(&three).ok(),
            Some((float32, schema.clone()))
        );
        // a version 2 manifest (before storage was recorded): HNSW segments, default cache
        let mut old = vec![CONFIG_VERSION_HNSW_ONLY, 1, 3, 0, 0, 0, 2, 0, 0, 0];
        old.extend_from_slice(&[1, 0, 0, 0, 1, 3, 0, b'a', b'.', b'b']);
        let expected_old = CollectionConfig {
            storage: StorageConfig::default(),
            ..config
        };
        assert_eq!(
            CollectionConfig::try_decode(&old).ok(),
            Some((expected_old, schema))
        );
    }

    #[test]
    fn malformed_manifests_name_the_offset_and_field() {
        let config = CollectionConfig {
            dim: 3,
            distance: Distance::Cosine,
            shard_count: 1,
            storage: StorageConfig::default(),
        };
        let schema = PayloadSchema::from([("kind".to_string(), FieldType::Keyword)]);
        let bytes = config.encode(&schema);
        let message = |bytes: &[u8]| CollectionConfig::try_decode(bytes).unwrap_err().to_string();
        assert_eq!(
            message(&bytes[..bytes.len() - 14]),
            "at byte 42: field name: truncated (needs 4 bytes, 3 remain)"
        );
        let mut no_dim = bytes.clone();
        no_dim[2] = 0;
        assert!(message(&no_dim)
            .starts_with("at byte 2: dim, shard_count and storage: parameter `dim`"));
        let mut bad_segments = bytes.clone();
        bad_segments[10] = 7;
        assert_eq!(
            message(&bad_segments),
            "at byte 10: segment_kind: unknown code 7"
        );
        let mut huge_cache = bytes.clone();
        huge_cache[11..15].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(message(&huge_cache).contains("parameter `sagitta.page_cache_mb`"));
        let mut bad_datatype = bytes.clone();
        bad_datatype[15] = 2;
        assert_eq!(
            message(&bad_datatype),
            "at byte 15: datatype: unknown code 2"
        );
        let mut tiny_partitions = bytes.clone();
        tiny_partitions[16..20].copy_from_slice(&1u32.to_le_bytes());
        assert!(message(&tiny_partitions).contains("parameter `sagitta.partition_size`"));
        let mut bad_on_disk = bytes.clone();
        bad_on_disk[20] = 2;
        assert_eq!(
            message(&bad_on_disk),
            "at byte 20: vectors_on_disk: unknown code 2"
        );
        let mut no_links = bytes.clone();
        no_links[21..25].copy_from_slice(&0u32.to_le_bytes());
        assert!(message(&no_links).contains("parameter `hnsw_config.m`"));
        let mut tiny_beam = bytes.clone();
        tiny_beam[25..29].copy_from_slice(&3u32.to_le_bytes());
        assert!(message(&tiny_beam).contains("parameter `hnsw_config.ef_construct`"));
        let mut bad_placement = bytes.clone();
        bad_placement[29] = 2;
        assert_eq!(
            message(&bad_placement),
            "at byte 29: placement: unknown code 2"
        );
        let mut far_node = bytes.clone();
        far_node[30..34].copy_from_slice(&5000u32.to_le_bytes());
        assert_eq!(
            message(&far_node),
            "at byte 30: placement_node: node 5000 is over 1023"
        );
        let mut bad_tier = bytes.clone();
        bad_tier[34] = 2;
        assert_eq!(
            message(&bad_tier),
            "at byte 34: vectors_tier: unknown code 2"
        );
        let mut bad_kind = bytes.clone();
        bad_kind[39] = 9;
        assert_eq!(message(&bad_kind), "at byte 39: field type: unknown code 9");
        let mut empty_part = bytes;
        empty_part[42] = b'.';
        assert!(message(&empty_part).starts_with("at byte 40: field name:"));
        assert!(CollectionConfig::try_decode(&[CONFIG_VERSION]).is_err());
        // named vectors must match the stored width and the segment kind
        let spaces = VectorSpaces::new(
            vec![crate::spaces::VectorSpace {
                name: "text".to_string(),
                dim: 3,
                distance: Distance::Dot,
            }],
            MAX_DIMENSION,
        )
        .unwrap();
        let named = CollectionConfig {
            storage: StorageConfig {
                segment_kind: SegmentKindName::Spaces,
                ..config.storage
            },
            ..config
        };
        let bytes = named.encode_with(&schema, &spaces);
        assert_eq!(
            CollectionConfig::try_decode_with(&bytes).ok(),
            Some((named, schema.clone(), spaces.clone(), String::new()))
        );
        let wider = CollectionConfig { dim: 4, ..named };
        assert!(message(&wider.encode_with(&schema, &spaces))
            .contains("named vectors: the stored width differs"));
        assert!(message(&config.encode_with(&schema, &spaces))
            .contains("`sagitta.segment_kind` must be left unset"));
        assert_eq!(
            message(&[99]),
            format!(
                "at byte 0: config_version: collection config version 99; this build reads \
                 {CONFIG_VERSION_HNSW_ONLY} and {CONFIG_VERSION_FLOAT32} and \
                 {CONFIG_VERSION_FIXED_PARTITIONS} and {CONFIG_VERSION_VECTORS_IN_RAM} and \
                 {CONFIG_VERSION_UNNAMED} and {CONFIG_VERSION_DENSE_ONLY} and \
                 {CONFIG_VERSION_NO_SETTINGS} and {CONFIG_VERSION_FIXED_GRAPH} and \
                 {CONFIG_VERSION_NO_PLACEMENT} and {CONFIG_VERSION_NO_TIER} and \
                 {CONFIG_VERSION}"
            )
        );
    }

    #[test]
    fn a_manifest_never_holds_more_fields_than_writes_allow_nor_one_twice() {
        let config = CollectionConfig {
            dim: 3,
            distance: Distance::Cosine,
            shard_count: 1,
            storage: StorageConfig::default(),
        };
        let message = |bytes: &[u8]| CollectionConfig::try_decode(bytes).unwrap_err().to_string();
        let full: PayloadSchema = (0..MAX_INDEXED_FIELDS)
            .map(|i| (format!("f{i}"), FieldType::Keyword))
            .collect();
        assert_eq!(
            CollectionConfig::try_decode(&config.encode(&full))
                .unwrap()
                .1,
            full
        );
        let mut over = config.encode(&full);
        over[35..39].copy_from_slice(&(MAX_INDEXED_FIELDS as u32 + 1).to_le_bytes());
        over.extend_from_slice(&[1, 1, 0, b'z']);
        assert_eq!(
            message(&over),
            "at byte 35: field_count: 65 indexed fields, more than 64"
        );
        let one = PayloadSchema::from([("kind".to_string(), FieldType::Keyword)]);
        let mut twice = config.encode(&one);
        twice[35..39].copy_from_slice(&2u32.to_le_bytes());
        let no_spaces = twice.split_off(twice.len() - 13);
        twice.extend_from_slice(&[1, 4, 0, b'k', b'i', b'n', b'd']);
        twice.extend_from_slice(&no_spaces);
        assert_eq!(message(&twice), "at byte 47: field name: \"kind\" twice");
    }
}
