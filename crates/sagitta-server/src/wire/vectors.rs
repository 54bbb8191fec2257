//! Vector values: a dense list, a map of vector name to vector, and the batch form's
//! list of vectors. Deserialized straight into `Vec<f32>`, never through
//! `serde_json::Value` (a 10,000 × 768 batch would take ~250 MB as a `Value` tree).

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use sagitta_engine::{SparseVector, VectorSpaces};

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
    /// `{"indices": [..], "values": [..]}`, checked and sorted.
    Sparse(SparseVector),
    /// A multi-vector value (a list of lists): not supported.
    Other,
}

/// The rest of a sparse vector's map once its first key `first` was read: `indices` and
/// `values`, nothing else, made into a checked [`SparseVector`].
pub(super) fn sparse_from_map<'de, A: MapAccess<'de>>(
    first: &str,
    mut map: A,
) -> Result<SparseVector, A::Error> {
    let (mut indices, mut values): (Option<Vec<u32>>, Option<Vec<f32>>) = (None, None);
    let mut key = Some(first.to_string());
    while let Some(name) = key {
        match name.as_str() {
            "indices" => indices = Some(map.next_value()?),
            "values" => values = Some(map.next_value()?),
            other => {
                return Err(de::Error::custom(format!(
                    "unknown field `{other}` of a sparse vector, expected `indices` and `values`"
                )))
            }
        }
        key = map.next_key::<String>()?;
    }
    let indices = indices.ok_or_else(|| de::Error::missing_field("indices"))?;
    let values = values.ok_or_else(|| de::Error::missing_field("values"))?;
    SparseVector::new(indices, values)
        .map_err(|reason| de::Error::custom(format!("sparse vector: {reason}")))
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
                let Some(first) = map.next_key::<String>()? else {
                    return Err(de::Error::custom(
                        "an empty map: a sparse vector needs `indices` and `values`",
                    ));
                };
                sparse_from_map(&first, map).map(NamedVector::Sparse)
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
        "Wrong input: `{field}`: a dense vector is expected here; send a list of numbers \
         (multi-vectors are not supported)"
    ))
}

fn not_sparse(field: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Wrong input: `{field}` is a sparse vector; send {{\"indices\": [..], \"values\": [..]}}"
    ))
}

/// A point's stored dense vector and its sparse vectors (see [`sagitta_engine::Point`]).
pub type StoredVectors = (Vec<f32>, Vec<Option<SparseVector>>);

impl VectorInput {
    /// The vectors as the collection stores them: the unnamed one, or with named vectors
    /// `spaces` each dense one in its place and NaNs for those not given
    /// ([`sagitta_engine::spaces`]), and one entry per sparse vector. Errors name `field`.
    pub fn into_stored(self, field: &str, spaces: &VectorSpaces) -> ApiResult<StoredVectors> {
        if !spaces.is_named() {
            return Ok((self.into_default(field)?, Vec::new()));
        }
        let named = match self {
            VectorInput::Dense(values) if spaces.index_of(DEFAULT_VECTOR_NAME).is_some() => {
                vec![(DEFAULT_VECTOR_NAME.to_string(), NamedVector::Dense(values))]
            }
            VectorInput::Dense(_) => {
                return Err(ApiError::bad_request(format!(
                    "Wrong input: `{field}`: the collection has named vectors; send a map of \
                     vector name to vector. Not existing vector name error: "
                )))
            }
            VectorInput::Named(named) => named,
        };
        let mut parts: Vec<Option<Vec<f32>>> = vec![None; spaces.len()];
        let mut sparse = vec![None; spaces.sparse().len()];
        for (name, vector) in named {
            let at = format!("{field}.{name}");
            match (
                spaces.index_of(&name),
                spaces.sparse_index_of(&name),
                vector,
            ) {
                (Some(index), _, NamedVector::Dense(values)) => {
                    let dim = spaces.get(index).map_or(0, |space| space.dim);
                    parts[index] = Some(sized(values, dim, &at)?);
                }
                (_, Some(index), NamedVector::Sparse(vector)) => sparse[index] = Some(vector),
                (None, None, _) => return Err(unknown_vector_name(field, &name)),
                (Some(_), _, _) => return Err(not_dense(&at)),
                (_, Some(_), _) => return Err(not_sparse(&at)),
            }
        }
        let views: Vec<Option<&[f32]>> = parts.iter().map(Option::as_deref).collect();
        Ok((spaces.join(&views), sparse))
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
                        NamedVector::Sparse(_) | NamedVector::Other => {
                            return Err(not_dense(field))
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
        "Wrong input: Not existing vector name error: {name} (`{field}`)"
    ))
}

/// `vectors` of the batch form: a list of vectors, or a map of vector name to such a list.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchVectors {
    Dense(Vec<Vec<f32>>),
    Named(Vec<(String, Vec<NamedVector>)>),
}

impl BatchVectors {
    /// The `rows` stored vectors (see [`VectorInput::into_stored`]); each named list must
    /// hold one vector per id.
    pub fn into_rows(self, rows: usize, spaces: &VectorSpaces) -> ApiResult<Vec<StoredVectors>> {
        let count_error = |field: &str, count: usize| {
            ApiError::bad_request(format!(
                "Wrong input: `{field}` has {count} vectors for {rows} ids"
            ))
        };
        let named = match self {
            BatchVectors::Dense(vectors) if vectors.len() != rows => {
                return Err(count_error("batch.vectors", vectors.len()));
            }
            // the common bulk form: rows as they came, nothing per row to build
            BatchVectors::Dense(vectors) if !spaces.is_named() => {
                return Ok(vectors.into_iter().map(|row| (row, Vec::new())).collect());
            }
            BatchVectors::Dense(vectors) => {
                if spaces.index_of(DEFAULT_VECTOR_NAME).is_none() {
                    return Err(unknown_vector_name("batch.vectors", ""));
                }
                let column = vectors.into_iter().map(NamedVector::Dense).collect();
                vec![(DEFAULT_VECTOR_NAME.to_string(), column)]
            }
            BatchVectors::Named(named) => named,
        };
        let mut points: Vec<VectorInput> = vec![VectorInput::Named(Vec::new()); rows];
        let mut given = false;
        for (name, vectors) in named {
            if vectors.len() != rows {
                return Err(count_error(&format!("batch.vectors.{name}"), vectors.len()));
            }
            given = true;
            for (point, vector) in points.iter_mut().zip(vectors) {
                if let VectorInput::Named(parts) = point {
                    parts.push((name.clone(), vector));
                }
            }
        }
        if !given && !spaces.is_named() {
            return Err(ApiError::bad_request(
                "Wrong input: `batch.vectors`: no vectors given",
            ));
        }
        points
            .into_iter()
            .enumerate()
            .map(|(row, point)| point.into_stored(&format!("batch.vectors[{row}]"), spaces))
            .collect()
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
                    named.push((name, map.next_value::<Vec<NamedVector>>()?));
                }
                Ok(BatchVectors::Named(named))
            }
        }
        deserializer.deserialize_any(BatchVisitor)
    }
}
