//! Vector values: a dense list, a map of vector name to vector, and the batch form's
//! list of vectors. Deserialized straight into `Vec<f32>`, never through
//! `serde_json::Value` (a 10,000 × 768 batch would take ~250 MB as a `Value` tree).

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use sagitta_engine::VectorSpaces;

use super::DEFAULT_VECTOR_NAME;
use crate::error::{ApiError, ApiResult};

/// A vector field: a dense list, or a map of vector name to vector (checked against the
/// collection's named vectors by [`VectorInput::into_stored`]).
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

/// A named vector's values, checked against its size.
fn sized(values: Vec<f32>, dim: usize, field: &str) -> ApiResult<Vec<f32>> {
    if values.len() != dim {
        return Err(ApiError::bad_request(format!(
            "Wrong input: Vector dimension error: expected dim: {dim}, got {} (`{field}`)",
            values.len()
        )));
    }
    Ok(values)
}

fn not_dense(field: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Wrong input: `{field}`: sparse and multi-vectors are not supported; send a list of \
         numbers"
    ))
}

impl VectorInput {
    /// The vector as the collection stores it: the unnamed one, or with named vectors
    /// `spaces` each named one in its place and NaNs for those not given
    /// ([`sagitta_engine::spaces`]). Errors name `field`.
    pub fn into_stored(self, field: &str, spaces: &VectorSpaces) -> ApiResult<Vec<f32>> {
        if !spaces.is_named() {
            return self.into_default(field);
        }
        let named = match self {
            VectorInput::Dense(_) => {
                return Err(ApiError::bad_request(format!(
                    "Wrong input: `{field}`: the collection has named vectors; send a map of \
                     vector name to vector. Not existing vector name error: "
                )))
            }
            VectorInput::Named(named) => named,
        };
        let mut parts: Vec<Option<Vec<f32>>> = vec![None; spaces.len()];
        for (name, vector) in named {
            let index = spaces
                .index_of(&name)
                .ok_or_else(|| unknown_vector_name(field, &name))?;
            let NamedVector::Dense(values) = vector else {
                return Err(not_dense(&format!("{field}.{name}")));
            };
            let dim = spaces.get(index).map_or(0, |space| space.dim);
            parts[index] = Some(sized(values, dim, &format!("{field}.{name}"))?);
        }
        let views: Vec<Option<&[f32]>> = parts.iter().map(Option::as_deref).collect();
        Ok(spaces.join(&views))
    }

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
                        NamedVector::Other => return Err(not_dense(field)),
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
        "Wrong input: Not existing vector name error: {name} (`{field}`)"
    ))
}

/// `vectors` of the batch form: a list of vectors, or a map of vector name to such a list.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchVectors {
    Dense(Vec<Vec<f32>>),
    Named(Vec<(String, Vec<Vec<f32>>)>),
}

impl BatchVectors {
    /// The `rows` stored vectors (see [`VectorInput::into_stored`]); each named list must
    /// hold one vector per id.
    pub fn into_rows(self, rows: usize, spaces: &VectorSpaces) -> ApiResult<Vec<Vec<f32>>> {
        let count_error = |field: &str, count: usize| {
            ApiError::bad_request(format!(
                "Wrong input: `{field}` has {count} vectors for {rows} ids"
            ))
        };
        let named = match self {
            BatchVectors::Dense(vectors) if !spaces.is_named() => {
                if vectors.len() != rows {
                    return Err(count_error("batch.vectors", vectors.len()));
                }
                return Ok(vectors);
            }
            BatchVectors::Dense(_) => {
                return Err(unknown_vector_name("batch.vectors", ""));
            }
            BatchVectors::Named(named) => named,
        };
        let mut columns: Vec<Option<Vec<Vec<f32>>>> = vec![None; spaces.len().max(1)];
        for (name, vectors) in named {
            let field = format!("batch.vectors.{name}");
            if vectors.len() != rows {
                return Err(count_error(&field, vectors.len()));
            }
            if !spaces.is_named() {
                if name != DEFAULT_VECTOR_NAME {
                    return Err(unknown_vector_name("batch.vectors", &name));
                }
                columns[0] = Some(vectors);
                continue;
            }
            let index = spaces
                .index_of(&name)
                .ok_or_else(|| unknown_vector_name("batch.vectors", &name))?;
            let dim = spaces.get(index).map_or(0, |space| space.dim);
            let checked = vectors
                .into_iter()
                .enumerate()
                .map(|(row, values)| sized(values, dim, &format!("{field}[{row}]")))
                .collect::<ApiResult<Vec<_>>>()?;
            columns[index] = Some(checked);
        }
        if !spaces.is_named() {
            return columns[0].take().ok_or_else(|| {
                ApiError::bad_request("Wrong input: `batch.vectors`: no vectors given")
            });
        }
        Ok((0..rows)
            .map(|row| {
                let views: Vec<Option<&[f32]>> = columns
                    .iter()
                    .map(|column| column.as_ref().map(|vectors| vectors[row].as_slice()))
                    .collect();
                spaces.join(&views)
            })
            .collect())
    }
}

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
                Ok(BatchVectors::Dense(rows))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BatchVectors, A::Error> {
                let mut named = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    let rows: Vec<Dense> = map.next_value()?;
                    named.push((name, rows.into_iter().map(|Dense(row)| row).collect()));
                }
                Ok(BatchVectors::Named(named))
            }
        }
        deserializer.deserialize_any(BatchVisitor)
    }
}
