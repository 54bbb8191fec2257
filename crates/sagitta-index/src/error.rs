//! Typed errors. Every variant names the field or parameter at fault and the reason.

/// Errors returned by index operations. Operational failures never panic.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IndexError {
    #[error("vector dimension error: expected dim {expected}, got {received}")]
    WrongVectorDimension { expected: usize, received: usize },
    #[error("parameter `{name}` = {value} is outside the allowed range {min}..={max}")]
    ParameterOutOfRange {
        name: &'static str,
        value: usize,
        min: usize,
        max: usize,
    },
    #[error("vector at row {row} has a non-finite value (NaN or Inf) at position {position}")]
    NonFiniteValue { row: usize, position: usize },
    #[error("`ids` has {received} entries but {expected} vectors were given")]
    WrongIdCount { expected: usize, received: usize },
    #[error("id {id} is reserved (it marks an empty result slot)")]
    ReservedId { id: u64 },
    #[error("id {id} is already in the index")]
    DuplicateId { id: u64 },
    #[error("index is full: capacity {capacity} points (reserve more before adding)")]
    CapacityExceeded { capacity: usize },
    #[error("unknown metric `{name}`: expected one of cosine, dot, l2")]
    UnknownMetric { name: String },
    #[error("unknown quantization `{name}`: expected one of none, sq8")]
    UnknownQuantization { name: String },
    #[error("index file is not valid: {reason}")]
    Format { reason: String },
    #[error("`add` cancelled (AddProgress::cancel) before every row was linked")]
    Cancelled,
    #[error(
        "the index keeps its vectors outside its file (on disk); {operation} needs them in \
         memory"
    )]
    VectorsElsewhere { operation: &'static str },
    #[error("the index has no SQ8 codes to search on (unquantized or untrained)")]
    NoCodes,
    #[error("I/O error while {operation}: {message}")]
    Io {
        operation: &'static str,
        message: String,
    },
}

impl IndexError {
    pub(crate) fn format(reason: impl Into<String>) -> Self {
        IndexError::Format {
            reason: reason.into(),
        }
    }
}

pub type Result<T, E = IndexError> = std::result::Result<T, E>;
