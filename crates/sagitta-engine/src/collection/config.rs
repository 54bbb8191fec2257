//! A collection's configuration and its encoding in the collection manifest, and the
//! engine's limits on what a request may hold (one place; ranges checked with the index's
//! check).

use crate::error::{EngineError, Result};
use crate::payload_index::{check_field_name, FieldType, PayloadSchema};
use crate::point::{Distance, Point};

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
    pub(super) fn validate(&self) -> Result<()> {
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
    pub(super) fn encode(&self, schema: &PayloadSchema) -> Vec<u8> {
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

    pub(super) fn decode(bytes: &[u8]) -> Option<(CollectionConfig, PayloadSchema)> {
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
