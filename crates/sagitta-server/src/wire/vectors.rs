//! Vector values: a dense list, a map of vector name to vector, and the batch form's
//! list of vectors. Deserialized straight into `Vec<f32>`, never through
//! `serde_json::Value` (a 10,000 × 768 batch would take ~250 MB as a `Value` tree).

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::DEFAULT_VECTOR_NAME;
use crate::error::{ApiError, ApiResult};

/// A vector field: a dense list, or a map of vector name to vector. Only the unnamed
/// vector (`""`) exists in SagittaDB collections; other names are recorded so the error
/// can name them.
#[derive(Clone, Debug, PartialEq)]
pub enum VectorInput {
    Dense(Vec<f32>),
    Named(Vec<(String, NamedVector)>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum NamedVector {
    Dense(Vec<f32>),
    /// A sparse (`{"indices","values"}`) or multi-vector value: not supported.
    Other,
}

/// A dense vector: a list of numbers, read straight into `Vec<f32>`.
pub(super) struct DenseVisitor;

impl<'de> Visitor<'de> for DenseVisitor {
    type Value = Vec<f32>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of numbers")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<f32>, A::Error> {
        let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(value) = seq.next_element::<f32>()? {
            values.push(value);
        }
        Ok(values)
    }
}

impl<'de> Deserialize<'de> for NamedVector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<NamedVector, D::Error> {
        struct NamedVisitor;
        impl<'de> Visitor<'de> for NamedVisitor {
            type Value = NamedVector;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of numbers or a sparse vector")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<NamedVector, A::Error> {
                let values = DenseVisitor.visit_seq(seq)?;
                Ok(NamedVector::Dense(values))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NamedVector, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(NamedVector::Other)
            }
        }
        deserializer.deserialize_any(NamedVisitor)
    }
}

impl<'de> Deserialize<'de> for VectorInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<VectorInput, D::Error> {
        struct VectorVisitor;
        impl<'de> Visitor<'de> for VectorVisitor {
            type Value = VectorInput;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of numbers, or a map of vector name to vector")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<VectorInput, A::Error> {
                DenseVisitor.visit_seq(seq).map(VectorInput::Dense)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<VectorInput, A::Error> {
                let mut named = Vec::new();
                while let Some((name, vector)) = map.next_entry::<String, NamedVector>()? {
                    named.push((name, vector));
                }
                Ok(VectorInput::Named(named))
            }
        }
        deserializer.deserialize_any(VectorVisitor)
    }
}

impl VectorInput {
    /// The default vector, or an error naming `field` and what was wrong.
    pub fn into_default(self, field: &str) -> ApiResult<Vec<f32>> {
        match self {
            VectorInput::Dense(values) => Ok(values),
            VectorInput::Named(named) => {
                let mut found = None;
                for (name, vector) in named {
                    if name != DEFAULT_VECTOR_NAME {
                        return Err(unknown_vector_name(field, &name));
                    }
                    match vector {
                        NamedVector::Dense(values) => found = Some(values),
                        NamedVector::Other => {
                            return Err(ApiError::bad_request(format!(
                                "Wrong input: `{field}`: sparse and multi-vectors are not \
                                 supported; send a list of numbers"
                            )))
                        }
                    }
                }
                found.ok_or_else(|| {
                    ApiError::bad_request(format!("Wrong input: `{field}`: no vector given"))
                })
            }
        }
    }
}

pub fn unknown_vector_name(field: &str, name: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Wrong input: `{field}`: Not existing vector name error: {name:?}; collections \
         have one unnamed vector (name \"\")"
    ))
}

/// `vectors` of the batch form: a list of vectors, or a map of vector name to such a list.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchVectors(pub Vec<Vec<f32>>);

impl<'de> Deserialize<'de> for BatchVectors {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<BatchVectors, D::Error> {
        #[derive(Deserialize)]
        struct Dense(#[serde(deserialize_with = "dense")] Vec<f32>);
        fn dense<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<f32>, D::Error> {
            deserializer.deserialize_seq(DenseVisitor)
        }
        struct BatchVisitor;
        impl<'de> Visitor<'de> for BatchVisitor {
            type Value = BatchVectors;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of vectors, or a map of vector name to a list of vectors")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<BatchVectors, A::Error> {
                let mut rows = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(Dense(row)) = seq.next_element::<Dense>()? {
                    rows.push(row);
                }
                Ok(BatchVectors(rows))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BatchVectors, A::Error> {
                let mut rows = None;
                while let Some(name) = map.next_key::<String>()? {
                    if name != DEFAULT_VECTOR_NAME {
                        return Err(de::Error::custom(format!(
                            "Not existing vector name error: {name:?}; collections have one \
                             unnamed vector (name \"\")"
                        )));
                    }
                    let BatchVectors(value) = map.next_value()?;
                    rows = Some(value);
                }
                Ok(BatchVectors(rows.unwrap_or_default()))
            }
        }
        deserializer.deserialize_any(BatchVisitor)
    }
}
