//! Engine errors; each names the field or point at fault.

use crate::point::PointId;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    #[error("vector dimension error: point {point}: expected dim {expected}, got {received}")]
    WrongVectorDimension {
        point: String,
        expected: usize,
        received: usize,
    },
    #[error("vector dimension error: `vectors` holds {values} values, not {dim} for each of the {ids} ids")]
    RowsMismatch {
        ids: usize,
        values: usize,
        dim: usize,
    },
    #[error("point {point}: `vector` has a non-finite value (NaN or Inf) at position {position}")]
    NonFiniteValue { point: String, position: usize },
    #[error(
        "point {point}: `vector` has norm {norm:e}, over the limit of {limit:e} (scores \
         between such vectors would overflow 32-bit floats)"
    )]
    VectorNormTooLarge {
        point: String,
        norm: f64,
        limit: f64,
    },
    #[error("point {point}: `payload` is {size} bytes, over the limit of {limit} bytes")]
    PayloadTooLarge {
        point: String,
        size: usize,
        limit: usize,
    },
    #[error("point {point}: `payload` is not a JSON object: {reason}")]
    InvalidPayload { point: String, reason: String },
    #[error("`{path}`: {reason}")]
    InvalidFilter { path: String, reason: String },
    #[error("parameter `{name}` = {value} is outside the allowed range {min}..={max}")]
    ParameterOutOfRange {
        name: &'static str,
        value: usize,
        min: usize,
        max: usize,
    },
    #[error("batch for one shard encodes to {size} bytes, over the limit of {limit}; split it")]
    BatchTooLarge { size: usize, limit: usize },
    #[error(
        "collection name {name:?} is invalid: use 1 to 255 ASCII letters, digits, `_`, `-`, `.`"
    )]
    InvalidCollectionName { name: String },
    #[error("collection already exists at `{path}`")]
    CollectionExists { path: String },
    #[error("no collection at `{path}`")]
    CollectionNotFound { path: String },
    #[error("payload index on field {field:?}: {reason}")]
    InvalidPayloadIndex { field: String, reason: String },
    #[error("alias `{alias}` does not exist")]
    AliasNotFound { alias: String },
    /// A name asked for that a collection or an alias already has, or that is not a valid
    /// name; `reason` says which, in Qdrant's words where it has them.
    #[error("{reason}")]
    NameInUse { reason: String },
    /// A collection's named vectors, or a point's or query's use of them.
    #[error("{reason}")]
    InvalidVectors { reason: String },
    /// A collection settings document that is not a JSON object, or too large.
    #[error("{reason}")]
    InvalidSettings { reason: String },
    /// A snapshot that cannot be read or recovered.
    #[error("snapshot: {reason}")]
    InvalidSnapshot { reason: String },
    #[error("collection data is corrupt: {reason}")]
    Corrupt { reason: String },
    #[error("{operation} cancelled before it finished; nothing was published")]
    Cancelled { operation: &'static str },
    /// Ranks of a scale-out job that refused or did not answer (see
    /// [`crate::collection::peers`]); `reason` names each of them.
    #[error("scale-out: {reason}")]
    Unavailable { reason: String },
    #[error(transparent)]
    Storage(#[from] sagitta_storage::StorageError),
    #[error("segment index: {0}")]
    Index(#[from] sagitta_index::IndexError),
}

impl EngineError {
    pub(crate) fn point(id: &PointId) -> String {
        id.to_string()
    }
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// `value` in `min..=max`, else [`EngineError::ParameterOutOfRange`] naming `name`.
pub(crate) fn check_range(name: &'static str, value: usize, min: usize, max: usize) -> Result<()> {
    sagitta_index::limits::check_range(name, value, min, max).map_err(|_| {
        EngineError::ParameterOutOfRange {
            name,
            value,
            min,
            max,
        }
    })
}
